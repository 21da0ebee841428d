/*
 * The engine model: continuous batching over the paged KV pool and prefix cache (kv.h), timed by
 * the step-cost model (cost.h). A seeded, deterministic event model with no clock: the caller
 * (the simulator's server shell, or a benchmark) submits requests and calls st_batch_step, which
 * plans one engine step at virtual time `now` and says how long it takes and which tokens it
 * produces; the caller makes those tokens visible at now + duration and steps again.
 *
 * One step, per DP rank (ranks run in lockstep; the step lasts as long as the slowest):
 *  1. Decode: every running request whose prompt is fully in KV gets room for 1 + spec_steps
 *     tokens; when blocks run out the most recently admitted running request is preempted
 *     (its KV released; it goes back to the front of the waiting queue and recomputes later).
 *  2. The token budget (max_batched_tokens) less the decode tokens goes to prefill: first the
 *     request whose chunked prefill is in progress, then waiting requests in FIFO order. Admitting
 *     a request looks up its prompt in the prefix cache, then needs free blocks for the uncached
 *     prompt plus admit_output_reserve * max_tokens; a request that does not fit blocks those
 *     behind it (FIFO). At most max_running requests run. ("Free" here: free and evictable
 *     blocks less those promised to running requests at their admission and not yet allocated,
 *     so with a reserve of 1 the pool never runs out; no admission in a step that preempted.)
 *  3. The step's shape goes to the cost model. Each decoding request with speculation draws
 *     how many of its drafts are accepted (position i accepted with probability
 *     spec_accept[i] * 2^(-context / halflife), given all before it were), and emits accepted + 1
 *     tokens, never more than it has left. Without speculation it emits 1.
 *  4. A request whose prompt blocks are all computed publishes them to the prefix cache; a request
 *     that reaches max_tokens finishes and releases its KV.
 *
 * Each request has its own RNG (seeded from the engine seed and its id), so results do not depend
 * on how requests interleave. Pure.
 */
#ifndef ST_SIM_MODEL_BATCH_H
#define ST_SIM_MODEL_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "sim/model/cost.h"
#include "sim/model/kv.h"
#include "sim/model/profile.h"

/* What happened to one request in a step. */
struct st_batch_event {
    uint64_t id;
    uint32_t tokens;        /* output tokens produced by this step (0..1+spec_steps) */
    uint32_t drafted;       /* draft tokens proposed for it this step */
    uint32_t accepted;      /* of which accepted */
    uint8_t admitted;       /* it was admitted in this step (cached_tokens is then known) */
    uint8_t first;          /* tokens > 0 for the first time: its first token */
    uint8_t finished;       /* it reached max_tokens; the engine forgot it after this step */
    uint8_t preempted;      /* it lost its KV in this step and went back to waiting */
    uint64_t cached_tokens; /* prompt tokens found in the prefix cache at its (last) admission */
};

struct st_batch_result {
    uint64_t duration_ns;                /* 0 when there was nothing to do */
    struct st_step_shape shape;          /* of the slowest rank */
    const struct st_batch_event *events; /* engine-owned, valid until the next call */
    uint32_t n_events;
};

struct st_batch_stats {
    uint32_t ranks;
    uint32_t running;
    uint32_t waiting;
    uint64_t kv_total_tokens;     /* all ranks */
    uint64_t kv_used_tokens;      /* blocks referenced by requests, in tokens (pressure excluded) */
    uint64_t prefix_query_tokens; /* prompt tokens of requests at their first admission */
    uint64_t prefix_hit_tokens;   /* of which found in the prefix cache */
    uint64_t prompt_tokens;       /* prompt tokens computed (prefilled), recomputation included */
    uint64_t generation_tokens;
    uint64_t spec_drafts; /* verify steps with drafts */
    uint64_t spec_draft_tokens;
    uint64_t spec_accepted_tokens;
    uint64_t spec_accepted_per_pos[ST_SPEC_MAX_STEPS];
    uint64_t preemptions;
    uint64_t finished;
    uint64_t steps;
};

struct st_batch;

/*
 * Creates the engine for a validated profile whose memory plan fits. Returns NULL when it does
 * not fit (the caller reports the plan's reason), or when one rank's pool is empty or over
 * ST_KV_MAX_BLOCKS blocks. p is copied.
 */
struct st_batch *st_batch_new(const struct st_profile *p, uint64_t seed);
void st_batch_free(struct st_batch *b);

/*
 * Queues a request. hashes[0..n_hashes) are the chained hashes of the prompt's full blocks
 * (copied). Returns 0; ST_ETOOBIG when prompt_tokens + max_tokens exceeds the context length
 * (err gets the dialect's 400 message); -EEXIST for a duplicate id.
 * Also (additions to the first contract): ST_ETOOBIG, with the same message naming the pool's
 * size, when prompt_tokens + max_tokens exceeds one rank's KV pool (it could never run); -EINVAL
 * when prompt_tokens or max_tokens is 0 or n_hashes > prompt_tokens / page_size. Accepted
 * requests go to DP ranks round-robin: the k-th accepted submission (from 0) to rank
 * k % dp_attention.
 */
int st_batch_submit(struct st_batch *b, uint64_t id, uint64_t prompt_tokens, const uint64_t *hashes,
                    uint32_t n_hashes, uint32_t max_tokens, uint64_t now, char *err,
                    size_t errlen) ST_WUR;
/*
 * Plans and accounts one step starting at now (see above). Never fails. duration_ns is 0 when no
 * rank could do anything (idle, or every waiting request blocked by the pool, e.g. under
 * pressure): step again only after a submit, abort, flush or pressure change.
 */
void st_batch_step(struct st_batch *b, uint64_t now, struct st_batch_result *out);
/* True when a step would do work (some request is waiting or running). */
int st_batch_busy(const struct st_batch *b);
/* Forgets a request (client gone): its KV is released. Returns 0 or ST_ENOTFOUND. */
int st_batch_abort(struct st_batch *b, uint64_t id, uint64_t now) ST_WUR;
/*
 * Staged noise (profile perf.noise_cv, perf.bringup_cv; the caller draws the factors): a step's
 * time is multiplied by the launch's scale and by the mean factor of the requests it computes.
 * st_batch_set_noise sets a queued or running request's factor (returns 0 or ST_ENOTFOUND);
 * st_batch_set_scale the launch's. Both default to 1, which leaves every time exactly as
 * without noise; factors that are not finite and > 0 count as 1.
 */
int st_batch_set_noise(struct st_batch *b, uint64_t id, double factor) ST_WUR;
/* Re-seeds a queued request's own draws (speculative acceptance; by default seeded from the
 * engine seed and its id) before its first step: 0, or ST_ENOTFOUND. */
int st_batch_reseed(struct st_batch *b, uint64_t id, uint64_t seed);
void st_batch_set_scale(struct st_batch *b, double factor);
/*
 * llama.cpp's id_slot: a queued request runs on slot `slot` of its rank (it waits while that slot
 * is busy, and those behind it wait too). Ignored without slot scope or for slot >= max_running.
 * Returns 0 or ST_ENOTFOUND.
 */
int st_batch_pin_slot(struct st_batch *b, uint64_t id, uint32_t slot) ST_WUR;
/* Empties the prefix cache of every rank (blocks in use stay). */
void st_batch_flush(struct st_batch *b);
/*
 * llama.cpp's slot erase: with slot scope empties that slot (ids run 0..max_running-1 per rank;
 * a busy slot keeps its running request's KV and erases nothing) and returns the tokens it held;
 * with pool scope one cache serves every slot, so it empties all of it and returns the tokens the
 * cache held.
 */
uint64_t st_batch_erase_slot(struct st_batch *b, uint32_t slot);
/* True when the prefix cache is per slot (engine.cache_scope slot, or auto and llamacpp). */
int st_batch_slot_scope(const struct st_batch *b);
/*
 * Takes n blocks out of every rank's pool (memory pressure fault; 0 gives them back). Blocks given
 * back return at once; blocks taken are taken at the start of the next step, which preempts
 * running requests (most recently admitted first) until they fit. n is capped at the pool.
 */
void st_batch_pressure(struct st_batch *b, uint64_t blocks);
void st_batch_get_stats(const struct st_batch *b, struct st_batch_stats *out);

/* One DP rank's view (an addition for tests and --explain). */
struct st_batch_rank {
    const struct st_kv *kv;     /* borrowed from the engine; valid until st_batch_free */
    struct st_step_shape shape; /* its part of the last step */
    uint32_t running;
    uint32_t waiting;
    uint32_t pressure_blocks; /* blocks held by st_batch_pressure */
};
/* rank < stats.ranks. */
void st_batch_get_rank(const struct st_batch *b, uint32_t rank, struct st_batch_rank *out);
const struct st_mem_plan *st_batch_plan(const struct st_batch *b);

#endif
