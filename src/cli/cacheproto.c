/*
 * The cache protocol of one measured point: flush, verify with a canary, warm, judge. See
 * cacheproto.h; the outcomes per server are in docs/cli.md ("Cache protocol").
 */
#include "cli/cacheproto.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/names.h"
#include "cli/common.h"
#include "workload/synth.h"

#define CANARY_SEED 0xca7a11e5c0ffee01ull
#define CANARY_MIN_TOKENS 2048u
#define DEFAULT_FLUSH_TIMEOUT_MS 60000u

static const char *const cache_state_names[] = {[ST_CACHE_FLUSHED_WARMED] = "flushed+warmed",
                                                [ST_CACHE_FLUSHED] = "flushed",
                                                [ST_CACHE_WARM] = "warm",
                                                [ST_CACHE_UNCONTROLLED] = "uncontrolled"};

const char *st_cache_state_name(enum st_cache_state s)
{
    return ST_NAME_OF(cache_state_names, s, "?");
}

static const char *const cache_verify_names[] = {[ST_CACHE_VERIFY_NONE] = "none",
                                                 [ST_CACHE_VERIFY_OK] = "ok",
                                                 [ST_CACHE_VERIFY_FAILED] = "failed",
                                                 [ST_CACHE_VERIFY_UNVERIFIABLE] = "unverifiable"};

const char *st_cache_verify_name(enum st_cache_verify v)
{
    return ST_NAME_OF(cache_verify_names, v, "?");
}

struct canary {
    struct st_buf text; /* owned: the canary prompt */
};

static const char canary_tag[] = "{\"cache\":\"canary\"}";
static const char warm_tag[] = "{\"cache\":\"warm\"}";

/* The canary: always the same text, sent alone with one output token. */
static int canary_source(const void *ctx, uint64_t id, struct st_req_item *item,
                         struct st_buf *scratch)
{
    const struct canary *c = ctx;
    (void)id;
    (void)scratch;
    item->prompt = c->text.data;
    item->prompt_len = c->text.len;
    item->max_tokens = 1;
    item->ignore_eos = 0;
    item->tag_json = canary_tag;
    item->tag_len = sizeof(canary_tag) - 1;
    return 0;
}

struct warm {
    const struct st_workload *wl; /* borrowed */
    uint32_t groups;
    uint32_t slots; /* > 1: per-slot caches, request id pinned to slot id % slots */
};

/* Warm-up item id prefills shared prefix id % groups, on slot id % slots when slots > 1. */
static int warm_source(const void *ctx, uint64_t id, struct st_req_item *item,
                       struct st_buf *scratch)
{
    const struct warm *wm = ctx;
    int rc = st_workload_warm_item(wm->wl, (uint32_t)(id % wm->groups), item, scratch);
    if (wm->slots > 1) {
        item->id_slot = (int64_t)(id % wm->slots);
    }
    if (rc == 0 && !item->tag_json) {
        item->tag_json = warm_tag;
        item->tag_len = sizeof(warm_tag) - 1;
    }
    return rc;
}

/* One short load of n requests from source, quietly; fills res (released by the caller). */
static int small_load(const struct st_cache_cfg *cc, struct st_receipts *receipts,
                      st_req_source_fn source, const void *ctx, uint64_t n, uint32_t conc,
                      struct st_run_result *res, char *err, size_t errlen)
{
    struct st_load_cfg cfg = *cc->load;
    cfg.source = source;
    cfg.source_ctx = ctx;
    cfg.requests = n;
    cfg.concurrency = conc ? conc : 1;
    cfg.rate = 0;
    cfg.max_concurrency = 0;
    cfg.duration_s = 0;
    cfg.warmup = 0;
    cfg.trace_arrivals = 0;
    cfg.workers = 1;
    cfg.save_text = 0;
    cfg.chunk_times = 0;
    cfg.receipts = receipts;
    struct st_cli_watch w = {.cmd = "cache", .progress = 0};
    return st_cli_run_load(&cfg, &w, res, err, errlen);
}

/* Sends the canary once. *cached: its cached tokens (-1 when the server did not say); *ok: it
 * succeeded. */
static int send_canary(const struct st_cache_cfg *cc, struct st_receipts *receipts,
                       const struct canary *can, int64_t *cached, int *ok, int *interrupted,
                       char *why, size_t whylen, char *err, size_t errlen)
{
    struct st_run_result res;
    int rc = small_load(cc, receipts, canary_source, can, 1, 1, &res, err, errlen);
    if (rc) {
        return rc;
    }
    *ok = res.m.ok == 1;
    *cached = st_metrics_cached_known(&res.m) ? (int64_t)res.m.cached_tokens : -1;
    *interrupted = res.interrupted;
    if (!*ok) {
        const char *cls = "unknown";
        for (int e = 1; e < ST_ERR__COUNT; e++) {
            if (res.m.errors[e]) {
                cls = st_err_name((enum st_err)e);
                break;
            }
        }
        snprintf(why, whylen, "the canary request failed (%s; see its receipt)", cls);
    }
    st_run_result_release(&res);
    return 0;
}

/* Fills the canary's text; returns its length in tokens (approximately: 4 bytes a token). */
static uint64_t canary_text(const struct st_cache_cfg *cc, struct canary *can)
{
    uint64_t tokens = cc->canary_tokens ? cc->canary_tokens : CANARY_MIN_TOKENS;
    if (cc->page_tokens && tokens < 8 * cc->page_tokens) {
        tokens = 8 * cc->page_tokens;
    }
    st_buf_init(&can->text);
    st_synth_text(CANARY_SEED ^ cc->seed, 0, (size_t)tokens * 4, &can->text);
    return tokens;
}

/* Flush and verify. Sets state, verify and reason; UNCONTROLLED when the cache is not empty. */
static int flush_and_verify(const struct st_cache_cfg *cc, struct st_receipts *receipts,
                            struct st_cache_prep *p, char *err, size_t errlen)
{
    struct canary can;
    uint64_t can_tokens = canary_text(cc, &can);
    char why[256] = "";
    int ok = 0, intr = 0;
    int64_t c1 = 0;
    int rc = send_canary(cc, receipts, &can, &c1, &ok, &intr, why, sizeof(why), err, errlen);
    if (rc == 0 && ok && c1 >= 0 && (uint64_t)c1 < can_tokens / 2 && !intr) {
        /*
         * Not cached yet (the first point; a few tokens of a chat template shared with another
         * prompt do not count): a repeat must show hits, or nothing can be seen.
         */
        rc = send_canary(cc, receipts, &can, &c1, &ok, &intr, why, sizeof(why), err, errlen);
    }
    if (rc || intr) {
        p->interrupted = intr;
        goto out;
    }
    p->canary_cached_before = ok ? c1 : -1;

    p->flush_tried = 1;
    uint64_t tmo = cc->flush_timeout_ms ? cc->flush_timeout_ms : DEFAULT_FLUSH_TIMEOUT_MS;
    enum st_target_flush_outcome fo = st_target_flush(cc->target, tmo, &p->flush);
    if (fo != ST_TARGET_FLUSHED) {
        p->state = ST_CACHE_UNCONTROLLED;
        snprintf(p->reason, sizeof(p->reason), "flush %s: %s", st_target_flush_name(fo),
                 p->flush.reason[0] ? p->flush.reason : "no reason given");
        goto out;
    }
    if (!ok) {
        p->verify = ST_CACHE_VERIFY_UNVERIFIABLE;
        snprintf(p->reason, sizeof(p->reason), "flushed, not verified: %s", why);
        goto out;
    }
    if (c1 < 0) {
        p->verify = ST_CACHE_VERIFY_UNVERIFIABLE;
        snprintf(p->reason, sizeof(p->reason),
                 "flushed, not verified: the server does not say how many prompt tokens it "
                 "took from its cache (no usage.prompt_tokens_details, no timings)");
        goto out;
    }
    if (c1 == 0) {
        p->verify = ST_CACHE_VERIFY_UNVERIFIABLE;
        snprintf(p->reason, sizeof(p->reason),
                 "flushed, not verified: a repeated canary prompt showed 0 cached tokens (the "
                 "server reports no prefix-cache hits, or caching is off)");
        goto out;
    }
    int64_t c2 = 0;
    rc = send_canary(cc, receipts, &can, &c2, &ok, &intr, why, sizeof(why), err, errlen);
    if (rc || intr) {
        p->interrupted = intr;
        goto out;
    }
    p->canary_cached_after = ok ? c2 : -1;
    if (!ok) {
        p->verify = ST_CACHE_VERIFY_UNVERIFIABLE;
        snprintf(p->reason, sizeof(p->reason), "flushed, not verified: %s", why);
    } else if (c2 < 0) {
        p->verify = ST_CACHE_VERIFY_UNVERIFIABLE;
        snprintf(p->reason, sizeof(p->reason),
                 "flushed, not verified: the canary after the flush did not say how many of its "
                 "tokens were cached");
    } else if (c2 != 0) {
        p->verify = ST_CACHE_VERIFY_FAILED;
        p->state = ST_CACHE_UNCONTROLLED;
        snprintf(p->reason, sizeof(p->reason),
                 "%s answered %ld but the canary still had %lld of its tokens cached after it",
                 p->flush.route, p->flush.status, (long long)c2);
    } else {
        p->verify = ST_CACHE_VERIFY_OK;
        snprintf(p->reason, sizeof(p->reason), "%s: canary %lld -> 0 cached tokens", p->flush.route,
                 (long long)c1);
    }
out:
    st_buf_release(&can.text);
    return rc;
}

int st_cache_prepare(const struct st_cache_cfg *cc, struct st_receipts *receipts,
                     struct st_cache_prep *prep, char *err, size_t errlen)
{
    memset(prep, 0, sizeof(*prep));
    prep->canary_cached_before = -1;
    prep->canary_cached_after = -1;
    prep->state = ST_CACHE_WARM;
    int rc = 0;
    if (cc->flush) {
        prep->state = ST_CACHE_FLUSHED;
        rc = flush_and_verify(cc, receipts, prep, err, errlen);
        if (rc || prep->interrupted) {
            return rc;
        }
    } else {
        snprintf(prep->reason, sizeof(prep->reason), "not flushed (--no-flush)");
    }
    uint32_t groups = cc->wl ? st_workload_prefix_groups(cc->wl) : 0;
    if (!cc->warm || groups == 0) {
        return 0;
    }
    struct st_run_result res;
    uint32_t conc = cc->warm_concurrency ? cc->warm_concurrency : 4;
    uint64_t n = groups;
    uint32_t slots =
        cc->target && cc->target->kind == ST_TARGET_LLAMACPP ? cc->target->total_slots : 0;
    if (slots > 1) {
        /*
         * llama.cpp caches per slot: a prefix warmed once sits in one slot, and a request that
         * lands on another recomputes it all. So max(groups, slots) requests, slots at a time,
         * request i on slot i % slots (id_slot: concurrency alone does not spread them, a
         * request that arrives after another ended takes its slot), cycling through the
         * groups: every slot holds a prefix, each group in slots / groups of them.
         */
        n = groups > slots ? groups : slots;
        conc = slots;
    } else if (conc > groups) {
        conc = groups;
    }
    struct warm wm = {.wl = cc->wl, .groups = groups, .slots = slots};
    rc = small_load(cc, receipts, warm_source, &wm, n, conc, &res, err, errlen);
    if (rc) {
        return rc;
    }
    prep->warm_requests = n;
    prep->warm_slots = slots;
    prep->warm_failed = res.m.failed;
    prep->interrupted = res.interrupted;
    st_run_result_release(&res);
    if (slots > 1 && groups > slots) {
        st_cli_add_reason(prep->reason, sizeof(prep->reason),
                          "the server caches one prompt per slot (%u slots) and the workload has "
                          "%u prefix groups: at most %u of them stay cached at once",
                          slots, groups, slots);
    }
    if (prep->state == ST_CACHE_FLUSHED && prep->warm_failed == 0) {
        prep->state = ST_CACHE_FLUSHED_WARMED;
    } else if (prep->state == ST_CACHE_FLUSHED) {
        /* A prefix whose warm-up failed is not cached: the state must not say warmed. */
        st_cli_add_reason(prep->reason, sizeof(prep->reason),
                          "warm-up: %llu of %llu requests failed, so the shared prefixes are not "
                          "all cached",
                          (unsigned long long)prep->warm_failed,
                          (unsigned long long)prep->warm_requests);
    }
    return 0;
}

void st_cache_scrape(struct st_target *t, struct st_cache_scrape *s)
{
    memset(s, 0, sizeof(*s));
    struct st_prom pm;
    st_prom_init(&pm);
    char err[256];
    if (st_target_metrics(t, &pm, err, sizeof(err)) == 0) {
        st_target_counters_read(&pm, &s->c);
        s->ok = 1;
    }
    st_prom_release(&pm);
}

void st_cache_judge(double target, double tol, uint64_t page_tokens, const struct st_metrics *m,
                    const struct st_cache_scrape *before, const struct st_cache_scrape *after,
                    int interrupted, struct st_cache_judge *out)
{
    memset(out, 0, sizeof(*out));
    out->hit_rate = st_metrics_hit_rate(m); /* NaN when any request did not say */
    out->hit_rate_server = NAN;
    if (before->ok && after->ok) {
        struct st_target_delta d;
        st_target_delta(&before->c, &after->c, &d);
        if ((d.have & ST_TARGET_HAVE_PREFIX) && !d.reset && d.prefix_query_tokens > 0) {
            out->hit_rate_server = d.prefix_hit_rate;
        }
    }
    out->target = target;
    double mean_prompt = m->ok && m->prompt_tokens ? (double)m->prompt_tokens / (double)m->ok : 0;
    out->tolerance = tol + (page_tokens && mean_prompt > 0 ? (double)page_tokens / mean_prompt : 0);
    out->valid = 1;
    if (interrupted) {
        out->valid = 0;
        st_cli_add_reason(out->why, sizeof(out->why), "interrupted");
    }
    if (m->failed) {
        out->valid = 0;
        st_cli_add_reason(out->why, sizeof(out->why), "%llu of %llu requests failed",
                          (unsigned long long)m->failed, (unsigned long long)(m->failed + m->ok));
    }
    if (m->ok == 0) {
        out->valid = 0;
        st_cli_add_reason(out->why, sizeof(out->why), "no request succeeded");
    }
    if (isnan(target)) {
        return;
    }
    double hit = !isnan(out->hit_rate) && m->cached_tokens ? out->hit_rate : out->hit_rate_server;
    if (isnan(hit)) {
        hit = out->hit_rate;
    }
    if (isnan(hit) && out->valid && m->cached_requests < m->ok) {
        /* Nothing wrong was seen, but the hit rate cannot be: unknown, not invalid at 0. */
        out->valid = 0;
        out->unverifiable = 1;
        st_cli_add_reason(
            out->why, sizeof(out->why),
            "unverifiable: %llu of %llu requests said how many prompt tokens were cached "
            "and the server has no prefix-cache counters (target %.4f)",
            (unsigned long long)m->cached_requests, (unsigned long long)m->ok, target);
    } else if (isnan(hit)) {
        out->valid = 0;
        st_cli_add_reason(out->why, sizeof(out->why), "no hit rate measured (target %.4f)", target);
    } else if (fabs(hit - target) > out->tolerance) {
        out->valid = 0;
        st_cli_add_reason(out->why, sizeof(out->why), "hit rate %.4f misses the target %.4f", hit,
                          target);
    }
}

void st_cache_prep_json(const struct st_cache_prep *p, struct st_jw *w)
{
    st_jw_kstr(w, "cache_state", st_cache_state_name(p->state));
    st_jw_kstr(w, "cache_reason", p->reason);
    st_jw_key(w, "flush");
    if (!p->flush_tried) {
        st_jw_null(w);
    } else {
        st_jw_obj_open(w);
        st_jw_kstr(w, "outcome", st_target_flush_name(p->flush.outcome));
        st_jw_ki64(w, "status", p->flush.status);
        st_jw_ku64(w, "attempts", p->flush.attempts);
        st_jw_kstr(w, "route", p->flush.route);
        st_jw_kstr(w, "reason", p->flush.reason);
        st_jw_obj_close(w);
    }
    st_jw_kstr(w, "verify", st_cache_verify_name(p->verify));
    st_jw_key(w, "canary_cached_tokens");
    st_jw_obj_open(w);
    st_jw_key(w, "before_flush");
    if (p->canary_cached_before >= 0) {
        st_jw_i64(w, p->canary_cached_before);
    } else {
        st_jw_null(w);
    }
    st_jw_key(w, "after_flush");
    if (p->canary_cached_after >= 0) {
        st_jw_i64(w, p->canary_cached_after);
    } else {
        st_jw_null(w);
    }
    st_jw_obj_close(w);
    st_jw_key(w, "warm");
    st_jw_obj_open(w);
    st_jw_ku64(w, "requests", p->warm_requests);
    st_jw_ku64(w, "failed", p->warm_failed);
    st_jw_key(w, "slots");
    if (p->warm_slots > 1) {
        st_jw_u64(w, p->warm_slots);
    } else {
        st_jw_null(w);
    }
    st_jw_obj_close(w);
}
