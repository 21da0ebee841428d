/*
 * Arm lifecycle (arm.h), the generic part: starts one arm's server through its backend's ops
 * table (arm_int.h: arm_sim.c, arm_command.c, arm_compose.c, arm_url.c), waits for its health,
 * reads its KV capacity and context, checks the configuration it reports against the arm's
 * parameters, and hands the watch, the log, the stop, the saved starting state and the restore
 * to the backend. Every step writes evidence (JSON) and an arm's own failure is data
 * (st_arm_up.fail), not an error. Not the runner: one arm at a time, blocking, on the runner's
 * thread; every wait is bounded by the plan's timeouts. No backend calls this file: the restore
 * gets st_arm_start and st_arm_stop as callbacks. User-facing rules: docs/campaign-targets.md.
 */
#include "target/arm.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "proto/prom.h"
#include "target/arm_int.h"
#include "target/server.h"

/* The backend of each plan target kind (ST_TARGET_BACKEND_*); NULL for a kind without one. */
static const struct st_arm_backend *backend_of(enum st_target_backend k)
{
    static const struct st_arm_backend *const table[] = {
        [ST_TARGET_BACKEND_SIM] = &st_arm_backend_sim,
        [ST_TARGET_BACKEND_COMMAND] = &st_arm_backend_command,
        [ST_TARGET_BACKEND_COMPOSE] = &st_arm_backend_compose,
        [ST_TARGET_BACKEND_URL] = &st_arm_backend_url,
    };
    size_t i = (size_t)k;
    return i < sizeof(table) / sizeof(table[0]) ? table[i] : NULL;
}

/* ---- what the server reports: KV pool, context, configuration ---- */

enum src {
    SRC_LOG = 1,
    SRC_INFO,
    SRC_METRICS,
    SRC_MODELS,
    SRC_PROPS,
    SRC_SLOT,        /* llama.cpp /props default_generation_settings */
    SRC_SLOT_PARAMS, /* and its params */
    SRC_KV,          /* the start-up KV line: type_k, type_v, cells */
    SRC_PROPS_CTX,   /* /props n_ctx x total_slots */
};

struct reported {
    const char *log; /* borrowed */
    size_t log_len;
    struct st_buf info_body;
    struct st_json info;
    int has_info;
    const char *info_route;
    struct st_buf props_body;
    struct st_json props;
    int has_props;
    struct st_prom prom;
    const struct st_prom_sample *cache_cfg; /* vllm:cache_config_info, borrowed from prom */
    uint64_t max_model_len;
    uint64_t slot_ctx_tokens;          /* llama.cpp: /props n_ctx x total_slots; 0 unknown */
    const struct st_target_pool *pool; /* borrowed: the KV pool read (NULL: none) */
};

/* A parameter of ours and where a server states it (beyond the same name in each source). */
static const struct {
    const char *param;
    enum src src;
    const char *key;
} aliases[] = {
    {"engine.context_length", SRC_INFO, "context_length"},
    {"engine.context_length", SRC_MODELS, "max_model_len"},
    {"engine.tp", SRC_INFO, "tp_size"},
    {"engine.pp", SRC_INFO, "pp_size"},
    {"engine.dp_attention", SRC_INFO, "dp_size"},
    {"engine.mem_fraction", SRC_INFO, "mem_fraction_static"},
    {"engine.mem_fraction", SRC_METRICS, "gpu_memory_utilization"},
    {"engine.max_batched_tokens", SRC_INFO, "chunked_prefill_size"},
    {"engine.max_running", SRC_INFO, "max_running_requests"},
    {"engine.max_running", SRC_PROPS, "total_slots"},
    {"engine.page_size", SRC_INFO, "page_size"},
    {"engine.page_size", SRC_METRICS, "block_size"},
    {"engine.spec_steps", SRC_INFO, "speculative_num_steps"},
    {"engine.prefix_caching", SRC_METRICS, "enable_prefix_caching"},
    {"max_model_len", SRC_MODELS, "max_model_len"},
    {"context_length", SRC_MODELS, "max_model_len"},
    {"kv_cache_dtype", SRC_METRICS, "cache_dtype"},
    {"parallel", SRC_PROPS, "total_slots"},
    {"tp", SRC_INFO, "tp_size"},
    {"pp", SRC_INFO, "pp_size"},
    {"dp", SRC_INFO, "dp_size"},
    {"mem_fraction", SRC_INFO, "mem_fraction_static"},
    {"dp_attention", SRC_INFO, "enable_dp_attention"},
    {"n_parallel", SRC_PROPS, "total_slots"},
};

/* llama.cpp's: /props per slot and the start-up KV line (b4748 and newer), read per cmp. Not the
 * draft settings: b4748's /props states speculative.n_max 16, n_min 0, p_min 0.75 whatever
 * --draft-max/--draft-min/--draft-p-min say (tests/data/wire/llamacpp-b4748/props_flags.txt). */
static const struct {
    const char *param;
    enum src src;
    const char *key;
    enum st_arm_cmp cmp;
} llamacpp_aliases[] = {
    {"n_ctx", SRC_SLOT, "n_ctx", ST_ARM_CMP_PLAIN},
    {"n_ctx_slot", SRC_SLOT, "n_ctx", ST_ARM_CMP_PLAIN},
    {"ctx_per_slot", SRC_SLOT, "n_ctx", ST_ARM_CMP_PLAIN},
    {"ctx_size", SRC_KV, "cells", ST_ARM_CMP_PLAIN},
    {"ctx_size", SRC_PROPS_CTX, "n_ctx x total_slots", ST_ARM_CMP_PLAIN},
    {"cache_type_k", SRC_KV, "type_k", ST_ARM_CMP_PLAIN},
    {"cache_type_v", SRC_KV, "type_v", ST_ARM_CMP_PLAIN},
    {"type_k", SRC_KV, "type_k", ST_ARM_CMP_PLAIN},
    {"type_v", SRC_KV, "type_v", ST_ARM_CMP_PLAIN},
    {"kv_cache_dtype", SRC_KV, "type_k", ST_ARM_CMP_PLAIN},
    {"speculative", SRC_SLOT, "speculative", ST_ARM_CMP_PLAIN},
    {"draft_model", SRC_SLOT, "speculative", ST_ARM_CMP_SET},
    {"model_draft", SRC_SLOT, "speculative", ST_ARM_CMP_SET},
    {"draft_model", SRC_SLOT_PARAMS, "speculative.types", ST_ARM_CMP_SET_NOT_NONE},
    {"model_draft", SRC_SLOT_PARAMS, "speculative.types", ST_ARM_CMP_SET_NOT_NONE},
    {"temp", SRC_SLOT_PARAMS, "temperature", ST_ARM_CMP_F32},
    {"temperature", SRC_SLOT_PARAMS, "temperature", ST_ARM_CMP_F32},
    {"top_p", SRC_SLOT_PARAMS, "top_p", ST_ARM_CMP_F32},
    {"min_p", SRC_SLOT_PARAMS, "min_p", ST_ARM_CMP_F32},
    {"repeat_penalty", SRC_SLOT_PARAMS, "repeat_penalty", ST_ARM_CMP_F32},
};

/* The value src states for key, into val; where names it. Returns 1 when found. */
static int lookup(const struct reported *r, enum src src, const char *key, char *val, size_t cap,
                  char *where, size_t wcap)
{
    switch (src) {
    case SRC_LOG:
        if (st_arm_log_arg(r->log, r->log_len, key, val, cap)) {
            snprintf(where, wcap, "log: non-default args %s", key);
            return 1;
        }
        return 0;
    case SRC_INFO:
        if (r->has_info && st_arm_json_top(&r->info, key, val, cap)) {
            snprintf(where, wcap, "GET %s %s", r->info_route, key);
            return 1;
        }
        return 0;
    case SRC_METRICS: {
        const char *v = r->cache_cfg ? st_prom_label(r->cache_cfg, key) : NULL;
        if (v) {
            st_arm_copy_line(v, strlen(v), val, cap);
            snprintf(where, wcap, "GET /metrics vllm:cache_config_info %s", key);
            return 1;
        }
        return 0;
    }
    case SRC_MODELS:
        if (r->max_model_len && strcmp(key, "max_model_len") == 0) {
            snprintf(val, cap, "%" PRIu64, r->max_model_len);
            snprintf(where, wcap, "GET /v1/models max_model_len");
            return 1;
        }
        return 0;
    case SRC_PROPS:
        if (r->has_props && st_arm_json_top(&r->props, key, val, cap)) {
            snprintf(where, wcap, "GET /props %s", key);
            return 1;
        }
        return 0;
    case SRC_SLOT:
    case SRC_SLOT_PARAMS: {
        int o = r->has_props ? st_json_get(&r->props, 0, "default_generation_settings") : -1;
        o = src == SRC_SLOT_PARAMS ? st_json_get(&r->props, o, "params") : o;
        if (o >= 0 && st_arm_json_member(&r->props, o, key, val, cap)) {
            snprintf(where, wcap, "GET /props default_generation_settings%s.%s",
                     src == SRC_SLOT_PARAMS ? ".params" : "", key);
            return 1;
        }
        return 0;
    }
    case SRC_KV:
        return st_arm_kv_value(r->pool, key, val, cap, where, wcap);
    case SRC_PROPS_CTX:
        if (r->slot_ctx_tokens) {
            snprintf(val, cap, "%" PRIu64, r->slot_ctx_tokens);
            snprintf(where, wcap, "GET /props %s", key);
            return 1;
        }
        return 0;
    }
    return 0;
}

/* Where the server states parameter name: the alias table, then the same name in the log's
 * non-default args, server info and the cache config labels ('-' read as '_'). */
static int find_reported(const struct reported *r, const char *name, char *val, size_t cap,
                         char *where, size_t wcap, enum st_arm_cmp *xf)
{
    char key[ST_TARGET_NAME_MAX];
    snprintf(key, sizeof(key), "%s", name);
    for (char *c = key; *c; c++) {
        *c = *c == '-' ? '_' : *c;
    }
    *xf = ST_ARM_CMP_PLAIN;
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
        if (strcmp(aliases[i].param, name) == 0 &&
            lookup(r, aliases[i].src, aliases[i].key, val, cap, where, wcap)) {
            return 1;
        }
    }
    for (size_t i = 0; i < sizeof(llamacpp_aliases) / sizeof(llamacpp_aliases[0]); i++) {
        if (strcmp(llamacpp_aliases[i].param, key) == 0 &&
            lookup(r, llamacpp_aliases[i].src, llamacpp_aliases[i].key, val, cap, where, wcap)) {
            *xf = llamacpp_aliases[i].cmp;
            return 1;
        }
    }
    if (strchr(name, '.')) {
        return 0; /* a profile key: only the table knows where it shows */
    }
    static const enum src order[] = {SRC_LOG, SRC_INFO, SRC_METRICS};
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
        if (lookup(r, order[i], key, val, cap, where, wcap)) {
            return 1;
        }
    }
    return 0;
}

static void reported_fetch(struct reported *r, struct st_target *t, struct st_http_client **http,
                           const char *url)
{
    struct {
        uint32_t ep;
        const char *route;
        int props;
    } routes[] = {
        {ST_TARGET_EP_GET_SERVER_INFO, "/get_server_info", 0},
        {ST_TARGET_EP_SERVER_INFO, "/server_info", 0},
        {ST_TARGET_EP_PROPS, "/props", 1},
    };
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        if (!(t->endpoints & routes[i].ep) || (!routes[i].props && r->has_info)) {
            continue;
        }
        struct st_buf u;
        st_buf_init(&u);
        st_buf_printf(&u, "%s%s", url, routes[i].route);
        struct st_buf *b = routes[i].props ? &r->props_body : &r->info_body;
        struct st_json *d = routes[i].props ? &r->props : &r->info;
        long status = 0;
        char why[128];
        st_buf_clear(b);
        if (st_arm_http_get(http, u.data, 5000, &status, b, why, sizeof(why)) == 0 &&
            status == 200 && st_json_parse(d, b->data ? b->data : "", b->len) == 0 &&
            st_json_type(d, 0) == ST_JSON_OBJECT) {
            if (routes[i].props) {
                r->has_props = 1;
            } else {
                r->has_info = 1;
                r->info_route = routes[i].route;
            }
        }
        st_buf_release(&u);
    }
    if (t->endpoints & ST_TARGET_EP_METRICS) {
        char err[128];
        if (st_target_metrics(t, &r->prom, err, sizeof(err)) == 0) {
            r->cache_cfg = st_prom_find(&r->prom, "vllm:cache_config_info");
        }
    }
    r->max_model_len = t->max_model_len;
}

/* Compares every parameter of ps the server states; writes "config" into w. Returns
 * ST_ARM_FAIL_CONFIG with the first mismatch in detail, else ST_ARM_OK. */
static enum st_arm_fail config_check(const struct reported *r, const struct st_target_params *ps,
                                     struct st_jw *w, char *detail, size_t len)
{
    enum st_arm_fail f = ST_ARM_OK;
    struct st_buf unchecked; /* the names no source states, a JSON array written aside */
    struct st_jw uw;
    st_buf_init(&unchecked);
    st_jw_init(&uw, &unchecked);
    st_jw_arr_open(&uw);
    st_jw_key(w, "config");
    st_jw_obj_open(w);
    st_jw_key(w, "checked");
    st_jw_arr_open(w);
    for (uint32_t i = 0; ps && i < ps->n; i++) {
        char val[ST_ARM_VALUE_MAX], where[160];
        enum st_arm_cmp xf;
        if (!find_reported(r, ps->v[i].name, val, sizeof(val), where, sizeof(where), &xf)) {
            st_jw_str(&uw, ps->v[i].name);
            continue;
        }
        int ok = st_arm_value_eq_as(ps->v[i].value, val, xf);
        st_jw_obj_open(w);
        st_jw_kstr(w, "name", ps->v[i].name);
        st_jw_kstr(w, "arm", ps->v[i].value);
        st_jw_kstr(w, "server", val);
        st_jw_kstr(w, "source", where);
        st_jw_kbool(w, "ok", ok);
        st_jw_obj_close(w);
        if (!ok && f == ST_ARM_OK) {
            f = ST_ARM_FAIL_CONFIG;
            st_errf(detail, len, "configuration: %s is %s for the arm but %s on the server (%s)",
                    ps->v[i].name, ps->v[i].value, val, where);
        }
    }
    st_jw_arr_close(w);
    st_jw_arr_close(&uw);
    st_jw_key(w, "unchecked");
    st_jw_raw(w, unchecked.data, unchecked.len);
    st_buf_release(&unchecked);
    st_jw_kstr(w, "unchecked_why",
               "the server states these nowhere read here (log non-default args and KV cache "
               "line, GET /get_server_info or /server_info, /metrics vllm:cache_config_info, "
               "/props and its default_generation_settings, /v1/models max_model_len)");
    st_jw_obj_close(w);
    return f;
}

/* Identifies the server, reads its KV pool (log first) and context, and checks its
 * configuration. Writes "target", "kv", "context", "config" into w. */
static enum st_arm_fail inspect(struct st_arm_server *s, const struct st_target_params *ps,
                                const char *log, size_t log_len, struct st_jw *w,
                                struct st_arm_up *up)
{
    struct st_target t;
    struct st_target_cfg cfg = {.base_url = s->url, .timeout_ms = 5000};
    struct reported r;
    char err[384] = "";
    memset(&r, 0, sizeof(r));
    r.log = log;
    r.log_len = log_len;
    st_buf_init(&r.info_body);
    st_buf_init(&r.props_body);
    st_json_init(&r.info, 0);
    st_json_init(&r.props, 0);
    st_prom_init(&r.prom);
    st_target_init(&t, &cfg);
    int rc = st_target_open(&t, err, sizeof(err));
    st_jw_key(w, "target");
    st_jw_obj_open(w);
    if (rc == 0) {
        st_jw_kstr(w, "kind", st_target_kind_name(t.kind));
        st_jw_kbool(w, "sim", t.is_sim);
        st_jw_kstr(w, "model", t.model);
        st_jw_kstr(w, "evidence", t.evidence);
        reported_fetch(&r, &t, &s->http, s->url);
    } else {
        st_jw_kstr(w, "error", err);
    }
    st_jw_obj_close(w);

    struct st_target_pool pool;
    err[0] = '\0';
    rc = rc == 0 ? st_target_pool(&t, log, log_len, &pool, err, sizeof(err)) : rc;
    st_jw_key(w, "kv");
    st_jw_obj_open(w);
    if (rc == 0) {
        up->kv_capacity_tokens = pool.total_tokens;
        const char *src = strncmp(pool.source, "log", 3) == 0       ? "log"
                          : strstr(pool.source, "/get_server_info") ? "get_server_info"
                          : strstr(pool.source, "/server_info")     ? "server_info"
                          : strstr(pool.source, "/metrics")         ? "metrics"
                          : strstr(pool.source, "/props")           ? "props"
                                                                    : "other";
        snprintf(up->kv_source, sizeof(up->kv_source), "%s", src);
        st_jw_ku64(w, "capacity_tokens", pool.total_tokens);
        st_jw_ku64(w, "rank_tokens", pool.rank_tokens);
        st_jw_ku64(w, "ranks", pool.ranks);
        st_jw_kbool(w, "exact", pool.exact);
        st_jw_kstr(w, "source", src);
        st_jw_kstr(w, "evidence", pool.source);
        st_arm_jw_kv_types(w, &pool);
    } else {
        st_jw_key(w, "capacity_tokens");
        st_jw_null(w);
        st_jw_kstr(w, "error", err[0] ? err : st_strerror(rc));
    }
    st_jw_obj_close(w);

    const char *cwhat = "unknown";
    if (t.max_model_len) {
        up->max_context_tokens = t.max_model_len;
        cwhat = "GET /v1/models max_model_len";
    } else if (t.slot_n_ctx) {
        up->max_context_tokens = t.slot_n_ctx;
        cwhat = "GET /props n_ctx of a slot";
    }
    st_jw_key(w, "context");
    st_jw_obj_open(w);
    st_jw_ku64(w, "max_tokens", up->max_context_tokens);
    st_jw_kstr(w, "source", cwhat);
    st_jw_obj_close(w);

    r.pool = rc == 0 ? &pool : NULL;
    r.slot_ctx_tokens = t.slot_n_ctx * t.total_slots;
    enum st_arm_fail f = config_check(&r, ps, w, up->detail, sizeof(up->detail));
    st_target_release(&t);
    st_prom_release(&r.prom);
    st_json_release(&r.info);
    st_json_release(&r.props);
    st_buf_release(&r.info_body);
    st_buf_release(&r.props_body);
    return f;
}

/* Health, then inspection, for a server that was started. */
static void bring_up(struct st_arm_server *s, const struct st_target_params *ps,
                     const struct st_arm_env *env, double t0, double deadline, struct st_jw *w,
                     struct st_arm_up *up)
{
    double poll = env->poll_s > 0 ? env->poll_s : 0.2;
    up->fail = st_arm_wait_health(s, t0, deadline, poll, w, up->detail, sizeof(up->detail));
    if (up->fail != ST_ARM_OK) {
        return;
    }
    up->startup_s = st_arm_now_s() - t0;
    snprintf(up->url, sizeof(up->url), "%s", s->url);
    struct st_buf log;
    st_buf_init(&log);
    s->ops->log(s, ST_ARM_LOG_HEAD_MAX, 0, &log);
    up->fail = inspect(s, ps, log.data, log.len, w, up);
    st_buf_release(&log);
}

/* Stops whatever s started (for a failed start); writes "stop" into w. */
static void stop_quietly(struct st_arm_server *s, struct st_jw *w)
{
    struct st_buf ev;
    st_buf_init(&ev);
    int rc = st_arm_stop(s, &ev);
    (void)rc; /* the arm already failed; how it stopped is in the evidence */
    st_jw_key(w, "stop");
    if (ev.len) {
        st_jw_raw(w, ev.data, ev.len);
    } else {
        st_jw_null(w);
    }
    st_buf_release(&ev);
}

/* Before a start on base_url: nothing may listen on its port or answer there (a server the
 * runner started and recorded was stopped before; anything else is someone else's, and starting
 * beside it would measure it). Writes "port" into w. Returns 0, or ST_EUSAGE naming the owner. */
static int port_free(const struct st_arm_plan *p, const char *arm, struct st_jw *w, char *err,
                     size_t errlen)
{
    struct st_arm_port pt;
    int rc = st_arm_port_probe(p->target->base_url, &pt);
    st_arm_jw_port(w, "port", &pt);
    if (rc != 0) {
        st_errf(err, errlen, "arm %s: %s", arm, pt.desc);
        return ST_EUSAGE;
    }
    if (st_arm_port_taken(&pt)) {
        st_errf(err, errlen,
                "arm %s not started: %s; stop it (or change base_url), then `servetune campaign "
                "resume DIR`",
                arm, pt.desc);
        return ST_EUSAGE;
    }
    return 0;
}

int st_arm_start(const struct st_arm_plan *p, const char *arm, const struct st_target_params *ps,
                 const struct st_arm_env *env, struct st_arm_server **srv, struct st_arm_up *up,
                 char *err, size_t errlen)
{
    st_arm_up_reset(up);
    *srv = NULL;
    struct st_jw w;
    st_jw_init(&w, &up->json);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "arm", arm);
    const struct st_arm_backend *b = backend_of(p->target->kind);
    st_jw_kstr(&w, "kind", b ? b->name : "unknown");

    if (!b || (b->needs_dir && !env->dir) || (b->needs_self_exe && !env->self_exe)) {
        if (!b) {
            st_errf(err, errlen, "arm %s: unknown target kind %d", arm, (int)p->target->kind);
        } else {
            st_errf(err, errlen, "arm %s: the runner gave no %s", arm,
                    env->dir ? "servetune binary (self_exe)" : "evidence folder (dir)");
        }
        st_jw_kstr(&w, "fail", "error");
        st_jw_kstr(&w, "detail", err);
        st_jw_obj_close(&w);
        return ST_EUSAGE;
    }
    if (b->owns_port) {
        int rc = port_free(p, arm, &w, err, errlen);
        if (rc != 0) {
            st_jw_kstr(&w, "fail", "error");
            st_jw_kstr(&w, "detail", err);
            st_jw_obj_close(&w);
            return rc;
        }
    }
    struct st_arm_server *s = st_arm_server_new(p, env, b);
    double t0 = st_arm_now_s();
    double deadline = t0 + (p->target->health_timeout_s > 0 ? p->target->health_timeout_s : 600);
    int rc = b->start(s, p, arm, ps, env, deadline, &w, up, err, errlen);
    if (rc == 0 && up->fail == ST_ARM_OK) {
        bring_up(s, ps, env, t0, deadline, &w, up);
    }
    if (rc == 0 && s->cancelled) {
        rc = ST_EINTERRUPTED;
        st_errf(err, errlen, "arm %s: %s", arm, up->detail);
        up->fail = ST_ARM_OK;
    }
    if (rc != 0 || up->fail != ST_ARM_OK) {
        if (rc == 0 && s->ops->log) {
            s->ops->log(s, ST_ARM_FAIL_TAIL_MAX, 1, &up->log_tail); /* the failure folder's */
        }
        stop_quietly(s, &w);
        s = NULL;
    } else {
        snprintf(up->detail, sizeof(up->detail), "up at %s in %.2f s; KV %" PRIu64 " tokens (%s)",
                 up->url, up->startup_s, up->kv_capacity_tokens,
                 up->kv_source[0] ? up->kv_source : "unknown");
    }
    st_jw_kstr(&w, "fail", rc != 0 ? "error" : st_arm_fail_name(up->fail));
    st_jw_kstr(&w, "detail", rc != 0 ? err : up->detail);
    st_jw_kf64(&w, "startup_s", up->startup_s);
    st_jw_obj_close(&w);
    *srv = s;
    return rc;
}

/* ---- watching and stopping ---- */

enum st_arm_fail st_arm_check(struct st_arm_server *s, char *detail, size_t len)
{
    if (len) {
        detail[0] = '\0';
    }
    return s->ops->check(s, detail, len);
}

void st_arm_log_tail(struct st_arm_server *s, size_t max, struct st_buf *out)
{
    s->ops->log(s, max, 1, out);
}

int st_arm_stop(struct st_arm_server *s, struct st_buf *json)
{
    if (!s) {
        return 0;
    }
    struct st_jw w;
    struct st_buf scratch;
    st_buf_init(&scratch);
    st_jw_init(&w, json ? json : &scratch);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "kind", s->ops->name);
    int rc = s->ops->stop(s, &w);
    st_jw_obj_close(&w);
    st_buf_release(&scratch);
    st_arm_server_free(s);
    return rc;
}

/* ---- starting state and restore ---- */

int st_arm_save_state(const struct st_arm_plan *p, const struct st_arm_env *env,
                      struct st_buf *json, char *err, size_t errlen)
{
    const struct st_arm_backend *b = backend_of(p->target->kind);
    if (!b) {
        st_errf(err, errlen, "unknown target kind %d", (int)p->target->kind);
        return ST_EUSAGE;
    }
    return b->save_state(p, env, json, err, errlen);
}

int st_arm_restore(const struct st_arm_plan *p, const struct st_target_params *baseline,
                   const struct st_arm_env *env, const char *saved, size_t saved_len,
                   struct st_buf *json, int *restored, char *err, size_t errlen)
{
    struct st_json d;
    struct st_buf checks, rest;
    struct st_jw w;
    int ok = 1, rc = 0;
    *restored = 0;
    st_json_init(&d, 0);
    st_buf_init(&checks);
    st_buf_init(&rest);
    st_jw_init(&w, &rest);
    w.comma = 1; /* rest follows "restored" and "checks" inside one object */
    if (st_json_parse(&d, saved ? saved : "", saved ? saved_len : 0) != 0) {
        st_arm_add_check(&checks, &ok, "saved_state", 0, "the saved state is not a JSON object");
        st_json_release(&d);
        st_json_init(&d, 0);
    }
    const struct st_arm_backend *b = backend_of(p->target->kind);
    if (b) {
        struct st_arm_restore_ctx c = {
            .p = p,
            .baseline = baseline,
            .env = env,
            .saved = &d,
            .saved_text = saved,
            .saved_len = saved_len,
            .checks = &checks,
            .ok = &ok,
            .w = &w,
            .start = st_arm_start,
            .stop = st_arm_stop,
            .err = err,
            .errlen = errlen,
        };
        rc = b->restore(&c);
    } else {
        st_errf(err, errlen, "unknown target kind %d", (int)p->target->kind);
        rc = ST_EUSAGE;
    }
    if (rc == 0) {
        *restored = ok && checks.len > 0;
        struct st_jw o;
        st_jw_init(&o, json);
        st_jw_obj_open(&o);
        st_jw_kstr(&o, "kind", b->name);
        st_jw_kbool(&o, "restored", *restored);
        st_buf_puts(json, ",\"checks\":[");
        st_buf_append(json, checks.data ? checks.data : "", checks.len);
        st_buf_putc(json, ']');
        st_buf_append(json, rest.data ? rest.data : "", rest.len);
        st_buf_putc(json, '}');
    }
    st_json_release(&d);
    st_buf_release(&checks);
    st_buf_release(&rest);
    return rc;
}
