/*
 * The simulator's pure core: what one response looks like and when each of its events is due.
 *
 * It parses the per-request configuration (the X-Sim header, the --fault flag and the other sim
 * flags, all one key=value syntax) into struct st_sim_spec, parses a request body into struct
 * st_sim_req, and pre-renders per-response templates so that building an SSE event costs a few
 * memcpy calls. It is not the HTTP shell (server.c) and shares no code with the client's parsers
 * in src/proto: the simulator is an independent source of truth. No I/O, no clock, no globals.
 *
 * Token text: token i of every response is exactly 4 bytes, a space and three lowercase letters
 * (base 26 of i mod 17576), so byte counts are proportional to token counts.
 * Prompt tokens: ceil(bytes / 4) of the prompt text (see st_sim_req_parse).
 * Expected workload: millions of content events a second from one thread (docs/internals/sim.md).
 */
#ifndef ST_SIM_SPEC_H
#define ST_SIM_SPEC_H

#include <sys/socket.h>

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/status.h"

/* Bytes of every token's text. */
#define ST_SIM_TOKEN_BYTES 4
/* Distinct token texts before they repeat (26^3). */
#define ST_SIM_TOKEN_CYCLE 17576u
/* Output length limits (max_tokens / max_completion_tokens). */
#define ST_SIM_MAX_TOKENS 1000000u
#define ST_SIM_DEFAULT_TOKENS 16u
#define ST_SIM_MAX_TOKENS_PER_CHUNK 8u
/* Every millisecond value (ttft_ms, itl_ms, headers_delay_ms, ping_ms) is at most one hour. */
#define ST_SIM_MAX_MS 3600000.0
/* Off value of the "after N chunks" faults (stall_after, close_after, reset_after, error_at). */
#define ST_SIM_OFF UINT64_MAX
/* Size of the padding string in the oversize_at event (the data line is longer than this). */
#define ST_SIM_OVERSIZE_PAD_BYTES (2u * 1024u * 1024u)
/* Longest model name accepted by st_sim_tmpl_init callers (bytes). */
#define ST_SIM_MAX_MODEL_BYTES 256u

enum st_sim_usage {
    ST_SIM_USAGE_AUTO = 0, /* streaming: usage chunk iff stream_options.include_usage */
    ST_SIM_USAGE_ALWAYS,
    ST_SIM_USAGE_NEVER,
};

enum st_sim_role {
    ST_SIM_ROLE_EARLY = 0, /* role-only chunk written with the response headers */
    ST_SIM_ROLE_FIRST,     /* role-only chunk written together with content chunk 0 */
    ST_SIM_ROLE_OFF,
};

enum st_sim_api {
    ST_SIM_API_CHAT = 1, /* POST /v1/chat/completions */
    ST_SIM_API_COMPLETIONS,
};

/*
 * The behaviour of one response. Times are nanoseconds, counts are content chunks. Defaults come
 * from st_sim_spec_init; flags, --fault and the X-Sim header change them key by key.
 */
struct st_sim_spec {
    uint64_t ttft_ns;          /* arrival -> content chunk 0 */
    uint64_t itl_ns;           /* content chunk j -> chunk j + 1 */
    uint64_t headers_delay_ns; /* arrival -> response headers */
    uint64_t ping_ns;          /* SSE comment period while waiting for chunk 0; 0 = none */
    uint32_t tokens_per_chunk; /* 1..ST_SIM_MAX_TOKENS_PER_CHUNK */
    enum st_sim_usage usage;
    int done; /* 1: end the stream with data: [DONE] */
    enum st_sim_role role_chunk;
    uint64_t cached_tokens; /* reported as usage.prompt_tokens_details.cached_tokens */
    /* Faults. */
    int status;            /* 0, or an HTTP status 400..599 to answer instead */
    double status_rate;    /* share of requests that get status (seeded per request); 1 = all */
    int64_t retry_after_s; /* Retry-After of a 429; -1 leaves the header out */
    int nonsse;            /* 1: a streaming request gets a plain JSON body */
    uint64_t stall_after;  /* after this many content chunks send nothing more; or OFF */
    uint64_t close_after;  /* ... close the TCP connection (FIN, no last HTTP chunk); or OFF */
    uint64_t reset_after;  /* ... reset the TCP connection (RST); or OFF */
    uint64_t error_at;     /* ... send an error event, then [DONE] if done; or OFF */
    uint64_t malformed_at; /* 1-based content chunk whose JSON is cut short; 0 = none */
    uint64_t oversize_at;  /* 1-based content chunk padded past 2 MiB; 0 = none */
    uint64_t bad_utf8_at;  /* 1-based content chunk with invalid UTF-8 in its text; 0 = none */
};

/* Sets the documented defaults: ttft 50 ms, itl 10 ms, 1 token a chunk, usage auto, done on,
 * role chunk early, no pings, no cached tokens, no faults (status_rate 1). */
void st_sim_spec_init(struct st_sim_spec *s);

/*
 * Sets one key (e.g. "ttft_ms") from its text value. key and val need not be NUL-terminated.
 * Returns 0; ST_ENOTFOUND for an unknown key; ST_EPARSE for a bad value. On error s is unchanged
 * and err (if not NULL) gets a sentence naming the key and what was expected.
 */
int st_sim_spec_set(struct st_sim_spec *s, const char *key, size_t keylen, const char *val,
                    size_t vallen, char *err, size_t errlen) ST_WUR;

/* What key accepts, as a phrase for messages ("an integer in [1, 8]"); NULL for unknown keys. */
const char *st_sim_spec_expect(const char *key);

/*
 * Applies "key=value,key=value,..." (the X-Sim header and --fault syntax) to s, left to right.
 * Spaces and tabs around items, keys and values are ignored, and so are empty items. All or
 * nothing: on error s is unchanged. Returns 0, ST_ENOTFOUND (unknown key), ST_EPARSE (bad value or
 * an item without '='), ST_ETOOBIG (text over 4096 bytes); err names the offending item.
 */
int st_sim_spec_apply(struct st_sim_spec *s, const char *text, size_t len, char *err,
                      size_t errlen) ST_WUR;

/* A parsed completion request. */
struct st_sim_req {
    enum st_sim_api api;
    uint32_t n_tokens;       /* tokens to emit: max_completion_tokens, else max_tokens, else 16 */
    int stream;              /* "stream": true */
    int include_usage;       /* stream_options.include_usage */
    int stream_options;      /* stream_options is an object (vLLM defaults include_usage to true) */
    int include_usage_given; /* stream_options.include_usage is present and not null */
    int continuous_usage;    /* stream_options.continuous_usage_stats */
    uint64_t prompt_tokens;  /* ceil(prompt bytes / 4), or the length of a token-id prompt */
    uint64_t prompt_bytes;   /* bytes the rule above counted */
};

/*
 * Parses a request body for api. Prompt rule: chat sums the bytes of every message's string
 * content (and the "text" of {"type":"text"} parts when content is an array); completions takes
 * the bytes of a string "prompt", or counts the ids of a token-id array prompt directly. Then
 * prompt_tokens = ceil(bytes / 4). doc and scratch are caller-owned scratch (reused across calls);
 * body is borrowed for the call. Returns 0, or ST_EPARSE (invalid JSON, wrong types, missing
 * messages/prompt, length out of 1..ST_SIM_MAX_TOKENS) with a sentence in err.
 */
int st_sim_req_parse(struct st_sim_req *r, enum st_sim_api api, const char *body, size_t len,
                     struct st_json *doc, struct st_buf *scratch, char *err, size_t errlen) ST_WUR;

/* Content chunks for n tokens at k tokens a chunk: ceil(n / k). */
uint32_t st_sim_chunks(uint32_t n_tokens, uint32_t per_chunk);
/* Tokens in content chunk j (0-based) of that response; the last may carry fewer; 0 past the end */
uint32_t st_sim_chunk_tokens(uint32_t n_tokens, uint32_t per_chunk, uint32_t j);
/* When content chunk j is due: arrival + ttft + j * itl. */
uint64_t st_sim_chunk_due_ns(const struct st_sim_spec *s, uint64_t arrival_ns, uint32_t j);
/* When a non-streaming body is due: max(headers delay, ttft + (C - 1) * itl) after arrival. */
uint64_t st_sim_body_due_ns(const struct st_sim_spec *s, const struct st_sim_req *r,
                            uint64_t arrival_ns);
/* Whether the usage object is sent: never -> 0; always -> 1; auto -> non-streaming, or
 * include_usage. */
int st_sim_usage_on(const struct st_sim_spec *s, const struct st_sim_req *r);

/*
 * Whether request k gets the status fault: always when status_rate >= 1, never when it is 0,
 * else a draw from an RNG seeded by (seed, k), so the same request number gets the same answer
 * on every run. 0 when s->status is 0.
 */
int st_sim_status_applies(const struct st_sim_spec *s, uint64_t seed, uint64_t k);

/* Writes the 4 bytes of token i (not NUL-terminated). */
void st_sim_token_text(uint64_t i, char out[ST_SIM_TOKEN_BYTES]);

/* Flags of one content event (st_sim_tmpl_content). */
#define ST_SIM_EV_LAST 1u      /* the last chunk: finish_reason "length" */
#define ST_SIM_EV_MALFORMED 2u /* drop the JSON's closing brace */
#define ST_SIM_EV_OVERSIZE 4u  /* add "sim_pad" of ST_SIM_OVERSIZE_PAD_BYTES bytes */
#define ST_SIM_EV_BAD_UTF8 8u  /* bytes 2..3 of the first token become \xC3\x28 */
#define ST_SIM_EV_USAGE 16u    /* carry a running usage object */

/* Everything one response needs to render its events. */
struct st_sim_resp {
    enum st_sim_api api;
    uint64_t id;            /* the k of chatcmpl-sim-<k> / cmpl-sim-<k> */
    int64_t created_unix_s; /* "created" */
    const char *model;      /* borrowed for st_sim_tmpl_init / st_sim_render_body only */
    uint32_t n_tokens;
    uint64_t prompt_tokens;
    uint64_t cached_tokens;
    int cached_report; /* enum st_cached_report; 0 reads as usage */
};

/*
 * Pre-rendered pieces of one streaming response. A content event is
 *   head | token text | close (finish_reason null or "length") | [running usage] | [pad] | "}" |
 *   "\n\n"
 * and the role, usage, error, [DONE] and comment events are rendered whole. Caller-embedded;
 * st_sim_tmpl_release frees it.
 */
struct st_sim_tmpl {
    struct st_buf head;       /* owned: `data: {"id":...,"choices":[{"index":0,...:"` */
    struct st_buf close;      /* owned: `"},"finish_reason":null}]` (or the completions form) */
    struct st_buf close_last; /* owned: same with "length" */
    struct st_buf usage_head; /* owned: `,"usage":{"prompt_tokens":P,"completion_tokens":` */
    struct st_buf role;       /* owned: the whole role event; empty for completions */
    struct st_buf usage;      /* owned: the whole final usage event */
    uint64_t prompt_tokens;
};

void st_sim_tmpl_init(struct st_sim_tmpl *t, const struct st_sim_resp *r);
/* Appends `{"id":"chatcmpl-sim-<id>","object":"<object>","created":..,"model":"..",` (cmpl-sim-
 * for completions): the opening every chunk and body of r shares, dialect endings included. */
void st_sim_put_prefix(struct st_buf *b, const struct st_sim_resp *r, const char *object);
/* Writes v in decimal at out (room for 20 bytes; no NUL) and returns the digit count. */
size_t st_sim_put_u64(char *out, uint64_t v);
void st_sim_tmpl_release(struct st_sim_tmpl *t);

/* Upper bound of st_sim_tmpl_content's output for ntok tokens and flags. */
size_t st_sim_tmpl_content_max(const struct st_sim_tmpl *t, uint32_t ntok, unsigned flags);
/*
 * Renders the content event of tokens tok0..tok0+ntok-1 into out (at least
 * st_sim_tmpl_content_max bytes) and returns its length. done_tokens is the running
 * completion_tokens for ST_SIM_EV_USAGE (tokens sent including this event).
 */
size_t st_sim_tmpl_content(const struct st_sim_tmpl *t, char *out, uint64_t tok0, uint32_t ntok,
                           unsigned flags, uint64_t done_tokens);

/* Upper bound of st_sim_tmpl_content_text's output for text_len bytes of text. */
size_t st_sim_tmpl_content_text_max(const struct st_sim_tmpl *t, size_t text_len, unsigned flags);
/*
 * Renders a content event whose text is text[0..text_len), already escaped for a JSON string
 * (borrowed for the call), into out (at least st_sim_tmpl_content_text_max bytes); returns its
 * length. The flags and done_tokens mean what they mean for st_sim_tmpl_content, except that
 * ST_SIM_EV_BAD_UTF8 needs at least 3 bytes of text.
 */
size_t st_sim_tmpl_content_text(const struct st_sim_tmpl *t, char *out, const char *text,
                                size_t text_len, unsigned flags, uint64_t done_tokens);

/* Whole fixed events. */
#define ST_SIM_EVENT_DONE "data: [DONE]\n\n"
#define ST_SIM_EVENT_COMMENT ":\n\n"
#define ST_SIM_EVENT_ERROR                                                                         \
    "data: {\"error\":{\"message\":\"sim error\",\"type\":\"InternalServerError\",\"code\":500}}"  \
    "\n\n"

/* Appends a non-streaming body's opening, up to and including the quote that opens its text:
 * the prefix, then "choices":[{"index":0,"message":{"role":"assistant","content":" (chat) or
 * "choices":[{"index":0,"text":" (completions); dialect bodies open with it too. */
void st_sim_put_body_head(struct st_buf *out, const struct st_sim_resp *r);
/* Appends the non-streaming JSON body (chat.completion or text_completion) to out. */
void st_sim_render_body(struct st_buf *out, const struct st_sim_resp *r, int with_usage);
/* Appends {"error":{"message":M,"type":T,"code":C}} to out. */
void st_sim_render_error(struct st_buf *out, const char *message, const char *type, int code);
/* The error "type" the simulator uses for an HTTP status (e.g. 429 -> "RateLimitError"). */
const char *st_sim_error_type(int status);
/* The reason phrase of an HTTP status ("Too Many Requests"); "Error" when unknown. */
const char *st_sim_reason(int status);

/*
 * Parses "HOST:PORT" where HOST is an IPv4 address, "localhost" or "[IPv6]". Fills *sa and *salen;
 * *loopback is 1 for 127.0.0.0/8 and ::1. Returns 0 or ST_EPARSE.
 */
int st_sim_listen_parse(const char *s, struct sockaddr_storage *sa, socklen_t *salen,
                        int *loopback) ST_WUR;

#endif
