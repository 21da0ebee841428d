/*
 * Campaign plans: a YAML file, written before any data exists, naming how arms come up (the
 * target), the baseline's parameters, the arms (each a change of named parameters), the
 * parameters held fixed, the stages (screening, full) and the decision rules. Parsing is pure
 * (bytes in, plan out, base/yaml.h for the YAML); every key is known and every error names
 * NAME:LINE:COL. The canonical form is a deterministic JSON serialization of the parsed plan
 * (defaults filled, parameters sorted, independent of key order, comments and whitespace); its
 * SHA-256 is the plan hash written before the first request. docs/campaigns.md defines it all.
 */
#ifndef ST_CAMPAIGN_PLAN_H
#define ST_CAMPAIGN_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "base/sha256.h"
#include "base/status.h"
#include "campaign/rules.h"
#include "target/spec.h"

#define ST_PLAN_MAX_BYTES (1u << 20)
#define ST_PLAN_NAME_MAX ST_TARGET_NAME_MAX /* names and ids, NUL included */
#define ST_PLAN_METRIC_MAX 128              /* STEP.METRIC@POINT, NUL included */
#define ST_PLAN_MAX_PARAMS 64 /* per list (baseline, fixed, an arm's set, sim overrides) */
#define ST_PLAN_MAX_ARMS 64
#define ST_PLAN_MAX_STEPS 64  /* per stage */
#define ST_PLAN_MAX_POINTS 32 /* categories or concurrency levels of one step */
#define ST_PLAN_MAX_RULES 64  /* metrics, guards and limits, each */

enum st_plan_step_kind {
    ST_PLAN_STEP_QUALIFY = 1, /* a qualification suite: functional and quality gates */
    ST_PLAN_STEP_BENCH = 2,   /* fixed-length requests, per category */
    ST_PLAN_STEP_SWEEP = 3,   /* shared-prefix sweep over concurrency levels (hit90) */
    ST_PLAN_STEP_PROBE = 4,   /* distinct-document capacity probe */
    ST_PLAN_STEP_SOAK = 5,    /* mixed load for duration_s */
};

struct st_plan_step {
    char id[ST_PLAN_NAME_MAX];
    enum st_plan_step_kind kind;
    uint32_t repeats;             /* default 3 for bench, else 1; with repeats_max: the min */
    uint32_t repeats_max;         /* == repeats, or the sequential max of {min, max} */
    char suite[ST_PLAN_NAME_MAX]; /* qualify */
    uint64_t input_tokens;        /* bench, sweep, probe, soak */
    uint64_t output_tokens;       /* bench, sweep, probe, soak */
    uint64_t seed_output_tokens;  /* probe: the serial seeding pass (default 8) */
    char categories[ST_PLAN_MAX_POINTS][ST_PLAN_NAME_MAX]; /* bench */
    uint32_t n_categories;
    uint32_t concurrency[ST_PLAN_MAX_POINTS]; /* bench (default 1), sweep, probe, soak */
    uint32_t n_concurrency;
    double shared_frac;       /* sweep */
    uint32_t requests_per_cc; /* sweep: requests per point = this x cc (default 2) */
    int flush_warm;           /* sweep: flush then warm before each point (default 1) */
    double duration_s;        /* soak */
    int line, col;
};

struct st_plan_stage {
    struct st_plan_step *steps; /* owned, n */
    uint32_t n;
};

struct st_plan_arm {
    char name[ST_PLAN_NAME_MAX];
    struct st_target_params set; /* the changed parameters */
    int multi_variable;
    /* Names (baseline or earlier arms): the arm applies on top of the best of these after
     * screening, e.g. batch 1024 on the best step count. n_on_best_of == 0: on the baseline. */
    char on_best_of[ST_PLAN_MAX_ARMS][ST_PLAN_NAME_MAX];
    uint32_t n_on_best_of;
    char *note; /* owned, may be NULL */
    int line, col;
};

struct st_plan_metric {
    char name[ST_PLAN_METRIC_MAX];
    enum st_rules_dir dir;
    enum st_rules_agg agg;
    uint32_t repeats; /* the step's repeats (its min) where the metric was resolved */
    double weight;    /* default 1 */
    int single;       /* samples: 1: decided on one value per side, said in the verdict */
};

struct st_plan_guard {
    char name[ST_PLAN_METRIC_MAX];
    enum st_rules_dir dir;
    enum st_rules_agg agg;
    double max_worse;
    int single; /* samples: 1 */
};

struct st_plan_limit {
    char gate[ST_PLAN_NAME_MAX];
    char metric[ST_PLAN_METRIC_MAX];
    enum st_rules_agg agg;
    int has_min, has_max;
    double min, max;
};

struct st_plan_rules {
    double noise;          /* default 0.05 */
    double alpha;          /* default 0.05: the family-wise error of a stage, both directions */
    enum st_rules_agg agg; /* default median */
    struct st_plan_metric metrics[ST_PLAN_MAX_RULES];
    uint32_t n_metrics;
    struct st_plan_guard guards[ST_PLAN_MAX_RULES];
    uint32_t n_guards;
    struct st_plan_limit limits[ST_PLAN_MAX_RULES]; /* kv_floor and gates.limits */
    uint32_t n_limits;
    /* Outcome gates, 1 = on (all default on). */
    int gate_functional, gate_quality, gate_oom, gate_server_exit;
    uint64_t context_tokens; /* the configured context must still fit; 0 = not checked */
    enum st_rules_escalation escalation; /* default promoted */
};

struct st_plan {
    char name[ST_PLAN_NAME_MAX];
    char *description; /* owned, may be NULL */
    struct st_target_spec target;
    struct st_target_params baseline, fixed;
    struct st_plan_arm *arms; /* owned, n_arms */
    uint32_t n_arms;
    struct st_plan_stage screening, full;
    int interleaved; /* stages.order: 0 blocked (one arm at a time), 1 interleaved (A B A B) */
    uint64_t full_min_output_tokens; /* stages.full must hold a bench this long (default 16384) */
    double full_min_soak_s;          /* and a soak this long (default 600) */
    struct st_plan_rules rules;
};

/*
 * Parses and validates a plan from text[0..len) (name labels messages). Returns 0 with *p filled
 * (release with st_plan_release), or ST_EPARSE (syntax, unknown key, bad value, failed
 * validation) / ST_ETOOBIG (over ST_PLAN_MAX_BYTES or a maximum above) with "NAME:LINE:COL:
 * message" (or "NAME: message" where no position applies) in err, and *p empty.
 */
int st_plan_parse(const char *name, const char *text, size_t len, struct st_plan *p, char *err,
                  size_t errlen) ST_WUR;
void st_plan_release(struct st_plan *p);

/* The canonical form of p, a plan st_plan_parse filled (JSON, one line, see docs/campaigns.md),
 * appended to out. Deterministic: the same parsed plan always gives the same bytes. */
struct st_buf;
void st_plan_canonical(const struct st_plan *p, struct st_buf *out);
/* Writes "rules": {...} through w, in the canonical form's shape (limits inside gates, as in the
 * plan's YAML). Used by the canonical form and by `servetune campaign check --json`. */
struct st_jw;
void st_plan_rules_json(struct st_jw *w, const struct st_plan_rules *r);
/* The SHA-256 of the canonical form, as 64 lowercase hex digits plus NUL. */
void st_plan_hash(const struct st_plan *p, char hex[ST_SHA256_HEX]);

/* The rules of p that a stage can decide on: ranked metrics, guards and limits whose step is in
 * stage (server.* metrics always are). Pointers borrow from p, which must outlive the view. */
struct st_plan_rules_view {
    struct st_rules_metric metrics[ST_PLAN_MAX_RULES];
    struct st_rules_guard guards[ST_PLAN_MAX_RULES];
    struct st_rules_limit limits[ST_PLAN_MAX_RULES];
    struct st_rules_cfg cfg;
};
void st_plan_rules_view(const struct st_plan *p, const struct st_plan_stage *stage,
                        struct st_plan_rules_view *view);

/*
 * The full parameter set arm idx runs with, into *out (owned; st_target_params_release): the fixed
 * parameters and the baseline's, then, for an on_best_of arm, the set of winner (the best of its
 * on_best_of names after screening: an arm name or "baseline"), then the arm's own set; sorted by
 * name. winner must be NULL or "baseline" for a plain arm. Returns 0, or ST_EPARSE with a message
 * when winner is not one of on_best_of, or when the arm changes nothing on top of the winner, or
 * more than one parameter without multi_variable (the checks parsing could not make).
 */
int st_plan_arm_params(const struct st_plan *p, uint32_t idx, const char *winner,
                       struct st_target_params *out, char *err, size_t errlen) ST_WUR;

struct st_jw;
/* Writes key and the parameter set ps as one JSON object {NAME: VALUE-TEXT, ...}, in ps's order
 * (the canonical form's and `campaign check --json`'s one writer). */
void st_plan_jw_params(struct st_jw *w, const char *key, const struct st_target_params *ps);

#endif
