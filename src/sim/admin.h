/*
 * Model-mode routes other than the completions: health, models, tokenize, server info, props,
 * slots, metrics, and the cache-flush routes with each engine's failure modes (SGLang
 * /flush_cache 400 while requests run or wait, ?timeout=S waits for idle; vLLM
 * /reset_prefix_cache 404 unless --dev-mode; llama.cpp POST /slots/{id}?action=erase 501 without
 * --slot-save-path). docs/sim.md lists every route per dialect. An evhttp shell over the pure
 * renderers (dialect.h, info.h, metrics.h); the engine state comes from live.h. One thread.
 */
#ifndef ST_SIM_ADMIN_H
#define ST_SIM_ADMIN_H

#include <stddef.h>
#include <stdint.h>

#include <event2/http.h>

#include "base/buf.h"
#include "base/json.h"
#include "sim/live.h"
#include "sim/model/profile.h"

struct st_sim_admin_cfg {
    struct st_sim_live *live;   /* borrowed; outlives the admin */
    const struct st_profile *p; /* borrowed; outlives the admin */
    const char *model;          /* borrowed; outlives the admin */
    const char *scale;          /* borrowed: the X-Sim-Time-Scale value */
    int dev_mode;               /* vLLM's VLLM_SERVER_DEV_MODE=1 */
    const char *slot_save_path; /* llama.cpp --slot-save-path; NULL = not set */
    int64_t created_unix_s;     /* start time */
    uint64_t metrics_delay_ns;  /* fault metrics_busy_delay_s: /metrics answered this much
                                 * virtual time late while the engine is busy; 0 = at once */
    struct st_json *doc;        /* borrowed scratch: request bodies */
    struct st_buf *scratch;     /* borrowed scratch */
};

struct st_sim_admin;

struct st_sim_admin *st_sim_admin_new(const struct st_sim_admin_cfg *cfg);
/* Answers waiting flushes with 400 (the server is going away) and frees a. NULL is a no-op. */
void st_sim_admin_free(struct st_sim_admin *a);
/* Start-up is over: /health answers 200 from now on. */
void st_sim_admin_set_ready(struct st_sim_admin *a);
int st_sim_admin_ready(const struct st_sim_admin *a);

/*
 * Answers req if path is one of the admin routes (any method; a wrong method gets the dialect's
 * 405) or an unknown path (the dialect's 404). Returns 1 when it answered or parked the request
 * (a /flush_cache?timeout= wait, a delayed /metrics), 0 for the completion routes, which the
 * caller serves.
 */
int st_sim_admin_route(struct st_sim_admin *a, struct evhttp_request *req, const char *path,
                       enum evhttp_cmd_type cmd);
/* The engine went idle: waiting /flush_cache requests flush and get 200. */
void st_sim_admin_idle(struct st_sim_admin *a);

/* Sends a whole reply now with Content-Type ctype and X-Sim-Time-Scale scale (and X-Sim-Clock:
 * virtual when virt, in model mode); body is copied. */
void st_sim_http_send(struct evhttp_request *req, int code, const char *ctype, const char *body,
                      size_t len, const char *scale, int virt);
/* The dialect's error body (dialect.h) as a JSON reply. */
void st_sim_http_error(struct evhttp_request *req, enum st_dialect d, int code, const char *message,
                       const char *scale, struct st_buf *scratch);

#endif
