/*
 * Views of a parsed campaign plan (plan.h): its canonical JSON form and SHA-256 hash (what is
 * pre-registered: deterministic, defaults filled, parameters sorted), the rules view one stage
 * decides on, and an arm's full parameter set (fixed, baseline, its own; on_best_of resolved).
 * Reads a plan, never parses one: calls planread.c only. Pure: no file I/O.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/sha256.h"
#include "base/xalloc.h"
#include "campaign/plan.h"

#include "campaign/plan_int.h"

/* ---- canonical form ---- */

void st_plan_jw_params(struct st_jw *w, const char *key, const struct st_target_params *ps)
{
    st_jw_key(w, key);
    st_jw_obj_open(w);
    for (uint32_t i = 0; i < ps->n; i++) {
        st_jw_kstr(w, ps->v[i].name, ps->v[i].value);
    }
    st_jw_obj_close(w);
}

static void jw_stage(struct st_jw *w, const char *key, const struct st_plan_stage *st)
{
    st_jw_key(w, key);
    st_jw_arr_open(w);
    for (uint32_t i = 0; i < st->n; i++) {
        const struct st_plan_step *s = &st->steps[i];
        st_jw_obj_open(w);
        st_jw_kstr(w, "id", s->id);
        st_jw_kstr(w, "kind", st_plan_step_kinds[s->kind - 1]);
        if (s->repeats_max != s->repeats) {
            st_jw_key(w, "repeats");
            st_jw_obj_open(w);
            st_jw_ku64(w, "min", s->repeats);
            st_jw_ku64(w, "max", s->repeats_max);
            st_jw_obj_close(w);
        } else {
            st_jw_ku64(w, "repeats", s->repeats);
        }
        st_jw_kstr(w, "suite", s->suite);
        st_jw_ku64(w, "input_tokens", s->input_tokens);
        st_jw_ku64(w, "output_tokens", s->output_tokens);
        st_jw_ku64(w, "seed_output_tokens", s->seed_output_tokens);
        st_jw_kstrv(w, "categories", s->categories[0], sizeof(s->categories[0]), s->n_categories);
        st_jw_ku32s(w, "concurrency", s->concurrency, s->n_concurrency);
        st_jw_kf64(w, "shared_frac", s->shared_frac);
        st_jw_ku64(w, "requests_per_cc", s->requests_per_cc);
        st_jw_kbool(w, "flush_warm", s->flush_warm);
        st_jw_kf64(w, "duration_s", s->duration_s);
        st_jw_obj_close(w);
    }
    st_jw_arr_close(w);
}

/* A metric or guard rule: opened here with the fields both have, closed by jw_rule_close. */
static void jw_rule_open(struct st_jw *w, const char *metric, enum st_rules_dir dir,
                         enum st_rules_agg agg)
{
    st_jw_obj_open(w);
    st_jw_kstr(w, "metric", metric);
    st_jw_kstr(w, "direction", st_plan_dir_names[dir - 1]);
    st_jw_kstr(w, "aggregate", st_plan_agg_names[agg - 1]);
}

static void jw_rule_close(struct st_jw *w, int single)
{
    if (single) {
        st_jw_ku64(w, "samples", 1);
    }
    st_jw_obj_close(w);
}

void st_plan_rules_json(struct st_jw *w, const struct st_plan_rules *r)
{
    const struct {
        const char *key;
        int on;
    } gates[] = {{"functional", r->gate_functional},
                 {"quality", r->gate_quality},
                 {"oom", r->gate_oom},
                 {"server_exit", r->gate_server_exit}};
    st_jw_key(w, "rules");
    st_jw_obj_open(w);
    st_jw_kf64(w, "noise", r->noise);
    /* Held only when not the default, so plans written before the key keep their hash. */
    if (r->alpha != ST_RULES_DEFAULT_ALPHA) {
        st_jw_kf64(w, "alpha", r->alpha);
    }
    st_jw_kstr(w, "aggregate", st_plan_agg_names[r->agg - 1]);
    st_jw_kstr(w, "escalation",
               r->escalation == ST_RULES_ESCALATE_BEST  ? "best"
               : r->escalation == ST_RULES_ESCALATE_ALL ? "all"
                                                        : "promoted");
    st_jw_key(w, "metrics");
    st_jw_arr_open(w);
    for (uint32_t i = 0; i < r->n_metrics; i++) {
        const struct st_plan_metric *m = &r->metrics[i];
        jw_rule_open(w, m->name, m->dir, m->agg);
        st_jw_ku64(w, "repeats", m->repeats);
        st_jw_kf64(w, "weight", m->weight);
        jw_rule_close(w, m->single);
    }
    st_jw_arr_close(w);
    st_jw_key(w, "guards");
    st_jw_arr_open(w);
    for (uint32_t i = 0; i < r->n_guards; i++) {
        const struct st_plan_guard *g = &r->guards[i];
        jw_rule_open(w, g->name, g->dir, g->agg);
        st_jw_kf64(w, "max_worse", g->max_worse);
        jw_rule_close(w, g->single);
    }
    st_jw_arr_close(w);
    st_jw_key(w, "gates");
    st_jw_obj_open(w);
    for (size_t i = 0; i < sizeof(gates) / sizeof(gates[0]); i++) {
        st_jw_kbool(w, gates[i].key, gates[i].on);
    }
    st_jw_ku64(w, "context_tokens", r->context_tokens);
    st_jw_key(w, "limits");
    st_jw_arr_open(w);
    for (uint32_t i = 0; i < r->n_limits; i++) {
        const struct st_plan_limit *l = &r->limits[i];
        st_jw_obj_open(w);
        st_jw_kstr(w, "name", l->gate);
        st_jw_kstr(w, "metric", l->metric);
        st_jw_kstr(w, "aggregate", st_plan_agg_names[l->agg - 1]);
        st_jw_knf64(w, "min", l->has_min, l->min);
        st_jw_knf64(w, "max", l->has_max, l->max);
        st_jw_obj_close(w);
    }
    st_jw_arr_close(w);
    st_jw_obj_close(w);
    st_jw_obj_close(w);
}

void st_plan_canonical(const struct st_plan *p, struct st_buf *out)
{
    const struct st_target_spec *t = &p->target;
    struct st_jw w;
    st_jw_init(&w, out);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "format", "servetune-plan/1");
    st_jw_kstr(&w, "name", p->name);
    st_jw_knstr(&w, "description", p->description);
    st_jw_key(&w, "target");
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "kind", st_plan_target_kinds[t->kind - 1]);
    st_jw_knstr(&w, "profile", t->profile);
    st_plan_jw_params(&w, "overrides", &t->overrides);
    st_jw_knstr(&w, "start", t->start);
    st_jw_ki64(&w, "stop_signal", t->stop_signal);
    st_jw_kf64(&w, "stop_timeout_s", t->stop_timeout_s);
    st_jw_knstr(&w, "log", t->log);
    st_jw_knstr(&w, "compose_file", t->compose_file);
    st_jw_knstr(&w, "service", t->service);
    st_jw_kstr(&w, "override",
               t->override == ST_TARGET_OVERRIDE_ENVIRONMENT ? "environment" : "command");
    st_jw_knstr(&w, "base_url", t->base_url);
    st_jw_knstr(&w, "health_url", t->health_url);
    st_jw_kf64(&w, "health_timeout_s", t->health_timeout_s);
    st_jw_obj_close(&w);
    st_plan_jw_params(&w, "baseline", &p->baseline);
    st_plan_jw_params(&w, "fixed", &p->fixed);
    st_jw_key(&w, "arms");
    st_jw_arr_open(&w);
    for (uint32_t i = 0; i < p->n_arms; i++) {
        const struct st_plan_arm *a = &p->arms[i];
        st_jw_obj_open(&w);
        st_jw_kstr(&w, "name", a->name);
        st_plan_jw_params(&w, "set", &a->set);
        st_jw_kbool(&w, "multi_variable", a->multi_variable);
        st_jw_kstrv(&w, "on_best_of", a->on_best_of[0], sizeof(a->on_best_of[0]), a->n_on_best_of);
        st_jw_knstr(&w, "note", a->note);
        st_jw_obj_close(&w);
    }
    st_jw_arr_close(&w);
    st_jw_key(&w, "stages");
    st_jw_obj_open(&w);
    jw_stage(&w, "screening", &p->screening);
    jw_stage(&w, "full", &p->full);
    st_jw_ku64(&w, "full_min_output_tokens", p->full_min_output_tokens);
    st_jw_kf64(&w, "full_min_soak_s", p->full_min_soak_s);
    if (p->interleaved) {
        /* Only when set: plans written before the key existed keep their hash. */
        st_jw_kstr(&w, "order", "interleaved");
    }
    st_jw_obj_close(&w);
    st_plan_rules_json(&w, &p->rules);
    st_jw_obj_close(&w);
}

void st_plan_hash(const struct st_plan *p, char hex[ST_SHA256_HEX])
{
    struct st_buf b;
    st_buf_init(&b);
    st_plan_canonical(p, &b);
    st_sha256_hex(b.data, b.len, hex);
    st_buf_release(&b);
}

/* ---- the rules a stage decides on ---- */

static int in_stage(const struct st_plan_stage *st, const char *metric)
{
    const char *dot = strchr(metric, '.');
    size_t n = dot ? (size_t)(dot - metric) : strlen(metric);
    return (n == 6 && memcmp(metric, "server", 6) == 0) || st_plan_find_step(st, metric, n) != NULL;
}

/* Whether metric is decided in stage, and then its looks there: its step's repeats (min, max;
 * full may repeat more than screening); 2..2 for server metrics (they are decided on one value:
 * the rule has samples: 1). */
static int stage_design(const struct st_plan_stage *stage, const char *metric, uint32_t *lo,
                        uint32_t *hi)
{
    if (!in_stage(stage, metric)) {
        return 0;
    }
    const char *dot = strchr(metric, '.');
    const struct st_plan_step *s =
        dot ? st_plan_find_step(stage, metric, (size_t)(dot - metric)) : NULL;
    *lo = s && s->repeats >= 2 ? s->repeats : 2;
    *hi = s && s->repeats_max >= *lo ? s->repeats_max : *lo;
    return 1;
}

void st_plan_rules_view(const struct st_plan *p, const struct st_plan_stage *stage,
                        struct st_plan_rules_view *view)
{
    const struct st_plan_rules *r = &p->rules;
    memset(view, 0, sizeof(*view));
    view->cfg.noise = r->noise;
    view->cfg.alpha = r->alpha;
    uint32_t lo, hi;
    for (uint32_t i = 0; i < r->n_metrics; i++) {
        const struct st_plan_metric *m = &r->metrics[i];
        if (stage_design(stage, m->name, &lo, &hi)) {
            view->metrics[view->cfg.n_metrics++] =
                (struct st_rules_metric){m->name, m->dir, m->agg, lo, hi, m->weight, m->single};
        }
    }
    for (uint32_t i = 0; i < r->n_guards; i++) {
        const struct st_plan_guard *g = &r->guards[i];
        if (stage_design(stage, g->name, &lo, &hi)) {
            view->guards[view->cfg.n_guards++] =
                (struct st_rules_guard){g->name, g->dir, g->agg, g->max_worse, lo, hi, g->single};
        }
    }
    for (uint32_t i = 0; i < r->n_limits; i++) {
        const struct st_plan_limit *l = &r->limits[i];
        if (in_stage(stage, l->metric)) {
            view->limits[view->cfg.n_limits++] = (struct st_rules_limit){
                l->gate, l->metric, l->agg, l->has_min, l->has_max, l->min, l->max};
        }
    }
    view->cfg.metrics = view->metrics;
    view->cfg.guards = view->guards;
    view->cfg.limits = view->limits;
}

/* ---- an arm's parameters ---- */

/* Sets name = value in ps (capacity ST_PLAN_MAX_PARAMS * 2, enough for fixed + baseline). */
static void put_param(struct st_target_params *ps, const struct st_target_param *src)
{
    for (uint32_t i = 0; i < ps->n; i++) {
        if (strcmp(ps->v[i].name, src->name) == 0) {
            free(ps->v[i].value);
            ps->v[i].value = st_xstrdup(src->value);
            return;
        }
    }
    struct st_target_param *d = &ps->v[ps->n++];
    *d = *src;
    d->value = st_xstrdup(src->value);
}

static const struct st_plan_arm *find_arm(const struct st_plan *p, const char *name)
{
    for (uint32_t i = 0; i < p->n_arms; i++) {
        if (strcmp(p->arms[i].name, name) == 0) {
            return &p->arms[i];
        }
    }
    return NULL;
}

int st_plan_arm_params(const struct st_plan *p, uint32_t idx, const char *winner,
                       struct st_target_params *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (idx >= p->n_arms) {
        st_errf(err, errlen, "arm %u: the plan has %u arms", idx, p->n_arms);
        return ST_EUSAGE;
    }
    const struct st_plan_arm *a = &p->arms[idx];
    const struct st_plan_arm *w = NULL;
    int is_base = !winner || strcmp(winner, "baseline") == 0;
    int listed = a->n_on_best_of == 0 && is_base;
    for (uint32_t i = 0; i < a->n_on_best_of && !listed; i++) {
        listed = strcmp(a->on_best_of[i], is_base ? "baseline" : winner) == 0;
    }
    if (!listed) {
        st_errf(err, errlen, "arm %s: '%s' is not one of the arms it may run on", a->name,
                winner ? winner : "baseline");
        return ST_EPARSE;
    }
    /* Parsing checked that on_best_of names only earlier arms, so the winner is found. */
    w = is_base ? NULL : find_arm(p, winner);
    out->v = st_xcalloc(2 * ST_PLAN_MAX_PARAMS, sizeof(*out->v));
    for (uint32_t i = 0; i < p->fixed.n; i++) {
        put_param(out, &p->fixed.v[i]);
    }
    for (uint32_t i = 0; i < p->baseline.n; i++) {
        put_param(out, &p->baseline.v[i]);
    }
    for (uint32_t i = 0; w && i < w->set.n; i++) {
        put_param(out, &w->set.v[i]);
    }
    /* The arm's own changes, counted against what it runs on. */
    uint32_t n_changed = 0;
    for (uint32_t i = 0; i < a->set.n; i++) {
        const struct st_target_param *before = st_target_param_find(out, a->set.v[i].name);
        n_changed += !before || strcmp(before->value, a->set.v[i].value) != 0;
        put_param(out, &a->set.v[i]);
    }
    qsort(out->v, out->n, sizeof(*out->v), st_plan_cmp_param);
    const char *on = w ? w->name : "baseline";
    if (n_changed == 0) {
        st_errf(err, errlen, "arm %s changes nothing on top of %s", a->name, on);
        st_target_params_release(out);
        return ST_EPARSE;
    }
    if (n_changed > 1 && !a->multi_variable) {
        st_errf(err, errlen,
                "arm %s changes %u parameters on top of %s; one variable per arm, or declare "
                "multi_variable: true",
                a->name, n_changed, on);
        st_target_params_release(out);
        return ST_EPARSE;
    }
    return 0;
}
