/*
 * Inline SVG charts for report.html (internal to src/report; report.c is the only user). Each
 * function appends one <svg class="chart" data-chart="KIND"> element, sized by a viewBox, with
 * axes, ticks, labels and a legend; every data mark carries a class (bar, whisker, line, point,
 * box, median) so tests can count them, and a <title> tooltip with its numbers. No script, no
 * external reference, no xmlns attribute (inline SVG in HTML5 needs none). Pure: the same input
 * gives the same bytes. Every text is escaped with st_svg_esc.
 */
#ifndef ST_REPORT_SVG_H
#define ST_REPORT_SVG_H

#include <stddef.h>

#include "base/buf.h"

/* The colour of arm number idx in the summary's order: 0 (the baseline) is a fixed grey, the
 * others cycle through a fixed palette of ST_SVG_PALETTE_N colours. Static strings "#rrggbb". */
#define ST_SVG_PALETTE_N 8
#define ST_SVG_BASELINE_COLOR "#5f6368"
const char *st_svg_color(size_t idx);

/* Appends s escaped for HTML text and attribute values (& < > " '); "://" becomes "&#58;//" so
 * that no text in the file reads as a URL. */
void st_svg_esc(struct st_buf *b, const char *s);

/* The series of a chart: their legend names and their colours (one fill or stroke each). */
struct st_svg_series {
    size_t n;
    const char *const *names;
    const char *const *colors;
};

/* Grouped bars with min-max whiskers: groups along x (points), one bar per series (arm) in each
 * group. Arrays val, lo, hi and has hold s.n x ngroups entries, series-major. */
struct st_svg_bars {
    const char *kind;  /* data-chart: "bars", "kv" */
    const char *title; /* shown above the plot */
    const char *unit;  /* the y axis label */
    size_t ngroups;
    const char *const *groups; /* x labels; "" for a single unnamed group */
    struct st_svg_series s;
    const int *baseline; /* per series: the baseline's bars get class "bar baseline" */
    const double *val, *lo, *hi;
    const unsigned char *has; /* 0: no bar there */
    int decimals;             /* of the numbers in tooltips */
};
void st_svg_bars(struct st_buf *b, const struct st_svg_bars *c);

/* One polyline per series over numeric x (concurrency levels), x on a log2 scale when every
 * x > 0. ys and has hold s.n x nx entries, series-major. data-chart="lines". */
struct st_svg_lines {
    const char *title;
    const char *xlabel, *ylabel;
    size_t nx;
    const double *xs; /* increasing */
    struct st_svg_series s;
    const double *ys;
    const unsigned char *has;
    int decimals;
};
void st_svg_lines(struct st_buf *b, const struct st_svg_lines *c);

/* Box plots, one per series: box from the first to the third quartile, the median, whiskers to
 * the minimum and maximum, one point when a series has one value. Quartiles and median are the
 * project's nearest-rank quantiles (st_summ_quantile, docs/metrics.md). values[i] holds
 * counts[i] numbers sorted ascending. data-chart="ttft". */
struct st_svg_boxes {
    const char *title;
    const char *unit;
    struct st_svg_series s;
    const double *const *values;
    const size_t *counts;
    int decimals;
};
void st_svg_boxes(struct st_buf *b, const struct st_svg_boxes *c);

/* A forest plot: one row per comparison, its interval [lo, hi] as a horizontal bar (class
 * "interval"), its estimate as a point (class "estimate"), over an x axis in percent with the
 * noise threshold marked at -threshold and +threshold (class "threshold") and 0 (class "zero").
 * Rows whose numbers are not finite are listed without marks. data-chart="intervals". */
struct st_svg_intervals {
    const char *title;
    size_t nrows;
    const char *const *labels;   /* one per row: "arm: metric" */
    const char *const *colors;   /* the arm's */
    const double *rel, *lo, *hi; /* fractions */
    const double *threshold;     /* per row: the noise threshold or the guard's max_worse */
    const char *const *notes;    /* per row, the tooltip's tail (finding, confidence, n) */
};
void st_svg_intervals(struct st_buf *b, const struct st_svg_intervals *c);

#endif
