/*
 * Tests for src/campaign/rules.c against hand-computed tables: seed 000's step-count and batch
 * screenings (MTP 3 inconclusive at +4.26%, MTP 1 rejected at -12.54%, batch 1024 rejected by the
 * TTFT guard at +24.73%), both sides of the noise threshold for each direction, the guard edge,
 * medians of even counts, gates (outcomes and limits), short repeats, missing metrics, the
 * composite and the final choice. Every expected number is worked out in the comments.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "campaign/rules.h"

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
    {"decode2048.decode_tps@code", ST_RULES_HIGHER, ST_RULES_MEDIAN, 3, 1},
    {"decode2048.decode_tps@chinese", ST_RULES_HIGHER, ST_RULES_MEDIAN, 3, 1},
    {"decode2048.decode_tps@reasoning", ST_RULES_HIGHER, ST_RULES_MEDIAN, 3, 1},
};

static const struct st_rules_guard seed_guards[] = {
    {"long128k.ttft_s", ST_RULES_LOWER, ST_RULES_MEDIAN, 0.10},
    {"long128k_repeat.ttft_s", ST_RULES_LOWER, ST_RULES_MEDIAN, 0.10},
    {"text_image.ttft_s", ST_RULES_LOWER, ST_RULES_MEDIAN, 0.10},
};

static const struct st_rules_limit seed_limits[] = {
    {"kv_floor", "server.kv_capacity_tokens", ST_RULES_MEDIAN, 1, 0, 131072, 0},
};

static const struct st_rules_cfg seed_cfg = {
    0.05, seed_metrics, 3, seed_guards, 3, seed_limits, 1,
};

/* Repeats around each median of the seed's table (the middle value is the table's). */
static const double b_code[] = {123.1, 123.72, 124.0}, b_zh[] = {128.75, 127.9, 129.3},
                    b_rs[] = {122.5, 121.0, 122.11};
static const double m3_code[] = {123.55, 123.6, 122.9}, m3_zh[] = {133.8, 134.24, 135.0},
                    m3_rs[] = {123.53, 123.2, 124.1};
static const double m1_code[] = {109.63, 109.1, 110.2}, m1_zh[] = {112.0, 112.61, 113.4},
                    m1_rs[] = {108.28, 108.9, 107.5};
static const double b_ttft1[] = {14.426}, b_ttft2[] = {0.702}, b_ttft3[] = {12.815};
static const double c_ttft1[] = {17.993}, c_ttft2[] = {0.854}, c_ttft3[] = {15.955};
static const double kv_mtp2[] = {146622}, kv_mtp1[] = {159669}, kv_mtp3[] = {137414},
                    kv_b1024[] = {155509};

static const struct st_rules_samples base_s[] = {
    {"decode2048.decode_tps@code", b_code, 3},    {"decode2048.decode_tps@chinese", b_zh, 3},
    {"decode2048.decode_tps@reasoning", b_rs, 3}, {"long128k.ttft_s", b_ttft1, 1},
    {"long128k_repeat.ttft_s", b_ttft2, 1},       {"text_image.ttft_s", b_ttft3, 1},
    {"server.kv_capacity_tokens", kv_mtp2, 1},
};
static const struct st_rules_samples mtp3_s[] = {
    {"decode2048.decode_tps@code", m3_code, 3},    {"decode2048.decode_tps@chinese", m3_zh, 3},
    {"decode2048.decode_tps@reasoning", m3_rs, 3}, {"long128k.ttft_s", b_ttft1, 1},
    {"long128k_repeat.ttft_s", b_ttft2, 1},        {"text_image.ttft_s", b_ttft3, 1},
    {"server.kv_capacity_tokens", kv_mtp3, 1},
};
static const struct st_rules_samples mtp1_s[] = {
    {"decode2048.decode_tps@code", m1_code, 3},    {"decode2048.decode_tps@chinese", m1_zh, 3},
    {"decode2048.decode_tps@reasoning", m1_rs, 3}, {"long128k.ttft_s", b_ttft1, 1},
    {"long128k_repeat.ttft_s", b_ttft2, 1},        {"text_image.ttft_s", b_ttft3, 1},
    {"server.kv_capacity_tokens", kv_mtp1, 1},
};
/* Batch 1024: decode unchanged (the baseline's repeats), TTFT 22-25% slower, KV +6.1%. */
static const struct st_rules_samples b1024_s[] = {
    {"decode2048.decode_tps@code", b_code, 3},    {"decode2048.decode_tps@chinese", b_zh, 3},
    {"decode2048.decode_tps@reasoning", b_rs, 3}, {"long128k.ttft_s", c_ttft1, 1},
    {"long128k_repeat.ttft_s", c_ttft2, 1},       {"text_image.ttft_s", c_ttft3, 1},
    {"server.kv_capacity_tokens", kv_b1024, 1},
};

static const struct st_rules_gate all_pass[] = {
    {"functional", 1, NULL},
    {"quality", 1, NULL},
    {"oom", 1, NULL},
    {"server_exit", 1, NULL},
};

static const struct st_rules_arm seed_base = {"mtp2", base_s, 7, NULL, 0};

static void decide(const struct st_rules_cfg *cfg, const struct st_rules_arm *base,
                   const struct st_rules_arm *arm, struct st_rules_result *r)
{
    char err[256] = "";
    int rc = st_rules_decide(cfg, base, arm, r, err, sizeof(err));
    if (rc != 0) {
        fail_msg("st_rules_decide: %d %s", rc, err);
    }
}

static void test_seed000_mtp3_inconclusive(void **state)
{
    (void)state;
    struct st_rules_arm a = {"mtp3", mtp3_s, 7, all_pass, 4};
    struct st_rules_result r;
    decide(&seed_cfg, &seed_base, &a, &r);
    /* code 123.55/123.72 - 1 = -0.137%; chinese 134.24/128.75 - 1 = +4.264%;
       reasoning 123.53/122.11 - 1 = +1.163%: all inside 5%. */
    assert_int_equal(r.verdict, ST_RULES_INCONCLUSIVE);
    assert_int_equal(r.n_cmp, 3);
    assert_near(r.cmp[0].rel, 123.55 / 123.72 - 1);
    assert_near(r.cmp[1].rel, 134.24 / 128.75 - 1);
    assert_near(r.cmp[2].rel, 123.53 / 122.11 - 1);
    assert_int_equal(r.cmp[1].sig, 0);
    assert_has(r.reason, "decode2048.decode_tps@chinese 134.24 vs baseline 128.75, +4.26%");
    assert_has(r.reason, "baseline stays");
    /* Composite: the mean of the three gains (weights 1). */
    assert_near(r.composite,
                ((123.55 / 123.72 - 1) + (134.24 / 128.75 - 1) + (123.53 / 122.11 - 1)) / 3);
}

static void test_seed000_mtp1_reject(void **state)
{
    (void)state;
    struct st_rules_arm a = {"mtp1", mtp1_s, 7, all_pass, 4};
    struct st_rules_result r;
    decide(&seed_cfg, &seed_base, &a, &r);
    /* -11.39%, -12.54%, -11.33%: the worst (chinese) is named. */
    assert_int_equal(r.verdict, ST_RULES_REJECT);
    assert_has(r.reason, "decode2048.decode_tps@chinese: 112.61 vs baseline 128.75 (-12.54%)");
    assert_has(r.reason, "5.00% noise threshold");
}

static void test_seed000_batch1024_ttft_guard(void **state)
{
    (void)state;
    struct st_rules_arm a = {"batch1024", b1024_s, 7, all_pass, 4};
    struct st_rules_result r;
    decide(&seed_cfg, &seed_base, &a, &r);
    /* 17.993 / 14.426 - 1 = +24.73%, over the 10% guard. */
    assert_int_equal(r.verdict, ST_RULES_REJECT);
    assert_has(r.reason, "guard long128k.ttft_s: 17.993 vs baseline 14.426 (+24.73%)");
    assert_has(r.reason, "more than 10.00%");
    /* The comparisons are still there for the report: decode unchanged. */
    assert_int_equal(r.n_cmp, 3);
    assert_near(r.cmp[0].rel, 0);
}

static void test_seed000_mtp3_kv_guard(void **state)
{
    (void)state;
    /* "Fewer cached tokens": 137414 / 146622 - 1 = -6.28%. A 10% guard lets MTP 3 through to the
       noise rule (inconclusive); a 5% guard rejects it first. */
    struct st_rules_guard g[4];
    memcpy(g, seed_guards, sizeof(seed_guards));
    g[3] = (struct st_rules_guard){"server.kv_capacity_tokens", ST_RULES_HIGHER, ST_RULES_MEDIAN,
                                   0.10};
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
    assert_has(r.reason, "guard server.kv_capacity_tokens: 137414 vs baseline 146622 (-6.28%), "
                         "worse by more than 5.00%");
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
    assert_has(
        r.reason,
        "gate kv_floor failed: server.kv_capacity_tokens = 137414, below the minimum 140000");
    /* A maximum (no queueing at cc4: queued <= 0). */
    static const double q[] = {1};
    struct st_rules_samples s = {"cap.queued@cc4", q, 1};
    struct st_rules_limit nq = {"no_queue_cc4", "cap.queued@cc4", ST_RULES_MAX, 0, 1, 0, 0};
    struct st_rules_cfg c2 = {0.05, NULL, 0, NULL, 0, &nq, 1};
    struct st_rules_arm a2 = {"a6", &s, 1, NULL, 0};
    decide(&c2, &a2, &a2, &r);
    assert_int_equal(r.verdict, ST_RULES_REJECT);
    assert_has(r.reason, "gate no_queue_cc4 failed: cap.queued@cc4 = 1, above the maximum 0");
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
    /* An arm that ran out of memory has no samples: the gate decides, no ST_ENOTFOUND. */
    static const struct st_rules_gate g[] = {{"oom", 1, NULL},
                                             {"server_exit", 0, "exit status 137 at 00:41"}};
    struct st_rules_arm a = {"mtp4", NULL, 0, g, 2};
    struct st_rules_result r;
    decide(&seed_cfg, &seed_base, &a, &r);
    assert_int_equal(r.verdict, ST_RULES_REJECT);
    assert_string_equal(r.reason, "gate server_exit failed: exit status 137 at 00:41");
}

/* ---- threshold edges: one metric, baseline 100 (higher) or 2.0 (lower), noise 5% ---- */

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
    /* Baseline 0: any increase is an infinite gain. */
    {ST_RULES_HIGHER, 0, 1, ST_RULES_PROMOTE},
    {ST_RULES_HIGHER, 0, 0, ST_RULES_INCONCLUSIVE},
};

static void test_noise_edges(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
        const struct edge_case *e = &edges[i];
        struct st_rules_metric m = {"x", e->dir, ST_RULES_MEDIAN, 1, 1};
        struct st_rules_cfg cfg = {0.05, &m, 1, NULL, 0, NULL, 0};
        struct st_rules_samples sb = {"x", &e->base, 1}, sa = {"x", &e->arm, 1};
        struct st_rules_arm b = {"b", &sb, 1, NULL, 0}, a = {"a", &sa, 1, NULL, 0};
        struct st_rules_result r;
        decide(&cfg, &b, &a, &r);
        if (r.verdict != e->want) {
            fail_msg("case %zu: %g -> %g: %s, want %s (%s)", i, e->base, e->arm,
                     st_rules_verdict_name(r.verdict), st_rules_verdict_name(e->want), r.reason);
        }
    }
}

static void test_guard_edge(void **state)
{
    (void)state;
    /* TTFT 10 -> 11 is exactly 10% worse: passes a 10% guard; 11.01 fails it. */
    static const double b = 10, a_edge = 11, a_over = 11.01;
    struct st_rules_guard g = {"ttft_s", ST_RULES_LOWER, ST_RULES_MEDIAN, 0.10};
    struct st_rules_cfg cfg = {0.05, NULL, 0, &g, 1, NULL, 0};
    struct st_rules_samples sb = {"ttft_s", &b, 1}, s1 = {"ttft_s", &a_edge, 1},
                            s2 = {"ttft_s", &a_over, 1};
    struct st_rules_arm base = {"b", &sb, 1, NULL, 0}, a1 = {"a1", &s1, 1, NULL, 0},
                        a2 = {"a2", &s2, 1, NULL, 0};
    struct st_rules_result r;
    decide(&cfg, &base, &a1, &r);
    assert_int_equal(r.verdict, ST_RULES_INCONCLUSIVE);
    decide(&cfg, &base, &a2, &r);
    assert_int_equal(r.verdict, ST_RULES_REJECT);
    assert_has(r.reason, "guard ttft_s: 11.01 vs baseline 10 (+10.10%)");
}

static void test_even_median(void **state)
{
    (void)state;
    /* Baseline {100, 100, 100, 100}: 100. Arm {200, 100, 108, 104}: sorted 100 104 108 200,
       median (104 + 108) / 2 = 106 (+6%, promote); the mean 128 would say +28%. */
    static const double b[] = {100, 100, 100, 100}, a[] = {200, 100, 108, 104};
    assert_near(st_rules_aggregate(ST_RULES_MEDIAN, a, 4), 106);
    assert_near(st_rules_aggregate(ST_RULES_MEAN, a, 4), 128);
    assert_near(st_rules_aggregate(ST_RULES_MIN, a, 4), 100);
    assert_near(st_rules_aggregate(ST_RULES_MAX, a, 4), 200);
    struct st_rules_metric m = {"tps", ST_RULES_HIGHER, ST_RULES_MEDIAN, 4, 1};
    struct st_rules_cfg cfg = {0.05, &m, 1, NULL, 0, NULL, 0};
    struct st_rules_samples sb = {"tps", b, 4}, sa = {"tps", a, 4};
    struct st_rules_arm base = {"b", &sb, 1, NULL, 0}, arm = {"a", &sa, 1, NULL, 0};
    struct st_rules_result r;
    decide(&cfg, &base, &arm, &r);
    assert_int_equal(r.verdict, ST_RULES_PROMOTE);
    assert_near(r.cmp[0].arm, 106);
    assert_near(r.cmp[0].rel, 0.06);
    assert_has(r.reason, "tps: 106 vs baseline 100 (+6.00%), better beyond the 5.00%");
    /* Arm {104, 100, 105, 200}: median (104 + 105) / 2 = 104.5, inside 5%. */
    static const double a2[] = {104, 100, 105, 200};
    sa.v = a2;
    decide(&cfg, &base, &arm, &r);
    assert_int_equal(r.verdict, ST_RULES_INCONCLUSIVE);
    assert_near(r.cmp[0].arm, 104.5);
}

static void test_short_repeats(void **state)
{
    (void)state;
    /* Two of three repeats, even at +20%: not enough evidence. */
    static const double b[] = {100, 100, 100}, a[] = {120, 120};
    struct st_rules_metric m = {"tps", ST_RULES_HIGHER, ST_RULES_MEDIAN, 3, 1};
    struct st_rules_cfg cfg = {0.05, &m, 1, NULL, 0, NULL, 0};
    struct st_rules_samples sb = {"tps", b, 3}, sa = {"tps", a, 2};
    struct st_rules_arm base = {"b", &sb, 1, NULL, 0}, arm = {"a", &sa, 1, NULL, 0};
    struct st_rules_result r;
    decide(&cfg, &base, &arm, &r);
    assert_int_equal(r.verdict, ST_RULES_INCONCLUSIVE);
    assert_has(r.reason, "tps: 2 and 3 samples (arm, baseline), 3 required");
}

static void test_missing_metric(void **state)
{
    (void)state;
    static const double b[] = {100};
    struct st_rules_metric m = {"tps", ST_RULES_HIGHER, ST_RULES_MEDIAN, 0, 1};
    struct st_rules_cfg cfg = {0.05, &m, 1, NULL, 0, NULL, 0};
    struct st_rules_samples sb = {"tps", b, 1};
    struct st_rules_arm base = {"b", &sb, 1, NULL, 0}, arm = {"a", NULL, 0, NULL, 0};
    struct st_rules_result r;
    char err[128];
    assert_int_equal(st_rules_decide(&cfg, &base, &arm, &r, err, sizeof(err)), ST_ENOTFOUND);
    assert_string_equal(err, "arm a has no samples of metric tps");
    cfg.noise = -0.01;
    assert_int_equal(st_rules_decide(&cfg, &base, &base, &r, err, sizeof(err)), ST_EUSAGE);
}

static void test_composite_and_choice(void **state)
{
    (void)state;
    /* Weights 1 and 3; arm gains +10% and -2% (inside the noise): composite
       (1 * 0.10 + 3 * -0.02) / 4 = 0.01, promoted on the first metric. */
    static const double b1[] = {100}, b2[] = {1.0}, a1[] = {110}, a2[] = {1.02};
    struct st_rules_metric m[] = {{"tps", ST_RULES_HIGHER, ST_RULES_MEDIAN, 0, 1},
                                  {"ttft_s", ST_RULES_LOWER, ST_RULES_MEDIAN, 0, 3}};
    struct st_rules_cfg cfg = {0.05, m, 2, NULL, 0, NULL, 0};
    struct st_rules_samples sb[] = {{"tps", b1, 1}, {"ttft_s", b2, 1}};
    struct st_rules_samples sa[] = {{"tps", a1, 1}, {"ttft_s", a2, 1}};
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
        cmocka_unit_test(test_guard_edge),
        cmocka_unit_test(test_even_median),
        cmocka_unit_test(test_short_repeats),
        cmocka_unit_test(test_missing_metric),
        cmocka_unit_test(test_composite_and_choice),
        cmocka_unit_test(test_escalation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
