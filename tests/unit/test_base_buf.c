/*
 * Tests for src/base/buf.c: growth by append and printf (including output that exactly fills or
 * just overflows the free space), the NUL terminator, consume, take, clear, reserve.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "base/buf.h"

/* The invariants every operation keeps. */
static void assert_sane(const struct st_buf *b)
{
    if (b->data == NULL) {
        assert_int_equal(b->len, 0);
        assert_int_equal(b->cap, 0);
        assert_string_equal(st_buf_str(b), "");
        return;
    }
    assert_true(b->len < b->cap);
    assert_int_equal(b->data[b->len], '\0');
}

static void test_init_empty(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_string_equal(st_buf_str(&b), "");
    st_buf_append(&b, NULL, 0);
    assert_sane(&b);
    assert_int_equal(b.len, 0);
    st_buf_release(&b);
    assert_null(b.data);
    /* Release of a never-used buffer is fine. */
    st_buf_init(&b);
    st_buf_release(&b);
}

static void test_append_growth(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    char want[10000];
    for (size_t i = 0; i < sizeof(want); i++) {
        char c = (char)('a' + i % 26);
        want[i] = c;
        if (i % 3 == 0) {
            st_buf_putc(&b, c);
        } else {
            st_buf_append(&b, &c, 1);
        }
        assert_sane(&b);
    }
    assert_int_equal(b.len, sizeof(want));
    assert_memory_equal(b.data, want, sizeof(want));
    /* One big append past the doubling step. */
    st_buf_clear(&b);
    st_buf_append(&b, want, sizeof(want));
    assert_sane(&b);
    assert_memory_equal(b.data, want, sizeof(want));
    /* Embedded NULs are bytes like any other. */
    st_buf_clear(&b);
    st_buf_append(&b, "a\0b", 3);
    assert_int_equal(b.len, 3);
    assert_memory_equal(b.data, "a\0b", 4);
    st_buf_puts(&b, "cd");
    assert_memory_equal(b.data, "a\0bcd", 6);
    st_buf_release(&b);
}

static void test_printf_growth(void **state)
{
    (void)state;
    /*
     * Every prefix length against every output length around the first capacities (64, 128,
     * 256): output that fits, that exactly fills, and that needs the second vsnprintf.
     */
    char expect[1024];
    for (size_t pre = 0; pre < 140; pre++) {
        for (int out = 0; out < 300; out += (out < 140 ? 1 : 7)) {
            struct st_buf b;
            st_buf_init(&b);
            for (size_t i = 0; i < pre; i++) {
                st_buf_putc(&b, 'p');
            }
            st_buf_printf(&b, "%0*d", out, 7);
            int n = snprintf(expect, sizeof(expect), "%0*d", out, 7);
            assert_sane(&b);
            assert_int_equal(b.len, pre + (size_t)n);
            for (size_t i = 0; i < pre; i++) {
                assert_int_equal(b.data[i], 'p');
            }
            assert_memory_equal(b.data + pre, expect, (size_t)n);
            st_buf_release(&b);
        }
    }
    struct st_buf b;
    st_buf_init(&b);
    st_buf_printf(&b, "%s", "");
    assert_sane(&b);
    assert_int_equal(b.len, 0);
    st_buf_printf(&b, "%d-%s-%llu", -5, "x", 18446744073709551615ull);
    assert_string_equal(st_buf_str(&b), "-5-x-18446744073709551615");
    st_buf_release(&b);
}

static void test_consume(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    st_buf_puts(&b, "hello, world");
    st_buf_consume(&b, 0);
    assert_string_equal(st_buf_str(&b), "hello, world");
    st_buf_consume(&b, 7);
    assert_string_equal(st_buf_str(&b), "world");
    assert_int_equal(b.len, 5);
    assert_sane(&b);
    st_buf_puts(&b, "!");
    assert_string_equal(st_buf_str(&b), "world!");
    st_buf_consume(&b, b.len);
    assert_int_equal(b.len, 0);
    assert_string_equal(st_buf_str(&b), "");
    assert_sane(&b);
    /* Consuming from a never-used buffer. */
    st_buf_release(&b);
    st_buf_consume(&b, 0);
    assert_sane(&b);
    st_buf_release(&b);
}

static void test_take(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    st_buf_puts(&b, "owned now");
    char *p = st_buf_take(&b);
    assert_string_equal(p, "owned now");
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, 0);
    free(p);
    /* The buffer is usable again, and taking from an empty one gives "". */
    p = st_buf_take(&b);
    assert_non_null(p);
    assert_string_equal(p, "");
    free(p);
    st_buf_puts(&b, "again");
    assert_string_equal(st_buf_str(&b), "again");
    st_buf_release(&b);
}

static void test_clear_keeps_storage(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    st_buf_printf(&b, "%0200d", 1);
    char *data = b.data;
    size_t cap = b.cap;
    st_buf_clear(&b);
    assert_ptr_equal(b.data, data);
    assert_int_equal(b.cap, cap);
    assert_int_equal(b.len, 0);
    assert_string_equal(st_buf_str(&b), "");
    /* Clearing a never-used buffer leaves it unallocated. */
    st_buf_release(&b);
    st_buf_clear(&b);
    assert_null(b.data);
    st_buf_release(&b);
}

static void test_reserve(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    st_buf_puts(&b, "abc");
    st_buf_reserve(&b, 1000);
    assert_true(b.cap >= b.len + 1000 + 1);
    char *data = b.data;
    char block[1000];
    memset(block, 'z', sizeof(block));
    st_buf_append(&b, block, sizeof(block));
    /* The reserved room was enough: no reallocation. */
    assert_ptr_equal(b.data, data);
    assert_int_equal(b.len, 1003);
    assert_sane(&b);
    st_buf_release(&b);
}

/*
 * Regression: reserve on a never-used buffer allocated storage without writing the terminator,
 * so st_buf_str returned uninitialized bytes (0xbe under ASan, garbage otherwise).
 */
static void test_reserve_fresh_is_terminated(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    st_buf_reserve(&b, 10);
    assert_non_null(b.data);
    assert_string_equal(st_buf_str(&b), "");
    assert_sane(&b);
    st_buf_release(&b);
}

/*
 * Regression: when vsnprintf failed (an unconvertible wide character in the C locale) its
 * partial output stayed past len without the terminator, so st_buf_str showed "xabc" for len 1.
 */
static void test_printf_failure_keeps_text(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    st_buf_puts(&b, "x");
    st_buf_printf(&b, "abc%lc", (wint_t)0xD800);
    assert_int_equal(b.len, 1);
    assert_string_equal(st_buf_str(&b), "x");
    st_buf_release(&b);
    st_buf_printf(&b, "abc%lc", (wint_t)0xD800);
    assert_int_equal(b.len, 0);
    assert_string_equal(st_buf_str(&b), "");
    st_buf_release(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_empty),
        cmocka_unit_test(test_append_growth),
        cmocka_unit_test(test_printf_growth),
        cmocka_unit_test(test_consume),
        cmocka_unit_test(test_take),
        cmocka_unit_test(test_clear_keeps_storage),
        cmocka_unit_test(test_reserve),
        cmocka_unit_test(test_reserve_fresh_is_terminated),
        cmocka_unit_test(test_printf_failure_keeps_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
