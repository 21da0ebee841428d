/*
 * Shared pieces of the load-driving subcommands: target options, API key, preflight, the signal
 * and progress loop around one load, and small file helpers. See common.h.
 */
#include "cli/common.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/json.h"
#include "base/xalloc.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "store/fsutil.h"
#include "store/receipts.h"

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
    *t = (struct st_cli_conn){.progress = -1};
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

/* getopt_long's int for an enum destination (every value fits an int). */
_Static_assert(sizeof(enum st_api) == sizeof(int), "enum st_api is an int");
_Static_assert(sizeof(enum st_http) == sizeof(int), "enum st_http is an int");

void st_cli_conn_opts(struct st_cli_conn *t, struct st_load_cfg *cfg, struct st_opt *out)
{
    static const char *const apis[] = {"chat", "completions", NULL};
    static const int api_values[] = {ST_API_CHAT, ST_API_COMPLETIONS};
    static const char *const https[] = {"1.1", "2", "h2c", NULL};
    static const int http_values[] = {ST_HTTP_1_1, ST_HTTP_2, ST_HTTP_H2C};
    const struct st_opt rows[] = {
        {ST_OPT_STR("--url", &t->url)},
        {ST_OPT_CHOICE("--api", (int *)&cfg->api, apis, api_values)},
        {ST_OPT_STR("--model", &t->model_arg)},
        {ST_OPT_STR("--api-key-file", &t->key_file)},
        {ST_OPT_CHOICE("--http", (int *)&cfg->http, https, http_values)},
        {ST_OPT_FLAG("--insecure", &cfg->insecure, 1)},
        {ST_OPT_FLAG("--ignore-eos", &cfg->ignore_eos, 1)},
        {ST_OPT_F64("--temperature", &cfg->temperature, 0, 100), .given = &cfg->has_temperature},
        {ST_OPT_I64("--request-seed", &cfg->seed, INT64_MIN, INT64_MAX), .given = &cfg->has_seed},
        {ST_OPT_STR("--extra-body", &cfg->extra_body)},
        {ST_OPT_U64("--timeout-connect", &cfg->connect_timeout_ms, 1, MS_MAX)},
        {ST_OPT_U64("--timeout-headers", &cfg->headers_timeout_ms, 0, MS_MAX)},
        {ST_OPT_U64("--timeout-first-token", &cfg->first_token_timeout_ms, 0, MS_MAX)},
        {ST_OPT_U64("--timeout-idle", &cfg->idle_timeout_ms, 0, MS_MAX)},
        {ST_OPT_U64("--timeout-total", &cfg->total_timeout_ms, 0, MS_MAX)},
        {ST_OPT_U64("--grace", &cfg->grace_ms, 0, MS_MAX)},
        {ST_OPT_SIZE("--max-event-bytes", &cfg->max_event_bytes, 1024, 1ull << 30)},
        {ST_OPT_FLAG("--progress", &t->progress, 1)},
        {ST_OPT_FLAG("--no-progress", &t->progress, 0)},
        {ST_OPT_FLAG("--quiet", &t->quiet, 1)},
        {.flag = NULL},
    };
    _Static_assert(sizeof(rows) / sizeof(rows[0]) == ST_CLI_CONN_NOPTS + 1, "row count");
    memcpy(out, rows, sizeof(rows));
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
    st_buf_clear(&t->model);
    if (t->model_arg) {
        st_buf_puts(&t->model, t->model_arg);
    }
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

int st_cli_conn_open(struct st_cli_conn *c, struct st_load_cfg *cfg, struct st_target *t, char *err,
                     size_t errlen)
{
    struct st_preflight pf;
    int rc = st_cli_conn_finish(c, cfg, err, errlen);
    if (rc == 0) {
        rc = st_cli_conn_preflight(c, cfg, &pf, err, errlen);
    }
    if (rc == 0 && t) {
        rc = st_cli_target_open(cfg, t, err, errlen);
    }
    return rc;
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
    uint64_t last_draw = 0;
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

void st_cli_jw_num(struct st_jw *w, const char *key, double v)
{
    st_jw_key(w, key);
    if (isnan(v)) {
        st_jw_null(w);
    } else {
        st_jw_f64(w, v);
    }
}

void st_cli_jw_u64_if(struct st_jw *w, const char *key, int have, uint64_t v)
{
    st_jw_key(w, key);
    if (have) {
        st_jw_u64(w, v);
    } else {
        st_jw_null(w);
    }
}

void st_cli_jw_head(struct st_jw *w, const char *kind, int interrupted,
                    const struct st_load_cfg *cfg, int with_api, const struct st_target *t)
{
    st_jw_kstr(w, "tool", "servetune");
    st_jw_kstr(w, "kind", kind);
    st_jw_kbool(w, "interrupted", interrupted);
    st_jw_kstr(w, "url", cfg->base_url);
    st_jw_kstr(w, "model", cfg->model ? cfg->model : "");
    if (with_api) {
        st_jw_kstr(w, "api", cfg->api == ST_API_CHAT ? "chat" : "completions");
    }
    st_jw_key(w, "server");
    st_jw_obj_open(w);
    st_jw_kstr(w, "kind", st_target_kind_name(t->kind));
    st_jw_kbool(w, "sim", t->is_sim);
    st_jw_kstr(w, "evidence", t->evidence);
    st_jw_obj_close(w);
    st_jw_kf64(w, "time_scale", cfg->time_scale > 0 ? cfg->time_scale : 1.0);
    st_jw_kstr(w, "times", cfg->virtual_clock ? "virtual" : "real");
}

void st_cli_add_reason(char *why, size_t cap, const char *fmt, ...)
{
    size_t k = strlen(why);
    if (k && k + 2 < cap) {
        memcpy(why + k, "; ", 3);
        k += 2;
    }
    if (k + 1 >= cap) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why + k, cap - k, fmt, ap);
    va_end(ap);
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

int st_cli_write_out(const char *cmd, const struct st_buf *js, const char *path, const char *dir,
                     const char *name)
{
    struct st_buf in_dir;
    st_buf_init(&in_dir);
    if (dir) {
        st_buf_printf(&in_dir, "%s/%s", dir, name);
    }
    const char *paths[2] = {path, dir ? in_dir.data : NULL};
    int rc = 0;
    for (int k = 0; k < 2; k++) {
        if (!paths[k]) {
            continue;
        }
        int wrc = st_fs_write_atomic(paths[k], js->data, js->len, 0644);
        if (wrc) {
            fprintf(stderr, "servetune %s: cannot write %s: %s\n", cmd, paths[k], st_strerror(wrc));
            rc = -1;
        }
    }
    st_buf_release(&in_dir);
    return rc;
}

int st_cli_open_receipts(const char *dir, const char *stem, struct st_receipts *r, char *path,
                         size_t cap, int *io_error, char *err, size_t errlen)
{
    path[0] = '\0';
    if (dir) {
        snprintf(path, cap, "%s/points/%s.jsonl", dir, stem);
    }
    int rc = st_receipts_open(r, path[0] ? path : NULL);
    if (rc) {
        snprintf(err, errlen, "cannot create receipts file %s: %s", path, st_strerror(rc));
        *io_error = 1;
    }
    return rc;
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

/* The first getopt_long value of a row: clear of '?', ':' and 'h'. */
#define ROW0 256

/* Index of the row that answers flag among n rows: the last of that flag. */
static size_t last_of(const struct st_opt *const *rows, size_t n, size_t i)
{
    for (size_t k = n; k-- > i + 1;) {
        if (strcmp(rows[k]->flag, rows[i]->flag) == 0) {
            return k;
        }
    }
    return i;
}

int st_cli_parse(const struct st_cli_cmd *cmd, int argc, char **argv)
{
    size_t n = 0;
    for (size_t t = 0; cmd->tables[t]; t++) {
        n += st_opt_count(cmd->tables[t]);
    }
    const struct st_opt **rows = st_xcalloc(n ? n : 1, sizeof(*rows));
    struct option *lo = st_xcalloc(n + 2, sizeof(*lo));
    size_t k = 0;
    for (size_t t = 0; cmd->tables[t]; t++) {
        for (size_t i = 0; cmd->tables[t][i].flag; i++) {
            rows[k++] = &cmd->tables[t][i];
        }
    }
    size_t nlo = 0;
    for (size_t i = 0; i < n; i++) {
        if (last_of(rows, n, i) == i) {
            int has_arg = rows[i]->kind == ST_OPT_K_FLAG ? no_argument : required_argument;
            lo[nlo++] = (struct option){rows[i]->flag + 2, has_arg, NULL, ROW0 + (int)i};
        }
    }
    lo[nlo] = (struct option){"help", no_argument, NULL, 'h'};
    char err[512] = "";
    int code = -1;
    int c;
    optind = 0; /* glibc: start over, so a process can parse more than once */
    opterr = cmd->getopt_says;
    while (code < 0 && (c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        if (c == 'h') {
            cmd->usage(stdout);
            code = ST_EXIT_OK;
        } else if (c < ROW0 && cmd->getopt_says) {
            cmd->usage(stderr);
            code = ST_EXIT_USAGE;
        } else if (c < ROW0) {
            fprintf(stderr, "servetune %s: unknown or incomplete option '%s' (see --help)\n",
                    cmd->name, argv[optind - 1]);
            code = ST_EXIT_USAGE;
        } else if (st_opt_apply(rows[c - ROW0], optarg, err, sizeof(err)) != 0) {
            fprintf(stderr, "servetune %s: %s\n", cmd->name, err);
            code = ST_EXIT_USAGE;
        }
    }
    if (code < 0 && cmd->operand) {
        *cmd->operand = optind;
    } else if (code < 0 && optind < argc) {
        fprintf(stderr, "servetune %s: unexpected argument '%s'\n", cmd->name, argv[optind]);
        code = ST_EXIT_USAGE;
    }
    free(rows);
    free(lo);
    return code;
}
