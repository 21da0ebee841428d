/*
 * Tests for src/workload/corpus.c: the built-in prose (deterministic per seed, exact length,
 * ASCII, prose-like: the simulator's rule gives 3.5 to 5 characters a token, words and
 * sentences of English length, paragraphs, no repeated passage), user text (UTF-8 checked, hash,
 * id) and JSONL corpora (joined texts, blank lines, bad lines named by file:line).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "workload/corpus.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_builtin_deterministic(void **state)
{
    (void)state;
    struct st_corpus a, b, c;
    st_corpus_builtin(&a, 7, 100000);
    st_corpus_builtin(&b, 7, 100000);
    st_corpus_builtin(&c, 8, 100000);
    assert_int_equal(a.len, 100000);
    assert_int_equal(strlen(a.text), 100000);
    assert_memory_equal(a.text, b.text, a.len);
    assert_true(a.hash == b.hash);
    assert_true(a.hash == st_hash64(a.text, a.len));
    assert_true(a.hash != c.hash);
    assert_string_equal(a.id, "builtin:7");
    assert_string_equal(c.id, "builtin:8");
    /* A longer corpus of the same seed starts with the same bytes. */
    struct st_corpus d;
    st_corpus_builtin(&d, 7, 150000);
    assert_memory_equal(a.text, d.text, a.len);
    /* Golden start, so that a change of the generator (which changes every window map's
     * corpus hash) is a deliberate one. */
    char hex[17];
    st_hash_hex(a.hash, hex);
    assert_string_equal(hex, "213b8fa353cc3f74");
    const char start[] = "Did Clara remember his broad judge in Bergen? Walter and Frank";
    assert_memory_equal(a.text, start, sizeof(start) - 1);
    st_corpus_release(&a);
    st_corpus_release(&b);
    st_corpus_release(&c);
    st_corpus_release(&d);
    st_corpus_release(&d); /* twice is safe */
}

static void test_builtin_small_sizes(void **state)
{
    (void)state;
    struct st_corpus c;
    st_corpus_builtin(&c, 1, 0);
    assert_int_equal(c.len, 0);
    assert_non_null(c.text);
    assert_string_equal(c.text, "");
    st_corpus_release(&c);
    st_corpus_builtin(&c, 1, 1);
    assert_int_equal(c.len, 1);
    st_corpus_release(&c);
}

static void test_builtin_prose(void **state)
{
    (void)state;
    struct st_corpus c;
    st_corpus_builtin(&c, 3, 1 << 20);
    uint64_t words = 0, letters = 0, sentences = 0, paragraphs = 0, caps_after_stop = 0;
    size_t i = 0;
    for (i = 0; i < c.len; i++) {
        unsigned char ch = (unsigned char)c.text[i];
        assert_true(ch < 0x80);
        assert_true(ch == '\n' || (ch >= 0x20 && ch < 0x7f));
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) {
            letters++;
            if (i == 0 ||
                !((c.text[i - 1] >= 'a' && c.text[i - 1] <= 'z') ||
                  (c.text[i - 1] >= 'A' && c.text[i - 1] <= 'Z') || c.text[i - 1] == '\'')) {
                words++;
            }
        }
        if ((ch == '.' || ch == '?') && i + 2 < c.len && c.text[i + 1] == ' ') {
            sentences++;
            char n = c.text[i + 2];
            caps_after_stop += (n >= 'A' && n <= 'Z') || n == '"';
        }
        if (ch == '\n' && i + 1 < c.len && c.text[i + 1] == '\n') {
            paragraphs++;
        }
    }
    /* The simulator's rule: 4 code points a token, so 4 characters a token on ASCII prose. */
    double cpt = (double)c.len / (double)((c.len + 3) / 4);
    assert_true(cpt >= 3.5 && cpt <= 5.0);
    /* English-like: words of 3.5 to 6.5 letters, sentences of 6 to 30 words, paragraphs. */
    double wl = (double)letters / (double)words;
    assert_true(wl >= 3.5 && wl <= 6.5);
    double sw = (double)words / (double)(sentences + paragraphs);
    assert_true(sw >= 6 && sw <= 30);
    assert_true(paragraphs > 1000);
    assert_true(caps_after_stop * 10 >= sentences * 9);
    /* Characters a word (with its space and punctuation), what a BPE tokenizer sees as about
     * one token a word: 4 to 7.5. */
    double cw = (double)c.len / (double)words;
    assert_true(cw >= 4.0 && cw <= 7.5);
    st_corpus_release(&c);
}

/* No 64-byte passage occurs twice (windows from different offsets share no prefix). */
static void test_builtin_no_repeats(void **state)
{
    (void)state;
    struct st_corpus c;
    const size_t w = 64;
    st_corpus_builtin(&c, 11, 1 << 20);
    size_t n = c.len - w + 1;
    uint64_t *h = malloc(n * sizeof(*h));
    assert_non_null(h);
    for (size_t i = 0; i < n; i++) {
        h[i] = st_hash64(c.text + i, w);
    }
    qsort(h, n, sizeof(*h), cmp_u64);
    size_t dups = 0;
    for (size_t i = 1; i < n; i++) {
        dups += h[i] == h[i - 1];
    }
    assert_int_equal(dups, 0);
    free(h);
    st_corpus_release(&c);
}

static void test_from_text(void **state)
{
    (void)state;
    struct st_corpus c;
    const char t[] = "Caf\xc3\xa9 au lait.\n\nSecond paragraph.";
    assert_int_equal(st_corpus_from_text(&c, "pg19/books", t, sizeof(t) - 1), 0);
    assert_int_equal(c.len, sizeof(t) - 1);
    assert_memory_equal(c.text, t, c.len);
    assert_int_equal(c.text[c.len], '\0');
    assert_true(c.hash == st_hash64(t, sizeof(t) - 1));
    assert_string_equal(c.id, "pg19/books");
    st_corpus_release(&c);

    assert_int_equal(st_corpus_from_text(&c, "bad", "ab\xc3(", 4), ST_EUTF8);
    assert_null(c.text);
    st_corpus_release(&c);

    char longid[400];
    memset(longid, 'x', sizeof(longid) - 1);
    longid[sizeof(longid) - 1] = '\0';
    assert_int_equal(st_corpus_from_text(&c, longid, "a", 1), 0);
    assert_int_equal(strlen(c.id), sizeof(c.id) - 1);
    st_corpus_release(&c);

    assert_int_equal(st_corpus_from_text(&c, "empty", "", 0), 0);
    assert_int_equal(c.len, 0);
    st_corpus_release(&c);
}

static void test_from_jsonl(void **state)
{
    (void)state;
    struct st_corpus c;
    char err[256];
    const char j[] = "{\"text\": \"First book.\", \"id\": 1}\n"
                     "\n"
                     "   \r\n"
                     "{\"meta\": {}, \"text\": \"Second \\\"book\\\"\\nline.\"}\n"
                     "{\"text\": \"\\u00e9t\\u00e9\"}";
    assert_int_equal(st_corpus_from_jsonl(&c, "pg.jsonl", j, sizeof(j) - 1, err, sizeof(err)), 0);
    const char want[] = "First book.\n\nSecond \"book\"\nline.\n\n\xc3\xa9t\xc3\xa9";
    assert_int_equal(c.len, sizeof(want) - 1);
    assert_memory_equal(c.text, want, c.len);
    assert_true(c.hash == st_hash64(want, sizeof(want) - 1));
    assert_string_equal(c.id, "pg.jsonl");
    st_corpus_release(&c);

    const char bad1[] = "{\"text\": \"ok\"}\n{\"text\": 3}\n";
    assert_int_equal(st_corpus_from_jsonl(&c, "x.jsonl", bad1, sizeof(bad1) - 1, err, sizeof(err)),
                     ST_EPARSE);
    assert_string_equal(err, "x.jsonl:2: expected a JSON object with a string \"text\"");
    assert_null(c.text);

    const char bad2[] = "\n\n{\"text\": \"ok\"\n";
    assert_int_equal(st_corpus_from_jsonl(&c, "y", bad2, sizeof(bad2) - 1, err, sizeof(err)),
                     ST_EPARSE);
    assert_string_equal(err, "y:3: expected a JSON object with a string \"text\"");

    const char bad3[] = "{\"text\": \"a\xff\"}\n";
    assert_int_equal(st_corpus_from_jsonl(&c, "z", bad3, sizeof(bad3) - 1, err, sizeof(err)),
                     ST_EPARSE);
    assert_string_equal(err, "z:1: invalid UTF-8 inside a string");

    const char bad4[] = "[\"text\"]\n";
    assert_int_equal(st_corpus_from_jsonl(&c, "w", bad4, sizeof(bad4) - 1, NULL, 0), ST_EPARSE);

    /* Nothing but blank lines: an empty corpus (the build then says it is empty). */
    assert_int_equal(st_corpus_from_jsonl(&c, "e", "\n\n", 2, err, sizeof(err)), 0);
    assert_int_equal(c.len, 0);
    st_corpus_release(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_deterministic),
        cmocka_unit_test(test_builtin_small_sizes),
        cmocka_unit_test(test_builtin_prose),
        cmocka_unit_test(test_builtin_no_repeats),
        cmocka_unit_test(test_from_text),
        cmocka_unit_test(test_from_jsonl),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
