/*
 * The window layout and the assembly of fitted windows (see build.h): seeded streams, word and
 * sentence boundaries, the text counted for a window (head, needles, tail), the layout's base and
 * its one wrap, calibration and the corpus size check, and the parts a fitted window adds to the
 * plan.
 *
 * Layout: windows are laid out one after another from a seeded base offset, each starting at a
 * word, and wrap once to the corpus start, never reaching base again; so no two windows overlap
 * and a corpus too small says so instead of reusing text.
 */
#include "workload/build.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

struct st_rng st_wl_stream(uint64_t seed, uint64_t key)
{
    struct st_rng r;
    st_rng_seed(&r, seed ^ (key * 0x9e3779b97f4a7c15ull));
    return r;
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
        char stop_c = i >= lo + 2 ? t[i - 2] : ' ';
        int stop_ok = stop_c == '.' || stop_c == '?' || stop_c == '!' || stop_c == '"';
        if (stop_ok && is_space(t[i - 1]) && !is_space(t[i])) {
            return i;
        }
    }
    uint64_t w = snap_word(t, end, pos);
    return w <= end ? w : end;
}

void st_wl_compute_splits(struct st_wl_asm *a, uint64_t win_bytes)
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
    struct st_wl_asm *a = ctx;
    const char *t = a->b->text;
    st_buf_append(out, a->head, a->head_len);
    st_wl_compute_splits(a, win_bytes);
    uint64_t prev = a->off;
    for (uint32_t i = 0; i < a->nneedles; i++) {
        st_buf_append(out, t + prev, (size_t)(a->splits[i] - prev));
        st_buf_append(out, a->needles[i].text, a->needles[i].len);
        prev = a->splits[i];
    }
    st_buf_append(out, t + prev, (size_t)(a->off + win_bytes - prev));
    st_buf_append(out, a->tail, a->tail_len);
}

void st_wl_asm_init(struct st_wl_asm *a, const struct st_builder *b)
{
    memset(a, 0, sizeof(*a));
    a->b = b;
    a->head = "";
    a->tail = "";
}

void st_wl_fit_init(struct st_fit *q, struct st_wl_asm *a, uint64_t target, uint64_t fixed)
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
int st_wl_lay_window(struct st_builder *b, struct st_fit *q, struct st_wl_asm *a)
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

void st_wl_add_window_parts(struct st_builder *b, const struct st_wl_asm *a, uint64_t win_bytes)
{
    uint64_t prev = a->off;
    for (uint32_t i = 0; i < a->nneedles; i++) {
        if (a->splits[i] > prev) {
            st_wplan_add_part(b->pl, ST_PART_WIN, prev, a->splits[i] - prev, 0);
        }
        prev = a->splits[i];
        uint32_t ni = st_wplan_add_needle(b->pl, a->needles[i].word, a->needles[i].word_len,
                                          a->needles[i].depth);
        uint64_t off = st_wplan_pool_add(b->pl, a->needles[i].text, a->needles[i].len);
        st_wplan_add_part(b->pl, ST_PART_NEEDLE, off, a->needles[i].len, ni);
    }
    if (a->off + win_bytes > prev) {
        st_wplan_add_part(b->pl, ST_PART_WIN, prev, a->off + win_bytes - prev, 0);
    }
    if (a->tail_len) {
        uint64_t off = st_wplan_pool_add(b->pl, a->tail, a->tail_len);
        st_wplan_add_part(b->pl, ST_PART_TEXT, off, a->tail_len, 0);
    }
}

/* Closes item it: its parts are those added since it was created. */
void st_wl_close_item(struct st_builder *b, uint64_t idx, uint64_t requested, uint64_t counted)
{
    struct st_wplan_item *it = &b->pl->items[idx];
    it->nparts = (uint32_t)(b->pl->nparts - it->part0);
    it->requested = requested;
    it->counted = counted;
}

void st_wl_put_parts(const struct st_builder *b, uint64_t part0, uint64_t n, struct st_buf *out)
{
    st_wplan_put_text(b->pl, b->text, 0, part0, n, out);
}

/* Calibrates on a seeded sample, then places the layout's base so the windows fit before the
 * corpus end when they can. */
int st_wl_calibrate(struct st_builder *b, struct st_rng *rw)
{
    uint64_t sample = snap_word(b->text, b->len, st_rng_below(rw, b->len ? b->len : 1));
    return st_fitter_calibrate(&b->f, sample);
}

void st_wl_place_base(struct st_builder *b, struct st_rng *rw)
{
    uint64_t need = b->est_bytes + b->est_bytes / 16 + 4096;
    uint64_t room = need < b->len ? b->len - need : 0;
    b->base = snap_word(b->text, b->len, room ? st_rng_below(rw, room) : 0);
    b->next = b->base;
    b->wrapped = 0;
}

int st_wl_check_size(struct st_builder *b, uint64_t tokens, uint64_t n)
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
