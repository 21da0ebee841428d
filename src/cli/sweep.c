/*
 * `servetune sweep`: one workload at a list of concurrencies (or rates), each point repeated,
 * every repeat under the cache protocol (flush, verify, warm; cacheproto.h), with its receipts,
 * a sweep.json and a table shaped like seed 003's hit90 sweep: output tok/s median [min-max], TTFT
 * and TPOT p50, hit rate, cache state and validity per concurrency, then one line
 * "hit90 out cc1/2/3/4 = a / b / c / d". Each point and repeat uses its own items of one workload
 * (the shared prefixes are common), so no point reuses another's suffixes. Exit codes: docs/cli.md.
 */
#include <errno.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/xalloc.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/num.h"
#include "cli/args.h"
#include "cli/cacheproto.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "cli/wlopts.h"
#include "stats/summ.h"
#include "store/fsutil.h"
#include "store/receipts.h"
#include "target/server.h"

#define MAX_POINTS 64
#define MAX_REPEATS 100

struct rep {
    int done;
    uint64_t requests;
    uint64_t ok;
    uint64_t failed;
    uint64_t output_tokens;
    uint64_t prompt_tokens;
    uint64_t cached_tokens;
    int cached_known; /* every ok request said (st_metrics_cached_known); else cached is null */
    uint64_t errors[ST_ERR__COUNT];
    double duration_s; /* measured window, virtual-scaled */
    double out_tps;
    double ttft_p50_ms, ttft_p99_ms, tpot_p50_ms, tpot_p99_ms, e2e_p50_ms;
    int have_ttft, have_tpot;
    double wall_s; /* real: prepare + run */
    struct st_cache_prep prep;
    struct st_cache_judge judge;
    char receipts[512];
    char cache_receipts[512];
    uint64_t issued;           /* measured requests sent (fewer when the point stopped early) */
    uint64_t receipts_records; /* measured receipts written to the file */
    int receipts_error;        /* negated errno of the first failed receipt write, or 0 */
};

struct point {
    uint32_t cc;
    double rate;
    uint64_t requests;
    struct rep reps[MAX_REPEATS];
};

struct sweep_opts {
    struct st_load_cfg cfg;
    struct st_cli_conn conn;
    struct st_cli_wl wl;
    uint32_t cc[MAX_POINTS];
    double rates[MAX_POINTS];
    uint32_t npoints;
    int by_rate;
    uint64_t per_cc;    /* requests per point = per_cc x cc */
    uint64_t per_point; /* or this many (rate points, or --requests) */
    uint32_t repeats;
    int flush;
    int warm;
    double hit_target; /* NaN: from the workload */
    double hit_tol;
    uint64_t page_tokens;
    uint64_t flush_timeout_ms;
    const char *out_dir;
    const char *json_path;
    int have_workers;
};

static void usage(FILE *f)
{
    fputs("usage: servetune sweep --url URL --concurrency 1,2,4 [options]\n"
          "\n"
          "Runs one workload at each concurrency (or rate), each point --repeats times, every\n"
          "repeat after flushing the prefix cache, verifying the flush and warming the shared\n"
          "prefixes; prints one line per point and writes sweep.json and receipts.\n"
          "\n",
          f);
    st_cli_conn_usage(f);
    st_cli_wl_usage(f);
    fputs("sweep:\n"
          "  --concurrency LIST        closed-loop points, e.g. 1,2,3,4,8,16\n"
          "  --rate LIST               open-loop points in requests/s instead (the server's "
          "time:\n"
          "                            virtual requests/s against a time-scaled simulator)\n"
          "  --requests-per-cc K       requests of a point = K x concurrency (default 2)\n"
          "  --requests N              requests of every point (rate points: default 32)\n"
          "  --repeats R               repeats of each point (default 3): median [min-max]\n"
          "  --seed N                  seed of the prompts and arrivals (default 1)\n"
          "  --workers N               client threads (default: what the load needs)\n"
          "cache protocol:\n"
          "  --no-flush                do not flush before a point (state: warm)\n"
          "  --no-warm                 do not prefill the shared prefixes (state: flushed)\n"
          "  --hit-target F            expected hit rate (default: --prefix-frac when warmed)\n"
          "  --hit-tolerance F         allowed miss, a share (default 0.01, plus a page's share)\n"
          "  --page-size N             KV page in tokens, for the tolerance (default: the "
          "server's)\n"
          "  --flush-timeout MS        per flush, busy retries included (default 60000)\n"
          "output:\n"
          "  --out DIR                 sweep.json, windows.json, points/cc<N>-r<R>.jsonl\n"
          "  --json FILE               the sweep JSON (also)\n",
          f);
}

/* "1,2,4": up to MAX_POINTS values, each parsed by one of the arg parsers. */
static int parse_list(struct sweep_opts *o, const char *opt, const char *v, int rates, char *err,
                      size_t errlen)
{
    o->npoints = 0;
    const char *s = v;
    while (1) {
        const char *comma = strchr(s, ',');
        size_t n = comma ? (size_t)(comma - s) : strlen(s);
        char item[64];
        if (n == 0 || n >= sizeof(item) || o->npoints >= MAX_POINTS) {
            snprintf(err, errlen,
                     "%s: expected a comma-separated list of up to %d values, got '%s'", opt,
                     MAX_POINTS, v);
            return ST_EUSAGE;
        }
        memcpy(item, s, n);
        item[n] = '\0';
        int rc;
        if (rates) {
            rc = st_arg_f64(opt, item, 1e-6, 1e7, &o->rates[o->npoints], err, errlen);
        } else {
            uint64_t u = 0;
            rc = st_arg_u64(opt, item, 1, 1000000, &u, err, errlen);
            o->cc[o->npoints] = (uint32_t)u;
        }
        if (rc) {
            return rc;
        }
        o->npoints++;
        if (!comma) {
            break;
        }
        s = comma + 1;
    }
    o->by_rate = rates;
    return 0;
}

/* --concurrency (set 0) or --rate (set 1): the list of points, one kind of them. */
static int points_opt(const struct st_opt *opt, const char *v, char *err, size_t errlen)
{
    struct sweep_opts *o = opt->to.ctx;
    if (o->npoints && o->by_rate != opt->set) {
        snprintf(err, errlen, "--concurrency and --rate exclude each other");
        return ST_EUSAGE;
    }
    return parse_list(o, opt->flag, v, opt->set, err, errlen);
}

/* Parses argv into o. Returns -1 to go on, or the exit code (help, bad usage). */
static int parse(struct sweep_opts *o, int argc, char **argv)
{
    const struct st_opt own[] = {
        {ST_OPT_FN("--concurrency", points_opt, o)},
        {ST_OPT_FN("--rate", points_opt, o), .set = 1},
        {ST_OPT_U64("--requests-per-cc", &o->per_cc, 1, 1000000)},
        {ST_OPT_U64("--requests", &o->per_point, 1, 100000000)},
        {ST_OPT_U32("--repeats", &o->repeats, 1, MAX_REPEATS)},
        {ST_OPT_U64("--seed", &o->wl.p.seed, 0, UINT64_MAX)},
        {ST_OPT_U32("--workers", &o->cfg.workers, 1, 256), .given = &o->have_workers},
        {ST_OPT_FLAG("--no-flush", &o->flush, 0)},
        {ST_OPT_FLAG("--no-warm", &o->warm, 0)},
        {ST_OPT_F64("--hit-target", &o->hit_target, 0, 1)},
        {ST_OPT_F64("--hit-tolerance", &o->hit_tol, 0, 1)},
        {ST_OPT_U64("--page-size", &o->page_tokens, 1, 1u << 20)},
        {ST_OPT_U64("--flush-timeout", &o->flush_timeout_ms, 1, 86400000)},
        {ST_OPT_STR("--out", &o->out_dir)},
        {ST_OPT_STR("--json", &o->json_path)},
        {.flag = NULL},
    };
    return st_cli_load_parse("sweep", usage, &o->conn, &o->cfg, &o->wl, own, argc, argv);
}

static uint64_t point_requests(const struct sweep_opts *o, uint32_t i)
{
    if (o->per_point) {
        return o->per_point;
    }
    if (o->by_rate) {
        return 32;
    }
    return o->per_cc * o->cc[i];
}

static int validate(struct sweep_opts *o, char *err, size_t errlen)
{
    struct st_cli_wl *wl = &o->wl;
    if (o->npoints == 0) {
        snprintf(err, errlen, "give the points: --concurrency 1,2,4 or --rate 0.5,1,2");
        return ST_EUSAGE;
    }
    if (!wl->kind_given) {
        wl->p.kind = wl->prefix_given ? ST_WL_SHARED_PREFIX : ST_WL_FIXED;
    }
    if (wl->p.kind == ST_WL_TRACE || wl->p.kind == ST_WL_DATASET) {
        snprintf(err, errlen,
                 "sweep runs generated workloads; replay a %s with servetune bench --workload %s",
                 st_wl_kind_name(wl->p.kind), st_wl_kind_name(wl->p.kind));
        return ST_EUSAGE;
    }
    int rc = st_cli_wl_check(wl, err, errlen);
    if (rc) {
        return rc;
    }
    if (!wl->inlen_given) {
        wl->p.input_len = wl->p.input_len_max = 1024;
    }
    if (!wl->outlen_given) {
        wl->p.output_len = wl->p.output_len_max = 128;
    }
    /* A sweep measures output throughput: every request asks for exactly its output length. */
    o->cfg.ignore_eos = 1;
    wl->p.ignore_eos = 1;
    wl->p.chat = o->cfg.api == ST_API_CHAT;
    o->cfg.input_len = (int64_t)wl->p.input_len;
    o->cfg.output_len = (int64_t)wl->p.output_len;
    if (isnan(o->hit_target) && o->warm && wl->p.kind == ST_WL_SHARED_PREFIX) {
        o->hit_target = wl->p.prefix_frac;
    }
    return 0;
}

/* The KV page size from the server when --page-size was not given: vLLM's cache_config_info. */
static uint64_t server_page(struct st_target *t)
{
    struct st_prom pm;
    st_prom_init(&pm);
    char err[256];
    uint64_t page = 0;
    if (st_target_metrics(t, &pm, err, sizeof(err)) == 0) {
        const struct st_prom_sample *s = st_prom_find(&pm, "vllm:cache_config_info");
        const char *bs = s ? st_prom_label(s, "block_size") : NULL;
        if (bs && st_num_u64z(bs, UINT64_MAX, &page) != 0) {
            page = 0;
        }
    }
    st_prom_release(&pm);
    return page;
}

static void point_name(const struct sweep_opts *o, uint32_t i, char *out, size_t cap)
{
    if (o->by_rate) {
        snprintf(out, cap, "rate%g", o->rates[i]);
    } else {
        snprintf(out, cap, "cc%u", o->cc[i]);
    }
}

static double ms_q(const struct st_hist *h, double q)
{
    return (double)st_hist_quantile(h, q) / 1e6;
}

/* Fills r from one finished run (in the clock its metrics counted with: the simulator's virtual
 * clock when it stamps). */
static void take_result(struct rep *r, const struct st_run_result *res)
{
    const struct st_metrics *m = &res->m;
    r->ok = m->ok;
    r->failed = m->failed;
    r->output_tokens = m->output_tokens;
    r->prompt_tokens = m->prompt_tokens;
    r->cached_tokens = m->cached_tokens;
    r->cached_known = st_metrics_cached_known(m);
    memcpy(r->errors, m->errors, sizeof(r->errors));
    uint64_t window_tokens;
    st_metrics_window(m, &r->duration_s, &window_tokens);
    r->out_tps = r->duration_s > 0 ? (double)window_tokens / r->duration_s : 0;
    r->have_ttft = m->ttft.count > 0;
    r->have_tpot = m->tpot.count > 0;
    if (r->have_ttft) {
        r->ttft_p50_ms = ms_q(&m->ttft, 0.5);
        r->ttft_p99_ms = ms_q(&m->ttft, 0.99);
        r->e2e_p50_ms = ms_q(&m->e2e, 0.5);
    }
    if (r->have_tpot) {
        r->tpot_p50_ms = ms_q(&m->tpot, 0.5);
        r->tpot_p99_ms = ms_q(&m->tpot, 0.99);
    }
}

struct sweep_state {
    struct sweep_opts *o;
    struct st_target *t;
    const struct st_target_counter *counter; /* the build's token counter */
    struct point *pts;
    uint64_t load_wall_ns; /* real time spent in loads (canary, warm-up, points) */
    uint64_t virtual_ns;   /* the points' measured windows, in the server's time */
    int interrupted;
    int io_error;
};

/* Opens a receipts file under DIR/points (or discards records without --out). */
/* One repeat of one point: prepare the cache, scrape, run, scrape, judge. */
static int run_repeat(struct sweep_state *sst, uint32_t i, uint32_t r, uint64_t base, char *err,
                      size_t errlen)
{
    struct sweep_opts *o = sst->o;
    struct point *pt = &sst->pts[i];
    struct rep *rp = &pt->reps[r];
    char name[64], label[96];
    point_name(o, i, name, sizeof(name));
    snprintf(name + strlen(name), sizeof(name) - strlen(name), "-r%u", r + 1);
    snprintf(label, sizeof(label), "%s", name);
    uint64_t t0 = st_clock_mono_ns();

    struct st_receipts crec = {.fd = -1}, mrec = {.fd = -1};
    char stem[72];
    snprintf(stem, sizeof(stem), "%s.cache", name);
    int rc = st_cli_open_receipts(o->out_dir, stem, &crec, rp->cache_receipts,
                                  sizeof(rp->cache_receipts), &sst->io_error, err, errlen);
    if (rc) {
        return rc;
    }
    struct st_cache_cfg cc = {
        .target = sst->t,
        .load = &o->cfg,
        .wl = o->wl.wl,
        .flush = o->flush,
        .warm = o->warm,
        .flush_timeout_ms = o->flush_timeout_ms,
        .page_tokens = o->page_tokens,
        .seed = o->wl.p.seed,
    };
    rc = st_cache_prepare(&cc, &crec, &rp->prep, err, errlen);
    int crc = st_receipts_close(&crec);
    if (rc) {
        return rc;
    }
    if (crc) {
        snprintf(err, errlen, "receipts %s: %s; the sweep stopped early", rp->cache_receipts,
                 st_strerror(crc));
        sst->io_error = 1;
        return crc;
    }
    if (rp->prep.interrupted) {
        sst->interrupted = 1;
        sst->load_wall_ns += st_clock_mono_ns() - t0;
        return 0;
    }

    rc = st_cli_open_receipts(o->out_dir, name, &mrec, rp->receipts, sizeof(rp->receipts),
                              &sst->io_error, err, errlen);
    if (rc) {
        return rc;
    }
    char members[256];
    snprintf(members, sizeof(members), "\"point\":\"%s\",\"cache_state\":\"%s\"", name,
             st_cache_state_name(rp->prep.state));
    struct st_cli_slice slice = {
        .wl = o->wl.wl, .base = base, .members = members, .max_tokens = -1};
    struct st_load_cfg cfg = o->cfg;
    cfg.source = st_cli_slice_source;
    cfg.source_ctx = &slice;
    cfg.requests = pt->requests;
    cfg.receipts = &mrec;
    if (o->by_rate) {
        /* A rate is in the server's time: against the simulator, virtual requests/s. */
        cfg.rate = o->rates[i];
        cfg.concurrency = 1;
    } else {
        cfg.rate = 0;
        cfg.concurrency = o->cc[i];
    }
    if (!o->have_workers) {
        cfg.workers = st_cli_default_workers(&cfg);
    }
    struct st_cache_scrape before, after;
    st_cache_scrape(sst->t, &before);
    struct st_run_result res;
    struct st_cli_watch w = {.cmd = "sweep", .label = label, .progress = o->conn.progress};
    rc = st_cli_run_load(&cfg, &w, &res, err, errlen);
    if (rc) {
        int c2 = st_receipts_close(&mrec);
        (void)c2;
        return rc;
    }
    st_cache_scrape(sst->t, &after);
    crc = st_receipts_close(&mrec);
    rp->requests = pt->requests;
    take_result(rp, &res);
    sst->virtual_ns += (uint64_t)(rp->duration_s * 1e9);
    double target = o->hit_target;
    st_cache_judge(target, o->hit_tol, o->page_tokens, &res.m, &before, &after, res.interrupted,
                   &rp->judge);
    char why[256];
    if (o->cfg.virtual_clock && !st_sim_clock_valid(&res.m.clock, why, sizeof(why))) {
        /* Timed by a clock that did not hold: not the model's figures. */
        rp->judge.valid = 0;
        size_t n = strlen(rp->judge.why);
        snprintf(rp->judge.why + n, sizeof(rp->judge.why) - n, "%s%s", n ? "; " : "", why);
    }
    if (res.interrupted) {
        sst->interrupted = 1;
    }
    rp->issued = res.issued;
    rp->receipts_records = mrec.records;
    if (crc || res.receipts_error) {
        /* The run stopped issuing at the failure and some records are missing: the point's
         * numbers are not backed by its receipts, so it is not valid, and the sweep ends here. */
        rp->receipts_error = crc ? crc : res.receipts_error;
        snprintf(err, errlen, "receipts %s: %s; the sweep stopped early", rp->receipts,
                 st_strerror(rp->receipts_error));
        sst->io_error = 1;
        rp->judge.valid = 0;
        size_t n = strlen(rp->judge.why);
        snprintf(rp->judge.why + n, sizeof(rp->judge.why) - n,
                 "%sreceipts not all written (%s): %llu of %llu kept", n ? "; " : "",
                 st_strerror(rp->receipts_error), (unsigned long long)rp->receipts_records,
                 (unsigned long long)(rp->ok + rp->failed));
    }
    st_run_result_release(&res);
    rp->done = 1;
    rp->wall_s = (double)(st_clock_mono_ns() - t0) / 1e9;
    sst->load_wall_ns += st_clock_mono_ns() - t0;
    return sst->io_error ? ST_EUSAGE : 0;
}

/* Median, min and max over the done repeats of field f. */
struct agg {
    double med, min, max;
    size_t n;
};

static void agg_of(const struct point *pt, uint32_t repeats, size_t off, int need_ttft,
                   int need_tpot, struct agg *a)
{
    double v[MAX_REPEATS] = {0};
    size_t n = 0;
    for (uint32_t r = 0; r < repeats; r++) {
        const struct rep *rp = &pt->reps[r];
        if (!rp->done || (need_ttft && !rp->have_ttft) || (need_tpot && !rp->have_tpot)) {
            continue;
        }
        double x;
        memcpy(&x, (const char *)rp + off, sizeof(x));
        if (isnan(x)) {
            continue;
        }
        v[n++] = x;
    }
    struct st_summ s;
    st_summ_compute(&s, v, n);
    a->n = n;
    a->med = n ? s.median : NAN;
    a->min = n ? s.min : NAN;
    a->max = n ? s.max : NAN;
}

#define AGG(pt, R, field, nt, np, a) agg_of(pt, R, offsetof(struct rep, field), nt, np, a)

static void jw_agg(struct st_jw *w, const char *k, const struct agg *a)
{
    st_jw_key(w, k);
    st_jw_obj_open(w);
    st_cli_jw_num(w, "median", a->med);
    st_cli_jw_num(w, "min", a->min);
    st_cli_jw_num(w, "max", a->max);
    st_jw_ku64(w, "n", a->n);
    st_jw_obj_close(w);
}

/* "key": {p50, p50_min, p50_max, p99}: the median, min and max of the repeats' p50 (at p50_off
 * in struct rep) and the median of their p99 (p99_off); of TTFT (ttft 1) or TPOT (0). */
static void jw_latency(struct st_jw *w, const char *key, const struct point *pt, uint32_t repeats,
                       size_t p50_off, size_t p99_off, int ttft)
{
    struct agg a;
    st_jw_key(w, key);
    st_jw_obj_open(w);
    agg_of(pt, repeats, p50_off, ttft, !ttft, &a);
    st_cli_jw_num(w, "p50", a.med);
    st_cli_jw_num(w, "p50_min", a.min);
    st_cli_jw_num(w, "p50_max", a.max);
    agg_of(pt, repeats, p99_off, ttft, !ttft, &a);
    st_cli_jw_num(w, "p99", a.med);
    st_jw_obj_close(w);
}

/* The worst cache state of the done repeats: uncontrolled beats every other. */
static enum st_cache_state point_state(const struct point *pt, uint32_t repeats, int *any)
{
    enum st_cache_state s = 0;
    *any = 0;
    for (uint32_t r = 0; r < repeats; r++) {
        const struct rep *rp = &pt->reps[r];
        if (!rp->done) {
            continue;
        }
        if (!*any || rp->prep.state == ST_CACHE_UNCONTROLLED) {
            s = rp->prep.state;
        }
        *any = 1;
    }
    return s;
}

/* Point i when it has a done repeat (its worst cache state in *cs), else NULL: not shown. */
static const struct point *shown_point(const struct sweep_state *sst, uint32_t i,
                                       enum st_cache_state *cs)
{
    int any = 0;
    *cs = point_state(&sst->pts[i], sst->o->repeats, &any);
    return any ? &sst->pts[i] : NULL;
}

/* A point's validity over its done repeats: 1 valid, 0 invalid (any repeat invalid), -1
 * unverifiable (none invalid, one or more unverifiable: the hit rate could not be seen); 0 when
 * no repeat is done. */
static int point_valid(const struct point *pt, uint32_t repeats)
{
    int any = 0, unverifiable = 0;
    for (uint32_t r = 0; r < repeats; r++) {
        const struct rep *rp = &pt->reps[r];
        if (!rp->done) {
            continue;
        }
        any = 1;
        if (rp->judge.unverifiable) {
            unverifiable = 1;
        } else if (!rp->judge.valid) {
            return 0;
        }
    }
    return !any ? 0 : unverifiable ? -1 : 1;
}

/* "valid": true, false, or null when unverifiable. */
static void jw_valid(struct st_jw *w, int v)
{
    st_jw_key(w, "valid");
    if (v < 0) {
        st_jw_null(w);
    } else {
        st_jw_bool(w, v);
    }
}

static const char *valid_word(int v)
{
    return v < 0 ? "unverifiable" : v ? "yes" : "NO";
}

static void rep_json(struct st_jw *w, const struct rep *rp, uint32_t r)
{
    st_jw_obj_open(w);
    st_jw_ku64(w, "repeat", r + 1);
    st_jw_kstr(w, "receipts", rp->receipts);
    st_jw_kstr(w, "cache_receipts", rp->cache_receipts);
    st_jw_ku64(w, "receipts_records", rp->receipts_records);
    st_jw_knstr(w, "receipts_error", rp->receipts_error ? st_strerror(rp->receipts_error) : NULL);
    st_jw_ku64(w, "requests", rp->requests);
    st_jw_ku64(w, "issued", rp->issued);
    st_jw_ku64(w, "ok", rp->ok);
    st_jw_ku64(w, "failed", rp->failed);
    st_err_counts_json(w, "errors", rp->errors);
    st_jw_ku64(w, "output_tokens", rp->output_tokens);
    st_jw_ku64(w, "prompt_tokens", rp->prompt_tokens);
    st_cli_jw_u64_if(w, "cached_tokens", rp->cached_known, rp->cached_tokens);
    st_jw_kf64(w, "duration_s", rp->duration_s);
    st_jw_kf64(w, "output_tokens_per_s", rp->out_tps);
    st_jw_key(w, "ttft_ms");
    st_jw_obj_open(w);
    st_cli_jw_num(w, "p50", rp->have_ttft ? rp->ttft_p50_ms : NAN);
    st_cli_jw_num(w, "p99", rp->have_ttft ? rp->ttft_p99_ms : NAN);
    st_jw_obj_close(w);
    st_jw_key(w, "tpot_ms");
    st_jw_obj_open(w);
    st_cli_jw_num(w, "p50", rp->have_tpot ? rp->tpot_p50_ms : NAN);
    st_cli_jw_num(w, "p99", rp->have_tpot ? rp->tpot_p99_ms : NAN);
    st_jw_obj_close(w);
    st_jw_key(w, "e2e_ms");
    st_jw_obj_open(w);
    st_cli_jw_num(w, "p50", rp->have_ttft ? rp->e2e_p50_ms : NAN);
    st_jw_obj_close(w);
    st_cli_jw_num(w, "hit_rate", rp->judge.hit_rate);
    st_cli_jw_num(w, "hit_rate_server", rp->judge.hit_rate_server);
    st_cli_jw_num(w, "hit_target", rp->judge.target);
    st_cli_jw_num(w, "hit_tolerance", rp->judge.tolerance);
    st_cache_prep_json(&rp->prep, w);
    jw_valid(w, rp->judge.unverifiable ? -1 : rp->judge.valid);
    st_jw_kstr(w, "invalid_reason", rp->judge.why);
    st_jw_kf64(w, "wall_s", rp->wall_s);
    st_jw_obj_close(w);
}

static void sweep_json(const struct sweep_state *sst, double wall_s, struct st_buf *out)
{
    const struct sweep_opts *o = sst->o;
    struct st_jw w;
    st_jw_init(&w, out);
    st_jw_obj_open(&w);
    st_cli_jw_head(&w, "sweep", sst->interrupted, &o->cfg, 1, sst->t);
    st_jw_kf64(&w, "wall_s", wall_s);
    st_jw_kf64(&w, "load_wall_s", (double)sst->load_wall_ns / 1e9);
    /* The server's time of the measured points: their windows on the simulator's clock. */
    st_jw_kf64(&w, "virtual_s",
               o->cfg.virtual_clock ? (double)sst->virtual_ns / 1e9
                                    : (double)sst->load_wall_ns / 1e9);
    if (o->cfg.virtual_clock) {
        st_sim_clock_json(&w, st_cli_sim_clock());
    }

    const struct st_cli_wl *wl = &o->wl;
    st_cli_wl_json(&w, wl, 0);
    st_jw_ku64(&w, "counter_tokenize_calls", sst->counter->endpoint_calls);
    st_jw_ku64(&w, "counter_completion_calls", sst->counter->fallback_calls);
    st_jw_kstr(&w, "corpus", wl->corpus.id);
    st_jw_knstr(&w, "windows",
                wl->windows_path ? wl->windows_path : (o->out_dir ? "windows.json" : NULL));
    st_jw_kbool(&w, "windows_reused", wl->windows_read);
    st_jw_obj_close(&w);

    st_jw_key(&w, "protocol");
    st_jw_obj_open(&w);
    st_jw_kbool(&w, "flush", o->flush);
    st_jw_kbool(&w, "warm", o->warm);
    st_cli_jw_num(&w, "hit_target", o->hit_target);
    st_jw_kf64(&w, "hit_tolerance", o->hit_tol);
    st_jw_ku64(&w, "page_tokens", o->page_tokens);
    st_jw_ku64(&w, "repeats", o->repeats);
    st_jw_obj_close(&w);

    st_jw_key(&w, "points");
    st_jw_arr_open(&w);
    for (uint32_t i = 0; i < o->npoints; i++) {
        enum st_cache_state cs;
        const struct point *pt = shown_point(sst, i, &cs);
        if (!pt) {
            continue;
        }
        struct agg a;
        st_jw_obj_open(&w);
        if (o->by_rate) {
            st_jw_kf64(&w, "rate", pt->rate);
        } else {
            st_jw_ku64(&w, "concurrency", pt->cc);
        }
        st_jw_ku64(&w, "requests", pt->requests);
        AGG(pt, o->repeats, out_tps, 0, 0, &a);
        jw_agg(&w, "output_tokens_per_s", &a);
        jw_latency(&w, "ttft_ms", pt, o->repeats, offsetof(struct rep, ttft_p50_ms),
                   offsetof(struct rep, ttft_p99_ms), 1);
        jw_latency(&w, "tpot_ms", pt, o->repeats, offsetof(struct rep, tpot_p50_ms),
                   offsetof(struct rep, tpot_p99_ms), 0);
        AGG(pt, o->repeats, judge.hit_rate, 0, 0, &a);
        st_cli_jw_num(&w, "hit_rate", a.med);
        st_cli_jw_num(&w, "hit_rate_min", a.min);
        st_cli_jw_num(&w, "hit_rate_max", a.max);
        AGG(pt, o->repeats, judge.hit_rate_server, 0, 0, &a);
        st_cli_jw_num(&w, "hit_rate_server", a.med);
        uint64_t failed = 0;
        for (uint32_t r = 0; r < o->repeats; r++) {
            failed += pt->reps[r].done ? pt->reps[r].failed : 0;
        }
        st_jw_ku64(&w, "errors", failed);
        st_jw_kstr(&w, "cache_state", st_cache_state_name(cs));
        jw_valid(&w, point_valid(pt, o->repeats));
        st_jw_key(&w, "repeats");
        st_jw_arr_open(&w);
        for (uint32_t r = 0; r < o->repeats; r++) {
            if (pt->reps[r].done) {
                rep_json(&w, &pt->reps[r], r);
            }
        }
        st_jw_arr_close(&w);
        st_jw_obj_close(&w);
    }
    st_jw_arr_close(&w);
    st_jw_obj_close(&w);
    st_buf_putc(out, '\n');
}

static void fmt_num(char *out, size_t cap, double v, const char *fmt)
{
    if (isnan(v)) {
        snprintf(out, cap, "-");
    } else {
        snprintf(out, cap, fmt, v);
    }
}

static void print_table(const struct sweep_state *sst)
{
    const struct sweep_opts *o = sst->o;
    const struct st_cli_wl *wl = &o->wl;
    printf("servetune sweep  %s  %s  model %s  server %s%s\n", o->cfg.base_url,
           o->cfg.api == ST_API_CHAT ? "chat" : "completions", o->cfg.model ? o->cfg.model : "-",
           st_target_kind_name(sst->t->kind), sst->t->is_sim ? " (sim)" : "");
    printf("workload   %s, %llu in", st_wl_kind_name(wl->p.kind),
           (unsigned long long)wl->p.input_len);
    if (wl->p.kind == ST_WL_SHARED_PREFIX) {
        printf(" (prefix %.2f, %u group%s)", wl->p.prefix_frac, wl->p.groups,
               wl->p.groups == 1 ? "" : "s");
    }
    printf(" / %llu out, seed %llu, %llu items, max length error %.2f%%\n",
           (unsigned long long)wl->p.output_len, (unsigned long long)wl->p.seed,
           (unsigned long long)(wl->wl ? st_workload_items(wl->wl) : 0),
           wl->wl ? 100.0 * st_workload_max_len_error(wl->wl) : 0.0);
    printf("protocol   %s%s", o->flush ? "flush + verify" : "no flush",
           o->warm ? " + warm" : ", no warm");
    if (!isnan(o->hit_target)) {
        printf("; hit target %.4f +- %.4f", o->hit_target, o->hit_tol);
    }
    printf("; %u repeat%s a point\n", o->repeats, o->repeats == 1 ? "" : "s");
    if (o->cfg.virtual_clock) {
        printf("times      VIRTUAL: the simulator's clock, from its stamps (X-Sim-Clock)\n");
    }
    char last_reason[sizeof(sst->pts[0].reps[0].prep.reason)] = "";
    printf("%6s %6s  %-26s %10s %10s %8s  %-15s %s\n", o->by_rate ? "rate" : "cc", "reqs",
           "out tok/s median [min-max]", "ttft p50", "tpot p50", "hit", "cache", "valid");
    for (uint32_t i = 0; i < o->npoints; i++) {
        enum st_cache_state cs;
        const struct point *pt = shown_point(sst, i, &cs);
        if (!pt) {
            continue;
        }
        struct agg tps, ttft, tpot, hit;
        AGG(pt, o->repeats, out_tps, 0, 0, &tps);
        AGG(pt, o->repeats, ttft_p50_ms, 1, 0, &ttft);
        AGG(pt, o->repeats, tpot_p50_ms, 0, 1, &tpot);
        AGG(pt, o->repeats, judge.hit_rate, 0, 0, &hit);
        char name[32], tp[64], a[32], b[32], c[32];
        if (o->by_rate) {
            snprintf(name, sizeof(name), "%g", pt->rate);
        } else {
            snprintf(name, sizeof(name), "%u", pt->cc);
        }
        snprintf(tp, sizeof(tp), "%.1f [%.1f-%.1f]", tps.med, tps.min, tps.max);
        fmt_num(a, sizeof(a), ttft.med, "%.1f");
        fmt_num(b, sizeof(b), tpot.med, "%.2f");
        fmt_num(c, sizeof(c), hit.med, "%.4f");
        printf("%6s %6llu  %-26s %10s %10s %8s  %-15s %s\n", name, (unsigned long long)pt->requests,
               tp, a, b, c, st_cache_state_name(cs), valid_word(point_valid(pt, o->repeats)));
        for (uint32_t r = 0; r < o->repeats; r++) {
            const struct rep *rp = &pt->reps[r];
            if (rp->done && !rp->judge.valid) {
                printf("       r%u %s%s\n", r + 1,
                       rp->judge.unverifiable ? "" : "invalid: ", rp->judge.why);
            }
            if (rp->done && rp->prep.state == ST_CACHE_UNCONTROLLED &&
                strcmp(rp->prep.reason, last_reason) != 0) {
                printf("       r%u cache uncontrolled: %s\n", r + 1, rp->prep.reason);
                snprintf(last_reason, sizeof(last_reason), "%s", rp->prep.reason);
            }
        }
    }
    /* Seed 003's line: "hit90 out cc1/2/3/4 = 28.8 / 47.5 / 63.9 / 76.2". */
    char label[32];
    if (wl->p.kind == ST_WL_SHARED_PREFIX) {
        snprintf(label, sizeof(label), "hit%.0f", wl->p.prefix_frac * 100);
    } else {
        snprintf(label, sizeof(label), "%s", st_wl_kind_name(wl->p.kind));
    }
    struct st_buf names, vals;
    st_buf_init(&names);
    st_buf_init(&vals);
    for (uint32_t i = 0; i < o->npoints; i++) {
        enum st_cache_state cs;
        const struct point *pt = shown_point(sst, i, &cs);
        if (!pt) {
            continue;
        }
        struct agg tps;
        AGG(pt, o->repeats, out_tps, 0, 0, &tps);
        if (names.len) {
            st_buf_puts(&names, "/");
            st_buf_puts(&vals, " / ");
        }
        if (o->by_rate) {
            st_buf_printf(&names, "%g", pt->rate);
        } else {
            st_buf_printf(&names, "%u", pt->cc);
        }
        int v = point_valid(pt, o->repeats);
        st_buf_printf(&vals, "%.1f%s", tps.med, v == 1 ? "" : v < 0 ? "?" : "*");
    }
    if (names.len) {
        printf("%s out %s%s = %s%s%s\n", label, o->by_rate ? "rate" : "cc", names.data, vals.data,
               strchr(vals.data, '*') ? "  (* invalid)" : "",
               strchr(vals.data, '?') ? "  (? unverifiable)" : "");
    }
    st_buf_release(&names);
    st_buf_release(&vals);
    fflush(stdout);
}

int st_cli_sweep(int argc, char **argv)
{
    struct sweep_opts o = {
        .per_cc = 2, .repeats = 3, .flush = 1, .warm = 1, .hit_target = NAN, .hit_tol = 0.01};
    st_cli_load_init(&o.conn, &o.cfg, &o.wl);
    char err[1024] = "";
    int exit_code = ST_EXIT_USAGE;
    struct st_target t = {0};
    struct point *pts = NULL;
    struct st_target_counter counter;
    uint64_t t_start = st_clock_mono_ns();

    exit_code = parse(&o, argc, argv);
    if (exit_code >= 0) {
        goto out;
    }
    exit_code = ST_EXIT_USAGE;
    if (validate(&o, err, sizeof(err)) || st_cli_conn_open(&o.conn, &o.cfg, &t, err, sizeof(err)) ||
        st_cli_wl_fit(&o.wl, &t, err, sizeof(err))) {
        fprintf(stderr, "servetune sweep: %s\n", err);
        goto out;
    }
    if (!o.page_tokens) {
        o.page_tokens = server_page(&t);
    }

    /* Items: every point and repeat gets its own, in order. */
    pts = st_xcalloc(o.npoints, sizeof(*pts));
    uint64_t total = 0;
    for (uint32_t i = 0; i < o.npoints; i++) {
        pts[i].cc = o.by_rate ? 0 : o.cc[i];
        pts[i].rate = o.by_rate ? o.rates[i] : 0;
        pts[i].requests = point_requests(&o, i);
        total += pts[i].requests * o.repeats;
    }
    counter = (struct st_target_counter){.t = &t, .chat = o.cfg.api == ST_API_CHAT};
    if (st_cli_wl_build(&o.wl, total, o.cfg.api == ST_API_CHAT, st_target_count_fn, &counter, err,
                        sizeof(err))) {
        fprintf(stderr, "servetune sweep: %s\n", err);
        goto out;
    }
    if (o.out_dir) {
        struct st_buf p;
        st_buf_init(&p);
        st_buf_printf(&p, "%s/points", o.out_dir);
        int rc = st_cli_mkdirs(p.data, err, sizeof(err));
        st_buf_clear(&p);
        st_buf_printf(&p, "%s/windows.json", o.out_dir);
        if (rc == 0) {
            rc = st_cli_wl_save_windows(&o.wl, p.data, err, sizeof(err));
        }
        st_buf_release(&p);
        if (rc) {
            fprintf(stderr, "servetune sweep: %s\n", err);
            exit_code = ST_EXIT_IO;
            goto out;
        }
    } else if (st_cli_wl_save_windows(&o.wl, NULL, err, sizeof(err))) {
        fprintf(stderr, "servetune sweep: %s\n", err);
        exit_code = ST_EXIT_IO;
        goto out;
    }

    st_cli_signals_block();
    struct sweep_state sst = {.o = &o, .t = &t, .counter = &counter, .pts = pts};
    uint64_t base = 0;
    for (uint32_t i = 0; i < o.npoints && !sst.interrupted && !sst.io_error; i++) {
        for (uint32_t r = 0; r < o.repeats && !sst.interrupted && !sst.io_error; r++) {
            if (st_cli_stop_requested()) {
                sst.interrupted = 1;
                break;
            }
            int rc = run_repeat(&sst, i, r, base, err, sizeof(err));
            base += pts[i].requests;
            if (rc && !sst.io_error) {
                fprintf(stderr, "servetune sweep: %s\n", err);
                exit_code = rc == ST_EUSAGE ? ST_EXIT_USAGE : ST_EXIT_FAIL;
                goto out;
            }
            if (sst.io_error) {
                fprintf(stderr, "servetune sweep: %s\n", err);
            }
        }
    }
    exit_code = sst.io_error ? ST_EXIT_IO : (sst.interrupted ? ST_EXIT_INTERRUPTED : ST_EXIT_OK);

    struct st_buf js;
    st_buf_init(&js);
    sweep_json(&sst, (double)(st_clock_mono_ns() - t_start) / 1e9, &js);
    if (st_cli_write_out("sweep", &js, o.json_path, o.out_dir, "sweep.json") != 0) {
        exit_code = ST_EXIT_IO;
    }
    st_buf_release(&js);
    if (!o.conn.quiet) {
        print_table(&sst);
    }
out:
    free(pts);
    st_target_release(&t);
    st_cli_load_release(&o.conn, &o.wl);
    return exit_code;
}
