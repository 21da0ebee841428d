/*
 * A load worker: libcurl's multi socket API driven by a libevent loop, one thread, shared nothing.
 *
 * Each in-flight request is a slot: an easy handle (reused, so connections stay alive), the
 * request body, an SSE parser and the request's record. libcurl tells us which sockets to watch
 * (sock_cb) and when to call it back (timer_cb); libevent calls on_socket/on_curl_timer, which
 * hand control back to libcurl, and finished transfers are collected in check_done. Body bytes
 * arrive in on_body, which timestamps them once per read and runs the SSE parser and chunk
 * decoder; a 5 ms tick enforces the per-request timeouts and the stop grace period.
 *
 * Invariants: a slot is on the active list exactly while its easy handle is in the multi handle;
 * finish_slot runs exactly once per started request and writes its receipt; a slot is never
 * removed from the multi inside a libcurl callback (errors found there make on_body return 0,
 * which makes libcurl end the transfer, and check_done finishes it).
 */
#include "engine/worker.h"

#include <curl/curl.h>
#include <errno.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <event2/thread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/clock.h"
#include "base/hash.h"
#include "base/xalloc.h"
#include "engine/http.h"
#include "proto/chunk.h"
#include "proto/httphdr.h"
#include "proto/sse.h"
#include "workload/synth.h"

#define TICK_NS (5 * ST_NS_PER_MS)
#define ERRBODY_MAX (64u * 1024u)           /* kept of an error or non-SSE body */
#define NONSTREAM_MAX (64u * 1024u * 1024u) /* a whole non-streaming response */

struct slot {
    struct st_worker *w;
    CURL *easy;
    struct curl_slist *hdrs;
    struct st_buf body;         /* the request body (libcurl reads it in place) */
    struct st_buf prompt;       /* scratch for the prompt text */
    struct st_buf text;         /* content text when --save-text */
    struct st_buf raw;          /* error body, non-SSE body or whole non-streaming body */
    struct st_buf tag;          /* the workload's receipt tag (a JSON object), or empty */
    const char *const *headers; /* the workload's extra headers (borrowed from the item) */
    uint32_t nheaders;
    struct st_sse sse;
    struct st_rec rec;
    int active;
    int headers_done;
    int is_sse;
    uint64_t now;          /* arrival time of the bytes being parsed */
    uint64_t t_last_event; /* last SSE event or header, for the idle timeout */
    uint64_t t_last_byte;  /* last bytes of any kind (the virtual clock's liveness) */
    /* Virtual clock: the stamp of the event being parsed (SSE vt, or X-Sim-Vt) and the logical
     * closed-loop slot the request belongs to. */
    int64_t vt;
    uint32_t vslot;
    char curl_err[CURL_ERROR_SIZE];
    struct slot *prev, *next; /* active list or free list (next only) */
};

struct pending {
    uint64_t id;
    uint64_t t_intended;
};

/* Virtual clock, closed loop: a slot is one declared stream, issuing ids stream, stream + C, ... */
struct vslot {
    uint32_t stream; /* its global index */
    uint64_t k;      /* requests it issued */
    uint64_t quota;  /* requests it may issue; UINT64_MAX: until the duration */
    int64_t v_free;  /* when its last request ended (session ns): the next one's arrival */
    int busy;
};

/* What one request declares to the simulator (docs/sim.md, "Virtual time"). */
struct vdecl {
    uint32_t stream;
    uint32_t vslot;
    uint64_t arrival_ns;
    uint64_t seq; /* its place in its stream (X-Sim-Seq), from 0 */
    char next[96];
};

/* Open loop: most requests a stream keeps in flight when no --max-concurrency bounds it. */
#define VIRTUAL_WINDOW 1024u

struct st_worker {
    const struct st_load_cfg *cfg;
    struct st_worker_share sh;
    struct event_base *base;
    CURLM *multi;
    struct event *curl_timer;
    struct event *tick;
    struct event *arrival;
    struct event *stop_ev;
    struct curl_slist *base_hdrs;
    char *url;
    struct slot *active;    /* doubly linked */
    struct slot *free_list; /* singly linked */
    uint32_t inflight;
    uint32_t nslots;
    /* Closed loop. */
    uint64_t issued_local;
    /* Open loop. */
    struct st_sched sched;
    uint64_t next_id;
    uint64_t next_at;  /* absolute monotonic ns */
    uint64_t next_off; /* its offset from the start (virtual ns against the virtual clock) */
    uint64_t vseq;     /* virtual open loop: requests this worker's stream has declared */
    int arrivals_done;
    /* Virtual clock. */
    int virt;
    struct vslot *vs; /* closed loop: sh.slots of them */
    uint64_t duration_ns;
    struct pending *queue; /* FIFO ring of arrivals waiting for a slot */
    size_t qhead, qlen, qcap;
    uint64_t t_stop_issuing; /* duration limit, absolute; UINT64_MAX = none */
    /* Stop. */
    int stop_req;       /* written by the controlling thread (atomic) */
    int stop_immediate; /* ditto */
    int stopping;       /* no new requests (signal, duration, receipts failure) */
    int no_reuse;       /* each request on a fresh connection: an old libcurl's h2c, or a kept-alive
                         * connection died unanswered (retry_fresh) */
    int signalled;      /* a stop was asked for: the grace period runs */
    uint64_t grace_deadline; /* in-flight requests are aborted from then on */
    int ended;               /* atomic: the thread left its loop */
    /* Results. */
    struct st_metrics m;
    uint64_t issued;
    uint64_t not_sent;
    uint64_t cpu_ns;
    int receipts_error;
    /* Progress, single writer (this thread), read by the controller. */
    uint64_t p_done, p_ok, p_failed, p_tokens, p_inflight;
    /* Scratch. */
    struct st_json json;
    struct st_chunk chunk;
    struct st_buf ctext;
    struct st_buf line;
    pthread_t thread;
};

static void launch_more(struct st_worker *w);

static void set_err(struct slot *s, enum st_err e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(struct slot *s, enum st_err e, const char *fmt, ...)
{
    if (s->rec.err != ST_ERR_NONE) {
        return; /* the first cause wins */
    }
    s->rec.err = e;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->rec.err_msg, sizeof(s->rec.err_msg), fmt, ap);
    va_end(ap);
}

static void pub(uint64_t *field, uint64_t v)
{
    __atomic_store_n(field, v, __ATOMIC_RELAXED);
}

/* ---- libcurl callbacks ---- */

static void take_chunk(struct slot *s, const struct st_chunk *c)
{
    struct st_rec *r = &s->rec;
    struct st_worker *w = s->w;
    if (c->has_content) {
        if (!r->t_first) {
            r->t_first = s->now;
            r->v_first = s->vt;
        }
        r->t_last = s->now;
        r->v_last = s->vt;
        r->content_chunks++;
        r->content_bytes += c->content_bytes;
        int32_t tokens = c->chunk_tokens >= 0 ? (int32_t)c->chunk_tokens : -1;
        st_rec_add_chunk(r, s->now, r->virt ? s->vt : -1, (uint32_t)c->content_bytes, tokens);
        r->text_hash = st_hash_update(r->text_hash, w->ctext.data, w->ctext.len);
        if (w->cfg->save_text) {
            st_buf_append(&s->text, w->ctext.data, w->ctext.len);
        }
    }
    if (c->has_usage) {
        if (c->prompt_tokens >= 0) {
            r->prompt_tokens = c->prompt_tokens;
        }
        if (c->completion_tokens >= 0) {
            r->completion_tokens = c->completion_tokens;
        }
    }
    if (c->cached_tokens >= 0) {
        r->cached_tokens = c->cached_tokens;
        r->cached_from = c->cached_from;
    }
    if (c->draft_n >= 0) {
        r->draft_n = c->draft_n;
        r->draft_accepted = c->draft_n_accepted;
    }
    if (c->finished) {
        r->finished = 1;
        snprintf(r->finish_reason, sizeof(r->finish_reason), "%s", c->finish_reason);
    }
}

static void preview(char *out, size_t cap, const char *data, size_t len)
{
    size_t n = len < cap - 1 ? len : cap - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)data[i];
        out[i] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
    }
    out[n] = '\0';
}

/* A stamp of the simulator's virtual clock: when the event happened and how late it came. */
static void take_stamp(struct slot *s, uint64_t vt, uint64_t lag)
{
    struct st_rec *r = &s->rec;
    s->vt = (int64_t)vt;
    if (s->vt > r->v_end) {
        r->v_end = s->vt;
    }
    if (lag > r->sim_lag_ns) {
        r->sim_lag_ns = lag;
    }
}

static int on_event(void *ctx, const char *data, size_t len)
{
    struct slot *s = ctx;
    struct st_worker *w = s->w;
    struct st_rec *r = &s->rec;
    r->events++;
    s->t_last_event = s->now;
    if (r->virt) {
        if (s->sse.has_vt) {
            take_stamp(s, s->sse.vt_ns, s->sse.vt_lag_ns);
        } else {
            s->vt = -1; /* an event the simulator did not stamp */
        }
    }
    st_buf_clear(&w->ctext);
    int rc = st_chunk_decode(&w->json, data, len, &w->chunk, &w->ctext);
    if (rc) {
        char pv[64];
        preview(pv, sizeof(pv), data, len);
        if (rc == ST_EUTF8) {
            set_err(s, ST_ERR_UTF8, "event %llu: invalid UTF-8 in a JSON string",
                    (unsigned long long)r->events);
        } else {
            set_err(s, ST_ERR_PARSE, "event %llu: %s: %s", (unsigned long long)r->events,
                    st_strerror(rc), pv);
        }
        return rc;
    }
    switch (w->chunk.kind) {
    case ST_CHUNK_DONE:
        r->saw_done = 1;
        break;
    case ST_CHUNK_ERROR:
        set_err(s, ST_ERR_STREAM_ERROR, "server error in stream (code %lld, %s): %s",
                (long long)w->chunk.error_code, w->chunk.error_type, w->chunk.error_message);
        break;
    case ST_CHUNK_DATA:
        take_chunk(s, &w->chunk);
        break;
    }
    return 0;
}

static void headers_complete(struct slot *s)
{
    long code = 0;
    curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &code);
    if (code < 200) {
        return; /* an interim response (100 Continue); the real one follows */
    }
    s->headers_done = 1;
    s->rec.status = code;
    long ver = 0;
    curl_easy_getinfo(s->easy, CURLINFO_HTTP_VERSION, &ver);
    switch (ver) {
    case CURL_HTTP_VERSION_1_0:
        s->rec.http_version = 10;
        break;
    case CURL_HTTP_VERSION_1_1:
        s->rec.http_version = 11;
        break;
    case CURL_HTTP_VERSION_2_0:
        s->rec.http_version = 20;
        break;
    case CURL_HTTP_VERSION_3:
        s->rec.http_version = 30;
        break;
    default:
        break;
    }
    char *ct = NULL;
    curl_easy_getinfo(s->easy, CURLINFO_CONTENT_TYPE, &ct);
    s->is_sse = ct && strncasecmp(ct, "text/event-stream", 17) == 0;
}

/* The virtual clock's headers: where the request was placed, late or not, and for a reply sent
 * whole, its time. */
static void sim_headers(struct slot *s, const char *p, size_t n)
{
    uint64_t a, b;
    if (st_hdr_nums(p, n, "x-sim-arrival:", &a, NULL) == 0) {
        s->rec.v_sent = (int64_t)a;
        s->vt = (int64_t)a;
    } else if (st_hdr_nums(p, n, "x-sim-late:", &a, NULL) == 0) {
        s->rec.sim_late_ns = (int64_t)a;
    } else if (st_hdr_nums(p, n, "x-sim-vt:", &a, &b) == 0) {
        take_stamp(s, a, b);
    }
}

static size_t on_header(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct slot *s = ud;
    size_t n = size * nmemb;
    uint64_t now = st_clock_mono_ns();
    if (!s->rec.t_headers) {
        s->rec.t_headers = now;
    }
    s->t_last_event = now;
    s->t_last_byte = now;
    if (n <= 2 && (ptr[0] == '\r' || ptr[0] == '\n')) {
        headers_complete(s);
    }
    int64_t ra = st_hdr_retry_after(ptr, n);
    if (ra >= 0) {
        s->rec.retry_after_s = ra;
    }
    if (s->rec.virt && n > 6 && (ptr[0] == 'x' || ptr[0] == 'X')) {
        sim_headers(s, ptr, n);
    }
    return n;
}

static int keep_raw(struct slot *s, const char *p, size_t n, size_t max)
{
    if (s->raw.len + n > max) {
        size_t room = max > s->raw.len ? max - s->raw.len : 0;
        st_buf_append(&s->raw, p, room);
        return -1;
    }
    st_buf_append(&s->raw, p, n);
    return 0;
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct slot *s = ud;
    size_t n = size * nmemb;
    struct st_rec *r = &s->rec;
    s->now = st_clock_mono_ns();
    s->t_last_byte = s->now;
    r->body_bytes += n;
    if (!s->headers_done) {
        headers_complete(s); /* HTTP/2 or a server that sent no blank line callback */
    }
    if (r->status != 200) {
        (void)keep_raw(s, ptr, n, ERRBODY_MAX); /* the rest is dropped; the status says it all */
        return n;
    }
    if (!s->w->cfg->stream) {
        if (keep_raw(s, ptr, n, NONSTREAM_MAX)) {
            set_err(s, ST_ERR_OVERSIZE, "response body over %u bytes", NONSTREAM_MAX);
            return 0;
        }
        return n;
    }
    if (!s->is_sse) {
        (void)keep_raw(s, ptr, n, ERRBODY_MAX);
        return n;
    }
    int rc = st_sse_feed(&s->sse, ptr, n, on_event, s);
    if (rc == ST_ETOOBIG) {
        set_err(s, ST_ERR_OVERSIZE, "an SSE event exceeded %zu bytes", s->w->cfg->max_event_bytes);
        return 0;
    }
    if (rc) {
        return 0; /* on_event recorded why */
    }
    return n;
}

/* ---- finishing a request ---- */

/* The error class of a failed transfer; CURLE_OPERATION_TIMEDOUT is told apart by the caller. */
static enum st_err class_of(CURLcode cc)
{
    switch (cc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return ST_ERR_CONNECT;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
        return ST_ERR_TLS;
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return ST_ERR_CLOSED;
    default:
        return ST_ERR_OTHER;
    }
}

static void classify_curl(struct slot *s, CURLcode cc)
{
    const char *msg = s->curl_err[0] ? s->curl_err : curl_easy_strerror(cc);
    enum st_err e = class_of(cc);
    if (cc == CURLE_OPERATION_TIMEDOUT) {
        /* Before the headers the server never answered: a connect-side failure. */
        e = s->rec.t_headers ? ST_ERR_TOTAL_TIMEOUT : ST_ERR_CONNECT;
    }
    if (e == ST_ERR_CLOSED) {
        set_err(s, e, "connection closed early: %s", msg);
    } else {
        set_err(s, e, "%s", msg);
    }
}

/* A non-200 answer: keep the server's own words. */
static void classify_status(struct slot *s)
{
    struct st_worker *w = s->w;
    char pv[160];
    if (s->raw.len && st_chunk_decode(&w->json, s->raw.data, s->raw.len, &w->chunk, NULL) == 0 &&
        w->chunk.kind == ST_CHUNK_ERROR) {
        set_err(s, ST_ERR_STATUS, "HTTP %ld: %s", s->rec.status, w->chunk.error_message);
        return;
    }
    preview(pv, sizeof(pv), st_buf_str(&s->raw), s->raw.len);
    set_err(s, ST_ERR_STATUS, "HTTP %ld: %s", s->rec.status, pv);
}

static void finish_nonstream(struct slot *s)
{
    struct st_worker *w = s->w;
    st_buf_clear(&w->ctext);
    int rc =
        st_chunk_decode(&w->json, s->raw.data ? s->raw.data : "", s->raw.len, &w->chunk, &w->ctext);
    if (rc == ST_EUTF8) {
        set_err(s, ST_ERR_UTF8, "response body: invalid UTF-8 in a JSON string");
        return;
    }
    if (rc) {
        char pv[64];
        preview(pv, sizeof(pv), st_buf_str(&s->raw), s->raw.len);
        set_err(s, ST_ERR_PARSE, "response body is not a JSON object: %s", pv);
        return;
    }
    if (w->chunk.kind == ST_CHUNK_ERROR) {
        set_err(s, ST_ERR_STREAM_ERROR, "server error (code %lld): %s",
                (long long)w->chunk.error_code, w->chunk.error_message);
        return;
    }
    s->now = s->rec.t_end;
    s->rec.events = 1;
    take_chunk(s, &w->chunk);
    if (!s->rec.finished) {
        set_err(s, ST_ERR_PARSE, "response has no finish_reason");
    }
}

static void finish_stream(struct slot *s)
{
    struct st_rec *r = &s->rec;
    if (!s->is_sse) {
        char pv[96];
        char *ct = NULL;
        curl_easy_getinfo(s->easy, CURLINFO_CONTENT_TYPE, &ct);
        preview(pv, sizeof(pv), st_buf_str(&s->raw), s->raw.len);
        set_err(s, ST_ERR_NOT_SSE, "streaming request answered with Content-Type %s: %s",
                ct ? ct : "(none)", pv);
        return;
    }
    s->now = r->t_end;
    int rc = st_sse_finish(&s->sse, on_event, s);
    if (rc == ST_EPROTO) {
        set_err(s, ST_ERR_CLOSED, "body ended inside an SSE event");
        return;
    }
    if (!r->finished && !r->saw_done) {
        set_err(s, ST_ERR_CLOSED, "stream ended without finish_reason or [DONE] after %llu events",
                (unsigned long long)r->events);
    }
}

static void write_receipt(struct slot *s)
{
    struct st_worker *w = s->w;
    if (!w->cfg->receipts) {
        return;
    }
    struct st_jw jw;
    st_buf_clear(&w->line);
    st_jw_init(&jw, &w->line);
    st_rec_write_json(&s->rec, &jw, w->cfg->chunk_times,
                      w->cfg->save_text ? st_buf_str(&s->text) : NULL, s->text.len, s->tag.data,
                      s->tag.len);
    st_buf_putc(&w->line, '\n');
    int rc = st_receipts_append(w->cfg->receipts, w->line.data, w->line.len);
    if (rc && !w->receipts_error) {
        /* Nothing can be recorded any more: stop issuing, let the run end cleanly. */
        w->receipts_error = rc;
        w->stopping = 1;
        w->grace_deadline = st_clock_mono_ns();
    }
}

static void unlink_active(struct st_worker *w, struct slot *s)
{
    if (s->prev) {
        s->prev->next = s->next;
    } else {
        w->active = s->next;
    }
    if (s->next) {
        s->next->prev = s->prev;
    }
    s->prev = s->next = NULL;
}

/* Ends a request whose easy handle has already left the multi handle. */
static void finish_slot(struct slot *s, CURLcode cc, int have_cc)
{
    struct st_worker *w = s->w;
    struct st_rec *r = &s->rec;
    if (!r->t_end) {
        r->t_end = st_clock_mono_ns();
    }
    if (r->err == ST_ERR_NONE) {
        if (have_cc && cc != CURLE_OK) {
            classify_curl(s, cc);
        } else if (r->status != 200) {
            classify_status(s);
        } else if (w->cfg->stream) {
            finish_stream(s);
        } else {
            finish_nonstream(s);
        }
    }
    if (r->completion_tokens < 0 && r->content_chunks > 0) {
        r->completion_tokens = (int64_t)r->content_chunks;
        r->tokens_estimated = 1;
    }
    r->comments = s->sse.comments;
    if (r->virt && w->vs) {
        /* The slot's next request arrives when this one ended, as the simulator saw it. */
        struct vslot *v = &w->vs[s->vslot];
        v->busy = 0;
        if (r->v_end >= 0) {
            v->v_free = r->v_end;
        } else if (r->v_sent >= 0) {
            v->v_free = r->v_sent;
        }
    }
    st_metrics_observe(&w->m, r);
    write_receipt(s);

    pub(&w->p_done, w->p_done + 1);
    if (r->err == ST_ERR_NONE) {
        pub(&w->p_ok, w->p_ok + 1);
        if (r->completion_tokens > 0) {
            pub(&w->p_tokens, w->p_tokens + (uint64_t)r->completion_tokens);
        }
    } else {
        pub(&w->p_failed, w->p_failed + 1);
    }

    unlink_active(w, s);
    s->active = 0;
    curl_slist_free_all(s->hdrs);
    s->hdrs = NULL;
    s->next = w->free_list;
    w->free_list = s;
    w->inflight--;
    pub(&w->p_inflight, w->inflight);
}

/* Takes an in-flight request out of libcurl and ends it with err (timeouts, stop). */
static void abort_slot(struct slot *s, enum st_err e, const char *msg)
{
    struct st_worker *w = s->w;
    set_err(s, e, "%s", msg);
    curl_multi_remove_handle(w->multi, s->easy);
    finish_slot(s, CURLE_OK, 0);
}

/*
 * A server that closes a kept-alive connection after its answer (llama.cpp b4748 sends
 * Keep-Alive and closes after each stream) leaves dead connections in the pool; libcurl retries
 * on pooled ones and gives up ("Connection died, tried 5 times"). When a transfer failed as
 * closed with no byte of an answer, the worker stops reusing connections and sends it once more
 * on a fresh one (docs/metrics.md); the receipt says so (retried_fresh). Returns 1 when resent.
 */
static int retry_fresh(struct slot *s, CURLcode cc)
{
    struct st_worker *w = s->w;
    if (s->rec.retried_fresh || w->stopping || s->rec.err != ST_ERR_NONE || s->rec.t_headers ||
        s->raw.len || class_of(cc) != ST_ERR_CLOSED || cc == CURLE_PARTIAL_FILE) {
        return 0;
    }
    w->no_reuse = 1;
    s->rec.retried_fresh = 1;
    s->rec.t_end = 0;
    s->curl_err[0] = '\0';
    curl_easy_setopt(s->easy, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(s->easy, CURLOPT_FORBID_REUSE, 1L);
    return curl_multi_add_handle(w->multi, s->easy) == CURLM_OK;
}

static void check_done(struct st_worker *w)
{
    CURLMsg *msg;
    int left;
    int finished_any = 0;
    while ((msg = curl_multi_info_read(w->multi, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE) {
            continue;
        }
        CURL *easy = msg->easy_handle;
        CURLcode cc = msg->data.result;
        struct slot *s = NULL;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&s);
        s->rec.t_end = st_clock_mono_ns();
        curl_multi_remove_handle(w->multi, easy);
        if (retry_fresh(s, cc)) {
            continue;
        }
        finish_slot(s, cc, 1);
        finished_any = 1;
    }
    if (finished_any) {
        launch_more(w);
    }
}

/* ---- libcurl <-> libevent glue ---- */

struct sockinfo {
    struct event ev;
    int added;
};

static void on_socket(evutil_socket_t fd, short what, void *arg)
{
    struct st_worker *w = arg;
    int action =
        ((what & EV_READ) ? CURL_CSELECT_IN : 0) | ((what & EV_WRITE) ? CURL_CSELECT_OUT : 0);
    int running;
    curl_multi_socket_action(w->multi, fd, action, &running);
    check_done(w);
}

static int sock_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *sockp)
{
    (void)easy;
    struct st_worker *w = userp;
    struct sockinfo *si = sockp;
    if (what == CURL_POLL_REMOVE) {
        if (si) {
            if (si->added) {
                event_del(&si->ev);
            }
            free(si);
            curl_multi_assign(w->multi, fd, NULL);
        }
        return 0;
    }
    if (!si) {
        si = st_xcalloc(1, sizeof(*si));
        curl_multi_assign(w->multi, fd, si);
    } else if (si->added) {
        event_del(&si->ev);
    }
    short kind = EV_PERSIST | ((what & CURL_POLL_IN) ? EV_READ : 0) |
                 ((what & CURL_POLL_OUT) ? EV_WRITE : 0);
    event_assign(&si->ev, w->base, fd, kind, on_socket, w);
    event_add(&si->ev, NULL);
    si->added = 1;
    return 0;
}

static void on_curl_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct st_worker *w = arg;
    int running;
    curl_multi_socket_action(w->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_done(w);
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    (void)multi;
    struct st_worker *w = userp;
    if (timeout_ms < 0) {
        evtimer_del(w->curl_timer);
        return 0;
    }
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    evtimer_add(w->curl_timer, &tv);
    return 0;
}

/* ---- issuing requests ---- */

static struct slot *get_slot(struct st_worker *w)
{
    struct slot *s = w->free_list;
    if (s) {
        w->free_list = s->next;
        s->next = NULL;
        return s;
    }
    s = st_xcalloc(1, sizeof(*s));
    s->w = w;
    st_buf_init(&s->body);
    st_buf_init(&s->prompt);
    st_buf_init(&s->text);
    st_buf_init(&s->raw);
    st_buf_init(&s->tag);
    st_sse_init(&s->sse, w->cfg->max_event_bytes);
    st_rec_init(&s->rec);
    w->nslots++;
    return s;
}

static CURL *make_easy(struct st_worker *w, struct slot *s)
{
    const struct st_load_cfg *c = w->cfg;
    CURL *e = curl_easy_init();
    if (!e) {
        return NULL;
    }
    curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)s);
    curl_easy_setopt(e, CURLOPT_URL, w->url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, s);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, s->curl_err);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    /* libcurl keeps one receive buffer of this size per transfer: large ones cut callbacks when
     * few streams carry bursts, small ones keep 10,000 open streams within memory. */
    long bufsize = 64L * 1024L;
    if (w->sh.slots > 4096) {
        bufsize = 2L * 1024L;
    } else if (w->sh.slots == 0 || w->sh.slots > 2048) {
        bufsize = 4L * 1024L;
    } else if (w->sh.slots > 256) {
        bufsize = 16L * 1024L;
    }
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, bufsize);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)c->connect_timeout_ms);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    long ver = CURL_HTTP_VERSION_1_1;
    if (c->http == ST_HTTP_2) {
        ver = CURL_HTTP_VERSION_2_0;
    } else if (c->http == ST_HTTP_H2C) {
        ver = CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE;
        /* libcurl before 8.0.0 breaks a reused prior-knowledge connection ("Error in the HTTP2
         * framing layer", curl issue 10634, fixed by curl PR 10643): give each request its own
         * connection there, neither reused nor shared. HTTP/2 over TLS (ALPN) reuses and
         * multiplexes normally. */
        if (curl_version_info(CURLVERSION_NOW)->version_num < 0x080000) {
            w->no_reuse = 1;
        }
    } else if (strncasecmp(c->base_url, "https:", 6) == 0) {
        ver = CURL_HTTP_VERSION_2TLS;
    }
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, ver);
    if (c->insecure) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    return e;
}

/* Builds the body of request id into s->body (the item's fields override the run's). */
static int prepare_body(struct st_worker *w, struct slot *s, uint64_t id)
{
    const struct st_load_cfg *c = w->cfg;
    struct st_oaireq q;
    struct st_req_item item;
    st_oaireq_defaults(&q);
    st_buf_clear(&s->prompt);
    s->nheaders = 0;
    s->headers = NULL;
    if (c->source) {
        memset(&item, 0, sizeof(item));
        item.max_tokens = -1;
        item.ignore_eos = -1;
        item.input_tokens = -1;
        item.id_slot = -1;
        int rc = c->source(c->source_ctx, id, &item, &s->prompt);
        if (rc) {
            set_err(s, ST_ERR_OTHER, "workload: %.200s", st_buf_str(&s->prompt));
            return rc;
        }
        q.prompt = item.prompt;
        q.prompt_len = item.prompt_len;
        q.messages_json = item.messages_json;
        q.messages_len = item.messages_len;
        s->rec.input_len = item.input_tokens;
        if (item.max_tokens >= 0) {
            s->rec.output_len = item.max_tokens;
        }
        s->headers = item.headers;
        s->nheaders = item.n_headers;
        st_buf_clear(&s->tag);
        if (item.tag_json) {
            st_buf_append(&s->tag, item.tag_json, item.tag_len);
        }
        q.ignore_eos = item.ignore_eos >= 0 ? item.ignore_eos : c->ignore_eos;
        q.id_slot = item.id_slot;
    } else {
        size_t nbytes = c->input_len > 0 ? (size_t)c->input_len * 4 : 1;
        st_synth_text(c->prompt_seed, id, nbytes, &s->prompt);
        q.prompt = s->prompt.data;
        q.prompt_len = s->prompt.len;
        q.ignore_eos = c->ignore_eos;
        st_buf_clear(&s->tag);
    }
    q.api = c->api;
    q.model = c->model;
    q.stream = c->stream;
    q.include_usage = c->include_usage;
    q.max_tokens = s->rec.output_len;
    q.min_tokens = q.ignore_eos ? s->rec.output_len : -1;
    q.has_temperature = c->has_temperature;
    q.temperature = c->temperature;
    q.has_seed = c->has_seed;
    q.seed = c->seed;
    q.extra_body = c->extra_body;
    q.extra_body_len = c->extra_body ? strlen(c->extra_body) : 0;
    st_buf_clear(&s->body);
    int rc = st_oaireq_build(&q, &s->body, NULL, 0);
    if (rc) {
        set_err(s, ST_ERR_OTHER, "could not build the request body (bad --extra-body?)");
    }
    return rc;
}

/* Appends the session headers of a request that declares vd (docs/sim.md, "Virtual time"). */
static struct curl_slist *session_headers(const struct st_worker *w, const struct vdecl *vd,
                                          struct curl_slist *h)
{
    char line[160];
    snprintf(line, sizeof(line), "X-Sim-Session: %s", w->sh.session);
    h = curl_slist_append(h, line);
    snprintf(line, sizeof(line), "X-Sim-Streams: %u", w->sh.streams);
    h = h ? curl_slist_append(h, line) : NULL;
    snprintf(line, sizeof(line), "X-Sim-Stream: %u", vd->stream);
    h = h ? curl_slist_append(h, line) : NULL;
    snprintf(line, sizeof(line), "X-Sim-Arrival: %llu", (unsigned long long)vd->arrival_ns);
    h = h ? curl_slist_append(h, line) : NULL;
    snprintf(line, sizeof(line), "X-Sim-Seq: %llu", (unsigned long long)vd->seq);
    h = h ? curl_slist_append(h, line) : NULL;
    snprintf(line, sizeof(line), "X-Sim-Next: %s", vd->next);
    return h ? curl_slist_append(h, line) : NULL;
}

/* Starts request id, intended at t_intended (and, against the virtual clock, declared as vd).
 * On failure the request still gets a receipt. */
static void start_request(struct st_worker *w, uint64_t id, uint64_t t_intended,
                          const struct vdecl *vd)
{
    const struct st_load_cfg *c = w->cfg;
    struct slot *s = get_slot(w);
    st_rec_reset(&s->rec);
    struct st_rec *r = &s->rec;
    r->id = id;
    r->warmup = id < c->warmup;
    r->t_intended = t_intended;
    s->vt = -1;
    if (vd) {
        r->virt = 1;
        r->v_intended = (int64_t)vd->arrival_ns;
        s->vslot = vd->vslot;
    }
    r->input_len = c->input_len;
    r->output_len = c->output_len;
    r->tls_unverified = c->insecure && strncasecmp(c->base_url, "https:", 6) == 0;
    s->headers_done = 0;
    s->is_sse = 0;
    s->curl_err[0] = '\0';
    st_buf_clear(&s->text);
    st_buf_clear(&s->raw);
    st_sse_release(&s->sse);
    st_sse_init(&s->sse, c->max_event_bytes);

    s->active = 1;
    s->prev = NULL;
    s->next = w->active;
    if (w->active) {
        w->active->prev = s;
    }
    w->active = s;
    w->inflight++;
    w->issued++;
    pub(&w->p_inflight, w->inflight);

    if (prepare_body(w, s, id) != 0) {
        r->t_sent = st_clock_mono_ns();
        finish_slot(s, CURLE_OK, 0);
        return;
    }
    r->body_hash = st_hash64(s->body.data, s->body.len);
    if (!s->easy) {
        s->easy = make_easy(w, s);
    }
    char rid[64];
    snprintf(rid, sizeof(rid), "X-Request-Id: st-%llu", (unsigned long long)id);
    struct curl_slist *h = NULL;
    for (struct curl_slist *b = w->base_hdrs; b; b = b->next) {
        h = curl_slist_append(h, b->data);
    }
    h = curl_slist_append(h, rid);
    for (uint32_t i = 0; i < s->nheaders && h; i++) {
        h = curl_slist_append(h, s->headers[i]);
    }
    if (vd && h) {
        h = session_headers(w, vd, h);
    }
    s->hdrs = h;
    if (!s->easy || !h) {
        r->t_sent = st_clock_mono_ns();
        set_err(s, ST_ERR_OTHER, "libcurl could not create a request");
        finish_slot(s, CURLE_OK, 0);
        return;
    }
    curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, s->body.data);
    curl_easy_setopt(s->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)s->body.len);
    curl_easy_setopt(s->easy, CURLOPT_FRESH_CONNECT, (long)w->no_reuse);
    curl_easy_setopt(s->easy, CURLOPT_FORBID_REUSE, (long)w->no_reuse);
    r->t_sent = st_clock_mono_ns();
    s->t_last_event = r->t_sent;
    s->t_last_byte = r->t_sent;
    CURLMcode mc = curl_multi_add_handle(w->multi, s->easy);
    if (mc != CURLM_OK) {
        set_err(s, ST_ERR_OTHER, "curl_multi_add_handle: %s", curl_multi_strerror(mc));
        finish_slot(s, CURLE_OK, 0);
    }
}

static int open_loop(const struct st_worker *w)
{
    return w->cfg->rate > 0;
}

static int may_issue(struct st_worker *w, uint64_t now)
{
    if (w->stopping) {
        return 0;
    }
    if (now >= w->t_stop_issuing) {
        return 0;
    }
    return 1;
}

static void queue_push(struct st_worker *w, uint64_t id, uint64_t t)
{
    if (w->qlen == w->qcap) {
        size_t ncap = w->qcap ? w->qcap * 2 : 64;
        struct pending *nq = st_xmalloc(ncap * sizeof(*nq));
        for (size_t i = 0; i < w->qlen; i++) {
            nq[i] = w->queue[(w->qhead + i) % w->qcap];
        }
        free(w->queue);
        w->queue = nq;
        w->qcap = ncap;
        w->qhead = 0;
    }
    w->queue[(w->qhead + w->qlen) % w->qcap] = (struct pending){.id = id, .t_intended = t};
    w->qlen++;
}

static void advance_arrival(struct st_worker *w)
{
    const struct st_load_cfg *c = w->cfg;
    /* Walk the common schedule to this worker's next arrival. */
    for (;;) {
        uint64_t idx = w->sched.next_idx;
        uint64_t off = st_sched_next(&w->sched);
        if (c->trace_arrivals && c->source) {
            /* Trace replay: the item says when; an item that cannot be built ends the arrivals
             * (its request would fail anyway) and one without a time keeps the schedule's. */
            struct st_req_item item;
            memset(&item, 0, sizeof(item));
            item.t_offset_ns = UINT64_MAX;
            st_buf_clear(&w->ctext);
            if (c->source(c->source_ctx, idx, &item, &w->ctext) != 0) {
                w->arrivals_done = 1;
                return;
            }
            if (item.t_offset_ns != UINT64_MAX) {
                off = item.t_offset_ns;
            }
        }
        if (c->requests && idx >= c->requests) {
            w->arrivals_done = 1;
            return;
        }
        if (c->duration_s > 0 && (double)off >= c->duration_s * 1e9) {
            w->arrivals_done = 1;
            return;
        }
        if (idx % w->sh.workers == w->sh.index) {
            w->next_id = idx;
            w->next_off = off;
            w->next_at = w->sh.t0 + off;
            return;
        }
    }
}

static int cap_reached(const struct st_worker *w)
{
    return w->sh.slots && w->inflight >= w->sh.slots;
}

static void arm_arrival(struct st_worker *w, uint64_t now)
{
    if (w->arrivals_done || w->stopping) {
        return;
    }
    uint64_t dt = w->next_at > now ? w->next_at - now : 0;
    struct timeval tv = {.tv_sec = (time_t)(dt / ST_NS_PER_S),
                         .tv_usec = (suseconds_t)((dt % ST_NS_PER_S) / 1000)};
    evtimer_add(w->arrival, &tv);
}

/* Virtual clock, closed loop: slot j may issue its next request. */
static int vslot_ready(const struct st_worker *w, const struct vslot *v)
{
    if (v->busy || v->k >= v->quota) {
        return 0;
    }
    /* A duration ends issuing at the simulator's time the slot's next request would arrive. */
    return !w->duration_ns || v->k == 0 || (uint64_t)v->v_free < w->duration_ns;
}

static void maybe_end(struct st_worker *w)
{
    int more = 0;
    if (w->virt && !open_loop(w)) {
        for (uint32_t j = 0; j < w->sh.slots && !more && !w->stopping; j++) {
            more = vslot_ready(w, &w->vs[j]);
        }
    } else if (open_loop(w)) {
        more = (!w->arrivals_done && !w->stopping) || w->qlen > 0;
    } else {
        more =
            !w->stopping && w->issued_local < w->sh.quota && st_clock_mono_ns() < w->t_stop_issuing;
    }
    if (!more && w->inflight == 0) {
        event_base_loopbreak(w->base);
    }
}

/* Virtual clock: every slot (closed loop) or every arrival within the cap (open loop) that may
 * go goes now; the simulator places each at its declared virtual time. */
static void launch_virtual(struct st_worker *w)
{
    const struct st_load_cfg *c = w->cfg;
    char until[40] = "";
    if (w->duration_ns) {
        snprintf(until, sizeof(until), ",until=%llu", (unsigned long long)w->duration_ns);
    }
    if (!open_loop(w)) {
        for (uint32_t j = 0; j < w->sh.slots && !w->stopping; j++) {
            struct vslot *v = &w->vs[j];
            if (!vslot_ready(w, v)) {
                continue;
            }
            struct vdecl vd = {.stream = v->stream,
                               .vslot = j,
                               .arrival_ns = v->k ? (uint64_t)v->v_free : 0,
                               .seq = v->k};
            uint64_t id = v->stream + v->k * c->concurrency;
            v->k++;
            v->busy = 1;
            snprintf(vd.next, sizeof(vd.next), v->k < v->quota ? "at=0,cap=1%s" : "none", until);
            start_request(w, id, st_clock_mono_ns(), &vd);
        }
        return;
    }
    uint32_t cap = w->sh.slots ? w->sh.slots : VIRTUAL_WINDOW;
    while (!w->arrivals_done && !w->stopping && w->inflight < cap) {
        struct vdecl vd = {.stream = w->sh.index, .arrival_ns = w->next_off, .seq = w->vseq++};
        uint64_t id = w->next_id, at = w->next_at;
        advance_arrival(w);
        if (w->arrivals_done) {
            snprintf(vd.next, sizeof(vd.next), "none");
        } else {
            snprintf(vd.next, sizeof(vd.next), "at=%llu,cap=%u", (unsigned long long)w->next_off,
                     cap);
        }
        start_request(w, id, at, &vd);
    }
}

static void launch_more(struct st_worker *w)
{
    uint64_t now = st_clock_mono_ns();
    if (w->virt) {
        launch_virtual(w);
    } else if (open_loop(w)) {
        while (w->qlen > 0 && !cap_reached(w) && !w->stopping) {
            struct pending p = w->queue[w->qhead];
            w->qhead = (w->qhead + 1) % w->qcap;
            w->qlen--;
            start_request(w, p.id, p.t_intended, NULL);
        }
    } else {
        while (w->inflight < w->sh.slots && w->issued_local < w->sh.quota && may_issue(w, now)) {
            uint64_t id = w->issued_local * w->sh.workers + w->sh.index;
            w->issued_local++;
            start_request(w, id, st_clock_mono_ns(), NULL);
        }
    }
    maybe_end(w);
}

static void on_arrival(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct st_worker *w = arg;
    uint64_t now = st_clock_mono_ns();
    while (!w->arrivals_done && !w->stopping && w->next_at <= now) {
        if (cap_reached(w) || w->qlen > 0) {
            queue_push(w, w->next_id, w->next_at);
        } else {
            start_request(w, w->next_id, w->next_at, NULL);
        }
        advance_arrival(w);
        now = st_clock_mono_ns();
    }
    arm_arrival(w, now);
    maybe_end(w);
}

/* ---- timeouts and stop ---- */

static void check_deadlines(struct st_worker *w, uint64_t now)
{
    const struct st_load_cfg *c = w->cfg;
    struct slot *s = w->active;
    while (s) {
        struct slot *next = s->next; /* s may be finished below */
        const struct st_rec *r = &s->rec;
        char msg[96];
        /* Against the virtual clock a request may wait long in the simulator's time, and the
         * simulator keeps it alive with comments: the first-token and idle timeouts then count
         * from its last bytes, so only a silent simulator (a stall, a hang) ends it. */
        uint64_t since_first = r->virt ? s->t_last_byte : r->t_sent;
        uint64_t since_idle = r->virt ? s->t_last_byte : s->t_last_event;
        if (w->stopping && now >= w->grace_deadline) {
            abort_slot(s, ST_ERR_INTERRUPTED, "run stopped before the request ended");
        } else if (c->total_timeout_ms && now - r->t_sent >= c->total_timeout_ms * ST_NS_PER_MS) {
            snprintf(msg, sizeof(msg), "no end after %llu ms",
                     (unsigned long long)c->total_timeout_ms);
            abort_slot(s, ST_ERR_TOTAL_TIMEOUT, msg);
        } else if (!r->t_headers && c->headers_timeout_ms &&
                   now - r->t_sent >= c->headers_timeout_ms * ST_NS_PER_MS) {
            snprintf(msg, sizeof(msg), "no response headers after %llu ms",
                     (unsigned long long)c->headers_timeout_ms);
            abort_slot(s, ST_ERR_HEADERS_TIMEOUT, msg);
        } else if (!r->t_first && c->first_token_timeout_ms &&
                   now - since_first >= c->first_token_timeout_ms * ST_NS_PER_MS) {
            snprintf(msg, sizeof(msg), "no content after %llu ms",
                     (unsigned long long)c->first_token_timeout_ms);
            abort_slot(s, ST_ERR_FIRST_TOKEN_TIMEOUT, msg);
        } else if (r->t_headers && c->idle_timeout_ms &&
                   now - since_idle >= c->idle_timeout_ms * ST_NS_PER_MS) {
            snprintf(msg, sizeof(msg), "no event for %llu ms after %llu events",
                     (unsigned long long)c->idle_timeout_ms, (unsigned long long)r->events);
            abort_slot(s, ST_ERR_STALL, msg);
        }
        s = next;
    }
}

static void begin_stop(struct st_worker *w, int immediate)
{
    uint64_t now = st_clock_mono_ns();
    if (!w->signalled) {
        w->signalled = 1;
        w->stopping = 1;
        uint64_t grace = now + w->cfg->grace_ms * ST_NS_PER_MS;
        if (grace < w->grace_deadline || w->grace_deadline == 0) {
            w->grace_deadline = grace;
        }
        evtimer_del(w->arrival);
        w->not_sent += w->qlen;
        w->qlen = 0;
    }
    if (immediate) {
        w->grace_deadline = now;
    }
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct st_worker *w = arg;
    if (__atomic_load_n(&w->stop_req, __ATOMIC_ACQUIRE)) {
        begin_stop(w, __atomic_load_n(&w->stop_immediate, __ATOMIC_ACQUIRE));
    }
    uint64_t now = st_clock_mono_ns();
    if (!open_loop(w) && !w->virt && !w->stopping && now >= w->t_stop_issuing) {
        w->stopping = 1; /* duration reached: in-flight requests finish normally */
        w->grace_deadline = UINT64_MAX;
    }
    check_deadlines(w, now);
    launch_more(w); /* slots freed by timeouts take the next requests */
}

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct st_worker *w = arg;
    begin_stop(w, __atomic_load_n(&w->stop_immediate, __ATOMIC_ACQUIRE));
    check_deadlines(w, st_clock_mono_ns());
    maybe_end(w);
}

/* ---- lifecycle ---- */

static char *join_url(const struct st_load_cfg *c)
{
    struct st_buf u;
    st_buf_init(&u);
    st_buf_puts(&u, c->base_url);
    st_buf_puts(&u, st_oaireq_path(c->api));
    return st_buf_take(&u);
}

struct st_worker *st_worker_new(const struct st_load_cfg *cfg, const struct st_worker_share *sh,
                                char *err, size_t errlen)
{
    struct st_worker *w = st_xcalloc(1, sizeof(*w));
    w->cfg = cfg;
    w->sh = *sh;
    struct event_config *ec = event_config_new();
    /* Open-loop arrivals need microsecond timers; a closed loop only needs its 5 ms tick, and
     * without timerfd re-arming the one-token-per-write client spends about 9% less CPU. */
    if (cfg->rate > 0) {
        event_config_set_flag(ec, EVENT_BASE_FLAG_PRECISE_TIMER);
    }
    w->base = event_base_new_with_config(ec);
    event_config_free(ec);
    w->multi = curl_multi_init();
    if (!w->base || !w->multi) {
        snprintf(err, errlen, "worker %u: cannot create an event base or a libcurl multi handle",
                 sh->index);
        st_worker_free(w);
        return NULL;
    }
    curl_multi_setopt(w->multi, CURLMOPT_SOCKETFUNCTION, sock_cb);
    curl_multi_setopt(w->multi, CURLMOPT_SOCKETDATA, w);
    curl_multi_setopt(w->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    curl_multi_setopt(w->multi, CURLMOPT_TIMERDATA, w);
    curl_multi_setopt(w->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    long maxconn = sh->slots ? (long)sh->slots + 16 : 1024;
    curl_multi_setopt(w->multi, CURLMOPT_MAXCONNECTS, maxconn);
    w->curl_timer = evtimer_new(w->base, on_curl_timer, w);
    w->tick = event_new(w->base, -1, EV_PERSIST, on_tick, w);
    w->arrival = evtimer_new(w->base, on_arrival, w);
    w->stop_ev = event_new(w->base, -1, 0, on_stop, w);
    w->url = join_url(cfg);
    w->base_hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    w->base_hdrs = curl_slist_append(w->base_hdrs, "Expect:"); /* no 100-continue round trip */
    if (cfg->stream) {
        w->base_hdrs = curl_slist_append(w->base_hdrs, "Accept: text/event-stream");
    }
    w->base_hdrs = st_http_auth_append(w->base_hdrs, cfg->api_key);
    st_metrics_init(&w->m);
    st_json_init(&w->json, 0);
    st_buf_init(&w->ctext);
    st_buf_init(&w->line);
    w->t_stop_issuing =
        cfg->duration_s > 0 ? sh->t0 + (uint64_t)(cfg->duration_s * 1e9) : UINT64_MAX;
    if (cfg->virtual_clock) {
        /* The duration is the simulator's time; the wall clock never stops issuing. */
        w->virt = 1;
        w->t_stop_issuing = UINT64_MAX;
        w->duration_ns = cfg->duration_s > 0 ? (uint64_t)(cfg->duration_s * 1e9) : 0;
        if (cfg->rate <= 0) {
            w->vs = st_xcalloc(sh->slots ? sh->slots : 1, sizeof(*w->vs));
            for (uint32_t j = 0; j < sh->slots; j++) {
                uint32_t g = sh->slot0 + j;
                w->vs[j].stream = g;
                w->vs[j].quota = cfg->requests ? cfg->requests / cfg->concurrency +
                                                     (g < cfg->requests % cfg->concurrency ? 1 : 0)
                                               : UINT64_MAX;
            }
        }
    }
    if (cfg->rate > 0) {
        st_sched_init(&w->sched, cfg->arrival, cfg->rate, cfg->sched_seed);
        advance_arrival(w);
    }
    return w;
}

static void *worker_main(void *arg)
{
    struct st_worker *w = arg;
    uint64_t cpu0 = st_clock_thread_cpu_ns();
    struct timeval tick = {.tv_sec = 0, .tv_usec = (suseconds_t)(TICK_NS / 1000)};
    event_add(w->tick, &tick);
    if (open_loop(w) && !w->virt) {
        arm_arrival(w, st_clock_mono_ns());
    } else {
        launch_more(w);
    }
    maybe_end(w);
    event_base_dispatch(w->base);
    /* A loopbreak with requests still in flight cannot happen (maybe_end checks), but make sure
     * nothing is left unrecorded. */
    while (w->active) {
        abort_slot(w->active, ST_ERR_INTERRUPTED, "worker ended");
    }
    w->cpu_ns = st_clock_thread_cpu_ns() - cpu0;
    __atomic_store_n(&w->ended, 1, __ATOMIC_RELEASE);
    return NULL;
}

int st_worker_spawn(struct st_worker *w)
{
    return -pthread_create(&w->thread, NULL, worker_main, w);
}

void st_worker_join(struct st_worker *w)
{
    pthread_join(w->thread, NULL);
}

void st_worker_stop(struct st_worker *w, int immediate)
{
    if (immediate) {
        __atomic_store_n(&w->stop_immediate, 1, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&w->stop_req, 1, __ATOMIC_RELEASE);
    /* Needs evthread_use_pthreads(), called before any base was made. */
    event_active(w->stop_ev, EV_READ, 0);
}

void st_worker_progress(struct st_worker *w, struct st_run_progress *p)
{
    p->done += __atomic_load_n(&w->p_done, __ATOMIC_RELAXED);
    p->ok += __atomic_load_n(&w->p_ok, __ATOMIC_RELAXED);
    p->failed += __atomic_load_n(&w->p_failed, __ATOMIC_RELAXED);
    p->tokens += __atomic_load_n(&w->p_tokens, __ATOMIC_RELAXED);
    p->inflight += __atomic_load_n(&w->p_inflight, __ATOMIC_RELAXED);
}

int st_worker_finished(struct st_worker *w)
{
    return __atomic_load_n(&w->ended, __ATOMIC_ACQUIRE);
}

void st_worker_collect(struct st_worker *w, struct st_run_result *res)
{
    st_metrics_merge(&res->m, &w->m);
    res->issued += w->issued;
    res->done += w->p_done;
    res->not_sent += w->not_sent;
    res->cpu_ns += w->cpu_ns;
    if (w->signalled) {
        res->interrupted = 1;
    }
    if (w->receipts_error && !res->receipts_error) {
        res->receipts_error = w->receipts_error;
    }
}

static void free_slot(struct slot *s)
{
    if (s->easy) {
        curl_easy_cleanup(s->easy);
    }
    curl_slist_free_all(s->hdrs);
    st_buf_release(&s->body);
    st_buf_release(&s->prompt);
    st_buf_release(&s->text);
    st_buf_release(&s->raw);
    st_buf_release(&s->tag);
    st_sse_release(&s->sse);
    st_rec_release(&s->rec);
    free(s);
}

void st_worker_free(struct st_worker *w)
{
    if (!w) {
        return;
    }
    while (w->free_list) {
        struct slot *s = w->free_list;
        w->free_list = s->next;
        free_slot(s);
    }
    if (w->multi) {
        curl_multi_cleanup(w->multi);
    }
    struct event *evs[] = {w->curl_timer, w->tick, w->arrival, w->stop_ev};
    for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++) {
        if (evs[i]) {
            event_free(evs[i]);
        }
    }
    if (w->base) {
        event_base_free(w->base);
    }
    curl_slist_free_all(w->base_hdrs);
    free(w->url);
    free(w->queue);
    free(w->vs);
    st_metrics_release(&w->m);
    st_json_release(&w->json);
    st_buf_release(&w->ctext);
    st_buf_release(&w->line);
    free(w);
}
