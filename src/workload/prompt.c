/*
 * Token fitting: calibration and the secant/bisection search on a window's length in code
 * points. See prompt.h and docs/workloads.md ("Token fitting").
 */
#include "workload/prompt.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define SAMPLE_CP 16384
#define MAX_STEPS 48

void st_fitter_init(struct st_fitter *f, st_tok_counter_fn count, void *ctx, const char *text,
                    uint64_t len, char *err, size_t errlen)
{
    memset(f, 0, sizeof(*f));
    f->count = count;
    f->ctx = ctx;
    f->text = text;
    f->len = len;
    f->err = err;
    f->errlen = errlen;
    f->cp_per_token = 4.0;
    f->bytes_per_token = 4.0;
    f->ascii = 1;
    for (uint64_t i = 0; i < len; i++) {
        if ((unsigned char)text[i] >= 0x80) {
            f->ascii = 0;
            break;
        }
    }
    st_buf_init(&f->tmp);
}

void st_fitter_release(struct st_fitter *f)
{
    st_buf_release(&f->tmp);
}

int st_fitter_count(struct st_fitter *f, const char *s, size_t n, uint64_t *tokens)
{
    char msg[512];
    msg[0] = '\0';
    f->calls++;
    int rc = f->count(f->ctx, s, n, tokens, msg, sizeof(msg));
    if (rc && f->err && f->errlen) {
        snprintf(f->err, f->errlen, "token counter: %s", msg[0] ? msg : st_strerror(rc));
    }
    return rc;
}

uint64_t st_fit_advance(const struct st_fitter *f, uint64_t off, uint64_t limit, uint64_t cps,
                        uint64_t *got)
{
    if (limit > f->len) {
        limit = f->len;
    }
    if (off >= limit) {
        *got = 0;
        return 0;
    }
    if (f->ascii) {
        uint64_t n = limit - off < cps ? limit - off : cps;
        *got = n;
        return n;
    }
    uint64_t p = off, n = 0;
    while (p < limit && n < cps) {
        p++;
        while (p < limit && ((unsigned char)f->text[p] & 0xC0) == 0x80) {
            p++;
        }
        n++;
    }
    *got = n;
    return p - off;
}

static int nonsense(struct st_fitter *f, const char *what)
{
    if (f->err && f->errlen) {
        snprintf(f->err, f->errlen, "token counter: %s", what);
    }
    return ST_EUSAGE;
}

int st_fitter_calibrate(struct st_fitter *f, uint64_t off)
{
    uint64_t got, c0 = 0, c1, c2;
    if (f->len == 0) {
        if (f->err && f->errlen) {
            snprintf(f->err, f->errlen, "the corpus is empty");
        }
        return ST_EUSAGE;
    }
    if (off >= f->len) {
        off = 0;
    }
    uint64_t bytes = st_fit_advance(f, off, f->len, SAMPLE_CP, &got);
    if (got < SAMPLE_CP && off > 0) {
        off = 0;
        bytes = st_fit_advance(f, off, f->len, SAMPLE_CP, &got);
    }
    int have_c0 = st_fitter_count(f, "", 0, &c0) == 0;
    int rc = st_fitter_count(f, f->text + off, (size_t)bytes, &c1);
    if (rc) {
        return rc;
    }
    if (!have_c0) {
        /* Two samples: the slope gives the code points a token, the intercept the overhead. */
        uint64_t got2;
        uint64_t bytes2 = st_fit_advance(f, off, f->len, 2 * SAMPLE_CP, &got2);
        rc = st_fitter_count(f, f->text + off, (size_t)bytes2, &c2);
        if (rc) {
            return rc;
        }
        if (got2 <= got || c2 <= c1) {
            return nonsense(f, "cannot calibrate: the corpus is too short or the counts do not "
                               "grow with the text");
        }
        double cpt = (double)(got2 - got) / (double)(c2 - c1);
        double o = (double)c1 - (double)got / cpt;
        c0 = o > 0 ? (uint64_t)llround(o) : 0;
        if (c0 >= c1) {
            c0 = c1 - 1;
        }
    }
    if (c1 <= c0) {
        return nonsense(f, "the count of a sample is not above the count of an empty prompt");
    }
    f->overhead = c0;
    f->cp_per_token = (double)got / (double)(c1 - c0);
    f->bytes_per_token = (double)bytes / (double)(c1 - c0);
    return 0;
}

static uint64_t absdiff(uint64_t a, uint64_t b)
{
    return a > b ? a - b : b - a;
}

/* Rounds x to an integer in [lo, hi]. */
static uint64_t clamp_round(double x, uint64_t lo, uint64_t hi)
{
    if (!(x >= (double)lo)) {
        return lo;
    }
    if (x >= (double)hi) {
        return hi;
    }
    uint64_t v = (uint64_t)llround(x);
    return v < lo ? lo : v > hi ? hi : v;
}

int st_fit_window(struct st_fitter *f, struct st_fit *q)
{
    const double cpt = f->cp_per_token;
    const uint64_t min_cp = q->min_cp ? q->min_cp : 1;
    uint64_t maxcp = UINT64_MAX; /* known once a step reaches the limit */
    uint64_t lo = 0, hi = 0, clo = 0, chi = 0;
    int have_lo = 0, have_hi = 0, have_best = 0;
    uint64_t best_c = 0, best_bytes = 0, best_cp = 0;
    uint64_t width = UINT64_MAX; /* the bracket's width before the last step */
    uint64_t cp;
    if (q->target > q->fixed_tokens) {
        cp = clamp_round((double)(q->target - q->fixed_tokens) * cpt, min_cp, UINT64_MAX / 4);
    } else {
        cp = min_cp;
    }
    for (int step = 0; step < MAX_STEPS; step++) {
        uint64_t got, c;
        uint64_t bytes = st_fit_advance(f, q->off, q->limit, cp, &got);
        if (got < cp) {
            maxcp = got;
            cp = got;
        }
        if (cp < min_cp) {
            return ST_ETOOBIG;
        }
        if ((have_lo && cp == lo) || (have_hi && cp == hi)) {
            break;
        }
        st_buf_clear(&f->tmp);
        q->assemble(q->actx, bytes, &f->tmp);
        int rc = st_fitter_count(f, f->tmp.data ? f->tmp.data : "", f->tmp.len, &c);
        if (rc) {
            return rc;
        }
        uint64_t d = absdiff(c, q->target);
        if (!have_best || d < absdiff(best_c, q->target) ||
            (d == absdiff(best_c, q->target) && cp < best_cp)) {
            have_best = 1;
            best_c = c;
            best_cp = cp;
            best_bytes = bytes;
        }
        if (c == q->target) {
            break;
        }
        if (c < q->target) {
            lo = cp;
            clo = c;
            have_lo = 1;
            if (cp == maxcp) {
                break;
            }
        } else {
            hi = cp;
            chi = c;
            have_hi = 1;
            if (cp == min_cp) {
                break;
            }
        }
        if (have_lo && have_hi && hi - lo <= 1) {
            break;
        }
        uint64_t lower = have_lo ? lo + 1 : min_cp;
        uint64_t upper = have_hi ? hi - 1 : (maxcp != UINT64_MAX ? maxcp : UINT64_MAX / 4);
        double next;
        if (have_lo && have_hi) {
            next = (double)lo + (double)(q->target - clo) * (double)(hi - lo) / (double)(chi - clo);
        } else {
            next = (double)cp + ((double)q->target - (double)c) * cpt;
        }
        uint64_t n = clamp_round(next, lower, upper);
        /* Bisect when a secant step leaves the bracket or the last one did not halve it (a
         * tokenizer whose counts jump can otherwise creep one code point at a time). */
        if (have_lo && have_hi && (n <= lo || n >= hi || hi - lo > width / 2)) {
            n = lo + (hi - lo) / 2;
        }
        if (have_lo && have_hi) {
            width = hi - lo;
        }
        cp = n;
    }
    q->win_bytes = best_bytes;
    q->counted = best_c;
    if (best_c < q->target && have_lo && lo == maxcp) {
        return ST_ETOOBIG;
    }
    return 0;
}
