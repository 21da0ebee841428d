/*
 * Tests for src/stats/welch.c against hand computations (tests/data/stats/reference.py prints
 * them from its own Welch formula and its own t integral).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>

#include "stats/welch.h"

static void near_rel(double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol * fabs(want))) {
        fail_msg("got %.15g, want %.15g (relative tolerance %g)", got, want, tol);
    }
}

/* reference.py: a = {10, 11, 12}, b = {9, 9.5, 10}: d = 0.144761848881, se = 0.0608053656699,
 * df = 3.20132992066, p_above(0) = 0.0460526499969, p_above(log 1.01) = 0.0538630587442, the 95%
 * interval [-0.0420421914663, 0.331565889229]. */
static void test_three_per_side(void **state)
{
    (void)state;
    static const double a[] = {10, 11, 12}, b[] = {9, 9.5, 10};
    struct st_welch w;
    assert_int_equal(st_welch_log(a, 3, b, 3, &w), 0);
    near_rel(w.d, 0.144761848881, 1e-11);
    near_rel(w.se, 0.0608053656699, 1e-11);
    near_rel(w.df, 3.20132992066, 1e-11);
    near_rel(st_welch_p_above(&w, 0), 0.0460526499969, 1e-9);
    near_rel(st_welch_p_above(&w, log(1.01)), 0.0538630587442, 1e-9);
    near_rel(st_welch_p_below(&w, 0), 1 - 0.0460526499969, 1e-10);
    double lo, hi;
    st_welch_interval(&w, 0.025, &lo, &hi);
    near_rel(lo, -0.0420421914663, 1e-9);
    near_rel(hi, 0.331565889229, 1e-10);
}

/* Unequal sizes: a = {100, 103, 98, 101}, b = {95, 97, 96}: d = 0.0456847719085,
 * se = 0.0119783131812, df = 4.58237161146. */
static void test_unequal(void **state)
{
    (void)state;
    static const double a[] = {100, 103, 98, 101}, b[] = {95, 97, 96};
    struct st_welch w;
    assert_int_equal(st_welch_log(a, 4, b, 3, &w), 0);
    near_rel(w.d, 0.0456847719085, 1e-11);
    near_rel(w.se, 0.0119783131812, 1e-11);
    near_rel(w.df, 4.58237161146, 1e-11);
}

/* No spread: the comparison is exact. One side without spread: df is the other's n - 1. */
static void test_no_spread(void **state)
{
    (void)state;
    static const double a[] = {110, 110, 110}, b[] = {100, 100, 100}, c[] = {99, 100, 101};
    struct st_welch w;
    assert_int_equal(st_welch_log(a, 3, b, 3, &w), 0);
    assert_true(w.se == 0);
    assert_true(isinf(w.df));
    near_rel(w.d, log(1.1), 1e-14);
    assert_true(st_welch_p_above(&w, 0) == 0);
    assert_true(st_welch_p_above(&w, log(1.1)) == 1); /* exactly at theta0: not above it */
    assert_true(st_welch_p_below(&w, 0) == 1);
    double lo, hi;
    st_welch_interval(&w, 0.01, &lo, &hi);
    assert_true(lo == w.d && hi == w.d);
    assert_int_equal(st_welch_log(c, 3, b, 3, &w), 0);
    near_rel(w.df, 2, 1e-12);
}

static void test_refusals_and_cv(void **state)
{
    (void)state;
    static const double one[] = {5}, neg[] = {1, -1, 2}, ok[] = {1, 2, 3};
    struct st_welch w;
    assert_int_equal(st_welch_log(one, 1, ok, 3, &w), -ERANGE);
    assert_int_equal(st_welch_log(neg, 3, ok, 3, &w), ST_EPARSE);
    /* CV of {1, 2, 3}: sd 1 over mean 2. */
    near_rel(st_welch_cv(ok, 3), 0.5, 1e-15);
    assert_true(st_welch_cv(one, 1) == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_three_per_side),
        cmocka_unit_test(test_unequal),
        cmocka_unit_test(test_no_spread),
        cmocka_unit_test(test_refusals_and_cv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
