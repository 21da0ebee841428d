/*
 * Prometheus text exposition format (version 0.0.4) parser: the /metrics answers of vLLM, SGLang,
 * llama.cpp and TGI. Parses a whole scrape into samples (name, labels, value) kept in one arena;
 * lookups by exact name and optional label equality. Comments (# HELP / # TYPE) are read for the
 * type. Pure; bounded: a scrape over ST_PROM_MAX_BYTES or with more than ST_PROM_MAX_SAMPLES
 * samples gives ST_ETOOBIG; a malformed line gives ST_EPARSE with its line number.
 */
#ifndef ST_PROTO_PROM_H
#define ST_PROTO_PROM_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define ST_PROM_MAX_BYTES (16u << 20)
#define ST_PROM_MAX_SAMPLES 200000u

struct st_prom_label {
    const char *name; /* NUL-terminated, in the scrape's arena */
    const char *value;
};

struct st_prom_sample {
    const char *name;
    const struct st_prom_label *labels;
    uint32_t n_labels;
    double value; /* NaN, +Inf and -Inf allowed */
    char type;    /* from # TYPE of its family: 'c' counter, 'g' gauge, 'h' histogram, 's' summary,
                   * 'u' untyped or unknown */
};

struct st_prom {
    struct st_prom_sample *samples; /* owned */
    uint32_t n;
    char *arena; /* owned: names, label names and values */
    size_t arena_len;
    struct st_prom_label *labels; /* owned */
    uint32_t n_labels_total;
};

void st_prom_init(struct st_prom *p);
void st_prom_release(struct st_prom *p);
/*
 * Parses text[0..len) (replacing what p held). Returns 0; ST_EPARSE (line number in *bad_line when
 * non-NULL); ST_ETOOBIG.
 */
int st_prom_parse(struct st_prom *p, const char *text, size_t len, uint32_t *bad_line) ST_WUR;
/*
 * Sum of the values of all samples named name whose labels include every (label, value) pair of
 * the NULL-terminated list want (NULL: all samples of that name). Returns 0 with *out set, or
 * ST_ENOTFOUND when no sample matches.
 */
int st_prom_sum(const struct st_prom *p, const char *name, const char *const *want,
                double *out) ST_WUR;
/* First sample named name (any labels), or NULL. */
const struct st_prom_sample *st_prom_find(const struct st_prom *p, const char *name);
/* Value of label on sample s, or NULL. */
const char *st_prom_label(const struct st_prom_sample *s, const char *label);

#endif
