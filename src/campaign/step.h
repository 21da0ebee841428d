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

#include "base/buf.h"
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
    /* Passed on as --timeout-first-token / --timeout-idle (ms, wall time) when non-zero; the
     * runner scales the commands' defaults (900 s, 120 s) by a simulator's speed, so a stalling
     * arm ends in bounded time. 0: the command's default. */
    uint64_t timeout_first_token_ms, timeout_idle_ms;
    /* Virtual seconds per wall second of a simulator target (its --speed), else 0 or 1. For the
     * record only: against the simulator the children measure in its virtual time (they read
     * its stamps) and a soak's duration_s is passed as is. */
    double time_scale;
    uint64_t context_tokens; /* the server's context (0: unknown) */
    /* A simulator target's noise key for this unit's requests (--extra-body
     * {"servetune_noise_key": KEY}), or NULL: nothing extra in the bodies. */
    const char *noise_key;
    st_step_tick_fn tick; /* may be NULL */
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
    int invalid;       /* a child's JSON said the simulator's clock did not hold: its metrics are
                        * left out and detail says why (docs/campaign-steps.md) */
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

/* ---- Pure parts, exported for tests (docs/campaign-steps.md defines each) ---- */

/* Children one repeat of s runs: a bench step one per category (one when it has none), every
 * other kind one. */
uint32_t st_step_children(const struct st_plan_step *s);

/* The name of child i's point: the category of a bench step, else NULL (the point of a sweep or
 * probe metric is its concurrency, read from the child's JSON). */
const char *st_step_point(const struct st_plan_step *s, uint32_t i);

/*
 * The prompt seed: a deterministic function (FNV-1a over the fields, then a splitmix64 finish) of
 * the campaign's seed, the step's kind, its input and output lengths and the category (NULL and
 * "" are the same: none), shifted to 63 bits (qualify's --seed takes at most INT64_MAX). Not of the
 * step id, the repeat or the arm: every arm, and every step with the same kind and lengths, sends
 * the same prompts. A qualify step passes its suite name as the category and 0 lengths. Pure.
 */
uint64_t st_step_prompt_seed(uint64_t campaign_seed, enum st_plan_step_kind kind,
                             uint64_t input_tokens, uint64_t output_tokens, const char *category);

#define ST_STEP_PATH_MAX 1024

/* A qualify step's suite as qualify takes it. */
struct st_step_suite {
    char suite[ST_STEP_PATH_MAX]; /* --suite: "screening", "quality" or a file's path */
    char effort[16];              /* --reasoning-effort, "" for none */
};

/*
 * Resolves a plan's suite name: "screening" and "quality" are built in; "quality-EFFORT" with
 * EFFORT one of low, medium, high, xhigh is the quality suite at that reasoning effort; any other
 * name is a suite YAML file: NAME, NAME.yaml, suites/NAME.yaml, each relative to plan_dir (NULL:
 * the working directory) unless NAME is absolute; the first that is a regular file wins. Returns
 * 0; ST_ENOTFOUND with every tried path in err; ST_ETOOBIG for a path over ST_STEP_PATH_MAX.
 * Reads only the file system's metadata (stat).
 */
int st_step_suite_resolve(const char *name, const char *plan_dir, struct st_step_suite *out,
                          char *err, size_t errlen) ST_WUR;

/* A child's argument vector. */
struct st_step_argv {
    char **argv; /* owned, argc strings (each owned) and a NULL */
    size_t argc;
};
void st_step_argv_release(struct st_step_argv *a);
/* The argv as one line (arguments with spaces or quotes single-quoted), appended to out. */
void st_step_argv_line(const struct st_step_argv *a, struct st_buf *out);

/*
 * The argv of child i (< st_step_children(s)) of s under e: e->self_exe, the subcommand and its
 * options, every output path inside e->dir (docs/campaign-steps.md lists them per kind). Uses
 * e->self_exe, url, dir, seed, api_key_file, context_tokens, compare_json and, for a qualify
 * step, st_step_suite_resolve against e->plan_dir. Returns 0 with *out filled (release it);
 * ST_ENOTFOUND from the suite resolver; ST_EUSAGE for a step it cannot run (a kind out of range,
 * a sweep or probe without concurrency levels), err says which.
 */
int st_step_argv_build(const struct st_plan_step *s, const struct st_step_env *e, uint32_t i,
                       struct st_step_argv *out, char *err, size_t errlen) ST_WUR;

/* What a receipts file of a bench, sweep or probe child holds (docs/metrics.md's fields), in the
 * client's real seconds: the time scale is applied by st_step_extract. */
struct st_step_rcpts {
    uint64_t lines;     /* receipt lines */
    uint64_t ok;        /* measured (not warmup) ok requests */
    uint64_t errors;    /* requests that ended in an error ("ok": false) */
    double *ttft_s;     /* owned, n: t_intended -> t_first_content of each measured ok request,
                         * in the order of the requests' ids (not of their ends) */
    double *e2e_s;      /* owned, n: t_intended -> t_end, in the same order */
    double *id;         /* owned, n: their ids */
    double *decode_tps; /* owned, n_decode: (completion_tokens - 1) / (t_last - t_first
                         * content), requests with at least 2 output tokens and last > first */
    size_t n, n_decode;
    /* Against the simulator's virtual clock the times are its virtual ones (the receipts'
     * v_*_ns); elsewhere the client's. */
};
void st_step_rcpts_init(struct st_step_rcpts *c);
void st_step_rcpts_release(struct st_step_rcpts *c);
/*
 * Pure: adds the receipts in text[0..len) (JSON Lines) to c. A qualify receipt (no "ok" field)
 * counts as an error when its "http_status" is not 200. A line that is not a JSON object counts
 * as a line and an error. Returns 0.
 */
int st_step_rcpts_parse(struct st_step_rcpts *c, const char *text, size_t len) ST_WUR;

/*
 * Pure: the metrics of child i of s from its JSON (json[0..len): bench's --json, sweep.json,
 * probe.json or qualify.json) and its measured receipts rc[0..n_rc) (bench and soak: the point's
 * receipts, rc[0]; probe: the scoring pass of each concurrency level, in the step's order;
 * sweep: optional, the measured repeat of each level, for r->ttft_s only; qualify: none, pass 0),
 * appended to r as "STEP.METRIC[@POINT]" (a metric without a sample is left out, and detail says
 * so). The TTFTs of rc go to r->ttft_s in the metrics' seconds (virtual against a time-scaled
 * sim). A qualify child also sets r->functional_ok and quality_ok. Returns 0; ST_EPARSE when the
 * JSON is malformed or not the kind's shape (err says what was missing).
 */
int st_step_extract(const struct st_plan_step *s, uint32_t i, const char *json, size_t len,
                    const struct st_step_rcpts *rc, size_t n_rc, struct st_step_result *r,
                    char *err, size_t errlen) ST_WUR;

#endif
