/*
 * The simulator's model mode, live: one st_batch engine (sim/model/batch.h) driven by a virtual
 * clock and one step timer on the server's event base. virtual_ns = (mono_now - t0) * speed.
 * While the engine has work, the driver plans a step at virtual now, arms the timer for
 * duration / speed of real time, and when it fires hands the step's events to the callbacks
 * registered per request (tokens, first token, finished, preempted), then steps again. So a
 * chunk that carries several tokens is one engine step that accepted several speculative tokens.
 *
 * It also keeps the counters /metrics shows (sim/metrics.h), the TTFT histogram measured in
 * virtual time from submission to the delivery of the first token. It does not speak HTTP.
 * One thread: the event base's. Expected workload: up to thousands of requests in flight, steps
 * of microseconds to seconds of virtual time.
 */
#ifndef ST_SIM_LIVE_H
#define ST_SIM_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

#include "base/status.h"
#include "sim/metrics.h"
#include "sim/model/batch.h"
#include "sim/model/profile.h"

/*
 * A request's part of a step that started at virtual time start_ns and whose events are handed
 * over at end_ns (its end, or later when the timer fired late). Called from the timer (or from
 * submit, abort, flush or pressure when a step takes no time); may call st_sim_live_abort (for
 * any id) but not submit, flush, pressure or free. After an event with finished set the request
 * is forgotten and its callback is never called again.
 */
typedef void (*st_sim_live_cb)(void *arg, const struct st_batch_event *ev, uint64_t start_ns,
                               uint64_t end_ns);
/* The engine has nothing running or waiting (after a step, an abort or a flush). */
typedef void (*st_sim_live_idle_cb)(void *arg);

struct st_sim_live_cfg {
    struct event_base *base;     /* borrowed; outlives the driver */
    const struct st_profile *p;  /* copied */
    uint64_t seed;               /* the engine's seed (speculative acceptance draws) */
    double speed;                /* virtual seconds per real second, > 0 */
    uint64_t t0_mono_ns;         /* real time of virtual 0 */
    st_sim_live_idle_cb idle_cb; /* may be NULL */
    void *idle_arg;
};

struct st_sim_live;

/*
 * Creates the engine. Returns 0; ST_EPARSE when st_batch_new refuses the profile (its memory plan
 * does not fit, or a rank's pool is empty or too large); -ENOMEM when libevent cannot allocate.
 */
int st_sim_live_new(const struct st_sim_live_cfg *cfg, struct st_sim_live **out) ST_WUR;
/* Frees the engine and its timer; registered callbacks are never called. NULL is a no-op. */
void st_sim_live_free(struct st_sim_live *l);

/* Virtual now, ns since start. */
uint64_t st_sim_live_vnow(const struct st_sim_live *l);
/* Real nanoseconds that virtual_s virtual seconds last. */
uint64_t st_sim_live_real_ns(const struct st_sim_live *l, double virtual_s);

/*
 * Queues request id (unique among those in flight) with its prompt's block hashes (copied) and
 * registers cb/arg for its events. Returns 0, or the error of st_batch_submit (ST_ETOOBIG with
 * the dialect's over-context message in err, -EINVAL, -EEXIST); cb is then never called.
 */
int st_sim_live_submit(struct st_sim_live *l, uint64_t id, uint64_t prompt_tokens,
                       const uint64_t *hashes, uint32_t n_hashes, uint32_t max_tokens,
                       st_sim_live_cb cb, void *arg, char *err, size_t errlen) ST_WUR;
/* The staged noise (sim/noise.h): the next submitted request's step-time factor and, with
 * reseed, the seed of its own draws (st_batch_set_noise, st_batch_reseed), applied before its
 * first step and then forgotten; and the launch's factor (st_batch_set_scale). */
void st_sim_live_next_noise(struct st_sim_live *l, double factor, int reseed, uint64_t seed);
void st_sim_live_set_scale(struct st_sim_live *l, double factor);
/* The client is gone: the engine forgets id (its KV is released) and its callback is dropped.
 * A no-op for an id that finished or was never submitted. */
void st_sim_live_abort(struct st_sim_live *l, uint64_t id);
/* Empties the prefix cache (blocks in use stay) and restarts SGLang's accept-length average.
 * Plans nothing and calls no callback (safe from the idle callback). */
void st_sim_live_flush(struct st_sim_live *l);
/* Some request is running or waiting in the engine. */
int st_sim_live_busy(const struct st_sim_live *l);
/* Takes blocks out of every rank's pool (0 gives them back); see st_batch_pressure. */
void st_sim_live_pressure(struct st_sim_live *l, uint64_t blocks);
/* A snapshot of the counters for /metrics and the info routes. */
void st_sim_live_metrics(const struct st_sim_live *l, struct st_sim_metrics *out);
/* One DP rank's view (rank < metrics bs.ranks); see st_batch_get_rank. */
void st_sim_live_rank(const struct st_sim_live *l, uint32_t rank, struct st_batch_rank *out);
/* The engine's memory plan (borrowed; valid until st_sim_live_free). */
const struct st_mem_plan *st_sim_live_plan(const struct st_sim_live *l);

#endif
