/*
 * Simulator profiles: one static descriptor table (every YAML key with its type, storage, range,
 * default, unit and meaning), a YAML reader over base/yaml.h, --set overrides, the
 * cross-field checks real engines make at startup, and a YAML writer. See profile.h for the
 * contract and docs/simulator.md ("## Profiles") for the key list, which scripts/profile-keys.py
 * generates from the table between "fields: begin" and "fields: end" (keep the one-macro-a-row
 * form). Pure: no file I/O, no printing; the YAML helper's diagnostics go into err.
 * Every parse works on a copy and commits only on success. Inputs are small (a few KB).
 */
#include "sim/model/profile.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/num.h"
#include "base/yaml.h"

/* Longest number (with its unit) and longest dotted path that we look at. */
#define NUM_MAX 64
#define PATH_MAX_LEN 64
/* Bytes of a value quoted back in a message before it is cut with "...". */
#define GOT_MAX 40

/* ---- names of enum values ---- */

static const struct st_profile_name attn_names[] = {
    {"mha", ST_ATTN_MHA},
    {"gqa", ST_ATTN_GQA},
    {"mla", ST_ATTN_MLA},
    {NULL, 0},
};

static const struct st_profile_name dialect_names[] = {
    {"vllm", ST_DIALECT_VLLM},
    {"sglang", ST_DIALECT_SGLANG},
    {"llamacpp", ST_DIALECT_LLAMACPP},
    {NULL, 0},
};

static const struct st_profile_name cache_scope_names[] = {
    {"auto", ST_CACHE_SCOPE_AUTO},
    {"pool", ST_CACHE_SCOPE_POOL},
    {"slot", ST_CACHE_SCOPE_SLOT},
    {NULL, 0},
};

static const struct st_profile_name cached_report_names[] = {
    {"usage", ST_CACHED_REPORT_USAGE},
    {"evaluated", ST_CACHED_REPORT_EVALUATED},
    {"none", ST_CACHED_REPORT_NONE},
    {NULL, 0},
};

static const struct st_profile_name spec_names[] = {
    {"none", ST_SPEC_NONE},
    {"mtp", ST_SPEC_MTP},
    {"eagle", ST_SPEC_EAGLE},
    {"draft", ST_SPEC_DRAFT},
    {NULL, 0},
};

/* KV cache element types and their bytes (vLLM's --kv-cache-dtype spellings; fp8 scales are
 * per tensor and not counted). */
static const struct st_profile_name kv_dtype_names[] = {
    {"fp8", 1}, {"fp8_e4m3", 1}, {"fp8_e5m2", 1}, {"bf16", 2}, {"fp16", 2}, {"fp32", 4}, {NULL, 0},
};

_Static_assert(sizeof(enum st_attn) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(enum st_dialect) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(enum st_spec_method) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(enum st_cached_report) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(enum st_cache_scope) == sizeof(int), "enums are stored as int");

/* ---- the descriptor table ---- */

/* Offset of member m, which must have type T (a compile error otherwise). */
#define OFF(m, T) _Generic(&((struct st_profile *)0)->m, T * : offsetof(struct st_profile, m))
#define SIZE(m) sizeof(((struct st_profile *)0)->m)
#define FIELD(path_, type_, off_, size_, count_, min_, max_, flags_, names_, def_, unit_, doc_)    \
    {                                                                                              \
        .path = path_, .type = type_, .offset = off_, .size = size_, .count_offset = count_,       \
        .min = min_, .max = max_, .flags = flags_, .names = names_, .def = def_, .unit = unit_,    \
        .doc = doc_                                                                                \
    }
/* One macro per row; the arguments are what scripts/profile-keys.py reads. */
#define U32(path, m, lo, hi, def, unit, doc)                                                       \
    FIELD(path, ST_PROFILE_U32, OFF(m, uint32_t), SIZE(m), 0, lo, hi, 0, NULL, def, unit, doc)
#define U64(path, m, lo, hi, def, unit, doc)                                                       \
    FIELD(path, ST_PROFILE_U64, OFF(m, uint64_t), SIZE(m), 0, lo, hi, 0, NULL, def, unit, doc)
/* A double in [lo, hi]. */
#define F64(path, m, lo, hi, def, unit, doc)                                                       \
    FIELD(path, ST_PROFILE_F64, OFF(m, double), SIZE(m), 0, lo, hi, 0, NULL, def, unit, doc)
/* A double in (lo, hi]. */
#define F64X(path, m, lo, hi, def, unit, doc)                                                      \
    FIELD(path, ST_PROFILE_F64, OFF(m, double), SIZE(m), 0, lo, hi, ST_PROFILE_F_MIN_OPEN, NULL,   \
          def, unit, doc)
#define BOOL(path, m, def, doc)                                                                    \
    FIELD(path, ST_PROFILE_BOOL, OFF(m, int), SIZE(m), 0, 0, 1, 0, NULL, def, "", doc)
#define ENUM(path, m, T, names, def, doc)                                                          \
    FIELD(path, ST_PROFILE_ENUM, OFF(m, T), SIZE(m), 0, 0, 0, 0, names, def, "", doc)
#define STR(path, m, def, doc)                                                                     \
    FIELD(path, ST_PROFILE_STR, OFF(m[0], char), SIZE(m), 0, 1, SIZE(m) - 1, 0, NULL, def, "", doc)
#define F64_LIST(path, m, n, lo, hi, def, unit, doc)                                               \
    FIELD(path, ST_PROFILE_F64_LIST, OFF(m[0], double), SIZE(m), OFF(n, uint32_t), lo, hi, 0,      \
          NULL, def, unit, doc)
#define U32_LIST(path, m, n, lo, hi, def, unit, doc)                                               \
    FIELD(path, ST_PROFILE_U32_LIST, OFF(m[0], uint32_t), SIZE(m), OFF(n, uint32_t), lo, hi, 0,    \
          NULL, def, unit, doc)
/* Another spelling of the double m: a dtype name that sets its bytes per element. */
#define KV_DTYPE(path, m, def, doc)                                                                \
    FIELD(path, ST_PROFILE_KV_DTYPE, OFF(m, double), SIZE(m), 0, 0, 0, ST_PROFILE_F_ALIAS,         \
          kv_dtype_names, def, "", doc)

/* UINT64_MAX as a range bound (it rounds to 2^64; values are compared as integers first). */
#define U64_MAX_AS_DOUBLE 18446744073709551615.0

/* clang-format off */
static const struct st_profile_field fields[] = {
    /* fields: begin */
    STR("model.name", model.name, "dense-8b", "Model name, as served and reported."),
    U32("model.layers", model.layers, 1, 1024, "32", "", "Decoder layers; each holds KV."),
    U32("model.hidden", model.hidden, 1, 1048576, "4096", "", "Hidden size (residual stream width)."),
    U32("model.heads", model.heads, 1, 4096, "32", "", "Attention (query) heads."),
    U32("model.kv_heads", model.kv_heads, 1, 4096, "8", "", "KV heads: heads for mha, fewer for gqa; not used by mla."),
    U32("model.head_dim", model.head_dim, 1, 4096, "128", "", "Dimension of one attention head."),
    ENUM("model.attention", model.attention, enum st_attn, attn_names, "gqa", "Attention kind: mha, gqa or mla (latent KV, replicated over TP)."),
    U32("model.kv_lora_rank", model.kv_lora_rank, 0, 65536, "0", "", "MLA latent KV width per token per layer (DeepSeek V3: 512); mla only."),
    U32("model.qk_rope_dim", model.qk_rope_dim, 0, 4096, "0", "", "MLA decoupled RoPE key width per token per layer (DeepSeek V3: 64); mla only."),
    U32("model.indexer_head_dim", model.indexer_head_dim, 0, 4096, "0", "", "Sparse-attention indexer key width per token per layer; 0 = no indexer."),
    U32("model.indexer_topk", model.indexer_topk, 0, 16777216, "0", "tokens", "Tokens each query attends to under sparse attention; 0 = dense."),
    F64X("model.params_total", model.params_total, 0, 1e15, "8.03e9", "params", "All parameters (every expert)."),
    F64X("model.params_active", model.params_active, 0, 1e15, "8.03e9", "params", "Parameters touched per token (MoE: dense part plus routed experts)."),
    F64("model.params_dense", model.params_dense, 0, 1e15, "8.03e9", "params", "Non-expert parameters (attention, shared experts, embeddings)."),
    F64X("model.weight_bytes", model.weight_bytes, 0, 8, "2", "bytes/param", "Bytes per parameter: 2 bf16, 1 fp8, 0.5625 nvfp4."),
    F64("model.dense_weight_bytes", model.dense_weight_bytes, 0, 8, "0", "bytes/param", "Bytes per non-expert parameter (quantized MoE checkpoints keep attention and embeddings wider); 0 = weight_bytes."),
    U32("model.kv_layers", model.kv_layers, 0, 1024, "0", "", "Layers that keep per-token KV (full attention); 0 = all. Hybrid models: the others are linear-attention or SSM layers."),
    U32("model.mtp_layers", model.mtp_layers, 0, 64, "0", "", "MTP layers in the checkpoint."),
    F64("model.draft_params", model.draft_params, 0, 1e15, "0", "params", "Parameters of the EAGLE head or draft model."),
    U32("model.draft_layers", model.draft_layers, 0, 1024, "0", "", "Layers of the EAGLE head or draft model that hold KV."),
    F64("model.vision_params", model.vision_params, 0, 1e15, "0", "params", "Vision encoder parameters; 0 = text only."),
    U32("model.vision_patch", model.vision_patch, 1, 4096, "28", "pixels", "Pixels per image token side: an image is ceil(w/p) * ceil(h/p) tokens."),
    U32("model.vocab", model.vocab, 1, 16777216, "128256", "tokens", "Vocabulary size."),
    U32("hardware.gpus", hw.gpus, 1, 1024, "1", "", "GPUs available to the engine."),
    F64X("hardware.gpu_mem_bytes", hw.gpu_mem_bytes, 0, 1e14, "80GB", "B", "Memory of one GPU."),
    F64X("hardware.hbm_bytes_per_s", hw.hbm_bytes_per_s, 0, 1e15, "3.35TB/s", "B/s", "Peak memory bandwidth of one GPU."),
    F64X("hardware.flops_bf16", hw.flops_bf16, 0, 1e18, "989TFLOPS", "FLOP/s", "Dense bf16 tensor peak of one GPU."),
    F64("hardware.flops_fp8", hw.flops_fp8, 0, 1e18, "1979TFLOPS", "FLOP/s", "Dense fp8 tensor peak of one GPU; 0 = none."),
    F64("hardware.flops_fp4", hw.flops_fp4, 0, 1e18, "0", "FLOP/s", "Dense fp4 tensor peak of one GPU; 0 = none."),
    F64X("hardware.link_bytes_per_s", hw.link_bytes_per_s, 0, 1e15, "450GB/s", "B/s", "GPU-to-GPU bandwidth per GPU and direction, for TP all-reduce and PP sends."),
    F64("hardware.link_latency_s", hw.link_latency_s, 0, 1, "10us", "s", "Latency of one collective or PP send."),
    F64X("hardware.eff_matmul", hw.eff_matmul, 0, 1, "0.6", "", "Fraction of peak FLOP/s that GEMMs reach."),
    F64X("hardware.eff_attn", hw.eff_attn, 0, 1, "0.5", "", "Fraction of peak FLOP/s that attention kernels reach."),
    F64X("hardware.eff_mem", hw.eff_mem, 0, 1, "0.8", "", "Fraction of HBM bandwidth that memory-bound kernels reach."),
    F64X("hardware.eff_link", hw.eff_link, 0, 1, "0.7", "", "Fraction of link bandwidth that collectives reach."),
    ENUM("engine.dialect", engine.dialect, enum st_dialect, dialect_names, "vllm", "Engine whose behaviour, metrics and messages are modelled: vllm, sglang or llamacpp."),
    U32("engine.tp", engine.tp, 1, 64, "1", "", "Tensor-parallel size."),
    U32("engine.pp", engine.pp, 1, 64, "1", "", "Pipeline-parallel size."),
    U32("engine.dp_attention", engine.dp_attention, 1, 64, "1", "", "DP-attention groups inside tp (1 = off); attention runs on tp/dp_attention GPUs per group."),
    F64X("engine.mem_fraction", engine.mem_fraction, 0, 1, "0.9", "", "Share of GPU memory the engine may use (gpu-memory-utilization, mem-fraction-static)."),
    KV_DTYPE("engine.kv_dtype", engine.kv_dtype_bytes, "bf16", "KV cache dtype by name (fp8, fp8_e4m3, fp8_e5m2, bf16, fp16, fp32); sets engine.kv_dtype_bytes."),
    F64("engine.kv_dtype_bytes", engine.kv_dtype_bytes, 0.25, 8, "2", "bytes", "Bytes per KV cache element: 2 bf16/fp16, 1 fp8."),
    U32("engine.page_size", engine.page_size, 1, 1024, "16", "tokens", "Tokens per KV block (a power of two)."),
    U32("engine.max_batched_tokens", engine.max_batched_tokens, 1, 16777216, "8192", "tokens", "Token budget of one step (chunked prefill)."),
    U32("engine.max_running", engine.max_running, 1, 65536, "256", "", "Running requests per DP rank."),
    F64("engine.admit_output_reserve", engine.admit_output_reserve, 0, 1, "0", "", "Share of max_tokens whose KV must be free at admission: 1 = SGLang's conservative admission, 0 = vLLM (preempt instead)."),
    U64("engine.context_length", engine.context_length, 1, 1073741824, "32768", "tokens", "Longest prompt plus output the engine accepts."),
    BOOL("engine.prefix_caching", engine.prefix_caching, "true", "Automatic prefix caching (radix cache)."),
    ENUM("engine.cache_scope", engine.cache_scope, enum st_cache_scope, cache_scope_names, "auto", "Where the prefix cache lives: pool (one block cache per rank, vLLM and SGLang), slot (each of the engine.max_running slots keeps only the last prompt it ran and its output, llama.cpp b4748; a request goes to the idle slot sharing the most with it, else the least recently used) or auto (slot for the llamacpp dialect, pool otherwise)."),
    F64("engine.slot_similarity", engine.slot_similarity, 0, 1, "0.5", "", "Slot scope: a request goes to the idle slot whose tokens it shares the longest prefix with if that prefix is more than this share of the slot's tokens, else to the least recently used idle slot (llama.cpp --slot-prompt-similarity)."),
    BOOL("engine.keepalive_close", engine.keepalive_close, "false", "Answer one request per connection and drop the next one on it unanswered (the connection shut): the worst case of llama.cpp b4748, which sends Keep-Alive and then closes after each streamed response."),
    ENUM("engine.cached_report", engine.cached_report, enum st_cached_report, cached_report_names, "usage", "What the server says of cached prompt tokens: usage (usage.prompt_tokens_details, timings.cache_n and the prefix counters), evaluated (llama.cpp b4748: only timings.prompt_n, the tokens it evaluated) or none (nothing: vLLM without --enable-prompt-tokens-details and no prefix counters)."),
    ENUM("engine.spec_method", engine.spec_method, enum st_spec_method, spec_names, "none", "Speculative decoding: none, mtp, eagle or draft."),
    U32("engine.spec_steps", engine.spec_steps, 0, 8, "0", "tokens", "Draft tokens per step (num-speculative-tokens); 0 with spec_method none."),
    F64_LIST("engine.spec_accept", engine.spec_accept, engine.n_spec_accept, 0, 1, "[]", "", "P(draft i accepted | drafts before it accepted) at context 0, one per draft position."),
    F64("engine.spec_accept_halflife_tokens", engine.spec_accept_halflife_tokens, 0, 1e9, "0", "tokens", "Acceptance decays as 2^(-context / halflife); 0 = no decay."),
    U32_LIST("engine.graph_sizes", engine.graph_sizes, engine.n_graph_sizes, 1, 65536, "[1, 2, 4, 8, 16, 32, 64, 128, 256]", "", "CUDA-graph capture batch sizes, increasing; [] = eager."),
    F64("engine.graph_bytes_per_size", engine.graph_bytes_per_size, 0, 1e12, "8MB", "B", "Memory per captured graph per GPU."),
    F64("engine.act_bytes_per_token", engine.act_bytes_per_token, 0, 1e9, "128KB", "B", "Activation reserve per batched token per GPU."),
    F64("engine.reserve_bytes", engine.reserve_bytes, 0, 1e13, "1GB", "B", "Fixed per-GPU overhead: CUDA context, NCCL buffers, allocator slack."),
    F64("engine.step_overhead_s", engine.step_overhead_s, 0, 10, "0", "s", "Fixed time per engine step and PP stage that no roofline sees: scheduling, launches, stage hand-off."),
    F64("engine.startup_s", engine.startup_s, 0, 1e6, "30s", "s", "Time to load and warm up, in virtual seconds."),
    F64("quality.error_rate", quality.error_rate, 0, 1, "0", "", "Probability that an answer checked through X-Servetune-Expect is wrong."),
    F64("perf.noise_cv", perf.noise_cv, 0, 1, "0", "", "Noise of one request: every step time of a request is multiplied by a seeded lognormal factor of mean 1 and this coefficient of variation (drawn per request; a step of several requests takes their mean)."),
    F64("perf.bringup_cv", perf.bringup_cv, 0, 1, "0", "", "Noise of one launch: every step time of the launch is multiplied by one lognormal factor of mean 1 and this coefficient of variation, drawn at start."),
    U64("perf.noise_seed", perf.noise_seed, 0, U64_MAX_AS_DOUBLE, "0", "", "Seed of the noise draws; 0 = seed. The campaign runner sets one per bring-up."),
    U64("seed", seed, 0, U64_MAX_AS_DOUBLE, "1", "", "Seed of every random draw of the engine model."),
    /* fields: end */
};
/* clang-format on */

#define NFIELDS ((uint32_t)(sizeof(fields) / sizeof(fields[0])))
_Static_assert(sizeof(fields) / sizeof(fields[0]) <= ST_PROFILE_MAX_FIELDS, "field_line[] size");

const struct st_profile_field *st_profile_fields(uint32_t *n)
{
    *n = NFIELDS;
    return fields;
}

int st_profile_field_find(const char *path, size_t len)
{
    for (uint32_t i = 0; i < NFIELDS; i++) {
        if (strlen(fields[i].path) == len && memcmp(fields[i].path, path, len) == 0) {
            return (int)i;
        }
    }
    return -1;
}

/* ---- units ---- */

/* A unit suffix: the value is multiplied by 10^pow10 * 2^pow2. */
struct unit {
    const char *suffix;
    int pow10;
    int pow2;
};

static const struct unit units_bytes[] = {
    {"B", 0, 0},    {"KB", 3, 0},   {"MB", 6, 0},   {"GB", 9, 0},   {"TB", 12, 0},
    {"KiB", 0, 10}, {"MiB", 0, 20}, {"GiB", 0, 30}, {"TiB", 0, 40}, {NULL, 0, 0},
};

static const struct unit units_rate[] = {
    {"B/s", 0, 0},    {"KB/s", 3, 0},   {"MB/s", 6, 0},   {"GB/s", 9, 0},   {"TB/s", 12, 0},
    {"KiB/s", 0, 10}, {"MiB/s", 0, 20}, {"GiB/s", 0, 30}, {"TiB/s", 0, 40}, {NULL, 0, 0},
};

static const struct unit units_flops[] = {
    {"FLOPS", 0, 0},   {"GFLOPS", 9, 0},   {"TFLOPS", 12, 0},  {"PFLOPS", 15, 0}, {"FLOP/s", 0, 0},
    {"GFLOP/s", 9, 0}, {"TFLOP/s", 12, 0}, {"PFLOP/s", 15, 0}, {NULL, 0, 0},
};

static const struct unit units_time[] = {
    {"s", 0, 0}, {"ms", -3, 0}, {"us", -6, 0}, {"ns", -9, 0}, {NULL, 0, 0},
};

/* The suffixes a field's unit accepts, and how messages name the quantity; NULL = none. */
static const struct unit *unit_table(const char *unit, const char **what)
{
    static const struct {
        const char *unit;
        const char *what;
        const struct unit *table;
    } classes[] = {
        {"B", "bytes", units_bytes},
        {"B/s", "bytes/s", units_rate},
        {"FLOP/s", "FLOP/s", units_flops},
        {"s", "seconds", units_time},
    };
    for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++) {
        if (strcmp(unit, classes[i].unit) == 0) {
            *what = classes[i].what;
            return classes[i].table;
        }
    }
    *what = NULL;
    return NULL;
}

/* ---- numbers ---- */

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/*
 * Parses a decimal number with an optional unit suffix from units (NULL: none) into *out. The
 * decimal part of the unit is applied to the exponent before strtod, so "3.35TB/s" is exactly
 * 3.35e12. strtod runs in the "C" locale the program never changes. Returns 0 or -1.
 */
static int parse_double(const char *s, size_t n, const struct unit *units, double *out)
{
    /* The number is the run of number characters (no unit starts with one); its mantissa and
     * exponent are read by base/num.h's grammar. */
    size_t len = 0;
    while (len < n && s[len] != '\0' && strchr("+-.0123456789eE", s[len])) {
        len++;
    }
    if (len == 0 || len > NUM_MAX - 8) {
        return -1;
    }
    size_t exp_at = 0;
    while (exp_at < len && s[exp_at] != 'e' && s[exp_at] != 'E') {
        exp_at++;
    }
    double mantissa;
    if (st_num_f64(s, exp_at, -HUGE_VAL, HUGE_VAL, &mantissa) != 0) {
        return -1;
    }
    const char *suffix = s + len;
    size_t suffix_len = n - len;
    if (suffix_len > 0 && suffix[0] == ' ') {
        suffix++;
        suffix_len--;
    }
    const struct unit *u = NULL;
    if (suffix_len > 0) {
        for (size_t i = 0; units && units[i].suffix; i++) {
            if (strlen(units[i].suffix) == suffix_len &&
                memcmp(units[i].suffix, suffix, suffix_len) == 0) {
                u = &units[i];
                break;
            }
        }
        if (!u) {
            return -1;
        }
    }
    int64_t exp10 = 0;
    if (exp_at < len) {
        size_t elen = len - exp_at - 1;
        if (elen >= 16 || st_num_i64(s + exp_at + 1, elen, INT64_MIN, INT64_MAX, &exp10) != 0) {
            return -1;
        }
    }
    char buf[NUM_MAX + 32];
    int w = snprintf(buf, sizeof(buf), "%.*se%" PRId64, (int)exp_at, s, exp10 + (u ? u->pow10 : 0));
    if (w < 0 || (size_t)w >= sizeof(buf)) {
        return -1;
    }
    char *end = NULL;
    double v = strtod(buf, &end);
    if (*end != '\0' || !isfinite(v)) {
        return -1;
    }
    if (u && u->pow2) {
        v = ldexp(v, u->pow2);
    }
    if (!isfinite(v)) {
        return -1;
    }
    *out = v;
    return 0;
}

/* An unsigned integer: exact when written in digits, else a decimal form with an integral value
 * ("96e9", "4.0"). Returns 0 or -1. */
static int parse_uint(const char *s, size_t n, uint64_t *out)
{
    size_t i = (n > 0 && s[0] == '+') ? 1 : 0;
    size_t j = i;
    while (j < n && is_digit(s[j])) {
        j++;
    }
    uint64_t x = 0;
    if (j > i && st_num_u64(s + i, j - i, UINT64_MAX, &x) != 0) {
        return -1; /* the digits alone overflow */
    }
    if (j > i && j == n) {
        *out = x;
        return 0;
    }
    double v;
    if (parse_double(s, n, NULL, &v) != 0 || v < 0 || v >= 18446744073709551616.0 ||
        floor(v) != v) {
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

static int in_range(const struct st_profile_field *f, double v)
{
    int above_min = (f->flags & ST_PROFILE_F_MIN_OPEN) ? v > f->min : v >= f->min;
    return above_min && v <= f->max;
}

/* ---- writing values ---- */

/* The storage at offset in p (a descriptor's offset or count_offset). */
static void *slot(struct st_profile *p, size_t offset)
{
    return (char *)p + offset;
}

static const void *cslot(const struct st_profile *p, size_t offset)
{
    return (const char *)p + offset;
}

static uint32_t list_capacity(const struct st_profile_field *f)
{
    size_t elem = f->type == ST_PROFILE_F64_LIST ? sizeof(double) : sizeof(uint32_t);
    return (uint32_t)(f->size / elem);
}

static const struct st_profile_name *find_name(const struct st_profile_name *names, const char *s,
                                               size_t n)
{
    for (size_t i = 0; names[i].name; i++) {
        if (strlen(names[i].name) == n && memcmp(names[i].name, s, n) == 0) {
            return &names[i];
        }
    }
    return NULL;
}

enum put_result {
    PUT_OK = 0,
    PUT_BAD,           /* not a valid value of the field's type and range */
    PUT_NOT_INCREASING /* a list element not above the one before it */
};

/*
 * Stores the scalar text s[0..n) into field f of p (element elem of a list; the caller sets the
 * count). Nothing is written unless the value is valid.
 */
static enum put_result put_scalar(struct st_profile *p, const struct st_profile_field *f,
                                  uint32_t elem, const char *s, size_t n)
{
    uint64_t u;
    double d;
    const char *what;
    const struct st_profile_name *nm;
    switch (f->type) {
    case ST_PROFILE_U32:
    case ST_PROFILE_U64:
    case ST_PROFILE_U32_LIST:
        if (parse_uint(s, n, &u) != 0 || !in_range(f, (double)u)) {
            return PUT_BAD;
        }
        if (f->type == ST_PROFILE_U64) {
            memcpy(slot(p, f->offset), &u, sizeof(u));
        } else if (f->type == ST_PROFILE_U32) {
            uint32_t v = (uint32_t)u;
            memcpy(slot(p, f->offset), &v, sizeof(v));
        } else {
            uint32_t *list = slot(p, f->offset);
            if (elem > 0 && u <= list[elem - 1]) {
                return PUT_NOT_INCREASING;
            }
            list[elem] = (uint32_t)u;
        }
        return PUT_OK;
    case ST_PROFILE_F64:
    case ST_PROFILE_F64_LIST:
        if (parse_double(s, n, unit_table(f->unit, &what), &d) != 0 || !in_range(f, d)) {
            return PUT_BAD;
        }
        memcpy((double *)slot(p, f->offset) + elem, &d, sizeof(d));
        return PUT_OK;
    case ST_PROFILE_BOOL: {
        int b;
        if ((n == 4 && (memcmp(s, "true", 4) == 0 || memcmp(s, "True", 4) == 0 ||
                        memcmp(s, "TRUE", 4) == 0))) {
            b = 1;
        } else if (n == 5 && (memcmp(s, "false", 5) == 0 || memcmp(s, "False", 5) == 0 ||
                              memcmp(s, "FALSE", 5) == 0)) {
            b = 0;
        } else {
            return PUT_BAD;
        }
        memcpy(slot(p, f->offset), &b, sizeof(b));
        return PUT_OK;
    }
    case ST_PROFILE_ENUM: {
        nm = find_name(f->names, s, n);
        if (!nm) {
            return PUT_BAD;
        }
        int e = (int)nm->value;
        memcpy(slot(p, f->offset), &e, sizeof(e));
        return PUT_OK;
    }
    case ST_PROFILE_KV_DTYPE:
        nm = find_name(f->names, s, n);
        if (!nm) {
            return PUT_BAD;
        }
        memcpy(slot(p, f->offset), &nm->value, sizeof(nm->value));
        return PUT_OK;
    case ST_PROFILE_STR:
        if ((double)n < f->min || (double)n > f->max) {
            return PUT_BAD;
        }
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)s[i];
            if (c < 0x20 || c == 0x7f) {
                return PUT_BAD;
            }
        }
        memset(slot(p, f->offset), 0, f->size);
        memcpy(slot(p, f->offset), s, n);
        return PUT_OK;
    }
    return PUT_BAD;
}

static void clear_list(struct st_profile *p, const struct st_profile_field *f)
{
    memset(slot(p, f->offset), 0, f->size);
    memset(slot(p, f->count_offset), 0, sizeof(uint32_t));
}

static void set_count(struct st_profile *p, const struct st_profile_field *f, uint32_t n)
{
    memcpy(slot(p, f->count_offset), &n, sizeof(n));
}

/* ---- reading values back ---- */

/*
 * The shortest text that strtod reads back to exactly v: the shortest %g form, or the integer
 * when that is no longer ("30", not "3e+01").
 */
static void format_double(double v, char *out, size_t outlen)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, outlen, "%.*g", prec, v);
        if (strtod(out, NULL) == v) {
            break;
        }
    }
    if (v == floor(v) && fabs(v) < 1e16) {
        char whole[32];
        snprintf(whole, sizeof(whole), "%.0f", v);
        if (strlen(whole) <= strlen(out)) {
            snprintf(out, outlen, "%s", whole);
        }
    }
}

static void put_double(struct st_buf *out, double v)
{
    char tmp[32];
    format_double(v, tmp, sizeof(tmp));
    st_buf_puts(out, tmp);
}

static const char *name_of(const struct st_profile_name *names, double v)
{
    for (size_t i = 0; names[i].name; i++) {
        if (names[i].value == v) {
            return names[i].name;
        }
    }
    return NULL;
}

/* Appends s as a YAML double-quoted string. */
static void put_quoted(struct st_buf *out, const char *s)
{
    st_buf_putc(out, '"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            st_buf_putc(out, '\\');
            st_buf_putc(out, (char)c);
        } else if (c < 0x20 || c == 0x7f) {
            st_buf_printf(out, "\\x%02x", c);
        } else {
            st_buf_putc(out, (char)c);
        }
    }
    st_buf_putc(out, '"');
}

void st_profile_format(const struct st_profile *p, uint32_t i, struct st_buf *out)
{
    if (i >= NFIELDS) {
        return;
    }
    const struct st_profile_field *f = &fields[i];
    const void *v = cslot(p, f->offset);
    uint32_t u32, n;
    uint64_t u64;
    double d;
    int k;
    const char *nm;
    switch (f->type) {
    case ST_PROFILE_U32:
        memcpy(&u32, v, sizeof(u32));
        st_buf_printf(out, "%" PRIu32, u32);
        break;
    case ST_PROFILE_U64:
        memcpy(&u64, v, sizeof(u64));
        st_buf_printf(out, "%" PRIu64, u64);
        break;
    case ST_PROFILE_F64:
        memcpy(&d, v, sizeof(d));
        put_double(out, d);
        break;
    case ST_PROFILE_BOOL:
        memcpy(&k, v, sizeof(k));
        st_buf_puts(out, k ? "true" : "false");
        break;
    case ST_PROFILE_ENUM:
        memcpy(&k, v, sizeof(k));
        nm = name_of(f->names, k);
        if (nm) {
            st_buf_puts(out, nm);
        } else {
            st_buf_printf(out, "%d", k);
        }
        break;
    case ST_PROFILE_KV_DTYPE:
        memcpy(&d, v, sizeof(d));
        nm = name_of(f->names, d);
        if (nm) {
            st_buf_puts(out, nm);
        } else {
            put_double(out, d);
        }
        break;
    case ST_PROFILE_STR:
        put_quoted(out, v);
        break;
    case ST_PROFILE_F64_LIST:
    case ST_PROFILE_U32_LIST:
        memcpy(&n, cslot(p, f->count_offset), sizeof(n));
        st_buf_putc(out, '[');
        for (uint32_t j = 0; j < n && j < list_capacity(f); j++) {
            if (j > 0) {
                st_buf_puts(out, ", ");
            }
            if (f->type == ST_PROFILE_F64_LIST) {
                put_double(out, ((const double *)v)[j]);
            } else {
                st_buf_printf(out, "%" PRIu32, ((const uint32_t *)v)[j]);
            }
        }
        st_buf_putc(out, ']');
        break;
    }
}

void st_profile_emit(const struct st_profile *p, struct st_buf *out)
{
    st_buf_puts(out, "# servetune simulator profile (keys: docs/simulator.md, \"## Profiles\")\n");
    size_t section_len = 0;
    const char *section = "";
    for (uint32_t i = 0; i < NFIELDS; i++) {
        const struct st_profile_field *f = &fields[i];
        if (f->flags & ST_PROFILE_F_ALIAS) {
            continue;
        }
        const char *dot = strchr(f->path, '.');
        const char *key = f->path;
        if (dot) {
            size_t len = (size_t)(dot - f->path);
            if (len != section_len || memcmp(section, f->path, len) != 0) {
                st_buf_printf(out, "%.*s:\n", (int)len, f->path);
                section = f->path;
                section_len = len;
            }
            key = dot + 1;
            st_buf_puts(out, "  ");
        }
        st_buf_printf(out, "%s: ", key);
        st_profile_format(p, i, out);
        if (f->unit[0]) {
            st_buf_printf(out, "  # %s", f->unit);
        }
        st_buf_putc(out, '\n');
    }
}

/* ---- messages ---- */

/* Writes what field f accepts ("an integer from 1 to 64") into out. */
static void expected(const struct st_profile_field *f, char *out, size_t outlen)
{
    char lo[32], hi[32];
    const char *what = NULL;
    const struct unit *units;
    size_t used;
    format_double(f->min, lo, sizeof(lo));
    format_double(f->max, hi, sizeof(hi));
    switch (f->type) {
    case ST_PROFILE_U32:
    case ST_PROFILE_U64:
    case ST_PROFILE_U32_LIST:
        if (f->max >= 18446744073709551615.0) {
            snprintf(hi, sizeof(hi), "%" PRIu64, UINT64_MAX);
        } else {
            snprintf(hi, sizeof(hi), "%.0f", f->max);
        }
        snprintf(out, outlen, "an integer from %.0f to %s", f->min, hi);
        break;
    case ST_PROFILE_F64:
    case ST_PROFILE_F64_LIST:
        units = unit_table(f->unit, &what);
        used = (size_t)snprintf(out, outlen, "%s in %c%s, %s]", what ? what : "a number",
                                (f->flags & ST_PROFILE_F_MIN_OPEN) ? '(' : '[', lo, hi);
        if (units && used < outlen) {
            used += (size_t)snprintf(out + used, outlen - used, ", as a number or with a unit (");
            for (size_t i = 0; units[i].suffix && used < outlen; i++) {
                used += (size_t)snprintf(out + used, outlen - used, "%s%s", i ? " " : "",
                                         units[i].suffix);
            }
            if (used < outlen) {
                snprintf(out + used, outlen - used, ")");
            }
        }
        break;
    case ST_PROFILE_BOOL:
        snprintf(out, outlen, "true or false");
        break;
    case ST_PROFILE_ENUM:
    case ST_PROFILE_KV_DTYPE:
        used = (size_t)snprintf(out, outlen, "one of ");
        for (size_t i = 0; f->names[i].name && used < outlen; i++) {
            used += (size_t)snprintf(out + used, outlen - used, "%s%s", i ? ", " : "",
                                     f->names[i].name);
        }
        break;
    case ST_PROFILE_STR:
        snprintf(out, outlen, "a string of %.0f to %.0f bytes without control characters", f->min,
                 f->max);
        break;
    }
}

/* ---- parse context ---- */

struct ctx {
    struct st_profile *p; /* the working copy: committed by the caller on success */
    struct st_yaml *y;    /* borrowed: the document being read, its name and messages */
    uint32_t line[ST_PROFILE_MAX_FIELDS]; /* this parse: 1-based line of each key read, 0 = not */
};

/* ---- applying one YAML value to one field ---- */

static int apply_scalar_node(struct ctx *c, const struct st_profile_field *f, uint32_t elem,
                             const char *path, struct st_yaml_node *key, struct st_yaml_node *v)
{
    char exp[256], got[GOT_MAX * 4 + 32];
    size_t n = 0;
    const char *s = NULL;
    if (st_yaml_is_scalar(v)) {
        s = st_yaml_text(c->y, v, &n);
    }
    enum put_result r = s && n > 0 ? put_scalar(c->p, f, elem, s, n) : PUT_BAD;
    if (r == PUT_OK) {
        return 0;
    }
    st_yaml_describe(c->y, v, got, sizeof(got));
    if (r == PUT_NOT_INCREASING) {
        uint32_t prev = ((const uint32_t *)cslot(c->p, f->offset))[elem - 1];
        return st_yaml_fail(c->y, st_yaml_either(v, key),
                            "%s: expected an integer greater than %" PRIu32
                            " (sizes increase), got %s",
                            path, prev, got);
    }
    expected(f, exp, sizeof(exp));
    return st_yaml_fail(c->y, st_yaml_either(v, key), "%s: expected %s, got %s", path, exp, got);
}

static int apply_list_node(struct ctx *c, const struct st_profile_field *f,
                           struct st_yaml_node *key, struct st_yaml_node *v)
{
    uint32_t cap = list_capacity(f);
    clear_list(c->p, f);
    if (st_yaml_is_scalar(v) && !st_yaml_is_empty(v)) {
        /* One value stands for a list of one. */
        int rc = apply_scalar_node(c, f, 0, f->path, key, v);
        if (rc == 0) {
            set_count(c->p, f, 1);
        }
        return rc;
    }
    if (!st_yaml_is_seq(v)) {
        char got[GOT_MAX * 4 + 32];
        st_yaml_describe(c->y, v, got, sizeof(got));
        return st_yaml_fail(c->y, st_yaml_either(v, key),
                            "%s: expected a list of at most %" PRIu32 " values, got %s", f->path,
                            cap, got);
    }
    uint32_t count = st_yaml_count(v);
    if (count > cap) {
        return st_yaml_fail(c->y, st_yaml_either(v, key),
                            "%s: expected a list of at most %" PRIu32 " values, got %" PRIu32
                            " values",
                            f->path, cap, count);
    }
    void *it = NULL;
    struct st_yaml_node *item;
    uint32_t i = 0;
    while ((item = st_yaml_seq_next(v, &it)) != NULL) {
        char path[PATH_MAX_LEN + 16];
        snprintf(path, sizeof(path), "%s[%" PRIu32 "]", f->path, i);
        int rc = apply_scalar_node(c, f, i, path, key, item);
        if (rc != 0) {
            return rc;
        }
        i++;
    }
    set_count(c->p, f, i);
    return 0;
}

/* Applies value v (key: where it was named; NULL for --set) to field index idx. */
static int apply_field(struct ctx *c, uint32_t idx, struct st_yaml_node *key,
                       struct st_yaml_node *v)
{
    const struct st_profile_field *f = &fields[idx];
    int line = 0, col = 0;
    if (key && st_yaml_pos(key, &line, &col) != 0) {
        line = 0;
    }
    /* Two spellings of one value in one file: refuse rather than let the later one win. */
    for (uint32_t j = 0; j < NFIELDS; j++) {
        if (j != idx && fields[j].offset == f->offset && c->line[j] != 0) {
            return st_yaml_fail(c->y, st_yaml_either(key, v),
                                "%s: conflicts with %s on line %" PRIu32 "; give one of them",
                                f->path, fields[j].path, c->line[j]);
        }
    }
    int rc;
    if (f->type == ST_PROFILE_F64_LIST || f->type == ST_PROFILE_U32_LIST) {
        rc = apply_list_node(c, f, key, v);
    } else {
        rc = apply_scalar_node(c, f, 0, f->path, key, v);
    }
    if (rc == 0) {
        c->line[idx] = line > 0 ? (uint32_t)line : 1;
    }
    return rc;
}

/* ---- unknown keys ---- */

/* The known path closest to path[0..n): the same key in another section, or one at most two
 * edits away; NULL when none is close. */
static const char *suggest(const char *path, size_t n)
{
    const char *dot = memchr(path, '.', n);
    const char *key = dot ? dot + 1 : path;
    size_t key_len = n - (size_t)(key - path);
    const char *best = NULL;
    size_t best_d = 3;
    for (uint32_t i = 0; i < NFIELDS; i++) {
        const char *fdot = strchr(fields[i].path, '.');
        const char *fkey = fdot ? fdot + 1 : fields[i].path;
        if (strlen(fkey) == key_len && memcmp(fkey, key, key_len) == 0) {
            return fields[i].path;
        }
        size_t d = st_yaml_distance(path, n, fields[i].path, strlen(fields[i].path));
        if (d < best_d) {
            best_d = d;
            best = fields[i].path;
        }
    }
    return best;
}

static int unknown_key(struct ctx *c, struct st_yaml_node *key, const char *path, size_t n)
{
    char q[GOT_MAX * 4 + 8];
    st_yaml_quote(path, n, q, sizeof(q));
    const char *s = suggest(path, n);
    if (s) {
        return st_yaml_fail(c->y, key, "%s: unknown key (did you mean %s?)", q, s);
    }
    return st_yaml_fail(c->y, key, "%s: unknown key (docs/simulator.md lists every key)", q);
}

static int section_known(const char *s, size_t n)
{
    for (uint32_t i = 0; i < NFIELDS; i++) {
        const char *dot = strchr(fields[i].path, '.');
        if (dot && (size_t)(dot - fields[i].path) == n && memcmp(fields[i].path, s, n) == 0) {
            return 1;
        }
    }
    return 0;
}

/* ---- walking a document ---- */

static int key_text(struct ctx *c, struct st_yaml_node *key, const char **s, size_t *n)
{
    *s = "";
    *n = 0;
    if (!st_yaml_is_scalar(key)) {
        char got[GOT_MAX * 4 + 32];
        st_yaml_describe(c->y, key, got, sizeof(got));
        return st_yaml_fail(c->y, key, "expected a key, got %s", got);
    }
    *s = st_yaml_text(c->y, key, n);
    return 0;
}

static int walk_section(struct ctx *c, const char *sec, size_t sec_len, struct st_yaml_node *key,
                        struct st_yaml_node *body)
{
    if (st_yaml_is_empty(body)) {
        return 0;
    }
    if (!st_yaml_is_map(body)) {
        char got[GOT_MAX * 4 + 32];
        st_yaml_describe(c->y, body, got, sizeof(got));
        return st_yaml_fail(c->y, st_yaml_either(body, key),
                            "%.*s: expected a mapping of %.*s keys, got %s", (int)sec_len, sec,
                            (int)sec_len, sec, got);
    }
    void *it = NULL;
    struct st_yaml_node *k, *v;
    while (st_yaml_map_next(body, &it, &k, &v)) {
        const char *ks;
        size_t kn;
        int rc = key_text(c, k, &ks, &kn);
        if (rc != 0) {
            return rc;
        }
        char path[PATH_MAX_LEN + 1];
        size_t n = sec_len + 1 + kn;
        if (n > PATH_MAX_LEN) {
            return unknown_key(c, k, ks, kn);
        }
        memcpy(path, sec, sec_len);
        path[sec_len] = '.';
        memcpy(path + sec_len + 1, ks, kn);
        path[n] = '\0';
        int idx = st_profile_field_find(path, n);
        if (idx < 0) {
            return unknown_key(c, k, path, n);
        }
        rc = apply_field(c, (uint32_t)idx, k, v);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

static int walk_root(struct ctx *c, struct st_yaml_node *root)
{
    if (!root) {
        return 0; /* an empty document changes nothing */
    }
    if (!st_yaml_is_map(root)) {
        char got[GOT_MAX * 4 + 32];
        st_yaml_describe(c->y, root, got, sizeof(got));
        return st_yaml_fail(
            c->y, root,
            "expected a mapping of the sections model, hardware, engine, quality, perf "
            "and the key seed, got %s",
            got);
    }
    void *it = NULL;
    struct st_yaml_node *k, *v;
    while (st_yaml_map_next(root, &it, &k, &v)) {
        const char *ks;
        size_t kn;
        int rc = key_text(c, k, &ks, &kn);
        if (rc != 0) {
            return rc;
        }
        int idx = memchr(ks, '.', kn) ? -1 : st_profile_field_find(ks, kn);
        if (idx >= 0) {
            rc = apply_field(c, (uint32_t)idx, k, v);
        } else if (section_known(ks, kn)) {
            rc = walk_section(c, ks, kn, k, v);
        } else {
            char q[GOT_MAX * 4 + 8];
            st_yaml_quote(ks, kn, q, sizeof(q));
            rc = st_yaml_fail(
                c->y, k,
                "%s: unknown section (expected model, hardware, engine, quality, perf or seed)", q);
        }
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

/* ---- public entry points ---- */

void st_profile_defaults(struct st_profile *p)
{
    memset(p, 0, sizeof(*p));
    for (uint32_t i = 0; i < NFIELDS; i++) {
        const struct st_profile_field *f = &fields[i];
        if (f->flags & ST_PROFILE_F_ALIAS) {
            continue;
        }
        if (f->type != ST_PROFILE_F64_LIST && f->type != ST_PROFILE_U32_LIST) {
            if (put_scalar(p, f, 0, f->def, strlen(f->def)) != PUT_OK) {
                abort(); /* a bad def in the table; test_sim_profile catches it first */
            }
            continue;
        }
        /* "[a, b, c]" */
        const char *s = f->def + 1;
        const char *end = f->def + strlen(f->def) - 1;
        uint32_t n = 0;
        while (s < end) {
            while (*s == ' ') {
                s++;
            }
            const char *comma = memchr(s, ',', (size_t)(end - s));
            const char *e = comma ? comma : end;
            if (n >= list_capacity(f) || put_scalar(p, f, n, s, (size_t)(e - s)) != PUT_OK) {
                abort();
            }
            n++;
            s = comma ? comma + 1 : end;
        }
        set_count(p, f, n);
    }
}

/* Copies the parsed values and their lines into p. */
static void commit(struct st_profile *p, struct st_profile *work, const struct ctx *c,
                   const char *name)
{
    char origin[sizeof(p->origin)] = {0}; /* every byte defined: profiles may be memcmp'd */
    snprintf(origin, sizeof(origin), "%s", name);
    if (strcmp(origin, work->origin) != 0) {
        memset(work->field_line, 0, sizeof(work->field_line));
        memcpy(work->origin, origin, sizeof(origin));
    }
    for (uint32_t i = 0; i < NFIELDS; i++) {
        if (c->line[i] == 0) {
            continue;
        }
        for (uint32_t j = 0; j < NFIELDS; j++) {
            if (fields[j].offset == fields[i].offset) {
                work->field_line[j] = 0;
            }
        }
    }
    for (uint32_t i = 0; i < NFIELDS; i++) {
        if (c->line[i] != 0) {
            work->field_line[i] = c->line[i];
        }
    }
    memcpy(p, work, sizeof(*p)); /* padding too, so callers may memcmp profiles */
}

int st_profile_parse(struct st_profile *p, const char *yaml, size_t len, const char *name,
                     char *err, size_t errlen)
{
    if (!name) {
        name = "profile";
    }
    const struct st_yaml_opts o = {
        .name = name, .noun = "a profile", .max_bytes = ST_PROFILE_MAX_BYTES};
    struct st_yaml y;
    st_yaml_init(&y, &o, err, errlen);
    struct st_profile work;
    memcpy(&work, p, sizeof(work));
    struct ctx c;
    memset(&c, 0, sizeof(c));
    c.p = &work;
    c.y = &y;
    int rc = st_yaml_load(&y, yaml, len);
    if (rc == 0) {
        rc = walk_root(&c, st_yaml_root(&y));
    }
    st_yaml_release(&y);
    if (rc == 0) {
        commit(p, &work, &c, name);
    }
    return rc;
}

int st_profile_set(struct st_profile *p, const char *assignment, char *err, size_t errlen)
{
    /* A --set value has no useful positions; its messages name the key instead. */
    struct st_yaml_opts o = {
        .name = "--set", .max_bytes = ST_PROFILE_MAX_BYTES, .flags = ST_YAML_NO_POSITION};
    struct st_yaml y;
    st_yaml_init(&y, &o, err, errlen);
    struct st_profile work;
    memcpy(&work, p, sizeof(work));
    struct ctx c;
    memset(&c, 0, sizeof(c));
    c.p = &work;
    c.y = &y;
    const char *eq = strchr(assignment, '=');
    const char *ps = assignment;
    const char *pe = eq ? eq : assignment + strlen(assignment);
    while (ps < pe && *ps == ' ') {
        ps++;
    }
    while (pe > ps && pe[-1] == ' ') {
        pe--;
    }
    char q[GOT_MAX * 4 + 8];
    if (!eq || ps == pe) {
        st_yaml_quote(assignment, strlen(assignment), q, sizeof(q));
        return st_yaml_fail(&y, NULL, "expected section.key=value, got '%s'", q);
    }
    int idx = st_profile_field_find(ps, (size_t)(pe - ps));
    if (idx < 0) {
        return unknown_key(&c, NULL, ps, (size_t)(pe - ps));
    }
    const char *value = eq + 1;
    size_t len = strlen(value);
    if (len > ST_PROFILE_MAX_BYTES) {
        st_errf(err, errlen, "--set: %s: value of %zu bytes, more than the %u allowed",
                fields[idx].path, len, ST_PROFILE_MAX_BYTES);
        return ST_ETOOBIG;
    }
    char what[PATH_MAX_LEN + 8];
    snprintf(what, sizeof(what), "%s: ", fields[idx].path);
    o.prefix = what;
    st_yaml_init(&y, &o, err, errlen);
    int rc = st_yaml_load(&y, value, len);
    if (rc == 0) {
        rc = apply_field(&c, (uint32_t)idx, NULL, st_yaml_root(&y));
    }
    st_yaml_release(&y);
    if (rc != 0) {
        return rc;
    }
    for (uint32_t j = 0; j < NFIELDS; j++) {
        if (fields[j].offset == fields[idx].offset) {
            work.field_line[j] = 0;
        }
    }
    memcpy(p, &work, sizeof(*p));
    return 0;
}

/* ---- cross-field checks ---- */

/* Fails with "ORIGIN:LINE: path: message" (or "path: message" for a default or --set value). */
static int vfail(const struct st_profile *p, char *err, size_t errlen, const char *path,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int vfail(const struct st_profile *p, char *err, size_t errlen, const char *path,
                 const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    int i = st_profile_field_find(path, strlen(path));
    uint32_t line = i >= 0 ? p->field_line[i] : 0;
    if (line > 0 && p->origin[0]) {
        st_errf(err, errlen, "%s:%" PRIu32 ": %s: %s", p->origin, line, path, msg);
    } else {
        st_errf(err, errlen, "%s: %s", path, msg);
    }
    return ST_EPARSE;
}

/* Every field within its descriptor's range, so that a profile filled in by code is checked as
 * strictly as a parsed one (and the checks below never divide by zero). */
static int validate_ranges(const struct st_profile *p, char *err, size_t errlen)
{
    char exp[256];
    for (uint32_t i = 0; i < NFIELDS; i++) {
        const struct st_profile_field *f = &fields[i];
        const void *v = cslot(p, f->offset);
        uint32_t u32, n;
        uint64_t u64;
        double d;
        int k;
        expected(f, exp, sizeof(exp));
        switch (f->type) {
        case ST_PROFILE_U32:
            memcpy(&u32, v, sizeof(u32));
            if (!in_range(f, u32)) {
                return vfail(p, err, errlen, f->path, "%" PRIu32 " is out of range: expected %s",
                             u32, exp);
            }
            break;
        case ST_PROFILE_U64:
            memcpy(&u64, v, sizeof(u64));
            if (!in_range(f, (double)u64)) {
                return vfail(p, err, errlen, f->path, "%" PRIu64 " is out of range: expected %s",
                             u64, exp);
            }
            break;
        case ST_PROFILE_F64:
            memcpy(&d, v, sizeof(d));
            if (!in_range(f, d)) {
                return vfail(p, err, errlen, f->path, "%g is out of range: expected %s", d, exp);
            }
            break;
        case ST_PROFILE_BOOL:
        case ST_PROFILE_ENUM:
            memcpy(&k, v, sizeof(k));
            if (f->type == ST_PROFILE_BOOL ? (k != 0 && k != 1) : !name_of(f->names, k)) {
                return vfail(p, err, errlen, f->path, "%d is not valid: expected %s", k, exp);
            }
            break;
        case ST_PROFILE_STR:
            n = (uint32_t)strnlen(v, f->size);
            if (n == f->size || n < f->min) {
                return vfail(p, err, errlen, f->path, "expected %s", exp);
            }
            break;
        case ST_PROFILE_F64_LIST:
        case ST_PROFILE_U32_LIST:
            memcpy(&n, cslot(p, f->count_offset), sizeof(n));
            if (n > list_capacity(f)) {
                return vfail(p, err, errlen, f->path, "%" PRIu32 " values, more than %" PRIu32, n,
                             list_capacity(f));
            }
            for (uint32_t j = 0; j < n; j++) {
                d = f->type == ST_PROFILE_F64_LIST ? ((const double *)v)[j]
                                                   : ((const uint32_t *)v)[j];
                if (!in_range(f, d) || (f->type == ST_PROFILE_U32_LIST && j > 0 &&
                                        ((const uint32_t *)v)[j] <= ((const uint32_t *)v)[j - 1])) {
                    return vfail(p, err, errlen, f->path,
                                 "value %" PRIu32 " (%g) is out of range or order: expected %s", j,
                                 d, exp);
                }
            }
            break;
        case ST_PROFILE_KV_DTYPE:
            break; /* an alias: its storage is checked under its own name */
        }
    }
    return 0;
}

static int validate_model(const struct st_profile *p, char *err, size_t errlen)
{
    const struct st_profile_model *m = &p->model;
    if (m->attention == ST_ATTN_MHA && m->kv_heads != m->heads) {
        return vfail(p, err, errlen, "model.kv_heads",
                     "%" PRIu32 " with attention mha, which needs kv_heads == heads (%" PRIu32
                     "); use gqa",
                     m->kv_heads, m->heads);
    }
    if (m->attention == ST_ATTN_GQA && m->kv_heads >= m->heads) {
        return vfail(p, err, errlen, "model.kv_heads",
                     "%" PRIu32 " with attention gqa, which needs kv_heads < heads (%" PRIu32
                     "); use mha",
                     m->kv_heads, m->heads);
    }
    if (m->attention == ST_ATTN_GQA && m->heads % m->kv_heads != 0) {
        return vfail(p, err, errlen, "model.kv_heads",
                     "%" PRIu32 " does not divide model.heads (%" PRIu32 ")", m->kv_heads,
                     m->heads);
    }
    if (m->attention == ST_ATTN_MLA && m->kv_lora_rank == 0) {
        return vfail(p, err, errlen, "model.kv_lora_rank", "attention mla needs kv_lora_rank > 0");
    }
    if (m->attention != ST_ATTN_MLA && m->kv_lora_rank != 0) {
        return vfail(p, err, errlen, "model.kv_lora_rank",
                     "%" PRIu32 " is only used with attention mla", m->kv_lora_rank);
    }
    if (m->attention != ST_ATTN_MLA && m->qk_rope_dim != 0) {
        return vfail(p, err, errlen, "model.qk_rope_dim",
                     "%" PRIu32 " is only used with attention mla", m->qk_rope_dim);
    }
    if ((m->indexer_head_dim == 0) != (m->indexer_topk == 0)) {
        return vfail(p, err, errlen, "model.indexer_topk",
                     "%" PRIu32 " with indexer_head_dim %" PRIu32
                     "; a sparse-attention indexer needs both, or neither",
                     m->indexer_topk, m->indexer_head_dim);
    }
    if (m->kv_layers > m->layers) {
        return vfail(p, err, errlen, "model.kv_layers",
                     "%" PRIu32 " is more than model.layers (%" PRIu32 ")", m->kv_layers,
                     m->layers);
    }
    if (m->params_active > m->params_total) {
        return vfail(p, err, errlen, "model.params_active",
                     "%g is more than model.params_total (%g)", m->params_active, m->params_total);
    }
    if (m->params_dense > m->params_active) {
        return vfail(p, err, errlen, "model.params_dense",
                     "%g is more than model.params_active (%g); every token touches the dense part",
                     m->params_dense, m->params_active);
    }
    return 0;
}

static int validate_parallel(const struct st_profile *p, char *err, size_t errlen)
{
    const struct st_profile_model *m = &p->model;
    const struct st_profile_engine *e = &p->engine;
    if (e->tp % e->dp_attention != 0) {
        return vfail(p, err, errlen, "engine.dp_attention",
                     "%" PRIu32 " does not divide engine.tp (%" PRIu32 ")", e->dp_attention, e->tp);
    }
    uint32_t attn_tp = e->tp / e->dp_attention;
    if (m->heads % attn_tp != 0) {
        return vfail(p, err, errlen, "engine.tp",
                     "model.heads (%" PRIu32 ") is not divisible by the attention TP size %" PRIu32
                     " (engine.tp / engine.dp_attention)",
                     m->heads, attn_tp);
    }
    if (m->attention != ST_ATTN_MLA && m->kv_heads % attn_tp != 0 && attn_tp % m->kv_heads != 0) {
        return vfail(p, err, errlen, "engine.tp",
                     "model.kv_heads (%" PRIu32 ") and the attention TP size %" PRIu32
                     " must divide one another (KV heads are split, or replicated when TP > "
                     "kv_heads)",
                     m->kv_heads, attn_tp);
    }
    if (e->pp > m->layers) {
        return vfail(p, err, errlen, "engine.pp",
                     "%" PRIu32 " pipeline stages for model.layers %" PRIu32, e->pp, m->layers);
    }
    if ((uint64_t)e->tp * e->pp > p->hw.gpus) {
        return vfail(p, err, errlen, "engine.tp",
                     "tp %" PRIu32 " x pp %" PRIu32 " needs %" PRIu64
                     " GPUs, hardware.gpus is %" PRIu32,
                     e->tp, e->pp, (uint64_t)e->tp * e->pp, p->hw.gpus);
    }
    return 0;
}

static int validate_engine(const struct st_profile *p, char *err, size_t errlen)
{
    const struct st_profile_model *m = &p->model;
    const struct st_profile_engine *e = &p->engine;
    if ((e->page_size & (e->page_size - 1)) != 0) {
        return vfail(p, err, errlen, "engine.page_size", "%" PRIu32 " is not a power of two",
                     e->page_size);
    }
    if (e->dialect == ST_DIALECT_VLLM && e->max_batched_tokens < e->max_running) {
        return vfail(p, err, errlen, "engine.max_batched_tokens",
                     "%" PRIu32 " is less than engine.max_running (%" PRIu32
                     "); vLLM refuses to start",
                     e->max_batched_tokens, e->max_running);
    }
    if (e->spec_method == ST_SPEC_NONE && e->spec_steps != 0) {
        return vfail(p, err, errlen, "engine.spec_steps",
                     "%" PRIu32 " draft tokens with engine.spec_method none", e->spec_steps);
    }
    if (e->spec_method != ST_SPEC_NONE && e->spec_steps == 0) {
        return vfail(p, err, errlen, "engine.spec_steps",
                     "0 with engine.spec_method %s; give 1 to %d draft tokens",
                     name_of(spec_names, e->spec_method), ST_SPEC_MAX_STEPS);
    }
    if (e->spec_method == ST_SPEC_MTP && m->mtp_layers == 0) {
        return vfail(p, err, errlen, "engine.spec_method",
                     "mtp needs model.mtp_layers > 0 (MTP layers in the checkpoint)");
    }
    if (e->spec_method == ST_SPEC_MTP && e->spec_steps > m->mtp_layers &&
        e->spec_steps % m->mtp_layers != 0) {
        return vfail(p, err, errlen, "engine.spec_steps",
                     "%" PRIu32 " is more than model.mtp_layers (%" PRIu32
                     ") and not a multiple of it (vLLM reuses MTP layers in whole rounds)",
                     e->spec_steps, m->mtp_layers);
    }
    if ((e->spec_method == ST_SPEC_EAGLE || e->spec_method == ST_SPEC_DRAFT) &&
        (m->draft_params <= 0 || m->draft_layers == 0)) {
        return vfail(p, err, errlen, "engine.spec_method",
                     "%s needs model.draft_params > 0 and model.draft_layers > 0",
                     name_of(spec_names, e->spec_method));
    }
    if (e->n_spec_accept < e->spec_steps) {
        return vfail(p, err, errlen, "engine.spec_accept",
                     "%" PRIu32 " acceptance rates for engine.spec_steps %" PRIu32
                     "; give one per draft position",
                     e->n_spec_accept, e->spec_steps);
    }
    return 0;
}

int st_profile_validate(const struct st_profile *p, char *err, size_t errlen)
{
    int rc = validate_ranges(p, err, errlen);
    if (rc == 0) {
        rc = validate_model(p, err, errlen);
    }
    if (rc == 0) {
        rc = validate_parallel(p, err, errlen);
    }
    if (rc == 0) {
        rc = validate_engine(p, err, errlen);
    }
    return rc;
}
