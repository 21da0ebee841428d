/*
 * Engine start-up log lines that state the KV pool, parsed without I/O: vLLM "GPU KV cache size:
 * 686,320 tokens" (once per DP engine core, newer builds prefixed "(EngineCore_DP0 pid=...)"),
 * SGLang "KV Cache is allocated. #tokens: N, ..." and "max_total_num_tokens=N, ..." (per TP
 * rank; "[DP1 TP0]" style prefixes), llama.cpp "llama_kv_cache: size = X MiB (N cells, L layers,
 * S/T seqs), K (f16): ..., V (f16): ...", the older "llama_kv_cache_unified: ... (N cells, L
 * layers, S seqs)" and b4748's "llama_kv_cache_init: kv_size = N, ..., type_k = 'f16', type_v =
 * 'f16', ..." (one cache that all slots share), with the cache's K and V types where stated.
 * st_logline_scan reads a whole log and returns the pool per rank and in total with the line it
 * came from. Pure and linear in the log's size; lines may end in LF, CRLF or CR.
 */
#ifndef ST_PROTO_LOGLINE_H
#define ST_PROTO_LOGLINE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* Most distinct ranks a scan keeps; more gives ST_ETOOBIG. */
#define ST_LOGLINE_MAX_RANKS 256u
/* Bytes of a KV cache type ("f16", "q8_0") kept, NUL included; a longer one is not read. */
#define ST_LOGLINE_TYPE_MAX 16u
/* Bytes of the quoted line kept in st_logline_pool.line (NUL included). */
#define ST_LOGLINE_LINE_MAX 256u

enum st_logline_kind {
    ST_LOGLINE_VLLM_KV = 1,  /* vLLM "GPU KV cache size: N tokens" */
    ST_LOGLINE_SGLANG_ALLOC, /* SGLang "KV Cache is allocated. #tokens: N" */
    ST_LOGLINE_SGLANG_MAX,   /* SGLang "max_total_num_tokens=N" */
    ST_LOGLINE_LLAMACPP_KV,  /* llama.cpp "llama_kv_cache: size = ... (N cells, ...)",
                              * b4748 "llama_kv_cache_init: kv_size = N, ..." */
};

/* One pool line. */
struct st_logline_hit {
    enum st_logline_kind kind;
    uint64_t tokens;  /* vLLM, SGLang: the rank's pool; llama.cpp: cells per KV stream */
    int32_t dp;       /* DP rank from the line's prefix ("EngineCore_DP3", "DP3 "), -1 if none */
    int32_t tp;       /* SGLang TP rank from "TP2", -1 if none */
    uint32_t seqs;    /* llama.cpp: sequences (slots); 0 elsewhere and in b4748's line */
    uint32_t streams; /* llama.cpp: KV streams (1 unified, = seqs split; old forms: 1) */
    char type_k[ST_LOGLINE_TYPE_MAX]; /* llama.cpp: the K cache's type ("f16"); "" unstated */
    char type_v[ST_LOGLINE_TYPE_MAX]; /* and the V cache's */
};

/*
 * Parses one line (without its end) into hit. Returns 1 for a pool line, 0 otherwise (hit then
 * unspecified). Numbers must fit in 63 bits; thousands separators only in vLLM's form.
 */
int st_logline_parse(const char *line, size_t len, struct st_logline_hit *hit);

enum st_logline_engine {
    ST_LOGLINE_ENGINE_VLLM = 1,
    ST_LOGLINE_ENGINE_SGLANG,
    ST_LOGLINE_ENGINE_LLAMACPP,
};

struct st_logline_pool {
    enum st_logline_engine engine;
    uint64_t total_tokens; /* the deployment: the sum over ranks */
    uint32_t ranks;        /* vLLM, SGLang: DP ranks seen; llama.cpp: KV streams */
    uint64_t rank_tokens[ST_LOGLINE_MAX_RANKS]; /* per rank, in order of first appearance */
    uint32_t lines;                             /* pool lines of that engine seen in the log */
    uint64_t line_no;                           /* 1-based number of the line quoted */
    char type_k[ST_LOGLINE_TYPE_MAX]; /* llama.cpp: K and V cache types of the line quoted; "" */
    char type_v[ST_LOGLINE_TYPE_MAX]; /* where it states none (vLLM, SGLang) */
    char line[ST_LOGLINE_LINE_MAX];   /* that line, cut to fit, bytes outside printable ASCII
                                       * as '?' */
};

/*
 * Scans log[0..len) for pool lines. The engine is the one of the first pool line; lines of other
 * engines are ignored. Rules (docs/internals/target.md): vLLM sums one line per DP rank (a rank
 * seen again, e.g. after a restart appended to the same file, replaces its earlier figure; lines
 * without a DP prefix each count as a rank); SGLang keeps one figure per DP rank, preferring
 * max_total_num_tokens over the allocation line of any TP rank; llama.cpp takes the first
 * llama_kv_cache line (the target model's; a draft model's and an SWA cache's come later), total
 * = cells x streams. The quoted line is the last one that set a figure (llama.cpp: the first).
 * Returns 0; ST_ENOTFOUND when the log has no pool line; ST_ETOOBIG for more than
 * ST_LOGLINE_MAX_RANKS ranks or a total over UINT64_MAX.
 */
int st_logline_scan(const char *log, size_t len, struct st_logline_pool *out) ST_WUR;

#endif
