/*
 * Internal to campaign plan parsing (not an interface for anything else). The files, each
 * calling only those after it: plan.c (the root, target, arms, cross-checks, release),
 * planstep.c (the stages), planrules.c (the rules), planread.c (the node readers, the name
 * tables and the parameter helpers every part uses); planview.c (canonical form, hash, rules
 * view, an arm's parameters) reads a parsed plan and calls only planread.c. Pure: no file I/O.
 */
#ifndef ST_CAMPAIGN_PLAN_INT_H
#define ST_CAMPAIGN_PLAN_INT_H

#include <stddef.h>
#include <stdint.h>

#include "base/yaml.h"
#include "campaign/plan.h"

/* One parse: everything borrowed from st_plan_parse()'s frame. */
struct st_plan_ctx {
    const char *name; /* borrowed: the file name for messages */
    char *err;        /* borrowed, errlen bytes */
    size_t errlen;
    struct st_plan *p; /* borrowed: the plan being filled */
    struct st_yaml *y; /* borrowed: the document being read, and its messages */
};

/* Step kinds as bits, for the tables of which keys and metrics each kind takes. */
enum {
    ST_PLAN_SK_QUAL = 1u << ST_PLAN_STEP_QUALIFY,
    ST_PLAN_SK_BENCH = 1u << ST_PLAN_STEP_BENCH,
    ST_PLAN_SK_SWEEP = 1u << ST_PLAN_STEP_SWEEP,
    ST_PLAN_SK_PROBE = 1u << ST_PLAN_STEP_PROBE,
    ST_PLAN_SK_SOAK = 1u << ST_PLAN_STEP_SOAK,
    ST_PLAN_SK_ALL =
        ST_PLAN_SK_QUAL | ST_PLAN_SK_BENCH | ST_PLAN_SK_SWEEP | ST_PLAN_SK_PROBE | ST_PLAN_SK_SOAK,
};

/* The most tokens a step's input or output may ask for. */
#define ST_PLAN_STEP_MAX_TOKENS 16777216ull

/* Names of the enums' values, from 1, NULL-terminated (the YAML words and the canonical form's). */
extern const char *const st_plan_target_kinds[]; /* enum st_target_backend */
extern const char *const st_plan_step_kinds[];   /* enum st_plan_step_kind */
extern const char *const st_plan_agg_names[];    /* enum st_rules_agg */
extern const char *const st_plan_dir_names[];    /* enum st_rules_dir */

/* Whether s[0..n) is a name: 1 to ST_PLAN_NAME_MAX - 1 letters, digits, '_', '-' (and '.' when
 * dots). */
int st_plan_valid_name(const char *s, size_t n, int dots);
/* Reads name key of map into out: 0 (absent and not required: out untouched), or a parse error
 * with the position in c's messages. */
int st_plan_get_name(struct st_plan_ctx *c, struct st_yaml_node *map, const char *key,
                     const char *what, int required, char out[ST_PLAN_NAME_MAX]);
/* qsort order of struct st_target_param by name. */
int st_plan_cmp_param(const void *a, const void *b);
/* Reads a mapping of parameter name -> value or list of values into out (owned by the plan),
 * sorted by name: 0, ST_ETOOBIG (over ST_PLAN_MAX_PARAMS) or a parse error. */
int st_plan_get_params(struct st_plan_ctx *c, struct st_yaml_node *map, const char *key,
                       const char *what, int required, struct st_target_params *out);
/* The step of st whose id is id[0..n), borrowed from st; NULL when none. */
const struct st_plan_step *st_plan_find_step(const struct st_plan_stage *st, const char *id,
                                             size_t n);

/* planstep.c: the stages section into c->p (screening, full, order). 0 or a parse error. */
int st_plan_parse_stages(struct st_plan_ctx *c, struct st_yaml_node *root);
/* planrules.c: the rules section into c->p->rules, checked against the stages (read first).
 * 0 or a parse error. */
int st_plan_parse_rules(struct st_plan_ctx *c, struct st_yaml_node *root);

#endif
