/*
 * Names of enum values from a table: `static const char *const names[] = {[ST_X_A] = "a", ...};`
 * then `ST_NAME_OF(names, v, "?")`. A value outside the table, or one the table leaves out, gives
 * the fallback, so a new enum value without a name prints the fallback instead of reading past
 * the table. Header-only; pure.
 */
#ifndef ST_BASE_NAMES_H
#define ST_BASE_NAMES_H

#include <stddef.h>

static inline const char *st_name_of(const char *const *names, size_t n, long v,
                                     const char *fallback)
{
    return v >= 0 && (size_t)v < n && names[v] ? names[v] : fallback;
}

#define ST_NAME_OF(tab, v, fallback)                                                               \
    st_name_of((tab), sizeof(tab) / sizeof((tab)[0]), (long)(v), (fallback))

#endif
