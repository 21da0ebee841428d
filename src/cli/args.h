/*
 * Command-line value parsing shared by the subcommands: each parser names the option and says
 * what was expected when the value is bad, in a message the caller prints. No printing here.
 */
#ifndef ST_CLI_ARGS_H
#define ST_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* Integer in [min, max]. Returns 0 or ST_EUSAGE (message in err). */
int st_arg_u64(const char *opt, const char *val, uint64_t min, uint64_t max, uint64_t *out,
               char *err, size_t errlen) ST_WUR;
int st_arg_i64(const char *opt, const char *val, int64_t min, int64_t max, int64_t *out, char *err,
               size_t errlen) ST_WUR;
/* Finite number in [min, max]. */
int st_arg_f64(const char *opt, const char *val, double min, double max, double *out, char *err,
               size_t errlen) ST_WUR;
/* One of the NULL-terminated choices; *out is its index. */
int st_arg_choice(const char *opt, const char *val, const char *const *choices, int *out, char *err,
                  size_t errlen) ST_WUR;

#endif
