/*
 * Simulator profiles: the model, the hardware and the engine configuration that the simulator
 * models, parsed from YAML (base/yaml.h, from bytes: no file I/O here) with every key overridable
 * by
 * `--set section.key=value`. Every field has a descriptor (path, type, range, unit) in profile.c;
 * unknown keys, values out of range and inconsistent combinations are rejected with the source
 * name, line and column. Pure. Units: bytes, bytes/s, FLOP/s, seconds, tokens.
 */
#ifndef ST_SIM_MODEL_PROFILE_H
#define ST_SIM_MODEL_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/status.h"

#define ST_SPEC_MAX_STEPS 8
#define ST_PROFILE_MAX_FIELDS 128
#define ST_GRAPH_MAX_SIZES 64
/* Largest YAML text st_profile_parse accepts. */
#define ST_PROFILE_MAX_BYTES (1u << 20)

enum st_attn {
    ST_ATTN_MHA = 1, /* kv_heads == heads */
    ST_ATTN_GQA,     /* kv_heads < heads */
    ST_ATTN_MLA, /* latent KV: kv_lora_rank + qk_rope_dim per token per layer, replicated over TP */
};

enum st_dialect {
    ST_DIALECT_VLLM = 1,
    ST_DIALECT_SGLANG,
    ST_DIALECT_LLAMACPP,
};

/* What the server says of the prompt tokens it took from its prefix cache. */
enum st_cached_report {
    ST_CACHED_REPORT_USAGE = 1, /* usage.prompt_tokens_details, timings.cache_n, the counters */
    ST_CACHED_REPORT_EVALUATED, /* llama.cpp b4748: only timings.prompt_n (tokens evaluated) */
    ST_CACHED_REPORT_NONE,      /* nothing: no details, no prompt_n, no prefix counters */
};

/* Where the prefix cache lives. */
enum st_cache_scope {
    ST_CACHE_SCOPE_AUTO = 1, /* slot for the llamacpp dialect, pool for the others */
    ST_CACHE_SCOPE_POOL,     /* one shared block cache per rank (vLLM, SGLang) */
    ST_CACHE_SCOPE_SLOT,     /* each slot keeps the last prompt it ran (llama.cpp b4748) */
};

enum st_spec_method {
    ST_SPEC_NONE = 0,
    ST_SPEC_MTP, /* the model's own MTP layers; each step runs mtp_layers layers and stores their KV
                  */
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
    double dense_weight_bytes; /* bytes per non-expert parameter (quantized MoE checkpoints keep
                                * attention and embeddings wider); 0 = weight_bytes */
    uint32_t kv_layers;        /* layers that keep per-token KV (full attention); 0 = all layers.
                                * Hybrid models: the others are linear-attention/SSM layers */
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
    double link_bytes_per_s; /* per GPU, for TP all-reduce and PP sends */
    double link_latency_s;   /* per collective or send */
    double eff_matmul;       /* fraction of peak FLOP/s reached by GEMMs */
    double eff_attn;         /* ... by attention kernels */
    double eff_mem;          /* fraction of HBM bandwidth reached by memory-bound kernels */
    double eff_link;         /* fraction of link bandwidth reached by collectives */
};

struct st_profile_engine {
    enum st_dialect dialect;
    uint32_t tp;
    uint32_t pp;
    uint32_t dp_attention;       /* 1 = off; else attention runs in dp groups of tp/dp GPUs */
    double mem_fraction;         /* of GPU memory the engine may use */
    double kv_dtype_bytes;       /* 2 bf16/fp16, 1 fp8 */
    uint32_t page_size;          /* tokens per KV block */
    uint32_t max_batched_tokens; /* per-step token budget (chunked prefill) */
    uint32_t max_running;        /* running requests per DP rank */
    double admit_output_reserve; /* share of max_tokens whose KV must be free at admission:
                                  * 1 reserves the whole output (SGLang's conservative admission),
                                  * 0 reserves nothing and relies on preemption (vLLM) */
    uint64_t context_length;
    int prefix_caching;
    enum st_cache_scope cache_scope;
    double slot_similarity; /* slot scope: least share of a slot's tokens a prompt must
                             * share to be sent to it (llama.cpp --slot-prompt-similarity) */
    enum st_cached_report cached_report;
    int keepalive_close; /* one request per connection; the next is dropped unanswered */
    enum st_spec_method spec_method;
    uint32_t spec_steps; /* draft tokens per step (0 = off) */
    double
        spec_accept[ST_SPEC_MAX_STEPS]; /* P(draft i accepted | drafts < i accepted) at context 0 */
    uint32_t n_spec_accept;             /* values given in spec_accept (>= spec_steps) */
    double spec_accept_halflife_tokens; /* acceptance decays as 2^(-context / halflife); 0 = none */
    uint32_t graph_sizes[ST_GRAPH_MAX_SIZES]; /* CUDA-graph capture batch sizes */
    uint32_t n_graph_sizes;
    double graph_bytes_per_size; /* memory per captured graph per GPU */
    double act_bytes_per_token;  /* activation reserve per batched token per GPU */
    double reserve_bytes;        /* fixed per-GPU overhead (context, NCCL, allocator) */
    double step_overhead_s;      /* fixed time per step per PP stage that no roofline
                                  * sees: scheduling, launches, stage hand-off */
    double startup_s;            /* time to load and warm up (virtual seconds) */
};

struct st_profile_quality {
    double error_rate; /* probability that an answer to X-Servetune-Expect is wrong */
};

/* Staged measurement noise (none by default), so noisy arms can be tested end to end. */
struct st_profile_perf {
    double noise_cv;     /* CV of a request's lognormal step-time factor */
    double bringup_cv;   /* CV of a launch's lognormal step-time factor */
    uint64_t noise_seed; /* seed of those draws; 0 = the profile's seed */
};

struct st_profile {
    struct st_profile_model model;
    struct st_profile_hw hw;
    struct st_profile_engine engine;
    struct st_profile_quality quality;
    struct st_profile_perf perf;
    uint64_t seed;
    /* Where each field was last set, for messages: the source name and a line per field index
     * (0 = default or --set). Maintained by parse and set. */
    char origin[128];
    uint32_t field_line[ST_PROFILE_MAX_FIELDS];
};

/* ---- field descriptors (one per YAML key, in profile.c; docs/simulator.md lists them) ---- */

enum st_profile_type {
    ST_PROFILE_U32 = 1,  /* uint32_t */
    ST_PROFILE_U64,      /* uint64_t */
    ST_PROFILE_F64,      /* double; units B, B/s, FLOP/s and s also accept a unit suffix */
    ST_PROFILE_BOOL,     /* int, 0 or 1, written true/false */
    ST_PROFILE_ENUM,     /* an enum, written by name */
    ST_PROFILE_STR,      /* NUL-terminated text in a char array */
    ST_PROFILE_F64_LIST, /* double[], with a uint32_t count */
    ST_PROFILE_U32_LIST, /* uint32_t[], strictly increasing, with a uint32_t count */
    ST_PROFILE_KV_DTYPE, /* a dtype name that sets a double of bytes per element */
};

/* Bits of st_profile_field.flags. */
#define ST_PROFILE_F_MIN_OPEN 1u /* min itself is out of range: (min, max] */
#define ST_PROFILE_F_ALIAS 2u    /* another spelling of a field stored elsewhere; not emitted */

struct st_profile_name {
    const char *name;
    double value;
};

struct st_profile_field {
    const char *path; /* "engine.tp"; "seed" is the one key outside a section */
    enum st_profile_type type;
    size_t offset;       /* of the value in struct st_profile */
    size_t size;         /* bytes of the value (strings and lists: the whole array) */
    size_t count_offset; /* lists: of their uint32_t count */
    double min, max;     /* accepted range (lists: of each element; strings: of the length) */
    unsigned flags;      /* ST_PROFILE_F_* */
    const struct st_profile_name *names; /* enums and dtypes: {NULL, 0}-terminated */
    const char *def;                     /* the default, in the same syntax as the YAML value */
    const char *unit; /* "B", "B/s", "FLOP/s", "s", "tokens", "params"... or "" */
    const char *doc;  /* what it means, one sentence */
};

/*
 * The descriptor table: sets *n to its length (<= ST_PROFILE_MAX_FIELDS) and returns it (static,
 * never NULL). Field index i of field_line[] is entry i.
 */
const struct st_profile_field *st_profile_fields(uint32_t *n);
/* Index of the field with this dotted path, or -1. */
int st_profile_field_find(const char *path, size_t len);
/* Appends field i's current value in YAML syntax (what parse reads back unchanged). */
void st_profile_format(const struct st_profile *p, uint32_t i, struct st_buf *out);
/*
 * Appends the whole profile as YAML, every key in table order (aliases left out), in a form that
 * st_profile_parse reads back to the same values.
 */
void st_profile_emit(const struct st_profile *p, struct st_buf *out);

/* Built-in defaults: a small dense GQA model on one 80 GB GPU (documented in docs/simulator.md).
 * Every field takes its descriptor's def; origin is "" and field_line all 0. */
void st_profile_defaults(struct st_profile *p);

/*
 * Parses YAML bytes over the current values of p (so defaults apply to absent keys). name is used
 * in messages ("profiles/x.yaml:12:5: engine.tp: expected an integer from 1 to 64, got 'x'").
 * Returns 0, or ST_EPARSE (YAML syntax, unknown key, wrong type, out of range, invalid UTF-8, more
 * than one document, a key given twice or under two spellings) or ST_ETOOBIG (len over
 * ST_PROFILE_MAX_BYTES) with err filled. All or nothing: on error p is unchanged. On success
 * origin becomes name and field_line[i] the 1-based line of each key read (a parse under another
 * name first clears every line, so no line is ever attributed to the wrong file). yaml need not
 * be NUL-terminated; err may be NULL with errlen 0; nothing is printed (base/yaml.h's messages go
 * into err).
 */
int st_profile_parse(struct st_profile *p, const char *yaml, size_t len, const char *name,
                     char *err, size_t errlen) ST_WUR;

/*
 * Applies one "section.key=value" override (value in YAML syntax, e.g. "engine.tp=4",
 * "engine.graph_sizes=[1, 2, 4]", "hardware.gpu_mem_bytes=96GiB"). Same errors as parse, in the
 * form "--set: engine.tp: expected ...". All or nothing; sets the field's field_line to 0.
 */
int st_profile_set(struct st_profile *p, const char *assignment, char *err, size_t errlen) ST_WUR;

/*
 * Cross-field checks: impossible combinations (TP not dividing the heads where the attention
 * kind requires it, dp_attention not dividing tp, pp over layers, tp*pp over gpus, spec steps
 * over the available draft layers, a page size that is not a power of two...). Returns 0 or
 * ST_EPARSE naming the field (and its line when it came from a file).
 */
int st_profile_validate(const struct st_profile *p, char *err, size_t errlen) ST_WUR;

#endif
