/*
 * The compose backend of the arm lifecycle (compose.h, docs/campaign-compose.md). It reads the
 * service's command, environment, env files, image and restart policy from the compose file with
 * base/yaml.h, writes an arm's parameters into DIR/compose.override.yml (never into the compose
 * file), and drives a docker CLI and a Compose CLI (v2 "docker compose" or v1 "docker-compose",
 * picked by pick_cli) through the fixed command subset of compose.h: each call is a
 * child started with st_proc_run (an argument vector, no shell) in its own process group, its
 * stdout and stderr captured up to CALL_OUT_MAX bytes each, killed when it outlives its deadline.
 * Every call goes into the evidence with its exit status and the first lines of its output.
 * Runs on the campaign runner's thread; blocking; not thread-safe.
 */
#include "target/compose.h"

#include <sys/stat.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/proc.h"
#include "base/sha256.h"
#include "base/xalloc.h"
#include "base/yaml.h"
#include "store/fsutil.h"

#define CALL_TIMEOUT_S 120.0        /* ps, inspect, update, logs */
#define CALL_VERSION_TIMEOUT_S 30.0 /* compose version */
#define CALL_UP_TIMEOUT_S 600.0     /* up may pull an image */
#define CALL_STOP_GRACE_S 60.0      /* stop: stop_timeout_s plus this */
#define CALL_OUT_MAX (1u << 20)     /* bytes kept of a call's stdout and of its stderr */
#define EVIDENCE_LINES 20           /* a call's output in the evidence: its first lines... */
#define EVIDENCE_BYTES 4096         /* ...and at most this many bytes */
#define COMPOSE_MAX_BYTES (1u << 20)
#define ENV_FILE_MAX_BYTES (1u << 20)
#define MAX_ENV_FILES 16
#define OVERRIDE_NAME "compose.override.yml"

struct st_compose {
    char *docker;   /* owned: the CLI */
    char *cli;      /* owned: the v1 docker-compose to run, NULL for "DOCKER compose" (v2) */
    char *file;     /* owned: the compose file as passed to -f */
    char *override; /* owned: the override file, NULL for none (the restore) */
    char *service;  /* owned */
    char id[160];   /* the container id from ps -q */
    int64_t restarts_at_up; /* RestartCount at up: more later means the engine restarted it */
    double stop_timeout_s;
};

/* ---- messages and small helpers ---- */

/* Starts a writer that appends one value to b: with a comma first unless b is empty or ends
 * (blanks aside) in '[', '{', ':' or ',' (the caller's open array or key). */
static void jw_begin(struct st_jw *w, struct st_buf *b)
{
    st_jw_init(w, b);
    size_t i = b->len;
    while (i > 0 && isspace((unsigned char)b->data[i - 1])) {
        i--;
    }
    w->comma = i > 0 && strchr("[{:,", b->data[i - 1]) == NULL;
}

/* The first line of b without its end, at most len - 1 bytes, into dst. */
static void first_line(const struct st_buf *b, char *dst, size_t len)
{
    const char *s = st_buf_str(b);
    while (*s == '\n' || *s == '\r') {
        s++;
    }
    size_t n = strcspn(s, "\r\n");
    snprintf(dst, len, "%.*s", (int)n, s);
}

/* path itself when absolute or base is NULL/empty, else base/path. Owned by the caller. */
static char *resolve(const char *base, const char *path)
{
    if (path[0] == '/' || !base || base[0] == '\0') {
        return st_xstrdup(path);
    }
    struct st_buf b;
    st_buf_init(&b);
    st_buf_printf(&b, "%s/%s", base, path);
    return st_buf_take(&b);
}

/* The folder of path ("." when it has none). Owned by the caller. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        return st_xstrdup(".");
    }
    if (slash == path) {
        return st_xstrdup("/");
    }
    return st_xstrndup(path, (size_t)(slash - path));
}

/* Reads path whole into out (cleared first), at most max bytes. Returns 0, ST_ETOOBIG or a
 * negated errno. */
static int read_file(const char *path, size_t max, struct st_buf *out)
{
    st_buf_clear(out);
    return st_fs_read_file(path, max, out);
}

/* ---- the compose file ---- */

/* What the backend reads of the service. Every field owned. */
struct service {
    char *image;   /* NULL when absent */
    char *restart; /* NULL when absent */
    int has_command;
    struct st_arm_argv command;   /* the command's words */
    struct st_arm_argv env;       /* environment entries, "K=V" or "K" */
    struct st_arm_argv env_files; /* env_file paths, resolved against the file's folder */
};

static void service_release(struct service *s)
{
    free(s->image);
    free(s->restart);
    st_arm_argv_release(&s->command);
    st_arm_argv_release(&s->env);
    st_arm_argv_release(&s->env_files);
    memset(s, 0, sizeof(*s));
}

/* Scalar text of n as an owned string, or NULL when n is not a scalar. */
static char *scalar_dup(struct st_yaml *y, struct st_yaml_node *n)
{
    size_t len;
    if (!st_yaml_is_scalar(n)) {
        return NULL;
    }
    const char *s = st_yaml_text(y, n, &len);
    return st_xstrndup(s, len);
}

static int read_command(struct st_yaml *y, struct st_yaml_node *v, struct service *s)
{
    if (st_yaml_is_null(v)) {
        return 0;
    }
    s->has_command = 1;
    if (st_yaml_is_scalar(v)) {
        char *text = scalar_dup(y, v);
        char why[256] = "";
        int rc = st_compose_split(text, &s->command, why, sizeof(why));
        free(text);
        if (rc != 0) {
            (void)st_yaml_fail(y, v, "command: %s", why);
        }
        return rc;
    }
    if (!st_yaml_is_seq(v)) {
        return st_yaml_fail(y, v, "command: expected a string or a list");
    }
    void *it = NULL;
    struct st_yaml_node *item;
    while ((item = st_yaml_seq_next(v, &it)) != NULL) {
        char *w = scalar_dup(y, item);
        if (!w) {
            return st_yaml_fail(y, item, "command: list items must be strings");
        }
        s->command.v = st_xrealloc(s->command.v, (s->command.n + 2) * sizeof(char *));
        s->command.v[s->command.n++] = w;
        s->command.v[s->command.n] = NULL;
    }
    return 0;
}

static int read_environment(struct st_yaml *y, struct st_yaml_node *v, struct service *s)
{
    if (st_yaml_is_null(v)) {
        return 0;
    }
    void *it = NULL;
    if (st_yaml_is_seq(v)) {
        struct st_yaml_node *item;
        while ((item = st_yaml_seq_next(v, &it)) != NULL) {
            char *e = scalar_dup(y, item);
            if (!e) {
                return st_yaml_fail(y, item, "environment: list items must be KEY=VALUE strings");
            }
            st_arm_argv_push(&s->env, e);
            free(e);
        }
        return 0;
    }
    if (!st_yaml_is_map(v)) {
        return st_yaml_fail(y, v, "environment: expected a mapping or a list");
    }
    struct st_yaml_node *kn, *val;
    while (st_yaml_map_next(v, &it, &kn, &val)) {
        char *k = scalar_dup(y, kn);
        if (!k || (!st_yaml_is_null(val) && !st_yaml_is_scalar(val))) {
            free(k);
            return st_yaml_fail(y, st_yaml_either(val, kn),
                                "environment: expected KEY: value pairs");
        }
        struct st_buf e;
        st_buf_init(&e);
        st_buf_puts(&e, k);
        if (!st_yaml_is_null(val)) {
            char *t = scalar_dup(y, val);
            st_buf_printf(&e, "=%s", t);
            free(t);
        }
        st_arm_argv_push(&s->env, st_buf_str(&e));
        st_buf_release(&e);
        free(k);
    }
    return 0;
}

static int read_env_files(struct st_yaml *y, struct st_yaml_node *v, struct service *s,
                          const char *dir)
{
    if (st_yaml_is_null(v)) {
        return 0;
    }
    if (st_yaml_is_scalar(v)) {
        char *path = scalar_dup(y, v);
        char *full = resolve(dir, path);
        st_arm_argv_push(&s->env_files, full);
        free(full);
        free(path);
        return 0;
    }
    if (!st_yaml_is_seq(v)) {
        return st_yaml_fail(y, v, "env_file: expected a string or a list");
    }
    void *it = NULL;
    struct st_yaml_node *item;
    while ((item = st_yaml_seq_next(v, &it)) != NULL) {
        /* Compose also takes {path: FILE, required: false}. */
        struct st_yaml_node *pn = st_yaml_is_map(item) ? st_yaml_get(y, item, "path", NULL) : item;
        char *path = scalar_dup(y, pn);
        if (!path) {
            return st_yaml_fail(y, item, "env_file: list items must be paths");
        }
        if (s->env_files.n >= MAX_ENV_FILES) {
            free(path);
            (void)st_yaml_fail(y, item, "env_file: more than %d files", MAX_ENV_FILES);
            return ST_ETOOBIG;
        }
        char *full = resolve(dir, path);
        st_arm_argv_push(&s->env_files, full);
        free(full);
        free(path);
    }
    return 0;
}

/*
 * Reads service from the compose file text[0..len) (name: its path, for messages and to resolve
 * env files). Returns 0 with *s filled (release it), or ST_EPARSE / ST_ETOOBIG with err.
 */
static int parse_service(const char *name, const char *text, size_t len, const char *service,
                         struct service *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof(*s));
    /* Resolved: anchors, aliases and merge keys (<<: *base) are common in compose files; docker
     * reads the first document only. */
    const struct st_yaml_opts o = {.name = name,
                                   .noun = "a compose file",
                                   .max_bytes = COMPOSE_MAX_BYTES,
                                   .flags = ST_YAML_RESOLVE | ST_YAML_FIRST_DOC};
    struct st_yaml y;
    st_yaml_init(&y, &o, err, errlen);
    int rc = st_yaml_load(&y, text, len);
    if (rc != 0) {
        goto out;
    }
    struct st_yaml_node *services = st_yaml_get(&y, st_yaml_root(&y), "services", NULL);
    struct st_yaml_node *svc = st_yaml_get(&y, services, service, NULL);
    if (!st_yaml_is_map(svc)) {
        rc = st_yaml_fail_at(&y, 0, 0, "no service '%s' under services", service);
        goto out;
    }
    char *dir = dir_of(name);
    s->image = scalar_dup(&y, st_yaml_get(&y, svc, "image", NULL));
    s->restart = scalar_dup(&y, st_yaml_get(&y, svc, "restart", NULL));
    rc = read_command(&y, st_yaml_get(&y, svc, "command", NULL), s);
    if (rc == 0) {
        rc = read_environment(&y, st_yaml_get(&y, svc, "environment", NULL), s);
    }
    if (rc == 0) {
        rc = read_env_files(&y, st_yaml_get(&y, svc, "env_file", NULL), s, dir);
    }
    free(dir);
out:
    st_yaml_release(&y);
    if (rc != 0) {
        service_release(s);
    }
    return rc;
}

/* Reads and parses the plan's compose file; *path gets its resolved path (owned). */
static int load_service(const struct st_arm_plan *p, const struct st_arm_env *env, char **path,
                        struct service *s, struct st_buf *text, char *err, size_t errlen)
{
    *path = resolve(env->plan_dir, p->target->compose_file);
    int rc = read_file(*path, COMPOSE_MAX_BYTES, text);
    if (rc == ST_ETOOBIG) {
        st_errf(err, errlen, "%s: over %u bytes", *path, COMPOSE_MAX_BYTES);
        return rc;
    }
    if (rc != 0) {
        st_errf(err, errlen, "%s: %s", *path, strerror(-rc));
        return rc;
    }
    return parse_service(*path, st_buf_str(text), text->len, p->target->service, s, err, errlen);
}

/* The plan's target is compose; an evidence folder is there when need_dir. */
static int check_target(const struct st_arm_plan *p, const struct st_arm_env *env, int need_dir,
                        char *err, size_t errlen)
{
    if (p->target->kind != ST_TARGET_BACKEND_COMPOSE || !p->target->compose_file ||
        !p->target->service) {
        st_errf(err, errlen,
                "compose: the plan's target is not compose with compose_file and "
                "service");
        return ST_EUSAGE;
    }
    if (need_dir && (!env->dir || env->dir[0] == '\0')) {
        st_errf(err, errlen, "compose: no evidence folder (env->dir)");
        return ST_EUSAGE;
    }
    return 0;
}

/* ---- the override file ---- */

/* A name of p->fixed that the baseline does not name: asserted across arms, not applied. */
static int only_fixed(const struct st_arm_plan *p, const char *name)
{
    return st_target_param_find(p->fixed, name) && !st_target_param_find(p->baseline, name);
}

/* Whether environment entries env hold key. */
static int env_has(const struct st_arm_argv *env, const char *key)
{
    size_t n = strlen(key);
    for (uint32_t i = 0; i < env->n; i++) {
        if (strncmp(env->v[i], key, n) == 0 && (env->v[i][n] == '=' || env->v[i][n] == '\0')) {
            return 1;
        }
    }
    return 0;
}

/*
 * The override's YAML text for ps into out (JSON-quoted scalars are valid YAML), with the names
 * not applied listed in skipped. Returns 0 or ST_EUSAGE (command override of a service without a
 * command) with err.
 */
static int build_override(const struct st_arm_plan *p, const char *arm, const struct service *s,
                          const struct st_target_params *ps, struct st_buf *out,
                          struct st_arm_argv *skipped, char *err, size_t errlen)
{
    int cmd = p->target->override != ST_TARGET_OVERRIDE_ENVIRONMENT;
    if (cmd && !s->has_command) {
        st_errf(err, errlen,
                "compose: service '%s' has no command in the compose file; override: command "
                "rewrites it (write the command out, or use override: environment)",
                p->target->service);
        return ST_EUSAGE;
    }
    st_buf_printf(out, "# Written by servetune for arm %s: the compose file is not changed.\n",
                  arm ? arm : "?");
    st_buf_puts(out, "services:\n  ");
    st_json_quote(out, p->target->service, strlen(p->target->service));
    st_buf_puts(out, ":\n");
    if (cmd) {
        struct st_arm_argv words = {0};
        for (uint32_t i = 0; i < s->command.n; i++) {
            st_arm_argv_push(&words, s->command.v[i]);
        }
        for (uint32_t i = 0; i < ps->n; i++) {
            int fixed = only_fixed(p, ps->v[i].name);
            if (st_compose_rewrite(&words, ps->v[i].name, ps->v[i].value, !fixed) == 0 && fixed) {
                st_arm_argv_push(skipped, ps->v[i].name);
            }
        }
        st_buf_puts(out, "    command: [");
        for (uint32_t i = 0; i < words.n; i++) {
            st_buf_puts(out, i ? ", " : "");
            st_json_quote(out, words.v[i], strlen(words.v[i]));
        }
        st_buf_puts(out, "]\n");
        st_arm_argv_release(&words);
    } else {
        st_buf_puts(out, "    environment:\n");
        for (uint32_t i = 0; i < ps->n; i++) {
            if (only_fixed(p, ps->v[i].name) && !env_has(&s->env, ps->v[i].name)) {
                st_arm_argv_push(skipped, ps->v[i].name);
                continue;
            }
            st_buf_puts(out, "      ");
            st_json_quote(out, ps->v[i].name, strlen(ps->v[i].name));
            st_buf_puts(out, ": ");
            st_json_quote(out, ps->v[i].value, strlen(ps->v[i].value));
            st_buf_putc(out, '\n');
        }
    }
    /* Also set by docker update after up; here it already holds while the container starts, so
     * an arm that dies at start-up is never restarted in a loop. */
    st_buf_puts(out, "    restart: \"no\"\n");
    return 0;
}

/* ---- running the docker CLI ---- */

static void call_init(struct st_compose_call *c)
{
    memset(c, 0, sizeof(*c));
    c->status = -1;
    st_buf_init(&c->out);
    st_buf_init(&c->err);
}

void st_compose_call_release(struct st_compose_call *c)
{
    st_buf_release(&c->out);
    st_buf_release(&c->err);
}

/* The first EVIDENCE_LINES lines of b, at most EVIDENCE_BYTES bytes, as a JSON string. */
static void jw_head(struct st_jw *w, const char *key, const struct st_buf *b)
{
    const char *s = st_buf_str(b);
    size_t n = 0;
    for (int lines = 0; n < b->len && n < EVIDENCE_BYTES && lines < EVIDENCE_LINES; n++) {
        if (s[n] == '\n') {
            lines++;
        }
    }
    st_jw_key(w, key);
    st_jw_strn(w, s, n);
}

/* Appends {"argv", "status", "timed_out", "seconds", "stdout", "stderr"} through w. */
static void call_json(struct st_jw *w, const char *const *argv, const struct st_compose_call *c)
{
    st_jw_obj_open(w);
    st_jw_key(w, "argv");
    st_jw_arr_open(w);
    for (size_t i = 0; argv[i]; i++) {
        st_jw_str(w, argv[i]);
    }
    st_jw_arr_close(w);
    st_jw_ki64(w, "status", c->status);
    st_jw_kbool(w, "timed_out", c->timed_out);
    st_jw_kf64(w, "seconds", round(c->seconds * 1000.0) / 1000.0);
    jw_head(w, "stdout", &c->out);
    jw_head(w, "stderr", &c->err);
    st_jw_obj_close(w);
}

int st_compose_run(const char *const *argv, double timeout_s, struct st_compose_call *c, char *err,
                   size_t errlen)
{
    call_init(c);
    struct st_proc_opts o = {
        .argv = argv,
        .std = {{.kind = ST_PROC_FD_NULL}, {.kind = ST_PROC_FD_PIPE}, {.kind = ST_PROC_FD_PIPE}}};
    struct st_proc_run r;
    st_proc_run_init(&r, (uint64_t)(timeout_s * 1e9), 0, CALL_OUT_MAX, CALL_OUT_MAX);
    int rc = st_proc_run(&o, &r, err, errlen);
    if (rc == 0) {
        c->status = r.status;
        c->timed_out = r.timed_out;
        c->seconds = (double)r.elapsed_ns / 1e9;
        struct st_buf t = c->out;
        c->out = r.out;
        r.out = t;
        t = c->err;
        c->err = r.err;
        r.err = t;
    }
    st_proc_run_release(&r);
    return rc;
}

#define MAX_ARGS 16

/* The argument vector DOCKER compose -f FILE [-f OVERRIDE] words... SERVICE into v. */
static void compose_argv(const struct st_compose *c, const char **v, const char *w1, const char *w2,
                         const char *w3, const char *w4)
{
    size_t n = 0;
    v[n++] = c->cli ? c->cli : c->docker;
    if (!c->cli) {
        v[n++] = "compose";
    }
    v[n++] = "-f";
    v[n++] = c->file;
    if (c->override) {
        v[n++] = "-f";
        v[n++] = c->override;
    }
    const char *w[] = {w1, w2, w3, w4};
    for (size_t i = 0; i < 4; i++) {
        if (w[i]) {
            v[n++] = w[i];
        }
    }
    v[n++] = c->service;
    v[n] = NULL;
}

/* Runs argv, appends the call's evidence through w (may be NULL). As st_compose_run(). */
static int call_run(struct st_jw *w, const char *const *argv, double timeout_s,
                    struct st_compose_call *c, char *err, size_t errlen)
{
    int rc = st_compose_run(argv, timeout_s, c, err, errlen);
    if (w && rc == 0) {
        call_json(w, argv, c);
    }
    return rc;
}

/* The last non-blank line of b (compose prints progress first, the error last) into dst. */
static void last_line(const struct st_buf *b, char *dst, size_t len)
{
    const char *s = st_buf_str(b);
    size_t end = b->len;
    while (end > 0 && isspace((unsigned char)s[end - 1])) {
        end--;
    }
    size_t start = end;
    while (start > 0 && s[start - 1] != '\n' && s[start - 1] != '\r') {
        start--;
    }
    while (start < end && isspace((unsigned char)s[start])) {
        start++;
    }
    snprintf(dst, len, "%.*s", (int)(end - start), s + start);
}

/* A one-line summary of a failed call into dst: "WHAT failed (exit N): last stderr line". */
static void call_fail_detail(const char *what, const struct st_compose_call *c, char *dst,
                             size_t len)
{
    char line[256];
    last_line(c->err.len ? &c->err : &c->out, line, sizeof(line));
    if (c->timed_out) {
        snprintf(dst, len, "%s timed out (killed)%s%s", what, line[0] ? ": " : "", line);
    } else {
        snprintf(dst, len, "%s failed (exit %d)%s%s", what, c->status, line[0] ? ": " : "", line);
    }
}

/* ---- the handle ---- */

static struct st_compose *compose_new(const struct st_arm_plan *p, const struct st_arm_env *env,
                                      const char *file, const char *override)
{
    struct st_compose *c = st_xcalloc(1, sizeof(*c));
    c->docker = st_xstrdup(env->docker && env->docker[0] ? env->docker : "docker");
    c->file = st_xstrdup(file);
    c->override = override ? st_xstrdup(override) : NULL;
    c->service = st_xstrdup(p->target->service);
    int sig_unused; /* compose stop sends the container's own stop signal */
    st_arm_stop_settings(p->target, &sig_unused, &c->stop_timeout_s);
    return c;
}

static void compose_free(struct st_compose *c)
{
    if (!c) {
        return;
    }
    free(c->docker);
    free(c->cli);
    free(c->file);
    free(c->override);
    free(c->service);
    free(c);
}

/*
 * Picks the Compose CLI (compose.h): `DOCKER compose version` exiting 0 is v2; else v1's
 * docker-compose, next to DOCKER when DOCKER is a path with one there, else from PATH. The call
 * goes into the evidence through w (may be NULL). Returns as call_run.
 */
static int pick_cli(struct st_compose *c, struct st_jw *w, char *err, size_t errlen)
{
    const char *argv[] = {c->docker, "compose", "version", NULL};
    struct st_compose_call k;
    int rc = call_run(w, argv, CALL_VERSION_TIMEOUT_S, &k, err, errlen);
    if (rc != 0) {
        return rc;
    }
    int v2 = k.status == 0 && !k.timed_out;
    st_compose_call_release(&k);
    st_freep(&c->cli);
    if (v2) {
        return 0;
    }
    const char *slash = strrchr(c->docker, '/');
    struct st_buf b;
    st_buf_init(&b);
    if (slash) {
        st_buf_printf(&b, "%.*s/", (int)(slash - c->docker), c->docker);
    }
    st_buf_puts(&b, "docker-compose");
    if (slash && access(st_buf_str(&b), X_OK) != 0) {
        st_buf_clear(&b);
        st_buf_puts(&b, "docker-compose");
    }
    c->cli = st_buf_take(&b);
    return 0;
}

/* Runs compose ps -q; the first line of its output into c->id. As call_run. */
static int find_container(struct st_compose *c, struct st_jw *w, struct st_compose_call *k,
                          char *err, size_t errlen)
{
    const char *argv[MAX_ARGS];
    compose_argv(c, argv, "ps", "-a", "-q", NULL);
    int rc = call_run(w, argv, CALL_TIMEOUT_S, k, err, errlen);
    c->id[0] = '\0';
    if (rc == 0 && k->status == 0) {
        first_line(&k->out, c->id, sizeof(c->id));
    }
    return rc;
}

/* Runs docker inspect ID and parses it. Returns as call_run; *parsed 1 when in is filled. */
static int inspect_container(const struct st_compose *c, struct st_jw *calls,
                             struct st_compose_call *k, struct st_compose_inspect *in, int *parsed,
                             char *err, size_t errlen)
{
    const char *argv[] = {c->docker, "inspect", c->id, NULL};
    *parsed = 0;
    memset(in, 0, sizeof(*in));
    int rc = call_run(calls, argv, CALL_TIMEOUT_S, k, err, errlen);
    if (rc == 0 && k->status == 0 &&
        st_compose_inspect_parse(st_buf_str(&k->out), k->out.len, in, NULL) == 0) {
        *parsed = 1;
    }
    return rc;
}

/* Stops the service (compose stop -t), recording the call through w. Returns as call_run. */
static int stop_service(const struct st_compose *c, struct st_jw *w, struct st_compose_call *k,
                        char *err, size_t errlen)
{
    char t[32];
    snprintf(t, sizeof(t), "%.0f", ceil(c->stop_timeout_s));
    const char *argv[MAX_ARGS];
    compose_argv(c, argv, "stop", "-t", t, NULL);
    return call_run(w, argv, c->stop_timeout_s + CALL_STOP_GRACE_S, k, err, errlen);
}

/* ---- up ---- */

/*
 * The calls of st_compose_up through w (an open array): up, ps -q, update, inspect. Returns 0
 * with *fail set (and detail when not OK) and *in filled when *inspected, or an error of ours.
 */
/* One call of up_calls: k (released first) gets it. 0 when it ran and exited 0; 1 when it ran
 * and failed, with call_fail_detail's line in detail; or call_run's error. */
static int up_call(struct st_jw *w, const char *const *argv, double timeout_s, const char *what,
                   struct st_compose_call *k, char *detail, size_t dlen, char *err, size_t errlen)
{
    st_compose_call_release(k);
    int rc = call_run(w, argv, timeout_s, k, err, errlen);
    if (rc == 0 && k->status != 0) {
        call_fail_detail(what, k, detail, dlen);
        return 1;
    }
    return rc;
}

static int up_calls(struct st_compose *c, int experiment, struct st_jw *w,
                    struct st_compose_inspect *in, int *inspected, enum st_arm_fail *fail,
                    char *detail, size_t dlen, char *err, size_t errlen)
{
    struct st_compose_call k;
    memset(&k, 0, sizeof(k));
    const char *argv[MAX_ARGS];
    *fail = ST_ARM_FAIL_START;
    *inspected = 0;
    int rc = pick_cli(c, w, err, errlen);
    if (rc != 0) {
        goto out;
    }
    compose_argv(c, argv, "up", "-d", "--force-recreate", NULL);
    rc = up_call(w, argv, CALL_UP_TIMEOUT_S, "docker compose up", &k, detail, dlen, err, errlen);
    if (rc != 0) {
        goto out;
    }
    st_compose_call_release(&k);
    rc = find_container(c, w, &k, err, errlen);
    if (rc != 0) {
        goto out;
    }
    if (k.status != 0 || c->id[0] == '\0') {
        if (k.status != 0) {
            call_fail_detail("docker compose ps -a -q", &k, detail, dlen);
        } else {
            snprintf(detail, dlen, "docker compose ps -a -q: no container for service %s after up",
                     c->service);
        }
        goto out;
    }
    if (experiment) {
        const char *uv[] = {c->docker, "update", "--restart=no", c->id, NULL};
        rc = up_call(w, uv, CALL_TIMEOUT_S, "docker update --restart=no", &k, detail, dlen, err,
                     errlen);
        if (rc != 0) {
            goto out;
        }
    }
    st_compose_call_release(&k);
    rc = inspect_container(c, w, &k, in, inspected, err, errlen);
    if (rc != 0) {
        goto out;
    }
    if (!*inspected) {
        call_fail_detail("docker inspect", &k, detail, dlen);
        if (k.status == 0) {
            snprintf(detail, dlen, "docker inspect %s: not the expected JSON", c->id);
        }
        goto out;
    }
    c->restarts_at_up = in->restart_count;
    if (experiment && strcmp(in->restart, "no") != 0) {
        snprintf(detail, dlen, "restart policy of %s is '%s' after docker update --restart=no",
                 c->id, in->restart);
        goto out;
    }
    *fail = ST_ARM_OK;
out:
    st_compose_call_release(&k);
    return rc > 0 ? 0 : rc; /* a failed call is the arm's failure (*fail), not an error */
}

/* Writes the arm's override file DIR/compose.override.yml (*opath: its path, owned; text in ov,
 * names not applied in skipped). Returns 0 or an error with err. */
static int write_override(const struct st_arm_plan *p, const char *arm, const struct service *s,
                          const struct st_target_params *ps, const char *dir, char **opath,
                          struct st_buf *ov, struct st_arm_argv *skipped, char *err, size_t errlen)
{
    int rc = build_override(p, arm, s, ps, ov, skipped, err, errlen);
    if (rc != 0) {
        return rc;
    }
    *opath = resolve(dir, OVERRIDE_NAME);
    rc = st_fs_write_atomic(*opath, ov->data, ov->len, 0644);
    if (rc != 0) {
        st_errf(err, errlen, "%s: %s", *opath, st_strerror(rc));
    }
    return rc;
}

/* The head of up's evidence object through w: what is brought up and how. */
static void up_head(struct st_jw *w, const char *arm, const struct st_compose *c,
                    const struct st_buf *ov, const struct st_arm_argv *skipped)
{
    st_jw_kstr(w, "op", c->override ? "up" : "up_restore");
    if (arm) {
        st_jw_kstr(w, "arm", arm);
    }
    st_jw_kstr(w, "compose_file", c->file);
    st_jw_kstr(w, "service", c->service);
    st_jw_key(w, "override_file");
    if (!c->override) {
        st_jw_null(w);
        return;
    }
    st_jw_str(w, c->override);
    st_jw_kstr(w, "override", st_buf_str(ov));
    st_jw_key(w, "not_applied");
    st_jw_arr_open(w);
    for (uint32_t i = 0; i < skipped->n; i++) {
        st_jw_str(w, skipped->v[i]);
    }
    st_jw_arr_close(w);
}

/* Runs up's calls for c, writing the whole evidence object through w. Returns as st_compose_up
 * (0, a positive fail with detail, or an error with err); c stays the caller's. */
static int up_run(struct st_compose *c, const char *arm, const struct st_buf *ov,
                  const struct st_arm_argv *skipped, struct st_jw *w, char *detail, size_t dlen,
                  char *err, size_t errlen)
{
    int experiment = c->override != NULL;
    st_jw_obj_open(w);
    up_head(w, arm, c, ov, skipped);
    st_jw_key(w, "calls");
    st_jw_arr_open(w);
    struct st_compose_inspect in;
    int inspected;
    enum st_arm_fail fail;
    char why[512] = "";
    int rc = up_calls(c, experiment, w, &in, &inspected, &fail, why, sizeof(why), err, errlen);
    if ((rc != 0 || fail != ST_ARM_OK) && experiment) {
        /* An arm that did not come up is not left behind: the caller gets no handle to stop. */
        struct st_compose_call k;
        char e2[256];
        if (stop_service(c, w, &k, e2, sizeof(e2)) == 0) {
            st_compose_call_release(&k);
        }
    }
    st_jw_arr_close(w);
    st_jw_kstr(w, "compose_cli", c->cli ? c->cli : "docker compose");
    st_jw_kstr(w, "container", c->id);
    if (inspected) {
        st_jw_key(w, "inspect");
        st_compose_inspect_json(w, &in);
        st_jw_obj_close(w);
    }
    st_jw_kstr(w, "result", rc != 0 ? "error" : st_arm_fail_name(fail));
    st_jw_kstr(w, "detail", rc != 0 ? (err ? err : "") : why);
    st_jw_obj_close(w);
    if (rc == 0 && fail != ST_ARM_OK) {
        if (detail && dlen > 0) {
            snprintf(detail, dlen, "%s", why);
        }
        rc = (int)fail;
    }
    return rc;
}

int st_compose_up(const struct st_arm_plan *p, const char *arm, const struct st_target_params *ps,
                  const struct st_arm_env *env, struct st_compose **out, struct st_buf *json,
                  char *detail, size_t dlen, char *err, size_t errlen)
{
    *out = NULL;
    if (detail && dlen > 0) {
        detail[0] = '\0';
    }
    int rc = check_target(p, env, ps != NULL, err, errlen);
    if (rc != 0) {
        return rc;
    }
    char *file = NULL, *opath = NULL;
    struct service s;
    struct st_buf text, ov, scratch;
    struct st_arm_argv skipped = {0};
    st_buf_init(&text);
    st_buf_init(&ov);
    st_buf_init(&scratch);
    memset(&s, 0, sizeof(s));
    rc = load_service(p, env, &file, &s, &text, err, errlen);
    if (rc == 0 && ps) {
        rc = write_override(p, arm, &s, ps, env->dir, &opath, &ov, &skipped, err, errlen);
    }
    if (rc == 0) {
        struct st_compose *c = compose_new(p, env, file, opath);
        struct st_jw w;
        jw_begin(&w, json ? json : &scratch);
        rc = up_run(c, arm, &ov, &skipped, &w, detail, dlen, err, errlen);
        if (rc == 0) {
            *out = c;
        } else {
            compose_free(c);
        }
    }
    free(file);
    free(opath);
    service_release(&s);
    st_arm_argv_release(&skipped);
    st_buf_release(&text);
    st_buf_release(&ov);
    st_buf_release(&scratch);
    return rc;
}

/* ---- watching, logs, stopping ---- */

/* Lines of a dying server that mean it ran out of memory (vLLM, PyTorch, CUDA). */
static const char *const oom_patterns[] = {
    "out of memory",
    "OutOfMemoryError",
    "No available memory for the cache blocks",
    NULL,
};

/* The last line of log holding an OOM pattern, into dst (empty when none). */
static void oom_line(const struct st_buf *log, char *dst, size_t len)
{
    dst[0] = '\0';
    const char *s = st_buf_str(log);
    while (*s) {
        size_t n = strcspn(s, "\n");
        for (size_t i = 0; oom_patterns[i]; i++) {
            const char *hit = memmem(s, n, oom_patterns[i], strlen(oom_patterns[i]));
            if (hit) {
                snprintf(dst, len, "%.*s", (int)n, s);
                break;
            }
        }
        s += n;
        if (*s == '\n') {
            s++;
        }
    }
}

/* docker logs --tail lines ID: stdout then stderr into out (cleared first). As st_compose_run(). */
static int fetch_logs(const struct st_compose *c, unsigned lines, struct st_buf *out,
                      struct st_compose_call *k)
{
    char n[32];
    snprintf(n, sizeof(n), "%u", lines);
    const char *argv[] = {c->docker, "logs", "--tail", n, c->id, NULL};
    char e[256];
    int rc = call_run(NULL, argv, CALL_TIMEOUT_S, k, e, sizeof(e));
    st_buf_clear(out);
    if (rc == 0) {
        st_buf_append(out, k->out.data ? k->out.data : "", k->out.len);
        st_buf_append(out, k->err.data ? k->err.data : "", k->err.len);
    }
    return rc;
}

enum st_arm_fail st_compose_check(struct st_compose *c, char *detail, size_t len)
{
    if (detail && len > 0) {
        detail[0] = '\0';
    }
    if (!c || c->id[0] == '\0') {
        snprintf(detail, len, "no container");
        return ST_ARM_FAIL_EXIT;
    }
    struct st_compose_call k;
    struct st_compose_inspect in;
    int parsed;
    char e[256];
    int rc = inspect_container(c, NULL, &k, &in, &parsed, e, sizeof(e));
    if (rc == 0 && !parsed) {
        /* One failed inspect is not yet a dead server: the CLI gets a second chance. */
        st_compose_call_release(&k);
        struct timespec ts = {0, 200 * 1000 * 1000};
        nanosleep(&ts, NULL);
        rc = inspect_container(c, NULL, &k, &in, &parsed, e, sizeof(e));
    }
    if (rc != 0) {
        snprintf(detail, len, "docker inspect %s: %s", c->id, e);
        return ST_ARM_FAIL_EXIT;
    }
    if (!parsed) {
        call_fail_detail("docker inspect", &k, detail, len);
        if (k.status == 0) {
            snprintf(detail, len, "docker inspect %s: not the expected JSON", c->id);
        }
        st_compose_call_release(&k);
        return ST_ARM_FAIL_EXIT;
    }
    st_compose_call_release(&k);
    int64_t restarts = in.restart_count - c->restarts_at_up;
    if (in.restarting || restarts > 0) {
        /* The engine brought it back (Running reads true meanwhile): the server died. */
        snprintf(detail, len,
                 "container %.24s was restarted by the engine (restart policy %s): %lld restart(s) "
                 "since up%s, status %s, last exit code %lld%s",
                 c->id, in.restart[0] ? in.restart : "no", (long long)restarts,
                 in.restarting ? ", restarting now" : "", in.status, (long long)in.exit_code,
                 in.oom_killed ? ", OOMKilled" : "");
        return in.oom_killed ? ST_ARM_FAIL_OOM : ST_ARM_FAIL_EXIT;
    }
    if (in.running) {
        return ST_ARM_OK;
    }
    if (in.oom_killed) {
        snprintf(detail, len, "container %.24s: OOMKilled (status %s, exit code %lld)", c->id,
                 in.status, (long long)in.exit_code);
        return ST_ARM_FAIL_OOM;
    }
    /* vLLM's start-up OOM is an exception, not the kernel's OOM killer: look at the log. */
    struct st_buf log;
    st_buf_init(&log);
    char line[256] = "";
    if (fetch_logs(c, 200, &log, &k) == 0) {
        oom_line(&log, line, sizeof(line));
        st_compose_call_release(&k);
    }
    st_buf_release(&log);
    if (line[0]) {
        snprintf(detail, len, "container %.24s exited (exit code %lld); log: %s", c->id,
                 (long long)in.exit_code, line);
        return ST_ARM_FAIL_OOM;
    }
    snprintf(detail, len, "container %.24s is not running (status %s, exit code %lld)", c->id,
             in.status, (long long)in.exit_code);
    return ST_ARM_FAIL_EXIT;
}

void st_compose_logs(struct st_compose *c, size_t max, struct st_buf *out)
{
    if (!c || c->id[0] == '\0' || max == 0) {
        return;
    }
    /* Lines of about 64 bytes, within [50, 10000]; the bytes are cut to max below. */
    size_t lines = max / 64 + 1;
    lines = lines < 50 ? 50 : lines > 10000 ? 10000 : lines;
    struct st_buf log;
    struct st_compose_call k;
    st_buf_init(&log);
    if (fetch_logs(c, (unsigned)lines, &log, &k) == 0) {
        size_t from = log.len > max ? log.len - max : 0;
        st_buf_append(out, log.data ? log.data + from : "", log.len - from);
        st_compose_call_release(&k);
    }
    st_buf_release(&log);
}

int st_compose_release(struct st_compose *c, int leave_running, struct st_buf *json)
{
    if (!c) {
        return 0;
    }
    if (leave_running) {
        compose_free(c);
        return 0;
    }
    struct st_buf scratch;
    st_buf_init(&scratch);
    struct st_jw w;
    jw_begin(&w, json ? json : &scratch);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "op", "stop");
    st_jw_kstr(&w, "container", c->id);
    st_jw_kf64(&w, "stop_timeout_s", c->stop_timeout_s);
    st_jw_key(&w, "calls");
    st_jw_arr_open(&w);
    uint64_t t0 = st_clock_mono_ns();
    struct st_compose_call k;
    char e[256] = "";
    int rc = stop_service(c, &w, &k, e, sizeof(e));
    char why[512] = "";
    if (rc == 0) {
        if (k.timed_out) {
            rc = ST_ETIMEOUT;
        } else if (k.status != 0) {
            rc = -EIO;
        }
        if (rc != 0) {
            call_fail_detail("docker compose stop", &k, why, sizeof(why));
        }
        st_compose_call_release(&k);
    } else {
        snprintf(why, sizeof(why), "%s", e);
    }
    struct st_compose_inspect in;
    int parsed = 0;
    if (rc == 0 && c->id[0] && inspect_container(c, &w, &k, &in, &parsed, e, sizeof(e)) == 0) {
        st_compose_call_release(&k);
        if (parsed && in.running) {
            rc = -EIO;
            snprintf(why, sizeof(why), "container %.24s still runs after docker compose stop",
                     c->id);
        }
    }
    st_jw_arr_close(&w);
    st_jw_kbool(&w, "stopped", rc == 0);
    st_jw_kf64(&w, "seconds", round((double)(st_clock_mono_ns() - t0) / 1e6) / 1e3);
    if (parsed) {
        st_jw_ki64(&w, "exit_code", in.exit_code);
    }
    st_jw_kstr(&w, "detail", why);
    st_jw_obj_close(&w);
    st_buf_release(&scratch);
    compose_free(c);
    return rc;
}

/* ---- the starting state and its proof ---- */

/* Writes {"path", "exists", "sha256", "bytes", "saved"} for file path (its bytes in data) through
 * w and a copy of it, with mode, to saved_dir/PREFIX+NAME. Returns 0 or an error with err. */
static int save_copy(struct st_jw *w, const char *path, const struct st_buf *data,
                     const char *saved_dir, const char *prefix, mode_t mode, char *err,
                     size_t errlen)
{
    char hex[ST_SHA256_HEX];
    st_sha256_hex(data->data, data->len, hex);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    struct st_buf copy;
    st_buf_init(&copy);
    st_buf_printf(&copy, "%s/%s%s", saved_dir, prefix, base);
    int rc = st_fs_write_atomic(st_buf_str(&copy), data->data ? data->data : "", data->len, mode);
    if (rc != 0) {
        st_errf(err, errlen, "%s: %s", st_buf_str(&copy), st_strerror(rc));
    } else {
        st_jw_obj_open(w);
        st_jw_kstr(w, "path", path);
        st_jw_kbool(w, "exists", 1);
        st_jw_kstr(w, "sha256", hex);
        st_jw_ku64(w, "bytes", data->len);
        st_jw_kstr(w, "saved", st_buf_str(&copy));
        st_jw_obj_close(w);
    }
    st_buf_release(&copy);
    return rc;
}

/* The state object of st_compose_save_state through w; as st_compose_save_state. */
static int save_state(const struct st_arm_plan *p, const struct st_arm_env *env, struct st_jw *w,
                      char *err, size_t errlen)
{
    char *file = NULL, *saved_dir = NULL;
    struct service s;
    struct st_buf text, data;
    st_buf_init(&text);
    st_buf_init(&data);
    struct st_compose *c = NULL;
    int rc = load_service(p, env, &file, &s, &text, err, errlen);
    if (rc != 0) {
        free(file);
        st_buf_release(&text);
        return rc;
    }
    saved_dir = resolve(env->dir, "saved");
    if (mkdir(saved_dir, 0755) != 0 && errno != EEXIST) {
        rc = -errno;
        st_errf(err, errlen, "%s: %s", saved_dir, strerror(errno));
        goto out;
    }
    st_jw_obj_open(w);
    st_jw_kstr(w, "kind", "compose");
    st_jw_kstr(w, "service", p->target->service);
    st_jw_key(w, "compose_file");
    rc = save_copy(w, file, &text, saved_dir, "compose-", 0644, err, errlen);
    if (rc != 0) {
        goto out;
    }
    st_jw_key(w, "env_files");
    st_jw_arr_open(w);
    for (uint32_t i = 0; i < s.env_files.n && rc == 0; i++) {
        const char *path = s.env_files.v[i];
        rc = read_file(path, ENV_FILE_MAX_BYTES, &data);
        if (rc == -ENOENT) {
            rc = 0;
            st_jw_obj_open(w);
            st_jw_kstr(w, "path", path);
            st_jw_kbool(w, "exists", 0);
            st_jw_obj_close(w);
        } else if (rc != 0) {
            st_errf(err, errlen, "%s: %s", path, st_strerror(rc));
        } else {
            char prefix[32];
            snprintf(prefix, sizeof(prefix), "env-%u-", i);
            /* Env files often hold tokens: their copies are the owner's only. */
            rc = save_copy(w, path, &data, saved_dir, prefix, 0600, err, errlen);
        }
    }
    if (rc != 0) {
        goto out;
    }
    st_jw_arr_close(w);
    st_jw_key(w, "declared");
    st_jw_obj_open(w);
    st_jw_kstr(w, "image", s.image ? s.image : "");
    st_jw_kstr(w, "restart", s.restart ? s.restart : "");
    st_jw_obj_close(w);
    c = compose_new(p, env, file, NULL);
    st_jw_key(w, "calls");
    st_jw_arr_open(w);
    struct st_compose_call k;
    rc = pick_cli(c, w, err, errlen);
    if (rc == 0) {
        rc = find_container(c, w, &k, err, errlen);
    }
    if (rc != 0) {
        goto out;
    }
    if (k.status != 0) {
        call_fail_detail("docker compose ps -a -q", &k, err, errlen);
        st_compose_call_release(&k);
        rc = -EIO;
        goto out;
    }
    st_compose_call_release(&k);
    struct st_compose_inspect in;
    int parsed = 0;
    if (c->id[0]) {
        rc = inspect_container(c, w, &k, &in, &parsed, err, errlen);
        if (rc != 0) {
            goto out;
        }
        if (!parsed) {
            call_fail_detail("docker inspect", &k, err, errlen);
            st_compose_call_release(&k);
            rc = -EIO;
            goto out;
        }
        /* Again through the writer, with Cmd and the names of Env. */
        st_jw_arr_close(w);
        st_jw_key(w, "inspect");
        rc = st_compose_inspect_parse(st_buf_str(&k.out), k.out.len, &in, w);
        st_compose_call_release(&k);
        if (rc != 0) {
            goto out;
        }
    } else {
        st_jw_arr_close(w);
    }
    st_jw_kstr(w, "container", c->id);
    /* Without a running container the policy the compose file declares comes back at up. */
    st_jw_kstr(w, "restart_policy", parsed ? in.restart : s.restart ? s.restart : "no");
    st_jw_kstr(w, "restart_policy_source", parsed ? "inspect" : "compose_file");
    st_jw_kstr(w, "image", parsed ? in.image : "");
    st_jw_kbool(w, "running", parsed && in.running && !in.restarting);
    /* A stopped container keeps the health status of its last check: not the health now. */
    st_jw_kstr(w, "health", parsed && in.running ? in.health : "");
    st_jw_kstr(w, "last_health", parsed && !in.running ? in.health : "");
    st_jw_ki64(w, "restart_count", parsed ? in.restart_count : 0);
    st_jw_kbool(w, "oom_killed", parsed && in.oom_killed);
    st_jw_obj_close(w);
out:
    compose_free(c);
    free(file);
    free(saved_dir);
    service_release(&s);
    st_buf_release(&text);
    st_buf_release(&data);
    return rc;
}

int st_compose_save_state(const struct st_arm_plan *p, const struct st_arm_env *env,
                          struct st_buf *json, char *err, size_t errlen)
{
    int rc = check_target(p, env, 1, err, errlen);
    if (rc != 0) {
        return rc;
    }
    /* Built aside, so that an error leaves json as it was. */
    struct st_buf obj;
    st_buf_init(&obj);
    struct st_jw w;
    st_jw_init(&w, &obj);
    rc = save_state(p, env, &w, err, errlen);
    if (rc == 0) {
        jw_begin(&w, json);
        st_jw_raw(&w, obj.data, obj.len);
    }
    st_buf_release(&obj);
    return rc;
}

/* One {"name", "ok", "detail"} through w; clears *all when not ok. */
static void check_json(struct st_jw *w, int *all, const char *name, int ok, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void check_json(struct st_jw *w, int *all, const char *name, int ok, const char *fmt, ...)
{
    char detail[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    st_jw_obj_open(w);
    st_jw_kstr(w, "name", name);
    st_jw_kbool(w, "ok", ok);
    st_jw_kstr(w, "detail", detail);
    st_jw_obj_close(w);
    if (!ok) {
        *all = 0;
    }
}

/* The string at key of object obj into dst ("" when absent). */
static void get_str(const struct st_json *d, int obj, const char *key, char *dst, size_t len)
{
    st_compose_json_str(d, st_json_get(d, obj, key), dst, len);
}

/* Checks one saved file entry (object i of the saved state) against the file now. */
static void prove_file(struct st_jw *w, int *all, const char *what, const struct st_json *d, int i)
{
    char path[1024], saved[ST_SHA256_HEX], now[ST_SHA256_HEX], name[1100];
    get_str(d, i, "path", path, sizeof(path));
    get_str(d, i, "sha256", saved, sizeof(saved));
    int existed = st_json_bool(d, st_json_get(d, i, "exists")) == 1;
    snprintf(name, sizeof(name), "%s_sha256:%s", what, path);
    struct st_buf data;
    st_buf_init(&data);
    int rc = read_file(path, COMPOSE_MAX_BYTES, &data);
    if (!existed) {
        check_json(w, all, name, rc == -ENOENT, "%s: absent before, %s now", path,
                   rc == -ENOENT ? "absent" : "present");
    } else if (rc != 0) {
        check_json(w, all, name, 0, "%s: %s (saved %s)", path, st_strerror(rc), saved);
    } else {
        st_sha256_hex(data.data, data.len, now);
        check_json(w, all, name, strcmp(now, saved) == 0, "%s: saved %s, now %s", path, saved, now);
    }
    st_buf_release(&data);
}

/* The checks that need docker: restart policy set back, running, OOMKilled, image. */
static int prove_container(struct st_compose *c, struct st_jw *w, int *all, const char *policy,
                           const char *image, char *err, size_t errlen)
{
    if (!c || c->id[0] == '\0') {
        check_json(w, all, "container_running", 0, "no container after up");
        return 0;
    }
    struct st_compose_call k;
    char arg[96];
    snprintf(arg, sizeof(arg), "--restart=%s", policy[0] ? policy : "no");
    const char *uv[] = {c->docker, "update", arg, c->id, NULL};
    int rc = call_run(NULL, uv, CALL_TIMEOUT_S, &k, err, errlen);
    if (rc != 0) {
        return rc;
    }
    char why[512];
    call_fail_detail("docker update", &k, why, sizeof(why));
    check_json(w, all, "restart_policy_set", k.status == 0 && !k.timed_out,
               "docker update %s %s: %s", arg, c->id, k.status == 0 ? "exit 0" : why);
    st_compose_call_release(&k);
    struct st_compose_inspect in;
    int parsed;
    rc = inspect_container(c, NULL, &k, &in, &parsed, err, errlen);
    if (rc != 0) {
        return rc;
    }
    if (!parsed) {
        call_fail_detail("docker inspect", &k, why, sizeof(why));
        check_json(w, all, "container_running", 0, "%s", why);
        st_compose_call_release(&k);
        return 0;
    }
    st_compose_call_release(&k);
    check_json(w, all, "container_running", in.running && !in.restarting,
               "container %.24s: status %s, pid %lld, restarts %lld", c->id, in.status,
               (long long)in.pid, (long long)in.restart_count);
    check_json(w, all, "oom_killed_false", !in.oom_killed, "OOMKilled %s",
               in.oom_killed ? "true" : "false");
    /* Docker reports an unset policy as "" or "no". */
    const char *now = in.restart[0] ? in.restart : "no";
    const char *want = policy[0] ? policy : "no";
    check_json(w, all, "restart_policy", strcmp(now, want) == 0, "saved %s, now %s", want, now);
    if (image[0]) {
        check_json(w, all, "image", strcmp(in.image, image) == 0, "saved %s, now %s", image,
                   in.image);
    }
    return 0;
}

int st_compose_prove(struct st_compose *c, const struct st_arm_plan *p,
                     const struct st_arm_env *env, const char *saved, size_t saved_len,
                     struct st_buf *json, int *ok, char *err, size_t errlen)
{
    (void)env;
    *ok = 0;
    struct st_json d;
    st_json_init(&d, 0);
    int rc = st_json_parse(&d, saved, saved_len);
    int root = 0;
    if (rc == 0 && st_json_get(&d, 0, "compose_file") < 0) {
        root = st_json_get(&d, 0, "compose"); /* the state wrapped by the caller */
    }
    if (rc != 0 || st_json_type(&d, st_json_get(&d, root, "compose_file")) != ST_JSON_OBJECT) {
        st_json_release(&d);
        st_errf(err, errlen, "compose: the saved state is not st_compose_save_state's object");
        return ST_EPARSE;
    }
    if (!st_json_streq(&d, st_json_get(&d, root, "service"), p->target->service)) {
        st_json_release(&d);
        st_errf(err, errlen, "compose: the saved state is not of service %s", p->target->service);
        return ST_EPARSE;
    }
    struct st_buf checks;
    st_buf_init(&checks);
    struct st_jw w;
    st_jw_init(&w, &checks);
    int all = 1;
    prove_file(&w, &all, "compose_file", &d, st_json_get(&d, root, "compose_file"));
    int files = st_json_get(&d, root, "env_files");
    for (int i = st_json_first(&d, files); i >= 0; i = st_json_next(&d, files, i)) {
        prove_file(&w, &all, "env_file", &d, i);
    }
    char policy[64], image[160];
    get_str(&d, root, "restart_policy", policy, sizeof(policy));
    get_str(&d, root, "image", image, sizeof(image));
    rc = prove_container(c, &w, &all, policy, image, err, errlen);
    if (rc == 0) {
        jw_begin(&w, json);
        /* The checks are several values of the caller's array: appended as they are. */
        if (w.comma && checks.len > 0) {
            st_buf_putc(json, ',');
        }
        st_buf_append(json, checks.data ? checks.data : "", checks.len);
        *ok = all;
    }
    st_buf_release(&checks);
    st_json_release(&d);
    return rc;
}
