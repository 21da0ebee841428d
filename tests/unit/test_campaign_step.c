/*
 * Tests for the pure parts of src/campaign/step.c: the child's argv per step kind, the prompt
 * seed (the same for every arm, step id and repeat; different per category, length, kind and
 * campaign seed), suite names, receipts parsing on hand-made lines, and the metrics of fixture
 * JSON files that real bench, sweep, probe and qualify runs against `servetune sim` wrote
 * (tests/data/campaign/). Expected figures were computed from the fixtures' receipts by hand
 * (a separate Python recomputation); each is written out below with where it comes from.
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
#include "campaign/step.h"

#include "../support/fixture.h"

static void assert_near(double got, double want, double rel)
{
    if (fabs(got - want) > rel * fmax(1.0, fabs(want))) {
        fail_msg("got %.17g, want %.17g", got, want);
    }
}

static void assert_has(const char *s, const char *needle)
{
    if (!strstr(s, needle)) {
        fail_msg("\"%s\" does not contain \"%s\"", s, needle);
    }
}

static const char *data_dir(void)
{
    const char *d = getenv("ST_TEST_DATA");
    return d ? d : "tests/data";
}

/* Reads tests/data/campaign/name into b (replacing what it held). */
static void load(const char *name, struct st_buf *b)
{
    st_buf_clear(b);
    st_test_fixture(name, b);
}

static void parse_rcpts(const char *name, struct st_step_rcpts *c)
{
    struct st_buf b;
    st_buf_init(&b);
    load(name, &b);
    assert_int_equal(st_step_rcpts_parse(c, st_buf_str(&b), b.len), 0);
    st_buf_release(&b);
}

static double metric(const struct st_step_result *r, const char *name)
{
    const struct st_step_value *v = st_step_result_find(r, name);
    if (!v) {
        fail_msg("no metric %s", name);
    }
    return v->v;
}

static void step_init(struct st_plan_step *s, const char *id, enum st_plan_step_kind kind)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->id, sizeof(s->id), "%s", id);
    s->kind = kind;
    s->repeats = 1;
    s->requests_per_cc = 2;
    s->flush_warm = 1;
    s->seed_output_tokens = 8;
}

static struct st_step_env env_of(const char *dir)
{
    struct st_step_env e;
    memset(&e, 0, sizeof(e));
    e.self_exe = "/opt/st/servetune";
    e.url = "http://127.0.0.1:9";
    e.plan_dir = "/nonexistent-plan-dir";
    e.dir = dir;
    e.seed = 42;
    return e;
}

/* The argv joined with single spaces (arguments have none here). */
static void joined(const struct st_step_argv *a, char *out, size_t cap)
{
    size_t off = 0;
    out[0] = '\0';
    for (size_t i = 0; i < a->argc; i++) {
        int w = snprintf(out + off, cap - off, "%s%s", i ? " " : "", a->argv[i]);
        assert_true(w > 0 && (size_t)w < cap - off);
        off += (size_t)w;
    }
    assert_null(a->argv[a->argc]);
}

/* ---- argv ---- */

static void test_argv_bench(void **state)
{
    (void)state;
    struct st_plan_step s;
    step_init(&s, "decode2048", ST_PLAN_STEP_BENCH);
    s.output_tokens = 2048;
    snprintf(s.categories[0], sizeof(s.categories[0]), "code");
    snprintf(s.categories[1], sizeof(s.categories[1]), "chinese");
    s.n_categories = 2;
    s.concurrency[0] = 1;
    s.n_concurrency = 1;
    struct st_step_env e = env_of("/runs/u1");
    e.api_key_file = "/keys/k";
    assert_int_equal(st_step_children(&s), 2);
    assert_string_equal(st_step_point(&s, 1), "chinese");
    struct st_step_argv a;
    char err[256], line[2048], want[2048];
    assert_int_equal(st_step_argv_build(&s, &e, 0, &a, err, sizeof(err)), 0);
    joined(&a, line, sizeof(line));
    /* input_tokens 0 becomes the bench's default 128; the seed covers (42, bench, 128, 2048,
     * "code"). */
    snprintf(want, sizeof(want),
             "/opt/st/servetune bench --url http://127.0.0.1:9 --workload fixed --input-len 128 "
             "--output-len 2048 --ignore-eos --concurrency 1 --requests 1 --seed %llu --json "
             "/runs/u1/code.json --receipts /runs/u1/code.receipts.jsonl --api-key-file /keys/k "
             "--quiet --no-progress",
             (unsigned long long)st_step_prompt_seed(42, ST_PLAN_STEP_BENCH, 128, 2048, "code"));
    assert_string_equal(line, want);
    st_step_argv_release(&a);
    assert_int_equal(st_step_argv_build(&s, &e, 1, &a, err, sizeof(err)), 0);
    joined(&a, line, sizeof(line));
    assert_has(line, "--json /runs/u1/chinese.json");
    st_step_argv_release(&a);
    /* No child 2. */
    assert_int_equal(st_step_argv_build(&s, &e, 2, &a, err, sizeof(err)), ST_EUSAGE);

    /* Without categories: one point named "bench", concurrency 4 sends 4 requests. */
    s.n_categories = 0;
    s.input_tokens = 126000;
    s.output_tokens = 64;
    s.concurrency[0] = 4;
    e.api_key_file = NULL;
    assert_int_equal(st_step_children(&s), 1);
    assert_null(st_step_point(&s, 0));
    assert_int_equal(st_step_argv_build(&s, &e, 0, &a, err, sizeof(err)), 0);
    joined(&a, line, sizeof(line));
    assert_has(line, "--input-len 126000 --output-len 64 --ignore-eos --concurrency 4 "
                     "--requests 4 ");
    assert_has(line, "--json /runs/u1/bench.json --receipts /runs/u1/bench.receipts.jsonl --quiet");
    assert_null(strstr(line, "--api-key-file"));
    st_step_argv_release(&a);
}

static void test_argv_sweep_probe_soak(void **state)
{
    (void)state;
    struct st_step_env e = env_of("d");
    struct st_step_argv a;
    char err[256], line[2048], want[2048];

    struct st_plan_step s;
    step_init(&s, "hit90", ST_PLAN_STEP_SWEEP);
    s.input_tokens = 4096;
    s.output_tokens = 64;
    s.shared_frac = 0.9;
    s.requests_per_cc = 3;
    uint32_t cc[] = {1, 2, 4, 8};
    memcpy(s.concurrency, cc, sizeof(cc));
    s.n_concurrency = 4;
    assert_int_equal(st_step_argv_build(&s, &e, 0, &a, err, sizeof(err)), 0);
    joined(&a, line, sizeof(line));
    snprintf(want, sizeof(want),
             "/opt/st/servetune sweep --url http://127.0.0.1:9 --workload shared-prefix "
             "--prefix-frac 0.90000000000000002 --input-len 4096 --output-len 64 --ignore-eos "
             "--concurrency 1,2,4,8 --requests-per-cc 3 --repeats 1 --seed %llu --out d/sweep "
             "--quiet --no-progress",
             (unsigned long long)st_step_prompt_seed(42, ST_PLAN_STEP_SWEEP, 4096, 64, NULL));
    assert_string_equal(line, want);
    st_step_argv_release(&a);
    s.flush_warm = 0;
    assert_int_equal(st_step_argv_build(&s, &e, 0, &a, err, sizeof(err)), 0);
    joined(&a, line, sizeof(line));
    assert_has(line, "--out d/sweep --no-flush --no-warm --quiet");
    st_step_argv_release(&a);
    s.n_concurrency = 0;
    assert_int_equal(st_step_argv_build(&s, &e, 0, &a, err, sizeof(err)), ST_EUSAGE);
    assert_has(err, "concurrency");

    step_init(&s, "cap", ST_PLAN_STEP_PROBE);
    s.input_tokens = 131072;
    s.output_tokens = 512;
    memcpy(s.concurrency, cc, sizeof(cc));
    s.n_concurrency = 3;
    assert_int_equal(st_step_argv_build(&s, &e, 0, &a, err, sizeof(err)), 0);
    joined(&a, line, sizeof(line));
    snprintf(want, sizeof(want),
             "/opt/st/servetune probe capacity --url http://127.0.0.1:9 --doc-len 131072 "
             "--output-len 512 --seed-output-len 8 --concurrency 1,2,4 --keep-going --ignore-eos "
             "--seed %llu --out d/probe --quiet --no-progress",
             (unsigned long long)st_step_prompt_seed(42, ST_PLAN_STEP_PROBE, 131072, 512, NULL));
    assert_string_equal(line, want);
    st_step_argv_release(&a);

    step_init(&s, "mixed", ST_PLAN_STEP_SOAK);
    s.duration_s = 600;
    s.concurrency[0] = 2;
    s.n_concurrency = 1;
    assert_int_equal(st_step_argv_build(&s, &e, 0, &a, err, sizeof(err)), 0);
    joined(&a, line, sizeof(line));
    /* 600 s x 10 requests/s x 2 slots = 12000 requests at most. */
    snprintf(want, sizeof(want),
             "/opt/st/servetune bench --url http://127.0.0.1:9 --workload mixed --mix "
             "fixed=1,shared-prefix=1,distinct=1 --prefix-frac 0.5 --input-len 128 --output-len "
             "128 --ignore-eos --concurrency 2 --requests 12000 --duration 600 --seed %llu --json "
             "d/soak.json --receipts d/soak.receipts.jsonl --quiet --no-progress",
             (unsigned long long)st_step_prompt_seed(42, ST_PLAN_STEP_SOAK, 128, 128, NULL));
    assert_string_equal(line, want);
    st_step_argv_release(&a);
}

static void test_argv_qualify(void **state)
{
    (void)state;
    struct st_step_env e = env_of("u");
    struct st_step_argv a;
    char err[512], line[2048], want[2048];
    struct st_plan_step s;
    step_init(&s, "quality_xhigh", ST_PLAN_STEP_QUALIFY);
    snprintf(s.suite, sizeof(s.suite), "quality-xhigh");
    e.compare_json = "/b/qualify.json";
    e.context_tokens = 131072;
    assert_int_equal(st_step_argv_build(&s, &e, 0, &a, err, sizeof(err)), 0);
    joined(&a, line, sizeof(line));
    snprintf(
        want, sizeof(want),
        "/opt/st/servetune qualify --url http://127.0.0.1:9 --suite quality "
        "--reasoning-effort xhigh --seed %llu --out u --compare /b/qualify.json --context "
        "131072 --quiet --no-progress",
        (unsigned long long)st_step_prompt_seed(42, ST_PLAN_STEP_QUALIFY, 0, 0, "quality-xhigh"));
    assert_string_equal(line, want);
    st_step_argv_release(&a);
    /* A suite file that does not exist: the resolver's error comes back. */
    snprintf(s.suite, sizeof(s.suite), "nosuch");
    assert_int_equal(st_step_argv_build(&s, &e, 0, &a, err, sizeof(err)), ST_ENOTFOUND);
    assert_has(err, "/nonexistent-plan-dir/suites/nosuch.yaml");
    /* A file resolved against the plan's folder. */
    char plan[1024];
    snprintf(plan, sizeof(plan), "%s/campaign/plan", data_dir());
    e.plan_dir = plan;
    e.compare_json = NULL;
    e.context_tokens = 0;
    snprintf(s.suite, sizeof(s.suite), "mixed");
    assert_int_equal(st_step_argv_build(&s, &e, 0, &a, err, sizeof(err)), 0);
    joined(&a, line, sizeof(line));
    snprintf(want, sizeof(want), "--suite %s/suites/mixed.yaml --seed", plan);
    assert_has(line, want);
    assert_null(strstr(line, "--compare"));
    assert_null(strstr(line, "--context"));
    assert_null(strstr(line, "--reasoning-effort"));
    st_step_argv_release(&a);
}

static void test_argv_line_quoting(void **state)
{
    (void)state;
    char *v[] = {"/a b/servetune", "x", "it's", "", "a;b", NULL};
    struct st_step_argv a = {.argv = v, .argc = 5};
    struct st_buf b;
    st_buf_init(&b);
    st_step_argv_line(&a, &b);
    assert_string_equal(st_buf_str(&b), "'/a b/servetune' x 'it'\\''s' '' 'a;b'");
    st_buf_release(&b);
}

/* ---- the prompt seed ---- */

static void test_seed(void **state)
{
    (void)state;
    uint64_t a = st_step_prompt_seed(1, ST_PLAN_STEP_BENCH, 126000, 64, NULL);
    /* Deterministic, and "" is the same as no category. */
    assert_true(a == st_step_prompt_seed(1, ST_PLAN_STEP_BENCH, 126000, 64, NULL));
    assert_true(a == st_step_prompt_seed(1, ST_PLAN_STEP_BENCH, 126000, 64, ""));
    /* Each input changes it. */
    assert_true(a != st_step_prompt_seed(2, ST_PLAN_STEP_BENCH, 126000, 64, NULL));
    assert_true(a != st_step_prompt_seed(1, ST_PLAN_STEP_SOAK, 126000, 64, NULL));
    assert_true(a != st_step_prompt_seed(1, ST_PLAN_STEP_BENCH, 126001, 64, NULL));
    assert_true(a != st_step_prompt_seed(1, ST_PLAN_STEP_BENCH, 126000, 65, NULL));
    assert_true(st_step_prompt_seed(1, ST_PLAN_STEP_BENCH, 128, 2048, "code") !=
                st_step_prompt_seed(1, ST_PLAN_STEP_BENCH, 128, 2048, "chinese"));
    /* Every command takes it: qualify's --seed stops at INT64_MAX. */
    for (uint64_t k = 0; k < 4096; k++) {
        assert_true(st_step_prompt_seed(k, ST_PLAN_STEP_QUALIFY, 0, 0, "screening") <= INT64_MAX);
    }
    /* Lengths and category do not alias: (12, "3") vs (123, ""). */
    assert_true(st_step_prompt_seed(1, ST_PLAN_STEP_BENCH, 12, 3, "x") !=
                st_step_prompt_seed(1, ST_PLAN_STEP_BENCH, 1, 23, "x"));

    /* Through the argv: long128k and long128k_repeat, on two arms (URL, folder) and two
     * repeats, send the same --seed. */
    struct st_plan_step s1, s2;
    step_init(&s1, "long128k", ST_PLAN_STEP_BENCH);
    step_init(&s2, "long128k_repeat", ST_PLAN_STEP_BENCH);
    s1.input_tokens = s2.input_tokens = 126000;
    s1.output_tokens = s2.output_tokens = 64;
    struct st_step_env e1 = env_of("/r/baseline/long128k/r0");
    struct st_step_env e2 = env_of("/r/mtp3/long128k_repeat/r2");
    e2.url = "http://127.0.0.1:8001";
    e2.repeat = 2;
    struct st_step_argv a1, a2;
    char err[256];
    assert_int_equal(st_step_argv_build(&s1, &e1, 0, &a1, err, sizeof(err)), 0);
    assert_int_equal(st_step_argv_build(&s2, &e2, 0, &a2, err, sizeof(err)), 0);
    const char *seed1 = NULL, *seed2 = NULL;
    for (size_t i = 0; i + 1 < a1.argc; i++) {
        if (strcmp(a1.argv[i], "--seed") == 0) {
            seed1 = a1.argv[i + 1];
        }
    }
    for (size_t i = 0; i + 1 < a2.argc; i++) {
        if (strcmp(a2.argv[i], "--seed") == 0) {
            seed2 = a2.argv[i + 1];
        }
    }
    assert_non_null(seed1);
    assert_non_null(seed2);
    assert_string_equal(seed1, seed2);
    st_step_argv_release(&a1);
    st_step_argv_release(&a2);
}

/* ---- suites ---- */

static void test_suite_resolve(void **state)
{
    (void)state;
    struct st_step_suite su;
    char err[1024];
    char plan[1024], want[1100];
    snprintf(plan, sizeof(plan), "%s/campaign/plan", data_dir());
    assert_int_equal(st_step_suite_resolve("screening", plan, &su, err, sizeof(err)), 0);
    assert_string_equal(su.suite, "screening");
    assert_string_equal(su.effort, "");
    assert_int_equal(st_step_suite_resolve("quality", NULL, &su, err, sizeof(err)), 0);
    assert_string_equal(su.suite, "quality");
    static const char *const efforts[] = {"low", "medium", "high", "xhigh"};
    for (size_t i = 0; i < 4; i++) {
        char name[32];
        snprintf(name, sizeof(name), "quality-%s", efforts[i]);
        assert_int_equal(st_step_suite_resolve(name, plan, &su, err, sizeof(err)), 0);
        assert_string_equal(su.suite, "quality");
        assert_string_equal(su.effort, efforts[i]);
    }
    /* NAME (custom.yaml needs its extension given or added), NAME.yaml, suites/NAME.yaml. */
    assert_int_equal(st_step_suite_resolve("custom.yaml", plan, &su, err, sizeof(err)), 0);
    snprintf(want, sizeof(want), "%s/custom.yaml", plan);
    assert_string_equal(su.suite, want);
    assert_int_equal(st_step_suite_resolve("custom", plan, &su, err, sizeof(err)), 0);
    assert_string_equal(su.suite, want);
    assert_int_equal(st_step_suite_resolve("mixed", plan, &su, err, sizeof(err)), 0);
    snprintf(want, sizeof(want), "%s/suites/mixed.yaml", plan);
    assert_string_equal(su.suite, want);
    /* A folder is not a suite file: "suites" resolves to nothing. */
    assert_int_equal(st_step_suite_resolve("suites", plan, &su, err, sizeof(err)), ST_ENOTFOUND);
    /* An absolute name ignores the plan's folder. */
    char *abs = realpath(want, NULL);
    assert_non_null(abs);
    assert_int_equal(st_step_suite_resolve(abs, "/elsewhere", &su, err, sizeof(err)), 0);
    assert_string_equal(su.suite, abs);
    free(abs);
    /* An unknown effort is a file name; missing, every tried path is named. */
    assert_int_equal(st_step_suite_resolve("quality-extreme", "/p", &su, err, sizeof(err)),
                     ST_ENOTFOUND);
    assert_has(err, "/p/quality-extreme, /p/quality-extreme.yaml or "
                    "/p/suites/quality-extreme.yaml");
}

/* ---- receipts ---- */

static void test_rcpts_handmade(void **state)
{
    (void)state;
    /* Three ok requests: TTFT 0.1, 0.2, 0.4 s; E2E 1, 2, 3 s; decode (11-1)/0.5 = 20,
     * (21-1)/1 = 20... see each line. One warmup (not measured), one failed, one qualify line with
     * status 500, one with 200, a broken line and a blank one. */
    const char *text =
        "{\"id\":0,\"warmup\":false,\"ok\":true,\"t_intended_ns\":0,\"t_first_content_ns\":"
        "100000000,\"t_last_content_ns\":600000000,\"t_end_ns\":1000000000,\"completion_"
        "tokens\":11}\n"
        "{\"id\":1,\"warmup\":false,\"ok\":true,\"t_intended_ns\":1000,\"t_first_content_ns\":"
        "200001000,\"t_last_content_ns\":1200001000,\"t_end_ns\":2000001000,\"completion_"
        "tokens\":41}\n"
        "{\"id\":2,\"warmup\":false,\"ok\":true,\"t_intended_ns\":0,\"t_first_content_ns\":"
        "400000000,\"t_last_content_ns\":400000000,\"t_end_ns\":3000000000,\"completion_"
        "tokens\":1}\n"
        "{\"id\":3,\"warmup\":true,\"ok\":true,\"t_intended_ns\":0,\"t_first_content_ns\":9,"
        "\"t_last_content_ns\":10,\"t_end_ns\":11,\"completion_tokens\":5}\n"
        "{\"id\":4,\"warmup\":false,\"ok\":false,\"error\":\"status\"}\n"
        "\n"
        "{\"check\":\"capital\",\"http_status\":500}\n"
        "{\"check\":\"capital\",\"http_status\":200}\n"
        "{\"truncated\n";
    struct st_step_rcpts c;
    st_step_rcpts_init(&c);
    assert_int_equal(st_step_rcpts_parse(&c, text, strlen(text)), 0);
    assert_int_equal(c.lines, 8);
    assert_int_equal(c.ok, 3);
    assert_int_equal(c.errors, 3); /* the failed request, the 500, the broken line */
    assert_int_equal(c.n, 3);
    assert_near(c.ttft_s[0], 0.1, 1e-12);
    assert_near(c.ttft_s[1], 0.2, 1e-12);
    assert_near(c.ttft_s[2], 0.4, 1e-12);
    assert_near(c.e2e_s[2], 3.0, 1e-12);
    /* Request 2 has one token: no decode rate. 10 / 0.5 s = 20; 40 / 1 s = 40. */
    assert_int_equal(c.n_decode, 2);
    assert_near(c.decode_tps[0], 20.0, 1e-12);
    assert_near(c.decode_tps[1], 40.0, 1e-12);
    st_step_rcpts_release(&c);
}

/* ---- metrics from fixtures ---- */

static void test_extract_bench_fixed(void **state)
{
    (void)state;
    /* bench-fixed: `bench --workload fixed --input-len 64 --output-len 16 --concurrency 3
     * --requests 3` against `sim --ttft-ms 200 --itl-ms 20` (time scale 1). From the receipts:
     * TTFT (first - intended) 0.200668869 s median, E2E 0.500767837 s median, decode
     * (16 - 1) / (last - first) median 49.985530688431624 tok/s (the sim's truth: 0.2 s, 50/s);
     * output_tokens_per_s 95.835906502465662 and ok 3 from the JSON. */
    struct st_plan_step s;
    step_init(&s, "dec", ST_PLAN_STEP_BENCH);
    snprintf(s.categories[0], sizeof(s.categories[0]), "code");
    s.n_categories = 1;
    struct st_buf js;
    st_buf_init(&js);
    load("bench-fixed.json", &js);
    struct st_step_rcpts rc;
    st_step_rcpts_init(&rc);
    parse_rcpts("bench-fixed.receipts.jsonl", &rc);
    assert_int_equal(rc.lines, 3);
    struct st_step_result r;
    st_step_result_init(&r);
    char err[256];
    assert_int_equal(st_step_extract(&s, 0, js.data, js.len, &rc, 1, &r, err, sizeof(err)), 0);
    assert_int_equal(r.n, 5);
    assert_near(metric(&r, "dec.decode_tps@code"), 49.985530688431624, 1e-9);
    assert_near(metric(&r, "dec.output_tps@code"), 95.835906502465662, 1e-12);
    assert_near(metric(&r, "dec.completed@code"), 3, 0);
    assert_near(metric(&r, "dec.ttft_s@code"), 0.200668869, 1e-9);
    assert_near(metric(&r, "dec.e2e_s@code"), 0.500767837, 1e-9);
    assert_int_equal(r.n_ttft, 3);
    assert_int_equal(r.functional_ok, -1);
    assert_int_equal(r.quality_ok, -1);
    st_step_result_release(&r);
    st_step_rcpts_release(&rc);

    /* Without receipts the medians have no sample: left out and named in detail. */
    st_step_result_init(&r);
    assert_int_equal(st_step_extract(&s, 0, js.data, js.len, NULL, 0, &r, err, sizeof(err)), 0);
    assert_int_equal(r.n, 2);
    assert_null(st_step_result_find(&r, "dec.ttft_s@code"));
    assert_has(r.detail, "no sample for dec.decode_tps@code");
    st_step_result_release(&r);

    /* Malformed and wrongly shaped JSON. */
    st_step_result_init(&r);
    assert_int_equal(st_step_extract(&s, 0, "{\"requests\":", 12, NULL, 0, &r, err, sizeof(err)),
                     ST_EPARSE);
    assert_int_equal(st_step_extract(&s, 0, "{}", 2, NULL, 0, &r, err, sizeof(err)), ST_EPARSE);
    assert_has(err, "requests");
    assert_int_equal(st_step_extract(&s, 0, "[1]", 3, NULL, 0, &r, err, sizeof(err)), ST_EPARSE);
    assert_int_equal(r.n, 0);
    st_step_result_release(&r);
    st_buf_release(&js);
}

static void test_extract_bench_virtual(void **state)
{
    (void)state;
    /* bench-model: the seed000 profile at --speed 200: the receipts carry the simulator's
     * virtual times (clock "virtual", v_*_ns), which are the measurement: TTFT median
     * 0.2257636815 s (0.067741894 and 0.383785469: max_running 1 queues the second), E2E
     * 0.474065283 s, decode 124.84816776344142 tok/s; no categories: no @POINT. */
    struct st_plan_step s;
    step_init(&s, "long", ST_PLAN_STEP_BENCH);
    struct st_buf js;
    st_buf_init(&js);
    load("bench-model.json", &js);
    struct st_step_rcpts rc;
    st_step_rcpts_init(&rc);
    parse_rcpts("bench-model.receipts.jsonl", &rc);
    struct st_step_result r;
    st_step_result_init(&r);
    char err[256];
    assert_int_equal(st_step_extract(&s, 0, js.data, js.len, &rc, 1, &r, err, sizeof(err)), 0);
    assert_near(metric(&r, "long.ttft_s"), 0.2257636815, 1e-9);
    assert_near(metric(&r, "long.e2e_s"), 0.474065283, 1e-9);
    assert_near(metric(&r, "long.decode_tps"), 124.84816776344142, 1e-9);
    assert_near(metric(&r, "long.output_tps"), 101.25188607148537, 1e-12);
    assert_near(metric(&r, "long.completed"), 2, 0);
    assert_int_equal(r.n_ttft, 2);
    assert_near(r.ttft_s[0], 0.067741894, 1e-12); /* virtual seconds, in receipt order */
    assert_near(r.ttft_s[1], 0.383785469, 1e-12);
    st_step_result_release(&r);
    st_step_rcpts_release(&rc);
    st_buf_release(&js);
}

static void test_extract_invalid_clock(void **state)
{
    (void)state;
    /* A child whose simulator could not keep its clock: no metrics, INVALID and the reason. */
    struct st_plan_step s;
    step_init(&s, "long", ST_PLAN_STEP_BENCH);
    const char *j = "{\"requests\":{\"ok\":1,\"failed\":0},\"output_tokens_per_s\":12.5,"
                    "\"sim_clock\":{\"requests\":1,\"lag_max_ms\":2500,\"late\":0,"
                    "\"late_max_ms\":0,\"valid\":false,\"invalid_reason\":\"the simulator fell "
                    "2.500 s of real time behind its clock\"}}";
    struct st_step_result r;
    st_step_result_init(&r);
    char err[256];
    assert_int_equal(st_step_extract(&s, 0, j, strlen(j), NULL, 0, &r, err, sizeof(err)), 0);
    assert_int_equal(r.n, 0);
    assert_int_equal(r.invalid, 1);
    assert_has(r.detail, "INVALID: the simulator fell 2.500 s of real time behind its clock");
    st_step_result_release(&r);
    /* Valid: the same JSON gives its metrics. */
    const char *ok = "{\"requests\":{\"ok\":1,\"failed\":0},\"output_tokens_per_s\":12.5,"
                     "\"sim_clock\":{\"valid\":true,\"invalid_reason\":null}}";
    st_step_result_init(&r);
    assert_int_equal(st_step_extract(&s, 0, ok, strlen(ok), NULL, 0, &r, err, sizeof(err)), 0);
    assert_int_equal(r.invalid, 0);
    assert_near(metric(&r, "long.output_tps"), 12.5, 0);
    st_step_result_release(&r);
}

static void test_extract_soak(void **state)
{
    (void)state;
    /* soak: mixed workload, 6 requests, none failed: error_rate 0; TTFT median 0.2691116945 s
     * (virtual). */
    struct st_plan_step s;
    step_init(&s, "mixed", ST_PLAN_STEP_SOAK);
    struct st_buf js;
    st_buf_init(&js);
    load("soak.json", &js);
    struct st_step_rcpts rc;
    st_step_rcpts_init(&rc);
    parse_rcpts("soak.receipts.jsonl", &rc);
    struct st_step_result r;
    st_step_result_init(&r);
    char err[256];
    assert_int_equal(st_step_extract(&s, 0, js.data, js.len, &rc, 1, &r, err, sizeof(err)), 0);
    assert_int_equal(r.n, 4);
    assert_near(metric(&r, "mixed.output_tps"), 82.0370151832877, 1e-12);
    assert_near(metric(&r, "mixed.completed"), 6, 0);
    assert_near(metric(&r, "mixed.ttft_s"), 0.2691116945, 1e-9);
    assert_near(metric(&r, "mixed.error_rate"), 0, 0);
    st_step_result_release(&r);
    st_step_rcpts_release(&rc);
    /* 2 failed of 8: error_rate 0.25. */
    const char *j = "{\"requests\":{\"ok\":6,\"failed\":2},\"output_tokens_per_s\":1}";
    st_step_result_init(&r);
    assert_int_equal(st_step_extract(&s, 0, j, strlen(j), NULL, 0, &r, err, sizeof(err)), 0);
    assert_near(metric(&r, "mixed.error_rate"), 0.25, 0);
    st_step_result_release(&r);
    st_buf_release(&js);
}

static void test_extract_sweep(void **state)
{
    (void)state;
    /* sweep.json: cc1 and cc2 of a shared-prefix 0.5 sweep; figures straight from points[]:
     * output_tokens_per_s.median, hit_rate, ttft_ms.p50 / 1000, tpot_ms.p50 / 1000. cc4 is not in
     * the JSON: no sample. */
    struct st_plan_step s;
    step_init(&s, "hit", ST_PLAN_STEP_SWEEP);
    uint32_t cc[] = {1, 2, 4};
    memcpy(s.concurrency, cc, sizeof(cc));
    s.n_concurrency = 3;
    struct st_buf js;
    st_buf_init(&js);
    load("sweep.json", &js);
    struct st_step_result r;
    st_step_result_init(&r);
    char err[256];
    assert_int_equal(st_step_extract(&s, 0, js.data, js.len, NULL, 0, &r, err, sizeof(err)), 0);
    assert_int_equal(r.n, 8);
    assert_near(metric(&r, "hit.output_tps@cc1"), 73.231605479371794, 1e-12);
    assert_near(metric(&r, "hit.hit_rate@cc1"), 0.4375, 0);
    assert_near(metric(&r, "hit.ttft_s@cc1"), 0.0600948, 1e-12);
    assert_near(metric(&r, "hit.tpot_s@cc1"), 0.0067592, 1e-12);
    assert_near(metric(&r, "hit.output_tps@cc2"), 69.609419372605956, 1e-12);
    assert_near(metric(&r, "hit.ttft_s@cc2"), 0.2400256, 1e-12);
    assert_near(metric(&r, "hit.tpot_s@cc2"), 0.0075008, 1e-12);
    assert_null(st_step_result_find(&r, "hit.output_tps@cc4"));
    assert_has(r.detail, "hit.output_tps@cc4");
    st_step_result_release(&r);
    st_buf_release(&js);
}

static void test_extract_probe(void **state)
{
    (void)state;
    /* probe.json: doc 2000 on the seed000 profile, whose max_running 1 runs one document at a
     * time: cc1 fits, cc2 queues (TTFT max 202.285507 ms > 4 x 34.212694 ms): max_concurrent_docs
     * 1; decode from the scoring receipts' virtual times: cc1 112.05732900763157, cc2
     * 121.39535304634393 tok/s. */
    struct st_plan_step s;
    step_init(&s, "cap", ST_PLAN_STEP_PROBE);
    s.concurrency[0] = 1;
    s.concurrency[1] = 2;
    s.n_concurrency = 2;
    struct st_buf js;
    st_buf_init(&js);
    load("probe.json", &js);
    struct st_step_rcpts rc[2];
    st_step_rcpts_init(&rc[0]);
    st_step_rcpts_init(&rc[1]);
    parse_rcpts("probe-cc1-score.jsonl", &rc[0]);
    parse_rcpts("probe-cc2-score.jsonl", &rc[1]);
    struct st_step_result r;
    st_step_result_init(&r);
    char err[256];
    assert_int_equal(st_step_extract(&s, 0, js.data, js.len, rc, 2, &r, err, sizeof(err)), 0);
    assert_int_equal(r.n, 7);
    assert_near(metric(&r, "cap.max_docs"), 1, 0);
    assert_near(metric(&r, "cap.decode_tps@cc1"), 112.05732900763157, 1e-9);
    assert_near(metric(&r, "cap.decode_tps@cc2"), 121.39535304634393, 1e-9);
    assert_near(metric(&r, "cap.queued@cc1"), 0, 0);
    assert_near(metric(&r, "cap.queued@cc2"), 1, 0);
    assert_near(metric(&r, "cap.ttft_max_s@cc1"), 0.034212694, 1e-12);
    assert_near(metric(&r, "cap.ttft_max_s@cc2"), 0.202285507, 1e-12);
    assert_int_equal(r.n_ttft, 3);
    st_step_result_release(&r);
    st_step_rcpts_release(&rc[0]);
    st_step_rcpts_release(&rc[1]);
    st_buf_release(&js);
}

static void qualify_case(const char *file, double pass, double fail, int functional, int quality,
                         const char *detail)
{
    struct st_plan_step s;
    step_init(&s, "q", ST_PLAN_STEP_QUALIFY);
    struct st_buf js;
    st_buf_init(&js);
    load(file, &js);
    struct st_step_result r;
    st_step_result_init(&r);
    char err[256];
    assert_int_equal(st_step_extract(&s, 0, js.data, js.len, NULL, 0, &r, err, sizeof(err)), 0);
    assert_near(metric(&r, "q.pass_count"), pass, 0);
    assert_near(metric(&r, "q.fail_count"), fail, 0);
    assert_int_equal(r.functional_ok, functional);
    assert_int_equal(r.quality_ok, quality);
    assert_has(r.detail, detail);
    st_step_result_release(&r);
    st_buf_release(&js);
}

static void test_extract_qualify(void **state)
{
    (void)state;
    /* The quality suite on an error-free sim: 7/7, no compare: both gates hold. */
    qualify_case("qualify-quality-base.json", 7, 0, 1, 1, "");
    /* The same against a sim at error rate 1, --compare the base: 7 questions regressed; none
     * is a screening check. */
    qualify_case("qualify-quality-regressed.json", 0, 7, 1, 0, "regressed: capital, prime-regex");
    /* Screening at error rate 1 without a baseline: 9 checks failed (throughput passes). */
    qualify_case("qualify-screening-failed.json", 1, 9, 0, 1, "failed: arithmetic, json");
    /* suites/mixed.yaml (arithmetic + capital), regressed: both gates fail. */
    qualify_case("qualify-mixed-regressed.json", 0, 2, 0, 0, "regressed: arithmetic, capital");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_argv_bench),
        cmocka_unit_test(test_argv_sweep_probe_soak),
        cmocka_unit_test(test_argv_qualify),
        cmocka_unit_test(test_argv_line_quoting),
        cmocka_unit_test(test_seed),
        cmocka_unit_test(test_suite_resolve),
        cmocka_unit_test(test_rcpts_handmade),
        cmocka_unit_test(test_extract_bench_fixed),
        cmocka_unit_test(test_extract_bench_virtual),
        cmocka_unit_test(test_extract_invalid_clock),
        cmocka_unit_test(test_extract_soak),
        cmocka_unit_test(test_extract_sweep),
        cmocka_unit_test(test_extract_probe),
        cmocka_unit_test(test_extract_qualify),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
