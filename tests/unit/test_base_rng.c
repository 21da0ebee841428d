/*
 * Tests for src/base/rng.c: reference outputs (computed independently from the published
 * splitmix64 and xoshiro256** definitions), determinism, st_rng_below bounds and uniformity,
 * st_rng_unit range, st_rng_exp mean. Fixed seeds, so every statistical check is deterministic;
 * the tolerances are still set wide enough that they would pass for almost any seed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>

#include "base/rng.h"

static void test_reference_values(void **state)
{
    (void)state;
    /* splitmix64 from 0 gives the well-known e220a8397b1dcdaf 6e789e6aa1b965f4 ... */
    static const uint64_t seed0[] = {0x99ec5f36cb75f2b4ull, 0xbf6e1f784956452aull,
                                     0x1a5f849d4933e6e0ull, 0x6aa594f1262d2d2cull,
                                     0xbba5ad4a1f842e59ull};
    static const uint64_t seed42[] = {0x15780b2e0c2ec716ull, 0x6104d9866d113a7eull,
                                      0xae17533239e499a1ull, 0xecb8ad4703b360a1ull,
                                      0xfde6dc7fe2ec5e64ull};
    struct st_rng r;
    st_rng_seed(&r, 0);
    assert_int_equal(r.s[0], 0xe220a8397b1dcdafull);
    assert_int_equal(r.s[3], 0xf88bb8a8724c81ecull);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(st_rng_u64(&r), seed0[i]);
    }
    st_rng_seed(&r, 42);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(st_rng_u64(&r), seed42[i]);
    }
}

static void test_same_seed_same_sequence(void **state)
{
    (void)state;
    struct st_rng a, b, c;
    st_rng_seed(&a, 12345);
    st_rng_seed(&b, 12345);
    st_rng_seed(&c, 12346);
    int differ = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = st_rng_u64(&a);
        assert_int_equal(x, st_rng_u64(&b));
        differ += x != st_rng_u64(&c);
    }
    assert_true(differ > 990);
    /* Every derived draw is a function of the state alone. */
    st_rng_seed(&a, 7);
    st_rng_seed(&b, 7);
    for (int i = 0; i < 100; i++) {
        assert_true(st_rng_unit(&a) == st_rng_unit(&b));
        assert_int_equal(st_rng_below(&a, 1000), st_rng_below(&b, 1000));
        assert_true(st_rng_exp(&a, 3.0) == st_rng_exp(&b, 3.0));
    }
}

static void test_unit_range(void **state)
{
    (void)state;
    struct st_rng r;
    st_rng_seed(&r, 3);
    double lo = 1, hi = 0, sum = 0;
    for (int i = 0; i < 100000; i++) {
        double u = st_rng_unit(&r);
        assert_true(u >= 0.0 && u < 1.0);
        lo = u < lo ? u : lo;
        hi = u > hi ? u : hi;
        sum += u;
    }
    assert_true(lo < 1e-3 && hi > 1 - 1e-3);
    /* Mean 1/2, standard error 0.29 / sqrt(1e5) = 0.0009. */
    assert_true(fabs(sum / 100000 - 0.5) < 0.005);
}

static void test_below_bounds(void **state)
{
    (void)state;
    static const uint64_t ns[] = {
        1, 2, 3, 7, 10, 1000, (1ull << 32) + 1, (1ull << 63) + 1, UINT64_MAX - 1, UINT64_MAX,
    };
    struct st_rng r;
    st_rng_seed(&r, 11);
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
        uint64_t hi = 0;
        for (int k = 0; k < 2000; k++) {
            uint64_t x = st_rng_below(&r, ns[i]);
            assert_true(x < ns[i]);
            hi = x > hi ? x : hi;
        }
        /* The top half of the range is reached (n = 1 only ever gives 0). */
        assert_true(ns[i] == 1 ? hi == 0 : hi >= ns[i] / 2);
    }
}

static void test_below_uniform(void **state)
{
    (void)state;
    enum { K = 10, DRAWS = 100000 };
    uint64_t counts[K] = {0};
    struct st_rng r;
    st_rng_seed(&r, 2024);
    for (int i = 0; i < DRAWS; i++) {
        counts[st_rng_below(&r, K)]++;
    }
    double chi2 = 0;
    for (int k = 0; k < K; k++) {
        double d = (double)counts[k] - DRAWS / K;
        chi2 += d * d / (DRAWS / K);
    }
    /* 9 degrees of freedom: P(chi2 > 27.88) = 0.001. */
    assert_true(chi2 < 27.88);
    /* A range just over 2^63 rejects almost half the raw draws; halves stay even. */
    uint64_t n = (1ull << 63) + 1, low = 0;
    for (int i = 0; i < DRAWS; i++) {
        low += st_rng_below(&r, n) < n / 2;
    }
    assert_true(fabs((double)low / DRAWS - 0.5) < 0.01);
}

static void test_exp_mean(void **state)
{
    (void)state;
    enum { DRAWS = 100000 };
    static const double means[] = {0.001, 1.0, 2.5, 1e9};
    struct st_rng r;
    st_rng_seed(&r, 77);
    for (size_t m = 0; m < sizeof(means) / sizeof(means[0]); m++) {
        double sum = 0, sumsq = 0;
        for (int i = 0; i < DRAWS; i++) {
            double x = st_rng_exp(&r, means[m]);
            assert_true(isfinite(x) && x >= 0.0);
            sum += x;
            sumsq += x * x;
        }
        double mean = sum / DRAWS;
        /* Standard error of the mean is mean / sqrt(1e5) = 0.32%; allow 5 of them. */
        assert_true(fabs(mean / means[m] - 1.0) < 0.016);
        /* An exponential has variance mean^2, so E[x^2] = 2 mean^2. */
        assert_true(fabs(sumsq / DRAWS / (2 * means[m] * means[m]) - 1.0) < 0.05);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_values), cmocka_unit_test(test_same_seed_same_sequence),
        cmocka_unit_test(test_unit_range),       cmocka_unit_test(test_below_bounds),
        cmocka_unit_test(test_below_uniform),    cmocka_unit_test(test_exp_mean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
