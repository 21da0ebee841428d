/*
 * Welch's two-sample t statistics on the logarithms of positive measurements (throughputs,
 * latencies, capacities), the test behind every campaign comparison: the effect is
 * theta = mean(log a) - mean(log b), the log of the ratio of the geometric means, so
 * exp(theta) - 1 is a relative difference and multiplicative (lognormal) noise becomes additive.
 * Welch's form does not assume equal spreads; its Satterthwaite degrees of freedom make it valid
 * at n = 2..3 per side under normal logs. A side without spread (every repeat equal, as on a
 * deterministic simulator) is exact: with both sides so, the standard error is 0 and every test
 * and interval reduces to comparing theta itself. Pure.
 */
#ifndef ST_STATS_WELCH_H
#define ST_STATS_WELCH_H

#include <stddef.h>

#include "base/status.h"

struct st_welch {
    size_t n_a, n_b;
    double mean_a, mean_b; /* of the logs */
    double var_a, var_b;   /* unbiased sample variances of the logs */
    double d;              /* theta-hat = mean_a - mean_b */
    double se;             /* sqrt(var_a / n_a + var_b / n_b); 0: no spread on either side */
    double df;             /* Welch-Satterthwaite degrees of freedom; INFINITY when se == 0 */
};

/*
 * Fills *w from a[0..na) (the arm) and b[0..nb) (the baseline). Returns 0; ST_EPARSE when a value
 * is not a finite number > 0 (it has no logarithm); -ERANGE when a side has fewer than 2 values
 * (no spread can be estimated). *w is zeroed on error.
 */
int st_welch_log(const double *a, size_t na, const double *b, size_t nb, struct st_welch *w) ST_WUR;

/*
 * One-sided p-value of H0: theta <= theta0 against theta > theta0 (P(T_df >= (d - theta0) / se)).
 * With se == 0 it is 0 when d > theta0 and 1 otherwise.
 */
double st_welch_p_above(const struct st_welch *w, double theta0);
/* One-sided p-value of H0: theta >= theta0 against theta < theta0. */
double st_welch_p_below(const struct st_welch *w, double theta0);

/*
 * The interval [*lo, *hi] for theta whose every side misses with probability q (a two-sided
 * 1 - 2q interval): d -+ t_{df}(1 - q) * se. With se == 0, lo = hi = d.
 */
void st_welch_interval(const struct st_welch *w, double q, double *lo, double *hi);

/* The sample coefficient of variation of v[0..n): sd / mean on the raw values (0 for n < 2). */
double st_welch_cv(const double *v, size_t n);

#endif
