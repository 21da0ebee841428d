/*
 * Campaign plan parsing, validation and canonical form. See plan.h and docs/campaigns.md. The
 * YAML is loaded through base/yaml.h (the input guard, positions, typed getters), then walked
 * section by section: every mapping's keys are checked against a fixed list first (unknown ->
 * NAME:LINE:COL), then each known key is read by type. Cross-checks (arms against the baseline,
 * rules against the stages) run after the walk and point at the offending node. Pure: no file
 * I/O; every message goes into err.
 */
#include "campaign/plan.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/xalloc.h"
#include "base/yaml.h"

struct ctx {
    const char *name; /* borrowed: the file name for messages */
    char *err;        /* borrowed, errlen bytes */
    size_t errlen;
    struct st_plan *p; /* borrowed: the plan being filled */
    struct st_yaml *y; /* borrowed: the document being read, and its messages */
};

/* ---- reading nodes (base/yaml.h reads the types; these are the plan's own) ---- */

/* Names and ids: letters, digits, '_' and '-' (no '.' or '@': they separate metric parts). */
static int valid_name(const char *s, size_t n, int dots)
{
    if (n == 0 || n >= ST_PLAN_NAME_MAX) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '_' || ch == '-' || (dots && ch == '.');
        if (!ok) {
            return 0;
        }
    }
    return 1;
}

static int get_name(struct ctx *c, struct st_yaml_node *map, const char *key, const char *what,
                    int required, char out[ST_PLAN_NAME_MAX])
{
    const char *s;
    size_t n;
    struct st_yaml_node *at;
    int rc = st_yaml_get_scalar(c->y, map, key, what, required, &s, &n, &at);
    if (rc != 0) {
        return rc < 0 ? rc : 0;
    }
    if (!valid_name(s, n, 0)) {
        return st_yaml_fail(c->y, at,
                            "%s.%s: '%.*s' is not a name (1 to %d letters, digits, '_' or '-')",
                            what, key, (int)(n > 64 ? 64 : n), s, ST_PLAN_NAME_MAX - 1);
    }
    memcpy(out, s, n);
    out[n] = '\0';
    return 0;
}

static int parse_u64(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0 || n > 19) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return -1;
        }
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return 0;
}

static int cmp_param(const void *a, const void *b)
{
    return strcmp(((const struct st_plan_param *)a)->name, ((const struct st_plan_param *)b)->name);
}

/* One parameter's value: a scalar, or a list of scalars written "[a, b]". */
static int param_value(struct ctx *c, struct st_yaml_node *pv, const char *what,
                       struct st_plan_param *pp, struct st_buf *b)
{
    size_t n;
    const char *s;
    if (st_yaml_is_scalar(pv)) {
        s = st_yaml_text(c->y, pv, &n);
        if (memchr(s, '\0', n)) {
            return st_yaml_fail(c->y, pv, "%s.%s: a NUL character in the value", what, pp->name);
        }
        st_buf_append(b, s, n);
        return 0;
    }
    if (!st_yaml_is_seq(pv)) {
        return 1;
    }
    void *jt = NULL;
    struct st_yaml_node *item;
    st_buf_putc(b, '[');
    for (int i = 0; (item = st_yaml_seq_next(pv, &jt)) != NULL; i++) {
        if (!st_yaml_is_scalar(item)) {
            return st_yaml_fail(c->y, item, "%s.%s: list items must be single values", what,
                                pp->name);
        }
        s = st_yaml_text(c->y, item, &n);
        if (memchr(s, '\0', n)) {
            return st_yaml_fail(c->y, item, "%s.%s: a NUL character in the value", what, pp->name);
        }
        st_buf_puts(b, i ? ", " : "");
        st_buf_append(b, s, n);
    }
    st_buf_putc(b, ']');
    return 0;
}

/* A mapping of parameter name -> scalar or list of scalars. */
static int get_params(struct ctx *c, struct st_yaml_node *map, const char *key, const char *what,
                      int required, struct st_plan_params *out)
{
    struct st_yaml_node *k;
    struct st_yaml_node *v = st_yaml_get(c->y, map, key, &k);
    if (!k) {
        return required ? st_yaml_fail(c->y, map, "%s: missing key '%s'", what, key) : 0;
    }
    if (!st_yaml_is_map(v)) {
        return st_yaml_fail(c->y, v ? v : k,
                            "%s.%s: expected a mapping of parameter names to values", what, key);
    }
    uint32_t count = st_yaml_count(v);
    if (count > ST_PLAN_MAX_PARAMS) {
        (void)st_yaml_fail(c->y, v, "%s.%s: %u parameters, at most %d", what, key, count,
                           ST_PLAN_MAX_PARAMS);
        return ST_ETOOBIG;
    }
    out->v = st_xcalloc(count > 0 ? (size_t)count : 1, sizeof(*out->v));
    void *it = NULL;
    struct st_yaml_node *pk, *pv;
    char path[160];
    snprintf(path, sizeof(path), "%s.%s", what, key);
    while (st_yaml_map_next(v, &it, &pk, &pv)) {
        size_t n;
        const char *s = st_yaml_text(c->y, pk, &n);
        if (!st_yaml_is_scalar(pk) || !valid_name(s, n, 1)) {
            return st_yaml_fail(c->y, st_yaml_either(pk, pv),
                                "%s: parameter names are letters, digits, '_', '-' or '.'", path);
        }
        struct st_plan_param *pp = &out->v[out->n++];
        memcpy(pp->name, s, n);
        pp->name[n] = '\0';
        (void)st_yaml_pos(pk, &pp->line, &pp->col);
        struct st_buf b;
        st_buf_init(&b);
        int rc = param_value(c, pv, path, pp, &b);
        if (rc > 0) {
            rc = st_yaml_fail(c->y, pv ? pv : pk, "%s.%s: expected a value or a list of values",
                              path, pp->name);
        }
        if (rc == 0 && b.len == 0) {
            rc = st_yaml_fail(c->y, pk, "%s.%s: empty value", path, pp->name);
        }
        if (rc != 0) {
            st_buf_release(&b);
            return rc;
        }
        pp->value = st_buf_take(&b);
    }
    qsort(out->v, out->n, sizeof(*out->v), cmp_param);
    return 0;
}

/* ---- target ---- */

enum {
    K_SIM = 1u << ST_PLAN_TARGET_SIM,
    K_CMD = 1u << ST_PLAN_TARGET_COMMAND,
    K_COMPOSE = 1u << ST_PLAN_TARGET_COMPOSE,
    K_URL = 1u << ST_PLAN_TARGET_URL,
};

static const char *const target_kinds[] = {"sim", "command", "compose", "url", NULL};

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

static int parse_target(struct ctx *c, struct st_yaml_node *root)
{
    struct st_plan_target *t = &c->p->target;
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
        rc = st_yaml_get_enum(c->y, map, "kind", "target", 1, target_kinds, &kind);
    }
    if (rc != 0) {
        return rc;
    }
    t->kind = (enum st_plan_target_kind)kind;
    for (size_t i = 0; i < N_TARGET_KEYS; i++) {
        struct st_yaml_node *kn;
        st_yaml_get(c->y, map, target_keys[i].key, &kn);
        if (kn && !(target_keys[i].kinds & (1u << kind))) {
            return st_yaml_fail(c->y, kn, "target.%s does not apply to kind %s", target_keys[i].key,
                                target_kinds[kind - 1]);
        }
    }
    t->stop_signal = SIGTERM;
    t->stop_timeout_s = 60;
    t->health_timeout_s = 600;
    t->override = ST_PLAN_OVERRIDE_COMMAND;
    int need_url = kind != ST_PLAN_TARGET_SIM;
    static const char *const overrides[] = {"command", "environment", NULL};
    int ov = ST_PLAN_OVERRIDE_COMMAND;
    rc = st_yaml_get_str(c->y, map, "profile", "target", kind == ST_PLAN_TARGET_SIM, &t->profile);
    if (rc == 0) {
        rc = get_params(c, map, "overrides", "target", 0, &t->overrides);
    }
    if (rc == 0) {
        rc = st_yaml_get_str(c->y, map, "start", "target", kind == ST_PLAN_TARGET_COMMAND,
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
        rc = st_yaml_get_str(c->y, map, "compose_file", "target", kind == ST_PLAN_TARGET_COMPOSE,
                             &t->compose_file);
    }
    if (rc == 0) {
        rc = st_yaml_get_str(c->y, map, "service", "target", kind == ST_PLAN_TARGET_COMPOSE,
                             &t->service);
    }
    if (rc == 0) {
        rc = st_yaml_get_enum(c->y, map, "override", "target", 0, overrides, &ov);
    }
    if (rc == 0) {
        t->override = (enum st_plan_override)ov;
        rc = st_yaml_get_str(c->y, map, "base_url", "target", need_url, &t->base_url);
    }
    if (rc == 0) {
        rc = st_yaml_get_str(c->y, map, "health_url", "target",
                             kind == ST_PLAN_TARGET_COMMAND || kind == ST_PLAN_TARGET_COMPOSE,
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

static int parse_arm(struct ctx *c, struct st_yaml_node *m, uint32_t idx)
{
    static const char *const known[] = {"name",       "set",  "multi_variable",
                                        "on_best_of", "note", NULL};
    struct st_plan_arm *a = &c->p->arms[idx];
    char what[96];
    snprintf(what, sizeof(what), "arms[%u]", idx);
    st_yaml_pos(m, &a->line, &a->col);
    int rc = st_yaml_check_keys(c->y, m, m, what, known);
    if (rc == 0) {
        rc = get_name(c, m, "name", what, 1, a->name);
    }
    if (rc == 0) {
        snprintf(what, sizeof(what), "arm %s", a->name);
        rc = get_params(c, m, "set", what, 1, &a->set);
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
        if (!st_yaml_is_scalar(item) || !valid_name(s, n, 0)) {
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

static int parse_arms(struct ctx *c, struct st_yaml_node *root)
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

/* ---- stages ---- */

static const char *const step_kinds[] = {"qualify", "bench", "sweep", "probe", "soak", NULL};

enum {
    S_QUAL = 1u << ST_PLAN_STEP_QUALIFY,
    S_BENCH = 1u << ST_PLAN_STEP_BENCH,
    S_SWEEP = 1u << ST_PLAN_STEP_SWEEP,
    S_PROBE = 1u << ST_PLAN_STEP_PROBE,
    S_SOAK = 1u << ST_PLAN_STEP_SOAK,
    S_ALL = S_QUAL | S_BENCH | S_SWEEP | S_PROBE | S_SOAK,
};

/* Which step keys each kind takes; required: which kinds must give it. */
static const struct {
    const char *key;
    unsigned kinds, required;
} step_keys[] = {
    {"id", S_ALL, S_ALL},
    {"kind", S_ALL, S_ALL},
    {"repeats", S_ALL, 0},
    {"suite", S_QUAL, S_QUAL},
    {"input_tokens", S_BENCH | S_SWEEP | S_PROBE | S_SOAK, S_SWEEP | S_PROBE},
    {"output_tokens", S_BENCH | S_SWEEP | S_PROBE | S_SOAK, S_BENCH | S_SWEEP | S_PROBE},
    {"seed_output_tokens", S_PROBE, 0},
    {"categories", S_BENCH, 0},
    {"concurrency", S_BENCH | S_SWEEP | S_PROBE | S_SOAK, S_SWEEP | S_PROBE},
    {"shared_frac", S_SWEEP, S_SWEEP},
    {"requests_per_cc", S_SWEEP, 0},
    {"flush_warm", S_SWEEP, 0},
    {"duration_s", S_SOAK, S_SOAK},
};

#define N_STEP_KEYS (sizeof(step_keys) / sizeof(step_keys[0]))
#define MAX_TOKENS 16777216ull

static const struct st_plan_step *find_step(const struct st_plan_stage *st, const char *id,
                                            size_t n)
{
    for (uint32_t i = 0; i < st->n; i++) {
        if (strlen(st->steps[i].id) == n && memcmp(st->steps[i].id, id, n) == 0) {
            return &st->steps[i];
        }
    }
    return NULL;
}

static int parse_points(struct ctx *c, struct st_yaml_node *m, struct st_plan_step *s,
                        const char *what)
{
    struct st_yaml_node *seq, *k;
    int rc = st_yaml_get_seq(c->y, m, "categories", what, 0, &seq, &k);
    void *it = NULL;
    struct st_yaml_node *item;
    while (rc == 0 && k && (item = st_yaml_seq_next(seq, &it)) != NULL) {
        size_t n;
        const char *t = st_yaml_is_scalar(item) ? st_yaml_text(c->y, item, &n) : "";
        if (!st_yaml_is_scalar(item) || !valid_name(t, n, 0)) {
            return st_yaml_fail(c->y, item, "%s.categories: expected names", what);
        }
        if (s->n_categories == ST_PLAN_MAX_POINTS) {
            return st_yaml_fail(c->y, item, "%s.categories: more than %d", what,
                                ST_PLAN_MAX_POINTS);
        }
        for (uint32_t j = 0; j < s->n_categories; j++) {
            if (strlen(s->categories[j]) == n && memcmp(s->categories[j], t, n) == 0) {
                return st_yaml_fail(c->y, item, "%s.categories: '%.*s' twice", what, (int)n, t);
            }
        }
        memcpy(s->categories[s->n_categories], t, n);
        s->categories[s->n_categories++][n] = '\0';
    }
    if (rc == 0) {
        rc = st_yaml_get_seq(c->y, m, "concurrency", what, 0, &seq, &k);
    }
    it = NULL;
    while (rc == 0 && k && (item = st_yaml_seq_next(seq, &it)) != NULL) {
        size_t n;
        const char *t = st_yaml_is_scalar(item) ? st_yaml_text(c->y, item, &n) : "";
        uint64_t v = 0;
        if (!st_yaml_is_scalar(item) || parse_u64(t, n, &v) != 0 || v < 1 || v > 65536) {
            return st_yaml_fail(c->y, item,
                                "%s.concurrency: expected whole numbers from 1 to 65536", what);
        }
        if (s->n_concurrency == ST_PLAN_MAX_POINTS) {
            return st_yaml_fail(c->y, item, "%s.concurrency: more than %d levels", what,
                                ST_PLAN_MAX_POINTS);
        }
        for (uint32_t j = 0; j < s->n_concurrency; j++) {
            if (s->concurrency[j] == v) {
                return st_yaml_fail(c->y, item, "%s.concurrency: %llu twice", what,
                                    (unsigned long long)v);
            }
        }
        s->concurrency[s->n_concurrency++] = (uint32_t)v;
    }
    if (rc == 0 && k && st_yaml_count(seq) == 0) {
        return st_yaml_fail(c->y, k, "%s: empty list", what);
    }
    return rc;
}

/* repeats: N (every arm runs N, default set by the caller), or {min: A, max: B}: sequential, A
 * always, then one more at a time up to B while the rules ask for more (docs/campaigns.md). */
static int parse_repeats(struct ctx *c, struct st_yaml_node *m, struct st_plan_step *s,
                         const char *what)
{
    struct st_yaml_node *k;
    struct st_yaml_node *v = st_yaml_get(c->y, m, "repeats", &k);
    if (!st_yaml_is_map(v)) {
        int rc = st_yaml_get_u32(c->y, m, "repeats", what, 0, 1, 1000, &s->repeats);
        s->repeats_max = s->repeats;
        return rc;
    }
    static const char *const known[] = {"min", "max", NULL};
    char w2[160];
    snprintf(w2, sizeof(w2), "%s.repeats", what);
    uint64_t lo = 0, hi = 0;
    int rc = st_yaml_check_keys(c->y, v, k, w2, known);
    if (rc == 0) {
        rc = st_yaml_get_u64(c->y, v, "min", w2, 1, 2, 1000, &lo);
    }
    if (rc == 0) {
        rc = st_yaml_get_u64(c->y, v, "max", w2, 1, 2, 1000, &hi);
    }
    if (rc == 0 && hi < lo) {
        rc = st_yaml_fail(c->y, v, "%s: max %llu is below min %llu", w2, (unsigned long long)hi,
                          (unsigned long long)lo);
    }
    if (rc == 0 && hi - lo >= ST_GSEQ_MAX_LOOKS) {
        rc = st_yaml_fail(c->y, v, "%s: %llu looks, at most %d (max - min + 1)", w2,
                          (unsigned long long)(hi - lo + 1), ST_GSEQ_MAX_LOOKS);
    }
    s->repeats = (uint32_t)lo;
    s->repeats_max = (uint32_t)hi;
    return rc;
}

static int parse_step(struct ctx *c, struct st_yaml_node *m, const char *stage, uint32_t idx,
                      struct st_plan_step *s)
{
    char what[128];
    snprintf(what, sizeof(what), "stages.%s[%u]", stage, idx);
    const char *known[N_STEP_KEYS + 1];
    for (size_t i = 0; i < N_STEP_KEYS; i++) {
        known[i] = step_keys[i].key;
    }
    known[N_STEP_KEYS] = NULL;
    st_yaml_pos(m, &s->line, &s->col);
    int kind = 0;
    int rc = st_yaml_check_keys(c->y, m, m, what, known);
    if (rc == 0) {
        rc = get_name(c, m, "id", what, 1, s->id);
    }
    if (rc == 0) {
        rc = st_yaml_get_enum(c->y, m, "kind", what, 1, step_kinds, &kind);
    }
    if (rc != 0) {
        return rc;
    }
    s->kind = (enum st_plan_step_kind)kind;
    snprintf(what, sizeof(what), "step %s", s->id);
    for (size_t i = 0; i < N_STEP_KEYS; i++) {
        struct st_yaml_node *kn;
        st_yaml_get(c->y, m, step_keys[i].key, &kn);
        if (kn && !(step_keys[i].kinds & (1u << kind))) {
            return st_yaml_fail(c->y, kn, "%s: '%s' does not apply to kind %s", what,
                                step_keys[i].key, step_kinds[kind - 1]);
        }
        if (!kn && (step_keys[i].required & (1u << kind))) {
            return st_yaml_fail(c->y, m, "%s: kind %s needs '%s'", what, step_kinds[kind - 1],
                                step_keys[i].key);
        }
    }
    s->repeats = kind == ST_PLAN_STEP_BENCH ? 3 : 1;
    s->seed_output_tokens = kind == ST_PLAN_STEP_PROBE ? 8 : 0;
    s->requests_per_cc = kind == ST_PLAN_STEP_SWEEP ? 2 : 0;
    s->flush_warm = kind == ST_PLAN_STEP_SWEEP;
    rc = parse_repeats(c, m, s, what);
    if (rc == 0) {
        rc = get_name(c, m, "suite", what, 0, s->suite);
    }
    if (rc == 0) {
        rc = st_yaml_get_u64(c->y, m, "input_tokens", what, 0, 0, MAX_TOKENS, &s->input_tokens);
    }
    if (rc == 0) {
        rc = st_yaml_get_u64(c->y, m, "output_tokens", what, 0, 1, MAX_TOKENS, &s->output_tokens);
    }
    if (rc == 0) {
        rc = st_yaml_get_u64(c->y, m, "seed_output_tokens", what, 0, 1, MAX_TOKENS,
                             &s->seed_output_tokens);
    }
    if (rc == 0) {
        rc = st_yaml_get_f64(c->y, m, "shared_frac", what, 0, 0, 1, &s->shared_frac);
    }
    if (rc == 0) {
        rc = st_yaml_get_u32(c->y, m, "requests_per_cc", what, 0, 1, 1000, &s->requests_per_cc);
    }
    if (rc == 0) {
        rc = st_yaml_get_bool(c->y, m, "flush_warm", what, 0, &s->flush_warm);
    }
    if (rc == 0) {
        rc = st_yaml_get_f64(c->y, m, "duration_s", what, 0, 1, 7 * 86400, &s->duration_s);
    }
    if (rc == 0) {
        rc = parse_points(c, m, s, what);
    }
    if (rc == 0 && s->n_concurrency == 0 &&
        (kind == ST_PLAN_STEP_BENCH || kind == ST_PLAN_STEP_SOAK)) {
        s->concurrency[s->n_concurrency++] = 1;
    }
    return rc;
}

static int parse_stage(struct ctx *c, struct st_yaml_node *map, const char *name,
                       struct st_plan_stage *st)
{
    struct st_yaml_node *seq, *k;
    int rc = st_yaml_get_seq(c->y, map, name, "stages", 1, &seq, &k);
    if (rc != 0) {
        return rc;
    }
    uint32_t count = st_yaml_count(seq);
    if (count == 0) {
        return st_yaml_fail(c->y, k, "stages.%s: empty list", name);
    }
    if (count > ST_PLAN_MAX_STEPS) {
        (void)st_yaml_fail(c->y, seq, "stages.%s: %u steps, at most %d", name, count,
                           ST_PLAN_MAX_STEPS);
        return ST_ETOOBIG;
    }
    st->steps = st_xcalloc((size_t)count, sizeof(*st->steps));
    void *it = NULL;
    struct st_yaml_node *item;
    while ((item = st_yaml_seq_next(seq, &it)) != NULL) {
        struct st_plan_step *s = &st->steps[st->n];
        rc = parse_step(c, item, name, st->n, s);
        st->n++;
        if (rc != 0) {
            return rc;
        }
        for (uint32_t j = 0; j + 1 < st->n; j++) {
            if (strcmp(st->steps[j].id, s->id) == 0) {
                return st_yaml_fail(c->y, item, "stages.%s: step id %s is used twice", name, s->id);
            }
        }
    }
    return 0;
}

static int parse_stages(struct ctx *c, struct st_yaml_node *root)
{
    static const char *const known[] = {"screening",       "full",  "full_min_output_tokens",
                                        "full_min_soak_s", "order", NULL};
    static const char *const orders[] = {"blocked", "interleaved", NULL};
    struct st_yaml_node *k;
    struct st_yaml_node *map = st_yaml_get(c->y, root, "stages", &k);
    if (!k) {
        return st_yaml_fail(c->y, root, "missing key 'stages'");
    }
    struct st_plan *p = c->p;
    p->full_min_output_tokens = 16384;
    p->full_min_soak_s = 600;
    int rc = st_yaml_check_keys(c->y, map, k, "stages", known);
    if (rc == 0) {
        rc = parse_stage(c, map, "screening", &p->screening);
    }
    if (rc == 0) {
        rc = parse_stage(c, map, "full", &p->full);
    }
    if (rc == 0) {
        rc = st_yaml_get_u64(c->y, map, "full_min_output_tokens", "stages", 0, 0, MAX_TOKENS,
                             &p->full_min_output_tokens);
    }
    if (rc == 0) {
        rc = st_yaml_get_f64(c->y, map, "full_min_soak_s", "stages", 0, 0, 7 * 86400,
                             &p->full_min_soak_s);
    }
    int order = 1;
    if (rc == 0) {
        rc = st_yaml_get_enum(c->y, map, "order", "stages", 0, orders, &order);
        p->interleaved = order == 2;
    }
    if (rc != 0) {
        return rc;
    }
    /* A step id in both stages names one measurement: metric references resolve to it. */
    for (uint32_t i = 0; i < p->full.n; i++) {
        const struct st_plan_step *f = &p->full.steps[i];
        const struct st_plan_step *s = find_step(&p->screening, f->id, strlen(f->id));
        if (s && s->kind != f->kind) {
            return st_yaml_fail_at(c->y, f->line, f->col,
                                   "step %s is a %s step in screening and a %s step in full", f->id,
                                   step_kinds[s->kind - 1], step_kinds[f->kind - 1]);
        }
    }
    /* The full stage is what replaces a default: it must hold the long output and the soak. */
    int long_out = p->full_min_output_tokens == 0, soak = p->full_min_soak_s == 0;
    for (uint32_t i = 0; i < p->full.n; i++) {
        const struct st_plan_step *s = &p->full.steps[i];
        long_out |= s->kind == ST_PLAN_STEP_BENCH && s->output_tokens >= p->full_min_output_tokens;
        soak |= s->kind == ST_PLAN_STEP_SOAK && s->duration_s >= p->full_min_soak_s;
    }
    struct st_yaml_node *fk;
    struct st_yaml_node *full = st_yaml_get(c->y, map, "full", &fk);
    if (!long_out) {
        return st_yaml_fail(c->y, full, "stages.full: no bench step with output_tokens >= %llu",
                            (unsigned long long)p->full_min_output_tokens);
    }
    if (!soak) {
        return st_yaml_fail(c->y, full, "stages.full: no soak step with duration_s >= %g",
                            p->full_min_soak_s);
    }
    return 0;
}

/* ---- rules ---- */

/* The metrics each step kind produces; point: 1 when the metric is per category (bench,
 * when the step has categories) or per concurrency level (sweep, probe: "@ccN"). */
static const struct {
    unsigned kinds;
    const char *name;
    enum st_rules_dir dir;
    int point;
} metric_defs[] = {
    {S_QUAL, "pass_count", ST_RULES_HIGHER, 0},
    {S_QUAL, "fail_count", ST_RULES_LOWER, 0},
    {S_BENCH | S_PROBE, "decode_tps", ST_RULES_HIGHER, 1},
    {S_BENCH | S_SWEEP, "output_tps", ST_RULES_HIGHER, 1},
    {S_BENCH | S_SWEEP, "ttft_s", ST_RULES_LOWER, 1},
    {S_BENCH, "e2e_s", ST_RULES_LOWER, 1},
    {S_BENCH, "completed", ST_RULES_HIGHER, 1},
    {S_SWEEP, "tpot_s", ST_RULES_LOWER, 1},
    {S_SWEEP, "hit_rate", ST_RULES_HIGHER, 1},
    {S_PROBE, "max_docs", ST_RULES_HIGHER, 0},
    {S_PROBE, "queued", ST_RULES_LOWER, 1},
    {S_PROBE, "ttft_max_s", ST_RULES_LOWER, 1},
    {S_SOAK, "output_tps", ST_RULES_HIGHER, 0},
    {S_SOAK, "ttft_s", ST_RULES_LOWER, 0},
    {S_SOAK, "error_rate", ST_RULES_LOWER, 0},
    {S_SOAK, "completed", ST_RULES_HIGHER, 0},
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
static int resolve_metric(struct ctx *c, struct st_yaml_node *at, const char *ref,
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
    const struct st_plan_step *s = find_step(&c->p->screening, ref, sn);
    if (!s) {
        s = find_step(&c->p->full, ref, sn);
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
                            ref, step_kinds[s->kind - 1], (int)mn, mname, list);
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
    if (point[0] == 'c' && point[1] == 'c' && parse_u64(point + 2, strlen(point + 2), &cc) == 0) {
        for (uint32_t j = 0; j < s->n_concurrency; j++) {
            if (s->concurrency[j] == cc) {
                return 0;
            }
        }
    }
    return st_yaml_fail(c->y, at, "metric '%s': step %s has no concurrency point '%s' (write ccN)",
                        ref, s->id, point);
}

static const char *const agg_names[] = {"median", "mean", "min", "max", NULL};
static const char *const dir_names[] = {"higher", "lower", NULL};

/* metric, aggregate and direction of a rule item; the direction defaults to the metric's own. */
static int rule_metric(struct ctx *c, struct st_yaml_node *m, const char *what,
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
        rc = st_yaml_get_enum(c->y, m, "direction", what, 0, dir_names, &d);
    }
    if (rc == 0) {
        rc = st_yaml_get_enum(c->y, m, "aggregate", what, 0, agg_names, &a);
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
static int check_samples(struct ctx *c, struct st_yaml_node *m, const char *what, const char *name,
                         int *single)
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
        const struct st_plan_step *s = find_step(stages[i], name, sn);
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

static int parse_rule_list(struct ctx *c, struct st_yaml_node *map, const char *key)
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
                rc = get_name(c, m, "name", what, 1, l->gate);
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

static int parse_gates(struct ctx *c, struct st_yaml_node *rules)
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
        rc = st_yaml_get_u64(c->y, map, "context_tokens", "rules.gates", 0, 1, MAX_TOKENS * 64,
                             &r->context_tokens);
    }
    if (rc == 0) {
        rc = st_yaml_get_u64(c->y, map, "kv_floor_tokens", "rules.gates", 0, 1, MAX_TOKENS * 64,
                             &kv);
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

static int parse_rules(struct ctx *c, struct st_yaml_node *root)
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
        rc = st_yaml_get_enum(c->y, map, "aggregate", "rules", 0, agg_names, &agg);
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

/* ---- cross-checks ---- */

const struct st_plan_param *st_plan_param_find(const struct st_plan_params *ps, const char *name)
{
    for (uint32_t i = 0; i < ps->n; i++) {
        if (strcmp(ps->v[i].name, name) == 0) {
            return &ps->v[i];
        }
    }
    return NULL;
}

static int check_arms(struct ctx *c)
{
    const struct st_plan *p = c->p;
    for (uint32_t i = 0; i < p->fixed.n; i++) {
        const struct st_plan_param *f = &p->fixed.v[i];
        if (st_plan_param_find(&p->baseline, f->name)) {
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
            const struct st_plan_param *s = &a->set.v[j];
            if (st_plan_param_find(&p->fixed, s->name)) {
                return st_yaml_fail_at(c->y, s->line, s->col,
                                       "arm %s changes %s, which the plan holds fixed", a->name,
                                       s->name);
            }
            const struct st_plan_param *b = st_plan_param_find(&p->baseline, s->name);
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
static int check_template(struct ctx *c)
{
    const struct st_plan *p = c->p;
    const char *s = p->target.start;
    while (s && (s = strchr(s, '{')) != NULL) {
        const char *e = strchr(s + 1, '}');
        char name[ST_PLAN_NAME_MAX];
        size_t n = e ? (size_t)(e - s - 1) : 0;
        if (!e || !valid_name(s + 1, n, 1)) {
            return st_yaml_fail_at(c->y, 0, 0,
                                   "target.start: '{' without a parameter name and '}'");
        }
        memcpy(name, s + 1, n);
        name[n] = '\0';
        if (!st_plan_param_find(&p->baseline, name) && !st_plan_param_find(&p->fixed, name)) {
            return st_yaml_fail_at(
                c->y, 0, 0, "target.start: {%s} is neither a baseline nor a fixed parameter", name);
        }
        s = e + 1;
    }
    return 0;
}

/* ---- the root ---- */

static int parse_root(struct ctx *c, struct st_yaml_node *root)
{
    static const char *const known[] = {"name", "description", "target", "baseline", "fixed",
                                        "arms", "stages",      "rules",  NULL};
    struct st_plan *p = c->p;
    if (!root) {
        return st_yaml_fail_at(c->y, 0, 0, "empty plan");
    }
    int rc = st_yaml_check_keys(c->y, root, root, "the plan", known);
    if (rc == 0) {
        rc = get_name(c, root, "name", "plan", 1, p->name);
    }
    if (rc == 0) {
        rc = st_yaml_get_str(c->y, root, "description", "plan", 0, &p->description);
    }
    if (rc == 0) {
        rc = parse_target(c, root);
    }
    if (rc == 0) {
        rc = get_params(c, root, "baseline", "plan", 1, &p->baseline);
    }
    if (rc == 0 && p->baseline.n == 0) {
        struct st_yaml_node *k;
        rc = st_yaml_fail(c->y, st_yaml_get(c->y, root, "baseline", &k), "baseline: no parameters");
    }
    if (rc == 0) {
        rc = get_params(c, root, "fixed", "plan", 0, &p->fixed);
    }
    if (rc == 0) {
        rc = parse_arms(c, root);
    }
    if (rc == 0) {
        rc = parse_stages(c, root);
    }
    if (rc == 0) {
        rc = parse_rules(c, root);
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
    struct ctx c = {name, err, errlen, p, &y};
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

void st_plan_params_release(struct st_plan_params *ps)
{
    for (uint32_t i = 0; i < ps->n; i++) {
        free(ps->v[i].value);
    }
    free(ps->v);
    memset(ps, 0, sizeof(*ps));
}

void st_plan_release(struct st_plan *p)
{
    struct st_plan_target *t = &p->target;
    free(t->profile);
    st_plan_params_release(&t->overrides);
    free(t->start);
    free(t->log);
    free(t->compose_file);
    free(t->service);
    free(t->base_url);
    free(t->health_url);
    free(p->description);
    st_plan_params_release(&p->baseline);
    st_plan_params_release(&p->fixed);
    for (uint32_t i = 0; i < p->n_arms; i++) {
        st_plan_params_release(&p->arms[i].set);
        free(p->arms[i].note);
    }
    free(p->arms);
    free(p->screening.steps);
    free(p->full.steps);
    memset(p, 0, sizeof(*p));
}

/* ---- canonical form ---- */

static void jw_opt_str(struct st_jw *w, const char *key, const char *s)
{
    st_jw_key(w, key);
    if (s) {
        st_jw_str(w, s);
    } else {
        st_jw_null(w);
    }
}

static void jw_params(struct st_jw *w, const char *key, const struct st_plan_params *ps)
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
        st_jw_kstr(w, "kind", step_kinds[s->kind - 1]);
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
        st_jw_kf64(w, "shared_frac", s->shared_frac);
        st_jw_ku64(w, "requests_per_cc", s->requests_per_cc);
        st_jw_kbool(w, "flush_warm", s->flush_warm);
        st_jw_kf64(w, "duration_s", s->duration_s);
        st_jw_obj_close(w);
    }
    st_jw_arr_close(w);
}

void st_plan_rules_json(struct st_jw *w, const struct st_plan_rules *r)
{
    st_jw_key(w, "rules");
    st_jw_obj_open(w);
    st_jw_kf64(w, "noise", r->noise);
    /* Held only when not the default, so plans written before the key keep their hash. */
    if (r->alpha != ST_RULES_DEFAULT_ALPHA) {
        st_jw_kf64(w, "alpha", r->alpha);
    }
    st_jw_kstr(w, "aggregate", agg_names[r->agg - 1]);
    st_jw_kstr(w, "escalation",
               r->escalation == ST_RULES_ESCALATE_BEST  ? "best"
               : r->escalation == ST_RULES_ESCALATE_ALL ? "all"
                                                        : "promoted");
    st_jw_key(w, "metrics");
    st_jw_arr_open(w);
    for (uint32_t i = 0; i < r->n_metrics; i++) {
        st_jw_obj_open(w);
        st_jw_kstr(w, "metric", r->metrics[i].name);
        st_jw_kstr(w, "direction", dir_names[r->metrics[i].dir - 1]);
        st_jw_kstr(w, "aggregate", agg_names[r->metrics[i].agg - 1]);
        st_jw_ku64(w, "repeats", r->metrics[i].repeats);
        st_jw_kf64(w, "weight", r->metrics[i].weight);
        if (r->metrics[i].single) {
            st_jw_ku64(w, "samples", 1);
        }
        st_jw_obj_close(w);
    }
    st_jw_arr_close(w);
    st_jw_key(w, "guards");
    st_jw_arr_open(w);
    for (uint32_t i = 0; i < r->n_guards; i++) {
        st_jw_obj_open(w);
        st_jw_kstr(w, "metric", r->guards[i].name);
        st_jw_kstr(w, "direction", dir_names[r->guards[i].dir - 1]);
        st_jw_kstr(w, "aggregate", agg_names[r->guards[i].agg - 1]);
        st_jw_kf64(w, "max_worse", r->guards[i].max_worse);
        if (r->guards[i].single) {
            st_jw_ku64(w, "samples", 1);
        }
        st_jw_obj_close(w);
    }
    st_jw_arr_close(w);
    st_jw_key(w, "gates");
    st_jw_obj_open(w);
    st_jw_kbool(w, "functional", r->gate_functional);
    st_jw_kbool(w, "quality", r->gate_quality);
    st_jw_kbool(w, "oom", r->gate_oom);
    st_jw_kbool(w, "server_exit", r->gate_server_exit);
    st_jw_ku64(w, "context_tokens", r->context_tokens);
    st_jw_key(w, "limits");
    st_jw_arr_open(w);
    for (uint32_t i = 0; i < r->n_limits; i++) {
        const struct st_plan_limit *l = &r->limits[i];
        st_jw_obj_open(w);
        st_jw_kstr(w, "name", l->gate);
        st_jw_kstr(w, "metric", l->metric);
        st_jw_kstr(w, "aggregate", agg_names[l->agg - 1]);
        st_jw_key(w, "min");
        if (l->has_min) {
            st_jw_f64(w, l->min);
        } else {
            st_jw_null(w);
        }
        st_jw_key(w, "max");
        if (l->has_max) {
            st_jw_f64(w, l->max);
        } else {
            st_jw_null(w);
        }
        st_jw_obj_close(w);
    }
    st_jw_arr_close(w);
    st_jw_obj_close(w);
    st_jw_obj_close(w);
}

void st_plan_canonical(const struct st_plan *p, struct st_buf *out)
{
    const struct st_plan_target *t = &p->target;
    struct st_jw w;
    st_jw_init(&w, out);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "format", "servetune-plan/1");
    st_jw_kstr(&w, "name", p->name);
    jw_opt_str(&w, "description", p->description);
    st_jw_key(&w, "target");
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "kind", target_kinds[t->kind - 1]);
    jw_opt_str(&w, "profile", t->profile);
    jw_params(&w, "overrides", &t->overrides);
    jw_opt_str(&w, "start", t->start);
    st_jw_ki64(&w, "stop_signal", t->stop_signal);
    st_jw_kf64(&w, "stop_timeout_s", t->stop_timeout_s);
    jw_opt_str(&w, "log", t->log);
    jw_opt_str(&w, "compose_file", t->compose_file);
    jw_opt_str(&w, "service", t->service);
    st_jw_kstr(&w, "override",
               t->override == ST_PLAN_OVERRIDE_ENVIRONMENT ? "environment" : "command");
    jw_opt_str(&w, "base_url", t->base_url);
    jw_opt_str(&w, "health_url", t->health_url);
    st_jw_kf64(&w, "health_timeout_s", t->health_timeout_s);
    st_jw_obj_close(&w);
    jw_params(&w, "baseline", &p->baseline);
    jw_params(&w, "fixed", &p->fixed);
    st_jw_key(&w, "arms");
    st_jw_arr_open(&w);
    for (uint32_t i = 0; i < p->n_arms; i++) {
        const struct st_plan_arm *a = &p->arms[i];
        st_jw_obj_open(&w);
        st_jw_kstr(&w, "name", a->name);
        jw_params(&w, "set", &a->set);
        st_jw_kbool(&w, "multi_variable", a->multi_variable);
        st_jw_key(&w, "on_best_of");
        st_jw_arr_open(&w);
        for (uint32_t j = 0; j < a->n_on_best_of; j++) {
            st_jw_str(&w, a->on_best_of[j]);
        }
        st_jw_arr_close(&w);
        jw_opt_str(&w, "note", a->note);
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
    return (n == 6 && memcmp(metric, "server", 6) == 0) || find_step(st, metric, n) != NULL;
}

/* The looks of metric in stage: its step's repeats (min, max); 2..2 for server metrics (they
 * are decided on one value: the rule has samples: 1). */
static void stage_design(const struct st_plan_stage *stage, const char *metric, uint32_t *lo,
                         uint32_t *hi)
{
    const char *dot = strchr(metric, '.');
    const struct st_plan_step *s = dot ? find_step(stage, metric, (size_t)(dot - metric)) : NULL;
    *lo = s && s->repeats >= 2 ? s->repeats : 2;
    *hi = s && s->repeats_max >= *lo ? s->repeats_max : *lo;
}

void st_plan_rules_view(const struct st_plan *p, const struct st_plan_stage *stage,
                        struct st_plan_rules_view *view)
{
    const struct st_plan_rules *r = &p->rules;
    memset(view, 0, sizeof(*view));
    view->cfg.noise = r->noise;
    view->cfg.alpha = r->alpha;
    for (uint32_t i = 0; i < r->n_metrics; i++) {
        const struct st_plan_metric *m = &r->metrics[i];
        if (in_stage(stage, m->name)) {
            /* The looks are the step's in this stage (full may repeat more than screening). */
            uint32_t lo, hi;
            stage_design(stage, m->name, &lo, &hi);
            view->metrics[view->cfg.n_metrics++] =
                (struct st_rules_metric){m->name, m->dir, m->agg, lo, hi, m->weight, m->single};
        }
    }
    for (uint32_t i = 0; i < r->n_guards; i++) {
        const struct st_plan_guard *g = &r->guards[i];
        if (in_stage(stage, g->name)) {
            uint32_t lo, hi;
            stage_design(stage, g->name, &lo, &hi);
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
static void put_param(struct st_plan_params *ps, const struct st_plan_param *src)
{
    for (uint32_t i = 0; i < ps->n; i++) {
        if (strcmp(ps->v[i].name, src->name) == 0) {
            free(ps->v[i].value);
            ps->v[i].value = st_xstrdup(src->value);
            return;
        }
    }
    struct st_plan_param *d = &ps->v[ps->n++];
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
                       struct st_plan_params *out, char *err, size_t errlen)
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
        const struct st_plan_param *before = st_plan_param_find(out, a->set.v[i].name);
        n_changed += !before || strcmp(before->value, a->set.v[i].value) != 0;
        put_param(out, &a->set.v[i]);
    }
    qsort(out->v, out->n, sizeof(*out->v), cmp_param);
    const char *on = w ? w->name : "baseline";
    if (n_changed == 0) {
        st_errf(err, errlen, "arm %s changes nothing on top of %s", a->name, on);
        st_plan_params_release(out);
        return ST_EPARSE;
    }
    if (n_changed > 1 && !a->multi_variable) {
        st_errf(err, errlen,
                "arm %s changes %u parameters on top of %s; one variable per arm, or declare "
                "multi_variable: true",
                a->name, n_changed, on);
        st_plan_params_release(out);
        return ST_EPARSE;
    }
    return 0;
}
