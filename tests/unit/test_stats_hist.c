/*
 * Tests for src/stats/hist.c: the histogram against an exact sort of the same values (nearest
 * rank computed in integers from q = k/1000), the stated error bound and the tighter midpoint
 * bound, merge, record_n, mean and the empty histogram. Seeded; no clock.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "stats/hist.h"

#define N_VALUES 20000

/* Quantiles under test as k/1000, so the exact rank is an integer computation. */
static const uint64_t q_permille[] = {0, 1, 10, 100, 500, 900, 990, 999, 1000};

static const uint32_t sub_bits_list[] = {1, 2, 3, 5, 8, 12, 16};

enum dist {
    D_SMALL_INTS = 0,
    D_LATENCY_NS,
    D_HEAVY_TAIL,
    D_CONSTANT,
    D_SINGLE,
    D_POW2_EDGES,
    D_ZEROS,
    D_U64_MAX,
    D_ZERO_AND_MAX,
    D_FULL_RANGE,
    D_COUNT
};

/* Worst |hist - exact| / exact seen per sub_bits, reported at the end of the differential test. */
static double worst_rel[17];

static uint64_t u64_of_double(double x)
{
    if (x >= 18446744073709551615.0) {
        return UINT64_MAX;
    }
    return x <= 0 ? 0 : (uint64_t)x;
}

/* Fills v[0..n) from distribution d; returns the count actually used. */
static size_t gen(enum dist d, struct st_rng *r, uint64_t *v, size_t n)
{
    switch (d) {
    case D_SMALL_INTS:
        for (size_t i = 0; i < n; i++) {
            v[i] = st_rng_below(r, 300);
        }
        return n;
    case D_LATENCY_NS:
        /* Bell-shaped in log10 between 1 us (1e3 ns) and 100 s (1e11 ns). */
        for (size_t i = 0; i < n; i++) {
            double u = (st_rng_unit(r) + st_rng_unit(r) + st_rng_unit(r) + st_rng_unit(r)) / 4;
            v[i] = u64_of_double(pow(10.0, 3.0 + 8.0 * u));
        }
        return n;
    case D_HEAVY_TAIL:
        /* Pareto with alpha 0.3 from 1000: reaches UINT64_MAX now and then. */
        for (size_t i = 0; i < n; i++) {
            double u = 1.0 - st_rng_unit(r);
            v[i] = u64_of_double(1000.0 * pow(u, -1.0 / 0.3));
        }
        return n;
    case D_CONSTANT:
        for (size_t i = 0; i < n; i++) {
            v[i] = 123456789;
        }
        return n;
    case D_SINGLE:
        v[0] = 987654321987ull;
        return 1;
    case D_POW2_EDGES: {
        size_t k = 0;
        for (int e = 0; e < 64; e++) {
            uint64_t p = 1ull << e;
            v[k++] = p - 1;
            v[k++] = p;
            v[k++] = p + 1;
            v[k++] = p + (p >> 1); /* a bucket boundary in every octave */
            v[k++] = (p << 1) - 1; /* wraps to UINT64_MAX for e = 63 */
        }
        v[k++] = UINT64_MAX;
        return k;
    }
    case D_ZEROS:
        for (size_t i = 0; i < n; i++) {
            v[i] = 0;
        }
        return n;
    case D_U64_MAX:
        for (size_t i = 0; i < n; i++) {
            v[i] = UINT64_MAX;
        }
        return n;
    case D_ZERO_AND_MAX:
        for (size_t i = 0; i < n; i++) {
            v[i] = st_rng_below(r, 2) ? UINT64_MAX : 0;
        }
        return n;
    case D_FULL_RANGE:
        /* Uniform in the exponent: every octave of uint64_t gets values. */
        for (size_t i = 0; i < n; i++) {
            v[i] = st_rng_u64(r) >> st_rng_below(r, 64);
        }
        return n;
    case D_COUNT:
        break;
    }
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* ceil(k * n / 1000) at least 1, in integers (n is small, so k * n does not overflow). */
static uint64_t exact_rank(uint64_t k, uint64_t n)
{
    uint64_t rank = (k * n + 999) / 1000;
    return rank ? rank : 1;
}

/* Checks one answer against the exact one under sub_bits s; records the worst relative error. */
static void check_bound(uint32_t s, uint64_t got, uint64_t exact)
{
    if (exact < (1ull << s)) {
        assert_int_equal(got, exact);
        return;
    }
    uint64_t d = got > exact ? got - exact : exact - got;
    /* d <= exact * 2^-(s-1) is, for integers, d <= floor(exact / 2^(s-1)). */
    assert_true(d <= exact >> (s - 1));
    /* The midpoint representative promises half of that (hist.c). */
    assert_true(d <= exact >> s);
    double rel = (double)d / (double)exact;
    if (rel > worst_rel[s]) {
        worst_rel[s] = rel;
    }
}

static void test_differential_vs_sort(void **state)
{
    (void)state;
    uint64_t *v = malloc(N_VALUES * sizeof(*v));
    uint64_t *sorted = malloc(N_VALUES * sizeof(*sorted));
    assert_non_null(v);
    assert_non_null(sorted);
    for (int d = 0; d < D_COUNT; d++) {
        for (size_t si = 0; si < sizeof(sub_bits_list) / sizeof(sub_bits_list[0]); si++) {
            uint32_t s = sub_bits_list[si];
            struct st_rng r;
            st_rng_seed(&r, 1000 + (uint64_t)d);
            size_t n = gen((enum dist)d, &r, v, N_VALUES);
            struct st_hist h;
            st_hist_init(&h, s);
            for (size_t i = 0; i < n; i++) {
                st_hist_record(&h, v[i]);
            }
            memcpy(sorted, v, n * sizeof(*v));
            qsort(sorted, n, sizeof(*sorted), cmp_u64);
            assert_int_equal(h.count, n);
            assert_int_equal(h.min, sorted[0]);
            assert_int_equal(h.max, sorted[n - 1]);
            for (size_t qi = 0; qi < sizeof(q_permille) / sizeof(q_permille[0]); qi++) {
                uint64_t k = q_permille[qi];
                double q = (double)k / 1000.0;
                uint64_t rank = exact_rank(k, n);
                assert_int_equal(st_hist_rank(q, n), rank);
                uint64_t got = st_hist_quantile(&h, q);
                uint64_t exact = sorted[rank - 1];
                /* Clamped to the exact [min, max]: a constant comes back exactly. */
                assert_true(got >= sorted[0] && got <= sorted[n - 1]);
                check_bound(s, got, exact);
            }
            st_hist_release(&h);
        }
    }
    for (size_t si = 0; si < sizeof(sub_bits_list) / sizeof(sub_bits_list[0]); si++) {
        uint32_t s = sub_bits_list[si];
        print_message("sub_bits %2u: worst relative error %.3g, stated bound %.3g\n", s,
                      worst_rel[s], ldexp(1.0, -(int)(s - 1)));
    }
    free(v);
    free(sorted);
}

/*
 * Value by value, at and around every bucket boundary of every octave: forty values of one
 * octave in a histogram, each read back by the quantile of its own rank. One histogram per
 * octave keeps each scan short (sub_bits 16 has 1.6 million buckets).
 */
static void test_bound_per_value(void **state)
{
    (void)state;
    struct st_rng r;
    st_rng_seed(&r, 7);
    enum { PER_OCTAVE = 40 };
    uint64_t v[PER_OCTAVE];
    for (uint32_t s = 1; s <= 16; s++) {
        struct st_hist h;
        st_hist_init(&h, s);
        for (int e = 0; e < 64; e++) {
            uint64_t p = 1ull << e;
            /* Width of this octave's buckets (1 in the exact region). */
            uint64_t w = e >= (int)s ? 1ull << (e - (int)s + 1) : 1;
            for (int j = 0; j < PER_OCTAVE; j++) {
                if (j < 8) {
                    v[j] = p + (uint64_t)j - 4; /* wraps to near UINT64_MAX for tiny p: fine */
                } else if (j < 24) {
                    /* First and last value of the first eight buckets of the octave. */
                    v[j] = p + w * (uint64_t)((j - 8) / 2) + (j % 2 ? w - 1 : 0);
                } else {
                    v[j] = p | (st_rng_u64(&r) & (p - 1));
                }
            }
            st_hist_reset(&h);
            for (int j = 0; j < PER_OCTAVE; j++) {
                st_hist_record(&h, v[j]);
            }
            qsort(v, PER_OCTAVE, sizeof(v[0]), cmp_u64);
            for (uint64_t i = 1; i <= PER_OCTAVE; i++) {
                double q = (double)i / PER_OCTAVE;
                assert_int_equal(st_hist_rank(q, PER_OCTAVE), i);
                check_bound(s, st_hist_quantile(&h, q), v[i - 1]);
            }
        }
        st_hist_release(&h);
    }
}

/* Bucket layout: exact region, last bucket, bucket count (66 - S) * 2^(S-1). */
static void test_layout(void **state)
{
    (void)state;
    for (uint32_t s = 1; s <= 16; s++) {
        struct st_hist h;
        st_hist_init(&h, s);
        assert_int_equal(h.nbuckets, (66u - s) << (s - 1));
        for (uint64_t v = 0; v < (1ull << s) && v < 4096; v++) {
            st_hist_record(&h, v);
            assert_int_equal(h.counts[v], 1);
        }
        st_hist_record(&h, UINT64_MAX);
        assert_int_equal(h.counts[h.nbuckets - 1], 1);
        st_hist_record(&h, UINT64_MAX - (UINT64_MAX >> s));
        assert_int_equal(h.counts[h.nbuckets - 1], 2);
        st_hist_record(&h, UINT64_MAX - (UINT64_MAX >> s) - 1);
        assert_int_equal(h.counts[h.nbuckets - 2], 1);
        st_hist_release(&h);
    }
}

static void test_rel_error(void **state)
{
    (void)state;
    struct st_hist h;
    st_hist_init(&h, 8);
    assert_true(st_hist_rel_error(&h) == 1.0 / 128);
    st_hist_release(&h);
    st_hist_init(&h, 1);
    assert_true(st_hist_rel_error(&h) == 1.0);
    st_hist_release(&h);
}

static void test_rank(void **state)
{
    (void)state;
    static const struct {
        double q;
        uint64_t n, rank;
    } cases[] = {
        {0.07, 100, 7}, /* 0.07 * 100 is 7.000000000000001 in doubles */
        {0.3, 10, 3},   /* 3.0000000000000004 */
        {0.5, 1, 1},    {0.0, 5, 1},        {1.0, 5, 5},        {0.5, 4, 2},
        {0.51, 4, 3},   {-1.0, 5, 1},       {2.0, 5, 5},        {0.5, 0, 0},
        {0.1, 10, 1},   {1e-9, 1000000, 1}, {0.999, 1000, 999}, {0.9999, 1000, 1000},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(st_hist_rank(cases[i].q, cases[i].n), cases[i].rank);
    }
    assert_int_equal(st_hist_rank(NAN, 5), 1);
    /* Every q = k/1000 against the integer ceiling, for awkward counts. */
    static const uint64_t ns[] = {1, 3, 7, 10, 99, 100, 1000, 4097, 100000, 999999, 12345678};
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
        for (uint64_t k = 0; k <= 1000; k++) {
            assert_int_equal(st_hist_rank((double)k / 1000.0, ns[i]), exact_rank(k, ns[i]));
        }
    }
}

static void test_empty(void **state)
{
    (void)state;
    struct st_hist h;
    st_hist_init(&h, 8);
    assert_int_equal(h.count, 0);
    assert_int_equal(h.min, UINT64_MAX);
    assert_int_equal(h.max, 0);
    for (size_t qi = 0; qi < sizeof(q_permille) / sizeof(q_permille[0]); qi++) {
        assert_int_equal(st_hist_quantile(&h, (double)q_permille[qi] / 1000.0), 0);
    }
    assert_true(st_hist_mean(&h) == 0.0);
    /* After reset a used histogram is empty again. */
    st_hist_record(&h, 42);
    st_hist_record(&h, 1ull << 40);
    st_hist_reset(&h);
    assert_int_equal(h.count, 0);
    assert_int_equal(h.min, UINT64_MAX);
    assert_int_equal(h.max, 0);
    assert_int_equal(st_hist_quantile(&h, 0.5), 0);
    assert_true(st_hist_mean(&h) == 0.0);
    for (uint32_t i = 0; i < h.nbuckets; i++) {
        assert_int_equal(h.counts[i], 0);
    }
    st_hist_release(&h);
    assert_null(h.counts);
}

static void assert_hist_equal(const struct st_hist *a, const struct st_hist *b)
{
    assert_int_equal(a->sub_bits, b->sub_bits);
    assert_int_equal(a->nbuckets, b->nbuckets);
    assert_memory_equal(a->counts, b->counts, (size_t)a->nbuckets * sizeof(*a->counts));
    assert_int_equal(a->count, b->count);
    assert_int_equal(a->min, b->min);
    assert_int_equal(a->max, b->max);
    assert_true(a->sum == b->sum);
}

static void test_merge(void **state)
{
    (void)state;
    uint64_t *v = malloc(N_VALUES * sizeof(*v));
    assert_non_null(v);
    struct st_rng r;
    st_rng_seed(&r, 99);
    /* Latencies below 2^37: the long double sums are exact in any order. */
    size_t n = gen(D_LATENCY_NS, &r, v, N_VALUES);
    struct st_hist all, a, b, empty;
    st_hist_init(&all, 8);
    st_hist_init(&a, 8);
    st_hist_init(&b, 8);
    st_hist_init(&empty, 8);
    for (size_t i = 0; i < n; i++) {
        st_hist_record(&all, v[i]);
        st_hist_record(i < n / 3 ? &a : &b, v[i]);
    }
    st_hist_merge(&a, &b);
    assert_hist_equal(&a, &all);
    /* Merging an empty histogram changes nothing; merging into one copies. */
    st_hist_merge(&a, &empty);
    assert_hist_equal(&a, &all);
    st_hist_merge(&empty, &all);
    assert_hist_equal(&empty, &all);
    for (size_t qi = 0; qi < sizeof(q_permille) / sizeof(q_permille[0]); qi++) {
        double q = (double)q_permille[qi] / 1000.0;
        assert_int_equal(st_hist_quantile(&a, q), st_hist_quantile(&all, q));
    }
    st_hist_release(&all);
    st_hist_release(&a);
    st_hist_release(&b);
    st_hist_release(&empty);
    free(v);
}

static void test_record_n(void **state)
{
    (void)state;
    struct st_hist one, many;
    st_hist_init(&one, 6);
    st_hist_init(&many, 6);
    static const uint64_t vals[] = {0, 1, 63, 64, 1000, 123456789, UINT64_MAX};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        for (uint64_t k = 0; k < i + 1; k++) {
            st_hist_record(&one, vals[i]);
        }
        st_hist_record_n(&many, vals[i], i + 1);
    }
    assert_hist_equal(&one, &many);
    /* n = 0 records nothing, not even min and max. */
    st_hist_reset(&many);
    st_hist_record_n(&many, 5, 0);
    assert_int_equal(many.count, 0);
    assert_int_equal(many.min, UINT64_MAX);
    assert_int_equal(many.max, 0);
    /* Large counts: a trillion values at 1 ms and one at 1 s. */
    st_hist_record_n(&many, 1000000, 1000000000000ull);
    st_hist_record(&many, 1000000000);
    assert_int_equal(many.count, 1000000000001ull);
    check_bound(6, st_hist_quantile(&many, 0.999999), 1000000);
    assert_int_equal(st_hist_quantile(&many, 1.0), 1000000000);
    assert_int_equal(st_hist_quantile(&many, 0.0), 1000000);
    st_hist_release(&one);
    st_hist_release(&many);
}

__extension__ typedef unsigned __int128 u128;

/*
 * Whether long double arithmetic really carries more than 53 bits here. It does on x86-64
 * hardware, but valgrind runs x87 code at double precision, and some ABIs make long double a
 * double; there the sum of large values is rounded once per record.
 */
static int long_double_is_wide(void)
{
    volatile long double one = 1.0L, tiny = 0x1p-60L;
    return one + tiny != one;
}

static void test_mean(void **state)
{
    (void)state;
    uint64_t *v = malloc(N_VALUES * sizeof(*v));
    assert_non_null(v);
    for (int d = 0; d < D_COUNT; d++) {
        struct st_rng r;
        st_rng_seed(&r, 2000 + (uint64_t)d);
        size_t n = gen((enum dist)d, &r, v, N_VALUES);
        struct st_hist h;
        st_hist_init(&h, 8);
        u128 sum = 0;
        for (size_t i = 0; i < n; i++) {
            st_hist_record(&h, v[i]);
            sum += v[i];
        }
        /* The exact mean is quot + rem / n; compare to the nearest double within 1 ulp. */
        uint64_t quot = (uint64_t)(sum / n);
        uint64_t rem = (uint64_t)(sum % n);
        double exact = (double)quot + (double)rem / (double)n;
        double got = st_hist_mean(&h);
        double tol = long_double_is_wide() ? 0x1p-52 : (double)n * 0x1p-52;
        assert_true(fabs(got - exact) <= exact * tol);
        st_hist_release(&h);
    }
    free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_differential_vs_sort),
        cmocka_unit_test(test_bound_per_value),
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_rel_error),
        cmocka_unit_test(test_rank),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_record_n),
        cmocka_unit_test(test_mean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
