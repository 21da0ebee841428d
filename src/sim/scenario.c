/*
 * Fault keys and scenario files (see scenario.h). The scenario reader is a line reader for a flat
 * "key: value" mapping, not a YAML parser: nesting, lists and multi-line values are refused with
 * the line number, so a file never means something other than what it says. Pure.
 */
#include "sim/scenario.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/num.h"

/* Longest value. */
#define MAX_VALUE 64u
/* Most keys in one scenario file. */
#define MAX_KEYS 64u

void st_sim_faults_init(struct st_sim_faults *f)
{
    memset(f, 0, sizeof(*f));
}

int st_sim_faults_any(const struct st_sim_faults *f)
{
    return f->startup_oom || f->crash_after_requests || f->crash_after_s > 0 ||
           f->slow_start_s > 0 || f->pressure_blocks > 0 || f->slow_step_us > 0;
}

enum fkey {
    F_OOM = 0,
    F_CRASH_N,
    F_CRASH_S,
    F_SLOW,
    F_PRESSURE,
    F_PRESSURE_AT,
    F_PRESSURE_AT_ALIAS,
    F_PRESSURE_FOR,
    F_SLOW_STEP,
    F_COUNT,
};

static const struct {
    const char *name;
    const char *expect;
} fkeys[] = {
    {"startup_oom", "1 or 0"},
    {"crash_after_requests", "a request count in [1, 1000000000], or 0 for off"},
    {"crash_after_s", "virtual seconds, a decimal number in [0, 10000000] (0 = off)"},
    {"slow_start_s", "virtual seconds, a decimal number in [0, 10000000]"},
    {"memory_pressure_blocks", "a block count in [0, 268435456]"},
    {"memory_pressure_at_s", "virtual seconds, a decimal number in [0, 10000000]"},
    {"at_s", "virtual seconds, a decimal number in [0, 10000000]"},
    {"memory_pressure_for_s", "virtual seconds, a decimal number in [0, 10000000] (0 = forever)"},
    {"slow_step_us", "real microseconds, an integer in [0, 10000000]"},
};

_Static_assert(sizeof(fkeys) / sizeof(fkeys[0]) == F_COUNT, "one entry per fault key");

static int find_fkey(const char *k, size_t n)
{
    for (int i = 0; i < F_COUNT; i++) {
        if (strlen(fkeys[i].name) == n && memcmp(fkeys[i].name, k, n) == 0) {
            return i;
        }
    }
    return -1;
}

static int parse_u64(const char *v, size_t n, uint64_t max, uint64_t *out)
{
    return st_num_u64(v, n, max, out) == 0 ? 0 : ST_EPARSE;
}

/* Strict decimal seconds: digits with at most one inner dot, in [0, ST_SIM_FAULT_MAX_S]. */
static int parse_s(const char *v, size_t n, double *out)
{
    char tmp[MAX_VALUE + 1];
    size_t digits = 0, dots = 0;
    if (n == 0 || n > MAX_VALUE) {
        return ST_EPARSE;
    }
    for (size_t i = 0; i < n; i++) {
        if (v[i] >= '0' && v[i] <= '9') {
            digits++;
        } else if (v[i] == '.' && i > 0 && i + 1 < n && dots == 0) {
            dots++;
        } else {
            return ST_EPARSE;
        }
    }
    if (digits == 0) {
        return ST_EPARSE;
    }
    memcpy(tmp, v, n);
    tmp[n] = '\0';
    double x = strtod(tmp, NULL);
    if (!(x >= 0 && x <= ST_SIM_FAULT_MAX_S)) {
        return ST_EPARSE;
    }
    *out = x;
    return 0;
}

static int set_fkey(struct st_sim_faults *f, int k, const char *v, size_t n)
{
    uint64_t x = 0;
    int rc = ST_EPARSE;
    switch (k) {
    case F_OOM:
        rc = parse_u64(v, n, 1, &x);
        if (rc == 0) {
            f->startup_oom = (int)x;
        }
        break;
    case F_CRASH_N:
        rc = parse_u64(v, n, 1000000000u, &f->crash_after_requests);
        break;
    case F_CRASH_S:
        rc = parse_s(v, n, &f->crash_after_s);
        break;
    case F_SLOW:
        rc = parse_s(v, n, &f->slow_start_s);
        break;
    case F_PRESSURE:
        rc = parse_u64(v, n, 1u << 28, &f->pressure_blocks);
        break;
    case F_PRESSURE_AT:
    case F_PRESSURE_AT_ALIAS:
        rc = parse_s(v, n, &f->pressure_at_s);
        break;
    case F_PRESSURE_FOR:
        rc = parse_s(v, n, &f->pressure_for_s);
        break;
    case F_SLOW_STEP:
        rc = parse_u64(v, n, 10000000u, &f->slow_step_us);
        break;
    default:
        break;
    }
    return rc;
}

/* Sets one key of either kind on the copies. */
static int set_any(struct st_sim_faults *f, struct st_sim_spec *s, const char *key, size_t keylen,
                   const char *val, size_t vallen, char *err, size_t errlen)
{
    int k = find_fkey(key, keylen);
    if (k < 0) {
        return st_sim_spec_set(s, key, keylen, val, vallen, err, errlen);
    }
    if (set_fkey(f, k, val, vallen) != 0) {
        if (err && errlen) {
            snprintf(err, errlen, "bad value '%.*s' for %s: expected %s",
                     (int)(vallen > 64 ? 64 : vallen), val, fkeys[k].name, fkeys[k].expect);
        }
        return ST_EPARSE;
    }
    return 0;
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

static const char *trim(const char *p, size_t *n)
{
    while (*n && is_blank(p[0])) {
        p++;
        (*n)--;
    }
    while (*n && is_blank(p[*n - 1])) {
        (*n)--;
    }
    return p;
}

int st_sim_faults_apply(struct st_sim_faults *f, struct st_sim_spec *s, const char *text,
                        size_t len, char *err, size_t errlen)
{
    if (len > 4096) {
        if (err && errlen) {
            snprintf(err, errlen, "too long (over 4096 bytes)");
        }
        return ST_ETOOBIG;
    }
    struct st_sim_faults tf = *f;
    struct st_sim_spec ts = *s;
    size_t i = 0;
    while (i <= len) {
        size_t j = i;
        while (j < len && text[j] != ',') {
            j++;
        }
        size_t n = j - i;
        const char *item = trim(text + i, &n);
        i = j + 1;
        if (n == 0) {
            continue;
        }
        const char *eq = memchr(item, '=', n);
        if (!eq) {
            if (err && errlen) {
                snprintf(err, errlen, "expected key=value, got '%.*s'", (int)(n > 64 ? 64 : n),
                         item);
            }
            return ST_EPARSE;
        }
        size_t keylen = (size_t)(eq - item), vallen = n - keylen - 1;
        const char *key = trim(item, &keylen);
        const char *val = trim(eq + 1, &vallen);
        int rc = set_any(&tf, &ts, key, keylen, val, vallen, err, errlen);
        if (rc != 0) {
            return rc;
        }
    }
    *f = tf;
    *s = ts;
    return 0;
}

int st_sim_scenario_parse(struct st_sim_faults *f, struct st_sim_spec *s, const char *text,
                          size_t len, const char *name, char *err, size_t errlen)
{
    char msg[256];
    if (len > ST_SIM_SCENARIO_MAX_BYTES) {
        if (err && errlen) {
            snprintf(err, errlen, "%s: over %u bytes", name, ST_SIM_SCENARIO_MAX_BYTES);
        }
        return ST_ETOOBIG;
    }
    struct st_sim_faults tf = *f;
    struct st_sim_spec ts = *s;
    char seen[MAX_KEYS][40];
    uint32_t nseen = 0;
    size_t i = 0;
    uint32_t line = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && text[j] != '\n') {
            j++;
        }
        line++;
        size_t n = j - i;
        const char *p = text + i;
        i = j + 1;
        /* A comment starts at '#' at the line start or after a blank. */
        for (size_t k = 0; k < n; k++) {
            if (p[k] == '#' && (k == 0 || is_blank(p[k - 1]))) {
                n = k;
                break;
            }
        }
        int indented = n > 0 && is_blank(p[0]);
        p = trim(p, &n);
        if (n == 0 || (line == 1 && n == 3 && memcmp(p, "---", 3) == 0)) {
            continue;
        }
        const char *colon = memchr(p, ':', n);
        if (indented) {
            snprintf(msg, sizeof(msg), "indented line: nesting is not supported (a flat mapping)");
            goto bad;
        }
        if (!colon || colon == p) {
            snprintf(msg, sizeof(msg), "expected 'key: value'");
            goto bad;
        }
        size_t keylen = (size_t)(colon - p), vallen = n - keylen - 1;
        const char *key = trim(p, &keylen);
        const char *val = trim(colon + 1, &vallen);
        /* Quotes around a value are allowed, as YAML scalars. */
        if (vallen >= 2 && (val[0] == '"' || val[0] == '\'') && val[vallen - 1] == val[0]) {
            val++;
            vallen -= 2;
        }
        if (vallen == 0) {
            snprintf(msg, sizeof(msg), "%.*s: a value is needed (nesting is not supported)",
                     (int)(keylen > 40 ? 40 : keylen), key);
            goto bad;
        }
        for (uint32_t k = 0; k < nseen; k++) {
            if (strlen(seen[k]) == keylen && memcmp(seen[k], key, keylen) == 0) {
                snprintf(msg, sizeof(msg), "%.*s: given twice", (int)keylen, key);
                goto bad;
            }
        }
        if (nseen == MAX_KEYS || keylen >= sizeof(seen[0])) {
            snprintf(msg, sizeof(msg), "too many keys, or a key over 39 bytes");
            goto bad;
        }
        memcpy(seen[nseen], key, keylen);
        seen[nseen++][keylen] = '\0';
        char e2[200];
        if (set_any(&tf, &ts, key, keylen, val, vallen, e2, sizeof(e2)) != 0) {
            snprintf(msg, sizeof(msg), "%s", e2);
            goto bad;
        }
    }
    *f = tf;
    *s = ts;
    return 0;
bad:
    if (err && errlen) {
        snprintf(err, errlen, "%s:%u: %s", name, line, msg);
    }
    return ST_EPARSE;
}
