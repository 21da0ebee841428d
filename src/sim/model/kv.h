/*
 * The paged KV pool and its prefix cache, at block granularity (page_size tokens a block).
 *
 * Blocks are reference-counted. A request holds one reference on every block of its KV. A full
 * block whose tokens are known can be published to the prefix cache under its chained hash
 * (the hash of the block's tokens and of the hash of the block before it, so equal hashes mean
 * equal prefixes, as in vLLM's block hashes). Cached blocks form a tree (each block's parent is
 * the block before it); a lookup walks the request's hash chain from the root and stops at the
 * first miss. A cached block whose reference count falls to 0 stays cached and becomes
 * evictable; allocation takes a free block first, then evicts the least recently used evictable
 * block that has no cached child (so chains are evicted from their tails, as SGLang's radix
 * cache does). Pure and deterministic: ties break by block id. All operations are O(1) or
 * O(blocks touched) amortised.
 *
 * Invariants (checked by st_kv_check in tests): free + evictable + referenced == total;
 * a referenced block is never free; every cached block's parent is cached.
 */
#ifndef ST_SIM_MODEL_KV_H
#define ST_SIM_MODEL_KV_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

struct st_kv;

struct st_kv_stats {
    uint32_t total_blocks;
    uint32_t free_blocks;      /* never used or released without being cached */
    uint32_t evictable_blocks; /* cached, reference count 0 (pinned ones too: st_kv_available) */
    uint32_t used_blocks;      /* reference count > 0 */
    uint32_t cached_blocks;    /* in the prefix cache (referenced or not) */
    uint64_t query_tokens;     /* tokens looked up by st_kv_match (prefix-cache queries) */
    uint64_t hit_tokens;       /* of which found */
    uint64_t evictions;        /* blocks evicted from the cache to satisfy allocations */
};

#define ST_KV_MAX_BLOCKS (1u << 28)

/*
 * prefix_caching == 0: st_kv_match never hits (and counts nothing) and st_kv_publish does
 * nothing. Returns NULL when total_blocks > ST_KV_MAX_BLOCKS or page_size is 0. Hash value 0 is
 * reserved for the root: a chain stops at it. Passing a block id that is out of range or holds no
 * reference to st_kv_publish or st_kv_release is a caller bug and aborts.
 */
struct st_kv *st_kv_new(uint32_t total_blocks, uint32_t page_size, int prefix_caching);
void st_kv_free(struct st_kv *kv);

/*
 * Finds the longest cached prefix of hashes[0..n) (chained block hashes of a prompt's full
 * blocks), takes a reference on each matched block, writes their ids to blocks_out and returns
 * the count. Counts n * page_size queried tokens and the matched ones as hits. now orders LRU.
 */
uint32_t st_kv_match(struct st_kv *kv, const uint64_t *hashes, uint32_t n, uint32_t *blocks_out,
                     uint64_t now);
/*
 * Blocks that st_kv_alloc could provide now: free + evictable, less the pinned ones (evictable
 * blocks above a block that is still referenced, e.g. after a request released a prefix it
 * matched but kept the blocks below it, or published below another request's copy).
 */
uint32_t st_kv_available(const struct st_kv *kv);
/*
 * Takes n blocks with one reference each (evicting as needed). Returns 0, or ST_ETOOBIG when
 * fewer than n are available (nothing is taken then).
 */
int st_kv_alloc(struct st_kv *kv, uint32_t n, uint32_t *blocks_out) ST_WUR;
/*
 * Publishes full blocks of a request to the cache: blocks[i] holds the tokens whose chained hash
 * is hashes[i], and blocks[0]'s parent is the block cached under parent_hash (0 for the root).
 * A hash already cached under another block keeps the cached block (the request's copy stays
 * private; its last use becomes now). The request keeps its references. Publishing stops at the
 * first block that cannot join the tree: parent_hash not cached, a cached hash whose cached
 * parent is not the expected one (a hash collision), a block already cached under another hash,
 * or a new block whose parent is neither referenced nor above a referenced block.
 */
void st_kv_publish(struct st_kv *kv, uint64_t parent_hash, const uint64_t *hashes,
                   const uint32_t *blocks, uint32_t n, uint64_t now);
/*
 * Drops one reference from each block (in order; last use becomes now). Uncached blocks at 0
 * become free (appended to the free list, which st_kv_alloc takes from the front).
 */
void st_kv_release(struct st_kv *kv, const uint32_t *blocks, uint32_t n, uint64_t now);
/*
 * Empties the cache: every unreferenced cached block becomes free (appended in block id order);
 * referenced ones leave the cache. O(total_blocks).
 */
void st_kv_flush(struct st_kv *kv);
void st_kv_get_stats(const struct st_kv *kv, struct st_kv_stats *out);
/* Verifies the invariants; returns 0 or ST_EPROTO with a description in err. For tests. */
int st_kv_check(const struct st_kv *kv, char *err, size_t errlen) ST_WUR;

#endif
