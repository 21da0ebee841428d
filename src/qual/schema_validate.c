/*
 * JSON Schema subset: the validator (see schema.h; the compiled form is in schema_int.h). Walks
 * an instance against the node array; a depth limit and a step budget bound every walk, and a
 * limit that runs out voids the verdict rather than passing it.
 */
#include "qual/schema.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/xalloc.h"
#include "qual/schema_int.h"

/* ---- validating ---- */

struct vctx {
    const struct st_schema *s;
    const struct st_json *doc; /* borrowed: the instance */
    struct st_schema_result *res;
    struct st_buf ipath;   /* JSON Pointer of the instance value being validated */
    struct st_buf scratch; /* decoded instance strings; never held across a recursive call */
    struct st_buf scratch2;
    int quiet;    /* > 0 inside anyOf, oneOf and not: failures there are not reported */
    int recorded; /* a failure has been reported */
    uint32_t depth;
    uint64_t steps, max_steps;
};

static const char *json_type_name(const struct st_json *d, int tok)
{
    switch (st_json_type(d, tok)) {
    case ST_JSON_OBJECT:
        return "object";
    case ST_JSON_ARRAY:
        return "array";
    case ST_JSON_STRING:
        return "string";
    case ST_JSON_NUMBER: {
        size_t n;
        const char *raw = st_json_raw(d, tok, &n);
        return st_schema_number_is_integer(raw, n) ? "integer" : "number";
    }
    case ST_JSON_TRUE:
    case ST_JSON_FALSE:
        return "boolean";
    case ST_JSON_NULL:
        return "null";
    default:
        return "?";
    }
}

/* Reports a failure at the current instance path and node->path + "/" + kw (when kw is not
 * NULL), unless quiet or one is already reported. Returns 0 (invalid). */
__attribute__((format(printf, 4, 5))) static int fail(struct vctx *c, const struct node *x,
                                                      const char *kw, const char *fmt, ...)
{
    if (c->quiet > 0 || c->recorded) {
        return 0;
    }
    struct st_schema_result *r = c->res;
    c->recorded = 1;
    st_schema_copy_cut(r->instance_path, sizeof(r->instance_path), st_buf_str(&c->ipath),
                       c->ipath.len);
    struct st_buf k;
    st_buf_init(&k);
    st_buf_puts(&k, x->path);
    if (kw) {
        st_schema_ptr_push(&k, kw, strlen(kw));
    }
    st_schema_copy_cut(r->keyword_path, sizeof(r->keyword_path), st_buf_str(&k), k.len);
    st_buf_release(&k);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
    va_end(ap);
    return 0;
}

/* A limit ran out: reported whether quiet or not, since the verdict is void. */
static int limit(struct vctx *c, const char *what)
{
    struct st_schema_result *r = c->res;
    st_schema_copy_cut(r->instance_path, sizeof(r->instance_path), st_buf_str(&c->ipath),
                       c->ipath.len);
    r->keyword_path[0] = '\0';
    snprintf(r->reason, sizeof(r->reason), "validation stopped: %s", what);
    c->recorded = 1;
    return ST_ETOOBIG;
}

static int charge(struct vctx *c, uint64_t n)
{
    if (n > c->max_steps - c->steps) {
        return limit(c, "over the step budget");
    }
    c->steps += n;
    return 0;
}

/* Deep equality of schema token a and instance token b: numbers by value, strings decoded,
 * objects as unordered sets of members. 1 equal, 0 not, < 0 a limit. */
static int equal(struct vctx *c, int a, int b)
{
    const struct st_json *da = &c->s->doc, *db = c->doc;
    enum st_json_type ta = st_json_type(da, a), tb = st_json_type(db, b);
    int rc = charge(c, 1);
    if (rc != 0) {
        return rc;
    }
    if (ta != tb) {
        return 0;
    }
    switch (ta) {
    case ST_JSON_NUMBER: {
        int64_t ia, ib;
        if (st_json_i64(da, a, &ia) == 0 && st_json_i64(db, b, &ib) == 0) {
            return ia == ib;
        }
        double fa, fb;
        return st_json_f64(da, a, &fa) == 0 && st_json_f64(db, b, &fb) == 0 && fa == fb;
    }
    case ST_JSON_STRING: {
        const char *pa, *pb;
        size_t na, nb;
        struct st_buf sa;
        st_buf_init(&sa);
        int eq = st_schema_get_str(da, a, &sa, &pa, &na) == 0 &&
                 st_schema_get_str(db, b, &c->scratch, &pb, &nb) == 0 && na == nb &&
                 memcmp(pa, pb, na) == 0;
        st_buf_release(&sa);
        return eq;
    }
    case ST_JSON_ARRAY: {
        if (da->toks[a].size != db->toks[b].size) {
            return 0;
        }
        int eb = st_json_first(db, b);
        for (int ea = st_json_first(da, a); ea >= 0; ea = st_json_next(da, a, ea)) {
            rc = equal(c, ea, eb);
            if (rc != 1) {
                return rc;
            }
            eb = st_json_next(db, b, eb);
        }
        return 1;
    }
    case ST_JSON_OBJECT: {
        if (da->toks[a].size != db->toks[b].size) {
            return 0;
        }
        for (int ka = st_json_first(da, a); ka >= 0; ka = st_json_next(da, a, ka)) {
            int found = 0;
            for (int kb = st_json_first(db, b); kb >= 0 && !found; kb = st_json_next(db, b, kb)) {
                rc = equal(c, ka, kb);
                if (rc < 0) {
                    return rc;
                }
                if (rc == 1) {
                    rc = equal(c, ka + 1, kb + 1);
                    if (rc < 0) {
                        return rc;
                    }
                    found = 1;
                    if (rc == 0) {
                        return 0;
                    }
                }
            }
            if (!found) {
                return 0;
            }
        }
        return 1;
    }
    default:
        return 1; /* true, false, null: the type is the value */
    }
}

static int validate(struct vctx *c, int32_t ni, int tok);

static int check_number(struct vctx *c, const struct node *x, int tok)
{
    double v;
    char want[40], got[40];
    if (st_json_f64(c->doc, tok, &v) != 0) {
        return 1;
    }
    size_t n;
    const char *raw = st_json_raw(c->doc, tok, &n);
    st_schema_copy_cut(got, sizeof(got), raw, n);
    if ((x->has & (1ull << KW_MINIMUM)) && v < x->min) {
        st_schema_fmt_double(want, sizeof(want), x->min);
        return fail(c, x, "minimum", "%s is less than the minimum %s", got, want);
    }
    if ((x->has & (1ull << KW_MAXIMUM)) && v > x->max) {
        st_schema_fmt_double(want, sizeof(want), x->max);
        return fail(c, x, "maximum", "%s is greater than the maximum %s", got, want);
    }
    if ((x->has & (1ull << KW_XMINIMUM)) && v <= x->xmin) {
        st_schema_fmt_double(want, sizeof(want), x->xmin);
        return fail(c, x, "exclusiveMinimum", "%s is not greater than %s", got, want);
    }
    if ((x->has & (1ull << KW_XMAXIMUM)) && v >= x->xmax) {
        st_schema_fmt_double(want, sizeof(want), x->xmax);
        return fail(c, x, "exclusiveMaximum", "%s is not less than %s", got, want);
    }
    return 1;
}

static int check_string(struct vctx *c, const struct node *x, int tok)
{
    const char *p;
    size_t n;
    if (st_schema_get_str(c->doc, tok, &c->scratch, &p, &n) != 0) {
        return 1;
    }
    uint64_t cps = 0;
    for (size_t i = 0; i < n; i++) {
        cps += ((unsigned char)p[i] & 0xC0) != 0x80;
    }
    if ((x->has & (1ull << KW_MIN_LENGTH)) && cps < x->min_len) {
        return fail(c, x, "minLength", "string of %llu characters, shorter than minLength %llu",
                    (unsigned long long)cps, (unsigned long long)x->min_len);
    }
    if ((x->has & (1ull << KW_MAX_LENGTH)) && cps > x->max_len) {
        return fail(c, x, "maxLength", "string of %llu characters, longer than maxLength %llu",
                    (unsigned long long)cps, (unsigned long long)x->max_len);
    }
    if (x->pattern >= 0) {
        /* REG_STARTEND: the length bounds the match, so an escaped NUL does not end it. The
         * text is still NUL-terminated (a copy when it is the raw token), since sanitizers'
         * regexec interceptors read up to a NUL whatever the flags say. */
        if (p != c->scratch.data) {
            st_buf_clear(&c->scratch);
            st_buf_append(&c->scratch, p, n);
            p = st_buf_str(&c->scratch);
        }
        if (n > (size_t)INT32_MAX) {
            return limit(c, "a string too long for regexec");
        }
        regmatch_t m[1] = {{0, (regoff_t)n}};
        int rc = charge(c, n / 64 + 1);
        if (rc != 0) {
            return rc;
        }
        if (regexec(c->s->res[x->pattern], p, 1, m, REG_STARTEND) != 0) {
            return fail(c, x, "pattern", "string does not match the pattern");
        }
    }
    return 1;
}

static int check_array(struct vctx *c, const struct node *x, int tok)
{
    uint32_t size = c->doc->toks[tok].size;
    if ((x->has & (1ull << KW_MIN_ITEMS)) && size < x->min_items) {
        return fail(c, x, "minItems", "array of %u items, fewer than minItems %llu", size,
                    (unsigned long long)x->min_items);
    }
    if ((x->has & (1ull << KW_MAX_ITEMS)) && size > x->max_items) {
        return fail(c, x, "maxItems", "array of %u items, more than maxItems %llu", size,
                    (unsigned long long)x->max_items);
    }
    uint32_t i = 0;
    for (int e = st_json_first(c->doc, tok); e >= 0; e = st_json_next(c->doc, tok, e), i++) {
        int32_t sub = i < x->nprefix ? (int32_t)c->s->kids[x->prefix + i] : x->items;
        if (sub < 0) {
            if (i >= x->nprefix) {
                break; /* no "items": the rest is unconstrained */
            }
            continue;
        }
        size_t saved = c->ipath.len;
        st_schema_ptr_push_index(&c->ipath, i);
        int rc;
        if (i >= x->nprefix && c->s->nodes[sub].boolean == 0) {
            rc = fail(c, x, "items", "array of %u items; only the %u of prefixItems are allowed",
                      size, x->nprefix);
        } else {
            rc = validate(c, sub, e);
        }
        st_schema_buf_truncate(&c->ipath, saved);
        if (rc != 1) {
            return rc;
        }
    }
    return 1;
}

/* Whether object tok has a member named s[0..n). */
static int has_member(struct vctx *c, int tok, const char *s, size_t n, int *found)
{
    *found = 0;
    for (int k = st_json_first(c->doc, tok); k >= 0; k = st_json_next(c->doc, tok, k)) {
        const char *p;
        size_t len;
        int rc = charge(c, 1);
        if (rc != 0) {
            return rc;
        }
        if (st_schema_get_str(c->doc, k, &c->scratch2, &p, &len) == 0 && len == n &&
            memcmp(p, s, n) == 0) {
            *found = 1;
            return 0;
        }
    }
    return 0;
}

static int check_object(struct vctx *c, const struct node *x, int tok)
{
    const struct st_schema *s = c->s;
    for (uint32_t i = 0; i < x->nreq; i++) {
        const struct name *r = &s->strs[x->req + i];
        int found, rc = has_member(c, tok, r->s, r->len, &found);
        if (rc != 0) {
            return rc;
        }
        if (!found) {
            return fail(c, x, "required", "missing required property \"%s\"", r->s);
        }
    }
    if (x->nprops == 0 && x->addl < 0) {
        return 1;
    }
    for (int k = st_json_first(c->doc, tok); k >= 0; k = st_json_next(c->doc, tok, k)) {
        const char *p;
        size_t n;
        if (st_schema_get_str(c->doc, k, &c->scratch, &p, &n) != 0) {
            continue;
        }
        const struct name *prop = st_schema_find_name(s->props, x->props, x->nprops, p, n);
        int32_t sub = prop ? prop->node : x->addl;
        if (sub < 0) {
            continue;
        }
        size_t saved = c->ipath.len;
        st_schema_ptr_push(&c->ipath, p, n);
        int rc;
        if (!prop && s->nodes[sub].boolean == 0) {
            rc = fail(c, x, "additionalProperties", "property \"%.*s\" is not allowed",
                      (int)(n < 64 ? n : 64), p);
        } else {
            rc = validate(c, sub, k + 1);
        }
        st_schema_buf_truncate(&c->ipath, saved);
        if (rc != 1) {
            return rc;
        }
    }
    return 1;
}

static int type_ok(const struct st_json *d, int tok, uint32_t types)
{
    switch (st_json_type(d, tok)) {
    case ST_JSON_OBJECT:
        return (types & T_OBJECT) != 0;
    case ST_JSON_ARRAY:
        return (types & T_ARRAY) != 0;
    case ST_JSON_STRING:
        return (types & T_STRING) != 0;
    case ST_JSON_NUMBER: {
        if (types & T_NUMBER) {
            return 1;
        }
        size_t n;
        const char *raw = st_json_raw(d, tok, &n);
        return (types & T_INTEGER) && st_schema_number_is_integer(raw, n);
    }
    case ST_JSON_TRUE:
    case ST_JSON_FALSE:
        return (types & T_BOOLEAN) != 0;
    case ST_JSON_NULL:
        return (types & T_NULL) != 0;
    default:
        return 0;
    }
}

static void type_list(uint32_t types, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < COUNT(st_schema_type_names); i++) {
        if (types & (1u << i)) {
            int k =
                snprintf(out + len, cap - len, "%s%s", len ? " or " : "", st_schema_type_names[i]);
            len += (size_t)k < cap - len ? (size_t)k : 0;
        }
    }
}

/* anyOf (want 0: at least one), oneOf (want 1: exactly one) or not (want -1: none). */
static int check_combinator(struct vctx *c, const struct node *x, int tok, int want)
{
    uint32_t first = want == 0 ? x->any : x->one, n = want == 0 ? x->nany : x->none;
    uint32_t matched = 0;
    int rc = 0;
    c->quiet++;
    if (want < 0) {
        rc = validate(c, x->not_, tok);
        matched = rc == 1;
    }
    for (uint32_t i = 0; want >= 0 && i < n; i++) {
        rc = validate(c, (int32_t)c->s->kids[first + i], tok);
        if (rc < 0) {
            break;
        }
        matched += rc == 1;
        if ((want == 0 && matched == 1) || (want == 1 && matched == 2)) {
            break;
        }
    }
    c->quiet--;
    if (rc < 0) {
        return rc;
    }
    if (want < 0) {
        return matched ? fail(c, x, "not", "the value matches the schema under not") : 1;
    }
    if (want == 0) {
        return matched ? 1
                       : fail(c, x, "anyOf", "the value matches none of the %u anyOf schemas", n);
    }
    if (matched == 1) {
        return 1;
    }
    return matched == 0 ? fail(c, x, "oneOf", "the value matches none of the %u oneOf schemas", n)
                        : fail(c, x, "oneOf", "the value matches more than one oneOf schema");
}

static int validate_node(struct vctx *c, const struct node *x, int tok)
{
    const struct st_json *d = c->doc;
    int rc;
    if (x->boolean == 1) {
        return 1;
    }
    if (x->boolean == 0) {
        return fail(c, x, NULL, "the schema is false: no value is valid here");
    }
    if ((x->has & (1ull << KW_TYPE)) && !type_ok(d, tok, x->types)) {
        char want[96];
        type_list(x->types, want, sizeof(want));
        return fail(c, x, "type", "expected %s, got %s", want, json_type_name(d, tok));
    }
    if (x->enum_tok >= 0) {
        const struct st_json *sd = &c->s->doc;
        int hit = 0;
        for (int e = st_json_first(sd, x->enum_tok); e >= 0 && !hit;
             e = st_json_next(sd, x->enum_tok, e)) {
            rc = equal(c, e, tok);
            if (rc < 0) {
                return rc;
            }
            hit = rc;
        }
        if (!hit) {
            return fail(c, x, "enum", "the value is not one of the %u enum values",
                        sd->toks[x->enum_tok].size);
        }
    }
    if (x->const_tok >= 0) {
        rc = equal(c, x->const_tok, tok);
        if (rc != 1) {
            return rc < 0 ? rc : fail(c, x, "const", "the value is not the const value");
        }
    }
    /* The keywords of the value's own type; the other types have none left to check. */
    static int (*const check_of[ST_JSON_NULL + 1])(struct vctx *, const struct node *, int) = {
        [ST_JSON_NUMBER] = check_number,
        [ST_JSON_STRING] = check_string,
        [ST_JSON_ARRAY] = check_array,
        [ST_JSON_OBJECT] = check_object,
    };
    enum st_json_type ty = st_json_type(d, tok);
    rc = check_of[ty] ? check_of[ty](c, x, tok) : 1;
    /* allOf: a failing branch reports its own location. */
    for (uint32_t i = 0; rc == 1 && i < x->nall; i++) {
        rc = validate(c, (int32_t)c->s->kids[x->all + i], tok);
    }
    if (rc == 1 && x->nany > 0) {
        rc = check_combinator(c, x, tok, 0);
    }
    if (rc == 1 && x->none > 0) {
        rc = check_combinator(c, x, tok, 1);
    }
    if (rc == 1 && x->not_ >= 0) {
        rc = check_combinator(c, x, tok, -1);
    }
    if (rc == 1 && x->ref >= 0) {
        rc = validate(c, x->ref, tok);
    }
    return rc;
}

static int validate(struct vctx *c, int32_t ni, int tok)
{
    int rc = charge(c, 1);
    if (rc != 0) {
        return rc;
    }
    if (c->depth >= ST_SCHEMA_MAX_DEPTH) {
        return limit(c, "over the depth limit");
    }
    c->depth++;
    rc = validate_node(c, &c->s->nodes[ni], tok);
    c->depth--;
    return rc;
}

int st_schema_validate_doc(const struct st_schema *s, const struct st_json *doc, int tok,
                           struct st_schema_result *res)
{
    memset(res, 0, sizeof(*res));
    if (st_json_type(doc, tok) == ST_JSON_INVALID) {
        snprintf(res->reason, sizeof(res->reason), "no such instance token");
        return ST_EPARSE;
    }
    struct vctx c = {0};
    c.s = s;
    c.doc = doc;
    c.res = res;
    c.max_steps = ST_SCHEMA_MAX_STEPS + (uint64_t)ST_SCHEMA_STEPS_PER_VALUE * doc->n;
    st_buf_init(&c.ipath);
    st_buf_init(&c.scratch);
    st_buf_init(&c.scratch2);
    int rc = validate(&c, 0, tok);
    st_buf_release(&c.scratch2);
    st_buf_release(&c.scratch);
    st_buf_release(&c.ipath);
    res->ok = rc == 1;
    return rc < 0 ? rc : 0;
}

int st_schema_validate(const struct st_schema *s, const char *text, size_t len,
                       struct st_schema_result *res)
{
    struct st_json doc;
    st_json_init(&doc, 0);
    int rc = st_json_parse(&doc, text, len);
    if (rc != 0) {
        memset(res, 0, sizeof(*res));
        snprintf(res->reason, sizeof(res->reason), "the instance is not JSON (%s)",
                 st_strerror(rc));
    } else {
        rc = st_schema_validate_doc(s, &doc, 0, res);
    }
    st_json_release(&doc);
    return rc;
}
