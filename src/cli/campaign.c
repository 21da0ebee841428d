/*
 * servetune campaign: the campaign plan commands. `check PLAN [--json]` reads a plan
 * (docs/campaigns.md), validates it with st_plan_parse and st_plan_arm_params, and prints what a
 * run would do: the plan hash, how each arm comes up, the stages, the rules and a rough time
 * estimate. It sends nothing and starts nothing. `run` and `resume` are in crun.c. Exit: 0 the plan
 * is valid, 2 bad usage or a bad plan (the message names FILE:LINE:COL), 3 stdout could not be
 * written.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/xalloc.h"
#include "campaign/plan.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "cli/crun.h"

#define CMD "servetune campaign"

/* Assumptions of the estimate, each an option (docs/cli.md, "servetune campaign check"). */
#define DEF_DECODE_TPS 30.0   /* tokens/s of one stream while decoding */
#define DEF_PREFILL_TPS 2000. /* prompt tokens/s the server prefills, all streams together */
#define DEF_STARTUP_S 300.0   /* one arm's bring-up until health answers */
#define DEF_QUALIFY_S 300.0   /* one run of a qualify step */

static const char *const step_kinds[] = {"qualify", "bench", "sweep", "probe", "soak"};
static const char *const target_kinds[] = {"sim", "command", "compose", "url"};
static const char *const dir_names[] = {"higher", "lower"};
static const char *const agg_names[] = {"median", "mean", "min", "max"};
static const char *const esc_names[] = {"promoted", "best", "all"};

struct copts {
    const char *path;
    int json;
    double decode_tps, prefill_tps, startup_s, qualify_s;
};

/* One way an arm runs: on the baseline, or (an on_best_of arm) on one screening winner. */
struct run {
    uint32_t arm;
    const char *on;             /* borrowed: "baseline" or an arm name */
    struct st_target_params ps; /* owned */
};

struct est {
    double step_s[2][ST_PLAN_MAX_STEPS]; /* one arm, every repeat */
    double stage_s[2];                   /* one arm: the steps plus its bring-up */
    uint32_t full_arms_max;              /* arms that may escalate, the baseline not counted */
    double min_s, max_s;
};

static void usage(FILE *f)
{
    fputs("usage: servetune campaign check PLAN.yaml [--json] [estimate options]\n"
          "       servetune campaign run PLAN.yaml --out DIR [options]   (see run --help)\n"
          "       servetune campaign resume DIR\n"
          "\n"
          "check validates a campaign plan (docs/campaigns.md) and prints its hash, how each arm\n"
          "comes up, the stages, the rules and a rough time estimate. Nothing is started or sent.\n"
          "\n"
          "check:\n"
          "  --json                one JSON object on stdout instead of text\n"
          "  --decode-tps N        assumed decode rate of one stream, tokens/s (default 30)\n"
          "  --prefill-tps N       assumed prefill rate, prompt tokens/s (default 2000)\n"
          "  --startup-s N         assumed bring-up time of one arm, s (default 300)\n"
          "  --qualify-s N         assumed time of one qualify run, s (default 300)\n",
          f);
}

/* ---- resolving arms ---- */

static const struct st_target_param *find2(const struct st_target_params *a,
                                           const struct st_target_params *b, const char *name)
{
    const struct st_target_param *p = st_target_param_find(a, name);
    return p || !b ? p : st_target_param_find(b, name);
}

/* The start template with every {name} replaced by its value in a (else b). Parsing checked
 * that every placeholder names a baseline or fixed parameter; values go in as their text. */
static void resolve_start(const char *tmpl, const struct st_target_params *a,
                          const struct st_target_params *b, struct st_buf *out)
{
    const char *s = tmpl;
    while (*s != '\0') {
        const char *open = strchr(s, '{');
        const char *close = open ? strchr(open + 1, '}') : NULL;
        if (!close) {
            st_buf_puts(out, s);
            return;
        }
        st_buf_append(out, s, (size_t)(open - s));
        char name[ST_PLAN_NAME_MAX];
        size_t n = (size_t)(close - open - 1);
        const struct st_target_param *p = NULL;
        if (n < sizeof(name)) {
            memcpy(name, open + 1, n);
            name[n] = '\0';
            p = find2(a, b, name);
        }
        if (p) {
            st_buf_puts(out, p->value);
        } else {
            st_buf_append(out, open, (size_t)(close - open + 1));
        }
        s = close + 1;
    }
}

/* How one arm run comes up, as a line of text: the command for command and sim targets. */
static void how_up(const struct st_plan *p, const struct st_target_params *ps,
                   const struct st_target_params *ps2, struct st_buf *out)
{
    const struct st_target_spec *t = &p->target;
    if (t->kind == ST_TARGET_BACKEND_COMMAND) {
        resolve_start(t->start, ps, ps2, out);
    } else if (t->kind == ST_TARGET_BACKEND_SIM) {
        /* As src/target/arm.c starts it: the overrides, then every parameter whose name holds
         * a '.' (a profile key, fixed ones included) as --set, the fault.* ones as one --fault;
         * other names are recorded, not applied. */
        st_buf_printf(out, "servetune sim --profile %s", t->profile);
        for (uint32_t i = 0; i < t->overrides.n; i++) {
            st_buf_printf(out, " --set %s=%s", t->overrides.v[i].name, t->overrides.v[i].value);
        }
        struct st_buf faults;
        st_buf_init(&faults);
        const struct st_target_params *sets[2] = {ps, ps2};
        for (int k = 0; k < 2; k++) {
            for (uint32_t i = 0; sets[k] && i < sets[k]->n; i++) {
                const struct st_target_param *v = &sets[k]->v[i];
                if (k == 1 && st_target_param_find(ps, v->name)) {
                    continue;
                }
                if (strncmp(v->name, "fault.", 6) == 0) {
                    st_buf_printf(&faults, "%s%s=%s", faults.len ? "," : "", v->name + 6, v->value);
                } else if (strchr(v->name, '.')) {
                    st_buf_printf(out, " --set %s=%s", v->name, v->value);
                }
            }
        }
        if (faults.len) {
            st_buf_printf(out, " --fault %s", st_buf_str(&faults));
        }
        st_buf_release(&faults);
    }
}

static void release_runs(struct run *runs, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        st_target_params_release(&runs[i].ps);
    }
    free(runs);
}

/* Every arm's full parameters, an on_best_of arm once per possible winner. Returns 0, or
 * ST_EPARSE with "NAME:LINE:COL: message" in err: an arm that changes nothing (or too much) on
 * top of one of the winners it may run on would be refused at that step, so it is refused now. */
static int resolve_arms(const char *name, const struct st_plan *p, struct run **out, uint32_t *n,
                        char *err, size_t errlen)
{
    struct run *runs = st_xcalloc((size_t)p->n_arms * (ST_PLAN_MAX_ARMS + 1), sizeof(*runs));
    uint32_t nr = 0;
    char msg[512];
    for (uint32_t i = 0; i < p->n_arms; i++) {
        const struct st_plan_arm *a = &p->arms[i];
        uint32_t k = a->n_on_best_of ? a->n_on_best_of : 1;
        for (uint32_t j = 0; j < k; j++) {
            const char *on = a->n_on_best_of ? a->on_best_of[j] : "baseline";
            struct run *r = &runs[nr];
            int rc = st_plan_arm_params(p, i, on, &r->ps, msg, sizeof(msg));
            if (rc) {
                snprintf(err, errlen, "%s:%d:%d: %s%s%s%s", name, a->line, a->col, msg,
                         a->n_on_best_of ? " (were " : "", a->n_on_best_of ? on : "",
                         a->n_on_best_of ? " the best of screening)" : "");
                release_runs(runs, nr);
                return rc;
            }
            r->arm = i;
            r->on = on;
            nr++;
        }
    }
    *out = runs;
    *n = nr;
    return 0;
}

/* ---- the estimate ---- */

/* One arm's time in step s, every repeat. Rough by design: prefill is taken as serialized on the
 * server (cc prompts cost cc x input / prefill_tps), decode as concurrent (a wave of requests
 * costs output / decode_tps). */
static double step_seconds(const struct copts *o, const struct st_plan_step *s)
{
    double in = (double)s->input_tokens / o->prefill_tps;
    double out = (double)s->output_tokens / o->decode_tps;
    uint32_t ncc = s->n_concurrency ? s->n_concurrency : 1;
    double t = 0;
    for (uint32_t i = 0; i < ncc; i++) {
        double cc = s->n_concurrency ? (double)s->concurrency[i] : 1.0;
        switch (s->kind) {
        case ST_PLAN_STEP_BENCH:
            t += (s->n_categories ? s->n_categories : 1) * (cc * in + out);
            break;
        case ST_PLAN_STEP_SWEEP:
            t += (s->flush_warm ? in * s->shared_frac : 0) +
                 s->requests_per_cc * (cc * in * (1 - s->shared_frac) + out);
            break;
        case ST_PLAN_STEP_PROBE:
            /* The serial seeding pass fills cc documents, then cc requests decode. */
            t += cc * (in + (double)s->seed_output_tokens / o->decode_tps) + cc * in + out;
            break;
        default:
            break;
        }
    }
    if (s->kind == ST_PLAN_STEP_QUALIFY) {
        t = o->qualify_s;
    } else if (s->kind == ST_PLAN_STEP_SOAK) {
        t = s->duration_s;
    }
    return t * s->repeats;
}

static void estimate(const struct copts *o, const struct st_plan *p, struct est *e)
{
    const struct st_plan_stage *stages[2] = {&p->screening, &p->full};
    memset(e, 0, sizeof(*e));
    for (int k = 0; k < 2; k++) {
        e->stage_s[k] = o->startup_s;
        for (uint32_t i = 0; i < stages[k]->n; i++) {
            e->step_s[k][i] = step_seconds(o, &stages[k]->steps[i]);
            e->stage_s[k] += e->step_s[k][i];
        }
    }
    e->full_arms_max = p->rules.escalation == ST_RULES_ESCALATE_BEST ? 1 : p->n_arms;
    /* Screening runs the baseline and every arm; the baseline is restored at the end. With no
     * arm escalated the full stage does not run; at most, the baseline and every arm that may
     * escalate run it. */
    e->min_s = (p->n_arms + 1) * e->stage_s[0] + o->startup_s;
    e->max_s = e->min_s + (e->full_arms_max + 1) * e->stage_s[1];
}

static void put_duration(FILE *f, double s)
{
    uint64_t m = (uint64_t)(s / 60 + 0.5);
    fprintf(f, "%.0f s (%llu h %02llu min)", s, (unsigned long long)(m / 60),
            (unsigned long long)(m % 60));
}

/* ---- text ---- */

static void put_params(FILE *f, const struct st_target_params *ps)
{
    for (uint32_t i = 0; i < ps->n; i++) {
        fprintf(f, "%s%s=%s", i ? " " : "", ps->v[i].name, ps->v[i].value);
    }
    if (ps->n == 0) {
        fputs("(none)", f);
    }
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGTERM:
        return "TERM";
    case SIGINT:
        return "INT";
    case SIGHUP:
        return "HUP";
    case SIGQUIT:
        return "QUIT";
    case SIGKILL:
        return "KILL";
    default:
        return "?";
    }
}

static void text_target(FILE *f, const struct st_plan *p)
{
    const struct st_target_spec *t = &p->target;
    fprintf(f, "target    %s\n", target_kinds[t->kind - 1]);
    if (t->kind == ST_TARGET_BACKEND_SIM) {
        fprintf(f, "  profile %s, overrides ", t->profile);
        put_params(f, &t->overrides);
        fputc('\n', f);
    } else if (t->kind == ST_TARGET_BACKEND_COMMAND) {
        fprintf(f, "  start template: %s\n", t->start);
        fprintf(f, "  stop: SIG%s to the process group, SIGKILL after %g s\n",
                signal_name(t->stop_signal), t->stop_timeout_s);
        fprintf(f, "  log: %s\n", t->log ? t->log : "(not captured)");
    } else if (t->kind == ST_TARGET_BACKEND_COMPOSE) {
        fprintf(f, "  compose file %s, service %s; an arm's parameters go into its %s\n",
                t->compose_file, t->service,
                t->override == ST_TARGET_OVERRIDE_ENVIRONMENT ? "environment" : "command");
        fprintf(f, "  stop: docker compose kill after %g s\n", t->stop_timeout_s);
    } else {
        fputs("  the server is already running: the operator switches it to each arm\n", f);
    }
    if (t->base_url) {
        fprintf(f, "  base url %s\n", t->base_url);
    }
    fprintf(f, "  health %s, up to %g s\n", t->health_url ? t->health_url : "(not polled)",
            t->health_timeout_s);
}

static void text_changes(FILE *f, const struct st_plan *p, const struct st_plan_arm *a)
{
    fputs("    changes:", f);
    for (uint32_t i = 0; i < a->set.n; i++) {
        const struct st_target_param *s = &a->set.v[i];
        const struct st_target_param *b = st_target_param_find(&p->baseline, s->name);
        fprintf(f, "%s%s %s -> %s", i ? ", " : " ", s->name, b ? b->value : "?", s->value);
    }
    fputc('\n', f);
}

static void text_step(FILE *f, const struct st_plan_step *s, double est_s)
{
    if (s->repeats_max > s->repeats) {
        char rr[32];
        snprintf(rr, sizeof(rr), "x%u..%u", s->repeats, s->repeats_max);
        fprintf(f, "    %-18s %-7s %s", s->id, step_kinds[s->kind - 1], rr);
    } else {
        fprintf(f, "    %-18s %-7s x%u", s->id, step_kinds[s->kind - 1], s->repeats);
    }
    if (s->kind == ST_PLAN_STEP_QUALIFY) {
        fprintf(f, "  suite %s", s->suite);
    } else if (s->kind != ST_PLAN_STEP_SOAK || s->input_tokens || s->output_tokens) {
        fprintf(f, "  in %llu out %llu", (unsigned long long)s->input_tokens,
                (unsigned long long)s->output_tokens);
    }
    for (uint32_t i = 0; i < s->n_categories; i++) {
        fprintf(f, "%s%s", i ? "," : "  categories ", s->categories[i]);
    }
    for (uint32_t i = 0; s->kind != ST_PLAN_STEP_QUALIFY && i < s->n_concurrency; i++) {
        fprintf(f, "%s%u", i ? "," : "  cc ", s->concurrency[i]);
    }
    if (s->kind == ST_PLAN_STEP_SWEEP) {
        fprintf(f, "  shared %g, %u x cc requests, flush+warm %s", s->shared_frac,
                s->requests_per_cc, s->flush_warm ? "on" : "off");
    } else if (s->kind == ST_PLAN_STEP_PROBE) {
        fprintf(f, "  seed out %llu", (unsigned long long)s->seed_output_tokens);
    } else if (s->kind == ST_PLAN_STEP_SOAK) {
        fprintf(f, "  %g s", s->duration_s);
    }
    fprintf(f, "  ~%.0f s\n", est_s);
}

static void text_rules(FILE *f, const struct st_plan_rules *r)
{
    fprintf(f, "rules     noise %g%%, alpha %g, aggregate %s, escalation %s\n", r->noise * 100,
            r->alpha, agg_names[r->agg - 1], esc_names[r->escalation - 1]);
    fprintf(f, "  test    Welch t on the logs of the repeats, sequential looks at Pocock's level, "
               "Holm per stage and direction at alpha/2 (docs/campaigns.md)\n");
    for (uint32_t i = 0; i < r->n_metrics; i++) {
        const struct st_plan_metric *m = &r->metrics[i];
        fprintf(f, "  rank    %s (%s is better, %s, weight %g%s)\n", m->name, dir_names[m->dir - 1],
                agg_names[m->agg - 1], m->weight,
                m->single ? ", samples: 1: decided on one value" : "");
    }
    for (uint32_t i = 0; i < r->n_guards; i++) {
        const struct st_plan_guard *g = &r->guards[i];
        fprintf(f, "  guard   %s (%s is better, %s): at most %g%% worse than the baseline%s\n",
                g->name, dir_names[g->dir - 1], agg_names[g->agg - 1], g->max_worse * 100,
                g->single ? " (samples: 1: decided on one value)" : "");
    }
    fprintf(f, "  gates   functional %s, quality %s, oom %s, server_exit %s, context ",
            r->gate_functional ? "on" : "off", r->gate_quality ? "on" : "off",
            r->gate_oom ? "on" : "off", r->gate_server_exit ? "on" : "off");
    if (r->context_tokens) {
        fprintf(f, "%llu tokens\n", (unsigned long long)r->context_tokens);
    } else {
        fputs("not checked\n", f);
    }
    for (uint32_t i = 0; i < r->n_limits; i++) {
        const struct st_plan_limit *l = &r->limits[i];
        fprintf(f, "  limit   %s: %s of %s", l->gate, agg_names[l->agg - 1], l->metric);
        if (l->has_min) {
            fprintf(f, " >= %g", l->min);
        }
        if (l->has_max) {
            fprintf(f, "%s <= %g", l->has_min ? " and" : "", l->max);
        }
        fputc('\n', f);
    }
}

static void text_out(FILE *f, const struct copts *o, const struct st_plan *p, const char *hash,
                     const struct run *runs, uint32_t nr, const struct est *e)
{
    struct st_buf b;
    st_buf_init(&b);
    fprintf(f, "plan      %s (%s): valid\n", o->path, p->name);
    fprintf(f, "hash      %s (SHA-256 of the canonical form)\n", hash);
    text_target(f, p);
    fputs("baseline  ", f);
    put_params(f, &p->baseline);
    fputc('\n', f);
    how_up(p, &p->baseline, &p->fixed, &b);
    if (b.len) {
        fprintf(f, "  up: %s\n", b.data);
    }
    fputs("fixed     ", f);
    put_params(f, &p->fixed);
    fputc('\n', f);
    fprintf(f, "arms      %u\n", p->n_arms);
    for (uint32_t i = 0; i < nr; i++) {
        const struct st_plan_arm *a = &p->arms[runs[i].arm];
        if (i == 0 || runs[i - 1].arm != runs[i].arm) {
            fprintf(f, "  %s%s\n", a->name, a->multi_variable ? " (multi_variable)" : "");
            if (a->note) {
                fprintf(f, "    note: %s\n", a->note);
            }
            text_changes(f, p, a);
        }
        if (a->n_on_best_of) {
            fprintf(f, "    if %s is the best of screening:\n  ", runs[i].on);
        }
        fputs("    params: ", f);
        put_params(f, &runs[i].ps);
        fputc('\n', f);
        st_buf_clear(&b);
        how_up(p, &runs[i].ps, NULL, &b);
        if (b.len) {
            fprintf(f, "%s    up: %s\n", a->n_on_best_of ? "  " : "", b.data);
        }
    }
    const struct st_plan_stage *stages[2] = {&p->screening, &p->full};
    const char *names[2] = {"screening", "full"};
    fprintf(f, "stages    order %s%s\n", p->interleaved ? "interleaved" : "blocked",
            p->interleaved ? " (every repeat a bring-up of its own)"
                           : " (note: an arm's first repeats share one bring-up, so a spread "
                             "between bring-ups is not in the tests; order: interleaved puts "
                             "it there)");
    for (int k = 0; k < 2; k++) {
        fprintf(f, "  %s: %u steps, ~%.0f s per arm with its bring-up\n", names[k], stages[k]->n,
                e->stage_s[k]);
        for (uint32_t i = 0; i < stages[k]->n; i++) {
            text_step(f, &stages[k]->steps[i], e->step_s[k][i]);
        }
    }
    text_rules(f, &p->rules);
    fprintf(f,
            "estimate  a rough guess, not a measurement: decode %g tok/s per stream, prefill %g "
            "tok/s, %g s per bring-up, %g s per qualify run (see --help)\n",
            o->decode_tps, o->prefill_tps, o->startup_s, o->qualify_s);
    fputs("  no arm escalates:   ", f);
    put_duration(f, e->min_s);
    fprintf(f, "\n  %u arm(s) escalate: ", e->full_arms_max);
    put_duration(f, e->max_s);
    fputc('\n', f);
    st_buf_release(&b);
}

/* ---- JSON ---- */

static void jw_opt(struct st_jw *w, const char *key, const char *s)
{
    st_jw_key(w, key);
    if (s) {
        st_jw_str(w, s);
    } else {
        st_jw_null(w);
    }
}

static void jw_up(struct st_jw *w, const struct st_plan *p, const struct st_target_params *ps,
                  const struct st_target_params *ps2)
{
    struct st_buf b;
    st_buf_init(&b);
    how_up(p, ps, ps2, &b);
    jw_opt(w, "up", b.len ? b.data : NULL);
    st_buf_release(&b);
}

static void jw_target(struct st_jw *w, const struct st_plan *p)
{
    const struct st_target_spec *t = &p->target;
    st_jw_key(w, "target");
    st_jw_obj_open(w);
    st_jw_kstr(w, "kind", target_kinds[t->kind - 1]);
    jw_opt(w, "profile", t->profile);
    st_plan_jw_params(w, "overrides", &t->overrides);
    jw_opt(w, "start", t->start);
    st_jw_ki64(w, "stop_signal", t->stop_signal);
    st_jw_kf64(w, "stop_timeout_s", t->stop_timeout_s);
    jw_opt(w, "log", t->log);
    jw_opt(w, "compose_file", t->compose_file);
    jw_opt(w, "service", t->service);
    st_jw_kstr(w, "override",
               t->override == ST_TARGET_OVERRIDE_ENVIRONMENT ? "environment" : "command");
    jw_opt(w, "base_url", t->base_url);
    jw_opt(w, "health_url", t->health_url);
    st_jw_kf64(w, "health_timeout_s", t->health_timeout_s);
    st_jw_obj_close(w);
}

static void jw_arms(struct st_jw *w, const struct st_plan *p, const struct run *runs, uint32_t nr)
{
    st_jw_key(w, "arms");
    st_jw_arr_open(w);
    uint32_t r = 0;
    for (uint32_t i = 0; i < p->n_arms; i++) {
        const struct st_plan_arm *a = &p->arms[i];
        st_jw_obj_open(w);
        st_jw_kstr(w, "name", a->name);
        st_plan_jw_params(w, "set", &a->set);
        st_jw_key(w, "changes");
        st_jw_arr_open(w);
        for (uint32_t j = 0; j < a->set.n; j++) {
            const struct st_target_param *b = st_target_param_find(&p->baseline, a->set.v[j].name);
            st_jw_obj_open(w);
            st_jw_kstr(w, "name", a->set.v[j].name);
            jw_opt(w, "baseline", b ? b->value : NULL);
            st_jw_kstr(w, "value", a->set.v[j].value);
            st_jw_obj_close(w);
        }
        st_jw_arr_close(w);
        st_jw_kbool(w, "multi_variable", a->multi_variable);
        st_jw_key(w, "on_best_of");
        st_jw_arr_open(w);
        for (uint32_t j = 0; j < a->n_on_best_of; j++) {
            st_jw_str(w, a->on_best_of[j]);
        }
        st_jw_arr_close(w);
        jw_opt(w, "note", a->note);
        st_jw_key(w, "runs");
        st_jw_arr_open(w);
        for (; r < nr && runs[r].arm == i; r++) {
            st_jw_obj_open(w);
            st_jw_kstr(w, "on", runs[r].on);
            st_plan_jw_params(w, "params", &runs[r].ps);
            jw_up(w, p, &runs[r].ps, NULL);
            st_jw_obj_close(w);
        }
        st_jw_arr_close(w);
        st_jw_obj_close(w);
    }
    st_jw_arr_close(w);
}

static void jw_stages(struct st_jw *w, const struct st_plan *p, const struct est *e)
{
    const struct st_plan_stage *stages[2] = {&p->screening, &p->full};
    const char *names[2] = {"screening", "full"};
    st_jw_key(w, "stages");
    st_jw_arr_open(w);
    for (int k = 0; k < 2; k++) {
        st_jw_obj_open(w);
        st_jw_kstr(w, "name", names[k]);
        st_jw_kf64(w, "estimate_per_arm_s", e->stage_s[k]);
        st_jw_key(w, "steps");
        st_jw_arr_open(w);
        for (uint32_t i = 0; i < stages[k]->n; i++) {
            const struct st_plan_step *s = &stages[k]->steps[i];
            st_jw_obj_open(w);
            st_jw_kstr(w, "id", s->id);
            st_jw_kstr(w, "kind", step_kinds[s->kind - 1]);
            st_jw_ku64(w, "repeats", s->repeats);
            st_jw_ku64(w, "repeats_max", s->repeats_max);
            jw_opt(w, "suite", s->kind == ST_PLAN_STEP_QUALIFY ? s->suite : NULL);
            st_jw_ku64(w, "input_tokens", s->input_tokens);
            st_jw_ku64(w, "output_tokens", s->output_tokens);
            st_jw_key(w, "categories");
            st_jw_arr_open(w);
            for (uint32_t j = 0; j < s->n_categories; j++) {
                st_jw_str(w, s->categories[j]);
            }
            st_jw_arr_close(w);
            st_jw_key(w, "concurrency");
            st_jw_arr_open(w);
            for (uint32_t j = 0; j < s->n_concurrency; j++) {
                st_jw_u64(w, s->concurrency[j]);
            }
            st_jw_arr_close(w);
            if (s->kind == ST_PLAN_STEP_SWEEP) {
                st_jw_kf64(w, "shared_frac", s->shared_frac);
                st_jw_ku64(w, "requests_per_cc", s->requests_per_cc);
                st_jw_kbool(w, "flush_warm", s->flush_warm);
            } else if (s->kind == ST_PLAN_STEP_PROBE) {
                st_jw_ku64(w, "seed_output_tokens", s->seed_output_tokens);
            } else if (s->kind == ST_PLAN_STEP_SOAK) {
                st_jw_kf64(w, "duration_s", s->duration_s);
            }
            st_jw_kf64(w, "estimate_s", e->step_s[k][i]);
            st_jw_obj_close(w);
        }
        st_jw_arr_close(w);
        st_jw_obj_close(w);
    }
    st_jw_arr_close(w);
}

static void json_out(FILE *f, const struct copts *o, const struct st_plan *p, const char *hash,
                     const struct run *runs, uint32_t nr, const struct est *e)
{
    struct st_buf b;
    st_buf_init(&b);
    struct st_jw w;
    st_jw_init(&w, &b);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "plan", o->path);
    st_jw_kstr(&w, "name", p->name);
    st_jw_kstr(&w, "hash", hash);
    jw_opt(&w, "description", p->description);
    jw_target(&w, p);
    st_jw_key(&w, "baseline");
    st_jw_obj_open(&w);
    st_plan_jw_params(&w, "params", &p->baseline);
    jw_up(&w, p, &p->baseline, &p->fixed);
    st_jw_obj_close(&w);
    st_plan_jw_params(&w, "fixed", &p->fixed);
    jw_arms(&w, p, runs, nr);
    jw_stages(&w, p, e);
    st_plan_rules_json(&w, &p->rules);
    st_jw_kf64(&w, "estimate_s", e->max_s);
    st_jw_key(&w, "estimate");
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "what", "a rough guess from the assumptions below, not a measurement");
    st_jw_kf64(&w, "min_s", e->min_s);
    st_jw_kf64(&w, "max_s", e->max_s);
    st_jw_ku64(&w, "full_arms_max", e->full_arms_max);
    st_jw_kf64(&w, "decode_tps", o->decode_tps);
    st_jw_kf64(&w, "prefill_tps", o->prefill_tps);
    st_jw_kf64(&w, "startup_s", o->startup_s);
    st_jw_kf64(&w, "qualify_s", o->qualify_s);
    st_jw_obj_close(&w);
    st_jw_obj_close(&w);
    st_buf_putc(&b, '\n');
    fwrite(b.data, 1, b.len, f);
    st_buf_release(&b);
}

/* ---- check ---- */

static int check(int argc, char **argv)
{
    struct copts o = {
        .decode_tps = DEF_DECODE_TPS,
        .prefill_tps = DEF_PREFILL_TPS,
        .startup_s = DEF_STARTUP_S,
        .qualify_s = DEF_QUALIFY_S,
    };
    char err[1024] = "";
    int exit_code = ST_EXIT_USAGE;
    struct st_buf text;
    struct st_plan plan;
    struct run *runs = NULL;
    uint32_t nr = 0;
    int parsed = 0;
    int first = 0;

    st_buf_init(&text);
    const struct st_opt opts[] = {
        {ST_OPT_FLAG("--json", &o.json, 1)},
        {ST_OPT_F64("--decode-tps", &o.decode_tps, 0.001, 1e9)},
        {ST_OPT_F64("--prefill-tps", &o.prefill_tps, 0.001, 1e12)},
        {ST_OPT_F64("--startup-s", &o.startup_s, 0, 1e7)},
        {ST_OPT_F64("--qualify-s", &o.qualify_s, 0, 1e7)},
        {.flag = NULL},
    };
    const struct st_opt *const tables[] = {opts, NULL};
    struct st_cli_cmd cmd = {
        .name = "campaign check", .usage = usage, .tables = tables, .operand = &first};
    exit_code = st_cli_parse(&cmd, argc, argv);
    if (exit_code >= 0) {
        goto out;
    }
    exit_code = ST_EXIT_USAGE;
    if (first + 1 != argc) {
        fprintf(stderr, CMD " check: expected one plan file (see --help)\n");
        goto out;
    }
    o.path = argv[first];
    if (st_cli_read_file(o.path, ST_PLAN_MAX_BYTES, &text, err, sizeof(err))) {
        fprintf(stderr, CMD " check: %s\n", err);
        goto out;
    }
    if (st_plan_parse(o.path, st_buf_str(&text), text.len, &plan, err, sizeof(err))) {
        fprintf(stderr, CMD " check: %s\n", err);
        goto out;
    }
    parsed = 1;
    if (resolve_arms(o.path, &plan, &runs, &nr, err, sizeof(err))) {
        fprintf(stderr, CMD " check: %s\n", err);
        goto out;
    }
    char hash[ST_SHA256_HEX];
    st_plan_hash(&plan, hash);
    struct est e;
    estimate(&o, &plan, &e);
    if (o.json) {
        json_out(stdout, &o, &plan, hash, runs, nr, &e);
    } else {
        text_out(stdout, &o, &plan, hash, runs, nr, &e);
    }
    exit_code = fflush(stdout) == 0 ? ST_EXIT_OK : ST_EXIT_IO;
out:
    release_runs(runs, nr);
    if (parsed) {
        st_plan_release(&plan);
    }
    st_buf_release(&text);
    return exit_code;
}

int st_cli_campaign(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return ST_EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "check") == 0) {
        return check(argc - 1, argv + 1);
    }
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0) {
        usage(stdout);
        return ST_EXIT_OK;
    }
    if (strcmp(sub, "run") == 0 || strcmp(sub, "resume") == 0) {
        return st_cli_campaign_run(argc - 1, argv + 1, strcmp(sub, "resume") == 0);
    }
    fprintf(stderr, CMD ": unknown subcommand '%s'\n", sub);
    usage(stderr);
    return ST_EXIT_USAGE;
}
