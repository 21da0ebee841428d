/*
 * Tests for src/campaign/rules.c against hand-computed tables: seed 000's step-count and batch
 * screenings (MTP 3 inconclusive at +4.26%, MTP 1 rejected at -12.54%, batch 1024 rejected by the
 * TTFT guard at +24.73%), both sides of the noise threshold for each direction on repeats without
 * spread (where every test is exact), the guard edge, the reported medians, gates (outcomes and
 * limits), a first look not yet reached, the sequential looks and the `more` flag, equivalence,
 * Holm over several arms, samples: 1 rules, the composite and the final choice. The statistics
 * themselves are checked in test_stats_*.c; the error rates in bench/decide_error.c.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "campaign/rules.h"
#include "stats/welch.h"

static void assert_near(double got, double want)
{
    if (fabs(got - want) > 1e-9 * fmax(1.0, fabs(want))) {
        fail_msg("got %.17g, want %.17g", got, want);
    }
}

static void assert_has(const char *s, const char *needle)
{
    if (!strstr(s, needle)) {
        fail_msg("\"%s\" does not contain \"%s\"", s, needle);
    }
}

/* ---- seed 000: three categories x 3 runs of 2048-token outputs, medians in the seed's table ----
 */

static const struct st_rules_metric seed_metrics[] = {
    {"decode2048.decode_tps@code", ST_RULES_HIGHER, ST_RULES_MEDIAN, 3, 3, 1, 0},
    {"decode2048.decode_tps@chinese", ST_RULES_HIGHER, ST_RULES_MEDIAN, 3, 3, 1, 0},
    {"decode2048.decode_tps@reasoning", ST_RULES_HIGHER, ST_RULES_MEDIAN, 3, 3, 1, 0},
};

static const struct st_rules_guard seed_guards[] = {
    {"long128k.ttft_s", ST_RULES_LOWER, ST_RULES_MEDIAN, 0.10, 3, 3, 0},
    {"long128k_repeat.ttft_s", ST_RULES_LOWER, ST_RULES_MEDIAN, 0.10, 3, 3, 0},
    {"text_image.ttft_s", ST_RULES_LOWER, ST_RULES_MEDIAN, 0.10, 3, 3, 0},
};

static const struct st_rules_limit seed_limits[] = {
    {"kv_floor", "server.kv_capacity_tokens", ST_RULES_MEDIAN, 1, 0, 131072, 0},
};

static const struct st_rules_cfg seed_cfg = {
    .noise = 0.05,
    .metrics = seed_metrics,
    .n_metrics = 3,
    .guards = seed_guards,
    .n_guards = 3,
    .limits = seed_limits,
    .n_limits = 1,
};

/* Repeats around each median of the seed's table (the middle value is the table's); their CV is
 * 0.3-0.6%, so at n = 3 a 12% difference is beyond doubt and a 4% one inside the threshold. */
static const double b_code[] = {123.1, 123.72, 124.0}, b_zh[] = {128.75, 127.9, 129.3},
                    b_rs[] = {122.5, 121.0, 122.11};
static const double m3_code[] = {123.55, 123.6, 122.9}, m3_zh[] = {133.8, 134.24, 135.0},
                    m3_rs[] = {123.53, 123.2, 124.1};
static const double m1_code[] = {109.63, 109.1, 110.2}, m1_zh[] = {112.0, 112.61, 113.4},
                    m1_rs[] = {108.28, 108.9, 107.5};
static const double b_ttft1[] = {14.426, 14.40, 14.45}, b_ttft2[] = {0.702, 0.70, 0.705},
                    b_ttft3[] = {12.815, 12.80, 12.83};
static const double c_ttft1[] = {17.993, 17.95, 18.02}, c_ttft2[] = {0.854, 0.85, 0.856},
                    c_ttft3[] = {15.955, 15.93, 15.98};
static const double kv_mtp2[] = {146622}, kv_mtp1[] = {159669}, kv_mtp3[] = {137414},
                    kv_b1024[] = {155509};

static const struct st_rules_samples base_s[] = {
    {"decode2048.decode_tps@code", b_code, 3},    {"decode2048.decode_tps@chinese", b_zh, 3},
    {"decode2048.decode_tps@reasoning", b_rs, 3}, {"long128k.ttft_s", b_ttft1, 3},
    {"long128k_repeat.ttft_s", b_ttft2, 3},       {"text_image.ttft_s", b_ttft3, 3},
    {"server.kv_capacity_tokens", kv_mtp2, 1},
};
static const struct st_rules_samples mtp3_s[] = {
    {"decode2048.decode_tps@code", m3_code, 3},    {"decode2048.decode_tps@chinese", m3_zh, 3},
    {"decode2048.decode_tps@reasoning", m3_rs, 3}, {"long128k.ttft_s", b_ttft1, 3},
    {"long128k_repeat.ttft_s", b_ttft2, 3},        {"text_image.ttft_s", b_ttft3, 3},
    {"server.kv_capacity_tokens", kv_mtp3, 1},
};
static const struct st_rules_samples mtp1_s[] = {
    {"decode2048.decode_tps@code", m1_code, 3},    {"decode2048.decode_tps@chinese", m1_zh, 3},
    {"decode2048.decode_tps@reasoning", m1_rs, 3}, {"long128k.ttft_s", b_ttft1, 3},
    {"long128k_repeat.ttft_s", b_ttft2, 3},        {"text_image.ttft_s", b_ttft3, 3},
    {"server.kv_capacity_tokens", kv_mtp1, 1},
};
/* Batch 1024: decode unchanged (the baseline's repeats), TTFT 22-25% slower, KV +6.1%. */
static const struct st_rules_samples b1024_s[] = {
    {"decode2048.decode_tps@code", b_code, 3},    {"decode2048.decode_tps@chinese", b_zh, 3},
    {"decode2048.decode_tps@reasoning", b_rs, 3}, {"long128k.ttft_s", c_ttft1, 3},
    {"long128k_repeat.ttft_s", c_ttft2, 3},       {"text_image.ttft_s", c_ttft3, 3},
    {"server.kv_capacity_tokens", kv_b1024, 1},
};

static const struct st_rules_gate all_pass[] = {
    {"functional", 1, NULL},
    {"quality", 1, NULL},
    {"oom", 1, NULL},
    {"server_exit", 1, NULL},
};

static const struct st_rules_arm seed_base = {"mtp2", base_s, 7, NULL, 0};

/* One cache of prepared sequential designs for the whole binary (each takes ~0.1 s to build,
 * seconds under valgrind); released at exit. */
static struct st_rules_designs designs;

static void decide(const struct st_rules_cfg *cfg_in, const struct st_rules_arm *base,
                   const struct st_rules_arm *arm, struct st_rules_result *r)
{
    char err[256] = "";
    struct st_rules_cfg cfg = *cfg_in;
    cfg.designs = &designs;
    int rc = st_rules_decide(&cfg, base, arm, r, err, sizeof(err));
    if (rc != 0) {
        fail_msg("st_rules_decide: %d %s", rc, err);
    }
}

/* The relative difference of the geometric means, as the test measures it. */
static double gm_rel(const double *a, const double *b, size_t n)
{
    double la = 0, lb = 0;
    for (size_t i = 0; i < n; i++) {
        la += log(a[i]);
        lb += log(b[i]);
    }
    return expm1((la - lb) / (double)n);
}

static void test_seed000_mtp3_inconclusive(void **state)
{
    (void)state;
    struct st_rules_arm a = {"mtp3", mtp3_s, 7, all_pass, 4};
    struct st_rules_result r;
    decide(&seed_cfg, &seed_base, &a, &r);
    /* Medians: code 123.55/123.72 - 1 = -0.137%; chinese 134.24/128.75 - 1 = +4.264%;
       reasoning 123.53/122.11 - 1 = +1.163%: all inside 5%, and the 60% intervals too. */
    assert_int_equal(r.verdict, ST_RULES_INCONCLUSIVE);
    assert_int_equal(r.n_cmp, 3);
    assert_near(r.cmp[1].base, 128.75);
    assert_near(r.cmp[1].arm, 134.24);
    assert_near(r.cmp[0].rel, gm_rel(m3_code, b_code, 3));
    assert_near(r.cmp[1].rel, gm_rel(m3_zh, b_zh, 3));
    assert_int_equal(r.cmp[1].sig, 0);
    assert_int_equal(r.cmp[1].finding, ST_RULES_WITHIN);
    assert_true(r.equivalent);
    assert_int_equal(r.more, 0);
    assert_has(r.reason, "no difference beyond the 5.00% noise threshold: every ranked metric's "
                         "60% interval lies inside +-5.00%");
    assert_has(r.reason, "baseline stays");
    /* Composite: the mean of the three gains (weights 1). */
    assert_near(r.composite, (r.cmp[0].gain + r.cmp[1].gain + r.cmp[2].gain) / 3);
}

static void test_seed000_mtp1_reject(void **state)
{
    (void)state;
    struct st_rules_arm a = {"mtp1", mtp1_s, 7, all_pass, 4};
    struct st_rules_result r;
    decide(&seed_cfg, &seed_base, &a, &r);
    /* -11.39%, -12.54%, -11.33%: the worst (chinese) is named, with its interval and test. */
    assert_int_equal(r.verdict, ST_RULES_REJECT);
    assert_has(r.reason,
               "decode2048.decode_tps@chinese: 112.61 vs baseline 128.75 (medians); -12.4");
    assert_has(r.reason, "n=3 per side; Welch t on logs");
    assert_has(r.reason, "worse beyond the 5.00% noise threshold with evidence");
    assert_int_equal(r.cmp[1].finding, ST_RULES_WORSE);
    assert_true(r.cmp[1].hi < -0.05); /* the whole interval beyond the threshold here */
}

static void test_seed000_batch1024_ttft_guard(void **state)
{
    (void)state;
    struct st_rules_arm a = {"batch1024", b1024_s, 7, all_pass, 4};
    struct st_rules_result r;
    decide(&seed_cfg, &seed_base, &a, &r);
    /* 17.993 / 14.426 - 1 = +24.73% on the medians, over the 10% guard, beyond doubt. */
    assert_int_equal(r.verdict, ST_RULES_REJECT);
    assert_has(r.reason, "guard long128k.ttft_s: 17.993 vs baseline 14.426 (medians); +24.");
    assert_has(r.reason, "worse by more than 10.00% with evidence");
    /* The comparisons are still there for the report: decode unchanged. */
    assert_int_equal(r.n_cmp, 3);
    assert_near(r.cmp[0].rel, 0);
    assert_int_equal(r.n_gcmp, 3);
    assert_int_equal(r.gcmp[0].finding, ST_RULES_WORSE);
}

static void test_seed000_mtp3_kv_guard(void **state)
{
    (void)state;
    /* "Fewer cached tokens": 137414 / 146622 - 1 = -6.28%, one value per arm (samples: 1). A
       10% guard lets MTP 3 through to the noise rule (inconclusive); a 5% guard rejects it first,
       and the verdict says it rests on one sample. */
    struct st_rules_guard g[4];
    memcpy(g, seed_guards, sizeof(seed_guards));
    g[3] = (struct st_rules_guard){
        "server.kv_capacity_tokens", ST_RULES_HIGHER, ST_RULES_MEDIAN, 0.10, 2, 2, 1};
    struct st_rules_cfg cfg = seed_cfg;
    cfg.guards = g;
    cfg.n_guards = 4;
    struct st_rules_arm a = {"mtp3", mtp3_s, 7, all_pass, 4};
    struct st_rules_result r;
    decide(&cfg, &seed_base, &a, &r);
    assert_int_equal(r.verdict, ST_RULES_INCONCLUSIVE);
    g[3].max_worse = 0.05;
    decide(&cfg, &seed_base, &a, &r);
    assert_int_equal(r.verdict, ST_RULES_REJECT);
    assert_true(r.single);
    assert_has(r.reason, "guard server.kv_capacity_tokens: 137414 vs baseline 146622 (-6.28%; "
                         "rests on one sample: samples: 1), worse by more than 5.00%");
}

static void test_kv_floor_gate(void **state)
{
    (void)state;
    /* MTP 3's 137414 tokens pass a 131072 floor and fail a 140000 one. */
    struct st_rules_limit lim = {
        "kv_floor", "server.kv_capacity_tokens", ST_RULES_MEDIAN, 1, 0, 140000, 0};
    struct st_rules_cfg cfg = seed_cfg;
    cfg.limits = &lim;
    struct st_rules_arm a = {"mtp3", mtp3_s, 7, all_pass, 4};
    struct st_rules_result r;
    decide(&cfg, &seed_base, &a, &r);
    assert_int_equal(r.verdict, ST_RULES_REJECT);
    assert_has(r.reason, "gate kv_floor failed: server.kv_capacity_tokens = 137414 (n=1), below "
                         "the minimum 140000");
    /* A maximum (no queueing at cc4: queued <= 0). */
    static const double q[] = {1};
    struct st_rules_samples s = {"cap.queued@cc4", q, 1};
    struct st_rules_limit nq = {"no_queue_cc4", "cap.queued@cc4", ST_RULES_MAX, 0, 1, 0, 0};
    struct st_rules_cfg c2 = {.noise = 0.05, .limits = &nq, .n_limits = 1};
    struct st_rules_arm a2 = {"a6", &s, 1, NULL, 0};
    decide(&c2, &a2, &a2, &r);
    assert_int_equal(r.verdict, ST_RULES_REJECT);
    assert_has(r.reason, "gate no_queue_cc4 failed: cap.queued@cc4 = 1 (n=1), above the maximum 0");
    /* The limit's metric has no value (a probe that could not place one document): it fails. */
    struct st_rules_arm a3 = {"dp4", NULL, 0, NULL, 0};
    decide(&c2, &a2, &a3, &r);
    assert_int_equal(r.verdict, ST_RULES_REJECT);
    assert_string_equal(r.reason,
                        "gate no_queue_cc4 failed: cap.queued@cc4 has no value (its step measured "
                        "none)");
}

static void test_failed_gate_without_samples(void **state)
{
    (void)state;
    /* An arm that ran out of memory has no samples: the gate decides. */
    static const struct st_rules_gate g[] = {{"oom", 1, NULL},
                                             {"server_exit", 0, "exit status 137 at 00:41"}};
    struct st_rules_arm a = {"mtp4", NULL, 0, g, 2};
    struct st_rules_result r;
    decide(&seed_cfg, &seed_base, &a, &r);
    assert_int_equal(r.verdict, ST_RULES_REJECT);
    assert_string_equal(r.reason, "gate server_exit failed: exit status 137 at 00:41");
    assert_int_equal(r.more, 0);
}

/* ---- threshold edges: one metric, three repeats per side without spread, noise 5% ---- */

struct edge_case {
    enum st_rules_dir dir;
    double base, arm;
    enum st_rules_verdict want;
};

static const struct edge_case edges[] = {
    /* Exactly at +5%: not enough evidence. Just past: promote. */
    {ST_RULES_HIGHER, 100, 105, ST_RULES_INCONCLUSIVE},
    {ST_RULES_HIGHER, 100, 105.01, ST_RULES_PROMOTE},
    /* Exactly at -5%: not enough evidence either. Just past: reject. */
    {ST_RULES_HIGHER, 100, 95, ST_RULES_INCONCLUSIVE},
    {ST_RULES_HIGHER, 100, 94.99, ST_RULES_REJECT},
    /* 1.05 * 122.11 is not exact in binary; ST_RULES_EDGE keeps it at the edge. */
    {ST_RULES_HIGHER, 122.11, 122.11 * 1.05, ST_RULES_INCONCLUSIVE},
    /* Lower is better: 2.0 -> 1.9 is a 5% gain (edge), 1.89 a 5.5% gain; 2.1 a 5% loss (edge),
       2.11 a 5.5% loss. */
    {ST_RULES_LOWER, 2.0, 1.9, ST_RULES_INCONCLUSIVE},
    {ST_RULES_LOWER, 2.0, 1.89, ST_RULES_PROMOTE},
    {ST_RULES_LOWER, 2.0, 2.1, ST_RULES_INCONCLUSIVE},
    {ST_RULES_LOWER, 2.0, 2.11, ST_RULES_REJECT},
    /* No change. */
    {ST_RULES_HIGHER, 100, 100, ST_RULES_INCONCLUSIVE},
};

static void test_noise_edges(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
        const struct edge_case *e = &edges[i];
        double b[3] = {e->base, e->base, e->base}, a[3] = {e->arm, e->arm, e->arm};
        struct st_rules_metric m = {"x", e->dir, ST_RULES_MEDIAN, 3, 3, 1, 0};
        struct st_rules_cfg cfg = {.noise = 0.05, .metrics = &m, .n_metrics = 1};
        struct st_rules_samples sb = {"x", b, 3}, sa = {"x", a, 3};
        struct st_rules_arm bs = {"b", &sb, 1, NULL, 0}, as = {"a", &sa, 1, NULL, 0};
        struct st_rules_result r;
        decide(&cfg, &bs, &as, &r);
        if (r.verdict != e->want) {
            fail_msg("case %zu: %g -> %g: %s, want %s (%s)", i, e->base, e->arm,
                     st_rules_verdict_name(r.verdict), st_rules_verdict_name(e->want), r.reason);
        }
        /* Without spread the interval is the point itself. */
        assert_near(r.cmp[0].lo, r.cmp[0].rel);
        assert_near(r.cmp[0].hi, r.cmp[0].rel);
    }
}

static void test_not_on_logs(void **state)
{
    (void)state;
    /* A metric with zeros (a count) has no logarithm: no test, the reason says why. */
    static const double b[] = {0, 0, 0}, a[] = {1, 0, 2};
    struct st_rules_metric m = {"x", ST_RULES_HIGHER, ST_RULES_MEDIAN, 3, 3, 1, 0};
    struct st_rules_cfg cfg = {.noise = 0.05, .metrics = &m, .n_metrics = 1};
    struct st_rules_samples sb = {"x", b, 3}, sa = {"x", a, 3};
    struct st_rules_arm bs = {"b", &sb, 1, NULL, 0}, as = {"a", &sa, 1, NULL, 0};
    struct st_rules_result r;
    decide(&cfg, &bs, &as, &r);
    assert_int_equal(r.verdict, ST_RULES_INCONCLUSIVE);
    assert_has(r.reason, "cannot be compared on logs");
    assert_int_equal(r.more, 0);
}

static void test_guard_edge(void **state)
{
    (void)state;
    /* TTFT 10 -> 11 is exactly 10% worse: passes a 10% guard; 11.01 fails it. */
    static const double b[] = {10, 10, 10}, a_edge[] = {11, 11, 11},
                        a_over[] = {11.01, 11.01, 11.01};
    struct st_rules_guard g = {"ttft_s", ST_RULES_LOWER, ST_RULES_MEDIAN, 0.10, 3, 3, 0};
    struct st_rules_cfg cfg = {.noise = 0.05, .guards = &g, .n_guards = 1};
    struct st_rules_samples sb = {"ttft_s", b, 3}, s1 = {"ttft_s", a_edge, 3},
                            s2 = {"ttft_s", a_over, 3};
    struct st_rules_arm base = {"b", &sb, 1, NULL, 0}, a1 = {"a1", &s1, 1, NULL, 0},
                        a2 = {"a2", &s2, 1, NULL, 0};
    struct st_rules_result r;
    decide(&cfg, &base, &a1, &r);
    assert_int_equal(r.verdict, ST_RULES_INCONCLUSIVE);
    decide(&cfg, &base, &a2, &r);
    assert_int_equal(r.verdict, ST_RULES_REJECT);
    assert_has(r.reason, "guard ttft_s: 11.01 vs baseline 10 (medians); +10.10%");
}

static void test_median_reported_peak_not_enough(void **state)
{
    (void)state;
    /* Baseline {100, 100, 100, 100}. Arm {200, 100, 108, 104}: median (104 + 108) / 2 = 106, the
       mean 128, the geometric mean 122.4 (+22.4%). One repeat at 200 carries that; the spread
       (sd of the logs 0.33) leaves the evidence short: suspected better, not promoted. */
    static const double b[] = {100, 100, 100, 100}, a[] = {200, 100, 108, 104};
    assert_near(st_rules_aggregate(ST_RULES_MEDIAN, a, 4), 106);
    assert_near(st_rules_aggregate(ST_RULES_MEAN, a, 4), 128);
    assert_near(st_rules_aggregate(ST_RULES_MIN, a, 4), 100);
    assert_near(st_rules_aggregate(ST_RULES_MAX, a, 4), 200);
    struct st_rules_metric m = {"tps", ST_RULES_HIGHER, ST_RULES_MEDIAN, 4, 4, 1, 0};
    struct st_rules_cfg cfg = {.noise = 0.05, .metrics = &m, .n_metrics = 1};
    struct st_rules_samples sb = {"tps", b, 4}, sa = {"tps", a, 4};
    struct st_rules_arm base = {"b", &sb, 1, NULL, 0}, arm = {"a", &sa, 1, NULL, 0};
    struct st_rules_result r;
    decide(&cfg, &base, &arm, &r);
    assert_int_equal(r.verdict, ST_RULES_INCONCLUSIVE);
    assert_near(r.cmp[0].arm, 106);
    assert_near(r.cmp[0].rel, gm_rel(a, b, 4));
    assert_int_equal(r.cmp[0].finding, ST_RULES_SUSPECT_BETTER);
    assert_has(r.reason, "beyond the 5.00% noise threshold but without the evidence");
    assert_has(r.reason, "repeats per side would resolve a 5.00% difference");
}

static void test_first_look_not_reached(void **state)
{
    (void)state;
    /* Two of at least three repeats, even at +20%: no look yet, more asked for. */
    static const double b[] = {100, 100, 100}, a[] = {120, 120};
    struct st_rules_metric m = {"tps", ST_RULES_HIGHER, ST_RULES_MEDIAN, 3, 10, 1, 0};
    struct st_rules_cfg cfg = {.noise = 0.05, .metrics = &m, .n_metrics = 1};
    struct st_rules_samples sb = {"tps", b, 3}, sa = {"tps", a, 2};
    struct st_rules_arm base = {"b", &sb, 1, NULL, 0}, arm = {"a", &sa, 1, NULL, 0};
    struct st_rules_result r;
    decide(&cfg, &base, &arm, &r);
    assert_int_equal(r.verdict, ST_RULES_INCONCLUSIVE);
    assert_int_equal(r.more, 1);
    assert_has(r.reason, "tps: 2 of at least 3 repeats per side, no look yet");
    /* A metric without samples on the arm's side: inconclusive, no error. */
    struct st_rules_arm none = {"a", NULL, 0, NULL, 0};
    decide(&cfg, &base, &none, &r);
    assert_int_equal(r.verdict, ST_RULES_INCONCLUSIVE);
    assert_has(r.reason, "tps: no samples (arm 0, baseline 3)");
    char err[128];
    cfg.noise = -0.01;
    assert_int_equal(st_rules_decide(&cfg, &base, &base, &r, err, sizeof(err)), ST_EUSAGE);
    cfg.noise = 0.05;
    m.min_n = 1;
    assert_int_equal(st_rules_decide(&cfg, &base, &base, &r, err, sizeof(err)), ST_EUSAGE);
    assert_has(err, "need 2 <= min <= max");
}

/* The arm's repeats a[0..n) against b[0..n) under looks 3..12; returns the result. */
static struct st_rules_result seq(const double *a, const double *b, size_t n, size_t family)
{
    struct st_rules_metric m = {"tps", ST_RULES_HIGHER, ST_RULES_MEDIAN, 3, 12, 1, 0};
    struct st_rules_cfg cfg = {
        .noise = 0.05, .alpha = 0.05, .metrics = &m, .n_metrics = 1, .designs = &designs};
    struct st_rules_samples sb = {"tps", b, n}, sa = {"tps", a, n};
    struct st_rules_arm base = {"b", &sb, 1, NULL, 0}, arm = {"a", &sa, 1, NULL, 0};
    struct st_rules_result r[2];
    char err[128];
    assert_int_equal(st_rules_decide_stage(&cfg, &base, &arm, 1, family, r, err, sizeof(err)), 0);
    return r[0];
}

static void test_sequential_looks(void **state)
{
    (void)state;
    /* +8% at CV ~1.5%: at n = 3 (df ~4) the evidence is short once the look is held to the
       sequential nominal level; at n = 6 it is there. */
    static const double b[] = {100, 102, 98, 101, 99, 100},
                        a[] = {108, 110.5, 106, 109, 107.2, 108.1};
    struct st_rules_result r3 = seq(a, b, 3, 1), r6 = seq(a, b, 6, 1);
    /* By hand: d, se, df at n = 3 from st_welch_log; the look's one-sided p is P(T > (d - log
       1.0125) / se), and its sequential p-value under looks 3..12 is larger than p itself. */
    struct st_welch w;
    assert_int_equal(st_welch_log(a, 3, b, 3, &w), 0);
    assert_true(r3.cmp[0].q_better > r3.cmp[0].p_better);
    assert_near(r3.cmp[0].rel, expm1(w.d));
    assert_int_equal(r3.verdict, ST_RULES_INCONCLUSIVE);
    assert_int_equal(r3.more, 1);
    assert_int_equal(r6.verdict, ST_RULES_PROMOTE);
    assert_int_equal(r6.more, 0);
    assert_true(r6.cmp[0].lo > 0.0125); /* the interval clears the margin (a quarter of 5%) */
    assert_has(r6.reason, "n=6 per side; Welch t on logs, sequential p");
    /* At the last look nothing more is asked even when undecided. */
    static const double bn[] = {100, 130, 80, 110, 95, 105, 120, 85, 100, 90, 115, 100},
                        an[] = {118, 90, 125, 104, 100, 130, 85, 112, 109, 97, 121, 102};
    struct st_rules_result r12 = seq(an, bn, 12, 1);
    assert_int_equal(r12.verdict, ST_RULES_INCONCLUSIVE);
    assert_int_equal(r12.more, 0);
    /* A wider family makes the same evidence weaker: the Holm level divides by the family. */
    struct st_rules_result f1 = seq(a, b, 6, 1), f4 = seq(a, b, 6, 4);
    assert_near(f1.cmp[0].holm_better, 0.025);
    assert_near(f4.cmp[0].holm_better, 0.025 / 4);
    assert_true(f4.cmp[0].level > f1.cmp[0].level);
}

static void test_holm_over_arms(void **state)
{
    (void)state;
    /* Two arms, one ranked metric, family 2, alpha 0.05: the "better" family's levels are 0.0125
       for the smaller sequential p-value and 0.025 for the other once the first is rejected. Arm
       1 is +20% without spread (q = 0), arm 2 +8% with spread: it is tested at 0.025. */
    static const double b[] = {100, 100, 100, 100}, a1[] = {120, 120, 120, 120},
                        a2[] = {108, 109, 107, 108.5};
    struct st_rules_metric m = {"tps", ST_RULES_HIGHER, ST_RULES_MEDIAN, 4, 4, 1, 0};
    struct st_rules_cfg cfg = {.noise = 0.05, .alpha = 0.05, .metrics = &m, .n_metrics = 1};
    struct st_rules_samples sb = {"tps", b, 4}, s1 = {"tps", a1, 4}, s2 = {"tps", a2, 4};
    struct st_rules_arm base = {"b", &sb, 1, NULL, 0};
    struct st_rules_arm arms[2] = {{"a1", &s1, 1, NULL, 0}, {"a2", &s2, 1, NULL, 0}};
    struct st_rules_result r[2];
    char err[128];
    assert_int_equal(st_rules_decide_stage(&cfg, &base, arms, 2, 2, r, err, sizeof(err)), 0);
    assert_int_equal(r[0].verdict, ST_RULES_PROMOTE);
    assert_near(r[0].cmp[0].holm_better, 0.0125);
    assert_near(r[1].cmp[0].holm_better, 0.025);
    assert_int_equal(r[1].verdict, ST_RULES_PROMOTE);
}

static void test_single_ranked(void **state)
{
    (void)state;
    /* samples: 1 on a ranked metric: the aggregates decide, the verdict says so. */
    static const double b[] = {100}, a[] = {110};
    struct st_rules_metric m = {"tps", ST_RULES_HIGHER, ST_RULES_MEDIAN, 2, 2, 1, 1};
    struct st_rules_cfg cfg = {.noise = 0.05, .metrics = &m, .n_metrics = 1};
    struct st_rules_samples sb = {"tps", b, 1}, sa = {"tps", a, 1};
    struct st_rules_arm base = {"b", &sb, 1, NULL, 0}, arm = {"a", &sa, 1, NULL, 0};
    struct st_rules_result r;
    decide(&cfg, &base, &arm, &r);
    assert_int_equal(r.verdict, ST_RULES_PROMOTE);
    assert_true(r.single);
    assert_has(r.reason, "rests on one sample");
}

static void test_composite_and_choice(void **state)
{
    (void)state;
    /* Weights 1 and 3; arm gains +10% and -2% (inside the noise): composite
       (1 * 0.10 + 3 * -0.02) / 4 = 0.01 (the gains of the geometric means: 110/100 and 1.02/1.0
       without spread), promoted on the first metric. */
    static const double b1[] = {100, 100, 100}, b2[] = {1.0, 1.0, 1.0}, a1[] = {110, 110, 110},
                        a2[] = {1.02, 1.02, 1.02};
    struct st_rules_metric m[] = {{"tps", ST_RULES_HIGHER, ST_RULES_MEDIAN, 3, 3, 1, 0},
                                  {"ttft_s", ST_RULES_LOWER, ST_RULES_MEDIAN, 3, 3, 3, 0}};
    struct st_rules_cfg cfg = {.noise = 0.05, .metrics = m, .n_metrics = 2};
    struct st_rules_samples sb[] = {{"tps", b1, 3}, {"ttft_s", b2, 3}};
    struct st_rules_samples sa[] = {{"tps", a1, 3}, {"ttft_s", a2, 3}};
    struct st_rules_arm base = {"b", sb, 2, NULL, 0}, arm = {"a", sa, 2, NULL, 0};
    struct st_rules_result r[4];
    decide(&cfg, &base, &arm, &r[0]);
    assert_int_equal(r[0].verdict, ST_RULES_PROMOTE);
    assert_near(r[0].composite, 0.01);
    /* The choice: the promoted arm with the highest composite > 0; a higher composite on a
       rejected or inconclusive arm does not count; a tie keeps the earlier arm. */
    memset(&r[1], 0, sizeof(r[1]) * 3);
    r[1].verdict = ST_RULES_REJECT;
    r[1].composite = 0.5;
    r[2].verdict = ST_RULES_PROMOTE;
    r[2].composite = 0.03;
    r[3].verdict = ST_RULES_PROMOTE;
    r[3].composite = 0.03;
    assert_int_equal(st_rules_choose(r, 4), 2);
    assert_int_equal(st_rules_choose(r, 2), 0);
    /* Nothing promoted (or a composite <= 0): the baseline stays. */
    r[0].composite = 0;
    assert_int_equal(st_rules_choose(r, 2), -1);
    assert_int_equal(st_rules_choose(r, 0), -1);
    assert_string_equal(st_rules_verdict_name(ST_RULES_INCONCLUSIVE), "inconclusive");
    assert_string_equal(st_rules_finding_name(ST_RULES_SUSPECT_WORSE), "suspect_worse");
}

static void test_escalation(void **state)
{
    (void)state;
    /* Four screened arms: promote (+3%), reject, inconclusive, promote (+8%). */
    struct st_rules_result r[4];
    memset(r, 0, sizeof(r));
    r[0].verdict = ST_RULES_PROMOTE;
    r[0].composite = 0.03;
    r[1].verdict = ST_RULES_REJECT;
    r[1].composite = 0.20;
    r[2].verdict = ST_RULES_INCONCLUSIVE;
    r[3].verdict = ST_RULES_PROMOTE;
    r[3].composite = 0.08;
    unsigned char go[4];
    assert_int_equal(st_rules_escalate(ST_RULES_ESCALATE_PROMOTED, r, 4, go), 2);
    assert_memory_equal(go, ((unsigned char[]){1, 0, 0, 1}), 4);
    assert_int_equal(st_rules_escalate(ST_RULES_ESCALATE_BEST, r, 4, go), 1);
    assert_memory_equal(go, ((unsigned char[]){0, 0, 0, 1}), 4);
    assert_int_equal(st_rules_escalate(ST_RULES_ESCALATE_ALL, r, 4, go), 3);
    assert_memory_equal(go, ((unsigned char[]){1, 0, 1, 1}), 4);
    /* Seed 000: nothing promoted in screening, so nothing escalates under best or promoted. */
    r[0].verdict = ST_RULES_INCONCLUSIVE;
    r[3].verdict = ST_RULES_REJECT;
    assert_int_equal(st_rules_escalate(ST_RULES_ESCALATE_BEST, r, 4, go), 0);
    assert_int_equal(st_rules_escalate(ST_RULES_ESCALATE_PROMOTED, r, 4, go), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed000_mtp3_inconclusive),
        cmocka_unit_test(test_seed000_mtp1_reject),
        cmocka_unit_test(test_seed000_batch1024_ttft_guard),
        cmocka_unit_test(test_seed000_mtp3_kv_guard),
        cmocka_unit_test(test_kv_floor_gate),
        cmocka_unit_test(test_failed_gate_without_samples),
        cmocka_unit_test(test_noise_edges),
        cmocka_unit_test(test_not_on_logs),
        cmocka_unit_test(test_guard_edge),
        cmocka_unit_test(test_median_reported_peak_not_enough),
        cmocka_unit_test(test_first_look_not_reached),
        cmocka_unit_test(test_sequential_looks),
        cmocka_unit_test(test_holm_over_arms),
        cmocka_unit_test(test_single_ranked),
        cmocka_unit_test(test_composite_and_choice),
        cmocka_unit_test(test_escalation),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    st_rules_designs_release(&designs);
    return rc;
}
