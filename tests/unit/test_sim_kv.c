/*
 * Tests for src/sim/model/kv.c: hand-built cases for match, publish, release, eviction order
 * (LRU, leaf first, a re-leafed parent at its own last use), pinning, flush, counters and the
 * publish rules; then a differential test against a brute-force model (plain arrays, linear
 * scans) over seeded random request sequences on pools of 1 to 200 blocks, comparing every
 * result, every statistic and st_kv_check after each operation. Seeded; no clock.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "base/rng.h"
#include "sim/model/kv.h"

#define PAGE 16
#define NONE UINT32_MAX

/* Chained block hashes of contents[0..n): each mixes the previous hash and the block's tokens. */
static uint64_t chain_next(uint64_t prev, uint32_t content)
{
    uint64_t h = prev * 0x9e3779b97f4a7c15ull + content + 1;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h != 0 ? h : 1;
}

static void chain(const uint32_t *contents, uint32_t n, uint64_t *out)
{
    uint64_t h = 0;
    for (uint32_t i = 0; i < n; i++) {
        h = chain_next(h, contents[i]);
        out[i] = h;
    }
}

static void assert_ok(const struct st_kv *kv)
{
    char err[160] = "";
    int rc = st_kv_check(kv, err, sizeof(err));
    if (rc != 0) {
        fail_msg("st_kv_check: %s", err);
    }
}

static struct st_kv_stats stats_of(const struct st_kv *kv)
{
    struct st_kv_stats s;
    st_kv_get_stats(kv, &s);
    return s;
}

/* Allocates n blocks (asserting success) and publishes them as the chain of contents[0..n). */
static void put_chain(struct st_kv *kv, const uint32_t *contents, uint32_t n, uint32_t *blocks,
                      uint64_t now)
{
    uint64_t h[16];
    chain(contents, n, h);
    assert_int_equal(st_kv_alloc(kv, n, blocks), 0);
    st_kv_publish(kv, 0, h, blocks, n, now);
    assert_ok(kv);
}

static void test_round_trip(void **state)
{
    (void)state;
    struct st_kv *kv = st_kv_new(8, PAGE, 1);
    assert_non_null(kv);
    assert_ok(kv);
    static const uint32_t c[] = {1, 2, 3};
    uint64_t h[3];
    chain(c, 3, h);
    uint32_t got[3], blocks[3];
    assert_int_equal(st_kv_match(kv, h, 3, got, 1), 0);
    assert_int_equal(st_kv_alloc(kv, 3, blocks), 0);
    assert_int_equal(blocks[0], 0);
    assert_int_equal(blocks[1], 1);
    assert_int_equal(blocks[2], 2);
    st_kv_publish(kv, 0, h, blocks, 3, 2);
    struct st_kv_stats s = stats_of(kv);
    assert_int_equal(s.cached_blocks, 3);
    assert_int_equal(s.used_blocks, 3);
    assert_int_equal(s.free_blocks, 5);
    assert_int_equal(s.evictable_blocks, 0);
    st_kv_release(kv, blocks, 3, 3);
    assert_ok(kv);
    s = stats_of(kv);
    assert_int_equal(s.used_blocks, 0);
    assert_int_equal(s.evictable_blocks, 3);
    assert_int_equal(s.free_blocks, 5);
    assert_int_equal(s.cached_blocks, 3);
    assert_int_equal(st_kv_available(kv), 8);
    assert_int_equal(st_kv_match(kv, h, 3, got, 4), 3);
    assert_memory_equal(got, blocks, sizeof(blocks));
    s = stats_of(kv);
    assert_int_equal(s.used_blocks, 3);
    assert_int_equal(s.evictable_blocks, 0);
    assert_int_equal(s.query_tokens, 6 * PAGE);
    assert_int_equal(s.hit_tokens, 3 * PAGE);
    assert_int_equal(s.evictions, 0);
    st_kv_release(kv, got, 3, 5);
    assert_ok(kv);
    st_kv_free(kv);
}

static void test_shared_prefix(void **state)
{
    (void)state;
    struct st_kv *kv = st_kv_new(8, PAGE, 1);
    static const uint32_t ca[] = {1, 2, 3};
    static const uint32_t cb[] = {1, 2, 9, 9};
    uint32_t a[3], b[4];
    put_chain(kv, ca, 3, a, 1);
    uint64_t hb[4];
    chain(cb, 4, hb);
    /* Exactly the two shared full blocks hit, and they are A's blocks. */
    assert_int_equal(st_kv_match(kv, hb, 4, b, 2), 2);
    assert_int_equal(b[0], a[0]);
    assert_int_equal(b[1], a[1]);
    assert_int_equal(st_kv_alloc(kv, 2, b + 2), 0);
    st_kv_publish(kv, hb[1], hb + 2, b + 2, 2, 3);
    assert_ok(kv);
    struct st_kv_stats s = stats_of(kv);
    assert_int_equal(s.cached_blocks, 5);
    assert_int_equal(s.used_blocks, 5);
    assert_int_equal(s.hit_tokens, 2 * PAGE);
    assert_int_equal(s.query_tokens, 4 * PAGE);
    /* Two references on the shared blocks: one release leaves them used. */
    st_kv_release(kv, b, 4, 4);
    assert_ok(kv);
    s = stats_of(kv);
    assert_int_equal(s.used_blocks, 3);
    assert_int_equal(s.evictable_blocks, 2);
    st_kv_release(kv, a, 3, 5);
    assert_ok(kv);
    s = stats_of(kv);
    assert_int_equal(s.used_blocks, 0);
    assert_int_equal(s.evictable_blocks, 5);
    /* A one-block prompt of the same start hits one block. */
    uint32_t one;
    assert_int_equal(st_kv_match(kv, hb, 1, &one, 6), 1);
    assert_int_equal(one, a[0]);
    st_kv_release(kv, &one, 1, 6);
    st_kv_free(kv);
}

static void test_partial_block_never_hits(void **state)
{
    (void)state;
    /* 40 tokens with 16-token pages: two full blocks and a partial one that has no hash. */
    struct st_kv *kv = st_kv_new(8, PAGE, 1);
    static const uint32_t c[] = {4, 5};
    uint64_t h[2];
    chain(c, 2, h);
    uint32_t blocks[3], got[3];
    assert_int_equal(st_kv_match(kv, h, 2, got, 1), 0);
    assert_int_equal(st_kv_alloc(kv, 3, blocks), 0);
    st_kv_publish(kv, 0, h, blocks, 2, 1);
    st_kv_release(kv, blocks, 3, 2);
    assert_ok(kv);
    struct st_kv_stats s = stats_of(kv);
    assert_int_equal(s.cached_blocks, 2);
    assert_int_equal(s.evictable_blocks, 2);
    assert_int_equal(s.free_blocks, 6);
    /* The same prompt again: the full blocks hit, the partial block is recomputed in a new one. */
    assert_int_equal(st_kv_match(kv, h, 2, got, 3), 2);
    assert_int_equal(got[0], blocks[0]);
    assert_int_equal(got[1], blocks[1]);
    assert_int_equal(st_kv_alloc(kv, 1, got + 2), 0);
    assert_true(got[2] != blocks[0] && got[2] != blocks[1]);
    s = stats_of(kv);
    assert_int_equal(s.query_tokens, 4 * PAGE);
    assert_int_equal(s.hit_tokens, 2 * PAGE);
    st_kv_release(kv, got, 3, 4);
    assert_ok(kv);
    st_kv_free(kv);
}

static void test_eviction_lru_leaf_first(void **state)
{
    (void)state;
    struct st_kv *kv = st_kv_new(7, PAGE, 1);
    static const uint32_t ca[] = {1, 2, 3};
    static const uint32_t cb[] = {7, 8};
    static const uint32_t cc[] = {5};
    static const uint32_t cd[] = {6};
    uint32_t a[3], b[2], c1, d1;
    put_chain(kv, ca, 3, a, 1);
    put_chain(kv, cb, 2, b, 1);
    put_chain(kv, cc, 1, &c1, 1);
    put_chain(kv, cd, 1, &d1, 1);
    st_kv_release(kv, &d1, 1, 30); /* d (id 6) and c (id 5) tie at 30: c goes first by id */
    st_kv_release(kv, &c1, 1, 30);
    st_kv_release(kv, b, 2, 20);
    st_kv_release(kv, a, 3, 10);
    assert_ok(kv);
    assert_int_equal(stats_of(kv).free_blocks, 0);
    /* The oldest chain goes first, from its tail, though its head has the lowest id. */
    static const uint32_t want[] = {2, 1, 0, 4, 3, 5, 6};
    for (uint32_t i = 0; i < 7; i++) {
        uint32_t x;
        assert_int_equal(st_kv_alloc(kv, 1, &x), 0);
        assert_int_equal(x, want[i]);
        assert_int_equal(stats_of(kv).evictions, i + 1);
        assert_ok(kv);
    }
    assert_int_equal(stats_of(kv).cached_blocks, 0);
    st_kv_free(kv);
}

static void test_releaf_keeps_own_last_use(void **state)
{
    (void)state;
    struct st_kv *kv = st_kv_new(3, PAGE, 1);
    static const uint32_t cx[] = {1, 2};
    static const uint32_t cy[] = {9};
    uint64_t hx[2];
    chain(cx, 2, hx);
    uint32_t x0, r2[2], y0;
    put_chain(kv, cx, 1, &x0, 1);
    /* R2 matches x0 and adds x1 below it. */
    assert_int_equal(st_kv_match(kv, hx, 2, r2, 2), 1);
    assert_int_equal(st_kv_alloc(kv, 1, r2 + 1), 0);
    st_kv_publish(kv, hx[0], hx + 1, r2 + 1, 1, 2);
    /* Both holders let go of x0 at 3 while R2 keeps x1: x0 is pinned, not available. */
    st_kv_release(kv, &x0, 1, 3);
    st_kv_release(kv, r2, 1, 3);
    assert_ok(kv);
    assert_int_equal(stats_of(kv).evictable_blocks, 1);
    assert_int_equal(st_kv_available(kv), 1);
    st_kv_release(kv, r2 + 1, 1, 4);
    put_chain(kv, cy, 1, &y0, 5);
    st_kv_release(kv, &y0, 1, 5);
    assert_ok(kv);
    assert_int_equal(st_kv_available(kv), 3);
    /* x1 (4) goes first; x0 then rejoins the LRU at 3, ahead of y0 (5). */
    uint32_t got;
    assert_int_equal(st_kv_alloc(kv, 1, &got), 0);
    assert_int_equal(got, r2[1]);
    assert_ok(kv);
    assert_int_equal(st_kv_alloc(kv, 1, &got), 0);
    assert_int_equal(got, x0);
    assert_ok(kv);
    assert_int_equal(st_kv_alloc(kv, 1, &got), 0);
    assert_int_equal(got, y0);
    st_kv_free(kv);
}

static void test_referenced_never_evicted(void **state)
{
    (void)state;
    struct st_kv *kv = st_kv_new(4, PAGE, 1);
    static const uint32_t ca[] = {1, 2};
    static const uint32_t cb[] = {3, 4};
    uint32_t a[2], b[2], got[4];
    put_chain(kv, ca, 2, a, 1);
    put_chain(kv, cb, 2, b, 2);
    st_kv_release(kv, b, 2, 3);
    /* A's blocks are older but held. */
    assert_int_equal(st_kv_available(kv), 2);
    assert_int_equal(st_kv_alloc(kv, 3, got), ST_ETOOBIG);
    assert_int_equal(st_kv_alloc(kv, 2, got), 0);
    assert_int_equal(got[0], b[1]);
    assert_int_equal(got[1], b[0]);
    assert_int_equal(st_kv_alloc(kv, 1, got + 2), ST_ETOOBIG);
    uint64_t ha[2];
    chain(ca, 2, ha);
    st_kv_release(kv, a, 2, 4);
    assert_int_equal(st_kv_match(kv, ha, 2, got + 2, 5), 2);
    assert_int_equal(got[2], a[0]);
    assert_ok(kv);
    st_kv_free(kv);
}

static void test_alloc_too_big_takes_nothing(void **state)
{
    (void)state;
    struct st_kv *kv = st_kv_new(6, PAGE, 1);
    static const uint32_t ca[] = {1, 2, 3};
    uint32_t a[3], got[6];
    put_chain(kv, ca, 3, a, 1);
    st_kv_release(kv, a + 1, 2, 2); /* a[0] stays held: a[1], a[2] evictable */
    struct st_kv_stats before = stats_of(kv);
    assert_int_equal(st_kv_available(kv), 5);
    assert_int_equal(st_kv_alloc(kv, 6, got), ST_ETOOBIG);
    assert_int_equal(st_kv_alloc(kv, UINT32_MAX, got), ST_ETOOBIG);
    struct st_kv_stats after = stats_of(kv);
    assert_int_equal(after.free_blocks, before.free_blocks);
    assert_int_equal(after.evictable_blocks, before.evictable_blocks);
    assert_int_equal(after.used_blocks, before.used_blocks);
    assert_int_equal(after.cached_blocks, before.cached_blocks);
    assert_int_equal(after.evictions, before.evictions);
    assert_int_equal(st_kv_available(kv), 5);
    assert_ok(kv);
    assert_int_equal(st_kv_alloc(kv, 0, NULL), 0);
    assert_int_equal(st_kv_alloc(kv, 5, got), 0);
    assert_int_equal(stats_of(kv).evictions, 2);
    assert_int_equal(st_kv_available(kv), 0);
    assert_ok(kv);
    st_kv_free(kv);
}

static void test_flush(void **state)
{
    (void)state;
    struct st_kv *kv = st_kv_new(6, PAGE, 1);
    static const uint32_t ca[] = {1, 2};
    static const uint32_t cb[] = {3, 4};
    uint32_t a[2], b[2], got[6];
    put_chain(kv, ca, 2, a, 1); /* blocks 0, 1: held */
    put_chain(kv, cb, 2, b, 1); /* blocks 2, 3: released below */
    st_kv_release(kv, b, 2, 2);
    st_kv_flush(kv);
    assert_ok(kv);
    struct st_kv_stats s = stats_of(kv);
    assert_int_equal(s.cached_blocks, 0);
    assert_int_equal(s.evictable_blocks, 0);
    assert_int_equal(s.used_blocks, 2);
    assert_int_equal(s.free_blocks, 4);
    assert_int_equal(s.evictions, 0);
    uint64_t h[2];
    chain(ca, 2, h);
    assert_int_equal(st_kv_match(kv, h, 2, got, 3), 0);
    chain(cb, 2, h);
    assert_int_equal(st_kv_match(kv, h, 2, got, 3), 0);
    /* A's blocks left the cache, so releasing them frees them. */
    st_kv_release(kv, a, 2, 4);
    assert_ok(kv);
    assert_int_equal(stats_of(kv).free_blocks, 6);
    /* Free order: 4, 5 (never used), then the flushed 2, 3 by id, then 0, 1 released last. */
    static const uint32_t want[] = {4, 5, 2, 3, 0, 1};
    assert_int_equal(st_kv_alloc(kv, 6, got), 0);
    assert_memory_equal(got, want, sizeof(want));
    st_kv_release(kv, got, 6, 5);
    st_kv_flush(kv); /* an empty cache: nothing to do */
    assert_ok(kv);
    st_kv_free(kv);
}

static void test_prefix_caching_off(void **state)
{
    (void)state;
    struct st_kv *kv = st_kv_new(4, PAGE, 0);
    static const uint32_t c[] = {1, 2};
    uint64_t h[2];
    chain(c, 2, h);
    uint32_t blocks[2], got[2];
    assert_int_equal(st_kv_alloc(kv, 2, blocks), 0);
    st_kv_publish(kv, 0, h, blocks, 2, 1);
    struct st_kv_stats s = stats_of(kv);
    assert_int_equal(s.cached_blocks, 0);
    st_kv_release(kv, blocks, 2, 2);
    s = stats_of(kv);
    assert_int_equal(s.free_blocks, 4);
    assert_int_equal(s.evictable_blocks, 0);
    assert_int_equal(st_kv_match(kv, h, 2, got, 3), 0);
    s = stats_of(kv);
    assert_int_equal(s.query_tokens, 0);
    assert_int_equal(s.hit_tokens, 0);
    assert_ok(kv);
    st_kv_free(kv);
}

static void test_counters(void **state)
{
    (void)state;
    struct st_kv *kv = st_kv_new(16, 32, 1);
    static const uint32_t c[] = {1, 2, 3, 4};
    uint64_t h[4];
    chain(c, 4, h);
    uint32_t blocks[4], got[4];
    assert_int_equal(st_kv_match(kv, h, 4, got, 1), 0);
    assert_int_equal(st_kv_alloc(kv, 4, blocks), 0);
    st_kv_publish(kv, 0, h, blocks, 3, 1); /* the fourth is not published */
    st_kv_release(kv, blocks, 4, 2);
    assert_int_equal(st_kv_match(kv, h, 4, got, 3), 3);
    st_kv_release(kv, got, 3, 3);
    assert_int_equal(st_kv_match(kv, h, 2, got, 4), 2);
    st_kv_release(kv, got, 2, 4);
    assert_int_equal(st_kv_match(kv, h, 0, NULL, 5), 0);
    struct st_kv_stats s = stats_of(kv);
    assert_int_equal(s.query_tokens, (4 + 4 + 2) * 32);
    assert_int_equal(s.hit_tokens, (3 + 2) * 32);
    assert_int_equal(s.evictions, 0);
    assert_int_equal(s.total_blocks, 16);
    assert_ok(kv);
    st_kv_free(kv);
}

static void test_duplicate_publish_and_pin(void **state)
{
    (void)state;
    struct st_kv *kv = st_kv_new(8, PAGE, 1);
    static const uint32_t c[] = {1, 2, 5};
    uint64_t h[3];
    chain(c, 3, h);
    uint32_t a[2], b[3], got[3];
    /* Two requests missed together and computed the same two blocks privately. */
    assert_int_equal(st_kv_alloc(kv, 2, a), 0);
    assert_int_equal(st_kv_alloc(kv, 3, b), 0);
    st_kv_publish(kv, 0, h, a, 2, 1);
    st_kv_publish(kv, 0, h, b, 3, 2);
    assert_ok(kv);
    /* The first copy stays cached; B's third block hangs below A's second. */
    assert_int_equal(stats_of(kv).cached_blocks, 3);
    assert_int_equal(st_kv_match(kv, h, 3, got, 3), 3);
    assert_int_equal(got[0], a[0]);
    assert_int_equal(got[1], a[1]);
    assert_int_equal(got[2], b[2]);
    st_kv_release(kv, got, 3, 3);
    /* A leaves: its blocks are evictable but pinned by B's cached block below them. */
    st_kv_release(kv, a, 2, 4);
    assert_ok(kv);
    struct st_kv_stats s = stats_of(kv);
    assert_int_equal(s.evictable_blocks, 2);
    assert_int_equal(s.used_blocks, 3);
    assert_int_equal(s.free_blocks, 3);
    assert_int_equal(st_kv_available(kv), 3);
    assert_int_equal(st_kv_alloc(kv, 4, got), ST_ETOOBIG);
    /* B leaves: its private copies are freed, its published block becomes an evictable leaf. */
    st_kv_release(kv, b, 3, 5);
    assert_ok(kv);
    s = stats_of(kv);
    assert_int_equal(s.evictable_blocks, 3);
    assert_int_equal(s.free_blocks, 5);
    assert_int_equal(st_kv_available(kv), 8);
    st_kv_free(kv);
}

static void test_publish_rules(void **state)
{
    (void)state;
    struct st_kv *kv = st_kv_new(8, PAGE, 1);
    static const uint32_t c[] = {1, 2, 3};
    uint64_t h[3];
    chain(c, 3, h);
    uint32_t a[3], got[3];
    assert_int_equal(st_kv_alloc(kv, 3, a), 0);
    /* Unknown parent: nothing. */
    st_kv_publish(kv, h[0], h + 1, a + 1, 2, 1);
    assert_int_equal(stats_of(kv).cached_blocks, 0);
    /* Hash 0 ends the chain. */
    uint64_t hz[3] = {h[0], 0, h[2]};
    st_kv_publish(kv, 0, hz, a, 3, 1);
    assert_int_equal(stats_of(kv).cached_blocks, 1);
    /* The same block under another hash is not published again. */
    st_kv_publish(kv, h[0], h + 2, a, 1, 1);
    assert_int_equal(stats_of(kv).cached_blocks, 1);
    assert_ok(kv);
    /* h[2] cached below the root, not below h[1]: a collision as far as chains go. */
    st_kv_publish(kv, 0, h + 2, a + 2, 1, 2);
    assert_int_equal(stats_of(kv).cached_blocks, 2);
    st_kv_publish(kv, h[0], h + 1, a + 1, 2, 3);
    assert_int_equal(stats_of(kv).cached_blocks, 3);
    assert_ok(kv);
    /* match stops where the cached parent is not the previous block. */
    assert_int_equal(st_kv_match(kv, h, 3, got, 4), 2);
    st_kv_release(kv, got, 2, 4);
    st_kv_release(kv, a, 3, 5);
    assert_ok(kv);
    /* Below an idle parent nothing is linked: h[0]'s block is now unreferenced. */
    static const uint32_t c2[] = {1, 7};
    uint64_t h2[2];
    chain(c2, 2, h2);
    uint32_t x;
    assert_int_equal(st_kv_alloc(kv, 1, &x), 0);
    st_kv_publish(kv, h2[0], h2 + 1, &x, 1, 6);
    assert_int_equal(stats_of(kv).cached_blocks, 3);
    /* Once some request holds the parent again, it is. */
    assert_int_equal(st_kv_match(kv, h2, 1, got, 7), 1);
    st_kv_publish(kv, h2[0], h2 + 1, &x, 1, 7);
    assert_int_equal(stats_of(kv).cached_blocks, 4);
    st_kv_release(kv, got, 1, 8);
    st_kv_release(kv, &x, 1, 8);
    assert_ok(kv);
    st_kv_free(kv);
}

static void test_new_edges(void **state)
{
    (void)state;
    assert_null(st_kv_new(4, 0, 1));
    assert_null(st_kv_new(ST_KV_MAX_BLOCKS + 1, PAGE, 1));
    st_kv_free(NULL);
    struct st_kv *kv = st_kv_new(0, PAGE, 1);
    assert_non_null(kv);
    assert_int_equal(st_kv_available(kv), 0);
    assert_int_equal(st_kv_alloc(kv, 0, NULL), 0);
    uint32_t x;
    assert_int_equal(st_kv_alloc(kv, 1, &x), ST_ETOOBIG);
    uint64_t h = 5;
    assert_int_equal(st_kv_match(kv, &h, 1, &x, 1), 0);
    st_kv_flush(kv);
    assert_ok(kv);
    st_kv_free(kv);
}

/* --- differential test against a brute-force model ----------------------------------------- */

#define REF_MAX 256

/* The reference: the same policy, written as plainly as possible. */
struct ref {
    uint32_t total;
    int caching;
    uint32_t ref[REF_MAX];
    uint8_t cached[REF_MAX];
    uint64_t hash[REF_MAX];
    uint32_t parent[REF_MAX];
    uint64_t last_use[REF_MAX];
    uint32_t freeq[REF_MAX]; /* FIFO, front at 0 */
    uint32_t nfree;
    uint64_t query, hit, evictions;
};

static void ref_init(struct ref *r, uint32_t total, int caching)
{
    memset(r, 0, sizeof(*r));
    r->total = total;
    r->caching = caching;
    for (uint32_t b = 0; b < total; b++) {
        r->parent[b] = NONE;
        r->freeq[r->nfree++] = b;
    }
}

static uint32_t ref_find(const struct ref *r, uint64_t h)
{
    for (uint32_t b = 0; b < r->total; b++) {
        if (r->cached[b] && r->hash[b] == h) {
            return b;
        }
    }
    return NONE;
}

/* busy[b]: b is referenced, or an ancestor of a referenced cached block. */
static void ref_busy_all(const struct ref *r, uint8_t *busy)
{
    memset(busy, 0, r->total);
    for (uint32_t c = 0; c < r->total; c++) {
        if (r->ref[c] == 0) {
            continue;
        }
        busy[c] = 1;
        for (uint32_t a = r->cached[c] ? r->parent[c] : NONE; a != NONE; a = r->parent[a]) {
            busy[a] = 1;
        }
    }
}

static uint32_t ref_available(const struct ref *r)
{
    uint8_t busy[REF_MAX];
    ref_busy_all(r, busy);
    uint32_t n = r->nfree;
    for (uint32_t b = 0; b < r->total; b++) {
        n += r->cached[b] && !busy[b];
    }
    return n;
}

static uint32_t ref_match(struct ref *r, const uint64_t *h, uint32_t n, uint32_t *out, uint64_t now)
{
    if (!r->caching) {
        return 0;
    }
    r->query += (uint64_t)n * PAGE;
    uint32_t prev = NONE, k = 0;
    while (k < n && h[k] != 0) {
        uint32_t b = ref_find(r, h[k]);
        if (b == NONE || r->parent[b] != prev) {
            break;
        }
        r->ref[b]++;
        r->last_use[b] = now;
        out[k++] = b;
        prev = b;
    }
    r->hit += (uint64_t)k * PAGE;
    return k;
}

static int ref_alloc(struct ref *r, uint32_t n, uint32_t *out)
{
    if (n > ref_available(r)) {
        return ST_ETOOBIG;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t b = NONE;
        if (r->nfree > 0) {
            b = r->freeq[0];
            memmove(r->freeq, r->freeq + 1, (r->nfree - 1) * sizeof(r->freeq[0]));
            r->nfree--;
        } else {
            /* The least recently used unreferenced leaf, lowest id on ties. */
            uint8_t parent_of_some[REF_MAX] = {0};
            for (uint32_t c = 0; c < r->total; c++) {
                if (r->cached[c] && r->parent[c] != NONE) {
                    parent_of_some[r->parent[c]] = 1;
                }
            }
            for (uint32_t c = 0; c < r->total; c++) {
                if (r->cached[c] && r->ref[c] == 0 && !parent_of_some[c] &&
                    (b == NONE || r->last_use[c] < r->last_use[b])) {
                    b = c;
                }
            }
            assert_true(b != NONE);
            r->cached[b] = 0;
            r->parent[b] = NONE;
            r->evictions++;
        }
        r->ref[b] = 1;
        out[i] = b;
    }
    return 0;
}

static void ref_publish(struct ref *r, uint64_t parent_hash, const uint64_t *h,
                        const uint32_t *blocks, uint32_t n, uint64_t now)
{
    if (!r->caching) {
        return;
    }
    uint32_t p = NONE;
    if (parent_hash != 0) {
        p = ref_find(r, parent_hash);
        if (p == NONE) {
            return;
        }
    }
    for (uint32_t i = 0; i < n && h[i] != 0; i++) {
        uint32_t b = blocks[i];
        uint32_t c = ref_find(r, h[i]);
        if (c != NONE) {
            if (r->parent[c] != p) {
                return;
            }
            r->last_use[c] = now;
            p = c;
            continue;
        }
        uint8_t busy[REF_MAX];
        ref_busy_all(r, busy);
        if (r->cached[b] || (p != NONE && !busy[p])) {
            return;
        }
        r->cached[b] = 1;
        r->hash[b] = h[i];
        r->parent[b] = p;
        r->last_use[b] = now;
        p = b;
    }
}

static void ref_release(struct ref *r, const uint32_t *blocks, uint32_t n, uint64_t now)
{
    for (uint32_t i = 0; i < n; i++) {
        uint32_t b = blocks[i];
        assert_true(r->ref[b] > 0);
        r->last_use[b] = now;
        if (--r->ref[b] == 0 && !r->cached[b]) {
            r->freeq[r->nfree++] = b;
        }
    }
}

static void ref_flush(struct ref *r)
{
    for (uint32_t b = 0; b < r->total; b++) {
        if (r->cached[b]) {
            r->cached[b] = 0;
            r->parent[b] = NONE;
            if (r->ref[b] == 0) {
                r->freeq[r->nfree++] = b;
            }
        }
    }
}

/* The test's requests: what each holds. */
#define MAX_REQ 12
#define MAX_PROMPT 24

struct req {
    int live;
    uint32_t nhash; /* full blocks of the prompt */
    uint64_t hash[MAX_PROMPT];
    uint32_t nblk; /* blocks held: nhash (matched + allocated) + extra */
    uint32_t blk[MAX_PROMPT + 4];
    uint8_t held[MAX_PROMPT + 4];
};

struct world {
    struct st_kv *kv;
    struct ref ref;
    struct st_rng rng;
    struct req req[MAX_REQ];
    uint32_t template[4][8];
    int weak_hash;     /* hashes in 1..16: collisions everywhere */
    uint32_t alphabet; /* block contents after the template: more for larger pools, to fill them */
    uint64_t now;
    /* Context for failure messages. */
    uint64_t seed;
    uint32_t op;
};

/* Counts of operations that did something, summed over runs, so the test can show coverage. */
static struct {
    uint64_t ops, hits, allocs, too_big, evicted, published, pinned_seen, flushes;
} cov;

#define DIFF_CHECK(w, cond)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fail_msg("seed %llu total %u op %u: %s", (unsigned long long)(w)->seed,                \
                     (w)->ref.total, (w)->op, #cond);                                              \
        }                                                                                          \
    } while (0)

static void compare(struct world *w)
{
    struct st_kv_stats s = stats_of(w->kv);
    const struct ref *r = &w->ref;
    uint32_t used = 0, cached = 0, evictable = 0;
    for (uint32_t b = 0; b < r->total; b++) {
        used += r->ref[b] > 0;
        cached += r->cached[b];
        evictable += r->cached[b] && r->ref[b] == 0;
    }
    DIFF_CHECK(w, s.total_blocks == r->total);
    DIFF_CHECK(w, s.free_blocks == r->nfree);
    DIFF_CHECK(w, s.used_blocks == used);
    DIFF_CHECK(w, s.cached_blocks == cached);
    DIFF_CHECK(w, s.evictable_blocks == evictable);
    DIFF_CHECK(w, s.query_tokens == r->query);
    DIFF_CHECK(w, s.hit_tokens == r->hit);
    DIFF_CHECK(w, s.evictions == r->evictions);
    uint32_t avail = ref_available(r);
    DIFF_CHECK(w, st_kv_available(w->kv) == avail);
    cov.pinned_seen += avail < r->nfree + evictable;
    char err[160] = "";
    if (st_kv_check(w->kv, err, sizeof(err)) != 0) {
        fail_msg("seed %llu total %u op %u: st_kv_check: %s", (unsigned long long)w->seed, r->total,
                 w->op, err);
    }
}

static uint64_t hash_next(const struct world *w, uint64_t prev, uint32_t content)
{
    uint64_t h = chain_next(prev, content);
    return w->weak_hash ? 1 + h % 16 : h;
}

/* A prompt: a prefix of one of four templates, then random blocks from the alphabet. */
static uint32_t gen_prompt(struct world *w, uint64_t *hash)
{
    const uint32_t *t = w->template[st_rng_below(&w->rng, 4)];
    uint32_t n, tail;
    if (w->ref.total < 8) {
        /* Short prompts on tiny pools, so that most fit and each admission evicts. */
        n = (uint32_t)st_rng_below(&w->rng, w->ref.total + 1);
        tail = (uint32_t)st_rng_below(&w->rng, 2);
    } else {
        /* Longer tails on larger pools, so that they fill up too (at most 8 + 15 blocks). */
        n = (uint32_t)st_rng_below(&w->rng, 9);
        tail = (uint32_t)st_rng_below(&w->rng, 4 + (w->alphabet - 3 < 12 ? w->alphabet - 3 : 12));
    }
    uint64_t h = 0;
    for (uint32_t i = 0; i < n + tail; i++) {
        h = hash_next(w, h, i < n ? t[i] : (uint32_t)st_rng_below(&w->rng, w->alphabet));
        hash[i] = h;
    }
    return n + tail;
}

static struct req *pick_live(struct world *w)
{
    uint32_t start = (uint32_t)st_rng_below(&w->rng, MAX_REQ);
    for (uint32_t i = 0; i < MAX_REQ; i++) {
        struct req *q = &w->req[(start + i) % MAX_REQ];
        if (q->live) {
            return q;
        }
    }
    return NULL;
}

/* Releases the given blocks in both and marks them. */
static void release_some(struct world *w, struct req *q, const uint32_t *idx, uint32_t n)
{
    uint32_t ids[MAX_PROMPT + 4] = {0};
    for (uint32_t i = 0; i < n; i++) {
        ids[i] = q->blk[idx[i]];
        q->held[idx[i]] = 0;
    }
    st_kv_release(w->kv, ids, n, w->now);
    ref_release(&w->ref, ids, n, w->now);
}

static void op_admit(struct world *w, int keep)
{
    struct req *q = NULL;
    for (uint32_t i = 0; i < MAX_REQ && q == NULL; i++) {
        q = w->req[i].live ? NULL : &w->req[i];
    }
    if (q == NULL) {
        return;
    }
    q->nhash = gen_prompt(w, q->hash);
    uint32_t got[MAX_PROMPT], want[MAX_PROMPT];
    uint32_t k = st_kv_match(w->kv, q->hash, q->nhash, got, w->now);
    uint32_t kr = ref_match(&w->ref, q->hash, q->nhash, want, w->now);
    DIFF_CHECK(w, k == kr);
    DIFF_CHECK(w, memcmp(got, want, k * sizeof(got[0])) == 0);
    cov.hits += k;
    compare(w);
    memcpy(q->blk, got, k * sizeof(got[0]));
    /* The uncached full blocks, maybe a partial block, maybe decode room. */
    uint32_t need = q->nhash - k + (uint32_t)st_rng_below(&w->rng, 2) +
                    (uint32_t)st_rng_below(&w->rng, 3) * (st_rng_below(&w->rng, 4) == 0);
    uint32_t mine[MAX_PROMPT + 4], theirs[MAX_PROMPT + 4];
    int rc = st_kv_alloc(w->kv, need, mine);
    int rcr = ref_alloc(&w->ref, need, theirs);
    DIFF_CHECK(w, rc == rcr);
    DIFF_CHECK(w, rc == 0 || rc == ST_ETOOBIG);
    if (rc == 0) {
        DIFF_CHECK(w, memcmp(mine, theirs, need * sizeof(mine[0])) == 0);
        memcpy(q->blk + k, mine, need * sizeof(mine[0]));
        cov.allocs++;
    } else {
        cov.too_big++;
    }
    q->nblk = k + (rc == 0 ? need : 0);
    memset(q->held, 1, sizeof(q->held));
    q->live = 1;
    compare(w);
    if (rc != 0 || !keep) {
        /* Not admitted, or a probe: give back what the lookup took. */
        uint32_t idx[MAX_PROMPT + 4];
        for (uint32_t i = 0; i < q->nblk; i++) {
            idx[i] = i;
        }
        release_some(w, q, idx, q->nblk);
        q->live = 0;
        compare(w);
    }
}

static void op_publish(struct world *w)
{
    struct req *q = pick_live(w);
    if (q == NULL || q->nblk < q->nhash) {
        return;
    }
    uint32_t j = (uint32_t)st_rng_below(&w->rng, q->nhash + 1);
    if (st_rng_below(&w->rng, 2) == 0) {
        j = 0; /* the usual call: the whole prompt from the root */
    }
    uint32_t m = (uint32_t)st_rng_below(&w->rng, q->nhash - j + 1);
    for (uint32_t i = j; i < j + m; i++) {
        if (!q->held[i]) {
            return; /* publishing needs a reference */
        }
    }
    uint64_t parent = j == 0 ? 0 : q->hash[j - 1];
    if (st_rng_below(&w->rng, 20) == 0) {
        /* A wrong parent: another prompt's hash, or one that was never cached. */
        uint64_t other[MAX_PROMPT];
        uint32_t n = gen_prompt(w, other);
        parent = n > 0 ? other[st_rng_below(&w->rng, n)] : 12345;
    }
    uint32_t before = stats_of(w->kv).cached_blocks;
    st_kv_publish(w->kv, parent, q->hash + j, q->blk + j, m, w->now);
    ref_publish(&w->ref, parent, q->hash + j, q->blk + j, m, w->now);
    cov.published += stats_of(w->kv).cached_blocks - before;
    compare(w);
}

static void op_release(struct world *w, int partial)
{
    struct req *q = pick_live(w);
    if (q == NULL) {
        return;
    }
    uint32_t idx[MAX_PROMPT + 4], n = 0;
    for (uint32_t i = 0; i < q->nblk; i++) {
        if (q->held[i] && (!partial || st_rng_below(&w->rng, 2) == 0)) {
            idx[n++] = i;
        }
    }
    uint32_t order = (uint32_t)st_rng_below(&w->rng, 3);
    for (uint32_t i = 0; i + 1 < n && order > 0; i++) {
        /* 1: reversed (a chain's tail first); 2: shuffled. */
        uint32_t k = order == 1 ? n - 1 - i : i + (uint32_t)st_rng_below(&w->rng, n - i);
        if (order == 1 && k <= i) {
            break;
        }
        uint32_t t = idx[i];
        idx[i] = idx[k];
        idx[k] = t;
    }
    release_some(w, q, idx, n);
    int any = 0;
    for (uint32_t i = 0; i < q->nblk; i++) {
        any |= q->held[i];
    }
    q->live = any;
    compare(w);
}

static void run_sequence(uint32_t total, uint64_t seed, uint32_t ops)
{
    static struct world w;
    memset(&w, 0, sizeof(w));
    w.seed = seed;
    st_rng_seed(&w.rng, seed);
    int caching = st_rng_below(&w.rng, 8) != 0;
    w.weak_hash = st_rng_below(&w.rng, 4) == 0;
    w.alphabet = 3 + total / 16;
    w.kv = st_kv_new(total, PAGE, caching);
    assert_non_null(w.kv);
    ref_init(&w.ref, total, caching);
    for (uint32_t t = 0; t < 4; t++) {
        for (uint32_t i = 0; i < 8; i++) {
            w.template[t][i] = (uint32_t)st_rng_below(&w.rng, 3);
        }
    }
    int monotone = st_rng_below(&w.rng, 4) != 0;
    w.now = 1000;
    compare(&w);
    for (w.op = 0; w.op < ops; w.op++) {
        /* Steps of 0 make ties in last use common; some runs also go back in time. */
        if (monotone || st_rng_below(&w.rng, 3) != 0) {
            w.now += st_rng_below(&w.rng, 3);
        } else {
            w.now -= st_rng_below(&w.rng, 3);
        }
        uint32_t dice = (uint32_t)st_rng_below(&w.rng, 100);
        if (dice < 35) {
            op_admit(&w, 1);
        } else if (dice < 45) {
            op_admit(&w, 0);
        } else if (dice < 70) {
            op_publish(&w);
        } else if (dice < 92) {
            op_release(&w, 0);
        } else if (dice < 99) {
            op_release(&w, 1);
        } else if (st_rng_below(&w.rng, 1 + total / 4) == 0) {
            /* Rarer on larger pools, so that their caches fill up and evict. */
            st_kv_flush(w.kv);
            ref_flush(&w.ref);
            cov.flushes++;
            compare(&w);
        }
    }
    cov.ops += ops;
    cov.evicted += w.ref.evictions;
    /* Drain: everything released, nothing used, everything available. */
    for (uint32_t i = 0; i < MAX_REQ; i++) {
        if (w.req[i].live) {
            struct req *q = &w.req[i];
            uint32_t idx[MAX_PROMPT + 4], n = 0;
            for (uint32_t b = 0; b < q->nblk; b++) {
                if (q->held[b]) {
                    idx[n++] = b;
                }
            }
            release_some(&w, q, idx, n);
            q->live = 0;
        }
    }
    compare(&w);
    DIFF_CHECK(&w, stats_of(w.kv).used_blocks == 0);
    DIFF_CHECK(&w, st_kv_available(w.kv) == total);
    st_kv_free(w.kv);
}

static void test_differential(void **state)
{
    (void)state;
    static const uint32_t sizes[] = {1, 2, 3, 4, 5, 8, 12, 16, 24, 40, 64, 200};
    memset(&cov, 0, sizeof(cov));
    for (uint32_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        uint32_t runs = sizes[s] <= 16 ? 12 : sizes[s] <= 64 ? 6 : 4;
        uint32_t ops = sizes[s] <= 64 ? 1500 : 5000;
        for (uint32_t k = 0; k < runs; k++) {
            run_sequence(sizes[s], 0x6b76000000ull + s * 1000 + k, ops);
        }
    }
    print_message("differential: %llu ops, %llu hit blocks, %llu allocs, %llu ETOOBIG, "
                  "%llu evictions, %llu published, %llu states with pins, %llu flushes\n",
                  (unsigned long long)cov.ops, (unsigned long long)cov.hits,
                  (unsigned long long)cov.allocs, (unsigned long long)cov.too_big,
                  (unsigned long long)cov.evicted, (unsigned long long)cov.published,
                  (unsigned long long)cov.pinned_seen, (unsigned long long)cov.flushes);
    /* The sequences must reach the interesting states, or the comparison proves little. */
    assert_true(cov.hits > 1000 && cov.evicted > 1000 && cov.too_big > 100);
    assert_true(cov.pinned_seen > 100 && cov.flushes > 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_shared_prefix),
        cmocka_unit_test(test_partial_block_never_hits),
        cmocka_unit_test(test_eviction_lru_leaf_first),
        cmocka_unit_test(test_releaf_keeps_own_last_use),
        cmocka_unit_test(test_referenced_never_evicted),
        cmocka_unit_test(test_alloc_too_big_takes_nothing),
        cmocka_unit_test(test_flush),
        cmocka_unit_test(test_prefix_caching_off),
        cmocka_unit_test(test_counters),
        cmocka_unit_test(test_duplicate_publish_and_pin),
        cmocka_unit_test(test_publish_rules),
        cmocka_unit_test(test_new_edges),
        cmocka_unit_test(test_differential),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
