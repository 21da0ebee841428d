/*
 * Tests for src/base/num.c, strict number parsing: whole text only, limits at both ends,
 * overflow refused (never wrapped), no space, hex, inf or nan, a sign only on signed forms, and
 * the prefix form.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "base/num.h"

static void test_u64(void **state)
{
    (void)state;
    uint64_t v = 7;
    assert_int_equal(st_num_u64z("0", 10, &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(st_num_u64z("18446744073709551615", UINT64_MAX, &v), 0);
    assert_true(v == UINT64_MAX);
    v = 7;
    assert_int_equal(st_num_u64z("18446744073709551616", UINT64_MAX, &v), ST_EPARSE);
    assert_int_equal(st_num_u64z("99999999999999999999999", UINT64_MAX, &v), ST_EPARSE);
    assert_int_equal(st_num_u64z("11", 10, &v), ST_EPARSE);
    assert_int_equal(v, 7);
    assert_int_equal(st_num_u64z("10", 10, &v), 0);
    assert_int_equal(v, 10);
    const char *bad[] = {"", " 1", "1 ", "+1", "-1", "0x10", "1.0", "1e3", "a", NULL};
    for (int i = 0; bad[i]; i++) {
        assert_int_equal(st_num_u64z(bad[i], UINT64_MAX, &v), ST_EPARSE);
    }
    assert_int_equal(st_num_u64z(NULL, UINT64_MAX, &v), ST_EPARSE);
    /* Length-bounded: the bytes after n are not read. */
    assert_int_equal(st_num_u64("123xyz", 3, 1000, &v), 0);
    assert_int_equal(v, 123);
}

static void test_prefix(void **state)
{
    (void)state;
    uint64_t v = 0;
    const char *end = NULL;
    const char *s = "42,cap=3";
    assert_int_equal(st_num_u64_prefix(s, UINT64_MAX, &end, &v), 0);
    assert_int_equal(v, 42);
    assert_ptr_equal(end, s + 2);
    assert_int_equal(st_num_u64_prefix(",1", UINT64_MAX, &end, &v), ST_EPARSE);
    assert_int_equal(st_num_u64_prefix("100000000000000000000", UINT64_MAX, &end, &v), ST_EPARSE);
    assert_int_equal(st_num_u64_prefix("5", 4, &end, &v), ST_EPARSE);
}

static void test_i64(void **state)
{
    (void)state;
    int64_t v = 0;
    assert_int_equal(st_num_i64z("-9223372036854775808", INT64_MIN, INT64_MAX, &v), 0);
    assert_true(v == INT64_MIN);
    assert_int_equal(st_num_i64z("9223372036854775807", INT64_MIN, INT64_MAX, &v), 0);
    assert_true(v == INT64_MAX);
    assert_int_equal(st_num_i64z("9223372036854775808", INT64_MIN, INT64_MAX, &v), ST_EPARSE);
    assert_int_equal(st_num_i64z("-9223372036854775809", INT64_MIN, INT64_MAX, &v), ST_EPARSE);
    assert_int_equal(st_num_i64z("-3", -2, 2, &v), ST_EPARSE);
    assert_int_equal(st_num_i64z("-2", -2, 2, &v), 0);
    assert_int_equal(v, -2);
    const char *bad[] = {"", "-", "+", "--1", "+-1", " 1", "1-", NULL};
    assert_int_equal(st_num_i64z("+5", -5, 5, &v), 0);
    assert_int_equal(v, 5);
    for (int i = 0; bad[i]; i++) {
        assert_int_equal(st_num_i64z(bad[i], INT64_MIN, INT64_MAX, &v), ST_EPARSE);
    }
}

static void test_f64(void **state)
{
    (void)state;
    double v = 0;
    const char *good[] = {"0", "1.5", "-2", ".5", "5.", "1e3", "2.5E-2", "1e+2", NULL};
    const double want[] = {0, 1.5, -2, 0.5, 5, 1000, 0.025, 100};
    for (int i = 0; good[i]; i++) {
        assert_int_equal(st_num_f64z(good[i], -1e9, 1e9, &v), 0);
        assert_true(v == want[i]);
    }
    const char *bad[] = {"",   ".",   "-",   "e3",  "1e",    "1e+", "1..2",  "1.2.3", " 1",
                         "1 ", "+-1", "inf", "nan", "0x1p3", "1,5", "1e400", NULL};
    for (int i = 0; bad[i]; i++) {
        assert_int_equal(st_num_f64z(bad[i], -1e308, 1e308, &v), ST_EPARSE);
    }
    assert_int_equal(st_num_f64z("2", 0, 1, &v), ST_EPARSE);
    assert_int_equal(st_num_f64z("-0.1", 0, 1, &v), ST_EPARSE);
    char big[200];
    memset(big, '1', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(st_num_f64z(big, -1e308, 1e308, &v), ST_EPARSE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_u64),
        cmocka_unit_test(test_prefix),
        cmocka_unit_test(test_i64),
        cmocka_unit_test(test_f64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
