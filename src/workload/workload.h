/*
 * Workloads: deterministic, seeded, token-exact request sets. A workload is built once before any
 * load (choosing windows of a corpus, fitting each prompt to its token length with a token counter
 * that speaks for the target) and is immutable afterwards, so st_workload_source can serve every
 * worker thread concurrently as the load engine's st_req_source_fn.
 *
 * Kinds (docs/workloads.md):
 *  fixed         input and output lengths (constant, or uniform in [min, max] per request)
 *  shared-prefix groups of requests sharing a prefix of prefix_frac * input_len tokens, with unique
 *                suffixes; group popularity uniform or Zipf(s)
 *  distinct      every request its own document (capacity probe)
 *  long          requests near a context limit, with needles at known depths
 *  multi-turn    sessions of turns; each turn resends the growing history (chat only)
 *  mixed         a weighted mix of the above kinds
 *  dataset       ShareGPT-style JSON conversations (first human turn -> prompt, first gpt turn's
 *                length -> output, unless overridden)
 *  trace         Mooncake trace JSONL (timestamp ms, input_length, output_length, hash_ids):
 *                prompts built so that equal hash_ids share equal text blocks, sent at the
 *                timestamps
 *
 * Every item records its corpus window(s) and the requested and counted prompt tokens in its
 * receipt tag. A window map (st_workload_windows_json / _parse) makes another run, or another arm,
 * use byte-identical prompts. Pure: token counting and file reading are the caller's callbacks.
 */
#ifndef ST_WORKLOAD_WORKLOAD_H
#define ST_WORKLOAD_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/status.h"
#include "workload/corpus.h"
#include "workload/item.h"

enum st_wl_kind {
    ST_WL_FIXED = 1,
    ST_WL_SHARED_PREFIX,
    ST_WL_DISTINCT,
    ST_WL_LONG,
    ST_WL_MULTI_TURN,
    ST_WL_MIXED,
    ST_WL_DATASET,
    ST_WL_TRACE,
};

/*
 * Counts the tokens the target sees for a request made of text: for chat the text is the user
 * message and the count includes the chat template (the caller measures the overhead or asks the
 * server's chat tokenizer). Returns 0 with *tokens set, or a negative code (message in err).
 */
typedef int (*st_tok_counter_fn)(void *ctx, const char *text, size_t len, uint64_t *tokens,
                                 char *err, size_t errlen);

#define ST_WL_MAX_MIX 8

struct st_wl_params {
    enum st_wl_kind kind;
    int chat; /* chat (messages) or completions (prompt) */
    uint64_t seed;
    uint64_t requests; /* items 0..requests-1; the load may issue fewer */
    /* Synthetic kinds: > 0 and below requests: only items 0..fit_items-1 are fitted (and counted),
     * with the very bytes the build of all requests items gives them (the corpus, layout and
     * draws are still those of requests); the source repeats them cyclically. 0: all. */
    uint64_t fit_items;
    uint64_t input_len; /* tokens; with input_len_max > input_len: uniform in between */
    uint64_t input_len_max;
    uint64_t output_len;
    uint64_t output_len_max;
    int ignore_eos;
    double prefix_frac;   /* shared-prefix: [0, 1) */
    uint32_t groups;      /* shared-prefix: number of prefixes (default 1) */
    double zipf_s;        /* shared-prefix: 0 = uniform popularity */
    uint32_t turns;       /* multi-turn: turns per session */
    uint32_t needles;     /* long: needles per prompt (depths evenly spread) */
    double len_tolerance; /* a prompt further than this share from its target fails the build */
    /* mixed: kinds and weights (fixed, shared-prefix, distinct, long, multi-turn). */
    enum st_wl_kind mix_kind[ST_WL_MAX_MIX];
    double mix_weight[ST_WL_MAX_MIX];
    uint32_t n_mix;
    /* dataset / trace: the file's bytes and its name for messages (the caller reads the file). */
    const char *data;
    size_t data_len;
    const char *data_name;
    const char *windows_name; /* the window map's name for messages (NULL: "windows") */
    uint32_t block_tokens;    /* trace: tokens per hash_ids block (Mooncake: 512) */
    uint64_t context_tokens;  /* > 0: input + output of every item must fit (else ST_EUSAGE) */
};

/*
 * Defaults: fixed, chat, seed 1, requests 0 (trace / dataset: every entry; other kinds need
 * requests > 0), lengths 0, ignore_eos 1, prefix_frac 0, groups 1, zipf_s 0, turns 1, needles 0,
 * len_tolerance 0.01, block_tokens 512, context_tokens 0.
 */
void st_wl_params_defaults(struct st_wl_params *p);

/* "fixed", "shared-prefix", "distinct", "long", "multi-turn", "mixed", "dataset", "trace"; "?"
 * for anything else. */
const char *st_wl_kind_name(enum st_wl_kind k);
/* The kind named s (the names above). Returns 0, or ST_EUSAGE for an unknown name. */
int st_wl_kind_parse(const char *s, enum st_wl_kind *out) ST_WUR;

/* The items a build of p fits: fit_items when it is set and below requests (synthetic kinds),
 * else requests. */
uint64_t st_wl_fitted_items(const struct st_wl_params *p);

/*
 * Bytes of corpus the build of p would use, with a margin (for sizing the built-in corpus): an
 * estimate at 4.5 bytes a token for the windows the kind lays out (trace: its distinct hash_ids
 * blocks; dataset: 0). Bad parameters or a bad trace give 0; the build reports them.
 */
uint64_t st_wl_corpus_bytes_hint(const struct st_wl_params *p);

struct st_workload;

/*
 * Builds the workload. count speaks for the target's tokenizer. windows (may be NULL) is a window
 * map from an earlier build (st_workload_windows_json): when given, every item uses exactly those
 * windows (and the build checks the corpus hash); otherwise windows are chosen from the seed.
 * Returns 0; ST_EUSAGE for bad parameters (prefix_frac outside [0, 1), a corpus too small for the
 * windows asked for, lengths over context_tokens, a window map for another corpus, kind or number
 * of items...), ST_EPARSE for a bad dataset/trace/window map (NAME:LINE in err), -ERANGE when a
 * prompt cannot be fitted within len_tolerance of its length (err names the item, the requested
 * and the counted tokens), or the counter's error. err names the input and what was expected.
 * corpus is borrowed for the call only (the workload keeps a copy of the bytes its windows use); it
 * is not used (and may be NULL) for dataset. Not thread-safe with respect to count: it is called
 * from the calling thread only, a few times per prompt (docs/workloads.md, "Token fitting").
 */
int st_workload_build(struct st_workload **out, const struct st_wl_params *p,
                      const struct st_corpus *corpus, const char *windows, size_t windows_len,
                      st_tok_counter_fn count, void *count_ctx, char *err, size_t errlen) ST_WUR;
void st_workload_free(struct st_workload *wl);

/* The engine's st_req_source_fn: ctx is the struct st_workload. Items repeat cyclically past
 * requests. */
int st_workload_source(const void *ctx, uint64_t id, struct st_req_item *item,
                       struct st_buf *scratch);

/* Shared prefixes (shared-prefix, trace): how many, and a warm-up item that prefills group g's
 * prefix with a short output (max_tokens 1). */
uint32_t st_workload_prefix_groups(const struct st_workload *wl);
int st_workload_warm_item(const struct st_workload *wl, uint32_t g, struct st_req_item *item,
                          struct st_buf *scratch) ST_WUR;

/* Number of distinct items (requests, fit_items when it is below requests, or every entry of a
 * trace / dataset when requests is 0); the source repeats them past this. */
uint64_t st_workload_items(const struct st_workload *wl);
/* Counter calls the build made (calibration and fitting). */
uint64_t st_workload_counter_calls(const struct st_workload *wl);

/*
 * Fixed-length check: 1 when item id asked for exactly max_tokens output tokens (ignore_eos with
 * min_tokens) and completion_tokens, from the server's usage, differs; else 0.
 */
int st_workload_output_mismatch(const struct st_workload *wl, uint64_t id,
                                uint64_t completion_tokens);

/* Requested and counted prompt tokens of item id (counted at build time). */
void st_workload_tokens(const struct st_workload *wl, uint64_t id, uint64_t *requested,
                        uint64_t *counted);
/* Largest |counted - requested| / requested over all items. */
double st_workload_max_len_error(const struct st_workload *wl);

/* The window map (JSON): corpus id and hash, and every item's windows. */
void st_workload_windows_json(const struct st_workload *wl, struct st_buf *out);

/*
 * The corpus a window map was made for, read before any corpus is loaded: its id (NUL-terminated
 * into id[idlen]), length in bytes and FNV-1a hash. A built-in corpus is remade from these
 * ("builtin:<seed>" and the length), so that a map from one seed serves a build with another.
 * name prefixes messages. Returns 0, or ST_EPARSE / ST_ETOOBIG for a bad map (NAME:LINE in err).
 */
int st_workload_windows_corpus(const char *windows, size_t len, const char *name, char *id,
                               size_t idlen, uint64_t *bytes, uint64_t *hash, char *err,
                               size_t errlen) ST_WUR;

#endif
