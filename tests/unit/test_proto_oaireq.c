/*
 * Tests for src/proto/oaireq.c: exact bodies for chat and completions, fields left out when not
 * set, extra_body overriding and adding keys, bad extra_body (message, out untouched), escaping.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "proto/oaireq.h"

/* Builds r and compares the body with want; the body must also be valid JSON. */
static void expect_body(const struct st_oaireq *r, const char *want)
{
    struct st_buf out;
    char err[128] = "";
    st_buf_init(&out);
    assert_int_equal(st_oaireq_build(r, &out, err, sizeof(err)), 0);
    assert_string_equal(err, "");
    assert_string_equal(st_buf_str(&out), want);
    struct st_json d;
    st_json_init(&d, 0);
    assert_int_equal(st_json_parse(&d, out.data, out.len), 0);
    assert_int_equal(st_json_type(&d, 0), ST_JSON_OBJECT);
    st_json_release(&d);
    st_buf_release(&out);
}

static void set_prompt(struct st_oaireq *r, const char *p)
{
    r->prompt = p;
    r->prompt_len = strlen(p);
}

static void test_defaults(void **state)
{
    (void)state;
    struct st_oaireq r;
    st_oaireq_defaults(&r);
    assert_int_equal(r.api, ST_API_CHAT);
    assert_true(r.stream);
    assert_true(r.include_usage);
    assert_int_equal(r.max_tokens, -1);
    assert_int_equal(r.min_tokens, -1);
    assert_false(r.ignore_eos);
    assert_false(r.has_temperature);
    assert_false(r.has_seed);
    assert_null(r.model);
    assert_null(r.extra_body);
    set_prompt(&r, "hi");
    expect_body(&r, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true,"
                    "\"stream_options\":{\"include_usage\":true}}");
}

static void test_chat_full(void **state)
{
    (void)state;
    struct st_oaireq r;
    st_oaireq_defaults(&r);
    r.model = "meta-llama/Llama-3.1-8B-Instruct";
    set_prompt(&r, "Write a haiku about servers.");
    r.max_tokens = 128;
    r.ignore_eos = 1;
    r.min_tokens = 128;
    r.has_temperature = 1;
    r.temperature = 0;
    r.has_seed = 1;
    r.seed = 42;
    expect_body(&r, "{\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",\"messages\":[{\"role\":"
                    "\"user\",\"content\":\"Write a haiku about servers.\"}],\"stream\":true,"
                    "\"stream_options\":{\"include_usage\":true},\"max_tokens\":128,"
                    "\"max_completion_tokens\":128,\"ignore_eos\":true,\"min_tokens\":128,"
                    "\"temperature\":0,\"seed\":42}");
    r.temperature = 0.7;
    r.seed = -1;
    r.max_tokens = 0;
    r.min_tokens = 0;
    expect_body(&r, "{\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",\"messages\":[{\"role\":"
                    "\"user\",\"content\":\"Write a haiku about servers.\"}],\"stream\":true,"
                    "\"stream_options\":{\"include_usage\":true},\"max_tokens\":0,"
                    "\"max_completion_tokens\":0,\"ignore_eos\":true,\"min_tokens\":0,"
                    "\"temperature\":0.7,\"seed\":-1}");
}

static void test_completions(void **state)
{
    (void)state;
    struct st_oaireq r;
    st_oaireq_defaults(&r);
    r.api = ST_API_COMPLETIONS;
    r.model = "x";
    set_prompt(&r, "Once upon a time");
    r.max_tokens = 6;
    r.ignore_eos = 1;
    expect_body(&r, "{\"model\":\"x\",\"prompt\":\"Once upon a time\",\"stream\":true,"
                    "\"stream_options\":{\"include_usage\":true},\"max_tokens\":6,"
                    "\"ignore_eos\":true}");
    assert_string_equal(st_oaireq_path(ST_API_COMPLETIONS), "/v1/completions");
    assert_string_equal(st_oaireq_path(ST_API_CHAT), "/v1/chat/completions");
}

static void test_omitted_fields(void **state)
{
    (void)state;
    struct st_oaireq r;
    st_oaireq_defaults(&r);
    set_prompt(&r, "p");
    /* No stream: neither stream nor stream_options. */
    r.stream = 0;
    expect_body(&r, "{\"messages\":[{\"role\":\"user\",\"content\":\"p\"}]}");
    /* stream without include_usage: no stream_options at all (vLLM would default it to true). */
    r.stream = 1;
    r.include_usage = 0;
    expect_body(&r, "{\"messages\":[{\"role\":\"user\",\"content\":\"p\"}],\"stream\":true}");
    /* include_usage is ignored without stream. */
    r.stream = 0;
    r.include_usage = 1;
    r.api = ST_API_COMPLETIONS;
    expect_body(&r, "{\"prompt\":\"p\"}");
    /* A NULL prompt is an empty one. */
    r.prompt = NULL;
    r.prompt_len = 5;
    expect_body(&r, "{\"prompt\":\"\"}");
}

static void test_prompt_escaping(void **state)
{
    (void)state;
    struct st_oaireq r;
    st_oaireq_defaults(&r);
    r.stream = 0;
    r.model = "m\"1";
    /* prompt_len counts: the NUL and what follows are part of the prompt, and bad UTF-8
     * becomes U+FFFD so the body is always valid JSON. */
    static const char p[] = "line1\n\"q\"\\\t\x01 caf\xc3\xa9 \xff";
    r.prompt = p;
    r.prompt_len = sizeof(p) - 1;
    expect_body(&r, "{\"model\":\"m\\\"1\",\"messages\":[{\"role\":\"user\",\"content\":"
                    "\"line1\\n\\\"q\\\"\\\\\\t\\u0001 caf\xc3\xa9 \xef\xbf\xbd\"}]}");
    static const char withnul[] = {'a', '\0', 'b'};
    r.prompt = withnul;
    r.prompt_len = 3;
    expect_body(&r, "{\"model\":\"m\\\"1\",\"messages\":[{\"role\":\"user\",\"content\":"
                    "\"a\\u0000b\"}]}");
}

static void set_extra(struct st_oaireq *r, const char *x)
{
    r->extra_body = x;
    r->extra_body_len = strlen(x);
}

static void test_extra_body_merge(void **state)
{
    (void)state;
    struct st_oaireq r;
    st_oaireq_defaults(&r);
    r.model = "m";
    set_prompt(&r, "p");
    r.max_tokens = 10;
    /* New keys are appended as written (spacing and number form kept). */
    set_extra(&r, " { \"top_k\": 1, \"chat_template_kwargs\": {\"enable_thinking\": false},"
                  "\"stop\":[\"\\n\"], \"note\":\"caf\\u00e9\", \"x\":null } ");
    expect_body(&r, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"p\"}],"
                    "\"stream\":true,\"stream_options\":{\"include_usage\":true},"
                    "\"max_tokens\":10,\"max_completion_tokens\":10,\"top_k\":1,"
                    "\"chat_template_kwargs\":{\"enable_thinking\": false},\"stop\":[\"\\n\"],"
                    "\"note\":\"caf\\u00e9\",\"x\":null}");
    /* An empty object adds nothing. */
    set_extra(&r, "{}");
    expect_body(&r, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"p\"}],"
                    "\"stream\":true,\"stream_options\":{\"include_usage\":true},"
                    "\"max_tokens\":10,\"max_completion_tokens\":10}");
}

static void test_extra_body_override(void **state)
{
    (void)state;
    struct st_oaireq r;
    st_oaireq_defaults(&r);
    r.model = "m";
    set_prompt(&r, "p");
    r.max_tokens = 10;
    r.ignore_eos = 1;
    r.has_temperature = 1;
    r.temperature = 1;
    /* Our keys that extra_body names are left out; extra's values come at the end. */
    set_extra(&r, "{\"max_tokens\":5,\"temperature\":0.2,\"stream_options\":{\"include_usage\":"
                  "false,\"continuous_usage_stats\":true},\"model\":\"other\"}");
    expect_body(&r, "{\"messages\":[{\"role\":\"user\",\"content\":\"p\"}],\"stream\":true,"
                    "\"max_completion_tokens\":10,\"ignore_eos\":true,\"max_tokens\":5,"
                    "\"temperature\":0.2,\"stream_options\":{\"include_usage\":false,"
                    "\"continuous_usage_stats\":true},\"model\":\"other\"}");
    /* Everything overridden: the body is extra_body's members only. */
    struct st_oaireq q;
    st_oaireq_defaults(&q);
    q.api = ST_API_COMPLETIONS;
    set_prompt(&q, "p");
    q.ignore_eos = 1;
    set_extra(&q, "{\"prompt\":[1,2,3],\"stream\":false,\"stream_options\":null,"
                  "\"ignore_eos\":false}");
    expect_body(&q, "{\"prompt\":[1,2,3],\"stream\":false,\"stream_options\":null,"
                    "\"ignore_eos\":false}");
    /* messages too. */
    st_oaireq_defaults(&q);
    set_prompt(&q, "p");
    q.stream = 0;
    set_extra(&q, "{\"messages\":[{\"role\":\"system\",\"content\":\"s\"}]}");
    expect_body(&q, "{\"messages\":[{\"role\":\"system\",\"content\":\"s\"}]}");
}

static void expect_bad_extra(const char *x, size_t n, const char *want_err)
{
    struct st_oaireq r;
    struct st_buf out;
    char err[128] = "";
    st_oaireq_defaults(&r);
    set_prompt(&r, "p");
    r.extra_body = x;
    r.extra_body_len = n;
    st_buf_init(&out);
    st_buf_puts(&out, "keep");
    assert_int_equal(st_oaireq_build(&r, &out, err, sizeof(err)), ST_EPARSE);
    assert_string_equal(st_buf_str(&out), "keep"); /* nothing appended */
    assert_string_equal(err, want_err);
    /* No err buffer is fine too. */
    assert_int_equal(st_oaireq_build(&r, &out, NULL, 0), ST_EPARSE);
    st_buf_release(&out);
}

static void test_extra_body_bad(void **state)
{
    (void)state;
    expect_bad_extra("[1]", 3, "extra_body must be a JSON object, not an array");
    expect_bad_extra("\"x\"", 3, "extra_body must be a JSON object, not a string");
    expect_bad_extra("3", 1, "extra_body must be a JSON object, not a number");
    expect_bad_extra("true", 4, "extra_body must be a JSON object, not a boolean");
    expect_bad_extra("null", 4, "extra_body must be a JSON object, not null");
    expect_bad_extra("{\"a\":}", 6, "extra_body is not valid JSON (malformed input)");
    expect_bad_extra("{\"a\":1", 6, "extra_body is not valid JSON (malformed input)");
    expect_bad_extra("", 0, "extra_body is not valid JSON (malformed input)");
    expect_bad_extra("{\"a\":\"\xff\"}", 8, "extra_body is not valid JSON (invalid UTF-8)");
    /* extra_body_len is honoured: the object is cut short. */
    expect_bad_extra("{\"a\":1}", 5, "extra_body is not valid JSON (malformed input)");
    /* A small err buffer gets a truncated, terminated message. */
    struct st_oaireq r;
    struct st_buf out;
    char err[10];
    st_oaireq_defaults(&r);
    set_extra(&r, "[]");
    st_buf_init(&out);
    assert_int_equal(st_oaireq_build(&r, &out, err, sizeof(err)), ST_EPARSE);
    assert_string_equal(err, "extra_bod");
    st_buf_release(&out);
}

static void test_appends(void **state)
{
    (void)state;
    /* The body is appended after what out already holds. */
    struct st_oaireq r;
    struct st_buf out;
    st_oaireq_defaults(&r);
    r.stream = 0;
    set_prompt(&r, "p");
    st_buf_init(&out);
    st_buf_puts(&out, "X");
    assert_int_equal(st_oaireq_build(&r, &out, NULL, 0), 0);
    assert_string_equal(out.data, "X{\"messages\":[{\"role\":\"user\",\"content\":\"p\"}]}");
    st_buf_release(&out);
}

static void test_messages_json(void **state)
{
    (void)state;
    /* A workload's message list goes in verbatim; completions ignore it. */
    struct st_oaireq r;
    struct st_buf out;
    const char *msgs = "[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\","
                       "\"content\":\"b\"}]";
    st_oaireq_defaults(&r);
    r.stream = 0;
    set_prompt(&r, "ignored");
    r.messages_json = msgs;
    r.messages_len = strlen(msgs);
    st_buf_init(&out);
    assert_int_equal(st_oaireq_build(&r, &out, NULL, 0), 0);
    assert_string_equal(out.data, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
                                  "{\"role\":\"assistant\",\"content\":\"b\"}]}");
    st_buf_clear(&out);
    r.api = ST_API_COMPLETIONS;
    assert_int_equal(st_oaireq_build(&r, &out, NULL, 0), 0);
    assert_string_equal(out.data, "{\"prompt\":\"ignored\"}");
    st_buf_release(&out);
}

/* A check's chat body, byte for byte: the qualification runner's wire format. */
static void test_check_body(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    static const char msgs[] = "[{\"role\":\"user\",\"content\":\"hi\"}]";
    static const char fmt[] = "{\"type\":\"json_object\"}";
    struct st_oaireq_check c = {.model = "m\"1",
                                .messages_json = msgs,
                                .messages_len = sizeof(msgs) - 1,
                                .max_tokens = 512,
                                .seed = 18446744073709551615ull,
                                .response_format_json = fmt,
                                .response_format_len = sizeof(fmt) - 1,
                                .reasoning_effort = "low"};
    st_oaireq_check_build(&c, &b);
    assert_string_equal(b.data,
                        "{\"model\":\"m\\\"1\",\"messages\":[{\"role\":\"user\",\"content\":"
                        "\"hi\"}],\"max_tokens\":512,\"temperature\":0,\"seed\":"
                        "18446744073709551615,\"stream\":false,\"response_format\":{"
                        "\"type\":\"json_object\"},\"reasoning_effort\":\"low\"}");
    st_buf_clear(&b);
    c.model = NULL;
    c.seed = 7;
    c.ignore_eos = 1;
    c.response_format_json = NULL;
    c.reasoning_effort = NULL;
    st_oaireq_check_build(&c, &b);
    assert_string_equal(b.data, "{\"model\":\"\",\"messages\":[{\"role\":\"user\",\"content\":"
                                "\"hi\"}],\"max_tokens\":512,\"temperature\":0,\"seed\":7,"
                                "\"ignore_eos\":true,\"stream\":true,\"stream_options\":{"
                                "\"include_usage\":true}}");
    st_buf_release(&b);
}

/* The tokenize bodies of each shape, byte for byte; the model only where the shape names one. */
static void test_tokenize_bodies(void **state)
{
    (void)state;
    static const struct {
        enum st_oaireq_tok s;
        const char *model;
        const char *want;
    } cases[] = {
        {ST_OAIREQ_TOK_PROMPT, "m", "{\"model\":\"m\",\"prompt\":\"a\\nb\"}"},
        {ST_OAIREQ_TOK_PROMPT, "", "{\"prompt\":\"a\\nb\"}"},
        {ST_OAIREQ_TOK_MESSAGES, "m",
         "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\\nb\"}],"
         "\"add_generation_prompt\":true}"},
        {ST_OAIREQ_TOK_CHAT, NULL, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\nb\"}]}"},
        {ST_OAIREQ_TOK_CONTENT, "m", "{\"content\":\"a\\nb\",\"add_special\":true}"},
        {ST_OAIREQ_TOK_INPUTS, "m", "{\"inputs\":\"a\\nb\"}"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct st_buf b;
        st_buf_init(&b);
        st_buf_puts(&b, "x");
        st_oaireq_tokenize(cases[i].s, cases[i].model, "a\nb", 3, &b);
        assert_string_equal(b.data + 1, cases[i].want);
        st_buf_release(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_chat_full),
        cmocka_unit_test(test_completions),
        cmocka_unit_test(test_omitted_fields),
        cmocka_unit_test(test_prompt_escaping),
        cmocka_unit_test(test_extra_body_merge),
        cmocka_unit_test(test_extra_body_override),
        cmocka_unit_test(test_extra_body_bad),
        cmocka_unit_test(test_appends),
        cmocka_unit_test(test_messages_json),
        cmocka_unit_test(test_check_body),
        cmocka_unit_test(test_tokenize_bodies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
