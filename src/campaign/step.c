/*
 * One repeat of one plan step: builds the servetune child's argv (bench, sweep, probe capacity,
 * qualify), runs it with its output in files (never a pipe it could block on), calls the tick
 * while it runs, then reads its JSON and receipts into the plan's metrics. The pure parts (argv,
 * prompt seed, suite names, receipts and JSON to metrics) are exported for tests; the shell is
 * st_step_run. docs/campaign-steps.md defines every argument and metric.
 */
#include "campaign/step.h"

#include <sys/stat.h>
#include <sys/types.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/hash.h"
#include "base/json.h"
#include "base/proc.h"
#include "base/xalloc.h"
#include "engine/metrics.h"
#include "engine/run.h"
#include "store/fsutil.h"
#include "stats/summ.h"

/* Bounds on what is read back from a child. */
#define JSON_MAX_BYTES (64u << 20)
#define RCPTS_MAX_BYTES (512u << 20)
#define KILL_AFTER_NS (5 * ST_NS_PER_S)

/* ---- results ---- */

void st_step_result_init(struct st_step_result *r)
{
    memset(r, 0, sizeof(*r));
    r->functional_ok = -1;
    r->quality_ok = -1;
}

void st_step_result_release(struct st_step_result *r)
{
    free(r->v);
    free(r->ttft_s);
    st_step_result_init(r);
}

const struct st_step_value *st_step_result_find(const struct st_step_result *r, const char *name)
{
    for (size_t i = 0; i < r->n; i++) {
        if (strcmp(r->v[i].name, name) == 0) {
            return &r->v[i];
        }
    }
    return NULL;
}

/* Adds STEP.METRIC[@POINT] = v; a NaN value is left out and noted in detail. */
static void put(struct st_step_result *r, const char *step, const char *metric, const char *point,
                double v)
{
    char name[ST_PLAN_METRIC_MAX];
    snprintf(name, sizeof(name), "%s.%s%s%s", step, metric, point ? "@" : "", point ? point : "");
    if (isnan(v)) {
        size_t dl = strlen(r->detail);
        if (dl + 2 < sizeof(r->detail)) {
            snprintf(r->detail + dl, sizeof(r->detail) - dl, "%sno sample for %s", dl ? "; " : "",
                     name);
        }
        return;
    }
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 16;
        r->v = st_xrealloc(r->v, r->cap * sizeof(*r->v));
    }
    memcpy(r->v[r->n].name, name, sizeof(name));
    r->v[r->n].v = v;
    r->n++;
}

static void add_ttft(struct st_step_result *r, const double *v, size_t n)
{
    if (n == 0) {
        return;
    }
    r->ttft_s = st_xrealloc(r->ttft_s, (r->n_ttft + n) * sizeof(double));
    for (size_t i = 0; i < n; i++) {
        r->ttft_s[r->n_ttft++] = v[i];
    }
}

/* ---- pure parts: children, points, seeds, suites ---- */

uint32_t st_step_children(const struct st_plan_step *s)
{
    if (s->kind == ST_PLAN_STEP_BENCH && s->n_categories > 0) {
        return s->n_categories;
    }
    return 1;
}

const char *st_step_point(const struct st_plan_step *s, uint32_t i)
{
    if (s->kind == ST_PLAN_STEP_BENCH && i < s->n_categories) {
        return s->categories[i];
    }
    return NULL;
}

uint64_t st_step_prompt_seed(uint64_t campaign_seed, enum st_plan_step_kind kind,
                             uint64_t input_tokens, uint64_t output_tokens, const char *category)
{
    static const char tag[] = "servetune step prompt v1";
    uint64_t h = st_hash_update(ST_HASH_INIT, tag, sizeof(tag) - 1);
    h = st_hash_u64(h, campaign_seed);
    h = st_hash_u64(h, (uint64_t)kind);
    h = st_hash_u64(h, input_tokens);
    h = st_hash_u64(h, output_tokens);
    size_t cl = category ? strlen(category) : 0;
    h = st_hash_u64(h, cl);
    h = st_hash_update(h, category ? category : "", cl);
    return st_hash_mix(h) >> 1; /* 63 bits: every command's --seed takes 0 .. INT64_MAX */
}

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int st_step_suite_resolve(const char *name, const char *plan_dir, struct st_step_suite *out,
                          char *err, size_t errlen)
{
    static const char *const efforts[] = {"low", "medium", "high", "xhigh", NULL};
    memset(out, 0, sizeof(*out));
    if (strcmp(name, "screening") == 0 || strcmp(name, "quality") == 0) {
        snprintf(out->suite, sizeof(out->suite), "%s", name);
        return 0;
    }
    if (strncmp(name, "quality-", 8) == 0) {
        for (size_t i = 0; efforts[i]; i++) {
            if (strcmp(name + 8, efforts[i]) == 0) {
                snprintf(out->suite, sizeof(out->suite), "quality");
                snprintf(out->effort, sizeof(out->effort), "%s", efforts[i]);
                return 0;
            }
        }
    }
    static const char *const forms[][2] = {{"", ""}, {"", ".yaml"}, {"suites/", ".yaml"}};
    const char *dir = name[0] == '/' || !plan_dir || !plan_dir[0] ? NULL : plan_dir;
    char tried[3][ST_STEP_PATH_MAX];
    for (size_t i = 0; i < 3; i++) {
        int w = snprintf(tried[i], sizeof(tried[i]), "%s%s%s%s%s", dir ? dir : "", dir ? "/" : "",
                         forms[i][0], name, forms[i][1]);
        if (w < 0 || (size_t)w >= sizeof(tried[i])) {
            st_errf(err, errlen, "suite '%s': path over %d bytes", name, ST_STEP_PATH_MAX - 1);
            return ST_ETOOBIG;
        }
        if (is_file(tried[i])) {
            memcpy(out->suite, tried[i], sizeof(out->suite));
            return 0;
        }
    }
    st_errf(err, errlen,
            "suite '%s': not a built-in suite (screening, quality, quality-low|medium|high|xhigh) "
            "and no file %s, %s or %s",
            name, tried[0], tried[1], tried[2]);
    return ST_ENOTFOUND;
}

/* ---- argv ---- */

void st_step_argv_release(struct st_step_argv *a)
{
    for (size_t i = 0; i < a->argc; i++) {
        free(a->argv[i]);
    }
    free(a->argv);
    a->argv = NULL;
    a->argc = 0;
}

static void arg(struct st_step_argv *a, const char *s)
{
    a->argv = st_xrealloc(a->argv, (a->argc + 2) * sizeof(char *));
    a->argv[a->argc++] = st_xstrdup(s);
    a->argv[a->argc] = NULL;
}

static void argf(struct st_step_argv *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void argf(struct st_step_argv *a, const char *fmt, ...)
{
    struct st_buf b;
    st_buf_init(&b);
    va_list ap;
    va_start(ap, fmt);
    st_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    arg(a, st_buf_str(&b));
    st_buf_release(&b);
}

static void opt_u64(struct st_step_argv *a, const char *name, uint64_t v)
{
    arg(a, name);
    argf(a, "%llu", (unsigned long long)v);
}

static void opt_str(struct st_step_argv *a, const char *name, const char *v)
{
    arg(a, name);
    arg(a, v);
}

/* "SELF CMD [SUB] --url URL": the head of every child's command line. */
static void head(struct st_step_argv *a, const struct st_step_env *e, const char *cmd,
                 const char *sub)
{
    arg(a, e->self_exe);
    arg(a, cmd);
    if (sub != NULL) {
        arg(a, sub);
    }
    opt_str(a, "--url", e->url);
}

/* The prompt and output lengths, and that the output runs to its length. */
static void lengths(struct st_step_argv *a, const char *in_opt, uint64_t in, uint64_t out)
{
    opt_u64(a, in_opt, in);
    opt_u64(a, "--output-len", out);
}

/* A bench child's files: DIR/NAME.json and DIR/NAME.receipts.jsonl. */
static void bench_files(struct st_step_argv *a, const struct st_step_env *e, const char *name)
{
    arg(a, "--json");
    argf(a, "%s/%s.json", e->dir, name);
    arg(a, "--receipts");
    argf(a, "%s/%s.receipts.jsonl", e->dir, name);
}

/* The concurrency list "1,2,4". */
static void opt_cc_list(struct st_step_argv *a, const struct st_plan_step *s)
{
    struct st_buf b;
    st_buf_init(&b);
    for (uint32_t i = 0; i < s->n_concurrency; i++) {
        st_buf_printf(&b, "%s%u", i ? "," : "", s->concurrency[i]);
    }
    opt_str(a, "--concurrency", st_buf_str(&b));
    st_buf_release(&b);
}

static void common_tail(struct st_step_argv *a, const struct st_step_env *e)
{
    if (e->api_key_file && e->api_key_file[0]) {
        opt_str(a, "--api-key-file", e->api_key_file);
    }
    if (e->timeout_first_token_ms) {
        opt_u64(a, "--timeout-first-token", e->timeout_first_token_ms);
    }
    if (e->timeout_idle_ms) {
        opt_u64(a, "--timeout-idle", e->timeout_idle_ms);
    }
    if (e->noise_key && e->noise_key[0]) {
        /* A simulator's staged noise is keyed by the unit (sim/noise.h): JSON-escaped. */
        struct st_buf b;
        st_buf_init(&b);
        st_buf_puts(&b, "{\"servetune_noise_key\":");
        st_json_quote(&b, e->noise_key, strlen(e->noise_key));
        st_buf_putc(&b, '}');
        opt_str(a, "--extra-body", st_buf_str(&b));
        st_buf_release(&b);
    }
    arg(a, "--quiet");
    arg(a, "--no-progress");
}

/* Bench and soak: lengths default to 128 (the bench's own default) when the plan says 0. */
static uint64_t len_or_128(uint64_t v)
{
    return v ? v : 128;
}

/* Soak: bench caps a mixed workload's requests at its item count, and builds every prompt
 * before the load starts, so a duration run needs a bound: 10 requests a second per slot, and at
 * most 16 M prompt tokens in all (122 prompts of 128K: seed 003's 600 s soak at cc 8 issues about
 * 80, each taking a minute), at least 16, at most 1,000,000. A server fast enough to use them up
 * ends the soak early; the unit says so (issued_all). */
static uint64_t soak_requests(const struct st_plan_step *s, uint32_t cc)
{
    double n = ceil(s->duration_s * 10.0 * cc);
    double by_tokens = floor(16e6 / (double)len_or_128(s->input_tokens));
    if (n > by_tokens) {
        n = by_tokens;
    }
    if (n < 16) {
        n = 16;
    }
    if (n > 1e6) {
        n = 1e6;
    }
    return (uint64_t)n;
}

int st_step_argv_build(const struct st_plan_step *s, const struct st_step_env *e, uint32_t i,
                       struct st_step_argv *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    uint32_t cc0 = s->n_concurrency ? s->concurrency[0] : 1;
    if ((s->kind == ST_PLAN_STEP_SWEEP || s->kind == ST_PLAN_STEP_PROBE) && s->n_concurrency == 0) {
        st_errf(err, errlen, "step %s: a %s step needs concurrency levels", s->id,
                s->kind == ST_PLAN_STEP_SWEEP ? "sweep" : "probe");
        return ST_EUSAGE;
    }
    if (i >= st_step_children(s)) {
        st_errf(err, errlen, "step %s: no child %u", s->id, i);
        return ST_EUSAGE;
    }
    uint64_t in = s->input_tokens, outl = s->output_tokens;
    switch (s->kind) {
    case ST_PLAN_STEP_BENCH: {
        const char *cat = st_step_point(s, i);
        const char *pt = cat ? cat : "bench";
        in = len_or_128(in);
        outl = len_or_128(outl);
        head(out, e, "bench", NULL);
        opt_str(out, "--workload", "fixed");
        lengths(out, "--input-len", in, outl);
        arg(out, "--ignore-eos");
        opt_u64(out, "--concurrency", cc0);
        opt_u64(out, "--requests", cc0);
        opt_u64(out, "--seed", st_step_prompt_seed(e->seed, s->kind, in, outl, cat));
        bench_files(out, e, pt);
        break;
    }
    case ST_PLAN_STEP_SWEEP:
        head(out, e, "sweep", NULL);
        opt_str(out, "--workload", "shared-prefix");
        arg(out, "--prefix-frac");
        argf(out, "%.17g", s->shared_frac);
        lengths(out, "--input-len", in, outl);
        arg(out, "--ignore-eos");
        opt_cc_list(out, s);
        opt_u64(out, "--requests-per-cc", s->requests_per_cc ? s->requests_per_cc : 2);
        opt_u64(out, "--repeats", 1);
        opt_u64(out, "--seed", st_step_prompt_seed(e->seed, s->kind, in, outl, NULL));
        arg(out, "--out");
        argf(out, "%s/sweep", e->dir);
        if (!s->flush_warm) {
            arg(out, "--no-flush");
            arg(out, "--no-warm");
        }
        break;
    case ST_PLAN_STEP_PROBE:
        head(out, e, "probe", "capacity");
        lengths(out, "--doc-len", in, outl);
        opt_u64(out, "--seed-output-len", s->seed_output_tokens ? s->seed_output_tokens : 8);
        opt_cc_list(out, s);
        arg(out, "--keep-going");
        arg(out, "--ignore-eos");
        opt_u64(out, "--seed", st_step_prompt_seed(e->seed, s->kind, in, outl, NULL));
        arg(out, "--out");
        argf(out, "%s/probe", e->dir);
        break;
    case ST_PLAN_STEP_SOAK:
        in = len_or_128(in);
        outl = len_or_128(outl);
        head(out, e, "bench", NULL);
        opt_str(out, "--workload", "mixed");
        opt_str(out, "--mix", "fixed=1,shared-prefix=1,distinct=1");
        opt_str(out, "--prefix-frac", "0.5");
        lengths(out, "--input-len", in, outl);
        arg(out, "--ignore-eos");
        opt_u64(out, "--concurrency", cc0);
        opt_u64(out, "--requests", soak_requests(s, cc0));
        arg(out, "--duration");
        /* The server's time: against the simulator bench takes it as virtual seconds. */
        argf(out, "%.17g", s->duration_s);
        opt_u64(out, "--seed", st_step_prompt_seed(e->seed, s->kind, in, outl, NULL));
        bench_files(out, e, "soak");
        break;
    case ST_PLAN_STEP_QUALIFY: {
        struct st_step_suite su;
        int rc = st_step_suite_resolve(s->suite, e->plan_dir, &su, err, errlen);
        if (rc != 0) {
            return rc;
        }
        head(out, e, "qualify", NULL);
        opt_str(out, "--suite", su.suite);
        if (su.effort[0]) {
            opt_str(out, "--reasoning-effort", su.effort);
        }
        opt_u64(out, "--seed", st_step_prompt_seed(e->seed, s->kind, 0, 0, s->suite));
        opt_str(out, "--out", e->dir);
        if (e->compare_json && e->compare_json[0]) {
            opt_str(out, "--compare", e->compare_json);
        }
        if (e->context_tokens) {
            opt_u64(out, "--context", e->context_tokens);
        }
        break;
    }
    default:
        st_errf(err, errlen, "step %s: unknown kind %d", s->id, (int)s->kind);
        return ST_EUSAGE;
    }
    common_tail(out, e);
    return 0;
}

void st_step_argv_line(const struct st_step_argv *a, struct st_buf *out)
{
    for (size_t i = 0; i < a->argc; i++) {
        const char *s = a->argv[i];
        if (i) {
            st_buf_putc(out, ' ');
        }
        if (s[0] && strcspn(s, " \t\n'\"\\$`*?;&|<>()") == strlen(s)) {
            st_buf_puts(out, s);
            continue;
        }
        st_buf_putc(out, '\'');
        for (; *s; s++) {
            if (*s == '\'') {
                st_buf_puts(out, "'\\''");
            } else {
                st_buf_putc(out, *s);
            }
        }
        st_buf_putc(out, '\'');
    }
}

/* ---- receipts ---- */

void st_step_rcpts_init(struct st_step_rcpts *c)
{
    memset(c, 0, sizeof(*c));
}

void st_step_rcpts_release(struct st_step_rcpts *c)
{
    free(c->ttft_s);
    free(c->e2e_s);
    free(c->id);
    free(c->decode_tps);
    st_step_rcpts_init(c);
}

static int num_of(const struct st_json *d, int obj, const char *key, double *v)
{
    int t = st_json_get(d, obj, key);
    return t >= 0 && st_json_type(d, t) == ST_JSON_NUMBER && st_json_f64(d, t, v) == 0;
}

/* One receipt line (an object), read with the reader next to its writer (engine/metrics.h). */
static void rcpt_line(struct st_step_rcpts *c, const struct st_json *d)
{
    struct st_rec_view v;
    st_rec_read(d, 0, &v);
    if (!v.has_ok) {
        /* qualify's receipts: one request each, judged by its HTTP status. */
        double st = 0;
        if (!num_of(d, 0, "http_status", &st) || st != 200) {
            c->errors++;
        }
        return;
    }
    if (!v.ok) {
        c->errors++;
        return;
    }
    if (v.warmup) {
        return;
    }
    /* Timed by the simulator's virtual clock, its times are the measurement (docs/metrics.md);
     * the view's spans are on the line's clock, by the receipt schema's one definition. */
    const struct st_rec_spans *sp = &v.spans;
    if (sp->ttft_ns < 0 || sp->e2e_ns < 0) {
        return; /* an ok request without content times: nothing to measure */
    }
    c->ok++;
    c->ttft_s = st_xrealloc(c->ttft_s, (c->n + 1) * sizeof(double));
    c->e2e_s = st_xrealloc(c->e2e_s, (c->n + 1) * sizeof(double));
    c->id = st_xrealloc(c->id, (c->n + 1) * sizeof(double));
    c->ttft_s[c->n] = (double)sp->ttft_ns / 1e9;
    c->e2e_s[c->n] = (double)sp->e2e_ns / 1e9;
    c->id[c->n] = v.id;
    c->n++;
    if (sp->decode_n > 0) {
        c->decode_tps = st_xrealloc(c->decode_tps, (c->n_decode + 1) * sizeof(double));
        c->decode_tps[c->n_decode++] = (double)sp->decode_n / ((double)sp->decode_ns / 1e9);
    }
}

/* Puts the per-request times in id order: receipts are appended as requests end, and requests
 * that end at the same (virtual) time end in any order. Insertion sort: stable, and the lines
 * come nearly in order. */
static void sort_by_id(struct st_step_rcpts *c)
{
    for (size_t i = 1; i < c->n; i++) {
        double id = c->id[i], t = c->ttft_s[i], e = c->e2e_s[i];
        size_t j = i;
        while (j > 0 && c->id[j - 1] > id) {
            c->id[j] = c->id[j - 1];
            c->ttft_s[j] = c->ttft_s[j - 1];
            c->e2e_s[j] = c->e2e_s[j - 1];
            j--;
        }
        c->id[j] = id;
        c->ttft_s[j] = t;
        c->e2e_s[j] = e;
    }
}

int st_step_rcpts_parse(struct st_step_rcpts *c, const char *text, size_t len)
{
    struct st_json d;
    st_json_init(&d, 0);
    size_t i = 0;
    while (i < len) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t n = nl ? (size_t)(nl - (text + i)) : len - i;
        const char *line = text + i;
        i += n + (nl ? 1 : 0);
        size_t k = 0;
        while (k < n && (line[k] == ' ' || line[k] == '\t' || line[k] == '\r')) {
            k++;
        }
        if (k == n) {
            continue;
        }
        c->lines++;
        if (st_json_parse(&d, line, n) != 0 || st_json_type(&d, 0) != ST_JSON_OBJECT) {
            c->errors++;
            continue;
        }
        rcpt_line(c, &d);
    }
    st_json_release(&d);
    sort_by_id(c);
    return 0;
}

/* ---- JSON to metrics ---- */

static double median_of(const double *v, size_t n)
{
    if (n == 0) {
        return NAN;
    }
    struct st_summ s;
    st_summ_compute(&s, v, n);
    return s.median;
}

static int extract_bench(const struct st_plan_step *s, const char *point,
                         const struct st_run_digest *g, const struct st_step_rcpts *rc,
                         struct st_step_result *r)
{
    double n_ok = g->ok, n_failed = g->failed, out_tps = g->output_tokens_per_s;
    const double *ttft = rc ? rc->ttft_s : NULL, *e2e = rc ? rc->e2e_s : NULL;
    const double *dec = rc ? rc->decode_tps : NULL;
    size_t n = rc ? rc->n : 0, nd = rc ? rc->n_decode : 0;
    if (s->kind == ST_PLAN_STEP_SOAK) {
        put(r, s->id, "output_tps", NULL, out_tps);
        put(r, s->id, "completed", NULL, n_ok);
        put(r, s->id, "ttft_s", NULL, median_of(ttft, n));
        put(r, s->id, "error_rate", NULL, n_ok + n_failed > 0 ? n_failed / (n_ok + n_failed) : NAN);
    } else {
        put(r, s->id, "decode_tps", point, median_of(dec, nd));
        put(r, s->id, "output_tps", point, out_tps);
        put(r, s->id, "completed", point, n_ok);
        put(r, s->id, "ttft_s", point, median_of(ttft, n));
        put(r, s->id, "e2e_s", point, median_of(e2e, n));
    }
    add_ttft(r, ttft, n);
    return 0;
}

/* The object of arr whose key equals v (a concurrency level), or -1. */
static int find_by(const struct st_json *d, int arr, const char *key, double v)
{
    for (int it = st_json_first(d, arr); it >= 0; it = st_json_next(d, arr, it)) {
        int ok = 1;
        if (st_json_type(d, it) == ST_JSON_OBJECT && st_json_num(d, it, key, &ok) == v && ok) {
            return it;
        }
    }
    return -1;
}

static int extract_sweep(const struct st_plan_step *s, const struct st_json *d,
                         const struct st_step_rcpts *rc, size_t n_rc, struct st_step_result *r,
                         char *err, size_t errlen)
{
    int pts = st_json_get(d, 0, "points");
    if (st_json_type(d, pts) != ST_JSON_ARRAY) {
        st_errf(err, errlen, "sweep JSON: no \"points\" array");
        return ST_EPARSE;
    }
    for (uint32_t i = 0; i < s->n_concurrency; i++) {
        char point[32];
        snprintf(point, sizeof(point), "cc%u", s->concurrency[i]);
        int p = find_by(d, pts, "concurrency", s->concurrency[i]);
        int ok = 1;
        double tps = NAN, hit = NAN, ttft = NAN, tpot = NAN;
        if (p >= 0) {
            tps = st_json_num(d, st_json_get(d, p, "output_tokens_per_s"), "median", &ok);
            hit = st_json_num(d, p, "hit_rate", &ok);
            ttft = st_json_num(d, st_json_get(d, p, "ttft_ms"), "p50", &ok) / 1e3;
            tpot = st_json_num(d, st_json_get(d, p, "tpot_ms"), "p50", &ok) / 1e3;
        }
        if (!ok) {
            st_errf(err, errlen, "sweep JSON: point cc%u has a field that is not a number",
                    s->concurrency[i]);
            return ST_EPARSE;
        }
        put(r, s->id, "output_tps", point, tps);
        put(r, s->id, "hit_rate", point, hit);
        put(r, s->id, "ttft_s", point, ttft);
        put(r, s->id, "tpot_s", point, tpot);
        if (i < n_rc) {
            add_ttft(r, rc[i].ttft_s, rc[i].n);
        }
    }
    return 0;
}

static int extract_probe(const struct st_plan_step *s, const struct st_json *d,
                         const struct st_step_rcpts *rc, size_t n_rc, struct st_step_result *r,
                         char *err, size_t errlen)
{
    int passes = st_json_get(d, 0, "passes");
    if (st_json_type(d, passes) != ST_JSON_ARRAY) {
        st_errf(err, errlen, "probe JSON: no \"passes\" array");
        return ST_EPARSE;
    }
    int ok = 1;
    double max_docs = st_json_num(d, 0, "max_concurrent_docs", &ok);
    if (!ok) {
        st_errf(err, errlen, "probe JSON: max_concurrent_docs is not a number");
        return ST_EPARSE;
    }
    put(r, s->id, "max_docs", NULL, max_docs);
    for (uint32_t i = 0; i < s->n_concurrency; i++) {
        char point[32];
        snprintf(point, sizeof(point), "cc%u", s->concurrency[i]);
        int p = find_by(d, passes, "concurrency", s->concurrency[i]);
        double queued = NAN, ttft_max = NAN, dec = NAN;
        if (p >= 0) {
            /* queued: the N documents did not all run at once. A pass whose documents failed
             * (fits false: errors, evictions) is no better than one that queued. */
            int q = st_json_get(d, p, "queued");
            int f = st_json_get(d, p, "fits");
            if (st_json_type(d, q) == ST_JSON_TRUE || st_json_type(d, q) == ST_JSON_FALSE) {
                queued = st_json_type(d, q) == ST_JSON_TRUE ? 1 : 0;
            }
            if (st_json_type(d, f) == ST_JSON_FALSE) {
                queued = 1;
            }
            ttft_max = st_json_num(d, p, "ttft_max_ms", &ok) / 1e3;
            if (i < n_rc) {
                dec = median_of(rc[i].decode_tps, rc[i].n_decode);
                add_ttft(r, rc[i].ttft_s, rc[i].n);
            }
        }
        if (!ok) {
            st_errf(err, errlen, "probe JSON: pass cc%u: ttft_max_ms is not a number",
                    s->concurrency[i]);
            return ST_EPARSE;
        }
        put(r, s->id, "decode_tps", point, dec);
        put(r, s->id, "queued", point, queued);
        put(r, s->id, "ttft_max_s", point, ttft_max);
    }
    return 0;
}

/* Screening (functional) checks are the built-in ones; every other name is a suite question. */
static int is_functional(const char *name, size_t n)
{
    static const char *const builtin[] = {
        "arithmetic", "json",           "multi-turn",      "ocr",    "multi-image",
        "video",      "long-retrieval", "long-text-image", "queued", "throughput-categories",
        NULL};
    for (size_t i = 0; builtin[i]; i++) {
        if (strlen(builtin[i]) == n && memcmp(builtin[i], name, n) == 0) {
            return 1;
        }
    }
    return 0;
}

static int extract_qualify(const struct st_plan_step *s, const struct st_json *d,
                           struct st_step_result *r, char *err, size_t errlen)
{
    int ok = 1;
    double passed = st_json_num(d, 0, "passed", &ok);
    double failed = st_json_num(d, 0, "failed", &ok);
    int checks = st_json_get(d, 0, "checks");
    if (!ok || isnan(passed) || isnan(failed) || st_json_type(d, checks) != ST_JSON_ARRAY) {
        st_errf(err, errlen, "qualify JSON: passed, failed or checks[] missing");
        return ST_EPARSE;
    }
    put(r, s->id, "pass_count", NULL, passed);
    put(r, s->id, "fail_count", NULL, failed);
    int cmp = st_json_get(d, 0, "compare");
    int bad_f = 0, bad_q = 0;
    /* With a baseline: the regressed checks; without: the failed ones. */
    int list = cmp >= 0 ? st_json_get(d, cmp, "regressed") : checks;
    if (cmp >= 0 && st_json_type(d, list) != ST_JSON_ARRAY) {
        st_errf(err, errlen, "qualify JSON: compare without a regressed[] array");
        return ST_EPARSE;
    }
    struct st_buf names;
    st_buf_init(&names);
    for (int it = st_json_first(d, list); it >= 0; it = st_json_next(d, list, it)) {
        int nm = st_json_get(d, it, "name");
        int stt = st_json_get(d, it, "status");
        if (st_json_type(d, nm) != ST_JSON_STRING) {
            continue;
        }
        if (cmp < 0 && !st_json_streq(d, stt, "fail")) {
            continue;
        }
        size_t n = 0;
        const char *raw = st_json_raw(d, nm, &n);
        if (is_functional(raw, n)) {
            bad_f++;
        } else {
            bad_q++;
        }
        st_buf_printf(&names, "%s%.*s", names.len ? ", " : "", (int)n, raw);
    }
    r->functional_ok = bad_f == 0;
    r->quality_ok = bad_q == 0;
    if (names.len) {
        snprintf(r->detail, sizeof(r->detail), "%s: %s", cmp >= 0 ? "regressed" : "failed",
                 st_buf_str(&names));
    }
    st_buf_release(&names);
    return 0;
}

/*
 * The child's "sim_clock" (docs/metrics.md, "Virtual time"): 1 when it is absent (not the
 * simulator) or valid; else 0 with the reason in r->detail and r->invalid set.
 */
static int clock_holds(const struct st_json *d, struct st_step_result *r)
{
    int valid = 1;
    char why[256];
    st_sim_clock_read(d, 0, &valid, why, sizeof(why));
    if (valid) {
        return 1;
    }
    size_t dl = strlen(r->detail);
    snprintf(r->detail + dl, sizeof(r->detail) - dl, "%sINVALID: %s", dl ? "; " : "", why);
    r->invalid = 1;
    return 0;
}

int st_step_extract(const struct st_plan_step *s, uint32_t i, const char *json, size_t len,
                    const struct st_step_rcpts *rc, size_t n_rc, struct st_step_result *r,
                    char *err, size_t errlen)
{
    struct st_json d;
    st_json_init(&d, 0);
    int prc = st_json_parse(&d, json, len);
    if (prc != 0 || st_json_type(&d, 0) != ST_JSON_OBJECT) {
        st_errf(err, errlen, "not a JSON object (%s)", st_strerror(prc ? prc : ST_EPARSE));
        st_json_release(&d);
        return ST_EPARSE;
    }
    if (!clock_holds(&d, r)) {
        /* Timed by a simulator that could not keep its clock: not a measurement. */
        st_json_release(&d);
        return 0;
    }
    switch (s->kind) {
    case ST_PLAN_STEP_BENCH:
    case ST_PLAN_STEP_SOAK: {
        struct st_run_digest g;
        prc = st_run_summary_read(&d, &g, err, errlen);
        if (prc == 0) {
            prc = extract_bench(s, st_step_point(s, i), &g, n_rc ? rc : NULL, r);
        }
        /* A soak that used up its prepared requests before its duration says so (NaN: the
         * child did not say, and nothing is said). */
        if (prc == 0 && s->kind == ST_PLAN_STEP_SOAK && g.duration_s < 0.95 * s->duration_s) {
            size_t dl = strlen(r->detail);
            snprintf(r->detail + dl, sizeof(r->detail) - dl,
                     "%sthe soak used all its prepared requests after %.0f s of its %.0f s",
                     dl ? "; " : "", g.duration_s, s->duration_s);
        }
        break;
    }
    case ST_PLAN_STEP_SWEEP:
        prc = extract_sweep(s, &d, rc, n_rc, r, err, errlen);
        break;
    case ST_PLAN_STEP_PROBE:
        prc = extract_probe(s, &d, rc, n_rc, r, err, errlen);
        break;
    case ST_PLAN_STEP_QUALIFY:
        prc = extract_qualify(s, &d, r, err, errlen);
        break;
    default:
        st_errf(err, errlen, "step %s: unknown kind %d", s->id, (int)s->kind);
        prc = ST_EUSAGE;
    }
    st_json_release(&d);
    return prc;
}

/* ---- the shell: one child at a time ---- */

/* Reads path whole into out (cleared first), at most max bytes. Returns 0, ST_ETOOBIG or a
 * negated errno. */
static int read_file(const char *path, size_t max, struct st_buf *out)
{
    st_buf_clear(out);
    return st_fs_read_file(path, max, out);
}

/* Starts argv[0] (a path) with stdin from /dev/null and stdout, stderr on the given fds, in a
 * process group of its own (so a stop reaches what it starts: qualify's sandbox). The step dies
 * with the runner (kill -9 included): a resume re-runs the unit, and an orphan must not keep
 * writing into a folder the resume moved to void/. Returns 0 with *p (release it whatever the
 * result), or a negated errno from st_proc_spawn. */
static int spawn(char *const argv[], int out_fd, int err_fd, struct st_proc *p, char *err,
                 size_t errlen)
{
    struct st_proc_opts o = {.argv = (const char *const *)argv, .pdeathsig = SIGKILL};
    o.std[0].kind = ST_PROC_FD_NULL;
    o.std[1] = (struct st_proc_fd){.kind = ST_PROC_FD_DUP, .fd = out_fd};
    o.std[2] = (struct st_proc_fd){.kind = ST_PROC_FD_DUP, .fd = err_fd};
    return st_proc_spawn(&o, p, err, errlen);
}

/* Waits for the child, calling the tick every tick_ms; a non-zero tick sends SIGTERM to the
 * child's group, SIGKILL 5 s later. Returns 0 with *code (the exit code, 128 + signal), or
 * -ECHILD when it was reaped elsewhere. */
static int wait_child(struct st_proc *p, const struct st_step_env *e, int *code, int *aborted)
{
    uint64_t tick_ns = (uint64_t)(e->tick_ms ? e->tick_ms : 1000) * ST_NS_PER_MS;
    uint64_t next_tick = st_clock_mono_ns() + tick_ns, term_at = 0;
    int killed = 0;
    for (;;) {
        uint64_t now = st_clock_mono_ns();
        uint64_t until = *aborted  ? (killed ? UINT64_MAX : term_at + KILL_AFTER_NS)
                         : e->tick ? next_tick
                                   : UINT64_MAX;
        if (st_proc_wait(p, until == UINT64_MAX ? UINT64_MAX
                            : until > now       ? until - now
                                                : 0) == 0) {
            if (p->wstatus == -1) {
                return -ECHILD;
            }
            *code = st_proc_status(p) >= 0 ? st_proc_status(p) : 255;
            return 0;
        }
        now = st_clock_mono_ns();
        if (!*aborted && e->tick && now >= next_tick) {
            next_tick = now + tick_ns;
            if (e->tick(e->tick_ctx) != 0) {
                *aborted = 1;
                term_at = now;
                st_proc_kill(p, SIGTERM);
            }
        }
        if (*aborted && !killed && now - term_at >= KILL_AFTER_NS) {
            killed = 1;
            st_proc_kill(p, SIGKILL);
        }
    }
}

/* Adds a receipts file to the unit's counts (lines, errors); when meas is not NULL, its measured
 * requests go there too. A missing file counts nothing. */
static int count_receipts(const char *path, struct st_step_result *r, struct st_step_rcpts *meas,
                          struct st_buf *scratch, char *err, size_t errlen)
{
    int rc = read_file(path, RCPTS_MAX_BYTES, scratch);
    if (rc == -ENOENT) {
        return 0;
    }
    if (rc != 0) {
        st_errf(err, errlen, "%s: %s", path, st_strerror(rc));
        return rc;
    }
    struct st_step_rcpts tmp;
    st_step_rcpts_init(&tmp);
    struct st_step_rcpts *c = meas ? meas : &tmp;
    uint64_t lines0 = c->lines, errors0 = c->errors;
    rc = st_step_rcpts_parse(c, scratch->data ? scratch->data : "", scratch->len);
    r->receipts += c->lines - lines0;
    r->errors += c->errors - errors0;
    st_step_rcpts_release(&tmp);
    return rc;
}

typedef int (*file_fn)(void *ctx, const char *path, int slot);

/* Calls fn for every receipts file child i writes, slot the index of its measured receipts in
 * st_step_extract's rc[] (-1: counted only: cache canaries, warm-up, seeding passes). Stops at the
 * first non-zero return. *n_rc gets the measured slots. */
static int each_receipts_file(const struct st_plan_step *s, const struct st_step_env *e, uint32_t i,
                              file_fn fn, void *ctx, size_t *n_rc)
{
    struct st_buf path;
    st_buf_init(&path);
    int ret = 0;
    *n_rc = 0;
    switch (s->kind) {
    case ST_PLAN_STEP_BENCH:
    case ST_PLAN_STEP_SOAK: {
        const char *pt = st_step_point(s, i);
        st_buf_printf(&path, "%s/%s.receipts.jsonl", e->dir,
                      s->kind == ST_PLAN_STEP_SOAK ? "soak"
                      : pt                         ? pt
                                                   : "bench");
        ret = fn(ctx, st_buf_str(&path), 0);
        *n_rc = 1;
        break;
    }
    case ST_PLAN_STEP_SWEEP:
    case ST_PLAN_STEP_PROBE: {
        int sweep = s->kind == ST_PLAN_STEP_SWEEP;
        static const char *const sweep_files[] = {"-r1.jsonl", "-r1.cache.jsonl", NULL};
        static const char *const probe_files[] = {"-score.jsonl", "-seed.jsonl", "-cache.jsonl",
                                                  NULL};
        const char *const *files = sweep ? sweep_files : probe_files;
        for (uint32_t k = 0; k < s->n_concurrency && ret == 0; k++) {
            for (size_t f = 0; files[f] && ret == 0; f++) {
                st_buf_clear(&path);
                st_buf_printf(&path, "%s/%s/points/cc%u%s", e->dir, sweep ? "sweep" : "probe",
                              s->concurrency[k], files[f]);
                ret = fn(ctx, st_buf_str(&path), f == 0 ? (int)k : -1);
            }
        }
        *n_rc = s->n_concurrency;
        break;
    }
    case ST_PLAN_STEP_QUALIFY:
        st_buf_printf(&path, "%s/receipts.jsonl", e->dir);
        ret = fn(ctx, st_buf_str(&path), -1);
        break;
    }
    st_buf_release(&path);
    return ret;
}

struct count_ctx {
    struct st_step_result *r;
    struct st_step_rcpts *rc;
    struct st_buf scratch;
    char *err;
    size_t errlen;
};

static int count_fn(void *ctx, const char *path, int slot)
{
    struct count_ctx *c = ctx;
    return count_receipts(path, c->r, slot >= 0 ? &c->rc[slot] : NULL, &c->scratch, c->err,
                          c->errlen);
}

/* The receipts of child i after it ran: counted into r, the measured ones into rc[] (see
 * st_step_extract), *n_rc of them. */
static int child_receipts(const struct st_plan_step *s, const struct st_step_env *e, uint32_t i,
                          struct st_step_result *r, struct st_step_rcpts *rc, size_t *n_rc,
                          char *err, size_t errlen)
{
    struct count_ctx c = {.r = r, .rc = rc, .err = err, .errlen = errlen};
    st_buf_init(&c.scratch);
    int ret = each_receipts_file(s, e, i, count_fn, &c, n_rc);
    st_buf_release(&c.scratch);
    return ret;
}

static int unlink_fn(void *ctx, const char *path, int slot)
{
    (void)ctx;
    (void)slot;
    if (unlink(path) != 0 && errno != ENOENT) {
        return -errno;
    }
    return 0;
}

static void json_path(const struct st_plan_step *s, const struct st_step_env *e, uint32_t i,
                      struct st_buf *out)
{
    const char *pt = st_step_point(s, i);
    switch (s->kind) {
    case ST_PLAN_STEP_BENCH:
        st_buf_printf(out, "%s/%s.json", e->dir, pt ? pt : "bench");
        break;
    case ST_PLAN_STEP_SOAK:
        st_buf_printf(out, "%s/soak.json", e->dir);
        break;
    case ST_PLAN_STEP_SWEEP:
        st_buf_printf(out, "%s/sweep/sweep.json", e->dir);
        break;
    case ST_PLAN_STEP_PROBE:
        st_buf_printf(out, "%s/probe/probe.json", e->dir);
        break;
    case ST_PLAN_STEP_QUALIFY:
        st_buf_printf(out, "%s/qualify.json", e->dir);
        break;
    }
}

/* Appends text to r->argv_line, "; " between children; what does not fit is cut, ending "...". */
static void argv_line_add(struct st_step_result *r, const char *text)
{
    size_t have = strlen(r->argv_line), cap = sizeof(r->argv_line);
    int w = snprintf(r->argv_line + have, cap - have, "%s%s", have ? "; " : "", text);
    if (w < 0 || (size_t)w >= cap - have) {
        memcpy(r->argv_line + cap - 4, "...", 4);
    }
}

/* Runs child i: argv, output files, wait, receipts, metrics. */
static int run_child(const struct st_plan_step *s, const struct st_step_env *e, uint32_t i,
                     int out_fd, int err_fd, int cmd_fd, struct st_step_result *r, char *err,
                     size_t errlen)
{
    struct st_step_argv av;
    struct st_buf line, json;
    st_buf_init(&line);
    st_buf_init(&json);
    struct st_step_rcpts rc[ST_PLAN_MAX_POINTS];
    for (size_t k = 0; k < ST_PLAN_MAX_POINTS; k++) {
        st_step_rcpts_init(&rc[k]);
    }
    size_t n_rc = 0;
    int code = 0;
    int ret = st_step_argv_build(s, e, i, &av, err, errlen);
    if (ret != 0) {
        goto out;
    }
    /* A folder used before (a resumed unit) may hold an earlier child's JSON and receipts: they
     * must not pass for this child's. */
    size_t n_files = 0;
    ret = each_receipts_file(s, e, i, unlink_fn, NULL, &n_files);
    json_path(s, e, i, &json);
    if (ret == 0 && unlink(st_buf_str(&json)) != 0 && errno != ENOENT) {
        ret = -errno;
    }
    if (ret != 0) {
        st_errf(err, errlen, "cannot clear the earlier outputs in %s: %s", e->dir,
                st_strerror(ret));
        goto out;
    }
    st_buf_clear(&json);
    st_step_argv_line(&av, &line);
    argv_line_add(r, st_buf_str(&line));
    st_buf_putc(&line, '\n');
    if (cmd_fd >= 0 && st_fs_write_all(cmd_fd, line.data, line.len) != 0) {
        /* The evidence file is a convenience; argv_line holds the same. */
    }
    struct st_proc proc;
    ret = spawn(av.argv, out_fd, err_fd, &proc, err, errlen);
    if (ret != 0) {
        st_proc_release(&proc);
        r->exit_code = 127;
        goto out;
    }
    ret = wait_child(&proc, e, &code, &r->aborted);
    st_proc_release(&proc);
    if (ret != 0) {
        st_errf(err, errlen, "waitpid: %s", st_strerror(ret));
        goto out;
    }
    if (r->exit_code == 0) {
        r->exit_code = code;
    }
    ret = child_receipts(s, e, i, r, rc, &n_rc, err, errlen);
    if (ret != 0 || r->aborted) {
        goto out; /* an aborted unit's figures are not measurements */
    }
    st_buf_clear(&line);
    json_path(s, e, i, &line);
    ret = read_file(st_buf_str(&line), JSON_MAX_BYTES, &json);
    if (ret != 0) {
        st_errf(err, errlen, "%s: %s (the child exited with %d; see %s/stderr.txt)",
                st_buf_str(&line), st_strerror(ret), code, e->dir);
        goto out;
    }
    char why[256] = "";
    ret =
        st_step_extract(s, i, json.data ? json.data : "", json.len, rc, n_rc, r, why, sizeof(why));
    if (ret != 0) {
        st_errf(err, errlen, "%s: %s", st_buf_str(&line), why);
    }
out:
    for (size_t k = 0; k < ST_PLAN_MAX_POINTS; k++) {
        st_step_rcpts_release(&rc[k]);
    }
    st_step_argv_release(&av);
    st_buf_release(&line);
    st_buf_release(&json);
    return ret;
}

static int open_out(const struct st_step_env *e, const char *name, int *fd, char *err,
                    size_t errlen)
{
    struct st_buf p;
    st_buf_init(&p);
    st_buf_printf(&p, "%s/%s", e->dir, name);
    *fd = open(st_buf_str(&p), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int rc = *fd < 0 ? -errno : 0;
    if (rc != 0) {
        st_errf(err, errlen, "%s: %s", st_buf_str(&p), st_strerror(rc));
    }
    st_buf_release(&p);
    return rc;
}

int st_step_run(const struct st_plan_step *s, const struct st_step_env *e, struct st_step_result *r,
                char *err, size_t errlen)
{
    int out_fd = -1, err_fd = -1, cmd_fd = -1;
    int rc = open_out(e, "stdout.txt", &out_fd, err, errlen);
    if (rc == 0) {
        rc = open_out(e, "stderr.txt", &err_fd, err, errlen);
    }
    if (rc == 0) {
        rc = open_out(e, "commands.txt", &cmd_fd, err, errlen);
    }
    for (uint32_t i = 0; rc == 0 && i < st_step_children(s) && !r->aborted; i++) {
        rc = run_child(s, e, i, out_fd, err_fd, cmd_fd, r, err, errlen);
    }
    if (out_fd >= 0) {
        close(out_fd);
    }
    if (err_fd >= 0) {
        close(err_fd);
    }
    if (cmd_fd >= 0) {
        close(cmd_fd);
    }
    return rc;
}
