/*
 * `servetune probe capacity`: how many distinct documents of --doc-len tokens the server holds at
 * once (seed 003's capacity probe). At each concurrency N: flush, seed documents 0..N-1 one by one
 * (short outputs), then send the same N at once (--output-len). A pass does not fit when its
 * documents queued by the rule of stats/knee.h, against the prefill measured here (seeding gives
 * ms per uncached token, the first pass one seeded document alone; a document whose first token
 * came only after another ended, slower than --ttft-jump x its own prefill, waited), when the
 * waiting gauge stayed up (real clock only), when a document lost its cached prefix, or when N is
 * over the slot count the server states (llama.cpp /props, SGLang /server_info, or --slots). The
 * gauge is scraped by a thread on a connection of its own with --metrics-timeout, so a slow
 * /metrics never holds the pass; a timed-out scrape is unknown, never 0. The answer is the largest
 * N before the first such pass, beside the slot count and the pool, naming which is the limit.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/xalloc.h"
#include "base/clock.h"
#include "base/json.h"
#include "cli/args.h"
#include "cli/cacheproto.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "cli/wlopts.h"
#include "engine/metrics.h"
#include "stats/knee.h"
#include "stats/summ.h"
#include "store/fsutil.h"
#include "store/receipts.h"
#include "target/server.h"

#define MAX_CC 256
#define LOG_MAX (256u << 20)

/* One request of a pass, from its receipt (st_rec_read); times on the receipt's clock. */
struct doc_rec {
    int seen;
    int ok;
    double ttft_ms;      /* NaN when none */
    int64_t intended_ns; /* -1 unknown */
    int64_t sent_ns;     /* -1 unknown */
    int64_t e2e_ns;      /* end - intended; -1 unknown */
    int64_t cached;      /* -1 unknown */
    int64_t prompt;      /* -1 unknown */
};

struct pass {
    uint32_t cc;
    int done;
    struct st_cache_prep prep;
    struct doc_rec seed[MAX_CC];
    struct doc_rec score[MAX_CC];
    double seed_ttft_max_ms;
    double score_ttft_max_ms;
    double score_ttft_p50_ms;
    double cached_frac_min; /* min over documents of cached / prompt tokens; NaN unknown */
    double waiting_max;     /* the server's waiting gauge, highest answered sample; NaN none */
    double waiting_late;    /* highest sample once every admitted request should run */
    uint32_t scrapes;       /* /metrics scrapes during the scoring pass */
    uint32_t scrapes_timed_out;
    uint32_t scrapes_failed; /* other errors (refused, not Prometheus, no waiting gauge) */
    double prefill_rate;     /* ms per uncached token used for this pass (stats/knee.h) */
    struct st_knee_out knee;
    int failed;
    int queued;
    int evicted;
    int over_slots; /* cc > the slot count */
    int fits;
    char verdict[512];
    char seed_receipts[512];
    char score_receipts[512];
};

struct probe_opts {
    struct st_load_cfg cfg;
    struct st_cli_conn conn;
    struct st_cli_wl wl;
    uint32_t cc[MAX_CC];
    uint32_t ncc;
    uint64_t max_cc;
    uint64_t seed_out;
    double ttft_jump;
    double prefill_jump;
    uint64_t pool;
    uint64_t slots;
    uint64_t metrics_timeout_ms;
    const char *server_log;
    int flush;
    int keep_going;
    const char *out_dir;
    const char *json_path;
};

static void usage(FILE *f)
{
    fputs("usage: servetune probe capacity --url URL --doc-len N [options]\n"
          "\n"
          "How many distinct documents of N tokens the server holds at once: per concurrency,\n"
          "flush, seed the documents one by one (short outputs), then query them all at once;\n"
          "a queue (TTFTs past the measured prefill), a lost cached prefix or more documents\n"
          "than the server's slots means the pool or the slot count is full.\n"
          "\n",
          f);
    st_cli_conn_usage(f);
    fputs("probe:\n"
          "  --doc-len N               document length in tokens (also --input-len)\n"
          "  --output-len N            output tokens of the scoring pass (default 512)\n"
          "  --seed-output-len N       output tokens of the seeding pass (default 8)\n"
          "  --max-cc N                try 1, 2, ... N documents at once (default 16)\n"
          "  --concurrency LIST        or exactly these, increasing (e.g. 2,3,4,6,8)\n"
          "  --ttft-jump X             queueing when a document that started after another\n"
          "                            ended has a TTFT over X times its prefill alone (1.5)\n"
          "  --prefill-jump X          or when the slowest TTFT is over X times the pass's\n"
          "                            prefill and its fastest TTFT (default 4)\n"
          "  --keep-going              run every concurrency, not stopping at the first full one\n"
          "  --pool N                  the KV pool in tokens (default: asked from the server)\n"
          "  --slots N                 requests the server runs at once (default: llama.cpp\n"
          "                            /props total_slots, SGLang /server_info; unknown else)\n"
          "  --metrics-timeout MS      timeout of each /metrics scrape (default 500)\n"
          "  --server-log FILE         the server's start-up log, for its pool line\n"
          "  --no-flush                do not flush before each concurrency (state: warm)\n"
          "  --corpus DIR|FILE.jsonl   text the documents are cut from (default: built-in)\n"
          "  --windows FILE            window map: used when FILE exists, else written there\n"
          "  --len-tolerance F         a document further than F from its length fails (0.01)\n"
          "  --seed N                  seed of the documents (default 1)\n"
          "output:\n"
          "  --out DIR                 probe.json, windows.json, points/cc<N>-seed|score.jsonl\n"
          "  --json FILE               the probe JSON (also)\n",
          f);
}

static int cc_list_opt(const struct st_opt *opt, const char *v, char *err, size_t errlen)
{
    struct probe_opts *o = opt->to.ctx;
    o->ncc = 0;
    const char *s = v;
    for (;;) {
        const char *comma = strchr(s, ',');
        size_t n = comma ? (size_t)(comma - s) : strlen(s);
        char item[32];
        if (n == 0 || n >= sizeof(item) || o->ncc >= MAX_CC) {
            snprintf(err, errlen, "--concurrency: expected up to %d increasing values, got '%s'",
                     MAX_CC, v);
            return ST_EUSAGE;
        }
        memcpy(item, s, n);
        item[n] = '\0';
        uint64_t u = 0;
        int rc = st_arg_u64("--concurrency", item, 1, MAX_CC, &u, err, errlen);
        if (rc) {
            return rc;
        }
        if (o->ncc && u <= o->cc[o->ncc - 1]) {
            snprintf(err, errlen, "--concurrency: values must increase, got '%s'", v);
            return ST_EUSAGE;
        }
        o->cc[o->ncc++] = (uint32_t)u;
        if (!comma) {
            return 0;
        }
        s = comma + 1;
    }
}

/* Parses argv into o. Returns -1 to go on, or the exit code (help, bad usage). */
static int parse(struct probe_opts *o, int argc, char **argv)
{
    static const char other_kind[] =
        "the capacity probe always uses distinct documents; workload options other "
        "than --doc-len, --output-len, --corpus, --windows, --len-tolerance do not apply";
    const struct st_opt own[] = {
        {ST_OPT_FN("--doc-len", st_cli_wl_len_opt, &o->wl), .label = "--input-len",
         .given = &o->wl.inlen_given},
        {ST_OPT_U64("--seed-output-len", &o->seed_out, 1, 1000000)},
        {ST_OPT_U64("--max-cc", &o->max_cc, 1, MAX_CC)},
        {ST_OPT_FN("--concurrency", cc_list_opt, o)},
        {ST_OPT_F64("--ttft-jump", &o->ttft_jump, 1.01, 1e6)},
        {ST_OPT_F64("--prefill-jump", &o->prefill_jump, 1.01, 1e6)},
        {ST_OPT_FLAG("--keep-going", &o->keep_going, 1)},
        {ST_OPT_U64("--pool", &o->pool, 1, UINT64_MAX / 2)},
        {ST_OPT_U64("--slots", &o->slots, 1, UINT32_MAX)},
        {ST_OPT_U64("--metrics-timeout", &o->metrics_timeout_ms, 1, 600000)},
        {ST_OPT_STR("--server-log", &o->server_log)},
        {ST_OPT_FLAG("--no-flush", &o->flush, 0)},
        {ST_OPT_U64("--seed", &o->wl.p.seed, 0, UINT64_MAX)},
        {ST_OPT_STR("--out", &o->out_dir)},
        {ST_OPT_STR("--json", &o->json_path)},
        {ST_OPT_STR("--workload", NULL), .refuse = other_kind},
        {ST_OPT_STR("--prefix-frac", NULL), .refuse = other_kind},
        {ST_OPT_STR("--groups", NULL), .refuse = other_kind},
        {ST_OPT_STR("--zipf", NULL), .refuse = other_kind},
        {ST_OPT_STR("--turns", NULL), .refuse = other_kind},
        {ST_OPT_STR("--needles", NULL), .refuse = other_kind},
        {ST_OPT_STR("--mix", NULL), .refuse = other_kind},
        {ST_OPT_STR("--dataset", NULL), .refuse = other_kind},
        {ST_OPT_STR("--trace", NULL), .refuse = other_kind},
        {.flag = NULL},
    };
    return st_cli_load_parse("probe", usage, &o->conn, &o->cfg, &o->wl, own, argc, argv);
}

static int validate(struct probe_opts *o, char *err, size_t errlen)
{
    struct st_cli_wl *wl = &o->wl;
    if (!wl->inlen_given) {
        snprintf(err, errlen, "--doc-len N is required (the document length in tokens)");
        return ST_EUSAGE;
    }
    if (wl->p.input_len_max != wl->p.input_len) {
        snprintf(err, errlen, "--doc-len: one length, not a range");
        return ST_EUSAGE;
    }
    if (!wl->outlen_given) {
        wl->p.output_len = wl->p.output_len_max = 512;
    }
    if (wl->p.output_len_max != wl->p.output_len) {
        snprintf(err, errlen, "--output-len: one length, not a range");
        return ST_EUSAGE;
    }
    if (o->ncc == 0) {
        for (uint32_t i = 0; i < o->max_cc; i++) {
            o->cc[i] = i + 1;
        }
        o->ncc = (uint32_t)o->max_cc;
    }
    wl->p.kind = ST_WL_DISTINCT;
    wl->p.ignore_eos = 1;
    wl->p.chat = o->cfg.api == ST_API_CHAT;
    o->cfg.ignore_eos = 1;
    o->cfg.input_len = (int64_t)wl->p.input_len;
    o->cfg.output_len = (int64_t)wl->p.output_len;
    return 0;
}

/* Reads a pass's receipts back with the receipt reader (st_rec_read): per document, ok, the
 * stamps and spans on the receipt's clock, cached and prompt tokens. */
static int read_receipts(const char *path, struct doc_rec *docs, uint32_t n, char *err,
                         size_t errlen)
{
    struct st_buf b;
    st_buf_init(&b);
    int rc = st_cli_read_file(path, 1u << 30, &b, err, errlen);
    if (rc) {
        st_buf_release(&b);
        return rc;
    }
    struct st_json d;
    st_json_init(&d, 0);
    const char *p = b.data ? b.data : "";
    const char *end = p + b.len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        struct st_rec_view v;
        if (len && st_json_parse(&d, p, len) == 0 && st_json_type(&d, 0) == ST_JSON_OBJECT) {
            st_rec_read(&d, 0, &v);
            if (v.has_ok && v.id >= 0 && v.id < (double)n) {
                struct doc_rec *r = &docs[(uint32_t)v.id];
                r->seen = 1;
                r->ok = v.ok;
                r->ttft_ms = v.spans.ttft_ns >= 0 ? (double)v.spans.ttft_ns / 1e6 : NAN;
                /* (A client stamp of 0 is an event that did not happen; the simulator's
                 * virtual clock starts at 0.) */
                r->intended_ns =
                    v.intended_ns > 0 || (v.virt && v.intended_ns == 0) ? v.intended_ns : -1;
                r->sent_ns = r->intended_ns >= 0 && v.sent_ns >= r->intended_ns ? v.sent_ns : -1;
                r->e2e_ns = v.spans.e2e_ns;
                r->cached = v.cached_tokens;
                r->prompt = v.prompt_tokens;
            }
        }
        p += len + 1;
    }
    st_json_release(&d);
    st_buf_release(&b);
    return 0;
}

/*
 * The waiting-requests gauge during a scoring pass, scraped every 20 ms by a thread of its own
 * through a target of its own (its own connection, --metrics-timeout per scrape), so a /metrics
 * that answers late (llama.cpp serves it through the task queue the pass keeps busy) neither
 * holds the load's watcher nor reads as an empty queue. The thread owns every field below the
 * line until the join.
 */
struct gauge {
    struct st_target *m;    /* borrowed: the scraping target; used by this thread only */
    uint64_t t0;            /* when the pass started (monotonic ns) */
    uint64_t late_after_ns; /* samples sent later than this after t0 count as "late" */
    atomic_int stop;
    pthread_t th;
    int started;
    /* ---- */
    double max, late_max; /* NaN until an answered scrape had the gauge */
    uint32_t scrapes, timed_out, failed;
};

#define GAUGE_EVERY_NS (20 * ST_NS_PER_MS)

static void *gauge_main(void *arg)
{
    struct gauge *g = arg;
    while (!atomic_load(&g->stop)) {
        uint64_t sent = st_clock_mono_ns();
        struct st_prom pm;
        st_prom_init(&pm);
        char err[256];
        int rc = st_target_metrics(g->m, &pm, err, sizeof(err));
        g->scrapes++;
        if (rc == ST_ETIMEOUT) {
            g->timed_out++;
        } else if (rc) {
            g->failed++;
        } else {
            struct st_target_counters c;
            st_target_counters_read(&pm, &c);
            if (!(c.have & ST_TARGET_HAVE_WAITING)) {
                g->failed++;
            } else {
                if (isnan(g->max) || c.waiting > g->max) {
                    g->max = c.waiting;
                }
                if (sent - g->t0 > g->late_after_ns &&
                    (isnan(g->late_max) || c.waiting > g->late_max)) {
                    g->late_max = c.waiting;
                }
            }
        }
        st_prom_release(&pm);
        /* The next scrape 20 ms after this one was sent, looking at stop every 2 ms. */
        while (!atomic_load(&g->stop) && st_clock_mono_ns() - sent < GAUGE_EVERY_NS) {
            struct timespec ts = {.tv_sec = 0, .tv_nsec = 2 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

static void gauge_start(struct gauge *g)
{
    g->max = g->late_max = NAN;
    atomic_init(&g->stop, 0);
    g->t0 = st_clock_mono_ns();
    g->started = g->m && pthread_create(&g->th, NULL, gauge_main, g) == 0;
}

/* Stops the thread; waits at most for the scrape in flight (its timeout). */
static void gauge_stop(struct gauge *g)
{
    if (g->started) {
        atomic_store(&g->stop, 1);
        pthread_join(g->th, NULL);
        g->started = 0;
    }
}

struct probe_state {
    struct probe_opts *o;
    struct st_target *t;
    struct st_target *scraper; /* borrowed: the gauge's own target; NULL: no /metrics */
    const struct st_target_counter *counter; /* the build's token counter */
    struct pass *passes;
    const char *dir;
    uint32_t slots; /* requests the server runs at once; 0 unknown */
    char slots_source[128];
    double ref_ttft_ms;      /* the one-document scoring TTFT (receipt clock), NaN before it */
    double ref_ttft_real_ns; /* the same in real ns */
    double ref_cached_frac;  /* its cached / prompt tokens */
    double ref_uncached;     /* its uncached tokens (NaN unknown) */
    uint32_t ref_cc;         /* the concurrency of that first pass (1 by default) */
    /* Every seeded document so far: TTFT, uncached and prompt tokens (stats/knee.h's rate). */
    double *seed_ttft, *seed_unc, *seed_prompt;
    size_t nseed;
    int interrupted;
    int io_error;
};

/* One load of the first cc documents: seeding (serial, short) or scoring (all at once). */
static int pass_load(struct probe_state *pst, struct pass *ps, int scoring, struct gauge *g,
                     char *err, size_t errlen)
{
    struct probe_opts *o = pst->o;
    struct st_receipts rec = {.fd = -1};
    char *path = scoring ? ps->score_receipts : ps->seed_receipts;
    char stem[48];
    snprintf(stem, sizeof(stem), "cc%u-%s", ps->cc, scoring ? "score" : "seed");
    int rc = st_cli_open_receipts(pst->dir, stem, &rec, path, sizeof(ps->score_receipts),
                                  &pst->io_error, err, errlen);
    if (rc) {
        return rc;
    }
    char members[160];
    snprintf(members, sizeof(members), "\"point\":\"cc%u-%s\",\"cache_state\":\"%s\"", ps->cc,
             scoring ? "score" : "seed", st_cache_state_name(ps->prep.state));
    struct st_cli_slice slice = {.wl = o->wl.wl,
                                 .base = 0,
                                 .members = members,
                                 .max_tokens = scoring ? -1 : (int64_t)o->seed_out};
    struct st_load_cfg cfg = o->cfg;
    cfg.source = st_cli_slice_source;
    cfg.source_ctx = &slice;
    cfg.requests = ps->cc;
    cfg.concurrency = scoring ? ps->cc : 1;
    cfg.rate = 0;
    cfg.receipts = &rec;
    cfg.workers = st_cli_default_workers(&cfg);
    char label[48];
    snprintf(label, sizeof(label), "cc%u %s", ps->cc, scoring ? "score" : "seed");
    struct st_cli_watch w = {.cmd = "probe", .label = label, .progress = o->conn.progress};
    if (g) {
        gauge_start(g);
    }
    struct st_run_result res;
    rc = st_cli_run_load(&cfg, &w, &res, err, errlen);
    if (g) {
        gauge_stop(g);
    }
    int crc = st_receipts_close(&rec);
    if (rc) {
        return rc;
    }
    if (res.interrupted) {
        pst->interrupted = 1;
    }
    st_run_result_release(&res);
    if (crc) {
        snprintf(err, errlen, "receipts %s: %s", path, st_strerror(crc));
        pst->io_error = 1;
        return crc;
    }
    /* The receipts' times are on the clock the metrics count with (virtual on the simulator). */
    return read_receipts(path, scoring ? ps->score : ps->seed, ps->cc, err, errlen);
}

/* Judges a finished pass against the one-document reference. */
/* Uncached tokens of a request: prompt - cached; NaN when either is unknown. */
static double uncached_of(const struct doc_rec *r)
{
    return r->cached >= 0 && r->prompt >= r->cached ? (double)(r->prompt - r->cached) : NAN;
}

/* Adds the pass's seeded documents to the prefill-rate sample: those whose uncached part is
 * known, and, after a flush, those whose cached count is unknown (then all of the prompt). */
static void add_seeds(struct probe_state *pst, const struct pass *ps)
{
    int flushed = ps->prep.state == ST_CACHE_FLUSHED || ps->prep.state == ST_CACHE_FLUSHED_WARMED;
    size_t cap = pst->nseed + ps->cc;
    pst->seed_ttft = st_xrealloc(pst->seed_ttft, cap * sizeof(double));
    pst->seed_unc = st_xrealloc(pst->seed_unc, cap * sizeof(double));
    pst->seed_prompt = st_xrealloc(pst->seed_prompt, cap * sizeof(double));
    for (uint32_t i = 0; i < ps->cc; i++) {
        const struct doc_rec *sd = &ps->seed[i];
        double u = uncached_of(sd);
        if (!sd->ok || isnan(sd->ttft_ms) || sd->prompt <= 0 || (isnan(u) && !flushed)) {
            continue;
        }
        pst->seed_ttft[pst->nseed] = sd->ttft_ms;
        pst->seed_unc[pst->nseed] = isnan(u) ? (double)sd->prompt : u;
        pst->seed_prompt[pst->nseed] = (double)sd->prompt;
        pst->nseed++;
    }
}

/* The knee rule (stats/knee.h) over the scoring pass. */
static void judge_knee(struct probe_state *pst, struct pass *ps)
{
    struct st_knee_doc d[MAX_CC];
    int64_t origin = -1;
    for (uint32_t i = 0; i < ps->cc; i++) {
        int64_t t = ps->score[i].intended_ns;
        if (t >= 0 && (origin < 0 || t < origin)) {
            origin = t;
        }
    }
    for (uint32_t i = 0; i < ps->cc; i++) {
        const struct doc_rec *r = &ps->score[i];
        int known = origin >= 0 && r->intended_ns >= 0;
        double at = known ? (double)(r->intended_ns - origin) / 1e6 : NAN;
        d[i] = (struct st_knee_doc){
            .sent_ms = known && r->sent_ns >= 0 ? (double)(r->sent_ns - origin) / 1e6 : NAN,
            .first_ms = at + r->ttft_ms,
            .end_ms = known && r->e2e_ns >= 0 ? at + (double)r->e2e_ns / 1e6 : NAN,
            .ttft_ms = r->ttft_ms,
            .uncached_tokens = uncached_of(r),
            .prompt_tokens = r->prompt >= 0 ? (double)r->prompt : NAN,
        };
    }
    ps->prefill_rate = st_knee_rate(pst->seed_ttft, pst->seed_unc, pst->seed_prompt, pst->nseed);
    struct st_knee_ref ref = {.rate_ms_per_token = ps->prefill_rate,
                              .ref_ttft_ms = pst->ref_ttft_ms,
                              .ref_uncached_tokens = pst->ref_uncached,
                              .jump = pst->o->ttft_jump,
                              .prefill_jump = pst->o->prefill_jump};
    st_knee_judge(d, ps->cc, &ref, &ps->knee);
}

/* Judges a finished pass against the one-document reference, the prefill and the slots. */
static void judge_pass(struct probe_state *pst, struct pass *ps, const struct gauge *g)
{
    double ttft[MAX_CC];
    size_t n = 0;
    ps->seed_ttft_max_ms = NAN;
    ps->score_ttft_max_ms = NAN;
    ps->cached_frac_min = NAN;
    ps->prefill_rate = NAN;
    const char *fail_class = NULL;
    for (uint32_t i = 0; i < ps->cc; i++) {
        const struct doc_rec *sd = &ps->seed[i], *sc = &ps->score[i];
        if (!sd->ok || !sc->ok) {
            ps->failed++;
            fail_class = !sd->ok ? "seeding" : "scoring";
            continue;
        }
        if (!isnan(sd->ttft_ms) &&
            (isnan(ps->seed_ttft_max_ms) || sd->ttft_ms > ps->seed_ttft_max_ms)) {
            ps->seed_ttft_max_ms = sd->ttft_ms;
        }
        if (!isnan(sc->ttft_ms)) {
            ttft[n++] = sc->ttft_ms;
        }
        if (sc->cached >= 0 && sc->prompt > 0) {
            double f = (double)sc->cached / (double)sc->prompt;
            if (isnan(ps->cached_frac_min) || f < ps->cached_frac_min) {
                ps->cached_frac_min = f;
            }
        }
    }
    struct st_summ s;
    st_summ_compute(&s, ttft, n);
    ps->score_ttft_max_ms = n ? s.max : NAN;
    ps->score_ttft_p50_ms = n ? s.median : NAN;
    ps->waiting_max = g->max;
    ps->waiting_late = g->late_max;
    ps->scrapes = g->scrapes;
    ps->scrapes_timed_out = g->timed_out;
    ps->scrapes_failed = g->failed;
    ps->over_slots = pst->slots && ps->cc > pst->slots;
    if (ps->failed) {
        snprintf(ps->verdict, sizeof(ps->verdict), "%d of %u documents failed in the %s pass",
                 ps->failed, ps->cc, fail_class);
        return;
    }
    add_seeds(pst, ps);
    if (isnan(pst->ref_ttft_ms)) {
        /* The first pass is the reference: a seeded document alone. */
        pst->ref_ttft_ms = ps->score_ttft_max_ms;
        pst->ref_ttft_real_ns = ps->score_ttft_max_ms * 1e6 /
                                (pst->o->cfg.virtual_clock ? pst->o->cfg.time_scale : 1.0);
        pst->ref_cached_frac = ps->cached_frac_min;
        pst->ref_uncached = ps->cc == 1 ? uncached_of(&ps->score[0]) : NAN;
        pst->ref_cc = ps->cc;
    }
    judge_knee(pst, ps);
    char why[sizeof(ps->verdict) - 32] = "";
    if (ps->over_slots) {
        st_cli_add_reason(why, sizeof(why), "%u documents > %u slots (%s)", ps->cc, pst->slots,
                          pst->slots_source);
    }
    const struct st_knee_out *k = &ps->knee;
    if (k->waited) {
        st_cli_add_reason(
            why, sizeof(why),
            "doc %d started after doc %d ended, TTFT %.1f ms > %.3g x %.1f ms (its prefill "
            "alone)",
            k->doc, k->after, ps->score[k->doc].ttft_ms, pst->o->ttft_jump, k->alone_ms);
        if (k->waited > 1) {
            st_cli_add_reason(why, sizeof(why), "%d documents waited so", k->waited);
        }
    }
    if (k->past_prefill) {
        st_cli_add_reason(
            why, sizeof(why),
            "TTFT max %.1f ms > %.3g x %.1f ms (the pass's prefill) and x %.1f ms (its "
            "fastest)",
            k->ttft_max_ms, pst->o->prefill_jump, k->prefill_ms, k->ttft_min_ms);
    }
    ps->queued = k->queued;
    /* On the simulator's virtual clock the exact stamps say it all: a gauge sampled in real time
     * is recorded but would only add when its samples happened to fall. */
    if (!pst->o->cfg.virtual_clock && !isnan(ps->waiting_late) && ps->waiting_late > 0) {
        ps->queued = 1;
        st_cli_add_reason(why, sizeof(why), "%.0f waiting after the others started",
                          ps->waiting_late);
    }
    if (!isnan(ps->cached_frac_min) && !isnan(pst->ref_cached_frac) &&
        ps->cached_frac_min < pst->ref_cached_frac - 0.05) {
        ps->evicted = 1;
        st_cli_add_reason(why, sizeof(why),
                          "a document came back with %.0f%% cached (cc%u pass: %.0f%%)",
                          100 * ps->cached_frac_min, pst->ref_cc, 100 * pst->ref_cached_frac);
    }
    ps->fits = !ps->queued && !ps->evicted && !ps->over_slots;
    snprintf(ps->verdict, sizeof(ps->verdict), "%s%s%s",
             ps->fits ? "fits" : (ps->queued || ps->over_slots ? "queued" : "evicted"),
             why[0] ? ": " : "", why);
}

static int run_pass(struct probe_state *pst, struct pass *ps, char *err, size_t errlen)
{
    struct probe_opts *o = pst->o;
    struct st_receipts crec = {.fd = -1};
    char cpath[512];
    char stem[48];
    snprintf(stem, sizeof(stem), "cc%u-cache", ps->cc);
    int rc = st_cli_open_receipts(pst->dir, stem, &crec, cpath, sizeof(cpath), &pst->io_error, err,
                                  errlen);
    if (rc) {
        return rc;
    }
    struct st_cache_cfg cc = {
        .target = pst->t,
        .load = &o->cfg,
        .wl = NULL,
        .flush = o->flush,
        .warm = 0,
        .seed = o->wl.p.seed,
    };
    rc = st_cache_prepare(&cc, &crec, &ps->prep, err, errlen);
    int crc = st_receipts_close(&crec);
    if (rc || crc) {
        if (!rc) {
            snprintf(err, errlen, "receipts %s: %s", cpath, st_strerror(crc));
            pst->io_error = 1;
        }
        return rc ? rc : crc;
    }
    if (ps->prep.interrupted) {
        pst->interrupted = 1;
        return 0;
    }
    rc = pass_load(pst, ps, 0, NULL, err, errlen);
    if (rc || pst->interrupted) {
        return rc;
    }
    struct gauge g = {.m = pst->scraper};
    /* Every request that is admitted runs within about the one-document TTFT. */
    g.late_after_ns = isnan(pst->ref_ttft_ms)
                          ? UINT64_MAX
                          : (uint64_t)(2 * pst->ref_ttft_real_ns) + 20 * ST_NS_PER_MS;
    rc = pass_load(pst, ps, 1, &g, err, errlen);
    if (rc || pst->interrupted) {
        return rc;
    }
    judge_pass(pst, ps, &g);
    ps->done = 1;
    return 0;
}

static void docs_json(struct st_jw *w, const char *key, const struct doc_rec *d, uint32_t n,
                      int what)
{
    st_jw_key(w, key);
    st_jw_arr_open(w);
    for (uint32_t i = 0; i < n; i++) {
        if (what == 0) {
            if (isnan(d[i].ttft_ms)) {
                st_jw_null(w);
            } else {
                st_jw_f64(w, d[i].ttft_ms);
            }
        } else {
            int64_t v = what == 1 ? d[i].cached : d[i].prompt;
            if (v < 0) {
                st_jw_null(w);
            } else {
                st_jw_i64(w, v);
            }
        }
    }
    st_jw_arr_close(w);
}

struct answer {
    int have;
    uint32_t max_docs;
    int first_full;    /* a pass did not fit */
    const char *limit; /* what the first pass that did not fit ran into: "slots", "kv_pool"
                        * (queued or evicted within the slots), "failed"; NULL: none */
    uint32_t scrapes, scrapes_timed_out; /* over every pass */
    uint64_t pool;
    int pool_known;
    int pool_exact;
    char pool_source[320];
};

static void probe_json(const struct probe_state *pst, const struct answer *a, double wall_s,
                       struct st_buf *out)
{
    const struct probe_opts *o = pst->o;
    uint64_t doc = o->wl.p.input_len, outl = o->wl.p.output_len;
    struct st_jw w;
    st_jw_init(&w, out);
    st_jw_obj_open(&w);
    st_cli_jw_head(&w, "probe-capacity", pst->interrupted, &o->cfg, 0, pst->t);
    st_jw_kf64(&w, "wall_s", wall_s);
    if (o->cfg.virtual_clock) {
        st_sim_clock_json(&w, st_cli_sim_clock());
    }
    st_cli_jw_u64_if(&w, "max_concurrent_docs", a->have, a->max_docs);
    st_jw_kbool(&w, "limit_found", a->first_full);
    st_jw_knstr(&w, "limit", a->limit);
    st_cli_jw_u64_if(&w, "slots", pst->slots > 0, pst->slots);
    st_jw_kstr(&w, "slots_source", pst->slots_source);
    st_jw_ku64(&w, "metrics_timeout_ms", o->metrics_timeout_ms);
    st_jw_ku64(&w, "scrapes_timed_out", a->scrapes_timed_out);
    st_cli_jw_u64_if(&w, "kv_pool_tokens", a->pool_known, a->pool);
    st_jw_kstr(&w, "kv_pool_source", a->pool_source);
    st_jw_kbool(&w, "kv_pool_exact", a->pool_exact);
    st_jw_ku64(&w, "doc_tokens", doc);
    st_jw_ku64(&w, "output_tokens", outl);
    st_jw_ku64(&w, "seed_output_tokens", o->seed_out);
    st_cli_jw_num(&w, "pool_over_doc", a->pool_known ? (double)a->pool / (double)doc : NAN);
    st_cli_jw_num(&w, "pool_over_request",
                  a->pool_known ? (double)a->pool / (double)(doc + outl) : NAN);
    st_cli_jw_u64_if(&w, "expected_max_docs", a->pool_known, a->pool / (doc + outl));
    st_jw_kf64(&w, "ttft_jump", o->ttft_jump);
    st_jw_kf64(&w, "prefill_jump", o->prefill_jump);
    st_cli_jw_num(&w, "ref_ttft_ms", pst->ref_ttft_ms);
    st_jw_ku64(&w, "seed", o->wl.p.seed);
    st_jw_kstr(&w, "corpus", o->wl.corpus.id);
    st_jw_kf64(&w, "max_len_error", o->wl.wl ? st_workload_max_len_error(o->wl.wl) : 0);
    st_jw_ku64(&w, "counter_calls", o->wl.wl ? st_workload_counter_calls(o->wl.wl) : 0);
    st_jw_ku64(&w, "counter_tokenize_calls", pst->counter->endpoint_calls);
    st_jw_ku64(&w, "counter_completion_calls", pst->counter->fallback_calls);
    st_jw_key(&w, "passes");
    st_jw_arr_open(&w);
    for (uint32_t i = 0; i < o->ncc; i++) {
        const struct pass *ps = &pst->passes[i];
        if (!ps->done) {
            continue;
        }
        st_jw_obj_open(&w);
        st_jw_ku64(&w, "concurrency", ps->cc);
        st_cache_prep_json(&ps->prep, &w);
        st_jw_kstr(&w, "seed_receipts", o->out_dir ? ps->seed_receipts : "");
        st_jw_kstr(&w, "score_receipts", o->out_dir ? ps->score_receipts : "");
        docs_json(&w, "seed_ttft_ms", ps->seed, ps->cc, 0);
        st_cli_jw_num(&w, "seed_ttft_max_ms", ps->seed_ttft_max_ms);
        docs_json(&w, "ttft_ms", ps->score, ps->cc, 0);
        st_cli_jw_num(&w, "ttft_max_ms", ps->score_ttft_max_ms);
        st_cli_jw_num(&w, "ttft_p50_ms", ps->score_ttft_p50_ms);
        docs_json(&w, "cached_tokens", ps->score, ps->cc, 1);
        docs_json(&w, "prompt_tokens", ps->score, ps->cc, 2);
        st_cli_jw_num(&w, "cached_frac_min", ps->cached_frac_min);
        st_cli_jw_num(&w, "waiting_max", ps->waiting_max);
        st_cli_jw_num(&w, "waiting_late", ps->waiting_late);
        st_jw_ku64(&w, "scrapes", ps->scrapes);
        st_jw_ku64(&w, "scrapes_timed_out", ps->scrapes_timed_out);
        st_jw_ku64(&w, "scrapes_failed", ps->scrapes_failed);
        st_cli_jw_num(&w, "prefill_ms_per_token", ps->prefill_rate);
        st_cli_jw_num(&w, "prefill_ms", ps->knee.prefill_ms);
        st_jw_ku64(&w, "waited", (uint64_t)ps->knee.waited);
        st_jw_kbool(&w, "past_prefill", ps->knee.past_prefill);
        st_jw_ku64(&w, "failed", (uint64_t)ps->failed);
        st_jw_kbool(&w, "queued", ps->queued);
        st_jw_kbool(&w, "over_slots", ps->over_slots);
        st_jw_kbool(&w, "evicted", ps->evicted);
        st_jw_kbool(&w, "fits", ps->fits);
        st_jw_kstr(&w, "verdict", ps->verdict);
        st_jw_obj_close(&w);
    }
    st_jw_arr_close(&w);
    st_jw_obj_close(&w);
    st_buf_putc(out, '\n');
}

static void fmt_ms(char *out, size_t cap, double v)
{
    if (isnan(v)) {
        snprintf(out, cap, "-");
    } else {
        snprintf(out, cap, "%.1f", v);
    }
}

static void print_table(const struct probe_state *pst, const struct answer *a)
{
    const struct probe_opts *o = pst->o;
    uint64_t doc = o->wl.p.input_len, outl = o->wl.p.output_len;
    printf("servetune probe capacity  %s  model %s  server %s%s\n", o->cfg.base_url,
           o->cfg.model ? o->cfg.model : "-", st_target_kind_name(pst->t->kind),
           pst->t->is_sim ? " (sim)" : "");
    if (a->pool_known) {
        printf("pool       %llu tokens (%s%s)\n", (unsigned long long)a->pool, a->pool_source,
               a->pool_exact ? "" : ", derived");
    } else {
        printf("pool       unknown (%s)\n", a->pool_source);
    }
    if (pst->slots) {
        printf("slots      %u (%s)\n", pst->slots, pst->slots_source);
    } else {
        printf("slots      unknown (%s)\n", pst->slots_source);
    }
    if (pst->o->cfg.virtual_clock) {
        char why[256];
        int ok = st_sim_clock_valid(st_cli_sim_clock(), why, sizeof(why));
        printf("times      VIRTUAL: the simulator's clock, from its stamps%s%s\n",
               ok ? "" : "; INVALID: ", ok ? "" : why);
    }
    char last[sizeof(pst->passes[0].prep.reason)] = "";
    printf("%4s  %14s  %14s %14s  %7s %7s  %-14s %s\n", "cc", "seed ttft max", "score ttft p50",
           "max", "cached", "waiting", "cache", "verdict");
    for (uint32_t i = 0; i < o->ncc; i++) {
        const struct pass *ps = &pst->passes[i];
        if (!ps->done) {
            continue;
        }
        char a1[32], a2[32], a3[32], a4[32], a5[32];
        fmt_ms(a1, sizeof(a1), ps->seed_ttft_max_ms);
        fmt_ms(a2, sizeof(a2), ps->score_ttft_p50_ms);
        fmt_ms(a3, sizeof(a3), ps->score_ttft_max_ms);
        if (isnan(ps->cached_frac_min)) {
            snprintf(a4, sizeof(a4), "-");
        } else {
            snprintf(a4, sizeof(a4), "%.0f%%", 100 * ps->cached_frac_min);
        }
        if (isnan(ps->waiting_max)) {
            snprintf(a5, sizeof(a5), "-");
        } else {
            snprintf(a5, sizeof(a5), "%.0f", ps->waiting_max);
        }
        printf("%4u  %14s  %14s %14s  %7s %7s  %-14s %s\n", ps->cc, a1, a2, a3, a4, a5,
               st_cache_state_name(ps->prep.state), ps->verdict);
        if (ps->prep.state == ST_CACHE_UNCONTROLLED && strcmp(ps->prep.reason, last) != 0) {
            printf("      cache uncontrolled: %s\n", ps->prep.reason);
            snprintf(last, sizeof(last), "%s", ps->prep.reason);
        }
    }
    if (pst->scraper) {
        printf("metrics    %u scrapes of /metrics on their own connection, %u timed out (over "
               "%llu ms: unknown, not 0)\n",
               a->scrapes, a->scrapes_timed_out, (unsigned long long)o->metrics_timeout_ms);
    }
    char k[64];
    if (!a->have) {
        snprintf(k, sizeof(k), "unknown");
    } else {
        snprintf(k, sizeof(k), "%s%u", a->first_full ? "" : ">= ", a->max_docs);
    }
    if (a->pool_known) {
        printf("pool %llu, doc %llu + out %llu tokens: max concurrent documents %s (pool / (D+O) "
               "= %.2f)\n",
               (unsigned long long)a->pool, (unsigned long long)doc, (unsigned long long)outl, k,
               (double)a->pool / (double)(doc + outl));
    } else {
        printf("pool ?, doc %llu + out %llu tokens: max concurrent documents %s\n",
               (unsigned long long)doc, (unsigned long long)outl, k);
    }
    char pool_docs[96], slot_text[192];
    if (a->pool_known) {
        snprintf(pool_docs, sizeof(pool_docs), "pool / (D+O) = %.2f documents",
                 (double)a->pool / (double)(doc + outl));
    } else {
        snprintf(pool_docs, sizeof(pool_docs), "the pool unknown");
    }
    if (pst->slots) {
        snprintf(slot_text, sizeof(slot_text), "%u slots (%s)", pst->slots, pst->slots_source);
    } else {
        snprintf(slot_text, sizeof(slot_text), "the slot count unknown");
    }
    if (a->limit && strcmp(a->limit, "slots") == 0) {
        printf("limit      the slot count, not the KV pool: %s; %s\n", slot_text, pool_docs);
    } else if (a->limit && strcmp(a->limit, "kv_pool") == 0) {
        printf("limit      the KV pool, not the slot count: %s; %s\n", pool_docs, slot_text);
    } else {
        printf("limit      %s: %s; %s\n", a->limit ? "unknown (requests failed)" : "not reached",
               pool_docs, slot_text);
    }
    fflush(stdout);
}

/* The answer: the largest concurrency before the first pass that did not fit, and what that pass
 * ran into: the slots when it had more documents than the server runs at once, else the pool. */
static void find_answer(const struct probe_state *pst, struct answer *a)
{
    const struct probe_opts *o = pst->o;
    uint32_t best = 0;
    int any = 0;
    for (uint32_t i = 0; i < o->ncc; i++) {
        const struct pass *ps = &pst->passes[i];
        if (!ps->done) {
            break;
        }
        any = 1;
        if (!ps->fits) {
            a->first_full = 1;
            a->limit = ps->failed ? "failed" : ps->over_slots ? "slots" : "kv_pool";
            break;
        }
        best = ps->cc;
    }
    if (!a->first_full && pst->slots && any && best >= pst->slots) {
        /* Every pass fit up to the slot count: no pass of more could hold them at once. */
        a->first_full = 1;
        a->limit = "slots";
    }
    for (uint32_t i = 0; i < o->ncc; i++) {
        a->scrapes += pst->passes[i].scrapes;
        a->scrapes_timed_out += pst->passes[i].scrapes_timed_out;
    }
    a->have = any;
    a->max_docs = best;
}

/* The pool: --pool, else the server log's pool line or the server's routes. */
static void find_pool(struct probe_opts *o, struct st_target *t, struct answer *a)
{
    if (o->pool) {
        a->pool = o->pool;
        a->pool_known = 1;
        a->pool_exact = 1;
        snprintf(a->pool_source, sizeof(a->pool_source), "--pool");
        return;
    }
    struct st_buf log;
    st_buf_init(&log);
    char err[512] = "";
    if (o->server_log && st_cli_read_file(o->server_log, LOG_MAX, &log, err, sizeof(err)) != 0) {
        fprintf(stderr, "servetune probe: warning: --server-log %s; asking the server\n", err);
        st_buf_clear(&log);
    }
    struct st_target_pool tp;
    memset(&tp, 0, sizeof(tp));
    if (st_target_pool(t, log.len ? log.data : NULL, log.len, &tp, err, sizeof(err)) == 0 &&
        tp.total_tokens) {
        a->pool = tp.total_tokens;
        a->pool_known = 1;
        a->pool_exact = tp.exact;
        snprintf(a->pool_source, sizeof(a->pool_source), "%s", tp.source);
    } else {
        snprintf(a->pool_source, sizeof(a->pool_source), "%s", err[0] ? err : "not found");
    }
    st_buf_release(&log);
}

static int probe_capacity(int argc, char **argv)
{
    struct probe_opts o = {.max_cc = 16,
                           .seed_out = 8,
                           .ttft_jump = 1.5,
                           .prefill_jump = 4,
                           .flush = 1,
                           .metrics_timeout_ms = 500};
    st_cli_load_init(&o.conn, &o.cfg, &o.wl);
    int exit_code = ST_EXIT_USAGE;
    char err[1024] = "";
    char tmpdir[64] = ""; /* the points' directory when there is no --out */
    struct pass *passes = NULL;
    struct st_target t = {0};
    struct st_target scraper = {0}; /* the gauge's own connection */
    struct st_target_counter counter;
    uint64_t t_start = st_clock_mono_ns();

    exit_code = parse(&o, argc, argv);
    if (exit_code >= 0) {
        goto out;
    }
    exit_code = ST_EXIT_USAGE;
    if (validate(&o, err, sizeof(err)) || st_cli_conn_open(&o.conn, &o.cfg, &t, err, sizeof(err))) {
        fprintf(stderr, "servetune probe: %s\n", err);
        goto out;
    }
    const char *what = NULL;
    uint64_t ctx = st_cli_target_context(&t, &what);
    uint64_t need = o.wl.p.input_len + o.wl.p.output_len;
    if (ctx && need > ctx) {
        fprintf(stderr,
                "servetune probe: a document of --doc-len %llu + --output-len %llu = %llu tokens "
                "is over the server's context of %llu tokens (%s); nothing was sent\n",
                (unsigned long long)o.wl.p.input_len, (unsigned long long)o.wl.p.output_len,
                (unsigned long long)need, (unsigned long long)ctx, what);
        goto out;
    }
    o.wl.p.context_tokens = ctx;
    struct answer ans;
    memset(&ans, 0, sizeof(ans));
    find_pool(&o, &t, &ans);
    uint32_t slots = 0;
    char slots_source[128];
    if (o.slots) {
        slots = (uint32_t)o.slots;
        snprintf(slots_source, sizeof(slots_source), "--slots");
    } else if (t.total_slots && !(t.kind == ST_TARGET_SGLANG && t.max_running)) {
        slots = t.total_slots;
        snprintf(slots_source, sizeof(slots_source), "GET /props total_slots");
    } else if (t.max_running) {
        slots = t.max_running;
        snprintf(slots_source, sizeof(slots_source), "GET /server_info %s",
                 t.max_running_summed ? "internal_states effective_max_running_requests_per_dp"
                                      : "max_running_requests x DP ranks");
    } else {
        snprintf(slots_source, sizeof(slots_source),
                 "the server does not say (llama.cpp /props total_slots, SGLang /server_info "
                 "max_running_requests); give --slots N");
    }
    int scrape = (t.endpoints & ST_TARGET_EP_METRICS) != 0;
    if (scrape) {
        struct st_target_cfg sc = {
            .base_url = o.cfg.base_url,
            .api_key = o.cfg.api_key,
            .model = o.cfg.model,
            .timeout_ms = o.metrics_timeout_ms,
            .connect_timeout_ms =
                o.cfg.connect_timeout_ms && o.cfg.connect_timeout_ms < o.metrics_timeout_ms
                    ? o.cfg.connect_timeout_ms
                    : o.metrics_timeout_ms,
            .insecure = o.cfg.insecure,
        };
        st_target_init(&scraper, &sc);
    }

    counter = (struct st_target_counter){.t = &t, .chat = o.cfg.api == ST_API_CHAT};
    uint32_t ndocs = o.cc[o.ncc - 1];
    if (st_cli_wl_build(&o.wl, ndocs, o.cfg.api == ST_API_CHAT, st_target_count_fn, &counter, err,
                        sizeof(err))) {
        fprintf(stderr, "servetune probe: %s\n", err);
        goto out;
    }
    const char *dir = o.out_dir;
    if (!dir) {
        const char *tmp = getenv("TMPDIR");
        snprintf(tmpdir, sizeof(tmpdir), "%s/servetune-probe-XXXXXX",
                 tmp && tmp[0] && strlen(tmp) < 30 ? tmp : "/tmp");
        if (!mkdtemp(tmpdir)) {
            fprintf(stderr, "servetune probe: cannot create %s: %s\n", tmpdir, strerror(errno));
            tmpdir[0] = '\0';
            exit_code = ST_EXIT_IO;
            goto out;
        }
        dir = tmpdir;
    }
    {
        struct st_buf p;
        st_buf_init(&p);
        st_buf_printf(&p, "%s/points", dir);
        int rc = st_cli_mkdirs(p.data, err, sizeof(err));
        st_buf_clear(&p);
        st_buf_printf(&p, "%s/windows.json", dir);
        if (rc == 0) {
            rc = st_cli_wl_save_windows(&o.wl, o.out_dir ? p.data : NULL, err, sizeof(err));
        }
        st_buf_release(&p);
        if (rc) {
            fprintf(stderr, "servetune probe: %s\n", err);
            exit_code = ST_EXIT_IO;
            goto out;
        }
    }

    passes = st_xcalloc(o.ncc, sizeof(*passes));
    st_cli_signals_block();
    struct probe_state pst = {.o = &o,
                              .t = &t,
                              .counter = &counter,
                              .passes = passes,
                              .dir = dir,
                              .scraper = scrape ? &scraper : NULL,
                              .slots = slots,
                              .ref_ttft_ms = NAN,
                              .ref_cached_frac = NAN,
                              .ref_uncached = NAN};
    snprintf(pst.slots_source, sizeof(pst.slots_source), "%s", slots_source);
    exit_code = ST_EXIT_OK;
    for (uint32_t i = 0; i < o.ncc && !pst.interrupted; i++) {
        if (st_cli_stop_requested()) {
            pst.interrupted = 1;
            break;
        }
        passes[i].cc = o.cc[i];
        int rc = run_pass(&pst, &passes[i], err, sizeof(err));
        if (rc) {
            fprintf(stderr, "servetune probe: %s\n", err);
            exit_code =
                pst.io_error ? ST_EXIT_IO : (rc == ST_EUSAGE ? ST_EXIT_USAGE : ST_EXIT_FAIL);
            break;
        }
        if (passes[i].done && !passes[i].fits && !o.keep_going) {
            break;
        }
    }
    if (exit_code == ST_EXIT_OK && pst.interrupted) {
        exit_code = ST_EXIT_INTERRUPTED;
    }
    find_answer(&pst, &ans);
    free(pst.seed_ttft);
    free(pst.seed_unc);
    free(pst.seed_prompt);

    struct st_buf js;
    st_buf_init(&js);
    probe_json(&pst, &ans, (double)(st_clock_mono_ns() - t_start) / 1e9, &js);
    if (st_cli_write_out("probe", &js, o.json_path, o.out_dir, "probe.json") != 0) {
        exit_code = ST_EXIT_IO;
    }
    st_buf_release(&js);
    if (!o.conn.quiet) {
        print_table(&pst, &ans);
    }
out:
    if (tmpdir[0] && passes) {
        /* Receipts of a run without --out were scratch: remove them. */
        for (uint32_t i = 0; i < o.ncc; i++) {
            static const char *const what_files[] = {"cache", "seed", "score"};
            for (int k = 0; k < 3; k++) {
                char p[512];
                snprintf(p, sizeof(p), "%s/points/cc%u-%s.jsonl", tmpdir, o.cc[i], what_files[k]);
                (void)unlink(p);
            }
        }
        char p[512];
        snprintf(p, sizeof(p), "%s/points", tmpdir);
        (void)rmdir(p);
        (void)rmdir(tmpdir);
    } else if (tmpdir[0]) {
        (void)rmdir(tmpdir);
    }
    free(passes);
    st_target_release(&scraper);
    st_target_release(&t);
    st_cli_load_release(&o.conn, &o.wl);
    return exit_code;
}

int st_cli_probe(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "capacity") == 0) {
        return probe_capacity(argc - 1, argv + 1);
    }
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: servetune probe capacity --url URL --doc-len N [options]\n"
               "\n"
               "probes:\n"
               "  capacity   how many distinct documents the KV pool holds at once\n");
        return ST_EXIT_OK;
    }
    fprintf(stderr, "servetune probe: expected a probe name: capacity (got '%s')\n",
            argc >= 2 ? argv[1] : "");
    return ST_EXIT_USAGE;
}
