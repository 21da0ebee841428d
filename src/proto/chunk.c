/*
 * Stream-chunk decoder. See chunk.h for the contract and docs/internals/proto.md for the field
 * mapping per server.
 *
 * One strict parse of the payload into the caller's token array, then one walk over the members
 * of the root, of choices[0] and of its delta/message, comparing raw key bytes (a key written
 * with escapes is compared after decoding). Content is measured, not copied, unless the caller
 * asks for the text. Nothing here allocates on the path of an ordinary chunk.
 */
#include "proto/chunk.h"

#include <string.h>

#include "base/names.h"

/*
 * A key's bytes: the raw bytes when it has no escapes (always, in practice), else its decoded
 * form copied into tmp (cut at sizeof(tmp) - 1 bytes: longer keys are none of ours).
 */
struct key {
    const char *s;
    size_t n;
    char tmp[32];
};

static inline void key_get(const struct st_json *d, int k, struct key *key)
{
    const struct st_json_tok *t = &d->toks[k];
    key->s = d->src + t->start;
    key->n = t->end - t->start;
    if (__builtin_expect(t->flags & ST_JSON_F_ESCAPED, 0)) {
        struct st_buf b;
        st_buf_init(&b);
        key->n = 0;
        if (st_json_str(d, k, &b) == 0 && b.len < sizeof(key->tmp)) {
            memcpy(key->tmp, b.data, b.len);
            key->n = b.len;
        }
        st_buf_release(&b);
        key->s = key->tmp;
    }
}

/* key equals the string literal lit; the length test first keeps most misses to one compare. */
#define IS(key, lit) ((key).n == sizeof(lit) - 1 && memcmp((key).s, (lit), sizeof(lit) - 1) == 0)

/* Type of token i, which may be -1 (absent). */
static inline enum st_json_type ttype(const struct st_json *d, int i)
{
    return i < 0 ? ST_JSON_INVALID : (enum st_json_type)d->toks[i].type;
}

/* The key after key k of an object (k + 1 is k's value). */
static inline int next_key(const struct st_json *d, int k)
{
    return k + 1 + (int)d->toks[k + 1].skip;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return c - 'A' + 10; /* the tokenizer checked it is a hex digit */
}

static uint32_t hex4(const char *s)
{
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        v = (v << 4) | (uint32_t)hexval(s[k]);
    }
    return v;
}

/*
 * Decoded length of string token i, without decoding it: the same rules as st_json_str (a
 * surrogate pair gives 4 bytes, a lone surrogate U+FFFD's 3).
 */
static size_t str_len(const struct st_json *d, int i)
{
    const struct st_json_tok *t = &d->toks[i];
    size_t n = t->end - t->start;
    if (!(t->flags & ST_JSON_F_ESCAPED)) {
        return n;
    }
    const char *s = d->src + t->start;
    size_t out = 0, j = 0;
    while (j < n) {
        const char *bs = memchr(s + j, '\\', n - j);
        if (!bs) {
            out += n - j;
            break;
        }
        out += (size_t)(bs - (s + j));
        j = (size_t)(bs - s);
        if (s[j + 1] != 'u') {
            out += 1;
            j += 2;
            continue;
        }
        uint32_t cp = hex4(s + j + 2);
        j += 6;
        if (cp >= 0xD800 && cp <= 0xDBFF && j + 6 <= n && s[j] == '\\' && s[j + 1] == 'u') {
            uint32_t lo = hex4(s + j + 2);
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
                out += 4;
                j += 6;
                continue;
            }
        }
        out += cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3;
    }
    return out;
}

/* Length of the longest prefix of s[0..n) that fits cap - 1 bytes without splitting a UTF-8
 * sequence. */
static size_t utf8_cut(const char *s, size_t n, size_t cap)
{
    if (n < cap) {
        return n;
    }
    size_t k = cap - 1;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) {
        k--;
    }
    return k;
}

/* Copies string token i, decoded and truncated, into dst[cap]; "" when i is not a string. */
static void copy_str(const struct st_json *d, int i, char *dst, size_t cap)
{
    dst[0] = '\0';
    if (ttype(d, i) != ST_JSON_STRING) {
        return;
    }
    const struct st_json_tok *t = &d->toks[i];
    const char *s = d->src + t->start;
    size_t n = t->end - t->start;
    struct st_buf tmp;
    st_buf_init(&tmp);
    if (t->flags & ST_JSON_F_ESCAPED) {
        /* Rare (error messages with quotes or newlines); a malloc is fine here. */
        if (st_json_str(d, i, &tmp) == 0) {
            s = st_buf_str(&tmp);
            n = tmp.len;
        }
    }
    n = utf8_cut(s, n, cap);
    memcpy(dst, s, n);
    dst[n] = '\0';
    st_buf_release(&tmp);
}

/* Integer value of token i into *out when it is an integer number; else *out is unchanged. */
static void get_i64(const struct st_json *d, int i, int64_t *out)
{
    int64_t v;
    if (ttype(d, i) == ST_JSON_NUMBER && st_json_i64(d, i, &v) == 0) {
        *out = v;
    }
}

/* Token i is a string with at least one byte. */
static int nonempty(const struct st_json *d, int i)
{
    return ttype(d, i) == ST_JSON_STRING && d->toks[i].end > d->toks[i].start;
}

/* Adds string token i (content text) to out, and to text when non-NULL. null, "" and an absent
 * token (-1) add nothing. */
static int add_content(const struct st_json *d, int i, struct st_chunk *out, struct st_buf *text)
{
    if (!nonempty(d, i)) {
        return 0;
    }
    if (text) {
        size_t before = text->len;
        int rc = st_json_str(d, i, text);
        if (rc) {
            return rc;
        }
        out->content_bytes += text->len - before;
    } else {
        out->content_bytes += str_len(d, i);
    }
    return 0;
}

/*
 * delta (streaming chat) or message (non-streaming chat). reasoning and reasoning_content are
 * one text under two names: newer vLLM fills both with the same text (reasoning_content is its
 * deprecated copy), SGLang sends reasoning_content only, so reasoning is counted when it is a
 * non-empty string and reasoning_content otherwise. Reasoning text goes before content.
 */
static int decode_delta(const struct st_json *d, int obj, int is_delta, struct st_chunk *out,
                        struct st_buf *text)
{
    if (ttype(d, obj) != ST_JSON_OBJECT) {
        return 0;
    }
    struct key key;
    int content = -1, reasoning = -1, reasoning_content = -1;
    int k = obj + 1;
    for (uint32_t m = 0; m < d->toks[obj].size; m++, k = next_key(d, k)) {
        key_get(d, k, &key);
        if (IS(key, "content")) {
            content = k + 1;
        } else if (IS(key, "reasoning")) {
            reasoning = k + 1;
        } else if (IS(key, "reasoning_content")) {
            reasoning_content = k + 1;
        } else if (is_delta && IS(key, "role") && ttype(d, k + 1) == ST_JSON_STRING) {
            out->has_role = 1;
        }
    }
    int rc = add_content(d, nonempty(d, reasoning) ? reasoning : reasoning_content, out, text);
    if (rc == 0) {
        rc = add_content(d, content, out, text);
    }
    return rc;
}

static int decode_choice(const struct st_json *d, int c, struct st_chunk *out, struct st_buf *text)
{
    if (ttype(d, c) != ST_JSON_OBJECT) {
        return 0;
    }
    struct key key;
    int k = c + 1;
    for (uint32_t m = 0; m < d->toks[c].size; m++, k = next_key(d, k)) {
        key_get(d, k, &key);
        int v = k + 1, rc = 0;
        if (IS(key, "delta")) {
            rc = decode_delta(d, v, 1, out, text);
        } else if (IS(key, "text")) {
            rc = add_content(d, v, out, text);
        } else if (IS(key, "message")) {
            rc = decode_delta(d, v, 0, out, text);
        } else if (IS(key, "finish_reason")) {
            if (nonempty(d, v)) {
                copy_str(d, v, out->finish_reason, sizeof(out->finish_reason));
                out->finished = 1;
            }
        } else if (IS(key, "token_ids")) {
            if (ttype(d, v) == ST_JSON_ARRAY) {
                out->chunk_tokens = d->toks[v].size;
            }
        }
        if (rc) {
            return rc;
        }
    }
    return 0;
}

static const char *const cached_from_names[] = {
    [ST_CACHED_USAGE] = "usage.prompt_tokens_details.cached_tokens",
    [ST_CACHED_TIMINGS] = "timings.cache_n",
    [ST_CACHED_PROMPT_MINUS] = "usage.prompt_tokens - timings.prompt_n"};

const char *st_cached_from_name(enum st_cached_from f)
{
    return ST_NAME_OF(cached_from_names, f, "");
}

static void decode_usage(const struct st_json *d, int u, struct st_chunk *out)
{
    if (ttype(d, u) != ST_JSON_OBJECT) {
        return; /* usage: null (vLLM completions, SGLang) */
    }
    out->has_usage = 1;
    struct key key;
    int k = u + 1;
    for (uint32_t m = 0; m < d->toks[u].size; m++, k = next_key(d, k)) {
        key_get(d, k, &key);
        if (IS(key, "prompt_tokens")) {
            get_i64(d, k + 1, &out->prompt_tokens);
        } else if (IS(key, "completion_tokens")) {
            get_i64(d, k + 1, &out->completion_tokens);
        } else if (IS(key, "prompt_tokens_details")) {
            get_i64(d, st_json_get(d, k + 1, "cached_tokens"), &out->cached_tokens);
            out->cached_from = out->cached_tokens >= 0 ? ST_CACHED_USAGE : ST_CACHED_UNKNOWN;
        }
    }
}

/* llama.cpp timings; cache_n and prompt_n (prompt tokens evaluated) go to *cache_n and
 * *prompt_n, used only when usage has no cached_tokens. */
static void decode_timings(const struct st_json *d, int t, struct st_chunk *out, int64_t *cache_n,
                           int64_t *prompt_n)
{
    if (ttype(d, t) != ST_JSON_OBJECT) {
        return;
    }
    struct key key;
    int k = t + 1;
    for (uint32_t m = 0; m < d->toks[t].size; m++, k = next_key(d, k)) {
        key_get(d, k, &key);
        if (IS(key, "cache_n")) {
            get_i64(d, k + 1, cache_n);
        } else if (IS(key, "prompt_n")) {
            get_i64(d, k + 1, prompt_n);
        } else if (IS(key, "draft_n")) {
            get_i64(d, k + 1, &out->draft_n);
        } else if (IS(key, "draft_n_accepted")) {
            get_i64(d, k + 1, &out->draft_n_accepted);
        }
    }
}

/*
 * An error code: an integer, or a string. A string of digits ("400") is read as a number; any
 * other string ("invalid_request_error") stands in for the type when the object has none.
 */
static void get_code(const struct st_json *d, int v, struct st_chunk *out)
{
    if (ttype(d, v) == ST_JSON_NUMBER) {
        get_i64(d, v, &out->error_code);
        return;
    }
    if (ttype(d, v) != ST_JSON_STRING) {
        return;
    }
    size_t n;
    const char *s = st_json_raw(d, v, &n);
    int64_t code = 0;
    size_t j = 0;
    while (j < n && j < 9 && s[j] >= '0' && s[j] <= '9') {
        code = code * 10 + (s[j] - '0');
        j++;
    }
    if (n > 0 && j == n) {
        out->error_code = code;
    } else if (out->error_type[0] == '\0') {
        copy_str(d, v, out->error_type, sizeof(out->error_type));
    }
}

/* The members of an error object: {"message","type","code"} or TGI's http_status_code. */
static void decode_error_obj(const struct st_json *d, int e, struct st_chunk *out)
{
    struct key key;
    int k = e + 1, code = -1;
    for (uint32_t m = 0; m < d->toks[e].size; m++, k = next_key(d, k)) {
        key_get(d, k, &key);
        if (IS(key, "message")) {
            copy_str(d, k + 1, out->error_message, sizeof(out->error_message));
        } else if (IS(key, "type")) {
            copy_str(d, k + 1, out->error_type, sizeof(out->error_type));
        } else if (IS(key, "code")) {
            code = k + 1;
        } else if (IS(key, "http_status_code")) {
            get_i64(d, k + 1, &out->error_code);
        }
    }
    if (code >= 0) {
        get_code(d, code, out); /* after type, which a string code only stands in for */
    }
}

static int is_done(const char *s, size_t n)
{
    while (n > 0 && (s[0] == ' ' || s[0] == '\t' || s[0] == '\r' || s[0] == '\n')) {
        s++;
        n--;
    }
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n')) {
        n--;
    }
    return n == 6 && memcmp(s, "[DONE]", 6) == 0;
}

static void clear_chunk(struct st_chunk *out)
{
    out->kind = ST_CHUNK_DATA;
    out->has_content = 0;
    out->content_bytes = 0;
    out->has_role = 0;
    out->finished = 0;
    out->finish_reason[0] = '\0';
    out->has_usage = 0;
    out->prompt_tokens = -1;
    out->completion_tokens = -1;
    out->cached_tokens = -1;
    out->cached_from = ST_CACHED_UNKNOWN;
    out->chunk_tokens = -1;
    out->draft_n = -1;
    out->draft_n_accepted = -1;
    out->error_message[0] = '\0';
    out->error_type[0] = '\0';
    out->error_code = -1;
}

int st_chunk_decode(struct st_json *scratch, const char *data, size_t len, struct st_chunk *out,
                    struct st_buf *text)
{
    const struct st_json *d = scratch;
    clear_chunk(out);
    if (is_done(data, len)) {
        out->kind = ST_CHUNK_DONE;
        return 0;
    }
    int rc = st_json_parse(scratch, data, len);
    if (rc) {
        return rc;
    }
    if (ttype(d, 0) != ST_JSON_OBJECT) {
        return ST_EPARSE;
    }

    int choices = -1, usage = -1, timings = -1, error = -1, error_type = -1, flat_error = 0;
    struct key key;
    int k = 1;
    for (uint32_t m = 0; m < d->toks[0].size; m++, k = next_key(d, k)) {
        key_get(d, k, &key);
        if (IS(key, "choices")) {
            choices = k + 1;
        } else if (IS(key, "usage")) {
            usage = k + 1;
        } else if (IS(key, "timings")) {
            timings = k + 1;
        } else if (IS(key, "error")) {
            error = k + 1;
        } else if (IS(key, "error_type")) {
            error_type = k + 1;
        } else if (IS(key, "object")) {
            struct key v;
            key_get(d, k + 1, &v); /* a string value has the same layout as a key */
            flat_error = ttype(d, k + 1) == ST_JSON_STRING && IS(v, "error");
        }
    }

    enum st_json_type et = ttype(d, error);
    if (et == ST_JSON_OBJECT) {
        out->kind = ST_CHUNK_ERROR;
        decode_error_obj(d, error, out);
        return 0;
    }
    if (et == ST_JSON_STRING) {
        /* TGI: {"error":"unhealthy","error_type":"healthcheck"} */
        out->kind = ST_CHUNK_ERROR;
        copy_str(d, error, out->error_message, sizeof(out->error_message));
        copy_str(d, error_type, out->error_type, sizeof(out->error_type));
        return 0;
    }
    if (flat_error) {
        /* Old SGLang/vLLM: {"object":"error","message":...,"type":...,"code":...} */
        out->kind = ST_CHUNK_ERROR;
        decode_error_obj(d, 0, out);
        return 0;
    }

    rc = decode_choice(d, st_json_at(d, choices, 0), out, text);
    if (rc) {
        return rc;
    }
    out->has_content = out->content_bytes > 0;
    decode_usage(d, usage, out);
    int64_t cache_n = -1, prompt_n = -1;
    decode_timings(d, timings, out, &cache_n, &prompt_n);
    if (out->cached_tokens < 0 && cache_n >= 0) {
        out->cached_tokens = cache_n;
        out->cached_from = ST_CACHED_TIMINGS;
    } else if (out->cached_tokens < 0 && prompt_n >= 0 && out->prompt_tokens >= prompt_n) {
        out->cached_tokens = out->prompt_tokens - prompt_n;
        out->cached_from = ST_CACHED_PROMPT_MINUS;
    }
    return 0;
}
