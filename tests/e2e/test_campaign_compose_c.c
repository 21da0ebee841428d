/*
 * e2e: the compose backend (src/target/compose.c) in two modes (one binary, two meson tests).
 *
 * Real (test_compose_docker_c: tests/support/dockerlib.py starts a Docker Engine of its own and
 * runs this with ST_DOCKER, DOCKER_HOST and ST_DOCKER_IMAGE; docker-compose 1.29, v1): the
 * starting state saved (hashes, copies, restart policy unless-stopped from inspect); an arm
 * brought up through an override file (the command rewritten, restart policy "no", health 200,
 * check OK, EXIT with 137 once its process is killed); an arm the kernel's OOM killer ends
 * (OOMKilled); a deployment with unless-stopped that the engine restarts after a kill (check
 * says EXIT though Running reads true); a stopped container's health not taken as health now;
 * the restore proven, then refuted once the compose file changed; override: environment.
 *
 * Fake (test_campaign_compose_fake_c: tests/support/fake-docker, "containers" are `servetune sim`
 * processes on 127.0.0.1, and it answers as a v2 Compose): only what a real engine cannot
 * stage: docker inspect failing, up and update failing on demand, the v2-only env_file form
 * {path, required: false}; and a missing CLI.
 *
 * Both: the pure helpers (splitting, value words, the rewrite rule), the CLI runner (outputs,
 * cap, deadline, missing program) and compose files refused before any docker call. Every wait
 * is bounded (seconds); every container is stopped (real: the engine is removed after;
 * fake: every recorded process group killed) and the temporary folder removed at the end.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/sha256.h"
#include "campaign/plan.h"
#include "target/arm.h"
#include "target/compose.h"

/* The lifecycle's view of a parsed plan (target/arm.h): its target and parameter sets, borrowed. */
#define ARM_PLAN(p) (&(struct st_arm_plan){&(p)->target, &(p)->baseline, &(p)->fixed})

static int n_checks, failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        n_checks++;                                                                                \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

static char tmp[256], state[300], docker[1024], compose_path[400], env_path[400];
static const char *image; /* real mode: the simulator's image (ST_DOCKER_IMAGE); NULL: fake */
static int port;

static void path_join(char *dst, size_t len, const char *a, const char *b)
{
    snprintf(dst, len, "%s/%s", a, b);
}

static int write_text(const char *path, const char *text, const char *mode)
{
    FILE *f = fopen(path, mode);
    if (!f) {
        return -errno;
    }
    fputs(text, f);
    return fclose(f) == 0 ? 0 : -errno;
}

static int read_text(const char *path, struct st_buf *out)
{
    st_buf_clear(out);
    FILE *f = fopen(path, "r");
    if (!f) {
        return -errno;
    }
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        st_buf_append(out, chunk, n);
    }
    fclose(f);
    return 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A port that was free a moment ago: bind port 0, read it, close. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

/* GET /health on 127.0.0.1:port: the status code, or -1 when nothing answers. */
static int health_status(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    struct timeval tv = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int code = -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
        const char req[] = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
        char resp[256] = "";
        if (write(fd, req, sizeof(req) - 1) == (ssize_t)(sizeof(req) - 1)) {
            ssize_t n = read(fd, resp, sizeof(resp) - 1);
            if (n > 12 && strncmp(resp, "HTTP/1.", 7) == 0) {
                resp[n] = '\0';
                code = (int)strtol(resp + 9, NULL, 10);
            }
        }
    }
    close(fd);
    return code;
}

/* Polls /health until 200, for at most timeout_ms. Returns the last status. */
static int wait_healthy(long timeout_ms)
{
    uint64_t end = st_clock_mono_ns() + (uint64_t)timeout_ms * ST_NS_PER_MS;
    int code = -1;
    while (st_clock_mono_ns() < end) {
        code = health_status();
        if (code == 200) {
            break;
        }
        sleep_ms(50);
    }
    return code;
}

/* Runs the docker CLI (real or fake) with args (NULL-terminated), stdout into out. Returns the
 * exit status. */
static int cli_run(struct st_buf *out, ...)
{
    const char *argv[16];
    size_t n = 0;
    argv[n++] = docker;
    va_list ap;
    va_start(ap, out);
    const char *a;
    while ((a = va_arg(ap, const char *)) != NULL && n < 15) {
        argv[n++] = a;
    }
    va_end(ap);
    argv[n] = NULL;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        execv(docker, (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    st_buf_clear(out);
    char chunk[4096];
    ssize_t r;
    while ((r = read(fds[0], chunk, sizeof(chunk))) > 0) {
        st_buf_append(out, chunk, (size_t)r);
    }
    close(fds[0]);
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

/* docker inspect of id: restart policy and pid (and RestartCount when restarts is not NULL).
 * Returns 0 when it answered. */
static int cli_inspect(const char *id, char *policy, size_t plen, int64_t *pid, int64_t *restarts)
{
    struct st_buf out;
    st_buf_init(&out);
    int rc = cli_run(&out, "inspect", id, (const char *)NULL);
    struct st_json d;
    st_json_init(&d, 0);
    policy[0] = '\0';
    *pid = 0;
    if (rc == 0 && st_json_parse(&d, out.data, out.len) == 0) {
        int o = st_json_at(&d, 0, 0);
        int name = st_json_get(
            &d, st_json_get(&d, st_json_get(&d, o, "HostConfig"), "RestartPolicy"), "Name");
        struct st_buf s;
        st_buf_init(&s);
        if (st_json_str(&d, name, &s) == 0) {
            snprintf(policy, plen, "%s", st_buf_str(&s));
        }
        st_buf_release(&s);
        if (st_json_i64(&d, st_json_get(&d, st_json_get(&d, o, "State"), "Pid"), pid) != 0) {
            *pid = 0;
        }
        if (restarts && st_json_i64(&d, st_json_get(&d, o, "RestartCount"), restarts) != 0) {
            *restarts = 0;
        }
    } else {
        rc = -1;
    }
    st_json_release(&d);
    st_buf_release(&out);
    return rc;
}

/* The container id from an evidence object ("container"). */
static void evidence_container(const struct st_buf *json, char *id, size_t len)
{
    id[0] = '\0';
    struct st_json d;
    st_json_init(&d, 0);
    if (st_json_parse(&d, json->data, json->len) == 0) {
        struct st_buf s;
        st_buf_init(&s);
        if (st_json_str(&d, st_json_get(&d, 0, "container"), &s) == 0) {
            snprintf(id, len, "%s", st_buf_str(&s));
        }
        st_buf_release(&s);
    }
    st_json_release(&d);
}

/* Polls st_compose_check until it is not OK, for at most timeout_ms. */
static enum st_arm_fail wait_failed(struct st_compose *c, char *detail, size_t len, long timeout_ms)
{
    uint64_t end = st_clock_mono_ns() + (uint64_t)timeout_ms * ST_NS_PER_MS;
    enum st_arm_fail f = ST_ARM_OK;
    while (st_clock_mono_ns() < end) {
        f = st_compose_check(c, detail, len);
        if (f != ST_ARM_OK) {
            break;
        }
        sleep_ms(50);
    }
    return f;
}

/* Kills every container process group the fake recorded (whatever the test did before). */
static void kill_all(void)
{
    char dir[400];
    path_join(dir, sizeof(dir), state, "containers");
    DIR *d = opendir(dir);
    if (!d) {
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".pgid") != 0) {
            continue;
        }
        char path[800];
        struct st_buf b;
        st_buf_init(&b);
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (read_text(path, &b) == 0) {
            long pg = strtol(st_buf_str(&b), NULL, 10);
            if (pg > 1) {
                kill((pid_t)-pg, SIGKILL);
            }
        }
        st_buf_release(&b);
    }
    closedir(d);
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static int argv_is(const struct st_arm_argv *a, const char *const *want)
{
    uint32_t i = 0;
    for (; want[i]; i++) {
        if (i >= a->n || strcmp(a->v[i], want[i]) != 0) {
            return 0;
        }
    }
    return i == a->n && (a->v == NULL || a->v[a->n] == NULL);
}

/* ---- the pure helpers ---- */

static void test_helpers(void)
{
    struct st_arm_argv a = {0};
    char err[256] = "";
    CHECK(st_compose_split("serve '/m o' --x \"a \\\"b\\\"\" c\\ d  $HOME", &a, err, sizeof(err)) ==
              0,
          "%s", err);
    const char *const w1[] = {"serve", "/m o", "--x", "a \"b\"", "c d", "$HOME", NULL};
    CHECK(argv_is(&a, w1), "split: %u words", a.n);
    st_arm_argv_release(&a);
    CHECK(st_compose_split("a \\\n b\\\nc '' \"\"", &a, err, sizeof(err)) == 0, "%s", err);
    const char *const w0[] = {"a", "bc", "", "", NULL};
    CHECK(argv_is(&a, w0), "backslash-newline and empty words: %u", a.n);
    st_arm_argv_release(&a);
    CHECK(st_compose_split("a 'b", &a, err, sizeof(err)) == ST_EPARSE, "unterminated quote");
    CHECK(strstr(err, "single quote") != NULL, "%s", err);
    st_arm_argv_release(&a);

    st_compose_value_words("[1, 3]", &a);
    st_compose_value_words("[]", &a);
    st_compose_value_words("0.985", &a);
    const char *const w2[] = {"1", "3", "0.985", NULL};
    CHECK(argv_is(&a, w2), "value words: %u", a.n);
    st_arm_argv_release(&a);

    const char *const cmd[] = {"serve",
                               "/m",
                               "--num-speculative-tokens",
                               "2",
                               "--cuda-graph-sizes",
                               "1",
                               "3",
                               "--max-num-batched-tokens=2048",
                               "--port",
                               "8000",
                               "--offset",
                               "-1",
                               NULL};
    for (size_t i = 0; cmd[i]; i++) {
        st_arm_argv_push(&a, cmd[i]);
    }
    CHECK(st_compose_rewrite(&a, "num_speculative_tokens", "1", 1) == 1, "replaced");
    CHECK(st_compose_rewrite(&a, "cuda_graph_sizes", "[1, 2, 4]", 1) == 1, "replaced a list");
    CHECK(st_compose_rewrite(&a, "max_num_batched_tokens", "1024", 1) == 1, "replaced --x=v");
    CHECK(st_compose_rewrite(&a, "offset", "[5]", 1) == 1, "a negative number is a value");
    CHECK(st_compose_rewrite(&a, "max_num_seqs", "1", 1) == 0, "appended");
    CHECK(st_compose_rewrite(&a, "image_digest", "sha256:x", 0) == 0, "left out");
    const char *const w3[] = {"serve",
                              "/m",
                              "--num-speculative-tokens",
                              "1",
                              "--cuda-graph-sizes",
                              "1",
                              "2",
                              "4",
                              "--max-num-batched-tokens",
                              "1024",
                              "--port",
                              "8000",
                              "--offset",
                              "5",
                              "--max-num-seqs",
                              "1",
                              NULL};
    CHECK(argv_is(&a, w3), "rewrite: %u words", a.n);
    st_arm_argv_release(&a);
}

/* The CLI runner: status, both outputs, the 1 MiB cap, the deadline, a grandchild holding the
 * pipes, a missing program. */
static void test_run(void)
{
    struct st_compose_call k;
    char err[256] = "";
    const char *const a1[] = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3", NULL};
    CHECK(st_compose_run(a1, 10, &k, err, sizeof(err)) == 0, "%s", err);
    CHECK(k.status == 3 && !k.timed_out && strcmp(st_buf_str(&k.out), "out\n") == 0 &&
              strcmp(st_buf_str(&k.err), "err\n") == 0,
          "status %d out '%s' err '%s'", k.status, st_buf_str(&k.out), st_buf_str(&k.err));
    st_compose_call_release(&k);

    const char *const a2[] = {"/bin/sh", "-c", "head -c 3000000 /dev/zero", NULL};
    CHECK(st_compose_run(a2, 10, &k, err, sizeof(err)) == 0 && k.status == 0 &&
              k.out.len == (1u << 20),
          "capped at 1 MiB: %zu", k.out.len);
    st_compose_call_release(&k);

    const char *const a3[] = {"/bin/sleep", "5", NULL};
    CHECK(st_compose_run(a3, 0.3, &k, err, sizeof(err)) == 0, "%s", err);
    CHECK(k.timed_out && k.status == 128 + SIGKILL && k.seconds < 2, "deadline: %d %d %.2f",
          k.timed_out, k.status, k.seconds);
    st_compose_call_release(&k);

    const char *const a4[] = {"/bin/sh", "-c", "sleep 30 & echo $!", NULL};
    CHECK(st_compose_run(a4, 10, &k, err, sizeof(err)) == 0, "%s", err);
    CHECK(k.status == 0 && !k.timed_out && k.seconds < 2, "a grandchild holding the pipes: %d %.2f",
          k.status, k.seconds);
    long bg = strtol(st_buf_str(&k.out), NULL, 10);
    if (bg > 1) {
        kill((pid_t)bg, SIGKILL);
    }
    st_compose_call_release(&k);

    const char *const a5[] = {"/nonexistent/docker", "ps", NULL};
    CHECK(st_compose_run(a5, 10, &k, err, sizeof(err)) == -ENOENT && k.status == -1, "missing: %s",
          err);
    st_compose_call_release(&k);
}

/* ---- the backend against the engine (real, or the fake where marked) ---- */

static const char plan_fmt[] =
    "name: compose-e2e\n"
    "target:\n"
    "  kind: compose\n"
    "  compose_file: deploy/docker-compose.yml\n"
    "  service: vlm\n"
    "  override: command\n"
    "  base_url: http://127.0.0.1:%d\n"
    "  health_url: http://127.0.0.1:%d/health\n"
    "  health_timeout_s: 30\n"
    "  stop_timeout_s: 5\n"
    "baseline:\n"
    "  num_speculative_tokens: 2\n"
    "  cuda_graph_sizes: [1, 3]\n"
    "  gpu_memory_utilization: 0.985\n"
    "  alloc_mb: 0\n"
    "fixed:\n"
    "  image_digest: sha256:0f3c1e5a9b7d\n"
    "  max_model_len: 131072\n"
    "arms:\n"
    "  - name: mtp1\n"
    "    set: {num_speculative_tokens: 1, cuda_graph_sizes: [1, 2]}\n"
    "    multi_variable: true\n"
    "  - name: oom\n"
    "    set: {alloc_mb: 1024}\n"
    "stages:\n"
    "  screening:\n"
    "    - {id: dec, kind: bench, output_tokens: 2048, categories: [code]}\n"
    "  full:\n"
    "    - {id: long, kind: bench, output_tokens: 16384}\n"
    "    - {id: mixed, kind: soak, duration_s: 600}\n"
    "rules:\n"
    "  metrics:\n"
    "    - {metric: dec.decode_tps@code}\n";

/* The deployment for the real engine: the image's /bin/serve turns the flags into `servetune
 * sim` on the port; --alloc-mb N allocates N MiB instead (the kernel OOM-kills it at 512 MiB). */
static const char compose_real_fmt[] =
    "# the service as deployed before the trial\n"
    "services:\n"
    "  vlm:\n"
    "    image: %s\n"
    "    network_mode: host\n"
    "    restart: unless-stopped\n"
    "    mem_limit: 512m\n"
    "    env_file: sim.env\n"
    "    healthcheck:\n"
    "      test: [\"CMD\", \"wget\", \"-q\", \"-O\", \"/dev/null\", "
    "\"http://127.0.0.1:%d/health\"]\n"
    "      interval: 1s\n"
    "      retries: 2\n"
    "    command: >-\n"
    "      /bin/serve --port %d --alloc-mb 0 --num-speculative-tokens 2 --cuda-graph-sizes 1 3\n"
    "      --gpu-memory-utilization 0.985 --max-model-len 131072\n";

/* The same for the fake: SIM_PROFILE and SIM_PORT say what it runs. */
static const char compose_fake_fmt[] =
    "# the service as deployed before the trial\n"
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
    "      --gpu-memory-utilization 0.985 --max-model-len 131072 --port 8000\n";

static void arm_env(struct st_arm_env *env, const char *sub, char *dir, size_t len)
{
    path_join(dir, len, tmp, sub);
    mkdir(dir, 0755);
    memset(env, 0, sizeof(*env));
    env->plan_dir = tmp;
    env->dir = dir;
    env->docker = docker;
}

/* The saved state: check what was recorded; keeps the object in saved. */
static void test_save(const struct st_plan *p, struct st_buf *saved)
{
    struct st_arm_env env;
    char dir[400], err[512] = "", detail[512] = "";
    arm_env(&env, "save", dir, sizeof(dir));

    /* Nothing runs yet: the policy comes from the compose file. */
    struct st_buf j;
    st_buf_init(&j);
    CHECK(st_compose_save_state(ARM_PLAN(p), &env, &j, err, sizeof(err)) == 0, "%s", err);
    CHECK(strstr(st_buf_str(&j), "\"restart_policy\":\"unless-stopped\"") &&
              strstr(st_buf_str(&j), "\"restart_policy_source\":\"compose_file\""),
          "%s", st_buf_str(&j));

    /* The service as deployed: up with the compose file as it is, left running. */
    struct st_compose *c = NULL;
    st_buf_clear(&j);
    int rc = st_compose_up(ARM_PLAN(p), NULL, NULL, &env, &c, &j, detail, sizeof(detail), err,
                           sizeof(err));
    CHECK(rc == 0 && c, "up (as deployed): %d %s %s", rc, detail, err);
    CHECK(wait_healthy(20000) == 200, "the deployed service answers /health");
    CHECK(st_compose_release(c, 1, NULL) == 0, "release, left running");

    rc = st_compose_save_state(ARM_PLAN(p), &env, saved, err, sizeof(err));
    CHECK(rc == 0, "save_state: %d %s", rc, err);
    struct st_json d;
    st_json_init(&d, 0);
    CHECK(st_json_parse(&d, saved->data, saved->len) == 0, "saved state is JSON: %s",
          st_buf_str(saved));
    struct st_buf text, s;
    st_buf_init(&text);
    st_buf_init(&s);
    char hex[ST_SHA256_HEX];
    CHECK(read_text(compose_path, &text) == 0, "read compose");
    st_sha256_hex(text.data, text.len, hex);
    int cf = st_json_get(&d, 0, "compose_file");
    CHECK(st_json_streq(&d, st_json_get(&d, cf, "sha256"), hex), "compose file hash");
    CHECK(st_json_streq(&d, st_json_get(&d, cf, "path"), compose_path), "compose file path");
    if (st_json_str(&d, st_json_get(&d, cf, "saved"), &s) == 0) {
        struct st_buf copy;
        st_buf_init(&copy);
        CHECK(read_text(st_buf_str(&s), &copy) == 0 && copy.len == text.len &&
                  memcmp(copy.data, text.data, text.len) == 0,
              "the saved copy %s equals the file", st_buf_str(&s));
        struct stat sb;
        CHECK(stat(st_buf_str(&s), &sb) == 0 && (sb.st_mode & 0777) == 0644, "copy mode 0644");
        st_buf_release(&copy);
    }
    CHECK(read_text(env_path, &text) == 0, "read env file");
    st_sha256_hex(text.data, text.len, hex);
    int ef = st_json_at(&d, st_json_get(&d, 0, "env_files"), 0);
    CHECK(st_json_streq(&d, st_json_get(&d, ef, "sha256"), hex), "env file hash");
    st_buf_clear(&s);
    if (st_json_str(&d, st_json_get(&d, ef, "saved"), &s) == 0) {
        struct stat sb;
        CHECK(stat(st_buf_str(&s), &sb) == 0 && (sb.st_mode & 0777) == 0600, "env copy 0600");
    }
    CHECK(st_json_streq(&d, st_json_get(&d, 0, "restart_policy"), "unless-stopped"),
          "restart policy saved: %s", st_buf_str(saved));
    CHECK(st_json_streq(&d, st_json_get(&d, 0, "restart_policy_source"), "inspect"),
          "from inspect");
    CHECK(st_json_type(&d, st_json_get(&d, 0, "running")) == ST_JSON_TRUE, "running saved");
    CHECK(st_json_type(&d, st_json_get(&d, 0, "oom_killed")) == ST_JSON_FALSE, "OOMKilled");
    st_json_release(&d);
    st_buf_release(&text);
    st_buf_release(&s);
    st_buf_release(&j);
}

static void test_arm_ok(const struct st_plan *p)
{
    struct st_arm_env env;
    char dir[400], err[512] = "", detail[512] = "";
    arm_env(&env, "arm-mtp1", dir, sizeof(dir));
    struct st_target_params ps = {0};
    CHECK(st_plan_arm_params(p, 0, NULL, &ps, err, sizeof(err)) == 0, "%s", err);
    struct st_buf j, b;
    st_buf_init(&j);
    st_buf_init(&b);
    struct st_compose *c = NULL;
    int rc = st_compose_up(ARM_PLAN(p), "mtp1", &ps, &env, &c, &j, detail, sizeof(detail), err,
                           sizeof(err));
    CHECK(rc == 0 && c, "up mtp1: %d %s %s", rc, detail, err);
    char ov[500];
    path_join(ov, sizeof(ov), dir, "compose.override.yml");
    CHECK(read_text(ov, &b) == 0, "override written");
    const char *t = st_buf_str(&b);
    CHECK(strstr(t, "\"--num-speculative-tokens\", \"1\"") &&
              strstr(t, "\"--cuda-graph-sizes\", \"1\", \"2\"") &&
              strstr(t, "\"--gpu-memory-utilization\", \"0.985\"") &&
              strstr(t, "\"--max-model-len\", \"131072\"") && !strstr(t, "image-digest") &&
              strstr(t, "restart: \"no\""),
          "override: %s", t);
    struct st_json d;
    st_json_init(&d, 0);
    CHECK(st_json_parse(&d, j.data, j.len) == 0, "evidence is JSON: %s", st_buf_str(&j));
    CHECK(st_json_streq(&d, st_json_get(&d, 0, "result"), "ok"), "%s", st_buf_str(&j));
    CHECK(st_json_streq(&d, st_json_at(&d, st_json_get(&d, 0, "not_applied"), 0), "image_digest"),
          "image_digest not applied");
    CHECK(st_json_get(&d, 0, "calls") >= 0 &&
              st_json_get(&d, st_json_at(&d, st_json_get(&d, 0, "calls"), 2), "argv") >= 0,
          "calls recorded");
    st_json_release(&d);
    char id[160], policy[64];
    int64_t pid = 0;
    evidence_container(&j, id, sizeof(id));
    CHECK(cli_inspect(id, policy, sizeof(policy), &pid, NULL) == 0 && strcmp(policy, "no") == 0,
          "restart policy from docker inspect: '%s'", policy);
    CHECK(strstr(st_buf_str(&j), "\"compose_cli\":\"/usr/bin/docker-compose\""),
          "v1's docker-compose next to %s: %s", docker, st_buf_str(&j));
    CHECK(wait_healthy(20000) == 200, "the arm answers /health");
    CHECK(st_compose_check(c, detail, sizeof(detail)) == ST_ARM_OK, "check: %s", detail);
    st_buf_clear(&b);
    st_compose_logs(c, 4096, &b);
    CHECK(strstr(st_buf_str(&b), "listening on 127.0.0.1:") != NULL, "logs: %s", st_buf_str(&b));

    /* The server process dies: the container stops, check says EXIT. */
    CHECK(pid > 1 && kill((pid_t)pid, SIGKILL) == 0, "kill the container's process %lld",
          (long long)pid);
    enum st_arm_fail f = wait_failed(c, detail, sizeof(detail), 15000);
    CHECK(f == ST_ARM_FAIL_EXIT && strstr(detail, "exit code 137"), "after kill: %d %s", (int)f,
          detail);
    st_buf_clear(&j);
    CHECK(st_compose_release(c, 0, &j) == 0, "release: %s", st_buf_str(&j));
    CHECK(strstr(st_buf_str(&j), "\"stopped\":true") != NULL, "%s", st_buf_str(&j));
    st_json_init(&d, 0);
    CHECK(st_json_parse(&d, j.data, j.len) == 0, "stop evidence is JSON: %s", st_buf_str(&j));
    st_json_release(&d);
    st_target_params_release(&ps);
    st_buf_release(&j);
    st_buf_release(&b);
}

/* The kernel's OOM killer ends the arm (--alloc-mb 1024 in a 512 MiB limit): OOM. */
static void test_arm_oom(const struct st_plan *p)
{
    struct st_arm_env env;
    char dir[400], err[512] = "", detail[512] = "";
    arm_env(&env, "arm-oom", dir, sizeof(dir));
    struct st_target_params ps = {0};
    CHECK(st_plan_arm_params(p, 1, NULL, &ps, err, sizeof(err)) == 0, "%s", err);
    struct st_buf j;
    st_buf_init(&j);
    struct st_compose *c = NULL;
    int rc = st_compose_up(ARM_PLAN(p), "oom", &ps, &env, &c, &j, detail, sizeof(detail), err,
                           sizeof(err));
    CHECK(rc == 0 && c, "up oom (the container is created): %d %s %s", rc, detail, err);
    enum st_arm_fail f = wait_failed(c, detail, sizeof(detail), 15000);
    CHECK(f == ST_ARM_FAIL_OOM && strstr(detail, "OOMKilled") && strstr(detail, "exit code 137"),
          "the kernel OOM-killed it: %d %s", (int)f, detail);
    CHECK(st_compose_release(c, 0, NULL) == 0, "release");
    st_target_params_release(&ps);
    st_buf_release(&j);
}

/* Polls docker inspect of id until its health is want (or timeout_ms). Returns 1 when it was. */
static int wait_engine_health(const char *id, const char *want, long timeout_ms)
{
    uint64_t end = st_clock_mono_ns() + (uint64_t)timeout_ms * ST_NS_PER_MS;
    struct st_buf out;
    st_buf_init(&out);
    char pat[64];
    snprintf(pat, sizeof(pat), "\"Status\":\"%s\"", want); /* compact JSON */
    int ok = 0;
    while (!ok && st_clock_mono_ns() < end) {
        ok =
            cli_run(&out, "inspect", "-f", "{{json .State.Health}}", id, (const char *)NULL) == 0 &&
            strstr(st_buf_str(&out), pat) != NULL;
        if (!ok) {
            sleep_ms(100);
        }
    }
    st_buf_release(&out);
    return ok;
}

/* The deployment (unless-stopped) killed: the engine restarts it, and Running reads true again;
 * check says EXIT, restarted by the engine. */
static void test_restart_engine(const struct st_plan *p)
{
    struct st_arm_env env;
    char dir[400], err[512] = "", detail[512] = "";
    arm_env(&env, "restart", dir, sizeof(dir));
    struct st_buf j;
    st_buf_init(&j);
    struct st_compose *c = NULL;
    int rc = st_compose_up(ARM_PLAN(p), NULL, NULL, &env, &c, &j, detail, sizeof(detail), err,
                           sizeof(err));
    CHECK(rc == 0 && c, "up (as deployed): %d %s %s", rc, detail, err);
    CHECK(wait_healthy(20000) == 200, "the deployment answers /health");
    CHECK(st_compose_check(c, detail, sizeof(detail)) == ST_ARM_OK, "check: %s", detail);
    char id[160], policy[64];
    int64_t pid = 0, restarts = 0, pid2 = 0;
    evidence_container(&j, id, sizeof(id));
    CHECK(cli_inspect(id, policy, sizeof(policy), &pid, &restarts) == 0 &&
              strcmp(policy, "unless-stopped") == 0 && restarts == 0,
          "policy %s, restarts %lld", policy, (long long)restarts);
    CHECK(pid > 1 && kill((pid_t)pid, SIGKILL) == 0, "kill %lld", (long long)pid);
    uint64_t end = st_clock_mono_ns() + 15 * ST_NS_PER_S;
    while (st_clock_mono_ns() < end &&
           (cli_inspect(id, policy, sizeof(policy), &pid2, &restarts) != 0 || restarts < 1 ||
            pid2 <= 1)) {
        sleep_ms(100);
    }
    CHECK(restarts >= 1 && pid2 > 1 && pid2 != pid, "the engine restarted it: %lld, pid %lld",
          (long long)restarts, (long long)pid2);
    enum st_arm_fail f = st_compose_check(c, detail, sizeof(detail));
    CHECK(f == ST_ARM_FAIL_EXIT && strstr(detail, "restarted by the engine") &&
              strstr(detail, "unless-stopped"),
          "a restarted server is not OK: %d %s", (int)f, detail);
    CHECK(st_compose_release(c, 0, NULL) == 0, "stop");
    st_buf_release(&j);
}

/* A stopped container's health status (20.10: "unhealthy", from no probe) is not the health
 * now: the saved state has it as last_health, health empty, running false. */
static void test_stopped_health(const struct st_plan *p)
{
    struct st_arm_env env;
    char dir[400], err[512] = "", detail[512] = "";
    arm_env(&env, "stopped", dir, sizeof(dir));
    struct st_buf j;
    st_buf_init(&j);
    struct st_compose *c = NULL;
    int rc = st_compose_up(ARM_PLAN(p), NULL, NULL, &env, &c, &j, detail, sizeof(detail), err,
                           sizeof(err));
    CHECK(rc == 0 && c, "up (as deployed): %d %s %s", rc, detail, err);
    char id[160];
    evidence_container(&j, id, sizeof(id));
    CHECK(wait_engine_health(id, "healthy", 20000), "the engine's healthcheck says healthy");
    CHECK(st_compose_release(c, 0, NULL) == 0, "stop");
    st_buf_clear(&j);
    CHECK(st_compose_save_state(ARM_PLAN(p), &env, &j, err, sizeof(err)) == 0, "%s", err);
    const char *t = st_buf_str(&j);
    CHECK(strstr(t, "\"running\":false") && strstr(t, "\"health\":\"\"") &&
              strstr(t, "\"last_health\":\"unhealthy\""),
          "a stopped deployment's saved state: %s", t);
    st_buf_release(&j);
}

/* ---- the fake CLI: faults a real engine cannot stage ---- */

/* docker inspect failing (the fake's fail file): EXIT with docker's message; then fine. */
static void test_inspect_fails_fake(const struct st_plan *p)
{
    struct st_arm_env env;
    char dir[400], err[512] = "", detail[512] = "";
    arm_env(&env, "arm-inspect-fake", dir, sizeof(dir));
    struct st_target_params ps = {0};
    CHECK(st_plan_arm_params(p, 0, NULL, &ps, err, sizeof(err)) == 0, "%s", err);
    struct st_compose *c = NULL;
    int rc = st_compose_up(ARM_PLAN(p), "mtp1", &ps, &env, &c, NULL, detail, sizeof(detail), err,
                           sizeof(err));
    CHECK(rc == 0 && c, "up mtp1 (fake): %d %s %s", rc, detail, err);
    CHECK(wait_healthy(20000) == 200, "the arm answers /health");
    CHECK(st_compose_check(c, detail, sizeof(detail)) == ST_ARM_OK, "check: %s", detail);
    char failfile[400];
    path_join(failfile, sizeof(failfile), state, "fail");
    CHECK(write_text(failfile, "inspect\n", "w") == 0, "fail file");
    CHECK(st_compose_check(c, detail, sizeof(detail)) == ST_ARM_FAIL_EXIT &&
              strstr(detail, "docker inspect failed (exit 1)") &&
              strstr(detail, "injected failure of 'inspect'"),
          "inspect fails: %s", detail);
    unlink(failfile);
    CHECK(st_compose_check(c, detail, sizeof(detail)) == ST_ARM_OK, "check again: %s", detail);
    CHECK(st_compose_release(c, 0, NULL) == 0, "release");
    st_target_params_release(&ps);
}

static void test_docker_fails_fake(const struct st_plan *p)
{
    struct st_arm_env env;
    char dir[400], err[512] = "", detail[512] = "";
    arm_env(&env, "arm-fail", dir, sizeof(dir));
    struct st_target_params ps = {0};
    CHECK(st_plan_arm_params(p, 0, NULL, &ps, err, sizeof(err)) == 0, "%s", err);
    struct st_buf j, out;
    st_buf_init(&j);
    st_buf_init(&out);
    struct st_compose *c = NULL;

    setenv("FAKE_DOCKER_FAIL", "up", 1);
    int rc = st_compose_up(ARM_PLAN(p), "mtp1", &ps, &env, &c, &j, detail, sizeof(detail), err,
                           sizeof(err));
    CHECK(rc == ST_ARM_FAIL_START && c == NULL, "up fails: %d", rc);
    CHECK(strstr(detail, "docker compose up failed (exit 1)") &&
              strstr(detail, "injected failure of 'up'"),
          "detail: %s", detail);
    CHECK(strstr(st_buf_str(&j), "\"result\":\"start\"") != NULL, "%s", st_buf_str(&j));
    struct st_json d;
    st_json_init(&d, 0);
    CHECK(st_json_parse(&d, j.data, j.len) == 0, "evidence of a failed up is JSON: %s",
          st_buf_str(&j));
    st_json_release(&d);

    /* update fails after up: START, and the container is stopped again. */
    setenv("FAKE_DOCKER_FAIL", "update", 1);
    st_buf_clear(&j);
    rc = st_compose_up(ARM_PLAN(p), "mtp1", &ps, &env, &c, &j, detail, sizeof(detail), err,
                       sizeof(err));
    CHECK(rc == ST_ARM_FAIL_START && c == NULL, "update fails: %d", rc);
    CHECK(strstr(detail, "docker update --restart=no failed"), "detail: %s", detail);
    unsetenv("FAKE_DOCKER_FAIL");
    char ov[500];
    path_join(ov, sizeof(ov), dir, "compose.override.yml");
    CHECK(cli_run(&out, "compose", "-f", compose_path, "-f", ov, "ps", "-q", "vlm",
                  (const char *)NULL) == 0 &&
              out.len == 0,
          "nothing left running: '%s'", st_buf_str(&out));

    /* No docker CLI at all: an error of ours, not an arm failure. */
    env.docker = "/nonexistent/docker";
    rc = st_compose_up(ARM_PLAN(p), "mtp1", &ps, &env, &c, &j, detail, sizeof(detail), err,
                       sizeof(err));
    CHECK(rc == -ENOENT && c == NULL && strstr(err, "/nonexistent/docker"), "no CLI: %d %s", rc,
          err);
    st_target_params_release(&ps);
    st_buf_release(&j);
    st_buf_release(&out);
}

static void test_restore(const struct st_plan *p, const struct st_buf *saved)
{
    struct st_arm_env env;
    char dir[400], err[512] = "", detail[512] = "";
    arm_env(&env, "restore", dir, sizeof(dir));
    struct st_buf j, checks;
    st_buf_init(&j);
    st_buf_init(&checks);
    struct st_compose *c = NULL;
    int rc = st_compose_up(ARM_PLAN(p), NULL, NULL, &env, &c, &j, detail, sizeof(detail), err,
                           sizeof(err));
    CHECK(rc == 0 && c, "up (restore): %d %s %s", rc, detail, err);
    CHECK(wait_healthy(20000) == 200, "the restored service answers /health");
    int ok = -1;
    st_buf_puts(&checks, "[");
    rc = st_compose_prove(c, ARM_PLAN(p), &env, saved->data, saved->len, &checks, &ok, err,
                          sizeof(err));
    st_buf_puts(&checks, "]");
    CHECK(rc == 0 && ok == 1, "prove: %d ok %d %s %s", rc, ok, err, st_buf_str(&checks));
    struct st_json d;
    st_json_init(&d, 0);
    CHECK(st_json_parse(&d, checks.data, checks.len) == 0, "checks are JSON: %s",
          st_buf_str(&checks));
    CHECK(st_json_type(&d, 0) == ST_JSON_ARRAY && d.toks[0].size >= 5, "%s", st_buf_str(&checks));
    char id[160], policy[64];
    int64_t pid;
    evidence_container(&j, id, sizeof(id));
    CHECK(cli_inspect(id, policy, sizeof(policy), &pid, NULL) == 0 &&
              strcmp(policy, "unless-stopped") == 0,
          "restart policy back: '%s'", policy);

    /* The saved state wrapped by the caller, and one that is not a saved state. */
    struct st_buf wrapped;
    st_buf_init(&wrapped);
    st_buf_printf(&wrapped, "{\"compose\":%s}", st_buf_str(saved));
    st_buf_clear(&checks);
    rc = st_compose_prove(c, ARM_PLAN(p), &env, wrapped.data, wrapped.len, &checks, &ok, err,
                          sizeof(err));
    CHECK(rc == 0 && ok == 1, "prove (wrapped): %d ok %d %s", rc, ok, err);
    rc = st_compose_prove(c, ARM_PLAN(p), &env, "{\"x\":1}", 7, &checks, &ok, err, sizeof(err));
    CHECK(rc == ST_EPARSE && ok == 0 && strstr(err, "saved state"), "not a state: %d %s", rc, err);
    st_buf_release(&wrapped);

    /* The compose file changed: the hash check fails. */
    CHECK(write_text(compose_path, "# edited\n", "a") == 0, "append a comment");
    st_buf_clear(&checks);
    st_buf_puts(&checks, "[");
    rc = st_compose_prove(c, ARM_PLAN(p), &env, saved->data, saved->len, &checks, &ok, err,
                          sizeof(err));
    st_buf_puts(&checks, "]");
    CHECK(rc == 0 && ok == 0, "prove after the edit: %d ok %d", rc, ok);
    CHECK(st_json_parse(&d, checks.data, checks.len) == 0, "JSON");
    int failed_hash = 0, others_ok = 1;
    for (int i = st_json_first(&d, 0); i >= 0; i = st_json_next(&d, 0, i)) {
        struct st_buf name;
        st_buf_init(&name);
        if (st_json_str(&d, st_json_get(&d, i, "name"), &name) != 0) {
            others_ok = 0;
        }
        int good = st_json_type(&d, st_json_get(&d, i, "ok")) == ST_JSON_TRUE;
        if (strncmp(st_buf_str(&name), "compose_file_sha256", 19) == 0) {
            failed_hash = !good;
        } else if (!good) {
            others_ok = 0;
        }
        st_buf_release(&name);
    }
    CHECK(failed_hash && others_ok, "only the hash fails: %s", st_buf_str(&checks));
    st_json_release(&d);
    CHECK(st_compose_release(c, 0, NULL) == 0, "stop the restored service");
    st_buf_release(&j);
    st_buf_release(&checks);
}

/* override: environment, with the list forms of command, environment and env_file, and a merge
 * key (<<: *sim) for the image and the restart policy. */
static const char plan_env_fmt[] = "name: compose-env\n"
                                   "target:\n"
                                   "  kind: compose\n"
                                   "  compose_file: deploy-env/docker-compose.yml\n"
                                   "  service: vlm\n"
                                   "  override: environment\n"
                                   "  base_url: http://127.0.0.1:%d\n"
                                   "  health_url: http://127.0.0.1:%d/health\n"
                                   "  stop_timeout_s: 5\n"
                                   "baseline:\n"
                                   "  num_speculative_tokens: 2\n"
                                   "fixed:\n"
                                   "  max_model_len: 131072\n"
                                   "arms:\n"
                                   "  - name: mtp3\n"
                                   "    set: {num_speculative_tokens: 3}\n"
                                   "stages:\n"
                                   "  screening:\n"
                                   "    - {id: dec, kind: bench, output_tokens: 2048, "
                                   "categories: [code]}\n"
                                   "  full:\n"
                                   "    - {id: long, kind: bench, output_tokens: 16384}\n"
                                   "    - {id: mixed, kind: soak, duration_s: 600}\n"
                                   "rules:\n"
                                   "  metrics:\n"
                                   "    - {metric: dec.decode_tps@code}\n";

/* The fake answers as a v2 Compose: env_file's {path, required: false} form (Compose 2.24) is
 * read there; docker-compose 1.29 refuses it, so the real engine's file lists paths only. */
static const char compose_env_fake_fmt[] =
    "x-sim: &sim\n"
    "  image: servetune/sim\n"
    "  restart: \"no\"\n"
    "services:\n"
    "  vlm:\n"
    "    <<: *sim\n"
    "    env_file: [../deploy/sim.env, {path: missing.env, required: false}]\n"
    "    environment:\n"
    "      - SIM_PROFILE=%s\n"
    "      - SIM_PORT=%d\n"
    "      - num_speculative_tokens=2\n"
    "    command: [\"serve\", \"/models/vl\", \"--num-speculative-tokens\", \"2\"]\n";

static const char compose_env_real_fmt[] =
    "x-sim: &sim\n"
    "  image: %s\n"
    "  network_mode: host\n"
    "  restart: \"no\"\n"
    "services:\n"
    "  vlm:\n"
    "    <<: *sim\n"
    "    env_file: [../deploy/sim.env]\n"
    "    environment:\n"
    "      - num_speculative_tokens=2\n"
    "    command: [\"/bin/serve\", \"--port\", \"%d\", \"--num-speculative-tokens\", \"2\"]\n";

/* override: environment against the real engine (image set) or the fake (v2's env_file form). */
static void test_override_env(const char *profile)
{
    char deploy[300], file[400], err[512] = "", detail[512] = "";
    path_join(deploy, sizeof(deploy), tmp, "deploy-env");
    mkdir(deploy, 0755);
    path_join(file, sizeof(file), deploy, "docker-compose.yml");
    struct st_buf text, j, out;
    st_buf_init(&text);
    st_buf_init(&j);
    st_buf_init(&out);
    if (image) {
        st_buf_printf(&text, compose_env_real_fmt, image, port);
    } else {
        st_buf_printf(&text, compose_env_fake_fmt, profile, port);
    }
    CHECK(write_text(file, st_buf_str(&text), "w") == 0, "write %s", file);
    st_buf_clear(&text);
    st_buf_printf(&text, plan_env_fmt, port, port);
    struct st_plan p;
    if (st_plan_parse("plan-env.yaml", text.data, text.len, &p, err, sizeof(err)) != 0) {
        CHECK(0, "plan: %s", err);
        st_buf_release(&text);
        return;
    }
    struct st_arm_env env;
    char dir[400];
    arm_env(&env, "arm-env", dir, sizeof(dir));
    CHECK(st_compose_save_state(ARM_PLAN(&p), &env, &j, err, sizeof(err)) == 0, "save: %s", err);
    CHECK((image || strstr(st_buf_str(&j), "missing.env\",\"exists\":false")) &&
              strstr(st_buf_str(&j), "\"restart_policy\":\"no\""),
          "env files and policy: %s", st_buf_str(&j));
    char declared[300];
    snprintf(declared, sizeof(declared), "\"declared\":{\"image\":\"%s\",\"restart\":\"no\"}",
             image ? image : "servetune/sim");
    CHECK(strstr(st_buf_str(&j), declared), "the merge key resolved: %s", st_buf_str(&j));
    struct st_target_params ps = {0};
    CHECK(st_plan_arm_params(&p, 0, NULL, &ps, err, sizeof(err)) == 0, "%s", err);
    struct st_compose *c = NULL;
    st_buf_clear(&j);
    int rc = st_compose_up(ARM_PLAN(&p), "mtp3", &ps, &env, &c, &j, detail, sizeof(detail), err,
                           sizeof(err));
    CHECK(rc == 0 && c, "up mtp3: %d %s %s", rc, detail, err);
    char ov[500];
    path_join(ov, sizeof(ov), dir, "compose.override.yml");
    CHECK(read_text(ov, &text) == 0 &&
              strstr(st_buf_str(&text), "\"num_speculative_tokens\": \"3\"") &&
              !strstr(st_buf_str(&text), "max_model_len") && !strstr(st_buf_str(&text), "command"),
          "override: %s", st_buf_str(&text));
    CHECK(strstr(st_buf_str(&j), "\"not_applied\":[\"max_model_len\"]") != NULL, "%s",
          st_buf_str(&j));
    char id[160];
    evidence_container(&j, id, sizeof(id));
    CHECK(cli_run(&out, "inspect", id, (const char *)NULL) == 0 &&
              strstr(st_buf_str(&out), "\"num_speculative_tokens=3\"") &&
              strstr(st_buf_str(&out), "\"SIM_SPEED=1000\""),
          "the container's environment: %s", st_buf_str(&out));
    CHECK(wait_healthy(20000) == 200, "the env arm answers /health");
    CHECK(st_compose_check(c, detail, sizeof(detail)) == ST_ARM_OK, "check: %s", detail);
    CHECK(st_compose_release(c, 0, NULL) == 0, "release");
    st_target_params_release(&ps);
    st_plan_release(&p);
    st_buf_release(&text);
    st_buf_release(&j);
    st_buf_release(&out);
}

/* Compose files the backend refuses, before any docker call. */
static void test_bad_compose(void)
{
    char deploy[300], file[400], err[512] = "", detail[512] = "";
    path_join(deploy, sizeof(deploy), tmp, "deploy-bad");
    mkdir(deploy, 0755);
    path_join(file, sizeof(file), deploy, "docker-compose.yml");
    struct st_buf text, plan;
    st_buf_init(&text);
    st_buf_init(&plan);
    st_buf_printf(&text, plan_fmt, port, port);
    const char *at = strstr(st_buf_str(&text), "deploy/");
    st_buf_append(&plan, text.data, (size_t)(at - text.data));
    st_buf_printf(&plan, "deploy-bad/%s", at + strlen("deploy/"));
    struct st_plan p;
    if (st_plan_parse("plan-bad.yaml", plan.data, plan.len, &p, err, sizeof(err)) != 0) {
        CHECK(0, "plan: %s", err);
        st_buf_release(&text);
        st_buf_release(&plan);
        return;
    }
    struct st_arm_env env;
    char dir[400];
    arm_env(&env, "arm-bad", dir, sizeof(dir));
    struct st_target_params ps = {0};
    CHECK(st_plan_arm_params(&p, 0, NULL, &ps, err, sizeof(err)) == 0, "%s", err);
    static const struct {
        const char *yaml; /* NULL: no file */
        int rc;
        const char *msg;
    } cases[] = {
        {NULL, -ENOENT, "docker-compose.yml"},
        {"services: [\n", ST_EPARSE, "docker-compose.yml"},
        {"services:\n  other: {image: x}\n", ST_EPARSE, "no service 'vlm'"},
        {"services:\n  vlm: {image: servetune/sim}\n", ST_EUSAGE, "has no command"},
        {"services:\n  vlm: {image: servetune/sim, command: \"serve 'x\"}\n", ST_EPARSE,
         "unterminated single quote"},
        {"services:\n  vlm: {image: servetune/sim, command: {a: b}}\n", ST_EPARSE,
         "expected a string or a list"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        unlink(file);
        if (cases[i].yaml) {
            CHECK(write_text(file, cases[i].yaml, "w") == 0, "write");
        }
        struct st_compose *c = NULL;
        err[0] = '\0';
        int rc = st_compose_up(ARM_PLAN(&p), "mtp1", &ps, &env, &c, NULL, detail, sizeof(detail),
                               err, sizeof(err));
        CHECK(rc == cases[i].rc && c == NULL && strstr(err, cases[i].msg),
              "case %zu: %d (want %d) '%s'", i, rc, cases[i].rc, err);
        if (c) {
            CHECK(st_compose_release(c, 0, NULL) == 0, "release");
        }
    }
    st_target_params_release(&ps);
    st_plan_release(&p);
    st_buf_release(&text);
    st_buf_release(&plan);
}

int main(void)
{
    const char *servetune = getenv("SERVETUNE");
    const char *e2e = getenv("ST_E2E_DIR");
    if (!servetune || !e2e) {
        fprintf(stderr, "SERVETUNE and ST_E2E_DIR must be set (meson test sets them)\n");
        return 1;
    }
    /* Real mode when tests/support/dockerlib.py runs this against its engine. */
    const char *real_cli = getenv("ST_DOCKER");
    image = real_cli ? getenv("ST_DOCKER_IMAGE") : NULL;
    if (real_cli && !image) {
        fprintf(stderr, "ST_DOCKER without ST_DOCKER_IMAGE\n");
        return 1;
    }
    if (real_cli) {
        snprintf(docker, sizeof(docker), "%s", real_cli);
    } else {
        snprintf(docker, sizeof(docker), "%s/../support/fake-docker", e2e);
    }
    char profile[1024];
    snprintf(profile, sizeof(profile), "%s/../../profiles/seed000-vl-mtp.yaml", e2e);
    char *rp = realpath(profile, NULL);
    if (!rp) {
        fprintf(stderr, "%s: %s\n", profile, strerror(errno));
        return 1;
    }
    snprintf(profile, sizeof(profile), "%s", rp);
    free(rp);
    test_helpers();
    test_run();

    snprintf(tmp, sizeof(tmp), "/tmp/st-compose-e2e-XXXXXX");
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    path_join(state, sizeof(state), tmp, "state");
    setenv("FAKE_DOCKER_STATE", state, 1);
    unsetenv("FAKE_DOCKER_FAIL");
    char deploy[300];
    path_join(deploy, sizeof(deploy), tmp, "deploy");
    mkdir(deploy, 0755);
    path_join(compose_path, sizeof(compose_path), deploy, "docker-compose.yml");
    path_join(env_path, sizeof(env_path), deploy, "sim.env");
    port = free_port();
    struct st_buf text;
    st_buf_init(&text);
    if (image) {
        st_buf_printf(&text, compose_real_fmt, image, port, port);
    } else {
        st_buf_printf(&text, compose_fake_fmt, profile, port);
    }
    int rc = write_text(compose_path, st_buf_str(&text), "w");
    rc = rc ? rc : write_text(env_path, "# the sim's speed\nSIM_SPEED=1000\n", "w");
    CHECK(rc == 0 && port > 0, "setup: %d port %d", rc, port);

    st_buf_clear(&text);
    st_buf_printf(&text, plan_fmt, port, port);
    struct st_plan p;
    char err[512] = "";
    rc = st_plan_parse("plan.yaml", text.data, text.len, &p, err, sizeof(err));
    CHECK(rc == 0, "plan: %s", err);
    if (rc == 0 && image) {
        struct st_buf saved;
        st_buf_init(&saved);
        test_save(&p, &saved);
        test_arm_ok(&p);
        test_arm_oom(&p);
        test_restart_engine(&p);
        test_stopped_health(&p);
        test_restore(&p, &saved);
        test_override_env(profile);
        st_buf_release(&saved);
    } else if (rc == 0) {
        test_inspect_fails_fake(&p);
        test_docker_fails_fake(&p);
        test_override_env(profile); /* v2's env_file form */
    }
    if (rc == 0) {
        test_bad_compose();
        st_plan_release(&p);
    }
    st_buf_release(&text);

    if (!image) {
        kill_all();
    }
    if (!getenv("ST_KEEP_TMP")) {
        nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    }
    printf("%s mode: %d checks, %d failures\n", image ? "real engine" : "fake CLI", n_checks,
           failures);
    return failures ? 1 : 0;
}
