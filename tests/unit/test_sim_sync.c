/*
 * Tests for the simulator's synchronization with its clients (src/sim/sync.c): the header
 * syntax, the horizon of closed-loop slots and open-loop schedules, until, abort and expire, a
 * stream's requests received out of order (X-Sim-Seq), and a differential test of placements
 * against a brute-force FIFO queue with M servers.
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
    assert_int_equal(st_sim_sync_arrive(s, h, now, NULL, req, &pl, err, sizeof(err)), 0);
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
    assert_int_equal(st_sim_sync_arrive(s, &h, 0, NULL, &r, &pl, err, sizeof(err)), ST_EPARSE);
    assert_null(r);
    assert_int_equal(pl.session_start, 10);
    assert_non_null(strstr(err, "no longer synchronized"));
    /* Another stream count for the same session is refused. */
    hdr(&h, "a", 3, 0, 50, "none");
    assert_int_equal(st_sim_sync_arrive(s, &h, 0, NULL, &r, &pl, err, sizeof(err)), ST_EPARSE);
    assert_non_null(strstr(err, "has 2 streams"));
    /* expire: stream 1 waits at 40; giving up on streams due by 39 changes nothing. */
    assert_int_equal(st_sim_sync_expire(s, 39), 0);
    assert_int_equal(st_sim_sync_expire(s, 40), 1);
    assert_int_equal(st_sim_sync_horizon(s), NEVER);
    assert_int_equal(st_sim_sync_sessions(s), 0);
    /* More requests in flight than the cap: the stream is refused and stops constraining. */
    hdr(&h, "c", 1, 0, 0, "at=0,cap=1");
    assert_int_equal(arrive(s, &h, 0, &r), 0);
    assert_int_equal(st_sim_sync_arrive(s, &h, 0, NULL, &q, &pl, err, sizeof(err)), ST_EPARSE);
    assert_non_null(strstr(err, "its cap"));
    assert_int_equal(st_sim_sync_horizon(s), NEVER);
    st_sim_sync_end(s, r, 5);
    assert_int_equal(st_sim_sync_sessions(s), 0);
    st_sim_sync_free(s);
}

/* hdr with X-Sim-Seq. */
static void hdr_seq(struct st_sim_sync_hdr *h, const char *session, uint64_t arrival,
                    const char *next, uint64_t seq)
{
    char q[32], err[160];
    hdr(h, session, 1, 0, arrival, next);
    snprintf(q, sizeof(q), "%llu", (unsigned long long)seq);
    assert_int_equal(st_sim_sync_parse_seq(q, h, err, sizeof(err)), 0);
}

/* Parks h: returns its handle. */
static struct st_sim_sync_req *park(struct st_sim_sync *s, const struct st_sim_sync_hdr *h,
                                    void *owner)
{
    struct st_sim_sync_req *r;
    struct st_sim_sync_place pl;
    char err[160];
    assert_int_equal(st_sim_sync_arrive(s, h, 0, owner, &r, &pl, err, sizeof(err)),
                     ST_SIM_SYNC_PARKED);
    assert_non_null(r);
    return r;
}

/* The one parked request that may go now: its owner, answer and place. */
static uint64_t unpark_one(struct st_sim_sync *s, void *owner, int rc_want,
                           struct st_sim_sync_req **req)
{
    void *o = NULL;
    struct st_sim_sync_place pl;
    int rc = -99;
    char err[160];
    assert_int_equal(st_sim_sync_unpark(s, &o, req, &pl, &rc, err, sizeof(err)), 1);
    assert_ptr_equal(o, owner);
    assert_int_equal(rc, rc_want);
    void *o2;
    struct st_sim_sync_req *r2;
    assert_int_equal(st_sim_sync_unpark(s, &o2, &r2, &pl, &rc, err, sizeof(err)), 0);
    return pl.t_ns;
}

/*
 * Each request travels on its own connection, so a loaded host can deliver a stream's requests
 * out of order. The trace of the flaky e2e (0, 120, 200, 450, 700 ms, all sent at once): the
 * last one (none) came before the fourth, which was then refused as "done" and placed at the
 * session's start (X-Sim-Arrival 0). With X-Sim-Seq the last one waits and both land where
 * declared.
 */
static void test_reordered(void **state)
{
    (void)state;
    char err[160], q[16];
    struct st_sim_sync_hdr h;
    struct st_sim_sync_place pl;
    assert_int_equal(st_sim_sync_parse_seq(NULL, &h, err, sizeof(err)), 0);
    assert_int_equal(h.has_seq, 0);
    assert_int_equal(st_sim_sync_parse_seq("x", &h, err, sizeof(err)), ST_EPARSE);
    assert_non_null(strstr(err, "X-Sim-Seq"));
    assert_int_equal(st_sim_sync_parse_seq("-1", &h, err, sizeof(err)), ST_EPARSE);

    const uint64_t ms = 1000000, t0 = 5 * ms;
    const uint64_t at[5] = {0, 120 * ms, 200 * ms, 450 * ms, 700 * ms};
    const int order[5] = {0, 1, 2, 4, 3};
    for (int with_seq = 0; with_seq <= 1; with_seq++) {
        struct st_sim_sync *s = st_sim_sync_new();
        struct st_sim_sync_req *r[5] = {0};
        uint64_t place[5] = {0};
        int owners[5];
        for (int j = 0; j < 5; j++) {
            int i = order[j];
            char next[64] = "none";
            if (i < 4) {
                snprintf(next, sizeof(next), "at=%llu,cap=1024", (unsigned long long)at[i + 1]);
            }
            hdr(&h, "trace", 1, 0, at[i], next);
            snprintf(q, sizeof(q), "%d", i);
            assert_int_equal(st_sim_sync_parse_seq(with_seq ? q : NULL, &h, err, sizeof(err)), 0);
            owners[i] = i;
            int rc = st_sim_sync_arrive(s, &h, t0, &owners[i], &r[i], &pl, err, sizeof(err));
            if (!with_seq) {
                if (i == 3) {
                    /* Order of receipt: the fourth finds its stream done. */
                    assert_int_equal(rc, ST_EPARSE);
                    assert_non_null(strstr(err, "done"));
                    continue;
                }
                assert_int_equal(rc, 0);
                place[i] = pl.t_ns;
                continue;
            }
            if (i == 4) {
                assert_int_equal(rc, ST_SIM_SYNC_PARKED);
                /* It waits; the horizon still waits for the fourth. */
                assert_int_equal(st_sim_sync_horizon(s), t0 + at[3]);
                continue;
            }
            assert_int_equal(rc, 0);
            place[i] = pl.t_ns;
            if (i == 3) {
                place[4] = unpark_one(s, &owners[4], 0, &r[4]);
            }
        }
        if (with_seq) {
            for (int i = 0; i < 5; i++) {
                assert_int_equal(place[i], t0 + at[i]);
            }
            assert_int_equal(st_sim_sync_horizon(s), NEVER);
        }
        for (int i = 0; i < 5; i++) {
            if (r[i]) {
                st_sim_sync_end(s, r[i], place[i] + ms);
            }
        }
        assert_int_equal(st_sim_sync_sessions(s), 0);
        st_sim_sync_free(s);
    }

    /* Two swapped in the middle: the second is placed at its own time, not the third's. */
    struct st_sim_sync *s = st_sim_sync_new();
    struct st_sim_sync_req *a, *b, *c;
    int oc = 2;
    hdr_seq(&h, "mid", 0, "at=120,cap=4", 0);
    assert_int_equal(arrive(s, &h, 0, &a), 0);
    hdr_seq(&h, "mid", 200, "at=450,cap=4", 2);
    c = park(s, &h, &oc);
    hdr_seq(&h, "mid", 120, "at=200,cap=4", 1);
    assert_int_equal(arrive(s, &h, 0, &b), 120);
    assert_int_equal(unpark_one(s, &oc, 0, &c), 200);
    assert_int_equal(st_sim_sync_horizon(s), 450);
    /* A place already taken is refused and the stream stops constraining. */
    struct st_sim_sync_req *d;
    hdr_seq(&h, "mid", 450, "none", 1);
    assert_int_equal(st_sim_sync_arrive(s, &h, 0, NULL, &d, &pl, err, sizeof(err)), ST_EPARSE);
    assert_null(d);
    assert_non_null(strstr(err, "already placed request 1"));
    assert_int_equal(st_sim_sync_horizon(s), NEVER);
    st_sim_sync_end(s, a, 300);
    st_sim_sync_end(s, b, 300);
    st_sim_sync_end(s, c, 300);
    assert_int_equal(st_sim_sync_sessions(s), 0);
    st_sim_sync_free(s);

    /* The earlier one never comes: the parked one waits until the stream is given up, then is
     * refused (undeclared); a parked one whose client leaves frees its stream. */
    s = st_sim_sync_new();
    hdr_seq(&h, "gone", 0, "at=100,cap=4", 0);
    assert_int_equal(arrive(s, &h, 0, &a), 0);
    st_sim_sync_end(s, a, 50);
    hdr_seq(&h, "gone", 300, "none", 2);
    c = park(s, &h, &oc);
    void *o;
    int rc;
    assert_int_equal(st_sim_sync_unpark(s, &o, &b, &pl, &rc, err, sizeof(err)), 0);
    assert_int_equal(st_sim_sync_horizon(s), 100);
    assert_int_equal(st_sim_sync_sessions(s), 1);
    assert_int_equal(st_sim_sync_expire(s, 100), 1);
    unpark_one(s, &oc, ST_EPARSE, &c);
    assert_null(c);
    assert_int_equal(st_sim_sync_sessions(s), 0);
    hdr_seq(&h, "left", 0, "at=100,cap=4", 0);
    assert_int_equal(arrive(s, &h, 0, &a), 0);
    hdr_seq(&h, "left", 300, "none", 2);
    c = park(s, &h, &oc);
    st_sim_sync_abort(s, c);
    assert_int_equal(st_sim_sync_horizon(s), NEVER);
    st_sim_sync_end(s, a, 40);
    assert_int_equal(st_sim_sync_sessions(s), 0);
    /* A session that ended (its one stream aborted after a stall, so the session was freed)
     * and comes back with the stream's next request: nothing earlier will come, it is placed. */
    hdr_seq(&h, "stall", 0, "at=0,cap=1", 0);
    assert_int_equal(arrive(s, &h, 0, &a), 0);
    st_sim_sync_abort(s, a);
    assert_int_equal(st_sim_sync_sessions(s), 0);
    hdr_seq(&h, "stall", 0, "none", 1);
    assert_int_equal(st_sim_sync_arrive(s, &h, 7, NULL, &a, &pl, err, sizeof(err)), 0);
    assert_int_equal(pl.seq, 1);
    st_sim_sync_end(s, a, 9);
    assert_int_equal(st_sim_sync_sessions(s), 0);
    /* Parked requests are freed with the sync. */
    hdr_seq(&h, "free", 0, "at=100,cap=4", 0);
    assert_int_equal(arrive(s, &h, 0, &a), 0);
    hdr_seq(&h, "free", 0, "at=100,cap=4", 3);
    (void)park(s, &h, &oc);
    st_sim_sync_end(s, a, 1);
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
        cmocka_unit_test(test_reordered),
        cmocka_unit_test(test_open_loop_vs_queue),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
