/*
 * What the simulated engine says, in the words of the engine it imitates (vLLM, SGLang,
 * llama.cpp): start-up and out-of-memory log lines, error bodies, health answers, and the end of
 * a model-mode response (finish chunk, usage, llama.cpp timings) and whole non-streaming bodies.
 * The wording and shapes come from shared/reference/serving-apis.md sections 1, 3 and 6 and the
 * llama.cpp wire transcripts. Pure: every function appends to a caller buffer.
 */
#ifndef ST_SIM_DIALECT_H
#define ST_SIM_DIALECT_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "sim/answer.h"
#include "sim/model/memory.h"
#include "sim/model/profile.h"
#include "sim/spec.h"

/* "vllm", "sglang", "llamacpp". */
const char *st_sim_dialect_name(enum st_dialect d);
/* The one of three words that is d's (vLLM's for an unknown d), for what differs by engine. */
const char *st_sim_dialect_pick(enum st_dialect d, const char *vllm, const char *sglang,
                                const char *llamacpp);
/* The owned_by of /v1/models: "vllm", "sglang", "llamacpp". */
const char *st_sim_dialect_owner(enum st_dialect d);

/*
 * Appends the start-up log lines that report the memory plan, one per line, each ending in "\n":
 * vLLM "Available KV cache memory: X GiB", "GPU KV cache size: N tokens" (thousands separators),
 * "Maximum concurrency for M tokens per request: X.XXx"; SGLang "KV Cache is allocated. #tokens:
 * N, KV size: X GB" (MLA) or "..., K size: X GB, V size: Y GB", then "max_total_num_tokens=N, ...";
 * llama.cpp "llama_kv_cache: size = X MiB (N cells, L layers, S/S seqs), K (f16): ..., V ...".
 */
void st_sim_dialect_startup(struct st_buf *out, const struct st_profile *p,
                            const struct st_mem_plan *m);
/* Lines once the socket is bound (llama.cpp: "main: server is listening on http://ADDR ..."). */
void st_sim_dialect_listening(struct st_buf *out, const struct st_profile *p, const char *addr);
/* Lines when start-up ends (SGLang: "The server is fired up and ready to roll!"). */
void st_sim_dialect_ready(struct st_buf *out, const struct st_profile *p);
/*
 * The lines a real engine prints when the plan does not fit (or the startup_oom fault forces it,
 * with m NULL or an empty reason): the plan's reason, which names the engine's exception class,
 * framed by the dialect's lines around it; a default sentence when there is no reason.
 */
void st_sim_dialect_oom(struct st_buf *out, const struct st_profile *p,
                        const struct st_mem_plan *m);
/* The fatal line of a crash fault (why is a short phrase, e.g. "after 3 requests"). */
void st_sim_dialect_crash(struct st_buf *out, const struct st_profile *p, const char *why);

/*
 * An error body for HTTP status code: vLLM {"error":{"message","type","param":null,"code"}},
 * SGLang flat {"object":"error","message","type","param":null,"code"}, llama.cpp
 * {"error":{"code","message","type"}} with its own type names.
 */
void st_sim_dialect_error(struct st_buf *out, enum st_dialect d, int code, const char *message);
/* The 400 of a request over the context: llama.cpp adds type exceed_context_size_error,
 * n_prompt_tokens and n_ctx; the others are st_sim_dialect_error. */
void st_sim_dialect_ctx_error(struct st_buf *out, enum st_dialect d, const char *message,
                              uint64_t n_prompt, uint64_t n_ctx);
/*
 * Media sent to a text-only model (st_sim_prompt_chat's refusal of part, "image_url" or
 * "video_url"): appends the message and returns the status. llama.cpp answers as b4748 does
 * (tests/data/wire/llamacpp-b4748/errors_image.txt), 500 `Failed to parse messages: Unsupported
 * content part type: "PART"; messages = ` and the request's messages (messages[0..len), raw JSON)
 * indented over many lines; the other dialects 400 with reason (st_sim_prompt_chat's sentence).
 */
int st_sim_dialect_media_refusal(struct st_buf *msg, enum st_dialect d, const char *part,
                                 const char *reason, const char *messages, size_t len);

/*
 * /health: sets *code and appends the body. Ready: vLLM and SGLang 200 with an empty body,
 * llama.cpp 200 {"status":"ok"}. Loading: 503, empty for vLLM and SGLang, llama.cpp
 * {"error":{"message":"Loading model","type":"unavailable_error","code":503}}.
 */
void st_sim_dialect_health(struct st_buf *out, enum st_dialect d, int ready, int *code);

/* llama.cpp's timings object (tools/server/server-task.cpp result_timings::to_json). */
struct st_sim_timings {
    uint64_t cache_n;     /* prompt tokens reused from the cache */
    uint64_t prompt_n;    /* prompt tokens computed */
    double prompt_ms;     /* admission -> first token, virtual */
    uint64_t predicted_n; /* output tokens */
    double predicted_ms;  /* first token -> last token, virtual */
    uint64_t draft_n;     /* draft tokens proposed (0: no draft_n keys) */
    uint64_t draft_n_accepted;
    int cached_report; /* enum st_cached_report: which of cache_n and prompt_n are sent */
};

/* How a model-mode response ends. */
struct st_sim_ending {
    int usage_on; /* send usage (a usage chunk, or in the final chunk / body) */
    int done;     /* data: [DONE] */
    const struct st_sim_timings *timings; /* llama.cpp only; may be NULL */
};

/*
 * Appends the SSE events after the last content chunk: SGLang and llama.cpp send a separate finish
 * chunk with an empty delta ("length"), vLLM none (its last content chunk carried it); then the
 * usage chunk when usage_on (llama.cpp /v1/completions: usage always rides on the finish chunk),
 * llama.cpp's timings on the last of these; then [DONE]. r->model is borrowed.
 */
void st_sim_dialect_tail(struct st_buf *out, enum st_dialect d, const struct st_sim_resp *r,
                         const struct st_sim_ending *e);
/* The role-only chat chunk: vLLM and SGLang content "", llama.cpp content null. */
void st_sim_dialect_role(struct st_buf *out, enum st_dialect d, const struct st_sim_resp *r);
/* Appends the whole non-streaming body, its text from a (tokens [0, r->n_tokens)). */
void st_sim_dialect_body(struct st_buf *out, enum st_dialect d, const struct st_sim_resp *r,
                         const struct st_sim_answer *a, const struct st_sim_ending *e);
/* Whether the dialect puts finish_reason on the last content chunk (vLLM) rather than apart. */
int st_sim_dialect_finish_on_content(enum st_dialect d);

#endif
