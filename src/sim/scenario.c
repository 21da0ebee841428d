/*
 * Fault keys and scenario files (see scenario.h). The scenario reader is a line reader for a flat
 * "key: value" mapping, not a YAML parser: nesting, lists and multi-line values are refused with
 * the line number, so a file never means something other than what it says. Pure.
 */
#include "sim/scenario.h"

#include <stdio.h>
#include <string.h>

#include "sim/keys.h"

/* Most keys in one scenario file. */
#define MAX_KEYS 64u

void st_sim_faults_init(struct st_sim_faults *f)
{
    memset(f, 0, sizeof(*f));
}

int st_sim_faults_any(const struct st_sim_faults *f)
{
    return f->startup_oom || f->crash_after_requests || f->crash_after_s > 0 ||
           f->slow_start_s > 0 || f->pressure_blocks > 0 || f->slow_step_us > 0 ||
           f->metrics_busy_delay_s > 0;
}

#define FKEY(name, kind, m, hi, expect)                                                            \
    ST_SIM_KEY(struct st_sim_faults, name, kind, m, 0, hi, NULL, expect)
#define SECONDS(name, m, expect) FKEY(name, ST_SIM_KEY_DEC, m, ST_SIM_FAULT_MAX_S, expect)

static const struct st_sim_key fkeys[] = {
    FKEY("startup_oom", ST_SIM_KEY_INT, startup_oom, 1, "1 or 0"),
    FKEY("crash_after_requests", ST_SIM_KEY_INT, crash_after_requests, 1000000000,
         "a request count in [1, 1000000000], or 0 for off"),
    SECONDS("crash_after_s", crash_after_s,
            "virtual seconds, a decimal number in [0, 10000000] (0 = off)"),
    SECONDS("slow_start_s", slow_start_s, "virtual seconds, a decimal number in [0, 10000000]"),
    FKEY("memory_pressure_blocks", ST_SIM_KEY_INT, pressure_blocks, 1u << 28,
         "a block count in [0, 268435456]"),
    SECONDS("memory_pressure_at_s", pressure_at_s,
            "virtual seconds, a decimal number in [0, 10000000]"),
    SECONDS("at_s", pressure_at_s, "virtual seconds, a decimal number in [0, 10000000]"),
    SECONDS("memory_pressure_for_s", pressure_for_s,
            "virtual seconds, a decimal number in [0, 10000000] (0 = forever)"),
    FKEY("slow_step_us", ST_SIM_KEY_INT, slow_step_us, 10000000,
         "real microseconds, an integer in [0, 10000000]"),
    SECONDS("metrics_busy_delay_s", metrics_busy_delay_s,
            "virtual seconds, a decimal number in [0, 10000000] (0 = off)"),
};

#define NFKEYS ((int)(sizeof(fkeys) / sizeof(fkeys[0])))

/* The copies a key list or scenario file is applied to. */
struct both {
    struct st_sim_faults f;
    struct st_sim_spec s;
};

/* Sets one key of either kind on the copies. */
static int set_any(void *ctx, const char *key, size_t keylen, const char *val, size_t vallen,
                   char *err, size_t errlen)
{
    struct both *t = ctx;
    int k = st_sim_key_find(fkeys, NFKEYS, key, keylen);
    if (k < 0) {
        return st_sim_spec_set(&t->s, key, keylen, val, vallen, err, errlen);
    }
    if (st_sim_key_set(&fkeys[k], &t->f, val, vallen) != 0) {
        return st_sim_key_bad(&fkeys[k], val, vallen, err, errlen);
    }
    return 0;
}

/* Blanks of a fault list and a scenario line (a file may have CRLF lines). */
#define BLANKS " \t\r"

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

int st_sim_faults_apply(struct st_sim_faults *f, struct st_sim_spec *s, const char *text,
                        size_t len, char *err, size_t errlen)
{
    struct both t = {*f, *s};
    int rc = st_sim_key_list(text, len, BLANKS, set_any, &t, err, errlen);
    if (rc == 0) {
        *f = t.f;
        *s = t.s;
    }
    return rc;
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
    struct both t = {*f, *s};
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
        p = st_sim_key_trim(p, &n, BLANKS);
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
        const char *key = st_sim_key_trim(p, &keylen, BLANKS);
        const char *val = st_sim_key_trim(colon + 1, &vallen, BLANKS);
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
        if (set_any(&t, key, keylen, val, vallen, e2, sizeof(e2)) != 0) {
            snprintf(msg, sizeof(msg), "%s", e2);
            goto bad;
        }
    }
    *f = t.f;
    *s = t.s;
    return 0;
bad:
    if (err && errlen) {
        snprintf(err, errlen, "%s:%u: %s", name, line, msg);
    }
    return ST_EPARSE;
}
