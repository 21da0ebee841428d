/*
 * Staged noise. See noise.h. Every draw seeds its own generator from a hash of what identifies
 * it, so draws do not depend on the order of unrelated requests.
 */
#include "sim/noise.h"

#include <string.h>

#include "base/hash.h"
#include "base/rng.h"

void st_sim_noise_init(struct st_sim_noise *n, const struct st_profile *p)
{
    memset(n, 0, sizeof(*n));
    n->noise_cv = p->perf.noise_cv;
    n->bringup_cv = p->perf.bringup_cv;
    n->seed = p->perf.noise_seed ? p->perf.noise_seed : p->seed;
}

double st_sim_noise_launch(const struct st_sim_noise *n)
{
    static const char tag[] = "servetune sim launch noise";
    struct st_rng r;
    st_rng_seed(
        &r, st_hash_mix(st_hash_u64(st_hash_update(ST_HASH_INIT, tag, sizeof(tag) - 1), n->seed)));
    return st_rng_lognormal_cv(&r, n->bringup_cv);
}

/* The requests with key hash h seen so far in this launch, counting this one. */
static uint64_t count(struct st_sim_noise *n, uint64_t h)
{
    h = h ? h : 1;
    uint32_t i = (uint32_t)(h & (ST_SIM_NOISE_KEYS - 1));
    for (uint32_t probe = 0; probe < ST_SIM_NOISE_KEYS; probe++) {
        uint32_t j = (i + probe) & (ST_SIM_NOISE_KEYS - 1);
        if (n->key_hash[j] == h) {
            return ++n->key_count[j];
        }
        if (n->key_hash[j] == 0) {
            if (n->n_keys >= ST_SIM_NOISE_KEYS / 2) {
                break; /* keep the table sparse: forget every key and start again */
            }
            n->key_hash[j] = h;
            n->key_count[j] = 1;
            n->n_keys++;
            return 1;
        }
    }
    memset(n->key_hash, 0, sizeof(n->key_hash));
    memset(n->key_count, 0, sizeof(n->key_count));
    n->n_keys = 0;
    return count(n, h);
}

void st_sim_noise_request(struct st_sim_noise *n, uint64_t engine_seed, const char *key, size_t len,
                          double *factor, uint64_t *seed)
{
    static const char tag[] = "servetune sim request key";
    uint64_t kh = st_hash_update(ST_HASH_INIT, tag, sizeof(tag) - 1);
    kh = st_hash_update(kh, key ? key : "", key ? len : 0);
    uint64_t k = count(n, st_hash_mix(kh));
    *seed = st_hash_mix(st_hash_u64(st_hash_u64(kh, k), engine_seed));
    *factor = 1.0;
    if (n->noise_cv > 0) {
        struct st_rng r;
        st_rng_seed(&r, st_hash_mix(st_hash_u64(st_hash_u64(kh, k), n->seed)));
        *factor = st_rng_lognormal_cv(&r, n->noise_cv);
    }
}
