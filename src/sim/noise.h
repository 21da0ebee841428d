/*
 * The simulator's staged measurement noise (profile perf.noise_cv, perf.bringup_cv,
 * perf.noise_seed): seeded, reproducible factors on step times, so a campaign's statistics can be
 * tested against noise of a known size. A launch draws one factor (its bring-up); each request
 * one of its own, from the launch's noise seed, the request's noise key and how many requests
 * with that key came before in this launch: a client that names its requests (the campaign
 * runner sends "servetune_noise_key": UNIT in each body) gets the same draws whatever else the
 * launch served, so a resumed campaign repeats what the interrupted one measured. Requests without
 * a key share the key "". The same key also seeds the request's own draws (speculative
 * acceptance), so a unit's results do not depend on what the launch served before it. Pure; the
 * caller applies the factors and seeds (st_batch_set_noise/_scale, st_batch_reseed).
 */
#ifndef ST_SIM_NOISE_H
#define ST_SIM_NOISE_H

#include <stddef.h>
#include <stdint.h>

#include "sim/model/profile.h"

#define ST_SIM_NOISE_KEYS 1024 /* keys remembered per launch; more start counting afresh */

struct st_sim_noise {
    double noise_cv, bringup_cv;
    uint64_t seed;
    uint64_t key_hash[ST_SIM_NOISE_KEYS]; /* 0 = free */
    uint64_t key_count[ST_SIM_NOISE_KEYS];
    uint32_t n_keys;
};

/* From the profile's perf section (seed: perf.noise_seed, or the profile's seed when 0). */
void st_sim_noise_init(struct st_sim_noise *n, const struct st_profile *p);
/* The launch's factor (1 without bringup_cv). */
double st_sim_noise_launch(const struct st_sim_noise *n);
/*
 * The next request with key[0..len): *factor its step-time factor (1 without noise_cv), *seed
 * the seed of its own random draws (speculative acceptance), a function of engine_seed, the key
 * and how many requests with it came before, so a resumed unit draws what it drew before.
 */
void st_sim_noise_request(struct st_sim_noise *n, uint64_t engine_seed, const char *key, size_t len,
                          double *factor, uint64_t *seed);

#endif
