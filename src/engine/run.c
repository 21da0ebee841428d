/*
 * A run: splits the load over worker threads, starts them, reports progress, joins them and
 * merges their results; writes the summary document and reads back what a campaign needs of it
 * (one file for both, so a renamed key fails tests/unit/test_engine_run.c). See run.h.
 */
#include "engine/run.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/xalloc.h"
#include "engine/http.h"
#include "engine/worker.h"

struct st_run {
    const struct st_load_cfg *cfg;
    uint32_t n;
    struct st_worker **w;
    uint64_t t_start;
    char session[48]; /* virtual clock: the session's id, unique per run and process */
};

static uint64_t run_counter;

void st_load_cfg_defaults(struct st_load_cfg *c)
{
    *c = (struct st_load_cfg){.api = ST_API_CHAT,
                              .stream = 1,
                              .include_usage = 1,
                              .concurrency = 1,
                              .arrival = ST_ARRIVAL_POISSON,
                              .sched_seed = 1,
                              .input_len = 128,
                              .output_len = 128,
                              .prompt_seed = 1,
                              .connect_timeout_ms = 10000,
                              .workers = 1,
                              .http = ST_HTTP_1_1,
                              .grace_ms = 5000,
                              .max_event_bytes = 1u << 20,
                              .time_scale = 1.0};
}

/* Share of total for part i of n, the first (total % n) parts getting one more. */
static uint64_t share(uint64_t total, uint32_t n, uint32_t i)
{
    return total / n + (i < total % n ? 1 : 0);
}

int st_run_start(struct st_run **out, const struct st_load_cfg *cfg, char *err, size_t errlen)
{
    st_engine_init();
    if (cfg->workers == 0) {
        snprintf(err, errlen, "workers must be at least 1");
        return ST_EUSAGE;
    }
    if (cfg->rate <= 0 && cfg->concurrency == 0) {
        snprintf(err, errlen, "concurrency must be at least 1");
        return ST_EUSAGE;
    }
    if (cfg->requests == 0 && cfg->duration_s <= 0) {
        snprintf(err, errlen, "give a request count or a duration");
        return ST_EUSAGE;
    }
    uint32_t n = cfg->workers;
    if (cfg->rate <= 0 && n > cfg->concurrency) {
        n = cfg->concurrency; /* a worker with no slot would have nothing to do */
    }
    struct st_run *r = st_xcalloc(1, sizeof(*r));
    r->cfg = cfg;
    r->n = n;
    r->w = st_xcalloc(n, sizeof(*r->w));
    r->t_start = st_clock_mono_ns();
    snprintf(r->session, sizeof(r->session), "st-%ld-%llx-%llu", (long)getpid(),
             (unsigned long long)r->t_start,
             (unsigned long long)__atomic_add_fetch(&run_counter, 1, __ATOMIC_RELAXED));
    uint32_t streams = n;
    if (cfg->rate <= 0) {
        streams = cfg->concurrency;
        if (cfg->requests && cfg->requests < streams) {
            streams = (uint32_t)cfg->requests; /* a slot with no request never declares */
        }
    }
    uint32_t slot0 = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct st_worker_share sh = {.index = i,
                                     .workers = n,
                                     .t0 = r->t_start,
                                     .session = r->session,
                                     .slot0 = slot0,
                                     .streams = streams};
        if (cfg->rate > 0) {
            sh.slots = cfg->max_concurrency ? (uint32_t)share(cfg->max_concurrency, n, i) : 0;
            if (cfg->max_concurrency && sh.slots == 0) {
                sh.slots = 1;
            }
            sh.quota = UINT64_MAX;
        } else {
            sh.slots = (uint32_t)share(cfg->concurrency, n, i);
            sh.quota = cfg->requests ? share(cfg->requests, n, i) : UINT64_MAX;
            slot0 += sh.slots;
        }
        r->w[i] = st_worker_new(cfg, &sh, err, errlen);
        if (!r->w[i]) {
            for (uint32_t j = 0; j < i; j++) {
                st_worker_free(r->w[j]);
            }
            free(r->w);
            free(r);
            return -ENOMEM;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        int rc = st_worker_spawn(r->w[i]);
        if (rc) {
            snprintf(err, errlen, "cannot start worker thread %u: %s", i, st_strerror(rc));
            for (uint32_t j = 0; j < i; j++) {
                st_worker_stop(r->w[j], 1);
                st_worker_join(r->w[j]);
            }
            for (uint32_t j = 0; j < n; j++) {
                st_worker_free(r->w[j]);
            }
            free(r->w);
            free(r);
            return rc;
        }
    }
    *out = r;
    return 0;
}

void st_run_stop(struct st_run *r, int immediate)
{
    for (uint32_t i = 0; i < r->n; i++) {
        st_worker_stop(r->w[i], immediate);
    }
}

int st_run_progress(struct st_run *r, struct st_run_progress *p)
{
    memset(p, 0, sizeof(*p));
    int all = 1;
    for (uint32_t i = 0; i < r->n; i++) {
        st_worker_progress(r->w[i], p);
        if (!st_worker_finished(r->w[i])) {
            all = 0;
        }
    }
    return all;
}

void st_run_finish(struct st_run *r, struct st_run_result *res)
{
    memset(res, 0, sizeof(*res));
    st_metrics_init(&res->m);
    res->t_start = r->t_start;
    res->workers = r->n;
    for (uint32_t i = 0; i < r->n; i++) {
        st_worker_join(r->w[i]);
    }
    res->t_stop = st_clock_mono_ns();
    for (uint32_t i = 0; i < r->n; i++) {
        st_worker_collect(r->w[i], res);
        st_worker_free(r->w[i]);
    }
    free(r->w);
    free(r);
}

void st_run_result_release(struct st_run_result *res)
{
    st_metrics_release(&res->m);
}

static const char *api_name(enum st_api a)
{
    return a == ST_API_COMPLETIONS ? "completions" : "chat";
}

static const char *http_name(enum st_http h)
{
    switch (h) {
    case ST_HTTP_2:
        return "2";
    case ST_HTTP_H2C:
        return "h2c";
    default:
        return "1.1";
    }
}

static void write_config(struct st_jw *w, const struct st_load_cfg *c, uint32_t workers)
{
    st_jw_key(w, "config");
    st_jw_obj_open(w);
    st_jw_kstr(w, "url", c->base_url);
    st_jw_kstr(w, "api", api_name(c->api));
    st_jw_key(w, "model");
    if (c->model) {
        st_jw_str(w, c->model);
    } else {
        st_jw_null(w);
    }
    st_jw_kbool(w, "stream", c->stream);
    if (c->rate > 0) {
        st_jw_kstr(w, "load", "open");
        st_jw_kf64(w, "rate", c->rate);
        st_jw_kstr(w, "arrival", c->arrival == ST_ARRIVAL_CONSTANT ? "constant" : "poisson");
        st_jw_ku64(w, "seed", c->sched_seed);
        st_jw_ku64(w, "max_concurrency", c->max_concurrency);
    } else {
        st_jw_kstr(w, "load", "closed");
        st_jw_ku64(w, "concurrency", c->concurrency);
    }
    st_jw_ku64(w, "requests", c->requests);
    st_jw_kf64(w, "duration_s", c->duration_s);
    st_jw_ku64(w, "warmup", c->warmup);
    st_jw_ki64(w, "input_len", c->input_len);
    st_jw_ki64(w, "output_len", c->output_len);
    st_jw_kbool(w, "ignore_eos", c->ignore_eos);
    st_jw_ku64(w, "workers", workers);
    st_jw_kstr(w, "http", http_name(c->http));
    st_jw_kbool(w, "insecure", c->insecure);
    st_jw_obj_close(w);
}

void st_run_summary_json(const struct st_load_cfg *cfg, const struct st_run_result *res,
                         const char *receipts_path, struct st_buf *out)
{
    const struct st_metrics *m = &res->m;
    /* Against our simulator every time is its virtual time, from its stamps (docs/metrics.md);
     * time_scale is only how fast it was allowed to run. */
    double ts = cfg->time_scale > 0 ? cfg->time_scale : 1.0;
    struct st_jw w;
    st_jw_init(&w, out);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "tool", "servetune");
    st_jw_kstr(&w, "kind", "bench");
    st_jw_kbool(&w, "interrupted", res->interrupted);
    st_jw_kf64(&w, "time_scale", ts);
    st_jw_kstr(&w, "times", cfg->virtual_clock ? "virtual" : "real");
    write_config(&w, cfg, res->workers);
    if (cfg->virtual_clock) {
        st_sim_clock_json(&w, &m->clock);
    }

    st_jw_key(&w, "requests");
    st_jw_obj_open(&w);
    st_jw_ku64(&w, "issued", res->issued);
    st_jw_ku64(&w, "completed", res->done);
    st_jw_ku64(&w, "ok", m->ok);
    st_jw_ku64(&w, "failed", m->failed);
    st_jw_ku64(&w, "warmup", m->warmup);
    st_jw_ku64(&w, "not_sent", res->not_sent);
    st_jw_ku64(&w, "tokens_estimated", m->estimated);
    st_err_counts_json(&w, "errors", m->errors);
    st_jw_obj_close(&w);

    st_metrics_write_latency(&w, "ttft_ms", &m->ttft, 1.0);
    st_metrics_write_latency(&w, "itl_ms", &m->itl, 1.0);
    st_metrics_write_latency(&w, "icl_ms", &m->icl, 1.0);
    st_metrics_write_latency(&w, "tpot_ms", &m->tpot, 1.0);
    st_metrics_write_latency(&w, "e2e_ms", &m->e2e, 1.0);
    st_metrics_write_latency(&w, "queue_ms", &m->queue, 1.0);
    /* decode is stored in milli-tokens/s; the latency writer divides by 1e6, so scale back. */
    st_jw_key(&w, "decode_tokens_per_s");
    st_jw_obj_open(&w);
    st_jw_ku64(&w, "count", m->decode.count);
    if (m->decode.count) {
        double k = 1e3;
        st_jw_kf64(&w, "mean", st_hist_mean(&m->decode) / k);
        st_jw_kf64(&w, "p50", (double)st_hist_quantile(&m->decode, 0.5) / k);
        st_jw_kf64(&w, "p10", (double)st_hist_quantile(&m->decode, 0.1) / k);
        st_jw_kf64(&w, "min", (double)m->decode.min / k);
        st_jw_kf64(&w, "max", (double)m->decode.max / k);
    }
    st_jw_obj_close(&w);

    double window_s;
    uint64_t window_tokens;
    st_metrics_window(m, &window_s, &window_tokens);
    st_jw_ku64(&w, "output_tokens", m->output_tokens);
    st_jw_ku64(&w, "prompt_tokens", m->prompt_tokens);
    /* Unknown is not zero: null unless every measured ok request said (docs/metrics.md). */
    st_jw_key(&w, "cached_tokens");
    if (st_metrics_cached_known(m)) {
        st_jw_u64(&w, m->cached_tokens);
    } else {
        st_jw_null(&w);
    }
    st_jw_ku64(&w, "cached_tokens_requests", m->cached_requests);
    st_jw_knstr(&w, "cached_tokens_from", st_metrics_cached_from(m));
    st_jw_kf64(&w, "duration_s", window_s);
    st_jw_ku64(&w, "window_output_tokens", window_tokens);
    st_jw_kf64(&w, "output_tokens_per_s", window_s > 0 ? (double)window_tokens / window_s : 0);
    st_jw_kf64(&w, "requests_per_s", window_s > 0 ? (double)m->ok / window_s : 0);
    st_jw_kf64(&w, "wall_s", (double)(res->t_stop - res->t_start) / 1e9);

    st_jw_key(&w, "client");
    st_jw_obj_open(&w);
    st_jw_ku64(&w, "workers", res->workers);
    st_jw_kf64(&w, "cpu_s", (double)res->cpu_ns / 1e9);
    /* The CPU of the whole run over every token it received, warm-up included (docs/metrics.md). */
    uint64_t all_tokens = m->output_tokens + m->warm_tokens;
    st_jw_key(&w, "cpu_us_per_token");
    if (all_tokens) {
        st_jw_f64(&w, (double)res->cpu_ns / 1e3 / (double)all_tokens);
    } else {
        st_jw_null(&w);
    }
    st_jw_obj_close(&w);

    st_jw_key(&w, "receipts");
    st_jw_obj_open(&w);
    st_jw_key(&w, "path");
    if (receipts_path) {
        st_jw_str(&w, receipts_path);
    } else {
        st_jw_null(&w);
    }
    st_jw_ku64(&w, "records", cfg->receipts ? cfg->receipts->records : 0);
    st_jw_key(&w, "error");
    if (res->receipts_error) {
        st_jw_str(&w, st_strerror(res->receipts_error));
    } else {
        st_jw_null(&w);
    }
    st_jw_obj_close(&w);
    st_jw_obj_close(&w);
    st_buf_putc(out, '\n');
}

int st_run_summary_read(const struct st_json *d, struct st_run_digest *out, char *err,
                        size_t errlen)
{
    int ok = 1;
    int req = st_json_get(d, 0, "requests");
    if (st_json_type(d, req) != ST_JSON_OBJECT) {
        st_errf(err, errlen, "bench JSON: no \"requests\" object");
        return ST_EPARSE;
    }
    out->ok = st_json_num(d, req, "ok", &ok);
    out->failed = st_json_num(d, req, "failed", &ok);
    out->output_tokens_per_s = st_json_num(d, 0, "output_tokens_per_s", &ok);
    out->duration_s = st_json_num(d, 0, "duration_s", NULL);
    if (!ok || isnan(out->ok) || isnan(out->failed)) {
        st_errf(err, errlen,
                "bench JSON: requests.ok, requests.failed or output_tokens_per_s "
                "missing or not a number");
        return ST_EPARSE;
    }
    return 0;
}
