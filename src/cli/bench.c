/*
 * `servetune bench`: drive an OpenAI-compatible server with a closed or open loop of requests and
 * print what was measured. Parses options, runs the preflight, opens the receipts, runs the load
 * engine while watching signals and drawing progress, then writes the summary and the table.
 * Exit codes: docs/cli.md.
 */
#include <getopt.h>
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

enum {
    O_CONC = ST_CLI_O__END,
    O_RATE,
    O_ARRIVAL,
    O_MAXCONC,
    O_REQUESTS,
    O_DURATION,
    O_WARMUP,
    O_WORKERS,
    O_SEED,
    O_NOSTREAM,
    O_NOUSAGE,
    O_JSON,
    O_RECEIPTS,
    O_SAVETEXT,
    O_CHUNKTIMES,
    O_HELP,
};

static const struct option long_opts[] = {
    ST_CLI_CONN_LONG_OPTS,
    ST_CLI_WL_LONG_OPTS,
    {"concurrency", required_argument, NULL, O_CONC},
    {"rate", required_argument, NULL, O_RATE},
    {"arrival", required_argument, NULL, O_ARRIVAL},
    {"max-concurrency", required_argument, NULL, O_MAXCONC},
    {"requests", required_argument, NULL, O_REQUESTS},
    {"duration", required_argument, NULL, O_DURATION},
    {"warmup", required_argument, NULL, O_WARMUP},
    {"workers", required_argument, NULL, O_WORKERS},
    {"seed", required_argument, NULL, O_SEED},
    {"no-stream", no_argument, NULL, O_NOSTREAM},
    {"no-usage", no_argument, NULL, O_NOUSAGE},
    {"json", required_argument, NULL, O_JSON},
    {"receipts", required_argument, NULL, O_RECEIPTS},
    {"save-text", no_argument, NULL, O_SAVETEXT},
    {"chunk-times", no_argument, NULL, O_CHUNKTIMES},
    {"help", no_argument, NULL, O_HELP},
    {NULL, 0, NULL, 0},
};

#define U64MAX_ARG 1000000000000ull

/* Parses one option into o. Returns 0, ST_EUSAGE (err filled) or 1 for --help. */
static int parse_opt(struct bench_opts *o, int c, const char *v, char *err, size_t errlen)
{
    struct st_load_cfg *cfg = &o->cfg;
    uint64_t u = 0;
    int k = 0;
    int rc = 0;
    static const char *const arrivals[] = {"poisson", "constant", NULL};
    if (c >= ST_CLI_O_URL && c < ST_CLI_O_CONN__END) {
        return st_cli_conn_opt(&o->conn, cfg, c, v, err, errlen);
    }
    if (c >= ST_CLI_O_WORKLOAD && c < ST_CLI_O__END) {
        return st_cli_wl_opt(&o->wl, c, v, err, errlen);
    }
    switch (c) {
    case O_CONC:
        rc = st_arg_u64("--concurrency", v, 1, 1000000, &u, err, errlen);
        cfg->concurrency = (uint32_t)u;
        o->have_conc = 1;
        break;
    case O_RATE:
        rc = st_arg_f64("--rate", v, 1e-6, 1e7, &cfg->rate, err, errlen);
        break;
    case O_ARRIVAL:
        rc = st_arg_choice("--arrival", v, arrivals, &k, err, errlen);
        cfg->arrival = k == 0 ? ST_ARRIVAL_POISSON : ST_ARRIVAL_CONSTANT;
        break;
    case O_MAXCONC:
        rc = st_arg_u64("--max-concurrency", v, 1, 1000000, &u, err, errlen);
        cfg->max_concurrency = (uint32_t)u;
        break;
    case O_REQUESTS:
        rc = st_arg_u64("--requests", v, 1, U64MAX_ARG, &cfg->requests, err, errlen);
        o->have_requests = 1;
        break;
    case O_DURATION:
        rc = st_arg_f64("--duration", v, 0.001, 30.0 * 86400, &cfg->duration_s, err, errlen);
        break;
    case O_WARMUP:
        rc = st_arg_u64("--warmup", v, 0, U64MAX_ARG, &cfg->warmup, err, errlen);
        break;
    case O_WORKERS:
        rc = st_arg_u64("--workers", v, 1, 256, &u, err, errlen);
        cfg->workers = (uint32_t)u;
        o->have_workers = 1;
        break;
    case O_SEED:
        rc = st_arg_u64("--seed", v, 0, UINT64_MAX, &u, err, errlen);
        cfg->sched_seed = u;
        cfg->prompt_seed = u;
        o->wl.p.seed = u;
        break;
    case O_NOSTREAM:
        cfg->stream = 0;
        break;
    case O_NOUSAGE:
        cfg->include_usage = 0;
        break;
    case O_JSON:
        o->json_path = v;
        break;
    case O_RECEIPTS:
        o->receipts_path = v;
        break;
    case O_SAVETEXT:
        cfg->save_text = 1;
        break;
    case O_CHUNKTIMES:
        cfg->chunk_times = 1;
        break;
    case O_HELP:
        return 1;
    default:
        snprintf(err, errlen, "unknown option (see servetune bench --help)");
        return ST_EUSAGE;
    }
    return rc;
}

/* parse_opt for st_cli_parse_args. */
static int bench_opt(void *ctx, int c, const char *v, char *err, size_t errlen)
{
    return parse_opt(ctx, c, v, err, errlen);
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
    const char *what = NULL;
    uint64_t ctx = st_cli_target_context(&t, &what);
    uint64_t need = st_cli_wl_max_request_tokens(&o->wl);
    if (ctx && need > ctx) {
        snprintf(err, errlen,
                 "a request of --input-len %llu + --output-len %llu = %llu tokens is over the "
                 "server's context of %llu tokens (%s); nothing was sent",
                 (unsigned long long)o->wl.p.input_len_max,
                 (unsigned long long)o->wl.p.output_len_max, (unsigned long long)need,
                 (unsigned long long)ctx, what);
        rc = ST_EUSAGE;
        goto out;
    }
    o->wl.p.context_tokens = ctx;
    struct st_target_counter counter = {.t = &t, .chat = o->cfg.api == ST_API_CHAT};
    uint64_t n = o->cfg.requests;
    if (o->wl.p.kind == ST_WL_TRACE || o->wl.p.kind == ST_WL_DATASET) {
        n = o->have_requests ? o->cfg.requests : 0;
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
    st_jw_key(&w, "workload");
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "kind", st_wl_kind_name(wl->p.kind));
    st_jw_ku64(&w, "input_len", wl->p.input_len);
    st_jw_ku64(&w, "input_len_max", wl->p.input_len_max);
    st_jw_ku64(&w, "output_len", wl->p.output_len);
    st_jw_ku64(&w, "output_len_max", wl->p.output_len_max);
    if (wl->p.kind == ST_WL_SHARED_PREFIX) {
        st_jw_kf64(&w, "prefix_frac", wl->p.prefix_frac);
        st_jw_ku64(&w, "groups", wl->p.groups);
        st_jw_kf64(&w, "zipf", wl->p.zipf_s);
    }
    st_jw_ku64(&w, "seed", wl->p.seed);
    st_jw_ku64(&w, "items", st_workload_items(wl->wl));
    st_jw_kf64(&w, "max_len_error", st_workload_max_len_error(wl->wl));
    st_jw_ku64(&w, "counter_calls", st_workload_counter_calls(wl->wl));
    st_jw_kstr(&w, "corpus", wl->corpus.id);
    st_jw_key(&w, "windows");
    if (wl->windows_path) {
        st_jw_str(&w, wl->windows_path);
    } else {
        st_jw_null(&w);
    }
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
    double window_s = m->window_end > m->window_start && m->window_start != UINT64_MAX
                          ? (double)(m->window_end - m->window_start) / 1e9
                          : 0;
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
    printf("tokens     %llu output%s, %llu prompt, %llu cached\n",
           (unsigned long long)m->output_tokens,
           m->estimated ? " (some estimated from chunks)" : "",
           (unsigned long long)m->prompt_tokens, (unsigned long long)m->cached_tokens);
    printf("throughput %.1f output tok/s, %.2f req/s over %.3f s\n",
           window_s > 0 ? (double)m->output_tokens / window_s : 0.0,
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
    if (m->output_tokens) {
        printf(", %.3f us/token", (double)res->cpu_ns / 1e3 / (double)m->output_tokens);
    }
    printf("\n");
    fflush(stdout);
}

int st_cli_bench(int argc, char **argv)
{
    struct bench_opts o;
    memset(&o, 0, sizeof(o));
    st_cli_cfg_defaults(&o.cfg);
    st_cli_conn_init(&o.conn);
    st_cli_wl_init(&o.wl);
    char err[1024] = "";
    int exit_code = ST_EXIT_USAGE;
    struct st_receipts receipts = {.fd = -1};
    int receipts_open = 0;

    int prc = st_cli_parse_args("bench", argc, argv, long_opts, O_HELP, bench_opt, &o);
    if (prc == 1) {
        usage(stdout);
        exit_code = ST_EXIT_OK;
        goto out;
    }
    if (prc) {
        goto out;
    }
    if (validate(&o, err, sizeof(err)) || st_cli_conn_finish(&o.conn, &o.cfg, err, sizeof(err))) {
        fprintf(stderr, "servetune bench: %s\n", err);
        goto out;
    }
    struct st_preflight pf;
    if (st_cli_conn_preflight(&o.conn, &o.cfg, &pf, err, sizeof(err)) != 0) {
        fprintf(stderr, "servetune bench: %s\n", err);
        goto out;
    }
    if (o.wl.kind_given && build_workload(&o, err, sizeof(err)) != 0) {
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
        int wrc = st_fs_write_atomic(o.json_path, js.data, js.len, 0644);
        st_buf_release(&js);
        if (wrc) {
            fprintf(stderr, "servetune bench: cannot write %s: %s\n", o.json_path,
                    st_strerror(wrc));
            exit_code = ST_EXIT_IO;
        }
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
    st_cli_wl_release(&o.wl);
    st_cli_conn_release(&o.conn);
    return exit_code;
}
