/*
 * Simulator profiles: the model, the hardware and the engine configuration that the simulator
 * models, parsed from YAML (libfyaml, from bytes: no file I/O here) with every key overridable by
 * `--set section.key=value`. Every field has a descriptor (path, type, range, unit) in profile.c;
 * unknown keys, values out of range and inconsistent combinations are rejected with the source
 * name, line and column. Pure. Units: bytes, bytes/s, FLOP/s, seconds, tokens.
 */
#ifndef ST_SIM_MODEL_PROFILE_H
#define ST_SIM_MODEL_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define ST_SPEC_MAX_STEPS 8
#define ST_PROFILE_MAX_FIELDS 128
#define ST_GRAPH_MAX_SIZES 64

enum st_attn {
    ST_ATTN_MHA = 1, /* kv_heads == heads */
    ST_ATTN_GQA,     /* kv_heads < heads */
    ST_ATTN_MLA,     /* latent KV: kv_lora_rank + qk_rope_dim per token per layer, replicated over TP */
};

enum st_dialect {
    ST_DIALECT_VLLM = 1,
    ST_DIALECT_SGLANG,
    ST_DIALECT_LLAMACPP,
};

enum st_spec_method {
    ST_SPEC_NONE = 0,
    ST_SPEC_MTP,   /* the model's own MTP layers; each step runs mtp_layers layers and stores their KV */
    ST_SPEC_EAGLE, /* a draft head of draft_params parameters with draft_layers layers of KV */
    ST_SPEC_DRAFT, /* a separate draft model of draft_params parameters and draft_layers layers */
};

struct st_profile_model {
    char name[64];
    uint32_t layers;
    uint32_t hidden;
    uint32_t heads;
    uint32_t kv_heads;
    uint32_t head_dim;
    enum st_attn attention;
    uint32_t kv_lora_rank;     /* MLA only */
    uint32_t qk_rope_dim;      /* MLA only */
    uint32_t indexer_head_dim; /* sparse-attention indexer key per token per layer; 0 = none */
    uint32_t indexer_topk;     /* tokens each query attends to under sparse attention; 0 = dense */
    double params_total;       /* all parameters */
    double params_active;      /* parameters touched per token (MoE: shared + routed experts) */
    double params_dense;       /* non-expert parameters (attention, shared experts, embeddings) */
    double weight_bytes;       /* bytes per parameter: 2 bf16, 1 fp8, 0.5625 nvfp4 */
    uint32_t mtp_layers;       /* MTP layers in the checkpoint */
    double draft_params;       /* EAGLE head or draft model parameters */
    uint32_t draft_layers;     /* their layers holding KV */
    double vision_params;      /* vision encoder parameters (0 = text only) */
    uint32_t vision_patch;     /* pixels per patch side for image token counts */
    uint32_t vocab;
};

struct st_profile_hw {
    uint32_t gpus;
    double gpu_mem_bytes;
    double hbm_bytes_per_s;
    double flops_bf16;
    double flops_fp8;
    double flops_fp4;
    double link_bytes_per_s;  /* per GPU, for TP all-reduce and PP sends */
    double link_latency_s;    /* per collective or send */
    double eff_matmul;        /* fraction of peak FLOP/s reached by GEMMs */
    double eff_attn;          /* ... by attention kernels */
    double eff_mem;           /* fraction of HBM bandwidth reached by memory-bound kernels */
    double eff_link;          /* fraction of link bandwidth reached by collectives */
};

struct st_profile_engine {
    enum st_dialect dialect;
    uint32_t tp;
    uint32_t pp;
    uint32_t dp_attention;      /* 1 = off; else attention runs in dp groups of tp/dp GPUs */
    double mem_fraction;        /* of GPU memory the engine may use */
    double kv_dtype_bytes;      /* 2 bf16/fp16, 1 fp8 */
    uint32_t page_size;         /* tokens per KV block */
    uint32_t max_batched_tokens; /* per-step token budget (chunked prefill) */
    uint32_t max_running;        /* running requests per DP rank */
    double admit_output_reserve; /* share of max_tokens whose KV must be free at admission:
                                  * 1 reserves the whole output (SGLang's conservative admission),
                                  * 0 reserves nothing and relies on preemption (vLLM) */
    uint64_t context_length;
    int prefix_caching;
    enum st_spec_method spec_method;
    uint32_t spec_steps;                       /* draft tokens per step (0 = off) */
    double spec_accept[ST_SPEC_MAX_STEPS];     /* P(draft i accepted | drafts < i accepted) at context 0 */
    double spec_accept_halflife_tokens;        /* acceptance decays as 2^(-context / halflife); 0 = none */
    uint32_t graph_sizes[ST_GRAPH_MAX_SIZES];  /* CUDA-graph capture batch sizes */
    uint32_t n_graph_sizes;
    double graph_bytes_per_size;               /* memory per captured graph per GPU */
    double act_bytes_per_token;                /* activation reserve per batched token per GPU */
    double reserve_bytes;                      /* fixed per-GPU overhead (context, NCCL, allocator) */
    double startup_s;                          /* time to load and warm up (virtual seconds) */
};

struct st_profile_quality {
    double error_rate; /* probability that an answer to X-Servetune-Expect is wrong */
};

struct st_profile {
    struct st_profile_model model;
    struct st_profile_hw hw;
    struct st_profile_engine engine;
    struct st_profile_quality quality;
    uint64_t seed;
    /* Where each field was last set, for messages: the source name and a line per field index
     * (0 = default or --set). Maintained by parse and set. */
    char origin[128];
    uint32_t field_line[ST_PROFILE_MAX_FIELDS];
};

/* Built-in defaults: a small dense GQA model on one 80 GB GPU (documented in docs/simulator.md). */
void st_profile_defaults(struct st_profile *p);

/*
 * Parses YAML bytes over the current values of p (so defaults apply to absent keys). name is used
 * in messages ("profiles/x.yaml:12:5: engine.tp: expected an integer from 1 to 64, got 'x'").
 * Returns 0, or ST_EPARSE (YAML syntax, unknown key, wrong type, out of range) with err filled.
 */
int st_profile_parse(struct st_profile *p, const char *yaml, size_t len, const char *name, char *err,
                     size_t errlen) ST_WUR;

/* Applies one "section.key=value" override (value in YAML syntax). Same errors as parse. */
int st_profile_set(struct st_profile *p, const char *assignment, char *err, size_t errlen) ST_WUR;

/*
 * Cross-field checks: impossible combinations (TP not dividing the heads where the attention
 * kind requires it, dp_attention not dividing tp, pp over layers, tp*pp over gpus, spec steps
 * over the available draft layers, a page size that is not a power of two...). Returns 0 or
 * ST_EPARSE naming the field (and its line when it came from a file).
 */
int st_profile_validate(const struct st_profile *p, char *err, size_t errlen) ST_WUR;

#endif
