/*
 * Campaign plan parsing: the rules section (plan_int.h): metric references STEP.METRIC[@POINT]
 * resolved against the stages (parsed first) and the metrics each step kind produces, the rule
 * lists (metrics, guards), gates and limits, and the sample sizes each rule needs. Called by
 * plan.c; calls planread.c only. Pure: no file I/O.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/num.h"
#include "base/xalloc.h"
#include "base/yaml.h"
#include "campaign/plan.h"

#include "campaign/plan_int.h"

/* ---- rules ---- */

/* The metrics each step kind produces; point: 1 when the metric is per category (bench,
 * when the step has categories) or per concurrency level (sweep, probe: "@ccN"). */
static const struct {
    unsigned kinds;
    const char *name;
    enum st_rules_dir dir;
    int point;
} metric_defs[] = {
    {ST_PLAN_SK_QUAL, "pass_count", ST_RULES_HIGHER, 0},
    {ST_PLAN_SK_QUAL, "fail_count", ST_RULES_LOWER, 0},
    {ST_PLAN_SK_BENCH | ST_PLAN_SK_PROBE, "decode_tps", ST_RULES_HIGHER, 1},
    {ST_PLAN_SK_BENCH | ST_PLAN_SK_SWEEP, "output_tps", ST_RULES_HIGHER, 1},
    {ST_PLAN_SK_BENCH | ST_PLAN_SK_SWEEP, "ttft_s", ST_RULES_LOWER, 1},
    {ST_PLAN_SK_BENCH, "e2e_s", ST_RULES_LOWER, 1},
    {ST_PLAN_SK_BENCH, "completed", ST_RULES_HIGHER, 1},
    {ST_PLAN_SK_SWEEP, "tpot_s", ST_RULES_LOWER, 1},
    {ST_PLAN_SK_SWEEP, "hit_rate", ST_RULES_HIGHER, 1},
    {ST_PLAN_SK_PROBE, "max_docs", ST_RULES_HIGHER, 0},
    {ST_PLAN_SK_PROBE, "queued", ST_RULES_LOWER, 1},
    {ST_PLAN_SK_PROBE, "ttft_max_s", ST_RULES_LOWER, 1},
    {ST_PLAN_SK_SOAK, "output_tps", ST_RULES_HIGHER, 0},
    {ST_PLAN_SK_SOAK, "ttft_s", ST_RULES_LOWER, 0},
    {ST_PLAN_SK_SOAK, "error_rate", ST_RULES_LOWER, 0},
    {ST_PLAN_SK_SOAK, "completed", ST_RULES_HIGHER, 0},
};

/* What the target reports for every arm, in every stage: "server.NAME". */
static const struct {
    const char *name;
    enum st_rules_dir dir;
} server_metrics[] = {
    {"kv_capacity_tokens", ST_RULES_HIGHER}, {"spec_accept_rate", ST_RULES_HIGHER},
    {"gpu_mem_bytes", ST_RULES_LOWER},       {"max_context_tokens", ST_RULES_HIGHER},
    {"preemptions", ST_RULES_LOWER},
};

/* Checks a metric reference STEP.METRIC[@POINT] against the stages; *dir its direction and
 * *repeats the step's repeats (1 for server metrics). */
static int resolve_metric(struct st_plan_ctx *c, struct st_yaml_node *at, const char *ref,
                          enum st_rules_dir *dir, uint32_t *repeats)
{
    const char *dot = strchr(ref, '.');
    const char *atp = strchr(ref, '@');
    if (!dot || dot == ref || (atp && atp < dot)) {
        return st_yaml_fail(c->y, at, "metric '%s': expected STEP.METRIC or STEP.METRIC@POINT",
                            ref);
    }
    size_t sn = (size_t)(dot - ref);
    const char *mname = dot + 1;
    size_t mn = atp ? (size_t)(atp - mname) : strlen(mname);
    const char *point = atp ? atp + 1 : NULL;
    if (sn == 6 && memcmp(ref, "server", 6) == 0) {
        for (size_t i = 0; i < sizeof(server_metrics) / sizeof(server_metrics[0]); i++) {
            if (strlen(server_metrics[i].name) == mn &&
                memcmp(server_metrics[i].name, mname, mn) == 0 && !point) {
                *dir = server_metrics[i].dir;
                *repeats = 1;
                return 0;
            }
        }
        return st_yaml_fail(c->y, at,
                            "metric '%s': the server reports kv_capacity_tokens, spec_accept_rate, "
                            "gpu_mem_bytes, max_context_tokens and preemptions (no @POINT)",
                            ref);
    }
    const struct st_plan_step *s = st_plan_find_step(&c->p->screening, ref, sn);
    if (!s) {
        s = st_plan_find_step(&c->p->full, ref, sn);
    }
    if (!s) {
        return st_yaml_fail(c->y, at, "metric '%s': no stage has a step '%.*s'", ref, (int)sn, ref);
    }
    size_t i = 0;
    while (i < sizeof(metric_defs) / sizeof(metric_defs[0]) &&
           !((metric_defs[i].kinds & (1u << s->kind)) && strlen(metric_defs[i].name) == mn &&
             memcmp(metric_defs[i].name, mname, mn) == 0)) {
        i++;
    }
    if (i == sizeof(metric_defs) / sizeof(metric_defs[0])) {
        char list[300] = "";
        size_t off = 0;
        for (size_t j = 0; j < sizeof(metric_defs) / sizeof(metric_defs[0]); j++) {
            if (metric_defs[j].kinds & (1u << s->kind)) {
                int w = snprintf(list + off, sizeof(list) - off, "%s%s", off ? ", " : "",
                                 metric_defs[j].name);
                off += w > 0 && (size_t)w < sizeof(list) - off ? (size_t)w : 0;
            }
        }
        return st_yaml_fail(c->y, at, "metric '%s': a %s step produces no '%.*s' (it produces %s)",
                            ref, st_plan_step_kinds[s->kind - 1], (int)mn, mname, list);
    }
    *dir = metric_defs[i].dir;
    *repeats = s->repeats;
    int by_cat = s->kind == ST_PLAN_STEP_BENCH && s->n_categories > 0;
    int by_cc = s->kind == ST_PLAN_STEP_SWEEP || s->kind == ST_PLAN_STEP_PROBE;
    if (!metric_defs[i].point || (!by_cat && !by_cc)) {
        if (point) {
            return st_yaml_fail(c->y, at, "metric '%s': %.*s.%.*s has no points (drop the @%s)",
                                ref, (int)sn, ref, (int)mn, mname, point);
        }
        return 0;
    }
    if (!point) {
        return st_yaml_fail(c->y, at, "metric '%s': name a point, %s", ref,
                            by_cat ? "@CATEGORY from the step's categories"
                                   : "@ccN from its concurrency");
    }
    if (by_cat) {
        for (uint32_t j = 0; j < s->n_categories; j++) {
            if (strcmp(s->categories[j], point) == 0) {
                return 0;
            }
        }
        return st_yaml_fail(c->y, at, "metric '%s': step %s has no category '%s'", ref, s->id,
                            point);
    }
    uint64_t cc = 0;
    if (point[0] == 'c' && point[1] == 'c' && st_num_u64z(point + 2, UINT64_MAX, &cc) == 0) {
        for (uint32_t j = 0; j < s->n_concurrency; j++) {
            if (s->concurrency[j] == cc) {
                return 0;
            }
        }
    }
    return st_yaml_fail(c->y, at, "metric '%s': step %s has no concurrency point '%s' (write ccN)",
                        ref, s->id, point);
}

/* metric, aggregate and direction of a rule item; the direction defaults to the metric's own. */
static int rule_metric(struct st_plan_ctx *c, struct st_yaml_node *m, const char *what,
                       char name[ST_PLAN_METRIC_MAX], enum st_rules_dir *dir,
                       enum st_rules_agg *agg, uint32_t *repeats)
{
    const char *s;
    size_t n;
    struct st_yaml_node *at;
    int rc = st_yaml_get_scalar(c->y, m, "metric", what, 1, &s, &n, &at);
    if (rc != 0) {
        return rc;
    }
    if (n >= ST_PLAN_METRIC_MAX || memchr(s, '\0', n)) {
        return st_yaml_fail(c->y, at, "%s.metric: longer than %d characters", what,
                            ST_PLAN_METRIC_MAX - 1);
    }
    memcpy(name, s, n);
    name[n] = '\0';
    rc = resolve_metric(c, at, name, dir, repeats);
    int d = (int)*dir, a = (int)c->p->rules.agg;
    if (rc == 0) {
        rc = st_yaml_get_enum(c->y, m, "direction", what, 0, st_plan_dir_names, &d);
    }
    if (rc == 0) {
        rc = st_yaml_get_enum(c->y, m, "aggregate", what, 0, st_plan_agg_names, &a);
    }
    *dir = (enum st_rules_dir)d;
    *agg = (enum st_rules_agg)a;
    return rc;
}

/*
 * A ranked metric or a guard decides on a test of its repeats, so its step must repeat (at least
 * 2 per side in every stage that runs it), unless the rule says `samples: 1`: then it decides on
 * one value per side and the verdict says so. server.* metrics are one value per stage.
 */
static int check_samples(struct st_plan_ctx *c, struct st_yaml_node *m, const char *what,
                         const char *name, int *single)
{
    uint64_t n = 0;
    struct st_yaml_node *k;
    int rc = st_yaml_get_u64(c->y, m, "samples", what, 0, 1, 1, &n);
    if (rc != 0) {
        st_yaml_get(c->y, m, "samples", &k);
        return st_yaml_fail(
            c->y, k ? k : m,
            "%s.samples: only 1 may be given (decide on a single value); more samples "
            "come from the step's repeats",
            what);
    }
    *single = n == 1;
    if (*single) {
        return 0;
    }
    const char *dot = strchr(name, '.');
    size_t sn = dot ? (size_t)(dot - name) : strlen(name);
    if (sn == 6 && memcmp(name, "server", 6) == 0) {
        return st_yaml_fail(
            c->y, m,
            "%s: %s is one value per arm and stage, so no test of repeats can decide on "
            "it: say samples: 1 to decide on that single value",
            what, name);
    }
    const struct st_plan_stage *stages[2] = {&c->p->screening, &c->p->full};
    for (int i = 0; i < 2; i++) {
        const struct st_plan_step *s = st_plan_find_step(stages[i], name, sn);
        if (s && s->repeats < 2) {
            return st_yaml_fail(
                c->y, m,
                "%s: step %s runs once in %s (repeats: %u), so the spread of %s is "
                "unknown and no test can decide on it: give the step repeats: 3 (or "
                "{min: 3, max: 12}), or say samples: 1 to decide on one sample",
                what, s->id, i ? "full" : "screening", s->repeats, name);
        }
    }
    return 0;
}

static int parse_rule_list(struct st_plan_ctx *c, struct st_yaml_node *map, const char *key)
{
    struct st_plan_rules *r = &c->p->rules;
    struct st_yaml_node *seq, *k;
    const char *section = strcmp(key, "limits") == 0 ? "rules.gates" : "rules";
    int rc = st_yaml_get_seq(c->y, map, key, section, 0, &seq, &k);
    if (rc != 0 || !k) {
        return rc;
    }
    uint32_t have = strcmp(key, "metrics") == 0  ? r->n_metrics
                    : strcmp(key, "guards") == 0 ? r->n_guards
                                                 : r->n_limits;
    if (st_yaml_count(seq) + have > ST_PLAN_MAX_RULES) {
        (void)st_yaml_fail(c->y, seq, "%s.%s: more than %d items", section, key, ST_PLAN_MAX_RULES);
        return ST_ETOOBIG;
    }
    static const char *const mkeys[] = {"metric", "direction", "aggregate",
                                        "weight", "samples",   NULL};
    static const char *const gkeys[] = {"metric",    "direction", "aggregate",
                                        "max_worse", "samples",   NULL};
    static const char *const lkeys[] = {"name", "metric", "aggregate", "min", "max", NULL};
    void *it = NULL;
    struct st_yaml_node *m;
    for (uint32_t i = 0; (m = st_yaml_seq_next(seq, &it)) != NULL; i++) {
        char what[64];
        snprintf(what, sizeof(what), "%s.%s[%u]", section, key, i);
        if (strcmp(key, "metrics") == 0) {
            struct st_plan_metric *pm = &r->metrics[r->n_metrics++];
            pm->weight = 1;
            rc = st_yaml_check_keys(c->y, m, m, what, mkeys);
            if (rc == 0) {
                rc = rule_metric(c, m, what, pm->name, &pm->dir, &pm->agg, &pm->repeats);
            }
            if (rc == 0) {
                rc = st_yaml_get_f64(c->y, m, "weight", what, 0, 0, 1e6, &pm->weight);
            }
            if (rc == 0) {
                rc = check_samples(c, m, what, pm->name, &pm->single);
            }
        } else if (strcmp(key, "guards") == 0) {
            struct st_plan_guard *g = &r->guards[r->n_guards++];
            uint32_t reps = 0;
            g->max_worse = -1;
            rc = st_yaml_check_keys(c->y, m, m, what, gkeys);
            if (rc == 0) {
                rc = rule_metric(c, m, what, g->name, &g->dir, &g->agg, &reps);
            }
            if (rc == 0) {
                rc = st_yaml_get_f64(c->y, m, "max_worse", what, 0, 0, 100, &g->max_worse);
            }
            if (rc == 0 && g->max_worse < 0) {
                rc = st_yaml_fail(
                    c->y, m, "%s: missing key 'max_worse' (a fraction, 0.10 = 10%% worse)", what);
            }
            if (rc == 0) {
                rc = check_samples(c, m, what, g->name, &g->single);
            }
        } else {
            struct st_plan_limit *l = &r->limits[r->n_limits++];
            enum st_rules_dir dir;
            uint32_t reps;
            rc = st_yaml_check_keys(c->y, m, m, what, lkeys);
            if (rc == 0) {
                rc = st_plan_get_name(c, m, "name", what, 1, l->gate);
            }
            if (rc == 0) {
                rc = rule_metric(c, m, what, l->metric, &dir, &l->agg, &reps);
            }
            struct st_yaml_node *kn;
            l->has_min = st_yaml_get(c->y, m, "min", &kn) != NULL;
            l->has_max = st_yaml_get(c->y, m, "max", &kn) != NULL;
            if (rc == 0) {
                rc = st_yaml_get_f64(c->y, m, "min", what, 0, -1e300, 1e300, &l->min);
            }
            if (rc == 0) {
                rc = st_yaml_get_f64(c->y, m, "max", what, 0, -1e300, 1e300, &l->max);
            }
            if (rc == 0 && !l->has_min && !l->has_max) {
                rc = st_yaml_fail(c->y, m, "%s: give min, max or both", what);
            }
        }
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

static int parse_gates(struct st_plan_ctx *c, struct st_yaml_node *rules)
{
    static const char *const known[] = {
        "functional",     "quality",         "oom",    "server_exit",
        "context_tokens", "kv_floor_tokens", "limits", NULL};
    struct st_plan_rules *r = &c->p->rules;
    r->gate_functional = r->gate_quality = r->gate_oom = r->gate_server_exit = 1;
    struct st_yaml_node *k;
    struct st_yaml_node *map = st_yaml_get(c->y, rules, "gates", &k);
    if (!k) {
        return 0;
    }
    uint64_t kv = 0;
    int rc = st_yaml_check_keys(c->y, map, k, "rules.gates", known);
    if (rc == 0) {
        rc = st_yaml_get_bool(c->y, map, "functional", "rules.gates", 0, &r->gate_functional);
    }
    if (rc == 0) {
        rc = st_yaml_get_bool(c->y, map, "quality", "rules.gates", 0, &r->gate_quality);
    }
    if (rc == 0) {
        rc = st_yaml_get_bool(c->y, map, "oom", "rules.gates", 0, &r->gate_oom);
    }
    if (rc == 0) {
        rc = st_yaml_get_bool(c->y, map, "server_exit", "rules.gates", 0, &r->gate_server_exit);
    }
    if (rc == 0) {
        rc = st_yaml_get_u64(c->y, map, "context_tokens", "rules.gates", 0, 1,
                             ST_PLAN_STEP_MAX_TOKENS * 64, &r->context_tokens);
    }
    if (rc == 0) {
        rc = st_yaml_get_u64(c->y, map, "kv_floor_tokens", "rules.gates", 0, 1,
                             ST_PLAN_STEP_MAX_TOKENS * 64, &kv);
    }
    if (rc == 0 && kv > 0) {
        /* The KV floor is a limit on the server's own count, checked with the others. */
        struct st_plan_limit *l = &r->limits[r->n_limits++];
        snprintf(l->gate, sizeof(l->gate), "kv_floor");
        snprintf(l->metric, sizeof(l->metric), "server.kv_capacity_tokens");
        l->agg = ST_RULES_MEDIAN;
        l->has_min = 1;
        l->min = (double)kv;
    }
    if (rc == 0) {
        rc = parse_rule_list(c, map, "limits");
    }
    return rc;
}

int st_plan_parse_rules(struct st_plan_ctx *c, struct st_yaml_node *root)
{
    static const char *const known[] = {"noise",  "alpha", "aggregate",  "metrics",
                                        "guards", "gates", "escalation", NULL};
    static const char *const esc[] = {"promoted", "best", "all", NULL};
    struct st_plan_rules *r = &c->p->rules;
    struct st_yaml_node *k;
    struct st_yaml_node *map = st_yaml_get(c->y, root, "rules", &k);
    if (!k) {
        return st_yaml_fail(c->y, root, "missing key 'rules'");
    }
    r->noise = ST_RULES_DEFAULT_NOISE;
    int agg = ST_RULES_MEDIAN, e = ST_RULES_ESCALATE_PROMOTED;
    int rc = st_yaml_check_keys(c->y, map, k, "rules", known);
    if (rc == 0) {
        rc = st_yaml_get_f64(c->y, map, "noise", "rules", 0, 0, 0.99, &r->noise);
    }
    r->alpha = ST_RULES_DEFAULT_ALPHA;
    if (rc == 0) {
        rc = st_yaml_get_f64(c->y, map, "alpha", "rules", 0, 1e-6, 0.5, &r->alpha);
    }
    if (rc == 0) {
        rc = st_yaml_get_enum(c->y, map, "aggregate", "rules", 0, st_plan_agg_names, &agg);
    }
    if (rc == 0) {
        r->agg = (enum st_rules_agg)agg;
        rc = st_yaml_get_enum(c->y, map, "escalation", "rules", 0, esc, &e);
    }
    if (rc == 0) {
        r->escalation = (enum st_rules_escalation)e;
        rc = parse_rule_list(c, map, "metrics");
    }
    if (rc == 0) {
        rc = parse_rule_list(c, map, "guards");
    }
    if (rc == 0) {
        rc = parse_gates(c, map);
    }
    if (rc == 0 && r->n_metrics == 0) {
        rc = st_yaml_fail(c->y, map,
                          "rules.metrics: no ranked metric, so no arm could ever be promoted");
    }
    return rc;
}
