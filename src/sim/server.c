/*
 * The simulator's evhttp shell. See server.h; the state machines are drawn in
 * docs/internals/sim.md.
 *
 * One struct stream per completion request, alive from the request callback until evhttp reports
 * the reply complete (on_complete) or the connection gone (on_conn_close), whichever comes first;
 * each of those two callbacks unregisters the other. A stream owns one timer and one evbuffer in
 * which a batch of due events is rendered; a batch is handed to evhttp in one chunk write, and the
 * next batch waits until evhttp reports the output drained, so memory per stream stays bounded
 * by one batch (BATCH_BYTES) whatever the client's read speed.
 *
 * A stream's content comes from one of two sources: fixed timing (chunk j is due at arrival +
 * ttft + j * itl) or, in model mode, the engine (live.c hands over each step's tokens through
 * on_engine, which queues them as one chunk per step and runs the state machine).
 */
#include "sim/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/hash.h"
#include "base/json.h"
#include "base/xalloc.h"
#include "sim/admin.h"
#include "sim/answer.h"
#include "sim/dialect.h"
#include "sim/live.h"
#include "sim/noise.h"
#include "sim/model/tok.h"
#include "sim/prompt.h"

/* Most bytes and events rendered into one chunk write. */
#define BATCH_BYTES (256u * 1024u)
#define BATCH_EVENTS 1024u
/* Largest request body accepted (evhttp answers 413 beyond it). */
#define MAX_BODY_BYTES (64u << 20)
/* Request ids longer than this are cut (raw bytes, before JSON quoting). */
#define MAX_RID_BYTES 200u
/* How often a closing stream checks whether evhttp's output has drained. */
#define CLOSE_POLL_NS (1 * ST_NS_PER_MS)
/* Most bytes the bufferevent writes in one go (libevent's default is 16 KiB). */
#define MAX_SINGLE_WRITE (1u << 20)
/* Model mode: the real time after which a stream that has written nothing gets a keep-alive
 * comment (a request queued or prefilling for a long virtual time looks alive to the client's
 * timers), checked four times as often. */
#define KEEPALIVE_NS (500 * ST_NS_PER_MS)
/* Model mode: real time between the last reply of crash_after_requests and the exit, so that
 * reply reaches the client. */
#define CRASH_GRACE_NS (20 * ST_NS_PER_MS)

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
    struct stream *streams;                  /* model-mode streams, for the keep-alive */
    struct event *keepalive;                 /* owned: every KEEPALIVE_NS */
    const struct st_sim_live_place *cur_pl;  /* the placement being handled (stamps its replies) */
    struct st_sim_live_arr *cur_arr;         /* its arrival, until a stream takes it */
    struct st_sim_prompt prompt;             /* scratch: the prompt being tokenized */
    uint64_t *hashes;                        /* owned scratch: its block hashes */
    uint64_t cap_hashes;
};

enum phase {
    PH_WAIT_REPLY = 0, /* non-SSE reply (body or fault status) due at due_ns */
    PH_WAIT_HEADERS,   /* SSE headers due at due_ns */
    PH_STREAM,         /* SSE events */
    PH_STALLED,        /* stall_after reached: nothing more is ever written */
    PH_CLOSING,        /* close_after / reset_after reached: cut once the output drained */
    PH_ENDED,          /* the reply is ended; evhttp finishes the write */
};

/* One traced event of the batch being built. */
struct rec {
    uint32_t kind; /* enum st_sim_kind */
    uint32_t tokens;
    uint64_t bytes;
};

struct stream {
    struct st_sim_server *srv;       /* borrowed: outlives every stream */
    struct evhttp_request *req;      /* owned by evhttp, by us only after a detach */
    struct evhttp_connection *evcon; /* owned by evhttp */
    struct event *timer;             /* owned */
    struct evbuffer *out;            /* owned: the batch handed to evhttp */
    struct st_sim_spec spec;
    struct st_sim_req rq;
    struct st_sim_resp resp; /* resp.model borrowed from srv */
    struct st_sim_tmpl tmpl;
    enum phase phase;
    int draining;     /* a chunk write is waiting for its drain callback */
    int reset;        /* PH_CLOSING: RST instead of FIN */
    int role_pending; /* the early role chunk goes into the next batch */
    int usage_on;     /* send the final usage chunk */
    int running;      /* every content chunk carries a running usage (continuous_usage_stats) */
    int reply_status; /* PH_WAIT_REPLY: 0 = completion body, else the fault status */
    uint64_t arrival_ns;
    uint64_t due_ns;       /* PH_WAIT_*: when to act */
    uint64_t next_ping_ns; /* next SSE comment; 0 = none */
    uint32_t n_chunks;
    uint32_t next_chunk; /* content chunks written so far */
    uint64_t seq;        /* trace sequence number of the next event */
    struct rec *recs;    /* owned, BATCH_EVENTS of them; NULL without a trace */
    uint32_t nrec;
    /* Write-time tracing of SSE events (only with a trace): the callback on the connection's
     * output buffer counts bytes added and bytes written to the socket; an event is traced when
     * the byte that ends it has been written, at the time of that write. */
    struct evbuffer *conn_out;         /* borrowed: the connection's output buffer */
    struct evbuffer_cb_entry *conn_cb; /* owned registration on conn_out */
    uint64_t out_added;                /* bytes added to conn_out since registration */
    uint64_t out_written;              /* bytes of them written to the socket */
    struct pend *pend;                 /* owned: traced events waiting for their write */
    uint32_t npend, pend_head, pend_cap;
    size_t rid_len;
    char rid[MAX_RID_BYTES * 6 + 3]; /* the request id as a JSON string */
    /* Model mode: content comes from engine steps (on_engine). */
    int model;
    int in_engine;     /* submitted and not finished: aborted when the stream goes */
    int eng_done;      /* the engine produced its last token */
    int admitted;      /* v_admit is set */
    struct mq_ent *mq; /* owned ring: the steps delivered and not yet written, oldest first */
    uint32_t mq_head, mq_n, mq_cap;
    uint64_t sent_tokens;               /* content tokens written */
    uint64_t v_admit, v_first, v_end;   /* virtual ns: first admission, first token, last token */
    uint64_t drafted, accepted;         /* speculative totals, for llama.cpp's timings */
    struct st_sim_answer answer;        /* owned: the reply text */
    struct st_buf text;                 /* owned: scratch for one event */
    struct st_sim_live_arr *arr;        /* owned with the driver: ended or aborted once */
    struct st_sim_live_timer *vtimer;   /* owned: a virtual due time (headers, fault replies) */
    uint64_t eng_id;                    /* the engine's id (the placement ordinal) */
    uint64_t v_session;                 /* absolute virtual ns of its session's start */
    uint64_t v_arrival;                 /* absolute virtual ns it was placed at */
    uint64_t v_event, lag_event;        /* the virtual time and lag of the events being written */
    uint64_t lag_end;                   /* the lag of its last step */
    uint64_t vdue, lag_arrival;         /* PH_WAIT_*: the virtual due time; the placement's lag */
    int64_t late_ns;                    /* how late it was placed (X-Sim-Late); -1 on time */
    struct stream *all_prev, *all_next; /* srv->streams */
    uint64_t last_write;                /* real ns of its last chunk write */
};

/* One engine step of a model stream, waiting to be written: its tokens, virtual end and lag. */
struct mq_ent {
    uint32_t tokens;
    uint64_t t, lag;
};

/* A traced event waiting for its last byte to reach the socket. */
struct pend {
    uint64_t end;  /* out_added offset one past its last byte */
    uint64_t q_ns; /* when its bytes were handed to evhttp */
    uint32_t kind;
    uint32_t tokens;
    uint64_t bytes;
};

/* A batch under construction: one reserved extent of stream->out. */
struct batch {
    struct stream *st;
    struct evbuffer_iovec vec;
    size_t len;
    size_t cap;  /* 0 until something is reserved */
    size_t hint; /* bytes to reserve at first */
    uint32_t events;
};

static void step(struct stream *st);

/* ---- small helpers ---- */

/* An event whose bytes were handed over and written at one reading of the clock, t_ns. */
static void trace_event(struct st_sim_server *srv, const char *rid, size_t rid_len, uint64_t *seq,
                        uint64_t t_ns, enum st_sim_kind kind, uint64_t tokens, uint64_t bytes)
{
    if (srv->trace) {
        st_sim_trace_event(srv->trace, rid, rid_len, (*seq)++, t_ns, t_ns, kind, tokens, bytes);
    }
}

/* Renders the request id (X-Request-Id, cut to MAX_RID_BYTES, or "sim-<k>") as a JSON string. */
static size_t make_rid(struct evhttp_request *req, uint64_t id, struct st_buf *tmp, char *out,
                       size_t cap)
{
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "X-Request-Id");
    char own[32];
    if (!h) {
        snprintf(own, sizeof(own), "sim-%llu", (unsigned long long)id);
        h = own;
    }
    size_t n = strlen(h);
    st_buf_clear(tmp);
    st_json_quote(tmp, h, n > MAX_RID_BYTES ? MAX_RID_BYTES : n);
    size_t len = tmp->len < cap ? tmp->len : cap;
    memcpy(out, tmp->data, len);
    return len;
}

static void add_common_headers(const struct st_sim_server *srv, struct evhttp_request *req,
                               const char *content_type)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", content_type);
    evhttp_add_header(h, "X-Sim-Time-Scale", srv->scale);
    if (srv->live) {
        evhttp_add_header(h, "X-Sim-Clock", "virtual");
    }
}

static uint64_t since(uint64_t v, uint64_t start)
{
    return v > start ? v - start : 0;
}

/*
 * Model mode: where a completion was placed (X-Sim-Arrival, virtual ns since its session's
 * start), how late when it could not be placed at its declared time (X-Sim-Late, late_ns >= 0)
 * and, for a reply sent whole, when it was produced (X-Sim-Vt: "NS LAG", LAG the real ns the
 * simulator was late). docs/sim.md, "Virtual time".
 */
static void clock_headers(struct evhttp_request *req, uint64_t v_session, uint64_t v_arrival,
                          int64_t late_ns, const uint64_t *v_whole, uint64_t lag)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    char v[64];
    snprintf(v, sizeof(v), "%llu", (unsigned long long)since(v_arrival, v_session));
    evhttp_add_header(h, "X-Sim-Arrival", v);
    if (late_ns >= 0) {
        /* Declared for an earlier time than the simulator could still place it at. */
        snprintf(v, sizeof(v), "%lld", (long long)late_ns);
        evhttp_add_header(h, "X-Sim-Late", v);
    }
    if (v_whole) {
        snprintf(v, sizeof(v), "%llu %llu", (unsigned long long)since(*v_whole, v_session),
                 (unsigned long long)lag);
        evhttp_add_header(h, "X-Sim-Vt", v);
    }
}

/* Sends a whole JSON reply now. body is copied. */
static void send_json(const struct st_sim_server *srv, struct evhttp_request *req, int code,
                      const char *body, size_t len)
{
    st_sim_http_send(req, code, "application/json", body, len, srv->scale, srv->live != NULL);
}

/* Sends an OpenAI-style error reply now, tracing it as headers + error. */
static void send_error(struct st_sim_server *srv, struct evhttp_request *req, const char *rid,
                       size_t rid_len, int code, const char *type, const char *message)
{
    st_buf_clear(&srv->scratch);
    if (srv->live) {
        st_sim_dialect_error(&srv->scratch, srv->prof.engine.dialect, code, message);
    } else {
        st_sim_render_error(&srv->scratch, message, type, code);
    }
    uint64_t seq = 0, t = st_clock_mono_ns();
    trace_event(srv, rid, rid_len, &seq, t, ST_SIM_KIND_HEADERS, 0, 0);
    trace_event(srv, rid, rid_len, &seq, t, ST_SIM_KIND_ERROR, 0, srv->scratch.len);
    if (srv->cur_pl) {
        /* An answer at the request's placement: it was produced then. */
        const struct st_sim_live_place *pl = srv->cur_pl;
        clock_headers(req, pl->session_start, pl->t_ns, pl->late ? (int64_t)pl->late_ns : -1,
                      &pl->t_ns, pl->lag_ns);
    }
    send_json(srv, req, code, srv->scratch.data, srv->scratch.len);
}

/* Per connection: no Nagle delay, big writes, and no evhttp read/write timeouts (a stalled or
 * slow-reading client keeps its stream for as long as it wants). */
static void tune_connection(struct evhttp_connection *evcon)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
    int one = 1;
    (void)setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    (void)bufferevent_set_max_single_write(bev, MAX_SINGLE_WRITE);
    (void)bufferevent_set_timeouts(bev, NULL, NULL);
}

/* ---- stream lifetime ---- */

static void stream_free(struct stream *st)
{
    struct st_sim_live *live = st->srv->live;
    if (st->in_engine) {
        /* The client left (or a fault cut it) before the end: the engine forgets it. */
        st_sim_live_abort(live, st->eng_id);
    }
    if (st->arr) {
        /* Gone before its end: its stream is no longer synchronized. */
        struct st_sim_live_arr *a = st->arr;
        st->arr = NULL;
        st_sim_live_arr_abort(live, a);
    }
    if (st->model) {
        struct st_sim_server *srv = st->srv;
        if (st->all_prev) {
            st->all_prev->all_next = st->all_next;
        } else if (srv->streams == st) {
            srv->streams = st->all_next;
        }
        if (st->all_next) {
            st->all_next->all_prev = st->all_prev;
        }
        free(st->mq);
        st_sim_live_timer_free(live, st->vtimer);
        st_sim_answer_release(&st->answer);
        st_buf_release(&st->text);
    }
    if (st->conn_cb) {
        /* Events never written (the peer went away) are not traced: they were not sent. */
        evbuffer_remove_cb_entry(st->conn_out, st->conn_cb);
    }
    free(st->pend);
    event_free(st->timer);
    evbuffer_free(st->out);
    st_sim_tmpl_release(&st->tmpl);
    free(st->recs);
    free(st);
}

/* evhttp finished writing the reply: the request is about to be freed by evhttp. */
static void on_complete(struct evhttp_request *req, void *arg)
{
    struct stream *st = arg;
    (void)req;
    evhttp_connection_set_closecb(st->evcon, NULL, NULL);
    stream_free(st);
}

/*
 * The connection is going away (peer closed, write error, server shutdown). If evhttp detached the
 * request from it (the reply was not finished), the request is ours to free.
 */
static void on_conn_close(struct evhttp_connection *evcon, void *arg)
{
    struct stream *st = arg;
    (void)evcon;
    if (evhttp_request_get_connection(st->req) == NULL) {
        evhttp_request_free(st->req);
    }
    stream_free(st);
}

static void arm(struct stream *st, uint64_t due_ns)
{
    uint64_t now = st_clock_mono_ns();
    uint64_t d = due_ns > now ? due_ns - now : 0;
    /* Round up to whole microseconds so the timer never fires before the due time. */
    uint64_t us = (d + 999) / 1000;
    struct timeval tv = {.tv_sec = (time_t)(us / 1000000), .tv_usec = (suseconds_t)(us % 1000000)};
    (void)event_base_update_cache_time(st->srv->base);
    evtimer_add(st->timer, &tv);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    step(arg);
}

static void on_drain(struct evhttp_connection *evcon, void *arg)
{
    struct stream *st = arg;
    (void)evcon;
    st->draining = 0;
    step(st);
}

/* ---- write-time tracing ---- */

#define ST_ASSERT_SIM(cond)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static void on_conn_out(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    struct stream *st = arg;
    (void)buf;
    st->out_added += info->n_added;
    if (info->n_deleted == 0) {
        return;
    }
    /* Called from the drain that follows a successful write(2): the bytes are in the kernel. */
    st->out_written += info->n_deleted;
    uint64_t t = st_clock_mono_ns();
    while (st->npend > 0) {
        struct pend *p = &st->pend[st->pend_head];
        if (p->end > st->out_written) {
            break;
        }
        if (st->srv->trace) {
            st_sim_trace_event(st->srv->trace, st->rid, st->rid_len, st->seq++, p->q_ns, t,
                               (enum st_sim_kind)p->kind, p->tokens, p->bytes);
        }
        st->pend_head = (st->pend_head + 1) % st->pend_cap;
        st->npend--;
    }
}

/* Starts counting the connection's output bytes (before the response headers are queued). */
static void watch_output(struct stream *st)
{
    if (!st->srv->trace) {
        return;
    }
    struct bufferevent *bev = evhttp_connection_get_bufferevent(st->evcon);
    st->conn_out = bufferevent_get_output(bev);
    /* Bytes already queued (an earlier reply on this connection) are written first. */
    st->out_added = evbuffer_get_length(st->conn_out);
    st->out_written = 0;
    st->conn_cb = evbuffer_add_cb(st->conn_out, on_conn_out, st);
}

/* Doubles a full ring of n items of elem bytes (at least min_cap), oldest first from 0. */
static void *ring_grow(void *items, size_t elem, uint32_t n, uint32_t *head, uint32_t *cap,
                       uint32_t min_cap)
{
    uint32_t ncap = *cap ? *cap * 2 : min_cap;
    char *q = st_xmalloc((size_t)ncap * elem);
    for (uint32_t i = 0; i < n; i++) {
        memcpy(q + i * elem, (char *)items + ((*head + i) % *cap) * elem, elem);
    }
    free(items);
    *cap = ncap;
    *head = 0;
    return q;
}

static void pend_push(struct stream *st, uint64_t end, uint64_t q_ns, const struct rec *r)
{
    if (st->npend == st->pend_cap) {
        st->pend = ring_grow(st->pend, sizeof(*st->pend), st->npend, &st->pend_head, &st->pend_cap,
                             BATCH_EVENTS);
    }
    st->pend[(st->pend_head + st->npend) % st->pend_cap] = (struct pend){
        .end = end, .q_ns = q_ns, .kind = r->kind, .tokens = r->tokens, .bytes = r->bytes};
    st->npend++;
}

/* ---- batches ---- */

/* Returns room for need more bytes, or NULL when the batch is full (flush and come back). */
static char *batch_room(struct batch *b, size_t need)
{
    if (b->len + need <= b->cap) {
        return (char *)b->vec.iov_base + b->len;
    }
    if (b->len != 0) {
        return NULL;
    }
    size_t cap = need > b->hint ? need : b->hint;
    if (evbuffer_reserve_space(b->st->out, (ev_ssize_t)cap, &b->vec, 1) != 1) {
        abort(); /* out of memory */
    }
    b->cap = cap;
    return (char *)b->vec.iov_base;
}

static void batch_note(struct batch *b, enum st_sim_kind kind, uint32_t tokens, size_t bytes)
{
    struct stream *st = b->st;
    if (st->recs) {
        st->recs[st->nrec++] = (struct rec){.kind = kind, .tokens = tokens, .bytes = bytes};
    }
    b->len += bytes;
    b->events++;
}

static void batch_fixed(struct batch *b, char *p, enum st_sim_kind kind, const char *data, size_t n)
{
    memcpy(p, data, n);
    batch_note(b, kind, 0, n);
}

/* Commits the batch and hands it to evhttp as one chunk; the drain callback resumes the stream. */
static void batch_flush(struct batch *b)
{
    struct stream *st = b->st;
    if (b->len == 0) {
        return;
    }
    b->vec.iov_len = b->len;
    if (evbuffer_commit_space(st->out, &b->vec, 1) != 0) {
        abort(); /* impossible: the extent was reserved just above */
    }
    st->draining = 1;
    st->last_write = st_clock_mono_ns();
    if (st->conn_cb) {
        /* evhttp frames the chunk as "<hex>\r\n" data "\r\n": find where each event ends. */
        uint64_t before = st->out_added;
        size_t data_len = b->len;
        evhttp_send_reply_chunk_with_cb(st->req, st->out, on_drain, st);
        uint64_t added = st->out_added - before;
        /* The buffer callbacks run synchronously (evhttp does not defer them); were they deferred,
         * the frame could not be located, so nothing is guessed. */
        ST_ASSERT_SIM(added >= data_len + 2);
        uint64_t end = before + (added - data_len - 2);
        for (uint32_t i = 0; i < st->nrec; i++) {
            end += st->recs[i].bytes;
            pend_push(st, end, st->last_write, &st->recs[i]);
        }
        st->nrec = 0;
        b->len = 0;
        b->cap = 0;
        return;
    }
    uint64_t t = st_clock_mono_ns();
    evhttp_send_reply_chunk_with_cb(st->req, st->out, on_drain, st);
    for (uint32_t i = 0; i < st->nrec; i++) {
        trace_event(st->srv, st->rid, st->rid_len, &st->seq, t, (enum st_sim_kind)st->recs[i].kind,
                    st->recs[i].tokens, st->recs[i].bytes);
    }
    st->nrec = 0;
    b->len = 0;
    b->cap = 0;
}

/* Bytes to reserve for the events due by now (a guess; batch_room grows it for big events). */
static size_t batch_hint(const struct stream *st, uint64_t now)
{
    unsigned flags = ST_SIM_EV_LAST | (st->running ? ST_SIM_EV_USAGE : 0);
    size_t per = st_sim_tmpl_content_max(&st->tmpl, st->spec.tokens_per_chunk, flags);
    uint64_t left = st->n_chunks - st->next_chunk;
    uint64_t due0 = st_sim_chunk_due_ns(&st->spec, st->arrival_ns, st->next_chunk);
    uint64_t count = 0;
    if (now >= due0) {
        count = st->spec.itl_ns ? (now - due0) / st->spec.itl_ns + 1 : left;
        count = count < left ? count : left;
    }
    uint64_t hint = count * per + st->tmpl.role.len + st->tmpl.usage.len + 256;
    return hint < BATCH_BYTES ? (size_t)hint : BATCH_BYTES;
}

/* ---- the SSE state machine ---- */

static unsigned content_flags(const struct stream *st, uint32_t j)
{
    uint64_t nth = (uint64_t)j + 1;
    unsigned f = 0;
    f |= j + 1 == st->n_chunks ? ST_SIM_EV_LAST : 0;
    f |= nth == st->spec.malformed_at ? ST_SIM_EV_MALFORMED : 0;
    f |= nth == st->spec.oversize_at ? ST_SIM_EV_OVERSIZE : 0;
    f |= nth == st->spec.bad_utf8_at ? ST_SIM_EV_BAD_UTF8 : 0;
    f |= st->running ? ST_SIM_EV_USAGE : 0;
    return f;
}

/*
 * Adds the events that follow j content chunks when a fault or the end of the content decides
 * them. Returns 1 when the batch must stop here (phase changed or no room), 0 to go on.
 */
static int add_boundary(struct stream *st, struct batch *b, uint32_t j)
{
    const struct st_sim_spec *s = &st->spec;
    if (j == s->stall_after) {
        st->phase = PH_STALLED;
        return 1;
    }
    if (j == s->close_after || j == s->reset_after) {
        st->phase = PH_CLOSING;
        st->reset = j != s->close_after;
        return 1;
    }
    int error = j == s->error_at;
    if (!error && j < st->n_chunks) {
        return 0;
    }
    const char *first = error ? ST_SIM_EVENT_ERROR : st->tmpl.usage.data;
    size_t first_len = error ? strlen(ST_SIM_EVENT_ERROR) : st->tmpl.usage.len;
    int with_first = error || st->usage_on;
    size_t done_len = s->done ? strlen(ST_SIM_EVENT_DONE) : 0;
    size_t need = (with_first ? first_len : 0) + done_len;
    /* With no usage and no [DONE] nothing is added, but the stream still ends here. */
    char *p = need ? batch_room(b, need) : NULL;
    if (need && !p) {
        return 1;
    }
    if (with_first) {
        batch_fixed(b, p, error ? ST_SIM_KIND_ERROR : ST_SIM_KIND_USAGE, first, first_len);
        p += first_len;
    }
    if (s->done) {
        batch_fixed(b, p, ST_SIM_KIND_DONE, ST_SIM_EVENT_DONE, done_len);
    }
    st->phase = PH_ENDED;
    return 1;
}

/* Adds content chunk j (with the role chunk first when it is due with it). 0 when full. */
static int add_content(struct stream *st, struct batch *b, uint32_t j)
{
    int role = st->role_pending;
    unsigned flags = content_flags(st, j);
    uint32_t ntok = st_sim_chunk_tokens(st->rq.n_tokens, st->spec.tokens_per_chunk, j);
    size_t role_len = role ? st->tmpl.role.len : 0;
    char *p = batch_room(b, role_len + st_sim_tmpl_content_max(&st->tmpl, ntok, flags));
    if (!p) {
        return 0;
    }
    if (role) {
        batch_fixed(b, p, ST_SIM_KIND_ROLE, st->tmpl.role.data, role_len);
        p += role_len;
        st->role_pending = 0;
    }
    uint64_t tok0 = (uint64_t)j * st->spec.tokens_per_chunk;
    size_t n = st_sim_tmpl_content(&st->tmpl, p, tok0, ntok, flags, tok0 + ntok);
    /* The last chunk carries finish_reason too, but it is traced as content like the others. */
    batch_note(b, ST_SIM_KIND_CONTENT, ntok, n);
    st->next_chunk = j + 1;
    return 1;
}

/* Renders every event due by now (up to one batch) and hands them to evhttp. */
static void fill(struct stream *st, uint64_t now)
{
    struct batch b = {.st = st, .hint = batch_hint(st, now)};
    for (;;) {
        if (b.events + 3 > BATCH_EVENTS) {
            break;
        }
        if (st->role_pending && st->spec.role_chunk == ST_SIM_ROLE_EARLY) {
            char *p = batch_room(&b, st->tmpl.role.len);
            if (!p) {
                break;
            }
            batch_fixed(&b, p, ST_SIM_KIND_ROLE, st->tmpl.role.data, st->tmpl.role.len);
            st->role_pending = 0;
        }
        uint32_t j = st->next_chunk;
        if (add_boundary(st, &b, j)) {
            break;
        }
        uint64_t due = st_sim_chunk_due_ns(&st->spec, st->arrival_ns, j);
        if (due > now) {
            if (j == 0 && st->next_ping_ns && st->next_ping_ns <= now) {
                char *p = batch_room(&b, strlen(ST_SIM_EVENT_COMMENT));
                if (!p) {
                    break;
                }
                batch_fixed(&b, p, ST_SIM_KIND_COMMENT, ST_SIM_EVENT_COMMENT,
                            strlen(ST_SIM_EVENT_COMMENT));
                st->next_ping_ns += st->spec.ping_ns;
                if (st->next_ping_ns >= due) {
                    st->next_ping_ns = 0;
                }
                continue;
            }
            break;
        }
        if (!add_content(st, &b, j)) {
            break;
        }
    }
    batch_flush(&b);
}

/* ---- model mode: content from engine steps ---- */

/* Queues one step's tokens, produced at virtual t with lag. Every step stays its own chunk with
 * its own time, however slowly the client reads (an unpaced simulator runs far ahead of any
 * reader); a step carries at least one token, so a stream never queues more than its output. */
static void mq_push(struct stream *st, uint32_t tokens, uint64_t t, uint64_t lag)
{
    if (st->mq_n == st->mq_cap) {
        st->mq = ring_grow(st->mq, sizeof(*st->mq), st->mq_n, &st->mq_head, &st->mq_cap, 16);
    }
    st->mq[(st->mq_head + st->mq_n) % st->mq_cap] =
        (struct mq_ent){.tokens = tokens, .t = t, .lag = lag};
    st->mq_n++;
}

/* Bytes to reserve for the queued steps (a guess; batch_room grows it for big events). */
static size_t model_hint(const struct stream *st)
{
    uint64_t tokens = 0;
    for (uint32_t i = 0; i < st->mq_n; i++) {
        tokens += st->mq[(st->mq_head + i) % st->mq_cap].tokens;
    }
    uint64_t hint = st_sim_tmpl_content_max(&st->tmpl, 0, ST_SIM_EV_LAST | ST_SIM_EV_USAGE) *
                        (uint64_t)st->mq_n +
                    tokens * 8 + st->answer.text.len * 6 + st->tmpl.role.len + 2048 +
                    40 * ((uint64_t)st->mq_n + 4);
    return hint < BATCH_BYTES ? (size_t)hint : BATCH_BYTES;
}

/* Model mode: the line that stamps an event with its virtual time (ns since the session's start)
 * and its lag (real ns): "vt: NS LAG\n", an SSE field other clients ignore (docs/sim.md). */
static size_t stamp(const struct stream *st, char *out, size_t cap)
{
    int n =
        snprintf(out, cap, "vt: %llu %llu\n", (unsigned long long)since(st->v_event, st->v_session),
                 (unsigned long long)st->lag_event);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

/* batch_fixed with the stamp line vt[0..vl) in front. */
static void batch_stamped(struct batch *b, char *p, enum st_sim_kind kind, const char *vt,
                          size_t vl, const char *data, size_t n)
{
    memcpy(p, vt, vl);
    memcpy(p + vl, data, n);
    batch_note(b, kind, 0, vl + n);
}

/* The length of the next SSE event of text[0..len) ("data: ...\n\n"). */
static size_t event_len(const char *text, size_t len)
{
    const char *end = memmem(text, len, "\n\n", 2);
    return end ? (size_t)(end - text) + 2 : len;
}

/* Bytes text[0..len) takes with the stamp line (vl bytes) in front of each event. */
static size_t stamped_len(const char *text, size_t len, size_t vl)
{
    size_t total = 0;
    for (size_t i = 0; i < len;) {
        size_t n = event_len(text + i, len - i);
        total += vl + n;
        i += n;
    }
    return total;
}

/* Copies each SSE event of text[0..len) to p with the stamp in front, noting it for the trace. */
static void put_events(struct batch *b, char *p, const char *text, size_t len, const char *vt,
                       size_t vl)
{
    size_t i = 0;
    while (i < len) {
        size_t n = event_len(text + i, len - i);
        const char *ev = text + i;
        enum st_sim_kind kind = ST_SIM_KIND_CONTENT; /* a separate finish chunk: 0 tokens */
        if (n >= 12 && memcmp(ev, "data: [DONE]", 12) == 0) {
            kind = ST_SIM_KIND_DONE;
        } else if (n >= 15 && memcmp(ev, "data: {\"error\"", 15) == 0) {
            kind = ST_SIM_KIND_ERROR;
        } else if (memmem(ev, n, "\"choices\":[]", 12)) {
            kind = ST_SIM_KIND_USAGE;
        }
        batch_stamped(b, p, kind, vt, vl, ev, n);
        p += vl + n;
        i += n;
    }
}

static void fill_timings(const struct stream *st, struct st_sim_timings *t)
{
    memset(t, 0, sizeof(*t));
    t->cache_n = st->resp.cached_tokens;
    t->prompt_n = st->resp.prompt_tokens - st->resp.cached_tokens;
    t->prompt_ms = st->v_first > st->v_admit ? (double)(st->v_first - st->v_admit) / 1e6 : 0;
    t->predicted_n = st->resp.n_tokens;
    t->predicted_ms = st->v_end > st->v_first ? (double)(st->v_end - st->v_first) / 1e6 : 0;
    t->draft_n = st->drafted;
    t->draft_n_accepted = st->accepted;
}

/* Faults at chunk boundary j, then the end (finish, usage, timings, [DONE] in the dialect's
 * shape). Returns 1 when the batch must stop here, as add_boundary does. */
static int add_model_boundary(struct stream *st, struct batch *b, uint32_t j)
{
    const struct st_sim_spec *s = &st->spec;
    if (j == s->stall_after) {
        st->phase = PH_STALLED;
        return 1;
    }
    if (j == s->close_after || j == s->reset_after) {
        st->phase = PH_CLOSING;
        st->reset = j != s->close_after;
        return 1;
    }
    int error = j == s->error_at;
    if (!error && !(st->eng_done && st->mq_n == 0)) {
        return 0;
    }
    struct st_buf *t = &st->text;
    st_buf_clear(t);
    if (error) {
        st_buf_puts(t, ST_SIM_EVENT_ERROR);
        if (s->done) {
            st_buf_puts(t, ST_SIM_EVENT_DONE);
        }
    } else {
        struct st_sim_timings tm;
        fill_timings(st, &tm);
        struct st_sim_ending e = {.usage_on = st->usage_on, .done = s->done, .timings = &tm};
        st_sim_dialect_tail(t, st->srv->prof.engine.dialect, &st->resp, &e);
    }
    if (t->len) {
        if (!error) {
            st->v_event = st->v_end;
            st->lag_event = st->lag_end;
        }
        char vt[64];
        size_t vl = stamp(st, vt, sizeof(vt));
        char *p = batch_room(b, stamped_len(t->data, t->len, vl));
        if (!p) {
            return 1;
        }
        put_events(b, p, t->data, t->len, vt, vl);
    }
    st->phase = PH_ENDED;
    return 1;
}

/* Adds the oldest queued step as content chunk j (role chunk first when due with it). */
static int add_model_content(struct stream *st, struct batch *b, uint32_t j)
{
    const struct mq_ent *q = &st->mq[st->mq_head];
    uint32_t k = q->tokens;
    uint64_t nth = (uint64_t)j + 1;
    int last = st->eng_done && st->mq_n == 1 &&
               st_sim_dialect_finish_on_content(st->srv->prof.engine.dialect);
    unsigned flags = (last ? ST_SIM_EV_LAST : 0) |
                     (nth == st->spec.malformed_at ? ST_SIM_EV_MALFORMED : 0) |
                     (nth == st->spec.oversize_at ? ST_SIM_EV_OVERSIZE : 0) |
                     (nth == st->spec.bad_utf8_at ? ST_SIM_EV_BAD_UTF8 : 0) |
                     (st->running ? ST_SIM_EV_USAGE : 0);
    st_buf_clear(&st->text);
    st_sim_answer_render(&st->answer, st->sent_tokens, k, &st->text);
    st->v_event = q->t;
    st->lag_event = q->lag;
    char vt[64];
    size_t vl = stamp(st, vt, sizeof(vt));
    int role = st->role_pending;
    size_t role_len = role ? vl + st->tmpl.role.len : 0;
    char *p =
        batch_room(b, role_len + vl + st_sim_tmpl_content_text_max(&st->tmpl, st->text.len, flags));
    if (!p) {
        return 0;
    }
    if (role) {
        batch_stamped(b, p, ST_SIM_KIND_ROLE, vt, vl, st->tmpl.role.data, st->tmpl.role.len);
        p += role_len;
        st->role_pending = 0;
    }
    memcpy(p, vt, vl);
    size_t n = st_sim_tmpl_content_text(&st->tmpl, p + vl, st->text.data, st->text.len, flags,
                                        st->sent_tokens + k);
    batch_note(b, ST_SIM_KIND_CONTENT, k, vl + n);
    st->mq_head = (st->mq_head + 1) % st->mq_cap;
    st->mq_n--;
    st->sent_tokens += k;
    st->next_chunk = j + 1;
    return 1;
}

/* Renders every queued step (up to one batch) and hands them to evhttp. */
static void fill_model(struct stream *st)
{
    struct batch b = {.st = st, .hint = model_hint(st)};
    for (;;) {
        if (b.events + 4 > BATCH_EVENTS) {
            break;
        }
        if (st->role_pending && st->spec.role_chunk == ST_SIM_ROLE_EARLY) {
            char vt[64];
            size_t vl = stamp(st, vt, sizeof(vt));
            char *p = batch_room(&b, vl + st->tmpl.role.len);
            if (!p) {
                break;
            }
            batch_stamped(&b, p, ST_SIM_KIND_ROLE, vt, vl, st->tmpl.role.data, st->tmpl.role.len);
            st->role_pending = 0;
        }
        uint32_t j = st->next_chunk;
        if (add_model_boundary(st, &b, j) || st->mq_n == 0) {
            break;
        }
        if (!add_model_content(st, &b, j)) {
            break;
        }
    }
    batch_flush(&b);
}

static void on_crash_timer(evutil_socket_t fd, short what, void *arg)
{
    struct st_sim_server *srv = arg;
    char why[96];
    (void)fd;
    (void)what;
    if (srv->mc.faults.crash_after_requests &&
        srv->replies >= srv->mc.faults.crash_after_requests) {
        snprintf(why, sizeof(why), "after %llu requests", (unsigned long long)srv->replies);
    } else {
        snprintf(why, sizeof(why), "after %g s", srv->mc.faults.crash_after_s);
    }
    st_buf_clear(&srv->scratch);
    st_sim_dialect_crash(&srv->scratch, &srv->prof, why);
    if (srv->mc.crash_cb) {
        srv->mc.crash_cb(srv->mc.crash_arg, srv->scratch.data);
    }
    abort(); /* the crash callback never returns; without one, crash for real */
}

/* A model-mode completion was answered in full: crash_after_requests counts it. */
static void count_reply(struct st_sim_server *srv)
{
    srv->replies++;
    if (srv->mc.faults.crash_after_requests &&
        srv->replies == srv->mc.faults.crash_after_requests) {
        struct timeval tv = {.tv_sec = 0, .tv_usec = (suseconds_t)(CRASH_GRACE_NS / 1000)};
        evtimer_add(srv->crash_timer, &tv);
    }
}

/* The non-SSE model-mode reply: the whole body once the engine finished. st may be freed. */
static void send_model_reply(struct stream *st)
{
    struct st_sim_server *srv = st->srv;
    struct st_buf *b = &srv->scratch;
    struct st_sim_timings tm;
    fill_timings(st, &tm);
    struct st_sim_ending e = {.usage_on = st->spec.usage != ST_SIM_USAGE_NEVER, .timings = &tm};
    st_buf_clear(b);
    st_sim_dialect_body(b, srv->prof.engine.dialect, &st->resp, &st->answer, &e);
    st->phase = PH_ENDED;
    clock_headers(st->req, st->v_session, st->v_arrival, st->late_ns, &st->v_end, st->lag_end);
    uint64_t t = st_clock_mono_ns();
    trace_event(srv, st->rid, st->rid_len, &st->seq, t, ST_SIM_KIND_HEADERS, 0, 0);
    trace_event(srv, st->rid, st->rid_len, &st->seq, t, ST_SIM_KIND_FINISH, st->resp.n_tokens,
                b->len);
    count_reply(srv);
    send_json(srv, st->req, 200, b->data, b->len);
}

/* The content chunks after which a fault ends the reply (stall, close, reset or an error event),
 * the first of them; UINT64_MAX when none. */
static uint64_t cut_after(const struct st_sim_spec *s)
{
    uint64_t n = s->stall_after;
    n = s->close_after < n ? s->close_after : n;
    n = s->reset_after < n ? s->reset_after : n;
    n = s->error_at < n ? s->error_at : n;
    return n;
}

/* A model stream's request ends, for its session, at virtual t (its stream's next request may
 * arrive then). Called in virtual-time order: at the step that makes it (on_engine), or at its
 * placement; never later, when its bytes happen to be written. */
static void end_at(struct stream *st, uint64_t t)
{
    struct st_sim_live_arr *a = st->arr;
    if (a) {
        st->arr = NULL;
        st_sim_live_arr_end(st->srv->live, a, t);
    }
}

/*
 * A fault's end of the reply at virtual t. A close, reset or error event reaches the client at
 * once, and its next request follows at t. After a stall only the client's own timeout (real
 * time) ends the request: its stream stops constraining the simulation, and its next request is
 * placed when it comes, late (docs/sim.md, "Virtual time").
 */
static void fault_end(struct stream *st, uint64_t t)
{
    const struct st_sim_spec *s = &st->spec;
    struct st_sim_live_arr *a = st->arr;
    if (a && s->stall_after == cut_after(s)) {
        st->arr = NULL;
        st_sim_live_arr_abort(st->srv->live, a);
        return;
    }
    end_at(st, t);
}

/* live.c hands over this request's part of a step. st may be freed inside step(). */
static void on_engine(void *arg, const struct st_batch_event *ev, uint64_t start_ns,
                      uint64_t end_ns, uint64_t lag_ns)
{
    struct stream *st = arg;
    if (ev->admitted) {
        /* The usage reports the cache hit of the last admission (a preempted request is
         * admitted again and may hit its own published blocks). */
        st->resp.cached_tokens = ev->cached_tokens;
        if (!st->admitted) {
            st->admitted = 1;
            st->v_admit = start_ns;
        }
    }
    if (ev->tokens) {
        if (ev->first) {
            st->v_first = end_ns;
        }
        mq_push(st, ev->tokens, end_ns, lag_ns);
        st->drafted += ev->drafted;
        st->accepted += ev->accepted;
        if (st->rq.stream && !st->spec.nonsse &&
            (uint64_t)st->next_chunk + st->mq_n == cut_after(&st->spec)) {
            /* A fault ends the reply after this chunk, whenever it is written. */
            fault_end(st, end_ns);
        }
    }
    if (ev->finished) {
        st->eng_done = 1;
        st->in_engine = 0;
        st->v_end = end_ns;
        st->lag_end = lag_ns;
        /* Its last token exists now, whenever its bytes get written: a closed loop's next
         * request arrives at this virtual time. */
        end_at(st, end_ns);
    }
    if (ev->tokens || ev->finished) {
        step(st);
    }
}

/* Ends the chunked reply. st may be freed inside evhttp_send_reply_end; do not touch it after. */
/* A model stream whose reply ends (or is cut) and that did not end yet: at its last event. */
static void end_early(struct stream *st)
{
    end_at(st, st->v_event);
}

static void end_reply(struct stream *st)
{
    if (st->model && st->eng_done) {
        count_reply(st->srv);
    }
    end_early(st);
    if (st->conn_cb) {
        /* Traced when the terminating chunk "0\r\n\r\n" (5 bytes) has been written. */
        struct rec r = {.kind = ST_SIM_KIND_CLOSE, .tokens = 0, .bytes = 0};
        pend_push(st, st->out_added + 5, st_clock_mono_ns(), &r);
    } else {
        uint64_t t = st_clock_mono_ns();
        trace_event(st->srv, st->rid, st->rid_len, &st->seq, t, ST_SIM_KIND_CLOSE, 0, 0);
    }
    evhttp_send_reply_end(st->req);
}

/* Cuts the connection once evhttp's output is empty: FIN without the last chunk, or RST. */
static void cut_connection(struct stream *st)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(st->evcon);
    if (evbuffer_get_length(bufferevent_get_output(bev)) > 0) {
        arm(st, st_clock_mono_ns() + CLOSE_POLL_NS);
        return;
    }
    int fd = bufferevent_getfd(bev);
    uint64_t t = st_clock_mono_ns();
    trace_event(st->srv, st->rid, st->rid_len, &st->seq, t, ST_SIM_KIND_CLOSE, 0, 0);
    if (st->reset) {
        /* Linger 0 plus a disconnect (connect to AF_UNSPEC) makes the kernel send RST now,
         * before evhttp's shutdown(SHUT_WR) could send a FIN; the fd stays libevent's. */
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        struct sockaddr unspec = {.sa_family = AF_UNSPEC};
        (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        (void)connect(fd, &unspec, sizeof(unspec));
    }
    struct evhttp_connection *evcon = st->evcon;
    evhttp_connection_set_closecb(evcon, NULL, NULL);
    end_early(st);
    stream_free(st);
    /* Frees the request too (it is still queued on the connection). */
    evhttp_connection_free(evcon);
}

static void start_stream(struct stream *st)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(st->req);
    add_common_headers(st->srv, st->req, "text/event-stream");
    evhttp_add_header(h, "Cache-Control", "no-cache");
    if (st->model) {
        clock_headers(st->req, st->v_session, st->v_arrival, st->late_ns, NULL, 0);
        st->v_event = st->vdue;
        st->lag_event = st->lag_arrival;
    }
    st->phase = PH_STREAM;
    st->role_pending = st->rq.api == ST_SIM_API_CHAT && st->spec.role_chunk != ST_SIM_ROLE_OFF;
    uint64_t first_due = st_sim_chunk_due_ns(&st->spec, st->arrival_ns, 0);
    if (!st->model && st->spec.ping_ns && st->due_ns + st->spec.ping_ns < first_due) {
        st->next_ping_ns = st->due_ns + st->spec.ping_ns;
    }
    watch_output(st);
    uint64_t t = st_clock_mono_ns();
    st->last_write = t;
    evhttp_send_reply_start(st->req, 200, "OK");
    trace_event(st->srv, st->rid, st->rid_len, &st->seq, t, ST_SIM_KIND_HEADERS, 0, 0);
}

/* The non-SSE reply: the completion body, or the fault status. st may be freed afterwards. */
static void send_reply(struct stream *st)
{
    struct st_sim_server *srv = st->srv;
    struct st_buf *b = &srv->scratch;
    st_buf_clear(b);
    int code = 200;
    enum st_sim_kind kind = ST_SIM_KIND_FINISH;
    uint64_t tokens = st->rq.n_tokens;
    if (st->reply_status) {
        code = st->reply_status;
        kind = ST_SIM_KIND_ERROR;
        tokens = 0;
        char msg[64];
        snprintf(msg, sizeof(msg), "sim fault: status %d", code);
        if (st->model) {
            st_sim_dialect_error(b, srv->prof.engine.dialect, code, msg);
        } else {
            st_sim_render_error(b, msg, st_sim_error_type(code), code);
        }
        if (code == 429 && st->spec.retry_after_s >= 0) {
            char v[24];
            snprintf(v, sizeof(v), "%lld", (long long)st->spec.retry_after_s);
            evhttp_add_header(evhttp_request_get_output_headers(st->req), "Retry-After", v);
        }
    } else {
        /* A whole body always carries usage (nonsse included) unless usage=never. */
        st_sim_render_body(b, &st->resp, st->spec.usage != ST_SIM_USAGE_NEVER);
    }
    st->phase = PH_ENDED;
    if (st->model) {
        clock_headers(st->req, st->v_session, st->v_arrival, st->late_ns, &st->vdue,
                      st->lag_arrival);
        st->v_event = st->vdue;
        end_early(st);
    }
    uint64_t t = st_clock_mono_ns();
    trace_event(srv, st->rid, st->rid_len, &st->seq, t, ST_SIM_KIND_HEADERS, 0, 0);
    trace_event(srv, st->rid, st->rid_len, &st->seq, t, kind, tokens, b->len);
    send_json(srv, st->req, code, b->data, b->len);
}

static void on_vtimer(void *arg)
{
    step(arg);
}

/* Whether a PH_WAIT_* stream must wait on: its due time (virtual in model mode) has not come, and
 * its timer is armed for it. */
static int not_due(struct stream *st, uint64_t now)
{
    if (!st->model) {
        if (now < st->due_ns) {
            arm(st, st->due_ns);
            return 1;
        }
        return 0;
    }
    struct st_sim_live *live = st->srv->live;
    if (st_sim_live_vnow(live) >= st->vdue) {
        return 0;
    }
    if (!st->vtimer) {
        st->vtimer = st_sim_live_timer_new(live, on_vtimer, st);
    }
    st_sim_live_timer_at(live, st->vtimer, st->vdue);
    return 1;
}

static void step(struct stream *st)
{
    uint64_t now = st_clock_mono_ns();
    switch (st->phase) {
    case PH_WAIT_REPLY:
        if (st->model && !st->reply_status) {
            if (st->eng_done) {
                send_model_reply(st);
            }
            return;
        }
        if (not_due(st, now)) {
            return;
        }
        send_reply(st);
        return;
    case PH_WAIT_HEADERS:
        if (not_due(st, now)) {
            return;
        }
        start_stream(st);
        break;
    case PH_STREAM:
        if (st->draining) {
            return;
        }
        break;
    case PH_CLOSING:
        if (!st->draining) {
            cut_connection(st);
        }
        return;
    case PH_STALLED:
    case PH_ENDED:
    default:
        return;
    }
    if (st->model) {
        fill_model(st);
    } else {
        fill(st, now);
    }
    if (st->phase == PH_ENDED) {
        end_reply(st);
        return;
    }
    if (st->draining) {
        return;
    }
    if (st->phase == PH_CLOSING) {
        cut_connection(st);
        return;
    }
    if (st->phase == PH_STREAM && !st->model) {
        uint64_t due = st_sim_chunk_due_ns(&st->spec, st->arrival_ns, st->next_chunk);
        if (st->next_ping_ns && st->next_ping_ns < due) {
            due = st->next_ping_ns;
        }
        arm(st, due);
    }
}

/* ---- routes ---- */

/* Allocates a stream for a parsed request; nothing is registered with evhttp yet. */
static struct stream *stream_new(struct st_sim_server *srv, struct evhttp_request *req,
                                 enum st_sim_api api, const struct st_sim_spec *spec,
                                 const struct st_sim_req *rq, uint64_t arrival_ns, uint64_t id,
                                 const char *rid, size_t rid_len)
{
    struct stream *st = st_xcalloc(1, sizeof(*st));
    st->srv = srv;
    st->req = req;
    st->evcon = evhttp_request_get_connection(req);
    st->timer = evtimer_new(srv->base, on_timer, st);
    st->out = evbuffer_new();
    if (!st->timer || !st->out) {
        abort(); /* out of memory */
    }
    st->spec = *spec;
    st->rq = *rq;
    st->arrival_ns = arrival_ns;
    st->n_chunks = st_sim_chunks(rq->n_tokens, spec->tokens_per_chunk);
    st->usage_on = st_sim_usage_on(spec, rq);
    st->running = rq->continuous_usage && spec->usage != ST_SIM_USAGE_NEVER;
    st->rid_len = rid_len;
    memcpy(st->rid, rid, rid_len);
    st->resp = (struct st_sim_resp){
        .api = api,
        .id = id,
        .created_unix_s = (int64_t)(st_clock_unix_ns() / ST_NS_PER_S),
        .model = srv->model,
        .n_tokens = rq->n_tokens,
        .prompt_tokens = rq->prompt_tokens,
        .cached_tokens = spec->cached_tokens,
    };
    if (srv->trace) {
        st->recs = st_xmalloc(BATCH_EVENTS * sizeof(*st->recs));
    }
    return st;
}

/* Registers the stream with evhttp, picks its first phase and runs it. status: 0 or the fault
 * status to answer with. */
static void stream_begin(struct stream *st, int status)
{
    const struct st_sim_spec *spec = &st->spec;
    evhttp_connection_set_closecb(st->evcon, on_conn_close, st);
    evhttp_request_set_on_complete_cb(st->req, on_complete, st);
    st->vdue = st->v_arrival + spec->headers_delay_ns;
    if (status) {
        st->phase = PH_WAIT_REPLY;
        st->reply_status = status;
        st->due_ns = st->arrival_ns + spec->headers_delay_ns;
    } else if (!st->rq.stream || spec->nonsse) {
        st->phase = PH_WAIT_REPLY;
        st->due_ns = st_sim_body_due_ns(spec, &st->rq, st->arrival_ns);
    } else {
        st_sim_tmpl_init(&st->tmpl, &st->resp);
        if (st->model) {
            st_buf_clear(&st->tmpl.role);
            st_sim_dialect_role(&st->tmpl.role, st->srv->prof.engine.dialect, &st->resp);
        }
        st->phase = PH_WAIT_HEADERS;
        st->due_ns = st->arrival_ns + spec->headers_delay_ns;
        if (st->model && cut_after(spec) == 0) {
            /* Cut before its first chunk: it ends with its headers. */
            fault_end(st, st->vdue);
        }
    }
    step(st);
}

/* Applies X-Sim to spec and parses the body into rq; on error answers 400 and returns -1. */
static int parse_completion(struct st_sim_server *srv, struct evhttp_request *req,
                            enum st_sim_api api, const char *rid, size_t rid_len,
                            struct st_sim_spec *spec, struct st_sim_req *rq)
{
    char err[256], msg[320];
    const char *xsim = evhttp_find_header(evhttp_request_get_input_headers(req), "X-Sim");
    if (xsim && st_sim_spec_apply(spec, xsim, strlen(xsim), err, sizeof(err)) != 0) {
        snprintf(msg, sizeof(msg), "X-Sim: %s", err);
        send_error(srv, req, rid, rid_len, 400, "BadRequestError", msg);
        return -1;
    }
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    const char *body = len ? (const char *)evbuffer_pullup(in, -1) : "";
    if (st_sim_req_parse(rq, api, body, len, &srv->doc, &srv->scratch, err, sizeof(err)) != 0) {
        send_error(srv, req, rid, rid_len, 400, "BadRequestError", err);
        return -1;
    }
    return 0;
}

static void completion(struct st_sim_server *srv, struct evhttp_request *req, enum st_sim_api api,
                       uint64_t arrival_ns, uint64_t id, const char *rid, size_t rid_len)
{
    struct st_sim_spec spec = srv->spec;
    struct st_sim_req rq;
    if (parse_completion(srv, req, api, rid, rid_len, &spec, &rq) != 0) {
        return;
    }
    struct stream *st = stream_new(srv, req, api, &spec, &rq, arrival_ns, id, rid, rid_len);
    stream_begin(st, st_sim_status_applies(&spec, 0, id) ? spec.status : 0);
}

/* ---- model-mode completions ---- */

/* Renders the prompt into srv->prompt. 0, or -1 after a 400. */
static int model_prompt(struct st_sim_server *srv, struct evhttp_request *req, enum st_sim_api api,
                        const char *rid, size_t rid_len)
{
    char err[256];
    int rc;
    if (api == ST_SIM_API_CHAT) {
        struct st_sim_prompt_opts o = {
            .patch = srv->prof.model.vision_params > 0 ? srv->prof.model.vision_patch : 0,
            .max_text_tokens = srv->prof.engine.context_length + 1,
            .generation_prompt = 1,
        };
        rc = st_sim_prompt_chat(&srv->prompt, &srv->doc, st_json_get(&srv->doc, 0, "messages"), &o,
                                &srv->scratch, err, sizeof(err));
    } else {
        rc = st_sim_prompt_completion(&srv->prompt, &srv->doc, st_json_get(&srv->doc, 0, "prompt"),
                                      &srv->scratch, err, sizeof(err));
    }
    if (rc != 0) {
        send_error(srv, req, rid, rid_len, 400, "BadRequestError", err);
        return -1;
    }
    return 0;
}

/* Sets the reply's text: the X-Servetune-Expect answer, right or (with probability
 * quality.error_rate, decided per request) wrong; none without the header. 0 or -1 after a 400. */
static int model_answer(struct st_sim_server *srv, struct stream *st, const char *rid,
                        size_t rid_len)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(st->req);
    const char *want = evhttp_find_header(in, "X-Servetune-Expect");
    if (!want) {
        return 0;
    }
    const char *xrid = evhttp_find_header(in, "X-Request-Id");
    uint64_t key;
    if (xrid) {
        key = st_hash64(xrid, strlen(xrid));
    } else {
        struct evbuffer *b = evhttp_request_get_input_buffer(st->req);
        size_t len = evbuffer_get_length(b);
        key = st_hash64(len ? evbuffer_pullup(b, -1) : (const unsigned char *)"", len);
    }
    size_t n = strlen(want);
    int rc;
    if (st_sim_answer_wrong(srv->prof.quality.error_rate, srv->mc.seed, key)) {
        struct st_buf wrong;
        st_buf_init(&wrong);
        st_sim_answer_perturb(want, n, &wrong);
        rc = st_sim_answer_set(&st->answer, wrong.data, wrong.len);
        st_buf_release(&wrong);
    } else {
        rc = st_sim_answer_set(&st->answer, want, n);
    }
    if (rc != 0) {
        send_error(srv, st->req, rid, rid_len, 400, "BadRequestError",
                   "X-Servetune-Expect: longer than 4096 bytes");
        return -1;
    }
    return 0;
}

/* Queues the request in the engine. 0, or -1 after the dialect's 400. */
/* A request the client named (the body's "servetune_noise_key", sent by the campaign runner):
 * its staged noise factor and the seed of its own draws come from the key (sim/noise.h); set for
 * the next submission. */
static void next_noise(struct st_sim_server *srv)
{
    size_t len = 0;
    const char *key = NULL;
    int k = st_json_get(&srv->doc, 0, "servetune_noise_key");
    if (k > 0 && st_json_type(&srv->doc, k) == ST_JSON_STRING) {
        key = st_json_raw(&srv->doc, k, &len); /* the raw text, quotes included: a stable key */
    }
    if (!key && !(srv->noise.noise_cv > 0)) {
        return;
    }
    double f;
    uint64_t seed;
    st_sim_noise_request(&srv->noise, srv->mc.seed, key, len, &f, &seed);
    st_sim_live_next_noise(srv->live, f, key != NULL, seed);
}

static int model_submit(struct st_sim_server *srv, struct stream *st, const char *rid,
                        size_t rid_len)
{
    const struct st_sim_prompt *pr = &srv->prompt;
    uint32_t page = srv->prof.engine.page_size;
    uint64_t max = pr->tokens / page;
    uint64_t cap = srv->prof.engine.context_length / page + 1;
    max = max < cap ? max : cap;
    if (max > srv->cap_hashes) {
        srv->cap_hashes = max;
        srv->hashes = st_xrealloc(srv->hashes, max * sizeof(*srv->hashes));
    }
    uint64_t n = st_tok_block_hashes(pr->text.data ? pr->text.data : "", pr->text.len, page,
                                     srv->hashes, max);
    n = n < max ? n : max;
    char err[512];
    err[0] = '\0';
    next_noise(srv);
    int rc = st_sim_live_submit(srv->live, st->eng_id, pr->tokens, srv->hashes, (uint32_t)n,
                                st->rq.n_tokens, on_engine, st, err, sizeof(err));
    if (rc == 0) {
        st->in_engine = 1;
        return 0;
    }
    enum st_dialect d = srv->prof.engine.dialect;
    st_buf_clear(&srv->scratch);
    if (rc == ST_ETOOBIG) {
        st_sim_dialect_ctx_error(&srv->scratch, d, err, pr->tokens,
                                 srv->prof.engine.context_length);
    } else {
        st_sim_dialect_error(&srv->scratch, d, 400, err[0] ? err : st_strerror(rc));
    }
    uint64_t seq = 0, t = st_clock_mono_ns();
    trace_event(srv, rid, rid_len, &seq, t, ST_SIM_KIND_HEADERS, 0, 0);
    trace_event(srv, rid, rid_len, &seq, t, ST_SIM_KIND_ERROR, 0, srv->scratch.len);
    clock_headers(st->req, st->v_session, st->v_arrival, st->late_ns, &st->v_arrival,
                  st->lag_arrival);
    send_json(srv, st->req, 400, srv->scratch.data, srv->scratch.len);
    return -1;
}

/* A model-mode completion at its placement (srv->cur_pl): parsed, answered or submitted. A stream
 * that takes the request takes srv->cur_arr too. */
static void completion_model(struct st_sim_server *srv, struct evhttp_request *req,
                             enum st_sim_api api, uint64_t arrival_ns, uint64_t id, const char *rid,
                             size_t rid_len)
{
    enum st_dialect d = srv->prof.engine.dialect;
    const struct st_sim_live_place *pl = srv->cur_pl;
    uint64_t ord = ++srv->placed;
    if (!st_sim_admin_ready(srv->admin)) {
        send_error(srv, req, rid, rid_len, 503, "ServiceUnavailableError", "Loading model");
        return;
    }
    struct st_sim_spec spec = srv->spec;
    struct st_sim_req rq;
    if (parse_completion(srv, req, api, rid, rid_len, &spec, &rq) != 0 ||
        model_prompt(srv, req, api, rid, rid_len) != 0) {
        return;
    }
    rq.prompt_tokens = srv->prompt.tokens;
    struct stream *st = stream_new(srv, req, api, &spec, &rq, arrival_ns, id, rid, rid_len);
    st->model = 1;
    st->all_next = srv->streams;
    if (srv->streams) {
        srv->streams->all_prev = st;
    }
    srv->streams = st;
    st->eng_id = ord;
    st->v_session = pl->session_start;
    st->v_arrival = pl->t_ns;
    st->v_event = pl->t_ns;
    st->lag_arrival = pl->lag_ns;
    st->late_ns = pl->late ? (int64_t)pl->late_ns : -1;
    st->arr = srv->cur_arr;
    srv->cur_arr = NULL;
    st_sim_answer_init(&st->answer);
    st_buf_init(&st->text);
    /* vLLM's StreamOptions.include_usage defaults to true: any stream_options object turns the
     * usage chunk on. The others need include_usage: true. */
    int inc =
        rq.include_usage || (d == ST_DIALECT_VLLM && rq.stream_options && !rq.include_usage_given);
    st->usage_on = spec.usage == ST_SIM_USAGE_ALWAYS ||
                   (spec.usage == ST_SIM_USAGE_AUTO && (!rq.stream || inc));
    /* Drawn by the placement ordinal, which virtual-time order makes the same on every run. */
    int status = st_sim_status_applies(&spec, srv->mc.seed, ord) ? spec.status : 0;
    if (model_answer(srv, st, rid, rid_len) != 0 ||
        (!status && model_submit(srv, st, rid, rid_len) != 0)) {
        /* Answered with an error at its placement. */
        srv->cur_arr = st->arr;
        st->arr = NULL;
        stream_free(st);
        return;
    }
    stream_begin(st, status);
}

/* ---- model-mode arrivals ---- */

/* A completion received and waiting for its virtual arrival (live.h). */
struct held {
    struct st_sim_server *srv;
    struct evhttp_request *req;
    struct evhttp_connection *evcon;
    struct st_sim_live_arr *arr;
    enum st_sim_api api;
    uint64_t arrival_ns, id;
    size_t rid_len;
    char rid[MAX_RID_BYTES * 6 + 3];
};

/* The client left while its request waited for its virtual arrival. */
static void on_held_close(struct evhttp_connection *evcon, void *arg)
{
    struct held *h = arg;
    (void)evcon;
    st_sim_live_arr_abort(h->srv->live, h->arr);
    if (evhttp_request_get_connection(h->req) == NULL) {
        evhttp_request_free(h->req);
    }
    free(h);
}

static void on_place(void *arg, const struct st_sim_live_place *pl)
{
    struct held *h = arg;
    struct st_sim_server *srv = h->srv;
    evhttp_connection_set_closecb(h->evcon, NULL, NULL);
    srv->cur_pl = pl;
    srv->cur_arr = h->arr;
    completion_model(srv, h->req, h->api, h->arrival_ns, h->id, h->rid, h->rid_len);
    srv->cur_pl = NULL;
    if (srv->cur_arr) {
        /* No stream took it: it was answered at its placement. */
        st_sim_live_arr_end(srv->live, srv->cur_arr, pl->t_ns);
        srv->cur_arr = NULL;
    }
    free(h);
}

/* Reads the session headers (sync.h) and queues the completion for its virtual arrival. */
static void hold_completion(struct st_sim_server *srv, struct evhttp_request *req,
                            enum st_sim_api api, uint64_t arrival_ns, uint64_t id, const char *rid,
                            size_t rid_len)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    struct st_sim_sync_hdr hdr;
    char err[160];
    int rc = st_sim_sync_parse(
        evhttp_find_header(in, "X-Sim-Session"), evhttp_find_header(in, "X-Sim-Streams"),
        evhttp_find_header(in, "X-Sim-Stream"), evhttp_find_header(in, "X-Sim-Arrival"),
        evhttp_find_header(in, "X-Sim-Next"), &hdr, err, sizeof(err));
    if (rc < 0) {
        send_error(srv, req, rid, rid_len, 400, "BadRequestError", err);
        return;
    }
    struct held *h = st_xcalloc(1, sizeof(*h));
    h->srv = srv;
    h->req = req;
    h->evcon = evhttp_request_get_connection(req);
    h->api = api;
    h->arrival_ns = arrival_ns;
    h->id = id;
    h->rid_len = rid_len;
    memcpy(h->rid, rid, rid_len);
    h->arr = st_sim_live_arrive(srv->live, rc == 0 ? &hdr : NULL, on_place, h);
    evhttp_connection_set_closecb(h->evcon, on_held_close, h);
}

static void models(struct st_sim_server *srv, struct evhttp_request *req)
{
    struct st_buf *b = &srv->scratch;
    struct st_jw w;
    st_buf_clear(b);
    st_jw_init(&w, b);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "object", "list");
    st_jw_key(&w, "data");
    st_jw_arr_open(&w);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "id", srv->model);
    st_jw_kstr(&w, "object", "model");
    st_jw_ki64(&w, "created", 0);
    st_jw_kstr(&w, "owned_by", "servetune-sim");
    st_jw_obj_close(&w);
    st_jw_arr_close(&w);
    st_jw_obj_close(&w);
    send_json(srv, req, 200, b->data, b->len);
}

static void on_request(struct evhttp_request *req, void *arg)
{
    struct st_sim_server *srv = arg;
    uint64_t arrival = st_clock_mono_ns();
    uint64_t id = ++srv->next_id;
    char rid[MAX_RID_BYTES * 6 + 3];
    size_t rid_len = make_rid(req, id, &srv->scratch, rid, sizeof(rid));
    if (srv->trace) {
        st_sim_trace_arrive(srv->trace, rid, rid_len, arrival);
    }
    tune_connection(evhttp_request_get_connection(req));

    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    int get = cmd == EVHTTP_REQ_GET, post = cmd == EVHTTP_REQ_POST;
    if (!path) {
        path = "/";
    }
    if (srv->live) {
        uint64_t seq = 0;
        if (st_sim_admin_route(srv->admin, req, path, cmd)) {
            trace_event(srv, rid, rid_len, &seq, st_clock_mono_ns(), ST_SIM_KIND_HEADERS, 0, 0);
            return;
        }
        hold_completion(srv, req,
                        strcmp(path, "/v1/chat/completions") == 0 ? ST_SIM_API_CHAT
                                                                  : ST_SIM_API_COMPLETIONS,
                        arrival, id, rid, rid_len);
        return;
    }
    if (strcmp(path, "/v1/chat/completions") == 0 && post) {
        completion(srv, req, ST_SIM_API_CHAT, arrival, id, rid, rid_len);
    } else if (strcmp(path, "/v1/completions") == 0 && post) {
        completion(srv, req, ST_SIM_API_COMPLETIONS, arrival, id, rid, rid_len);
    } else if (strcmp(path, "/v1/models") == 0 && get) {
        uint64_t seq = 0;
        trace_event(srv, rid, rid_len, &seq, st_clock_mono_ns(), ST_SIM_KIND_HEADERS, 0, 0);
        models(srv, req);
    } else if (strcmp(path, "/health") == 0 && get) {
        static const char ok[] = "{\"status\":\"ok\"}";
        uint64_t seq = 0;
        trace_event(srv, rid, rid_len, &seq, st_clock_mono_ns(), ST_SIM_KIND_HEADERS, 0, 0);
        send_json(srv, req, 200, ok, strlen(ok));
    } else if (strcmp(path, "/v1/chat/completions") == 0 || strcmp(path, "/v1/completions") == 0 ||
               strcmp(path, "/v1/models") == 0 || strcmp(path, "/health") == 0) {
        send_error(srv, req, rid, rid_len, 405, "method_not_allowed_error", "Method Not Allowed");
    } else {
        send_error(srv, req, rid, rid_len, 404, "not_found_error", "File Not Found");
    }
}

/* ---- lifecycle ---- */

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    struct st_sim_server *srv = arg;
    (void)sig;
    (void)what;
    srv->signalled = 1;
    event_base_loopbreak(srv->base);
}

static int listen_on(struct st_sim_server *srv, const struct sockaddr *addr, socklen_t addrlen,
                     char *err, size_t errlen)
{
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -errno;
    }
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (addr->sa_family == AF_INET6) {
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    }
    /* A deep backlog: thousands of clients may connect at once (the kernel caps it at
     * net.core.somaxconn). */
    if (bind(fd, addr, addrlen) != 0 || listen(fd, 65535) != 0) {
        int rc = -errno;
        snprintf(err, errlen, "bind/listen: %s", strerror(errno));
        close(fd);
        return rc;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
            port = ntohs(a->sin6_port);
        } else {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
            port = ntohs(a->sin_port);
        }
    }
    snprintf(srv->addr, sizeof(srv->addr), ss.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", host,
             port);
    if (!evhttp_accept_socket_with_handle(srv->http, fd)) {
        snprintf(err, errlen, "evhttp could not accept on the socket");
        close(fd);
        return -ENOMEM;
    }
    return 0;
}

/* ---- model-mode lifecycle ---- */

static void on_ready_timer(void *arg)
{
    struct st_sim_server *srv = arg;
    st_sim_admin_set_ready(srv->admin);
    if (srv->mc.log_cb) {
        st_buf_clear(&srv->scratch);
        st_sim_dialect_ready(&srv->scratch, &srv->prof);
        srv->mc.log_cb(srv->mc.log_arg, srv->scratch.data);
    }
}

static void on_press_timer(void *arg)
{
    struct st_sim_server *srv = arg;
    st_sim_live_pressure(srv->live, srv->mc.faults.pressure_blocks);
}

static void on_unpress_timer(void *arg)
{
    struct st_sim_server *srv = arg;
    st_sim_live_pressure(srv->live, 0);
}

/*
 * An SSE comment on each model stream that has written nothing for KEEPALIVE_NS of real time and
 * is not stalled by a fault: a request that waits a long virtual time (queued,
 * or prefilling a long prompt) is seen alive by the client, however slowly the simulator runs
 * (docs/sim.md, "Virtual time"). A fault's stall writes nothing, so the client's timers end it.
 */
static void on_keepalive(evutil_socket_t fd, short what, void *arg)
{
    struct st_sim_server *srv = arg;
    (void)fd;
    (void)what;
    uint64_t now = st_clock_mono_ns();
    for (struct stream *st = srv->streams; st; st = st->all_next) {
        if (st->phase != PH_STREAM || st->draining || now - st->last_write < KEEPALIVE_NS) {
            continue;
        }
        struct batch b = {.st = st, .hint = 64};
        char *p = batch_room(&b, strlen(ST_SIM_EVENT_COMMENT));
        batch_fixed(&b, p, ST_SIM_KIND_COMMENT, ST_SIM_EVENT_COMMENT, strlen(ST_SIM_EVENT_COMMENT));
        batch_flush(&b);
    }
}

/* crash_after_s: the virtual time came; exit through the real timer at once. */
static void on_vcrash_timer(void *arg)
{
    struct st_sim_server *srv = arg;
    struct timeval tv = {0, 0};
    evtimer_add(srv->crash_timer, &tv);
}

static void on_live_log(void *arg, const char *text)
{
    struct st_sim_server *srv = arg;
    if (srv->mc.log_cb) {
        srv->mc.log_cb(srv->mc.log_arg, text);
    }
}

static void on_idle(void *arg)
{
    struct st_sim_server *srv = arg;
    if (srv->admin) {
        st_sim_admin_idle(srv->admin);
    }
}

/* Virtual seconds as ns. */
static uint64_t vns(double s)
{
    return s > 0 ? (uint64_t)(s * 1e9 + 0.5) : 0;
}

/* Creates the engine, the admin routes and the fault timers; virtual time starts now. */
static int model_start(struct st_sim_server *srv, const struct st_sim_model_cfg *mc, char *err,
                       size_t errlen)
{
    srv->prof = *mc->p;
    srv->mc = *mc;
    if (mc->slot_save_path) {
        srv->slot_path = st_xstrdup(mc->slot_save_path);
    }
    srv->mc.slot_save_path = srv->slot_path;
    if (mc->speed > 0) {
        snprintf(srv->scale, sizeof(srv->scale), "%g", mc->speed);
    } else {
        snprintf(srv->scale, sizeof(srv->scale), "%g", ST_SIM_SPEED_MAX);
    }
    if (srv->prof.engine.dialect == ST_DIALECT_LLAMACPP) {
        /* llama.cpp sends the role delta in the same burst as the first token. */
        srv->spec.role_chunk = ST_SIM_ROLE_FIRST;
    }
    st_sim_prompt_init(&srv->prompt);
    const struct st_sim_faults *f = &mc->faults;
    struct st_sim_live_cfg lc = {
        .base = srv->base,
        .p = &srv->prof,
        .seed = mc->seed,
        .speed = mc->speed,
        .t0_mono_ns = st_clock_mono_ns(),
        .slow_step_ns = f->slow_step_us * 1000,
        .idle_cb = on_idle,
        .idle_arg = srv,
        .log_cb = on_live_log,
        .log_arg = srv,
    };
    int rc = st_sim_live_new(&lc, &srv->live);
    if (rc != 0) {
        snprintf(err, errlen, "the engine model refused the profile (%s)", st_strerror(rc));
        return rc;
    }
    st_sim_noise_init(&srv->noise, &srv->prof);
    st_sim_live_set_scale(srv->live, st_sim_noise_launch(&srv->noise));
    struct st_sim_admin_cfg ac = {
        .live = srv->live,
        .p = &srv->prof,
        .model = srv->model,
        .scale = srv->scale,
        .dev_mode = mc->dev_mode,
        .slot_save_path = srv->slot_path,
        .created_unix_s = (int64_t)(st_clock_unix_ns() / ST_NS_PER_S),
        .doc = &srv->doc,
        .scratch = &srv->scratch,
    };
    srv->admin = st_sim_admin_new(&ac);
    srv->crash_timer = evtimer_new(srv->base, on_crash_timer, srv);
    srv->keepalive = event_new(srv->base, -1, EV_PERSIST, on_keepalive, srv);
    struct timeval ka = {.tv_sec = 0, .tv_usec = (suseconds_t)(KEEPALIVE_NS / 4 / 1000)};
    if (!srv->crash_timer || !srv->keepalive || event_add(srv->keepalive, &ka) != 0) {
        snprintf(err, errlen, "libevent: out of memory");
        return -ENOMEM;
    }
    srv->ready_timer = st_sim_live_timer_new(srv->live, on_ready_timer, srv);
    srv->vcrash_timer = st_sim_live_timer_new(srv->live, on_vcrash_timer, srv);
    srv->press_timer = st_sim_live_timer_new(srv->live, on_press_timer, srv);
    srv->unpress_timer = st_sim_live_timer_new(srv->live, on_unpress_timer, srv);
    /* Always through the loop, so the ready line follows the listening line. */
    st_sim_live_timer_at(srv->live, srv->ready_timer,
                         vns(srv->prof.engine.startup_s + f->slow_start_s));
    if (f->crash_after_s > 0) {
        st_sim_live_timer_at(srv->live, srv->vcrash_timer, vns(f->crash_after_s));
    }
    if (f->pressure_blocks > 0) {
        st_sim_live_timer_at(srv->live, srv->press_timer, vns(f->pressure_at_s));
        if (f->pressure_for_s > 0) {
            st_sim_live_timer_at(srv->live, srv->unpress_timer,
                                 vns(f->pressure_at_s + f->pressure_for_s));
        }
    }
    return 0;
}

int st_sim_server_new(const struct st_sim_server_cfg *cfg, struct st_sim_server **out, char *err,
                      size_t errlen)
{
    struct st_sim_server *srv = st_xcalloc(1, sizeof(*srv));
    int rc = -ENOMEM;
    srv->spec = cfg->spec;
    srv->model = st_xstrdup(cfg->model);
    srv->trace = cfg->trace;
    st_json_init(&srv->doc, 1u << 22);
    st_buf_init(&srv->scratch);
    snprintf(srv->scale, sizeof(srv->scale), "1");

    struct event_config *ec = event_config_new();
    if (ec) {
        /* Timers to the microsecond, not rounded to the millisecond (epoll uses a timerfd). */
        event_config_set_flag(ec, EVENT_BASE_FLAG_PRECISE_TIMER);
        srv->base = event_base_new_with_config(ec);
        event_config_free(ec);
    }
    if (srv->base) {
        srv->http = evhttp_new(srv->base);
    }
    if (!srv->http) {
        snprintf(err, errlen, "libevent: out of memory");
        goto fail;
    }
    evhttp_set_gencb(srv->http, on_request, srv);
    evhttp_set_max_body_size(srv->http, MAX_BODY_BYTES);
    evhttp_set_allowed_methods(srv->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                              EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                              EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
    rc = listen_on(srv, cfg->addr, cfg->addrlen, err, errlen);
    if (rc != 0) {
        goto fail;
    }
    srv->sig_int = evsignal_new(srv->base, SIGINT, on_signal, srv);
    srv->sig_term = evsignal_new(srv->base, SIGTERM, on_signal, srv);
    if (!srv->sig_int || !srv->sig_term || evsignal_add(srv->sig_int, NULL) != 0 ||
        evsignal_add(srv->sig_term, NULL) != 0) {
        snprintf(err, errlen, "libevent: cannot watch SIGINT/SIGTERM");
        rc = -ENOMEM;
        goto fail;
    }
    if (cfg->engine) {
        rc = model_start(srv, cfg->engine, err, errlen);
        if (rc != 0) {
            goto fail;
        }
    }
    *out = srv;
    return 0;
fail:
    st_sim_server_free(srv);
    return rc;
}

void st_sim_server_addr(const struct st_sim_server *s, char *buf, size_t len)
{
    snprintf(buf, len, "%s", s->addr);
}

int st_sim_server_run(struct st_sim_server *s)
{
    (void)event_base_dispatch(s->base);
    /* The listener and the signal events keep the loop alive: it ends on a signal or a failure. */
    return s->signalled ? ST_EINTERRUPTED : -EIO;
}

void st_sim_server_free(struct st_sim_server *s)
{
    if (!s) {
        return;
    }
    /* Parked flushes are answered while their connections still exist. */
    st_sim_admin_free(s->admin);
    s->admin = NULL;
    /* Frees every connection; their close callbacks free the streams and timers (and take the
     * streams out of the engine, so the engine goes after them). */
    if (s->http) {
        evhttp_free(s->http);
    }
    if (s->live) {
        st_sim_live_timer_free(s->live, s->ready_timer);
        st_sim_live_timer_free(s->live, s->vcrash_timer);
        st_sim_live_timer_free(s->live, s->press_timer);
        st_sim_live_timer_free(s->live, s->unpress_timer);
    }
    st_sim_live_free(s->live);
    if (s->crash_timer) {
        event_free(s->crash_timer);
    }
    if (s->keepalive) {
        event_free(s->keepalive);
    }
    if (s->sig_int) {
        event_free(s->sig_int);
    }
    if (s->sig_term) {
        event_free(s->sig_term);
    }
    if (s->base) {
        event_base_free(s->base);
    }
    st_json_release(&s->doc);
    st_buf_release(&s->scratch);
    st_sim_prompt_release(&s->prompt);
    free(s->hashes);
    free(s->slot_path);
    free(s->model);
    free(s);
}
