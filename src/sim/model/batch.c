/*
 * The engine model: continuous batching over one paged KV pool per DP rank (see batch.h for the
 * step algorithm and docs/internals/sim-batch.md for the request state machine and an example).
 * Not a scheduler for real work: it only plans steps and does the accounting a real engine does.
 *
 * Invariants: a request is in exactly one rank queue (waiting or running) and in the id map; a
 * waiting request holds no KV blocks; a running one holds blocks_for(computed) or more blocks
 * (lookahead for speculation), never more than blocks_for(prompt + max_tokens); requests are
 * pooled and the events array is reused, so a steady-state step allocates nothing. Expected
 * workload: up to a few thousand running requests per rank, a step planned in microseconds.
 */
#include "sim/model/batch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/rng.h"
#include "base/xalloc.h"
#include "sim/model/assert.h"
#include "sim/model/dlist.h"

enum req_state {
    REQ_WAITING = 1,
    REQ_RUNNING,
};

/*
 * One request. known = prompt_tokens + generated is the number of tokens the request has (prompt
 * and output so far); computed is how many of them have KV in the pool. Prefill brings computed
 * up to known and samples one token; a decode step computes the last sampled token (plus drafts)
 * and samples accepted + 1. So between steps a decoding request has computed == known - 1.
 */
struct req {
    struct st_dlink link; /* first member: rank queue links (waiting or running) */
    uint64_t id;
    struct req *hnext; /* id-map chain, or the free pool's list */
    enum req_state state;
    uint32_t rank;
    uint64_t prompt_tokens;
    uint32_t max_tokens;
    uint32_t generated;      /* output tokens emitted, across preemptions */
    uint64_t computed;       /* tokens with KV in the pool (cached or computed) */
    uint64_t cached_tokens;  /* prompt tokens matched at the last admission */
    uint32_t matched;        /* blocks matched at the last admission */
    uint32_t reserve_blocks; /* blocks promised at the last admission (admission accounting) */
    uint32_t n_hashes;
    uint32_t cap_hashes;
    uint64_t *hashes; /* owned: chained hashes of the prompt's full blocks */
    uint32_t n_blocks;
    uint32_t cap_blocks;
    uint32_t *blocks; /* owned: block ids referenced, in token order */
    int published;    /* its full prompt blocks are in the prefix cache */
    int admitted_before;
    uint64_t ev_stamp; /* step stamp of its event in b->events, if equal to b->stamp */
    uint32_t ev_idx;
    double noise;       /* its step-time factor (st_batch_set_noise), 1 by default */
    uint32_t slot;      /* slot scope: the slot it runs in, NO_SLOT when none */
    uint32_t want_slot; /* slot scope: the slot it asked for (id_slot), NO_SLOT for any */
    struct st_rng rng;
};

#define NO_SLOT UINT32_MAX

/*
 * Slot scope (llama.cpp b4748): each slot keeps the KV of the last request it ran, its prompt
 * and output, and nothing else; a request reuses the prefix it shares with its own slot's tokens.
 */
struct slot {
    uint64_t *hashes; /* owned: chained hashes of the full blocks it holds */
    uint32_t n_hashes;
    uint32_t cap_hashes;
    uint64_t tokens;    /* tokens it holds (0: empty) */
    uint64_t last_used; /* when its last request ended; 0 never used */
    int busy;
    int erase_pending; /* erased while busy: it holds nothing once its request leaves */
};

/* The request of a queue link (NULL for NULL). */
static struct req *req_of(struct st_dlink *l)
{
    return (struct req *)l;
}

/* One request's part of the step being planned. */
struct sched {
    struct req *r;   /* borrowed: in the rank's running queue for the whole step */
    uint64_t tokens; /* tokens computed for it: a prefill chunk, or 1 + spec for a decode */
    uint64_t ctx;    /* its computed tokens before the step */
    int decode;
};

struct rank {
    struct st_kv *kv; /* owned */
    struct st_dlist waiting;
    struct st_dlist running; /* in admission order: the tail is the most recently admitted */
    uint32_t *pressure;      /* owned: blocks held by st_batch_pressure */
    uint32_t n_pressure;
    uint32_t cap_pressure;
    struct sched *sched; /* owned: max_running entries */
    struct slot *slots;  /* owned: max_running entries with slot scope, else NULL */
    uint32_t n_sched;
    struct st_step_shape shape; /* of the last step */
    int preempted;              /* a request lost its KV in this step: admit nothing more */
    int ends_prefill;           /* a chunk of this step completes its request's prompt */
};

struct st_batch {
    struct st_profile p; /* copy; st_cost borrows it */
    struct st_cost cost;
    struct st_mem_plan plan;
    uint64_t seed;
    uint32_t page;
    uint32_t spec;   /* draft tokens per decode step (0 without speculation) */
    uint64_t budget; /* token budget per rank per step */
    uint32_t max_running;
    uint32_t n_ranks;
    uint32_t pool_blocks; /* per rank */
    uint32_t pressure_target;
    struct rank *ranks;   /* owned: n_ranks */
    struct req **buckets; /* owned: id map, n_buckets (a power of two) chains */
    uint32_t n_buckets;
    uint32_t n_reqs;
    struct req *pool;   /* owned: free requests, linked by hnext */
    uint64_t submitted; /* accepted submissions; the next one goes to rank submitted % n_ranks */
    uint64_t stamp;     /* st_batch_step calls */
    struct st_batch_event *events; /* owned, reused */
    uint32_t n_events;
    uint32_t cap_events;
    struct st_batch_stats stats; /* counters; gauges are filled by st_batch_get_stats */
    double scale;                /* every step's time factor (st_batch_set_scale), 1 by default */
    int slot_scope;              /* the prefix cache is per slot (engine.cache_scope) */
    int noisy;                   /* some request's factor is not 1 */
};

/* ---- small helpers ---- */

static uint32_t blocks_for(const struct st_batch *b, uint64_t tokens)
{
    return (uint32_t)((tokens + b->page - 1) / b->page);
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static uint64_t known_tokens(const struct req *r)
{
    return r->prompt_tokens + r->generated;
}

static int is_decoding(const struct req *r)
{
    return r->generated > 0 && r->computed + 1 == known_tokens(r);
}

/* ---- id map and request pool ---- */

static struct req **bucket_of(const struct st_batch *b, uint64_t id)
{
    return &b->buckets[st_hash_mix(id) & (b->n_buckets - 1)];
}

static struct req *map_find(const struct st_batch *b, uint64_t id)
{
    struct req *r = *bucket_of(b, id);
    while (r && r->id != id) {
        r = r->hnext;
    }
    return r;
}

static void map_grow(struct st_batch *b)
{
    uint32_t old_n = b->n_buckets;
    struct req **old = b->buckets;
    b->n_buckets = old_n * 2;
    b->buckets = st_xcalloc(b->n_buckets, sizeof *b->buckets);
    for (uint32_t i = 0; i < old_n; i++) {
        struct req *r = old[i];
        while (r) {
            struct req *next = r->hnext;
            struct req **head = bucket_of(b, r->id);
            r->hnext = *head;
            *head = r;
            r = next;
        }
    }
    free(old);
}

static void map_insert(struct st_batch *b, struct req *r)
{
    if (b->n_reqs >= b->n_buckets) {
        map_grow(b);
    }
    struct req **head = bucket_of(b, r->id);
    r->hnext = *head;
    *head = r;
    b->n_reqs++;
}

static void map_remove(struct st_batch *b, struct req *r)
{
    struct req **pp = bucket_of(b, r->id);
    while (*pp != r) {
        ST_MODEL_ASSERT(*pp);
        pp = &(*pp)->hnext;
    }
    *pp = r->hnext;
    b->n_reqs--;
}

static struct req *req_get(struct st_batch *b)
{
    struct req *r = b->pool;
    if (r) {
        b->pool = r->hnext;
        return r;
    }
    return st_xcalloc(1, sizeof *r);
}

/* Returns r to the pool; its arrays stay allocated for the next request. */
static void req_put(struct st_batch *b, struct req *r)
{
    r->hnext = b->pool;
    b->pool = r;
}

/* ---- events ---- */

/* r's event in this step, created empty on first use. The pointer is valid until the next call. */
static struct st_batch_event *event_of(struct st_batch *b, struct req *r)
{
    if (r->ev_stamp == b->stamp) {
        return &b->events[r->ev_idx];
    }
    if (b->n_events == b->cap_events) {
        b->cap_events = b->cap_events ? b->cap_events * 2 : 64;
        b->events = st_xrealloc(b->events, b->cap_events * sizeof *b->events);
    }
    r->ev_stamp = b->stamp;
    r->ev_idx = b->n_events++;
    struct st_batch_event *e = &b->events[r->ev_idx];
    memset(e, 0, sizeof *e);
    e->id = r->id;
    e->cached_tokens = r->cached_tokens;
    return e;
}

/* ---- slots (slot scope) ---- */

/* Full blocks that the slot's tokens and r's prompt share from the start. */
static uint32_t slot_common(const struct slot *s, const struct req *r)
{
    uint32_t n = s->n_hashes < r->n_hashes ? s->n_hashes : r->n_hashes;
    uint32_t i = 0;
    while (i < n && s->hashes[i] == r->hashes[i]) {
        i++;
    }
    return i;
}

/*
 * llama.cpp's get_available_slot: the idle slot with the longest common prefix if that prefix is
 * more than slot_similarity of the slot's tokens, else the least recently used idle slot (the
 * lowest id among equals). The caller checked that one is idle.
 */
static uint32_t slot_pick(const struct st_batch *b, const struct rank *rk, const struct req *r)
{
    uint32_t best = NO_SLOT, lru = NO_SLOT;
    uint64_t best_tokens = 0;
    for (uint32_t k = 0; k < b->max_running; k++) {
        const struct slot *s = &rk->slots[k];
        if (s->busy) {
            continue;
        }
        if (lru == NO_SLOT || s->last_used < rk->slots[lru].last_used) {
            lru = k;
        }
        uint64_t common = (uint64_t)slot_common(s, r) * b->page;
        if (s->tokens > 0 && common > best_tokens &&
            (double)common > b->p.engine.slot_similarity * (double)s->tokens) {
            best = k;
            best_tokens = common;
        }
    }
    ST_MODEL_ASSERT(lru != NO_SLOT);
    return best != NO_SLOT ? best : lru;
}

/* r leaves its slot; keep: the slot holds r's computed tokens (else it is empty, KV lost). */
static void slot_leave(struct st_batch *b, struct rank *rk, struct req *r, int keep, uint64_t now)
{
    if (!rk->slots || r->slot == NO_SLOT) {
        return;
    }
    struct slot *s = &rk->slots[r->slot];
    s->busy = 0;
    s->last_used = now;
    s->n_hashes = 0;
    s->tokens = 0;
    keep = keep && !s->erase_pending;
    s->erase_pending = 0;
    if (keep && b->p.engine.prefix_caching) {
        uint64_t full = r->computed / b->page;
        uint32_t n = full < r->n_hashes ? (uint32_t)full : r->n_hashes;
        if (s->cap_hashes < n) {
            s->cap_hashes = n;
            s->hashes = st_xrealloc(s->hashes, (size_t)n * sizeof *s->hashes);
        }
        if (n) {
            memcpy(s->hashes, r->hashes, (size_t)n * sizeof *s->hashes);
        }
        s->n_hashes = n;
        s->tokens = r->computed;
    }
    r->slot = NO_SLOT;
}

/* ---- KV ---- */

static void release_kv(struct st_batch *b, struct rank *rk, struct req *r, int keep, uint64_t now)
{
    slot_leave(b, rk, r, keep, now);
    st_kv_release(rk->kv, r->blocks, r->n_blocks, now);
    r->n_blocks = 0;
    r->computed = 0;
    r->published = 0;
}

/* Preemption by recompute: r loses its KV and goes back to the front of the waiting queue. */
static void preempt(struct st_batch *b, struct rank *rk, struct req *r, uint64_t now)
{
    release_kv(b, rk, r, 0, now);
    st_dlist_remove(&rk->running, &r->link);
    st_dlist_push_front(&rk->waiting, &r->link);
    r->state = REQ_WAITING;
    rk->preempted = 1;
    b->stats.preemptions++;
    event_of(b, r)->preempted = 1;
}

/*
 * Gives r blocks for its first `tokens` tokens, preempting the most recently admitted running
 * requests while the pool is short. Returns 0, or -1 when r itself was preempted (then every
 * request admitted after it was too).
 */
static int ensure_blocks(struct st_batch *b, struct rank *rk, struct req *r, uint64_t tokens,
                         uint64_t now)
{
    uint32_t want = blocks_for(b, tokens);
    ST_MODEL_ASSERT(want <= r->cap_blocks);
    if (want <= r->n_blocks) {
        return 0;
    }
    uint32_t need = want - r->n_blocks;
    while (st_kv_available(rk->kv) < need) {
        struct req *victim = req_of(rk->running.tail);
        preempt(b, rk, victim, now);
        if (victim == r) {
            return -1;
        }
    }
    int rc = st_kv_alloc(rk->kv, need, r->blocks + r->n_blocks);
    ST_MODEL_ASSERT(rc == 0);
    r->n_blocks = want;
    return 0;
}

/* Takes the pressure fault's blocks, preempting running requests until they fit. */
static void apply_pressure(struct st_batch *b, struct rank *rk, uint64_t now)
{
    while (rk->n_pressure < b->pressure_target) {
        uint32_t take = b->pressure_target - rk->n_pressure;
        uint32_t avail = st_kv_available(rk->kv);
        if (take > avail) {
            take = avail;
        }
        if (take > 0) {
            int rc = st_kv_alloc(rk->kv, take, rk->pressure + rk->n_pressure);
            ST_MODEL_ASSERT(rc == 0);
            rk->n_pressure += take;
            continue;
        }
        if (!rk->running.tail) {
            break; /* the rest is held by nothing we can take back; retried next step */
        }
        preempt(b, rk, req_of(rk->running.tail), now);
    }
}

/* ---- planning ---- */

static void add_sched(struct rank *rk, struct req *r, uint64_t tokens, int decode)
{
    struct sched *s = &rk->sched[rk->n_sched++];
    s->r = r;
    s->tokens = tokens;
    s->ctx = r->computed;
    s->decode = decode;
}

/*
 * Running requests in admission order: a decoding one gets 1 + spec tokens of the budget and KV
 * room for them; one whose (chunked or recomputing) prefill is in progress gets the next chunk.
 * Victims of preemption are always taken from the tail, so they are never already planned.
 */
static void plan_running(struct st_batch *b, struct rank *rk, uint64_t *budget, uint64_t now)
{
    struct req *r = req_of(rk->running.head);
    while (r) {
        uint64_t tokens;
        uint64_t room;
        int decode = is_decoding(r);
        if (decode) {
            tokens = 1 + (uint64_t)b->spec;
            /* The final token's KV is never written, so room stops at prompt + max_tokens. */
            room = min_u64(r->computed + tokens, r->prompt_tokens + r->max_tokens);
        } else {
            tokens = min_u64(*budget, known_tokens(r) - r->computed);
            room = r->computed + tokens;
        }
        if (tokens == 0 || tokens > *budget) {
            r = req_of(r->link.next); /* no budget left for it in this step; it keeps its KV */
            continue;
        }
        if (ensure_blocks(b, rk, r, room, now) != 0) {
            break; /* r and everything after it went back to waiting */
        }
        add_sched(rk, r, tokens, decode);
        *budget -= tokens;
        r = req_of(r->link.next);
    }
}

/* Blocks promised to running requests but not yet allocated. */
static uint64_t outstanding_blocks(const struct rank *rk)
{
    uint64_t sum = 0;
    for (const struct req *r = req_of(rk->running.head); r; r = req_of(r->link.next)) {
        if (r->reserve_blocks > r->n_blocks) {
            sum += r->reserve_blocks - r->n_blocks;
        }
    }
    return sum;
}

/*
 * Admits waiting requests in FIFO order while the budget, max_running and the pool allow. The
 * pool check: free + evictable blocks, less the blocks promised to running requests, must cover
 * the new request's uncached known tokens plus admit_output_reserve * max_tokens. A request that
 * does not fit blocks those behind it.
 */
static void admit_waiting(struct st_batch *b, struct rank *rk, uint64_t *budget, uint64_t now)
{
    if (rk->preempted) {
        return; /* as vLLM: no admissions in a step that had to preempt */
    }
    if (!rk->waiting.head || *budget == 0 || rk->running.n >= b->max_running) {
        return;
    }
    uint64_t outstanding = outstanding_blocks(rk);
    double reserve = b->p.engine.admit_output_reserve;
    struct req *r;
    while ((r = req_of(rk->waiting.head)) != NULL && *budget > 0 &&
           rk->running.n < b->max_running) {
        uint64_t known = known_tokens(r);
        /* As vLLM and SGLang, at least the last known token is computed, never matched. */
        uint64_t limit = min_u64(r->n_hashes, (known - 1) / b->page);
        uint64_t target = r->prompt_tokens + (uint64_t)ceil(reserve * r->max_tokens);
        if (target < known) {
            target = known;
        }
        if (target > r->prompt_tokens + r->max_tokens) {
            target = r->prompt_tokens + r->max_tokens;
        }
        uint32_t reserve_blocks = blocks_for(b, target);
        /*
         * A lookup never makes blocks available and saves at most `limit`: when even that cannot
         * fit, skip it (a blocked head would otherwise walk its prefix every step).
         */
        uint32_t m = 0;
        if (rk->slots) {
            /* A slot's KV is its own: the reused prefix is copied into fresh blocks. */
            if ((uint64_t)st_kv_available(rk->kv) < outstanding + reserve_blocks) {
                break;
            }
            if (r->want_slot != NO_SLOT && rk->slots[r->want_slot].busy) {
                break; /* llama.cpp defers a task whose slot is busy; FIFO here */
            }
            r->slot = r->want_slot != NO_SLOT ? r->want_slot : slot_pick(b, rk, r);
            rk->slots[r->slot].busy = 1;
            if (b->p.engine.prefix_caching) {
                uint32_t common = slot_common(&rk->slots[r->slot], r);
                m = common < limit ? common : (uint32_t)limit;
            }
            r->n_blocks = 0;
            r->matched = 0;
        } else {
            if ((uint64_t)st_kv_available(rk->kv) + limit < outstanding + reserve_blocks) {
                break;
            }
            m = st_kv_match(rk->kv, r->hashes, (uint32_t)limit, r->blocks, now);
            uint32_t need = reserve_blocks - m;
            if ((uint64_t)st_kv_available(rk->kv) < outstanding + need) {
                st_kv_release(rk->kv, r->blocks, m, now);
                break;
            }
            r->n_blocks = m;
            r->matched = m;
        }
        st_dlist_remove(&rk->waiting, &r->link);
        st_dlist_push_back(&rk->running, &r->link);
        r->state = REQ_RUNNING;
        r->computed = (uint64_t)m * b->page;
        r->cached_tokens = r->computed;
        r->reserve_blocks = reserve_blocks;
        r->published = 0;
        if (!r->admitted_before) {
            /* First admissions only, so recomputation does not skew the hit rate. */
            r->admitted_before = 1;
            b->stats.prefix_query_tokens += r->prompt_tokens;
            b->stats.prefix_hit_tokens += r->cached_tokens;
        }
        uint64_t chunk = min_u64(*budget, known - r->computed);
        int rc = ensure_blocks(b, rk, r, r->computed + chunk, now);
        ST_MODEL_ASSERT(rc == 0); /* the check above left room for it */
        outstanding += reserve_blocks - r->n_blocks;
        add_sched(rk, r, chunk, 0);
        *budget -= chunk;
        struct st_batch_event *e = event_of(b, r);
        e->admitted = 1;
        e->cached_tokens = r->cached_tokens;
    }
}

static void plan_rank(struct st_batch *b, struct rank *rk, uint64_t now)
{
    rk->n_sched = 0;
    rk->preempted = 0;
    rk->ends_prefill = 0;
    memset(&rk->shape, 0, sizeof rk->shape);
    apply_pressure(b, rk, now);
    uint64_t budget = b->budget;
    plan_running(b, rk, &budget, now);
    admit_waiting(b, rk, &budget, now);
    struct st_step_shape *s = &rk->shape;
    s->spec_tokens = b->spec;
    for (uint32_t i = 0; i < rk->n_sched; i++) {
        const struct sched *x = &rk->sched[i];
        if (x->decode) {
            s->n_decode++;
            s->decode_ctx_sum += x->ctx;
        } else {
            s->n_prefill++;
            s->prefill_tokens += x->tokens;
            s->prefill_pairs += (double)x->tokens * ((double)x->ctx + (double)x->tokens / 2.0);
            if (x->r->computed + x->tokens == known_tokens(x->r)) {
                rk->ends_prefill = 1;
            }
        }
    }
}

/*
 * With pipeline parallelism the chunks of a prefill flow through the stages as a pipeline
 * (st_cost_prefill_s): a prefill-only step holds the first stage for 1/pp of its pass, and the
 * step whose chunk completes a prompt also waits for that chunk to leave the last stage. Steps
 * with decodes keep the whole pass (a decode needs its previous token).
 */
static uint64_t pipelined_ns(const struct st_batch *b, const struct rank *rk, uint64_t ns)
{
    uint32_t pp = b->p.engine.pp;
    if (pp <= 1 || ns == 0 || rk->shape.n_decode > 0 || rk->shape.n_prefill == 0) {
        return ns;
    }
    uint64_t t = ns / pp;
    if (rk->ends_prefill) {
        t += ns - ns / pp;
    }
    return t ? t : 1;
}

/* ---- accounting ---- */

/*
 * Drafts accepted in a row: position i with st_cost_accept_prob (spec_accept[i] decayed by
 * 2^(-ctx / halflife)), the one definition the cost model's expectations also use.
 */
static uint32_t draw_accepted(struct st_batch *b, struct req *r, uint64_t ctx)
{
    uint32_t a = 0;
    while (a < b->spec && st_rng_unit(&r->rng) < st_cost_accept_prob(&b->cost, a, ctx)) {
        b->stats.spec_accepted_per_pos[a]++;
        a++;
    }
    return a;
}

static void forget(struct st_batch *b, struct rank *rk, struct req *r, uint64_t now)
{
    if (r->state == REQ_RUNNING) {
        release_kv(b, rk, r, 1, now);
        st_dlist_remove(&rk->running, &r->link);
    } else {
        st_dlist_remove(&rk->waiting, &r->link);
    }
    map_remove(b, r);
    req_put(b, r);
}

static void publish_prompt(struct st_batch *b, struct rank *rk, struct req *r, uint64_t now)
{
    if (r->published || r->n_hashes == 0 || r->computed < (uint64_t)r->n_hashes * b->page) {
        return;
    }
    uint32_t m = r->matched;
    if (m < r->n_hashes) {
        uint64_t parent = m ? r->hashes[m - 1] : 0;
        st_kv_publish(rk->kv, parent, r->hashes + m, r->blocks + m, r->n_hashes - m, now);
    }
    r->published = 1;
}

static void account_rank(struct st_batch *b, struct rank *rk, uint64_t now)
{
    for (uint32_t i = 0; i < rk->n_sched; i++) {
        const struct sched *x = &rk->sched[i];
        struct req *r = x->r;
        uint32_t out = 0;
        uint32_t accepted = 0;
        if (x->decode) {
            if (b->spec > 0) {
                accepted = draw_accepted(b, r, x->ctx);
                b->stats.spec_drafts++;
                b->stats.spec_draft_tokens += b->spec;
                b->stats.spec_accepted_tokens += accepted;
            }
            out = 1 + accepted;
            if (out > r->max_tokens - r->generated) {
                out = r->max_tokens - r->generated;
            }
            r->computed += out; /* the input token and the accepted drafts */
        } else {
            r->computed += x->tokens;
            b->stats.prompt_tokens += x->tokens;
            if (r->computed == known_tokens(r)) {
                out = 1; /* the chunk that completes the prefill samples a token */
            }
        }
        publish_prompt(b, rk, r, now);
        if (out == 0) {
            continue;
        }
        struct st_batch_event *e = event_of(b, r);
        e->tokens = out;
        e->first = r->generated == 0;
        if (x->decode && b->spec > 0) {
            e->drafted = b->spec;
            e->accepted = accepted;
        }
        r->generated += out;
        b->stats.generation_tokens += out;
        if (r->generated == r->max_tokens) {
            e->finished = 1;
            b->stats.finished++;
            forget(b, rk, r, now);
        }
    }
}

/* ---- API ---- */

struct st_batch *st_batch_new(const struct st_profile *p, uint64_t seed)
{
    struct st_mem_plan plan;
    st_mem_plan_compute(p, &plan);
    if (!plan.fits || plan.kv_pool_blocks == 0 || plan.kv_pool_blocks > ST_KV_MAX_BLOCKS ||
        p->engine.page_size == 0) {
        return NULL;
    }
    struct st_batch *b = st_xcalloc(1, sizeof *b);
    b->p = *p;
    b->plan = plan;
    st_cost_init(&b->cost, &b->p);
    b->seed = seed;
    b->scale = 1.0;
    b->page = p->engine.page_size;
    if (p->engine.spec_method != ST_SPEC_NONE) {
        b->spec =
            p->engine.spec_steps < ST_SPEC_MAX_STEPS ? p->engine.spec_steps : ST_SPEC_MAX_STEPS;
    }
    /* A budget below one decode would stall every decode; validation should prevent it. */
    b->budget = p->engine.max_batched_tokens;
    if (b->budget < 1 + (uint64_t)b->spec) {
        b->budget = 1 + (uint64_t)b->spec;
    }
    b->max_running = p->engine.max_running ? p->engine.max_running : 1;
    b->n_ranks = p->engine.dp_attention ? p->engine.dp_attention : 1;
    b->pool_blocks = (uint32_t)plan.kv_pool_blocks;
    b->slot_scope =
        p->engine.cache_scope == ST_CACHE_SCOPE_SLOT ||
        (p->engine.cache_scope == ST_CACHE_SCOPE_AUTO && p->engine.dialect == ST_DIALECT_LLAMACPP);
    b->ranks = st_xcalloc(b->n_ranks, sizeof *b->ranks);
    for (uint32_t i = 0; i < b->n_ranks; i++) {
        /* Slot scope keeps its cache in the slots: the pool's own cache stays off. */
        b->ranks[i].kv =
            st_kv_new(b->pool_blocks, b->page, p->engine.prefix_caching && !b->slot_scope);
        b->ranks[i].sched = st_xcalloc(b->max_running, sizeof *b->ranks[i].sched);
        if (b->slot_scope) {
            b->ranks[i].slots = st_xcalloc(b->max_running, sizeof *b->ranks[i].slots);
        }
    }
    b->n_buckets = 64;
    b->buckets = st_xcalloc(b->n_buckets, sizeof *b->buckets);
    b->stats.ranks = b->n_ranks;
    return b;
}

static void free_req(struct req *r)
{
    free(r->hashes);
    free(r->blocks);
    free(r);
}

void st_batch_free(struct st_batch *b)
{
    if (!b) {
        return;
    }
    for (uint32_t i = 0; i < b->n_buckets; i++) {
        struct req *r = b->buckets[i];
        while (r) {
            struct req *next = r->hnext;
            free_req(r);
            r = next;
        }
    }
    while (b->pool) {
        struct req *next = b->pool->hnext;
        free_req(b->pool);
        b->pool = next;
    }
    for (uint32_t i = 0; i < b->n_ranks; i++) {
        st_kv_free(b->ranks[i].kv);
        free(b->ranks[i].pressure);
        free(b->ranks[i].sched);
        for (uint32_t k = 0; b->ranks[i].slots && k < b->max_running; k++) {
            free(b->ranks[i].slots[k].hashes);
        }
        free(b->ranks[i].slots);
    }
    free(b->ranks);
    free(b->buckets);
    free(b->events);
    free(b);
}

/*
 * The dialect's 400 message for a request over the limit of `limit` tokens (the context length,
 * or one rank's KV pool when that is smaller). Wording from the servers' sources: vLLM's
 * serving_engine, SGLang's tokenizer_manager (input alone, then input plus completion), and
 * llama.cpp's server (tests/../wire/llamacpp/errors.txt). llama.cpp rejects only a prompt over the
 * context; when the prompt fits but prompt + max_tokens does not, the simulator still rejects
 * (the contract of st_batch_submit) and names the sum.
 */
static void toobig_message(const struct st_batch *b, uint64_t limit, uint64_t prompt,
                           uint32_t max_tokens, char *err, size_t errlen)
{
    unsigned long long n = limit;
    unsigned long long pr = prompt;
    unsigned long long total = prompt + max_tokens;
    if (!err || errlen == 0) {
        return;
    }
    switch (b->p.engine.dialect) {
    case ST_DIALECT_SGLANG:
        if (prompt >= limit) {
            snprintf(err, errlen,
                     "The input (%llu tokens) is longer than the model's context length (%llu "
                     "tokens).",
                     pr, n);
        } else {
            snprintf(err, errlen,
                     "Requested token count exceeds the model's maximum context length of %llu "
                     "tokens. You requested a total of %llu tokens: %llu tokens from the input "
                     "messages and %u tokens for the completion. Please reduce the number of "
                     "tokens in the input messages or the completion to fit within the limit.",
                     n, total, pr, max_tokens);
        }
        break;
    case ST_DIALECT_LLAMACPP:
        snprintf(err, errlen,
                 "request (%llu tokens) exceeds the available context size (%llu tokens), try "
                 "increasing it",
                 prompt > limit ? pr : total, n);
        break;
    case ST_DIALECT_VLLM:
    default:
        snprintf(err, errlen,
                 "This model's maximum context length is %llu tokens. However, you requested "
                 "%llu tokens (%llu in the messages, %u in the completion). Please reduce the "
                 "length of the messages or completion.",
                 n, total, pr, max_tokens);
        break;
    }
}

int st_batch_submit(struct st_batch *b, uint64_t id, uint64_t prompt_tokens, const uint64_t *hashes,
                    uint32_t n_hashes, uint32_t max_tokens, uint64_t now, char *err, size_t errlen)
{
    (void)now;
    if (prompt_tokens == 0 || max_tokens == 0 || n_hashes > prompt_tokens / b->page) {
        if (err && errlen) {
            snprintf(err, errlen, "invalid request: %s",
                     prompt_tokens == 0 ? "empty prompt"
                     : max_tokens == 0  ? "max_tokens must be at least 1"
                                        : "more block hashes than full prompt blocks");
        }
        return -EINVAL;
    }
    if (map_find(b, id)) {
        return -EEXIST;
    }
    uint64_t ctx = b->p.engine.context_length;
    uint64_t pool = (uint64_t)b->pool_blocks * b->page;
    uint64_t limit = ctx < pool ? ctx : pool;
    if (prompt_tokens > limit || prompt_tokens + max_tokens > limit) {
        toobig_message(b, limit, prompt_tokens, max_tokens, err, errlen);
        return ST_ETOOBIG;
    }
    struct req *r = req_get(b);
    uint32_t cap_blocks = blocks_for(b, prompt_tokens + max_tokens);
    if (r->cap_hashes < n_hashes) {
        r->cap_hashes = n_hashes;
        r->hashes = st_xrealloc(r->hashes, (size_t)n_hashes * sizeof *r->hashes);
    }
    if (r->cap_blocks < cap_blocks) {
        r->cap_blocks = cap_blocks;
        r->blocks = st_xrealloc(r->blocks, (size_t)cap_blocks * sizeof *r->blocks);
    }
    if (n_hashes) {
        memcpy(r->hashes, hashes, (size_t)n_hashes * sizeof *hashes);
    }
    uint32_t rank = (uint32_t)(b->submitted++ % b->n_ranks);
    /* A fresh request but for the arrays it keeps from the pool (and links set below). */
    *r = (struct req){
        .id = id,
        .hnext = r->hnext,
        .state = REQ_WAITING,
        .rank = rank,
        .prompt_tokens = prompt_tokens,
        .max_tokens = max_tokens,
        .n_hashes = n_hashes,
        .cap_hashes = r->cap_hashes,
        .hashes = r->hashes,
        .cap_blocks = r->cap_blocks,
        .blocks = r->blocks,
        .ev_idx = r->ev_idx,
        .noise = 1.0,
        .slot = NO_SLOT,
        .want_slot = NO_SLOT,
    };
    st_rng_seed(&r->rng, st_hash_mix(b->seed ^ st_hash_mix(id + 0x9e3779b97f4a7c15ull)));
    st_dlist_push_back(&b->ranks[r->rank].waiting, &r->link);
    map_insert(b, r);
    return 0;
}

/* A step's time under the staged noise: times the launch's scale and the mean factor of the
 * requests in it. Exact (unchanged) without noise. */
static uint64_t noisy_ns(const struct st_batch *b, const struct rank *rk, uint64_t ns)
{
    if (ns == 0 || (!b->noisy && b->scale == 1.0)) {
        return ns;
    }
    double f = 0;
    for (uint32_t i = 0; i < rk->n_sched; i++) {
        f += rk->sched[i].r->noise;
    }
    f = b->scale * (rk->n_sched ? f / rk->n_sched : 1.0);
    double v = (double)ns * f;
    return v < 1 ? 1 : (uint64_t)llround(v);
}

int st_batch_set_noise(struct st_batch *b, uint64_t id, double factor)
{
    struct req *r = map_find(b, id);
    if (!r) {
        return ST_ENOTFOUND;
    }
    r->noise = factor > 0 && isfinite(factor) ? factor : 1.0;
    b->noisy |= r->noise != 1.0;
    return 0;
}

int st_batch_reseed(struct st_batch *b, uint64_t id, uint64_t seed)
{
    struct req *r = map_find(b, id);
    if (!r) {
        return ST_ENOTFOUND;
    }
    st_rng_seed(&r->rng, st_hash_mix(seed ^ 0x9e3779b97f4a7c15ull));
    return 0;
}

int st_batch_pin_slot(struct st_batch *b, uint64_t id, uint32_t slot)
{
    struct req *r = map_find(b, id);
    if (!r) {
        return ST_ENOTFOUND;
    }
    if (b->slot_scope && slot < b->max_running) {
        r->want_slot = slot;
    }
    return 0;
}

void st_batch_set_scale(struct st_batch *b, double factor)
{
    b->scale = factor > 0 && isfinite(factor) ? factor : 1.0;
}

void st_batch_step(struct st_batch *b, uint64_t now, struct st_batch_result *out)
{
    b->stamp++;
    b->n_events = 0;
    memset(out, 0, sizeof *out);
    uint64_t slowest = 0;
    uint32_t slowest_rank = 0;
    for (uint32_t i = 0; i < b->n_ranks; i++) {
        struct rank *rk = &b->ranks[i];
        plan_rank(b, rk, now);
        uint64_t ns = rk->n_sched ? pipelined_ns(b, rk, st_cost_step_ns(&b->cost, &rk->shape)) : 0;
        ns = noisy_ns(b, rk, ns);
        if (ns > slowest) {
            slowest = ns;
            slowest_rank = i;
        }
    }
    for (uint32_t i = 0; i < b->n_ranks; i++) {
        account_rank(b, &b->ranks[i], now);
    }
    if (slowest > 0) {
        b->stats.steps++;
    }
    out->duration_ns = slowest;
    out->shape = b->ranks[slowest_rank].shape;
    out->events = b->events;
    out->n_events = b->n_events;
}

int st_batch_busy(const struct st_batch *b)
{
    return b->n_reqs > 0;
}

int st_batch_abort(struct st_batch *b, uint64_t id, uint64_t now)
{
    struct req *r = map_find(b, id);
    if (!r) {
        return ST_ENOTFOUND;
    }
    forget(b, &b->ranks[r->rank], r, now);
    return 0;
}

/* Empties one slot; a busy one is emptied when its request leaves (llama.cpp defers the erase
 * of a busy slot until it is idle). Returns the tokens it held, 0 for a busy one. */
static uint64_t slot_erase(struct slot *s)
{
    if (s->busy) {
        s->erase_pending = 1;
        return 0;
    }
    uint64_t n = s->tokens;
    s->n_hashes = 0;
    s->tokens = 0;
    return n;
}

/* Tokens the prefix cache of rank rk holds and would give back to a flush. */
static uint64_t cached_tokens(const struct st_batch *b, const struct rank *rk)
{
    uint64_t n = 0;
    if (rk->slots) {
        for (uint32_t k = 0; k < b->max_running; k++) {
            n += rk->slots[k].busy ? 0 : rk->slots[k].tokens;
        }
        return n;
    }
    struct st_kv_stats ks;
    st_kv_get_stats(rk->kv, &ks);
    return (uint64_t)ks.evictable_blocks * b->page;
}

void st_batch_flush(struct st_batch *b)
{
    for (uint32_t i = 0; i < b->n_ranks; i++) {
        st_kv_flush(b->ranks[i].kv);
        for (uint32_t k = 0; b->ranks[i].slots && k < b->max_running; k++) {
            (void)slot_erase(&b->ranks[i].slots[k]);
        }
    }
}

uint64_t st_batch_erase_slot(struct st_batch *b, uint32_t slot)
{
    struct rank *rk = &b->ranks[(slot / b->max_running) % b->n_ranks];
    if (rk->slots) {
        return slot_erase(&rk->slots[slot % b->max_running]);
    }
    uint64_t n = 0;
    for (uint32_t i = 0; i < b->n_ranks; i++) {
        n += cached_tokens(b, &b->ranks[i]);
    }
    st_batch_flush(b);
    return n;
}

int st_batch_slot_scope(const struct st_batch *b)
{
    return b->slot_scope;
}

void st_batch_pressure(struct st_batch *b, uint64_t blocks)
{
    uint32_t target = blocks < b->pool_blocks ? (uint32_t)blocks : b->pool_blocks;
    b->pressure_target = target;
    for (uint32_t i = 0; i < b->n_ranks; i++) {
        struct rank *rk = &b->ranks[i];
        if (rk->cap_pressure < target) {
            rk->cap_pressure = target;
            rk->pressure = st_xrealloc(rk->pressure, (size_t)target * sizeof *rk->pressure);
        }
        if (rk->n_pressure > target) {
            /* Blocks given back carry no cache entry, so `now` does not matter for them. */
            st_kv_release(rk->kv, rk->pressure + target, rk->n_pressure - target, 0);
            rk->n_pressure = target;
        }
    }
}

void st_batch_get_stats(const struct st_batch *b, struct st_batch_stats *out)
{
    *out = b->stats;
    out->ranks = b->n_ranks;
    out->running = 0;
    out->waiting = 0;
    out->kv_total_tokens = 0;
    out->kv_used_tokens = 0;
    for (uint32_t i = 0; i < b->n_ranks; i++) {
        const struct rank *rk = &b->ranks[i];
        struct st_kv_stats ks;
        st_kv_get_stats(rk->kv, &ks);
        out->running += rk->running.n;
        out->waiting += rk->waiting.n;
        out->kv_total_tokens += (uint64_t)ks.total_blocks * b->page;
        out->kv_used_tokens += (uint64_t)(ks.used_blocks - rk->n_pressure) * b->page;
    }
}

void st_batch_get_rank(const struct st_batch *b, uint32_t rank, struct st_batch_rank *out)
{
    ST_MODEL_ASSERT(rank < b->n_ranks);
    const struct rank *rk = &b->ranks[rank];
    out->kv = rk->kv;
    out->shape = rk->shape;
    out->running = rk->running.n;
    out->waiting = rk->waiting.n;
    out->pressure_blocks = rk->n_pressure;
}

const struct st_mem_plan *st_batch_plan(const struct st_batch *b)
{
    return &b->plan;
}
