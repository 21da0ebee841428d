/*
 * Strict number parsing, the one place every input's numbers are read (command-line values, plan
 * and profile scalars, fault and sync specs): the whole text must be the number, with no space,
 * no locale, no hex, no inf or nan, and an overflow is an error, never a wrap or a clamp.
 * The callers word their own messages (which input, what was expected); these only say yes or no.
 *
 * Pure: no allocation, no errno left set, thread-safe.
 */
#ifndef ST_BASE_NUM_H
#define ST_BASE_NUM_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* s[0..n): one or more decimal digits, value <= max. Returns 0 with *out, or ST_EPARSE. */
int st_num_u64(const char *s, size_t n, uint64_t max, uint64_t *out) ST_WUR;

/* The longest run of decimal digits at s (at least one), value <= max, into *out with *end after
 * it (for "key=12,..." forms). Returns 0, or ST_EPARSE (no digit, or over max). */
int st_num_u64_prefix(const char *s, uint64_t max, const char **end, uint64_t *out) ST_WUR;

/* s[0..n): an optional '-' or '+' then digits, within [min, max]. Returns 0 with *out, or
 * ST_EPARSE. */
int st_num_i64(const char *s, size_t n, int64_t min, int64_t max, int64_t *out) ST_WUR;

/*
 * s[0..n): a decimal number: optional '-' or '+', digits with at most one '.', at least one digit,
 * an optional exponent e[+-]digits; finite and within [min, max]. Returns 0 with *out, or
 * ST_EPARSE.
 */
int st_num_f64(const char *s, size_t n, double min, double max, double *out) ST_WUR;

/* The same for NUL-terminated text (NULL is refused). */
int st_num_u64z(const char *s, uint64_t max, uint64_t *out) ST_WUR;
int st_num_i64z(const char *s, int64_t min, int64_t max, int64_t *out) ST_WUR;
int st_num_f64z(const char *s, double min, double max, double *out) ST_WUR;

#endif
