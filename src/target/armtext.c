/*
 * The arm lifecycle's pure parts (declared in arm.h, tested by tests/unit/test_target_arm.c):
 * what an arm's parameters become (the command template, the sim's argv) and what a server's
 * words mean (an out-of-memory line in its log, the line that says why it ended, a reported
 * value equal to the plan's, an argument in vLLM's "non-default args" line, the name of a
 * failure). No I/O.
 */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/names.h"
#include "base/xalloc.h"
#include "target/arm.h"
#include "target/server.h"

static int name_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.';
}

int st_arm_template(const char *tmpl, const struct st_target_params *ps, struct st_buf *out,
                    char *err, size_t errlen)
{
    const char *s = tmpl;
    while (*s != '\0') {
        const char *open = strchr(s, '{');
        if (!open) {
            st_buf_puts(out, s);
            return 0;
        }
        st_buf_append(out, s, (size_t)(open - s));
        const char *close = strchr(open + 1, '}');
        size_t n = close ? (size_t)(close - open - 1) : 0;
        int ok = close && n > 0 && n < ST_TARGET_NAME_MAX;
        for (size_t i = 0; ok && i < n; i++) {
            ok = name_char(open[1 + i]);
        }
        if (!ok) {
            st_errf(
                err, errlen,
                "target.start: '{' at byte %zu is not a placeholder {name} (there is no escape)",
                (size_t)(open - tmpl));
            return ST_EUSAGE;
        }
        char name[ST_TARGET_NAME_MAX];
        memcpy(name, open + 1, n);
        name[n] = '\0';
        const struct st_target_param *v = st_target_param_find(ps, name);
        if (!v) {
            st_errf(err, errlen, "target.start: {%s}: the arm has no parameter %s", name, name);
            return ST_EUSAGE;
        }
        st_buf_puts(out, v->value);
        s = close + 1;
    }
    return 0;
}

void st_arm_stop_settings(const struct st_target_spec *t, int *sig, double *timeout_s)
{
    *sig = t->stop_signal > 0 ? t->stop_signal : SIGTERM;
    *timeout_s = t->stop_timeout_s > 0 ? t->stop_timeout_s : 60;
}

void st_arm_argv_pushn(struct st_arm_argv *a, const char *s, size_t n)
{
    a->v = st_xrealloc(a->v, ((size_t)a->n + 2) * sizeof(*a->v));
    a->v[a->n++] = st_xstrndup(s, n);
    a->v[a->n] = NULL;
}

void st_arm_argv_push(struct st_arm_argv *a, const char *s)
{
    st_arm_argv_pushn(a, s, strlen(s));
}

void st_arm_argv_release(struct st_arm_argv *a)
{
    for (uint32_t i = 0; i < a->n; i++) {
        free(a->v[i]);
    }
    free(a->v);
    a->v = NULL;
    a->n = 0;
}

/* One parameter onto the sim's command line (see st_arm_sim_argv). */
static int sim_param(const struct st_target_param *v, struct st_arm_argv *out,
                     struct st_buf *faults, struct st_buf *not_applied, char *err, size_t errlen)
{
    if (strncmp(v->name, "fault.", 6) == 0) {
        if (strpbrk(v->value, ",=") || v->name[6] == '\0') {
            st_errf(err, errlen, "%s: a fault value cannot hold ',' or '=' (got '%s')", v->name,
                    v->value);
            return ST_EUSAGE;
        }
        st_buf_printf(faults, "%s%s=%s", faults->len ? "," : "", v->name + 6, v->value);
        return 0;
    }
    if (strchr(v->name, '.')) {
        struct st_buf a;
        st_buf_init(&a);
        st_buf_printf(&a, "%s=%s", v->name, v->value);
        st_arm_argv_push(out, "--set");
        st_arm_argv_push(out, a.data);
        st_buf_release(&a);
        return 0;
    }
    if (not_applied) {
        st_buf_printf(not_applied, "%s: not applied by the sim (no '.': not a profile key)\n",
                      v->name);
    }
    return 0;
}

int st_arm_sim_argv(const char *self_exe, const char *profile,
                    const struct st_target_params *overrides, const struct st_target_params *ps,
                    double speed, uint64_t seed, uint64_t noise_seed, struct st_arm_argv *out,
                    struct st_buf *not_applied, char *err, size_t errlen)
{
    struct st_buf faults;
    st_buf_init(&faults);
    int rc = 0;
    st_arm_argv_push(out, self_exe);
    st_arm_argv_push(out, "sim");
    st_arm_argv_push(out, "--profile");
    st_arm_argv_push(out, profile);
    for (uint32_t i = 0; rc == 0 && overrides && i < overrides->n; i++) {
        rc = sim_param(&overrides->v[i], out, &faults, not_applied, err, errlen);
    }
    for (uint32_t i = 0; rc == 0 && ps && i < ps->n; i++) {
        rc = sim_param(&ps->v[i], out, &faults, not_applied, err, errlen);
    }
    if (rc == 0) {
        char num[64];
        if (faults.len) {
            st_arm_argv_push(out, "--fault");
            st_arm_argv_push(out, faults.data);
        }
        if (speed >= ST_ARM_SPEED_MAX) {
            st_arm_argv_push(out, "--speed");
            st_arm_argv_push(out, "max");
        } else if (speed > 0) {
            snprintf(num, sizeof(num), "%.17g", speed);
            st_arm_argv_push(out, "--speed");
            st_arm_argv_push(out, num);
        }
        if (seed) {
            snprintf(num, sizeof(num), "%" PRIu64, seed);
            st_arm_argv_push(out, "--seed");
            st_arm_argv_push(out, num);
        }
        if (noise_seed) {
            snprintf(num, sizeof(num), "perf.noise_seed=%" PRIu64, noise_seed);
            st_arm_argv_push(out, "--set");
            st_arm_argv_push(out, num);
        }
        st_arm_argv_push(out, "--listen");
        st_arm_argv_push(out, "127.0.0.1:0");
    } else {
        st_arm_argv_release(out);
    }
    st_buf_release(&faults);
    return rc;
}

/* Whether s[0..n) contains pat (lowercase ASCII), ignoring case. */
static int ci_contains(const char *s, size_t n, const char *pat)
{
    size_t m = strlen(pat);
    for (size_t i = 0; i + m <= n; i++) {
        size_t j = 0;
        while (j < m && tolower((unsigned char)s[i + j]) == pat[j]) {
            j++;
        }
        if (j == m) {
            return 1;
        }
    }
    return 0;
}

void st_arm_copy_line(const char *s, size_t n, char *out, size_t cap)
{
    if (cap == 0) {
        return;
    }
    while (n > 0 && (s[n - 1] == '\r' || s[n - 1] == ' ')) {
        n--;
    }
    size_t k = n < cap - 1 ? n : cap - 1;
    memcpy(out, s, k);
    out[k] = '\0';
}

/* The first line of log[0..len) with the lowest rank (rank: -1 for none) into line and its
 * 1-based number into *line_no. Returns 1 + that rank, or 0 when no line has one. */
static int best_line(const char *log, size_t len, int (*rank)(const char *s, size_t n), char *line,
                     size_t cap, uint32_t *line_no)
{
    int best = -1;
    uint32_t no = 0;
    if (cap) {
        line[0] = '\0';
    }
    *line_no = 0;
    size_t i = 0;
    while (log && i < len && best != 0) {
        const char *nl = memchr(log + i, '\n', len - i);
        size_t e = nl ? (size_t)(nl - log) : len;
        no++;
        int r = rank(log + i, e - i);
        /* The first line of the best rank: a cause comes before what it sets off. */
        if (r >= 0 && (best < 0 || r < best)) {
            best = r;
            *line_no = no;
            st_arm_copy_line(log + i, e - i, line, cap);
        }
        i = e + 1;
    }
    return best < 0 ? 0 : best + 1;
}

static int oom_rank(const char *s, size_t n)
{
    static const char *const pats[] = {
        "out of memory",
        "outofmemory",
        "no available memory for the cache blocks",
        "larger than the available kv cache memory",
        "not enough memory",
        "failed to allocate buffer",
        "oom-kill",
        "oom_kill",
        "oomkilled",
    };
    for (size_t k = 0; k < sizeof(pats) / sizeof(pats[0]); k++) {
        if (ci_contains(s, n, pats[k])) {
            return 0;
        }
    }
    return -1;
}

int st_arm_oom_line(const char *log, size_t len, char *line, size_t cap)
{
    uint32_t no;
    return best_line(log, len, oom_rank, line, cap, &no);
}

/* Engine error lines, by how much they say (docs/campaign-targets.md, "Why it ended"): rank 0
 * names the cause, rank 1 only that something failed, rank 2 is the way out (an abort, an exit
 * message) and says nothing of why. Lowercase; matched anywhere in a line, ignoring case. */
static const struct {
    const char *pat;
    uint8_t rank;
} error_pats[] = {
    /* llama.cpp: arguments, the context's checks, the model file, asserts, the socket. */
    {"error while handling argument", 0},
    {"error: invalid argument", 0},
    {"unsupported cache type", 0},
    {"requires flash_attn", 0},
    {"requires flash attention", 0},
    {"failed to open gguf file", 0},
    {"error loading model", 0},
    {"ggml_assert", 0},
    {"couldn't bind", 0},
    {"address already in use", 0},
    /* Python engines (vLLM, SGLang, TGI's launcher): argparse and the first exception. */
    {": error: argument", 0},
    {": error: unrecognized arguments", 0},
    {"valueerror:", 0},
    {"typeerror:", 0},
    {"keyerror:", 0},
    {"filenotfounderror:", 0},
    {"importerror:", 0},
    {"modulenotfounderror:", 0},
    {"notimplementederror:", 0},
    {"assertionerror", 0},
    {"no such file or directory", 0},
    {"permission denied", 0},
    /* The way out: never the cause when another line is there. */
    {"terminate called", 2},
    {"aborted", 2},
    {"core dumped", 2},
    {"exiting due to", 2},
    {"cleaning up before exit", 2},
    {"engine core initialization failed", 2},
    {"see root cause above", 2},
    {"traceback (most recent call last)", 2},
    /* Something failed. */
    {"failed to", 1},
    {"runtimeerror:", 1},
    {"exception", 1},
    {"error", 1},
    {"fatal", 1},
};

/* The rank of line s[0..n) in error_pats, or -1 when no pattern matches. */
static int error_rank(const char *s, size_t n)
{
    for (size_t k = 0; k < sizeof(error_pats) / sizeof(error_pats[0]); k++) {
        if (ci_contains(s, n, error_pats[k].pat)) {
            return error_pats[k].rank;
        }
    }
    return -1;
}

int st_arm_error_line(const char *log, size_t len, char *line, size_t cap, uint32_t *line_no)
{
    return best_line(log, len, error_rank, line, cap, line_no);
}

/* A copy of s without blanks around it and one pair of matching quotes. Owned by the caller. */
static char *trimmed(const char *s)
{
    size_t a = 0, b = strlen(s);
    for (int round = 0; round < 2; round++) {
        while (a < b && isspace((unsigned char)s[a])) {
            a++;
        }
        while (b > a && isspace((unsigned char)s[b - 1])) {
            b--;
        }
        if (round == 0 && b - a >= 2 && (s[a] == '"' || s[a] == '\'') && s[b - 1] == s[a]) {
            a++;
            b--;
        }
    }
    return st_xstrndup(s + a, b - a);
}

static int as_number(const char *s, double *out)
{
    if (!(isdigit((unsigned char)s[0]) || s[0] == '-' || s[0] == '+' || s[0] == '.')) {
        return 0;
    }
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || errno != 0 || !isfinite(v)) {
        return 0;
    }
    *out = v;
    return 1;
}

static int as_bool(const char *s)
{
    return strcasecmp(s, "true") == 0 || strcasecmp(s, "false") == 0;
}

static void drop_blanks(char *s)
{
    char *d = s;
    for (; *s; s++) {
        if (!isspace((unsigned char)*s)) {
            *d++ = *s;
        }
    }
    *d = '\0';
}

int st_arm_value_eq(const char *a, const char *b)
{
    char *x = trimmed(a), *y = trimmed(b);
    double dx, dy;
    int eq;
    if (as_number(x, &dx) && as_number(y, &dy)) {
        eq = dx == dy || fabs(dx - dy) <= 1e-9 * fmax(fabs(dx), fabs(dy));
    } else if (as_bool(x) && as_bool(y)) {
        eq = strcasecmp(x, y) == 0;
    } else {
        drop_blanks(x);
        drop_blanks(y);
        eq = strcmp(x, y) == 0;
    }
    free(x);
    free(y);
    return eq;
}

int st_arm_value_eq_as(const char *arm, const char *server, enum st_arm_cmp cmp)
{
    char *a = trimmed(arm), *b = trimmed(server);
    double x, y;
    int eq;
    switch (cmp) {
    case ST_ARM_CMP_SET:
    case ST_ARM_CMP_SET_NOT_NONE: {
        int set = a[0] != '\0' && strcasecmp(a, "false") != 0 && strcasecmp(a, "none") != 0;
        int on = cmp == ST_ARM_CMP_SET ? as_bool(b) && strcasecmp(b, "true") == 0
                                       : b[0] != '\0' && strcasecmp(b, "none") != 0;
        eq = (cmp == ST_ARM_CMP_SET_NOT_NONE || as_bool(b)) && set == on;
        break;
    }
    case ST_ARM_CMP_F32:
        eq = as_number(a, &x) && as_number(b, &y) ? (float)x == (float)y : st_arm_value_eq(a, b);
        break;
    case ST_ARM_CMP_PLAIN:
    default:
        eq = st_arm_value_eq(a, b);
        break;
    }
    free(a);
    free(b);
    return eq;
}

int st_arm_kv_value(const struct st_target_pool *pool, const char *key, char *val, size_t cap,
                    char *where, size_t wcap)
{
    const char *v = NULL;
    char num[32];
    if (!pool) {
        return 0;
    }
    if (strcmp(key, "type_k") == 0) {
        v = pool->type_k;
    } else if (strcmp(key, "type_v") == 0) {
        v = pool->type_v;
    } else if (strcmp(key, "cells") == 0 && pool->exact && strncmp(pool->source, "log", 3) == 0 &&
               pool->type_k[0]) {
        snprintf(num, sizeof(num), "%" PRIu64, pool->total_tokens); /* llama.cpp's line */
        v = num;
    }
    if (!v || !v[0]) {
        return 0;
    }
    st_arm_copy_line(v, strlen(v), val, cap);
    snprintf(where, wcap, "%.*s (%s)", 100, pool->source, key);
    return 1;
}

/* The value text starting at s (a Python literal up to e): a quoted string without its quotes, a
 * bracketed list or dict as it stands, else up to the next ',' or '}'. */
static void py_value(const char *s, const char *e, char *val, size_t cap)
{
    while (s < e && *s == ' ') {
        s++;
    }
    const char *end = s;
    if (s < e && (*s == '\'' || *s == '"')) {
        const char *q = memchr(s + 1, *s, (size_t)(e - s - 1));
        s++;
        end = q ? q : e;
    } else if (s < e && (*s == '[' || *s == '{' || *s == '(')) {
        int depth = 0;
        for (end = s; end < e; end++) {
            depth += *end == '[' || *end == '{' || *end == '(';
            depth -= *end == ']' || *end == '}' || *end == ')';
            if (depth == 0) {
                end++;
                break;
            }
        }
    } else {
        while (end < e && *end != ',' && *end != '}') {
            end++;
        }
    }
    st_arm_copy_line(s, (size_t)(end - s), val, cap);
}

int st_arm_log_arg(const char *log, size_t len, const char *name, char *val, size_t cap)
{
    static const char mark[] = "non-default args:";
    const char *line = NULL, *line_end = NULL;
    size_t i = 0;
    while (log && i < len) {
        const char *nl = memchr(log + i, '\n', len - i);
        size_t e = nl ? (size_t)(nl - log) : len;
        const char *m = memmem(log + i, e - i, mark, sizeof(mark) - 1);
        if (m) {
            line = m + sizeof(mark) - 1;
            line_end = log + e;
        }
        i = e + 1;
    }
    if (cap) {
        val[0] = '\0';
    }
    if (!line) {
        return 0;
    }
    size_t n = strlen(name);
    for (const char *s = line; s + n + 3 <= line_end; s++) {
        if ((*s == '\'' || *s == '"') && memcmp(s + 1, name, n) == 0 && s[n + 1] == *s &&
            s[n + 2] == ':') {
            py_value(s + n + 3, line_end, val, cap);
            return 1;
        }
    }
    return 0;
}

static const char *const arm_fail_names[] = {[ST_ARM_OK] = "ok",
                                             [ST_ARM_FAIL_START] = "start",
                                             [ST_ARM_FAIL_OOM] = "oom",
                                             [ST_ARM_FAIL_EXIT] = "exit",
                                             [ST_ARM_FAIL_HEALTH] = "health",
                                             [ST_ARM_FAIL_CONFIG] = "config",
                                             [ST_ARM_FAIL_OPERATOR] = "operator"};

const char *st_arm_fail_name(enum st_arm_fail f)
{
    return ST_NAME_OF(arm_fail_names, f, "unknown");
}
