/*
 * The campaign summary reader (summary.h): typed field access over src/base/json.h with the
 * field's path in every error, the schema of report.h checked field by field into the model.
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

static void *palloc(struct st_sum_pool *pl, size_t n)
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
    char *c = palloc(pl, n + 1);
    memcpy(c, s, n);
    return c;
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
    char *s = palloc(r->pl, r->tmp.len + 1);
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
    *out = 0;
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
    *out = palloc(r->pl, *n * sizeof(char *));
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
    *out = palloc(r->pl, *n * sizeof(double));
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
    *out = palloc(r->pl, *n * sizeof(struct st_sum_kvp));
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
    rc = rc ? rc : get_num(r, tok, path, "rel", 1, &c->rel, &c->has_rel);
    rc = rc ? rc : get_num(r, tok, path, "lo", 1, &c->lo, &c->has_lo);
    rc = rc ? rc : get_num(r, tok, path, "hi", 1, &c->hi, &c->has_hi);
    rc = rc ? rc : get_num(r, tok, path, "confidence", 1, &c->confidence, NULL);
    rc = rc ? rc : get_num(r, tok, path, "threshold", 0, &c->threshold, NULL);
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
        rc = field(r, tok, path, "comparisons", T_ARR, 0, &arr);
        if (rc == 0) {
            d->cmp = palloc(r->pl, (r->j.toks[arr].size + 1) * sizeof(*d->cmp));
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
    struct st_sum_failure *f = palloc(r->pl, sizeof(*f));
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
            a->gates = palloc(r->pl, r->j.toks[arr].size * sizeof(struct st_sum_gate));
            rc = each_obj(r, tok, path, "gates", &a->ngates, read_gate, a);
        }
    }
    if (rc == 0) {
        int arr;
        rc = field(r, tok, path, "decisions", T_ARR, 0, &arr);
        if (rc == 0) {
            a->dec = palloc(r->pl, r->j.toks[arr].size * sizeof(struct st_sum_decision));
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
    if (rc == 0) {
        char **units;
        size_t nunits;
        rc = get_strs(r, tok, path, "units", &units, &nunits);
    }
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
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
    if (rc == 0) {
        qsort(t->v, t->n, sizeof(double), cmp_double);
    }
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
            c->d = palloc(r->pl, r->j.toks[arr].size * sizeof(struct st_sum_drift));
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
    if (rc == 0 && st_json_get(&r->j, plan, "alpha") >= 0) {
        rc = get_num(r, plan, "plan", "alpha", 0, &s->alpha, NULL);
    }
    int st = st_json_get(&r->j, 0, "statistics");
    if (rc == 0 && st >= 0) {
        int o = -1;
        rc = field(r, 0, "", "statistics", T_OBJ, 0, &o);
        rc = rc ? rc : get_str(r, o, "statistics", "test", 0, &s->test);
        rc = rc ? rc : get_str(r, o, "statistics", "correction", 0, &s->correction);
    }
    rc = rc ? rc : get_bool(r, root, "", "complete", &s->complete);
    rc = rc ? rc : get_str(r, root, "", "chosen", 0, &s->chosen);
    rc = rc ? rc : get_bool(r, root, "", "restored", &s->restored);
    size_t n = 0;
    rc = rc ? rc : arr_len(r, root, "stages", &n);
    if (rc == 0) {
        s->stages = palloc(r->pl, n * sizeof(struct st_sum_stage));
        rc = each_obj(r, root, "", "stages", &s->nstages, read_stage, s);
    }
    rc = rc ? rc : arr_len(r, root, "arms", &n);
    if (rc == 0 && n == 0) {
        rc = fail(r, "field 'arms' is empty: the baseline at least must be there");
    }
    if (rc == 0) {
        s->arms = palloc(r->pl, n * sizeof(struct st_sum_arm));
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
        s->m = palloc(r->pl, n * sizeof(struct st_sum_metric));
        rc = each_obj(r, root, "", "metrics", &s->nm, read_metric, s);
    }
    rc = rc ? rc : arr_len(r, root, "ttft", &n);
    if (rc == 0) {
        s->t = palloc(r->pl, n * sizeof(struct st_sum_ttft));
        rc = each_obj(r, root, "", "ttft", &s->nt, read_ttft, s);
    }
    rc = rc ? rc : field(r, root, "", "compare", T_OBJ, 1, &tok);
    if (rc == 0 && tok >= 0) {
        s->cmp = palloc(r->pl, sizeof(struct st_sum_cmp));
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
