/*
 * Tests for the pure parts of src/target/arm.c: the command template (values in, a parameter
 * the arm lacks or a malformed placeholder refused with its name), the sim's command line built
 * from the overrides and an arm's parameters (--set for profile keys, lists as their text, one
 * --fault for fault.*, fixed ones too, other names recorded as not
 * applied, --speed/--seed/--listen), the out-of-memory line of each dialect's start-up failure,
 * value comparison for the configuration check, vLLM's "non-default args" line, and the names of
 * the failure classes; the line that says why a server ended, from the start-up logs of a real
 * llama-server b4748 (tests/data/logs/llamacpp-b4748/) and a vLLM traceback; what llama.cpp's
 * KV line and /props (b4748 and v0.5.0, tests/data/wire/) state for the check, and which flags
 * a build's hints may name. No processes, no network.
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
#include "target/arm_int.h"
#include "target/server.h"
#include "support/fixture.h"

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

/* The cause a captured b4748 start-up failure names, and its detail: not the last line. */
static void check_cause(const char *log, const char *cause, const char *last)
{
    struct st_buf b;
    char line[384], detail[512];
    uint32_t no = 0;
    st_buf_init(&b);
    st_test_data(log, &b);
    assert_int_equal(st_arm_error_line(b.data, b.len, line, sizeof(line), &no), 1);
    assert_string_equal(line, cause);
    assert_true(no > 0);
    st_arm_last_line(b.data, b.len, line, sizeof(line));
    assert_string_equal(line, last);
    st_arm_exit_detail(b.data, b.len, "exited at once,", "killed by signal 6 (ABRT)", detail,
                       sizeof(detail));
    assert_non_null(strstr(detail, cause));
    if (strcmp(cause, last) != 0) {
        char want[512];
        snprintf(want, sizeof(want), "; log line %u: %s (last line: %s)", no, cause, last);
        assert_non_null(strstr(detail, want));
    } else {
        assert_non_null(strstr(detail, "; log: "));
    }
    st_buf_release(&b);
}

static void test_error_line(void **state)
{
    (void)state;
    check_cause("logs/llamacpp-b4748/fail_ctv_no_fa.log",
                "llama_init_from_model: V cache quantization requires flash_attn",
                "terminate called without an active exception");
    check_cause("logs/llamacpp-b4748/fail_no_model.log",
                "gguf_init_from_file: failed to open GGUF file '/work/ext/models/nope.gguf'",
                "terminate called without an active exception");
    check_cause("logs/llamacpp-b4748/fail_bad_type.log",
                "error while handling argument \"-ctk\": Unsupported cache type: q9_9",
                "to show complete usage, run with -h");
    check_cause("logs/llamacpp-b4748/fail_kvu.log", "error: invalid argument: -kvu",
                "error: invalid argument: -kvu");
    check_cause("logs/llamacpp-b4748/fail_cache_ram.log", "error: invalid argument: --cache-ram",
                "error: invalid argument: --cache-ram");
    /* A vLLM engine's traceback: the first exception, not the way out after it. */
    const char *vllm = "INFO 12-01 10:00:00 [core.py:70] Initializing a V1 LLM engine\n"
                       "ERROR 12-01 10:00:09 [core.py:700] EngineCore failed to start.\n"
                       "Traceback (most recent call last):\n"
                       "  File \"core.py\", line 690, in run_engine_core\n"
                       "ValueError: To serve at least one request with the models's max seq len "
                       "(131072), (16.00 GiB KV cache is needed, which is larger than ...\n"
                       "RuntimeError: Engine core initialization failed. See root cause above.\n";
    char line[256];
    uint32_t no = 0;
    assert_int_equal(st_arm_error_line(vllm, strlen(vllm), line, sizeof(line), &no), 1);
    assert_int_equal(no, 5);
    assert_non_null(strstr(line, "ValueError: To serve at least one request"));
    /* Only the way out: rank 3; nothing at all: 0 and the detail quotes the last line. */
    const char *out = "main: loading model\nterminate called without an active exception\n";
    assert_int_equal(st_arm_error_line(out, strlen(out), line, sizeof(line), &no), 3);
    assert_int_equal(no, 2);
    const char *quiet = "main: loading model\nbye\n";
    assert_int_equal(st_arm_error_line(quiet, strlen(quiet), line, sizeof(line), &no), 0);
    assert_string_equal(line, "");
    char detail[256];
    st_arm_exit_detail(quiet, strlen(quiet), "exited,", "exit status 1", detail, sizeof(detail));
    assert_string_equal(detail, "exited, exit status 1; log: bye");
    st_arm_exit_detail(NULL, 0, "exited,", "exit status 1", detail, sizeof(detail));
    assert_string_equal(detail, "exited, exit status 1; log: (empty)");
}

static void test_value_eq_as(void **state)
{
    (void)state;
    /* A draft model's flag against b4748's "speculative": set or not. */
    assert_true(st_arm_value_eq_as("-md /m/draft.gguf", "true", ST_ARM_CMP_SET));
    assert_false(st_arm_value_eq_as("-md /m/draft.gguf", "false", ST_ARM_CMP_SET));
    assert_true(st_arm_value_eq_as("", "false", ST_ARM_CMP_SET));
    assert_false(st_arm_value_eq_as("", "true", ST_ARM_CMP_SET));
    assert_false(st_arm_value_eq_as("x.gguf", "16", ST_ARM_CMP_SET)); /* not a bool: no */
    /* v0.5.0's "speculative.types": "none" when off. */
    assert_true(st_arm_value_eq_as("", "none", ST_ARM_CMP_SET_NOT_NONE));
    assert_false(st_arm_value_eq_as("d.gguf", "none", ST_ARM_CMP_SET_NOT_NONE));
    assert_true(st_arm_value_eq_as("d.gguf", "draft", ST_ARM_CMP_SET_NOT_NONE));
    /* float32 settings: 0.8 is stated as 0.800000011920929. */
    assert_false(st_arm_value_eq("0.8", "0.800000011920929"));
    assert_true(st_arm_value_eq_as("0.8", "0.800000011920929", ST_ARM_CMP_F32));
    assert_false(st_arm_value_eq_as("0.7", "0.800000011920929", ST_ARM_CMP_F32));
    assert_true(st_arm_value_eq_as("2048", "2048.0", ST_ARM_CMP_PLAIN));
}

static void test_kv_value(void **state)
{
    (void)state;
    struct st_target_pool pool;
    char val[64], where[160];
    memset(&pool, 0, sizeof(pool));
    assert_int_equal(st_arm_kv_value(NULL, "type_k", val, sizeof(val), where, sizeof(where)), 0);
    assert_int_equal(st_arm_kv_value(&pool, "type_k", val, sizeof(val), where, sizeof(where)), 0);
    pool.total_tokens = 4096;
    pool.exact = 1;
    snprintf(pool.source, sizeof(pool.source),
             "log line 101: llama_kv_cache_init: kv_size = 4096, offload = 1, type_k = 'q8_0'");
    snprintf(pool.type_k, sizeof(pool.type_k), "q8_0");
    snprintf(pool.type_v, sizeof(pool.type_v), "f16");
    assert_int_equal(st_arm_kv_value(&pool, "type_k", val, sizeof(val), where, sizeof(where)), 1);
    assert_string_equal(val, "q8_0");
    assert_non_null(strstr(where, "log line 101"));
    assert_int_equal(st_arm_kv_value(&pool, "type_v", val, sizeof(val), where, sizeof(where)), 1);
    assert_string_equal(val, "f16");
    assert_int_equal(st_arm_kv_value(&pool, "cells", val, sizeof(val), where, sizeof(where)), 1);
    assert_string_equal(val, "4096");
    /* A pool from /props states no cells of a line. */
    snprintf(pool.source, sizeof(pool.source), "GET /props: n_ctx 2048 per slot x total_slots 2");
    assert_int_equal(st_arm_kv_value(&pool, "cells", val, sizeof(val), where, sizeof(where)), 0);
}

/* The body of a curl -i transcript: from its first line that opens a JSON object. */
static const char *json_body(const struct st_buf *b)
{
    const char *s = strstr(b->data, "\n{");
    assert_non_null(s);
    return s + 1;
}

static void test_llamacpp_props(void **state)
{
    (void)state;
    struct st_buf b;
    struct st_target_facts f;
    st_buf_init(&b);
    st_test_data("wire/llamacpp-b4748/props.txt", &b);
    const char *body = json_body(&b);
    assert_int_equal(st_target_parse_answer(ST_TARGET_ANSWER_PROPS, body, strlen(body), &f), 0);
    assert_int_equal(f.build, 4748);
    assert_int_equal(f.total_slots, 4);
    assert_int_equal(f.slot_n_ctx, 2048);
    /* b4748 has neither -kvu nor --cache-ram (its --help, captured beside). */
    assert_int_equal(st_target_llamacpp_has(f.build, ST_TARGET_LLAMACPP_KVU), 0);
    assert_int_equal(st_target_llamacpp_has(f.build, ST_TARGET_LLAMACPP_CACHE_RAM), 0);
    st_buf_clear(&b);
    st_test_data("wire/llamacpp-b4748/help.txt", &b);
    assert_null(strstr(b.data, "-kvu"));
    assert_null(strstr(b.data, "--cache-ram"));
    assert_non_null(strstr(b.data, "--cache-type-k"));
    /* v0.5.0 reports "b1-de3ff81": no build number, so unknown. */
    st_buf_clear(&b);
    st_test_data("wire/llamacpp-v0.5.0/props.txt", &b);
    body = json_body(&b);
    assert_int_equal(st_target_parse_answer(ST_TARGET_ANSWER_PROPS, body, strlen(body), &f), 0);
    assert_int_equal(f.build, 1);
    assert_int_equal(f.slot_n_ctx, 2048);
    assert_int_equal(st_target_llamacpp_has(f.build, ST_TARGET_LLAMACPP_KVU), -1);
    assert_int_equal(st_target_llamacpp_has(f.build, ST_TARGET_LLAMACPP_CACHE_RAM), -1);
    assert_int_equal(st_target_llamacpp_has(0, ST_TARGET_LLAMACPP_KVU), -1);
    assert_int_equal(st_target_llamacpp_has(7000, ST_TARGET_LLAMACPP_KVU), -1);
    assert_int_equal(st_target_llamacpp_has(4000, ST_TARGET_LLAMACPP_CACHE_RAM), 0);
    st_buf_release(&b);
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
        cmocka_unit_test(test_template),   cmocka_unit_test(test_sim_argv),
        cmocka_unit_test(test_oom_line),   cmocka_unit_test(test_value_eq),
        cmocka_unit_test(test_log_arg),    cmocka_unit_test(test_fail_names),
        cmocka_unit_test(test_error_line), cmocka_unit_test(test_value_eq_as),
        cmocka_unit_test(test_kv_value),   cmocka_unit_test(test_llamacpp_props),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
