/*
 * The drift check (drift.h, report.h): both summaries are read with st_sum_load, their
 * baselines' aggregates compared metric by metric in the same stage, and the "compare" object
 * written; a difference within ST_STATS_EDGE of the noise threshold is not beyond it.
 */
#include "report/drift.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "stats/summ.h"
#include "report/report.h"

void st_drift_section(struct st_doc *d, const struct st_sum_cmp *c, const char *this_hash)
{
    static const char *const heads[] = {"metric", "stage", "this", "then", "change", "beyond"};
    st_doc_h(d, 2, "Drift against an earlier campaign");
    st_doc_p_open(d);
    st_doc_text(d, "Baseline compared with ");
    st_doc_code(d, c->with);
    st_doc_text(d, " (plan hash ");
    st_doc_code(d, c->plan_hash);
    if (this_hash != NULL) {
        st_doc_text(d, strcmp(this_hash, c->plan_hash) == 0 ? ", the same plan" : ", another plan");
    }
    st_doc_text(d, ").");
    st_doc_p_close(d);
    if (c->n > 0) {
        st_doc_table(d, 6, heads, "llrrrl");
    }
    size_t beyond = 0;
    for (size_t i = 0; i < c->n; i++) {
        const struct st_sum_drift *x = &c->d[i];
        char mn[128];
        st_doc_mname(x->metric, mn, sizeof(mn));
        struct st_doc_fmt f = st_doc_fmt_of(mn);
        st_doc_row(d);
        st_doc_cell_s(d, x->metric);
        st_doc_cell_s(d, x->stage ? x->stage : "—");
        st_doc_cell(d, NULL);
        st_doc_num(d->b, x->this_v, f.decimals);
        st_doc_cell_end(d);
        st_doc_cell(d, NULL);
        st_doc_num(d->b, x->then_v, f.decimals);
        st_doc_cell_end(d);
        st_doc_cell(d, NULL);
        if (x->has_rel) {
            st_buf_printf(d->b, "%+.2f%%", x->rel * 100);
        } else {
            st_doc_text(d, "n/a");
        }
        st_doc_cell_end(d);
        st_doc_cell(d, x->beyond ? "fail" : NULL);
        if (x->beyond) {
            st_doc_strong(d, "yes");
        } else {
            st_doc_text(d, "no");
        }
        st_doc_cell_end(d);
        st_doc_row_end(d);
        beyond += x->beyond != 0;
    }
    if (c->n > 0) {
        st_doc_table_end(d);
    }
    st_doc_p_open(d);
    struct st_buf t;
    st_buf_init(&t);
    if (c->drifted) {
        st_buf_printf(&t, "Drifted: %zu of %zu metrics beyond the noise threshold.", beyond, c->n);
        st_doc_strong(d, st_buf_str(&t));
    } else {
        st_buf_printf(&t, "No drift: none of %zu metrics beyond the noise threshold.", c->n);
        st_doc_text(d, st_buf_str(&t));
    }
    st_buf_release(&t);
    st_doc_p_close(d);
}

int st_report_drift_md(const char *compare, size_t len, struct st_buf *out, char *err,
                       size_t errlen)
{
    struct st_sum_pool pl = {0};
    struct st_sum_cmp c;
    int rc = st_sum_load_compare(compare, len, &pl, &c, err, errlen);
    if (rc == 0) {
        struct st_doc d = {.b = out, .html = 0};
        st_drift_section(&d, &c, NULL);
    }
    st_sum_pool_release(&pl);
    return rc;
}

/* ---- the drift check ---- */

int st_report_compare(const char *this_summary, size_t this_len, const char *then_summary,
                      size_t then_len, const char *with_path, double noise, struct st_buf *out,
                      int *drifted, char *err, size_t errlen)
{
    struct st_sum_summary a, b;
    char e[400] = "";
    *drifted = 0;
    int rc = st_sum_load(&a, this_summary, this_len, e, sizeof(e));
    if (rc) {
        snprintf(err, errlen, "this summary: %s", e);
        st_sum_pool_release(&a.pool);
        return rc;
    }
    rc = st_sum_load(&b, then_summary, then_len, e, sizeof(e));
    if (rc) {
        snprintf(err, errlen, "the earlier summary: %s", e);
        st_sum_pool_release(&a.pool);
        st_sum_pool_release(&b.pool);
        return rc;
    }
    /* The compare object borrows its strings from a and b, which outlive it here. */
    struct st_sum_cmp c = {.with = (char *)with_path, .plan_hash = b.hash};
    c.d = st_sum_alloc(&a.pool, a.nm * sizeof(*c.d));
    for (size_t i = 0; i < a.nm; i++) {
        const struct st_sum_metric *x = &a.m[i];
        if (x->arm_idx != 0) {
            continue;
        }
        const struct st_sum_metric *y = NULL;
        for (size_t k = 0; k < b.nm && y == NULL; k++) {
            if (b.m[k].arm_idx == 0 && strcmp(b.m[k].stage, x->stage) == 0 &&
                strcmp(b.m[k].name, x->name) == 0) {
                y = &b.m[k];
            }
        }
        if (y == NULL) {
            continue;
        }
        struct st_sum_drift *d = &c.d[c.n++];
        d->metric = x->name;
        d->stage = x->stage;
        d->this_v = x->agg;
        d->then_v = y->agg;
        if (y->agg == 0) {
            d->rel = x->agg == 0 ? 0 : INFINITY;
        } else {
            d->rel = x->agg / y->agg - 1;
        }
        d->has_rel = isfinite(d->rel);
        d->beyond = !(fabs(d->rel) <= noise + ST_STATS_EDGE);
        c.drifted = c.drifted || d->beyond;
    }
    *drifted = c.drifted;
    st_sum_write_compare(&c, out);
    st_sum_pool_release(&a.pool);
    st_sum_pool_release(&b.pool);
    return 0;
}
