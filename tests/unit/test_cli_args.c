/*
 * Tests for src/cli/args.c: each parser accepts exactly the values in its range and rejects the
 * rest (signs, blanks, trailing bytes, overflow, NaN and infinities, NULL) with ST_EUSAGE and a
 * message naming the option, the range and the value; a rejected value leaves *out alone; a
 * message longer than the caller's buffer is cut, never overrun. The option rows (st_opt_apply)
 * store each kind at its destination's width, mark given and mark, refuse before reading the
 * value, name an alias by its label, and leave the destination alone on a bad value.
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

static int calls;

static int count_fn(const struct st_opt *opt, const char *v, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    calls++;
    *(const char **)opt->to.ctx = v;
    return opt->set;
}

static void test_opt_rows(void **state)
{
    (void)state;
    char err[128];
    int flag = 5, given = 0, k = -1;
    const char *s = NULL, *mark = NULL, *seen = NULL;
    uint32_t u32 = 7;
    uint64_t u64 = 7;
    size_t size = 7;
    int64_t i64 = 7;
    double f64 = 7;
    static const char *const modes[] = {"a", "b", NULL};
    static const int values[] = {10, 20};
    struct st_opt rows[] = {
        {ST_OPT_FLAG("--off", &flag, 0), .given = &given, .mark = &mark},
        {ST_OPT_STR("--s", &s)},
        {ST_OPT_U32("--u32", &u32, 1, 1000)},
        {ST_OPT_U64("--u64", &u64, 0, UINT64_MAX)},
        {ST_OPT_SIZE("--size", &size, 1024, 1u << 30)},
        {ST_OPT_I64("--i64", &i64, -5, 5)},
        {ST_OPT_F64("--f64", &f64, 0.5, 2), .word = "max", .word_f64 = 1e9},
        {ST_OPT_CHOICE("--mode", &k, modes, values)},
        {ST_OPT_FN("--fn", count_fn, &seen)},
        {ST_OPT_U64("--alias", &u64, 0, 9), .label = "--u64"},
        {ST_OPT_STR("--no", &s), .refuse = "--no does not apply"},
        {.flag = NULL},
    };
    assert_int_equal(st_opt_count(rows), 11);
    assert_ptr_equal(st_opt_find(rows, "--mode"), &rows[7]);
    assert_null(st_opt_find(rows, "--mod"));
    assert_int_equal(st_opt_apply(&rows[0], NULL, err, sizeof(err)), 0);
    assert_int_equal(flag, 0);
    assert_int_equal(given, 1);
    assert_string_equal(mark, "--off");
    assert_int_equal(st_opt_apply(&rows[1], "x", err, sizeof(err)), 0);
    assert_string_equal(s, "x");
    assert_int_equal(st_opt_apply(&rows[2], "1000", err, sizeof(err)), 0);
    assert_int_equal(u32, 1000);
    assert_int_equal(st_opt_apply(&rows[2], "1001", err, sizeof(err)), ST_EUSAGE);
    assert_int_equal(u32, 1000);
    assert_string_equal(err, "--u32: expected an integer from 1 to 1000, got '1001'");
    assert_int_equal(st_opt_apply(&rows[3], "18446744073709551615", err, sizeof(err)), 0);
    assert_true(u64 == UINT64_MAX);
    assert_int_equal(st_opt_apply(&rows[4], "2048", err, sizeof(err)), 0);
    assert_int_equal(size, 2048);
    assert_int_equal(st_opt_apply(&rows[5], "-5", err, sizeof(err)), 0);
    assert_int_equal(i64, -5);
    assert_int_equal(st_opt_apply(&rows[6], "max", err, sizeof(err)), 0);
    assert_true(f64 == 1e9);
    assert_int_equal(st_opt_apply(&rows[6], "1.5", err, sizeof(err)), 0);
    assert_true(f64 == 1.5);
    assert_int_equal(st_opt_apply(&rows[6], "maximum", err, sizeof(err)), ST_EUSAGE);
    assert_string_equal(err, "--f64: expected a number from 0.5 to 2, got 'maximum'");
    assert_int_equal(st_opt_apply(&rows[7], "b", err, sizeof(err)), 0);
    assert_int_equal(k, 20);
    assert_int_equal(st_opt_apply(&rows[7], "c", err, sizeof(err)), ST_EUSAGE);
    assert_string_equal(err, "--mode: expected one of a, b; got 'c'");
    assert_int_equal(k, 20);
    calls = 0;
    assert_int_equal(st_opt_apply(&rows[8], "v", err, sizeof(err)), 0);
    assert_int_equal(calls, 1);
    assert_string_equal(seen, "v");
    assert_int_equal(st_opt_apply(&rows[9], "10", err, sizeof(err)), ST_EUSAGE);
    assert_string_equal(err, "--u64: expected an integer from 0 to 9, got '10'");
    assert_string_equal(st_opt_name(&rows[9]), "--u64");
    assert_string_equal(st_opt_name(&rows[8]), "--fn");
    s = NULL;
    assert_int_equal(st_opt_apply(&rows[10], "x", err, sizeof(err)), ST_EUSAGE);
    assert_string_equal(err, "--no does not apply");
    assert_null(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_u64),           cmocka_unit_test(test_i64),
        cmocka_unit_test(test_f64),           cmocka_unit_test(test_choice),
        cmocka_unit_test(test_short_buffers), cmocka_unit_test(test_opt_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
