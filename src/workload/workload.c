/*
 * Workloads: parameters, the build (fresh from the seed, or from a window map) and the checks
 * every build ends with (output lengths, context, length tolerance). See workload.h; the kinds
 * are fitted in kinds.c and replay.c, and served by serve.c. A built workload owns its plan and a
 * copy of the corpus bytes and never changes again.
 */
#include "workload/workload.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/json.h"
#include "base/xalloc.h"
#include "workload/build.h"

void st_wl_params_defaults(struct st_wl_params *p)
{
    *p = (struct st_wl_params){.kind = ST_WL_FIXED,
                               .chat = 1,
                               .seed = 1,
                               .ignore_eos = 1,
                               .groups = 1,
                               .turns = 1,
                               .len_tolerance = 0.01,
                               .block_tokens = 512};
}

/* ---- parameter checks ---- */

static int usage(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int usage(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return ST_EUSAGE;
}

static int is_synthetic(enum st_wl_kind k)
{
    return k >= ST_WL_FIXED && k <= ST_WL_MULTI_TURN;
}

static int has_kind(const struct st_wl_params *p, enum st_wl_kind k)
{
    if (p->kind == k) {
        return 1;
    }
    if (p->kind != ST_WL_MIXED) {
        return 0;
    }
    for (uint32_t i = 0; i < p->n_mix; i++) {
        if (p->mix_kind[i] == k && p->mix_weight[i] > 0) {
            return 1;
        }
    }
    return 0;
}

static int check_mix(const struct st_wl_params *p, char *err, size_t errlen)
{
    double sum = 0;
    if (p->n_mix == 0 || p->n_mix > ST_WL_MAX_MIX) {
        return usage(err, errlen, "a mixed workload needs 1 to %d kinds, not %u", ST_WL_MAX_MIX,
                     p->n_mix);
    }
    for (uint32_t i = 0; i < p->n_mix; i++) {
        if (!is_synthetic(p->mix_kind[i])) {
            return usage(err, errlen,
                         "a mix takes fixed, shared-prefix, distinct, long and multi-turn, not %s",
                         st_wl_kind_name(p->mix_kind[i]));
        }
        if (!(p->mix_weight[i] >= 0) || !isfinite(p->mix_weight[i])) {
            return usage(err, errlen, "mix weight %g of %s is not a number >= 0", p->mix_weight[i],
                         st_wl_kind_name(p->mix_kind[i]));
        }
        sum += p->mix_weight[i];
    }
    if (!(sum > 0)) {
        return usage(err, errlen, "the mix weights add up to 0");
    }
    return 0;
}

static int check_range(char *err, size_t errlen, const char *what, uint64_t lo, uint64_t hi)
{
    if (hi != 0 && hi < lo) {
        return usage(err, errlen, "%s: the maximum %llu is below the minimum %llu", what,
                     (unsigned long long)hi, (unsigned long long)lo);
    }
    if (lo > ST_TRACE_MAX_TOKENS || hi > ST_TRACE_MAX_TOKENS) {
        return usage(err, errlen, "%s: at most %u tokens", what, ST_TRACE_MAX_TOKENS);
    }
    return 0;
}

static int validate(const struct st_wl_params *p, char *err, size_t errlen)
{
    int rc;
    if (p->kind < ST_WL_FIXED || p->kind > ST_WL_TRACE) {
        return usage(err, errlen, "unknown workload kind %d", (int)p->kind);
    }
    if (!(p->len_tolerance >= 0) || !isfinite(p->len_tolerance)) {
        return usage(err, errlen, "the length tolerance %g is not a share >= 0", p->len_tolerance);
    }
    rc = check_range(err, errlen, "output length", p->output_len, p->output_len_max);
    if (rc) {
        return rc;
    }
    if (p->kind == ST_WL_TRACE || p->kind == ST_WL_DATASET) {
        if (!p->data) {
            return usage(err, errlen, "a %s workload needs its file", st_wl_kind_name(p->kind));
        }
        if (p->kind == ST_WL_TRACE && p->block_tokens == 0) {
            return usage(err, errlen, "the trace block size must be at least 1 token");
        }
        if (p->requests > ST_WPLAN_MAX_ITEMS) {
            return usage(err, errlen, "at most %u requests", ST_WPLAN_MAX_ITEMS);
        }
        return 0;
    }
    if (p->kind == ST_WL_MIXED) {
        rc = check_mix(p, err, errlen);
        if (rc) {
            return rc;
        }
    }
    if (p->requests == 0 || p->requests > ST_WPLAN_MAX_ITEMS) {
        return usage(err, errlen, "a %s workload needs 1 to %u requests", st_wl_kind_name(p->kind),
                     ST_WPLAN_MAX_ITEMS);
    }
    if (p->input_len == 0) {
        return usage(err, errlen, "a %s workload needs an input length", st_wl_kind_name(p->kind));
    }
    rc = check_range(err, errlen, "input length", p->input_len, p->input_len_max);
    if (rc) {
        return rc;
    }
    if (has_kind(p, ST_WL_SHARED_PREFIX)) {
        if (!(p->prefix_frac >= 0 && p->prefix_frac < 1)) {
            return usage(err, errlen, "the shared prefix fraction %g is outside [0, 1)",
                         p->prefix_frac);
        }
        if (p->groups == 0 || p->groups > (1u << 20)) {
            return usage(err, errlen, "shared-prefix groups: 1 to %u, not %u", 1u << 20, p->groups);
        }
        if (!(p->zipf_s >= 0) || !isfinite(p->zipf_s)) {
            return usage(err, errlen, "the Zipf exponent %g is not a number >= 0", p->zipf_s);
        }
    }
    if (has_kind(p, ST_WL_MULTI_TURN)) {
        if (!p->chat) {
            return usage(err, errlen, "a multi-turn workload needs the chat API");
        }
        if (p->turns == 0) {
            return usage(err, errlen, "a multi-turn workload needs at least 1 turn");
        }
        if (p->output_len == 0) {
            return usage(err, errlen,
                         "a multi-turn workload needs an output length (the "
                         "assistant turns resent in the history have that length)");
        }
    }
    if (has_kind(p, ST_WL_LONG) && p->needles > ST_WL_MAX_NEEDLES) {
        return usage(err, errlen, "at most %d needles a prompt, not %u", ST_WL_MAX_NEEDLES,
                     p->needles);
    }
    return 0;
}

/* ---- corpus size hint ---- */

uint64_t st_wl_corpus_bytes_hint(const struct st_wl_params *p)
{
    uint64_t tokens = 0;
    if (validate(p, NULL, 0) != 0 || p->kind == ST_WL_DATASET) {
        return 0;
    }
    if (p->kind == ST_WL_TRACE) {
        struct st_trace t;
        if (st_trace_parse(&t, "trace", p->data, p->data_len, NULL, 0) != 0) {
            return 0;
        }
        uint64_t n = p->requests && p->requests < t.n ? p->requests : t.n;
        uint32_t *block_of = st_xmalloc((size_t)(t.nids ? t.nids : 1) * sizeof(*block_of));
        tokens = st_trace_blocks(&t, n, block_of) * p->block_tokens;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t covered = (uint64_t)t.reqs[i].nids * p->block_tokens;
            tokens += t.reqs[i].input_len > covered ? t.reqs[i].input_len - covered : 0;
        }
        free(block_of);
        st_trace_release(&t);
    } else {
        struct st_wl_spec *s = st_wl_draw(p, p->requests);
        tokens = st_wl_estimate_tokens(p, s, p->requests, 0);
        free(s);
    }
    double bytes = (double)tokens * 4.5 * 1.1 + 65536;
    return bytes < 1.8e19 ? (uint64_t)bytes : UINT64_MAX;
}

/* ---- building from a window map ---- */

static const char *map_name(const struct st_wl_params *p)
{
    return p->windows_name ? p->windows_name : "windows";
}

static int is_boundary(const struct st_corpus *c, uint64_t off)
{
    return off >= c->len || ((unsigned char)c->text[off] & 0xC0) != 0x80;
}

static int check_parts(const struct st_wplan *pl, const struct st_corpus *c, uint64_t part0,
                       uint64_t n, int messages, const char *name, const char *what, uint64_t idx,
                       char *err, size_t errlen)
{
    for (uint64_t i = part0; i < part0 + n; i++) {
        const struct st_part *p = &pl->parts[i];
        int role = p->type == ST_PART_USER || p->type == ST_PART_ASSISTANT;
        if (p->type == ST_PART_WIN &&
            (p->off > c->len || p->len > c->len - p->off || !is_boundary(c, p->off) ||
             !is_boundary(c, p->off + p->len))) {
            return usage(err, errlen,
                         "%s: %s %llu: window [%llu, %llu] is not inside the corpus on UTF-8 "
                         "boundaries",
                         name, what, (unsigned long long)idx, (unsigned long long)p->off,
                         (unsigned long long)p->len);
        }
        if (role != 0 && !messages) {
            return usage(err, errlen, "%s: %s %llu: chat messages belong to multi-turn items", name,
                         what, (unsigned long long)idx);
        }
        if (messages && i == part0 && !role) {
            return usage(err, errlen, "%s: %s %llu: a multi-turn item starts with a role", name,
                         what, (unsigned long long)idx);
        }
    }
    return 0;
}

static int check_map(const struct st_wplan *pl, const struct st_wl_params *p,
                     const struct st_corpus *c, char *err, size_t errlen)
{
    const char *name = map_name(p);
    char hex[17];
    if (pl->kind != p->kind) {
        return usage(err, errlen, "%s: the window map is for a %s workload, not %s", name,
                     st_wl_kind_name(pl->kind), st_wl_kind_name(p->kind));
    }
    if (pl->chat != (p->chat != 0)) {
        return usage(err, errlen, "%s: the window map was made for the %s API", name,
                     pl->chat ? "chat" : "completions");
    }
    if (p->kind != ST_WL_DATASET && (pl->corpus_hash != c->hash || pl->corpus_len != c->len)) {
        st_hash_hex(pl->corpus_hash, hex);
        return usage(err, errlen,
                     "%s: the window map is for corpus %s (%llu bytes, hash %s), not %s (%llu "
                     "bytes)",
                     name, pl->corpus_id, (unsigned long long)pl->corpus_len, hex, c->id,
                     (unsigned long long)c->len);
    }
    if ((p->kind == ST_WL_TRACE || p->kind == ST_WL_DATASET) && pl->has_data &&
        pl->data_hash != st_hash64(p->data, p->data_len)) {
        return usage(err, errlen, "%s: the window map was made from another %s file", name,
                     st_wl_kind_name(p->kind));
    }
    /* A map of every requested item, or of the fitted ones (fit_items). */
    uint64_t want = st_wl_fitted_items(p);
    if (pl->nitems == 0 || (want && want != pl->nitems && p->requests != pl->nitems)) {
        return usage(err, errlen, "%s: the window map has %llu items; this point asks for %llu",
                     name, (unsigned long long)pl->nitems, (unsigned long long)want);
    }
    int shared = 0;
    for (uint64_t i = 0; i < pl->nitems && !shared; i++) {
        shared = pl->items[i].kind == ST_WL_SHARED_PREFIX;
    }
    /* A small mix may have drawn no shared-prefix item, and then has no groups. */
    if (shared && p->prefix_frac > 0 && pl->ngroups != p->groups) {
        return usage(err, errlen, "%s: the window map has %u shared-prefix groups, not %u", name,
                     pl->ngroups, p->groups);
    }
    uint64_t hi = p->input_len_max > p->input_len ? p->input_len_max : p->input_len;
    for (uint64_t i = 0; i < pl->nitems; i++) {
        const struct st_wplan_item *it = &pl->items[i];
        if (is_synthetic(it->kind) && it->kind != ST_WL_MULTI_TURN &&
            (it->requested < p->input_len || it->requested > hi)) {
            return usage(err, errlen,
                         "%s: item %llu was made for %llu prompt tokens; this point asks for "
                         "%llu to %llu",
                         name, (unsigned long long)i, (unsigned long long)it->requested,
                         (unsigned long long)p->input_len, (unsigned long long)hi);
        }
        if (p->kind != ST_WL_DATASET) {
            int rc = check_parts(pl, c, it->part0, it->nparts, it->kind == ST_WL_MULTI_TURN, name,
                                 "item", i, err, errlen);
            if (rc) {
                return rc;
            }
        }
    }
    for (uint32_t g = 0; g < pl->ngroups; g++) {
        int rc = check_parts(pl, c, pl->groups[g].part0, pl->groups[g].nparts, 0, name, "group", g,
                             err, errlen);
        if (rc) {
            return rc;
        }
    }
    return 0;
}

/* Dataset items of a map name conversations by index: their prompts come from the file. */
static int map_dataset(struct st_wplan *pl, const struct st_dataset *ds, const char *name,
                       char *err, size_t errlen)
{
    uint64_t *at = st_xmalloc((size_t)(ds->elems ? ds->elems : 1) * sizeof(*at));
    int rc = 0;
    for (uint64_t i = 0; i < ds->elems; i++) {
        at[i] = UINT64_MAX;
    }
    for (uint64_t i = 0; i < ds->n; i++) {
        at[ds->convos[i].index] = i;
    }
    for (uint64_t i = 0; i < pl->nitems; i++) {
        struct st_wplan_item *it = &pl->items[i];
        uint64_t src = (uint64_t)it->source;
        if (src >= ds->elems || at[src] == UINT64_MAX) {
            rc = usage(err, errlen,
                       "%s: item %llu names conversation %llu, which the dataset lacks or which "
                       "has no human and gpt turns",
                       name, (unsigned long long)i, (unsigned long long)src);
            break;
        }
        const struct st_convo *c = &ds->convos[at[src]];
        uint64_t off = st_wplan_pool_add(pl, ds->pool.data + c->prompt, (size_t)c->prompt_len);
        it->part0 = st_wplan_add_part(pl, ST_PART_TEXT, off, c->prompt_len, 0);
        it->nparts = 1;
    }
    free(at);
    return rc;
}

/* Counts of message texts already seen, by content hash (turns resend their history). */
struct count_cache {
    uint64_t *keys;
    uint64_t *vals;
    uint64_t cap, n;
};

static int cache_get(const struct count_cache *cc, uint64_t key, uint64_t *val)
{
    if (cc->cap == 0) {
        return 0;
    }
    for (uint64_t i = key & (cc->cap - 1);; i = (i + 1) & (cc->cap - 1)) {
        if (cc->keys[i] == 0) {
            return 0;
        }
        if (cc->keys[i] == key) {
            *val = cc->vals[i];
            return 1;
        }
    }
}

static void cache_put(struct count_cache *cc, uint64_t key, uint64_t val)
{
    if (2 * (cc->n + 1) > cc->cap) {
        struct count_cache old = *cc;
        cc->cap = old.cap ? old.cap * 2 : 64;
        cc->keys = st_xcalloc((size_t)cc->cap, sizeof(*cc->keys));
        cc->vals = st_xcalloc((size_t)cc->cap, sizeof(*cc->vals));
        cc->n = 0;
        for (uint64_t i = 0; i < old.cap; i++) {
            if (old.keys[i]) {
                cache_put(cc, old.keys[i], old.vals[i]);
            }
        }
        free(old.keys);
        free(old.vals);
    }
    uint64_t i = key & (cc->cap - 1);
    while (cc->keys[i] != 0) {
        i = (i + 1) & (cc->cap - 1);
    }
    cc->keys[i] = key;
    cc->vals[i] = val;
    cc->n++;
}

/* Multi-turn item from a map: template once, plus each message's content tokens. */
static int count_messages(struct st_fitter *f, const struct st_wplan *pl, const char *text,
                          const struct st_wplan_item *it, struct count_cache *cc, uint64_t *counted)
{
    uint64_t total = f->overhead;
    uint64_t end = it->part0 + it->nparts;
    for (uint64_t i = it->part0; i < end;) {
        uint64_t j = i + 1;
        while (j < end && pl->parts[j].type != ST_PART_USER &&
               pl->parts[j].type != ST_PART_ASSISTANT) {
            j++;
        }
        st_buf_clear(&f->tmp);
        st_wplan_put_text(pl, text, 0, i + 1, j - i - 1, &f->tmp);
        uint64_t key = st_hash64(f->tmp.data ? f->tmp.data : "", f->tmp.len) | 1, c;
        if (!cache_get(cc, key, &c)) {
            int rc = st_fitter_count(f, f->tmp.data ? f->tmp.data : "", f->tmp.len, &c);
            if (rc) {
                return rc;
            }
            cache_put(cc, key, c);
        }
        total += c > f->overhead ? c - f->overhead : 0;
        i = j;
    }
    *counted = total;
    return 0;
}

/* Counts every item and group of a plan read from a map. */
static int count_plan(struct st_fitter *f, struct st_wplan *pl, const char *text)
{
    struct count_cache cc;
    struct st_buf b;
    int rc = 0;
    memset(&cc, 0, sizeof(cc));
    st_buf_init(&b);
    if (pl->kind == ST_WL_MULTI_TURN || pl->kind == ST_WL_MIXED) {
        rc = st_fitter_count(f, "", 0, &f->overhead);
    }
    for (uint32_t g = 0; g < pl->ngroups && rc == 0; g++) {
        st_buf_clear(&b);
        st_wplan_put_text(pl, text, 0, pl->groups[g].part0, pl->groups[g].nparts, &b);
        rc = st_fitter_count(f, b.data ? b.data : "", b.len, &pl->groups[g].counted);
    }
    for (uint64_t i = 0; i < pl->nitems && rc == 0; i++) {
        struct st_wplan_item *it = &pl->items[i];
        if (it->kind == ST_WL_MULTI_TURN) {
            rc = count_messages(f, pl, text, it, &cc, &it->counted);
            continue;
        }
        st_buf_clear(&b);
        st_wplan_put_text(pl, text, 0, it->part0, it->nparts, &b);
        rc = st_fitter_count(f, b.data ? b.data : "", b.len, &it->counted);
    }
    free(cc.keys);
    free(cc.vals);
    st_buf_release(&b);
    return rc;
}

static int from_map(struct st_workload *wl, const struct st_wl_params *p, const struct st_corpus *c,
                    const struct st_dataset *ds, const char *windows, size_t windows_len,
                    struct st_fitter *f, char *err, size_t errlen)
{
    struct st_wplan *pl = &wl->plan;
    int rc = st_wplan_windows_parse(pl, windows, windows_len, map_name(p), err, errlen);
    if (rc) {
        return rc;
    }
    rc = check_map(pl, p, c, err, errlen);
    if (rc) {
        return rc;
    }
    if (p->kind == ST_WL_DATASET) {
        rc = map_dataset(pl, ds, map_name(p), err, errlen);
        if (rc) {
            return rc;
        }
    }
    return count_plan(f, pl, c ? c->text : NULL);
}

/* ---- the checks every build ends with ---- */

static void set_outputs(struct st_workload *wl, const struct st_wl_params *p)
{
    struct st_wplan *pl = &wl->plan;
    struct st_wl_spec *s = st_wl_draw(p, pl->nitems);
    int from_file = p->kind == ST_WL_TRACE || p->kind == ST_WL_DATASET;
    for (uint64_t i = 0; i < pl->nitems; i++) {
        if (!from_file || p->output_len > 0) {
            pl->items[i].max_tokens = s[i].out;
        }
    }
    free(s);
}

static int check_items(struct st_workload *wl, const struct st_wl_params *p, char *err,
                       size_t errlen)
{
    const struct st_wplan *pl = &wl->plan;
    uint64_t bad = 0, first = 0;
    wl->max_err = 0;
    for (uint64_t i = 0; i < pl->nitems; i++) {
        const struct st_wplan_item *it = &pl->items[i];
        uint64_t out = it->max_tokens > 0 ? (uint64_t)it->max_tokens : 0;
        if (p->context_tokens && it->counted + out > p->context_tokens) {
            return usage(err, errlen,
                         "request %llu: %llu prompt and %llu output tokens exceed the context "
                         "of %llu tokens",
                         (unsigned long long)i, (unsigned long long)it->counted,
                         (unsigned long long)out, (unsigned long long)p->context_tokens);
        }
        uint64_t d =
            it->counted > it->requested ? it->counted - it->requested : it->requested - it->counted;
        double e = (double)d / (double)(it->requested ? it->requested : 1);
        if (e > wl->max_err) {
            wl->max_err = e;
        }
        if (e > p->len_tolerance) {
            first = bad++ ? first : i;
        }
    }
    if (bad) {
        const struct st_wplan_item *it = &pl->items[first];
        if (err && errlen) {
            snprintf(err, errlen,
                     "%llu of %llu prompts are off their length by more than %.2f%%; the first, "
                     "request %llu (%s), asked for %llu tokens and counts %llu (the tokenizer "
                     "cannot hit the length, or a window map made for another tokenizer)",
                     (unsigned long long)bad, (unsigned long long)pl->nitems,
                     100 * p->len_tolerance, (unsigned long long)first, st_wl_kind_name(it->kind),
                     (unsigned long long)it->requested, (unsigned long long)it->counted);
        }
        return -ERANGE;
    }
    return 0;
}

static void finish(struct st_workload *wl, const struct st_corpus *c)
{
    const struct st_wplan *pl = &wl->plan;
    /* Only the span the windows use is kept: a point's windows lie together (one run from the
     * layout's base, and its wrap), so a large user corpus is not held twice. */
    uint64_t lo = UINT64_MAX, hi = 0;
    for (uint64_t i = 0; i < pl->nparts; i++) {
        const struct st_part *p = &pl->parts[i];
        if (p->type == ST_PART_WIN) {
            lo = p->off < lo ? p->off : lo;
            hi = p->off + p->len > hi ? p->off + p->len : hi;
        }
    }
    if (c && c->text && lo < hi) {
        wl->text_base = lo;
        wl->text_len = hi - lo;
        wl->text = st_xmalloc((size_t)wl->text_len + 1);
        memcpy(wl->text, c->text + lo, (size_t)wl->text_len);
        wl->text[wl->text_len] = '\0';
    }
    st_hash_hex(pl->corpus_hash, wl->corpus_hex);
    if (pl->kind == ST_WL_TRACE && pl->nitems > 0) {
        uint64_t last = pl->items[pl->nitems - 1].t_offset_ns;
        last = last == UINT64_MAX ? 0 : last;
        uint64_t gap = pl->nitems > 1 ? last / (pl->nitems - 1) : 1000000000ull;
        wl->trace_period_ns = last + (gap ? gap : 1000000ull);
    }
}

/* ---- build ---- */

static int fresh(struct st_workload *wl, const struct st_wl_params *p, const struct st_corpus *c,
                 const struct st_trace *t, const struct st_dataset *ds, struct st_builder *b)
{
    if (p->kind == ST_WL_TRACE) {
        uint64_t n = p->requests && p->requests < t->n ? p->requests : t->n;
        return st_wl_fit_trace(b, t, n);
    }
    if (p->kind == ST_WL_DATASET) {
        uint64_t n = p->requests && p->requests < ds->n ? p->requests : ds->n;
        return st_wl_fit_dataset(b, ds, n);
    }
    (void)wl;
    (void)c;
    struct st_wl_spec *s = st_wl_draw(p, p->requests);
    int rc = st_wl_fit_synthetic(b, s, p->requests);
    free(s);
    return rc;
}

static int read_inputs(const struct st_wl_params *p, struct st_trace *t, struct st_dataset *ds,
                       char *err, size_t errlen)
{
    const char *name = p->data_name ? p->data_name : st_wl_kind_name(p->kind);
    if (p->kind == ST_WL_TRACE) {
        return st_trace_parse(t, name, p->data, p->data_len, err, errlen);
    }
    if (p->kind == ST_WL_DATASET) {
        int rc = st_dataset_parse(ds, name, p->data, p->data_len, err, errlen);
        if (rc == 0 && ds->n == 0) {
            rc = usage(err, errlen, "%s: no conversation with a human turn followed by a gpt turn",
                       name);
        }
        return rc;
    }
    return 0;
}

int st_workload_build(struct st_workload **out, const struct st_wl_params *p,
                      const struct st_corpus *corpus, const char *windows, size_t windows_len,
                      st_tok_counter_fn count, void *count_ctx, char *err, size_t errlen)
{
    struct st_trace t;
    struct st_dataset ds;
    struct st_builder b;
    *out = NULL;
    if (err && errlen) {
        err[0] = '\0';
    }
    memset(&t, 0, sizeof(t));
    memset(&ds, 0, sizeof(ds));
    st_buf_init(&ds.pool);
    int rc = validate(p, err, errlen);
    if (rc) {
        return rc;
    }
    if (!count) {
        return usage(err, errlen, "a workload needs a token counter");
    }
    if (p->kind != ST_WL_DATASET && (!corpus || !corpus->text)) {
        return usage(err, errlen, "a %s workload needs a corpus", st_wl_kind_name(p->kind));
    }
    struct st_workload *wl = st_xcalloc(1, sizeof(*wl));
    st_wplan_init(&wl->plan);
    wl->ignore_eos = p->ignore_eos != 0;
    memset(&b, 0, sizeof(b));
    b.p = p;
    b.text = corpus ? corpus->text : "";
    b.len = corpus ? corpus->len : 0;
    b.corpus_id = corpus ? corpus->id : "";
    b.pl = &wl->plan;
    b.err = err;
    b.errlen = errlen;
    st_buf_init(&b.head);
    st_fitter_init(&b.f, count, count_ctx, b.text, b.len, err, errlen);
    rc = read_inputs(p, &t, &ds, err, errlen);
    if (rc) {
        goto out;
    }
    if (windows) {
        rc = from_map(wl, p, corpus, &ds, windows, windows_len, &b.f, err, errlen);
    } else {
        struct st_wplan *pl = &wl->plan;
        pl->kind = p->kind;
        pl->chat = p->chat != 0;
        if (corpus) {
            snprintf(pl->corpus_id, sizeof(pl->corpus_id), "%s", corpus->id);
            pl->corpus_hash = corpus->hash;
            pl->corpus_len = corpus->len;
        }
        if (p->kind == ST_WL_TRACE || p->kind == ST_WL_DATASET) {
            pl->has_data = 1;
            pl->data_hash = st_hash64(p->data, p->data_len);
        }
        rc = fresh(wl, p, corpus, &t, &ds, &b);
    }
    if (rc) {
        goto out;
    }
    set_outputs(wl, p);
    rc = check_items(wl, p, err, errlen);
    if (rc) {
        goto out;
    }
    finish(wl, corpus);
    wl->calls = b.f.calls;
out:
    st_fitter_release(&b.f);
    st_buf_release(&b.head);
    st_trace_release(&t);
    st_dataset_release(&ds);
    if (rc) {
        st_workload_free(wl);
        return rc;
    }
    *out = wl;
    return 0;
}

void st_workload_free(struct st_workload *wl)
{
    if (!wl) {
        return;
    }
    st_wplan_release(&wl->plan);
    free(wl->text);
    free(wl);
}

int st_workload_windows_corpus(const char *windows, size_t len, const char *name, char *id,
                               size_t idlen, uint64_t *bytes, uint64_t *hash, char *err,
                               size_t errlen)
{
    struct st_wplan pl;
    st_wplan_init(&pl);
    int rc = st_wplan_windows_parse(&pl, windows, len, name, err, errlen);
    if (rc == 0) {
        if (idlen) {
            snprintf(id, idlen, "%s", pl.corpus_id);
        }
        *bytes = pl.corpus_len;
        *hash = pl.corpus_hash;
    }
    st_wplan_release(&pl);
    return rc;
}
