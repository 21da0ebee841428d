/*
 * Log-linear histogram. See hist.h for the contract and docs/internals/stats.md for the layout
 * and the proof of the error bound.
 *
 * With S = sub_bits and H = 2^(S-1): bucket i < 2^S holds exactly the value i; above that, the
 * octave [2^e, 2^(e+1)) (e >= S) holds H buckets of width 2^(e-S+1). The index of v is
 * (shift << (S-1)) + (v >> shift), shift = max(0, floor(log2 v) - (S-1)), which needs one clz
 * and no branch. Covering every uint64_t takes (66 - S) * H buckets (7,424 for S = 8).
 * Recording touches one counter and four scalars and never allocates.
 */
#include "stats/hist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"

#define ST_HIST_MIN_SUB_BITS 1u
#define ST_HIST_MAX_SUB_BITS 16u

static inline uint32_t bucket_of(uint32_t sub_bits, uint64_t v)
{
    uint32_t m = sub_bits - 1;
    /* OR-ing in the low mask gives values below 2^S the shift 0 of the exact region. */
    uint32_t lg = 63u - (uint32_t)__builtin_clzll(v | ((2ull << m) - 1));
    uint32_t shift = lg - m;
    return (shift << m) + (uint32_t)(v >> shift);
}

/* Lowest value of bucket i, and log2 of its width. */
static uint64_t bucket_lo(uint32_t sub_bits, uint32_t i, uint32_t *shift)
{
    uint32_t m = sub_bits - 1;
    if (i < (2u << m)) {
        *shift = 0;
        return i;
    }
    uint32_t s = (i >> m) - 1;
    *shift = s;
    return (uint64_t)(i - (s << m)) << s;
}

void st_hist_init(struct st_hist *h, uint32_t sub_bits)
{
    if (sub_bits < ST_HIST_MIN_SUB_BITS || sub_bits > ST_HIST_MAX_SUB_BITS) {
        abort(); /* a caller bug, not an input error: sub_bits is a compile-time choice */
    }
    h->sub_bits = sub_bits;
    h->nbuckets = (66u - sub_bits) << (sub_bits - 1);
    h->counts = st_xcalloc(h->nbuckets, sizeof(*h->counts));
    h->count = 0;
    h->min = UINT64_MAX;
    h->max = 0;
    h->sum = 0;
}

void st_hist_release(struct st_hist *h)
{
    st_freep(&h->counts);
    h->nbuckets = 0;
    h->count = 0;
    h->min = UINT64_MAX;
    h->max = 0;
    h->sum = 0;
}

void st_hist_reset(struct st_hist *h)
{
    memset(h->counts, 0, (size_t)h->nbuckets * sizeof(*h->counts));
    h->count = 0;
    h->min = UINT64_MAX;
    h->max = 0;
    h->sum = 0;
}

void st_hist_record(struct st_hist *h, uint64_t v)
{
    h->counts[bucket_of(h->sub_bits, v)]++;
    h->count++;
    h->min = v < h->min ? v : h->min;
    h->max = v > h->max ? v : h->max;
    h->sum += (long double)v;
}

void st_hist_record_n(struct st_hist *h, uint64_t v, uint64_t n)
{
    if (n == 0) {
        return; /* recording nothing must not move min and max */
    }
    h->counts[bucket_of(h->sub_bits, v)] += n;
    h->count += n;
    h->min = v < h->min ? v : h->min;
    h->max = v > h->max ? v : h->max;
    h->sum += (long double)v * (long double)n;
}

void st_hist_merge(struct st_hist *dst, const struct st_hist *src)
{
    if (dst->sub_bits != src->sub_bits) {
        abort(); /* buckets of different widths cannot be added */
    }
    for (uint32_t i = 0; i < dst->nbuckets; i++) {
        dst->counts[i] += src->counts[i];
    }
    dst->count += src->count;
    dst->min = src->min < dst->min ? src->min : dst->min;
    dst->max = src->max > dst->max ? src->max : dst->max;
    dst->sum += src->sum;
}

uint64_t st_hist_rank(double q, uint64_t count)
{
    if (count == 0) {
        return 0;
    }
    if (!(q > 0.0)) {
        return 1;
    }
    if (q >= 1.0) {
        return count;
    }
    double r = q * (double)count;
    /*
     * q and the product are each rounded once (<= 2^-53 relative apiece), so when the decimal q
     * times count is an integer k, r lies within 2^-52 * r of k; subtracting 2^-50 * r before
     * the ceil absorbs that. A q with d decimals otherwise leaves a fractional part of at least
     * 10^-d, far above 2^-50 * r for any count below 2^40.
     */
    double k = ceil(r - r * 0x1p-50);
    if (k < 1.0) {
        return 1;
    }
    if (k >= (double)count) {
        return count;
    }
    return (uint64_t)k;
}

uint64_t st_hist_quantile(const struct st_hist *h, double q)
{
    uint64_t rank = st_hist_rank(q, h->count);
    if (rank == 0) {
        return 0;
    }
    /* The first and last ranks are the exact min and max. */
    if (rank == 1) {
        return h->min;
    }
    if (rank == h->count) {
        return h->max;
    }
    uint32_t i = bucket_of(h->sub_bits, h->min);
    uint32_t last = bucket_of(h->sub_bits, h->max);
    uint64_t cum = 0;
    for (; i < last; i++) {
        cum += h->counts[i];
        if (cum >= rank) {
            break;
        }
    }
    /*
     * The rank-th smallest value x lies in bucket i = [lo, lo + 2^s). We return the midpoint
     * lo + 2^(s-1) (lo itself when s = 0, where the bucket is exact): |mid - x| <= 2^(s-1), and
     * lo >= 2^(S-1) * 2^s, so the error is at most x * 2^-S, half the stated 2^-(S-1). The upper
     * bound would never under-report but would use the whole stated bound; the midpoint halves
     * the worst case and is unbiased on smooth data. Clamping to [min, max], which bracket x,
     * only moves the answer toward x.
     */
    uint32_t s;
    uint64_t v = bucket_lo(h->sub_bits, i, &s);
    if (s > 0) {
        v += 1ull << (s - 1);
    }
    if (v < h->min) {
        v = h->min;
    }
    if (v > h->max) {
        v = h->max;
    }
    return v;
}

double st_hist_mean(const struct st_hist *h)
{
    if (h->count == 0) {
        return 0.0;
    }
    return (double)(h->sum / (long double)h->count);
}

double st_hist_rel_error(const struct st_hist *h)
{
    return ldexp(1.0, -(int)(h->sub_bits - 1));
}
