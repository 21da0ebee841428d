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

int st_fs_read_file(const char *path, size_t max, struct st_buf *out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    char chunk[65536];
    int rc = 0;
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            rc = -errno;
            break;
        }
        if (n == 0) {
            break;
        }
        if (out->len + (size_t)n > max) {
            rc = ST_ETOOBIG;
            break;
        }
        st_buf_append(out, chunk, (size_t)n);
    }
    close(fd);
    st_buf_str(out);
    return rc;
}

int st_fs_mkdirs(const char *path)
{
    char tmp[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(tmp)) {
        return -ENAMETOOLONG;
    }
    memcpy(tmp, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (tmp[i] != '/' && tmp[i] != '\0') {
            continue;
        }
        char keep = tmp[i];
        tmp[i] = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) {
            return -errno;
        }
        tmp[i] = keep;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        return -errno;
    }
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}
