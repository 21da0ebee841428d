/*
 * Tests for the indexed min-heap (src/base/heap.c): a differential test against a sorted
 * reference under random insertions, key changes and removals, and the empty heap.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>

#include "base/heap.h"
#include "base/rng.h"

struct item {
    uint64_t key;
    uint32_t idx;
    int in;
};

static int less(const void *a, const void *b)
{
    return ((const struct item *)a)->key < ((const struct item *)b)->key;
}

static uint32_t *idx(void *it)
{
    return &((struct item *)it)->idx;
}

#define N 500

static void test_against_reference(void **state)
{
    (void)state;
    struct item items[N];
    struct st_heap h;
    st_heap_init(&h, less, idx);
    assert_null(st_heap_top(&h));
    struct st_rng rng;
    st_rng_seed(&rng, 7);
    for (int i = 0; i < N; i++) {
        items[i] = (struct item){.key = 0, .idx = ST_HEAP_NONE, .in = 0};
    }
    for (int step = 0; step < 20000; step++) {
        struct item *it = &items[st_rng_below(&rng, N)];
        if (st_rng_below(&rng, 3) == 0) {
            st_heap_remove(&h, it); /* a no-op when it is not in */
            it->in = 0;
        } else {
            it->key = st_rng_below(&rng, 1000); /* a new key, or a move */
            st_heap_set(&h, it);
            it->in = 1;
        }
        uint64_t best = UINT64_MAX;
        uint32_t n = 0;
        for (int i = 0; i < N; i++) {
            if (items[i].in) {
                n++;
                best = items[i].key < best ? items[i].key : best;
                assert_int_not_equal(items[i].idx, ST_HEAP_NONE);
            } else {
                assert_int_equal(items[i].idx, ST_HEAP_NONE);
            }
        }
        assert_int_equal(h.n, n);
        const struct item *top = st_heap_top(&h);
        if (n == 0) {
            assert_null(top);
        } else {
            assert_int_equal(top->key, best);
        }
    }
    st_heap_release(&h);
    for (int i = 0; i < N; i++) {
        assert_int_equal(items[i].idx, ST_HEAP_NONE);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
