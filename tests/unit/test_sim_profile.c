/*
 * Tests for src/sim/model/profile.c: the descriptor table and the defaults, every field type and
 * unit suffix, every error class with its exact "NAME:LINE:COL: path: ..." message, --set
 * overrides and their errors, the lines recorded for messages, every cross-field check of
 * st_profile_validate, and round trips (a full example, the defaults, each field through
 * st_profile_format and --set). No files are read: profiles are inline text.
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
#include "sim/model/profile.h"

/* ---- helpers ---- */

static char err[512];

static int parse(struct st_profile *p, const char *yaml)
{
    err[0] = '\0';
    return st_profile_parse(p, yaml, strlen(yaml), "p.yaml", err, sizeof(err));
}

static int set(struct st_profile *p, const char *assignment)
{
    err[0] = '\0';
    return st_profile_set(p, assignment, err, sizeof(err));
}

static int validate(const struct st_profile *p)
{
    err[0] = '\0';
    return st_profile_validate(p, err, sizeof(err));
}

/* Parses yaml over the defaults and asserts that it succeeds. */
static void parse_ok(struct st_profile *p, const char *yaml)
{
    st_profile_defaults(p);
    int rc = parse(p, yaml);
    if (rc != 0) {
        fail_msg("parse failed: %s", err);
    }
}

/* Asserts that yaml is refused with exactly msg and leaves the defaults untouched. */
static void parse_fails(const char *yaml, const char *msg)
{
    struct st_profile p, before;
    st_profile_defaults(&p);
    memcpy(&before, &p, sizeof(p)); /* padding too: compared with memcmp */
    assert_int_equal(parse(&p, yaml), ST_EPARSE);
    assert_string_equal(err, msg);
    assert_memory_equal(&p, &before, sizeof(p));
}

/* Asserts that assignment is refused with exactly msg and changes nothing. */
static void set_fails(const char *assignment, const char *msg)
{
    struct st_profile p, before;
    st_profile_defaults(&p);
    memcpy(&before, &p, sizeof(p)); /* padding too: compared with memcmp */
    assert_int_equal(set(&p, assignment), ST_EPARSE);
    assert_string_equal(err, msg);
    assert_memory_equal(&p, &before, sizeof(p));
}

/* Asserts that yaml parses over the defaults and then fails validation with exactly msg. */
static void invalid(const char *yaml, const char *msg)
{
    struct st_profile p;
    parse_ok(&p, yaml);
    assert_int_equal(validate(&p), ST_EPARSE);
    assert_string_equal(err, msg);
}

static void valid(const char *yaml)
{
    struct st_profile p;
    parse_ok(&p, yaml);
    int rc = validate(&p);
    if (rc != 0) {
        fail_msg("validate failed: %s", err);
    }
}

static int field(const char *path)
{
    int i = st_profile_field_find(path, strlen(path));
    assert_true(i >= 0);
    return i;
}

/* The values of two profiles, without origin and field_line. */
static void assert_same_values(const struct st_profile *a, const struct st_profile *b)
{
    assert_memory_equal(a, b, offsetof(struct st_profile, origin));
}

/* ---- the table and the defaults ---- */

static void test_defaults(void **state)
{
    (void)state;
    struct st_profile p;
    st_profile_defaults(&p);
    assert_string_equal(p.model.name, "dense-8b");
    assert_int_equal(p.model.layers, 32);
    assert_int_equal(p.model.hidden, 4096);
    assert_int_equal(p.model.heads, 32);
    assert_int_equal(p.model.kv_heads, 8);
    assert_int_equal(p.model.head_dim, 128);
    assert_int_equal(p.model.attention, ST_ATTN_GQA);
    assert_true(p.model.params_total == 8.03e9);
    assert_true(p.model.weight_bytes == 2);
    assert_int_equal(p.model.vocab, 128256);
    assert_int_equal(p.hw.gpus, 1);
    assert_true(p.hw.gpu_mem_bytes == 80e9);
    assert_true(p.hw.hbm_bytes_per_s == 3.35e12);
    assert_true(p.hw.flops_bf16 == 989e12);
    assert_true(p.hw.flops_fp8 == 1979e12);
    assert_true(p.hw.flops_fp4 == 0);
    assert_true(p.hw.link_latency_s == 10e-6);
    assert_int_equal(p.engine.dialect, ST_DIALECT_VLLM);
    assert_int_equal(p.engine.tp, 1);
    assert_int_equal(p.engine.pp, 1);
    assert_int_equal(p.engine.dp_attention, 1);
    assert_true(p.engine.mem_fraction == 0.9);
    assert_true(p.engine.kv_dtype_bytes == 2);
    assert_int_equal(p.engine.page_size, 16);
    assert_int_equal(p.engine.max_batched_tokens, 8192);
    assert_int_equal(p.engine.max_running, 256);
    assert_int_equal(p.engine.context_length, 32768);
    assert_int_equal(p.engine.prefix_caching, 1);
    assert_int_equal(p.engine.cached_report, ST_CACHED_REPORT_USAGE);
    assert_int_equal(p.engine.spec_method, ST_SPEC_NONE);
    assert_int_equal(p.engine.spec_steps, 0);
    assert_int_equal(p.engine.n_spec_accept, 0);
    assert_int_equal(p.engine.n_graph_sizes, 9);
    assert_int_equal(p.engine.graph_sizes[0], 1);
    assert_int_equal(p.engine.graph_sizes[8], 256);
    assert_true(p.engine.graph_bytes_per_size == 8e6);
    assert_true(p.engine.act_bytes_per_token == 128e3);
    assert_true(p.engine.reserve_bytes == 1e9);
    assert_true(p.engine.startup_s == 30);
    assert_true(p.quality.error_rate == 0);
    assert_int_equal(p.seed, 1);
    assert_string_equal(p.origin, "");
    for (int i = 0; i < ST_PROFILE_MAX_FIELDS; i++) {
        assert_int_equal(p.field_line[i], 0);
    }
    assert_int_equal(validate(&p), 0);
    assert_string_equal(err, "");
    /* Deterministic: two calls give the same bytes. */
    struct st_profile q;
    memset(&q, 0xa5, sizeof(q));
    st_profile_defaults(&q);
    assert_memory_equal(&p, &q, sizeof(p));
}

static void test_table(void **state)
{
    (void)state;
    uint32_t n = 0;
    const struct st_profile_field *f = st_profile_fields(&n);
    assert_non_null(f);
    assert_true(n > 50 && n <= ST_PROFILE_MAX_FIELDS);
    struct st_profile p;
    st_profile_defaults(&p);
    for (uint32_t i = 0; i < n; i++) {
        /* Every path is unique, found by find, in a known section (or "seed"). */
        assert_int_equal(st_profile_field_find(f[i].path, strlen(f[i].path)), (int)i);
        const char *dot = strchr(f[i].path, '.');
        if (dot) {
            size_t len = (size_t)(dot - f[i].path);
            assert_true((len == 5 && memcmp(f[i].path, "model", 5) == 0) ||
                        (len == 8 && memcmp(f[i].path, "hardware", 8) == 0) ||
                        (len == 6 && memcmp(f[i].path, "engine", 6) == 0) ||
                        (len == 7 && memcmp(f[i].path, "quality", 7) == 0) ||
                        (len == 4 && memcmp(f[i].path, "perf", 4) == 0));
        } else {
            assert_string_equal(f[i].path, "seed");
        }
        assert_true(strlen(f[i].path) < 48);
        assert_non_null(f[i].def);
        assert_non_null(f[i].unit);
        assert_true(strlen(f[i].doc) > 10);
        assert_true(f[i].offset + f[i].size <= offsetof(struct st_profile, origin));
        /* Storage is shared only by an alias and its field. */
        for (uint32_t j = 0; j < i; j++) {
            if (f[j].offset == f[i].offset) {
                assert_true((f[i].flags | f[j].flags) & ST_PROFILE_F_ALIAS);
            }
        }
        /* Every default, aliases included, reads back through --set to the default value. */
        char a[256];
        snprintf(a, sizeof(a), "%s=%s", f[i].path, f[i].def);
        struct st_profile q;
        memcpy(&q, &p, sizeof(q));
        if (set(&q, a) != 0) {
            fail_msg("default of %s: %s", f[i].path, err);
        }
        assert_same_values(&p, &q);
    }
    /* The table covers the struct: every byte before origin belongs to a field or a list count,
     * but for padding, which is never 8 bytes long. A new double or uint64_t member without a
     * row fails here; scripts/profile-keys.py --check also compares the member names. */
    unsigned char covered[offsetof(struct st_profile, origin)];
    memset(covered, 0, sizeof(covered));
    for (uint32_t i = 0; i < n; i++) {
        memset(covered + f[i].offset, 1, f[i].size);
        if (f[i].count_offset) {
            memset(covered + f[i].count_offset, 1, sizeof(uint32_t));
        }
    }
    size_t hole = 0;
    for (size_t b = 0; b < sizeof(covered); b++) {
        hole = covered[b] ? 0 : hole + 1;
        if (hole >= 8) {
            fail_msg("bytes %zu..%zu of struct st_profile have no descriptor", b - 7, b);
        }
    }
    assert_int_equal(st_profile_field_find("engine.tp", 9), field("engine.tp"));
    assert_int_equal(st_profile_field_find("engine.t", 8), -1);
    assert_int_equal(st_profile_field_find("engine.tpx", 10), -1);
    assert_int_equal(st_profile_field_find("", 0), -1);
}

/* ---- every field type ---- */

static const char every_type[] = "model:\n"
                                 "  name: \"GLM 5.3 \\\"nvfp4\\\"\"\n" /* string */
                                 "  layers: 78\n"                      /* u32 */
                                 "  attention: mla\n"                  /* enum */
                                 "  params_total: 753e9\n"             /* f64 */
                                 "engine:\n"
                                 "  context_length: 1048576\n"       /* u64 */
                                 "  prefix_caching: false\n"         /* bool */
                                 "  kv_dtype: fp8\n"                 /* kv dtype */
                                 "  spec_accept: [0.9, 0.75, 0.5]\n" /* f64 list */
                                 "  graph_sizes:\n"                  /* u32 list, block style */
                                 "    - 1\n"
                                 "    - 2\n"
                                 "    - 4\n"
                                 "seed: 18446744073709551615\n";

static void test_every_type(void **state)
{
    (void)state;
    struct st_profile p;
    parse_ok(&p, every_type);
    assert_string_equal(p.model.name, "GLM 5.3 \"nvfp4\"");
    assert_int_equal(p.model.layers, 78);
    assert_int_equal(p.model.attention, ST_ATTN_MLA);
    assert_true(p.model.params_total == 753e9);
    assert_int_equal(p.engine.context_length, 1048576);
    assert_int_equal(p.engine.prefix_caching, 0);
    assert_true(p.engine.kv_dtype_bytes == 1);
    assert_int_equal(p.engine.n_spec_accept, 3);
    assert_true(p.engine.spec_accept[0] == 0.9);
    assert_true(p.engine.spec_accept[1] == 0.75);
    assert_true(p.engine.spec_accept[2] == 0.5);
    assert_true(p.engine.spec_accept[3] == 0);
    assert_int_equal(p.engine.n_graph_sizes, 3);
    assert_int_equal(p.engine.graph_sizes[2], 4);
    assert_int_equal(p.engine.graph_sizes[3], 0); /* the old defaults are gone */
    assert_true(p.seed == UINT64_MAX);
    /* Untouched keys keep their defaults. */
    assert_int_equal(p.model.hidden, 4096);
    assert_int_equal(p.engine.tp, 1);
    /* Other spellings: booleans, enums, a single value as a list, an empty list, flow maps. */
    parse_ok(&p, "engine: {prefix_caching: True, dialect: sglang, spec_method: eagle, "
                 "spec_accept: 0.7, graph_sizes: []}\n"
                 "model: {attention: mha, name: plain words}\n");
    assert_int_equal(p.engine.prefix_caching, 1);
    assert_int_equal(p.engine.dialect, ST_DIALECT_SGLANG);
    assert_int_equal(p.engine.spec_method, ST_SPEC_EAGLE);
    assert_int_equal(p.engine.n_spec_accept, 1);
    assert_true(p.engine.spec_accept[0] == 0.7);
    assert_int_equal(p.engine.n_graph_sizes, 0);
    assert_int_equal(p.model.attention, ST_ATTN_MHA);
    assert_string_equal(p.model.name, "plain words");
    parse_ok(&p, "engine:\n  prefix_caching: FALSE\n  dialect: llamacpp\n  spec_method: draft\n"
                 "  kv_dtype: fp32\nmodel:\n  attention: gqa\n");
    assert_int_equal(p.engine.prefix_caching, 0);
    assert_int_equal(p.engine.dialect, ST_DIALECT_LLAMACPP);
    assert_int_equal(p.engine.spec_method, ST_SPEC_DRAFT);
    assert_true(p.engine.kv_dtype_bytes == 4);
    /* Single-quoted escapes (read without libfyaml's unescaping, which leaks in 0.7.12 for some
     * of them: the first input below is the fuzzer's). */
    parse_fails("'''''''''''''''''''''''''':",
                "p.yaml:1:2: '''''''''''': unknown section (expected model, hardware, engine, "
                "quality, perf or seed)");
    parse_ok(&p, "model:\n  name: 'a''''''''b'\n");
    assert_string_equal(p.model.name, "a''''b");
    parse_ok(&p, "model:\n  name: 'Bob''s 8B'\nengine:\n  dialect: 'vllm'\n");
    assert_string_equal(p.model.name, "Bob's 8B");
    parse_fails("model:\n  name: 'a''b\n    c'\n",
                "p.yaml:2:10: single-quoted text with '' over several lines is not supported; "
                "write it on one line or in double quotes");
    parse_ok(&p, "model:\n  name: 'a b\n    c'\n"); /* folded by libfyaml: no escape */
    assert_string_equal(p.model.name, "a b c");
    assert_int_equal(set(&p, "model.name='it''s'"), 0);
    assert_string_equal(p.model.name, "it's");
    /* Quoting does not change a value: it is read from its text. */
    parse_ok(&p, "engine:\n  tp: \"4\"\n  mem_fraction: '0.85'\n");
    assert_int_equal(p.engine.tp, 4);
    assert_true(p.engine.mem_fraction == 0.85);
    /* Comments, a document start marker and a 63-byte name. */
    parse_ok(&p, "%YAML 1.2\n---\n# c\nmodel:  # c\n  name: "
                 "abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij123  # c\n...\n");
    assert_int_equal(strlen(p.model.name), 63);
}

static void test_numbers(void **state)
{
    (void)state;
    struct st_profile p;
    parse_ok(&p, "seed: 96e9\nengine:\n  tp: 4.0\n  pp: +2\n  context_length: 1.31072e5\n");
    assert_true(p.seed == 96000000000ull);
    assert_int_equal(p.engine.tp, 4);
    assert_int_equal(p.engine.pp, 2);
    assert_int_equal(p.engine.context_length, 131072);
    parse_ok(&p, "seed: 96000000000\n");
    assert_true(p.seed == 96000000000ull);
    parse_ok(&p, "engine:\n  mem_fraction: .85\n  admit_output_reserve: 1.\n");
    assert_true(p.engine.mem_fraction == 0.85);
    assert_true(p.engine.admit_output_reserve == 1);
    parse_ok(&p, "model:\n  params_total: 6.71E+11\n  params_active: 3.7e10\n"
                 "  params_dense: 1.4e10\n");
    assert_true(p.model.params_total == 671e9);
    assert_true(p.model.params_active == 37e9);
    /* Exact up to 2^64 - 1 in digits; over it, not integral, or not decimal: refused. */
    parse_ok(&p, "seed: 9007199254740993\n");
    assert_true(p.seed == 9007199254740993ull);
    parse_fails("seed: 18446744073709551616\n",
                "p.yaml:1:7: seed: expected an integer from 0 "
                "to 18446744073709551615, got '18446744073709551616'");
    parse_fails("engine:\n  tp: 1.5\n",
                "p.yaml:2:7: engine.tp: expected an integer from 1 to 64, got '1.5'");
    parse_fails("engine:\n  tp: 0x4\n",
                "p.yaml:2:7: engine.tp: expected an integer from 1 to 64, got '0x4'");
    parse_fails("engine:\n  tp: -1\n",
                "p.yaml:2:7: engine.tp: expected an integer from 1 to 64, got '-1'");
    parse_fails("engine:\n  tp: 1e\n",
                "p.yaml:2:7: engine.tp: expected an integer from 1 to 64, got '1e'");
    parse_fails("engine:\n  mem_fraction: .inf\n",
                "p.yaml:2:17: engine.mem_fraction: expected a number in (0, 1], got '.inf'");
    parse_fails("engine:\n  mem_fraction: nan\n",
                "p.yaml:2:17: engine.mem_fraction: expected a number in (0, 1], got 'nan'");
    parse_fails("engine:\n  mem_fraction: 1e999\n",
                "p.yaml:2:17: engine.mem_fraction: expected a number in (0, 1], got '1e999'");
    parse_fails("seed: 1e99999999999999999999\n",
                "p.yaml:1:7: seed: expected an integer from 0 to 18446744073709551615, got "
                "'1e99999999999999999999'");
    parse_fails(
        "engine:\n  mem_fraction: 0.1000000000000000000000000000000000000000000000000000000001\n",
        "p.yaml:2:17: engine.mem_fraction: expected a number in (0, 1], got "
        "'0.10000000000000000000000000000000000000...'");
    parse_fails("engine:\n  mem_fraction: .\n",
                "p.yaml:2:17: engine.mem_fraction: expected a number in (0, 1], got '.'");
}

static void test_units(void **state)
{
    (void)state;
    struct st_profile p;
    parse_ok(&p, "hardware:\n"
                 "  gpu_mem_bytes: 96GiB\n"
                 "  hbm_bytes_per_s: 1.8TB/s\n"
                 "  flops_bf16: 2.25PFLOPS\n"
                 "  flops_fp8: 989 TFLOPS\n"
                 "  flops_fp4: 4.5PFLOP/s\n"
                 "  link_bytes_per_s: 64GiB/s\n"
                 "  link_latency_s: 10us\n"
                 "engine:\n"
                 "  reserve_bytes: 512MiB\n"
                 "  graph_bytes_per_size: 1.5MB\n"
                 "  act_bytes_per_token: 80KB\n"
                 "  startup_s: 2ms\n");
    assert_true(p.hw.gpu_mem_bytes == 96.0 * 1024 * 1024 * 1024);
    /* Decimal units scale the exponent, so the value is the one the digits name. */
    assert_true(p.hw.hbm_bytes_per_s == 1.8e12);
    assert_true(p.hw.flops_bf16 == 2.25e15);
    assert_true(p.hw.flops_fp8 == 989e12);
    assert_true(p.hw.flops_fp4 == 4.5e15);
    assert_true(p.hw.link_bytes_per_s == 64.0 * 1024 * 1024 * 1024);
    assert_true(p.hw.link_latency_s == 1e-5);
    assert_true(p.engine.reserve_bytes == 512.0 * 1024 * 1024);
    assert_true(p.engine.graph_bytes_per_size == 1.5e6);
    assert_true(p.engine.act_bytes_per_token == 80e3);
    assert_true(p.engine.startup_s == 2e-3);
    parse_ok(&p, "hardware:\n  gpu_mem_bytes: 80GB\n  hbm_bytes_per_s: 3352 GB/s\n"
                 "  flops_bf16: 1e3TFLOPS\n  link_latency_s: 1500ns\n"
                 "engine:\n  reserve_bytes: 1TiB\n  startup_s: 90s\n"
                 "  graph_bytes_per_size: 4096B\n  act_bytes_per_token: 1KiB\n");
    assert_true(p.hw.gpu_mem_bytes == 80e9);
    assert_true(p.hw.hbm_bytes_per_s == 3.352e12);
    assert_true(p.hw.flops_bf16 == 1e15);
    assert_true(p.hw.link_latency_s == 1.5e-6);
    assert_true(p.engine.reserve_bytes == 1099511627776.0);
    assert_true(p.engine.startup_s == 90);
    assert_true(p.engine.graph_bytes_per_size == 4096);
    assert_true(p.engine.act_bytes_per_token == 1024);
    /* A unit of another quantity, a unit in another case, a unit on a unitless field. */
    parse_fails("hardware:\n  gpu_mem_bytes: 1.8TB/s\n",
                "p.yaml:2:18: hardware.gpu_mem_bytes: expected bytes in (0, 1e+14], as a number "
                "or with a unit (B KB MB GB TB KiB MiB GiB TiB), got '1.8TB/s'");
    parse_fails("hardware:\n  gpu_mem_bytes: 80gb\n",
                "p.yaml:2:18: hardware.gpu_mem_bytes: expected bytes in (0, 1e+14], as a number "
                "or with a unit (B KB MB GB TB KiB MiB GiB TiB), got '80gb'");
    parse_fails("hardware:\n  hbm_bytes_per_s: 3TB\n",
                "p.yaml:2:20: hardware.hbm_bytes_per_s: expected bytes/s in (0, 1e+15], as a "
                "number or with a unit (B/s KB/s MB/s GB/s TB/s KiB/s MiB/s GiB/s TiB/s), got "
                "'3TB'");
    parse_fails("hardware:\n  flops_bf16: 989TB/s\n",
                "p.yaml:2:15: hardware.flops_bf16: expected FLOP/s in (0, 1e+18], as a number or "
                "with a unit (FLOPS GFLOPS TFLOPS PFLOPS FLOP/s GFLOP/s TFLOP/s PFLOP/s), got "
                "'989TB/s'");
    parse_fails("hardware:\n  link_latency_s: 2h\n",
                "p.yaml:2:19: hardware.link_latency_s: expected seconds in [0, 1], as a number or "
                "with a unit (s ms us ns), got '2h'");
    parse_fails("engine:\n  mem_fraction: 0.9GB\n",
                "p.yaml:2:17: engine.mem_fraction: expected a number in (0, 1], got '0.9GB'");
    parse_fails("engine:\n  tp: 4GB\n",
                "p.yaml:2:7: engine.tp: expected an integer from 1 to 64, got '4GB'");
    parse_fails("hardware:\n  gpu_mem_bytes: GB\n",
                "p.yaml:2:18: hardware.gpu_mem_bytes: expected bytes in (0, 1e+14], as a number "
                "or with a unit (B KB MB GB TB KiB MiB GiB TiB), got 'GB'");
    /* Range applies after the unit: 200 TB is over 1e14 bytes. */
    parse_fails("hardware:\n  gpu_mem_bytes: 200TB\n",
                "p.yaml:2:18: hardware.gpu_mem_bytes: expected bytes in (0, 1e+14], as a number "
                "or with a unit (B KB MB GB TB KiB MiB GiB TiB), got '200TB'");
}

/* ---- error classes ---- */

static void test_errors_range(void **state)
{
    (void)state;
    parse_fails("engine:\n  tp: 0\n",
                "p.yaml:2:7: engine.tp: expected an integer from 1 to 64, got '0'");
    parse_fails("engine:\n  tp: 65\n",
                "p.yaml:2:7: engine.tp: expected an integer from 1 to 64, got '65'");
    parse_fails("engine:\n  mem_fraction: 0\n",
                "p.yaml:2:17: engine.mem_fraction: expected a number in (0, 1], got '0'");
    parse_fails("engine:\n  mem_fraction: 1.01\n",
                "p.yaml:2:17: engine.mem_fraction: expected a number in (0, 1], got '1.01'");
    parse_fails("hardware:\n  gpu_mem_bytes: -80GB\n",
                "p.yaml:2:18: hardware.gpu_mem_bytes: expected bytes in (0, 1e+14], as a number "
                "or with a unit (B KB MB GB TB KiB MiB GiB TiB), got '-80GB'");
    parse_fails("model:\n  kv_heads: 0\n",
                "p.yaml:2:13: model.kv_heads: expected an integer from 1 to 4096, got '0'");
    parse_fails("engine:\n  spec_steps: 9\n",
                "p.yaml:2:15: engine.spec_steps: expected an integer from 0 to 8, got '9'");
    parse_fails("quality:\n  error_rate: -0.1\n",
                "p.yaml:2:15: quality.error_rate: expected a number in [0, 1], got '-0.1'");
    parse_fails("engine:\n  kv_dtype_bytes: 0.1\n",
                "p.yaml:2:19: engine.kv_dtype_bytes: expected a number in [0.25, 8], got '0.1'");
}

static void test_errors_type(void **state)
{
    (void)state;
    parse_fails("engine:\n  tp: four\n",
                "p.yaml:2:7: engine.tp: expected an integer from 1 to 64, got 'four'");
    parse_fails("engine:\n  tp:\n    a: 1\n",
                "p.yaml:3:5: engine.tp: expected an integer from 1 to 64, got a mapping");
    parse_fails("engine:\n  tp: [1, 2]\n",
                "p.yaml:2:8: engine.tp: expected an integer from 1 to 64, got a list");
    parse_fails("engine:\n  tp:\n", "p.yaml:2:3: engine.tp: expected an integer from 1 to 64, "
                                    "got an empty value");
    /* libfyaml marks a quoted scalar at its first character inside the quotes, and an alias at
     * its name. */
    parse_fails("engine:\n  tp: ''\n", "p.yaml:2:8: engine.tp: expected an integer from 1 to 64, "
                                       "got an empty value");
    parse_fails("engine:\n  tp: &four 4\n  pp: *four\n",
                "p.yaml:3:8: engine.pp: expected an integer from 1 to 64, got an alias (*four)");
    parse_fails("engine:\n  prefix_caching: yes\n",
                "p.yaml:2:19: engine.prefix_caching: expected true or false, got 'yes'");
    parse_fails("engine:\n  prefix_caching: 1\n",
                "p.yaml:2:19: engine.prefix_caching: expected true or false, got '1'");
    parse_fails("model:\n  attention: GQA\n",
                "p.yaml:2:14: model.attention: expected one of mha, gqa, mla, got 'GQA'");
    parse_fails("engine:\n  dialect: tgi\n",
                "p.yaml:2:12: engine.dialect: expected one of vllm, sglang, llamacpp, got 'tgi'");
    parse_fails("engine:\n  spec_method: medusa\n", "p.yaml:2:16: engine.spec_method: expected "
                                                    "one of none, mtp, eagle, draft, got 'medusa'");
    parse_fails("engine:\n  kv_dtype: int8\n",
                "p.yaml:2:13: engine.kv_dtype: expected one of fp8, fp8_e4m3, fp8_e5m2, bf16, "
                "fp16, fp32, got 'int8'");
    parse_fails("model:\n  name: "
                "abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij1234\n",
                "p.yaml:2:9: model.name: expected a string of 1 to 63 bytes without control "
                "characters, got 'abcdefghijabcdefghijabcdefghijabcdefghij...'");
    parse_fails("model:\n  name: \"a\\tb\"\n",
                "p.yaml:2:10: model.name: expected a string of 1 to 63 bytes without control "
                "characters, got 'a\\x09b'");
    parse_fails("model:\n  name: [a]\n",
                "p.yaml:2:10: model.name: expected a string of 1 to 63 bytes without control "
                "characters, got a list");
    /* Lists: too long, an element of the wrong type or range (with its index), not increasing,
     * not a list at all. */
    parse_fails("engine:\n  spec_accept: [0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9]\n",
                "p.yaml:2:17: engine.spec_accept: expected a list of at most 8 values, "
                "got 9 values");
    parse_fails("engine:\n  spec_accept: [0.9, 1.5]\n",
                "p.yaml:2:22: engine.spec_accept[1]: expected a number in [0, 1], got '1.5'");
    parse_fails("engine:\n  spec_accept: [0.9, [0.5]]\n",
                "p.yaml:2:23: engine.spec_accept[1]: expected a number in [0, 1], got a list");
    parse_fails("engine:\n  graph_sizes:\n    - 1\n    - 8\n    - 4\n",
                "p.yaml:5:7: engine.graph_sizes[2]: expected an integer greater than 8 (sizes "
                "increase), got '4'");
    parse_fails("engine:\n  graph_sizes: [1, 1]\n",
                "p.yaml:2:20: engine.graph_sizes[1]: expected an integer greater than 1 (sizes "
                "increase), got '1'");
    parse_fails("engine:\n  graph_sizes: [0]\n",
                "p.yaml:2:17: engine.graph_sizes[0]: expected an integer from 1 to 65536, got '0'");
    parse_fails("engine:\n  graph_sizes: {a: 1}\n",
                "p.yaml:2:17: engine.graph_sizes: expected a list of at most 64 values, got a "
                "mapping");
    parse_fails("engine:\n  graph_sizes:\n",
                "p.yaml:2:3: engine.graph_sizes: expected a list of at most 64 values, got an "
                "empty value");
}

static void test_errors_structure(void **state)
{
    (void)state;
    /* Unknown keys: a near miss, the same key in another section, nothing close. */
    parse_fails("engine:\n  tpp: 2\n", "p.yaml:2:3: engine.tpp: unknown key (did you mean "
                                       "engine.tp?)");
    parse_fails("engine:\n  gpus: 2\n", "p.yaml:2:3: engine.gpus: unknown key (did you mean "
                                        "hardware.gpus?)");
    parse_fails("model:\n  colour: blue\n",
                "p.yaml:2:3: model.colour: unknown key (docs/simulator.md lists every key)");
    parse_fails("engine:\n  seed: 3\n",
                "p.yaml:2:3: engine.seed: unknown key (did you mean seed?)");
    parse_fails("seed: 1\nmodle:\n  layers: 2\n",
                "p.yaml:2:1: modle: unknown section (expected "
                "model, hardware, engine, quality, perf or seed)");
    parse_fails("tp: 2\n", "p.yaml:1:1: tp: unknown section (expected model, hardware, engine, "
                           "quality, perf or seed)");
    parse_fails("engine.tp: 2\n", "p.yaml:1:1: engine.tp: unknown section (expected model, "
                                  "hardware, engine, quality, perf or seed)");
    /* Shapes: a section that is not a mapping, a root that is not a mapping, complex keys. */
    parse_fails("engine: 4\n", "p.yaml:1:9: engine: expected a mapping of engine keys, got '4'");
    parse_fails("engine:\n  - tp\n", "p.yaml:2:5: engine: expected a mapping of engine keys, got "
                                     "a list");
    parse_fails("- model\n", "p.yaml:1:3: expected a mapping of the sections model, hardware, "
                             "engine, quality, perf and the key seed, got a list");
    parse_fails("just text\n", "p.yaml:1:1: expected a mapping of the sections model, hardware, "
                               "engine, quality, perf and the key seed, got 'just text'");
    parse_fails("engine:\n  ? [tp]\n  : 4\n", "p.yaml:2:6: expected a key, got a list");
    parse_fails("? [engine]\n: {tp: 4}\n", "p.yaml:1:4: expected a key, got a list");
    /* Two spellings of one value in one file. */
    parse_fails("engine:\n  kv_dtype: fp8\n  kv_dtype_bytes: 1\n",
                "p.yaml:3:3: engine.kv_dtype_bytes: conflicts with engine.kv_dtype on line 2; "
                "give one of them");
    /* Empty inputs change nothing. */
    struct st_profile p, d;
    st_profile_defaults(&d);
    parse_ok(&p, "");
    assert_same_values(&p, &d);
    parse_ok(&p, "# nothing\n\n");
    assert_same_values(&p, &d);
    parse_ok(&p, "model:\nengine:\n");
    assert_same_values(&p, &d);
}

static void test_errors_yaml(void **state)
{
    (void)state;
    struct st_profile p, before;
    st_profile_defaults(&p);
    memcpy(&before, &p, sizeof(p)); /* padding too: compared with memcmp */
    /* Syntax: libfyaml's text after our name and its (1-based) position. */
    assert_int_equal(parse(&p, "engine:\n  graph_sizes: [1, 2\n"), ST_EPARSE);
    assert_memory_equal(err, "p.yaml:3:1: ", 12);
    assert_true(strlen(err) > 14);
    assert_int_equal(parse(&p, "engine:\n  tp: 1\n  tp: 2\n"), ST_EPARSE);
    assert_string_equal(err, "p.yaml:3:3: duplicate key");
    assert_int_equal(parse(&p, "engine:\n  tp: 1\n pp: 2\n"), ST_EPARSE);
    assert_memory_equal(err, "p.yaml:3:", 9);
    assert_int_equal(parse(&p, "model:\n  name: \"a\\q\"\n"), ST_EPARSE);
    assert_memory_equal(err, "p.yaml:2:", 9);
    assert_int_equal(parse(&p, "engine:\n\ttp: 1\n"), ST_EPARSE);
    assert_memory_equal(err, "p.yaml:2:", 9);
    assert_memory_equal(&p, &before, sizeof(p));
    /* One document only. */
    parse_fails("seed: 1\n---\nseed: 2\n",
                "p.yaml:3:1: expected one YAML document, got a second one");
    parse_fails("seed: 1\n---\n", "p.yaml: expected one YAML document, got a second one");
    /* Bytes that are not UTF-8 text, at their position. */
    parse_fails("model:\n  name: \"a\xff\"\n", "p.yaml:2:11: invalid UTF-8 (byte 0xff)");
    parse_fails("model:\n  name: \"\xc0\xaf\"\n", "p.yaml:2:10: invalid UTF-8 (byte 0xc0)");
    parse_fails("model:\n  name: \"\xed\xa0\x80\"\n", "p.yaml:2:10: invalid UTF-8 (byte 0xed)");
    parse_fails("model:\n  name: \"\xe4\xbd\"\n", "p.yaml:2:10: invalid UTF-8 (byte 0xe4)");
    parse_fails("seed: 1\x7f\n", "p.yaml:1:8: control character (byte 0x7f)");
    assert_int_equal(st_profile_parse(&p, "seed: 1\0\n", 9, "p.yaml", err, sizeof(err)), ST_EPARSE);
    assert_string_equal(err, "p.yaml:1:8: control character (byte 0x00)");
    /* Valid multi-byte text is fine, and its columns count code points. */
    parse_ok(&p, "model:\n  name: \"\xe6\xa8\xa1\xe5\x9e\x8b \xf0\x9f\x98\x80\"\n");
    assert_string_equal(p.model.name, "\xe6\xa8\xa1\xe5\x9e\x8b \xf0\x9f\x98\x80");
    parse_fails("model:\n  name: \"\xe6\xa8\xa1\xff\"\n", "p.yaml:2:11: invalid UTF-8 (byte 0xff)");
    /* Over the size limit. */
    size_t big = ST_PROFILE_MAX_BYTES + 1;
    char *text = malloc(big);
    assert_non_null(text);
    memset(text, '#', big);
    assert_int_equal(st_profile_parse(&p, text, big, "big.yaml", err, sizeof(err)), ST_ETOOBIG);
    assert_string_equal(err, "big.yaml: 1048577 bytes, more than the 1048576 a profile may have");
    free(text);
    /* No NUL needed after the bytes (ASan checks the reads). */
    const char src[] = "engine:\n  tp: 2\n";
    char *exact = malloc(sizeof(src) - 1);
    assert_non_null(exact);
    memcpy(exact, src, sizeof(src) - 1);
    st_profile_defaults(&p);
    assert_int_equal(st_profile_parse(&p, exact, sizeof(src) - 1, "p.yaml", err, sizeof(err)), 0);
    assert_int_equal(p.engine.tp, 2);
    free(exact);
    /* Errors without a buffer, and into a tiny one. */
    assert_int_equal(st_profile_parse(&p, "seed: x\n", 8, "p.yaml", NULL, 0), ST_EPARSE);
    char tiny[8];
    assert_int_equal(st_profile_parse(&p, "seed: x\n", 8, "p.yaml", tiny, sizeof(tiny)), ST_EPARSE);
    assert_string_equal(tiny, "p.yaml:");
}

/* ---- --set ---- */

static void test_set(void **state)
{
    (void)state;
    struct st_profile p;
    st_profile_defaults(&p);
    assert_int_equal(set(&p, "engine.tp=4"), 0);
    assert_int_equal(p.engine.tp, 4);
    assert_int_equal(set(&p, " engine.pp = 2 "), 0);
    assert_int_equal(p.engine.pp, 2);
    assert_int_equal(set(&p, "hardware.gpu_mem_bytes=96GiB"), 0);
    assert_true(p.hw.gpu_mem_bytes == 96.0 * 1024 * 1024 * 1024);
    assert_int_equal(set(&p, "engine.graph_sizes=[1, 2, 4]"), 0);
    assert_int_equal(p.engine.n_graph_sizes, 3);
    assert_int_equal(set(&p, "engine.graph_sizes=[]"), 0);
    assert_int_equal(p.engine.n_graph_sizes, 0);
    assert_int_equal(set(&p, "engine.spec_accept=0.8"), 0);
    assert_int_equal(p.engine.n_spec_accept, 1);
    assert_int_equal(set(&p, "engine.kv_dtype=fp8"), 0);
    assert_true(p.engine.kv_dtype_bytes == 1);
    assert_int_equal(set(&p, "engine.kv_dtype_bytes=2"), 0); /* no conflict across --sets */
    assert_true(p.engine.kv_dtype_bytes == 2);
    assert_int_equal(set(&p, "model.name=Qwen3 8B = 8.2e9 params"), 0); /* first = splits */
    assert_string_equal(p.model.name, "Qwen3 8B = 8.2e9 params");
    assert_int_equal(set(&p, "model.name=\"a: b\""), 0);
    assert_string_equal(p.model.name, "a: b");
    assert_int_equal(set(&p, "engine.spec_method=mtp"), 0);
    assert_int_equal(p.engine.spec_method, ST_SPEC_MTP);
    assert_int_equal(set(&p, "engine.prefix_caching=false"), 0);
    assert_int_equal(p.engine.prefix_caching, 0);
    assert_int_equal(set(&p, "seed=42  # a comment"), 0);
    assert_int_equal(p.seed, 42);
    assert_int_equal(set(&p, "engine.context_length=1048576"), 0);
    assert_int_equal(p.engine.context_length, 1048576);
    /* Errors. */
    set_fails("engine.tp=0", "--set: engine.tp: expected an integer from 1 to 64, got '0'");
    set_fails("engine.tp=x", "--set: engine.tp: expected an integer from 1 to 64, got 'x'");
    set_fails("engine.tp=", "--set: engine.tp: expected an integer from 1 to 64, got an empty "
                            "value");
    set_fails("engine.tp=[4]", "--set: engine.tp: expected an integer from 1 to 64, got a list");
    set_fails("model.name=a: b", "--set: model.name: expected a string of 1 to 63 bytes without "
                                 "control characters, got a mapping");
    set_fails("engine.tpp=4", "--set: engine.tpp: unknown key (did you mean engine.tp?)");
    set_fails("engine=4", "--set: engine: unknown key (docs/simulator.md lists every key)");
    set_fails("engine.tp", "--set: expected section.key=value, got 'engine.tp'");
    set_fails("=4", "--set: expected section.key=value, got '=4'");
    set_fails("", "--set: expected section.key=value, got ''");
    set_fails("engine.graph_sizes=[4, 2]", "--set: engine.graph_sizes[1]: expected an integer "
                                           "greater than 4 (sizes increase), got '2'");
    set_fails("hardware.hbm_bytes_per_s=3TB",
              "--set: hardware.hbm_bytes_per_s: expected bytes/s in (0, 1e+15], as a number or "
              "with a unit (B/s KB/s MB/s GB/s TB/s KiB/s MiB/s GiB/s TiB/s), got '3TB'");
    set_fails("model.name=\"\xff\"", "--set: model.name: invalid UTF-8 (byte 0xff)");
    set_fails("engine.tp=1\n---\n2", "--set: engine.tp: expected one YAML document, got a second "
                                     "one");
    struct st_profile q, before;
    st_profile_defaults(&q);
    memcpy(&before, &q, sizeof(q));
    assert_int_equal(set(&q, "engine.graph_sizes=[1, 2"), ST_EPARSE);
    assert_memory_equal(err, "--set: engine.graph_sizes: ", 27);
    assert_true(strlen(err) > 30);
    assert_memory_equal(&q, &before, sizeof(q));
    assert_int_equal(st_profile_set(&q, "engine.tp=0", NULL, 0), ST_EPARSE);
}

/* ---- lines for messages ---- */

static void test_field_lines(void **state)
{
    (void)state;
    struct st_profile p;
    st_profile_defaults(&p);
    assert_int_equal(st_profile_parse(&p, "# x\nengine:\n  tp: 2\n\n  pp: 2\nseed: 3\n", 36,
                                      "a.yaml", err, sizeof(err)),
                     0);
    assert_string_equal(p.origin, "a.yaml");
    assert_int_equal(p.field_line[field("engine.tp")], 3);
    assert_int_equal(p.field_line[field("engine.pp")], 5);
    assert_int_equal(p.field_line[field("seed")], 6);
    assert_int_equal(p.field_line[field("model.layers")], 0);
    /* The same name again: lines accumulate. */
    assert_int_equal(st_profile_parse(&p, "model:\n  layers: 40\n", 20, "a.yaml", err, sizeof(err)),
                     0);
    assert_int_equal(p.field_line[field("engine.tp")], 3);
    assert_int_equal(p.field_line[field("model.layers")], 2);
    /* --set: line 0. */
    assert_int_equal(set(&p, "engine.tp=4"), 0);
    assert_int_equal(p.field_line[field("engine.tp")], 0);
    assert_int_equal(p.field_line[field("engine.pp")], 5);
    /* Another file: the old lines go. */
    assert_int_equal(
        st_profile_parse(&p, "\nengine:\n  dp_attention: 2\n", 27, "b.yaml", err, sizeof(err)), 0);
    assert_string_equal(p.origin, "b.yaml");
    assert_int_equal(p.field_line[field("engine.pp")], 0);
    assert_int_equal(p.field_line[field("engine.dp_attention")], 3);
    /* A failed parse changes no line. */
    struct st_profile before;
    memcpy(&before, &p, sizeof(p));
    assert_int_equal(st_profile_parse(&p, "seed: x\n", 8, "c.yaml", err, sizeof(err)), ST_EPARSE);
    assert_memory_equal(&p, &before, sizeof(p));
    /* An alias and its field share a line slot's meaning: setting one clears the other. */
    assert_int_equal(
        st_profile_parse(&p, "engine:\n  kv_dtype: fp8\n", 24, "b.yaml", err, sizeof(err)), 0);
    assert_int_equal(p.field_line[field("engine.kv_dtype")], 2);
    assert_int_equal(
        st_profile_parse(&p, "\nengine:\n  kv_dtype_bytes: 2\n", 29, "b.yaml", err, sizeof(err)),
        0);
    assert_int_equal(p.field_line[field("engine.kv_dtype")], 0);
    assert_int_equal(p.field_line[field("engine.kv_dtype_bytes")], 3);
    /* Validation names the file and line of the field it blames. */
    st_profile_defaults(&p);
    assert_int_equal(st_profile_parse(&p, "hardware:\n  gpus: 2\nengine:\n  tp: 4\n", 35,
                                      "profiles/x.yaml", err, sizeof(err)),
                     0);
    assert_int_equal(validate(&p), ST_EPARSE);
    assert_string_equal(err, "profiles/x.yaml:4: engine.tp: tp 4 x pp 1 needs 4 GPUs, "
                             "hardware.gpus is 2");
    assert_int_equal(set(&p, "engine.tp=8"), 0);
    assert_int_equal(validate(&p), ST_EPARSE);
    assert_string_equal(err, "engine.tp: tp 8 x pp 1 needs 8 GPUs, hardware.gpus is 2");
    /* A long name is cut to fit origin. */
    char name[300];
    memset(name, 'n', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    assert_int_equal(st_profile_parse(&p, "seed: 2\n", 8, name, err, sizeof(err)), 0);
    assert_int_equal(strlen(p.origin), sizeof(p.origin) - 1);
}

/* ---- cross-field checks ---- */

static void test_validate_model(void **state)
{
    (void)state;
    invalid("model:\n  attention: mha\n",
            "model.kv_heads: 8 with attention mha, which needs kv_heads == heads (32); use gqa");
    invalid("model:\n  attention: mha\n  kv_heads: 16\n",
            "p.yaml:3: model.kv_heads: 16 with attention mha, which needs kv_heads == heads "
            "(32); use gqa");
    valid("model:\n  attention: mha\n  kv_heads: 32\n");
    invalid("model:\n  kv_heads: 32\n", "p.yaml:2: model.kv_heads: 32 with attention gqa, which "
                                        "needs kv_heads < heads (32); use mha");
    invalid("model:\n  kv_heads: 5\n", "p.yaml:2: model.kv_heads: 5 does not divide model.heads "
                                       "(32)");
    valid("model:\n  kv_heads: 1\n"); /* MQA */
    invalid("model:\n  attention: mla\n",
            "model.kv_lora_rank: attention mla needs kv_lora_rank > 0");
    valid("model:\n  attention: mla\n  kv_lora_rank: 512\n  qk_rope_dim: 64\n  heads: 128\n"
          "  kv_heads: 128\n");
    invalid("model:\n  kv_lora_rank: 512\n",
            "p.yaml:2: model.kv_lora_rank: 512 is only used with attention mla");
    invalid("model:\n  qk_rope_dim: 64\n",
            "p.yaml:2: model.qk_rope_dim: 64 is only used with attention mla");
    invalid("model:\n  indexer_head_dim: 128\n",
            "model.indexer_topk: 0 with indexer_head_dim 128; a sparse-attention indexer needs "
            "both, or neither");
    valid("model:\n  indexer_head_dim: 128\n  indexer_topk: 2048\n");
    invalid("model:\n  kv_layers: 33\n", "p.yaml:2: model.kv_layers: 33 is more than "
                                         "model.layers (32)");
    valid("model:\n  kv_layers: 8\n");
    invalid("model:\n  params_active: 9e9\n",
            "p.yaml:2: model.params_active: 9e+09 is more than model.params_total (8.03e+09)");
    invalid("model:\n  params_total: 30e9\n  params_active: 3e9\n  params_dense: 4e9\n",
            "p.yaml:4: model.params_dense: 4e+09 is more than model.params_active (3e+09); every "
            "token touches the dense part");
    valid("model:\n  params_total: 30e9\n  params_active: 3e9\n  params_dense: 1e9\n");
}

static void test_validate_parallel(void **state)
{
    (void)state;
    invalid("hardware:\n  gpus: 8\nengine:\n  tp: 4\n  dp_attention: 3\n",
            "p.yaml:5: engine.dp_attention: 3 does not divide engine.tp (4)");
    invalid("hardware:\n  gpus: 8\nengine:\n  tp: 3\n",
            "p.yaml:4: engine.tp: model.heads (32) is not divisible by the attention TP size 3 "
            "(engine.tp / engine.dp_attention)");
    invalid("hardware:\n  gpus: 8\nengine:\n  tp: 6\n  dp_attention: 2\n",
            "p.yaml:4: engine.tp: model.heads (32) is not divisible by the attention TP size 3 "
            "(engine.tp / engine.dp_attention)");
    /* KV heads split (8 over 4), replicated (8 over 16), or neither (12 and 8). */
    valid("hardware:\n  gpus: 4\nengine:\n  tp: 4\n");
    valid("hardware:\n  gpus: 16\nengine:\n  tp: 16\n");
    invalid("model:\n  heads: 48\n  kv_heads: 12\nhardware:\n  gpus: 8\nengine:\n  tp: 8\n",
            "p.yaml:7: engine.tp: model.kv_heads (12) and the attention TP size 8 must divide one "
            "another (KV heads are split, or replicated when TP > kv_heads)");
    /* MLA replicates its latent KV: any kv_heads. */
    valid("model:\n  attention: mla\n  kv_lora_rank: 512\n  heads: 64\n  kv_heads: 3\n"
          "hardware:\n  gpus: 8\nengine:\n  tp: 8\n");
    /* DP attention: the attention group is tp / dp_attention. */
    valid("hardware:\n  gpus: 8\nengine:\n  tp: 8\n  dp_attention: 8\n");
    invalid("model:\n  layers: 2\nhardware:\n  gpus: 4\nengine:\n  pp: 4\n",
            "p.yaml:6: engine.pp: 4 pipeline stages for model.layers 2");
    invalid("hardware:\n  gpus: 8\nengine:\n  tp: 4\n  pp: 4\n",
            "p.yaml:4: engine.tp: tp 4 x pp 4 needs 16 GPUs, hardware.gpus is 8");
    valid("hardware:\n  gpus: 8\nengine:\n  tp: 4\n  pp: 2\n");
    valid("hardware:\n  gpus: 8\nengine:\n  tp: 2\n"); /* fewer GPUs than the box has */
}

static void test_validate_engine(void **state)
{
    (void)state;
    invalid("engine:\n  page_size: 12\n", "p.yaml:2: engine.page_size: 12 is not a power of two");
    valid("engine:\n  page_size: 1\n");
    valid("engine:\n  page_size: 64\n");
    invalid("engine:\n  max_batched_tokens: 128\n",
            "p.yaml:2: engine.max_batched_tokens: 128 is less than engine.max_running (256); "
            "vLLM refuses to start");
    valid("engine:\n  max_batched_tokens: 128\n  dialect: sglang\n");
    invalid("engine:\n  spec_steps: 2\n",
            "p.yaml:2: engine.spec_steps: 2 draft tokens with engine.spec_method none");
    invalid("engine:\n  spec_method: mtp\nmodel:\n  mtp_layers: 1\n",
            "engine.spec_steps: 0 with engine.spec_method mtp; give 1 to 8 draft tokens");
    invalid("engine:\n  spec_method: mtp\n  spec_steps: 2\n  spec_accept: [0.8, 0.6]\n",
            "p.yaml:2: engine.spec_method: mtp needs model.mtp_layers > 0 (MTP layers in the "
            "checkpoint)");
    invalid("model:\n  mtp_layers: 2\nengine:\n  spec_method: mtp\n  spec_steps: 3\n"
            "  spec_accept: [0.8, 0.6, 0.4]\n",
            "p.yaml:5: engine.spec_steps: 3 is more than model.mtp_layers (2) and not a multiple "
            "of it (vLLM reuses MTP layers in whole rounds)");
    valid("model:\n  mtp_layers: 2\nengine:\n  spec_method: mtp\n  spec_steps: 4\n"
          "  spec_accept: [0.8, 0.6, 0.4, 0.3]\n");
    valid("model:\n  mtp_layers: 1\nengine:\n  spec_method: mtp\n  spec_steps: 3\n"
          "  spec_accept: [0.8, 0.6, 0.4]\n");
    valid("model:\n  mtp_layers: 3\nengine:\n  spec_method: mtp\n  spec_steps: 2\n"
          "  spec_accept: [0.8, 0.6]\n");
    invalid("engine:\n  spec_method: eagle\n  spec_steps: 3\n  spec_accept: [0.8, 0.6, 0.4]\n",
            "p.yaml:2: engine.spec_method: eagle needs model.draft_params > 0 and "
            "model.draft_layers > 0");
    invalid("model:\n  draft_params: 1e9\nengine:\n  spec_method: draft\n  spec_steps: 3\n"
            "  spec_accept: [0.8, 0.6, 0.4]\n",
            "p.yaml:4: engine.spec_method: draft needs model.draft_params > 0 and "
            "model.draft_layers > 0");
    valid("model:\n  draft_params: 1e9\n  draft_layers: 1\nengine:\n  spec_method: eagle\n"
          "  spec_steps: 3\n  spec_accept: [0.8, 0.6, 0.4]\n");
    invalid("model:\n  mtp_layers: 1\nengine:\n  spec_method: mtp\n  spec_steps: 3\n"
            "  spec_accept: [0.8, 0.6]\n",
            "p.yaml:6: engine.spec_accept: 2 acceptance rates for engine.spec_steps 3; give one "
            "per draft position");
    valid("model:\n  mtp_layers: 1\nengine:\n  spec_method: mtp\n  spec_steps: 1\n"
          "  spec_accept: [0.8, 0.6]\n");
}

static void test_validate_ranges(void **state)
{
    (void)state;
    /* A profile filled in by code gets the same range checks as a parsed one. */
    struct st_profile p;
    st_profile_defaults(&p);
    p.engine.tp = 0;
    assert_int_equal(validate(&p), ST_EPARSE);
    assert_string_equal(err, "engine.tp: 0 is out of range: expected an integer from 1 to 64");
    st_profile_defaults(&p);
    p.engine.dp_attention = 0;
    assert_int_equal(validate(&p), ST_EPARSE);
    assert_string_equal(err, "engine.dp_attention: 0 is out of range: expected an integer from 1 "
                             "to 64");
    st_profile_defaults(&p);
    p.engine.mem_fraction = NAN;
    assert_int_equal(validate(&p), ST_EPARSE);
    assert_string_equal(err, "engine.mem_fraction: nan is out of range: expected a number in (0, "
                             "1]");
    st_profile_defaults(&p);
    p.engine.context_length = 0;
    assert_int_equal(validate(&p), ST_EPARSE);
    assert_string_equal(err, "engine.context_length: 0 is out of range: expected an integer from "
                             "1 to 1073741824");
    st_profile_defaults(&p);
    p.hw.gpu_mem_bytes = -1;
    assert_int_equal(validate(&p), ST_EPARSE);
    assert_string_equal(err, "hardware.gpu_mem_bytes: -1 is out of range: expected bytes in (0, "
                             "1e+14], as a number or with a unit (B KB MB GB TB KiB MiB GiB TiB)");
    st_profile_defaults(&p);
    p.model.attention = (enum st_attn)9;
    assert_int_equal(validate(&p), ST_EPARSE);
    assert_string_equal(err, "model.attention: 9 is not valid: expected one of mha, gqa, mla");
    st_profile_defaults(&p);
    p.engine.prefix_caching = 2;
    assert_int_equal(validate(&p), ST_EPARSE);
    assert_string_equal(err, "engine.prefix_caching: 2 is not valid: expected true or false");
    st_profile_defaults(&p);
    memset(p.model.name, 'x', sizeof(p.model.name));
    assert_int_equal(validate(&p), ST_EPARSE);
    assert_string_equal(err, "model.name: expected a string of 1 to 63 bytes without control "
                             "characters");
    st_profile_defaults(&p);
    p.model.name[0] = '\0';
    assert_int_equal(validate(&p), ST_EPARSE);
    st_profile_defaults(&p);
    p.engine.n_graph_sizes = ST_GRAPH_MAX_SIZES + 1;
    assert_int_equal(validate(&p), ST_EPARSE);
    assert_string_equal(err, "engine.graph_sizes: 65 values, more than 64");
    st_profile_defaults(&p);
    p.engine.graph_sizes[3] = 2;
    assert_int_equal(validate(&p), ST_EPARSE);
    assert_string_equal(err, "engine.graph_sizes: value 3 (2) is out of range or order: expected "
                             "an integer from 1 to 65536");
    st_profile_defaults(&p);
    p.engine.n_spec_accept = 1;
    p.engine.spec_accept[0] = 1.5;
    assert_int_equal(validate(&p), ST_EPARSE);
    assert_string_equal(err, "engine.spec_accept: value 0 (1.5) is out of range or order: "
                             "expected a number in [0, 1]");
    /* No error buffer. */
    assert_int_equal(st_profile_validate(&p, NULL, 0), ST_EPARSE);
}

/* ---- writing and reading back ---- */

/* A full profile in the shape of the seeds' large MoE runs: MLA with a sparse-attention indexer,
 * MTP, NVFP4 weights, 8 GPUs. Every section, every type, units and plain numbers. */
static const char full_example[] =
    "# A large MoE model on 8 workstation GPUs (illustration, not a calibrated profile)\n"
    "model:\n"
    "  name: glm-5.3-nvfp4\n"
    "  layers: 78\n"
    "  hidden: 6144\n"
    "  heads: 64\n"
    "  kv_heads: 64\n"
    "  head_dim: 192\n"
    "  attention: mla\n"
    "  kv_lora_rank: 512\n"
    "  qk_rope_dim: 64\n"
    "  indexer_head_dim: 128\n"
    "  indexer_topk: 2048\n"
    "  params_total: 753e9\n"
    "  params_active: 40e9\n"
    "  params_dense: 17e9\n"
    "  weight_bytes: 0.5625\n"
    "  dense_weight_bytes: 2\n"
    "  kv_layers: 78\n"
    "  mtp_layers: 1\n"
    "  draft_params: 11e9\n"
    "  draft_layers: 1\n"
    "  vision_params: 0\n"
    "  vision_patch: 28\n"
    "  vocab: 154880\n"
    "hardware:\n"
    "  gpus: 8\n"
    "  gpu_mem_bytes: 96GiB\n"
    "  hbm_bytes_per_s: 1.792TB/s\n"
    "  flops_bf16: 503.8TFLOPS\n"
    "  flops_fp8: 1.0076PFLOPS\n"
    "  flops_fp4: 2.0152PFLOPS\n"
    "  link_bytes_per_s: 64GB/s\n"
    "  link_latency_s: 25us\n"
    "  eff_matmul: 0.55\n"
    "  eff_attn: 0.4\n"
    "  eff_mem: 0.75\n"
    "  eff_link: 0.6\n"
    "engine:\n"
    "  dialect: sglang\n"
    "  tp: 4\n"
    "  pp: 2\n"
    "  dp_attention: 1\n"
    "  mem_fraction: 0.90\n"
    "  kv_dtype: fp8\n"
    "  page_size: 64\n"
    "  max_batched_tokens: 16384\n"
    "  max_running: 48\n"
    "  admit_output_reserve: 1\n"
    "  context_length: 1048576\n"
    "  prefix_caching: true\n"
    "  cache_scope: slot\n"
    "  slot_similarity: 0.25\n"
    "  cached_report: evaluated\n"
    "  keepalive_close: true\n"
    "  spec_method: mtp\n"
    "  spec_steps: 3\n"
    "  spec_accept: [0.85, 0.7, 0.55]\n"
    "  spec_accept_halflife_tokens: 131072\n"
    "  graph_sizes: [1, 2, 4, 8, 16, 24, 32, 48]\n"
    "  graph_bytes_per_size: 24MiB\n"
    "  act_bytes_per_token: 96KiB\n"
    "  reserve_bytes: 2.5GiB\n"
    "  step_overhead_s: 1.5ms\n"
    "  startup_s: 600s\n"
    "quality:\n"
    "  error_rate: 0.02\n"
    "perf:\n"
    "  noise_cv: 0.05\n"
    "  bringup_cv: 0.03\n"
    "  noise_seed: 77\n"
    "seed: 20260909\n";

static void test_round_trip(void **state)
{
    (void)state;
    struct st_profile a, b;
    parse_ok(&a, full_example);
    assert_int_equal(validate(&a), 0);
    /* Every key of the table (but the alias) was given, so the defaults play no part. */
    uint32_t n;
    const struct st_profile_field *f = st_profile_fields(&n);
    for (uint32_t i = 0; i < n; i++) {
        if (strcmp(f[i].path, "engine.kv_dtype_bytes") != 0) {
            assert_true(a.field_line[i] > 0);
        }
    }
    assert_string_equal(a.model.name, "glm-5.3-nvfp4");
    assert_true(a.hw.hbm_bytes_per_s == 1.792e12);
    assert_true(a.engine.reserve_bytes == 2.5 * 1024 * 1024 * 1024);
    assert_int_equal(a.seed, 20260909);
    /* Emit, then parse over a profile of other values: the same values come back. */
    struct st_buf out;
    st_buf_init(&out);
    st_profile_emit(&a, &out);
    st_profile_defaults(&b);
    if (st_profile_parse(&b, out.data, out.len, "emitted.yaml", err, sizeof(err)) != 0) {
        fail_msg("%s\n%s", err, out.data);
    }
    assert_same_values(&a, &b);
    /* The defaults too, read over the full example. */
    st_buf_clear(&out);
    struct st_profile d;
    st_profile_defaults(&d);
    st_profile_emit(&d, &out);
    parse_ok(&b, full_example);
    assert_int_equal(st_profile_parse(&b, out.data, out.len, "emitted.yaml", err, sizeof(err)), 0);
    assert_same_values(&d, &b);
    /* Each field alone: its formatted value through --set gives the same value. */
    for (uint32_t i = 0; i < n; i++) {
        st_buf_clear(&out);
        st_buf_printf(&out, "%s=", f[i].path);
        st_profile_format(&a, i, &out);
        st_profile_defaults(&b);
        b.engine.kv_dtype_bytes = a.engine.kv_dtype_bytes; /* the alias formats as a name */
        if (set(&b, out.data) != 0) {
            fail_msg("%s: %s", out.data, err);
        }
        struct st_profile want;
        memcpy(&want, &b, sizeof(want));
        memcpy((char *)&want + f[i].offset, (const char *)&a + f[i].offset, f[i].size);
        if (f[i].count_offset) {
            memcpy((char *)&want + f[i].count_offset, (const char *)&a + f[i].count_offset,
                   sizeof(uint32_t));
        }
        assert_same_values(&want, &b);
    }
    st_buf_release(&out);
}

static void test_emit_text(void **state)
{
    (void)state;
    struct st_profile p;
    st_profile_defaults(&p);
    snprintf(p.model.name, sizeof(p.model.name), "q\"\\x");
    struct st_buf out;
    st_buf_init(&out);
    st_profile_emit(&p, &out);
    const char *s = st_buf_str(&out);
    assert_memory_equal(s, "# servetune simulator profile", 29);
    assert_non_null(strstr(s, "\nmodel:\n  name: \"q\\\"\\\\x\"\n  layers: 32\n"));
    assert_non_null(strstr(s, "\nhardware:\n  gpus: 1\n  gpu_mem_bytes: 8e+10  # B\n"
                              "  hbm_bytes_per_s: 3.35e+12  # B/s\n"));
    assert_non_null(strstr(s, "\n  mem_fraction: 0.9\n  kv_dtype_bytes: 2  # bytes\n"));
    assert_non_null(strstr(s, "\n  spec_accept: []\n"));
    assert_non_null(strstr(s, "\n  graph_sizes: [1, 2, 4, 8, 16, 32, 64, 128, 256]\n"));
    assert_non_null(strstr(s, "\n  startup_s: 30  # s\nquality:\n  error_rate: 0\nperf:\n"
                              "  noise_cv: 0\n  bringup_cv: 0\n  noise_seed: 0\nseed: 1\n"));
    assert_null(strstr(s, "kv_dtype:")); /* the alias is not written */
    /* Single values. */
    st_buf_clear(&out);
    st_profile_format(&p, (uint32_t)field("engine.kv_dtype"), &out);
    assert_string_equal(out.data, "bf16");
    st_buf_clear(&out);
    st_profile_format(&p, (uint32_t)field("hardware.link_latency_s"), &out);
    assert_string_equal(out.data, "1e-05");
    st_buf_clear(&out);
    st_profile_format(&p, (uint32_t)field("engine.prefix_caching"), &out);
    assert_string_equal(out.data, "true");
    st_buf_clear(&out);
    st_profile_format(&p, ST_PROFILE_MAX_FIELDS, &out); /* out of the table: nothing */
    assert_int_equal(out.len, 0);
    st_buf_release(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_every_type),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_units),
        cmocka_unit_test(test_errors_range),
        cmocka_unit_test(test_errors_type),
        cmocka_unit_test(test_errors_structure),
        cmocka_unit_test(test_errors_yaml),
        cmocka_unit_test(test_set),
        cmocka_unit_test(test_field_lines),
        cmocka_unit_test(test_validate_model),
        cmocka_unit_test(test_validate_parallel),
        cmocka_unit_test(test_validate_engine),
        cmocka_unit_test(test_validate_ranges),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_emit_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
