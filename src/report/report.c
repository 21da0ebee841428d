/*
 * Campaign reports from summary.json alone: the sections of report.md and report.html, each
 * written once through the two-syntax document writer (doc.h) over the model that summary.c
 * reads, and the file shell that writes DIR/report.md and DIR/report.html. The drift check of
 * --compare-with is drift.c's. Not the runner: nothing here measures or decides, it only shows
 * what summary.json says. Output is a function of the summary's bytes: tables and charts follow
 * the summary's order (arms as listed, metrics and points by first appearance, ccN points by N).
 */
#include "report/report.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"
#include "report/doc.h"
#include "report/drift.h"
#include "report/summary.h"
#include "report/svg.h"
#include "stats/summ.h"
#include "store/fsutil.h"

/* "median [min–max] (n)"; the range only when there are several values. */
static void put_cell(struct st_buf *b, const struct st_sum_metric *m, int dec)
{
    if (m->n > 1) {
        st_doc_num(b, m->agg, dec);
        st_buf_puts(b, " [");
        st_doc_num(b, m->min, dec);
        st_buf_puts(b, "–");
        st_doc_num(b, m->max, dec);
        st_buf_printf(b, "] (%lld)", (long long)m->n);
    } else {
        st_doc_num(b, m->agg, dec);
        st_buf_printf(b, " (%lld)", (long long)m->n);
    }
}

/* ---- sections ---- */

/* A nullable number of the summary as the table shows it: null (NaN) as 0. */
static double or0(double v)
{
    return isfinite(v) ? v : 0;
}

static const struct st_sum_arm *arm_named(const struct st_sum_summary *s, const char *name)
{
    size_t i;
    return st_sum_arm_index(s, name, &i) ? &s->arms[i] : NULL;
}

static const char *param_of(const struct st_sum_arm *a, const char *k)
{
    for (size_t i = 0; i < a->nparams; i++) {
        if (strcmp(a->params[i].k, k) == 0) {
            return a->params[i].v;
        }
    }
    return NULL;
}

/* Distinct values of a string field in first-appearance order (borrowed pointers). */
static size_t distinct(const char **out, size_t cap, const char *v)
{
    for (size_t i = 0; i < cap; i++) {
        if (strcmp(out[i], v) == 0) {
            return cap;
        }
    }
    out[cap] = v;
    return cap + 1;
}

static void sec_head(struct st_doc *d, const struct st_sum_summary *s)
{
    struct st_buf t;
    st_buf_init(&t);
    st_buf_printf(&t, "Campaign report: %s", s->name);
    st_doc_h(d, 1, st_buf_str(&t));
    st_buf_release(&t);
    st_doc_raw(d, "", "<ul class=\"meta\">\n");
    st_doc_raw(d, "- Plan: ", "<li>Plan: ");
    st_doc_code(d, s->name);
    st_doc_raw(d, ", hash ", ", hash ");
    st_doc_code(d, s->hash);
    st_doc_raw(d, ", file ", ", file ");
    st_doc_code(d, s->file);
    st_buf_printf(d->b, "%sNoise threshold: %.2f%%%s", d->html ? "</li>\n<li>" : "\n- ",
                  s->noise * 100, d->html ? "</li>\n" : "\n");
    if (s->complete) {
        st_doc_raw(d, "- Complete: every unit ran and the decision was made.\n",
                   "<li>Complete: every unit ran and the decision was made.</li>\n");
    } else {
        st_doc_raw(d, "- **Incomplete**: ", "<li class=\"warn\"><strong>Incomplete</strong>: ");
        st_doc_raw(
            d, "not every unit ran or no decision was made; the tables below are partial.\n",
            "not every unit ran or no decision was made; the tables below are partial.</li>\n");
    }
    for (size_t i = 0; i < s->nstages; i++) {
        st_doc_raw(d, "- Stage ", "<li>Stage ");
        st_doc_text(d, s->stages[i].name);
        st_doc_raw(d, ": ", ": ");
        if (s->stages[i].narms == 0) {
            st_doc_raw(d, "no arm ran", "no arm ran");
        }
        for (size_t k = 0; k < s->stages[i].narms; k++) {
            if (k > 0) {
                st_doc_raw(d, ", ", ", ");
            }
            st_doc_text(d, s->stages[i].arms[k]);
        }
        st_doc_raw(d, "\n", "</li>\n");
    }
    st_doc_raw(d, "\n", "</ul>\n");
}

/* "name base -> value, ..." against the baseline's parameters. */
static void changed_text(struct st_buf *t, const struct st_sum_summary *s,
                         const struct st_sum_arm *a)
{
    if (a->on != NULL) {
        st_buf_printf(t, "on %s: ", a->on);
    }
    if (a->nchanged == 0) {
        st_buf_puts(t, a == &s->arms[0] ? "—" : "nothing");
    }
    for (size_t i = 0; i < a->nchanged; i++) {
        const char *base = param_of(&s->arms[0], a->changed[i].k);
        st_buf_printf(t, "%s%s %s -> %s", i ? ", " : "", a->changed[i].k, base ? base : "(unset)",
                      a->changed[i].v);
    }
}

static void sec_verdicts(struct st_doc *d, const struct st_sum_summary *s)
{
    static const char *const heads[] = {"arm", "changed", "verdict", "composite", "reasons"};
    st_doc_h(d, 2, "Verdicts");
    st_doc_table(d, 5, heads, "lllrl");
    struct st_buf t;
    st_buf_init(&t);
    for (size_t i = 0; i < s->narms; i++) {
        const struct st_sum_arm *a = &s->arms[i];
        st_doc_row(d);
        st_doc_cell_s(d, a->name);
        st_buf_clear(&t);
        changed_text(&t, s, a);
        st_doc_cell_s(d, st_buf_str(&t));
        st_buf_clear(&t);
        st_buf_printf(&t, "verdict-%s", a->verdict);
        st_doc_cell(d, st_buf_str(&t));
        if (strcmp(a->verdict, "promote") == 0 || strcmp(a->verdict, "reject") == 0) {
            st_doc_strong(d, a->verdict);
        } else {
            st_doc_text(d, a->verdict);
        }
        st_doc_cell_end(d);
        st_doc_cell(d, NULL);
        if (a->ndec > 0) {
            st_buf_printf(d->b, "%+.2f%%", a->dec[a->ndec - 1].composite * 100);
        } else {
            st_doc_text(d, "—");
        }
        st_doc_cell_end(d);
        st_doc_cell(d, NULL);
        for (size_t k = 0; k < a->nreasons; k++) {
            if (k > 0) {
                st_doc_raw(d, "<br>", "<br>");
            }
            st_doc_text(d, a->reasons[k]);
        }
        st_doc_cell_end(d);
        st_doc_row_end(d);
    }
    st_buf_release(&t);
    st_doc_table_end(d);
}

/* The statistics behind each decision: the test, then per stage one row per comparison and, in
 * HTML, the intervals against the thresholds. Archives from before the tests have none. */
static void sec_comparisons(struct st_doc *d, const struct st_sum_summary *s)
{
    size_t total = 0;
    for (size_t i = 0; i < s->narms; i++) {
        for (size_t k = 0; k < s->arms[i].ndec; k++) {
            total += s->arms[i].dec[k].ncmp;
        }
    }
    if (total == 0) {
        return;
    }
    struct st_buf t;
    st_buf_init(&t);
    st_doc_h(d, 2, "Comparisons");
    st_doc_p_open(d);
    st_buf_printf(&t,
                  "Each difference is the ratio of the geometric means of the arm's repeats and "
                  "the baseline's (the same passes), with its interval. Test: Welch's t on the "
                  "logs, looked at after every repeat from repeats.min to repeats.max at Pocock's "
                  "nominal level; correction: Holm over the stage's arms and metrics, per "
                  "direction, alpha/2 = %g each (alpha %g). A difference counts when its test "
                  "rejects and its estimate is beyond the threshold; \"suspect\" when the estimate "
                  "is beyond but the evidence short.",
                  (s->alpha > 0 ? s->alpha : 0.05) / 2, s->alpha > 0 ? s->alpha : 0.05);
    st_doc_text(d, st_buf_str(&t));
    st_doc_p_close(d);
    static const char *const heads[] = {
        "stage",      "arm",    "metric", "n", "baseline", "arm value", "difference [interval]",
        "confidence", "finding"};
    for (size_t stg = 0; stg < s->nstages; stg++) {
        const char *stage = s->stages[stg].name;
        size_t rows = 0;
        for (size_t i = 0; i < s->narms; i++) {
            for (size_t k = 0; k < s->arms[i].ndec; k++) {
                rows += strcmp(s->arms[i].dec[k].stage, stage) == 0 ? s->arms[i].dec[k].ncmp : 0;
            }
        }
        if (rows == 0) {
            continue;
        }
        const char **labels = st_xcalloc(rows, sizeof(char *));
        const char **colors = st_xcalloc(rows, sizeof(char *));
        const char **notes = st_xcalloc(rows, sizeof(char *));
        double *rel = st_xcalloc(rows, sizeof(double)), *lo = st_xcalloc(rows, sizeof(double));
        double *hi = st_xcalloc(rows, sizeof(double)), *thr = st_xcalloc(rows, sizeof(double));
        struct st_buf lab;
        st_buf_init(&lab);
        size_t *offs = st_xcalloc(rows * 2, sizeof(size_t));
        size_t r = 0;
        st_doc_table(d, 9, heads, "lllrrrrrl");
        for (size_t i = 0; i < s->narms; i++) {
            const struct st_sum_arm *a = &s->arms[i];
            for (size_t k = 0; k < a->ndec; k++) {
                const struct st_sum_decision *dc = &a->dec[k];
                if (strcmp(dc->stage, stage) != 0) {
                    continue;
                }
                for (size_t q = 0; q < dc->ncmp; q++, r++) {
                    const struct st_sum_cmpitem *c = &dc->cmp[q];
                    st_doc_row(d);
                    st_doc_cell_s(d, stage);
                    st_doc_cell_s(d, a->name);
                    st_buf_clear(&t);
                    st_buf_printf(&t, "%s%s", c->metric,
                                  strcmp(c->kind, "guard") == 0 ? " (guard)" : "");
                    st_doc_cell_s(d, st_buf_str(&t));
                    st_doc_cell(d, "num");
                    st_buf_printf(d->b, "%.0f", c->n);
                    st_doc_cell_end(d);
                    st_doc_cell(d, "num");
                    st_buf_printf(d->b, "%.6g", or0(c->base));
                    st_doc_cell_end(d);
                    st_doc_cell(d, "num");
                    st_buf_printf(d->b, "%.6g", or0(c->arm));
                    st_doc_cell_end(d);
                    st_buf_clear(&t);
                    if (isfinite(c->rel) && isfinite(c->lo) && isfinite(c->hi)) {
                        st_buf_printf(&t, "%+.2f%% [%+.2f%%, %+.2f%%]", 100 * c->rel, 100 * c->lo,
                                      100 * c->hi);
                    } else if (isfinite(c->rel)) {
                        st_buf_printf(&t, "%+.2f%%", 100 * c->rel);
                    } else {
                        st_buf_puts(&t, "—");
                    }
                    st_doc_cell(d, "num");
                    st_doc_text(d, st_buf_str(&t));
                    st_doc_cell_end(d);
                    st_buf_clear(&t);
                    if (c->single) {
                        st_buf_puts(&t, "one sample");
                    } else if (c->confidence > 0) {
                        st_buf_printf(&t, "%.2f%%", 100 * c->confidence);
                    } else {
                        st_buf_puts(&t, "—");
                    }
                    st_doc_cell(d, "num");
                    st_doc_text(d, st_buf_str(&t));
                    st_doc_cell_end(d);
                    st_doc_cell_s(d, c->finding);
                    st_doc_row_end(d);
                    offs[2 * r] = lab.len;
                    st_buf_printf(&lab, "%s: %s", a->name, c->metric);
                    st_buf_putc(&lab, '\0');
                    offs[2 * r + 1] = lab.len;
                    st_buf_printf(&lab, "(%s, n=%.0f)", c->finding, c->n);
                    st_buf_putc(&lab, '\0');
                    colors[r] = st_svg_color(i);
                    rel[r] = c->rel;
                    lo[r] = c->lo;
                    hi[r] = c->hi;
                    thr[r] = c->threshold;
                }
            }
        }
        st_doc_table_end(d);
        if (d->html) {
            for (size_t k = 0; k < rows; k++) {
                labels[k] = lab.data + offs[2 * k];
                notes[k] = lab.data + offs[2 * k + 1];
            }
            st_buf_clear(&t);
            st_buf_printf(&t,
                          "Differences to the baseline with their intervals, %s (dashed: the "
                          "thresholds)",
                          stage);
            struct st_svg_intervals iv = {
                .title = st_buf_str(&t),
                .nrows = rows,
                .labels = labels,
                .colors = colors,
                .rel = rel,
                .lo = lo,
                .hi = hi,
                .threshold = thr,
                .notes = notes,
            };
            st_svg_intervals(d->b, &iv);
        }
        st_buf_release(&lab);
        free(offs);
        free(labels);
        free(colors);
        free(notes);
        free(rel);
        free(lo);
        free(hi);
        free(thr);
    }
    st_buf_release(&t);
}

static void sec_chosen(struct st_doc *d, const struct st_sum_summary *s)
{
    const struct st_sum_arm *a = arm_named(s, s->chosen);
    struct st_buf t;
    st_buf_init(&t);
    st_doc_h(d, 2, "Chosen configuration");
    st_doc_p_open(d);
    st_doc_strong(d, a->name);
    if (a == &s->arms[0]) {
        st_doc_text(d, ": the baseline stays.");
    } else {
        changed_text(&t, s, a);
        st_doc_text(d, " replaces the baseline (");
        st_doc_text(d, st_buf_str(&t));
        st_doc_text(d, ").");
    }
    st_doc_text(d, " Parameters: ");
    for (size_t i = 0; i < a->nparams; i++) {
        st_buf_clear(&t);
        st_buf_printf(&t, "%s=%s", a->params[i].k, a->params[i].v);
        if (i > 0) {
            st_doc_text(d, ", ");
        }
        st_doc_code(d, st_buf_str(&t));
    }
    st_doc_text(d, a->nparams ? "." : "none recorded.");
    st_doc_p_close(d);
    if (s->restored) {
        st_doc_p_open(d);
        st_doc_text(d, "Restore proven: final-state.json shows the server back on the chosen "
                       "configuration.");
        if (s->restore_checks) {
            st_doc_text(d, " Checked: ");
            st_doc_text(d, s->restore_checks);
            st_doc_text(d, ".");
        }
        st_doc_p_close(d);
    } else {
        st_doc_raw(d, "", "<p class=\"warn\">");
        st_doc_strong(d, "The restore was NOT proven");
        st_doc_text(d, ": final-state.json does not show the server on the chosen configuration. "
                       "Check the server before relying on it.");
        st_doc_raw(d, "\n\n", "</p>\n");
    }
    st_buf_release(&t);
}

/* One row per arm and stage, one column per gate: "pass", or "FAIL: detail"; "—" where the
 * gate was not recorded (an arm that died before it). */
static void sec_gates(struct st_doc *d, const struct st_sum_summary *s)
{
    st_doc_h(d, 2, "Gates");
    size_t n = 0;
    for (size_t i = 0; i < s->narms; i++) {
        n += s->arms[i].ngates;
    }
    if (n == 0) {
        st_doc_p_open(d);
        st_doc_text(d, "No gate outcome was recorded.");
        st_doc_p_close(d);
        return;
    }
    const char **heads = st_xcalloc(n + 2, sizeof(char *));
    const char **stages = st_xcalloc(n, sizeof(char *));
    char *align = st_xcalloc(n + 3, 1);
    size_t ng = 0;
    for (size_t i = 0; i < s->narms; i++) {
        for (size_t k = 0; k < s->arms[i].ngates; k++) {
            ng = distinct(heads + 2, ng, s->arms[i].gates[k].name);
        }
    }
    heads[0] = "arm";
    heads[1] = "stage";
    memset(align, 'l', ng + 2);
    st_doc_table(d, ng + 2, heads, align);
    for (size_t i = 0; i < s->narms; i++) {
        const struct st_sum_arm *a = &s->arms[i];
        size_t nst = 0;
        for (size_t k = 0; k < a->ngates; k++) {
            nst = distinct(stages, nst, a->gates[k].stage);
        }
        for (size_t j = 0; j < nst; j++) {
            st_doc_row(d);
            st_doc_cell_s(d, a->name);
            st_doc_cell_s(d, stages[j]);
            for (size_t c = 0; c < ng; c++) {
                const struct st_sum_gate *g = NULL;
                for (size_t k = 0; k < a->ngates && g == NULL; k++) {
                    if (strcmp(a->gates[k].stage, stages[j]) == 0 &&
                        strcmp(a->gates[k].name, heads[c + 2]) == 0) {
                        g = &a->gates[k];
                    }
                }
                st_doc_cell(d, g == NULL ? NULL : g->passed ? "pass" : "fail");
                if (g == NULL) {
                    st_doc_text(d, "—");
                } else if (g->passed) {
                    st_doc_text(d, "pass");
                } else {
                    st_doc_strong(d, "FAIL");
                    if (g->detail != NULL) {
                        st_doc_text(d, ": ");
                        st_doc_text(d, g->detail);
                    }
                }
                st_doc_cell_end(d);
            }
            st_doc_row_end(d);
        }
    }
    st_doc_table_end(d);
    free(heads);
    free(stages);
    free(align);
}

static void sec_failures(struct st_doc *d, const struct st_sum_summary *s)
{
    static const char *const heads[] = {"arm", "kind", "stage", "step", "detail", "evidence"};
    size_t n = 0;
    for (size_t i = 0; i < s->narms; i++) {
        n += s->arms[i].failure != NULL;
    }
    if (n == 0) {
        return;
    }
    st_doc_h(d, 2, "Failures");
    st_doc_table(d, 6, heads, "llllll");
    for (size_t i = 0; i < s->narms; i++) {
        const struct st_sum_failure *f = s->arms[i].failure;
        if (f == NULL) {
            continue;
        }
        st_doc_row(d);
        st_doc_cell_s(d, s->arms[i].name);
        st_doc_cell_s(d, f->kind);
        st_doc_cell_s(d, f->stage);
        st_doc_cell_s(d, f->step ? f->step : "—");
        st_doc_cell_s(d, f->detail);
        st_doc_cell(d, NULL);
        st_doc_code(d, f->evidence);
        st_doc_cell_end(d);
        st_doc_row_end(d);
    }
    st_doc_table_end(d);
}

/* Bars per arm from parallel arrays (one group): the KV chart. */
static void chart_single(struct st_doc *d, const char *kind, const char *title, const char *unit,
                         size_t n, const char *const *names, const size_t *arm_idx,
                         const double *val, const double *lo, const double *hi, int dec)
{
    const char **colors = st_xcalloc(n ? n : 1, sizeof(char *));
    int *base = st_xcalloc(n ? n : 1, sizeof(int));
    unsigned char *has = st_xcalloc(n ? n : 1, 1);
    static const char *const groups[] = {""};
    for (size_t i = 0; i < n; i++) {
        colors[i] = st_svg_color(arm_idx[i]);
        base[i] = arm_idx[i] == 0;
        has[i] = 1;
    }
    struct st_svg_bars c = {
        .kind = kind,
        .title = title,
        .unit = unit,
        .ngroups = 1,
        .groups = groups,
        .s = {n, names, colors},
        .baseline = base,
        .val = val,
        .lo = lo,
        .hi = hi,
        .has = has,
        .decimals = dec,
    };
    st_svg_bars(d->b, &c);
    free(colors);
    free(base);
    free(has);
}

static void sec_kv(struct st_doc *d, const struct st_sum_summary *s)
{
    static const char *const heads[] = {"arm", "KV capacity (tokens)", "vs baseline",
                                        "max context (tokens)"};
    st_doc_h(d, 2, "KV capacity");
    st_doc_table(d, 4, heads, "lrrr");
    const struct st_sum_arm *b = &s->arms[0];
    const char **names = st_xcalloc(s->narms, sizeof(char *));
    size_t *idx = st_xcalloc(s->narms, sizeof(size_t));
    double *val = st_xcalloc(s->narms, sizeof(double));
    size_t n = 0;
    for (size_t i = 0; i < s->narms; i++) {
        const struct st_sum_arm *a = &s->arms[i];
        st_doc_row(d);
        st_doc_cell_s(d, a->name);
        st_doc_cell(d, NULL);
        if (a->has_kv) {
            st_doc_num(d->b, a->kv, 0);
            names[n] = a->name;
            idx[n] = i;
            val[n++] = a->kv;
        } else {
            st_doc_text(d, "—");
        }
        st_doc_cell_end(d);
        st_doc_cell(d, NULL);
        if (a->has_kv && b->has_kv && b->kv != 0 && i > 0) {
            st_buf_printf(d->b, "%+.2f%%", (a->kv / b->kv - 1) * 100);
        } else {
            st_doc_text(d, "—");
        }
        st_doc_cell_end(d);
        st_doc_cell(d, NULL);
        if (a->has_ctx) {
            st_doc_num(d->b, a->ctx, 0);
        } else {
            st_doc_text(d, "—");
        }
        st_doc_cell_end(d);
        st_doc_row_end(d);
    }
    st_doc_table_end(d);
    if (d->html && n > 0) {
        chart_single(d, "kv", "KV capacity per arm", "tokens", n, names, idx, val, val, val, 0);
    }
    free(names);
    free(idx);
    free(val);
}

/* ---- measurement tables: (stage, step, metric) x (arm, point) ---- */

struct table {
    const char *stage, *step, *mname;
    const char **points;
    size_t npoints, cap;
    size_t *grid; /* narms x npoints: metric index + 1, 0 for none */
    int cc;       /* every point is ccN */
};

struct tables {
    struct table *t;
    size_t n;
};

static int cc_of(const char *p, double *n)
{
    if (strncmp(p, "cc", 2) != 0 || p[2] < '0' || p[2] > '9') {
        return 0;
    }
    char *end;
    *n = strtod(p + 2, &end);
    return *end == '\0';
}

static int cmp_cc(const void *a, const void *b)
{
    double x = 0, y = 0;
    (void)cc_of(*(const char *const *)a, &x);
    (void)cc_of(*(const char *const *)b, &y);
    return x < y ? -1 : x > y;
}

static void tables_build(struct tables *ts, const struct st_sum_summary *s)
{
    ts->t = st_xcalloc(s->nm ? s->nm : 1, sizeof(struct table));
    ts->n = 0;
    for (size_t i = 0; i < s->nm; i++) {
        const struct st_sum_metric *m = &s->m[i];
        struct table *t = NULL;
        for (size_t k = 0; k < ts->n && t == NULL; k++) {
            struct table *c = &ts->t[k];
            if (strcmp(c->stage, m->stage) == 0 && strcmp(c->step, m->step) == 0 &&
                strcmp(c->mname, m->mname) == 0) {
                t = c;
            }
        }
        if (t == NULL) {
            t = &ts->t[ts->n++];
            t->stage = m->stage;
            t->step = m->step;
            t->mname = m->mname;
        }
        size_t p = 0;
        while (p < t->npoints && strcmp(t->points[p], m->point) != 0) {
            p++;
        }
        if (p == t->npoints) {
            if (t->npoints == t->cap) {
                t->cap = t->cap ? t->cap * 2 : 8;
                t->points = st_xrealloc(t->points, t->cap * sizeof(char *));
            }
            t->points[t->npoints++] = m->point;
        }
    }
    for (size_t k = 0; k < ts->n; k++) {
        struct table *t = &ts->t[k];
        double x;
        t->cc = t->npoints > 0;
        for (size_t p = 0; p < t->npoints; p++) {
            t->cc = t->cc && cc_of(t->points[p], &x);
        }
        if (t->cc) {
            qsort(t->points, t->npoints, sizeof(char *), cmp_cc);
        }
        t->grid = st_xcalloc(s->narms * t->npoints, sizeof(size_t));
    }
    for (size_t i = 0; i < s->nm; i++) {
        const struct st_sum_metric *m = &s->m[i];
        for (size_t k = 0; k < ts->n; k++) {
            struct table *t = &ts->t[k];
            if (strcmp(t->stage, m->stage) != 0 || strcmp(t->step, m->step) != 0 ||
                strcmp(t->mname, m->mname) != 0) {
                continue;
            }
            for (size_t p = 0; p < t->npoints; p++) {
                if (strcmp(t->points[p], m->point) == 0) {
                    /* A repeated entry: the first one counts, as st_json_get's first match. */
                    if (t->grid[m->arm_idx * t->npoints + p] == 0) {
                        t->grid[m->arm_idx * t->npoints + p] = i + 1;
                    }
                }
            }
        }
    }
}

static void tables_release(struct tables *ts)
{
    for (size_t k = 0; k < ts->n; k++) {
        free(ts->t[k].points);
        free(ts->t[k].grid);
    }
    st_freep(&ts->t);
    ts->n = 0;
}

static int row_has(const struct table *t, size_t arm)
{
    for (size_t p = 0; p < t->npoints; p++) {
        if (t->grid[arm * t->npoints + p]) {
            return 1;
        }
    }
    return 0;
}

static void point_head(struct st_buf *b, const char *point)
{
    if (point[0] == '\0') {
        st_buf_puts(b, "value");
    } else {
        st_buf_printf(b, "@%s", point);
    }
}

static void table_charts(struct st_doc *d, const struct st_sum_summary *s, const struct table *t,
                         struct st_doc_fmt f)
{
    size_t ns = 0, ng = t->npoints;
    const char **names = st_xcalloc(s->narms, sizeof(char *));
    const char **colors = st_xcalloc(s->narms, sizeof(char *));
    int *base = st_xcalloc(s->narms, sizeof(int));
    double *val = st_xcalloc(s->narms * ng, sizeof(double));
    double *lo = st_xcalloc(s->narms * ng, sizeof(double));
    double *hi = st_xcalloc(s->narms * ng, sizeof(double));
    unsigned char *has = st_xcalloc(s->narms * ng, 1);
    const char **groups = st_xcalloc(ng, sizeof(char *));
    char(*glab)[72] = st_xcalloc(ng, 72);
    double *xs = st_xcalloc(ng, sizeof(double));
    for (size_t p = 0; p < ng; p++) {
        if (t->points[p][0] != '\0') {
            snprintf(glab[p], 72, "@%s", t->points[p]);
        }
        groups[p] = glab[p];
        (void)cc_of(t->points[p], &xs[p]);
    }
    for (size_t a = 0; a < s->narms; a++) {
        if (!row_has(t, a)) {
            continue;
        }
        names[ns] = s->arms[a].name;
        colors[ns] = st_svg_color(a);
        base[ns] = a == 0;
        for (size_t p = 0; p < ng; p++) {
            size_t mi = t->grid[a * ng + p];
            if (mi) {
                const struct st_sum_metric *m = &s->m[mi - 1];
                val[ns * ng + p] = m->agg;
                lo[ns * ng + p] = m->min;
                hi[ns * ng + p] = m->max;
                has[ns * ng + p] = 1;
            }
        }
        ns++;
    }
    struct st_svg_series ser = {ns, names, colors};
    struct st_buf title;
    st_buf_init(&title);
    st_buf_printf(&title, "%s: %s.%s (median, min–max)", t->stage, t->step, t->mname);
    struct st_svg_bars bc = {
        .kind = "bars",
        .title = st_buf_str(&title),
        .unit = f.unit[0] ? f.unit : t->mname,
        .ngroups = ng,
        .groups = groups,
        .s = ser,
        .baseline = base,
        .val = val,
        .lo = lo,
        .hi = hi,
        .has = has,
        .decimals = f.decimals,
    };
    st_svg_bars(d->b, &bc);
    if (t->cc) {
        st_buf_clear(&title);
        st_buf_printf(&title, "%s: %s.%s vs concurrency (median)", t->stage, t->step, t->mname);
        struct st_svg_lines lc = {
            .title = st_buf_str(&title),
            .xlabel = "concurrency",
            .ylabel = f.unit[0] ? f.unit : t->mname,
            .nx = ng,
            .xs = xs,
            .s = ser,
            .ys = val,
            .has = has,
            .decimals = f.decimals,
        };
        st_svg_lines(d->b, &lc);
    }
    st_buf_release(&title);
    free(names);
    free(colors);
    free(base);
    free(val);
    free(lo);
    free(hi);
    free(has);
    free(groups);
    free(glab);
    free(xs);
}

static void one_table(struct st_doc *d, const struct st_sum_summary *s, const struct table *t)
{
    struct st_doc_fmt f = st_doc_fmt_of(t->mname);
    struct st_buf tmp;
    st_buf_init(&tmp);
    st_doc_p_open(d);
    st_doc_strong(d, t->mname);
    if (f.unit[0] != '\0') {
        st_buf_printf(&tmp, " (%s)", f.unit);
        st_doc_text(d, st_buf_str(&tmp));
    }
    st_doc_text(d, ": median [min–max] (n)");
    st_doc_p_close(d);
    size_t nc = t->npoints + 1;
    const char **heads = st_xcalloc(nc, sizeof(char *));
    char *align = st_xcalloc(nc + 1, 1);
    struct st_buf hb;
    st_buf_init(&hb);
    size_t *offs = st_xcalloc(nc, sizeof(size_t));
    for (size_t p = 0; p < t->npoints; p++) {
        offs[p + 1] = hb.len;
        point_head(&hb, t->points[p]);
        st_buf_putc(&hb, '\0');
    }
    heads[0] = "arm";
    align[0] = 'l';
    for (size_t p = 0; p < t->npoints; p++) {
        heads[p + 1] = hb.data + offs[p + 1];
        align[p + 1] = 'r';
    }
    st_doc_table(d, nc, heads, align);
    for (size_t a = 0; a < s->narms; a++) {
        if (!row_has(t, a)) {
            continue;
        }
        st_doc_row(d);
        st_doc_cell(d, a == 0 ? "baseline" : NULL);
        st_doc_text(d, s->arms[a].name);
        st_doc_cell_end(d);
        for (size_t p = 0; p < t->npoints; p++) {
            size_t mi = t->grid[a * t->npoints + p];
            st_doc_cell(d, NULL);
            if (mi) {
                put_cell(d->b, &s->m[mi - 1], f.decimals);
            } else {
                st_doc_text(d, "—");
            }
            st_doc_cell_end(d);
        }
        st_doc_row_end(d);
    }
    st_doc_table_end(d);
    if (d->html) {
        table_charts(d, s, t, f);
    }
    free(heads);
    free(align);
    free(offs);
    st_buf_release(&hb);
    st_buf_release(&tmp);
}

static void sec_measurements(struct st_doc *d, const struct st_sum_summary *s,
                             const struct tables *ts)
{
    if (ts->n == 0) {
        return;
    }
    st_doc_h(d, 2, "Measurements");
    const char **stages = st_xcalloc(ts->n, sizeof(char *));
    const char **steps = st_xcalloc(ts->n, sizeof(char *));
    size_t nst = 0;
    for (size_t k = 0; k < ts->n; k++) {
        nst = distinct(stages, nst, ts->t[k].stage);
    }
    for (size_t i = 0; i < nst; i++) {
        struct st_buf h;
        st_buf_init(&h);
        st_buf_printf(&h, "Stage %s", stages[i]);
        st_doc_h(d, 3, st_buf_str(&h));
        st_buf_release(&h);
        size_t nsp = 0;
        for (size_t k = 0; k < ts->n; k++) {
            if (strcmp(ts->t[k].stage, stages[i]) == 0) {
                nsp = distinct(steps, nsp, ts->t[k].step);
            }
        }
        for (size_t j = 0; j < nsp; j++) {
            st_doc_h(d, 4, steps[j]);
            for (size_t k = 0; k < ts->n; k++) {
                if (strcmp(ts->t[k].stage, stages[i]) == 0 &&
                    strcmp(ts->t[k].step, steps[j]) == 0) {
                    one_table(d, s, &ts->t[k]);
                }
            }
        }
    }
    free(stages);
    free(steps);
}

/* TTFT of the single-point ttft_s steps side by side: first vs repeat of a prompt. */
static void sec_ttft_steps(struct st_doc *d, const struct st_sum_summary *s,
                           const struct tables *ts)
{
    const char **stages = st_xcalloc(ts->n + 1, sizeof(char *));
    size_t nst = 0;
    for (size_t k = 0; k < ts->n; k++) {
        const struct table *t = &ts->t[k];
        if (strcmp(t->mname, "ttft_s") == 0 && t->npoints == 1 && t->points[0][0] == '\0') {
            nst = distinct(stages, nst, t->stage);
        }
    }
    if (nst > 0) {
        st_doc_h(d, 2, "Time to first token by step");
        st_doc_p_open(d);
        st_doc_text(d,
                    "Seconds, median [min–max] (n). A step that repeats an earlier step's prompt "
                    "shows what the prefix cache saves.");
        st_doc_p_close(d);
    }
    const struct table **cols = st_xcalloc(ts->n + 1, sizeof(*cols));
    for (size_t i = 0; i < nst; i++) {
        size_t nc = 0;
        for (size_t k = 0; k < ts->n; k++) {
            const struct table *t = &ts->t[k];
            if (strcmp(t->stage, stages[i]) == 0 && strcmp(t->mname, "ttft_s") == 0 &&
                t->npoints == 1 && t->points[0][0] == '\0') {
                cols[nc++] = t;
            }
        }
        const char **heads = st_xcalloc(nc + 1, sizeof(char *));
        char *align = st_xcalloc(nc + 2, 1);
        heads[0] = "arm";
        align[0] = 'l';
        for (size_t c = 0; c < nc; c++) {
            heads[c + 1] = cols[c]->step;
            align[c + 1] = 'r';
        }
        struct st_buf h;
        st_buf_init(&h);
        st_buf_printf(&h, "Stage %s", stages[i]);
        st_doc_h(d, 3, st_buf_str(&h));
        st_buf_release(&h);
        st_doc_table(d, nc + 1, heads, align);
        for (size_t a = 0; a < s->narms; a++) {
            int any = 0;
            for (size_t c = 0; c < nc; c++) {
                any = any || cols[c]->grid[a];
            }
            if (!any) {
                continue;
            }
            st_doc_row(d);
            st_doc_cell_s(d, s->arms[a].name);
            for (size_t c = 0; c < nc; c++) {
                st_doc_cell(d, NULL);
                if (cols[c]->grid[a]) {
                    put_cell(d->b, &s->m[cols[c]->grid[a] - 1], 3);
                } else {
                    st_doc_text(d, "—");
                }
                st_doc_cell_end(d);
            }
            st_doc_row_end(d);
        }
        st_doc_table_end(d);
        free(heads);
        free(align);
    }
    free(cols);
    free(stages);
}

/* The per-request TTFT of "ttft": a quantile table per (stage, step); box plots in HTML. */
static void sec_ttft_dist(struct st_doc *d, const struct st_sum_summary *s)
{
    static const char *const heads[] = {"stage", "step", "arm", "requests",
                                        "min",   "p50",  "p90", "max"};
    if (s->nt == 0) {
        return;
    }
    st_doc_h(d, 2, "TTFT distributions");
    st_doc_p_open(d);
    st_doc_text(d, "Per request, in seconds.");
    st_doc_p_close(d);
    st_doc_table(d, 8, heads, "lllrrrrr");
    for (size_t i = 0; i < s->nt; i++) {
        const struct st_sum_ttft *t = &s->t[i];
        st_doc_row(d);
        st_doc_cell_s(d, t->stage);
        st_doc_cell_s(d, t->step);
        st_doc_cell_s(d, t->arm);
        st_doc_cell(d, NULL);
        st_buf_printf(d->b, "%zu", t->n);
        st_doc_cell_end(d);
        double q[4] = {0, 0, 0, 0};
        if (t->n > 0) {
            q[0] = t->v[0];
            q[1] = st_summ_quantile(t->v, t->n, 0.5);
            q[2] = st_summ_quantile(t->v, t->n, 0.9);
            q[3] = t->v[t->n - 1];
        }
        for (int k = 0; k < 4; k++) {
            st_doc_cell(d, NULL);
            if (t->n > 0) {
                st_doc_num(d->b, q[k], 3);
            } else {
                st_doc_text(d, "—");
            }
            st_doc_cell_end(d);
        }
        st_doc_row_end(d);
    }
    st_doc_table_end(d);
    if (!d->html) {
        return;
    }
    /* One box chart per (stage, step), arms in the summary's order. */
    const char **names = st_xcalloc(s->nt, sizeof(char *));
    const char **colors = st_xcalloc(s->nt, sizeof(char *));
    const double **vals = st_xcalloc(s->nt, sizeof(double *));
    size_t *counts = st_xcalloc(s->nt, sizeof(size_t));
    unsigned char *done = st_xcalloc(s->nt, 1);
    for (size_t i = 0; i < s->nt; i++) {
        if (done[i]) {
            continue;
        }
        size_t n = 0;
        for (size_t a = 0; a < s->narms; a++) {
            for (size_t k = i; k < s->nt; k++) {
                const struct st_sum_ttft *t = &s->t[k];
                if (!done[k] && t->arm_idx == a && strcmp(t->stage, s->t[i].stage) == 0 &&
                    strcmp(t->step, s->t[i].step) == 0) {
                    names[n] = t->arm;
                    colors[n] = st_svg_color(a);
                    vals[n] = t->v;
                    counts[n++] = t->n;
                    done[k] = 1;
                }
            }
        }
        struct st_buf title;
        st_buf_init(&title);
        st_buf_printf(&title, "%s: %s TTFT per request", s->t[i].stage, s->t[i].step);
        struct st_svg_boxes c = {
            .title = st_buf_str(&title),
            .unit = "s",
            .s = {n, names, colors},
            .values = vals,
            .counts = counts,
            .decimals = 3,
        };
        st_svg_boxes(d->b, &c);
        st_buf_release(&title);
    }
    free(names);
    free(colors);
    free(vals);
    free(counts);
    free(done);
}

static void render(struct st_doc *d, const struct st_sum_summary *s)
{
    struct tables ts;
    tables_build(&ts, s);
    sec_head(d, s);
    sec_verdicts(d, s);
    sec_comparisons(d, s);
    sec_chosen(d, s);
    sec_gates(d, s);
    sec_failures(d, s);
    sec_kv(d, s);
    sec_ttft_steps(d, s, &ts);
    sec_ttft_dist(d, s);
    sec_measurements(d, s, &ts);
    if (s->cmp != NULL) {
        st_drift_section(d, s->cmp, s->hash);
    }
    tables_release(&ts);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The summary read for showing: each TTFT series sorted ascending (the quantiles and the box
 * plots want them so; the model is the report's own copy). */
static int load(struct st_sum_summary *s, const char *text, size_t len, char *err, size_t errlen)
{
    int rc = st_sum_load(s, text, len, err, errlen);
    for (size_t i = 0; rc == 0 && i < s->nt; i++) {
        qsort(s->t[i].v, s->t[i].n, sizeof(double), cmp_double);
    }
    return rc;
}

int st_report_md(const char *summary, size_t len, struct st_buf *out, char *err, size_t errlen)
{
    struct st_sum_summary s;
    int rc = load(&s, summary, len, err, errlen);
    if (rc == 0) {
        struct st_doc d = {.b = out, .html = 0};
        render(&d, &s);
    }
    st_sum_pool_release(&s.pool);
    return rc;
}

static const char css[] =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#202124;"
    "margin:0;background:#fff}\n"
    "main{max-width:1120px;margin:0 auto;padding:16px 24px 48px}\n"
    "h1{font-size:24px}h2{font-size:19px;margin-top:32px;border-bottom:1px solid #dadce0}\n"
    "h3{font-size:16px}h4{font-size:14px;margin-bottom:4px}\n"
    "table{border-collapse:collapse;margin:8px 0 12px}\n"
    "th,td{border:1px solid #dadce0;padding:3px 8px;vertical-align:top}\n"
    "th{background:#f1f3f4;text-align:left}\n"
    ".num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\n"
    "td.baseline{font-weight:600}\n"
    ".verdict-promote{color:#137333}.verdict-reject,.fail{color:#c5221f}\n"
    ".verdict-inconclusive{color:#b06000}\n"
    ".warn{color:#c5221f}code{font-size:12px;background:#f1f3f4;padding:0 3px}\n"
    "svg.chart{display:block;width:100%;max-width:760px;height:auto;margin:4px 0 20px}\n"
    "svg.chart text{font:11px sans-serif;fill:#3c4043}\n"
    "svg.chart .title{font-size:13px;font-weight:600;fill:#202124}\n"
    "svg.chart .grid{stroke:#e8eaed}svg.chart .axis{stroke:#5f6368}\n"
    "svg.chart .bar,svg.chart .box{shape-rendering:crispEdges}\n"
    "svg.chart .bar.baseline{stroke:#202124;stroke-width:1}\n"
    "svg.chart .whisker{stroke:#202124;stroke-width:1.5;fill:none}\n"
    "svg.chart .median{stroke:#202124;stroke-width:2}\n"
    "svg.chart .line{stroke-width:2}\n"
    "svg.chart .zero{stroke-width:1}svg.chart .threshold{stroke-width:1.5}\n";

int st_report_html(const char *summary, size_t len, struct st_buf *out, char *err, size_t errlen)
{
    struct st_sum_summary s;
    int rc = load(&s, summary, len, err, errlen);
    if (rc == 0) {
        st_buf_puts(out,
                    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                    "<title>Campaign report: ");
        st_svg_esc(out, s.name);
        st_buf_printf(out, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<main>\n", css);
        struct st_doc d = {.b = out, .html = 1};
        render(&d, &s);
        st_buf_puts(out, "</main>\n</body>\n</html>\n");
    }
    st_sum_pool_release(&s.pool);
    return rc;
}

/* ---- files ---- */

static int read_all(const char *path, struct st_buf *out)
{
    return st_fs_read_file(path, SUMMARY_MAX_BYTES, out);
}

static int write_one(const char *dir, const char *name, const struct st_buf *b, char *err,
                     size_t errlen)
{
    struct st_buf p;
    st_buf_init(&p);
    st_buf_printf(&p, "%s/%s", dir, name);
    int rc = st_fs_write_atomic(st_buf_str(&p), b->data ? b->data : "", b->len, 0644);
    if (rc) {
        snprintf(err, errlen, "%s: %s", st_buf_str(&p), st_strerror(rc));
    }
    st_buf_release(&p);
    return rc;
}

int st_report_write(const char *dir, int html, char *err, size_t errlen)
{
    struct st_buf path, text, out;
    char e[400] = "";
    st_buf_init(&path);
    st_buf_init(&text);
    st_buf_init(&out);
    st_buf_printf(&path, "%s/summary.json", dir);
    int rc = read_all(st_buf_str(&path), &text);
    if (rc) {
        snprintf(err, errlen, "%s: %s", st_buf_str(&path),
                 rc == ST_ETOOBIG ? "larger than 256 MiB" : st_strerror(rc));
        goto out;
    }
    rc = st_report_md(text.data ? text.data : "", text.len, &out, e, sizeof(e));
    if (rc) {
        snprintf(err, errlen, "%s: %s", st_buf_str(&path), e);
        goto out;
    }
    rc = write_one(dir, "report.md", &out, err, errlen);
    if (rc || !html) {
        goto out;
    }
    st_buf_clear(&out);
    rc = st_report_html(text.data, text.len, &out, e, sizeof(e));
    if (rc) {
        snprintf(err, errlen, "%s: %s", st_buf_str(&path), e);
        goto out;
    }
    rc = write_one(dir, "report.html", &out, err, errlen);
out:
    st_buf_release(&path);
    st_buf_release(&text);
    st_buf_release(&out);
    return rc;
}
