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

/* A built workload (workload.c builds it, serve.c serves it). */
struct st_workload {
    struct st_wplan plan;
    char *text;         /* owned copy of corpus bytes [text_base, text_base + text_len) */
    uint64_t text_base; /* the first corpus byte any window uses */
    uint64_t text_len;
    char corpus_hex[17];
    int ignore_eos;
    uint64_t calls;
    double max_err;
    uint64_t trace_period_ns; /* trace: one pass over the items, for repeats past the end */
};

/* What the seed decides for one item, before any window is chosen. */
struct st_wl_spec {
    enum st_wl_kind kind;
    uint64_t in;      /* prompt tokens (multi-turn: this turn's user message) */
    int64_t out;      /* output tokens; -1: the run's */
    uint32_t group;   /* shared-prefix: the group drawn; else ST_WPLAN_NONE */
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
    struct st_wplan *pl; /* borrowed: filled */
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

/* Stream keys: each quantity its own generator, so adding one draw never shifts another. */
#define ST_WL_KEY_KIND 0x6b696e64ull
#define ST_WL_KEY_IN 0x696e707574ull
#define ST_WL_KEY_OUT 0x6f7574707574ull
#define ST_WL_KEY_GROUP 0x67726f7570ull
#define ST_WL_KEY_WINDOWS 0x77696e646f77ull
#define ST_WL_KEY_NEEDLES 0x6e6565646c65ull
#define ST_WL_KEY_DATASET 0x64617461ull

/* The generator of one quantity of a seed (see the keys above). */
struct st_rng st_wl_stream(uint64_t seed, uint64_t key);

struct st_wl_needle_txt {
    const char *text; /* the sentence, in the builder's own storage */
    size_t len;
    const char *word; /* the code word, inside text */
    size_t word_len;
    double depth;
};

/* What is counted for a window: head, the window with needles at their depths, tail. */
struct st_wl_asm {
    const struct st_builder *b;
    const char *head;
    size_t head_len;
    uint64_t off;
    uint32_t nneedles;
    const struct st_wl_needle_txt *needles;
    const char *tail;
    size_t tail_len;
    uint64_t splits[ST_WL_MAX_NEEDLES]; /* absolute corpus offsets, after st_wl_compute_splits */
};

/* ---- the layout (layout.c) ---- */

/* An assembly of nothing around the window (no head, needles or tail). */
void st_wl_asm_init(struct st_wl_asm *a, const struct st_builder *b);
/* A fit of the window of a to target tokens, fixed of them outside the window. */
void st_wl_fit_init(struct st_fit *q, struct st_wl_asm *a, uint64_t target, uint64_t fixed);
/* Sets a->splits: each needle after the sentence end at or after its depth of the window. */
void st_wl_compute_splits(struct st_wl_asm *a, uint64_t win_bytes);
/*
 * Fits the next window of the layout (a->off and q->off/limit are set here), wrapping once.
 * Returns 0, ST_EUSAGE when the corpus is too small (message in b->err), or the counter's error.
 */
int st_wl_lay_window(struct st_builder *b, struct st_fit *q, struct st_wl_asm *a) ST_WUR;
/* Adds the parts of a fitted window to the plan: pieces of the window, needles, tail. */
void st_wl_add_window_parts(struct st_builder *b, const struct st_wl_asm *a, uint64_t win_bytes);
/* Closes plan item idx: its parts are those added since it was created. */
void st_wl_close_item(struct st_builder *b, uint64_t idx, uint64_t requested, uint64_t counted);
/* Appends the text of plan parts [part0, part0 + n). */
void st_wl_put_parts(const struct st_builder *b, uint64_t part0, uint64_t n, struct st_buf *out);
/* Calibrates the counter on a sample at a seeded offset. */
int st_wl_calibrate(struct st_builder *b, struct st_rng *rw) ST_WUR;
/* Places the layout's base so that the windows fit before the corpus end when they can. */
void st_wl_place_base(struct st_builder *b, struct st_rng *rw);
/* Sets b->est_bytes for tokens of text; ST_EUSAGE (message in b->err) when over the corpus. */
int st_wl_check_size(struct st_builder *b, uint64_t tokens, uint64_t n) ST_WUR;

/* ---- the kinds (kinds.c, replay.c) ---- */

/* Calibrates, checks the corpus size and fits the synthetic kinds (fixed, shared-prefix,
 * distinct, long, multi-turn, mixed) for specs s[0..n). */
int st_wl_fit_synthetic(struct st_builder *b, const struct st_wl_spec *s, uint64_t n) ST_WUR;
/* Trace requests [0, n): blocks for the hash ids, prompts, groups of shared leading blocks. */
int st_wl_fit_trace(struct st_builder *b, const struct st_trace *t, uint64_t n) ST_WUR;
/* Dataset: n conversations sampled by the seed; prompt and answer counted. */
int st_wl_fit_dataset(struct st_builder *b, const struct st_dataset *ds, uint64_t n) ST_WUR;

#endif
