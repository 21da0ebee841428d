/*
 * Model-mode introspection bodies (see info.h). Numbers come from the profile, the memory plan and
 * the live counters; strings that real servers fill from files (chat templates, model paths) are
 * short fixed stand-ins. Pure.
 */
#include "sim/info.h"

#include <string.h>

#include "base/json.h"
#include "sim/dialect.h"
#include "sim/prompt.h"
#include "sim/spec.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* The longest prompt a request may have: the context, or the pool when smaller. */
static uint64_t max_model_len(const struct st_sim_info *in)
{
    uint64_t c = in->p->engine.context_length;
    return in->plan->kv_pool_tokens < c ? in->plan->kv_pool_tokens : c;
}

/* SGLang's speculative_algorithm names; NULL for none. */
static const char *spec_name(enum st_spec_method m)
{
    static const char *const names[] = {
        [ST_SPEC_MTP] = "NEXTN",
        [ST_SPEC_EAGLE] = "EAGLE",
        [ST_SPEC_DRAFT] = "STANDALONE",
    };
    return (unsigned)m < sizeof(names) / sizeof(names[0]) ? names[m] : NULL;
}

void st_sim_info_list_open(struct st_jw *w, const char *model, int64_t created, const char *owner)
{
    st_jw_kstr(w, "object", "list");
    st_jw_key(w, "data");
    st_jw_arr_open(w);
    st_jw_obj_open(w);
    st_jw_kstr(w, "id", model);
    st_jw_kstr(w, "object", "model");
    st_jw_ki64(w, "created", created);
    st_jw_kstr(w, "owned_by", owner);
}

void st_sim_info_list_close(struct st_jw *w)
{
    st_jw_obj_close(w);
    st_jw_arr_close(w);
    st_jw_obj_close(w);
}

void st_sim_info_models(struct st_buf *out, const struct st_sim_info *in)
{
    enum st_dialect d = in->p->engine.dialect;
    struct st_jw w;
    st_jw_init(&w, out);
    st_jw_obj_open(&w);
    if (d == ST_DIALECT_LLAMACPP) {
        st_jw_key(&w, "models");
        st_jw_arr_open(&w);
        st_jw_obj_open(&w);
        st_jw_kstr(&w, "name", in->model);
        st_jw_kstr(&w, "model", in->model);
        st_jw_kstr(&w, "type", "model");
        st_jw_obj_close(&w);
        st_jw_arr_close(&w);
    }
    st_sim_info_list_open(&w, in->model, in->created_unix_s, st_sim_dialect_owner(d));
    if (d == ST_DIALECT_LLAMACPP) {
        st_jw_key(&w, "meta");
        st_jw_obj_open(&w);
        st_jw_ki64(&w, "vocab_type", 1);
        st_jw_ku64(&w, "n_vocab", in->p->model.vocab);
        st_jw_ku64(&w, "n_ctx", max_model_len(in));
        st_jw_ku64(&w, "n_ctx_train", in->p->engine.context_length);
        st_jw_ku64(&w, "n_embd", in->p->model.hidden);
        st_jw_kf64(&w, "n_params", in->p->model.params_total);
        st_jw_kf64(&w, "size", in->p->model.params_total * in->p->model.weight_bytes);
        st_jw_obj_close(&w);
    } else {
        st_jw_kstr(&w, "root", in->model);
        st_jw_key(&w, "parent");
        st_jw_null(&w);
        st_jw_ku64(&w, "max_model_len", in->p->engine.context_length);
        if (d == ST_DIALECT_VLLM) {
            st_jw_key(&w, "permission");
            st_jw_arr_open(&w);
            st_jw_arr_close(&w);
        }
    }
    st_sim_info_list_close(&w);
}

void st_sim_info_server(struct st_buf *out, const struct st_sim_info *in)
{
    const struct st_profile_engine *e = &in->p->engine;
    const struct st_mem_plan *m = in->plan;
    struct st_jw w;
    st_jw_init(&w, out);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "model_path", in->model);
    st_jw_kstr(&w, "served_model_name", in->model);
    st_jw_ku64(&w, "tp_size", e->tp);
    st_jw_ku64(&w, "pp_size", e->pp);
    st_jw_ku64(&w, "dp_size", e->dp_attention > 1 ? e->dp_attention : 1);
    st_jw_kbool(&w, "enable_dp_attention", e->dp_attention > 1);
    st_jw_kf64(&w, "mem_fraction_static", e->mem_fraction);
    st_jw_ku64(&w, "chunked_prefill_size", e->max_batched_tokens);
    st_jw_ku64(&w, "max_prefill_tokens", e->max_batched_tokens);
    st_jw_ku64(&w, "context_length", e->context_length);
    st_jw_ku64(&w, "page_size", e->page_size);
    st_jw_ku64(&w, "max_running_requests", e->max_running);
    st_jw_kstr(&w, "kv_cache_dtype", e->kv_dtype_bytes < 2 ? "fp8_e4m3" : "auto");
    st_jw_kbool(&w, "disable_radix_cache", !e->prefix_caching);
    const char *alg = e->spec_steps ? spec_name(e->spec_method) : NULL;
    st_jw_key(&w, "speculative_algorithm");
    if (alg) {
        st_jw_str(&w, alg);
        st_jw_ku64(&w, "speculative_num_steps", e->spec_steps);
        st_jw_ku64(&w, "speculative_eagle_topk", 1);
        st_jw_ku64(&w, "speculative_num_draft_tokens", e->spec_steps + 1);
    } else {
        st_jw_null(&w);
    }
    st_jw_ku64(&w, "max_total_num_tokens", m->kv_pool_tokens);
    st_jw_ku64(&w, "max_req_input_len", max_model_len(in) ? max_model_len(in) - 1 : 0);
    st_jw_kstr(&w, "version", "servetune-sim");
    st_jw_key(&w, "internal_states");
    st_jw_arr_open(&w);
    uint32_t ranks = e->dp_attention > 1 ? e->dp_attention : 1;
    for (uint32_t i = 0; i < ranks; i++) {
        st_jw_obj_open(&w);
        if (alg) {
            st_jw_kf64(&w, "avg_spec_accept_length", st_sim_metrics_accept_length(in->m));
        }
        st_jw_kf64(&w, "last_gen_throughput", in->m->gen_throughput);
        st_jw_key(&w, "memory_usage");
        st_jw_obj_open(&w);
        st_jw_kf64(&w, "weight", m->weights_bytes_per_gpu / GIB);
        st_jw_kf64(&w, "kvcache", (double)m->kv_pool_tokens * m->kv_bytes_per_token / GIB);
        st_jw_ku64(&w, "token_capacity", m->kv_pool_tokens);
        st_jw_kf64(&w, "graph", m->graph_bytes / GIB);
        st_jw_obj_close(&w);
        st_jw_ku64(&w, "effective_max_running_requests_per_dp", e->max_running);
        st_jw_obj_close(&w);
    }
    st_jw_arr_close(&w);
    st_jw_obj_close(&w);
}

void st_sim_info_model(struct st_buf *out, const struct st_sim_info *in)
{
    struct st_jw w;
    st_jw_init(&w, out);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "model_path", in->model);
    st_jw_kstr(&w, "tokenizer_path", in->model);
    st_jw_kbool(&w, "is_generation", 1);
    st_jw_key(&w, "preferred_sampling_params");
    st_jw_null(&w);
    st_jw_kstr(&w, "weight_version", "default");
    st_jw_obj_close(&w);
}

void st_sim_info_props(struct st_buf *out, const struct st_sim_info *in)
{
    const struct st_profile *p = in->p;
    struct st_jw w;
    st_jw_init(&w, out);
    st_jw_obj_open(&w);
    st_jw_key(&w, "default_generation_settings");
    st_jw_obj_open(&w);
    st_jw_key(&w, "params");
    st_jw_obj_open(&w);
    st_jw_ki64(&w, "n_predict", -1);
    st_jw_kf64(&w, "temperature", 0.8);
    st_jw_ki64(&w, "top_k", 40);
    st_jw_kf64(&w, "top_p", 0.95);
    st_jw_kf64(&w, "min_p", 0.05);
    st_jw_obj_close(&w);
    st_jw_ku64(&w, "n_ctx", max_model_len(in));
    st_jw_obj_close(&w);
    st_jw_ku64(&w, "total_slots", p->engine.max_running);
    st_jw_kstr(&w, "model_alias", in->model);
    st_jw_kstr(&w, "model_path", in->model);
    st_jw_key(&w, "modalities");
    st_jw_obj_open(&w);
    st_jw_kbool(&w, "vision", p->model.vision_patch > 0);
    st_jw_kbool(&w, "video", p->model.vision_patch > 0);
    st_jw_kbool(&w, "audio", 0);
    st_jw_obj_close(&w);
    st_jw_kbool(&w, "endpoint_slots", 1);
    st_jw_kbool(&w, "endpoint_props", 0);
    st_jw_kbool(&w, "endpoint_metrics", 1);
    st_jw_kstr(&w, "chat_template", "<|role|>\\ncontent\\n ... <|assistant|>\\n");
    st_jw_kstr(&w, "bos_token", "<s>");
    st_jw_kstr(&w, "eos_token", "</s>");
    st_jw_kstr(&w, "build_info", "servetune-sim");
    st_jw_obj_close(&w);
}

void st_sim_info_slots(struct st_buf *out, const struct st_sim_info *in)
{
    const struct st_profile_engine *e = &in->p->engine;
    struct st_jw w;
    st_jw_init(&w, out);
    st_jw_arr_open(&w);
    for (uint32_t i = 0; i < e->max_running; i++) {
        st_jw_obj_open(&w);
        st_jw_ku64(&w, "id", i);
        st_jw_ku64(&w, "n_ctx", max_model_len(in));
        st_jw_kbool(&w, "speculative", e->spec_method != ST_SPEC_NONE && e->spec_steps > 0);
        st_jw_kbool(&w, "is_processing", i < in->m->bs.running);
        st_jw_obj_close(&w);
    }
    st_jw_arr_close(&w);
}

void st_sim_info_tokenize(struct st_buf *out, const struct st_sim_info *in, const char *text,
                          size_t len, uint64_t tokens, uint64_t max_ids)
{
    int llama = in->p->engine.dialect == ST_DIALECT_LLAMACPP;
    st_buf_putc(out, '{');
    if (!llama) {
        st_buf_printf(out, "\"count\":%llu,\"max_model_len\":%llu,", (unsigned long long)tokens,
                      (unsigned long long)in->p->engine.context_length);
    }
    st_buf_puts(out, "\"tokens\":[");
    (void)st_sim_prompt_ids(text, len, in->p->model.vocab, max_ids, out);
    st_buf_puts(out, "]}");
}

void st_sim_info_detokenize(struct st_buf *out, const struct st_sim_info *in, uint64_t n)
{
    st_buf_puts(out, st_sim_dialect_pick(in->p->engine.dialect, "{\"prompt\":\"", "{\"text\":\"",
                                         "{\"content\":\""));
    for (uint64_t i = 0; i < n; i++) {
        char tok[ST_SIM_TOKEN_BYTES];
        st_sim_token_text(i, tok);
        st_buf_append(out, tok, sizeof(tok));
    }
    st_buf_puts(out, "\"}");
}
