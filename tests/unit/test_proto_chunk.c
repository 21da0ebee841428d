/*
 * Tests for src/proto/chunk.c: hand-written payloads in the shapes of serving-apis.md section 1
 * (vLLM, SGLang, llama.cpp, TGI, trtllm-serve; llama.cpp ones copied from the wire transcripts),
 * reasoning deltas, every error shape, [DONE], bad JSON and bad UTF-8, escapes in the text.
 * Every decode runs twice, with and without a text buffer, and the two must agree. The final
 * events of both llama.cpp versions' transcripts (tests/data/wire/) give the cached tokens each
 * way the wire allows: usage details, timings.cache_n, or prompt_tokens - timings.prompt_n.
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
#include "proto/chunk.h"
#include "support/fixture.h"

/* Decodes s with and without text; checks both agree; text (if non-NULL) gets the content. */
static int decode_buf(const char *s, size_t n, struct st_chunk *c, struct st_buf *text)
{
    struct st_json scratch;
    struct st_chunk c2;
    struct st_buf t;
    st_json_init(&scratch, 0);
    st_buf_init(&t);
    int rc = st_chunk_decode(&scratch, s, n, c, &t);
    int rc2 = st_chunk_decode(&scratch, s, n, &c2, NULL);
    assert_int_equal(rc, rc2);
    if (rc == 0) {
        assert_int_equal(c->kind, c2.kind);
        assert_int_equal(c->content_bytes, t.len);
        assert_int_equal(c2.content_bytes, t.len);
        assert_int_equal(c->has_content, t.len > 0);
        assert_int_equal(c->has_role, c2.has_role);
        assert_int_equal(c->finished, c2.finished);
        assert_string_equal(c->finish_reason, c2.finish_reason);
        assert_int_equal(c->prompt_tokens, c2.prompt_tokens);
        assert_int_equal(c->completion_tokens, c2.completion_tokens);
        assert_int_equal(c->cached_tokens, c2.cached_tokens);
        assert_int_equal(c->chunk_tokens, c2.chunk_tokens);
    }
    if (text) {
        st_buf_append(text, t.data ? t.data : "", t.len);
    }
    st_buf_release(&t);
    st_json_release(&scratch);
    return rc;
}

static int decode(const char *s, struct st_chunk *c, struct st_buf *text)
{
    return decode_buf(s, strlen(s), c, text);
}

/* Decodes s, which must succeed as a data chunk; returns its content text in *text. */
static void data_chunk(const char *s, struct st_chunk *c, struct st_buf *text)
{
    st_buf_clear(text);
    int rc = decode(s, c, text);
    if (rc != 0) {
        fail_msg("decode failed (%d) on %s", rc, s);
    }
    assert_int_equal(c->kind, ST_CHUNK_DATA);
}

static void assert_no_usage(const struct st_chunk *c)
{
    assert_int_equal(c->has_usage, 0);
    assert_int_equal(c->prompt_tokens, -1);
    assert_int_equal(c->completion_tokens, -1);
}

static void test_vllm_chat(void **state)
{
    (void)state;
    struct st_chunk c;
    struct st_buf t;
    st_buf_init(&t);

    data_chunk("{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1718000000,"
               "\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
               "\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}",
               &c, &t);
    assert_true(c.has_role);
    assert_false(c.has_content);
    assert_false(c.finished);
    assert_string_equal(c.finish_reason, "");
    assert_no_usage(&c);
    assert_int_equal(c.cached_tokens, -1);
    assert_int_equal(c.chunk_tokens, -1);
    assert_int_equal(c.draft_n, -1);

    data_chunk("{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1718000000,"
               "\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" world\"},"
               "\"logprobs\":null,\"finish_reason\":null}]}",
               &c, &t);
    assert_false(c.has_role);
    assert_true(c.has_content);
    assert_int_equal(c.content_bytes, 6);
    assert_string_equal(t.data, " world");

    /* The last content chunk carries the finish reason with its text. */
    data_chunk("{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1718000000,"
               "\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"!\"},"
               "\"logprobs\":null,\"finish_reason\":\"length\",\"stop_reason\":null}]}",
               &c, &t);
    assert_true(c.finished);
    assert_string_equal(c.finish_reason, "length");
    assert_int_equal(c.content_bytes, 1);

    /* Usage chunk: choices [] and prompt_tokens_details (--enable-prompt-tokens-details). */
    data_chunk("{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1718000000,"
               "\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":1000,"
               "\"total_tokens\":1128,\"completion_tokens\":128,"
               "\"prompt_tokens_details\":{\"cached_tokens\":992}}}",
               &c, &t);
    assert_true(c.has_usage);
    assert_false(c.has_content);
    assert_false(c.finished);
    assert_int_equal(c.prompt_tokens, 1000);
    assert_int_equal(c.completion_tokens, 128);
    assert_int_equal(c.cached_tokens, 992);

    /* Without the flag there are no details; prompt_tokens_details may also be null. */
    data_chunk("{\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"total_tokens\":9,"
               "\"completion_tokens\":4}}",
               &c, &t);
    assert_int_equal(c.prompt_tokens, 5);
    assert_int_equal(c.cached_tokens, -1);
    data_chunk("{\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":4,"
               "\"prompt_tokens_details\":null}}",
               &c, &t);
    assert_int_equal(c.cached_tokens, -1);

    /* return_token_ids: a speculative step carries several tokens in one chunk. */
    data_chunk(
        "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
        "\"delta\":{\"content\":\" the quick\"},\"logprobs\":null,\"finish_reason\":null,"
        "\"token_ids\":[279,4062,3]}]}",
        &c, &t);
    assert_int_equal(c.chunk_tokens, 3);
    assert_int_equal(c.content_bytes, 10);
    st_buf_release(&t);
}

static void test_vllm_completions(void **state)
{
    (void)state;
    struct st_chunk c;
    struct st_buf t;
    st_buf_init(&t);
    /* Completions chunks are serialised with unset fields: usage is null in every one. */
    data_chunk(
        "{\"id\":\"cmpl-9\",\"object\":\"text_completion\",\"created\":1718000000,\"model\":\"m\","
        "\"choices\":[{\"index\":0,\"text\":\" the\",\"logprobs\":null,"
        "\"finish_reason\":null,\"stop_reason\":null,\"prompt_logprobs\":null}],"
        "\"usage\":null}",
        &c, &t);
    assert_int_equal(c.content_bytes, 4);
    assert_string_equal(t.data, " the");
    assert_no_usage(&c);
    assert_false(c.has_role);

    data_chunk(
        "{\"id\":\"cmpl-9\",\"object\":\"text_completion\",\"created\":1718000000,\"model\":\"m\","
        "\"choices\":[{\"index\":0,\"text\":\"\",\"logprobs\":null,"
        "\"finish_reason\":\"stop\",\"stop_reason\":128001,\"token_ids\":[128001]}],"
        "\"usage\":null}",
        &c, &t);
    assert_true(c.finished);
    assert_string_equal(c.finish_reason, "stop");
    assert_false(c.has_content);
    assert_int_equal(c.chunk_tokens, 1);

    data_chunk(
        "{\"id\":\"cmpl-9\",\"object\":\"text_completion\",\"created\":1718000000,\"model\":\"m\","
        "\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"total_tokens\":23,"
        "\"completion_tokens\":16,\"prompt_tokens_details\":null}}",
        &c, &t);
    assert_true(c.has_usage);
    assert_int_equal(c.prompt_tokens, 7);
    assert_int_equal(c.completion_tokens, 16);
    assert_int_equal(c.cached_tokens, -1);
    st_buf_release(&t);
}

static void test_sglang(void **state)
{
    (void)state;
    struct st_chunk c;
    struct st_buf t;
    st_buf_init(&t);
    /* All fields serialised, nulls included. */
    data_chunk("{\"id\":\"a1\",\"object\":\"chat.completion.chunk\",\"created\":1718000000,"
               "\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
               "\"content\":\"\",\"reasoning_content\":null,\"tool_calls\":null},"
               "\"logprobs\":null,\"finish_reason\":null,\"matched_stop\":null}],\"usage\":null}",
               &c, &t);
    assert_true(c.has_role);
    assert_false(c.has_content);
    assert_no_usage(&c);

    data_chunk("{\"id\":\"a1\",\"object\":\"chat.completion.chunk\",\"created\":1718000000,"
               "\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":null,"
               "\"content\":\"Hi there\",\"reasoning_content\":null,\"tool_calls\":null},"
               "\"logprobs\":null,\"finish_reason\":null,\"matched_stop\":null}],\"usage\":null}",
               &c, &t);
    assert_false(c.has_role); /* role: null is no role */
    assert_int_equal(c.content_bytes, 8);

    /* The separate finish chunk: empty delta, finish_reason and matched_stop. */
    data_chunk("{\"id\":\"a1\",\"object\":\"chat.completion.chunk\",\"created\":1718000000,"
               "\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":null,"
               "\"content\":null,\"reasoning_content\":null,\"tool_calls\":null},"
               "\"logprobs\":null,\"finish_reason\":\"stop\",\"matched_stop\":128009}],"
               "\"usage\":null}",
               &c, &t);
    assert_true(c.finished);
    assert_string_equal(c.finish_reason, "stop");
    assert_false(c.has_content);

    data_chunk("{\"id\":\"a1\",\"object\":\"chat.completion.chunk\",\"created\":1718000000,"
               "\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":31,"
               "\"total_tokens\":95,\"completion_tokens\":64,"
               "\"prompt_tokens_details\":{\"cached_tokens\":24},\"reasoning_tokens\":0}}",
               &c, &t);
    assert_int_equal(c.prompt_tokens, 31);
    assert_int_equal(c.completion_tokens, 64);
    assert_int_equal(c.cached_tokens, 24);
    st_buf_release(&t);
}

static void test_llamacpp(void **state)
{
    (void)state;
    struct st_chunk c;
    struct st_buf t;
    st_buf_init(&t);
    /* From chat_stream.txt. */
    data_chunk(
        "{\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"role\":\"assistant\","
        "\"content\":null}}],\"created\":1796021759,\"id\":\"chatcmpl-j4NHU4n8IkukPQ4Ew5Dqe"
        "oWLozE5Akfl\",\"model\":\"models/tiny-rand-f16.gguf\",\"system_fingerprint\":"
        "\"b1-de3ff81\",\"object\":\"chat.completion.chunk\"}",
        &c, &t);
    assert_true(c.has_role);
    assert_false(c.has_content);
    assert_int_equal(c.cached_tokens, -1);

    data_chunk("{\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"content\":\".<\"}}],"
               "\"created\":1796021759,\"id\":\"chatcmpl-j4NHU4n8IkukPQ4Ew5DqeoWLozE5Akfl\","
               "\"model\":\"models/tiny-rand-f16.gguf\",\"system_fingerprint\":\"b1-de3ff81\","
               "\"object\":\"chat.completion.chunk\"}",
               &c, &t);
    assert_string_equal(t.data, ".<");

    data_chunk("{\"choices\":[{\"finish_reason\":\"length\",\"index\":0,\"delta\":{}}],\"created\":"
               "1796021759,\"id\":\"chatcmpl-j4NHU4n8IkukPQ4Ew5DqeoWLozE5Akfl\",\"model\":"
               "\"models/tiny-rand-f16.gguf\",\"system_fingerprint\":\"b1-de3ff81\",\"object\":"
               "\"chat.completion.chunk\",\"timings\":{\"cache_n\":0,\"prompt_n\":30,\"prompt_ms\":"
               "7.854,\"prompt_per_token_ms\":0.2618,\"prompt_per_second\":3819.709702062643,"
               "\"predicted_n\":12,\"predicted_ms\":12.956,\"predicted_per_token_ms\":"
               "1.1778181818181819,\"predicted_per_second\":849.0274776165483}}",
               &c, &t);
    assert_true(c.finished);
    assert_string_equal(c.finish_reason, "length");
    assert_false(c.has_content);
    assert_no_usage(&c);
    assert_int_equal(c.cached_tokens, 0); /* timings.cache_n */
    assert_int_equal(c.draft_n, -1);

    /* From chat_stream_include_usage.txt: usage with details and timings; usage wins. */
    data_chunk(
        "{\"choices\":[],\"created\":1796021762,\"id\":\"chatcmpl-l0V26muEIViDbsFiQtuc481pI"
        "GX2wHTx\",\"model\":\"models/tiny-rand-f16.gguf\",\"system_fingerprint\":\"b1-de3ff8"
        "1\",\"object\":\"chat.completion.chunk\",\"usage\":{\"completion_tokens\":5,"
        "\"prompt_tokens\":18,\"total_tokens\":23,\"prompt_tokens_details\":{\"cached_tokens"
        "\":2}},\"timings\":{\"cache_n\":7,\"prompt_n\":16,\"prompt_ms\":4.754,"
        "\"predicted_n\":5,\"predicted_ms\":5.409}}",
        &c, &t);
    assert_true(c.has_usage);
    assert_int_equal(c.prompt_tokens, 18);
    assert_int_equal(c.completion_tokens, 5);
    assert_int_equal(c.cached_tokens, 2);

    /* Older builds: usage without prompt_tokens_details; timings (before usage) give cached. */
    data_chunk("{\"choices\":[{\"text\":\"\",\"index\":0,\"logprobs\":null,\"finish_reason\":"
               "\"length\"}],\"timings\":{\"cache_n\":1,\"prompt_n\":4},\"usage\":{"
               "\"completion_tokens\":6,\"prompt_tokens\":5,\"total_tokens\":11}}",
               &c, &t);
    assert_int_equal(c.cached_tokens, 1);
    assert_int_equal(c.completion_tokens, 6);
    assert_true(c.finished);

    /* From speculative_succ.txt: draft counters in timings. */
    data_chunk("{\"choices\":[{\"text\":\"\",\"index\":0,\"finish_reason\":\"length\"}],\"usage\":{"
               "\"completion_tokens\":40,\"prompt_tokens\":9,\"total_tokens\":49,"
               "\"prompt_tokens_details\":{\"cached_tokens\":0}},\"id\":\"chatcmpl-xQXGxkuc0qRvw"
               "XJsbeY7DanB878XTsHm\",\"timings\":{\"cache_n\":0,\"prompt_n\":9,\"prompt_ms\":"
               "32.027,\"predicted_n\":40,\"predicted_ms\":454.906,\"draft_n\":19,"
               "\"draft_n_accepted\":19}}",
               &c, &t);
    assert_int_equal(c.draft_n, 19);
    assert_int_equal(c.draft_n_accepted, 19);
    assert_int_equal(c.cached_tokens, 0);

    /* Non-streaming response (errors.txt, empty messages): message.content, usage, timings. */
    data_chunk("{\"choices\":[{\"finish_reason\":\"stop\",\"index\":0,\"message\":{\"role\":"
               "\"assistant\",\"content\":\" Itkersystem\"}}],\"created\":1796021806,\"model\":"
               "\"models/tiny-rand-f16.gguf\",\"object\":\"chat.completion\",\"usage\":{"
               "\"completion_tokens\":456,\"prompt_tokens\":4,\"total_tokens\":460,"
               "\"prompt_tokens_details\":{\"cached_tokens\":2}},\"id\":\"chatcmpl-VnivKGE4\","
               "\"timings\":{\"cache_n\":2,\"prompt_n\":2}}",
               &c, &t);
    assert_string_equal(t.data, " Itkersystem");
    assert_false(c.has_role); /* only delta.role counts */
    assert_true(c.finished);
    assert_int_equal(c.completion_tokens, 456);
    assert_int_equal(c.cached_tokens, 2);
    st_buf_release(&t);
}

/* The last payload of transcript rel that carries "usage": a "data: " line, or a whole body. */
static void usage_payload(const char *rel, struct st_buf *out)
{
    struct st_buf f;
    st_buf_init(&f);
    st_test_data(rel, &f);
    const char *p = st_buf_str(&f), *best = NULL;
    size_t best_n = 0;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        const char *q = p;
        size_t qn = n;
        const char *dl = memmem(p, n, "data: ", 6); /* v0.5.0's lines start with a time */
        if (dl) {
            q = dl + 6;
            qn = n - (size_t)(q - p);
        }
        if (qn > 0 && q[0] == '{' && memmem(q, qn, "\"usage\"", 7)) {
            best = q;
            best_n = qn;
        }
        p += n + (e ? 1 : 0);
    }
    if (!best) {
        fail_msg("%s: no payload with usage", rel);
    }
    st_buf_append(out, best, best_n);
    while (out->len && (out->data[out->len - 1] == '\r' || out->data[out->len - 1] == ' ')) {
        out->len--;
    }
    out->data[out->len] = '\0';
    st_buf_release(&f);
}

static void test_wire_cached(void **state)
{
    (void)state;
    static const struct {
        const char *file;
        int64_t prompt, cached;
        enum st_cached_from from;
    } cases[] = {
        /* b4748: no prompt_tokens_details, no cache_n: prompt_tokens - timings.prompt_n. */
        {"wire/llamacpp-b4748/chat_stream_include_usage.txt", 38, 37, ST_CACHED_PROMPT_MINUS},
        {"wire/llamacpp-b4748/completions_stream_include_usage.txt", 21, 0, ST_CACHED_PROMPT_MINUS},
        {"wire/llamacpp-b4748/prompt_cache_repeat.txt", 21, 20, ST_CACHED_PROMPT_MINUS},
        {"wire/llamacpp-b4748/chat_nonstream.txt", 39, 0, ST_CACHED_PROMPT_MINUS},
        /* v0.5.0: the usage details say it. */
        {"wire/llamacpp-v0.5.0/completions_stream_include_usage.txt", 5, 4, ST_CACHED_USAGE},
        {"wire/llamacpp-v0.5.0/chat_stream_include_usage.txt", 18, 2, ST_CACHED_USAGE},
    };
    struct st_buf b, t;
    st_buf_init(&b);
    st_buf_init(&t);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct st_chunk c;
        st_buf_clear(&b);
        usage_payload(cases[i].file, &b);
        data_chunk(b.data, &c, &t);
        if (c.prompt_tokens != cases[i].prompt || c.cached_tokens != cases[i].cached ||
            c.cached_from != cases[i].from) {
            fail_msg("%s: prompt %lld cached %lld from %s", cases[i].file,
                     (long long)c.prompt_tokens, (long long)c.cached_tokens,
                     st_cached_from_name(c.cached_from));
        }
    }
    st_buf_release(&b);
    struct st_chunk c;
    /* timings.cache_n without usage details (llama.cpp between the two). */
    data_chunk("{\"choices\":[],\"usage\":{\"completion_tokens\":1,\"prompt_tokens\":9},"
               "\"timings\":{\"cache_n\":3,\"prompt_n\":6}}",
               &c, &t);
    assert_true(c.cached_tokens == 3 && c.cached_from == ST_CACHED_TIMINGS);
    /* Nothing said: unknown, never 0. */
    data_chunk("{\"choices\":[],\"usage\":{\"completion_tokens\":1,\"prompt_tokens\":9}}", &c, &t);
    assert_true(c.cached_tokens == -1 && c.cached_from == ST_CACHED_UNKNOWN);
    assert_string_equal(st_cached_from_name(c.cached_from), "");
    /* prompt_n without prompt_tokens, or more evaluated than sent: nothing to derive. */
    data_chunk("{\"choices\":[],\"timings\":{\"prompt_n\":6}}", &c, &t);
    assert_true(c.cached_tokens == -1 && c.cached_from == ST_CACHED_UNKNOWN);
    data_chunk("{\"choices\":[],\"usage\":{\"prompt_tokens\":5},\"timings\":{\"prompt_n\":6}}", &c,
               &t);
    assert_true(c.cached_tokens == -1);
    assert_string_equal(st_cached_from_name(ST_CACHED_PROMPT_MINUS),
                        "usage.prompt_tokens - timings.prompt_n");
    st_buf_release(&t);
}

static void test_tgi(void **state)
{
    (void)state;
    struct st_chunk c;
    struct st_buf t;
    st_buf_init(&t);
    /* Chat: every token chunk has role and content. */
    data_chunk("{\"object\":\"chat.completion.chunk\",\"id\":\"\",\"created\":1718000000,\"model\":"
               "\"m\",\"system_fingerprint\":\"3.0.1-native\",\"choices\":[{\"index\":0,\"delta\":"
               "{\"role\":\"assistant\",\"content\":\"Hello\"},\"logprobs\":null,"
               "\"finish_reason\":null}],\"usage\":null}",
               &c, &t);
    assert_true(c.has_role);
    assert_int_equal(c.content_bytes, 5);
    assert_false(c.finished);
    /* A special token: content null. */
    data_chunk("{\"object\":\"chat.completion.chunk\",\"id\":\"\",\"created\":1718000000,\"model\":"
               "\"m\",\"system_fingerprint\":\"3.0.1-native\",\"choices\":[{\"index\":0,\"delta\":"
               "{\"role\":\"assistant\",\"content\":null},\"logprobs\":null,"
               "\"finish_reason\":\"eos_token\"}],\"usage\":null}",
               &c, &t);
    assert_false(c.has_content);
    assert_true(c.finished);
    assert_string_equal(c.finish_reason, "eos_token");
    /* Usage chunk with id "". */
    data_chunk("{\"object\":\"chat.completion.chunk\",\"id\":\"\",\"created\":1718000000,\"model\":"
               "\"m\",\"system_fingerprint\":\"3.0.1-native\",\"choices\":[],\"usage\":{"
               "\"prompt_tokens\":12,\"completion_tokens\":3,\"total_tokens\":15}}",
               &c, &t);
    assert_int_equal(c.prompt_tokens, 12);
    assert_int_equal(c.completion_tokens, 3);
    assert_int_equal(c.cached_tokens, -1);
    /* Completions: finish_reason "" means not finished. */
    data_chunk("{\"id\":\"\",\"object\":\"text_completion\",\"created\":1718000000,\"model\":\"m\","
               "\"system_fingerprint\":\"3.0.1-native\",\"choices\":[{\"index\":0,\"text\":\" a\","
               "\"logprobs\":null,\"finish_reason\":\"\"}]}",
               &c, &t);
    assert_false(c.finished);
    assert_string_equal(c.finish_reason, "");
    assert_int_equal(c.content_bytes, 2);
    data_chunk("{\"id\":\"\",\"object\":\"text_completion\",\"created\":1718000000,\"model\":\"m\","
               "\"system_fingerprint\":\"3.0.1-native\",\"choices\":[{\"index\":0,\"text\":\" b\","
               "\"logprobs\":null,\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":4,"
               "\"completion_tokens\":10,\"total_tokens\":14}}",
               &c, &t);
    assert_true(c.finished);
    assert_int_equal(c.completion_tokens, 10);
    st_buf_release(&t);
}

static void test_trtllm(void **state)
{
    (void)state;
    struct st_chunk c;
    struct st_buf t;
    st_buf_init(&t);
    /* Role chunk without content, and the extra space before the blank line. */
    data_chunk("{\"id\":\"chatcmpl-5\",\"object\":\"chat.completion.chunk\",\"created\":1718000000,"
               "\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"},"
               "\"logprobs\":null,\"finish_reason\":null}]} ",
               &c, &t);
    assert_true(c.has_role);
    assert_false(c.has_content);
    data_chunk("{\"id\":\"chatcmpl-5\",\"object\":\"chat.completion.chunk\",\"created\":1718000000,"
               "\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" two toks\"},"
               "\"logprobs\":null,\"finish_reason\":null,\"stop_reason\":null,"
               "\"avg_decoded_tokens_per_iter\":2.0}],\"usage\":{\"prompt_tokens\":8,"
               "\"total_tokens\":10,\"completion_tokens\":2,\"prompt_tokens_details\":{"
               "\"cached_tokens\":0}}}",
               &c, &t);
    assert_int_equal(c.content_bytes, 9);
    assert_int_equal(c.completion_tokens, 2);
    assert_int_equal(c.cached_tokens, 0);
    st_buf_release(&t);
}

static void test_token_ids(void **state)
{
    (void)state;
    struct st_chunk c;
    struct st_buf t;
    st_buf_init(&t);
    data_chunk("{\"choices\":[{\"index\":0,\"text\":\"\",\"token_ids\":[]}]}", &c, &t);
    assert_int_equal(c.chunk_tokens, 0);
    data_chunk("{\"choices\":[{\"index\":0,\"text\":\"x\",\"token_ids\":[5]}]}", &c, &t);
    assert_int_equal(c.chunk_tokens, 1);
    data_chunk("{\"choices\":[{\"index\":0,\"text\":\"x\",\"token_ids\":null}]}", &c, &t);
    assert_int_equal(c.chunk_tokens, -1);
    data_chunk("{\"choices\":[{\"index\":0,\"text\":\"x\",\"token_ids\":7}]}", &c, &t);
    assert_int_equal(c.chunk_tokens, -1);
    /* vLLM's first chunk may carry prompt_token_ids at the top: not this chunk's tokens. */
    data_chunk("{\"prompt_token_ids\":[1,2,3,4],\"choices\":[{\"index\":0,\"delta\":{\"role\":"
               "\"assistant\",\"content\":\"\"},\"token_ids\":[]}]}",
               &c, &t);
    assert_int_equal(c.chunk_tokens, 0);
    /* Only choice 0 is read. */
    data_chunk("{\"choices\":[{\"index\":0,\"text\":\"a\",\"token_ids\":[1,2]},{\"index\":1,"
               "\"text\":\"bbb\",\"token_ids\":[1,2,3],\"finish_reason\":\"stop\"}]}",
               &c, &t);
    assert_int_equal(c.chunk_tokens, 2);
    assert_int_equal(c.content_bytes, 1);
    assert_false(c.finished);
    st_buf_release(&t);
}

static void test_reasoning(void **state)
{
    (void)state;
    struct st_chunk c;
    struct st_buf t;
    st_buf_init(&t);
    /* Newer vLLM: reasoning and its deprecated copy, equal: counted once. */
    data_chunk("{\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"Let me think\","
               "\"reasoning_content\":\"Let me think\"},\"finish_reason\":null}]}",
               &c, &t);
    assert_int_equal(c.content_bytes, 12);
    assert_string_equal(t.data, "Let me think");
    /* Older vLLM / SGLang: reasoning_content only. */
    data_chunk("{\"choices\":[{\"index\":0,\"delta\":{\"content\":null,\"reasoning_content\":"
               "\"hmm\"}}]}",
               &c, &t);
    assert_int_equal(c.content_bytes, 3);
    assert_true(c.has_content);
    /* reasoning null or "" falls back to reasoning_content. */
    data_chunk("{\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":null,\"reasoning_content\":"
               "\"ab\"}}]}",
               &c, &t);
    assert_string_equal(t.data, "ab");
    data_chunk("{\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"\",\"reasoning_content\":"
               "\"ab\"}}]}",
               &c, &t);
    assert_string_equal(t.data, "ab");
    data_chunk("{\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"only\"}}]}", &c, &t);
    assert_string_equal(t.data, "only");
    /* Reasoning and content in one delta: both count, reasoning first. */
    data_chunk("{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"answer\",\"reasoning\":"
               "\"done. \"}}]}",
               &c, &t);
    assert_string_equal(t.data, "done. answer");
    assert_int_equal(c.content_bytes, 12);
    /* Non-streaming message with reasoning_content. */
    data_chunk("{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"4\","
               "\"reasoning_content\":\"2+2\"},\"finish_reason\":\"stop\"}]}",
               &c, &t);
    assert_string_equal(t.data, "2+24");
    assert_true(c.finished);
    st_buf_release(&t);
}

/* Decodes s, which must succeed as an error; checks message, type and code. */
static void error_chunk(const char *s, const char *msg, const char *type, int64_t code)
{
    struct st_chunk c;
    int rc = decode(s, &c, NULL);
    if (rc != 0) {
        fail_msg("decode failed (%d) on %s", rc, s);
    }
    assert_int_equal(c.kind, ST_CHUNK_ERROR);
    assert_string_equal(c.error_message, msg);
    assert_string_equal(c.error_type, type);
    assert_int_equal(c.error_code, code);
    assert_false(c.has_content);
}

static void test_errors(void **state)
{
    (void)state;
    /* vLLM */
    error_chunk("{\"error\":{\"message\":\"The model `x` does not exist.\",\"type\":"
                "\"NotFoundError\",\"param\":null,\"code\":404}}",
                "The model `x` does not exist.", "NotFoundError", 404);
    /* SGLang stream error: the wrapper with object:error inside. */
    error_chunk("{\"error\":{\"object\":\"error\",\"message\":\"bad\",\"type\":\"BadRequestError\","
                "\"param\":null,\"code\":400}}",
                "bad", "BadRequestError", 400);
    /* llama.cpp (errors.txt): code first, extra fields. */
    error_chunk("{\"error\":{\"code\":400,\"message\":\"request (2998 tokens) exceeds the "
                "available context size (2048 tokens), try increasing it\",\"type\":"
                "\"exceed_context_size_error\",\"n_prompt_tokens\":2998,\"n_ctx\":2048}}",
                "request (2998 tokens) exceeds the available context size (2048 tokens), try "
                "increasing it",
                "exceed_context_size_error", 400);
    error_chunk("{\"error\":{\"code\":503,\"message\":\"Loading model\",\"type\":"
                "\"unavailable_error\"}}",
                "Loading model", "unavailable_error", 503);
    /* TGI health and stream errors. */
    error_chunk("{\"error\":\"unhealthy\",\"error_type\":\"healthcheck\"}", "unhealthy",
                "healthcheck", -1);
    error_chunk("{\"error\":\"Input validation error: `inputs` must have less than 4096 tokens\","
                "\"error_type\":\"validation\"}",
                "Input validation error: `inputs` must have less than 4096 tokens", "validation",
                -1);
    error_chunk("{\"error\":{\"message\":\"Request failed during generation: Server error: "
                "CUDA OOM\",\"http_status_code\":422}}",
                "Request failed during generation: Server error: CUDA OOM", "", 422);
    /* Old SGLang / vLLM: flat. */
    error_chunk("{\"object\":\"error\",\"message\":\"max_tokens too large\",\"type\":"
                "\"BadRequestError\",\"param\":null,\"code\":400}",
                "max_tokens too large", "BadRequestError", 400);
    /* String codes: a number in a string, an OpenAI-style name (kept as type when none). */
    error_chunk("{\"error\":{\"message\":\"slow down\",\"type\":\"rate_limit\",\"code\":\"429\"}}",
                "slow down", "rate_limit", 429);
    error_chunk("{\"error\":{\"message\":\"too long\",\"type\":\"invalid_request_error\","
                "\"code\":\"context_length_exceeded\"}}",
                "too long", "invalid_request_error", -1);
    error_chunk("{\"error\":{\"code\":\"context_length_exceeded\",\"message\":\"too long\"}}",
                "too long", "context_length_exceeded", -1);
    error_chunk("{\"error\":{}}", "", "", -1);
    /* Escapes in the message are decoded. */
    error_chunk("{\"error\":{\"message\":\"bad \\\"x\\\"\\nline2 \\u00e9\",\"code\":400}}",
                "bad \"x\"\nline2 \xc3\xa9", "", 400);
    /* error: null and object other than "error" are not errors. */
    struct st_chunk c;
    assert_int_equal(decode("{\"error\":null,\"choices\":[{\"text\":\"x\"}]}", &c, NULL), 0);
    assert_int_equal(c.kind, ST_CHUNK_DATA);
    assert_int_equal(c.content_bytes, 1);
    assert_int_equal(decode("{\"object\":\"text_completion\",\"message\":\"hi\"}", &c, NULL), 0);
    assert_int_equal(c.kind, ST_CHUNK_DATA);
}

static void test_error_truncation(void **state)
{
    (void)state;
    /* 300 bytes of message: kept to 255 and terminated; a 2-byte character at the cut is not
     * split. */
    struct st_buf s;
    st_buf_init(&s);
    st_buf_puts(&s, "{\"error\":{\"message\":\"");
    for (int i = 0; i < 254; i++) {
        st_buf_putc(&s, 'a');
    }
    st_buf_puts(&s, "\xc3\xa9tail tail tail tail tail tail tail tail\",\"type\":\"");
    for (int i = 0; i < 100; i++) {
        st_buf_putc(&s, 't');
    }
    st_buf_puts(&s, "\",\"code\":500}}");
    struct st_chunk c;
    assert_int_equal(decode_buf(s.data, s.len, &c, NULL), 0);
    assert_int_equal(c.kind, ST_CHUNK_ERROR);
    assert_int_equal(strlen(c.error_message), 254);
    assert_int_equal(strlen(c.error_type), 63);
    assert_int_equal(c.error_code, 500);
    st_buf_release(&s);

    /* finish_reason is cut to 23 bytes. */
    struct st_buf t;
    st_buf_init(&t);
    data_chunk("{\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":"
               "\"a_very_long_finish_reason_name_indeed\"}]}",
               &c, &t);
    assert_true(c.finished);
    assert_string_equal(c.finish_reason, "a_very_long_finish_reas");
    st_buf_release(&t);
}

static void test_done(void **state)
{
    (void)state;
    struct st_chunk c;
    assert_int_equal(decode("[DONE]", &c, NULL), 0);
    assert_int_equal(c.kind, ST_CHUNK_DONE);
    assert_false(c.has_content);
    assert_int_equal(decode(" [DONE] \r\n", &c, NULL), 0);
    assert_int_equal(c.kind, ST_CHUNK_DONE);
    assert_int_equal(decode("\t[DONE]", &c, NULL), 0);
    assert_int_equal(c.kind, ST_CHUNK_DONE);
    assert_int_equal(decode("[DONE]x", &c, NULL), ST_EPARSE);
    assert_int_equal(decode("[done]", &c, NULL), ST_EPARSE);
    assert_int_equal(decode("[DONE", &c, NULL), ST_EPARSE);
    assert_int_equal(decode("DONE", &c, NULL), ST_EPARSE);
}

static void test_invalid(void **state)
{
    (void)state;
    struct st_chunk c;
    static const char *const bad_json[] = {
        "",
        "   ",
        "{",
        "{\"choices\":[{\"text\":\"x\"}]",
        "{\"choices\":[{\"text\":\"x\"},]}",
        "{\"a\":1}}",
        "{\"a\":1} x",
        "{'a':1}",
        "{\"a\":tru}",
        "{\"a\":01}",
        "{\"a\":\"\\x\"}",
        "{\"a\":\"tab\there\"}",
        "{\"choices\":[{\"text\":\"cut",
        "data: {\"a\":1}",
    };
    for (size_t i = 0; i < sizeof(bad_json) / sizeof(bad_json[0]); i++) {
        int rc = decode(bad_json[i], &c, NULL);
        if (rc != ST_EPARSE) {
            fail_msg("%s: got %d, want ST_EPARSE", bad_json[i], rc);
        }
    }
    /* Valid JSON that is not an object. */
    static const char *const not_obj[] = {"[1,2]", "\"x\"", "42", "null", "true", "[]"};
    for (size_t i = 0; i < sizeof(not_obj) / sizeof(not_obj[0]); i++) {
        assert_int_equal(decode(not_obj[i], &c, NULL), ST_EPARSE);
    }
    /* Invalid UTF-8 inside a string: a stray byte, an overlong form, an encoded surrogate, a
     * truncated sequence. */
    static const char *const bad_utf8[] = {
        "{\"choices\":[{\"text\":\"\xff\"}]}",
        "{\"choices\":[{\"text\":\"\xc0\xaf\"}]}",
        "{\"choices\":[{\"text\":\"\xed\xa0\x80\"}]}",
        "{\"choices\":[{\"text\":\"\xe2\x82\"}]}",
        "{\"choices\":[{\"delta\":{\"content\":\"ok \xf5\x80\x80\x80\"}}]}",
    };
    for (size_t i = 0; i < sizeof(bad_utf8) / sizeof(bad_utf8[0]); i++) {
        assert_int_equal(decode(bad_utf8[i], &c, NULL), ST_EUTF8);
    }
    /* Embedded NUL bytes are not JSON. */
    static const char nul[] = "{\"a\":1}\0";
    assert_int_equal(decode_buf(nul, sizeof(nul) - 1, &c, NULL), ST_EPARSE);
}

static void test_text_escapes(void **state)
{
    (void)state;
    struct st_chunk c;
    struct st_buf t;
    st_buf_init(&t);
    data_chunk("{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\\nb\"}}]}", &c, &t);
    assert_int_equal(c.content_bytes, 3);
    assert_string_equal(t.data, "a\nb");
    data_chunk("{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"caf\\u00e9\"}}]}", &c, &t);
    assert_int_equal(c.content_bytes, 5);
    assert_string_equal(t.data, "caf\xc3\xa9");
    data_chunk("{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\\ud83d\\ude00!\"}}]}", &c, &t);
    assert_int_equal(c.content_bytes, 5);
    assert_string_equal(t.data, "\xf0\x9f\x98\x80!");
    /* A lone surrogate becomes U+FFFD (3 bytes), as st_json_str writes it. */
    data_chunk("{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\\ud83dx\"}}]}", &c, &t);
    assert_int_equal(c.content_bytes, 4);
    assert_string_equal(t.data, "\xef\xbf\xbdx");
    data_chunk("{\"choices\":[{\"index\":0,\"text\":\"\\\"q\\\" \\\\ \\/ \\t\\r\\b\\f\\u0041\\u07ff"
               "\\uffff\"}]}",
               &c, &t);
    assert_string_equal(t.data, "\"q\" \\ / \t\r\b\fA\xdf\xbf\xef\xbf\xbf");
    assert_int_equal(c.content_bytes, strlen("\"q\" \\ / \t\r\b\fA") + 2 + 3);
    /* Raw UTF-8 passes through. */
    data_chunk("{\"choices\":[{\"index\":0,\"text\":\"\xe6\x97\xa5\xe6\x9c\xac\"}]}", &c, &t);
    assert_int_equal(c.content_bytes, 6);
    /* A whole stream appends into one buffer. */
    struct st_json scratch;
    struct st_buf all;
    st_json_init(&scratch, 0);
    st_buf_init(&all);
    static const char *const stream[] = {
        "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}",
        "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}",
        "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\\n\"}}]}",
        ("{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w\\u00f6rld\"},"
         "\"finish_reason\":\"stop\"}]}"),
        "{\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":4}}",
        "[DONE]",
    };
    size_t total = 0;
    for (size_t i = 0; i < sizeof(stream) / sizeof(stream[0]); i++) {
        assert_int_equal(st_chunk_decode(&scratch, stream[i], strlen(stream[i]), &c, &all), 0);
        total += c.content_bytes;
    }
    assert_string_equal(all.data, "Hello\nw\xc3\xb6rld");
    assert_int_equal(total, all.len);
    st_buf_release(&all);
    st_json_release(&scratch);
    st_buf_release(&t);
}

static void test_escaped_keys(void **state)
{
    (void)state;
    struct st_chunk c;
    struct st_buf t;
    st_buf_init(&t);
    data_chunk("{\"ch\\u006fices\":[{\"d\\u0065lta\":{\"content\":\"xy\"},\"finish_\\u0072eason\":"
               "\"stop\"}],\"\\u0075sage\":{\"prompt_tokens\":3}}",
               &c, &t);
    assert_int_equal(c.content_bytes, 2);
    assert_true(c.finished);
    assert_int_equal(c.prompt_tokens, 3);
    /* An escaped key longer than any of ours matches none. */
    data_chunk("{\"\\u0063hoices_and_a_long_tail_beyond_32_bytes\":[{\"text\":\"x\"}]}", &c, &t);
    assert_false(c.has_content);
    st_buf_release(&t);
}

static void test_wrong_types(void **state)
{
    (void)state;
    struct st_chunk c;
    struct st_buf t;
    st_buf_init(&t);
    /* Fields of unexpected types are ignored, not errors. */
    data_chunk("{\"choices\":{\"0\":1},\"usage\":\"none\",\"timings\":[1]}", &c, &t);
    assert_false(c.has_content);
    assert_no_usage(&c);
    data_chunk("{\"choices\":[1,2],\"usage\":{\"prompt_tokens\":\"7\",\"completion_tokens\":2.5,"
               "\"prompt_tokens_details\":{\"cached_tokens\":null}}}",
               &c, &t);
    assert_true(c.has_usage);
    assert_int_equal(c.prompt_tokens, -1);
    assert_int_equal(c.completion_tokens, -1);
    assert_int_equal(c.cached_tokens, -1);
    data_chunk("{\"choices\":[{\"delta\":\"text\",\"text\":5,\"finish_reason\":1,\"message\":[]}]}",
               &c, &t);
    assert_false(c.has_content);
    assert_false(c.finished);
    /* Integral floats are integers (1.0, 2e3), huge ones are not. */
    data_chunk("{\"choices\":[],\"usage\":{\"prompt_tokens\":1.0,\"completion_tokens\":2e3,"
               "\"prompt_tokens_details\":{\"cached_tokens\":1e300}}}",
               &c, &t);
    assert_int_equal(c.prompt_tokens, 1);
    assert_int_equal(c.completion_tokens, 2000);
    assert_int_equal(c.cached_tokens, -1);
    data_chunk("{}", &c, &t);
    assert_false(c.has_content);
    st_buf_release(&t);
}

/* Fields from one chunk never leak into the next decode. */
static void test_reset_between_chunks(void **state)
{
    (void)state;
    struct st_json scratch;
    struct st_chunk c;
    st_json_init(&scratch, 0);
    const char *a = "{\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"x\"},"
                    "\"finish_reason\":\"stop\",\"token_ids\":[1]}],\"usage\":{\"prompt_tokens\":1,"
                    "\"completion_tokens\":1},\"timings\":{\"cache_n\":1,\"draft_n\":1,"
                    "\"draft_n_accepted\":1}}";
    const char *e = "{\"error\":{\"message\":\"m\",\"type\":\"t\",\"code\":1}}";
    const char *b = "{\"choices\":[]}";
    assert_int_equal(st_chunk_decode(&scratch, a, strlen(a), &c, NULL), 0);
    assert_int_equal(st_chunk_decode(&scratch, e, strlen(e), &c, NULL), 0);
    assert_int_equal(c.kind, ST_CHUNK_ERROR);
    assert_int_equal(st_chunk_decode(&scratch, a, strlen(a), &c, NULL), 0);
    assert_int_equal(st_chunk_decode(&scratch, b, strlen(b), &c, NULL), 0);
    assert_int_equal(c.kind, ST_CHUNK_DATA);
    assert_false(c.has_content);
    assert_int_equal(c.content_bytes, 0);
    assert_false(c.has_role);
    assert_false(c.finished);
    assert_string_equal(c.finish_reason, "");
    assert_false(c.has_usage);
    assert_int_equal(c.prompt_tokens, -1);
    assert_int_equal(c.completion_tokens, -1);
    assert_int_equal(c.cached_tokens, -1);
    assert_int_equal(c.chunk_tokens, -1);
    assert_int_equal(c.draft_n, -1);
    assert_int_equal(c.draft_n_accepted, -1);
    assert_string_equal(c.error_message, "");
    assert_string_equal(c.error_type, "");
    assert_int_equal(c.error_code, -1);
    st_json_release(&scratch);
}

/* The scratch document keeps its storage: steady-state decoding does not reallocate. */
static void test_scratch_reuse(void **state)
{
    (void)state;
    struct st_json scratch;
    struct st_chunk c;
    st_json_init(&scratch, 0);
    const char *big = "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"logprobs\":null,"
                      "\"finish_reason\":null}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens"
                      "\":2,\"prompt_tokens_details\":{\"cached_tokens\":0}}}";
    const char *small = "{\"choices\":[{\"index\":0,\"text\":\"b\"}]}";
    assert_int_equal(st_chunk_decode(&scratch, big, strlen(big), &c, NULL), 0);
    const struct st_json_tok *toks = scratch.toks;
    uint32_t cap = scratch.cap;
    for (int i = 0; i < 1000; i++) {
        const char *s = i % 2 ? big : small;
        assert_int_equal(st_chunk_decode(&scratch, s, strlen(s), &c, NULL), 0);
        assert_int_equal(c.content_bytes, 1);
    }
    assert_ptr_equal(scratch.toks, toks);
    assert_int_equal(scratch.cap, cap);
    st_json_release(&scratch);
}

static void test_too_many_values(void **state)
{
    (void)state;
    struct st_json scratch;
    struct st_chunk c;
    st_json_init(&scratch, 8);
    const char *s = "{\"choices\":[{\"index\":0,\"text\":\"x\",\"token_ids\":[1,2,3,4,5,6]}]}";
    assert_int_equal(st_chunk_decode(&scratch, s, strlen(s), &c, NULL), ST_ETOOBIG);
    const char *ok = "{\"choices\":[{\"text\":\"x\"}]}";
    assert_int_equal(st_chunk_decode(&scratch, ok, strlen(ok), &c, NULL), 0);
    assert_int_equal(c.content_bytes, 1);
    st_json_release(&scratch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vllm_chat),     cmocka_unit_test(test_vllm_completions),
        cmocka_unit_test(test_sglang),        cmocka_unit_test(test_llamacpp),
        cmocka_unit_test(test_tgi),           cmocka_unit_test(test_trtllm),
        cmocka_unit_test(test_token_ids),     cmocka_unit_test(test_reasoning),
        cmocka_unit_test(test_errors),        cmocka_unit_test(test_error_truncation),
        cmocka_unit_test(test_done),          cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_text_escapes),  cmocka_unit_test(test_escaped_keys),
        cmocka_unit_test(test_wrong_types),   cmocka_unit_test(test_reset_between_chunks),
        cmocka_unit_test(test_scratch_reuse), cmocka_unit_test(test_too_many_values),
        cmocka_unit_test(test_wire_cached),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
