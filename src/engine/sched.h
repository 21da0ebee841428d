/*
 * Open-loop arrival schedules: the intended send time of every request, as an offset in ns from
 * the run's start. Poisson (exponential gaps with mean 1/rate, seeded) or constant (gaps of exactly
 * 1/rate). Arrival 0 is at offset 0. The sequence depends only on (kind, rate, seed), so every
 * worker can walk the same schedule and take its own share (idx % workers == worker index).
 * Pure: no clock.
 */
#ifndef ST_ENGINE_SCHED_H
#define ST_ENGINE_SCHED_H

#include <stdint.h>

#include "base/rng.h"

enum st_arrival {
    ST_ARRIVAL_POISSON = 1,
    ST_ARRIVAL_CONSTANT,
};

struct st_sched {
    enum st_arrival kind;
    double rate_per_s;
    struct st_rng rng;
    uint64_t next_idx; /* index of the arrival st_sched_next returns next */
    double t_ns;       /* offset of that arrival, kept in double to avoid drift */
};

/* rate_per_s > 0. */
void st_sched_init(struct st_sched *s, enum st_arrival kind, double rate_per_s, uint64_t seed);
/* Returns the offset of arrival s->next_idx (before the call) and advances by one. */
uint64_t st_sched_next(struct st_sched *s);

#endif
