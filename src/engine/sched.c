/*
 * Arrival schedules. See sched.h.
 */
#include "engine/sched.h"

#include "base/clock.h"

void st_sched_init(struct st_sched *s, enum st_arrival kind, double rate_per_s, uint64_t seed)
{
    s->kind = kind;
    s->rate_per_s = rate_per_s;
    st_rng_seed(&s->rng, seed);
    s->next_idx = 0;
    s->t_ns = 0.0;
}

uint64_t st_sched_next(struct st_sched *s)
{
    uint64_t at = (uint64_t)(s->t_ns + 0.5);
    double mean_gap_ns = (double)ST_NS_PER_S / s->rate_per_s;
    double gap = s->kind == ST_ARRIVAL_CONSTANT ? mean_gap_ns : st_rng_exp(&s->rng, mean_gap_ns);
    s->t_ns += gap;
    s->next_idx++;
    return at;
}
