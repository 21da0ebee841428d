/*
 * The capacity probe's queueing rule (see knee.h). Two rules over one pass: a document that
 * waited for another's end, and a slowest TTFT past the pass's whole prefill.
 */
#include "stats/knee.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"
#include "stats/summ.h"

double st_knee_rate(const double *ttft_ms, const double *uncached, const double *prompt, size_t n)
{
    if (n == 0) {
        return NAN;
    }
    double *r = st_xcalloc(n, sizeof(*r));
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        double u = uncached[i], t = ttft_ms[i];
        if (isnan(u) || isnan(t) || u < 1 || t < 0) {
            continue;
        }
        if (prompt && !(u >= 0.5 * prompt[i])) {
            continue; /* mostly cached (or the prompt unknown): says little of the rate */
        }
        r[k++] = t / u;
    }
    struct st_summ s;
    st_summ_compute(&s, r, k);
    free(r);
    return k ? s.median : NAN;
}

/* The document's prefill beyond the reference's: rate x its extra uncached tokens. */
static double excess_ms(const struct st_knee_doc *d, const struct st_knee_ref *ref)
{
    double rate = isnan(ref->rate_ms_per_token) ? 0 : ref->rate_ms_per_token;
    double u = isnan(d->uncached_tokens) ? d->prompt_tokens : d->uncached_tokens;
    double ur = isnan(ref->ref_uncached_tokens) ? 0 : ref->ref_uncached_tokens;
    if (isnan(u) || u <= ur) {
        return 0;
    }
    return rate * (u - ur);
}

void st_knee_judge(const struct st_knee_doc *docs, size_t n, const struct st_knee_ref *ref,
                   struct st_knee_out *out)
{
    memset(out, 0, sizeof(*out));
    out->doc = -1;
    out->after = -1;
    out->alone_ms = NAN;
    out->ttft_max_ms = NAN;
    out->ttft_min_ms = NAN;
    out->prefill_ms = isnan(ref->ref_ttft_ms) ? NAN : ref->ref_ttft_ms;
    int slowest = -1;
    for (size_t i = 0; i < n; i++) {
        const struct st_knee_doc *d = &docs[i];
        if (!isnan(out->prefill_ms)) {
            out->prefill_ms += excess_ms(d, ref);
        }
        if (isnan(d->ttft_ms)) {
            continue;
        }
        if (isnan(out->ttft_max_ms) || d->ttft_ms > out->ttft_max_ms) {
            out->ttft_max_ms = d->ttft_ms;
            slowest = (int)i;
        }
        if (isnan(out->ttft_min_ms) || d->ttft_ms < out->ttft_min_ms) {
            out->ttft_min_ms = d->ttft_ms;
        }
    }
    if (isnan(ref->ref_ttft_ms)) {
        return; /* no reference yet: this is the reference pass */
    }
    /* Rule 1: first token after another's end, sent before it, and slower than its prefill. */
    for (size_t i = 0; i < n; i++) {
        const struct st_knee_doc *d = &docs[i];
        if (isnan(d->first_ms) || isnan(d->sent_ms) || isnan(d->ttft_ms)) {
            continue;
        }
        double alone = ref->ref_ttft_ms + excess_ms(d, ref);
        if (!(d->ttft_ms > ref->jump * alone)) {
            continue;
        }
        int after = -1;
        for (size_t j = 0; j < n; j++) {
            double e = docs[j].end_ms;
            if (j != i && !isnan(e) && d->first_ms > e && d->sent_ms < e &&
                (after < 0 || e < docs[after].end_ms)) {
                after = (int)j;
            }
        }
        if (after < 0) {
            continue;
        }
        if (out->waited++ == 0) {
            out->doc = (int)i;
            out->after = after;
            out->alone_ms = alone;
        }
    }
    /* Rule 2: the slowest past the pass's whole prefill and past its own fastest. */
    if (!isnan(out->ttft_max_ms) && out->ttft_max_ms > ref->prefill_jump * out->prefill_ms &&
        out->ttft_max_ms > ref->prefill_jump * out->ttft_min_ms) {
        out->past_prefill = 1;
        if (out->doc < 0) {
            out->doc = slowest;
        }
    }
    out->queued = out->waited > 0 || out->past_prefill;
}
