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
    r->bytes = 0;
    if (!path) {
        return 0;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        return -errno;
    }
    r->fd = fd;
    pthread_mutex_init(&r->lock, NULL);
    return 0;
}

int st_receipts_append(struct st_receipts *r, const char *lines, size_t len)
{
    int err = __atomic_load_n(&r->error, __ATOMIC_RELAXED);
    if (err) {
        return err;
    }
    if (r->fd >= 0) {
        pthread_mutex_lock(&r->lock);
        int rc = __atomic_load_n(&r->error, __ATOMIC_RELAXED);
        if (!rc) {
            /* A short write on a regular file means the disk is full (or the file size limit
             * was reached); the retry then reports ENOSPC (EFBIG). */
            rc = st_fs_write_all(r->fd, lines, len);
        }
        if (rc) {
            /* Cut a partly written record so that the file ends on a whole line. */
            if (ftruncate(r->fd, (off_t)r->bytes) != 0) {
                /* Nothing better can be done; the first error already stops the run. */
            }
            __atomic_store_n(&r->error, rc, __ATOMIC_RELAXED);
            pthread_mutex_unlock(&r->lock);
            return rc;
        }
        r->bytes += len;
        pthread_mutex_unlock(&r->lock);
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
        pthread_mutex_destroy(&r->lock);
    }
    return rc;
}
