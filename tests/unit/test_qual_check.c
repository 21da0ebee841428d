/*
 * Tests for src/qual/check.c: every screening check's generator is a function of its seed (same
 * seed, same requests; another seed, other requests), its expected answer passes its own
 * verifier, and near misses fail: the simulator's wrong answer (digits and letters shifted), one
 * item missing or out of order, an off-by-one number. The verifiers shared with suites (exact,
 * regex, numeric, schema, code) get tables of right answers and near misses.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "qual/check.h"
#include "qual/runner.h"

/* The sim's wrong answer: every digit d becomes d + 1 mod 10, every letter the next one. */
static void corrupt(const char *in, struct st_buf *out)
{
    st_buf_clear(out);
    for (const char *p = in; *p; p++) {
        char ch = *p;
        if (ch >= '0' && ch <= '9') {
            ch = (char)('0' + (ch - '0' + 1) % 10);
        } else if (ch >= 'a' && ch <= 'z') {
            ch = (char)('a' + (ch - 'a' + 1) % 26);
        } else if (ch >= 'A' && ch <= 'Z') {
            ch = (char)('A' + (ch - 'A' + 1) % 26);
        }
        st_buf_putc(out, ch);
    }
}

static int verify_s(const struct st_verifier *v, const char *s)
{
    char ev[512];
    int rc = st_verify(v, s, strlen(s), ev, sizeof(ev));
    assert_true(ev[0] != '\0');
    return rc;
}

static void make(enum st_check_kind k, uint64_t seed, struct st_check *c)
{
    struct st_check_opts o = {.seed = seed, .context_tokens = 8192, .queued = 4};
    char err[256] = "";
    int rc = st_check_make(k, &o, c, err, sizeof(err));
    if (rc != 0) {
        fail_msg("%s: %s", st_check_name(k), err);
    }
    assert_true(c->nsteps >= 1);
}

/* Every kind: deterministic, the expected answer passes, the sim's wrong answer fails. */
static void test_every_check_right_and_wrong(void **state)
{
    (void)state;
    struct st_buf bad;
    st_buf_init(&bad);
    for (int k = 0; k < ST_CHECK_KINDS; k++) {
        struct st_check a, b, c;
        make((enum st_check_kind)k, 11, &a);
        make((enum st_check_kind)k, 11, &b);
        make((enum st_check_kind)k, 12, &c);
        assert_int_equal(a.nsteps, b.nsteps);
        for (uint32_t i = 0; i < a.nsteps; i++) {
            const struct st_check_step *s = &a.steps[i];
            assert_int_equal(s->messages.len, b.steps[i].messages.len);
            assert_memory_equal(s->messages.data, b.steps[i].messages.data, s->messages.len);
            assert_true(s->messages.data[0] == '[');
            assert_true(s->max_tokens > 0);
            if (s->v.kind == ST_VERIFY_COMPLETE) {
                continue;
            }
            assert_null(memchr(s->expect.data, '\n', s->expect.len));
            assert_true(s->expect.len <= 4096);
            assert_int_equal(verify_s(&s->v, s->expect.data), 1);
            corrupt(s->expect.data, &bad);
            assert_int_equal(verify_s(&s->v, bad.data), 0);
            assert_int_equal(verify_s(&s->v, ""), 0);
        }
        if (k != ST_CHECK_THROUGHPUT) {
            int differs = a.steps[0].messages.len != c.steps[0].messages.len ||
                          memcmp(a.steps[0].messages.data, c.steps[0].messages.data,
                                 a.steps[0].messages.len) != 0;
            assert_true(differs);
        }
        st_check_release(&a);
        st_check_release(&b);
        st_check_release(&c);
    }
    st_buf_release(&bad);
}

static void test_names(void **state)
{
    (void)state;
    enum st_check_kind k;
    for (int i = 0; i < ST_CHECK_KINDS; i++) {
        assert_int_equal(st_check_kind_of(st_check_name((enum st_check_kind)i), &k), 0);
        assert_int_equal((int)k, i);
    }
    assert_int_equal(st_check_kind_of("nope", &k), ST_ENOTFOUND);
    assert_string_equal(st_check_name(ST_CHECK_KINDS), "?");
}

static void test_arith_near_misses(void **state)
{
    (void)state;
    struct st_check c;
    make(ST_CHECK_ARITH, 5, &c);
    const struct st_verifier *v = &c.steps[0].v;
    char s[128];
    snprintf(s, sizeof(s), "Let me think.\nAnswer: %lld", (long long)v->answer);
    assert_int_equal(verify_s(v, s), 1);
    snprintf(s, sizeof(s), "<think>Answer: 1</think>Answer: %lld", (long long)v->answer);
    assert_int_equal(verify_s(v, s), 1);
    snprintf(s, sizeof(s), "Answer: %lld", (long long)v->answer + 1);
    assert_int_equal(verify_s(v, s), 0);
    snprintf(s, sizeof(s), "Answer: %lld</think>no idea", (long long)v->answer);
    assert_int_equal(verify_s(v, s), 0);
    st_check_release(&c);
}

static void test_json_check(void **state)
{
    (void)state;
    struct st_check c;
    make(ST_CHECK_JSON, 3, &c);
    const struct st_check_step *s = &c.steps[0];
    assert_true(s->response_format.len > 0);
    struct st_buf b;
    st_buf_init(&b);
    st_buf_printf(&b, "```json\n%s\n```", s->expect.data);
    assert_int_equal(verify_s(&s->v, b.data), 1);
    st_buf_clear(&b);
    st_buf_printf(&b, "Here it is: %s Done.", s->expect.data);
    assert_int_equal(verify_s(&s->v, b.data), 1);
    /* An extra member, a missing one, a string id: near misses. */
    st_buf_clear(&b);
    st_buf_append(&b, s->expect.data, s->expect.len - 1);
    st_buf_puts(&b, ",\"extra\":1}");
    assert_int_equal(verify_s(&s->v, b.data), 0);
    assert_int_equal(verify_s(&s->v, "{\"name\":\"x\"}"), 0);
    assert_int_equal(verify_s(&s->v, "not json"), 0);
    st_buf_release(&b);
    st_check_release(&c);
}

/* Reads the JSON body of a wire transcript (tests/data/wire/DIR/NAME: the curl line, the status
 * line and headers, a blank line, the body) into b. */
static void wire_body(const char *dir, const char *name, struct st_buf *b)
{
    const char *root = getenv("ST_TEST_DATA");
    char path[1024];
    snprintf(path, sizeof(path), "%s/wire/%s/%s", root ? root : "tests/data", dir, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char tmp[4096];
    size_t n;
    struct st_buf all;
    st_buf_init(&all);
    while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0) {
        st_buf_append(&all, tmp, n);
    }
    fclose(f);
    st_buf_putc(&all, '\0');
    const char *body = strstr(all.data, "\r\n\r\n");
    body = body ? body + 4 : strstr(all.data, "\n\n") + 2;
    st_buf_puts(b, body);
    st_buf_release(&all);
}

/* A refusal of media: any 4xx; a 5xx only when its message says what it does not take, as
 * llama.cpp b4748's 500 for an image part does (its real answer); a crash or overload is not. */
static void test_media_refused(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    wire_body("llamacpp-b4748", "errors_image.txt", &b);
    assert_non_null(strstr(b.data, "\"code\":500"));
    assert_int_equal(st_check_media_refused(500, b.data), 1);
    assert_int_equal(st_check_media_refused(400, "this model does not accept images"), 1);
    assert_int_equal(st_check_media_refused(415, NULL), 1);
    assert_int_equal(st_check_media_refused(500, "HTTP 500: image input is not supported - hint: "
                                                 "you may need to provide the mmproj"),
                     1);
    assert_int_equal(st_check_media_refused(500, "HTTP 500: CUDA error: out of memory"), 0);
    assert_int_equal(st_check_media_refused(503, "HTTP 503: Loading model"), 0);
    assert_int_equal(st_check_media_refused(500, "HTTP 500: unsupported operation"), 0);
    assert_int_equal(st_check_media_refused(500, NULL), 0);
    assert_int_equal(st_check_media_refused(200, "unsupported content"), 0);
    assert_int_equal(st_check_media_refused(0, "connect"), 0);
    /* Its message (decoded: many lines) folded to one line keeps the words. */
    struct st_json d;
    st_json_init(&d, 0);
    assert_int_equal(st_json_parse(&d, b.data, b.len), 0);
    struct st_buf m;
    st_buf_init(&m);
    assert_int_equal(st_json_str(&d, st_json_get(&d, st_json_get(&d, 0, "error"), "message"), &m),
                     0);
    st_json_release(&d);
    assert_int_equal(st_check_media_refused(500, m.data), 1);
    char msg[512];
    snprintf(msg, sizeof(msg), "%s", m.data);
    st_buf_release(&m);
    assert_non_null(strchr(msg, '\n'));
    st_check_one_line(msg);
    assert_null(strchr(msg, '\n'));
    assert_null(strchr(msg, '\r'));
    assert_null(strstr(msg, "  "));
    assert_non_null(strstr(msg, "Unsupported content part type"));
    assert_non_null(strstr(msg, "messages = [ { \"role\": \"user\""));
    st_buf_release(&b);
    char s[] = "\n  a\tb \r\n\n  c  \x01 d\n";
    st_check_one_line(s);
    assert_string_equal(s, "a b c d");
    char e[] = " \n\t ";
    st_check_one_line(e);
    assert_string_equal(e, "");
}

/* A long reply without JSON is quoted with its length, not as an empty reply; a JSON value left
 * open (cut at max_tokens) is validated as it stands. */
static void test_schema_evidence(void **state)
{
    (void)state;
    struct st_check c;
    make(ST_CHECK_JSON, 3, &c);
    const struct st_check_step *s = &c.steps[0];
    struct st_buf b;
    st_buf_init(&b);
    while (b.len < 3801) {
        st_buf_puts(&b, "LLaMALLaMA words and more words ");
    }
    b.len = 3801;
    b.data[b.len] = '\0';
    char ev[512];
    assert_int_equal(st_verify(&s->v, b.data, b.len, ev, sizeof(ev)), 0);
    assert_null(strstr(ev, "reply \"\""));
    assert_non_null(strstr(ev, "3801 characters"));
    assert_non_null(strstr(ev, "\"LLaMALLaMA words"));
    assert_null(strchr(ev, '\n'));
    st_buf_clear(&b);
    st_buf_puts(&b, "{\"name\": \"");
    while (b.len < 2000) {
        st_buf_puts(&b, "aaaa ");
    }
    assert_int_equal(st_verify(&s->v, b.data, b.len, ev, sizeof(ev)), 0);
    assert_non_null(strstr(ev, "reply ("));
    assert_non_null(strstr(ev, "\"{\"name\": \"aaaa"));
    st_buf_release(&b);
    st_check_release(&c);
}

static void test_words_and_order(void **state)
{
    (void)state;
    struct st_verifier v;
    st_verifier_init(&v);
    v.kind = ST_VERIFY_WORDS;
    v.min_share = 0.5;
    st_verifier_item(&v, "river", 5);
    st_verifier_item(&v, "stone", 5);
    st_verifier_item(&v, "4821", 4);
    st_verifier_item(&v, "mill", 4);
    assert_int_equal(verify_s(&v, "RIVER and stone"), 1);
    assert_int_equal(verify_s(&v, "rivers, stones, 48210"), 0); /* whole words only */
    assert_int_equal(verify_s(&v, "mill"), 0);                  /* 1 of 4 < 50% */
    v.kind = ST_VERIFY_ORDERED;
    assert_int_equal(verify_s(&v, "river; stone; 4821; mill"), 1);
    assert_int_equal(verify_s(&v, "river; 4821; stone; mill"), 0);
    assert_int_equal(verify_s(&v, "river; stone; 4821"), 0);
    st_verifier_release(&v);
}

static void test_ocr_share(void **state)
{
    (void)state;
    struct st_check c;
    make(ST_CHECK_OCR, 9, &c);
    const struct st_check_step *s = &c.steps[0];
    assert_int_equal(s->v.nitems, 40);
    assert_true(s->media);
    /* 36 of 40 words read is 90%: passes; 35 fails. */
    const char *w = s->v.items.data;
    struct st_buf b;
    st_buf_init(&b);
    for (uint32_t i = 0; i < 40; i++) {
        if (i >= 4) {
            st_buf_printf(&b, "%s ", w);
        }
        w += strlen(w) + 1;
    }
    assert_int_equal(verify_s(&s->v, b.data), 1);
    st_buf_clear(&b);
    w = s->v.items.data;
    for (uint32_t i = 0; i < 40; i++) {
        if (i >= 5) {
            st_buf_printf(&b, "%s ", w);
        }
        w += strlen(w) + 1;
    }
    assert_int_equal(verify_s(&s->v, b.data), 0);
    st_buf_release(&b);
    st_check_release(&c);
}

static void test_longret_near_context(void **state)
{
    (void)state;
    struct st_check c;
    struct st_check_opts o = {.seed = 2, .context_tokens = 32768};
    char err[128];
    assert_int_equal(st_check_make(ST_CHECK_LONGRET, &o, &c, err, sizeof(err)), 0);
    /* About 85% of the context at 4 characters a token. */
    size_t want = 32768u * 85 / 100 * 4;
    assert_true(c.steps[0].messages.len > want && c.steps[0].messages.len < want + 2048);
    assert_int_equal(c.steps[0].v.nitems, 3);
    st_check_release(&c);
    /* A tokenizer at 2 characters a token gets half the text. */
    o.chars_per_token = 2;
    assert_int_equal(st_check_make(ST_CHECK_LONGRET, &o, &c, err, sizeof(err)), 0);
    assert_true(c.steps[0].messages.len > want / 2 && c.steps[0].messages.len < want / 2 + 2048);
    st_check_release(&c);
}

static void test_queued_and_throughput(void **state)
{
    (void)state;
    struct st_check c;
    make(ST_CHECK_QUEUED, 1, &c);
    assert_true(c.concurrent);
    assert_int_equal(c.nsteps, 4);
    assert_true(c.steps[0].v.answer != c.steps[1].v.answer ||
                c.steps[0].messages.len != c.steps[1].messages.len);
    st_check_release(&c);
    make(ST_CHECK_THROUGHPUT, 1, &c);
    assert_int_equal(c.nsteps, 9);
    for (uint32_t i = 0; i < 9; i++) {
        assert_true(c.steps[i].ignore_eos);
        assert_int_equal(c.steps[i].max_tokens, 2048);
    }
    st_check_release(&c);
}

static void test_suite_verifiers(void **state)
{
    (void)state;
    struct st_verifier v;
    st_verifier_init(&v);
    v.kind = ST_VERIFY_EXACT;
    st_buf_puts(&v.want, "Canberra");
    assert_int_equal(verify_s(&v, "  Canberra\n"), 1);
    assert_int_equal(verify_s(&v, "Canberra."), 0);
    assert_int_equal(verify_s(&v, "canberra"), 0);
    assert_int_equal(verify_s(&v, "<think>Sydney?</think>Canberra"), 1);

    v.kind = ST_VERIFY_REGEX;
    st_buf_clear(&v.want);
    st_buf_puts(&v.want, "^No\\b.*13.*17");
    assert_int_equal(verify_s(&v, "No, 13 x 17"), 1);
    assert_int_equal(verify_s(&v, "Nope 13 x 17"), 0);
    assert_int_equal(verify_s(&v, "No, 13 x 19"), 0);

    v.kind = ST_VERIFY_NUMERIC;
    v.num = 121.5;
    v.tol = 0.01;
    assert_int_equal(verify_s(&v, "It travels\n121.5"), 1);
    assert_int_equal(verify_s(&v, "about 121.505 m"), 1);
    assert_int_equal(verify_s(&v, "121.6"), 0);
    assert_int_equal(verify_s(&v, "121.5 then 122"), 0);
    assert_int_equal(verify_s(&v, "none"), 0);
    v.num = 14793;
    v.tol = 0;
    assert_int_equal(verify_s(&v, "The sum is 14,793."), 1);
    assert_int_equal(verify_s(&v, "14792"), 0);
    v.num = -3;
    assert_int_equal(verify_s(&v, "x = -3"), 1);

    v.kind = ST_VERIFY_SCHEMA;
    st_buf_clear(&v.want);
    st_buf_puts(&v.want, "{\"type\":\"object\",\"required\":[\"a\"],\"properties\":{\"a\":"
                         "{\"type\":\"integer\"}}}");
    assert_int_equal(verify_s(&v, "{\"a\": 3}"), 1);
    assert_int_equal(verify_s(&v, "{\"a\": 3.5}"), 0);
    assert_int_equal(verify_s(&v, "{\"b\": 3}"), 0);
    st_verifier_release(&v);
}

static void test_code_verifier(void **state)
{
    (void)state;
    if (getenv("ST_UNDER_VALGRIND")) {
        skip(); /* the sandbox under valgrind: see tests/unit/test_qual_sandbox.c */
    }
    struct st_verifier v;
    st_verifier_init(&v);
    v.kind = ST_VERIFY_CODE;
    st_buf_puts(&v.want, "assert double(2) == 4\nassert double(-1) == -2\n");
    assert_int_equal(verify_s(&v, "Here:\n```python\ndef double(x):\n    return 2 * x\n```\n"), 1);
    assert_int_equal(verify_s(&v, "def double(x): return x * 2"), 1);
    /* Near misses: off by one, a syntax error, no code at all. */
    assert_int_equal(verify_s(&v, "```python\ndef double(x):\n    return 2 * x + 1\n```\n"), 0);
    assert_int_equal(verify_s(&v, "efg epvcmf(y): sfuvso 3 * y"), 0);
    assert_int_equal(verify_s(&v, "   "), 0);
    st_verifier_release(&v);
}

/* The request body: temperature 0, the seed, the cap (cut to the answer's tokens for the sim),
 * reasoning_effort passed through, response_format unless refused, ignore_eos only when fixed. */
static void test_request_body(void **state)
{
    (void)state;
    struct st_check c;
    make(ST_CHECK_JSON, 4, &c);
    struct st_qual_client cl = {.model = "m", .seed = 7, .reasoning_effort = "medium"};
    struct st_buf b;
    st_buf_init(&b);
    st_qual_body(&cl, &c.steps[0], 1, &b);
    assert_non_null(strstr(b.data, "\"temperature\":0,\"seed\":7,\"stream\":false"));
    assert_non_null(strstr(b.data, "\"max_tokens\":512,"));
    assert_non_null(strstr(b.data, "\"reasoning_effort\":\"medium\""));
    assert_non_null(strstr(b.data, "\"response_format\":{\"type\":\"json_schema\""));
    assert_null(strstr(b.data, "ignore_eos"));
    st_buf_clear(&b);
    cl.sim = 1;
    cl.reasoning_effort = NULL;
    st_qual_body(&cl, &c.steps[0], 0, &b);
    char want[64];
    snprintf(want, sizeof(want), "\"max_tokens\":%zu,", (c.steps[0].expect.len + 3) / 4);
    assert_non_null(strstr(b.data, want));
    assert_null(strstr(b.data, "response_format"));
    assert_null(strstr(b.data, "reasoning_effort"));
    st_check_release(&c);
    make(ST_CHECK_THROUGHPUT, 1, &c);
    st_buf_clear(&b);
    st_qual_body(&cl, &c.steps[0], 1, &b);
    assert_non_null(strstr(b.data, "\"max_tokens\":2048,"));
    assert_non_null(strstr(b.data, "\"ignore_eos\":true"));
    st_check_release(&c);
    st_buf_release(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_every_check_right_and_wrong),
        cmocka_unit_test(test_arith_near_misses),
        cmocka_unit_test(test_json_check),
        cmocka_unit_test(test_media_refused),
        cmocka_unit_test(test_schema_evidence),
        cmocka_unit_test(test_words_and_order),
        cmocka_unit_test(test_ocr_share),
        cmocka_unit_test(test_longret_near_context),
        cmocka_unit_test(test_queued_and_throughput),
        cmocka_unit_test(test_suite_verifiers),
        cmocka_unit_test(test_code_verifier),
        cmocka_unit_test(test_request_body),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
