/*
 * e2e: src/target/arm.c against real children on 127.0.0.1: `servetune sim` ($SERVETUNE) with
 * profiles/seed000-vl-mtp.yaml at --speed 1000 (its 180 s start-up takes 0.18 s), and /bin/sh
 * command targets. Checks: a sim arm comes up healthy with the KV capacity `sim --explain --json`
 * computes (read from the start-up log), its context and a configuration check, in the vLLM,
 * SGLang (seed 003's profile: tp/pp/DP from server info) and llama.cpp dialects; st_arm_check
 * says ok, then exit once the child is killed; stop by SIGTERM; a sim killed with the runner
 * (PR_SET_PDEATHSIG); an arm that does not fit memory fails "oom" quoting the engine's line; a
 * command target comes up and stops by its signal; a command running another configuration than
 * the arm's fails "config"; a command that exits at once fails "start"; a health URL that never
 * answers fails "health" within the plan's timeout; a template naming a parameter the arm lacks
 * is our error (ST_EUSAGE) with nothing left running; a cancel while waiting for health gives
 * ST_EINTERRUPTED at once with the group stopped; url targets with and without an operator;
 * a command server outlives a runner killed with SIGKILL and is stopped as a leftover group
 * (refused when the leader's start time differs); save_state then restore proves the sim's baseline
 * (restored true) and catches a KV capacity that differs (restored false); a command's restore
 * leaves the baseline running detached; the compose kind through
 * the fake docker CLI (tests/support/fake-docker): an arm up with its KV from docker logs and
 * checks from /metrics and /v1/models, check, stop, an arm that does not fit (oom), and the restore
 * proven. Each case is bounded by a few seconds.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/json.h"
#include "campaign/plan.h"
#include "target/arm.h"

#include "check.h"

/* The lifecycle's view of a parsed plan (target/arm.h): its target and parameter sets, borrowed. */
#define ARM_PLAN(p) (&(struct st_arm_plan){&(p)->target, &(p)->baseline, &(p)->fixed})

static int checks, failures;

static const char *servetune;
static int verbose; /* ST_ARM_VERBOSE set: print each evidence object */

static void show(const char *what, const struct st_buf *b)
{
    if (verbose) {
        printf("%s: %s\n", what, st_buf_str(b));
    }
}
static char profile[4096];
static char tmpdir[256];

static double now_s(void)
{
    return (double)st_clock_mono_ns() / 1e9;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A port that was free a moment ago (bound on 127.0.0.1:0, then closed). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        perror("free_port");
        exit(1);
    }
    close(fd);
    return ntohs(a.sin_port);
}

/* kv_pool_tokens of `servetune sim --profile PROFILE --explain --json` with one --set. */
static uint64_t explain_kv(const char *set)
{
    char cmd[8192];
    snprintf(cmd, sizeof(cmd), "'%s' sim --profile '%s' %s%s --explain --json", servetune, profile,
             set ? "--set " : "", set ? set : "");
    FILE *f = popen(cmd, "r");
    struct st_buf b;
    char chunk[4096];
    size_t n;
    st_buf_init(&b);
    while (f && (n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        st_buf_append(&b, chunk, n);
    }
    if (f) {
        pclose(f);
    }
    struct st_json d;
    int64_t kv = 0;
    st_json_init(&d, 0);
    if (st_json_parse(&d, st_buf_str(&b), b.len) != 0 ||
        st_json_i64(&d, st_json_get(&d, 0, "kv_pool_tokens"), &kv) != 0) {
        kv = 0;
    }
    st_json_release(&d);
    st_buf_release(&b);
    return (uint64_t)kv;
}

/* An integer member of the evidence object. */
static int64_t json_int(const struct st_buf *b, const char *key)
{
    struct st_json d;
    int64_t v = -1;
    st_json_init(&d, 0);
    if (st_json_parse(&d, st_buf_str(b), b->len) != 0 ||
        st_json_i64(&d, st_json_get(&d, 0, key), &v) != 0) {
        v = -1;
    }
    st_json_release(&d);
    return v;
}

static int json_valid(const struct st_buf *b)
{
    struct st_json d;
    st_json_init(&d, 0);
    int ok = st_json_parse(&d, st_buf_str(b), b->len) == 0 && st_json_type(&d, 0) == ST_JSON_OBJECT;
    st_json_release(&d);
    return ok;
}

/* Whether pid is gone or a zombie. */
static int dead(pid_t pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) {
        return 1;
    }
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

static void parse_plan(const char *text, struct st_plan *p)
{
    char err[512] = "";
    if (st_plan_parse("t.yaml", text, strlen(text), p, err, sizeof(err)) != 0) {
        fprintf(stderr, "plan: %s\n%s\n", err, text);
        exit(1);
    }
}

static const char stages[] = "stages:\n"
                             "  screening: [{id: dec, kind: bench, output_tokens: 64}]\n"
                             "  full:\n"
                             "    - {id: long, kind: bench, output_tokens: 16384}\n"
                             "    - {id: mixed, kind: soak, duration_s: 600}\n"
                             "rules: {metrics: [{metric: dec.decode_tps}]}\n";

/* The sim plan: baseline as the profile has it, an arm that does not fit memory, one MTP 3. */
static void sim_plan(struct st_plan *p)
{
    char text[8192];
    snprintf(text, sizeof(text),
             "name: t\n"
             "target: {kind: sim, profile: '%s', health_timeout_s: 20}\n"
             "baseline: {engine.spec_steps: 2, engine.mem_fraction: 0.985}\n"
             "fixed: {engine.context_length: 131072, model_revision: 918b78a}\n"
             "arms:\n"
             "  - {name: oom, set: {engine.mem_fraction: 0.3}}\n"
             "  - {name: mtp3, set: {engine.spec_steps: 3}}\n"
             "%s",
             profile, stages);
    parse_plan(text, p);
}

/* The baseline's full set: arm oom's with the baseline's memory fraction. */
static void baseline_ps(const struct st_plan *p, struct st_target_params *out)
{
    char err[256];
    if (st_plan_arm_params(p, 0, NULL, out, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    for (uint32_t i = 0; i < out->n; i++) {
        if (strcmp(out->v[i].name, "engine.mem_fraction") == 0) {
            free(out->v[i].value);
            out->v[i].value = strdup("0.985");
        }
    }
}

static void env_init(struct st_arm_env *env, const char *sub)
{
    static char dirs[16][512];
    static int n;
    char *d = dirs[n++ % 16];
    snprintf(d, 512, "%s/%s", tmpdir, sub);
    mkdir(d, 0755);
    memset(env, 0, sizeof(*env));
    env->self_exe = servetune;
    env->plan_dir = tmpdir;
    env->dir = d;
    env->sim_speed = 1000;
    env->poll_s = 0.05;
}

static void test_sim_up_check_stop(void)
{
    struct st_plan p;
    struct st_target_params ps;
    struct st_arm_env env;
    struct st_arm_up up;
    struct st_arm_server *s = NULL;
    char err[512] = "", detail[512];
    sim_plan(&p);
    env_init(&env, "sim-baseline");
    st_arm_up_init(&up);
    uint64_t want_kv = explain_kv(NULL);
    CHECK(want_kv > 0, "explain gave no kv_pool_tokens");
    struct st_target_params base = {0};
    baseline_ps(&p, &base);
    double t0 = now_s();
    int rc = st_arm_start(ARM_PLAN(&p), "baseline", &base, &env, &s, &up, err, sizeof(err));
    CHECK(rc == 0 && up.fail == ST_ARM_OK && s, "rc %d fail %s: %s %s", rc,
          st_arm_fail_name(up.fail), err, up.detail);
    CHECK(now_s() - t0 < 5, "start took %.2f s", now_s() - t0);
    show("sim baseline", &up.json);
    CHECK(up.kv_capacity_tokens == want_kv, "kv %llu, explain %llu",
          (unsigned long long)up.kv_capacity_tokens, (unsigned long long)want_kv);
    CHECK(strcmp(up.kv_source, "log") == 0, "kv source %s", up.kv_source);
    CHECK(up.max_context_tokens == 131072, "context %llu",
          (unsigned long long)up.max_context_tokens);
    CHECK(strncmp(up.url, "http://127.0.0.1:", 17) == 0, "url %s", up.url);
    CHECK(json_valid(&up.json), "evidence not JSON: %s", st_buf_str(&up.json));
    const char *j = st_buf_str(&up.json);
    CHECK(strstr(j, "\"unchecked\":[") && strstr(j, "model_revision"), "%s", j);
    CHECK(strstr(j, "\"name\":\"engine.context_length\",\"arm\":\"131072\",\"server\":\"131072\""),
          "%s", j);
    CHECK(strstr(j, "model_revision: not applied by the sim"), "%s", j);
    CHECK(strstr(j, "\"pdeathsig\":true"), "%s", j);
    if (s) {
        pid_t pid = (pid_t)json_int(&up.json, "pid");
        CHECK(st_arm_check(s, detail, sizeof(detail)) == ST_ARM_OK, "%s", detail);
        struct st_buf tail;
        st_buf_init(&tail);
        st_arm_log_tail(s, 4096, &tail);
        CHECK(strstr(st_buf_str(&tail), "listening on"), "tail %s", st_buf_str(&tail));
        st_buf_release(&tail);
        CHECK(pid > 0 && kill(pid, SIGKILL) == 0, "pid %d", (int)pid);
        enum st_arm_fail f = ST_ARM_OK;
        for (int i = 0; i < 200 && f == ST_ARM_OK; i++) {
            f = st_arm_check(s, detail, sizeof(detail));
            sleep_ms(10);
        }
        CHECK(f == ST_ARM_FAIL_EXIT, "check after kill: %s %s", st_arm_fail_name(f), detail);
        CHECK(strstr(detail, "killed by signal 9"), "%s", detail);
        struct st_buf ev;
        st_buf_init(&ev);
        CHECK(st_arm_stop(s, &ev) == 0, "stop");
        CHECK(strstr(st_buf_str(&ev), "\"how\":\"had exited\""), "%s", st_buf_str(&ev));
        st_buf_release(&ev);
    }

    /* mtp3 up, then stopped by SIGTERM. */
    CHECK(st_plan_arm_params(&p, 1, NULL, &ps, err, sizeof(err)) == 0, "%s", err);
    env_init(&env, "sim-mtp3");
    rc = st_arm_start(ARM_PLAN(&p), "mtp3", &ps, &env, &s, &up, err, sizeof(err));
    CHECK(rc == 0 && up.fail == ST_ARM_OK, "mtp3: %s %s", err, up.detail);
    CHECK(up.kv_capacity_tokens == explain_kv("engine.spec_steps=3"), "mtp3 kv %llu",
          (unsigned long long)up.kv_capacity_tokens);
    if (s) {
        pid_t pid = (pid_t)json_int(&up.json, "pid");
        struct st_buf ev;
        st_buf_init(&ev);
        CHECK(st_arm_stop(s, &ev) == 0, "stop");
        CHECK(strstr(st_buf_str(&ev), "\"how\":\"signal\"") &&
                  strstr(st_buf_str(&ev), "\"status\":\"exit status 0\""),
              "%s", st_buf_str(&ev));
        CHECK(dead(pid), "sim %d still there", (int)pid);
        st_buf_release(&ev);
    }
    st_target_params_release(&ps);
    st_target_params_release(&base);
    st_arm_up_release(&up);
    st_plan_release(&p);
}

static void test_sim_oom(void)
{
    struct st_plan p;
    struct st_target_params ps;
    struct st_arm_env env;
    struct st_arm_up up;
    struct st_arm_server *s = NULL;
    char err[512] = "";
    sim_plan(&p);
    env_init(&env, "sim-oom");
    st_arm_up_init(&up);
    CHECK(st_plan_arm_params(&p, 0, NULL, &ps, err, sizeof(err)) == 0, "%s", err);
    double t0 = now_s();
    int rc = st_arm_start(ARM_PLAN(&p), "oom", &ps, &env, &s, &up, err, sizeof(err));
    CHECK(rc == 0 && up.fail == ST_ARM_FAIL_OOM && !s, "rc %d fail %s: %s", rc,
          st_arm_fail_name(up.fail), up.detail);
    CHECK(strstr(up.detail, "No available memory for the cache blocks") &&
              strstr(up.detail, "exit status 1"),
          "%s", up.detail);
    CHECK(now_s() - t0 < 5, "oom took %.2f s", now_s() - t0);
    CHECK(json_valid(&up.json) && strstr(st_buf_str(&up.json), "\"fail\":\"oom\""), "%s",
          st_buf_str(&up.json));
    st_target_params_release(&ps);
    st_arm_up_release(&up);
    st_plan_release(&p);
}

/* SGLang dialect (seed 003's profile, TP2 PP4 on 8 GPUs): the KV pool from the start-up log
 * equals --explain, and tp/pp/memory fraction/DP are checked against GET /get_server_info. */
static void test_sim_sglang(void)
{
    char text[8192], path[4096], err[512] = "";
    struct st_plan p;
    struct st_target_params ps;
    struct st_arm_env env;
    struct st_arm_up up;
    struct st_arm_server *s = NULL;
    snprintf(path, sizeof(path), "%s", profile);
    char *slash = strrchr(path, '/');
    snprintf(slash + 1, sizeof(path) - (size_t)(slash + 1 - path), "seed003-mla-moe-8gpu.yaml");
    snprintf(text, sizeof(text),
             "name: t\n"
             "target: {kind: sim, profile: '%s', health_timeout_s: 20}\n"
             "baseline: {engine.tp: 2, engine.pp: 4, engine.mem_fraction: 0.85, "
             "engine.dp_attention: 1}\n"
             "fixed: {engine.context_length: 1048576}\n"
             "arms:\n"
             "  - {name: tp4pp2, set: {engine.tp: 4, engine.pp: 2, engine.mem_fraction: 0.9},"
             " multi_variable: true}\n"
             "%s",
             path, stages);
    parse_plan(text, &p);
    env_init(&env, "sim-sglang");
    st_arm_up_init(&up);
    CHECK(st_plan_arm_params(&p, 0, NULL, &ps, err, sizeof(err)) == 0, "%s", err);
    int rc = st_arm_start(ARM_PLAN(&p), "tp4pp2", &ps, &env, &s, &up, err, sizeof(err));
    show("sglang", &up.json);
    CHECK(rc == 0 && up.fail == ST_ARM_OK && s, "sglang: rc %d %s %s %s", rc,
          st_arm_fail_name(up.fail), err, up.detail);
    const char *j = st_buf_str(&up.json);
    CHECK(strstr(j, "\"name\":\"engine.tp\",\"arm\":\"4\",\"server\":\"4\",\"source\":\"GET "
                    "/get_server_info tp_size\",\"ok\":true") &&
              strstr(j, "\"name\":\"engine.mem_fraction\",\"arm\":\"0.9\",\"server\":\"0.9\"") &&
              strstr(j, "\"name\":\"engine.dp_attention\",\"arm\":\"1\",\"server\":\"1\""),
          "%s", j);
    CHECK(strcmp(up.kv_source, "log") == 0, "kv source %s", up.kv_source);
    char set[256];
    snprintf(set, sizeof(set), "engine.tp=4 --set engine.pp=2 --set engine.mem_fraction=0.9");
    char saved_profile[4096];
    snprintf(saved_profile, sizeof(saved_profile), "%s", profile);
    snprintf(profile, sizeof(profile), "%s", path);
    uint64_t want = explain_kv(set);
    snprintf(profile, sizeof(profile), "%s", saved_profile);
    CHECK(up.kv_capacity_tokens == want, "kv %llu, explain %llu",
          (unsigned long long)up.kv_capacity_tokens, (unsigned long long)want);
    CHECK(st_arm_stop(s, NULL) == 0, "stop");
    st_target_params_release(&ps);
    st_arm_up_release(&up);
    st_plan_release(&p);
}

/* llama.cpp dialect (an override of the target): the KV pool from its llama_kv_cache line (one
 * slot: with several, the sim's "S/S seqs" reads as S streams), the context from GET /props,
 * engine.max_running checked against what the server states. */
static void test_sim_llamacpp(void)
{
    char text[8192], err[512] = "";
    struct st_plan p;
    struct st_target_params ps;
    struct st_arm_env env;
    struct st_arm_up up;
    struct st_arm_server *s = NULL;
    snprintf(text, sizeof(text),
             "name: t\n"
             "target: {kind: sim, profile: '%s', health_timeout_s: 20,\n"
             "         overrides: {engine.dialect: llamacpp}}\n"
             "baseline: {engine.max_running: 1, engine.context_length: 131072}\n"
             "arms:\n"
             "  - {name: ctx64k, set: {engine.context_length: 65536}}\n"
             "%s",
             profile, stages);
    parse_plan(text, &p);
    env_init(&env, "sim-llamacpp");
    st_arm_up_init(&up);
    CHECK(st_plan_arm_params(&p, 0, NULL, &ps, err, sizeof(err)) == 0, "%s", err);
    int rc = st_arm_start(ARM_PLAN(&p), "ctx64k", &ps, &env, &s, &up, err, sizeof(err));
    show("llamacpp", &up.json);
    CHECK(rc == 0 && up.fail == ST_ARM_OK && s, "llamacpp: rc %d %s %s %s", rc,
          st_arm_fail_name(up.fail), err, up.detail);
    uint64_t want = explain_kv("engine.dialect=llamacpp --set engine.context_length=65536");
    CHECK(strcmp(up.kv_source, "log") == 0 && up.kv_capacity_tokens == want,
          "kv %llu (%s), explain %llu", (unsigned long long)up.kv_capacity_tokens, up.kv_source,
          (unsigned long long)want);
    CHECK(up.max_context_tokens == 65536 &&
              strstr(st_buf_str(&up.json), "\"source\":\"GET /props n_ctx of a slot\""),
          "context %llu", (unsigned long long)up.max_context_tokens);
    CHECK(strstr(st_buf_str(&up.json),
                 "\"name\":\"engine.max_running\",\"arm\":\"1\",\"server\":\"1\"") &&
              strstr(st_buf_str(&up.json), "\"name\":\"engine.context_length\",\"arm\":"
                                           "\"65536\",\"server\":\"65536\""),
          "%s", st_buf_str(&up.json));
    CHECK(st_arm_stop(s, NULL) == 0, "stop");
    st_target_params_release(&ps);
    st_arm_up_release(&up);
    st_plan_release(&p);
}

/* The runner dies (SIGKILL) with a sim up: the sim must die with it. */
static void test_sim_dies_with_runner(void)
{
    int fds[2];
    if (pipe(fds) != 0) {
        perror("pipe");
        exit(1);
    }
    pid_t child = fork();
    if (child == 0) {
        struct st_plan p;
        struct st_target_params ps;
        struct st_arm_env env;
        struct st_arm_up up;
        struct st_arm_server *s = NULL;
        char err[512];
        close(fds[0]);
        sim_plan(&p);
        env_init(&env, "sim-orphan");
        st_arm_up_init(&up);
        pid_t pid = 0;
        if (st_plan_arm_params(&p, 1, NULL, &ps, err, sizeof(err)) == 0 &&
            st_arm_start(ARM_PLAN(&p), "mtp3", &ps, &env, &s, &up, err, sizeof(err)) == 0 && s) {
            pid = (pid_t)json_int(&up.json, "pid");
        }
        if (write(fds[1], &pid, sizeof(pid)) != (ssize_t)sizeof(pid)) {
            _exit(1);
        }
        kill(getpid(), SIGKILL);
        _exit(1);
    }
    close(fds[1]);
    pid_t pid = 0;
    ssize_t n = read(fds[0], &pid, sizeof(pid));
    close(fds[0]);
    waitpid(child, NULL, 0);
    CHECK(n == (ssize_t)sizeof(pid) && pid > 0, "no sim pid from the runner child");
    int gone = 0;
    for (int i = 0; i < 300 && pid > 0 && !(gone = dead(pid)); i++) {
        sleep_ms(10);
    }
    CHECK(gone, "sim %d outlived its runner", (int)pid);
    if (pid > 0 && !gone) {
        kill(pid, SIGKILL);
    }
}

static double cancel_at;

static int cancel_after(void *ctx)
{
    (void)ctx;
    return now_s() >= cancel_at;
}

/* A command plan: start template, base and health URLs on port, health timeout. */
static void command_plan(struct st_plan *p, const char *start, int port, double health_s)
{
    char text[8192];
    snprintf(text, sizeof(text),
             "name: t\n"
             "target:\n"
             "  kind: command\n"
             "  start: \"%s\"\n"
             "  stop_signal: INT\n"
             "  stop_timeout_s: 1\n"
             "  base_url: http://127.0.0.1:%d\n"
             "  health_url: http://127.0.0.1:%d/health\n"
             "  health_timeout_s: %g\n"
             "baseline: {engine.spec_steps: 2}\n"
             "fixed: {engine.context_length: 131072}\n"
             "arms:\n"
             "  - {name: mtp3, set: {engine.spec_steps: 3}}\n"
             "%s",
             start, port, port, health_s, stages);
    parse_plan(text, p);
}

static void test_command(void)
{
    struct st_plan p;
    struct st_target_params ps;
    struct st_arm_env env;
    struct st_arm_up up;
    struct st_arm_server *s = NULL;
    char err[512] = "", start[6000];
    int port = free_port();
    st_arm_up_init(&up);

    /* Up and stopped by its signal (INT). */
    snprintf(start, sizeof(start),
             "exec '%s' sim --profile '%s' --speed 1000 --listen 127.0.0.1:%d --set "
             "engine.spec_steps={engine.spec_steps} --set "
             "engine.context_length={engine.context_length}",
             servetune, profile, port);
    command_plan(&p, start, port, 20);
    env_init(&env, "cmd-up");
    CHECK(st_plan_arm_params(&p, 0, NULL, &ps, err, sizeof(err)) == 0, "%s", err);
    int rc = st_arm_start(ARM_PLAN(&p), "mtp3", &ps, &env, &s, &up, err, sizeof(err));
    CHECK(rc == 0 && up.fail == ST_ARM_OK && s, "command: rc %d %s %s", rc, err, up.detail);
    show("command", &up.json);
    CHECK(up.kv_capacity_tokens == explain_kv("engine.spec_steps=3"), "kv %llu",
          (unsigned long long)up.kv_capacity_tokens);
    CHECK(strstr(st_buf_str(&up.json), "\"pdeathsig\":false"), "%s", st_buf_str(&up.json));
    if (s) {
        pid_t pgid = (pid_t)json_int(&up.json, "pgid");
        CHECK(pgid > 0 && pgid != getpgrp(), "pgid %d", (int)pgid);
        char detail[512];
        CHECK(st_arm_check(s, detail, sizeof(detail)) == ST_ARM_OK, "%s", detail);
        struct st_buf ev;
        st_buf_init(&ev);
        CHECK(st_arm_stop(s, &ev) == 0, "stop: %s", st_buf_str(&ev));
        CHECK(strstr(st_buf_str(&ev), "\"how\":\"signal\",\"signal\":\"INT\""), "%s",
              st_buf_str(&ev));
        CHECK(kill(-pgid, 0) != 0, "group %d still there", (int)pgid);
        st_buf_release(&ev);
    }
    st_target_params_release(&ps);
    st_plan_release(&p);

    /* A group member that ignores the stop signal: SIGKILL after stop_timeout_s (1 s). */
    port = free_port();
    snprintf(start, sizeof(start),
             "trap '' INT; '%s' sim --profile '%s' --speed 1000 --listen 127.0.0.1:%d --set "
             "engine.spec_steps={engine.spec_steps} & sleep 30",
             servetune, profile, port);
    command_plan(&p, start, port, 20);
    env_init(&env, "cmd-kill");
    CHECK(st_plan_arm_params(&p, 0, NULL, &ps, err, sizeof(err)) == 0, "%s", err);
    rc = st_arm_start(ARM_PLAN(&p), "mtp3", &ps, &env, &s, &up, err, sizeof(err));
    CHECK(rc == 0 && up.fail == ST_ARM_OK && s, "command: rc %d %s %s", rc, err, up.detail);
    if (s) {
        pid_t pgid = (pid_t)json_int(&up.json, "pgid");
        struct st_buf ev;
        st_buf_init(&ev);
        double t0 = now_s();
        CHECK(st_arm_stop(s, &ev) == ST_ETIMEOUT, "stop: %s", st_buf_str(&ev));
        CHECK(now_s() - t0 >= 1 && now_s() - t0 < 3, "stop took %.2f s", now_s() - t0);
        CHECK(strstr(st_buf_str(&ev), "\"how\":\"killed\""), "%s", st_buf_str(&ev));
        for (int i = 0; i < 100 && kill(-pgid, 0) == 0; i++) {
            sleep_ms(10); /* members die of SIGKILL; init reaps them */
        }
        st_buf_release(&ev);
    }
    st_target_params_release(&ps);
    st_plan_release(&p);

    /* Another configuration than the arm's: the command forces a 64K context. */
    port = free_port();
    snprintf(start, sizeof(start),
             "exec '%s' sim --profile '%s' --speed 1000 --listen 127.0.0.1:%d --set "
             "engine.context_length=65536 --set engine.spec_steps={engine.spec_steps}",
             servetune, profile, port);
    command_plan(&p, start, port, 20);
    env_init(&env, "cmd-config");
    CHECK(st_plan_arm_params(&p, 0, NULL, &ps, err, sizeof(err)) == 0, "%s", err);
    rc = st_arm_start(ARM_PLAN(&p), "mtp3", &ps, &env, &s, &up, err, sizeof(err));
    CHECK(rc == 0 && up.fail == ST_ARM_FAIL_CONFIG && !s, "config: rc %d %s %s", rc,
          st_arm_fail_name(up.fail), up.detail);
    CHECK(strstr(up.detail, "engine.context_length is 131072 for the arm but 65536 on the server"),
          "%s", up.detail);
    CHECK(json_int(&up.json, "pgid") > 0 && kill(-(pid_t)json_int(&up.json, "pgid"), 0) != 0,
          "the config-failed server was left running");
    st_target_params_release(&ps);
    st_plan_release(&p);

    /* Exits at once. */
    command_plan(&p, "echo boom; exit 3", free_port(), 20);
    env_init(&env, "cmd-exit");
    CHECK(st_plan_arm_params(&p, 0, NULL, &ps, err, sizeof(err)) == 0, "%s", err);
    double t0 = now_s();
    rc = st_arm_start(ARM_PLAN(&p), "mtp3", &ps, &env, &s, &up, err, sizeof(err));
    CHECK(rc == 0 && up.fail == ST_ARM_FAIL_START && !s, "exit: %s %s", st_arm_fail_name(up.fail),
          up.detail);
    CHECK(strstr(up.detail, "exit status 3") && strstr(up.detail, "boom"), "%s", up.detail);
    CHECK(now_s() - t0 < 3, "took %.2f s", now_s() - t0);
    st_target_params_release(&ps);
    st_plan_release(&p);

    /* Health never answers: nothing listens on the port. */
    command_plan(&p, "exec sleep 30 # {engine.spec_steps}", free_port(), 1);
    env_init(&env, "cmd-health");
    CHECK(st_plan_arm_params(&p, 0, NULL, &ps, err, sizeof(err)) == 0, "%s", err);
    t0 = now_s();
    rc = st_arm_start(ARM_PLAN(&p), "mtp3", &ps, &env, &s, &up, err, sizeof(err));
    double took = now_s() - t0;
    CHECK(rc == 0 && up.fail == ST_ARM_FAIL_HEALTH && !s, "health: %s %s",
          st_arm_fail_name(up.fail), up.detail);
    CHECK(took >= 1 && took < 4, "health timeout took %.2f s", took);
    CHECK(strstr(up.detail, "did not answer 200"), "%s", up.detail);
    CHECK(json_int(&up.json, "pgid") > 0 && kill(-(pid_t)json_int(&up.json, "pgid"), 0) != 0,
          "sleep left running");

    st_target_params_release(&ps);
    st_plan_release(&p);

    /* Cancelled while waiting for health (the runner's stop request): ST_EINTERRUPTED within a
     * poll, the group stopped, although health_timeout_s is 20 s. */
    command_plan(&p, "exec sleep 30 # {engine.spec_steps}", free_port(), 20);
    env_init(&env, "cmd-cancel");
    env.cancel_fn = cancel_after;
    cancel_at = now_s() + 0.3;
    CHECK(st_plan_arm_params(&p, 0, NULL, &ps, err, sizeof(err)) == 0, "%s", err);
    t0 = now_s();
    rc = st_arm_start(ARM_PLAN(&p), "mtp3", &ps, &env, &s, &up, err, sizeof(err));
    took = now_s() - t0;
    CHECK(rc == ST_EINTERRUPTED && !s && strstr(err, "interrupted"), "cancel: rc %d %s", rc, err);
    CHECK(took >= 0.3 && took < 2, "cancel took %.2f s", took);
    CHECK(json_int(&up.json, "pgid") > 0 && kill(-(pid_t)json_int(&up.json, "pgid"), 0) != 0,
          "sleep left running after the cancel");
    CHECK(json_valid(&up.json) && strstr(st_buf_str(&up.json), "\"fail\":\"error\""), "%s",
          st_buf_str(&up.json));

    /* A parameter the arm lacks: our error, nothing started. */
    struct st_target_params none = {0};
    rc = st_arm_start(ARM_PLAN(&p), "x", &none, &env, &s, &up, err, sizeof(err));
    CHECK(rc == ST_EUSAGE && !s, "rc %d", rc);
    st_target_params_release(&ps);
    st_plan_release(&p);
    st_arm_up_release(&up);
}

/* A runner killed with a command server up leaves it running (no PDEATHSIG); the next run stops
 * the leftover group from the evidence's pgid and start_ticks, and refuses other start times. */
static void test_command_leftover(void)
{
    int fds[2];
    int port = free_port();
    if (pipe(fds) != 0) {
        perror("pipe");
        exit(1);
    }
    pid_t child = fork();
    if (child == 0) {
        struct st_plan p;
        struct st_target_params ps;
        struct st_arm_env env;
        struct st_arm_up up;
        struct st_arm_server *s = NULL;
        char err[512], start[6000];
        int64_t ids[2] = {0, 0};
        close(fds[0]);
        snprintf(start, sizeof(start),
                 "exec '%s' sim --profile '%s' --speed 1000 --listen 127.0.0.1:%d --set "
                 "engine.spec_steps={engine.spec_steps}",
                 servetune, profile, port);
        command_plan(&p, start, port, 20);
        env_init(&env, "cmd-leftover");
        st_arm_up_init(&up);
        if (st_plan_arm_params(&p, 0, NULL, &ps, err, sizeof(err)) == 0 &&
            st_arm_start(ARM_PLAN(&p), "mtp3", &ps, &env, &s, &up, err, sizeof(err)) == 0 && s) {
            ids[0] = json_int(&up.json, "pgid");
            ids[1] = json_int(&up.json, "start_ticks");
        }
        if (write(fds[1], ids, sizeof(ids)) != (ssize_t)sizeof(ids)) {
            _exit(1);
        }
        kill(getpid(), SIGKILL);
        _exit(1);
    }
    close(fds[1]);
    int64_t ids[2] = {0, 0};
    ssize_t n = read(fds[0], ids, sizeof(ids));
    close(fds[0]);
    waitpid(child, NULL, 0);
    CHECK(n == (ssize_t)sizeof(ids) && ids[0] > 0 && ids[1] > 0, "no pgid from the runner child");
    if (ids[0] <= 0) {
        return;
    }
    pid_t pgid = (pid_t)ids[0];
    sleep_ms(100);
    CHECK(kill(-pgid, 0) == 0, "the command server died with its runner");
    struct st_buf ev;
    st_buf_init(&ev);
    CHECK(st_arm_stop_leftover(pgid, (uint64_t)ids[1] + 1, SIGTERM, 1, &ev) == ST_ENOTFOUND, "%s",
          st_buf_str(&ev));
    CHECK(kill(-pgid, 0) == 0, "signalled a group with another start time");
    st_buf_clear(&ev);
    CHECK(st_arm_stop_leftover(pgid, (uint64_t)ids[1], SIGTERM, 5, &ev) == 0, "%s",
          st_buf_str(&ev));
    CHECK(strstr(st_buf_str(&ev), "\"how\":\"signal\""), "%s", st_buf_str(&ev));
    st_buf_clear(&ev);
    CHECK(st_arm_stop_leftover(pgid, (uint64_t)ids[1], SIGTERM, 1, &ev) == 0 &&
              strstr(st_buf_str(&ev), "\"how\":\"gone\""),
          "%s", st_buf_str(&ev));
    CHECK(st_arm_stop_leftover(getpgrp(), 0, SIGTERM, 1, NULL) == -EPERM, "own group");
    st_buf_release(&ev);
    for (int i = 0; i < 100 && kill(-pgid, 0) == 0; i++) {
        sleep_ms(10);
    }
    if (kill(-pgid, 0) == 0) {
        kill(-pgid, SIGKILL);
    }
}

/* A listener on 127.0.0.1:port with SO_REUSEPORT, as llama-server binds: a second bind of the
 * port succeeds beside it, so only the listener table shows it (SO_REUSEADDR: the port may hold
 * TIME_WAIT connections of the server stopped before). Returns its fd. */
static int reuseport_listener(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 4) != 0) {
        perror("reuseport_listener");
        exit(1);
    }
    return fd;
}

/* The command plan of the restore and port tests: the sim on port, the baseline's spec_steps. */
static void restore_plan(struct st_plan *p, struct st_target_params *base, int port)
{
    char start[6000], err[512] = "";
    snprintf(start, sizeof(start),
             "exec '%s' sim --profile '%s' --speed 1000 --listen 127.0.0.1:%d --set "
             "engine.spec_steps={engine.spec_steps}",
             servetune, profile, port);
    command_plan(p, start, port, 20);
    CHECK(st_plan_arm_params(p, 0, NULL, base, err, sizeof(err)) == 0, "%s", err);
    for (uint32_t i = 0; i < base->n; i++) {
        if (strcmp(base->v[i].name, "engine.spec_steps") == 0) {
            free(base->v[i].value);
            base->v[i].value = strdup("2");
        }
    }
}

/* command, nothing on the port at the start: the starting state says so ("running": false); the
 * restore starts the baseline, stops it and proves the port free (restored true). With a server
 * on the port at the start ("running": true, its pid), the restore leaves the baseline running,
 * detached, and it is stopped as a leftover from its recorded ids. */
static void test_command_restore(void)
{
    struct st_plan p;
    struct st_target_params base = {0};
    struct st_arm_env env;
    struct st_buf saved, fin;
    char err[512] = "";
    int port = free_port(), restored = -1;
    restore_plan(&p, &base, port);
    env_init(&env, "cmd-restore");
    st_buf_init(&saved);
    st_buf_init(&fin);
    CHECK(st_arm_save_state(ARM_PLAN(&p), &env, &saved, err, sizeof(err)) == 0, "%s", err);
    CHECK(json_valid(&saved) && strstr(st_buf_str(&saved), "--set engine.spec_steps=2\"") &&
              strstr(st_buf_str(&saved), "\"health\":{") &&
              strstr(st_buf_str(&saved), "\"error\":") &&
              strstr(st_buf_str(&saved), "\"running\":false"),
          "%s", st_buf_str(&saved));
    int rc = st_arm_restore(ARM_PLAN(&p), &base, &env, saved.data, saved.len, &fin, &restored, err,
                            sizeof(err));
    show("restore to nothing running", &fin);
    CHECK(rc == 0 && restored == 1 && json_valid(&fin) &&
              strstr(st_buf_str(&fin), "\"left_running\":false") &&
              strstr(st_buf_str(&fin), "\"name\":\"baseline_stopped\",\"ok\":true") &&
              strstr(st_buf_str(&fin), "\"name\":\"port_free\",\"ok\":true"),
          "rc %d restored %d %s", rc, restored, st_buf_str(&fin));
    int64_t pgid = json_int(&fin, "pgid");
    CHECK(pgid > 0 && kill(-(pid_t)pgid, 0) != 0, "the baseline %lld still runs", (long long)pgid);
    st_buf_clear(&saved);
    st_buf_clear(&fin);

    /* A server on the port at the start: saved with its owner, restored to running. */
    int lfd = reuseport_listener(port);
    CHECK(st_arm_save_state(ARM_PLAN(&p), &env, &saved, err, sizeof(err)) == 0, "%s", err);
    char want[64];
    snprintf(want, sizeof(want), "\"pid\":%d,", (int)getpid());
    CHECK(strstr(st_buf_str(&saved), "\"running\":true") && strstr(st_buf_str(&saved), want) &&
              strstr(st_buf_str(&saved), "\"props\":{"),
          "%s", st_buf_str(&saved));
    close(lfd);
    rc = st_arm_restore(ARM_PLAN(&p), &base, &env, saved.data, saved.len, &fin, &restored, err,
                        sizeof(err));
    CHECK(rc == 0 && restored == 1 && json_valid(&fin) &&
              strstr(st_buf_str(&fin), "\"left_running\":true") &&
              !strstr(st_buf_str(&fin), "port_free"),
          "rc %d restored %d %s", rc, restored, st_buf_str(&fin));
    pgid = json_int(&fin, "pgid");
    int64_t ticks = json_int(&fin, "start_ticks");
    CHECK(pgid > 0 && kill(-(pid_t)pgid, 0) == 0, "the restored baseline is not running");
    if (pgid > 0) {
        CHECK(st_arm_stop_leftover((int)pgid, (uint64_t)ticks, SIGTERM, 5, NULL) == 0,
              "stop the restored baseline");
        for (int i = 0; i < 100 && kill(-(pid_t)pgid, 0) == 0; i++) {
            sleep_ms(10);
        }
    }
    st_target_params_release(&base);
    st_buf_release(&saved);
    st_buf_release(&fin);
    st_plan_release(&p);
}

/* command: an arm does not start where something listens (a SO_REUSEPORT listener, which a bind
 * test would miss) or answers; the error names the owner (this process) and nothing starts. */
static void test_command_port_taken(void)
{
    struct st_plan p;
    struct st_target_params base = {0};
    struct st_arm_env env;
    struct st_arm_up up;
    struct st_arm_server *s = NULL;
    char err[1024] = "", want[64];
    int port = free_port();
    restore_plan(&p, &base, port);
    env_init(&env, "cmd-port");
    st_arm_up_init(&up);
    int lfd = reuseport_listener(port);
    double t0 = now_s();
    int rc = st_arm_start(ARM_PLAN(&p), "mtp3", &base, &env, &s, &up, err, sizeof(err));
    show("port taken", &up.json);
    snprintf(want, sizeof(want), "taken by pid %d (", (int)getpid());
    CHECK(rc == ST_EUSAGE && !s && strstr(err, want) && strstr(err, "not started"), "rc %d: %s", rc,
          err);
    CHECK(now_s() - t0 < 2, "the refusal took %.2f s", now_s() - t0);
    CHECK(json_valid(&up.json) && strstr(st_buf_str(&up.json), "\"taken\":true") &&
              !strstr(st_buf_str(&up.json), "\"pgid\""),
          "nothing started: %s", st_buf_str(&up.json));
    close(lfd);
    rc = st_arm_start(ARM_PLAN(&p), "mtp3", &base, &env, &s, &up, err, sizeof(err));
    CHECK(rc == 0 && up.fail == ST_ARM_OK && s && strstr(st_buf_str(&up.json), "\"taken\":false"),
          "free again: rc %d %s %s", rc, err, up.detail);
    if (s) {
        /* While our arm runs, the port is taken by our own child: a second start refuses. */
        struct st_arm_server *s2 = NULL;
        rc = st_arm_start(ARM_PLAN(&p), "again", &base, &env, &s2, &up, err, sizeof(err));
        CHECK(rc == ST_EUSAGE && !s2 && strstr(err, "(servetune)"), "rc %d: %s", rc, err);
        CHECK(st_arm_stop(s, NULL) == 0, "stop");
    }
    st_arm_up_release(&up);
    st_target_params_release(&base);
    st_plan_release(&p);
}

static int operator_calls;

static int operator_ok(void *ctx, const char *arm, const struct st_target_params *ps)
{
    (void)ctx;
    (void)ps;
    operator_calls += strcmp(arm, "mtp3") == 0;
    return 0;
}

static void test_url(void)
{
    struct st_plan p, u;
    struct st_target_params ps;
    struct st_arm_env env;
    struct st_arm_up up, uu;
    struct st_arm_server *s = NULL, *us = NULL;
    char err[512] = "", text[8192];
    sim_plan(&p);
    env_init(&env, "url-sim");
    st_arm_up_init(&up);
    st_arm_up_init(&uu);
    CHECK(st_plan_arm_params(&p, 1, NULL, &ps, err, sizeof(err)) == 0, "%s", err);
    CHECK(st_arm_start(ARM_PLAN(&p), "mtp3", &ps, &env, &s, &up, err, sizeof(err)) == 0 && s,
          "%s %s", err, up.detail);
    snprintf(text, sizeof(text),
             "name: t\n"
             "target: {kind: url, base_url: '%s', health_timeout_s: 5}\n"
             "baseline: {engine.spec_steps: 2}\n"
             "arms:\n"
             "  - {name: mtp3, set: {engine.spec_steps: 3}}\n"
             "%s",
             up.url, stages);
    parse_plan(text, &u);
    env_init(&env, "url");
    int rc = st_arm_start(ARM_PLAN(&u), "mtp3", &ps, &env, &us, &uu, err, sizeof(err));
    CHECK(rc == 0 && uu.fail == ST_ARM_FAIL_OPERATOR && !us, "no operator: %s %s",
          st_arm_fail_name(uu.fail), uu.detail);
    env.operator_fn = operator_ok;
    rc = st_arm_start(ARM_PLAN(&u), "mtp3", &ps, &env, &us, &uu, err, sizeof(err));
    CHECK(rc == 0 && uu.fail == ST_ARM_OK && us, "operator: %s %s", st_arm_fail_name(uu.fail),
          uu.detail);
    CHECK(operator_calls == 1, "operator called %d times", operator_calls);
    /* Without the log, the KV pool comes from vLLM's metric (blocks x block size). */
    CHECK(strcmp(uu.kv_source, "metrics") == 0 && uu.kv_capacity_tokens > 0, "url kv %llu %s",
          (unsigned long long)uu.kv_capacity_tokens, uu.kv_source);
    char detail[512];
    CHECK(us && st_arm_check(us, detail, sizeof(detail)) == ST_ARM_OK, "%s", detail);
    CHECK(st_arm_stop(us, NULL) == 0, "url stop");
    CHECK(st_arm_stop(s, NULL) == 0, "sim stop");
    st_plan_release(&u);
    st_target_params_release(&ps);
    st_arm_up_release(&up);
    st_arm_up_release(&uu);
    st_plan_release(&p);
}

static void test_save_restore(void)
{
    struct st_plan p;
    struct st_target_params base;
    struct st_arm_env env;
    struct st_buf saved, fin;
    char err[512] = "";
    int restored = -1;
    sim_plan(&p);
    env_init(&env, "restore");
    st_buf_init(&saved);
    st_buf_init(&fin);
    baseline_ps(&p, &base);
    CHECK(st_arm_save_state(ARM_PLAN(&p), &env, &saved, err, sizeof(err)) == 0, "%s", err);
    CHECK(json_valid(&saved) && strstr(st_buf_str(&saved), "\"profile_sha256\":\""), "%s",
          st_buf_str(&saved));
    /* The runner appends the baseline's KV capacity from its first bring-up. */
    uint64_t kv = explain_kv(NULL);
    struct st_buf with_kv;
    st_buf_init(&with_kv);
    st_buf_append(&with_kv, saved.data, saved.len - 1);
    st_buf_printf(&with_kv, ",\"baseline_kv_capacity_tokens\":%llu}", (unsigned long long)kv);
    double t0 = now_s();
    int rc = st_arm_restore(ARM_PLAN(&p), &base, &env, with_kv.data, with_kv.len, &fin, &restored,
                            err, sizeof(err));
    show("restore", &fin);
    CHECK(rc == 0 && restored == 1, "rc %d restored %d: %s", rc, restored, st_buf_str(&fin));
    CHECK(now_s() - t0 < 5, "restore took %.2f s", now_s() - t0);
    CHECK(json_valid(&fin) && strstr(st_buf_str(&fin), "\"name\":\"kv_capacity\",\"ok\":true") &&
              strstr(st_buf_str(&fin), "\"name\":\"baseline_stopped\",\"ok\":true"),
          "%s", st_buf_str(&fin));

    /* Another capacity than saved: not restored. */
    st_buf_clear(&with_kv);
    st_buf_append(&with_kv, saved.data, saved.len - 1);
    st_buf_printf(&with_kv, ",\"baseline_kv_capacity_tokens\":%llu}", (unsigned long long)kv + 16);
    st_buf_clear(&fin);
    rc = st_arm_restore(ARM_PLAN(&p), &base, &env, with_kv.data, with_kv.len, &fin, &restored, err,
                        sizeof(err));
    CHECK(rc == 0 && restored == 0, "restored %d: %s", restored, st_buf_str(&fin));
    CHECK(strstr(st_buf_str(&fin), "\"name\":\"kv_capacity\",\"ok\":false"), "%s",
          st_buf_str(&fin));
    st_buf_release(&with_kv);
    st_buf_release(&saved);
    st_buf_release(&fin);
    st_target_params_release(&base);
    st_plan_release(&p);
}

/* ---- compose, through the fake docker CLI (tests/support/fake-docker: containers are sims) ----
 */

static char docker_state[400];

/* Kills every fake container's process group (the restore leaves the service running). */
static void kill_containers(void)
{
    char dir[500];
    snprintf(dir, sizeof(dir), "%s/containers", docker_state);
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".pgid") != 0) {
            continue;
        }
        char path[800], buf[32] = "";
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (f && fgets(buf, sizeof(buf), f)) {
            long pg = strtol(buf, NULL, 10);
            if (pg > 1) {
                kill((pid_t)-pg, SIGKILL);
            }
        }
        if (f) {
            fclose(f);
        }
    }
    if (d) {
        closedir(d);
    }
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

/* An arm up through compose (health, KV from docker logs, configuration from /metrics and
 * /v1/models), checked and stopped; an arm that does not fit fails "oom"; the starting state is
 * saved before and proven after (compose.c's checks and health). */
static void test_compose(const char *e2e)
{
    char fake[4096], deploy[512], path[600], text[8192], err[512] = "", detail[512];
    struct st_plan p;
    struct st_target_params ps;
    struct st_arm_env env;
    struct st_arm_up up;
    struct st_arm_server *s = NULL;
    struct st_buf saved, fin;
    int port = free_port();
    snprintf(fake, sizeof(fake), "%s/../support/fake-docker", e2e);
    snprintf(docker_state, sizeof(docker_state), "%s/docker", tmpdir);
    setenv("FAKE_DOCKER_STATE", docker_state, 1);
    unsetenv("FAKE_DOCKER_FAIL");
    snprintf(deploy, sizeof(deploy), "%s/deploy", tmpdir);
    mkdir(deploy, 0755);
    snprintf(path, sizeof(path), "%s/sim.env", deploy);
    write_file(path, "SIM_SPEED=1000\n");
    snprintf(path, sizeof(path), "%s/docker-compose.yml", deploy);
    snprintf(text, sizeof(text),
             "services:\n"
             "  vlm:\n"
             "    image: servetune/sim\n"
             "    restart: unless-stopped\n"
             "    env_file: sim.env\n"
             "    environment:\n"
             "      SIM_PROFILE: %s\n"
             "      SIM_PORT: \"%d\"\n"
             "    command: >-\n"
             "      serve /models/vl --num-speculative-tokens 2 --cuda-graph-sizes 1 3\n"
             "      --gpu-memory-utilization 0.985 --max-model-len 131072 --port 8000\n",
             profile, port);
    write_file(path, text);
    snprintf(text, sizeof(text),
             "name: t\n"
             "target:\n"
             "  kind: compose\n"
             "  compose_file: deploy/docker-compose.yml\n"
             "  service: vlm\n"
             "  base_url: http://127.0.0.1:%d\n"
             "  health_url: http://127.0.0.1:%d/health\n"
             "  health_timeout_s: 20\n"
             "  stop_timeout_s: 5\n"
             "baseline: {num_speculative_tokens: 2, cuda_graph_sizes: [1, 3], "
             "gpu_memory_utilization: 0.985}\n"
             "fixed: {max_model_len: 131072}\n"
             "arms:\n"
             "  - {name: mtp1, set: {num_speculative_tokens: 1, cuda_graph_sizes: [1, 2]}, "
             "multi_variable: true}\n"
             "  - {name: small, set: {gpu_memory_utilization: 0.2}}\n"
             "%s",
             port, port, stages);
    parse_plan(text, &p);
    env_init(&env, "compose-save");
    env.docker = fake;
    st_buf_init(&saved);
    st_buf_init(&fin);
    st_arm_up_init(&up);
    CHECK(st_arm_save_state(ARM_PLAN(&p), &env, &saved, err, sizeof(err)) == 0, "save: %s", err);

    env_init(&env, "compose-mtp1");
    env.docker = fake;
    CHECK(st_plan_arm_params(&p, 0, NULL, &ps, err, sizeof(err)) == 0, "%s", err);
    int rc = st_arm_start(ARM_PLAN(&p), "mtp1", &ps, &env, &s, &up, err, sizeof(err));
    show("compose", &up.json);
    CHECK(rc == 0 && up.fail == ST_ARM_OK && s, "compose up: rc %d %s %s %s", rc,
          st_arm_fail_name(up.fail), err, up.detail);
    CHECK(up.kv_capacity_tokens ==
                  explain_kv("engine.spec_steps=1 --set 'engine.graph_sizes=[1, 2]'") &&
              strcmp(up.kv_source, "log") == 0,
          "compose kv %llu (%s)", (unsigned long long)up.kv_capacity_tokens, up.kv_source);
    const char *j = st_buf_str(&up.json);
    CHECK(
        json_valid(&up.json) &&
            strstr(j,
                   "\"name\":\"gpu_memory_utilization\",\"arm\":\"0.985\",\"server\":\"0.985\"") &&
            strstr(j, "\"name\":\"max_model_len\",\"arm\":\"131072\",\"server\":\"131072\""),
        "%s", j);
    if (s) {
        CHECK(st_arm_check(s, detail, sizeof(detail)) == ST_ARM_OK, "check: %s", detail);
        struct st_buf tail;
        st_buf_init(&tail);
        st_arm_log_tail(s, 4096, &tail);
        CHECK(strstr(st_buf_str(&tail), "listening on"), "tail: %s", st_buf_str(&tail));
        st_buf_release(&tail);
        CHECK(st_arm_stop(s, NULL) == 0, "compose stop");
    }
    st_target_params_release(&ps);

    env_init(&env, "compose-small");
    env.docker = fake;
    CHECK(st_plan_arm_params(&p, 1, NULL, &ps, err, sizeof(err)) == 0, "%s", err);
    rc = st_arm_start(ARM_PLAN(&p), "small", &ps, &env, &s, &up, err, sizeof(err));
    CHECK(rc == 0 && up.fail == ST_ARM_FAIL_OOM && !s, "compose small: rc %d %s %s %s", rc,
          st_arm_fail_name(up.fail), err, up.detail);
    st_target_params_release(&ps);

    env_init(&env, "compose-restore");
    env.docker = fake;
    int restored = -1;
    struct st_target_params none = {0}; /* compose restores the file as it is: no parameters */
    rc = st_arm_restore(ARM_PLAN(&p), &none, &env, saved.data, saved.len, &fin, &restored, err,
                        sizeof(err));
    show("compose restore", &fin);
    CHECK(rc == 0 && restored == 1 && json_valid(&fin), "compose restore: rc %d %d %s %s", rc,
          restored, err, st_buf_str(&fin));
    /* Nothing ran when the state was saved: the restore leaves nothing running and proves it. */
    CHECK(strstr(st_buf_str(&fin), "\"name\":\"container_stopped\",\"ok\":true") &&
              strstr(st_buf_str(&fin), "\"name\":\"nothing_answers\",\"ok\":true"),
          "%s", st_buf_str(&fin));
    kill_containers();
    st_buf_release(&saved);
    st_buf_release(&fin);
    st_arm_up_release(&up);
    st_plan_release(&p);
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    (void)remove(path); /* best effort: a leftover file only costs space */
    return 0;
}

int main(void)
{
    servetune = getenv("SERVETUNE");
    const char *e2e = getenv("ST_E2E_DIR");
    if (!servetune || !e2e) {
        fprintf(stderr, "SERVETUNE and ST_E2E_DIR must be set\n");
        return 1;
    }
    char rel[4096];
    snprintf(rel, sizeof(rel), "%s/../../profiles/seed000-vl-mtp.yaml", e2e);
    if (!realpath(rel, profile)) {
        fprintf(stderr, "%s: %s\n", rel, strerror(errno));
        return 1;
    }
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/st-arm-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    verbose = getenv("ST_ARM_VERBOSE") != NULL;
    test_sim_up_check_stop();
    test_sim_oom();
    test_sim_sglang();
    test_sim_llamacpp();
    test_sim_dies_with_runner();
    test_command();
    test_command_leftover();
    test_command_restore();
    test_command_port_taken();
    test_url();
    test_save_restore();
    test_compose(e2e);
    if (failures == 0 && !getenv("ST_KEEP_TMP")) {
        nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        printf("%d checks, 0 failed\n", checks);
    } else {
        printf("%d checks, %d failed (evidence under %s)\n", checks, failures, tmpdir);
    }
    return failures ? 1 : 0;
}
