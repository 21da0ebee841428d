/*
 * The arm lifecycle's shared leaf (arm_int.h): the clock and sleeps of its waits, the log and
 * files it reads, one health GET on a reused easy handle and the health wait, the running
 * server's handle, and the small evidence pieces every backend writes. It calls no backend and
 * not arm.c (a backend's alive op is reached through s->ops). Blocking, on the runner's thread.
 */
#include "target/arm_int.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/xalloc.h"
#include "engine/http.h"
#include "store/fsutil.h"
#include "target/server.h"

void st_arm_up_init(struct st_arm_up *up)
{
    memset(up, 0, sizeof(*up));
    st_buf_init(&up->json);
    st_buf_init(&up->log_tail);
}

void st_arm_up_release(struct st_arm_up *up)
{
    st_buf_release(&up->json);
    st_buf_release(&up->log_tail);
    st_arm_up_init(up);
}

void st_arm_up_reset(struct st_arm_up *up)
{
    struct st_buf json = up->json, tail = up->log_tail;
    memset(up, 0, sizeof(*up));
    up->json = json;
    up->log_tail = tail;
    st_buf_clear(&up->json);
    st_buf_clear(&up->log_tail);
}

/* ---- small helpers ---- */

double st_arm_now_s(void)
{
    return (double)st_clock_mono_ns() / 1e9;
}

void st_arm_sleep_s(double s)
{
    if (s <= 0) {
        return;
    }
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* path resolved against dir when relative (dir may be NULL), into out. */
void st_arm_resolve(const char *dir, const char *path, struct st_buf *out)
{
    if (path[0] == '/' || !dir || !dir[0]) {
        st_buf_puts(out, path);
    } else {
        st_buf_printf(out, "%s/%s", dir, path);
    }
}

int st_arm_log_path(const char *dir, const char *log, struct st_buf *out, char *err, size_t errlen)
{
    if (!log) {
        st_buf_printf(out, "%s/server.log", dir);
        return 0;
    }
    st_arm_resolve(dir, log, out);
    const char *slash = strrchr(log, '/');
    if (log[0] == '/' || !slash) {
        return 0;
    }
    /* A relative name's folders are ours to make: they lie in the arm's evidence folder. */
    struct st_buf parent;
    st_buf_init(&parent);
    st_buf_printf(&parent, "%s/%.*s", dir, (int)(slash - log), log);
    int rc = st_fs_mkdirs(parent.data);
    if (rc != 0) {
        st_errf(err, errlen, "log %s: cannot make its folder: %s", st_buf_str(out),
                st_strerror(rc));
    }
    st_buf_release(&parent);
    return rc;
}

int st_arm_log_open_error(const char *path, int errnum, char *err, size_t errlen)
{
    struct st_buf dir;
    st_buf_init(&dir);
    const char *slash = strrchr(path, '/');
    st_buf_append(&dir, path, slash ? (size_t)(slash - path) : 0);
    int rc;
    if (errnum == ENOENT || errnum == ENOTDIR) {
        rc = ST_ENOTFOUND;
        st_errf(err, errlen,
                "log %s: the folder %s does not exist (target.log names a file in an existing "
                "folder; a relative name lies in the arm's evidence folder)",
                path, dir.len ? dir.data : ".");
    } else if (errnum == EACCES || errnum == EPERM || errnum == EROFS || errnum == EISDIR) {
        rc = ST_EUSAGE;
        st_errf(err, errlen, "log %s: cannot be written: %s", path, strerror(errnum));
    } else {
        rc = -errnum; /* ENOSPC, EIO...: the disk's, as for the archive */
        st_errf(err, errlen, "log %s: %s", path, strerror(errnum));
    }
    st_buf_release(&dir);
    return rc;
}

/* Up to max bytes of path from offset off (from its end when tail), appended to out. */
void st_arm_read_log(const char *path, off_t off, size_t max, int tail, struct st_buf *out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0) {
        return;
    }
    if (fstat(fd, &sb) == 0 && sb.st_size > off) {
        size_t avail = (size_t)(sb.st_size - off);
        off_t from = off;
        if (avail > max) {
            from = tail ? sb.st_size - (off_t)max : off;
            avail = max;
        }
        st_buf_reserve(out, avail);
        ssize_t n = pread(fd, out->data + out->len, avail, from);
        if (n > 0) {
            out->len += (size_t)n;
            out->data[out->len] = '\0';
        }
    }
    close(fd);
}

/* The last non-empty line of s[0..n) into out. */
void st_arm_last_line(const char *s, size_t n, char *out, size_t cap)
{
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ')) {
        n--;
    }
    size_t b = n;
    while (b > 0 && s[b - 1] != '\n') {
        b--;
    }
    st_arm_copy_line(s + b, n - b, out, cap);
}

void st_arm_exit_detail(const char *log, size_t n, const char *how, const char *status,
                        char *detail, size_t len)
{
    char cause[320], last[160];
    uint32_t no = 0;
    const char *s = log ? log : "";
    st_arm_last_line(s, n, last, sizeof(last));
    if (st_arm_error_line(s, n, cause, sizeof(cause), &no) && strcmp(cause, last) != 0) {
        snprintf(detail, len, "%s %s; log line %u: %s (last line: %s)", how, status, no, cause,
                 last);
    } else {
        snprintf(detail, len, "%s %s; log: %s", how, status, last[0] ? last : "(empty)");
    }
}

/* SHA-256 of a file as hex; returns 0 or an error. */ /* SHA-256 of a file as hex; returns 0 or an
                                                          error. */
int st_arm_file_sha256(const char *path, char hex[ST_SHA256_HEX], size_t *bytes)
{
    struct st_buf b;
    st_buf_init(&b);
    int rc = st_fs_read_file(path, ST_ARM_PROFILE_MAX, &b);
    if (rc == 0) {
        st_sha256_hex(b.data ? b.data : "", b.len, hex);
        *bytes = b.len;
    }
    st_buf_release(&b);
    return rc;
}

/* Appends items (comma-separated JSON objects, possibly with a leading comma) to a list. */
void st_arm_list_join(struct st_buf *list, const struct st_buf *items)
{
    size_t i = 0;
    while (i < items->len && (items->data[i] == ',' || isspace((unsigned char)items->data[i]))) {
        i++;
    }
    if (i < items->len) {
        if (list->len) {
            st_buf_putc(list, ',');
        }
        st_buf_append(list, items->data + i, items->len - i);
    }
}

void st_arm_add_check(struct st_buf *checks, int *all_ok, const char *name, int ok,
                      const char *detail)
{
    struct st_jw w;
    st_jw_init(&w, checks);
    w.comma = checks->len > 0; /* the list's items are comma-joined */
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "name", name);
    st_jw_kbool(&w, "ok", ok);
    st_jw_kstr(&w, "detail", detail);
    st_jw_obj_close(&w);
    if (!ok) {
        *all_ok = 0;
    }
}

int st_arm_json_top(const struct st_json *d, const char *key, char *val, size_t cap)
{
    return st_arm_json_member(d, 0, key, val, cap);
}

int st_arm_json_member(const struct st_json *d, int obj, const char *key, char *val, size_t cap)
{
    int i = st_json_get(d, obj, key);
    if (i < 0 || st_json_type(d, i) == ST_JSON_NULL) {
        return 0; /* null: the server leaves it unset, which says nothing about the arm's value */
    }
    if (st_json_type(d, i) == ST_JSON_STRING) {
        struct st_buf b;
        st_buf_init(&b);
        int ok = st_json_str(d, i, &b) == 0;
        st_arm_copy_line(st_buf_str(&b), b.len, val, cap);
        st_buf_release(&b);
        return ok;
    }
    size_t n;
    const char *raw = st_json_raw(d, i, &n);
    st_arm_copy_line(raw, n, val, cap);
    return 1;
}

void st_arm_jw_kv_types(struct st_jw *w, const struct st_target_pool *pool)
{
    const char *keys[] = {"type_k", "type_v"};
    const char *vals[] = {pool->type_k, pool->type_v};
    for (int i = 0; i < 2; i++) {
        st_jw_key(w, keys[i]);
        if (vals[i][0]) {
            st_jw_str(w, vals[i]);
        } else {
            st_jw_null(w); /* not stated: unknown, not a default */
        }
    }
}

/* ---- HTTP: one GET on an easy handle ---- */

/* GET url within timeout_ms. Returns 0 with *status (any status) and the body appended to body
 * (may be NULL); or ST_ETIMEOUT / -ECONNREFUSED / -EIO / ST_ETOOBIG with a message in why. */
int st_arm_http_get(struct st_http_client **h, const char *url, uint64_t timeout_ms, long *status,
                    struct st_buf *body, char *why, size_t whylen)
{
    struct st_http_client *http = *h;
    struct st_http_resp r;
    st_http_resp_init(&r, ST_ARM_BODY_MAX);
    uint64_t ms = timeout_ms ? timeout_ms : 1;
    struct st_http_req q = {
        .method = "GET", .url = url, .timeout_ms = ms, .connect_timeout_ms = ms};
    int rc = st_http_do(&http, &q, &r);
    *h = http;
    *status = 0;
    if (rc == 0) {
        *status = r.status;
        st_errf(why, whylen, "HTTP %ld", *status);
        if (body) {
            st_buf_append(body, r.body.data, r.body.len);
        }
    } else if (rc == -ENOMEM && !http) {
        st_errf(why, whylen, "GET %s: cannot make an HTTP client", url);
    } else if (rc == ST_ETOOBIG) {
        st_errf(why, whylen, "GET %s: answer over %u bytes", url, ST_ARM_BODY_MAX);
    } else {
        st_errf(why, whylen, "GET %s: %s", url, r.error_kind);
        rc = rc == ST_ETIMEOUT || rc == -ECONNREFUSED ? rc : -EIO;
    }
    st_http_resp_release(&r);
    return rc;
}

void st_arm_http_free(struct st_http_client *h)
{
    st_http_client_free(h);
}

/* One GET with its status and the body's first bytes into w under key. */
void st_arm_jw_probe(struct st_jw *w, const char *key, const char *url)
{
    struct st_http_client *h = NULL;
    struct st_buf body;
    long status = 0;
    char why[256];
    st_buf_init(&body);
    int rc = st_arm_http_get(&h, url, ST_ARM_HEALTH_TRY_MS, &status, &body, why, sizeof(why));
    st_jw_key(w, key);
    st_jw_obj_open(w);
    st_jw_kstr(w, "url", url);
    if (rc == 0) {
        st_jw_ki64(w, "status", status);
        st_jw_key(w, "body");
        st_jw_strn(w, st_buf_str(&body), body.len < 512 ? body.len : 512);
    } else {
        st_jw_kstr(w, "error", why);
    }
    st_jw_obj_close(w);
    st_buf_release(&body);
    st_arm_http_free(h);
}

void st_arm_jw_lines(struct st_jw *w, const char *key, const struct st_buf *lines)
{
    st_jw_key(w, key);
    st_jw_arr_open(w);
    const char *s = st_buf_str(lines);
    while (*s) {
        const char *nl = strchr(s, '\n');
        size_t n = nl ? (size_t)(nl - s) : strlen(s);
        st_jw_strn(w, s, n);
        s += n + (nl ? 1 : 0);
    }
    st_jw_arr_close(w);
}

/* ---- the running server ---- */

struct st_arm_server *st_arm_server_new(const struct st_arm_plan *p, const struct st_arm_env *env,
                                        const struct st_arm_backend *ops)
{
    struct st_arm_server *s = st_xcalloc(1, sizeof(*s));
    s->cancel_fn = env->cancel_fn;
    s->cancel_ctx = env->cancel_ctx;
    s->ops = ops;
    st_proc_init(&s->proc);
    st_buf_init(&s->log_path);
    st_buf_init(&s->health_url);
    st_arm_stop_settings(p->target, &s->stop_signal, &s->stop_timeout_s);
    return s;
}

/* Frees s without stopping anything. */
void st_arm_server_free(struct st_arm_server *s)
{
    if (!s) {
        return;
    }
    st_proc_release(&s->proc);
    st_buf_release(&s->log_path);
    st_buf_release(&s->health_url);
    st_arm_http_free(s->http);
    free(s);
}

/* Whether the runner asked to give up; sets s->cancelled and detail. */
int st_arm_cancelled(struct st_arm_server *s, char *detail, size_t len)
{
    if (s->cancel_fn && s->cancel_fn(s->cancel_ctx)) {
        s->cancelled = 1;
        snprintf(detail, len, "interrupted: the runner was asked to stop");
    }
    return s->cancelled;
}

void st_arm_health_url(struct st_arm_server *s, const char *health_url, const char *base)
{
    st_buf_clear(&s->health_url);
    if (health_url) {
        st_buf_puts(&s->health_url, health_url);
    } else {
        st_buf_printf(&s->health_url, "%s/health", base);
    }
}

void st_arm_plan_url(struct st_arm_server *s, const struct st_arm_plan *p)
{
    snprintf(s->url, sizeof(s->url), "%s", p->target->base_url ? p->target->base_url : "");
    st_arm_health_url(s, p->target->health_url, s->url);
}

/* Polls the health URL until 200, the server's end, or deadline; writes "health" into w. */
enum st_arm_fail st_arm_wait_health(struct st_arm_server *s, double t0, double deadline,
                                    double poll_s, struct st_jw *w, char *detail, size_t len)
{
    const char *url = st_buf_str(&s->health_url);
    char last[256] = "no attempt";
    uint32_t attempts = 0;
    enum st_arm_fail f = ST_ARM_OK;
    for (;;) {
        double left = deadline - st_arm_now_s();
        if (st_arm_cancelled(s, detail, len)) {
            f = ST_ARM_FAIL_HEALTH;
            break;
        }
        if (left <= 0) {
            f = ST_ARM_FAIL_HEALTH;
            snprintf(detail, len,
                     "%s did not answer 200 within health_timeout_s (%u tries; last: %s)", url,
                     attempts, last);
            break;
        }
        uint64_t ms =
            left * 1000 < ST_ARM_HEALTH_TRY_MS ? (uint64_t)(left * 1000) + 1 : ST_ARM_HEALTH_TRY_MS;
        long status = 0;
        int rc = st_arm_http_get(&s->http, url, ms, &status, NULL, last, sizeof(last));
        attempts++;
        if (rc == 0) {
            s->answered = 1;
            if (status == 200) {
                break;
            }
        }
        /* A server that ended (or a container that stopped) fails at once, not at the deadline. */
        f = s->ops->alive ? s->ops->alive(s, detail, len) : ST_ARM_OK;
        if (f != ST_ARM_OK) {
            break;
        }
        left = deadline - st_arm_now_s();
        st_arm_sleep_s(poll_s < left ? poll_s : left);
    }
    st_jw_key(w, "health");
    st_jw_obj_open(w);
    st_jw_kstr(w, "url", url);
    st_jw_ku64(w, "attempts", attempts);
    st_jw_kstr(w, "last", last);
    st_jw_kbool(w, "ok", f == ST_ARM_OK);
    st_jw_kf64(w, "seconds", st_arm_now_s() - t0);
    st_jw_obj_close(w);
    return f;
}

int st_arm_state_object(const char *kind, st_arm_fields_fn fields, const struct st_arm_plan *p,
                        const struct st_arm_env *env, struct st_buf *json, char *err, size_t errlen)
{
    struct st_buf out;
    struct st_jw w;
    st_buf_init(&out);
    st_jw_init(&w, &out);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "kind", kind);
    int rc = fields(p, env, &w, err, errlen);
    st_jw_obj_close(&w);
    if (rc == 0) {
        st_buf_append(json, out.data, out.len);
    }
    st_buf_release(&out);
    return rc;
}

int st_arm_restore_health(struct st_arm_server *s, const struct st_arm_restore_ctx *c, char *detail,
                          size_t len)
{
    const struct st_target_spec *t = c->p->target;
    double t0 = st_arm_now_s();
    double to = t->health_timeout_s > 0 ? t->health_timeout_s : 600;
    double poll = c->env->poll_s > 0 ? c->env->poll_s : 0.2;
    enum st_arm_fail f = st_arm_wait_health(s, t0, t0 + to, poll, c->w, detail, len);
    st_arm_add_check(c->checks, c->ok, "healthy", f == ST_ARM_OK, f == ST_ARM_OK ? "200" : detail);
    if (s->cancelled) {
        st_errf(c->err, c->errlen, "restore: %s", detail);
        return ST_EINTERRUPTED;
    }
    return 0;
}

void st_arm_restore_stop(const struct st_arm_restore_ctx *c, struct st_arm_server *s,
                         const char *how)
{
    struct st_buf ev;
    st_buf_init(&ev);
    int rc = c->stop(s, &ev);
    st_arm_add_check(c->checks, c->ok, "baseline_stopped", rc == 0,
                     rc == 0 ? how : "had to be killed");
    st_jw_key(c->w, "stop");
    st_jw_raw(c->w, ev.data, ev.len);
    st_buf_release(&ev);
}
