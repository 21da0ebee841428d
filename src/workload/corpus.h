/*
 * Text corpora for prompts. A corpus is one immutable byte string (UTF-8 text) with an identity:
 * its id ("builtin:<seed>" or the user's path) and the FNV-1a hash of its bytes. Prompts are cut as
 * windows (offset, length in bytes) out of it, so the same window map gives every arm the same
 * text. The built-in corpus is natural-looking English prose generated from a seed (paragraphs of
 * sentences from a fixed vocabulary with a realistic characters-per-token ratio, no repeated
 * passages); user corpora are a folder of .txt files (PG19 layout, concatenated in name order,
 * separated by a blank line) or JSONL with a "text" field — the caller reads the files (cli/) and
 * hands the bytes here. Pure.
 */
#ifndef ST_WORKLOAD_CORPUS_H
#define ST_WORKLOAD_CORPUS_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/status.h"

struct st_corpus {
    char id[256];
    uint64_t hash; /* FNV-1a of text */
    char *text;    /* owned */
    size_t len;
};

/*
 * Generates exactly nbytes of built-in prose from seed (deterministic across runs and platforms;
 * ASCII, so any cut is a UTF-8 boundary). id is "builtin:<seed>".
 */
void st_corpus_builtin(struct st_corpus *c, uint64_t seed, size_t nbytes);
/*
 * Takes text (copied) as a corpus named id (truncated to fit id[]). Invalid UTF-8 gives ST_EUTF8.
 * On any error here and below c is left empty, so st_corpus_release is always safe.
 */
int st_corpus_from_text(struct st_corpus *c, const char *id, const char *text, size_t len) ST_WUR;
/*
 * Builds a corpus from JSONL bytes: the "text" field of every line, joined by "\n\n". A line that
 * is not a JSON object with a string "text" gives ST_EPARSE with "NAME:LINE: ..." in err.
 */
int st_corpus_from_jsonl(struct st_corpus *c, const char *id, const char *jsonl, size_t len,
                         char *err, size_t errlen) ST_WUR;
void st_corpus_release(struct st_corpus *c);

/* A window: len bytes at off, adjusted by the builder to start and end on UTF-8 boundaries. */
struct st_window {
    uint64_t off;
    uint64_t len;
};

#endif
