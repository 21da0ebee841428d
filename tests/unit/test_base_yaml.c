/*
 * Tests for src/base/yaml.c, the one YAML reader: the input guard (size limit, control bytes,
 * invalid UTF-8 at LINE:COL, the two inputs that made libfyaml 0.7 loop forever, one document
 * only, '' text over several lines), syntax errors at libfyaml's position, every typed getter's
 * errors with NAME:LINE:COL (and the NO_COLUMN and NO_POSITION forms), unknown keys with a
 * suggestion, positions, iteration, aliases resolved or not, and '' unescaping.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "base/yaml.h"

static char err[512];

/* Scalar text is not NUL-terminated: compare it with its length. */
static void text_is(struct st_yaml *y, struct st_yaml_node *n, const char *want)
{
    size_t len;
    const char *s = st_yaml_text(y, n, &len);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(s, want, len);
}

/* Loads text as "t.yaml" with flags into y; returns st_yaml_load's code. */
static int load(struct st_yaml *y, const char *text, size_t len, unsigned flags)
{
    static struct st_yaml_opts o;
    memset(&o, 0, sizeof(o));
    o.name = "t.yaml";
    o.noun = "a test file";
    o.max_bytes = 4096;
    o.flags = flags;
    err[0] = '\0';
    st_yaml_init(y, &o, err, sizeof(err));
    return st_yaml_load(y, text, len);
}

/* text must fail to load with exactly msg. */
static void load_fails(const char *text, size_t len, unsigned flags, int rc, const char *msg)
{
    struct st_yaml y;
    assert_int_equal(load(&y, text, len, flags), rc);
    assert_string_equal(err, msg);
    st_yaml_release(&y);
}

static void test_guard(void **state)
{
    (void)state;
    char *big = malloc(4097);
    assert_non_null(big);
    memset(big, '#', 4097);
    load_fails(big, 4097, 0, ST_ETOOBIG,
               "t.yaml: 4097 bytes, more than the 4096 a test file may have");
    free(big);
    load_fails("a: 1\nb: \"x\xff\"\n", 12, 0, ST_EPARSE, "t.yaml:2:6: invalid UTF-8 (byte 0xff)");
    load_fails("a: \xc3\xa9\xc0\xaf\n", 8, 0, ST_EPARSE, "t.yaml:1:5: invalid UTF-8 (byte 0xc0)");
    load_fails("a: 1\x7f\n", 6, 0, ST_EPARSE, "t.yaml:1:5: control character (byte 0x7f)");
    load_fails("a: 1\0\n", 6, 0, ST_EPARSE, "t.yaml:1:5: control character (byte 0x00)");
    load_fails("a: 1\x01\n", 6, ST_YAML_NO_COLUMN, ST_EPARSE,
               "t.yaml:1: control character (byte 0x01)");
    load_fails("a: 1\x01\n", 6, ST_YAML_NO_POSITION, ST_EPARSE,
               "t.yaml: control character (byte 0x01)");
    /* The fuzzers' hangs: fuzz/corpus/plan/libfyaml-hang-directive-utf8.yaml is "%\xae". */
    load_fails("%\xae", 2, 0, ST_EPARSE, "t.yaml:1:2: invalid UTF-8 (byte 0xae)");
    load_fails("%YAML \xae\n", 8, 0, ST_EPARSE, "t.yaml:1:7: invalid UTF-8 (byte 0xae)");
    /* One document. */
    load_fails("a: 1\n---\nb: 2\n", 14, 0, ST_EPARSE,
               "t.yaml:3:1: expected one YAML document, got a second one");
    struct st_yaml y;
    assert_int_equal(load(&y, "a: 1\n---\nb: 2\n", 14, ST_YAML_FIRST_DOC), 0);
    assert_non_null(st_yaml_get(&y, st_yaml_root(&y), "a", NULL));
    st_yaml_release(&y);
    /* '' escapes over several lines are refused, on one line read by the helper. */
    load_fails("a: 'x''y\n  z'\n", 14, 0, ST_EPARSE,
               "t.yaml:1:5: single-quoted text with '' over several lines is not supported; "
               "write it on one line or in double quotes");
    assert_int_equal(load(&y, "'k''s': 'it''s'\n", 16, 0), 0);
    text_is(&y, st_yaml_get(&y, st_yaml_root(&y), "k's", NULL), "it's");
    st_yaml_release(&y);
    /* Empty streams have no root; no NUL is needed after the bytes. */
    assert_int_equal(load(&y, "# nothing\n", 10, 0), 0);
    assert_null(st_yaml_root(&y));
    st_yaml_release(&y);
    assert_int_equal(load(&y, NULL, 0, 0), 0);
    assert_null(st_yaml_root(&y));
    st_yaml_release(&y);
}

static void test_syntax(void **state)
{
    (void)state;
    load_fails("a: 1\na: 2\n", 10, 0, ST_EPARSE, "t.yaml:2:1: duplicate key");
    load_fails("a: 1\na: 2\n", 10, ST_YAML_NO_COLUMN, ST_EPARSE, "t.yaml:2: duplicate key");
    struct st_yaml y;
    assert_int_equal(load(&y, "a: [1, 2\n", 9, 0), ST_EPARSE);
    assert_memory_equal(err, "t.yaml:2:1: ", 12);
    st_yaml_release(&y);
    /* A prefix goes before guard and syntax messages. */
    struct st_yaml_opts o = {.name = "--set", .prefix = "k: ", .flags = ST_YAML_NO_POSITION};
    st_yaml_init(&y, &o, err, sizeof(err));
    assert_int_equal(st_yaml_load(&y, "a: 1\na: 2\n", 10), ST_EPARSE);
    assert_string_equal(err, "--set: k: duplicate key");
    st_yaml_release(&y);
}

static const char doc[] = "n: 42\n"            /* 1 */
                          "big: 99999999999\n" /* 2 */
                          "f: 2.5\n"           /* 3 */
                          "bad: 1e999\n"       /* 4 */
                          "b: true\n"          /* 5 */
                          "e: gqa\n"           /* 6 */
                          "s: \"a\\0b\"\n"     /* 7 */
                          "empty: ''\n"        /* 8 */
                          "none:\n"            /* 9 */
                          "list: [1, 2]\n"     /* 10 */
                          "map: {x: 1}\n"      /* 11 */
                          "word: hello\n"      /* 12 */
                          "neg: -3\n";         /* 13 */

static struct st_yaml y_doc;

static struct st_yaml_node *root(void)
{
    assert_int_equal(load(&y_doc, doc, sizeof(doc) - 1, 0), 0);
    return st_yaml_root(&y_doc);
}

static void test_getters(void **state)
{
    (void)state;
    struct st_yaml *y = &y_doc;
    struct st_yaml_node *r = root();
    static const char *const kinds[] = {"mha", "gqa", "mla", NULL};
    uint64_t u = 7;
    uint32_t u32 = 7;
    double d = 0;
    int b = -1, e = 0;
    char *s = NULL;
    /* Values read. */
    assert_int_equal(st_yaml_get_u64(y, r, "n", "t", 1, 0, 100, &u), 0);
    assert_int_equal(u, 42);
    assert_int_equal(st_yaml_get_u32(y, r, "n", "t", 1, 0, 100, &u32), 0);
    assert_int_equal(u32, 42);
    assert_int_equal(st_yaml_get_f64(y, r, "f", "t", 1, 0, 3, &d), 0);
    assert_true(d == 2.5);
    assert_int_equal(st_yaml_get_bool(y, r, "b", "t", 1, &b), 0);
    assert_int_equal(b, 1);
    assert_int_equal(st_yaml_get_enum(y, r, "e", "t", 1, kinds, &e), 0);
    assert_int_equal(e, 2);
    assert_int_equal(st_yaml_get_str(y, r, "word", "t", 1, &s), 0);
    assert_string_equal(s, "hello");
    free(s);
    /* Absent: unchanged, unless required. */
    u = 7;
    assert_int_equal(st_yaml_get_u64(y, r, "nope", "t", 0, 0, 100, &u), 0);
    assert_int_equal(u, 7);
    assert_int_equal(st_yaml_get_u64(y, r, "nope", "t", 1, 0, 100, &u), ST_EPARSE);
    assert_string_equal(err, "t.yaml:1:1: t: missing key 'nope'");
    /* Each type's errors, at the value. */
    assert_int_equal(st_yaml_get_u64(y, r, "n", "t", 1, 50, 100, &u), ST_EPARSE);
    assert_string_equal(err, "t.yaml:1:4: t.n: expected a whole number from 50 to 100, got '42'");
    assert_int_equal(st_yaml_get_u32(y, r, "big", "t", 1, 0, UINT32_MAX, &u32), ST_EPARSE);
    assert_string_equal(err, "t.yaml:2:6: t.big: expected a whole number from 0 to 4294967295, "
                             "got '99999999999'");
    assert_int_equal(st_yaml_get_u64(y, r, "neg", "t", 1, 0, 100, &u), ST_EPARSE);
    assert_string_equal(err, "t.yaml:13:6: t.neg: expected a whole number from 0 to 100, got '-3'");
    assert_int_equal(st_yaml_get_f64(y, r, "f", "t", 1, 0, 1, &d), ST_EPARSE);
    assert_string_equal(err, "t.yaml:3:4: t.f: expected a number from 0 to 1, got '2.5'");
    assert_int_equal(st_yaml_get_f64(y, r, "bad", "t", 1, -1e300, 1e300, &d), ST_EPARSE);
    assert_string_equal(err, "t.yaml:4:6: t.bad: expected a number from -1e+300 to 1e+300, got "
                             "'1e999'");
    assert_int_equal(st_yaml_get_bool(y, r, "word", "t", 1, &b), ST_EPARSE);
    assert_string_equal(err, "t.yaml:12:7: t.word: expected true or false, got 'hello'");
    assert_int_equal(st_yaml_get_enum(y, r, "word", "t", 1, kinds, &e), ST_EPARSE);
    assert_string_equal(err, "t.yaml:12:7: t.word: expected one of mha, gqa, mla, got 'hello'");
    /* The scalar checks every getter shares. */
    assert_int_equal(st_yaml_get_str(y, r, "s", "t", 1, &s), ST_EPARSE);
    assert_string_equal(err, "t.yaml:7:5: t.s: a NUL character in the value");
    assert_int_equal(st_yaml_get_str(y, r, "empty", "t", 1, &s), ST_EPARSE);
    assert_string_equal(err, "t.yaml:8:9: t.empty: empty value");
    assert_int_equal(st_yaml_get_u64(y, r, "none", "t", 1, 0, 1, &u), ST_EPARSE);
    assert_string_equal(err, "t.yaml:9:1: t.none: empty value");
    assert_int_equal(st_yaml_get_bool(y, r, "list", "t", 1, &b), ST_EPARSE);
    assert_string_equal(err, "t.yaml:10:8: t.list: expected a single value, not a list or mapping");
    assert_int_equal(st_yaml_get_f64(y, r, "map", "t", 1, 0, 1, &d), ST_EPARSE);
    assert_string_equal(err, "t.yaml:11:7: t.map: expected a single value, not a list or mapping");
    /* Sequences. */
    struct st_yaml_node *seq, *k;
    assert_int_equal(st_yaml_get_seq(y, r, "list", "t", 1, &seq, &k), 0);
    assert_int_equal(st_yaml_count(seq), 2);
    assert_int_equal(st_yaml_get_seq(y, r, "map", "t", 1, &seq, &k), ST_EPARSE);
    assert_string_equal(err, "t.yaml:11:7: t.map: expected a list");
    /* Node getters: the key gives the position when the value has none. */
    assert_int_equal(st_yaml_u64(y, k, NULL, "x.y", 0, 1, &u), ST_EPARSE);
    assert_string_equal(err, "t.yaml:11:1: x.y: expected a value");
    st_yaml_release(y);
}

static void test_describe_and_positions(void **state)
{
    (void)state;
    struct st_yaml *y = &y_doc;
    struct st_yaml_node *r = root();
    char got[128];
    st_yaml_describe(y, st_yaml_get(y, r, "word", NULL), got, sizeof(got));
    assert_string_equal(got, "'hello'");
    st_yaml_describe(y, st_yaml_get(y, r, "list", NULL), got, sizeof(got));
    assert_string_equal(got, "a list");
    st_yaml_describe(y, st_yaml_get(y, r, "map", NULL), got, sizeof(got));
    assert_string_equal(got, "a mapping");
    st_yaml_describe(y, st_yaml_get(y, r, "empty", NULL), got, sizeof(got));
    assert_string_equal(got, "an empty value");
    st_yaml_describe(y, NULL, got, sizeof(got));
    assert_string_equal(got, "an empty value");
    st_yaml_quote("a\x01"
                  "bcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz",
                  53, got, sizeof(got));
    assert_string_equal(got, "a\\x01bcdefghijklmnopqrstuvwxyzabcdefghijklm...");
    int line = 0, col = 0;
    assert_int_equal(st_yaml_pos(r, &line, &col), 0); /* a mapping: its first key */
    assert_int_equal(line, 1);
    assert_int_equal(col, 1);
    assert_int_equal(st_yaml_pos(st_yaml_get(y, r, "map", NULL), &line, &col), 0);
    assert_int_equal(line, 11);
    assert_int_equal(col, 7);
    assert_int_equal(st_yaml_pos(NULL, &line, &col), -1);
    assert_true(st_yaml_is_empty(st_yaml_get(y, r, "none", NULL)));
    assert_true(st_yaml_is_null(st_yaml_get(y, r, "none", NULL)));
    assert_false(st_yaml_is_empty(st_yaml_get(y, r, "empty", NULL))); /* quoted: a value */
    /* Iteration in document order. */
    void *it = NULL;
    struct st_yaml_node *k, *v;
    uint32_t pairs = 0;
    while (st_yaml_map_next(r, &it, &k, &v)) {
        pairs++;
    }
    assert_int_equal(pairs, 13);
    assert_int_equal(st_yaml_count(r), 13);
    it = NULL;
    struct st_yaml_node *item;
    uint64_t sum = 0, x;
    while ((item = st_yaml_seq_next(st_yaml_get(y, r, "list", NULL), &it)) != NULL) {
        assert_int_equal(st_yaml_u64(y, NULL, item, "list[]", 0, 9, &x), 0);
        sum += x;
    }
    assert_int_equal(sum, 3);
    /* Stored positions and the NAME: form. */
    assert_int_equal(st_yaml_fail_at(y, 3, 4, "at %d", 3), ST_EPARSE);
    assert_string_equal(err, "t.yaml:3:4: at 3");
    assert_int_equal(st_yaml_fail_at(y, 0, 0, "nowhere"), ST_EPARSE);
    assert_string_equal(err, "t.yaml: nowhere");
    assert_int_equal(st_yaml_fail(y, st_yaml_either(NULL, r), "either"), ST_EPARSE);
    assert_string_equal(err, "t.yaml:1:1: either");
    st_yaml_release(y);
}

static void test_unknown_keys(void **state)
{
    (void)state;
    static const char *const known[] = {"name", "target", "stages", "rules", NULL};
    assert_int_equal(st_yaml_distance("stages", 6, "stages", 6), 0);
    assert_int_equal(st_yaml_distance("stgaes", 6, "stages", 6), 2);
    assert_int_equal(st_yaml_distance("", 0, "rules", 5), 5);
    assert_string_equal(st_yaml_suggest("taget", 5, known), "target");
    assert_string_equal(st_yaml_suggest("rule", 4, known), "rules");
    assert_null(st_yaml_suggest("colour", 6, known));
    struct st_yaml y;
    assert_int_equal(load(&y, "name: x\ntaget: y\n", 17, 0), 0);
    assert_int_equal(st_yaml_check_keys(&y, st_yaml_root(&y), NULL, "the plan", known), ST_EPARSE);
    assert_string_equal(err, "t.yaml:2:1: unknown key 'taget' in the plan (known: name, target, "
                             "stages, rules); did you mean target?");
    st_yaml_release(&y);
    assert_int_equal(load(&y, "name: x\ncolour: y\n", 18, ST_YAML_NO_COLUMN), 0);
    assert_int_equal(st_yaml_check_keys(&y, st_yaml_root(&y), NULL, "the plan", known), ST_EPARSE);
    assert_string_equal(err, "t.yaml:2: unknown key 'colour' in the plan (known: name, target, "
                             "stages, rules)");
    st_yaml_release(&y);
    assert_int_equal(load(&y, "- 1\n", 4, 0), 0);
    assert_int_equal(st_yaml_check_keys(&y, st_yaml_root(&y), NULL, "the plan", known), ST_EPARSE);
    assert_string_equal(err, "t.yaml:1:3: the plan: expected a mapping");
    st_yaml_release(&y);
    assert_int_equal(load(&y, "? [a]\n: 1\n", 10, 0), 0);
    assert_int_equal(st_yaml_check_keys(&y, st_yaml_root(&y), NULL, "the plan", known), ST_EPARSE);
    assert_string_equal(err, "t.yaml:1:4: the plan: keys must be plain names");
    st_yaml_release(&y);
}

static void test_aliases(void **state)
{
    (void)state;
    static const char text[] = "base: &b {image: x, tag: '1'}\n"
                               "svc:\n"
                               "  <<: *b\n"
                               "  tag: '2'\n"
                               "ref: *b\n";
    struct st_yaml y;
    assert_int_equal(load(&y, text, sizeof(text) - 1, ST_YAML_RESOLVE), 0);
    struct st_yaml_node *svc = st_yaml_get(&y, st_yaml_root(&y), "svc", NULL);
    text_is(&y, st_yaml_get(&y, svc, "image", NULL), "x");
    text_is(&y, st_yaml_get(&y, svc, "tag", NULL), "2");
    assert_true(st_yaml_is_map(st_yaml_get(&y, st_yaml_root(&y), "ref", NULL)));
    st_yaml_release(&y);
    /* Unresolved, an alias is neither a scalar nor a container. */
    assert_int_equal(load(&y, "a: &x 4\nb: *x\n", 14, 0), 0);
    struct st_yaml_node *b = st_yaml_get(&y, st_yaml_root(&y), "b", NULL);
    assert_true(st_yaml_is_alias(b));
    assert_false(st_yaml_is_scalar(b));
    char got[64];
    st_yaml_describe(&y, b, got, sizeof(got));
    assert_string_equal(got, "an alias (*x)");
    st_yaml_release(&y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_guard),        cmocka_unit_test(test_syntax),
        cmocka_unit_test(test_getters),      cmocka_unit_test(test_describe_and_positions),
        cmocka_unit_test(test_unknown_keys), cmocka_unit_test(test_aliases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
