/*
 * The cache protocol of one measured point (docs/cli.md, "Cache protocol"): flush the server's
 * prefix cache with its own route, verify the flush with a canary prompt (cached before the
 * flush, it must come back with zero cached tokens after it), warm each shared prefix of the
 * workload once with a short output, then measure the point and judge it: the measured hit rate
 * (cached / prompt tokens over the measured requests, and the server's own counters where it has
 * them) must be within a tolerance of the target, or the point is invalid. Every point records the
 * cache state it ran in.
 *
 * Not the campaign: one point at a time, for the caller's loop (sweep, probe). Requests go
 * through the load engine (canary and warm-up receipts in their own file); flush and scrapes
 * through src/target. Runs on the controlling thread; prints nothing (the caller reports).
 * Kept in cli/ until the campaign module exists; the header is the interface it will keep.
 */
#ifndef ST_CLI_CACHEPROTO_H
#define ST_CLI_CACHEPROTO_H

#include <stddef.h>
#include <stdint.h>

#include "base/json.h"
#include "base/status.h"
#include "engine/run.h"
#include "target/server.h"
#include "workload/workload.h"

enum st_cache_state {
    ST_CACHE_FLUSHED_WARMED = 1, /* flushed (verified or unverifiable), then warmed */
    ST_CACHE_FLUSHED,            /* flushed, not warmed (--no-warm, or nothing to warm) */
    ST_CACHE_WARM,               /* not flushed on purpose (--no-flush): as left, then warmed */
    ST_CACHE_UNCONTROLLED,       /* a flush was wanted but is impossible or did not empty it */
};

/* "flushed+warmed", "flushed", "warm", "uncontrolled". */
const char *st_cache_state_name(enum st_cache_state s);

enum st_cache_verify {
    ST_CACHE_VERIFY_NONE = 0,     /* no flush, nothing to verify */
    ST_CACHE_VERIFY_OK,           /* the canary came back with 0 cached tokens */
    ST_CACHE_VERIFY_FAILED,       /* the canary still had cached tokens after the flush */
    ST_CACHE_VERIFY_UNVERIFIABLE, /* the server reports no cached tokens, even for a repeat */
};

const char *st_cache_verify_name(enum st_cache_verify v);

struct st_cache_cfg {
    struct st_target *target;       /* borrowed; opened; outlives the protocol */
    const struct st_load_cfg *load; /* borrowed: target, model, timeouts of the requests */
    const struct st_workload *wl;   /* borrowed: its prefix groups are warmed; may be NULL */
    int flush;                      /* flush before each point (else state "warm") */
    int warm; /* prefill each shared prefix once; on a server with per-slot caches (llama.cpp
               * total_slots > 1) once per slot, all slots at a time */
    uint32_t warm_concurrency; /* warm-up requests in flight (default 4) */
    uint64_t flush_timeout_ms; /* per flush, busy retries included (0: 60 s) */
    uint64_t canary_tokens;    /* canary prompt length (0: 2048, at least 8 pages) */
    uint64_t page_tokens;      /* KV page size, 0 when unknown (tolerance allowance) */
    uint64_t seed;             /* canary text seed */
};

/* What preparing one point found, for its record. */
struct st_cache_prep {
    enum st_cache_state state;
    struct st_target_flush flush; /* outcome NONE (0) when no flush was tried */
    int flush_tried;
    enum st_cache_verify verify;
    int64_t canary_cached_before; /* cached tokens of the canary before the flush, -1 unknown */
    int64_t canary_cached_after;  /* after the flush, -1 unknown */
    uint64_t warm_requests;
    uint64_t warm_failed;
    uint32_t warm_slots; /* per-slot caches primed (llama.cpp total_slots when > 1), else 0 */
    int interrupted;     /* a signal came during the canary or warm-up */
    char reason[512];    /* one line: why the state is what it is (uncontrolled: what to do) */
};

/*
 * Flush, verify and warm for one point. Canary and warm-up receipts are appended to receipts
 * (borrowed; may be a discarding one). Fills prep. Returns 0; a negated errno or ST_EUSAGE only
 * when a load cannot start (err filled); a failed flush is not an error but state uncontrolled.
 */
int st_cache_prepare(const struct st_cache_cfg *cc, struct st_receipts *receipts,
                     struct st_cache_prep *prep, char *err, size_t errlen) ST_WUR;

/* The server's counters around a measured run. */
struct st_cache_scrape {
    int ok; /* the scrape worked and had prefix counters */
    struct st_target_counters c;
};

/* Scrapes /metrics (failures leave ok 0). */
void st_cache_scrape(struct st_target *t, struct st_cache_scrape *s);

/* The verdict on one measured point. */
struct st_cache_judge {
    double hit_rate;        /* cached / prompt tokens of measured ok requests; NaN if none or if any
                             * request did not say (st_metrics_hit_rate) */
    double hit_rate_server; /* the server's prefix counters over the run; NaN if none */
    double target;          /* NaN: no target (nothing warmed, or no shared prefix) */
    double tolerance;       /* the allowed |hit - target|: tol + page / mean prompt tokens */
    int valid;
    int unverifiable; /* not valid only because the hit rate is unknown: the server said
                       * nothing of cached tokens (requests or counters); why says so */
    char why[256];    /* empty when valid; else the reasons, "; "-separated */
};

/*
 * Judges a measured run: target (NaN for none), tol (share, e.g. 0.01), page_tokens (0 unknown),
 * the run's metrics, the scrapes before and after (may have ok 0), whether it was interrupted.
 * Pure.
 */
void st_cache_judge(double target, double tol, uint64_t page_tokens, const struct st_metrics *m,
                    const struct st_cache_scrape *before, const struct st_cache_scrape *after,
                    int interrupted, struct st_cache_judge *out);

/* Writes the prep as JSON members (cache_state, flush {...}, verify, warm {...}) into w. */
void st_cache_prep_json(const struct st_cache_prep *p, struct st_jw *w);

#endif
