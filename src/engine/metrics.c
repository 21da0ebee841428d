/*
 * Request records and derived metrics. See metrics.h and docs/metrics.md.
 */
#include "engine/metrics.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/hash.h"
#include "base/xalloc.h"

#define HIST_BITS 8

__extension__ typedef unsigned __int128 st_u128;

static const char *const err_names[ST_ERR__COUNT] = {
    [ST_ERR_NONE] = "none",
    [ST_ERR_CONNECT] = "connect",
    [ST_ERR_TLS] = "tls",
    [ST_ERR_STATUS] = "status",
    [ST_ERR_HEADERS_TIMEOUT] = "headers_timeout",
    [ST_ERR_FIRST_TOKEN_TIMEOUT] = "first_token_timeout",
    [ST_ERR_STALL] = "stall",
    [ST_ERR_TOTAL_TIMEOUT] = "total_timeout",
    [ST_ERR_NOT_SSE] = "not_sse",
    [ST_ERR_PARSE] = "parse",
    [ST_ERR_UTF8] = "utf8",
    [ST_ERR_OVERSIZE] = "oversize",
    [ST_ERR_CLOSED] = "closed",
    [ST_ERR_STREAM_ERROR] = "stream_error",
    [ST_ERR_INTERRUPTED] = "interrupted",
    [ST_ERR_OTHER] = "other",
};

const char *st_err_name(enum st_err e)
{
    if ((unsigned)e >= ST_ERR__COUNT) {
        return "other";
    }
    return err_names[e];
}

void st_err_counts_json(struct st_jw *w, const char *key, const uint64_t *errors)
{
    st_jw_key(w, key);
    st_jw_obj_open(w);
    for (int e = 1; e < ST_ERR__COUNT; e++) {
        if (errors[e]) {
            st_jw_ku64(w, st_err_name((enum st_err)e), errors[e]);
        }
    }
    st_jw_obj_close(w);
}

void st_rec_init(struct st_rec *r)
{
    memset(r, 0, sizeof(*r));
    st_rec_reset(r);
}

void st_rec_reset(struct st_rec *r)
{
    struct st_chunk_pt *chunks = r->chunks;
    uint32_t cap = r->cap;
    memset(r, 0, sizeof(*r));
    r->chunks = chunks;
    r->cap = cap;
    r->prompt_tokens = -1;
    r->completion_tokens = -1;
    r->cached_tokens = -1;
    r->cached_from = ST_CACHED_UNKNOWN;
    r->draft_n = -1;
    r->draft_accepted = -1;
    r->retry_after_s = -1;
    r->input_len = -1;
    r->output_len = -1;
    r->text_hash = ST_HASH_INIT;
    r->v_intended = -1;
    r->v_sent = -1;
    r->v_first = -1;
    r->v_last = -1;
    r->v_end = -1;
    r->sim_late_ns = -1;
}

void st_rec_release(struct st_rec *r)
{
    st_freep(&r->chunks);
    r->cap = 0;
    r->nchunks = 0;
}

void st_rec_add_chunk(struct st_rec *r, uint64_t t_ns, int64_t v_ns, uint32_t bytes, int32_t tokens)
{
    if (r->nchunks == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 16;
        r->chunks = st_xrealloc(r->chunks, (size_t)r->cap * sizeof(*r->chunks));
    }
    r->chunks[r->nchunks++] =
        (struct st_chunk_pt){.t_ns = t_ns, .v_ns = v_ns, .bytes = bytes, .tokens = tokens};
}

int st_rec_split_tokens(const struct st_rec *r, int64_t n_tokens, int32_t *k)
{
    uint32_t c = r->nchunks;
    if (c == 0) {
        return 0;
    }
    int known = 1;
    uint64_t total_bytes = 0;
    for (uint32_t i = 0; i < c; i++) {
        if (r->chunks[i].tokens < 0) {
            known = 0;
        }
        total_bytes += r->chunks[i].bytes;
    }
    if (known) {
        for (uint32_t i = 0; i < c; i++) {
            k[i] = r->chunks[i].tokens;
        }
        return 1;
    }
    if (n_tokens < 0) {
        n_tokens = 0;
    }
    /* Cumulative rounding: chunk i gets floor(N * B_i / B) - floor(N * B_(i-1) / B) tokens, where
     * B_i is the content bytes up to and including chunk i. The counts sum to exactly N, each is
     * within one token of its exact share, and shares that are whole numbers come out exact. */
    uint64_t cum = 0, prev = 0;
    for (uint32_t i = 0; i < c; i++) {
        cum += total_bytes ? r->chunks[i].bytes : 1;
        uint64_t den = total_bytes ? total_bytes : c;
        uint64_t upto = (uint64_t)((st_u128)n_tokens * cum / den);
        k[i] = (int32_t)(upto - prev);
        prev = upto;
    }
    return 0;
}

/* Every histogram of struct st_metrics, for init, release and merge. */
static const size_t hist_offsets[] = {
    offsetof(struct st_metrics, ttft),  offsetof(struct st_metrics, e2e),
    offsetof(struct st_metrics, icl),   offsetof(struct st_metrics, itl),
    offsetof(struct st_metrics, tpot),  offsetof(struct st_metrics, decode),
    offsetof(struct st_metrics, queue),
};

#define N_HISTS (sizeof(hist_offsets) / sizeof(hist_offsets[0]))

static struct st_hist *hist_at(struct st_metrics *m, size_t i)
{
    return (struct st_hist *)((char *)m + hist_offsets[i]);
}

static const struct st_hist *hist_at_c(const struct st_metrics *m, size_t i)
{
    return (const struct st_hist *)((const char *)m + hist_offsets[i]);
}

void st_metrics_init(struct st_metrics *m)
{
    memset(m, 0, sizeof(*m));
    for (size_t i = 0; i < N_HISTS; i++) {
        st_hist_init(hist_at(m, i), HIST_BITS);
    }
    m->window_start = UINT64_MAX;
}

void st_metrics_release(struct st_metrics *m)
{
    for (size_t i = 0; i < N_HISTS; i++) {
        st_hist_release(hist_at(m, i));
    }
    free(m->warm_chunks);
    m->warm_chunks = NULL;
    m->n_warm_chunks = m->cap_warm_chunks = 0;
}

static void warm_chunk_add(struct st_metrics *m, uint64_t t_ns, uint64_t tokens)
{
    if (m->n_warm_chunks == m->cap_warm_chunks) {
        m->cap_warm_chunks = m->cap_warm_chunks ? m->cap_warm_chunks * 2 : 256;
        m->warm_chunks = st_xrealloc(m->warm_chunks, m->cap_warm_chunks * sizeof(*m->warm_chunks));
    }
    m->warm_chunks[m->n_warm_chunks++] = (struct st_warm_chunk){t_ns, tokens};
}

/* The times a record is measured with (docs/metrics.md): the simulator's virtual ones for a
 * virtual-clock record, else the client's; -1 for an event that did not happen. */
struct mtimes {
    int64_t intended, sent, first, last, end;
};

static int64_t wall(uint64_t t)
{
    return t ? (int64_t)t : -1;
}

static void rec_times(const struct st_rec *r, struct mtimes *t)
{
    if (r->virt) {
        *t = (struct mtimes){r->v_intended, r->v_sent, r->v_first, r->v_last, r->v_end};
    } else {
        *t = (struct mtimes){wall(r->t_intended), wall(r->t_sent), wall(r->t_first),
                             wall(r->t_last), wall(r->t_end)};
    }
}

/* Chunk i's time in the record's clock, -1 when unknown. */
static int64_t chunk_t(const struct st_rec *r, uint32_t i)
{
    return r->virt ? r->chunks[i].v_ns : (int64_t)r->chunks[i].t_ns;
}

/* A warm-up request's chunks, each with its share of the completion tokens, for the window. */
static void observe_warm(struct st_metrics *m, const struct st_rec *r)
{
    if (r->nchunks == 0 || r->completion_tokens <= 0) {
        return;
    }
    m->warm_tokens += (uint64_t)r->completion_tokens;
    int32_t small[256];
    int32_t *k = r->nchunks <= 256 ? small : st_xmalloc(r->nchunks * sizeof(*k));
    st_rec_split_tokens(r, r->completion_tokens, k);
    for (uint32_t i = 0; i < r->nchunks; i++) {
        int64_t t = chunk_t(r, i);
        if (t >= 0 && k[i] > 0) {
            warm_chunk_add(m, (uint64_t)t, (uint64_t)k[i]);
        }
    }
    if (k != small) {
        free(k);
    }
}

void st_metrics_window(const struct st_metrics *m, double *window_s, uint64_t *tokens)
{
    *window_s = 0;
    *tokens = m->output_tokens;
    if (m->window_start == UINT64_MAX || m->window_end <= m->window_start) {
        return;
    }
    *window_s = (double)(m->window_end - m->window_start) / 1e9;
    for (size_t i = 0; i < m->n_warm_chunks; i++) {
        const struct st_warm_chunk *c = &m->warm_chunks[i];
        /* (start, end]: a chunk at the start instant ended the request before the first. */
        if (c->t_ns > m->window_start && c->t_ns <= m->window_end) {
            *tokens += c->tokens;
        }
    }
}

static void observe_gaps(struct st_metrics *m, const struct st_rec *r)
{
    if (r->nchunks < 2) {
        return;
    }
    for (uint32_t i = 0; i < r->nchunks; i++) {
        if (chunk_t(r, i) < 0) {
            return; /* a chunk the simulator did not stamp: no gap can be trusted */
        }
    }
    int32_t small[256];
    int32_t *k = r->nchunks <= 256 ? small : st_xmalloc(r->nchunks * sizeof(*k));
    st_rec_split_tokens(r, r->completion_tokens, k);
    uint64_t carry = 0; /* gap time of chunks that were assigned no token */
    for (uint32_t i = 1; i < r->nchunks; i++) {
        int64_t d = chunk_t(r, i) - chunk_t(r, i - 1);
        uint64_t gap = d > 0 ? (uint64_t)d : 0;
        st_hist_record(&m->icl, gap);
        gap += carry;
        if (k[i] <= 0) {
            carry = gap;
            continue;
        }
        carry = 0;
        st_hist_record_n(&m->itl, gap / (uint64_t)k[i], (uint64_t)k[i]);
    }
    if (k != small) {
        free(k);
    }
}

static void observe_clock(struct st_sim_clock *c, const struct st_rec *r)
{
    if (!r->virt) {
        return;
    }
    c->requests++;
    if (r->sim_lag_ns > c->lag_max_ns) {
        c->lag_max_ns = r->sim_lag_ns;
    }
    if (r->sim_late_ns >= 0) {
        c->late++;
        if ((uint64_t)r->sim_late_ns > c->late_max_ns) {
            c->late_max_ns = (uint64_t)r->sim_late_ns;
        }
    }
}

void st_sim_clock_merge(struct st_sim_clock *dst, const struct st_sim_clock *src)
{
    dst->requests += src->requests;
    dst->late += src->late;
    if (src->lag_max_ns > dst->lag_max_ns) {
        dst->lag_max_ns = src->lag_max_ns;
    }
    if (src->late_max_ns > dst->late_max_ns) {
        dst->late_max_ns = src->late_max_ns;
    }
}

int st_sim_clock_valid(const struct st_sim_clock *c, char *why, size_t len)
{
    if (c->late) {
        snprintf(why, len,
                 "the simulator placed %llu request(s) after their declared virtual time (up to "
                 "%.3f s): their timings are not the model's",
                 (unsigned long long)c->late, (double)c->late_max_ns / 1e9);
        return 0;
    }
    if (c->lag_max_ns > ST_SIM_LAG_MAX_NS) {
        snprintf(why, len,
                 "the simulator fell %.3f s of real time behind its clock (at most %.3f s): too "
                 "slow for its --speed on this host",
                 (double)c->lag_max_ns / 1e9, (double)ST_SIM_LAG_MAX_NS / 1e9);
        return 0;
    }
    if (len) {
        why[0] = '\0';
    }
    return 1;
}

void st_sim_clock_json(struct st_jw *w, const struct st_sim_clock *c)
{
    char why[256];
    int valid = st_sim_clock_valid(c, why, sizeof(why));
    st_jw_key(w, "sim_clock");
    st_jw_obj_open(w);
    st_jw_ku64(w, "requests", c->requests);
    st_jw_kf64(w, "lag_max_ms", (double)c->lag_max_ns / 1e6);
    st_jw_ku64(w, "late", c->late);
    st_jw_kf64(w, "late_max_ms", (double)c->late_max_ns / 1e6);
    st_jw_kbool(w, "valid", valid);
    st_jw_key(w, "invalid_reason");
    if (valid) {
        st_jw_null(w);
    } else {
        st_jw_str(w, why);
    }
    st_jw_obj_close(w);
}

int st_metrics_cached_known(const struct st_metrics *m)
{
    return m->ok > 0 && m->cached_requests == m->ok;
}

double st_metrics_hit_rate(const struct st_metrics *m)
{
    if (!st_metrics_cached_known(m) || m->cached_prompt_tokens == 0) {
        return NAN;
    }
    return (double)m->cached_tokens / (double)m->cached_prompt_tokens;
}

const char *st_metrics_cached_from(const struct st_metrics *m)
{
    unsigned f = m->cached_from & ~(1u << ST_CACHED_UNKNOWN);
    if (f == 0) {
        return NULL;
    }
    if (f & (f - 1)) {
        return "mixed";
    }
    int bit = 0;
    while (!(f & (1u << bit))) {
        bit++;
    }
    return st_cached_from_name((enum st_cached_from)bit);
}

void st_rec_spans_of(int64_t intended, int64_t sent, int64_t first, int64_t last, int64_t end,
                     int64_t completion_tokens, struct st_rec_spans *s)
{
    int known = intended >= 0;
    s->queue_ns = known && sent >= intended ? sent - intended : -1;
    s->ttft_ns = known && first >= intended ? first - intended : -1;
    s->e2e_ns = known && end >= intended ? end - intended : -1;
    int decodes = first >= 0 && completion_tokens >= 2 && last > first;
    s->decode_ns = decodes ? last - first : -1;
    s->decode_n = decodes ? completion_tokens - 1 : 0;
}

/* The receipt's clock stamps, in the order it writes them: the client's monotonic ns (t_, 0
 * when the event did not happen) and the simulator's virtual ns (v_, -1 when it sent none). */
enum { S_INTENDED, S_SENT, S_HEADERS, S_FIRST, S_LAST, S_END, S__COUNT };
#define STAMP(name, t, v)                                                                          \
    {                                                                                              \
        "t_" name "_ns", "v_" name "_ns", offsetof(struct st_rec, t), offsetof(struct st_rec, v)   \
    }
static const struct stamp {
    const char *t_key, *v_key; /* v_key NULL: the simulator does not stamp it */
    size_t t_off, v_off;
} stamps[S__COUNT] = {
    [S_INTENDED] = STAMP("intended", t_intended, v_intended),
    [S_SENT] = STAMP("sent", t_sent, v_sent),
    [S_HEADERS] = {"t_headers_ns", NULL, offsetof(struct st_rec, t_headers), 0},
    [S_FIRST] = STAMP("first_content", t_first, v_first),
    [S_LAST] = STAMP("last_content", t_last, v_last),
    [S_END] = STAMP("end", t_end, v_end),
};

/* The stream's counts and sizes, in the order the receipt writes them. */
#define COUNT(m)                                                                                   \
    {                                                                                              \
#m, offsetof(struct st_rec, m)                                                             \
    }
static const struct {
    const char *key;
    size_t off;
} counts[] = {COUNT(events), COUNT(content_chunks), COUNT(comments), COUNT(body_bytes),
              COUNT(content_bytes)};

/* Member key of the line as a time or count; -1 when null, absent or not a whole number >= 0. */
static int64_t read_stamp(const struct st_json *d, int obj, const char *key)
{
    double x = st_json_num(d, obj, key, NULL);
    return x >= 0 && x < 9.2e18 ? (int64_t)x : -1;
}

void st_rec_read(const struct st_json *d, int obj, struct st_rec_view *v)
{
    int ok = st_json_get(d, obj, "ok");
    v->has_ok = ok >= 0;
    v->ok = st_json_type(d, ok) == ST_JSON_TRUE;
    v->warmup = st_json_type(d, st_json_get(d, obj, "warmup")) == ST_JSON_TRUE;
    v->virt = st_json_streq(d, st_json_get(d, obj, "clock"), "virtual");
    v->id = st_json_num(d, obj, "id", NULL);
    if (isnan(v->id)) {
        v->id = -1;
    }
    int64_t t[S__COUNT];
    for (int i = 0; i < S__COUNT; i++) {
        const char *key = v->virt ? stamps[i].v_key : stamps[i].t_key;
        t[i] = key ? read_stamp(d, obj, key) : -1;
    }
    v->intended_ns = t[S_INTENDED];
    v->sent_ns = t[S_SENT];
    v->prompt_tokens = read_stamp(d, obj, "prompt_tokens");
    v->cached_tokens = read_stamp(d, obj, "cached_tokens");
    st_rec_spans_of(t[S_INTENDED], t[S_SENT], t[S_FIRST], t[S_LAST], t[S_END],
                    read_stamp(d, obj, "completion_tokens"), &v->spans);
}

void st_sim_clock_read(const struct st_json *d, int obj, int *valid, char *why, size_t len)
{
    int c = st_json_get(d, obj, "sim_clock");
    *valid = c < 0 || st_json_type(d, st_json_get(d, c, "valid")) != ST_JSON_FALSE;
    if (len > 0) {
        why[0] = '\0';
    }
    if (*valid) {
        return;
    }
    struct st_buf b;
    st_buf_init(&b);
    int w = st_json_get(d, c, "invalid_reason");
    if (st_json_type(d, w) != ST_JSON_STRING || st_json_str(d, w, &b) != 0) {
        st_buf_clear(&b);
        st_buf_puts(&b, "its clock did not hold");
    }
    snprintf(why, len, "%s", st_buf_str(&b));
    st_buf_release(&b);
}

void st_metrics_observe(struct st_metrics *m, const struct st_rec *r)
{
    observe_clock(&m->clock, r);
    if (r->warmup) {
        m->warmup++;
        observe_warm(m, r);
        return;
    }
    struct mtimes t;
    rec_times(r, &t);
    if (t.intended >= 0 && (uint64_t)t.intended < m->window_start) {
        m->window_start = (uint64_t)t.intended;
    }
    if (t.end >= 0 && (uint64_t)t.end > m->window_end) {
        m->window_end = (uint64_t)t.end;
    }
    if (r->err != ST_ERR_NONE) {
        m->failed++;
        m->errors[r->err]++;
        return;
    }
    m->ok++;
    m->errors[ST_ERR_NONE]++;
    if (r->completion_tokens > 0) {
        m->output_tokens += (uint64_t)r->completion_tokens;
    }
    if (r->prompt_tokens > 0) {
        m->prompt_tokens += (uint64_t)r->prompt_tokens;
    }
    if (r->cached_tokens >= 0) {
        m->cached_tokens += (uint64_t)r->cached_tokens;
        m->cached_requests++;
        m->cached_prompt_tokens += r->prompt_tokens > 0 ? (uint64_t)r->prompt_tokens : 0;
        m->cached_from |= 1u << r->cached_from;
    }
    if (r->tokens_estimated) {
        m->estimated++;
    }
    struct st_rec_spans sp;
    st_rec_spans_of(t.intended, t.sent, t.first, t.last, t.end, r->completion_tokens, &sp);
    if (sp.queue_ns >= 0) {
        st_hist_record(&m->queue, (uint64_t)sp.queue_ns);
    }
    if (sp.ttft_ns >= 0) {
        st_hist_record(&m->ttft, (uint64_t)sp.ttft_ns);
    }
    if (sp.e2e_ns >= 0) {
        st_hist_record(&m->e2e, (uint64_t)sp.e2e_ns);
    }
    if (sp.decode_n > 0) {
        uint64_t span = (uint64_t)sp.decode_ns, n1 = (uint64_t)sp.decode_n;
        st_hist_record(&m->tpot, span / n1);
        double mtps = (double)n1 * 1e12 / (double)span; /* milli-tokens per second */
        st_hist_record(&m->decode, (uint64_t)llround(mtps));
    }
    observe_gaps(m, r);
}

void st_metrics_merge(struct st_metrics *dst, const struct st_metrics *src)
{
    for (size_t i = 0; i < N_HISTS; i++) {
        st_hist_merge(hist_at(dst, i), hist_at_c(src, i));
    }
    dst->ok += src->ok;
    dst->failed += src->failed;
    dst->warmup += src->warmup;
    for (int i = 0; i < ST_ERR__COUNT; i++) {
        dst->errors[i] += src->errors[i];
    }
    dst->output_tokens += src->output_tokens;
    dst->prompt_tokens += src->prompt_tokens;
    dst->cached_tokens += src->cached_tokens;
    dst->cached_requests += src->cached_requests;
    dst->cached_prompt_tokens += src->cached_prompt_tokens;
    dst->cached_from |= src->cached_from;
    dst->estimated += src->estimated;
    dst->warm_tokens += src->warm_tokens;
    for (size_t i = 0; i < src->n_warm_chunks; i++) {
        warm_chunk_add(dst, src->warm_chunks[i].t_ns, src->warm_chunks[i].tokens);
    }
    if (src->window_start < dst->window_start) {
        dst->window_start = src->window_start;
    }
    if (src->window_end > dst->window_end) {
        dst->window_end = src->window_end;
    }
    st_sim_clock_merge(&dst->clock, &src->clock);
}

static void write_time(struct st_jw *w, const char *key, uint64_t t)
{
    st_jw_key(w, key);
    if (t) {
        st_jw_u64(w, t);
    } else {
        st_jw_null(w);
    }
}

static void write_opt_i64(struct st_jw *w, const char *key, int64_t v)
{
    st_jw_key(w, key);
    if (v >= 0) {
        st_jw_i64(w, v);
    } else {
        st_jw_null(w);
    }
}

/* A span in ms, null when unknown (-1). */
static void write_span_ms(struct st_jw *w, const char *key, int64_t ns)
{
    st_jw_key(w, key);
    if (ns >= 0) {
        st_jw_f64(w, (double)ns / 1e6);
    } else {
        st_jw_null(w);
    }
}

void st_rec_write_json(const struct st_rec *r, struct st_jw *w, int chunk_times, const char *text,
                       size_t text_len, const char *tag_json, size_t tag_len)
{
    char hex[17];
    st_jw_obj_open(w);
    st_jw_ku64(w, "id", r->id);
    st_jw_kbool(w, "warmup", r->warmup);
    st_jw_kbool(w, "ok", r->err == ST_ERR_NONE);
    st_jw_key(w, "error");
    if (r->err == ST_ERR_NONE) {
        st_jw_null(w);
    } else {
        st_jw_str(w, st_err_name(r->err));
    }
    if (r->err_msg[0]) {
        st_jw_kstr(w, "error_message", r->err_msg);
    }
    st_jw_ki64(w, "status", r->status);
    st_jw_key(w, "http");
    switch (r->http_version) {
    case 10:
        st_jw_str(w, "1.0");
        break;
    case 11:
        st_jw_str(w, "1.1");
        break;
    case 20:
        st_jw_str(w, "2");
        break;
    case 30:
        st_jw_str(w, "3");
        break;
    default:
        st_jw_null(w);
        break;
    }
    if (r->retry_after_s >= 0) {
        st_jw_ki64(w, "retry_after_s", r->retry_after_s);
    }
    if (r->tls_unverified) {
        st_jw_kbool(w, "tls_verified", 0); /* --insecure, recorded in every receipt */
    }
    const char *base = (const char *)r;
    for (int i = 0; i < S__COUNT; i++) {
        uint64_t t;
        memcpy(&t, base + stamps[i].t_off, sizeof(t));
        write_time(w, stamps[i].t_key, t);
    }
    if (r->virt) {
        /* The simulator's clock: these are what the metrics below count with. */
        st_jw_kstr(w, "clock", "virtual");
        for (int i = 0; i < S__COUNT; i++) {
            int64_t t;
            if (stamps[i].v_key) {
                memcpy(&t, base + stamps[i].v_off, sizeof(t));
                write_opt_i64(w, stamps[i].v_key, t);
            }
        }
        st_jw_kf64(w, "sim_lag_ms", (double)r->sim_lag_ns / 1e6);
        if (r->sim_late_ns >= 0) {
            st_jw_kf64(w, "sim_late_ms", (double)r->sim_late_ns / 1e6);
        }
    }
    struct mtimes t;
    rec_times(r, &t);
    struct st_rec_spans sp;
    st_rec_spans_of(t.intended, t.sent, t.first, t.last, t.end, r->completion_tokens, &sp);
    write_span_ms(w, "ttft_ms", sp.ttft_ns);
    write_span_ms(w, "e2e_ms", sp.e2e_ns);
    st_jw_key(w, "tpot_ms");
    if (sp.decode_n > 0) {
        st_jw_f64(w, (double)sp.decode_ns / 1e6 / (double)sp.decode_n);
    } else {
        st_jw_null(w);
    }
    write_opt_i64(w, "input_len", r->input_len);
    write_opt_i64(w, "output_len", r->output_len);
    write_opt_i64(w, "prompt_tokens", r->prompt_tokens);
    write_opt_i64(w, "completion_tokens", r->completion_tokens);
    write_opt_i64(w, "cached_tokens", r->cached_tokens);
    if (r->cached_tokens >= 0) {
        st_jw_kstr(w, "cached_tokens_from", st_cached_from_name(r->cached_from));
    }
    st_jw_kbool(w, "tokens_estimated", r->tokens_estimated);
    if (r->retried_fresh) {
        st_jw_kbool(w, "retried_fresh", 1);
    }
    if (r->draft_n >= 0) {
        st_jw_ki64(w, "draft_n", r->draft_n);
        st_jw_ki64(w, "draft_accepted", r->draft_accepted);
    }
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        uint64_t v;
        memcpy(&v, base + counts[i].off, sizeof(v));
        st_jw_ku64(w, counts[i].key, v);
    }
    st_jw_kbool(w, "done", r->saw_done);
    st_jw_key(w, "finish_reason");
    if (r->finish_reason[0]) {
        st_jw_str(w, r->finish_reason);
    } else {
        st_jw_null(w);
    }
    st_hash_hex(r->body_hash, hex);
    st_jw_kstr(w, "body_hash", hex);
    st_hash_hex(r->text_hash, hex);
    st_jw_kstr(w, "text_hash", hex);
    if (chunk_times) {
        /* [offset from t_sent in ns, content bytes, tokens or -1] per content chunk, and on the
         * virtual clock its virtual ns since the session's start (-1 unstamped). */
        st_jw_key(w, "chunks");
        st_jw_arr_open(w);
        for (uint32_t i = 0; i < r->nchunks; i++) {
            st_jw_arr_open(w);
            st_jw_u64(w, r->chunks[i].t_ns - r->t_sent);
            st_jw_u64(w, r->chunks[i].bytes);
            st_jw_i64(w, r->chunks[i].tokens);
            if (r->virt) {
                st_jw_i64(w, r->chunks[i].v_ns);
            }
            st_jw_arr_close(w);
        }
        st_jw_arr_close(w);
    }
    if (tag_json && tag_len) {
        st_jw_key(w, "workload");
        st_jw_raw(w, tag_json, tag_len);
    }
    if (text) {
        st_jw_key(w, "text");
        st_jw_strn(w, text, text_len);
    }
    st_jw_obj_close(w);
}

void st_metrics_write_latency(struct st_jw *w, const char *key, const struct st_hist *h,
                              double scale)
{
    st_jw_key(w, key);
    st_jw_obj_open(w);
    st_jw_ku64(w, "count", h->count);
    if (h->count == 0) {
        const char *names[] = {"mean", "p50", "p90", "p99", "min", "max"};
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            st_jw_key(w, names[i]);
            st_jw_null(w);
        }
    } else {
        double k = scale / 1e6;
        st_jw_kf64(w, "mean", st_hist_mean(h) * k);
        st_jw_kf64(w, "p50", (double)st_hist_quantile(h, 0.50) * k);
        st_jw_kf64(w, "p90", (double)st_hist_quantile(h, 0.90) * k);
        st_jw_kf64(w, "p99", (double)st_hist_quantile(h, 0.99) * k);
        st_jw_kf64(w, "min", (double)h->min * k);
        st_jw_kf64(w, "max", (double)h->max * k);
    }
    st_jw_obj_close(w);
}
