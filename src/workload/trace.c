/*
 * Mooncake trace parsing. See trace.h. Lines are parsed one at a time with the strict JSON
 * tokenizer, so a bad line is reported by its number and nothing of the file is kept but the
 * numbers.
 */
#include "workload/trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/xalloc.h"

static int fail(char *err, size_t errlen, const char *name, uint64_t line, const char *what)
{
    if (err && errlen) {
        snprintf(err, errlen, "%s:%llu: %s", name, (unsigned long long)line, what);
    }
    return ST_EPARSE;
}

static int get_len(const struct st_json *d, const char *key, uint64_t *out)
{
    int64_t v;
    int i = st_json_get(d, 0, key);
    if (i < 0 || st_json_i64(d, i, &v) != 0 || v < 1 || v > (int64_t)ST_TRACE_MAX_TOKENS) {
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

static int is_blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r') {
            return 0;
        }
    }
    return 1;
}

/* Parses one non-blank line into r (ids appended to t). */
static int parse_line(struct st_trace *t, struct st_json *d, uint64_t *cap_ids, const char *p,
                      size_t n, struct st_trace_req *r, const char *name, uint64_t line, char *err,
                      size_t errlen)
{
    int rc = st_json_parse(d, p, n);
    if (rc == ST_ETOOBIG) {
        return fail(err, errlen, name, line, "line over its size limits");
    }
    if (rc || st_json_type(d, 0) != ST_JSON_OBJECT) {
        return fail(err, errlen, name, line,
                    "expected a JSON object {\"timestamp\": ms, \"input_length\": N, "
                    "\"output_length\": M, \"hash_ids\": [...]}");
    }
    int ts = st_json_get(d, 0, "timestamp");
    if (ts < 0 || st_json_f64(d, ts, &r->timestamp_ms) != 0 || !isfinite(r->timestamp_ms) ||
        r->timestamp_ms < 0) {
        return fail(err, errlen, name, line, "expected \"timestamp\": milliseconds >= 0");
    }
    if (get_len(d, "input_length", &r->input_len) != 0) {
        return fail(err, errlen, name, line, "expected \"input_length\": tokens, 1 to 16777216");
    }
    if (get_len(d, "output_length", &r->output_len) != 0) {
        return fail(err, errlen, name, line, "expected \"output_length\": tokens, 1 to 16777216");
    }
    r->line = line;
    r->id0 = t->nids;
    r->nids = 0;
    int h = st_json_get(d, 0, "hash_ids");
    if (h < 0) {
        return 0;
    }
    if (st_json_type(d, h) != ST_JSON_ARRAY || d->toks[h].size > ST_TRACE_MAX_IDS_PER_LINE) {
        return fail(err, errlen, name, line,
                    "expected \"hash_ids\": an array of at most 65536 integers");
    }
    if (t->nids + d->toks[h].size > ST_TRACE_MAX_IDS) {
        return ST_ETOOBIG;
    }
    if (t->nids + d->toks[h].size > *cap_ids) {
        uint64_t c = *cap_ids ? *cap_ids : 1024;
        while (c < t->nids + d->toks[h].size) {
            c *= 2;
        }
        t->ids = st_xrealloc(t->ids, (size_t)c * sizeof(*t->ids));
        *cap_ids = c;
    }
    for (int e = st_json_first(d, h); e >= 0; e = st_json_next(d, h, e)) {
        int64_t v;
        if (st_json_i64(d, e, &v) != 0 || v < 0) {
            return fail(err, errlen, name, line, "expected \"hash_ids\" of integers >= 0");
        }
        t->ids[t->nids++] = (uint64_t)v;
        r->nids++;
    }
    return 0;
}

int st_trace_parse(struct st_trace *t, const char *name, const char *data, size_t len, char *err,
                   size_t errlen)
{
    struct st_json d;
    uint64_t cap = 0, cap_ids = 0, line = 0;
    int rc = 0;
    memset(t, 0, sizeof(*t));
    st_json_init(&d, 0);
    size_t pos = 0;
    while (pos < len) {
        const char *nl = memchr(data + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - data) : len;
        const char *p = data + pos;
        size_t n = end - pos;
        pos = end + 1;
        line++;
        if (is_blank(p, n)) {
            continue;
        }
        if (t->n >= ST_TRACE_MAX_LINES) {
            rc = ST_ETOOBIG;
            break;
        }
        if (t->n == cap) {
            cap = cap ? cap * 2 : 256;
            t->reqs = st_xrealloc(t->reqs, (size_t)cap * sizeof(*t->reqs));
        }
        struct st_trace_req *r = &t->reqs[t->n];
        rc = parse_line(t, &d, &cap_ids, p, n, r, name, line, err, errlen);
        if (rc) {
            break;
        }
        if (t->n > 0 && r->timestamp_ms < t->reqs[t->n - 1].timestamp_ms) {
            rc = fail(err, errlen, name, line,
                      "expected a \"timestamp\" no earlier than the line before");
            break;
        }
        /* Send offsets are nanoseconds in 64 bits: a span of about 200 days is plenty. */
        if (t->n > 0 && r->timestamp_ms - t->reqs[0].timestamp_ms > ST_TRACE_MAX_SPAN_MS) {
            rc = fail(err, errlen, name, line,
                      "expected a \"timestamp\" within 1.8e10 ms of the first line's");
            break;
        }
        t->n++;
    }
    if (rc == ST_ETOOBIG && err && errlen) {
        snprintf(err, errlen, "%s:%llu: the trace is over its size limits (%u lines, %u ids)", name,
                 (unsigned long long)line, ST_TRACE_MAX_LINES, ST_TRACE_MAX_IDS);
    }
    if (rc == 0 && t->n == 0) {
        if (err && errlen) {
            snprintf(err, errlen, "%s: no request in the trace", name);
        }
        rc = ST_EUSAGE;
    }
    st_json_release(&d);
    if (rc) {
        st_trace_release(t);
    }
    return rc;
}

void st_trace_release(struct st_trace *t)
{
    free(t->reqs);
    free(t->ids);
    memset(t, 0, sizeof(*t));
}

uint64_t st_trace_blocks(const struct st_trace *t, uint64_t nreqs, uint32_t *block_of)
{
    if (nreqs > t->n) {
        nreqs = t->n;
    }
    uint64_t end = nreqs ? t->reqs[nreqs - 1].id0 + t->reqs[nreqs - 1].nids : 0;
    /* Open addressing: slots hold an id and its number + 1 (0: empty). */
    uint64_t cap = 16;
    while (cap < 2 * end) {
        cap *= 2;
    }
    uint64_t *keys = st_xcalloc((size_t)cap, sizeof(*keys));
    uint32_t *vals = st_xcalloc((size_t)cap, sizeof(*vals));
    uint64_t n = 0;
    for (uint64_t k = 0; k < end; k++) {
        uint64_t id = t->ids[k];
        uint64_t h = (id * 0x9e3779b97f4a7c15ull) >> 7;
        for (uint64_t i = h & (cap - 1);; i = (i + 1) & (cap - 1)) {
            if (vals[i] == 0) {
                keys[i] = id;
                vals[i] = (uint32_t)++n;
                block_of[k] = (uint32_t)(n - 1);
                break;
            }
            if (keys[i] == id) {
                block_of[k] = vals[i] - 1;
                break;
            }
        }
    }
    free(keys);
    free(vals);
    return n;
}
