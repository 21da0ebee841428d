/*
 * The workload builder (internal to src/workload): draws every item's lengths, kind and group
 * from the seed, lays out corpus windows without overlap and fits each prompt to its tokens
 * (kinds.c), filling a window plan (windows.h). workload.c drives it and serves the result.
 */
#ifndef ST_WORKLOAD_BUILD_H
#define ST_WORKLOAD_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/rng.h"
#include "base/status.h"
#include "workload/dataset.h"
#include "workload/prompt.h"
#include "workload/trace.h"
#include "workload/windows.h"
#include "workload/workload.h"

#define ST_WL_MAX_NEEDLES 64

/* What the seed decides for one item, before any window is chosen. */
struct st_wl_spec {
    enum st_wl_kind kind;
    uint64_t in;      /* prompt tokens (multi-turn: this turn's user message) */
    int64_t out;      /* output tokens; -1: the run's */
    uint32_t group;   /* shared-prefix: the group drawn; else ST_PLAN_NONE */
    uint32_t session; /* multi-turn */
    uint32_t turn;    /* multi-turn, 1-based; else 0 */
};

/*
 * Draws n specs for p (n is p->requests for the synthetic kinds). Every quantity comes from its
 * own stream of the seed (kinds, input lengths, output lengths, groups), so output lengths do not
 * depend on anything but the seed and the output parameters. Returns an owned array.
 */
struct st_wl_spec *st_wl_draw(const struct st_wl_params *p, uint64_t n);

/* Prefix tokens of a shared-prefix group: round(prefix_frac * input_len). */
uint64_t st_wl_prefix_tokens(const struct st_wl_params *p);

/* Tokens of corpus text the synthetic items need (template overhead not included). */
uint64_t st_wl_estimate_tokens(const struct st_wl_params *p, const struct st_wl_spec *s, uint64_t n,
                               uint64_t overhead);

struct st_builder {
    const struct st_wl_params *p; /* borrowed */
    const char *text;             /* borrowed corpus */
    uint64_t len;
    const char *corpus_id;
    struct st_plan *pl; /* borrowed: filled */
    struct st_fitter f;
    uint64_t base; /* layout: windows start at base and run on, then wrap to 0 */
    uint64_t next;
    int wrapped;
    uint64_t windows;   /* laid out so far */
    uint64_t est_bytes; /* what the estimate said the windows need */
    struct st_buf head; /* scratch: fixed text before a window */
    char *err;          /* borrowed */
    size_t errlen;
};

/* Calibrates, checks the corpus size and fits the synthetic kinds (fixed, shared-prefix,
 * distinct, long, multi-turn, mixed) for specs s[0..n). */
int st_wl_fit_synthetic(struct st_builder *b, const struct st_wl_spec *s, uint64_t n) ST_WUR;
/* Trace requests [0, n): blocks for the hash ids, prompts, groups of shared leading blocks. */
int st_wl_fit_trace(struct st_builder *b, const struct st_trace *t, uint64_t n) ST_WUR;
/* Dataset: n conversations sampled by the seed; prompt and answer counted. */
int st_wl_fit_dataset(struct st_builder *b, const struct st_dataset *ds, uint64_t n) ST_WUR;

#endif
