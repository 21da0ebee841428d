/*
 * Pre-registered decision rules for a campaign stage: given each arm's metric samples (its
 * repeats, in the order they ran), its gate outcomes and the baseline's samples, decide promote,
 * reject or inconclusive with a reason that carries the numbers, say whether another repeat could
 * change the answer, and pick the final arm by a weighted composite. Pure: no I/O, no clock.
 * docs/campaigns.md ("Decision rules") is the definition; tests/unit/test_campaign_rules.c checks
 * it against hand-computed tables and bench/decide_error.c measures its error rates.
 *
 * The test. Every comparison of a ranked or guard metric is Welch's t on the logs of the repeats
 * (stats/welch.h: the effect is the ratio of geometric means), arm repeat i paired with the
 * baseline's repeat i (the same pass), so n is the same on both sides. A metric whose step repeats
 * sequentially (`repeats: {min, max}`) is looked at after every repeat from min to max; each look
 * is held to the nominal level of Pocock's boundary for those looks (stats/gseq.h), which turns a
 * look's p-value into a sequential p-value valid whenever the looks stop. Per stage there are two
 * families, each held to alpha / 2 by Holm's step-down (stats/holm.h) over every arm of the stage
 * (those not yet run count, with p = 1): "better" (one hypothesis per arm and ranked metric) and
 * "worse" (one per arm and ranked metric, and one per arm and guard). So the chance that an arm
 * with no real difference is promoted is at most alpha / 2, and the same for a false rejection.
 *
 * A difference is *beyond the threshold with evidence* when its hypothesis is rejected in its
 * family and its estimate is beyond the threshold (the plan's noise for ranked metrics, a guard's
 * max_worse); *suspect* when the estimate is beyond but the evidence is short. Order of the rules
 * for one arm (the first that fires decides):
 *   1. a failed gate outcome (functional/quality regression, OOM, server exit, context) -> reject;
 *   2. a limit gate on a metric aggregate (KV capacity floor, no queueing, ...) missed, or its
 *      metric without a value (the step that measures it produced none) -> reject;
 *   3. a guard worse beyond its max_worse with evidence (a `samples: 1` guard: its single-sample
 *      estimate beyond max_worse) -> reject;
 *   4. a ranked metric worse beyond the noise threshold with evidence -> reject;
 *   5. a ranked metric without its first look yet (fewer repeats than min) -> inconclusive, more;
 *   6. a ranked metric better beyond the threshold with evidence, no ranked metric suspect of
 *      being worse and no guard suspect -> promote;
 *   7. otherwise inconclusive: not enough evidence, the baseline stays. Another repeat is asked
 *      for (more = 1) while some looked-at metric has looks left and the arm is not shown to be
 *      equivalent (every ranked interval inside +-noise, every guard's worse bound below its
 *      max_worse).
 * A difference exactly at a threshold (within ST_RULES_EDGE) is not beyond it.
 */
#ifndef ST_CAMPAIGN_RULES_H
#define ST_CAMPAIGN_RULES_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "stats/gseq.h"
#include "stats/summ.h"

#define ST_RULES_MAX_METRICS 64
#define ST_RULES_EDGE ST_STATS_EDGE /* stats/summ.h */
#define ST_RULES_DEFAULT_NOISE 0.05
#define ST_RULES_DEFAULT_ALPHA 0.05
#define ST_RULES_MAX_DESIGNS 16
/* The tests' nulls: a gain (a loss) of at most this fraction of the threshold. */
#define ST_RULES_MARGIN 0.25
/* Each side's miss probability of the equivalence interval (a 60% interval). */
#define ST_RULES_FUTILITY 0.2

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

/* A ranked metric: tested against the baseline; weight for the composite. agg is the aggregate
 * reported beside the test (the test itself compares geometric means). Its step's repeats give
 * the looks: min_n .. max_n samples per side (min_n == max_n: one look). */
struct st_rules_metric {
    const char *name; /* borrowed, e.g. "decode2048.decode_tps@code" */
    enum st_rules_dir dir;
    enum st_rules_agg agg;
    uint32_t min_n, max_n; /* >= 2 */
    double weight;         /* >= 0; composite weight */
    int single;            /* samples: 1: decided on the aggregates alone, and said so */
};

/* A guard: rejects an arm worse than the baseline by more than max_worse, with evidence. single:
 * the plan's `samples: 1`: decided on the aggregates alone, and the reason says so. */
struct st_rules_guard {
    const char *name; /* borrowed metric name */
    enum st_rules_dir dir;
    enum st_rules_agg agg;
    double max_worse; /* fraction, e.g. 0.10 */
    uint32_t min_n, max_n;
    int single;
};

/* A limit gate: the arm's aggregate of metric must be >= min (has_min) and <= max (has_max). */
struct st_rules_limit {
    const char *gate;   /* borrowed gate name, e.g. "kv_floor" */
    const char *metric; /* borrowed */
    enum st_rules_agg agg;
    int has_min, has_max;
    double min, max;
};

/* Prepared sequential designs (st_gseq tables), reused across calls. Caller-owned; zero it to
 * start; st_rules_designs_release frees. */
struct st_rules_designs {
    struct st_gseq g[ST_RULES_MAX_DESIGNS];
    size_t n;
};
void st_rules_designs_release(struct st_rules_designs *d);

struct st_rules_cfg {
    double noise;                          /* fraction, e.g. 0.05 */
    double alpha;                          /* family-wise, both directions (0: the default) */
    const struct st_rules_metric *metrics; /* borrowed, n_metrics <= ST_RULES_MAX_METRICS */
    size_t n_metrics;
    const struct st_rules_guard *guards; /* borrowed, n_guards <= ST_RULES_MAX_METRICS */
    size_t n_guards;
    const struct st_rules_limit *limits; /* borrowed */
    size_t n_limits;
    struct st_rules_designs *designs; /* borrowed cache; NULL: prepared and freed per call */
};

/* The repeats of one metric for one arm, in the order they ran. */
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

/* What one comparison found. */
enum st_rules_finding {
    ST_RULES_OPEN = 0,           /* no look yet (n below the first look), or no samples */
    ST_RULES_BETTER = 1,         /* better beyond the threshold, with evidence */
    ST_RULES_WORSE = 2,          /* worse beyond the threshold, with evidence */
    ST_RULES_SUSPECT_BETTER = 3, /* estimate better beyond the threshold, evidence short */
    ST_RULES_SUSPECT_WORSE = 4,  /* estimate worse beyond the threshold, evidence short */
    ST_RULES_WITHIN = 5,         /* estimate inside the threshold */
};

/*
 * One metric's comparison (a ranked metric, or a guard with threshold max_worse). base and arm
 * are the aggregates (agg) of the n samples per side used; rel = exp(d) - 1 the relative
 * difference of the geometric means, gain = rel signed so that > 0 is better (rel, or -rel for
 * lower-is-better); [lo, hi] the interval for rel at confidence `level` (two-sided: 1 - 2 x the
 * look's nominal level under the Holm level its direction faced); p_* the look's one-sided
 * p-values, q_* the sequential ones, holm_* the Holm levels faced; cv_* the coefficients of
 * variation of the raw samples; needed_n the repeats per side that would resolve a difference
 * equal to the threshold at that level with 80% power (0: unknown).
 */
struct st_rules_cmp {
    double base, arm, rel, gain;
    double lo, hi, level;
    double elo, ehi; /* the equivalence interval, at confidence 1 - 2 * ST_RULES_FUTILITY */
    double p_better, p_worse, q_better, q_worse, holm_better, holm_worse;
    double cv_base, cv_arm;
    double threshold;
    size_t n_base, n_arm, n; /* samples available per side; n: used per side */
    uint32_t min_n, max_n;
    uint32_t needed_n;
    enum st_rules_finding finding;
    const char *agg_name; /* "medians", "means", ... (static): what base and arm are */
    int single;           /* decided on one sample (a samples: 1 rule) */
    int sig; /* -1, 0, 1: beyond the threshold with evidence (worse, neither, better) */
};

struct st_rules_result {
    enum st_rules_verdict verdict;
    char reason[768];
    struct st_rules_cmp cmp[ST_RULES_MAX_METRICS]; /* per cfg->metrics */
    size_t n_cmp;
    struct st_rules_cmp gcmp[ST_RULES_MAX_METRICS]; /* per cfg->guards */
    size_t n_gcmp;
    double composite; /* sum(weight * gain) / sum(weight); 0 when no weight */
    int more;         /* another repeat of the arm (and the baseline) could change the verdict */
    int equivalent;   /* every ranked metric shown inside +-noise (and guards cleared) */
    int single;       /* the verdict rests on a samples: 1 rule */
};

/* The aggregate of v[0..n) (0 when n == 0). */
double st_rules_aggregate(enum st_rules_agg agg, const double *v, size_t n);

/*
 * Decides arms[0..n_arms) of one stage against base under cfg into out[0..n_arms). family is the
 * number of arms of the stage (>= n_arms; arms not given count as untested hypotheses in the
 * Holm families). Returns 0; ST_EUSAGE when cfg is invalid (over ST_RULES_MAX_METRICS, a noise or
 * alpha out of range, a negative weight, a design with min_n < 2 or max_n < min_n), with a message
 * in err. A metric without samples on a side is no error: its comparison stays open (an arm with
 * a failed gate has none). Metric values that are not finite and > 0 cannot be compared on logs:
 * that comparison stays open too and the reason says so.
 */
int st_rules_decide_stage(const struct st_rules_cfg *cfg, const struct st_rules_arm *base,
                          const struct st_rules_arm *arms, size_t n_arms, size_t family,
                          struct st_rules_result *out, char *err, size_t errlen) ST_WUR;

/* One arm alone (a family of one): st_rules_decide_stage(cfg, base, arm, 1, 1, out, ...). */
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
/* "open", "better", "worse", "suspect_better", "suspect_worse", "within". Static. */
const char *st_rules_finding_name(enum st_rules_finding f);

#endif
