/*
 * Start-up log pool lines (see logline.h). Each line is searched for the fixed phrases the
 * engines print (vllm/v1/core/kv_cache_utils.py, sglang mem_cache/memory_pool.py and the
 * scheduler, llama.cpp src/llama-kv-cache.cpp); the numbers after them are read strictly, so a
 * phrase quoted inside some other message with no number after it is not a hit.
 */
#include "proto/logline.h"

#include <string.h>

#define MAX_U63 0x7fffffffffffffffull

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int is_alnum(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* First occurrence of lit in s[0..n), or NULL. */
static const char *find(const char *s, size_t n, const char *lit)
{
    size_t m = strlen(lit);
    if (m == 0 || n < m) {
        return NULL;
    }
    const char *end = s + n - m + 1;
    for (const char *p = s; p < end;) {
        const char *q = memchr(p, lit[0], (size_t)(end - p));
        if (!q) {
            return NULL;
        }
        if (memcmp(q, lit, m) == 0) {
            return q;
        }
        p = q + 1;
    }
    return NULL;
}

/* *v = *v * 10 + digit c: 0, or -1 when that would pass MAX_U63. */
static int push_digit(uint64_t *v, char c)
{
    uint64_t d = (uint64_t)(c - '0');
    if (*v > (MAX_U63 - d) / 10) {
        return -1;
    }
    *v = *v * 10 + d;
    return 0;
}

/* Reads decimal digits at *p (before end) into *out; 0 on success, -1 for none or overflow. */
static int read_u63(const char **p, const char *end, uint64_t *out)
{
    const char *q = *p;
    uint64_t v = 0;
    if (q >= end || !is_digit(*q)) {
        return -1;
    }
    for (; q < end && is_digit(*q); q++) {
        if (push_digit(&v, *q) != 0) {
            return -1;
        }
    }
    *p = q;
    *out = v;
    return 0;
}

/* vLLM's number: digits in groups of three separated by commas ("686,320"), or plain digits. */
static int read_grouped(const char **p, const char *end, uint64_t *out)
{
    const char *q = *p;
    uint64_t v = 0;
    if (read_u63(&q, end, &v) != 0) {
        return -1;
    }
    size_t lead = (size_t)(q - *p);
    while (q + 3 < end && q[0] == ',' && is_digit(q[1]) && is_digit(q[2]) && is_digit(q[3])) {
        if (lead > 3) {
            return -1; /* "1234,567" is not a grouped number */
        }
        for (int i = 1; i <= 3; i++) {
            if (push_digit(&v, q[i]) != 0) {
                return -1;
            }
        }
        q += 4;
        lead = 3;
    }
    if (q < end && (*q == ',' || is_digit(*q))) {
        return -1; /* a broken group such as "1,23" */
    }
    *p = q;
    *out = v;
    return 0;
}

static const char *skip_spaces(const char *p, const char *end)
{
    while (p < end && *p == ' ') {
        p++;
    }
    return p;
}

/* Expects the literal at *p; advances past it. */
static int expect(const char **p, const char *end, const char *lit)
{
    size_t m = strlen(lit);
    if ((size_t)(end - *p) < m || memcmp(*p, lit, m) != 0) {
        return -1;
    }
    *p += m;
    return 0;
}

/*
 * A rank tag in s[0..n): tag ("DP", "TP") right after a byte that is not a letter or digit (so
 * "EngineCore_DP3" and "[DP1 TP0]" match, "ADP3" does not), then digits, then a byte that is not
 * a letter or digit. Returns the number, or -1.
 */
static int32_t find_tag(const char *s, size_t n, const char *tag)
{
    size_t m = strlen(tag);
    for (size_t i = 0; i + m < n; i++) {
        if (memcmp(s + i, tag, m) != 0 || (i > 0 && is_alnum(s[i - 1])) || !is_digit(s[i + m])) {
            continue;
        }
        uint64_t v;
        const char *p = s + i + m;
        if (read_u63(&p, s + n, &v) != 0 || v > 1000000 || (p < s + n && is_alnum(*p))) {
            continue;
        }
        return (int32_t)v;
    }
    return -1;
}

static int parse_vllm(const char *line, size_t len, struct st_logline_hit *hit)
{
    static const char key[] = "GPU KV cache size: ";
    const char *at = find(line, len, key);
    if (!at) {
        return 0;
    }
    const char *end = line + len;
    const char *p = at + sizeof(key) - 1;
    if (read_grouped(&p, end, &hit->tokens) != 0 || expect(&p, end, " tokens") != 0) {
        return 0;
    }
    hit->kind = ST_LOGLINE_VLLM_KV;
    hit->dp = find_tag(line, (size_t)(at - line), "DP");
    return 1;
}

/* The phrase must start the message: at the line start or after a blank or ']'. */
static const char *find_message(const char *line, size_t len, const char *key)
{
    const char *s = line;
    size_t n = len;
    for (;;) {
        const char *at = find(s, n, key);
        if (!at) {
            return NULL;
        }
        if (at == line || at[-1] == ' ' || at[-1] == ']' || at[-1] == '\t') {
            return at;
        }
        n -= (size_t)(at + 1 - s);
        s = at + 1;
    }
}

static int parse_sglang(const char *line, size_t len, struct st_logline_hit *hit)
{
    static const char alloc[] = "KV Cache is allocated. #tokens: ";
    static const char maxtot[] = "max_total_num_tokens=";
    const char *end = line + len;
    const char *at = find(line, len, alloc);
    const char *p;
    if (at) {
        p = at + sizeof(alloc) - 1;
        hit->kind = ST_LOGLINE_SGLANG_ALLOC;
    } else {
        at = find_message(line, len, maxtot);
        if (!at) {
            return 0;
        }
        p = at + sizeof(maxtot) - 1;
        hit->kind = ST_LOGLINE_SGLANG_MAX;
    }
    if (read_u63(&p, end, &hit->tokens) != 0 || (p < end && *p != ',')) {
        return 0;
    }
    hit->dp = find_tag(line, (size_t)(at - line), "DP");
    hit->tp = find_tag(line, (size_t)(at - line), "TP");
    return 1;
}

/* The cache type written "K (f16)" (after mark, e.g. "K (") or "type_k = 'f16'" (mark
 * "type_k = '"): up to the closing ')' or '\'' into out; "" when absent or malformed. */
static void read_type(const char *line, const char *end, const char *mark, char close, char *out)
{
    out[0] = '\0';
    const char *p = find(line, (size_t)(end - line), mark);
    if (!p) {
        return;
    }
    p += strlen(mark);
    size_t n = 0;
    while (p + n < end && p[n] != close && n < ST_LOGLINE_TYPE_MAX - 1 &&
           (is_alnum(p[n]) || p[n] == '_')) {
        n++;
    }
    if (n > 0 && p + n < end && p[n] == close) {
        memcpy(out, p, n);
        out[n] = '\0';
    }
}

/* llama.cpp b4748's one cache for all slots: "llama_kv_cache_init: kv_size = 8192, offload = 1,
 * type_k = 'f16', type_v = 'f16', n_layer = 4, can_shift = 1" (no sequence count: 0). */
static int parse_llamacpp_init(const char *line, size_t len, struct st_logline_hit *hit)
{
    static const char mark[] = "llama_kv_cache_init: kv_size = ";
    const char *end = line + len;
    const char *p = find(line, len, mark);
    uint64_t cells;
    if (!p) {
        return 0;
    }
    p += sizeof(mark) - 1;
    if (read_u63(&p, end, &cells) != 0 || p >= end || *p != ',') {
        return 0;
    }
    hit->kind = ST_LOGLINE_LLAMACPP_KV;
    hit->tokens = cells;
    hit->streams = 1;
    read_type(p, end, "type_k = '", '\'', hit->type_k);
    read_type(p, end, "type_v = '", '\'', hit->type_v);
    return 1;
}

static int parse_llamacpp(const char *line, size_t len, struct st_logline_hit *hit)
{
    static const char *const names[] = {"llama_kv_cache: size = ",
                                        "llama_kv_cache_unified: size = "};
    const char *end = line + len;
    const char *at = NULL;
    for (size_t i = 0; i < 2 && !at; i++) {
        at = find(line, len, names[i]);
    }
    if (!at) {
        return parse_llamacpp_init(line, len, hit);
    }
    /* "size = %7.2f MiB (%6u cells, %3d layers, %2u/%u seqs)"; older: "%2u seqs)". */
    const char *p = memchr(at, '(', (size_t)(end - at));
    uint64_t cells, layers, seqs, streams = 1;
    if (!p) {
        return 0;
    }
    p = skip_spaces(p + 1, end);
    if (read_u63(&p, end, &cells) != 0 || expect(&p, end, " cells,") != 0) {
        return 0;
    }
    p = skip_spaces(p, end);
    if (read_u63(&p, end, &layers) != 0 || expect(&p, end, " layers,") != 0) {
        return 0;
    }
    p = skip_spaces(p, end);
    if (read_u63(&p, end, &seqs) != 0) {
        return 0;
    }
    if (p < end && *p == '/') {
        p++;
        if (read_u63(&p, end, &streams) != 0) {
            return 0;
        }
    }
    if (expect(&p, end, " seqs)") != 0 || seqs > UINT32_MAX || streams > UINT32_MAX ||
        streams == 0) {
        return 0;
    }
    hit->kind = ST_LOGLINE_LLAMACPP_KV;
    hit->tokens = cells;
    hit->seqs = (uint32_t)seqs;
    hit->streams = (uint32_t)streams;
    read_type(p, end, "K (", ')', hit->type_k);
    read_type(p, end, "V (", ')', hit->type_v);
    return 1;
}

int st_logline_parse(const char *line, size_t len, struct st_logline_hit *hit)
{
    memset(hit, 0, sizeof(*hit));
    hit->dp = -1;
    hit->tp = -1;
    return parse_vllm(line, len, hit) || parse_sglang(line, len, hit) ||
           parse_llamacpp(line, len, hit);
}

/* ---- the scan ---- */

static enum st_logline_engine engine_of(enum st_logline_kind k)
{
    switch (k) {
    case ST_LOGLINE_VLLM_KV:
        return ST_LOGLINE_ENGINE_VLLM;
    case ST_LOGLINE_SGLANG_ALLOC:
    case ST_LOGLINE_SGLANG_MAX:
        return ST_LOGLINE_ENGINE_SGLANG;
    case ST_LOGLINE_LLAMACPP_KV:
    default:
        return ST_LOGLINE_ENGINE_LLAMACPP;
    }
}

struct scan {
    struct st_logline_pool *out;
    int32_t key[ST_LOGLINE_MAX_RANKS]; /* DP rank of each slot; -1: a line without a prefix */
    uint8_t prio[ST_LOGLINE_MAX_RANKS];
};

static void quote(struct st_logline_pool *out, const char *line, size_t len, uint64_t line_no)
{
    size_t n = len < ST_LOGLINE_LINE_MAX - 1 ? len : ST_LOGLINE_LINE_MAX - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)line[i];
        out->line[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    out->line[n] = '\0';
    out->line_no = line_no;
}

/* The slot of DP rank dp (a new one for -1 or an unseen rank); -1 when full. */
static int slot_of(struct scan *sc, int32_t dp)
{
    struct st_logline_pool *out = sc->out;
    if (dp >= 0) {
        for (uint32_t i = 0; i < out->ranks; i++) {
            if (sc->key[i] == dp) {
                return (int)i;
            }
        }
    }
    if (out->ranks >= ST_LOGLINE_MAX_RANKS) {
        return -1;
    }
    sc->key[out->ranks] = dp;
    sc->prio[out->ranks] = 0;
    out->rank_tokens[out->ranks] = 0;
    return (int)out->ranks++;
}

/* Takes one hit of the scan's engine. Returns 0 or ST_ETOOBIG. */
static int take(struct scan *sc, const struct st_logline_hit *h, const char *line, size_t len,
                uint64_t line_no)
{
    struct st_logline_pool *out = sc->out;
    out->lines++;
    if (h->kind == ST_LOGLINE_LLAMACPP_KV) {
        if (out->lines > 1) {
            return 0; /* a draft model's or an SWA cache's line */
        }
        if (h->streams > ST_LOGLINE_MAX_RANKS) {
            return ST_ETOOBIG;
        }
        for (uint32_t i = 0; i < h->streams; i++) {
            out->rank_tokens[i] = h->tokens;
        }
        out->ranks = h->streams;
        memcpy(out->type_k, h->type_k, sizeof(out->type_k));
        memcpy(out->type_v, h->type_v, sizeof(out->type_v));
        quote(out, line, len, line_no);
        return 0;
    }
    /* SGLang's TP ranks all belong to DP rank 0 unless a DP tag says otherwise. */
    int32_t dp = h->dp;
    if (dp < 0 && h->kind != ST_LOGLINE_VLLM_KV) {
        dp = 0;
    }
    int slot = slot_of(sc, dp);
    if (slot < 0) {
        return ST_ETOOBIG;
    }
    uint8_t prio = h->kind == ST_LOGLINE_SGLANG_ALLOC ? 1 : 2;
    if (prio >= sc->prio[slot]) {
        sc->prio[slot] = prio;
        out->rank_tokens[slot] = h->tokens;
        quote(out, line, len, line_no);
    }
    return 0;
}

int st_logline_scan(const char *log, size_t len, struct st_logline_pool *out)
{
    struct scan sc;
    memset(out, 0, sizeof(*out));
    memset(&sc, 0, sizeof(sc));
    sc.out = out;
    size_t at = 0;
    uint64_t line_no = 0;
    while (at < len) {
        /* A line ends at LF, CR or CRLF. */
        size_t eol = at;
        while (eol < len && log[eol] != '\n' && log[eol] != '\r') {
            eol++;
        }
        line_no++;
        struct st_logline_hit h;
        if (st_logline_parse(log + at, eol - at, &h)) {
            enum st_logline_engine e = engine_of(h.kind);
            if (out->engine == 0) {
                out->engine = e;
            }
            if (e == out->engine) {
                int rc = take(&sc, &h, log + at, eol - at, line_no);
                if (rc != 0) {
                    memset(out, 0, sizeof(*out));
                    return rc;
                }
            }
        }
        at = eol < len && log[eol] == '\r' && eol + 1 < len && log[eol + 1] == '\n' ? eol + 2
                                                                                    : eol + 1;
    }
    if (out->engine == 0) {
        return ST_ENOTFOUND;
    }
    uint64_t total = 0;
    for (uint32_t i = 0; i < out->ranks; i++) {
        if (out->rank_tokens[i] > UINT64_MAX - total) {
            memset(out, 0, sizeof(*out));
            return ST_ETOOBIG;
        }
        total += out->rank_tokens[i];
    }
    out->total_tokens = total;
    return 0;
}
