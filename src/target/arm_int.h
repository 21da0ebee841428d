/*
 * Internal to the arm lifecycle (arm.h): the backend ops table and the helpers the backends
 * share. arm.c is the generic lifecycle and calls a backend only through its table; one backend
 * per file (arm_sim.c, arm_command.c, arm_compose.c over compose.c, arm_url.c); the helpers they
 * share live in two leaves that call no backend and not arm.c: armio.c (clock, files, health
 * GETs, the running server's handle, evidence pieces) and armproc.c (children in their own
 * process group: spawn, reap, classify an exit, stop the group). A backend reaches the generic
 * lifecycle only through the callbacks in struct st_arm_restore_ctx. Not an interface for
 * anything else.
 */
#ifndef ST_TARGET_ARM_INT_H
#define ST_TARGET_ARM_INT_H

#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/proc.h"
#include "base/sha256.h"
#include "base/status.h"
#include "target/arm.h"
#include "target/compose.h"
#include "target/spec.h"

struct st_http_client; /* engine/http.h */
struct st_target_pool; /* target/server.h */

#define ST_ARM_LOG_HEAD_MAX (4u << 20)  /* bytes of an arm's log read for the KV line, the check */
#define ST_ARM_LOG_TAIL_MAX (64u << 10) /* bytes read for an exit's last line */
#define ST_ARM_BODY_MAX (1u << 20)      /* an HTTP answer we keep */
#define ST_ARM_PROFILE_MAX (1u << 20)   /* the sim profile, hashed */
#define ST_ARM_HEALTH_TRY_MS 2000u      /* one health GET */
#define ST_ARM_VALUE_MAX 256            /* a reported value, as text */

struct st_arm_backend;

/* A running arm. The generic fields are arm.c's and armio.c's; the process fields belong to the
 * sim and command backends (armproc.c), compose to the compose backend. */
struct st_arm_server {
    const struct st_arm_backend *ops; /* borrowed: a static table */
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
    struct st_compose *compose;  /* owned (compose) */
    struct st_http_client *http; /* owned (engine/http.h): health GETs; NULL until the first */
    st_arm_cancel_fn cancel_fn;  /* env's, polled by the waits */
    void *cancel_ctx;
    int cancelled; /* a wait gave up because cancel_fn asked */
};

/* arm.c's st_arm_start and st_arm_stop, handed to a backend's restore (a backend never calls
 * arm.c by name: the restore of sim and command brings the baseline up through the lifecycle). */
typedef int (*st_arm_start_fn)(const struct st_arm_plan *p, const char *arm,
                               const struct st_target_params *ps, const struct st_arm_env *env,
                               struct st_arm_server **srv, struct st_arm_up *up, char *err,
                               size_t errlen);
typedef int (*st_arm_stop_fn)(struct st_arm_server *s, struct st_buf *json);

/* What st_arm_restore hands a backend's restore. Every pointer borrowed for the call. */
struct st_arm_restore_ctx {
    const struct st_arm_plan *p;
    const struct st_target_params *baseline;
    const struct st_arm_env *env;
    const struct st_json *saved; /* the saved state parsed (empty when it was not JSON) */
    const char *saved_text;      /* and as text, saved_len bytes (may be NULL) */
    size_t saved_len;
    struct st_buf *checks; /* the comma-joined check objects (st_arm_add_check) */
    int *ok;               /* cleared by a failed check */
    struct st_jw *w;       /* more members of the final-state object */
    st_arm_start_fn start;
    st_arm_stop_fn stop;
    char *err;
    size_t errlen;
};

/*
 * One backend. Every function runs on the runner's thread. start fills s (url, health_url,
 * what it started) and writes its evidence members into w; it returns 0 with up->fail set (OK:
 * health comes next), or an error of ours with err. alive (NULL: always up) says whether a
 * server being waited for is still there; check is st_arm_check's. log appends up to max bytes of
 * the server's log (tail: the last ones; else from this start's beginning). stop stops what
 * start started and writes "how" and its figures into w (arm.c frees s). save_state and restore
 * are st_arm_save_state's and st_arm_restore's (restore adds checks and members through c).
 */
struct st_arm_backend {
    const char *name;   /* "sim", "command", "compose", "url": the evidence's "kind" */
    int needs_dir;      /* env->dir must be set (its children log there) */
    int needs_self_exe; /* env->self_exe must be set */
    int owns_port;      /* start listens on base_url's port: it must be free first (armport.c) */
    int (*start)(struct st_arm_server *s, const struct st_arm_plan *p, const char *arm,
                 const struct st_target_params *ps, const struct st_arm_env *env, double deadline,
                 struct st_jw *w, struct st_arm_up *up, char *err, size_t errlen);
    enum st_arm_fail (*alive)(struct st_arm_server *s, char *detail, size_t len);
    enum st_arm_fail (*check)(struct st_arm_server *s, char *detail, size_t len);
    void (*log)(struct st_arm_server *s, size_t max, int tail, struct st_buf *out);
    int (*stop)(struct st_arm_server *s, struct st_jw *w);
    int (*save_state)(const struct st_arm_plan *p, const struct st_arm_env *env,
                      struct st_buf *json, char *err, size_t errlen);
    int (*restore)(const struct st_arm_restore_ctx *c);
};

extern const struct st_arm_backend st_arm_backend_sim;     /* arm_sim.c */
extern const struct st_arm_backend st_arm_backend_command; /* arm_command.c */
extern const struct st_arm_backend st_arm_backend_compose; /* arm_compose.c */
extern const struct st_arm_backend st_arm_backend_url;     /* arm_url.c */

/* ---- armio.c: the leaf every backend and arm.c use ---- */

/* *up emptied for a new start, its buffers kept (cleared). */
void st_arm_up_reset(struct st_arm_up *up);
/* Monotonic seconds; a sleep that resumes after signals. */
double st_arm_now_s(void);
void st_arm_sleep_s(double s);
/* path resolved against dir when relative (dir may be NULL), appended to out. */
void st_arm_resolve(const char *dir, const char *path, struct st_buf *out);
/* Where a command server's output goes, appended to out: DIR/server.log without a target.log;
 * a relative one inside DIR (the arm's evidence folder, so the campaign's archive: never shared
 * across campaigns), its folders made; an absolute one as it stands. Returns 0, or mkdir's
 * error with err filled. */
int st_arm_log_path(const char *dir, const char *log, struct st_buf *out, char *err,
                    size_t errlen) ST_WUR;
/* What a log that cannot be opened for writing is (errnum: open's errno), with err filled:
 * ST_ENOTFOUND when its folder does not exist, ST_EUSAGE when it may not be written (EACCES,
 * EPERM, EROFS, EISDIR), else -errnum (ENOSPC, EIO: the disk's). */
int st_arm_log_open_error(const char *path, int errnum, char *err, size_t errlen) ST_WUR;
/* Up to max bytes of path from offset off (from its end when tail), appended to out. */
void st_arm_read_log(const char *path, off_t off, size_t max, int tail, struct st_buf *out);
/* The last non-empty line of s[0..n) into out (cut to cap - 1 bytes). */
void st_arm_last_line(const char *s, size_t n, char *out, size_t cap);
/* An ended server's detail: "HOW STATUS; log line N: CAUSE (last line: LAST)" when the log
 * (this start's part, n bytes, may be NULL) has an error line (st_arm_error_line) other than its
 * last, else "HOW STATUS; log: LAST" ("(empty)" for none), into detail. */
void st_arm_exit_detail(const char *log, size_t n, const char *how, const char *status,
                        char *detail, size_t len);
/* SHA-256 of a file (at most ST_ARM_PROFILE_MAX bytes) as hex. Returns 0, ST_ETOOBIG or a
 * negated errno. */
int st_arm_file_sha256(const char *path, char hex[ST_SHA256_HEX], size_t *bytes) ST_WUR;
/* Appends items (comma-separated JSON objects, possibly with a leading comma) to a list. */
void st_arm_list_join(struct st_buf *list, const struct st_buf *items);
/* Appends one {"name", "ok", "detail"} to checks; clears *all_ok when not ok. */
void st_arm_add_check(struct st_buf *checks, int *all_ok, const char *name, int ok,
                      const char *detail);
/* The top-level key of object d as text (a string unquoted, else its raw JSON) into val: 1, or 0
 * when absent or null. */
int st_arm_json_top(const struct st_json *d, const char *key, char *val, size_t cap);
/* The same for key of object token obj (any token index; not an object: 0). */
int st_arm_json_member(const struct st_json *d, int obj, const char *key, char *val, size_t cap);
/* GET url within timeout_ms on the client *h (made on first use). Returns 0 with *status
 * (any status) and the body appended to body (may be NULL); or ST_ETIMEOUT / -ECONNREFUSED /
 * -EIO / ST_ETOOBIG / -ENOMEM with a message in why. */
int st_arm_http_get(struct st_http_client **h, const char *url, uint64_t timeout_ms, long *status,
                    struct st_buf *body, char *why, size_t whylen) ST_WUR;
/* Frees a client from st_arm_http_get (NULL is fine). */
void st_arm_http_free(struct st_http_client *h);
/* One GET with its status and the body's first bytes written into w under key. */
void st_arm_jw_probe(struct st_jw *w, const char *key, const char *url);
/* Writes "type_k" and "type_v" of the pool into w: the cache types its log line states, else
 * null. */
void st_arm_jw_kv_types(struct st_jw *w, const struct st_target_pool *pool);
/* Writes key: [lines of lines] (newline-separated text) into w. */
void st_arm_jw_lines(struct st_jw *w, const char *key, const struct st_buf *lines);

/* Writes a backend's members of its starting state into the open object w (after "kind"). */
typedef int (*st_arm_fields_fn)(const struct st_arm_plan *p, const struct st_arm_env *env,
                                struct st_jw *w, char *err, size_t errlen);
/* st_arm_save_state's object {"kind": kind, ...what fields writes}, built aside and appended to
 * json only when fields returns 0. Returns what fields returns. */
int st_arm_state_object(const char *kind, st_arm_fields_fn fields, const struct st_arm_plan *p,
                        const struct st_arm_env *env, struct st_buf *json, char *err,
                        size_t errlen) ST_WUR;

/* A server handle for backend ops, per the plan's stop settings and env's cancel callback. */
struct st_arm_server *st_arm_server_new(const struct st_arm_plan *p, const struct st_arm_env *env,
                                        const struct st_arm_backend *ops);
/* Frees s without stopping anything (NULL is fine). */
void st_arm_server_free(struct st_arm_server *s);
/* Whether the runner asked to give up; sets s->cancelled and detail. */
int st_arm_cancelled(struct st_arm_server *s, char *detail, size_t len);
/* s->health_url: health_url when not NULL, else BASE/health. */
void st_arm_health_url(struct st_arm_server *s, const char *health_url, const char *base);
/* s->url: the plan's base_url; s->health_url: its health_url, else BASE/health. */
void st_arm_plan_url(struct st_arm_server *s, const struct st_arm_plan *p);
/* Polls s->health_url until 200, the server's end (ops->alive), cancel or deadline; writes
 * "health" into w. Returns ST_ARM_OK or a fail with detail. */
enum st_arm_fail st_arm_wait_health(struct st_arm_server *s, double t0, double deadline,
                                    double poll_s, struct st_jw *w, char *detail, size_t len);
/* The restore's health wait for a server left running (compose, url): waits up to the plan's
 * health_timeout_s, adds the "healthy" check through c. Returns 0, or ST_EINTERRUPTED (err
 * filled) when the runner asked to stop. */
int st_arm_restore_health(struct st_arm_server *s, const struct st_arm_restore_ctx *c, char *detail,
                          size_t len) ST_WUR;

/* The restore's stop of the baseline it brought up (sim; command when nothing ran at the start):
 * c->stop, the "baseline_stopped" check (detail how, or "had to be killed") and "stop" in c->w.
 * s is freed. */
void st_arm_restore_stop(const struct st_arm_restore_ctx *c, struct st_arm_server *s,
                         const char *how);

/* ---- armport.c: who holds an arm's port ---- */

/* What holds base_url's host:port. */
struct st_arm_port {
    char host[128];
    int port;
    int listeners;       /* LISTEN sockets on the port in /proc/net/tcp{,6} covering host */
    int answers;         /* a TCP connect to host:port was accepted */
    unsigned long inode; /* the first listener's socket inode (0: none) */
    int pid;             /* its owner, from /proc/PID/fd (0: unknown, or no listener) */
    char comm[64];       /* the owner's command name */
    char cmdline[256];   /* and its command line, NULs as blanks */
    char desc[640];      /* one line: taken by whom and how it was seen, or free and why */
};
/* Probes base_url's port: the listeners and their owner, then one connect (at most 0.5 s).
 * Returns 0 with *pt filled, or ST_EPARSE (no host and port, or a host that does not resolve;
 * pt->desc says which). */
int st_arm_port_probe(const char *base_url, struct st_arm_port *pt) ST_WUR;
/* Whether something holds the port: a listener, or a connect that succeeded. */
int st_arm_port_taken(const struct st_arm_port *pt);
/* pt as one line (pt->desc is this line after a probe). */
void st_arm_port_text(const struct st_arm_port *pt, char *out, size_t cap);
/* Writes key: {host, port, taken, listeners, answers, pid, comm, cmdline, detail} into w. */
void st_arm_jw_port(struct st_jw *w, const char *key, const struct st_arm_port *pt);

/* ---- armproc.c: children in their own process group (the sim and command backends) ---- */

/* Starts argv in its own process group (new_session: its own session) with stdin /dev/null and
 * stdout and stderr appended to s->log_path; s->log_off gets the log's size before. pdeathsig:
 * it gets SIGKILL when the runner dies. Returns 0 with s->pid, or a negated errno with err. */
int st_arm_spawn(struct st_arm_server *s, char *const argv[], int new_session, int pdeathsig,
                 char *err, size_t errlen) ST_WUR;
/* Collects the child when it has ended. Returns 1 when it has (now or before). */
int st_arm_reap(struct st_arm_server *s);
/* How an ended child failed: OOM when its log says so, else START (before it answered) or EXIT;
 * detail quotes the log's line. */
enum st_arm_fail st_arm_classify_exit(struct st_arm_server *s, char *detail, size_t len);
/* The child's alive and check op: ST_ARM_OK while it runs, else st_arm_classify_exit. */
enum st_arm_fail st_arm_proc_check(struct st_arm_server *s, char *detail, size_t len);
/* The child's log op: its log file from this start's offset (tail: the last max bytes). */
void st_arm_proc_log(struct st_arm_server *s, size_t max, int tail, struct st_buf *out);
/* The child's stop op: s->stop_signal to its group, then SIGKILL after s->stop_timeout_s;
 * "nothing was running" without a child. Writes how into w. Returns 0, or ST_ETIMEOUT when it
 * had to be killed. */
int st_arm_proc_stop(struct st_arm_server *s, struct st_jw *w) ST_WUR;
/* The ops every backend whose server is our child shares (sim, command), for its table. */
#define ST_ARM_PROC_OPS                                                                            \
    .needs_dir = 1, .alive = st_arm_proc_check, .check = st_arm_proc_check,                        \
    .log = st_arm_proc_log, .stop = st_arm_proc_stop
/* The child's evidence: log, log_offset, pid, pgid, start_ticks, pdeathsig, written into w. */
void st_arm_jw_process(struct st_jw *w, const struct st_arm_server *s, int pdeathsig);

#endif
