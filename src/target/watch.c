/*
 * Watchers of an arm while its stages run: /metrics through src/target (2 s timeouts), the GPUs
 * through nvidia-smi (a child with a 5 s limit, skipped when absent) and the host's oom_kill
 * counter. Each sample is one JSON line appended to DIR/watch.jsonl; the summary sums counter
 * deltas between consecutive answered scrapes (a counter that went backwards restarted: its new
 * value is the delta) and keeps the peaks of the gauges. Not a thread: the runner calls
 * st_watch_tick between its own waits. The parsers of nvidia-smi's CSV and /proc/vmstat are pure.
 */
#include "target/watch.h"

#include <sys/stat.h>
#include <sys/types.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/json.h"
#include "base/proc.h"
#include "base/xalloc.h"
#include "proto/prom.h"
#include "store/fsutil.h"
#include "target/server.h"

#define SCRAPE_TIMEOUT_MS 2000
#define NVSMI_TIMEOUT_MS 5000
#define NVSMI_MAX_BYTES 65536
#define VMSTAT_MAX_BYTES (1u << 20)

static const char *const nvsmi_args[] = {
    "nvidia-smi", "--query-gpu=index,memory.used,memory.total,utilization.gpu,temperature.gpu",
    "--format=csv,noheader,nounits", NULL};

/* KV usage gauges (0..1) and preemption counters, per dialect; the first present wins. */
static const char *const kv_usage_names[] = {"vllm:kv_cache_usage_perc",
                                             "vllm:gpu_cache_usage_perc", "sglang:token_usage",
                                             "llamacpp:kv_cache_usage_ratio", NULL};
static const char *const preempt_names[] = {"vllm:num_preemptions_total",
                                            "sglang:num_retracted_reqs", NULL};

struct st_watch {
    struct st_target t; /* owned: base URL, timeouts, the reused curl handle */
    char *nvsmi;        /* owned path, NULL when disabled or not found */
    char *vmstat;       /* owned path, NULL when disabled */
    int fd;             /* owned: DIR/watch.jsonl, O_APPEND */
    double interval_s;
    uint64_t last_ns;
    int sampled;

    /* Counters: the last answered scrape and the sums of deltas since the first. */
    int have_prev;
    struct st_target_counters prev;
    double prev_preempt;
    int have_prev_preempt;
    double acc, draft, drafts, hits, queries, preempt;
    int spec_seen, drafts_seen, prefix_seen, len_gauge_seen;
    double len_gauge;

    int vm_known;
    uint64_t vm_first, vm_last;

    struct st_watch_summary s;
};

/* ---- pure parsers ---- */

/* A field of a CSV line without surrounding blanks: [*b, *e). */
static void trim(const char **b, const char **e)
{
    while (*b < *e && (**b == ' ' || **b == '\t')) {
        (*b)++;
    }
    while (*e > *b && ((*e)[-1] == ' ' || (*e)[-1] == '\t' || (*e)[-1] == '\r')) {
        (*e)--;
    }
}

/* nvidia-smi's placeholders for a value it cannot read. */
static int is_na(const char *b, const char *e)
{
    size_t n = (size_t)(e - b);
    return n >= 2 && b[0] == '[' && e[-1] == ']';
}

/* A decimal number in [b, e): 0 with *v, -1 when it is not one. */
static int field_num(const char *b, const char *e, double *v)
{
    char tmp[64];
    size_t n = (size_t)(e - b);
    if (n == 0 || n >= sizeof(tmp)) {
        return -1;
    }
    memcpy(tmp, b, n);
    tmp[n] = '\0';
    for (size_t i = 0; i < n; i++) {
        char c = tmp[i];
        if (!((c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+')) {
            return -1;
        }
    }
    char *end = NULL;
    errno = 0;
    double d = strtod(tmp, &end);
    if (errno || end != tmp + n || !isfinite(d)) {
        return -1;
    }
    *v = d;
    return 0;
}

int st_watch_parse_nvsmi(const char *text, size_t len, struct st_watch_gpu *out, size_t max)
{
    size_t n = 0, i = 0;
    while (i < len) {
        const char *line = text + i;
        const char *nl = memchr(line, '\n', len - i);
        const char *end = nl ? nl : text + len;
        i = (size_t)(end - text) + (nl ? 1 : 0);
        const char *b = line, *e = end;
        trim(&b, &e);
        if (b == e) {
            continue;
        }
        const char *f[5][2];
        int nf = 0;
        const char *p = b;
        for (;;) {
            const char *c = memchr(p, ',', (size_t)(e - p));
            const char *fe = c ? c : e;
            if (nf == 5) {
                return -1; /* more than five fields */
            }
            f[nf][0] = p;
            f[nf][1] = fe;
            trim(&f[nf][0], &f[nf][1]);
            nf++;
            if (!c) {
                break;
            }
            p = c + 1;
        }
        if (nf != 5) {
            return -1;
        }
        double v[5];
        for (int k = 0; k < 5; k++) {
            if (k > 0 && is_na(f[k][0], f[k][1])) {
                v[k] = -1;
            } else if (field_num(f[k][0], f[k][1], &v[k]) != 0) {
                return -1;
            }
        }
        if (v[0] < 0 || v[0] != floor(v[0]) || v[0] > 65535) {
            return -1;
        }
        /* Memory is in MiB: a figure of 2^64 bytes or more is no reading (and has no uint64_t
         * in bytes; the cast would be undefined). Found by fuzz/fuzz_watch.c. */
        if (v[1] * 1048576.0 >= 18446744073709551616.0 ||
            v[2] * 1048576.0 >= 18446744073709551616.0) {
            return -1;
        }
        if (n < max) {
            struct st_watch_gpu *g = &out[n];
            g->index = (uint32_t)v[0];
            /* nounits: memory in MiB. */
            g->mem_used_bytes = v[1] >= 0 ? (uint64_t)(v[1] * 1048576.0) : 0;
            g->mem_total_bytes = v[2] >= 0 ? (uint64_t)(v[2] * 1048576.0) : 0;
            g->util_pct = v[3];
            g->temp_c = v[4];
            n++;
        }
    }
    return (int)n;
}

int st_watch_parse_vmstat(const char *text, size_t len, uint64_t *v)
{
    static const char key[] = "oom_kill";
    size_t i = 0;
    while (i < len) {
        const char *line = text + i;
        const char *nl = memchr(line, '\n', len - i);
        size_t n = nl ? (size_t)(nl - line) : len - i;
        i += n + (nl ? 1 : 0);
        if (n > sizeof(key) && memcmp(line, key, sizeof(key) - 1) == 0 &&
            line[sizeof(key) - 1] == ' ') {
            uint64_t x = 0;
            size_t k = sizeof(key);
            while (k < n && line[k] == ' ') {
                k++;
            }
            size_t d0 = k;
            while (k < n && line[k] >= '0' && line[k] <= '9') {
                uint64_t dg = (uint64_t)(line[k] - '0');
                if (x > UINT64_MAX / 10 || (x == UINT64_MAX / 10 && dg > UINT64_MAX % 10)) {
                    return -1;
                }
                x = x * 10 + dg;
                k++;
            }
            if (k == d0 || (k < n && line[k] != ' ' && line[k] != '\r')) {
                return -1;
            }
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* ---- I/O ---- */

/* Reads path (at most max bytes) into out (cleared first). Returns 0 or a negated errno /
 * ST_ETOOBIG. */
static int read_small(const char *path, size_t max, struct st_buf *out)
{
    st_buf_clear(out);
    return st_fs_read_file(path, max, out);
}

/* "nvidia-smi" in PATH, or NULL. */
static char *find_in_path(const char *name)
{
    const char *path = getenv("PATH");
    if (!path) {
        return NULL;
    }
    while (*path) {
        const char *c = strchr(path, ':');
        size_t n = c ? (size_t)(c - path) : strlen(path);
        struct st_buf p;
        st_buf_init(&p);
        st_buf_printf(&p, "%.*s/%s", (int)n, n ? path : ".", name);
        struct stat st;
        if (stat(st_buf_str(&p), &st) == 0 && S_ISREG(st.st_mode) &&
            access(st_buf_str(&p), X_OK) == 0) {
            return st_buf_take(&p);
        }
        st_buf_release(&p);
        path += n + (c ? 1 : 0);
        if (!c) {
            break;
        }
    }
    return NULL;
}

/* Runs nvidia-smi with the query; its stdout (at most NVSMI_MAX_BYTES) into out. Killed after
 * NVSMI_TIMEOUT_MS. Returns 0, or an error with why filled. */
static int run_nvsmi(const char *path, struct st_buf *out, char *why, size_t whylen)
{
    st_buf_clear(out);
    const char *argv[] = {path, nvsmi_args[1], nvsmi_args[2], NULL};
    struct st_proc_opts o = {
        .argv = argv,
        .std = {{.kind = ST_PROC_FD_NULL}, {.kind = ST_PROC_FD_PIPE}, {.kind = ST_PROC_FD_NULL}}};
    struct st_proc_run r;
    st_proc_run_init(&r, NVSMI_TIMEOUT_MS * ST_NS_PER_MS, 0, NVSMI_MAX_BYTES, 0);
    int rc = st_proc_run(&o, &r, why, whylen);
    if (rc != 0) {
        /* why is filled */
    } else if (r.timed_out) {
        rc = ST_ETIMEOUT;
        snprintf(why, whylen, "%s: no answer within %d ms (killed)", path, NVSMI_TIMEOUT_MS);
    } else if (r.out_bytes > NVSMI_MAX_BYTES) {
        rc = ST_ETOOBIG;
        snprintf(why, whylen, "%s: more than %d bytes", path, NVSMI_MAX_BYTES);
    } else if (r.status != 0) {
        rc = ST_ESERVER;
        snprintf(why, whylen, "%s exited with %d", path, r.status);
    } else {
        st_buf_append(out, r.out.data, r.out.len);
    }
    st_proc_run_release(&r);
    return rc;
}

static int first_sum(const struct st_prom *m, const char *const *names, double *v)
{
    for (size_t i = 0; names[i]; i++) {
        if (st_prom_sum(m, names[i], NULL, v) == 0) {
            return 1;
        }
    }
    return 0;
}

/* A counter's increase between two scrapes; a decrease is a restart: the new value. */
static double inc(double before, double after)
{
    return after >= before ? after - before : after;
}

static void jw_opt(struct st_jw *w, const char *k, int have, double v)
{
    st_jw_key(w, k);
    if (have && isfinite(v)) {
        st_jw_f64(w, v);
    } else {
        st_jw_null(w);
    }
}

/* The scrape part of a sample: counters into the sums, gauges into the peaks, fields into w. */
static void sample_metrics(struct st_watch *w, struct st_jw *jw)
{
    struct st_prom m;
    st_prom_init(&m);
    char err[256] = "";
    int rc = st_target_metrics(&w->t, &m, err, sizeof(err));
    st_jw_key(jw, "metrics");
    st_jw_obj_open(jw);
    st_jw_kbool(jw, "ok", rc == 0);
    if (rc != 0) {
        w->s.scrape_errors++;
        st_jw_kstr(jw, "error", err[0] ? err : st_strerror(rc));
        st_jw_obj_close(jw);
        st_prom_release(&m);
        return;
    }
    w->s.samples++;
    struct st_target_counters c;
    st_target_counters_read(&m, &c);
    if (w->have_prev) {
        const struct st_target_counters *p = &w->prev;
        if ((p->have & c.have & ST_TARGET_HAVE_SPEC) != 0) {
            w->acc += inc(p->spec_accepted_tokens, c.spec_accepted_tokens);
            w->draft += inc(p->spec_draft_tokens, c.spec_draft_tokens);
            w->spec_seen = 1;
        }
        if ((p->have & c.have & ST_TARGET_HAVE_SPEC_DRAFTS) != 0) {
            w->drafts += inc(p->spec_drafts, c.spec_drafts);
            w->drafts_seen = 1;
        }
        if ((p->have & c.have & ST_TARGET_HAVE_PREFIX) != 0) {
            w->hits += inc(p->prefix_hit_tokens, c.prefix_hit_tokens);
            w->queries += inc(p->prefix_query_tokens, c.prefix_query_tokens);
            w->prefix_seen = 1;
        }
    }
    w->prev = c;
    w->have_prev = 1;
    if (c.have & ST_TARGET_HAVE_ACCEPT_LEN) {
        w->len_gauge = c.spec_accept_length;
        w->len_gauge_seen = 1;
    }
    if ((c.have & ST_TARGET_HAVE_WAITING) && c.waiting > 0 &&
        (uint64_t)c.waiting > w->s.waiting_max) {
        w->s.waiting_max = (uint64_t)c.waiting;
    }
    double kv = NAN, pre = NAN;
    int have_kv = first_sum(&m, kv_usage_names, &kv);
    int have_pre = first_sum(&m, preempt_names, &pre);
    if (have_kv && kv > w->s.kv_usage_max) {
        w->s.kv_usage_max = kv;
    }
    if (have_pre) {
        if (w->have_prev_preempt) {
            w->preempt += inc(w->prev_preempt, pre);
        }
        w->prev_preempt = pre;
        w->have_prev_preempt = 1;
    }
    jw_opt(jw, "prefix_hit_tokens", c.have & ST_TARGET_HAVE_PREFIX, c.prefix_hit_tokens);
    jw_opt(jw, "prefix_query_tokens", c.have & ST_TARGET_HAVE_PREFIX, c.prefix_query_tokens);
    jw_opt(jw, "prompt_tokens", c.have & ST_TARGET_HAVE_TOKENS, c.prompt_tokens);
    jw_opt(jw, "generation_tokens", c.have & ST_TARGET_HAVE_TOKENS, c.generation_tokens);
    jw_opt(jw, "spec_accepted_tokens", c.have & ST_TARGET_HAVE_SPEC, c.spec_accepted_tokens);
    jw_opt(jw, "spec_draft_tokens", c.have & ST_TARGET_HAVE_SPEC, c.spec_draft_tokens);
    jw_opt(jw, "spec_drafts", c.have & ST_TARGET_HAVE_SPEC_DRAFTS, c.spec_drafts);
    jw_opt(jw, "spec_accept_length", c.have & ST_TARGET_HAVE_ACCEPT_LEN, c.spec_accept_length);
    jw_opt(jw, "waiting", c.have & ST_TARGET_HAVE_WAITING, c.waiting);
    jw_opt(jw, "running", c.have & ST_TARGET_HAVE_RUNNING, c.running);
    jw_opt(jw, "kv_usage", have_kv, kv);
    jw_opt(jw, "preemptions", have_pre, pre);
    st_jw_obj_close(jw);
    st_prom_release(&m);
}

static void sample_gpus(struct st_watch *w, struct st_jw *jw)
{
    if (!w->nvsmi) {
        return;
    }
    struct st_buf out;
    st_buf_init(&out);
    char why[320] = "";
    struct st_watch_gpu g[ST_WATCH_MAX_GPUS];
    int rc = run_nvsmi(w->nvsmi, &out, why, sizeof(why));
    int n = rc == 0 ? st_watch_parse_nvsmi(out.data ? out.data : "", out.len, g, ST_WATCH_MAX_GPUS)
                    : -1;
    if (rc == 0 && n < 0) {
        snprintf(why, sizeof(why),
                 "%s: a line is not index, memory.used, memory.total, "
                 "utilization.gpu, temperature.gpu",
                 w->nvsmi);
    }
    st_buf_release(&out);
    if (n < 0) {
        st_jw_kstr(jw, "gpu_error", why);
        return;
    }
    st_jw_key(jw, "gpus");
    st_jw_arr_open(jw);
    for (int i = 0; i < n; i++) {
        st_jw_obj_open(jw);
        st_jw_ku64(jw, "index", g[i].index);
        st_jw_ku64(jw, "mem_used_bytes", g[i].mem_used_bytes);
        st_jw_ku64(jw, "mem_total_bytes", g[i].mem_total_bytes);
        jw_opt(jw, "util_pct", g[i].util_pct >= 0, g[i].util_pct);
        jw_opt(jw, "temp_c", g[i].temp_c >= 0, g[i].temp_c);
        st_jw_obj_close(jw);
        if (g[i].mem_used_bytes > w->s.gpu_mem_max_bytes) {
            w->s.gpu_mem_max_bytes = g[i].mem_used_bytes;
        }
        if (g[i].temp_c > w->s.gpu_temp_max_c) {
            w->s.gpu_temp_max_c = g[i].temp_c;
        }
    }
    st_jw_arr_close(jw);
    if ((uint32_t)n > w->s.n_gpus) {
        w->s.n_gpus = (uint32_t)n;
    }
}

static void sample_vmstat(struct st_watch *w, struct st_jw *jw)
{
    if (!w->vmstat) {
        return;
    }
    struct st_buf b;
    st_buf_init(&b);
    uint64_t v = 0;
    int ok = read_small(w->vmstat, VMSTAT_MAX_BYTES, &b) == 0 &&
             st_watch_parse_vmstat(b.data ? b.data : "", b.len, &v) == 0;
    st_buf_release(&b);
    st_jw_key(jw, "oom_kill");
    if (!ok) {
        st_jw_null(jw);
        return;
    }
    st_jw_u64(jw, v);
    if (!w->vm_known) {
        w->vm_known = 1;
        w->vm_first = v;
    }
    w->vm_last = v;
}

/* One sample: all three sources, one line. */
static void sample(struct st_watch *w, uint64_t now_ns)
{
    struct st_buf line;
    st_buf_init(&line);
    struct st_jw jw;
    st_jw_init(&jw, &line);
    st_jw_obj_open(&jw);
    st_jw_ku64(&jw, "t_unix_ns", st_clock_unix_ns());
    st_jw_ku64(&jw, "t_mono_ns", now_ns);
    sample_metrics(w, &jw);
    sample_gpus(w, &jw);
    sample_vmstat(w, &jw);
    st_jw_obj_close(&jw);
    st_buf_putc(&line, '\n');
    if (w->fd >= 0 && st_fs_write_all(w->fd, line.data, line.len) != 0) {
        /* A full disk loses watch lines, not the campaign: the summary still counts. */
    }
    st_buf_release(&line);
    w->last_ns = now_ns;
    w->sampled = 1;
}

static void summary_init(struct st_watch_summary *s)
{
    memset(s, 0, sizeof(*s));
    s->spec_accept_rate = -1;
    s->spec_accept_len = -1;
    s->prefix_hit_rate = -1;
    s->kv_usage_max = -1;
    s->gpu_temp_max_c = -1;
}

int st_watch_new(const struct st_watch_cfg *cfg, struct st_watch **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!cfg->url || !cfg->dir) {
        snprintf(err, errlen, "watch: a URL and a folder are needed");
        return ST_EUSAGE;
    }
    struct st_buf p;
    st_buf_init(&p);
    st_buf_printf(&p, "%s/watch.jsonl", cfg->dir);
    int fd = open(st_buf_str(&p), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        int rc = -errno;
        snprintf(err, errlen, "%s: %s", st_buf_str(&p), st_strerror(rc));
        st_buf_release(&p);
        return rc;
    }
    st_buf_release(&p);
    struct st_watch *w = st_xcalloc(1, sizeof(*w));
    w->fd = fd;
    struct st_target_cfg tc = {.base_url = cfg->url,
                               .timeout_ms = SCRAPE_TIMEOUT_MS,
                               .connect_timeout_ms = SCRAPE_TIMEOUT_MS};
    st_target_init(&w->t, &tc);
    if (!cfg->nvidia_smi) {
        w->nvsmi = find_in_path("nvidia-smi");
    } else if (cfg->nvidia_smi[0]) {
        w->nvsmi = st_xstrdup(cfg->nvidia_smi);
    }
    if (!cfg->vmstat) {
        w->vmstat = st_xstrdup("/proc/vmstat");
    } else if (cfg->vmstat[0]) {
        w->vmstat = st_xstrdup(cfg->vmstat);
    }
    w->interval_s = cfg->interval_s > 0 ? cfg->interval_s : 5.0;
    summary_init(&w->s);
    sample(w, st_clock_mono_ns());
    *out = w;
    return 0;
}

int st_watch_tick(struct st_watch *w, uint64_t now_ns)
{
    if (!w->sampled || now_ns < w->last_ns ||
        (double)(now_ns - w->last_ns) >= w->interval_s * 1e9) {
        sample(w, now_ns);
    }
    return w->vm_known && w->vm_last > w->vm_first;
}

void st_watch_finish(struct st_watch *w, struct st_watch_summary *s)
{
    sample(w, st_clock_mono_ns());
    *s = w->s;
    if (w->spec_seen && w->draft > 0) {
        s->spec_accept_rate = w->acc / w->draft;
    }
    if (w->drafts_seen && w->drafts > 0) {
        s->spec_accept_len = 1 + w->acc / w->drafts;
    } else if (w->len_gauge_seen && w->len_gauge > 0) {
        s->spec_accept_len = w->len_gauge;
    }
    if (w->prefix_seen && w->queries > 0) {
        s->prefix_hit_rate = w->hits / w->queries;
    }
    /* Unknown is not zero: a server without a preemption counter (llama.cpp) reports none. */
    s->preemptions = w->have_prev_preempt ? (int64_t)w->preempt : -1;
    s->oom_kills = w->vm_known ? (int64_t)(w->vm_last - w->vm_first) : -1;
}

enum sfield_kind {
    SF_U32 = 1,   /* uint32_t */
    SF_U64 = 2,   /* uint64_t */
    SF_BYTES = 3, /* uint64_t, null when 0 (unknown) */
    SF_RATE = 4,  /* double, null when negative (unknown) or not finite */
    SF_COUNT = 5, /* int64_t, null when negative (unknown) */
};

#define SFIELD(kind, member)                                                                       \
    {                                                                                              \
#member, kind, offsetof(struct st_watch_summary, member)                                   \
    }

/* The summary's members in the order its JSON object names them. */
static const struct sfield {
    const char *key;
    enum sfield_kind kind;
    size_t off;
} summary_fields[] = {
    SFIELD(SF_U32, samples),
    SFIELD(SF_U32, scrape_errors),
    SFIELD(SF_RATE, spec_accept_rate),
    SFIELD(SF_RATE, spec_accept_len),
    SFIELD(SF_RATE, prefix_hit_rate),
    SFIELD(SF_COUNT, preemptions),
    SFIELD(SF_RATE, kv_usage_max),
    SFIELD(SF_U64, waiting_max),
    SFIELD(SF_BYTES, gpu_mem_max_bytes),
    SFIELD(SF_RATE, gpu_temp_max_c),
    SFIELD(SF_U32, n_gpus),
    SFIELD(SF_COUNT, oom_kills),
};

void st_watch_summary_json(const struct st_watch_summary *s, struct st_buf *out)
{
    struct st_jw w;
    st_jw_init(&w, out);
    st_jw_obj_open(&w);
    for (size_t i = 0; i < sizeof(summary_fields) / sizeof(summary_fields[0]); i++) {
        const struct sfield *f = &summary_fields[i];
        const void *v = (const char *)s + f->off;
        if (f->kind == SF_U32) {
            st_jw_ku64(&w, f->key, *(const uint32_t *)v);
        } else if (f->kind == SF_U64) {
            st_jw_ku64(&w, f->key, *(const uint64_t *)v);
        } else if (f->kind == SF_COUNT) {
            int64_t c = *(const int64_t *)v;
            st_jw_key(&w, f->key);
            c >= 0 ? st_jw_i64(&w, c) : st_jw_null(&w);
        } else if (f->kind == SF_BYTES) {
            uint64_t b = *(const uint64_t *)v;
            st_jw_key(&w, f->key);
            b ? st_jw_u64(&w, b) : st_jw_null(&w);
        } else {
            double d = *(const double *)v;
            jw_opt(&w, f->key, d >= 0, d);
        }
    }
    st_jw_obj_close(&w);
}

void st_watch_free(struct st_watch *w)
{
    if (!w) {
        return;
    }
    st_target_release(&w->t);
    if (w->fd >= 0) {
        close(w->fd);
    }
    free(w->nvsmi);
    free(w->vmstat);
    free(w);
}
