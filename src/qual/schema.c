/*
 * JSON Schema subset: the compiler and the helpers it shares with the validator (see schema.h;
 * docs/qualification.md). The schema text is parsed by the strict tokenizer in base/json.c and
 * kept; every subschema becomes a node in one array, with its children as index runs in side
 * arrays, property names sorted for binary search, patterns compiled with regcomp and $refs
 * resolved to node indices. enum and const values stay as tokens of the kept document.
 * Compilation rejects $ref cycles that never descend into the instance (they could only loop),
 * so validation always makes progress; the depth limit and step budget bound it anyway.
 */
#include "qual/schema.h"

#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/xalloc.h"
#include "qual/schema_int.h"

static const char *const kw_names[KW_COUNT] = {
    [KW_TYPE] = "type",
    [KW_PROPERTIES] = "properties",
    [KW_REQUIRED] = "required",
    [KW_ADDITIONAL] = "additionalProperties",
    [KW_ITEMS] = "items",
    [KW_PREFIX_ITEMS] = "prefixItems",
    [KW_MIN_ITEMS] = "minItems",
    [KW_MAX_ITEMS] = "maxItems",
    [KW_ENUM] = "enum",
    [KW_CONST] = "const",
    [KW_MINIMUM] = "minimum",
    [KW_MAXIMUM] = "maximum",
    [KW_XMINIMUM] = "exclusiveMinimum",
    [KW_XMAXIMUM] = "exclusiveMaximum",
    [KW_MIN_LENGTH] = "minLength",
    [KW_MAX_LENGTH] = "maxLength",
    [KW_PATTERN] = "pattern",
    [KW_ANY_OF] = "anyOf",
    [KW_ONE_OF] = "oneOf",
    [KW_ALL_OF] = "allOf",
    [KW_NOT] = "not",
    [KW_REF] = "$ref",
    [KW_DEFS] = "$defs",
    [KW_SCHEMA] = "$schema",
    [KW_ID] = "$id",
    [KW_COMMENT] = "$comment",
    [KW_TITLE] = "title",
    [KW_DESCRIPTION] = "description",
    [KW_DEFAULT] = "default",
    [KW_EXAMPLES] = "examples",
    [KW_DEPRECATED] = "deprecated",
    [KW_READ_ONLY] = "readOnly",
    [KW_WRITE_ONLY] = "writeOnly",
    [KW_FORMAT] = "format",
};

/* Draft 2020-12 keywords this subset leaves out: named as such in the error. */
static const char *const unsupported[] = {
    "$anchor",
    "$dynamicRef",
    "$dynamicAnchor",
    "$vocabulary",
    "contains",
    "minContains",
    "maxContains",
    "uniqueItems",
    "unevaluatedItems",
    "patternProperties",
    "unevaluatedProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "dependentRequired",
    "dependentSchemas",
    "multipleOf",
    "if",
    "then",
    "else",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
    "definitions",
    "dependencies",
    "$recursiveRef",
    "$recursiveAnchor",
};

const char *const st_schema_type_names[] = {"null",   "boolean", "object", "array",
                                            "number", "string",  "integer"};

/* ---- small helpers ---- */

/* Returns p, reallocated when need elements do not fit in *cap. */
static void *grow(void *p, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap) {
        return p;
    }
    uint32_t c = *cap ? *cap : 8;
    while (c < need) {
        c *= 2;
    }
    *cap = c;
    return st_xrealloc(p, (size_t)c * elem);
}

void st_schema_buf_truncate(struct st_buf *b, size_t len)
{
    if (b->data) {
        b->len = len;
        b->data[len] = '\0';
    }
}

/* Appends "/" and seg[0..n) escaped as a JSON Pointer token. */
void st_schema_ptr_push(struct st_buf *b, const char *seg, size_t n)
{
    st_buf_putc(b, '/');
    for (size_t i = 0; i < n; i++) {
        if (seg[i] == '~') {
            st_buf_puts(b, "~0");
        } else if (seg[i] == '/') {
            st_buf_puts(b, "~1");
        } else {
            st_buf_putc(b, seg[i]);
        }
    }
}

void st_schema_ptr_push_index(struct st_buf *b, uint32_t i)
{
    st_buf_printf(b, "/%u", i);
}

/* Copies s[0..n) into dst[cap], cutting at a UTF-8 boundary with "..." when it does not fit. */
void st_schema_copy_cut(char *dst, size_t cap, const char *s, size_t n)
{
    if (n < cap) {
        memcpy(dst, s, n);
        dst[n] = '\0';
        return;
    }
    size_t k = cap - 4;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) {
        k--;
    }
    memcpy(dst, s, k);
    memcpy(dst + k, "...", 4);
}

void st_schema_fmt_double(char *out, size_t cap, double v)
{
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(out, cap, "%.0f", v);
        return;
    }
    snprintf(out, cap, "%.15g", v);
    if (strtod(out, NULL) != v) {
        snprintf(out, cap, "%.17g", v);
    }
}

/* Decoded string token i: the raw bytes when unescaped, else decoded into scratch. */
int st_schema_get_str(const struct st_json *d, int i, struct st_buf *scratch, const char **p,
                      size_t *n)
{
    if (!(d->toks[i].flags & ST_JSON_F_ESCAPED)) {
        *p = st_json_raw(d, i, n);
        return 0;
    }
    st_buf_clear(scratch);
    int rc = st_json_str(d, i, scratch);
    if (rc != 0) {
        return rc;
    }
    *p = scratch->data ? scratch->data : "";
    *n = scratch->len;
    return 0;
}

static int name_cmp(const void *a, const void *b)
{
    const struct name *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->s, y->s, n);
    if (c != 0) {
        return c;
    }
    return (x->len > y->len) - (x->len < y->len);
}

/* The name s[0..len) in the sorted run v[first, first + n), or NULL. v may be NULL when n is 0. */
const struct name *st_schema_find_name(const struct name *v, uint32_t first, uint32_t n,
                                       const char *s, size_t len)
{
    if (n == 0) {
        return NULL;
    }
    struct name key = {(char *)s, len, -1};
    return bsearch(&key, v + first, n, sizeof(*v), name_cmp);
}

/*
 * Integer-ness from the number's text, exactly: digits d (integer and fraction parts) times
 * 10^(exp - fraction digits). Without trailing zeros of d that power must be >= 0, unless d is 0.
 */
int st_schema_number_is_integer(const char *s, size_t n)
{
    size_t i = 0, frac = 0, zeros = 0;
    int in_frac = 0, nonzero = 0;
    if (i < n && s[i] == '-') {
        i++;
    }
    for (; i < n && s[i] != 'e' && s[i] != 'E'; i++) {
        if (s[i] == '.') {
            in_frac = 1;
            continue;
        }
        frac += (size_t)in_frac;
        if (s[i] == '0') {
            zeros++;
        } else {
            nonzero = 1;
            zeros = 0;
        }
    }
    if (!nonzero) {
        return 1;
    }
    long long e = 0;
    int eneg = 0;
    if (i < n) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) {
            eneg = s[i] == '-';
            i++;
        }
        for (; i < n; i++) {
            if (e < 1000000000) {
                e = e * 10 + (s[i] - '0');
            }
        }
    }
    if (eneg) {
        e = -e;
    }
    return e - (long long)frac + (long long)zeros >= 0;
}

/* ---- compiling ---- */

struct cctx {
    struct st_schema *s;
    struct st_buf path; /* JSON Pointer of the value being compiled */
    struct st_schema_diag *diag;
    struct pending {
        int32_t node;
        char *name; /* owned, the decoded def name */
        size_t len;
        int tok;
    } * refs;
    uint32_t nrefs, caprefs;
};

static struct node *node_at(struct cctx *c, int32_t i)
{
    return &c->s->nodes[i];
}

static size_t tok_offset(const struct st_json *d, int tok)
{
    if (tok < 0 || (uint32_t)tok >= d->n) {
        return (size_t)-1;
    }
    size_t off = d->toks[tok].start;
    return d->toks[tok].type == ST_JSON_STRING && off > 0 ? off - 1 : off;
}

/* Records the error at the current path (plus seg when not NULL) and returns rc. */
__attribute__((format(printf, 5, 6))) static int bad(struct cctx *c, int tok, const char *seg,
                                                     int rc, const char *fmt, ...)
{
    if (!c->diag) {
        return rc;
    }
    struct st_buf p;
    st_buf_init(&p);
    st_buf_append(&p, c->path.data ? c->path.data : "", c->path.len);
    if (seg) {
        st_schema_ptr_push(&p, seg, strlen(seg));
    }
    st_schema_copy_cut(c->diag->path, sizeof(c->diag->path), st_buf_str(&p), p.len);
    st_buf_release(&p);
    c->diag->offset = tok_offset(&c->s->doc, tok);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->diag->msg, sizeof(c->diag->msg), fmt, ap);
    va_end(ap);
    return rc;
}

static int32_t new_node(struct cctx *c)
{
    struct st_schema *s = c->s;
    s->nodes = grow(s->nodes, &s->capnodes, s->nnodes + 1, sizeof(*s->nodes));
    struct node *n = &s->nodes[s->nnodes];
    memset(n, 0, sizeof(*n));
    n->boolean = -1;
    n->addl = n->items = n->not_ = n->ref = -1;
    n->enum_tok = n->const_tok = -1;
    n->pattern = -1;
    n->path = st_xstrndup(st_buf_str(&c->path), c->path.len);
    return (int32_t)s->nnodes++;
}

static int compile_node(struct cctx *c, int tok, int is_root, int32_t *out);

/* A schema under the current path plus seg. */
static int compile_sub(struct cctx *c, int tok, const char *seg, size_t seglen, int32_t *out)
{
    size_t saved = c->path.len;
    st_schema_ptr_push(&c->path, seg, seglen);
    int rc = compile_node(c, tok, 0, out);
    st_schema_buf_truncate(&c->path, saved);
    return rc;
}

/* A non-empty array of schemas, appended to kids as one run. */
static int compile_list(struct cctx *c, int arr, uint32_t *first, uint32_t *n)
{
    const struct st_json *d = &c->s->doc;
    if (st_json_type(d, arr) != ST_JSON_ARRAY || d->toks[arr].size == 0) {
        return bad(c, arr, NULL, ST_EPARSE, "must be a non-empty array of schemas");
    }
    uint32_t cnt = d->toks[arr].size, i = 0;
    int32_t *tmp = st_xmalloc(cnt * sizeof(*tmp));
    int rc = 0;
    for (int e = st_json_first(d, arr); e >= 0; e = st_json_next(d, arr, e)) {
        char idx[16];
        int k = snprintf(idx, sizeof(idx), "%u", i);
        rc = compile_sub(c, e, idx, (size_t)k, &tmp[i]);
        if (rc != 0) {
            goto out;
        }
        i++;
    }
    struct st_schema *s = c->s;
    s->kids = grow(s->kids, &s->capkids, s->nkids + cnt, sizeof(*s->kids));
    *first = s->nkids;
    *n = cnt;
    for (i = 0; i < cnt; i++) {
        s->kids[s->nkids++] = (uint32_t)tmp[i];
    }
out:
    free(tmp);
    return rc;
}

/* A map of name -> schema ("properties", "$defs") into a sorted run of names. */
static int compile_map(struct cctx *c, int obj, struct name **vec, uint32_t *nv, uint32_t *capv,
                       uint32_t *first, uint32_t *n, const char *what)
{
    const struct st_json *d = &c->s->doc;
    if (st_json_type(d, obj) != ST_JSON_OBJECT) {
        return bad(c, obj, NULL, ST_EPARSE, "must be an object of schemas");
    }
    uint32_t cnt = d->toks[obj].size, i = 0;
    struct name *tmp = st_xcalloc(cnt ? cnt : 1, sizeof(*tmp));
    struct st_buf key;
    st_buf_init(&key);
    int rc = 0;
    for (int k = st_json_first(d, obj); k >= 0; k = st_json_next(d, obj, k)) {
        st_buf_clear(&key);
        rc = st_json_str(d, k, &key);
        if (rc != 0) {
            goto fail;
        }
        /* A copy by length: a name may hold NULs ("\u0000"). */
        tmp[i].len = key.len;
        tmp[i].s = st_xmalloc(key.len + 1);
        memcpy(tmp[i].s, st_buf_str(&key), key.len + 1);
        i++;
        rc = compile_sub(c, k + 1, st_buf_str(&key), key.len, &tmp[i - 1].node);
        if (rc != 0) {
            goto fail;
        }
    }
    qsort(tmp, cnt, sizeof(*tmp), name_cmp);
    for (uint32_t j = 1; j < cnt; j++) {
        if (name_cmp(&tmp[j - 1], &tmp[j]) == 0) {
            rc = bad(c, obj, NULL, ST_EPARSE, "%s names \"%s\" twice", what, tmp[j].s);
            goto fail;
        }
    }
    /* The names now belong to vec. */
    *first = *nv;
    *n = cnt;
    if (cnt > 0) {
        *vec = grow(*vec, capv, *nv + cnt, sizeof(**vec));
        memcpy(*vec + *nv, tmp, cnt * sizeof(*tmp));
        *nv += cnt;
    }
    free(tmp);
    st_buf_release(&key);
    return 0;
fail:
    for (uint32_t j = 0; j < i; j++) {
        free(tmp[j].s);
    }
    free(tmp);
    st_buf_release(&key);
    return rc;
}

static int get_count(struct cctx *c, int tok, uint64_t *out)
{
    int64_t v;
    if (st_json_type(&c->s->doc, tok) != ST_JSON_NUMBER || st_json_i64(&c->s->doc, tok, &v) != 0 ||
        v < 0) {
        return bad(c, tok, NULL, ST_EPARSE, "must be a non-negative integer");
    }
    *out = (uint64_t)v;
    return 0;
}

static int get_number(struct cctx *c, int tok, double *out)
{
    if (st_json_f64(&c->s->doc, tok, out) != 0) {
        return bad(c, tok, NULL, ST_EPARSE, "must be a number");
    }
    return 0;
}

static int type_bit(const struct st_json *d, int tok, uint32_t *bit)
{
    for (size_t i = 0; i < COUNT(st_schema_type_names); i++) {
        if (st_json_streq(d, tok, st_schema_type_names[i])) {
            *bit = 1u << i;
            return 0;
        }
    }
    return ST_EPARSE;
}

static int compile_type(struct cctx *c, int32_t ni, int tok)
{
    const struct st_json *d = &c->s->doc;
    uint32_t bit, mask = 0;
    if (st_json_type(d, tok) == ST_JSON_STRING) {
        if (type_bit(d, tok, &bit) != 0) {
            return bad(c, tok, NULL, ST_EPARSE, "unknown type name");
        }
        node_at(c, ni)->types = bit;
        return 0;
    }
    if (st_json_type(d, tok) != ST_JSON_ARRAY || d->toks[tok].size == 0) {
        return bad(c, tok, NULL, ST_EPARSE, "must be a type name or a non-empty array of them");
    }
    uint32_t i = 0;
    for (int e = st_json_first(d, tok); e >= 0; e = st_json_next(d, tok, e), i++) {
        char idx[16];
        snprintf(idx, sizeof(idx), "%u", i);
        if (st_json_type(d, e) != ST_JSON_STRING || type_bit(d, e, &bit) != 0) {
            return bad(c, e, idx, ST_EPARSE, "unknown type name");
        }
        if (mask & bit) {
            return bad(c, e, idx, ST_EPARSE, "type names \"%s\" twice",
                       st_schema_type_names[__builtin_ctz(bit)]);
        }
        mask |= bit;
    }
    node_at(c, ni)->types = mask;
    return 0;
}

static int compile_required(struct cctx *c, int32_t ni, int tok)
{
    const struct st_json *d = &c->s->doc;
    struct st_schema *s = c->s;
    if (st_json_type(d, tok) != ST_JSON_ARRAY) {
        return bad(c, tok, NULL, ST_EPARSE, "must be an array of property names");
    }
    uint32_t first = s->nstrs, i = 0;
    struct st_buf v;
    st_buf_init(&v);
    int rc = 0;
    for (int e = st_json_first(d, tok); e >= 0; e = st_json_next(d, tok, e), i++) {
        char idx[16];
        snprintf(idx, sizeof(idx), "%u", i);
        st_buf_clear(&v);
        if (st_json_type(d, e) != ST_JSON_STRING || st_json_str(d, e, &v) != 0) {
            rc = bad(c, e, idx, ST_EPARSE, "must be a string");
            goto out;
        }
        for (uint32_t j = first; j < s->nstrs; j++) {
            if (s->strs[j].len == v.len && memcmp(s->strs[j].s, st_buf_str(&v), v.len) == 0) {
                rc = bad(c, e, idx, ST_EPARSE, "names a property twice");
                goto out;
            }
        }
        s->strs = grow(s->strs, &s->capstrs, s->nstrs + 1, sizeof(*s->strs));
        struct name *nm = &s->strs[s->nstrs++];
        nm->s = st_xmalloc(v.len + 1);
        memcpy(nm->s, st_buf_str(&v), v.len + 1);
        nm->len = v.len;
        nm->node = -1;
    }
    node_at(c, ni)->req = first;
    node_at(c, ni)->nreq = s->nstrs - first;
out:
    st_buf_release(&v);
    return rc;
}

/*
 * Reads a repeat bound "{n}", "{n,}" or "{n,m}" at p[i] (p[i] is '{' before a digit). Returns
 * the index of its '}' with *copies the copies glibc's regcomp makes of the atom (m, or n + 1 for
 * an open bound), or 0 when it is not a well-formed bound (regcomp then takes it or refuses it).
 * *big is set when a number passes 255.
 */
static size_t read_bound(const char *p, size_t n, size_t i, uint64_t *copies, int *big)
{
    uint64_t lo = 0, hi = 0;
    int comma = 0, hi_digits = 0;
    size_t j = i + 1;
    for (; j < n && p[j] != '}'; j++) {
        if (p[j] == ',' && !comma) {
            comma = 1;
        } else if (p[j] >= '0' && p[j] <= '9') {
            uint64_t *v = comma ? &hi : &lo;
            *v = *v * 10 + (uint64_t)(p[j] - '0');
            hi_digits += comma;
            if (*v > 255) {
                *big = 1;
                return j;
            }
        } else {
            return 0;
        }
    }
    if (j >= n) {
        return 0;
    }
    *copies = !comma ? lo : hi_digits ? (hi > lo ? hi : lo) : lo + 1;
    return j;
}

/*
 * POSIX ERE accepts some ECMA-262 spellings with another meaning (\d is a plain 'd' in glibc)
 * and chokes on others; those are refused with a hint. glibc's regcomp copies an atom for every
 * '+' and bound ("a{3}" is "aaa", "a+" is "aa*"), so stacked quantifiers ("a++++") and nested
 * bounds ("((a{200}){200}){200}") grow its automaton exponentially: stacked quantifiers are
 * refused and the expanded size is estimated and capped.
 */
static int check_pattern(struct cctx *c, int tok, const char *p, size_t n)
{
    enum { MAX_EXPANDED = 20000, MAX_GROUPS = 32 };
    if (n > ST_SCHEMA_MAX_PATTERN) {
        return bad(c, tok, NULL, ST_ETOOBIG, "pattern longer than %u bytes", ST_SCHEMA_MAX_PATTERN);
    }
    if (memchr(p, '\0', n) != NULL) {
        return bad(c, tok, NULL, ST_EPARSE, "pattern holds a NUL character");
    }
    /* Per open group: expanded size so far, and the size of its last atom. */
    uint64_t total[MAX_GROUPS + 1] = {0}, last[MAX_GROUPS + 1] = {0};
    int depth = 0, after_quant = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        int is_bound = ch == '{' && i + 1 < n && p[i + 1] >= '0' && p[i + 1] <= '9';
        if (ch == '*' || ch == '+' || ch == '?' || is_bound) {
            uint64_t copies = ch == '+' ? 2 : 1;
            if (is_bound) {
                int big = 0;
                size_t end = read_bound(p, n, i, &copies, &big);
                if (big) {
                    return bad(c, tok, NULL, ST_EPARSE,
                               "a repeat bound over 255 (RE_DUP_MAX in POSIX terms)");
                }
                if (end == 0) {
                    last[depth] = 1;
                    total[depth] += 1;
                    after_quant = 0;
                    continue;
                }
                i = end;
            }
            if (i + 1 < n && p[i + 1] == '?') {
                return bad(c, tok, NULL, ST_EPARSE,
                           "lazy quantifiers (*? +? ?? {n}?) are not POSIX ERE");
            }
            if (after_quant) {
                return bad(c, tok, NULL, ST_EPARSE,
                           "stacked quantifiers (such as a** or a+{2}) are not POSIX ERE");
            }
            after_quant = 1;
            if (copies > 1) {
                total[depth] += last[depth] * (copies - 1);
                last[depth] *= copies;
            }
        } else {
            after_quant = 0;
            if (ch == '\\') {
                char e = i + 1 < n ? p[i + 1] : '\0';
                if (e != '\0' && strchr("dDpPuxck0123456789", e) != NULL) {
                    return bad(c, tok, NULL, ST_EPARSE,
                               "\\%c is ECMA-262 regex syntax that POSIX ERE lacks (use a "
                               "bracket expression such as [0-9])",
                               e);
                }
                i++;
                last[depth] = 1;
                total[depth] += 1;
            } else if (ch == '(') {
                if (i + 1 < n && p[i + 1] == '?') {
                    return bad(c, tok, NULL, ST_EPARSE,
                               "(?...) groups (lookaround, named or non-capturing) are not "
                               "POSIX ERE");
                }
                if (depth == MAX_GROUPS) {
                    return bad(c, tok, NULL, ST_ETOOBIG, "pattern nests groups over %d deep",
                               MAX_GROUPS);
                }
                depth++;
                total[depth] = last[depth] = 0;
            } else if (ch == ')' && depth > 0) {
                uint64_t g = total[depth] + 1;
                depth--;
                last[depth] = g;
                total[depth] += g;
            } else if (ch == '[') {
                /* A bracket expression is one atom; "[]" and "[^]" start with a literal ']'. */
                size_t j = i + 1;
                if (j < n && p[j] == '^') {
                    j++;
                }
                if (j < n && p[j] == ']') {
                    j++;
                }
                while (j < n && p[j] != ']') {
                    if (p[j] == '[' && j + 1 < n &&
                        (p[j + 1] == ':' || p[j + 1] == '.' || p[j + 1] == '=')) {
                        char endc = p[j + 1];
                        j += 2;
                        while (j + 1 < n && !(p[j] == endc && p[j + 1] == ']')) {
                            j++;
                        }
                        j++;
                    }
                    j++;
                }
                i = j < n ? j : n - 1;
                last[depth] = 1;
                total[depth] += 1;
            } else {
                last[depth] = 1;
                total[depth] += 1;
            }
        }
        /* Open groups count too: their contents are copied when they close under a bound. */
        uint64_t sum = 0;
        for (int d = 0; d <= depth; d++) {
            sum += total[d];
        }
        if (sum > MAX_EXPANDED) {
            return bad(c, tok, NULL, ST_ETOOBIG, "pattern expands to over %d positions",
                       MAX_EXPANDED);
        }
    }
    return 0;
}

static int compile_pattern(struct cctx *c, int32_t ni, int tok)
{
    const struct st_json *d = &c->s->doc;
    struct st_schema *s = c->s;
    if (st_json_type(d, tok) != ST_JSON_STRING) {
        return bad(c, tok, NULL, ST_EPARSE, "must be a string");
    }
    struct st_buf p;
    st_buf_init(&p);
    int rc = st_json_str(d, tok, &p);
    if (rc == 0) {
        rc = check_pattern(c, tok, st_buf_str(&p), p.len);
    }
    if (rc != 0) {
        st_buf_release(&p);
        return rc;
    }
    regex_t *re = st_xmalloc(sizeof(*re));
    int err = regcomp(re, st_buf_str(&p), REG_EXTENDED | REG_NOSUB);
    st_buf_release(&p);
    if (err != 0) {
        char msg[128];
        regerror(err, re, msg, sizeof(msg));
        free(re);
        return bad(c, tok, NULL, ST_EPARSE, "not a POSIX extended regular expression: %s", msg);
    }
    s->res = grow(s->res, &s->capres, s->nres + 1, sizeof(*s->res));
    s->res[s->nres] = re;
    node_at(c, ni)->pattern = (int32_t)s->nres++;
    return 0;
}

/* "#/$defs/<name>" with RFC 6901 escapes in name; the name is resolved after compiling. */
static int compile_ref(struct cctx *c, int32_t ni, int tok)
{
    static const char prefix[] = "#/$defs/";
    const struct st_json *d = &c->s->doc;
    if (st_json_type(d, tok) != ST_JSON_STRING) {
        return bad(c, tok, NULL, ST_EPARSE, "must be a string");
    }
    struct st_buf v, name;
    st_buf_init(&v);
    st_buf_init(&name);
    int rc = st_json_str(d, tok, &v);
    if (rc != 0) {
        goto out;
    }
    size_t k = sizeof(prefix) - 1;
    if (v.len <= k || memcmp(st_buf_str(&v), prefix, k) != 0) {
        rc = bad(c, tok, NULL, ST_EPARSE, "only \"#/$defs/<name>\" references are supported");
        goto out;
    }
    for (size_t i = k; i < v.len; i++) {
        char ch = v.data[i];
        if (ch == '~' && i + 1 < v.len && (v.data[i + 1] == '0' || v.data[i + 1] == '1')) {
            st_buf_putc(&name, v.data[i + 1] == '0' ? '~' : '/');
            i++;
        } else if (ch == '/' || ch == '~' || ch == '%') {
            rc = bad(c, tok, NULL, ST_EPARSE,
                     "only \"#/$defs/<name>\" references are supported (one name, RFC 6901 "
                     "escapes, no percent-encoding)");
            goto out;
        } else {
            st_buf_putc(&name, ch);
        }
    }
    c->refs = grow(c->refs, &c->caprefs, c->nrefs + 1, sizeof(*c->refs));
    c->refs[c->nrefs].node = ni;
    c->refs[c->nrefs].len = name.len;
    c->refs[c->nrefs].name = st_buf_take(&name);
    c->refs[c->nrefs].tok = tok;
    c->nrefs++;
out:
    st_buf_release(&v);
    st_buf_release(&name);
    return rc;
}

static int find_kw(const char *k, size_t n)
{
    for (int i = 0; i < KW_COUNT; i++) {
        if (strlen(kw_names[i]) == n && memcmp(kw_names[i], k, n) == 0) {
            return i;
        }
    }
    return -1;
}

static int is_unsupported(const char *k, size_t n)
{
    for (size_t i = 0; i < COUNT(unsupported); i++) {
        if (strlen(unsupported[i]) == n && memcmp(unsupported[i], k, n) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Annotations: checked for their documented kind, otherwise ignored. */
static int compile_annotation(struct cctx *c, int kw, int v, int is_root)
{
    const struct st_json *d = &c->s->doc;
    enum st_json_type t = st_json_type(d, v);
    switch (kw) {
    case KW_SCHEMA:
        if (!st_json_streq(d, v, "https://json-schema.org/draft/2020-12/schema") &&
            !st_json_streq(d, v, "https://json-schema.org/draft/2020-12/schema#")) {
            return bad(c, v, NULL, ST_EPARSE, "only draft 2020-12 is supported");
        }
        return is_root ? 0 : bad(c, v, NULL, ST_EPARSE, "$schema is allowed only at the root");
    case KW_ID:
        if (!is_root) {
            return bad(c, v, NULL, ST_EPARSE, "$id is allowed only at the root");
        }
        return t == ST_JSON_STRING ? 0 : bad(c, v, NULL, ST_EPARSE, "must be a string");
    case KW_COMMENT:
    case KW_TITLE:
    case KW_DESCRIPTION:
    case KW_FORMAT:
        return t == ST_JSON_STRING ? 0 : bad(c, v, NULL, ST_EPARSE, "must be a string");
    case KW_EXAMPLES:
        return t == ST_JSON_ARRAY ? 0 : bad(c, v, NULL, ST_EPARSE, "must be an array");
    case KW_DEPRECATED:
    case KW_READ_ONLY:
    case KW_WRITE_ONLY:
        return t == ST_JSON_TRUE || t == ST_JSON_FALSE
                   ? 0
                   : bad(c, v, NULL, ST_EPARSE, "must be a boolean");
    default: /* KW_DEFAULT: any value */
        return 0;
    }
}

static int compile_kw(struct cctx *c, int32_t ni, int kw, int v, int is_root)
{
    struct st_schema *s = c->s;
    const struct st_json *d = &s->doc;
    int32_t sub;
    uint32_t first = 0, n = 0;
    int rc = 0;
    switch (kw) {
    case KW_TYPE:
        return compile_type(c, ni, v);
    case KW_PROPERTIES:
        rc = compile_map(c, v, &s->props, &s->nprops, &s->capprops, &first, &n, "properties");
        if (rc == 0) {
            node_at(c, ni)->props = first;
            node_at(c, ni)->nprops = n;
        }
        return rc;
    case KW_DEFS:
        rc = compile_map(c, v, &s->props, &s->nprops, &s->capprops, &first, &n, "$defs");
        if (rc == 0 && is_root) {
            /* Only the root's definitions are reachable by "#/$defs/<name>". */
            s->defs = st_xcalloc(n ? n : 1, sizeof(*s->defs));
            if (n > 0) {
                memcpy(s->defs, s->props + first, n * sizeof(*s->defs));
            }
            s->ndefs = n;
        }
        return rc;
    case KW_REQUIRED:
        return compile_required(c, ni, v);
    case KW_ADDITIONAL:
    case KW_ITEMS:
    case KW_NOT:
        rc = compile_node(c, v, 0, &sub);
        if (rc == 0) {
            *(kw == KW_ADDITIONAL ? &node_at(c, ni)->addl
              : kw == KW_ITEMS    ? &node_at(c, ni)->items
                                  : &node_at(c, ni)->not_) = sub;
        }
        return rc;
    case KW_PREFIX_ITEMS:
    case KW_ANY_OF:
    case KW_ONE_OF:
    case KW_ALL_OF:
        rc = compile_list(c, v, &first, &n);
        if (rc == 0) {
            struct node *x = node_at(c, ni);
            uint32_t *f = kw == KW_PREFIX_ITEMS ? &x->prefix
                          : kw == KW_ANY_OF     ? &x->any
                          : kw == KW_ONE_OF     ? &x->one
                                                : &x->all;
            uint32_t *cnt = kw == KW_PREFIX_ITEMS ? &x->nprefix
                            : kw == KW_ANY_OF     ? &x->nany
                            : kw == KW_ONE_OF     ? &x->none
                                                  : &x->nall;
            *f = first;
            *cnt = n;
        }
        return rc;
    case KW_MIN_ITEMS:
        return get_count(c, v, &node_at(c, ni)->min_items);
    case KW_MAX_ITEMS:
        return get_count(c, v, &node_at(c, ni)->max_items);
    case KW_MIN_LENGTH:
        return get_count(c, v, &node_at(c, ni)->min_len);
    case KW_MAX_LENGTH:
        return get_count(c, v, &node_at(c, ni)->max_len);
    case KW_MINIMUM:
        return get_number(c, v, &node_at(c, ni)->min);
    case KW_MAXIMUM:
        return get_number(c, v, &node_at(c, ni)->max);
    case KW_XMINIMUM:
        return get_number(c, v, &node_at(c, ni)->xmin);
    case KW_XMAXIMUM:
        return get_number(c, v, &node_at(c, ni)->xmax);
    case KW_ENUM:
        if (st_json_type(d, v) != ST_JSON_ARRAY || d->toks[v].size == 0) {
            return bad(c, v, NULL, ST_EPARSE, "must be a non-empty array");
        }
        node_at(c, ni)->enum_tok = v;
        return 0;
    case KW_CONST:
        node_at(c, ni)->const_tok = v;
        return 0;
    case KW_PATTERN:
        return compile_pattern(c, ni, v);
    case KW_REF:
        return compile_ref(c, ni, v);
    default:
        return compile_annotation(c, kw, v, is_root);
    }
}

static int compile_node(struct cctx *c, int tok, int is_root, int32_t *out)
{
    struct st_schema *s = c->s;
    const struct st_json *d = &s->doc;
    if (s->nnodes >= ST_SCHEMA_MAX_NODES) {
        return bad(c, tok, NULL, ST_ETOOBIG, "more than %u subschemas", ST_SCHEMA_MAX_NODES);
    }
    enum st_json_type t = st_json_type(d, tok);
    if (t != ST_JSON_OBJECT && t != ST_JSON_TRUE && t != ST_JSON_FALSE) {
        return bad(c, tok, NULL, ST_EPARSE, "a schema must be an object or a boolean");
    }
    int32_t ni = new_node(c);
    *out = ni;
    if (t != ST_JSON_OBJECT) {
        node_at(c, ni)->boolean = t == ST_JSON_TRUE;
        return 0;
    }
    struct st_buf key;
    st_buf_init(&key);
    int rc = 0;
    uint64_t seen = 0;
    for (int k = st_json_first(d, tok); k >= 0; k = st_json_next(d, tok, k)) {
        st_buf_clear(&key);
        rc = st_json_str(d, k, &key);
        if (rc != 0) {
            break;
        }
        const char *name = st_buf_str(&key);
        int kw = find_kw(name, key.len);
        if (kw < 0) {
            rc = bad(c, k, name, ST_EPARSE,
                     is_unsupported(name, key.len) ? "keyword outside the supported subset"
                                                   : "unknown keyword");
            break;
        }
        if (seen & (1ull << kw)) {
            rc = bad(c, k, name, ST_EPARSE, "keyword given twice");
            break;
        }
        seen |= 1ull << kw;
        size_t saved = c->path.len;
        st_schema_ptr_push(&c->path, name, key.len);
        rc = compile_kw(c, ni, kw, k + 1, is_root);
        st_schema_buf_truncate(&c->path, saved);
        if (rc != 0) {
            break;
        }
    }
    node_at(c, ni)->has = seen;
    st_buf_release(&key);
    return rc;
}

/* The i-th in-place child of node x (ref, not, allOf, anyOf, oneOf), or -1 past the last. */
static int32_t inplace_edge(const struct st_schema *s, const struct node *x, uint32_t i)
{
    if (x->ref >= 0 && i-- == 0) {
        return x->ref;
    }
    if (x->not_ >= 0 && i-- == 0) {
        return x->not_;
    }
    if (i < x->nall) {
        return (int32_t)s->kids[x->all + i];
    }
    i -= x->nall;
    if (i < x->nany) {
        return (int32_t)s->kids[x->any + i];
    }
    i -= x->nany;
    if (i < x->none) {
        return (int32_t)s->kids[x->one + i];
    }
    return -1;
}

/* Names the $ref on the cycle stack[p..sp) + y, where stack[p] is y: the first node on it whose
 * $ref edge leads to the next (tree edges only lead down, so the cycle holds at least one). */
static int report_cycle(struct cctx *c, const uint32_t *stack, uint32_t sp, uint32_t y)
{
    const struct st_schema *s = c->s;
    uint32_t p = sp - 1;
    while (p > 0 && stack[p] != y) {
        p--;
    }
    uint32_t z = stack[sp - 1];
    for (uint32_t q = p; q < sp; q++) {
        uint32_t after = q + 1 < sp ? stack[q + 1] : y;
        if (s->nodes[stack[q]].ref == (int32_t)after) {
            z = stack[q];
            break;
        }
    }
    int tok = -1;
    for (uint32_t i = 0; i < c->nrefs; i++) {
        tok = c->refs[i].node == (int32_t)z ? c->refs[i].tok : tok;
    }
    st_schema_buf_truncate(&c->path, 0);
    st_buf_puts(&c->path, s->nodes[z].path);
    return bad(c, tok, "$ref", ST_EPARSE, "$ref cycle that never descends into the instance");
}

/*
 * A $ref cycle through in-place applicators only would validate the same value forever; find
 * one with an iterative depth-first search (0 unvisited, 1 on the stack, 2 done).
 */
static int check_cycles(struct cctx *c)
{
    struct st_schema *s = c->s;
    uint8_t *color = st_xcalloc(s->nnodes, 1);
    uint32_t *stack = st_xmalloc(s->nnodes * sizeof(*stack));
    uint32_t *next = st_xmalloc(s->nnodes * sizeof(*next));
    int rc = 0;
    for (uint32_t root = 0; root < s->nnodes && rc == 0; root++) {
        if (color[root] != 0) {
            continue;
        }
        uint32_t sp = 0;
        stack[sp] = root;
        next[sp++] = 0;
        color[root] = 1;
        while (sp > 0 && rc == 0) {
            uint32_t x = stack[sp - 1];
            int32_t y = inplace_edge(s, &s->nodes[x], next[sp - 1]++);
            if (y < 0) {
                color[x] = 2;
                sp--;
            } else if (color[y] == 1) {
                rc = report_cycle(c, stack, sp, (uint32_t)y);
            } else if (color[y] == 0) {
                color[y] = 1;
                stack[sp] = (uint32_t)y;
                next[sp++] = 0;
            }
        }
    }
    free(next);
    free(stack);
    free(color);
    return rc;
}

static int resolve_refs(struct cctx *c)
{
    struct st_schema *s = c->s;
    for (uint32_t i = 0; i < c->nrefs; i++) {
        struct pending *r = &c->refs[i];
        const struct name *def = st_schema_find_name(s->defs, 0, s->ndefs, r->name, r->len);
        if (!def) {
            st_schema_buf_truncate(&c->path, 0);
            st_buf_puts(&c->path, s->nodes[r->node].path);
            return bad(c, r->tok, "$ref", ST_EPARSE, "no definition \"%s\" in the root's $defs",
                       r->name);
        }
        s->nodes[r->node].ref = def->node;
    }
    return 0;
}

int st_schema_compile(const char *text, size_t len, struct st_schema **out,
                      struct st_schema_diag *diag)
{
    *out = NULL;
    if (diag) {
        memset(diag, 0, sizeof(*diag));
        diag->offset = (size_t)-1;
    }
    struct cctx c = {0};
    c.diag = diag;
    st_buf_init(&c.path);
    if (len > ST_SCHEMA_MAX_BYTES) {
        if (diag) {
            snprintf(diag->msg, sizeof(diag->msg), "schema over %u bytes", ST_SCHEMA_MAX_BYTES);
        }
        return ST_ETOOBIG;
    }
    struct st_schema *s = st_xcalloc(1, sizeof(*s));
    c.s = s;
    s->text = st_xmalloc(len + 1);
    if (len > 0) {
        memcpy(s->text, text, len);
    }
    s->text[len] = '\0';
    st_json_init(&s->doc, 1u << 18);
    int rc = st_json_parse(&s->doc, s->text, len);
    if (rc != 0) {
        if (diag) {
            snprintf(diag->msg, sizeof(diag->msg), "the schema is not valid JSON (%s)",
                     st_strerror(rc));
        }
        goto out;
    }
    int32_t root;
    rc = compile_node(&c, 0, 1, &root);
    if (rc == 0) {
        rc = resolve_refs(&c);
    }
    if (rc == 0) {
        rc = check_cycles(&c);
    }
out:
    for (uint32_t i = 0; i < c.nrefs; i++) {
        free(c.refs[i].name);
    }
    free(c.refs);
    st_buf_release(&c.path);
    if (rc != 0) {
        st_schema_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void st_schema_free(struct st_schema *s)
{
    if (!s) {
        return;
    }
    for (uint32_t i = 0; i < s->nnodes; i++) {
        free(s->nodes[i].path);
    }
    for (uint32_t i = 0; i < s->nprops; i++) {
        free(s->props[i].s);
    }
    for (uint32_t i = 0; i < s->nstrs; i++) {
        free(s->strs[i].s);
    }
    for (uint32_t i = 0; i < s->nres; i++) {
        regfree(s->res[i]);
        free(s->res[i]);
    }
    free(s->res);
    free(s->defs); /* its names are owned by props */
    free(s->strs);
    free(s->props);
    free(s->kids);
    free(s->nodes);
    st_json_release(&s->doc);
    free(s->text);
    free(s);
}
