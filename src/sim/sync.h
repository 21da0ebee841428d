/*
 * The simulator's conservative synchronization with its clients: sessions of declared request
 * streams, where each request says when it arrives in virtual time and what its stream does
 * next, so the engine never runs past a moment at which a request can still arrive. Pure: no
 * clock, no I/O; every time is passed in (absolute virtual ns of the simulator).
 *
 * A stream's requests may reach the simulator out of order (each on its own connection); one
 * that says its place in the stream (X-Sim-Seq) is parked until those before it have arrived, so
 * a stream is placed in its own order whatever the host's scheduling did to the connections.
 *
 * A session is one load run of a client (one `servetune bench` load, one sweep point, one probe
 * pass); it has N streams, numbered 0..N-1, that start together at the session's start S (the
 * simulator's virtual now when it first hears of the session). A stream is a FIFO of requests
 * with a cap M on the requests it has in flight and a schedule: request i arrives at
 *   place_i = max(declared_i, T_i, place_(i-1), the earliest end among the M slots)
 * where T_i is the time the previous request declared for it (`at`), and a slot is free from the
 * end of the last request that held it (S before any). A closed-loop slot is a stream with M = 1
 * and T = S (its next request arrives when this one ends); an open-loop worker is a stream with
 * its schedule's times and its cap. A declaration may end the stream (`none`), or bound it
 * (`until`: no request placed at or after that time).
 *
 * The horizon is the earliest time at which any live stream may still place a request: the
 * driver (live.c) processes no arrival or engine step at or after it. A stream whose client is
 * gone (abort, expire) stops constraining; so does one that is done.
 *
 * The wire form (docs/sim.md, "Virtual time") is parsed by st_sim_sync_parse. Workload: a few
 * sessions at a time, up to ST_SIM_SYNC_MAX_STREAMS streams each, millions of requests.
 */
#ifndef ST_SIM_SYNC_H
#define ST_SIM_SYNC_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define ST_SIM_SYNC_NEVER UINT64_MAX
#define ST_SIM_SYNC_MAX_STREAMS 65536u
#define ST_SIM_SYNC_MAX_CAP 65536u
#define ST_SIM_SYNC_MAX_SESSIONS 1024u
#define ST_SIM_SYNC_ID_MAX 64u

/* What a stream does after a request (X-Sim-Next). */
struct st_sim_sync_next {
    int none;          /* no request follows */
    uint64_t at_ns;    /* session ns: the next request is not placed before this */
    uint32_t cap;      /* most requests of the stream in flight (1..ST_SIM_SYNC_MAX_CAP) */
    uint64_t until_ns; /* session ns: none placed at or after this; ST_SIM_SYNC_NEVER: no bound */
};

/* The session headers of one request. */
struct st_sim_sync_hdr {
    char session[ST_SIM_SYNC_ID_MAX + 1]; /* [A-Za-z0-9_.-], 1..64 bytes */
    uint32_t streams;                     /* 1..ST_SIM_SYNC_MAX_STREAMS */
    uint32_t stream;                      /* < streams */
    uint64_t arrival_ns;                  /* session ns the client declares; 0 when absent */
    struct st_sim_sync_next next;
    int has_seq;  /* X-Sim-Seq was given */
    uint64_t seq; /* its place in its stream, from 0 */
};

/*
 * Parses the headers X-Sim-Session, X-Sim-Streams, X-Sim-Stream, X-Sim-Arrival and X-Sim-Next
 * (each NUL-terminated, NULL when absent). Returns 1 when the request declares nothing (no
 * X-Sim-Session), 0 with *out filled, or ST_EPARSE with a sentence in err (a missing or bad
 * header). X-Sim-Next: "none", or "at=NS,cap=M[,until=NS]" in any order (at defaults to 0, cap
 * to 1).
 */
int st_sim_sync_parse(const char *session, const char *streams, const char *stream,
                      const char *arrival, const char *next, struct st_sim_sync_hdr *out, char *err,
                      size_t errlen) ST_WUR;

/* X-Sim-Seq (NUL-terminated, NULL when absent) into h: 0, or ST_EPARSE with a sentence. */
int st_sim_sync_parse_seq(const char *seq, struct st_sim_sync_hdr *h, char *err,
                          size_t errlen) ST_WUR;

/* st_sim_sync_arrive's answer for a request that came before one of its stream's earlier ones. */
#define ST_SIM_SYNC_PARKED 2

struct st_sim_sync;
/* One declared request from its arrival to its end; owned by the st_sim_sync. */
struct st_sim_sync_req;

/* Where a request lands, and the key that orders arrivals at the same time. */
struct st_sim_sync_place {
    uint64_t t_ns;          /* absolute virtual ns */
    uint64_t session_start; /* absolute virtual ns of the session's start */
    uint64_t session_seq;   /* sessions in creation order */
    uint32_t stream;
    uint64_t seq; /* the request's place in its stream */
};

struct st_sim_sync *st_sim_sync_new(void);
/* Frees every session and request. NULL is a no-op. */
void st_sim_sync_free(struct st_sim_sync *s);

/*
 * A declared request was received. now_ns is the virtual time a new session starts at. Fills
 * *out with its place and returns 0 and the request's handle in *req; ST_ETOOBIG when a new
 * session would exceed ST_SIM_SYNC_MAX_SESSIONS; ST_EPARSE (err says why) when the request
 * contradicts its session (another stream count, a stream that is done) or its stream has no
 * free slot (it sent more than its cap): the stream then stops constraining, the caller treats
 * the request as undeclared, and out->session_start is still the session's (when it exists).
 * ST_SIM_SYNC_PARKED (*req its handle, *out unset) when h->seq is past the next place of its
 * stream: it is placed once those before it have arrived (st_sim_sync_unpark); owner is what
 * st_sim_sync_unpark gives back for it. A seq already placed is ST_EPARSE.
 */
int st_sim_sync_arrive(struct st_sim_sync *s, const struct st_sim_sync_hdr *h, uint64_t now_ns,
                       void *owner, struct st_sim_sync_req **req, struct st_sim_sync_place *out,
                       char *err, size_t errlen) ST_WUR;
/*
 * Places a parked request that may now go (its stream's earlier ones have arrived, or its stream
 * stopped constraining): returns 1 with *owner, *req and *out and the answer *rc that
 * st_sim_sync_arrive would give it now (0, or ST_EPARSE with err: treat it as undeclared, *req
 * NULL), 0 when none may go. Call it until 0 after each arrive, abort and expire.
 */
int st_sim_sync_unpark(struct st_sim_sync *s, void **owner, struct st_sim_sync_req **req,
                       struct st_sim_sync_place *out, int *rc, char *err, size_t errlen) ST_WUR;
/* The request was answered in full (or failed) at t_ns: its slot is free from then. Frees req. */
void st_sim_sync_end(struct st_sim_sync *s, struct st_sim_sync_req *req, uint64_t t_ns);
/* The client left before the end (or while parked): the request's stream stops constraining.
 * Frees req. */
void st_sim_sync_abort(struct st_sim_sync *s, struct st_sim_sync_req *req);
/* The earliest time a live stream may still place a request; ST_SIM_SYNC_NEVER when none. */
uint64_t st_sim_sync_horizon(const struct st_sim_sync *s);
/* Streams whose next request is due at or before t_ns stop constraining (their client is
 * presumed gone). Returns how many. */
uint32_t st_sim_sync_expire(struct st_sim_sync *s, uint64_t t_ns);
/* Sessions alive (with a live stream or a request in flight). */
uint32_t st_sim_sync_sessions(const struct st_sim_sync *s);

#endif
