/*
 * The campaign runner's decisions and what is written about them (runner_int.h): per stage, each
 * arm's metric series and outcome gates go to st_rules_decide against the baseline's; then
 * the summary model (src/report/summary.h writes it as summary.json) and the verdict table.
 * Everything here is computed from the units' results in struct rn, so a resumed campaign decides
 * the same way.
 */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/xalloc.h"
#include "campaign/rules.h"
#include "campaign/runner_int.h"
#include "report/report.h"
#include "report/summary.h"
#include "stats/summ.h"
#include "stats/welch.h"

/* ---- decisions ---- */

struct series {
    char name[ST_PLAN_METRIC_MAX];
    double *v;
    size_t n;
    const char **units; /* borrowed unit ids, n */
};

struct sset {
    struct series *s;
    size_t n;
};

static struct series *sset_get(struct sset *ss, const char *name)
{
    for (size_t i = 0; i < ss->n; i++) {
        if (strcmp(ss->s[i].name, name) == 0) {
            return &ss->s[i];
        }
    }
    ss->s = st_xrealloc(ss->s, (ss->n + 1) * sizeof(*ss->s));
    struct series *e = &ss->s[ss->n++];
    memset(e, 0, sizeof(*e));
    st_rn_fmt(e->name, sizeof(e->name), "%s", name);
    return e;
}

static void sset_add(struct sset *ss, const char *name, double v, const char *unit)
{
    struct series *e = sset_get(ss, name);
    e->v = st_xrealloc(e->v, (e->n + 1) * sizeof(double));
    e->units = st_xrealloc(e->units, (e->n + 1) * sizeof(char *));
    e->v[e->n] = v;
    e->units[e->n++] = unit;
}

static void sset_release(struct sset *ss)
{
    for (size_t i = 0; i < ss->n; i++) {
        free(ss->s[i].v);
        free(ss->s[i].units);
    }
    free(ss->s);
    ss->s = NULL;
    ss->n = 0;
}

/* Every metric of arm a in stage s: the units' values in order, then the server.* ones. */
static void collect(const struct astage *as, struct sset *ss)
{
    memset(ss, 0, sizeof(*ss));
    for (size_t i = 0; i < as->n; i++) {
        const struct ures *u = &as->u[i];
        for (size_t k = 0; k < u->n; k++) {
            sset_add(ss, u->v[k].name, u->v[k].v, u->id);
        }
    }
    if (as->up_done && as->up_fail == ST_ARM_OK) {
        if (as->kv > 0) {
            sset_add(ss, "server.kv_capacity_tokens", (double)as->kv, "up");
        }
        if (as->ctx > 0) {
            sset_add(ss, "server.max_context_tokens", (double)as->ctx, "up");
        }
    }
    uint64_t gpu = 0;
    for (size_t i = 0; i < as->n; i++) {
        const struct ures *u = &as->u[i];
        if (u->spec_accept >= 0) {
            sset_add(ss, "server.spec_accept_rate", u->spec_accept, u->id);
        }
        if (u->preemptions >= 0 && !u->is_qualify) {
            sset_add(ss, "server.preemptions", (double)u->preemptions, u->id);
        }
        gpu = u->gpu_mem > gpu ? u->gpu_mem : gpu;
    }
    if (gpu > 0) {
        sset_add(ss, "server.gpu_mem_bytes", (double)gpu, "watch");
    }
}

struct gates {
    struct st_rules_gate g[12];
    char detail[12][512];
    size_t n;
};

static void gate(struct gates *gs, const char *name, int passed, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void gate(struct gates *gs, const char *name, int passed, const char *fmt, ...)
{
    size_t i = gs->n++;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(gs->detail[i], sizeof(gs->detail[i]), fmt, ap);
    va_end(ap);
    gs->g[i] = (struct st_rules_gate){name, passed, gs->detail[i][0] ? gs->detail[i] : NULL};
}

static uint64_t load_errors(const struct astage *as)
{
    uint64_t e = 0;
    for (size_t i = 0; i < as->n; i++) {
        if (!as->u[i].is_qualify) {
            e += as->u[i].errors;
        }
    }
    return e;
}

/* The outcome gates of one arm in one stage (the requests check comes after the rules). */
static void outcome_gates(const struct rn *r, const struct astage *as, struct gates *gs)
{
    const struct st_plan_rules *pr = &r->plan.rules;
    memset(gs, 0, sizeof(*gs));
    int started = !as->up_done || as->up_fail == ST_ARM_OK || as->up_fail == ST_ARM_FAIL_OOM ||
                  as->up_fail == ST_ARM_FAIL_EXIT;
    gate(gs, "startup", started, "%s%s%s", started ? "" : st_arm_fail_name(as->up_fail),
         started ? "" : ": ", started ? "" : as->up_detail);
    if (pr->gate_oom) {
        const char *why = NULL;
        if (as->up_fail == ST_ARM_FAIL_OOM) {
            why = as->up_detail;
        }
        for (size_t i = 0; i < as->n && !why; i++) {
            if (strcmp(as->u[i].server_fail, "oom") == 0) {
                why = as->u[i].detail;
            }
        }
        if (!why && strcmp(as->down_fail, "oom") == 0) {
            why = as->down_detail;
        }
        gate(gs, "oom", why == NULL, "%s%s", why ? "out of memory: " : "", why ? why : "");
    }
    if (pr->gate_server_exit) {
        const char *why = NULL;
        char where[ST_PLAN_NAME_MAX + 16] = "";
        if (as->up_fail == ST_ARM_FAIL_EXIT) {
            why = as->up_detail;
            st_rn_fmt(where, sizeof(where), "at startup");
        }
        for (size_t i = 0; i < as->n && !why; i++) {
            if (strcmp(as->u[i].server_fail, "exit") == 0) {
                why = as->u[i].detail;
                st_rn_fmt(where, sizeof(where), "during %s", as->u[i].step);
            }
        }
        if (!why && strcmp(as->down_fail, "exit") == 0) {
            why = as->down_detail;
            st_rn_fmt(where, sizeof(where), "at the end of the stage");
        }
        gate(gs, "server_exit", why == NULL, "%s%s%s%s", why ? "the server exited " : "", where,
             why ? ": " : "", why ? why : "");
    }
    if (pr->gate_functional || pr->gate_quality) {
        const char *fwhy = NULL, *qwhy = NULL;
        for (size_t i = 0; i < as->n; i++) {
            if (as->u[i].functional_ok == 0 && !fwhy) {
                fwhy = as->u[i].detail;
            }
            if (as->u[i].quality_ok == 0 && !qwhy) {
                qwhy = as->u[i].detail;
            }
        }
        if (pr->gate_functional) {
            gate(gs, "functional", fwhy == NULL, "%s", fwhy ? fwhy : "");
        }
        if (pr->gate_quality) {
            gate(gs, "quality", qwhy == NULL, "%s", qwhy ? qwhy : "");
        }
    }
    const struct ures *broken = NULL;
    for (size_t i = 0; i < as->n && !broken; i++) {
        broken = as->u[i].step_error ? &as->u[i] : NULL;
    }
    gate(gs, "steps", broken == NULL, "%s%s%s", broken ? broken->step : "",
         broken ? " could not run: " : "", broken ? broken->detail : "");

    if (pr->context_tokens > 0) {
        if (as->ctx == 0) {
            gate(gs, "context", 1, "the server does not report its context");
        } else {
            gate(gs, "context", as->ctx >= pr->context_tokens,
                 "the server's context %llu tokens, the plan's %llu", (unsigned long long)as->ctx,
                 (unsigned long long)pr->context_tokens);
        }
    }
}

/* The ranked metric of res without samples on the arm's side (its step produced none), or -1. */
static int missing_metric(const struct st_rules_cfg *cfg, const struct st_rules_result *res)
{
    for (size_t i = 0; i < cfg->n_metrics && i < res->n_cmp; i++) {
        if (res->cmp[i].n_arm == 0 || res->cmp[i].n_base == 0) {
            return (int)i;
        }
    }
    return -1;
}

void st_rn_decide_stage(struct rn *r, int s)
{
    const struct st_plan_stage *stage = s == 0 ? &r->plan.screening : &r->plan.full;
    struct st_plan_rules_view view;
    st_plan_rules_view(&r->plan, stage, &view);
    view.cfg.designs = &r->designs;
    struct astage *base = &r->arms[0].st[s];
    struct sset bs;
    collect(base, &bs);
    struct st_rules_samples *bsam = st_xcalloc(bs.n + 1, sizeof(*bsam));
    for (size_t i = 0; i < bs.n; i++) {
        bsam[i] = (struct st_rules_samples){bs.s[i].name, bs.s[i].v, bs.s[i].n};
    }
    struct st_rules_arm barm = {"baseline", bsam, bs.n, NULL, 0};
    /* Every arm that ran in the stage, decided together: the Holm families span them. */
    struct st_rules_arm arms[MAX_ARMS];
    struct sset ss[MAX_ARMS];
    struct st_rules_samples *sam[MAX_ARMS];
    struct gates *gs = st_xcalloc(MAX_ARMS, sizeof(*gs)); /* 6 KiB each */
    int idx[MAX_ARMS];
    size_t n = 0;
    for (uint32_t a = 1; a < r->n_arms; a++) {
        struct astage *as = &r->arms[a].st[s];
        if (!as->ran) {
            continue;
        }
        collect(as, &ss[n]);
        sam[n] = st_xcalloc(ss[n].n + 1, sizeof(*sam[n]));
        for (size_t i = 0; i < ss[n].n; i++) {
            sam[n][i] = (struct st_rules_samples){ss[n].s[i].name, ss[n].s[i].v, ss[n].s[i].n};
        }
        outcome_gates(r, as, &gs[n]);
        arms[n] = (struct st_rules_arm){r->arms[a].name, sam[n], ss[n].n, gs[n].g, gs[n].n};
        idx[n++] = (int)a;
    }
    struct st_rules_result *res = st_xcalloc(n + 1, sizeof(*res));
    char e[512] = "";
    size_t family = r->family[s] > n ? r->family[s] : n;
    int rc = st_rules_decide_stage(&view.cfg, &barm, arms, n, family, res, e, sizeof(e));
    for (size_t k = 0; k < n; k++) {
        struct astage *as = &r->arms[idx[k]].st[s];
        if (as->frozen) {
            continue; /* read by an on_best_of resolution: it stays what it was then */
        }
        uint64_t ne = load_errors(as), nb = load_errors(base);
        if (rc != 0) {
            memset(&as->res, 0, sizeof(as->res));
            as->res.verdict = ST_RULES_INCONCLUSIVE;
            st_rn_fmt(as->res.reason, sizeof(as->res.reason), "the rules could not run: %s", e);
        } else {
            as->res = res[k];
        }
        int miss = rc == 0 ? missing_metric(&view.cfg, &as->res) : -1;
        if (as->res.verdict != ST_RULES_REJECT && miss >= 0 && !as->res.more) {
            const struct st_rules_cmp *c = &as->res.cmp[miss];
            as->res.verdict = ST_RULES_REJECT;
            if (ne > nb) {
                /* No samples because the requests failed: that is the reason. */
                st_rn_fmt(as->res.reason, sizeof(as->res.reason),
                          "gate requests failed: %llu failed load requests, the baseline %llu (so "
                          "%s has no samples)",
                          (unsigned long long)ne, (unsigned long long)nb, view.metrics[miss].name);
            } else {
                st_rn_fmt(as->res.reason, sizeof(as->res.reason),
                          "no evidence to compare: %s has %zu samples, the baseline %zu (a step "
                          "produced no value; see its unit)",
                          view.metrics[miss].name, c->n_arm, c->n_base);
            }
        }
        /* Failed load requests beyond the baseline's reject an arm the plan's own gates,
         * limits, guards and metrics did not (they come first: their reason is the sharper). */
        if (as->res.verdict != ST_RULES_REJECT && ne > nb) {
            as->res.verdict = ST_RULES_REJECT;
            st_rn_fmt(as->res.reason, sizeof(as->res.reason),
                      "gate requests failed: %llu failed load requests, the baseline %llu",
                      (unsigned long long)ne, (unsigned long long)nb);
        }
        if (as->res.verdict == ST_RULES_REJECT) {
            as->res.more = 0;
        }
        as->decided = 1;
    }
    for (size_t k = 0; k < n; k++) {
        free(sam[k]);
        sset_release(&ss[k]);
    }
    free(gs);
    free(res);
    free(bsam);
    sset_release(&bs);
}

/* ---- summary: the model src/report/summary.c writes as summary.json ---- */

#define DUP(s) st_sum_strdup(&out->pool, (s))

static void fill_params(struct st_sum_summary *out, const struct st_target_params *ps,
                        const struct st_target_params *base, struct st_sum_kvp **kv, size_t *n)
{
    *kv = st_sum_alloc(&out->pool, ps->n * sizeof(**kv));
    *n = 0;
    for (uint32_t i = 0; i < ps->n; i++) {
        if (base) {
            const struct st_target_param *b = st_target_param_find(base, ps->v[i].name);
            if (b && strcmp(b->value, ps->v[i].value) == 0) {
                continue;
            }
        }
        (*kv)[*n].k = DUP(ps->v[i].name);
        (*kv)[(*n)++].v = DUP(ps->v[i].value);
    }
}

static enum st_rules_agg agg_of(const struct rn *r, const char *metric)
{
    for (uint32_t i = 0; i < r->plan.rules.n_metrics; i++) {
        if (strcmp(r->plan.rules.metrics[i].name, metric) == 0) {
            return r->plan.rules.metrics[i].agg;
        }
    }
    return r->plan.rules.agg ? r->plan.rules.agg : ST_RULES_MEDIAN;
}

/* The verdict of the last stage that decided arm a. */
static const char *final_verdict(const struct rn *r, int a)
{
    if (a == 0) {
        return "baseline";
    }
    for (int s = N_STAGES - 1; s >= 0; s--) {
        const struct astage *as = &r->arms[a].st[s];
        if (as->decided) {
            return st_rules_verdict_name(as->res.verdict);
        }
    }
    return "inconclusive"; /* did not run: said in its reasons */
}

/* How the verdicts were reached (docs/campaigns.md, "Decision rules"). */
static void fill_statistics(struct st_sum_summary *out, const struct rn *r)
{
    struct st_sum_stats *st = st_sum_alloc(&out->pool, sizeof(*st));
    st->test = DUP("welch_t_log");
    st->effect = DUP("ratio of the geometric means of the repeats, arm / baseline");
    st->sequential = DUP("pocock: a constant nominal level at every look from repeats.min to "
                         "repeats.max (normal-theory crossing probability by recursive "
                         "integration)");
    st->correction = DUP("holm: per stage and direction, over every arm of the stage; better: "
                         "arms x ranked metrics, worse: arms x (ranked metrics + guards); alpha / "
                         "2 each");
    st->alpha = r->plan.rules.alpha;
    st->margin = ST_RULES_MARGIN;
    st->equivalence_confidence = 1 - 2 * ST_RULES_FUTILITY;
    st->nfamily = N_STAGES;
    st->family = st_sum_alloc(&out->pool, N_STAGES * sizeof(uint64_t));
    for (int s = 0; s < N_STAGES; s++) {
        st->family[s] = r->family[s];
    }
    out->stats = st;
}

static void fill_cmp(struct st_sum_summary *out, struct st_sum_cmpitem *o, const char *metric,
                     const char *kind, const struct st_rules_cmp *c)
{
    o->metric = DUP(metric);
    o->kind = DUP(kind);
    o->finding = DUP(st_rules_finding_name(c->finding));
    o->n = (double)c->n;
    o->n_arm = c->n_arm;
    o->n_base = c->n_base;
    o->min_n = c->min_n;
    o->max_n = c->max_n;
    o->single = c->single;
    o->aggregate = DUP(c->agg_name ? c->agg_name : "medians");
    o->base = c->base;
    o->arm = c->arm;
    o->rel = c->rel;
    o->threshold = c->threshold;
    o->lo = c->lo;
    o->hi = c->hi;
    o->confidence = c->level;
    o->equivalence_lo = c->elo;
    o->equivalence_hi = c->ehi;
    o->p_better = c->p_better;
    o->p_worse = c->p_worse;
    o->q_better = c->q_better;
    o->q_worse = c->q_worse;
    o->holm_better = c->holm_better;
    o->holm_worse = c->holm_worse;
    o->cv_base = c->cv_base;
    o->cv_arm = c->cv_arm;
    o->needed_n = c->needed_n;
}

/* A decision of stage s and every comparison it rests on: the ranked metrics, then the guards. */
static void fill_decision(struct st_sum_summary *out, struct st_sum_decision *d, const struct rn *r,
                          int s, const struct st_rules_result *res)
{
    d->stage = DUP(st_rn_stage_names[s]);
    d->verdict = DUP(st_rules_verdict_name(res->verdict));
    d->reason = DUP(res->reason);
    d->composite = res->composite;
    d->has_stats = 1;
    d->more = res->more;
    d->equivalent = res->equivalent;
    d->single = res->single;
    const struct st_plan_stage *stage = s == 0 ? &r->plan.screening : &r->plan.full;
    struct st_plan_rules_view view;
    st_plan_rules_view(&r->plan, stage, &view);
    d->cmp = st_sum_alloc(&out->pool, (res->n_cmp + res->n_gcmp) * sizeof(*d->cmp));
    for (size_t i = 0; i < res->n_cmp && i < view.cfg.n_metrics; i++) {
        fill_cmp(out, &d->cmp[d->ncmp++], view.metrics[i].name, "ranked", &res->cmp[i]);
    }
    for (size_t i = 0; i < res->n_gcmp && i < view.cfg.n_guards; i++) {
        fill_cmp(out, &d->cmp[d->ncmp++], view.guards[i].name, "guard", &res->gcmp[i]);
    }
}

/* One line per stage decided (or skipped, or not escalated) of arm a. */
static void fill_reasons(struct st_sum_summary *out, struct st_sum_arm *o, const struct rn *r,
                         uint32_t a)
{
    const struct arm *arm = &r->arms[a];
    o->reasons = st_sum_alloc(&out->pool, (N_STAGES + 1) * sizeof(char *));
    struct st_buf b;
    st_buf_init(&b);
    for (int s = 0; s < N_STAGES; s++) {
        const struct astage *as = &arm->st[s];
        st_buf_clear(&b);
        if (as->decided) {
            st_buf_printf(&b, "%s: %s", st_rn_stage_names[s], as->res.reason);
            const struct astage *bs = &r->arms[0].st[s];
            if (as->kv && bs->kv) {
                st_buf_printf(&b, "; KV capacity %llu tokens vs baseline %llu (%+.2f%%)",
                              (unsigned long long)as->kv, (unsigned long long)bs->kv,
                              100.0 * ((double)as->kv / (double)bs->kv - 1));
            }
        } else if (as->skipped[0]) {
            st_buf_printf(&b, "%s: %s", st_rn_stage_names[s], as->skipped);
        } else if (a != 0 && s == 1 && arm->st[0].decided && r->complete) {
            st_buf_printf(&b, "full: not escalated");
        } else {
            continue;
        }
        o->reasons[o->nreasons++] = DUP(st_buf_str(&b));
    }
    if (a == 0 && r->chosen == 0 && r->complete) {
        o->reasons[o->nreasons++] = DUP("the baseline stays: no arm passed the full stage as "
                                        "promote");
    }
    st_buf_release(&b);
}

static void fill_failure(struct st_sum_summary *out, struct st_sum_arm *o, const struct arm *arm)
{
    for (int s = 0; s < N_STAGES; s++) {
        const struct astage *fs = &arm->st[s];
        if (fs->fail_kind[0]) {
            struct st_sum_failure *f = st_sum_alloc(&out->pool, sizeof(*f));
            f->kind = DUP(fs->fail_kind);
            f->stage = DUP(st_rn_stage_names[s]);
            f->step = fs->fail_step[0] ? DUP(fs->fail_step) : NULL;
            f->detail = DUP(fs->fail_detail);
            f->evidence = DUP(fs->fail_evidence);
            o->failure = f;
            return;
        }
    }
}

static void fill_gates(struct st_sum_summary *out, struct st_sum_arm *o, const struct rn *r,
                       uint32_t a)
{
    const struct arm *arm = &r->arms[a];
    struct gates gs;
    o->gates =
        st_sum_alloc(&out->pool, N_STAGES * sizeof(gs.g) / sizeof(gs.g[0]) * sizeof(*o->gates));
    for (int s = 0; s < N_STAGES; s++) {
        if (!arm->st[s].ran) {
            continue;
        }
        outcome_gates(r, &arm->st[s], &gs);
        uint64_t ne = load_errors(&arm->st[s]), nb = a ? load_errors(&r->arms[0].st[s]) : ne;
        gate(&gs, "requests", ne <= nb, "%llu failed load requests, the baseline %llu",
             (unsigned long long)ne, (unsigned long long)nb);
        for (size_t g = 0; g < gs.n; g++) {
            struct st_sum_gate *e = &o->gates[o->ngates++];
            e->stage = DUP(st_rn_stage_names[s]);
            e->name = DUP(gs.g[g].name);
            e->passed = gs.g[g].passed;
            e->detail = DUP(gs.g[g].detail);
        }
    }
}

static void fill_arm(struct st_sum_summary *out, struct st_sum_arm *o, const struct rn *r,
                     uint32_t a)
{
    const struct arm *arm = &r->arms[a];
    o->name = DUP(arm->name);
    o->verdict = DUP(final_verdict(r, (int)a));
    fill_reasons(out, o, r, a);
    o->on = arm->on[0] ? DUP(arm->on) : NULL;
    fill_params(out, &arm->ps, NULL, &o->params, &o->nparams);
    fill_params(out, &arm->ps, &r->arms[0].ps, &o->changed, &o->nchanged);
    const struct astage *first = arm->st[0].up_done ? &arm->st[0] : &arm->st[1];
    o->has_kv = first->kv != 0;
    o->kv = (double)first->kv;
    o->has_ctx = first->ctx != 0;
    o->ctx = (double)first->ctx;
    fill_failure(out, o, arm);
    fill_gates(out, o, r, a);
    o->dec = st_sum_alloc(&out->pool, N_STAGES * sizeof(*o->dec));
    for (int s = 0; s < N_STAGES; s++) {
        if (arm->st[s].decided) {
            fill_decision(out, &o->dec[o->ndec++], r, s, &arm->st[s].res);
        }
    }
}

/* Every series of (stage, arm) with its aggregate and summary statistics, appended to out->m
 * (allocated by the caller for all of them). */
static void fill_metrics(struct st_sum_summary *out, const struct rn *r, int s, uint32_t a)
{
    struct sset ss;
    collect(&r->arms[a].st[s], &ss);
    for (size_t i = 0; i < ss.n; i++) {
        const struct series *e = &ss.s[i];
        struct st_sum_metric *o = &out->m[out->nm++];
        double mn = e->v[0], mx = e->v[0];
        for (size_t k = 1; k < e->n; k++) {
            mn = e->v[k] < mn ? e->v[k] : mn;
            mx = e->v[k] > mx ? e->v[k] : mx;
        }
        o->stage = DUP(st_rn_stage_names[s]);
        o->arm = DUP(r->arms[a].name);
        o->name = DUP(e->name);
        o->values = st_sum_alloc(&out->pool, e->n * sizeof(double));
        memcpy(o->values, e->v, e->n * sizeof(double));
        o->nvalues = e->n;
        o->agg = st_rules_aggregate(agg_of(r, e->name), e->v, e->n);
        o->min = mn;
        o->max = mx;
        struct st_summ sm;
        st_summ_compute(&sm, e->v, e->n);
        o->median = sm.median;
        o->mean = sm.mean;
        o->mad = sm.mad;
        o->cv = st_welch_cv(e->v, e->n);
        o->n = (int64_t)e->n;
        o->units = st_sum_alloc(&out->pool, e->n * sizeof(char *));
        for (size_t k = 0; k < e->n; k++) {
            o->units[k] = DUP(e->units[k]);
        }
        o->nunits = e->n;
    }
    sset_release(&ss);
}

/* One entry per step of (stage, arm), appended to out->t (allocated by the caller): every
 * repeat's per-request TTFT together, at most TTFT_KEEP of them. */
static void fill_ttft(struct st_sum_summary *out, const struct rn *r, int s, uint32_t a)
{
    const struct astage *as = &r->arms[a].st[s];
    for (size_t i = 0; i < as->n; i++) {
        const struct ures *u = &as->u[i];
        if (u->rep != 0 || u->is_qualify) {
            continue;
        }
        struct st_sum_ttft *t = &out->t[out->nt++];
        t->stage = DUP(st_rn_stage_names[s]);
        t->arm = DUP(r->arms[a].name);
        t->step = DUP(u->step);
        t->v = st_sum_alloc(&out->pool, TTFT_KEEP * sizeof(double));
        for (size_t k = 0; k < as->n && t->n < TTFT_KEEP; k++) {
            if (strcmp(as->u[k].step, u->step) != 0) {
                continue;
            }
            for (size_t q = 0; q < as->u[k].n_ttft && t->n < TTFT_KEEP; q++) {
                t->v[t->n++] = as->u[k].ttft[q];
            }
        }
    }
}

/* What the restore checked, from final-state.json's checks: their names (details: "name: detail"
 * each, "; "-joined), appended to out. Nothing when the restore recorded no checks. */
static void restore_checks(const struct rn *r, int details, struct st_buf *out)
{
    struct st_json d;
    st_json_init(&d, 0);
    if (r->final_state.len && st_json_parse(&d, r->final_state.data, r->final_state.len) == 0) {
        int arr = st_json_get(&d, 0, "checks");
        for (int i = st_json_first(&d, arr); i >= 0; i = st_json_next(&d, arr, i)) {
            struct st_buf name, detail;
            st_buf_init(&name);
            st_buf_init(&detail);
            int okn = st_json_str(&d, st_json_get(&d, i, "name"), &name) == 0;
            int okd = details && st_json_str(&d, st_json_get(&d, i, "detail"), &detail) == 0;
            if (okn) {
                st_buf_printf(out, "%s%s%s%s", out->len ? (details ? "; " : ", ") : "",
                              st_buf_str(&name), okd ? ": " : "", okd ? st_buf_str(&detail) : "");
            }
            st_buf_release(&name);
            st_buf_release(&detail);
        }
    }
    st_json_release(&d);
}

/* The summary of r into *out (zeroed here; release with st_sum_pool_release(&out->pool)). */
static void fill_summary(struct rn *r, struct st_sum_summary *out)
{
    memset(out, 0, sizeof(*out));
    out->name = DUP(r->plan.name);
    out->hash = DUP(r->hash);
    out->file = DUP("plan.yaml");
    out->noise = r->plan.rules.noise;
    out->alpha = r->plan.rules.alpha;
    fill_statistics(out, r);
    out->complete = r->complete;
    out->chosen = DUP(r->arms[r->chosen].name);
    out->restored = r->restored;
    struct st_buf chk;
    st_buf_init(&chk);
    restore_checks(r, 1, &chk);
    out->restore_checks = chk.len ? DUP(chk.data) : NULL;
    st_buf_release(&chk);
    out->has_run = 1;
    out->sim_speed = r->speed;
    out->seed = r->seed;
    out->nstages = N_STAGES;
    out->stages = st_sum_alloc(&out->pool, N_STAGES * sizeof(*out->stages));
    for (int s = 0; s < N_STAGES; s++) {
        struct st_sum_stage *st = &out->stages[s];
        st->name = DUP(st_rn_stage_names[s]);
        st->arms = st_sum_alloc(&out->pool, r->n_arms * sizeof(char *));
        for (uint32_t a = 0; a < r->n_arms; a++) {
            if (r->arms[a].st[s].ran) {
                st->arms[st->narms++] = DUP(r->arms[a].name);
            }
        }
    }
    out->narms = r->n_arms;
    out->arms = st_sum_alloc(&out->pool, r->n_arms * sizeof(*out->arms));
    for (uint32_t a = 0; a < r->n_arms; a++) {
        fill_arm(out, &out->arms[a], r, a);
    }
    /* Room for every entry at once. collect() makes at most one series per value of a unit
     * (u->n) plus five server.* ones (KV capacity, context, spec acceptance, preemptions, GPU
     * memory) per (stage, arm) that ran; fill_ttft one entry per first repeat of a measuring
     * step. */
    size_t nm = 0, nt = 0;
    for (int s = 0; s < N_STAGES; s++) {
        for (uint32_t a = 0; a < r->n_arms; a++) {
            const struct astage *as = &r->arms[a].st[s];
            nm += as->ran ? 5 : 0;
            for (size_t i = 0; i < as->n; i++) {
                nm += as->ran ? as->u[i].n : 0;
                nt += as->u[i].rep == 0 && !as->u[i].is_qualify;
            }
        }
    }
    out->m = st_sum_alloc(&out->pool, nm * sizeof(*out->m));
    out->t = st_sum_alloc(&out->pool, nt * sizeof(*out->t));
    for (int s = 0; s < N_STAGES; s++) {
        for (uint32_t a = 0; a < r->n_arms; a++) {
            if (r->arms[a].st[s].ran) {
                fill_metrics(out, r, s, a);
            }
        }
    }
    for (int s = 0; s < N_STAGES; s++) {
        for (uint32_t a = 0; a < r->n_arms; a++) {
            fill_ttft(out, r, s, a);
        }
    }
}

#undef DUP

int st_rn_write_summary(struct rn *r)
{
    struct st_sum_summary s;
    fill_summary(r, &s);
    struct st_buf b;
    st_buf_init(&b);
    st_sum_write(&s, &b);
    if (r->o->compare_with && r->complete) {
        char path[PATH_MAX];
        st_rn_fmt(path, sizeof(path), "%s/summary.json", r->o->compare_with);
        struct st_buf then, cmp;
        st_buf_init(&then);
        st_buf_init(&cmp);
        char e[512];
        int drifted = 0;
        int rc = st_rn_read_file(path, 64u << 20, &then, e, sizeof(e));
        if (rc == 0) {
            rc = st_report_compare(b.data, b.len, then.data, then.len, r->o->compare_with,
                                   r->plan.rules.noise, &cmp, &drifted, e, sizeof(e));
        }
        if (rc == 0) {
            s.cmp = st_sum_alloc(&s.pool, sizeof(*s.cmp));
            rc = st_sum_load_compare(cmp.data, cmp.len, &s.pool, s.cmp, e, sizeof(e));
        }
        if (rc == 0) {
            st_buf_clear(&b);
            st_sum_write(&s, &b);
            st_rn_say(r, "--compare-with %s: the baseline %s", r->o->compare_with,
                      drifted ? "DRIFTED beyond the noise threshold" : "did not drift");
        } else {
            st_rn_say(r, "--compare-with %s: %s", r->o->compare_with, e);
        }
        st_buf_release(&then);
        st_buf_release(&cmp);
    }
    int rc = st_rn_write_file(r, "summary.json", b.data, b.len);
    st_buf_release(&b);
    st_sum_pool_release(&s.pool);
    return rc;
}

/* ---- the verdict table ---- */

void st_rn_print_table(struct rn *r)
{
    FILE *f = r->o->out;
    if (!f) {
        return;
    }
    fprintf(f, "\ncampaign %s  plan %.12s  %s\n", r->plan.name, r->hash,
            r->complete ? "complete" : "NOT complete");
    fprintf(f, "%-16s %-44s %-13s %-13s %s\n", "arm", "changes", "screening", "full", "reason");
    for (uint32_t a = 0; a < r->n_arms; a++) {
        const struct arm *arm = &r->arms[a];
        char ch[256] = "";
        size_t off = 0;
        for (uint32_t i = 0; i < arm->ps.n && off < sizeof(ch); i++) {
            const struct st_target_param *b =
                st_target_param_find(&r->arms[0].ps, arm->ps.v[i].name);
            if (a == 0 || (b && strcmp(b->value, arm->ps.v[i].value) == 0)) {
                continue;
            }
            off += (size_t)st_rn_fmt(ch + off, sizeof(ch) - off, "%s%s=%s", off ? " " : "",
                                     arm->ps.v[i].name, arm->ps.v[i].value);
        }
        if (arm->on[0] && off < sizeof(ch)) {
            st_rn_fmt(ch + off, sizeof(ch) - off, " (on %s)", arm->on);
        }
        const char *v[N_STAGES];
        const char *reason = "";
        for (int s = 0; s < N_STAGES; s++) {
            const struct astage *as = &arm->st[s];
            v[s] = a == 0           ? (as->ran ? "baseline" : "-")
                   : as->decided    ? st_rules_verdict_name(as->res.verdict)
                   : as->skipped[0] ? "skipped"
                                    : "-";
            if (as->decided) {
                reason = as->res.reason;
            } else if (as->skipped[0]) {
                reason = as->skipped;
            }
        }
        fprintf(f, "%-16s %-44s %-13s %-13s %s\n", arm->name, a == 0 ? "-" : ch, v[0], v[1],
                reason);
    }
    fprintf(f, "chosen: %s\n", r->arms[r->chosen].name);
    int tty = r->o->color;
    if (r->complete) {
        struct st_buf names;
        st_buf_init(&names);
        restore_checks(r, 0, &names);
        fprintf(f, "restore: %s%s%s%s%s\n", !r->restored && tty ? "\033[31m" : "",
                r->restored ? "proven (final-state.json"
                            : "NOT PROVEN: the server may not be as it was (final-state.json",
                names.len ? ": " : "", st_buf_str(&names), !r->restored && tty ? ")\033[0m" : ")");
        st_buf_release(&names);
    }
    fprintf(f, "archive: %s\n", r->out);
    fflush(f);
}
