/*
 * Tests for src/cli/args.c: each parser accepts exactly the values in its range and rejects the
 * rest (signs, blanks, trailing bytes, overflow, NaN and infinities, NULL) with ST_EUSAGE and a
 * message naming the option, the range and the value; a rejected value leaves *out alone; a
 * message longer than the caller's buffer is cut, never overrun.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "base/status.h"
#include "cli/args.h"

static void test_u64(void **state)
{
    (void)state;
    char err[128];
    uint64_t v = 7;
    assert_int_equal(st_arg_u64("--n", "0", 0, 10, &v, err, sizeof(err)), 0);
    assert_int_equal(v, 0);
    assert_int_equal(st_arg_u64("--n", "10", 0, 10, &v, err, sizeof(err)), 0);
    assert_int_equal(v, 10);
    assert_int_equal(st_arg_u64("--n", "18446744073709551615", 0, UINT64_MAX, &v, err, sizeof(err)),
                     0);
    assert_true(v == UINT64_MAX);
    const char *bad[] = {"11", "-1", "+1", " 1", "1 ", "1x", "", "0x10", "18446744073709551616"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = 7;
        assert_int_equal(st_arg_u64("--n", bad[i], 0, 10, &v, err, sizeof(err)), ST_EUSAGE);
        assert_int_equal(v, 7);
        assert_non_null(strstr(err, "--n: expected an integer from 0 to 10"));
    }
    assert_int_equal(st_arg_u64("--n", NULL, 0, 10, &v, err, sizeof(err)), ST_EUSAGE);
    assert_string_equal(err, "--n: expected an integer from 0 to 10, got ''");
    assert_int_equal(st_arg_u64("--n", "5", 6, 10, &v, err, sizeof(err)), ST_EUSAGE);
    assert_string_equal(err, "--n: expected an integer from 6 to 10, got '5'");
}

static void test_i64(void **state)
{
    (void)state;
    char err[128];
    int64_t v = 7;
    assert_int_equal(st_arg_i64("--d", "-5", -5, 5, &v, err, sizeof(err)), 0);
    assert_int_equal(v, -5);
    assert_int_equal(st_arg_i64("--d", "+5", -5, 5, &v, err, sizeof(err)), 0);
    assert_int_equal(v, 5);
    assert_int_equal(
        st_arg_i64("--d", "-9223372036854775808", INT64_MIN, INT64_MAX, &v, err, sizeof(err)), 0);
    assert_true(v == INT64_MIN);
    const char *bad[] = {"-6", "6", "", "1.5", "9223372036854775808", "--1", "5 "};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = 7;
        assert_int_equal(st_arg_i64("--d", bad[i], -5, 5, &v, err, sizeof(err)), ST_EUSAGE);
        assert_int_equal(v, 7);
        assert_non_null(strstr(err, "--d: expected an integer from -5 to 5, got '"));
    }
}

static void test_f64(void **state)
{
    (void)state;
    char err[128];
    double v = 7;
    assert_int_equal(st_arg_f64("--rate", "0.5", 0, 1, &v, err, sizeof(err)), 0);
    assert_true(v == 0.5);
    assert_int_equal(st_arg_f64("--rate", "1e0", 0, 1, &v, err, sizeof(err)), 0);
    assert_true(v == 1.0);
    const char *bad[] = {"1.0001", "-0.1", "nan", "inf", "-inf", "", "0.5s", "1e999", " "};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = 7;
        assert_int_equal(st_arg_f64("--rate", bad[i], 0, 1, &v, err, sizeof(err)), ST_EUSAGE);
        assert_true(v == 7);
        assert_non_null(strstr(err, "--rate: expected a number from 0 to 1, got '"));
    }
    /* Infinite bounds do not let an infinite value through. */
    assert_int_equal(st_arg_f64("--x", "inf", -1e308, 1e308, &v, err, sizeof(err)), ST_EUSAGE);
}

static void test_choice(void **state)
{
    (void)state;
    const char *const modes[] = {"closed", "open", "sweep", NULL};
    char err[128];
    int i = -1;
    assert_int_equal(st_arg_choice("--mode", "closed", modes, &i, err, sizeof(err)), 0);
    assert_int_equal(i, 0);
    assert_int_equal(st_arg_choice("--mode", "sweep", modes, &i, err, sizeof(err)), 0);
    assert_int_equal(i, 2);
    i = -1;
    assert_int_equal(st_arg_choice("--mode", "Open", modes, &i, err, sizeof(err)), ST_EUSAGE);
    assert_int_equal(i, -1);
    assert_string_equal(err, "--mode: expected one of closed, open, sweep; got 'Open'");
    assert_int_equal(st_arg_choice("--mode", NULL, modes, &i, err, sizeof(err)), ST_EUSAGE);
    assert_string_equal(err, "--mode: expected one of closed, open, sweep; got ''");
}

static void test_short_buffers(void **state)
{
    (void)state;
    const char *const modes[] = {"closed", "open", "sweep", NULL};
    char err[16];
    for (size_t len = 1; len <= sizeof(err); len++) {
        int i = -1;
        memset(err, 'x', sizeof(err));
        assert_int_equal(st_arg_choice("--mode", "nope", modes, &i, err, len), ST_EUSAGE);
        assert_true(memchr(err, '\0', len) != NULL);
        for (size_t k = len; k < sizeof(err); k++) {
            assert_int_equal(err[k], 'x');
        }
        uint64_t v = 0;
        memset(err, 'x', sizeof(err));
        assert_int_equal(st_arg_u64("--n", "nope", 0, 1, &v, err, len), ST_EUSAGE);
        assert_true(memchr(err, '\0', len) != NULL);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_u64),           cmocka_unit_test(test_i64),
        cmocka_unit_test(test_f64),           cmocka_unit_test(test_choice),
        cmocka_unit_test(test_short_buffers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
