/*
 * The campaign runner's small I/O helpers, which all its files call (runner.c, rnstage.c,
 * rnunit.c, rnjournal.c, verdict.c): bounded formatting, the progress log, reading a file with a
 * message, writing one into the archive atomically, creating a folder, the stage names, a JSON
 * object begun. A leaf: it calls none of them. Declared in runner_int.h.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "store/fsutil.h"

#include "campaign/runner_int.h"

const char *const st_rn_stage_names[N_STAGES] = {"screening", "full"};

/* snprintf through a va_list: the caller's buffers are large enough for any path the archive
 * makes (PATH_MAX); a longer one is cut, and the open or mkdir that uses it then fails. */
int st_rn_fmt(char *out, size_t len, const char *f, ...) __attribute__((format(printf, 3, 4)));
int st_rn_fmt(char *out, size_t len, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(out, len, f, ap);
    va_end(ap);
    return n < 0 ? 0 : n;
}

void st_rn_say(struct rn *r, const char *f, ...) __attribute__((format(printf, 2, 3)));
void st_rn_say(struct rn *r, const char *f, ...)
{
    if (!r->o->log) {
        return;
    }
    va_list ap;
    va_start(ap, f);
    fputs("campaign: ", r->o->log);
    vfprintf(r->o->log, f, ap);
    fputc('\n', r->o->log);
    fflush(r->o->log);
    va_end(ap);
}

int st_rn_read_file(const char *path, size_t max, struct st_buf *out, char *err, size_t errlen)
{
    int rc = st_fs_read_file(path, max, out);
    if (rc == ST_ETOOBIG) {
        st_rn_fmt(err, errlen, "%s: over %zu bytes", path, max);
    } else if (rc != 0) {
        st_rn_fmt(err, errlen, "%s: %s", path, strerror(-rc));
    }
    return rc;
}

int st_rn_write_file(struct rn *r, const char *rel, const char *data, size_t len)
{
    char path[PATH_MAX];
    st_rn_fmt(path, sizeof(path), "%s/%s", r->out, rel);
    int rc = st_fs_write_atomic(path, data, len, 0644);
    if (rc != 0) {
        st_rn_fmt(r->err, r->errlen, "cannot write %s: %s", path, strerror(-rc));
    }
    return rc;
}

int st_rn_mkdirs(const char *path, char *err, size_t errlen)
{
    int rc = st_fs_mkdirs(path);
    if (rc != 0) {
        st_rn_fmt(err, errlen, "cannot create directory %s: %s", path, strerror(-rc));
    }
    return rc;
}

void st_rn_obj_open(struct st_buf *b, struct st_jw *w)
{
    st_buf_init(b);
    st_jw_init(w, b);
    st_jw_obj_open(w);
}
