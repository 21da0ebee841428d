/*
 * summary.json, the campaign archive's record of what was decided and why: the one writer
 * (st_sum_write) and the one reader (st_sum_load) of it, over one typed model. The runner
 * (src/campaign/verdict.c) fills a struct st_sum_summary and writes it; the reports, the drift
 * check and `servetune report` read it back into the same struct. A key is spelled in summary.c
 * only, so a renamed key fails tests/unit/test_report_summary.c (write, read, write: same bytes).
 * Every pointer in the model is owned by its pool (st_sum_alloc, st_sum_strdup). Errors name the
 * field ("arms[0].verdict"). The format, field by field: docs/internals/formats.md.
 *
 * Numbers that are not finite are written null and read back as NaN (nullable fields below);
 * fields marked "optional" may be absent in older archives and read as stated. Pure; any thread.
 */
#ifndef ST_REPORT_SUMMARY_H
#define ST_REPORT_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#include "base/buf.h"

#define SUMMARY_MAX_BYTES (256u << 20)
#define ST_SUM_SCHEMA "servetune.campaign.summary/1"

/* Every allocation of one model (or of a compare object read alone), freed at once. */
struct st_sum_pool {
    void **p;
    size_t n, cap;
};

struct st_sum_kvp {
    char *k, *v;
};

struct st_sum_gate {
    char *stage, *name, *detail; /* detail may be NULL */
    int passed;
};

/* One comparison a decision rests on (src/campaign/rules.h, struct st_rules_cmp). Doubles are
 * nullable (NaN: not finite when written); counts are whole numbers. The reader takes
 * comparisons with only metric, kind, finding, aggregate, single, n, base, arm, rel, lo, hi,
 * confidence and threshold (the rest then NaN or 0). */
struct st_sum_cmpitem {
    char *metric, *kind, *finding, *aggregate; /* kind "ranked" or "guard" */
    double n;                                  /* repeats compared (a count) */
    uint64_t n_arm, n_base, min_n, max_n, needed_n;
    int single;
    double base, arm, rel, threshold, lo, hi, confidence;
    double equivalence_lo, equivalence_hi, p_better, p_worse, q_better, q_worse;
    double holm_better, holm_worse, cv_base, cv_arm;
};

struct st_sum_decision {
    char *stage, *verdict, *reason;
    double composite;
    /* The statistical part (optional: archives from before the statistical rules have none).
     * has_stats 0: more, equivalent, single and comparisons are neither read nor written. */
    int has_stats;
    int more, equivalent, single;
    struct st_sum_cmpitem *cmp;
    size_t ncmp;
};

struct st_sum_failure {
    char *kind, *stage, *step, *detail, *evidence; /* step may be NULL */
};

struct st_sum_arm {
    char *name, *verdict, *on; /* on may be NULL */
    char **reasons;
    size_t nreasons;
    struct st_sum_kvp *params, *changed;
    size_t nparams, nchanged;
    int has_kv, has_ctx;            /* 0: written null */
    double kv, ctx;                 /* KV capacity and context length, tokens (whole numbers) */
    struct st_sum_failure *failure; /* NULL: none */
    struct st_sum_gate *gates;
    size_t ngates;
    struct st_sum_decision *dec;
    size_t ndec;
};

struct st_sum_metric {
    char *stage, *arm, *name;
    double *values;
    size_t nvalues;
    double agg, min, max;
    double median, mean, mad, cv; /* optional (NaN when absent), nullable */
    int64_t n;
    char **units; /* journal unit ids the values came from */
    size_t nunits;
    /* Derived by the reader, not written: name split as STEP.METRIC@POINT (point "" when
     * none), and the index of arm in the summary's arms. */
    char *step, *mname, *point;
    size_t arm_idx;
};

struct st_sum_ttft {
    char *stage, *arm, *step;
    double *v; /* per request, seconds, in the order written */
    size_t n;
    size_t arm_idx; /* derived by the reader */
};

struct st_sum_drift {
    char *metric, *stage;       /* stage may be NULL (optional) */
    double this_v, then_v, rel; /* rel nullable: infinite when the earlier value was 0 */
    int has_rel;                /* derived by the reader: rel was a number */
    int beyond;
};

struct st_sum_cmp {
    char *with, *plan_hash;
    struct st_sum_drift *d;
    size_t n;
    int drifted;
};

struct st_sum_stage {
    char *name;
    char **arms;
    size_t narms;
};

/* How the verdicts were reached (optional: NULL in archives from before the tests). */
struct st_sum_stats {
    char *test, *effect, *sequential, *correction; /* effect, sequential: optional, NULL */
    double alpha, margin, equivalence_confidence;  /* optional: NaN */
    uint64_t *family;                              /* per stage: the Holm family size */
    size_t nfamily;
};

struct st_sum_summary {
    struct st_sum_pool pool;
    char *name, *hash, *file, *chosen; /* plan.name, plan.hash (64 hex), plan.file, chosen */
    double noise;
    double alpha;               /* plan.alpha; optional: NaN when absent, and then not written */
    struct st_sum_stats *stats; /* "statistics"; NULL when absent */
    int complete, restored;
    char *restore_checks; /* optional: what the restore checked, "name: detail; ..." (NULL) */
    int has_run;          /* sim_speed and seed were there (optional; always written when set) */
    double sim_speed;     /* the simulator's time scale of the run */
    uint64_t seed;
    struct st_sum_stage *stages;
    size_t nstages;
    struct st_sum_arm *arms;
    size_t narms;
    struct st_sum_metric *m;
    size_t nm;
    struct st_sum_ttft *t;
    size_t nt;
    struct st_sum_cmp *cmp; /* NULL: "compare" is null */
};

/* Zeroed memory of n bytes (n may be 0) owned by pl; never NULL (aborts on OOM). */
void *st_sum_alloc(struct st_sum_pool *pl, size_t n);
/* A copy of s (NULL gives NULL) owned by pl. */
char *st_sum_strdup(struct st_sum_pool *pl, const char *s);
/* Frees everything pl owns; pl is empty and reusable after. */
void st_sum_pool_release(struct st_sum_pool *pl);

/* Appends s as summary.json text (one object, then a newline) to out. The derived fields are
 * not written. s is borrowed; every non-NULL pointer with a count must hold that many entries. */
void st_sum_write(const struct st_sum_summary *s, struct st_buf *out);
/* Appends a "compare" object c (borrowed) as JSON text. */
void st_sum_write_compare(const struct st_sum_cmp *c, struct st_buf *out);

/* Parses and checks summary text[0..len) into *s (release with st_sum_pool_release(&s->pool)
 * whatever the result). Returns 0 or ST_EPARSE / ST_ETOOBIG with the field named in err. */
int st_sum_load(struct st_sum_summary *s, const char *text, size_t len, char *err,
                size_t errlen) ST_WUR;
/* Reads a "compare" object (as st_sum_write_compare writes it) into *c, allocating from pl. */
int st_sum_load_compare(const char *text, size_t len, struct st_sum_pool *pl, struct st_sum_cmp *c,
                        char *err, size_t errlen) ST_WUR;
/* The index of the arm named name in s: 1 with *idx, or 0 when there is none. */
int st_sum_arm_index(const struct st_sum_summary *s, const char *name, size_t *idx);

#endif
