/*
 * libFuzzer target for the compose backend's readers of outside bytes (src/target/compose.c).
 * The input is, at once: a command string for st_compose_split, whose words st_compose_rewrite
 * then rewrites (fixed parameters, and one named by the input's own first words); a plan value
 * for st_compose_value_words; and a compose file, which st_compose_up reads (base/yaml.h: the
 * service's command, environment, env_file, image, restart) and turns into an override file.
 * compose.c has no entry that reads a compose file from bytes, so the input goes into a memfd
 * named as /proc/self/fd/N, the override into a private temporary folder (removed at exit), and
 * the docker CLI is a path that does not exist: every up fails to spawn it, after the parse and
 * the override. Invariants: word lists are NULL-terminated; a rewrite with append leaves the
 * flag in the list; st_compose_up never hands back a handle here.
 */
#include <sys/mman.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "target/compose.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int compose_fd = -1;
static char dir[64], file[64], override[96];

static void cleanup(void)
{
    unlink(override);
    rmdir(dir);
}

static void setup(void)
{
    compose_fd = memfd_create("fuzz-compose", MFD_CLOEXEC);
    snprintf(dir, sizeof(dir), "%s/fuzz-compose-XXXXXX",
             access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm");
    if (compose_fd < 0 || !mkdtemp(dir)) {
        abort();
    }
    snprintf(file, sizeof(file), "/proc/self/fd/%d", compose_fd);
    snprintf(override, sizeof(override), "%s/compose.override.yml", dir);
    atexit(cleanup);
}

static void check_argv(const struct st_arm_argv *a)
{
    if ((a->n > 0 && a->v == NULL) || (a->v != NULL && a->v[a->n] != NULL)) {
        abort();
    }
    for (uint32_t i = 0; i < a->n; i++) {
        if (a->v[i] == NULL) {
            abort();
        }
    }
}

static int has_word(const struct st_arm_argv *a, const char *w)
{
    for (uint32_t i = 0; i < a->n; i++) {
        if (strcmp(a->v[i], w) == 0) {
            return 1;
        }
    }
    return 0;
}

static void rewrite(struct st_arm_argv *cmd, const char *name, const char *value, int append)
{
    struct st_buf flag;
    st_buf_init(&flag);
    st_buf_puts(&flag, "--");
    for (const char *q = name; *q; q++) {
        st_buf_putc(&flag, *q == '_' ? '-' : *q);
    }
    uint32_t n = st_compose_rewrite(cmd, name, value, append);
    check_argv(cmd);
    if ((append || n > 0) && !has_word(cmd, st_buf_str(&flag))) {
        abort();
    }
    st_buf_release(&flag);
}

static void words(const char *text)
{
    struct st_arm_argv a = {0}, v = {0};
    char err[256] = "";
    int rc = st_compose_split(text, &a, err, sizeof(err));
    check_argv(&a);
    if (rc == 0) {
        rewrite(&a, "num_speculative_tokens", "1", 1);
        rewrite(&a, "cuda_graph_sizes", "[1, 2, 4]", 1);
        rewrite(&a, "offset", "[]", 1);
        rewrite(&a, "image_digest", "sha256:x", 0);
        if (a.n >= 2) {
            char *name = strdup(a.v[0] + strspn(a.v[0], "-"));
            char *value = strdup(a.v[1]);
            rewrite(&a, name, value, 1);
            free(name);
            free(value);
        }
    } else if (rc != ST_EPARSE || err[0] == '\0') {
        abort();
    }
    st_arm_argv_release(&a);
    st_compose_value_words(text, &v);
    check_argv(&v);
    st_arm_argv_release(&v);
}

#define P(NAME, VALUE)                                                                             \
    {                                                                                              \
        .name = NAME, .value = (char *)(VALUE)                                                     \
    }

static void up(const uint8_t *data, size_t size)
{
    if (ftruncate(compose_fd, 0) != 0 || pwrite(compose_fd, data, size, 0) != (ssize_t)size) {
        abort();
    }
    struct st_target_param base[] = {P("cuda_graph_sizes", "[1, 3]"),
                                     P("max_num_batched_tokens", "2048"),
                                     P("num_speculative_tokens", "2")};
    struct st_target_param fixed[] = {P("kv_cache_dtype", "fp8"), P("max_num_seqs", "1")};
    struct st_target_param set[] = {P("cuda_graph_sizes", "[1, 2]"), P("kv_cache_dtype", "fp8"),
                                    P("max_num_batched_tokens", "1024"), P("max_num_seqs", "1"),
                                    P("num_speculative_tokens", "1")};
    struct st_target_spec t;
    memset(&t, 0, sizeof(t));
    t.kind = ST_TARGET_BACKEND_COMPOSE;
    t.compose_file = file;
    t.service = "vlm";
    t.override = size % 2 ? ST_TARGET_OVERRIDE_ENVIRONMENT : ST_TARGET_OVERRIDE_COMMAND;
    t.stop_timeout_s = 1;
    struct st_target_params bs = {base, 3}, fs = {fixed, 2};
    struct st_arm_plan p = {&t, &bs, &fs};
    struct st_target_params ps = {set, 5};
    struct st_arm_env env;
    memset(&env, 0, sizeof(env));
    env.dir = dir;
    env.docker = "/nonexistent/servetune-fuzz/docker";
    struct st_compose *c = NULL;
    struct st_buf json;
    char detail[256], err[512];
    st_buf_init(&json);
    int rc =
        st_compose_up(&p, "mtp1", &ps, &env, &c, &json, detail, sizeof(detail), err, sizeof(err));
    if (rc == 0 || c != NULL) {
        abort();
    }
    st_buf_release(&json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (compose_fd < 0) {
        setup();
    }
    char *text = malloc(size + 1);
    if (!text) {
        abort();
    }
    memcpy(text, data, size);
    text[size] = '\0';
    words(text);
    free(text);
    up(data, size);
    return 0;
}
