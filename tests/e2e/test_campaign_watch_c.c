/*
 * e2e: src/target/watch.c against `servetune sim` ($SERVETUNE) in model mode
 * (profiles/seed000-vl-mtp.yaml at --speed 200: MTP 2, so the vLLM dialect exposes the
 * speculative counters) while a `servetune bench` child loads it, with the fake nvidia-smi of
 * tests/data/campaign: samples answered, the summary's acceptance rate and length and prefix hit
 * rate equal to the counter deltas of our own scrapes before and after (the watch sums the
 * deltas between its samples, which telescope), the KV usage peak in [0, 1], the GPU peak from
 * the fake CSV, one watch.jsonl line per sample. Then the SGLang dialect (acceptance length from
 * its gauge, no acceptance rate), a hanging nvidia-smi, killed at its 5 s limit, and a scripted
 * /metrics server on loopback whose counters restart and whose scrape fails once, against sums
 * worked out by hand. About 10 s.
 */
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "base/buf.h"
#include "base/clock.h"
#include "proto/prom.h"
#include "target/server.h"
#include "target/watch.h"

#include "e2e_sim.h"

/* The server's counters now, read as the watch reads them. */
static int counters(const char *url, struct st_target_counters *c)
{
    struct st_target_cfg tc = {.base_url = url};
    struct st_target t;
    st_target_init(&t, &tc);
    struct st_prom m;
    st_prom_init(&m);
    char err[256];
    int rc = st_target_metrics(&t, &m, err, sizeof(err));
    if (rc == 0) {
        st_target_counters_read(&m, c);
    }
    st_prom_release(&m);
    st_target_release(&t);
    return rc;
}

/* Runs `servetune bench` against url (output to /dev/null) while ticking w every 10 ms. */
static void load_while_watching(const char *url, struct st_watch *w)
{
    char *argv[] = {(char *)servetune, "bench",         "--url", (char *)url,    "--workload",
                    "fixed",           "--input-len",   "256",   "--output-len", "64",
                    "--ignore-eos",    "--concurrency", "1",     "--requests",   "6",
                    "--quiet",         "--no-progress", NULL};
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_RDWR);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    CHECK(pid > 0, "fork");
    int st = 0;
    uint64_t end = st_clock_mono_ns() + 60 * ST_NS_PER_S;
    while (pid > 0 && waitpid(pid, &st, WNOHANG) == 0) {
        CHECK(st_watch_tick(w, st_clock_mono_ns()) == 0, "no OOM on this host during the test");
        if (st_clock_mono_ns() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            break;
        }
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "bench exit status %d", st);
}

static int count_lines(const char *path, const char *needle, int *with)
{
    FILE *f = fopen(path, "r");
    int n = 0;
    *with = 0;
    char line[8192];
    while (f && fgets(line, sizeof(line), f)) {
        n++;
        *with += strstr(line, needle) != NULL;
    }
    if (f) {
        fclose(f);
    }
    return n;
}

static void watch_vllm(const char *url, const char *smi)
{
    char dir[400];
    snprintf(dir, sizeof(dir), "%s/vllm", tmpdir);
    mkdir(dir, 0755);
    struct st_target_counters c0, c1;
    CHECK(counters(url, &c0) == 0, "scrape before");
    struct st_watch_cfg cfg = {.url = url, .dir = dir, .nvidia_smi = smi, .interval_s = 0.02};
    struct st_watch *w = NULL;
    char err[256];
    CHECK(st_watch_new(&cfg, &w, err, sizeof(err)) == 0, "watch: %s", err);
    if (!w) {
        return;
    }
    load_while_watching(url, w);
    struct st_watch_summary s;
    st_watch_finish(w, &s);
    st_watch_free(w);
    CHECK(counters(url, &c1) == 0, "scrape after");
    CHECK(s.samples >= 2 && s.scrape_errors == 0, "samples %u errors %u", s.samples,
          s.scrape_errors);
    CHECK((c1.have & ST_TARGET_HAVE_SPEC) && (c1.have & ST_TARGET_HAVE_SPEC_DRAFTS),
          "the MTP profile's vLLM dialect exposes the speculative counters");
    double acc = c1.spec_accepted_tokens - c0.spec_accepted_tokens;
    double draft = c1.spec_draft_tokens - c0.spec_draft_tokens;
    double drafts = c1.spec_drafts - c0.spec_drafts;
    CHECK(draft > 0, "drafted %g", draft);
    if (draft > 0 && drafts > 0) {
        CHECK(fabs(s.spec_accept_rate - acc / draft) < 1e-12, "rate %g vs %g", s.spec_accept_rate,
              acc / draft);
        CHECK(s.spec_accept_rate > 0 && s.spec_accept_rate <= 1, "rate %g", s.spec_accept_rate);
        /* MTP 2: at most 2 draft tokens accepted a step, so 1 to 3 tokens a step. */
        CHECK(fabs(s.spec_accept_len - (1 + acc / drafts)) < 1e-12 && s.spec_accept_len >= 1 &&
                  s.spec_accept_len <= 3,
              "length %g", s.spec_accept_len);
    }
    double q = c1.prefix_query_tokens - c0.prefix_query_tokens;
    double h = c1.prefix_hit_tokens - c0.prefix_hit_tokens;
    CHECK(q > 0 && fabs(s.prefix_hit_rate - h / q) < 1e-12, "hit rate %g vs %g / %g",
          s.prefix_hit_rate, h, q);
    CHECK(s.kv_usage_max >= 0 && s.kv_usage_max <= 1, "kv usage %g", s.kv_usage_max);
    CHECK(s.gpu_mem_max_bytes == 81234ull * 1048576 && s.n_gpus == 2 && s.gpu_temp_max_c == 64,
          "gpus: %llu bytes, %u, %g C", (unsigned long long)s.gpu_mem_max_bytes, s.n_gpus,
          s.gpu_temp_max_c);
    CHECK(s.oom_kills == 0, "oom kills %lld", (long long)s.oom_kills);
    char path[500];
    snprintf(path, sizeof(path), "%s/watch.jsonl", dir);
    int ok_lines = 0;
    int n = count_lines(path, "\"metrics\":{\"ok\":true", &ok_lines);
    CHECK(n == (int)s.samples && ok_lines == n, "%d lines, %d answered", n, ok_lines);
    struct stat stt;
    CHECK(stat(path, &stt) == 0 && (stt.st_mode & 0777) == 0644, "mode %o", stt.st_mode & 0777);
    struct st_buf js;
    st_buf_init(&js);
    st_watch_summary_json(&s, &js);
    CHECK(strstr(st_buf_str(&js), "\"gpu_mem_max_bytes\":85180022784") != NULL, "%s",
          st_buf_str(&js));
    st_buf_release(&js);
}

static void watch_sglang(const char *url)
{
    char dir[400];
    snprintf(dir, sizeof(dir), "%s/sglang", tmpdir);
    mkdir(dir, 0755);
    struct st_watch_cfg cfg = {.url = url, .dir = dir, .nvidia_smi = "", .interval_s = 0.02};
    struct st_watch *w = NULL;
    char err[256];
    CHECK(st_watch_new(&cfg, &w, err, sizeof(err)) == 0, "watch: %s", err);
    if (!w) {
        return;
    }
    load_while_watching(url, w);
    struct st_watch_summary s;
    st_watch_finish(w, &s);
    st_watch_free(w);
    CHECK(s.samples >= 2 && s.scrape_errors == 0, "samples %u", s.samples);
    /* SGLang has no acceptance counters, only its mean acceptance length gauge. */
    CHECK(s.spec_accept_rate == -1, "rate %g", s.spec_accept_rate);
    CHECK(s.spec_accept_len >= 1 && s.spec_accept_len <= 3, "length %g", s.spec_accept_len);
    CHECK(s.kv_usage_max >= 0 && s.kv_usage_max <= 1, "kv usage %g", s.kv_usage_max);
    CHECK(s.n_gpus == 0 && s.gpu_mem_max_bytes == 0, "nvidia-smi disabled");
}

static void watch_hanging_smi(const char *url, const char *smi)
{
    char dir[400];
    snprintf(dir, sizeof(dir), "%s/hang", tmpdir);
    mkdir(dir, 0755);
    setenv("FAKE_NVSMI", "hang", 1);
    struct st_watch_cfg cfg = {
        .url = url, .dir = dir, .nvidia_smi = smi, .vmstat = "", .interval_s = 60};
    struct st_watch *w = NULL;
    char err[256];
    uint64_t t0 = st_clock_mono_ns();
    CHECK(st_watch_new(&cfg, &w, err, sizeof(err)) == 0, "watch: %s", err);
    double took = (double)(st_clock_mono_ns() - t0) / 1e9;
    unsetenv("FAKE_NVSMI");
    CHECK(took >= 4.9 && took < 7, "a hanging nvidia-smi is killed after 5 s (%.2f s)", took);
    if (w) {
        st_watch_free(w);
    }
    char path[500];
    snprintf(path, sizeof(path), "%s/watch.jsonl", dir);
    int with = 0;
    int n = count_lines(path, "\"gpu_error\":", &with);
    CHECK(n == 1 && with == 1, "%d lines, %d with gpu_error", n, with);
}

/* ---- a scripted /metrics server: one answer a connection, in order, the last repeated ---- */

struct script {
    int fd;                    /* listening socket */
    const char *const *bodies; /* NULL body: answer 500 */
    int n, next;
    volatile int stop;
};

static void *script_main(void *arg)
{
    struct script *sc = arg;
    while (!sc->stop) {
        int c = accept(sc->fd, NULL, NULL);
        if (c < 0) {
            continue;
        }
        char req[4096];
        size_t got = 0;
        while (got < sizeof(req) - 1) {
            ssize_t k = read(c, req + got, sizeof(req) - 1 - got);
            if (k <= 0) {
                break;
            }
            got += (size_t)k;
            req[got] = '\0';
            if (strstr(req, "\r\n\r\n")) {
                break;
            }
        }
        int i = sc->next < sc->n ? sc->next++ : sc->n - 1;
        const char *body = sc->bodies[i];
        char head[256];
        int hl = snprintf(head, sizeof(head),
                          "HTTP/1.1 %s\r\nContent-Type: text/plain; version=0.0.4\r\n"
                          "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                          body ? "200 OK" : "500 Internal Server Error", body ? strlen(body) : 0);
        ssize_t w = write(c, head, (size_t)hl);
        if (body && w > 0) {
            w = write(c, body, strlen(body));
        }
        (void)w;
        close(c);
    }
    return NULL;
}

#define VLLM_SCRAPE(acc, draft, drafts, hits, queries, waiting, kv, pre)                           \
    "# TYPE vllm:spec_decode_num_accepted_tokens_total counter\n"                                  \
    "vllm:spec_decode_num_accepted_tokens_total " acc "\n"                                         \
    "vllm:spec_decode_num_draft_tokens_total " draft "\n"                                          \
    "vllm:spec_decode_num_drafts_total " drafts "\n"                                               \
    "vllm:prefix_cache_hits_total " hits "\n"                                                      \
    "vllm:prefix_cache_queries_total " queries "\n"                                                \
    "vllm:num_requests_waiting " waiting "\n"                                                      \
    "vllm:kv_cache_usage_perc " kv "\n"                                                            \
    "vllm:num_preemptions_total " pre "\n"

static void watch_scripted(void)
{
    /* Five scrapes: s0, s1, a 500, s2 (the server restarted: every counter below s1), s3.
     * Increases: s0->s1 (10, 20, 10, 50, 100, preempt 2); s1->s2 restart: s2's values (3, 4, 2,
     * 0, 10, 0); s2->s3 (5, 6, 3, 10, 20, 1). Sums: accepted 18, drafted 30 -> rate 0.6;
     * drafts 15 -> length 1 + 18 / 15 = 2.2; hits 60 / queries 130; preemptions 3. Peaks:
     * waiting 3, KV 0.5. */
    static const char *const bodies[] = {
        VLLM_SCRAPE("0", "0", "0", "0", "0", "0", "0.1", "0"),
        VLLM_SCRAPE("10", "20", "10", "50", "100", "3", "0.5", "2"),
        NULL,
        VLLM_SCRAPE("3", "4", "2", "0", "10", "1", "0.2", "0"),
        VLLM_SCRAPE("8", "10", "5", "10", "30", "0", "0.3", "1"),
    };
    struct script sc = {.bodies = bodies, .n = 5};
    sc.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    CHECK(sc.fd >= 0 && bind(sc.fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
              listen(sc.fd, 8) == 0 && getsockname(sc.fd, (struct sockaddr *)&sa, &sl) == 0,
          "scripted server socket");
    pthread_t th;
    CHECK(pthread_create(&th, NULL, script_main, &sc) == 0, "thread");
    char url[64], dir[400];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));
    snprintf(dir, sizeof(dir), "%s/scripted", tmpdir);
    mkdir(dir, 0755);
    struct st_watch_cfg cfg = {
        .url = url, .dir = dir, .nvidia_smi = "", .vmstat = "", .interval_s = 1};
    struct st_watch *w = NULL;
    char err[256];
    CHECK(st_watch_new(&cfg, &w, err, sizeof(err)) == 0, "watch: %s", err);
    if (w) {
        uint64_t t = st_clock_mono_ns();
        st_watch_tick(w, t + 2 * ST_NS_PER_S);
        st_watch_tick(w, t + 2 * ST_NS_PER_S + 1); /* within the interval: no scrape */
        st_watch_tick(w, t + 4 * ST_NS_PER_S);
        st_watch_tick(w, t + 6 * ST_NS_PER_S);
        struct st_watch_summary s;
        st_watch_finish(w, &s);
        st_watch_free(w);
        CHECK(s.samples == 4 && s.scrape_errors == 1, "samples %u errors %u", s.samples,
              s.scrape_errors);
        CHECK(fabs(s.spec_accept_rate - 0.6) < 1e-12, "rate %.17g", s.spec_accept_rate);
        CHECK(fabs(s.spec_accept_len - 2.2) < 1e-12, "length %.17g", s.spec_accept_len);
        CHECK(fabs(s.prefix_hit_rate - 60.0 / 130.0) < 1e-12, "hit rate %.17g", s.prefix_hit_rate);
        CHECK(s.preemptions == 3, "preemptions %llu", (unsigned long long)s.preemptions);
        CHECK(s.waiting_max == 3, "waiting %llu", (unsigned long long)s.waiting_max);
        CHECK(fabs(s.kv_usage_max - 0.5) < 1e-12, "kv %g", s.kv_usage_max);
        char path[500];
        snprintf(path, sizeof(path), "%s/watch.jsonl", dir);
        int failed = 0;
        int n = count_lines(path, "\"ok\":false", &failed);
        CHECK(n == 5 && failed == 1, "%d lines, %d failed", n, failed);
    }
    sc.stop = 1;
    /* Wake the accept with one last connection. */
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c >= 0 && connect(c, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        char buf[512];
        ssize_t k = write(c, "GET / HTTP/1.1\r\n\r\n", 18);
        while (k > 0 && (k = read(c, buf, sizeof(buf))) > 0) {
        }
    }
    if (c >= 0) {
        close(c);
    }
    pthread_join(th, NULL);
    close(sc.fd);
}

int main(void)
{
    servetune = getenv("SERVETUNE");
    const char *e2e = getenv("ST_E2E_DIR");
    const char *data = getenv("ST_TEST_DATA");
    if (!servetune || !e2e || !data) {
        fprintf(stderr, "SERVETUNE, ST_E2E_DIR and ST_TEST_DATA must be set\n");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/st-watch-e2e-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    char profile[600], smi[600];
    snprintf(profile, sizeof(profile), "%s/../../profiles/seed000-vl-mtp.yaml", e2e);
    snprintf(smi, sizeof(smi), "%s/campaign/fake-nvidia-smi", data);
    struct sim vllm, sglang;
    const char *vllm_args[] = {"--profile", profile, "--speed", "200", NULL};
    const char *sglang_args[] = {"--profile", profile,  "--speed", "200",
                                 "--dialect", "sglang", NULL};
    if (sim_start(&vllm, "vllm", vllm_args) == 0) {
        watch_vllm(vllm.url, smi);
        watch_hanging_smi(vllm.url, smi);
    } else {
        CHECK(0, "vLLM-dialect sim");
    }
    if (sim_start(&sglang, "sglang", sglang_args) == 0) {
        watch_sglang(sglang.url);
    } else {
        CHECK(0, "SGLang-dialect sim");
    }
    sim_stop(&vllm);
    sim_stop(&sglang);
    watch_scripted();
    printf("%d checks, %d failed (watch folders in %s)\n", checks, failures, tmpdir);
    return failures ? 1 : 0;
}
