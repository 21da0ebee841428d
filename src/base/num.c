/*
 * Strict number parsing. See num.h.
 */
#include "base/num.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Digits s[0..n) (n >= 1, all digits) into *out when the value is <= max. */
static int digits(const char *s, size_t n, uint64_t max, uint64_t *out)
{
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t d = (uint64_t)(s[i] - '0');
        if (x > (UINT64_MAX - d) / 10) {
            return ST_EPARSE;
        }
        x = x * 10 + d;
    }
    if (x > max) {
        return ST_EPARSE;
    }
    *out = x;
    return 0;
}

int st_num_u64(const char *s, size_t n, uint64_t max, uint64_t *out)
{
    if (!s || n == 0) {
        return ST_EPARSE;
    }
    for (size_t i = 0; i < n; i++) {
        if (!digit(s[i])) {
            return ST_EPARSE;
        }
    }
    return digits(s, n, max, out);
}

int st_num_u64_prefix(const char *s, uint64_t max, const char **end, uint64_t *out)
{
    size_t n = 0;
    while (s && digit(s[n])) {
        n++;
    }
    if (n == 0 || digits(s, n, max, out) != 0) {
        return ST_EPARSE;
    }
    *end = s + n;
    return 0;
}

int st_num_i64(const char *s, size_t n, int64_t min, int64_t max, int64_t *out)
{
    if (!s || n == 0) {
        return ST_EPARSE;
    }
    int neg = s[0] == '-';
    size_t skip = neg || s[0] == '+';
    uint64_t mag;
    uint64_t lim = neg ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX;
    if (st_num_u64(s + skip, n - skip, lim, &mag) != 0) {
        return ST_EPARSE;
    }
    int64_t v = neg ? (mag == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
    if (v < min || v > max) {
        return ST_EPARSE;
    }
    *out = v;
    return 0;
}

/* Whether s[0..n) is the decimal grammar of num.h. */
static int decimal(const char *s, size_t n)
{
    size_t i = 0, nd = 0;
    if (i < n && (s[i] == '-' || s[i] == '+')) {
        i++;
    }
    while (i < n && digit(s[i])) {
        i++;
        nd++;
    }
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && digit(s[i])) {
            i++;
            nd++;
        }
    }
    if (nd == 0) {
        return 0;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) {
            i++;
        }
        size_t ne = 0;
        while (i < n && digit(s[i])) {
            i++;
            ne++;
        }
        if (ne == 0) {
            return 0;
        }
    }
    return i == n;
}

int st_num_f64(const char *s, size_t n, double min, double max, double *out)
{
    char tmp[128];
    if (!s || n == 0 || n >= sizeof(tmp) || !decimal(s, n)) {
        return ST_EPARSE;
    }
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    int saved = errno;
    double v = strtod(tmp, NULL);
    errno = saved;
    if (!isfinite(v) || v < min || v > max) {
        return ST_EPARSE;
    }
    *out = v;
    return 0;
}

int st_num_u64z(const char *s, uint64_t max, uint64_t *out)
{
    return st_num_u64(s, s ? strlen(s) : 0, max, out);
}

int st_num_i64z(const char *s, int64_t min, int64_t max, int64_t *out)
{
    return st_num_i64(s, s ? strlen(s) : 0, min, max, out);
}

int st_num_f64z(const char *s, double min, double max, double *out)
{
    return st_num_f64(s, s ? strlen(s) : 0, min, max, out);
}
