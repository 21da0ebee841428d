/*
 * Arm lifecycle (arm.h): starts one arm's server per the plan's target, waits for its health,
 * reads its KV capacity and context, checks the configuration it reports against the arm's
 * parameters, watches it, stops it, and saves and restores the starting state. Sim and command
 * servers are children in their own process group writing into a log file; compose goes through
 * compose.c; a url target is switched by the operator. Every step writes evidence (JSON) and an
 * arm's own failure is data (st_arm_up.fail), not an error. Not the runner: one arm at a time,
 * blocking, on the runner's thread; every wait is bounded by the plan's timeouts. User-facing
 * rules: docs/campaign-targets.md.
 */
#include "campaign/arm.h"

#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "base/clock.h"
#include "base/json.h"
#include "base/proc.h"
#include "base/sha256.h"
#include "base/xalloc.h"
#include "campaign/compose.h"
#include "proto/prom.h"
#include "store/fsutil.h"
#include "target/server.h"

#define LOG_HEAD_MAX (4u << 20)  /* bytes of this arm's log read for the KV line and the check */
#define LOG_TAIL_MAX (64u << 10) /* bytes read for an exit's last line */
#define BODY_MAX (1u << 20)      /* an HTTP answer we keep */
#define PROFILE_MAX (1u << 20)   /* the sim profile, hashed */
#define HEALTH_TRY_MS 2000u      /* one health GET */
#define LISTEN_POLL_NS 20000000u /* the sim's log, read for "listening on" */
#define VALUE_MAX 256            /* a reported value, as text */

void st_arm_up_init(struct st_arm_up *up)
{
    memset(up, 0, sizeof(*up));
    st_buf_init(&up->json);
}

void st_arm_up_release(struct st_arm_up *up)
{
    st_buf_release(&up->json);
    memset(up, 0, sizeof(*up));
    st_buf_init(&up->json);
}

static const char *kind_name(enum st_plan_target_kind k)
{
    switch (k) {
    case ST_PLAN_TARGET_SIM:
        return "sim";
    case ST_PLAN_TARGET_COMMAND:
        return "command";
    case ST_PLAN_TARGET_COMPOSE:
        return "compose";
    case ST_PLAN_TARGET_URL:
        return "url";
    }
    return "unknown";
}

/* ---- small helpers ---- */

static double now_s(void)
{
    return (double)st_clock_mono_ns() / 1e9;
}

static void sleep_s(double s)
{
    if (s <= 0) {
        return;
    }
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* path resolved against dir when relative (dir may be NULL), into out. */
static void resolve(const char *dir, const char *path, struct st_buf *out)
{
    if (path[0] == '/' || !dir || !dir[0]) {
        st_buf_puts(out, path);
    } else {
        st_buf_printf(out, "%s/%s", dir, path);
    }
}

/* Up to max bytes of path from offset off (from its end when tail), appended to out. */
static void read_log(const char *path, off_t off, size_t max, int tail, struct st_buf *out)
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
static void last_line(const char *s, size_t n, char *out, size_t cap)
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

static int read_file(const char *path, size_t max, struct st_buf *out)
{
    return st_fs_read_file(path, max, out);
}

/* SHA-256 of a file as hex; returns 0 or an error. */
static int file_sha256(const char *path, char hex[ST_SHA256_HEX], size_t *bytes)
{
    struct st_buf b;
    st_buf_init(&b);
    int rc = read_file(path, PROFILE_MAX, &b);
    if (rc == 0) {
        st_sha256_hex(b.data ? b.data : "", b.len, hex);
        *bytes = b.len;
    }
    st_buf_release(&b);
    return rc;
}

/* Appends items (comma-separated JSON objects, possibly with a leading comma) to a list. */
static void list_join(struct st_buf *list, const struct st_buf *items)
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

static void add_check(struct st_buf *checks, int *all_ok, const char *name, int ok,
                      const char *detail)
{
    struct st_buf one;
    struct st_jw w;
    st_buf_init(&one);
    st_jw_init(&w, &one);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "name", name);
    st_jw_kbool(&w, "ok", ok);
    st_jw_kstr(&w, "detail", detail);
    st_jw_obj_close(&w);
    list_join(checks, &one);
    st_buf_release(&one);
    if (!ok) {
        *all_ok = 0;
    }
}

/* ---- HTTP: one GET on an easy handle ---- */

struct body_sink {
    struct st_buf *b;
    int too_big;
};

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    struct body_sink *k = ud;
    size_t len = sz * n;
    if (k->b->len + len > BODY_MAX) {
        k->too_big = 1;
        return 0;
    }
    st_buf_append(k->b, p, len);
    return len;
}

/* GET url within timeout_ms. Returns 0 with *status (any status) and the body appended to body
 * (may be NULL); or ST_ETIMEOUT / -ECONNREFUSED / -EIO / ST_ETOOBIG with a message in why. */
static int http_get(CURL **h, const char *url, uint64_t timeout_ms, long *status,
                    struct st_buf *body, char *why, size_t whylen)
{
    struct st_buf scratch;
    st_buf_init(&scratch);
    struct body_sink k = {body ? body : &scratch, 0};
    *status = 0;
    if (!*h) {
        *h = curl_easy_init();
        if (!*h) {
            st_errf(why, whylen, "GET %s: cannot make a curl handle", url);
            st_buf_release(&scratch);
            return -ENOMEM;
        }
    }
    CURL *c = *h;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(timeout_ms ? timeout_ms : 1));
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)(timeout_ms ? timeout_ms : 1));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &k);
    CURLcode cr = curl_easy_perform(c);
    int rc = 0;
    if (cr == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
        st_errf(why, whylen, "HTTP %ld", *status);
    } else if (k.too_big) {
        st_errf(why, whylen, "GET %s: answer over %u bytes", url, BODY_MAX);
        rc = ST_ETOOBIG;
    } else {
        st_errf(why, whylen, "GET %s: %s", url, curl_easy_strerror(cr));
        rc = cr == CURLE_OPERATION_TIMEDOUT ? ST_ETIMEOUT
             : cr == CURLE_COULDNT_CONNECT  ? -ECONNREFUSED
                                            : -EIO;
    }
    st_buf_release(&scratch);
    return rc;
}

/* ---- the running server ---- */

struct st_arm_server {
    enum st_plan_target_kind kind;
    struct st_proc proc; /* sim, command: the child (st_proc_spawn); proc.pid 0: none */
    pid_t pid;           /* sim, command: the child, leader of its process group; 0: none */
    int reaped;          /* waitpid collected it; wstatus says how it ended */
    int wstatus;
    unsigned long long start_ticks; /* the child's start time (/proc), for st_arm_stop_leftover */
    int answered; /* sim: printed "listening on"; others: answered HTTP once (START vs EXIT) */
    struct st_buf log_path; /* sim, command: where its output goes */
    off_t log_off;          /* where this start's output begins in the log */
    char url[256];
    struct st_buf health_url;
    int stop_signal;
    double stop_timeout_s;
    struct st_compose *compose; /* owned (compose) */
    CURL *curl;                 /* owned, health GETs; NULL until the first */
    st_arm_cancel_fn cancel_fn; /* env's, polled by the waits */
    void *cancel_ctx;
    int cancelled; /* a wait gave up because cancel_fn asked */
};

static struct st_arm_server *server_new(const struct st_plan *p, const struct st_arm_env *env)
{
    struct st_arm_server *s = st_xcalloc(1, sizeof(*s));
    s->cancel_fn = env->cancel_fn;
    s->cancel_ctx = env->cancel_ctx;
    s->kind = p->target.kind;
    st_proc_init(&s->proc);
    st_buf_init(&s->log_path);
    st_buf_init(&s->health_url);
    s->stop_signal = p->target.stop_signal > 0 ? p->target.stop_signal : SIGTERM;
    s->stop_timeout_s = p->target.stop_timeout_s > 0 ? p->target.stop_timeout_s : 60;
    return s;
}

/* Frees s without stopping anything. */
static void server_free(struct st_arm_server *s)
{
    if (!s) {
        return;
    }
    st_proc_release(&s->proc);
    st_buf_release(&s->log_path);
    st_buf_release(&s->health_url);
    if (s->curl) {
        curl_easy_cleanup(s->curl);
    }
    free(s);
}

/* Collects the child when it has ended. Returns 1 when it has (now or before). */
static int reap(struct st_arm_server *s)
{
    if (s->pid <= 0 || s->reaped) {
        return s->reaped;
    }
    if (st_proc_poll(&s->proc)) {
        s->reaped = 1; /* wstatus -1: someone else reaped it (or SIGCHLD is ignored) */
        s->wstatus = s->proc.wstatus;
    }
    return s->reaped;
}

static void status_text(int wstatus, char *out, size_t cap)
{
    if (wstatus == -1) {
        snprintf(out, cap, "ended, status unknown (reaped elsewhere)");
    } else if (WIFSIGNALED(wstatus)) {
        snprintf(out, cap, "killed by signal %d (%s)", WTERMSIG(wstatus),
                 sigabbrev_np(WTERMSIG(wstatus)) ? sigabbrev_np(WTERMSIG(wstatus)) : "?");
    } else {
        snprintf(out, cap, "exit status %d", WEXITSTATUS(wstatus));
    }
}

/* How an ended child failed: OOM when its log says so, else START (before it answered) or EXIT;
 * detail quotes the log's line. */
static enum st_arm_fail classify_exit(struct st_arm_server *s, char *detail, size_t len)
{
    struct st_buf tail;
    char st[64], line[384];
    st_buf_init(&tail);
    read_log(st_buf_str(&s->log_path), s->log_off, LOG_TAIL_MAX, 1, &tail);
    status_text(s->wstatus, st, sizeof(st));
    enum st_arm_fail f;
    if (st_arm_oom_line(tail.data, tail.len, line, sizeof(line))) {
        f = ST_ARM_FAIL_OOM;
        snprintf(detail, len, "out of memory (%s): %s", st, line);
    } else {
        last_line(tail.data ? tail.data : "", tail.len, line, sizeof(line));
        f = s->answered ? ST_ARM_FAIL_EXIT : ST_ARM_FAIL_START;
        snprintf(detail, len, "%s %s; log: %s",
                 f == ST_ARM_FAIL_START ? "exited at once," : "exited,", st,
                 line[0] ? line : "(empty)");
    }
    st_buf_release(&tail);
    return f;
}

/* State, process group and start time (clock ticks after boot) of pid from /proc. Returns 1. */
static int proc_stat(const char *pid, char *state, long *pgrp, unsigned long long *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%.20s/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        return 0;
    }
    buf[n] = '\0';
    /* pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
     * stime cutime cstime priority nice threads itrealvalue starttime: comm may hold spaces. */
    const char *rp = strrchr(buf, ')');
    long ppid = 0;
    return rp && sscanf(rp + 1,
                        " %c %ld %ld %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
                        "%*d %*d %llu",
                        state, &ppid, pgrp, start) == 4;
}

/* Live (not zombie) members of process group pgid; *leader_start gets the start time of the
 * member whose pid is pgid (0 when the leader is gone). Reads /proc, since a member that outlived
 * the leader is reparented and, under an init that does not reap, stays a zombie that
 * kill(-pgid, 0) still finds; without /proc, kill(-pgid, 0) decides. */
static int group_members(pid_t pgid, unsigned long long *leader_start)
{
    DIR *d = opendir("/proc");
    if (leader_start) {
        *leader_start = 0;
    }
    if (!d) {
        return kill(-pgid, 0) == 0;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char state = 0;
        long pgrp = 0;
        unsigned long long start = 0;
        if (!isdigit((unsigned char)e->d_name[0]) || !proc_stat(e->d_name, &state, &pgrp, &start) ||
            pgrp != pgid || state == 'Z' || state == 'X') {
            continue;
        }
        n++;
        if (leader_start && strtol(e->d_name, NULL, 10) == pgid) {
            *leader_start = start;
        }
    }
    closedir(d);
    return n;
}

static int group_alive(pid_t pgid)
{
    return group_members(pgid, NULL) > 0;
}

/* The start time of pid (clock ticks after boot), 0 when unknown. */
static unsigned long long start_ticks(pid_t pid)
{
    char name[24], state;
    long pgrp;
    unsigned long long start = 0;
    snprintf(name, sizeof(name), "%d", (int)pid);
    return proc_stat(name, &state, &pgrp, &start) ? start : 0;
}

/* Starts argv in its own process group (new_session: its own session) with stdin /dev/null and
 * stdout and stderr appended to s->log_path; s->log_off gets the log's size before. pdeathsig:
 * it gets SIGKILL when the runner dies. Returns 0 with s->pid, or a negated errno. */
static int spawn(struct st_arm_server *s, char *const argv[], int new_session, int pdeathsig,
                 char *err, size_t errlen)
{
    const char *log = st_buf_str(&s->log_path);
    int logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (logfd < 0) {
        int rc = -errno;
        st_errf(err, errlen, "log %s: %s", log, strerror(errno));
        return rc;
    }
    struct stat sb;
    s->log_off = fstat(logfd, &sb) == 0 ? sb.st_size : 0;
    struct st_proc_opts o = {
        .argv = (const char *const *)argv,
        .group = new_session ? ST_PROC_SESSION_NEW : ST_PROC_GROUP_NEW,
        .pdeathsig = pdeathsig ? SIGKILL : 0,
    };
    o.std[0].kind = ST_PROC_FD_NULL;
    o.std[1] = (struct st_proc_fd){.kind = ST_PROC_FD_DUP, .fd = logfd};
    o.std[2] = (struct st_proc_fd){.kind = ST_PROC_FD_DUP, .fd = logfd};
    char why[256] = "";
    int rc = st_proc_spawn(&o, &s->proc, why, sizeof(why));
    close(logfd);
    if (rc != 0) {
        st_errf(err, errlen, "cannot start %s: %s", argv[0], st_strerror(rc));
        st_proc_release(&s->proc);
        return rc;
    }
    s->pid = s->proc.pid;
    s->start_ticks = start_ticks(s->pid);
    return 0;
}

/* Stops the child's process group: sig, then SIGKILL after timeout_s; waits for the leader and
 * for the group to empty. Writes how into w. Returns 0, or ST_ETIMEOUT when it had to be killed. */
static int stop_group(struct st_arm_server *s, int sig, double timeout_s, struct st_jw *w)
{
    double t0 = now_s();
    int rc = 0;
    const char *how;
    if (s->pid == getpgrp()) {
        how = "refused: the group is the runner's own"; /* never: spawn made a new group */
        rc = -EPERM;
    } else if (reap(s) && !group_alive(s->pid)) {
        how = "had exited";
    } else {
        how = "signal";
        kill(-s->pid, sig);
        while (!(reap(s) && !group_alive(s->pid)) && now_s() - t0 < timeout_s) {
            sleep_s(0.02);
        }
        if (!(reap(s) && !group_alive(s->pid))) {
            how = "killed";
            rc = ST_ETIMEOUT;
            kill(-s->pid, SIGKILL);
            if (st_proc_wait(&s->proc, UINT64_MAX) == 0) {
                s->reaped = 1;
                s->wstatus = s->proc.wstatus;
            }
        }
    }
    if (w) {
        char st[64];
        status_text(s->wstatus, st, sizeof(st));
        st_jw_kstr(w, "how", how);
        st_jw_kstr(w, "signal", sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
        st_jw_kf64(w, "timeout_s", timeout_s);
        st_jw_kstr(w, "status", st);
        st_jw_ki64(w, "pid", s->pid);
        st_jw_kf64(w, "seconds", now_s() - t0);
    }
    return rc;
}

/* Whether the server is still up while waiting for health: 0, or a fail with detail. */
static enum st_arm_fail alive(struct st_arm_server *s, char *detail, size_t len)
{
    if (s->kind == ST_PLAN_TARGET_SIM || s->kind == ST_PLAN_TARGET_COMMAND) {
        return reap(s) ? classify_exit(s, detail, len) : ST_ARM_OK;
    }
    if (s->kind == ST_PLAN_TARGET_COMPOSE && s->compose) {
        return st_compose_check(s->compose, detail, len);
    }
    return ST_ARM_OK;
}

/* Whether the runner asked to give up; sets s->cancelled and detail. */
static int cancelled(struct st_arm_server *s, char *detail, size_t len)
{
    if (s->cancel_fn && s->cancel_fn(s->cancel_ctx)) {
        s->cancelled = 1;
        snprintf(detail, len, "interrupted: the runner was asked to stop");
    }
    return s->cancelled;
}

/* Waits for the sim's "listening on HOST:PORT" in its log until deadline. Returns ST_ARM_OK with
 * s->url set, or a fail with detail. */
static enum st_arm_fail wait_listening(struct st_arm_server *s, double deadline, char *detail,
                                       size_t len)
{
    static const char mark[] = "listening on ";
    struct st_buf text;
    st_buf_init(&text);
    enum st_arm_fail f = ST_ARM_OK;
    for (;;) {
        st_buf_clear(&text);
        read_log(st_buf_str(&s->log_path), s->log_off, LOG_HEAD_MAX, 0, &text);
        const char *m = text.data ? strstr(text.data, mark) : NULL;
        while (m && m != text.data && m[-1] != '\n') {
            m = strstr(m + 1, mark);
        }
        const char *nl = m ? strchr(m, '\n') : NULL;
        if (nl) {
            char hp[128];
            st_arm_copy_line(m + sizeof(mark) - 1, (size_t)(nl - m) - (sizeof(mark) - 1), hp,
                             sizeof(hp));
            snprintf(s->url, sizeof(s->url), "http://%s", hp);
            s->answered = 1;
            break;
        }
        if (reap(s)) {
            f = classify_exit(s, detail, len);
            break;
        }
        if (cancelled(s, detail, len)) {
            f = ST_ARM_FAIL_HEALTH;
            break;
        }
        if (now_s() >= deadline) {
            f = ST_ARM_FAIL_HEALTH;
            snprintf(detail, len, "no 'listening on' line in %s within health_timeout_s",
                     st_buf_str(&s->log_path));
            break;
        }
        sleep_s((double)LISTEN_POLL_NS / 1e9);
    }
    st_buf_release(&text);
    return f;
}

/* Polls the health URL until 200, the server's end, or deadline; writes "health" into w. */
static enum st_arm_fail wait_health(struct st_arm_server *s, double t0, double deadline,
                                    double poll_s, struct st_jw *w, char *detail, size_t len)
{
    const char *url = st_buf_str(&s->health_url);
    char last[256] = "no attempt";
    uint32_t attempts = 0;
    enum st_arm_fail f = ST_ARM_OK;
    for (;;) {
        double left = deadline - now_s();
        if (cancelled(s, detail, len)) {
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
        uint64_t ms = left * 1000 < HEALTH_TRY_MS ? (uint64_t)(left * 1000) + 1 : HEALTH_TRY_MS;
        long status = 0;
        int rc = http_get(&s->curl, url, ms, &status, NULL, last, sizeof(last));
        attempts++;
        if (rc == 0) {
            s->answered = 1;
            if (status == 200) {
                break;
            }
        }
        f = alive(s, detail, len);
        if (f != ST_ARM_OK) {
            break;
        }
        left = deadline - now_s();
        sleep_s(poll_s < left ? poll_s : left);
    }
    st_jw_key(w, "health");
    st_jw_obj_open(w);
    st_jw_kstr(w, "url", url);
    st_jw_ku64(w, "attempts", attempts);
    st_jw_kstr(w, "last", last);
    st_jw_kbool(w, "ok", f == ST_ARM_OK);
    st_jw_kf64(w, "seconds", now_s() - t0);
    st_jw_obj_close(w);
    return f;
}

/* ---- what the server reports: KV pool, context, configuration ---- */

enum src { SRC_LOG = 1, SRC_INFO, SRC_METRICS, SRC_MODELS, SRC_PROPS };

struct reported {
    const char *log; /* borrowed */
    size_t log_len;
    struct st_buf info_body;
    struct st_json info;
    int has_info;
    const char *info_route;
    struct st_buf props_body;
    struct st_json props;
    int has_props;
    struct st_prom prom;
    const struct st_prom_sample *cache_cfg; /* vllm:cache_config_info, borrowed from prom */
    uint64_t max_model_len;
};

/* A parameter of ours and where a server states it (beyond the same name in each source). */
static const struct {
    const char *param;
    enum src src;
    const char *key;
} aliases[] = {
    {"engine.context_length", SRC_INFO, "context_length"},
    {"engine.context_length", SRC_MODELS, "max_model_len"},
    {"engine.tp", SRC_INFO, "tp_size"},
    {"engine.pp", SRC_INFO, "pp_size"},
    {"engine.dp_attention", SRC_INFO, "dp_size"},
    {"engine.mem_fraction", SRC_INFO, "mem_fraction_static"},
    {"engine.mem_fraction", SRC_METRICS, "gpu_memory_utilization"},
    {"engine.max_batched_tokens", SRC_INFO, "chunked_prefill_size"},
    {"engine.max_running", SRC_INFO, "max_running_requests"},
    {"engine.max_running", SRC_PROPS, "total_slots"},
    {"engine.page_size", SRC_INFO, "page_size"},
    {"engine.page_size", SRC_METRICS, "block_size"},
    {"engine.spec_steps", SRC_INFO, "speculative_num_steps"},
    {"engine.prefix_caching", SRC_METRICS, "enable_prefix_caching"},
    {"max_model_len", SRC_MODELS, "max_model_len"},
    {"context_length", SRC_MODELS, "max_model_len"},
    {"kv_cache_dtype", SRC_METRICS, "cache_dtype"},
    {"parallel", SRC_PROPS, "total_slots"},
    {"tp", SRC_INFO, "tp_size"},
    {"pp", SRC_INFO, "pp_size"},
    {"dp", SRC_INFO, "dp_size"},
    {"mem_fraction", SRC_INFO, "mem_fraction_static"},
    {"dp_attention", SRC_INFO, "enable_dp_attention"},
    {"n_parallel", SRC_PROPS, "total_slots"},
};

static int json_top(const struct st_json *d, const char *key, char *val, size_t cap)
{
    int i = st_json_get(d, 0, key);
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

/* The value src states for key, into val; where names it. Returns 1 when found. */
static int lookup(const struct reported *r, enum src src, const char *key, char *val, size_t cap,
                  char *where, size_t wcap)
{
    switch (src) {
    case SRC_LOG:
        if (st_arm_log_arg(r->log, r->log_len, key, val, cap)) {
            snprintf(where, wcap, "log: non-default args %s", key);
            return 1;
        }
        return 0;
    case SRC_INFO:
        if (r->has_info && json_top(&r->info, key, val, cap)) {
            snprintf(where, wcap, "GET %s %s", r->info_route, key);
            return 1;
        }
        return 0;
    case SRC_METRICS: {
        const char *v = r->cache_cfg ? st_prom_label(r->cache_cfg, key) : NULL;
        if (v) {
            st_arm_copy_line(v, strlen(v), val, cap);
            snprintf(where, wcap, "GET /metrics vllm:cache_config_info %s", key);
            return 1;
        }
        return 0;
    }
    case SRC_MODELS:
        if (r->max_model_len && strcmp(key, "max_model_len") == 0) {
            snprintf(val, cap, "%" PRIu64, r->max_model_len);
            snprintf(where, wcap, "GET /v1/models max_model_len");
            return 1;
        }
        return 0;
    case SRC_PROPS:
        if (r->has_props && json_top(&r->props, key, val, cap)) {
            snprintf(where, wcap, "GET /props %s", key);
            return 1;
        }
        return 0;
    }
    return 0;
}

/* Where the server states parameter name: the alias table, then the same name in the log's
 * non-default args, server info and the cache config labels ('-' read as '_'). */
static int find_reported(const struct reported *r, const char *name, char *val, size_t cap,
                         char *where, size_t wcap)
{
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
        if (strcmp(aliases[i].param, name) == 0 &&
            lookup(r, aliases[i].src, aliases[i].key, val, cap, where, wcap)) {
            return 1;
        }
    }
    if (strchr(name, '.')) {
        return 0; /* a profile key: only the table knows where it shows */
    }
    char key[ST_PLAN_NAME_MAX];
    snprintf(key, sizeof(key), "%s", name);
    for (char *c = key; *c; c++) {
        *c = *c == '-' ? '_' : *c;
    }
    static const enum src order[] = {SRC_LOG, SRC_INFO, SRC_METRICS};
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
        if (lookup(r, order[i], key, val, cap, where, wcap)) {
            return 1;
        }
    }
    return 0;
}

static void reported_fetch(struct reported *r, struct st_target *t, CURL **curl, const char *url)
{
    struct {
        uint32_t ep;
        const char *route;
        int props;
    } routes[] = {
        {ST_TARGET_EP_GET_SERVER_INFO, "/get_server_info", 0},
        {ST_TARGET_EP_SERVER_INFO, "/server_info", 0},
        {ST_TARGET_EP_PROPS, "/props", 1},
    };
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        if (!(t->endpoints & routes[i].ep) || (!routes[i].props && r->has_info)) {
            continue;
        }
        struct st_buf u;
        st_buf_init(&u);
        st_buf_printf(&u, "%s%s", url, routes[i].route);
        struct st_buf *b = routes[i].props ? &r->props_body : &r->info_body;
        struct st_json *d = routes[i].props ? &r->props : &r->info;
        long status = 0;
        char why[128];
        st_buf_clear(b);
        if (http_get(curl, u.data, 5000, &status, b, why, sizeof(why)) == 0 && status == 200 &&
            st_json_parse(d, b->data ? b->data : "", b->len) == 0 &&
            st_json_type(d, 0) == ST_JSON_OBJECT) {
            if (routes[i].props) {
                r->has_props = 1;
            } else {
                r->has_info = 1;
                r->info_route = routes[i].route;
            }
        }
        st_buf_release(&u);
    }
    if (t->endpoints & ST_TARGET_EP_METRICS) {
        char err[128];
        if (st_target_metrics(t, &r->prom, err, sizeof(err)) == 0) {
            r->cache_cfg = st_prom_find(&r->prom, "vllm:cache_config_info");
        }
    }
    r->max_model_len = t->max_model_len;
}

/* Compares every parameter of ps the server states; writes "config" into w. Returns
 * ST_ARM_FAIL_CONFIG with the first mismatch in detail, else ST_ARM_OK. */
static enum st_arm_fail config_check(const struct reported *r, const struct st_plan_params *ps,
                                     struct st_jw *w, char *detail, size_t len)
{
    enum st_arm_fail f = ST_ARM_OK;
    st_jw_key(w, "config");
    st_jw_obj_open(w);
    st_jw_key(w, "checked");
    st_jw_arr_open(w);
    for (uint32_t i = 0; ps && i < ps->n; i++) {
        char val[VALUE_MAX], where[160];
        if (!find_reported(r, ps->v[i].name, val, sizeof(val), where, sizeof(where))) {
            continue;
        }
        int ok = st_arm_value_eq(ps->v[i].value, val);
        st_jw_obj_open(w);
        st_jw_kstr(w, "name", ps->v[i].name);
        st_jw_kstr(w, "arm", ps->v[i].value);
        st_jw_kstr(w, "server", val);
        st_jw_kstr(w, "source", where);
        st_jw_kbool(w, "ok", ok);
        st_jw_obj_close(w);
        if (!ok && f == ST_ARM_OK) {
            f = ST_ARM_FAIL_CONFIG;
            st_errf(detail, len, "configuration: %s is %s for the arm but %s on the server (%s)",
                    ps->v[i].name, ps->v[i].value, val, where);
        }
    }
    st_jw_arr_close(w);
    st_jw_key(w, "unchecked");
    st_jw_arr_open(w);
    for (uint32_t i = 0; ps && i < ps->n; i++) {
        char val[VALUE_MAX], where[160];
        if (!find_reported(r, ps->v[i].name, val, sizeof(val), where, sizeof(where))) {
            st_jw_str(w, ps->v[i].name);
        }
    }
    st_jw_arr_close(w);
    st_jw_kstr(w, "unchecked_why",
               "the server states these nowhere read here (log non-default args, GET "
               "/get_server_info or /server_info, /metrics vllm:cache_config_info, /props, "
               "/v1/models max_model_len)");
    st_jw_obj_close(w);
    return f;
}

/* Identifies the server, reads its KV pool (log first) and context, and checks its
 * configuration. Writes "target", "kv", "context", "config" into w. */
static enum st_arm_fail inspect(struct st_arm_server *s, const struct st_plan_params *ps,
                                const char *log, size_t log_len, struct st_jw *w,
                                struct st_arm_up *up)
{
    struct st_target t;
    struct st_target_cfg cfg = {.base_url = s->url, .timeout_ms = 5000};
    struct reported r;
    char err[384] = "";
    memset(&r, 0, sizeof(r));
    r.log = log;
    r.log_len = log_len;
    st_buf_init(&r.info_body);
    st_buf_init(&r.props_body);
    st_json_init(&r.info, 0);
    st_json_init(&r.props, 0);
    st_prom_init(&r.prom);
    st_target_init(&t, &cfg);
    int rc = st_target_open(&t, err, sizeof(err));
    st_jw_key(w, "target");
    st_jw_obj_open(w);
    if (rc == 0) {
        st_jw_kstr(w, "kind", st_target_kind_name(t.kind));
        st_jw_kbool(w, "sim", t.is_sim);
        st_jw_kstr(w, "model", t.model);
        st_jw_kstr(w, "evidence", t.evidence);
        reported_fetch(&r, &t, &s->curl, s->url);
    } else {
        st_jw_kstr(w, "error", err);
    }
    st_jw_obj_close(w);

    struct st_target_pool pool;
    err[0] = '\0';
    rc = rc == 0 ? st_target_pool(&t, log, log_len, &pool, err, sizeof(err)) : rc;
    st_jw_key(w, "kv");
    st_jw_obj_open(w);
    if (rc == 0) {
        up->kv_capacity_tokens = pool.total_tokens;
        const char *src = strncmp(pool.source, "log", 3) == 0       ? "log"
                          : strstr(pool.source, "/get_server_info") ? "get_server_info"
                          : strstr(pool.source, "/server_info")     ? "server_info"
                          : strstr(pool.source, "/metrics")         ? "metrics"
                          : strstr(pool.source, "/props")           ? "props"
                                                                    : "other";
        snprintf(up->kv_source, sizeof(up->kv_source), "%s", src);
        st_jw_ku64(w, "capacity_tokens", pool.total_tokens);
        st_jw_ku64(w, "rank_tokens", pool.rank_tokens);
        st_jw_ku64(w, "ranks", pool.ranks);
        st_jw_kbool(w, "exact", pool.exact);
        st_jw_kstr(w, "source", src);
        st_jw_kstr(w, "evidence", pool.source);
    } else {
        st_jw_key(w, "capacity_tokens");
        st_jw_null(w);
        st_jw_kstr(w, "error", err[0] ? err : st_strerror(rc));
    }
    st_jw_obj_close(w);

    const char *cwhat = "unknown";
    if (t.max_model_len) {
        up->max_context_tokens = t.max_model_len;
        cwhat = "GET /v1/models max_model_len";
    } else if (t.slot_n_ctx) {
        up->max_context_tokens = t.slot_n_ctx;
        cwhat = "GET /props n_ctx of a slot";
    }
    st_jw_key(w, "context");
    st_jw_obj_open(w);
    st_jw_ku64(w, "max_tokens", up->max_context_tokens);
    st_jw_kstr(w, "source", cwhat);
    st_jw_obj_close(w);

    enum st_arm_fail f = config_check(&r, ps, w, up->detail, sizeof(up->detail));
    st_target_release(&t);
    st_prom_release(&r.prom);
    st_json_release(&r.info);
    st_json_release(&r.props);
    st_buf_release(&r.info_body);
    st_buf_release(&r.props_body);
    return f;
}

/* ---- starting, per kind ---- */

static void health_default(struct st_arm_server *s, const struct st_plan *p, const char *base)
{
    st_buf_clear(&s->health_url);
    if (s->kind != ST_PLAN_TARGET_SIM && p->target.health_url) {
        st_buf_puts(&s->health_url, p->target.health_url);
    } else {
        st_buf_printf(&s->health_url, "%s/health", base);
    }
}

static void jw_argv(struct st_jw *w, const char *key, const struct st_arm_argv *a)
{
    st_jw_key(w, key);
    st_jw_arr_open(w);
    for (uint32_t i = 0; i < a->n; i++) {
        st_jw_str(w, a->v[i]);
    }
    st_jw_arr_close(w);
}

static void jw_lines(struct st_jw *w, const char *key, const struct st_buf *lines)
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

static void jw_process(struct st_jw *w, const struct st_arm_server *s, int pdeathsig)
{
    st_jw_kstr(w, "log", st_buf_str(&s->log_path));
    st_jw_ki64(w, "log_offset", (int64_t)s->log_off);
    st_jw_ki64(w, "pid", s->pid);
    st_jw_ki64(w, "pgid", s->pid);
    st_jw_ku64(w, "start_ticks", s->start_ticks);
    st_jw_kbool(w, "pdeathsig", pdeathsig);
}

static int start_sim(struct st_arm_server *s, const struct st_plan *p,
                     const struct st_plan_params *ps, const struct st_arm_env *env, double deadline,
                     struct st_jw *w, struct st_arm_up *up, char *err, size_t errlen)
{
    struct st_buf profile, not_applied;
    struct st_arm_argv argv = {0};
    st_buf_init(&profile);
    st_buf_init(&not_applied);
    resolve(env->plan_dir, p->target.profile ? p->target.profile : "", &profile);
    int rc = st_arm_sim_argv(env->self_exe, profile.data, p, ps, env->sim_speed, env->sim_seed,
                             env->sim_noise_seed, &argv, &not_applied, err, errlen);
    if (rc == 0) {
        jw_argv(w, "argv", &argv);
        jw_lines(w, "not_applied", &not_applied);
        st_buf_printf(&s->log_path, "%s/server.log", env->dir);
        rc = spawn(s, argv.v, 0, 1, err, errlen);
    }
    if (rc == 0) {
        jw_process(w, s, 1);
        st_jw_kstr(w, "restart_policy", "none: a sim that exits stays down (the arm fails)");
        up->fail = wait_listening(s, deadline, up->detail, sizeof(up->detail));
        if (up->fail == ST_ARM_OK) {
            health_default(s, p, s->url);
        }
    }
    st_arm_argv_release(&argv);
    st_buf_release(&profile);
    st_buf_release(&not_applied);
    return rc;
}

static int start_command(struct st_arm_server *s, const struct st_plan *p,
                         const struct st_plan_params *ps, const struct st_arm_env *env,
                         struct st_jw *w, char *err, size_t errlen)
{
    struct st_buf cmd;
    st_buf_init(&cmd);
    int rc = st_arm_template(p->target.start ? p->target.start : "", ps, &cmd, err, errlen);
    if (rc == 0) {
        char *argv[] = {"/bin/sh", "-c", cmd.data ? cmd.data : "", NULL};
        st_jw_kstr(w, "command", st_buf_str(&cmd));
        if (p->target.log) {
            resolve(env->plan_dir, p->target.log, &s->log_path);
        } else {
            st_buf_printf(&s->log_path, "%s/server.log", env->dir);
        }
        rc = spawn(s, argv, 1, 0, err, errlen);
    }
    if (rc == 0) {
        jw_process(w, s, 0);
        st_jw_kstr(w, "stop_signal",
                   sigabbrev_np(s->stop_signal) ? sigabbrev_np(s->stop_signal) : "?");
        st_jw_kf64(w, "stop_timeout_s", s->stop_timeout_s);
        st_jw_kstr(w, "restart_policy",
                   "none: a command server that exits stays down (the arm fails); it is not tied "
                   "to the runner's life, so the journal keeps its pgid");
        snprintf(s->url, sizeof(s->url), "%s", p->target.base_url ? p->target.base_url : "");
        health_default(s, p, s->url);
    }
    st_buf_release(&cmd);
    return rc;
}

static int start_compose(struct st_arm_server *s, const struct st_plan *p, const char *arm,
                         const struct st_plan_params *ps, const struct st_arm_env *env,
                         struct st_jw *w, struct st_arm_up *up, char *err, size_t errlen)
{
    struct st_buf cj;
    st_buf_init(&cj);
    int rc = st_compose_up(p, arm, ps, env, &s->compose, &cj, up->detail, sizeof(up->detail), err,
                           errlen);
    if (cj.len) {
        st_jw_key(w, "compose");
        st_jw_raw(w, cj.data, cj.len);
    }
    st_buf_release(&cj);
    if (rc > 0) {
        up->fail = (enum st_arm_fail)rc;
        return 0;
    }
    if (rc == 0) {
        st_jw_kstr(w, "restart_policy", "no while the experiment runs (compose backend)");
        snprintf(s->url, sizeof(s->url), "%s", p->target.base_url ? p->target.base_url : "");
        health_default(s, p, s->url);
    }
    return rc;
}

static void start_url(struct st_arm_server *s, const struct st_plan *p, const char *arm,
                      const struct st_plan_params *ps, const struct st_arm_env *env,
                      struct st_jw *w, struct st_arm_up *up)
{
    if (!env->operator_fn) {
        up->fail = ST_ARM_FAIL_OPERATOR;
        snprintf(up->detail, sizeof(up->detail),
                 "url target: the operator cannot be asked to switch to %s", arm);
    } else if (env->operator_fn(env->operator_ctx, arm, ps) != 0) {
        up->fail = ST_ARM_FAIL_OPERATOR;
        snprintf(up->detail, sizeof(up->detail), "the operator did not switch the server to %s",
                 arm);
    }
    st_jw_kbool(w, "operator_switched", up->fail == ST_ARM_OK);
    st_jw_kstr(w, "restart_policy", "the operator's");
    snprintf(s->url, sizeof(s->url), "%s", p->target.base_url ? p->target.base_url : "");
    health_default(s, p, s->url);
}

/* Health, then inspection, for a server that was started. */
static void bring_up(struct st_arm_server *s, const struct st_plan_params *ps,
                     const struct st_arm_env *env, double t0, double deadline, struct st_jw *w,
                     struct st_arm_up *up)
{
    double poll = env->poll_s > 0 ? env->poll_s : 0.2;
    up->fail = wait_health(s, t0, deadline, poll, w, up->detail, sizeof(up->detail));
    if (up->fail != ST_ARM_OK) {
        return;
    }
    up->startup_s = now_s() - t0;
    snprintf(up->url, sizeof(up->url), "%s", s->url);
    struct st_buf log;
    st_buf_init(&log);
    if (s->kind == ST_PLAN_TARGET_SIM || s->kind == ST_PLAN_TARGET_COMMAND) {
        read_log(st_buf_str(&s->log_path), s->log_off, LOG_HEAD_MAX, 0, &log);
    } else if (s->kind == ST_PLAN_TARGET_COMPOSE && s->compose) {
        st_compose_logs(s->compose, LOG_HEAD_MAX, &log);
    }
    up->fail = inspect(s, ps, log.data, log.len, w, up);
    st_buf_release(&log);
}

/* Stops whatever s started (for a failed start); writes "stop" into w. */
static void stop_quietly(struct st_arm_server *s, struct st_jw *w)
{
    struct st_buf ev;
    st_buf_init(&ev);
    int rc = st_arm_stop(s, &ev);
    (void)rc; /* the arm already failed; how it stopped is in the evidence */
    st_jw_key(w, "stop");
    if (ev.len) {
        st_jw_raw(w, ev.data, ev.len);
    } else {
        st_jw_null(w);
    }
    st_buf_release(&ev);
}

int st_arm_start(const struct st_plan *p, const char *arm, const struct st_plan_params *ps,
                 const struct st_arm_env *env, struct st_arm_server **srv, struct st_arm_up *up,
                 char *err, size_t errlen)
{
    struct st_buf keep = up->json;
    memset(up, 0, sizeof(*up));
    up->json = keep;
    st_buf_clear(&up->json);
    *srv = NULL;
    struct st_jw w;
    st_jw_init(&w, &up->json);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "arm", arm);
    st_jw_kstr(&w, "kind", kind_name(p->target.kind));

    int local = p->target.kind == ST_PLAN_TARGET_SIM || p->target.kind == ST_PLAN_TARGET_COMMAND;
    if ((local && !env->dir) || (p->target.kind == ST_PLAN_TARGET_SIM && !env->self_exe)) {
        st_errf(err, errlen, "arm %s: the runner gave no %s", arm,
                env->dir ? "servetune binary (self_exe)" : "evidence folder (dir)");
        st_jw_kstr(&w, "fail", "error");
        st_jw_kstr(&w, "detail", err);
        st_jw_obj_close(&w);
        return ST_EUSAGE;
    }
    struct st_arm_server *s = server_new(p, env);
    double t0 = now_s();
    double deadline = t0 + (p->target.health_timeout_s > 0 ? p->target.health_timeout_s : 600);
    int rc = 0;
    switch (p->target.kind) {
    case ST_PLAN_TARGET_SIM:
        rc = start_sim(s, p, ps, env, deadline, &w, up, err, errlen);
        break;
    case ST_PLAN_TARGET_COMMAND:
        rc = start_command(s, p, ps, env, &w, err, errlen);
        break;
    case ST_PLAN_TARGET_COMPOSE:
        rc = start_compose(s, p, arm, ps, env, &w, up, err, errlen);
        break;
    case ST_PLAN_TARGET_URL:
        start_url(s, p, arm, ps, env, &w, up);
        break;
    default:
        st_errf(err, errlen, "unknown target kind %d", (int)p->target.kind);
        rc = ST_EUSAGE;
        break;
    }
    if (rc == 0 && up->fail == ST_ARM_OK) {
        bring_up(s, ps, env, t0, deadline, &w, up);
    }
    if (rc == 0 && s->cancelled) {
        rc = ST_EINTERRUPTED;
        st_errf(err, errlen, "arm %s: %s", arm, up->detail);
        up->fail = ST_ARM_OK;
    }
    if (rc != 0 || up->fail != ST_ARM_OK) {
        stop_quietly(s, &w);
        s = NULL;
    } else {
        snprintf(up->detail, sizeof(up->detail), "up at %s in %.2f s; KV %" PRIu64 " tokens (%s)",
                 up->url, up->startup_s, up->kv_capacity_tokens,
                 up->kv_source[0] ? up->kv_source : "unknown");
    }
    st_jw_kstr(&w, "fail", rc != 0 ? "error" : st_arm_fail_name(up->fail));
    st_jw_kstr(&w, "detail", rc != 0 ? err : up->detail);
    st_jw_kf64(&w, "startup_s", up->startup_s);
    st_jw_obj_close(&w);
    *srv = s;
    return rc;
}

/* ---- watching and stopping ---- */

enum st_arm_fail st_arm_check(struct st_arm_server *s, char *detail, size_t len)
{
    if (len) {
        detail[0] = '\0';
    }
    switch (s->kind) {
    case ST_PLAN_TARGET_SIM:
    case ST_PLAN_TARGET_COMMAND:
        return reap(s) ? classify_exit(s, detail, len) : ST_ARM_OK;
    case ST_PLAN_TARGET_COMPOSE:
        return s->compose ? st_compose_check(s->compose, detail, len) : ST_ARM_FAIL_EXIT;
    case ST_PLAN_TARGET_URL:
    default: {
        long status = 0;
        char why[256];
        int rc = http_get(&s->curl, st_buf_str(&s->health_url), HEALTH_TRY_MS, &status, NULL, why,
                          sizeof(why));
        if (rc == 0 && status == 200) {
            return ST_ARM_OK;
        }
        snprintf(detail, len, "health %s: %s", st_buf_str(&s->health_url), why);
        return ST_ARM_FAIL_EXIT;
    }
    }
}

void st_arm_log_tail(struct st_arm_server *s, size_t max, struct st_buf *out)
{
    if (s->kind == ST_PLAN_TARGET_SIM || s->kind == ST_PLAN_TARGET_COMMAND) {
        read_log(st_buf_str(&s->log_path), s->log_off, max, 1, out);
    } else if (s->kind == ST_PLAN_TARGET_COMPOSE && s->compose) {
        st_compose_logs(s->compose, max, out);
    }
}

int st_arm_stop(struct st_arm_server *s, struct st_buf *json)
{
    if (!s) {
        return 0;
    }
    struct st_jw w;
    struct st_buf scratch;
    st_buf_init(&scratch);
    st_jw_init(&w, json ? json : &scratch);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "kind", kind_name(s->kind));
    int rc = 0;
    if ((s->kind == ST_PLAN_TARGET_SIM || s->kind == ST_PLAN_TARGET_COMMAND) && s->pid > 0) {
        int sig = s->kind == ST_PLAN_TARGET_SIM ? SIGTERM : s->stop_signal;
        double timeout = s->kind == ST_PLAN_TARGET_SIM ? 10.0 : s->stop_timeout_s;
        rc = stop_group(s, sig, timeout, &w);
    } else if (s->kind == ST_PLAN_TARGET_COMPOSE && s->compose) {
        struct st_buf cj;
        st_buf_init(&cj);
        rc = st_compose_release(s->compose, 0, &cj);
        s->compose = NULL;
        st_jw_kstr(&w, "how", "compose stop");
        if (cj.len) {
            st_jw_key(&w, "compose");
            st_jw_raw(&w, cj.data, cj.len);
        }
        st_buf_release(&cj);
    } else {
        st_jw_kstr(&w, "how",
                   s->kind == ST_PLAN_TARGET_URL ? "none: the url server is the operator's"
                                                 : "nothing was running");
    }
    st_jw_obj_close(&w);
    st_buf_release(&scratch);
    server_free(s);
    return rc;
}

int st_arm_stop_leftover(int pgid, uint64_t want_ticks, int sig, double timeout_s,
                         struct st_buf *json)
{
    struct st_buf scratch;
    struct st_jw w;
    unsigned long long leader = 0;
    const char *how;
    int rc = 0;
    double t0 = now_s();
    st_buf_init(&scratch);
    st_jw_init(&w, json ? json : &scratch);
    int members = pgid > 1 ? group_members(pgid, &leader) : 0;
    if (pgid <= 1 || pgid == getpgrp()) {
        how = "refused: not a server's group";
        rc = -EPERM;
    } else if (members == 0) {
        how = "gone";
    } else if (leader && leader != want_ticks) {
        how = "refused: the group's leader started at another time (the id was reused)";
        rc = ST_ENOTFOUND;
    } else {
        how = "signal";
        kill(-pgid, sig);
        while (group_alive(pgid) && now_s() - t0 < timeout_s) {
            sleep_s(0.02);
        }
        if (group_alive(pgid)) {
            how = "killed";
            rc = ST_ETIMEOUT;
            kill(-pgid, SIGKILL);
            while (group_alive(pgid) && now_s() - t0 < timeout_s + 5) {
                sleep_s(0.02);
            }
        }
    }
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "kind", "leftover");
    st_jw_ki64(&w, "pgid", pgid);
    st_jw_ki64(&w, "members", members);
    st_jw_kstr(&w, "how", how);
    st_jw_kstr(&w, "signal", sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
    st_jw_kf64(&w, "seconds", now_s() - t0);
    st_jw_obj_close(&w);
    st_buf_release(&scratch);
    return rc;
}

/* ---- starting state and restore ---- */

/* Looks name up in the baseline, then in fixed. */
static void baseline_params(const struct st_plan *p, struct st_plan_params *out)
{
    uint32_t n = p->baseline.n + p->fixed.n;
    out->v = st_xcalloc(n ? n : 1, sizeof(*out->v));
    out->n = 0;
    for (uint32_t k = 0; k < 2; k++) {
        const struct st_plan_params *src = k == 0 ? &p->baseline : &p->fixed;
        for (uint32_t i = 0; i < src->n; i++) {
            if (k == 1 && st_plan_param_find(&p->baseline, src->v[i].name)) {
                continue;
            }
            out->v[out->n] = src->v[i];
            out->v[out->n].value = st_xstrdup(src->v[i].value);
            out->n++;
        }
    }
}

static void params_free(struct st_plan_params *ps)
{
    for (uint32_t i = 0; i < ps->n; i++) {
        free(ps->v[i].value);
    }
    free(ps->v);
    ps->v = NULL;
    ps->n = 0;
}

/* One GET with its status and the body's first bytes into w under key. */
static void jw_probe(struct st_jw *w, const char *key, const char *url)
{
    CURL *h = NULL;
    struct st_buf body;
    long status = 0;
    char why[256];
    st_buf_init(&body);
    int rc = http_get(&h, url, HEALTH_TRY_MS, &status, &body, why, sizeof(why));
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
    if (h) {
        curl_easy_cleanup(h);
    }
}

int st_arm_save_state(const struct st_plan *p, const struct st_arm_env *env, struct st_buf *json,
                      char *err, size_t errlen)
{
    const struct st_plan_target *t = &p->target;
    if (t->kind == ST_PLAN_TARGET_COMPOSE) {
        return st_compose_save_state(p, env, json, err, errlen);
    }
    struct st_buf out, path;
    struct st_jw w;
    st_buf_init(&out);
    st_buf_init(&path);
    st_jw_init(&w, &out);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "kind", kind_name(t->kind));
    int rc = 0;
    if (t->kind == ST_PLAN_TARGET_SIM) {
        char hex[ST_SHA256_HEX];
        size_t bytes = 0;
        resolve(env->plan_dir, t->profile ? t->profile : "", &path);
        rc = file_sha256(path.data, hex, &bytes);
        if (rc != 0) {
            st_errf(err, errlen, "profile %s: %s", path.data,
                    rc == ST_ETOOBIG ? "over 1 MiB" : st_strerror(rc));
        } else {
            st_jw_kstr(&w, "profile", path.data);
            st_jw_kstr(&w, "profile_sha256", hex);
            st_jw_ku64(&w, "profile_bytes", bytes);
        }
    } else if (t->kind == ST_PLAN_TARGET_COMMAND) {
        struct st_plan_params base;
        struct st_buf cmd;
        st_buf_init(&cmd);
        baseline_params(p, &base);
        rc = st_arm_template(t->start ? t->start : "", &base, &cmd, err, errlen);
        params_free(&base);
        if (rc == 0) {
            st_jw_kstr(&w, "start", t->start);
            st_jw_kstr(&w, "baseline_command", st_buf_str(&cmd));
            if (t->health_url) {
                jw_probe(&w, "health", t->health_url);
            }
        }
        st_buf_release(&cmd);
    } else if (t->kind == ST_PLAN_TARGET_URL) {
        if (t->health_url) {
            jw_probe(&w, "health", t->health_url);
        } else {
            st_buf_printf(&path, "%s/health", t->base_url ? t->base_url : "");
            jw_probe(&w, "health", path.data);
        }
        struct st_target tg;
        struct st_target_cfg cfg = {.base_url = t->base_url ? t->base_url : "", .timeout_ms = 5000};
        char e2[256] = "";
        st_target_init(&tg, &cfg);
        st_jw_key(&w, "server");
        st_jw_obj_open(&w);
        if (st_target_open(&tg, e2, sizeof(e2)) == 0) {
            st_jw_kstr(&w, "kind", st_target_kind_name(tg.kind));
            st_jw_kstr(&w, "model", tg.model);
            st_jw_kstr(&w, "evidence", tg.evidence);
            st_jw_ku64(&w, "max_model_len", tg.max_model_len);
        } else {
            st_jw_kstr(&w, "error", e2);
        }
        st_jw_obj_close(&w);
        st_target_release(&tg);
    }
    st_jw_obj_close(&w);
    if (rc == 0) {
        st_buf_append(json, out.data, out.len);
    }
    st_buf_release(&out);
    st_buf_release(&path);
    return rc;
}

/* Reads the saved object's string key into out; 1 when present. */
static int saved_str(const struct st_json *d, const char *key, char *out, size_t cap)
{
    return st_json_type(d, 0) == ST_JSON_OBJECT && json_top(d, key, out, cap);
}

/* sim: the profile's hash, then the baseline up (KV as saved) and stopped again. */
static int restore_sim(const struct st_plan *p, const struct st_plan_params *baseline,
                       const struct st_arm_env *env, const struct st_json *saved,
                       struct st_buf *checks, int *ok, struct st_jw *w, char *err, size_t errlen)
{
    struct st_buf path;
    char hex[ST_SHA256_HEX], want[VALUE_MAX], msg[512];
    size_t bytes = 0;
    st_buf_init(&path);
    resolve(env->plan_dir, p->target.profile ? p->target.profile : "", &path);
    int hrc = file_sha256(path.data, hex, &bytes);
    if (!saved_str(saved, "profile_sha256", want, sizeof(want))) {
        add_check(checks, ok, "profile_sha256", 0, "the saved state has no profile_sha256");
    } else if (hrc != 0) {
        snprintf(msg, sizeof(msg), "%s: %s", path.data, st_strerror(hrc));
        add_check(checks, ok, "profile_sha256", 0, msg);
    } else {
        snprintf(msg, sizeof(msg), "%s: %s, saved %s", path.data, hex, want);
        add_check(checks, ok, "profile_sha256", strcmp(hex, want) == 0, msg);
    }
    st_buf_release(&path);

    struct st_arm_up up;
    struct st_arm_server *s = NULL;
    st_arm_up_init(&up);
    int rc = st_arm_start(p, "baseline", baseline, env, &s, &up, err, errlen);
    if (rc == 0) {
        add_check(checks, ok, "baseline_up", up.fail == ST_ARM_OK, up.detail);
        if (saved_str(saved, "baseline_kv_capacity_tokens", want, sizeof(want))) {
            char have[32];
            snprintf(have, sizeof(have), "%" PRIu64, up.kv_capacity_tokens);
            snprintf(msg, sizeof(msg), "%s tokens (%s), saved %s", have, up.kv_source, want);
            add_check(checks, ok, "kv_capacity",
                      up.fail == ST_ARM_OK && st_arm_value_eq(want, have), msg);
        }
        st_jw_key(w, "bring_up");
        st_jw_raw(w, up.json.data, up.json.len);
        if (s) {
            struct st_buf ev;
            st_buf_init(&ev);
            int src = st_arm_stop(s, &ev);
            add_check(checks, ok, "baseline_stopped", src == 0,
                      src == 0 ? "stopped by SIGTERM" : "had to be killed");
            st_jw_key(w, "stop");
            st_jw_raw(w, ev.data, ev.len);
            st_buf_release(&ev);
        }
    }
    st_arm_up_release(&up);
    return rc;
}

/* command: the baseline started and left running, detached from the runner. */
static int restore_command(const struct st_plan *p, const struct st_plan_params *baseline,
                           const struct st_arm_env *env, struct st_buf *checks, int *ok,
                           struct st_jw *w, char *err, size_t errlen)
{
    struct st_arm_up up;
    struct st_arm_server *s = NULL;
    st_arm_up_init(&up);
    int rc = st_arm_start(p, "baseline", baseline, env, &s, &up, err, errlen);
    if (rc == 0) {
        add_check(checks, ok, "baseline_up", up.fail == ST_ARM_OK, up.detail);
        st_jw_key(w, "bring_up");
        st_jw_raw(w, up.json.data, up.json.len);
        if (s) {
            st_jw_ki64(w, "pid", s->pid);
            st_jw_ki64(w, "pgid", s->pid);
            st_jw_ku64(w, "start_ticks", s->start_ticks);
            st_jw_kbool(w, "left_running", 1);
            server_free(s); /* not stopped: it is the restored server */
        }
    }
    st_arm_up_release(&up);
    return rc;
}

/* compose: the file as it is, proven by compose.c, then health. */
static int restore_compose(const struct st_plan *p, const struct st_arm_env *env, const char *saved,
                           size_t saved_len, struct st_buf *checks, int *ok, struct st_jw *w,
                           char *err, size_t errlen)
{
    struct st_arm_server *s = server_new(p, env);
    struct st_buf cj, pj;
    char detail[512] = "";
    st_buf_init(&cj);
    st_buf_init(&pj);
    int rc = st_compose_up(p, "baseline", NULL, env, &s->compose, &cj, detail, sizeof(detail), err,
                           errlen);
    if (cj.len) {
        st_jw_key(w, "compose_up");
        st_jw_raw(w, cj.data, cj.len);
    }
    if (rc > 0) {
        add_check(checks, ok, "compose_up", 0, detail);
        rc = 0;
    } else if (rc == 0) {
        add_check(checks, ok, "compose_up", 1, "up");
        int pok = 0;
        rc = st_compose_prove(s->compose, p, env, saved, saved_len, &pj, &pok, err, errlen);
        if (rc == 0) {
            list_join(checks, &pj);
            *ok = *ok && pok;
            snprintf(s->url, sizeof(s->url), "%s", p->target.base_url ? p->target.base_url : "");
            health_default(s, p, s->url);
            double t0 = now_s();
            double to = p->target.health_timeout_s > 0 ? p->target.health_timeout_s : 600;
            enum st_arm_fail f = wait_health(s, t0, t0 + to, env->poll_s > 0 ? env->poll_s : 0.2, w,
                                             detail, sizeof(detail));
            add_check(checks, ok, "healthy", f == ST_ARM_OK, f == ST_ARM_OK ? "200" : detail);
            if (s->cancelled) {
                st_errf(err, errlen, "restore: %s", detail);
                rc = ST_EINTERRUPTED;
            }
        }
        int rrc = st_compose_release(s->compose, 1, NULL);
        (void)rrc; /* leave_running: only frees */
        s->compose = NULL;
    }
    server_free(s);
    st_buf_release(&cj);
    st_buf_release(&pj);
    return rc;
}

/* url: the operator switches back, then health. Returns 0 or ST_EINTERRUPTED. */
static int restore_url(const struct st_plan *p, const struct st_plan_params *baseline,
                       const struct st_arm_env *env, struct st_buf *checks, int *ok,
                       struct st_jw *w, char *err, size_t errlen)
{
    int rc = 0;
    struct st_arm_server *s = server_new(p, env);
    struct st_arm_up up;
    st_arm_up_init(&up);
    start_url(s, p, "baseline", baseline, env, w, &up);
    add_check(checks, ok, "operator", up.fail == ST_ARM_OK,
              up.fail == ST_ARM_OK ? "switched to the baseline" : up.detail);
    if (up.fail == ST_ARM_OK) {
        double t0 = now_s();
        double to = p->target.health_timeout_s > 0 ? p->target.health_timeout_s : 600;
        enum st_arm_fail f = wait_health(s, t0, t0 + to, env->poll_s > 0 ? env->poll_s : 0.2, w,
                                         up.detail, sizeof(up.detail));
        add_check(checks, ok, "healthy", f == ST_ARM_OK, f == ST_ARM_OK ? "200" : up.detail);
        if (s->cancelled) {
            st_errf(err, errlen, "restore: %s", up.detail);
            rc = ST_EINTERRUPTED;
        }
    }
    st_arm_up_release(&up);
    server_free(s);
    return rc;
}

int st_arm_restore(const struct st_plan *p, const struct st_plan_params *baseline,
                   const struct st_arm_env *env, const char *saved, size_t saved_len,
                   struct st_buf *json, int *restored, char *err, size_t errlen)
{
    struct st_json d;
    struct st_buf checks, rest;
    struct st_jw w;
    int ok = 1, rc = 0;
    *restored = 0;
    st_json_init(&d, 0);
    st_buf_init(&checks);
    st_buf_init(&rest);
    st_jw_init(&w, &rest);
    w.comma = 1; /* rest follows "restored" and "checks" inside one object */
    if (st_json_parse(&d, saved ? saved : "", saved ? saved_len : 0) != 0) {
        add_check(&checks, &ok, "saved_state", 0, "the saved state is not a JSON object");
        st_json_release(&d);
        st_json_init(&d, 0);
    }
    switch (p->target.kind) {
    case ST_PLAN_TARGET_SIM:
        rc = restore_sim(p, baseline, env, &d, &checks, &ok, &w, err, errlen);
        break;
    case ST_PLAN_TARGET_COMMAND:
        rc = restore_command(p, baseline, env, &checks, &ok, &w, err, errlen);
        break;
    case ST_PLAN_TARGET_COMPOSE:
        rc = restore_compose(p, env, saved, saved_len, &checks, &ok, &w, err, errlen);
        break;
    case ST_PLAN_TARGET_URL:
        rc = restore_url(p, baseline, env, &checks, &ok, &w, err, errlen);
        break;
    default:
        st_errf(err, errlen, "unknown target kind %d", (int)p->target.kind);
        rc = ST_EUSAGE;
        break;
    }
    if (rc == 0) {
        *restored = ok && checks.len > 0;
        struct st_jw o;
        st_jw_init(&o, json);
        st_jw_obj_open(&o);
        st_jw_kstr(&o, "kind", kind_name(p->target.kind));
        st_jw_kbool(&o, "restored", *restored);
        st_buf_puts(json, ",\"checks\":[");
        st_buf_append(json, checks.data ? checks.data : "", checks.len);
        st_buf_putc(json, ']');
        st_buf_append(json, rest.data ? rest.data : "", rest.len);
        st_buf_putc(json, '}');
    }
    st_json_release(&d);
    st_buf_release(&checks);
    st_buf_release(&rest);
    return rc;
}
