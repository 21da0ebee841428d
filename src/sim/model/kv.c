/*
 * The paged KV pool and its prefix cache; kv.h is the contract, docs/internals/sim-kv.md the
 * states, eviction example, invariants and complexity argument. Sized by total_blocks in
 * st_kv_new; no operation allocates. A block is free (FIFO list), used (referenced) or evictable
 * (cached, unreferenced); an evictable block above a referenced one is pinned and not available.
 * Only evictable leaves sit in the LRU, a binary min-heap keyed by (last_use, id), so a parent
 * that becomes a leaf when its last child is evicted takes its place by its own last use. The
 * cache is an open-addressing map (linear probing, backward-shift deletion) from hash to block.
 */
#include "sim/model/kv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"
#include "sim/model/assert.h"

#define NONE UINT32_MAX

struct kv_block {
    uint64_t hash;     /* chained hash while cached */
    uint64_t last_use; /* now of the last match, publish or release naming it; orders the LRU */
    uint32_t ref;      /* references held by requests */
    uint32_t parent;   /* cached parent while cached; NONE for a child of the root or uncached */
    uint32_t nchild;   /* cached children */
    uint32_t nbusy;    /* cached children that are busy (referenced, or with nbusy > 0) */
    uint32_t prev;     /* free list links while free, NONE otherwise */
    uint32_t next;
    uint32_t heap_pos; /* index in the LRU heap while an evictable leaf, NONE otherwise */
    uint8_t cached;
};

struct st_kv {
    uint32_t total;
    uint32_t page_size;
    int prefix_caching;
    struct kv_block *blk; /* owned, total entries */
    uint32_t *slots;      /* owned, map from hash to block: mask + 1 entries, NONE when empty */
    uint32_t mask;
    uint32_t *heap; /* owned, total entries: the LRU of evictable leaves */
    uint32_t heap_len;
    uint32_t free_head; /* FIFO: alloc takes the head, release appends at the tail */
    uint32_t free_tail;
    uint32_t n_free;
    uint32_t n_used;
    uint32_t n_cached;
    uint32_t n_evictable; /* cached and unreferenced, pinned ones included */
    uint32_t n_pinned;    /* cached, unreferenced, nbusy > 0 */
    uint64_t query_tokens;
    uint64_t hit_tokens;
    uint64_t evictions;
    uint32_t *scratch; /* owned, 2 * total entries, used by st_kv_check only */
};

/* --- hash map ---------------------------------------------------------------------------- */

/* splitmix64's finalizer: callers' hashes may be weak in their low bits. */
static uint32_t home_slot(const struct st_kv *kv, uint64_t h)
{
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return (uint32_t)h & kv->mask;
}

static uint32_t map_find(const struct st_kv *kv, uint64_t h)
{
    for (uint32_t i = home_slot(kv, h);; i = (i + 1) & kv->mask) {
        uint32_t b = kv->slots[i];
        if (b == NONE || kv->blk[b].hash == h) {
            return b;
        }
    }
}

static void map_insert(struct st_kv *kv, uint32_t b)
{
    uint32_t i = home_slot(kv, kv->blk[b].hash);
    while (kv->slots[i] != NONE) {
        i = (i + 1) & kv->mask;
    }
    kv->slots[i] = b;
}

/*
 * Backward-shift deletion: entries after the hole move back when their home slot does not lie
 * cyclically between the hole and them, so lookups never need tombstones.
 */
static void map_delete(struct st_kv *kv, uint32_t b)
{
    uint32_t i = home_slot(kv, kv->blk[b].hash);
    while (kv->slots[i] != b) {
        i = (i + 1) & kv->mask;
    }
    for (uint32_t j = (i + 1) & kv->mask;; j = (j + 1) & kv->mask) {
        uint32_t e = kv->slots[j];
        if (e == NONE) {
            break;
        }
        uint32_t k = home_slot(kv, kv->blk[e].hash);
        if (((j - k) & kv->mask) >= ((j - i) & kv->mask)) {
            kv->slots[i] = e;
            i = j;
        }
    }
    kv->slots[i] = NONE;
}

/* --- LRU heap of evictable leaves, keyed by (last_use, id) -------------------------------- */

static int heap_less(const struct st_kv *kv, uint32_t a, uint32_t b)
{
    uint64_t ta = kv->blk[a].last_use;
    uint64_t tb = kv->blk[b].last_use;
    return ta < tb || (ta == tb && a < b);
}

static void heap_set(struct st_kv *kv, uint32_t pos, uint32_t b)
{
    kv->heap[pos] = b;
    kv->blk[b].heap_pos = pos;
}

static void heap_up(struct st_kv *kv, uint32_t pos)
{
    uint32_t b = kv->heap[pos];
    while (pos > 0) {
        uint32_t up = (pos - 1) / 2;
        if (!heap_less(kv, b, kv->heap[up])) {
            break;
        }
        heap_set(kv, pos, kv->heap[up]);
        pos = up;
    }
    heap_set(kv, pos, b);
}

static void heap_down(struct st_kv *kv, uint32_t pos)
{
    uint32_t b = kv->heap[pos];
    for (;;) {
        uint32_t c = 2 * pos + 1;
        if (c >= kv->heap_len) {
            break;
        }
        if (c + 1 < kv->heap_len && heap_less(kv, kv->heap[c + 1], kv->heap[c])) {
            c++;
        }
        if (!heap_less(kv, kv->heap[c], b)) {
            break;
        }
        heap_set(kv, pos, kv->heap[c]);
        pos = c;
    }
    heap_set(kv, pos, b);
}

static void heap_push(struct st_kv *kv, uint32_t b)
{
    heap_set(kv, kv->heap_len++, b);
    heap_up(kv, kv->heap_len - 1);
}

static void heap_remove(struct st_kv *kv, uint32_t b)
{
    uint32_t pos = kv->blk[b].heap_pos;
    uint32_t last = kv->heap[--kv->heap_len];
    kv->blk[b].heap_pos = NONE;
    if (last == b) {
        return;
    }
    heap_set(kv, pos, last);
    heap_up(kv, pos);
    heap_down(kv, kv->blk[last].heap_pos);
}

/* --- free list ----------------------------------------------------------------------------- */

static void free_push_tail(struct st_kv *kv, uint32_t b)
{
    kv->blk[b].prev = kv->free_tail;
    kv->blk[b].next = NONE;
    if (kv->free_tail == NONE) {
        kv->free_head = b;
    } else {
        kv->blk[kv->free_tail].next = b;
    }
    kv->free_tail = b;
    kv->n_free++;
}

static uint32_t free_pop_head(struct st_kv *kv)
{
    uint32_t b = kv->free_head;
    kv->free_head = kv->blk[b].next;
    if (kv->free_head == NONE) {
        kv->free_tail = NONE;
    } else {
        kv->blk[kv->free_head].prev = NONE;
    }
    kv->blk[b].next = NONE;
    kv->n_free--;
    return b;
}

/* --- the cache tree ------------------------------------------------------------------------ */

static int is_busy(const struct kv_block *k)
{
    return k->ref > 0 || k->nbusy > 0;
}

/*
 * Cached block b just became busy (up = 1) or idle (up = 0): its ancestors count busy children.
 * The walk stops at the first ancestor whose own busy state does not change, which is the
 * parent itself unless unreferenced ancestors were pinned by b alone (see the docs for why that
 * is amortised O(1)). An unreferenced ancestor changing state is one becoming or ceasing to be
 * pinned.
 */
static void busy_changed(struct st_kv *kv, uint32_t b, int up)
{
    for (uint32_t p = kv->blk[b].parent; p != NONE; p = kv->blk[p].parent) {
        struct kv_block *k = &kv->blk[p];
        int was = is_busy(k);
        if (up) {
            k->nbusy++;
        } else {
            k->nbusy--;
        }
        if (is_busy(k) == was) {
            return;
        }
        if (up) {
            kv->n_pinned++;
        } else {
            kv->n_pinned--;
        }
    }
}

/* Takes one reference on cached or uncached block b (match, alloc). */
static void take_ref(struct st_kv *kv, uint32_t b)
{
    struct kv_block *k = &kv->blk[b];
    if (k->ref++ > 0) {
        return;
    }
    kv->n_used++;
    if (!k->cached) {
        return;
    }
    kv->n_evictable--;
    if (k->heap_pos != NONE) {
        heap_remove(kv, b);
    }
    if (k->nbusy > 0) {
        kv->n_pinned--; /* it was busy already; its ancestors see no change */
    } else {
        busy_changed(kv, b, 1);
    }
}

/* Removes evictable leaf b (the LRU's head) from the cache; its parent may become a leaf. */
static void evict(struct st_kv *kv, uint32_t b)
{
    struct kv_block *k = &kv->blk[b];
    heap_remove(kv, b);
    map_delete(kv, b);
    uint32_t p = k->parent;
    k->cached = 0;
    k->parent = NONE;
    kv->n_cached--;
    kv->n_evictable--;
    kv->evictions++;
    if (p != NONE) {
        struct kv_block *pk = &kv->blk[p];
        pk->nchild--;
        /* b was idle, so p's nbusy is unchanged; p joins the LRU at its own last_use. */
        if (pk->nchild == 0 && pk->ref == 0) {
            heap_push(kv, p);
        }
    }
}

/* --- API ----------------------------------------------------------------------------------- */

struct st_kv *st_kv_new(uint32_t total_blocks, uint32_t page_size, int prefix_caching)
{
    if (total_blocks > ST_KV_MAX_BLOCKS || page_size == 0) {
        return NULL;
    }
    struct st_kv *kv = st_xcalloc(1, sizeof(*kv));
    kv->total = total_blocks;
    kv->page_size = page_size;
    kv->prefix_caching = prefix_caching != 0;
    /* At most total_blocks entries, so a power of two >= 2 * total keeps the load <= 1/2. */
    uint32_t cap = 4;
    while (cap < 2 * total_blocks) {
        cap *= 2;
    }
    kv->mask = cap - 1;
    kv->slots = st_xmalloc((size_t)cap * sizeof(*kv->slots));
    memset(kv->slots, 0xff, (size_t)cap * sizeof(*kv->slots));
    size_t n = total_blocks > 0 ? total_blocks : 1;
    kv->blk = st_xcalloc(n, sizeof(*kv->blk));
    kv->heap = st_xcalloc(n, sizeof(*kv->heap));
    kv->scratch = st_xcalloc(2 * n, sizeof(*kv->scratch));
    kv->free_head = NONE;
    kv->free_tail = NONE;
    for (uint32_t b = 0; b < total_blocks; b++) {
        kv->blk[b].parent = NONE;
        kv->blk[b].heap_pos = NONE;
        free_push_tail(kv, b);
    }
    return kv;
}

void st_kv_free(struct st_kv *kv)
{
    if (kv == NULL) {
        return;
    }
    free(kv->blk);
    free(kv->slots);
    free(kv->heap);
    free(kv->scratch);
    free(kv);
}

uint32_t st_kv_match(struct st_kv *kv, const uint64_t *hashes, uint32_t n, uint32_t *blocks_out,
                     uint64_t now)
{
    if (!kv->prefix_caching) {
        return 0;
    }
    kv->query_tokens += (uint64_t)n * kv->page_size;
    uint32_t parent = NONE;
    uint32_t i = 0;
    for (; i < n; i++) {
        uint32_t b = hashes[i] == 0 ? NONE : map_find(kv, hashes[i]);
        /* A different parent means the caller's chain is not the cached one (a collision). */
        if (b == NONE || kv->blk[b].parent != parent) {
            break;
        }
        /* Root first, so the parent is already busy and busy_changed stops at it. */
        take_ref(kv, b);
        kv->blk[b].last_use = now;
        blocks_out[i] = b;
        parent = b;
    }
    kv->hit_tokens += (uint64_t)i * kv->page_size;
    return i;
}

uint32_t st_kv_available(const struct st_kv *kv)
{
    return kv->n_free + kv->n_evictable - kv->n_pinned;
}

int st_kv_alloc(struct st_kv *kv, uint32_t n, uint32_t *blocks_out)
{
    if (n > st_kv_available(kv)) {
        return ST_ETOOBIG;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t b;
        if (kv->free_head != NONE) {
            b = free_pop_head(kv);
        } else {
            /* Every unpinned evictable block has an evictable leaf below it, so the heap has one.
             */
            b = kv->heap[0];
            evict(kv, b);
        }
        take_ref(kv, b);
        blocks_out[i] = b;
    }
    return 0;
}

void st_kv_publish(struct st_kv *kv, uint64_t parent_hash, const uint64_t *hashes,
                   const uint32_t *blocks, uint32_t n, uint64_t now)
{
    if (!kv->prefix_caching) {
        return;
    }
    uint32_t p = NONE;
    if (parent_hash != 0) {
        p = map_find(kv, parent_hash);
        if (p == NONE) {
            return;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t b = blocks[i];
        ST_MODEL_ASSERT(b < kv->total && kv->blk[b].ref > 0);
        if (hashes[i] == 0) {
            return;
        }
        uint32_t c = map_find(kv, hashes[i]);
        if (c != NONE) {
            /* Cached already (by this block or another): keep it and refresh its last use. */
            if (kv->blk[c].parent != p) {
                return;
            }
            kv->blk[c].last_use = now;
            if (kv->blk[c].heap_pos != NONE) {
                heap_up(kv, kv->blk[c].heap_pos);
                heap_down(kv, kv->blk[c].heap_pos);
            }
            p = c;
            continue;
        }
        /*
         * b must not be cached under another hash, and its parent must be busy: linking a busy
         * block below an idle parent would pin a chain of ancestors at once.
         */
        if (kv->blk[b].cached || (p != NONE && !is_busy(&kv->blk[p]))) {
            return;
        }
        struct kv_block *k = &kv->blk[b];
        k->cached = 1;
        k->hash = hashes[i];
        k->parent = p;
        k->nchild = 0;
        k->nbusy = 0;
        k->last_use = now;
        map_insert(kv, b);
        kv->n_cached++;
        if (p != NONE) {
            /* p is busy and not in the heap (a busy block with no child is referenced). */
            kv->blk[p].nchild++;
            kv->blk[p].nbusy++;
        }
        p = b;
    }
}

void st_kv_release(struct st_kv *kv, const uint32_t *blocks, uint32_t n, uint64_t now)
{
    for (uint32_t i = 0; i < n; i++) {
        uint32_t b = blocks[i];
        ST_MODEL_ASSERT(b < kv->total && kv->blk[b].ref > 0);
        struct kv_block *k = &kv->blk[b];
        k->last_use = now;
        if (--k->ref > 0) {
            continue;
        }
        kv->n_used--;
        if (!k->cached) {
            free_push_tail(kv, b);
            continue;
        }
        kv->n_evictable++;
        if (k->nbusy > 0) {
            kv->n_pinned++; /* still busy: a referenced block below holds it */
            continue;
        }
        busy_changed(kv, b, 0);
        if (k->nchild == 0) {
            heap_push(kv, b);
        }
    }
}

void st_kv_flush(struct st_kv *kv)
{
    for (uint32_t b = 0; b < kv->total; b++) {
        struct kv_block *k = &kv->blk[b];
        if (!k->cached) {
            continue;
        }
        k->cached = 0;
        k->parent = NONE;
        k->nchild = 0;
        k->nbusy = 0;
        k->heap_pos = NONE;
        if (k->ref == 0) {
            free_push_tail(kv, b);
        }
    }
    memset(kv->slots, 0xff, ((size_t)kv->mask + 1) * sizeof(*kv->slots));
    kv->heap_len = 0;
    kv->n_cached = 0;
    kv->n_evictable = 0;
    kv->n_pinned = 0;
}

void st_kv_get_stats(const struct st_kv *kv, struct st_kv_stats *out)
{
    out->total_blocks = kv->total;
    out->free_blocks = kv->n_free;
    out->evictable_blocks = kv->n_evictable;
    out->used_blocks = kv->n_used;
    out->cached_blocks = kv->n_cached;
    out->query_tokens = kv->query_tokens;
    out->hit_tokens = kv->hit_tokens;
    out->evictions = kv->evictions;
}

/* --- st_kv_check --------------------------------------------------------------------------- */

static int fail(char *err, size_t errlen, const char *msg, uint32_t b)
{
    if (err != NULL && errlen > 0) {
        snprintf(err, errlen, "kv: %s (block %u)", msg, (unsigned)b);
    }
    return ST_EPROTO;
}

/* Per block: state flags, parent, map entry and LRU membership; counters recounted. */
static int check_blocks(const struct st_kv *kv, char *err, size_t errlen)
{
    uint32_t n_free = 0, n_used = 0, n_cached = 0, n_evictable = 0, n_pinned = 0, n_heap = 0;
    for (uint32_t b = 0; b < kv->total; b++) {
        const struct kv_block *k = &kv->blk[b];
        int leaf = k->cached && k->ref == 0 && k->nchild == 0;
        n_used += k->ref > 0;
        n_free += !k->cached && k->ref == 0;
        n_cached += k->cached;
        n_evictable += k->cached && k->ref == 0;
        n_pinned += k->cached && k->ref == 0 && k->nbusy > 0;
        n_heap += leaf;
        if (leaf != (k->heap_pos != NONE)) {
            return fail(err, errlen, "LRU membership differs from evictable-leaf state", b);
        }
        if (leaf && (k->heap_pos >= kv->heap_len || kv->heap[k->heap_pos] != b)) {
            return fail(err, errlen, "LRU position does not point back", b);
        }
        if (!k->cached) {
            if (k->parent != NONE || k->nchild != 0 || k->nbusy != 0) {
                return fail(err, errlen, "uncached block has tree links", b);
            }
            continue;
        }
        if (map_find(kv, k->hash) != b) {
            return fail(err, errlen, "cached block not found under its hash", b);
        }
        if (k->parent != NONE &&
            (k->parent >= kv->total || k->parent == b || !kv->blk[k->parent].cached)) {
            return fail(err, errlen, "cached block's parent is not cached", b);
        }
    }
    if (n_free != kv->n_free || n_used != kv->n_used || n_cached != kv->n_cached ||
        n_evictable != kv->n_evictable || n_pinned != kv->n_pinned || n_heap != kv->heap_len) {
        return fail(err, errlen, "a counter differs from a recount", kv->total);
    }
    if (n_free + n_evictable + n_used != kv->total) {
        return fail(err, errlen, "free + evictable + used != total", kv->total);
    }
    return 0;
}

/* Child and busy-child counts, then acyclicity (every cached block reaches the root). */
static int check_tree(const struct st_kv *kv, char *err, size_t errlen)
{
    uint32_t *nchild = kv->scratch;
    uint32_t *nbusy = kv->scratch + kv->total;
    memset(kv->scratch, 0, 2 * (size_t)kv->total * sizeof(*kv->scratch));
    for (uint32_t b = 0; b < kv->total; b++) {
        const struct kv_block *k = &kv->blk[b];
        if (k->cached && k->parent != NONE) {
            nchild[k->parent]++;
            nbusy[k->parent] += is_busy(k);
        }
    }
    for (uint32_t b = 0; b < kv->total; b++) {
        if (nchild[b] != kv->blk[b].nchild || nbusy[b] != kv->blk[b].nbusy) {
            return fail(err, errlen, "child or busy-child count is wrong", b);
        }
    }
    /* Reuse nchild as "reaches the root" marks; a walk longer than the cache is a cycle. */
    memset(nchild, 0, (size_t)kv->total * sizeof(*nchild));
    for (uint32_t b = 0; b < kv->total; b++) {
        if (!kv->blk[b].cached || nchild[b]) {
            continue;
        }
        uint32_t steps = 0;
        for (uint32_t a = b; a != NONE && !nchild[a]; a = kv->blk[a].parent) {
            if (++steps > kv->n_cached) {
                return fail(err, errlen, "parent links form a cycle", b);
            }
        }
        for (uint32_t a = b; a != NONE && !nchild[a]; a = kv->blk[a].parent) {
            nchild[a] = 1;
        }
    }
    return 0;
}

/* The free list, the heap order and the map's probe sequences. */
static int check_lists(const struct st_kv *kv, char *err, size_t errlen)
{
    uint32_t count = 0;
    uint32_t prev = NONE;
    for (uint32_t b = kv->free_head; b != NONE; b = kv->blk[b].next) {
        if (b >= kv->total || ++count > kv->n_free) {
            return fail(err, errlen, "free list is too long or leaves the pool", b);
        }
        const struct kv_block *k = &kv->blk[b];
        if (k->cached || k->ref > 0 || k->prev != prev) {
            return fail(err, errlen, "free list holds a non-free block or a bad link", b);
        }
        prev = b;
    }
    if (count != kv->n_free || prev != kv->free_tail) {
        return fail(err, errlen, "free list length or tail is wrong", prev);
    }
    for (uint32_t i = 1; i < kv->heap_len; i++) {
        if (heap_less(kv, kv->heap[i], kv->heap[(i - 1) / 2])) {
            return fail(err, errlen, "LRU heap order is broken", kv->heap[i]);
        }
    }
    uint32_t used_slots = 0;
    for (uint32_t i = 0; i <= kv->mask; i++) {
        uint32_t b = kv->slots[i];
        if (b == NONE) {
            continue;
        }
        used_slots++;
        if (b >= kv->total || !kv->blk[b].cached) {
            return fail(err, errlen, "map entry names an uncached block", b);
        }
        /* Linear probing: no empty slot between the home slot and the entry. */
        for (uint32_t j = home_slot(kv, kv->blk[b].hash); j != i; j = (j + 1) & kv->mask) {
            if (kv->slots[j] == NONE) {
                return fail(err, errlen, "map entry is unreachable from its home slot", b);
            }
        }
    }
    if (used_slots != kv->n_cached) {
        return fail(err, errlen, "map size differs from the cached count", kv->total);
    }
    return 0;
}

int st_kv_check(const struct st_kv *kv, char *err, size_t errlen)
{
    static int (*const checks[])(const struct st_kv *, char *, size_t) = {
        check_blocks,
        check_tree,
        check_lists,
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]) && rc == 0; i++) {
        rc = checks[i](kv, err, errlen);
    }
    return rc;
}
