/*
 * Campaign plan parsing's node readers (plan_int.h): names, parameter maps, strict decimals, the
 * tables of enum names, and the parameter helpers (lookup, order, release) the parser and the
 * views share. A leaf of the plan files: it calls none of them. Pure: no file I/O; every message
 * goes through the document's (base/yaml.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/xalloc.h"
#include "base/yaml.h"
#include "campaign/plan.h"

#include "campaign/plan_int.h"

/* ---- reading nodes (base/yaml.h reads the types; these are the plan's own) ---- */

/* Names and ids: letters, digits, '_' and '-' (no '.' or '@': they separate metric parts). */
int st_plan_valid_name(const char *s, size_t n, int dots)
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

int st_plan_get_name(struct st_plan_ctx *c, struct st_yaml_node *map, const char *key,
                     const char *what, int required, char out[ST_PLAN_NAME_MAX])
{
    const char *s;
    size_t n;
    struct st_yaml_node *at;
    int rc = st_yaml_get_scalar(c->y, map, key, what, required, &s, &n, &at);
    if (rc != 0) {
        return rc < 0 ? rc : 0;
    }
    if (!st_plan_valid_name(s, n, 0)) {
        return st_yaml_fail(c->y, at,
                            "%s.%s: '%.*s' is not a name (1 to %d letters, digits, '_' or '-')",
                            what, key, (int)(n > 64 ? 64 : n), s, ST_PLAN_NAME_MAX - 1);
    }
    memcpy(out, s, n);
    out[n] = '\0';
    return 0;
}

int st_plan_cmp_param(const void *a, const void *b)
{
    return strcmp(((const struct st_target_param *)a)->name,
                  ((const struct st_target_param *)b)->name);
}

/* One parameter's value: a scalar, or a list of scalars written "[a, b]". */
static int param_value(struct st_plan_ctx *c, struct st_yaml_node *pv, const char *what,
                       struct st_target_param *pp, struct st_buf *b)
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
int st_plan_get_params(struct st_plan_ctx *c, struct st_yaml_node *map, const char *key,
                       const char *what, int required, struct st_target_params *out)
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
        if (!st_yaml_is_scalar(pk) || !st_plan_valid_name(s, n, 1)) {
            return st_yaml_fail(c->y, st_yaml_either(pk, pv),
                                "%s: parameter names are letters, digits, '_', '-' or '.'", path);
        }
        struct st_target_param *pp = &out->v[out->n++];
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
        /* "" (quoted) is a value: a parameter that passes nothing, so an arm can add a flag the
         * baseline leaves out ({draft} of "" in the baseline, "-md d.gguf" in the arm). */
        if (rc == 0 && b.len == 0 && st_yaml_is_empty(pv)) {
            rc = st_yaml_fail(c->y, pk,
                              "%s.%s: empty value (write \"\" for a parameter that passes "
                              "nothing)",
                              path, pp->name);
        }
        if (rc != 0) {
            st_buf_release(&b);
            return rc;
        }
        pp->value = st_buf_take(&b);
    }
    qsort(out->v, out->n, sizeof(*out->v), st_plan_cmp_param);
    return 0;
}

const char *const st_plan_target_kinds[] = {"sim", "command", "compose", "url", NULL};

const char *const st_plan_step_kinds[] = {"qualify", "bench", "sweep", "probe", "soak", NULL};

const struct st_plan_step *st_plan_find_step(const struct st_plan_stage *st, const char *id,
                                             size_t n)
{
    for (uint32_t i = 0; i < st->n; i++) {
        if (strlen(st->steps[i].id) == n && memcmp(st->steps[i].id, id, n) == 0) {
            return &st->steps[i];
        }
    }
    return NULL;
}

const char *const st_plan_agg_names[] = {"median", "mean", "min", "max", NULL};
const char *const st_plan_dir_names[] = {"higher", "lower", NULL};
