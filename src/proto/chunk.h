/*
 * Decoder for the JSON payloads of OpenAI-compatible responses: streaming chunks of
 * /v1/chat/completions and /v1/completions, whole non-streaming responses, and error bodies, in
 * the shapes vLLM, SGLang, llama.cpp, TGI and trtllm-serve send (../shared/reference/
 * serving-apis.md). Only choice index 0 is read. Pure: no I/O, no clock.
 *
 * Content is the text of delta.content, delta.reasoning, delta.reasoning_content (chat), text
 * (completions) or message.content / message.reasoning_content (non-streaming chat). A chunk whose
 * content is "" or null (a role-only chunk, llama.cpp's content:null) has has_content == 0.
 * reasoning and reasoning_content are one text under two names (newer vLLM sends both, equal):
 * reasoning counts when it is a non-empty string, else reasoning_content; never both.
 */
#ifndef ST_PROTO_CHUNK_H
#define ST_PROTO_CHUNK_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/status.h"

enum st_chunk_kind {
    ST_CHUNK_DATA = 1, /* a JSON chunk (content, finish, usage, or nothing of interest) */
    ST_CHUNK_DONE,     /* the literal [DONE] */
    ST_CHUNK_ERROR,    /* an error object: {"error":{...}}, {"error":"..."} or {"object":"error"} */
};

/* Where a count of prompt tokens served from the prefix cache came from. */
enum st_cached_from {
    ST_CACHED_UNKNOWN = 0,  /* the server did not say */
    ST_CACHED_USAGE,        /* usage.prompt_tokens_details.cached_tokens */
    ST_CACHED_TIMINGS,      /* llama.cpp timings.cache_n */
    ST_CACHED_PROMPT_MINUS, /* usage.prompt_tokens - timings.prompt_n (llama.cpp b4748) */
};
/* The wire expression of each source ("" for unknown); receipts name it. */
const char *st_cached_from_name(enum st_cached_from f);

struct st_chunk {
    enum st_chunk_kind kind;
    int has_content;        /* 1 when the content text is non-empty */
    size_t content_bytes;   /* bytes of decoded content text */
    int has_role;           /* delta.role is a string */
    int finished;           /* finish_reason is a non-empty string */
    char finish_reason[24]; /* NUL-terminated, truncated; "" when absent */
    /* Usage: -1 when absent. cached_tokens from usage.prompt_tokens_details.cached_tokens, else
     * from llama.cpp timings.cache_n, else (llama.cpp before cache_n) derived as
     * usage.prompt_tokens - timings.prompt_n (the prompt tokens it evaluated); cached_from says
     * which, ST_CACHED_UNKNOWN when the chunk says nothing of them. */
    int has_usage;
    int64_t prompt_tokens;
    int64_t completion_tokens;
    int64_t cached_tokens;
    enum st_cached_from cached_from;
    /* Tokens carried by this chunk when the server says so (vLLM/SGLang token_ids), else -1. */
    int64_t chunk_tokens;
    /* llama.cpp timings (-1 when absent). */
    int64_t draft_n;
    int64_t draft_n_accepted;
    /* Error objects: message (truncated, NUL-terminated), code (HTTP-like, or -1), type. */
    char error_message[256];
    char error_type[64];
    int64_t error_code;
};

/*
 * Decodes one payload. scratch is a caller-owned parsed-JSON holder reused across calls (no
 * malloc in steady state). When text is non-NULL the decoded content is appended to it.
 * Returns 0 (out filled; kind tells which); ST_EPARSE for invalid JSON or a JSON value that is not
 * an object; ST_EUTF8 for invalid UTF-8 inside a string; ST_ETOOBIG for a payload with too many
 * values for scratch.
 */
int st_chunk_decode(struct st_json *scratch, const char *data, size_t len, struct st_chunk *out,
                    struct st_buf *text) ST_WUR;

#endif
