/*
 * Tests for src/workload/trace.c and dataset.c and their kinds: Mooncake lines (fields, blank
 * lines, every kind of bad line named by file:line, timestamps going backwards, bounds), dense
 * block numbering, trace prompts (exact lengths, equal hash ids give equal text blocks, a shared
 * leading run makes a group with a warm-up prefix, too few ids get a fresh window, send offsets
 * from the timestamps and past the end); ShareGPT arrays (usable and skipped conversations, bad
 * elements by line, the scanner's structural errors) and dataset prompts (first human turn,
 * output from the first gpt turn, a seeded sample, overrides).
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
#include "workload/corpus.h"
#include "workload/dataset.h"
#include "workload/item.h"
#include "workload/trace.h"
#include "workload/workload.h"

struct sim {
    int chat;
    uint64_t calls;
};

static uint64_t codepoints(const char *s, size_t n)
{
    uint64_t c = 0;
    for (size_t i = 0; i < n; i++) {
        c += ((unsigned char)s[i] & 0xC0) != 0x80;
    }
    return c;
}

static int sim_count(void *ctx, const char *text, size_t len, uint64_t *tokens, char *err,
                     size_t errlen)
{
    struct sim *s = ctx;
    (void)err;
    (void)errlen;
    s->calls++;
    *tokens = (codepoints(text, len) + (s->chat ? 24 : 0) + 3) / 4;
    return 0;
}

static struct st_corpus corpus;

static int setup(void **state)
{
    (void)state;
    st_corpus_builtin(&corpus, 3, 1u << 20);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    st_corpus_release(&corpus);
    return 0;
}

/* ---- trace parsing ---- */

static void test_trace_parse(void **state)
{
    (void)state;
    struct st_trace t;
    char err[256];
    const char d[] = "{\"timestamp\": 27482, \"input_length\": 6955, \"output_length\": 52, "
                     "\"hash_ids\": [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2353, 2354]}\n"
                     "\n"
                     "{\"timestamp\": 27482.5, \"input_length\": 1, \"output_length\": 1}\r\n"
                     "  \t\n"
                     "{\"hash_ids\": [], \"output_length\": 3, \"input_length\": 9, \"timestamp\": "
                     "30000, \"extra\": null}";
    assert_int_equal(st_trace_parse(&t, "m.jsonl", d, sizeof(d) - 1, err, sizeof(err)), 0);
    assert_int_equal(t.n, 3);
    assert_int_equal(t.reqs[0].line, 1);
    assert_true(t.reqs[0].timestamp_ms == 27482);
    assert_int_equal(t.reqs[0].input_len, 6955);
    assert_int_equal(t.reqs[0].output_len, 52);
    assert_int_equal(t.reqs[0].nids, 14);
    assert_int_equal(t.ids[t.reqs[0].id0 + 12], 2353);
    assert_int_equal(t.reqs[1].line, 3);
    assert_true(t.reqs[1].timestamp_ms == 27482.5);
    assert_int_equal(t.reqs[1].nids, 0);
    assert_int_equal(t.reqs[2].line, 5);
    assert_int_equal(t.nids, 14);
    st_trace_release(&t);
    st_trace_release(&t);
}

static void test_trace_bad_lines(void **state)
{
    (void)state;
    struct st_trace t;
    char err[256];
    const char ok[] = "{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 2, "
                      "\"hash_ids\": [1]}\n";
    const struct {
        const char *line, *msg;
    } cases[] = {
        {"not json", "expected a JSON object {\"timestamp\": ms, \"input_length\": N, "
                     "\"output_length\": M, \"hash_ids\": [...]}"},
        {"[1, 2]", "expected a JSON object {\"timestamp\": ms, \"input_length\": N, "
                   "\"output_length\": M, \"hash_ids\": [...]}"},
        {"{\"input_length\": 10, \"output_length\": 2}",
         "expected \"timestamp\": milliseconds >= 0"},
        {"{\"timestamp\": -1, \"input_length\": 10, \"output_length\": 2}",
         "expected \"timestamp\": milliseconds >= 0"},
        {"{\"timestamp\": \"5\", \"input_length\": 10, \"output_length\": 2}",
         "expected \"timestamp\": milliseconds >= 0"},
        {"{\"timestamp\": 9, \"input_length\": 0, \"output_length\": 2}",
         "expected \"input_length\": tokens, 1 to 16777216"},
        {"{\"timestamp\": 9, \"input_length\": 1.5, \"output_length\": 2}",
         "expected \"input_length\": tokens, 1 to 16777216"},
        {"{\"timestamp\": 9, \"input_length\": 16777217, \"output_length\": 2}",
         "expected \"input_length\": tokens, 1 to 16777216"},
        {"{\"timestamp\": 9, \"input_length\": 10}", "expected \"output_length\": tokens, 1 to "
                                                     "16777216"},
        {"{\"timestamp\": 9, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": 3}",
         "expected \"hash_ids\": an array of at most 65536 integers"},
        {"{\"timestamp\": 9, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [1, -2]}",
         "expected \"hash_ids\" of integers >= 0"},
        {"{\"timestamp\": 9, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [\"a\"]}",
         "expected \"hash_ids\" of integers >= 0"},
        {"{\"timestamp\": 4, \"input_length\": 10, \"output_length\": 2}",
         "expected a \"timestamp\" no earlier than the line before"},
        {"{\"timestamp\": 1e300, \"input_length\": 10, \"output_length\": 2}",
         "expected a \"timestamp\" within 1.8e10 ms of the first line's"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct st_buf b;
        st_buf_init(&b);
        st_buf_puts(&b, ok);
        st_buf_puts(&b, "\n");
        st_buf_puts(&b, cases[i].line);
        st_buf_puts(&b, "\n");
        st_buf_puts(&b, ok);
        assert_int_equal(st_trace_parse(&t, "trace.jsonl", b.data, b.len, err, sizeof(err)),
                         ST_EPARSE);
        char want[400];
        snprintf(want, sizeof(want), "trace.jsonl:3: %s", cases[i].msg);
        assert_string_equal(err, want);
        assert_null(t.reqs);
        assert_int_equal(t.n, 0);
        st_buf_release(&b);
    }
    assert_int_equal(st_trace_parse(&t, "e.jsonl", "\n \n", 3, err, sizeof(err)), ST_EUSAGE);
    assert_string_equal(err, "e.jsonl: no request in the trace");
}

static void test_trace_blocks(void **state)
{
    (void)state;
    struct st_trace t;
    const char d[] = "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": "
                     "[7, 9, 7]}\n"
                     "{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": "
                     "[9, 1000000000000, 3]}\n"
                     "{\"timestamp\": 2, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": "
                     "[5]}\n";
    assert_int_equal(st_trace_parse(&t, "b", d, sizeof(d) - 1, NULL, 0), 0);
    uint32_t block_of[7];
    memset(block_of, 0xff, sizeof(block_of));
    assert_int_equal(st_trace_blocks(&t, 2, block_of), 4);
    const uint32_t want[] = {0, 1, 0, 1, 2, 3};
    assert_memory_equal(block_of, want, sizeof(want));
    assert_int_equal(block_of[6], UINT32_MAX); /* request 2 not asked for */
    assert_int_equal(st_trace_blocks(&t, 99, block_of), 5);
    st_trace_release(&t);
}

/* ---- trace workloads ---- */

static const char trace_data[] =
    "{\"timestamp\": 100, \"input_length\": 40, \"output_length\": 5, \"hash_ids\": [1, 2, 3]}\n"
    "{\"timestamp\": 350, \"input_length\": 40, \"output_length\": 6, \"hash_ids\": [1, 2, 4]}\n"
    "{\"timestamp\": 1100.5, \"input_length\": 20, \"output_length\": 7, \"hash_ids\": [9, 10]}\n"
    "\n"
    "{\"timestamp\": 1600, \"input_length\": 50, \"output_length\": 8, \"hash_ids\": [5]}\n"
    "{\"timestamp\": 2100, \"input_length\": 40, \"output_length\": 9, \"hash_ids\": [1, 2, 3]}\n";

struct got {
    struct st_buf text;
    struct st_req_item item;
};

static void get(const struct st_workload *wl, uint64_t id, struct got *g)
{
    struct st_buf scratch;
    st_buf_init(&scratch);
    st_buf_init(&g->text);
    memset(&g->item, 0, sizeof(g->item));
    assert_int_equal(st_workload_source(wl, id, &g->item, &scratch), 0);
    st_buf_append(&g->text, g->item.prompt, g->item.prompt_len);
    g->item.prompt = NULL;
    g->item.tag_json = NULL;
    st_buf_release(&scratch);
}

static void test_trace_workload(void **state)
{
    (void)state;
    for (int chat = 0; chat <= 1; chat++) {
        struct sim s = {.chat = chat};
        struct st_wl_params p;
        struct st_workload *wl = NULL;
        char err[512];
        st_wl_params_defaults(&p);
        p.kind = ST_WL_TRACE;
        p.chat = chat;
        p.data = trace_data;
        p.data_len = sizeof(trace_data) - 1;
        p.data_name = "t.jsonl";
        p.block_tokens = 16;
        assert_int_equal(
            st_workload_build(&wl, &p, &corpus, NULL, 0, sim_count, &s, err, sizeof(err)), 0);
        assert_int_equal(st_workload_items(wl), 5);
        const uint64_t in[] = {40, 40, 20, 50, 40}, out[] = {5, 6, 7, 8, 9};
        const uint64_t t_ns[] = {0, 250000000, 1000500000, 1500000000, 2000000000};
        struct got g[5];
        for (uint64_t i = 0; i < 5; i++) {
            uint64_t r, c;
            st_workload_tokens(wl, i, &r, &c);
            assert_int_equal(r, in[i]);
            assert_int_equal(c, in[i]);
            get(wl, i, &g[i]);
            assert_int_equal((codepoints(g[i].text.data, g[i].text.len) + (chat ? 24 : 0) + 3) / 4,
                             in[i]);
            assert_int_equal(g[i].item.max_tokens, (int64_t)out[i]);
            assert_int_equal(g[i].item.t_offset_ns, t_ns[i]);
        }
        /* Blocks 1 and 2 are the same 2 x 16 tokens of text in items 0, 1 and 4; block 3 and
         * block 4 are not. Item 4 repeats item 0 exactly. */
        const size_t two = 2 * 16 * 4;
        assert_memory_equal(g[0].text.data, g[1].text.data, two);
        assert_true(memcmp(g[0].text.data + two, g[1].text.data + two, 8) != 0);
        assert_int_equal(g[0].text.len, g[4].text.len);
        assert_memory_equal(g[0].text.data, g[4].text.data, g[0].text.len);
        assert_true(memcmp(g[0].text.data, g[2].text.data, 16) != 0);
        /* One group: items starting with block 1; its prefix is blocks 1 and 2. */
        assert_int_equal(st_workload_prefix_groups(wl), 1);
        struct st_req_item w;
        struct st_buf scratch;
        st_buf_init(&scratch);
        assert_int_equal(st_workload_warm_item(wl, 0, &w, &scratch), 0);
        assert_int_equal(w.prompt_len, two);
        assert_memory_equal(w.prompt, g[0].text.data, two);
        assert_int_equal(w.input_tokens, 32 + (chat ? 6 : 0));
        assert_non_null(strstr(w.tag_json, "\"kind\":\"warm\",\"group\":0"));
        st_buf_clear(&scratch);
        struct st_req_item it;
        assert_int_equal(st_workload_source(wl, 1, &it, &scratch), 0);
        assert_non_null(strstr(it.tag_json, "\"kind\":\"trace\",\"group\":0,\"trace_line\":2,"));
        st_buf_clear(&scratch);
        assert_int_equal(st_workload_source(wl, 3, &it, &scratch), 0);
        assert_non_null(strstr(it.tag_json, "\"trace_line\":5,"));
        assert_null(strstr(it.tag_json, "group"));
        /* Past the end: the trace again, one pass (2 s and a mean gap of 0.5 s) later. */
        st_buf_clear(&scratch);
        assert_int_equal(st_workload_source(wl, 6, &it, &scratch), 0);
        assert_int_equal(it.t_offset_ns, 250000000ull + 2500000000ull);
        assert_int_equal(it.prompt_len, g[1].text.len);
        st_buf_release(&scratch);
        for (int i = 0; i < 5; i++) {
            st_buf_release(&g[i].text);
        }
        st_workload_free(wl);
    }
}

/* A Mooncake-shaped trace at the default block size: many requests over a pool of ids; every
 * prompt exact, windows of distinct blocks disjoint, an override of the outputs, a cap. */
static void test_trace_mooncake(void **state)
{
    (void)state;
    struct st_buf d;
    st_buf_init(&d);
    uint64_t x = 12345;
    for (int i = 0; i < 60; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t in = 600 + (x >> 33) % 3000, nb = (in + 511) / 512;
        st_buf_printf(&d,
                      "{\"timestamp\": %d, \"input_length\": %llu, \"output_length\": %d, "
                      "\"hash_ids\": [",
                      i * 37, (unsigned long long)in, 1 + i % 50);
        for (uint64_t k = 0; k < nb; k++) {
            /* Leading ids shared among requests of the same family. */
            uint64_t id = k < 2 ? (uint64_t)(i % 4) * 100 + k : 1000 + (uint64_t)i * 10 + k;
            st_buf_printf(&d, "%s%llu", k ? ", " : "", (unsigned long long)id);
        }
        st_buf_puts(&d, "]}\n");
    }
    struct sim s = {.chat = 1};
    struct st_wl_params p;
    struct st_workload *wl = NULL;
    char err[512];
    st_wl_params_defaults(&p);
    p.kind = ST_WL_TRACE;
    p.data = d.data;
    p.data_len = d.len;
    p.requests = 50;
    p.output_len = 100;
    uint64_t hint = st_wl_corpus_bytes_hint(&p);
    assert_true(hint > 4 * 512 * 50);
    assert_int_equal(st_workload_build(&wl, &p, &corpus, NULL, 0, sim_count, &s, err, sizeof(err)),
                     0);
    assert_int_equal(st_workload_items(wl), 50);
    assert_true(st_workload_max_len_error(wl) == 0);
    assert_int_equal(st_workload_prefix_groups(wl), 4);
    for (uint64_t i = 0; i < 50; i++) {
        struct got g;
        get(wl, i, &g);
        assert_int_equal(g.item.max_tokens, 100);
        assert_int_equal(g.item.t_offset_ns, i * 37 * 1000000ull);
        st_buf_release(&g.text);
    }
    st_workload_free(wl);
    st_buf_release(&d);
}

/* ---- dataset parsing ---- */

static void test_dataset_parse(void **state)
{
    (void)state;
    struct st_dataset ds;
    char err[256];
    const char d[] =
        "  [\n"
        "{\"id\": \"a\", \"conversations\": [{\"from\": \"human\", \"value\": \"Hi "
        "\\\"there\\\"\"},"
        " {\"from\": \"gpt\", \"value\": \"Hello [not a bracket] {or brace}, friend.\"}]},\n"
        "{\"conversations\": [{\"from\": \"gpt\", \"value\": \"I start.\"}, {\"from\": \"human\", "
        "\"value\": \"Then me.\"}, {\"from\": \"system\", \"value\": \"x\"}, {\"from\": "
        "\"chatgpt\", \"value\": \"And me.\"}]},\n"
        "{\"conversations\": [{\"from\": \"human\", \"value\": \"Nobody answers.\"}]},\n"
        "{\"conversations\": [{\"from\": \"human\", \"value\": \"\"}, {\"from\": \"gpt\", "
        "\"value\": \"Empty question.\"}]},\n"
        "{\"conversations\": []},\n"
        "{\"conversations\": [{\"from\": \"user\", \"value\": \"caf\\u00e9?\"},\n"
        "   {\"from\": \"assistant\", \"value\": \"Oui.\"}]}\n"
        "]\n";
    assert_int_equal(st_dataset_parse(&ds, "s.json", d, sizeof(d) - 1, err, sizeof(err)), 0);
    assert_int_equal(ds.elems, 6);
    assert_int_equal(ds.n, 3);
    const char *pool = ds.pool.data;
    assert_int_equal(ds.convos[0].index, 0);
    assert_int_equal(ds.convos[0].line, 2);
    assert_memory_equal(pool + ds.convos[0].prompt, "Hi \"there\"", ds.convos[0].prompt_len);
    assert_memory_equal(pool + ds.convos[0].answer, "Hello [not a bracket] {or brace}, friend.",
                        ds.convos[0].answer_len);
    assert_int_equal(ds.convos[1].index, 1);
    assert_memory_equal(pool + ds.convos[1].prompt, "Then me.", 8);
    assert_memory_equal(pool + ds.convos[1].answer, "And me.", 7);
    assert_int_equal(ds.convos[2].index, 5);
    assert_int_equal(ds.convos[2].line, 7);
    assert_memory_equal(pool + ds.convos[2].prompt, "caf\xc3\xa9?", 6);
    st_dataset_release(&ds);
    assert_int_equal(st_dataset_parse(&ds, "e.json", " [ ] ", 5, err, sizeof(err)), 0);
    assert_int_equal(ds.n, 0);
    st_dataset_release(&ds);
}

static void test_dataset_bad(void **state)
{
    (void)state;
    struct st_dataset ds;
    char err[256];
    const char conv[] = "{\"conversations\": [{\"from\": \"human\", \"value\": \"q\"}]}";
    const char want[] = "expected {\"conversations\": [{\"from\": \"human\" or \"gpt\", \"value\": "
                        "text}, ...]}";
    char buf[512];
    const struct {
        const char *doc, *msg;
    } cases[] = {
        {"{\"conversations\": []}", "d.json:1: expected a JSON array of conversations"},
        {"", "d.json:1: expected a JSON array of conversations"},
        {"[\n%s,\n3\n]", NULL},
        {"[\n%s,\n{\"conversations\": {}}]", NULL},
        {"[\n%s,\n{\"conversations\": [{\"from\": \"human\"}]}]", NULL},
        {"[\n%s,\n{\"conversations\": [{\"from\": 1, \"value\": \"x\"}]}]", NULL},
        {"[\n%s,\n{\"conversations\": [],}]", NULL},
        {"[\n%s\n{\"conversations\": []}]", "d.json:2: " /* two objects run together */},
        {"[\n%s,\n,]", "d.json:3: expected a conversation before ',' or ']'"},
        {"[\n%s,\n\"unterminated]", "d.json:3: unterminated string"},
        {"[\n%s,\n{\"conversations\": [}", "d.json:3: unterminated array or object"},
        {"[\n%s\n] x", "d.json:3: expected nothing after the array"},
        {"[\n%s}", "d.json:2: expected ',' or ']' after a conversation"},
        {"[\n\n\n%s,\n{\"conversations\": [{\"from\": \"human\", \"value\": \"\xff\"}]}]",
         "d.json:5: invalid UTF-8 inside a string"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(buf, sizeof(buf), cases[i].doc, conv);
        assert_int_equal(st_dataset_parse(&ds, "d.json", buf, strlen(buf), err, sizeof(err)),
                         ST_EPARSE);
        char w[512];
        if (cases[i].msg) {
            snprintf(w, sizeof(w), "%s", cases[i].msg);
        } else {
            snprintf(w, sizeof(w), "d.json:3: %s", want);
        }
        if (strcmp(w, "d.json:2: ") == 0) {
            snprintf(w, sizeof(w), "d.json:2: %s", want);
        }
        assert_string_equal(err, w);
        assert_null(ds.convos);
    }
}

/* ---- dataset workloads ---- */

static const char share[] =
    "[{\"conversations\": [{\"from\": \"human\", \"value\": \"Tell me about rivers, please.\"},\n"
    "  {\"from\": \"gpt\", \"value\": \"Rivers carry water from the hills down to the sea.\"}]},\n"
    " {\"conversations\": [{\"from\": \"human\", \"value\": \"And lakes?\"}]},\n"
    " {\"conversations\": [{\"from\": \"human\", \"value\": \"Why is the sky blue?\"},\n"
    "  {\"from\": \"gpt\", \"value\": \"Rayleigh scattering.\"}]},\n"
    " {\"conversations\": [{\"from\": \"human\", \"value\": \"Name a prime.\"},\n"
    "  {\"from\": \"gpt\", \"value\": \"Seven.\"}]}]\n";

static void test_dataset_workload(void **state)
{
    (void)state;
    for (int chat = 0; chat <= 1; chat++) {
        struct sim s = {.chat = chat};
        struct st_wl_params p;
        struct st_workload *wl = NULL;
        char err[512];
        st_wl_params_defaults(&p);
        p.kind = ST_WL_DATASET;
        p.chat = chat;
        p.data = share;
        p.data_len = sizeof(share) - 1;
        p.data_name = "sharegpt.json";
        /* No corpus is needed. */
        assert_int_equal(st_workload_build(&wl, &p, NULL, NULL, 0, sim_count, &s, err, sizeof(err)),
                         0);
        assert_int_equal(st_workload_items(wl), 3);
        int seen[4] = {0};
        for (uint64_t i = 0; i < 3; i++) {
            struct st_buf scratch;
            struct st_req_item it;
            st_buf_init(&scratch);
            assert_int_equal(st_workload_source(wl, i, &it, &scratch), 0);
            uint64_t want_out = 0;
            if (it.prompt_len == 29 &&
                memcmp(it.prompt, "Tell me about rivers, please.", 29) == 0) {
                seen[0]++;
                want_out = (50 + 3) / 4;
                assert_non_null(strstr(it.tag_json, "\"dataset_index\":0"));
            } else if (it.prompt_len == 20 && memcmp(it.prompt, "Why is the sky blue?", 20) == 0) {
                seen[2]++;
                want_out = 5;
                assert_non_null(strstr(it.tag_json, "\"dataset_index\":2"));
            } else {
                assert_int_equal(it.prompt_len, 13);
                assert_memory_equal(it.prompt, "Name a prime.", 13);
                seen[3]++;
                want_out = 2;
            }
            assert_int_equal(it.max_tokens, (int64_t)want_out);
            assert_int_equal(it.input_tokens, (int64_t)((it.prompt_len + (chat ? 24 : 0) + 3) / 4));
            assert_null(strstr(it.tag_json, "windows"));
            st_buf_release(&scratch);
        }
        assert_int_equal(seen[0] + seen[2] + seen[3], 3);
        assert_true(seen[0] == 1 && seen[2] == 1 && seen[3] == 1);
        st_workload_free(wl);
        /* Two of them, sampled by the seed, with the output fixed by the parameters. */
        p.requests = 2;
        p.output_len = 77;
        assert_int_equal(st_workload_build(&wl, &p, NULL, NULL, 0, sim_count, &s, err, sizeof(err)),
                         0);
        assert_int_equal(st_workload_items(wl), 2);
        struct st_buf scratch;
        struct st_req_item it;
        st_buf_init(&scratch);
        assert_int_equal(st_workload_source(wl, 1, &it, &scratch), 0);
        assert_int_equal(it.max_tokens, 77);
        st_buf_release(&scratch);
        st_workload_free(wl);
    }
    /* A file with nothing usable, and a bad one. */
    struct sim s = {.chat = 1};
    struct st_wl_params p;
    struct st_workload *wl = NULL;
    char err[512];
    st_wl_params_defaults(&p);
    p.kind = ST_WL_DATASET;
    p.data = "[{\"conversations\": []}]";
    p.data_len = strlen(p.data);
    p.data_name = "none.json";
    assert_int_equal(st_workload_build(&wl, &p, NULL, NULL, 0, sim_count, &s, err, sizeof(err)),
                     ST_EUSAGE);
    assert_string_equal(err, "none.json: no conversation with a human turn followed by a gpt turn");
    p.data = "[{\"conversations\": 1}]";
    p.data_len = strlen(p.data);
    assert_int_equal(st_workload_build(&wl, &p, NULL, NULL, 0, sim_count, &s, err, sizeof(err)),
                     ST_EPARSE);
    assert_non_null(strstr(err, "none.json:1: expected {\"conversations\""));
    assert_int_equal(s.calls, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_parse),    cmocka_unit_test(test_trace_bad_lines),
        cmocka_unit_test(test_trace_blocks),   cmocka_unit_test(test_trace_workload),
        cmocka_unit_test(test_trace_mooncake), cmocka_unit_test(test_dataset_parse),
        cmocka_unit_test(test_dataset_bad),    cmocka_unit_test(test_dataset_workload),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
