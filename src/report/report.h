/*
 * Campaign reports, made from an audit archive's summary.json alone (so `servetune report DIR`
 * works on any archive, copied anywhere): report.md with tables shaped like the seeds' and
 * report.html, one self-contained file (inline CSS and SVG, no script, no external reference)
 * with charts: bars with min-max whiskers per metric and arm, throughput vs concurrency per arm,
 * TTFT distributions, KV capacity. And the drift check of `--compare-with`: this campaign's
 * baseline against an earlier one's.
 *
 * summary.json (schema "servetune.campaign.summary/1", written by the runner; every field below
 * is present, arrays may be empty):
 * {
 *   "schema": "servetune.campaign.summary/1",
 *   "plan": {"name": S, "hash": HEX64, "file": "plan.yaml", "noise": F, "alpha": F},
 *   "statistics": {"test": "welch_t_log", "effect": S, "sequential": S, "correction": S,
 *                  "alpha": F, "margin": F, "equivalence_confidence": F, "family": [N, N]},
 *   "complete": B,                 // every unit ran and the decision was made
 *   "chosen": S,                   // the arm that is the configuration at the end ("baseline")
 *   "restored": B,                 // final-state.json proved the restore
 *   "stages": [{"name": "screening"|"full", "arms": [S...]}],       // arms run, in order
 *   "arms": [{
 *       "name": S,                  // "baseline" first
 *       "verdict": "baseline"|"promote"|"reject"|"inconclusive",    // the last stage's
 *       "reasons": [S...],          // one per stage decided, "screening: ..." / "full: ..."
 *       "on": S|null,               // on_best_of arms: the arm they ran on
 *       "params": {NAME: S...},     // the full parameter set, values as YAML text
 *       "changed": {NAME: S...},    // what differs from the baseline
 *       "kv_capacity_tokens": N|null, "max_context_tokens": N|null,
 *       "failure": null | {"kind": "oom"|"exit"|"health"|"start"|"config"|"operator"|"step",
 *                          "stage": S, "step": S|null, "detail": S, "evidence": PATH},
 *       "gates": [{"stage": S, "name": S, "passed": B, "detail": S|null}],
 *       "decisions": [{"stage": S, "verdict": S, "reason": S, "composite": F,
 *                      "more": B, "equivalent": B, "single": B,
 *                      "comparisons": [{"metric": S, "kind": "ranked"|"guard", "finding": S,
 *                          "n": N, "n_arm": N, "n_base": N, "min_n": N, "max_n": N,
 *                          "single": B, "aggregate": S, "base": F, "arm": F, "rel": F,
 *                          "threshold": F, "lo": F, "hi": F, "confidence": F,
 *                          "equivalence_lo": F, "equivalence_hi": F, "p_better": F,
 *                          "p_worse": F, "q_better": F, "q_worse": F, "holm_better": F|null,
 *                          "holm_worse": F, "cv_base": F, "cv_arm": F, "needed_n": N}]}]
 *   }],
 *   "metrics": [{"stage": S, "arm": S, "metric": "STEP.METRIC@POINT", "values": [F...],
 *                "agg": F, "min": F, "max": F, "n": N,
 *                "median": F, "mean": F, "mad": F, "cv": F,
 *                "units": [S...]}],  // journal unit ids the values came from (traceability)
 *   "ttft": [{"stage": S, "arm": S, "step": S, "values_s": [F...]}],  // per request, <= 2000
 *   "compare": null | {"with": PATH, "plan_hash": HEX64, "drift": [{"metric": S, "this": F,
 *                      "then": F, "rel": F, "beyond": B}], "drifted": B}
 * }
 * "statistics", plan.alpha, the decisions' "more" .. "comparisons" and the metrics' "median" ..
 * "cv" are written since the statistical rules (docs/metrics.md defines them); the reader takes
 * archives without them (the report then has no Comparisons section). Numbers that are not
 * finite are written null. A drift entry may also carry "stage": S (st_report_compare writes it: a
 * step id can be in both stages); "rel" is null when the earlier value was 0 and this one is not
 * (infinite).
 *
 * Thread context: any; pure apart from the file functions.
 */
#ifndef ST_REPORT_REPORT_H
#define ST_REPORT_REPORT_H

#include <stddef.h>

#include "base/buf.h"
#include "base/status.h"

/* Pure: the Markdown report of summary JSON text[0..len), appended to out. Returns 0, or
 * ST_EPARSE with a message naming the field when the summary is not one (err). */
int st_report_md(const char *summary, size_t len, struct st_buf *out, char *err,
                 size_t errlen) ST_WUR;
/*
 * Pure: the one-file HTML report. Same contract. Every string from the summary is escaped (and
 * "://" written "&#58;//", so no text reads as a URL). Charts are inline <svg class="chart"
 * data-chart="KIND"> elements, KIND one of bars (one per stage, step and metric), lines (metrics
 * with @ccN points), ttft (one per stage and step of "ttft"), kv; their marks carry the classes
 * bar (plus baseline for the baseline's), whisker, line, point, box and median.
 */
int st_report_html(const char *summary, size_t len, struct st_buf *out, char *err,
                   size_t errlen) ST_WUR;

/*
 * Pure: the drift of this summary's baseline against then's (an earlier campaign's): for every
 * metric both baselines have in the same stage, rel = this / then - 1, beyond when |rel| exceeds
 * noise (ST_RULES_EDGE as in the rules). Appends the "compare" object (see above; "with" is
 * with_path) to out and sets *drifted. Returns 0, or ST_EPARSE (err names which summary).
 */
int st_report_compare(const char *this_summary, size_t this_len, const char *then_summary,
                      size_t then_len, const char *with_path, double noise, struct st_buf *out,
                      int *drifted, char *err, size_t errlen) ST_WUR;

/*
 * Pure: the drift table (Markdown) of a "compare" object as st_report_compare writes it, for the
 * CLI to print. Returns 0, or ST_EPARSE with the field named in err.
 */
int st_report_drift_md(const char *compare, size_t len, struct st_buf *out, char *err,
                       size_t errlen) ST_WUR;

/*
 * Reads DIR/summary.json and writes DIR/report.md and, when html, DIR/report.html (atomically,
 * mode 0644). Returns 0, ST_EPARSE, or a negated errno (err names the file).
 */
int st_report_write(const char *dir, int html, char *err, size_t errlen) ST_WUR;

#endif
