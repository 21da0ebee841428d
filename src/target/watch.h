/*
 * Watchers while an arm's stages run: scrapes the server's /metrics at an interval (speculative
 * acceptance = accepted / draft tokens, acceptance length, prefix-cache hits, preemptions, KV
 * usage, waiting requests, per dialect: src/target's counters), the GPUs through
 * `nvidia-smi --query-gpu=index,memory.used,memory.total,utilization.gpu,temperature.gpu
 * --format=csv,noheader,nounits` when that binary exists, and the host's OOM kills
 * (/proc/vmstat oom_kill). Every sample goes as one JSON line to DIR/watch.jsonl; a summary
 * gives the server.* figures the rules can use (server.spec_accept_rate, server.gpu_mem_bytes).
 *
 * Pure parsers (nvidia-smi CSV, vmstat) are exported for tests and fuzzing.
 * Thread context: the runner's (main) thread.
 */
#ifndef ST_TARGET_WATCH_H
#define ST_TARGET_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/status.h"

#define ST_WATCH_MAX_GPUS 16

struct st_watch_cfg {
    const char *url;        /* the server's base URL (GET URL/metrics) */
    const char *dir;        /* where watch.jsonl goes */
    const char *nvidia_smi; /* path; NULL: "nvidia-smi" looked up in PATH; "" disables */
    const char *vmstat;     /* NULL: /proc/vmstat ("" disables) */
    double interval_s;      /* st_watch_tick samples at most this often (0: 5 s) */
};

struct st_watch_gpu {
    uint32_t index;
    uint64_t mem_used_bytes, mem_total_bytes;
    double util_pct, temp_c;
};

struct st_watch_summary {
    uint32_t samples;           /* scrapes that answered */
    uint32_t scrape_errors;     /* scrapes that did not */
    double spec_accept_rate;    /* accepted / draft tokens over the watch; -1 unknown */
    double spec_accept_len;     /* mean acceptance length; -1 unknown */
    double prefix_hit_rate;     /* -1 unknown */
    int64_t preemptions;        /* counter delta; -1 when the server has no such counter */
    double kv_usage_max;        /* 0..1; -1 unknown */
    uint64_t waiting_max;       /* requests waiting, peak */
    uint64_t gpu_mem_max_bytes; /* peak over GPUs and samples; 0 unknown */
    double gpu_temp_max_c;      /* -1 unknown */
    int64_t oom_kills;          /* host oom_kill delta since st_watch_new; -1 unknown (no
                                 * /proc/vmstat oom_kill line) */
    uint32_t n_gpus;
};

struct st_watch; /* opaque */

/* Starts a watch (reads the first counters: /metrics, vmstat). Returns 0 or an error (err);
 * a server without /metrics or a host without nvidia-smi is not an error: those parts report
 * unknown. */
int st_watch_new(const struct st_watch_cfg *cfg, struct st_watch **out, char *err,
                 size_t errlen) ST_WUR;
/* Samples when interval_s has passed since the last sample (now_ns: CLOCK_MONOTONIC), else
 * returns at once. Returns 1 when the host's oom_kill counter rose since the watch began (the
 * caller decides), else 0. */
int st_watch_tick(struct st_watch *w, uint64_t now_ns);
/* Takes a last sample and fills *s. */
void st_watch_finish(struct st_watch *w, struct st_watch_summary *s);
/* Appends the summary as a JSON object. */
void st_watch_summary_json(const struct st_watch_summary *s, struct st_buf *out);
void st_watch_free(struct st_watch *w);

/* Pure: parses nvidia-smi's CSV (the query above, noheader, nounits); returns GPUs read (up to
 * max), or -1 for a malformed line. */
int st_watch_parse_nvsmi(const char *text, size_t len, struct st_watch_gpu *out, size_t max);
/* Pure: the oom_kill counter of /proc/vmstat's text; 0 with *v set, or -1 when absent. */
int st_watch_parse_vmstat(const char *text, size_t len, uint64_t *v);

#endif
