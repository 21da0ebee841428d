/*
 * Header lines: the name compared without case, the value trimmed, numbers read strictly
 * (base/num.h) so "12abc" or "-3" is not a number.
 */
#include "proto/httphdr.h"

#include <stdint.h>
#include <strings.h>

#include "base/num.h"

static int blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

int st_hdr_value(const char *p, size_t n, const char *name, const char **v, size_t *vn)
{
    size_t k = 0;
    while (name[k]) {
        k++;
    }
    if (n < k || strncasecmp(p, name, k) != 0) {
        return 0;
    }
    size_t i = k, e = n;
    while (i < e && blank(p[i])) {
        i++;
    }
    while (e > i && blank(p[e - 1])) {
        e--;
    }
    *v = p + i;
    *vn = e - i;
    return 1;
}

int64_t st_hdr_retry_after(const char *p, size_t n)
{
    const char *v;
    size_t vn;
    uint64_t x;
    if (!st_hdr_value(p, n, "retry-after:", &v, &vn) || vn == 0) {
        return -1;
    }
    for (size_t i = 0; i < vn; i++) {
        if (v[i] < '0' || v[i] > '9') {
            return -1;
        }
    }
    /* Whole digits; a number too large for 64 bits is still a delay of more than a day. */
    if (st_num_u64(v, vn, UINT64_MAX, &x) != 0 || x > 86400) {
        return 86400;
    }
    return (int64_t)x;
}

int st_hdr_nums(const char *p, size_t n, const char *name, uint64_t *a, uint64_t *b)
{
    const char *v;
    size_t vn;
    if (!st_hdr_value(p, n, name, &v, &vn)) {
        return -1;
    }
    size_t i = 0;
    while (i < vn && v[i] >= '0' && v[i] <= '9') {
        i++;
    }
    if (st_num_u64(v, i, UINT64_MAX, a) != 0) {
        return -1;
    }
    if (!b) {
        return i == vn ? 0 : -1;
    }
    size_t j = i;
    while (j < vn && (v[j] == ' ' || v[j] == '\t')) {
        j++;
    }
    if (j == i || st_num_u64(v + j, vn - j, UINT64_MAX, b) != 0) {
        return -1;
    }
    return 0;
}
