/*
 * Tests for src/qual/suite.c: a suite with every verifier parses into questions whose expected
 * answers pass; the shipped suites/quality.yaml and suites/screening.yaml parse (7 questions, 10
 * checks); bad files give FILE:LINE messages and ST_EPARSE (unknown verifier, key or check, a bad
 * schema at the schema's own line, an expect that fails its verifier, YAML syntax, duplicates).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qual/suite.h"

static const char good[] = "suite: mine\n"
                           "max_tokens: 512\n"
                           "checks: [arithmetic, ocr]\n"
                           "questions:\n"
                           "  - name: cap\n"
                           "    prompt: capital of France?\n"
                           "    verify: exact\n"
                           "    answer: Paris\n"
                           "  - name: num\n"
                           "    prompt: pi?\n"
                           "    verify: numeric\n"
                           "    answer: 3.14159\n"
                           "    tolerance: 0.001\n"
                           "    max_tokens: 64\n"
                           "  - name: re\n"
                           "    prompt: say yes\n"
                           "    verify: regex\n"
                           "    pattern: '^[Yy]es'\n"
                           "    expect: 'Yes.'\n";

static void test_good(void **state)
{
    (void)state;
    struct st_suite s;
    char err[512] = "";
    assert_int_equal(st_suite_parse("good.yaml", good, strlen(good), &s, err, sizeof(err)), 0);
    assert_string_equal(s.name, "mine");
    assert_int_equal(s.n, 5);
    assert_true(s.items[0].builtin);
    assert_int_equal(s.items[1].kind, ST_CHECK_OCR);
    assert_false(s.items[2].builtin);
    assert_string_equal(s.items[2].name, "cap");
    assert_int_equal(s.items[2].step.v.kind, ST_VERIFY_EXACT);
    assert_string_equal(s.items[2].step.expect.data, "Paris");
    assert_int_equal(s.items[2].step.max_tokens, 512);
    assert_int_equal(s.items[3].step.max_tokens, 64);
    assert_int_equal(s.items[3].line, 9);
    assert_true(strstr(s.items[2].step.messages.data, "capital of France?") != NULL);
    assert_int_equal(st_verify(&s.items[4].step.v, "yes sir", 7, NULL, 0), 1);
    assert_int_equal(st_verify(&s.items[4].step.v, "no", 2, NULL, 0), 0);
    st_suite_release(&s);
}

static void parse_file(const char *name, struct st_suite *s)
{
    /* tests/meson.build sets ST_SUITES_DIR; tests/data need not exist in a clean clone. */
    const char *dir = getenv("ST_SUITES_DIR");
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir != NULL ? dir : "suites", name);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fail_msg("cannot open %s", path);
    }
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    char err[512] = "";
    int rc = st_suite_parse(path, buf, n, s, err, sizeof(err));
    if (rc != 0) {
        fail_msg("%s", err);
    }
}

static void test_shipped(void **state)
{
    (void)state;
    struct st_suite s;
    parse_file("quality.yaml", &s);
    assert_string_equal(s.name, "quality");
    assert_int_equal(s.n, 7);
    int kinds[ST_VERIFY_KINDS] = {0};
    for (uint32_t i = 0; i < s.n; i++) {
        assert_false(s.items[i].builtin);
        kinds[s.items[i].step.v.kind]++;
        assert_false(s.items[i].step.ignore_eos);
    }
    assert_int_equal(kinds[ST_VERIFY_CODE], 2);
    assert_true(kinds[ST_VERIFY_EXACT] && kinds[ST_VERIFY_REGEX] && kinds[ST_VERIFY_NUMERIC] &&
                kinds[ST_VERIFY_SCHEMA]);
    /* The code questions' expected answers pass their fixed tests in the sandbox (not under
     * valgrind, which does not emulate Landlock, seccomp or the namespaces). */
    for (uint32_t i = 0; i < s.n && !getenv("ST_UNDER_VALGRIND"); i++) {
        const struct st_check_step *st = &s.items[i].step;
        char ev[512];
        assert_int_equal(st_verify(&st->v, st->expect.data, st->expect.len, ev, sizeof(ev)), 1);
    }
    st_suite_release(&s);
    parse_file("screening.yaml", &s);
    assert_int_equal(s.n, ST_CHECK_KINDS);
    for (uint32_t i = 0; i < s.n; i++) {
        assert_true(s.items[i].builtin);
        assert_int_equal((int)s.items[i].kind, (int)i);
    }
    st_suite_release(&s);
}

struct bad_case {
    const char *text;
    const char *want; /* in the message, after "bad.yaml:" */
};

static const struct bad_case bad[] = {
    {"questions:\n  - name: a\n    prompt: hi\n    verify: fuzzy\n    answer: x\n",
     "bad.yaml:4: unknown verifier 'fuzzy'"},
    {"questions:\n  - name: a\n    prompt: hi\n    verify: schema\n    expect: '{}'\n"
     "    schema: |\n      {\"type\": \"object\",\n       \"minLenght\": 3}\n",
     "bad.yaml:8: bad schema at '/minLenght': unknown keyword"},
    {"checks: [arithmetic, nope]\n", "bad.yaml:1: unknown check 'nope'"},
    {"checks:\n  - arithmetic\n  - json\n  - arithmetic\n",
     "bad.yaml:4: 'arithmetic' is named twice"},
    {"questions:\n  - name: a\n    prompt: hi\n    verify: exact\n    answr: x\n",
     "bad.yaml:5: unknown question key 'answr' (did you mean answer?)"},
    {"questions:\n  - name: a\n    prompt: hi\n    verify: exact\n",
     "bad.yaml:2: an exact question"},
    {"questions:\n  - name: a\n    prompt: hi\n    verify: regex\n    pattern: '^yes'\n"
     "    expect: 'no'\n",
     "bad.yaml:2: question 'a': expect fails its own verifier"},
    {"questions:\n  - name: a\n    prompt: hi\n    verify: numeric\n    answer: x\n"
     "    tolerance: 1\n",
     "bad.yaml:5: answer must be a number"},
    {"questions:\n  - name: a\n    prompt: hi\n    verify: code\n    tests: 'assert f()'\n",
     "bad.yaml:2: question 'a' (code) needs expect"},
    {"checks: [arithmetic\n", "bad.yaml:2:"},
    {"suite: x\nfoo: 1\n", "bad.yaml:2: unknown key 'foo'"},
    {"suite: x\n", "bad.yaml: the suite has no checks"},
    {"questions:\n  - name: a\n    prompt: hi\n    verify: regex\n    pattern: x\n"
     "    expect: \"x\\r\\nX-Evil: 1\"\n",
     "bad.yaml:2: question 'a': expect must be one line"},
    {"questions:\n  - name: \"a\\r\\nX-Evil: 1\"\n    prompt: hi\n    verify: exact\n"
     "    answer: x\n",
     "bad.yaml:2: name must be 1 to 63 of"},
    {"max_tokens: 0\nchecks: [json]\n", "bad.yaml:1: max_tokens must be an integer"},
    {"suite: x\nchekcs: [json]\n",
     "bad.yaml:2: unknown key 'chekcs' in the suite (known: suite, max_tokens, checks, "
     "questions); did you mean checks?"},
    {"checks: [json]\n---\nchecks: [json]\n",
     "bad.yaml:3: expected one YAML document, got a second one"},
    {"checks: [json]\nmax_tokens: '\xc3'\n", "bad.yaml:2: invalid UTF-8 (byte 0xc3)"},
};

static void test_bad(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct st_suite s;
        char err[512] = "";
        int rc = st_suite_parse("bad.yaml", bad[i].text, strlen(bad[i].text), &s, err, sizeof(err));
        if (rc != ST_EPARSE || strstr(err, bad[i].want) == NULL) {
            fail_msg("case %zu: rc %d, message '%s', want '%s'", i, rc, err, bad[i].want);
        }
        assert_int_equal(s.n, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),
        cmocka_unit_test(test_shipped),
        cmocka_unit_test(test_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
