/*
 * Normal and Student t distributions. See dist.h. The incomplete beta is evaluated by its
 * continued fraction (modified Lentz), on the side of the symmetry I_x(a,b) = 1 - I_{1-x}(b,a)
 * where the fraction converges fast; both x and 1 - x are carried so neither is formed by a
 * cancelling subtraction. Inverses are safeguarded Newton iterations on the log of the tail
 * inside a bracket that bisection keeps valid.
 */
#include "stats/dist.h"

#include <math.h>

#define SQRT1_2 0.70710678118654752440
#define LN_SQRT_2PI 0.91893853320467274178

double st_dist_norm_cdf(double x)
{
    return 0.5 * erfc(-x * SQRT1_2);
}

double st_dist_norm_sf(double x)
{
    return 0.5 * erfc(x * SQRT1_2);
}

static double norm_log_pdf(double x)
{
    return -0.5 * x * x - LN_SQRT_2PI;
}

/* Abramowitz and Stegun 26.2.23, |error| < 4.5e-4: the starting point for q <= 0.5. */
static double norm_isf_start(double q)
{
    double t = sqrt(-2.0 * log(q));
    return t - (2.515517 + 0.802853 * t + 0.010328 * t * t) /
                   (1.0 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t * t * t);
}

double st_dist_norm_isf(double q)
{
    if (isnan(q) || q < 0 || q > 1) {
        return NAN;
    }
    if (q == 0) {
        return INFINITY;
    }
    if (q == 1) {
        return -INFINITY;
    }
    if (q > 0.5) {
        return -st_dist_norm_isf(1.0 - q);
    }
    if (q == 0.5) {
        return 0;
    }
    /* Newton on g(x) = log Q(x) - log q: g' = -phi / Q. log Q is concave, so from the start
     * the iteration converges in a few steps. */
    double x = norm_isf_start(q), lq = log(q);
    for (int i = 0; i < 50; i++) {
        double sf = st_dist_norm_sf(x);
        if (!(sf > 0)) {
            break;
        }
        double step = (log(sf) - lq) * sf / exp(norm_log_pdf(x));
        x += step;
        if (fabs(step) <= 1e-15 * (fabs(x) + 1e-300)) {
            break;
        }
    }
    return x;
}

/* ---- incomplete beta ---- */

/* The continued fraction of I_x(a, b) without its front factor; y = 1 - x. */
static double ibeta_cf(double x, double a, double b)
{
    const double tiny = 1e-300;
    double f = 1.0, c = 1.0, d = 0.0;
    for (int i = 0; i <= 1000; i++) {
        double m = (double)(i / 2), num;
        if (i == 0) {
            num = 1.0;
        } else if (i % 2 == 0) {
            num = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
        } else {
            num = -((a + m) * (a + b + m) * x) / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
        }
        d = 1.0 + num * d;
        d = fabs(d) < tiny ? tiny : d;
        d = 1.0 / d;
        c = 1.0 + num / c;
        c = fabs(c) < tiny ? tiny : c;
        double cd = c * d;
        f *= cd;
        if (fabs(1.0 - cd) < 1e-16) {
            break;
        }
    }
    return f - 1.0;
}

/* I_x(a, b) with y = 1 - x given exactly. */
static double ibeta_xy(double x, double y, double a, double b)
{
    if (x <= 0) {
        return 0;
    }
    if (y <= 0) {
        return 1;
    }
    double lbeta = lgamma(a) + lgamma(b) - lgamma(a + b);
    if (x > (a + 1.0) / (a + b + 2.0)) {
        return 1.0 - ibeta_xy(y, x, b, a);
    }
    double front = exp(a * log(x) + b * log(y) - lbeta) / a;
    return front * ibeta_cf(x, a, b);
}

double st_dist_ibeta(double x, double a, double b)
{
    if (isnan(x) || !(a > 0) || !(b > 0) || x < 0 || x > 1) {
        return NAN;
    }
    return ibeta_xy(x, 1.0 - x, a, b);
}

/* ---- Student t ---- */

double st_dist_t_pdf(double t, double df)
{
    if (isnan(t) || !(df > 0)) {
        return NAN;
    }
    if (isinf(df)) {
        return exp(norm_log_pdf(t));
    }
    double lc = lgamma(0.5 * (df + 1.0)) - lgamma(0.5 * df) - 0.5 * log(df * M_PI);
    return exp(lc - 0.5 * (df + 1.0) * log1p(t * t / df));
}

/* P(T > t) for t >= 0: I_{df/(df+t^2)}(df/2, 1/2) / 2, with 1 - x = t^2/(df+t^2) exact. */
static double t_sf_pos(double t, double df)
{
    double t2 = t * t;
    if (isinf(t2)) {
        return 0;
    }
    double x = df / (df + t2), y = t2 / (df + t2);
    return 0.5 * ibeta_xy(x, y, 0.5 * df, 0.5);
}

double st_dist_t_sf(double t, double df)
{
    if (isnan(t) || !(df > 0)) {
        return NAN;
    }
    if (isinf(df)) {
        return st_dist_norm_sf(t);
    }
    return t >= 0 ? t_sf_pos(t, df) : 1.0 - t_sf_pos(-t, df);
}

double st_dist_t_cdf(double t, double df)
{
    if (isnan(t) || !(df > 0)) {
        return NAN;
    }
    if (isinf(df)) {
        return st_dist_norm_cdf(t);
    }
    return t >= 0 ? 1.0 - t_sf_pos(t, df) : t_sf_pos(-t, df);
}

double st_dist_t_isf(double q, double df)
{
    if (isnan(q) || q < 0 || q > 1 || !(df > 0)) {
        return NAN;
    }
    if (isinf(df)) {
        return st_dist_norm_isf(q);
    }
    if (q == 0) {
        return INFINITY;
    }
    if (q == 1) {
        return -INFINITY;
    }
    if (q > 0.5) {
        return -st_dist_t_isf(1.0 - q, df);
    }
    if (q == 0.5) {
        return 0;
    }
    /* Bracket [lo, hi] with sf(lo) >= q > sf(hi), doubling hi from the normal's quantile. */
    double lo = 0, hi = st_dist_norm_isf(q) + 1.0;
    while (t_sf_pos(hi, df) >= q) {
        lo = hi;
        hi *= 2;
        if (hi > 1e300) {
            return INFINITY;
        }
    }
    /* Newton on log sf inside the bracket; a step that leaves it bisects instead. */
    double lq = log(q), t = 0.5 * (lo + hi);
    for (int i = 0; i < 200; i++) {
        double sf = t_sf_pos(t, df);
        if (sf >= q) {
            lo = t;
        } else {
            hi = t;
        }
        double pdf = st_dist_t_pdf(t, df), next;
        if (sf > 0 && pdf > 0) {
            next = t + (log(sf) - lq) * sf / pdf;
        } else {
            next = 0.5 * (lo + hi);
        }
        if (!(next > lo && next < hi)) {
            next = 0.5 * (lo + hi);
        }
        if (fabs(next - t) <= 1e-15 * fabs(t) || hi - lo <= 1e-15 * hi) {
            return next;
        }
        t = next;
    }
    return t;
}
