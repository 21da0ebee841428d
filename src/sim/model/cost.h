/*
 * The step-cost model: how long one engine step takes for a given batch shape. Prefill is
 * compute-bound (GEMM FLOPs over the active parameters plus attention over the context), decode
 * is memory-bound (weights plus KV read), TP adds two all-reduces per layer, PP adds stage sends
 * and, for a single batch in flight, the stages run one after another; speculative decoding adds
 * k draft passes and makes the verify pass carry k+1 tokens per request, whose attention reads
 * the whole context, so at long context more steps can cost more than they gain. Each kernel class
 * takes max(compute time, memory time) (roofline). Pure. Equations: docs/simulator.md.
 */
#ifndef ST_SIM_MODEL_COST_H
#define ST_SIM_MODEL_COST_H

#include <stdint.h>

#include "sim/model/memory.h"
#include "sim/model/profile.h"

/* What one step does, summed over the requests in it (one DP rank). */
struct st_step_shape {
    uint32_t n_decode;       /* requests that decode this step */
    uint64_t decode_ctx_sum; /* sum of their context lengths (tokens in KV before the step) */
    uint32_t spec_tokens;    /* draft tokens per decoding request (0 = no speculation) */
    uint32_t n_prefill;      /* prefill chunks in this step */
    uint64_t prefill_tokens; /* sum of chunk lengths */
    /* Attended pairs: the sum over chunks of chunk * (cached_before + chunk / 2). */
    double prefill_pairs;
};

struct st_cost {
    const struct st_profile *p; /* borrowed; outlives the cost model */
    struct st_mem_plan m;
    /* Derived constants, in seconds per unit, filled by st_cost_init. "Per GPU" is one GPU of one
     * PP stage (1/pp of the layers); a step runs the pp stages one after another. */
    double gemm_s_per_token;      /* 2 * active params per GPU / (peak * eff) */
    double attn_s_per_pair;       /* attention FLOPs per (query, key) pair per GPU / (peak * eff) */
    double weight_read_s;         /* active weights per GPU / (HBM * eff): one decode pass */
    double kv_read_s_per_token;   /* KV bytes per context token per GPU / (HBM * eff) */
    double allreduce_s_per_token; /* TP all-reduce traffic per token per layer-pair */
    double pp_send_s_per_token;
    double draft_pass_s; /* one draft step at batch 1 (scaled by batch inside) */

    /* Parts of the above, used by st_cost_step_ns (added for the seed calibration). */
    double dp;                       /* DP-attention ranks whose tokens meet in the experts */
    double dense_read_s;             /* non-expert weights of a stage */
    double expert_read_s_per_token;  /* one token's routed experts of a stage */
    double expert_read_max_s;        /* all routed experts of a stage */
    double idx_s_per_pair;           /* indexer FLOPs per (query, context token) pair */
    double main_kv_read_s_per_token; /* kv_read_s_per_token without the indexer key */
    double idx_read_s_per_token;     /* the indexer key part of kv_read_s_per_token */
    double allreduce_latency_s;      /* per layer: two collectives' latency */
    double step_overhead_s;          /* engine.step_overhead_s, per stage */
    double draft_layers;             /* layers in one draft pass (0 = no speculation) */
    int draft_sparse;                /* draft layers use the sparse indexer (MTP of DSA) */
    double draft_gemm_s_per_token;   /* draft layers (and MTP's LM head) FLOPs */
    double draft_dense_read_s;       /* draft weights read once per pass (dense part) */
    double draft_expert_read_s_per_token;
    double draft_expert_read_max_s;
    double draft_attn_s_per_pair;
    double draft_idx_s_per_pair;
    double draft_main_kv_read_s_per_token;
    double draft_idx_read_s_per_token;
};

void st_cost_init(struct st_cost *c, const struct st_profile *p);
/* Virtual duration of one step with this shape, in ns (>= 1 when the shape has any work). */
uint64_t st_cost_step_ns(const struct st_cost *c, const struct st_step_shape *s);
/*
 * Expected decode tokens per second of one request at context ctx (batch 1), with the profile's
 * speculative settings: (1 + expected accepted drafts) / step time. For --explain and golden tests.
 */
double st_cost_decode_tps(const struct st_cost *c, uint64_t ctx);
/*
 * Time to prefill n uncached tokens after cached ones, alone, in chunks of max_batched_tokens
 * (with PP the chunks flow through the stages as a pipeline). Seconds.
 */
double st_cost_prefill_s(const struct st_cost *c, uint64_t cached, uint64_t n);
/* Seconds of one draft pass for the decoding requests of s (0 without speculation). */
double st_cost_draft_pass_s(const struct st_cost *c, const struct st_step_shape *s);
/* P(draft i, 0-based, accepted | drafts before it accepted) at context ctx, in [0, 1]. */
double st_cost_accept_prob(const struct st_cost *c, uint32_t i, uint64_t ctx);
/* Expected accepted drafts per verify step at context ctx: sum over i of the product of the
 * first i+1 acceptance probabilities (0 without speculation). */
double st_cost_expected_accepted(const struct st_cost *c, uint64_t ctx);

#endif
