/*
 * Tests for the result document of src/engine/run.c (what `servetune bench --json` prints and a
 * campaign step reads back): st_run_summary_json written from a known result and read back with
 * st_run_summary_read gives the same counts, rate and window; the simulator's clock verdict
 * reads back through st_sim_clock_read as st_sim_clock_valid states it; a key renamed in the
 * text fails the read (so a writer change that the reader does not follow fails here, not in a
 * campaign).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "engine/metrics.h"
#include "engine/run.h"

/* A finished run of 7 ok and 2 failed requests, 100 output tokens over a 2 s window. */
static void result(struct st_load_cfg *cfg, struct st_run_result *res, int virt)
{
    memset(cfg, 0, sizeof(*cfg));
    memset(res, 0, sizeof(*res));
    cfg->base_url = "http://127.0.0.1:1";
    cfg->virtual_clock = virt;
    res->m.ok = 7;
    res->m.failed = 2;
    res->m.output_tokens = 100;
    res->m.window_start = 1000000000ull;
    res->m.window_end = 3000000000ull;
    res->m.clock.requests = 9;
    res->m.clock.late = virt ? 1 : 0; /* one request placed late: the clock did not hold */
    res->m.clock.late_max_ns = 5000000;
}

static void written(int virt, struct st_buf *out)
{
    struct st_load_cfg cfg;
    struct st_run_result res;
    result(&cfg, &res, virt);
    st_run_summary_json(&cfg, &res, NULL, out);
}

static void round_trip(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    written(0, &b);
    struct st_json d;
    st_json_init(&d, 0);
    assert_int_equal(st_json_parse(&d, b.data, b.len), 0);
    struct st_run_digest g;
    char err[256] = "";
    assert_int_equal(st_run_summary_read(&d, &g, err, sizeof(err)), 0);
    assert_true(g.ok == 7 && g.failed == 2);
    assert_true(g.output_tokens_per_s == 50);
    assert_true(g.duration_s == 2);
    int valid = 0;
    char why[256] = "x";
    st_sim_clock_read(&d, 0, &valid, why, sizeof(why));
    assert_true(valid); /* not the simulator's clock: no "sim_clock" */
    assert_string_equal(why, "");
    st_json_release(&d);
    st_buf_release(&b);
}

static void clock_round_trip(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    written(1, &b);
    struct st_json d;
    st_json_init(&d, 0);
    assert_int_equal(st_json_parse(&d, b.data, b.len), 0);
    struct st_load_cfg cfg;
    struct st_run_result res;
    result(&cfg, &res, 1);
    char want[256], why[256];
    int valid = 1;
    assert_int_equal(st_sim_clock_valid(&res.m.clock, want, sizeof(want)), 0);
    st_sim_clock_read(&d, 0, &valid, why, sizeof(why));
    assert_false(valid);
    assert_string_equal(why, want);
    st_json_release(&d);
    st_buf_release(&b);
}

/* The text with the first from replaced by to, parsed into d. */
static void renamed(struct st_json *d, struct st_buf *text, const char *from, const char *to)
{
    struct st_buf b;
    st_buf_init(&b);
    written(0, &b);
    const char *p = strstr(st_buf_str(&b), from);
    assert_non_null(p);
    st_buf_append(text, b.data, (size_t)(p - b.data));
    st_buf_puts(text, to);
    st_buf_puts(text, p + strlen(from));
    st_buf_release(&b);
    assert_int_equal(st_json_parse(d, text->data, text->len), 0);
}

static void renamed_key(void **state)
{
    (void)state;
    static const char *const from[] = {"\"requests\":{", "\"ok\":7", "\"failed\":2"};
    static const char *const to[] = {"\"reqs\":{", "\"n_ok\":7", "\"errors_n\":2"};
    for (size_t i = 0; i < sizeof(from) / sizeof(from[0]); i++) {
        struct st_json d;
        struct st_buf t;
        struct st_run_digest g;
        char err[256] = "";
        st_json_init(&d, 0);
        st_buf_init(&t);
        renamed(&d, &t, from[i], to[i]);
        assert_int_equal(st_run_summary_read(&d, &g, err, sizeof(err)), ST_EPARSE);
        assert_non_null(strstr(err, "bench JSON"));
        st_json_release(&d);
        st_buf_release(&t);
    }
    /* A renamed rate is a reader error only when it is not a number; absent reads as NaN, which
     * the campaign then reports as no sample. */
    struct st_json d;
    struct st_buf t;
    struct st_run_digest g;
    char err[256] = "";
    st_json_init(&d, 0);
    st_buf_init(&t);
    renamed(&d, &t, "\"output_tokens_per_s\":", "\"out_tps\":");
    assert_int_equal(st_run_summary_read(&d, &g, err, sizeof(err)), 0);
    assert_true(isnan(g.output_tokens_per_s));
    st_json_release(&d);
    st_buf_release(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip),
        cmocka_unit_test(clock_round_trip),
        cmocka_unit_test(renamed_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
