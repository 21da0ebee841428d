/*
 * Seeded pseudo-random numbers: xoshiro256** seeded through splitmix64. Deterministic across
 * platforms for the same seed. Not for secrets. Caller-embedded state, one per thread.
 */
#ifndef ST_BASE_RNG_H
#define ST_BASE_RNG_H

#include <stdint.h>

struct st_rng {
    uint64_t s[4];
};

void st_rng_seed(struct st_rng *r, uint64_t seed);
uint64_t st_rng_u64(struct st_rng *r);
/* Uniform in [0, 1), 53 bits. */
double st_rng_unit(struct st_rng *r);
/* Uniform integer in [0, n); n > 0. Unbiased (rejection). */
uint64_t st_rng_below(struct st_rng *r, uint64_t n);
/* Exponential variate with the given mean (> 0). */
double st_rng_exp(struct st_rng *r, double mean);
/* A standard normal draw (Box-Muller; consumes two 64-bit outputs). */
double st_rng_normal(struct st_rng *r);
/* A lognormal draw of mean 1 and coefficient of variation cv (exp(s Z - s^2 / 2) with
 * s^2 = log(1 + cv^2)); exactly 1, consuming nothing, when cv <= 0. */
double st_rng_lognormal_cv(struct st_rng *r, double cv);

#endif
