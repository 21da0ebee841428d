/*
 * Builder for OpenAI-compatible request bodies (/v1/chat/completions and /v1/completions), with
 * the benchmarking fields of serving-apis.md section 2 and an --extra-body object merged in (its
 * keys win over ours). Pure.
 */
#ifndef ST_PROTO_OAIREQ_H
#define ST_PROTO_OAIREQ_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/status.h"

enum st_api {
    ST_API_CHAT = 1,
    ST_API_COMPLETIONS,
};

struct st_oaireq {
    enum st_api api;
    const char *model;  /* borrowed; NULL omits the field */
    const char *prompt; /* borrowed; UTF-8 text: the user message (chat) or the prompt */
    size_t prompt_len;
    const char *messages_json; /* borrowed; chat only: a JSON array written as "messages" verbatim
                                * (the caller guarantees it is valid); NULL: one user message */
    size_t messages_len;
    int stream;
    int include_usage;  /* stream_options.include_usage (only when stream) */
    int64_t max_tokens; /* < 0 omits; chat also gets max_completion_tokens */
    int ignore_eos;     /* sends ignore_eos: true */
    int64_t min_tokens; /* < 0 omits */
    int64_t id_slot;    /* llama.cpp: run on this slot (its id_slot field); < 0 omits */
    int has_temperature;
    double temperature;
    int has_seed;
    int64_t seed;
    const char *extra_body; /* borrowed JSON object text, or NULL */
    size_t extra_body_len;
};

/* Fills r with defaults: chat, stream, include_usage, nothing else set. */
void st_oaireq_defaults(struct st_oaireq *r);

/*
 * Appends the JSON body to out. Returns 0, or ST_EPARSE when extra_body is not a JSON object
 * (a message naming what is wrong goes to err when non-NULL).
 */
int st_oaireq_build(const struct st_oaireq *r, struct st_buf *out, char *err, size_t errlen) ST_WUR;

/* The path for api: "/v1/chat/completions" or "/v1/completions". */
const char *st_oaireq_path(enum st_api api);

/* A qualification check's chat request: deterministic (temperature 0, a seed), not streamed
 * unless fixed-length (ignore_eos: streamed with usage in the last chunk). */
struct st_oaireq_check {
    const char *model;         /* borrowed; NULL: "" */
    const char *messages_json; /* borrowed JSON array, written verbatim (the caller checked it) */
    size_t messages_len;
    uint32_t max_tokens;
    uint64_t seed;
    int ignore_eos;
    const char *response_format_json; /* borrowed JSON object written verbatim; NULL: none */
    size_t response_format_len;
    const char *reasoning_effort; /* borrowed; NULL: not sent */
};

/* Appends c's body: {"model","messages","max_tokens","temperature":0,"seed", then
 * "ignore_eos":true,"stream":true,"stream_options" or "stream":false, then "response_format"
 * and "reasoning_effort" when set}. */
void st_oaireq_check_build(const struct st_oaireq_check *c, struct st_buf *out);

/* The bodies of the servers' own tokenize and template routes (docs/internals/target.md). */
enum st_oaireq_tok {
    ST_OAIREQ_TOK_PROMPT = 1, /* {"model", "prompt"} (vLLM, SGLang) */
    ST_OAIREQ_TOK_MESSAGES,   /* {"model", "messages", "add_generation_prompt": true} */
    ST_OAIREQ_TOK_CONTENT,    /* {"content", "add_special": true} (llama.cpp) */
    ST_OAIREQ_TOK_INPUTS,     /* {"inputs"} (TGI) */
    ST_OAIREQ_TOK_CHAT,       /* {"model", "messages"} (llama.cpp /apply-template, TGI
                                 /chat_tokenize) */
};

/* Appends the body of shape s for text[0..len) as one user message or prompt; model (NULL or
 * "": left out) goes into the shapes that name one. */
void st_oaireq_tokenize(enum st_oaireq_tok s, const char *model, const char *text, size_t len,
                        struct st_buf *out);

#endif
