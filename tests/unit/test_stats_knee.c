/*
 * Tests for src/stats/knee.c: the capacity probe's queueing rule against passes worked by hand,
 * among them the FIFO queue llama.cpp b4748 `-np 2` gave four documents (TTFTs 477, 477, 1010,
 * 1006 ms), which the old rule (4 x the one-document TTFT) read as fitting.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>

#include "stats/knee.h"

/* A document sent at 0 with TTFT t and end e, u of its p prompt tokens uncached. */
static struct st_knee_doc doc(double t, double e, double u, double p)
{
    struct st_knee_doc d = {.sent_ms = 0,
                            .first_ms = t,
                            .end_ms = e,
                            .ttft_ms = t,
                            .uncached_tokens = u,
                            .prompt_tokens = p};
    return d;
}

/* Seeds: 4,096-token documents computed in 240 ms each; the reference: one seeded document, 30
 * ms with 16 tokens uncached. */
static struct st_knee_ref ref_of(double jump)
{
    struct st_knee_ref r = {.rate_ms_per_token = 240.0 / 4096,
                            .ref_ttft_ms = 30,
                            .ref_uncached_tokens = 16,
                            .jump = jump,
                            .prefill_jump = 4};
    return r;
}

static void test_rate(void **state)
{
    (void)state;
    /* Median of 240/4096, 250/4096, 260/4096; the mostly cached one (16 of 4,096) is left out. */
    static const double t[] = {240, 250, 30, 260};
    static const double u[] = {4096, 4096, 16, 4096};
    static const double p[] = {4096, 4096, 4096, 4096};
    assert_true(fabs(st_knee_rate(t, u, p, 4) - 250.0 / 4096) < 1e-12);
    /* Without the share test the cached one counts (30/16 is the largest): (250 + 260) / 2. */
    assert_true(fabs(st_knee_rate(t, u, NULL, 4) - 255.0 / 4096) < 1e-12);
    static const double un[] = {NAN, NAN, NAN, NAN};
    assert_true(isnan(st_knee_rate(t, un, p, 4)));
    assert_true(isnan(st_knee_rate(t, u, p, 0)));
}

static void test_fifo_behind_two_slots(void **state)
{
    (void)state;
    /* Two run (477 ms: both computed, the slots held other documents), end at 530; the other two
     * get a slot then and start at 1010 and 1006. Cached counts unknown: the whole prompt. */
    struct st_knee_doc d[4] = {doc(477, 530, NAN, 4096), doc(477, 531, NAN, 4096),
                               doc(1010, 1062, NAN, 4096), doc(1006, 1059, NAN, 4096)};
    struct st_knee_ref r = ref_of(1.5);
    struct st_knee_out o;
    st_knee_judge(d, 4, &r, &o);
    assert_true(o.queued);
    assert_int_equal(o.waited, 2);
    assert_int_equal(o.doc, 2);
    assert_int_equal(o.after, 0);
    /* Alone: 30 + 240/4096 x (4096 - 16) = 269.06 ms; 1010 > 1.5 x that. */
    assert_true(fabs(o.alone_ms - (30 + 240.0 / 4096 * 4080)) < 1e-9);
    /* The whole prefill (4 documents one after another) is 30 + 4 x 239.06 = 986.25 ms: rule 2
     * alone would not see this queue. */
    assert_false(o.past_prefill);
    assert_true(fabs(o.prefill_ms - (30 + 4 * 240.0 / 4096 * 4080)) < 1e-9);
    /* Still queued when one document alone cost as much as the first wave (477 ms). */
    r.rate_ms_per_token = 477.0 / 4096;
    st_knee_judge(d, 4, &r, &o);
    assert_true(o.queued && o.waited == 2);
    /* The old rule's factor, 4, misses it (1010 < 4 x 269). */
    r = ref_of(4);
    st_knee_judge(d, 4, &r, &o);
    assert_false(o.queued);
}

static void test_no_queue(void **state)
{
    (void)state;
    struct st_knee_ref r = ref_of(1.5);
    struct st_knee_out o;
    /* Chunked prefill one after another (vLLM): 240, 480, 720, 960, each ending 2 s later. */
    struct st_knee_doc s[4] = {doc(240, 2240, 4096, 4096), doc(480, 2480, 4096, 4096),
                               doc(720, 2720, 4096, 4096), doc(960, 2960, 4096, 4096)};
    st_knee_judge(s, 4, &r, &o);
    assert_false(o.queued);
    assert_int_equal(o.doc, -1);
    /* Batched (llama.cpp, slots enough): all at 960. */
    struct st_knee_doc b[4] = {doc(960, 2900, 4096, 4096), doc(960, 2900, 4096, 4096),
                               doc(961, 2901, 4096, 4096), doc(962, 2902, 4096, 4096)};
    st_knee_judge(b, 4, &r, &o);
    assert_false(o.queued);
    /* A stall: every document slow, none after another's end. */
    struct st_knee_doc t[3] = {doc(300, 900, 16, 4096), doc(310, 910, 16, 4096),
                               doc(305, 905, 16, 4096)};
    st_knee_judge(t, 3, &r, &o);
    assert_false(o.queued);
    assert_true(fabs(o.ttft_max_ms - 310) < 1e-12 && fabs(o.ttft_min_ms - 300) < 1e-12);
    /* A busy host (llama.cpp b4748 -np 2 on two shared cores, both documents seeded): 963.8 and
     * 328.7 ms against 377.8 ms alone, ends 1.6 s later. Not a queue; rule 2 at 1.5 would say so.
     */
    struct st_knee_ref busy = {.rate_ms_per_token = 2.407,
                               .ref_ttft_ms = 377.8,
                               .ref_uncached_tokens = 1,
                               .jump = 1.5,
                               .prefill_jump = 4};
    struct st_knee_doc h[2] = {doc(963.8, 2400, 1, 1536), doc(328.7, 1650, 1, 1536)};
    st_knee_judge(h, 2, &busy, &o);
    assert_false(o.queued);
    busy.prefill_jump = 1.5;
    st_knee_judge(h, 2, &busy, &o);
    assert_true(o.queued && o.past_prefill && o.waited == 0);
    /* Sent after the other ended (a late client), then fast: no wait. */
    struct st_knee_doc late[2] = {doc(30, 100, 16, 4096), doc(30, 400, 16, 4096)};
    late[1].sent_ms = 200;
    late[1].first_ms = 230;
    st_knee_judge(late, 2, &r, &o);
    assert_false(o.queued);
}

static void test_past_prefill(void **state)
{
    (void)state;
    struct st_knee_ref r = ref_of(1.5);
    struct st_knee_out o;
    /* Seeded documents (16 uncached): the pass's prefill is the reference, 30 ms. End times
     * unknown (receipts without them): rule 2 alone. */
    struct st_knee_doc d[3] = {doc(31, NAN, 16, 4096), doc(32, NAN, 16, 4096),
                               doc(900, NAN, 16, 4096)};
    st_knee_judge(d, 3, &r, &o);
    assert_true(o.queued && o.past_prefill && o.waited == 0);
    assert_int_equal(o.doc, 2);
    assert_true(fabs(o.prefill_ms - 30) < 1e-12);
    /* The reference pass itself (no reference yet) is never queued. */
    r.ref_ttft_ms = NAN;
    st_knee_judge(d, 3, &r, &o);
    assert_false(o.queued);
    st_knee_judge(d, 0, &r, &o);
    assert_false(o.queued);
    assert_true(isnan(o.ttft_max_ms));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rate),
        cmocka_unit_test(test_fifo_behind_two_slots),
        cmocka_unit_test(test_no_queue),
        cmocka_unit_test(test_past_prefill),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
