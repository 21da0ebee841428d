/*
 * The memory plan of a profile: weights per GPU under the TP/PP/DP-attention split, KV bytes per
 * token, activation and CUDA-graph reserves, and the KV pool in tokens, the way real engines size
 * it at startup. Pure: a function of the profile. Every equation is written out in
 * docs/simulator.md with the seed figure it was fitted to.
 *
 * Conventions: "per GPU" figures are for the most loaded GPU (the first PP stage when layers do
 * not divide evenly). kv_pool_tokens is the pool of one DP rank (one attention group), the figure
 * SGLang prints as "#tokens" and vLLM as "GPU KV cache size" per engine core.
 */
#ifndef ST_SIM_MODEL_MEMORY_H
#define ST_SIM_MODEL_MEMORY_H

#include <stdint.h>

#include "sim/model/profile.h"

struct st_mem_plan {
    uint32_t layers_per_gpu;         /* ceil(layers / pp) */
    uint32_t attn_tp;                /* tp / dp_attention: GPUs sharing one attention group */
    uint32_t kv_layers_per_gpu;      /* ceil(kv_layers / pp) */
    double expert_bytes_per_gpu;     /* routed experts of this GPU's layers, sharded over tp */
    double dense_bytes_per_gpu;      /* non-expert weights, sharded over attn_tp */
    double vision_bytes_per_gpu;     /* vision encoder, sharded over attn_tp (first stage) */
    double draft_bytes_per_gpu;      /* MTP layers or EAGLE/draft model, when speculation is on */
    double indexer_bytes_per_layer;  /* indexer key of one token in one layer (in the next) */
    double weights_bytes_per_gpu;    /* model (+ vision, + draft) weights on one GPU */
    double kv_bytes_per_token_layer; /* one layer's KV for one token on one GPU */
    double kv_bytes_per_token;       /* all KV a token needs on one GPU (layers, indexer, drafts) */
    double draft_kv_bytes_per_token; /* the speculative part of kv_bytes_per_token */
    double act_bytes;        /* activation reserve: max_batched_tokens * act_bytes_per_token */
    double graph_bytes;      /* n_graph_sizes * graph_bytes_per_size */
    double usable_bytes;     /* mem_fraction * gpu_mem_bytes */
    double kv_budget_bytes;  /* usable - weights - act - graph - reserve, per GPU */
    uint64_t kv_pool_tokens; /* floor(budget / kv_bytes_per_token), rounded down to pages */
    uint64_t kv_pool_blocks; /* kv_pool_tokens / page_size */
    int fits;                /* 0: the engine would fail at startup */
    char reason[512];        /* why it does not fit, in the dialect's words */
};

void st_mem_plan_compute(const struct st_profile *p, struct st_mem_plan *out);

#endif
