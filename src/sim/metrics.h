/*
 * Model-mode /metrics: a fixed-bucket histogram and the Prometheus text exposition of the
 * simulator's counters under each dialect's real series names, types and HELP lines (vLLM,
 * SGLang, llama.cpp; docs/sim.md lists them). Pure: renders a snapshot the caller took.
 * Not a Prometheus client: there is one exposition per scrape, built from scratch.
 */
#ifndef ST_SIM_METRICS_H
#define ST_SIM_METRICS_H

#include <stdint.h>

#include "base/buf.h"
#include "sim/model/batch.h"
#include "sim/model/memory.h"
#include "sim/model/profile.h"

#define ST_SIM_HIST_MAX 32

/* A cumulative histogram with fixed upper bounds, as Prometheus exposes it. */
struct st_sim_hist {
    uint32_t n;                           /* finite bounds */
    double le[ST_SIM_HIST_MAX];           /* increasing upper bounds */
    uint64_t counts[ST_SIM_HIST_MAX + 1]; /* per bucket, not cumulative; [n] is +Inf */
    double sum;
    uint64_t count;
};

/* The dialect's TTFT buckets (vLLM's and SGLang's defaults; llama.cpp has none, vLLM's used). */
void st_sim_hist_init_ttft(struct st_sim_hist *h, enum st_dialect d);
/* Counts v in the first bucket whose bound is >= v (le is inclusive, as in Prometheus). */
void st_sim_hist_observe(struct st_sim_hist *h, double v);

/* Everything a scrape shows. Counters are cumulative since start; times are virtual seconds. */
struct st_sim_metrics {
    struct st_batch_stats bs; /* the engine's counters and gauges */
    uint64_t requests_total;  /* completion requests accepted by the engine */
    uint64_t requests_finished;
    uint64_t requests_aborted;       /* client gone before the end */
    struct st_sim_hist ttft;         /* submit -> first token delivered, virtual seconds */
    double prompt_seconds;           /* finished requests: admission -> first token */
    double predicted_seconds;        /* finished requests: first token -> last token */
    uint64_t prompt_tokens_done;     /* finished requests: prompt tokens computed (uncached) */
    uint64_t predicted_tokens_done;  /* finished requests: output tokens */
    uint64_t n_tokens_max;           /* largest prompt + output of a finished request */
    uint64_t busy_slot_steps;        /* sum over steps of running requests */
    double gen_throughput;           /* output tokens / duration of the last step, tokens/s */
    uint64_t spec_drafts_at_flush;   /* spec counters at the last cache flush (SGLang's average */
    uint64_t spec_accepted_at_flush; /* accept length restarts there) */
    /* The clock (live.h): its pacing and how well it kept it. */
    double speed;             /* virtual seconds per real second; 0: unpaced */
    uint64_t clock_events;    /* step ends and arrivals processed */
    uint64_t lag_max_ns;      /* real ns the latest of them came after its paced time */
    uint64_t lag_events;      /* of them, more than 1 ms late */
    uint64_t late_arrivals;   /* declared requests not placed at their declared time */
    uint64_t late_max_ns;     /* virtual ns the latest of them was placed after it */
    uint64_t expired_streams; /* declared streams given up on (no request for 30 s) */
    uint64_t parked;          /* declared requests received before an earlier one of their stream */
    uint32_t sessions;        /* declared sessions alive */
};

/*
 * Appends the exposition for p's dialect: HELP and TYPE lines, then samples. vLLM samples carry
 * {engine="0",model_name=M} (and finished_reason / position where the real series do), SGLang's
 * {model_name=M}, llama.cpp's none. model is borrowed for the call; m and plan are read only.
 */
void st_sim_metrics_render(struct st_buf *out, const struct st_profile *p,
                           const struct st_mem_plan *plan, const char *model,
                           const struct st_sim_metrics *m);

/* SGLang's avg_spec_accept_length since the last flush: 1 + accepted / drafts (0 drafts: 1). */
double st_sim_metrics_accept_length(const struct st_sim_metrics *m);

#endif
