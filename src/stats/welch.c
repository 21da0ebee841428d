/*
 * Welch's t on logs. See welch.h. Sums run in long double so a thousand repeats of the same value
 * give a variance of exactly 0 (two-pass: the mean first, then the squared deviations).
 */
#include "stats/welch.h"

#include <math.h>
#include <string.h>

#include "stats/dist.h"

/* Mean and unbiased variance of log v[0..n); -1 when a value has no logarithm. */
static int log_moments(const double *v, size_t n, double *mean, double *var)
{
    long double s = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(v[i]) || !(v[i] > 0)) {
            return -1;
        }
        s += logl((long double)v[i]);
    }
    long double m = s / (long double)n, ss = 0;
    for (size_t i = 0; i < n; i++) {
        long double e = logl((long double)v[i]) - m;
        ss += e * e;
    }
    *mean = (double)m;
    *var = n > 1 ? (double)(ss / (long double)(n - 1)) : 0;
    return 0;
}

int st_welch_log(const double *a, size_t na, const double *b, size_t nb, struct st_welch *w)
{
    memset(w, 0, sizeof(*w));
    if (na < 2 || nb < 2) {
        return -ERANGE;
    }
    struct st_welch x = {.n_a = na, .n_b = nb};
    if (log_moments(a, na, &x.mean_a, &x.var_a) != 0 ||
        log_moments(b, nb, &x.mean_b, &x.var_b) != 0) {
        return ST_EPARSE;
    }
    x.d = x.mean_a - x.mean_b;
    double ua = x.var_a / (double)na, ub = x.var_b / (double)nb;
    x.se = sqrt(ua + ub);
    if (x.se > 0) {
        double den = ua * ua / (double)(na - 1) + ub * ub / (double)(nb - 1);
        x.df = (ua + ub) * (ua + ub) / den;
    } else {
        x.df = INFINITY;
    }
    *w = x;
    return 0;
}

double st_welch_p_above(const struct st_welch *w, double theta0)
{
    if (!(w->se > 0)) {
        return w->d > theta0 ? 0.0 : 1.0;
    }
    return st_dist_t_sf((w->d - theta0) / w->se, w->df);
}

double st_welch_p_below(const struct st_welch *w, double theta0)
{
    if (!(w->se > 0)) {
        return w->d < theta0 ? 0.0 : 1.0;
    }
    return st_dist_t_cdf((w->d - theta0) / w->se, w->df);
}

void st_welch_interval(const struct st_welch *w, double q, double *lo, double *hi)
{
    if (!(w->se > 0)) {
        *lo = *hi = w->d;
        return;
    }
    double h = st_dist_t_isf(q, w->df) * w->se;
    *lo = w->d - h;
    *hi = w->d + h;
}

double st_welch_cv(const double *v, size_t n)
{
    if (n < 2) {
        return 0;
    }
    long double s = 0;
    for (size_t i = 0; i < n; i++) {
        s += v[i];
    }
    long double m = s / (long double)n, ss = 0;
    for (size_t i = 0; i < n; i++) {
        ss += (v[i] - m) * (v[i] - m);
    }
    if (m == 0) {
        return 0;
    }
    return (double)(sqrtl(ss / (long double)(n - 1)) / fabsl(m));
}
