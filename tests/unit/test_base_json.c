/*
 * Tests for src/base/json.c: the strict grammar (accept and reject tables), UTF-8 validation
 * inside strings and in st_utf8_valid, the depth and token limits, the accessors (get, at,
 * first, next, str with escapes and surrogates, i64, f64, bool), and the writer (commas,
 * nesting, escaping, U+FFFD for invalid UTF-8, f64 round trip, NaN and infinities), ending with
 * write-then-parse round trips over seeded random strings and doubles.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/rng.h"

/* A byte string with its length, so tables can hold NUL bytes. */
struct bytes {
    const char *s;
    size_t n;
};

#define B(lit)                                                                                     \
    {                                                                                              \
        lit, sizeof(lit) - 1                                                                       \
    }
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int parse_bytes(struct st_json *d, struct bytes b)
{
    int rc = st_json_parse(d, b.s, b.n);
    if (rc != 0) {
        assert_int_equal(d->n, 0);
    }
    return rc;
}

static int parse(struct st_json *d, const char *s)
{
    return parse_bytes(d, (struct bytes){s, strlen(s)});
}

static void expect_rc(const struct bytes *cases, size_t n, int want)
{
    struct st_json d;
    st_json_init(&d, 0);
    for (size_t i = 0; i < n; i++) {
        int rc = parse_bytes(&d, cases[i]);
        if (rc != want) {
            fail_msg("case %zu \"%.*s\": got %d, want %d", i, (int)cases[i].n, cases[i].s, rc,
                     want);
        }
    }
    st_json_release(&d);
}

/* ---- grammar ---- */

static const struct bytes accept_cases[] = {
    B("0"),
    B("-0"),
    B("1"),
    B("-1"),
    B("1234567890"),
    B("1.5"),
    B("-1.5e10"),
    B("1E5"),
    B("1e+5"),
    B("1e-5"),
    B("0.0"),
    B("0e0"),
    B("1e400"),
    B("true"),
    B("false"),
    B("null"),
    B("\"\""),
    B("\"abc\""),
    B("[]"),
    B("{}"),
    B("[1,2,3]"),
    B("{\"a\":1}"),
    B("{\"\":0}"),
    B("{\"a\":1,\"a\":2}"),
    B(" \t\r\n[ 1 , 2 ] \n"),
    B("{ \"a\" : { \"b\" : [ true , false , null ] } }"),
    B("[[[]],{},[{}]]"),
    B("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0041\\u00e9\\u00E9\""),
    B("\"\\uD83D\\uDE00\""),
    B("\"\\ud800\""), /* a lone surrogate escape is grammatical; decoding gives U+FFFD */
    B("\"\x7f\""),
    B("\"\xC3\xA9\""),         /* U+00E9 */
    B("\"\xE2\x82\xAC\""),     /* U+20AC */
    B("\"\xF0\x9F\x98\x80\""), /* U+1F600 */
    B("\"\xF4\x8F\xBF\xBF\""), /* U+10FFFF, the last code point */
    B("\"\xEF\xBF\xBF\""),     /* U+FFFF */
    B("\"\xED\x9F\xBF\""),     /* U+D7FF, just below the surrogates */
    B("\"\xEE\x80\x80\""),     /* U+E000, just above */
    B("\"\xC2\x80\""),         /* U+0080, the smallest two-byte form */
    B("\"\xE0\xA0\x80\""),     /* U+0800 */
    B("\"\xF0\x90\x80\x80\""), /* U+10000 */
    B("{\"\xC3\xA9\":\"\xC3\xA9\"}"),
};

static const struct bytes parse_error_cases[] = {
    B(""),
    B(" "),
    B("[1,]"), /* trailing commas */
    B("{\"a\":1,}"),
    B("[,1]"),
    B("[1,,2]"),
    B("{,}"),
    B("01"), /* leading zeros */
    B("-01"),
    B("00"),
    B("[01]"),
    B("+1"),
    B(".5"),
    B("1."),
    B("1.e5"),
    B("1e"),
    B("1e+"),
    B("-"),
    B("--1"),
    B("0x10"),
    B("NaN"),
    B("Infinity"),
    B("-Infinity"),
    B("tru"),
    B("nul"),
    B("True"),
    B("[1 2]"),
    B("{\"a\" 1}"),
    B("{a:1}"),
    B("{'a':1}"),
    B("'a'"),
    B("{\"a\":}"),
    B("{\"a\"}"),
    B("{1:2}"),
    B("\"\\x\""), /* bad escapes */
    B("\"\\u12\""),
    B("\"\\u12G4\""),
    B("\"\\U0041\""),
    B("\"\\'\""),
    B("\"\\"),
    B("\"\\u"),
    B("\"a\tb\""), /* raw control characters in strings */
    B("\"a\nb\""),
    B("\"\x01\""),
    B("\"\x1f\""),
    B("\"a\0b\""),
    B("\"abc"), /* unterminated */
    B("\"\\\""),
    B("["),
    B("[1"),
    B("[1,"),
    B("{"),
    B("{\"a\""),
    B("{\"a\":"),
    B("{\"a\":1"),
    B("1 2"), /* trailing garbage */
    B("[] []"),
    B("{}x"),
    B("truex"),
    B("nullnull"),
    B("1.5.5"),
    B("\"a\"\"b\""),
    B("[1]]"),
    B("1\0"),
    B("]"),
    B("}"),
    B(":"),
    B(","),
    B("\f1"), /* only space, tab, CR and LF are white space */
    B("\v1"),
    B("\xC2\xA0"
      "1"),
};

static const struct bytes utf8_error_cases[] = {
    B("\"\xC0\xAF\""), /* overlongs */
    B("\"\xC1\xBF\""),
    B("\"\xE0\x80\xAF\""),
    B("\"\xE0\x9F\xBF\""),
    B("\"\xF0\x80\x80\xAF\""),
    B("\"\xF0\x8F\xBF\xBF\""),
    B("\"\xED\xA0\x80\""), /* surrogates encoded in UTF-8 */
    B("\"\xED\xAD\xBF\""),
    B("\"\xED\xB0\x80\""),
    B("\"\xED\xBF\xBF\""),
    B("\"\xED\xA0\xBD\xED\xB8\x80\""), /* a CESU-8 pair */
    B("\"\xF4\x90\x80\x80\""),         /* above U+10FFFF */
    B("\"\xF5\x80\x80\x80\""),
    B("\"\xF7\xBF\xBF\xBF\""),
    B("\"\xF8\x88\x80\x80\x80\""),
    B("\"\xFC\x84\x80\x80\x80\x80\""),
    B("\"\xFE\""),
    B("\"\xFF\""),
    B("\"\xC3\""), /* truncated before the closing quote */
    B("\"\xE2\x82\""),
    B("\"\xF0\x9F\x98\""),
    B("\"\x80\""), /* lone continuation bytes */
    B("\"\xBF\""),
    B("\"a\x80z\""),
    B("\"\xC3\x28\""), /* a continuation byte missing */
    B("\"\xE2\x28\xA1\""),
    B("\"\xE2\x82\x28\""),
    B("\"\xF0\x28\x8C\xBC\""),
    B("\"\xF0\x90\x28\xBC\""),
    B("\"\xF0\x90\x8C\x28\""),
    B("{\"\xC0\xAF\":1}"), /* in a key */
    B("[\"ok\",\"\xFF\"]"),
};

static void test_accept(void **state)
{
    (void)state;
    expect_rc(accept_cases, COUNT(accept_cases), 0);
}

static void test_reject_grammar(void **state)
{
    (void)state;
    expect_rc(parse_error_cases, COUNT(parse_error_cases), ST_EPARSE);
}

static void test_reject_utf8(void **state)
{
    (void)state;
    expect_rc(utf8_error_cases, COUNT(utf8_error_cases), ST_EUTF8);
    /* Cut off inside a sequence at the very end of the input: either code is an error. */
    struct st_json d;
    st_json_init(&d, 0);
    int rc = parse(&d, "\"\xE2\x82");
    assert_true(rc == ST_EUTF8 || rc == ST_EPARSE);
    st_json_release(&d);
}

/* n nested arrays, "[[[...]]]". */
static char *nested(size_t n)
{
    char *s = malloc(2 * n + 1);
    assert_non_null(s);
    memset(s, '[', n);
    memset(s + n, ']', n);
    s[2 * n] = '\0';
    return s;
}

static void test_depth_limit(void **state)
{
    (void)state;
    struct st_json d;
    st_json_init(&d, 0);
    char *s = nested(ST_JSON_MAX_DEPTH);
    assert_int_equal(parse(&d, s), 0);
    assert_int_equal(d.n, ST_JSON_MAX_DEPTH);
    free(s);
    s = nested(ST_JSON_MAX_DEPTH + 1);
    assert_int_equal(parse(&d, s), ST_ETOOBIG);
    free(s);
    /* Deep and unterminated: the limit stops it before the missing brackets matter. */
    char deep[10001];
    memset(deep, '[', sizeof(deep) - 1);
    deep[sizeof(deep) - 1] = '\0';
    assert_int_equal(parse(&d, deep), ST_ETOOBIG);
    /* Objects count too: 64 levels of {"a":...} around a number. */
    struct st_buf b;
    st_buf_init(&b);
    for (int i = 0; i < ST_JSON_MAX_DEPTH; i++) {
        st_buf_puts(&b, "{\"a\":");
    }
    st_buf_puts(&b, "1");
    for (int i = 0; i < ST_JSON_MAX_DEPTH; i++) {
        st_buf_puts(&b, "}");
    }
    assert_int_equal(st_json_parse(&d, b.data, b.len), 0);
    st_buf_clear(&b);
    for (int i = 0; i < ST_JSON_MAX_DEPTH; i++) {
        st_buf_puts(&b, i % 2 ? "[" : "{\"a\":");
    }
    st_buf_puts(&b, "[]");
    for (int i = ST_JSON_MAX_DEPTH - 1; i >= 0; i--) {
        st_buf_puts(&b, i % 2 ? "]" : "}");
    }
    assert_int_equal(st_json_parse(&d, b.data, b.len), ST_ETOOBIG);
    st_buf_release(&b);
    st_json_release(&d);
}

static void test_max_toks(void **state)
{
    (void)state;
    struct st_json d;
    st_json_init(&d, 3);
    assert_int_equal(parse(&d, "[1,2]"), 0);
    assert_int_equal(d.n, 3);
    assert_int_equal(parse(&d, "[1,2,3]"), ST_ETOOBIG);
    assert_int_equal(parse(&d, "{\"a\":1}"), 0); /* object, key, value */
    assert_int_equal(parse(&d, "{\"a\":1,\"b\":2}"), ST_ETOOBIG);
    /* Grammar errors before the limit still say EPARSE. */
    assert_int_equal(parse(&d, "[1,]"), ST_EPARSE);
    st_json_release(&d);
    st_json_init(&d, 1);
    assert_int_equal(parse(&d, "1"), 0);
    assert_int_equal(parse(&d, "[]"), 0);
    assert_int_equal(parse(&d, "[1]"), ST_ETOOBIG);
    st_json_release(&d);
    /* 0 means the default of 1 << 20. */
    st_json_init(&d, 0);
    assert_int_equal(d.max_toks, 1u << 20);
    st_json_release(&d);
}

static void test_too_long(void **state)
{
    (void)state;
    struct st_json d;
    st_json_init(&d, 0);
    /* The length is checked before any byte is read. */
    assert_int_equal(st_json_parse(&d, "1", (size_t)UINT32_MAX + 1), ST_ETOOBIG);
    assert_int_equal(d.n, 0);
    st_json_release(&d);
}

static void test_reuse_keeps_storage(void **state)
{
    (void)state;
    struct st_json d;
    st_json_init(&d, 0);
    struct st_buf b;
    st_buf_init(&b);
    st_buf_putc(&b, '[');
    for (int i = 0; i < 500; i++) {
        st_buf_printf(&b, "%s%d", i ? "," : "", i);
    }
    st_buf_putc(&b, ']');
    assert_int_equal(st_json_parse(&d, b.data, b.len), 0);
    assert_int_equal(d.n, 501);
    struct st_json_tok *toks = d.toks;
    uint32_t cap = d.cap;
    assert_int_equal(parse(&d, "[1,]"), ST_EPARSE);
    assert_int_equal(parse(&d, "{\"a\":[1,2]}"), 0);
    assert_ptr_equal(d.toks, toks);
    assert_int_equal(d.cap, cap);
    assert_int_equal(d.n, 5);
    st_buf_release(&b);
    st_json_release(&d);
    assert_null(d.toks);
}

/* ---- st_utf8_valid ---- */

static void test_utf8_valid(void **state)
{
    (void)state;
    static const struct bytes valid[] = {
        B(""),
        B("plain ascii"),
        B("a\0b"),
        B("\x7f"),
        B("\xC2\x80"),
        B("\xDF\xBF"),
        B("\xE0\xA0\x80"),
        B("\xED\x9F\xBF"),
        B("\xEE\x80\x80"),
        B("\xEF\xBF\xBF"),
        B("\xF0\x90\x80\x80"),
        B("\xF4\x8F\xBF\xBF"),
        B("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
    };
    for (size_t i = 0; i < COUNT(valid); i++) {
        assert_int_equal(st_utf8_valid(valid[i].s, valid[i].n), 1);
    }
    /* Every invalid string above, without its quotes. */
    for (size_t i = 0; i < COUNT(utf8_error_cases); i++) {
        struct bytes c = utf8_error_cases[i];
        if (c.s[0] != '"') {
            continue;
        }
        if (st_utf8_valid(c.s + 1, c.n - 2)) {
            fail_msg("case %zu is not valid UTF-8", i);
        }
    }
    /* Truncation at the very end of the input. */
    assert_int_equal(st_utf8_valid("\xC3", 1), 0);
    assert_int_equal(st_utf8_valid("\xE2\x82", 2), 0);
    assert_int_equal(st_utf8_valid("\xF0\x9F\x98", 3), 0);
    assert_int_equal(st_utf8_valid("ok\xF0\x9F\x98\x80", 5), 0);
    assert_int_equal(st_utf8_valid(NULL, 0), 1);
}

/* ---- accessors ---- */

static const char access_doc[] = "{\"name\":\"x\\\"y\",\"n\":-42,\"f\":1.5,"
                                 "\"arr\":[10,[20,21],{\"k\":null},\"s\"],"
                                 "\"t\":true,\"fa\":false,\"nul\":null,"
                                 "\"esc\\u0041\":\"\\u00e9\\ud83d\\ude00\","
                                 "\"e\":{},\"ea\":[]}";

static void test_get_at_first_next(void **state)
{
    (void)state;
    struct st_json d;
    st_json_init(&d, 0);
    assert_int_equal(parse(&d, access_doc), 0);
    assert_int_equal(st_json_type(&d, 0), ST_JSON_OBJECT);
    assert_int_equal(d.toks[0].size, 10);
    assert_int_equal(d.toks[0].skip, d.n);
    assert_int_equal(st_json_type(&d, -1), ST_JSON_INVALID);
    assert_int_equal(st_json_type(&d, (int)d.n), ST_JSON_INVALID);

    int name = st_json_get(&d, 0, "name");
    assert_int_equal(st_json_type(&d, name), ST_JSON_STRING);
    assert_true(st_json_streq(&d, name, "x\"y"));
    assert_false(st_json_streq(&d, name, "x\\\"y"));
    assert_int_equal(st_json_get(&d, 0, "missing"), -1);
    assert_int_equal(st_json_get(&d, 0, "nam"), -1);
    assert_int_equal(st_json_get(&d, name, "name"), -1); /* not an object */
    /* A key written with an escape matches its decoded text. */
    int esc = st_json_get(&d, 0, "escA");
    assert_int_equal(st_json_type(&d, esc), ST_JSON_STRING);

    int arr = st_json_get(&d, 0, "arr");
    assert_int_equal(st_json_type(&d, arr), ST_JSON_ARRAY);
    assert_int_equal(d.toks[arr].size, 4);
    int64_t v;
    assert_int_equal(st_json_i64(&d, st_json_at(&d, arr, 0), &v), 0);
    assert_int_equal(v, 10);
    int inner = st_json_at(&d, arr, 1);
    assert_int_equal(st_json_type(&d, inner), ST_JSON_ARRAY);
    assert_int_equal(st_json_i64(&d, st_json_at(&d, inner, 1), &v), 0);
    assert_int_equal(v, 21);
    int obj = st_json_at(&d, arr, 2);
    assert_int_equal(st_json_type(&d, st_json_get(&d, obj, "k")), ST_JSON_NULL);
    assert_true(st_json_streq(&d, st_json_at(&d, arr, 3), "s"));
    assert_int_equal(st_json_at(&d, arr, 4), -1);
    assert_int_equal(st_json_at(&d, 0, 0), -1); /* not an array */

    /* Iterating the root visits the keys in order, skipping nested values whole. */
    static const char *const keys[] = {"name", "n",   "f",    "arr", "t",
                                       "fa",   "nul", "escA", "e",   "ea"};
    size_t k = 0;
    for (int i = st_json_first(&d, 0); i >= 0; i = st_json_next(&d, 0, i)) {
        assert_true(k < COUNT(keys));
        assert_true(st_json_streq(&d, i, keys[k]));
        assert_int_equal(st_json_get(&d, 0, keys[k]), i + 1);
        k++;
    }
    assert_int_equal(k, COUNT(keys));
    /* And an array visits its elements. */
    k = 0;
    for (int i = st_json_first(&d, arr); i >= 0; i = st_json_next(&d, arr, i)) {
        assert_int_equal(i, st_json_at(&d, arr, (uint32_t)k));
        k++;
    }
    assert_int_equal(k, 4);
    assert_int_equal(st_json_first(&d, st_json_get(&d, 0, "e")), -1);
    assert_int_equal(st_json_first(&d, st_json_get(&d, 0, "ea")), -1);
    assert_int_equal(st_json_first(&d, name), -1);
    assert_int_equal(st_json_next(&d, name, name), -1);

    size_t len;
    const char *raw = st_json_raw(&d, name, &len);
    assert_int_equal(len, 4);
    assert_memory_equal(raw, "x\\\"y", 4);
    raw = st_json_raw(&d, inner, &len);
    assert_int_equal(len, 7);
    assert_memory_equal(raw, "[20,21]", 7);
    raw = st_json_raw(&d, -1, &len);
    assert_int_equal(len, 0);
    st_json_release(&d);
}

/* Decodes the single string that s holds and compares it to want[0..wn). */
static void expect_str(const char *s, const char *want, size_t wn)
{
    struct st_json d;
    st_json_init(&d, 0);
    assert_int_equal(parse(&d, s), 0);
    struct st_buf out;
    st_buf_init(&out);
    st_buf_puts(&out, ">"); /* st_json_str appends */
    assert_int_equal(st_json_str(&d, 0, &out), 0);
    if (out.len != wn + 1 || memcmp(out.data + 1, want, wn) != 0) {
        fail_msg("%s decoded to %zu bytes \"%s\"", s, out.len - 1, out.data + 1);
    }
    assert_true(st_utf8_valid(out.data, out.len));
    st_buf_release(&out);
    st_json_release(&d);
}

#define EXPECT_STR(json, lit) expect_str(json, lit, sizeof(lit) - 1)

static void test_str_escapes(void **state)
{
    (void)state;
    EXPECT_STR("\"plain\"", "plain");
    EXPECT_STR("\"\"", "");
    EXPECT_STR("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"\\/\b\f\n\r\t");
    EXPECT_STR("\"a\\u0041\\u00e9\\u00E9\\u20ac\"", "aA\xC3\xA9\xC3\xA9\xE2\x82\xAC");
    EXPECT_STR("\"\\u0000\"", "\0");
    EXPECT_STR("\"\\u007f\\u0080\\u07ff\\u0800\\uffff\"",
               "\x7f\xC2\x80\xDF\xBF\xE0\xA0\x80\xEF\xBF\xBF");
    /* Surrogate pairs. */
    EXPECT_STR("\"\\ud83d\\ude00\"", "\xF0\x9F\x98\x80");
    EXPECT_STR("\"\\uD800\\uDC00\"", "\xF0\x90\x80\x80");
    EXPECT_STR("\"\\udbff\\udfff\"", "\xF4\x8F\xBF\xBF");
    /* Lone surrogates become U+FFFD, and what follows them survives. */
    EXPECT_STR("\"\\ud800\"", "\xEF\xBF\xBD");
    EXPECT_STR("\"\\udc00\"", "\xEF\xBF\xBD");
    EXPECT_STR("\"\\ud800x\"", "\xEF\xBF\xBDx");
    EXPECT_STR("\"\\ud800\\u0041\"", "\xEF\xBF\xBD"
                                     "A");
    EXPECT_STR("\"\\ud800\\ud800\"", "\xEF\xBF\xBD\xEF\xBF\xBD");
    EXPECT_STR("\"\\udc00\\ud800\"", "\xEF\xBF\xBD\xEF\xBF\xBD");
    EXPECT_STR("\"\\ud800\\n\"", "\xEF\xBF\xBD\n");
    /* Raw UTF-8 passes through next to escapes. */
    EXPECT_STR("\"\xC3\xA9\\n\xF0\x9F\x98\x80\"", "\xC3\xA9\n\xF0\x9F\x98\x80");

    struct st_json d;
    st_json_init(&d, 0);
    assert_int_equal(parse(&d, "[1]"), 0);
    struct st_buf out;
    st_buf_init(&out);
    assert_int_equal(st_json_str(&d, 0, &out), ST_EPARSE);
    assert_int_equal(st_json_str(&d, 1, &out), ST_EPARSE);
    assert_int_equal(st_json_str(&d, 7, &out), ST_EPARSE);
    assert_false(st_json_streq(&d, 1, "1"));
    st_buf_release(&out);
    st_json_release(&d);
}

struct i64_case {
    const char *json;
    int rc;
    int64_t v;
};

static const struct i64_case i64_cases[] = {
    {"0", 0, 0},
    {"-0", 0, 0},
    {"42", 0, 42},
    {"-42", 0, -42},
    {"9223372036854775807", 0, INT64_MAX},
    {"-9223372036854775808", 0, INT64_MIN},
    {"9223372036854775808", ST_EPARSE, 0},
    {"-9223372036854775809", ST_EPARSE, 0},
    {"123456789012345678901234567890", ST_EPARSE, 0},
    /* Integers written as floats. */
    {"1.0", 0, 1},
    {"-1.000", 0, -1},
    {"2e3", 0, 2000},
    {"2E+3", 0, 2000},
    {"1.5e1", 0, 15},
    {"150e-1", 0, 15},
    {"0.0", 0, 0},
    {"-0.0e-5", 0, 0},
    {"0e99999999999", 0, 0},
    {"1.0000000000000000000000000000000000", 0, 1},
    {"9007199254740993.0", 0, 9007199254740993},    /* 2^53 + 1: no double holds it */
    {"9.2233720368547e18", 0, 9223372036854700000}, /* in range though written as a float */
    {"9.223372036854775807e18", 0, INT64_MAX},
    {"-9.223372036854775808e18", 0, INT64_MIN},
    {"9.223372036854775808e18", ST_EPARSE, 0},
    {"1e19", ST_EPARSE, 0},
    {"1e400", ST_EPARSE, 0},
    {"-1e400", ST_EPARSE, 0},
    /* Not integers. */
    {"1.5", ST_EPARSE, 0},
    {"0.1", ST_EPARSE, 0},
    {"1e-1", ST_EPARSE, 0},
    {"1.00000000000000001", ST_EPARSE, 0}, /* would round to the double 1.0 */
    {"1e-400", ST_EPARSE, 0},
    {"\"1\"", ST_EPARSE, 0},
    {"true", ST_EPARSE, 0},
    {"null", ST_EPARSE, 0},
    {"[1]", ST_EPARSE, 0},
};

static void test_i64(void **state)
{
    (void)state;
    struct st_json d;
    st_json_init(&d, 0);
    for (size_t i = 0; i < COUNT(i64_cases); i++) {
        const struct i64_case *c = &i64_cases[i];
        assert_int_equal(parse(&d, c->json), 0);
        int64_t v = 12345;
        int rc = st_json_i64(&d, 0, &v);
        if (rc != c->rc || (rc == 0 && v != c->v)) {
            fail_msg("%s: rc %d v %lld, want rc %d v %lld", c->json, rc, (long long)v, c->rc,
                     (long long)c->v);
        }
    }
    /* Out of range token index. */
    int64_t v;
    assert_int_equal(st_json_i64(&d, -1, &v), ST_EPARSE);
    st_json_release(&d);
}

static void test_f64(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        double v;
    } cases[] = {
        {"0", 0.0},
        {"1.5", 1.5},
        {"-42", -42.0},
        {"1e-5", 1e-5},
        {"2.5E+3", 2500.0},
        {"0.1", 0.1},
        {"9007199254740993", 9007199254740992.0},
        {"1.7976931348623157e308", 1.7976931348623157e308},
        {"5e-324", 5e-324},
    };
    struct st_json d;
    st_json_init(&d, 0);
    for (size_t i = 0; i < COUNT(cases); i++) {
        assert_int_equal(parse(&d, cases[i].json), 0);
        double v;
        assert_int_equal(st_json_f64(&d, 0, &v), 0);
        assert_true(v == cases[i].v);
    }
    double v;
    assert_int_equal(parse(&d, "-0"), 0);
    assert_int_equal(st_json_f64(&d, 0, &v), 0);
    assert_true(v == 0.0 && signbit(v));
    /* A number that ends the input: the reader must not look past it. */
    char exact[3] = {'1', '.', '5'};
    assert_int_equal(st_json_parse(&d, exact, sizeof(exact)), 0);
    assert_int_equal(st_json_f64(&d, 0, &v), 0);
    assert_true(v == 1.5);
    /* Valid numbers longer than any stack buffer: 123.45 and 1. followed by 400 zeros. */
    char long_num[410];
    memset(long_num, '0', sizeof(long_num));
    memcpy(long_num, "123.45", 6);
    long_num[sizeof(long_num) - 1] = '\0';
    assert_int_equal(parse(&d, long_num), 0);
    assert_int_equal(st_json_f64(&d, 0, &v), 0);
    assert_true(v == 123.45);
    memcpy(long_num, "00001.", 6);
    assert_int_equal(parse(&d, long_num + 4), 0);
    assert_int_equal(st_json_f64(&d, 0, &v), 0);
    assert_true(v == 1.0);
    int64_t iv;
    assert_int_equal(st_json_i64(&d, 0, &iv), 0);
    assert_int_equal(iv, 1);
    /* Not numbers. */
    assert_int_equal(parse(&d, "[\"1.5\",true]"), 0);
    assert_int_equal(st_json_f64(&d, 0, &v), ST_EPARSE);
    assert_int_equal(st_json_f64(&d, 1, &v), ST_EPARSE);
    assert_int_equal(st_json_f64(&d, 2, &v), ST_EPARSE);
    assert_int_equal(st_json_f64(&d, 3, &v), ST_EPARSE);
    st_json_release(&d);
}

static void test_bool(void **state)
{
    (void)state;
    struct st_json d;
    st_json_init(&d, 0);
    assert_int_equal(parse(&d, "[true,false,null,0,1,\"true\"]"), 0);
    assert_int_equal(st_json_bool(&d, 1), 1);
    assert_int_equal(st_json_bool(&d, 2), 0);
    for (int i = 3; i <= 6; i++) {
        assert_int_equal(st_json_bool(&d, i), ST_EPARSE);
    }
    assert_int_equal(st_json_bool(&d, 0), ST_EPARSE);
    assert_int_equal(st_json_bool(&d, 99), ST_EPARSE);
    st_json_release(&d);
}

/* ---- writer ---- */

static void test_writer_commas_nesting(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    struct st_jw w;
    st_jw_init(&w, &b);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "s", "v");
    st_jw_ki64(&w, "i", -1);
    st_jw_key(&w, "a");
    st_jw_arr_open(&w);
    st_jw_i64(&w, 1);
    st_jw_i64(&w, 2);
    st_jw_arr_close(&w);
    st_jw_kbool(&w, "b", 1);
    st_jw_kf64(&w, "f", 1.5);
    st_jw_ku64(&w, "u", UINT64_MAX);
    st_jw_key(&w, "o");
    st_jw_obj_open(&w);
    st_jw_obj_close(&w);
    st_jw_key(&w, "n");
    st_jw_null(&w);
    st_jw_key(&w, "r");
    st_jw_raw(&w, "[true]", 6);
    st_jw_kbool(&w, "no", 0);
    st_jw_obj_close(&w);
    assert_string_equal(st_buf_str(&b), "{\"s\":\"v\",\"i\":-1,\"a\":[1,2],\"b\":true,\"f\":1.5,"
                                        "\"u\":18446744073709551615,\"o\":{},\"n\":null,"
                                        "\"r\":[true],\"no\":false}");
    st_buf_clear(&b);
    st_jw_init(&w, &b);
    st_jw_arr_open(&w);
    st_jw_arr_open(&w);
    st_jw_arr_close(&w);
    st_jw_arr_open(&w);
    st_jw_i64(&w, INT64_MIN);
    st_jw_arr_close(&w);
    st_jw_obj_open(&w);
    st_jw_obj_close(&w);
    st_jw_str(&w, "");
    st_jw_u64(&w, 0);
    st_jw_arr_close(&w);
    assert_string_equal(st_buf_str(&b), "[[],[-9223372036854775808],{},\"\",0]");
    st_buf_release(&b);
}

static void expect_quote(const char *s, size_t n, const char *want)
{
    struct st_buf b;
    st_buf_init(&b);
    st_json_quote(&b, s, n);
    assert_string_equal(st_buf_str(&b), want);
    st_buf_release(&b);
}

#define EXPECT_QUOTE(lit, want) expect_quote(lit, sizeof(lit) - 1, want)

static void test_writer_escaping(void **state)
{
    (void)state;
    EXPECT_QUOTE("", "\"\"");
    EXPECT_QUOTE("plain /text/", "\"plain /text/\"");
    EXPECT_QUOTE("\"\\", "\"\\\"\\\\\"");
    EXPECT_QUOTE("\n\r\t", "\"\\n\\r\\t\"");
    EXPECT_QUOTE("\b\f\x01\x1f", "\"\\u0008\\u000c\\u0001\\u001f\"");
    EXPECT_QUOTE("a\0b", "\"a\\u0000b\"");
    EXPECT_QUOTE("\x7f", "\"\x7f\"");
    EXPECT_QUOTE("caf\xC3\xA9 \xF0\x9F\x98\x80", "\"caf\xC3\xA9 \xF0\x9F\x98\x80\"");
    /* Invalid UTF-8 becomes U+FFFD, a byte at a time. */
    EXPECT_QUOTE("a\xFF"
                 "b",
                 "\"a\xEF\xBF\xBD"
                 "b\"");
    EXPECT_QUOTE("\xC0\xAF", "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");
    EXPECT_QUOTE("\xED\xA0\x80", "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");
    EXPECT_QUOTE("x\xE2\x82", "\"x\xEF\xBF\xBD\xEF\xBF\xBD\"");
    EXPECT_QUOTE("\xF4\x90\x80\x80", "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");
    /* Keys are escaped the same way. */
    struct st_buf b;
    st_buf_init(&b);
    struct st_jw w;
    st_jw_init(&w, &b);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "k\"\n\xFF", "v");
    st_jw_key(&w, "n");
    st_jw_strn(&w, "a\0b", 3);
    st_jw_obj_close(&w);
    assert_string_equal(st_buf_str(&b), "{\"k\\\"\\n\xEF\xBF\xBD\":\"v\",\"n\":\"a\\u0000b\"}");
    st_buf_release(&b);
}

/* Writes v, checks that it parses back to the same bits, and returns the text in out. */
static void f64_round_trip(double v, struct st_buf *out)
{
    struct st_jw w;
    st_buf_clear(out);
    st_jw_init(&w, out);
    st_jw_f64(&w, v);
    struct st_json d;
    st_json_init(&d, 0);
    if (st_json_parse(&d, out->data, out->len) != 0) {
        fail_msg("%.17g wrote \"%s\", not JSON", v, out->data);
    }
    double back;
    assert_int_equal(st_json_f64(&d, 0, &back), 0);
    if (memcmp(&back, &v, sizeof(v)) != 0) {
        fail_msg("%.17g wrote \"%s\", read back %.17g", v, out->data, back);
    }
    st_json_release(&d);
}

static void test_writer_f64(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    static const struct {
        double v;
        const char *text;
    } shortest[] = {
        {0.0, "0"},     {-0.0, "-0"},    {1.5, "1.5"},    {0.1, "0.1"},
        {100.0, "100"}, {1e21, "1e+21"}, {1e-5, "1e-05"}, {-2.75, "-2.75"},
    };
    for (size_t i = 0; i < COUNT(shortest); i++) {
        f64_round_trip(shortest[i].v, &b);
        assert_string_equal(b.data, shortest[i].text);
    }
    static const double edge[] = {
        1.0 / 3,
        2.0 / 3,
        0.1 + 0.2,
        1e-300,
        5e-324,
        2.2250738585072014e-308,
        1.7976931348623157e308,
        -1.7976931348623157e308,
        9007199254740993.0,
        123456789.123456789,
    };
    for (size_t i = 0; i < COUNT(edge); i++) {
        f64_round_trip(edge[i], &b);
    }
    /* Seeded random bit patterns cover every exponent. */
    struct st_rng r;
    st_rng_seed(&r, 31337);
    for (int i = 0; i < 20000; i++) {
        uint64_t bits = st_rng_u64(&r);
        double v;
        memcpy(&v, &bits, sizeof(v));
        if (isfinite(v)) {
            f64_round_trip(v, &b);
        }
    }
    /* NaN and infinities have no JSON form. */
    struct st_jw w;
    st_buf_clear(&b);
    st_jw_init(&w, &b);
    st_jw_arr_open(&w);
    st_jw_f64(&w, NAN);
    st_jw_f64(&w, INFINITY);
    st_jw_f64(&w, -INFINITY);
    st_jw_obj_open(&w);
    st_jw_kf64(&w, "k", NAN);
    st_jw_obj_close(&w);
    st_jw_arr_close(&w);
    assert_string_equal(b.data, "[null,null,null,{\"k\":null}]");
    st_buf_release(&b);
}

/* A byte that is interesting to a UTF-8 or JSON encoder, or a whole valid sequence. */
static void random_piece(struct st_rng *r, struct st_buf *s)
{
    static const unsigned char bytes[] = {'a',  'Z',  ' ',  '"',  '\\', '/',  0x00, 0x01, 0x08,
                                          0x0a, 0x1f, 0x7f, 0x80, 0xbf, 0xc0, 0xc2, 0xdf, 0xe0,
                                          0xed, 0xa0, 0xf0, 0xf4, 0x90, 0x8f, 0xf5, 0xff};
    static const char *const seqs[] = {"\xC3\xA9",     "\xE2\x82\xAC",     "\xF0\x9F\x98\x80",
                                       "\xED\x9F\xBF", "\xF4\x8F\xBF\xBF", "\\u0041"};
    uint64_t k = st_rng_below(r, COUNT(bytes) + COUNT(seqs));
    if (k < COUNT(bytes)) {
        st_buf_putc(s, (char)bytes[k]);
    } else {
        st_buf_puts(s, seqs[k - COUNT(bytes)]);
    }
}

static void test_round_trip_strings(void **state)
{
    (void)state;
    struct st_rng r;
    st_rng_seed(&r, 4242);
    struct st_buf in, json, out;
    st_buf_init(&in);
    st_buf_init(&json);
    st_buf_init(&out);
    struct st_json d;
    st_json_init(&d, 0);
    int valid_seen = 0;
    for (int i = 0; i < 5000; i++) {
        st_buf_clear(&in);
        uint64_t len = st_rng_below(&r, 24);
        for (uint64_t k = 0; k < len; k++) {
            random_piece(&r, &in);
        }
        st_buf_clear(&json);
        struct st_jw w;
        st_jw_init(&w, &json);
        st_jw_obj_open(&w);
        st_jw_key(&w, st_buf_str(&in));
        st_jw_strn(&w, in.data, in.len);
        st_jw_obj_close(&w);
        /* Whatever the bytes, the writer's output is valid JSON and valid UTF-8. */
        assert_true(st_utf8_valid(json.data, json.len));
        assert_int_equal(st_json_parse(&d, json.data, json.len), 0);
        assert_int_equal(d.n, 3);
        st_buf_clear(&out);
        assert_int_equal(st_json_str(&d, 2, &out), 0);
        assert_true(st_utf8_valid(out.data, out.len));
        if (st_utf8_valid(in.data, in.len)) {
            /* Valid text comes back byte for byte. */
            valid_seen++;
            assert_int_equal(out.len, in.len);
            assert_memory_equal(out.data, in.data, in.len);
        }
    }
    assert_true(valid_seen > 100);
    st_json_release(&d);
    st_buf_release(&in);
    st_buf_release(&json);
    st_buf_release(&out);
}

static void test_round_trip_document(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    struct st_jw w;
    st_jw_init(&w, &b);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "model", "llama \"3\"\n\xC3\xA9");
    st_jw_ki64(&w, "min", INT64_MIN);
    st_jw_ku64(&w, "big", 18446744073709551615ull);
    st_jw_kf64(&w, "ratio", 0.1);
    st_jw_kf64(&w, "nan", NAN);
    st_jw_kbool(&w, "ok", 1);
    st_jw_key(&w, "list");
    st_jw_arr_open(&w);
    for (int i = 0; i < 3; i++) {
        st_jw_obj_open(&w);
        st_jw_ki64(&w, "i", i);
        st_jw_key(&w, "tags");
        st_jw_arr_open(&w);
        st_jw_str(&w, "t");
        st_jw_arr_close(&w);
        st_jw_obj_close(&w);
    }
    st_jw_arr_close(&w);
    st_jw_obj_close(&w);

    struct st_json d;
    st_json_init(&d, 0);
    assert_int_equal(st_json_parse(&d, b.data, b.len), 0);
    assert_true(st_json_streq(&d, st_json_get(&d, 0, "model"), "llama \"3\"\n\xC3\xA9"));
    int64_t v;
    assert_int_equal(st_json_i64(&d, st_json_get(&d, 0, "min"), &v), 0);
    assert_int_equal(v, INT64_MIN);
    /* A u64 above INT64_MAX is still a number; f64 reads it approximately. */
    double f;
    assert_int_equal(st_json_i64(&d, st_json_get(&d, 0, "big"), &v), ST_EPARSE);
    assert_int_equal(st_json_f64(&d, st_json_get(&d, 0, "big"), &f), 0);
    assert_true(f == 18446744073709551616.0);
    assert_int_equal(st_json_f64(&d, st_json_get(&d, 0, "ratio"), &f), 0);
    assert_true(f == 0.1);
    assert_int_equal(st_json_type(&d, st_json_get(&d, 0, "nan")), ST_JSON_NULL);
    assert_int_equal(st_json_bool(&d, st_json_get(&d, 0, "ok")), 1);
    int list = st_json_get(&d, 0, "list");
    assert_int_equal(d.toks[list].size, 3);
    for (uint32_t i = 0; i < 3; i++) {
        int item = st_json_at(&d, list, i);
        assert_int_equal(st_json_i64(&d, st_json_get(&d, item, "i"), &v), 0);
        assert_int_equal(v, i);
        assert_true(st_json_streq(&d, st_json_at(&d, st_json_get(&d, item, "tags"), 0), "t"));
    }
    st_json_release(&d);
    st_buf_release(&b);
}

/* st_json_num: a number, NaN for absent and null (ok kept), NaN with ok cleared otherwise. */
static void test_num(void **state)
{
    (void)state;
    static const char doc[] = "{\"a\": 1.5, \"n\": null, \"s\": \"2\", \"o\": {\"b\": -3}}";
    struct st_json d;
    st_json_init(&d, 0);
    assert_int_equal(st_json_parse(&d, doc, strlen(doc)), 0);
    int ok = 1;
    assert_true(st_json_num(&d, 0, "a", &ok) == 1.5 && ok);
    assert_true(isnan(st_json_num(&d, 0, "missing", &ok)) && ok);
    assert_true(isnan(st_json_num(&d, 0, "n", &ok)) && ok);
    assert_true(isnan(st_json_num(&d, -1, "a", &ok)) && ok);
    assert_true(st_json_num(&d, st_json_get(&d, 0, "o"), "b", &ok) == -3 && ok);
    assert_true(isnan(st_json_num(&d, 0, "s", NULL)));
    assert_true(isnan(st_json_num(&d, 0, "s", &ok)) && !ok);
    st_json_release(&d);
}

static void test_text_check(void **state)
{
    (void)state;
    uint32_t line = 0;
    unsigned char b = 0;
    assert_int_equal(st_text_check("a: 1\n\tb: \xc3\xa9\r\n", 13, &line, &b), 0);
    assert_int_equal(st_text_check("a\nb\nc\x01", 6, &line, &b), ST_EPARSE);
    assert_int_equal(line, 3);
    assert_int_equal(b, 1);
    assert_int_equal(st_text_check("x\x7f", 2, &line, &b), ST_EPARSE);
    assert_int_equal(b, 0x7f);
    /* The two bytes that made libfyaml 0.7 loop forever (fuzz_plan). */
    assert_int_equal(st_text_check("%\xae", 2, &line, &b), ST_EUTF8);
    assert_int_equal(line, 1);
    assert_int_equal(st_text_check("ok\n\n\xed\xa0\x80", 7, &line, &b), ST_EUTF8);
    assert_int_equal(line, 3);
    assert_int_equal(st_text_check("a\0b", 3, &line, &b), ST_EPARSE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accept),
        cmocka_unit_test(test_reject_grammar),
        cmocka_unit_test(test_reject_utf8),
        cmocka_unit_test(test_depth_limit),
        cmocka_unit_test(test_max_toks),
        cmocka_unit_test(test_too_long),
        cmocka_unit_test(test_reuse_keeps_storage),
        cmocka_unit_test(test_utf8_valid),
        cmocka_unit_test(test_get_at_first_next),
        cmocka_unit_test(test_str_escapes),
        cmocka_unit_test(test_i64),
        cmocka_unit_test(test_f64),
        cmocka_unit_test(test_bool),
        cmocka_unit_test(test_writer_commas_nesting),
        cmocka_unit_test(test_writer_escaping),
        cmocka_unit_test(test_writer_f64),
        cmocka_unit_test(test_round_trip_strings),
        cmocka_unit_test(test_round_trip_document),
        cmocka_unit_test(test_text_check),
        cmocka_unit_test(test_num),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
