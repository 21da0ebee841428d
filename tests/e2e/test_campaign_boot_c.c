/*
 * e2e: how a command arm's start-up reads against what a real llama-server b4748 printed and
 * answered (tests/data/logs/llamacpp-b4748/, tests/data/wire/llamacpp-b4748/; CI has no
 * llama-server, so a shell command replays the log and tests/support/llamacpp-replay the HTTP
 * answers). Checks: a start that fails as b4748 does without -fa quotes the cause ("V cache
 * quantization requires flash_attn"), not the last line ("terminate called without an active
 * exception"), and hands back the log's tail; a relative target.log lies in the arm's evidence
 * folder, its folders made; an absolute one in a folder that does not exist is named as such
 * (ST_ENOTFOUND), not as a disk error; the configuration check reads /props' per-slot n_ctx,
 * "speculative" (an arm that adds a draft model, a baseline that passes "" for it) and the draft
 * settings, and the KV line's size and K/V types (a q8_0 cache against an arm that says f16
 * fails "config" naming the log line). Each case is bounded by a few seconds.
 */
#include <sys/socket.h>
#include <sys/stat.h>

#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "campaign/plan.h"
#include "target/arm.h"

#include "check.h"

#define ARM_PLAN(p) (&(struct st_arm_plan){&(p)->target, &(p)->baseline, &(p)->fixed})

static int checks, failures;
static char tmpdir[256];
static char data[2048];   /* tests/data */
static char replay[2048]; /* tests/support/llamacpp-replay */

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

static const char stages[] = "stages:\n"
                             "  screening: [{id: dec, kind: bench, output_tokens: 64}]\n"
                             "  full:\n"
                             "    - {id: long, kind: bench, output_tokens: 16384}\n"
                             "    - {id: mixed, kind: soak, duration_s: 600}\n"
                             "rules: {metrics: [{metric: dec.decode_tps}]}\n";

/* A command plan: start, an optional target.log line, the baseline and one arm's set. */
static void plan(struct st_plan *p, const char *start, const char *log, int port,
                 const char *baseline, const char *set)
{
    char text[8192], err[512] = "";
    snprintf(text, sizeof(text),
             "name: t\n"
             "target:\n"
             "  kind: command\n"
             "  start: \"%s\"\n"
             "%s"
             "  stop_timeout_s: 2\n"
             "  base_url: http://127.0.0.1:%d\n"
             "  health_url: http://127.0.0.1:%d/health\n"
             "  health_timeout_s: 10\n"
             "baseline: %s\n"
             "arms:\n"
             "  - {name: a, set: %s, multi_variable: true}\n"
             "%s",
             start, log ? log : "", port, port, baseline, set, stages);
    if (st_plan_parse("t.yaml", text, strlen(text), p, err, sizeof(err)) != 0) {
        fprintf(stderr, "plan: %s\n%s\n", err, text);
        exit(1);
    }
}

static void env_init(struct st_arm_env *env, const char *sub, char *dir, size_t len)
{
    snprintf(dir, len, "%s/%s", tmpdir, sub);
    mkdir(dir, 0755);
    memset(env, 0, sizeof(*env));
    env->plan_dir = tmpdir;
    env->dir = dir;
    env->poll_s = 0.05;
}

/* Starts arm a (index 0) of p; returns st_arm_start's rc with up filled, the server stopped. */
static int start_arm(struct st_plan *p, const char *sub, struct st_arm_up *up, char *err,
                     size_t errlen, char *dir, size_t dlen)
{
    struct st_arm_env env;
    struct st_target_params ps;
    struct st_arm_server *s = NULL;
    env_init(&env, sub, dir, dlen);
    if (st_plan_arm_params(p, 0, NULL, &ps, err, errlen) != 0) {
        fprintf(stderr, "params: %s\n", err);
        exit(1);
    }
    int rc = st_arm_start(ARM_PLAN(p), "a", &ps, &env, &s, up, err, errlen);
    if (getenv("ST_ARM_VERBOSE")) {
        fprintf(stderr, "--- %s: rc %d %s\n%s\n", sub, rc, up->detail, st_buf_str(&up->json));
    }
    CHECK(st_arm_stop(s, NULL) == 0, "%s: stop", sub);
    st_target_params_release(&ps);
    return rc;
}

static int file_has(const char *path, const char *text)
{
    char buf[1 << 16];
    FILE *f = fopen(path, "rb");
    if (!f) {
        return 0;
    }
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, text) != NULL;
}

/* b4748 with -ctv q8_0 and no -fa: the cause is 5 lines above the last. */
static void test_failed_start(void)
{
    struct st_plan p;
    struct st_arm_up up;
    char err[512] = "", start[8192], dir[512];
    st_arm_up_init(&up);
    snprintf(start, sizeof(start),
             "cat '%s/logs/llamacpp-b4748/fail_ctv_no_fa.log'; kill -ABRT $$ #{d}", data);
    plan(&p, start, "  log: logs/target.log\n", free_port(), "{d: \"\"}", "{d: x}");
    int rc = start_arm(&p, "fail", &up, err, sizeof(err), dir, sizeof(dir));
    CHECK(rc == 0 && up.fail == ST_ARM_FAIL_START, "rc %d %s: %s", rc, st_arm_fail_name(up.fail),
          up.detail);
    CHECK(strstr(up.detail, "log line 92: llama_init_from_model: V cache quantization requires "
                            "flash_attn (last line: terminate called without an active "
                            "exception)") &&
              strstr(up.detail, "signal 6"),
          "%s", up.detail);
    CHECK(strstr(st_buf_str(&up.log_tail), "requires flash_attn") &&
              strstr(st_buf_str(&up.log_tail), "terminate called"),
          "log tail: %zu bytes", up.log_tail.len);
    /* The relative target.log lies in the arm's evidence folder, not the plan's. */
    char path[1024];
    snprintf(path, sizeof(path), "%s/logs/target.log", dir);
    CHECK(file_has(path, "requires flash_attn"), "%s", path);
    snprintf(path, sizeof(path), "%s/logs/target.log", tmpdir);
    CHECK(access(path, F_OK) != 0, "%s written in the plan's folder", path);
    st_plan_release(&p);

    /* An absolute log in a folder that does not exist: that, not a disk error. */
    char log[1024];
    snprintf(log, sizeof(log), "  log: %s/no-such-folder/target.log\n", tmpdir);
    plan(&p, "true #{d}", log, free_port(), "{d: \"\"}", "{d: x}");
    rc = start_arm(&p, "nolog", &up, err, sizeof(err), dir, sizeof(dir));
    CHECK(rc == ST_ENOTFOUND && strstr(err, "no-such-folder does not exist"), "rc %d: %s", rc, err);
    st_plan_release(&p);
    st_arm_up_release(&up);
}

/* The replayed server of props (a wire file) and log (a logs file) under arm a's set. */
static int replay_arm(const char *sub, const char *log, const char *props, const char *params,
                      struct st_arm_up *up)
{
    struct st_plan p;
    char err[512] = "", start[8192], dir[512];
    int port = free_port();
    snprintf(start, sizeof(start), "exec python3 '%s' %d %s %s #{d}", replay, port, log, props);
    char baseline[2048];
    snprintf(baseline, sizeof(baseline), "{d: \"\", %s}", params);
    plan(&p, start, NULL, port, baseline, "{d: x}");
    int rc = start_arm(&p, sub, up, err, sizeof(err), dir, sizeof(dir));
    CHECK(rc == 0, "%s: rc %d %s", sub, rc, err);
    st_plan_release(&p);
    return rc;
}

static void test_config_check(void)
{
    struct st_arm_up up;
    st_arm_up_init(&up);
    /* -np 1 -c 2048 -md draft-f16.gguf --draft-max 4: an arm adding a draft model to a baseline
     * that passes "" for it. */
    replay_arm("draft", "ok_flags.log", "props_flags.txt",
               "n_ctx: 2048, draft_model: '-md draft-f16.gguf', ctx_size: 2048, "
               "cache_type_k: f16, cache_type_v: f16, draft_max: 4, temp: 0.5, top_p: 0.9, "
               "min_p: 0.1, repeat_penalty: 1.1",
               &up);
    const char *j = st_buf_str(&up.json);
    CHECK(up.fail == ST_ARM_OK, "draft: %s %s", st_arm_fail_name(up.fail), up.detail);
    CHECK(strstr(j, "\"name\":\"n_ctx\",\"arm\":\"2048\",\"server\":\"2048\",\"source\":\"GET "
                    "/props default_generation_settings.n_ctx\",\"ok\":true"),
          "%s", j);
    CHECK(
        strstr(j, "\"name\":\"draft_model\",\"arm\":\"-md draft-f16.gguf\",\"server\":\"true\"") &&
            strstr(j, "\"name\":\"top_p\",\"arm\":\"0.9\",\"server\":\"0.8999999761581421\"") &&
            strstr(j, "\"name\":\"temp\",\"arm\":\"0.5\",\"server\":\"0.5\""),
        "%s", j);
    CHECK(strstr(j, "\"name\":\"cache_type_k\",\"arm\":\"f16\",\"server\":\"f16\"") &&
              strstr(j, "\"name\":\"ctx_size\",\"arm\":\"2048\",\"server\":\"2048\""),
          "%s", j);
    CHECK(strstr(j, "\"capacity_tokens\":2048") && strstr(j, "\"source\":\"log\"") &&
              strstr(j, "\"type_k\":\"f16\",\"type_v\":\"f16\""),
          "%s", j);
    /* b4748's /props keeps the draft defaults: draft_max is unchecked, not failed. */
    CHECK(!strstr(j, "\"ok\":false") && strstr(j, "\"unchecked\":[\"d\",\"draft_max\"]"), "%s", j);
    /* The baseline's "" against a server that drafts: not its configuration. */
    replay_arm("nodraft", "ok_draft.log", "props_draft.txt", "draft_model: \"\"", &up);
    CHECK(up.fail == ST_ARM_FAIL_CONFIG &&
              strstr(up.detail, "draft_model is  for the arm but true on the server (GET /props "
                                "default_generation_settings.speculative)"),
          "nodraft: %s %s", st_arm_fail_name(up.fail), up.detail);
    /* -fa -ctk q8_0 -ctv q8_0 -np 2 -c 4096: the KV line says q8_0. */
    replay_arm("q8", "ok_q8.log", "props_q8_0_fa.txt", "cache_type_k: f16", &up);
    CHECK(up.fail == ST_ARM_FAIL_CONFIG &&
              strstr(up.detail, "cache_type_k is f16 for the arm but q8_0 on the server (log "
                                "line 101: llama_kv_cache_init: kv_size = 4096"),
          "q8: %s %s", st_arm_fail_name(up.fail), up.detail);
    CHECK(strstr(st_buf_str(&up.json), "\"capacity_tokens\":4096"), "%s", st_buf_str(&up.json));
    replay_arm("q8ok", "ok_q8.log", "props_q8_0_fa.txt",
               "ctx_size: 4096, type_k: q8_0, type_v: q8_0, speculative: \"false\"", &up);
    CHECK(up.fail == ST_ARM_OK, "q8ok: %s %s", st_arm_fail_name(up.fail), up.detail);
    st_arm_up_release(&up);
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    (void)remove(path);
    return 0;
}

int main(void)
{
    const char *e2e = getenv("ST_E2E_DIR");
    if (!e2e) {
        fprintf(stderr, "ST_E2E_DIR must be set\n");
        return 1;
    }
    char rel[4096];
    snprintf(rel, sizeof(rel), "%s/../data", e2e);
    snprintf(replay, sizeof(replay), "%s/../support/llamacpp-replay", e2e);
    if (!realpath(rel, data) || access(replay, R_OK) != 0) {
        fprintf(stderr, "%s: %s\n", rel, strerror(errno));
        return 1;
    }
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/st-boot-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    test_failed_start();
    test_config_check();
    if (failures == 0 && !getenv("ST_KEEP_TMP")) {
        nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        printf("%d checks, 0 failed\n", checks);
    } else {
        printf("%d checks, %d failed (evidence under %s)\n", checks, failures, tmpdir);
    }
    return failures ? 1 : 0;
}
