/*
 * Tests for src/sim/model/cost.c: properties of the step-cost model (monotone in every part of
 * the shape, chunk sums, PP pipelining, experts touched, acceptance formula) and golden tests
 * against the two seed reports, on the profiles in profiles/ with each arm applied through
 * st_profile_set: seed 000's decode speed per MTP step count and TTFTs per prefill batch, seed
 * 003's single-request decode per TP/PP/EAGLE arm at 128K, MTP losing at 128K and winning at 16K,
 * and the 512K prefill. Seed figures keep their order exactly and their magnitude within 15%.
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

#include "sim/model/cost.h"
#include "sim/model/profile.h"

#define CTX_128K 131072
#define TOL 0.15

/* ---- helpers ---- */

static void assert_near(const char *what, double got, double want, double tol)
{
    double rel = got / want - 1;
    if (fabs(rel) > tol) {
        fail_msg("%s: got %.6g, want %.6g within %.0f%% (off by %+.1f%%)", what, got, want,
                 tol * 100, rel * 100);
    }
}

/* Reads profiles/<file>, then applies the NULL-terminated "section.key=value" overrides. */
static void load(struct st_profile *p, const char *file, ...)
{
    const char *dir = getenv("ST_PROFILES_DIR");
    char path[1024], err[512] = "";
    static char text[1 << 16];
    snprintf(path, sizeof(path), "%s/%s", dir ? dir : "profiles", file);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fail_msg("cannot open %s (set ST_PROFILES_DIR)", path);
    }
    size_t n = fread(text, 1, sizeof(text), f);
    fclose(f);
    st_profile_defaults(p);
    if (st_profile_parse(p, text, n, path, err, sizeof(err)) != 0) {
        fail_msg("%s", err);
    }
    va_list ap;
    va_start(ap, file);
    for (const char *set = va_arg(ap, const char *); set; set = va_arg(ap, const char *)) {
        if (st_profile_set(p, set, err, sizeof(err)) != 0) {
            fail_msg("%s", err);
        }
    }
    va_end(ap);
    if (st_profile_validate(p, err, sizeof(err)) != 0) {
        fail_msg("%s", err);
    }
}

static double step_s(const struct st_cost *c, const struct st_step_shape *s)
{
    return (double)st_cost_step_ns(c, s) * 1e-9;
}

/* Decode tokens per second of each of n requests at context ctx, decoding together. */
static double tps_each(const struct st_cost *c, uint32_t n, uint64_t ctx)
{
    struct st_step_shape s = {.n_decode = n, .decode_ctx_sum = (uint64_t)n * ctx};
    if (c->p->engine.spec_method != ST_SPEC_NONE) {
        s.spec_tokens = c->p->engine.spec_steps;
    }
    return (1 + st_cost_expected_accepted(c, ctx)) / step_s(c, &s);
}

/* The seed-003 arms. */
#define SEED003 "seed003-mla-moe-8gpu.yaml"
#define ARM_A1 "engine.tp=2", "engine.pp=4", "engine.mem_fraction=0.85"
#define ARM_A3                                                                                     \
    "engine.tp=8", "engine.pp=1", "engine.mem_fraction=0.88", "engine.spec_method=eagle",          \
        "engine.spec_steps=4", "engine.spec_accept=[0.815, 0.815, 0.815, 0.815]",                  \
        "engine.spec_accept_halflife_tokens=0"
#define MTP3 "engine.spec_method=mtp", "engine.spec_steps=3"

/* ---- properties ---- */

static void test_shape_properties(void **state)
{
    (void)state;
    struct st_profile p;
    struct st_cost c;
    load(&p, "default.yaml", NULL);
    st_cost_init(&c, &p);
    struct st_step_shape none = {0};
    assert_int_equal(st_cost_step_ns(&c, &none), 0);
    struct st_step_shape one = {.n_decode = 1, .decode_ctx_sum = 1};
    assert_true(st_cost_step_ns(&c, &one) >= 1);

    /* More context, more requests, more prefill: never cheaper. */
    uint64_t last = 0;
    for (uint64_t ctx = 0; ctx <= 1u << 20; ctx = ctx ? ctx * 4 : 1) {
        struct st_step_shape s = {.n_decode = 4, .decode_ctx_sum = 4 * ctx};
        uint64_t ns = st_cost_step_ns(&c, &s);
        assert_true(ns >= last);
        last = ns;
    }
    last = 0;
    for (uint32_t n = 1; n <= 512; n *= 2) {
        struct st_step_shape s = {.n_decode = n, .decode_ctx_sum = (uint64_t)n * 4096};
        uint64_t ns = st_cost_step_ns(&c, &s);
        assert_true(ns >= last);
        last = ns;
    }
    last = 0;
    for (uint64_t t = 1; t <= 65536; t *= 4) {
        struct st_step_shape s = {
            .n_prefill = 1, .prefill_tokens = t, .prefill_pairs = t * t / 2.0};
        uint64_t ns = st_cost_step_ns(&c, &s);
        assert_true(ns >= last);
        last = ns;
    }
    /* Batch-1 decode of a dense model is memory-bound: about weights / bandwidth. */
    double weights = p.model.params_total * p.model.weight_bytes;
    double floor_s = weights / (p.hw.hbm_bytes_per_s * p.hw.eff_mem);
    assert_near("default decode step", 1 / st_cost_decode_tps(&c, 0), floor_s, 0.01);
    /* No TP, no PP: no communication. */
    assert_true(c.allreduce_s_per_token == 0 && c.allreduce_latency_s == 0);
    assert_true(c.pp_send_s_per_token == 0);
    assert_true(c.draft_pass_s == 0);
}

static void test_prefill_chunks(void **state)
{
    (void)state;
    struct st_profile p;
    struct st_cost c;
    load(&p, "default.yaml", "engine.max_batched_tokens=1000", NULL);
    st_cost_init(&c, &p);
    assert_true(st_cost_prefill_s(&c, 500, 0) == 0);
    /* pp = 1: the chunk steps one after another. */
    double sum = 0;
    for (uint64_t done = 0; done < 2500; done += 1000) {
        uint64_t chunk = 2500 - done < 1000 ? 2500 - done : 1000;
        struct st_step_shape s = {.n_prefill = 1,
                                  .prefill_tokens = chunk,
                                  .prefill_pairs = chunk * (300.0 + done + chunk / 2.0)};
        sum += step_s(&c, &s);
    }
    assert_near("chunk sum", st_cost_prefill_s(&c, 300, 2500), sum, 1e-6);
    /* Cached tokens cost attention only: more cached, slower, but far below recomputing. */
    assert_true(st_cost_prefill_s(&c, 20000, 2500) > st_cost_prefill_s(&c, 0, 2500));
    assert_true(st_cost_prefill_s(&c, 20000, 2500) < st_cost_prefill_s(&c, 0, 22500));
    /* PP: chunks of one request flow through the stages as a pipeline. */
    load(&p, SEED003, NULL);
    st_cost_init(&c, &p);
    double piped = st_cost_prefill_s(&c, 0, 65536);
    double serial = 0;
    for (uint64_t done = 0; done < 65536; done += 8192) {
        struct st_step_shape s = {
            .n_prefill = 1, .prefill_tokens = 8192, .prefill_pairs = 8192 * (done + 4096.0)};
        serial += step_s(&c, &s);
    }
    assert_true(piped < serial * 0.6);
    assert_true(piped > serial / 2);
}

static void test_experts_touched(void **state)
{
    (void)state;
    struct st_profile p;
    struct st_cost c;
    load(&p, SEED003, NULL);
    st_cost_init(&c, &p);
    /* One token reads its 8 experts; a verify of 4 tokens reads about 4 times as many; a big
     * batch reads every expert once. */
    assert_near("one token's experts", c.expert_read_s_per_token * 256 / 8, c.expert_read_max_s,
                0.02);
    struct st_step_shape s1 = {.n_decode = 1, .decode_ctx_sum = 1000};
    struct st_step_shape s4 = s1;
    s4.spec_tokens = 3;
    double extra = step_s(&c, &s4) - step_s(&c, &s1);
    assert_true(extra >= 3 * 2 * c.expert_read_s_per_token); /* two stages */
    struct st_step_shape big = {.n_decode = 4096, .decode_ctx_sum = 4096};
    struct st_step_shape bigger = {.n_decode = 8192, .decode_ctx_sum = 8192};
    assert_true(step_s(&c, &bigger) < 2 * step_s(&c, &big));
}

static void test_acceptance(void **state)
{
    (void)state;
    struct st_profile p;
    struct st_cost c;
    load(&p, "seed000-vl-mtp.yaml", "engine.spec_steps=3", "engine.graph_sizes=[1, 4]", NULL);
    st_cost_init(&c, &p);
    double a = 0.853, b = 0.625, d = 0.636;
    assert_near("expected accepted", st_cost_expected_accepted(&c, 0), a + a * b + a * b * d,
                1e-12);
    /* Halflife: every position's probability halves at ctx = halflife. */
    load(&p, SEED003, MTP3, NULL);
    st_cost_init(&c, &p);
    assert_near("decayed", st_cost_accept_prob(&c, 0, 165000), 0.49, 1e-9);
    assert_true(st_cost_accept_prob(&c, 9, 0) == 0);
    load(&p, SEED003, NULL);
    st_cost_init(&c, &p);
    assert_true(st_cost_expected_accepted(&c, 0) == 0);
}

/* ---- seed 000 ---- */

static void test_seed000_decode(void **state)
{
    (void)state;
    /* Medians of code / Chinese / reasoning, 2048-token outputs; their means per step count. */
    static const double want[] = {(109.63 + 112.61 + 108.28) / 3, (123.72 + 128.75 + 122.11) / 3,
                                  (123.55 + 134.24 + 123.53) / 3};
    static const char *graphs[] = {"engine.graph_sizes=[1, 2]", "engine.graph_sizes=[1, 3]",
                                   "engine.graph_sizes=[1, 4]"};
    char steps[64];
    double tps[3];
    for (uint32_t k = 1; k <= 3; k++) {
        struct st_profile p;
        struct st_cost c;
        snprintf(steps, sizeof(steps), "engine.spec_steps=%u", k);
        load(&p, "seed000-vl-mtp.yaml", steps, graphs[k - 1], NULL);
        st_cost_init(&c, &p);
        tps[k - 1] = st_cost_decode_tps(&c, 1024);
        assert_near("seed 000 decode tok/s", tps[k - 1], want[k - 1], TOL);
    }
    /* MTP 1 clearly slower; MTP 3 within the 5% noise threshold of MTP 2. */
    assert_true(tps[0] < tps[1] * 0.95);
    assert_true(fabs(tps[2] / tps[1] - 1) < 0.05);
}

static void test_seed000_ttft(void **state)
{
    (void)state;
    /* Stagings (the seed gives no token counts): a 125,000-token first retrieval; the same
     * prefix again with 3,500 uncached tokens after 121,500 cached; 115,000 tokens of long text
     * and an image. */
    static const struct {
        const char *what;
        uint64_t cached, n;
        double at2048, at1024;
    } cases[] = {
        {"near-128K first retrieval", 0, 125000, 14.426, 17.993},
        {"same prefix again", 121500, 3500, 0.702, 0.854},
        {"long text + image", 0, 115000, 12.815, 15.955},
    };
    struct st_profile p2, p1;
    struct st_cost c2, c1;
    load(&p2, "seed000-vl-mtp.yaml", NULL);
    load(&p1, "seed000-vl-mtp.yaml", "engine.max_batched_tokens=1024", NULL);
    st_cost_init(&c2, &p2);
    st_cost_init(&c1, &p1);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        double t2 = st_cost_prefill_s(&c2, cases[i].cached, cases[i].n);
        double t1 = st_cost_prefill_s(&c1, cases[i].cached, cases[i].n);
        char what[128];
        snprintf(what, sizeof(what), "seed 000 TTFT %s, batch 2048", cases[i].what);
        assert_near(what, t2, cases[i].at2048, TOL);
        snprintf(what, sizeof(what), "seed 000 TTFT %s, batch 1024", cases[i].what);
        assert_near(what, t1, cases[i].at1024, TOL);
        /* Batch 1024 is slower every time, by about the seed's 22-25%. */
        assert_true(t1 > t2);
        snprintf(what, sizeof(what), "seed 000 TTFT slowdown %s", cases[i].what);
        assert_near(what, t1 / t2, cases[i].at1024 / cases[i].at2048, TOL);
    }
}

/* ---- seed 003 ---- */

static void test_seed003_decode_arms(void **state)
{
    (void)state;
    struct st_profile p;
    struct st_cost a1, a6, a3;
    /* Capacity probe, two concurrent distinct 128K documents: per-request decode speed. */
    load(&p, SEED003, ARM_A1, NULL);
    struct st_profile pa1 = p;
    st_cost_init(&a1, &pa1);
    load(&p, SEED003, NULL);
    struct st_profile pa6 = p;
    st_cost_init(&a6, &pa6);
    load(&p, SEED003, ARM_A3, NULL);
    struct st_profile pa3 = p;
    st_cost_init(&a3, &pa3);
    double t1 = tps_each(&a1, 2, CTX_128K), t6 = tps_each(&a6, 2, CTX_128K),
           t3 = tps_each(&a3, 2, CTX_128K);
    assert_near("seed 003 A1 TP2PP4 cap cc2 decode", t1, 18.4, TOL);
    assert_near("seed 003 A6 TP4PP2 cap cc2 decode", t6, 31.5, TOL);
    assert_near("seed 003 A3 TP8+EAGLE cap cc2 decode", t3, 44.7, TOL);
    assert_true(t3 > t6 && t6 > t1);
    assert_near("seed 003 EAGLE accept length at 128K",
                1 + st_cost_expected_accepted(&a3, CTX_128K), 3.46, TOL);
}

static void test_seed003_mtp_long_context(void **state)
{
    (void)state;
    struct st_profile pn, pm;
    struct st_cost plain, mtp;
    load(&pn, SEED003, ARM_A1, NULL);
    load(&pm, SEED003, ARM_A1, MTP3, NULL);
    st_cost_init(&plain, &pn);
    st_cost_init(&mtp, &pm);
    /* 128K: accept 2.07, single request 14.9 tok/s against 20.7 without speculation. */
    assert_near("seed 003 MTP accept length at 128K", 1 + st_cost_expected_accepted(&mtp, CTX_128K),
                2.07, TOL);
    double n128 = st_cost_decode_tps(&plain, CTX_128K), m128 = st_cost_decode_tps(&mtp, CTX_128K);
    assert_near("seed 003 no-spec decode at 128K", n128, 20.7, TOL);
    assert_near("seed 003 MTP decode at 128K", m128, 14.9, TOL);
    assert_true(m128 < n128);
    /* Break-even accept length: the MTP step over the plain step (seed: about 2.87). */
    struct st_step_shape s1 = {.n_decode = 1, .decode_ctx_sum = CTX_128K}, s4 = s1;
    s4.spec_tokens = 3;
    assert_near("seed 003 MTP break-even at 128K", step_s(&mtp, &s4) / step_s(&plain, &s1), 2.87,
                TOL);
    /* 16K: accept 3.5+, and speculation wins. */
    assert_true(1 + st_cost_expected_accepted(&mtp, 16384) >= 3.5);
    assert_true(st_cost_decode_tps(&mtp, 16384) > 1.5 * st_cost_decode_tps(&plain, 16384));
}

static void test_seed003_512k(void **state)
{
    (void)state;
    struct st_profile p1, p6, p3;
    struct st_cost a1, a6, a3;
    load(&p1, SEED003, ARM_A1, NULL);
    load(&p6, SEED003, NULL);
    load(&p3, SEED003, ARM_A3, NULL);
    st_cost_init(&a1, &p1);
    st_cost_init(&a6, &p6);
    st_cost_init(&a3, &p3);
    /* One 512K request with a 512-token answer, alone. */
    double ttft6 = st_cost_prefill_s(&a6, 0, 524288);
    double total6 = ttft6 + 512 / st_cost_decode_tps(&a6, 524288);
    double total1 = st_cost_prefill_s(&a1, 0, 524288) + 512 / st_cost_decode_tps(&a1, 524288);
    assert_near("seed 003 A6 512K TTFT", ttft6, 135.8, TOL);
    assert_near("seed 003 A6 512K total", total6, 151.9, TOL);
    assert_near("seed 003 A1 512K total", total1, 114.4, TOL);
    /* PP4's four-stage prefill pipeline beats PP2 on one huge request. */
    assert_true(total1 < total6);
    /* A3's pool cannot hold it at all. */
    assert_true(a3.m.kv_pool_tokens < 524288);
}

static void test_seed003_hit90_cc1(void **state)
{
    (void)state;
    struct st_profile p;
    struct st_cost c;
    load(&p, SEED003, NULL);
    st_cost_init(&c, &p);
    /* One request at a time: 117,968 shared-prefix tokens cached, 13,107 new, 512 out. */
    double ttft = st_cost_prefill_s(&c, 117968, 13107);
    double out_tps = 512 / (ttft + 512 / st_cost_decode_tps(&c, CTX_128K));
    assert_near("seed 003 A6 hit90 cc1 output throughput", out_tps, 28.8, TOL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape_properties),    cmocka_unit_test(test_prefill_chunks),
        cmocka_unit_test(test_experts_touched),     cmocka_unit_test(test_acceptance),
        cmocka_unit_test(test_seed000_decode),      cmocka_unit_test(test_seed000_ttft),
        cmocka_unit_test(test_seed003_decode_arms), cmocka_unit_test(test_seed003_mtp_long_context),
        cmocka_unit_test(test_seed003_512k),        cmocka_unit_test(test_seed003_hit90_cc1),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
