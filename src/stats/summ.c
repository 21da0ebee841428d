/*
 * Small-sample statistics. See summ.h. Each call sorts a private copy of the input (n log n,
 * one allocation); inputs are repeats of a measurement, so n is tens to thousands. NaN inputs
 * have no place in an order and give unspecified results.
 */
#include "stats/summ.h"

#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"
#include "stats/hist.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;
    return (x > y) - (x < y);
}

static double *sorted_copy(const double *v, size_t n)
{
    double *s = st_xmalloc(n * sizeof(*s));
    memcpy(s, v, n * sizeof(*s));
    qsort(s, n, sizeof(*s), cmp_double);
    return s;
}

/* Median of sorted s[0..n), n > 0: the middle value, or the mean of the two middle ones. */
static double median_sorted(const double *s, size_t n)
{
    if (n % 2 == 1) {
        return s[n / 2];
    }
    /* Halving first cannot overflow, and each half is exact (short of subnormals). */
    return 0.5 * s[n / 2 - 1] + 0.5 * s[n / 2];
}

void st_summ_compute(struct st_summ *s, const double *v, size_t n)
{
    memset(s, 0, sizeof(*s));
    if (n == 0) {
        return;
    }
    double *x = sorted_copy(v, n);
    long double sum = 0;
    for (size_t i = 0; i < n; i++) {
        sum += x[i];
    }
    s->n = n;
    s->min = x[0];
    s->max = x[n - 1];
    s->mean = (double)(sum / (long double)n);
    s->median = median_sorted(x, n);
    /* The sorted values are no longer needed: reuse the copy for the deviations. */
    for (size_t i = 0; i < n; i++) {
        x[i] = x[i] > s->median ? x[i] - s->median : s->median - x[i];
    }
    qsort(x, n, sizeof(*x), cmp_double);
    s->mad = median_sorted(x, n);
    free(x);
}

double st_summ_quantile(const double *v, size_t n, double q)
{
    if (n == 0) {
        return 0.0;
    }
    double *x = sorted_copy(v, n);
    double r = x[st_hist_rank(q, n) - 1];
    free(x);
    return r;
}
