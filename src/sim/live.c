/*
 * The live engine driver (see live.h). State: the engine, the request map (id -> callback and
 * the virtual times metrics need), the events of the step in flight (copied, since the engine's
 * array is only valid until its next step), the declared sessions (sync.h), a heap of arrivals
 * waiting for their virtual time, a heap of virtual timers, and one wall timer that wakes the
 * loop for pacing or to give up on a client that stopped declaring.
 *
 * Invariants: events are processed in (virtual time, kind, key) order by run(), which is the
 * only place virtual time advances (v_last); an event is processed only when the horizon allows
 * it (step ends and timers at t <= horizon, arrivals and planning at t < horizon); run() is not
 * re-entered (a call from a callback returns and the loop picks the change up).
 */
#include "sim/live.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/heap.h"
#include "base/xalloc.h"

/* Events later than this (real time) count as lagging in /metrics. */
#define LAG_COUNT_NS ST_NS_PER_MS
/* Real time the driver waits for a declared stream's next request before giving up on it. */
#define HOLD_GIVE_UP_NS (30 * ST_NS_PER_S)

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

struct st_sim_live_arr {
    struct st_sim_live_place pl;
    int declared;
    uint64_t session_seq, seq, serial;
    uint32_t stream;
    struct st_sim_sync_req *sreq; /* owned by the sync; NULL when undeclared or given up */
    st_sim_live_place_cb cb;
    void *arg;
    uint32_t heap_idx; /* in the arrival heap until placed */
    int placed;
    int parked;          /* waiting in the sync for an earlier request of its stream */
    uint64_t arrival_ns; /* the declared arrival, session ns */
};

struct st_sim_live_timer {
    st_sim_live_timer_cb cb;
    void *arg;
    uint64_t t_ns;
    uint64_t serial;
    uint32_t heap_idx;
};

/* The kinds of event, in their order at one virtual time. */
enum ev_kind { EV_STEP_END = 0, EV_TIMER, EV_ARRIVAL, EV_PLAN, EV_NONE };

struct st_sim_live {
    struct event_base *base; /* borrowed */
    struct event *wake;      /* owned: the wall timer */
    struct st_batch *b;      /* owned */
    struct st_profile p;
    double speed; /* 0: unpaced */
    uint64_t slow_step_ns;
    st_sim_live_idle_cb idle_cb;
    void *idle_arg;
    st_sim_live_log_cb log_cb;
    void *log_arg;
    double next_factor; /* st_sim_live_next_noise, for the next submission */
    int next_reseed;
    uint64_t next_seed;
    int64_t next_slot;      /* st_sim_live_next_slot, for the next submission; -1 any */
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
    int dirty;  /* the engine changed since its last plan that could do nothing */
    int active; /* the engine had work since the idle callback last ran */
    /* The discrete-event clock. */
    uint64_t v_now;     /* the time of the event being processed, or of the last one */
    int planned_at_now; /* the engine was planned at v_now: an arrival at v_now is late */
    uint64_t v_cur;     /* during an event: its time; outside: UINT64_MAX */
    struct st_sim_sync *sync;
    struct st_heap arrivals; /* of struct st_sim_live_arr, by (t, key) */
    struct st_heap timers;   /* of struct st_sim_live_timer, by (t, serial) */
    uint64_t serial;
    int anchored; /* pacing anchor valid */
    uint64_t anchor_wall, anchor_v;
    uint64_t blocked_since; /* real ns the loop has waited for a client; 0 when not */
    int in_run;
    struct st_sim_metrics m; /* counters kept here; m.bs is filled at snapshot time */
};

static void run(struct st_sim_live *l);
static void unpark(struct st_sim_live *l);

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

/* ---- heaps ---- */

static int arr_less(const void *pa, const void *pb)
{
    const struct st_sim_live_arr *a = pa, *b = pb;
    if (a->pl.t_ns != b->pl.t_ns) {
        return a->pl.t_ns < b->pl.t_ns;
    }
    /* Declared arrivals first, by session, stream and place in the stream; then the others in
     * the order they came. */
    if (a->declared != b->declared) {
        return a->declared;
    }
    if (a->declared) {
        if (a->session_seq != b->session_seq) {
            return a->session_seq < b->session_seq;
        }
        if (a->stream != b->stream) {
            return a->stream < b->stream;
        }
        if (a->seq != b->seq) {
            return a->seq < b->seq;
        }
    }
    return a->serial < b->serial;
}

static uint32_t *arr_idx(void *a)
{
    return &((struct st_sim_live_arr *)a)->heap_idx;
}

static int timer_less(const void *pa, const void *pb)
{
    const struct st_sim_live_timer *a = pa, *b = pb;
    return a->t_ns != b->t_ns ? a->t_ns < b->t_ns : a->serial < b->serial;
}

static uint32_t *timer_idx(void *t)
{
    return &((struct st_sim_live_timer *)t)->heap_idx;
}

/* ---- time ---- */

int st_sim_live_paced(const struct st_sim_live *l)
{
    return l->speed > 0;
}

/* The real time at which virtual t is due (the anchor must be set). */
static uint64_t due_wall(const struct st_sim_live *l, uint64_t t)
{
    double d = (double)(t - l->anchor_v) / l->speed;
    return l->anchor_wall + (uint64_t)d;
}

static void set_anchor(struct st_sim_live *l, uint64_t wall)
{
    l->anchor_wall = wall;
    l->anchor_v = l->v_now;
    l->anchored = 1;
}

/* The earliest pending event's time (UINT64_MAX when none). */
static uint64_t next_event_t(const struct st_sim_live *l)
{
    uint64_t t = UINT64_MAX;
    if (l->stepping) {
        t = l->step_end;
    }
    const struct st_sim_live_timer *tm = st_heap_top(&l->timers);
    if (tm && tm->t_ns < t) {
        t = tm->t_ns;
    }
    const struct st_sim_live_arr *a = st_heap_top(&l->arrivals);
    if (a && a->pl.t_ns < t) {
        t = a->pl.t_ns;
    }
    return t;
}

uint64_t st_sim_live_vnow(const struct st_sim_live *l)
{
    if (l->v_cur != UINT64_MAX) {
        return l->v_cur;
    }
    /* A time already planned at is closed to arrivals: the next nanosecond is not. */
    uint64_t v = l->planned_at_now ? l->v_now + 1 : l->v_now;
    if (l->speed > 0 && l->anchored) {
        uint64_t wall = st_clock_mono_ns();
        if (wall > l->anchor_wall) {
            double dv = (double)(wall - l->anchor_wall) * l->speed;
            uint64_t w = dv < 9e18 ? l->anchor_v + (uint64_t)dv : UINT64_MAX / 2;
            v = w > v ? w : v;
        }
        /* Never past what the loop has yet to process, nor past the horizon. */
        uint64_t cap = next_event_t(l);
        uint64_t h = st_sim_sync_horizon(l->sync);
        cap = h < cap ? h : cap;
        if (cap >= l->v_now && v > cap) {
            v = cap;
        }
    }
    return v;
}

static void arm_wake(struct st_sim_live *l, uint64_t at_wall)
{
    uint64_t now = st_clock_mono_ns();
    uint64_t d = at_wall > now ? at_wall - now : 0;
    /* Round up to whole microseconds so the timer never fires before it is due. */
    uint64_t us = (d + 999) / 1000;
    struct timeval tv = {.tv_sec = (time_t)(us / 1000000), .tv_usec = (suseconds_t)(us % 1000000)};
    (void)event_base_update_cache_time(l->base);
    evtimer_add(l->wake, &tv);
}

static void note_lag(struct st_sim_live *l, uint64_t lag)
{
    l->m.clock_events++;
    if (lag > l->m.lag_max_ns) {
        l->m.lag_max_ns = lag;
    }
    if (lag > LAG_COUNT_NS) {
        l->m.lag_events++;
    }
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
static void deliver(struct st_sim_live *l, uint64_t v, uint64_t lag)
{
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
            e->cb(e->arg, ev, l->step_start, v, lag);
            free(e);
        } else {
            e->cb(e->arg, ev, l->step_start, v, lag);
        }
    }
    l->n_pending = 0;
    l->dirty = 1;
}

/* Plans one engine step at v_now; a step that takes no time is handed over at once. */
static void plan(struct st_sim_live *l, uint64_t lag)
{
    uint64_t v = l->v_now;
    struct st_batch_result res;
    st_batch_step(l->b, v, &res);
    l->planned_at_now = 1;
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
        if (l->slow_step_ns) {
            /* The fault of a starved host: the simulator's own work takes this long. */
            struct timespec ts = {.tv_sec = (time_t)(l->slow_step_ns / ST_NS_PER_S),
                                  .tv_nsec = (long)(l->slow_step_ns % ST_NS_PER_S)};
            (void)nanosleep(&ts, NULL);
        }
        return;
    }
    /* Nothing could run (the pool is held): hand over what happened (preemptions) and wait for a
     * submit, abort or pressure change. */
    deliver(l, v, lag);
    l->dirty = 0;
}

/* ---- the loop ---- */

/* The next event that may be processed: its kind and time; EV_NONE when there is none. */
static enum ev_kind next_event(const struct st_sim_live *l, uint64_t *t)
{
    enum ev_kind k = EV_NONE;
    uint64_t best = UINT64_MAX;
    if (l->stepping) {
        k = EV_STEP_END;
        best = l->step_end;
    }
    const struct st_sim_live_timer *tm = st_heap_top(&l->timers);
    if (tm && tm->t_ns < best) {
        k = EV_TIMER;
        best = tm->t_ns;
    }
    const struct st_sim_live_arr *a = st_heap_top(&l->arrivals);
    if (a && a->pl.t_ns < best) {
        k = EV_ARRIVAL;
        best = a->pl.t_ns;
    }
    if (!l->stepping && l->dirty && st_batch_busy(l->b) && l->v_now < best) {
        k = EV_PLAN;
        best = l->v_now;
    }
    *t = best;
    return k;
}

/* Runs the idle callback once each time the engine runs out of work. */
static void maybe_idle(struct st_sim_live *l)
{
    if (l->active && !l->stepping && !st_batch_busy(l->b)) {
        l->active = 0;
        if (l->idle_cb) {
            l->idle_cb(l->idle_arg);
        }
    }
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    run(arg);
}

/* The loop waits for a client (the horizon): after HOLD_GIVE_UP_NS of real time, the streams it
 * waits for stop constraining. */
static int blocked(struct st_sim_live *l, uint64_t t, uint64_t wall)
{
    l->anchored = 0;
    if (!l->blocked_since) {
        l->blocked_since = wall;
    }
    if (wall - l->blocked_since < HOLD_GIVE_UP_NS) {
        arm_wake(l, l->blocked_since + HOLD_GIVE_UP_NS);
        return 0;
    }
    uint32_t n = st_sim_sync_expire(l->sync, t);
    l->m.expired_streams += n;
    unpark(l);
    l->blocked_since = 0;
    if (l->log_cb && n) {
        char line[160];
        snprintf(line, sizeof(line),
                 "sim: gave up waiting %.0f s for the next request of %u declared stream(s)\n",
                 (double)HOLD_GIVE_UP_NS / 1e9, n);
        l->log_cb(l->log_arg, line);
    }
    return 1;
}

static void process(struct st_sim_live *l, enum ev_kind k, uint64_t lag)
{
    switch (k) {
    case EV_STEP_END:
        l->stepping = 0;
        note_lag(l, lag);
        deliver(l, l->step_end, lag);
        break;
    case EV_TIMER: {
        struct st_sim_live_timer *tm = st_heap_top(&l->timers);
        st_heap_remove(&l->timers, tm);
        tm->cb(tm->arg);
        break;
    }
    case EV_ARRIVAL: {
        struct st_sim_live_arr *a = st_heap_top(&l->arrivals);
        st_heap_remove(&l->arrivals, a);
        a->placed = 1;
        a->pl.lag_ns = lag;
        note_lag(l, lag);
        a->cb(a->arg, &a->pl);
        break;
    }
    case EV_PLAN:
        plan(l, lag);
        break;
    case EV_NONE:
    default:
        break;
    }
}

static void run(struct st_sim_live *l)
{
    if (l->in_run) {
        return;
    }
    l->in_run = 1;
    for (;;) {
        uint64_t t;
        enum ev_kind k = next_event(l, &t);
        uint64_t wall = st_clock_mono_ns();
        if (k == EV_NONE) {
            /* Idle: paced, virtual time runs on at the speed from here. */
            l->blocked_since = 0;
            if (l->speed > 0) {
                set_anchor(l, wall);
            }
            break;
        }
        uint64_t h = st_sim_sync_horizon(l->sync);
        int allowed = k <= EV_TIMER ? t <= h : t < h;
        if (!allowed) {
            if (blocked(l, t, wall)) {
                continue;
            }
            break;
        }
        l->blocked_since = 0;
        uint64_t lag = 0;
        if (l->speed > 0) {
            if (!l->anchored) {
                set_anchor(l, wall);
            }
            uint64_t due = due_wall(l, t);
            if (wall < due) {
                arm_wake(l, due);
                break;
            }
            lag = wall - due;
        }
        if (t > l->v_now) {
            l->v_now = t;
            l->planned_at_now = 0;
        }
        l->v_cur = l->v_now;
        process(l, k, lag);
        l->v_cur = UINT64_MAX;
        maybe_idle(l);
    }
    l->in_run = 0;
}

/* Something changed: the loop runs on the event base's next turn (never from inside a call of
 * the server's, which may be in the middle of freeing a stream), or on at once inside the loop. */
static void kick(struct st_sim_live *l)
{
    if (!l->in_run) {
        arm_wake(l, 0);
    }
}

/* ---- arrivals ---- */

static void arr_push(struct st_sim_live *l, struct st_sim_live_arr *a)
{
    a->serial = l->serial++;
    a->heap_idx = ST_HEAP_NONE;
    st_heap_set(&l->arrivals, a);
}

/* A declared arrival's answer from the sync (rc, sp, err): its place, late or not, and onto the
 * arrival heap. */
static void settle(struct st_sim_live *l, struct st_sim_live_arr *a, uint64_t now, int rc,
                   const struct st_sim_sync_place *sp, const char *err)
{
    a->pl.session_start = sp->session_start;
    if (rc == 0) {
        a->declared = 1;
        a->session_seq = sp->session_seq;
        a->stream = sp->stream;
        a->seq = sp->seq;
        a->pl.t_ns = sp->t_ns;
        if (sp->t_ns < l->v_now || (sp->t_ns == l->v_now && l->planned_at_now)) {
            /* The loop already went past it: the best left is now. */
            a->pl.late = 1;
            a->pl.late_ns = now > sp->t_ns ? now - sp->t_ns : 0;
            a->pl.t_ns = now;
        }
    } else {
        a->sreq = NULL;
        a->pl.late = 1;
        uint64_t want = sp->session_start + a->arrival_ns;
        a->pl.late_ns = sp->session_start && now > want ? now - want : 0;
        a->pl.t_ns = now;
        if (l->log_cb) {
            char line[256];
            snprintf(line, sizeof(line), "sim: request not synchronized: %s\n", err);
            l->log_cb(l->log_arg, line);
        }
    }
    if (a->pl.late) {
        l->m.late_arrivals++;
        if (a->pl.late_ns > l->m.late_max_ns) {
            l->m.late_max_ns = a->pl.late_ns;
        }
    }
    arr_push(l, a);
}

/* Places the parked arrivals whose stream's earlier requests have all arrived (sync.h). */
static void unpark(struct st_sim_live *l)
{
    void *owner;
    struct st_sim_sync_req *req;
    struct st_sim_sync_place sp;
    int rc;
    char err[160];
    while (st_sim_sync_unpark(l->sync, &owner, &req, &sp, &rc, err, sizeof(err))) {
        struct st_sim_live_arr *a = owner;
        a->parked = 0;
        a->sreq = req;
        settle(l, a, st_sim_live_vnow(l), rc, &sp, err);
    }
}

struct st_sim_live_arr *st_sim_live_arrive(struct st_sim_live *l, const struct st_sim_sync_hdr *h,
                                           st_sim_live_place_cb cb, void *arg)
{
    struct st_sim_live_arr *a = st_xcalloc(1, sizeof(*a));
    a->cb = cb;
    a->arg = arg;
    a->heap_idx = ST_HEAP_NONE;
    uint64_t now = st_sim_live_vnow(l);
    if (h) {
        struct st_sim_sync_place sp;
        char err[160];
        a->arrival_ns = h->arrival_ns;
        int rc = st_sim_sync_arrive(l->sync, h, now, a, &a->sreq, &sp, err, sizeof(err));
        if (rc == ST_SIM_SYNC_PARKED) {
            /* An earlier request of its stream is on its way: placed when that one has come. */
            a->parked = 1;
            l->m.parked++;
            return a;
        }
        settle(l, a, now, rc, &sp, err);
        unpark(l);
    } else {
        a->pl.t_ns = now;
        arr_push(l, a);
    }
    /* Through the loop, never from inside this call: the caller has not returned the handle. */
    kick(l);
    return a;
}

void st_sim_live_arr_end(struct st_sim_live *l, struct st_sim_live_arr *a, uint64_t t_ns)
{
    if (a->sreq) {
        st_sim_sync_end(l->sync, a->sreq, t_ns);
    }
    st_heap_remove(&l->arrivals, a);
    free(a);
    kick(l);
}

void st_sim_live_arr_abort(struct st_sim_live *l, struct st_sim_live_arr *a)
{
    if (a->sreq) {
        st_sim_sync_abort(l->sync, a->sreq);
    }
    st_heap_remove(&l->arrivals, a);
    free(a);
    /* Its stream stopped constraining: what waited behind it goes now. */
    unpark(l);
    kick(l);
}

/* ---- timers ---- */

struct st_sim_live_timer *st_sim_live_timer_new(struct st_sim_live *l, st_sim_live_timer_cb cb,
                                                void *arg)
{
    (void)l;
    struct st_sim_live_timer *t = st_xcalloc(1, sizeof(*t));
    t->cb = cb;
    t->arg = arg;
    t->heap_idx = ST_HEAP_NONE;
    return t;
}

void st_sim_live_timer_at(struct st_sim_live *l, struct st_sim_live_timer *t, uint64_t t_ns)
{
    uint64_t now = st_sim_live_vnow(l);
    t->t_ns = t_ns > now ? t_ns : now;
    t->serial = l->serial++;
    st_heap_set(&l->timers, t);
    kick(l);
}

void st_sim_live_timer_stop(struct st_sim_live *l, struct st_sim_live_timer *t)
{
    st_heap_remove(&l->timers, t);
}

void st_sim_live_timer_free(struct st_sim_live *l, struct st_sim_live_timer *t)
{
    if (!t) {
        return;
    }
    st_heap_remove(&l->timers, t);
    free(t);
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
    l->speed = cfg->speed > 0 && isfinite(cfg->speed) ? cfg->speed : 0;
    l->slow_step_ns = cfg->slow_step_ns;
    l->idle_cb = cfg->idle_cb;
    l->idle_arg = cfg->idle_arg;
    l->log_cb = cfg->log_cb;
    l->log_arg = cfg->log_arg;
    l->next_factor = 1.0;
    l->next_slot = -1;
    l->n_buckets = 64;
    l->buckets = st_xcalloc(l->n_buckets, sizeof(*l->buckets));
    l->v_cur = UINT64_MAX;
    l->sync = st_sim_sync_new();
    st_heap_init(&l->arrivals, arr_less, arr_idx);
    st_heap_init(&l->timers, timer_less, timer_idx);
    if (l->speed > 0) {
        set_anchor(l, cfg->t0_mono_ns);
    }
    st_sim_hist_init_ttft(&l->m.ttft, cfg->p->engine.dialect);
    l->wake = evtimer_new(cfg->base, on_wake, l);
    if (!l->wake) {
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
    if (l->wake) {
        event_free(l->wake);
    }
    for (uint32_t i = 0; i < l->n_buckets; i++) {
        struct entry *e;
        while ((e = l->buckets[i]) != NULL) {
            l->buckets[i] = e->next;
            free(e);
        }
    }
    /* Arrivals and timers belong to the server's objects, which are gone or going. */
    st_heap_release(&l->arrivals);
    st_heap_release(&l->timers);
    st_sim_sync_free(l->sync);
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

void st_sim_live_next_slot(struct st_sim_live *l, int64_t slot)
{
    l->next_slot = slot;
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
    int64_t slot = l->next_slot;
    l->next_factor = 1.0;
    l->next_reseed = 0;
    l->next_slot = -1;
    if (rc != 0) {
        return rc;
    }
    if (slot >= 0 && slot <= UINT32_MAX && st_batch_pin_slot(l->b, id, (uint32_t)slot) != 0) {
        abort(); /* impossible: just submitted */
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
    struct entry **head = &l->buckets[mix64(id) & (l->n_buckets - 1)];
    struct entry *e = st_xmalloc(sizeof(*e));
    *e = (struct entry){.id = id,
                        .next = *head,
                        .cb = cb,
                        .arg = arg,
                        .v_submit = v,
                        .prompt_tokens = prompt_tokens,
                        .max_tokens = max_tokens};
    *head = e;
    l->n_entries++;
    l->m.requests_total++;
    l->dirty = 1;
    l->active = 1;
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
    l->dirty = 1;
    if (!l->in_run) {
        maybe_idle(l);
    }
    kick(l);
}

/* The speculation counters as of a flush of the whole cache. */
static void note_flush(struct st_sim_live *l)
{
    struct st_batch_stats bs;
    st_batch_get_stats(l->b, &bs);
    l->m.spec_drafts_at_flush = bs.spec_drafts;
    l->m.spec_accepted_at_flush = bs.spec_accepted_tokens;
}

void st_sim_live_flush(struct st_sim_live *l)
{
    st_batch_flush(l->b);
    note_flush(l);
    /* No kick: cached blocks were already available to allocations, so a flush never unblocks
     * a waiting request (and an idle callback that flushes must not recurse). */
}

uint64_t st_sim_live_erase_slot(struct st_sim_live *l, uint32_t slot)
{
    uint64_t n = st_batch_erase_slot(l->b, slot);
    if (!st_batch_slot_scope(l->b)) {
        note_flush(l); /* one cache serves every slot: the whole cache went */
    }
    return n; /* no kick, as for a flush */
}

int st_sim_live_busy(const struct st_sim_live *l)
{
    return st_batch_busy(l->b);
}

void st_sim_live_pressure(struct st_sim_live *l, uint64_t blocks)
{
    st_batch_pressure(l->b, blocks);
    l->dirty = 1;
    kick(l);
}

void st_sim_live_metrics(const struct st_sim_live *l, struct st_sim_metrics *out)
{
    *out = l->m;
    out->sessions = st_sim_sync_sessions(l->sync);
    out->speed = l->speed;
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
