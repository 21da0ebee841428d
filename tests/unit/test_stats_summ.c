/*
 * Tests for src/stats/summ.c against hand-computed tables: odd and even counts, duplicates,
 * n = 1 and n = 0, negative values, MAD, nearest-rank quantiles. Every expected value below was
 * worked out by hand from the definitions in summ.h and hist.h.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "base/rng.h"
#include "stats/hist.h"
#include "stats/summ.h"

#define MAXV 16

static void assert_near(double got, double want)
{
    if (fabs(got - want) > 1e-12 * fmax(1.0, fabs(want))) {
        fail_msg("got %.17g, want %.17g", got, want);
    }
}

struct summ_case {
    size_t n;
    double v[MAXV];
    double min, max, mean, median, mad;
};

static const struct summ_case summ_cases[] = {
    /* n = 1: everything is the value, no spread. */
    {1, {5}, 5, 5, 5, 5, 0},
    /* Odd: sorted 1 2 3; deviations 1 0 1 -> sorted 0 1 1. */
    {3, {3, 1, 2}, 1, 3, 2, 2, 1},
    /* Even: sorted 1 2 3 4, median (2 + 3) / 2; deviations 1.5 0.5 0.5 1.5. */
    {4, {4, 1, 3, 2}, 1, 4, 2.5, 2.5, 1},
    /* Duplicates: median 7; deviations 0 0 0 6 0. */
    {5, {7, 7, 7, 1, 7}, 1, 7, 5.8, 7, 0},
    /* Even with equal middles: sorted 1 2 2 3; deviations 1 0 0 1 -> 0 0 1 1 -> 0.5. */
    {4, {3, 2, 1, 2}, 1, 3, 2, 2, 0.5},
    /* Negative: sorted -5 -3 -1 10, median -2, mean 1/4; deviations 3 1 1 12 -> 1 1 3 12. */
    {4, {-5, -1, -3, 10}, -5, 10, 0.25, -2, 2},
    /* All negative, odd: sorted -9 -4 -2 -1 -1, median -2; deviations 7 2 0 1 1 -> 0 1 1 2 7. */
    {5, {-1, -9, -2, -1, -4}, -9, -1, -3.4, -2, 1},
    /* The textbook MAD example: median 2; deviations 1 1 0 0 2 4 7 -> 0 0 1 1 2 4 7. */
    {7, {1, 1, 2, 2, 4, 6, 9}, 1, 9, 25.0 / 7, 2, 1},
    /* Two values: median is their mean; deviations 0.25 0.25. */
    {2, {1.5, 2.0}, 1.5, 2.0, 1.75, 1.75, 0.25},
    /* An outlier moves the mean, not the median or the MAD: deviations 1 0 1 1 996 -> 0 1 1 1. */
    {5, {10, 11, 12, 10, 1007}, 10, 1007, 210, 11, 1},
    /* Even count, even deviations count: sorted 1 2 4 8 16 32, median 6;
       deviations 5 4 2 2 10 26 -> 2 2 4 5 10 26 -> (4 + 5) / 2. */
    {6, {32, 1, 16, 2, 8, 4}, 1, 32, 63.0 / 6, 6, 4.5},
};

static void test_summ_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(summ_cases) / sizeof(summ_cases[0]); i++) {
        const struct summ_case *c = &summ_cases[i];
        double copy[MAXV];
        memcpy(copy, c->v, sizeof(copy));
        struct st_summ s;
        st_summ_compute(&s, copy, c->n);
        assert_int_equal(s.n, c->n);
        assert_near(s.min, c->min);
        assert_near(s.max, c->max);
        assert_near(s.mean, c->mean);
        assert_near(s.median, c->median);
        assert_near(s.mad, c->mad);
        /* The input is not modified. */
        assert_memory_equal(copy, c->v, sizeof(copy));
    }
}

static void test_summ_empty(void **state)
{
    (void)state;
    struct st_summ s;
    memset(&s, 0xff, sizeof(s));
    st_summ_compute(&s, NULL, 0);
    assert_int_equal(s.n, 0);
    assert_true(s.min == 0 && s.max == 0 && s.mean == 0 && s.median == 0 && s.mad == 0);
    assert_true(st_summ_quantile(NULL, 0, 0.5) == 0.0);
}

struct quantile_case {
    double q;
    double want;
};

/* 15 20 35 40 50: rank ceil(5q). */
static const double five[] = {50, 15, 40, 20, 35};
static const struct quantile_case five_cases[] = {
    {0.0, 15},  /* rank 0 -> 1, the minimum */
    {0.05, 15}, /* ceil(0.25) = 1 */
    {0.2, 15},  /* ceil(1.0) = 1 */
    {0.3, 20},  /* ceil(1.5) = 2 */
    {0.4, 20},  /* ceil(2.0) = 2 */
    {0.5, 35},  /* ceil(2.5) = 3 */
    {0.8, 40},  /* ceil(4.0) = 4 */
    {0.81, 50}, /* ceil(4.05) = 5 */
    {1.0, 50},
};

/* 3 6 7 8 8 10 13 15 16 20: rank ceil(10q). */
static const double ten[] = {20, 3, 16, 6, 15, 7, 13, 8, 10, 8};
static const struct quantile_case ten_cases[] = {
    {0.1, 3},   /* ceil(1.0) = 1 */
    {0.25, 7},  /* ceil(2.5) = 3 */
    {0.3, 7},   /* 0.3 * 10 is 3.0000000000000004 in doubles; rank 3, not 4 */
    {0.5, 8},   /* rank 5 */
    {0.6, 10},  /* rank 6 */
    {0.75, 15}, /* ceil(7.5) = 8 */
    {0.9, 16},  /* rank 9 */
    {0.99, 20}, /* ceil(9.9) = 10 */
};

/* Negative values: -7 -3 -2.5 0 4.5 6: rank ceil(6q). */
static const double neg[] = {0, -2.5, 6, -7, 4.5, -3};
static const struct quantile_case neg_cases[] = {
    {0.0, -7},    {0.1, -7}, /* ceil(0.6) = 1 */
    {0.34, -2.5},            /* ceil(2.04) = 3 */
    {0.5, -2.5},             /* rank 3 */
    {0.51, 0},               /* ceil(3.06) = 4 */
    {1.0, 6},
};

static void check_quantiles(const double *v, size_t n, const struct quantile_case *c, size_t nc)
{
    for (size_t i = 0; i < nc; i++) {
        double got = st_summ_quantile(v, n, c[i].q);
        if (got != c[i].want) {
            fail_msg("q %.3f: got %g, want %g", c[i].q, got, c[i].want);
        }
    }
}

static void test_quantile_table(void **state)
{
    (void)state;
    check_quantiles(five, 5, five_cases, sizeof(five_cases) / sizeof(five_cases[0]));
    check_quantiles(ten, 10, ten_cases, sizeof(ten_cases) / sizeof(ten_cases[0]));
    check_quantiles(neg, 6, neg_cases, sizeof(neg_cases) / sizeof(neg_cases[0]));
    /* n = 1: every quantile is the value. */
    const double one[] = {-4.25};
    assert_true(st_summ_quantile(one, 1, 0.0) == -4.25);
    assert_true(st_summ_quantile(one, 1, 0.5) == -4.25);
    assert_true(st_summ_quantile(one, 1, 1.0) == -4.25);
    /* Out-of-range q clamps to the ends. */
    assert_true(st_summ_quantile(five, 5, -0.5) == 15);
    assert_true(st_summ_quantile(five, 5, 1.5) == 50);
}

/* 1..100 in scrambled order: the k-th percentile is k exactly (0.07 * 100 rounds above 7). */
static void test_quantile_percentiles(void **state)
{
    (void)state;
    double v[100];
    for (int i = 0; i < 100; i++) {
        v[i] = (double)((i * 37) % 100 + 1);
    }
    for (int k = 1; k <= 100; k++) {
        assert_true(st_summ_quantile(v, 100, k / 100.0) == (double)k);
    }
}

/* The histogram and the exact quantile agree on small integers, where the histogram is exact. */
static void test_quantile_matches_hist(void **state)
{
    (void)state;
    struct st_rng r;
    st_rng_seed(&r, 5);
    enum { N = 999 };
    double v[N];
    struct st_hist h;
    st_hist_init(&h, 8);
    for (int i = 0; i < N; i++) {
        uint64_t x = st_rng_below(&r, 256);
        v[i] = (double)x;
        st_hist_record(&h, x);
    }
    for (int k = 0; k <= 1000; k++) {
        double q = k / 1000.0;
        assert_true(st_summ_quantile(v, N, q) == (double)st_hist_quantile(&h, q));
    }
    st_hist_release(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_summ_table),
        cmocka_unit_test(test_summ_empty),
        cmocka_unit_test(test_quantile_table),
        cmocka_unit_test(test_quantile_percentiles),
        cmocka_unit_test(test_quantile_matches_hist),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
