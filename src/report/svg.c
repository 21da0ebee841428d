/*
 * Inline SVG charts for report.html: grouped bars with whiskers, lines over concurrency, box
 * plots. Every chart is a fixed 760 x H viewBox (the browser scales it to the page width): a
 * title, a plot area with a y axis of "nice" ticks (1, 2, 2.5 or 5 times a power of ten) and a
 * legend under the x axis. Coordinates are printed with one decimal, so output is deterministic.
 */
#include "report/svg.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "stats/summ.h"

#define W 760.0
#define PLOT_X0 78.0
#define PLOT_X1 740.0
#define PLOT_Y0 40.0
#define PLOT_Y1 250.0
#define LEGEND_Y 306.0
#define LEGEND_ROW 18.0
#define LEGEND_COL 180.0

static const char *const palette[ST_SVG_PALETTE_N] = {
    "#1f6fd1", "#e8710a", "#1e8e3e", "#d93025", "#9334e6", "#b06000", "#12a4af", "#c5221f",
};

const char *st_svg_color(size_t idx)
{
    if (idx == 0) {
        return ST_SVG_BASELINE_COLOR;
    }
    return palette[(idx - 1) % ST_SVG_PALETTE_N];
}

void st_svg_esc(struct st_buf *b, const char *s)
{
    for (const char *p = s; *p != '\0'; p++) {
        switch (*p) {
        case '&':
            st_buf_puts(b, "&amp;");
            break;
        case '<':
            st_buf_puts(b, "&lt;");
            break;
        case '>':
            st_buf_puts(b, "&gt;");
            break;
        case '"':
            st_buf_puts(b, "&quot;");
            break;
        case '\'':
            st_buf_puts(b, "&#39;");
            break;
        case ':':
            if (p[1] == '/' && p[2] == '/') {
                st_buf_puts(b, "&#58;");
            } else {
                st_buf_putc(b, ':');
            }
            break;
        default:
            st_buf_putc(b, *p);
            break;
        }
    }
}

/* The y axis: [lo, hi] widened to whole steps of a nice size. */
struct axis {
    double lo, hi, step;
    int decimals;
};

static void axis_fit(struct axis *a, double vmin, double vmax)
{
    if (!isfinite(vmin) || !isfinite(vmax) || vmax - vmin > 1e300) {
        vmin = 0;
        vmax = 1; /* callers leave non-finite values out; this is the last guard */
    }
    if (vmin > 0) {
        vmin = 0;
    }
    if (!(vmax > vmin)) {
        vmax = vmin + 1;
    }
    double raw = (vmax - vmin) / 5;
    double mag = pow(10, floor(log10(raw)));
    double f = raw / mag;
    double nf = f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10;
    a->step = nf * mag;
    a->lo = floor(vmin / a->step) * a->step;
    a->hi = ceil(vmax / a->step) * a->step;
    a->decimals = 0;
    while (a->decimals < 6) {
        double s = a->step * pow(10, a->decimals);
        if (fabs(s - round(s)) < 1e-6) {
            break;
        }
        a->decimals++;
    }
}

static double ypos(const struct axis *a, double v)
{
    return PLOT_Y1 - (v - a->lo) / (a->hi - a->lo) * (PLOT_Y1 - PLOT_Y0);
}

static void open_svg(struct st_buf *b, const char *kind, const char *title, size_t nlegend)
{
    size_t rows = (nlegend + 3) / 4;
    double h = LEGEND_Y + (double)rows * LEGEND_ROW + 6;
    st_buf_printf(b,
                  "<svg class=\"chart\" data-chart=\"%s\" viewBox=\"0 0 %.0f %.0f\" "
                  "width=\"%.0f\" height=\"%.0f\" role=\"img\" aria-label=\"",
                  kind, W, h, W, h);
    st_svg_esc(b, title);
    st_buf_puts(b, "\">\n<text class=\"title\" x=\"12\" y=\"22\">");
    st_svg_esc(b, title);
    st_buf_puts(b, "</text>\n");
}

static void y_axis(struct st_buf *b, const struct axis *a, const char *unit)
{
    long nt = lround((a->hi - a->lo) / a->step);
    if (nt < 1 || nt > 100) {
        nt = 1;
    }
    for (long i = 0; i <= nt; i++) {
        double v = a->lo + a->step * (double)i;
        double y = ypos(a, v);
        st_buf_printf(
            b,
            "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
            "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.*f</text>\n",
            PLOT_X0, y, PLOT_X1, y, PLOT_X0 - 6, y + 4, a->decimals, v);
    }
    st_buf_printf(b,
                  "<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
                  "<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                  PLOT_X0, PLOT_Y0, PLOT_X0, PLOT_Y1, PLOT_X0, PLOT_Y1, PLOT_X1, PLOT_Y1);
    st_buf_printf(b,
                  "<text class=\"label\" transform=\"translate(16 %.1f) rotate(-90)\" "
                  "text-anchor=\"middle\">",
                  (PLOT_Y0 + PLOT_Y1) / 2);
    st_svg_esc(b, unit);
    st_buf_puts(b, "</text>\n");
}

static void x_label(struct st_buf *b, double x, const char *text)
{
    st_buf_printf(b, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", x,
                  PLOT_Y1 + 16);
    st_svg_esc(b, text);
    st_buf_puts(b, "</text>\n");
}

static void legend(struct st_buf *b, const struct st_svg_series *s)
{
    for (size_t i = 0; i < s->n; i++) {
        double x = PLOT_X0 + (double)(i % 4) * LEGEND_COL;
        double y = LEGEND_Y + (double)(i / 4) * LEGEND_ROW;
        st_buf_printf(b,
                      "<rect class=\"swatch\" x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" "
                      "fill=\"%s\"/><text class=\"legend\" x=\"%.1f\" y=\"%.1f\">",
                      x, y - 10, s->colors[i], x + 17, y);
        st_svg_esc(b, s->names[i]);
        st_buf_puts(b, "</text>\n");
    }
}

/* Values a summary can hold but a chart cannot place (1e999 reads as infinity) are left out. */
static int bar_drawn(const struct st_svg_bars *c, size_t k)
{
    return c->has[k] && isfinite(c->val[k]) && fabs(c->val[k]) < 1e300;
}

static int whisker_drawn(const struct st_svg_bars *c, size_t k)
{
    return isfinite(c->lo[k]) && isfinite(c->hi[k]) && c->hi[k] > c->lo[k] &&
           c->hi[k] - c->lo[k] < 1e300;
}

void st_svg_bars(struct st_buf *b, const struct st_svg_bars *c)
{
    double vmin = 0, vmax = 0;
    for (size_t i = 0; i < c->s.n * c->ngroups; i++) {
        if (bar_drawn(c, i)) {
            vmin = fmin(vmin, c->val[i]);
            vmax = fmax(vmax, c->val[i]);
            if (whisker_drawn(c, i)) {
                vmin = fmin(vmin, c->lo[i]);
                vmax = fmax(vmax, c->hi[i]);
            }
        }
    }
    struct axis a;
    axis_fit(&a, vmin, vmax);
    open_svg(b, c->kind, c->title, c->s.n);
    y_axis(b, &a, c->unit);
    double gw = (PLOT_X1 - PLOT_X0) / (double)(c->ngroups ? c->ngroups : 1);
    double bw = gw * 0.8 / (double)(c->s.n ? c->s.n : 1);
    for (size_t g = 0; g < c->ngroups; g++) {
        double gx = PLOT_X0 + gw * (double)g + gw * 0.1;
        if (c->groups[g][0] != '\0') {
            x_label(b, PLOT_X0 + gw * ((double)g + 0.5), c->groups[g]);
        }
        for (size_t s = 0; s < c->s.n; s++) {
            size_t k = s * c->ngroups + g;
            if (!bar_drawn(c, k)) {
                continue;
            }
            double x = gx + bw * (double)s;
            double y0 = ypos(&a, fmax(0, a.lo)), y = ypos(&a, c->val[k]);
            double top = fmin(y, y0), h = fmax(fabs(y0 - y), 1.0);
            st_buf_printf(b,
                          "<rect class=\"bar%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                          "height=\"%.1f\" fill=\"%s\"><title>",
                          c->baseline[s] ? " baseline" : "", x + 1, top, fmax(bw - 2, 1), h,
                          c->s.colors[s]);
            st_svg_esc(b, c->s.names[s]);
            if (c->groups[g][0] != '\0') {
                st_buf_puts(b, " ");
                st_svg_esc(b, c->groups[g]);
            }
            st_buf_printf(b, ": %.*f [%.*f, %.*f]</title></rect>\n", c->decimals, c->val[k],
                          c->decimals, c->lo[k], c->decimals, c->hi[k]);
            if (whisker_drawn(c, k)) {
                double cx = x + bw / 2, yl = ypos(&a, c->lo[k]), yh = ypos(&a, c->hi[k]);
                double cap = fmin(bw / 4, 6);
                st_buf_printf(b,
                              "<path class=\"whisker\" d=\"M%.1f %.1fV%.1fM%.1f %.1fH%.1f"
                              "M%.1f %.1fH%.1f\"/>\n",
                              cx, yl, yh, cx - cap, yl, cx + cap, cx - cap, yh, cx + cap);
            }
        }
    }
    legend(b, &c->s);
    st_buf_puts(b, "</svg>\n");
}

static int point_drawn(const struct st_svg_lines *c, size_t k)
{
    return c->has[k] && isfinite(c->ys[k]) && fabs(c->ys[k]) < 1e300;
}

void st_svg_lines(struct st_buf *b, const struct st_svg_lines *c)
{
    double vmax = 0;
    int logx = c->nx > 0;
    for (size_t i = 0; i < c->nx; i++) {
        if (!(c->xs[i] > 0) || !isfinite(c->xs[i])) {
            logx = 0;
        }
    }
    for (size_t i = 0; i < c->s.n * c->nx; i++) {
        if (point_drawn(c, i)) {
            vmax = fmax(vmax, c->ys[i]);
        }
    }
    struct axis a;
    axis_fit(&a, 0, vmax);
    open_svg(b, "lines", c->title, c->s.n);
    y_axis(b, &a, c->ylabel);
    double x0 = c->nx ? (logx ? log2(c->xs[0]) : c->xs[0]) : 0;
    double x1 = c->nx ? (logx ? log2(c->xs[c->nx - 1]) : c->xs[c->nx - 1]) : 1;
    if (!(x1 > x0)) {
        x1 = x0 + 1;
    }
    double xpos[64];
    size_t nx = c->nx < 64 ? c->nx : 64;
    for (size_t i = 0; i < nx; i++) {
        double v = logx ? log2(c->xs[i]) : c->xs[i];
        xpos[i] = PLOT_X0 + 20 + (v - x0) / (x1 - x0) * (PLOT_X1 - PLOT_X0 - 40);
        char lab[32];
        snprintf(lab, sizeof(lab), "%g", c->xs[i]);
        x_label(b, xpos[i], lab);
    }
    st_buf_printf(b, "<text class=\"label\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">",
                  (PLOT_X0 + PLOT_X1) / 2, PLOT_Y1 + 32);
    st_svg_esc(b, c->xlabel);
    st_buf_puts(b, "</text>\n");
    for (size_t s = 0; s < c->s.n; s++) {
        st_buf_printf(b, "<polyline class=\"line\" fill=\"none\" stroke=\"%s\" points=\"",
                      c->s.colors[s]);
        int first = 1;
        for (size_t i = 0; i < nx; i++) {
            if (point_drawn(c, s * c->nx + i)) {
                st_buf_printf(b, "%s%.1f,%.1f", first ? "" : " ", xpos[i],
                              ypos(&a, c->ys[s * c->nx + i]));
                first = 0;
            }
        }
        st_buf_puts(b, "\"/>\n");
        for (size_t i = 0; i < nx; i++) {
            size_t k = s * c->nx + i;
            if (!point_drawn(c, k)) {
                continue;
            }
            st_buf_printf(b,
                          "<circle class=\"point\" cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" "
                          "fill=\"%s\"><title>",
                          xpos[i], ypos(&a, c->ys[k]), c->s.colors[s]);
            st_svg_esc(b, c->s.names[s]);
            st_buf_printf(b, " %g: %.*f</title></circle>\n", c->xs[i], c->decimals, c->ys[k]);
        }
    }
    legend(b, &c->s);
    st_buf_puts(b, "</svg>\n");
}

static int box_drawn(const struct st_svg_boxes *c, size_t s)
{
    size_t n = c->counts[s];
    return n > 0 && isfinite(c->values[s][0]) && isfinite(c->values[s][n - 1]) &&
           c->values[s][n - 1] - c->values[s][0] < 1e300;
}

void st_svg_boxes(struct st_buf *b, const struct st_svg_boxes *c)
{
    double vmax = 0;
    for (size_t s = 0; s < c->s.n; s++) {
        if (box_drawn(c, s)) {
            vmax = fmax(vmax, c->values[s][c->counts[s] - 1]);
        }
    }
    struct axis a;
    axis_fit(&a, 0, vmax);
    open_svg(b, "ttft", c->title, c->s.n);
    y_axis(b, &a, c->unit);
    double gw = (PLOT_X1 - PLOT_X0) / (double)(c->s.n ? c->s.n : 1);
    double bw = fmin(gw * 0.5, 60);
    for (size_t s = 0; s < c->s.n; s++) {
        double cx = PLOT_X0 + gw * ((double)s + 0.5);
        x_label(b, cx, c->s.names[s]);
        size_t n = c->counts[s];
        if (!box_drawn(c, s)) {
            continue;
        }
        const double *v = c->values[s];
        double q1 = st_summ_quantile(v, n, 0.25), med = st_summ_quantile(v, n, 0.5),
               q3 = st_summ_quantile(v, n, 0.75);
        if (n == 1) {
            st_buf_printf(b,
                          "<circle class=\"point\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\" "
                          "fill=\"%s\"><title>",
                          cx, ypos(&a, v[0]), c->s.colors[s]);
            st_svg_esc(b, c->s.names[s]);
            st_buf_printf(b, ": %.*f (1)</title></circle>\n", c->decimals, v[0]);
            continue;
        }
        double yl = ypos(&a, v[0]), yh = ypos(&a, v[n - 1]);
        st_buf_printf(b,
                      "<path class=\"whisker\" d=\"M%.1f %.1fV%.1fM%.1f %.1fH%.1fM%.1f %.1fH%.1f\""
                      "/>\n",
                      cx, yl, yh, cx - bw / 4, yl, cx + bw / 4, cx - bw / 4, yh, cx + bw / 4);
        double top = ypos(&a, q3), bot = ypos(&a, q1);
        st_buf_printf(b,
                      "<rect class=\"box\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                      "fill=\"%s\"><title>",
                      cx - bw / 2, top, bw, fmax(bot - top, 1.0), c->s.colors[s]);
        st_svg_esc(b, c->s.names[s]);
        st_buf_printf(b,
                      ": min %.*f, q1 %.*f, median %.*f, q3 %.*f, max %.*f (%zu)</title></rect>\n",
                      c->decimals, v[0], c->decimals, q1, c->decimals, med, c->decimals, q3,
                      c->decimals, v[n - 1], n);
        double ym = ypos(&a, med);
        st_buf_printf(b,
                      "<line class=\"median\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                      cx - bw / 2, ym, cx + bw / 2, ym);
    }
    legend(b, &c->s);
    st_buf_puts(b, "</svg>\n");
}

/* ---- intervals ---- */

#define IV_ROW 22.0
#define IV_LABEL_X1 300.0

static double iv_x(double lo, double hi, double v)
{
    return IV_LABEL_X1 + (v - lo) / (hi - lo) * (PLOT_X1 - IV_LABEL_X1);
}

void st_svg_intervals(struct st_buf *b, const struct st_svg_intervals *c)
{
    /* The x range, symmetric: three times the largest threshold, or more to hold every
     * estimate; intervals reaching beyond it are cut at the edge. */
    double m = 0, t = 0;
    for (size_t i = 0; i < c->nrows; i++) {
        if (isfinite(c->rel[i]) && fabs(c->rel[i]) < 10) {
            m = fmax(m, 1.2 * fabs(c->rel[i]));
        }
        if (isfinite(c->threshold[i]) && c->threshold[i] < 10) {
            t = fmax(t, c->threshold[i]);
        }
    }
    m = fmax(m, 3 * t);
    m = m > 0 ? m : 0.1;
    struct axis a;
    axis_fit(&a, -m * 100, m * 100);
    double lo = -fmax(fabs(a.lo), a.hi), hi = -lo;
    double h = PLOT_Y0 + (double)c->nrows * IV_ROW + 40;
    st_buf_printf(b,
                  "<svg class=\"chart\" data-chart=\"intervals\" viewBox=\"0 0 %.0f %.0f\" "
                  "width=\"%.0f\" height=\"%.0f\" role=\"img\" aria-label=\"",
                  W, h, W, h);
    st_svg_esc(b, c->title);
    st_buf_puts(b, "\">\n<text class=\"title\" x=\"12\" y=\"22\">");
    st_svg_esc(b, c->title);
    st_buf_puts(b, "</text>\n");
    double y1 = PLOT_Y0 + (double)c->nrows * IV_ROW;
    long nt = lround((hi - lo) / a.step);
    nt = nt < 1 || nt > 100 ? 1 : nt;
    for (long i = 0; i <= nt; i++) {
        double v = lo + a.step * (double)i, x = iv_x(lo, hi, v);
        st_buf_printf(b,
                      "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
                      "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%+.*f%%"
                      "</text>\n",
                      x, PLOT_Y0 - 6, x, y1, x, y1 + 16, a.decimals, v);
    }
    double x0 = iv_x(lo, hi, 0);
    st_buf_printf(b,
                  "<line class=\"zero\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                  "stroke=\"#202124\"/>\n",
                  x0, PLOT_Y0 - 6, x0, y1);
    for (size_t i = 0; i < c->nrows; i++) {
        double y = PLOT_Y0 + ((double)i + 0.5) * IV_ROW;
        st_buf_printf(b, "<text class=\"legend\" x=\"12\" y=\"%.1f\">", y + 4);
        st_svg_esc(b, c->labels[i]);
        st_buf_puts(b, "</text>\n");
        double thr = c->threshold[i] * 100;
        if (isfinite(thr) && thr > 0 && thr < hi) {
            for (int sgn = -1; sgn <= 1; sgn += 2) {
                double x = iv_x(lo, hi, sgn * thr);
                st_buf_printf(b,
                              "<line class=\"threshold\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                              "y2=\"%.1f\" stroke=\"#c5221f\" stroke-dasharray=\"3 2\"/>\n",
                              x, y - IV_ROW / 2 + 2, x, y + IV_ROW / 2 - 2);
            }
        }
        double r = c->rel[i] * 100, l = c->lo[i] * 100, u = c->hi[i] * 100;
        if (!isfinite(r) || fabs(r) >= 1000) {
            continue;
        }
        double lx = iv_x(lo, hi, isfinite(l) ? fmax(l, lo) : lo);
        double ux = iv_x(lo, hi, isfinite(u) ? fmin(u, hi) : hi);
        st_buf_printf(b,
                      "<rect class=\"interval\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                      "height=\"6\" fill=\"%s\" fill-opacity=\"0.45\"><title>",
                      lx, y - 3, fmax(ux - lx, 1.0), c->colors[i]);
        st_svg_esc(b, c->labels[i]);
        st_buf_printf(b, ": %+.2f%% [%+.2f%%, %+.2f%%]", r, l, u);
        if (c->notes && c->notes[i]) {
            st_buf_puts(b, " ");
            st_svg_esc(b, c->notes[i]);
        }
        st_buf_puts(b, "</title></rect>\n");
        st_buf_printf(b,
                      "<circle class=\"estimate\" cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" "
                      "fill=\"%s\"/>\n",
                      iv_x(lo, hi, fmax(fmin(r, hi), lo)), y, c->colors[i]);
    }
    st_buf_puts(b, "</svg>\n");
}
