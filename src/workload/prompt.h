/*
 * Token fitting (internal to src/workload): makes a prompt count exactly N tokens by the target's
 * counter, by choosing how many code points of a corpus window it takes. The counter may be an
 * HTTP round trip, so the fitter counts as seldom as it can: a calibration of two calls gives the
 * template overhead and the code points a token, then each fit starts from the estimate and
 * corrects with secant steps inside a shrinking bracket (bisection when a step would leave it).
 * With the simulator's rule (4 code points a token) the first estimate is exact, so a fit costs
 * one call. Pure apart from the counter callback.
 */
#ifndef ST_WORKLOAD_PROMPT_H
#define ST_WORKLOAD_PROMPT_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/status.h"
#include "workload/workload.h"

struct st_fitter {
    st_tok_counter_fn count; /* borrowed */
    void *ctx;
    const char *text; /* borrowed corpus bytes (valid UTF-8) */
    uint64_t len;
    int ascii;              /* the corpus is ASCII: code points are bytes */
    uint64_t overhead;      /* count(""): the chat template (or BOS) */
    double cp_per_token;    /* code points of corpus text a token */
    double bytes_per_token; /* bytes of corpus text a token */
    uint64_t calls;         /* counter calls so far */
    struct st_buf tmp;      /* the text being counted */
    char *err;              /* borrowed caller buffer */
    size_t errlen;
};

void st_fitter_init(struct st_fitter *f, st_tok_counter_fn count, void *ctx, const char *text,
                    uint64_t len, char *err, size_t errlen);
void st_fitter_release(struct st_fitter *f);

/* Counts s[0..n) with the counter (one call). Returns 0 or the counter's error (message in err,
 * prefixed with "token counter: "). */
int st_fitter_count(struct st_fitter *f, const char *s, size_t n, uint64_t *tokens) ST_WUR;

/*
 * Measures the overhead (count of "") and the code points a token on a sample of up to 16,384
 * code points at off (a corpus offset on a code point boundary). If the counter refuses "", the
 * overhead comes from a second sample of twice the length. Returns 0, ST_EUSAGE when the corpus
 * is empty or the counter's answers make no sense, or the counter's error.
 */
int st_fitter_calibrate(struct st_fitter *f, uint64_t off) ST_WUR;

/*
 * Assembles the full text that is counted for a window of win_bytes bytes at the fit's offset
 * (the head before it, needles inside, a tail after). Appends to out.
 */
typedef void (*st_fit_assemble_fn)(void *ctx, uint64_t win_bytes, struct st_buf *out);

struct st_fit {
    /* In. */
    uint64_t off;          /* window start in the corpus (a code point boundary) */
    uint64_t limit;        /* the window may not pass this corpus offset */
    uint64_t target;       /* tokens the assembled text must count */
    uint64_t fixed_tokens; /* estimate of the tokens of everything but the window */
    uint64_t min_cp;       /* the window has at least this many code points (>= 1) */
    st_fit_assemble_fn assemble;
    void *actx;
    /* Out. */
    uint64_t win_bytes; /* the chosen window length */
    uint64_t counted;   /* its count (the closest to target found; ties go to the shorter) */
};

/*
 * Chooses the window length. Returns 0 (counted may still differ from target where the
 * tokenizer cannot hit it, or when even min_cp code points count more), ST_ETOOBIG when the
 * window up to limit still counts fewer than target tokens, or the counter's error.
 */
int st_fit_window(struct st_fitter *f, struct st_fit *q) ST_WUR;

/* Byte length of the first cps code points of text[off..limit) (fewer when limit comes first:
 * *got says how many). */
uint64_t st_fit_advance(const struct st_fitter *f, uint64_t off, uint64_t limit, uint64_t cps,
                        uint64_t *got);

#endif
