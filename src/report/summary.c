/*
 * summary.json's one writer and one reader (summary.h): the model written in the key order the
 * runner has always written, and read back with typed field access over src/base/json.h (the
 * field's path in every error), checked field by field. Optional fields (summary.h) are the
 * ones older archives lack.
 */
#include "report/summary.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/xalloc.h"

/* ---- the model: every pointer below is owned by the summary's pool ---- */

void *st_sum_alloc(struct st_sum_pool *pl, size_t n)
{
    if (pl->n == pl->cap) {
        pl->cap = pl->cap ? pl->cap * 2 : 64;
        pl->p = st_xrealloc(pl->p, pl->cap * sizeof(*pl->p));
    }
    void *m = st_xcalloc(1, n ? n : 1);
    pl->p[pl->n++] = m;
    return m;
}

static char *pstrndup(struct st_sum_pool *pl, const char *s, size_t n)
{
    char *c = st_sum_alloc(pl, n + 1);
    memcpy(c, s, n);
    return c;
}

char *st_sum_strdup(struct st_sum_pool *pl, const char *s)
{
    return s == NULL ? NULL : pstrndup(pl, s, strlen(s));
}

void st_sum_pool_release(struct st_sum_pool *pl)
{
    for (size_t i = 0; i < pl->n; i++) {
        free(pl->p[i]);
    }
    st_freep(&pl->p);
    pl->n = pl->cap = 0;
}

/* ---- reading: typed field access with the field's path in every error ---- */

struct rd {
    struct st_json j;
    struct st_sum_pool *pl;
    struct st_buf tmp;
    char *err;
    size_t errlen;
};

enum { T_STR = 1, T_NUM, T_BOOL, T_ARR, T_OBJ };

static const char *const type_names[] = {"",         "a string", "a number", "true or false",
                                         "an array", "an object"};

static int fail(struct rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct rd *r, const char *fmt, ...)
{
    if (r->err != NULL && r->errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err, r->errlen, fmt, ap);
        va_end(ap);
    }
    return ST_EPARSE;
}

static int type_ok(const struct st_json *j, int tok, int want)
{
    enum st_json_type t = st_json_type(j, tok);
    switch (want) {
    case T_STR:
        return t == ST_JSON_STRING;
    case T_NUM:
        return t == ST_JSON_NUMBER;
    case T_BOOL:
        return t == ST_JSON_TRUE || t == ST_JSON_FALSE;
    case T_ARR:
        return t == ST_JSON_ARRAY;
    default:
        return t == ST_JSON_OBJECT;
    }
}

/* The value of key in obj, of type want: its token in *tok, or -1 when null and nullable. */
static int field(struct rd *r, int obj, const char *path, const char *key, int want, int nullable,
                 int *tok)
{
    const char *dot = path[0] != '\0' ? "." : "";
    int t = st_json_get(&r->j, obj, key);
    if (t < 0) {
        return fail(r, "missing field '%s%s%s'", path, dot, key);
    }
    if (nullable && st_json_type(&r->j, t) == ST_JSON_NULL) {
        *tok = -1;
        return 0;
    }
    if (!type_ok(&r->j, t, want)) {
        return fail(r, "field '%s%s%s' must be %s%s", path, dot, key, type_names[want],
                    nullable ? " or null" : "");
    }
    *tok = t;
    return 0;
}

static char *tok_str(struct rd *r, int tok)
{
    st_buf_clear(&r->tmp);
    if (st_json_str(&r->j, tok, &r->tmp) != 0) {
        st_buf_clear(&r->tmp); /* not reached: every caller checked the type */
    }
    char *s = st_sum_alloc(r->pl, r->tmp.len + 1);
    memcpy(s, st_buf_str(&r->tmp), r->tmp.len);
    return s;
}

static int get_str(struct rd *r, int obj, const char *path, const char *key, int nullable,
                   char **out)
{
    int tok = -1;
    int rc = field(r, obj, path, key, T_STR, nullable, &tok);
    if (rc) {
        return rc;
    }
    *out = tok < 0 ? NULL : tok_str(r, tok);
    return 0;
}

static int get_num(struct rd *r, int obj, const char *path, const char *key, int nullable,
                   double *out, int *present)
{
    int tok = -1;
    int rc = field(r, obj, path, key, T_NUM, nullable, &tok);
    if (rc) {
        return rc;
    }
    if (present != NULL) {
        *present = tok >= 0;
    }
    *out = NAN; /* null: a number that was not finite when written */
    if (tok >= 0 && st_json_f64(&r->j, tok, out) != 0) {
        return fail(r, "field '%s.%s' is not a number", path, key);
    }
    return 0;
}

static int get_bool(struct rd *r, int obj, const char *path, const char *key, int *out)
{
    int tok = -1;
    int rc = field(r, obj, path, key, T_BOOL, 0, &tok);
    if (rc) {
        return rc;
    }
    *out = st_json_bool(&r->j, tok);
    return 0;
}

/* Optional fields: absent reads as null does (NULL, NaN, 0). */
static int has_key(struct rd *r, int obj, const char *key)
{
    return st_json_get(&r->j, obj, key) >= 0;
}

static int opt_str(struct rd *r, int obj, const char *path, const char *key, char **out)
{
    *out = NULL;
    return has_key(r, obj, key) ? get_str(r, obj, path, key, 1, out) : 0;
}

static int opt_num(struct rd *r, int obj, const char *path, const char *key, double *out)
{
    *out = NAN;
    return has_key(r, obj, key) ? get_num(r, obj, path, key, 1, out, NULL) : 0;
}

static int opt_bool(struct rd *r, int obj, const char *path, const char *key, int *out)
{
    *out = 0;
    return has_key(r, obj, key) ? get_bool(r, obj, path, key, out) : 0;
}

/* A whole number token (a count or a seed, up to 2^64 - 1): read from its digits, since a
 * double holds only 53 bits. */
static int tok_u64(struct rd *r, int tok, const char *path, const char *key, uint64_t *out)
{
    size_t n = 0;
    const char *raw = st_json_raw(&r->j, tok, &n);
    char digits[24];
    if (st_json_type(&r->j, tok) != ST_JSON_NUMBER || n == 0 || n >= sizeof(digits)) {
        return fail(r, "field '%s.%s' must be a whole number", path, key);
    }
    memcpy(digits, raw, n);
    digits[n] = '\0';
    if (strspn(digits, "0123456789") != n) {
        return fail(r, "field '%s.%s' must be a whole number", path, key);
    }
    errno = 0;
    unsigned long long v = strtoull(digits, NULL, 10);
    if (errno != 0) {
        return fail(r, "field '%s.%s' is out of range", path, key);
    }
    *out = v;
    return 0;
}

static int opt_u64(struct rd *r, int obj, const char *path, const char *key, uint64_t *out)
{
    *out = 0;
    int tok = st_json_get(&r->j, obj, key);
    if (tok < 0 || st_json_type(&r->j, tok) == ST_JSON_NULL) {
        return 0;
    }
    return tok_u64(r, tok, path, key, out);
}

/* A string array: strs (pool), count. */
static int get_strs(struct rd *r, int obj, const char *path, const char *key, char ***out,
                    size_t *n)
{
    int arr = -1;
    int rc = field(r, obj, path, key, T_ARR, 0, &arr);
    if (rc) {
        return rc;
    }
    *n = r->j.toks[arr].size;
    *out = st_sum_alloc(r->pl, *n * sizeof(char *));
    size_t i = 0;
    for (int e = st_json_first(&r->j, arr); e >= 0; e = st_json_next(&r->j, arr, e), i++) {
        if (st_json_type(&r->j, e) != ST_JSON_STRING) {
            return fail(r, "field '%s.%s[%zu]' must be a string", path, key, i);
        }
        (*out)[i] = tok_str(r, e);
    }
    return 0;
}

static int get_nums(struct rd *r, int obj, const char *path, const char *key, double **out,
                    size_t *n)
{
    int arr = -1;
    int rc = field(r, obj, path, key, T_ARR, 0, &arr);
    if (rc) {
        return rc;
    }
    *n = r->j.toks[arr].size;
    *out = st_sum_alloc(r->pl, *n * sizeof(double));
    size_t i = 0;
    for (int e = st_json_first(&r->j, arr); e >= 0; e = st_json_next(&r->j, arr, e), i++) {
        if (st_json_type(&r->j, e) != ST_JSON_NUMBER || st_json_f64(&r->j, e, &(*out)[i]) != 0) {
            return fail(r, "field '%s.%s[%zu]' must be a number", path, key, i);
        }
    }
    return 0;
}

/* An object of string values (params, changed). */
static int get_map(struct rd *r, int obj, const char *path, const char *key,
                   struct st_sum_kvp **out, size_t *n)
{
    int o;
    int rc = field(r, obj, path, key, T_OBJ, 0, &o);
    if (rc) {
        return rc;
    }
    *n = r->j.toks[o].size;
    *out = st_sum_alloc(r->pl, *n * sizeof(struct st_sum_kvp));
    size_t i = 0;
    for (int k = st_json_first(&r->j, o); k >= 0; k = st_json_next(&r->j, o, k), i++) {
        char *name = tok_str(r, k);
        if (st_json_type(&r->j, k + 1) != ST_JSON_STRING) {
            return fail(r, "field '%s.%s.%s' must be a string", path, key, name);
        }
        (*out)[i].k = name;
        (*out)[i].v = tok_str(r, k + 1);
    }
    return 0;
}

/* Iterates the objects of array arr: calls fn(r, element token, "key[i]", i, ctx). */
typedef int (*elem_fn)(struct rd *r, int tok, const char *path, size_t i, void *ctx);

static int each_obj(struct rd *r, int obj, const char *path, const char *key, size_t *n, elem_fn fn,
                    void *ctx)
{
    int arr = -1;
    int rc = field(r, obj, path, key, T_ARR, 0, &arr);
    if (rc) {
        return rc;
    }
    *n = r->j.toks[arr].size;
    size_t i = 0;
    for (int e = st_json_first(&r->j, arr); e >= 0; e = st_json_next(&r->j, arr, e), i++) {
        char p[160];
        snprintf(p, sizeof(p), "%s%s%s[%zu]", path, path[0] ? "." : "", key, i);
        if (st_json_type(&r->j, e) != ST_JSON_OBJECT) {
            return fail(r, "field '%s' must be an object", p);
        }
        rc = fn(r, e, p, i, ctx);
        if (rc) {
            return rc;
        }
    }
    return 0;
}

static int one_of(const char *s, const char *const *set)
{
    for (size_t i = 0; set[i] != NULL; i++) {
        if (strcmp(s, set[i]) == 0) {
            return 1;
        }
    }
    return 0;
}

static const char *const verdicts[] = {"baseline", "promote", "reject", "inconclusive", NULL};
static const char *const failure_kinds[] = {"oom",    "exit",     "health", "start",
                                            "config", "operator", "step",   NULL};

static int read_stage(struct rd *r, int tok, const char *path, size_t i, void *ctx)
{
    struct st_sum_stage *st = &((struct st_sum_summary *)ctx)->stages[i];
    int rc = get_str(r, tok, path, "name", 0, &st->name);
    rc = rc ? rc : get_strs(r, tok, path, "arms", &st->arms, &st->narms);
    return rc;
}

static int read_gate(struct rd *r, int tok, const char *path, size_t i, void *ctx)
{
    struct st_sum_gate *g = &((struct st_sum_arm *)ctx)->gates[i];
    int rc = get_str(r, tok, path, "stage", 0, &g->stage);
    rc = rc ? rc : get_str(r, tok, path, "name", 0, &g->name);
    rc = rc ? rc : get_bool(r, tok, path, "passed", &g->passed);
    rc = rc ? rc : get_str(r, tok, path, "detail", 1, &g->detail);
    return rc;
}

static int read_cmpitem(struct rd *r, int tok, const char *path, size_t i, void *ctx)
{
    struct st_sum_cmpitem *c = &((struct st_sum_decision *)ctx)->cmp[i];
    int rc = get_str(r, tok, path, "metric", 0, &c->metric);
    rc = rc ? rc : get_str(r, tok, path, "kind", 0, &c->kind);
    rc = rc ? rc : get_str(r, tok, path, "finding", 0, &c->finding);
    rc = rc ? rc : get_str(r, tok, path, "aggregate", 0, &c->aggregate);
    rc = rc ? rc : get_bool(r, tok, path, "single", &c->single);
    rc = rc ? rc : get_num(r, tok, path, "n", 0, &c->n, NULL);
    rc = rc ? rc : get_num(r, tok, path, "base", 1, &c->base, NULL);
    rc = rc ? rc : get_num(r, tok, path, "arm", 1, &c->arm, NULL);
    rc = rc ? rc : get_num(r, tok, path, "rel", 1, &c->rel, NULL);
    rc = rc ? rc : get_num(r, tok, path, "lo", 1, &c->lo, NULL);
    rc = rc ? rc : get_num(r, tok, path, "hi", 1, &c->hi, NULL);
    rc = rc ? rc : get_num(r, tok, path, "confidence", 1, &c->confidence, NULL);
    rc = rc ? rc : get_num(r, tok, path, "threshold", 0, &c->threshold, NULL);
    rc = rc ? rc : opt_u64(r, tok, path, "n_arm", &c->n_arm);
    rc = rc ? rc : opt_u64(r, tok, path, "n_base", &c->n_base);
    rc = rc ? rc : opt_u64(r, tok, path, "min_n", &c->min_n);
    rc = rc ? rc : opt_u64(r, tok, path, "max_n", &c->max_n);
    rc = rc ? rc : opt_u64(r, tok, path, "needed_n", &c->needed_n);
    rc = rc ? rc : opt_num(r, tok, path, "equivalence_lo", &c->equivalence_lo);
    rc = rc ? rc : opt_num(r, tok, path, "equivalence_hi", &c->equivalence_hi);
    rc = rc ? rc : opt_num(r, tok, path, "p_better", &c->p_better);
    rc = rc ? rc : opt_num(r, tok, path, "p_worse", &c->p_worse);
    rc = rc ? rc : opt_num(r, tok, path, "q_better", &c->q_better);
    rc = rc ? rc : opt_num(r, tok, path, "q_worse", &c->q_worse);
    rc = rc ? rc : opt_num(r, tok, path, "holm_better", &c->holm_better);
    rc = rc ? rc : opt_num(r, tok, path, "holm_worse", &c->holm_worse);
    rc = rc ? rc : opt_num(r, tok, path, "cv_base", &c->cv_base);
    rc = rc ? rc : opt_num(r, tok, path, "cv_arm", &c->cv_arm);
    return rc;
}

static int read_decision(struct rd *r, int tok, const char *path, size_t i, void *ctx)
{
    struct st_sum_decision *d = &((struct st_sum_arm *)ctx)->dec[i];
    int rc = get_str(r, tok, path, "stage", 0, &d->stage);
    rc = rc ? rc : get_str(r, tok, path, "verdict", 0, &d->verdict);
    if (rc == 0 && !one_of(d->verdict, verdicts)) {
        rc = fail(r,
                  "field '%s.verdict': '%s' is not one of baseline, promote, reject, "
                  "inconclusive",
                  path, d->verdict);
    }
    rc = rc ? rc : get_str(r, tok, path, "reason", 0, &d->reason);
    rc = rc ? rc : get_num(r, tok, path, "composite", 0, &d->composite, NULL);
    int arr = -1;
    if (rc == 0 && st_json_get(&r->j, tok, "comparisons") >= 0) {
        d->has_stats = 1;
        rc = opt_bool(r, tok, path, "more", &d->more);
        rc = rc ? rc : opt_bool(r, tok, path, "equivalent", &d->equivalent);
        rc = rc ? rc : opt_bool(r, tok, path, "single", &d->single);
        rc = rc ? rc : field(r, tok, path, "comparisons", T_ARR, 0, &arr);
        if (rc == 0) {
            d->cmp = st_sum_alloc(r->pl, (r->j.toks[arr].size + 1) * sizeof(*d->cmp));
            rc = each_obj(r, tok, path, "comparisons", &d->ncmp, read_cmpitem, d);
        }
    }
    return rc;
}

static int read_failure(struct rd *r, int arm_tok, const char *path, struct st_sum_arm *a)
{
    int tok = -1;
    int rc = field(r, arm_tok, path, "failure", T_OBJ, 1, &tok);
    if (rc || tok < 0) {
        return rc;
    }
    char p[200];
    snprintf(p, sizeof(p), "%s.failure", path);
    struct st_sum_failure *f = st_sum_alloc(r->pl, sizeof(*f));
    rc = get_str(r, tok, p, "kind", 0, &f->kind);
    if (rc == 0 && !one_of(f->kind, failure_kinds)) {
        rc = fail(r,
                  "field '%s.kind': '%s' is not one of oom, exit, health, start, config, "
                  "operator, step",
                  p, f->kind);
    }
    rc = rc ? rc : get_str(r, tok, p, "stage", 0, &f->stage);
    rc = rc ? rc : get_str(r, tok, p, "step", 1, &f->step);
    rc = rc ? rc : get_str(r, tok, p, "detail", 0, &f->detail);
    rc = rc ? rc : get_str(r, tok, p, "evidence", 0, &f->evidence);
    a->failure = f;
    return rc;
}

static int read_arm(struct rd *r, int tok, const char *path, size_t i, void *ctx)
{
    struct st_sum_arm *a = &((struct st_sum_summary *)ctx)->arms[i];
    int rc = get_str(r, tok, path, "name", 0, &a->name);
    if (rc == 0 && (i == 0) != (strcmp(a->name, "baseline") == 0)) {
        rc = fail(r, "field '%s.name': the first arm, and only it, must be 'baseline'", path);
    }
    for (size_t k = 0; rc == 0 && k < i; k++) {
        if (strcmp(((struct st_sum_summary *)ctx)->arms[k].name, a->name) == 0) {
            rc = fail(r, "field '%s.name': '%s' is also arms[%zu]'s name", path, a->name, k);
        }
    }
    rc = rc ? rc : get_str(r, tok, path, "verdict", 0, &a->verdict);
    if (rc == 0 && !one_of(a->verdict, verdicts)) {
        rc = fail(r,
                  "field '%s.verdict': '%s' is not one of baseline, promote, reject, "
                  "inconclusive",
                  path, a->verdict);
    }
    rc = rc ? rc : get_strs(r, tok, path, "reasons", &a->reasons, &a->nreasons);
    rc = rc ? rc : get_str(r, tok, path, "on", 1, &a->on);
    rc = rc ? rc : get_map(r, tok, path, "params", &a->params, &a->nparams);
    rc = rc ? rc : get_map(r, tok, path, "changed", &a->changed, &a->nchanged);
    rc = rc ? rc : get_num(r, tok, path, "kv_capacity_tokens", 1, &a->kv, &a->has_kv);
    rc = rc ? rc : get_num(r, tok, path, "max_context_tokens", 1, &a->ctx, &a->has_ctx);
    rc = rc ? rc : read_failure(r, tok, path, a);
    if (rc == 0) {
        int arr;
        rc = field(r, tok, path, "gates", T_ARR, 0, &arr);
        if (rc == 0) {
            a->gates = st_sum_alloc(r->pl, r->j.toks[arr].size * sizeof(struct st_sum_gate));
            rc = each_obj(r, tok, path, "gates", &a->ngates, read_gate, a);
        }
    }
    if (rc == 0) {
        int arr;
        rc = field(r, tok, path, "decisions", T_ARR, 0, &arr);
        if (rc == 0) {
            a->dec = st_sum_alloc(r->pl, r->j.toks[arr].size * sizeof(struct st_sum_decision));
            rc = each_obj(r, tok, path, "decisions", &a->ndec, read_decision, a);
        }
    }
    return rc;
}

int st_sum_arm_index(const struct st_sum_summary *s, const char *name, size_t *idx)
{
    for (size_t i = 0; i < s->narms; i++) {
        if (strcmp(s->arms[i].name, name) == 0) {
            *idx = i;
            return 1;
        }
    }
    return 0;
}

static int read_metric(struct rd *r, int tok, const char *path, size_t i, void *ctx)
{
    struct st_sum_summary *s = ctx;
    struct st_sum_metric *m = &s->m[i];
    int rc = get_str(r, tok, path, "stage", 0, &m->stage);
    rc = rc ? rc : get_str(r, tok, path, "arm", 0, &m->arm);
    if (rc == 0 && !st_sum_arm_index(s, m->arm, &m->arm_idx)) {
        rc = fail(r, "field '%s.arm': no arm named '%s' in arms", path, m->arm);
    }
    rc = rc ? rc : get_str(r, tok, path, "metric", 0, &m->name);
    if (rc == 0) {
        const char *dot = strchr(m->name, '.');
        if (dot == NULL || dot == m->name || dot[1] == '\0' || dot[1] == '@') {
            return fail(r, "field '%s.metric': '%s' is not STEP.METRIC or STEP.METRIC@POINT", path,
                        m->name);
        }
        const char *at = strchr(dot, '@');
        m->step = pstrndup(r->pl, m->name, (size_t)(dot - m->name));
        m->mname = pstrndup(r->pl, dot + 1, at ? (size_t)(at - dot - 1) : strlen(dot + 1));
        m->point = pstrndup(r->pl, at ? at + 1 : "", at ? strlen(at + 1) : 0);
    }
    rc = rc ? rc : get_nums(r, tok, path, "values", &m->values, &m->nvalues);
    rc = rc ? rc : get_num(r, tok, path, "agg", 0, &m->agg, NULL);
    rc = rc ? rc : get_num(r, tok, path, "min", 0, &m->min, NULL);
    rc = rc ? rc : get_num(r, tok, path, "max", 0, &m->max, NULL);
    if (rc == 0) {
        double n;
        rc = get_num(r, tok, path, "n", 0, &n, NULL);
        if (rc == 0 && (n < 0 || n != floor(n) || n > 1e9)) {
            rc = fail(r, "field '%s.n' must be a count", path);
        }
        m->n = (int64_t)n;
    }
    rc = rc ? rc : opt_num(r, tok, path, "median", &m->median);
    rc = rc ? rc : opt_num(r, tok, path, "mean", &m->mean);
    rc = rc ? rc : opt_num(r, tok, path, "mad", &m->mad);
    rc = rc ? rc : opt_num(r, tok, path, "cv", &m->cv);
    rc = rc ? rc : get_strs(r, tok, path, "units", &m->units, &m->nunits);
    return rc;
}

static int read_ttft(struct rd *r, int tok, const char *path, size_t i, void *ctx)
{
    struct st_sum_summary *s = ctx;
    struct st_sum_ttft *t = &s->t[i];
    int rc = get_str(r, tok, path, "stage", 0, &t->stage);
    rc = rc ? rc : get_str(r, tok, path, "arm", 0, &t->arm);
    if (rc == 0 && !st_sum_arm_index(s, t->arm, &t->arm_idx)) {
        rc = fail(r, "field '%s.arm': no arm named '%s' in arms", path, t->arm);
    }
    rc = rc ? rc : get_str(r, tok, path, "step", 0, &t->step);
    rc = rc ? rc : get_nums(r, tok, path, "values_s", &t->v, &t->n);
    return rc;
}

static int read_drift(struct rd *r, int tok, const char *path, size_t i, void *ctx)
{
    struct st_sum_drift *d = &((struct st_sum_cmp *)ctx)->d[i];
    int rc = get_str(r, tok, path, "metric", 0, &d->metric);
    if (rc == 0 && st_json_get(&r->j, tok, "stage") >= 0) {
        rc = get_str(r, tok, path, "stage", 1, &d->stage);
    }
    rc = rc ? rc : get_num(r, tok, path, "this", 0, &d->this_v, NULL);
    rc = rc ? rc : get_num(r, tok, path, "then", 0, &d->then_v, NULL);
    if (rc == 0) {
        /* null: infinite (a baseline of 0 then); the writer cannot write infinities. */
        rc = get_num(r, tok, path, "rel", 1, &d->rel, &d->has_rel);
    }
    rc = rc ? rc : get_bool(r, tok, path, "beyond", &d->beyond);
    return rc;
}

/* The compare object at token tok (path names it). */
static int read_cmp(struct rd *r, int tok, const char *path, struct st_sum_cmp *c)
{
    int rc = get_str(r, tok, path, "with", 0, &c->with);
    rc = rc ? rc : get_str(r, tok, path, "plan_hash", 0, &c->plan_hash);
    if (rc == 0) {
        int arr;
        rc = field(r, tok, path, "drift", T_ARR, 0, &arr);
        if (rc == 0) {
            c->d = st_sum_alloc(r->pl, r->j.toks[arr].size * sizeof(struct st_sum_drift));
            rc = each_obj(r, tok, path, "drift", &c->n, read_drift, c);
        }
    }
    rc = rc ? rc : get_bool(r, tok, path, "drifted", &c->drifted);
    return rc;
}

static int is_hex64(const char *s)
{
    size_t n = 0;
    for (; s[n] != '\0'; n++) {
        char c = s[n];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
            return 0;
        }
    }
    return n == 64;
}

/* An array field's element count, for sizing before each_obj fills it. */
static int arr_len(struct rd *r, int obj, const char *key, size_t *n)
{
    int arr = -1;
    int rc = field(r, obj, "", key, T_ARR, 0, &arr);
    if (rc == 0) {
        *n = r->j.toks[arr].size;
    }
    return rc;
}

static int read_stats(struct rd *r, int root, struct st_sum_summary *s)
{
    static const char p[] = "statistics";
    int o = -1, arr = -1;
    struct st_sum_stats *st = st_sum_alloc(r->pl, sizeof(*st));
    s->stats = st;
    int rc = field(r, root, "", p, T_OBJ, 0, &o);
    rc = rc ? rc : get_str(r, o, p, "test", 0, &st->test);
    rc = rc ? rc : opt_str(r, o, p, "effect", &st->effect);
    rc = rc ? rc : opt_str(r, o, p, "sequential", &st->sequential);
    rc = rc ? rc : get_str(r, o, p, "correction", 0, &st->correction);
    rc = rc ? rc : opt_num(r, o, p, "alpha", &st->alpha);
    rc = rc ? rc : opt_num(r, o, p, "margin", &st->margin);
    rc = rc ? rc : opt_num(r, o, p, "equivalence_confidence", &st->equivalence_confidence);
    if (rc == 0 && has_key(r, o, "family")) {
        rc = field(r, o, p, "family", T_ARR, 0, &arr);
    }
    if (rc == 0 && arr >= 0) {
        st->nfamily = r->j.toks[arr].size;
        st->family = st_sum_alloc(r->pl, st->nfamily * sizeof(uint64_t));
        size_t i = 0;
        for (int e = st_json_first(&r->j, arr); rc == 0 && e >= 0;
             e = st_json_next(&r->j, arr, e), i++) {
            rc = tok_u64(r, e, p, "family[]", &st->family[i]);
        }
    }
    return rc;
}

static int load_body(struct rd *r, struct st_sum_summary *s)
{
    int root = 0, tok, rc;
    if (st_json_type(&r->j, root) != ST_JSON_OBJECT) {
        return fail(r, "not a JSON object");
    }
    rc = field(r, root, "", "schema", T_STR, 0, &tok);
    if (rc) {
        return rc;
    }
    if (!st_json_streq(&r->j, tok, "servetune.campaign.summary/1")) {
        return fail(r, "field 'schema': expected \"servetune.campaign.summary/1\"");
    }
    int plan;
    rc = field(r, root, "", "plan", T_OBJ, 0, &plan);
    rc = rc ? rc : get_str(r, plan, "plan", "name", 0, &s->name);
    rc = rc ? rc : get_str(r, plan, "plan", "hash", 0, &s->hash);
    if (rc == 0 && !is_hex64(s->hash)) {
        rc = fail(r, "field 'plan.hash': expected 64 hex digits");
    }
    rc = rc ? rc : get_str(r, plan, "plan", "file", 0, &s->file);
    rc = rc ? rc : get_num(r, plan, "plan", "noise", 0, &s->noise, NULL);
    s->alpha = NAN;
    if (rc == 0 && st_json_get(&r->j, plan, "alpha") >= 0) {
        rc = get_num(r, plan, "plan", "alpha", 0, &s->alpha, NULL);
    }
    if (rc == 0 && has_key(r, root, "statistics")) {
        rc = read_stats(r, root, s);
    }
    rc = rc ? rc : get_bool(r, root, "", "complete", &s->complete);
    rc = rc ? rc : get_str(r, root, "", "chosen", 0, &s->chosen);
    rc = rc ? rc : get_bool(r, root, "", "restored", &s->restored);
    if (rc == 0 && has_key(r, root, "sim_speed") && has_key(r, root, "seed")) {
        int tok2 = -1;
        s->has_run = 1;
        rc = get_num(r, root, "", "sim_speed", 1, &s->sim_speed, NULL);
        rc = rc ? rc : field(r, root, "", "seed", T_NUM, 0, &tok2);
        rc = rc ? rc : tok_u64(r, tok2, "", "seed", &s->seed);
    }
    size_t n = 0;
    rc = rc ? rc : arr_len(r, root, "stages", &n);
    if (rc == 0) {
        s->stages = st_sum_alloc(r->pl, n * sizeof(struct st_sum_stage));
        rc = each_obj(r, root, "", "stages", &s->nstages, read_stage, s);
    }
    rc = rc ? rc : arr_len(r, root, "arms", &n);
    if (rc == 0 && n == 0) {
        rc = fail(r, "field 'arms' is empty: the baseline at least must be there");
    }
    if (rc == 0) {
        s->arms = st_sum_alloc(r->pl, n * sizeof(struct st_sum_arm));
        rc = each_obj(r, root, "", "arms", &s->narms, read_arm, s);
    }
    for (size_t i = 0; rc == 0 && i < s->nstages; i++) {
        for (size_t k = 0; rc == 0 && k < s->stages[i].narms; k++) {
            size_t idx;
            if (!st_sum_arm_index(s, s->stages[i].arms[k], &idx)) {
                rc = fail(r, "field 'stages[%zu].arms[%zu]': no arm named '%s' in arms", i, k,
                          s->stages[i].arms[k]);
            }
        }
    }
    size_t chosen;
    if (rc == 0 && !st_sum_arm_index(s, s->chosen, &chosen)) {
        rc = fail(r, "field 'chosen': no arm named '%s' in arms", s->chosen);
    }
    rc = rc ? rc : arr_len(r, root, "metrics", &n);
    if (rc == 0) {
        s->m = st_sum_alloc(r->pl, n * sizeof(struct st_sum_metric));
        rc = each_obj(r, root, "", "metrics", &s->nm, read_metric, s);
    }
    rc = rc ? rc : arr_len(r, root, "ttft", &n);
    if (rc == 0) {
        s->t = st_sum_alloc(r->pl, n * sizeof(struct st_sum_ttft));
        rc = each_obj(r, root, "", "ttft", &s->nt, read_ttft, s);
    }
    rc = rc ? rc : field(r, root, "", "compare", T_OBJ, 1, &tok);
    if (rc == 0 && tok >= 0) {
        s->cmp = st_sum_alloc(r->pl, sizeof(struct st_sum_cmp));
        rc = read_cmp(r, tok, "compare", s->cmp);
    }
    return rc;
}

/* Parses and checks summary text into s (release with st_sum_pool_release(&s->pool) either way). */
int st_sum_load(struct st_sum_summary *s, const char *text, size_t len, char *err, size_t errlen)
{
    memset(s, 0, sizeof(*s));
    struct rd r = {.pl = &s->pool, .err = err, .errlen = errlen};
    st_json_init(&r.j, 0);
    st_buf_init(&r.tmp);
    int rc = st_json_parse(&r.j, text, len);
    if (rc) {
        rc = fail(&r, "not valid JSON (%s)", st_strerror(rc));
    } else {
        rc = load_body(&r, s);
    }
    st_buf_release(&r.tmp);
    st_json_release(&r.j);
    return rc;
}

int st_sum_load_compare(const char *text, size_t len, struct st_sum_pool *pl, struct st_sum_cmp *c,
                        char *err, size_t errlen)
{
    struct rd r = {.pl = pl, .err = err, .errlen = errlen};
    memset(c, 0, sizeof(*c));
    st_json_init(&r.j, 0);
    st_buf_init(&r.tmp);
    int rc = st_json_parse(&r.j, text, len);
    if (rc) {
        rc = fail(&r, "not valid JSON (%s)", st_strerror(rc));
    } else if (st_json_type(&r.j, 0) != ST_JSON_OBJECT) {
        rc = fail(&r, "not a JSON object");
    } else {
        rc = read_cmp(&r, 0, "compare", c);
    }
    st_buf_release(&r.tmp);
    st_json_release(&r.j);
    return rc;
}

/* ---- writing: the key order is the one every archive has ---- */

static void w_map(struct st_jw *w, const char *key, const struct st_sum_kvp *v, size_t n)
{
    st_jw_key(w, key);
    st_jw_obj_open(w);
    for (size_t i = 0; i < n; i++) {
        st_jw_kstr(w, v[i].k, v[i].v);
    }
    st_jw_obj_close(w);
}

static void w_stats(struct st_jw *w, const struct st_sum_stats *st)
{
    st_jw_key(w, "statistics");
    st_jw_obj_open(w);
    st_jw_kstr(w, "test", st->test);
    st_jw_knstr(w, "effect", st->effect);
    st_jw_knstr(w, "sequential", st->sequential);
    st_jw_kstr(w, "correction", st->correction);
    st_jw_kf64(w, "alpha", st->alpha);
    st_jw_kf64(w, "margin", st->margin);
    st_jw_kf64(w, "equivalence_confidence", st->equivalence_confidence);
    st_jw_ku64s(w, "family", st->family, st->nfamily);
    st_jw_obj_close(w);
}

/* A count held as a double: as an integer when it is a whole number a double holds exactly
 * (every count the runner writes), else as the number it is, so that what was read writes back
 * and reads again as the same double. */
static void w_count(struct st_jw *w, double v)
{
    if (v >= 0 && v <= 9007199254740992.0 && v == floor(v)) {
        st_jw_u64(w, (uint64_t)v);
    } else {
        st_jw_f64(w, v);
    }
}

static void w_ncount(struct st_jw *w, const char *key, int has, double v)
{
    st_jw_key(w, key);
    if (has) {
        w_count(w, v);
    } else {
        st_jw_null(w);
    }
}

static void w_cmpitem(struct st_jw *w, const struct st_sum_cmpitem *c)
{
    st_jw_obj_open(w);
    st_jw_kstr(w, "metric", c->metric);
    st_jw_kstr(w, "kind", c->kind);
    st_jw_kstr(w, "finding", c->finding);
    st_jw_key(w, "n");
    w_count(w, c->n);
    st_jw_ku64(w, "n_arm", c->n_arm);
    st_jw_ku64(w, "n_base", c->n_base);
    st_jw_ku64(w, "min_n", c->min_n);
    st_jw_ku64(w, "max_n", c->max_n);
    st_jw_kbool(w, "single", c->single);
    st_jw_kstr(w, "aggregate", c->aggregate);
    st_jw_kf64(w, "base", c->base);
    st_jw_kf64(w, "arm", c->arm);
    st_jw_kf64(w, "rel", c->rel);
    st_jw_kf64(w, "threshold", c->threshold);
    st_jw_kf64(w, "lo", c->lo);
    st_jw_kf64(w, "hi", c->hi);
    st_jw_kf64(w, "confidence", c->confidence);
    st_jw_kf64(w, "equivalence_lo", c->equivalence_lo);
    st_jw_kf64(w, "equivalence_hi", c->equivalence_hi);
    st_jw_kf64(w, "p_better", c->p_better);
    st_jw_kf64(w, "p_worse", c->p_worse);
    st_jw_kf64(w, "q_better", c->q_better);
    st_jw_kf64(w, "q_worse", c->q_worse);
    st_jw_kf64(w, "holm_better", c->holm_better);
    st_jw_kf64(w, "holm_worse", c->holm_worse);
    st_jw_kf64(w, "cv_base", c->cv_base);
    st_jw_kf64(w, "cv_arm", c->cv_arm);
    st_jw_ku64(w, "needed_n", c->needed_n);
    st_jw_obj_close(w);
}

static void w_decision(struct st_jw *w, const struct st_sum_decision *d)
{
    st_jw_obj_open(w);
    st_jw_kstr(w, "stage", d->stage);
    st_jw_kstr(w, "verdict", d->verdict);
    st_jw_kstr(w, "reason", d->reason);
    st_jw_kf64(w, "composite", d->composite);
    if (d->has_stats) {
        st_jw_kbool(w, "more", d->more);
        st_jw_kbool(w, "equivalent", d->equivalent);
        st_jw_kbool(w, "single", d->single);
        st_jw_key(w, "comparisons");
        st_jw_arr_open(w);
        for (size_t i = 0; i < d->ncmp; i++) {
            w_cmpitem(w, &d->cmp[i]);
        }
        st_jw_arr_close(w);
    }
    st_jw_obj_close(w);
}

static void w_arm(struct st_jw *w, const struct st_sum_arm *a)
{
    st_jw_obj_open(w);
    st_jw_kstr(w, "name", a->name);
    st_jw_kstr(w, "verdict", a->verdict);
    st_jw_kstrs(w, "reasons", a->reasons, a->nreasons);
    st_jw_knstr(w, "on", a->on);
    w_map(w, "params", a->params, a->nparams);
    w_map(w, "changed", a->changed, a->nchanged);
    w_ncount(w, "kv_capacity_tokens", a->has_kv, a->kv);
    w_ncount(w, "max_context_tokens", a->has_ctx, a->ctx);
    st_jw_key(w, "failure");
    if (a->failure != NULL) {
        const struct st_sum_failure *f = a->failure;
        st_jw_obj_open(w);
        st_jw_kstr(w, "kind", f->kind);
        st_jw_kstr(w, "stage", f->stage);
        st_jw_knstr(w, "step", f->step);
        st_jw_kstr(w, "detail", f->detail);
        st_jw_kstr(w, "evidence", f->evidence);
        st_jw_obj_close(w);
    } else {
        st_jw_null(w);
    }
    st_jw_key(w, "gates");
    st_jw_arr_open(w);
    for (size_t i = 0; i < a->ngates; i++) {
        const struct st_sum_gate *g = &a->gates[i];
        st_jw_obj_open(w);
        st_jw_kstr(w, "stage", g->stage);
        st_jw_kstr(w, "name", g->name);
        st_jw_kbool(w, "passed", g->passed);
        st_jw_knstr(w, "detail", g->detail);
        st_jw_obj_close(w);
    }
    st_jw_arr_close(w);
    st_jw_key(w, "decisions");
    st_jw_arr_open(w);
    for (size_t i = 0; i < a->ndec; i++) {
        w_decision(w, &a->dec[i]);
    }
    st_jw_arr_close(w);
    st_jw_obj_close(w);
}

static void w_metric(struct st_jw *w, const struct st_sum_metric *m)
{
    st_jw_obj_open(w);
    st_jw_kstr(w, "stage", m->stage);
    st_jw_kstr(w, "arm", m->arm);
    st_jw_kstr(w, "metric", m->name);
    st_jw_kf64s(w, "values", m->values, m->nvalues);
    st_jw_kf64(w, "agg", m->agg);
    st_jw_kf64(w, "min", m->min);
    st_jw_kf64(w, "max", m->max);
    st_jw_kf64(w, "median", m->median);
    st_jw_kf64(w, "mean", m->mean);
    st_jw_kf64(w, "mad", m->mad);
    st_jw_kf64(w, "cv", m->cv);
    st_jw_ku64(w, "n", (uint64_t)m->n);
    st_jw_kstrs(w, "units", m->units, m->nunits);
    st_jw_obj_close(w);
}

static void w_compare(struct st_jw *w, const struct st_sum_cmp *c)
{
    st_jw_obj_open(w);
    st_jw_kstr(w, "with", c->with);
    st_jw_kstr(w, "plan_hash", c->plan_hash);
    st_jw_key(w, "drift");
    st_jw_arr_open(w);
    for (size_t i = 0; i < c->n; i++) {
        const struct st_sum_drift *d = &c->d[i];
        st_jw_obj_open(w);
        st_jw_kstr(w, "metric", d->metric);
        if (d->stage != NULL) {
            st_jw_kstr(w, "stage", d->stage);
        }
        st_jw_kf64(w, "this", d->this_v);
        st_jw_kf64(w, "then", d->then_v);
        st_jw_kf64(w, "rel", d->rel);
        st_jw_kbool(w, "beyond", d->beyond);
        st_jw_obj_close(w);
    }
    st_jw_arr_close(w);
    st_jw_kbool(w, "drifted", c->drifted);
    st_jw_obj_close(w);
}

void st_sum_write_compare(const struct st_sum_cmp *c, struct st_buf *out)
{
    struct st_jw w;
    st_jw_init(&w, out);
    w_compare(&w, c);
}

void st_sum_write(const struct st_sum_summary *s, struct st_buf *out)
{
    struct st_jw w;
    st_jw_init(&w, out);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "schema", ST_SUM_SCHEMA);
    st_jw_key(&w, "plan");
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "name", s->name);
    st_jw_kstr(&w, "hash", s->hash);
    st_jw_kstr(&w, "file", s->file);
    st_jw_kf64(&w, "noise", s->noise);
    if (!isnan(s->alpha)) {
        st_jw_kf64(&w, "alpha", s->alpha); /* absent in archives from before the tests */
    }
    st_jw_obj_close(&w);
    if (s->stats != NULL) {
        w_stats(&w, s->stats);
    }
    st_jw_kbool(&w, "complete", s->complete);
    st_jw_kstr(&w, "chosen", s->chosen);
    st_jw_kbool(&w, "restored", s->restored);
    if (s->has_run) {
        st_jw_kf64(&w, "sim_speed", s->sim_speed);
        st_jw_ku64(&w, "seed", s->seed);
    }
    st_jw_key(&w, "stages");
    st_jw_arr_open(&w);
    for (size_t i = 0; i < s->nstages; i++) {
        st_jw_obj_open(&w);
        st_jw_kstr(&w, "name", s->stages[i].name);
        st_jw_kstrs(&w, "arms", s->stages[i].arms, s->stages[i].narms);
        st_jw_obj_close(&w);
    }
    st_jw_arr_close(&w);
    st_jw_key(&w, "arms");
    st_jw_arr_open(&w);
    for (size_t i = 0; i < s->narms; i++) {
        w_arm(&w, &s->arms[i]);
    }
    st_jw_arr_close(&w);
    st_jw_key(&w, "metrics");
    st_jw_arr_open(&w);
    for (size_t i = 0; i < s->nm; i++) {
        w_metric(&w, &s->m[i]);
    }
    st_jw_arr_close(&w);
    st_jw_key(&w, "ttft");
    st_jw_arr_open(&w);
    for (size_t i = 0; i < s->nt; i++) {
        st_jw_obj_open(&w);
        st_jw_kstr(&w, "stage", s->t[i].stage);
        st_jw_kstr(&w, "arm", s->t[i].arm);
        st_jw_kstr(&w, "step", s->t[i].step);
        st_jw_kf64s(&w, "values_s", s->t[i].v, s->t[i].n);
        st_jw_obj_close(&w);
    }
    st_jw_arr_close(&w);
    st_jw_key(&w, "compare");
    if (s->cmp != NULL) {
        w_compare(&w, s->cmp);
    } else {
        st_jw_null(&w);
    }
    st_jw_obj_close(&w);
    st_buf_putc(out, '\n');
}
