/*
 * Key tables, the key=value list walker and strict decimals for the simulator. See keys.h.
 */
#include "sim/keys.h"

#include <string.h>

#include "base/clock.h"
#include "base/num.h"

int st_sim_key_find(const struct st_sim_key *keys, int n, const char *key, size_t keylen)
{
    for (int i = 0; i < n; i++) {
        if (strlen(keys[i].name) == keylen && memcmp(keys[i].name, key, keylen) == 0) {
            return i;
        }
    }
    return -1;
}

int st_sim_key_bad(const struct st_sim_key *k, const char *val, size_t vallen, char *err,
                   size_t errlen)
{
    st_errf(err, errlen, "bad value '%.*s' for %s: expected %s", (int)(vallen > 64 ? 64 : vallen),
            val, k->name, k->expect);
    return ST_EPARSE;
}

static int word_value(const struct st_sim_word *w, const char *v, size_t n, int64_t *out)
{
    for (; w && w->word; w++) {
        if (strlen(w->word) == n && memcmp(w->word, v, n) == 0) {
            *out = w->value;
            return 0;
        }
    }
    return ST_EPARSE;
}

int st_sim_key_set(const struct st_sim_key *k, void *obj, const char *v, size_t n)
{
    char *at = (char *)obj + k->offset;
    int64_t i = 0;
    double x = 0;
    switch (k->kind) {
    case ST_SIM_KEY_WORD:
    case ST_SIM_KEY_INT:
        if (word_value(k->words, v, n, &i) != 0) {
            uint64_t u;
            if (k->kind != ST_SIM_KEY_INT || n > 18 || st_num_u64(v, n, (uint64_t)k->hi, &u) != 0 ||
                u < (uint64_t)k->lo) {
                return ST_EPARSE;
            }
            i = (int64_t)u;
        }
        if (k->size == sizeof(int32_t)) {
            int32_t i32 = (int32_t)i;
            memcpy(at, &i32, sizeof(i32));
        } else {
            memcpy(at, &i, sizeof(i));
        }
        return 0;
    case ST_SIM_KEY_MS:
        if (st_sim_key_decimal(v, n, k->hi, &x) != 0) {
            return ST_EPARSE;
        }
        uint64_t ns = (uint64_t)(x * (double)ST_NS_PER_MS + 0.5);
        if (ns != 0 && (double)ns < k->lo) {
            return ST_EPARSE;
        }
        memcpy(at, &ns, sizeof(ns));
        return 0;
    case ST_SIM_KEY_DEC:
        if (st_sim_key_decimal(v, n, k->hi, &x) != 0) {
            return ST_EPARSE;
        }
        memcpy(at, &x, sizeof(x));
        return 0;
    default:
        return ST_EPARSE;
    }
}

static int is_blank(char c, const char *blanks)
{
    return c != '\0' && strchr(blanks, c) != NULL;
}

const char *st_sim_key_trim(const char *p, size_t *n, const char *blanks)
{
    while (*n && is_blank(p[0], blanks)) {
        p++;
        (*n)--;
    }
    while (*n && is_blank(p[*n - 1], blanks)) {
        (*n)--;
    }
    return p;
}

int st_sim_key_list(const char *text, size_t len, const char *blanks, st_sim_key_set_fn set,
                    void *ctx, char *err, size_t errlen)
{
    if (len > ST_SIM_KEYS_MAX_TEXT) {
        st_errf(err, errlen, "too long (over %u bytes)", ST_SIM_KEYS_MAX_TEXT);
        return ST_ETOOBIG;
    }
    size_t i = 0;
    while (i <= len) {
        size_t j = i;
        while (j < len && text[j] != ',') {
            j++;
        }
        size_t n = j - i;
        const char *item = st_sim_key_trim(text + i, &n, blanks);
        i = j + 1;
        if (n == 0) {
            continue;
        }
        const char *eq = memchr(item, '=', n);
        if (!eq) {
            st_errf(err, errlen, "expected key=value, got '%.*s'", (int)(n > 64 ? 64 : n), item);
            return ST_EPARSE;
        }
        size_t keylen = (size_t)(eq - item), vallen = n - keylen - 1;
        const char *key = st_sim_key_trim(item, &keylen, blanks);
        const char *val = st_sim_key_trim(eq + 1, &vallen, blanks);
        int rc = set(ctx, key, keylen, val, vallen, err, errlen);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

int st_sim_key_decimal(const char *v, size_t n, double max, double *out)
{
    if (n == 0 || n > ST_SIM_KEYS_MAX_VALUE) {
        return ST_EPARSE;
    }
    size_t dots = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] == '.' && i > 0 && i + 1 < n && dots == 0) {
            dots++;
        } else if (v[i] < '0' || v[i] > '9') {
            return ST_EPARSE;
        }
    }
    /* What is left is base/num.h's grammar without sign or exponent. */
    return st_num_f64(v, n, 0.0, max, out) == 0 ? 0 : ST_EPARSE;
}
