/*
 * Tests for src/workload (kinds.c, prompt.c, workload.c): every kind builds, and every prompt
 * counts exactly its requested tokens by the simulator's rule (4 code points a token; chat
 * rendered as "<|user|>\n" content "\n" plus "<|assistant|>\n"), implemented here without
 * linking src/sim. Also: distinct windows never overlap, shared prefixes are shared byte for
 * byte, Zipf and uniform popularity, multi-turn history growth, needles at their depths, a
 * BPE-like counter within tolerance in a few calls, bad parameters, a corpus too small, the
 * length tolerance, the context limit, counter errors, repeats past the last item.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "workload/corpus.h"
#include "workload/item.h"
#include "workload/workload.h"

/* ---- the simulator's tokenizer, locally ---- */

struct sim {
    int chat;
    uint64_t calls;
    int refuse_empty; /* fail on "" (as a server that rejects empty prompts) */
    int fail_after;   /* > 0: the nth call fails */
    int words;        /* a BPE-like rule instead: words and punctuation */
};

static uint64_t codepoints(const char *s, size_t n)
{
    uint64_t c = 0;
    for (size_t i = 0; i < n; i++) {
        c += ((unsigned char)s[i] & 0xC0) != 0x80;
    }
    return c;
}

/* A crude BPE stand-in: a word of up to 6 letters is one token, longer words two, every other
 * non-space byte one, and a space joins the next word. */
static uint64_t word_tokens(const char *s, size_t n)
{
    uint64_t t = 0;
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if ((c | 32) >= 'a' && (c | 32) <= 'z') {
            size_t j = i;
            while (j < n &&
                   ((((unsigned char)s[j]) | 32) >= 'a' && (((unsigned char)s[j]) | 32) <= 'z')) {
                j++;
            }
            t += j - i > 6 ? 2 : 1;
            i = j;
        } else if (c == ' ') {
            i++;
        } else {
            t++;
            i++;
        }
    }
    return t;
}

static int sim_count(void *ctx, const char *text, size_t len, uint64_t *tokens, char *err,
                     size_t errlen)
{
    struct sim *s = ctx;
    s->calls++;
    if (s->fail_after && s->calls == (uint64_t)s->fail_after) {
        snprintf(err, errlen, "POST /tokenize: connection refused");
        return -ECONNREFUSED;
    }
    if (s->refuse_empty && len == 0) {
        snprintf(err, errlen, "empty prompt");
        return ST_ESERVER;
    }
    if (s->words) {
        *tokens = word_tokens(text, len) + (s->chat ? 5 : 1);
        return 0;
    }
    uint64_t cp = codepoints(text, len);
    if (s->chat) {
        cp += strlen("<|user|>\n") + 1 + strlen("<|assistant|>\n");
    }
    *tokens = (cp + 3) / 4;
    return 0;
}

/* The simulator's count of a served chat request: every message rendered, then the prompt. */
static uint64_t sim_messages(const char *json, size_t n)
{
    struct st_json d;
    struct st_buf b, tmp;
    st_json_init(&d, 0);
    st_buf_init(&b);
    st_buf_init(&tmp);
    assert_int_equal(st_json_parse(&d, json, n), 0);
    for (int m = st_json_first(&d, 0); m >= 0; m = st_json_next(&d, 0, m)) {
        st_buf_clear(&tmp);
        assert_int_equal(st_json_str(&d, st_json_get(&d, m, "role"), &tmp), 0);
        st_buf_printf(&b, "<|%s|>\n", tmp.data);
        assert_int_equal(st_json_str(&d, st_json_get(&d, m, "content"), &b), 0);
        st_buf_putc(&b, '\n');
    }
    st_buf_puts(&b, "<|assistant|>\n");
    uint64_t t = (codepoints(b.data, b.len) + 3) / 4;
    st_json_release(&d);
    st_buf_release(&b);
    st_buf_release(&tmp);
    return t;
}

/* ---- helpers ---- */

static struct st_corpus corpus_1m;

static int setup(void **state)
{
    (void)state;
    st_corpus_builtin(&corpus_1m, 42, 4u << 20);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    st_corpus_release(&corpus_1m);
    return 0;
}

static struct st_workload *build_ok(const struct st_wl_params *p, const struct st_corpus *c,
                                    struct sim *s)
{
    struct st_workload *wl = NULL;
    char err[512] = "";
    int rc = st_workload_build(&wl, p, c, NULL, 0, sim_count, s, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "build: %d %s\n", rc, err);
    }
    assert_int_equal(rc, 0);
    assert_non_null(wl);
    return wl;
}

static int build_err(const struct st_wl_params *p, const struct st_corpus *c, struct sim *s,
                     char *err, size_t errlen)
{
    struct st_workload *wl = NULL;
    int rc = st_workload_build(&wl, p, c, NULL, 0, sim_count, s, err, errlen);
    assert_null(wl);
    return rc;
}

/* One served item: copies of the prompt (or messages) and the tag. */
struct got {
    struct st_buf text;
    struct st_buf tag;
    int messages;
    int64_t max_tokens;
    int ignore_eos;
    int64_t input_tokens;
    uint64_t t_offset_ns;
};

static void get(const struct st_workload *wl, uint64_t id, struct got *g)
{
    struct st_req_item item;
    struct st_buf scratch;
    memset(&item, 0, sizeof(item));
    st_buf_init(&scratch);
    st_buf_init(&g->text);
    st_buf_init(&g->tag);
    assert_int_equal(st_workload_source(wl, id, &item, &scratch), 0);
    g->messages = item.messages_json != NULL;
    if (g->messages) {
        st_buf_append(&g->text, item.messages_json, item.messages_len);
    } else {
        assert_non_null(item.prompt);
        st_buf_append(&g->text, item.prompt, item.prompt_len);
    }
    assert_non_null(item.tag_json);
    st_buf_append(&g->tag, item.tag_json, item.tag_len);
    g->max_tokens = item.max_tokens;
    g->ignore_eos = item.ignore_eos;
    g->input_tokens = item.input_tokens;
    g->t_offset_ns = item.t_offset_ns;
    st_buf_release(&scratch);
}

static void got_release(struct got *g)
{
    st_buf_release(&g->text);
    st_buf_release(&g->tag);
}

/* The sim count of what item id sends. */
static uint64_t served_tokens(const struct st_workload *wl, uint64_t id, int chat)
{
    struct got g;
    get(wl, id, &g);
    uint64_t t;
    if (g.messages) {
        t = sim_messages(g.text.data, g.text.len);
    } else {
        uint64_t cp = codepoints(g.text.data ? g.text.data : "", g.text.len);
        t = (cp + (chat ? 24 : 0) + 3) / 4;
    }
    got_release(&g);
    return t;
}

/* Every item counts exactly what it asked for, by the build's record and by re-counting. */
static void assert_exact(const struct st_workload *wl, int chat)
{
    uint64_t n = st_workload_items(wl);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t req, cnt;
        st_workload_tokens(wl, i, &req, &cnt);
        assert_int_equal(req, cnt);
        struct got g;
        get(wl, i, &g);
        assert_int_equal(g.input_tokens, (int64_t)req);
        got_release(&g);
        if (!g.messages) {
            assert_int_equal(served_tokens(wl, i, chat), req);
        }
    }
    assert_true(st_workload_max_len_error(wl) == 0);
}

/* Reads a number member of a tag. */
static int64_t tag_i64(const struct got *g, const char *key)
{
    struct st_json d;
    int64_t v = -1;
    st_json_init(&d, 0);
    assert_int_equal(st_json_parse(&d, g->tag.data, g->tag.len), 0);
    int t = st_json_get(&d, 0, key);
    if (t >= 0) {
        assert_int_equal(st_json_i64(&d, t, &v), 0);
    }
    st_json_release(&d);
    return v;
}

struct win {
    uint64_t off, len;
};

/* Appends the tag's windows to w (n in/out). */
static void tag_windows(const struct got *g, struct win *w, size_t *n, size_t max)
{
    struct st_json d;
    st_json_init(&d, 0);
    assert_int_equal(st_json_parse(&d, g->tag.data, g->tag.len), 0);
    int a = st_json_get(&d, 0, "windows");
    assert_true(a >= 0);
    for (int e = st_json_first(&d, a); e >= 0; e = st_json_next(&d, a, e)) {
        int64_t off, len;
        assert_int_equal(st_json_i64(&d, e + 1, &off), 0);
        assert_int_equal(st_json_i64(&d, e + 2, &len), 0);
        assert_true(*n < max);
        w[*n].off = (uint64_t)off;
        w[*n].len = (uint64_t)len;
        (*n)++;
    }
    st_json_release(&d);
}

static int cmp_win(const void *a, const void *b)
{
    const struct win *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

static void params(struct st_wl_params *p, enum st_wl_kind kind, uint64_t requests, uint64_t in,
                   uint64_t out)
{
    st_wl_params_defaults(p);
    p->kind = kind;
    p->requests = requests;
    p->input_len = in;
    p->output_len = out;
}

/* ---- kinds ---- */

static void test_fixed_exact(void **state)
{
    (void)state;
    for (int chat = 0; chat <= 1; chat++) {
        struct sim s = {.chat = chat};
        struct st_wl_params p;
        params(&p, ST_WL_FIXED, 20, 1000, 64);
        p.chat = chat;
        struct st_workload *wl = build_ok(&p, &corpus_1m, &s);
        assert_int_equal(st_workload_items(wl), 20);
        assert_exact(wl, chat);
        /* Calibration (2 calls) and one call a prompt: the estimate is exact for this rule. */
        assert_int_equal(st_workload_counter_calls(wl), 2 + 20);
        assert_int_equal(s.calls, 2 + 20);
        struct got g;
        get(wl, 3, &g);
        assert_int_equal(g.max_tokens, 64);
        assert_int_equal(g.ignore_eos, 1);
        assert_true(g.t_offset_ns == UINT64_MAX);
        assert_int_equal(tag_i64(&g, "input_tokens_requested"), 1000);
        assert_int_equal(tag_i64(&g, "input_tokens_counted"), 1000);
        assert_non_null(strstr(g.tag.data, "\"kind\":\"fixed\""));
        assert_non_null(strstr(g.tag.data, "\"corpus\":\"builtin:42\""));
        assert_non_null(strstr(g.tag.data, "\"corpus_hash\":\""));
        assert_null(strstr(g.tag.data, "needles"));
        got_release(&g);
        /* Output check: exactly max_tokens is fine, anything else is flagged. */
        assert_int_equal(st_workload_output_mismatch(wl, 3, 64), 0);
        assert_int_equal(st_workload_output_mismatch(wl, 3, 63), 1);
        st_workload_free(wl);
    }
    st_workload_free(NULL);
}

static void test_fixed_distribution(void **state)
{
    (void)state;
    struct sim s = {.chat = 1};
    struct st_wl_params p;
    params(&p, ST_WL_FIXED, 50, 100, 10);
    p.input_len_max = 400;
    p.output_len_max = 20;
    p.ignore_eos = 0;
    struct st_workload *wl = build_ok(&p, &corpus_1m, &s);
    assert_exact(wl, 1);
    uint64_t lo = UINT64_MAX, hi = 0;
    for (uint64_t i = 0; i < 50; i++) {
        uint64_t r, c;
        st_workload_tokens(wl, i, &r, &c);
        lo = r < lo ? r : lo;
        hi = r > hi ? r : hi;
        struct got g;
        get(wl, i, &g);
        assert_true(g.max_tokens >= 10 && g.max_tokens <= 20);
        assert_int_equal(g.ignore_eos, 0);
        assert_int_equal(st_workload_output_mismatch(wl, i, 1), 0); /* no ignore_eos: no check */
        got_release(&g);
    }
    assert_true(lo >= 100 && hi <= 400 && hi - lo > 200);
    st_workload_free(wl);
}

/* Distinct documents: windows never overlap, and every prompt is the bytes of its window. */
static void test_distinct_no_overlap(void **state)
{
    (void)state;
    struct sim s = {.chat = 1};
    struct st_wl_params p;
    params(&p, ST_WL_DISTINCT, 64, 2000, 8);
    p.input_len_max = 3000;
    struct st_workload *wl = build_ok(&p, &corpus_1m, &s);
    assert_exact(wl, 1);
    struct win w[64];
    size_t n = 0;
    for (uint64_t i = 0; i < 64; i++) {
        struct got g;
        get(wl, i, &g);
        size_t before = n;
        tag_windows(&g, w, &n, 64);
        assert_int_equal(n, before + 1);
        assert_true(w[before].len == g.text.len);
        assert_memory_equal(corpus_1m.text + w[before].off, g.text.data, g.text.len);
        /* Windows start at a word. */
        assert_true(w[before].off == 0 || corpus_1m.text[w[before].off - 1] == ' ' ||
                    corpus_1m.text[w[before].off - 1] == '\n');
        got_release(&g);
    }
    qsort(w, n, sizeof(*w), cmp_win);
    for (size_t i = 1; i < n; i++) {
        assert_true(w[i - 1].off + w[i - 1].len <= w[i].off);
    }
    st_workload_free(wl);
}

/* A corpus that holds the windows only by wrapping around still gives disjoint windows. */
static void test_distinct_wraps(void **state)
{
    (void)state;
    struct sim s = {.chat = 0};
    struct st_corpus c;
    st_corpus_builtin(&c, 5, 200000);
    struct st_wl_params p;
    params(&p, ST_WL_DISTINCT, 45, 1000, 8);
    p.chat = 0;
    p.seed = 9;
    struct st_workload *wl = build_ok(&p, &c, &s);
    struct win w[45];
    size_t n = 0;
    for (uint64_t i = 0; i < 45; i++) {
        struct got g;
        get(wl, i, &g);
        tag_windows(&g, w, &n, 45);
        got_release(&g);
    }
    qsort(w, n, sizeof(*w), cmp_win);
    for (size_t i = 1; i < n; i++) {
        assert_true(w[i - 1].off + w[i - 1].len <= w[i].off);
    }
    assert_true(w[n - 1].off + w[n - 1].len <= c.len);
    st_workload_free(wl);
    st_corpus_release(&c);
}

static void test_corpus_too_small(void **state)
{
    (void)state;
    struct sim s = {.chat = 1};
    struct st_corpus c;
    char err[512];
    st_corpus_builtin(&c, 5, 100000);
    struct st_wl_params p;
    params(&p, ST_WL_DISTINCT, 8, 4000, 8); /* 8 x 16 KB of windows in 100 KB */
    assert_int_equal(build_err(&p, &c, &s, err, sizeof(err)), ST_EUSAGE);
    assert_non_null(strstr(err, "corpus builtin:5 (100000 bytes) is too small"));
    assert_non_null(strstr(err, "8 requests"));
    /* Checked before fitting: only the calibration was counted. */
    assert_int_equal(s.calls, 2);
    /* The estimate can pass and the layout still run out: the message says so too. */
    params(&p, ST_WL_DISTINCT, 250, 106, 8); /* 250 x 400 bytes: all of it, but for the gaps */
    s.calls = 0;
    int rc = build_err(&p, &c, &s, err, sizeof(err));
    assert_int_equal(rc, ST_EUSAGE);
    assert_non_null(strstr(err, "too small for the windows asked for: it ran out after 248 "));
    assert_non_null(strstr(err, "needs about 100000 bytes"));
    /* An empty corpus. */
    struct st_corpus e;
    assert_int_equal(st_corpus_from_text(&e, "empty.txt", "", 0), 0);
    params(&p, ST_WL_FIXED, 1, 10, 8);
    assert_int_equal(build_err(&p, &e, &s, err, sizeof(err)), ST_EUSAGE);
    assert_string_equal(err, "the corpus is empty");
    /* No corpus at all. */
    assert_int_equal(build_err(&p, NULL, &s, err, sizeof(err)), ST_EUSAGE);
    assert_string_equal(err, "a fixed workload needs a corpus");
    st_corpus_release(&e);
    st_corpus_release(&c);
}

static void test_bad_params(void **state)
{
    (void)state;
    struct sim s = {.chat = 1};
    struct st_wl_params p;
    char err[512];
    const double bad[] = {1.0, 1.5, -0.1, NAN, INFINITY};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        params(&p, ST_WL_SHARED_PREFIX, 4, 1000, 8);
        p.prefix_frac = bad[i];
        assert_int_equal(build_err(&p, &corpus_1m, &s, err, sizeof(err)), ST_EUSAGE);
        assert_non_null(strstr(err, "is outside [0, 1)"));
    }
    /* Also inside a mix. */
    params(&p, ST_WL_MIXED, 4, 1000, 8);
    p.n_mix = 2;
    p.mix_kind[0] = ST_WL_FIXED;
    p.mix_weight[0] = 1;
    p.mix_kind[1] = ST_WL_SHARED_PREFIX;
    p.mix_weight[1] = 1;
    p.prefix_frac = 1;
    assert_int_equal(build_err(&p, &corpus_1m, &s, err, sizeof(err)), ST_EUSAGE);
    assert_string_equal(err, "the shared prefix fraction 1 is outside [0, 1)");
    assert_int_equal(s.calls, 0); /* nothing counted before the parameters are checked */

    params(&p, ST_WL_FIXED, 0, 1000, 8);
    assert_int_equal(build_err(&p, &corpus_1m, &s, err, sizeof(err)), ST_EUSAGE);
    assert_string_equal(err, "a fixed workload needs 1 to 16777216 requests");
    params(&p, ST_WL_FIXED, 1, 0, 8);
    assert_int_equal(build_err(&p, &corpus_1m, &s, err, sizeof(err)), ST_EUSAGE);
    params(&p, ST_WL_FIXED, 1, 100, 8);
    p.input_len_max = 50;
    assert_int_equal(build_err(&p, &corpus_1m, &s, err, sizeof(err)), ST_EUSAGE);
    assert_string_equal(err, "input length: the maximum 50 is below the minimum 100");
    params(&p, ST_WL_MULTI_TURN, 4, 100, 8);
    p.chat = 0;
    assert_int_equal(build_err(&p, &corpus_1m, &s, err, sizeof(err)), ST_EUSAGE);
    assert_string_equal(err, "a multi-turn workload needs the chat API");
    params(&p, ST_WL_MULTI_TURN, 4, 100, 0);
    assert_int_equal(build_err(&p, &corpus_1m, &s, err, sizeof(err)), ST_EUSAGE);
    params(&p, ST_WL_MIXED, 4, 100, 8);
    assert_int_equal(build_err(&p, &corpus_1m, &s, err, sizeof(err)), ST_EUSAGE);
    p.n_mix = 1;
    p.mix_kind[0] = ST_WL_TRACE;
    p.mix_weight[0] = 1;
    assert_int_equal(build_err(&p, &corpus_1m, &s, err, sizeof(err)), ST_EUSAGE);
    p.mix_kind[0] = ST_WL_FIXED;
    p.mix_weight[0] = 0;
    assert_int_equal(build_err(&p, &corpus_1m, &s, err, sizeof(err)), ST_EUSAGE);
    assert_string_equal(err, "the mix weights add up to 0");
    params(&p, ST_WL_LONG, 1, 1000, 8);
    p.needles = 65;
    assert_int_equal(build_err(&p, &corpus_1m, &s, err, sizeof(err)), ST_EUSAGE);
    params(&p, ST_WL_TRACE, 0, 0, 0);
    assert_int_equal(build_err(&p, &corpus_1m, &s, err, sizeof(err)), ST_EUSAGE);
    assert_string_equal(err, "a trace workload needs its file");
    params(&p, ST_WL_FIXED, 1, 100, 8);
    p.len_tolerance = -1;
    assert_int_equal(build_err(&p, &corpus_1m, &s, err, sizeof(err)), ST_EUSAGE);
    params(&p, (enum st_wl_kind)99, 1, 100, 8);
    assert_int_equal(build_err(&p, &corpus_1m, &s, err, sizeof(err)), ST_EUSAGE);
    assert_int_equal(s.calls, 0);

    /* Lengths the template leaves no room for (chat overhead is 6 tokens by this rule). */
    params(&p, ST_WL_FIXED, 1, 6, 8);
    assert_int_equal(build_err(&p, &corpus_1m, &s, err, sizeof(err)), ST_EUSAGE);
    assert_string_equal(err, "request 0: an input length of 6 tokens is not above the chat "
                             "template's (6 tokens)");
    params(&p, ST_WL_SHARED_PREFIX, 4, 10, 8);
    p.prefix_frac = 0.5;
    assert_int_equal(build_err(&p, &corpus_1m, &s, err, sizeof(err)), ST_EUSAGE);
    assert_non_null(strstr(err, "shared prefix not above the chat template's"));
    params(&p, ST_WL_SHARED_PREFIX, 4, 10, 8);
    p.prefix_frac = 0.96;
    assert_int_equal(build_err(&p, &corpus_1m, &s, err, sizeof(err)), ST_EUSAGE);
    assert_string_equal(err, "request 0: an input length of 10 tokens leaves no suffix after the "
                             "shared prefix (10 tokens)");
}

static void test_kind_names(void **state)
{
    (void)state;
    enum st_wl_kind k;
    const char *names[] = {"fixed",      "shared-prefix", "distinct", "long",
                           "multi-turn", "mixed",         "dataset",  "trace"};
    for (int i = 0; i < 8; i++) {
        assert_int_equal(st_wl_kind_parse(names[i], &k), 0);
        assert_int_equal(k, ST_WL_FIXED + i);
        assert_string_equal(st_wl_kind_name(k), names[i]);
    }
    assert_int_equal(st_wl_kind_parse("Fixed", &k), ST_EUSAGE);
    assert_int_equal(st_wl_kind_parse("", &k), ST_EUSAGE);
    assert_string_equal(st_wl_kind_name((enum st_wl_kind)0), "?");
    assert_string_equal(st_wl_kind_name((enum st_wl_kind)9), "?");
}

/* Group of a served item, from its tag. */
static int64_t item_group(const struct st_workload *wl, uint64_t id)
{
    struct got g;
    get(wl, id, &g);
    int64_t v = tag_i64(&g, "group");
    got_release(&g);
    return v;
}

static size_t common_prefix(const struct st_buf *a, const struct st_buf *b)
{
    size_t n = a->len < b->len ? a->len : b->len, i = 0;
    while (i < n && a->data[i] == b->data[i]) {
        i++;
    }
    return i;
}

/* The seed-003 hit90 shape, scaled: one group, prefix 0.9 of the prompt. */
static void test_shared_prefix(void **state)
{
    (void)state;
    for (int chat = 0; chat <= 1; chat++) {
        struct sim s = {.chat = chat};
        struct st_wl_params p;
        params(&p, ST_WL_SHARED_PREFIX, 16, 8192, 512);
        p.chat = chat;
        p.prefix_frac = 0.9;
        p.groups = 3;
        struct st_workload *wl = build_ok(&p, &corpus_1m, &s);
        assert_exact(wl, chat);
        assert_int_equal(st_workload_prefix_groups(wl), 3);
        assert_int_equal(s.calls, 2 + 3 + 16);
        /* Warm items: the prefix alone, 1 output token, counted at 0.9 x 8192. */
        struct st_buf prefix[3];
        for (uint32_t g = 0; g < 3; g++) {
            struct st_req_item item;
            struct st_buf scratch;
            st_buf_init(&scratch);
            st_buf_init(&prefix[g]);
            memset(&item, 0, sizeof(item));
            assert_int_equal(st_workload_warm_item(wl, g, &item, &scratch), 0);
            assert_int_equal(item.max_tokens, 1);
            assert_int_equal(item.ignore_eos, 0);
            assert_int_equal(item.input_tokens, 7373); /* round(0.9 * 8192) */
            st_buf_append(&prefix[g], item.prompt, item.prompt_len);
            assert_non_null(strstr(item.tag_json, "\"kind\":\"warm\""));
            assert_int_equal((codepoints(item.prompt, item.prompt_len) + (chat ? 24 : 0) + 3) / 4,
                             7373);
            st_buf_release(&scratch);
        }
        struct st_req_item item;
        struct st_buf scratch;
        st_buf_init(&scratch);
        assert_int_equal(st_workload_warm_item(wl, 3, &item, &scratch), ST_EUSAGE);
        st_buf_release(&scratch);
        /* Items of a group start with its prefix bytes exactly and then go their own way. */
        struct got g[16];
        for (uint64_t i = 0; i < 16; i++) {
            get(wl, i, &g[i]);
            int64_t grp = tag_i64(&g[i], "group");
            assert_true(grp >= 0 && grp < 3);
            const struct st_buf *pre = &prefix[grp];
            assert_true(g[i].text.len > pre->len);
            assert_memory_equal(g[i].text.data, pre->data, pre->len);
        }
        size_t pairs = 0, diverge_at_once = 0;
        for (uint64_t i = 0; i < 16; i++) {
            for (uint64_t j = i + 1; j < 16; j++) {
                int64_t gi = tag_i64(&g[i], "group"), gj = tag_i64(&g[j], "group");
                size_t cp = common_prefix(&g[i].text, &g[j].text);
                if (gi != gj) {
                    assert_true(cp < 64);
                    continue;
                }
                pairs++;
                assert_true(cp >= prefix[gi].len);
                assert_true(cp < prefix[gi].len + 16); /* not a block more: a few bytes by chance */
                diverge_at_once += cp == prefix[gi].len;
            }
        }
        assert_true(pairs > 0);
        assert_true(diverge_at_once * 2 >= pairs);
        for (uint64_t i = 0; i < 16; i++) {
            got_release(&g[i]);
        }
        for (int k = 0; k < 3; k++) {
            st_buf_release(&prefix[k]);
        }
        st_workload_free(wl);
    }
}

/* prefix_frac 0: groups of nothing; every prompt its own. */
static void test_shared_prefix_zero(void **state)
{
    (void)state;
    struct sim s = {.chat = 1};
    struct st_wl_params p;
    params(&p, ST_WL_SHARED_PREFIX, 8, 500, 8);
    struct st_workload *wl = build_ok(&p, &corpus_1m, &s);
    assert_exact(wl, 1);
    assert_int_equal(st_workload_prefix_groups(wl), 0);
    assert_int_equal(item_group(wl, 0), -1);
    st_workload_free(wl);
}

static void test_popularity(void **state)
{
    (void)state;
    const uint64_t n = 12000;
    const uint32_t groups = 6;
    for (int zipf = 0; zipf <= 1; zipf++) {
        struct sim s = {.chat = 0};
        struct st_wl_params p;
        params(&p, ST_WL_SHARED_PREFIX, n, 24, 4);
        p.chat = 0;
        p.prefix_frac = 0.5;
        p.groups = groups;
        p.zipf_s = zipf ? 1.2 : 0;
        struct st_workload *wl = build_ok(&p, &corpus_1m, &s);
        uint64_t hits[6] = {0};
        for (uint64_t i = 0; i < n; i++) {
            int64_t g = item_group(wl, i);
            assert_true(g >= 0 && g < (int64_t)groups);
            hits[g]++;
        }
        double h = 0, want[6];
        for (uint32_t k = 0; k < groups; k++) {
            want[k] = zipf ? pow(k + 1, -1.2) : 1;
            h += want[k];
        }
        for (uint32_t k = 0; k < groups; k++) {
            double pk = want[k] / h;
            double sd = sqrt(pk * (1 - pk) / (double)n);
            double got = (double)hits[k] / (double)n;
            assert_true(fabs(got - pk) < 5 * sd);
        }
        st_workload_free(wl);
    }
}

static void test_long_needles(void **state)
{
    (void)state;
    struct sim s = {.chat = 1};
    struct st_wl_params p;
    params(&p, ST_WL_LONG, 2, 32768, 64);
    p.needles = 3;
    struct st_workload *wl = build_ok(&p, &corpus_1m, &s);
    assert_exact(wl, 1);
    /* Needle sentences and the question are not a multiple of 4 code points: a second call. */
    assert_true(s.calls <= 2 + 2 * 3);
    char words[2][3][64];
    for (uint64_t i = 0; i < 2; i++) {
        struct got g;
        get(wl, i, &g);
        struct st_json d;
        st_json_init(&d, 0);
        assert_int_equal(st_json_parse(&d, g.tag.data, g.tag.len), 0);
        int nd = st_json_get(&d, 0, "needles");
        assert_int_equal(st_json_type(&d, nd), ST_JSON_ARRAY);
        assert_int_equal(d.toks[nd].size, 3);
        for (uint32_t k = 0; k < 3; k++) {
            int e = st_json_at(&d, nd, k);
            double depth;
            int64_t off;
            struct st_buf w;
            st_buf_init(&w);
            assert_int_equal(st_json_f64(&d, st_json_get(&d, e, "depth"), &depth), 0);
            assert_int_equal(st_json_i64(&d, st_json_get(&d, e, "offset"), &off), 0);
            assert_int_equal(st_json_str(&d, st_json_get(&d, e, "word"), &w), 0);
            struct st_buf sentence;
            st_buf_init(&sentence);
            assert_int_equal(st_json_str(&d, st_json_get(&d, e, "text"), &sentence), 0);
            assert_true(fabs(depth - (k + 1) / 4.0) < 1e-12);
            /* The sentence is where the tag says, near its depth, after a sentence end. */
            const char lead[] = "The secret code word is ";
            assert_memory_equal(g.text.data + off, lead, sizeof(lead) - 1);
            assert_memory_equal(g.text.data + off + sizeof(lead) - 1, w.data, w.len);
            assert_memory_equal(g.text.data + off, sentence.data, sentence.len);
            assert_int_equal(sentence.len, sizeof(lead) - 1 + w.len + 2);
            st_buf_release(&sentence);
            assert_true(fabs((double)off / (double)g.text.len - depth) < 0.01);
            assert_true(g.text.data[off - 1] == ' ' || g.text.data[off - 1] == '\n');
            /* The word appears once. */
            assert_ptr_equal(strstr(g.text.data, w.data), g.text.data + off + sizeof(lead) - 1);
            snprintf(words[i][k], sizeof(words[i][k]), "%s", w.data);
            st_buf_release(&w);
        }
        st_json_release(&d);
        assert_non_null(strstr(g.text.data, "\n\nQuestion: the text above contains 3 secret "
                                            "code words."));
        got_release(&g);
    }
    assert_string_not_equal(words[0][0], words[1][0]);
    st_workload_free(wl);
    /* No needles: a plain prompt, no question. */
    params(&p, ST_WL_LONG, 1, 4000, 8);
    wl = build_ok(&p, &corpus_1m, &s);
    assert_exact(wl, 1);
    struct got g;
    get(wl, 0, &g);
    assert_null(strstr(g.text.data, "Question"));
    assert_null(strstr(g.tag.data, "needles"));
    got_release(&g);
    st_workload_free(wl);
}

/* Near a 128K context, with the limit checked. */
static void test_long_context(void **state)
{
    (void)state;
    struct sim s = {.chat = 1};
    struct st_wl_params p;
    char err[512];
    params(&p, ST_WL_LONG, 1, 130000, 1024);
    p.needles = 1;
    p.context_tokens = 131072;
    struct st_workload *wl = build_ok(&p, &corpus_1m, &s);
    assert_exact(wl, 1);
    st_workload_free(wl);
    p.output_len = 2000;
    s.calls = 0;
    assert_int_equal(build_err(&p, &corpus_1m, &s, err, sizeof(err)), ST_EUSAGE);
    assert_string_equal(err, "request 0: 130000 prompt and 2000 output tokens exceed the context "
                             "of 131072 tokens");
    /* 512K, as seed 003's single long request. */
    params(&p, ST_WL_LONG, 1, 524288 - 512, 512);
    p.needles = 1;
    p.context_tokens = 524288;
    s.calls = 0;
    wl = build_ok(&p, &corpus_1m, &s);
    assert_exact(wl, 1);
    assert_true(s.calls <= 4);
    st_workload_free(wl);
    /* No counter. */
    struct st_workload *none = NULL;
    assert_int_equal(
        st_workload_build(&none, &p, &corpus_1m, NULL, 0, NULL, NULL, err, sizeof(err)), ST_EUSAGE);
    assert_string_equal(err, "a workload needs a token counter");
}

static void test_multi_turn(void **state)
{
    (void)state;
    struct sim s = {.chat = 1};
    struct st_wl_params p;
    params(&p, ST_WL_MULTI_TURN, 7, 200, 50); /* sessions of 3 turns: 3 + 3 + 1 */
    p.turns = 3;
    struct st_workload *wl = build_ok(&p, &corpus_1m, &s);
    struct st_buf prev;
    st_buf_init(&prev);
    for (uint64_t i = 0; i < 7; i++) {
        struct got g;
        get(wl, i, &g);
        assert_true(g.messages);
        uint32_t turn = (uint32_t)(i % 3 + 1);
        assert_int_equal(tag_i64(&g, "turn"), turn);
        assert_int_equal(tag_i64(&g, "session"), i / 3);
        struct st_json d;
        st_json_init(&d, 0);
        assert_int_equal(st_json_parse(&d, g.text.data, g.text.len), 0);
        assert_int_equal(d.toks[0].size, 2 * turn - 1);
        uint64_t k = 0;
        for (int m = st_json_first(&d, 0); m >= 0; m = st_json_next(&d, 0, m), k++) {
            int role = st_json_get(&d, m, "role");
            assert_true(st_json_streq(&d, role, k % 2 ? "assistant" : "user"));
            struct st_buf c;
            st_buf_init(&c);
            assert_int_equal(st_json_str(&d, st_json_get(&d, m, "content"), &c), 0);
            /* Content tokens: the user turn's input, the assistant turn's output. */
            assert_int_equal((codepoints(c.data, c.len) + 3) / 4, k % 2 ? 50 : 200);
            st_buf_release(&c);
        }
        st_json_release(&d);
        /* The history grows: this turn resends the last one's messages unchanged. */
        if (turn > 1) {
            assert_true(g.text.len > prev.len);
            assert_memory_equal(g.text.data, prev.data, prev.len - 1); /* up to its ']' */
        }
        uint64_t req, cnt;
        st_workload_tokens(wl, i, &req, &cnt);
        assert_int_equal(req, 6 + turn * 200 + (turn - 1) * 50);
        assert_int_equal(cnt, req);
        /* The server sees the template once per message: a few tokens more, never fewer. */
        uint64_t served = sim_messages(g.text.data, g.text.len);
        assert_true(served >= req && served <= req + 5 * turn);
        st_buf_clear(&prev);
        st_buf_append(&prev, g.text.data, g.text.len);
        got_release(&g);
    }
    st_buf_release(&prev);
    st_workload_free(wl);
}

static void test_mixed(void **state)
{
    (void)state;
    struct sim s = {.chat = 1};
    struct st_wl_params p;
    params(&p, ST_WL_MIXED, 200, 300, 16);
    p.n_mix = 5;
    const enum st_wl_kind kinds[] = {ST_WL_FIXED, ST_WL_SHARED_PREFIX, ST_WL_DISTINCT, ST_WL_LONG,
                                     ST_WL_MULTI_TURN};
    const double weights[] = {4, 3, 1, 1, 1};
    for (int i = 0; i < 5; i++) {
        p.mix_kind[i] = kinds[i];
        p.mix_weight[i] = weights[i];
    }
    p.prefix_frac = 0.5;
    p.groups = 2;
    p.turns = 2;
    p.needles = 1;
    struct st_workload *wl = build_ok(&p, &corpus_1m, &s);
    uint64_t seen[9] = {0};
    struct win w[400];
    size_t nw = 0;
    for (uint64_t i = 0; i < 200; i++) {
        uint64_t req, cnt;
        st_workload_tokens(wl, i, &req, &cnt);
        assert_int_equal(req, cnt);
        struct got g;
        get(wl, i, &g);
        assert_non_null(strstr(g.tag.data, "\"mixed\":true"));
        for (int k = 0; k < 5; k++) {
            char key[64];
            snprintf(key, sizeof(key), "\"kind\":\"%s\"", st_wl_kind_name(kinds[k]));
            if (strstr(g.tag.data, key)) {
                seen[kinds[k]]++;
                if (kinds[k] != ST_WL_SHARED_PREFIX && kinds[k] != ST_WL_MULTI_TURN) {
                    tag_windows(&g, w, &nw, 400);
                }
            }
        }
        if (!g.messages) {
            assert_int_equal(served_tokens(wl, i, 1), req);
        }
        got_release(&g);
    }
    for (int k = 0; k < 5; k++) {
        double share = weights[k] / 10.0;
        assert_true(fabs((double)seen[kinds[k]] / 200.0 - share) < 0.1);
    }
    /* Windows of unshared prompts never overlap, across kinds. */
    qsort(w, nw, sizeof(*w), cmp_win);
    for (size_t i = 1; i < nw; i++) {
        assert_true(w[i - 1].off + w[i - 1].len <= w[i].off);
    }
    assert_int_equal(st_workload_prefix_groups(wl), 2);
    st_workload_free(wl);
}

/* The same seed gives the same bytes; another seed other bytes. */
static void test_seeded(void **state)
{
    (void)state;
    struct sim s1 = {.chat = 1}, s2 = {.chat = 1}, s3 = {.chat = 1};
    struct st_wl_params p;
    params(&p, ST_WL_SHARED_PREFIX, 6, 1000, 8);
    p.prefix_frac = 0.5;
    struct st_workload *a = build_ok(&p, &corpus_1m, &s1);
    struct st_workload *b = build_ok(&p, &corpus_1m, &s2);
    p.seed = 2;
    struct st_workload *c = build_ok(&p, &corpus_1m, &s3);
    for (uint64_t i = 0; i < 6; i++) {
        struct got ga, gb, gc;
        get(a, i, &ga);
        get(b, i, &gb);
        get(c, i, &gc);
        assert_int_equal(ga.text.len, gb.text.len);
        assert_memory_equal(ga.text.data, gb.text.data, ga.text.len);
        assert_string_equal(ga.tag.data, gb.tag.data);
        assert_true(ga.text.len != gc.text.len ||
                    memcmp(ga.text.data, gc.text.data, ga.text.len) != 0);
        got_release(&ga);
        got_release(&gb);
        got_release(&gc);
    }
    st_workload_free(a);
    st_workload_free(b);
    st_workload_free(c);
}

/* ---- counters other than the simulator's ---- */

/* A BPE-like counter: within 1% always, mostly exact, a few calls a prompt. */
static void test_word_counter(void **state)
{
    (void)state;
    for (int chat = 0; chat <= 1; chat++) {
        struct sim s = {.chat = chat, .words = 1};
        struct st_wl_params p;
        params(&p, ST_WL_SHARED_PREFIX, 40, 3000, 8);
        p.chat = chat;
        p.prefix_frac = 0.8;
        p.input_len_max = 9000;
        struct st_workload *wl = build_ok(&p, &corpus_1m, &s);
        uint64_t exact = 0;
        for (uint64_t i = 0; i < 40; i++) {
            uint64_t req, cnt;
            st_workload_tokens(wl, i, &req, &cnt);
            exact += req == cnt;
            /* A word can be 2 tokens: the count moves in steps of 1 or 2. */
            assert_true(cnt + 1 >= req && cnt <= req + 1);
        }
        assert_true(exact >= 30);
        assert_true(st_workload_max_len_error(wl) <= 0.001);
        /* Calibration 2, prefix a few, then about 3 calls a prompt. */
        assert_true(s.calls <= 2 + 8 + 40 * 5);
        st_workload_free(wl);
    }
}

/* A counter that refuses "": the overhead comes from two samples. */
static void test_refuse_empty(void **state)
{
    (void)state;
    struct sim s = {.chat = 1, .refuse_empty = 1};
    struct st_wl_params p;
    params(&p, ST_WL_FIXED, 5, 777, 8);
    struct st_workload *wl = build_ok(&p, &corpus_1m, &s);
    assert_exact(wl, 1);
    assert_int_equal(st_workload_counter_calls(wl), 3 + 5);
    st_workload_free(wl);
}

/* A coarse counter cannot hit the length: the tolerance fails the build with the numbers. */
static int coarse_count(void *ctx, const char *text, size_t len, uint64_t *tokens, char *err,
                        size_t errlen)
{
    (void)ctx;
    (void)text;
    (void)err;
    (void)errlen;
    *tokens = (len / 4000 + 1) * 1000;
    return 0;
}

static void test_tolerance(void **state)
{
    (void)state;
    struct st_wl_params p;
    struct st_workload *wl = NULL;
    char err[512];
    params(&p, ST_WL_FIXED, 3, 1500, 8);
    int rc = st_workload_build(&wl, &p, &corpus_1m, NULL, 0, coarse_count, NULL, err, sizeof(err));
    assert_int_equal(rc, -ERANGE);
    assert_null(wl);
    assert_non_null(strstr(err, "3 of 3 prompts are off their length by more than 1.00%"));
    assert_non_null(strstr(err, "request 0 (fixed), asked for 1500 tokens and counts"));
    /* A wide enough tolerance accepts them, and says how far off they are. */
    p.len_tolerance = 0.5;
    rc = st_workload_build(&wl, &p, &corpus_1m, NULL, 0, coarse_count, NULL, err, sizeof(err));
    assert_int_equal(rc, 0);
    assert_true(fabs(st_workload_max_len_error(wl) - 1.0 / 3.0) < 1e-9);
    st_workload_free(wl);
}

static void test_counter_error(void **state)
{
    (void)state;
    struct sim s = {.chat = 1, .fail_after = 5};
    struct st_wl_params p;
    char err[512];
    params(&p, ST_WL_FIXED, 5, 100, 8);
    assert_int_equal(build_err(&p, &corpus_1m, &s, err, sizeof(err)), -ECONNREFUSED);
    assert_string_equal(err, "token counter: POST /tokenize: connection refused");
    s.calls = 0;
    s.fail_after = 2;
    assert_int_equal(build_err(&p, &corpus_1m, &s, err, sizeof(err)), -ECONNREFUSED);
}

/* Items repeat past the last one. */
static void test_repeat(void **state)
{
    (void)state;
    struct sim s = {.chat = 1};
    struct st_wl_params p;
    params(&p, ST_WL_DISTINCT, 4, 100, 8);
    struct st_workload *wl = build_ok(&p, &corpus_1m, &s);
    struct got a, b;
    get(wl, 1, &a);
    get(wl, 9, &b);
    assert_int_equal(a.text.len, b.text.len);
    assert_memory_equal(a.text.data, b.text.data, a.text.len);
    assert_string_equal(a.tag.data, b.tag.data);
    got_release(&a);
    got_release(&b);
    st_workload_free(wl);
}

/* fit_items (bench's duration runs): only the first items are fitted, each the same bytes, tag,
 * lengths and counts as in the build of every requested item; the counter calls stay bounded by
 * the fitted items, not the requests; the source repeats them; a window map of the fitted
 * items serves the same parameters again. */
static void test_fit_items(void **state)
{
    (void)state;
    struct sim sf = {.chat = 1}, sp = {.chat = 1}, sm = {.chat = 1};
    struct st_wl_params p;
    params(&p, ST_WL_MIXED, 2000, 120, 16);
    p.n_mix = 4;
    const enum st_wl_kind kinds[] = {ST_WL_FIXED, ST_WL_SHARED_PREFIX, ST_WL_DISTINCT,
                                     ST_WL_MULTI_TURN};
    for (int i = 0; i < 4; i++) {
        p.mix_kind[i] = kinds[i];
        p.mix_weight[i] = 1;
    }
    p.prefix_frac = 0.5;
    p.groups = 2;
    p.turns = 2;
    struct st_workload *full = build_ok(&p, &corpus_1m, &sf);
    p.fit_items = 40;
    assert_int_equal(st_wl_fitted_items(&p), 40);
    struct st_workload *part = build_ok(&p, &corpus_1m, &sp);
    assert_int_equal(st_workload_items(full), 2000);
    assert_int_equal(st_workload_items(part), 40);
    /* Calibration, the group prefixes and 40 items, against 2000 items' worth. */
    assert_true(sp.calls * 10 < sf.calls);
    assert_true(sp.calls <= 40 * 8 + 64);
    for (uint64_t i = 0; i < 40; i++) {
        struct got a, b;
        get(full, i, &a);
        get(part, i, &b);
        assert_int_equal(a.messages, b.messages);
        assert_int_equal(a.text.len, b.text.len);
        assert_memory_equal(a.text.data, b.text.data, a.text.len);
        assert_string_equal(a.tag.data, b.tag.data);
        assert_int_equal(a.max_tokens, b.max_tokens);
        assert_int_equal(a.input_tokens, b.input_tokens);
        got_release(&a);
        got_release(&b);
        uint64_t r1, c1, r2, c2;
        st_workload_tokens(full, i, &r1, &c1);
        st_workload_tokens(part, i, &r2, &c2);
        assert_int_equal(r1, r2);
        assert_int_equal(c1, c2);
    }
    /* Past the fitted items the source starts over. */
    struct got a, b;
    get(part, 3, &a);
    get(part, 43, &b);
    assert_memory_equal(a.text.data, b.text.data, a.text.len);
    got_release(&a);
    got_release(&b);
    /* The fitted items' map serves the same parameters (40 items, not 2000). */
    struct st_buf map;
    st_buf_init(&map);
    st_workload_windows_json(part, &map);
    struct st_workload *again = NULL;
    char err[512] = "";
    assert_int_equal(st_workload_build(&again, &p, &corpus_1m, map.data, map.len, sim_count, &sm,
                                       err, sizeof(err)),
                     0);
    assert_int_equal(st_workload_items(again), 40);
    get(part, 39, &a);
    get(again, 39, &b);
    assert_int_equal(a.text.len, b.text.len);
    assert_memory_equal(a.text.data, b.text.data, a.text.len);
    got_release(&a);
    got_release(&b);
    /* fit_items at or above requests, or for a file's kinds, is every item. */
    p.fit_items = 5000;
    assert_int_equal(st_wl_fitted_items(&p), 2000);
    p.kind = ST_WL_TRACE;
    p.fit_items = 10;
    assert_int_equal(st_wl_fitted_items(&p), 2000);
    st_buf_release(&map);
    st_workload_free(again);
    st_workload_free(part);
    st_workload_free(full);
}

/* The size hint is enough for the build. */
static void test_hint(void **state)
{
    (void)state;
    struct sim s = {.chat = 1};
    struct st_wl_params p;
    params(&p, ST_WL_SHARED_PREFIX, 32, 16384, 8);
    p.prefix_frac = 0.9;
    uint64_t bytes = st_wl_corpus_bytes_hint(&p);
    assert_true(bytes > (uint64_t)(16384 * 0.9 + 32 * 16384 * 0.1) * 4);
    assert_true(bytes < 2 * (uint64_t)(16384 * 0.9 + 32 * 16384 * 0.1) * 5);
    struct st_corpus c;
    st_corpus_builtin(&c, 1, (size_t)bytes);
    struct st_workload *wl = build_ok(&p, &c, &s);
    assert_exact(wl, 1);
    st_workload_free(wl);
    st_corpus_release(&c);
    p.prefix_frac = 2;
    assert_int_equal(st_wl_corpus_bytes_hint(&p), 0);
    params(&p, ST_WL_DATASET, 0, 0, 0);
    p.data = "[]";
    assert_int_equal(st_wl_corpus_bytes_hint(&p), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_exact),
        cmocka_unit_test(test_fixed_distribution),
        cmocka_unit_test(test_distinct_no_overlap),
        cmocka_unit_test(test_distinct_wraps),
        cmocka_unit_test(test_corpus_too_small),
        cmocka_unit_test(test_bad_params),
        cmocka_unit_test(test_kind_names),
        cmocka_unit_test(test_shared_prefix),
        cmocka_unit_test(test_shared_prefix_zero),
        cmocka_unit_test(test_popularity),
        cmocka_unit_test(test_long_needles),
        cmocka_unit_test(test_long_context),
        cmocka_unit_test(test_multi_turn),
        cmocka_unit_test(test_mixed),
        cmocka_unit_test(test_seeded),
        cmocka_unit_test(test_word_counter),
        cmocka_unit_test(test_refuse_empty),
        cmocka_unit_test(test_tolerance),
        cmocka_unit_test(test_counter_error),
        cmocka_unit_test(test_repeat),
        cmocka_unit_test(test_fit_items),
        cmocka_unit_test(test_hint),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
