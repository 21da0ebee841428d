/*
 * JSON tokenizer and writer. See json.h for the contract.
 *
 * The reader is recursive descent bounded by ST_JSON_MAX_DEPTH; each value appends one token, and
 * a container's token is patched with its size and subtree length when it closes. String bodies
 * are scanned with a byte-class table so that plain ASCII costs one load and one compare a byte.
 */
#include "base/json.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"

enum { C_PLAIN = 0, C_QUOTE, C_BSLASH, C_CTRL, C_HIGH };

static unsigned char byte_class[256];
static int classes_ready;

static void init_classes(void)
{
    /* Idempotent and race-free in effect: every thread writes the same values. */
    for (int i = 0; i < 256; i++) {
        unsigned char c = C_PLAIN;
        if (i < 0x20) {
            c = C_CTRL;
        } else if (i == '"') {
            c = C_QUOTE;
        } else if (i == '\\') {
            c = C_BSLASH;
        } else if (i >= 0x80) {
            c = C_HIGH;
        }
        byte_class[i] = c;
    }
    __atomic_store_n(&classes_ready, 1, __ATOMIC_RELEASE);
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if it is invalid or truncated. */
static size_t utf8_seq(const unsigned char *p, size_t avail)
{
    unsigned char c = p[0];
    if (c < 0x80) {
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        return (avail >= 2 && (p[1] & 0xC0) == 0x80) ? 2 : 0;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (avail < 3 || (p[2] & 0xC0) != 0x80) {
            return 0;
        }
        unsigned char lo = 0x80, hi = 0xBF;
        if (c == 0xE0) {
            lo = 0xA0;
        } else if (c == 0xED) {
            hi = 0x9F; /* no UTF-16 surrogates */
        }
        return (p[1] >= lo && p[1] <= hi) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (avail < 4 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) {
            return 0;
        }
        unsigned char lo = 0x80, hi = 0xBF;
        if (c == 0xF0) {
            lo = 0x90;
        } else if (c == 0xF4) {
            hi = 0x8F;
        }
        return (p[1] >= lo && p[1] <= hi) ? 4 : 0;
    }
    return 0;
}

int st_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = utf8_seq(p + i, n - i);
        if (!k) {
            return 0;
        }
        i += k;
    }
    return 1;
}

int st_text_check_pos(const char *s, size_t n, uint32_t *line, uint32_t *col, unsigned char *byte)
{
    const unsigned char *p = (const unsigned char *)s;
    uint32_t ln = 1, cl = 1;
    size_t i = 0;
    int rc = 0;
    *byte = 0;
    while (i < n) {
        unsigned char c = p[i];
        if (c == '\n') {
            ln++;
            cl = 1;
            i++;
            continue;
        }
        if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f) {
            *byte = c;
            rc = ST_EPARSE;
            break;
        }
        size_t k = c < 0x80 ? 1 : utf8_seq(p + i, n - i);
        if (!k) {
            *byte = c;
            rc = ST_EUTF8;
            break;
        }
        i += k;
        cl++;
    }
    *line = ln;
    *col = cl;
    return rc;
}

int st_text_check(const char *s, size_t n, uint32_t *line, unsigned char *byte)
{
    uint32_t col;
    return st_text_check_pos(s, n, line, &col, byte);
}

void st_json_init(struct st_json *d, uint32_t max_toks)
{
    memset(d, 0, sizeof(*d));
    d->max_toks = max_toks ? max_toks : (1u << 20);
}

void st_json_release(struct st_json *d)
{
    st_freep(&d->toks);
    d->n = 0;
    d->cap = 0;
}

struct parser {
    struct st_json *d;
    const unsigned char *s;
    size_t len;
    size_t pos;
};

static __attribute__((noinline, cold)) void grow_toks(struct st_json *d)
{
    uint32_t cap = d->cap ? d->cap * 2 : 64;
    if (cap > d->max_toks) {
        cap = d->max_toks;
    }
    d->toks = st_xrealloc(d->toks, (size_t)cap * sizeof(*d->toks));
    d->cap = cap;
}

static inline int new_tok(struct parser *p, enum st_json_type type, size_t start, int *idx)
{
    struct st_json *d = p->d;
    if (d->n >= d->max_toks) {
        return ST_ETOOBIG;
    }
    if (d->n == d->cap) {
        grow_toks(d);
    }
    struct st_json_tok *t = &d->toks[d->n];
    t->type = (uint8_t)type;
    t->flags = 0;
    t->start = (uint32_t)start;
    t->end = (uint32_t)start;
    t->size = 0;
    t->skip = 1;
    *idx = (int)d->n++;
    return 0;
}

static inline void skip_ws(struct parser *p)
{
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c > ' ' || (c != ' ' && c != '\t' && c != '\n' && c != '\r')) {
            break;
        }
        p->pos++;
    }
}

static int hexval(unsigned char c)
{
    if (!isxdigit(c)) {
        return -1;
    }
    return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* Always inlined: it runs for every key and most values, and a call costs as much as a short
 * string. */
static inline __attribute__((always_inline)) int parse_string(struct parser *p)
{
    int idx;
    int rc = new_tok(p, ST_JSON_STRING, p->pos + 1, &idx);
    if (rc) {
        return rc;
    }
    size_t i = p->pos + 1;
    const unsigned char *s = p->s;
    size_t len = p->len;
    uint8_t flags = 0;
    for (;;) {
        /* Eight bytes at a time: stop at the first '"', '\\', control byte or byte >= 0x80.
         * A borrow can only flag bytes above a byte that really matches, so the lowest flag is
         * exact. */
        while (i + 8 <= len) {
            uint64_t x;
            memcpy(&x, s + i, 8);
            const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
            uint64_t m = ((x - 0x20 * ones) | ((x ^ ('"' * ones)) - ones) |
                          ((x ^ ('\\' * ones)) - ones) | x) &
                         high;
            if (m) {
                i += (size_t)__builtin_ctzll(m) >> 3;
                goto special;
            }
            i += 8;
        }
        while (i < len && byte_class[s[i]] == C_PLAIN) {
            i++;
        }
        if (i >= len) {
            return ST_EPARSE;
        }
    special:
        switch (byte_class[s[i]]) {
        case C_QUOTE:
            p->d->toks[idx].end = (uint32_t)i;
            p->d->toks[idx].flags = flags;
            p->pos = i + 1;
            return 0;
        case C_BSLASH:
            flags |= ST_JSON_F_ESCAPED;
            if (i + 1 >= len) {
                return ST_EPARSE;
            }
            switch (s[i + 1]) {
            case '"':
            case '\\':
            case '/':
            case 'b':
            case 'f':
            case 'n':
            case 'r':
            case 't':
                i += 2;
                break;
            case 'u':
                if (i + 6 > len) {
                    return ST_EPARSE;
                }
                for (int k = 2; k < 6; k++) {
                    if (hexval(s[i + k]) < 0) {
                        return ST_EPARSE;
                    }
                }
                i += 6;
                break;
            default:
                return ST_EPARSE;
            }
            break;
        case C_CTRL:
            return ST_EPARSE;
        default: {
            size_t k = utf8_seq(s + i, len - i);
            if (!k) {
                return ST_EUTF8;
            }
            i += k;
            break;
        }
        }
    }
}

static int is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static int parse_number(struct parser *p)
{
    const unsigned char *s = p->s;
    size_t i = p->pos, len = p->len;
    if (i < len && s[i] == '-') {
        i++;
    }
    if (i >= len || !is_digit(s[i])) {
        return ST_EPARSE;
    }
    if (s[i] == '0') {
        i++;
    } else {
        while (i < len && is_digit(s[i])) {
            i++;
        }
    }
    if (i < len && s[i] == '.') {
        i++;
        if (i >= len || !is_digit(s[i])) {
            return ST_EPARSE;
        }
        while (i < len && is_digit(s[i])) {
            i++;
        }
    }
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < len && (s[i] == '+' || s[i] == '-')) {
            i++;
        }
        if (i >= len || !is_digit(s[i])) {
            return ST_EPARSE;
        }
        while (i < len && is_digit(s[i])) {
            i++;
        }
    }
    int idx;
    int rc = new_tok(p, ST_JSON_NUMBER, p->pos, &idx);
    if (rc) {
        return rc;
    }
    p->d->toks[idx].end = (uint32_t)i;
    p->pos = i;
    return 0;
}

static inline int parse_literal(struct parser *p, const char *word, size_t n,
                                enum st_json_type type)
{
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0) {
        return ST_EPARSE;
    }
    int idx;
    int rc = new_tok(p, type, p->pos, &idx);
    if (rc) {
        return rc;
    }
    p->pos += n;
    p->d->toks[idx].end = (uint32_t)p->pos;
    return 0;
}

static inline int parse_value(struct parser *p, int depth);

static int parse_container(struct parser *p, int depth, int is_obj)
{
    if (depth >= ST_JSON_MAX_DEPTH) {
        return ST_ETOOBIG;
    }
    int idx;
    int rc = new_tok(p, is_obj ? ST_JSON_OBJECT : ST_JSON_ARRAY, p->pos, &idx);
    if (rc) {
        return rc;
    }
    char close = is_obj ? '}' : ']';
    uint32_t size = 0;
    p->pos++;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == (unsigned char)close) {
        p->pos++;
        goto done;
    }
    for (;;) {
        if (is_obj) {
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != '"') {
                return ST_EPARSE;
            }
            rc = parse_string(p);
            if (rc) {
                return rc;
            }
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') {
                return ST_EPARSE;
            }
            p->pos++;
        }
        rc = parse_value(p, depth + 1);
        if (rc) {
            return rc;
        }
        size++;
        skip_ws(p);
        if (p->pos >= p->len) {
            return ST_EPARSE;
        }
        if (p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->s[p->pos] == (unsigned char)close) {
            p->pos++;
            break;
        }
        return ST_EPARSE;
    }
done:
    p->d->toks[idx].size = size;
    p->d->toks[idx].end = (uint32_t)p->pos;
    p->d->toks[idx].skip = p->d->n - (uint32_t)idx;
    return 0;
}

/* Always inlined into parse_container, its hot caller: one call less per value. */
static inline __attribute__((always_inline)) int parse_value(struct parser *p, int depth)
{
    skip_ws(p);
    if (p->pos >= p->len) {
        return ST_EPARSE;
    }
    switch (p->s[p->pos]) {
    case '{':
        return parse_container(p, depth, 1);
    case '[':
        return parse_container(p, depth, 0);
    case '"':
        return parse_string(p);
    case 't':
        return parse_literal(p, "true", 4, ST_JSON_TRUE);
    case 'f':
        return parse_literal(p, "false", 5, ST_JSON_FALSE);
    case 'n':
        return parse_literal(p, "null", 4, ST_JSON_NULL);
    default:
        return parse_number(p);
    }
}

int st_json_parse(struct st_json *d, const char *src, size_t len)
{
    if (!__atomic_load_n(&classes_ready, __ATOMIC_ACQUIRE)) {
        init_classes();
    }
    d->n = 0;
    d->src = src;
    d->len = len;
    if (len > UINT32_MAX) {
        return ST_ETOOBIG;
    }
    struct parser p = {.d = d, .s = (const unsigned char *)src, .len = len, .pos = 0};
    int rc = parse_value(&p, 0);
    if (rc == 0) {
        skip_ws(&p);
        if (p.pos != len) {
            rc = ST_EPARSE;
        }
    }
    if (rc) {
        d->n = 0;
    }
    return rc;
}

enum st_json_type st_json_type(const struct st_json *d, int i)
{
    if (i < 0 || (uint32_t)i >= d->n) {
        return ST_JSON_INVALID;
    }
    return (enum st_json_type)d->toks[i].type;
}

static int key_equals(const struct st_json *d, int k, const char *key, size_t keylen)
{
    const struct st_json_tok *t = &d->toks[k];
    if (!(t->flags & ST_JSON_F_ESCAPED)) {
        return t->end - t->start == keylen && memcmp(d->src + t->start, key, keylen) == 0;
    }
    struct st_buf tmp;
    st_buf_init(&tmp);
    int eq =
        st_json_str(d, k, &tmp) == 0 && tmp.len == keylen && memcmp(tmp.data, key, keylen) == 0;
    st_buf_release(&tmp);
    return eq;
}

int st_json_get(const struct st_json *d, int obj, const char *key)
{
    if (st_json_type(d, obj) != ST_JSON_OBJECT) {
        return -1;
    }
    size_t keylen = strlen(key);
    int k = obj + 1;
    for (uint32_t m = 0; m < d->toks[obj].size; m++) {
        if (key_equals(d, k, key, keylen)) {
            return k + 1;
        }
        k = k + 1 + (int)d->toks[k + 1].skip;
    }
    return -1;
}

int st_json_at(const struct st_json *d, int arr, uint32_t idx)
{
    if (st_json_type(d, arr) != ST_JSON_ARRAY || idx >= d->toks[arr].size) {
        return -1;
    }
    int e = arr + 1;
    for (uint32_t m = 0; m < idx; m++) {
        e += (int)d->toks[e].skip;
    }
    return e;
}

int st_json_first(const struct st_json *d, int i)
{
    enum st_json_type t = st_json_type(d, i);
    if ((t != ST_JSON_OBJECT && t != ST_JSON_ARRAY) || d->toks[i].size == 0) {
        return -1;
    }
    return i + 1;
}

int st_json_next(const struct st_json *d, int parent, int i)
{
    enum st_json_type t = st_json_type(d, parent);
    if (t != ST_JSON_OBJECT && t != ST_JSON_ARRAY) {
        return -1;
    }
    int next = i + (int)d->toks[i].skip;
    if (t == ST_JSON_OBJECT) {
        next += (int)d->toks[i + 1].skip; /* i is a key: skip its value too */
    }
    if ((uint32_t)next >= (uint32_t)parent + d->toks[parent].skip) {
        return -1;
    }
    return next;
}

static void put_utf8(struct st_buf *out, uint32_t cp)
{
    char tmp[4];
    size_t n;
    if (cp < 0x80) {
        tmp[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        tmp[0] = (char)(0xC0 | (cp >> 6));
        tmp[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        tmp[0] = (char)(0xE0 | (cp >> 12));
        tmp[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        tmp[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        tmp[0] = (char)(0xF0 | (cp >> 18));
        tmp[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        tmp[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        tmp[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    st_buf_append(out, tmp, n);
}

static uint32_t hex4(const char *s)
{
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        v = (v << 4) | (uint32_t)hexval((unsigned char)s[k]);
    }
    return v;
}

int st_json_str(const struct st_json *d, int i, struct st_buf *out)
{
    if (st_json_type(d, i) != ST_JSON_STRING) {
        return ST_EPARSE;
    }
    const struct st_json_tok *t = &d->toks[i];
    const char *s = d->src + t->start;
    size_t n = t->end - t->start;
    if (!(t->flags & ST_JSON_F_ESCAPED)) {
        st_buf_append(out, s, n);
        return 0;
    }
    st_buf_reserve(out, n);
    size_t j = 0;
    while (j < n) {
        size_t run = j;
        while (run < n && s[run] != '\\') {
            run++;
        }
        st_buf_append(out, s + j, run - j);
        j = run;
        if (j >= n) {
            break;
        }
        char e = s[j + 1]; /* the tokenizer guaranteed a valid escape */
        j += 2;
        switch (e) {
        case 'b':
            st_buf_putc(out, '\b');
            break;
        case 'f':
            st_buf_putc(out, '\f');
            break;
        case 'n':
            st_buf_putc(out, '\n');
            break;
        case 'r':
            st_buf_putc(out, '\r');
            break;
        case 't':
            st_buf_putc(out, '\t');
            break;
        case 'u': {
            uint32_t cp = hex4(s + j);
            j += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && j + 6 <= n && s[j] == '\\' && s[j + 1] == 'u') {
                uint32_t lo = hex4(s + j + 2);
                if (lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    j += 6;
                }
            }
            if (cp >= 0xD800 && cp <= 0xDFFF) {
                cp = 0xFFFD; /* a lone surrogate has no UTF-8 form */
            }
            put_utf8(out, cp);
            break;
        }
        default: /* '"', '\\', '/' */
            st_buf_putc(out, e);
            break;
        }
    }
    return 0;
}

int st_json_streq(const struct st_json *d, int i, const char *s)
{
    if (st_json_type(d, i) != ST_JSON_STRING) {
        return 0;
    }
    return key_equals(d, i, s, strlen(s));
}

const char *st_json_raw(const struct st_json *d, int i, size_t *len)
{
    if (st_json_type(d, i) == ST_JSON_INVALID) {
        *len = 0;
        return "";
    }
    *len = d->toks[i].end - d->toks[i].start;
    return d->src + d->toks[i].start;
}

/* Raw text of number token i, or NULL when i is not a number. */
static const char *number_text(const struct st_json *d, int i, size_t *n)
{
    if (st_json_type(d, i) != ST_JSON_NUMBER) {
        return NULL;
    }
    *n = d->toks[i].end - d->toks[i].start;
    return d->src + d->toks[i].start;
}

/* m * 10 + digit into *m unless that exceeds limit. */
static int mul10_add(uint64_t *m, unsigned digit, uint64_t limit)
{
    if (*m > (limit - digit) / 10) {
        return ST_EPARSE;
    }
    *m = *m * 10 + digit;
    return 0;
}

int st_json_i64(const struct st_json *d, int i, int64_t *out)
{
    size_t n;
    const char *s = number_text(d, i, &n);
    if (!s) {
        return ST_EPARSE;
    }
    /*
     * Exact, in integers, on text the tokenizer already validated: the value is m * 10^k, where
     * m is the digit string without its trailing zeros (so a non-zero m ends in a non-zero digit)
     * and k the exponent less the fraction digits plus those zeros. It is an integer only when
     * m is 0 or k >= 0. Going through a double would round 9007199254740993.0 to ...992 and take
     * 1.00000000000000001 for 1.
     */
    size_t j = 0;
    int neg = s[0] == '-';
    j += (size_t)neg;
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t m = 0;
    int64_t k = 0, zeros = 0;
    int in_frac = 0;
    for (; j < n && s[j] != 'e' && s[j] != 'E'; j++) {
        if (s[j] == '.') {
            in_frac = 1;
            continue;
        }
        k -= in_frac;
        if (s[j] == '0') {
            zeros += m != 0; /* leading zeros do not count */
            continue;
        }
        for (; zeros > 0; zeros--) {
            if (mul10_add(&m, 0, limit)) {
                return ST_EPARSE;
            }
        }
        if (mul10_add(&m, (unsigned)(s[j] - '0'), limit)) {
            return ST_EPARSE;
        }
    }
    k += zeros;
    if (j < n) {
        int eneg = s[++j] == '-';
        j += s[j] == '-' || s[j] == '+';
        int64_t e = 0;
        for (; j < n; j++) {
            e = e < 100000 ? e * 10 + (s[j] - '0') : e; /* saturate: any such m overflows */
        }
        k += eneg ? -e : e;
    }
    if (m != 0 && k < 0) {
        return ST_EPARSE;
    }
    for (; m != 0 && k > 0; k--) {
        if (mul10_add(&m, 0, limit)) {
            return ST_EPARSE;
        }
    }
    *out = neg ? (m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m) : (int64_t)m;
    return 0;
}

int st_json_f64(const struct st_json *d, int i, double *out)
{
    size_t n;
    const char *s = number_text(d, i, &n);
    if (!s) {
        return ST_EPARSE;
    }
    /* strtod needs a terminator the caller's bytes may lack; numbers this long are rare. */
    char tmp[128];
    char *p = n < sizeof(tmp) ? tmp : st_xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    *out = strtod(p, NULL);
    if (p != tmp) {
        free(p);
    }
    return 0;
}

double st_json_num(const struct st_json *d, int obj, const char *key, int *ok)
{
    int t = st_json_get(d, obj, key);
    double v = NAN;
    if (t < 0 || st_json_type(d, t) == ST_JSON_NULL) {
        return NAN;
    }
    if (st_json_type(d, t) != ST_JSON_NUMBER || st_json_f64(d, t, &v) != 0) {
        if (ok != NULL) {
            *ok = 0;
        }
        return NAN;
    }
    return v;
}

int st_json_bool(const struct st_json *d, int i)
{
    enum st_json_type t = st_json_type(d, i);
    if (t == ST_JSON_TRUE) {
        return 1;
    }
    if (t == ST_JSON_FALSE) {
        return 0;
    }
    return ST_EPARSE;
}

/* ---- writer ---- */

void st_json_quote(struct st_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    st_buf_reserve(b, n + 2);
    st_buf_putc(b, '"');
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        while (run < n && p[run] >= 0x20 && p[run] < 0x80 && p[run] != '"' && p[run] != '\\') {
            run++;
        }
        st_buf_append(b, p + i, run - i);
        i = run;
        if (i >= n) {
            break;
        }
        unsigned char c = p[i];
        if (c >= 0x80) {
            size_t k = utf8_seq(p + i, n - i);
            if (k) {
                st_buf_append(b, p + i, k);
                i += k;
            } else {
                st_buf_append(b, "\xEF\xBF\xBD", 3);
                i++;
            }
            continue;
        }
        i++;
        switch (c) {
        case '"':
            st_buf_append(b, "\\\"", 2);
            break;
        case '\\':
            st_buf_append(b, "\\\\", 2);
            break;
        case '\n':
            st_buf_append(b, "\\n", 2);
            break;
        case '\r':
            st_buf_append(b, "\\r", 2);
            break;
        case '\t':
            st_buf_append(b, "\\t", 2);
            break;
        default: {
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            st_buf_append(b, u, 6);
            break;
        }
        }
    }
    st_buf_putc(b, '"');
}

void st_jw_init(struct st_jw *w, struct st_buf *b)
{
    w->b = b;
    w->comma = 0;
}

static void sep(struct st_jw *w)
{
    if (w->comma) {
        st_buf_putc(w->b, ',');
    }
    w->comma = 1;
}

/* Opens an object or array (c is '{' or '['): no comma before its first member. */
static void jw_open(struct st_jw *w, char c)
{
    sep(w);
    st_buf_putc(w->b, c);
    w->comma = 0;
}

static void jw_close(struct st_jw *w, char c)
{
    st_buf_putc(w->b, c);
    w->comma = 1;
}

void st_jw_obj_open(struct st_jw *w)
{
    jw_open(w, '{');
}

void st_jw_obj_close(struct st_jw *w)
{
    jw_close(w, '}');
}

void st_jw_arr_open(struct st_jw *w)
{
    jw_open(w, '[');
}

void st_jw_arr_close(struct st_jw *w)
{
    jw_close(w, ']');
}

void st_jw_key(struct st_jw *w, const char *key)
{
    sep(w);
    st_json_quote(w->b, key, strlen(key));
    st_buf_putc(w->b, ':');
    w->comma = 0;
}

void st_jw_str(struct st_jw *w, const char *s)
{
    st_jw_strn(w, s, strlen(s));
}

void st_jw_strn(struct st_jw *w, const char *s, size_t n)
{
    sep(w);
    st_json_quote(w->b, s, n);
}

void st_jw_i64(struct st_jw *w, int64_t v)
{
    sep(w);
    st_buf_printf(w->b, "%lld", (long long)v);
}

void st_jw_u64(struct st_jw *w, uint64_t v)
{
    sep(w);
    st_buf_printf(w->b, "%llu", (unsigned long long)v);
}

void st_jw_f64(struct st_jw *w, double v)
{
    sep(w);
    if (!isfinite(v)) {
        st_buf_puts(w->b, "null");
        return;
    }
    char tmp[40];
    snprintf(tmp, sizeof(tmp), "%.15g", v);
    if (strtod(tmp, NULL) != v) {
        snprintf(tmp, sizeof(tmp), "%.17g", v);
    }
    st_buf_puts(w->b, tmp);
}

void st_jw_bool(struct st_jw *w, int v)
{
    sep(w);
    st_buf_puts(w->b, v ? "true" : "false");
}

void st_jw_null(struct st_jw *w)
{
    sep(w);
    st_buf_puts(w->b, "null");
}

void st_jw_raw(struct st_jw *w, const char *json, size_t n)
{
    sep(w);
    st_buf_append(w->b, json, n);
}

/* The keyed writers (json.h): the key, then the value. */
#define JW_KEYED(name, type, put)                                                                  \
    void st_jw_##name(struct st_jw *w, const char *key, type v)                                    \
    {                                                                                              \
        st_jw_key(w, key);                                                                         \
        put(w, v);                                                                                 \
    }

JW_KEYED(kstr, const char *, st_jw_str)
JW_KEYED(ki64, int64_t, st_jw_i64)
JW_KEYED(ku64, uint64_t, st_jw_u64)
JW_KEYED(kf64, double, st_jw_f64)
JW_KEYED(kbool, int, st_jw_bool)

void st_jw_knstr(struct st_jw *w, const char *key, const char *s)
{
    st_jw_key(w, key);
    if (s != NULL) {
        st_jw_str(w, s);
    } else {
        st_jw_null(w);
    }
}

void st_jw_knf64(struct st_jw *w, const char *key, int has, double v)
{
    st_jw_key(w, key);
    if (has) {
        st_jw_f64(w, v);
    } else {
        st_jw_null(w);
    }
}

/* The array writers (json.h): the key, then the n values of v as one array. */
#define JW_KEYED_ARRAY(name, type, put)                                                            \
    void st_jw_##name(struct st_jw *w, const char *key, type v, size_t n)                          \
    {                                                                                              \
        st_jw_key(w, key);                                                                         \
        st_jw_arr_open(w);                                                                         \
        for (size_t i = 0; i < n; i++) {                                                           \
            put(w, v[i]);                                                                          \
        }                                                                                          \
        st_jw_arr_close(w);                                                                        \
    }

JW_KEYED_ARRAY(kstrs, char *const *, st_jw_str)
JW_KEYED_ARRAY(ku32s, const uint32_t *, st_jw_u64)
JW_KEYED_ARRAY(ku64s, const uint64_t *, st_jw_u64)
JW_KEYED_ARRAY(kf64s, const double *, st_jw_f64)

void st_jw_kstrv(struct st_jw *w, const char *key, const char *v, size_t width, size_t n)
{
    st_jw_key(w, key);
    st_jw_arr_open(w);
    for (size_t i = 0; i < n; i++) {
        st_jw_str(w, v + i * width);
    }
    st_jw_arr_close(w);
}
