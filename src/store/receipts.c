/*
 * Append-only JSONL receipts. See receipts.h.
 */
#include "store/receipts.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "store/fsutil.h"

int st_receipts_open(struct st_receipts *r, const char *path)
{
    r->fd = -1;
    r->error = 0;
    r->records = 0;
    if (!path) {
        return 0;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        return -errno;
    }
    r->fd = fd;
    return 0;
}

int st_receipts_append(struct st_receipts *r, const char *lines, size_t len)
{
    int err = __atomic_load_n(&r->error, __ATOMIC_RELAXED);
    if (err) {
        return err;
    }
    if (r->fd >= 0) {
        /* One write for the whole record keeps concurrent appends from interleaving. A short
         * write on a regular file means the disk is full; the retry then reports ENOSPC. */
        int rc = st_fs_write_all(r->fd, lines, len);
        if (rc) {
            __atomic_store_n(&r->error, rc, __ATOMIC_RELAXED);
            return rc;
        }
    }
    __atomic_add_fetch(&r->records, 1, __ATOMIC_RELAXED);
    return 0;
}

int st_receipts_sync(struct st_receipts *r)
{
    if (r->fd >= 0 && fsync(r->fd) != 0) {
        return -errno;
    }
    return 0;
}

int st_receipts_close(struct st_receipts *r)
{
    int rc = r->error;
    if (r->fd >= 0) {
        int s = st_receipts_sync(r);
        if (!rc) {
            rc = s;
        }
        if (close(r->fd) != 0 && !rc) {
            rc = -errno;
        }
        r->fd = -1;
    }
    return rc;
}
