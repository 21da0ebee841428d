/*
 * YAML: the one reader of YAML input (plans, profiles, suites, compose files) over libfyaml.
 *
 * It is L0 (base, which therefore links libfyaml) because the pure L1 simulator model reads
 * profiles with it, and a lower layer cannot be given to it. It reads bytes, never files:
 * callers read them (st_fs_read_file, L2) and pass them in, so L1 stays free of I/O. It is not
 * a YAML writer and not a schema language: loaders walk the document with these getters.
 *
 * st_yaml_load() runs the input guard every loader needs: a size limit, then UTF-8 text without
 * control bytes (libfyaml 0.7 loops forever on some invalid UTF-8, such as "%\xae", and silently
 * drops or cuts at some control bytes), then exactly one document, then no single-quoted text
 * with '' escapes over several lines (libfyaml 0.7.12 leaks unescaping some '' text, so the
 * helper unescapes it itself). Every message is "NAME:LINE:COL: what was expected" (1-based;
 * "NAME:LINE: ..." under ST_YAML_NO_COLUMN, "NAME: ..." under ST_YAML_NO_POSITION or when no
 * position is known). Nodes are borrowed from the document: valid until st_yaml_release().
 * Not thread-safe per document; documents are independent.
 */
#ifndef ST_BASE_YAML_H
#define ST_BASE_YAML_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/status.h"

/* A node of a loaded document (opaque; a libfyaml node inside yaml.c). */
struct st_yaml_node;

enum st_yaml_flag {
    ST_YAML_RESOLVE = 1u << 0,     /* resolve anchors, aliases and merge keys (<<: *base) */
    ST_YAML_NO_COLUMN = 1u << 1,   /* positions as NAME:LINE (the suite's messages) */
    ST_YAML_NO_POSITION = 1u << 2, /* no positions at all (a --set value) */
    ST_YAML_FIRST_DOC = 1u << 3,   /* read the first document, ignore the rest (compose) */
};

struct st_yaml_opts {
    const char *name;   /* borrowed: the source in messages ("plan.yaml", "--set") */
    const char *noun;   /* borrowed: in the size message ("a plan"); NULL: "a YAML file" */
    const char *prefix; /* borrowed: put before guard and syntax messages; NULL: none */
    size_t max_bytes;   /* the size limit; 0: ST_YAML_MAX_BYTES */
    unsigned flags;     /* enum st_yaml_flag */
};

#define ST_YAML_MAX_BYTES (16u << 20)

/* One '' unescaped scalar: the helper's own text for it (see the file comment). */
struct st_yaml_esc {
    struct st_yaml_node *node; /* borrowed; NULL: a free slot */
    char *text;                /* owned */
    size_t len;
};

struct st_yaml {
    struct st_yaml_opts o;
    char *err; /* borrowed: the caller's message buffer, errlen bytes (may be NULL) */
    size_t errlen;
    const char *text; /* borrowed: the input, until release */
    size_t len;
    void *diag; /* owned: libfyaml's diagnostics, parser and document */
    void *fyp;
    void *doc;
    char msg[256];           /* libfyaml's first diagnostic line */
    struct st_yaml_esc *esc; /* owned: open-addressed by node, esc_cap slots (a power of 2) */
    size_t esc_cap;
};

/* Prepares y for messages (st_yaml_fail works from here on) and for st_yaml_load. o and err are
 * borrowed until st_yaml_release. */
void st_yaml_init(struct st_yaml *y, const struct st_yaml_opts *o, char *err, size_t errlen);

/*
 * Parses text[0..len) (no NUL needed after it; borrowed until release) through the guard into
 * one document. Returns 0 (st_yaml_root is NULL for an empty stream); ST_ETOOBIG over the size
 * limit; ST_EPARSE for bytes that are not text, a syntax error, a second document or a refused
 * '' text, each with its message; -ENOMEM when libfyaml cannot start. Call st_yaml_release in
 * every case.
 */
int st_yaml_load(struct st_yaml *y, const char *text, size_t len) ST_WUR;

/* Frees the document; y may be loaded again after st_yaml_init. */
void st_yaml_release(struct st_yaml *y);

/* The document's root, or NULL when there is none. */
struct st_yaml_node *st_yaml_root(const struct st_yaml *y);

/* ---- nodes ---- */

int st_yaml_is_map(struct st_yaml_node *n);
int st_yaml_is_seq(struct st_yaml_node *n);
/* A scalar that is not an alias. NULL is none of the three. */
int st_yaml_is_scalar(struct st_yaml_node *n);
int st_yaml_is_alias(struct st_yaml_node *n);
/* NULL or a plain empty scalar ("key:" alone). */
int st_yaml_is_empty(struct st_yaml_node *n);
/* st_yaml_is_empty, or a plain null or ~. */
int st_yaml_is_null(struct st_yaml_node *n);
/* Items in a mapping or a sequence; 0 for anything else. */
uint32_t st_yaml_count(struct st_yaml_node *n);

/* The text of scalar (or alias) n, *len its length; "" with 0 for anything else. Not
 * NUL-terminated (it may point into the input); may hold NUL bytes (from "\0" escapes). Valid
 * until release. */
const char *st_yaml_text(struct st_yaml *y, struct st_yaml_node *n, size_t *len);

/* 1-based position of n: its own token for scalars, else its first scalar inside. Returns 0, or
 * -1 (line and col untouched) when n is NULL or has no scalar. */
int st_yaml_pos(struct st_yaml_node *n, int *line, int *col);

/* a when it has a position, else b (a value, else its key). */
struct st_yaml_node *st_yaml_either(struct st_yaml_node *a, struct st_yaml_node *b);

/* Iteration: start with *it = NULL. The next item of sequence seq, or NULL at its end. */
struct st_yaml_node *st_yaml_seq_next(struct st_yaml_node *seq, void **it);
/* The next pair of mapping map: 1 with *k, *v (either may be NULL), or 0 at its end. */
int st_yaml_map_next(struct st_yaml_node *map, void **it, struct st_yaml_node **k,
                     struct st_yaml_node **v);

/* The value of key in mapping map (NULL when absent, without a value or when map is not a
 * mapping); *k, when k is not NULL, gets the key node (NULL when absent). First match. */
struct st_yaml_node *st_yaml_get(struct st_yaml *y, struct st_yaml_node *map, const char *key,
                                 struct st_yaml_node **k);

/* ---- messages ---- */

/* Writes "NAME:LINE:COL: message" at node at (see the file comment) into the error buffer.
 * Returns ST_EPARSE. */
int st_yaml_fail(struct st_yaml *y, struct st_yaml_node *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same at a stored position (line 0: none). */
int st_yaml_fail_at(struct st_yaml *y, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Describes a value for "got ...": 'text', an empty value, a mapping, a list, an alias (*x). */
void st_yaml_describe(struct st_yaml *y, struct st_yaml_node *v, char *out, size_t outlen);

/* Writes s[0..n) for a message: printable ASCII kept, other bytes as \xNN, cut after 40 bytes
 * with "...". out holds at least 8 bytes. */
void st_yaml_quote(const char *s, size_t n, char *out, size_t outlen);

/* Levenshtein distance of two short strings, each cut at 64 bytes. */
size_t st_yaml_distance(const char *a, size_t an, const char *b, size_t bn);

/* The name in known (NULL-terminated) at most two edits from s[0..n) and closest, or NULL. */
const char *st_yaml_suggest(const char *s, size_t n, const char *const *known);

/*
 * Checks that map is a mapping whose keys are plain scalars in known (NULL-terminated), at map
 * or, when map is NULL, at. Unknown: "unknown key 'x' in WHAT (known: a, b); did you mean b?".
 * Returns 0 or ST_EPARSE.
 */
int st_yaml_check_keys(struct st_yaml *y, struct st_yaml_node *map, struct st_yaml_node *at,
                       const char *what, const char *const *known);

/* ---- typed values of one node ----
 *
 * Each reads value v named path in messages; k (the key, may be NULL) gives the position when v
 * has none. Returns 0 with *out, or ST_EPARSE: "PATH: expected a value" (v NULL), "PATH:
 * expected a single value, not a list or mapping", "PATH: empty value", "PATH: a NUL character
 * in the value", or the type's own "PATH: expected ..., got 'TEXT'".
 */
int st_yaml_scalar(struct st_yaml *y, struct st_yaml_node *k, struct st_yaml_node *v,
                   const char *path, const char **s, size_t *n) ST_WUR;
/* An owned copy (free it). */
int st_yaml_str(struct st_yaml *y, struct st_yaml_node *k, struct st_yaml_node *v, const char *path,
                char **out) ST_WUR;
/* Decimal digits only, lo <= value <= hi: "expected a whole number from LO to HI". */
int st_yaml_u64(struct st_yaml *y, struct st_yaml_node *k, struct st_yaml_node *v, const char *path,
                uint64_t lo, uint64_t hi, uint64_t *out) ST_WUR;
int st_yaml_u32(struct st_yaml *y, struct st_yaml_node *k, struct st_yaml_node *v, const char *path,
                uint32_t lo, uint32_t hi, uint32_t *out) ST_WUR;
/* A finite strtod number, lo <= value <= hi: "expected a number from LO to HI". */
int st_yaml_f64(struct st_yaml *y, struct st_yaml_node *k, struct st_yaml_node *v, const char *path,
                double lo, double hi, double *out) ST_WUR;
/* true or false only: "expected true or false"; *out 1 or 0. */
int st_yaml_bool(struct st_yaml *y, struct st_yaml_node *k, struct st_yaml_node *v,
                 const char *path, int *out) ST_WUR;
/* One of names (NULL-terminated): *out its index + 1; "expected one of a, b, c". */
int st_yaml_enum(struct st_yaml *y, struct st_yaml_node *k, struct st_yaml_node *v,
                 const char *path, const char *const *names, int *out) ST_WUR;

/* ---- typed values of a mapping's key ----
 *
 * The value of key in map, named "WHAT.KEY" in messages. An absent key returns 0 and leaves
 * *out as it was, or, when required, fails "WHAT: missing key 'KEY'" at map. Otherwise as the
 * node getters above.
 */
int st_yaml_get_scalar(struct st_yaml *y, struct st_yaml_node *map, const char *key,
                       const char *what, int required, const char **s, size_t *n,
                       struct st_yaml_node **at) ST_WUR; /* 1 when absent; *at: value or key */
int st_yaml_get_str(struct st_yaml *y, struct st_yaml_node *map, const char *key, const char *what,
                    int required, char **out) ST_WUR;
int st_yaml_get_u64(struct st_yaml *y, struct st_yaml_node *map, const char *key, const char *what,
                    int required, uint64_t lo, uint64_t hi, uint64_t *out) ST_WUR;
int st_yaml_get_u32(struct st_yaml *y, struct st_yaml_node *map, const char *key, const char *what,
                    int required, uint32_t lo, uint32_t hi, uint32_t *out) ST_WUR;
int st_yaml_get_f64(struct st_yaml *y, struct st_yaml_node *map, const char *key, const char *what,
                    int required, double lo, double hi, double *out) ST_WUR;
int st_yaml_get_bool(struct st_yaml *y, struct st_yaml_node *map, const char *key, const char *what,
                     int required, int *out) ST_WUR;
int st_yaml_get_enum(struct st_yaml *y, struct st_yaml_node *map, const char *key, const char *what,
                     int required, const char *const *names, int *out) ST_WUR;
/* A sequence: *seq (NULL when absent) and *k its key; "WHAT.KEY: expected a list". */
int st_yaml_get_seq(struct st_yaml *y, struct st_yaml_node *map, const char *key, const char *what,
                    int required, struct st_yaml_node **seq, struct st_yaml_node **k) ST_WUR;

#endif
