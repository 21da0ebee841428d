/*
 * Tests for src/sim/spec.c, the simulator's pure core: every configuration key (good values,
 * bounds, bad values, unknown keys), the key=value,... syntax and its all-or-nothing rule, the
 * listen address, request bodies and the prompt-token rule, chunk counts and the timeline, token
 * text, and templates whose every event is checked with the strict base/json parser.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/json.h"
#include "sim/spec.h"

/* ---- helpers ---- */

static int set(struct st_sim_spec *s, const char *key, const char *val, char *err, size_t errlen)
{
    return st_sim_spec_set(s, key, strlen(key), val, strlen(val), err, errlen);
}

static int apply(struct st_sim_spec *s, const char *text)
{
    char err[256];
    return st_sim_spec_apply(s, text, strlen(text), err, sizeof(err));
}

/* Asserts that key=val is refused with ST_EPARSE, leaves s alone and names the key. */
static void assert_bad(const char *key, const char *val)
{
    struct st_sim_spec s, before;
    st_sim_spec_init(&s);
    before = s;
    char err[256] = "";
    assert_int_equal(set(&s, key, val, err, sizeof(err)), ST_EPARSE);
    assert_memory_equal(&s, &before, sizeof(s));
    assert_non_null(strstr(err, key));
    assert_non_null(strstr(err, "expected"));
}

/* Strips "data: " and the blank line of an SSE event, parses the JSON and returns its status. */
static int parse_event(struct st_json *d, const char *ev, size_t n)
{
    assert_true(n > 8);
    assert_memory_equal(ev, "data: ", 6);
    assert_memory_equal(ev + n - 2, "\n\n", 2);
    assert_null(memchr(ev, '\n', n - 2)); /* one line */
    return st_json_parse(d, ev + 6, n - 8);
}

static void assert_str(const struct st_json *d, int i, const char *want)
{
    assert_true(st_json_streq(d, i, want));
}

static int64_t get_i64(const struct st_json *d, int i)
{
    int64_t v = -1;
    assert_int_equal(st_json_i64(d, i, &v), 0);
    return v;
}

static int path(const struct st_json *d, const char *a, const char *b, const char *c)
{
    int i = st_json_get(d, 0, a);
    if (b) {
        i = st_json_get(d, i, b);
    }
    if (c) {
        i = st_json_get(d, i, c);
    }
    return i;
}

static int choice0(const struct st_json *d)
{
    return st_json_at(d, st_json_get(d, 0, "choices"), 0);
}

/* ---- configuration keys ---- */

static void test_defaults(void **state)
{
    (void)state;
    struct st_sim_spec s;
    st_sim_spec_init(&s);
    assert_int_equal(s.ttft_ns, 50 * ST_NS_PER_MS);
    assert_int_equal(s.itl_ns, 10 * ST_NS_PER_MS);
    assert_int_equal(s.headers_delay_ns, 0);
    assert_int_equal(s.ping_ns, 0);
    assert_int_equal(s.tokens_per_chunk, 1);
    assert_int_equal(s.usage, ST_SIM_USAGE_AUTO);
    assert_int_equal(s.done, 1);
    assert_int_equal(s.role_chunk, ST_SIM_ROLE_EARLY);
    assert_int_equal(s.cached_tokens, 0);
    assert_int_equal(s.status, 0);
    assert_int_equal(s.retry_after_s, 1);
    assert_int_equal(s.nonsse, 0);
    assert_true(s.stall_after == ST_SIM_OFF && s.close_after == ST_SIM_OFF);
    assert_true(s.reset_after == ST_SIM_OFF && s.error_at == ST_SIM_OFF);
    assert_int_equal(s.malformed_at, 0);
    assert_int_equal(s.oversize_at, 0);
    assert_int_equal(s.bad_utf8_at, 0);
}

static void test_time_keys(void **state)
{
    (void)state;
    struct st_sim_spec s;
    st_sim_spec_init(&s);
    assert_int_equal(set(&s, "ttft_ms", "20", NULL, 0), 0);
    assert_int_equal(s.ttft_ns, 20 * ST_NS_PER_MS);
    assert_int_equal(set(&s, "itl_ms", "0.25", NULL, 0), 0);
    assert_int_equal(s.itl_ns, 250 * ST_NS_PER_US);
    assert_int_equal(set(&s, "itl_ms", "0", NULL, 0), 0);
    assert_int_equal(s.itl_ns, 0);
    assert_int_equal(set(&s, "headers_delay_ms", "3600000", NULL, 0), 0);
    assert_int_equal(s.headers_delay_ns, 3600000 * ST_NS_PER_MS);
    assert_int_equal(set(&s, "ttft_ms", "0.000001", NULL, 0), 0);
    assert_int_equal(s.ttft_ns, 1);
    assert_int_equal(set(&s, "ping_ms", "1", NULL, 0), 0);
    assert_int_equal(s.ping_ns, ST_NS_PER_MS);
    assert_int_equal(set(&s, "ping_ms", "0", NULL, 0), 0);
    assert_int_equal(s.ping_ns, 0);
    static const char *const bad[] = {"",   "-1", "+1",    "1e3",       "0x10",     "inf", "nan",
                                      ".5", "5.", "1.2.3", "3600000.1", "99999999", " ",   "1 0"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_bad("ttft_ms", bad[i]);
        assert_bad("itl_ms", bad[i]);
        assert_bad("headers_delay_ms", bad[i]);
        assert_bad("ping_ms", bad[i]);
    }
    assert_bad("ping_ms", "0.5"); /* pings are at least 1 ms apart */
}

static void test_word_keys(void **state)
{
    (void)state;
    struct st_sim_spec s;
    st_sim_spec_init(&s);
    assert_int_equal(set(&s, "usage", "always", NULL, 0), 0);
    assert_int_equal(s.usage, ST_SIM_USAGE_ALWAYS);
    assert_int_equal(set(&s, "usage", "never", NULL, 0), 0);
    assert_int_equal(s.usage, ST_SIM_USAGE_NEVER);
    assert_int_equal(set(&s, "usage", "auto", NULL, 0), 0);
    assert_int_equal(s.usage, ST_SIM_USAGE_AUTO);
    assert_bad("usage", "Always");
    assert_bad("usage", "");

    assert_int_equal(set(&s, "done", "off", NULL, 0), 0);
    assert_int_equal(s.done, 0);
    assert_int_equal(set(&s, "done", "1", NULL, 0), 0);
    assert_int_equal(s.done, 1);
    assert_int_equal(set(&s, "done", "0", NULL, 0), 0);
    assert_int_equal(s.done, 0);
    assert_int_equal(set(&s, "done", "on", NULL, 0), 0);
    assert_int_equal(s.done, 1);
    assert_bad("done", "yes");
    assert_bad("done", "2");

    assert_int_equal(set(&s, "role_chunk", "first", NULL, 0), 0);
    assert_int_equal(s.role_chunk, ST_SIM_ROLE_FIRST);
    assert_int_equal(set(&s, "role_chunk", "off", NULL, 0), 0);
    assert_int_equal(s.role_chunk, ST_SIM_ROLE_OFF);
    assert_int_equal(set(&s, "role_chunk", "early", NULL, 0), 0);
    assert_int_equal(s.role_chunk, ST_SIM_ROLE_EARLY);
    assert_bad("role_chunk", "late");
}

static void test_count_keys(void **state)
{
    (void)state;
    struct st_sim_spec s;
    st_sim_spec_init(&s);
    for (uint32_t k = 1; k <= 8; k++) {
        char v[4];
        snprintf(v, sizeof(v), "%u", k);
        assert_int_equal(set(&s, "tokens_per_chunk", v, NULL, 0), 0);
        assert_int_equal(s.tokens_per_chunk, k);
    }
    assert_bad("tokens_per_chunk", "0");
    assert_bad("tokens_per_chunk", "9");
    assert_bad("tokens_per_chunk", "1.0");

    assert_int_equal(set(&s, "cached", "1000000000", NULL, 0), 0);
    assert_int_equal(s.cached_tokens, 1000000000);
    assert_bad("cached", "1000000001");
    assert_bad("cached", "-1");

    assert_int_equal(set(&s, "status", "429", NULL, 0), 0);
    assert_int_equal(s.status, 429);
    assert_int_equal(set(&s, "status", "599", NULL, 0), 0);
    assert_int_equal(set(&s, "status", "400", NULL, 0), 0);
    assert_bad("status", "200");
    assert_bad("status", "399");
    assert_bad("status", "600");

    assert_int_equal(set(&s, "retry_after", "-1", NULL, 0), 0);
    assert_int_equal(s.retry_after_s, -1);
    assert_int_equal(set(&s, "retry_after", "0", NULL, 0), 0);
    assert_int_equal(s.retry_after_s, 0);
    assert_int_equal(set(&s, "retry_after", "86400", NULL, 0), 0);
    assert_int_equal(s.retry_after_s, 86400);
    assert_bad("retry_after", "-2");
    assert_bad("retry_after", "86401");

    assert_int_equal(set(&s, "nonsse", "1", NULL, 0), 0);
    assert_int_equal(s.nonsse, 1);
    assert_int_equal(set(&s, "nonsse", "0", NULL, 0), 0);
    assert_int_equal(s.nonsse, 0);
    assert_bad("nonsse", "2");

    /* The "after N chunks" faults take 0 (before the first chunk) up to the output limit. */
    static const char *const after[] = {"stall_after", "close_after", "reset_after", "error_at"};
    for (size_t i = 0; i < 4; i++) {
        struct st_sim_spec t;
        st_sim_spec_init(&t);
        assert_int_equal(set(&t, after[i], "0", NULL, 0), 0);
        assert_int_equal(set(&t, after[i], "1000000", NULL, 0), 0);
        assert_bad(after[i], "1000001");
        assert_bad(after[i], "-1");
        assert_bad(after[i], "x");
    }
    st_sim_spec_init(&s);
    assert_int_equal(apply(&s, "stall_after=3,close_after=4,reset_after=5,error_at=6"), 0);
    assert_int_equal(s.stall_after, 3);
    assert_int_equal(s.close_after, 4);
    assert_int_equal(s.reset_after, 5);
    assert_int_equal(s.error_at, 6);

    /* The 1-based "_at" faults: 0 turns them off. */
    assert_int_equal(apply(&s, "malformed_at=2,oversize_at=3,bad_utf8_at=1000000"), 0);
    assert_int_equal(s.malformed_at, 2);
    assert_int_equal(s.oversize_at, 3);
    assert_int_equal(s.bad_utf8_at, 1000000);
    assert_int_equal(apply(&s, "malformed_at=0"), 0);
    assert_int_equal(s.malformed_at, 0);
    assert_bad("oversize_at", "1000001");
    assert_bad("bad_utf8_at", "");
}

static void test_unknown_key(void **state)
{
    (void)state;
    struct st_sim_spec s, before;
    st_sim_spec_init(&s);
    before = s;
    char err[256] = "";
    assert_int_equal(set(&s, "ttft", "5", err, sizeof(err)), ST_ENOTFOUND);
    assert_non_null(strstr(err, "unknown key 'ttft'"));
    assert_int_equal(set(&s, "model", "x", NULL, 0), ST_ENOTFOUND);
    assert_int_equal(set(&s, "TTFT_MS", "5", NULL, 0), ST_ENOTFOUND);
    assert_memory_equal(&s, &before, sizeof(s));
    assert_non_null(st_sim_spec_expect("itl_ms"));
    assert_non_null(st_sim_spec_expect("bad_utf8_at"));
    assert_null(st_sim_spec_expect("nope"));
}

static void test_apply_syntax(void **state)
{
    (void)state;
    struct st_sim_spec s;
    st_sim_spec_init(&s);
    assert_int_equal(apply(&s, ""), 0);
    assert_int_equal(apply(&s, " , ,"), 0);
    assert_int_equal(apply(&s, " ttft_ms = 7 ,itl_ms=2,\ttokens_per_chunk=3 ,"), 0);
    assert_int_equal(s.ttft_ns, 7 * ST_NS_PER_MS);
    assert_int_equal(s.itl_ns, 2 * ST_NS_PER_MS);
    assert_int_equal(s.tokens_per_chunk, 3);
    /* Left to right: the later value wins. */
    assert_int_equal(apply(&s, "itl_ms=1,itl_ms=4"), 0);
    assert_int_equal(s.itl_ns, 4 * ST_NS_PER_MS);

    /* All or nothing. */
    struct st_sim_spec before = s;
    char err[256] = "";
    assert_int_equal(st_sim_spec_apply(&s, "ttft_ms=1,bogus=2", 17, err, sizeof(err)),
                     ST_ENOTFOUND);
    assert_non_null(strstr(err, "bogus"));
    assert_memory_equal(&s, &before, sizeof(s));
    assert_int_equal(st_sim_spec_apply(&s, "ttft_ms=1,itl_ms=x", 18, err, sizeof(err)), ST_EPARSE);
    assert_non_null(strstr(err, "itl_ms"));
    assert_memory_equal(&s, &before, sizeof(s));
    assert_int_equal(st_sim_spec_apply(&s, "ttft_ms=1,stall", 15, err, sizeof(err)), ST_EPARSE);
    assert_non_null(strstr(err, "stall"));
    assert_int_equal(apply(&s, "=5"), ST_ENOTFOUND);
    assert_int_equal(apply(&s, "ttft_ms="), ST_EPARSE);
    assert_memory_equal(&s, &before, sizeof(s));

    /* Length limit. */
    char big[5000];
    memset(big, ' ', sizeof(big));
    assert_int_equal(st_sim_spec_apply(&s, big, sizeof(big), err, sizeof(err)), ST_ETOOBIG);
    assert_int_equal(st_sim_spec_apply(&s, big, 4096, err, sizeof(err)), 0);

    /* The length argument is honoured: text need not be NUL-terminated. */
    assert_int_equal(st_sim_spec_apply(&s, "itl_ms=3xyz", 8, err, sizeof(err)), 0);
    assert_int_equal(s.itl_ns, 3 * ST_NS_PER_MS);

    /* A NULL err is allowed. */
    assert_int_equal(st_sim_spec_apply(&s, "x=1", 3, NULL, 0), ST_ENOTFOUND);
}

/* ---- listen address ---- */

static void test_listen(void **state)
{
    (void)state;
    struct sockaddr_storage sa;
    socklen_t len;
    int lo = -1;
    assert_int_equal(st_sim_listen_parse("127.0.0.1:8000", &sa, &len, &lo), 0);
    assert_int_equal(sa.ss_family, AF_INET);
    assert_int_equal(len, sizeof(struct sockaddr_in));
    assert_int_equal(ntohs(((struct sockaddr_in *)&sa)->sin_port), 8000);
    assert_int_equal(lo, 1);
    assert_int_equal(st_sim_listen_parse("127.1.2.3:0", &sa, &len, &lo), 0);
    assert_int_equal(lo, 1);
    assert_int_equal(st_sim_listen_parse("localhost:65535", &sa, &len, &lo), 0);
    assert_int_equal(lo, 1);
    assert_int_equal(ntohl(((struct sockaddr_in *)&sa)->sin_addr.s_addr), INADDR_LOOPBACK);
    assert_int_equal(st_sim_listen_parse("[::1]:9000", &sa, &len, &lo), 0);
    assert_int_equal(sa.ss_family, AF_INET6);
    assert_int_equal(len, sizeof(struct sockaddr_in6));
    assert_int_equal(ntohs(((struct sockaddr_in6 *)&sa)->sin6_port), 9000);
    assert_int_equal(lo, 1);
    assert_int_equal(st_sim_listen_parse("0.0.0.0:8000", &sa, &len, &lo), 0);
    assert_int_equal(lo, 0);
    assert_int_equal(st_sim_listen_parse("10.1.2.3:80", &sa, &len, &lo), 0);
    assert_int_equal(lo, 0);
    assert_int_equal(st_sim_listen_parse("[::]:80", &sa, &len, &lo), 0);
    assert_int_equal(lo, 0);
    static const char *const bad[] = {"",
                                      "8000",
                                      ":8000",
                                      "127.0.0.1",
                                      "127.0.0.1:",
                                      "127.0.0.1:x",
                                      "1.2.3:80",
                                      "[::1]8000",
                                      "::1:8000",
                                      "[::1:8000",
                                      "h:65536",
                                      "127.0.0.1:-1",
                                      "example.com:80"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(st_sim_listen_parse(bad[i], &sa, &len, &lo), ST_EPARSE);
    }
}

/* ---- request bodies ---- */

struct reqfix {
    struct st_json doc;
    struct st_buf scratch;
    char err[256];
};

static int parse_req(struct reqfix *f, struct st_sim_req *r, enum st_sim_api api, const char *b)
{
    f->err[0] = '\0';
    return st_sim_req_parse(r, api, b, strlen(b), &f->doc, &f->scratch, f->err, sizeof(f->err));
}

static void test_req_chat(void **state)
{
    (void)state;
    struct reqfix f;
    st_json_init(&f.doc, 0);
    st_buf_init(&f.scratch);
    struct st_sim_req r;

    /* 5 + 6 bytes of string content -> ceil(11 / 4) = 3 tokens; defaults elsewhere. */
    assert_int_equal(parse_req(&f, &r, ST_SIM_API_CHAT,
                               "{\"messages\":[{\"role\":\"system\",\"content\":\"hello\"},"
                               "{\"role\":\"user\",\"content\":\"world!\"}]}"),
                     0);
    assert_int_equal(r.api, ST_SIM_API_CHAT);
    assert_int_equal(r.n_tokens, ST_SIM_DEFAULT_TOKENS);
    assert_int_equal(r.stream, 0);
    assert_int_equal(r.include_usage, 0);
    assert_int_equal(r.continuous_usage, 0);
    assert_int_equal(r.prompt_bytes, 11);
    assert_int_equal(r.prompt_tokens, 3);

    /* Escapes count as their decoded UTF-8 bytes; text parts count; other parts and null do
     * not; the ceiling is taken over the sum. */
    assert_int_equal(
        parse_req(&f, &r, ST_SIM_API_CHAT,
                  "{\"messages\":[{\"role\":\"user\",\"content\":\"\\u00e9\\n\"},"
                  "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"abcd\"},"
                  "{\"type\":\"image_url\",\"image_url\":{\"url\":\"xxxxxxxx\"}}]},"
                  "{\"role\":\"assistant\",\"content\":null}],"
                  "\"max_tokens\":7,\"stream\":true,"
                  "\"stream_options\":{\"include_usage\":true,\"continuous_usage_stats\":true}}"),
        0);
    assert_int_equal(r.prompt_bytes, 3 + 4);
    assert_int_equal(r.prompt_tokens, 2);
    assert_int_equal(r.n_tokens, 7);
    assert_int_equal(r.stream, 1);
    assert_int_equal(r.include_usage, 1);
    assert_int_equal(r.continuous_usage, 1);

    /* max_completion_tokens wins over max_tokens; null counts as absent. */
    assert_int_equal(parse_req(&f, &r, ST_SIM_API_CHAT,
                               "{\"messages\":[],\"max_tokens\":5,\"max_completion_tokens\":9}"),
                     0);
    assert_int_equal(r.n_tokens, 9);
    assert_int_equal(r.prompt_tokens, 0);
    assert_int_equal(parse_req(&f, &r, ST_SIM_API_CHAT,
                               "{\"messages\":[],\"max_completion_tokens\":null,\"max_tokens\":5,"
                               "\"stream\":null,\"stream_options\":null}"),
                     0);
    assert_int_equal(r.n_tokens, 5);
    assert_int_equal(parse_req(&f, &r, ST_SIM_API_CHAT, "{\"messages\":[],\"max_tokens\":1000000}"),
                     0);
    assert_int_equal(r.n_tokens, 1000000);
    assert_int_equal(parse_req(&f, &r, ST_SIM_API_CHAT, "{\"messages\":[],\"max_tokens\":3.0}"), 0);
    assert_int_equal(r.n_tokens, 3);

    static const char *const bad[] = {
        "",
        "{",
        "[]",
        "{\"messages\":[]} x",
        "{\"messages\":\"hi\"}",
        "{\"messages\":[1]}",
        "{}",
        "{\"messages\":[],\"max_tokens\":0}",
        "{\"messages\":[],\"max_tokens\":1000001}",
        "{\"messages\":[],\"max_tokens\":-3}",
        "{\"messages\":[],\"max_tokens\":2.5}",
        "{\"messages\":[],\"max_tokens\":\"5\"}",
        "{\"messages\":[],\"max_completion_tokens\":0,\"max_tokens\":5}",
        "{\"messages\":[],\"stream\":1}",
        "{\"messages\":[],\"stream_options\":true}",
        "{\"messages\":[],\"stream_options\":{\"include_usage\":\"yes\"}}",
        "{\"messages\":[{\"content\":\"\xC3\x28\"}]}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(parse_req(&f, &r, ST_SIM_API_CHAT, bad[i]), ST_EPARSE);
        assert_true(f.err[0] != '\0');
    }
    assert_int_equal(parse_req(&f, &r, ST_SIM_API_CHAT, "{\"messages\":[],\"max_tokens\":0}"),
                     ST_EPARSE);
    assert_non_null(strstr(f.err, "max_tokens"));
    st_json_release(&f.doc);
    st_buf_release(&f.scratch);
}

static void test_req_completions(void **state)
{
    (void)state;
    struct reqfix f;
    st_json_init(&f.doc, 0);
    st_buf_init(&f.scratch);
    struct st_sim_req r;
    assert_int_equal(
        parse_req(&f, &r, ST_SIM_API_COMPLETIONS, "{\"prompt\":\"12345678\",\"max_tokens\":4}"), 0);
    assert_int_equal(r.api, ST_SIM_API_COMPLETIONS);
    assert_int_equal(r.prompt_bytes, 8);
    assert_int_equal(r.prompt_tokens, 2);
    assert_int_equal(r.n_tokens, 4);
    assert_int_equal(parse_req(&f, &r, ST_SIM_API_COMPLETIONS, "{\"prompt\":\"123456789\"}"), 0);
    assert_int_equal(r.prompt_tokens, 3);
    assert_int_equal(parse_req(&f, &r, ST_SIM_API_COMPLETIONS, "{\"prompt\":\"\"}"), 0);
    assert_int_equal(r.prompt_tokens, 0);
    /* A token-id prompt counts its ids. */
    assert_int_equal(parse_req(&f, &r, ST_SIM_API_COMPLETIONS, "{\"prompt\":[1,2,3,4,5]}"), 0);
    assert_int_equal(r.prompt_tokens, 5);
    assert_int_equal(parse_req(&f, &r, ST_SIM_API_COMPLETIONS, "{\"prompt\":[]}"), 0);
    assert_int_equal(r.prompt_tokens, 0);
    static const char *const bad[] = {"{}",
                                      "{\"prompt\":null}",
                                      "{\"prompt\":5}",
                                      "{\"prompt\":[\"a\",\"b\"]}",
                                      "{\"prompt\":[1,-2]}",
                                      "{\"prompt\":[1.5]}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(parse_req(&f, &r, ST_SIM_API_COMPLETIONS, bad[i]), ST_EPARSE);
    }
    st_json_release(&f.doc);
    st_buf_release(&f.scratch);
}

/* ---- timeline ---- */

static void test_chunks(void **state)
{
    (void)state;
    assert_int_equal(st_sim_chunks(1, 1), 1);
    assert_int_equal(st_sim_chunks(10, 1), 10);
    assert_int_equal(st_sim_chunks(10, 3), 4);
    assert_int_equal(st_sim_chunks(9, 3), 3);
    assert_int_equal(st_sim_chunks(1, 8), 1);
    assert_int_equal(st_sim_chunks(1000000, 8), 125000);
    assert_int_equal(st_sim_chunks(1000000, 7), 142858);
    /* 10 tokens at 3 a chunk: 3, 3, 3, 1, then nothing. */
    static const uint32_t want[] = {3, 3, 3, 1, 0, 0};
    for (uint32_t j = 0; j < 6; j++) {
        assert_int_equal(st_sim_chunk_tokens(10, 3, j), want[j]);
    }
    /* Every split sums to n. */
    for (uint32_t n = 1; n <= 50; n++) {
        for (uint32_t k = 1; k <= 8; k++) {
            uint32_t c = st_sim_chunks(n, k), sum = 0;
            for (uint32_t j = 0; j < c; j++) {
                uint32_t t = st_sim_chunk_tokens(n, k, j);
                assert_true(t >= 1 && t <= k);
                assert_true(j + 1 == c || t == k);
                sum += t;
            }
            assert_int_equal(sum, n);
            assert_int_equal(st_sim_chunk_tokens(n, k, c), 0);
        }
    }
    assert_int_equal(st_sim_chunk_tokens(1000000, 8, 124999), 8);
    assert_int_equal(st_sim_chunk_tokens(1000000, 8, UINT32_MAX), 0);
}

static void test_timeline(void **state)
{
    (void)state;
    struct st_sim_spec s;
    st_sim_spec_init(&s);
    assert_int_equal(apply(&s, "ttft_ms=20,itl_ms=5"), 0);
    const uint64_t t0 = 1000 * ST_NS_PER_S;
    assert_int_equal(st_sim_chunk_due_ns(&s, t0, 0), t0 + 20 * ST_NS_PER_MS);
    assert_int_equal(st_sim_chunk_due_ns(&s, t0, 1), t0 + 25 * ST_NS_PER_MS);
    assert_int_equal(st_sim_chunk_due_ns(&s, t0, 10), t0 + 70 * ST_NS_PER_MS);
    /* The largest values stay exact (no overflow): 1 h + 1e6 * 1 h. */
    assert_int_equal(apply(&s, "ttft_ms=3600000,itl_ms=3600000"), 0);
    assert_true(st_sim_chunk_due_ns(&s, t0, 999999) ==
                t0 + 3600000 * ST_NS_PER_MS + 999999ull * 3600000 * ST_NS_PER_MS);

    /* Non-streaming body: ttft + (C - 1) * itl, or the headers delay when that is later. */
    struct st_sim_req r = {.api = ST_SIM_API_CHAT, .n_tokens = 10};
    st_sim_spec_init(&s);
    assert_int_equal(apply(&s, "ttft_ms=30,itl_ms=5,tokens_per_chunk=3"), 0);
    assert_int_equal(st_sim_body_due_ns(&s, &r, t0), t0 + 45 * ST_NS_PER_MS);
    assert_int_equal(apply(&s, "headers_delay_ms=100"), 0);
    assert_int_equal(st_sim_body_due_ns(&s, &r, t0), t0 + 100 * ST_NS_PER_MS);
    r.n_tokens = 1;
    assert_int_equal(apply(&s, "headers_delay_ms=0"), 0);
    assert_int_equal(st_sim_body_due_ns(&s, &r, t0), t0 + 30 * ST_NS_PER_MS);
}

static void test_usage_on(void **state)
{
    (void)state;
    struct st_sim_spec s;
    st_sim_spec_init(&s);
    struct st_sim_req r = {.stream = 1};
    assert_int_equal(st_sim_usage_on(&s, &r), 0);
    r.include_usage = 1;
    assert_int_equal(st_sim_usage_on(&s, &r), 1);
    r.stream = 0;
    r.include_usage = 0;
    assert_int_equal(st_sim_usage_on(&s, &r), 1);
    s.usage = ST_SIM_USAGE_NEVER;
    assert_int_equal(st_sim_usage_on(&s, &r), 0);
    r.stream = 1;
    r.include_usage = 1;
    assert_int_equal(st_sim_usage_on(&s, &r), 0);
    s.usage = ST_SIM_USAGE_ALWAYS;
    r.include_usage = 0;
    assert_int_equal(st_sim_usage_on(&s, &r), 1);
}

static void test_token_text(void **state)
{
    (void)state;
    char t[ST_SIM_TOKEN_BYTES];
    st_sim_token_text(0, t);
    assert_memory_equal(t, " aaa", 4);
    st_sim_token_text(1, t);
    assert_memory_equal(t, " aab", 4);
    st_sim_token_text(25, t);
    assert_memory_equal(t, " aaz", 4);
    st_sim_token_text(26, t);
    assert_memory_equal(t, " aba", 4);
    st_sim_token_text(676, t);
    assert_memory_equal(t, " baa", 4);
    st_sim_token_text(17575, t);
    assert_memory_equal(t, " zzz", 4);
    st_sim_token_text(17576, t);
    assert_memory_equal(t, " aaa", 4);
    st_sim_token_text(UINT64_MAX, t);
    assert_int_equal(t[0], ' ');
    /* 17576 distinct texts, each a space and three lowercase letters. */
    static unsigned char seen[17576];
    memset(seen, 0, sizeof(seen));
    for (uint64_t i = 0; i < ST_SIM_TOKEN_CYCLE; i++) {
        st_sim_token_text(i, t);
        assert_int_equal(t[0], ' ');
        for (int k = 1; k < 4; k++) {
            assert_true(t[k] >= 'a' && t[k] <= 'z');
        }
        unsigned idx =
            (unsigned)(t[1] - 'a') * 676 + (unsigned)(t[2] - 'a') * 26 + (unsigned)(t[3] - 'a');
        assert_int_equal(seen[idx], 0);
        seen[idx] = 1;
    }
}

/* ---- templates ---- */

static const struct st_sim_resp chat_resp = {
    .api = ST_SIM_API_CHAT,
    .id = 42,
    .created_unix_s = 1796021762,
    .model = "m\"odel/\\x \xC3\xA9",
    .n_tokens = 10,
    .prompt_tokens = 7,
    .cached_tokens = 3,
};

/* Renders content chunk of tokens tok0.. into a fresh buffer and returns it (free it). */
static char *render(const struct st_sim_tmpl *t, uint64_t tok0, uint32_t ntok, unsigned flags,
                    uint64_t done, size_t *n)
{
    size_t max = st_sim_tmpl_content_max(t, ntok, flags);
    char *buf = malloc(max + 1);
    assert_non_null(buf);
    *n = st_sim_tmpl_content(t, buf, tok0, ntok, flags, done);
    assert_true(*n <= max);
    buf[*n] = '\0';
    return buf;
}

static void assert_common(const struct st_json *d, const char *id, const char *object)
{
    assert_str(d, st_json_get(d, 0, "id"), id);
    assert_str(d, st_json_get(d, 0, "object"), object);
    assert_int_equal(get_i64(d, st_json_get(d, 0, "created")), 1796021762);
    assert_str(d, st_json_get(d, 0, "model"), chat_resp.model);
}

static void test_tmpl_chat(void **state)
{
    (void)state;
    struct st_sim_tmpl t;
    struct st_json d;
    struct st_buf s;
    st_json_init(&d, 0);
    st_buf_init(&s);
    st_sim_tmpl_init(&t, &chat_resp);
    size_t n;

    /* A middle chunk of 3 tokens. */
    char *ev = render(&t, 3, 3, 0, 0, &n);
    assert_int_equal(parse_event(&d, ev, n), 0);
    assert_common(&d, "chatcmpl-sim-42", "chat.completion.chunk");
    int c = choice0(&d);
    assert_int_equal(get_i64(&d, st_json_get(&d, c, "index")), 0);
    assert_str(&d, st_json_get(&d, st_json_get(&d, c, "delta"), "content"), " aad aae aaf");
    assert_int_equal(st_json_type(&d, st_json_get(&d, c, "finish_reason")), ST_JSON_NULL);
    assert_int_equal(st_json_get(&d, 0, "usage"), -1);
    /* Size: fixed template plus 4 bytes a token. */
    size_t n1;
    char *ev1 = render(&t, 0, 1, 0, 0, &n1);
    assert_int_equal(n, n1 + 8);
    free(ev1);
    free(ev);

    /* The last chunk, with a running usage. */
    ev = render(&t, 9, 1, ST_SIM_EV_LAST | ST_SIM_EV_USAGE, 10, &n);
    assert_int_equal(parse_event(&d, ev, n), 0);
    c = choice0(&d);
    assert_str(&d, st_json_get(&d, st_json_get(&d, c, "delta"), "content"), " aaj");
    assert_str(&d, st_json_get(&d, c, "finish_reason"), "length");
    assert_int_equal(get_i64(&d, path(&d, "usage", "prompt_tokens", NULL)), 7);
    assert_int_equal(get_i64(&d, path(&d, "usage", "completion_tokens", NULL)), 10);
    assert_int_equal(get_i64(&d, path(&d, "usage", "total_tokens", NULL)), 17);
    free(ev);

    /* Big running counts still fit the bound. */
    ev = render(&t, 0, 8, ST_SIM_EV_USAGE, UINT64_MAX / 2, &n);
    assert_int_equal(parse_event(&d, ev, n), 0);
    free(ev);

    /* Faults: invalid UTF-8 in valid JSON syntax, cut JSON, and a padded 2 MiB+ line. */
    ev = render(&t, 0, 2, ST_SIM_EV_BAD_UTF8, 0, &n);
    assert_int_equal(parse_event(&d, ev, n), ST_EUTF8);
    assert_non_null(strstr(ev, "\"content\":\" \xC3\x28"
                               "a aab\""));
    assert_int_equal(n, n1 + 4);
    free(ev);
    ev = render(&t, 0, 1, ST_SIM_EV_MALFORMED, 0, &n);
    assert_int_equal(parse_event(&d, ev, n), ST_EPARSE);
    assert_int_equal(n, n1 - 1);
    free(ev);
    ev = render(&t, 0, 1, ST_SIM_EV_OVERSIZE | ST_SIM_EV_LAST, 0, &n);
    assert_true(n > ST_SIM_OVERSIZE_PAD_BYTES);
    assert_int_equal(parse_event(&d, ev, n), 0);
    size_t padlen = 0;
    (void)st_json_raw(&d, st_json_get(&d, 0, "sim_pad"), &padlen);
    assert_int_equal(padlen, ST_SIM_OVERSIZE_PAD_BYTES);
    assert_str(&d, st_json_get(&d, choice0(&d), "finish_reason"), "length");
    free(ev);

    /* Role chunk. */
    assert_int_equal(parse_event(&d, t.role.data, t.role.len), 0);
    assert_common(&d, "chatcmpl-sim-42", "chat.completion.chunk");
    c = choice0(&d);
    assert_str(&d, st_json_get(&d, st_json_get(&d, c, "delta"), "role"), "assistant");
    assert_str(&d, st_json_get(&d, st_json_get(&d, c, "delta"), "content"), "");
    assert_int_equal(st_json_type(&d, st_json_get(&d, c, "finish_reason")), ST_JSON_NULL);

    /* Usage chunk. */
    assert_int_equal(parse_event(&d, t.usage.data, t.usage.len), 0);
    assert_common(&d, "chatcmpl-sim-42", "chat.completion.chunk");
    assert_int_equal(st_json_type(&d, st_json_get(&d, 0, "choices")), ST_JSON_ARRAY);
    assert_int_equal(st_json_first(&d, st_json_get(&d, 0, "choices")), -1);
    assert_int_equal(get_i64(&d, path(&d, "usage", "prompt_tokens", NULL)), 7);
    assert_int_equal(get_i64(&d, path(&d, "usage", "completion_tokens", NULL)), 10);
    assert_int_equal(get_i64(&d, path(&d, "usage", "total_tokens", NULL)), 17);
    assert_int_equal(get_i64(&d, path(&d, "usage", "prompt_tokens_details", "cached_tokens")), 3);

    /* Fixed events. */
    const char *err_ev = ST_SIM_EVENT_ERROR;
    assert_int_equal(parse_event(&d, err_ev, strlen(err_ev)), 0);
    assert_str(&d, path(&d, "error", "message", NULL), "sim error");
    assert_str(&d, path(&d, "error", "type", NULL), "InternalServerError");
    assert_int_equal(get_i64(&d, path(&d, "error", "code", NULL)), 500);
    assert_string_equal(ST_SIM_EVENT_DONE, "data: [DONE]\n\n");
    assert_string_equal(ST_SIM_EVENT_COMMENT, ":\n\n");

    st_sim_tmpl_release(&t);
    st_json_release(&d);
    st_buf_release(&s);
}

static void test_tmpl_completions(void **state)
{
    (void)state;
    struct st_sim_resp r = chat_resp;
    r.api = ST_SIM_API_COMPLETIONS;
    struct st_sim_tmpl t;
    struct st_json d;
    st_json_init(&d, 0);
    st_sim_tmpl_init(&t, &r);
    size_t n;
    char *ev = render(&t, 0, 2, ST_SIM_EV_LAST, 0, &n);
    assert_int_equal(parse_event(&d, ev, n), 0);
    assert_common(&d, "cmpl-sim-42", "text_completion");
    int c = choice0(&d);
    assert_str(&d, st_json_get(&d, c, "text"), " aaa aab");
    assert_str(&d, st_json_get(&d, c, "finish_reason"), "length");
    assert_int_equal(st_json_get(&d, c, "delta"), -1);
    free(ev);
    ev = render(&t, 0, 1, ST_SIM_EV_USAGE | ST_SIM_EV_BAD_UTF8, 1, &n);
    assert_int_equal(parse_event(&d, ev, n), ST_EUTF8);
    free(ev);
    assert_int_equal(t.role.len, 0); /* no role chunk for completions */
    assert_int_equal(parse_event(&d, t.usage.data, t.usage.len), 0);
    assert_common(&d, "cmpl-sim-42", "text_completion");
    st_sim_tmpl_release(&t);
    st_json_release(&d);
}

static void test_body(void **state)
{
    (void)state;
    struct st_json d;
    struct st_buf b;
    st_json_init(&d, 0);
    st_buf_init(&b);

    st_sim_render_body(&b, &chat_resp, 1);
    assert_int_equal(st_json_parse(&d, b.data, b.len), 0);
    assert_common(&d, "chatcmpl-sim-42", "chat.completion");
    int c = choice0(&d);
    assert_str(&d, st_json_get(&d, st_json_get(&d, c, "message"), "role"), "assistant");
    assert_str(&d, st_json_get(&d, st_json_get(&d, c, "message"), "content"),
               " aaa aab aac aad aae aaf aag aah aai aaj");
    assert_str(&d, st_json_get(&d, c, "finish_reason"), "length");
    assert_int_equal(get_i64(&d, path(&d, "usage", "total_tokens", NULL)), 17);
    assert_int_equal(get_i64(&d, path(&d, "usage", "prompt_tokens_details", "cached_tokens")), 3);

    struct st_sim_resp r = chat_resp;
    r.api = ST_SIM_API_COMPLETIONS;
    r.n_tokens = 1;
    st_buf_clear(&b);
    st_sim_render_body(&b, &r, 0);
    assert_int_equal(st_json_parse(&d, b.data, b.len), 0);
    assert_common(&d, "cmpl-sim-42", "text_completion");
    assert_str(&d, st_json_get(&d, choice0(&d), "text"), " aaa");
    assert_int_equal(st_json_get(&d, 0, "usage"), -1);

    /* A long body (1e6 tokens) is valid and exactly sized. */
    r.n_tokens = ST_SIM_MAX_TOKENS;
    st_buf_clear(&b);
    st_sim_render_body(&b, &r, 1);
    assert_int_equal(st_json_parse(&d, b.data, b.len), 0);
    size_t tlen = 0;
    (void)st_json_raw(&d, st_json_get(&d, choice0(&d), "text"), &tlen);
    assert_int_equal(tlen, 4u * ST_SIM_MAX_TOKENS);

    st_buf_clear(&b);
    st_sim_render_error(&b, "bad \"thing\"", "BadRequestError", 400);
    assert_int_equal(st_json_parse(&d, b.data, b.len), 0);
    assert_str(&d, path(&d, "error", "message", NULL), "bad \"thing\"");
    assert_str(&d, path(&d, "error", "type", NULL), "BadRequestError");
    assert_int_equal(get_i64(&d, path(&d, "error", "code", NULL)), 400);

    st_json_release(&d);
    st_buf_release(&b);
}

static void test_status_names(void **state)
{
    (void)state;
    assert_string_equal(st_sim_error_type(429), "RateLimitError");
    assert_string_equal(st_sim_error_type(503), "ServiceUnavailableError");
    assert_string_equal(st_sim_error_type(400), "BadRequestError");
    assert_string_equal(st_sim_error_type(418), "BadRequestError");
    assert_string_equal(st_sim_error_type(500), "InternalServerError");
    assert_string_equal(st_sim_error_type(599), "InternalServerError");
    assert_string_equal(st_sim_reason(429), "Too Many Requests");
    assert_string_equal(st_sim_reason(503), "Service Unavailable");
    assert_string_equal(st_sim_reason(404), "Not Found");
    assert_string_equal(st_sim_reason(599), "Error");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),         cmocka_unit_test(test_time_keys),
        cmocka_unit_test(test_word_keys),        cmocka_unit_test(test_count_keys),
        cmocka_unit_test(test_unknown_key),      cmocka_unit_test(test_apply_syntax),
        cmocka_unit_test(test_listen),           cmocka_unit_test(test_req_chat),
        cmocka_unit_test(test_req_completions),  cmocka_unit_test(test_chunks),
        cmocka_unit_test(test_timeline),         cmocka_unit_test(test_usage_on),
        cmocka_unit_test(test_token_text),       cmocka_unit_test(test_tmpl_chat),
        cmocka_unit_test(test_tmpl_completions), cmocka_unit_test(test_body),
        cmocka_unit_test(test_status_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
