/*
 * Decision rules. See rules.h for the order of the rules and docs/campaigns.md for worked
 * examples. Every reason names the metric, both aggregates, the relative difference and the
 * threshold it was held against, so a verdict can be checked by hand from the receipts.
 */
#include "campaign/rules.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "stats/summ.h"

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

const char *st_rules_verdict_name(enum st_rules_verdict v)
{
    switch (v) {
    case ST_RULES_PROMOTE:
        return "promote";
    case ST_RULES_REJECT:
        return "reject";
    case ST_RULES_INCONCLUSIVE:
        return "inconclusive";
    }
    return "?";
}

static const struct st_rules_samples *find(const struct st_rules_arm *a, const char *metric)
{
    for (size_t i = 0; i < a->n_samples; i++) {
        if (strcmp(a->samples[i].metric, metric) == 0) {
            return &a->samples[i];
        }
    }
    return NULL;
}

/* The samples of metric on arm a, or ST_ENOTFOUND with a message. */
static int need(const struct st_rules_arm *a, const char *metric,
                const struct st_rules_samples **out, char *err, size_t errlen)
{
    *out = find(a, metric);
    if (!*out || (*out)->n == 0) {
        st_errf(err, errlen, "arm %s has no samples of metric %s", a->name, metric);
        return ST_ENOTFOUND;
    }
    return 0;
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

static int validate(const struct st_rules_cfg *cfg, char *err, size_t errlen)
{
    if (cfg->n_metrics > ST_RULES_MAX_METRICS) {
        st_errf(err, errlen, "%zu ranked metrics, at most %d", cfg->n_metrics,
                ST_RULES_MAX_METRICS);
        return ST_EUSAGE;
    }
    if (!(cfg->noise >= 0) || !isfinite(cfg->noise)) {
        st_errf(err, errlen, "noise threshold %g is not a fraction >= 0", cfg->noise);
        return ST_EUSAGE;
    }
    for (size_t i = 0; i < cfg->n_metrics; i++) {
        if (!(cfg->metrics[i].weight >= 0) || !isfinite(cfg->metrics[i].weight)) {
            st_errf(err, errlen, "metric %s: weight %g is not >= 0", cfg->metrics[i].name,
                    cfg->metrics[i].weight);
            return ST_EUSAGE;
        }
    }
    return 0;
}

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

/* Rules 1 and 2. Returns 1 when the arm was rejected, 0 when every gate passed, or an error. */
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
        if (s == NULL || s->n == 0) {
            /* A hard gate without its evidence fails: the step that measures it produced no
             * value (a capacity probe that could not place one document, a request that never
             * completed). */
            set(out, ST_RULES_REJECT, "gate %s failed: %s has no value (its step measured none)",
                l->gate, l->metric);
            return 1;
        }
        double v = st_rules_aggregate(l->agg, s->v, s->n);
        if (l->has_min && v < l->min) {
            set(out, ST_RULES_REJECT, "gate %s failed: %s = %.6g, below the minimum %.6g", l->gate,
                l->metric, v, l->min);
            return 1;
        }
        if (l->has_max && v > l->max) {
            set(out, ST_RULES_REJECT, "gate %s failed: %s = %.6g, above the maximum %.6g", l->gate,
                l->metric, v, l->max);
            return 1;
        }
    }
    return 0;
}

/* Rule 3. Returns 1 when a guard rejected the arm, 0 when none did, or an error. */
static int check_guards(const struct st_rules_cfg *cfg, const struct st_rules_arm *base,
                        const struct st_rules_arm *arm, struct st_rules_result *out, char *err,
                        size_t errlen)
{
    for (size_t i = 0; i < cfg->n_guards; i++) {
        const struct st_rules_guard *g = &cfg->guards[i];
        const struct st_rules_samples *sb, *sa;
        int rc = need(base, g->name, &sb, err, errlen);
        if (rc == 0) {
            rc = need(arm, g->name, &sa, err, errlen);
        }
        if (rc != 0) {
            return rc;
        }
        double b = st_rules_aggregate(g->agg, sb->v, sb->n);
        double a = st_rules_aggregate(g->agg, sa->v, sa->n);
        double rel = rel_diff(b, a);
        double worse = -gain_of(g->dir, rel);
        if (worse > g->max_worse + ST_RULES_EDGE) {
            set(out, ST_RULES_REJECT,
                "guard %s: %.6g vs baseline %.6g (%+.2f%%), worse by more than %.2f%%", g->name, a,
                b, 100 * rel, 100 * g->max_worse);
            return 1;
        }
    }
    return 0;
}

int st_rules_decide(const struct st_rules_cfg *cfg, const struct st_rules_arm *base,
                    const struct st_rules_arm *arm, struct st_rules_result *out, char *err,
                    size_t errlen)
{
    memset(out, 0, sizeof(*out));
    int rc = validate(cfg, err, errlen);
    if (rc != 0) {
        return rc;
    }
    rc = check_gates(cfg, arm, out);
    if (rc == 0) {
        rc = check_guards(cfg, base, arm, out, err, errlen);
    }
    if (rc < 0) {
        return rc;
    }
    /* The comparisons are filled even for a rejected arm, for the report. */
    int decided = rc;
    double wsum = 0, score = 0;
    size_t best = SIZE_MAX, worst = SIZE_MAX, short_of = SIZE_MAX;
    for (size_t i = 0; i < cfg->n_metrics; i++) {
        const struct st_rules_metric *m = &cfg->metrics[i];
        const struct st_rules_samples *sb, *sa;
        rc = need(base, m->name, &sb, err, errlen);
        if (rc == 0) {
            rc = need(arm, m->name, &sa, err, errlen);
        }
        if (rc != 0 && decided) {
            /* A gate already rejected the arm (an OOM leaves no samples): that is the verdict. */
            break;
        }
        if (rc != 0) {
            memset(out, 0, sizeof(*out));
            return rc;
        }
        struct st_rules_cmp *c = &out->cmp[i];
        c->base = st_rules_aggregate(m->agg, sb->v, sb->n);
        c->arm = st_rules_aggregate(m->agg, sa->v, sa->n);
        c->n_base = sb->n;
        c->n_arm = sa->n;
        c->rel = rel_diff(c->base, c->arm);
        c->gain = gain_of(m->dir, c->rel);
        c->sig = fabs(c->gain) > cfg->noise + ST_RULES_EDGE;
        out->n_cmp = i + 1;
        if (m->weight > 0 && isfinite(c->gain)) {
            wsum += m->weight;
            score += m->weight * c->gain;
        }
        if (c->sig && c->gain < 0 && (worst == SIZE_MAX || c->gain < out->cmp[worst].gain)) {
            worst = i;
        }
        if (best == SIZE_MAX || c->gain > out->cmp[best].gain) {
            best = i;
        }
        if (m->repeats > 0 && (sa->n < m->repeats || sb->n < m->repeats) && short_of == SIZE_MAX) {
            short_of = i;
        }
    }
    out->composite = wsum > 0 ? score / wsum : 0;
    if (decided) {
        if (err && errlen > 0) {
            err[0] = '\0';
        }
        return 0;
    }
    if (worst != SIZE_MAX) {
        const struct st_rules_cmp *c = &out->cmp[worst];
        set(out, ST_RULES_REJECT,
            "%s: %.6g vs baseline %.6g (%+.2f%%), worse beyond the %.2f%% noise threshold",
            cfg->metrics[worst].name, c->arm, c->base, 100 * c->rel, 100 * cfg->noise);
    } else if (short_of != SIZE_MAX) {
        const struct st_rules_cmp *c = &out->cmp[short_of];
        set(out, ST_RULES_INCONCLUSIVE, "%s: %zu and %zu samples (arm, baseline), %u required",
            cfg->metrics[short_of].name, c->n_arm, c->n_base, cfg->metrics[short_of].repeats);
    } else if (best != SIZE_MAX && out->cmp[best].sig) {
        const struct st_rules_cmp *c = &out->cmp[best];
        set(out, ST_RULES_PROMOTE,
            "%s: %.6g vs baseline %.6g (%+.2f%%), better beyond the %.2f%% noise threshold; "
            "composite %+.2f%%",
            cfg->metrics[best].name, c->arm, c->base, 100 * c->rel, 100 * cfg->noise,
            100 * out->composite);
    } else if (best != SIZE_MAX) {
        const struct st_rules_cmp *c = &out->cmp[best];
        set(out, ST_RULES_INCONCLUSIVE,
            "no difference beyond the %.2f%% noise threshold (largest gain: %s %.6g vs baseline "
            "%.6g, %+.2f%%); the baseline stays",
            100 * cfg->noise, cfg->metrics[best].name, c->arm, c->base, 100 * c->rel);
    } else {
        set(out, ST_RULES_INCONCLUSIVE, "no ranked metric; the baseline stays");
    }
    return 0;
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
