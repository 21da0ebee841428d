/*
 * Probes of a running server (see server.h; docs/internals/target.md). Every request goes
 * through st_target_http (http.h). Answers are read with the strict JSON reader and the
 * Prometheus parser; anything they refuse is an error code, never a crash.
 */
#include "target/server.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/names.h"
#include "base/xalloc.h"
#include "proto/logline.h"
#include "proto/oaireq.h"
#include "target/http.h"
#include "workload/workload.h"

#define DEFAULT_TIMEOUT_MS 5000u
#define DEFAULT_CONNECT_MS 2000u
/* Identification probes get at most this long each. */
#define PROBE_TIMEOUT_MS 3000u
/* A max_tokens=1 completion pays one prefill: a long prompt on a busy server needs time. */
#define PROMPT_TIMEOUT_MS 120000u
#define FLUSH_DEFAULT_MS 10000u
/* Extra time a ?timeout=S flush request gets over S before the client gives up. */
#define FLUSH_GRACE_MS 2000u
/* Largest answer kept; /metrics is held to ST_PROM_MAX_BYTES by the parser. */
#define BODY_MAX (64u << 20)

/* The counter has the workload's callback type (a mismatch fails to compile). */
static const st_tok_counter_fn count_fn_type __attribute__((unused)) = st_target_count_fn;

static const char *const target_kind_names[] = {
    [ST_TARGET_VLLM] = "vllm", [ST_TARGET_SGLANG] = "sglang", [ST_TARGET_LLAMACPP] = "llamacpp",
    [ST_TARGET_TGI] = "tgi",   [ST_TARGET_TRTLLM] = "trtllm", [ST_TARGET_GENERIC] = "generic",
};

const char *st_target_kind_name(enum st_target_kind k)
{
    return ST_NAME_OF(target_kind_names, k, "generic");
}

static const char *const target_flush_names[] = {[ST_TARGET_FLUSHED] = "flushed",
                                                 [ST_TARGET_FLUSH_UNSUPPORTED] = "unsupported",
                                                 [ST_TARGET_FLUSH_BUSY] = "busy",
                                                 [ST_TARGET_FLUSH_ERROR] = "error"};

const char *st_target_flush_name(enum st_target_flush_outcome o)
{
    return ST_NAME_OF(target_flush_names, o, "error");
}

static uint64_t now_ms(void)
{
    return st_clock_mono_ns() / ST_NS_PER_MS;
}

static void sleep_ms(uint64_t ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ---- lifecycle ---- */

void st_target_init(struct st_target *t, const struct st_target_cfg *cfg)
{
    memset(t, 0, sizeof(*t));
    t->base_url = st_xstrdup(cfg->base_url);
    size_t n = strlen(t->base_url);
    while (n > 0 && t->base_url[n - 1] == '/') {
        t->base_url[--n] = '\0';
    }
    if (cfg->api_key && cfg->api_key[0]) {
        t->api_key = st_xstrdup(cfg->api_key);
    }
    if (cfg->model && cfg->model[0]) {
        snprintf(t->model, sizeof(t->model), "%s", cfg->model);
    }
    t->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : DEFAULT_TIMEOUT_MS;
    t->connect_timeout_ms = cfg->connect_timeout_ms ? cfg->connect_timeout_ms : DEFAULT_CONNECT_MS;
    t->insecure = cfg->insecure;
    t->kind = ST_TARGET_GENERIC;
    t->time_scale = 1;
}

void st_target_release(struct st_target *t)
{
    if (t->api_key) {
        memset(t->api_key, 0, strlen(t->api_key));
    }
    free(t->api_key);
    free(t->base_url);
    st_target_http_close(t);
    memset(t, 0, sizeof(*t));
}

/* Parses the answer as JSON into d. Returns 0 or ST_EPARSE. */
static int body_json(const struct st_http_resp *r, struct st_json *d)
{
    return st_json_parse(d, r->body.data ? r->body.data : "", r->body.len);
}

/* Member key of object obj as a non-negative integer. */
static int json_u64(const struct st_json *d, int obj, const char *key, uint64_t *out)
{
    int64_t v;
    int i = st_json_get(d, obj, key);
    if (st_json_type(d, i) != ST_JSON_NUMBER || st_json_i64(d, i, &v) != 0 || v < 0) {
        return ST_ENOTFOUND;
    }
    *out = (uint64_t)v;
    return 0;
}

/* Member key of object obj as a string cut to cap. */
static int json_strbuf(const struct st_json *d, int obj, const char *key, char *out, size_t cap)
{
    struct st_buf b;
    int i = st_json_get(d, obj, key);
    if (st_json_type(d, i) != ST_JSON_STRING) {
        return ST_ENOTFOUND;
    }
    st_buf_init(&b);
    int rc = st_json_str(d, i, &b);
    if (rc == 0) {
        st_http_snippet(out, cap, b.data ? b.data : "", b.len);
    }
    st_buf_release(&b);
    return rc;
}

/* ---- answers (pure) ---- */

/* The token count of a tokenize answer: count, else the length of tokens (or TGI's list). */
static int count_of(const struct st_json *d, uint64_t *tokens)
{
    if (st_json_type(d, 0) == ST_JSON_ARRAY) {
        *tokens = d->toks[0].size;
        return 0;
    }
    if (json_u64(d, 0, "count", tokens) == 0) {
        return 0;
    }
    static const char *const lists[] = {"tokens", "tokenize_response"};
    for (size_t i = 0; i < 2; i++) {
        int a = st_json_get(d, 0, lists[i]);
        if (st_json_type(d, a) == ST_JSON_ARRAY) {
            *tokens = d->toks[a].size;
            return 0;
        }
    }
    return ST_EPARSE;
}

static int answer_models(const struct st_json *d, struct st_target_facts *f)
{
    int data = st_json_get(d, 0, "data");
    if (st_json_type(d, data) != ST_JSON_ARRAY) {
        return ST_EPARSE;
    }
    int first = st_json_at(d, data, 0);
    (void)json_strbuf(d, first, "id", f->model, sizeof(f->model));
    (void)json_strbuf(d, first, "owned_by", f->owned_by, sizeof(f->owned_by));
    (void)json_u64(d, first, "max_model_len", &f->max_model_len);
    return 0;
}

static int answer_server_info(const struct st_json *d, struct st_target_facts *f)
{
    uint64_t per;
    if (json_u64(d, 0, "max_total_num_tokens", &per) != 0) {
        return ST_EPARSE;
    }
    /* internal_states has one entry per DP rank, each with its token_capacity. */
    int is = st_json_get(d, 0, "internal_states");
    uint32_t ranks = st_json_type(d, is) == ST_JSON_ARRAY ? d->toks[is].size : 0;
    uint64_t sum = 0, cap;
    int all = ranks > 0;
    for (uint32_t k = 0; k < ranks; k++) {
        int mu = st_json_get(d, st_json_at(d, is, k), "memory_usage");
        if (json_u64(d, mu, "token_capacity", &cap) != 0) {
            all = 0;
            break;
        }
        sum += cap;
    }
    if (ranks == 0) {
        uint64_t dp = 1;
        if (json_u64(d, 0, "dp_size", &dp) != 0 || dp == 0 || dp > 4096) {
            dp = 1;
        }
        ranks = (uint32_t)dp;
    }
    f->rank_tokens = per;
    f->ranks = ranks;
    f->total_tokens = all ? sum : per * ranks;
    f->summed = all;
    /* The running limit: each rank's effective one, else the argument per rank. */
    uint32_t n = st_json_type(d, is) == ST_JSON_ARRAY ? d->toks[is].size : 0;
    uint64_t run = 0, r;
    int every = n > 0;
    for (uint32_t k = 0; k < n && every; k++) {
        every =
            json_u64(d, st_json_at(d, is, k), "effective_max_running_requests_per_dp", &r) == 0 &&
            r > 0;
        run += every ? r : 0;
    }
    if (every && run <= UINT32_MAX) {
        f->max_running = (uint32_t)run;
        f->running_summed = 1;
    } else if (json_u64(d, 0, "max_running_requests", &r) == 0 && r > 0 &&
               r <= UINT32_MAX / ranks) {
        f->max_running = (uint32_t)(r * ranks);
    }
    return 0;
}

static int answer_props(const struct st_json *d, struct st_target_facts *f)
{
    uint64_t x;
    if (json_u64(d, 0, "total_slots", &x) != 0 || x > UINT32_MAX) {
        return ST_EPARSE;
    }
    f->total_slots = (uint32_t)x;
    int dgs = st_json_get(d, 0, "default_generation_settings");
    (void)json_u64(d, dgs, "n_ctx", &f->slot_n_ctx);
    char build[64];
    if (json_strbuf(d, 0, "build_info", build, sizeof(build)) == 0 && build[0] == 'b') {
        char *end = NULL;
        unsigned long n = strtoul(build + 1, &end, 10);
        if (end != build + 1 && (*end == '-' || *end == '\0') && n <= UINT32_MAX) {
            f->build = (uint32_t)n;
        }
    }
    return 0;
}

int st_target_llamacpp_has(uint32_t build, enum st_target_llamacpp_flag flag)
{
    /* The last build known to lack each flag (its --help, captured), and none known to have it
     * by number: v0.5.0 has both but reports build 1. */
    static const uint32_t last_without[] = {
        [ST_TARGET_LLAMACPP_KVU] = 4748,
        [ST_TARGET_LLAMACPP_CACHE_RAM] = 4748,
    };
    size_t i = (size_t)flag;
    if (i >= sizeof(last_without) / sizeof(last_without[0]) || build <= 1) {
        return -1;
    }
    return build <= last_without[i] ? 0 : -1;
}

int st_target_parse_answer(enum st_target_answer kind, const char *body, size_t len,
                           struct st_target_facts *out)
{
    struct st_json d;
    memset(out, 0, sizeof(*out));
    st_json_init(&d, 0);
    int rc = st_json_parse(&d, body ? body : "", body ? len : 0) == 0 ? 0 : ST_EPARSE;
    if (rc == 0 && st_json_type(&d, 0) != ST_JSON_OBJECT &&
        !(kind == ST_TARGET_ANSWER_TOKENIZE && st_json_type(&d, 0) == ST_JSON_ARRAY)) {
        rc = ST_EPARSE;
    }
    if (rc == 0) {
        switch (kind) {
        case ST_TARGET_ANSWER_MODELS:
            rc = answer_models(&d, out);
            break;
        case ST_TARGET_ANSWER_SERVER_INFO:
            rc = answer_server_info(&d, out);
            break;
        case ST_TARGET_ANSWER_PROPS:
            rc = answer_props(&d, out);
            break;
        case ST_TARGET_ANSWER_INFO:
            rc = st_json_type(&d, st_json_get(&d, 0, "model_id")) == ST_JSON_STRING ? 0 : ST_EPARSE;
            break;
        case ST_TARGET_ANSWER_TOKENIZE:
            rc = count_of(&d, &out->tokens);
            break;
        default:
            rc = ST_EPARSE;
            break;
        }
    }
    st_json_release(&d);
    if (rc != 0) {
        memset(out, 0, sizeof(*out));
    }
    return rc;
}

/* ---- identification ---- */

static void evidence(struct st_target *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void evidence(struct st_target *t, const char *fmt, ...)
{
    size_t n = strlen(t->evidence);
    if (n + 3 >= sizeof(t->evidence)) {
        return;
    }
    if (n) {
        memcpy(t->evidence + n, "; ", 3);
        n += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->evidence + n, sizeof(t->evidence) - n, fmt, ap);
    va_end(ap);
}

static enum st_target_kind kind_of_owner(const char *owner)
{
    if (strcmp(owner, "vllm") == 0) {
        return ST_TARGET_VLLM;
    }
    if (strcmp(owner, "sglang") == 0) {
        return ST_TARGET_SGLANG;
    }
    if (strcmp(owner, "llamacpp") == 0) {
        return ST_TARGET_LLAMACPP;
    }
    if (strcmp(owner, "tensorrt_llm") == 0) {
        return ST_TARGET_TRTLLM;
    }
    return 0;
}

/* What the probes found; kind 0 = no vote. */
struct votes {
    enum st_target_kind header, owner, metrics, info;
};

/* GET path; 1 when it answered 200 with an answer of that kind (*f says what it holds). */
static int probe_answer(struct st_target *t, const char *path, enum st_target_answer kind,
                        struct st_target_facts *f, struct st_http_resp *r)
{
    st_buf_clear(&r->body);
    r->status = 0;
    uint64_t ms = t->timeout_ms < PROBE_TIMEOUT_MS ? t->timeout_ms : PROBE_TIMEOUT_MS;
    if (st_target_http(t, "GET", path, NULL, 0, ms, r, NULL, 0) != 0 || r->status != 200) {
        return 0;
    }
    return st_target_parse_answer(kind, r->body.data, r->body.len, f) == 0;
}

static void probe_metrics(struct st_target *t, struct votes *v, struct st_http_resp *r)
{
    static const struct {
        const char *prefix;
        enum st_target_kind kind;
    } prefixes[] = {
        {"vllm:", ST_TARGET_VLLM},
        {"sglang:", ST_TARGET_SGLANG},
        {"llamacpp:", ST_TARGET_LLAMACPP},
        {"tgi_", ST_TARGET_TGI},
    };
    uint32_t count[4] = {0, 0, 0, 0};
    struct st_prom p;
    st_buf_clear(&r->body);
    uint64_t ms = t->timeout_ms < PROBE_TIMEOUT_MS ? t->timeout_ms : PROBE_TIMEOUT_MS;
    if (st_target_http(t, "GET", "/metrics", NULL, 0, ms, r, NULL, 0) != 0 || r->status != 200) {
        return;
    }
    size_t i = 0;
    while (i < r->body.len && (r->body.data[i] == ' ' || r->body.data[i] == '\n')) {
        i++;
    }
    if (i < r->body.len && (r->body.data[i] == '{' || r->body.data[i] == '[')) {
        t->endpoints |= ST_TARGET_EP_METRICS_JSON;
        return;
    }
    st_prom_init(&p);
    if (st_prom_parse(&p, r->body.data ? r->body.data : "", r->body.len, NULL) == 0) {
        t->endpoints |= ST_TARGET_EP_METRICS;
        for (uint32_t s = 0; s < p.n; s++) {
            for (size_t k = 0; k < 4; k++) {
                if (strncmp(p.samples[s].name, prefixes[k].prefix, strlen(prefixes[k].prefix)) ==
                    0) {
                    count[k]++;
                }
            }
        }
    }
    st_prom_release(&p);
    size_t best = 0;
    for (size_t k = 1; k < 4; k++) {
        if (count[k] > count[best]) {
            best = k;
        }
    }
    if (count[best] > 0) {
        v->metrics = prefixes[best].kind;
    }
}

static void probe_info(struct st_target *t, struct votes *v, struct st_http_resp *r)
{
    struct st_target_facts f;
    if (probe_answer(t, "/server_info", ST_TARGET_ANSWER_SERVER_INFO, &f, r)) {
        t->endpoints |= ST_TARGET_EP_SERVER_INFO;
        t->max_running = f.max_running;
        t->max_running_summed = f.running_summed;
    }
    if (probe_answer(t, "/get_server_info", ST_TARGET_ANSWER_SERVER_INFO, &f, r)) {
        t->endpoints |= ST_TARGET_EP_GET_SERVER_INFO;
        t->max_running = f.max_running;
        t->max_running_summed = f.running_summed;
    }
    if (t->endpoints & (ST_TARGET_EP_SERVER_INFO | ST_TARGET_EP_GET_SERVER_INFO)) {
        v->info = ST_TARGET_SGLANG;
    }
    if (probe_answer(t, "/props", ST_TARGET_ANSWER_PROPS, &f, r)) {
        t->endpoints |= ST_TARGET_EP_PROPS;
        t->total_slots = f.total_slots;
        t->slot_n_ctx = f.slot_n_ctx;
        t->build = f.build;
        if (!v->info) {
            v->info = ST_TARGET_LLAMACPP;
        }
    }
    if (probe_answer(t, "/info", ST_TARGET_ANSWER_INFO, &f, r)) {
        t->endpoints |= ST_TARGET_EP_INFO;
        if (!v->info) {
            v->info = ST_TARGET_TGI;
        }
    }
}

/* POST path body; 1 when it answered 200 with JSON that passes want(d). */
static int probe_post(struct st_target *t, const char *path, const char *body,
                      int (*want)(const struct st_json *d), struct st_http_resp *r)
{
    struct st_json d;
    st_buf_clear(&r->body);
    r->status = 0;
    uint64_t ms = t->timeout_ms < PROBE_TIMEOUT_MS ? t->timeout_ms : PROBE_TIMEOUT_MS;
    if (st_target_http(t, "POST", path, body, strlen(body), ms, r, NULL, 0) != 0 ||
        r->status != 200) {
        return 0;
    }
    st_json_init(&d, 0);
    int ok = body_json(r, &d) == 0 && want(&d);
    st_json_release(&d);
    return ok;
}

static int has_count(const struct st_json *d)
{
    if (st_json_type(d, 0) == ST_JSON_ARRAY) {
        return 1; /* TGI: a list of tokens */
    }
    return st_json_type(d, st_json_get(d, 0, "count")) == ST_JSON_NUMBER ||
           st_json_type(d, st_json_get(d, 0, "tokens")) == ST_JSON_ARRAY ||
           st_json_type(d, st_json_get(d, 0, "tokenize_response")) == ST_JSON_ARRAY;
}

static int has_prompt(const struct st_json *d)
{
    return st_json_type(d, st_json_get(d, 0, "prompt")) == ST_JSON_STRING;
}

/* Builds a tokenize body for text in the given shape (proto/oaireq.h) into out. */
static void build_body(const struct st_target *t, enum st_oaireq_tok s, const char *text,
                       size_t len, struct st_buf *out)
{
    st_buf_clear(out);
    st_oaireq_tokenize(s, t->model, text, len, out);
}

/* The tokenize and template routes each kind is probed for, in order: a 200 answer that passes
 * want sets ep. A fallback row is tried only when the row before it failed. */
static const struct {
    enum st_target_kind kind;
    enum st_oaireq_tok shape;
    const char *path;
    int (*want)(const struct st_json *d);
    uint32_t ep;
    int fallback;
} tokenize_probes[] = {
    {ST_TARGET_VLLM, ST_OAIREQ_TOK_PROMPT, "/tokenize", has_count, ST_TARGET_EP_TOKENIZE, 0},
    {ST_TARGET_SGLANG, ST_OAIREQ_TOK_PROMPT, "/v1/tokenize", has_count, ST_TARGET_EP_V1_TOKENIZE,
     0},
    {ST_TARGET_SGLANG, ST_OAIREQ_TOK_PROMPT, "/tokenize", has_count, ST_TARGET_EP_TOKENIZE, 1},
    {ST_TARGET_LLAMACPP, ST_OAIREQ_TOK_CONTENT, "/tokenize", has_count, ST_TARGET_EP_TOKENIZE, 0},
    {ST_TARGET_LLAMACPP, ST_OAIREQ_TOK_CHAT, "/apply-template", has_prompt,
     ST_TARGET_EP_APPLY_TEMPLATE, 0},
    {ST_TARGET_TGI, ST_OAIREQ_TOK_INPUTS, "/tokenize", has_count, ST_TARGET_EP_TOKENIZE, 0},
    {ST_TARGET_TGI, ST_OAIREQ_TOK_CHAT, "/chat_tokenize", has_count, ST_TARGET_EP_CHAT_TOKENIZE, 0},
};

static void probe_tokenize(struct st_target *t, struct st_http_resp *r)
{
    struct st_buf b;
    st_buf_init(&b);
    int last_ok = 0;
    for (size_t i = 0; i < sizeof(tokenize_probes) / sizeof(tokenize_probes[0]); i++) {
        if (tokenize_probes[i].kind != t->kind || (tokenize_probes[i].fallback && last_ok)) {
            continue;
        }
        build_body(t, tokenize_probes[i].shape, "a", 1, &b);
        last_ok = probe_post(t, tokenize_probes[i].path, b.data, tokenize_probes[i].want, r);
        if (last_ok) {
            t->endpoints |= tokenize_probes[i].ep;
        }
    }
    st_buf_release(&b);
}

static void decide(struct st_target *t, const struct votes *v)
{
    static const char *const metric_names[] = {"",           "",      "vllm:*", "sglang:*",
                                               "llamacpp:*", "tgi_*", ""};
    enum st_target_kind k = 0;
    if (v->header) {
        evidence(t, "Server: %s", t->server);
        k = v->header;
    }
    if (v->owner) {
        evidence(t, "owned_by=%s", t->owned_by);
        k = k ? k : v->owner;
    }
    if (v->metrics) {
        evidence(t, "/metrics %s", metric_names[v->metrics]);
        k = k ? k : v->metrics;
    }
    if (v->info) {
        evidence(t, "%s",
                 v->info == ST_TARGET_SGLANG     ? "/server_info max_total_num_tokens"
                 : v->info == ST_TARGET_LLAMACPP ? "/props total_slots"
                                                 : "/info model_id");
        k = k ? k : v->info;
    }
    if (!k && (t->endpoints & ST_TARGET_EP_METRICS_JSON)) {
        evidence(t, "/metrics is JSON");
        k = ST_TARGET_TRTLLM;
    }
    if (!k) {
        evidence(t, "no engine-specific answer");
    }
    t->kind = k ? k : ST_TARGET_GENERIC;
}

int st_target_open(struct st_target *t, char *err, size_t errlen)
{
    int rc;
    struct st_http_resp r;
    struct st_target_facts f;
    struct votes v = {0, 0, 0, 0};
    char scale[32];
    st_http_resp_init(&r, BODY_MAX);
    t->endpoints = 0;
    t->evidence[0] = '\0';
    t->server[0] = '\0';
    t->owned_by[0] = '\0';
    t->is_sim = 0;
    t->sim_model_mode = 0;
    t->time_scale = 1;
    t->max_model_len = 0;
    t->total_slots = 0;
    t->max_running = 0;
    t->max_running_summed = 0;
    t->slot_n_ctx = 0;
    t->build = 0;
    t->kind = ST_TARGET_GENERIC;

    rc = st_target_http(t, "GET", "/v1/models", NULL, 0, t->timeout_ms, &r, err, errlen);
    if (rc != 0) {
        goto out;
    }
    if (r.status != 200) {
        char st[ST_HTTP_SNIPPET + 32];
        st_http_status_text(&r, st, sizeof(st));
        st_errf(err, errlen,
                "GET %s/v1/models answered %s; expected 200 with a JSON model list (is this an "
                "OpenAI-compatible server, still loading, or is the API key wrong?)",
                t->base_url, st);
        rc = ST_ESERVER;
        goto out;
    }
    if (st_target_parse_answer(ST_TARGET_ANSWER_MODELS, r.body.data, r.body.len, &f) != 0) {
        st_errf(err, errlen, "GET %s/v1/models did not return {\"data\":[...]}", t->base_url);
        rc = ST_ESERVER;
        goto out;
    }
    if (!t->model[0]) {
        snprintf(t->model, sizeof(t->model), "%s", f.model);
    }
    snprintf(t->owned_by, sizeof(t->owned_by), "%s", f.owned_by);
    t->max_model_len = f.max_model_len;
    snprintf(t->server, sizeof(t->server), "%s", r.server);
    snprintf(scale, sizeof(scale), "%s", r.scale);
    if (r.has_scale) {
        char *end;
        double s = strtod(r.scale, &end);
        t->is_sim = 1;
        t->time_scale = end != r.scale && s > 0 && isfinite(s) ? s : 1;
    }
    if (strstr(t->server, "llama.cpp")) {
        v.header = ST_TARGET_LLAMACPP;
    }
    v.owner = kind_of_owner(t->owned_by);

    probe_metrics(t, &v, &r);
    probe_info(t, &v, &r);
    st_buf_clear(&r.body);
    if (st_target_http(t, "GET", "/health", NULL, 0, PROBE_TIMEOUT_MS, &r, NULL, 0) == 0 &&
        r.status == 200) {
        t->endpoints |= ST_TARGET_EP_HEALTH;
    }
    decide(t, &v);
    if (t->is_sim) {
        /* Model mode answers as its dialect; fixed-timing mode as nothing in particular. */
        t->sim_model_mode = t->kind == ST_TARGET_VLLM || t->kind == ST_TARGET_SGLANG ||
                            t->kind == ST_TARGET_LLAMACPP;
        evidence(t, "X-Sim-Time-Scale: %s", scale);
    }
    probe_tokenize(t, &r);
    rc = 0;
out:
    st_http_resp_release(&r);
    return rc;
}

/* ---- health ---- */

enum st_target_health st_target_health(struct st_target *t, uint64_t timeout_ms, char *why,
                                       size_t whylen)
{
    struct st_http_resp r;
    enum st_target_health h = ST_TARGET_DOWN;
    char st[ST_HTTP_SNIPPET + 32];
    st_http_resp_init(&r, 1u << 20);
    uint64_t ms = timeout_ms ? timeout_ms : t->timeout_ms;
    if (st_target_http(t, "GET", "/health", NULL, 0, ms, &r, why, whylen) != 0) {
        goto out;
    }
    if (r.status == 404) {
        st_buf_clear(&r.body);
        if (st_target_http(t, "GET", "/v1/models", NULL, 0, ms, &r, why, whylen) != 0) {
            goto out;
        }
    }
    st_http_status_text(&r, st, sizeof(st));
    st_errf(why, whylen, "%s", st);
    h = r.status == 200 ? ST_TARGET_UP : r.status == 503 ? ST_TARGET_LOADING : ST_TARGET_DOWN;
out:
    st_http_resp_release(&r);
    return h;
}

/* ---- token counts ---- */

/*
 * POST path body and reads the answer as JSON into d. Returns 0 for a 200 with JSON;
 * ST_ENOTFOUND for 404/405; ST_ESERVER for another status; ST_EPARSE for a body that is not
 * JSON; or http()'s error.
 */
static int post_json(struct st_target *t, const char *path, const struct st_buf *body,
                     uint64_t timeout_ms, struct st_http_resp *r, struct st_json *d, char *err,
                     size_t errlen)
{
    st_buf_clear(&r->body);
    r->status = 0;
    int rc = st_target_http(t, "POST", path, body->data, body->len, timeout_ms, r, err, errlen);
    if (rc != 0) {
        return rc;
    }
    if (r->status != 200) {
        char st[ST_HTTP_SNIPPET + 32];
        st_http_status_text(r, st, sizeof(st));
        st_errf(err, errlen, "POST %s answered %s", path, st);
        return r->status == 404 || r->status == 405 ? ST_ENOTFOUND : ST_ESERVER;
    }
    if (body_json(r, d) != 0) {
        st_errf(err, errlen, "POST %s: the answer is not JSON", path);
        return ST_EPARSE;
    }
    return 0;
}

int st_target_tokenize(struct st_target *t, const char *text, size_t len, int chat,
                       uint64_t *tokens, char *err, size_t errlen)
{
    struct st_http_resp r;
    struct st_json d;
    struct st_buf body, tmpl;
    const char *path = NULL;
    int rc = ST_ENOTFOUND;
    st_http_resp_init(&r, BODY_MAX);
    st_json_init(&d, 0);
    st_buf_init(&body);
    st_buf_init(&tmpl);
    uint32_t ep = t->endpoints;
    /* The sim takes the {messages} form on /tokenize in every dialect (docs/sim.md). */
    if (t->is_sim && t->sim_model_mode &&
        (ep & (ST_TARGET_EP_TOKENIZE | ST_TARGET_EP_V1_TOKENIZE))) {
        path = ep & ST_TARGET_EP_V1_TOKENIZE ? "/v1/tokenize" : "/tokenize";
        build_body(t,
                   chat                            ? ST_OAIREQ_TOK_MESSAGES
                   : t->kind == ST_TARGET_LLAMACPP ? ST_OAIREQ_TOK_CONTENT
                                                   : ST_OAIREQ_TOK_PROMPT,
                   text, len, &body);
    } else if (t->kind == ST_TARGET_VLLM && (ep & ST_TARGET_EP_TOKENIZE)) {
        path = "/tokenize";
        build_body(t, chat ? ST_OAIREQ_TOK_MESSAGES : ST_OAIREQ_TOK_PROMPT, text, len, &body);
    } else if (t->kind == ST_TARGET_SGLANG && !chat &&
               (ep & (ST_TARGET_EP_V1_TOKENIZE | ST_TARGET_EP_TOKENIZE))) {
        path = ep & ST_TARGET_EP_V1_TOKENIZE ? "/v1/tokenize" : "/tokenize";
        build_body(t, ST_OAIREQ_TOK_PROMPT, text, len, &body);
    } else if (t->kind == ST_TARGET_LLAMACPP && (ep & ST_TARGET_EP_TOKENIZE) &&
               (!chat || (ep & ST_TARGET_EP_APPLY_TEMPLATE))) {
        path = "/tokenize";
        if (chat) {
            /* The server renders the template, then tokenizes it with special tokens on. */
            build_body(t, ST_OAIREQ_TOK_CHAT, text, len, &body);
            rc = post_json(t, "/apply-template", &body, t->timeout_ms, &r, &d, err, errlen);
            if (rc != 0) {
                goto out;
            }
            int pr = st_json_get(&d, 0, "prompt");
            if (st_json_type(&d, pr) != ST_JSON_STRING || st_json_str(&d, pr, &tmpl) != 0) {
                st_errf(err, errlen, "POST /apply-template: no \"prompt\" string in the answer");
                rc = ST_EPARSE;
                goto out;
            }
            build_body(t, ST_OAIREQ_TOK_CONTENT, tmpl.data ? tmpl.data : "", tmpl.len, &body);
        } else {
            build_body(t, ST_OAIREQ_TOK_CONTENT, text, len, &body);
        }
    } else if (t->kind == ST_TARGET_TGI &&
               (ep & (chat ? ST_TARGET_EP_CHAT_TOKENIZE : ST_TARGET_EP_TOKENIZE))) {
        path = chat ? "/chat_tokenize" : "/tokenize";
        build_body(t, chat ? ST_OAIREQ_TOK_CHAT : ST_OAIREQ_TOK_INPUTS, text, len, &body);
    }
    if (!path) {
        st_errf(err, errlen, "%s has no tokenize route for %s text", st_target_kind_name(t->kind),
                chat ? "chat" : "completion");
        rc = ST_ENOTFOUND;
        goto out;
    }
    rc = post_json(t, path, &body, t->timeout_ms, &r, &d, err, errlen);
    if (rc != 0) {
        goto out;
    }
    rc = count_of(&d, tokens);
    if (rc != 0) {
        st_errf(err, errlen, "POST %s: no \"count\" or \"tokens\" in the answer", path);
    }
out:
    st_http_resp_release(&r);
    st_json_release(&d);
    st_buf_release(&body);
    st_buf_release(&tmpl);
    return rc;
}

int st_target_prompt_tokens(struct st_target *t, const char *text, size_t len, int chat,
                            uint64_t *tokens, char *err, size_t errlen)
{
    struct st_http_resp r;
    struct st_json d;
    struct st_buf body;
    struct st_jw w;
    const char *path = chat ? "/v1/chat/completions" : "/v1/completions";
    st_http_resp_init(&r, BODY_MAX);
    st_json_init(&d, 0);
    st_buf_init(&body);
    st_jw_init(&w, &body);
    st_jw_obj_open(&w);
    if (t->model[0]) {
        st_jw_kstr(&w, "model", t->model);
    }
    if (chat) {
        st_jw_key(&w, "messages");
        st_jw_arr_open(&w);
        st_jw_obj_open(&w);
        st_jw_kstr(&w, "role", "user");
        st_jw_key(&w, "content");
        st_jw_strn(&w, text, len);
        st_jw_obj_close(&w);
        st_jw_arr_close(&w);
    } else {
        st_jw_key(&w, "prompt");
        st_jw_strn(&w, text, len);
    }
    st_jw_ki64(&w, "max_tokens", 1);
    st_jw_kbool(&w, "stream", 0);
    st_jw_obj_close(&w);
    uint64_t ms = t->timeout_ms > PROMPT_TIMEOUT_MS ? t->timeout_ms : PROMPT_TIMEOUT_MS;
    int rc = post_json(t, path, &body, ms, &r, &d, err, errlen);
    if (rc == ST_ENOTFOUND) {
        rc = ST_ESERVER; /* the completion routes exist on every target; a 404 is an error */
    }
    if (rc == 0) {
        int usage = st_json_get(&d, 0, "usage");
        if (json_u64(&d, usage, "prompt_tokens", tokens) != 0) {
            st_errf(err, errlen, "POST %s: the answer has no usage.prompt_tokens", path);
            rc = ST_EPARSE;
        }
    }
    st_http_resp_release(&r);
    st_json_release(&d);
    st_buf_release(&body);
    return rc;
}

int st_target_count_fn(void *ctx, const char *text, size_t len, uint64_t *tokens, char *err,
                       size_t errlen)
{
    struct st_target_counter *c = ctx;
    int rc = st_target_tokenize(c->t, text, len, c->chat, tokens, err, errlen);
    if (rc == 0) {
        c->endpoint_calls++;
        return 0;
    }
    if (rc != ST_ENOTFOUND) {
        return rc;
    }
    rc = st_target_prompt_tokens(c->t, text, len, c->chat, tokens, err, errlen);
    if (rc == 0) {
        c->fallback_calls++;
    }
    return rc;
}

/* ---- flush ---- */

static enum st_target_flush_outcome flush_set(struct st_target_flush *out,
                                              enum st_target_flush_outcome o, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum st_target_flush_outcome flush_set(struct st_target_flush *out,
                                              enum st_target_flush_outcome o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->reason, sizeof(out->reason), fmt, ap);
    va_end(ap);
    out->outcome = o;
    return o;
}

static enum st_target_flush_outcome flush_vllm(struct st_target *t, uint64_t timeout_ms,
                                               struct st_target_flush *out, struct st_http_resp *r)
{
    char st[ST_HTTP_SNIPPET + 32], e[256] = "";
    snprintf(out->route, sizeof(out->route), "POST /reset_prefix_cache");
    out->attempts = 1;
    if (st_target_http(t, "POST", "/reset_prefix_cache", "", 0, timeout_ms, r, e, sizeof(e)) != 0) {
        return flush_set(out, ST_TARGET_FLUSH_ERROR, "%s", e);
    }
    out->status = r->status;
    st_http_status_text(r, st, sizeof(st));
    if (r->status == 200) {
        return flush_set(out, ST_TARGET_FLUSHED,
                         "vLLM accepted the reset; it reports nothing, so check "
                         "vllm:prefix_cache_hits_total or a cold request");
    }
    if (r->status == 404) {
        return flush_set(out, ST_TARGET_FLUSH_UNSUPPORTED,
                         "POST /reset_prefix_cache answered %s: vLLM has this route only when "
                         "started with VLLM_SERVER_DEV_MODE=1 (or isolate runs with cache_salt)",
                         st);
    }
    return flush_set(out, ST_TARGET_FLUSH_ERROR, "POST /reset_prefix_cache answered %s", st);
}

static enum st_target_flush_outcome flush_sglang(struct st_target *t, uint64_t timeout_ms,
                                                 struct st_target_flush *out,
                                                 struct st_http_resp *r)
{
    char st[ST_HTTP_SNIPPET + 32], e[256] = "", path[64];
    uint64_t start = now_ms(), deadline = start + timeout_ms, backoff = 50;
    snprintf(out->route, sizeof(out->route), "POST /flush_cache");
    for (;;) {
        uint64_t now = now_ms();
        uint64_t left = deadline > now ? deadline - now : 0;
        /* Newer SGLang waits for idle up to ?timeout= seconds (the sim: virtual seconds);
         * older builds ignore it and answer 400 at once, which the backoff loop covers. */
        double wait_s = (double)left / 1000.0 * t->time_scale;
        if (wait_s > 1e6) {
            wait_s = 1e6;
        }
        if (left >= 10) {
            snprintf(path, sizeof(path), "/flush_cache?timeout=%.3f", wait_s);
        } else {
            snprintf(path, sizeof(path), "/flush_cache");
        }
        st_buf_clear(&r->body);
        out->attempts++;
        int rc = st_target_http(t, "POST", path, "", 0, left + FLUSH_GRACE_MS, r, e, sizeof(e));
        if (rc != 0) {
            return flush_set(out, ST_TARGET_FLUSH_ERROR, "%s", e);
        }
        out->status = r->status;
        st_http_status_text(r, st, sizeof(st));
        if (r->status == 200) {
            return flush_set(out, ST_TARGET_FLUSHED, "SGLang flushed the radix cache (%s)", st);
        }
        if (r->status == 404) {
            return flush_set(out, ST_TARGET_FLUSH_UNSUPPORTED,
                             "POST /flush_cache answered %s: this server has no flush route", st);
        }
        if (r->status == 401 || r->status == 403) {
            return flush_set(out, ST_TARGET_FLUSH_ERROR,
                             "POST /flush_cache answered %s: it needs the admin API key", st);
        }
        if (r->status != 400) {
            return flush_set(out, ST_TARGET_FLUSH_ERROR, "POST /flush_cache answered %s", st);
        }
        now = now_ms();
        if (now >= deadline) {
            return flush_set(out, ST_TARGET_FLUSH_BUSY,
                             "SGLang refused the flush (HTTP 400) while requests ran or waited, "
                             "%u attempts over %llu ms",
                             out->attempts, (unsigned long long)(now - start));
        }
        uint64_t nap = backoff < deadline - now ? backoff : deadline - now;
        sleep_ms(nap);
        backoff = backoff * 2 < 1000 ? backoff * 2 : 1000;
    }
}

/* The slot count: /props total_slots from open, else GET /slots' length. */
static uint32_t slot_count(struct st_target *t, struct st_http_resp *r)
{
    struct st_json d;
    uint32_t n = t->total_slots;
    if (n) {
        return n;
    }
    st_json_init(&d, 0);
    st_buf_clear(&r->body);
    if (st_target_http(t, "GET", "/slots", NULL, 0, PROBE_TIMEOUT_MS, r, NULL, 0) == 0 &&
        r->status == 200 && body_json(r, &d) == 0 && st_json_type(&d, 0) == ST_JSON_ARRAY) {
        n = d.toks[0].size;
    }
    st_json_release(&d);
    return n;
}

static enum st_target_flush_outcome flush_llamacpp(struct st_target *t, uint64_t timeout_ms,
                                                   struct st_target_flush *out,
                                                   struct st_http_resp *r)
{
    char st[ST_HTTP_SNIPPET + 32], e[256] = "", path[64];
    struct st_json d;
    uint64_t deadline = now_ms() + timeout_ms, erased = 0;
    uint32_t n = slot_count(t, r);
    snprintf(out->route, sizeof(out->route), "POST /slots/{id}?action=erase");
    if (n == 0) {
        return flush_set(out, ST_TARGET_FLUSH_ERROR,
                         "the slot count is unknown: neither /props total_slots nor /slots");
    }
    st_json_init(&d, 0);
    enum st_target_flush_outcome o = ST_TARGET_FLUSHED;
    for (uint32_t id = 0; id < n && o == ST_TARGET_FLUSHED; id++) {
        uint64_t now = now_ms();
        if (now >= deadline) {
            /* Erases of busy slots wait for them; the deadline bounds the whole loop. */
            o = flush_set(out, ST_TARGET_FLUSH_BUSY,
                          "the time ran out after erasing %u of %u slots", id, n);
            break;
        }
        uint64_t left = deadline - now;
        snprintf(path, sizeof(path), "/slots/%u?action=erase", id);
        st_buf_clear(&r->body);
        out->attempts++;
        int rc = st_target_http(t, "POST", path, "{}", 2, left, r, e, sizeof(e));
        if (rc == ST_ETIMEOUT) {
            /* llama-server defers the erase of a busy slot until it is idle. */
            o = flush_set(out, ST_TARGET_FLUSH_BUSY,
                          "slot %u did not go idle in time: its erase waits for it (%s)", id, e);
            break;
        }
        if (rc != 0) {
            o = flush_set(out, ST_TARGET_FLUSH_ERROR, "%s", e);
            break;
        }
        out->status = r->status;
        st_http_status_text(r, st, sizeof(st));
        if (r->status == 501) {
            o = flush_set(out, ST_TARGET_FLUSH_UNSUPPORTED,
                          "POST %s answered %s: llama-server allows slot actions only when "
                          "started with --slot-save-path DIR",
                          path, st);
        } else if (r->status == 404) {
            o = flush_set(out, ST_TARGET_FLUSH_UNSUPPORTED,
                          "POST %s answered %s: no slots route (started with --no-slots?)", path,
                          st);
        } else if (r->status != 200) {
            o = flush_set(out, ST_TARGET_FLUSH_ERROR, "POST %s answered %s", path, st);
        } else {
            uint64_t k = 0;
            if (body_json(r, &d) == 0 && json_u64(&d, 0, "n_erased", &k) == 0) {
                erased += k;
            }
        }
    }
    st_json_release(&d);
    if (o == ST_TARGET_FLUSHED &&
        st_target_llamacpp_has(t->build, ST_TARGET_LLAMACPP_CACHE_RAM) == 0) {
        flush_set(out, o,
                  "erased slots 0..%u (%llu cached tokens); build %u keeps no host-RAM prompt "
                  "cache, so nothing else serves hits",
                  n - 1, (unsigned long long)erased, t->build);
    } else if (o == ST_TARGET_FLUSHED) {
        flush_set(out, o,
                  "erased slots 0..%u (%llu cached tokens); a build with a host-RAM prompt cache "
                  "(where llama-server --help lists --cache-ram) can still serve hits from it: "
                  "start it with --cache-ram 0 or send cache_prompt:false",
                  n - 1, (unsigned long long)erased);
    }
    return o;
}

enum st_target_flush_outcome st_target_flush(struct st_target *t, uint64_t timeout_ms,
                                             struct st_target_flush *out)
{
    struct st_http_resp r;
    enum st_target_flush_outcome o;
    memset(out, 0, sizeof(*out));
    if (timeout_ms == 0) {
        timeout_ms = FLUSH_DEFAULT_MS;
    }
    if (t->is_sim && !t->sim_model_mode) {
        return flush_set(out, ST_TARGET_FLUSHED,
                         "the fixed-timing simulator keeps no cache: nothing to flush");
    }
    st_http_resp_init(&r, 1u << 20);
    switch (t->kind) {
    case ST_TARGET_VLLM:
        o = flush_vllm(t, timeout_ms, out, &r);
        break;
    case ST_TARGET_SGLANG:
        o = flush_sglang(t, timeout_ms, out, &r);
        break;
    case ST_TARGET_LLAMACPP:
        o = flush_llamacpp(t, timeout_ms, out, &r);
        break;
    case ST_TARGET_TGI:
        o = flush_set(out, ST_TARGET_FLUSH_UNSUPPORTED,
                      "TGI has no cache-reset route: restart it, or start it with "
                      "PREFIX_CACHING=0");
        break;
    case ST_TARGET_TRTLLM:
        o = flush_set(out, ST_TARGET_FLUSH_UNSUPPORTED,
                      "trtllm-serve has no cache-reset route: restart it, or vary cache_salt per "
                      "request");
        break;
    case ST_TARGET_GENERIC:
    default:
        o = flush_set(out, ST_TARGET_FLUSH_UNSUPPORTED,
                      "the server's make is unknown, so no cache-flush route is known");
        break;
    }
    st_http_resp_release(&r);
    return o;
}

/* ---- KV pool ---- */

static int pool_sglang(struct st_target *t, struct st_target_pool *out, char *err, size_t errlen)
{
    static const char *const paths[] = {"/server_info", "/get_server_info"};
    struct st_http_resp r;
    struct st_target_facts f;
    int rc = ST_ENOTFOUND;
    st_http_resp_init(&r, BODY_MAX);
    st_errf(err, errlen, "neither GET /server_info nor /get_server_info gave max_total_num_tokens");
    for (size_t i = 0; i < 2 && rc != 0; i++) {
        if (!probe_answer(t, paths[i], ST_TARGET_ANSWER_SERVER_INFO, &f, &r)) {
            continue;
        }
        out->rank_tokens = f.rank_tokens;
        out->ranks = f.ranks;
        out->total_tokens = f.total_tokens;
        out->exact = 1;
        snprintf(out->source, sizeof(out->source),
                 "GET %s: max_total_num_tokens %llu per DP rank x %u rank%s%s", paths[i],
                 (unsigned long long)f.rank_tokens, f.ranks, f.ranks == 1 ? "" : "s",
                 f.summed ? " (internal_states token_capacity summed)" : "");
        rc = 0;
    }
    st_http_resp_release(&r);
    return rc;
}

/* A label holding a decimal count ("42895"); 0 when absent or not a number ("None"). */
static uint64_t label_u64(const struct st_prom_sample *s, const char *name)
{
    const char *v = st_prom_label(s, name);
    uint64_t x = 0;
    if (!v || !*v) {
        return 0;
    }
    for (; *v; v++) {
        if (*v < '0' || *v > '9' || x > (UINT64_MAX - 9) / 10) {
            return 0;
        }
        x = x * 10 + (uint64_t)(*v - '0');
    }
    return x;
}

static int pool_metrics(struct st_target *t, struct st_target_pool *out, char *err, size_t errlen)
{
    struct st_prom p;
    st_prom_init(&p);
    int rc = st_target_metrics(t, &p, err, errlen);
    if (rc != 0) {
        st_prom_release(&p);
        return rc;
    }
    rc = ST_ENOTFOUND;
    if (t->kind == ST_TARGET_VLLM) {
        uint64_t sum = 0, first = 0, bs = 0, blocks = 0;
        uint32_t ranks = 0;
        for (uint32_t i = 0; i < p.n; i++) {
            const struct st_prom_sample *s = &p.samples[i];
            if (strcmp(s->name, "vllm:cache_config_info") != 0) {
                continue;
            }
            bs = label_u64(s, "block_size");
            blocks = label_u64(s, "num_gpu_blocks");
            if (bs == 0 || blocks == 0 || blocks > UINT64_MAX / bs) {
                continue;
            }
            if (ranks == 0) {
                first = blocks * bs;
            }
            sum += blocks * bs;
            ranks++;
        }
        if (ranks) {
            out->total_tokens = sum;
            out->rank_tokens = first;
            out->ranks = ranks;
            out->exact = 0;
            snprintf(out->source, sizeof(out->source),
                     "GET /metrics: vllm:cache_config_info num_gpu_blocks %llu x block_size %llu "
                     "over %u engine%s (over-counts models with several KV cache groups; the "
                     "start-up line 'GPU KV cache size' is exact)",
                     (unsigned long long)blocks, (unsigned long long)bs, ranks,
                     ranks == 1 ? "" : "s");
            rc = 0;
        } else {
            st_errf(err, errlen, "GET /metrics has no vllm:cache_config_info with num_gpu_blocks");
        }
    } else {
        double v;
        if (st_prom_sum(&p, "tgi_batch_max_total_tokens", NULL, &v) == 0 && v >= 0 && v < 1.8e19) {
            out->total_tokens = out->rank_tokens = (uint64_t)v;
            out->ranks = 1;
            out->exact = 1;
            snprintf(out->source, sizeof(out->source),
                     "GET /metrics: tgi_batch_max_total_tokens %llu",
                     (unsigned long long)out->total_tokens);
            rc = 0;
        } else {
            st_errf(err, errlen, "GET /metrics has no tgi_batch_max_total_tokens");
        }
    }
    st_prom_release(&p);
    return rc;
}

static int pool_llamacpp(struct st_target *t, struct st_target_pool *out, char *err, size_t errlen)
{
    if (t->total_slots == 0 || t->slot_n_ctx == 0) {
        st_errf(err, errlen, "GET /props gave no total_slots and n_ctx");
        return ST_ENOTFOUND;
    }
    out->rank_tokens = t->slot_n_ctx;
    out->ranks = t->total_slots;
    out->total_tokens = t->slot_n_ctx * t->total_slots;
    out->exact = 0;
    if (st_target_llamacpp_has(t->build, ST_TARGET_LLAMACPP_KVU) == 0) {
        snprintf(out->source, sizeof(out->source),
                 "GET /props: n_ctx %llu per slot x total_slots %u (build %u has one KV cache "
                 "that all slots share, of about that many cells: its start-up line "
                 "'llama_kv_cache_init: kv_size' states it)",
                 (unsigned long long)t->slot_n_ctx, t->total_slots, t->build);
    } else {
        snprintf(out->source, sizeof(out->source),
                 "GET /props: n_ctx %llu per slot x total_slots %u (right for split KV streams; "
                 "with a unified KV cache the slots share one pool of n_ctx cells: the start-up "
                 "line 'S/1 seqs' says so; where --help lists -kvu, it and -np auto unify)",
                 (unsigned long long)t->slot_n_ctx, t->total_slots);
    }
    return 0;
}

int st_target_pool(struct st_target *t, const char *log, size_t log_len, struct st_target_pool *out,
                   char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (log && log_len) {
        struct st_logline_pool lp;
        int rc = st_logline_scan(log, log_len, &lp);
        if (rc == 0) {
            out->total_tokens = lp.total_tokens;
            out->rank_tokens = lp.rank_tokens[0];
            out->ranks = lp.ranks;
            out->exact = 1;
            snprintf(out->source, sizeof(out->source), "log line %llu: %s",
                     (unsigned long long)lp.line_no, lp.line);
            snprintf(out->type_k, sizeof(out->type_k), "%s", lp.type_k);
            snprintf(out->type_v, sizeof(out->type_v), "%s", lp.type_v);
            return 0;
        }
        if (rc != ST_ENOTFOUND) {
            st_errf(err, errlen, "the log names more than %u ranks", ST_LOGLINE_MAX_RANKS);
            return rc;
        }
    }
    switch (t->kind) {
    case ST_TARGET_SGLANG:
        return pool_sglang(t, out, err, errlen);
    case ST_TARGET_VLLM:
    case ST_TARGET_TGI:
        return pool_metrics(t, out, err, errlen);
    case ST_TARGET_LLAMACPP:
        return pool_llamacpp(t, out, err, errlen);
    case ST_TARGET_TRTLLM:
    case ST_TARGET_GENERIC:
    default:
        st_errf(err, errlen, "%s states no KV pool size over HTTP; pass its start-up log",
                st_target_kind_name(t->kind));
        return ST_ENOTFOUND;
    }
}

/* ---- metrics ---- */

int st_target_metrics(struct st_target *t, struct st_prom *out, char *err, size_t errlen)
{
    struct st_http_resp r;
    char st[ST_HTTP_SNIPPET + 32];
    uint32_t line = 0;
    st_http_resp_init(&r, (size_t)ST_PROM_MAX_BYTES + 1);
    int rc = st_target_http(t, "GET", "/metrics", NULL, 0, t->timeout_ms, &r, err, errlen);
    if (rc != 0) {
        goto out;
    }
    st_http_status_text(&r, st, sizeof(st));
    if (r.status == 404 || r.status == 501) {
        st_errf(err, errlen,
                "GET /metrics answered %s: no Prometheus metrics (SGLang needs "
                "--enable-metrics, llama.cpp --metrics)",
                st);
        rc = ST_ENOTFOUND;
        goto out;
    }
    if (r.status != 200) {
        st_errf(err, errlen, "GET /metrics answered %s", st);
        rc = ST_ESERVER;
        goto out;
    }
    size_t i = 0;
    while (i < r.body.len && (r.body.data[i] == ' ' || r.body.data[i] == '\n')) {
        i++;
    }
    if (i < r.body.len && (r.body.data[i] == '{' || r.body.data[i] == '[')) {
        st_errf(err, errlen, "GET /metrics answered JSON (trtllm-serve), not Prometheus text");
        rc = ST_ENOTFOUND;
        goto out;
    }
    rc = st_prom_parse(out, r.body.data ? r.body.data : "", r.body.len, &line);
    if (rc == ST_EPARSE) {
        st_errf(err, errlen, "GET /metrics: line %u is not Prometheus text", line);
    } else if (rc == ST_ETOOBIG) {
        st_errf(err, errlen, "GET /metrics: over %u bytes or %u samples", ST_PROM_MAX_BYTES,
                ST_PROM_MAX_SAMPLES);
    }
out:
    st_http_resp_release(&r);
    return rc;
}

/* Series names per dialect; NULL where the dialect has none. */
struct series {
    const char *hits, *queries;
    int queries_exclude_hits; /* llama.cpp counts computed prompt tokens only */
    const char *prompt, *generation;
    const char *accepted, *drafted, *drafts;
    const char *waiting, *running, *accept_len;
};

static const struct series dialects[] = {
    {"vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total", 0,
     "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
     "vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_draft_tokens_total",
     "vllm:spec_decode_num_drafts_total", "vllm:num_requests_waiting", "vllm:num_requests_running",
     NULL},
    /* vLLM before 0.9 */
    {"vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_queries_total", 0, NULL, NULL, NULL,
     NULL, NULL, NULL, NULL, NULL},
    {"sglang:cached_tokens_total", "sglang:prompt_tokens_total", 0, "sglang:prompt_tokens_total",
     "sglang:generation_tokens_total", NULL, NULL, NULL, "sglang:num_queue_reqs",
     "sglang:num_running_reqs", "sglang:spec_accept_length"},
    {"llamacpp:prompt_tokens_cached_total", "llamacpp:prompt_tokens_total", 1,
     "llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total",
     "llamacpp:spec_decode_num_accepted_tokens_total",
     "llamacpp:spec_decode_num_draft_tokens_total", "llamacpp:spec_decode_num_drafts_total",
     "llamacpp:requests_deferred", "llamacpp:requests_processing", NULL},
    {NULL, NULL, 0, NULL, NULL, NULL, NULL, NULL, "tgi_queue_size", "tgi_batch_current_size", NULL},
};

static int get1(const struct st_prom *m, const char *name, double *v)
{
    return name && st_prom_sum(m, name, NULL, v) == 0;
}

void st_target_counters_read(const struct st_prom *m, struct st_target_counters *o)
{
    memset(o, 0, sizeof(*o));
    for (size_t i = 0; i < sizeof(dialects) / sizeof(dialects[0]); i++) {
        const struct series *s = &dialects[i];
        double a, b, c;
        if (!(o->have & ST_TARGET_HAVE_PREFIX) && get1(m, s->hits, &a) && get1(m, s->queries, &b)) {
            o->have |= ST_TARGET_HAVE_PREFIX;
            o->prefix_hit_tokens = a;
            o->prefix_query_tokens = s->queries_exclude_hits ? a + b : b;
        }
        if (!(o->have & ST_TARGET_HAVE_TOKENS) && get1(m, s->prompt, &a) &&
            get1(m, s->generation, &b)) {
            o->have |= ST_TARGET_HAVE_TOKENS;
            o->prompt_tokens = a;
            o->generation_tokens = b;
        }
        if (!(o->have & ST_TARGET_HAVE_SPEC) && get1(m, s->accepted, &a) &&
            get1(m, s->drafted, &b)) {
            o->have |= ST_TARGET_HAVE_SPEC;
            o->spec_accepted_tokens = a;
            o->spec_draft_tokens = b;
            if (get1(m, s->drafts, &c)) {
                o->have |= ST_TARGET_HAVE_SPEC_DRAFTS;
                o->spec_drafts = c;
            }
        }
        if (!(o->have & ST_TARGET_HAVE_WAITING) && get1(m, s->waiting, &a)) {
            o->have |= ST_TARGET_HAVE_WAITING;
            o->waiting = a;
        }
        if (!(o->have & ST_TARGET_HAVE_RUNNING) && get1(m, s->running, &a)) {
            o->have |= ST_TARGET_HAVE_RUNNING;
            o->running = a;
        }
        if (!(o->have & ST_TARGET_HAVE_ACCEPT_LEN) && get1(m, s->accept_len, &a)) {
            o->have |= ST_TARGET_HAVE_ACCEPT_LEN;
            o->spec_accept_length = a;
        }
    }
}

/* after - before, noting a counter that went backwards. */
static double diff(double before, double after, int *reset)
{
    if (after < before) {
        *reset = 1;
    }
    return after - before;
}

void st_target_delta(const struct st_target_counters *before,
                     const struct st_target_counters *after, struct st_target_delta *out)
{
    const uint32_t counters = ST_TARGET_HAVE_PREFIX | ST_TARGET_HAVE_TOKENS | ST_TARGET_HAVE_SPEC |
                              ST_TARGET_HAVE_SPEC_DRAFTS;
    memset(out, 0, sizeof(*out));
    out->have = (before->have & after->have & counters) | (after->have & ~counters);
    out->prefix_hit_rate = NAN;
    out->spec_accept_rate = NAN;
    out->spec_accept_length = NAN;
    if (out->have & ST_TARGET_HAVE_PREFIX) {
        out->prefix_hit_tokens =
            diff(before->prefix_hit_tokens, after->prefix_hit_tokens, &out->reset);
        out->prefix_query_tokens =
            diff(before->prefix_query_tokens, after->prefix_query_tokens, &out->reset);
        if (out->prefix_query_tokens > 0) {
            out->prefix_hit_rate = out->prefix_hit_tokens / out->prefix_query_tokens;
        }
    }
    if (out->have & ST_TARGET_HAVE_TOKENS) {
        out->prompt_tokens = diff(before->prompt_tokens, after->prompt_tokens, &out->reset);
        out->generation_tokens =
            diff(before->generation_tokens, after->generation_tokens, &out->reset);
    }
    if (out->have & ST_TARGET_HAVE_SPEC) {
        out->spec_accepted_tokens =
            diff(before->spec_accepted_tokens, after->spec_accepted_tokens, &out->reset);
        out->spec_draft_tokens =
            diff(before->spec_draft_tokens, after->spec_draft_tokens, &out->reset);
        if (out->spec_draft_tokens > 0) {
            out->spec_accept_rate = out->spec_accepted_tokens / out->spec_draft_tokens;
        }
    }
    if (out->have & ST_TARGET_HAVE_SPEC_DRAFTS) {
        out->spec_drafts = diff(before->spec_drafts, after->spec_drafts, &out->reset);
        if (out->spec_drafts > 0) {
            out->spec_accept_length = 1 + out->spec_accepted_tokens / out->spec_drafts;
        }
    }
    if (isnan(out->spec_accept_length) && (out->have & ST_TARGET_HAVE_ACCEPT_LEN)) {
        out->spec_accept_length = after->spec_accept_length;
    }
    out->waiting = after->waiting;
    out->running = after->running;
}
