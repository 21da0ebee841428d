/*
 * The simulator server's model mode: a completion waits for its virtual arrival (held), is placed,
 * tokenized and submitted to the engine (live.h), and its stream's content comes from the engine's
 * steps (on_engine queues one chunk per step, stamped with its virtual time); plus the model-mode
 * timers (start-up, memory pressure, crash faults) and the keep-alive. It calls stream.c for the
 * stream itself and hands stream.c its hooks (srv->mops), never the other way round. Virtual time
 * and the arrival order: docs/sim.md and docs/internals/sim.md.
 */
#include "sim/server_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
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
#include "sim/model/tok.h"
#include "sim/noise.h"
#include "sim/prompt.h"
#include "sim/sync.h"

/* The real time after which a stream that has written nothing gets a keep-alive comment (a
 * request queued or prefilling for a long virtual time looks alive to the client's timers),
 * checked four times as often. */
#define KEEPALIVE_NS (500 * ST_NS_PER_MS)
/* Real time between the last reply of crash_after_requests and the exit, so that reply reaches
 * the client. */
#define CRASH_GRACE_NS (20 * ST_NS_PER_MS)

/* ---- model mode: content from engine steps ---- */

/* Queues one step's tokens, produced at virtual t with lag. Every step stays its own chunk with
 * its own time, however slowly the client reads (an unpaced simulator runs far ahead of any
 * reader); a step carries at least one token, so a stream never queues more than its output. */
static void mq_push(struct st_sim_stream *st, uint32_t tokens, uint64_t t, uint64_t lag)
{
    if (st->mq_n == st->mq_cap) {
        st->mq = st_sim_stream_ring_grow(st->mq, sizeof(*st->mq), st->mq_n, &st->mq_head,
                                         &st->mq_cap, 16);
    }
    st->mq[(st->mq_head + st->mq_n) % st->mq_cap] =
        (struct st_sim_mq_ent){.tokens = tokens, .t = t, .lag = lag};
    st->mq_n++;
}

/* Bytes to reserve for the queued steps (a guess; batch_room grows it for big events). */
static size_t model_hint(const struct st_sim_stream *st)
{
    uint64_t tokens = 0;
    for (uint32_t i = 0; i < st->mq_n; i++) {
        tokens += st->mq[(st->mq_head + i) % st->mq_cap].tokens;
    }
    uint64_t hint = st_sim_tmpl_content_max(&st->tmpl, 0, ST_SIM_EV_LAST | ST_SIM_EV_USAGE) *
                        (uint64_t)st->mq_n +
                    tokens * 8 + st->answer.text.len * 6 + st->tmpl.role.len + 2048 +
                    40 * ((uint64_t)st->mq_n + 4);
    return hint < ST_SIM_BATCH_BYTES ? (size_t)hint : ST_SIM_BATCH_BYTES;
}

/* Model mode: the line that stamps an event with its virtual time (ns since the session's start)
 * and its lag (real ns): "vt: NS LAG\n", an SSE field other clients ignore (docs/sim.md). */
static size_t stamp(const struct st_sim_stream *st, char *out, size_t cap)
{
    int n = snprintf(out, cap, "vt: %llu %llu\n",
                     (unsigned long long)st_sim_since(st->v_event, st->v_session),
                     (unsigned long long)st->lag_event);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

/* batch_fixed with the stamp line vt[0..vl) in front. */
static void batch_stamped(struct st_sim_batch *b, char *p, enum st_sim_kind kind, const char *vt,
                          size_t vl, const char *data, size_t n)
{
    memcpy(p, vt, vl);
    memcpy(p + vl, data, n);
    st_sim_batch_note(b, kind, 0, vl + n);
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
static void put_events(struct st_sim_batch *b, char *p, const char *text, size_t len,
                       const char *vt, size_t vl)
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

static void fill_timings(const struct st_sim_stream *st, struct st_sim_timings *t)
{
    memset(t, 0, sizeof(*t));
    t->cached_report = st->resp.cached_report;
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
static int add_model_boundary(struct st_sim_stream *st, struct st_sim_batch *b, uint32_t j)
{
    const struct st_sim_spec *s = &st->spec;
    if (st_sim_stream_cut_at(st, j)) {
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
        char *p = st_sim_batch_room(b, stamped_len(t->data, t->len, vl));
        if (!p) {
            return 1;
        }
        put_events(b, p, t->data, t->len, vt, vl);
    }
    st->phase = ST_SIM_PH_ENDED;
    return 1;
}

/* Adds the oldest queued step as content chunk j (role chunk first when due with it). */
static int add_model_content(struct st_sim_stream *st, struct st_sim_batch *b, uint32_t j)
{
    const struct st_sim_mq_ent *q = &st->mq[st->mq_head];
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
    char *p = st_sim_batch_room(
        b, role_len + vl + st_sim_tmpl_content_text_max(&st->tmpl, st->text.len, flags));
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
    st_sim_batch_note(b, ST_SIM_KIND_CONTENT, k, vl + n);
    st->mq_head = (st->mq_head + 1) % st->mq_cap;
    st->mq_n--;
    st->sent_tokens += k;
    st->next_chunk = j + 1;
    return 1;
}

/* Renders every queued step (up to one batch) and hands them to evhttp. */
static void fill_model(struct st_sim_stream *st)
{
    struct st_sim_batch b = {.st = st, .hint = model_hint(st)};
    for (;;) {
        if (b.events + 4 > ST_SIM_BATCH_EVENTS) {
            break;
        }
        if (st->role_pending && st->spec.role_chunk == ST_SIM_ROLE_EARLY) {
            char vt[64];
            size_t vl = stamp(st, vt, sizeof(vt));
            char *p = st_sim_batch_room(&b, vl + st->tmpl.role.len);
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
    st_sim_batch_flush(&b);
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
static void send_model_reply(struct st_sim_stream *st)
{
    struct st_sim_server *srv = st->srv;
    struct st_buf *b = &srv->scratch;
    struct st_sim_timings tm;
    fill_timings(st, &tm);
    struct st_sim_ending e = {.usage_on = st->spec.usage != ST_SIM_USAGE_NEVER, .timings = &tm};
    st_buf_clear(b);
    st_sim_dialect_body(b, srv->prof.engine.dialect, &st->resp, &st->answer, &e);
    st->phase = ST_SIM_PH_ENDED;
    st_sim_stream_clock_headers(st->req, st->v_session, st->v_arrival, st->late_ns, &st->v_end,
                                st->lag_end);
    uint64_t t = st_clock_mono_ns();
    st_sim_stream_trace(srv, st->rid, st->rid_len, &st->seq, t, ST_SIM_KIND_HEADERS, 0, 0);
    st_sim_stream_trace(srv, st->rid, st->rid_len, &st->seq, t, ST_SIM_KIND_FINISH,
                        st->resp.n_tokens, b->len);
    count_reply(srv);
    st_sim_stream_send_json(srv, st->req, 200, b->data, b->len);
}

/* live.c hands over this request's part of a step. st may be freed inside st_sim_stream_step(). */
static void on_engine(void *arg, const struct st_batch_event *ev, uint64_t start_ns,
                      uint64_t end_ns, uint64_t lag_ns)
{
    struct st_sim_stream *st = arg;
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
            (uint64_t)st->next_chunk + st->mq_n == st_sim_stream_cut_after(&st->spec)) {
            /* A fault ends the reply after this chunk, whenever it is written. */
            st_sim_stream_fault_end(st, end_ns);
        }
    }
    if (ev->finished) {
        st->eng_done = 1;
        st->in_engine = 0;
        st->v_end = end_ns;
        st->lag_end = lag_ns;
        /* Its last token exists now, whenever its bytes get written: a closed loop's next
         * request arrives at this virtual time. */
        st_sim_stream_end_at(st, end_ns);
    }
    if (ev->tokens || ev->finished) {
        st_sim_stream_step(st);
    }
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
    if (rc != 0 && api == ST_SIM_API_CHAT && srv->prompt.refused != NULL) {
        /* Media to a text-only model: each engine's own answer (llama.cpp b4748: a 500). */
        size_t len = 0;
        const char *raw = st_json_raw(&srv->doc, st_json_get(&srv->doc, 0, "messages"), &len);
        struct st_buf msg;
        st_buf_init(&msg);
        int code = st_sim_dialect_media_refusal(&msg, srv->prof.engine.dialect, srv->prompt.refused,
                                                err, raw, len);
        st_sim_stream_send_error(srv, req, rid, rid_len, code,
                                 code == 400 ? "BadRequestError" : "InternalServerError", msg.data);
        st_buf_release(&msg);
        return -1;
    }
    if (rc != 0) {
        st_sim_stream_send_error(srv, req, rid, rid_len, 400, "BadRequestError", err);
        return -1;
    }
    return 0;
}

/* Sets the reply's text: the X-Servetune-Expect answer, right or (with probability
 * quality.error_rate, decided per request) wrong; none without the header. 0 or -1 after a 400. */
static int model_answer(struct st_sim_server *srv, struct st_sim_stream *st, const char *rid,
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
        st_sim_stream_send_error(srv, st->req, rid, rid_len, 400, "BadRequestError",
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

static int model_submit(struct st_sim_server *srv, struct st_sim_stream *st, const char *rid,
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
    int ks = st_json_get(&srv->doc, 0, "id_slot");
    int64_t slot = -1;
    if (ks > 0 && srv->prof.engine.dialect == ST_DIALECT_LLAMACPP &&
        st_json_i64(&srv->doc, ks, &slot) != 0) {
        slot = -1;
    }
    st_sim_live_next_slot(srv->live, slot);
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
    st_sim_stream_trace(srv, rid, rid_len, &seq, t, ST_SIM_KIND_HEADERS, 0, 0);
    st_sim_stream_trace(srv, rid, rid_len, &seq, t, ST_SIM_KIND_ERROR, 0, srv->scratch.len);
    st_sim_stream_clock_headers(st->req, st->v_session, st->v_arrival, st->late_ns, &st->v_arrival,
                                st->lag_arrival);
    st_sim_stream_send_json(srv, st->req, 400, srv->scratch.data, srv->scratch.len);
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
        st_sim_stream_send_error(srv, req, rid, rid_len, 503, "ServiceUnavailableError",
                                 "Loading model");
        return;
    }
    struct st_sim_spec spec = srv->spec;
    struct st_sim_req rq;
    if (st_sim_stream_parse(srv, req, api, rid, rid_len, &spec, &rq) != 0 ||
        model_prompt(srv, req, api, rid, rid_len) != 0) {
        return;
    }
    rq.prompt_tokens = srv->prompt.tokens;
    struct st_sim_stream *st =
        st_sim_stream_new(srv, req, api, &spec, &rq, arrival_ns, id, rid, rid_len);
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
        st_sim_stream_free(st);
        return;
    }
    st_sim_stream_begin(st, status);
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
    char rid[ST_SIM_MAX_RID_BYTES * 6 + 3];
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
void st_sim_modelmode_hold(struct st_sim_server *srv, struct evhttp_request *req,
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
    if (rc == 0) {
        rc = st_sim_sync_parse_seq(evhttp_find_header(in, "X-Sim-Seq"), &hdr, err, sizeof(err));
    }
    if (rc < 0) {
        st_sim_stream_send_error(srv, req, rid, rid_len, 400, "BadRequestError", err);
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

/* ---- model-mode lifecycle ---- */

static const struct st_sim_stream_ops mode_ops = {
    .fill = fill_model,
    .send_reply = send_model_reply,
    .replied = count_reply,
};

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
    for (struct st_sim_stream *st = srv->streams; st; st = st->all_next) {
        if (st->phase != ST_SIM_PH_STREAM || st->draining || now - st->last_write < KEEPALIVE_NS) {
            continue;
        }
        struct st_sim_batch b = {.st = st, .hint = 64};
        char *p = st_sim_batch_room(&b, strlen(ST_SIM_EVENT_COMMENT));
        st_sim_batch_fixed(&b, p, ST_SIM_KIND_COMMENT, ST_SIM_EVENT_COMMENT,
                           strlen(ST_SIM_EVENT_COMMENT));
        st_sim_batch_flush(&b);
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
int st_sim_modelmode_start(struct st_sim_server *srv, const struct st_sim_model_cfg *mc, char *err,
                           size_t errlen)
{
    srv->prof = *mc->p;
    srv->mc = *mc;
    srv->mops = &mode_ops;
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
        .metrics_delay_ns = vns(f->metrics_busy_delay_s),
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
