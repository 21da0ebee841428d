/*
 * Tests for src/base/sha256.c against the FIPS 180-4 / NIST example vectors ("abc", the empty
 * string, the 448-bit two-block message, the 896-bit message, one million 'a'), plus the padding
 * edges (55, 56, 63, 64 bytes) checked for one-shot vs byte-by-byte agreement.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "base/sha256.h"

static void test_vectors(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        const char *hex;
    } cases[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqr"
         "lmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char hex[ST_SHA256_HEX];
        st_sha256_hex(cases[i].in, strlen(cases[i].in), hex);
        assert_string_equal(hex, cases[i].hex);
    }
}

static void test_million_a(void **state)
{
    (void)state;
    char chunk[1000];
    memset(chunk, 'a', sizeof(chunk));
    struct st_sha256 s;
    st_sha256_init(&s);
    for (int i = 0; i < 1000; i++) {
        st_sha256_update(&s, chunk, sizeof(chunk));
    }
    uint8_t d[ST_SHA256_BYTES];
    st_sha256_final(&s, d);
    static const uint8_t want[ST_SHA256_BYTES] = {0xcd, 0xc7, 0x6e, 0x5c, 0x99, 0x14, 0xfb, 0x92,
                                                  0x81, 0xa1, 0xc7, 0xe2, 0x84, 0xd7, 0x3e, 0x67,
                                                  0xf1, 0x80, 0x9a, 0x48, 0xa4, 0x97, 0x20, 0x0e,
                                                  0x04, 0x6d, 0x39, 0xcc, 0xc7, 0x11, 0x2c, 0xd0};
    assert_memory_equal(d, want, sizeof(want));
}

/* Lengths around the padding boundary: byte-at-a-time updates give the one-shot digest. */
static void test_padding_edges(void **state)
{
    (void)state;
    static const size_t lens[] = {0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128};
    char msg[128];
    for (size_t i = 0; i < sizeof(msg); i++) {
        msg[i] = (char)('A' + i % 26);
    }
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        char one[ST_SHA256_HEX];
        st_sha256_hex(msg, lens[i], one);
        struct st_sha256 s;
        st_sha256_init(&s);
        for (size_t j = 0; j < lens[i]; j++) {
            st_sha256_update(&s, msg + j, 1);
        }
        uint8_t d[ST_SHA256_BYTES];
        st_sha256_final(&s, d);
        char hex[ST_SHA256_HEX];
        for (int j = 0; j < ST_SHA256_BYTES; j++) {
            snprintf(hex + 2 * j, 3, "%02x", d[j]);
        }
        assert_string_equal(hex, one);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_million_a),
        cmocka_unit_test(test_padding_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
