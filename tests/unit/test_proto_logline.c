/*
 * Tests for src/proto/logline.c: the pool lines of serving-apis.md section 6 and the simulator's
 * copies of them, one by one (vLLM with and without the EngineCore prefix, SGLang MHA/MLA and
 * scheduler lines with TP/DP prefixes, llama.cpp unified, split, the older unified-class form
 * and b4748's llama_kv_cache_init line, with the K and V types), near misses that must not match,
 * then whole-log scans: DP sums, restarts, TP duplicates, draft-model lines, mixed engines, line
 * ends, quoting and the bounds.
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
#include "proto/logline.h"
#include "support/fixture.h"

static int parse(const char *line, struct st_logline_hit *h)
{
    return st_logline_parse(line, strlen(line), h);
}

static int scan(const char *log, struct st_logline_pool *out)
{
    return st_logline_scan(log, strlen(log), out);
}

/* ---- single lines ---- */

static void test_vllm_lines(void **state)
{
    (void)state;
    struct st_logline_hit h;
    assert_int_equal(parse("INFO 08-01 12:00:00 [kv_cache_utils.py:716] GPU KV cache size: "
                           "686,320 tokens",
                           &h),
                     1);
    assert_int_equal(h.kind, ST_LOGLINE_VLLM_KV);
    assert_int_equal(h.tokens, 686320);
    assert_int_equal(h.dp, -1);
    assert_int_equal(parse("(EngineCore_DP0 pid=81234) INFO 08-01 12:00:00 "
                           "[kv_cache_utils.py:1087] GPU KV cache size: 1,234,567 tokens",
                           &h),
                     1);
    assert_int_equal(h.tokens, 1234567);
    assert_int_equal(h.dp, 0);
    assert_int_equal(parse("(EngineCore_DP13 pid=1) INFO GPU KV cache size: 512 tokens", &h), 1);
    assert_int_equal(h.dp, 13);
    assert_int_equal(h.tokens, 512);
    /* The simulator's copy. */
    assert_int_equal(parse("INFO [kv_cache_utils.py] GPU KV cache size: 647,040 tokens", &h), 1);
    assert_int_equal(h.tokens, 647040);
    assert_int_equal(parse("GPU KV cache size: 1,000,000,000,000 tokens", &h), 1);
    assert_int_equal(h.tokens, 1000000000000ull);

    static const char *const miss[] = {
        "INFO [kv_cache_utils.py] Maximum concurrency for 1,048,576 tokens per request: 0.62x",
        "Engine 000: Avg prompt throughput: 0.0 tokens/s, GPU KV cache usage: 5.0%",
        "INFO [gpu_worker.py] Available KV cache memory: 16.64 GiB",
        "GPU KV cache size: 1,23 tokens",
        "GPU KV cache size: 1234,567 tokens",
        "GPU KV cache size: 686,320 tok",
        "GPU KV cache size: 686,320tokens",
        "GPU KV cache size: ,320 tokens",
        "GPU KV cache size: tokens",
        "GPU KV cache size: 99999999999999999999 tokens",
        "GPU KV cache size: 686,3200 tokens",
        "",
    };
    for (size_t i = 0; i < sizeof(miss) / sizeof(miss[0]); i++) {
        if (parse(miss[i], &h) != 0) {
            fail_msg("'%s' parsed as a pool line", miss[i]);
        }
    }
    /* A prefix that only looks like a DP tag. */
    assert_int_equal(parse("(ADP3 x) GPU KV cache size: 5 tokens", &h), 1);
    assert_int_equal(h.dp, -1);
    assert_int_equal(parse("(EngineCore_DP3x) GPU KV cache size: 5 tokens", &h), 1);
    assert_int_equal(h.dp, -1);
}

static void test_sglang_lines(void **state)
{
    (void)state;
    struct st_logline_hit h;
    assert_int_equal(parse("[2025-08-01 12:00:00 TP0] KV Cache is allocated. #tokens: 647040, K "
                           "size: 8.32 GB, V size: 8.32 GB",
                           &h),
                     1);
    assert_int_equal(h.kind, ST_LOGLINE_SGLANG_ALLOC);
    assert_int_equal(h.tokens, 647040);
    assert_int_equal(h.tp, 0);
    assert_int_equal(h.dp, -1);
    assert_int_equal(parse("[TP0] KV Cache is allocated. #tokens: 647040, KV size: 16.64 GB", &h),
                     1);
    assert_int_equal(h.tokens, 647040);
    assert_int_equal(parse("[2025-08-01 12:00:00 DP1 TP3] KV Cache is allocated. #tokens: 1000, "
                           "KV size: 1.00 GB, dtype: torch.float8_e4m3fn",
                           &h),
                     1);
    assert_int_equal(h.dp, 1);
    assert_int_equal(h.tp, 3);
    assert_int_equal(parse("[TP0] max_total_num_tokens=647040, chunked_prefill_size=8192, "
                           "max_prefill_tokens=8192, max_running_requests=64, "
                           "context_len=1048576, available_gpu_mem=9.56 GB",
                           &h),
                     1);
    assert_int_equal(h.kind, ST_LOGLINE_SGLANG_MAX);
    assert_int_equal(h.tokens, 647040);
    /* Older scheduler line. */
    assert_int_equal(parse("max_total_num_tokens=123456, max_prefill_tokens=16384, "
                           "max_running_requests=2049, context_len=32768",
                           &h),
                     1);
    assert_int_equal(h.tokens, 123456);
    assert_int_equal(parse("[2025-08-01 12:00:00 DP2 TP0] max_total_num_tokens=77", &h), 1);
    assert_int_equal(h.dp, 2);
    assert_int_equal(h.tokens, 77);

    static const char *const miss[] = {
        "server_args=ServerArgs(max_total_tokens=None, context_length=None)",
        "foo_max_total_num_tokens=5, x",
        "[TP0] max_total_num_tokens=None, chunked_prefill_size=8192",
        "[TP0] max_total_num_tokens=12ab, x",
        "[TP0] KV Cache is allocated. #tokens: , KV size: 1 GB",
        "[TP0] Load weight end. mem usage=50.47 GB.",
        "The server is fired up and ready to roll!",
    };
    for (size_t i = 0; i < sizeof(miss) / sizeof(miss[0]); i++) {
        if (parse(miss[i], &h) != 0) {
            fail_msg("'%s' parsed as a pool line", miss[i]);
        }
    }
}

static void test_llamacpp_lines(void **state)
{
    (void)state;
    struct st_logline_hit h;
    assert_int_equal(parse("llama_kv_cache: size = 1024.00 MiB (  8192 cells,  32 layers,  4/1 "
                           "seqs), K (f16):  512.00 MiB, V (f16):  512.00 MiB",
                           &h),
                     1);
    assert_int_equal(h.kind, ST_LOGLINE_LLAMACPP_KV);
    assert_int_equal(h.tokens, 8192);
    assert_int_equal(h.seqs, 4);
    assert_int_equal(h.streams, 1);
    assert_int_equal(parse("llama_kv_cache: size =  256.00 MiB (  2048 cells,  32 layers,  4/4 "
                           "seqs), K (q8_0):  128.00 MiB, V (q8_0):  128.00 MiB",
                           &h),
                     1);
    assert_int_equal(h.tokens, 2048);
    assert_int_equal(h.streams, 4);
    assert_int_equal(parse("llama_kv_cache_unified: size =  512.00 MiB (  4096 cells,  32 layers, "
                           " 1 seqs), K (f16):  256.00 MiB, V (f16):  256.00 MiB",
                           &h),
                     1);
    assert_int_equal(h.tokens, 4096);
    assert_int_equal(h.seqs, 1);
    assert_int_equal(h.streams, 1);
    /* The simulator's copy (%6llu cells, %3u layers). */
    assert_int_equal(parse("llama_kv_cache: size =  100.00 MiB (  1600 cells,   4 layers, 8/8 "
                           "seqs), K (f16):   50.00 MiB, V (f16):   50.00 MiB",
                           &h),
                     1);
    assert_int_equal(h.tokens, 1600);
    assert_int_equal(h.streams, 8);
    /* A timestamped build. */
    assert_int_equal(parse("0.00.123.456 I llama_kv_cache: size = 64.00 MiB (512 cells, 2 "
                           "layers, 1/1 seqs), K (f16): 32.00 MiB, V (f16): 32.00 MiB",
                           &h),
                     1);
    assert_int_equal(h.tokens, 512);

    static const char *const miss[] = {
        "llama_kv_cache: failed to allocate buffer for kv cache",
        "llama_kv_cache:      CUDA0 KV buffer size =   512.00 MiB",
        "llama_kv_cache: size = 1024.00 MiB (cells, 32 layers, 4/1 seqs)",
        "llama_kv_cache: size = 1024.00 MiB (  8192 cells,  32 layers,  4/0 seqs)",
        "llama_kv_cache: size = 1024.00 MiB (  8192 cells,  32 layers)",
        "llama_kv_cache: size = 1024.00 MiB",
        "llama_memory_recurrent: size = 1.00 MiB (1 cells, 4 layers, 1 seqs), R (f32): 1 MiB",
        "llama_kv_cache_iswa: creating non-SWA KV cache, size = 8192 cells",
        "llama_kv_cache: size = 1 MiB ( 5 cells, 2 layers, 99999999999 seqs)",
    };
    for (size_t i = 0; i < sizeof(miss) / sizeof(miss[0]); i++) {
        if (parse(miss[i], &h) != 0) {
            fail_msg("'%s' parsed as a pool line", miss[i]);
        }
    }
}

/* ---- whole logs ---- */

static void test_scan_vllm(void **state)
{
    (void)state;
    struct st_logline_pool out;
    const char *one = "INFO 08-01 [api_server.py] vLLM API server version 0.10.1\n"
                      "INFO 08-01 [gpu_worker.py] Available KV cache memory: 16.64 GiB\n"
                      "INFO 08-01 [kv_cache_utils.py] GPU KV cache size: 686,320 tokens\n"
                      "INFO 08-01 [kv_cache_utils.py] Maximum concurrency for 32,768 tokens per "
                      "request: 20.95x\n";
    assert_int_equal(scan(one, &out), 0);
    assert_int_equal(out.engine, ST_LOGLINE_ENGINE_VLLM);
    assert_int_equal(out.total_tokens, 686320);
    assert_int_equal(out.ranks, 1);
    assert_int_equal(out.rank_tokens[0], 686320);
    assert_int_equal(out.lines, 1);
    assert_int_equal(out.line_no, 3);
    assert_string_equal(out.line,
                        "INFO 08-01 [kv_cache_utils.py] GPU KV cache size: 686,320 tokens");

    /* Two DP ranks add up; a restart of DP0 replaces its figure. */
    const char *dp = "(EngineCore_DP0 pid=1) INFO GPU KV cache size: 100,000 tokens\n"
                     "(EngineCore_DP1 pid=2) INFO GPU KV cache size: 100,016 tokens\n"
                     "(EngineCore_DP0 pid=3) INFO GPU KV cache size: 90,000 tokens\n";
    assert_int_equal(scan(dp, &out), 0);
    assert_int_equal(out.ranks, 2);
    assert_int_equal(out.rank_tokens[0], 90000);
    assert_int_equal(out.rank_tokens[1], 100016);
    assert_int_equal(out.total_tokens, 190016);
    assert_int_equal(out.lines, 3);
    assert_int_equal(out.line_no, 3);

    /* Without a prefix every line is a rank. */
    const char *plain = "GPU KV cache size: 10 tokens\nGPU KV cache size: 20 tokens\n";
    assert_int_equal(scan(plain, &out), 0);
    assert_int_equal(out.ranks, 2);
    assert_int_equal(out.total_tokens, 30);
}

static void test_scan_sglang(void **state)
{
    (void)state;
    struct st_logline_pool out;
    /* TP ranks repeat the allocation line; the scheduler line of TP0 wins. */
    const char *tp = "[2025-08-01 12:00:00 TP0] Load weight end. mem usage=50.47 GB.\n"
                     "[2025-08-01 12:00:01 TP1] KV Cache is allocated. #tokens: 647040, KV size: "
                     "16.64 GB\n"
                     "[2025-08-01 12:00:01 TP0] KV Cache is allocated. #tokens: 647040, KV size: "
                     "16.64 GB\n"
                     "[2025-08-01 12:00:02 TP0] max_total_num_tokens=647000, "
                     "chunked_prefill_size=8192\n"
                     "[2025-08-01 12:00:03 TP1] KV Cache is allocated. #tokens: 647040, KV size: "
                     "16.64 GB\n"
                     "The server is fired up and ready to roll!\n";
    assert_int_equal(scan(tp, &out), 0);
    assert_int_equal(out.engine, ST_LOGLINE_ENGINE_SGLANG);
    assert_int_equal(out.ranks, 1);
    assert_int_equal(out.total_tokens, 647000);
    assert_int_equal(out.lines, 4);
    assert_int_equal(out.line_no, 4);

    /* DP attention: one figure per DP rank. */
    const char *dp = "[DP0 TP0] KV Cache is allocated. #tokens: 300, KV size: 1 GB\n"
                     "[DP1 TP1] KV Cache is allocated. #tokens: 300, KV size: 1 GB\n"
                     "[DP0 TP0] max_total_num_tokens=300, chunked_prefill_size=8192\n"
                     "[DP1 TP1] max_total_num_tokens=300, chunked_prefill_size=8192\n";
    assert_int_equal(scan(dp, &out), 0);
    assert_int_equal(out.ranks, 2);
    assert_int_equal(out.total_tokens, 600);
}

static void test_scan_llamacpp(void **state)
{
    (void)state;
    struct st_logline_pool out;
    /* The target model's line first, then a draft model's: the first counts. */
    const char *two = "main: setting n_parallel = 4 and kv_unified = true\n"
                      "llama_kv_cache: size = 1024.00 MiB (  8192 cells,  32 layers,  4/1 seqs), "
                      "K (f16):  512.00 MiB, V (f16):  512.00 MiB\n"
                      "llama_kv_cache: size =   16.00 MiB (  8192 cells,   2 layers,  4/1 seqs), "
                      "K (f16):    8.00 MiB, V (f16):    8.00 MiB\n"
                      "main: model loaded\n";
    assert_int_equal(scan(two, &out), 0);
    assert_int_equal(out.engine, ST_LOGLINE_ENGINE_LLAMACPP);
    assert_int_equal(out.total_tokens, 8192);
    assert_int_equal(out.ranks, 1);
    assert_int_equal(out.lines, 2);
    assert_int_equal(out.line_no, 2);
    /* Split streams: cells are per stream. */
    const char *split = "llama_kv_cache: size = 1024.00 MiB (  2048 cells,  32 layers,  4/4 seqs)"
                        ", K (f16):  512.00 MiB, V (f16):  512.00 MiB\n";
    assert_int_equal(scan(split, &out), 0);
    assert_int_equal(out.ranks, 4);
    assert_int_equal(out.rank_tokens[3], 2048);
    assert_int_equal(out.total_tokens, 8192);
}

/* llama.cpp b4748 (2025-02) states its one cache as "llama_kv_cache_init: kv_size = N, ...,
 * type_k = 'T', type_v = 'T', ...", which the newer forms' parser does not read. */
static void test_llamacpp_b4748_line(void **state)
{
    (void)state;
    struct st_logline_hit h;
    assert_int_equal(parse("llama_kv_cache_init: kv_size = 8192, offload = 1, type_k = 'f16', "
                           "type_v = 'f16', n_layer = 4, can_shift = 1",
                           &h),
                     1);
    assert_int_equal(h.kind, ST_LOGLINE_LLAMACPP_KV);
    assert_int_equal(h.tokens, 8192);
    assert_int_equal(h.streams, 1);
    assert_int_equal(h.seqs, 0);
    assert_string_equal(h.type_k, "f16");
    assert_string_equal(h.type_v, "f16");
    assert_int_equal(parse("llama_kv_cache_init: kv_size = 4096, offload = 1, type_k = 'q8_0', "
                           "type_v = 'q4_0', n_layer = 4, can_shift = 1",
                           &h),
                     1);
    assert_string_equal(h.type_k, "q8_0");
    assert_string_equal(h.type_v, "q4_0");
    /* The newer line's types come from "K (f16)". */
    assert_int_equal(parse("llama_kv_cache: size = 1024.00 MiB (  8192 cells,  32 layers,  4/1 "
                           "seqs), K (q8_0):  512.00 MiB, V (f16):  512.00 MiB",
                           &h),
                     1);
    assert_string_equal(h.type_k, "q8_0");
    assert_string_equal(h.type_v, "f16");
    /* Near misses: the buffer line after it, no number, no comma after it. */
    static const char *const misses[] = {
        "llama_kv_cache_init:        CPU KV buffer size =    32.00 MiB",
        "llama_kv_cache_init: kv_size = , offload = 1",
        "llama_kv_cache_init: kv_size = 8192",
    };
    for (size_t i = 0; i < sizeof(misses) / sizeof(misses[0]); i++) {
        assert_int_equal(parse(misses[i], &h), 0);
    }
    /* A type too long or unterminated is left unstated, the cells still read. */
    assert_int_equal(parse("llama_kv_cache_init: kv_size = 64, type_k = 'f16", &h), 1);
    assert_string_equal(h.type_k, "");
}

/* The captured start-up logs of llama-server b4748 (tests/data/logs/llamacpp-b4748/): the
 * target model's line, not the draft model's that follows. */
static void read_log(const char *name, struct st_buf *b)
{
    char rel[512];
    snprintf(rel, sizeof(rel), "logs/llamacpp-b4748/%s", name);
    st_test_data(rel, b);
}

static void test_scan_llamacpp_b4748_logs(void **state)
{
    (void)state;
    struct st_logline_pool out;
    struct st_buf b;
    st_buf_init(&b);
    read_log("ok_q8.log", &b);
    assert_int_equal(st_logline_scan(b.data, b.len, &out), 0);
    assert_int_equal(out.engine, ST_LOGLINE_ENGINE_LLAMACPP);
    assert_int_equal(out.total_tokens, 4096);
    assert_int_equal(out.ranks, 1);
    assert_string_equal(out.type_k, "q8_0");
    assert_string_equal(out.type_v, "q8_0");
    st_buf_clear(&b);
    read_log("ok_draft.log", &b);
    assert_int_equal(st_logline_scan(b.data, b.len, &out), 0);
    assert_int_equal(out.total_tokens, 2048);
    /* Then the draft model's line and its slot context's: seen, not counted. */
    assert_int_equal(out.lines, 3);
    assert_int_equal(out.line_no, 101);
    assert_string_equal(out.type_k, "f16");
    st_buf_release(&b);
}

static void test_scan_mixed_and_line_ends(void **state)
{
    (void)state;
    struct st_logline_pool out;
    /* The first engine seen decides; CR, CRLF and LF ends count lines alike. */
    const char *mixed = "x\r"
                        "[TP0] max_total_num_tokens=42, x\r\n"
                        "GPU KV cache size: 1,000 tokens\n"
                        "[TP0] KV Cache is allocated. #tokens: 42, KV size: 1 GB\r"
                        "llama_kv_cache: size = 1.00 MiB (16 cells, 1 layers, 1/1 seqs)";
    assert_int_equal(scan(mixed, &out), 0);
    assert_int_equal(out.engine, ST_LOGLINE_ENGINE_SGLANG);
    assert_int_equal(out.total_tokens, 42);
    assert_int_equal(out.lines, 2);
    assert_int_equal(out.line_no, 2);
    assert_string_equal(out.line, "[TP0] max_total_num_tokens=42, x");

    /* Quoting: bytes outside printable ASCII become '?', long lines are cut. */
    struct st_buf b;
    st_buf_init(&b);
    st_buf_puts(&b, "\x1b[32mINFO\x1b[0m \xe2\x9c\x93 GPU KV cache size: 7 tokens ");
    for (int i = 0; i < 400; i++) {
        st_buf_putc(&b, 'z');
    }
    assert_int_equal(st_logline_scan(b.data, b.len, &out), 0);
    assert_int_equal(out.total_tokens, 7);
    assert_int_equal(strlen(out.line), ST_LOGLINE_LINE_MAX - 1);
    assert_true(strncmp(out.line, "?[32mINFO?[0m ??? GPU KV", 24) == 0);
    st_buf_release(&b);

    assert_int_equal(scan("", &out), ST_ENOTFOUND);
    assert_int_equal(scan("nothing\nto see\n", &out), ST_ENOTFOUND);
    assert_int_equal(out.engine, 0);
    assert_int_equal(st_logline_scan(NULL, 0, &out), ST_ENOTFOUND);
}

static void test_scan_bounds(void **state)
{
    (void)state;
    struct st_logline_pool out;
    struct st_buf b;
    st_buf_init(&b);
    for (unsigned i = 0; i < ST_LOGLINE_MAX_RANKS; i++) {
        st_buf_printf(&b, "(EngineCore_DP%u pid=1) GPU KV cache size: 1,000 tokens\n", i);
    }
    assert_int_equal(st_logline_scan(b.data, b.len, &out), 0);
    assert_int_equal(out.ranks, ST_LOGLINE_MAX_RANKS);
    assert_int_equal(out.total_tokens, 1000ull * ST_LOGLINE_MAX_RANKS);
    /* A rank already seen is no new rank; a new one is one too many. */
    st_buf_puts(&b, "(EngineCore_DP7 pid=1) GPU KV cache size: 1,000 tokens\n");
    assert_int_equal(st_logline_scan(b.data, b.len, &out), 0);
    st_buf_printf(&b, "(EngineCore_DP%u pid=1) GPU KV cache size: 1 tokens\n",
                  ST_LOGLINE_MAX_RANKS);
    assert_int_equal(st_logline_scan(b.data, b.len, &out), ST_ETOOBIG);
    assert_int_equal(out.ranks, 0);

    /* llama.cpp streams beyond the bound. */
    st_buf_clear(&b);
    st_buf_printf(&b, "llama_kv_cache: size = 1 MiB (16 cells, 1 layers, %u/%u seqs)\n",
                  ST_LOGLINE_MAX_RANKS + 1, ST_LOGLINE_MAX_RANKS + 1);
    assert_int_equal(st_logline_scan(b.data, b.len, &out), ST_ETOOBIG);

    /* A total over 64 bits. */
    st_buf_clear(&b);
    for (int i = 0; i < 3; i++) {
        st_buf_puts(&b, "GPU KV cache size: 9,223,372,036,854,775,807 tokens\n");
    }
    assert_int_equal(st_logline_scan(b.data, b.len, &out), ST_ETOOBIG);
    st_buf_clear(&b);
    st_buf_puts(&b, "GPU KV cache size: 9,223,372,036,854,775,808 tokens\n");
    assert_int_equal(st_logline_scan(b.data, b.len, &out), ST_ENOTFOUND);
    st_buf_release(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vllm_lines),
        cmocka_unit_test(test_sglang_lines),
        cmocka_unit_test(test_llamacpp_lines),
        cmocka_unit_test(test_scan_vllm),
        cmocka_unit_test(test_scan_sglang),
        cmocka_unit_test(test_scan_llamacpp),
        cmocka_unit_test(test_llamacpp_b4748_line),
        cmocka_unit_test(test_scan_llamacpp_b4748_logs),
        cmocka_unit_test(test_scan_mixed_and_line_ends),
        cmocka_unit_test(test_scan_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
