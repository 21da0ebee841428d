/*
 * Tests for the window map (src/workload/windows.c and its use in workload.c): for every kind, a
 * build from the map of an earlier build sends byte-identical prompts and tags, whatever the
 * seed, and writes the same map back; reading a map costs one counter call a prompt; maps for
 * another kind, corpus, API, point size or prompt length are refused by name; bad maps give
 * NAME:LINE messages; windows outside the corpus or off UTF-8 boundaries are refused; a map used
 * with another tokenizer fails the length tolerance.
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
#include "workload/corpus.h"
#include "workload/item.h"
#include "workload/windows.h"
#include "workload/workload.h"

struct sim {
    int chat;
    uint64_t calls;
    int words;
};

static int sim_count(void *ctx, const char *text, size_t len, uint64_t *tokens, char *err,
                     size_t errlen)
{
    struct sim *s = ctx;
    (void)err;
    (void)errlen;
    s->calls++;
    uint64_t cp = 0;
    for (size_t i = 0; i < len; i++) {
        cp += ((unsigned char)text[i] & 0xC0) != 0x80;
    }
    if (s->words) {
        /* Another tokenizer: 3 code points a token. */
        *tokens = (cp + (s->chat ? 24 : 0) + 2) / 3;
        return 0;
    }
    *tokens = (cp + (s->chat ? 24 : 0) + 3) / 4;
    return 0;
}

static struct st_corpus corpus;

static int setup(void **state)
{
    (void)state;
    st_corpus_builtin(&corpus, 77, 2u << 20);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    st_corpus_release(&corpus);
    return 0;
}

static struct st_workload *build(const struct st_wl_params *p, const struct st_corpus *c,
                                 const struct st_buf *map, struct sim *s, int want_rc, char *err,
                                 size_t errlen)
{
    struct st_workload *wl = NULL;
    int rc = st_workload_build(&wl, p, c, map ? map->data : NULL, map ? map->len : 0, sim_count, s,
                               err, errlen);
    if (rc != want_rc) {
        fprintf(stderr, "build: %d (wanted %d): %s\n", rc, want_rc, err);
    }
    assert_int_equal(rc, want_rc);
    return wl;
}

/* Item id as bytes: prompt or messages, then the tag, then the lengths. */
static void served(const struct st_workload *wl, uint64_t id, struct st_buf *out)
{
    struct st_req_item item;
    struct st_buf scratch;
    memset(&item, 0, sizeof(item));
    st_buf_init(&scratch);
    assert_int_equal(st_workload_source(wl, id, &item, &scratch), 0);
    if (item.messages_json) {
        st_buf_append(out, item.messages_json, item.messages_len);
    } else {
        st_buf_append(out, item.prompt, item.prompt_len);
    }
    st_buf_putc(out, '\0');
    st_buf_append(out, item.tag_json, item.tag_len);
    st_buf_printf(out, "|%lld|%lld|%llu", (long long)item.max_tokens, (long long)item.input_tokens,
                  (unsigned long long)item.t_offset_ns);
    st_buf_release(&scratch);
}

static void assert_same(const struct st_workload *a, const struct st_workload *b)
{
    uint64_t n = st_workload_items(a);
    assert_int_equal(n, st_workload_items(b));
    assert_int_equal(st_workload_prefix_groups(a), st_workload_prefix_groups(b));
    for (uint64_t i = 0; i < n; i++) {
        struct st_buf x, y;
        st_buf_init(&x);
        st_buf_init(&y);
        served(a, i, &x);
        served(b, i, &y);
        assert_int_equal(x.len, y.len);
        assert_memory_equal(x.data, y.data, x.len);
        st_buf_release(&x);
        st_buf_release(&y);
    }
    for (uint32_t g = 0; g < st_workload_prefix_groups(a); g++) {
        struct st_req_item ia, ib;
        struct st_buf sa, sb;
        st_buf_init(&sa);
        st_buf_init(&sb);
        assert_int_equal(st_workload_warm_item(a, g, &ia, &sa), 0);
        assert_int_equal(st_workload_warm_item(b, g, &ib, &sb), 0);
        assert_int_equal(ia.prompt_len, ib.prompt_len);
        assert_memory_equal(ia.prompt, ib.prompt, ia.prompt_len);
        st_buf_release(&sa);
        st_buf_release(&sb);
    }
}

static void params(struct st_wl_params *p, enum st_wl_kind kind, uint64_t requests, uint64_t in)
{
    st_wl_params_defaults(p);
    p->kind = kind;
    p->requests = requests;
    p->input_len = in;
    p->output_len = 32;
}

static const char trace_data[] =
    "{\"timestamp\": 0, \"input_length\": 300, \"output_length\": 5, \"hash_ids\": [1, 2, 3]}\n"
    "{\"timestamp\": 10, \"input_length\": 290, \"output_length\": 6, \"hash_ids\": [1, 2, 4]}\n"
    "{\"timestamp\": 20, \"input_length\": 120, \"output_length\": 7, \"hash_ids\": [7]}\n";

static const char dataset_data[] =
    "[{\"conversations\": [{\"from\": \"human\", \"value\": \"Tell me about rivers.\"},\n"
    "  {\"from\": \"gpt\", \"value\": \"Rivers carry water from the hills to the sea.\"}]},\n"
    " {\"conversations\": [{\"from\": \"human\", \"value\": \"And lakes?\"},\n"
    "  {\"from\": \"gpt\", \"value\": \"Lakes hold it.\"}]},\n"
    " {\"conversations\": [{\"from\": \"human\", \"value\": \"Why is the sky blue?\"},\n"
    "  {\"from\": \"gpt\", \"value\": \"Rayleigh scattering of sunlight.\"}]}]\n";

/* Every kind: A from the seed; B from A's map (same seed); C from A's map with another seed. */
static void round_trip(struct st_wl_params *p)
{
    struct sim s = {.chat = p->chat};
    char err[512];
    struct st_buf map, map2;
    st_buf_init(&map);
    st_buf_init(&map2);
    p->seed = 1;
    struct st_workload *a = build(p, &corpus, NULL, &s, 0, err, sizeof(err));
    st_workload_windows_json(a, &map);
    s.calls = 0;
    struct st_workload *b = build(p, &corpus, &map, &s, 0, err, sizeof(err));
    assert_same(a, b);
    p->seed = 99;
    struct st_workload *c = build(p, &corpus, &map, &s, 0, err, sizeof(err));
    assert_same(a, c);
    /* The map of a build from a map is the map. */
    st_workload_windows_json(c, &map2);
    assert_int_equal(map.len, map2.len);
    assert_memory_equal(map.data, map2.data, map.len);
    /* Without the map, seed 99 gives other text (dataset: another sample of the three). */
    struct st_workload *d = build(p, &corpus, NULL, &s, 0, err, sizeof(err));
    struct st_buf x, y;
    st_buf_init(&x);
    st_buf_init(&y);
    for (uint64_t i = 0; i < st_workload_items(a); i++) {
        served(a, i, &x);
        served(d, i, &y);
    }
    if (p->kind != ST_WL_TRACE) {
        assert_true(x.len != y.len || memcmp(x.data, y.data, x.len) != 0);
    }
    st_buf_release(&x);
    st_buf_release(&y);
    st_workload_free(a);
    st_workload_free(b);
    st_workload_free(c);
    st_workload_free(d);
    st_buf_release(&map);
    st_buf_release(&map2);
}

static void test_round_trip_kinds(void **state)
{
    (void)state;
    struct st_wl_params p;
    params(&p, ST_WL_FIXED, 10, 500);
    p.input_len_max = 900;
    round_trip(&p);
    p.chat = 0;
    round_trip(&p);

    params(&p, ST_WL_SHARED_PREFIX, 12, 2000);
    p.prefix_frac = 0.9;
    p.groups = 3;
    p.zipf_s = 1;
    round_trip(&p);

    params(&p, ST_WL_DISTINCT, 6, 4000);
    round_trip(&p);

    params(&p, ST_WL_LONG, 2, 20000);
    p.needles = 4;
    round_trip(&p);

    params(&p, ST_WL_MULTI_TURN, 8, 150);
    p.turns = 3;
    round_trip(&p);

    params(&p, ST_WL_MIXED, 40, 300);
    p.n_mix = 5;
    for (int i = 0; i < 5; i++) {
        p.mix_kind[i] = (enum st_wl_kind)(ST_WL_FIXED + i);
        p.mix_weight[i] = 1;
    }
    p.prefix_frac = 0.5;
    p.groups = 2;
    p.turns = 2;
    p.needles = 1;
    round_trip(&p);

    /* A mix too small to draw a shared-prefix item: no groups, and its map still reads. */
    params(&p, ST_WL_MIXED, 1, 300);
    p.n_mix = 2;
    p.mix_kind[0] = ST_WL_FIXED;
    p.mix_weight[0] = 1e6;
    p.mix_kind[1] = ST_WL_SHARED_PREFIX;
    p.mix_weight[1] = 1e-6;
    p.prefix_frac = 0.5;
    p.groups = 2;
    round_trip(&p);

    params(&p, ST_WL_TRACE, 0, 0);
    p.output_len = 0;
    p.block_tokens = 128;
    p.data = trace_data;
    p.data_len = sizeof(trace_data) - 1;
    p.data_name = "t.jsonl";
    round_trip(&p);

    params(&p, ST_WL_DATASET, 0, 0);
    p.output_len = 0;
    p.data = dataset_data;
    p.data_len = sizeof(dataset_data) - 1;
    p.data_name = "sharegpt.json";
    round_trip(&p);
}

/* A map from a sweep point replays the capacity probe's two passes (o8 seeding, o512 scoring):
 * same documents, outputs from the parameters. */
static void test_outputs_from_params(void **state)
{
    (void)state;
    struct sim s = {.chat = 1};
    char err[512];
    struct st_buf map;
    st_buf_init(&map);
    struct st_wl_params p;
    params(&p, ST_WL_DISTINCT, 4, 3000);
    p.output_len = 8;
    struct st_workload *seeding = build(&p, &corpus, NULL, &s, 0, err, sizeof(err));
    st_workload_windows_json(seeding, &map);
    p.output_len = 512;
    s.calls = 0;
    struct st_workload *scoring = build(&p, &corpus, &map, &s, 0, err, sizeof(err));
    assert_int_equal(s.calls, 4); /* one count a prompt, no calibration */
    assert_int_equal(st_workload_counter_calls(scoring), 4);
    for (uint64_t i = 0; i < 4; i++) {
        struct st_req_item a, b;
        struct st_buf sa, sb;
        st_buf_init(&sa);
        st_buf_init(&sb);
        assert_int_equal(st_workload_source(seeding, i, &a, &sa), 0);
        assert_int_equal(st_workload_source(scoring, i, &b, &sb), 0);
        assert_int_equal(a.prompt_len, b.prompt_len);
        assert_memory_equal(a.prompt, b.prompt, a.prompt_len);
        assert_int_equal(a.max_tokens, 8);
        assert_int_equal(b.max_tokens, 512);
        st_buf_release(&sa);
        st_buf_release(&sb);
    }
    st_workload_free(seeding);
    st_workload_free(scoring);
    st_buf_release(&map);
}

static void test_refusals(void **state)
{
    (void)state;
    struct sim s = {.chat = 1};
    char err[512];
    struct st_buf map;
    st_buf_init(&map);
    struct st_wl_params p;
    params(&p, ST_WL_FIXED, 5, 400);
    struct st_workload *a = build(&p, &corpus, NULL, &s, 0, err, sizeof(err));
    st_workload_windows_json(a, &map);
    st_workload_free(a);

    p.kind = ST_WL_DISTINCT;
    build(&p, &corpus, &map, &s, ST_EUSAGE, err, sizeof(err));
    assert_string_equal(err, "windows: the window map is for a fixed workload, not distinct");
    p.kind = ST_WL_FIXED;
    p.windows_name = "cc4.windows.json";
    p.chat = 0;
    build(&p, &corpus, &map, &s, ST_EUSAGE, err, sizeof(err));
    assert_string_equal(err, "cc4.windows.json: the window map was made for the chat API");
    p.chat = 1;
    p.requests = 6;
    build(&p, &corpus, &map, &s, ST_EUSAGE, err, sizeof(err));
    assert_string_equal(err, "cc4.windows.json: the window map has 5 items; this point asks for 6");
    p.requests = 5;
    p.input_len = 500;
    build(&p, &corpus, &map, &s, ST_EUSAGE, err, sizeof(err));
    assert_string_equal(err, "cc4.windows.json: item 0 was made for 400 prompt tokens; this point "
                             "asks for 500 to 500");
    p.input_len = 400;
    struct st_corpus other;
    st_corpus_builtin(&other, 78, 2u << 20);
    build(&p, &other, &map, &s, ST_EUSAGE, err, sizeof(err));
    assert_non_null(strstr(err, "cc4.windows.json: the window map is for corpus builtin:77 "
                                "(2097152 bytes, hash "));
    assert_non_null(strstr(err, "), not builtin:78 (2097152 bytes)"));
    st_corpus_release(&other);
    /* Another tokenizer counts the same text differently: the tolerance says so. */
    s.words = 1;
    build(&p, &corpus, &map, &s, -ERANGE, err, sizeof(err));
    assert_non_null(strstr(err, "5 of 5 prompts are off their length"));
    assert_non_null(strstr(err, "a window map made for another tokenizer"));
    st_buf_release(&map);

    /* A trace map read with another trace file. */
    s.words = 0;
    params(&p, ST_WL_TRACE, 0, 0);
    p.data = trace_data;
    p.data_len = sizeof(trace_data) - 1;
    p.block_tokens = 64;
    st_buf_init(&map);
    a = build(&p, &corpus, NULL, &s, 0, err, sizeof(err));
    st_workload_windows_json(a, &map);
    st_workload_free(a);
    p.data_len -= 1; /* without the last newline: other bytes */
    build(&p, &corpus, &map, &s, ST_EUSAGE, err, sizeof(err));
    assert_string_equal(err, "windows: the window map was made from another trace file");
    st_buf_release(&map);
}

/* Replaces the first occurrence of from in map by to. */
static void edit(struct st_buf *map, const char *from, const char *to)
{
    char *at = strstr(map->data, from);
    assert_non_null(at);
    struct st_buf b;
    st_buf_init(&b);
    st_buf_append(&b, map->data, (size_t)(at - map->data));
    st_buf_puts(&b, to);
    st_buf_puts(&b, at + strlen(from));
    st_buf_clear(map);
    st_buf_append(map, b.data, b.len);
    st_buf_release(&b);
}

static void test_bad_maps(void **state)
{
    (void)state;
    struct sim s = {.chat = 1};
    char err[512];
    struct st_buf map, m;
    st_buf_init(&map);
    st_buf_init(&m);
    struct st_wl_params p;
    params(&p, ST_WL_FIXED, 3, 400);
    struct st_workload *a = build(&p, &corpus, NULL, &s, 0, err, sizeof(err));
    st_workload_windows_json(a, &map);
    st_workload_free(a);
    /* Line 1 is the header, items follow one a line. */
    assert_non_null(strstr(map.data, "\"groups\":[],\"items\":[\n{\"kind\":\"fixed\",\"in\":400,"
                                     "\"parts\":[["));
    const struct {
        const char *from, *to, *msg;
        int rc;
    } cases[] = {
        {"\"in\":400,\"parts\":[[", "\"in\":400,\"parts\":[[-",
         "windows:2: expected a window "
         "[offset, length] with length >= 1",
         ST_EPARSE},
        {"\"servetune_windows\":1", "\"servetune_windows\":2",
         "windows:1: expected \"servetune_windows\": 1", ST_EPARSE},
        {"\"kind\":\"fixed\",\"chat\"", "\"kind\":\"fixd\",\"chat\"",
         "windows:1: expected \"kind\" naming a workload kind", ST_EPARSE},
        {"\"in\":400", "\"in\":0", "windows:2: expected \"in\": prompt tokens >= 1", ST_EPARSE},
        {"\"corpus_hash\":\"", "\"corpus_hash\":\"X", "windows:1: expected 16 lowercase hex digits",
         ST_EPARSE},
        {"{\"kind\":\"fixed\",\"in\"", "{\"kind\":\"long\",\"in\"",
         "windows:2: expected an item of the map's kind", ST_EPARSE},
        {"\"parts\":[[", "\"parts\":[{\"role\":\"system\"},[",
         "windows:2: expected the role \"user\" or \"assistant\"", ST_EPARSE},
        {"\"parts\":[[", "\"parts\":[{\"role\":\"user\"},[",
         "windows: item 0: chat messages belong to multi-turn items", ST_EUSAGE},
        {"\"parts\":[[", "\"parts\":[{\"needle\":\"x\",\"word\":\"y\",\"depth\":2},[",
         "windows:2: expected a needle {\"needle\": text, \"word\": text, \"depth\": 0..1}",
         ST_EPARSE},
        {"\"parts\":[[", "\"parts\":[true,[",
         "windows:2: expected a part: [offset, length], a string, a role or a needle", ST_EPARSE},
        {"\"parts\":[[", "\"parts\":[[99999999999,1],[",
         "windows: item 0: window [99999999999, 1] is not inside the corpus on UTF-8 boundaries",
         ST_EUSAGE},
        {"\"items\":[", "\"items\":{", "windows: not valid JSON (malformed input)", ST_EPARSE},
        {"\"items\":[", "\"itemz\":[", "windows:1: expected \"items\": [...]", ST_EPARSE},
        {"\"in\":400,", "\"in\":400,\"group\":0,",
         "windows:2: expected \"group\": an index into \"groups\"", ST_EPARSE},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        st_buf_clear(&m);
        st_buf_append(&m, map.data, map.len);
        edit(&m, cases[i].from, cases[i].to);
        build(&p, &corpus, &m, &s, cases[i].rc, err, sizeof(err));
        assert_string_equal(err, cases[i].msg);
    }
    /* Extra text in an item is fine: the map says what is sent. */
    st_buf_clear(&m);
    st_buf_append(&m, map.data, map.len);
    edit(&m, "\"parts\":[[",
         "\"parts\":[\"Summarise the following text in three short sentences: \",[");
    a = build(&p, &corpus, &m, &s, -ERANGE, err, sizeof(err));
    assert_non_null(strstr(err, "1 of 3 prompts"));
    st_buf_release(&map);
    st_buf_release(&m);
}

/* Windows off UTF-8 boundaries are refused; on them, multi-byte text round-trips. */
static void test_utf8_boundaries(void **state)
{
    (void)state;
    struct sim s = {.chat = 0};
    char err[512];
    struct st_buf text, map;
    st_buf_init(&text);
    st_buf_init(&map);
    for (int i = 0; i < 20000; i++) {
        st_buf_puts(&text,
                    i % 3 ? "caf\xc3\xa9 au lait " : "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e ");
    }
    struct st_corpus c;
    assert_int_equal(st_corpus_from_text(&c, "utf8.txt", text.data, text.len), 0);
    struct st_wl_params p;
    params(&p, ST_WL_DISTINCT, 4, 300);
    p.chat = 0;
    struct st_workload *a = build(&p, &c, NULL, &s, 0, err, sizeof(err));
    for (uint64_t i = 0; i < 4; i++) {
        uint64_t r, n;
        st_workload_tokens(a, i, &r, &n);
        assert_int_equal(r, n);
    }
    st_workload_windows_json(a, &map);
    struct st_workload *b = build(&p, &c, &map, &s, 0, err, sizeof(err));
    assert_same(a, b);
    st_workload_free(b);
    /* Shift the first window by one byte until it lands inside a character. */
    struct st_wplan pl;
    st_wplan_init(&pl);
    assert_int_equal(st_wplan_windows_parse(&pl, map.data, map.len, "w", err, sizeof(err)), 0);
    uint64_t off = pl.parts[pl.items[0].part0].off;
    st_wplan_release(&pl);
    int refused = 0;
    for (uint64_t k = 1; k <= 8 && !refused; k++) {
        char from[64], to[64];
        snprintf(from, sizeof(from), "[[%llu,", (unsigned long long)(off + k - 1));
        snprintf(to, sizeof(to), "[[%llu,", (unsigned long long)(off + k));
        edit(&map, from, to);
        if (((unsigned char)c.text[off + k] & 0xC0) == 0x80) {
            build(&p, &c, &map, &s, ST_EUSAGE, err, sizeof(err));
            assert_non_null(strstr(err, "is not inside the corpus on UTF-8 boundaries"));
            refused = 1;
        }
    }
    assert_true(refused);
    st_workload_free(a);
    st_corpus_release(&c);
    st_buf_release(&text);
    st_buf_release(&map);
}

/* The parser alone: a map read and written again is the same bytes. */
static void test_plan_parse(void **state)
{
    (void)state;
    char err[256];
    const char m[] =
        "{\"servetune_windows\":1,\"kind\":\"multi-turn\",\"chat\":true,\"corpus\":"
        "\"c\",\"corpus_hash\":\"00000000000000ff\",\"corpus_bytes\":10,\"groups\":[\n"
        "{\"parts\":[[0,2]]}],\"items\":[\n"
        "{\"kind\":\"multi-turn\",\"in\":9,\"session\":0,\"turn\":1,\"parts\":[{\"role\":"
        "\"user\"},[0,5],\"tail\\n\",{\"needle\":\"N w.\",\"word\":\"w\",\"depth\":"
        "0.5}]}\n]}\n";
    struct st_wplan pl;
    st_wplan_init(&pl);
    assert_int_equal(st_wplan_windows_parse(&pl, m, sizeof(m) - 1, "m", err, sizeof(err)), 0);
    assert_int_equal(pl.nitems, 1);
    assert_int_equal(pl.ngroups, 1);
    assert_int_equal(pl.items[0].nparts, 4);
    assert_int_equal(pl.parts[pl.items[0].part0].type, ST_PART_USER);
    assert_int_equal(pl.parts[pl.items[0].part0 + 3].type, ST_PART_NEEDLE);
    assert_true(pl.corpus_hash == 0xff);
    struct st_buf out;
    st_buf_init(&out);
    st_wplan_windows_json(&pl, &out);
    assert_string_equal(out.data, m);
    st_buf_release(&out);
    st_wplan_release(&pl);
    st_wplan_init(&pl);
    assert_int_equal(st_wplan_windows_parse(&pl, "[]", 2, "m", err, sizeof(err)), ST_EPARSE);
    assert_string_equal(err, "m:1: expected a window map object");
    st_wplan_release(&pl);
}

/* A built-in corpus is remade from the map's corpus id and length (what the CLI does before a
 * build from a map), so a map made with one seed serves a build with another. */
static void test_map_corpus(void **state)
{
    (void)state;
    struct sim s = {.chat = 1};
    char err[512], id[256];
    struct st_buf map;
    st_buf_init(&map);
    struct st_corpus c1, c2;
    st_corpus_builtin(&c1, 5, 300000);
    struct st_wl_params p;
    params(&p, ST_WL_DISTINCT, 3, 2000);
    p.seed = 5;
    struct st_workload *a = build(&p, &c1, NULL, &s, 0, err, sizeof(err));
    st_workload_windows_json(a, &map);
    uint64_t bytes = 0, hash = 0;
    assert_int_equal(st_workload_windows_corpus(map.data, map.len, "w.json", id, sizeof(id), &bytes,
                                                &hash, err, sizeof(err)),
                     0);
    assert_string_equal(id, "builtin:5");
    assert_int_equal(bytes, 300000);
    assert_true(hash == c1.hash);
    st_corpus_builtin(&c2, strtoull(id + strlen("builtin:"), NULL, 10), (size_t)bytes);
    p.seed = 6;
    struct st_workload *b = build(&p, &c2, &map, &s, 0, err, sizeof(err));
    assert_same(a, b);
    assert_int_equal(st_workload_windows_corpus("{", 1, "w.json", id, sizeof(id), &bytes, &hash,
                                                err, sizeof(err)),
                     ST_EPARSE);
    assert_string_equal(err, "w.json: not valid JSON (malformed input)");
    st_workload_free(a);
    st_workload_free(b);
    st_corpus_release(&c1);
    st_corpus_release(&c2);
    st_buf_release(&map);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_kinds), cmocka_unit_test(test_outputs_from_params),
        cmocka_unit_test(test_refusals),         cmocka_unit_test(test_bad_maps),
        cmocka_unit_test(test_utf8_boundaries),  cmocka_unit_test(test_plan_parse),
        cmocka_unit_test(test_map_corpus),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
