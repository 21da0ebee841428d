/*
 * `servetune bench`: drive an OpenAI-compatible server with a closed or open loop of requests and
 * print what was measured. Parses options, runs the preflight, opens the receipts, runs the load
 * engine while watching signals and drawing progress, then writes the summary and the table.
 * Exit codes: docs/cli.md.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "cli/wlopts.h"
#include "engine/preflight.h"
#include "engine/run.h"
#include "store/fsutil.h"
#include "store/receipts.h"
#include "target/server.h"

struct bench_opts {
    struct st_load_cfg cfg;
    struct st_cli_conn conn;
    struct st_cli_wl wl;
    const char *json_path;
    const char *receipts_path;
    int have_requests;
    int have_conc;
    int have_workers;
    struct st_cli_slice slice; /* the workload's source, when --workload was given */
};

static void usage(FILE *f)
{
    fputs("usage: servetune bench --url URL [options]\n"
          "\n",
          f);
    st_cli_conn_usage(f);
    fputs("load:\n"
          "  --concurrency N           closed loop with N requests in flight (default 1)\n"
          "  --rate R                  open loop, R requests/s (latency from the intended time)\n"
          "  --arrival poisson|constant  open-loop arrivals (default poisson)\n"
          "  --max-concurrency N       open loop: at most N in flight; later arrivals wait\n"
          "  --requests K              requests to send, warmup included (default 100; a trace: "
          "its lines)\n"
          "  --duration S              stop sending after S seconds (the simulator's virtual ones\n"
          "                            against servetune sim in model mode)\n"
          "  --warmup K                first K requests are excluded from statistics\n"
          "  --workers N               client threads (default: what the load needs)\n"
          "  --seed N                  seed of the arrival schedule and the prompts (default 1)\n"
          "requests:\n"
          "  --no-stream               non-streaming requests\n"
          "  --no-usage                do not ask for stream_options.include_usage\n"
          "Without --workload, prompts are synthetic text of --input-len x 4 bytes (default 128 "
          "tokens)\nand --output-len is max_tokens (default 128).\n",
          f);
    st_cli_wl_usage(f);
    fputs("output:\n"
          "  --json FILE               summary JSON\n"
          "  --receipts FILE           one JSON line per request\n"
          "  --save-text               keep each response's text in its receipt\n"
          "  --chunk-times             keep each content chunk's arrival time in its receipt\n",
          f);
}

#define U64MAX_ARG 1000000000000ull

_Static_assert(sizeof(enum st_arrival) == sizeof(int), "enum st_arrival is an int");

/* Parses argv into o. Returns -1 to go on, or the exit code (help, bad usage). */
static int parse(struct bench_opts *o, int argc, char **argv)
{
    struct st_load_cfg *cfg = &o->cfg;
    static const char *const arrivals[] = {"poisson", "constant", NULL};
    static const int arrival_values[] = {ST_ARRIVAL_POISSON, ST_ARRIVAL_CONSTANT};
    const struct st_opt own[] = {
        {ST_OPT_U32("--concurrency", &cfg->concurrency, 1, 1000000), .given = &o->have_conc},
        {ST_OPT_F64("--rate", &cfg->rate, 1e-6, 1e7)},
        {ST_OPT_CHOICE("--arrival", (int *)&cfg->arrival, arrivals, arrival_values)},
        {ST_OPT_U32("--max-concurrency", &cfg->max_concurrency, 1, 1000000)},
        {ST_OPT_U64("--requests", &cfg->requests, 1, U64MAX_ARG), .given = &o->have_requests},
        {ST_OPT_F64("--duration", &cfg->duration_s, 0.001, 30.0 * 86400)},
        {ST_OPT_U64("--warmup", &cfg->warmup, 0, U64MAX_ARG)},
        {ST_OPT_U32("--workers", &cfg->workers, 1, 256), .given = &o->have_workers},
        {ST_OPT_U64("--seed", &o->wl.p.seed, 0, UINT64_MAX)},
        {ST_OPT_FLAG("--no-stream", &cfg->stream, 0)},
        {ST_OPT_FLAG("--no-usage", &cfg->include_usage, 0)},
        {ST_OPT_STR("--json", &o->json_path)},
        {ST_OPT_STR("--receipts", &o->receipts_path)},
        {ST_OPT_FLAG("--save-text", &cfg->save_text, 1)},
        {ST_OPT_FLAG("--chunk-times", &cfg->chunk_times, 1)},
        {.flag = NULL},
    };
    return st_cli_load_parse("bench", usage, &o->conn, cfg, &o->wl, own, argc, argv);
}

static int validate(struct bench_opts *o, char *err, size_t errlen)
{
    struct st_load_cfg *cfg = &o->cfg;
    struct st_cli_wl *wl = &o->wl;
    if (cfg->rate > 0 && o->have_conc) {
        snprintf(err, errlen,
                 "--rate and --concurrency exclude each other (use --max-concurrency "
                 "to cap an open loop)");
        return ST_EUSAGE;
    }
    if (wl->p.kind == ST_WL_TRACE && o->have_conc) {
        snprintf(err, errlen,
                 "--workload trace is an open loop on the trace's timestamps; --concurrency "
                 "does not apply (--max-concurrency caps it)");
        return ST_EUSAGE;
    }
    if (cfg->rate > 0 && wl->p.kind == ST_WL_TRACE) {
        snprintf(err, errlen, "--rate does not apply to --workload trace (the trace says when)");
        return ST_EUSAGE;
    }
    if (cfg->rate <= 0 && cfg->max_concurrency && wl->p.kind != ST_WL_TRACE) {
        snprintf(err, errlen, "--max-concurrency needs --rate");
        return ST_EUSAGE;
    }
    if (!wl->kind_given && (wl->prefix_given || wl->p.n_mix || wl->corpus_path ||
                            wl->windows_path || wl->dataset_path || wl->trace_path)) {
        snprintf(err, errlen, "workload options need --workload KIND");
        return ST_EUSAGE;
    }
    int rc = st_cli_wl_check(wl, err, errlen);
    if (rc) {
        return rc;
    }
    if (!wl->kind_given && ((wl->inlen_given && wl->p.input_len_max > wl->p.input_len) ||
                            (wl->outlen_given && wl->p.output_len_max > wl->p.output_len))) {
        int in = wl->inlen_given && wl->p.input_len_max > wl->p.input_len;
        snprintf(err, errlen,
                 "%s %llu:%llu is a range, and a range needs --workload (e.g. --workload fixed "
                 "draws each request's length uniformly in it); without --workload every request "
                 "has one length",
                 in ? "--input-len" : "--output-len",
                 (unsigned long long)(in ? wl->p.input_len : wl->p.output_len),
                 (unsigned long long)(in ? wl->p.input_len_max : wl->p.output_len_max));
        return ST_EUSAGE;
    }
    cfg->input_len = wl->inlen_given ? (int64_t)wl->p.input_len : 128;
    cfg->output_len = wl->outlen_given ? (int64_t)wl->p.output_len : 128;
    /* A dataset or trace says its own lengths; --output-len overrides the output. */
    int from_file = wl->p.kind == ST_WL_DATASET || wl->p.kind == ST_WL_TRACE;
    if (wl->kind_given) {
        if (!wl->inlen_given && !from_file) {
            wl->p.input_len = wl->p.input_len_max = 128;
        }
        if (!wl->outlen_given && !from_file) {
            wl->p.output_len = wl->p.output_len_max = 128;
        }
        wl->p.ignore_eos = cfg->ignore_eos;
        wl->p.chat = cfg->api == ST_API_CHAT;
    }
    if (wl->p.kind == ST_WL_TRACE) {
        /* Open loop on the trace's timestamps; the rate only makes it an open loop. */
        cfg->trace_arrivals = 1;
        cfg->rate = 1.0;
    }
    if (!o->have_requests && cfg->duration_s <= 0 && wl->p.kind != ST_WL_TRACE &&
        wl->p.kind != ST_WL_DATASET) {
        cfg->requests = 100;
    }
    if (cfg->requests && cfg->warmup >= cfg->requests) {
        snprintf(err, errlen, "--warmup %llu leaves no measured request out of --requests %llu",
                 (unsigned long long)cfg->warmup, (unsigned long long)cfg->requests);
        return ST_EUSAGE;
    }
    if (!o->have_workers) {
        cfg->workers = st_cli_default_workers(cfg);
    }
    return 0;
}

/* A duration run (a soak) seldom uses all the requests it may send, and every fitted item costs
 * tokenizer calls before the load: it fits the first DURATION_ITEMS items (8 per request in
 * flight when that is more) of the full plan, byte for byte as the full build would, and repeats
 * them in order (docs/cli.md, "bench"). */
#define DURATION_ITEMS 256u

static uint64_t duration_items(const struct st_load_cfg *cfg)
{
    uint64_t inflight =
        cfg->concurrency > cfg->max_concurrency ? cfg->concurrency : cfg->max_concurrency;
    return inflight * 8u > DURATION_ITEMS ? inflight * 8u : DURATION_ITEMS;
}

/*
 * The workload: asks the server for its context (lengths over it are refused before any load) and
 * its tokenizer, builds the items, saves the window map, and makes it the run's source.
 */
static int build_workload(struct bench_opts *o, char *err, size_t errlen)
{
    struct st_target t;
    memset(&t, 0, sizeof(t));
    int rc = st_cli_target_open(&o->cfg, &t, err, errlen);
    if (rc) {
        goto out;
    }
    rc = st_cli_wl_fit(&o->wl, &t, err, errlen);
    if (rc) {
        goto out;
    }
    struct st_target_counter counter = {.t = &t, .chat = o->cfg.api == ST_API_CHAT};
    uint64_t n = o->cfg.requests;
    if (o->wl.p.kind == ST_WL_TRACE || o->wl.p.kind == ST_WL_DATASET) {
        n = o->have_requests ? o->cfg.requests : 0;
    }
    if (o->cfg.duration_s > 0) {
        o->wl.p.fit_items = duration_items(&o->cfg);
    }
    rc = st_cli_wl_build(&o->wl, n, o->cfg.api == ST_API_CHAT, st_target_count_fn, &counter, err,
                         errlen);
    if (rc == 0) {
        rc = st_cli_wl_save_windows(&o->wl, NULL, err, errlen);
    }
    if (rc) {
        rc = ST_EUSAGE;
        goto out;
    }
    if (!o->have_requests && o->cfg.duration_s <= 0) {
        o->cfg.requests = st_workload_items(o->wl.wl);
    }
    if (o->cfg.warmup >= o->cfg.requests && o->cfg.requests) {
        snprintf(err, errlen, "--warmup %llu leaves no measured request out of %llu",
                 (unsigned long long)o->cfg.warmup, (unsigned long long)o->cfg.requests);
        rc = ST_EUSAGE;
        goto out;
    }
    o->slice = (struct st_cli_slice){
        .wl = o->wl.wl, .members = "\"cache_state\":\"uncontrolled\"", .max_tokens = -1};
    o->cfg.source = st_cli_slice_source;
    o->cfg.source_ctx = &o->slice;
out:
    st_target_release(&t);
    return rc;
}

/* Adds the workload (kind, lengths, window map, length error) to the summary's object. */
static void add_workload_json(const struct bench_opts *o, struct st_buf *js)
{
    if (!o->wl.wl || js->len < 2) {
        return;
    }
    /* The summary ends in "}\n" or "}": reopen the object. */
    while (js->len && js->data[js->len - 1] != '}') {
        js->len--;
    }
    js->len--;
    const struct st_cli_wl *wl = &o->wl;
    struct st_jw w;
    st_jw_init(&w, js);
    w.comma = 1;
    st_cli_wl_json(&w, wl, 1);
    st_jw_kstr(&w, "corpus", wl->corpus.id);
    st_jw_knstr(&w, "windows", wl->windows_path);
    st_jw_kbool(&w, "windows_reused", wl->windows_read);
    st_jw_kbool(&w, "trace_arrivals", o->cfg.trace_arrivals);
    st_jw_kstr(&w, "cache_state", "uncontrolled");
    st_jw_obj_close(&w);
    st_buf_puts(js, "}\n");
}

static void fmt_ms(char *out, size_t cap, const struct st_hist *h, double q, int is_mean)
{
    if (h->count == 0) {
        snprintf(out, cap, "%10s", "-");
        return;
    }
    double v = is_mean ? st_hist_mean(h) : (double)st_hist_quantile(h, q);
    snprintf(out, cap, "%10.2f", v / 1e6);
}

static void table_row(const char *name, const struct st_hist *h)
{
    char a[32], b[32], c[32], d[32], e[32];
    fmt_ms(a, sizeof(a), h, 0, 1);
    fmt_ms(b, sizeof(b), h, 0.5, 0);
    fmt_ms(c, sizeof(c), h, 0.9, 0);
    fmt_ms(d, sizeof(d), h, 0.99, 0);
    fmt_ms(e, sizeof(e), h, 1.0, 0);
    printf("%-10s %s %s %s %s %s\n", name, a, b, c, d, e);
}

static void print_table(const struct bench_opts *o, const struct st_run_result *res)
{
    const struct st_load_cfg *cfg = &o->cfg;
    const struct st_metrics *m = &res->m;
    /* Every figure is in the clock the metrics counted with (the simulator's virtual clock). */
    double window_s;
    uint64_t window_tokens;
    st_metrics_window(m, &window_s, &window_tokens);
    printf("servetune bench  %s  %s  model %s\n", cfg->base_url,
           cfg->api == ST_API_CHAT ? "chat" : "completions", cfg->model ? cfg->model : "-");
    if (cfg->trace_arrivals) {
        printf("load       open loop at the trace's timestamps");
        if (cfg->max_concurrency) {
            printf(", max concurrency %u", cfg->max_concurrency);
        }
        printf("\n");
    } else if (cfg->rate > 0) {
        printf("load       open loop, %.3g req/s (%s)", cfg->rate,
               cfg->arrival == ST_ARRIVAL_CONSTANT ? "constant" : "poisson");
        if (cfg->max_concurrency) {
            printf(", max concurrency %u", cfg->max_concurrency);
        }
        printf("\n");
    } else {
        printf("load       closed loop, concurrency %u\n", cfg->concurrency);
    }
    printf("requests   %llu ok, %llu failed, %llu warmup excluded%s\n", (unsigned long long)m->ok,
           (unsigned long long)m->failed, (unsigned long long)m->warmup,
           res->interrupted ? "  (INTERRUPTED)" : "");
    for (int e = 1; e < ST_ERR__COUNT; e++) {
        if (m->errors[e]) {
            printf("  error    %-20s %llu\n", st_err_name((enum st_err)e),
                   (unsigned long long)m->errors[e]);
        }
    }
    if (o->wl.wl) {
        const struct st_cli_wl *wl = &o->wl;
        printf("workload   %s, ", st_wl_kind_name(wl->p.kind));
        if (wl->p.input_len) {
            printf("%llu", (unsigned long long)wl->p.input_len);
            if (wl->p.input_len_max > wl->p.input_len) {
                printf("-%llu", (unsigned long long)wl->p.input_len_max);
            }
        } else {
            printf("file's");
        }
        if (wl->p.output_len) {
            printf(" in / %llu out", (unsigned long long)wl->p.output_len);
        } else {
            printf(" in / file's out");
        }
        printf(", %llu items, max length error %.2f%%%s%s\n",
               (unsigned long long)st_workload_items(wl->wl),
               100.0 * st_workload_max_len_error(wl->wl),
               cfg->trace_arrivals ? ", at the trace's timestamps" : "",
               wl->windows_read ? ", windows reused" : "");
    }
    char cached[96];
    if (st_metrics_cached_known(m)) {
        snprintf(cached, sizeof(cached), "%llu cached (%s)", (unsigned long long)m->cached_tokens,
                 st_metrics_cached_from(m));
    } else if (m->cached_requests) {
        snprintf(cached, sizeof(cached), "cached unknown (%llu of %llu requests said)",
                 (unsigned long long)m->cached_requests, (unsigned long long)m->ok);
    } else {
        snprintf(cached, sizeof(cached), "cached unknown (the server did not say)");
    }
    printf("tokens     %llu output%s, %llu prompt, %s\n", (unsigned long long)m->output_tokens,
           m->estimated ? " (some estimated from chunks)" : "",
           (unsigned long long)m->prompt_tokens, cached);
    printf("throughput %.1f output tok/s, %.2f req/s over %.3f s\n",
           window_s > 0 ? (double)window_tokens / window_s : 0.0,
           window_s > 0 ? (double)m->ok / window_s : 0.0, window_s);
    if (cfg->virtual_clock) {
        char pace[48];
        if (cfg->time_scale >= 1e9) {
            snprintf(pace, sizeof(pace), "unpaced");
        } else {
            snprintf(pace, sizeof(pace), "paced at up to x%g", cfg->time_scale);
        }
        printf("times      VIRTUAL: the simulator's clock, from its stamps (%s); its worst lag "
               "%.3f ms, %llu request(s) placed late\n",
               pace, (double)m->clock.lag_max_ns / 1e6, (unsigned long long)m->clock.late);
        char why[256];
        if (!st_sim_clock_valid(&m->clock, why, sizeof(why))) {
            printf("INVALID    %s\n", why);
        }
    }
    printf("%-10s %10s %10s %10s %10s %10s\n", "ms", "mean", "p50", "p90", "p99", "max");
    table_row("ttft", &m->ttft);
    table_row("itl", &m->itl);
    table_row("icl", &m->icl);
    table_row("tpot", &m->tpot);
    table_row("e2e", &m->e2e);
    if (m->ok + m->failed == 1) {
        /* One request (a 512K prompt, say): did it complete, and when did it start answering? */
        if (m->ok) {
            printf("single     completed in %.3f s, TTFT %.3f s\n",
                   (double)st_hist_quantile(&m->e2e, 1.0) / 1e9,
                   (double)st_hist_quantile(&m->ttft, 1.0) / 1e9);
        } else {
            printf("single     FAILED (see the receipt)\n");
        }
    }
    if (m->decode.count) {
        printf("decode     %.1f tok/s per request (p50)\n",
               (double)st_hist_quantile(&m->decode, 0.5) / 1e3);
    }
    printf("client     %u worker(s), %.2f s CPU", res->workers, (double)res->cpu_ns / 1e9);
    if (m->output_tokens + m->warm_tokens) {
        printf(", %.3f us/token",
               (double)res->cpu_ns / 1e3 / (double)(m->output_tokens + m->warm_tokens));
    }
    printf("\n");
    fflush(stdout);
}

int st_cli_bench(int argc, char **argv)
{
    struct bench_opts o;
    memset(&o, 0, sizeof(o));
    st_cli_load_init(&o.conn, &o.cfg, &o.wl);
    char err[1024] = "";
    int exit_code = ST_EXIT_USAGE;
    struct st_receipts receipts = {.fd = -1};
    int receipts_open = 0;

    exit_code = parse(&o, argc, argv);
    if (exit_code >= 0) {
        goto out;
    }
    exit_code = ST_EXIT_USAGE;
    if (validate(&o, err, sizeof(err)) ||
        st_cli_conn_open(&o.conn, &o.cfg, NULL, err, sizeof(err)) ||
        (o.wl.kind_given && build_workload(&o, err, sizeof(err)) != 0)) {
        fprintf(stderr, "servetune bench: %s\n", err);
        goto out;
    }

    int rc = st_receipts_open(&receipts, o.receipts_path);
    if (rc) {
        fprintf(stderr, "servetune bench: cannot create receipts file %s: %s\n", o.receipts_path,
                st_strerror(rc));
        exit_code = ST_EXIT_IO;
        goto out;
    }
    receipts_open = 1;
    o.cfg.receipts = &receipts;

    st_cli_signals_block();
    struct st_run_result res;
    struct st_cli_watch watch = {.cmd = "bench", .progress = o.conn.progress};
    rc = st_cli_run_load(&o.cfg, &watch, &res, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "servetune bench: %s\n", err);
        exit_code = rc == ST_EUSAGE ? ST_EXIT_USAGE : ST_EXIT_FAIL;
        goto out;
    }

    int io_rc = st_receipts_close(&receipts);
    receipts_open = 0;
    exit_code = res.interrupted ? ST_EXIT_INTERRUPTED : ST_EXIT_OK;
    if (io_rc) {
        fprintf(stderr, "servetune bench: receipts %s: %s; the run stopped early\n",
                o.receipts_path, st_strerror(io_rc));
        exit_code = ST_EXIT_IO;
    }
    if (o.json_path) {
        struct st_buf js;
        st_buf_init(&js);
        st_run_summary_json(&o.cfg, &res, o.receipts_path, &js);
        add_workload_json(&o, &js);
        if (st_cli_write_out("bench", &js, o.json_path, NULL, NULL) != 0) {
            exit_code = ST_EXIT_IO;
        }
        st_buf_release(&js);
    }
    if (!o.conn.quiet) {
        print_table(&o, &res);
    }
    st_run_result_release(&res);
out:
    if (receipts_open) {
        int crc = st_receipts_close(&receipts); /* an early exit: nothing more to report */
        (void)crc;
    }
    st_cli_load_release(&o.conn, &o.wl);
    return exit_code;
}
