/*
 * The memory plan: how a real engine would split one GPU's memory between weights, activations,
 * CUDA graphs and the KV pool at startup, and whether it would start at all. Pure arithmetic over
 * the profile; no allocation, no I/O. Every equation is in docs/simulator.md ("Memory plan"),
 * with the seed figure each free parameter was fitted to. Figures are for the most loaded GPU:
 * the first pipeline stage, which holds ceil(layers / pp) layers and the vision encoder.
 */
#include "sim/model/memory.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define GIB (1024.0 * 1024.0 * 1024.0)

static uint32_t at_least_1(uint32_t v)
{
    return v ? v : 1;
}

static uint32_t ceil_div(uint32_t a, uint32_t b)
{
    return (a + b - 1) / b;
}

/* Bytes per non-expert parameter: the profile's own figure, or the expert one. */
static double dense_bytes_per_param(const struct st_profile_model *m)
{
    return m->dense_weight_bytes > 0 ? m->dense_weight_bytes : m->weight_bytes;
}

/*
 * One layer's KV for one token on one GPU, without the indexer. MLA keeps one latent vector per
 * token that every TP rank needs whole (replicated); GQA/MHA shard the KV heads over the
 * attention group until there is one head per GPU, then replicate it.
 */
static double main_kv_bytes_per_token_layer(const struct st_profile *p, uint32_t attn_tp)
{
    const struct st_profile_model *m = &p->model;
    double dtype = p->engine.kv_dtype_bytes;

    if (m->attention == ST_ATTN_MLA) {
        return (double)(m->kv_lora_rank + m->qk_rope_dim) * dtype;
    }
    uint32_t kv_heads = m->attention == ST_ATTN_MHA ? m->heads : m->kv_heads;
    uint32_t per_gpu = kv_heads > attn_tp ? ceil_div(kv_heads, attn_tp) : 1;
    return 2.0 * per_gpu * m->head_dim * dtype;
}

/*
 * The sparse-attention indexer's key per token per layer: 1-byte (FP8) elements and a 4-byte
 * scale per 128 of them, whatever the main KV dtype (as in DeepSeek-V3.2 and GLM-5's DSA). It is
 * replicated over TP like the MLA latent.
 */
static double indexer_bytes_per_layer(const struct st_profile_model *m)
{
    if (m->indexer_head_dim == 0) {
        return 0;
    }
    return m->indexer_head_dim + 4.0 * ceil_div(m->indexer_head_dim, 128);
}

/* Weights on the most loaded GPU, by part. */
static void plan_weights(const struct st_profile *p, struct st_mem_plan *out, uint32_t tp)
{
    const struct st_profile_model *m = &p->model;
    const struct st_profile_engine *e = &p->engine;
    double layers = at_least_1(m->layers);
    double share = out->layers_per_gpu / layers; /* this stage's part of the layers */
    double expert_params =
        m->params_total > m->params_dense ? m->params_total - m->params_dense : 0;
    double db = dense_bytes_per_param(m);

    /* Routed experts are sharded over every GPU of the replica; the rest only over the attention
     * group, so DP attention holds a whole copy of them per group. */
    out->expert_bytes_per_gpu = expert_params * m->weight_bytes * share / tp;
    out->dense_bytes_per_gpu = m->params_dense * db * share / out->attn_tp;
    out->vision_bytes_per_gpu = m->vision_params * db / out->attn_tp;

    out->draft_bytes_per_gpu = 0;
    if (e->spec_steps > 0 && e->spec_method == ST_SPEC_MTP) {
        /* An MTP layer is one more decoder layer: the per-layer share of both kinds. */
        double per_layer =
            (expert_params * m->weight_bytes / tp + m->params_dense * db / out->attn_tp) / layers;
        out->draft_bytes_per_gpu = m->mtp_layers * per_layer;
    } else if (e->spec_steps > 0 &&
               (e->spec_method == ST_SPEC_EAGLE || e->spec_method == ST_SPEC_DRAFT)) {
        out->draft_bytes_per_gpu = m->draft_params * db / out->attn_tp;
    }
    out->weights_bytes_per_gpu = out->expert_bytes_per_gpu + out->dense_bytes_per_gpu +
                                 out->vision_bytes_per_gpu + out->draft_bytes_per_gpu;
}

/* KV bytes per token on one GPU: this stage's KV layers, the indexer, the draft layers. */
static void plan_kv(const struct st_profile *p, struct st_mem_plan *out, uint32_t pp)
{
    const struct st_profile_model *m = &p->model;
    const struct st_profile_engine *e = &p->engine;
    uint32_t layers = at_least_1(m->layers);
    uint32_t kv_layers = m->kv_layers && m->kv_layers < layers ? m->kv_layers : layers;

    out->kv_layers_per_gpu = ceil_div(kv_layers, pp);
    out->indexer_bytes_per_layer = indexer_bytes_per_layer(m);
    out->kv_bytes_per_token_layer =
        main_kv_bytes_per_token_layer(p, out->attn_tp) + out->indexer_bytes_per_layer;

    /* MTP keeps the KV of its layers for every speculative step (the step's position); an EAGLE
     * head or draft model keeps one set for its own layers. */
    double draft_layers = 0;
    if (e->spec_steps > 0 && e->spec_method == ST_SPEC_MTP) {
        draft_layers = (double)e->spec_steps * m->mtp_layers;
    } else if (e->spec_steps > 0 &&
               (e->spec_method == ST_SPEC_EAGLE || e->spec_method == ST_SPEC_DRAFT)) {
        draft_layers = m->draft_layers;
    }
    out->draft_kv_bytes_per_token = draft_layers * out->kv_bytes_per_token_layer;
    out->kv_bytes_per_token =
        out->kv_layers_per_gpu * out->kv_bytes_per_token_layer + out->draft_kv_bytes_per_token;
}

/* Fills fits and reason the way the dialect's engine would fail at startup. */
static void plan_verdict(const struct st_profile *p, struct st_mem_plan *out)
{
    const struct st_profile_engine *e = &p->engine;
    double need_gib = (double)e->context_length * out->kv_bytes_per_token / GIB;
    double have_gib = out->kv_budget_bytes > 0 ? out->kv_budget_bytes / GIB : 0;

    out->fits = 1;
    out->reason[0] = '\0';
    if (out->weights_bytes_per_gpu + p->engine.reserve_bytes > p->hw.gpu_mem_bytes) {
        out->fits = 0;
        snprintf(
            out->reason, sizeof(out->reason),
            "torch.OutOfMemoryError: CUDA out of memory (weights need %.2f GiB per GPU, the GPU "
            "has %.2f GiB)",
            out->weights_bytes_per_gpu / GIB, p->hw.gpu_mem_bytes / GIB);
        return;
    }
    switch (e->dialect) {
    case ST_DIALECT_SGLANG:
        if (out->kv_pool_tokens == 0) {
            out->fits = 0;
            snprintf(out->reason, sizeof(out->reason),
                     "RuntimeError: Not enough memory. Please try to increase "
                     "--mem-fraction-static. Current value: mem_fraction_static=%g",
                     e->mem_fraction);
        }
        return;
    case ST_DIALECT_LLAMACPP:
        /* llama.cpp allocates the whole context up front and nothing more. */
        if (out->kv_budget_bytes < (double)e->context_length * out->kv_bytes_per_token) {
            out->fits = 0;
            snprintf(out->reason, sizeof(out->reason),
                     "ggml_backend_cuda_buffer_type_alloc_buffer: allocating %.2f MiB on device 0: "
                     "cudaMalloc failed: out of memory",
                     need_gib * 1024.0);
        }
        return;
    case ST_DIALECT_VLLM:
    default:
        if (out->kv_budget_bytes <= 0 || out->kv_pool_blocks == 0) {
            out->fits = 0;
            snprintf(out->reason, sizeof(out->reason),
                     "ValueError: No available memory for the cache blocks. Try increasing "
                     "`gpu_memory_utilization` when initializing the engine.");
        } else if (out->kv_pool_tokens < e->context_length) {
            out->fits = 0;
            snprintf(out->reason, sizeof(out->reason),
                     "ValueError: To serve at least one request with the model's max seq len "
                     "(%llu), (%.2f GiB KV cache is needed, which is larger than the available KV "
                     "cache memory (%.2f GiB). Based on the available memory, the estimated "
                     "maximum model length is %llu. Try increasing `gpu_memory_utilization` or "
                     "decreasing `max_model_len` when initializing the engine.",
                     (unsigned long long)e->context_length, need_gib, have_gib,
                     (unsigned long long)out->kv_pool_tokens);
        }
        return;
    }
}

void st_mem_plan_compute(const struct st_profile *p, struct st_mem_plan *out)
{
    const struct st_profile_engine *e = &p->engine;
    uint32_t tp = at_least_1(e->tp);
    uint32_t pp = at_least_1(e->pp);
    uint32_t dp = at_least_1(e->dp_attention);

    memset(out, 0, sizeof(*out));
    out->layers_per_gpu = ceil_div(at_least_1(p->model.layers), pp);
    out->attn_tp = tp / dp ? tp / dp : 1;
    plan_weights(p, out, tp);
    plan_kv(p, out, pp);

    out->act_bytes = (double)e->max_batched_tokens * e->act_bytes_per_token;
    out->graph_bytes = (double)e->n_graph_sizes * e->graph_bytes_per_size;
    out->usable_bytes = e->mem_fraction * p->hw.gpu_mem_bytes;
    out->kv_budget_bytes = out->usable_bytes - out->weights_bytes_per_gpu - out->act_bytes -
                           out->graph_bytes - e->reserve_bytes;

    if (out->kv_budget_bytes > 0 && out->kv_bytes_per_token > 0) {
        double tokens = floor(out->kv_budget_bytes / out->kv_bytes_per_token);
        uint64_t page = at_least_1(e->page_size);
        /* 2^53 tokens is far past any real pool; the cap keeps the conversion defined. */
        uint64_t t = tokens < 9007199254740992.0 ? (uint64_t)tokens : 9007199254740992ull;
        /* llama.cpp allocates exactly the context (n_ctx), however much more would fit. */
        if (e->dialect == ST_DIALECT_LLAMACPP && t > e->context_length) {
            t = e->context_length;
        }
        out->kv_pool_blocks = t / page;
        out->kv_pool_tokens = out->kv_pool_blocks * page;
    }
    plan_verdict(p, out);
}
