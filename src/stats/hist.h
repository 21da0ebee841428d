/*
 * Log-linear histogram of non-negative integer values (latencies in ns), in the manner of
 * HdrHistogram: values below 2^sub_bits are exact; above, each power-of-two range is split into
 * 2^(sub_bits-1) equal buckets, so any recorded value is known within a relative error of
 * 2^-(sub_bits-1). Memory is fixed at init (no allocation on record). One per worker thread;
 * merge at the end. Pure.
 *
 * Quantile definition (docs/metrics.md): the q-quantile is the smallest recorded value v such
 * that at least ceil(q * count) values are <= v (nearest rank; q = 0 gives the minimum). The
 * histogram returns a value within the relative error above of that exact answer, clamped to
 * [min, max], which are exact.
 */
#ifndef ST_STATS_HIST_H
#define ST_STATS_HIST_H

#include <stddef.h>
#include <stdint.h>

struct st_hist {
    uint32_t sub_bits; /* 1..16; 8 gives <= 0.79% relative error */
    uint32_t nbuckets;
    uint64_t *counts; /* owned */
    uint64_t count;
    uint64_t min;    /* exact; UINT64_MAX when empty */
    uint64_t max;    /* exact; 0 when empty */
    long double sum; /* exact enough for means of ns values */
};

/* Allocates the (66 - sub_bits) << (sub_bits - 1) counters; sub_bits outside 1..16 aborts. */
void st_hist_init(struct st_hist *h, uint32_t sub_bits);
/* Frees the counters; h may be initialized again. */
void st_hist_release(struct st_hist *h);
/* Empties h, keeping its storage. */
void st_hist_reset(struct st_hist *h);
void st_hist_record(struct st_hist *h, uint64_t v);
void st_hist_record_n(struct st_hist *h, uint64_t v, uint64_t n);
/* Adds src into dst; both must have the same sub_bits (asserted). */
void st_hist_merge(struct st_hist *dst, const struct st_hist *src);
/* q in [0, 1]; 0 when empty. */
uint64_t st_hist_quantile(const struct st_hist *h, double q);
/*
 * The 1-based nearest rank ceil(q * count) used by both st_hist_quantile and st_summ_quantile,
 * within [1, count] (0 when count is 0). q is clamped to [0, 1] (NaN counts as 0). q * count
 * within a few ulps above an integer counts as that integer, so the decimal the caller wrote
 * decides (0.07 * 100 is 7, not the 8 that the rounded double product would give).
 */
uint64_t st_hist_rank(double q, uint64_t count);
/* Arithmetic mean of the recorded values (exact, from the sum); 0 when empty. */
double st_hist_mean(const struct st_hist *h);
/* The stated relative error bound, 2^-(sub_bits-1). */
double st_hist_rel_error(const struct st_hist *h);

#endif
