/*
 * Arithmetic problems for the qualification `arith` check: seeded multi-step word problems with
 * one exact integer answer, and a verifier that reads the final integer out of a model's free
 * text. Pure: a function of (seed) and (text). Not a parser of general math: the verifier knows
 * integers with thousands separators, an "Answer:" line, \boxed{N} and bold **N**, nothing more.
 *
 * Every template takes 3 to 5 operations on numbers below 10,000 and gives an answer between 1
 * and 10^10, so every intermediate value fits an int64 with room to spare. The same seed gives
 * the same text and answer on every machine (st_rng is platform-independent).
 */
#ifndef ST_QUAL_ARITH_H
#define ST_QUAL_ARITH_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define ST_ARITH_TEXT_MAX 768
/* Operands a template may hold; the test recomputes the answer from them. */
#define ST_ARITH_MAX_OPS 8

enum st_arith_template {
    ST_ARITH_WAREHOUSE = 0, /* boxes in, boxes out, damaged items removed */
    ST_ARITH_FACTORY,       /* rate x hours x days, rejects, packed into crates */
    ST_ARITH_SHOP,          /* money less purchases plus earnings */
    ST_ARITH_TRAIN,         /* seats less passengers after boarding and leaving */
    ST_ARITH_ORCHARD,       /* rows x trees x fruit, bags, price */
    ST_ARITH_TEMPLATES,     /* count, not a template */
};

struct st_arith {
    uint64_t seed;
    enum st_arith_template tmpl;
    int steps;                     /* arithmetic operations needed, 3..5 */
    int64_t ops[ST_ARITH_MAX_OPS]; /* the numbers in the text, in template order */
    int nops;
    int64_t answer;               /* the one exact answer, > 0 */
    char text[ST_ARITH_TEXT_MAX]; /* the question, ending with the answer-format instruction */
};

/* Fills p with the problem for seed. The template is seed-chosen (seed mod template count). */
void st_arith_make(uint64_t seed, struct st_arith *p);

/* Same as st_arith_make with a given template (a value past the last wraps modulo the count). */
void st_arith_make_tmpl(uint64_t seed, enum st_arith_template tmpl, struct st_arith *p);

/* Template name ("warehouse", ...), static; "?" when out of range. */
const char *st_arith_tmpl_name(enum st_arith_template tmpl);

/*
 * Extracts the final integer a reply states from text[0..len) (any bytes; NULs are ordinary).
 * Only the text after the last "</think>" counts. In order of preference: the first number after
 * the last "answer" (any case) followed within a few characters by ':' or "is" or '='; else the
 * last \boxed{...} holding a number; else the last bold **...** holding a number; else the last
 * number in the text. A number is optional '-' (after a space, start or punctuation), digits with
 * optional ',' thousands groups of exactly 3, and an optional fraction; "1,234." is 1234 with a
 * trailing period, "1,234.00" is 1234.
 * Returns 0 with *out set; ST_ENOTFOUND when no number is there; ST_EPARSE when the chosen number
 * has a non-zero fraction; -ERANGE when it does not fit 18 digits.
 */
int st_arith_extract(const char *text, size_t len, int64_t *out) ST_WUR;

/*
 * 1 when the final integer of text (st_arith_extract) equals p->answer, 0 otherwise (including
 * no number, a fraction or a different number). got, when not NULL, receives the extracted value
 * (0 when none).
 */
int st_arith_check(const struct st_arith *p, const char *text, size_t len, int64_t *got);

#endif
