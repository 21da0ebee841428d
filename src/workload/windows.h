/*
 * The window plan of a workload and its window map (internal to src/workload; exported for the
 * fuzz target). A plan lists every item as a sequence of parts: corpus windows (offset, length in
 * bytes), literal text (a question, a dataset prompt), needle sentences and chat message starts,
 * plus the items' lengths and shared-prefix groups. The window map is the plan as JSON
 * (docs/workloads.md, "Window map"): reading it back gives the same parts, so every run and arm
 * that uses the map sends byte-identical prompts whatever its seed. Dataset prompts are not
 * copied into the map; items name their conversation by index instead. Pure.
 */
#ifndef ST_WORKLOAD_WINDOWS_H
#define ST_WORKLOAD_WINDOWS_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/status.h"
#include "workload/workload.h"

#define ST_WPLAN_NONE UINT32_MAX
/* Bounds on a map (and on any plan): items, parts in all, bytes of literal text. */
#define ST_WPLAN_MAX_ITEMS (1u << 24)
#define ST_WPLAN_MAX_PARTS (1u << 28)

enum st_part_type {
    ST_PART_WIN = 1,   /* corpus bytes [off, off + len) */
    ST_PART_TEXT,      /* pool bytes [off, off + len): literal text */
    ST_PART_NEEDLE,    /* pool bytes [off, off + len): a needle sentence; aux: needle index */
    ST_PART_USER,      /* a user message starts (off, len unused) */
    ST_PART_ASSISTANT, /* an assistant message starts */
};

struct st_part {
    uint64_t off;
    uint64_t len;
    uint32_t type; /* enum st_part_type */
    uint32_t aux;
};

struct st_needle {
    uint64_t word_off; /* the code word, in the pool */
    uint64_t word_len;
    double depth; /* requested depth, a fraction of the prompt */
};

struct st_wplan_item {
    enum st_wl_kind kind;
    uint32_t group;   /* shared prefix group, or ST_WPLAN_NONE */
    uint32_t session; /* multi-turn: session and turn (1-based); else 0 */
    uint32_t turn;
    uint64_t part0; /* parts [part0, part0 + nparts) */
    uint32_t nparts;
    uint64_t requested;   /* prompt tokens asked for */
    uint64_t counted;     /* prompt tokens the counter gave (not in the map) */
    int64_t max_tokens;   /* trace / dataset: from the file; else -1 (set from the parameters) */
    uint64_t t_offset_ns; /* trace: send offset; else UINT64_MAX */
    int64_t source;       /* trace: line number; dataset: conversation index; else -1 */
};

struct st_wplan_group {
    uint64_t part0;
    uint32_t nparts;
    uint64_t counted; /* tokens of the prefix alone (not in the map) */
};

struct st_wplan {
    enum st_wl_kind kind;
    int chat;
    char corpus_id[256];
    uint64_t corpus_hash;
    uint64_t corpus_len;
    int has_data; /* dataset / trace: data_hash is the FNV-1a of the file's bytes */
    uint64_t data_hash;
    struct st_buf pool; /* literal text, needle sentences and code words */
    struct st_part *parts;
    uint64_t nparts, cap_parts;
    struct st_needle *needles;
    uint64_t nneedles, cap_needles;
    struct st_wplan_item *items;
    uint64_t nitems, cap_items;
    struct st_wplan_group *groups;
    uint32_t ngroups, cap_groups;
};

void st_wplan_init(struct st_wplan *pl);
void st_wplan_release(struct st_wplan *pl);
/* Appends to the pool; returns the offset. */
uint64_t st_wplan_pool_add(struct st_wplan *pl, const char *s, size_t n);
/* Appends a part; returns its index. */
uint64_t st_wplan_add_part(struct st_wplan *pl, uint32_t type, uint64_t off, uint64_t len,
                           uint32_t aux);
uint32_t st_wplan_add_needle(struct st_wplan *pl, const char *word, size_t n, double depth);
/* Appends a zeroed item (group none, times none, source -1, max_tokens -1) and returns it;
 * the pointer is valid until the next add. */
struct st_wplan_item *st_wplan_add_item(struct st_wplan *pl, enum st_wl_kind kind);
uint32_t st_wplan_add_group(struct st_wplan *pl, uint64_t part0, uint32_t nparts);

/* Appends the text of parts [part0, part0 + n) to out: corpus windows from corpus (bytes
 * [base, ...) of the corpus the plan was made for: window off is at corpus + off - base), literal
 * text and needles from the pool; message starts add nothing. */
void st_wplan_put_text(const struct st_wplan *pl, const char *corpus, uint64_t base, uint64_t part0,
                       uint64_t n, struct st_buf *out);

/* Writes the map: one JSON object, one line per item and group (docs/workloads.md). */
void st_wplan_windows_json(const struct st_wplan *pl, struct st_buf *out);

/*
 * Reads a map into pl (which must be freshly initialised). name prefixes messages
 * ("NAME:LINE: what was expected"). Checks the grammar and the bounds above, not the corpus
 * (the build checks windows against it). Returns 0, ST_EPARSE or ST_ETOOBIG, message in err.
 */
int st_wplan_windows_parse(struct st_wplan *pl, const char *json, size_t len, const char *name,
                           char *err, size_t errlen) ST_WUR;

#endif
