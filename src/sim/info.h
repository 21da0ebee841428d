/*
 * Model-mode introspection bodies in each engine's shape: /v1/models, SGLang's /get_server_info
 * and /get_model_info, llama.cpp's /props and /slots, and /tokenize and /detokenize. Shapes follow
 * shared/reference/serving-apis.md sections 3 and 4 and the llama.cpp transcripts. Pure: every
 * function appends one JSON document to a caller buffer.
 */
#ifndef ST_SIM_INFO_H
#define ST_SIM_INFO_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/json.h"
#include "sim/metrics.h"
#include "sim/model/memory.h"
#include "sim/model/profile.h"

/* What the introspection bodies describe; every pointer is borrowed for the call. */
struct st_sim_info {
    const struct st_profile *p;
    const struct st_mem_plan *plan;
    const char *model;              /* the served model name */
    const struct st_sim_metrics *m; /* live counters (server_info, slots) */
    int64_t created_unix_s;         /* start time, for "created" */
};

/*
 * The /v1/models list around one model, every mode's and engine's: inside an open object w,
 * list_open writes "object":"list","data":[{"id":model,"object":"model","created":created,
 * "owned_by":owner and leaves that entry open for the engine's own members; list_close closes the
 * entry, the list and the object.
 */
void st_sim_info_list_open(struct st_jw *w, const char *model, int64_t created, const char *owner);
void st_sim_info_list_close(struct st_jw *w);

/* vLLM: max_model_len, owned_by vllm; SGLang the same with owned_by sglang; llama.cpp adds meta
 * and the Ollama-style "models" list. */
void st_sim_info_models(struct st_buf *out, const struct st_sim_info *in);
/* SGLang /get_server_info: server args, max_total_num_tokens, max_req_input_len, version and
 * internal_states[0] {avg_spec_accept_length, memory_usage{weight, kvcache, token_capacity,
 * graph}, last_gen_throughput, effective_max_running_requests_per_dp}. */
void st_sim_info_server(struct st_buf *out, const struct st_sim_info *in);
/* SGLang /get_model_info. */
void st_sim_info_model(struct st_buf *out, const struct st_sim_info *in);
/* llama.cpp /props: default_generation_settings.n_ctx (per slot), total_slots, model_alias... */
void st_sim_info_props(struct st_buf *out, const struct st_sim_info *in);
/* llama.cpp /slots: one entry per slot (engine.max_running), the first `running` busy. */
void st_sim_info_slots(struct st_buf *out, const struct st_sim_info *in);

/*
 * /tokenize of text[0..len) (the rendered prompt) whose token count is tokens: vLLM and SGLang
 * {"count","max_model_len","tokens"}; llama.cpp {"tokens"}. At most max_ids ids are listed
 * (count stays exact).
 */
void st_sim_info_tokenize(struct st_buf *out, const struct st_sim_info *in, const char *text,
                          size_t len, uint64_t tokens, uint64_t max_ids);
/* /detokenize of n token ids: filler text of 4 bytes a token, as vLLM {"prompt"}, SGLang
 * {"text"}, llama.cpp {"content"}. */
void st_sim_info_detokenize(struct st_buf *out, const struct st_sim_info *in, uint64_t n);

#endif
