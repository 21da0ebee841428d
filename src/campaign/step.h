/*
 * One unit of a campaign stage: one repeat of one step against one running arm. The step runs
 * as a child process of the servetune binary itself (bench, sweep, probe, qualify: the same code
 * and the same receipts as when a user runs them), with its stdout, stderr, JSON and receipts
 * in the unit's folder; this module builds its arguments, watches it, and turns its JSON into
 * the metrics the plan's rules name (docs/campaigns.md, "Metrics"):
 *
 *   bench   STEP.decode_tps, output_tps, completed, ttft_s, e2e_s   [@CATEGORY]
 *   sweep   STEP.output_tps, hit_rate, ttft_s, tpot_s               @ccN
 *   probe   STEP.max_docs; STEP.decode_tps, queued, ttft_max_s      @ccN
 *   soak    STEP.output_tps, completed, ttft_s, error_rate
 *   qualify STEP.pass_count, fail_count (+ the functional/quality gate outcomes)
 *
 * Prompts depend on the campaign seed, the step's lengths and the category, never on the arm or
 * the step id: every arm gets the same requests, and a step that repeats another's lengths
 * (long128k_repeat) sends the same prompt, so it meets the prefix cache as the seed's did.
 *
 * Thread context: the runner's (main) thread.
 */
#ifndef ST_CAMPAIGN_STEP_H
#define ST_CAMPAIGN_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "campaign/plan.h"

/* Called about every tick_ms while the child runs; a non-zero return stops the child (SIGTERM,
 * then SIGKILL after 5 s) and the unit counts as aborted (the server died, a signal came). */
typedef int (*st_step_tick_fn)(void *ctx);

struct st_step_env {
    const char *self_exe; /* the servetune binary */
    const char *url;      /* the arm's base URL */
    const char *plan_dir; /* suite files named by path resolve against it */
    const char *dir;      /* this unit's folder (the caller creates it; outputs go there) */
    uint32_t repeat;      /* 0-based repeat index */
    uint64_t seed;        /* the campaign's seed */
    /* qualify: the baseline's qualify.json for the same step (qualify --compare), or NULL (this
     * is the baseline: no regression can be judged). */
    const char *compare_json;
    const char *api_key_file; /* passed on as --api-key-file, or NULL */
    uint64_t context_tokens;  /* the server's context (0: unknown) */
    st_step_tick_fn tick;     /* may be NULL */
    void *tick_ctx;
    uint32_t tick_ms; /* 0: 1000 */
};

struct st_step_value {
    char name[ST_PLAN_METRIC_MAX]; /* "STEP.METRIC" or "STEP.METRIC@POINT" */
    double v;
};

struct st_step_result {
    struct st_step_value *v; /* owned, n */
    size_t n, cap;
    int exit_code; /* the child's exit code; 128 + signal when killed by one */
    int aborted;   /* the tick stopped it */
    /* qualify only, else -1: 1 when no check regressed against compare_json (functional: the
     * screening checks; quality: the quality questions); without compare_json, 1 when every
     * check passed. */
    int functional_ok, quality_ok;
    char detail[512];  /* one line: what failed, or "" */
    uint64_t receipts; /* receipt lines the child wrote */
    uint64_t errors;   /* requests that ended in an error */
    double *ttft_s;    /* owned, n_ttft: every successful request's TTFT, for the report */
    size_t n_ttft;
    char argv_line[1024]; /* the child's command line, for the evidence (no secrets in it) */
};
void st_step_result_init(struct st_step_result *r);
void st_step_result_release(struct st_step_result *r);
/* The value named name, or NULL. */
const struct st_step_value *st_step_result_find(const struct st_step_result *r, const char *name);

/*
 * Runs repeat e->repeat of step s against e->url. Returns 0 with *r filled when the child ran
 * (whatever it found: errors and failed checks are in r), or an error when it could not be run
 * or its JSON is missing or malformed (err says which file; r->exit_code is still filled).
 */
int st_step_run(const struct st_plan_step *s, const struct st_step_env *e, struct st_step_result *r,
                char *err, size_t errlen) ST_WUR;

#endif
