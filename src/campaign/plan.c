/*
 * Campaign plan parsing and validation. See plan.h and docs/campaigns.md. The YAML is loaded
 * through base/yaml.h (the input guard, positions, typed getters), then walked section by
 * section: every mapping's keys are checked against a fixed list first (unknown ->
 * NAME:LINE:COL), then each known key is read by type. Cross-checks (arms against the baseline,
 * rules against the stages) run after the walk and point at the offending node. Pure: no file
 * I/O; every message goes into err. This file is the top (the root, the target, the arms, the
 * cross-checks, release); the stages (planstep.c), the rules (planrules.c) and the node readers
 * (planread.c) are below it; the canonical form is planview.c's (plan_int.h).
 */
#include "campaign/plan.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/xalloc.h"
#include "base/yaml.h"
#include "campaign/plan.h"

#include "campaign/plan_int.h"

/* ---- target ---- */

enum {
    K_SIM = 1u << ST_TARGET_BACKEND_SIM,
    K_CMD = 1u << ST_TARGET_BACKEND_COMMAND,
    K_COMPOSE = 1u << ST_TARGET_BACKEND_COMPOSE,
    K_URL = 1u << ST_TARGET_BACKEND_URL,
};

/* Which target keys each kind takes (kind itself: all). */
static const struct {
    const char *key;
    unsigned kinds;
} target_keys[] = {
    {"kind", K_SIM | K_CMD | K_COMPOSE | K_URL},
    {"profile", K_SIM},
    {"overrides", K_SIM},
    {"start", K_CMD},
    {"stop_signal", K_CMD},
    {"stop_timeout_s", K_CMD | K_COMPOSE},
    {"log", K_CMD},
    {"compose_file", K_COMPOSE},
    {"service", K_COMPOSE},
    {"override", K_COMPOSE},
    {"base_url", K_CMD | K_COMPOSE | K_URL},
    {"health_url", K_SIM | K_CMD | K_COMPOSE | K_URL},
    {"health_timeout_s", K_SIM | K_CMD | K_COMPOSE | K_URL},
};

#define N_TARGET_KEYS (sizeof(target_keys) / sizeof(target_keys[0]))

static const struct {
    const char *name;
    int sig;
} signals[] = {
    {"TERM", SIGTERM}, {"INT", SIGINT}, {"HUP", SIGHUP}, {"QUIT", SIGQUIT}, {"KILL", SIGKILL}};

static int parse_target(struct st_plan_ctx *c, struct st_yaml_node *root)
{
    struct st_target_spec *t = &c->p->target;
    struct st_yaml_node *k;
    struct st_yaml_node *map = st_yaml_get(c->y, root, "target", &k);
    if (!k) {
        return st_yaml_fail(c->y, root, "missing key 'target'");
    }
    const char *known[N_TARGET_KEYS + 1];
    for (size_t i = 0; i < N_TARGET_KEYS; i++) {
        known[i] = target_keys[i].key;
    }
    known[N_TARGET_KEYS] = NULL;
    int rc = st_yaml_check_keys(c->y, map, k, "target", known);
    int kind = 0;
    if (rc == 0) {
        rc = st_yaml_get_enum(c->y, map, "kind", "target", 1, st_plan_target_kinds, &kind);
    }
    if (rc != 0) {
        return rc;
    }
    t->kind = (enum st_target_backend)kind;
    for (size_t i = 0; i < N_TARGET_KEYS; i++) {
        struct st_yaml_node *kn;
        st_yaml_get(c->y, map, target_keys[i].key, &kn);
        if (kn && !(target_keys[i].kinds & (1u << kind))) {
            return st_yaml_fail(c->y, kn, "target.%s does not apply to kind %s", target_keys[i].key,
                                st_plan_target_kinds[kind - 1]);
        }
    }
    t->stop_signal = SIGTERM;
    t->stop_timeout_s = 60;
    t->health_timeout_s = 600;
    t->override = ST_TARGET_OVERRIDE_COMMAND;
    int need_url = kind != ST_TARGET_BACKEND_SIM;
    static const char *const overrides[] = {"command", "environment", NULL};
    int ov = ST_TARGET_OVERRIDE_COMMAND;
    rc =
        st_yaml_get_str(c->y, map, "profile", "target", kind == ST_TARGET_BACKEND_SIM, &t->profile);
    if (rc == 0) {
        rc = st_plan_get_params(c, map, "overrides", "target", 0, &t->overrides);
    }
    if (rc == 0) {
        rc = st_yaml_get_str(c->y, map, "start", "target", kind == ST_TARGET_BACKEND_COMMAND,
                             &t->start);
    }
    if (rc == 0) {
        rc = st_yaml_get_str(c->y, map, "log", "target", 0, &t->log);
    }
    if (rc == 0) {
        rc =
            st_yaml_get_f64(c->y, map, "stop_timeout_s", "target", 0, 1, 86400, &t->stop_timeout_s);
    }
    if (rc == 0) {
        rc = st_yaml_get_str(c->y, map, "compose_file", "target", kind == ST_TARGET_BACKEND_COMPOSE,
                             &t->compose_file);
    }
    if (rc == 0) {
        rc = st_yaml_get_str(c->y, map, "service", "target", kind == ST_TARGET_BACKEND_COMPOSE,
                             &t->service);
    }
    if (rc == 0) {
        rc = st_yaml_get_enum(c->y, map, "override", "target", 0, overrides, &ov);
    }
    if (rc == 0) {
        t->override = (enum st_target_override)ov;
        rc = st_yaml_get_str(c->y, map, "base_url", "target", need_url, &t->base_url);
    }
    if (rc == 0) {
        rc = st_yaml_get_str(c->y, map, "health_url", "target",
                             kind == ST_TARGET_BACKEND_COMMAND || kind == ST_TARGET_BACKEND_COMPOSE,
                             &t->health_url);
    }
    if (rc == 0) {
        rc = st_yaml_get_f64(c->y, map, "health_timeout_s", "target", 0, 1, 86400,
                             &t->health_timeout_s);
    }
    if (rc != 0) {
        return rc;
    }
    const char *s;
    size_t n;
    struct st_yaml_node *at;
    rc = st_yaml_get_scalar(c->y, map, "stop_signal", "target", 0, &s, &n, &at);
    if (rc < 0) {
        return rc;
    }
    if (rc == 0) {
        size_t i = 0;
        while (i < sizeof(signals) / sizeof(signals[0]) &&
               !(strlen(signals[i].name) == n && memcmp(signals[i].name, s, n) == 0)) {
            i++;
        }
        if (i == sizeof(signals) / sizeof(signals[0])) {
            return st_yaml_fail(c->y, at,
                                "target.stop_signal: expected TERM, INT, HUP, QUIT or KILL");
        }
        t->stop_signal = signals[i].sig;
    }
    return 0;
}

/* ---- arms ---- */

static int parse_arm(struct st_plan_ctx *c, struct st_yaml_node *m, uint32_t idx)
{
    static const char *const known[] = {"name",       "set",  "multi_variable",
                                        "on_best_of", "note", NULL};
    struct st_plan_arm *a = &c->p->arms[idx];
    char what[96];
    snprintf(what, sizeof(what), "arms[%u]", idx);
    st_yaml_pos(m, &a->line, &a->col);
    int rc = st_yaml_check_keys(c->y, m, m, what, known);
    if (rc == 0) {
        rc = st_plan_get_name(c, m, "name", what, 1, a->name);
    }
    if (rc == 0) {
        snprintf(what, sizeof(what), "arm %s", a->name);
        rc = st_plan_get_params(c, m, "set", what, 1, &a->set);
    }
    if (rc == 0) {
        rc = st_yaml_get_bool(c->y, m, "multi_variable", what, 0, &a->multi_variable);
    }
    if (rc == 0) {
        rc = st_yaml_get_str(c->y, m, "note", what, 0, &a->note);
    }
    struct st_yaml_node *seq, *k;
    if (rc == 0) {
        rc = st_yaml_get_seq(c->y, m, "on_best_of", what, 0, &seq, &k);
    }
    if (rc != 0 || !k) {
        return rc;
    }
    void *it = NULL;
    struct st_yaml_node *item;
    while ((item = st_yaml_seq_next(seq, &it)) != NULL) {
        size_t n;
        const char *s = st_yaml_is_scalar(item) ? st_yaml_text(c->y, item, &n) : "";
        if (!st_yaml_is_scalar(item) || !st_plan_valid_name(s, n, 0)) {
            return st_yaml_fail(c->y, item, "%s.on_best_of: expected arm names", what);
        }
        int found = n == 8 && memcmp(s, "baseline", 8) == 0;
        for (uint32_t j = 0; j < idx && !found; j++) {
            found = strlen(c->p->arms[j].name) == n && memcmp(c->p->arms[j].name, s, n) == 0;
        }
        if (!found) {
            return st_yaml_fail(c->y, item,
                                "%s.on_best_of: '%.*s' is neither baseline nor an earlier arm",
                                what, (int)n, s);
        }
        if (a->n_on_best_of == ST_PLAN_MAX_ARMS) {
            return st_yaml_fail(c->y, item, "%s.on_best_of: more than %d names", what,
                                ST_PLAN_MAX_ARMS);
        }
        memcpy(a->on_best_of[a->n_on_best_of], s, n);
        a->on_best_of[a->n_on_best_of++][n] = '\0';
    }
    if (a->n_on_best_of == 0) {
        return st_yaml_fail(c->y, seq ? seq : k, "%s.on_best_of: empty list", what);
    }
    return 0;
}

static int parse_arms(struct st_plan_ctx *c, struct st_yaml_node *root)
{
    struct st_yaml_node *seq, *k;
    int rc = st_yaml_get_seq(c->y, root, "arms", "plan", 1, &seq, &k);
    if (rc != 0) {
        return rc;
    }
    uint32_t count = st_yaml_count(seq);
    if (count == 0) {
        return st_yaml_fail(c->y, k, "arms: empty list (a campaign needs at least one arm)");
    }
    if (count > ST_PLAN_MAX_ARMS) {
        (void)st_yaml_fail(c->y, seq, "arms: %u arms, at most %d", count, ST_PLAN_MAX_ARMS);
        return ST_ETOOBIG;
    }
    c->p->arms = st_xcalloc((size_t)count, sizeof(*c->p->arms));
    void *it = NULL;
    struct st_yaml_node *item;
    while ((item = st_yaml_seq_next(seq, &it)) != NULL) {
        uint32_t i = c->p->n_arms++;
        rc = parse_arm(c, item, i);
        if (rc != 0) {
            return rc;
        }
        if (strcmp(c->p->arms[i].name, "baseline") == 0) {
            return st_yaml_fail(c->y, item, "arms[%u]: 'baseline' is reserved for the baseline", i);
        }
        for (uint32_t j = 0; j < i; j++) {
            if (strcmp(c->p->arms[j].name, c->p->arms[i].name) == 0) {
                return st_yaml_fail(c->y, item, "arm %s: the name is used twice",
                                    c->p->arms[i].name);
            }
        }
    }
    return 0;
}

/* ---- cross-checks ---- */

static int check_arms(struct st_plan_ctx *c)
{
    const struct st_plan *p = c->p;
    for (uint32_t i = 0; i < p->fixed.n; i++) {
        const struct st_target_param *f = &p->fixed.v[i];
        if (st_target_param_find(&p->baseline, f->name)) {
            return st_yaml_fail_at(
                c->y, f->line, f->col,
                "fixed parameter %s is also a baseline parameter (arms may change "
                "baseline parameters; fixed ones never change)",
                f->name);
        }
    }
    for (uint32_t i = 0; i < p->n_arms; i++) {
        const struct st_plan_arm *a = &p->arms[i];
        char changed[256] = "";
        size_t off = 0;
        uint32_t n_changed = 0;
        for (uint32_t j = 0; j < a->set.n; j++) {
            const struct st_target_param *s = &a->set.v[j];
            if (st_target_param_find(&p->fixed, s->name)) {
                return st_yaml_fail_at(c->y, s->line, s->col,
                                       "arm %s changes %s, which the plan holds fixed", a->name,
                                       s->name);
            }
            const struct st_target_param *b = st_target_param_find(&p->baseline, s->name);
            if (!b) {
                return st_yaml_fail_at(c->y, s->line, s->col,
                                       "arm %s changes %s, which the baseline does not name",
                                       a->name, s->name);
            }
            if (strcmp(b->value, s->value) != 0) {
                n_changed++;
                int w = snprintf(changed + off, sizeof(changed) - off, "%s%s %s -> %s",
                                 off ? ", " : "", s->name, b->value, s->value);
                off += w > 0 && (size_t)w < sizeof(changed) - off ? (size_t)w : 0;
            }
        }
        /* An arm on the best of others may restate their values; it still needs its own change,
         * which cannot be told before screening, so only a plain arm is held to this here. */
        if (n_changed == 0 && a->n_on_best_of == 0) {
            return st_yaml_fail_at(
                c->y, a->line, a->col,
                "arm %s changes nothing: every value in set equals the baseline's", a->name);
        }
        if (n_changed > 1 && !a->multi_variable) {
            return st_yaml_fail_at(
                c->y, a->line, a->col,
                "arm %s changes %u parameters (%s); one variable per arm, or declare "
                "multi_variable: true",
                a->name, n_changed, changed);
        }
    }
    return 0;
}

/* Every {name} in the command template names a baseline or fixed parameter. */
static int check_template(struct st_plan_ctx *c)
{
    const struct st_plan *p = c->p;
    const char *s = p->target.start;
    while (s && (s = strchr(s, '{')) != NULL) {
        const char *e = strchr(s + 1, '}');
        char name[ST_PLAN_NAME_MAX];
        size_t n = e ? (size_t)(e - s - 1) : 0;
        if (!e || !st_plan_valid_name(s + 1, n, 1)) {
            return st_yaml_fail_at(c->y, 0, 0,
                                   "target.start: '{' without a parameter name and '}'");
        }
        memcpy(name, s + 1, n);
        name[n] = '\0';
        if (!st_target_param_find(&p->baseline, name) && !st_target_param_find(&p->fixed, name)) {
            return st_yaml_fail_at(
                c->y, 0, 0, "target.start: {%s} is neither a baseline nor a fixed parameter", name);
        }
        s = e + 1;
    }
    return 0;
}

/* ---- the root ---- */

static int parse_root(struct st_plan_ctx *c, struct st_yaml_node *root)
{
    static const char *const known[] = {"name", "description", "target", "baseline", "fixed",
                                        "arms", "stages",      "rules",  NULL};
    struct st_plan *p = c->p;
    if (!root) {
        return st_yaml_fail_at(c->y, 0, 0, "empty plan");
    }
    int rc = st_yaml_check_keys(c->y, root, root, "the plan", known);
    if (rc == 0) {
        rc = st_plan_get_name(c, root, "name", "plan", 1, p->name);
    }
    if (rc == 0) {
        rc = st_yaml_get_str(c->y, root, "description", "plan", 0, &p->description);
    }
    if (rc == 0) {
        rc = parse_target(c, root);
    }
    if (rc == 0) {
        rc = st_plan_get_params(c, root, "baseline", "plan", 1, &p->baseline);
    }
    if (rc == 0 && p->baseline.n == 0) {
        struct st_yaml_node *k;
        rc = st_yaml_fail(c->y, st_yaml_get(c->y, root, "baseline", &k), "baseline: no parameters");
    }
    if (rc == 0) {
        rc = st_plan_get_params(c, root, "fixed", "plan", 0, &p->fixed);
    }
    if (rc == 0) {
        rc = parse_arms(c, root);
    }
    if (rc == 0) {
        rc = st_plan_parse_stages(c, root);
    }
    if (rc == 0) {
        rc = st_plan_parse_rules(c, root);
    }
    if (rc == 0) {
        rc = check_arms(c);
    }
    if (rc == 0) {
        rc = check_template(c);
    }
    return rc;
}

int st_plan_parse(const char *name, const char *text, size_t len, struct st_plan *p, char *err,
                  size_t errlen)
{
    memset(p, 0, sizeof(*p));
    const struct st_yaml_opts o = {.name = name, .noun = "a plan", .max_bytes = ST_PLAN_MAX_BYTES};
    struct st_yaml y;
    st_yaml_init(&y, &o, err, errlen);
    struct st_plan_ctx c = {name, err, errlen, p, &y};
    int rc = st_yaml_load(&y, text, len);
    if (rc == 0) {
        rc = parse_root(&c, st_yaml_root(&y));
    }
    st_yaml_release(&y);
    if (rc != 0) {
        st_plan_release(p);
    }
    return rc;
}

void st_plan_release(struct st_plan *p)
{
    struct st_target_spec *t = &p->target;
    free(t->profile);
    st_target_params_release(&t->overrides);
    free(t->start);
    free(t->log);
    free(t->compose_file);
    free(t->service);
    free(t->base_url);
    free(t->health_url);
    free(p->description);
    st_target_params_release(&p->baseline);
    st_target_params_release(&p->fixed);
    for (uint32_t i = 0; i < p->n_arms; i++) {
        st_target_params_release(&p->arms[i].set);
        free(p->arms[i].note);
    }
    free(p->arms);
    free(p->screening.steps);
    free(p->full.steps);
    memset(p, 0, sizeof(*p));
}
