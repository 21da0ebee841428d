/*
 * Tests for src/qual/arith.c: the generator is a function of the seed, every template's answer
 * matches an independent recomputation from the numbers in the text (which the text really
 * holds), answers stay positive and far inside int64; the verifier reads the final integer in
 * the phrasings models use and rejects near misses (off by one, another number, a fraction).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "qual/arith.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The answer from the template's operands, written out separately from arith.c. */
static int64_t recompute(const struct st_arith *p)
{
    const int64_t *o = p->ops;
    switch (p->tmpl) {
    case ST_ARITH_WAREHOUSE: /* a boxes of b, ship c boxes, receive d boxes of b, lose e */
        return o[0] * o[1] - o[2] * o[1] + o[3] * o[1] - o[4];
    case ST_ARITH_FACTORY: { /* rate, hours, days, rejects, crate */
        int64_t made = o[0] * o[1] * o[2];
        assert_int_equal((made - o[3]) % o[4], 0);
        return (made - o[3]) / o[4];
    }
    case ST_ARITH_SHOP: /* money, notebooks, price, pens, price, earned */
        return o[0] - o[1] * o[2] - o[3] * o[4] + o[5];
    case ST_ARITH_TRAIN: /* wagons, seats, board, leave, board */
        return o[0] * o[1] - o[2] + o[3] - o[4];
    case ST_ARITH_ORCHARD: { /* rows, trees, fruit per tree, bag, price */
        int64_t fruit = o[0] * o[1] * o[2];
        assert_int_equal(fruit % o[3], 0);
        return fruit / o[3] * o[4];
    }
    default:
        fail_msg("template %d", (int)p->tmpl);
        return 0;
    }
}

static int contains_number(const char *text, int64_t v)
{
    char want[32];
    snprintf(want, sizeof(want), "%lld", (long long)v);
    size_t n = strlen(want);
    /* As a whole number: not inside a longer one. */
    for (const char *p = strstr(text, want); p; p = strstr(p + 1, want)) {
        int before = p > text && p[-1] >= '0' && p[-1] <= '9';
        int after = p[n] >= '0' && p[n] <= '9';
        if (!before && !after) {
            return 1;
        }
    }
    return 0;
}

static void test_same_seed_same_problem(void **state)
{
    (void)state;
    for (uint64_t seed = 0; seed < 200; seed++) {
        struct st_arith a, b;
        st_arith_make(seed, &a);
        st_arith_make(seed, &b);
        assert_memory_equal(&a, &b, sizeof(a));
    }
}

static void test_seeds_differ(void **state)
{
    (void)state;
    /* Same template (seeds 5 apart), different numbers. */
    struct st_arith a, b;
    int same = 0;
    for (uint64_t seed = 0; seed < 100; seed++) {
        st_arith_make(seed, &a);
        st_arith_make(seed + ST_ARITH_TEMPLATES, &b);
        assert_int_equal(a.tmpl, b.tmpl);
        same += strcmp(a.text, b.text) == 0;
    }
    assert_int_equal(same, 0);
}

static void test_template_from_seed(void **state)
{
    (void)state;
    struct st_arith p;
    for (uint64_t seed = 0; seed < 20; seed++) {
        st_arith_make(seed, &p);
        assert_int_equal(p.tmpl, (int)(seed % ST_ARITH_TEMPLATES));
        assert_int_equal(p.seed, seed);
    }
    assert_string_equal(st_arith_tmpl_name(ST_ARITH_WAREHOUSE), "warehouse");
    assert_string_equal(st_arith_tmpl_name(ST_ARITH_ORCHARD), "orchard");
    assert_string_equal(st_arith_tmpl_name(ST_ARITH_TEMPLATES), "?");
}

static void test_answers_recomputed(void **state)
{
    (void)state;
    for (int t = 0; t < ST_ARITH_TEMPLATES; t++) {
        for (uint64_t seed = 0; seed < 2000; seed++) {
            struct st_arith p;
            st_arith_make_tmpl(seed, (enum st_arith_template)t, &p);
            assert_int_equal(p.tmpl, t);
            assert_int_equal(recompute(&p), p.answer);
            assert_true(p.answer > 0);
            assert_true(p.answer < 10000000000ll);
            assert_in_range(p.steps, 3, 5);
            for (int i = 0; i < p.nops; i++) {
                if (!contains_number(p.text, p.ops[i])) {
                    fail_msg("seed %llu: %lld not in \"%s\"", (unsigned long long)seed,
                             (long long)p.ops[i], p.text);
                }
            }
            assert_non_null(strstr(p.text, "\"Answer: N\""));
            assert_true(strlen(p.text) < ST_ARITH_TEXT_MAX - 1);
        }
    }
}

/* Formats v with ',' thousands groups. */
static void with_commas(int64_t v, char *out, size_t cap)
{
    char digits[32];
    int n = snprintf(digits, sizeof(digits), "%lld", (long long)v);
    size_t k = 0;
    for (int i = 0; i < n && k + 2 < cap; i++) {
        if (i > 0 && (n - i) % 3 == 0) {
            out[k++] = ',';
        }
        out[k++] = digits[i];
    }
    out[k] = '\0';
}

static void test_verifier_phrasings(void **state)
{
    (void)state;
    struct st_arith p;
    st_arith_make(12345, &p);
    int64_t n = p.answer;
    char commas[40];
    with_commas(n, commas, sizeof(commas));
    const char *const fmts[] = {
        "Answer: %s",
        "answer: %s",
        "ANSWER:%s",
        "The answer is %s.",
        "So the final answer is: %s items.",
        "Final Answer: **%s**",
        "**Answer:** %s",
        "Answer = %s",
        "We get 12 + 30 = 42, so there are %s left.",
        "Total = %s",
        "%s",
        "%s.",
        "There are **%s** items in total, from 3 steps.",
        "The result is $\\boxed{%s}$ and we used 4 steps.",
        "Answer: $%s",
        "<think>maybe the answer: 7</think>Answer: %s",
        "Answer: %s\n\nCheck: 37 boxes x 24 items = 888.",
    };
    char text[512];
    for (size_t i = 0; i < COUNT(fmts); i++) {
        for (int grouped = 0; grouped < 2; grouped++) {
            char num[40];
            snprintf(num, sizeof(num), "%s", commas);
            if (!grouped) {
                snprintf(num, sizeof(num), "%lld", (long long)n);
            }
            snprintf(text, sizeof(text), fmts[i], num);
            int64_t got = -1;
            if (!st_arith_check(&p, text, strlen(text), &got)) {
                fail_msg("rejected \"%s\" (read %lld, want %lld)", text, (long long)got,
                         (long long)n);
            }
            assert_int_equal(got, n);
        }
    }
}

static void test_verifier_near_misses(void **state)
{
    (void)state;
    struct st_arith p;
    st_arith_make(777, &p);
    int64_t n = p.answer;
    char text[512];
    const int64_t wrong[] = {n + 1, n - 1, n * 10, n / 10, 42, -n};
    for (size_t i = 0; i < COUNT(wrong); i++) {
        snprintf(text, sizeof(text), "Answer: %lld", (long long)wrong[i]);
        assert_false(st_arith_check(&p, text, strlen(text), NULL));
        snprintf(text, sizeof(text), "The warehouse holds %lld items.", (long long)wrong[i]);
        assert_false(st_arith_check(&p, text, strlen(text), NULL));
    }
    /* The right number early, a different final one: the last one counts. */
    snprintf(text, sizeof(text), "First I got %lld, but correcting a step it is %lld.",
             (long long)n, (long long)(n + 3));
    assert_false(st_arith_check(&p, text, strlen(text), NULL));
    /* A marked answer wins over the number after it... */
    snprintf(text, sizeof(text), "Answer: %lld (from 4 steps)", (long long)n);
    assert_true(st_arith_check(&p, text, strlen(text), NULL));
    /* ...but a wrong marked answer is not rescued by the right number elsewhere. */
    snprintf(text, sizeof(text), "It is %lld... Answer: %lld", (long long)n, (long long)(n + 1));
    assert_false(st_arith_check(&p, text, strlen(text), NULL));
    /* Fractions and no number at all. */
    snprintf(text, sizeof(text), "Answer: %lld.5", (long long)n);
    assert_false(st_arith_check(&p, text, strlen(text), NULL));
    assert_false(st_arith_check(&p, "I cannot tell.", 14, NULL));
    assert_false(st_arith_check(&p, "", 0, NULL));
    /* Only the reply after the reasoning counts. */
    snprintf(text, sizeof(text), "<think>Answer: %lld</think>I do not know.", (long long)n);
    assert_false(st_arith_check(&p, text, strlen(text), NULL));
}

static void test_extract_table(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int rc;
        int64_t v;
    } cases[] = {
        {"42", 0, 42},
        {"1,234", 0, 1234},
        {"1,234,567.", 0, 1234567},
        {"1,234.00", 0, 1234},
        {"12.5", ST_EPARSE, 0},
        {"Answer: 3.25", ST_EPARSE, 0},
        {"from 3 to 4", 0, 4},
        {"3-5", 0, 5},
        {"it is -17", 0, -17},
        {"x-17", 0, 17},
        {"1,23", 0, 23},
        {"12,345,67", 0, 67},
        {"answers: 5, then 6", 0, 6},
        {"the answer depends on 7 and 8", 0, 8},
        {"The answer is 9, not 10.", 0, 9},
        {"**12** and **13 apples** and **none**", 0, 13},
        {"\\boxed{1,024} then 3", 0, 1024},
        {"1234567890123456789", -ERANGE, 0},
        {"123456789012345678", 0, 123456789012345678ll},
        {"no digits here", ST_ENOTFOUND, 0},
        {"</think>", ST_ENOTFOUND, 0},
        {"0007", 0, 7},
    };
    for (size_t i = 0; i < COUNT(cases); i++) {
        int64_t v = -99;
        int rc = st_arith_extract(cases[i].text, strlen(cases[i].text), &v);
        if (rc != cases[i].rc || (rc == 0 && v != cases[i].v)) {
            fail_msg("\"%s\": rc %d value %lld, want rc %d value %lld", cases[i].text, rc,
                     (long long)v, cases[i].rc, (long long)cases[i].v);
        }
    }
    /* NUL bytes are ordinary bytes, and the length bounds the text. */
    int64_t v;
    assert_int_equal(st_arith_extract("5\0 6", 4, &v), 0);
    assert_int_equal(v, 6);
    assert_int_equal(st_arith_extract("56", 1, &v), 0);
    assert_int_equal(v, 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_seed_same_problem), cmocka_unit_test(test_seeds_differ),
        cmocka_unit_test(test_template_from_seed),     cmocka_unit_test(test_answers_recomputed),
        cmocka_unit_test(test_verifier_phrasings),     cmocka_unit_test(test_verifier_near_misses),
        cmocka_unit_test(test_extract_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
