/*
 * Tests for the pure parts of the sweep and probe machinery in src/cli: the cache protocol's
 * verdict on a measured point (st_cache_judge: hit rate against its target, the page allowance,
 * the server's counters when requests carry no cached counts, failures, interrupts) against
 * hand-computed cases, the state and verify names, and the slice source (st_cli_slice_source),
 * which offsets item ids, overrides max_tokens and adds members to every receipt tag while the
 * item's prompt, which lives in the same scratch buffer, stays intact.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "cli/cacheproto.h"
#include "cli/wlopts.h"
#include "engine/metrics.h"
#include "workload/corpus.h"
#include "workload/workload.h"

/* The server said nothing of cached tokens. */
#define NOT_SAID UINT64_MAX

/* n ok requests of prompt tokens each, cached of them served from the cache in total, every
 * request saying so (or none, NOT_SAID). */
static void metrics(struct st_metrics *m, uint64_t n, uint64_t prompt, uint64_t cached)
{
    st_metrics_init(m);
    m->ok = n;
    m->prompt_tokens = n * prompt;
    if (cached != NOT_SAID) {
        m->cached_tokens = cached;
        m->cached_requests = n;
        m->cached_prompt_tokens = n * prompt;
    }
}

static const struct st_cache_scrape none = {0};

static void test_judge_target(void **state)
{
    (void)state;
    struct st_metrics m;
    struct st_cache_judge j;
    /* 10 requests of 1,000 tokens, 8,990 cached: 0.899, within 0.01 of 0.9. */
    metrics(&m, 10, 1000, 8990);
    st_cache_judge(0.9, 0.01, 0, &m, &none, &none, 0, &j);
    assert_true(j.valid);
    assert_true(fabs(j.hit_rate - 0.899) < 1e-12);
    assert_true(fabs(j.tolerance - 0.01) < 1e-12);
    assert_true(isnan(j.hit_rate_server));
    assert_string_equal(j.why, "");
    st_metrics_release(&m);

    /* 0.88 misses 0.9 by 0.02. */
    metrics(&m, 10, 1000, 8800);
    st_cache_judge(0.9, 0.01, 0, &m, &none, &none, 0, &j);
    assert_false(j.valid);
    assert_string_equal(j.why, "hit rate 0.8800 misses the target 0.9000");

    /* With 16-token pages a 1,000-token prompt may lose up to 16 tokens: 0.01 + 0.016. */
    st_cache_judge(0.9, 0.01, 16, &m, &none, &none, 0, &j);
    assert_true(fabs(j.tolerance - 0.026) < 1e-12);
    assert_true(j.valid);

    /* Above the target counts the same as below it. */
    st_metrics_release(&m);
    metrics(&m, 10, 1000, 9990);
    st_cache_judge(0.9, 0.01, 0, &m, &none, &none, 0, &j);
    assert_false(j.valid);
    st_metrics_release(&m);
}

static void test_judge_no_target(void **state)
{
    (void)state;
    struct st_metrics m;
    struct st_cache_judge j;
    metrics(&m, 4, 500, 0);
    st_cache_judge(NAN, 0.01, 0, &m, &none, &none, 0, &j);
    assert_true(j.valid);
    assert_true(j.hit_rate == 0.0);
    assert_true(isnan(j.target));
    st_metrics_release(&m);
}

static void test_judge_failures(void **state)
{
    (void)state;
    struct st_metrics m;
    struct st_cache_judge j;
    metrics(&m, 10, 1000, 9000);
    m.failed = 1;
    st_cache_judge(0.9, 0.01, 0, &m, &none, &none, 0, &j);
    assert_false(j.valid);
    assert_string_equal(j.why, "1 of 11 requests failed");

    st_cache_judge(0.9, 0.01, 0, &m, &none, &none, 1, &j);
    assert_false(j.valid);
    assert_string_equal(j.why, "interrupted; 1 of 11 requests failed");
    st_metrics_release(&m);

    metrics(&m, 0, 0, 0);
    m.failed = 3;
    st_cache_judge(0.9, 0.01, 0, &m, &none, &none, 0, &j);
    assert_false(j.valid);
    assert_non_null(strstr(j.why, "no request succeeded"));
    assert_non_null(strstr(j.why, "no hit rate measured"));
    st_metrics_release(&m);
}

/* A server that reports no cached tokens per request: its prefix counters decide. */
static void test_judge_server_counters(void **state)
{
    (void)state;
    struct st_metrics m;
    struct st_cache_judge j;
    struct st_cache_scrape a = {.ok = 1}, b = {.ok = 1};
    a.c.have = b.c.have = ST_TARGET_HAVE_PREFIX;
    a.c.prefix_hit_tokens = 1000;
    a.c.prefix_query_tokens = 5000;
    b.c.prefix_hit_tokens = 1000 + 9000;
    b.c.prefix_query_tokens = 5000 + 10000;
    metrics(&m, 10, 1000, NOT_SAID);
    st_cache_judge(0.9, 0.01, 0, &m, &a, &b, 0, &j);
    assert_true(fabs(j.hit_rate_server - 0.9) < 1e-12);
    assert_true(isnan(j.hit_rate)); /* unknown, not 0 */
    assert_true(j.valid);

    /* Counters that went backwards (a restart, SGLang's flush) say nothing. */
    b.c.prefix_hit_tokens = 10;
    st_cache_judge(0.9, 0.01, 0, &m, &a, &b, 0, &j);
    assert_true(isnan(j.hit_rate_server));
    assert_false(j.valid);
    st_metrics_release(&m);
}

/* Neither the requests nor the server's counters say what was cached: unverifiable, not invalid
 * at a hit rate of 0. Some requests saying and some not is no total either. */
static void test_judge_unverifiable(void **state)
{
    (void)state;
    struct st_metrics m;
    struct st_cache_judge j;
    metrics(&m, 10, 1000, NOT_SAID);
    st_cache_judge(0.9, 0.01, 0, &m, &none, &none, 0, &j);
    assert_true(isnan(j.hit_rate));
    assert_false(j.valid);
    assert_true(j.unverifiable);
    assert_non_null(strstr(j.why, "unverifiable: 0 of 10 requests said"));
    st_metrics_release(&m);

    metrics(&m, 10, 1000, 9000);
    m.cached_requests = 9; /* one request said nothing */
    st_cache_judge(0.9, 0.01, 0, &m, &none, &none, 0, &j);
    assert_true(isnan(j.hit_rate) && j.unverifiable && !j.valid);
    assert_non_null(strstr(j.why, "9 of 10 requests said"));
    /* A failure is a failure whatever else is unknown. */
    m.failed = 1;
    st_cache_judge(0.9, 0.01, 0, &m, &none, &none, 0, &j);
    assert_false(j.valid);
    assert_false(j.unverifiable);
    st_metrics_release(&m);
}

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(st_cache_state_name(ST_CACHE_FLUSHED_WARMED), "flushed+warmed");
    assert_string_equal(st_cache_state_name(ST_CACHE_FLUSHED), "flushed");
    assert_string_equal(st_cache_state_name(ST_CACHE_WARM), "warm");
    assert_string_equal(st_cache_state_name(ST_CACHE_UNCONTROLLED), "uncontrolled");
    assert_string_equal(st_cache_verify_name(ST_CACHE_VERIFY_OK), "ok");
    assert_string_equal(st_cache_verify_name(ST_CACHE_VERIFY_UNVERIFIABLE), "unverifiable");
}

/* Four code points a token, as the simulator counts. */
static int count4(void *ctx, const char *text, size_t len, uint64_t *tokens, char *err,
                  size_t errlen)
{
    (void)ctx;
    (void)text;
    (void)err;
    (void)errlen;
    *tokens = (len + 3) / 4;
    return 0;
}

static void test_slice_source(void **state)
{
    (void)state;
    struct st_corpus corpus;
    st_corpus_builtin(&corpus, 7, 1u << 20);
    struct st_wl_params p;
    st_wl_params_defaults(&p);
    p.kind = ST_WL_SHARED_PREFIX;
    p.chat = 0;
    p.requests = 6;
    p.input_len = p.input_len_max = 600;
    p.output_len = p.output_len_max = 32;
    p.prefix_frac = 0.5;
    struct st_workload *wl = NULL;
    char err[256];
    assert_int_equal(st_workload_build(&wl, &p, &corpus, NULL, 0, count4, NULL, err, sizeof(err)),
                     0);

    struct st_buf plain, scratch;
    st_buf_init(&plain);
    st_buf_init(&scratch);
    struct st_cli_slice slice = {.wl = wl,
                                 .base = 2,
                                 .members = "\"point\":\"cc1-r2\",\"cache_state\":\"warm\"",
                                 .max_tokens = 8};
    struct st_json d;
    st_json_init(&d, 0);
    for (uint64_t id = 0; id < 3; id++) {
        struct st_req_item a, b;
        memset(&a, 0, sizeof(a));
        memset(&b, 0, sizeof(b));
        st_buf_clear(&plain);
        st_buf_clear(&scratch);
        assert_int_equal(st_workload_source(wl, 2 + id, &a, &plain), 0);
        assert_int_equal(st_cli_slice_source(&slice, id, &b, &scratch), 0);
        /* The same prompt bytes, wherever they live now. */
        assert_int_equal(a.prompt_len, b.prompt_len);
        assert_memory_equal(a.prompt, b.prompt, a.prompt_len);
        assert_int_equal(b.max_tokens, 8);
        /* The tag: the members first, then every member of the workload's own tag. */
        assert_int_equal(st_json_parse(&d, b.tag_json, b.tag_len), 0);
        assert_true(st_json_streq(&d, st_json_get(&d, 0, "point"), "cc1-r2"));
        assert_true(st_json_streq(&d, st_json_get(&d, 0, "cache_state"), "warm"));
        assert_true(st_json_streq(&d, st_json_get(&d, 0, "kind"), "shared-prefix"));
        assert_true(b.tag_len == a.tag_len + strlen(slice.members) + 1);
        assert_memory_equal(b.tag_json + b.tag_len - (a.tag_len - 1), a.tag_json + 1,
                            a.tag_len - 1);
    }
    /* Without members or an override the item is the workload's own. */
    struct st_cli_slice bare = {.wl = wl, .base = 0, .members = NULL, .max_tokens = -1};
    struct st_req_item a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    st_buf_clear(&plain);
    st_buf_clear(&scratch);
    assert_int_equal(st_workload_source(wl, 0, &a, &plain), 0);
    assert_int_equal(st_cli_slice_source(&bare, 0, &b, &scratch), 0);
    assert_int_equal(a.max_tokens, b.max_tokens);
    assert_int_equal(a.tag_len, b.tag_len);
    assert_memory_equal(a.tag_json, b.tag_json, a.tag_len);

    st_json_release(&d);
    st_buf_release(&plain);
    st_buf_release(&scratch);
    st_workload_free(wl);
    st_corpus_release(&corpus);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_judge_target),       cmocka_unit_test(test_judge_no_target),
        cmocka_unit_test(test_judge_failures),     cmocka_unit_test(test_judge_server_counters),
        cmocka_unit_test(test_judge_unverifiable), cmocka_unit_test(test_names),
        cmocka_unit_test(test_slice_source),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
