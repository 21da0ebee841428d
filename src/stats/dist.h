/*
 * Distribution functions for the decision engine: the standard normal and Student's t with any
 * real degrees of freedom > 0 (Welch's test gives fractional ones), as lower and upper tails and
 * their inverses, and the regularized incomplete beta function behind the t. Pure, libm only.
 * Upper tails (_sf, "survival") and their inverses (_isf) are computed directly, so they keep
 * their relative precision far into the tail (1e-300), where 1 - cdf would be 0.
 * Accuracy: tails to ~1e-13 relative, quantiles to ~1e-12 relative (tests/unit/test_stats_dist.c
 * checks them against tables and closed forms, tests/data/stats/reference.py says how).
 */
#ifndef ST_STATS_DIST_H
#define ST_STATS_DIST_H

/* P(Z <= x) and P(Z > x) for the standard normal. */
double st_dist_norm_cdf(double x);
double st_dist_norm_sf(double x);
/* x with P(Z > x) = q, q in (0, 1); +inf at 0, -inf at 1, NaN outside [0, 1]. */
double st_dist_norm_isf(double q);

/* The density, P(T > t) and P(T <= t) of Student's t with df > 0 degrees of freedom; df =
 * INFINITY is the normal. NaN for df <= 0 or NaN arguments. */
double st_dist_t_pdf(double t, double df);
double st_dist_t_sf(double t, double df);
double st_dist_t_cdf(double t, double df);
/* t with P(T > t) = q, q in (0, 1); +inf at 0, -inf at 1, NaN outside [0, 1] or for df <= 0. */
double st_dist_t_isf(double q, double df);

/* The regularized incomplete beta I_x(a, b) for a, b > 0, x in [0, 1]; NaN otherwise. */
double st_dist_ibeta(double x, double a, double b);

#endif
