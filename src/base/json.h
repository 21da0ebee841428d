/*
 * JSON: a strict, allocation-free-in-steady-state tokenizer and a small streaming writer.
 *
 * The reader validates a whole document (RFC 8259 grammar, UTF-8 inside strings, depth <= 64)
 * and records a flat array of tokens, one per value (object keys are string tokens followed by
 * their value). It never copies the input: tokens are offsets into the caller's bytes, which must
 * outlive every lookup. Strings are decoded on demand into a caller buffer. A document reused
 * across parses keeps its token storage, so parsing many small chunks costs no malloc.
 *
 * The writer appends compact JSON to an st_buf; strings are escaped and any invalid UTF-8 in them
 * becomes U+FFFD, so the output is always valid JSON whatever bytes a server sent.
 */
#ifndef ST_BASE_JSON_H
#define ST_BASE_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/status.h"

#define ST_JSON_MAX_DEPTH 64

enum st_json_type {
    ST_JSON_INVALID = 0,
    ST_JSON_OBJECT,
    ST_JSON_ARRAY,
    ST_JSON_STRING,
    ST_JSON_NUMBER,
    ST_JSON_TRUE,
    ST_JSON_FALSE,
    ST_JSON_NULL,
};

/* String token flag: the raw text holds at least one backslash escape. */
#define ST_JSON_F_ESCAPED 1u

struct st_json_tok {
    uint8_t type;   /* enum st_json_type */
    uint8_t flags;  /* ST_JSON_F_* */
    uint32_t start; /* offset of the first byte; for strings, just after the opening quote */
    uint32_t end;   /* offset one past the last byte; for strings, the closing quote */
    uint32_t size;  /* objects: members; arrays: elements; else 0 */
    uint32_t skip;  /* tokens in this subtree, itself included (next sibling = i + skip) */
};

struct st_json {
    const char *src; /* borrowed: the bytes last parsed */
    size_t len;
    struct st_json_tok *toks; /* owned */
    uint32_t n;               /* tokens of the last successful parse */
    uint32_t cap;
    uint32_t max_toks; /* a document with more values gives ST_ETOOBIG */
};

/* Prepares an empty document that accepts at most max_toks values (0 means 1 << 20). */
void st_json_init(struct st_json *d, uint32_t max_toks);
void st_json_release(struct st_json *d);

/*
 * Parses src[0..len) as one JSON value surrounded by optional white space. Token 0 is the root.
 * Returns 0; ST_EPARSE for bad grammar or trailing bytes; ST_EUTF8 for invalid UTF-8 inside a
 * string; ST_ETOOBIG for more than max_toks values, nesting over ST_JSON_MAX_DEPTH or len over
 * UINT32_MAX. On error d->n is 0. src is borrowed until the next parse or release.
 */
int st_json_parse(struct st_json *d, const char *src, size_t len) ST_WUR;

/* Type of token i, or ST_JSON_INVALID when i < 0 or out of range. */
enum st_json_type st_json_type(const struct st_json *d, int i);
/* Value of key in object token obj; -1 if obj is not an object or has no such key. First match. */
int st_json_get(const struct st_json *d, int obj, const char *key);
/* Element idx of array token arr, or -1. */
int st_json_at(const struct st_json *d, int arr, uint32_t idx);
/* First child (first key for objects), or -1 when empty or not a container. */
int st_json_first(const struct st_json *d, int i);
/* Next sibling of token i inside the container parent (for objects: next key), or -1. */
int st_json_next(const struct st_json *d, int parent, int i);

/* Appends the decoded string token i to out. ST_EPARSE if i is not a string. */
int st_json_str(const struct st_json *d, int i, struct st_buf *out) ST_WUR;
/* True when token i is a string equal to s (after decoding). */
int st_json_streq(const struct st_json *d, int i, const char *s);
/* Raw bytes of token i (for strings: between the quotes, still escaped). */
const char *st_json_raw(const struct st_json *d, int i, size_t *len);
/* Numbers. ST_EPARSE if i is not a number or (for i64) not an integer in range. */
int st_json_i64(const struct st_json *d, int i, int64_t *out) ST_WUR;
int st_json_f64(const struct st_json *d, int i, double *out) ST_WUR;
/* The number at obj.key as a double: NaN when there is no such key (obj may be -1 or no object)
 * or its value is null; NaN with *ok cleared when the value is something else (ok may be NULL;
 * it is never set to 1). */
double st_json_num(const struct st_json *d, int obj, const char *key, int *ok);
/* 1 for true, 0 for false; ST_EPARSE otherwise. */
int st_json_bool(const struct st_json *d, int i) ST_WUR;

/* Returns 1 when p[0..n) is valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
int st_utf8_valid(const char *p, size_t n);

/*
 * Checks that p[0..n) is text a config parser may see: valid UTF-8 and no control bytes other
 * than tab, LF and CR (nor DEL). Returns 0; ST_EPARSE for a control byte (*line gets its 1-based
 * line, *byte the byte); ST_EUTF8 for invalid UTF-8 (*line its line). libfyaml 0.7 loops forever
 * on some such inputs, so YAML readers call this first.
 */
int st_text_check(const char *p, size_t n, uint32_t *line, unsigned char *byte) ST_WUR;
/* The same, with *col the 1-based column (in code points) of the bad byte, or of the end. */
int st_text_check_pos(const char *p, size_t n, uint32_t *line, uint32_t *col,
                      unsigned char *byte) ST_WUR;

/* The writer. Keeps no state but whether a comma is due; nesting is the caller's job. */
struct st_jw {
    struct st_buf *b; /* borrowed */
    int comma;
};

void st_jw_init(struct st_jw *w, struct st_buf *b);
void st_jw_obj_open(struct st_jw *w);
void st_jw_obj_close(struct st_jw *w);
void st_jw_arr_open(struct st_jw *w);
void st_jw_arr_close(struct st_jw *w);
void st_jw_key(struct st_jw *w, const char *key);
void st_jw_str(struct st_jw *w, const char *s);
void st_jw_strn(struct st_jw *w, const char *s, size_t n);
void st_jw_i64(struct st_jw *w, int64_t v);
void st_jw_u64(struct st_jw *w, uint64_t v);
/* Shortest round-tripping form; NaN and infinities become null. */
void st_jw_f64(struct st_jw *w, double v);
void st_jw_bool(struct st_jw *w, int v);
void st_jw_null(struct st_jw *w);
/* Appends already-valid JSON text as one value. */
void st_jw_raw(struct st_jw *w, const char *json, size_t n);

void st_jw_kstr(struct st_jw *w, const char *key, const char *s);
void st_jw_ki64(struct st_jw *w, const char *key, int64_t v);
void st_jw_ku64(struct st_jw *w, const char *key, uint64_t v);
void st_jw_kf64(struct st_jw *w, const char *key, double v);
void st_jw_kbool(struct st_jw *w, const char *key, int v);
/* A key and a value that may be absent: s, or null when s is NULL; v, or null when !has. */
void st_jw_knstr(struct st_jw *w, const char *key, const char *s);
void st_jw_knf64(struct st_jw *w, const char *key, int has, double v);
/* A key and an array of the n values of v (borrowed); doubles as st_jw_f64 writes them.
 * st_jw_kstrv: n strings that stand width bytes apart (a char[n][width] table). */
void st_jw_kstrs(struct st_jw *w, const char *key, char *const *v, size_t n);
void st_jw_kstrv(struct st_jw *w, const char *key, const char *v, size_t width, size_t n);
void st_jw_ku32s(struct st_jw *w, const char *key, const uint32_t *v, size_t n);
void st_jw_ku64s(struct st_jw *w, const char *key, const uint64_t *v, size_t n);
void st_jw_kf64s(struct st_jw *w, const char *key, const double *v, size_t n);

/* Appends s[0..n) to b as a quoted JSON string (escaping, invalid UTF-8 -> U+FFFD). */
void st_json_quote(struct st_buf *b, const char *s, size_t n);

#endif
