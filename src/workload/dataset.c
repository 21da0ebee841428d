/*
 * ShareGPT-style dataset parsing. See dataset.h. A small scanner walks the top-level array
 * (strings, escapes and nesting) to find each element and its line; each element is then parsed
 * on its own by the strict JSON tokenizer.
 */
#include "workload/dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/xalloc.h"

struct scan {
    const char *s;
    size_t len;
    size_t pos;
    uint64_t line;
    const char *name;
    char *err;
    size_t errlen;
};

static int fail(struct scan *sc, uint64_t line, const char *what)
{
    if (sc->err && sc->errlen) {
        snprintf(sc->err, sc->errlen, "%s:%llu: %s", sc->name, (unsigned long long)line, what);
    }
    return ST_EPARSE;
}

static void skip_ws(struct scan *sc)
{
    while (sc->pos < sc->len) {
        char c = sc->s[sc->pos];
        if (c == '\n') {
            sc->line++;
        } else if (c != ' ' && c != '\t' && c != '\r') {
            return;
        }
        sc->pos++;
    }
}

/* Moves past one value: stops at the ',' or ']' that ends it at the array's level. */
static int skip_value(struct scan *sc)
{
    int in_str = 0, esc = 0;
    uint64_t depth = 0;
    uint64_t start_line = sc->line;
    while (sc->pos < sc->len) {
        char c = sc->s[sc->pos];
        if (c == '\n') {
            sc->line++;
        }
        if (in_str) {
            if (esc) {
                esc = 0;
            } else if (c == '\\') {
                esc = 1;
            } else if (c == '"') {
                in_str = 0;
            }
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '[' || c == '{') {
            depth++;
        } else if (c == ']' || c == '}') {
            if (depth == 0) {
                return 0;
            }
            depth--;
        } else if (c == ',' && depth == 0) {
            return 0;
        }
        sc->pos++;
    }
    return fail(sc, start_line, in_str ? "unterminated string" : "unterminated array or object");
}

static int is_model(const struct st_json *d, int from)
{
    return st_json_streq(d, from, "gpt") || st_json_streq(d, from, "assistant") ||
           st_json_streq(d, from, "chatgpt") || st_json_streq(d, from, "model");
}

/* Reads one element; a usable conversation is appended to ds. */
static int element(struct st_dataset *ds, struct st_json *d, uint64_t *cap, struct scan *sc,
                   const char *p, size_t n, uint64_t line)
{
    static const char want[] = "expected {\"conversations\": [{\"from\": \"human\" or \"gpt\", "
                               "\"value\": text}, ...]}";
    int rc = st_json_parse(d, p, n);
    if (rc || st_json_type(d, 0) != ST_JSON_OBJECT) {
        return fail(sc, line, rc == ST_EUTF8 ? "invalid UTF-8 inside a string" : want);
    }
    int conv = st_json_get(d, 0, "conversations");
    if (st_json_type(d, conv) != ST_JSON_ARRAY) {
        return fail(sc, line, want);
    }
    int human = -1, model = -1;
    for (int t = st_json_first(d, conv); t >= 0; t = st_json_next(d, conv, t)) {
        int from = st_json_get(d, t, "from");
        int value = st_json_get(d, t, "value");
        if (st_json_type(d, from) != ST_JSON_STRING || st_json_type(d, value) != ST_JSON_STRING) {
            return fail(sc, line, want);
        }
        if (human < 0 && (st_json_streq(d, from, "human") || st_json_streq(d, from, "user"))) {
            human = value;
        } else if (human >= 0 && model < 0 && is_model(d, from)) {
            model = value;
        }
    }
    if (human < 0 || model < 0 || d->toks[human].end == d->toks[human].start) {
        return 0;
    }
    if (ds->n == *cap) {
        *cap = *cap ? *cap * 2 : 256;
        ds->convos = st_xrealloc(ds->convos, (size_t)*cap * sizeof(*ds->convos));
    }
    struct st_convo *c = &ds->convos[ds->n++];
    c->index = ds->elems;
    c->line = line;
    c->prompt = ds->pool.len;
    if (st_json_str(d, human, &ds->pool) != 0) {
        return fail(sc, line, want);
    }
    c->prompt_len = ds->pool.len - c->prompt;
    c->answer = ds->pool.len;
    if (st_json_str(d, model, &ds->pool) != 0) {
        return fail(sc, line, want);
    }
    c->answer_len = ds->pool.len - c->answer;
    return 0;
}

static int parse(struct st_dataset *ds, struct scan *sc)
{
    struct st_json d;
    uint64_t cap = 0;
    int rc = 0;
    st_json_init(&d, 0);
    skip_ws(sc);
    if (sc->pos >= sc->len || sc->s[sc->pos] != '[') {
        rc = fail(sc, sc->line, "expected a JSON array of conversations");
        goto out;
    }
    sc->pos++;
    skip_ws(sc);
    if (sc->pos < sc->len && sc->s[sc->pos] == ']') {
        sc->pos++;
    } else {
        for (;;) {
            size_t start = sc->pos;
            uint64_t line = sc->line;
            rc = skip_value(sc);
            if (rc) {
                goto out;
            }
            size_t end = sc->pos;
            while (end > start && (sc->s[end - 1] == ' ' || sc->s[end - 1] == '\t' ||
                                   sc->s[end - 1] == '\r' || sc->s[end - 1] == '\n')) {
                end--;
            }
            if (end == start) {
                rc = fail(sc, line, "expected a conversation before ',' or ']'");
                goto out;
            }
            if (ds->elems >= ST_DATASET_MAX_ELEMS) {
                rc = ST_ETOOBIG;
                if (sc->err && sc->errlen) {
                    snprintf(sc->err, sc->errlen, "%s:%llu: more than %u conversations", sc->name,
                             (unsigned long long)line, ST_DATASET_MAX_ELEMS);
                }
                goto out;
            }
            rc = element(ds, &d, &cap, sc, sc->s + start, end - start, line);
            if (rc) {
                goto out;
            }
            ds->elems++;
            char c = sc->s[sc->pos++];
            if (c == ']') {
                break;
            }
            if (c != ',') {
                rc = fail(sc, sc->line, "expected ',' or ']' after a conversation");
                goto out;
            }
            skip_ws(sc);
        }
    }
    skip_ws(sc);
    if (sc->pos != sc->len) {
        rc = fail(sc, sc->line, "expected nothing after the array");
    }
out:
    st_json_release(&d);
    return rc;
}

int st_dataset_parse(struct st_dataset *d, const char *name, const char *data, size_t len,
                     char *err, size_t errlen)
{
    struct scan sc = {data, len, 0, 1, name, err, errlen};
    memset(d, 0, sizeof(*d));
    st_buf_init(&d->pool);
    int rc = parse(d, &sc);
    if (rc) {
        st_dataset_release(d);
    }
    return rc;
}

void st_dataset_release(struct st_dataset *d)
{
    free(d->convos);
    st_buf_release(&d->pool);
    memset(d, 0, sizeof(*d));
}
