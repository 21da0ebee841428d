/*
 * The simulator's --trace writer: JSONL, one line per event the server hands to evhttp and one
 * per request arrival, so a client can compare its receive times with the server's send times.
 * Lines are buffered with stdio (1 MiB) and reach the file on st_sim_trace_close; nothing is
 * fsynced. Not thread-safe: one writer per event loop. Line formats are in docs/sim.md.
 */
#ifndef ST_SIM_TRACE_H
#define ST_SIM_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* Event kinds of a trace line; names are the "kind" strings. */
enum st_sim_kind {
    ST_SIM_KIND_HEADERS = 0, /* response headers */
    ST_SIM_KIND_ROLE,        /* role-only chat chunk */
    ST_SIM_KIND_CONTENT,     /* SSE content chunk (the last one also carries finish_reason) */
    ST_SIM_KIND_FINISH,      /* the whole non-SSE completion body (all tokens, finish_reason) */
    ST_SIM_KIND_USAGE,       /* the usage-only chunk */
    ST_SIM_KIND_DONE,        /* data: [DONE] */
    ST_SIM_KIND_ERROR,       /* error event, or the JSON body of an error status */
    ST_SIM_KIND_COMMENT,     /* SSE comment (ping) */
    ST_SIM_KIND_CLOSE,       /* end of the response: last HTTP chunk, or the TCP close/reset */
};

/* The "kind" string of k. */
const char *st_sim_kind_name(enum st_sim_kind k);

struct st_sim_trace;

/*
 * Creates or truncates path (close-on-exec) and returns a writer in *out. Returns 0 or a negated
 * errno from fopen.
 */
int st_sim_trace_open(const char *path, struct st_sim_trace **out) ST_WUR;

/*
 * Appends {"rid":RID,"kind":"arrive","t_ns":T}. rid_json is the request id already rendered as a
 * JSON string, quotes included (borrowed for the call).
 */
void st_sim_trace_arrive(struct st_sim_trace *t, const char *rid_json, size_t rid_len,
                         uint64_t t_ns);

/*
 * Appends {"rid":RID,"seq":SEQ,"q_ns":Q,"t_ns":T,"kind":K,"tokens":N,"bytes":B}: q_ns when the
 * event's bytes were handed to the connection (no reader can have them earlier), t_ns when the
 * write that took its last byte returned (q_ns <= t_ns).
 */
void st_sim_trace_event(struct st_sim_trace *t, const char *rid_json, size_t rid_len, uint64_t seq,
                        uint64_t q_ns, uint64_t t_ns, enum st_sim_kind kind, uint64_t tokens,
                        uint64_t bytes);

/*
 * Flushes and closes the file and frees t. Returns 0, or the negated errno of the first failed
 * write, flush or close. st_sim_trace_close(NULL) returns 0.
 */
int st_sim_trace_close(struct st_sim_trace *t) ST_WUR;

#endif
