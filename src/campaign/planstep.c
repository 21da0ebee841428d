/*
 * Campaign plan parsing: the stages section (plan_int.h): screening and full, each a list of
 * steps whose keys are checked against the kind's list, their repeats (fixed or sequential) and
 * points, the order (blocked or interleaved), and the checks across them (a step id in both is
 * one kind; full holds the long output and the soak). Called by plan.c; calls planread.c only.
 * Pure: no file I/O.
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

/* ---- stages ---- */

/* Which step keys each kind takes; required: which kinds must give it. */
static const struct {
    const char *key;
    unsigned kinds, required;
} step_keys[] = {
    {"id", ST_PLAN_SK_ALL, ST_PLAN_SK_ALL},
    {"kind", ST_PLAN_SK_ALL, ST_PLAN_SK_ALL},
    {"repeats", ST_PLAN_SK_ALL, 0},
    {"suite", ST_PLAN_SK_QUAL, ST_PLAN_SK_QUAL},
    {"input_tokens", ST_PLAN_SK_BENCH | ST_PLAN_SK_SWEEP | ST_PLAN_SK_PROBE | ST_PLAN_SK_SOAK,
     ST_PLAN_SK_SWEEP | ST_PLAN_SK_PROBE},
    {"output_tokens", ST_PLAN_SK_BENCH | ST_PLAN_SK_SWEEP | ST_PLAN_SK_PROBE | ST_PLAN_SK_SOAK,
     ST_PLAN_SK_BENCH | ST_PLAN_SK_SWEEP | ST_PLAN_SK_PROBE},
    {"seed_output_tokens", ST_PLAN_SK_PROBE, 0},
    {"categories", ST_PLAN_SK_BENCH, 0},
    {"concurrency", ST_PLAN_SK_BENCH | ST_PLAN_SK_SWEEP | ST_PLAN_SK_PROBE | ST_PLAN_SK_SOAK,
     ST_PLAN_SK_SWEEP | ST_PLAN_SK_PROBE},
    {"shared_frac", ST_PLAN_SK_SWEEP, ST_PLAN_SK_SWEEP},
    {"requests_per_cc", ST_PLAN_SK_SWEEP, 0},
    {"flush_warm", ST_PLAN_SK_SWEEP, 0},
    {"duration_s", ST_PLAN_SK_SOAK, ST_PLAN_SK_SOAK},
};

#define N_STEP_KEYS (sizeof(step_keys) / sizeof(step_keys[0]))

static int parse_points(struct st_plan_ctx *c, struct st_yaml_node *m, struct st_plan_step *s,
                        const char *what)
{
    struct st_yaml_node *seq, *k;
    int rc = st_yaml_get_seq(c->y, m, "categories", what, 0, &seq, &k);
    void *it = NULL;
    struct st_yaml_node *item;
    while (rc == 0 && k && (item = st_yaml_seq_next(seq, &it)) != NULL) {
        size_t n;
        const char *t = st_yaml_is_scalar(item) ? st_yaml_text(c->y, item, &n) : "";
        if (!st_yaml_is_scalar(item) || !st_plan_valid_name(t, n, 0)) {
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
        if (!st_yaml_is_scalar(item) || st_num_u64(t, n, UINT64_MAX, &v) != 0 || v < 1 ||
            v > 65536) {
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
static int parse_repeats(struct st_plan_ctx *c, struct st_yaml_node *m, struct st_plan_step *s,
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

static int parse_step(struct st_plan_ctx *c, struct st_yaml_node *m, const char *stage,
                      uint32_t idx, struct st_plan_step *s)
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
        rc = st_plan_get_name(c, m, "id", what, 1, s->id);
    }
    if (rc == 0) {
        rc = st_yaml_get_enum(c->y, m, "kind", what, 1, st_plan_step_kinds, &kind);
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
                                step_keys[i].key, st_plan_step_kinds[kind - 1]);
        }
        if (!kn && (step_keys[i].required & (1u << kind))) {
            return st_yaml_fail(c->y, m, "%s: kind %s needs '%s'", what,
                                st_plan_step_kinds[kind - 1], step_keys[i].key);
        }
    }
    s->repeats = kind == ST_PLAN_STEP_BENCH ? 3 : 1;
    s->seed_output_tokens = kind == ST_PLAN_STEP_PROBE ? 8 : 0;
    s->requests_per_cc = kind == ST_PLAN_STEP_SWEEP ? 2 : 0;
    s->flush_warm = kind == ST_PLAN_STEP_SWEEP;
    rc = parse_repeats(c, m, s, what);
    if (rc == 0) {
        rc = st_plan_get_name(c, m, "suite", what, 0, s->suite);
    }
    if (rc == 0) {
        rc = st_yaml_get_u64(c->y, m, "input_tokens", what, 0, 0, ST_PLAN_STEP_MAX_TOKENS,
                             &s->input_tokens);
    }
    if (rc == 0) {
        rc = st_yaml_get_u64(c->y, m, "output_tokens", what, 0, 1, ST_PLAN_STEP_MAX_TOKENS,
                             &s->output_tokens);
    }
    if (rc == 0) {
        rc = st_yaml_get_u64(c->y, m, "seed_output_tokens", what, 0, 1, ST_PLAN_STEP_MAX_TOKENS,
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

static int parse_stage(struct st_plan_ctx *c, struct st_yaml_node *map, const char *name,
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

int st_plan_parse_stages(struct st_plan_ctx *c, struct st_yaml_node *root)
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
        rc = st_yaml_get_u64(c->y, map, "full_min_output_tokens", "stages", 0, 0,
                             ST_PLAN_STEP_MAX_TOKENS, &p->full_min_output_tokens);
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
        const struct st_plan_step *s = st_plan_find_step(&p->screening, f->id, strlen(f->id));
        if (s && s->kind != f->kind) {
            return st_yaml_fail_at(
                c->y, f->line, f->col, "step %s is a %s step in screening and a %s step in full",
                f->id, st_plan_step_kinds[s->kind - 1], st_plan_step_kinds[f->kind - 1]);
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
