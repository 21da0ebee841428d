/*
 * e2e: src/campaign/watch.c against `servetune sim` ($SERVETUNE) in model mode
 * (profiles/seed000-vl-mtp.yaml at --speed 200: MTP 2, so the vLLM dialect exposes the
 * speculative counters) while a `servetune bench` child loads it, with the fake nvidia-smi of
 * tests/data/campaign: samples answered, the summary's acceptance rate and length and prefix hit
 * rate equal to the counter deltas of our own scrapes before and after (the watch sums the
 * deltas between its samples, which telescope), the KV usage peak in [0, 1], the GPU peak from
 * the fake CSV, one watch.jsonl line per sample. Then the SGLang dialect (acceptance length from
 * its gauge, no acceptance rate), and a hanging nvidia-smi, killed at its 5 s limit. About 10 s.
 */
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "campaign/watch.h"
#include "proto/prom.h"
#include "target/server.h"

static int checks, failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        checks++;                                                                                  \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

static const char *servetune;
static char tmpdir[256];

struct sim {
    pid_t pid;
    char url[96];
};

/* Starts `servetune sim ARGS --listen 127.0.0.1:0` with stdout to a file (a pipe nobody reads
 * could block it), and waits up to 10 s for its "listening on HOST:PORT" line, then up to 10 s
 * for /health (model mode loads first). */
static int sim_start(struct sim *s, const char *name, const char *const *args)
{
    char out[512];
    snprintf(out, sizeof(out), "%s/%s.out", tmpdir, name);
    char *argv[32];
    int n = 0;
    argv[n++] = (char *)servetune;
    argv[n++] = (char *)"sim";
    for (int i = 0; args[i] && n < 28; i++) {
        argv[n++] = (char *)args[i];
    }
    argv[n++] = (char *)"--listen";
    argv[n++] = (char *)"127.0.0.1:0";
    argv[n] = NULL;
    memset(s, 0, sizeof(*s));
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fd);
    if (pid < 0) {
        return -1;
    }
    setpgid(pid, pid);
    s->pid = pid;
    uint64_t end = st_clock_mono_ns() + 10 * ST_NS_PER_S;
    while (st_clock_mono_ns() < end && !s->url[0]) {
        FILE *f = fopen(out, "r");
        char line[512];
        while (f && fgets(line, sizeof(line), f)) {
            char addr[64];
            const char *at = strstr(line, "listening on ");
            if (at && sscanf(at, "listening on %63s", addr) == 1) {
                snprintf(s->url, sizeof(s->url), "http://%s", addr);
            }
        }
        if (f) {
            fclose(f);
        }
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    if (!s->url[0]) {
        fprintf(stderr, "sim %s did not say where it listens\n", name);
        return -1;
    }
    struct st_target_cfg tc = {.base_url = s->url};
    struct st_target t;
    st_target_init(&t, &tc);
    int up = 0;
    while (st_clock_mono_ns() < end && !up) {
        up = st_target_health(&t, 1000, NULL, 0) == ST_TARGET_UP;
        if (!up) {
            struct timespec ts = {0, 20000000};
            nanosleep(&ts, NULL);
        }
    }
    st_target_release(&t);
    return up ? 0 : -1;
}

static void sim_stop(struct sim *s)
{
    if (s->pid <= 0) {
        return;
    }
    kill(-s->pid, SIGTERM);
    uint64_t end = st_clock_mono_ns() + 5 * ST_NS_PER_S;
    while (waitpid(s->pid, NULL, WNOHANG) == 0) {
        if (st_clock_mono_ns() > end) {
            kill(-s->pid, SIGKILL);
            waitpid(s->pid, NULL, 0);
            break;
        }
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    s->pid = 0;
}

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
    CHECK(s.oom_kills == 0, "oom kills %llu", (unsigned long long)s.oom_kills);
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
    printf("%d checks, %d failed (watch folders in %s)\n", checks, failures, tmpdir);
    return failures ? 1 : 0;
}
