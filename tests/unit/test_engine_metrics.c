/*
 * Unit tests of the request record and derived metrics (src/engine/metrics.c): the token split,
 * TTFT / ITL / ICL / TPOT from hand-built records with known truth, warmup exclusion, failure
 * accounting, merge, and the receipt JSON, written and read back (st_rec_read).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/clock.h"
#include "base/json.h"
#include "engine/metrics.h"

#define MS ST_NS_PER_MS

/* A record of C chunks of k tokens each (4 bytes a token), first at t0 + ttft, then every gap. */
static void build(struct st_rec *r, uint64_t t0, uint64_t ttft, uint64_t gap, uint32_t chunks,
                  uint32_t k, int64_t usage_tokens)
{
    st_rec_reset(r);
    r->t_intended = t0;
    r->t_sent = t0;
    r->t_headers = t0 + 1;
    for (uint32_t i = 0; i < chunks; i++) {
        uint64_t t = t0 + ttft + (uint64_t)i * gap;
        st_rec_add_chunk(r, t, -1, 4 * k, -1);
        if (!r->t_first) {
            r->t_first = t;
        }
        r->t_last = t;
        r->content_chunks++;
    }
    r->t_end = r->t_last + 1 * MS;
    r->completion_tokens = usage_tokens;
}

static void test_split_bytes_exact(void **state)
{
    (void)state;
    struct st_rec r;
    st_rec_init(&r);
    build(&r, 0, 0, 1, 5, 3, 15);
    int32_t k[5];
    assert_int_equal(st_rec_split_tokens(&r, 15, k), 0);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(k[i], 3);
    }
    st_rec_release(&r);
}

static void test_split_uneven_sums(void **state)
{
    (void)state;
    struct st_rec r;
    st_rec_init(&r);
    st_rec_reset(&r);
    uint32_t bytes[] = {1, 7, 3, 10, 2, 9};
    for (int i = 0; i < 6; i++) {
        st_rec_add_chunk(&r, (uint64_t)i, -1, bytes[i], -1);
    }
    for (int64_t n = 0; n < 40; n++) {
        int32_t k[6];
        st_rec_split_tokens(&r, n, k);
        int64_t sum = 0;
        for (int i = 0; i < 6; i++) {
            double exact = (double)n * bytes[i] / 32.0;
            assert_true(k[i] >= 0);
            assert_true((double)k[i] > exact - 1.0 && (double)k[i] < exact + 1.0);
            sum += k[i];
        }
        assert_int_equal(sum, n);
    }
    st_rec_release(&r);
}

static void test_split_server_counts_win(void **state)
{
    (void)state;
    struct st_rec r;
    st_rec_init(&r);
    st_rec_reset(&r);
    st_rec_add_chunk(&r, 1, -1, 100, 1);
    st_rec_add_chunk(&r, 2, -1, 4, 3);
    int32_t k[2];
    assert_int_equal(st_rec_split_tokens(&r, 99, k), 1);
    assert_int_equal(k[0], 1);
    assert_int_equal(k[1], 3);
    st_rec_release(&r);
}

/* TTFT 200 ms, one chunk every 20 ms of k tokens: ITL = 20/k, ICL = 20, TPOT as defined. */
static void check_truth(uint32_t k)
{
    struct st_metrics m;
    st_metrics_init(&m);
    struct st_rec r;
    st_rec_init(&r);
    uint32_t n = 200, chunks = (n + k - 1) / k;
    build(&r, 1000 * MS, 200 * MS, 20 * MS, chunks, k, n);
    /* The last chunk carries the remainder. */
    r.chunks[chunks - 1].bytes = 4 * (n - (chunks - 1) * k);
    st_metrics_observe(&m, &r);
    assert_int_equal(m.ok, 1);
    assert_int_equal(m.output_tokens, n);
    assert_int_equal(m.ttft.min, 200 * MS);
    assert_int_equal(m.icl.count, chunks - 1);
    assert_int_equal(m.icl.min, 20 * MS);
    assert_int_equal(m.icl.max, 20 * MS);
    /* Every token but those of the first chunk gets one ITL sample. */
    assert_int_equal(m.itl.count, n - k);
    uint64_t span = (uint64_t)(chunks - 1) * 20 * MS;
    assert_int_equal(m.tpot.min, span / (n - 1));
    double mean_itl = st_hist_mean(&m.itl);
    assert_true(mean_itl > (double)span / (double)(n - k) - 1.0);
    assert_true(mean_itl < (double)span / (double)(n - k) + 1.0);
    st_rec_release(&r);
    st_metrics_release(&m);
}

static void test_truth_k1(void **state)
{
    (void)state;
    check_truth(1);
}

static void test_truth_k2(void **state)
{
    (void)state;
    check_truth(2);
}

static void test_truth_k3_remainder(void **state)
{
    (void)state;
    check_truth(3);
}

static void test_truth_k4(void **state)
{
    (void)state;
    check_truth(4);
}

static void test_warmup_and_failures(void **state)
{
    (void)state;
    struct st_metrics m;
    st_metrics_init(&m);
    struct st_rec r;
    st_rec_init(&r);
    build(&r, 0, 5 * MS, MS, 4, 1, 4);
    r.warmup = 1;
    st_metrics_observe(&m, &r);
    assert_int_equal(m.warmup, 1);
    assert_int_equal(m.ok, 0);
    assert_int_equal(m.ttft.count, 0);
    assert_int_equal(m.window_start, UINT64_MAX);

    build(&r, 10 * MS, 5 * MS, MS, 4, 1, 4);
    r.err = ST_ERR_STALL;
    st_metrics_observe(&m, &r);
    assert_int_equal(m.failed, 1);
    assert_int_equal(m.errors[ST_ERR_STALL], 1);
    assert_int_equal(m.ttft.count, 0);
    assert_int_equal(m.output_tokens, 0);
    assert_int_equal(m.window_start, 10 * MS);

    build(&r, 20 * MS, 7 * MS, MS, 4, 1, 4);
    st_metrics_observe(&m, &r);
    assert_int_equal(m.ok, 1);
    assert_int_equal(m.ttft.min, 7 * MS);
    assert_int_equal(m.window_end, r.t_end);
    st_rec_release(&r);
    st_metrics_release(&m);
}

static void test_merge(void **state)
{
    (void)state;
    struct st_metrics a, b, all;
    st_metrics_init(&a);
    st_metrics_init(&b);
    st_metrics_init(&all);
    struct st_rec r;
    st_rec_init(&r);
    for (int i = 0; i < 10; i++) {
        build(&r, (uint64_t)i * MS, (uint64_t)(10 + i) * MS, MS, 3, 1, 3);
        st_metrics_observe(i % 2 ? &a : &b, &r);
        st_metrics_observe(&all, &r);
    }
    st_metrics_merge(&a, &b);
    assert_int_equal(a.ok, all.ok);
    assert_int_equal(a.output_tokens, all.output_tokens);
    assert_int_equal(a.ttft.count, all.ttft.count);
    assert_int_equal(a.ttft.min, all.ttft.min);
    assert_int_equal(a.ttft.max, all.ttft.max);
    assert_int_equal(a.window_start, all.window_start);
    assert_int_equal(a.window_end, all.window_end);
    assert_int_equal(st_hist_quantile(&a.ttft, 0.5), st_hist_quantile(&all.ttft, 0.5));
    st_rec_release(&r);
    st_metrics_release(&a);
    st_metrics_release(&b);
    st_metrics_release(&all);
}

static void test_receipt_json(void **state)
{
    (void)state;
    struct st_rec r;
    st_rec_init(&r);
    build(&r, 100, 5 * MS, MS, 3, 1, 3);
    r.id = 42;
    r.status = 200;
    r.err = ST_ERR_CLOSED;
    snprintf(r.err_msg, sizeof(r.err_msg), "%s", "bad \"bytes\" \xff here");
    struct st_buf b;
    st_buf_init(&b);
    struct st_jw w;
    st_jw_init(&w, &b);
    st_rec_write_json(&r, &w, 1, "hi", 2, "{\"group\":3}", 11);
    struct st_json d;
    st_json_init(&d, 0);
    assert_int_equal(st_json_parse(&d, b.data, b.len), 0);
    int64_t v;
    assert_int_equal(st_json_i64(&d, st_json_get(&d, 0, "id"), &v), 0);
    assert_int_equal(v, 42);
    assert_true(st_json_streq(&d, st_json_get(&d, 0, "error"), "closed"));
    assert_int_equal(st_json_bool(&d, st_json_get(&d, 0, "ok")), 0);
    double ttft;
    assert_int_equal(st_json_f64(&d, st_json_get(&d, 0, "ttft_ms"), &ttft), 0);
    assert_true(ttft > 4.999 && ttft < 5.001);
    int chunks = st_json_get(&d, 0, "chunks");
    assert_int_equal(st_json_type(&d, chunks), ST_JSON_ARRAY);
    assert_int_equal(d.toks[chunks].size, 3);
    assert_true(st_json_streq(&d, st_json_get(&d, 0, "text"), "hi"));
    int64_t g;
    assert_int_equal(st_json_i64(&d, st_json_get(&d, st_json_get(&d, 0, "workload"), "group"), &g),
                     0);
    assert_int_equal(g, 3);
    st_json_release(&d);
    st_buf_release(&b);
    st_rec_release(&r);
}

/*
 * A record timed by the simulator's virtual clock: its wall times are noise (a slow client, a
 * busy host), its stamps the truth; every metric comes from the stamps. Arrival at virtual 0,
 * placed at 2 ms (queued), first chunk at 10 ms, then 4 chunks of 2 tokens every 6 ms, end at the
 * last one: TTFT 10 ms, E2E 28 ms, queue 2 ms, TPOT (28 - 10) / 7 ms, ICL 6 ms, ITL 3 ms.
 */
static void virtual_rec(struct st_rec *r)
{
    st_rec_reset(r);
    r->virt = 1;
    r->t_intended = 1000 * MS; /* the client's clock: unrelated numbers */
    r->t_sent = 1003 * MS;
    r->t_headers = 1500 * MS;
    r->v_intended = 0;
    r->v_sent = 2 * MS;
    for (uint32_t i = 0; i < 4; i++) {
        int64_t v = (int64_t)(10 + 6 * i) * (int64_t)MS;
        uint64_t wall = 1600 * MS + (uint64_t)(i * i) * 97 * MS;
        st_rec_add_chunk(r, wall, v, 8, -1);
        if (i == 0) {
            r->t_first = wall;
            r->v_first = v;
        }
        r->t_last = wall;
        r->v_last = v;
        r->content_chunks++;
    }
    r->v_end = 28 * MS;
    r->t_end = 9999 * MS;
    r->completion_tokens = 8;
}

static void test_virtual_clock(void **state)
{
    (void)state;
    struct st_rec r;
    st_rec_init(&r);
    virtual_rec(&r);
    r.sim_lag_ns = 7 * MS;
    struct st_metrics m;
    st_metrics_init(&m);
    st_metrics_observe(&m, &r);
    assert_int_equal(m.ttft.min, 10 * MS);
    assert_int_equal(m.e2e.min, 28 * MS);
    assert_int_equal(m.queue.min, 2 * MS);
    assert_int_equal(m.tpot.min, 18 * MS / 7);
    assert_int_equal(m.icl.min, 6 * MS);
    assert_int_equal(m.icl.max, 6 * MS);
    assert_int_equal(m.itl.count, 6);
    assert_int_equal(m.itl.min, 3 * MS);
    assert_int_equal(m.itl.max, 3 * MS);
    assert_int_equal(m.window_start, 0);
    assert_int_equal(m.window_end, 28 * MS);
    assert_int_equal(m.clock.requests, 1);
    assert_int_equal(m.clock.lag_max_ns, 7 * MS);
    assert_int_equal(m.clock.late, 0);
    /* The receipt keeps both clocks; its ms figures are the virtual ones. */
    struct st_buf b;
    st_buf_init(&b);
    struct st_jw w;
    st_jw_init(&w, &b);
    st_rec_write_json(&r, &w, 1, NULL, 0, NULL, 0);
    struct st_json d;
    st_json_init(&d, 0);
    assert_int_equal(st_json_parse(&d, b.data, b.len), 0);
    assert_true(st_json_streq(&d, st_json_get(&d, 0, "clock"), "virtual"));
    double x;
    assert_int_equal(st_json_f64(&d, st_json_get(&d, 0, "ttft_ms"), &x), 0);
    assert_true(x == 10.0);
    assert_int_equal(st_json_f64(&d, st_json_get(&d, 0, "e2e_ms"), &x), 0);
    assert_true(x == 28.0);
    assert_int_equal(st_json_f64(&d, st_json_get(&d, 0, "sim_lag_ms"), &x), 0);
    assert_true(x == 7.0);
    int64_t v;
    assert_int_equal(st_json_i64(&d, st_json_get(&d, 0, "v_sent_ns"), &v), 0);
    assert_int_equal(v, 2 * MS);
    assert_int_equal(st_json_i64(&d, st_json_get(&d, 0, "t_sent_ns"), &v), 0);
    assert_int_equal(v, 1003 * MS);
    assert_int_equal(st_json_get(&d, 0, "sim_late_ms"), -1);
    /* [wall offset, bytes, tokens, virtual ns] per chunk */
    int ch = st_json_at(&d, st_json_get(&d, 0, "chunks"), 3);
    assert_int_equal(d.toks[ch].size, 4);
    assert_int_equal(st_json_i64(&d, st_json_at(&d, ch, 3), &v), 0);
    assert_int_equal(v, 28 * MS);
    st_json_release(&d);
    st_buf_release(&b);
    /* A chunk the simulator did not stamp: no gap can be trusted, the rest still counts. */
    struct st_metrics m2;
    st_metrics_init(&m2);
    r.chunks[2].v_ns = -1;
    st_metrics_observe(&m2, &r);
    assert_int_equal(m2.icl.count, 0);
    assert_int_equal(m2.ttft.min, 10 * MS);
    st_metrics_release(&m2);
    st_metrics_release(&m);
    st_rec_release(&r);
}

/* The receipt, written and read back with st_rec_read: the view's times are the line's clock's
 * (the client's, then the simulator's), its TTFT and E2E the line's ttft_ms and e2e_ms; a
 * renamed time key reads as absent. */
static void view_of(const struct st_rec *r, struct st_rec_view *v, double *ttft_ms, double *e2e_ms,
                    const char *from, const char *to)
{
    struct st_buf b, e;
    st_buf_init(&b);
    st_buf_init(&e);
    struct st_jw w;
    st_jw_init(&w, &b);
    st_rec_write_json(r, &w, 0, NULL, 0, NULL, 0);
    const char *text = st_buf_str(&b);
    const char *p = from ? strstr(text, from) : NULL;
    if (from) {
        assert_non_null(p);
        st_buf_append(&e, text, (size_t)(p - text));
        st_buf_puts(&e, to);
        st_buf_puts(&e, p + strlen(from));
        text = st_buf_str(&e);
    }
    struct st_json d;
    st_json_init(&d, 0);
    assert_int_equal(st_json_parse(&d, text, strlen(text)), 0);
    st_rec_read(&d, 0, v);
    assert_int_equal(st_json_f64(&d, st_json_get(&d, 0, "ttft_ms"), ttft_ms), 0);
    assert_int_equal(st_json_f64(&d, st_json_get(&d, 0, "e2e_ms"), e2e_ms), 0);
    st_json_release(&d);
    st_buf_release(&b);
    st_buf_release(&e);
}

static void test_receipt_read(void **state)
{
    (void)state;
    struct st_rec r;
    struct st_rec_view v;
    double ttft, e2e;
    st_rec_init(&r);
    build(&r, 100, 5 * MS, MS, 3, 1, 3);
    r.id = 7;
    view_of(&r, &v, &ttft, &e2e, NULL, NULL);
    assert_true(v.has_ok && v.ok && !v.warmup && !v.virt);
    assert_true(v.id == 7);
    const struct st_rec_spans *sp = &v.spans;
    assert_true(sp->ttft_ns == 5 * MS && sp->e2e_ns == 8 * MS);
    assert_true(sp->decode_ns == 2 * MS && sp->decode_n == 2); /* 3 tokens: 2 intervals */
    assert_true((double)sp->ttft_ns / 1e6 == ttft);
    assert_true((double)sp->e2e_ns / 1e6 == e2e);
    virtual_rec(&r);
    r.warmup = 1;
    view_of(&r, &v, &ttft, &e2e, NULL, NULL);
    assert_true(v.virt && v.warmup);
    assert_true(sp->ttft_ns == 10 * MS && sp->e2e_ns == 28 * MS);
    assert_true((double)sp->ttft_ns / 1e6 == ttft);
    assert_true((double)sp->e2e_ns / 1e6 == e2e);
    view_of(&r, &v, &ttft, &e2e, "\"v_first_content_ns\":", "\"v_first_ns\":");
    assert_true(sp->ttft_ns == -1 && sp->decode_ns == -1 && sp->decode_n == 0);
    assert_true(sp->e2e_ns == 28 * MS); /* the end is still known */
    r.err = ST_ERR_CLOSED;
    view_of(&r, &v, &ttft, &e2e, "\"ok\":", "\"fine\":");
    assert_false(v.has_ok);
    st_rec_release(&r);
}

/* The one definition of the spans: unknown ends, a negative span and too few tokens. */
static void test_rec_spans(void **state)
{
    (void)state;
    struct st_rec_spans s;
    st_rec_spans_of(10, 12, 15, 25, 30, 3, &s);
    assert_true(s.queue_ns == 2 && s.ttft_ns == 5 && s.e2e_ns == 20);
    assert_true(s.decode_ns == 10 && s.decode_n == 2);
    st_rec_spans_of(-1, 12, 15, 25, 30, 3, &s); /* never placed: nothing counts from it */
    assert_true(s.queue_ns == -1 && s.ttft_ns == -1 && s.e2e_ns == -1);
    assert_true(s.decode_ns == 10 && s.decode_n == 2); /* decode needs no start */
    st_rec_spans_of(10, 5, -1, -1, 30, 1, &s); /* sent before intended; no content; one token */
    assert_true(s.queue_ns == -1 && s.ttft_ns == -1 && s.e2e_ns == 20);
    assert_true(s.decode_ns == -1 && s.decode_n == 0);
    st_rec_spans_of(10, 10, 15, 15, 15, 2, &s); /* last == first: no decode time */
    assert_true(s.queue_ns == 0 && s.decode_ns == -1 && s.decode_n == 0);
}

static void test_sim_clock_valid(void **state)
{
    (void)state;
    char why[256];
    struct st_sim_clock c = {.requests = 5, .lag_max_ns = ST_SIM_LAG_MAX_NS};
    assert_int_equal(st_sim_clock_valid(&c, why, sizeof(why)), 1); /* at the bound: still valid */
    assert_string_equal(why, "");
    c.lag_max_ns = ST_SIM_LAG_MAX_NS + 1;
    assert_int_equal(st_sim_clock_valid(&c, why, sizeof(why)), 0);
    assert_non_null(strstr(why, "behind its clock"));
    struct st_sim_clock late = {.requests = 5, .late = 2, .late_max_ns = 3 * MS};
    assert_int_equal(st_sim_clock_valid(&late, why, sizeof(why)), 0);
    assert_non_null(strstr(why, "placed 2 request(s) after"));
    /* Merging keeps the worst of both and the counts. */
    st_sim_clock_merge(&c, &late);
    assert_int_equal(c.requests, 10);
    assert_int_equal(c.late, 2);
    assert_int_equal(c.late_max_ns, 3 * MS);
    assert_int_equal(c.lag_max_ns, ST_SIM_LAG_MAX_NS + 1);
    /* A record placed late counts, warmup or not. */
    struct st_rec r;
    st_rec_init(&r);
    virtual_rec(&r);
    r.warmup = 1;
    r.sim_late_ns = 0;
    struct st_metrics m;
    st_metrics_init(&m);
    st_metrics_observe(&m, &r);
    assert_int_equal(m.warmup, 1);
    assert_int_equal(m.clock.late, 1);
    assert_int_equal(m.ttft.count, 0);
    st_metrics_release(&m);
    st_rec_release(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_bytes_exact),
        cmocka_unit_test(test_split_uneven_sums),
        cmocka_unit_test(test_split_server_counts_win),
        cmocka_unit_test(test_truth_k1),
        cmocka_unit_test(test_truth_k2),
        cmocka_unit_test(test_truth_k3_remainder),
        cmocka_unit_test(test_truth_k4),
        cmocka_unit_test(test_warmup_and_failures),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_receipt_json),
        cmocka_unit_test(test_virtual_clock),
        cmocka_unit_test(test_receipt_read),
        cmocka_unit_test(test_rec_spans),
        cmocka_unit_test(test_sim_clock_valid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
