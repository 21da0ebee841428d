/*
 * xoshiro256** (Blackman and Vigna), seeded with splitmix64. See rng.h.
 */
#include "base/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void st_rng_seed(struct st_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) {
        r->s[i] = splitmix64(&x);
    }
}

uint64_t st_rng_u64(struct st_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double st_rng_unit(struct st_rng *r)
{
    return (double)(st_rng_u64(r) >> 11) * 0x1.0p-53;
}

uint64_t st_rng_below(struct st_rng *r, uint64_t n)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
        x = st_rng_u64(r);
    } while (x >= limit);
    return x % n;
}

double st_rng_exp(struct st_rng *r, double mean)
{
    /* 1 - u is in (0, 1], so the log is finite. */
    return -mean * log(1.0 - st_rng_unit(r));
}

double st_rng_normal(struct st_rng *r)
{
    /* Box-Muller, one of the pair: u1 in (0, 1] so the logarithm is finite. */
    double u1 = 1.0 - st_rng_unit(r), u2 = st_rng_unit(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
}

double st_rng_lognormal_cv(struct st_rng *r, double cv)
{
    if (!(cv > 0)) {
        return 1.0;
    }
    double s2 = log1p(cv * cv);
    return exp(sqrt(s2) * st_rng_normal(r) - 0.5 * s2);
}
