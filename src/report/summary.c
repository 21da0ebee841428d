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
#include <stddef.h>
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

enum { T_STR = 1, T_NUM, T_BOOL, T_ARR, T_OBJ, T_U64 };

static const char *const type_names[] = {"",         "a string",  "a number",      "true or false",
                                         "an array", "an object", "a whole number"};

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

/* An array of strings, numbers or whole numbers (want T_STR, T_NUM or T_U64) into *out, n of
 * them, each elem bytes (pool). A whole number's error names the field "key[]". */
static int get_arr(struct rd *r, int obj, const char *path, const char *key, int want, void *out,
                   size_t *n)
{
    int arr = -1;
    int rc = field(r, obj, path, key, T_ARR, 0, &arr);
    if (rc) {
        return rc;
    }
    size_t elem = want == T_STR   ? sizeof(char *)
                  : want == T_NUM ? sizeof(double)
                                  : sizeof(uint64_t);
    *n = r->j.toks[arr].size;
    char *v = st_sum_alloc(r->pl, *n * elem);
    memcpy(out, &v, sizeof(v));
    char k[64];
    snprintf(k, sizeof(k), "%s[]", key);
    size_t i = 0;
    for (int e = st_json_first(&r->j, arr); e >= 0; e = st_json_next(&r->j, arr, e), i++) {
        void *at = v + i * elem;
        if (want == T_U64) {
            rc = tok_u64(r, e, path, k, at);
        } else if (!type_ok(&r->j, e, want) || (want == T_NUM && st_json_f64(&r->j, e, at) != 0)) {
            rc = fail(r, "field '%s.%s[%zu]' must be %s", path, key, i, type_names[want]);
        } else if (want == T_STR) {
            char *str = tok_str(r, e);
            memcpy(at, &str, sizeof(str));
        }
        if (rc) {
            return rc;
        }
    }
    return 0;
}

/* ---- the flat fields of an object: one table each, read and written in its order ---- */

/* A field's kind: its type (T_STR, T_NUM, T_BOOL or T_U64), with F_NULL where null is allowed,
 * F_OPT where older archives lack it (absent reads as null does; T_U64 fields are all optional)
 * and F_COUNT for a number written as a count (w_count). */
enum { F_NULL = 0x10, F_OPT = 0x20, F_COUNT = 0x40 };

struct fld {
    const char *key;
    int kind;
    size_t off; /* of the member, in the struct the table describes */
};

static int read_fld(struct rd *r, int tok, const char *path, const struct fld *f, char *obj)
{
    void *p = obj + f->off;
    int opt = (f->kind & F_OPT) != 0, null = (f->kind & F_NULL) != 0;
    switch (f->kind & 15) {
    case T_STR:
        return opt ? opt_str(r, tok, path, f->key, p) : get_str(r, tok, path, f->key, null, p);
    case T_NUM:
        return opt ? opt_num(r, tok, path, f->key, p)
                   : get_num(r, tok, path, f->key, null, p, NULL);
    case T_BOOL:
        return opt ? opt_bool(r, tok, path, f->key, p) : get_bool(r, tok, path, f->key, p);
    default:
        return opt_u64(r, tok, path, f->key, p);
    }
}

/* Reads the n fields of table f of the object at tok into obj. */
static int read_flds(struct rd *r, int tok, const char *path, const struct fld *f, size_t n,
                     void *obj)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = read_fld(r, tok, path, &f[i], obj);
    }
    return rc;
}

#define CMP(key, kind, m)                                                                          \
    {                                                                                              \
        key, kind, offsetof(struct st_sum_cmpitem, m)                                              \
    }
static const struct fld cmpitem_flds[] = {
    CMP("metric", T_STR, metric),
    CMP("kind", T_STR, kind),
    CMP("finding", T_STR, finding),
    CMP("n", T_NUM | F_COUNT, n),
    CMP("n_arm", T_U64, n_arm),
    CMP("n_base", T_U64, n_base),
    CMP("min_n", T_U64, min_n),
    CMP("max_n", T_U64, max_n),
    CMP("single", T_BOOL, single),
    CMP("aggregate", T_STR, aggregate),
    CMP("base", T_NUM | F_NULL, base),
    CMP("arm", T_NUM | F_NULL, arm),
    CMP("rel", T_NUM | F_NULL, rel),
    CMP("threshold", T_NUM, threshold),
    CMP("lo", T_NUM | F_NULL, lo),
    CMP("hi", T_NUM | F_NULL, hi),
    CMP("confidence", T_NUM | F_NULL, confidence),
    CMP("equivalence_lo", T_NUM | F_OPT, equivalence_lo),
    CMP("equivalence_hi", T_NUM | F_OPT, equivalence_hi),
    CMP("p_better", T_NUM | F_OPT, p_better),
    CMP("p_worse", T_NUM | F_OPT, p_worse),
    CMP("q_better", T_NUM | F_OPT, q_better),
    CMP("q_worse", T_NUM | F_OPT, q_worse),
    CMP("holm_better", T_NUM | F_OPT, holm_better),
    CMP("holm_worse", T_NUM | F_OPT, holm_worse),
    CMP("cv_base", T_NUM | F_OPT, cv_base),
    CMP("cv_arm", T_NUM | F_OPT, cv_arm),
    CMP("needed_n", T_U64, needed_n),
};
#undef CMP

#define DEC(key, kind, m)                                                                          \
    {                                                                                              \
        key, kind, offsetof(struct st_sum_decision, m)                                             \
    }
static const struct fld decision_flds[] = {
    DEC("stage", T_STR, stage),
    DEC("verdict", T_STR, verdict),
    DEC("reason", T_STR, reason),
    DEC("composite", T_NUM, composite),
};
/* The statistical part (has_stats), before the comparisons. */
static const struct fld decision_stat_flds[] = {
    DEC("more", T_BOOL | F_OPT, more),
    DEC("equivalent", T_BOOL | F_OPT, equivalent),
    DEC("single", T_BOOL | F_OPT, single),
};
#undef DEC

#define GATE(key, kind, m)                                                                         \
    {                                                                                              \
        key, kind, offsetof(struct st_sum_gate, m)                                                 \
    }
static const struct fld gate_flds[] = {
    GATE("stage", T_STR, stage),
    GATE("name", T_STR, name),
    GATE("passed", T_BOOL, passed),
    GATE("detail", T_STR | F_NULL, detail),
};
#undef GATE

#define FAIL(key, kind, m)                                                                         \
    {                                                                                              \
        key, kind, offsetof(struct st_sum_failure, m)                                              \
    }
static const struct fld failure_flds[] = {
    FAIL("kind", T_STR, kind),          FAIL("stage", T_STR, stage),
    FAIL("step", T_STR | F_NULL, step), FAIL("detail", T_STR, detail),
    FAIL("evidence", T_STR, evidence),
};
#undef FAIL

/* A drift's numbers, after its metric and stage (rel is read by hand: has_rel). */
#define DRIFT(key, kind, m)                                                                        \
    {                                                                                              \
        key, kind, offsetof(struct st_sum_drift, m)                                                \
    }
static const struct fld drift_flds[] = {
    DRIFT("this", T_NUM, this_v),
    DRIFT("then", T_NUM, then_v),
    DRIFT("rel", T_NUM | F_NULL, rel),
    DRIFT("beyond", T_BOOL, beyond),
};
#undef DRIFT

/* A metric's numbers, between its values and its n. */
#define MET(key, kind, m)                                                                          \
    {                                                                                              \
        key, kind, offsetof(struct st_sum_metric, m)                                               \
    }
static const struct fld metric_flds[] = {
    MET("agg", T_NUM, agg),           MET("min", T_NUM, min),
    MET("max", T_NUM, max),           MET("median", T_NUM | F_OPT, median),
    MET("mean", T_NUM | F_OPT, mean), MET("mad", T_NUM | F_OPT, mad),
    MET("cv", T_NUM | F_OPT, cv),
};
#undef MET

/* The statistics object, before its family. */
#define STS(key, kind, m)                                                                          \
    {                                                                                              \
        key, kind, offsetof(struct st_sum_stats, m)                                                \
    }
static const struct fld stats_flds[] = {
    STS("test", T_STR, test),
    STS("effect", T_STR | F_OPT, effect),
    STS("sequential", T_STR | F_OPT, sequential),
    STS("correction", T_STR, correction),
    STS("alpha", T_NUM | F_OPT, alpha),
    STS("margin", T_NUM | F_OPT, margin),
    STS("equivalence_confidence", T_NUM | F_OPT, equivalence_confidence),
};
#undef STS

#define NFLD(t) (sizeof(t) / sizeof((t)[0]))

/* An array of objects each of one table's fields: the table, and where the elements go. */
struct objs {
    const struct fld *f;
    size_t nf, size;
    char *v;
};

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
    rc = rc ? rc : get_arr(r, tok, path, "arms", T_STR, &st->arms, &st->narms);
    return rc;
}

static int read_obj(struct rd *r, int tok, const char *path, size_t i, void *ctx)
{
    const struct objs *o = ctx;
    return read_flds(r, tok, path, o->f, o->nf, o->v + i * o->size);
}

/* The array key of obj, each element an object of the n fields of table f, into *out (pool),
 * size bytes each. */
static int read_objs(struct rd *r, int obj, const char *path, const char *key, const struct fld *f,
                     size_t nf, size_t size, void *out, size_t *n)
{
    int arr = -1;
    int rc = field(r, obj, path, key, T_ARR, 0, &arr);
    if (rc) {
        return rc;
    }
    struct objs o = {f, nf, size, st_sum_alloc(r->pl, r->j.toks[arr].size * size)};
    memcpy(out, &o.v, sizeof(o.v));
    return each_obj(r, obj, path, key, n, read_obj, &o);
}

static int read_decision(struct rd *r, int tok, const char *path, size_t i, void *ctx)
{
    struct st_sum_decision *d = &((struct st_sum_arm *)ctx)->dec[i];
    /* The verdict (the table's second field) is checked before the fields after it are read. */
    int rc = read_flds(r, tok, path, decision_flds, 2, d);
    if (rc == 0 && !one_of(d->verdict, verdicts)) {
        rc = fail(r,
                  "field '%s.verdict': '%s' is not one of baseline, promote, reject, "
                  "inconclusive",
                  path, d->verdict);
    }
    rc = rc ? rc : read_flds(r, tok, path, decision_flds + 2, NFLD(decision_flds) - 2, d);
    if (rc == 0 && st_json_get(&r->j, tok, "comparisons") >= 0) {
        d->has_stats = 1;
        rc = read_flds(r, tok, path, decision_stat_flds, NFLD(decision_stat_flds), d);
        rc = rc ? rc
                : read_objs(r, tok, path, "comparisons", cmpitem_flds, NFLD(cmpitem_flds),
                            sizeof(*d->cmp), &d->cmp, &d->ncmp);
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
    rc = read_flds(r, tok, p, failure_flds, 1, f); /* the kind, checked before the rest */
    if (rc == 0 && !one_of(f->kind, failure_kinds)) {
        rc = fail(r,
                  "field '%s.kind': '%s' is not one of oom, exit, health, start, config, "
                  "operator, step",
                  p, f->kind);
    }
    rc = rc ? rc : read_flds(r, tok, p, failure_flds + 1, NFLD(failure_flds) - 1, f);
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
    rc = rc ? rc : get_arr(r, tok, path, "reasons", T_STR, &a->reasons, &a->nreasons);
    rc = rc ? rc : get_str(r, tok, path, "on", 1, &a->on);
    rc = rc ? rc : get_map(r, tok, path, "params", &a->params, &a->nparams);
    rc = rc ? rc : get_map(r, tok, path, "changed", &a->changed, &a->nchanged);
    rc = rc ? rc : get_num(r, tok, path, "kv_capacity_tokens", 1, &a->kv, &a->has_kv);
    rc = rc ? rc : get_num(r, tok, path, "max_context_tokens", 1, &a->ctx, &a->has_ctx);
    rc = rc ? rc : read_failure(r, tok, path, a);
    rc = rc ? rc
            : read_objs(r, tok, path, "gates", gate_flds, NFLD(gate_flds), sizeof(*a->gates),
                        &a->gates, &a->ngates);
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
    rc = rc ? rc : get_arr(r, tok, path, "values", T_NUM, &m->values, &m->nvalues);
    rc = rc ? rc : read_flds(r, tok, path, metric_flds, NFLD(metric_flds), m);
    if (rc == 0) {
        double n;
        rc = get_num(r, tok, path, "n", 0, &n, NULL);
        if (rc == 0 && (n < 0 || n != floor(n) || n > 1e9)) {
            rc = fail(r, "field '%s.n' must be a count", path);
        }
        m->n = (int64_t)n;
    }
    rc = rc ? rc : get_arr(r, tok, path, "units", T_STR, &m->units, &m->nunits);
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
    rc = rc ? rc : get_arr(r, tok, path, "values_s", T_NUM, &t->v, &t->n);
    return rc;
}

static int read_drift(struct rd *r, int tok, const char *path, size_t i, void *ctx)
{
    struct st_sum_drift *d = &((struct st_sum_cmp *)ctx)->d[i];
    int rc = get_str(r, tok, path, "metric", 0, &d->metric);
    if (rc == 0 && st_json_get(&r->j, tok, "stage") >= 0) {
        rc = get_str(r, tok, path, "stage", 1, &d->stage);
    }
    rc = rc ? rc : read_flds(r, tok, path, drift_flds, 2, d);
    if (rc == 0) {
        /* null: infinite (a baseline of 0 then); the writer cannot write infinities. */
        rc = get_num(r, tok, path, "rel", 1, &d->rel, &d->has_rel);
    }
    rc = rc ? rc : read_flds(r, tok, path, drift_flds + 3, 1, d);
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
    int o = -1;
    struct st_sum_stats *st = st_sum_alloc(r->pl, sizeof(*st));
    s->stats = st;
    int rc = field(r, root, "", p, T_OBJ, 0, &o);
    rc = rc ? rc : read_flds(r, o, p, stats_flds, NFLD(stats_flds), st);
    if (rc == 0 && has_key(r, o, "family")) {
        rc = get_arr(r, o, p, "family", T_U64, &st->family, &st->nfamily);
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
    rc = rc ? rc : opt_str(r, root, "", "restore_checks", &s->restore_checks);
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

/* Writes the n fields of table f from obj (what read_flds reads back). */
static void write_flds(struct st_jw *w, const struct fld *f, size_t n, const void *obj)
{
    for (size_t i = 0; i < n; i++) {
        const char *p = (const char *)obj + f[i].off;
        int t = f[i].kind & 15;
        if (t == T_STR) {
            st_jw_knstr(w, f[i].key, *(char *const *)p);
        } else if (t == T_BOOL) {
            st_jw_kbool(w, f[i].key, *(const int *)p);
        } else if (t == T_U64) {
            st_jw_ku64(w, f[i].key, *(const uint64_t *)p);
        } else if (f[i].kind & F_COUNT) {
            w_ncount(w, f[i].key, 1, *(const double *)p);
        } else {
            st_jw_kf64(w, f[i].key, *(const double *)p);
        }
    }
}

/* The array key of n objects, each the fields of table f from v (size bytes apart). */
static void write_objs(struct st_jw *w, const char *key, const struct fld *f, size_t nf,
                       const void *v, size_t size, size_t n)
{
    st_jw_key(w, key);
    st_jw_arr_open(w);
    for (size_t i = 0; i < n; i++) {
        st_jw_obj_open(w);
        write_flds(w, f, nf, (const char *)v + i * size);
        st_jw_obj_close(w);
    }
    st_jw_arr_close(w);
}

static void w_stats(struct st_jw *w, const struct st_sum_stats *st)
{
    st_jw_key(w, "statistics");
    st_jw_obj_open(w);
    write_flds(w, stats_flds, NFLD(stats_flds), st);
    st_jw_ku64s(w, "family", st->family, st->nfamily);
    st_jw_obj_close(w);
}

static void w_decision(struct st_jw *w, const struct st_sum_decision *d)
{
    st_jw_obj_open(w);
    write_flds(w, decision_flds, NFLD(decision_flds), d);
    if (d->has_stats) {
        write_flds(w, decision_stat_flds, NFLD(decision_stat_flds), d);
        write_objs(w, "comparisons", cmpitem_flds, NFLD(cmpitem_flds), d->cmp, sizeof(*d->cmp),
                   d->ncmp);
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
        st_jw_obj_open(w);
        write_flds(w, failure_flds, NFLD(failure_flds), a->failure);
        st_jw_obj_close(w);
    } else {
        st_jw_null(w);
    }
    write_objs(w, "gates", gate_flds, NFLD(gate_flds), a->gates, sizeof(*a->gates), a->ngates);
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
    write_flds(w, metric_flds, NFLD(metric_flds), m);
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
        write_flds(w, drift_flds, NFLD(drift_flds), d);
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
    if (s->restore_checks) {
        st_jw_kstr(&w, "restore_checks", s->restore_checks);
    }
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
