/*
 * The campaign summary reader (internal to the reports: report.c renders, summary.c reads): a
 * summary.json (schema in report.h) checked field by field into a small model whose every
 * pointer is owned by one pool. Errors name the field ("arms[0].verdict").
 */
#ifndef ST_REPORT_SUMMARY_H
#define ST_REPORT_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define SUMMARY_MAX_BYTES (256u << 20)

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

/* One comparison a decision rests on (optional in summary.json: older archives have none).
 * has_* say which nullable numbers were there (NaN and infinities are written null). */
struct st_sum_cmpitem {
    char *metric, *kind, *finding, *aggregate; /* kind "ranked" or "guard" */
    double n, base, arm, rel, lo, hi, confidence, threshold;
    int has_rel, has_lo, has_hi, single;
};

struct st_sum_decision {
    char *stage, *verdict, *reason;
    double composite;
    struct st_sum_cmpitem *cmp; /* NULL when the summary has no comparisons */
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
    int has_kv, has_ctx;
    double kv, ctx;
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
    int64_t n;
    char *step, *mname, *point; /* name split: STEP.METRIC@POINT, point "" when none */
    size_t arm_idx;
};

struct st_sum_ttft {
    char *stage, *arm, *step;
    double *v; /* sorted ascending after loading */
    size_t n;
    size_t arm_idx;
};

struct st_sum_drift {
    char *metric, *stage; /* stage may be NULL (not in report.h's schema: an addition) */
    double this_v, then_v, rel;
    int has_rel, beyond;
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

struct st_sum_summary {
    struct st_sum_pool pool;
    char *name, *hash, *file, *chosen;
    double noise;
    double alpha;     /* plan.alpha; 0 when absent (an archive from before the tests) */
    char *test;       /* statistics.test, NULL when absent */
    char *correction; /* statistics.correction, NULL when absent */
    int complete, restored;
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

/* Parses and checks summary text[0..len) into *s (release with st_sum_pool_release(&s->pool)
 * whatever the result). Returns 0 or ST_EPARSE / ST_ETOOBIG with the field named in err. */
int st_sum_load(struct st_sum_summary *s, const char *text, size_t len, char *err,
                size_t errlen) ST_WUR;
/* Reads a "compare" object (as st_report_compare writes it) into *c, allocating from pl. */
int st_sum_load_compare(const char *text, size_t len, struct st_sum_pool *pl, struct st_sum_cmp *c,
                        char *err, size_t errlen) ST_WUR;
/* The index of the arm named name in s: 0 with *idx, or -1. */
int st_sum_arm_index(const struct st_sum_summary *s, const char *name, size_t *idx);
void st_sum_pool_release(struct st_sum_pool *pl);

#endif
