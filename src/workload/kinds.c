/*
 * The synthetic kinds: seeded draws of every item's kind, lengths, outputs and group, and the
 * fitting of fixed, distinct, long (with needles), shared-prefix and multi-turn prompts, alone or
 * mixed. See build.h and docs/workloads.md. The order of fitting is the order of the items
 * (shared prefixes first), so the same seed and the same counter give the same bytes.
 */
#include "workload/build.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"

static uint64_t draw_len(struct st_rng *r, uint64_t lo, uint64_t hi)
{
    uint64_t v = st_rng_below(r, hi > lo ? hi - lo + 1 : 1);
    return lo + v;
}

uint64_t st_wl_fitted_items(const struct st_wl_params *p)
{
    /* The synthetic kinds and their mix (fixed .. multi-turn, mixed); a file's kinds fit all. */
    if (p->kind >= ST_WL_FIXED && p->kind <= ST_WL_MIXED) {
        return p->fit_items > 0 && p->fit_items < p->requests ? p->fit_items : p->requests;
    }
    return p->requests;
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
    struct st_rng rk = st_wl_stream(p->seed, ST_WL_KEY_KIND),
                  ri = st_wl_stream(p->seed, ST_WL_KEY_IN);
    struct st_rng ro = st_wl_stream(p->seed, ST_WL_KEY_OUT),
                  rg = st_wl_stream(p->seed, ST_WL_KEY_GROUP);
    uint32_t groups = p->groups ? p->groups : 1;
    double *cdf = p->zipf_s > 0 ? zipf_cdf(groups, p->zipf_s) : NULL;
    uint64_t turns = p->turns ? p->turns : 1, multi = 0;
    for (uint64_t i = 0; i < n; i++) {
        s[i].kind = p->kind == ST_WL_MIXED ? draw_kind(p, &rk) : p->kind;
        s[i].in = draw_len(&ri, p->input_len, p->input_len_max);
        s[i].out =
            p->output_len > 0 ? (int64_t)draw_len(&ro, p->output_len, p->output_len_max) : -1;
        uint32_t g = cdf ? zipf_draw(cdf, groups, &rg) : (uint32_t)st_rng_below(&rg, groups);
        s[i].group = s[i].kind == ST_WL_SHARED_PREFIX ? g : ST_WPLAN_NONE;
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

/* ---- kinds ---- */

static int fit_plain(struct st_builder *b, const struct st_wl_spec *s)
{
    struct st_wl_asm a;
    struct st_fit q;
    st_wl_asm_init(&a, b);
    st_wl_fit_init(&q, &a, s->in, b->f.overhead);
    int rc = st_wl_lay_window(b, &q, &a);
    if (rc) {
        return rc;
    }
    st_wplan_add_item(b->pl, s->kind);
    st_wl_add_window_parts(b, &a, q.win_bytes);
    st_wl_close_item(b, b->pl->nitems - 1, s->in, q.counted);
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
    struct st_wl_needle_txt nd[ST_WL_MAX_NEEDLES];
    char texts[ST_WL_MAX_NEEDLES][96];
    char tail[256];
    struct st_wl_asm a;
    struct st_fit q;
    uint32_t n = b->p->needles;
    size_t extra = 0;
    st_wl_asm_init(&a, b);
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
    st_wl_fit_init(&q, &a, s->in, fixed);
    int rc = st_wl_lay_window(b, &q, &a);
    if (rc) {
        return rc;
    }
    st_wl_compute_splits(&a, q.win_bytes);
    st_wplan_add_item(b->pl, s->kind);
    st_wl_add_window_parts(b, &a, q.win_bytes);
    st_wl_close_item(b, b->pl->nitems - 1, s->in, q.counted);
    return 0;
}

/* Fits every group's prefix window (prefix tokens, template included). */
static int fit_groups(struct st_builder *b, uint64_t prefix)
{
    uint32_t groups = b->p->groups ? b->p->groups : 1;
    for (uint32_t g = 0; g < groups; g++) {
        struct st_wl_asm a;
        struct st_fit q;
        st_wl_asm_init(&a, b);
        st_wl_fit_init(&q, &a, prefix, b->f.overhead);
        int rc = st_wl_lay_window(b, &q, &a);
        if (rc) {
            return rc;
        }
        uint64_t part0 = st_wplan_add_part(b->pl, ST_PART_WIN, a.off, q.win_bytes, 0);
        uint32_t gi = st_wplan_add_group(b->pl, part0, 1);
        b->pl->groups[gi].counted = q.counted;
    }
    return 0;
}

static int fit_shared(struct st_builder *b, const struct st_wl_spec *s, uint32_t group0)
{
    struct st_wl_asm a;
    struct st_fit q;
    st_wl_asm_init(&a, b);
    uint64_t fixed = b->f.overhead;
    uint32_t g = ST_WPLAN_NONE;
    st_buf_clear(&b->head);
    if (s->group != ST_WPLAN_NONE && b->pl->ngroups > group0) {
        g = group0 + s->group;
        const struct st_wplan_group *pg = &b->pl->groups[g];
        st_wl_put_parts(b, pg->part0, pg->nparts, &b->head);
        fixed = pg->counted;
    }
    a.head = b->head.data ? b->head.data : "";
    a.head_len = b->head.len;
    st_wl_fit_init(&q, &a, s->in, fixed);
    int rc = st_wl_lay_window(b, &q, &a);
    if (rc) {
        return rc;
    }
    struct st_wplan_item *it = st_wplan_add_item(b->pl, s->kind);
    it->group = g;
    if (g != ST_WPLAN_NONE) {
        const struct st_wplan_group pg = b->pl->groups[g];
        for (uint32_t k = 0; k < pg.nparts; k++) {
            struct st_part pt = b->pl->parts[pg.part0 + k];
            st_wplan_add_part(b->pl, pt.type, pt.off, pt.len, pt.aux);
        }
    }
    st_wl_add_window_parts(b, &a, q.win_bytes);
    st_wl_close_item(b, b->pl->nitems - 1, s->in, q.counted);
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
    struct st_wl_asm a;
    struct st_fit q;
    st_wl_asm_init(&a, b);
    st_wl_fit_init(&q, &a, tokens + b->f.overhead, b->f.overhead);
    int rc = st_wl_lay_window(b, &q, &a);
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
    struct st_wplan_item *it = st_wplan_add_item(b->pl, s->kind);
    it->session = s->session;
    it->turn = s->turn;
    for (uint64_t k = 0; k < ss->n; k++) {
        st_wplan_add_part(b->pl, ss->parts[k].type, ss->parts[k].off, ss->parts[k].len, 0);
    }
    st_wl_close_item(b, b->pl->nitems - 1, ss->requested, ss->counted);
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
    struct st_rng rw = st_wl_stream(b->p->seed, ST_WL_KEY_WINDOWS);
    struct st_rng rn = st_wl_stream(b->p->seed, ST_WL_KEY_NEEDLES);
    struct session ss;
    int rc = st_wl_calibrate(b, &rw);
    if (rc) {
        return rc;
    }
    rc = check_lengths(b, s, n);
    if (rc) {
        return rc;
    }
    rc = st_wl_check_size(b, st_wl_estimate_tokens(b->p, s, n, b->f.overhead), n);
    if (rc) {
        return rc;
    }
    st_wl_place_base(b, &rw);
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
    /* Everything above used all n items, so the first nfit come out as in the full build. */
    uint64_t nfit = st_wl_fitted_items(b->p) < n ? st_wl_fitted_items(b->p) : n;
    memset(&ss, 0, sizeof(ss));
    for (uint64_t i = 0; i < nfit && rc == 0; i++) {
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
