/*
 * The simulator server's insides, shared by its three files and by nothing else: server.c (the
 * evhttp shell: routes, listening, lifecycle), stream.c (one completion's reply: stream lifetime,
 * batches, write-time tracing, the SSE state machine, fixed-timing content) and modelmode.c (model
 * mode: arrivals, placement, engine submission, content from engine steps, fault timers). The
 * calls go down only: server.c -> modelmode.c -> stream.c. Where the state machine needs model
 * mode (rendering queued steps, the whole body, counting replies) it calls through srv->mops, a
 * table modelmode.c sets, so stream.c never names a model-mode function. One event loop thread.
 */
#ifndef ST_SIM_SERVER_INT_H
#define ST_SIM_SERVER_INT_H

#include <stddef.h>
#include <stdint.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "base/buf.h"
#include "base/json.h"
#include "sim/answer.h"
#include "sim/dialect.h"
#include "sim/live.h"
#include "sim/noise.h"
#include "sim/prompt.h"
#include "sim/server.h"

/* Most bytes and events rendered into one chunk write. */
#define ST_SIM_BATCH_BYTES (256u * 1024u)
#define ST_SIM_BATCH_EVENTS 1024u
/* Request ids longer than this are cut (raw bytes, before JSON quoting). */
#define ST_SIM_MAX_RID_BYTES 200u

struct st_sim_stream;
struct st_sim_admin;

/*
 * What the state machine (stream.c) needs from model mode, set by st_sim_modelmode_start in
 * srv->mops and called only for model streams (st->model): like a connection filter's ops, so the
 * lower file never calls the upper one by name.
 */
struct st_sim_stream_ops {
    /* Renders the queued engine steps (up to one batch) and hands them to evhttp. */
    void (*fill)(struct st_sim_stream *st);
    /* The non-SSE reply: the whole body once the engine finished. st may be freed. */
    void (*send_reply)(struct st_sim_stream *st);
    /* A completion was answered in full (crash_after_requests counts it). */
    void (*replied)(struct st_sim_server *srv);
};

struct st_sim_server {
    struct event_base *base;    /* owned */
    struct evhttp *http;        /* owned */
    struct event *sig_int;      /* owned */
    struct event *sig_term;     /* owned */
    struct st_sim_spec spec;    /* the base every request starts from */
    char *model;                /* owned */
    struct st_sim_trace *trace; /* borrowed, may be NULL */
    uint64_t next_id;           /* the k of the last request (sim-<k>, chatcmpl-sim-<k>) */
    struct st_json doc;         /* scratch: request bodies */
    struct st_buf scratch;      /* scratch: decoded strings, small replies */
    int signalled;
    char addr[80];  /* "HOST:PORT" as bound */
    char scale[32]; /* the X-Sim-Time-Scale value */
    /* Model mode (live == NULL in fixed-timing mode). */
    struct st_sim_live *live;                /* owned */
    struct st_sim_noise noise;               /* staged noise draws (profile perf.*) */
    struct st_sim_admin *admin;              /* owned */
    struct st_profile prof;                  /* copy */
    struct st_sim_model_cfg mc;              /* copy; slot_save_path points at slot_path */
    char *slot_path;                         /* owned */
    struct st_sim_live_timer *ready_timer;   /* owned: start-up ends (virtual) */
    struct st_sim_live_timer *vcrash_timer;  /* owned: crash_after_s (virtual) */
    struct st_sim_live_timer *press_timer;   /* owned: memory pressure on (virtual) */
    struct st_sim_live_timer *unpress_timer; /* owned: memory pressure off (virtual) */
    struct event *crash_timer;               /* owned: the exit, CRASH_GRACE_NS after it fired */
    uint64_t replies;                        /* model-mode completions answered in full */
    uint64_t placed;                         /* model-mode completions placed, in virtual order */
    struct st_sim_stream *streams;           /* model-mode streams, for the keep-alive */
    struct event *keepalive;                 /* owned: every KEEPALIVE_NS */
    const struct st_sim_live_place *cur_pl;  /* the placement being handled (stamps its replies) */
    struct st_sim_live_arr *cur_arr;         /* its arrival, until a stream takes it */
    struct st_sim_prompt prompt;             /* scratch: the prompt being tokenized */
    uint64_t *hashes;                        /* owned scratch: its block hashes */
    uint64_t cap_hashes;
    const struct st_sim_stream_ops *mops; /* model mode: modelmode.c's hooks; NULL otherwise */
    uint32_t *served_port; /* owned: engine.keepalive_close: by fd, the peer port it answered */
    size_t n_served_port;
};

enum st_sim_phase {
    ST_SIM_PH_WAIT_REPLY = 0, /* non-SSE reply (body or fault status) due at due_ns */
    ST_SIM_PH_WAIT_HEADERS,   /* SSE headers due at due_ns */
    ST_SIM_PH_STREAM,         /* SSE events */
    ST_SIM_PH_STALLED,        /* stall_after reached: nothing more is ever written */
    ST_SIM_PH_CLOSING,        /* close_after / reset_after reached: cut once the output drained */
    ST_SIM_PH_ENDED,          /* the reply is ended; evhttp finishes the write */
};

/* One traced event of the batch being built. */
struct st_sim_rec {
    uint32_t kind; /* enum st_sim_kind */
    uint32_t tokens;
    uint64_t bytes;
};

struct st_sim_stream {
    struct st_sim_server *srv;       /* borrowed: outlives every stream */
    struct evhttp_request *req;      /* owned by evhttp, by us only after a detach */
    struct evhttp_connection *evcon; /* owned by evhttp */
    struct event *timer;             /* owned */
    struct evbuffer *out;            /* owned: the batch handed to evhttp */
    struct st_sim_spec spec;
    struct st_sim_req rq;
    struct st_sim_resp resp; /* resp.model borrowed from srv */
    struct st_sim_tmpl tmpl;
    enum st_sim_phase phase;
    int draining;     /* a chunk write is waiting for its drain callback */
    int reset;        /* ST_SIM_PH_CLOSING: RST instead of FIN */
    int role_pending; /* the early role chunk goes into the next batch */
    int usage_on;     /* send the final usage chunk */
    int running;      /* every content chunk carries a running usage (continuous_usage_stats) */
    int reply_status; /* ST_SIM_PH_WAIT_REPLY: 0 = completion body, else the fault status */
    uint64_t arrival_ns;
    uint64_t due_ns;       /* ST_SIM_PH_WAIT_*: when to act */
    uint64_t next_ping_ns; /* next SSE comment; 0 = none */
    uint32_t n_chunks;
    uint32_t next_chunk;     /* content chunks written so far */
    uint64_t seq;            /* trace sequence number of the next event */
    struct st_sim_rec *recs; /* owned, ST_SIM_BATCH_EVENTS of them; NULL without a trace */
    uint32_t nrec;
    /* Write-time tracing of SSE events (only with a trace): the callback on the connection's
     * output buffer counts bytes added and bytes written to the socket; an event is traced when
     * the byte that ends it has been written, at the time of that write. */
    struct evbuffer *conn_out;         /* borrowed: the connection's output buffer */
    struct evbuffer_cb_entry *conn_cb; /* owned registration on conn_out */
    uint64_t out_added;                /* bytes added to conn_out since registration */
    uint64_t out_written;              /* bytes of them written to the socket */
    struct st_sim_pend *pend;          /* owned: traced events waiting for their write */
    uint32_t npend, pend_head, pend_cap;
    size_t rid_len;
    char rid[ST_SIM_MAX_RID_BYTES * 6 + 3]; /* the request id as a JSON string */
    /* Model mode: content comes from engine steps (on_engine). */
    int model;
    int in_engine; /* submitted and not finished: aborted when the stream goes */
    int eng_done;  /* the engine produced its last token */
    int admitted;  /* v_admit is set */
    struct st_sim_mq_ent
        *mq; /* owned ring: the steps delivered and not yet written, oldest first */
    uint32_t mq_head, mq_n, mq_cap;
    uint64_t sent_tokens;             /* content tokens written */
    uint64_t v_admit, v_first, v_end; /* virtual ns: first admission, first token, last token */
    uint64_t drafted, accepted;       /* speculative totals, for llama.cpp's timings */
    struct st_sim_answer answer;      /* owned: the reply text */
    struct st_buf text;               /* owned: scratch for one event */
    struct st_sim_live_arr *arr;      /* owned with the driver: ended or aborted once */
    struct st_sim_live_timer *vtimer; /* owned: a virtual due time (headers, fault replies) */
    uint64_t eng_id;                  /* the engine's id (the placement ordinal) */
    uint64_t v_session;               /* absolute virtual ns of its session's start */
    uint64_t v_arrival;               /* absolute virtual ns it was placed at */
    uint64_t v_event, lag_event;      /* the virtual time and lag of the events being written */
    uint64_t lag_end;                 /* the lag of its last step */
    uint64_t vdue, lag_arrival; /* ST_SIM_PH_WAIT_*: the virtual due time; the placement's lag */
    int64_t late_ns;            /* how late it was placed (X-Sim-Late); -1 on time */
    struct st_sim_stream *all_prev, *all_next; /* srv->streams */
    uint64_t last_write;                       /* real ns of its last chunk write */
};

/* One engine step of a model stream, waiting to be written: its tokens, virtual end and lag. */
struct st_sim_mq_ent {
    uint32_t tokens;
    uint64_t t, lag;
};

/* A traced event waiting for its last byte to reach the socket. */
struct st_sim_pend {
    uint64_t end;  /* out_added offset one past its last byte */
    uint64_t q_ns; /* when its bytes were handed to evhttp */
    uint32_t kind;
    uint32_t tokens;
    uint64_t bytes;
};

/* A batch under construction: one reserved extent of stream->out. */
struct st_sim_batch {
    struct st_sim_stream *st;
    struct evbuffer_iovec vec;
    size_t len;
    size_t cap;  /* 0 until something is reserved */
    size_t hint; /* bytes to reserve at first */
    uint32_t events;
};

static inline uint64_t st_sim_since(uint64_t v, uint64_t start)
{
    return v > start ? v - start : 0;
}

/* ---- stream.c: helpers every route uses ---- */

/* Traces an event whose bytes were handed over and written at one reading of the clock, t_ns
 * (nothing without a trace); *seq is the request's next sequence number. */
void st_sim_stream_trace(struct st_sim_server *srv, const char *rid, size_t rid_len, uint64_t *seq,
                         uint64_t t_ns, enum st_sim_kind kind, uint64_t tokens, uint64_t bytes);
/* Model mode's clock headers (X-Sim-Arrival, X-Sim-Late when late_ns >= 0, X-Sim-Vt when v_whole
 * is not NULL) on req's output headers. */
void st_sim_stream_clock_headers(struct evhttp_request *req, uint64_t v_session, uint64_t v_arrival,
                                 int64_t late_ns, const uint64_t *v_whole, uint64_t lag);
/* Sends a whole JSON reply now; body is copied. */
void st_sim_stream_send_json(const struct st_sim_server *srv, struct evhttp_request *req, int code,
                             const char *body, size_t len);
/* Sends an OpenAI-style (model mode: the dialect's) error reply now, traced as headers + error. */
void st_sim_stream_send_error(struct st_sim_server *srv, struct evhttp_request *req,
                              const char *rid, size_t rid_len, int code, const char *type,
                              const char *message);
/* Applies X-Sim to spec and parses the body into rq (srv->doc holds it after); on error answers
 * 400 and returns -1, else 0. */
int st_sim_stream_parse(struct st_sim_server *srv, struct evhttp_request *req, enum st_sim_api api,
                        const char *rid, size_t rid_len, struct st_sim_spec *spec,
                        struct st_sim_req *rq);

/* ---- stream.c: a stream's life ---- */

/* Allocates a stream for a parsed request (borrowing srv and req); nothing is registered with
 * evhttp yet, so st_sim_stream_free is the way back. */
struct st_sim_stream *st_sim_stream_new(struct st_sim_server *srv, struct evhttp_request *req,
                                        enum st_sim_api api, const struct st_sim_spec *spec,
                                        const struct st_sim_req *rq, uint64_t arrival_ns,
                                        uint64_t id, const char *rid, size_t rid_len);
/* Registers the stream with evhttp, picks its first phase and runs it. status: 0 or the fault
 * status to answer with. From here on evhttp's callbacks free it. */
void st_sim_stream_begin(struct st_sim_stream *st, int status);
/* Frees st and what it owns (aborting its engine request and arrival when still held). */
void st_sim_stream_free(struct st_sim_stream *st);
/* Runs the state machine: writes what is due, arms the next wake-up. st may be freed. */
void st_sim_stream_step(struct st_sim_stream *st);
/* Whether a stall, close or reset fault fires at chunk boundary j (0 or 1); if so, sets the
 * phase (ST_SIM_PH_STALLED or ST_SIM_PH_CLOSING with st->reset). */
int st_sim_stream_cut_at(struct st_sim_stream *st, uint32_t j);
/* The content chunks after which a fault ends the reply, the first of them; UINT64_MAX if none. */
uint64_t st_sim_stream_cut_after(const struct st_sim_spec *s);
/* A model stream's request ends, for its session, at virtual t (once; later calls do nothing). */
void st_sim_stream_end_at(struct st_sim_stream *st, uint64_t t);
/* A fault's end of the reply at virtual t (after a stall: the arrival is aborted instead). */
void st_sim_stream_fault_end(struct st_sim_stream *st, uint64_t t);
/* Doubles a full ring of n items of elem bytes (at least min_cap), oldest first from 0; frees
 * items and returns the new array. */
void *st_sim_stream_ring_grow(void *items, size_t elem, uint32_t n, uint32_t *head, uint32_t *cap,
                              uint32_t min_cap);

/* ---- stream.c: batches ---- */

/* Returns room for need more bytes, or NULL when the batch is full (flush and come back). */
char *st_sim_batch_room(struct st_sim_batch *b, size_t need);
/* Counts bytes just written at the batch's end as one event of kind (traced with tokens). */
void st_sim_batch_note(struct st_sim_batch *b, enum st_sim_kind kind, uint32_t tokens,
                       size_t bytes);
/* Copies data[0..n) to p (room from st_sim_batch_room) as one event of kind. */
void st_sim_batch_fixed(struct st_sim_batch *b, char *p, enum st_sim_kind kind, const char *data,
                        size_t n);
/* Commits the batch and hands it to evhttp as one chunk; the drain callback resumes the stream. */
void st_sim_batch_flush(struct st_sim_batch *b);

/* ---- modelmode.c ---- */

/* Reads the session headers (sync.h) and queues the completion for its virtual arrival (a 400
 * on bad headers). */
void st_sim_modelmode_hold(struct st_sim_server *srv, struct evhttp_request *req,
                           enum st_sim_api api, uint64_t arrival_ns, uint64_t id, const char *rid,
                           size_t rid_len);
/* Creates the engine, the admin routes and the fault timers and sets srv->mops; virtual time
 * starts now. 0 or a negative ST_E* with text in err. */
int st_sim_modelmode_start(struct st_sim_server *srv, const struct st_sim_model_cfg *mc, char *err,
                           size_t errlen) ST_WUR;

#endif
