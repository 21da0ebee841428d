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
