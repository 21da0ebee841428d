/*
 * `servetune bench`: drive an OpenAI-compatible server with a closed or open loop of requests and
 * print what was measured. Parses options, runs the preflight, opens the receipts, runs the load
 * engine while watching signals and drawing progress, then writes the summary and the table.
 * Exit codes: docs/cli.md.
 */
#include <sys/resource.h>
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/json.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "engine/preflight.h"
#include "engine/run.h"
#include "store/fsutil.h"
#include "store/receipts.h"

#define KEY_MAX 4096

struct bench_opts {
    struct st_load_cfg cfg;
    const char *url;
    const char *json_path;
    const char *receipts_path;
    const char *key_file;
    int progress; /* -1 auto (TTY), 0 off, 1 on */
    int quiet;
    int have_requests;
    int have_conc;
    int have_workers;
    struct st_buf base_url;
    struct st_buf model;
    struct st_buf key;
};

static void usage(FILE *f)
{
    fputs("usage: servetune bench --url URL [options]\n"
          "\n"
          "target:\n"
          "  --url URL                 server base URL (http[s]://host:port; a trailing /v1 is "
          "fine)\n"
          "  --api chat|completions    endpoint (default chat)\n"
          "  --model NAME              model id (default: the first id from /v1/models)\n"
          "  --api-key-file FILE       API key file (mode 0600); else $SERVETUNE_API_KEY\n"
          "  --http 1.1|2|h2c          HTTP version (default 1.1; https offers h2 by ALPN)\n"
          "  --insecure                do not verify TLS certificates (recorded in the summary)\n"
          "load:\n"
          "  --concurrency N           closed loop with N requests in flight (default 1)\n"
          "  --rate R                  open loop, R requests/s (latency from the intended time)\n"
          "  --arrival poisson|constant  open-loop arrivals (default poisson)\n"
          "  --max-concurrency N       open loop: at most N in flight; later arrivals wait\n"
          "  --requests K              requests to send, warmup included (default 100)\n"
          "  --duration S              stop sending after S seconds\n"
          "  --warmup K                first K requests are excluded from statistics\n"
          "  --workers N               client threads (default: what the load needs)\n"
          "  --seed N                  seed of the arrival schedule and the prompts (default 1)\n"
          "requests:\n"
          "  --input-len N             prompt length in tokens, ~4 bytes each (default 128)\n"
          "  --output-len N            max_tokens (default 128)\n"
          "  --ignore-eos              send ignore_eos and min_tokens = output length\n"
          "  --temperature T           sampling temperature\n"
          "  --request-seed N          the request's seed field\n"
          "  --extra-body JSON         object merged into every request body (its keys win)\n"
          "  --no-stream               non-streaming requests\n"
          "  --no-usage                do not ask for stream_options.include_usage\n"
          "timeouts (ms, 0 = none):\n"
          "  --timeout-connect MS (10000)  --timeout-headers MS (0)  --timeout-first-token MS "
          "(900000)\n"
          "  --timeout-idle MS (120000)    --timeout-total MS (0)    --grace MS (5000, after "
          "Ctrl-C)\n"
          "  --max-event-bytes N       bound on one SSE event (default 1048576)\n"
          "output:\n"
          "  --json FILE               summary JSON\n"
          "  --receipts FILE           one JSON line per request\n"
          "  --save-text               keep each response's text in its receipt\n"
          "  --chunk-times             keep each content chunk's arrival time in its receipt\n"
          "  --progress|--no-progress  progress bar on stderr (default: when stderr is a TTY)\n"
          "  --quiet                   no table on stdout\n",
          f);
}

enum {
    O_URL = 256,
    O_API,
    O_MODEL,
    O_KEYFILE,
    O_HTTP,
    O_INSECURE,
    O_CONC,
    O_RATE,
    O_ARRIVAL,
    O_MAXCONC,
    O_REQUESTS,
    O_DURATION,
    O_WARMUP,
    O_WORKERS,
    O_SEED,
    O_INLEN,
    O_OUTLEN,
    O_IGNORE_EOS,
    O_TEMP,
    O_RSEED,
    O_EXTRA,
    O_NOSTREAM,
    O_NOUSAGE,
    O_T_CONNECT,
    O_T_HEADERS,
    O_T_FIRST,
    O_T_IDLE,
    O_T_TOTAL,
    O_GRACE,
    O_MAXEVENT,
    O_JSON,
    O_RECEIPTS,
    O_SAVETEXT,
    O_CHUNKTIMES,
    O_PROGRESS,
    O_NOPROGRESS,
    O_QUIET,
    O_HELP,
};

static const struct option long_opts[] = {
    {"url", required_argument, NULL, O_URL},
    {"api", required_argument, NULL, O_API},
    {"model", required_argument, NULL, O_MODEL},
    {"api-key-file", required_argument, NULL, O_KEYFILE},
    {"http", required_argument, NULL, O_HTTP},
    {"insecure", no_argument, NULL, O_INSECURE},
    {"concurrency", required_argument, NULL, O_CONC},
    {"rate", required_argument, NULL, O_RATE},
    {"arrival", required_argument, NULL, O_ARRIVAL},
    {"max-concurrency", required_argument, NULL, O_MAXCONC},
    {"requests", required_argument, NULL, O_REQUESTS},
    {"duration", required_argument, NULL, O_DURATION},
    {"warmup", required_argument, NULL, O_WARMUP},
    {"workers", required_argument, NULL, O_WORKERS},
    {"seed", required_argument, NULL, O_SEED},
    {"input-len", required_argument, NULL, O_INLEN},
    {"output-len", required_argument, NULL, O_OUTLEN},
    {"ignore-eos", no_argument, NULL, O_IGNORE_EOS},
    {"temperature", required_argument, NULL, O_TEMP},
    {"request-seed", required_argument, NULL, O_RSEED},
    {"extra-body", required_argument, NULL, O_EXTRA},
    {"no-stream", no_argument, NULL, O_NOSTREAM},
    {"no-usage", no_argument, NULL, O_NOUSAGE},
    {"timeout-connect", required_argument, NULL, O_T_CONNECT},
    {"timeout-headers", required_argument, NULL, O_T_HEADERS},
    {"timeout-first-token", required_argument, NULL, O_T_FIRST},
    {"timeout-idle", required_argument, NULL, O_T_IDLE},
    {"timeout-total", required_argument, NULL, O_T_TOTAL},
    {"grace", required_argument, NULL, O_GRACE},
    {"max-event-bytes", required_argument, NULL, O_MAXEVENT},
    {"json", required_argument, NULL, O_JSON},
    {"receipts", required_argument, NULL, O_RECEIPTS},
    {"save-text", no_argument, NULL, O_SAVETEXT},
    {"chunk-times", no_argument, NULL, O_CHUNKTIMES},
    {"progress", no_argument, NULL, O_PROGRESS},
    {"no-progress", no_argument, NULL, O_NOPROGRESS},
    {"quiet", no_argument, NULL, O_QUIET},
    {"help", no_argument, NULL, O_HELP},
    {NULL, 0, NULL, 0},
};

#define U64MAX_ARG 1000000000000ull
#define MS_MAX (86400ull * 1000ull)

/* Parses one option into o. Returns 0, ST_EUSAGE (err filled) or 1 for --help. */
static int parse_opt(struct bench_opts *o, int c, const char *v, char *err, size_t errlen)
{
    struct st_load_cfg *cfg = &o->cfg;
    uint64_t u = 0;
    int64_t i = 0;
    int k = 0;
    int rc = 0;
    static const char *const apis[] = {"chat", "completions", NULL};
    static const char *const https[] = {"1.1", "2", "h2c", NULL};
    static const char *const arrivals[] = {"poisson", "constant", NULL};
    switch (c) {
    case O_URL:
        o->url = v;
        break;
    case O_API:
        rc = st_arg_choice("--api", v, apis, &k, err, errlen);
        cfg->api = k == 0 ? ST_API_CHAT : ST_API_COMPLETIONS;
        break;
    case O_MODEL:
        st_buf_clear(&o->model);
        st_buf_puts(&o->model, v);
        break;
    case O_KEYFILE:
        o->key_file = v;
        break;
    case O_HTTP:
        rc = st_arg_choice("--http", v, https, &k, err, errlen);
        cfg->http = k == 0 ? ST_HTTP_1_1 : (k == 1 ? ST_HTTP_2 : ST_HTTP_H2C);
        break;
    case O_INSECURE:
        cfg->insecure = 1;
        break;
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
        break;
    case O_INLEN:
        rc = st_arg_i64("--input-len", v, 1, 16 * 1024 * 1024, &cfg->input_len, err, errlen);
        break;
    case O_OUTLEN:
        rc = st_arg_i64("--output-len", v, 1, 16 * 1024 * 1024, &cfg->output_len, err, errlen);
        break;
    case O_IGNORE_EOS:
        cfg->ignore_eos = 1;
        break;
    case O_TEMP:
        rc = st_arg_f64("--temperature", v, 0, 100, &cfg->temperature, err, errlen);
        cfg->has_temperature = 1;
        break;
    case O_RSEED:
        rc = st_arg_i64("--request-seed", v, INT64_MIN, INT64_MAX, &i, err, errlen);
        cfg->seed = i;
        cfg->has_seed = 1;
        break;
    case O_EXTRA:
        cfg->extra_body = v;
        break;
    case O_NOSTREAM:
        cfg->stream = 0;
        break;
    case O_NOUSAGE:
        cfg->include_usage = 0;
        break;
    case O_T_CONNECT:
        rc = st_arg_u64("--timeout-connect", v, 1, MS_MAX, &cfg->connect_timeout_ms, err, errlen);
        break;
    case O_T_HEADERS:
        rc = st_arg_u64("--timeout-headers", v, 0, MS_MAX, &cfg->headers_timeout_ms, err, errlen);
        break;
    case O_T_FIRST:
        rc = st_arg_u64("--timeout-first-token", v, 0, MS_MAX, &cfg->first_token_timeout_ms, err,
                        errlen);
        break;
    case O_T_IDLE:
        rc = st_arg_u64("--timeout-idle", v, 0, MS_MAX, &cfg->idle_timeout_ms, err, errlen);
        break;
    case O_T_TOTAL:
        rc = st_arg_u64("--timeout-total", v, 0, MS_MAX, &cfg->total_timeout_ms, err, errlen);
        break;
    case O_GRACE:
        rc = st_arg_u64("--grace", v, 0, MS_MAX, &cfg->grace_ms, err, errlen);
        break;
    case O_MAXEVENT:
        rc = st_arg_u64("--max-event-bytes", v, 1024, 1ull << 30, &u, err, errlen);
        cfg->max_event_bytes = (size_t)u;
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
    case O_PROGRESS:
        o->progress = 1;
        break;
    case O_NOPROGRESS:
        o->progress = 0;
        break;
    case O_QUIET:
        o->quiet = 1;
        break;
    case O_HELP:
        return 1;
    default:
        snprintf(err, errlen, "unknown option (see servetune bench --help)");
        return ST_EUSAGE;
    }
    return rc;
}

/* Reads the API key: a file that only its owner can read, else $SERVETUNE_API_KEY. */
static int load_key(struct bench_opts *o, char *err, size_t errlen)
{
    if (!o->key_file) {
        const char *env = getenv("SERVETUNE_API_KEY");
        if (env && env[0]) {
            st_buf_puts(&o->key, env);
        }
        return 0;
    }
    int fd = open(o->key_file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "--api-key-file %s: %s", o->key_file, strerror(errno));
        return ST_EUSAGE;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "--api-key-file %s: not a regular file", o->key_file);
        close(fd);
        return ST_EUSAGE;
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        snprintf(err, errlen,
                 "--api-key-file %s: readable by group or others (mode %03o); expected 0600 or "
                 "0400 (chmod 600 %s)",
                 o->key_file, (unsigned)(st.st_mode & 0777), o->key_file);
        close(fd);
        return ST_EUSAGE;
    }
    char buf[KEY_MAX + 1];
    ssize_t n = read(fd, buf, KEY_MAX + 1);
    close(fd);
    if (n < 0 || n > KEY_MAX) {
        snprintf(err, errlen, "--api-key-file %s: unreadable or over %d bytes", o->key_file,
                 KEY_MAX);
        return ST_EUSAGE;
    }
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ')) {
        n--;
    }
    st_buf_append(&o->key, buf, (size_t)n);
    memset(buf, 0, sizeof(buf));
    return 0;
}

static int validate(struct bench_opts *o, char *err, size_t errlen)
{
    struct st_load_cfg *cfg = &o->cfg;
    if (!o->url) {
        snprintf(err, errlen, "--url is required (for example --url http://127.0.0.1:8000)");
        return ST_EUSAGE;
    }
    if (cfg->rate > 0 && o->have_conc) {
        snprintf(err, errlen,
                 "--rate and --concurrency exclude each other (use --max-concurrency "
                 "to cap an open loop)");
        return ST_EUSAGE;
    }
    if (cfg->rate <= 0 && cfg->max_concurrency) {
        snprintf(err, errlen, "--max-concurrency needs --rate");
        return ST_EUSAGE;
    }
    if (!o->have_requests && cfg->duration_s <= 0) {
        cfg->requests = 100;
    }
    if (cfg->requests && cfg->warmup >= cfg->requests) {
        snprintf(err, errlen, "--warmup %llu leaves no measured request out of --requests %llu",
                 (unsigned long long)cfg->warmup, (unsigned long long)cfg->requests);
        return ST_EUSAGE;
    }
    if (cfg->extra_body) {
        struct st_json d;
        st_json_init(&d, 0);
        int rc = st_json_parse(&d, cfg->extra_body, strlen(cfg->extra_body));
        int is_obj = rc == 0 && st_json_type(&d, 0) == ST_JSON_OBJECT;
        st_json_release(&d);
        if (!is_obj) {
            snprintf(err, errlen, "--extra-body: expected a JSON object, got '%.80s'",
                     cfg->extra_body);
            return ST_EUSAGE;
        }
    }
    if (!o->have_workers) {
        /* One worker parses well over a million tokens/s; more only for very many streams. */
        uint64_t streams =
            cfg->rate > 0 ? (cfg->max_concurrency ? cfg->max_concurrency : 1024) : cfg->concurrency;
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        uint64_t w = (streams + 4095) / 4096;
        if (ncpu > 0 && w > (uint64_t)ncpu) {
            w = (uint64_t)ncpu;
        }
        cfg->workers = w ? (uint32_t)w : 1;
    }
    return st_url_base(o->url, &o->base_url, err, errlen);
}

static void fmt_ms(char *out, size_t cap, const struct st_hist *h, double q, int is_mean,
                   double scale)
{
    if (h->count == 0) {
        snprintf(out, cap, "%10s", "-");
        return;
    }
    double v = is_mean ? st_hist_mean(h) : (double)st_hist_quantile(h, q);
    snprintf(out, cap, "%10.2f", v * scale / 1e6);
}

static void table_row(const char *name, const struct st_hist *h, double ts)
{
    char a[32], b[32], c[32], d[32], e[32];
    fmt_ms(a, sizeof(a), h, 0, 1, ts);
    fmt_ms(b, sizeof(b), h, 0.5, 0, ts);
    fmt_ms(c, sizeof(c), h, 0.9, 0, ts);
    fmt_ms(d, sizeof(d), h, 0.99, 0, ts);
    fmt_ms(e, sizeof(e), h, 1.0, 0, ts);
    printf("%-10s %s %s %s %s %s\n", name, a, b, c, d, e);
}

static void print_table(const struct bench_opts *o, const struct st_run_result *res)
{
    const struct st_load_cfg *cfg = &o->cfg;
    const struct st_metrics *m = &res->m;
    double ts = cfg->time_scale > 0 ? cfg->time_scale : 1.0;
    double window_s = m->window_end > m->window_start && m->window_start != UINT64_MAX
                          ? (double)(m->window_end - m->window_start) / 1e9 * ts
                          : 0;
    printf("servetune bench  %s  %s  model %s\n", cfg->base_url,
           cfg->api == ST_API_CHAT ? "chat" : "completions", cfg->model ? cfg->model : "-");
    if (cfg->rate > 0) {
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
    printf("tokens     %llu output%s, %llu prompt, %llu cached\n",
           (unsigned long long)m->output_tokens,
           m->estimated ? " (some estimated from chunks)" : "",
           (unsigned long long)m->prompt_tokens, (unsigned long long)m->cached_tokens);
    printf("throughput %.1f output tok/s, %.2f req/s over %.3f s\n",
           window_s > 0 ? (double)m->output_tokens / window_s : 0.0,
           window_s > 0 ? (double)m->ok / window_s : 0.0, window_s);
    if (ts != 1.0) {
        printf("times      VIRTUAL: the simulator runs at x%g (X-Sim-Time-Scale); real = virtual / "
               "%g\n",
               ts, ts);
    }
    printf("%-10s %10s %10s %10s %10s %10s\n", "ms", "mean", "p50", "p90", "p99", "max");
    table_row("ttft", &m->ttft, ts);
    table_row("itl", &m->itl, ts);
    table_row("icl", &m->icl, ts);
    table_row("tpot", &m->tpot, ts);
    table_row("e2e", &m->e2e, ts);
    if (m->decode.count) {
        printf("decode     %.1f tok/s per request (p50)\n",
               (double)st_hist_quantile(&m->decode, 0.5) / 1e3 / ts);
    }
    printf("client     %u worker(s), %.2f s CPU", res->workers, (double)res->cpu_ns / 1e9);
    if (m->output_tokens) {
        printf(", %.3f us/token", (double)res->cpu_ns / 1e3 / (double)m->output_tokens);
    }
    printf("\n");
    fflush(stdout);
}

static void draw_progress(const struct bench_opts *o, const struct st_run_progress *p, uint64_t t0,
                          int final)
{
    double el = (double)(st_clock_mono_ns() - t0) / 1e9;
    uint64_t total = o->cfg.requests;
    char eta[32] = "";
    int width = 30, filled = 0;
    if (total) {
        filled = (int)((double)width * (double)p->done / (double)total);
        if (p->done > 0 && p->done < total) {
            snprintf(eta, sizeof(eta), " ETA %.0fs",
                     el * (double)(total - p->done) / (double)p->done);
        }
    } else if (o->cfg.duration_s > 0) {
        filled = (int)((double)width * el / o->cfg.duration_s);
    }
    if (filled > width) {
        filled = width;
    }
    char bar[64];
    memset(bar, '#', (size_t)filled);
    memset(bar + filled, '.', (size_t)(width - filled));
    bar[width] = '\0';
    fprintf(stderr, "\r[%s] %llu done (%llu failed) %llu in flight %.0f tok/s %.1fs%s   %s", bar,
            (unsigned long long)p->done, (unsigned long long)p->failed,
            (unsigned long long)p->inflight, el > 0 ? (double)p->tokens / el : 0.0, el, eta,
            final ? "\n" : "");
    fflush(stderr);
}

/* Each stream needs a descriptor: raise the soft limit toward the hard one when the load needs it.
 */
static void raise_nofile(const struct st_load_cfg *cfg)
{
    uint64_t need =
        (cfg->rate > 0 ? (cfg->max_concurrency ? cfg->max_concurrency : 65536) : cfg->concurrency) +
        64;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need) {
        return;
    }
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
}

/* Runs the load, watching SIGINT/SIGTERM (blocked in all threads, taken here). */
static void run_load(struct bench_opts *o, struct st_run *run, struct st_run_result *res)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    uint64_t t0 = st_clock_mono_ns();
    uint64_t last_draw = 0;
    int stops = 0;
    struct st_run_progress p;
    for (;;) {
        int all = st_run_progress(run, &p);
        uint64_t now = st_clock_mono_ns();
        if (o->progress == 1 && (now - last_draw >= 200 * ST_NS_PER_MS || all)) {
            draw_progress(o, &p, t0, all);
            last_draw = now;
        }
        if (all) {
            break;
        }
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 50 * 1000 * 1000};
        int sig = sigtimedwait(&set, NULL, &ts);
        if (sig == SIGINT || sig == SIGTERM) {
            stops++;
            if (stops == 1) {
                fprintf(stderr,
                        "\nservetune bench: stopping; in-flight requests get %llu ms "
                        "(signal again to abort now)\n",
                        (unsigned long long)o->cfg.grace_ms);
            }
            st_run_stop(run, stops > 1);
        }
    }
    st_run_finish(run, res);
}

static void release_opts(struct bench_opts *o)
{
    if (o->key.data) {
        memset(o->key.data, 0, o->key.len);
    }
    st_buf_release(&o->key);
    st_buf_release(&o->model);
    st_buf_release(&o->base_url);
}

int st_cli_bench(int argc, char **argv)
{
    struct bench_opts o;
    memset(&o, 0, sizeof(o));
    st_load_cfg_defaults(&o.cfg);
    o.cfg.first_token_timeout_ms = 900000;
    o.cfg.idle_timeout_ms = 120000;
    o.progress = -1;
    st_buf_init(&o.base_url);
    st_buf_init(&o.model);
    st_buf_init(&o.key);
    char err[512] = "";
    int exit_code = ST_EXIT_USAGE;
    int c;
    struct st_receipts receipts = {.fd = -1};
    int receipts_open = 0;

    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
        if (c == '?') {
            fprintf(stderr, "servetune bench: unknown or incomplete option '%s' (see --help)\n",
                    argv[optind - 1]);
            goto out;
        }
        int rc = parse_opt(&o, c == 'h' ? O_HELP : c, optarg, err, sizeof(err));
        if (rc == 1) {
            usage(stdout);
            exit_code = ST_EXIT_OK;
            goto out;
        }
        if (rc) {
            fprintf(stderr, "servetune bench: %s\n", err);
            goto out;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "servetune bench: unexpected argument '%s'\n", argv[optind]);
        goto out;
    }
    if (validate(&o, err, sizeof(err)) || load_key(&o, err, sizeof(err))) {
        fprintf(stderr, "servetune bench: %s\n", err);
        goto out;
    }
    o.cfg.base_url = o.base_url.data;
    o.cfg.api_key = o.key.len ? o.key.data : NULL;
    if (o.progress < 0) {
        o.progress = isatty(STDERR_FILENO) ? 1 : 0;
    }

    struct st_preflight pf;
    if (st_preflight_run(&o.cfg, 15000, &pf, err, sizeof(err)) != 0) {
        fprintf(stderr, "servetune bench: %s\n", err);
        goto out;
    }
    o.cfg.time_scale = pf.time_scale;
    if (o.model.len) {
        o.cfg.model = o.model.data;
    } else if (pf.first_model[0]) {
        st_buf_puts(&o.model, pf.first_model);
        o.cfg.model = o.model.data;
    } else {
        fprintf(stderr, "servetune bench: %s/v1/models lists no model; give --model\n",
                o.cfg.base_url);
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

    /* Signals are taken synchronously by the controlling loop; workers inherit the mask. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    raise_nofile(&o.cfg);
    struct st_run *run = NULL;
    rc = st_run_start(&run, &o.cfg, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "servetune bench: %s\n", err);
        exit_code = rc == ST_EUSAGE ? ST_EXIT_USAGE : ST_EXIT_FAIL;
        goto out;
    }
    struct st_run_result res;
    run_load(&o, run, &res);

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
        int wrc = st_fs_write_atomic(o.json_path, js.data, js.len, 0644);
        st_buf_release(&js);
        if (wrc) {
            fprintf(stderr, "servetune bench: cannot write %s: %s\n", o.json_path,
                    st_strerror(wrc));
            exit_code = ST_EXIT_IO;
        }
    }
    if (!o.quiet) {
        print_table(&o, &res);
    }
    st_run_result_release(&res);
out:
    if (receipts_open) {
        int crc = st_receipts_close(&receipts); /* an early exit: nothing more to report */
        (void)crc;
    }
    release_opts(&o);
    return exit_code;
}
