/*
 * libFuzzer target for src/base/json.c. The input is parsed as one JSON document; on success
 * every token is visited with the accessors (type, first/next, get, at, str, streq, raw, i64,
 * f64, bool) and their answers are checked against each other: iteration and index lookups agree,
 * key lookups find a key with that name, decoded strings are valid UTF-8 and survive a quote and
 * re-parse unchanged.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Quotes s with the writer, parses it back, and checks the string decodes to s again. */
static void check_round_trip(const struct st_buf *s)
{
    struct st_buf q, back;
    struct st_json d;
    st_buf_init(&q);
    st_buf_init(&back);
    st_json_init(&d, 0);
    st_json_quote(&q, st_buf_str(s), s->len);
    if (st_json_parse(&d, q.data, q.len) != 0 || st_json_type(&d, 0) != ST_JSON_STRING ||
        st_json_str(&d, 0, &back) != 0 || back.len != s->len ||
        memcmp(st_buf_str(&back), st_buf_str(s), s->len) != 0) {
        abort();
    }
    st_json_release(&d);
    st_buf_release(&back);
    st_buf_release(&q);
}

static void visit_object(const struct st_json *d, int i)
{
    struct st_buf key;
    st_buf_init(&key);
    uint32_t members = 0;
    for (int k = st_json_first(d, i); k >= 0; k = st_json_next(d, i, k)) {
        if (st_json_type(d, k) != ST_JSON_STRING || st_json_type(d, k + 1) == ST_JSON_INVALID) {
            abort();
        }
        st_buf_clear(&key);
        if (st_json_str(d, k, &key) != 0) {
            abort();
        }
        /* get() returns the value of the first key with this name: a key at or before k. */
        if (memchr(st_buf_str(&key), '\0', key.len) == NULL) {
            int v = st_json_get(d, i, st_buf_str(&key));
            if (v < 0 || v > k + 1 || !st_json_streq(d, v - 1, st_buf_str(&key))) {
                abort();
            }
        }
        members++;
    }
    if (members != d->toks[i].size) {
        abort();
    }
    st_buf_release(&key);
}

static void visit_array(const struct st_json *d, int i)
{
    uint32_t idx = 0;
    for (int e = st_json_first(d, i); e >= 0; e = st_json_next(d, i, e)) {
        if (st_json_at(d, i, idx) != e) {
            abort();
        }
        idx++;
    }
    if (idx != d->toks[i].size || st_json_at(d, i, idx) != -1) {
        abort();
    }
}

static void visit(const struct st_json *d, int i)
{
    enum st_json_type t = st_json_type(d, i);
    size_t rawlen;
    const char *raw = st_json_raw(d, i, &rawlen);
    if (raw < d->src || raw + rawlen > d->src + d->len) {
        abort();
    }
    int64_t iv;
    double fv;
    int is_num = t == ST_JSON_NUMBER;
    if (st_json_f64(d, i, &fv) != (is_num ? 0 : ST_EPARSE)) {
        abort();
    }
    if (st_json_i64(d, i, &iv) == 0 && !is_num) {
        abort();
    }
    int b = st_json_bool(d, i);
    if ((t == ST_JSON_TRUE && b != 1) || (t == ST_JSON_FALSE && b != 0) ||
        (t != ST_JSON_TRUE && t != ST_JSON_FALSE && b != ST_EPARSE)) {
        abort();
    }
    struct st_buf s;
    st_buf_init(&s);
    int rc = st_json_str(d, i, &s);
    if (t == ST_JSON_STRING) {
        if (rc != 0 || !st_utf8_valid(st_buf_str(&s), s.len)) {
            abort();
        }
        check_round_trip(&s);
    } else if (rc != ST_EPARSE) {
        abort();
    }
    st_buf_release(&s);
    if (t == ST_JSON_OBJECT) {
        visit_object(d, i);
    } else if (t == ST_JSON_ARRAY) {
        visit_array(d, i);
    } else if (st_json_first(d, i) != -1 || st_json_get(d, i, "a") != -1 ||
               st_json_at(d, i, 0) != -1) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct st_json d;
    st_json_init(&d, 1u << 16);
    /* A private copy, so that a read one past the input is caught. */
    char *copy = malloc(size ? size : 1);
    if (!copy) {
        abort();
    }
    memcpy(copy, data, size);
    if (st_json_parse(&d, copy, size) == 0) {
        if (d.n == 0 || d.toks[0].skip != d.n) {
            abort();
        }
        for (uint32_t i = 0; i < d.n; i++) {
            visit(&d, (int)i);
        }
    } else if (d.n != 0) {
        abort();
    }
    if (st_json_type(&d, -1) != ST_JSON_INVALID || st_json_type(&d, (int)d.n) != ST_JSON_INVALID) {
        abort();
    }
    st_json_release(&d);
    free(copy);
    return 0;
}
