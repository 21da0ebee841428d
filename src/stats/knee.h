/*
 * The capacity probe's queueing rule (docs/cli.md, `servetune probe capacity`): whether the
 * documents of one scoring pass, sent at once, all started at once, judged against the prefill
 * the probe measured. Rule 1: a document "waited" when its first token came after another
 * document of the pass had ended although it was sent before that end (it could not start until a
 * slot or memory was freed) and its TTFT is over jump times what its uncached part costs alone:
 * ref_ttft + rate x max(0, uncached - ref_uncached). Rule 2 (no end times needed): the slowest TTFT
 * is over prefill_jump times the pass's whole prefill, ref_ttft + rate x the sum of those
 * excesses, and over prefill_jump times the pass's fastest (a pass slow all through is a stall,
 * not a queue). Rule 2 needs a wider margin: with seeded documents its bound is one document's
 * TTFT, which a busy host alone can triple. Pure; all times in one unit (ms) on one clock.
 */
#ifndef ST_STATS_KNEE_H
#define ST_STATS_KNEE_H

#include <stddef.h>

/* One document of a scoring pass; NaN where unknown. */
struct st_knee_doc {
    double sent_ms;         /* when its request went out, from any origin the pass shares */
    double first_ms;        /* its first token, same origin */
    double end_ms;          /* its last byte, same origin */
    double ttft_ms;         /* first token - intended send (the receipts' TTFT) */
    double uncached_tokens; /* prompt - cached tokens; NaN unknown: prompt_tokens counts */
    double prompt_tokens;
};

/* What the pass is judged against. */
struct st_knee_ref {
    double rate_ms_per_token;   /* prefill time per uncached token (st_knee_rate); NaN: 0 */
    double ref_ttft_ms;         /* one seeded document alone (the first pass's TTFT) */
    double ref_uncached_tokens; /* its uncached tokens; NaN: 0 */
    double jump;                /* rule 1's factor (--ttft-jump), > 1 */
    double prefill_jump;        /* rule 2's factor (--prefill-jump), > 1 */
};

struct st_knee_out {
    int queued;
    int waited;         /* documents that waited for another's end (rule 1) */
    int past_prefill;   /* the slowest TTFT is over the pass's prefill (rule 2) */
    int doc;            /* the first document that waited, else the slowest when past_prefill,
                         * else -1 */
    int after;          /* the document doc's first token came after, -1 when none */
    double alone_ms;    /* doc's prefill alone (rule 1), NaN when none */
    double prefill_ms;  /* the pass's whole prefill (rule 2's bound before jump) */
    double ttft_max_ms; /* NaN when no document had a TTFT */
    double ttft_min_ms;
};

/*
 * The prefill rate in ms per uncached token: the median over i of ttft_ms[i] / uncached[i] for
 * the entries with both known, uncached[i] >= 1 and at least half of prompt[i] (documents that
 * were mostly computed, not found in the cache); NaN when none. prompt may be NULL (no share test).
 */
double st_knee_rate(const double *ttft_ms, const double *uncached, const double *prompt, size_t n);

/* Judges docs[0..n) against ref into *out (zeroed first). n may be 0 (not queued). */
void st_knee_judge(const struct st_knee_doc *docs, size_t n, const struct st_knee_ref *ref,
                   struct st_knee_out *out);

#endif
