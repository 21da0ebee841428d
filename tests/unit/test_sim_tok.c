/*
 * Tests for src/sim/model/tok.c: token counts (ASCII, multi-byte UTF-8, every class of invalid
 * byte), chained block hashes (golden values, equal leading hashes for shared prefixes, divergence
 * from the first differing block, no hash for a partial block, truncation at max), the chat
 * template and the image patch rule. A chain value of 0, which the tokenizer maps to 1, cannot be
 * constructed (it needs a 2^64 search), so that rule is covered by review only.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "base/buf.h"
#include "base/hash.h"
#include "sim/model/tok.h"

/* ---- helpers ---- */

static uint64_t count(const char *s)
{
    return st_tok_count(s, strlen(s));
}

/*
 * Code points of s as the tokenizer counts them: s repeated 4 times has 4 * c code points, so
 * exactly c tokens. Only valid for pieces whose repetition does not join into new sequences.
 */
static uint64_t codepoints(const char *s, size_t n)
{
    char buf[256];
    assert_true(4 * n <= sizeof(buf));
    for (int i = 0; i < 4; i++) {
        memcpy(buf + (size_t)i * n, s, n);
    }
    return st_tok_count(buf, 4 * n);
}

/* 180 bytes of ASCII prose. */
static const char fox[] = "The quick brown fox jumps over the lazy dog. "
                          "The quick brown fox jumps over the lazy dog. "
                          "The quick brown fox jumps over the lazy dog. "
                          "The quick brown fox jumps over the lazy dog. ";

/* ---- counts ---- */

static void test_count_ascii(void **state)
{
    (void)state;
    assert_int_equal(count(""), 0);
    assert_int_equal(count("a"), 1);
    assert_int_equal(count("abc"), 1);
    assert_int_equal(count("abcd"), 1);
    assert_int_equal(count("abcde"), 2);
    assert_int_equal(count("abcdefgh"), 2);
    assert_int_equal(count("abcdefghi"), 3);
    assert_int_equal(st_tok_count(fox, strlen(fox)), 45);
    /* NUL bytes are ordinary code points when len says so. */
    assert_int_equal(st_tok_count("\0\0\0\0\0", 5), 2);
}

static void test_count_multibyte(void **state)
{
    (void)state;
    assert_int_equal(count("h\xc3\xa9llo"), 2); /* "héllo": 5 code points */
    assert_int_equal(count("\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c"), 1); /* 4 CJK */
    assert_int_equal(count("\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c!"), 2);
    assert_int_equal(count("\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xf0\x9f\x98\x80"), 1);
    assert_int_equal(count("\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xf0\x9f\x98\x80x"), 2);
    /* Boundaries of each sequence length. */
    assert_int_equal(codepoints("\x7f", 1), 1);
    assert_int_equal(codepoints("\xc2\x80", 2), 1);
    assert_int_equal(codepoints("\xdf\xbf", 2), 1);
    assert_int_equal(codepoints("\xe0\xa0\x80", 3), 1);
    assert_int_equal(codepoints("\xef\xbf\xbf", 3), 1);
    assert_int_equal(codepoints("\xed\x9f\xbf", 3), 1); /* U+D7FF, just below the surrogates */
    assert_int_equal(codepoints("\xf0\x90\x80\x80", 4), 1);
    assert_int_equal(codepoints("\xf4\x8f\xbf\xbf", 4), 1); /* U+10FFFF */
}

static void test_count_invalid(void **state)
{
    (void)state;
    /* Each byte that does not start a well-formed sequence is one code point. */
    assert_int_equal(codepoints("\xff", 1), 1);
    assert_int_equal(codepoints("\x80", 1), 1);             /* stray continuation */
    assert_int_equal(codepoints("\xc0\xaf", 2), 2);         /* overlong '/' */
    assert_int_equal(codepoints("\xc1\xbf", 2), 2);         /* overlong */
    assert_int_equal(codepoints("\xe0\x80\xaf", 3), 3);     /* overlong 3-byte */
    assert_int_equal(codepoints("\xed\xa0\x80", 3), 3);     /* surrogate U+D800 */
    assert_int_equal(codepoints("\xf0\x80\x80\xaf", 4), 4); /* overlong 4-byte */
    assert_int_equal(codepoints("\xf4\x90\x80\x80", 4), 4); /* past U+10FFFF */
    assert_int_equal(codepoints("\xf5\x80\x80\x80", 4), 4);
    assert_int_equal(codepoints("\xe4\xbd"
                                "A",
                                3),
                     3); /* truncated, then ASCII */
    assert_int_equal(codepoints("\xc3"
                                "A",
                                2),
                     2);
    /* A truncated sequence at the very end of the text: one per byte. */
    assert_int_equal(st_tok_count("abc\xe4\xbd", 5), 2);
    assert_int_equal(st_tok_count("abc\xf0\x9f\x98", 6), 2);
    assert_int_equal(st_tok_count("\xe4", 1), 1);
}

/* ---- block hashes ---- */

static void test_hash_golden(void **state)
{
    (void)state;
    uint64_t h[4] = {0};
    /* 180 bytes at page 16 (64 code points a block): two full blocks, a partial third. */
    assert_int_equal(st_tok_block_hashes(fox, strlen(fox), 16, h, 4), 2);
    /* Independent values (Python FNV-1a over the first 64 and 128 bytes): they pin the rule on
     * every platform. */
    assert_true(h[0] == 0x76c32fd67778265full);
    assert_true(h[1] == 0x76cfc76215d45471ull);
    assert_true(h[2] == 0);
    /* The same rule through base/hash.h. */
    assert_true(h[0] == st_hash64(fox, 64));
    assert_true(h[1] == st_hash_update(h[0], fox + 64, 64));
}

static void test_hash_partial_block(void **state)
{
    (void)state;
    uint64_t h[4];
    assert_int_equal(st_tok_block_hashes(fox, 63, 16, h, 4), 0);
    assert_int_equal(st_tok_block_hashes(fox, 64, 16, h, 4), 1);
    assert_int_equal(st_tok_block_hashes(fox, 127, 16, h, 4), 1);
    assert_int_equal(st_tok_block_hashes(fox, 128, 16, h, 4), 2);
    assert_int_equal(st_tok_block_hashes("", 0, 16, h, 4), 0);
    /* page_size 1: a block is one token, 4 code points. */
    assert_int_equal(st_tok_block_hashes("abcdefghi", 9, 1, h, 4), 2);
    assert_true(h[0] == st_hash64("abcd", 4));
    assert_true(h[1] == st_hash_update(h[0], "efgh", 4));
    /* page_size 0 has no blocks. */
    assert_int_equal(st_tok_block_hashes(fox, strlen(fox), 0, h, 4), 0);
}

static void test_hash_multibyte_blocks(void **state)
{
    (void)state;
    /* 8 code points of 3 bytes each: page 1 makes two blocks of 12 bytes. */
    const char cjk[] = "\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c"
                       "\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c";
    uint64_t h[2];
    assert_int_equal(st_tok_block_hashes(cjk, 24, 1, h, 2), 2);
    assert_true(h[0] == st_hash64(cjk, 12));
    assert_true(h[1] == st_hash_update(h[0], cjk + 12, 12));
    assert_true(h[0] == st_hash64(cjk + 12, 12)); /* the two blocks have equal bytes */
    assert_true(h[0] != h[1]);                    /* ... but the chain differs */
    /* Invalid bytes are single code points: 8 bytes of 0xff are two blocks of 4 bytes. */
    assert_int_equal(st_tok_block_hashes("\xff\xff\xff\xff\xff\xff\xff\xff", 8, 1, h, 2), 2);
    assert_true(h[0] == st_hash64("\xff\xff\xff\xff", 4));
    /* A block boundary inside a multi-byte mix follows code points, not bytes. */
    assert_int_equal(st_tok_block_hashes("a\xc3\xa9"
                                         "bcde",
                                         7, 1, h, 2),
                     1);
    assert_true(h[0] == st_hash64("a\xc3\xa9"
                                  "bc",
                                  5));
}

static void test_hash_shared_prefix(void **state)
{
    (void)state;
    char a[320], b[320];
    for (size_t i = 0; i < sizeof(a); i++) {
        a[i] = (char)('a' + (i * 7) % 26);
    }
    memcpy(b, a, sizeof(a));
    /* Five blocks at page 16 (64 bytes each). Change one byte in block 2. */
    b[2 * 64 + 10] ^= 1;
    uint64_t ha[5], hb[5];
    assert_int_equal(st_tok_block_hashes(a, sizeof(a), 16, ha, 5), 5);
    assert_int_equal(st_tok_block_hashes(b, sizeof(b), 16, hb, 5), 5);
    assert_true(ha[0] == hb[0]);
    assert_true(ha[1] == hb[1]);
    for (int i = 2; i < 5; i++) {
        assert_true(ha[i] != hb[i]);
    }
    /* A difference in the last byte of block 0 changes every hash. */
    memcpy(b, a, sizeof(a));
    b[63] ^= 1;
    assert_int_equal(st_tok_block_hashes(b, sizeof(b), 16, hb, 5), 5);
    for (int i = 0; i < 5; i++) {
        assert_true(ha[i] != hb[i]);
    }
    /* A difference in the partial tail changes nothing. */
    memcpy(b, a, sizeof(a));
    assert_int_equal(st_tok_block_hashes(a, 300, 16, ha, 5), 4);
    b[299] ^= 1;
    assert_int_equal(st_tok_block_hashes(b, 300, 16, hb, 5), 4);
    assert_memory_equal(ha, hb, 4 * sizeof(uint64_t));
    /* Chaining is FNV-1a over the whole prefix: page 8's block 1 is page 16's block 0. */
    uint64_t h8[10];
    assert_int_equal(st_tok_block_hashes(a, sizeof(a), 8, h8, 10), 10);
    assert_true(h8[1] == ha[0]);
    assert_true(h8[3] == ha[1]);
    /* Same text, same hashes, every call. */
    assert_int_equal(st_tok_block_hashes(a, sizeof(a), 16, hb, 5), 5);
    assert_int_equal(st_tok_block_hashes(a, sizeof(a), 16, ha, 5), 5);
    assert_memory_equal(ha, hb, sizeof(ha));
}

static void test_hash_max(void **state)
{
    (void)state;
    char t[5 * 64 + 3];
    memset(t, 'x', sizeof(t));
    uint64_t all[5], h[5] = {0, 0, 7, 7, 7};
    assert_int_equal(st_tok_block_hashes(t, sizeof(t), 16, all, 5), 5);
    assert_int_equal(st_tok_block_hashes(t, sizeof(t), 16, h, 2), 5);
    assert_true(h[0] == all[0]);
    assert_true(h[1] == all[1]);
    assert_true(h[2] == 7); /* untouched past max */
    assert_int_equal(st_tok_block_hashes(t, sizeof(t), 16, NULL, 0), 5);
    for (int i = 0; i < 5; i++) {
        assert_true(all[i] != 0);
    }
}

/* ---- chat template ---- */

static void test_render(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    st_tok_render_message(&b, "system", 6, "Be brief.", 9);
    st_tok_render_message(&b, "user", 4, "hi", 2);
    st_tok_render_generation_prompt(&b);
    assert_string_equal(st_buf_str(&b), "<|system|>\nBe brief.\n<|user|>\nhi\n<|assistant|>\n");
    /* Lengths, not NUL: content may hold any bytes. */
    st_buf_clear(&b);
    st_tok_render_message(&b, "user", 4, "a\0b", 3);
    assert_int_equal(b.len, 13);
    assert_memory_equal(b.data, "<|user|>\na\0b\n", 13);
    /* Empty content still has its header and newline. */
    st_buf_clear(&b);
    st_tok_render_message(&b, "assistant", 9, "", 0);
    assert_string_equal(st_buf_str(&b), "<|assistant|>\n\n");
    /* "<|user|>\n" + "hi" + "\n" = 12 code points = 3 tokens. */
    st_buf_clear(&b);
    st_tok_render_message(&b, "user", 4, "hi", 2);
    assert_int_equal(st_tok_count(b.data, b.len), 3);
    st_buf_release(&b);
}

/* ---- images ---- */

static void test_image(void **state)
{
    (void)state;
    assert_int_equal(st_tok_image(2048, 1536, 28), 74 * 55); /* the seeds' OCR image */
    assert_int_equal(st_tok_image(28, 28, 28), 1);
    assert_int_equal(st_tok_image(29, 28, 28), 2);
    assert_int_equal(st_tok_image(29, 29, 28), 4);
    assert_int_equal(st_tok_image(1, 1, 14), 1);
    assert_int_equal(st_tok_image(0, 100, 14), 0);
    assert_int_equal(st_tok_image(100, 0, 14), 0);
    assert_int_equal(st_tok_image(100, 100, 0), 0);
    assert_true(st_tok_image(UINT32_MAX, UINT32_MAX, 1) ==
                (uint64_t)UINT32_MAX * (uint64_t)UINT32_MAX);
    assert_int_equal(st_tok_image(UINT32_MAX, 1, UINT32_MAX), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_count_ascii),
        cmocka_unit_test(test_count_multibyte),
        cmocka_unit_test(test_count_invalid),
        cmocka_unit_test(test_hash_golden),
        cmocka_unit_test(test_hash_partial_block),
        cmocka_unit_test(test_hash_multibyte_blocks),
        cmocka_unit_test(test_hash_shared_prefix),
        cmocka_unit_test(test_hash_max),
        cmocka_unit_test(test_render),
        cmocka_unit_test(test_image),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
