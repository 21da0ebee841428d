/*
 * Group-sequential boundaries: the repeats of a campaign comparison are looked at after every
 * added repeat per side, from n_min to n_max, and a one-sided test may stop at any look. To keep
 * its error at alpha over all the looks, each look is held to a smaller nominal level: the one of
 * Pocock's constant boundary c, with
 *     cross(c) = P(Z_k >= c at some look k | H0) = alpha,
 * Z_k the look's standardized statistic. Under normal theory Z_k = S(I_k) / sqrt(I_k) for a
 * Brownian motion S observed at the information I_k = n_k; cross(c) is computed by the recursive
 * numerical integration of Armitage, McPherson and Rowe (1969) (Simpson's rule on grids anchored
 * at each look's boundary). The t statistics of small samples are brought to that scale through
 * their p-values (Jennison and Turnbull, "Group Sequential Methods", 2000, ch. 11: a look's t
 * rejects when its p-value is below the normal design's nominal level).
 *
 * The sequential p-value of a look with standardized value z is cross(z): the smallest alpha at
 * which the design would reject there. It is valid whatever rule stops the looks (at most n_max),
 * so Holm's procedure can run over the sequential p-values of many hypotheses. Pure.
 */
#ifndef ST_STATS_GSEQ_H
#define ST_STATS_GSEQ_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define ST_GSEQ_MAX_LOOKS 100

/* A design: looks at n = n_min .. n_max, its cross() tabulated for fast evaluation. */
struct st_gseq {
    uint32_t n_min, n_max;
    uint32_t n_c;  /* table entries */
    double c0, dc; /* entry i is c = c0 + i * dc */
    double *ratio; /* owned: cross(c) / Q(c) at the entries (1 for a single look) */
};

/*
 * Prepares the design with looks at n_min .. n_max samples (2 <= n_min <= n_max, at most
 * ST_GSEQ_MAX_LOOKS looks). Returns 0 or -ERANGE. About a millisecond per look.
 */
int st_gseq_init(struct st_gseq *g, uint32_t n_min, uint32_t n_max) ST_WUR;
void st_gseq_release(struct st_gseq *g);

/* cross(c) of the design, from its table (relative error below 1e-6 against the integration). */
double st_gseq_cross(const struct st_gseq *g, double c);
/* The constant boundary c with cross(c) = alpha, alpha in (0, 1). */
double st_gseq_boundary(const struct st_gseq *g, double alpha);
/* The nominal one-sided level of every look, Q(st_gseq_boundary(alpha)). */
double st_gseq_nominal(const struct st_gseq *g, double alpha);
/* The sequential p-value of a look whose one-sided p-value is p: cross(Q^-1(p)). */
double st_gseq_seq_p(const struct st_gseq *g, double p);

/*
 * cross(c) by the integration itself, for looks at any increasing information levels
 * info[0..k) > 0 (k >= 1). Used to build the tables and by the tests.
 */
double st_gseq_cross_info(const double *info, size_t k, double c);

#endif
