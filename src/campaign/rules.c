/*
 * Decision rules. See rules.h for the test and the order of the rules, docs/campaigns.md for
 * worked examples. Every reason names the metric, both aggregates, the relative difference with
 * its interval and confidence, n per side and the threshold it was held against, so a verdict
 * can be checked by hand from the receipts.
 */
#include "campaign/rules.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/names.h"
#include "base/xalloc.h"
#include "stats/dist.h"
#include "stats/holm.h"
#include "stats/summ.h"
#include "stats/welch.h"

#define POWER_Z 0.8416212335729143 /* Q^-1(0.2): the power asked of needed_n */

double st_rules_aggregate(enum st_rules_agg agg, const double *v, size_t n)
{
    struct st_summ s;
    st_summ_compute(&s, v, n);
    switch (agg) {
    case ST_RULES_MEAN:
        return s.mean;
    case ST_RULES_MIN:
        return s.min;
    case ST_RULES_MAX:
        return s.max;
    case ST_RULES_MEDIAN:
    default:
        return s.median;
    }
}

static const char *const rules_verdict_names[] = {[ST_RULES_PROMOTE] = "promote",
                                                  [ST_RULES_REJECT] = "reject",
                                                  [ST_RULES_INCONCLUSIVE] = "inconclusive"};

const char *st_rules_verdict_name(enum st_rules_verdict v)
{
    return ST_NAME_OF(rules_verdict_names, v, "?");
}

static const char *const rules_finding_names[] = {[ST_RULES_OPEN] = "open",
                                                  [ST_RULES_BETTER] = "better",
                                                  [ST_RULES_WORSE] = "worse",
                                                  [ST_RULES_SUSPECT_BETTER] = "suspect_better",
                                                  [ST_RULES_SUSPECT_WORSE] = "suspect_worse",
                                                  [ST_RULES_WITHIN] = "within"};

const char *st_rules_finding_name(enum st_rules_finding f)
{
    return ST_NAME_OF(rules_finding_names, f, "?");
}

void st_rules_designs_release(struct st_rules_designs *d)
{
    for (size_t i = 0; i < d->n; i++) {
        st_gseq_release(&d->g[i]);
    }
    d->n = 0;
}

/* The prepared design for looks min_n..max_n (validated). A full cache recycles its last slot. */
static const struct st_gseq *design(struct st_rules_designs *d, uint32_t min_n, uint32_t max_n)
{
    for (size_t i = 0; i < d->n; i++) {
        if (d->g[i].n_min == min_n && d->g[i].n_max == max_n) {
            return &d->g[i];
        }
    }
    if (d->n == ST_RULES_MAX_DESIGNS) {
        st_gseq_release(&d->g[--d->n]);
    }
    struct st_gseq *g = &d->g[d->n];
    if (st_gseq_init(g, min_n, max_n) != 0) {
        abort(); /* validate() accepted only designs st_gseq_init takes */
    }
    d->n++;
    return g;
}

static const struct st_rules_samples *find(const struct st_rules_arm *a, const char *metric)
{
    for (size_t i = 0; i < a->n_samples; i++) {
        if (strcmp(a->samples[i].metric, metric) == 0) {
            return a->samples[i].n ? &a->samples[i] : NULL;
        }
    }
    return NULL;
}

/* (arm - base) / |base|; 0 when both are 0, +-inf when only the baseline is. */
static double rel_diff(double base, double arm)
{
    if (base == 0) {
        return arm == 0 ? 0 : (arm > 0 ? INFINITY : -INFINITY);
    }
    return (arm - base) / fabs(base);
}

static double gain_of(enum st_rules_dir dir, double rel)
{
    return dir == ST_RULES_LOWER ? -rel : rel;
}

static int valid_design(uint32_t min_n, uint32_t max_n)
{
    return min_n >= 2 && max_n >= min_n && max_n - min_n < ST_GSEQ_MAX_LOOKS;
}

static int validate(const struct st_rules_cfg *cfg, char *err, size_t errlen)
{
    if (cfg->n_metrics > ST_RULES_MAX_METRICS || cfg->n_guards > ST_RULES_MAX_METRICS) {
        st_errf(err, errlen, "%zu ranked metrics and %zu guards, at most %d each", cfg->n_metrics,
                cfg->n_guards, ST_RULES_MAX_METRICS);
        return ST_EUSAGE;
    }
    if (!(cfg->noise >= 0) || !(cfg->noise < 1)) {
        st_errf(err, errlen, "noise threshold %g is not a fraction in [0, 1)", cfg->noise);
        return ST_EUSAGE;
    }
    if (!(cfg->alpha >= 0) || !(cfg->alpha < 1)) {
        st_errf(err, errlen, "alpha %g is not in (0, 1)", cfg->alpha);
        return ST_EUSAGE;
    }
    for (size_t i = 0; i < cfg->n_metrics; i++) {
        const struct st_rules_metric *m = &cfg->metrics[i];
        if (!(m->weight >= 0) || !isfinite(m->weight)) {
            st_errf(err, errlen, "metric %s: weight %g is not >= 0", m->name, m->weight);
            return ST_EUSAGE;
        }
        if (!m->single && !valid_design(m->min_n, m->max_n)) {
            st_errf(err, errlen, "metric %s: repeats %u..%u, need 2 <= min <= max (%d looks)",
                    m->name, m->min_n, m->max_n, ST_GSEQ_MAX_LOOKS);
            return ST_EUSAGE;
        }
    }
    for (size_t i = 0; i < cfg->n_guards; i++) {
        const struct st_rules_guard *g = &cfg->guards[i];
        if (!g->single && !valid_design(g->min_n, g->max_n)) {
            st_errf(err, errlen, "guard %s: repeats %u..%u, need 2 <= min <= max (or samples: 1)",
                    g->name, g->min_n, g->max_n);
            return ST_EUSAGE;
        }
    }
    return 0;
}

/* ---- one comparison ---- */

/* What compare() keeps beyond the public cmp for the later passes. */
struct work {
    struct st_welch w;
    int tested; /* w is valid and n reached the first look: q_* are real */
    int nonpos; /* a value had no logarithm */
    const struct st_gseq *g;
};

/*
 * The statistics of one metric before the families: aggregates, the relative difference of the
 * geometric means, the p-values and sequential p-values. q_* stay 1 until the first look.
 */
static void compare(const struct st_rules_cfg *cfg, enum st_rules_dir dir, enum st_rules_agg agg,
                    uint32_t min_n, uint32_t max_n, int single, double threshold,
                    const struct st_rules_samples *sa, const struct st_rules_samples *sb,
                    struct st_rules_cmp *c, struct work *wk)
{
    memset(c, 0, sizeof(*c));
    memset(wk, 0, sizeof(*wk));
    c->min_n = min_n;
    c->max_n = max_n;
    c->single = single;
    c->agg_name = agg == ST_RULES_MEAN  ? "means"
                  : agg == ST_RULES_MIN ? "minima"
                  : agg == ST_RULES_MAX ? "maxima"
                                        : "medians";
    c->threshold = threshold;
    c->p_better = c->p_worse = c->q_better = c->q_worse = 1;
    c->lo = -INFINITY;
    c->hi = INFINITY;
    c->n_arm = sa ? sa->n : 0;
    c->n_base = sb ? sb->n : 0;
    if (!sa || !sb) {
        c->finding = ST_RULES_OPEN;
        return;
    }
    size_t n = sa->n < sb->n ? sa->n : sb->n;
    c->n = n;
    c->base = st_rules_aggregate(agg, sb->v, n);
    c->arm = st_rules_aggregate(agg, sa->v, n);
    c->cv_base = st_welch_cv(sb->v, n);
    c->cv_arm = st_welch_cv(sa->v, n);
    c->rel = rel_diff(c->base, c->arm);
    c->gain = gain_of(dir, c->rel);
    if (single) {
        c->lo = c->hi = c->rel;
        return;
    }
    int rc = st_welch_log(sa->v, n, sb->v, n, &wk->w);
    if (rc == ST_EPARSE) {
        wk->nonpos = 1;
        return;
    }
    if (rc != 0) {
        return; /* one sample per side: no spread, no look */
    }
    c->rel = expm1(wk->w.d);
    c->gain = gain_of(dir, c->rel);
    /* The nulls: the gain (the loss) is at most the margin, a fraction of the threshold. */
    double m = ST_RULES_MARGIN * threshold;
    double up = st_welch_p_above(&wk->w, log1p(m)), down = st_welch_p_below(&wk->w, log1p(-m));
    c->p_better = dir == ST_RULES_LOWER ? down : up;
    c->p_worse = dir == ST_RULES_LOWER ? up : down;
    if (n < min_n) {
        return;
    }
    wk->tested = 1;
    if (min_n == max_n) {
        c->q_better = c->p_better;
        c->q_worse = c->p_worse;
    } else {
        wk->g = design(cfg->designs, min_n, max_n);
        c->q_better = st_gseq_seq_p(wk->g, c->p_better);
        c->q_worse = st_gseq_seq_p(wk->g, c->p_worse);
    }
}

/* The nominal one-sided level of one look under a family level. */
static double nominal(const struct work *wk, double level)
{
    return wk->g ? st_gseq_nominal(wk->g, level) : level;
}

/* After the families: the finding, the interval at the level the estimate's direction faced, and
 * the repeats that would resolve a difference the size of the threshold. */
static void conclude(enum st_rules_dir dir, int rej_better, int rej_worse, int guard,
                     struct st_rules_cmp *c, const struct work *wk)
{
    double thr = c->threshold;
    int beyond_worse = -c->gain > thr + ST_RULES_EDGE;
    int beyond_better = !guard && c->gain > thr + ST_RULES_EDGE;
    if (c->single) {
        c->finding = c->n == 0       ? ST_RULES_OPEN
                     : beyond_worse  ? ST_RULES_WORSE
                     : beyond_better ? ST_RULES_BETTER
                                     : ST_RULES_WITHIN;
        c->sig = c->finding == ST_RULES_WORSE ? -1 : c->finding == ST_RULES_BETTER ? 1 : 0;
        c->elo = c->lo;
        c->ehi = c->hi;
        return;
    }
    if (!wk->tested) {
        c->finding = ST_RULES_OPEN;
        return;
    }
    if (beyond_worse) {
        c->finding = rej_worse ? ST_RULES_WORSE : ST_RULES_SUSPECT_WORSE;
    } else if (beyond_better) {
        c->finding = rej_better ? ST_RULES_BETTER : ST_RULES_SUSPECT_BETTER;
    } else {
        c->finding = ST_RULES_WITHIN;
    }
    c->sig = c->finding == ST_RULES_BETTER ? 1 : c->finding == ST_RULES_WORSE ? -1 : 0;
    double fam = c->gain >= 0 && !guard ? c->holm_better : c->holm_worse;
    double nu = nominal(wk, fam);
    double lo, hi;
    st_welch_interval(&wk->w, nu, &lo, &hi);
    c->lo = expm1(lo);
    c->hi = expm1(hi);
    c->level = 1 - 2 * nu;
    (void)dir;
    st_welch_interval(&wk->w, ST_RULES_FUTILITY, &lo, &hi);
    c->elo = expm1(lo);
    c->ehi = expm1(hi);
    double s2 = 0.5 * (wk->w.var_a + wk->w.var_b), eff = log1p(thr > 0 ? thr : 0.01);
    if (s2 > 0) {
        double z = st_dist_norm_isf(nu) + POWER_Z;
        double need = ceil(2 * s2 * z * z / (eff * eff));
        c->needed_n = need > 1e6 ? 1000000u : (uint32_t)(need < 2 ? 2 : need);
    }
}

/* The comparison's interval on the gain scale (better > 0). */
static void gain_bounds(enum st_rules_dir dir, const struct st_rules_cmp *c, double *lo, double *hi)
{
    *lo = dir == ST_RULES_LOWER ? -c->hi : c->lo;
    *hi = dir == ST_RULES_LOWER ? -c->lo : c->hi;
}

/* ---- reasons ---- */

static void set(struct st_rules_result *out, enum st_rules_verdict v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set(struct st_rules_result *out, enum st_rules_verdict v, const char *fmt, ...)
{
    out->verdict = v;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->reason, sizeof(out->reason), fmt, ap);
    va_end(ap);
}

/* "AGG X vs baseline Y; +R% [+L%, +H%] (ratio of geometric means at C% confidence, n=N per
 * side; Welch t on logs, sequential p P vs Holm level A)" */
static void describe(const struct st_rules_cmp *c, int worse, char *out, size_t len)
{
    if (c->single) {
        snprintf(out, len, "%.6g vs baseline %.6g (%+.2f%%; rests on one sample: samples: 1)",
                 c->arm, c->base, 100 * c->rel);
        return;
    }
    double q = worse ? c->q_worse : c->q_better, lv = worse ? c->holm_worse : c->holm_better;
    snprintf(out, len,
             "%.6g vs baseline %.6g (%s); %+.2f%% [%+.2f%%, %+.2f%%] (ratio of geometric means at "
             "%.2f%% confidence, n=%zu per side; Welch t on logs, sequential p %.3g vs Holm level "
             "%.3g)",
             c->arm, c->base, c->agg_name, 100 * c->rel, 100 * c->lo, 100 * c->hi, 100 * c->level,
             c->n, q, lv);
}

/* The noise and the repeats that would resolve a threshold-sized difference, for an inconclusive
 * reason. */
static void resolve_note(const struct st_rules_cmp *c, double thr, char *out, size_t len)
{
    double cv = c->cv_arm > c->cv_base ? c->cv_arm : c->cv_base;
    if (c->needed_n == 0) {
        snprintf(out, len, "no spread at n=%zu", c->n);
    } else if (c->needed_n > c->max_n) {
        snprintf(out, len,
                 "CV %.1f%% at n=%zu: about %u repeats per side would resolve a %.2f%% "
                 "difference, more than repeats.max %u",
                 100 * cv, c->n, c->needed_n, 100 * thr, c->max_n);
    } else {
        snprintf(out, len,
                 "CV %.1f%% at n=%zu: about %u repeats per side would resolve a %.2f%% difference",
                 100 * cv, c->n, c->needed_n, 100 * thr);
    }
}

/* ---- the stage ---- */

/* Rules 1 and 2. Returns 1 when the arm was rejected, 0 when every gate passed. */
static int check_gates(const struct st_rules_cfg *cfg, const struct st_rules_arm *arm,
                       struct st_rules_result *out)
{
    for (size_t i = 0; i < arm->n_gates; i++) {
        const struct st_rules_gate *g = &arm->gates[i];
        if (!g->passed) {
            set(out, ST_RULES_REJECT, "gate %s failed%s%s", g->name, g->detail ? ": " : "",
                g->detail ? g->detail : "");
            return 1;
        }
    }
    for (size_t i = 0; i < cfg->n_limits; i++) {
        const struct st_rules_limit *l = &cfg->limits[i];
        const struct st_rules_samples *s = find(arm, l->metric);
        if (s == NULL) {
            /* A hard gate without its evidence fails: the step that measures it produced no
             * value (a capacity probe that could not place one document, a request that never
             * completed). */
            int server = strncmp(l->metric, "server.", 7) == 0;
            set(out, ST_RULES_REJECT, "gate %s failed: %s has no value (%s)", l->gate, l->metric,
                server ? "the server does not report it: no such counter in its /metrics"
                       : "its step measured none");
            return 1;
        }
        double v = st_rules_aggregate(l->agg, s->v, s->n);
        if (l->has_min && v < l->min) {
            set(out, ST_RULES_REJECT, "gate %s failed: %s = %.6g (n=%zu), below the minimum %.6g",
                l->gate, l->metric, v, s->n, l->min);
            return 1;
        }
        if (l->has_max && v > l->max) {
            set(out, ST_RULES_REJECT, "gate %s failed: %s = %.6g (n=%zu), above the maximum %.6g",
                l->gate, l->metric, v, s->n, l->max);
            return 1;
        }
    }
    return 0;
}

/* Rules 3 to 7 for one arm whose gates passed, its comparisons concluded. */
static void decide_arm(const struct st_rules_cfg *cfg, struct st_rules_result *out)
{
    char d[384], note[192];
    for (size_t i = 0; i < cfg->n_guards; i++) {
        const struct st_rules_cmp *c = &out->gcmp[i];
        if (c->finding == ST_RULES_WORSE) {
            describe(c, 1, d, sizeof(d));
            out->single = c->single;
            set(out, ST_RULES_REJECT, "guard %s: %s, worse by more than %.2f%%%s",
                cfg->guards[i].name, d, 100 * c->threshold, c->single ? "" : " with evidence");
            return;
        }
    }
    /* Per finding, the comparison a reason names: the one of largest gain (sign 1), of smallest
     * gain (-1), or the first (0, open); none for within. */
    static const int sign[] = {
        [ST_RULES_OPEN] = 0,           [ST_RULES_BETTER] = 1,         [ST_RULES_WORSE] = -1,
        [ST_RULES_SUSPECT_BETTER] = 1, [ST_RULES_SUSPECT_WORSE] = -1,
    };
    size_t pick[ST_RULES_WITHIN + 1];
    for (size_t k = 0; k <= ST_RULES_WITHIN; k++) {
        pick[k] = SIZE_MAX;
    }
    size_t top = SIZE_MAX, wide = SIZE_MAX;
    for (size_t i = 0; i < cfg->n_metrics; i++) {
        const struct st_rules_cmp *c = &out->cmp[i];
        size_t *p = &pick[c->finding];
        if (c->finding != ST_RULES_WITHIN &&
            (*p == SIZE_MAX || sign[c->finding] * (c->gain - out->cmp[*p].gain) > 0)) {
            *p = i;
        }
        if (c->finding != ST_RULES_OPEN && (top == SIZE_MAX || c->gain > out->cmp[top].gain)) {
            top = i;
        }
        if (c->finding != ST_RULES_OPEN &&
            (wide == SIZE_MAX || c->hi - c->lo > out->cmp[wide].hi - out->cmp[wide].lo)) {
            wide = i;
        }
    }
    size_t worst = pick[ST_RULES_WORSE], best = pick[ST_RULES_BETTER], open = pick[ST_RULES_OPEN];
    size_t sus_w = pick[ST_RULES_SUSPECT_WORSE], sus_b = pick[ST_RULES_SUSPECT_BETTER];
    double thr = cfg->noise;
    if (worst != SIZE_MAX) {
        describe(&out->cmp[worst], 1, d, sizeof(d));
        out->single = out->cmp[worst].single;
        set(out, ST_RULES_REJECT, "%s: %s, worse beyond the %.2f%% noise threshold%s",
            cfg->metrics[worst].name, d, 100 * thr, out->single ? "" : " with evidence");
        return;
    }
    if (open != SIZE_MAX) {
        const struct st_rules_cmp *c = &out->cmp[open];
        out->more = 1;
        if (c->n_arm == 0 || c->n_base == 0) {
            set(out, ST_RULES_INCONCLUSIVE, "%s: no samples (arm %zu, baseline %zu)",
                cfg->metrics[open].name, c->n_arm, c->n_base);
        } else if (c->n >= c->min_n && c->n >= 2) {
            out->more = 0;
            set(out, ST_RULES_INCONCLUSIVE,
                "%s: values that are not all > 0 (%.6g vs %.6g) cannot be compared on logs",
                cfg->metrics[open].name, c->arm, c->base);
        } else {
            set(out, ST_RULES_INCONCLUSIVE, "%s: %zu of at least %u repeats per side, no look yet",
                cfg->metrics[open].name, c->n, c->min_n);
        }
        return;
    }
    size_t sus_guard = SIZE_MAX;
    for (size_t i = 0; i < cfg->n_guards && sus_guard == SIZE_MAX; i++) {
        if (out->gcmp[i].finding == ST_RULES_SUSPECT_WORSE ||
            out->gcmp[i].finding == ST_RULES_OPEN) {
            sus_guard = i;
        }
    }
    if (best != SIZE_MAX && sus_w == SIZE_MAX && sus_guard == SIZE_MAX) {
        describe(&out->cmp[best], 0, d, sizeof(d));
        out->single = out->cmp[best].single;
        set(out, ST_RULES_PROMOTE,
            "%s: %s, better beyond the %.2f%% noise threshold%s; composite %+.2f%%",
            cfg->metrics[best].name, d, 100 * thr, out->single ? "" : " with evidence",
            100 * out->composite);
        return;
    }
    /* Inconclusive. Equivalent when every ranked interval is inside +-noise and every guard's
     * worse bound below its max_worse: no further repeat could move the verdict. */
    int eq = 1;
    for (size_t i = 0; i < cfg->n_metrics && eq; i++) {
        if (out->cmp[i].finding == ST_RULES_OPEN) {
            eq = 0;
            break;
        }
        eq = out->cmp[i].elo > -thr && out->cmp[i].ehi < thr;
    }
    for (size_t i = 0; i < cfg->n_guards && eq; i++) {
        const struct st_rules_cmp *c = &out->gcmp[i];
        double lo, hi;
        gain_bounds(cfg->guards[i].dir, c, &lo, &hi);
        eq = c->finding == ST_RULES_WITHIN && (c->single || -lo < c->threshold);
    }
    out->equivalent = eq;
    int looks_left = 0;
    for (size_t i = 0; i < cfg->n_metrics; i++) {
        looks_left |= out->cmp[i].n < out->cmp[i].max_n;
    }
    for (size_t i = 0; i < cfg->n_guards; i++) {
        looks_left |= !out->gcmp[i].single && out->gcmp[i].n < out->gcmp[i].max_n;
    }
    out->more = !eq && looks_left;
    const char *tail = out->more ? "more repeats asked" : "the baseline stays";
    if (best != SIZE_MAX || sus_b != SIZE_MAX) {
        size_t b = best != SIZE_MAX ? best : sus_b;
        describe(&out->cmp[b], 0, d, sizeof(d));
        if (sus_w != SIZE_MAX || sus_guard != SIZE_MAX) {
            const char *wn =
                sus_w != SIZE_MAX ? cfg->metrics[sus_w].name : cfg->guards[sus_guard].name;
            const struct st_rules_cmp *wc =
                sus_w != SIZE_MAX ? &out->cmp[sus_w] : &out->gcmp[sus_guard];
            char d2[384];
            describe(wc, 1, d2, sizeof(d2));
            set(out, ST_RULES_INCONCLUSIVE,
                "%s: %s looks better, but %s%s: %s looks worse beyond its threshold without the "
                "evidence to reject; %s",
                cfg->metrics[b].name, d, sus_w != SIZE_MAX ? "" : "guard ", wn, d2, tail);
        } else {
            resolve_note(&out->cmp[b], thr, note, sizeof(note));
            set(out, ST_RULES_INCONCLUSIVE,
                "%s: %s: beyond the %.2f%% noise threshold but without the evidence; %s; %s",
                cfg->metrics[b].name, d, 100 * thr, note, tail);
        }
        return;
    }
    if (sus_w != SIZE_MAX || sus_guard != SIZE_MAX) {
        int g = sus_w == SIZE_MAX;
        const struct st_rules_cmp *c = g ? &out->gcmp[sus_guard] : &out->cmp[sus_w];
        describe(c, 1, d, sizeof(d));
        resolve_note(c, c->threshold, note, sizeof(note));
        set(out, ST_RULES_INCONCLUSIVE,
            "%s%s: %s: worse beyond its %.2f%% threshold but without the evidence; %s; %s",
            g ? "guard " : "", g ? cfg->guards[sus_guard].name : cfg->metrics[sus_w].name, d,
            100 * c->threshold, note, tail);
        return;
    }
    if (top == SIZE_MAX) {
        set(out, ST_RULES_INCONCLUSIVE, "no ranked metric; the baseline stays");
        return;
    }
    if (eq) {
        size_t w = 0;
        for (size_t i = 1; i < cfg->n_metrics; i++) {
            const struct st_rules_cmp *c = &out->cmp[i], *o = &out->cmp[w];
            w = fmax(fabs(c->elo), fabs(c->ehi)) > fmax(fabs(o->elo), fabs(o->ehi)) ? i : w;
        }
        const struct st_rules_cmp *c = &out->cmp[w];
        set(out, ST_RULES_INCONCLUSIVE,
            "no difference beyond the %.2f%% noise threshold: every ranked metric's %.0f%% "
            "interval lies inside +-%.2f%% (widest: %s %+.2f%% [%+.2f%%, %+.2f%%], ratio of "
            "geometric means, n=%zu per side; Welch t on logs), so more repeats would not change "
            "the verdict; the baseline stays",
            100 * thr, 100 * (1 - 2 * ST_RULES_FUTILITY), 100 * thr, cfg->metrics[w].name,
            100 * c->rel, 100 * c->elo, 100 * c->ehi, c->n);
        return;
    }
    const struct st_rules_cmp *c = &out->cmp[top];
    describe(c, 0, d, sizeof(d));
    resolve_note(&out->cmp[wide], thr, note, sizeof(note));
    set(out, ST_RULES_INCONCLUSIVE,
        "no difference beyond the %.2f%% noise threshold (largest gain: %s %s); widest interval "
        "%s: %s; %s",
        100 * thr, cfg->metrics[top].name, d, cfg->metrics[wide].name, note, tail);
}

int st_rules_decide_stage(const struct st_rules_cfg *cfg_in, const struct st_rules_arm *base,
                          const struct st_rules_arm *arms, size_t n_arms, size_t family,
                          struct st_rules_result *out, char *err, size_t errlen)
{
    struct st_rules_cfg cfg = *cfg_in;
    cfg.alpha = cfg.alpha > 0 ? cfg.alpha : ST_RULES_DEFAULT_ALPHA;
    int rc = validate(&cfg, err, errlen);
    if (rc != 0) {
        return rc;
    }
    family = family < n_arms ? n_arms : family;
    struct st_rules_designs local = {0};
    if (!cfg.designs) {
        cfg.designs = &local;
    }
    size_t nm = cfg.n_metrics, ng = cfg.n_guards;
    size_t n_plus = family * nm, n_minus = family * (nm + ng);
    double *qp = st_xcalloc(n_plus ? n_plus : 1, sizeof(double));
    double *qm = st_xcalloc(n_minus ? n_minus : 1, sizeof(double));
    double *lp = st_xcalloc(n_plus ? n_plus : 1, sizeof(double));
    double *lm = st_xcalloc(n_minus ? n_minus : 1, sizeof(double));
    unsigned char *rp = st_xcalloc(n_plus ? n_plus : 1, 1);
    unsigned char *rm = st_xcalloc(n_minus ? n_minus : 1, 1);
    struct work *wk = st_xcalloc(n_arms * (nm + ng) + 1, sizeof(*wk));
    for (size_t i = 0; i < n_plus; i++) {
        qp[i] = 1;
    }
    for (size_t i = 0; i < n_minus; i++) {
        qm[i] = 1;
    }
    /* Pass 1: every comparison's statistics; guards count in "worse" only. An arm a gate
     * rejected keeps p = 1 (its samples, if any, are not evidence). */
    unsigned char *gated = st_xcalloc(n_arms + 1, 1);
    for (size_t a = 0; a < n_arms; a++) {
        struct st_rules_result *o = &out[a];
        memset(o, 0, sizeof(*o));
        gated[a] = (unsigned char)check_gates(&cfg, &arms[a], o);
        for (size_t i = 0; i < nm; i++) {
            const struct st_rules_metric *m = &cfg.metrics[i];
            compare(&cfg, m->dir, m->agg, m->min_n, m->max_n, m->single, cfg.noise,
                    find(&arms[a], m->name), find(base, m->name), &o->cmp[i],
                    &wk[a * (nm + ng) + i]);
            if (!gated[a] && !m->single) {
                qp[a * nm + i] = o->cmp[i].q_better;
                qm[a * (nm + ng) + i] = o->cmp[i].q_worse;
            }
        }
        for (size_t i = 0; i < ng; i++) {
            const struct st_rules_guard *g = &cfg.guards[i];
            compare(&cfg, g->dir, g->agg, g->single ? 1 : g->min_n, g->single ? 1 : g->max_n,
                    g->single, g->max_worse, find(&arms[a], g->name), find(base, g->name),
                    &o->gcmp[i], &wk[a * (nm + ng) + nm + i]);
            if (!gated[a] && !g->single) {
                qm[a * (nm + ng) + nm + i] = o->gcmp[i].q_worse;
            }
        }
        o->n_cmp = nm;
        o->n_gcmp = ng;
    }
    /* Pass 2: the families. */
    double half = cfg.alpha / 2;
    st_holm(qp, n_plus, half, rp, lp);
    st_holm(qm, n_minus, half, rm, lm);
    /* Pass 3: findings, intervals, verdicts. */
    for (size_t a = 0; a < n_arms; a++) {
        struct st_rules_result *o = &out[a];
        double wsum = 0, score = 0;
        for (size_t i = 0; i < nm; i++) {
            struct st_rules_cmp *c = &o->cmp[i];
            c->holm_better = lp[a * nm + i];
            c->holm_worse = lm[a * (nm + ng) + i];
            conclude(cfg.metrics[i].dir, rp[a * nm + i], rm[a * (nm + ng) + i], 0, c,
                     &wk[a * (nm + ng) + i]);
            if (cfg.metrics[i].weight > 0 && isfinite(c->gain) && c->n > 0) {
                wsum += cfg.metrics[i].weight;
                score += cfg.metrics[i].weight * c->gain;
            }
        }
        for (size_t i = 0; i < ng; i++) {
            struct st_rules_cmp *c = &o->gcmp[i];
            c->holm_worse = lm[a * (nm + ng) + nm + i];
            c->holm_better = NAN;
            conclude(cfg.guards[i].dir, 0, rm[a * (nm + ng) + nm + i], 1, c,
                     &wk[a * (nm + ng) + nm + i]);
        }
        o->composite = wsum > 0 ? score / wsum : 0;
        if (!gated[a]) {
            decide_arm(&cfg, o);
        }
    }
    free(gated);
    free(wk);
    free(qp);
    free(qm);
    free(lp);
    free(lm);
    free(rp);
    free(rm);
    st_rules_designs_release(&local);
    if (err && errlen > 0) {
        err[0] = '\0';
    }
    return 0;
}

int st_rules_decide(const struct st_rules_cfg *cfg, const struct st_rules_arm *base,
                    const struct st_rules_arm *arm, struct st_rules_result *out, char *err,
                    size_t errlen)
{
    return st_rules_decide_stage(cfg, base, arm, 1, 1, out, err, errlen);
}

int st_rules_choose(const struct st_rules_result *full, size_t n)
{
    int pick = -1;
    for (size_t i = 0; i < n && i < (size_t)INT32_MAX; i++) {
        if (full[i].verdict != ST_RULES_PROMOTE || !(full[i].composite > 0)) {
            continue;
        }
        if (pick < 0 || full[i].composite > full[pick].composite) {
            pick = (int)i;
        }
    }
    return pick;
}

size_t st_rules_escalate(enum st_rules_escalation mode, const struct st_rules_result *screen,
                         size_t n, unsigned char *go)
{
    size_t count = 0;
    int best = mode == ST_RULES_ESCALATE_BEST ? st_rules_choose(screen, n) : -1;
    for (size_t i = 0; i < n; i++) {
        switch (mode) {
        case ST_RULES_ESCALATE_BEST:
            go[i] = best >= 0 && (size_t)best == i;
            break;
        case ST_RULES_ESCALATE_ALL:
            go[i] =
                screen[i].verdict == ST_RULES_PROMOTE || screen[i].verdict == ST_RULES_INCONCLUSIVE;
            break;
        case ST_RULES_ESCALATE_PROMOTED:
        default:
            go[i] = screen[i].verdict == ST_RULES_PROMOTE;
            break;
        }
        count += go[i];
    }
    return count;
}
