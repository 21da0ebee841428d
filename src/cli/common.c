/*
 * Shared pieces of the load-driving subcommands: target options, API key, preflight, the signal
 * and progress loop around one load, and small file helpers. See common.h.
 */
#include "cli/common.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/json.h"
#include "cli/args.h"
#include "store/fsutil.h"

#define KEY_MAX 4096
#define MS_MAX (86400ull * 1000ull)

void st_cli_conn_usage(FILE *f)
{
    fputs("target:\n"
          "  --url URL                 server base URL (http[s]://host:port; a trailing /v1 is "
          "fine)\n"
          "  --api chat|completions    endpoint (default chat)\n"
          "  --model NAME              model id (default: the first id from /v1/models)\n"
          "  --api-key-file FILE       API key file (mode 0600); else $SERVETUNE_API_KEY\n"
          "  --http 1.1|2|h2c          HTTP version (default 1.1; https offers h2 by ALPN)\n"
          "  --insecure                do not verify TLS certificates (recorded in the summary)\n"
          "request fields:\n"
          "  --ignore-eos              send ignore_eos and min_tokens = output length\n"
          "  --temperature T           sampling temperature\n"
          "  --request-seed N          the request's seed field\n"
          "  --extra-body JSON         object merged into every request body (its keys win)\n"
          "timeouts (ms, 0 = none):\n"
          "  --timeout-connect MS (10000)  --timeout-headers MS (0)  --timeout-first-token MS "
          "(900000)\n"
          "  --timeout-idle MS (120000)    --timeout-total MS (0)    --grace MS (5000, after "
          "Ctrl-C)\n"
          "  --max-event-bytes N       bound on one SSE event (default 1048576)\n"
          "display:\n"
          "  --progress|--no-progress  progress bar on stderr (default: when stderr is a TTY)\n"
          "  --quiet                   no table on stdout\n",
          f);
}

void st_cli_conn_init(struct st_cli_conn *t)
{
    memset(t, 0, sizeof(*t));
    t->progress = -1;
    st_buf_init(&t->base_url);
    st_buf_init(&t->model);
    st_buf_init(&t->key);
}

void st_cli_conn_release(struct st_cli_conn *t)
{
    if (t->key.data) {
        memset(t->key.data, 0, t->key.len);
    }
    st_buf_release(&t->key);
    st_buf_release(&t->model);
    st_buf_release(&t->base_url);
}

void st_cli_cfg_defaults(struct st_load_cfg *cfg)
{
    st_load_cfg_defaults(cfg);
    cfg->first_token_timeout_ms = 900000;
    cfg->idle_timeout_ms = 120000;
}

int st_cli_conn_opt(struct st_cli_conn *t, struct st_load_cfg *cfg, int c, const char *v, char *err,
                    size_t errlen)
{
    uint64_t u = 0;
    int64_t i = 0;
    int k = 0;
    int rc = 0;
    static const char *const apis[] = {"chat", "completions", NULL};
    static const char *const https[] = {"1.1", "2", "h2c", NULL};
    switch (c) {
    case ST_CLI_O_URL:
        t->url = v;
        break;
    case ST_CLI_O_API:
        rc = st_arg_choice("--api", v, apis, &k, err, errlen);
        cfg->api = k == 0 ? ST_API_CHAT : ST_API_COMPLETIONS;
        break;
    case ST_CLI_O_MODEL:
        st_buf_clear(&t->model);
        st_buf_puts(&t->model, v);
        break;
    case ST_CLI_O_KEYFILE:
        t->key_file = v;
        break;
    case ST_CLI_O_HTTP:
        rc = st_arg_choice("--http", v, https, &k, err, errlen);
        cfg->http = k == 0 ? ST_HTTP_1_1 : (k == 1 ? ST_HTTP_2 : ST_HTTP_H2C);
        break;
    case ST_CLI_O_INSECURE:
        cfg->insecure = 1;
        break;
    case ST_CLI_O_IGNORE_EOS:
        cfg->ignore_eos = 1;
        break;
    case ST_CLI_O_TEMP:
        rc = st_arg_f64("--temperature", v, 0, 100, &cfg->temperature, err, errlen);
        cfg->has_temperature = 1;
        break;
    case ST_CLI_O_RSEED:
        rc = st_arg_i64("--request-seed", v, INT64_MIN, INT64_MAX, &i, err, errlen);
        cfg->seed = i;
        cfg->has_seed = 1;
        break;
    case ST_CLI_O_EXTRA:
        cfg->extra_body = v;
        break;
    case ST_CLI_O_T_CONNECT:
        rc = st_arg_u64("--timeout-connect", v, 1, MS_MAX, &cfg->connect_timeout_ms, err, errlen);
        break;
    case ST_CLI_O_T_HEADERS:
        rc = st_arg_u64("--timeout-headers", v, 0, MS_MAX, &cfg->headers_timeout_ms, err, errlen);
        break;
    case ST_CLI_O_T_FIRST:
        rc = st_arg_u64("--timeout-first-token", v, 0, MS_MAX, &cfg->first_token_timeout_ms, err,
                        errlen);
        break;
    case ST_CLI_O_T_IDLE:
        rc = st_arg_u64("--timeout-idle", v, 0, MS_MAX, &cfg->idle_timeout_ms, err, errlen);
        break;
    case ST_CLI_O_T_TOTAL:
        rc = st_arg_u64("--timeout-total", v, 0, MS_MAX, &cfg->total_timeout_ms, err, errlen);
        break;
    case ST_CLI_O_GRACE:
        rc = st_arg_u64("--grace", v, 0, MS_MAX, &cfg->grace_ms, err, errlen);
        break;
    case ST_CLI_O_MAXEVENT:
        rc = st_arg_u64("--max-event-bytes", v, 1024, 1ull << 30, &u, err, errlen);
        cfg->max_event_bytes = (size_t)u;
        break;
    case ST_CLI_O_PROGRESS:
        t->progress = 1;
        break;
    case ST_CLI_O_NOPROGRESS:
        t->progress = 0;
        break;
    case ST_CLI_O_QUIET:
        t->quiet = 1;
        break;
    default:
        snprintf(err, errlen, "unknown option");
        return ST_EUSAGE;
    }
    return rc;
}

/* Reads the API key: a file that only its owner can read, else $SERVETUNE_API_KEY. */
static int load_key(struct st_cli_conn *t, char *err, size_t errlen)
{
    if (!t->key_file) {
        const char *env = getenv("SERVETUNE_API_KEY");
        if (env && env[0]) {
            st_buf_puts(&t->key, env);
        }
        return 0;
    }
    int fd = open(t->key_file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "--api-key-file %s: %s", t->key_file, strerror(errno));
        return ST_EUSAGE;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "--api-key-file %s: not a regular file", t->key_file);
        close(fd);
        return ST_EUSAGE;
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        snprintf(err, errlen,
                 "--api-key-file %s: readable by group or others (mode %03o); expected 0600 or "
                 "0400 (chmod 600 %s)",
                 t->key_file, (unsigned)(st.st_mode & 0777), t->key_file);
        close(fd);
        return ST_EUSAGE;
    }
    char buf[KEY_MAX + 1];
    ssize_t n = read(fd, buf, KEY_MAX + 1);
    close(fd);
    if (n < 0 || n > KEY_MAX) {
        snprintf(err, errlen, "--api-key-file %s: unreadable or over %d bytes", t->key_file,
                 KEY_MAX);
        return ST_EUSAGE;
    }
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ')) {
        n--;
    }
    st_buf_append(&t->key, buf, (size_t)n);
    memset(buf, 0, sizeof(buf));
    return 0;
}

int st_cli_conn_finish(struct st_cli_conn *t, struct st_load_cfg *cfg, char *err, size_t errlen)
{
    if (!t->url) {
        snprintf(err, errlen, "--url is required (for example --url http://127.0.0.1:8000)");
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
    st_buf_clear(&t->base_url);
    int rc = st_url_base(t->url, &t->base_url, err, errlen);
    if (rc) {
        return rc;
    }
    rc = load_key(t, err, errlen);
    if (rc) {
        return rc;
    }
    cfg->base_url = t->base_url.data;
    cfg->api_key = t->key.len ? t->key.data : NULL;
    if (t->progress < 0) {
        t->progress = isatty(STDERR_FILENO) ? 1 : 0;
    }
    return 0;
}

int st_cli_conn_preflight(struct st_cli_conn *t, struct st_load_cfg *cfg, struct st_preflight *pf,
                          char *err, size_t errlen)
{
    int rc = st_preflight_run(cfg, 15000, pf, err, errlen);
    if (rc) {
        return ST_EUSAGE;
    }
    cfg->time_scale = pf->time_scale > 0 ? pf->time_scale : 1.0;
    cfg->virtual_clock = pf->virtual_clock;
    if (t->model.len) {
        cfg->model = t->model.data;
        return 0;
    }
    if (!pf->first_model[0]) {
        snprintf(err, errlen, "%s/v1/models lists no model; give --model", cfg->base_url);
        return ST_EUSAGE;
    }
    st_buf_puts(&t->model, pf->first_model);
    cfg->model = t->model.data;
    return 0;
}

int st_cli_target_open(const struct st_load_cfg *cfg, struct st_target *t, char *err, size_t errlen)
{
    struct st_target_cfg tc = {
        .base_url = cfg->base_url,
        .api_key = cfg->api_key,
        .model = cfg->model,
        .timeout_ms = 30000,
        .connect_timeout_ms = cfg->connect_timeout_ms,
        .insecure = cfg->insecure,
    };
    st_target_init(t, &tc);
    char sub[512];
    int rc = st_target_open(t, sub, sizeof(sub));
    if (rc) {
        snprintf(err, errlen, "%s: %s", cfg->base_url, sub);
        return ST_EUSAGE;
    }
    return 0;
}

uint64_t st_cli_target_context(const struct st_target *t, const char **what)
{
    if (t->max_model_len) {
        *what = "max_model_len of GET /v1/models";
        return t->max_model_len;
    }
    if (t->slot_n_ctx) {
        *what = "n_ctx of a slot, GET /props";
        return t->slot_n_ctx;
    }
    *what = "unknown";
    return 0;
}

uint32_t st_cli_default_workers(const struct st_load_cfg *cfg)
{
    /* One worker parses well over a million tokens/s; more only for very many streams. */
    uint64_t streams =
        cfg->rate > 0 ? (cfg->max_concurrency ? cfg->max_concurrency : 1024) : cfg->concurrency;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t w = (streams + 4095) / 4096;
    if (ncpu > 0 && w > (uint64_t)ncpu) {
        w = (uint64_t)ncpu;
    }
    return w ? (uint32_t)w : 1;
}

void st_cli_raise_nofile(const struct st_load_cfg *cfg)
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

static void stop_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
}

void st_cli_signals_block(void)
{
    /* Signals are taken synchronously by the controlling loop; workers inherit the mask. */
    sigset_t set;
    stop_set(&set);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

int st_cli_stop_requested(void)
{
    sigset_t set;
    stop_set(&set);
    struct timespec ts = {0, 0};
    int sig = sigtimedwait(&set, NULL, &ts);
    return sig == SIGINT || sig == SIGTERM;
}

static void draw_progress(const struct st_load_cfg *cfg, const struct st_cli_watch *w,
                          const struct st_run_progress *p, uint64_t t0, int final)
{
    double el = (double)(st_clock_mono_ns() - t0) / 1e9;
    uint64_t total = cfg->requests;
    char eta[32] = "";
    int width = 30, filled = 0;
    if (total) {
        filled = (int)((double)width * (double)p->done / (double)total);
        if (p->done > 0 && p->done < total) {
            snprintf(eta, sizeof(eta), " ETA %.0fs",
                     el * (double)(total - p->done) / (double)p->done);
        }
    } else if (cfg->duration_s > 0) {
        filled = (int)((double)width * el / cfg->duration_s);
    }
    if (filled > width) {
        filled = width;
    }
    char bar[64];
    memset(bar, '#', (size_t)filled);
    memset(bar + filled, '.', (size_t)(width - filled));
    bar[width] = '\0';
    fprintf(stderr, "\r%s%s[%s] %llu done (%llu failed) %llu in flight %.0f tok/s %.1fs%s   %s",
            w->label ? w->label : "", w->label ? " " : "", bar, (unsigned long long)p->done,
            (unsigned long long)p->failed, (unsigned long long)p->inflight,
            el > 0 ? (double)p->tokens / el : 0.0, el, eta, final ? "\n" : "");
    fflush(stderr);
}

/* Every load of this process against the virtual clock (main thread only). */
static struct st_sim_clock process_clock;

const struct st_sim_clock *st_cli_sim_clock(void)
{
    return &process_clock;
}

int st_cli_run_load(const struct st_load_cfg *cfg, const struct st_cli_watch *w,
                    struct st_run_result *res, char *err, size_t errlen)
{
    struct st_run *run = NULL;
    st_cli_raise_nofile(cfg);
    int rc = st_run_start(&run, cfg, err, errlen);
    if (rc) {
        return rc;
    }
    sigset_t set;
    stop_set(&set);
    uint64_t t0 = st_clock_mono_ns();
    uint64_t last_draw = 0, last_tick = t0;
    int stops = 0;
    struct st_run_progress p;
    for (;;) {
        int all = st_run_progress(run, &p);
        uint64_t now = st_clock_mono_ns();
        if (w->progress && (now - last_draw >= 200 * ST_NS_PER_MS || all)) {
            draw_progress(cfg, w, &p, t0, all);
            last_draw = now;
        }
        if (all) {
            break;
        }
        if (w->tick && now - last_tick >= w->tick_every_ns) {
            w->tick(w->tick_ctx);
            last_tick = st_clock_mono_ns();
        }
        /* 2 ms: a load against an unpaced simulator can take less than a poll of 20. */
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 2 * 1000 * 1000};
        int sig = sigtimedwait(&set, NULL, &ts);
        if (sig == SIGINT || sig == SIGTERM) {
            stops++;
            if (stops == 1) {
                fprintf(stderr,
                        "\nservetune %s: stopping; in-flight requests get %llu ms "
                        "(signal again to abort now)\n",
                        w->cmd, (unsigned long long)cfg->grace_ms);
            }
            st_run_stop(run, stops > 1);
        }
    }
    st_run_finish(run, res);
    st_sim_clock_merge(&process_clock, &res->m.clock);
    return 0;
}

int st_cli_read_file(const char *path, size_t max, struct st_buf *out, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", path, strerror(e));
        return -e;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return -EINVAL;
    }
    if ((uint64_t)st.st_size > max) {
        snprintf(err, errlen, "%s: %llu bytes, over the limit of %zu", path,
                 (unsigned long long)st.st_size, max);
        close(fd);
        return ST_ETOOBIG;
    }
    size_t want = (size_t)st.st_size;
    st_buf_reserve(out, want);
    size_t got = 0;
    while (got < want) {
        ssize_t n = read(fd, out->data + out->len + got, want - got);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            snprintf(err, errlen, "%s: %s", path, n < 0 ? strerror(e) : "file shrank while read");
            close(fd);
            return -e;
        }
        got += (size_t)n;
    }
    close(fd);
    out->len += got;
    out->data[out->len] = '\0';
    return 0;
}

int st_cli_mkdirs(const char *path, char *err, size_t errlen)
{
    int rc = st_fs_mkdirs(path);
    if (rc == -ENOTDIR) {
        snprintf(err, errlen, "%s: not a directory", path);
    } else if (rc == -ENAMETOOLONG) {
        snprintf(err, errlen, "%s: bad directory name", path);
        rc = ST_EUSAGE;
    } else if (rc != 0) {
        snprintf(err, errlen, "cannot create directory %s: %s", path, strerror(-rc));
    }
    return rc;
}

int st_cli_parse_args(const char *cmd, int argc, char **argv, const struct option *opts,
                      int help_code, st_cli_opt_fn parse, void *ctx)
{
    char err[512] = "";
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == '?') {
            fprintf(stderr, "servetune %s: unknown or incomplete option '%s' (see --help)\n", cmd,
                    argv[optind - 1]);
            return ST_EUSAGE;
        }
        int rc = parse(ctx, c == 'h' ? help_code : c, optarg, err, sizeof(err));
        if (rc == 1) {
            return 1;
        }
        if (rc) {
            fprintf(stderr, "servetune %s: %s\n", cmd, err);
            return ST_EUSAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "servetune %s: unexpected argument '%s'\n", cmd, argv[optind]);
        return ST_EUSAGE;
    }
    return 0;
}
