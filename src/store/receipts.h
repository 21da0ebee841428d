/*
 * Receipts: an append-only JSON Lines file, one object per request, written as each request
 * ends. Several worker threads append to one file: each record is one write(2) of whole lines on
 * an O_APPEND descriptor, so records never interleave. Records reach the kernel at once (no user
 * buffering); st_receipts_sync() makes them durable and runs at the end of a run and on
 * SIGINT/SIGTERM. A write error (ENOSPC, EFBIG) is sticky: later appends fail fast with the same
 * code and the caller stops cleanly. A record that was only partly written when the error came is
 * cut off again (ftruncate back to the end of the last complete record), so the file always ends
 * on a whole line. Appends are serialized by a mutex so that this end is known.
 */
#ifndef ST_STORE_RECEIPTS_H
#define ST_STORE_RECEIPTS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

struct st_receipts {
    int fd;               /* owned; -1 when closed or discarding */
    int error;            /* first write error (negated errno), sticky */
    uint64_t records;     /* appended so far (atomic) */
    uint64_t bytes;       /* file size after the last complete record (under lock) */
    pthread_mutex_t lock; /* serializes writes; initialized while fd >= 0 */
};

/*
 * Creates (truncates) path with mode 0644. path NULL discards records (counting them).
 * Returns 0 or a negated errno.
 */
int st_receipts_open(struct st_receipts *r, const char *path) ST_WUR;
/*
 * Appends lines[0..len): one or more complete JSON lines, each ending in '\n'. Thread-safe.
 * Returns 0 or the sticky negated errno; on an error nothing of lines stays in the file.
 */
int st_receipts_append(struct st_receipts *r, const char *lines, size_t len) ST_WUR;
/* fsync. Returns 0 or a negated errno. */
int st_receipts_sync(struct st_receipts *r) ST_WUR;
/* Syncs and closes. Returns the first error seen (write or close). */
int st_receipts_close(struct st_receipts *r) ST_WUR;

#endif
