/*
 * Small-sample statistics over arrays of doubles (repeats of a measurement): median (mean of the
 * two middle values for even counts), median absolute deviation, min, max, mean, and exact
 * nearest-rank quantiles. The input is not modified (a sorted copy is made). Pure.
 */
#ifndef ST_STATS_SUMM_H
#define ST_STATS_SUMM_H

#include <stddef.h>

/* Relative differences within this of a threshold count as at the threshold, not beyond it (the
 * campaign rules and the report's drift check compare the same way). */
#define ST_STATS_EDGE 1e-9

struct st_summ {
    size_t n;
    double min, max, mean, median, mad;
};

/* Fills s from v[0..n); all fields 0 when n == 0. */
void st_summ_compute(struct st_summ *s, const double *v, size_t n);
/* Exact nearest-rank q-quantile of v[0..n) (same definition as st_hist_quantile); 0 when n == 0. */
double st_summ_quantile(const double *v, size_t n, double q);

#endif
