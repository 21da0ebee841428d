/*
 * Tests for src/stats/holm.c against hand-worked step-downs.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>

#include "stats/holm.h"

static void test_step_down(void **state)
{
    (void)state;
    /* m = 4, alpha 0.05: sorted 0.01 (<= 0.0125, reject), 0.015 (<= 0.05/3 = 0.01667, reject),
     * 0.03 (> 0.025: stop), 0.04 (kept). Bonferroni (0.0125) would reject only the first. */
    static const double p[] = {0.03, 0.01, 0.04, 0.015};
    unsigned char rej[4];
    double lv[4];
    assert_int_equal(st_holm(p, 4, 0.05, rej, lv), 2);
    assert_memory_equal(rej, ((unsigned char[]){0, 1, 0, 1}), 4);
    assert_true(fabs(lv[1] - 0.0125) < 1e-15);
    assert_true(fabs(lv[3] - 0.05 / 3) < 1e-15);
    assert_true(fabs(lv[0] - 0.025) < 1e-15);
    assert_true(fabs(lv[2] - 0.025) < 1e-15); /* behind the stop: the level it would face */
    /* The first fails: nothing is rejected, whatever comes after. */
    static const double q[] = {0.02, 0.001};
    assert_int_equal(st_holm(q, 2, 0.001, rej, NULL), 0);
    /* Ties and NaN (counted as 1). */
    static const double t[] = {0.01, NAN, 0.01};
    assert_int_equal(st_holm(t, 3, 0.05, rej, lv), 2);
    assert_int_equal(rej[1], 0);
    assert_int_equal(st_holm(NULL, 0, 0.05, rej, lv), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step_down),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
