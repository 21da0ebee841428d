/*
 * Tests for src/proto/httphdr.c: header names without case, trimmed values, Retry-After's
 * delta-seconds form and its cap, and the simulator's one- and two-number clock headers, with
 * the near misses that must not read as numbers.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "proto/httphdr.h"

static int64_t ra(const char *line)
{
    return st_hdr_retry_after(line, strlen(line));
}

static int nums(const char *line, const char *name, uint64_t *a, uint64_t *b)
{
    return st_hdr_nums(line, strlen(line), name, a, b);
}

static void test_value(void **state)
{
    (void)state;
    const char *v;
    size_t n;
    const char *line = "Keep-Alive: \t timeout=5, max=100 \r\n";
    assert_int_equal(st_hdr_value(line, strlen(line), "keep-alive:", &v, &n), 1);
    assert_int_equal(n, strlen("timeout=5, max=100"));
    assert_memory_equal(v, "timeout=5, max=100", n);
    assert_int_equal(st_hdr_value(line, strlen(line), "keep-alive-x:", &v, &n), 0);
    assert_int_equal(st_hdr_value("Keep", 4, "keep-alive:", &v, &n), 0);
    assert_int_equal(st_hdr_value("X-Empty:\r\n", 10, "x-empty:", &v, &n), 1);
    assert_int_equal(n, 0);
}

static void test_retry_after(void **state)
{
    (void)state;
    assert_int_equal(ra("Retry-After: 2\r\n"), 2);
    assert_int_equal(ra("retry-after:0\r\n"), 0);
    assert_int_equal(ra("RETRY-AFTER: 86400\r\n"), 86400);
    assert_int_equal(ra("Retry-After: 86401\r\n"), 86400);                   /* capped at a day */
    assert_int_equal(ra("Retry-After: 99999999999999999999999\r\n"), 86400); /* over 64 bits */
    assert_int_equal(ra("Retry-After: Wed, 21 Oct 2015 07:28:00 GMT\r\n"), -1);
    assert_int_equal(ra("Retry-After: -1\r\n"), -1);
    assert_int_equal(ra("Retry-After: 2s\r\n"), -1);
    assert_int_equal(ra("Retry-After: 1 2\r\n"), -1);
    assert_int_equal(ra("Retry-After:\r\n"), -1);
    assert_int_equal(ra("Content-Length: 2\r\n"), -1);
}

static void test_nums(void **state)
{
    (void)state;
    uint64_t a = 7, b = 7;
    assert_int_equal(nums("X-Sim-Arrival: 123456\r\n", "x-sim-arrival:", &a, NULL), 0);
    assert_int_equal(a, 123456);
    assert_int_equal(nums("X-Sim-Vt: 500 12\r\n", "x-sim-vt:", &a, &b), 0);
    assert_true(a == 500 && b == 12);
    a = b = 7;
    assert_int_equal(nums("X-Sim-Vt: 500\r\n", "x-sim-vt:", &a, &b), -1); /* the lag is missing */
    assert_int_equal(nums("X-Sim-Vt: 500 12 3\r\n", "x-sim-vt:", &a, &b), -1);
    assert_int_equal(nums("X-Sim-Arrival: 12 34\r\n", "x-sim-arrival:", &a, NULL), -1);
    assert_int_equal(nums("X-Sim-Arrival: -5\r\n", "x-sim-arrival:", &a, NULL), -1);
    assert_int_equal(nums("X-Sim-Arrival: 0x10\r\n", "x-sim-arrival:", &a, NULL), -1);
    assert_int_equal(nums("X-Sim-Arrival:\r\n", "x-sim-arrival:", &a, NULL), -1);
    assert_int_equal(nums("X-Sim-Late: 5\r\n", "x-sim-arrival:", &a, NULL), -1);
    assert_int_equal(nums("X-Sim-Arrival: 18446744073709551616\r\n", "x-sim-arrival:", &a, NULL),
                     -1); /* 2^64 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_value),
        cmocka_unit_test(test_retry_after),
        cmocka_unit_test(test_nums),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
