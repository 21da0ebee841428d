/*
 * Before any load: check that the URL is well formed and that an OpenAI-compatible server answers
 * there (GET <base>/v1/models gives 200 and a JSON model list), and learn the default model.
 * Blocking; runs on the controlling thread before workers start.
 */
#ifndef ST_ENGINE_PREFLIGHT_H
#define ST_ENGINE_PREFLIGHT_H

#include <stdint.h>

#include "base/buf.h"
#include "base/status.h"
#include "engine/run.h"

/*
 * Normalises a user URL to the base the engine appends /v1/... to: http or https only, a host,
 * no query or fragment, no trailing '/', and a trailing "/v1" removed. Returns 0 or ST_EUSAGE
 * with a message naming the URL and what was expected.
 */
int st_url_base(const char *url, struct st_buf *out, char *err, size_t errlen) ST_WUR;

struct st_preflight {
    long status;
    int n_models;
    char first_model[256]; /* "" when the list is empty */
    double time_scale;     /* X-Sim-Time-Scale of our simulator (its pacing speed), else 1 */
    int virtual_clock;     /* X-Sim-Clock: virtual (our model-mode simulator stamps its events) */
};

/*
 * GET <base>/v1/models. Returns 0 when the server answered 200 with {"data":[...]}; otherwise
 * ST_ESERVER with a message naming the URL, what came back and what was expected.
 */
int st_preflight_run(const struct st_load_cfg *cfg, uint64_t timeout_ms, struct st_preflight *out,
                     char *err, size_t errlen) ST_WUR;

#endif
