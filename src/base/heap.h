/*
 * An indexed binary min-heap of caller-owned items: the caller gives the order and a place in
 * each item where the heap keeps the item's index, so an item can be moved or removed in
 * O(log n) when its key changes. Not thread-safe; holds borrowed pointers only.
 */
#ifndef ST_BASE_HEAP_H
#define ST_BASE_HEAP_H

#include <stdint.h>

#define ST_HEAP_NONE UINT32_MAX

/* a sorts before b. */
typedef int (*st_heap_less_fn)(const void *a, const void *b);
/* Where an item keeps its index (ST_HEAP_NONE when it is not in the heap). */
typedef uint32_t *(*st_heap_idx_fn)(void *item);

struct st_heap {
    void **items; /* owned array of borrowed items */
    uint32_t n, cap;
    st_heap_less_fn less;
    st_heap_idx_fn idx;
};

void st_heap_init(struct st_heap *h, st_heap_less_fn less, st_heap_idx_fn idx);
/* Frees the array (the items are the caller's). */
void st_heap_release(struct st_heap *h);
/* Adds item, or moves it to its place when its key changed while it was in the heap. */
void st_heap_set(struct st_heap *h, void *item);
/* Takes item out; a no-op when it is not in the heap. */
void st_heap_remove(struct st_heap *h, void *item);
/* The first item, or NULL when empty. */
void *st_heap_top(const struct st_heap *h);

#endif
