/*
 * Unit tests of the open-loop arrival schedules (src/engine/sched.c): determinism per seed,
 * constant spacing, Poisson mean rate and gap dispersion, and that splitting the schedule over
 * workers partitions it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/clock.h"
#include "engine/sched.h"

static void test_constant(void **state)
{
    (void)state;
    struct st_sched s;
    st_sched_init(&s, ST_ARRIVAL_CONSTANT, 4.0, 7);
    for (uint64_t i = 0; i < 100; i++) {
        assert_int_equal(s.next_idx, i);
        assert_int_equal(st_sched_next(&s), i * 250 * ST_NS_PER_MS);
    }
}

static void test_poisson_deterministic(void **state)
{
    (void)state;
    struct st_sched a, b, c;
    st_sched_init(&a, ST_ARRIVAL_POISSON, 10.0, 42);
    st_sched_init(&b, ST_ARRIVAL_POISSON, 10.0, 42);
    st_sched_init(&c, ST_ARRIVAL_POISSON, 10.0, 43);
    int differ = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = st_sched_next(&a);
        assert_int_equal(x, st_sched_next(&b));
        differ |= x != st_sched_next(&c);
    }
    assert_true(differ);
}

static void test_poisson_rate_and_cv(void **state)
{
    (void)state;
    struct st_sched s;
    st_sched_init(&s, ST_ARRIVAL_POISSON, 100.0, 1);
    const int n = 100000;
    uint64_t prev = st_sched_next(&s);
    double sum = 0, sumsq = 0;
    for (int i = 1; i < n; i++) {
        uint64_t t = st_sched_next(&s);
        assert_true(t >= prev);
        double g = (double)(t - prev) / 1e6; /* ms */
        sum += g;
        sumsq += g * g;
        prev = t;
    }
    double mean = sum / (n - 1);
    double var = sumsq / (n - 1) - mean * mean;
    /* Exponential gaps: mean 10 ms, coefficient of variation 1. */
    assert_true(mean > 9.8 && mean < 10.2);
    double cv = var > 0 ? __builtin_sqrt(var) / mean : 0;
    assert_true(cv > 0.97 && cv < 1.03);
}

static void test_workers_see_one_schedule(void **state)
{
    (void)state;
    /* Each of 3 workers walks the same schedule and keeps idx % 3 == w: together they see every
     * arrival exactly once, at the same offsets as a single walker. */
    struct st_sched one, w[3];
    st_sched_init(&one, ST_ARRIVAL_POISSON, 50.0, 9);
    for (int i = 0; i < 3; i++) {
        st_sched_init(&w[i], ST_ARRIVAL_POISSON, 50.0, 9);
    }
    for (uint64_t idx = 0; idx < 300; idx++) {
        uint64_t t = st_sched_next(&one);
        for (int i = 0; i < 3; i++) {
            uint64_t ti = st_sched_next(&w[i]);
            assert_int_equal(ti, t);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_constant),
        cmocka_unit_test(test_poisson_deterministic),
        cmocka_unit_test(test_poisson_rate_and_cv),
        cmocka_unit_test(test_workers_see_one_schedule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
