/*
 * Model-mode admin routes (see admin.h). Every answer is built in the shared scratch buffer and
 * sent at once, except a /flush_cache?timeout=S that finds the engine busy: it is parked as a
 * waiter with a virtual timer (S seconds, live.h) and a close callback on its connection, answered
 * by st_sim_admin_idle (200), its timer (400) or dropped when the client leaves; and, with the
 * metrics_busy_delay_s fault, a /metrics that finds the engine busy: parked the same way and
 * answered when its timer fires, with the figures of that moment (llama.cpp serves /metrics
 * through its task queue, behind the running batch).
 */
#include "sim/admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/keyvalq_struct.h>

#include "base/num.h"
#include "base/xalloc.h"
#include "sim/dialect.h"
#include "sim/info.h"
#include "sim/metrics.h"
#include "sim/model/dlist.h"
#include "sim/prompt.h"
#include "sim/spec.h"

/* Most token ids a /tokenize answer lists (count stays exact). */
#define MAX_TOKENIZE_IDS 1000000u
/* Most parked /flush_cache requests. */
#define MAX_WAITERS 64u

/* SGLang's answer to /flush_cache, success or not (http_server.py). */
#define FLUSH_TEXT                                                                                 \
    "Cache flushed.\nPlease check backend logs for more details. (When there are running or "      \
    "waiting requests, the operation will not be performed.)\n"

struct waiter {
    struct st_dlink link; /* first member: on st_sim_admin.waiters or .mwaiters */
    struct st_sim_admin *a;
    struct evhttp_request *req;      /* owned by evhttp (by us after a detach) */
    struct evhttp_connection *evcon; /* owned by evhttp */
    struct st_sim_live_timer *timer; /* owned: the timeout, in virtual time */
    int metrics;                     /* a parked /metrics, on .mwaiters */
};

struct st_sim_admin {
    struct st_sim_admin_cfg c;
    enum st_dialect d;
    int ready;
    struct st_dlist waiters;  /* owned elements: parked flushes */
    struct st_dlist mwaiters; /* owned elements: parked /metrics */
};

/* ---- replies ---- */

void st_sim_http_send(struct evhttp_request *req, int code, const char *ctype, const char *body,
                      size_t len, const char *scale, int virt)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        abort(); /* out of memory, as st_xmalloc would */
    }
    if (ctype) {
        evhttp_add_header(h, "Content-Type", ctype);
    }
    evhttp_add_header(h, "X-Sim-Time-Scale", scale);
    if (virt) {
        evhttp_add_header(h, "X-Sim-Clock", "virtual");
    }
    evbuffer_add(b, body, len);
    evhttp_send_reply(req, code, st_sim_reason(code), b);
    evbuffer_free(b);
}

void st_sim_http_error(struct evhttp_request *req, enum st_dialect d, int code, const char *message,
                       const char *scale, struct st_buf *scratch)
{
    st_buf_clear(scratch);
    st_sim_dialect_error(scratch, d, code, message);
    st_sim_http_send(req, code, "application/json", scratch->data, scratch->len, scale, 1);
}

static void send_json(struct st_sim_admin *a, struct evhttp_request *req, int code)
{
    st_sim_http_send(req, code, "application/json", a->c.scratch->data, a->c.scratch->len,
                     a->c.scale, 1);
}

static void send_text(struct st_sim_admin *a, struct evhttp_request *req, int code,
                      const char *text)
{
    st_sim_http_send(req, code, "text/plain; charset=utf-8", text, strlen(text), a->c.scale, 1);
}

/* FastAPI (vLLM, SGLang) answers unknown routes {"detail":"Not Found"}; llama.cpp its own. */
static void not_found(struct st_sim_admin *a, struct evhttp_request *req)
{
    if (a->d == ST_DIALECT_LLAMACPP) {
        static const char b[] = "{\"error\":{\"message\":\"File Not "
                                "Found\",\"type\":\"not_found_error\",\"code\":404}}";
        st_sim_http_send(req, 404, "application/json", b, strlen(b), a->c.scale, 1);
        return;
    }
    static const char b[] = "{\"detail\":\"Not Found\"}";
    st_sim_http_send(req, 404, "application/json", b, strlen(b), a->c.scale, 1);
}

static void bad_method(struct st_sim_admin *a, struct evhttp_request *req)
{
    if (a->d == ST_DIALECT_LLAMACPP) {
        not_found(a, req); /* cpp-httplib matches method and path together */
        return;
    }
    static const char b[] = "{\"detail\":\"Method Not Allowed\"}";
    st_sim_http_send(req, 405, "application/json", b, strlen(b), a->c.scale, 1);
}

/* Fills in from the live engine (m holds its counters) and clears the scratch for the answer. */
static void info_begin(struct st_sim_admin *a, struct st_sim_info *in, struct st_sim_metrics *m)
{
    st_sim_live_metrics(a->c.live, m);
    in->p = a->c.p;
    in->plan = st_sim_live_plan(a->c.live);
    in->model = a->c.model;
    in->m = m;
    in->created_unix_s = a->c.created_unix_s;
    st_buf_clear(a->c.scratch);
}

/* ---- lifecycle ---- */

struct st_sim_admin *st_sim_admin_new(const struct st_sim_admin_cfg *cfg)
{
    struct st_sim_admin *a = st_xcalloc(1, sizeof(*a));
    a->c = *cfg;
    a->d = cfg->p->engine.dialect;
    return a;
}

static void metrics_now(struct st_sim_admin *a, struct evhttp_request *req);

static void waiter_unlink(struct waiter *w)
{
    struct st_sim_admin *a = w->a;
    st_dlist_remove(w->metrics ? &a->mwaiters : &a->waiters, &w->link);
    evhttp_connection_set_closecb(w->evcon, NULL, NULL);
    st_sim_live_timer_free(a->c.live, w->timer);
}

/* Answers a parked flush and frees the waiter. */
static void waiter_answer(struct waiter *w, int code)
{
    struct st_sim_admin *a = w->a;
    struct evhttp_request *req = w->req;
    int m = w->metrics;
    waiter_unlink(w);
    free(w);
    if (m) {
        metrics_now(a, req);
    } else {
        send_text(a, req, code, FLUSH_TEXT);
    }
}

void st_sim_admin_free(struct st_sim_admin *a)
{
    if (!a) {
        return;
    }
    while (a->waiters.head) {
        waiter_answer((struct waiter *)a->waiters.head, 400);
    }
    while (a->mwaiters.head) {
        waiter_answer((struct waiter *)a->mwaiters.head, 200);
    }
    free(a);
}

void st_sim_admin_set_ready(struct st_sim_admin *a)
{
    a->ready = 1;
}

int st_sim_admin_ready(const struct st_sim_admin *a)
{
    return a->ready;
}

/* ---- flush routes ---- */

static void on_waiter_timer(void *arg)
{
    waiter_answer(arg, 400);
}

static void on_waiter_close(struct evhttp_connection *evcon, void *arg)
{
    struct waiter *w = arg;
    (void)evcon;
    struct evhttp_request *req = w->req;
    waiter_unlink(w);
    free(w);
    /* As for streams (server.c): a request detached from its failed connection is ours. */
    if (evhttp_request_get_connection(req) == NULL) {
        evhttp_request_free(req);
    }
}

void st_sim_admin_idle(struct st_sim_admin *a)
{
    if (!a->waiters.head) {
        return;
    }
    st_sim_live_flush(a->c.live);
    while (a->waiters.head) {
        waiter_answer((struct waiter *)a->waiters.head, 200);
    }
}

/* Reads ?key=value from the request's query into out (NUL-terminated). 1 when present. */
static int query_value(struct evhttp_request *req, const char *key, char *out, size_t cap)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *q = uri ? evhttp_uri_get_query(uri) : NULL;
    struct evkeyvalq kv;
    int found = 0;
    if (!q || evhttp_parse_query_str(q, &kv) != 0) {
        return 0;
    }
    const char *v = evhttp_find_header(&kv, key);
    if (v) {
        snprintf(out, cap, "%s", v);
        found = 1;
    }
    evhttp_clear_headers(&kv);
    return found;
}

/* Parks req (a flush, or a /metrics when metrics) until its timer fires after_ns of virtual time
 * from now, or its client leaves. */
static void park(struct st_sim_admin *a, struct evhttp_request *req, int metrics, uint64_t after_ns)
{
    struct waiter *w = st_xcalloc(1, sizeof(*w));
    w->a = a;
    w->req = req;
    w->metrics = metrics;
    w->evcon = evhttp_request_get_connection(req);
    w->timer = st_sim_live_timer_new(a->c.live, on_waiter_timer, w);
    st_dlist_push_front(metrics ? &a->mwaiters : &a->waiters, &w->link);
    evhttp_connection_set_closecb(w->evcon, on_waiter_close, w);
    st_sim_live_timer_at(a->c.live, w->timer, st_sim_live_vnow(a->c.live) + after_ns);
}

/* SGLang: flush now if idle; else 400, or with ?timeout=S wait up to S virtual seconds. */
static void flush_cache(struct st_sim_admin *a, struct evhttp_request *req)
{
    char v[64];
    double timeout_s = 0;
    if (query_value(req, "timeout", v, sizeof(v))) {
        if (st_num_f64z(v, 0, 1e6, &timeout_s) != 0) {
            st_sim_http_error(req, a->d, 400, "timeout must be a number of seconds in [0, 1e6]",
                              a->c.scale, a->c.scratch);
            return;
        }
    }
    if (!st_sim_live_busy(a->c.live)) {
        st_sim_live_flush(a->c.live);
        send_text(a, req, 200, FLUSH_TEXT);
        return;
    }
    if (timeout_s <= 0 || a->waiters.n >= MAX_WAITERS) {
        send_text(a, req, 400, FLUSH_TEXT);
        return;
    }
    park(a, req, 0, (uint64_t)(timeout_s * 1e9));
}

/* vLLM: the route exists only in dev mode; 200 with an empty body, reporting nothing. */
static void reset_prefix_cache(struct st_sim_admin *a, struct evhttp_request *req,
                               enum evhttp_cmd_type cmd)
{
    if (a->d != ST_DIALECT_VLLM || !a->c.dev_mode) {
        not_found(a, req);
        return;
    }
    if (cmd != EVHTTP_REQ_POST) {
        bad_method(a, req);
        return;
    }
    st_sim_live_flush(a->c.live);
    st_sim_http_send(req, 200, NULL, "", 0, a->c.scale, 1);
}

/* llama.cpp POST /slots/{id}?action=erase: 501 without --slot-save-path. */
static void slot_action(struct st_sim_admin *a, struct evhttp_request *req, const char *idtext)
{
    char action[32] = "";
    if (!a->c.slot_save_path) {
        st_sim_http_error(req, a->d, 501,
                          "This server does not support slots action. Start it with "
                          "`--slot-save-path`",
                          a->c.scale, a->c.scratch);
        return;
    }
    uint64_t id;
    if (st_num_u64z(idtext, a->c.p->engine.max_running - 1u, &id) != 0) {
        st_sim_http_error(req, a->d, 400, "Invalid slot ID", a->c.scale, a->c.scratch);
        return;
    }
    (void)query_value(req, "action", action, sizeof(action));
    if (strcmp(action, "erase") != 0) {
        st_sim_http_error(req, a->d, 400, "Invalid action (the simulator supports erase only)",
                          a->c.scale, a->c.scratch);
        return;
    }
    /* Per slot (cache scope slot), or the whole cache when one pool serves every slot. */
    uint64_t cached_tokens = st_sim_live_erase_slot(a->c.live, (uint32_t)id);
    st_buf_clear(a->c.scratch);
    st_buf_printf(a->c.scratch, "{\"id_slot\":%llu,\"n_erased\":%llu}", (unsigned long long)id,
                  (unsigned long long)cached_tokens);
    send_json(a, req, 200);
}

/* ---- tokenize ---- */

/*
 * Parses the request body into the shared doc, *parse_rc its st_json_parse code. Returns 0 after
 * answering 503 "Loading model" when the engine is not up yet (nothing parsed), else 1.
 */
static int read_body(struct st_sim_admin *a, struct evhttp_request *req, int *parse_rc)
{
    if (!a->ready) {
        st_sim_http_error(req, a->d, 503, "Loading model", a->c.scale, a->c.scratch);
        return 0;
    }
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    const char *body = len ? (const char *)evbuffer_pullup(in, -1) : "";
    *parse_rc = st_json_parse(a->c.doc, body, len);
    return 1;
}

static void tokenize(struct st_sim_admin *a, struct evhttp_request *req)
{
    int parsed;
    if (!read_body(a, req, &parsed)) {
        return;
    }
    struct st_json *d = a->c.doc;
    char err[256] = "";
    if (parsed != 0 || st_json_type(d, 0) != ST_JSON_OBJECT) {
        st_sim_http_error(req, a->d, 400, "request body must be a JSON object", a->c.scale,
                          a->c.scratch);
        return;
    }
    struct st_sim_prompt pr;
    st_sim_prompt_init(&pr);
    int msgs = st_json_get(d, 0, "messages");
    int prompt = st_json_get(d, 0, "prompt");
    if (prompt < 0) {
        prompt = st_json_get(d, 0, "content");
    }
    int rc;
    if (msgs >= 0) {
        int agp = st_json_get(d, 0, "add_generation_prompt");
        struct st_sim_prompt_opts o = {
            .patch = a->c.p->model.vision_params > 0 ? a->c.p->model.vision_patch : 0,
            .max_text_tokens = a->c.p->engine.context_length + 1,
            .generation_prompt = agp < 0 || st_json_bool(d, agp) != 0,
        };
        rc = st_sim_prompt_chat(&pr, d, msgs, &o, a->c.scratch, err, sizeof(err));
    } else {
        rc = st_sim_prompt_completion(&pr, d, prompt, a->c.scratch, err, sizeof(err));
    }
    if (rc != 0) {
        st_sim_http_error(req, a->d, 400, err, a->c.scale, a->c.scratch);
    } else {
        struct st_sim_metrics m;
        struct st_sim_info in;
        info_begin(a, &in, &m);
        st_sim_info_tokenize(a->c.scratch, &in, pr.text.data ? pr.text.data : "", pr.text.len,
                             pr.tokens, MAX_TOKENIZE_IDS);
        send_json(a, req, 200);
    }
    st_sim_prompt_release(&pr);
}

static void detokenize(struct st_sim_admin *a, struct evhttp_request *req)
{
    int parsed;
    if (!read_body(a, req, &parsed)) {
        return;
    }
    struct st_json *d = a->c.doc;
    int t = -1;
    if (parsed == 0) {
        t = st_json_get(d, 0, "tokens");
    }
    if (st_json_type(d, t) != ST_JSON_ARRAY) {
        st_sim_http_error(req, a->d, 400, "tokens must be an array of token ids", a->c.scale,
                          a->c.scratch);
        return;
    }
    struct st_sim_metrics m;
    struct st_sim_info in;
    info_begin(a, &in, &m);
    st_sim_info_detokenize(a->c.scratch, &in, d->toks[t].size);
    send_json(a, req, 200);
}

static void health(struct st_sim_admin *a, struct evhttp_request *req)
{
    int code;
    st_buf_clear(a->c.scratch);
    st_sim_dialect_health(a->c.scratch, a->d, a->ready, &code);
    st_sim_http_send(req, code, "application/json", a->c.scratch->data ? a->c.scratch->data : "",
                     a->c.scratch->len, a->c.scale, 1);
}

static void metrics_now(struct st_sim_admin *a, struct evhttp_request *req)
{
    struct st_sim_metrics m;
    st_sim_live_metrics(a->c.live, &m);
    st_buf_clear(a->c.scratch);
    st_sim_metrics_render(a->c.scratch, a->c.p, st_sim_live_plan(a->c.live), a->c.model, &m);
    if (a->d == ST_DIALECT_LLAMACPP) {
        char v[32];
        snprintf(v, sizeof(v), "%lld", (long long)a->c.created_unix_s);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Process-Start-Time-Unix", v);
    }
    st_sim_http_send(req, 200,
                     a->d == ST_DIALECT_LLAMACPP ? "text/plain; version=0.0.4"
                                                 : "text/plain; version=0.0.4; charset=utf-8",
                     a->c.scratch->data, a->c.scratch->len, a->c.scale, 1);
}

/* /metrics: at once, or with metrics_busy_delay_s while requests run or wait, that much later. */
static void metrics(struct st_sim_admin *a, struct evhttp_request *req)
{
    if (a->c.metrics_delay_ns && st_sim_live_busy(a->c.live) && a->mwaiters.n < MAX_WAITERS) {
        park(a, req, 1, a->c.metrics_delay_ns);
        return;
    }
    metrics_now(a, req);
}

/* The renderer of an R_INFO route's body. */
typedef void (*info_render_fn)(struct st_buf *out, const struct st_sim_info *in);

static void info_route(struct st_sim_admin *a, struct evhttp_request *req, info_render_fn render)
{
    struct st_sim_metrics m;
    struct st_sim_info in;
    info_begin(a, &in, &m);
    render(a->c.scratch, &in);
    send_json(a, req, 200);
}

/* ---- the route table ---- */

enum route {
    R_SERVE = 1, /* the route's serve function answers */
    R_INFO,      /* a JSON body from the route's renderer */
    R_FLUSH,     /* SGLang only; served by flush_cache */
    R_RESET,     /* checks its method itself */
    R_COMPLETION,
};

typedef void (*serve_fn)(struct st_sim_admin *a, struct evhttp_request *req);

#define M_GET 1u
#define M_POST 2u

static void version_body(struct st_buf *out, const struct st_sim_info *in)
{
    (void)in;
    st_buf_puts(out, "{\"version\":\"servetune-sim\"}");
}

/* Each route answers at its path and at its alias (NULL: none). */
static const struct {
    const char *path, *alias;
    enum route r;
    unsigned methods;
    serve_fn serve;        /* R_SERVE and R_FLUSH */
    info_render_fn render; /* R_INFO */
} routes[] = {
    {"/health", "/v1/health", R_SERVE, M_GET, health, NULL},
    {"/health_generate", NULL, R_SERVE, M_GET, health, NULL},
    {"/ping", NULL, R_SERVE, M_GET | M_POST, health, NULL},
    {"/v1/models", "/models", R_INFO, M_GET, NULL, st_sim_info_models},
    {"/tokenize", "/v1/tokenize", R_SERVE, M_POST, tokenize, NULL},
    {"/detokenize", "/v1/detokenize", R_SERVE, M_POST, detokenize, NULL},
    {"/get_server_info", "/server_info", R_INFO, M_GET, NULL, st_sim_info_server},
    {"/get_model_info", "/model_info", R_INFO, M_GET, NULL, st_sim_info_model},
    {"/props", NULL, R_INFO, M_GET, NULL, st_sim_info_props},
    {"/slots", NULL, R_INFO, M_GET, NULL, st_sim_info_slots},
    {"/metrics", NULL, R_SERVE, M_GET, metrics, NULL},
    {"/flush_cache", NULL, R_FLUSH, M_GET | M_POST, flush_cache, NULL},
    {"/reset_prefix_cache", NULL, R_RESET, M_GET | M_POST, NULL, NULL},
    {"/version", NULL, R_INFO, M_GET, NULL, version_body},
    {"/v1/chat/completions", NULL, R_COMPLETION, M_POST, NULL, NULL},
    {"/v1/completions", NULL, R_COMPLETION, M_POST, NULL, NULL},
};

int st_sim_admin_route(struct st_sim_admin *a, struct evhttp_request *req, const char *path,
                       enum evhttp_cmd_type cmd)
{
    unsigned m = cmd == EVHTTP_REQ_GET ? M_GET : cmd == EVHTTP_REQ_POST ? M_POST : 0;
    if (strncmp(path, "/slots/", 7) == 0) {
        if (cmd != EVHTTP_REQ_POST || a->d != ST_DIALECT_LLAMACPP) {
            not_found(a, req);
            return 1;
        }
        slot_action(a, req, path + 7);
        return 1;
    }
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        if (strcmp(path, routes[i].path) != 0 &&
            !(routes[i].alias && strcmp(path, routes[i].alias) == 0)) {
            continue;
        }
        enum route r = routes[i].r;
        if (r == R_FLUSH && a->d != ST_DIALECT_SGLANG) {
            break; /* not a route of this engine */
        }
        if (r == R_RESET) {
            reset_prefix_cache(a, req, cmd);
            return 1;
        }
        if (!(routes[i].methods & m)) {
            bad_method(a, req);
            return 1;
        }
        if (r == R_COMPLETION) {
            return 0;
        }
        if (r == R_INFO) {
            info_route(a, req, routes[i].render);
        } else {
            routes[i].serve(a, req);
        }
        return 1;
    }
    not_found(a, req);
    return 1;
}
