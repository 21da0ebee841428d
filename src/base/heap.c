/*
 * The indexed binary min-heap (see heap.h): items[0] is the least; item i's children are 2i+1
 * and 2i+2; every item in the array holds its own index.
 */
#include "base/heap.h"

#include <stdlib.h>

#include "base/xalloc.h"

void st_heap_init(struct st_heap *h, st_heap_less_fn less, st_heap_idx_fn idx)
{
    h->items = NULL;
    h->n = 0;
    h->cap = 0;
    h->less = less;
    h->idx = idx;
}

void st_heap_release(struct st_heap *h)
{
    for (uint32_t i = 0; i < h->n; i++) {
        *h->idx(h->items[i]) = ST_HEAP_NONE;
    }
    st_freep(&h->items);
    h->n = 0;
    h->cap = 0;
}

static void put(struct st_heap *h, uint32_t i, void *item)
{
    h->items[i] = item;
    *h->idx(item) = i;
}

static void fix(struct st_heap *h, uint32_t i)
{
    void *it = h->items[i];
    while (i > 0 && h->less(it, h->items[(i - 1) / 2])) {
        put(h, i, h->items[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = l;
        if (l >= h->n) {
            break;
        }
        if (r < h->n && h->less(h->items[r], h->items[l])) {
            m = r;
        }
        if (!h->less(h->items[m], it)) {
            break;
        }
        put(h, i, h->items[m]);
        i = m;
    }
    put(h, i, it);
}

void st_heap_set(struct st_heap *h, void *item)
{
    uint32_t *ix = h->idx(item);
    if (*ix == ST_HEAP_NONE) {
        if (h->n == h->cap) {
            h->cap = h->cap ? h->cap * 2 : 64;
            h->items = st_xrealloc(h->items, h->cap * sizeof(*h->items));
        }
        put(h, h->n++, item);
    }
    fix(h, *ix);
}

void st_heap_remove(struct st_heap *h, void *item)
{
    uint32_t *ix = h->idx(item);
    uint32_t i = *ix;
    if (i == ST_HEAP_NONE) {
        return;
    }
    *ix = ST_HEAP_NONE;
    h->n--;
    if (i != h->n) {
        put(h, i, h->items[h->n]);
        fix(h, i);
    }
}

void *st_heap_top(const struct st_heap *h)
{
    return h->n ? h->items[0] : NULL;
}
