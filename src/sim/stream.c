/*
 * One completion's reply: a struct st_sim_stream per request, alive from st_sim_stream_begin until
 * evhttp reports the reply complete (on_complete) or the connection gone (on_conn_close), whichever
 * comes first; each of those two callbacks unregisters the other. A stream owns one timer and one
 * evbuffer in which a batch of due events is rendered; a batch is handed to evhttp in one chunk
 * write, and the next batch waits until evhttp reports the output drained, so memory per stream
 * stays bounded by one batch (ST_SIM_BATCH_BYTES) whatever the client's read speed. The content
 * of fixed-timing streams is rendered here (chunk j is due at arrival + ttft + j * itl); a model
 * stream's comes from modelmode.c through srv->mops (server_int.h). The state machine is drawn in
 * docs/internals/sim.md.
 */
#include "sim/server_int.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/xalloc.h"
#include "sim/model/assert.h"
#include "sim/admin.h"
#include "sim/answer.h"
#include "sim/dialect.h"
#include "sim/live.h"

/* How often a closing stream checks whether evhttp's output has drained. */
#define CLOSE_POLL_NS (1 * ST_NS_PER_MS)

/* ---- small helpers ---- */

/* An event whose bytes were handed over and written at one reading of the clock, t_ns. */
void st_sim_stream_trace(struct st_sim_server *srv, const char *rid, size_t rid_len, uint64_t *seq,
                         uint64_t t_ns, enum st_sim_kind kind, uint64_t tokens, uint64_t bytes)
{
    if (srv->trace) {
        st_sim_trace_event(srv->trace, rid, rid_len, (*seq)++, t_ns, t_ns, kind, tokens, bytes);
    }
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

/*
 * Model mode: where a completion was placed (X-Sim-Arrival, virtual ns since its session's
 * start), how late when it could not be placed at its declared time (X-Sim-Late, late_ns >= 0)
 * and, for a reply sent whole, when it was produced (X-Sim-Vt: "NS LAG", LAG the real ns the
 * simulator was late). docs/sim.md, "Virtual time".
 */
void st_sim_stream_clock_headers(struct evhttp_request *req, uint64_t v_session, uint64_t v_arrival,
                                 int64_t late_ns, const uint64_t *v_whole, uint64_t lag)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    char v[64];
    snprintf(v, sizeof(v), "%llu", (unsigned long long)st_sim_since(v_arrival, v_session));
    evhttp_add_header(h, "X-Sim-Arrival", v);
    if (late_ns >= 0) {
        /* Declared for an earlier time than the simulator could still place it at. */
        snprintf(v, sizeof(v), "%lld", (long long)late_ns);
        evhttp_add_header(h, "X-Sim-Late", v);
    }
    if (v_whole) {
        snprintf(v, sizeof(v), "%llu %llu", (unsigned long long)st_sim_since(*v_whole, v_session),
                 (unsigned long long)lag);
        evhttp_add_header(h, "X-Sim-Vt", v);
    }
}

/* Sends a whole JSON reply now. body is copied. */
void st_sim_stream_send_json(const struct st_sim_server *srv, struct evhttp_request *req, int code,
                             const char *body, size_t len)
{
    st_sim_http_send(req, code, "application/json", body, len, srv->scale, srv->live != NULL);
}

/* Sends an OpenAI-style error reply now, tracing it as headers + error. */
void st_sim_stream_send_error(struct st_sim_server *srv, struct evhttp_request *req,
                              const char *rid, size_t rid_len, int code, const char *type,
                              const char *message)
{
    st_buf_clear(&srv->scratch);
    if (srv->live) {
        st_sim_dialect_error(&srv->scratch, srv->prof.engine.dialect, code, message);
    } else {
        st_sim_render_error(&srv->scratch, message, type, code);
    }
    uint64_t seq = 0, t = st_clock_mono_ns();
    st_sim_stream_trace(srv, rid, rid_len, &seq, t, ST_SIM_KIND_HEADERS, 0, 0);
    st_sim_stream_trace(srv, rid, rid_len, &seq, t, ST_SIM_KIND_ERROR, 0, srv->scratch.len);
    if (srv->cur_pl) {
        /* An answer at the request's placement: it was produced then. */
        const struct st_sim_live_place *pl = srv->cur_pl;
        st_sim_stream_clock_headers(req, pl->session_start, pl->t_ns,
                                    pl->late ? (int64_t)pl->late_ns : -1, &pl->t_ns, pl->lag_ns);
    }
    st_sim_stream_send_json(srv, req, code, srv->scratch.data, srv->scratch.len);
}

/* ---- stream lifetime ---- */

void st_sim_stream_free(struct st_sim_stream *st)
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
    struct st_sim_stream *st = arg;
    (void)req;
    evhttp_connection_set_closecb(st->evcon, NULL, NULL);
    st_sim_stream_free(st);
}

/*
 * The connection is going away (peer closed, write error, server shutdown). If evhttp detached the
 * request from it (the reply was not finished), the request is ours to free.
 */
static void on_conn_close(struct evhttp_connection *evcon, void *arg)
{
    struct st_sim_stream *st = arg;
    (void)evcon;
    if (evhttp_request_get_connection(st->req) == NULL) {
        evhttp_request_free(st->req);
    }
    st_sim_stream_free(st);
}

static void arm(struct st_sim_stream *st, uint64_t due_ns)
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
    st_sim_stream_step(arg);
}

static void on_drain(struct evhttp_connection *evcon, void *arg)
{
    struct st_sim_stream *st = arg;
    (void)evcon;
    st->draining = 0;
    st_sim_stream_step(st);
}

/* ---- write-time tracing ---- */

static void on_conn_out(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    struct st_sim_stream *st = arg;
    (void)buf;
    st->out_added += info->n_added;
    if (info->n_deleted == 0) {
        return;
    }
    /* Called from the drain that follows a successful write(2): the bytes are in the kernel. */
    st->out_written += info->n_deleted;
    uint64_t t = st_clock_mono_ns();
    while (st->npend > 0) {
        struct st_sim_pend *p = &st->pend[st->pend_head];
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
static void watch_output(struct st_sim_stream *st)
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
void *st_sim_stream_ring_grow(void *items, size_t elem, uint32_t n, uint32_t *head, uint32_t *cap,
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

static void pend_push(struct st_sim_stream *st, uint64_t end, uint64_t q_ns,
                      const struct st_sim_rec *r)
{
    if (st->npend == st->pend_cap) {
        st->pend = st_sim_stream_ring_grow(st->pend, sizeof(*st->pend), st->npend, &st->pend_head,
                                           &st->pend_cap, ST_SIM_BATCH_EVENTS);
    }
    st->pend[(st->pend_head + st->npend) % st->pend_cap] = (struct st_sim_pend){
        .end = end, .q_ns = q_ns, .kind = r->kind, .tokens = r->tokens, .bytes = r->bytes};
    st->npend++;
}

/* ---- batches ---- */

/* Returns room for need more bytes, or NULL when the batch is full (flush and come back). */
char *st_sim_batch_room(struct st_sim_batch *b, size_t need)
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

void st_sim_batch_note(struct st_sim_batch *b, enum st_sim_kind kind, uint32_t tokens, size_t bytes)
{
    struct st_sim_stream *st = b->st;
    if (st->recs) {
        st->recs[st->nrec++] = (struct st_sim_rec){.kind = kind, .tokens = tokens, .bytes = bytes};
    }
    b->len += bytes;
    b->events++;
}

void st_sim_batch_fixed(struct st_sim_batch *b, char *p, enum st_sim_kind kind, const char *data,
                        size_t n)
{
    memcpy(p, data, n);
    st_sim_batch_note(b, kind, 0, n);
}

/* Commits the batch and hands it to evhttp as one chunk; the drain callback resumes the stream. */
void st_sim_batch_flush(struct st_sim_batch *b)
{
    struct st_sim_stream *st = b->st;
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
        ST_MODEL_ASSERT(added >= data_len + 2);
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
        st_sim_stream_trace(st->srv, st->rid, st->rid_len, &st->seq, t,
                            (enum st_sim_kind)st->recs[i].kind, st->recs[i].tokens,
                            st->recs[i].bytes);
    }
    st->nrec = 0;
    b->len = 0;
    b->cap = 0;
}

/* Bytes to reserve for the events due by now (a guess; batch_room grows it for big events). */
static size_t batch_hint(const struct st_sim_stream *st, uint64_t now)
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
    return hint < ST_SIM_BATCH_BYTES ? (size_t)hint : ST_SIM_BATCH_BYTES;
}

/* ---- the SSE state machine ---- */

static unsigned content_flags(const struct st_sim_stream *st, uint32_t j)
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

/* Whether a stall, close or reset fault fires at chunk boundary j; if so, sets the phase. */
int st_sim_stream_cut_at(struct st_sim_stream *st, uint32_t j)
{
    const struct st_sim_spec *s = &st->spec;
    if (j == s->stall_after) {
        st->phase = ST_SIM_PH_STALLED;
        return 1;
    }
    if (j == s->close_after || j == s->reset_after) {
        st->phase = ST_SIM_PH_CLOSING;
        st->reset = j != s->close_after;
        return 1;
    }
    return 0;
}

/*
 * Adds the events that follow j content chunks when a fault or the end of the content decides
 * them. Returns 1 when the batch must stop here (phase changed or no room), 0 to go on.
 */
static int add_boundary(struct st_sim_stream *st, struct st_sim_batch *b, uint32_t j)
{
    const struct st_sim_spec *s = &st->spec;
    if (st_sim_stream_cut_at(st, j)) {
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
    char *p = need ? st_sim_batch_room(b, need) : NULL;
    if (need && !p) {
        return 1;
    }
    if (with_first) {
        st_sim_batch_fixed(b, p, error ? ST_SIM_KIND_ERROR : ST_SIM_KIND_USAGE, first, first_len);
        p += first_len;
    }
    if (s->done) {
        st_sim_batch_fixed(b, p, ST_SIM_KIND_DONE, ST_SIM_EVENT_DONE, done_len);
    }
    st->phase = ST_SIM_PH_ENDED;
    return 1;
}

/* Adds content chunk j (with the role chunk first when it is due with it). 0 when full. */
static int add_content(struct st_sim_stream *st, struct st_sim_batch *b, uint32_t j)
{
    int role = st->role_pending;
    unsigned flags = content_flags(st, j);
    uint32_t ntok = st_sim_chunk_tokens(st->rq.n_tokens, st->spec.tokens_per_chunk, j);
    size_t role_len = role ? st->tmpl.role.len : 0;
    char *p = st_sim_batch_room(b, role_len + st_sim_tmpl_content_max(&st->tmpl, ntok, flags));
    if (!p) {
        return 0;
    }
    if (role) {
        st_sim_batch_fixed(b, p, ST_SIM_KIND_ROLE, st->tmpl.role.data, role_len);
        p += role_len;
        st->role_pending = 0;
    }
    uint64_t tok0 = (uint64_t)j * st->spec.tokens_per_chunk;
    size_t n = st_sim_tmpl_content(&st->tmpl, p, tok0, ntok, flags, tok0 + ntok);
    /* The last chunk carries finish_reason too, but it is traced as content like the others. */
    st_sim_batch_note(b, ST_SIM_KIND_CONTENT, ntok, n);
    st->next_chunk = j + 1;
    return 1;
}

/* Renders every event due by now (up to one batch) and hands them to evhttp. */
static void fill(struct st_sim_stream *st, uint64_t now)
{
    struct st_sim_batch b = {.st = st, .hint = batch_hint(st, now)};
    for (;;) {
        if (b.events + 3 > ST_SIM_BATCH_EVENTS) {
            break;
        }
        if (st->role_pending && st->spec.role_chunk == ST_SIM_ROLE_EARLY) {
            char *p = st_sim_batch_room(&b, st->tmpl.role.len);
            if (!p) {
                break;
            }
            st_sim_batch_fixed(&b, p, ST_SIM_KIND_ROLE, st->tmpl.role.data, st->tmpl.role.len);
            st->role_pending = 0;
        }
        uint32_t j = st->next_chunk;
        if (add_boundary(st, &b, j)) {
            break;
        }
        uint64_t due = st_sim_chunk_due_ns(&st->spec, st->arrival_ns, j);
        /* Comments due before the first token are written before it, however late the timer
         * fired: their number is the spec's (ttft / ping), not the host's. */
        if (j == 0 && st->next_ping_ns && st->next_ping_ns <= now && st->next_ping_ns < due) {
            char *p = st_sim_batch_room(&b, strlen(ST_SIM_EVENT_COMMENT));
            if (!p) {
                break;
            }
            st_sim_batch_fixed(&b, p, ST_SIM_KIND_COMMENT, ST_SIM_EVENT_COMMENT,
                               strlen(ST_SIM_EVENT_COMMENT));
            st->next_ping_ns += st->spec.ping_ns;
            if (st->next_ping_ns >= due) {
                st->next_ping_ns = 0;
            }
            continue;
        }
        if (due > now) {
            break;
        }
        if (!add_content(st, &b, j)) {
            break;
        }
    }
    st_sim_batch_flush(&b);
}

/* The content chunks after which a fault ends the reply (stall, close, reset or an error event),
 * the first of them; UINT64_MAX when none. */
uint64_t st_sim_stream_cut_after(const struct st_sim_spec *s)
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
void st_sim_stream_end_at(struct st_sim_stream *st, uint64_t t)
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
void st_sim_stream_fault_end(struct st_sim_stream *st, uint64_t t)
{
    const struct st_sim_spec *s = &st->spec;
    struct st_sim_live_arr *a = st->arr;
    if (a && s->stall_after == st_sim_stream_cut_after(s)) {
        st->arr = NULL;
        st_sim_live_arr_abort(st->srv->live, a);
        return;
    }
    st_sim_stream_end_at(st, t);
}

/* A model stream whose reply ends (or is cut) and that did not end yet: at its last event. */
static void end_early(struct st_sim_stream *st)
{
    st_sim_stream_end_at(st, st->v_event);
}

/* Ends the chunked reply. st may be freed inside evhttp_send_reply_end; do not touch it after. */
static void end_reply(struct st_sim_stream *st)
{
    if (st->model && st->eng_done) {
        st->srv->mops->replied(st->srv);
    }
    end_early(st);
    if (st->conn_cb) {
        /* Traced when the terminating chunk "0\r\n\r\n" (5 bytes) has been written. */
        struct st_sim_rec r = {.kind = ST_SIM_KIND_CLOSE, .tokens = 0, .bytes = 0};
        pend_push(st, st->out_added + 5, st_clock_mono_ns(), &r);
    } else {
        uint64_t t = st_clock_mono_ns();
        st_sim_stream_trace(st->srv, st->rid, st->rid_len, &st->seq, t, ST_SIM_KIND_CLOSE, 0, 0);
    }
    evhttp_send_reply_end(st->req);
}

/* Cuts the connection once evhttp's output is empty: FIN without the last chunk, or RST. */
static void cut_connection(struct st_sim_stream *st)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(st->evcon);
    if (evbuffer_get_length(bufferevent_get_output(bev)) > 0) {
        arm(st, st_clock_mono_ns() + CLOSE_POLL_NS);
        return;
    }
    int fd = bufferevent_getfd(bev);
    uint64_t t = st_clock_mono_ns();
    st_sim_stream_trace(st->srv, st->rid, st->rid_len, &st->seq, t, ST_SIM_KIND_CLOSE, 0, 0);
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
    st_sim_stream_free(st);
    /* Frees the request too (it is still queued on the connection). */
    evhttp_connection_free(evcon);
}

static void start_stream(struct st_sim_stream *st)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(st->req);
    add_common_headers(st->srv, st->req, "text/event-stream");
    evhttp_add_header(h, "Cache-Control", "no-cache");
    if (st->model) {
        st_sim_stream_clock_headers(st->req, st->v_session, st->v_arrival, st->late_ns, NULL, 0);
        st->v_event = st->vdue;
        st->lag_event = st->lag_arrival;
    }
    st->phase = ST_SIM_PH_STREAM;
    st->role_pending = st->rq.api == ST_SIM_API_CHAT && st->spec.role_chunk != ST_SIM_ROLE_OFF;
    uint64_t first_due = st_sim_chunk_due_ns(&st->spec, st->arrival_ns, 0);
    if (!st->model && st->spec.ping_ns && st->due_ns + st->spec.ping_ns < first_due) {
        st->next_ping_ns = st->due_ns + st->spec.ping_ns;
    }
    watch_output(st);
    uint64_t t = st_clock_mono_ns();
    st->last_write = t;
    evhttp_send_reply_start(st->req, 200, "OK");
    st_sim_stream_trace(st->srv, st->rid, st->rid_len, &st->seq, t, ST_SIM_KIND_HEADERS, 0, 0);
}

/* The non-SSE reply: the completion body, or the fault status. st may be freed afterwards. */
static void send_reply(struct st_sim_stream *st)
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
    st->phase = ST_SIM_PH_ENDED;
    if (st->model) {
        st_sim_stream_clock_headers(st->req, st->v_session, st->v_arrival, st->late_ns, &st->vdue,
                                    st->lag_arrival);
        st->v_event = st->vdue;
        end_early(st);
    }
    uint64_t t = st_clock_mono_ns();
    st_sim_stream_trace(srv, st->rid, st->rid_len, &st->seq, t, ST_SIM_KIND_HEADERS, 0, 0);
    st_sim_stream_trace(srv, st->rid, st->rid_len, &st->seq, t, kind, tokens, b->len);
    st_sim_stream_send_json(srv, st->req, code, b->data, b->len);
}

static void on_vtimer(void *arg)
{
    st_sim_stream_step(arg);
}

/* Whether a ST_SIM_PH_WAIT_* stream must wait on: its due time (virtual in model mode) has not
 * come, and its timer is armed for it. */
static int not_due(struct st_sim_stream *st, uint64_t now)
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

void st_sim_stream_step(struct st_sim_stream *st)
{
    uint64_t now = st_clock_mono_ns();
    switch (st->phase) {
    case ST_SIM_PH_WAIT_REPLY:
        if (st->model && !st->reply_status) {
            if (st->eng_done) {
                st->srv->mops->send_reply(st);
            }
            return;
        }
        if (not_due(st, now)) {
            return;
        }
        send_reply(st);
        return;
    case ST_SIM_PH_WAIT_HEADERS:
        if (not_due(st, now)) {
            return;
        }
        start_stream(st);
        break;
    case ST_SIM_PH_STREAM:
        if (st->draining) {
            return;
        }
        break;
    case ST_SIM_PH_CLOSING:
        if (!st->draining) {
            cut_connection(st);
        }
        return;
    case ST_SIM_PH_STALLED:
    case ST_SIM_PH_ENDED:
    default:
        return;
    }
    if (st->model) {
        st->srv->mops->fill(st);
    } else {
        fill(st, now);
    }
    if (st->phase == ST_SIM_PH_ENDED) {
        end_reply(st);
        return;
    }
    if (st->draining) {
        return;
    }
    if (st->phase == ST_SIM_PH_CLOSING) {
        cut_connection(st);
        return;
    }
    if (st->phase == ST_SIM_PH_STREAM && !st->model) {
        uint64_t due = st_sim_chunk_due_ns(&st->spec, st->arrival_ns, st->next_chunk);
        if (st->next_ping_ns && st->next_ping_ns < due) {
            due = st->next_ping_ns;
        }
        arm(st, due);
    }
}

/* ---- stream creation, request parsing ---- */

/* Allocates a stream for a parsed request; nothing is registered with evhttp yet. */
struct st_sim_stream *st_sim_stream_new(struct st_sim_server *srv, struct evhttp_request *req,
                                        enum st_sim_api api, const struct st_sim_spec *spec,
                                        const struct st_sim_req *rq, uint64_t arrival_ns,
                                        uint64_t id, const char *rid, size_t rid_len)
{
    struct st_sim_stream *st = st_xcalloc(1, sizeof(*st));
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
        .cached_report = srv->live ? (int)srv->prof.engine.cached_report : 0,
    };
    if (srv->trace) {
        st->recs = st_xmalloc(ST_SIM_BATCH_EVENTS * sizeof(*st->recs));
    }
    return st;
}

/* Registers the stream with evhttp, picks its first phase and runs it. status: 0 or the fault
 * status to answer with. */
void st_sim_stream_begin(struct st_sim_stream *st, int status)
{
    const struct st_sim_spec *spec = &st->spec;
    evhttp_connection_set_closecb(st->evcon, on_conn_close, st);
    evhttp_request_set_on_complete_cb(st->req, on_complete, st);
    st->vdue = st->v_arrival + spec->headers_delay_ns;
    if (status) {
        st->phase = ST_SIM_PH_WAIT_REPLY;
        st->reply_status = status;
        st->due_ns = st->arrival_ns + spec->headers_delay_ns;
    } else if (!st->rq.stream || spec->nonsse) {
        st->phase = ST_SIM_PH_WAIT_REPLY;
        st->due_ns = st_sim_body_due_ns(spec, &st->rq, st->arrival_ns);
    } else {
        st_sim_tmpl_init(&st->tmpl, &st->resp);
        if (st->model) {
            st_buf_clear(&st->tmpl.role);
            st_sim_dialect_role(&st->tmpl.role, st->srv->prof.engine.dialect, &st->resp);
        }
        st->phase = ST_SIM_PH_WAIT_HEADERS;
        st->due_ns = st->arrival_ns + spec->headers_delay_ns;
        if (st->model && st_sim_stream_cut_after(spec) == 0) {
            /* Cut before its first chunk: it ends with its headers. */
            st_sim_stream_fault_end(st, st->vdue);
        }
    }
    st_sim_stream_step(st);
}

/* Applies X-Sim to spec and parses the body into rq; on error answers 400 and returns -1. */
int st_sim_stream_parse(struct st_sim_server *srv, struct evhttp_request *req, enum st_sim_api api,
                        const char *rid, size_t rid_len, struct st_sim_spec *spec,
                        struct st_sim_req *rq)
{
    char err[256], msg[320];
    const char *xsim = evhttp_find_header(evhttp_request_get_input_headers(req), "X-Sim");
    if (xsim && st_sim_spec_apply(spec, xsim, strlen(xsim), err, sizeof(err)) != 0) {
        snprintf(msg, sizeof(msg), "X-Sim: %s", err);
        st_sim_stream_send_error(srv, req, rid, rid_len, 400, "BadRequestError", msg);
        return -1;
    }
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    const char *body = len ? (const char *)evbuffer_pullup(in, -1) : "";
    if (st_sim_req_parse(rq, api, body, len, &srv->doc, &srv->scratch, err, sizeof(err)) != 0) {
        st_sim_stream_send_error(srv, req, rid, rid_len, 400, "BadRequestError", err);
        return -1;
    }
    return 0;
}
