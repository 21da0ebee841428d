/*
 * The simulator's model mode, live: one st_batch engine (sim/model/batch.h) driven as a
 * conservatively synchronized discrete-event simulation on the server's event base. Its events
 * are the end of the engine step in flight, the arrivals of requests (each placed at a virtual
 * time: its declared one, sync.h, or the virtual now for an undeclared one), virtual timers
 * (start-up, faults, flush timeouts) and the planning of the next step. They are processed in
 * virtual-time order (at one time: step end, timers, arrivals, planning), never past the
 * horizon of the declared streams (sync.h), so what the engine does is a function of the
 * requests and their declared times only, not of when their bytes came.
 *
 * The wall clock only paces it: with a speed X (virtual seconds per real second) an event at
 * virtual t is processed no earlier than anchor + (t - anchor_v) / X, the anchor being set
 * whenever the simulation resumes after waiting for a client or being idle (so idle time runs
 * at X and a client's think time is not the simulator's delay). An event processed later than
 * that is late by its lag (real ns), which is reported with it. Speed 0 ("max") does not pace:
 * events run as fast as the CPU allows, idle time takes none (virtual time jumps to the next
 * event) and there is no lag.
 *
 * It keeps the counters /metrics shows (sim/metrics.h). It does not speak HTTP. One thread: the
 * event base's. Expected workload: up to thousands of requests in flight, steps of microseconds
 * to seconds of virtual time.
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
#include "sim/sync.h"

/*
 * A request's part of a step that ran from virtual start_ns to end_ns (absolute), handed over
 * at end_ns, lag_ns real ns after its paced time (0 unpaced). Called from the event loop; may
 * call st_sim_live_abort (any id) and st_sim_live_arr_end/abort, not st_sim_live_free. After an
 * event with finished set the request is forgotten and its callback is never called again.
 */
typedef void (*st_sim_live_cb)(void *arg, const struct st_batch_event *ev, uint64_t start_ns,
                               uint64_t end_ns, uint64_t lag_ns);
/* The engine has nothing running or waiting (after a step, an abort or a flush). */
typedef void (*st_sim_live_idle_cb)(void *arg);
/* A line for the log ("\n"-terminated). */
typedef void (*st_sim_live_log_cb)(void *arg, const char *text);

/* The X-Sim-Time-Scale an unpaced simulator (speed 0, "max") announces: a bound no pacing
 * reaches. */
#define ST_SIM_SPEED_MAX 1e9

struct st_sim_live_cfg {
    struct event_base *base;     /* borrowed; outlives the driver */
    const struct st_profile *p;  /* copied */
    uint64_t seed;               /* the engine's seed (speculative acceptance draws) */
    double speed;                /* virtual seconds per real second, > 0; 0: unpaced ("max") */
    uint64_t t0_mono_ns;         /* real time of virtual 0 */
    uint64_t slow_step_ns;       /* real ns slept at each step (fault: a starved host); 0 off */
    st_sim_live_idle_cb idle_cb; /* may be NULL */
    void *idle_arg;
    st_sim_live_log_cb log_cb; /* may be NULL */
    void *log_arg;
};

struct st_sim_live;

/*
 * Creates the engine. Returns 0; ST_EPARSE when st_batch_new refuses the profile (its memory plan
 * does not fit, or a rank's pool is empty or too large); -ENOMEM when libevent cannot allocate.
 */
int st_sim_live_new(const struct st_sim_live_cfg *cfg, struct st_sim_live **out) ST_WUR;
/* Frees the engine, its timers and pending arrivals; registered callbacks are never called.
 * NULL is a no-op. */
void st_sim_live_free(struct st_sim_live *l);

/* Virtual now (absolute ns): the time of the event being processed, else the time an
 * undeclared request arriving now is placed at. */
uint64_t st_sim_live_vnow(const struct st_sim_live *l);
/* Whether the driver paces against the wall clock (speed > 0). */
int st_sim_live_paced(const struct st_sim_live *l);

/* ---- arrivals ---- */

/* Where and how a request was placed. */
struct st_sim_live_place {
    uint64_t t_ns;          /* absolute virtual ns */
    uint64_t session_start; /* absolute virtual ns of its session's start (0: none) */
    uint64_t late_ns;       /* virtual ns it was placed after its declared time */
    int late;               /* declared but not honoured (late_ns may be 0: same time, next step) */
    uint64_t lag_ns;        /* real ns its placement came after its paced time */
};

/* The request's virtual arrival came: place it (submit it, answer it). Called from the loop. */
typedef void (*st_sim_live_place_cb)(void *arg, const struct st_sim_live_place *pl);

struct st_sim_live_arr;

/*
 * A request was received. h: its session headers, or NULL when it declares none (it is placed
 * at the virtual now). cb runs from the event loop at its placement, never from inside this call.
 * The handle lives until st_sim_live_arr_end or _abort. Returns 0; for a declaration the session
 * cannot honour (sync.h: another stream count, a done stream, over its cap, too many sessions)
 * the request is still accepted, placed at the virtual now and marked late.
 */
struct st_sim_live_arr *st_sim_live_arrive(struct st_sim_live *l, const struct st_sim_sync_hdr *h,
                                           st_sim_live_place_cb cb, void *arg);
/* The placed request ended (its last byte was produced) at virtual t_ns. Frees a. */
void st_sim_live_arr_end(struct st_sim_live *l, struct st_sim_live_arr *a, uint64_t t_ns);
/* The client left (before or after placement): its stream stops constraining. Frees a. */
void st_sim_live_arr_abort(struct st_sim_live *l, struct st_sim_live_arr *a);

/* ---- virtual timers ---- */

typedef void (*st_sim_live_timer_cb)(void *arg);
struct st_sim_live_timer;

struct st_sim_live_timer *st_sim_live_timer_new(struct st_sim_live *l, st_sim_live_timer_cb cb,
                                                void *arg);
/* Arms (or re-arms) t to fire at absolute virtual t_ns (not before the virtual now). */
void st_sim_live_timer_at(struct st_sim_live *l, struct st_sim_live_timer *t, uint64_t t_ns);
void st_sim_live_timer_stop(struct st_sim_live *l, struct st_sim_live_timer *t);
/* Stops and frees t. NULL is a no-op. */
void st_sim_live_timer_free(struct st_sim_live *l, struct st_sim_live_timer *t);

/* ---- the engine ---- */

/*
 * Queues request id (unique among those in flight) at the virtual now with its prompt's block
 * hashes (copied) and registers cb/arg for its events. Returns 0, or the error of
 * st_batch_submit (ST_ETOOBIG with the dialect's over-context message in err, -EINVAL, -EEXIST);
 * cb is then never called.
 */
int st_sim_live_submit(struct st_sim_live *l, uint64_t id, uint64_t prompt_tokens,
                       const uint64_t *hashes, uint32_t n_hashes, uint32_t max_tokens,
                       st_sim_live_cb cb, void *arg, char *err, size_t errlen) ST_WUR;
/* The staged noise (sim/noise.h): the next submitted request's step-time factor and, with
 * reseed, the seed of its own draws (st_batch_set_noise, st_batch_reseed), applied before its
 * first step and then forgotten; and the launch's factor (st_batch_set_scale). */
void st_sim_live_next_noise(struct st_sim_live *l, double factor, int reseed, uint64_t seed);
void st_sim_live_set_scale(struct st_sim_live *l, double factor);
/* llama.cpp's id_slot for the next submitted request (st_batch_pin_slot); < 0: any slot. */
void st_sim_live_next_slot(struct st_sim_live *l, int64_t slot);
/* The client is gone: the engine forgets id (its KV is released) and its callback is dropped.
 * A no-op for an id that finished or was never submitted. */
void st_sim_live_abort(struct st_sim_live *l, uint64_t id);
/* Empties the prefix cache (blocks in use stay) and restarts SGLang's accept-length average.
 * Plans nothing and calls no callback (safe from the idle callback). */
void st_sim_live_flush(struct st_sim_live *l);
/* llama.cpp's POST /slots/{id}?action=erase (st_batch_erase_slot): the tokens it erased. */
uint64_t st_sim_live_erase_slot(struct st_sim_live *l, uint32_t slot);
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
