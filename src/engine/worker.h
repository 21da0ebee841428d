/*
 * One load worker (internal to the engine): a thread that owns an event base, a libcurl multi
 * handle, its in-flight requests and its metrics. See run.h for the model and
 * docs/internals/engine.md for the request state machine.
 */
#ifndef ST_ENGINE_WORKER_H
#define ST_ENGINE_WORKER_H

#include <pthread.h>
#include <stdint.h>

#include "base/status.h"
#include "engine/metrics.h"
#include "engine/run.h"

struct st_worker;

struct st_worker_share {
    uint32_t index; /* 0..workers-1 */
    uint32_t workers;
    uint32_t slots; /* closed loop: concurrent requests; open loop: cap (0 = none) */
    uint64_t quota; /* closed loop: requests to issue (UINT64_MAX = until duration) */
    uint64_t t0;    /* common start time, monotonic ns */
    /* Virtual clock (cfg->virtual_clock): the run's session. */
    const char *session; /* borrowed from the run */
    uint32_t slot0;      /* closed loop: the global index of the worker's first slot */
    uint32_t streams;    /* the session's streams: slots with requests (closed), workers (open) */
};

/* Creates a worker; returns NULL (err filled) when its event base or multi handle fails. */
struct st_worker *st_worker_new(const struct st_load_cfg *cfg, const struct st_worker_share *sh,
                                char *err, size_t errlen);
/* Starts the worker's thread. Returns 0 or a negated errno. */
int st_worker_spawn(struct st_worker *w) ST_WUR;
/* Waits for the worker's thread to end. */
void st_worker_join(struct st_worker *w);
/* Thread-safe: asks the worker to stop (see st_run_stop). */
void st_worker_stop(struct st_worker *w, int immediate);
void st_worker_progress(struct st_worker *w, struct st_run_progress *p);
int st_worker_finished(struct st_worker *w);
/* After the thread ended: adds the worker's results into res. */
void st_worker_collect(struct st_worker *w, struct st_run_result *res);
void st_worker_free(struct st_worker *w);

#endif
