/*
 * Tests for src/stats/dist.c: Student t and normal tails and quantiles against values computed
 * independently (tests/data/stats/reference.py: adaptive Simpson integration of the t density and
 * bisection on it; math.erfc for the normal), against closed forms (df 1: Cauchy, df 2), and
 * round trips far into the tails.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>

#include "stats/dist.h"

static void near_rel(double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol * fabs(want))) {
        fail_msg("got %.15g, want %.15g (relative tolerance %g)", got, want, tol);
    }
}

/* reference.py's "t quantiles" block. */
static void test_t_quantiles(void **state)
{
    (void)state;
    static const struct {
        double q, df, want;
    } c[] = {
        {0.025, 1, 12.7062047362},  {0.025, 2, 4.30265272975},  {0.025, 4, 2.7764451052},
        {0.025, 10, 2.22813885199}, {0.05, 5, 2.01504837333},   {0.005, 3, 5.84090930973},
        {0.025, 4.5, 2.6589123472}, {1e-6, 3.3, 73.7907597166}, {0.2, 7, 0.896029644314},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        near_rel(st_dist_t_isf(c[i].q, c[i].df), c[i].want, 1e-10);
        /* The lower quantile is the mirror image. */
        near_rel(st_dist_t_isf(1 - c[i].q, c[i].df), -c[i].want, 1e-9);
    }
}

/* reference.py's "t tails" block, and closed forms: df 1 is Cauchy (sf = 1/2 - atan(x)/pi), df 2
 * has sf = (1 - x / sqrt(2 + x^2)) / 2. */
static void test_t_tails(void **state)
{
    (void)state;
    near_rel(st_dist_t_sf(2.0, 3), 0.0696629842794, 1e-10);
    near_rel(st_dist_t_sf(0.5, 1), 0.35241638235, 1e-10);
    near_rel(st_dist_t_sf(10.0, 2.5), 0.00222074788365, 1e-10);
    near_rel(st_dist_t_sf(3.7, 17.2), 0.000874077260091, 1e-10);
    for (double x = -30; x <= 30; x += 0.37) {
        near_rel(st_dist_t_sf(x, 1), 0.5 - atan(x) / M_PI, 1e-12);
        near_rel(st_dist_t_sf(x, 2), 0.5 * (1 - x / sqrt(2 + x * x)), 1e-12);
        near_rel(st_dist_t_cdf(x, 7) + st_dist_t_sf(x, 7), 1, 1e-14);
    }
    /* Far tails keep their relative precision: round trips at 1e-200. */
    for (double df = 1.5; df < 100; df *= 1.7) {
        double t = st_dist_t_isf(1e-200, df);
        near_rel(st_dist_t_sf(t, df), 1e-200, 1e-9);
    }
    assert_true(st_dist_t_sf(INFINITY, 3) == 0);
    assert_true(isnan(st_dist_t_sf(1, 0)));
    assert_true(isnan(st_dist_t_isf(1.5, 3)));
    assert_true(st_dist_t_isf(0, 3) == INFINITY);
    /* df = infinity is the normal. */
    near_rel(st_dist_t_sf(1.3, INFINITY), st_dist_norm_sf(1.3), 1e-15);
    /* Large df approaches it. */
    near_rel(st_dist_t_isf(0.025, 1e7), 1.95996398454, 1e-6);
}

/* reference.py's "normal quantiles" block; Phi(1) from tables: 0.8413447460685. */
static void test_normal(void **state)
{
    (void)state;
    near_rel(st_dist_norm_isf(0.025), 1.95996398454, 1e-11);
    near_rel(st_dist_norm_isf(0.005), 2.57582930355, 1e-11);
    near_rel(st_dist_norm_isf(1e-10), 6.3613409024, 1e-10);
    near_rel(st_dist_norm_isf(0.3), 0.524400512708, 1e-11);
    near_rel(st_dist_norm_cdf(1), 0.8413447460685, 1e-12);
    for (double q = 1e-300; q < 0.5; q *= 7.3) {
        near_rel(st_dist_norm_sf(st_dist_norm_isf(q)), q, 1e-11);
    }
    assert_true(st_dist_norm_isf(0.5) == 0);
    assert_true(st_dist_norm_isf(0) == INFINITY);
    assert_true(st_dist_norm_isf(1) == -INFINITY);
}

/* I_x(a, b) closed forms: I_x(1, 1) = x, I_x(a, 1) = x^a, I_x(1, b) = 1 - (1 - x)^b. */
static void test_ibeta(void **state)
{
    (void)state;
    for (double x = 0.01; x < 1; x += 0.07) {
        near_rel(st_dist_ibeta(x, 1, 1), x, 1e-13);
        near_rel(st_dist_ibeta(x, 3.5, 1), pow(x, 3.5), 1e-12);
        near_rel(st_dist_ibeta(x, 1, 2.25), 1 - pow(1 - x, 2.25), 1e-12);
        near_rel(st_dist_ibeta(x, 2.5, 4) + st_dist_ibeta(1 - x, 4, 2.5), 1, 1e-13);
    }
    assert_true(st_dist_ibeta(0, 2, 3) == 0);
    assert_true(st_dist_ibeta(1, 2, 3) == 1);
    assert_true(isnan(st_dist_ibeta(0.5, 0, 1)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_t_quantiles),
        cmocka_unit_test(test_t_tails),
        cmocka_unit_test(test_normal),
        cmocka_unit_test(test_ibeta),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
