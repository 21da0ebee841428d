/*
 * A load run: W worker threads, each with its own libevent base and libcurl multi handle, driving
 * OpenAI-compatible streaming requests in a closed loop (--concurrency) or an open loop (--rate,
 * Poisson or constant arrivals, optional --max-concurrency). Workers share nothing mutable but
 * the receipts file (whole-line O_APPEND writes) and a few single-writer progress counters;
 * their metrics are merged when they end. Latency always counts from the intended send time.
 *
 * Thread context: st_run_start/_stop/_progress/_finish are called from one controlling thread
 * (the CLI's main thread); workers never call back into it.
 */
#ifndef ST_ENGINE_RUN_H
#define ST_ENGINE_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/status.h"
#include "engine/metrics.h"
#include "engine/sched.h"
#include "proto/oaireq.h"
#include "store/receipts.h"
#include "workload/item.h"

enum st_http {
    ST_HTTP_1_1 = 1, /* HTTP/1.1 with keep-alive (h2 over TLS still offered through ALPN) */
    ST_HTTP_2,       /* HTTP/2: ALPN on TLS, Upgrade on cleartext */
    ST_HTTP_H2C,     /* HTTP/2 with prior knowledge on cleartext */
};

struct st_load_cfg {
    const char *base_url; /* borrowed: scheme://host[:port][/prefix], no trailing slash */
    enum st_api api;
    const char *model; /* borrowed; NULL omits the field */
    int stream;
    int include_usage;
    uint32_t concurrency; /* closed loop when rate == 0 */
    double rate;          /* > 0: open loop, requests per second */
    enum st_arrival arrival;
    uint64_t sched_seed;
    uint32_t max_concurrency; /* open loop cap on in-flight requests; 0 = none */
    uint64_t requests;        /* total to issue, warmup included; 0 = until duration */
    double duration_s;        /* stop issuing after this; 0 = no limit */
    uint64_t warmup;          /* requests with id < warmup are excluded from statistics */
    int64_t input_len;        /* prompt length in tokens (about 4 bytes each) */
    int64_t output_len;       /* max_tokens; < 0 omits */
    int ignore_eos;           /* also sends min_tokens = output_len */
    int has_temperature;
    double temperature;
    int has_seed;
    int64_t seed;
    uint64_t prompt_seed;
    st_req_source_fn source; /* NULL: synthetic prompts of input_len tokens (workload/synth.h) */
    const void *source_ctx;  /* borrowed; outlives the run */
    int trace_arrivals;      /* open loop: intended times come from the items' t_offset_ns */
    const char *extra_body;  /* borrowed JSON object text or NULL */
    const char *api_key;     /* borrowed secret; sent only in the Authorization header */
    uint64_t connect_timeout_ms;
    uint64_t headers_timeout_ms;     /* 0 = none */
    uint64_t first_token_timeout_ms; /* 0 = none */
    uint64_t idle_timeout_ms;        /* 0 = none */
    uint64_t total_timeout_ms;       /* 0 = none */
    uint32_t workers;
    enum st_http http;
    int insecure;
    int save_text;
    int chunk_times;
    uint64_t grace_ms;            /* after a stop, in-flight requests get this long */
    size_t max_event_bytes;       /* SSE event bound */
    struct st_receipts *receipts; /* borrowed; outlives the run */
    double time_scale; /* the simulator's X-Sim-Time-Scale (its pacing speed, for the record) */
    /* The target is our simulator's virtual clock (X-Sim-Clock: virtual): the run declares a
     * session of streams (docs/sim.md, "Virtual time") and measures from its stamps; a closed
     * loop's slot then issues ids slot, slot + concurrency, ... and --duration is virtual. */
    int virtual_clock;
};

/* Defaults for every field (closed loop, 1 worker, chat, stream, usage, 1 MiB events...). */
void st_load_cfg_defaults(struct st_load_cfg *c);

struct st_run_progress {
    uint64_t done; /* requests finished (ok or failed, warmup included) */
    uint64_t ok;
    uint64_t failed;
    uint64_t tokens; /* output tokens of ok requests */
    uint64_t inflight;
};

struct st_run_result {
    struct st_metrics m; /* merged; release with st_run_result_release */
    uint64_t issued;
    uint64_t done;
    uint64_t not_sent; /* open-loop arrivals queued in the client when the run stopped */
    uint64_t t_start;  /* monotonic ns when workers started */
    uint64_t t_stop;   /* when the last worker ended */
    uint64_t cpu_ns;   /* CPU time of all worker threads */
    uint32_t workers;
    int interrupted;
    int receipts_error; /* negated errno of the first failed receipt write, or 0 */
};

struct st_run;

/*
 * Starts the workers. Returns 0 with *out set, or ST_EUSAGE (message in err) when cfg is
 * inconsistent, or a negated errno when a thread or event base cannot be created.
 */
int st_run_start(struct st_run **out, const struct st_load_cfg *cfg, char *err,
                 size_t errlen) ST_WUR;
/*
 * Asks every worker to stop issuing requests. immediate == 0: in-flight requests get grace_ms,
 * then are aborted as interrupted; immediate != 0: they are aborted at once.
 */
void st_run_stop(struct st_run *r, int immediate);
/* Fills p with live counters. Returns 1 when every worker has ended. */
int st_run_progress(struct st_run *r, struct st_run_progress *p);
/* Joins the workers and fills res. r is freed. */
void st_run_finish(struct st_run *r, struct st_run_result *res);
void st_run_result_release(struct st_run_result *res);

/* Appends the summary JSON document (docs/metrics.md, docs/internals/formats.md) for a finished
 * run: what `servetune bench --json` prints. */
void st_run_summary_json(const struct st_load_cfg *cfg, const struct st_run_result *res,
                         const char *receipts_path, struct st_buf *out);

/* What a campaign step reads back from st_run_summary_json's document (a child's bench or soak
 * output). Counts of the measured requests; tokens/s and the window in s are NaN when null or
 * absent. */
struct st_run_digest {
    double ok, failed;
    double output_tokens_per_s;
    double duration_s;
};

/*
 * Reads d (a parsed st_run_summary_json document; borrowed) into *out. The writer and this
 * reader are one file's (run.c), so their keys cannot drift apart. Returns 0, or ST_EPARSE with
 * the field named in err: no "requests" object, requests.ok or requests.failed missing or not a
 * number, or output_tokens_per_s not a number.
 */
int st_run_summary_read(const struct st_json *d, struct st_run_digest *out, char *err,
                        size_t errlen) ST_WUR;

#endif
