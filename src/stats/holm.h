/*
 * Holm's step-down procedure (Holm 1979) over m p-values: sort them, reject the i-th smallest
 * (i from 1) while it is <= alpha / (m - i + 1), stop at the first that is not. It controls the
 * family-wise error rate (the chance of any false rejection among the true hypotheses) at alpha
 * under any dependence between the tests, and rejects everything Bonferroni does and often more.
 * Pure.
 */
#ifndef ST_STATS_HOLM_H
#define ST_STATS_HOLM_H

#include <stddef.h>

/*
 * Sets reject[i] to 1 for each rejected p[i], 0 otherwise, and level[i] to the level p[i] was
 * held to: alpha / (m - rank) for the rejected ones and the first one kept, and for the others
 * the level they would face next (the same). NaN p-values count as 1. Returns the number
 * rejected. m may be 0. level may be NULL.
 */
size_t st_holm(const double *p, size_t m, double alpha, unsigned char *reject, double *level);

#endif
