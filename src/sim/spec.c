/*
 * The simulator's pure core: configuration keys, request bodies, timeline arithmetic and event
 * templates. See spec.h for the contract and docs/sim.md for the user-facing rules. Only the
 * ST_NS_PER_* constants come from base/clock.h; nothing here reads a clock.
 */
#include "sim/spec.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/num.h"
#include "base/rng.h"
#include "sim/keys.h"

void st_sim_spec_init(struct st_sim_spec *s)
{
    memset(s, 0, sizeof(*s));
    s->ttft_ns = 50 * ST_NS_PER_MS;
    s->itl_ns = 10 * ST_NS_PER_MS;
    s->tokens_per_chunk = 1;
    s->usage = ST_SIM_USAGE_AUTO;
    s->done = 1;
    s->role_chunk = ST_SIM_ROLE_EARLY;
    s->retry_after_s = 1;
    s->status_rate = 1.0;
    s->stall_after = ST_SIM_OFF;
    s->close_after = ST_SIM_OFF;
    s->reset_after = ST_SIM_OFF;
    s->error_at = ST_SIM_OFF;
}

/* ---- keys ---- */

static const struct st_sim_word usage_words[] = {
    {"auto", ST_SIM_USAGE_AUTO},
    {"always", ST_SIM_USAGE_ALWAYS},
    {"never", ST_SIM_USAGE_NEVER},
    {NULL, 0},
};
static const struct st_sim_word done_words[] = {
    {"on", 1}, {"1", 1}, {"off", 0}, {"0", 0}, {NULL, 0},
};
static const struct st_sim_word role_words[] = {
    {"early", ST_SIM_ROLE_EARLY},
    {"first", ST_SIM_ROLE_FIRST},
    {"off", ST_SIM_ROLE_OFF},
    {NULL, 0},
};
static const struct st_sim_word retry_words[] = {{"-1", -1}, {NULL, 0}};

#define KEY(name, kind, m, lo, hi, words, expect)                                                  \
    ST_SIM_KEY(struct st_sim_spec, name, kind, m, lo, hi, words, expect)
#define MS_EXPECT "milliseconds, a decimal number in [0, 3600000]"
#define CHUNKS(name, m, expect) KEY(name, ST_SIM_KEY_INT, m, 0, ST_SIM_MAX_TOKENS, NULL, expect)

/* Every key: how it is read, and what it accepts for error messages (and docs/sim.md). */
static const struct st_sim_key keys[] = {
    KEY("ttft_ms", ST_SIM_KEY_MS, ttft_ns, 0, ST_SIM_MAX_MS, NULL, MS_EXPECT),
    KEY("itl_ms", ST_SIM_KEY_MS, itl_ns, 0, ST_SIM_MAX_MS, NULL, MS_EXPECT),
    KEY("headers_delay_ms", ST_SIM_KEY_MS, headers_delay_ns, 0, ST_SIM_MAX_MS, NULL, MS_EXPECT),
    KEY("ping_ms", ST_SIM_KEY_MS, ping_ns, ST_NS_PER_MS, ST_SIM_MAX_MS, NULL,
        "0 (no pings) or milliseconds in [1, 3600000]"),
    KEY("tokens_per_chunk", ST_SIM_KEY_INT, tokens_per_chunk, 1, ST_SIM_MAX_TOKENS_PER_CHUNK, NULL,
        "an integer in [1, 8]"),
    KEY("usage", ST_SIM_KEY_WORD, usage, 0, 0, usage_words, "auto, always or never"),
    KEY("done", ST_SIM_KEY_WORD, done, 0, 0, done_words, "on, off, 1 or 0"),
    KEY("role_chunk", ST_SIM_KEY_WORD, role_chunk, 0, 0, role_words, "early, first or off"),
    KEY("cached", ST_SIM_KEY_INT, cached_tokens, 0, 1000000000, NULL,
        "an integer in [0, 1000000000]"),
    KEY("status", ST_SIM_KEY_INT, status, 400, 599, NULL, "an HTTP status in [400, 599]"),
    KEY("retry_after", ST_SIM_KEY_INT, retry_after_s, 0, 86400, retry_words,
        "seconds, an integer in [0, 86400], or -1 to omit Retry-After"),
    KEY("nonsse", ST_SIM_KEY_INT, nonsse, 0, 1, NULL, "1 or 0"),
    CHUNKS("stall_after", stall_after, "a chunk count in [0, 1000000]"),
    CHUNKS("close_after", close_after, "a chunk count in [0, 1000000]"),
    CHUNKS("reset_after", reset_after, "a chunk count in [0, 1000000]"),
    CHUNKS("error_at", error_at, "a chunk count in [0, 1000000]"),
    CHUNKS("malformed_at", malformed_at, "a 1-based chunk number in [1, 1000000], or 0 for none"),
    CHUNKS("oversize_at", oversize_at, "a 1-based chunk number in [1, 1000000], or 0 for none"),
    CHUNKS("bad_utf8_at", bad_utf8_at, "a 1-based chunk number in [1, 1000000], or 0 for none"),
    KEY("status_rate", ST_SIM_KEY_DEC, status_rate, 0, 1, NULL,
        "a share of requests, a decimal number in [0, 1]"),
};

#define NKEYS ((int)(sizeof(keys) / sizeof(keys[0])))

_Static_assert(sizeof(enum st_sim_usage) == sizeof(int32_t), "enum keys are stored as int");
_Static_assert(sizeof(enum st_sim_role) == sizeof(int32_t), "enum keys are stored as int");

const char *st_sim_spec_expect(const char *key)
{
    int k = st_sim_key_find(keys, NKEYS, key, strlen(key));
    return k < 0 ? NULL : keys[k].expect;
}

int st_sim_spec_set(struct st_sim_spec *s, const char *key, size_t keylen, const char *val,
                    size_t vallen, char *err, size_t errlen)
{
    int k = st_sim_key_find(keys, NKEYS, key, keylen);
    if (k < 0) {
        st_errf(err, errlen, "unknown key '%.*s'", (int)(keylen > 64 ? 64 : keylen), key);
        return ST_ENOTFOUND;
    }
    if (st_sim_key_set(&keys[k], s, val, vallen) != 0) {
        return st_sim_key_bad(&keys[k], val, vallen, err, errlen);
    }
    return 0;
}

static int set_key(void *ctx, const char *key, size_t keylen, const char *val, size_t vallen,
                   char *err, size_t errlen)
{
    return st_sim_spec_set(ctx, key, keylen, val, vallen, err, errlen);
}

int st_sim_spec_apply(struct st_sim_spec *s, const char *text, size_t len, char *err, size_t errlen)
{
    struct st_sim_spec tmp = *s;
    int rc = st_sim_key_list(text, len, " \t", set_key, &tmp, err, errlen);
    if (rc == 0) {
        *s = tmp;
    }
    return rc;
}

/* ---- request bodies ---- */

static int req_err(char *err, size_t errlen, const char *msg)
{
    if (err && errlen) {
        snprintf(err, errlen, "%s", msg);
    }
    return ST_EPARSE;
}

/* Reads an optional boolean member: absent or null -> 0. */
static int opt_bool(const struct st_json *d, int obj, const char *key, int *out)
{
    int i = st_json_get(d, obj, key);
    enum st_json_type t = st_json_type(d, i);
    if (i < 0 || t == ST_JSON_NULL) {
        *out = 0;
        return 0;
    }
    int v = st_json_bool(d, i);
    if (v < 0) {
        return ST_EPARSE;
    }
    *out = v;
    return 0;
}

/* Bytes of the decoded string token i, using scratch. */
static uint64_t string_bytes(const struct st_json *d, int i, struct st_buf *scratch)
{
    st_buf_clear(scratch);
    if (st_json_str(d, i, scratch) != 0) {
        return 0;
    }
    return scratch->len;
}

static int chat_prompt_bytes(const struct st_json *d, int msgs, struct st_buf *scratch,
                             uint64_t *bytes)
{
    if (st_json_type(d, msgs) != ST_JSON_ARRAY) {
        return ST_EPARSE;
    }
    uint64_t total = 0;
    for (int m = st_json_first(d, msgs); m >= 0; m = st_json_next(d, msgs, m)) {
        if (st_json_type(d, m) != ST_JSON_OBJECT) {
            return ST_EPARSE;
        }
        int c = st_json_get(d, m, "content");
        if (st_json_type(d, c) == ST_JSON_STRING) {
            total += string_bytes(d, c, scratch);
        } else if (st_json_type(d, c) == ST_JSON_ARRAY) {
            for (int p = st_json_first(d, c); p >= 0; p = st_json_next(d, c, p)) {
                int ty = st_json_get(d, p, "type");
                int tx = st_json_get(d, p, "text");
                if (st_json_streq(d, ty, "text") && st_json_type(d, tx) == ST_JSON_STRING) {
                    total += string_bytes(d, tx, scratch);
                }
            }
        }
    }
    *bytes = total;
    return 0;
}

static int completion_prompt(const struct st_json *d, int p, struct st_buf *scratch,
                             struct st_sim_req *r)
{
    if (st_json_type(d, p) == ST_JSON_STRING) {
        r->prompt_bytes = string_bytes(d, p, scratch);
        r->prompt_tokens = (r->prompt_bytes + ST_SIM_TOKEN_BYTES - 1) / ST_SIM_TOKEN_BYTES;
        return 0;
    }
    if (st_json_type(d, p) != ST_JSON_ARRAY) {
        return ST_EPARSE;
    }
    uint64_t ids = 0;
    for (int e = st_json_first(d, p); e >= 0; e = st_json_next(d, p, e)) {
        int64_t v;
        if (st_json_i64(d, e, &v) != 0 || v < 0) {
            return ST_EPARSE;
        }
        ids++;
    }
    r->prompt_bytes = 0;
    r->prompt_tokens = ids;
    return 0;
}

/* Reads max_completion_tokens, else max_tokens (null counts as absent), else the default. */
static int output_length(const struct st_json *d, uint32_t *n)
{
    static const char *const names[] = {"max_completion_tokens", "max_tokens"};
    for (size_t k = 0; k < 2; k++) {
        int i = st_json_get(d, 0, names[k]);
        if (i < 0 || st_json_type(d, i) == ST_JSON_NULL) {
            continue;
        }
        int64_t v;
        if (st_json_i64(d, i, &v) != 0 || v < 1 || v > (int64_t)ST_SIM_MAX_TOKENS) {
            return ST_EPARSE;
        }
        *n = (uint32_t)v;
        return 0;
    }
    *n = ST_SIM_DEFAULT_TOKENS;
    return 0;
}

int st_sim_req_parse(struct st_sim_req *r, enum st_sim_api api, const char *body, size_t len,
                     struct st_json *doc, struct st_buf *scratch, char *err, size_t errlen)
{
    memset(r, 0, sizeof(*r));
    r->api = api;
    int rc = st_json_parse(doc, body, len);
    if (rc != 0) {
        if (err && errlen) {
            snprintf(err, errlen, "request body is not valid JSON (%s)", st_strerror(rc));
        }
        return ST_EPARSE;
    }
    if (st_json_type(doc, 0) != ST_JSON_OBJECT) {
        return req_err(err, errlen, "request body must be a JSON object");
    }
    if (output_length(doc, &r->n_tokens) != 0) {
        return req_err(err, errlen,
                       "max_completion_tokens / max_tokens must be an integer in [1, 1000000]");
    }
    if (opt_bool(doc, 0, "stream", &r->stream) != 0) {
        return req_err(err, errlen, "stream must be a boolean");
    }
    int so = st_json_get(doc, 0, "stream_options");
    if (st_json_type(doc, so) == ST_JSON_OBJECT) {
        int iu = st_json_get(doc, so, "include_usage");
        r->stream_options = 1;
        r->include_usage_given = iu >= 0 && st_json_type(doc, iu) != ST_JSON_NULL;
        if (opt_bool(doc, so, "include_usage", &r->include_usage) != 0 ||
            opt_bool(doc, so, "continuous_usage_stats", &r->continuous_usage) != 0) {
            return req_err(err, errlen, "stream_options members must be booleans");
        }
    } else if (so >= 0 && st_json_type(doc, so) != ST_JSON_NULL) {
        return req_err(err, errlen, "stream_options must be an object");
    }
    if (api == ST_SIM_API_CHAT) {
        if (chat_prompt_bytes(doc, st_json_get(doc, 0, "messages"), scratch, &r->prompt_bytes)) {
            return req_err(err, errlen, "messages must be an array of objects");
        }
        r->prompt_tokens = (r->prompt_bytes + ST_SIM_TOKEN_BYTES - 1) / ST_SIM_TOKEN_BYTES;
    } else if (completion_prompt(doc, st_json_get(doc, 0, "prompt"), scratch, r) != 0) {
        return req_err(err, errlen, "prompt must be a string or an array of token ids");
    }
    return 0;
}

/* ---- timeline ---- */

uint32_t st_sim_chunks(uint32_t n_tokens, uint32_t per_chunk)
{
    return (n_tokens + per_chunk - 1) / per_chunk;
}

uint32_t st_sim_chunk_tokens(uint32_t n_tokens, uint32_t per_chunk, uint32_t j)
{
    uint64_t first = (uint64_t)j * per_chunk;
    if (first >= n_tokens) {
        return 0;
    }
    uint64_t left = n_tokens - first;
    return left < per_chunk ? (uint32_t)left : per_chunk;
}

uint64_t st_sim_chunk_due_ns(const struct st_sim_spec *s, uint64_t arrival_ns, uint32_t j)
{
    /* itl_ns <= 3.6e12 and j <= 1e6, so the product stays far below 2^64. */
    return arrival_ns + s->ttft_ns + (uint64_t)j * s->itl_ns;
}

uint64_t st_sim_body_due_ns(const struct st_sim_spec *s, const struct st_sim_req *r,
                            uint64_t arrival_ns)
{
    uint32_t c = st_sim_chunks(r->n_tokens, s->tokens_per_chunk);
    uint64_t body = st_sim_chunk_due_ns(s, arrival_ns, c - 1);
    uint64_t hdr = arrival_ns + s->headers_delay_ns;
    return body > hdr ? body : hdr;
}

int st_sim_usage_on(const struct st_sim_spec *s, const struct st_sim_req *r)
{
    switch (s->usage) {
    case ST_SIM_USAGE_ALWAYS:
        return 1;
    case ST_SIM_USAGE_NEVER:
        return 0;
    case ST_SIM_USAGE_AUTO:
    default:
        return !r->stream || r->include_usage;
    }
}

int st_sim_status_applies(const struct st_sim_spec *s, uint64_t seed, uint64_t k)
{
    if (s->status == 0 || s->status_rate <= 0.0) {
        return 0;
    }
    if (s->status_rate >= 1.0) {
        return 1;
    }
    struct st_rng r;
    st_rng_seed(&r, seed ^ (k * 0x9e3779b97f4a7c15ull));
    return st_rng_unit(&r) < s->status_rate;
}

void st_sim_token_text(uint64_t i, char out[ST_SIM_TOKEN_BYTES])
{
    uint32_t m = (uint32_t)(i % ST_SIM_TOKEN_CYCLE);
    out[0] = ' ';
    out[1] = (char)('a' + m / 676);
    out[2] = (char)('a' + (m / 26) % 26);
    out[3] = (char)('a' + m % 26);
}

/* ---- templates ---- */

size_t st_sim_put_u64(char *out, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t k = 0; k < n; k++) {
        out[k] = tmp[n - 1 - k];
    }
    return n;
}

static const char *id_prefix(enum st_sim_api api)
{
    return api == ST_SIM_API_CHAT ? "chatcmpl-sim-" : "cmpl-sim-";
}

void st_sim_put_prefix(struct st_buf *b, const struct st_sim_resp *r, const char *object)
{
    st_buf_printf(
        b, "{\"id\":\"%s%llu\",\"object\":\"%s\",\"created\":%lld,\"model\":", id_prefix(r->api),
        (unsigned long long)r->id, object, (long long)r->created_unix_s);
    st_json_quote(b, r->model, strlen(r->model));
    st_buf_putc(b, ',');
}

static void put_usage(struct st_buf *b, const struct st_sim_resp *r)
{
    st_buf_printf(b,
                  "\"usage\":{\"prompt_tokens\":%llu,\"completion_tokens\":%llu,"
                  "\"total_tokens\":%llu,\"prompt_tokens_details\":{\"cached_tokens\":%llu}}",
                  (unsigned long long)r->prompt_tokens, (unsigned long long)r->n_tokens,
                  (unsigned long long)(r->prompt_tokens + r->n_tokens),
                  (unsigned long long)r->cached_tokens);
}

#define TMPL_BUFS 6

/* The template's buffers, for init and release. */
static void tmpl_bufs(struct st_sim_tmpl *t, struct st_buf *out[TMPL_BUFS])
{
    struct st_buf *b[TMPL_BUFS] = {&t->head,       &t->close, &t->close_last,
                                   &t->usage_head, &t->role,  &t->usage};
    memcpy(out, b, sizeof(b));
}

void st_sim_tmpl_init(struct st_sim_tmpl *t, const struct st_sim_resp *r)
{
    int chat = r->api == ST_SIM_API_CHAT;
    const char *object = chat ? "chat.completion.chunk" : "text_completion";
    struct st_buf *bufs[TMPL_BUFS];
    tmpl_bufs(t, bufs);
    for (size_t i = 0; i < TMPL_BUFS; i++) {
        st_buf_init(bufs[i]);
    }
    t->prompt_tokens = r->prompt_tokens;

    st_buf_puts(&t->head, "data: ");
    st_sim_put_prefix(&t->head, r, object);
    st_buf_puts(&t->head, chat ? "\"choices\":[{\"index\":0,\"delta\":{\"content\":\""
                               : "\"choices\":[{\"index\":0,\"text\":\"");
    st_buf_puts(&t->close, chat ? "\"},\"finish_reason\":null}]" : "\",\"finish_reason\":null}]");
    st_buf_puts(&t->close_last,
                chat ? "\"},\"finish_reason\":\"length\"}]" : "\",\"finish_reason\":\"length\"}]");
    st_buf_printf(&t->usage_head, ",\"usage\":{\"prompt_tokens\":%llu,\"completion_tokens\":",
                  (unsigned long long)r->prompt_tokens);
    if (chat) {
        st_buf_puts(&t->role, "data: ");
        st_sim_put_prefix(&t->role, r, object);
        st_buf_puts(&t->role, "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
                              "\"content\":\"\"},\"finish_reason\":null}]}\n\n");
    }
    st_buf_puts(&t->usage, "data: ");
    st_sim_put_prefix(&t->usage, r, object);
    st_buf_puts(&t->usage, "\"choices\":[],");
    put_usage(&t->usage, r);
    st_buf_puts(&t->usage, "}\n\n");
}

void st_sim_tmpl_release(struct st_sim_tmpl *t)
{
    struct st_buf *bufs[TMPL_BUFS];
    tmpl_bufs(t, bufs);
    for (size_t i = 0; i < TMPL_BUFS; i++) {
        st_buf_release(bufs[i]);
    }
}

#define PAD_OPEN ",\"sim_pad\":\""
#define TOTAL_KEY ",\"total_tokens\":"

size_t st_sim_tmpl_content_max(const struct st_sim_tmpl *t, uint32_t ntok, unsigned flags)
{
    size_t n = t->head.len + (size_t)ntok * ST_SIM_TOKEN_BYTES + t->close_last.len + 3;
    if (flags & ST_SIM_EV_USAGE) {
        n += t->usage_head.len + 20 + strlen(TOTAL_KEY) + 20 + 1;
    }
    if (flags & ST_SIM_EV_OVERSIZE) {
        n += strlen(PAD_OPEN) + ST_SIM_OVERSIZE_PAD_BYTES + 1;
    }
    return n;
}

/* Renders the part of a content event after its text: close, usage, pad, brace, blank line. */
static size_t content_tail(const struct st_sim_tmpl *t, char *p, unsigned flags,
                           uint64_t done_tokens)
{
    char *start = p;
    const struct st_buf *close = (flags & ST_SIM_EV_LAST) ? &t->close_last : &t->close;
    memcpy(p, close->data, close->len);
    p += close->len;
    if (flags & ST_SIM_EV_USAGE) {
        memcpy(p, t->usage_head.data, t->usage_head.len);
        p += t->usage_head.len;
        p += st_sim_put_u64(p, done_tokens);
        memcpy(p, TOTAL_KEY, strlen(TOTAL_KEY));
        p += strlen(TOTAL_KEY);
        p += st_sim_put_u64(p, t->prompt_tokens + done_tokens);
        *p++ = '}';
    }
    if (flags & ST_SIM_EV_OVERSIZE) {
        memcpy(p, PAD_OPEN, strlen(PAD_OPEN));
        p += strlen(PAD_OPEN);
        memset(p, 'x', ST_SIM_OVERSIZE_PAD_BYTES);
        p += ST_SIM_OVERSIZE_PAD_BYTES;
        *p++ = '"';
    }
    if (!(flags & ST_SIM_EV_MALFORMED)) {
        *p++ = '}';
    }
    *p++ = '\n';
    *p++ = '\n';
    return (size_t)(p - start);
}

size_t st_sim_tmpl_content(const struct st_sim_tmpl *t, char *out, uint64_t tok0, uint32_t ntok,
                           unsigned flags, uint64_t done_tokens)
{
    char *p = out;
    memcpy(p, t->head.data, t->head.len);
    p += t->head.len;
    char *text = p;
    for (uint32_t k = 0; k < ntok; k++) {
        st_sim_token_text(tok0 + k, p);
        p += ST_SIM_TOKEN_BYTES;
    }
    if ((flags & ST_SIM_EV_BAD_UTF8) && ntok > 0) {
        /* A lead byte followed by a non-continuation byte: invalid, yet still 4 bytes. */
        text[1] = (char)0xC3;
        text[2] = (char)0x28;
    }
    p += content_tail(t, p, flags, done_tokens);
    return (size_t)(p - out);
}

size_t st_sim_tmpl_content_text_max(const struct st_sim_tmpl *t, size_t text_len, unsigned flags)
{
    return st_sim_tmpl_content_max(t, 0, flags) + text_len;
}

size_t st_sim_tmpl_content_text(const struct st_sim_tmpl *t, char *out, const char *text,
                                size_t text_len, unsigned flags, uint64_t done_tokens)
{
    char *p = out;
    memcpy(p, t->head.data, t->head.len);
    p += t->head.len;
    memcpy(p, text, text_len);
    if ((flags & ST_SIM_EV_BAD_UTF8) && text_len >= 3) {
        p[1] = (char)0xC3;
        p[2] = (char)0x28;
    }
    p += text_len;
    p += content_tail(t, p, flags, done_tokens);
    return (size_t)(p - out);
}

void st_sim_put_body_head(struct st_buf *out, const struct st_sim_resp *r)
{
    int chat = r->api == ST_SIM_API_CHAT;
    st_buf_reserve(out, (size_t)r->n_tokens * ST_SIM_TOKEN_BYTES + 1024);
    st_sim_put_prefix(out, r, chat ? "chat.completion" : "text_completion");
    st_buf_puts(out, chat ? "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
                            "\"content\":\""
                          : "\"choices\":[{\"index\":0,\"text\":\"");
}

void st_sim_render_body(struct st_buf *out, const struct st_sim_resp *r, int with_usage)
{
    int chat = r->api == ST_SIM_API_CHAT;
    st_sim_put_body_head(out, r);
    for (uint32_t i = 0; i < r->n_tokens; i++) {
        char tok[ST_SIM_TOKEN_BYTES];
        st_sim_token_text(i, tok);
        st_buf_append(out, tok, sizeof(tok));
    }
    st_buf_puts(out,
                chat ? "\"},\"finish_reason\":\"length\"}]" : "\",\"finish_reason\":\"length\"}]");
    if (with_usage) {
        st_buf_putc(out, ',');
        put_usage(out, r);
    }
    st_buf_putc(out, '}');
}

void st_sim_render_error(struct st_buf *out, const char *message, const char *type, int code)
{
    struct st_jw w;
    st_jw_init(&w, out);
    st_jw_obj_open(&w);
    st_jw_key(&w, "error");
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "message", message);
    st_jw_kstr(&w, "type", type);
    st_jw_ki64(&w, "code", code);
    st_jw_obj_close(&w);
    st_jw_obj_close(&w);
}

const char *st_sim_error_type(int status)
{
    switch (status) {
    case 400:
        return "BadRequestError";
    case 401:
        return "AuthenticationError";
    case 403:
        return "PermissionDeniedError";
    case 404:
        return "NotFoundError";
    case 408:
        return "TimeoutError";
    case 429:
        return "RateLimitError";
    case 503:
        return "ServiceUnavailableError";
    default:
        return status < 500 ? "BadRequestError" : "InternalServerError";
    }
}

const char *st_sim_reason(int status)
{
    static const struct {
        int code;
        const char *text;
    } t[] = {
        {200, "OK"},
        {400, "Bad Request"},
        {401, "Unauthorized"},
        {403, "Forbidden"},
        {404, "Not Found"},
        {405, "Method Not Allowed"},
        {408, "Request Timeout"},
        {409, "Conflict"},
        {413, "Content Too Large"},
        {422, "Unprocessable Content"},
        {429, "Too Many Requests"},
        {500, "Internal Server Error"},
        {501, "Not Implemented"},
        {502, "Bad Gateway"},
        {503, "Service Unavailable"},
        {504, "Gateway Timeout"},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        if (t[i].code == status) {
            return t[i].text;
        }
    }
    return "Error";
}

/* ---- listen address ---- */

int st_sim_listen_parse(const char *s, struct sockaddr_storage *sa, socklen_t *salen, int *loopback)
{
    char host[64];
    const char *port_text;
    int v6 = 0;
    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (!end || end[1] != ':' || (size_t)(end - s - 1) >= sizeof(host)) {
            return ST_EPARSE;
        }
        memcpy(host, s + 1, (size_t)(end - s - 1));
        host[end - s - 1] = '\0';
        port_text = end + 2;
        v6 = 1;
    } else {
        const char *colon = strrchr(s, ':');
        if (!colon || colon == s || (size_t)(colon - s) >= sizeof(host)) {
            return ST_EPARSE;
        }
        memcpy(host, s, (size_t)(colon - s));
        host[colon - s] = '\0';
        port_text = colon + 1;
    }
    uint64_t port;
    size_t port_len = strlen(port_text);
    if (port_len > 18 || st_num_u64(port_text, port_len, 65535, &port) != 0) {
        return ST_EPARSE;
    }
    memset(sa, 0, sizeof(*sa));
    if (v6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)sa;
        if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) {
            return ST_EPARSE;
        }
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        *salen = sizeof(*a);
        *loopback = IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
        return 0;
    }
    struct sockaddr_in *a = (struct sockaddr_in *)sa;
    if (strcmp(host, "localhost") == 0) {
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    } else if (inet_pton(AF_INET, host, &a->sin_addr) != 1) {
        return ST_EPARSE;
    }
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    *salen = sizeof(*a);
    *loopback = (ntohl(a->sin_addr.s_addr) >> 24) == 127;
    return 0;
}
