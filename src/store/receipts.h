/*
 * Receipts: an append-only JSON Lines file, one object per request, written as each request
 * ends. Several worker threads append to one file: each record is one write(2) of whole lines on
 * an O_APPEND descriptor, so records never interleave. Records reach the kernel at once (no user
 * buffering); st_receipts_sync() makes them durable and runs at the end of a run and on
 * SIGINT/SIGTERM. A write error (ENOSPC) is sticky: later appends fail fast with the same code
 * and the caller stops cleanly.
 */
#ifndef ST_STORE_RECEIPTS_H
#define ST_STORE_RECEIPTS_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

struct st_receipts {
    int fd;           /* owned; -1 when closed or discarding */
    int error;        /* first write error (negated errno), sticky */
    uint64_t records; /* appended so far (atomic) */
};

/*
 * Creates (truncates) path with mode 0644. path NULL discards records (counting them).
 * Returns 0 or a negated errno.
 */
int st_receipts_open(struct st_receipts *r, const char *path) ST_WUR;
/*
 * Appends lines[0..len): one or more complete JSON lines, each ending in '\n'. Thread-safe.
 * Returns 0 or the sticky negated errno.
 */
int st_receipts_append(struct st_receipts *r, const char *lines, size_t len) ST_WUR;
/* fsync. Returns 0 or a negated errno. */
int st_receipts_sync(struct st_receipts *r) ST_WUR;
/* Syncs and closes. Returns the first error seen (write or close). */
int st_receipts_close(struct st_receipts *r) ST_WUR;

#endif
