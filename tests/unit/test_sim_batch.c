/*
 * Tests for src/sim/model/batch.c, the engine model: invariants over seeded random workloads (KV
 * never over the pool and st_kv_check on every rank after every step, exact token totals, the
 * step budget, max_running, FIFO first admission, preemption and resumption), queueing exactly
 * when the pool is full and the seed-003 capacity probe, prefix-cache hits and flush, per-slot
 * caches (llama.cpp), speculative
 * acceptance (mean, per position, decay with context), the dialects' context-length messages,
 * DP ranks, pressure, abort and determinism. Everything runs on fixed seeds and virtual time.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/rng.h"
#include "sim/model/batch.h"
#include "sim/model/cost.h"
#include "sim/model/kv.h"
#include "sim/model/memory.h"
#include "sim/model/profile.h"

#define PAGE 16
#define MAX_IDS 2048
#define MAX_RANKS 4
#define MAX_HASHES 4096

/* ---- profiles and prompts ---- */

/* Sets mem_fraction so that one rank's pool holds lo..hi blocks (the plan grows with it). */
static void set_pool(struct st_profile *p, uint64_t lo, uint64_t hi)
{
    double a = 0.0;
    double z = 1.0;
    for (int i = 0; i < 200; i++) {
        struct st_mem_plan m;
        p->engine.mem_fraction = (a + z) / 2;
        st_mem_plan_compute(p, &m);
        if (!m.fits || m.kv_pool_blocks < lo) {
            a = p->engine.mem_fraction;
        } else if (m.kv_pool_blocks > hi) {
            z = p->engine.mem_fraction;
        } else {
            return;
        }
    }
    fail_msg("no mem_fraction gives a pool of %llu..%llu blocks", (unsigned long long)lo,
             (unsigned long long)hi);
}

/*
 * The defaults with a page of PAGE tokens, a pool of lo..hi blocks and a context of lo blocks (a
 * vLLM engine does not start with a context over its pool).
 */
static void base_profile(struct st_profile *p, enum st_dialect d, double reserve, uint64_t lo,
                         uint64_t hi)
{
    st_profile_defaults(p);
    p->engine.context_length = lo * PAGE;
    p->engine.dialect = d;
    p->engine.admit_output_reserve = reserve;
    p->engine.page_size = PAGE;
    p->engine.prefix_caching = 1;
    p->engine.spec_method = ST_SPEC_NONE;
    p->engine.spec_steps = 0;
    set_pool(p, lo, hi);
}

static void set_spec(struct st_profile *p, uint32_t steps, const double *accept, double halflife)
{
    p->engine.spec_method = ST_SPEC_MTP;
    if (p->model.mtp_layers < 1) {
        p->model.mtp_layers = 1;
    }
    p->engine.spec_steps = steps;
    p->engine.n_spec_accept = steps;
    for (uint32_t i = 0; i < steps; i++) {
        p->engine.spec_accept[i] = accept[i];
    }
    p->engine.spec_accept_halflife_tokens = halflife;
}

/* Reads profiles/<file> (ST_PROFILES_DIR), as the simulator would, and validates it. */
static void load_profile(struct st_profile *p, const char *file)
{
    const char *dir = getenv("ST_PROFILES_DIR");
    char path[1024];
    char err[512] = "";
    static char text[1 << 16];
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "profiles", file);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fail_msg("cannot open %s (set ST_PROFILES_DIR)", path);
    }
    size_t n = fread(text, 1, sizeof text, f);
    fclose(f);
    st_profile_defaults(p);
    if (st_profile_parse(p, text, n, path, err, sizeof err) != 0 ||
        st_profile_validate(p, err, sizeof err) != 0) {
        fail_msg("%s", err);
    }
}

static uint64_t pool_blocks(const struct st_batch *b)
{
    return st_batch_plan(b)->kv_pool_blocks;
}

/* Chained block hashes: the first `shared` blocks belong to family f, the rest to prompt u. */
static void make_hashes(uint64_t *h, uint32_t n, uint32_t shared, uint64_t f, uint64_t u)
{
    uint64_t prev = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t content[3] = {prev, i < shared ? f : u, i < shared ? 1u : 2u};
        uint64_t x = st_hash64(content, sizeof content);
        h[i] = x ? x : 1; /* 0 is the root */
        prev = h[i];
    }
}

/* ---- a tracked engine ---- */

struct rec {
    uint64_t prompt;
    uint32_t max_tokens;
    uint32_t emitted;
    uint32_t rank;
    uint8_t live;
    uint8_t aborted;
    uint8_t finished;
    uint8_t admitted;
    uint8_t preempted;
    uint64_t submit_ns;
    uint64_t admit_ns;  /* start of the step of its first admission */
    uint64_t first_ns;  /* end of the step of its first token */
    uint64_t finish_ns; /* end of the step of its last token */
    uint64_t cached;    /* cached_tokens at its last admission */
    uint64_t admit_step;
};

struct track {
    struct st_profile p;
    struct st_batch *b;
    uint32_t ranks;
    uint32_t spec;
    uint64_t now;
    uint64_t steps;
    uint32_t n;
    uint32_t live;
    uint64_t pressure;
    uint64_t preempt_events;
    uint64_t resumed_finished; /* preempted at least once, then finished */
    uint64_t digest;
    struct rec r[MAX_IDS];
    uint32_t order[MAX_RANKS][MAX_IDS]; /* ids by submission, per rank */
    uint32_t n_order[MAX_RANKS];
    uint32_t next_admit[MAX_RANKS];
    /* Speculative samples: uncapped decode events, their tokens and expected tokens. */
    uint64_t spec_n[2];
    double spec_sum[2];
    double spec_expect[2];
    uint64_t spec_split_ctx;  /* contexts below go to bin 0, the rest to bin 1 */
    uint64_t kv_check_period; /* st_kv_check every this many steps (O(pool) each) */
};

static struct track *track_new(const struct st_profile *p, uint64_t seed)
{
    struct track *t = calloc(1, sizeof *t);
    assert_non_null(t);
    t->p = *p;
    t->b = st_batch_new(&t->p, seed);
    assert_non_null(t->b);
    struct st_batch_stats s;
    st_batch_get_stats(t->b, &s);
    t->ranks = s.ranks;
    assert_true(t->ranks >= 1 && t->ranks <= MAX_RANKS);
    t->spec = p->engine.spec_method != ST_SPEC_NONE ? p->engine.spec_steps : 0;
    t->digest = ST_HASH_INIT;
    t->spec_split_ctx = UINT64_MAX;
    t->kv_check_period = 1;
    return t;
}

static void track_free(struct track *t)
{
    st_batch_free(t->b);
    free(t);
}

/* Submits the next id; returns it. */
static uint32_t submit(struct track *t, uint64_t prompt, const uint64_t *h, uint32_t nh,
                       uint32_t max_tokens)
{
    char err[512];
    uint32_t id = t->n;
    assert_true(id < MAX_IDS);
    int rc = st_batch_submit(t->b, id, prompt, h, nh, max_tokens, t->now, err, sizeof err);
    if (rc != 0) {
        fail_msg("submit %u: %d %s", id, rc, err);
    }
    struct rec *r = &t->r[id];
    memset(r, 0, sizeof *r);
    r->prompt = prompt;
    r->max_tokens = max_tokens;
    r->rank = id % t->ranks; /* every submission here is accepted: round-robin by id */
    r->live = 1;
    r->submit_ns = t->now;
    t->order[r->rank][t->n_order[r->rank]++] = id;
    t->n++;
    t->live++;
    return id;
}

static void abort_id(struct track *t, uint32_t id)
{
    assert_int_equal(st_batch_abort(t->b, id, t->now), 0);
    t->r[id].live = 0;
    t->r[id].aborted = 1;
    t->live--;
}

static void digest_u64(struct track *t, uint64_t x)
{
    t->digest = st_hash_update(t->digest, &x, sizeof x);
}

/* First admission on a rank must be the oldest never-admitted request still there. */
static void check_fifo(struct track *t, uint32_t id)
{
    uint32_t k = t->r[id].rank;
    while (t->next_admit[k] < t->n_order[k]) {
        const struct rec *o = &t->r[t->order[k][t->next_admit[k]]];
        if (!o->aborted || o->admitted) {
            break;
        }
        t->next_admit[k]++; /* aborted while waiting: never admitted */
    }
    assert_true(t->next_admit[k] < t->n_order[k]);
    assert_int_equal(t->order[k][t->next_admit[k]], id);
    t->next_admit[k]++;
}

static double expected_tokens(const struct st_profile *p, uint64_t ctx)
{
    const struct st_profile_engine *e = &p->engine;
    double d = e->spec_accept_halflife_tokens > 0
                   ? exp2(-(double)ctx / e->spec_accept_halflife_tokens)
                   : 1.0;
    double all = 1.0;
    double sum = 1.0;
    for (uint32_t i = 0; i < e->spec_steps; i++) {
        all *= e->spec_accept[i] * d;
        sum += all;
    }
    return sum;
}

static void check_event(struct track *t, const struct st_batch_event *e, uint64_t start,
                        uint64_t end)
{
    assert_true(e->id < t->n);
    struct rec *r = &t->r[e->id];
    assert_true(r->live);
    assert_false(e->preempted && (e->tokens || e->admitted));
    assert_true(e->admitted || e->tokens || e->preempted);
    if (e->admitted) {
        if (!r->admitted) {
            check_fifo(t, (uint32_t)e->id);
            r->admitted = 1;
            r->admit_ns = start;
            r->admit_step = t->steps;
        }
        /* The last known token is always computed: all of the prompt only on recomputation. */
        assert_int_equal(e->cached_tokens % PAGE, 0);
        assert_true(e->cached_tokens < r->prompt + (r->emitted > 0));
        r->cached = e->cached_tokens;
    }
    if (e->preempted) {
        r->preempted = 1;
        t->preempt_events++;
    }
    assert_true(e->tokens <= 1 + t->spec);
    assert_true(e->accepted <= e->drafted);
    if (e->drafted) {
        assert_int_equal(e->drafted, t->spec);
        assert_true(e->tokens <= e->accepted + 1);
        uint64_t ctx = r->prompt + r->emitted - 1; /* tokens in KV before the step */
        if (!e->finished) {
            int bin = ctx >= t->spec_split_ctx;
            t->spec_n[bin]++;
            t->spec_sum[bin] += e->tokens;
            t->spec_expect[bin] += expected_tokens(&t->p, ctx);
        }
    }
    assert_int_equal(e->first, e->tokens > 0 && r->emitted == 0);
    if (e->first) {
        r->first_ns = end;
    }
    r->emitted += e->tokens;
    assert_true(r->emitted <= r->max_tokens);
    assert_int_equal(e->finished, e->tokens > 0 && r->emitted == r->max_tokens);
    if (e->finished) {
        r->finished = 1;
        r->live = 0;
        r->finish_ns = end;
        t->live--;
        t->resumed_finished += r->preempted;
    }
    uint64_t f[] = {e->id,    e->tokens,   e->drafted,   e->accepted,     e->admitted,
                    e->first, e->finished, e->preempted, e->cached_tokens};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        digest_u64(t, f[i]);
    }
}

static void check_ranks(struct track *t)
{
    uint64_t running = 0;
    uint64_t waiting = 0;
    for (uint32_t k = 0; k < t->ranks; k++) {
        struct st_batch_rank rk;
        st_batch_get_rank(t->b, k, &rk);
        assert_true(rk.running <= t->p.engine.max_running);
        uint64_t tokens = rk.shape.n_decode * (1 + (uint64_t)t->spec) + rk.shape.prefill_tokens;
        assert_true(tokens <= t->p.engine.max_batched_tokens);
        char err[256] = "";
        if (t->steps % t->kv_check_period == 0 && st_kv_check(rk.kv, err, sizeof err) != 0) {
            fail_msg("rank %u: %s", k, err);
        }
        struct st_kv_stats ks;
        st_kv_get_stats(rk.kv, &ks);
        assert_int_equal(ks.free_blocks + ks.evictable_blocks + ks.used_blocks, ks.total_blocks);
        assert_true(ks.used_blocks >= rk.pressure_blocks);
        assert_int_equal(ks.total_blocks, pool_blocks(t->b));
        running += rk.running;
        waiting += rk.waiting;
    }
    struct st_batch_stats s;
    st_batch_get_stats(t->b, &s);
    assert_int_equal(s.running, running);
    assert_int_equal(s.waiting, waiting);
    assert_int_equal(running + waiting, t->live);
    assert_true(s.kv_used_tokens <= s.kv_total_tokens);
    assert_int_equal(st_batch_busy(t->b), t->live > 0);
}

/* One step: checks every event and every rank, then advances virtual time. */
static struct st_batch_result step(struct track *t)
{
    struct st_batch_result res;
    st_batch_step(t->b, t->now, &res);
    uint64_t end = t->now + res.duration_ns;
    int any_tokens = 0;
    for (uint32_t i = 0; i < res.n_events; i++) {
        check_event(t, &res.events[i], t->now, end);
        any_tokens |= res.events[i].tokens > 0;
    }
    if (any_tokens) {
        assert_true(res.duration_ns > 0);
    }
    check_ranks(t);
    digest_u64(t, res.duration_ns);
    t->now = end;
    t->steps++;
    return res;
}

/* Steps until idle; a step with nothing to do must be due to pressure, which is then lifted. */
static void drain(struct track *t, uint64_t max_steps)
{
    for (uint64_t i = 0; st_batch_busy(t->b); i++) {
        assert_true(i < max_steps);
        struct st_batch_result res = step(t);
        if (res.duration_ns == 0) {
            assert_true(t->pressure > 0);
            t->pressure = 0;
            st_batch_pressure(t->b, 0);
        }
    }
}

static void check_all_done(struct track *t)
{
    for (uint32_t i = 0; i < t->n; i++) {
        const struct rec *r = &t->r[i];
        assert_false(r->live);
        assert_true(r->aborted || (r->finished && r->emitted == r->max_tokens));
    }
    struct st_batch_stats s;
    st_batch_get_stats(t->b, &s);
    assert_int_equal(s.running + s.waiting, 0);
    assert_int_equal(s.kv_used_tokens, 0);
    assert_false(st_batch_busy(t->b));
}

/* ---- random workloads ---- */

struct random_result {
    uint64_t digest;
    uint64_t preemptions;
    uint64_t resumed_finished;
    uint64_t finished;
};

/*
 * A workload of 240 requests on a small pool: random prompt lengths, prefixes shared among four
 * families, max_tokens from 1 to 200, arrivals, aborts and pressure changes; the engine's
 * settings vary with the seed (admission reserve, DP ranks, speculation, prefix caching).
 */
static struct random_result run_random(uint64_t seed)
{
    struct st_profile p;
    static const double reserves[] = {0.0, 1.0, 0.5};
    static const double accept[] = {0.7, 0.5};
    base_profile(&p, seed % 3 == 1 ? ST_DIALECT_SGLANG : ST_DIALECT_VLLM, reserves[seed % 3], 120,
                 160);
    p.engine.max_batched_tokens = 256;
    p.engine.max_running = 6;
    p.engine.context_length = 1024;
    p.engine.prefix_caching = seed % 5 != 4;
    if (seed % 2 == 1) {
        p.engine.tp = 2;
        p.engine.dp_attention = 2;
        p.hw.gpus = p.hw.gpus < 2 ? 2 : p.hw.gpus;
        set_pool(&p, 120, 160);
    }
    if (seed % 4 == 3) {
        set_spec(&p, 2, accept, 0);
        set_pool(&p, 120, 160);
    }
    struct track *t = track_new(&p, seed);
    uint64_t pool = pool_blocks(t->b);
    struct st_rng rng;
    st_rng_seed(&rng, seed * 7919);
    static uint64_t h[MAX_HASHES];
    const uint32_t total = 240;
    for (uint64_t it = 0; t->n < total || st_batch_busy(t->b); it++) {
        assert_true(it < 200000);
        if (t->n < total && st_rng_unit(&rng) < 0.4) {
            uint32_t k = 1 + (uint32_t)st_rng_below(&rng, 3);
            for (uint32_t j = 0; j < k && t->n < total; j++) {
                uint64_t prompt;
                uint32_t shared = 0;
                uint64_t family = 0;
                if (st_rng_unit(&rng) < 0.5) {
                    family = 1 + st_rng_below(&rng, 4);
                    shared = 1 + (uint32_t)st_rng_below(&rng, 20);
                    prompt = (uint64_t)shared * PAGE + st_rng_below(&rng, 300);
                } else {
                    prompt = 1 + st_rng_below(&rng, 700);
                }
                uint32_t max_tokens = 1 + (uint32_t)st_rng_below(&rng, 200);
                uint32_t nh = (uint32_t)(prompt / PAGE);
                make_hashes(h, nh, shared, family, 1000 + t->n);
                submit(t, prompt, h, nh, max_tokens);
            }
        }
        if (t->live > 0 && st_rng_unit(&rng) < 0.03) {
            uint32_t id = (uint32_t)st_rng_below(&rng, t->n);
            if (t->r[id].live) {
                abort_id(t, id);
            }
        }
        if (st_rng_unit(&rng) < 0.01) {
            t->pressure = st_rng_unit(&rng) < 0.5 ? st_rng_below(&rng, pool * 8 / 10) : 0;
            st_batch_pressure(t->b, t->pressure);
        }
        if (t->n == total && t->pressure) {
            t->pressure = 0;
            st_batch_pressure(t->b, 0);
        }
        if (!st_batch_busy(t->b)) {
            t->now += 1000000; /* idle until the next arrival */
            continue;
        }
        struct st_batch_result res = step(t);
        if (res.duration_ns == 0) {
            assert_true(t->pressure > 0); /* only a pressure fault can stall every rank */
            t->pressure = 0;
            st_batch_pressure(t->b, 0);
        }
    }
    check_all_done(t);
    struct st_batch_stats s;
    st_batch_get_stats(t->b, &s);
    assert_int_equal(s.preemptions, t->preempt_events);
    struct random_result out = {t->digest, s.preemptions, t->resumed_finished, s.finished};
    uint64_t finished = 0;
    for (uint32_t i = 0; i < t->n; i++) {
        finished += t->r[i].finished;
    }
    assert_int_equal(s.finished, finished);
    track_free(t);
    return out;
}

static void test_random_invariants(void **state)
{
    (void)state;
    uint64_t preemptions = 0;
    uint64_t resumed = 0;
    for (uint64_t seed = 1; seed <= 12; seed++) {
        struct random_result r = run_random(seed);
        assert_true(r.finished > 150);
        preemptions += r.preemptions;
        resumed += r.resumed_finished;
    }
    /* The workloads are built to overflow the pool: preemption happens and is survived. */
    assert_true(preemptions > 20);
    assert_true(resumed > 10);
}

static void test_determinism(void **state)
{
    (void)state;
    struct random_result a = run_random(7);
    struct random_result b = run_random(7);
    struct random_result c = run_random(10);
    assert_int_equal(a.digest, b.digest);
    assert_true(a.digest != c.digest);
}

/* ---- targeted cases ---- */

/* Submits n requests of `doc` distinct prompt tokens and `out` output tokens at time 0. */
static void submit_docs(struct track *t, uint32_t n, uint64_t doc, uint32_t out, uint64_t salt)
{
    static uint64_t h[MAX_HASHES];
    for (uint32_t i = 0; i < n; i++) {
        uint32_t nh = (uint32_t)(doc / PAGE);
        assert_true(nh <= MAX_HASHES);
        make_hashes(h, nh, 0, 0, salt + i);
        submit(t, doc, h, nh, out);
    }
}

static uint64_t first_finish_ns(const struct track *t, uint32_t from, uint32_t to)
{
    uint64_t f = UINT64_MAX;
    for (uint32_t i = from; i < to; i++) {
        if (t->r[i].finished && t->r[i].finish_ns < f) {
            f = t->r[i].finish_ns;
        }
    }
    return f;
}

/*
 * SGLang-style admission (reserve 1): documents of doc prompt tokens and out output tokens.
 * With per = floor(pool / (N + 1/2)) blocks a document, the pool holds N = floor(pool / per):
 * N submitted together all run at once; one more waits, admitted and given its first token only
 * after one of the others finished. With per = floor(pool / (N + 1)), N + 1 fit at once.
 */
static void test_queueing_exactly_when_full(void **state)
{
    (void)state;
    const uint32_t n = 4;
    const uint32_t out = 64;
    for (int extra_fits = 0; extra_fits < 2; extra_fits++) {
        struct st_profile p;
        base_profile(&p, ST_DIALECT_SGLANG, 1.0, 2000, 2600);
        p.engine.max_batched_tokens = 8192;
        p.engine.max_running = 64;
        p.engine.context_length = 16384;
        set_pool(&p, 2000, 2600);
        struct track *t = track_new(&p, 1);
        uint64_t pool = pool_blocks(t->b);
        uint64_t per = extra_fits ? pool / (n + 1) : pool * 2 / (2 * n + 1);
        assert_int_equal(pool / per, extra_fits ? n + 1 : n);
        uint64_t doc = per * PAGE - out - 5; /* a partial last block: blocks_for(doc+out) == per */
        submit_docs(t, n + 1, doc, out, 100);
        while (st_batch_busy(t->b)) {
            step(t);
            uint32_t admitted = 0;
            for (uint32_t i = 0; i < n + 1; i++) {
                admitted += t->r[i].admitted;
            }
            struct st_batch_stats s;
            st_batch_get_stats(t->b, &s);
            if (!extra_fits && admitted >= n && first_finish_ns(t, 0, n + 1) == UINT64_MAX) {
                /* All that fit are in; the pool is full: exactly the extra one waits. */
                assert_int_equal(s.waiting, 1);
            }
        }
        check_all_done(t);
        uint64_t first_finish = first_finish_ns(t, 0, n + 1);
        for (uint32_t i = 0; i < n; i++) {
            assert_true(t->r[i].first_ns < first_finish);
        }
        if (extra_fits) {
            assert_true(t->r[n].first_ns < first_finish);
        } else {
            /* Queued: admitted in a step that starts when the first finisher's step ends. */
            assert_true(t->r[n].admit_ns >= first_finish);
            assert_true(t->r[n].first_ns > first_finish);
        }
        track_free(t);
    }
}

/*
 * Seed 003's capacity probe: a serial seeding pass (8-token outputs) then a concurrent scoring
 * pass (longer outputs, no flush). With as many documents as the pool holds, every document is
 * a prefix-cache hit and no TTFT exceeds the first completion; with one more, the last one's
 * TTFT spikes past it (it queues).
 */
static void test_capacity_probe(void **state)
{
    (void)state;
    const uint32_t n = 3;
    const uint32_t out = 128;
    for (uint32_t k = n; k <= n + 1; k++) {
        struct st_profile p;
        base_profile(&p, ST_DIALECT_SGLANG, 1.0, 1500, 2000);
        p.engine.max_batched_tokens = 4096;
        p.engine.max_running = 32;
        p.engine.context_length = 32768;
        set_pool(&p, 1500, 2000);
        struct track *t = track_new(&p, 3);
        uint64_t pool = pool_blocks(t->b);
        uint64_t per = pool * 2 / (2 * n + 1);
        uint64_t doc = per * PAGE - out - 3;
        for (uint32_t i = 0; i < k; i++) {
            submit_docs(t, 1, doc, 8, 500 + i);
            drain(t, 100000);
        }
        uint32_t first = t->n;
        uint64_t start = t->now;
        for (uint32_t i = 0; i < k; i++) {
            submit_docs(t, 1, doc, out, 500 + i);
        }
        drain(t, 100000);
        check_all_done(t);
        uint64_t ttft_max = 0;
        for (uint32_t i = first; i < first + k; i++) {
            uint64_t ttft = t->r[i].first_ns - start;
            ttft_max = ttft > ttft_max ? ttft : ttft_max;
            if (k == n) {
                assert_int_equal(t->r[i].cached, doc / PAGE * PAGE);
            }
        }
        uint64_t completion = first_finish_ns(t, first, first + k) - start;
        if (k == n) {
            assert_true(ttft_max < completion);
        } else {
            assert_true(ttft_max > completion);
        }
        track_free(t);
    }
}

/*
 * The same probe staged on the seed-003 winner (A6: GLM-5.3 NVFP4, TP4 PP2, SGLang, a pool of
 * 647,040 tokens, page 64): four distinct 128K documents (131,072 tokens) run concurrently
 * without queueing, each a prefix-cache hit of all but its last block after the seeding pass;
 * a fifth queues ("concurrent distinct 128k documents: 4").
 */
static void test_seed003_capacity_probe(void **state)
{
    (void)state;
    const uint64_t doc = 131072;
    const uint32_t page = 64;
    for (uint32_t k = 4; k <= 5; k++) {
        struct st_profile p;
        load_profile(&p, "seed003-mla-moe-8gpu.yaml");
        struct track *t = track_new(&p, 3);
        t->kv_check_period = 64; /* a pool of 10,110 blocks: the invariants every 64 steps */
        /* The pool (647,040 tokens in the seed; test_sim_memory pins it) holds four. */
        assert_int_equal(st_batch_plan(t->b)->kv_pool_tokens / (doc + 512), 4);
        assert_int_equal(p.engine.page_size, page);
        static uint64_t h[MAX_HASHES];
        uint32_t nh = (uint32_t)(doc / page);
        for (uint32_t i = 0; i < k; i++) {
            make_hashes(h, nh, 0, 0, 900 + i);
            submit(t, doc, h, nh, 8);
            drain(t, 100000);
        }
        uint32_t first = t->n;
        uint64_t start = t->now;
        for (uint32_t i = 0; i < k; i++) {
            make_hashes(h, nh, 0, 0, 900 + i);
            submit(t, doc, h, nh, 512);
        }
        drain(t, 100000);
        check_all_done(t);
        uint64_t ttft_max = 0;
        for (uint32_t i = first; i < first + k; i++) {
            uint64_t ttft = t->r[i].first_ns - start;
            ttft_max = ttft > ttft_max ? ttft : ttft_max;
            if (k == 4) {
                assert_int_equal(t->r[i].cached, doc - page);
            }
        }
        uint64_t completion = first_finish_ns(t, first, first + k) - start;
        if (k == 4) {
            assert_true(ttft_max < completion / 10);
        } else {
            assert_true(ttft_max > completion);
        }
        track_free(t);
    }
}

static void test_prefix_cache(void **state)
{
    (void)state;
    struct st_profile p;
    base_profile(&p, ST_DIALECT_VLLM, 0.0, 500, 1000);
    struct track *t = track_new(&p, 5);
    uint64_t h[8];
    /* 87 tokens: 5 full blocks and 7 more. */
    make_hashes(h, 5, 0, 0, 42);
    submit(t, 87, h, 5, 4);
    drain(t, 1000);
    assert_int_equal(t->r[0].cached, 0);
    uint32_t id = submit(t, 87, h, 5, 4);
    drain(t, 1000);
    assert_int_equal(t->r[id].cached, 80);
    /* An exact multiple: the last token is always computed, so its block is not a hit. */
    make_hashes(h, 6, 0, 0, 43);
    submit(t, 96, h, 6, 4);
    drain(t, 1000);
    id = submit(t, 96, h, 6, 4);
    drain(t, 1000);
    assert_int_equal(t->r[id].cached, 80);
    /* A shared prefix of 3 blocks. */
    uint64_t h2[8];
    make_hashes(h2, 5, 0, 0, 42);
    h2[3] = 12345;
    h2[4] = 67890;
    id = submit(t, 90, h2, 5, 4);
    drain(t, 1000);
    assert_int_equal(t->r[id].cached, 48);
    struct st_batch_stats s;
    st_batch_get_stats(t->b, &s);
    assert_int_equal(s.prefix_query_tokens, 87 + 87 + 96 + 96 + 90);
    assert_int_equal(s.prefix_hit_tokens, 80 + 80 + 48);
    st_batch_flush(t->b);
    id = submit(t, 87, h, 5, 4);
    drain(t, 1000);
    assert_int_equal(t->r[id].cached, 0);
    check_all_done(t);
    track_free(t);

    /* Prefix caching off: never a hit. */
    base_profile(&p, ST_DIALECT_VLLM, 0.0, 500, 1000);
    p.engine.prefix_caching = 0;
    t = track_new(&p, 5);
    make_hashes(h, 5, 0, 0, 42);
    submit(t, 87, h, 5, 4);
    drain(t, 1000);
    id = submit(t, 87, h, 5, 4);
    drain(t, 1000);
    assert_int_equal(t->r[id].cached, 0);
    track_free(t);
}

/*
 * Slot scope (llama.cpp b4748): each slot keeps only its last prompt; a second concurrent request
 * with the same prefix lands on another slot and recomputes everything until every slot is
 * primed; a slot is chosen by shared prefix over engine.slot_similarity of its tokens, else
 * least recently used; erasing a slot empties that slot only.
 */
static void test_slot_cache(void **state)
{
    (void)state;
    struct st_profile p;
    base_profile(&p, ST_DIALECT_LLAMACPP, 0.0, 500, 1000);
    p.engine.max_running = 2;
    assert_int_equal(p.engine.cache_scope, ST_CACHE_SCOPE_AUTO);
    struct track *t = track_new(&p, 9);
    assert_true(st_batch_slot_scope(t->b));
    uint64_t h[16];
    make_hashes(h, 5, 0, 0, 42); /* 87 tokens: 5 full blocks */
    submit(t, 87, h, 5, 4);
    drain(t, 1000);
    assert_int_equal(t->r[0].cached, 0);
    uint32_t id = submit(t, 87, h, 5, 4); /* alone: back on the slot that holds it */
    drain(t, 1000);
    assert_int_equal(t->r[id].cached, 80);
    /* Two at once: one finds the primed slot, the other an empty one and recomputes. */
    id = submit(t, 87, h, 5, 4);
    submit(t, 87, h, 5, 4);
    drain(t, 1000);
    assert_int_equal(t->r[id].cached, 80);
    assert_int_equal(t->r[id + 1].cached, 0);
    /* Both slots now hold the prefix: both hit. */
    id = submit(t, 87, h, 5, 4);
    submit(t, 87, h, 5, 4);
    drain(t, 1000);
    assert_int_equal(t->r[id].cached, 80);
    assert_int_equal(t->r[id + 1].cached, 80);
    /* Erasing slot 0 empties it alone: 87 prompt + 3 computed output tokens went. */
    assert_int_equal(st_batch_erase_slot(t->b, 0), 90);
    assert_int_equal(st_batch_erase_slot(t->b, 0), 0);
    id = submit(t, 87, h, 5, 4);
    submit(t, 87, h, 5, 4);
    drain(t, 1000);
    assert_int_equal(t->r[id].cached, 80);
    assert_int_equal(t->r[id + 1].cached, 0);
    struct st_batch_stats s;
    st_batch_get_stats(t->b, &s);
    assert_int_equal(s.prefix_query_tokens, 8 * 87);
    assert_int_equal(s.prefix_hit_tokens, 5 * 80);
    st_batch_flush(t->b);
    id = submit(t, 87, h, 5, 4);
    drain(t, 1000);
    assert_int_equal(t->r[id].cached, 0);
    check_all_done(t);
    track_free(t);

    /* Similarity: D shares 3 of the 10 blocks B's slot holds (48 of 163 tokens, 0.29). */
    uint64_t hb[16], hc[16], hd[16];
    make_hashes(hb, 10, 0, 0, 7);
    make_hashes(hc, 10, 0, 0, 8);
    make_hashes(hd, 10, 0, 0, 7);
    for (int i = 3; i < 10; i++) {
        hd[i] ^= 0x5555u + (uint64_t)i;
    }
    for (int k = 0; k < 2; k++) {
        base_profile(&p, ST_DIALECT_LLAMACPP, 0.0, 500, 1000);
        p.engine.max_running = 2;
        p.engine.slot_similarity = k == 0 ? 0.5 : 0.2;
        t = track_new(&p, 9);
        submit(t, 163, hc, 10, 4); /* slot 0 */
        drain(t, 1000);
        submit(t, 163, hb, 10, 4); /* slot 1: the least recently used (never) */
        drain(t, 1000);
        id = submit(t, 163, hd, 10, 4);
        drain(t, 1000);
        /* 0.29 is not over 0.5: the least recently used slot (C's) and nothing shared; over
         * 0.2: B's slot and its 3 blocks. */
        assert_int_equal(t->r[id].cached, k == 0 ? 0 : 48);
        track_free(t);
    }

    /* id_slot: pinned to slot 1, then found there; two pinned to one slot run one after the
     * other, the second reusing the first's prompt. */
    base_profile(&p, ST_DIALECT_LLAMACPP, 0.0, 500, 1000);
    p.engine.max_running = 2;
    t = track_new(&p, 9);
    id = submit(t, 87, h, 5, 4);
    assert_int_equal(st_batch_pin_slot(t->b, id, 1), 0);
    drain(t, 1000);
    assert_int_equal(st_batch_erase_slot(t->b, 0), 0);
    id = submit(t, 87, h, 5, 4);
    drain(t, 1000);
    assert_int_equal(t->r[id].cached, 80); /* slot 0 was empty: it went to slot 1 */
    make_hashes(hb, 10, 0, 0, 11);
    id = submit(t, 163, hb, 10, 4);
    submit(t, 163, hb, 10, 4);
    assert_int_equal(st_batch_pin_slot(t->b, id, 0), 0);
    assert_int_equal(st_batch_pin_slot(t->b, id + 1, 0), 0);
    drain(t, 1000);
    assert_int_equal(t->r[id].cached, 0);
    assert_int_equal(t->r[id + 1].cached, 160);
    assert_true(t->r[id + 1].admit_ns >= t->r[id].finish_ns);
    assert_int_equal(st_batch_pin_slot(t->b, 999, 0), ST_ENOTFOUND);
    check_all_done(t);
    track_free(t);

    /* Pool scope for the same dialect: one cache for all, both concurrent requests hit. */
    base_profile(&p, ST_DIALECT_LLAMACPP, 0.0, 500, 1000);
    p.engine.max_running = 2;
    p.engine.cache_scope = ST_CACHE_SCOPE_POOL;
    t = track_new(&p, 9);
    assert_false(st_batch_slot_scope(t->b));
    submit(t, 87, h, 5, 4);
    drain(t, 1000);
    id = submit(t, 87, h, 5, 4);
    submit(t, 87, h, 5, 4);
    drain(t, 1000);
    assert_int_equal(t->r[id].cached, 80);
    assert_int_equal(t->r[id + 1].cached, 80);
    track_free(t);

    /* Slot scope with prefix caching off (cache_prompt false): never a hit. */
    base_profile(&p, ST_DIALECT_LLAMACPP, 0.0, 500, 1000);
    p.engine.max_running = 2;
    p.engine.prefix_caching = 0;
    t = track_new(&p, 9);
    submit(t, 87, h, 5, 4);
    drain(t, 1000);
    id = submit(t, 87, h, 5, 4);
    drain(t, 1000);
    assert_int_equal(t->r[id].cached, 0);
    track_free(t);
}

static void test_spec_acceptance(void **state)
{
    (void)state;
    static const double accept[] = {0.8, 0.6, 0.5};
    struct st_profile p;
    base_profile(&p, ST_DIALECT_VLLM, 0.0, 3000, 4000);
    set_spec(&p, 3, accept, 0);
    p.engine.context_length = 16384;
    set_pool(&p, 3000, 4000);
    struct track *t = track_new(&p, 11);
    t->kv_check_period = 64;
    for (int i = 0; i < 4; i++) {
        submit(t, 100, NULL, 0, 10000);
    }
    drain(t, 100000);
    check_all_done(t);
    double mean = t->spec_sum[0] / (double)t->spec_n[0];
    double expect = 1 + 0.8 + 0.8 * 0.6 + 0.8 * 0.6 * 0.5; /* 2.52 */
    assert_true(t->spec_n[0] > 10000);
    assert_true(fabs(mean - expect) < 0.05);
    struct st_batch_stats s;
    st_batch_get_stats(t->b, &s);
    double pos[] = {0.8, 0.48, 0.24};
    for (int i = 0; i < 3; i++) {
        double got = (double)s.spec_accepted_per_pos[i] / (double)s.spec_drafts;
        assert_true(fabs(got - pos[i]) < 0.02);
    }
    assert_int_equal(s.spec_draft_tokens, 3 * s.spec_drafts);
    assert_int_equal(s.generation_tokens, 40000);
    track_free(t);
}

static void test_spec_decay(void **state)
{
    (void)state;
    static const double accept[] = {0.8, 0.6, 0.5};
    struct st_profile p;
    base_profile(&p, ST_DIALECT_VLLM, 0.0, 3000, 4000);
    set_spec(&p, 3, accept, 4000);
    p.engine.context_length = 16384;
    set_pool(&p, 3000, 4000);
    struct track *t = track_new(&p, 12);
    t->kv_check_period = 64;
    t->spec_split_ctx = 6000;
    for (int i = 0; i < 4; i++) {
        submit(t, 100, NULL, 0, 12000);
    }
    drain(t, 100000);
    check_all_done(t);
    double early = t->spec_sum[0] / (double)t->spec_n[0];
    double late = t->spec_sum[1] / (double)t->spec_n[1];
    assert_true(fabs(early - t->spec_expect[0] / (double)t->spec_n[0]) < 0.05);
    assert_true(fabs(late - t->spec_expect[1] / (double)t->spec_n[1]) < 0.05);
    assert_true(late < early - 0.3);
    track_free(t);
}

/*
 * The engine and the cost model agree on a lone prefill: stepping one uncached prompt until its
 * first token takes st_cost_prefill_s (chunks pipelined through the PP stages), with and without
 * pipeline parallelism: seed 003's arm A6 (TP4 PP2) and the same model at TP8 PP1, 128K prompt.
 */
static void test_prefill_matches_cost(void **state)
{
    (void)state;
    for (uint32_t pp = 1; pp <= 2; pp++) {
        struct st_profile p;
        load_profile(&p, "seed003-mla-moe-8gpu.yaml");
        p.engine.pp = pp;
        p.engine.tp = 8 / pp;
        struct st_batch *b = st_batch_new(&p, 1);
        assert_non_null(b);
        char err[512];
        uint64_t n = 131072;
        assert_int_equal(st_batch_submit(b, 1, n, NULL, 0, 4, 0, err, sizeof err), 0);
        uint64_t now = 0;
        int first = 0;
        while (!first) {
            struct st_batch_result r;
            st_batch_step(b, now, &r);
            assert_true(r.duration_ns > 0);
            now += r.duration_ns;
            for (uint32_t i = 0; i < r.n_events; i++) {
                first |= r.events[i].first;
            }
        }
        struct st_cost c;
        st_cost_init(&c, &p);
        double want = st_cost_prefill_s(&c, 0, n);
        double got = (double)now / 1e9;
        if (fabs(got - want) > 0.01 * want) {
            fail_msg("pp %u: engine prefill %.3f s, cost model %.3f s", pp, got, want);
        }
        st_batch_free(b);
    }
}

static void test_too_big_messages(void **state)
{
    (void)state;
    struct st_profile p;
    char err[512];
    base_profile(&p, ST_DIALECT_VLLM, 0.0, 500, 1000);
    p.engine.context_length = 2048;
    struct st_batch *b = st_batch_new(&p, 1);
    assert_non_null(b);
    assert_int_equal(st_batch_submit(b, 1, 2000, NULL, 0, 100, 0, err, sizeof err), ST_ETOOBIG);
    assert_string_equal(err, "This model's maximum context length is 2048 tokens. However, you "
                             "requested 2100 tokens (2000 in the messages, 100 in the "
                             "completion). Please reduce the length of the messages or "
                             "completion.");
    /* At the limit is fine; duplicates and empty requests are not. */
    assert_int_equal(st_batch_submit(b, 1, 1948, NULL, 0, 100, 0, err, sizeof err), 0);
    assert_int_equal(st_batch_submit(b, 1, 10, NULL, 0, 1, 0, err, sizeof err), -EEXIST);
    assert_int_equal(st_batch_submit(b, 2, 0, NULL, 0, 1, 0, err, sizeof err), -EINVAL);
    assert_int_equal(st_batch_submit(b, 2, 10, NULL, 0, 0, 0, err, sizeof err), -EINVAL);
    uint64_t h[2] = {1, 2};
    assert_int_equal(st_batch_submit(b, 2, 31, h, 2, 1, 0, err, sizeof err), -EINVAL);
    st_batch_free(b);

    p.engine.dialect = ST_DIALECT_SGLANG;
    b = st_batch_new(&p, 1);
    assert_int_equal(st_batch_submit(b, 1, 2048, NULL, 0, 1, 0, err, sizeof err), ST_ETOOBIG);
    assert_string_equal(err, "The input (2048 tokens) is longer than the model's context length "
                             "(2048 tokens).");
    assert_int_equal(st_batch_submit(b, 1, 2000, NULL, 0, 100, 0, err, sizeof err), ST_ETOOBIG);
    assert_string_equal(err, "Requested token count exceeds the model's maximum context length "
                             "of 2048 tokens. You requested a total of 2100 tokens: 2000 tokens "
                             "from the input messages and 100 tokens for the completion. Please "
                             "reduce the number of tokens in the input messages or the completion "
                             "to fit within the limit.");
    st_batch_free(b);

    p.engine.dialect = ST_DIALECT_LLAMACPP;
    b = st_batch_new(&p, 1);
    /* The case of tests/../wire/llamacpp/errors.txt. */
    assert_int_equal(st_batch_submit(b, 1, 2998, NULL, 0, 16, 0, err, sizeof err), ST_ETOOBIG);
    assert_string_equal(err, "request (2998 tokens) exceeds the available context size (2048 "
                             "tokens), try increasing it");
    assert_int_equal(st_batch_submit(b, 1, 2000, NULL, 0, 100, 0, err, sizeof err), ST_ETOOBIG);
    assert_string_equal(err, "request (2100 tokens) exceeds the available context size (2048 "
                             "tokens), try increasing it");
    st_batch_free(b);

    /*
     * A request larger than one rank's pool could never run: the pool is the limit (SGLang's
     * max_req_len; vLLM would not start with a context over its pool).
     */
    p.engine.dialect = ST_DIALECT_SGLANG;
    p.engine.context_length = 1u << 20;
    b = st_batch_new(&p, 1);
    uint64_t pool = pool_blocks(b) * PAGE;
    assert_true(pool < p.engine.context_length);
    assert_int_equal(st_batch_submit(b, 1, pool, NULL, 0, 1, 0, err, sizeof err), ST_ETOOBIG);
    char want[512];
    snprintf(want, sizeof want,
             "The input (%llu tokens) is longer than the model's context length (%llu tokens).",
             (unsigned long long)pool, (unsigned long long)pool);
    assert_string_equal(err, want);
    assert_int_equal(st_batch_submit(b, 1, pool - 1, NULL, 0, 1, 0, NULL, 0), 0);
    st_batch_free(b);
}

/*
 * vLLM-style admission (reserve 0) on a pool too small for three growing requests: the most
 * recently admitted is preempted, goes back to the front, recomputes and finishes; every request
 * emits exactly max_tokens.
 */
static void test_preemption(void **state)
{
    (void)state;
    struct st_profile p;
    base_profile(&p, ST_DIALECT_VLLM, 0.0, 100, 140);
    struct track *t = track_new(&p, 9);
    uint64_t pool = pool_blocks(t->b);
    uint64_t prompt = pool * PAGE / 4;
    uint32_t out = (uint32_t)(pool * PAGE / 4);
    for (int i = 0; i < 3; i++) {
        submit(t, prompt, NULL, 0, out);
    }
    uint32_t first_victim = UINT32_MAX;
    while (st_batch_busy(t->b)) {
        struct st_batch_result res = step(t);
        for (uint32_t i = 0; i < res.n_events; i++) {
            if (res.events[i].preempted && first_victim == UINT32_MAX) {
                first_victim = (uint32_t)res.events[i].id;
            }
        }
    }
    check_all_done(t);
    assert_int_equal(first_victim, 2);
    assert_true(t->r[2].preempted);
    assert_true(t->resumed_finished >= 1);
    struct st_batch_stats s;
    st_batch_get_stats(t->b, &s);
    assert_true(s.preemptions >= 1);
    /* Recomputation is counted as prefill. */
    assert_true(s.prompt_tokens > 3 * prompt);
    track_free(t);
}

static void test_pressure(void **state)
{
    (void)state;
    struct st_profile p;
    base_profile(&p, ST_DIALECT_SGLANG, 1.0, 500, 1000);
    struct track *t = track_new(&p, 4);
    uint64_t pool = pool_blocks(t->b);
    for (int i = 0; i < 4; i++) {
        submit(t, 200, NULL, 0, 50);
    }
    for (int i = 0; i < 5; i++) {
        step(t);
    }
    struct st_batch_stats s;
    st_batch_get_stats(t->b, &s);
    assert_int_equal(s.running, 4);
    /* All of the pool: every running request loses its KV; nothing can run. */
    t->pressure = pool;
    st_batch_pressure(t->b, pool);
    struct st_batch_result res = step(t);
    assert_int_equal(res.duration_ns, 0);
    assert_int_equal(res.n_events, 4);
    for (uint32_t i = 0; i < 4; i++) {
        assert_true(res.events[i].preempted);
        assert_int_equal(res.events[i].id, 3 - i); /* most recently admitted first */
    }
    st_batch_get_stats(t->b, &s);
    assert_int_equal(s.waiting, 4);
    assert_int_equal(s.kv_used_tokens, 0);
    struct st_batch_rank rk;
    st_batch_get_rank(t->b, 0, &rk);
    assert_int_equal(rk.pressure_blocks, pool);
    /* Lifted: they resume in their old order and finish. */
    t->pressure = 0;
    st_batch_pressure(t->b, 0);
    drain(t, 10000);
    check_all_done(t);
    st_batch_get_stats(t->b, &s);
    assert_int_equal(s.preemptions, 4);
    assert_int_equal(s.generation_tokens, 200);
    track_free(t);
}

static void test_abort_and_idle(void **state)
{
    (void)state;
    struct st_profile p;
    base_profile(&p, ST_DIALECT_VLLM, 0.0, 500, 1000);
    struct track *t = track_new(&p, 2);
    struct st_batch_result res;
    st_batch_step(t->b, 0, &res);
    assert_int_equal(res.duration_ns, 0);
    assert_int_equal(res.n_events, 0);
    assert_false(st_batch_busy(t->b));
    assert_int_equal(st_batch_abort(t->b, 77, 0), ST_ENOTFOUND);
    submit(t, 300, NULL, 0, 100);
    submit(t, 300, NULL, 0, 100);
    step(t);
    step(t);
    abort_id(t, 0); /* running */
    abort_id(t, 1);
    check_ranks(t);
    check_all_done(t);
    assert_int_equal(st_batch_abort(t->b, 0, 0), ST_ENOTFOUND);
    /* The id may be used again. */
    submit(t, 10, NULL, 0, 1);
    assert_int_equal(st_batch_submit(t->b, 0, 10, NULL, 0, 1, 0, NULL, 0), 0);
    track_free(t);
}

/* DP attention: round-robin ranks, lockstep steps as long as the slowest rank. */
static void test_dp_ranks(void **state)
{
    (void)state;
    struct st_profile p;
    base_profile(&p, ST_DIALECT_SGLANG, 1.0, 500, 1000);
    p.engine.tp = 2;
    p.engine.dp_attention = 2;
    p.hw.gpus = p.hw.gpus < 2 ? 2 : p.hw.gpus;
    set_pool(&p, 500, 1000);
    struct track *t = track_new(&p, 6);
    assert_int_equal(t->ranks, 2);
    submit(t, 1000, NULL, 0, 8); /* rank 0 */
    submit(t, 100, NULL, 0, 8);  /* rank 1 */
    submit(t, 1000, NULL, 0, 8); /* rank 0 */
    struct st_batch_rank r0;
    struct st_batch_rank r1;
    st_batch_get_rank(t->b, 0, &r0);
    st_batch_get_rank(t->b, 1, &r1);
    assert_int_equal(r0.waiting, 2);
    assert_int_equal(r1.waiting, 1);
    struct st_cost c;
    st_cost_init(&c, &t->p);
    while (st_batch_busy(t->b)) {
        struct st_batch_result res = step(t);
        st_batch_get_rank(t->b, 0, &r0);
        st_batch_get_rank(t->b, 1, &r1);
        uint64_t a = r0.shape.n_decode + r0.shape.n_prefill ? st_cost_step_ns(&c, &r0.shape) : 0;
        uint64_t z = r1.shape.n_decode + r1.shape.n_prefill ? st_cost_step_ns(&c, &r1.shape) : 0;
        assert_int_equal(res.duration_ns, a > z ? a : z);
        const struct st_step_shape *slow = a >= z ? &r0.shape : &r1.shape;
        assert_int_equal(res.shape.n_decode, slow->n_decode);
        assert_int_equal(res.shape.decode_ctx_sum, slow->decode_ctx_sum);
        assert_int_equal(res.shape.n_prefill, slow->n_prefill);
        assert_int_equal(res.shape.prefill_tokens, slow->prefill_tokens);
    }
    check_all_done(t);
    /* Each rank's pool is separate and whole. */
    struct st_batch_stats s;
    st_batch_get_stats(t->b, &s);
    assert_int_equal(s.kv_total_tokens, 2 * pool_blocks(t->b) * PAGE);
    track_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_invariants),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_queueing_exactly_when_full),
        cmocka_unit_test(test_capacity_probe),
        cmocka_unit_test(test_seed003_capacity_probe),
        cmocka_unit_test(test_prefix_cache),
        cmocka_unit_test(test_slot_cache),
        cmocka_unit_test(test_spec_acceptance),
        cmocka_unit_test(test_spec_decay),
        cmocka_unit_test(test_prefill_matches_cost),
        cmocka_unit_test(test_too_big_messages),
        cmocka_unit_test(test_preemption),
        cmocka_unit_test(test_pressure),
        cmocka_unit_test(test_abort_and_idle),
        cmocka_unit_test(test_dp_ranks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
