/*
 * Tests for the simulator's synchronization with its clients (src/sim/sync.c): the header
 * syntax, the horizon of closed-loop slots and open-loop schedules, until, abort and expire, and
 * a differential test of placements against a brute-force FIFO queue with M servers.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "base/rng.h"
#include "sim/sync.h"

#define NEVER ST_SIM_SYNC_NEVER

static void hdr(struct st_sim_sync_hdr *h, const char *session, uint32_t streams, uint32_t stream,
                uint64_t arrival, const char *next)
{
    char n1[16], n2[16], a[32];
    snprintf(n1, sizeof(n1), "%u", streams);
    snprintf(n2, sizeof(n2), "%u", stream);
    snprintf(a, sizeof(a), "%llu", (unsigned long long)arrival);
    char err[160];
    assert_int_equal(st_sim_sync_parse(session, n1, n2, a, next, h, err, sizeof(err)), 0);
}

/* Arrives and returns the absolute place. */
static uint64_t arrive(struct st_sim_sync *s, const struct st_sim_sync_hdr *h, uint64_t now,
                       struct st_sim_sync_req **req)
{
    struct st_sim_sync_place pl;
    char err[160];
    assert_int_equal(st_sim_sync_arrive(s, h, now, req, &pl, err, sizeof(err)), 0);
    return pl.t_ns;
}

static void test_parse(void **state)
{
    (void)state;
    struct st_sim_sync_hdr h;
    char err[160];
    assert_int_equal(st_sim_sync_parse(NULL, NULL, NULL, NULL, NULL, &h, err, sizeof(err)), 1);
    assert_int_equal(
        st_sim_sync_parse("st-1.a_b", "4", "3", "1500", "at=20,cap=8,until=900", &h, err, 160), 0);
    assert_string_equal(h.session, "st-1.a_b");
    assert_int_equal(h.streams, 4);
    assert_int_equal(h.stream, 3);
    assert_int_equal(h.arrival_ns, 1500);
    assert_int_equal(h.next.none, 0);
    assert_int_equal(h.next.at_ns, 20);
    assert_int_equal(h.next.cap, 8);
    assert_int_equal(h.next.until_ns, 900);
    assert_int_equal(st_sim_sync_parse("s", "1", "0", NULL, "none", &h, err, 160), 0);
    assert_int_equal(h.next.none, 1);
    assert_int_equal(h.arrival_ns, 0);
    assert_int_equal(st_sim_sync_parse("s", "1", "0", NULL, "cap=1", &h, err, 160), 0);
    assert_int_equal(h.next.at_ns, 0);
    assert_int_equal(h.next.until_ns, NEVER);
    /* Refusals, each naming its header. */
    const char *bad[][5] = {
        {"s p", "1", "0", "0", "none"},      {"s", "0", "0", "0", "none"},
        {"s", "2", "2", "0", "none"},        {"s", "1", "0", "-1", "none"},
        {"s", "1", "0", "0", NULL},          {"s", "1", "0", "0", "at=1,cap=0"},
        {"s", "1", "0", "0", "at=x"},        {"s", "1", "0", "0", "when=5"},
        {"s", "1", "0", "0", "at=1,,cap=2"}, {"s", "99999999", "0", "0", "none"},
    };
    const char *names[] = {"X-Sim-Session", "X-Sim-Streams", "X-Sim-Stream", "X-Sim-Arrival",
                           "X-Sim-Next",    "X-Sim-Next",    "X-Sim-Next",   "X-Sim-Next",
                           "X-Sim-Next",    "X-Sim-Streams"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        assert_int_equal(st_sim_sync_parse(bad[i][0], bad[i][1], bad[i][2], bad[i][3], bad[i][4],
                                           &h, err, sizeof(err)),
                         ST_EPARSE);
        assert_non_null(strstr(err, names[i]));
    }
}

/* Two closed-loop slots of 2 requests each, starting at virtual 1000. */
static void test_closed_loop(void **state)
{
    (void)state;
    struct st_sim_sync *s = st_sim_sync_new();
    struct st_sim_sync_hdr h0, h1;
    struct st_sim_sync_req *r0, *r1;
    assert_int_equal(st_sim_sync_horizon(s), NEVER);
    hdr(&h0, "run", 2, 0, 0, "at=0,cap=1");
    assert_int_equal(arrive(s, &h0, 1000, &r0), 1000);
    /* Slot 1 has not sent its first request: nothing at or after 1000 may run yet. */
    assert_int_equal(st_sim_sync_horizon(s), 1000);
    assert_int_equal(st_sim_sync_sessions(s), 1);
    hdr(&h1, "run", 2, 1, 0, "at=0,cap=1");
    assert_int_equal(arrive(s, &h1, 5000 /* ignored: the session exists */, &r1), 1000);
    /* Both in flight: no one can arrive before one ends. */
    assert_int_equal(st_sim_sync_horizon(s), NEVER);
    st_sim_sync_end(s, r1, 1700);
    assert_int_equal(st_sim_sync_horizon(s), 1700);
    /* Its next request says it comes at 700 (session time) = 1700, and is its last. */
    hdr(&h1, "run", 2, 1, 700, "none");
    assert_int_equal(arrive(s, &h1, 0, &r1), 1700);
    assert_int_equal(st_sim_sync_horizon(s), NEVER);
    st_sim_sync_end(s, r0, 2500);
    assert_int_equal(st_sim_sync_horizon(s), 2500);
    /* A client that declares less than the rule gets the rule's place (the slot's end). */
    hdr(&h0, "run", 2, 0, 0, "none");
    assert_int_equal(arrive(s, &h0, 0, &r0), 2500);
    st_sim_sync_end(s, r0, 2600);
    assert_int_equal(st_sim_sync_sessions(s), 1);
    st_sim_sync_end(s, r1, 2900);
    /* Every stream done, nothing in flight: the session is gone. */
    assert_int_equal(st_sim_sync_sessions(s), 0);
    assert_int_equal(st_sim_sync_horizon(s), NEVER);
    st_sim_sync_free(s);
}

static void test_until_abort_expire(void **state)
{
    (void)state;
    struct st_sim_sync *s = st_sim_sync_new();
    struct st_sim_sync_hdr h;
    struct st_sim_sync_req *r, *q;
    /* until: a slot whose request ends at or after the duration sends no more. */
    hdr(&h, "d", 1, 0, 0, "at=0,cap=1,until=500");
    assert_int_equal(arrive(s, &h, 0, &r), 0);
    st_sim_sync_end(s, r, 300);
    assert_int_equal(st_sim_sync_horizon(s), 300);
    hdr(&h, "d", 1, 0, 300, "at=0,cap=1,until=500");
    assert_int_equal(arrive(s, &h, 0, &r), 300);
    st_sim_sync_end(s, r, 500);
    assert_int_equal(st_sim_sync_horizon(s), NEVER);
    assert_int_equal(st_sim_sync_sessions(s), 0);
    char err[160];
    struct st_sim_sync_place pl;
    /* abort: the stream stops constraining and its later requests are refused. */
    hdr(&h, "a", 2, 0, 0, "at=0,cap=1");
    assert_int_equal(arrive(s, &h, 10, &r), 10);
    assert_int_equal(st_sim_sync_horizon(s), 10); /* stream 1 */
    hdr(&h, "a", 2, 1, 0, "at=0,cap=1");
    assert_int_equal(arrive(s, &h, 10, &q), 10);
    st_sim_sync_abort(s, r);
    st_sim_sync_end(s, q, 40);
    assert_int_equal(st_sim_sync_horizon(s), 40);
    hdr(&h, "a", 2, 0, 50, "at=0,cap=1");
    assert_int_equal(st_sim_sync_arrive(s, &h, 0, &r, &pl, err, sizeof(err)), ST_EPARSE);
    assert_null(r);
    assert_int_equal(pl.session_start, 10);
    assert_non_null(strstr(err, "no longer synchronized"));
    /* Another stream count for the same session is refused. */
    hdr(&h, "a", 3, 0, 50, "none");
    assert_int_equal(st_sim_sync_arrive(s, &h, 0, &r, &pl, err, sizeof(err)), ST_EPARSE);
    assert_non_null(strstr(err, "has 2 streams"));
    /* expire: stream 1 waits at 40; giving up on streams due by 39 changes nothing. */
    assert_int_equal(st_sim_sync_expire(s, 39), 0);
    assert_int_equal(st_sim_sync_expire(s, 40), 1);
    assert_int_equal(st_sim_sync_horizon(s), NEVER);
    assert_int_equal(st_sim_sync_sessions(s), 0);
    /* More requests in flight than the cap: the stream is refused and stops constraining. */
    hdr(&h, "c", 1, 0, 0, "at=0,cap=1");
    assert_int_equal(arrive(s, &h, 0, &r), 0);
    assert_int_equal(st_sim_sync_arrive(s, &h, 0, &q, &pl, err, sizeof(err)), ST_EPARSE);
    assert_non_null(strstr(err, "its cap"));
    assert_int_equal(st_sim_sync_horizon(s), NEVER);
    st_sim_sync_end(s, r, 5);
    assert_int_equal(st_sim_sync_sessions(s), 0);
    st_sim_sync_free(s);
}

/*
 * Differential: an open-loop stream with cap M and schedule T_i; requests end after random
 * service times, and the simulator's events are replayed in virtual-time order (a request is
 * received as soon as the client may send it: fewer than M in flight). Every place must equal a
 * brute-force FIFO queue with M servers: start_i = max(T_i, start_(i-1), earliest free server).
 */
#define N_REQ 400

static void test_open_loop_vs_queue(void **state)
{
    (void)state;
    for (uint32_t cap = 1; cap <= 5; cap++) {
        struct st_rng rng;
        st_rng_seed(&rng, 1000 + cap);
        uint64_t start_ns[N_REQ], dur[N_REQ], want[N_REQ];
        uint64_t t = 0;
        for (int i = 0; i < N_REQ; i++) {
            t += st_rng_u64(&rng) % 50;
            start_ns[i] = t;
            dur[i] = 1 + st_rng_u64(&rng) % 400;
        }
        /* Brute force. */
        uint64_t free_at[8] = {0};
        uint64_t prev = 0;
        for (int i = 0; i < N_REQ; i++) {
            int k = 0;
            for (uint32_t j = 1; j < cap; j++) {
                if (free_at[j] < free_at[k]) {
                    k = (int)j;
                }
            }
            uint64_t st = start_ns[i] > prev ? start_ns[i] : prev;
            st = free_at[k] > st ? free_at[k] : st;
            want[i] = st;
            prev = st;
            free_at[k] = st + dur[i];
        }
        /* The same through the sync, events in virtual order: the client sends request i once
         * fewer than cap of its requests are unfinished; ends happen at place + dur. */
        struct st_sim_sync *s = st_sim_sync_new();
        struct st_sim_sync_req *req[N_REQ];
        uint64_t end[N_REQ];
        int sent = 0, ended = 0, done[N_REQ] = {0};
        uint64_t now = 0;
        while (ended < N_REQ) {
            int inflight = sent - ended;
            if (sent < N_REQ && inflight < (int)cap) {
                struct st_sim_sync_hdr h;
                char next[64];
                if (sent + 1 < N_REQ) {
                    snprintf(next, sizeof(next), "at=%llu,cap=%u",
                             (unsigned long long)start_ns[sent + 1], cap);
                } else {
                    snprintf(next, sizeof(next), "none");
                }
                hdr(&h, "open", 1, 0, start_ns[sent], next);
                uint64_t p = arrive(s, &h, 0, &req[sent]);
                assert_int_equal(p, want[sent]);
                end[sent] = p + dur[sent];
                sent++;
                continue;
            }
            /* The next end in virtual order; the horizon never lets it pass a pending place. */
            int best = -1;
            for (int i = 0; i < sent; i++) {
                if (!done[i] && (best < 0 || end[i] < end[best])) {
                    best = i;
                }
            }
            assert_true(end[best] >= now);
            now = end[best];
            st_sim_sync_end(s, req[best], end[best]);
            done[best] = 1;
            ended++;
            if (sent < N_REQ) {
                /* The next place is known now and is never before the time reached. */
                uint64_t h = st_sim_sync_horizon(s);
                assert_true(h == want[sent] || h == NEVER);
            }
        }
        assert_int_equal(st_sim_sync_sessions(s), 0);
        st_sim_sync_free(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_closed_loop),
        cmocka_unit_test(test_until_abort_expire),
        cmocka_unit_test(test_open_loop_vs_queue),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
