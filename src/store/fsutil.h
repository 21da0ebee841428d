/*
 * File helpers with the project's durability rules: summaries are written to a temporary file in
 * the same directory, fsynced, then renamed over the target (and the directory fsynced), so a
 * reader sees the old file or the new one, never a torn one.
 */
#ifndef ST_STORE_FSUTIL_H
#define ST_STORE_FSUTIL_H

#include <stddef.h>
#include <sys/types.h>

#include "base/status.h"

/*
 * Writes data[0..len) to path atomically with the given mode. Returns 0 or a negated errno
 * (-ENOSPC, -EACCES, ...); on error the target is untouched and no temporary file is left.
 */
int st_fs_write_atomic(const char *path, const void *data, size_t len, mode_t mode) ST_WUR;

/* Writes all of buf to fd, retrying on EINTR and short writes. Returns 0 or a negated errno. */
int st_fs_write_all(int fd, const void *buf, size_t len) ST_WUR;

struct st_buf;
/* Appends the whole file path, at most max bytes, to out (NUL-terminated after it). Returns 0,
 * ST_ETOOBIG (out then holds the first bytes read), or a negated errno. */
int st_fs_read_file(const char *path, size_t max, struct st_buf *out) ST_WUR;

/* Creates directory path and its missing parents with mode 0755; an existing directory is fine.
 * Returns 0, -ENAMETOOLONG, -ENOTDIR (path or a parent is not a directory) or mkdir's errno. */
int st_fs_mkdirs(const char *path) ST_WUR;

#endif
