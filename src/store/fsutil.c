/*
 * Durable file writes. See fsutil.h.
 */
#include "store/fsutil.h"

#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"

int st_fs_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static void fsync_parent(const char *path)
{
    struct st_buf dir;
    st_buf_init(&dir);
    st_buf_puts(&dir, path);
    const char *d = dirname(dir.data);
    int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        /* Best effort: some filesystems refuse fsync on directories. */
        (void)fsync(fd);
        close(fd);
    }
    st_buf_release(&dir);
}

int st_fs_write_atomic(const char *path, const void *data, size_t len, mode_t mode)
{
    struct st_buf tmp;
    st_buf_init(&tmp);
    st_buf_printf(&tmp, "%s.tmp.%ld", path, (long)getpid());
    int rc = 0;
    int fd = open(tmp.data, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) {
        rc = -errno;
        goto out;
    }
    rc = st_fs_write_all(fd, data, len);
    if (rc == 0 && fsync(fd) != 0) {
        rc = -errno;
    }
    if (close(fd) != 0 && rc == 0) {
        rc = -errno;
    }
    if (rc == 0 && rename(tmp.data, path) != 0) {
        rc = -errno;
    }
    if (rc != 0) {
        unlink(tmp.data);
        goto out;
    }
    fsync_parent(path);
out:
    st_buf_release(&tmp);
    return rc;
}
