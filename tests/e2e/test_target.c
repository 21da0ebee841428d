/*
 * e2e: src/target against `servetune sim` ($SERVETUNE) on 127.0.0.1 port 0, per dialect (vLLM,
 * SGLang, llama.cpp) and in fixed-timing mode: health while loading and after, identification,
 * tokenize counts against the sim's rule (4 code points a token, chat template included), the
 * max_tokens=1 fallback against the endpoint, the counter callback, flush outcomes (vLLM 404
 * without --dev-mode and 200 with it; SGLang 400 while a long request runs -> BUSY, then FLUSHED
 * once it ends; llama.cpp 501 without --slot-save-path and every slot erased with it), the KV
 * pool against `--explain --json` (from HTTP and from the start-up log), and metric deltas after
 * a repeated prompt. Then scripted servers on loopback for what the sim does not model (TGI,
 * trtllm-serve, an older SGLang whose flush never waits, and hostile answers of every kind) and
 * the API key header. Each sim is a child in its own process group, killed at the end; bounded
 * well under 30 s.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <curl/curl.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/json.h"
#include "proto/prom.h"
#include "target/server.h"

#include "check.h"

static int checks, failures;

static const char *servetune;
static int verbose; /* ST_TARGET_VERBOSE set: print what each operation reported */

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void note(const char *fmt, ...)
{
    if (!verbose) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}
static char tmpdir[256];
static char profile[300];

/* A 100M-parameter model on a 2 GB GPU with a slow memory bus: steps of 0.125 virtual s, so a
 * long request lasts seconds of real time at --speed 200 while a 1-token one takes a few ms. */
static const char tiny_profile[] = "model:\n"
                                   "  name: tiny\n"
                                   "  layers: 4\n"
                                   "  hidden: 1024\n"
                                   "  heads: 8\n"
                                   "  kv_heads: 2\n"
                                   "  head_dim: 128\n"
                                   "  params_total: 1e8\n"
                                   "  params_active: 1e8\n"
                                   "  params_dense: 1e8\n"
                                   "hardware:\n"
                                   "  gpu_mem_bytes: 2GB\n"
                                   "  hbm_bytes_per_s: 2GB/s\n"
                                   "engine:\n"
                                   "  startup_s: 1\n"
                                   "  context_length: 8192\n"
                                   "  max_running: 4\n"
                                   "  graph_sizes: [1, 2, 4]\n"
                                   "  reserve_bytes: 100MB\n"
                                   "  act_bytes_per_token: 16KB\n"
                                   "quality:\n"
                                   "  error_rate: 0\n"
                                   "seed: 7\n";

/* ---- child processes ---- */

struct sim {
    pid_t pid;
    int out_fd;         /* read end of its stdout */
    char url[96];       /* http://127.0.0.1:PORT */
    char log_path[320]; /* its stderr */
};

/* Forks argv[0] with stdout to a pipe and stderr to log_path (NULL: /dev/null), in its own
 * process group. An exec failure comes back through a close-on-exec pipe. */
static pid_t spawn(char *const argv[], int *out_fd, const char *log_path)
{
    int out[2], ex[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(ex, O_CLOEXEC) != 0) {
        return -1;
    }
    int log =
        open(log_path ? log_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (log < 0) {
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        dup2(out[1], 1);
        dup2(log, 2);
        execv(argv[0], argv);
        int e = errno;
        ssize_t w = write(ex[1], &e, sizeof(e));
        (void)w;
        _exit(127);
    }
    close(out[1]);
    close(ex[1]);
    close(log);
    int e = 0;
    ssize_t n = pid > 0 ? read(ex[0], &e, sizeof(e)) : -1;
    close(ex[0]);
    if (pid < 0 || n > 0) {
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(n > 0 ? e : errno));
        if (pid > 0) {
            waitpid(pid, NULL, 0);
        }
        close(out[0]);
        return -1;
    }
    setpgid(pid, pid);
    *out_fd = out[0];
    return pid;
}

/* Reads from fd until EOF or timeout into b. */
static void read_all(int fd, struct st_buf *b, int timeout_ms)
{
    uint64_t end = st_clock_mono_ns() + (uint64_t)timeout_ms * ST_NS_PER_MS;
    for (;;) {
        uint64_t now = st_clock_mono_ns();
        if (now >= end) {
            return;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)((end - now) / ST_NS_PER_MS) + 1) <= 0) {
            return;
        }
        char chunk[4096];
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n <= 0) {
            return;
        }
        st_buf_append(b, chunk, (size_t)n);
    }
}

/* Starts `servetune sim` with args (NULL-terminated) and --listen 127.0.0.1:0; waits for its
 * "listening on HOST:PORT" line. */
static int sim_start(struct sim *s, const char *const *args)
{
    static int seq;
    char *argv[48];
    int n = 0;
    memset(s, 0, sizeof(*s));
    argv[n++] = (char *)servetune;
    argv[n++] = (char *)"sim";
    for (int i = 0; args[i] && n < 44; i++) {
        argv[n++] = (char *)args[i];
    }
    argv[n++] = (char *)"--listen";
    argv[n++] = (char *)"127.0.0.1:0";
    argv[n] = NULL;
    snprintf(s->log_path, sizeof(s->log_path), "%s/sim-%d.log", tmpdir, seq++);
    s->pid = spawn(argv, &s->out_fd, s->log_path);
    if (s->pid < 0) {
        return -1;
    }
    /* The first stdout line, flushed at once. */
    struct st_buf line;
    st_buf_init(&line);
    uint64_t end = st_clock_mono_ns() + 10 * ST_NS_PER_S;
    while (!memchr(line.data ? line.data : "", '\n', line.len) && st_clock_mono_ns() < end) {
        struct pollfd p = {.fd = s->out_fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0) {
            continue;
        }
        char c[256];
        ssize_t k = read(s->out_fd, c, sizeof(c));
        if (k <= 0) {
            break;
        }
        st_buf_append(&line, c, (size_t)k);
    }
    const char *at = line.data ? strstr(line.data, "listening on ") : NULL;
    int rc = -1;
    if (at) {
        char addr[64];
        if (sscanf(at, "listening on %63s", addr) == 1) {
            snprintf(s->url, sizeof(s->url), "http://%s", addr);
            rc = 0;
        }
    }
    if (rc != 0) {
        fprintf(stderr, "sim did not say where it listens: '%s'\n", st_buf_str(&line));
    }
    st_buf_release(&line);
    return rc;
}

static void sim_stop(struct sim *s)
{
    if (s->pid <= 0) {
        return;
    }
    kill(-s->pid, SIGTERM);
    int status;
    uint64_t end = st_clock_mono_ns() + 3 * ST_NS_PER_S;
    while (waitpid(s->pid, &status, WNOHANG) == 0) {
        if (st_clock_mono_ns() > end) {
            kill(-s->pid, SIGKILL);
            waitpid(s->pid, &status, 0);
            break;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    close(s->out_fd);
    unlink(s->log_path);
    s->pid = 0;
}

static char *slurp(const char *path, size_t *len)
{
    struct st_buf b;
    st_buf_init(&b);
    FILE *f = fopen(path, "rb");
    if (f) {
        char c[4096];
        size_t n;
        while ((n = fread(c, 1, sizeof(c), f)) > 0) {
            st_buf_append(&b, c, n);
        }
        fclose(f);
    }
    *len = b.len;
    return st_buf_take(&b);
}

/* kv_pool_tokens of `servetune sim ARGS --explain --json`. */
static uint64_t explain_pool(const char *const *args)
{
    char *argv[48];
    int n = 0, fd;
    argv[n++] = (char *)servetune;
    argv[n++] = (char *)"sim";
    for (int i = 0; args[i] && n < 44; i++) {
        argv[n++] = (char *)args[i];
    }
    argv[n++] = (char *)"--explain";
    argv[n++] = (char *)"--json";
    argv[n] = NULL;
    pid_t pid = spawn(argv, &fd, NULL);
    if (pid < 0) {
        return 0;
    }
    struct st_buf out;
    struct st_json d;
    int64_t v = 0;
    st_buf_init(&out);
    st_json_init(&d, 0);
    read_all(fd, &out, 10000);
    close(fd);
    waitpid(pid, NULL, 0);
    if (st_json_parse(&d, out.data ? out.data : "", out.len) != 0 ||
        st_json_i64(&d, st_json_get(&d, 0, "kv_pool_tokens"), &v) != 0) {
        v = 0;
    }
    st_json_release(&d);
    st_buf_release(&out);
    return (uint64_t)v;
}

/* ---- helpers ---- */

static void cfg_of(struct st_target_cfg *c, const struct sim *s, const char *key)
{
    memset(c, 0, sizeof(*c));
    c->base_url = s->url;
    c->api_key = key;
    c->timeout_ms = 5000;
}

/* Polls /health until UP (10 s). Returns the first state seen. */
static enum st_target_health wait_up(struct st_target *t)
{
    char why[256];
    enum st_target_health first = 0, h = 0;
    uint64_t end = st_clock_mono_ns() + 10 * ST_NS_PER_S;
    while (st_clock_mono_ns() < end) {
        h = st_target_health(t, 1000, why, sizeof(why));
        if (!first) {
            first = h;
        }
        if (h == ST_TARGET_UP) {
            break;
        }
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    CHECK(h == ST_TARGET_UP, "health never came up: %s", why);
    return first;
}

/* The simulator's rule: ceil(code points / 4); a chat message adds "<|user|>\n", "\n" and
 * "<|assistant|>\n" (docs/simulator.md, Tokenizer). Text here is valid UTF-8. */
static uint64_t sim_rule(const char *text, int chat)
{
    uint64_t cp = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        cp += (*p & 0xc0) != 0x80;
    }
    if (chat) {
        cp += strlen("<|user|>\n") + strlen("\n") + strlen("<|assistant|>\n");
    }
    return (cp + 3) / 4;
}

static const char *const texts[] = {
    "Hello world, this is a test.",
    "h\xc3\xa9llo w\xc3\xb6rld \xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80!",
    "a",
    "The quick brown fox jumps over the lazy dog. \"quoted\" \\ back\nslash\ttab",
};

static void check_counts(struct st_target *t, const char *who)
{
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        for (int chat = 0; chat <= 1; chat++) {
            char err[512] = "";
            uint64_t tok = 0, fb = 0;
            int rc =
                st_target_tokenize(t, texts[i], strlen(texts[i]), chat, &tok, err, sizeof(err));
            CHECK(rc == 0 && tok == sim_rule(texts[i], chat),
                  "%s tokenize text %zu chat %d: rc %d tokens %llu, want %llu (%s)", who, i, chat,
                  rc, (unsigned long long)tok, (unsigned long long)sim_rule(texts[i], chat), err);
            rc =
                st_target_prompt_tokens(t, texts[i], strlen(texts[i]), chat, &fb, err, sizeof(err));
            CHECK(rc == 0 && fb == tok,
                  "%s prompt tokens text %zu chat %d: rc %d %llu vs %llu (%s)", who, i, chat, rc,
                  (unsigned long long)fb, (unsigned long long)tok, err);
        }
    }
    struct st_target_counter c = {.t = t, .chat = 1};
    uint64_t tok = 0;
    char err[256];
    CHECK(st_target_count_fn(&c, texts[0], strlen(texts[0]), &tok, err, sizeof(err)) == 0 &&
              tok == sim_rule(texts[0], 1) && c.endpoint_calls == 1 && c.fallback_calls == 0,
          "%s counter: %llu tokens, %llu endpoint calls", who, (unsigned long long)tok,
          (unsigned long long)c.endpoint_calls);
}

/* A prompt of about 500 tokens, sent twice: the second finds most of it in the prefix cache. */
static void check_prefix_delta(struct st_target *t, const char *who)
{
    struct st_buf text;
    struct st_prom a, b;
    struct st_target_counters ca, cb;
    struct st_target_delta d;
    char err[256];
    uint64_t tok;
    st_buf_init(&text);
    for (int i = 0; i < 40; i++) {
        st_buf_printf(&text, "Sentence %02d of a shared document for %s. ", i, who);
    }
    st_prom_init(&a);
    st_prom_init(&b);
    CHECK(st_target_metrics(t, &a, err, sizeof(err)) == 0, "%s scrape: %s", who, err);
    for (int k = 0; k < 2; k++) {
        CHECK(st_target_prompt_tokens(t, text.data, text.len, 0, &tok, err, sizeof(err)) == 0,
              "%s prompt: %s", who, err);
    }
    CHECK(st_target_metrics(t, &b, err, sizeof(err)) == 0, "%s scrape: %s", who, err);
    st_target_counters_read(&a, &ca);
    st_target_counters_read(&b, &cb);
    st_target_delta(&ca, &cb, &d);
    note("%s delta: %g hits / %g queries (rate %.3f), waiting %g, running %g", who,
         d.prefix_hit_tokens, d.prefix_query_tokens, d.prefix_hit_rate, d.waiting, d.running);
    CHECK((d.have & ST_TARGET_HAVE_PREFIX) && !d.reset, "%s: no prefix counters (have %#x)", who,
          d.have);
    CHECK(d.prefix_query_tokens >= 2.0 * (double)tok - 1 &&
              d.prefix_hit_tokens >= 0.8 * (double)tok && d.prefix_hit_tokens < (double)tok,
          "%s: %g hits of %g queries for two prompts of %llu tokens", who, d.prefix_hit_tokens,
          d.prefix_query_tokens, (unsigned long long)tok);
    CHECK(d.prefix_hit_rate > 0.4 && d.prefix_hit_rate < 0.5, "%s: hit rate %g", who,
          d.prefix_hit_rate);
    CHECK((d.have & ST_TARGET_HAVE_WAITING) && (d.have & ST_TARGET_HAVE_RUNNING) &&
              d.waiting == 0 && d.running == 0,
          "%s: waiting %g running %g (have %#x)", who, d.waiting, d.running, d.have);

    /* After a flush (where it works) the same prompt again finds nothing. */
    struct st_target_flush fl;
    if (st_target_flush(t, 5000, &fl) == ST_TARGET_FLUSHED) {
        CHECK(st_target_metrics(t, &a, err, sizeof(err)) == 0, "%s scrape: %s", who, err);
        CHECK(st_target_prompt_tokens(t, text.data, text.len, 0, &tok, err, sizeof(err)) == 0,
              "%s prompt: %s", who, err);
        CHECK(st_target_metrics(t, &b, err, sizeof(err)) == 0, "%s scrape: %s", who, err);
        st_target_counters_read(&a, &ca);
        st_target_counters_read(&b, &cb);
        st_target_delta(&ca, &cb, &d);
        CHECK(d.prefix_hit_tokens == 0 && d.prefix_query_tokens == (double)tok,
              "%s after flush: %g hits of %g queries", who, d.prefix_hit_tokens,
              d.prefix_query_tokens);
    }
    st_prom_release(&a);
    st_prom_release(&b);
    st_buf_release(&text);
}

static void check_pool(struct st_target *t, const struct sim *s, uint64_t want, int http_exact,
                       const char *who)
{
    struct st_target_pool p;
    char err[256] = "";
    size_t len;
    char *log = slurp(s->log_path, &len);
    int rc = st_target_pool(t, log, len, &p, err, sizeof(err));
    note("%s pool (log): total %llu, %u x %llu, exact %d: %s", who,
         (unsigned long long)p.total_tokens, p.ranks, (unsigned long long)p.rank_tokens, p.exact,
         p.source);
    CHECK(rc == 0 && p.rank_tokens == want && p.exact && strncmp(p.source, "log line", 8) == 0,
          "%s pool from the log: rc %d rank %llu total %llu, want %llu (%s; %s)", who, rc,
          (unsigned long long)p.rank_tokens, (unsigned long long)p.total_tokens,
          (unsigned long long)want, p.source, err);
    if (t->kind != ST_TARGET_LLAMACPP) {
        CHECK(p.total_tokens == want && p.ranks == 1, "%s: total %llu over %u ranks", who,
              (unsigned long long)p.total_tokens, p.ranks);
    }
    free(log);
    rc = st_target_pool(t, NULL, 0, &p, err, sizeof(err));
    note("%s pool (http): total %llu, %u x %llu, exact %d: %s", who,
         (unsigned long long)p.total_tokens, p.ranks, (unsigned long long)p.rank_tokens, p.exact,
         p.source);
    if (http_exact) {
        CHECK(rc == 0 && p.total_tokens == want && p.ranks == 1,
              "%s pool over HTTP: rc %d %llu, want %llu (%s; %s)", who, rc,
              (unsigned long long)p.total_tokens, (unsigned long long)want, p.source, err);
    } else {
        CHECK(rc == 0 && p.exact == 0 && p.total_tokens == t->slot_n_ctx * t->total_slots &&
                  p.ranks == t->total_slots,
              "%s pool from /props: rc %d %llu (%s; %s)", who, rc,
              (unsigned long long)p.total_tokens, p.source, err);
    }
}

/* ---- vLLM ---- */

static void test_vllm(void)
{
    const char *const base[] = {"--profile", profile, "--dialect", "vllm", NULL};
    const char *const run[] = {"--profile", profile, "--dialect", "vllm", "--speed", "200", NULL};
    const char *const dev[] = {"--profile", profile, "--dialect",  "vllm",
                               "--speed",   "200",   "--dev-mode", NULL};
    uint64_t want = explain_pool(base);
    struct sim s;
    struct st_target t;
    struct st_target_cfg cfg;
    char err[512] = "";
    CHECK(want > 0, "no kv_pool_tokens from --explain --json");
    if (sim_start(&s, run) != 0) {
        CHECK(0, "vllm sim did not start");
        return;
    }
    cfg_of(&cfg, &s, "sk-secret-do-not-print");
    st_target_init(&t, &cfg);
    wait_up(&t);
    CHECK(st_target_open(&t, err, sizeof(err)) == 0, "open: %s", err);
    note("open %s: kind %s sim %d model %d scale %g endpoints %#x model '%s': %s", s.url,
         st_target_kind_name(t.kind), t.is_sim, t.sim_model_mode, t.time_scale, t.endpoints,
         t.model, t.evidence);
    CHECK(t.kind == ST_TARGET_VLLM && t.is_sim && t.sim_model_mode && t.time_scale == 200,
          "vllm identified as %s sim %d model %d scale %g (%s)", st_target_kind_name(t.kind),
          t.is_sim, t.sim_model_mode, t.time_scale, t.evidence);
    CHECK(strcmp(t.model, "tiny") == 0 && strcmp(t.owned_by, "vllm") == 0 &&
              t.max_model_len == 8192,
          "model '%s' owned_by '%s' max_model_len %llu", t.model, t.owned_by,
          (unsigned long long)t.max_model_len);
    CHECK((t.endpoints & (ST_TARGET_EP_METRICS | ST_TARGET_EP_TOKENIZE | ST_TARGET_EP_HEALTH)) ==
              (ST_TARGET_EP_METRICS | ST_TARGET_EP_TOKENIZE | ST_TARGET_EP_HEALTH),
          "vllm endpoints %#x", t.endpoints);
    CHECK(strstr(t.evidence, "owned_by=vllm") && strstr(t.evidence, "/metrics vllm:*"),
          "evidence '%s'", t.evidence);
    check_counts(&t, "vllm");

    struct st_target_flush fl;
    enum st_target_flush_outcome o = st_target_flush(&t, 2000, &fl);
    note("flush: %s (HTTP %ld, %u attempts, %s): %s", st_target_flush_name(o), fl.status,
         fl.attempts, fl.route, fl.reason);
    CHECK(o == ST_TARGET_FLUSH_UNSUPPORTED && fl.outcome == o && fl.status == 404 &&
              strstr(fl.reason, "VLLM_SERVER_DEV_MODE=1") &&
              strcmp(fl.route, "POST /reset_prefix_cache") == 0,
          "vllm flush without dev mode: %s %ld '%s'", st_target_flush_name(o), fl.status,
          fl.reason);
    CHECK(!strstr(fl.reason, "sk-secret") && !strstr(t.evidence, "sk-secret"), "key printed");
    check_pool(&t, &s, want, 1, "vllm");
    check_prefix_delta(&t, "vllm");
    st_target_release(&t);
    sim_stop(&s);

    if (sim_start(&s, dev) != 0) {
        CHECK(0, "vllm --dev-mode sim did not start");
        return;
    }
    cfg_of(&cfg, &s, NULL);
    st_target_init(&t, &cfg);
    wait_up(&t);
    CHECK(st_target_open(&t, err, sizeof(err)) == 0, "open: %s", err);
    note("open %s: kind %s sim %d model %d scale %g endpoints %#x model '%s': %s", s.url,
         st_target_kind_name(t.kind), t.is_sim, t.sim_model_mode, t.time_scale, t.endpoints,
         t.model, t.evidence);
    o = st_target_flush(&t, 2000, &fl);
    note("flush: %s (HTTP %ld, %u attempts, %s): %s", st_target_flush_name(o), fl.status,
         fl.attempts, fl.route, fl.reason);
    CHECK(o == ST_TARGET_FLUSHED && fl.status == 200 && fl.attempts == 1,
          "vllm flush with dev mode: %s %ld '%s'", st_target_flush_name(o), fl.status, fl.reason);
    check_prefix_delta(&t, "vllm-dev");
    st_target_release(&t);
    sim_stop(&s);
}

/* ---- SGLang ---- */

struct bg {
    const char *url;
    int ok;
    uint64_t end_ns;
};

/* A long completion (3000 tokens, about 2 s at --speed 200) on its own easy handle. */
static void *long_request(void *arg)
{
    struct bg *b = arg;
    char url[160];
    long status = 0;
    static const char body[] = "{\"model\":\"tiny\",\"prompt\":\"a long one\",\"max_tokens\":3000}";
    snprintf(url, sizeof(url), "%s/v1/completions", b->url);
    CURL *e = curl_easy_init();
    FILE *sink = fopen("/dev/null", "w");
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 20000L);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, sink);
    b->ok = curl_easy_perform(e) == CURLE_OK &&
            curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK && status == 200;
    b->end_ns = st_clock_mono_ns();
    curl_slist_free_all(h);
    curl_easy_cleanup(e);
    fclose(sink);
    return NULL;
}

static void test_sglang(void)
{
    /* A start-up of 100 virtual seconds: half a second of 503 first. */
    const char *const base[] = {"--profile", profile, "--dialect", "sglang", NULL};
    const char *const run[] = {"--profile", profile, "--dialect", "sglang",
                               "--speed",   "200",   "--set",     "engine.startup_s=100",
                               NULL};
    uint64_t want = explain_pool(base);
    struct sim s;
    struct st_target t;
    struct st_target_cfg cfg;
    char err[512] = "";
    if (sim_start(&s, run) != 0) {
        CHECK(0, "sglang sim did not start");
        return;
    }
    cfg_of(&cfg, &s, "sk-secret-do-not-print");
    st_target_init(&t, &cfg);
    enum st_target_health first = wait_up(&t);
    CHECK(first == ST_TARGET_LOADING, "sglang first health %d, want LOADING", first);
    CHECK(st_target_open(&t, err, sizeof(err)) == 0, "open: %s", err);
    note("open %s: kind %s sim %d model %d scale %g endpoints %#x model '%s': %s", s.url,
         st_target_kind_name(t.kind), t.is_sim, t.sim_model_mode, t.time_scale, t.endpoints,
         t.model, t.evidence);
    CHECK(t.kind == ST_TARGET_SGLANG && t.is_sim && t.sim_model_mode,
          "sglang identified as %s (%s)", st_target_kind_name(t.kind), t.evidence);
    uint32_t want_ep = ST_TARGET_EP_V1_TOKENIZE | ST_TARGET_EP_SERVER_INFO |
                       ST_TARGET_EP_GET_SERVER_INFO | ST_TARGET_EP_METRICS;
    CHECK((t.endpoints & want_ep) == want_ep, "sglang endpoints %#x", t.endpoints);
    check_counts(&t, "sglang");
    check_pool(&t, &s, want, 1, "sglang");

    /* Idle: flushed at once. */
    struct st_target_flush fl;
    enum st_target_flush_outcome o = st_target_flush(&t, 2000, &fl);
    note("flush: %s (HTTP %ld, %u attempts, %s): %s", st_target_flush_name(o), fl.status,
         fl.attempts, fl.route, fl.reason);
    CHECK(o == ST_TARGET_FLUSHED && fl.status == 200 && fl.attempts == 1,
          "sglang idle flush: %s %ld '%s'", st_target_flush_name(o), fl.status, fl.reason);
    check_prefix_delta(&t, "sglang");

    /* A long request runs: 400 until the deadline -> BUSY; then a patient flush waits for it. */
    struct bg b = {.url = s.url, .ok = 0, .end_ns = 0};
    pthread_t th;
    pthread_create(&th, NULL, long_request, &b);
    struct st_prom m;
    struct st_target_counters c;
    st_prom_init(&m);
    uint64_t until = st_clock_mono_ns() + 5 * ST_NS_PER_S;
    do {
        memset(&c, 0, sizeof(c));
        if (st_target_metrics(&t, &m, err, sizeof(err)) == 0) {
            st_target_counters_read(&m, &c);
        }
    } while (c.running < 1 && st_clock_mono_ns() < until);
    CHECK(c.running == 1, "the long request never ran (running %g)", c.running);
    uint64_t t0 = st_clock_mono_ns();
    o = st_target_flush(&t, 300, &fl);
    note("flush: %s (HTTP %ld, %u attempts, %s): %s", st_target_flush_name(o), fl.status,
         fl.attempts, fl.route, fl.reason);
    uint64_t busy_ms = (st_clock_mono_ns() - t0) / ST_NS_PER_MS;
    CHECK(o == ST_TARGET_FLUSH_BUSY && fl.status == 400 && fl.attempts >= 1 && busy_ms >= 250 &&
              busy_ms < 3000 && b.end_ns == 0,
          "sglang busy flush: %s %ld after %llu ms, %u attempts '%s'", st_target_flush_name(o),
          fl.status, (unsigned long long)busy_ms, fl.attempts, fl.reason);
    o = st_target_flush(&t, 20000, &fl);
    note("flush: %s (HTTP %ld, %u attempts, %s): %s", st_target_flush_name(o), fl.status,
         fl.attempts, fl.route, fl.reason);
    uint64_t done_ns = st_clock_mono_ns();
    pthread_join(th, NULL);
    CHECK(o == ST_TARGET_FLUSHED && fl.status == 200 && fl.attempts == 1 && b.ok,
          "sglang patient flush: %s %ld, %u attempts, request ok %d '%s'", st_target_flush_name(o),
          fl.status, fl.attempts, b.ok, fl.reason);
    CHECK(b.end_ns > 0 && b.end_ns < done_ns + 200 * ST_NS_PER_MS &&
              done_ns - t0 > 500 * ST_NS_PER_MS,
          "the flush came back %lld ms before the request ended",
          (long long)((int64_t)b.end_ns - (int64_t)done_ns) / 1000000);
    st_prom_release(&m);
    st_target_release(&t);
    sim_stop(&s);

    /* Down: nothing listens there any more. */
    st_target_init(&t, &cfg);
    char why[256];
    CHECK(st_target_health(&t, 500, why, sizeof(why)) == ST_TARGET_DOWN, "after stop: %s", why);
    int rc = st_target_open(&t, err, sizeof(err));
    CHECK(rc == -ECONNREFUSED && !strstr(err, "sk-secret"), "open a dead port: %d %s", rc, err);
    st_target_release(&t);
}

/* ---- llama.cpp ---- */

static void test_llamacpp(void)
{
    char slot_dir[300];
    snprintf(slot_dir, sizeof(slot_dir), "%s/slots", tmpdir);
    mkdir(slot_dir, 0700);
    const char *const base[] = {"--profile", profile, "--dialect", "llamacpp", NULL};
    const char *const run[] = {"--profile", profile, "--dialect", "llamacpp",
                               "--speed",   "200",   NULL};
    const char *const save[] = {"--profile",        profile,   "--dialect",
                                "llamacpp",         "--speed", "200",
                                "--slot-save-path", slot_dir,  NULL};
    uint64_t want = explain_pool(base);
    struct sim s;
    struct st_target t;
    struct st_target_cfg cfg;
    char err[512] = "";
    if (sim_start(&s, run) != 0) {
        CHECK(0, "llamacpp sim did not start");
        return;
    }
    cfg_of(&cfg, &s, NULL);
    st_target_init(&t, &cfg);
    wait_up(&t);
    CHECK(st_target_open(&t, err, sizeof(err)) == 0, "open: %s", err);
    note("open %s: kind %s sim %d model %d scale %g endpoints %#x model '%s': %s", s.url,
         st_target_kind_name(t.kind), t.is_sim, t.sim_model_mode, t.time_scale, t.endpoints,
         t.model, t.evidence);
    CHECK(t.kind == ST_TARGET_LLAMACPP && t.is_sim && t.sim_model_mode && t.total_slots == 4 &&
              t.slot_n_ctx > 0,
          "llamacpp identified as %s, %u slots of %llu (%s)", st_target_kind_name(t.kind),
          t.total_slots, (unsigned long long)t.slot_n_ctx, t.evidence);
    uint32_t want_ep = ST_TARGET_EP_PROPS | ST_TARGET_EP_TOKENIZE | ST_TARGET_EP_METRICS;
    CHECK((t.endpoints & want_ep) == want_ep && !(t.endpoints & ST_TARGET_EP_APPLY_TEMPLATE),
          "llamacpp endpoints %#x", t.endpoints);
    check_counts(&t, "llamacpp");
    struct st_target_flush fl;
    enum st_target_flush_outcome o = st_target_flush(&t, 2000, &fl);
    note("flush: %s (HTTP %ld, %u attempts, %s): %s", st_target_flush_name(o), fl.status,
         fl.attempts, fl.route, fl.reason);
    CHECK(o == ST_TARGET_FLUSH_UNSUPPORTED && fl.status == 501 &&
              strstr(fl.reason, "--slot-save-path") && fl.attempts == 1,
          "llamacpp flush without --slot-save-path: %s %ld '%s'", st_target_flush_name(o),
          fl.status, fl.reason);
    check_pool(&t, &s, want, 0, "llamacpp");
    check_prefix_delta(&t, "llamacpp");
    st_target_release(&t);
    sim_stop(&s);

    if (sim_start(&s, save) != 0) {
        CHECK(0, "llamacpp --slot-save-path sim did not start");
        return;
    }
    cfg_of(&cfg, &s, NULL);
    st_target_init(&t, &cfg);
    wait_up(&t);
    CHECK(st_target_open(&t, err, sizeof(err)) == 0, "open: %s", err);
    note("open %s: kind %s sim %d model %d scale %g endpoints %#x model '%s': %s", s.url,
         st_target_kind_name(t.kind), t.is_sim, t.sim_model_mode, t.time_scale, t.endpoints,
         t.model, t.evidence);
    o = st_target_flush(&t, 2000, &fl);
    note("flush: %s (HTTP %ld, %u attempts, %s): %s", st_target_flush_name(o), fl.status,
         fl.attempts, fl.route, fl.reason);
    CHECK(o == ST_TARGET_FLUSHED && fl.status == 200 && fl.attempts == 4,
          "llamacpp flush with --slot-save-path: %s %ld, %u attempts '%s'", st_target_flush_name(o),
          fl.status, fl.attempts, fl.reason);
    check_prefix_delta(&t, "llamacpp-save");
    st_target_release(&t);
    sim_stop(&s);
    rmdir(slot_dir);
}

/* ---- fixed-timing mode ---- */

static void test_fixed(void)
{
    const char *const run[] = {"--ttft-ms", "1", "--itl-ms", "0", NULL};
    struct sim s;
    struct st_target t;
    struct st_target_cfg cfg;
    char err[512] = "";
    if (sim_start(&s, run) != 0) {
        CHECK(0, "fixed sim did not start");
        return;
    }
    cfg_of(&cfg, &s, NULL);
    st_target_init(&t, &cfg);
    wait_up(&t);
    CHECK(st_target_open(&t, err, sizeof(err)) == 0, "open: %s", err);
    note("open %s: kind %s sim %d model %d scale %g endpoints %#x model '%s': %s", s.url,
         st_target_kind_name(t.kind), t.is_sim, t.sim_model_mode, t.time_scale, t.endpoints,
         t.model, t.evidence);
    CHECK(t.kind == ST_TARGET_GENERIC && t.is_sim && !t.sim_model_mode && t.time_scale == 1 &&
              strcmp(t.model, "sim") == 0 && !(t.endpoints & ST_TARGET_EP_METRICS),
          "fixed sim identified as %s sim %d model %d '%s' (%s)", st_target_kind_name(t.kind),
          t.is_sim, t.sim_model_mode, t.model, t.evidence);
    uint64_t tok = 0;
    int rc = st_target_tokenize(&t, texts[0], strlen(texts[0]), 0, &tok, err, sizeof(err));
    CHECK(rc == ST_ENOTFOUND, "fixed tokenize: %d", rc);
    /* The counter falls back to usage.prompt_tokens: ceil(bytes / 4) in fixed-timing mode. */
    struct st_target_counter c = {.t = &t, .chat = 0};
    rc = st_target_count_fn(&c, texts[1], strlen(texts[1]), &tok, err, sizeof(err));
    CHECK(rc == 0 && tok == (strlen(texts[1]) + 3) / 4 && c.fallback_calls == 1 &&
              c.endpoint_calls == 0,
          "fixed counter: rc %d %llu tokens (%s)", rc, (unsigned long long)tok, err);
    struct st_target_flush fl;
    CHECK(st_target_flush(&t, 1000, &fl) == ST_TARGET_FLUSHED && fl.attempts == 0,
          "fixed flush: %s", fl.reason);
    struct st_target_pool p;
    CHECK(st_target_pool(&t, NULL, 0, &p, err, sizeof(err)) == ST_ENOTFOUND, "fixed pool");
    struct st_prom m;
    st_prom_init(&m);
    CHECK(st_target_metrics(&t, &m, err, sizeof(err)) == ST_ENOTFOUND, "fixed metrics: %s", err);
    st_prom_release(&m);
    st_target_release(&t);
    sim_stop(&s);
}

/* ---- scripted servers: kinds the sim does not model, and hostile answers ---- */

struct route {
    const char *method;
    const char *path; /* matched against the path without its query */
    int status;
    const char *headers; /* extra header lines, each ending in \r\n */
    const char *body;
};

struct fake {
    int fd;
    char url[64];
    volatile int stop;
    pthread_t th;
    const struct route *routes;
    size_t n_routes;
    char last_auth[128];
    int requests;
};

static void fake_answer(struct fake *f, int c)
{
    char req[65536];
    size_t got = 0;
    char *end = NULL;
    req[0] = '\0';
    while (got < sizeof(req) - 1 && !(end = strstr(req, "\r\n\r\n"))) {
        struct pollfd p = {.fd = c, .events = POLLIN};
        if (poll(&p, 1, 2000) <= 0) {
            return;
        }
        ssize_t k = read(c, req + got, sizeof(req) - 1 - got);
        if (k <= 0) {
            return;
        }
        got += (size_t)k;
        req[got] = '\0';
    }
    if (!end) {
        return;
    }
    /* Read the body too, so closing does not reset the connection under the client. */
    const char *cl = strcasestr(req, "\r\nContent-Length:");
    size_t want = (size_t)(end + 4 - req) + (cl ? strtoul(cl + 17, NULL, 10) : 0);
    while (got < want && got < sizeof(req) - 1) {
        ssize_t k = read(c, req + got, sizeof(req) - 1 - got);
        if (k <= 0) {
            break;
        }
        got += (size_t)k;
    }
    char method[8] = "", path[512] = "";
    if (sscanf(req, "%7s %511s", method, path) != 2) {
        return;
    }
    char *q = strchr(path, '?');
    if (q) {
        *q = '\0';
    }
    const char *auth = strcasestr(req, "\r\nAuthorization: ");
    if (auth) {
        const char *e = strstr(auth + 2, "\r\n");
        snprintf(f->last_auth, sizeof(f->last_auth), "%.*s", (int)(e - auth - 17), auth + 17);
    }
    f->requests++;
    const struct route *r = NULL;
    for (size_t i = 0; i < f->n_routes; i++) {
        if (strcmp(f->routes[i].method, method) == 0 && strcmp(f->routes[i].path, path) == 0) {
            r = &f->routes[i];
            break;
        }
    }
    static const struct route nf = {"", "", 404, "", "{\"detail\":\"Not Found\"}"};
    if (!r) {
        r = &nf;
    }
    char head[1024];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d X\r\nContent-Length: %zu\r\nConnection: close\r\n%s\r\n",
                     r->status, strlen(r->body), r->headers);
    if (write(c, head, (size_t)n) < 0 || write(c, r->body, strlen(r->body)) < 0) {
        return;
    }
}

static void *fake_main(void *arg)
{
    struct fake *f = arg;
    while (!f->stop) {
        struct pollfd p = {.fd = f->fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0) {
            continue;
        }
        int c = accept4(f->fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            continue;
        }
        fake_answer(f, c);
        shutdown(c, SHUT_WR);
        close(c);
    }
    return NULL;
}

static int fake_start(struct fake *f, const struct route *routes, size_t n)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    socklen_t len = sizeof(a);
    memset(f, 0, sizeof(*f));
    f->routes = routes;
    f->n_routes = n;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    f->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (f->fd < 0 || bind(f->fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(f->fd, 16) != 0 ||
        getsockname(f->fd, (struct sockaddr *)&a, &len) != 0) {
        return -1;
    }
    snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%u", ntohs(a.sin_port));
    return pthread_create(&f->th, NULL, fake_main, f) == 0 ? 0 : -1;
}

static void fake_stop(struct fake *f)
{
    f->stop = 1;
    pthread_join(f->th, NULL);
    close(f->fd);
}

static void fake_target(struct st_target *t, const struct fake *f, const char *key)
{
    struct st_target_cfg c;
    memset(&c, 0, sizeof(c));
    c.base_url = f->url;
    c.api_key = key;
    c.timeout_ms = 2000;
    st_target_init(t, &c);
}

#define N_ROUTES(r) (sizeof(r) / sizeof((r)[0]))

static void test_fake_tgi(void)
{
    static const struct route routes[] = {
        {"GET", "/v1/models", 200, "",
         "{\"object\":\"list\",\"data\":[{\"id\":\"org/m\",\"object\":\"model\",\"created\":0,"
         "\"owned_by\":\"org/m\"}]}"},
        {"GET", "/info", 200, "",
         "{\"model_id\":\"org/"
         "m\",\"max_total_tokens\":4096,\"router\":\"text-generation-router\"}"},
        {"GET", "/metrics", 200, "",
         "# TYPE tgi_batch_max_total_tokens gauge\ntgi_batch_max_total_tokens 163840\n"
         "# TYPE tgi_queue_size gauge\ntgi_queue_size 2\n"},
        {"GET", "/health", 200, "", ""},
        {"POST", "/tokenize", 200, "",
         "[{\"id\":1,\"text\":\"a\",\"start\":0,\"stop\":1},{\"id\":2,\"text\":\"b\",\"start\":1,"
         "\"stop\":2}]"},
        {"POST", "/chat_tokenize", 200, "",
         "{\"tokenize_response\":[{\"id\":1},{\"id\":2},{\"id\":3}],\"templated_text\":\"x\"}"},
    };
    struct fake f;
    struct st_target t;
    char err[512] = "";
    uint64_t tok = 0;
    if (fake_start(&f, routes, N_ROUTES(routes)) != 0) {
        CHECK(0, "fake server");
        return;
    }
    fake_target(&t, &f, "sk-tgi-key");
    CHECK(st_target_open(&t, err, sizeof(err)) == 0, "open: %s", err);
    CHECK(t.kind == ST_TARGET_TGI && !t.is_sim && t.time_scale == 1 &&
              strcmp(t.model, "org/m") == 0 && (t.endpoints & ST_TARGET_EP_INFO) &&
              (t.endpoints & ST_TARGET_EP_CHAT_TOKENIZE),
          "tgi: %s endpoints %#x (%s)", st_target_kind_name(t.kind), t.endpoints, t.evidence);
    CHECK(strcmp(f.last_auth, "Bearer sk-tgi-key") == 0, "Authorization '%s'", f.last_auth);
    CHECK(st_target_tokenize(&t, "ab", 2, 0, &tok, err, sizeof(err)) == 0 && tok == 2,
          "tgi tokenize: %llu (%s)", (unsigned long long)tok, err);
    CHECK(st_target_tokenize(&t, "ab", 2, 1, &tok, err, sizeof(err)) == 0 && tok == 3,
          "tgi chat tokenize: %llu (%s)", (unsigned long long)tok, err);
    struct st_target_pool p;
    CHECK(st_target_pool(&t, NULL, 0, &p, err, sizeof(err)) == 0 && p.total_tokens == 163840 &&
              p.exact,
          "tgi pool %llu (%s)", (unsigned long long)p.total_tokens, err);
    struct st_target_flush fl;
    CHECK(st_target_flush(&t, 500, &fl) == ST_TARGET_FLUSH_UNSUPPORTED &&
              strstr(fl.reason, "PREFIX_CACHING") && fl.attempts == 0,
          "tgi flush: %s", fl.reason);
    struct st_prom m;
    struct st_target_counters c;
    st_prom_init(&m);
    CHECK(st_target_metrics(&t, &m, err, sizeof(err)) == 0, "tgi metrics: %s", err);
    st_target_counters_read(&m, &c);
    CHECK(c.have == ST_TARGET_HAVE_WAITING && c.waiting == 2, "tgi counters %#x", c.have);
    st_prom_release(&m);
    st_target_release(&t);
    fake_stop(&f);
}

static void test_fake_trtllm(void)
{
    static const struct route routes[] = {
        {"GET", "/v1/models", 200, "",
         "{\"object\":\"list\",\"data\":[{\"id\":\"m\",\"owned_by\":\"tensorrt_llm\"}]}"},
        {"GET", "/metrics", 200, "", "[{\"iter\":1,\"kvCacheStats\":{}}]"},
        {"POST", "/v1/completions", 200, "",
         "{\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":1}}"},
    };
    struct fake f;
    struct st_target t;
    char err[512] = "";
    uint64_t tok = 0;
    if (fake_start(&f, routes, N_ROUTES(routes)) != 0) {
        CHECK(0, "fake server");
        return;
    }
    fake_target(&t, &f, NULL);
    CHECK(st_target_open(&t, err, sizeof(err)) == 0, "open: %s", err);
    CHECK(t.kind == ST_TARGET_TRTLLM && (t.endpoints & ST_TARGET_EP_METRICS_JSON) &&
              f.last_auth[0] == '\0',
          "trtllm: %s endpoints %#x (%s)", st_target_kind_name(t.kind), t.endpoints, t.evidence);
    struct st_target_counter c = {.t = &t, .chat = 0};
    CHECK(st_target_count_fn(&c, "x", 1, &tok, err, sizeof(err)) == 0 && tok == 9 &&
              c.fallback_calls == 1,
          "trtllm counter: %llu (%s)", (unsigned long long)tok, err);
    c.chat = 1;
    CHECK(st_target_count_fn(&c, "x", 1, &tok, err, sizeof(err)) == ST_ESERVER,
          "trtllm chat counter without a chat route: %s", err);
    struct st_prom m;
    st_prom_init(&m);
    CHECK(st_target_metrics(&t, &m, err, sizeof(err)) == ST_ENOTFOUND, "trtllm metrics: %s", err);
    st_prom_release(&m);
    struct st_target_pool p;
    CHECK(st_target_pool(&t, NULL, 0, &p, err, sizeof(err)) == ST_ENOTFOUND, "trtllm pool");
    static const char log[] = "[TRT-LLM] [I] Loaded engine\n"
                              "GPU KV cache size: 12,345 tokens\n";
    CHECK(st_target_pool(&t, log, sizeof(log) - 1, &p, err, sizeof(err)) == 0 &&
              p.total_tokens == 12345 && strstr(p.source, "log line 2"),
          "pool from a log: %s", p.source);
    struct st_target_flush fl;
    CHECK(st_target_flush(&t, 500, &fl) == ST_TARGET_FLUSH_UNSUPPORTED, "trtllm flush");
    st_target_release(&t);
    fake_stop(&f);
}

/* An older SGLang: no ?timeout, 400 at once while busy; odd info answers. */
static void test_fake_old_sglang(void)
{
    static const struct route routes[] = {
        {"GET", "/v1/models", 200, "", "{\"data\":[{\"id\":\"m\",\"owned_by\":\"sglang\"}]}"},
        {"GET", "/get_server_info", 200, "", "{\"max_total_num_tokens\":-1}"},
        {"GET", "/server_info", 200, "", "not json"},
        {"POST", "/tokenize", 200, "", "{\"count\":7,\"max_model_len\":1000000000}"},
        {"POST", "/v1/chat/completions", 200, "", "{\"usage\":{\"prompt_tokens\":12}}"},
        {"POST", "/flush_cache", 400, "", "Cache not flushed.\n"},
    };
    struct fake f;
    struct st_target t;
    char err[512] = "";
    uint64_t tok = 0;
    if (fake_start(&f, routes, N_ROUTES(routes)) != 0) {
        CHECK(0, "fake server");
        return;
    }
    fake_target(&t, &f, NULL);
    CHECK(st_target_open(&t, err, sizeof(err)) == 0, "open: %s", err);
    CHECK(t.kind == ST_TARGET_SGLANG && (t.endpoints & ST_TARGET_EP_TOKENIZE) &&
              !(t.endpoints & (ST_TARGET_EP_V1_TOKENIZE | ST_TARGET_EP_GET_SERVER_INFO |
                               ST_TARGET_EP_SERVER_INFO)),
          "old sglang: %s endpoints %#x", st_target_kind_name(t.kind), t.endpoints);
    CHECK(st_target_tokenize(&t, "abc", 3, 0, &tok, err, sizeof(err)) == 0 && tok == 7,
          "old sglang tokenize %llu (%s)", (unsigned long long)tok, err);
    CHECK(st_target_tokenize(&t, "abc", 3, 1, &tok, err, sizeof(err)) == ST_ENOTFOUND,
          "sglang chat tokenize must be absent");
    struct st_target_counter c = {.t = &t, .chat = 1};
    CHECK(st_target_count_fn(&c, "abc", 3, &tok, err, sizeof(err)) == 0 && tok == 12 &&
              c.fallback_calls == 1 && c.endpoint_calls == 0,
          "sglang chat counter %llu (%s)", (unsigned long long)tok, err);
    struct st_target_pool p;
    CHECK(st_target_pool(&t, NULL, 0, &p, err, sizeof(err)) == ST_ENOTFOUND, "bad pool");
    struct st_target_flush fl;
    int before = f.requests;
    uint64_t t0 = st_clock_mono_ns();
    enum st_target_flush_outcome o = st_target_flush(&t, 600, &fl);
    uint64_t ms = (st_clock_mono_ns() - t0) / ST_NS_PER_MS;
    note("flush: %s (HTTP %ld, %u attempts, %s): %s", st_target_flush_name(o), fl.status,
         fl.attempts, fl.route, fl.reason);
    CHECK(o == ST_TARGET_FLUSH_BUSY && fl.status == 400 && fl.attempts >= 4 &&
              fl.attempts == (uint32_t)(f.requests - before) && ms >= 550 && ms < 2000,
          "backoff: %s after %llu ms, %u attempts", st_target_flush_name(o), (unsigned long long)ms,
          fl.attempts);
    st_target_release(&t);
    fake_stop(&f);
}

/* Answers that are wrong in every way a broken server could manage. */
static void test_fake_hostile(void)
{
    static const struct route routes[] = {
        {"GET", "/v1/models", 200, "Server: llama.cpp\r\nX-Sim-Time-Scale: banana\r\n",
         "{\"data\":[{\"id\":7,\"owned_by\":[1],\"max_model_len\":-3}]}"},
        {"GET", "/metrics", 200, "", "llamacpp:x{a=\"\\q\"} 1\n"},
        {"GET", "/props", 200, "",
         "{\"total_slots\":3,\"default_generation_settings\":{\"n_ctx\":\"big\"}}"},
        {"POST", "/tokenize", 200, "", "{\"tokens\":5}"},
        {"GET", "/slots", 200, "", "{}"},
        {"POST", "/slots/0", 500, "", "{\"error\":{\"code\":500}}"},
        {"POST", "/v1/completions", 200, "", "{\"usage\":{\"prompt_tokens\":-4}}"},
        {"GET", "/health", 418, "", "teapot"},
    };
    struct fake f;
    struct st_target t;
    char err[512] = "", why[256] = "";
    uint64_t tok = 0;
    if (fake_start(&f, routes, N_ROUTES(routes)) != 0) {
        CHECK(0, "fake server");
        return;
    }
    fake_target(&t, &f, "sk-hostile");
    CHECK(st_target_health(&t, 500, why, sizeof(why)) == ST_TARGET_DOWN && strstr(why, "HTTP 418"),
          "health: %s", why);
    CHECK(st_target_open(&t, err, sizeof(err)) == 0, "open: %s", err);
    CHECK(t.kind == ST_TARGET_LLAMACPP && t.is_sim && t.time_scale == 1 && t.model[0] == '\0' &&
              t.total_slots == 3 && t.slot_n_ctx == 0 && !(t.endpoints & ST_TARGET_EP_METRICS),
          "hostile: %s sim %d scale %g slots %u (%s)", st_target_kind_name(t.kind), t.is_sim,
          t.time_scale, t.total_slots, t.evidence);
    CHECK(st_target_tokenize(&t, "x", 1, 0, &tok, err, sizeof(err)) == ST_ENOTFOUND,
          "tokenize without a probed route: %s", err);
    CHECK(st_target_prompt_tokens(&t, "x", 1, 0, &tok, err, sizeof(err)) == ST_EPARSE,
          "negative usage: %s", err);
    struct st_prom m;
    st_prom_init(&m);
    CHECK(st_target_metrics(&t, &m, err, sizeof(err)) == ST_EPARSE && strstr(err, "line 1"),
          "bad metrics: %s", err);
    st_prom_release(&m);
    struct st_target_pool p;
    CHECK(st_target_pool(&t, NULL, 0, &p, err, sizeof(err)) == ST_ENOTFOUND, "pool: %s", err);
    struct st_target_flush fl;
    CHECK(st_target_flush(&t, 1000, &fl) == ST_TARGET_FLUSH_ERROR && fl.status == 500 &&
              fl.attempts == 1,
          "flush: %s", fl.reason);
    CHECK(!strstr(err, "sk-hostile") && !strstr(fl.reason, "sk-hostile") &&
              !strstr(why, "sk-hostile"),
          "the key leaked into a message");
    st_target_release(&t);
    fake_stop(&f);

    /* Not a model list, and an auth failure. */
    static const struct route lists[] = {{"GET", "/v1/models", 200, "", "[]"}};
    static const struct route denied[] = {
        {"GET", "/v1/models", 401, "", "{\"error\":{\"message\":\"bad key\"}}"}};
    for (int k = 0; k < 2; k++) {
        if (fake_start(&f, k ? denied : lists, 1) != 0) {
            CHECK(0, "fake server");
            return;
        }
        fake_target(&t, &f, "sk-hostile");
        int rc = st_target_open(&t, err, sizeof(err));
        CHECK(rc == ST_ESERVER && !strstr(err, "sk-hostile") && (k == 0 || strstr(err, "401")),
              "open %d: %d %s", k, rc, err);
        st_target_release(&t);
        fake_stop(&f);
    }
}

/* ---- pure helpers over fixed scrapes ---- */

static void test_counters_pure(void)
{
    static const char a[] = "vllm:prefix_cache_hits_total{engine=\"0\"} 100\n"
                            "vllm:prefix_cache_hits_total{engine=\"1\"} 50\n"
                            "vllm:prefix_cache_queries_total{engine=\"0\"} 400\n"
                            "vllm:prefix_cache_queries_total{engine=\"1\"} 100\n"
                            "vllm:spec_decode_num_accepted_tokens_total 10\n"
                            "vllm:spec_decode_num_draft_tokens_total 20\n"
                            "vllm:spec_decode_num_drafts_total 10\n"
                            "vllm:num_requests_waiting 3\n";
    static const char b[] = "vllm:prefix_cache_hits_total{engine=\"0\"} 190\n"
                            "vllm:prefix_cache_hits_total{engine=\"1\"} 60\n"
                            "vllm:prefix_cache_queries_total{engine=\"0\"} 500\n"
                            "vllm:prefix_cache_queries_total{engine=\"1\"} 100\n"
                            "vllm:spec_decode_num_accepted_tokens_total 40\n"
                            "vllm:spec_decode_num_draft_tokens_total 60\n"
                            "vllm:spec_decode_num_drafts_total 30\n"
                            "vllm:num_requests_waiting 1\n";
    static const char llama[] = "llamacpp:prompt_tokens_total 57\n"
                                "llamacpp:prompt_tokens_cached_total 17\n"
                                "llamacpp:requests_deferred 2\n";
    static const char sgl[] = "sglang:cached_tokens_total 900\n"
                              "sglang:prompt_tokens_total 1000\n"
                              "sglang:spec_accept_length 2.5\n";
    struct st_prom pa, pb;
    struct st_target_counters ca, cb;
    struct st_target_delta d;
    st_prom_init(&pa);
    st_prom_init(&pb);
    CHECK(st_prom_parse(&pa, a, strlen(a), NULL) == 0 &&
              st_prom_parse(&pb, b, strlen(b), NULL) == 0,
          "parse");
    st_target_counters_read(&pa, &ca);
    st_target_counters_read(&pb, &cb);
    st_target_delta(&ca, &cb, &d);
    CHECK(d.prefix_hit_tokens == 100 && d.prefix_query_tokens == 100 && d.prefix_hit_rate == 1.0,
          "vllm delta %g/%g", d.prefix_hit_tokens, d.prefix_query_tokens);
    CHECK(d.spec_accept_rate == 0.75 && d.spec_accept_length == 2.5 && d.waiting == 1 && !d.reset,
          "vllm spec %g %g waiting %g", d.spec_accept_rate, d.spec_accept_length, d.waiting);
    st_target_delta(&cb, &ca, &d);
    CHECK(d.reset, "a counter going backwards is a reset");
    CHECK(st_prom_parse(&pa, llama, strlen(llama), NULL) == 0, "parse");
    st_target_counters_read(&pa, &ca);
    CHECK(ca.prefix_hit_tokens == 17 && ca.prefix_query_tokens == 74 && ca.waiting == 2 &&
              !(ca.have & ST_TARGET_HAVE_TOKENS),
          "llama counters %g %g", ca.prefix_hit_tokens, ca.prefix_query_tokens);
    CHECK(st_prom_parse(&pa, sgl, strlen(sgl), NULL) == 0, "parse");
    st_target_counters_read(&pa, &ca);
    st_target_delta(&ca, &ca, &d);
    CHECK(ca.prefix_query_tokens == 1000 && isnan(d.prefix_hit_rate) &&
              d.spec_accept_length == 2.5 && !(d.have & ST_TARGET_HAVE_SPEC),
          "sglang counters");
    st_prom_release(&pa);
    st_prom_release(&pb);
}

/* st_target_parse_answer: the answers st_target_open, st_target_tokenize and st_target_pool
 * read, as bytes (fuzz/fuzz_target.c feeds it arbitrary ones). */
static int answer(enum st_target_answer kind, const char *body, struct st_target_facts *f)
{
    return st_target_parse_answer(kind, body, strlen(body), f);
}

static void test_answers_pure(void)
{
    struct st_target_facts f;
    CHECK(answer(ST_TARGET_ANSWER_MODELS,
                 "{\"object\":\"list\",\"data\":[{\"id\":\"m\",\"owned_by\":\"vllm\","
                 "\"max_model_len\":4096},{\"id\":\"x\"}]}",
                 &f) == 0 &&
              strcmp(f.model, "m") == 0 && strcmp(f.owned_by, "vllm") == 0 &&
              f.max_model_len == 4096,
          "models: %s %s %llu", f.model, f.owned_by, (unsigned long long)f.max_model_len);
    CHECK(answer(ST_TARGET_ANSWER_MODELS, "{\"data\":[]}", &f) == 0 && f.model[0] == '\0',
          "an empty model list is one");
    CHECK(answer(ST_TARGET_ANSWER_MODELS, "[{\"data\":[]}]", &f) == ST_EPARSE &&
              answer(ST_TARGET_ANSWER_MODELS, "{\"data\":{}}", &f) == ST_EPARSE &&
              st_target_parse_answer(ST_TARGET_ANSWER_MODELS, NULL, 0, &f) == ST_EPARSE,
          "not a model list");
    CHECK(answer(ST_TARGET_ANSWER_SERVER_INFO,
                 "{\"max_total_num_tokens\":100,\"internal_states\":[{\"memory_usage\":"
                 "{\"token_capacity\":60}},{\"memory_usage\":{\"token_capacity\":70}}]}",
                 &f) == 0 &&
              f.rank_tokens == 100 && f.ranks == 2 && f.total_tokens == 130 && f.summed,
          "server_info summed: %llu x %u", (unsigned long long)f.total_tokens, f.ranks);
    CHECK(answer(ST_TARGET_ANSWER_SERVER_INFO,
                 "{\"max_total_num_tokens\":100,\"dp_size\":5000,"
                 "\"internal_states\":[{\"memory_usage\":{}}]}",
                 &f) == 0 &&
              f.ranks == 1 && f.total_tokens == 100 && !f.summed,
          "server_info without capacities");
    CHECK(answer(ST_TARGET_ANSWER_SERVER_INFO, "{\"max_total_num_tokens\":100,\"dp_size\":4}",
                 &f) == 0 &&
              f.ranks == 4 && f.total_tokens == 400,
          "server_info dp_size");
    CHECK(answer(ST_TARGET_ANSWER_SERVER_INFO, "{\"max_total_num_tokens\":-1}", &f) == ST_EPARSE,
          "a negative pool");
    CHECK(answer(ST_TARGET_ANSWER_SERVER_INFO,
                 "{\"max_total_num_tokens\":100,\"max_running_requests\":48,"
                 "\"internal_states\":[{\"effective_max_running_requests_per_dp\":32},"
                 "{\"effective_max_running_requests_per_dp\":30}]}",
                 &f) == 0 &&
              f.max_running == 62 && f.running_summed,
          "server_info running limit summed over ranks: %u", f.max_running);
    CHECK(answer(ST_TARGET_ANSWER_SERVER_INFO,
                 "{\"max_total_num_tokens\":100,\"max_running_requests\":48,\"dp_size\":2,"
                 "\"internal_states\":[{},{}]}",
                 &f) == 0 &&
              f.max_running == 96 && !f.running_summed,
          "server_info max_running_requests x ranks: %u", f.max_running);
    CHECK(answer(ST_TARGET_ANSWER_SERVER_INFO,
                 "{\"max_total_num_tokens\":100,\"max_running_requests\":null}", &f) == 0 &&
              f.max_running == 0,
          "server_info running limit unset: unknown");
    CHECK(answer(ST_TARGET_ANSWER_PROPS,
                 "{\"total_slots\":4,\"default_generation_settings\":{\"n_ctx\":8192}}", &f) == 0 &&
              f.total_slots == 4 && f.slot_n_ctx == 8192,
          "props");
    CHECK(answer(ST_TARGET_ANSWER_PROPS, "{\"total_slots\":4294967296}", &f) == ST_EPARSE,
          "props: too many slots");
    CHECK(answer(ST_TARGET_ANSWER_INFO, "{\"model_id\":\"m\"}", &f) == 0 &&
              answer(ST_TARGET_ANSWER_INFO, "{\"model_id\":1}", &f) == ST_EPARSE,
          "info");
    CHECK(answer(ST_TARGET_ANSWER_TOKENIZE, "{\"count\":7,\"tokens\":[1]}", &f) == 0 &&
              f.tokens == 7,
          "tokenize count");
    CHECK(answer(ST_TARGET_ANSWER_TOKENIZE, "{\"tokenize_response\":[1,2,3]}", &f) == 0 &&
              f.tokens == 3,
          "tokenize_response");
    CHECK(answer(ST_TARGET_ANSWER_TOKENIZE, "[{\"id\":1},{\"id\":2}]", &f) == 0 && f.tokens == 2,
          "TGI list");
    CHECK(answer(ST_TARGET_ANSWER_TOKENIZE, "{\"count\":1.5}", &f) == ST_EPARSE &&
              answer(ST_TARGET_ANSWER_PROPS, "[1]", &f) == ST_EPARSE && f.total_slots == 0,
          "no count");
}

int main(void)
{
    servetune = getenv("SERVETUNE");
    verbose = getenv("ST_TARGET_VERBOSE") != NULL;
    if (!servetune || access(servetune, X_OK) != 0) {
        fprintf(stderr, "test_target: SERVETUNE must name the servetune binary\n");
        return 1;
    }
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/st-target-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(profile, sizeof(profile), "%s/tiny.yaml", tmpdir);
    FILE *f = fopen(profile, "w");
    if (!f || fputs(tiny_profile, f) < 0 || fclose(f) != 0) {
        perror(profile);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    uint64_t t0 = st_clock_mono_ns();
    test_counters_pure();
    test_answers_pure();
    test_vllm();
    test_sglang();
    test_llamacpp();
    test_fixed();
    test_fake_tgi();
    test_fake_trtllm();
    test_fake_old_sglang();
    test_fake_hostile();
    unlink(profile);
    rmdir(tmpdir);
    printf("test_target: %d checks, %d failed, %.1f s\n", checks, failures,
           (double)(st_clock_mono_ns() - t0) / 1e9);
    return failures ? 1 : 0;
}
