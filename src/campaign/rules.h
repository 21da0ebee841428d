/*
 * Pre-registered decision rules for a campaign: given each arm's metric samples (repeats), its
 * gate outcomes and the baseline's samples, decide promote, reject or inconclusive, with a reason
 * that carries the numbers; then pick the final arm by a weighted composite. Pure: no I/O, no
 * clock, no allocation beyond st_summ's scratch. docs/campaigns.md ("Decision rules") is the
 * definition; tests/unit/test_campaign_rules.c checks it against hand-computed tables.
 *
 * Order of the rules for one arm (the first that fires decides):
 *   1. a failed gate outcome (functional/quality regression, OOM, server exit, context) -> reject;
 *   2. a limit gate on a metric aggregate (KV capacity floor, no queueing, ...) missed, or its
 *      metric without a value (the step that measures it produced none) -> reject;
 *   3. a guard metric worse than the baseline by more than its max_worse fraction -> reject;
 *   4. a ranked metric worse than the baseline by more than the noise threshold -> reject;
 *   5. fewer samples than the plan's repeats on a ranked metric -> inconclusive;
 *   6. a ranked metric better by more than the noise threshold -> promote;
 *   7. otherwise inconclusive (not enough evidence: the baseline stays).
 * A difference exactly at the noise threshold (within ST_RULES_EDGE) is not enough evidence.
 */
#ifndef ST_CAMPAIGN_RULES_H
#define ST_CAMPAIGN_RULES_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define ST_RULES_MAX_METRICS 64
/* Relative differences within this of a threshold count as at the threshold. */
#define ST_RULES_EDGE 1e-9
#define ST_RULES_DEFAULT_NOISE 0.05

enum st_rules_dir {
    ST_RULES_HIGHER = 1, /* higher is better (throughput, capacity) */
    ST_RULES_LOWER = 2,  /* lower is better (latency) */
};

enum st_rules_agg {
    ST_RULES_MEDIAN = 1, /* mean of the two middle values for even counts */
    ST_RULES_MEAN = 2,
    ST_RULES_MIN = 3,
    ST_RULES_MAX = 4,
};

enum st_rules_verdict {
    ST_RULES_PROMOTE = 1,
    ST_RULES_REJECT = 2,
    ST_RULES_INCONCLUSIVE = 3,
};

/* Which screened arms go on to the full stage. */
enum st_rules_escalation {
    ST_RULES_ESCALATE_PROMOTED = 1, /* every arm promoted in screening */
    ST_RULES_ESCALATE_BEST = 2,     /* only the one st_rules_choose picks from screening */
    ST_RULES_ESCALATE_ALL = 3,      /* every arm not rejected (promoted or inconclusive) */
};

/* A ranked metric: compared to the baseline against the noise threshold; weight for the composite.
 */
struct st_rules_metric {
    const char *name; /* borrowed, e.g. "decode2048.decode_tps@code" */
    enum st_rules_dir dir;
    enum st_rules_agg agg;
    uint32_t repeats; /* samples required per side; 0 = any count >= 1 */
    double weight;    /* >= 0; composite weight */
};

/* A guard: rejects an arm whose aggregate is worse than the baseline's by more than max_worse. */
struct st_rules_guard {
    const char *name; /* borrowed metric name */
    enum st_rules_dir dir;
    enum st_rules_agg agg;
    double max_worse; /* fraction, e.g. 0.10 */
};

/* A limit gate: the arm's aggregate of metric must be >= min (has_min) and <= max (has_max). */
struct st_rules_limit {
    const char *gate;   /* borrowed gate name, e.g. "kv_floor" */
    const char *metric; /* borrowed */
    enum st_rules_agg agg;
    int has_min, has_max;
    double min, max;
};

struct st_rules_cfg {
    double noise;                          /* fraction, e.g. 0.05 */
    const struct st_rules_metric *metrics; /* borrowed, n_metrics <= ST_RULES_MAX_METRICS */
    size_t n_metrics;
    const struct st_rules_guard *guards; /* borrowed */
    size_t n_guards;
    const struct st_rules_limit *limits; /* borrowed */
    size_t n_limits;
};

/* The repeats of one metric for one arm. */
struct st_rules_samples {
    const char *metric; /* borrowed */
    const double *v;    /* borrowed, n values */
    size_t n;
};

/* A gate outcome observed by the runner (no OOM, no server exit, no quality regression, ...). */
struct st_rules_gate {
    const char *name;   /* borrowed */
    int passed;         /* 1 passed, 0 failed */
    const char *detail; /* borrowed, may be NULL: the evidence, quoted in the reason */
};

struct st_rules_arm {
    const char *name;                       /* borrowed */
    const struct st_rules_samples *samples; /* borrowed */
    size_t n_samples;
    const struct st_rules_gate *gates; /* borrowed; ignored for the baseline */
    size_t n_gates;
};

/* One ranked metric's comparison. rel = (arm - base) / |base|; gain = rel signed so that > 0 is
 * better (rel for higher-is-better, -rel for lower-is-better). sig: |gain| > noise. */
struct st_rules_cmp {
    double base, arm, rel, gain;
    size_t n_base, n_arm;
    int sig;
};

struct st_rules_result {
    enum st_rules_verdict verdict;
    char reason[512];
    struct st_rules_cmp cmp[ST_RULES_MAX_METRICS]; /* per cfg->metrics, filled up to the decision */
    size_t n_cmp;
    double composite; /* sum(weight * gain) / sum(weight); 0 when no weight */
};

/* The aggregate of v[0..n) (0 when n == 0). */
double st_rules_aggregate(enum st_rules_agg agg, const double *v, size_t n);

/*
 * Decides arm against base under cfg into *out. Returns 0, or ST_ENOTFOUND when a metric the rules
 * name has no samples (or zero samples) on either side, or ST_EUSAGE when cfg is invalid (over
 * ST_RULES_MAX_METRICS, a negative noise or weight), with a message in err.
 */
int st_rules_decide(const struct st_rules_cfg *cfg, const struct st_rules_arm *base,
                    const struct st_rules_arm *arm, struct st_rules_result *out, char *err,
                    size_t errlen) ST_WUR;

/*
 * The final choice among arms that passed the full stage: the index of the promoted result with
 * the highest composite (> 0; the earlier one on a tie), or -1: the baseline stays.
 */
int st_rules_choose(const struct st_rules_result *full, size_t n);

/*
 * Escalation after screening: sets go[i] to 1 for each arm that runs the full stage under mode,
 * 0 otherwise, and returns how many do (0: nothing escalates, the baseline stays).
 */
size_t st_rules_escalate(enum st_rules_escalation mode, const struct st_rules_result *screen,
                         size_t n, unsigned char *go);

/* "promote", "reject", "inconclusive"; "?" otherwise. Static. */
const char *st_rules_verdict_name(enum st_rules_verdict v);

#endif
