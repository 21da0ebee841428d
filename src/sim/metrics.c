/*
 * The model-mode Prometheus exposition, per dialect. Series names, types and HELP texts follow
 * shared/reference/serving-apis.md section 5 and the llama.cpp transcript in
 * shared/reference/wire/llamacpp/metrics.txt. Python servers (vLLM, SGLang) use prometheus_client,
 * which names a counter's HELP/TYPE lines with the _total suffix and prints integers as "5.0";
 * llama.cpp prints its own text with plain numbers and no labels. Pure.
 */
#include "sim/metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/dialect.h"

/* vLLM's TTFT buckets (vllm/v1/metrics/loggers.py). */
static const double vllm_ttft[] = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                   0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                   20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
/* SGLang's default TTFT buckets (python/sglang/srt/metrics/collector.py). */
static const double sglang_ttft[] = {0.1, 0.2,  0.4,  0.6,  0.8,  1.0,  2.0,   4.0,   6.0,
                                     8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0};

void st_sim_hist_init_ttft(struct st_sim_hist *h, enum st_dialect d)
{
    const double *le = d == ST_DIALECT_SGLANG ? sglang_ttft : vllm_ttft;
    size_t n = d == ST_DIALECT_SGLANG ? sizeof(sglang_ttft) / sizeof(sglang_ttft[0])
                                      : sizeof(vllm_ttft) / sizeof(vllm_ttft[0]);
    memset(h, 0, sizeof(*h));
    h->n = (uint32_t)n;
    memcpy(h->le, le, n * sizeof(*le));
}

void st_sim_hist_observe(struct st_sim_hist *h, double v)
{
    uint32_t i = 0;
    while (i < h->n && v > h->le[i]) {
        i++;
    }
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

double st_sim_metrics_accept_length(const struct st_sim_metrics *m)
{
    uint64_t drafts = m->bs.spec_drafts - m->spec_drafts_at_flush;
    uint64_t acc = m->bs.spec_accepted_tokens - m->spec_accepted_at_flush;
    return drafts ? 1.0 + (double)acc / (double)drafts : 1.0;
}

/* ---- text helpers ---- */

struct expo {
    struct st_buf *out;
    int python;        /* prometheus_client number style */
    struct st_buf lab; /* the common labels, rendered: engine="0",model_name="m" (no braces) */
    int cached;        /* the prefix-cache counters are served (engine.cached_report usage) */
};

/* A prefix-cache counter: left out when the server models one that reports none. */
static void cached_metric(struct expo *e, const char *name, const char *type, const char *help,
                          double v);

/* A number as the server prints it: Python repr of a float, or plain (llama.cpp). */
static void put_num(struct expo *e, double v)
{
    if (isinf(v)) {
        st_buf_puts(e->out, v > 0 ? "+Inf" : "-Inf");
    } else if (isnan(v)) {
        st_buf_puts(e->out, "NaN");
    } else if (v == floor(v) && fabs(v) < 1e15) {
        st_buf_printf(e->out, e->python ? "%.1f" : "%.0f", v);
    } else {
        /* The shortest text that reads back to v, as Python's repr. */
        char tmp[40];
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(tmp, sizeof(tmp), "%.*g", prec, v);
            if (strtod(tmp, NULL) == v) {
                break;
            }
        }
        st_buf_puts(e->out, tmp);
    }
}

static void family(struct expo *e, const char *name, const char *type, const char *help)
{
    st_buf_printf(e->out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One sample: name{common labels[,extra]} value. extra may be NULL. */
static void sample(struct expo *e, const char *name, const char *extra, double v)
{
    st_buf_puts(e->out, name);
    if (e->lab.len || extra) {
        st_buf_putc(e->out, '{');
        if (extra) {
            st_buf_puts(e->out, extra);
        }
        if (extra && e->lab.len) {
            st_buf_putc(e->out, ',');
        }
        st_buf_append(e->out, e->lab.data, e->lab.len);
        st_buf_putc(e->out, '}');
    }
    st_buf_putc(e->out, ' ');
    put_num(e, v);
    st_buf_putc(e->out, '\n');
}

static void metric(struct expo *e, const char *name, const char *type, const char *help, double v)
{
    family(e, name, type, help);
    sample(e, name, NULL, v);
}

static void cached_metric(struct expo *e, const char *name, const char *type, const char *help,
                          double v)
{
    if (e->cached) {
        metric(e, name, type, help, v);
    }
}

/* Appends s as a label value: backslash, quote and newline escaped. */
static void put_label_value(struct st_buf *b, const char *s)
{
    st_buf_putc(b, '"');
    for (; *s; s++) {
        if (*s == '\\' || *s == '"') {
            st_buf_putc(b, '\\');
            st_buf_putc(b, *s);
        } else if (*s == '\n') {
            st_buf_puts(b, "\\n");
        } else {
            st_buf_putc(b, *s);
        }
    }
    st_buf_putc(b, '"');
}

/* A histogram in prometheus_client order: buckets (cumulative), _count, _sum. */
static void histogram(struct expo *e, const char *name, const char *help,
                      const struct st_sim_hist *h)
{
    char key[160], le[64];
    family(e, name, "histogram", help);
    uint64_t cum = 0;
    snprintf(key, sizeof(key), "%s_bucket", name);
    for (uint32_t i = 0; i <= h->n; i++) {
        cum += h->counts[i];
        if (i == h->n) {
            snprintf(le, sizeof(le), "le=\"+Inf\"");
        } else if (h->le[i] == floor(h->le[i])) {
            snprintf(le, sizeof(le), "le=\"%.1f\"", h->le[i]);
        } else {
            snprintf(le, sizeof(le), "le=\"%g\"", h->le[i]);
        }
        sample(e, key, le, (double)cum);
    }
    snprintf(key, sizeof(key), "%s_count", name);
    sample(e, key, NULL, (double)h->count);
    snprintf(key, sizeof(key), "%s_sum", name);
    sample(e, key, NULL, h->sum);
}

static double usage_frac(const struct st_batch_stats *bs)
{
    return bs->kv_total_tokens ? (double)bs->kv_used_tokens / (double)bs->kv_total_tokens : 0.0;
}

/* ---- vLLM ---- */

static void render_vllm(struct expo *e, const struct st_profile *p, const struct st_mem_plan *plan,
                        const struct st_sim_metrics *m)
{
    const struct st_batch_stats *bs = &m->bs;
    metric(e, "vllm:num_requests_running", "gauge",
           "Number of requests in model execution batches.", bs->running);
    metric(e, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
           bs->waiting);
    metric(e, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
           usage_frac(bs));
    cached_metric(e, "vllm:prefix_cache_queries_total", "counter",
                  "Prefix cache queries, in terms of number of queried tokens.",
                  (double)bs->prefix_query_tokens);
    cached_metric(e, "vllm:prefix_cache_hits_total", "counter",
                  "Prefix cache hits, in terms of number of cached tokens.",
                  (double)bs->prefix_hit_tokens);
    metric(e, "vllm:num_preemptions_total", "counter",
           "Cumulative number of preemption from the engine.", (double)bs->preemptions);
    metric(e, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
           (double)bs->prefix_query_tokens);
    metric(e, "vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
           (double)bs->generation_tokens);
    family(e, "vllm:request_success_total", "counter", "Count of successfully processed requests.");
    sample(e, "vllm:request_success_total", "finished_reason=\"length\"",
           (double)m->requests_finished);
    histogram(e, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
              &m->ttft);
    if (p->engine.spec_method != ST_SPEC_NONE && p->engine.spec_steps > 0) {
        metric(e, "vllm:spec_decode_num_drafts_total", "counter", "Number of spec decoding drafts.",
               (double)bs->spec_drafts);
        metric(e, "vllm:spec_decode_num_draft_tokens_total", "counter", "Number of draft tokens.",
               (double)bs->spec_draft_tokens);
        metric(e, "vllm:spec_decode_num_accepted_tokens_total", "counter",
               "Number of accepted tokens.", (double)bs->spec_accepted_tokens);
        family(e, "vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter",
               "Accepted tokens per draft position.");
        uint32_t k =
            p->engine.spec_steps < ST_SPEC_MAX_STEPS ? p->engine.spec_steps : ST_SPEC_MAX_STEPS;
        for (uint32_t i = 0; i < k; i++) {
            char pos[32];
            snprintf(pos, sizeof(pos), "position=\"%u\"", i);
            sample(e, "vllm:spec_decode_num_accepted_tokens_per_pos_total", pos,
                   (double)bs->spec_accepted_per_pos[i]);
        }
    }
    /* An info metric: every CacheConfig field as a string label, value 1. */
    struct st_buf l;
    st_buf_init(&l);
    st_buf_printf(&l,
                  "block_size=\"%u\",cache_dtype=\"%s\",enable_prefix_caching=\"%s\","
                  "gpu_memory_utilization=\"%g\",num_cpu_blocks=\"0\",num_gpu_blocks=\"%llu\"",
                  p->engine.page_size, p->engine.kv_dtype_bytes < 2 ? "fp8" : "auto",
                  p->engine.prefix_caching ? "True" : "False", p->engine.mem_fraction,
                  (unsigned long long)plan->kv_pool_blocks);
    family(e, "vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig");
    sample(e, "vllm:cache_config_info", l.data, 1.0);
    st_buf_release(&l);
}

/* ---- SGLang ---- */

static void render_sglang(struct expo *e, const struct st_sim_metrics *m)
{
    const struct st_batch_stats *bs = &m->bs;
    double hit = bs->prefix_query_tokens
                     ? (double)bs->prefix_hit_tokens / (double)bs->prefix_query_tokens
                     : 0.0;
    metric(e, "sglang:num_running_reqs", "gauge", "The number of running requests.", bs->running);
    metric(e, "sglang:num_used_tokens", "gauge", "The number of used tokens.",
           (double)bs->kv_used_tokens);
    metric(e, "sglang:token_usage", "gauge", "The token usage.", usage_frac(bs));
    metric(e, "sglang:gen_throughput", "gauge", "The generation throughput (token/s).",
           m->gen_throughput);
    metric(e, "sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue.",
           bs->waiting);
    metric(e, "sglang:num_retracted_reqs", "gauge", "The number of retracted requests.",
           (double)bs->preemptions);
    cached_metric(e, "sglang:cache_hit_rate", "gauge", "The prefix cache hit rate.", hit);
    metric(e, "sglang:spec_accept_length", "gauge",
           "The average acceptance length of speculative decoding.",
           st_sim_metrics_accept_length(m));
    metric(e, "sglang:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
           (double)bs->prefix_query_tokens);
    metric(e, "sglang:generation_tokens_total", "counter", "Number of generation tokens processed.",
           (double)bs->generation_tokens);
    cached_metric(e, "sglang:cached_tokens_total", "counter", "Number of cached prompt tokens.",
                  (double)bs->prefix_hit_tokens);
    metric(e, "sglang:num_requests_total", "counter", "Number of requests processed.",
           (double)m->requests_finished);
    metric(e, "sglang:num_aborted_requests_total", "counter", "Number of requests aborted.",
           (double)m->requests_aborted);
    histogram(e, "sglang:time_to_first_token_seconds",
              "Histogram of time to first token in seconds.", &m->ttft);
}

/* ---- llama.cpp ---- */

static void render_llamacpp(struct expo *e, const struct st_sim_metrics *m)
{
    const struct st_batch_stats *bs = &m->bs;
    double pps = m->prompt_seconds > 0 ? (double)m->prompt_tokens_done / m->prompt_seconds : 0;
    double tps =
        m->predicted_seconds > 0 ? (double)m->predicted_tokens_done / m->predicted_seconds : 0;
    metric(e, "llamacpp:prompt_tokens_total", "counter",
           "Number of prompt tokens processed, excluding cached tokens",
           (double)(bs->prefix_query_tokens - bs->prefix_hit_tokens));
    cached_metric(e, "llamacpp:prompt_tokens_cached_total", "counter",
                  "Number of prompt tokens reused from the cache", (double)bs->prefix_hit_tokens);
    metric(e, "llamacpp:prompt_seconds_total", "counter", "Total time spent processing prompts",
           m->prompt_seconds);
    metric(e, "llamacpp:tokens_predicted_total", "counter", "Number of generation tokens processed",
           (double)bs->generation_tokens);
    metric(e, "llamacpp:tokens_predicted_seconds_total", "counter",
           "Total time spent generating tokens", m->predicted_seconds);
    metric(e, "llamacpp:n_decode_total", "counter",
           "Total number of llama_decode() calls, excluding speculative decoding and multimodal "
           "decoding",
           (double)bs->steps);
    metric(e, "llamacpp:n_tokens_max", "counter",
           "Largest observed sequence length (prompt + generation)", (double)m->n_tokens_max);
    metric(e, "llamacpp:spec_decode_num_draft_tokens_total", "counter",
           "Speculative: Total draft tokens generated", (double)bs->spec_draft_tokens);
    metric(e, "llamacpp:spec_decode_num_accepted_tokens_total", "counter",
           "Speculative: Total draft tokens accepted by the target model",
           (double)bs->spec_accepted_tokens);
    metric(e, "llamacpp:spec_decode_num_drafts_total", "counter",
           "Speculative: Total speculative decoding verification steps", (double)bs->spec_drafts);
    metric(e, "llamacpp:prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s",
           pps);
    metric(e, "llamacpp:predicted_tokens_seconds", "gauge",
           "Average generation throughput in tokens/s", tps);
    metric(e, "llamacpp:requests_processing", "gauge", "Number of requests processing",
           bs->running);
    metric(e, "llamacpp:requests_deferred", "gauge", "Number of requests deferred", bs->waiting);
    metric(e, "llamacpp:n_busy_slots_per_decode", "gauge",
           "Average number of busy slots per llama_decode() call",
           bs->steps ? (double)m->busy_slot_steps / (double)bs->steps : 0.0);
}

/* ---- the simulator's own clock, in every dialect ---- */

static void render_clock(struct expo *e, const struct st_sim_metrics *m)
{
    st_buf_clear(&e->lab);
    metric(e, "servetune_sim_speed", "gauge",
           "Virtual seconds per real second the simulator paces at; 0: unpaced (max)", m->speed);
    metric(e, "servetune_sim_clock_events_total", "counter",
           "Engine step ends and request arrivals processed", (double)m->clock_events);
    metric(e, "servetune_sim_clock_lag_max_seconds", "gauge",
           "Most real time an event was processed after its paced time", m->lag_max_ns / 1e9);
    metric(e, "servetune_sim_clock_lag_events_total", "counter",
           "Events processed more than 1 ms of real time after their paced time",
           (double)m->lag_events);
    metric(e, "servetune_sim_late_arrivals_total", "counter",
           "Declared requests placed after their declared virtual time", (double)m->late_arrivals);
    metric(e, "servetune_sim_late_max_seconds", "gauge",
           "Most virtual time a declared request was placed after its declared time",
           m->late_max_ns / 1e9);
    metric(e, "servetune_sim_expired_streams_total", "counter",
           "Declared streams given up on after 30 s of real time without their next request",
           (double)m->expired_streams);
    metric(e, "servetune_sim_parked_total", "counter",
           "Declared requests received before an earlier one of their stream (X-Sim-Seq), placed "
           "after it",
           (double)m->parked);
    metric(e, "servetune_sim_sessions", "gauge", "Declared sessions alive", m->sessions);
}

void st_sim_metrics_render(struct st_buf *out, const struct st_profile *p,
                           const struct st_mem_plan *plan, const char *model,
                           const struct st_sim_metrics *m)
{
    struct expo e = {.out = out,
                     .python = p->engine.dialect != ST_DIALECT_LLAMACPP,
                     .cached = p->engine.cached_report != ST_CACHED_REPORT_EVALUATED &&
                               p->engine.cached_report != ST_CACHED_REPORT_NONE};
    st_buf_init(&e.lab);
    /* The Python engines label every series with the model; llama.cpp labels none. */
    if (e.python) {
        st_buf_puts(&e.lab, st_sim_dialect_pick(p->engine.dialect,
                                                "engine=\"0\",model_name=", "model_name=", NULL));
        put_label_value(&e.lab, model);
    }
    if (p->engine.dialect == ST_DIALECT_SGLANG) {
        render_sglang(&e, m);
    } else if (p->engine.dialect == ST_DIALECT_LLAMACPP) {
        render_llamacpp(&e, m);
    } else {
        render_vllm(&e, p, plan, m);
    }
    render_clock(&e, m);
    st_buf_release(&e.lab);
}
