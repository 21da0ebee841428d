/*
 * The live engine driver (see live.h). State: the engine, the request map (id -> callback and
 * the virtual times metrics need), the events of the step in flight (copied, since the engine's
 * array is only valid until its next step), and one timer. Invariants: `stepping` is set exactly
 * while the timer is armed for a step whose events are in `pending`; no step is planned while
 * events are being delivered (`delivering`), a kick then is remembered and done after.
 */
#include "sim/live.h"

#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/xalloc.h"

struct entry {
    uint64_t id;
    struct entry *next; /* bucket chain */
    st_sim_live_cb cb;
    void *arg;
    uint64_t v_submit; /* virtual times, ns */
    uint64_t v_admit;  /* 0 until admitted (first admission) */
    uint64_t v_first;
    uint64_t prompt_tokens;
    uint32_t max_tokens;
    uint64_t cached_tokens;
    int admitted;
    int first;
};

struct st_sim_live {
    struct event_base *base; /* borrowed */
    struct event *timer;     /* owned */
    struct st_batch *b;      /* owned */
    struct st_profile p;
    double speed;
    uint64_t t0;
    st_sim_live_idle_cb idle_cb;
    void *idle_arg;
    double next_factor; /* st_sim_live_next_noise, for the next submission */
    int next_reseed;
    uint64_t next_seed;
    struct entry **buckets; /* owned: n_buckets chains (a power of two) */
    uint32_t n_buckets;
    uint32_t n_entries;
    struct st_batch_event *pending; /* owned: the events of the step in flight */
    uint32_t n_pending;
    uint32_t cap_pending;
    uint64_t step_start; /* virtual ns */
    uint64_t step_end;
    uint64_t step_tokens; /* output tokens of the step in flight */
    uint32_t step_batch;  /* requests in it */
    int stepping;
    int delivering;
    int kick_pending;
    struct st_sim_metrics m; /* counters kept here; m.bs is filled at snapshot time */
};

static void step_now(struct st_sim_live *l);

/* ---- request map ---- */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static struct entry **slot(const struct st_sim_live *l, uint64_t id)
{
    struct entry **pp = &l->buckets[mix64(id) & (l->n_buckets - 1)];
    while (*pp && (*pp)->id != id) {
        pp = &(*pp)->next;
    }
    return pp;
}

static void grow(struct st_sim_live *l)
{
    uint32_t old_n = l->n_buckets;
    struct entry **old = l->buckets;
    l->n_buckets = old_n * 2;
    l->buckets = st_xcalloc(l->n_buckets, sizeof(*l->buckets));
    for (uint32_t i = 0; i < old_n; i++) {
        struct entry *e = old[i];
        while (e) {
            struct entry *next = e->next;
            struct entry **head = &l->buckets[mix64(e->id) & (l->n_buckets - 1)];
            e->next = *head;
            *head = e;
            e = next;
        }
    }
    free(old);
}

/* Unlinks and returns id's entry, or NULL. */
static struct entry *take(struct st_sim_live *l, uint64_t id)
{
    struct entry **pp = slot(l, id);
    struct entry *e = *pp;
    if (e) {
        *pp = e->next;
        l->n_entries--;
    }
    return e;
}

/* ---- time ---- */

/* A step that starts within this much real time after the previous one ended continues the
 * engine's timeline from that end (see step_now). */
#define CHAIN_REAL_NS (5 * ST_NS_PER_MS)

uint64_t st_sim_live_vnow(const struct st_sim_live *l)
{
    uint64_t now = st_clock_mono_ns();
    uint64_t real = now > l->t0 ? now - l->t0 : 0;
    return (uint64_t)((double)real * l->speed);
}

uint64_t st_sim_live_real_ns(const struct st_sim_live *l, double virtual_s)
{
    double ns = virtual_s * 1e9 / l->speed;
    return ns > 0 ? (uint64_t)(ns + 0.5) : 0;
}

static void arm_ns(struct st_sim_live *l, uint64_t real_ns)
{
    /* Round up to whole microseconds so the timer never fires before the step ends. */
    uint64_t us = (real_ns + 999) / 1000;
    struct timeval tv = {.tv_sec = (time_t)(us / 1000000), .tv_usec = (suseconds_t)(us % 1000000)};
    (void)event_base_update_cache_time(l->base);
    evtimer_add(l->timer, &tv);
}

/* ---- stepping ---- */

static void account(struct st_sim_live *l, struct entry *e, const struct st_batch_event *ev,
                    uint64_t v)
{
    if (ev->admitted && !e->admitted) {
        e->admitted = 1;
        e->v_admit = l->step_start;
        e->cached_tokens = ev->cached_tokens;
    }
    if (ev->first && !e->first) {
        e->first = 1;
        e->v_first = v;
        st_sim_hist_observe(&l->m.ttft, (double)(v - e->v_submit) / 1e9);
    }
    if (ev->finished) {
        uint64_t total = e->prompt_tokens + e->max_tokens;
        l->m.requests_finished++;
        l->m.prompt_seconds += (double)(e->v_first - e->v_admit) / 1e9;
        l->m.predicted_seconds += (double)(v - e->v_first) / 1e9;
        l->m.prompt_tokens_done += e->prompt_tokens - e->cached_tokens;
        l->m.predicted_tokens_done += e->max_tokens;
        if (total > l->m.n_tokens_max) {
            l->m.n_tokens_max = total;
        }
    }
}

/* Hands the events of the step that ended at virtual v to their requests. */
static void deliver(struct st_sim_live *l, uint64_t v)
{
    l->delivering = 1;
    if (l->step_end > l->step_start) {
        l->m.gen_throughput = (double)l->step_tokens * 1e9 / (double)(l->step_end - l->step_start);
    }
    l->m.busy_slot_steps += l->step_batch;
    for (uint32_t i = 0; i < l->n_pending; i++) {
        const struct st_batch_event *ev = &l->pending[i];
        struct entry *e = *slot(l, ev->id);
        if (!e) {
            continue; /* aborted while the step ran */
        }
        account(l, e, ev, v);
        if (ev->finished) {
            /* Forgotten first, so an abort from inside the callback is a no-op. */
            e = take(l, ev->id);
            e->cb(e->arg, ev, l->step_start, v);
            free(e);
        } else {
            e->cb(e->arg, ev, l->step_start, v);
        }
    }
    l->n_pending = 0;
    l->delivering = 0;
}

/* Plans steps until one takes time (timer armed) or the engine is idle or blocked. */
static void step_now(struct st_sim_live *l)
{
    for (;;) {
        l->kick_pending = 0;
        if (!st_batch_busy(l->b)) {
            if (l->idle_cb) {
                l->idle_cb(l->idle_arg);
            }
            return;
        }
        uint64_t v = st_sim_live_vnow(l);
        if (v < l->step_end) {
            v = l->step_end;
        } else if (v - l->step_end <= (uint64_t)((double)CHAIN_REAL_NS * l->speed)) {
            /* Back to back: the next step starts where the last one ended, so timer and delivery
             * latency (tens of microseconds of real time, times the speed) is not lost from the
             * engine's timeline. Further behind than that, the sim resyncs to the clock. */
            v = l->step_end;
        }
        struct st_batch_result res;
        st_batch_step(l->b, v, &res);
        if (res.n_events > l->cap_pending) {
            l->cap_pending = res.n_events * 2;
            l->pending = st_xrealloc(l->pending, l->cap_pending * sizeof(*l->pending));
        }
        memcpy(l->pending, res.events, res.n_events * sizeof(*res.events));
        l->n_pending = res.n_events;
        l->step_start = v;
        l->step_end = v + res.duration_ns;
        l->step_tokens = 0;
        for (uint32_t i = 0; i < res.n_events; i++) {
            l->step_tokens += res.events[i].tokens;
        }
        l->step_batch = res.shape.n_decode + res.shape.n_prefill;
        if (res.duration_ns > 0) {
            l->stepping = 1;
            /* Armed for the real time of the step's virtual end, not now + duration. */
            uint64_t end_real = l->t0 + st_sim_live_real_ns(l, (double)l->step_end / 1e9);
            uint64_t now = st_clock_mono_ns();
            arm_ns(l, end_real > now ? end_real - now : 0);
            return;
        }
        /* Nothing could run (the pool is held): hand over what happened (preemptions) and wait
         * for a submit, abort, flush or pressure change, unless a callback already made one. */
        deliver(l, v);
        if (!l->kick_pending) {
            return;
        }
    }
}

static void kick(struct st_sim_live *l)
{
    if (l->delivering) {
        l->kick_pending = 1;
        return;
    }
    if (!l->stepping) {
        step_now(l);
    }
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct st_sim_live *l = arg;
    (void)fd;
    (void)what;
    l->stepping = 0;
    /* The step's tokens exist at its virtual end, whenever the timer got to run. */
    deliver(l, l->step_end);
    step_now(l);
}

/* ---- API ---- */

int st_sim_live_new(const struct st_sim_live_cfg *cfg, struct st_sim_live **out)
{
    struct st_batch *b = st_batch_new(cfg->p, cfg->seed);
    if (!b) {
        return ST_EPARSE;
    }
    struct st_sim_live *l = st_xcalloc(1, sizeof(*l));
    l->base = cfg->base;
    l->b = b;
    l->p = *cfg->p;
    l->speed = cfg->speed;
    l->t0 = cfg->t0_mono_ns;
    l->idle_cb = cfg->idle_cb;
    l->idle_arg = cfg->idle_arg;
    l->next_factor = 1.0;
    l->n_buckets = 64;
    l->buckets = st_xcalloc(l->n_buckets, sizeof(*l->buckets));
    st_sim_hist_init_ttft(&l->m.ttft, cfg->p->engine.dialect);
    l->timer = evtimer_new(cfg->base, on_timer, l);
    if (!l->timer) {
        st_sim_live_free(l);
        return -ENOMEM;
    }
    *out = l;
    return 0;
}

void st_sim_live_free(struct st_sim_live *l)
{
    if (!l) {
        return;
    }
    if (l->timer) {
        event_free(l->timer);
    }
    for (uint32_t i = 0; i < l->n_buckets; i++) {
        struct entry *e = l->buckets[i];
        while (e) {
            struct entry *next = e->next;
            free(e);
            e = next;
        }
    }
    free(l->buckets);
    free(l->pending);
    st_batch_free(l->b);
    free(l);
}

void st_sim_live_next_noise(struct st_sim_live *l, double factor, int reseed, uint64_t seed)
{
    l->next_factor = factor;
    l->next_reseed = reseed;
    l->next_seed = seed;
}

void st_sim_live_set_scale(struct st_sim_live *l, double factor)
{
    st_batch_set_scale(l->b, factor);
}

int st_sim_live_submit(struct st_sim_live *l, uint64_t id, uint64_t prompt_tokens,
                       const uint64_t *hashes, uint32_t n_hashes, uint32_t max_tokens,
                       st_sim_live_cb cb, void *arg, char *err, size_t errlen)
{
    uint64_t v = st_sim_live_vnow(l);
    int rc = st_batch_submit(l->b, id, prompt_tokens, hashes, n_hashes, max_tokens, v, err, errlen);
    double f = l->next_factor;
    int reseed = l->next_reseed;
    l->next_factor = 1.0;
    l->next_reseed = 0;
    if (rc != 0) {
        return rc;
    }
    /* Before the first step (kick below): the noise is in the request's every step. */
    if (f != 1.0 && st_batch_set_noise(l->b, id, f) != 0) {
        abort(); /* impossible: just submitted */
    }
    if (reseed && st_batch_reseed(l->b, id, l->next_seed) != 0) {
        abort();
    }
    if (l->n_entries >= l->n_buckets) {
        grow(l);
    }
    struct entry *e = st_xcalloc(1, sizeof(*e));
    e->id = id;
    e->cb = cb;
    e->arg = arg;
    e->v_submit = v;
    e->prompt_tokens = prompt_tokens;
    e->max_tokens = max_tokens;
    struct entry **head = &l->buckets[mix64(id) & (l->n_buckets - 1)];
    e->next = *head;
    *head = e;
    l->n_entries++;
    l->m.requests_total++;
    kick(l);
    return 0;
}

void st_sim_live_abort(struct st_sim_live *l, uint64_t id)
{
    struct entry *e = take(l, id);
    if (!e) {
        return;
    }
    free(e);
    l->m.requests_aborted++;
    int rc = st_batch_abort(l->b, id, st_sim_live_vnow(l));
    (void)rc; /* ST_ENOTFOUND cannot happen: the map and the engine forget together */
    kick(l);
}

void st_sim_live_flush(struct st_sim_live *l)
{
    struct st_batch_stats bs;
    st_batch_flush(l->b);
    st_batch_get_stats(l->b, &bs);
    l->m.spec_drafts_at_flush = bs.spec_drafts;
    l->m.spec_accepted_at_flush = bs.spec_accepted_tokens;
    /* No kick: cached blocks were already available to allocations, so a flush never unblocks
     * a waiting request (and an idle callback that flushes must not recurse). */
}

int st_sim_live_busy(const struct st_sim_live *l)
{
    return st_batch_busy(l->b);
}

void st_sim_live_pressure(struct st_sim_live *l, uint64_t blocks)
{
    st_batch_pressure(l->b, blocks);
    kick(l);
}

void st_sim_live_metrics(const struct st_sim_live *l, struct st_sim_metrics *out)
{
    *out = l->m;
    st_batch_get_stats(l->b, &out->bs);
}

void st_sim_live_rank(const struct st_sim_live *l, uint32_t rank, struct st_batch_rank *out)
{
    st_batch_get_rank(l->b, rank, out);
}

const struct st_mem_plan *st_sim_live_plan(const struct st_sim_live *l)
{
    return st_batch_plan(l->b);
}
