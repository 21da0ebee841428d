/*
 * One request's content, as a workload supplies it to the load engine: the messages or prompt,
 * lengths, extra headers, a receipt tag and (for trace replay) the intended send time. Shared by
 * src/workload (which fills it) and src/engine (which sends it). Pure data.
 */
#ifndef ST_WORKLOAD_ITEM_H
#define ST_WORKLOAD_ITEM_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

/*
 * What one request sends, supplied by a workload (src/workload) through st_req_source_fn. Every
 * pointer is borrowed until the next call on the same worker (it may point into scratch).
 */
struct st_req_item {
    /* Chat: a JSON array written as "messages"; NULL: prompt is sent as one user message. */
    const char *messages_json;
    size_t messages_len;
    const char *prompt; /* completions prompt, or the user message when messages_json is NULL */
    size_t prompt_len;
    int64_t max_tokens;   /* < 0: the run's output_len */
    int ignore_eos;       /* < 0: the run's setting */
    int64_t input_tokens; /* requested prompt tokens, for the receipt; < 0: unknown */
    uint64_t t_offset_ns; /* trace replay: intended send offset from the start; UINT64_MAX: none */
    const char *tag_json; /* a JSON object copied into the receipt as "workload", or NULL */
    size_t tag_len;
    int64_t id_slot; /* llama.cpp: the slot to run on (the body's id_slot); < 0: the server picks */
    const char *const *headers; /* extra request headers, "Name: value" */
    uint32_t n_headers;
};

/*
 * Fills item for request id (0-based issue order). Called on worker threads, concurrently: it must
 * only read shared state (a workload is immutable once built). scratch is the calling slot's own
 * buffer, cleared before the call. Returns 0, or a negative code: the request then fails with class
 * "other" and the message in scratch.
 */
typedef int (*st_req_source_fn)(const void *ctx, uint64_t id, struct st_req_item *item,
                                struct st_buf *scratch);

#endif
