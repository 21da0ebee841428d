/*
 * The simulated engine's words: log lines, error bodies, health, response endings. See dialect.h.
 * Sizes in log lines use the engines' own units: vLLM GiB, SGLang "GB" (which SGLang computes as
 * bytes / 2^30), llama.cpp MiB. Pure.
 */
#include "sim/dialect.h"

#include <stdio.h>
#include <string.h>

#include "base/json.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MIB (1024.0 * 1024.0)

const char *st_sim_dialect_pick(enum st_dialect d, const char *vllm, const char *sglang,
                                const char *llamacpp)
{
    switch (d) {
    case ST_DIALECT_SGLANG:
        return sglang;
    case ST_DIALECT_LLAMACPP:
        return llamacpp;
    case ST_DIALECT_VLLM:
    default:
        return vllm;
    }
}

const char *st_sim_dialect_name(enum st_dialect d)
{
    return st_sim_dialect_pick(d, "vllm", "sglang", "llamacpp");
}

const char *st_sim_dialect_owner(enum st_dialect d)
{
    return st_sim_dialect_name(d);
}

/* Appends v with a comma every three digits ("686,320"), as vLLM's f"{n:,}". */
static void put_thousands(struct st_buf *b, uint64_t v)
{
    char digits[32];
    int n = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)v);
    for (int i = 0; i < n; i++) {
        if (i > 0 && (n - i) % 3 == 0) {
            st_buf_putc(b, ',');
        }
        st_buf_putc(b, digits[i]);
    }
}

static double kv_pool_bytes(const struct st_mem_plan *m)
{
    return (double)m->kv_pool_tokens * m->kv_bytes_per_token;
}

static const char *llama_dtype(double bytes)
{
    if (bytes >= 4) {
        return "f32";
    }
    return bytes >= 2 ? "f16" : "q8_0";
}

void st_sim_dialect_startup(struct st_buf *out, const struct st_profile *p,
                            const struct st_mem_plan *m)
{
    const struct st_profile_engine *e = &p->engine;
    switch (e->dialect) {
    case ST_DIALECT_SGLANG: {
        double kv_gb = kv_pool_bytes(m) / GIB;
        double used = m->weights_bytes_per_gpu + kv_pool_bytes(m) + m->graph_bytes + m->act_bytes +
                      e->reserve_bytes;
        double avail = (p->hw.gpu_mem_bytes - used) / GIB;
        st_buf_printf(out, "[TP0] Load weight end. mem usage=%.2f GB.\n",
                      m->weights_bytes_per_gpu / GIB);
        if (p->model.attention == ST_ATTN_MLA) {
            st_buf_printf(out, "[TP0] KV Cache is allocated. #tokens: %llu, KV size: %.2f GB\n",
                          (unsigned long long)m->kv_pool_tokens, kv_gb);
        } else {
            st_buf_printf(out,
                          "[TP0] KV Cache is allocated. #tokens: %llu, K size: %.2f GB, V size: "
                          "%.2f GB\n",
                          (unsigned long long)m->kv_pool_tokens, kv_gb / 2, kv_gb / 2);
        }
        st_buf_printf(out,
                      "[TP0] max_total_num_tokens=%llu, chunked_prefill_size=%u, "
                      "max_prefill_tokens=%u, max_running_requests=%u, context_len=%llu, "
                      "available_gpu_mem=%.2f GB\n",
                      (unsigned long long)m->kv_pool_tokens, e->max_batched_tokens,
                      e->max_batched_tokens, e->max_running, (unsigned long long)e->context_length,
                      avail > 0 ? avail : 0.0);
        break;
    }
    case ST_DIALECT_LLAMACPP: {
        double mib = kv_pool_bytes(m) / MIB;
        const char *dt = llama_dtype(e->kv_dtype_bytes);
        st_buf_printf(out,
                      "llama_kv_cache: size = %7.2f MiB (%6llu cells, %3u layers, %u/%u seqs), "
                      "K (%s): %7.2f MiB, V (%s): %7.2f MiB\n",
                      mib, (unsigned long long)m->kv_pool_tokens, m->layers_per_gpu, e->max_running,
                      e->max_running, dt, mib / 2, dt, mib / 2);
        break;
    }
    case ST_DIALECT_VLLM:
    default: {
        double conc =
            e->context_length ? (double)m->kv_pool_tokens / (double)e->context_length : 0.0;
        st_buf_printf(out, "INFO [gpu_worker.py] Available KV cache memory: %.2f GiB\n",
                      m->kv_budget_bytes / GIB);
        st_buf_puts(out, "INFO [kv_cache_utils.py] GPU KV cache size: ");
        put_thousands(out, m->kv_pool_tokens);
        st_buf_puts(out, " tokens\n");
        st_buf_puts(out, "INFO [kv_cache_utils.py] Maximum concurrency for ");
        put_thousands(out, e->context_length);
        st_buf_printf(out, " tokens per request: %.2fx\n", conc);
        break;
    }
    }
}

void st_sim_dialect_listening(struct st_buf *out, const struct st_profile *p, const char *addr)
{
    if (p->engine.dialect == ST_DIALECT_LLAMACPP) {
        st_buf_printf(out, "main: server is listening on http://%s - starting the main loop\n",
                      addr);
    }
}

void st_sim_dialect_ready(struct st_buf *out, const struct st_profile *p)
{
    st_buf_puts(out,
                st_sim_dialect_pick(p->engine.dialect, "INFO:     Application startup complete.\n",
                                    "The server is fired up and ready to roll!\n",
                                    "main: model loaded\nsrv  update_slots: all slots are idle\n"));
}

void st_sim_dialect_oom(struct st_buf *out, const struct st_profile *p, const struct st_mem_plan *m)
{
    /* The plan's reason already carries the engine's exception class (sim/model/memory.c). */
    const char *reason = m && m->reason[0] ? m->reason : NULL;
    switch (p->engine.dialect) {
    case ST_DIALECT_SGLANG:
        st_buf_puts(out, "[TP0] Scheduler hit an exception: Traceback (most recent call last):\n");
        st_buf_printf(out, "%s\n",
                      reason ? reason
                             : "RuntimeError: Not enough memory. Please try to increase "
                               "--mem-fraction-static.");
        break;
    case ST_DIALECT_LLAMACPP:
        if (reason) {
            st_buf_printf(out, "%s\n", reason);
        }
        st_buf_puts(out, "llama_kv_cache: failed to allocate buffer for kv cache\n");
        st_buf_puts(out, "llama_init_from_model: failed to initialize the context: failed to "
                         "allocate buffer for kv cache\n");
        st_buf_puts(out, "main: exiting due to model loading error\n");
        break;
    case ST_DIALECT_VLLM:
    default:
        st_buf_puts(out, "ERROR [core.py] EngineCore failed to start.\n");
        st_buf_printf(out, "%s\n",
                      reason ? reason
                             : "ValueError: No available memory for the cache blocks. Try "
                               "increasing `gpu_memory_utilization` when initializing the engine.");
        break;
    }
}

void st_sim_dialect_crash(struct st_buf *out, const struct st_profile *p, const char *why)
{
    switch (p->engine.dialect) {
    case ST_DIALECT_SGLANG:
        st_buf_printf(out,
                      "[TP0] Scheduler hit an exception: RuntimeError: CUDA error: an "
                      "illegal memory access was encountered (sim crash %s)\n",
                      why);
        break;
    case ST_DIALECT_LLAMACPP:
        st_buf_printf(out, "GGML_ASSERT failed: sim crash %s\n", why);
        break;
    case ST_DIALECT_VLLM:
    default:
        st_buf_printf(out, "ERROR [core.py] EngineCore encountered a fatal error (sim crash %s)\n",
                      why);
        break;
    }
}

/* ---- errors and health ---- */

static const char *llama_type(int code)
{
    switch (code) {
    case 400:
        return "invalid_request_error";
    case 401:
        return "authentication_error";
    case 404:
        return "not_found_error";
    case 501:
        return "not_supported_error";
    case 503:
        return "unavailable_error";
    default:
        return code < 500 ? "invalid_request_error" : "server_error";
    }
}

void st_sim_dialect_error(struct st_buf *out, enum st_dialect d, int code, const char *message)
{
    struct st_jw w;
    st_jw_init(&w, out);
    st_jw_obj_open(&w);
    switch (d) {
    case ST_DIALECT_SGLANG:
        st_jw_kstr(&w, "object", "error");
        st_jw_kstr(&w, "message", message);
        st_jw_kstr(&w, "type", st_sim_error_type(code));
        st_jw_key(&w, "param");
        st_jw_null(&w);
        st_jw_ki64(&w, "code", code);
        break;
    case ST_DIALECT_LLAMACPP:
        st_jw_key(&w, "error");
        st_jw_obj_open(&w);
        st_jw_ki64(&w, "code", code);
        st_jw_kstr(&w, "message", message);
        st_jw_kstr(&w, "type", llama_type(code));
        st_jw_obj_close(&w);
        break;
    case ST_DIALECT_VLLM:
    default:
        st_jw_key(&w, "error");
        st_jw_obj_open(&w);
        st_jw_kstr(&w, "message", message);
        st_jw_kstr(&w, "type", st_sim_error_type(code));
        st_jw_key(&w, "param");
        st_jw_null(&w);
        st_jw_ki64(&w, "code", code);
        st_jw_obj_close(&w);
        break;
    }
    st_jw_obj_close(&w);
}

void st_sim_dialect_ctx_error(struct st_buf *out, enum st_dialect d, const char *message,
                              uint64_t n_prompt, uint64_t n_ctx)
{
    if (d != ST_DIALECT_LLAMACPP) {
        st_sim_dialect_error(out, d, 400, message);
        return;
    }
    struct st_jw w;
    st_jw_init(&w, out);
    st_jw_obj_open(&w);
    st_jw_key(&w, "error");
    st_jw_obj_open(&w);
    st_jw_ki64(&w, "code", 400);
    st_jw_kstr(&w, "message", message);
    st_jw_kstr(&w, "type", "exceed_context_size_error");
    st_jw_ku64(&w, "n_prompt_tokens", n_prompt);
    st_jw_ku64(&w, "n_ctx", n_ctx);
    st_jw_obj_close(&w);
    st_jw_obj_close(&w);
}

/* Appends raw JSON j[0..n) indented by 2 a level, one member or element a line (the shape of
 * nlohmann::json::dump(2), which llama.cpp's echo uses); strings are copied as they are. */
static void indent_json(struct st_buf *out, const char *j, size_t n)
{
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char c = j[i];
        if (in_str) {
            st_buf_putc(out, c);
            if (c == '\\' && i + 1 < n) {
                st_buf_putc(out, j[++i]);
            } else if (c == '"') {
                in_str = 0;
            }
            continue;
        }
        switch (c) {
        case '"':
            in_str = 1;
            st_buf_putc(out, c);
            break;
        case '{':
        case '[':
            st_buf_putc(out, c);
            st_buf_printf(out, "\n%*s", 2 * ++depth, "");
            break;
        case '}':
        case ']':
            depth = depth > 0 ? depth - 1 : 0;
            st_buf_printf(out, "\n%*s%c", 2 * depth, "", c);
            break;
        case ',':
            st_buf_printf(out, ",\n%*s", 2 * depth, "");
            break;
        case ':':
            st_buf_puts(out, ": ");
            break;
        case ' ':
        case '\n':
        case '\r':
        case '\t':
            break;
        default:
            st_buf_putc(out, c);
            break;
        }
    }
}

int st_sim_dialect_media_refusal(struct st_buf *msg, enum st_dialect d, const char *part,
                                 const char *reason, const char *messages, size_t len)
{
    if (d != ST_DIALECT_LLAMACPP) {
        st_buf_puts(msg, reason);
        return 400;
    }
    st_buf_printf(
        msg, "Failed to parse messages: Unsupported content part type: \"%s\"; messages = ", part);
    indent_json(msg, messages, len);
    return 500;
}

void st_sim_dialect_health(struct st_buf *out, enum st_dialect d, int ready, int *code)
{
    *code = ready ? 200 : 503;
    if (d != ST_DIALECT_LLAMACPP) {
        return;
    }
    if (ready) {
        st_buf_puts(out, "{\"status\":\"ok\"}");
    } else {
        st_buf_puts(out, "{\"error\":{\"message\":\"Loading model\",\"type\":\"unavailable_error\","
                         "\"code\":503}}");
    }
}

/* ---- response endings ---- */

int st_sim_dialect_finish_on_content(enum st_dialect d)
{
    return d == ST_DIALECT_VLLM;
}

static const char *chunk_object(const struct st_sim_resp *r)
{
    return r->api == ST_SIM_API_CHAT ? "chat.completion.chunk" : "text_completion";
}

/* "usage":{...} in the dialect's key order. */
static void put_usage(struct st_buf *b, enum st_dialect d, const struct st_sim_resp *r)
{
    unsigned long long p = r->prompt_tokens, c = r->n_tokens, cached = r->cached_tokens;
    int details = r->cached_report == 0 || r->cached_report == ST_CACHED_REPORT_USAGE;
    if (d == ST_DIALECT_LLAMACPP) {
        st_buf_printf(b,
                      "\"usage\":{\"completion_tokens\":%llu,\"prompt_tokens\":%llu,"
                      "\"total_tokens\":%llu",
                      c, p, p + c);
    } else {
        st_buf_printf(b,
                      "\"usage\":{\"prompt_tokens\":%llu,\"total_tokens\":%llu,"
                      "\"completion_tokens\":%llu",
                      p, p + c, c);
    }
    if (details) {
        st_buf_printf(b, ",\"prompt_tokens_details\":{\"cached_tokens\":%llu}", cached);
    }
    st_buf_puts(b, d == ST_DIALECT_SGLANG ? ",\"reasoning_tokens\":0}" : "}");
}

static double per(double ms, uint64_t n, int per_token)
{
    if (per_token) {
        return n ? ms / (double)n : 0.0;
    }
    return ms > 0 ? 1e3 * (double)n / ms : 0.0;
}

static void put_timings(struct st_buf *b, const struct st_sim_timings *t)
{
    struct st_jw w;
    st_buf_puts(b, "\"timings\":");
    st_jw_init(&w, b);
    st_jw_obj_open(&w);
    if (t->cached_report == 0 || t->cached_report == ST_CACHED_REPORT_USAGE) {
        st_jw_ku64(&w, "cache_n", t->cache_n);
    }
    if (t->cached_report != ST_CACHED_REPORT_NONE) {
        st_jw_ku64(&w, "prompt_n", t->prompt_n);
    }
    st_jw_kf64(&w, "prompt_ms", t->prompt_ms);
    st_jw_kf64(&w, "prompt_per_token_ms", per(t->prompt_ms, t->prompt_n, 1));
    st_jw_kf64(&w, "prompt_per_second", per(t->prompt_ms, t->prompt_n, 0));
    st_jw_ku64(&w, "predicted_n", t->predicted_n);
    st_jw_kf64(&w, "predicted_ms", t->predicted_ms);
    st_jw_kf64(&w, "predicted_per_token_ms", per(t->predicted_ms, t->predicted_n, 1));
    st_jw_kf64(&w, "predicted_per_second", per(t->predicted_ms, t->predicted_n, 0));
    if (t->draft_n) {
        st_jw_ku64(&w, "draft_n", t->draft_n);
        st_jw_ku64(&w, "draft_n_accepted", t->draft_n_accepted);
    }
    st_jw_obj_close(&w);
}

/* Ends a chunk after its choices: [,usage] [,timings] and the closing brace and blank line. */
static void put_chunk_end(struct st_buf *out, enum st_dialect d, const struct st_sim_resp *r,
                          int with_usage, const struct st_sim_timings *t)
{
    if (with_usage) {
        st_buf_putc(out, ',');
        put_usage(out, d, r);
    }
    if (t) {
        st_buf_putc(out, ',');
        put_timings(out, t);
    }
    st_buf_puts(out, "}\n\n");
}

/* The separate finish chunk of SGLang and llama.cpp; extras (usage, timings) appended by flags. */
static void put_finish_chunk(struct st_buf *out, enum st_dialect d, const struct st_sim_resp *r,
                             int with_usage, const struct st_sim_timings *t)
{
    int chat = r->api == ST_SIM_API_CHAT;
    st_buf_puts(out, "data: ");
    st_sim_put_prefix(out, r, chunk_object(r));
    if (d == ST_DIALECT_SGLANG) {
        st_buf_puts(out, chat ? "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":"
                                "\"length\",\"matched_stop\":null}]"
                              : "\"choices\":[{\"index\":0,\"text\":\"\",\"logprobs\":null,"
                                "\"finish_reason\":\"length\",\"matched_stop\":null}]");
    } else {
        st_buf_puts(out, chat ? "\"choices\":[{\"finish_reason\":\"length\",\"index\":0,"
                                "\"delta\":{}}]"
                              : "\"choices\":[{\"text\":\"\",\"index\":0,\"logprobs\":null,"
                                "\"finish_reason\":\"length\"}]");
    }
    put_chunk_end(out, d, r, with_usage, t);
}

void st_sim_dialect_tail(struct st_buf *out, enum st_dialect d, const struct st_sim_resp *r,
                         const struct st_sim_ending *e)
{
    const struct st_sim_timings *t = d == ST_DIALECT_LLAMACPP ? e->timings : NULL;
    int usage_chunk = e->usage_on;
    if (d == ST_DIALECT_LLAMACPP && r->api == ST_SIM_API_COMPLETIONS) {
        /* llama.cpp /v1/completions: usage and timings always ride on the final chunk. */
        put_finish_chunk(out, d, r, 1, t);
        usage_chunk = 0;
        t = NULL;
    } else if (!st_sim_dialect_finish_on_content(d)) {
        put_finish_chunk(out, d, r, 0, usage_chunk ? NULL : t);
        if (!usage_chunk) {
            t = NULL;
        }
    }
    if (usage_chunk) {
        st_buf_puts(out, "data: ");
        st_sim_put_prefix(out, r, chunk_object(r));
        st_buf_puts(out, "\"choices\":[]");
        put_chunk_end(out, d, r, 1, t);
    }
    if (e->done) {
        st_buf_puts(out, ST_SIM_EVENT_DONE);
    }
}

void st_sim_dialect_role(struct st_buf *out, enum st_dialect d, const struct st_sim_resp *r)
{
    st_buf_puts(out, "data: ");
    st_sim_put_prefix(out, r, "chat.completion.chunk");
    if (d == ST_DIALECT_LLAMACPP) {
        st_buf_puts(out, "\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"role\":"
                         "\"assistant\",\"content\":null}}]}\n\n");
    } else {
        st_buf_puts(out, "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
                         "\"content\":\"\"},\"finish_reason\":null}]}\n\n");
    }
}

void st_sim_dialect_body(struct st_buf *out, enum st_dialect d, const struct st_sim_resp *r,
                         const struct st_sim_answer *a, const struct st_sim_ending *e)
{
    int chat = r->api == ST_SIM_API_CHAT;
    st_sim_put_body_head(out, r);
    st_sim_answer_render(a, 0, r->n_tokens, out);
    st_buf_puts(out, chat ? "\"},\"finish_reason\":\"length\"" : "\",\"finish_reason\":\"length\"");
    st_buf_puts(out, d == ST_DIALECT_SGLANG ? ",\"matched_stop\":null}]" : "}]");
    if (e->usage_on) {
        st_buf_putc(out, ',');
        put_usage(out, d, r);
    }
    if (d == ST_DIALECT_LLAMACPP && e->timings) {
        st_buf_putc(out, ',');
        put_timings(out, e->timings);
    }
    st_buf_putc(out, '}');
}
