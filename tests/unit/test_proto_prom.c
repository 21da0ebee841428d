/*
 * Tests for src/proto/prom.c: the llama-server /metrics transcripts (ST_WIRE_DIR) block by block,
 * then the vLLM, SGLang and TGI shapes of serving-apis.md section 5 (labels, histograms,
 * prometheus_client's _total and _created, info gauges), label escapes, values and timestamps,
 * type resolution, every malformed line with its line number, the bounds, and a seeded
 * round trip of generated expositions against the values written.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/rng.h"
#include "proto/prom.h"

static int parse(struct st_prom *p, const char *text, uint32_t *line)
{
    return st_prom_parse(p, text, strlen(text), line);
}

static double sum_of(const struct st_prom *p, const char *name, const char *const *want)
{
    double v = -1;
    assert_int_equal(st_prom_sum(p, name, want, &v), 0);
    return v;
}

static char type_of(const struct st_prom *p, const char *name)
{
    const struct st_prom_sample *s = st_prom_find(p, name);
    assert_non_null(s);
    return s->type;
}

/* ---- llama.cpp transcript ---- */

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    struct st_buf b;
    st_buf_init(&b);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        st_buf_append(&b, chunk, n);
    }
    fclose(f);
    *len = b.len;
    return st_buf_take(&b);
}

/*
 * metrics.txt holds five numbered blocks ("# 1) ...", "# 2) ..."): block 1 is a full answer with
 * its HTTP headers, the others value lines. Returns block k (1-based) as an exposition: the lines
 * from the first "# HELP" (block 1) or after the heading, without "$ curl" lines.
 */
static void wire_block(const char *text, int k, struct st_buf *out)
{
    char head[8];
    snprintf(head, sizeof(head), "# %d)", k);
    const char *at = strstr(text, head);
    assert_non_null(at);
    at = strchr(at, '\n');
    assert_non_null(at);
    at++;
    if (k == 1) {
        at = strstr(at, "# HELP");
        assert_non_null(at);
    }
    char next[8];
    snprintf(next, sizeof(next), "# %d)", k + 1);
    const char *end = strstr(at, next);
    if (!end) {
        end = at + strlen(at);
    }
    st_buf_clear(out);
    while (at < end) {
        const char *nl = memchr(at, '\n', (size_t)(end - at));
        const char *le = nl ? nl + 1 : end;
        if (strncmp(at, "$ ", 2) != 0) {
            st_buf_append(out, at, (size_t)(le - at));
        }
        at = le;
    }
}

static void test_llamacpp_wire(void **state)
{
    (void)state;
    const char *dir = getenv("ST_WIRE_DIR");
    char path[4096];
    size_t len;
    if (!dir) {
        skip();
    }
    snprintf(path, sizeof(path), "%s/metrics.txt", dir);
    char *text = read_file(path, &len);
    if (!text) {
        skip();
    }
    struct st_prom p;
    struct st_buf b;
    uint32_t line = 99;
    st_prom_init(&p);
    st_buf_init(&b);

    /* 1: the idle server, HELP and TYPE for each of 15 series, all 0. */
    wire_block(text, 1, &b);
    assert_int_equal(st_prom_parse(&p, b.data, b.len, &line), 0);
    assert_int_equal(line, 0);
    assert_int_equal(p.n, 15);
    for (uint32_t i = 0; i < p.n; i++) {
        assert_true(p.samples[i].value == 0.0);
        assert_int_equal(p.samples[i].n_labels, 0);
        assert_true(strncmp(p.samples[i].name, "llamacpp:", 9) == 0);
    }
    assert_int_equal(type_of(&p, "llamacpp:prompt_tokens_total"), 'c');
    assert_int_equal(type_of(&p, "llamacpp:prompt_tokens_cached_total"), 'c');
    assert_int_equal(type_of(&p, "llamacpp:n_tokens_max"), 'c');
    assert_int_equal(type_of(&p, "llamacpp:requests_deferred"), 'g');
    assert_int_equal(type_of(&p, "llamacpp:n_busy_slots_per_decode"), 'g');
    assert_int_equal(type_of(&p, "llamacpp:spec_decode_num_drafts_total"), 'c');

    /* 2: mid-generation values, no TYPE lines: untyped. */
    wire_block(text, 2, &b);
    assert_int_equal(st_prom_parse(&p, b.data, b.len, &line), 0);
    assert_int_equal(p.n, 15);
    assert_true(sum_of(&p, "llamacpp:prompt_tokens_total", NULL) == 57);
    assert_true(sum_of(&p, "llamacpp:prompt_tokens_cached_total", NULL) == 17);
    assert_true(sum_of(&p, "llamacpp:prompt_seconds_total", NULL) == 0.167914);
    assert_true(sum_of(&p, "llamacpp:tokens_predicted_seconds_total", NULL) == 4.47738);
    assert_true(sum_of(&p, "llamacpp:requests_processing", NULL) == 1);
    assert_int_equal(type_of(&p, "llamacpp:requests_processing"), 'u');

    /* 3 and 4. */
    wire_block(text, 3, &b);
    assert_int_equal(st_prom_parse(&p, b.data, b.len, &line), 0);
    assert_true(sum_of(&p, "llamacpp:prompt_tokens_cached_total", NULL) == 2022);
    wire_block(text, 4, &b);
    assert_int_equal(st_prom_parse(&p, b.data, b.len, &line), 0);
    assert_true(sum_of(&p, "llamacpp:n_busy_slots_per_decode", NULL) == 2.99827);

    /* 5: speculative series with a position label. */
    wire_block(text, 5, &b);
    assert_int_equal(st_prom_parse(&p, b.data, b.len, &line), 0);
    assert_int_equal(p.n, 6);
    assert_true(sum_of(&p, "llamacpp:spec_decode_num_draft_tokens_total", NULL) == 58);
    assert_true(sum_of(&p, "llamacpp:spec_decode_num_drafts_total", NULL) == 20);
    const char *const pos2[] = {"position", "2", NULL};
    assert_true(sum_of(&p, "llamacpp:spec_decode_num_accepted_tokens_per_pos_total", pos2) == 18);
    assert_true(sum_of(&p, "llamacpp:spec_decode_num_accepted_tokens_per_pos_total", NULL) == 58);
    assert_int_equal(type_of(&p, "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"), 'c');
    const struct st_prom_sample *s =
        st_prom_find(&p, "llamacpp:spec_decode_num_accepted_tokens_per_pos_total");
    assert_string_equal(st_prom_label(s, "position"), "0");
    assert_null(st_prom_label(s, "engine"));

    st_prom_release(&p);
    st_buf_release(&b);
    free(text);
}

/* ---- vLLM, SGLang, TGI shapes ---- */

static const char vllm_text[] =
    "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
    "# TYPE vllm:num_requests_running gauge\n"
    "vllm:num_requests_running{engine=\"0\",model_name=\"org/Model-8B\"} 1.0\n"
    "vllm:num_requests_running{engine=\"1\",model_name=\"org/Model-8B\"} 2.0\n"
    "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
    "# TYPE vllm:num_requests_waiting gauge\n"
    "vllm:num_requests_waiting{engine=\"0\",model_name=\"org/Model-8B\"} 0.0\n"
    "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n"
    "# TYPE vllm:kv_cache_usage_perc gauge\n"
    "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"org/Model-8B\"} 0.0123\n"
    "# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of "
    "queried tokens.\n"
    "# TYPE vllm:prefix_cache_queries_total counter\n"
    "vllm:prefix_cache_queries_total{engine=\"0\",model_name=\"org/Model-8B\"} 4096.0\n"
    "# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached "
    "tokens.\n"
    "# TYPE vllm:prefix_cache_hits_total counter\n"
    "vllm:prefix_cache_hits_total{engine=\"0\",model_name=\"org/Model-8B\"} 2048.0\n"
    "# HELP vllm:request_success_total Count of successfully processed requests.\n"
    "# TYPE vllm:request_success_total counter\n"
    "vllm:request_success_total{engine=\"0\",finished_reason=\"stop\",model_name=\"org/"
    "Model-8B\"} 3.0\n"
    "vllm:request_success_total{engine=\"0\",finished_reason=\"length\",model_name=\"org/"
    "Model-8B\"} 5.0\n"
    "vllm:request_success_total{engine=\"0\",finished_reason=\"abort\",model_name=\"org/"
    "Model-8B\"} 0.0\n"
    "# HELP vllm:prompt_tokens_created Number of prefill tokens processed.\n"
    "# TYPE vllm:prompt_tokens_created gauge\n"
    "vllm:prompt_tokens_created{engine=\"0\",model_name=\"org/Model-8B\"} 1.7368476e+09\n"
    "# HELP vllm:iteration_tokens_total Histogram of number of tokens per engine_step.\n"
    "# TYPE vllm:iteration_tokens_total histogram\n"
    "vllm:iteration_tokens_total_bucket{engine=\"0\",le=\"1.0\",model_name=\"org/Model-8B\"} "
    "4.0\n"
    "vllm:iteration_tokens_total_bucket{engine=\"0\",le=\"8.0\",model_name=\"org/Model-8B\"} "
    "9.0\n"
    "vllm:iteration_tokens_total_bucket{engine=\"0\",le=\"+Inf\",model_name=\"org/Model-8B\"} "
    "12.0\n"
    "vllm:iteration_tokens_total_count{engine=\"0\",model_name=\"org/Model-8B\"} 12.0\n"
    "vllm:iteration_tokens_total_sum{engine=\"0\",model_name=\"org/Model-8B\"} 4130.0\n"
    "# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.\n"
    "# TYPE vllm:time_to_first_token_seconds histogram\n"
    "vllm:time_to_first_token_seconds_sum{engine=\"0\",model_name=\"org/Model-8B\"} 0.25\n"
    "vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"0.001\",model_name=\"org/"
    "Model-8B\"} 0.0\n"
    "vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"+Inf\",model_name=\"org/"
    "Model-8B\"} 8.0\n"
    "vllm:time_to_first_token_seconds_count{engine=\"0\",model_name=\"org/Model-8B\"} 8.0\n"
    "# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft "
    "position.\n"
    "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter\n"
    "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"org/"
    "Model-8B\",position=\"0\"} 90.0\n"
    "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"org/"
    "Model-8B\",position=\"1\"} 60.0\n"
    "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
    "# TYPE vllm:cache_config_info gauge\n"
    "vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",calculate_kv_scales=\"False\","
    "cpu_offload_gb=\"0\",enable_prefix_caching=\"True\",engine=\"0\",gpu_memory_utilization=\"0."
    "9\",is_attention_free=\"False\",num_cpu_blocks=\"None\",num_gpu_blocks=\"42895\",num_gpu_"
    "blocks_override=\"None\",prefix_caching_hash_algo=\"builtin\",sliding_window=\"None\","
    "swap_space=\"4\",swap_space_bytes=\"4294967296.0\"} 1.0\n"
    "# HELP http_requests_total Total number of requests by method, status and handler.\n"
    "# TYPE http_requests_total counter\n"
    "http_requests_total{handler=\"/v1/chat/completions\",method=\"POST\",status=\"2xx\"} 8.0\n";

static void test_vllm_shapes(void **state)
{
    (void)state;
    struct st_prom p;
    uint32_t line = 7;
    st_prom_init(&p);
    assert_int_equal(parse(&p, vllm_text, &line), 0);
    assert_int_equal(line, 0);
    assert_int_equal(p.n, 23);
    assert_true(sum_of(&p, "vllm:num_requests_running", NULL) == 3);
    const char *const e1[] = {"engine", "1", NULL};
    assert_true(sum_of(&p, "vllm:num_requests_running", e1) == 2);
    const char *const e0m[] = {"engine", "0", "model_name", "org/Model-8B", NULL};
    assert_true(sum_of(&p, "vllm:num_requests_running", e0m) == 1);
    assert_true(sum_of(&p, "vllm:prefix_cache_hits_total", NULL) == 2048);
    assert_true(sum_of(&p, "vllm:prefix_cache_queries_total", NULL) == 4096);
    const char *const len[] = {"finished_reason", "length", NULL};
    assert_true(sum_of(&p, "vllm:request_success_total", len) == 5);
    assert_true(sum_of(&p, "vllm:request_success_total", NULL) == 8);
    assert_true(sum_of(&p, "vllm:prompt_tokens_created", NULL) == 1.7368476e9);
    const char *const inf[] = {"le", "+Inf", NULL};
    assert_true(sum_of(&p, "vllm:iteration_tokens_total_bucket", inf) == 12);
    assert_true(sum_of(&p, "vllm:time_to_first_token_seconds_sum", NULL) == 0.25);
    assert_true(sum_of(&p, "vllm:spec_decode_num_accepted_tokens_per_pos_total", NULL) == 150);

    assert_int_equal(type_of(&p, "vllm:num_requests_running"), 'g');
    assert_int_equal(type_of(&p, "vllm:prefix_cache_hits_total"), 'c');
    assert_int_equal(type_of(&p, "vllm:prompt_tokens_created"), 'g');
    assert_int_equal(type_of(&p, "vllm:iteration_tokens_total_bucket"), 'h');
    assert_int_equal(type_of(&p, "vllm:iteration_tokens_total_count"), 'h');
    assert_int_equal(type_of(&p, "vllm:iteration_tokens_total_sum"), 'h');
    assert_int_equal(type_of(&p, "vllm:time_to_first_token_seconds_bucket"), 'h');
    assert_int_equal(type_of(&p, "vllm:cache_config_info"), 'g');
    assert_int_equal(type_of(&p, "http_requests_total"), 'c');

    const struct st_prom_sample *s = st_prom_find(&p, "vllm:cache_config_info");
    assert_int_equal(s->n_labels, 15);
    assert_string_equal(st_prom_label(s, "num_gpu_blocks"), "42895");
    assert_string_equal(st_prom_label(s, "block_size"), "16");
    assert_string_equal(st_prom_label(s, "num_cpu_blocks"), "None");
    assert_string_equal(st_prom_label(s, "gpu_memory_utilization"), "0.9");
    assert_null(st_prom_label(s, "nope"));
    double v;
    const char *const none[] = {"engine", "7", NULL};
    assert_int_equal(st_prom_sum(&p, "vllm:num_requests_running", none, &v), ST_ENOTFOUND);
    assert_int_equal(st_prom_sum(&p, "vllm:gpu_prefix_cache_hits_total", NULL, &v), ST_ENOTFOUND);
    assert_null(st_prom_find(&p, "vllm:num_requests"));
    st_prom_release(&p);
}

static const char sglang_text[] =
    "# HELP sglang:num_running_reqs The number of running requests.\n"
    "# TYPE sglang:num_running_reqs gauge\n"
    "sglang:num_running_reqs{model_name=\"qwen/Qwen3-8B\",tp_rank=\"0\"} 2.0\n"
    "# HELP sglang:num_queue_reqs The number of requests in the waiting queue.\n"
    "# TYPE sglang:num_queue_reqs gauge\n"
    "sglang:num_queue_reqs{model_name=\"qwen/Qwen3-8B\",tp_rank=\"0\"} 5.0\n"
    "# TYPE sglang:cache_hit_rate gauge\n"
    "sglang:cache_hit_rate{model_name=\"qwen/Qwen3-8B\",tp_rank=\"0\"} 0.8999\n"
    "# TYPE sglang:spec_accept_length gauge\n"
    "sglang:spec_accept_length{model_name=\"qwen/Qwen3-8B\",tp_rank=\"0\"} 2.75\n"
    /* prometheus_client 0.0.4: counters declared and exposed with _total */
    "# HELP sglang:prompt_tokens_total Number of prefill tokens processed.\n"
    "# TYPE sglang:prompt_tokens_total counter\n"
    "sglang:prompt_tokens_total{model_name=\"qwen/Qwen3-8B\"} 131072.0\n"
    /* an OpenMetrics-style family name without the suffix */
    "# TYPE sglang:cached_tokens counter\n"
    "sglang:cached_tokens_total{model_name=\"qwen/Qwen3-8B\"} 117964.0\n"
    "sglang:cached_tokens_created{model_name=\"qwen/Qwen3-8B\"} 1.7e9\n"
    "# TYPE sglang:time_to_first_token_seconds histogram\n"
    "sglang:time_to_first_token_seconds_bucket{le=\"0.1\",model_name=\"qwen/Qwen3-8B\"} 1.0\n"
    "sglang:time_to_first_token_seconds_bucket{le=\"0.25\",model_name=\"qwen/Qwen3-8B\"} 3.0\n"
    "sglang:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"qwen/Qwen3-8B\"} 4.0\n"
    "sglang:time_to_first_token_seconds_count{model_name=\"qwen/Qwen3-8B\"} 4.0\n"
    "sglang:time_to_first_token_seconds_sum{model_name=\"qwen/Qwen3-8B\"} 1.5\n"
    "# TYPE sglang:e2e_request_latency_seconds summary\n"
    "sglang:e2e_request_latency_seconds{quantile=\"0.5\"} 2.0\n"
    "sglang:e2e_request_latency_seconds_sum 9.5\n"
    "sglang:e2e_request_latency_seconds_count 4\n";

static void test_sglang_shapes(void **state)
{
    (void)state;
    struct st_prom p;
    st_prom_init(&p);
    assert_int_equal(parse(&p, sglang_text, NULL), 0);
    assert_int_equal(p.n, 15);
    assert_true(sum_of(&p, "sglang:num_queue_reqs", NULL) == 5);
    assert_true(sum_of(&p, "sglang:cached_tokens_total", NULL) == 117964);
    assert_true(sum_of(&p, "sglang:prompt_tokens_total", NULL) == 131072);
    assert_true(sum_of(&p, "sglang:spec_accept_length", NULL) == 2.75);
    assert_int_equal(type_of(&p, "sglang:prompt_tokens_total"), 'c');
    assert_int_equal(type_of(&p, "sglang:cached_tokens_total"), 'c');
    assert_int_equal(type_of(&p, "sglang:cached_tokens_created"), 'c');
    assert_int_equal(type_of(&p, "sglang:time_to_first_token_seconds_bucket"), 'h');
    assert_int_equal(type_of(&p, "sglang:e2e_request_latency_seconds"), 's');
    assert_int_equal(type_of(&p, "sglang:e2e_request_latency_seconds_sum"), 's');
    assert_int_equal(type_of(&p, "sglang:e2e_request_latency_seconds_count"), 's');
    const char *const q[] = {"le", "0.25", NULL};
    assert_true(sum_of(&p, "sglang:time_to_first_token_seconds_bucket", q) == 3);
    st_prom_release(&p);
}

static const char tgi_text[] = "# TYPE tgi_batch_max_total_tokens gauge\n"
                               "tgi_batch_max_total_tokens 163840\n"
                               "# TYPE tgi_queue_size gauge\n"
                               "tgi_queue_size 3\n"
                               "# TYPE tgi_request_failure counter\n"
                               "tgi_request_failure{err=\"validation\"} 2\n"
                               "tgi_request_failure{err=\"generation\"} 1\n"
                               "# TYPE tgi_request_duration histogram\n"
                               "tgi_request_duration_bucket{le=\"0.5\"} 7\n"
                               "tgi_request_duration_bucket{le=\"+Inf\"} 9\n"
                               "tgi_request_duration_sum 3.25\n"
                               "tgi_request_duration_count 9\n";

static void test_tgi_shapes(void **state)
{
    (void)state;
    struct st_prom p;
    st_prom_init(&p);
    assert_int_equal(parse(&p, tgi_text, NULL), 0);
    assert_int_equal(p.n, 8);
    assert_true(sum_of(&p, "tgi_batch_max_total_tokens", NULL) == 163840);
    assert_true(sum_of(&p, "tgi_request_failure", NULL) == 3);
    assert_int_equal(type_of(&p, "tgi_request_failure"), 'c');
    assert_int_equal(type_of(&p, "tgi_request_duration_count"), 'h');
    st_prom_release(&p);
}

/* ---- labels, values, layout ---- */

static void test_label_escapes(void **state)
{
    (void)state;
    struct st_prom p;
    st_prom_init(&p);
    const char *t =
        "a{path=\"C:\\\\dir\\\\x\",q=\"say \\\"hi\\\"\",nl=\"x\\ny\",e=\"\",u=\"h\xc3\xa9"
        "\xe4\xbd\xa0\",b=\"}{,=# \"} 1\n";
    assert_int_equal(parse(&p, t, NULL), 0);
    assert_int_equal(p.n, 1);
    const struct st_prom_sample *s = &p.samples[0];
    assert_int_equal(s->n_labels, 6);
    assert_string_equal(st_prom_label(s, "path"), "C:\\dir\\x");
    assert_string_equal(st_prom_label(s, "q"), "say \"hi\"");
    assert_string_equal(st_prom_label(s, "nl"), "x\ny");
    assert_string_equal(st_prom_label(s, "e"), "");
    assert_string_equal(st_prom_label(s, "u"), "h\xc3\xa9\xe4\xbd\xa0");
    assert_string_equal(st_prom_label(s, "b"), "}{,=# ");
    assert_string_equal(s->labels[0].name, "path");
    assert_string_equal(s->labels[5].name, "b");
    st_prom_release(&p);
}

static void test_label_layout(void **state)
{
    (void)state;
    struct st_prom p;
    st_prom_init(&p);
    const char *t = "a{b=\"1\",} 2\n"
                    "a { b = \"3\" , c=\"4\" } 5   \n"
                    "\t a{} 6\n"
                    "a{b=\"1\"}7\n"
                    "a\t8\n"
                    "vllm:x:y 9\n"
                    ":leading 10\n"
                    "_u 11\n";
    assert_int_equal(parse(&p, t, NULL), 0);
    assert_int_equal(p.n, 8);
    assert_int_equal(p.samples[0].n_labels, 1);
    assert_true(p.samples[0].value == 2);
    assert_int_equal(p.samples[1].n_labels, 2);
    assert_string_equal(st_prom_label(&p.samples[1], "c"), "4");
    assert_true(p.samples[1].value == 5);
    assert_int_equal(p.samples[2].n_labels, 0);
    assert_true(p.samples[2].value == 6);
    assert_true(p.samples[3].value == 7);
    assert_true(p.samples[4].value == 8);
    assert_string_equal(p.samples[5].name, "vllm:x:y");
    assert_string_equal(p.samples[6].name, ":leading");
    assert_string_equal(p.samples[7].name, "_u");
    assert_int_equal(p.n_labels_total, 4);
    st_prom_release(&p);
}

static void test_values(void **state)
{
    (void)state;
    struct st_prom p;
    st_prom_init(&p);
    const char *t = "a NaN\nb +Inf\nc -Inf\nd Inf\ne 1e3\nf -0.5\ng .5\nh 5.\ni 1E-3\nj 00012\n"
                    "k nan\nl -inf\nm +Infinity\nn 1e400\no -1e400\np 0\nq 3 1700000000000\n"
                    "r 4 -5\ns 5 +6  \n";
    assert_int_equal(parse(&p, t, NULL), 0);
    assert_int_equal(p.n, 19);
    double want[] = {NAN, INFINITY,  -INFINITY, INFINITY, 1e3,       -0.5, .5, 5, 1e-3, 12,
                     NAN, -INFINITY, INFINITY,  INFINITY, -INFINITY, 0,    3,  4, 5};
    for (uint32_t i = 0; i < p.n; i++) {
        if (isnan(want[i])) {
            assert_true(isnan(p.samples[i].value));
        } else {
            assert_true(p.samples[i].value == want[i]);
        }
    }
    st_prom_release(&p);
}

static void test_line_ends_and_empty(void **state)
{
    (void)state;
    struct st_prom p;
    uint32_t line = 5;
    st_prom_init(&p);
    const char *crlf = "# TYPE a counter\r\na 1\r\n\r\nb{c=\"d\"} 2\r\nc 3";
    assert_int_equal(parse(&p, crlf, &line), 0);
    assert_int_equal(p.n, 3);
    assert_int_equal(type_of(&p, "a"), 'c');
    assert_string_equal(st_prom_label(&p.samples[1], "c"), "d");
    assert_true(p.samples[2].value == 3);
    assert_int_equal(parse(&p, "", &line), 0);
    assert_int_equal(p.n, 0);
    assert_int_equal(parse(&p, "# just a comment\n\n   \n# HELP x y\n#\n", &line), 0);
    assert_int_equal(p.n, 0);
    double v;
    assert_int_equal(st_prom_sum(&p, "x", NULL, &v), ST_ENOTFOUND);
    st_prom_release(&p);
    st_prom_release(&p);
}

static void test_types(void **state)
{
    (void)state;
    struct st_prom p;
    st_prom_init(&p);
    const char *t = "late 1\n"
                    "# TYPE late gauge\n"
                    "# TYPE twice counter\n"
                    "# TYPE twice gauge\n"
                    "twice 2\n"
                    "# TYPE i info\n"
                    "i{version=\"1\"} 1\n"
                    "# TYPE u untyped\n"
                    "u 1\n"
                    "# TYPE g gauge\n"
                    "g_bucket 1\n"
                    "g_total 1\n"
                    "# TYPE sm summary\n"
                    "sm_bucket 1\n"
                    "# TYPE  \t spaced \t counter  \n"
                    "spaced_total 4\n"
                    "undeclared_total 5\n";
    assert_int_equal(parse(&p, t, NULL), 0);
    assert_int_equal(type_of(&p, "late"), 'g');
    assert_int_equal(type_of(&p, "twice"), 'g');
    assert_int_equal(type_of(&p, "i"), 'u');
    assert_int_equal(type_of(&p, "u"), 'u');
    assert_int_equal(type_of(&p, "g_bucket"), 'u');
    assert_int_equal(type_of(&p, "g_total"), 'u');
    assert_int_equal(type_of(&p, "sm_bucket"), 'u');
    assert_int_equal(type_of(&p, "spaced_total"), 'c');
    assert_int_equal(type_of(&p, "undeclared_total"), 'u');
    st_prom_release(&p);
}

/* ---- errors ---- */

static void test_errors_with_line(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "a{b=\"1} 1",
        "a{b=1} 1",
        "a{b=\"\\x\"} 1",
        "a{b=\"\\",
        "a{1b=\"x\"} 1",
        "a{b=\"1\"",
        "a{b=\"1\" c=\"2\"} 1",
        "a{b=\"1\",,c=\"2\"} 1",
        "a{b \"1\"} 1",
        "a{=\"1\"} 1",
        "a{b:c=\"1\"} 1",
        "a{b=\"1\"}} 1",
        "a",
        "a ",
        "a{}",
        "a x",
        "a 1 2 3",
        "a 1 1.5",
        "a 1 x",
        "a 1 -",
        "1a 2",
        "a-b 1",
        "a 0x10",
        "a 1_000",
        "a 1e",
        "a --1",
        "a .",
        "a +",
        "a infinit",
        "a 123456789012345678901234567890123456789012345678901234567890123456789",
        "a 1 123456789012345678901",
        "a{b=\"1\",b=\"2\"} 1",
        "# TYPE",
        "# TYPE a",
        "# TYPE a counter extra",
        "# TYPE 1a counter",
        "# TYPE a-b counter",
        "a{b=\"\xff\"} 1",
        "a{b=\"\xc3\"} 1",
        "é 1",
        "{b=\"1\"} 1",
    };
    struct st_prom p;
    st_prom_init(&p);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct st_buf b;
        uint32_t line = 0;
        st_buf_init(&b);
        st_buf_printf(&b, "# HELP ok fine\nok 1\n%s\nlater 2\n", bad[i]);
        int rc = st_prom_parse(&p, b.data, b.len, &line);
        if (rc != ST_EPARSE || line != 3) {
            fail_msg("case %zu '%s': rc %d line %u, want ST_EPARSE at line 3", i, bad[i], rc, line);
        }
        assert_int_equal(p.n, 0);
        assert_null(p.samples);
        st_buf_release(&b);
    }
    /* A NUL inside a label value. */
    uint32_t line = 0;
    static const char nul[] = "ok 1\na{b=\"x\0y\"} 1\n";
    assert_int_equal(st_prom_parse(&p, nul, sizeof(nul) - 1, &line), ST_EPARSE);
    assert_int_equal(line, 2);
    /* bad_line may be NULL. */
    assert_int_equal(parse(&p, "a x\n", NULL), ST_EPARSE);
    /* A good parse after a failure works, and a failure drops what p held. */
    assert_int_equal(parse(&p, "a 1\n", &line), 0);
    assert_int_equal(p.n, 1);
    assert_int_equal(parse(&p, "a 1\nb\n", &line), ST_EPARSE);
    assert_int_equal(line, 2);
    assert_int_equal(p.n, 0);
    st_prom_release(&p);
}

/* ---- bounds ---- */

static void test_bounds(void **state)
{
    (void)state;
    struct st_prom p;
    struct st_buf b;
    uint32_t line = 0;
    st_prom_init(&p);
    st_buf_init(&b);

    /* Bytes: over ST_PROM_MAX_BYTES is refused before reading. */
    size_t big = (size_t)ST_PROM_MAX_BYTES + 1;
    char *text = malloc(big);
    assert_non_null(text);
    memset(text, '\n', big);
    assert_int_equal(st_prom_parse(&p, text, big, &line), ST_ETOOBIG);
    assert_int_equal(st_prom_parse(&p, text, big - 1, &line), 0);
    assert_int_equal(p.n, 0);
    free(text);

    /* Samples: exactly the maximum parses; one more is ST_ETOOBIG at its line. */
    for (uint32_t i = 0; i < ST_PROM_MAX_SAMPLES; i++) {
        st_buf_puts(&b, "a 1\n");
    }
    assert_int_equal(st_prom_parse(&p, b.data, b.len, &line), 0);
    assert_int_equal(p.n, ST_PROM_MAX_SAMPLES);
    double v;
    assert_int_equal(st_prom_sum(&p, "a", NULL, &v), 0);
    assert_true(v == ST_PROM_MAX_SAMPLES);
    st_buf_puts(&b, "# a comment still parses\nb 2\n");
    assert_int_equal(st_prom_parse(&p, b.data, b.len, &line), ST_ETOOBIG);
    assert_int_equal(line, ST_PROM_MAX_SAMPLES + 2);
    assert_int_equal(p.n, 0);

    /* Labels per sample: 128 parse, 129 do not. */
    st_buf_clear(&b);
    st_buf_puts(&b, "a{");
    for (int i = 0; i < 128; i++) {
        st_buf_printf(&b, "l%d=\"%d\",", i, i);
    }
    st_buf_puts(&b, "} 1\n");
    assert_int_equal(st_prom_parse(&p, b.data, b.len, &line), 0);
    assert_int_equal(p.samples[0].n_labels, 128);
    assert_string_equal(st_prom_label(&p.samples[0], "l127"), "127");
    st_buf_clear(&b);
    st_buf_puts(&b, "ok 1\na{");
    for (int i = 0; i < 129; i++) {
        st_buf_printf(&b, "l%d=\"%d\",", i, i);
    }
    st_buf_puts(&b, "} 1\n");
    assert_int_equal(st_prom_parse(&p, b.data, b.len, &line), ST_ETOOBIG);
    assert_int_equal(line, 2);
    st_buf_release(&b);
    st_prom_release(&p);
}

/* ---- round trip of generated expositions ---- */

static void put_escaped(struct st_buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"') {
            st_buf_putc(b, '\\');
            st_buf_putc(b, *s);
        } else if (*s == '\n') {
            st_buf_puts(b, "\\n");
        } else {
            st_buf_putc(b, *s);
        }
    }
}

static void test_generated_round_trip(void **state)
{
    (void)state;
    static const char alphabet[] = "ab\\\"\n {},=#x\xc3\xa9";
    struct st_rng r;
    st_rng_seed(&r, 20240611);
    for (int round = 0; round < 50; round++) {
        uint32_t n = 1 + (uint32_t)st_rng_below(&r, 40);
        struct st_buf b;
        char values[40][8][16];
        uint32_t nl[40];
        double val[40];
        st_buf_init(&b);
        for (uint32_t i = 0; i < n; i++) {
            if (st_rng_below(&r, 4) == 0) {
                st_buf_puts(&b, "# HELP m_x some help \\n text\n");
            }
            st_buf_printf(&b, "m_%u", i);
            nl[i] = (uint32_t)st_rng_below(&r, 8);
            if (nl[i] > 0 || st_rng_below(&r, 2)) {
                st_buf_putc(&b, '{');
                for (uint32_t k = 0; k < nl[i]; k++) {
                    uint32_t vlen = (uint32_t)st_rng_below(&r, 8);
                    size_t at = 0;
                    for (uint32_t c = 0; c < vlen; c++) {
                        size_t pick = st_rng_below(&r, sizeof(alphabet) - 2);
                        if (alphabet[pick] == '\xc3') {
                            values[i][k][at++] = '\xc3';
                            values[i][k][at++] = '\xa9';
                        } else {
                            values[i][k][at++] = alphabet[pick];
                        }
                    }
                    values[i][k][at] = '\0';
                    st_buf_printf(&b, "%sl%u=\"", k ? "," : "", k);
                    put_escaped(&b, values[i][k]);
                    st_buf_putc(&b, '"');
                }
                st_buf_putc(&b, '}');
            }
            val[i] = (double)(int64_t)st_rng_below(&r, 2000000) / 8.0 - 100000.0;
            st_buf_printf(&b, " %.17g", val[i]);
            if (st_rng_below(&r, 3) == 0) {
                st_buf_printf(&b, " %llu", (unsigned long long)st_rng_below(&r, 1u << 30));
            }
            st_buf_puts(&b, st_rng_below(&r, 5) == 0 ? "\r\n" : "\n");
        }
        struct st_prom p;
        uint32_t line = 0;
        st_prom_init(&p);
        int rc = st_prom_parse(&p, b.data, b.len, &line);
        if (rc != 0) {
            fail_msg("round %d: rc %d at line %u of:\n%s", round, rc, line, b.data);
        }
        assert_int_equal(p.n, n);
        for (uint32_t i = 0; i < n; i++) {
            char name[16];
            snprintf(name, sizeof(name), "m_%u", i);
            assert_string_equal(p.samples[i].name, name);
            assert_true(p.samples[i].value == val[i]);
            assert_int_equal(p.samples[i].n_labels, nl[i]);
            for (uint32_t k = 0; k < nl[i]; k++) {
                char ln[16];
                snprintf(ln, sizeof(ln), "l%u", k);
                assert_string_equal(st_prom_label(&p.samples[i], ln), values[i][k]);
            }
        }
        st_prom_release(&p);
        st_buf_release(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llamacpp_wire), cmocka_unit_test(test_vllm_shapes),
        cmocka_unit_test(test_sglang_shapes), cmocka_unit_test(test_tgi_shapes),
        cmocka_unit_test(test_label_escapes), cmocka_unit_test(test_label_layout),
        cmocka_unit_test(test_values),        cmocka_unit_test(test_line_ends_and_empty),
        cmocka_unit_test(test_types),         cmocka_unit_test(test_errors_with_line),
        cmocka_unit_test(test_bounds),        cmocka_unit_test(test_generated_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
