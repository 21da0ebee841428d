/*
 * Campaign reports, made from an audit archive's summary.json alone (so `servetune report DIR`
 * works on any archive, copied anywhere): report.md with tables shaped like the seeds' and
 * report.html, one self-contained file (inline CSS and SVG, no script, no external reference)
 * with charts: bars with min-max whiskers per metric and arm, throughput vs concurrency per arm,
 * TTFT distributions, KV capacity. And the drift check of `--compare-with`: this campaign's
 * baseline against an earlier one's.
 *
 * The input is summary.json text: its one writer and reader is summary.h (st_sum_write,
 * st_sum_load), its fields are described in docs/internals/formats.md. The per-request TTFT
 * quantiles (tables) and quartiles (box plots) are nearest rank (st_summ_quantile).
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
 * noise (ST_STATS_EDGE, as in the rules). Appends the "compare" object (see above; "with" is
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
