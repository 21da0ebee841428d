/*
 * The YAML reader over libfyaml (yaml.h): the input guard, one document, positions, typed
 * getters and messages. libfyaml's diagnostics go to a callback, never to stderr; its first
 * line "<input>:L:C: error: text" becomes "NAME:L:C: text". Nodes are libfyaml's own, cast to
 * the opaque struct st_yaml_node at this file's edge.
 */
#include "base/yaml.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libfyaml.h>

#include "base/json.h"
#include "base/num.h"
#include "base/xalloc.h"

#define GOT_MAX 40 /* bytes of a value quoted in a message before "..." */
#define NAME_MAX_LEN 64

static struct fy_node *fy(struct st_yaml_node *n)
{
    return (struct fy_node *)n;
}

static struct st_yaml_node *st(struct fy_node *n)
{
    return (struct st_yaml_node *)n;
}

/* ---- nodes ---- */

int st_yaml_is_map(struct st_yaml_node *n)
{
    return n && fy_node_is_mapping(fy(n));
}

int st_yaml_is_seq(struct st_yaml_node *n)
{
    return n && fy_node_is_sequence(fy(n));
}

int st_yaml_is_scalar(struct st_yaml_node *n)
{
    return n && fy_node_is_scalar(fy(n)) && !fy_node_is_alias(fy(n));
}

int st_yaml_is_alias(struct st_yaml_node *n)
{
    return n && fy_node_is_alias(fy(n));
}

int st_yaml_is_empty(struct st_yaml_node *n)
{
    size_t len = 0;
    if (!n) {
        return 1;
    }
    if (!st_yaml_is_scalar(n) || fy_node_get_style(fy(n)) != FYNS_PLAIN) {
        return 0;
    }
    return fy_node_get_scalar(fy(n), &len) == NULL || len == 0;
}

int st_yaml_is_null(struct st_yaml_node *n)
{
    size_t len = 0;
    if (st_yaml_is_empty(n)) {
        return 1;
    }
    if (!st_yaml_is_scalar(n) || fy_node_get_style(fy(n)) != FYNS_PLAIN) {
        return 0;
    }
    const char *s = fy_node_get_scalar(fy(n), &len);
    return (len == 4 && memcmp(s, "null", 4) == 0) || (len == 1 && s[0] == '~');
}

uint32_t st_yaml_count(struct st_yaml_node *n)
{
    int c = 0;
    if (st_yaml_is_map(n)) {
        c = fy_node_mapping_item_count(fy(n));
    } else if (st_yaml_is_seq(n)) {
        c = fy_node_sequence_item_count(fy(n));
    }
    return c > 0 ? (uint32_t)c : 0;
}

/* The input bytes [*a, *b) of a scalar's content (inside any quotes). Returns 0 or -1. */
static int raw_span(const struct st_yaml *y, struct fy_node *n, size_t *a, size_t *b)
{
    struct fy_token *t = fy_node_get_scalar_token(n);
    const struct fy_mark *s = t ? fy_token_start_mark(t) : NULL;
    const struct fy_mark *e = t ? fy_token_end_mark(t) : NULL;
    if (!s || !e || s->input_pos > e->input_pos || e->input_pos > y->len) {
        return -1;
    }
    *a = s->input_pos;
    *b = e->input_pos;
    return 0;
}

/* A single-quoted scalar with a '' escape, which libfyaml 0.7.12 may leak unescaping. */
static int has_quote_escape(const struct st_yaml *y, struct fy_node *n, size_t *a, size_t *b)
{
    return fy_node_is_scalar(n) && fy_node_get_style(n) == FYNS_SINGLE_QUOTED &&
           raw_span(y, n, a, b) == 0 && memmem(y->text + *a, *b - *a, "''", 2) != NULL;
}

static size_t esc_slot(const struct st_yaml *y, const struct st_yaml_node *n)
{
    uintptr_t h = (uintptr_t)n;
    h ^= h >> 17;
    h *= 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 7) & (y->esc_cap - 1);
    while (y->esc[i].node && y->esc[i].node != n) {
        i = (i + 1) & (y->esc_cap - 1);
    }
    return i;
}

static const struct st_yaml_esc *esc_find(const struct st_yaml *y, struct st_yaml_node *n)
{
    if (y->esc_cap == 0) {
        return NULL;
    }
    const struct st_yaml_esc *e = &y->esc[esc_slot(y, n)];
    return e->node ? e : NULL;
}

/* Remembers n's unescaped text (a node reached twice, through an alias, is kept once). */
static void esc_add(struct st_yaml *y, struct st_yaml_node *n, size_t a, size_t b, size_t *used)
{
    if (esc_find(y, n)) {
        return;
    }
    if ((*used + 1) * 2 > y->esc_cap) {
        struct st_yaml_esc *old = y->esc;
        size_t old_cap = y->esc_cap;
        y->esc_cap = old_cap ? old_cap * 2 : 16;
        y->esc = st_xcalloc(y->esc_cap, sizeof(*y->esc));
        for (size_t i = 0; i < old_cap; i++) {
            if (old[i].node) {
                y->esc[esc_slot(y, old[i].node)] = old[i];
            }
        }
        free(old);
    }
    struct st_yaml_esc *e = &y->esc[esc_slot(y, n)];
    struct st_buf t;
    st_buf_init(&t);
    for (size_t i = a; i < b; i++) {
        st_buf_putc(&t, y->text[i]);
        if (y->text[i] == '\'' && i + 1 < b && y->text[i + 1] == '\'') {
            i++;
        }
    }
    e->node = n;
    e->len = t.len;
    e->text = t.len ? st_buf_take(&t) : st_xstrndup("", 0);
    st_buf_release(&t);
    (*used)++;
}

const char *st_yaml_text(struct st_yaml *y, struct st_yaml_node *n, size_t *len)
{
    *len = 0;
    if (!n || !fy_node_is_scalar(fy(n))) {
        return "";
    }
    const struct st_yaml_esc *e = esc_find(y, n);
    if (e) {
        *len = e->len;
        return e->text;
    }
    const char *s = fy_node_get_scalar(fy(n), len);
    if (!s) {
        *len = 0;
        return "";
    }
    return s;
}

int st_yaml_pos(struct st_yaml_node *node, int *line, int *col)
{
    struct fy_node *n = fy(node);
    for (int depth = 0; n && depth < 70; depth++) {
        void *it = NULL;
        if (fy_node_is_scalar(n)) {
            struct fy_token *t = fy_node_get_scalar_token(n);
            const struct fy_mark *m = t ? fy_token_start_mark(t) : NULL;
            if (!m) {
                return -1;
            }
            *line = m->line + 1;
            *col = m->column + 1;
            return 0;
        }
        if (fy_node_is_mapping(n)) {
            struct fy_node_pair *pair = fy_node_mapping_iterate(n, &it);
            n = pair ? fy_node_pair_key(pair) : NULL;
        } else {
            n = fy_node_sequence_iterate(n, &it);
        }
    }
    return -1;
}

struct st_yaml_node *st_yaml_either(struct st_yaml_node *a, struct st_yaml_node *b)
{
    int line, col;
    return st_yaml_pos(a, &line, &col) == 0 ? a : b;
}

struct st_yaml_node *st_yaml_seq_next(struct st_yaml_node *seq, void **it)
{
    if (!st_yaml_is_seq(seq)) {
        return NULL;
    }
    return st(fy_node_sequence_iterate(fy(seq), it));
}

int st_yaml_map_next(struct st_yaml_node *map, void **it, struct st_yaml_node **k,
                     struct st_yaml_node **v)
{
    struct fy_node_pair *pair = st_yaml_is_map(map) ? fy_node_mapping_iterate(fy(map), it) : NULL;
    *k = pair ? st(fy_node_pair_key(pair)) : NULL;
    *v = pair ? st(fy_node_pair_value(pair)) : NULL;
    return pair != NULL;
}

struct st_yaml_node *st_yaml_get(struct st_yaml *y, struct st_yaml_node *map, const char *key,
                                 struct st_yaml_node **k)
{
    void *it = NULL;
    struct st_yaml_node *kn, *vn;
    size_t klen = strlen(key);
    if (k) {
        *k = NULL;
    }
    while (st_yaml_map_next(map, &it, &kn, &vn)) {
        size_t n;
        const char *s = st_yaml_text(y, kn, &n);
        if (st_yaml_is_scalar(kn) && n == klen && memcmp(s, key, n) == 0) {
            if (k) {
                *k = kn;
            }
            return vn;
        }
    }
    return NULL;
}

/* ---- messages ---- */

static void vfail_at(struct st_yaml *y, int line, int col, const char *fmt, va_list ap)
{
    char msg[768];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    const char *name = y->o.name ? y->o.name : "yaml";
    if (line <= 0 || (y->o.flags & ST_YAML_NO_POSITION)) {
        st_errf(y->err, y->errlen, "%s: %s", name, msg);
    } else if (y->o.flags & ST_YAML_NO_COLUMN) {
        st_errf(y->err, y->errlen, "%s:%d: %s", name, line, msg);
    } else {
        st_errf(y->err, y->errlen, "%s:%d:%d: %s", name, line, col, msg);
    }
}

int st_yaml_fail(struct st_yaml *y, struct st_yaml_node *at, const char *fmt, ...)
{
    int line = 0, col = 0;
    if (st_yaml_pos(at, &line, &col) != 0) {
        line = 0;
    }
    va_list ap;
    va_start(ap, fmt);
    vfail_at(y, line, col, fmt, ap);
    va_end(ap);
    return ST_EPARSE;
}

int st_yaml_fail_at(struct st_yaml *y, int line, int col, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail_at(y, line, col, fmt, ap);
    va_end(ap);
    return ST_EPARSE;
}

void st_yaml_quote(const char *s, size_t n, char *out, size_t outlen)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 8 < outlen; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i == GOT_MAX) {
            o += (size_t)snprintf(out + o, outlen - o, "...");
            break;
        }
        if (c >= 0x20 && c < 0x7f) {
            out[o++] = (char)c;
        } else {
            o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", c);
        }
    }
    if (outlen > 0) {
        out[o < outlen ? o : outlen - 1] = '\0';
    }
}

void st_yaml_describe(struct st_yaml *y, struct st_yaml_node *v, char *out, size_t outlen)
{
    size_t n = 0;
    const char *s;
    char q[GOT_MAX * 4 + 8];
    if (!v) {
        snprintf(out, outlen, "an empty value");
    } else if (st_yaml_is_map(v)) {
        snprintf(out, outlen, "a mapping");
    } else if (st_yaml_is_seq(v)) {
        snprintf(out, outlen, "a list");
    } else if (st_yaml_is_alias(v)) {
        s = st_yaml_text(y, v, &n);
        st_yaml_quote(s, n, q, sizeof(q));
        snprintf(out, outlen, "an alias (*%s)", q);
    } else {
        s = st_yaml_text(y, v, &n);
        if (n == 0) {
            snprintf(out, outlen, "an empty value");
        } else {
            st_yaml_quote(s, n, q, sizeof(q));
            snprintf(out, outlen, "'%s'", q);
        }
    }
}

size_t st_yaml_distance(const char *a, size_t an, const char *b, size_t bn)
{
    size_t row[NAME_MAX_LEN + 1];
    an = an > NAME_MAX_LEN ? NAME_MAX_LEN : an;
    bn = bn > NAME_MAX_LEN ? NAME_MAX_LEN : bn;
    for (size_t j = 0; j <= bn; j++) {
        row[j] = j;
    }
    for (size_t i = 1; i <= an; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= bn; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (row[j - 1] + 1 < best) {
                best = row[j - 1] + 1;
            }
            if (up + 1 < best) {
                best = up + 1;
            }
            row[j] = best;
            diag = up;
        }
    }
    return row[bn];
}

const char *st_yaml_suggest(const char *s, size_t n, const char *const *known)
{
    const char *best = NULL;
    size_t best_d = 3;
    for (size_t i = 0; known[i]; i++) {
        size_t d = st_yaml_distance(s, n, known[i], strlen(known[i]));
        if (d < best_d) {
            best_d = d;
            best = known[i];
        }
    }
    return best;
}

int st_yaml_check_keys(struct st_yaml *y, struct st_yaml_node *map, struct st_yaml_node *at,
                       const char *what, const char *const *known)
{
    if (!st_yaml_is_map(map)) {
        return st_yaml_fail(y, map ? map : at, "%s: expected a mapping", what);
    }
    void *it = NULL;
    struct st_yaml_node *k, *v;
    while (st_yaml_map_next(map, &it, &k, &v)) {
        size_t n;
        if (!st_yaml_is_scalar(k)) {
            return st_yaml_fail(y, st_yaml_either(k, v), "%s: keys must be plain names", what);
        }
        const char *s = st_yaml_text(y, k, &n);
        int found = 0;
        for (size_t i = 0; known[i] && !found; i++) {
            found = strlen(known[i]) == n && memcmp(known[i], s, n) == 0;
        }
        if (found) {
            continue;
        }
        char list[400] = "", q[GOT_MAX * 4 + 8];
        size_t off = 0;
        for (size_t i = 0; known[i] && off < sizeof(list); i++) {
            int w = snprintf(list + off, sizeof(list) - off, "%s%s", i ? ", " : "", known[i]);
            off += w > 0 ? (size_t)w : 0;
        }
        st_yaml_quote(s, n, q, sizeof(q));
        const char *near = st_yaml_suggest(s, n, known);
        if (near) {
            return st_yaml_fail(y, k, "unknown key '%s' in %s (known: %s); did you mean %s?", q,
                                what, list, near);
        }
        return st_yaml_fail(y, k, "unknown key '%s' in %s (known: %s)", q, what, list);
    }
    return 0;
}

/* ---- typed values of one node ---- */

int st_yaml_scalar(struct st_yaml *y, struct st_yaml_node *k, struct st_yaml_node *v,
                   const char *path, const char **s, size_t *n)
{
    if (!v) {
        return st_yaml_fail(y, k, "%s: expected a value", path);
    }
    if (!st_yaml_is_scalar(v)) {
        return st_yaml_fail(y, st_yaml_either(v, k),
                            "%s: expected a single value, not a list or mapping", path);
    }
    *s = st_yaml_text(y, v, n);
    if (*n == 0) {
        return st_yaml_fail(y, st_yaml_either(v, k), "%s: empty value", path);
    }
    if (memchr(*s, '\0', *n)) {
        return st_yaml_fail(y, st_yaml_either(v, k), "%s: a NUL character in the value", path);
    }
    return 0;
}

int st_yaml_str(struct st_yaml *y, struct st_yaml_node *k, struct st_yaml_node *v, const char *path,
                char **out)
{
    const char *s;
    size_t n;
    int rc = st_yaml_scalar(y, k, v, path, &s, &n);
    if (rc == 0) {
        *out = st_xstrndup(s, n);
    }
    return rc;
}

/* "PATH: expected WANT, got 'TEXT'" at v (or k). */
static int expected(struct st_yaml *y, struct st_yaml_node *k, struct st_yaml_node *v,
                    const char *path, const char *want, const char *s, size_t n)
{
    char q[GOT_MAX * 4 + 8];
    st_yaml_quote(s, n, q, sizeof(q));
    return st_yaml_fail(y, st_yaml_either(v, k), "%s: expected %s, got '%s'", path, want, q);
}

/* The scalar at v as a whole number in [ulo, uhi] (out_u) or a finite one in [flo, fhi] (out_f). */
static int yaml_num(struct st_yaml *y, struct st_yaml_node *k, struct st_yaml_node *v,
                    const char *path, uint64_t ulo, uint64_t uhi, double flo, double fhi,
                    uint64_t *out_u, double *out_f)
{
    const char *s;
    size_t n;
    int rc = st_yaml_scalar(y, k, v, path, &s, &n);
    if (rc != 0) {
        return rc;
    }
    uint64_t u = 0;
    double f = 0;
    char want[96];
    if (out_u && st_num_u64(s, n, uhi, &u) == 0 && u >= ulo) {
        *out_u = u;
        return 0;
    }
    if (!out_u && st_num_f64(s, n, flo, fhi, &f) == 0) {
        *out_f = f;
        return 0;
    }
    if (out_u) {
        snprintf(want, sizeof(want), "a whole number from %llu to %llu", (unsigned long long)ulo,
                 (unsigned long long)uhi);
    } else {
        snprintf(want, sizeof(want), "a number from %g to %g", flo, fhi);
    }
    return expected(y, k, v, path, want, s, n);
}

int st_yaml_u64(struct st_yaml *y, struct st_yaml_node *k, struct st_yaml_node *v, const char *path,
                uint64_t lo, uint64_t hi, uint64_t *out)
{
    return yaml_num(y, k, v, path, lo, hi, 0, 0, out, NULL);
}

int st_yaml_u32(struct st_yaml *y, struct st_yaml_node *k, struct st_yaml_node *v, const char *path,
                uint32_t lo, uint32_t hi, uint32_t *out)
{
    uint64_t x = 0;
    int rc = st_yaml_u64(y, k, v, path, lo, hi, &x);
    if (rc == 0) {
        *out = (uint32_t)x;
    }
    return rc;
}

int st_yaml_f64(struct st_yaml *y, struct st_yaml_node *k, struct st_yaml_node *v, const char *path,
                double lo, double hi, double *out)
{
    return yaml_num(y, k, v, path, 0, 0, lo, hi, NULL, out);
}

int st_yaml_bool(struct st_yaml *y, struct st_yaml_node *k, struct st_yaml_node *v,
                 const char *path, int *out)
{
    const char *s;
    size_t n;
    int rc = st_yaml_scalar(y, k, v, path, &s, &n);
    if (rc != 0) {
        return rc;
    }
    if (n == 4 && memcmp(s, "true", 4) == 0) {
        *out = 1;
    } else if (n == 5 && memcmp(s, "false", 5) == 0) {
        *out = 0;
    } else {
        return expected(y, k, v, path, "true or false", s, n);
    }
    return 0;
}

int st_yaml_enum(struct st_yaml *y, struct st_yaml_node *k, struct st_yaml_node *v,
                 const char *path, const char *const *names, int *out)
{
    const char *s;
    size_t n;
    int rc = st_yaml_scalar(y, k, v, path, &s, &n);
    if (rc != 0) {
        return rc;
    }
    char want[256] = "one of ";
    size_t off = strlen(want);
    for (int i = 0; names[i]; i++) {
        if (strlen(names[i]) == n && memcmp(names[i], s, n) == 0) {
            *out = i + 1;
            return 0;
        }
        int w = snprintf(want + off, sizeof(want) - off, "%s%s", i ? ", " : "", names[i]);
        off += w > 0 && (size_t)w < sizeof(want) - off ? (size_t)w : 0;
    }
    return expected(y, k, v, path, want, s, n);
}

/* ---- typed values of a mapping's key ---- */

/* The key's value: 0 with *k and *v; 1 when absent and not required; or an error. */
static int find(struct st_yaml *y, struct st_yaml_node *map, const char *key, const char *what,
                int required, struct st_yaml_node **k, struct st_yaml_node **v, char *path,
                size_t pathlen)
{
    *v = st_yaml_get(y, map, key, k);
    snprintf(path, pathlen, "%s.%s", what, key);
    if (!*k) {
        return required ? st_yaml_fail(y, map, "%s: missing key '%s'", what, key) : 1;
    }
    return 0;
}

#define PATH_LEN 256

int st_yaml_get_scalar(struct st_yaml *y, struct st_yaml_node *map, const char *key,
                       const char *what, int required, const char **s, size_t *n,
                       struct st_yaml_node **at)
{
    struct st_yaml_node *k, *v;
    char path[PATH_LEN];
    int rc = find(y, map, key, what, required, &k, &v, path, sizeof(path));
    *at = v ? v : k;
    return rc != 0 ? rc : st_yaml_scalar(y, k, v, path, s, n);
}

/* The getters' common shape: absent -> 0 with *out unchanged. */
#define GET(call)                                                                                  \
    struct st_yaml_node *k, *v;                                                                    \
    char path[PATH_LEN];                                                                           \
    int rc = find(y, map, key, what, required, &k, &v, path, sizeof(path));                        \
    if (rc != 0) {                                                                                 \
        return rc < 0 ? rc : 0;                                                                    \
    }                                                                                              \
    return call

int st_yaml_get_str(struct st_yaml *y, struct st_yaml_node *map, const char *key, const char *what,
                    int required, char **out)
{
    GET(st_yaml_str(y, k, v, path, out));
}

int st_yaml_get_u64(struct st_yaml *y, struct st_yaml_node *map, const char *key, const char *what,
                    int required, uint64_t lo, uint64_t hi, uint64_t *out)
{
    GET(st_yaml_u64(y, k, v, path, lo, hi, out));
}

int st_yaml_get_u32(struct st_yaml *y, struct st_yaml_node *map, const char *key, const char *what,
                    int required, uint32_t lo, uint32_t hi, uint32_t *out)
{
    GET(st_yaml_u32(y, k, v, path, lo, hi, out));
}

int st_yaml_get_f64(struct st_yaml *y, struct st_yaml_node *map, const char *key, const char *what,
                    int required, double lo, double hi, double *out)
{
    GET(st_yaml_f64(y, k, v, path, lo, hi, out));
}

int st_yaml_get_bool(struct st_yaml *y, struct st_yaml_node *map, const char *key, const char *what,
                     int required, int *out)
{
    GET(st_yaml_bool(y, k, v, path, out));
}

int st_yaml_get_enum(struct st_yaml *y, struct st_yaml_node *map, const char *key, const char *what,
                     int required, const char *const *names, int *out)
{
    GET(st_yaml_enum(y, k, v, path, names, out));
}

int st_yaml_get_seq(struct st_yaml *y, struct st_yaml_node *map, const char *key, const char *what,
                    int required, struct st_yaml_node **seq, struct st_yaml_node **k)
{
    char path[PATH_LEN];
    int rc = find(y, map, key, what, required, k, seq, path, sizeof(path));
    if (rc != 0) {
        return rc < 0 ? rc : 0;
    }
    if (!st_yaml_is_seq(*seq)) {
        return st_yaml_fail(y, *seq ? *seq : *k, "%s: expected a list", path);
    }
    return 0;
}

/* ---- loading ---- */

/* libfyaml's diagnostic sink: keeps the first line ("<input>:L:C: error: text"), drops the
 * source excerpt that follows. */
static void diag_output(struct fy_diag *diag, void *user, const char *buf, size_t len)
{
    (void)diag;
    struct st_yaml *y = user;
    if (y->msg[0] != '\0') {
        return;
    }
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r')) {
        len--;
    }
    snprintf(y->msg, sizeof(y->msg), "%.*s", (int)len, buf);
}

static const char *prefix(const struct st_yaml *y)
{
    return y->o.prefix ? y->o.prefix : "";
}

/* Rewrites libfyaml's "<memory-@...>:L:C: error: text" as "NAME:L:C: PREFIXtext" (L and C are
 * 1-based there already). */
static int syntax_error(struct st_yaml *y)
{
    const char *m = y->msg[0] ? y->msg : "invalid YAML";
    const char *e = strstr(m, ": error: ");
    int line = 0, col = 0;
    if (!e) {
        return st_yaml_fail_at(y, 0, 0, "%s%s", prefix(y), m);
    }
    const char *q = e;
    while (q > m && q[-1] >= '0' && q[-1] <= '9') {
        q--;
    }
    const char *cs = q;
    if (cs < e && q > m && q[-1] == ':') {
        const char *l = q - 1;
        while (l > m && l[-1] >= '0' && l[-1] <= '9') {
            l--;
        }
        if (l < q - 1) {
            line = (int)strtol(l, NULL, 10);
            col = (int)strtol(cs, NULL, 10);
        }
    }
    return st_yaml_fail_at(y, line, col, "%s%s", prefix(y), e + strlen(": error: "));
}

/* Refuses single-quoted text with '' escapes over several lines (YAML would fold their line
 * breaks, which the helper's unescaping does not), and remembers the others' text. */
static int walk_quotes(struct st_yaml *y, struct fy_node *n, size_t *used, int depth)
{
    size_t a, b;
    void *it = NULL;
    int rc = 0;
    if (!n || depth > 256) {
        return 0;
    }
    if (fy_node_is_scalar(n)) {
        if (!has_quote_escape(y, n, &a, &b)) {
            return 0;
        }
        if (memchr(y->text + a, '\n', b - a) || memchr(y->text + a, '\r', b - a)) {
            return st_yaml_fail(y, st(n),
                                "single-quoted text with '' over several lines is not "
                                "supported; write it on one line or in double quotes");
        }
        esc_add(y, st(n), a, b, used);
        return 0;
    }
    if (fy_node_is_mapping(n)) {
        struct fy_node_pair *pair;
        while (rc == 0 && (pair = fy_node_mapping_iterate(n, &it)) != NULL) {
            rc = walk_quotes(y, fy_node_pair_key(pair), used, depth + 1);
            if (rc == 0) {
                rc = walk_quotes(y, fy_node_pair_value(pair), used, depth + 1);
            }
        }
        return rc;
    }
    struct fy_node *item;
    while (rc == 0 && (item = fy_node_sequence_iterate(n, &it)) != NULL) {
        rc = walk_quotes(y, item, used, depth + 1);
    }
    return rc;
}

void st_yaml_init(struct st_yaml *y, const struct st_yaml_opts *o, char *err, size_t errlen)
{
    memset(y, 0, sizeof(*y));
    y->o = *o;
    y->err = err;
    y->errlen = errlen;
}

/* The guard: the size limit and UTF-8 text without control bytes, before libfyaml sees it. */
static int guard(struct st_yaml *y, const char *text, size_t len)
{
    size_t max = y->o.max_bytes ? y->o.max_bytes : ST_YAML_MAX_BYTES;
    if (len > max) {
        st_errf(y->err, y->errlen, "%s: %zu bytes, more than the %zu %s may have",
                y->o.name ? y->o.name : "yaml", len, max, y->o.noun ? y->o.noun : "a YAML file");
        return ST_ETOOBIG;
    }
    uint32_t line, col;
    unsigned char bad;
    int rc = st_text_check_pos(text, len, &line, &col, &bad);
    if (rc == ST_EUTF8) {
        return st_yaml_fail_at(y, (int)line, (int)col, "%sinvalid UTF-8 (byte 0x%02x)", prefix(y),
                               bad);
    }
    if (rc != 0) {
        return st_yaml_fail_at(y, (int)line, (int)col, "%scontrol character (byte 0x%02x)",
                               prefix(y), bad);
    }
    return 0;
}

int st_yaml_load(struct st_yaml *y, const char *text, size_t len)
{
    if (!text) {
        text = "";
        len = 0;
    }
    y->text = text;
    y->len = len;
    int rc = guard(y, text, len);
    if (rc != 0) {
        return rc;
    }
    struct fy_diag_cfg dcfg;
    fy_diag_cfg_default(&dcfg);
    dcfg.fp = NULL;
    dcfg.output_fn = diag_output;
    dcfg.user = y;
    dcfg.level = FYET_ERROR;
    dcfg.colorize = false;
    struct fy_diag *diag = fy_diag_create(&dcfg);
    y->diag = diag;
    if (!diag) {
        st_errf(y->err, y->errlen, "%s: out of memory", y->o.name ? y->o.name : "yaml");
        return -ENOMEM;
    }
    struct fy_parse_cfg pcfg;
    memset(&pcfg, 0, sizeof(pcfg));
    pcfg.flags = FYPCF_QUIET;
    if (y->o.flags & ST_YAML_RESOLVE) {
        pcfg.flags |= FYPCF_RESOLVE_DOCUMENT;
    }
    pcfg.diag = diag;
    struct fy_parser *fyp = fy_parser_create(&pcfg);
    y->fyp = fyp;
    if (!fyp || fy_parser_set_string(fyp, len ? text : "", len) != 0) {
        st_errf(y->err, y->errlen, "%s: out of memory", y->o.name ? y->o.name : "yaml");
        return -ENOMEM;
    }
    struct fy_document *doc = fy_parse_load_document(fyp);
    y->doc = doc;
    if (fy_diag_got_error(diag)) {
        return syntax_error(y);
    }
    if (doc && !(y->o.flags & ST_YAML_FIRST_DOC)) {
        struct fy_document *extra = fy_parse_load_document(fyp);
        if (extra) {
            rc = st_yaml_fail(y, st(fy_document_root(extra)),
                              "%sexpected one YAML document, got a second one", prefix(y));
            fy_parse_document_destroy(fyp, extra);
            return rc;
        }
        if (fy_diag_got_error(diag)) {
            return syntax_error(y);
        }
    }
    size_t used = 0;
    return doc ? walk_quotes(y, fy_document_root(doc), &used, 0) : 0;
}

void st_yaml_release(struct st_yaml *y)
{
    if (y->doc) {
        fy_parse_document_destroy(y->fyp, y->doc);
    }
    if (y->fyp) {
        fy_parser_destroy(y->fyp);
    }
    if (y->diag) {
        fy_diag_unref(y->diag);
    }
    for (size_t i = 0; i < y->esc_cap; i++) {
        free(y->esc[i].text);
    }
    free(y->esc);
    y->doc = y->fyp = y->diag = NULL;
    y->esc = NULL;
    y->esc_cap = 0;
    y->msg[0] = '\0';
}

struct st_yaml_node *st_yaml_root(const struct st_yaml *y)
{
    return y->doc ? st(fy_document_root(y->doc)) : NULL;
}
