/*
 * Command-line value parsers. See args.h.
 */
#include "cli/args.h"

#include <stdio.h>
#include <string.h>

#include "base/num.h"

int st_arg_u64(const char *opt, const char *val, uint64_t min, uint64_t max, uint64_t *out,
               char *err, size_t errlen)
{
    uint64_t v = 0;
    if (st_num_u64z(val, max, &v) != 0 || v < min) {
        snprintf(err, errlen, "%s: expected an integer from %llu to %llu, got '%s'", opt,
                 (unsigned long long)min, (unsigned long long)max, val ? val : "");
        return ST_EUSAGE;
    }
    *out = v;
    return 0;
}

int st_arg_i64(const char *opt, const char *val, int64_t min, int64_t max, int64_t *out, char *err,
               size_t errlen)
{
    if (st_num_i64z(val, min, max, out) != 0) {
        snprintf(err, errlen, "%s: expected an integer from %lld to %lld, got '%s'", opt,
                 (long long)min, (long long)max, val ? val : "");
        return ST_EUSAGE;
    }
    return 0;
}

int st_arg_f64(const char *opt, const char *val, double min, double max, double *out, char *err,
               size_t errlen)
{
    if (st_num_f64z(val, min, max, out) != 0) {
        snprintf(err, errlen, "%s: expected a number from %g to %g, got '%s'", opt, min, max,
                 val ? val : "");
        return ST_EUSAGE;
    }
    return 0;
}

int st_arg_choice(const char *opt, const char *val, const char *const *choices, int *out, char *err,
                  size_t errlen)
{
    for (int i = 0; choices[i]; i++) {
        if (val && strcmp(val, choices[i]) == 0) {
            *out = i;
            return 0;
        }
    }
    size_t n = (size_t)snprintf(err, errlen, "%s: expected one of", opt);
    for (int i = 0; choices[i] && n < errlen; i++) {
        n += (size_t)snprintf(err + n, errlen - n, "%s%s", i ? ", " : " ", choices[i]);
    }
    if (n < errlen) {
        snprintf(err + n, errlen - n, "; got '%s'", val ? val : "");
    }
    return ST_EUSAGE;
}

const char *st_opt_name(const struct st_opt *opt)
{
    return opt->label ? opt->label : opt->flag;
}

size_t st_opt_count(const struct st_opt *table)
{
    size_t n = 0;
    while (table[n].flag) {
        n++;
    }
    return n;
}

struct st_opt *st_opt_find(struct st_opt *table, const char *flag)
{
    for (size_t i = 0; table[i].flag; i++) {
        if (strcmp(table[i].flag, flag) == 0) {
            return &table[i];
        }
    }
    return NULL;
}

/* An unsigned integer row: the value in [umin, umax] (a range the destination holds), stored at
 * the destination's width. */
static int apply_unsigned(const struct st_opt *opt, const char *v, char *err, size_t errlen)
{
    uint64_t u = 0;
    int rc = st_arg_u64(st_opt_name(opt), v, opt->umin, opt->umax, &u, err, errlen);
    if (rc) {
        return rc;
    }
    if (opt->kind == ST_OPT_K_U32) {
        *opt->to.u32 = (uint32_t)u;
    } else if (opt->kind == ST_OPT_K_SIZE) {
        *opt->to.size = (size_t)u;
    } else {
        *opt->to.u64 = u;
    }
    return 0;
}

int st_opt_apply(const struct st_opt *opt, const char *v, char *err, size_t errlen)
{
    if (opt->given) {
        *opt->given = 1;
    }
    if (opt->mark) {
        *opt->mark = opt->flag;
    }
    if (opt->refuse) {
        snprintf(err, errlen, "%s", opt->refuse);
        return ST_EUSAGE;
    }
    const char *name = st_opt_name(opt);
    int k = 0;
    int rc = 0;
    switch (opt->kind) {
    case ST_OPT_K_FLAG:
        *opt->to.i = opt->set;
        return 0;
    case ST_OPT_K_STR:
        *opt->to.s = v;
        return 0;
    case ST_OPT_K_U32:
    case ST_OPT_K_U64:
    case ST_OPT_K_SIZE:
        return apply_unsigned(opt, v, err, errlen);
    case ST_OPT_K_I64:
        return st_arg_i64(name, v, opt->imin, opt->imax, opt->to.i64, err, errlen);
    case ST_OPT_K_F64:
        if (opt->word && v && strcmp(v, opt->word) == 0) {
            *opt->to.f64 = opt->word_f64;
            return 0;
        }
        return st_arg_f64(name, v, opt->fmin, opt->fmax, opt->to.f64, err, errlen);
    case ST_OPT_K_CHOICE:
        rc = st_arg_choice(name, v, opt->choices, &k, err, errlen);
        if (rc == 0) {
            *opt->to.i = opt->values ? opt->values[k] : k;
        }
        return rc;
    case ST_OPT_K_FN:
        return opt->fn(opt, v, err, errlen);
    }
    snprintf(err, errlen, "%s: unknown option kind", name);
    return ST_EUSAGE;
}
