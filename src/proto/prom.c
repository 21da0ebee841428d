/*
 * Prometheus text exposition 0.0.4 parser (see prom.h). One pass over the lines: samples,
 * labels and TYPE declarations are collected with arena offsets (the arena grows), then the
 * public arrays are built with pointers and each sample gets its family's type.
 *
 * Grammar, per line (LF ends a line; a CR before it is dropped): blank, or '#' comment (only
 * "# TYPE name type" is read; it must have both words), or
 *   name [ '{' [ label '=' '"' value '"' { ',' label '=' '"' value '"' } [','] ] '}' ] value [ts]
 * with blanks (space, tab) allowed between tokens. Names are [a-zA-Z_:][a-zA-Z0-9_:]*, label
 * names [a-zA-Z_][a-zA-Z0-9_]*; label values take the escapes \\ \" \n only and must be UTF-8
 * without NUL; a label may not repeat in a sample, and a sample has at most MAX_LABELS labels
 * (ST_ETOOBIG). Values: decimal numbers, [+-]Inf/Infinity/NaN in any case. The timestamp, an
 * integer, is checked and ignored. Leniencies: a TYPE may follow its samples, a later TYPE for a
 * name wins, unknown type words read as 'u', and HELP text is not checked.
 */
#include "proto/prom.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/hash.h"
#include "base/json.h"
#include "base/xalloc.h"

/* Longest value or timestamp token. */
#define TOKEN_MAX 64
/* Most labels one sample may have (vllm:cache_config_info has about 30). */
#define MAX_LABELS 128u

struct raw_label {
    size_t name_off;
    size_t value_off;
};

struct raw_sample {
    size_t name_off;
    uint32_t label0; /* index of its first label in the label array */
    uint32_t n_labels;
    double value;
};

struct raw_type {
    size_t name_off;
    char type;
};

struct parser {
    const char *s; /* borrowed: the whole scrape */
    size_t end;    /* end of the current line (before any CR) */
    size_t pos;
    uint32_t line; /* 1-based */
    struct st_buf arena;
    struct raw_sample *smp;
    uint32_t n_smp, cap_smp;
    struct raw_label *lab;
    uint32_t n_lab, cap_lab;
    struct raw_type *types;
    uint32_t n_types, cap_types;
};

void st_prom_init(struct st_prom *p)
{
    memset(p, 0, sizeof(*p));
}

void st_prom_release(struct st_prom *p)
{
    free(p->samples);
    free(p->arena);
    free(p->labels);
    memset(p, 0, sizeof(*p));
}

/* ---- lexing ---- */

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static void skip_blanks(struct parser *ps)
{
    while (ps->pos < ps->end && is_blank(ps->s[ps->pos])) {
        ps->pos++;
    }
}

static int at_end(const struct parser *ps)
{
    return ps->pos >= ps->end;
}

static int is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Appends s[0..n) and a NUL to the arena; returns its offset. */
static size_t arena_put(struct parser *ps, const char *s, size_t n)
{
    size_t off = ps->arena.len;
    st_buf_append(&ps->arena, s, n);
    st_buf_putc(&ps->arena, '\0');
    return off;
}

/*
 * Reads a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) or, with colon == 0, a label name
 * ([a-zA-Z_][a-zA-Z0-9_]*). Returns its length (0: none) with *start set.
 */
static size_t read_name(struct parser *ps, int colon, size_t *start)
{
    size_t i = ps->pos;
    *start = i;
    if (i >= ps->end || !(is_alpha(ps->s[i]) || (colon && ps->s[i] == ':'))) {
        return 0;
    }
    i++;
    while (i < ps->end &&
           (is_alpha(ps->s[i]) || is_digit(ps->s[i]) || (colon && ps->s[i] == ':'))) {
        i++;
    }
    ps->pos = i;
    return i - *start;
}

/* Reads bytes up to the next blank or the line end. Returns the length. */
static size_t read_token(struct parser *ps, size_t *start)
{
    *start = ps->pos;
    while (ps->pos < ps->end && !is_blank(ps->s[ps->pos])) {
        ps->pos++;
    }
    return ps->pos - *start;
}

static int ieq(const char *a, size_t n, const char *lit)
{
    size_t m = strlen(lit);
    if (n != m) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char c = a[i];
        if (c >= 'A' && c <= 'Z') {
            c = (char)(c - 'A' + 'a');
        }
        if (c != lit[i]) {
            return 0;
        }
    }
    return 1;
}

/*
 * A sample value as Go's ParseFloat takes it in practice: [+-] then Inf, Infinity or NaN (any
 * case), or a decimal number with an optional exponent. Hex floats and '_' are refused.
 */
static int parse_value(const char *tok, size_t n, double *out)
{
    char buf[TOKEN_MAX + 1];
    size_t i = 0;
    if (n == 0 || n > TOKEN_MAX) {
        return ST_EPARSE;
    }
    int neg = tok[0] == '-';
    if (tok[0] == '+' || tok[0] == '-') {
        i = 1;
    }
    if (ieq(tok + i, n - i, "inf") || ieq(tok + i, n - i, "infinity")) {
        *out = neg ? -INFINITY : INFINITY;
        return 0;
    }
    if (ieq(tok + i, n - i, "nan")) {
        *out = NAN;
        return 0;
    }
    size_t digits = 0;
    while (i < n && is_digit(tok[i])) {
        i++;
        digits++;
    }
    if (i < n && tok[i] == '.') {
        i++;
        while (i < n && is_digit(tok[i])) {
            i++;
            digits++;
        }
    }
    if (digits == 0) {
        return ST_EPARSE;
    }
    if (i < n && (tok[i] == 'e' || tok[i] == 'E')) {
        i++;
        if (i < n && (tok[i] == '+' || tok[i] == '-')) {
            i++;
        }
        size_t ed = 0;
        while (i < n && is_digit(tok[i])) {
            i++;
            ed++;
        }
        if (ed == 0) {
            return ST_EPARSE;
        }
    }
    if (i != n) {
        return ST_EPARSE;
    }
    memcpy(buf, tok, n);
    buf[n] = '\0';
    /* The grammar above is a subset of strtod's in the C locale; overflow gives +-HUGE_VAL
     * (infinity), as ParseFloat's does. */
    *out = strtod(buf, NULL);
    return 0;
}

/* An optional timestamp: an integer of milliseconds, possibly negative. Ignored. */
static int check_timestamp(const char *tok, size_t n)
{
    size_t i = tok[0] == '-' || tok[0] == '+' ? 1 : 0;
    if (n > 20 || i == n) {
        return ST_EPARSE;
    }
    for (; i < n; i++) {
        if (!is_digit(tok[i])) {
            return ST_EPARSE;
        }
    }
    return 0;
}

/* ---- lines ---- */

static char type_char(const char *w, size_t n)
{
    if (n == 7 && memcmp(w, "counter", 7) == 0) {
        return 'c';
    }
    if (n == 5 && memcmp(w, "gauge", 5) == 0) {
        return 'g';
    }
    if (n == 9 && memcmp(w, "histogram", 9) == 0) {
        return 'h';
    }
    if (n == 7 && memcmp(w, "summary", 7) == 0) {
        return 's';
    }
    return 'u'; /* untyped, and anything newer (OpenMetrics info, stateset, ...) */
}

/* "# ..." after the '#'. Only TYPE is read; HELP and other comments are skipped. */
static int parse_comment(struct parser *ps)
{
    size_t ws, ns, ts;
    skip_blanks(ps);
    size_t wn = read_token(ps, &ws);
    if (!(wn == 4 && memcmp(ps->s + ws, "TYPE", 4) == 0)) {
        return 0;
    }
    skip_blanks(ps);
    size_t nn = read_name(ps, 1, &ns);
    if (nn == 0 || (!at_end(ps) && !is_blank(ps->s[ps->pos]))) {
        return ST_EPARSE;
    }
    skip_blanks(ps);
    size_t tn = read_token(ps, &ts);
    skip_blanks(ps);
    if (tn == 0 || !at_end(ps)) {
        return ST_EPARSE;
    }
    if (ps->n_types == ps->cap_types) {
        ps->cap_types = ps->cap_types ? ps->cap_types * 2 : 64;
        ps->types = st_xrealloc(ps->types, ps->cap_types * sizeof(*ps->types));
    }
    ps->types[ps->n_types].name_off = arena_put(ps, ps->s + ns, nn);
    ps->types[ps->n_types].type = type_char(ps->s + ts, tn);
    ps->n_types++;
    return 0;
}

/* A label value after its opening quote: escapes \\ \" \n; ends at the closing quote. */
static int parse_label_value(struct parser *ps, size_t *off)
{
    *off = ps->arena.len;
    while (ps->pos < ps->end) {
        char c = ps->s[ps->pos++];
        if (c == '"') {
            size_t n = ps->arena.len - *off;
            if (!st_utf8_valid(ps->arena.data ? ps->arena.data + *off : "", n)) {
                return ST_EPARSE;
            }
            st_buf_putc(&ps->arena, '\0');
            return 0;
        }
        if (c == '\0') {
            return ST_EPARSE;
        }
        if (c == '\\') {
            if (ps->pos >= ps->end) {
                return ST_EPARSE;
            }
            char e = ps->s[ps->pos++];
            if (e == 'n') {
                c = '\n';
            } else if (e == '\\' || e == '"') {
                c = e;
            } else {
                return ST_EPARSE;
            }
        }
        st_buf_putc(&ps->arena, c);
    }
    return ST_EPARSE; /* the line ended inside the quotes */
}

static int parse_labels(struct parser *ps, uint32_t label0)
{
    for (;;) {
        size_t ls;
        skip_blanks(ps);
        if (!at_end(ps) && ps->s[ps->pos] == '}') {
            ps->pos++;
            return 0;
        }
        size_t ln = read_name(ps, 0, &ls);
        if (ln == 0) {
            return ST_EPARSE;
        }
        skip_blanks(ps);
        if (at_end(ps) || ps->s[ps->pos] != '=') {
            return ST_EPARSE;
        }
        ps->pos++;
        skip_blanks(ps);
        if (at_end(ps) || ps->s[ps->pos] != '"') {
            return ST_EPARSE;
        }
        ps->pos++;
        if (ps->n_lab - label0 >= MAX_LABELS) {
            return ST_ETOOBIG;
        }
        size_t name_off = arena_put(ps, ps->s + ls, ln);
        for (uint32_t i = label0; i < ps->n_lab; i++) {
            if (strcmp(ps->arena.data + ps->lab[i].name_off, ps->arena.data + name_off) == 0) {
                return ST_EPARSE; /* the same label twice */
            }
        }
        size_t value_off;
        int rc = parse_label_value(ps, &value_off);
        if (rc != 0) {
            return rc;
        }
        if (ps->n_lab == ps->cap_lab) {
            ps->cap_lab = ps->cap_lab ? ps->cap_lab * 2 : 256;
            ps->lab = st_xrealloc(ps->lab, ps->cap_lab * sizeof(*ps->lab));
        }
        ps->lab[ps->n_lab].name_off = name_off;
        ps->lab[ps->n_lab].value_off = value_off;
        ps->n_lab++;
        skip_blanks(ps);
        if (at_end(ps)) {
            return ST_EPARSE;
        }
        if (ps->s[ps->pos] == ',') {
            ps->pos++;
        } else if (ps->s[ps->pos] != '}') {
            return ST_EPARSE;
        }
    }
}

static int parse_sample(struct parser *ps)
{
    size_t ns, vs, ts;
    size_t nn = read_name(ps, 1, &ns);
    if (nn == 0) {
        return ST_EPARSE;
    }
    if (ps->n_smp >= ST_PROM_MAX_SAMPLES) {
        return ST_ETOOBIG;
    }
    uint32_t label0 = ps->n_lab;
    size_t name_off = arena_put(ps, ps->s + ns, nn);
    skip_blanks(ps);
    if (!at_end(ps) && ps->s[ps->pos] == '{') {
        ps->pos++;
        int rc = parse_labels(ps, label0);
        if (rc != 0) {
            return rc;
        }
        skip_blanks(ps);
    } else if (ps->pos == ns + nn && !at_end(ps)) {
        return ST_EPARSE; /* a byte that is neither a name byte, '{' nor a blank */
    }
    double v;
    size_t vn = read_token(ps, &vs);
    if (parse_value(ps->s + vs, vn, &v) != 0) {
        return ST_EPARSE;
    }
    skip_blanks(ps);
    if (!at_end(ps)) {
        size_t tn = read_token(ps, &ts);
        if (check_timestamp(ps->s + ts, tn) != 0) {
            return ST_EPARSE;
        }
        skip_blanks(ps);
        if (!at_end(ps)) {
            return ST_EPARSE;
        }
    }
    if (ps->n_smp == ps->cap_smp) {
        ps->cap_smp = ps->cap_smp ? ps->cap_smp * 2 : 256;
        ps->smp = st_xrealloc(ps->smp, ps->cap_smp * sizeof(*ps->smp));
    }
    struct raw_sample *r = &ps->smp[ps->n_smp++];
    r->name_off = name_off;
    r->label0 = label0;
    r->n_labels = ps->n_lab - label0;
    r->value = v;
    return 0;
}

static int parse_line(struct parser *ps)
{
    skip_blanks(ps);
    if (at_end(ps)) {
        return 0;
    }
    if (ps->s[ps->pos] == '#') {
        ps->pos++;
        return parse_comment(ps);
    }
    return parse_sample(ps);
}

/* ---- types ---- */

struct type_table {
    const char *arena;
    const struct raw_type *types;
    uint32_t *slots; /* index + 1 into types; 0 = empty */
    size_t mask;
};

static void table_build(struct type_table *tt, const struct parser *ps)
{
    size_t cap = 16;
    while (cap < (size_t)ps->n_types * 2) {
        cap *= 2;
    }
    tt->arena = ps->arena.data;
    tt->types = ps->types;
    tt->slots = st_xcalloc(cap, sizeof(*tt->slots));
    tt->mask = cap - 1;
    for (uint32_t i = 0; i < ps->n_types; i++) {
        const char *name = tt->arena + ps->types[i].name_off;
        size_t h = (size_t)st_hash64(name, strlen(name)) & tt->mask;
        while (tt->slots[h] != 0 &&
               strcmp(tt->arena + ps->types[tt->slots[h] - 1].name_off, name) != 0) {
            h = (h + 1) & tt->mask;
        }
        tt->slots[h] = i + 1; /* a later TYPE for the same name wins */
    }
}

/* Type of family name[0..n), or 0 when undeclared. */
static char table_get(const struct type_table *tt, const char *name, size_t n)
{
    size_t h = (size_t)st_hash64(name, n) & tt->mask;
    while (tt->slots[h] != 0) {
        const char *k = tt->arena + tt->types[tt->slots[h] - 1].name_off;
        if (strlen(k) == n && memcmp(k, name, n) == 0) {
            return tt->types[tt->slots[h] - 1].type;
        }
        h = (h + 1) & tt->mask;
    }
    return 0;
}

static int ends_with(const char *s, size_t n, const char *suf, size_t *stem)
{
    size_t m = strlen(suf);
    if (n <= m || memcmp(s + n - m, suf, m) != 0) {
        return 0;
    }
    *stem = n - m;
    return 1;
}

/*
 * A sample's type: its own name's TYPE, else its family's: x_bucket of histogram x; x_sum and
 * x_count of histogram or summary x; x_total and x_created of counter x (OpenMetrics-style
 * declarations); else 'u'.
 */
static char sample_type(const struct type_table *tt, const char *name)
{
    size_t n = strlen(name), stem;
    char t = table_get(tt, name, n);
    if (t) {
        return t;
    }
    if (ends_with(name, n, "_bucket", &stem)) {
        t = table_get(tt, name, stem);
        return t == 'h' ? t : 'u';
    }
    if (ends_with(name, n, "_sum", &stem) || ends_with(name, n, "_count", &stem)) {
        t = table_get(tt, name, stem);
        return t == 'h' || t == 's' ? t : 'u';
    }
    if (ends_with(name, n, "_total", &stem) || ends_with(name, n, "_created", &stem)) {
        t = table_get(tt, name, stem);
        return t == 'c' ? t : 'u';
    }
    return 'u';
}

/* ---- the parse ---- */

static void parser_release(struct parser *ps)
{
    st_buf_release(&ps->arena);
    free(ps->smp);
    free(ps->lab);
    free(ps->types);
}

static void build(struct st_prom *p, struct parser *ps)
{
    struct type_table tt;
    table_build(&tt, ps);
    /* The arena moves into p; its offsets stay valid. */
    p->arena_len = ps->arena.len;
    char *arena = st_buf_take(&ps->arena);
    p->n = ps->n_smp;
    p->n_labels_total = ps->n_lab;
    p->labels = st_xmalloc((ps->n_lab ? ps->n_lab : 1) * sizeof(*p->labels));
    for (uint32_t i = 0; i < ps->n_lab; i++) {
        p->labels[i].name = arena + ps->lab[i].name_off;
        p->labels[i].value = arena + ps->lab[i].value_off;
    }
    p->samples = st_xmalloc((ps->n_smp ? ps->n_smp : 1) * sizeof(*p->samples));
    tt.arena = arena;
    for (uint32_t i = 0; i < ps->n_smp; i++) {
        struct st_prom_sample *s = &p->samples[i];
        s->name = arena + ps->smp[i].name_off;
        s->labels = p->labels + ps->smp[i].label0;
        s->n_labels = ps->smp[i].n_labels;
        s->value = ps->smp[i].value;
        s->type = sample_type(&tt, s->name);
    }
    p->arena = arena;
    free(tt.slots);
}

int st_prom_parse(struct st_prom *p, const char *text, size_t len, uint32_t *bad_line)
{
    struct parser ps;
    int rc = 0;
    st_prom_release(p);
    if (bad_line) {
        *bad_line = 0;
    }
    if (len > ST_PROM_MAX_BYTES) {
        return ST_ETOOBIG;
    }
    memset(&ps, 0, sizeof(ps));
    st_buf_init(&ps.arena);
    ps.s = text;
    size_t at = 0;
    while (at < len) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t eol = nl ? (size_t)(nl - text) : len;
        ps.line++;
        ps.pos = at;
        ps.end = eol > at && text[eol - 1] == '\r' ? eol - 1 : eol;
        rc = parse_line(&ps);
        if (rc != 0) {
            if (bad_line) {
                *bad_line = ps.line;
            }
            goto out;
        }
        at = eol + 1;
    }
    if (ps.arena.len > UINT32_MAX) {
        rc = ST_ETOOBIG; /* cannot happen under ST_PROM_MAX_BYTES; kept as the stated bound */
        goto out;
    }
    build(p, &ps);
out:
    parser_release(&ps);
    return rc;
}

/* ---- lookups ---- */

const char *st_prom_label(const struct st_prom_sample *s, const char *label)
{
    for (uint32_t i = 0; i < s->n_labels; i++) {
        if (strcmp(s->labels[i].name, label) == 0) {
            return s->labels[i].value;
        }
    }
    return NULL;
}

static int labels_match(const struct st_prom_sample *s, const char *const *want)
{
    for (size_t i = 0; want && want[i] && want[i + 1]; i += 2) {
        const char *v = st_prom_label(s, want[i]);
        if (!v || strcmp(v, want[i + 1]) != 0) {
            return 0;
        }
    }
    return 1;
}

int st_prom_sum(const struct st_prom *p, const char *name, const char *const *want, double *out)
{
    double sum = 0;
    int found = 0;
    for (uint32_t i = 0; i < p->n; i++) {
        const struct st_prom_sample *s = &p->samples[i];
        if (strcmp(s->name, name) == 0 && labels_match(s, want)) {
            sum += s->value;
            found = 1;
        }
    }
    if (!found) {
        return ST_ENOTFOUND;
    }
    *out = sum;
    return 0;
}

const struct st_prom_sample *st_prom_find(const struct st_prom *p, const char *name)
{
    for (uint32_t i = 0; i < p->n; i++) {
        if (strcmp(p->samples[i].name, name) == 0) {
            return &p->samples[i];
        }
    }
    return NULL;
}
