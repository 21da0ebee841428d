/*
 * The simulator's key=value configuration, the part every key family shares: a key table (name
 * and what its value must be), the "k=v,k=v" list walker with its limits and messages, and the
 * strict values the keys take. spec.c (per-request keys) and scenario.c (process-level fault keys
 * and scenario files) both read through these, so the two accept the same syntax and word the
 * same errors. Pure: no allocation, no I/O.
 */
#ifndef ST_SIM_KEYS_H
#define ST_SIM_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* Longest "k=v,..." text accepted (X-Sim header, --fault). */
#define ST_SIM_KEYS_MAX_TEXT 4096u
/* Longest decimal value. */
#define ST_SIM_KEYS_MAX_VALUE 64u

/* How a key's value is read and stored. */
enum st_sim_key_kind {
    ST_SIM_KEY_WORD = 1, /* one of words, into an int-sized member */
    ST_SIM_KEY_INT,      /* one of words, else an unsigned integer of at most 18 digits in
                          * [lo, hi], into an int, uint32_t, int64_t or uint64_t member */
    ST_SIM_KEY_MS,       /* st_sim_key_decimal milliseconds in [0, hi], into a uint64_t member in
                          * whole nanoseconds (rounded to nearest); a nonzero value is >= lo ns */
    ST_SIM_KEY_DEC,      /* st_sim_key_decimal in [0, hi], into a double member */
};

/* A word a key accepts and the value it stands for; lists end with a NULL word. */
struct st_sim_word {
    const char *word;
    int64_t value;
};

/* One key: its name, what its value must be (as error messages and docs/sim.md say it), and
 * where and how its value goes in the caller's struct. */
struct st_sim_key {
    const char *name;
    const char *expect;
    enum st_sim_key_kind kind;
    size_t offset, size;             /* the member's place in the struct */
    double lo, hi;                   /* the range (see the kinds) */
    const struct st_sim_word *words; /* borrowed, static; NULL: none */
};

/* A row of a key table for member m of struct T. */
#define ST_SIM_KEY(T, name, kind, m, lo, hi, words, expect)                                        \
    {                                                                                              \
        name, expect, kind, offsetof(T, m), sizeof(((T *)0)->m), lo, hi, words                     \
    }

/* Index of key[0..keylen) in keys[0..n), or -1. */
int st_sim_key_find(const struct st_sim_key *keys, int n, const char *key, size_t keylen);

/* Writes "bad value '<val>' for <name>: expected <expect>" (the value cut at 64 bytes) into err
 * when err is not NULL; returns ST_EPARSE. */
int st_sim_key_bad(const struct st_sim_key *k, const char *val, size_t vallen, char *err,
                   size_t errlen);

/* Parses v[0..n) as k says and stores it into obj (the struct k describes); obj changes only on
 * success. Returns 0 or ST_EPARSE. */
int st_sim_key_set(const struct st_sim_key *k, void *obj, const char *v, size_t n) ST_WUR;

/* Trims the bytes of blanks (a NUL-terminated set) from both ends of p[0..*n). */
const char *st_sim_key_trim(const char *p, size_t *n, const char *blanks);

/* Sets one key; returns 0 or a negative code with text in err. */
typedef int (*st_sim_key_set_fn)(void *ctx, const char *key, size_t keylen, const char *val,
                                 size_t vallen, char *err, size_t errlen);

/*
 * Walks "key=value,..." left to right (items and both sides trimmed of blanks, empty items
 * skipped) and calls set for each. Returns 0; ST_ETOOBIG over ST_SIM_KEYS_MAX_TEXT bytes;
 * ST_EPARSE for an item without '='; or the first code set returns. Not all or nothing by itself:
 * callers set on copies.
 */
int st_sim_key_list(const char *text, size_t len, const char *blanks, st_sim_key_set_fn set,
                    void *ctx, char *err, size_t errlen) ST_WUR;

/*
 * Strict plain decimal v[0..n): digits with at most one inner dot ("12", "12.5"; no sign,
 * exponent, leading or trailing dot, hex, inf or nan), at most ST_SIM_KEYS_MAX_VALUE bytes, in
 * [0, max]. Returns 0 with *out, or ST_EPARSE.
 */
int st_sim_key_decimal(const char *v, size_t n, double max, double *out) ST_WUR;

#endif
