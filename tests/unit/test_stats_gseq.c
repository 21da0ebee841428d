/*
 * Tests for src/stats/gseq.c: Pocock's constants from the literature (Pocock 1977, Table 1;
 * Jennison and Turnbull 2000, Table 2.1: K equally spaced looks, one-sided 0.025), crossing
 * probabilities against Monte Carlo (tests/data/stats/reference.py, 1e6 Brownian paths), the
 * table against the integration, the sequential p-value's round trip, and a single look.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>

#include "stats/dist.h"
#include "stats/gseq.h"

/* The c with cross(c) = alpha for looks at info 1..k, by bisection on the integration. */
static double pocock(size_t k, double alpha)
{
    double info[16];
    for (size_t i = 0; i < k; i++) {
        info[i] = (double)(i + 1);
    }
    double lo = 1, hi = 5;
    for (int it = 0; it < 60; it++) {
        double mid = 0.5 * (lo + hi);
        if (st_gseq_cross_info(info, k, mid) >= alpha) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return 0.5 * (lo + hi);
}

static void test_pocock_constants(void **state)
{
    (void)state;
    /* K: 1 1.960, 2 2.178, 3 2.289, 4 2.361, 5 2.413, 10 2.555 (printed to 3 decimals). */
    static const struct {
        size_t k;
        double c;
    } t[] = {{1, 1.960}, {2, 2.178}, {3, 2.289}, {4, 2.361}, {5, 2.413}, {10, 2.555}};
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        double c = pocock(t[i].k, 0.025);
        if (fabs(c - t[i].c) > 0.0006) {
            fail_msg("K=%zu: c %.5f, the table's %.3f", t[i].k, c, t[i].c);
        }
    }
}

static void test_monte_carlo(void **state)
{
    (void)state;
    /* reference.py: looks 1..5 at c 2.413: 0.02509 +- 0.00016; looks 3..10 at c 2.44:
     * 0.02516 +- 0.00016. Within three Monte Carlo standard errors. */
    static const double i5[] = {1, 2, 3, 4, 5}, i8[] = {3, 4, 5, 6, 7, 8, 9, 10};
    assert_true(fabs(st_gseq_cross_info(i5, 5, 2.413) - 0.02509) < 3 * 0.00016);
    assert_true(fabs(st_gseq_cross_info(i8, 8, 2.44) - 0.02516) < 3 * 0.00016);
}

static void test_table_and_boundary(void **state)
{
    (void)state;
    struct st_gseq g;
    assert_int_equal(st_gseq_init(&g, 3, 12), 0);
    double info[10];
    for (int i = 0; i < 10; i++) {
        info[i] = 3 + i;
    }
    for (double c = -1.5; c < 7.5; c += 0.173) {
        double exact = st_gseq_cross_info(info, 10, c), tab = st_gseq_cross(&g, c);
        if (fabs(tab - exact) > 1e-6 * exact) {
            fail_msg("c %.3f: table %.10g, integration %.10g", c, tab, exact);
        }
    }
    /* The boundary and the nominal level invert cross; more looks need a higher boundary than
     * one look, lower than Bonferroni's. */
    for (double a = 1e-4; a < 0.3; a *= 2.9) {
        double c = st_gseq_boundary(&g, a);
        assert_true(fabs(st_gseq_cross(&g, c) - a) < 1e-9 * a);
        double nu = st_gseq_nominal(&g, a);
        assert_true(nu < a && nu > a / 10);
        /* The sequential p-value of a look at the nominal level is alpha. */
        assert_true(fabs(st_gseq_seq_p(&g, nu) - a) < 1e-7 * a);
    }
    assert_true(st_gseq_seq_p(&g, 0) == 0);
    assert_true(st_gseq_seq_p(&g, 1) == 1);
    st_gseq_release(&g);
    /* One look: the nominal level is alpha itself. */
    assert_int_equal(st_gseq_init(&g, 5, 5), 0);
    assert_true(fabs(st_gseq_nominal(&g, 0.025) - 0.025) < 1e-12);
    assert_true(fabs(st_gseq_seq_p(&g, 0.013) - 0.013) < 1e-12);
    st_gseq_release(&g);
    assert_int_equal(st_gseq_init(&g, 1, 5), -ERANGE);
    assert_int_equal(st_gseq_init(&g, 5, 4), -ERANGE);
    assert_int_equal(st_gseq_init(&g, 2, 2 + ST_GSEQ_MAX_LOOKS), -ERANGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pocock_constants),
        cmocka_unit_test(test_monte_carlo),
        cmocka_unit_test(test_table_and_boundary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
