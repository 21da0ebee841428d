/*
 * The workload kinds: seeded draws, the window layout and the fitting of every prompt. See
 * build.h and docs/workloads.md.
 *
 * Layout: windows are laid out one after another from a seeded base offset, each starting at a
 * word, and wrap once to the corpus start, never reaching base again; so no two windows overlap
 * and a corpus too small says so instead of reusing text. The order of fitting is the order of
 * the items (shared prefixes first), so the same seed and the same counter give the same bytes.
 */
#include "workload/build.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"

/* Stream keys: each quantity its own generator, so adding one draw never shifts another. */
#define KEY_KIND 0x6b696e64ull
#define KEY_IN 0x696e707574ull
#define KEY_OUT 0x6f7574707574ull
#define KEY_GROUP 0x67726f7570ull
#define KEY_WINDOWS 0x77696e646f77ull
#define KEY_NEEDLES 0x6e6565646c65ull
#define KEY_DATASET 0x64617461ull

static struct st_rng stream(uint64_t seed, uint64_t key)
{
    struct st_rng r;
    st_rng_seed(&r, seed ^ (key * 0x9e3779b97f4a7c15ull));
    return r;
}

static uint64_t draw_len(struct st_rng *r, uint64_t lo, uint64_t hi)
{
    uint64_t v = st_rng_below(r, hi > lo ? hi - lo + 1 : 1);
    return lo + v;
}

uint64_t st_wl_prefix_tokens(const struct st_wl_params *p)
{
    return (uint64_t)llround(p->prefix_frac * (double)p->input_len);
}

/* Cumulative Zipf(s) over ranks 1..g. */
static double *zipf_cdf(uint32_t g, double s)
{
    double *cdf = st_xmalloc((size_t)g * sizeof(*cdf));
    double sum = 0;
    for (uint32_t k = 0; k < g; k++) {
        sum += pow((double)(k + 1), -s);
        cdf[k] = sum;
    }
    for (uint32_t k = 0; k < g; k++) {
        cdf[k] /= sum;
    }
    return cdf;
}

static uint32_t zipf_draw(const double *cdf, uint32_t g, struct st_rng *r)
{
    double u = st_rng_unit(r);
    uint32_t lo = 0, hi = g - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (cdf[mid] > u) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return lo;
}

static enum st_wl_kind draw_kind(const struct st_wl_params *p, struct st_rng *r)
{
    double sum = 0;
    for (uint32_t i = 0; i < p->n_mix; i++) {
        sum += p->mix_weight[i];
    }
    double u = st_rng_unit(r) * sum;
    for (uint32_t i = 0; i < p->n_mix; i++) {
        if (u < p->mix_weight[i]) {
            return p->mix_kind[i];
        }
        u -= p->mix_weight[i];
    }
    for (uint32_t i = p->n_mix; i-- > 0;) {
        if (p->mix_weight[i] > 0) {
            return p->mix_kind[i];
        }
    }
    return p->mix_kind[0];
}

struct st_wl_spec *st_wl_draw(const struct st_wl_params *p, uint64_t n)
{
    struct st_wl_spec *s = st_xcalloc(n ? (size_t)n : 1, sizeof(*s));
    struct st_rng rk = stream(p->seed, KEY_KIND), ri = stream(p->seed, KEY_IN);
    struct st_rng ro = stream(p->seed, KEY_OUT), rg = stream(p->seed, KEY_GROUP);
    uint32_t groups = p->groups ? p->groups : 1;
    double *cdf = p->zipf_s > 0 ? zipf_cdf(groups, p->zipf_s) : NULL;
    uint64_t turns = p->turns ? p->turns : 1, multi = 0;
    for (uint64_t i = 0; i < n; i++) {
        s[i].kind = p->kind == ST_WL_MIXED ? draw_kind(p, &rk) : p->kind;
        s[i].in = draw_len(&ri, p->input_len, p->input_len_max);
        s[i].out =
            p->output_len > 0 ? (int64_t)draw_len(&ro, p->output_len, p->output_len_max) : -1;
        uint32_t g = cdf ? zipf_draw(cdf, groups, &rg) : (uint32_t)st_rng_below(&rg, groups);
        s[i].group = s[i].kind == ST_WL_SHARED_PREFIX ? g : ST_PLAN_NONE;
        if (s[i].kind == ST_WL_MULTI_TURN) {
            s[i].session = (uint32_t)(multi / turns);
            s[i].turn = (uint32_t)(multi % turns + 1);
            multi++;
        }
    }
    free(cdf);
    return s;
}

uint64_t st_wl_estimate_tokens(const struct st_wl_params *p, const struct st_wl_spec *s, uint64_t n,
                               uint64_t overhead)
{
    uint64_t total = 0, prefix = st_wl_prefix_tokens(p);
    int shared = 0;
    for (uint64_t i = 0; i < n; i++) {
        switch (s[i].kind) {
        case ST_WL_SHARED_PREFIX:
            shared = 1;
            total += s[i].in > prefix ? s[i].in - prefix : 1;
            break;
        case ST_WL_MULTI_TURN:
            total += s[i].in + (s[i].out > 0 ? (uint64_t)s[i].out : 0);
            break;
        default:
            total += s[i].in > overhead ? s[i].in - overhead : 1;
            break;
        }
    }
    if (shared && prefix > overhead) {
        total += (uint64_t)(p->groups ? p->groups : 1) * (prefix - overhead);
    }
    return total;
}

/* ---- layout ---- */

static int is_space(char c)
{
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

static int is_cont(char c)
{
    return ((unsigned char)c & 0xC0) == 0x80;
}

/* The first word start at or after off (within 256 bytes), else the next code point boundary. */
static uint64_t snap_word(const char *t, uint64_t len, uint64_t off)
{
    if (off == 0 || off >= len) {
        return off >= len ? len : 0;
    }
    uint64_t end = len - off > 256 ? off + 256 : len;
    for (uint64_t i = off; i < end; i++) {
        if (is_space(t[i - 1]) && !is_space(t[i]) && !is_cont(t[i])) {
            return i;
        }
    }
    while (off < len && is_cont(t[off])) {
        off++;
    }
    return off;
}

/* A needle sentence goes after the sentence end at or after pos (or at a word start). */
static uint64_t snap_sentence(const char *t, uint64_t lo, uint64_t end, uint64_t pos)
{
    uint64_t stop = end - pos > 600 ? pos + 600 : end;
    for (uint64_t i = pos; i < stop; i++) {
        if (i >= lo + 2 && is_space(t[i - 1]) && strchr(".?!\"", t[i - 2]) && !is_space(t[i])) {
            return i;
        }
    }
    uint64_t w = snap_word(t, end, pos);
    return w <= end ? w : end;
}

struct needle_txt {
    const char *text; /* the sentence, in the builder's own storage */
    size_t len;
    const char *word; /* the code word, inside text */
    size_t word_len;
    double depth;
};

/* What is counted for a window: head, the window with needles at their depths, tail. */
struct asm_ctx {
    const struct st_builder *b;
    const char *head;
    size_t head_len;
    uint64_t off;
    uint32_t nneedles;
    const struct needle_txt *needles;
    const char *tail;
    size_t tail_len;
    uint64_t splits[ST_WL_MAX_NEEDLES]; /* absolute corpus offsets, after compute_splits */
};

static void compute_splits(struct asm_ctx *a, uint64_t win_bytes)
{
    uint64_t prev = a->off, end = a->off + win_bytes;
    for (uint32_t i = 0; i < a->nneedles; i++) {
        uint64_t pos = a->off + (uint64_t)floor(a->needles[i].depth * (double)win_bytes);
        if (pos < prev) {
            pos = prev;
        }
        pos = pos >= end ? end : snap_sentence(a->b->text, a->off, end, pos);
        a->splits[i] = pos;
        prev = pos;
    }
}

static void assemble(void *ctx, uint64_t win_bytes, struct st_buf *out)
{
    struct asm_ctx *a = ctx;
    const char *t = a->b->text;
    st_buf_append(out, a->head, a->head_len);
    compute_splits(a, win_bytes);
    uint64_t prev = a->off;
    for (uint32_t i = 0; i < a->nneedles; i++) {
        st_buf_append(out, t + prev, (size_t)(a->splits[i] - prev));
        st_buf_append(out, a->needles[i].text, a->needles[i].len);
        prev = a->splits[i];
    }
    st_buf_append(out, t + prev, (size_t)(a->off + win_bytes - prev));
    st_buf_append(out, a->tail, a->tail_len);
}

static void asm_init(struct asm_ctx *a, const struct st_builder *b)
{
    memset(a, 0, sizeof(*a));
    a->b = b;
    a->head = "";
    a->tail = "";
}

static void fit_init(struct st_fit *q, struct asm_ctx *a, uint64_t target, uint64_t fixed)
{
    memset(q, 0, sizeof(*q));
    q->target = target;
    q->fixed_tokens = fixed;
    q->min_cp = 1;
    q->assemble = assemble;
    q->actx = a;
}

static int too_small(struct st_builder *b)
{
    if (b->err && b->errlen) {
        snprintf(b->err, b->errlen,
                 "corpus %s (%llu bytes) is too small for the windows asked for: it ran out after "
                 "%llu windows; this workload needs about %llu bytes (a larger corpus, fewer or "
                 "shorter requests)",
                 b->corpus_id, (unsigned long long)b->len, (unsigned long long)b->windows,
                 (unsigned long long)b->est_bytes);
    }
    return ST_EUSAGE;
}

/* Fits a fresh window of the layout: the next one after the last, wrapping once. */
static int lay_window(struct st_builder *b, struct st_fit *q, struct asm_ctx *a)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        uint64_t limit = b->wrapped ? b->base : b->len;
        uint64_t off = snap_word(b->text, b->len, b->next);
        if (off < limit) {
            a->off = off;
            q->off = off;
            q->limit = limit;
            int rc = st_fit_window(&b->f, q);
            if (rc != ST_ETOOBIG) {
                if (rc == 0) {
                    b->next = off + q->win_bytes;
                    b->windows++;
                }
                return rc;
            }
        }
        if (b->wrapped) {
            break;
        }
        b->wrapped = 1;
        b->next = 0;
    }
    return too_small(b);
}

static void add_window_parts(struct st_builder *b, const struct asm_ctx *a, uint64_t win_bytes)
{
    uint64_t prev = a->off;
    for (uint32_t i = 0; i < a->nneedles; i++) {
        if (a->splits[i] > prev) {
            st_plan_add_part(b->pl, ST_PART_WIN, prev, a->splits[i] - prev, 0);
        }
        prev = a->splits[i];
        uint32_t ni = st_plan_add_needle(b->pl, a->needles[i].word, a->needles[i].word_len,
                                         a->needles[i].depth);
        uint64_t off = st_plan_pool_add(b->pl, a->needles[i].text, a->needles[i].len);
        st_plan_add_part(b->pl, ST_PART_NEEDLE, off, a->needles[i].len, ni);
    }
    if (a->off + win_bytes > prev) {
        st_plan_add_part(b->pl, ST_PART_WIN, prev, a->off + win_bytes - prev, 0);
    }
    if (a->tail_len) {
        uint64_t off = st_plan_pool_add(b->pl, a->tail, a->tail_len);
        st_plan_add_part(b->pl, ST_PART_TEXT, off, a->tail_len, 0);
    }
}

/* Closes item it: its parts are those added since it was created. */
static void close_item(struct st_builder *b, uint64_t idx, uint64_t requested, uint64_t counted)
{
    struct st_plan_item *it = &b->pl->items[idx];
    it->nparts = (uint32_t)(b->pl->nparts - it->part0);
    it->requested = requested;
    it->counted = counted;
}

/* ---- kinds ---- */

static int fit_plain(struct st_builder *b, const struct st_wl_spec *s)
{
    struct asm_ctx a;
    struct st_fit q;
    asm_init(&a, b);
    fit_init(&q, &a, s->in, b->f.overhead);
    int rc = lay_window(b, &q, &a);
    if (rc) {
        return rc;
    }
    st_plan_add_item(b->pl, s->kind);
    add_window_parts(b, &a, q.win_bytes);
    close_item(b, b->pl->nitems - 1, s->in, q.counted);
    return 0;
}

static const char *const needle_colours[] = {
    "amber",  "cobalt", "crimson", "indigo",  "jade",  "saffron", "scarlet", "teal",
    "violet", "ochre",  "ivory",   "magenta", "umber", "cerise",  "azure",   "sepia",
};
static const char *const needle_animals[] = {
    "falcon", "otter",  "lynx", "heron",   "badger", "walrus", "panther", "gecko",
    "marmot", "condor", "ibex", "narwhal", "jackal", "puffin", "tapir",   "bison",
};

static int fit_long(struct st_builder *b, const struct st_wl_spec *s, struct st_rng *rn)
{
    struct needle_txt nd[ST_WL_MAX_NEEDLES];
    char texts[ST_WL_MAX_NEEDLES][96];
    char tail[256];
    struct asm_ctx a;
    struct st_fit q;
    uint32_t n = b->p->needles;
    size_t extra = 0;
    asm_init(&a, b);
    for (uint32_t i = 0; i < n; i++) {
        const char *c = needle_colours[st_rng_below(rn, 16)];
        const char *an = needle_animals[st_rng_below(rn, 16)];
        unsigned num = (unsigned)(1000 + st_rng_below(rn, 9000));
        static const char lead[] = "The secret code word is ";
        int len = snprintf(texts[i], sizeof(texts[i]), "%s%s-%s-%u. ", lead, c, an, num);
        nd[i].text = texts[i];
        nd[i].len = (size_t)len;
        nd[i].word = texts[i] + sizeof(lead) - 1;
        nd[i].word_len = nd[i].len - (sizeof(lead) - 1) - 2;
        nd[i].depth = (double)(i + 1) / (double)(n + 1);
        extra += nd[i].len;
    }
    if (n > 0) {
        int len = snprintf(tail, sizeof(tail),
                           "\n\nQuestion: the text above contains %u secret code word%s. Write "
                           "%s in the order %s appear%s, separated by spaces, and nothing else.",
                           n, n > 1 ? "s" : "", n > 1 ? "them" : "it", n > 1 ? "they" : "it",
                           n > 1 ? "" : "s");
        a.tail = tail;
        a.tail_len = (size_t)len;
        extra += a.tail_len;
    }
    a.nneedles = n;
    a.needles = nd;
    uint64_t fixed = b->f.overhead + (uint64_t)((double)extra / b->f.bytes_per_token);
    fit_init(&q, &a, s->in, fixed);
    int rc = lay_window(b, &q, &a);
    if (rc) {
        return rc;
    }
    compute_splits(&a, q.win_bytes);
    st_plan_add_item(b->pl, s->kind);
    add_window_parts(b, &a, q.win_bytes);
    close_item(b, b->pl->nitems - 1, s->in, q.counted);
    return 0;
}

/* Fits every group's prefix window (prefix tokens, template included). */
static int fit_groups(struct st_builder *b, uint64_t prefix)
{
    uint32_t groups = b->p->groups ? b->p->groups : 1;
    for (uint32_t g = 0; g < groups; g++) {
        struct asm_ctx a;
        struct st_fit q;
        asm_init(&a, b);
        fit_init(&q, &a, prefix, b->f.overhead);
        int rc = lay_window(b, &q, &a);
        if (rc) {
            return rc;
        }
        uint64_t part0 = st_plan_add_part(b->pl, ST_PART_WIN, a.off, q.win_bytes, 0);
        uint32_t gi = st_plan_add_group(b->pl, part0, 1);
        b->pl->groups[gi].counted = q.counted;
    }
    return 0;
}

static void put_parts(const struct st_builder *b, uint64_t part0, uint64_t n, struct st_buf *out)
{
    st_plan_put_text(b->pl, b->text, part0, n, out);
}

static int fit_shared(struct st_builder *b, const struct st_wl_spec *s, uint32_t group0)
{
    struct asm_ctx a;
    struct st_fit q;
    asm_init(&a, b);
    uint64_t fixed = b->f.overhead;
    uint32_t g = ST_PLAN_NONE;
    st_buf_clear(&b->head);
    if (s->group != ST_PLAN_NONE && b->pl->ngroups > group0) {
        g = group0 + s->group;
        const struct st_plan_group *pg = &b->pl->groups[g];
        put_parts(b, pg->part0, pg->nparts, &b->head);
        fixed = pg->counted;
    }
    a.head = b->head.data ? b->head.data : "";
    a.head_len = b->head.len;
    fit_init(&q, &a, s->in, fixed);
    int rc = lay_window(b, &q, &a);
    if (rc) {
        return rc;
    }
    struct st_plan_item *it = st_plan_add_item(b->pl, s->kind);
    it->group = g;
    if (g != ST_PLAN_NONE) {
        const struct st_plan_group pg = b->pl->groups[g];
        for (uint32_t k = 0; k < pg.nparts; k++) {
            struct st_part pt = b->pl->parts[pg.part0 + k];
            st_plan_add_part(b->pl, pt.type, pt.off, pt.len, pt.aux);
        }
    }
    add_window_parts(b, &a, q.win_bytes);
    close_item(b, b->pl->nitems - 1, s->in, q.counted);
    return 0;
}

/* A multi-turn session's history so far: its parts (message starts and windows). */
struct session {
    struct st_part *parts;
    uint64_t n, cap;
    uint64_t requested; /* template + contents asked for */
    uint64_t counted;   /* template + contents counted */
    int64_t prev_out;
};

static void session_add(struct session *ss, uint32_t type, uint64_t off, uint64_t len)
{
    if (ss->n == ss->cap) {
        ss->cap = ss->cap ? ss->cap * 2 : 16;
        ss->parts = st_xrealloc(ss->parts, (size_t)ss->cap * sizeof(*ss->parts));
    }
    ss->parts[ss->n].type = type;
    ss->parts[ss->n].off = off;
    ss->parts[ss->n].len = len;
    ss->parts[ss->n].aux = 0;
    ss->n++;
}

/* Fits one message's content to tokens (the counter's template overhead taken off). */
static int fit_message(struct st_builder *b, struct session *ss, uint32_t role, uint64_t tokens)
{
    struct asm_ctx a;
    struct st_fit q;
    asm_init(&a, b);
    fit_init(&q, &a, tokens + b->f.overhead, b->f.overhead);
    int rc = lay_window(b, &q, &a);
    if (rc) {
        return rc;
    }
    session_add(ss, role, 0, 0);
    session_add(ss, ST_PART_WIN, a.off, q.win_bytes);
    ss->requested += tokens;
    ss->counted += q.counted > b->f.overhead ? q.counted - b->f.overhead : 0;
    return 0;
}

static int fit_turn(struct st_builder *b, const struct st_wl_spec *s, struct session *ss)
{
    int rc;
    if (s->turn <= 1) {
        ss->n = 0;
        ss->requested = b->f.overhead;
        ss->counted = b->f.overhead;
    } else {
        rc = fit_message(b, ss, ST_PART_ASSISTANT, (uint64_t)(ss->prev_out > 0 ? ss->prev_out : 1));
        if (rc) {
            return rc;
        }
    }
    rc = fit_message(b, ss, ST_PART_USER, s->in);
    if (rc) {
        return rc;
    }
    ss->prev_out = s->out;
    struct st_plan_item *it = st_plan_add_item(b->pl, s->kind);
    it->session = s->session;
    it->turn = s->turn;
    for (uint64_t k = 0; k < ss->n; k++) {
        st_plan_add_part(b->pl, ss->parts[k].type, ss->parts[k].off, ss->parts[k].len, 0);
    }
    close_item(b, b->pl->nitems - 1, ss->requested, ss->counted);
    return 0;
}

/* Calibrates on a seeded sample, then places the layout's base so the windows fit before the
 * corpus end when they can. */
static int calibrate(struct st_builder *b, struct st_rng *rw)
{
    uint64_t sample = snap_word(b->text, b->len, st_rng_below(rw, b->len ? b->len : 1));
    return st_fitter_calibrate(&b->f, sample);
}

static void place_base(struct st_builder *b, struct st_rng *rw)
{
    uint64_t need = b->est_bytes + b->est_bytes / 16 + 4096;
    uint64_t room = need < b->len ? b->len - need : 0;
    b->base = snap_word(b->text, b->len, room ? st_rng_below(rw, room) : 0);
    b->next = b->base;
    b->wrapped = 0;
}

static int check_size(struct st_builder *b, uint64_t tokens, uint64_t n)
{
    b->est_bytes = (uint64_t)ceil((double)tokens * b->f.bytes_per_token);
    if (b->est_bytes > b->len) {
        if (b->err && b->errlen) {
            snprintf(b->err, b->errlen,
                     "corpus %s (%llu bytes) is too small for the windows asked for: %llu "
                     "requests need about %llu tokens of text, %llu bytes at %.2f bytes a token",
                     b->corpus_id, (unsigned long long)b->len, (unsigned long long)n,
                     (unsigned long long)tokens, (unsigned long long)b->est_bytes,
                     b->f.bytes_per_token);
        }
        return ST_EUSAGE;
    }
    return 0;
}

static int length_error(struct st_builder *b, uint64_t i, uint64_t in, const char *why,
                        uint64_t limit)
{
    if (b->err && b->errlen) {
        snprintf(b->err, b->errlen, "request %llu: an input length of %llu tokens %s (%llu tokens)",
                 (unsigned long long)i, (unsigned long long)in, why, (unsigned long long)limit);
    }
    return ST_EUSAGE;
}

static int check_lengths(struct st_builder *b, const struct st_wl_spec *s, uint64_t n)
{
    uint64_t overhead = b->f.overhead, prefix = st_wl_prefix_tokens(b->p);
    int frac = b->p->prefix_frac > 0;
    for (uint64_t i = 0; i < n; i++) {
        if (s[i].kind != ST_WL_MULTI_TURN && s[i].in <= overhead) {
            return length_error(b, i, s[i].in, "is not above the chat template's", overhead);
        }
        if (s[i].kind != ST_WL_SHARED_PREFIX || !frac) {
            continue;
        }
        if (prefix <= overhead) {
            return length_error(b, i, s[i].in,
                                "makes a shared prefix not above the chat template's", overhead);
        }
        if (s[i].in <= prefix) {
            return length_error(b, i, s[i].in, "leaves no suffix after the shared prefix", prefix);
        }
    }
    return 0;
}

int st_wl_fit_synthetic(struct st_builder *b, const struct st_wl_spec *s, uint64_t n)
{
    struct st_rng rw = stream(b->p->seed, KEY_WINDOWS);
    struct st_rng rn = stream(b->p->seed, KEY_NEEDLES);
    struct session ss;
    int rc = calibrate(b, &rw);
    if (rc) {
        return rc;
    }
    rc = check_lengths(b, s, n);
    if (rc) {
        return rc;
    }
    rc = check_size(b, st_wl_estimate_tokens(b->p, s, n, b->f.overhead), n);
    if (rc) {
        return rc;
    }
    place_base(b, &rw);
    uint32_t group0 = b->pl->ngroups;
    uint64_t prefix = st_wl_prefix_tokens(b->p);
    if (b->p->prefix_frac > 0) {
        for (uint64_t i = 0; i < n; i++) {
            if (s[i].kind == ST_WL_SHARED_PREFIX) {
                rc = fit_groups(b, prefix);
                if (rc) {
                    return rc;
                }
                break;
            }
        }
    }
    memset(&ss, 0, sizeof(ss));
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        switch (s[i].kind) {
        case ST_WL_SHARED_PREFIX:
            rc = fit_shared(b, &s[i], group0);
            break;
        case ST_WL_LONG:
            rc = fit_long(b, &s[i], &rn);
            break;
        case ST_WL_MULTI_TURN:
            rc = fit_turn(b, &s[i], &ss);
            break;
        default:
            rc = fit_plain(b, &s[i]);
            break;
        }
    }
    free(ss.parts);
    return rc;
}

/* ---- trace ---- */

struct block {
    uint64_t off;
    uint64_t bytes;
};

/* Groups of trace requests that share leading blocks: requests whose first block is the same
 * (and full) form a group when there are two or more; the group's prefix is the run of full
 * blocks they all share. */
static int trace_groups(struct st_builder *b, const struct st_trace *t, uint64_t n,
                        const uint32_t *block_of, const uint32_t *full, uint64_t item0,
                        uint64_t nblocks, const struct block *blk)
{
    uint32_t *first = st_xmalloc((size_t)(nblocks ? nblocks : 1) * sizeof(*first));
    uint32_t *members = st_xcalloc((size_t)(nblocks ? nblocks : 1), sizeof(*members));
    uint32_t *common = st_xcalloc((size_t)(nblocks ? nblocks : 1), sizeof(*common));
    uint32_t *gid = st_xmalloc((size_t)(nblocks ? nblocks : 1) * sizeof(*gid));
    int rc = 0;
    for (uint64_t k = 0; k < nblocks; k++) {
        gid[k] = ST_PLAN_NONE;
    }
    for (uint64_t i = 0; i < n; i++) {
        if (full[i] == 0) {
            continue;
        }
        const uint32_t *ids = block_of + t->reqs[i].id0;
        uint32_t f0 = ids[0];
        if (members[f0] == 0) {
            first[f0] = (uint32_t)i;
            common[f0] = full[i];
        } else {
            const uint32_t *ref = block_of + t->reqs[first[f0]].id0;
            uint32_t c = 0, lim = common[f0] < full[i] ? common[f0] : full[i];
            while (c < lim && ref[c] == ids[c]) {
                c++;
            }
            common[f0] = c;
        }
        members[f0]++;
    }
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        if (full[i] == 0) {
            continue;
        }
        uint32_t f0 = block_of[t->reqs[i].id0];
        if (members[f0] < 2) {
            continue;
        }
        if (gid[f0] == ST_PLAN_NONE) {
            const uint32_t *ids = block_of + t->reqs[first[f0]].id0;
            uint64_t part0 = b->pl->nparts;
            for (uint32_t k = 0; k < common[f0]; k++) {
                st_plan_add_part(b->pl, ST_PART_WIN, blk[ids[k]].off, blk[ids[k]].bytes, 0);
            }
            gid[f0] = st_plan_add_group(b->pl, part0, common[f0]);
            st_buf_clear(&b->head);
            put_parts(b, part0, common[f0], &b->head);
            rc = st_fitter_count(&b->f, b->head.data ? b->head.data : "", b->head.len,
                                 &b->pl->groups[gid[f0]].counted);
        }
        b->pl->items[item0 + i].group = gid[f0];
    }
    free(first);
    free(members);
    free(common);
    free(gid);
    return rc;
}

/* Fits the blocks, one window each of block_tokens tokens, in order of first appearance. */
static int trace_blocks(struct st_builder *b, uint64_t nblocks, struct block *blk)
{
    for (uint64_t k = 0; k < nblocks; k++) {
        struct asm_ctx a;
        struct st_fit q;
        asm_init(&a, b);
        fit_init(&q, &a, b->p->block_tokens + b->f.overhead, b->f.overhead);
        int rc = lay_window(b, &q, &a);
        if (rc) {
            return rc;
        }
        blk[k].off = a.off;
        blk[k].bytes = q.win_bytes;
    }
    return 0;
}

/* One trace request: its leading blocks whole, the last one cut to make the length, and a
 * fresh window after them when the blocks are too few. *full gets the blocks used whole. */
static int trace_item(struct st_builder *b, const struct st_trace *t, uint64_t i,
                      const uint32_t *block_of, const struct block *blk, uint32_t *full)
{
    const struct st_trace_req *r = &t->reqs[i];
    uint64_t bt = b->p->block_tokens, overhead = b->f.overhead;
    uint64_t content = r->input_len > overhead ? r->input_len - overhead : 1;
    uint64_t k = (content + bt - 1) / bt;
    if (k > r->nids) {
        k = r->nids;
    }
    const uint32_t *ids = block_of + r->id0;
    struct st_plan_item *it = st_plan_add_item(b->pl, ST_WL_TRACE);
    uint64_t idx = b->pl->nitems - 1;
    it->source = (int64_t)r->line;
    it->max_tokens = (int64_t)r->output_len;
    it->t_offset_ns = (uint64_t)llround((r->timestamp_ms - t->reqs[0].timestamp_ms) * 1e6);
    st_buf_clear(&b->head);
    for (uint64_t j = 0; j + 1 < k; j++) {
        const struct block *bl = &blk[ids[j]];
        st_plan_add_part(b->pl, ST_PART_WIN, bl->off, bl->bytes, 0);
        st_buf_append(&b->head, b->text + bl->off, (size_t)bl->bytes);
    }
    *full = k ? (uint32_t)(k - 1) : 0;
    struct asm_ctx a;
    struct st_fit q;
    int rc = ST_ETOOBIG;
    if (k > 0) {
        const struct block *bl = &blk[ids[k - 1]];
        asm_init(&a, b);
        a.head = b->head.data ? b->head.data : "";
        a.head_len = b->head.len;
        a.off = bl->off;
        fit_init(&q, &a, r->input_len, overhead + (k - 1) * bt);
        q.off = bl->off;
        q.limit = bl->off + bl->bytes;
        rc = st_fit_window(&b->f, &q);
        if (rc == 0) {
            st_plan_add_part(b->pl, ST_PART_WIN, bl->off, q.win_bytes, 0);
            if (q.win_bytes == bl->bytes) {
                (*full)++;
            }
        } else if (rc == ST_ETOOBIG) {
            st_plan_add_part(b->pl, ST_PART_WIN, bl->off, bl->bytes, 0);
            st_buf_append(&b->head, b->text + bl->off, (size_t)bl->bytes);
            (*full)++;
        }
    }
    if (rc == ST_ETOOBIG) {
        /* The ids cover fewer tokens than the request has: a fresh window for the rest. */
        asm_init(&a, b);
        a.head = b->head.data ? b->head.data : "";
        a.head_len = b->head.len;
        fit_init(&q, &a, r->input_len, overhead + k * bt);
        rc = lay_window(b, &q, &a);
        if (rc == 0) {
            st_plan_add_part(b->pl, ST_PART_WIN, a.off, q.win_bytes, 0);
        }
    }
    if (rc == 0) {
        close_item(b, idx, r->input_len, q.counted);
    }
    return rc;
}

int st_wl_fit_trace(struct st_builder *b, const struct st_trace *t, uint64_t n)
{
    struct st_rng rw = stream(b->p->seed, KEY_WINDOWS);
    uint32_t *block_of = st_xmalloc((size_t)(t->nids ? t->nids : 1) * sizeof(*block_of));
    uint32_t *full = st_xcalloc((size_t)(n ? n : 1), sizeof(*full));
    struct block *blk = NULL;
    uint64_t nblocks = st_trace_blocks(t, n, block_of);
    uint64_t item0 = b->pl->nitems;
    int rc = calibrate(b, &rw);
    if (rc) {
        goto out;
    }
    uint64_t tokens = nblocks * b->p->block_tokens;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t covered = (uint64_t)t->reqs[i].nids * b->p->block_tokens + b->f.overhead;
        tokens += t->reqs[i].input_len > covered ? t->reqs[i].input_len - covered : 0;
    }
    rc = check_size(b, tokens, n);
    if (rc) {
        goto out;
    }
    place_base(b, &rw);
    blk = st_xcalloc((size_t)(nblocks ? nblocks : 1), sizeof(*blk));
    rc = trace_blocks(b, nblocks, blk);
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        rc = trace_item(b, t, i, block_of, blk, &full[i]);
    }
    if (rc == 0) {
        rc = trace_groups(b, t, n, block_of, full, item0, nblocks, blk);
    }
out:
    free(blk);
    free(full);
    free(block_of);
    return rc;
}

/* ---- dataset ---- */

int st_wl_fit_dataset(struct st_builder *b, const struct st_dataset *ds, uint64_t n)
{
    struct st_rng rd = stream(b->p->seed, KEY_DATASET);
    uint64_t *order = st_xmalloc((size_t)(ds->n ? ds->n : 1) * sizeof(*order));
    int rc = 0;
    for (uint64_t i = 0; i < ds->n; i++) {
        order[i] = i;
    }
    for (uint64_t i = ds->n; i > 1; i--) {
        uint64_t j = st_rng_below(&rd, i);
        uint64_t tmp = order[i - 1];
        order[i - 1] = order[j];
        order[j] = tmp;
    }
    if (b->p->output_len == 0) {
        rc = st_fitter_count(&b->f, "", 0, &b->f.overhead);
    }
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        const struct st_convo *c = &ds->convos[order[i]];
        const char *pool = ds->pool.data;
        uint64_t counted, answer = 0;
        rc = st_fitter_count(&b->f, pool + c->prompt, (size_t)c->prompt_len, &counted);
        if (rc == 0 && b->p->output_len == 0) {
            rc = st_fitter_count(&b->f, pool + c->answer, (size_t)c->answer_len, &answer);
        }
        if (rc) {
            break;
        }
        struct st_plan_item *it = st_plan_add_item(b->pl, ST_WL_DATASET);
        it->source = (int64_t)c->index;
        answer = answer > b->f.overhead ? answer - b->f.overhead : 1;
        it->max_tokens = (int64_t)answer;
        uint64_t off = st_plan_pool_add(b->pl, pool + c->prompt, (size_t)c->prompt_len);
        st_plan_add_part(b->pl, ST_PART_TEXT, off, c->prompt_len, 0);
        close_item(b, b->pl->nitems - 1, counted, counted);
    }
    free(order);
    return rc;
}
