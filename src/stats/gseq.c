/*
 * Group-sequential crossing probabilities. See gseq.h. The density of S at each look is kept on
 * a grid running down from that look's boundary b_k = c * sqrt(I_k) in steps of h, to ten
 * standard deviations below zero; the grids of two looks share the step, so the Gaussian kernel
 * between them depends only on the difference of the indices and is tabulated once per look.
 * Simpson's rule integrates the smooth (truncated) densities; with h a tenth of the smaller of
 * the increment's and the first look's standard deviations the crossing probabilities agree
 * with published boundary constants to their printed digits (tests/unit/test_stats_gseq.c).
 */
#include "stats/gseq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"
#include "stats/dist.h"

#define INV_SQRT_2PI 0.39894228040143267794
#define SPAN_SD 10.0  /* grids reach this many standard deviations below 0 */
#define KERNEL_SD 9.0 /* the kernel is cut beyond this many increment sds */
#define TABLE_C0 (-2.0)
#define TABLE_C1 8.0
#define TABLE_DC 0.025

static double phi(double x)
{
    return INV_SQRT_2PI * exp(-0.5 * x * x);
}

/* Simpson's weight of point i of 0..n (n even), without the factor h / 3. */
static double simpson_w(size_t i, size_t n)
{
    if (i == 0 || i == n) {
        return 1.0;
    }
    return i % 2 ? 4.0 : 2.0;
}

/* An even number of steps of h reaching from b down to at most lo. */
static size_t steps_to(double b, double lo, double h)
{
    double span = b - lo;
    size_t n = span > 0 ? (size_t)ceil(span / h) : 0;
    n += n % 2;
    return n < 2 ? 2 : n;
}

double st_gseq_cross_info(const double *info, size_t k, double c)
{
    double total = st_dist_norm_sf(c);
    if (k <= 1) {
        return total;
    }
    double h = sqrt(info[0]);
    for (size_t i = 1; i < k; i++) {
        double sd = sqrt(info[i] - info[i - 1]);
        h = sd < h ? sd : h;
    }
    h *= 0.1;
    /* Look 1: S ~ N(0, I_1) below b_1. */
    double b = c * sqrt(info[0]);
    size_t n = steps_to(b, -SPAN_SD * sqrt(info[0]), h);
    double *f = st_xmalloc((n + 1) * sizeof(*f));
    for (size_t i = 0; i <= n; i++) {
        double u = b - (double)i * h;
        f[i] = phi(u / sqrt(info[0])) / sqrt(info[0]);
    }
    double *g = NULL, *ker = NULL;
    for (size_t look = 1; look < k; look++) {
        double sd = sqrt(info[look] - info[look - 1]);
        double bk = c * sqrt(info[look]);
        /* Crossing now: the mass that moves from below b to above bk. */
        double p = 0;
        for (size_t i = 0; i <= n; i++) {
            double u = b - (double)i * h;
            p += simpson_w(i, n) * f[i] * st_dist_norm_sf((bk - u) / sd);
        }
        total += p * h / 3.0;
        if (look + 1 == k) {
            break;
        }
        /* The density below bk: s_j = bk - j h, s_j - u_i = (bk - b) + (i - j) h. */
        size_t m = steps_to(bk, -SPAN_SD * sqrt(info[look]), h);
        double dlt = bk - b;
        long lo = (long)floor((-KERNEL_SD * sd - dlt) / h);
        long hi = (long)ceil((KERNEL_SD * sd - dlt) / h);
        size_t nk = (size_t)(hi - lo + 1);
        ker = st_xrealloc(ker, nk * sizeof(*ker));
        for (size_t q = 0; q < nk; q++) {
            ker[q] = phi((dlt + (double)((long)q + lo) * h) / sd) / sd;
        }
        g = st_xrealloc(g, (m + 1) * sizeof(*g));
        for (size_t j = 0; j <= m; j++) {
            /* i - j in [lo, hi] and i in [0, n]. */
            long i0 = (long)j + lo, i1 = (long)j + hi;
            i0 = i0 < 0 ? 0 : i0;
            i1 = i1 > (long)n ? (long)n : i1;
            double acc = 0;
            for (long i = i0; i <= i1; i++) {
                acc += simpson_w((size_t)i, n) * f[i] * ker[i - (long)j - lo];
            }
            g[j] = acc * h / 3.0;
        }
        double *t = f;
        f = g;
        g = t;
        n = m;
        b = bk;
    }
    free(f);
    free(g);
    free(ker);
    return total > 1 ? 1 : total;
}

int st_gseq_init(struct st_gseq *g, uint32_t n_min, uint32_t n_max)
{
    memset(g, 0, sizeof(*g));
    if (n_min < 2 || n_max < n_min || n_max - n_min + 1 > ST_GSEQ_MAX_LOOKS) {
        return -ERANGE;
    }
    g->n_min = n_min;
    g->n_max = n_max;
    g->c0 = TABLE_C0;
    g->dc = TABLE_DC;
    g->n_c = (uint32_t)lround((TABLE_C1 - TABLE_C0) / TABLE_DC) + 1;
    g->ratio = st_xmalloc(g->n_c * sizeof(*g->ratio));
    size_t k = n_max - n_min + 1;
    double info[ST_GSEQ_MAX_LOOKS];
    for (size_t i = 0; i < k; i++) {
        info[i] = (double)(n_min + i);
    }
    for (uint32_t i = 0; i < g->n_c; i++) {
        double c = g->c0 + g->dc * i;
        g->ratio[i] = k == 1 ? 1.0 : st_gseq_cross_info(info, k, c) / st_dist_norm_sf(c);
    }
    return 0;
}

void st_gseq_release(struct st_gseq *g)
{
    free(g->ratio);
    memset(g, 0, sizeof(*g));
}

double st_gseq_cross(const struct st_gseq *g, double c)
{
    if (isnan(c)) {
        return NAN;
    }
    if (c == INFINITY) {
        return 0;
    }
    double x = (c - g->c0) / g->dc, r;
    if (x <= 0) {
        /* Below the table the continuation region holds almost nothing: cross -> 1. */
        r = g->ratio[0];
    } else if (x >= (double)(g->n_c - 1)) {
        r = g->ratio[g->n_c - 1]; /* the ratio has levelled off far out in the tail */
    } else {
        /* Catmull-Rom through the four nearest entries (end entries repeated). */
        size_t i = (size_t)x;
        double f = x - (double)i;
        double p0 = g->ratio[i ? i - 1 : 0], p1 = g->ratio[i], p2 = g->ratio[i + 1];
        double p3 = g->ratio[i + 2 < g->n_c ? i + 2 : i + 1];
        r = p1 +
            0.5 * f *
                (p2 - p0 + f * (2 * p0 - 5 * p1 + 4 * p2 - p3 + f * (3 * (p1 - p2) + p3 - p0)));
    }
    double v = r * st_dist_norm_sf(c);
    return v > 1 ? 1 : v;
}

double st_gseq_boundary(const struct st_gseq *g, double alpha)
{
    if (!(alpha > 0) || !(alpha < 1)) {
        return NAN;
    }
    /* cross() decreases in c: bisect on [lo, hi] with cross(lo) >= alpha > cross(hi). */
    double lo = st_dist_norm_isf(alpha), hi = lo + 4;
    while (st_gseq_cross(g, hi) >= alpha) {
        hi += 4;
    }
    for (int i = 0; i < 200 && hi - lo > 1e-13; i++) {
        double mid = 0.5 * (lo + hi);
        if (st_gseq_cross(g, mid) >= alpha) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return 0.5 * (lo + hi);
}

double st_gseq_nominal(const struct st_gseq *g, double alpha)
{
    return st_dist_norm_sf(st_gseq_boundary(g, alpha));
}

double st_gseq_seq_p(const struct st_gseq *g, double p)
{
    if (isnan(p)) {
        return NAN;
    }
    if (p <= 0) {
        return 0;
    }
    if (p >= 1) {
        return 1;
    }
    return st_gseq_cross(g, st_dist_norm_isf(p));
}
