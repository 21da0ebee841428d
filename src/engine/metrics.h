/*
 * The per-request record (everything a receipt holds) and the metrics derived from it, with
 * their aggregation into per-worker histograms. Pure: times come in the record, nothing here reads
 * a clock. A record timed by the simulator's virtual clock (virt) is measured in its virtual
 * times; every other record in the client's. Every metric is defined in docs/metrics.md; the
 * comments below give start event, end event and unit.
 */
#ifndef ST_ENGINE_METRICS_H
#define ST_ENGINE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "base/json.h"
#include "proto/chunk.h"
#include "stats/hist.h"

/* Why a request failed. The names (st_err_name) appear in receipts and summaries. */
enum st_err {
    ST_ERR_NONE = 0,
    ST_ERR_CONNECT,             /* could not connect (refused, unreachable, connect timeout) */
    ST_ERR_TLS,                 /* TLS handshake or certificate failure */
    ST_ERR_STATUS,              /* HTTP status other than 200 */
    ST_ERR_HEADERS_TIMEOUT,     /* no response headers within --timeout-headers */
    ST_ERR_FIRST_TOKEN_TIMEOUT, /* no content within --timeout-first-token */
    ST_ERR_STALL,               /* no event for --timeout-idle after the headers */
    ST_ERR_TOTAL_TIMEOUT,       /* request longer than --timeout-total */
    ST_ERR_NOT_SSE,             /* 200 on a streaming request but the body is not SSE */
    ST_ERR_PARSE,               /* an event's JSON is invalid, or a non-stream body is */
    ST_ERR_UTF8,                /* invalid UTF-8 inside a JSON string */
    ST_ERR_OVERSIZE,            /* one event or body over its bound (1 MiB / 64 MiB) */
    ST_ERR_CLOSED,              /* the body ended or the connection broke before completion */
    ST_ERR_STREAM_ERROR,        /* the server sent an error object */
    ST_ERR_INTERRUPTED,         /* aborted by SIGINT/SIGTERM after the grace period */
    ST_ERR_OTHER,               /* anything else libcurl reports (message says what) */
    ST_ERR__COUNT,
};

const char *st_err_name(enum st_err e);
/* Writes key and {NAME: COUNT} for every failure class with a count (errors[ST_ERR__COUNT],
 * errors[ST_ERR_NONE] left out): the receipts', summaries' and sweeps' one form. */
void st_err_counts_json(struct st_jw *w, const char *key, const uint64_t *errors);

/* One content chunk: arrival time, content bytes, tokens if the server said (-1 if not), and
 * the simulator's virtual time of it (ns since the session's start; -1 if it said none). */
struct st_chunk_pt {
    uint64_t t_ns;
    int64_t v_ns;
    uint32_t bytes;
    int32_t tokens;
};

struct st_rec {
    uint64_t id; /* issue order across the run (0-based) */
    int warmup;  /* excluded from statistics */
    /* Monotonic ns; 0 means the event did not happen. */
    uint64_t t_intended; /* when the schedule wanted the request sent */
    uint64_t t_sent;     /* when it was handed to libcurl */
    uint64_t t_headers;  /* first response header line received */
    uint64_t t_first;    /* first chunk with non-empty content */
    uint64_t t_last;     /* last chunk with non-empty content */
    uint64_t t_end;      /* body ended (or the request was aborted) */
    long status;         /* HTTP status, 0 if none */
    int http_version;    /* 10, 11, 20 or 30 as negotiated; 0 if unknown */
    enum st_err err;
    char err_msg[256];
    int64_t prompt_tokens;     /* usage.prompt_tokens, -1 if never sent */
    int64_t completion_tokens; /* usage.completion_tokens, else the chunk count (estimated) */
    int64_t cached_tokens;     /* prompt tokens from the prefix cache, -1 if the wire said none */
    enum st_cached_from cached_from; /* where cached_tokens came from (proto/chunk.h) */
    int tokens_estimated;            /* completion_tokens counted from chunks, not from usage */
    int retried_fresh; /* sent again on a fresh connection: a kept-alive one died unanswered */
    int64_t draft_n;   /* llama.cpp timings.draft_n, -1 if absent */
    int64_t draft_accepted;
    int64_t retry_after_s;   /* the Retry-After header in delta-seconds, -1 if absent or a date */
    int tls_unverified;      /* --insecure: TLS certificates were not verified for this request */
    uint64_t events;         /* SSE events with data */
    uint64_t comments;       /* SSE comment lines (keep-alive pings) */
    uint64_t content_chunks; /* events with non-empty content */
    uint64_t body_bytes;
    uint64_t content_bytes;
    int saw_done;
    int finished;
    char finish_reason[24];
    uint64_t body_hash; /* FNV-1a of the request body */
    uint64_t text_hash; /* FNV-1a of the concatenated content text */
    int64_t input_len;  /* requested input length in tokens */
    int64_t output_len; /* requested max output tokens */
    /*
     * Against the simulator's virtual clock (virt set; docs/metrics.md, "Virtual time"): the
     * same events in its virtual ns since the run's session started, from its stamps; -1 when
     * it said none. Metrics then count with these; the t_ fields stay the client's own clock.
     */
    int virt;
    int64_t v_intended;  /* closed loop: the end of the slot's previous request; open: schedule */
    int64_t v_sent;      /* where the simulator placed the request (X-Sim-Arrival) */
    int64_t v_first;     /* the first content chunk's stamp */
    int64_t v_last;      /* the last content chunk's stamp */
    int64_t v_end;       /* the last event's stamp (X-Sim-Vt for a reply sent whole) */
    uint64_t sim_lag_ns; /* most real ns the simulator was late with one of its events */
    int64_t sim_late_ns; /* virtual ns it was placed after its declared time (X-Sim-Late); -1 */
    struct st_chunk_pt *chunks; /* owned; nchunks content chunks in arrival order */
    uint32_t nchunks;
    uint32_t cap;
};

void st_rec_init(struct st_rec *r);
/* Clears every field but keeps the chunk storage for reuse. */
void st_rec_reset(struct st_rec *r);
void st_rec_release(struct st_rec *r);
void st_rec_add_chunk(struct st_rec *r, uint64_t t_ns, int64_t v_ns, uint32_t bytes,
                      int32_t tokens);

/*
 * Splits n_tokens over the record's content chunks: the server's per-chunk counts when every
 * chunk has one, else in proportion to content bytes by cumulative rounding (the counts sum to
 * n_tokens and each is within one token of its exact share). k must hold r->nchunks entries.
 * Returns 1 when the counts came from the server.
 */
int st_rec_split_tokens(const struct st_rec *r, int64_t n_tokens, int32_t *k);

/*
 * How well the simulator kept its virtual clock over some requests (docs/metrics.md, "Virtual
 * time"): the requests it timed, its worst lag (real ns it came after its paced time) and the
 * requests it placed after their declared time. Warmup requests count too.
 */
struct st_sim_clock {
    uint64_t requests;
    uint64_t lag_max_ns;
    uint64_t late;
    uint64_t late_max_ns;
};

/* The most real time the simulator may fall behind its pacing before a load is invalid: past it,
 * wall-clock timeouts and watchers no longer see what the virtual clock says. */
#define ST_SIM_LAG_MAX_NS (1000ull * 1000 * 1000)

void st_sim_clock_merge(struct st_sim_clock *dst, const struct st_sim_clock *src);
/* 1 when figures timed by this clock hold (no request placed late, lag within
 * ST_SIM_LAG_MAX_NS); else 0 with a sentence in why. */
int st_sim_clock_valid(const struct st_sim_clock *c, char *why, size_t len);
/* Writes "sim_clock": {requests, lag_max_ms, late, late_max_ms, valid, invalid_reason}. */
void st_sim_clock_json(struct st_jw *w, const struct st_sim_clock *c);
/*
 * Reads back what st_sim_clock_json wrote as the member "sim_clock" of object obj in d (a
 * child's result JSON: bench, sweep and probe write it). *valid is 1 when the member is absent
 * (not timed by the simulator) or its "valid" is not false; else 0 with its "invalid_reason" in
 * why (a fixed sentence when there is none). why is always terminated.
 */
void st_sim_clock_read(const struct st_json *d, int obj, int *valid, char *why, size_t len);

/* A content chunk of a warm-up request: when it came (the record's clock) and its tokens. */
struct st_warm_chunk {
    uint64_t t_ns;
    uint64_t tokens;
};

/* Aggregates of the measured requests of one worker (or of a whole run, after merging). */
struct st_metrics {
    struct st_hist ttft;   /* ns: intended send -> first content chunk */
    struct st_hist e2e;    /* ns: intended send -> end of body */
    struct st_hist icl;    /* ns: gap between successive content chunks */
    struct st_hist itl;    /* ns per token: chunk gap / tokens in the chunk, one sample a token */
    struct st_hist tpot;   /* ns: (last - first content) / (output tokens - 1), one per request */
    struct st_hist decode; /* milli-tokens/s: (output tokens - 1) / (last - first content) */
    struct st_hist queue;  /* ns: intended send -> actual send (client-side wait) */
    uint64_t ok;
    uint64_t failed;
    uint64_t warmup; /* requests excluded as warmup (ok or not) */
    uint64_t errors[ST_ERR__COUNT];
    uint64_t output_tokens; /* sum of completion_tokens of measured ok requests */
    uint64_t prompt_tokens;
    /* Cached prompt tokens, over the measured ok requests whose count the server gave
     * (cached_requests of them, cached_prompt_tokens their prompt tokens); cached_from has bit
     * (1 << enum st_cached_from) set for each source seen. Unknown is not zero: see
     * st_metrics_cached_known. */
    uint64_t cached_tokens;
    uint64_t cached_requests;
    uint64_t cached_prompt_tokens;
    unsigned cached_from;
    uint64_t estimated;    /* measured ok requests whose tokens were estimated */
    uint64_t window_start; /* min t_intended of measured requests, UINT64_MAX when none */
    uint64_t window_end;   /* max t_end of measured requests, 0 when none */
    uint64_t warm_tokens;  /* completion tokens of the warm-up requests (ok or not) */
    struct st_warm_chunk *warm_chunks; /* owned: the warm-up requests' content chunks */
    size_t n_warm_chunks;
    size_t cap_warm_chunks;
    struct st_sim_clock clock; /* how well the simulator kept its virtual clock */
};

void st_metrics_init(struct st_metrics *m);
void st_metrics_release(struct st_metrics *m);
/* Adds one finished request. Warmup records only count in m->warmup. */
void st_metrics_observe(struct st_metrics *m, const struct st_rec *r);
void st_metrics_merge(struct st_metrics *dst, const struct st_metrics *src);
/*
 * The measurement window (docs/metrics.md, "Window"): from the first measured request's intended
 * send to the last measured request's end, in the metrics' clock (a chunk counts when it came
 * after the start and not after the end). *window_s is its length (0 when
 * no request was measured); *tokens the output tokens received inside it: every measured ok
 * request's, plus the warm-up requests' chunks that arrived inside it (they share the server).
 */
void st_metrics_window(const struct st_metrics *m, double *window_s, uint64_t *tokens);
/* 1 when every measured ok request (at least one) said how many of its prompt tokens were
 * cached, so m->cached_tokens is the run's total; 0 when any did not: the total is unknown. */
int st_metrics_cached_known(const struct st_metrics *m);
/* cached_tokens / prompt tokens of the requests that gave both; NaN when not known (above). */
double st_metrics_hit_rate(const struct st_metrics *m);
/* The wire expression the cached counts came from (st_cached_from_name), "mixed" when they came
 * from several, NULL when none was given. */
const char *st_metrics_cached_from(const struct st_metrics *m);

/*
 * Writes the record as one JSON object (a receipt) through w. chunk_times adds the per-chunk
 * arrival offsets; text (may be NULL) adds the content text; tag_json (may be NULL), a JSON object
 * from the workload, is copied as "workload".
 */
void st_rec_write_json(const struct st_rec *r, struct st_jw *w, int chunk_times, const char *text,
                       size_t text_len, const char *tag_json, size_t tag_len);

/*
 * A request's spans on its record's clock, in ns, -1 when unknown: the one definition of TTFT,
 * E2E and TPOT (docs/metrics.md) that the engine's histograms, the receipt writer and the
 * receipt reader all use. queue = sent - intended, ttft = first - intended, e2e = end -
 * intended (each known when both ends are and the span is not negative); decode = last - first
 * over decode_n = completion_tokens - 1 intervals, known when decode_n >= 1 and last > first
 * (TPOT = decode_ns / decode_n). Times are -1 when the event did not happen.
 */
struct st_rec_spans {
    int64_t queue_ns, ttft_ns, e2e_ns, decode_ns;
    int64_t decode_n; /* 0 when decode_ns is unknown */
};
void st_rec_spans_of(int64_t intended, int64_t sent, int64_t first, int64_t last, int64_t end,
                     int64_t completion_tokens, struct st_rec_spans *s);

/*
 * What a receipt says of its request's outcome and spans, read back from one line that
 * st_rec_write_json wrote (the campaign reads its steps' receipts with it). The spans are on the
 * record's clock (the simulator's virtual ns when the line says "clock": "virtual", else the
 * client's monotonic ns) and come from st_rec_spans_of over the line's stamps, so they are the
 * line's ttft_ms, e2e_ms and tpot_ms before rounding to ms.
 */
struct st_rec_view {
    int has_ok; /* 0: the line has no "ok" (not one of these: src/qual writes its own) */
    int ok;     /* "ok" is true */
    int warmup; /* "warmup" is true */
    int virt;   /* "clock" is "virtual" */
    double id;  /* -1 when absent */
    int64_t intended_ns, sent_ns; /* the stamps on the line's clock; -1 when absent (a client
                                   * stamp of an event that did not happen reads 0) */
    int64_t prompt_tokens;        /* -1 when absent or null */
    int64_t cached_tokens;        /* -1 when absent or null (the server did not say) */
    struct st_rec_spans spans;
};

/* Reads the receipt object at token obj of d (borrowed) into *v. Never fails: what is missing
 * reads as stated above. */
void st_rec_read(const struct st_json *d, int obj, struct st_rec_view *v);

/*
 * Writes {"mean","p50","p90","p99","min","max","count"} of h in ms (h holds ns), each multiplied by
 * scale (the simulator's time scale for virtual times; 1 for real ones).
 */
void st_metrics_write_latency(struct st_jw *w, const char *key, const struct st_hist *h,
                              double scale);

#endif
