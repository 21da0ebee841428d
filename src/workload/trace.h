/*
 * Mooncake trace files (internal to src/workload; exported for the fuzz target): JSON Lines, one
 * request a line, {"timestamp": ms, "input_length": N, "output_length": M, "hash_ids": [..]}, where
 * hash_ids names the prompt's blocks of block_tokens tokens (equal ids: equal block contents, so
 * equal leading ids make a shared prefix). Blank lines are skipped; timestamps may not go
 * backwards. Pure: the caller reads the file.
 */
#ifndef ST_WORKLOAD_TRACE_H
#define ST_WORKLOAD_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* Bounds: lines, tokens a request, ids a request, ids in all. */
#define ST_TRACE_MAX_LINES (1u << 24)
#define ST_TRACE_MAX_TOKENS (1u << 24)
#define ST_TRACE_MAX_IDS_PER_LINE (1u << 16)
#define ST_TRACE_MAX_IDS (1u << 28)
/* Bound on the last timestamp minus the first (so send offsets fit in 64-bit nanoseconds). */
#define ST_TRACE_MAX_SPAN_MS 1.8e10

struct st_trace_req {
    uint64_t line;       /* 1-based line in the file */
    double timestamp_ms; /* as written (>= 0, non-decreasing) */
    uint64_t input_len;  /* >= 1 */
    uint64_t output_len; /* >= 1 */
    uint64_t id0;        /* hash ids [id0, id0 + nids) in st_trace.ids */
    uint32_t nids;
};

struct st_trace {
    struct st_trace_req *reqs; /* owned */
    uint64_t n;
    uint64_t *ids; /* owned */
    uint64_t nids;
};

/*
 * Parses data[0..len) into t (caller-embedded, uninitialised). name prefixes messages. Returns 0;
 * ST_EPARSE with "NAME:LINE: what was expected" for a bad line (t is then empty); ST_ETOOBIG
 * over the bounds above; ST_EUSAGE for a file with no request.
 */
int st_trace_parse(struct st_trace *t, const char *name, const char *data, size_t len, char *err,
                   size_t errlen) ST_WUR;
void st_trace_release(struct st_trace *t);

/*
 * Numbers the distinct hash ids of requests [0, nreqs) densely in order of first appearance:
 * block_of[k] gets the number of id k (for every id of those requests; block_of has t->nids
 * entries, the rest untouched). Returns how many distinct ids there are.
 */
uint64_t st_trace_blocks(const struct st_trace *t, uint64_t nreqs, uint32_t *block_of);

#endif
