/*
 * A running inference server seen from outside: blocking probes with short timeouts through
 * the project's HTTP client (engine/http.h). st_target_open learns the model and what the server is
 * (vLLM, SGLang, llama.cpp, TGI, trtllm-serve, or our own `servetune sim` and its dialect) and
 * which of its introspection routes exist; the other calls tokenize, count prompt tokens, flush the
 * prefix cache, read the KV pool size, check health and scrape /metrics, each in that server's own
 * shape (docs/internals/target.md has the probe order, the flush outcome table and the pool
 * sources). Not the load engine: one request at a time on the calling thread, and a struct
 * st_target is used by one thread at a time. The API key is sent only in the Authorization
 * header and never appears in any message. Nothing here prints or exits; no answer, however
 * malformed, crashes it.
 */
#ifndef ST_TARGET_SERVER_H
#define ST_TARGET_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "proto/prom.h"

enum st_target_kind {
    ST_TARGET_GENERIC = 1, /* OpenAI-compatible, make unknown (also the fixed-timing sim) */
    ST_TARGET_VLLM,
    ST_TARGET_SGLANG,
    ST_TARGET_LLAMACPP,
    ST_TARGET_TGI,
    ST_TARGET_TRTLLM,
};

/* "generic", "vllm", "sglang", "llamacpp", "tgi", "trtllm"; never NULL. */
const char *st_target_kind_name(enum st_target_kind k);

/* Routes st_target_open found answering (bits of st_target.endpoints): the info routes with the
 * field that marks their engine (max_total_num_tokens, total_slots, model_id), the tokenize
 * routes in the kind's shape. Flush routes are not probed (a probe would flush);
 * st_target_flush reports on them. */
#define ST_TARGET_EP_HEALTH (1u << 0)          /* GET /health answered 200 */
#define ST_TARGET_EP_METRICS (1u << 1)         /* GET /metrics: Prometheus text */
#define ST_TARGET_EP_METRICS_JSON (1u << 2)    /* GET /metrics: JSON (trtllm-serve) */
#define ST_TARGET_EP_TOKENIZE (1u << 3)        /* POST /tokenize */
#define ST_TARGET_EP_V1_TOKENIZE (1u << 4)     /* POST /v1/tokenize (SGLang) */
#define ST_TARGET_EP_APPLY_TEMPLATE (1u << 5)  /* POST /apply-template (llama.cpp) */
#define ST_TARGET_EP_CHAT_TOKENIZE (1u << 6)   /* POST /chat_tokenize (TGI) */
#define ST_TARGET_EP_GET_SERVER_INFO (1u << 7) /* GET /get_server_info (SGLang) */
#define ST_TARGET_EP_SERVER_INFO (1u << 8)     /* GET /server_info (newer SGLang) */
#define ST_TARGET_EP_PROPS (1u << 9)           /* GET /props (llama.cpp) */
#define ST_TARGET_EP_INFO (1u << 10)           /* GET /info (TGI) */

struct st_http_client;

struct st_target_cfg {
    const char *base_url;        /* scheme://host[:port][/prefix] as st_url_base gives it */
    const char *api_key;         /* secret; NULL or "" = none */
    const char *model;           /* NULL or "": the first id of GET /v1/models */
    uint64_t timeout_ms;         /* per request; 0 = 5000 */
    uint64_t connect_timeout_ms; /* 0 = 2000 */
    int insecure;                /* skip TLS certificate checks */
};

struct st_target {
    /* Set by st_target_init (copies of the cfg strings). */
    char *base_url; /* owned */
    char *api_key;  /* owned secret, NULL when none; wiped on release */
    uint64_t timeout_ms;
    uint64_t connect_timeout_ms;
    int insecure;
    struct st_http_client *http; /* owned HTTP handle, made on first use and reused (keep-alive) */

    /* Filled by st_target_open. */
    char model[256]; /* cfg->model, else the first id of /v1/models; "" if none */
    enum st_target_kind kind;
    int is_sim;             /* answers carry X-Sim-Time-Scale: our `servetune sim` */
    int sim_model_mode;     /* the sim models an engine (--profile); kind is its dialect */
    double time_scale;      /* X-Sim-Time-Scale (virtual s per real s); 1 for real servers */
    uint32_t endpoints;     /* ST_TARGET_EP_* */
    char server[64];        /* the Server header of GET /v1/models, "" if none */
    char owned_by[64];      /* data[0].owned_by of GET /v1/models, "" if none */
    char evidence[256];     /* how kind was decided, e.g. "owned_by=vllm; /metrics vllm:" */
    uint64_t max_model_len; /* /v1/models data[0].max_model_len (vLLM, SGLang); 0 unknown */
    uint32_t total_slots;   /* llama.cpp /props total_slots; 0 unknown */
    uint32_t max_running;   /* SGLang /server_info: requests run at once, all DP ranks (facts
                             * max_running); 0 unknown */
    int max_running_summed; /* from internal_states (1) or max_running_requests x ranks (0) */
    uint64_t slot_n_ctx;    /* llama.cpp /props default_generation_settings.n_ctx; 0 unknown */
    uint32_t build;         /* llama.cpp /props build_info "bN-HASH": N; 0 when absent */
};

/* Copies cfg into t (no I/O). cfg->base_url must not be NULL. Release with st_target_release. */
void st_target_init(struct st_target *t, const struct st_target_cfg *cfg);
/* Frees what t owns (the key's bytes are zeroed first). Safe on a zeroed struct. */
void st_target_release(struct st_target *t);

/*
 * GET /v1/models (must answer 200 with a JSON model list), then identifies the server from its
 * headers and from probes of /metrics, /get_server_info, /server_info, /props, /info and the
 * tokenize routes (docs/internals/target.md gives the order and the rules). Returns 0;
 * ST_ESERVER when /v1/models is not a model list (message says what came back); ST_ETIMEOUT or
 * a negated errno (ECONNREFUSED, EIO) when it cannot be reached. Probes after /v1/models never
 * fail the open: a route that does not answer is simply absent from endpoints.
 */
int st_target_open(struct st_target *t, char *err, size_t errlen) ST_WUR;

enum st_target_health {
    ST_TARGET_UP = 1,  /* GET /health answered 200 */
    ST_TARGET_LOADING, /* 503 (llama.cpp "Loading model", SGLang warm-up, the sim's start-up;
                        * vLLM also answers 503 when its engine died) */
    ST_TARGET_DOWN,    /* refused, reset, timed out, or any other status */
};

/*
 * One GET /health (a server with no /health route: GET /v1/models instead) with timeout_ms
 * (0: the target's). Works after st_target_init alone, so a caller can poll a server that is
 * still starting. why (may be NULL) gets one line: the status and body start, or the error.
 */
enum st_target_health st_target_health(struct st_target *t, uint64_t timeout_ms, char *why,
                                       size_t whylen);

/*
 * Prompt tokens of text as the server's own tokenize route counts them. chat == 0: the text
 * as a completions prompt (special tokens as the server adds them). chat != 0: the text as the
 * one user message of a chat request, chat template and generation prompt included. Routes
 * and shapes per kind: vLLM POST /tokenize {model, prompt} or {model, messages} -> count;
 * SGLang POST /v1/tokenize (or /tokenize) {model, prompt} -> count or tokens (completions
 * only: SGLang has no chat form); llama.cpp POST /apply-template then POST /tokenize
 * {content} -> tokens; TGI POST /tokenize {inputs} or /chat_tokenize; the sim: its dialect's
 * route, with the {messages} form for chat. Returns 0 with *tokens; ST_ENOTFOUND when the
 * server has no such route (or none for chat); ST_ESERVER for an error status; ST_EPARSE for
 * an answer without a count; ST_ETIMEOUT or a negated errno for transport failures.
 */
int st_target_tokenize(struct st_target *t, const char *text, size_t len, int chat,
                       uint64_t *tokens, char *err, size_t errlen) ST_WUR;

/*
 * The calibration fallback: sends text as a non-streaming completion (chat == 0: POST
 * /v1/completions {model, prompt}; else POST /v1/chat/completions {model, messages}) with
 * max_tokens 1 and reads usage.prompt_tokens. Costs one prefill on the server. Returns 0 with
 * *tokens; ST_ESERVER for an error status; ST_EPARSE when the answer has no usage; ST_ETIMEOUT
 * or a negated errno for transport failures.
 */
int st_target_prompt_tokens(struct st_target *t, const char *text, size_t len, int chat,
                            uint64_t *tokens, char *err, size_t errlen) ST_WUR;

/* Context of st_target_count_fn. */
struct st_target_counter {
    struct st_target *t;     /* borrowed; opened; outlives the counter */
    int chat;                /* count as a chat user message (template included) */
    uint64_t endpoint_calls; /* counts answered by the tokenize route */
    uint64_t fallback_calls; /* counts answered by st_target_prompt_tokens */
};

/*
 * An st_tok_counter_fn (workload/workload.h) with ctx a struct st_target_counter: uses
 * st_target_tokenize when the server has a route for this kind of text, else
 * st_target_prompt_tokens. Caches no counts. Returns what those return.
 */
int st_target_count_fn(void *ctx, const char *text, size_t len, uint64_t *tokens, char *err,
                       size_t errlen);

enum st_target_flush_outcome {
    ST_TARGET_FLUSHED = 1,       /* the server accepted the flush; the caller verifies it later
                                  * (a cold request, or prefix-hit counters) */
    ST_TARGET_FLUSH_UNSUPPORTED, /* no flush route as the server runs; reason says what it needs */
    ST_TARGET_FLUSH_BUSY,        /* refused while requests ran, until timeout_ms had passed */
    ST_TARGET_FLUSH_ERROR,       /* transport failure or an unexpected answer */
};

/* "flushed", "unsupported", "busy", "error"; never NULL. */
const char *st_target_flush_name(enum st_target_flush_outcome o);

struct st_target_flush {
    enum st_target_flush_outcome outcome;
    long status;       /* the last HTTP status, 0 when none came */
    uint32_t attempts; /* requests sent */
    char route[64];    /* e.g. "POST /flush_cache", "" when none was tried */
    char reason[384];  /* one line: what happened and, when unsupported, what would enable it */
};

/*
 * Empties the server's prefix cache, trying for at most timeout_ms (0: 10 s). vLLM: POST
 * /reset_prefix_cache (404: needs VLLM_SERVER_DEV_MODE=1). SGLang: POST /flush_cache?timeout=
 * (the remaining time, in the sim's virtual seconds for the sim), 400 while requests run:
 * retried with backoff until timeout_ms, then BUSY. llama.cpp: POST /slots/{id}?action=erase for
 * every id 0..total_slots-1 (501: needs --slot-save-path). TGI, trtllm-serve and unknown servers:
 * UNSUPPORTED. The fixed-timing sim keeps no cache: FLUSHED at once. Fills out and returns its
 * outcome.
 */
enum st_target_flush_outcome st_target_flush(struct st_target *t, uint64_t timeout_ms,
                                             struct st_target_flush *out);

struct st_target_pool {
    uint64_t total_tokens; /* the deployment's KV pool in tokens: the sum over ranks */
    uint64_t rank_tokens;  /* one rank's pool (llama.cpp: one KV stream's cells) */
    uint32_t ranks;        /* DP ranks (llama.cpp: KV streams); 1 when the source cannot tell */
    int exact;             /* 1: the server states the figure; 0: derived under the assumption
                            * that source states */
    char source[320];      /* route and field, or "log line N: <the line>" */
    char type_k[16];       /* llama.cpp's log line: the K and V cache types ("f16", "q8_0"); */
    char type_v[16];       /* "" where no source states them */
};

/*
 * The KV pool size. When log (a start-up log's bytes, read by the caller; may be NULL) holds an
 * engine's pool line (proto/logline.h), that wins: it is the engine's own statement. Otherwise
 * per kind: SGLang GET /get_server_info (or /server_info) max_total_num_tokens (and
 * internal_states per DP rank); vLLM the vllm:cache_config_info labels num_gpu_blocks x
 * block_size, summed over engines; llama.cpp GET /props n_ctx x total_slots (not exact: with a
 * unified KV cache the slots share n_ctx cells); TGI the gauge tgi_batch_max_total_tokens.
 * Returns 0; ST_ENOTFOUND when no source gives it (err says what was tried).
 */
int st_target_pool(struct st_target *t, const char *log, size_t log_len, struct st_target_pool *out,
                   char *err, size_t errlen) ST_WUR;

/*
 * GET /metrics, parsed into out (st_prom_init'ed by the caller; replaced). Returns 0;
 * ST_ENOTFOUND when the server has no Prometheus /metrics (404, 501 without --metrics, JSON
 * from trtllm-serve); ST_EPARSE (line in err) or ST_ETOOBIG from the parser; ST_ESERVER for
 * another status; ST_ETIMEOUT or a negated errno for transport failures.
 */
int st_target_metrics(struct st_target *t, struct st_prom *out, char *err, size_t errlen) ST_WUR;

/* ---- answers (pure): the parsing behind st_target_open, st_target_tokenize, st_target_pool ----
 */

enum st_target_answer {
    ST_TARGET_ANSWER_MODELS = 1,  /* GET /v1/models: {"data": [{id, owned_by, max_model_len}]} */
    ST_TARGET_ANSWER_SERVER_INFO, /* GET /get_server_info or /server_info (SGLang) */
    ST_TARGET_ANSWER_PROPS,       /* GET /props (llama.cpp) */
    ST_TARGET_ANSWER_INFO,        /* GET /info (TGI) */
    ST_TARGET_ANSWER_TOKENIZE,    /* POST /tokenize, /v1/tokenize or /chat_tokenize */
};

/* What an answer says; a field its kind does not carry stays 0 or "". */
struct st_target_facts {
    char model[256];        /* MODELS: data[0].id, cut to fit; "" when none */
    char owned_by[64];      /* MODELS: data[0].owned_by, cut to fit; "" when none */
    uint64_t max_model_len; /* MODELS: data[0].max_model_len; 0 unknown */
    uint64_t rank_tokens;   /* SERVER_INFO: max_total_num_tokens (one DP rank's pool) */
    uint32_t ranks;         /* SERVER_INFO: entries of internal_states, else dp_size (1..4096),
                             * else 1 */
    uint64_t total_tokens;  /* SERVER_INFO: internal_states[].memory_usage.token_capacity summed
                             * when every rank has one (summed = 1), else rank_tokens x ranks
                             * (unsigned, wraps past 2^64) */
    int summed;
    uint32_t max_running; /* SERVER_INFO: internal_states[].effective_max_running_requests_per_dp
                           * summed when every rank has it (running_summed = 1), else
                           * max_running_requests x ranks when an integer 1..2^32-1; 0 unknown
                           * (SGLang leaves max_running_requests null unless it is set) */
    int running_summed;
    uint32_t total_slots; /* PROPS: total_slots */
    uint64_t slot_n_ctx;  /* PROPS: default_generation_settings.n_ctx; 0 unknown */
    uint32_t build;       /* PROPS: N of build_info "bN-HASH"; 0 when absent or not that form */
    uint64_t tokens;      /* TOKENIZE: count, else the length of tokens, of tokenize_response
                           * or of the answer itself when it is a list (TGI) */
};

/* llama-server flags that hints name, and whether a build has them. */
enum st_target_llamacpp_flag {
    ST_TARGET_LLAMACPP_KVU = 1,   /* -kvu, --kv-unified: one KV cache for all slots, or one each */
    ST_TARGET_LLAMACPP_CACHE_RAM, /* --cache-ram: the host-RAM prompt cache's size */
};

/*
 * Pure: whether llama.cpp build number build (st_target.build) has flag: 0 when that build is
 * known to lack it (builds up to b4748, whose --help is tests/data/wire/llamacpp-b4748/help.txt,
 * have neither), -1 when unknown (0 or 1: no numbered build, as v0.5.0's "b1-de3ff81"; a newer
 * build: no first build with it is recorded here). A hint names a flag plainly only for 1, which
 * no build gives today; for -1 it names it as "where --help lists it"; for 0 not at all.
 */
int st_target_llamacpp_has(uint32_t build, enum st_target_llamacpp_flag flag);

/*
 * Pure: what the answer body[0..len) of the given kind says, into *out (zeroed first). Returns
 * 0 when body is an answer of that kind: a JSON object (TOKENIZE: or a list) with what marks it
 * (MODELS: a data list; SERVER_INFO: max_total_num_tokens a non-negative integer; PROPS:
 * total_slots an integer 0..2^32-1; INFO: model_id a string; TOKENIZE: a count as above);
 * otherwise ST_EPARSE. body may be NULL when len is 0. Any thread.
 */
int st_target_parse_answer(enum st_target_answer kind, const char *body, size_t len,
                           struct st_target_facts *out) ST_WUR;

/* Which st_target_counters fields a scrape had (bits of have). */
#define ST_TARGET_HAVE_PREFIX (1u << 0)      /* prefix_hit_tokens, prefix_query_tokens */
#define ST_TARGET_HAVE_TOKENS (1u << 1)      /* prompt_tokens, generation_tokens */
#define ST_TARGET_HAVE_SPEC (1u << 2)        /* spec_accepted_tokens, spec_draft_tokens */
#define ST_TARGET_HAVE_SPEC_DRAFTS (1u << 3) /* spec_drafts */
#define ST_TARGET_HAVE_WAITING (1u << 4)     /* waiting */
#define ST_TARGET_HAVE_RUNNING (1u << 5)     /* running */
#define ST_TARGET_HAVE_ACCEPT_LEN (1u << 6)  /* spec_accept_length (SGLang's gauge) */

/*
 * The series that matter, read from one scrape whatever the dialect (names per dialect in
 * docs/internals/target.md); each sums every sample of its name (all engines, models, ranks).
 * Counters are cumulative since the server started.
 */
struct st_target_counters {
    uint32_t have;
    double prefix_hit_tokens;   /* prompt tokens found in the prefix cache */
    double prefix_query_tokens; /* prompt tokens looked up (llama.cpp: computed + cached) */
    double prompt_tokens;       /* prompt tokens (vLLM, SGLang: all; llama.cpp: computed) */
    double generation_tokens;
    double spec_accepted_tokens; /* draft tokens accepted */
    double spec_draft_tokens;    /* draft tokens proposed */
    double spec_drafts;          /* verification steps */
    double waiting;              /* gauge: queued requests */
    double running;              /* gauge: running requests */
    double spec_accept_length;   /* SGLang gauge: mean tokens per verify step */
};

/* Pure: reads the series of m into out (zeroed first). */
void st_target_counters_read(const struct st_prom *m, struct st_target_counters *out);

/* Between two scrapes: counter differences and the later gauges. */
struct st_target_delta {
    uint32_t have; /* bits present in both scrapes (gauges and accept length: in the later) */
    int reset;     /* a counter went backwards (restart, or SGLang's flush): deltas unreliable */
    double prefix_hit_tokens;
    double prefix_query_tokens;
    double prefix_hit_rate; /* hits / queries; NaN when no queries */
    double prompt_tokens;
    double generation_tokens;
    double spec_accepted_tokens;
    double spec_draft_tokens;
    double spec_drafts;
    double spec_accept_rate;   /* accepted / drafted; NaN when none drafted */
    double spec_accept_length; /* 1 + accepted / drafts (vLLM's mean acceptance length); SGLang:
                                * its gauge; NaN when unknown */
    double waiting;
    double running;
};

/* Pure: after - before. */
void st_target_delta(const struct st_target_counters *before,
                     const struct st_target_counters *after, struct st_target_delta *out);

#endif
