/*
 * Tests for the pure parts of src/target/arm.c: the command template (values in, a parameter
 * the arm lacks or a malformed placeholder refused with its name), the sim's command line built
 * from the overrides and an arm's parameters (--set for profile keys, lists as their text, one
 * --fault for fault.*, fixed ones too, other names recorded as not
 * applied, --speed/--seed/--listen), the out-of-memory line of each dialect's start-up failure,
 * value comparison for the configuration check, vLLM's "non-default args" line, and the names of
 * the failure classes. No processes, no network.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "campaign/plan.h"
#include "target/arm.h"

static const char plan_text[] = "name: t\n"
                                "target:\n"
                                "  kind: sim\n"
                                "  profile: p.yaml\n"
                                "  overrides: {engine.startup_s: 1, fault.slow_start_s: 0}\n"
                                "baseline:\n"
                                "  engine.spec_steps: 2\n"
                                "  engine.graph_sizes: [1, 3]\n"
                                "  image: sha256:abc\n"
                                "  fault.crash_after_requests: 0\n"
                                "fixed:\n"
                                "  engine.context_length: 131072\n"
                                "arms:\n"
                                "  - name: a1\n"
                                "    set: {engine.spec_steps: 3, engine.graph_sizes: [1, 4]}\n"
                                "    multi_variable: true\n"
                                "stages:\n"
                                "  screening:\n"
                                "    - {id: dec, kind: bench, output_tokens: 2048}\n"
                                "  full:\n"
                                "    - {id: long, kind: bench, output_tokens: 16384}\n"
                                "    - {id: mixed, kind: soak, duration_s: 600}\n"
                                "rules: {metrics: [{metric: dec.decode_tps}]}\n";

static void parse(struct st_plan *p)
{
    char err[512] = "";
    int rc = st_plan_parse("t.yaml", plan_text, strlen(plan_text), p, err, sizeof(err));
    if (rc != 0) {
        fail_msg("parse: %s", err);
    }
}

static void test_template(void **state)
{
    (void)state;
    struct st_plan p;
    struct st_target_params ps;
    struct st_buf out;
    char err[256] = "";
    parse(&p);
    assert_int_equal(st_plan_arm_params(&p, 0, NULL, &ps, err, sizeof(err)), 0);
    st_buf_init(&out);
    assert_int_equal(st_arm_template("serve --steps {engine.spec_steps} --g '{engine.graph_sizes}'"
                                     " --ctx {engine.context_length}",
                                     &ps, &out, err, sizeof(err)),
                     0);
    assert_string_equal(out.data, "serve --steps 3 --g '[1, 4]' --ctx 131072");
    st_buf_clear(&out);
    assert_int_equal(st_arm_template("no placeholders", &ps, &out, err, sizeof(err)), 0);
    assert_string_equal(out.data, "no placeholders");
    st_buf_clear(&out);
    assert_int_equal(st_arm_template("x {missing} y", &ps, &out, err, sizeof(err)), ST_EUSAGE);
    assert_string_equal(err, "target.start: {missing}: the arm has no parameter missing");
    static const char *const bad[] = {"x {", "x {}", "x {a b}", "x {{a}}", "a } {"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        st_buf_clear(&out);
        err[0] = '\0';
        assert_int_equal(st_arm_template(bad[i], &ps, &out, err, sizeof(err)), ST_EUSAGE);
        assert_non_null(strstr(err, "is not a placeholder"));
    }
    st_buf_release(&out);
    st_target_params_release(&ps);
    st_plan_release(&p);
}

/* The index of s in a, or -1. */
static int find_arg(const struct st_arm_argv *a, const char *s)
{
    for (uint32_t i = 0; i < a->n; i++) {
        if (strcmp(a->v[i], s) == 0) {
            return (int)i;
        }
    }
    return -1;
}

static void test_sim_argv(void **state)
{
    (void)state;
    struct st_plan p;
    struct st_target_params ps;
    struct st_arm_argv a = {0};
    struct st_buf na;
    char err[256] = "";
    parse(&p);
    assert_int_equal(st_plan_arm_params(&p, 0, NULL, &ps, err, sizeof(err)), 0);
    st_buf_init(&na);
    assert_int_equal(st_arm_sim_argv("/bin/st", "/plans/p.yaml", &p.target.overrides, &ps, 1000, 7,
                                     0, &a, &na, err, sizeof(err)),
                     0);
    assert_null(a.v[a.n]);
    static const char *const want[] = {"/bin/st",   "sim",
                                       "--profile", "/plans/p.yaml",
                                       "--set",     "engine.startup_s=1",
                                       "--set",     "engine.context_length=131072",
                                       "--set",     "engine.graph_sizes=[1, 4]",
                                       "--set",     "engine.spec_steps=3",
                                       "--fault",   "slow_start_s=0,crash_after_requests=0",
                                       "--speed",   "1000",
                                       "--seed",    "7",
                                       "--listen",  "127.0.0.1:0"};
    assert_int_equal(a.n, sizeof(want) / sizeof(want[0]));
    for (uint32_t i = 0; i < a.n; i++) {
        assert_string_equal(a.v[i], want[i]);
    }
    /* "image" is not a profile key: recorded, not applied. */
    assert_null(strstr(na.data, "engine."));
    assert_non_null(strstr(na.data, "image: not applied by the sim"));
    st_arm_argv_release(&a);
    assert_null(a.v);

    /* Speed 0 and seed 0: the sim's defaults, no flags. */
    assert_int_equal(st_arm_sim_argv("st", "p.yaml", &p.target.overrides, &ps, 0, 0, 0, &a, NULL,
                                     err, sizeof(err)),
                     0);
    assert_int_equal(find_arg(&a, "--speed"), -1);
    assert_int_equal(find_arg(&a, "--seed"), -1);
    assert_string_equal(a.v[a.n - 1], "127.0.0.1:0");
    st_arm_argv_release(&a);

    /* A fault value that would split the --fault list is refused. */
    for (uint32_t i = 0; i < ps.n; i++) {
        if (strcmp(ps.v[i].name, "fault.crash_after_requests") == 0) {
            free(ps.v[i].value);
            ps.v[i].value = strdup("1,startup_oom=1");
        }
    }
    assert_int_equal(st_arm_sim_argv("st", "p.yaml", &p.target.overrides, &ps, 1, 0, 0, &a, NULL,
                                     err, sizeof(err)),
                     ST_EUSAGE);
    assert_non_null(strstr(err, "fault.crash_after_requests"));
    assert_null(a.v);
    st_buf_release(&na);
    st_target_params_release(&ps);
    st_plan_release(&p);
}

static void test_oom_line(void **state)
{
    (void)state;
    char line[256];
    /* vLLM, as the sim prints it (sim/dialect.c) and a torch OOM. */
    const char *vllm = "INFO [gpu_worker.py] loading\n"
                       "ERROR [core.py] EngineCore failed to start.\n"
                       "ValueError: No available memory for the cache blocks. Try increasing "
                       "`gpu_memory_utilization` when initializing the engine.\n";
    assert_int_equal(st_arm_oom_line(vllm, strlen(vllm), line, sizeof(line)), 1);
    assert_non_null(strstr(line, "ValueError: No available memory"));
    const char *ctx = "ValueError: To serve at least one request with the model's max seq len "
                      "(131072), (2.00 GiB KV cache is needed, which is larger than the available "
                      "KV cache memory (1.00 GiB).\n";
    assert_int_equal(st_arm_oom_line(ctx, strlen(ctx), line, sizeof(line)), 1);
    const char *torch = "x\r\ntorch.OutOfMemoryError: CUDA out of memory (weights need 90 GiB)\r\n";
    assert_int_equal(st_arm_oom_line(torch, strlen(torch), line, sizeof(line)), 1);
    assert_string_equal(line, "torch.OutOfMemoryError: CUDA out of memory (weights need 90 GiB)");
    /* SGLang and llama.cpp. */
    const char *sgl = "[TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
                      "RuntimeError: Not enough memory. Please try to increase "
                      "--mem-fraction-static.\n";
    assert_int_equal(st_arm_oom_line(sgl, strlen(sgl), line, sizeof(line)), 1);
    assert_non_null(strstr(line, "RuntimeError: Not enough memory"));
    const char *llama = "llama_kv_cache: failed to allocate buffer for kv cache\n";
    assert_int_equal(st_arm_oom_line(llama, strlen(llama), line, sizeof(line)), 1);
    /* Not OOM: a crash, an empty log; the line is truncated to cap. */
    const char *crash = "ERROR [core.py] EngineCore encountered a fatal error (sim crash x)\n"
                        "INFO: memory usage 3 GiB\n";
    assert_int_equal(st_arm_oom_line(crash, strlen(crash), line, sizeof(line)), 0);
    assert_string_equal(line, "");
    assert_int_equal(st_arm_oom_line(NULL, 0, line, sizeof(line)), 0);
    char small[8];
    assert_int_equal(st_arm_oom_line(torch, strlen(torch), small, sizeof(small)), 1);
    assert_string_equal(small, "torch.O");
}

static void test_value_eq(void **state)
{
    (void)state;
    assert_true(st_arm_value_eq("2048", "2048"));
    assert_true(st_arm_value_eq("2048", "2048.0"));
    assert_true(st_arm_value_eq("0.985", " 0.985 "));
    assert_true(st_arm_value_eq("131072", "1.31072e5"));
    assert_false(st_arm_value_eq("2048", "1024"));
    assert_true(st_arm_value_eq("true", "True"));
    assert_false(st_arm_value_eq("true", "False"));
    assert_true(st_arm_value_eq("[1, 3]", "[1,3]"));
    assert_false(st_arm_value_eq("[1, 3]", "[1,4]"));
    assert_true(st_arm_value_eq("fp8", "'fp8'"));
    assert_true(st_arm_value_eq("\"fp8\"", "fp8"));
    assert_false(st_arm_value_eq("fp8", "fp8_e4m3"));
    assert_false(st_arm_value_eq("2", "null"));
    assert_false(st_arm_value_eq("inf", "inf1"));
}

static void test_log_arg(void **state)
{
    (void)state;
    char v[64];
    const char *log =
        "INFO 01-01 [api_server.py] vLLM API server version 0.11\n"
        "INFO 01-01 [utils.py] non-default args: {'model': 'org/m', 'max_model_len': 131072, "
        "'gpu_memory_utilization': 0.985, 'speculative_config': {'method': 'mtp', "
        "'num_speculative_tokens': 2}, 'cuda_graph_sizes': [1, 3], 'enforce_eager': True}\n"
        "INFO 01-01 [core.py] started\n";
    size_t n = strlen(log);
    assert_int_equal(st_arm_log_arg(log, n, "max_model_len", v, sizeof(v)), 1);
    assert_string_equal(v, "131072");
    assert_int_equal(st_arm_log_arg(log, n, "model", v, sizeof(v)), 1);
    assert_string_equal(v, "org/m");
    assert_int_equal(st_arm_log_arg(log, n, "num_speculative_tokens", v, sizeof(v)), 1);
    assert_string_equal(v, "2");
    assert_int_equal(st_arm_log_arg(log, n, "cuda_graph_sizes", v, sizeof(v)), 1);
    assert_string_equal(v, "[1, 3]");
    assert_int_equal(st_arm_log_arg(log, n, "enforce_eager", v, sizeof(v)), 1);
    assert_string_equal(v, "True");
    assert_int_equal(st_arm_log_arg(log, n, "gpu_memory_utilization", v, sizeof(v)), 1);
    assert_string_equal(v, "0.985");
    /* A name that is only a suffix of a key, a key absent, no such line. */
    assert_int_equal(st_arm_log_arg(log, n, "model_len", v, sizeof(v)), 0);
    assert_int_equal(st_arm_log_arg(log, n, "max_num_seqs", v, sizeof(v)), 0);
    assert_int_equal(st_arm_log_arg("INFO x\n", 7, "model", v, sizeof(v)), 0);
    assert_string_equal(v, "");
}

static void test_fail_names(void **state)
{
    (void)state;
    assert_string_equal(st_arm_fail_name(ST_ARM_OK), "ok");
    assert_string_equal(st_arm_fail_name(ST_ARM_FAIL_START), "start");
    assert_string_equal(st_arm_fail_name(ST_ARM_FAIL_OOM), "oom");
    assert_string_equal(st_arm_fail_name(ST_ARM_FAIL_EXIT), "exit");
    assert_string_equal(st_arm_fail_name(ST_ARM_FAIL_HEALTH), "health");
    assert_string_equal(st_arm_fail_name(ST_ARM_FAIL_CONFIG), "config");
    assert_string_equal(st_arm_fail_name(ST_ARM_FAIL_OPERATOR), "operator");
    assert_string_equal(st_arm_fail_name((enum st_arm_fail)99), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_template), cmocka_unit_test(test_sim_argv),
        cmocka_unit_test(test_oom_line), cmocka_unit_test(test_value_eq),
        cmocka_unit_test(test_log_arg),  cmocka_unit_test(test_fail_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
