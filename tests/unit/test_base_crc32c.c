/*
 * Tests for src/base/crc32c.c: the standard check value, the iSCSI test vectors of RFC 3720
 * (B.4), the empty input, and that incremental updates equal one pass over the whole input.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "base/crc32c.h"

static void test_check_value(void **state)
{
    (void)state;
    assert_int_equal(st_crc32c("123456789", 9), 0xE3069283u);
    assert_int_equal(st_crc32c(NULL, 0), 0u);
    assert_int_equal(st_crc32c("a", 1), 0xC1D04330u);
}

static void test_rfc3720_vectors(void **state)
{
    (void)state;
    unsigned char b[32];
    memset(b, 0, sizeof(b));
    assert_int_equal(st_crc32c(b, sizeof(b)), 0x8A9136AAu);
    memset(b, 0xff, sizeof(b));
    assert_int_equal(st_crc32c(b, sizeof(b)), 0x62A8AB43u);
    for (int i = 0; i < 32; i++) {
        b[i] = (unsigned char)i;
    }
    assert_int_equal(st_crc32c(b, sizeof(b)), 0x46DD794Eu);
    for (int i = 0; i < 32; i++) {
        b[i] = (unsigned char)(31 - i);
    }
    assert_int_equal(st_crc32c(b, sizeof(b)), 0x113FDB5Cu);
}

static void test_incremental(void **state)
{
    (void)state;
    const char *s = "The quick brown fox jumps over the lazy dog";
    size_t n = strlen(s);
    uint32_t whole = st_crc32c(s, n);
    for (size_t cut = 0; cut <= n; cut++) {
        uint32_t c = st_crc32c_update(0, s, cut);
        c = st_crc32c_update(c, s + cut, n - cut);
        assert_int_equal(c, whole);
    }
    assert_int_equal(whole, 0x22620404u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_value),
        cmocka_unit_test(test_rfc3720_vectors),
        cmocka_unit_test(test_incremental),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
