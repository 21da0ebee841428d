/*
 * Sessions, streams and the horizon (see sync.h). State: a list of sessions, each with its
 * streams; a stream keeps its last declaration, the free times of its cap's slots (NEVER while
 * the request holding one is in flight), the place of its last request and its pending count
 * (parked requests included). Requests that came before an earlier one of their stream wait on
 * a list of parked requests (few: only what the connections reordered).
 * The horizon is the top of a min-heap of the live streams whose next place is known (finite).
 * Invariants: a stream is in the heap exactly when it is live and its bound is finite; a session
 * is freed once none of its streams is live and none of its requests is in flight.
 */
#include "sim/sync.h"

#include <stdlib.h>
#include <string.h>

#include "base/heap.h"
#include "base/num.h"
#include "base/xalloc.h"
#include "sim/model/dlist.h"

enum { S_LIVE = 1, S_DONE, S_DEAD };

struct session;

struct stream {
    struct session *ss;
    uint32_t index;
    int state;
    int declared; /* a request of it has been received (next holds its declaration) */
    struct st_sim_sync_next next;
    uint64_t *slots; /* owned: free times, absolute; NEVER while in flight */
    uint32_t cap;
    uint64_t last_place;
    uint64_t seq;
    uint32_t pending;
    uint32_t heap_idx;
    uint64_t bound;
};

struct session {
    struct st_dlink link; /* first member: on st_sim_sync.sessions */
    char id[ST_SIM_SYNC_ID_MAX + 1];
    uint64_t seq;
    uint64_t start;
    uint32_t n;
    struct stream *streams; /* owned, n of them */
    uint32_t live;          /* streams in S_LIVE */
    uint64_t pending;       /* requests in flight */
};

struct st_sim_sync_req {
    struct stream *st;
    uint32_t slot;
    /* Parked: its headers, its owner, and its links on st_sim_sync.parked. */
    int parked;
    struct st_sim_sync_hdr h;
    void *owner;
    struct st_sim_sync_req *pprev, *pnext;
};

struct st_sim_sync {
    struct st_dlist sessions; /* owned elements */
    uint64_t next_seq;
    struct st_heap heap;            /* live streams with a finite bound, by bound */
    struct st_sim_sync_req *parked; /* owned list, in no order */
};

/* ---- parsing ---- */

static int parse_whole(const char *p, uint64_t max, uint64_t *v)
{
    return st_num_u64z(p, max, v) == 0 ? 0 : -1;
}

static int parse_next(const char *p, struct st_sim_sync_next *n)
{
    memset(n, 0, sizeof(*n));
    n->cap = 1;
    n->until_ns = ST_SIM_SYNC_NEVER;
    if (strcmp(p, "none") == 0) {
        n->none = 1;
        return 0;
    }
    while (*p) {
        uint64_t v;
        const char *end;
        const char *eq = strchr(p, '=');
        if (!eq || st_num_u64_prefix(eq + 1, UINT64_MAX, &end, &v) != 0 ||
            (*end != ',' && *end != '\0')) {
            return -1;
        }
        size_t k = (size_t)(eq - p);
        if (k == 2 && memcmp(p, "at", 2) == 0) {
            n->at_ns = v;
        } else if (k == 3 && memcmp(p, "cap", 3) == 0 && v >= 1 && v <= ST_SIM_SYNC_MAX_CAP) {
            n->cap = (uint32_t)v;
        } else if (k == 5 && memcmp(p, "until", 5) == 0) {
            n->until_ns = v;
        } else {
            return -1;
        }
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}

int st_sim_sync_parse(const char *session, const char *streams, const char *stream,
                      const char *arrival, const char *next, struct st_sim_sync_hdr *out, char *err,
                      size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (!session) {
        return 1;
    }
    size_t n = strlen(session);
    if (n == 0 || n > ST_SIM_SYNC_ID_MAX ||
        strspn(session, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") != n) {
        st_errf(err, errlen, "X-Sim-Session: 1 to %u letters, digits, '_', '.' or '-'",
                ST_SIM_SYNC_ID_MAX);
        return ST_EPARSE;
    }
    memcpy(out->session, session, n + 1);
    uint64_t v;
    if (parse_whole(streams, ST_SIM_SYNC_MAX_STREAMS, &v) != 0 || v == 0) {
        st_errf(err, errlen, "X-Sim-Streams: expected an integer from 1 to %u",
                ST_SIM_SYNC_MAX_STREAMS);
        return ST_EPARSE;
    }
    out->streams = (uint32_t)v;
    if (parse_whole(stream, out->streams - 1, &v) != 0) {
        st_errf(err, errlen, "X-Sim-Stream: expected an integer from 0 to %u", out->streams - 1);
        return ST_EPARSE;
    }
    out->stream = (uint32_t)v;
    if (arrival && parse_whole(arrival, UINT64_MAX / 2, &out->arrival_ns) != 0) {
        st_errf(err, errlen, "X-Sim-Arrival: expected nanoseconds since the session's start");
        return ST_EPARSE;
    }
    if (!next || parse_next(next, &out->next) != 0) {
        st_errf(err, errlen,
                "X-Sim-Next: expected 'none' or 'at=NS,cap=M[,until=NS]' (cap 1 to %u)",
                ST_SIM_SYNC_MAX_CAP);
        return ST_EPARSE;
    }
    return 0;
}

int st_sim_sync_parse_seq(const char *seq, struct st_sim_sync_hdr *h, char *err, size_t errlen)
{
    h->has_seq = 0;
    h->seq = 0;
    if (!seq) {
        return 0;
    }
    if (parse_whole(seq, UINT64_MAX / 2, &h->seq) != 0) {
        st_errf(err, errlen, "X-Sim-Seq: expected the request's place in its stream, from 0");
        return ST_EPARSE;
    }
    h->has_seq = 1;
    return 0;
}

/* ---- the heap of finite bounds ---- */

static int bound_less(const void *a, const void *b)
{
    return ((const struct stream *)a)->bound < ((const struct stream *)b)->bound;
}

static uint32_t *bound_idx(void *item)
{
    return &((struct stream *)item)->heap_idx;
}

/* ---- streams ---- */

static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a > ST_SIM_SYNC_NEVER - b ? ST_SIM_SYNC_NEVER : a + b;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

/* The slot free earliest (its index in *k), NEVER when all are in flight. */
static uint64_t free_slot(const struct stream *st, uint32_t *k)
{
    uint64_t best = ST_SIM_SYNC_NEVER;
    *k = 0;
    for (uint32_t i = 0; i < st->cap; i++) {
        if (st->slots[i] < best) {
            best = st->slots[i];
            *k = i;
        }
    }
    return best;
}

static void set_state(struct stream *st, int state)
{
    if (st->state == S_LIVE && state != S_LIVE) {
        st->ss->live--;
    }
    st->state = state;
}

/* Where the stream's next request lands, as far as is known now; NEVER when it sends none or
 * must first get back a slot. A stream found done is marked so. */
static uint64_t stream_bound(struct stream *st)
{
    if (st->state != S_LIVE) {
        return ST_SIM_SYNC_NEVER;
    }
    if (st->declared && st->next.none) {
        set_state(st, S_DONE);
        return ST_SIM_SYNC_NEVER;
    }
    uint32_t k;
    uint64_t f = free_slot(st, &k);
    if (f == ST_SIM_SYNC_NEVER) {
        return ST_SIM_SYNC_NEVER;
    }
    uint64_t t = st->declared ? add_sat(st->ss->start, st->next.at_ns) : st->ss->start;
    uint64_t p = max_u64(max_u64(t, st->last_place), f);
    if (st->declared && st->next.until_ns != ST_SIM_SYNC_NEVER &&
        p >= add_sat(st->ss->start, st->next.until_ns)) {
        set_state(st, S_DONE);
        return ST_SIM_SYNC_NEVER;
    }
    return p;
}

static void session_free(struct st_sim_sync *s, struct session *ss)
{
    st_dlist_remove(&s->sessions, &ss->link);
    for (uint32_t i = 0; i < ss->n; i++) {
        st_heap_remove(&s->heap, &ss->streams[i]);
        free(ss->streams[i].slots);
    }
    free(ss->streams);
    free(ss);
}

/* Recomputes a stream's bound and place in the heap; frees its session when it is over. */
static void update(struct st_sim_sync *s, struct stream *st)
{
    st->bound = stream_bound(st);
    if (st->bound == ST_SIM_SYNC_NEVER) {
        st_heap_remove(&s->heap, st);
    } else {
        st_heap_set(&s->heap, st);
    }
    struct session *ss = st->ss;
    if (ss->live == 0 && ss->pending == 0) {
        session_free(s, ss);
    }
}

static struct session *session_find(const struct st_sim_sync *s, const char *id)
{
    for (struct st_dlink *l = s->sessions.head; l; l = l->next) {
        struct session *ss = (struct session *)l;
        if (strcmp(ss->id, id) == 0) {
            return ss;
        }
    }
    return NULL;
}

static struct session *session_new(struct st_sim_sync *s, const struct st_sim_sync_hdr *h,
                                   uint64_t now_ns)
{
    struct session *ss = st_xcalloc(1, sizeof(*ss));
    memcpy(ss->id, h->session, sizeof(ss->id));
    ss->seq = s->next_seq++;
    ss->start = now_ns;
    ss->n = h->streams;
    ss->live = h->streams;
    ss->streams = st_xcalloc(h->streams, sizeof(*ss->streams));
    st_dlist_push_front(&s->sessions, &ss->link);
    for (uint32_t i = 0; i < ss->n; i++) {
        struct stream *st = &ss->streams[i];
        st->ss = ss;
        st->index = i;
        st->state = S_LIVE;
        st->cap = 1;
        st->slots = st_xmalloc(sizeof(*st->slots));
        st->slots[0] = now_ns;
        st->last_place = now_ns;
        st->heap_idx = ST_HEAP_NONE;
        st->bound = now_ns;
        st_heap_set(&s->heap, st);
    }
    return ss;
}

/* ---- API ---- */

struct st_sim_sync *st_sim_sync_new(void)
{
    struct st_sim_sync *s = st_xcalloc(1, sizeof(*s));
    st_heap_init(&s->heap, bound_less, bound_idx);
    return s;
}

void st_sim_sync_free(struct st_sim_sync *s)
{
    if (!s) {
        return;
    }
    while (s->parked) {
        struct st_sim_sync_req *r = s->parked;
        s->parked = r->pnext;
        free(r);
    }
    while (s->sessions.head) {
        session_free(s, (struct session *)s->sessions.head);
    }
    st_heap_release(&s->heap);
    free(s);
}

/* Places h on stream st of ss (found or made for it); the body of st_sim_sync_arrive. */
static int place(struct st_sim_sync *s, struct session *ss, const struct st_sim_sync_hdr *h,
                 int fresh, void *owner, struct st_sim_sync_req **req,
                 struct st_sim_sync_place *out, char *err, size_t errlen)
{
    struct stream *st = &ss->streams[h->stream];
    out->session_start = ss->start;
    out->session_seq = ss->seq;
    out->stream = h->stream;
    if (st->state != S_LIVE) {
        st_errf(err, errlen, "stream %u of session %s is %s", h->stream, ss->id,
                st->state == S_DONE ? "done (it declared no further request)"
                                    : "no longer synchronized");
        update(s, st);
        return ST_EPARSE;
    }
    if (h->has_seq && h->seq > st->seq && fresh) {
        /*
         * The session was made by this request: its stream's earlier requests belong to a
         * session that ended (freed once every stream was done or dead, e.g. after a stall) and
         * will not come. Nothing to wait for: it starts the stream's count here.
         */
        st->seq = h->seq;
    }
    if (h->has_seq && h->seq != st->seq) {
        if (h->seq < st->seq) {
            st_errf(err, errlen, "stream %u of session %s already placed request %llu", h->stream,
                    ss->id, (unsigned long long)h->seq);
            set_state(st, S_DEAD);
            update(s, st);
            return ST_EPARSE;
        }
        /* An earlier request of the stream is still on its way: this one waits for it. */
        struct st_sim_sync_req *r = st_xcalloc(1, sizeof(*r));
        r->st = st;
        r->parked = 1;
        r->h = *h;
        r->owner = owner;
        r->pnext = s->parked;
        if (s->parked) {
            s->parked->pprev = r;
        }
        s->parked = r;
        st->pending++;
        ss->pending++;
        *req = r;
        return ST_SIM_SYNC_PARKED;
    }
    uint32_t k;
    uint64_t f = free_slot(st, &k);
    if (f == ST_SIM_SYNC_NEVER) {
        st_errf(err, errlen, "stream %u of session %s has %u requests in flight, its cap",
                h->stream, ss->id, st->cap);
        set_state(st, S_DEAD);
        update(s, st);
        return ST_EPARSE;
    }
    uint64_t t = st->declared ? add_sat(ss->start, st->next.at_ns) : ss->start;
    uint64_t p = max_u64(max_u64(add_sat(ss->start, h->arrival_ns), t), max_u64(st->last_place, f));
    st->slots[k] = ST_SIM_SYNC_NEVER;
    st->last_place = p;
    st->pending++;
    ss->pending++;
    if (!st->declared && h->next.cap > st->cap) {
        /* The cap is fixed by the first declaration; the new slots are free from the start. */
        st->slots = st_xrealloc(st->slots, h->next.cap * sizeof(*st->slots));
        for (uint32_t i = st->cap; i < h->next.cap; i++) {
            st->slots[i] = ss->start;
        }
        st->cap = h->next.cap;
    }
    st->declared = 1;
    st->next = h->next;
    *out = (struct st_sim_sync_place){
        .t_ns = p,
        .session_start = ss->start,
        .session_seq = ss->seq,
        .stream = h->stream,
        .seq = st->seq++,
    };
    struct st_sim_sync_req *r = st_xcalloc(1, sizeof(*r));
    r->st = st;
    r->slot = k;
    *req = r;
    update(s, st);
    return 0;
}

int st_sim_sync_arrive(struct st_sim_sync *s, const struct st_sim_sync_hdr *h, uint64_t now_ns,
                       void *owner, struct st_sim_sync_req **req, struct st_sim_sync_place *out,
                       char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    *req = NULL;
    struct session *ss = session_find(s, h->session);
    int fresh = 0;
    if (!ss) {
        if (s->sessions.n >= ST_SIM_SYNC_MAX_SESSIONS) {
            st_errf(err, errlen, "more than %u sessions at once", ST_SIM_SYNC_MAX_SESSIONS);
            return ST_ETOOBIG;
        }
        ss = session_new(s, h, now_ns);
        fresh = 1;
    } else if (ss->n != h->streams) {
        st_errf(err, errlen, "session %s has %u streams, not %u", ss->id, ss->n, h->streams);
        return ST_EPARSE;
    }
    return place(s, ss, h, fresh, owner, req, out, err, errlen);
}

static void unlink_parked(struct st_sim_sync *s, struct st_sim_sync_req *r)
{
    if (r->pprev) {
        r->pprev->pnext = r->pnext;
    } else {
        s->parked = r->pnext;
    }
    if (r->pnext) {
        r->pnext->pprev = r->pprev;
    }
    r->st->pending--;
    r->st->ss->pending--;
}

int st_sim_sync_unpark(struct st_sim_sync *s, void **owner, struct st_sim_sync_req **req,
                       struct st_sim_sync_place *out, int *rc, char *err, size_t errlen)
{
    for (struct st_sim_sync_req *r = s->parked; r; r = r->pnext) {
        struct stream *st = r->st;
        if (st->state == S_LIVE && r->h.seq != st->seq) {
            continue;
        }
        unlink_parked(s, r);
        struct st_sim_sync_hdr h = r->h;
        *owner = r->owner;
        free(r);
        memset(out, 0, sizeof(*out));
        *req = NULL;
        *rc = place(s, st->ss, &h, 0, *owner, req, out, err, errlen);
        return 1;
    }
    return 0;
}

static void req_done(struct st_sim_sync *s, struct st_sim_sync_req *req)
{
    struct stream *st = req->st;
    st->pending--;
    st->ss->pending--;
    free(req);
    update(s, st);
}

void st_sim_sync_end(struct st_sim_sync *s, struct st_sim_sync_req *req, uint64_t t_ns)
{
    req->st->slots[req->slot] = t_ns;
    req_done(s, req);
}

void st_sim_sync_abort(struct st_sim_sync *s, struct st_sim_sync_req *req)
{
    struct stream *st = req->st;
    if (st->state == S_LIVE) {
        set_state(st, S_DEAD);
    }
    if (req->parked) {
        unlink_parked(s, req);
        free(req);
        update(s, st);
        return;
    }
    req_done(s, req);
}

uint64_t st_sim_sync_horizon(const struct st_sim_sync *s)
{
    const struct stream *st = st_heap_top(&s->heap);
    return st ? st->bound : ST_SIM_SYNC_NEVER;
}

uint32_t st_sim_sync_expire(struct st_sim_sync *s, uint64_t t_ns)
{
    uint32_t n = 0;
    for (;;) {
        struct stream *st = st_heap_top(&s->heap);
        if (!st || st->bound > t_ns) {
            break;
        }
        set_state(st, S_DEAD);
        update(s, st);
        n++;
    }
    return n;
}

uint32_t st_sim_sync_sessions(const struct st_sim_sync *s)
{
    return s->sessions.n;
}
