/*
 * The text of a model-mode reply: an optional expected answer (from the X-Servetune-Expect
 * header), right or deliberately wrong, followed by deterministic filler tokens. Pure: the same
 * answer, seed and request key give the same text and the same right/wrong decision on every run.
 *
 * Tokens follow the simulator's tokenizer rule (sim/model/tok.h): 4 code points a token. The
 * answer is padded with spaces to a whole number of tokens, so token i < answer tokens is the
 * i-th group of 4 code points of the padded answer; token i at or past it is the filler text of
 * fixed mode, st_sim_token_text(i) (" aaa", " aab", ...). A reply shorter than the answer carries
 * the answer's first tokens only, as a real model cut by max_tokens would.
 */
#ifndef ST_SIM_ANSWER_H
#define ST_SIM_ANSWER_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/status.h"

/* Longest X-Servetune-Expect value accepted, in bytes. */
#define ST_SIM_ANSWER_MAX_BYTES 4096u

struct st_sim_answer {
    struct st_buf text; /* owned: the answer as sent, padded with spaces to 4k code points */
    uint64_t tokens;    /* its tokens: code points / 4 */
    size_t *starts;     /* owned: byte offset of each token, tokens + 1 entries */
};

void st_sim_answer_init(struct st_sim_answer *a);
void st_sim_answer_release(struct st_sim_answer *a);

/*
 * Sets the answer to s[0..n) (borrowed for the call), replacing any earlier one; n == 0 leaves no
 * answer (only filler). Invalid UTF-8 bytes count as one code point each, as in the tokenizer, and
 * are rendered as U+FFFD. Returns 0, or ST_ETOOBIG when n is over ST_SIM_ANSWER_MAX_BYTES (a is
 * then unchanged).
 */
int st_sim_answer_set(struct st_sim_answer *a, const char *s, size_t n) ST_WUR;

/*
 * Appends the text of tokens [t0, t0 + k) to out, escaped for the inside of a JSON string (no
 * quotes). Filler tokens are 4 bytes each.
 */
void st_sim_answer_render(const struct st_sim_answer *a, uint64_t t0, uint64_t k,
                          struct st_buf *out);

/*
 * Whether this request's answer is wrong: a draw from an RNG seeded by seed and key_hash (a hash of
 * the request's X-Request-Id, or of its body when it has none) against error_rate. error_rate <= 0
 * is never wrong, >= 1 always.
 */
int st_sim_answer_wrong(double error_rate, uint64_t seed, uint64_t key_hash);

/*
 * Appends a wrong version of s[0..n) to out: every ASCII digit d becomes (d + 1) mod 10 and every
 * ASCII letter the next one in its case (z -> a); other bytes stay. Text with no digit or letter
 * gets "not " in front. The result always differs from s.
 */
void st_sim_answer_perturb(const char *s, size_t n, struct st_buf *out);

#endif
