/*
 * Internal to the JSON Schema subset (schema.c: the compiler and the shared helpers;
 * schema_validate.c: the validator). The compiled form: every subschema a node in one array, its
 * children index runs in side arrays. Not an interface for anything else: see schema.h.
 */
#ifndef ST_QUAL_SCHEMA_INT_H
#define ST_QUAL_SCHEMA_INT_H

#include <regex.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/json.h"
#include "qual/schema.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Keywords; each has a bit in node.has (and in the duplicate check while compiling). */
enum kw {
    KW_TYPE = 0,
    KW_PROPERTIES,
    KW_REQUIRED,
    KW_ADDITIONAL,
    KW_ITEMS,
    KW_PREFIX_ITEMS,
    KW_MIN_ITEMS,
    KW_MAX_ITEMS,
    KW_ENUM,
    KW_CONST,
    KW_MINIMUM,
    KW_MAXIMUM,
    KW_XMINIMUM,
    KW_XMAXIMUM,
    KW_MIN_LENGTH,
    KW_MAX_LENGTH,
    KW_PATTERN,
    KW_ANY_OF,
    KW_ONE_OF,
    KW_ALL_OF,
    KW_NOT,
    KW_REF,
    KW_DEFS,
    KW_SCHEMA,
    KW_ID,
    KW_COMMENT,
    KW_TITLE,
    KW_DESCRIPTION,
    KW_DEFAULT,
    KW_EXAMPLES,
    KW_DEPRECATED,
    KW_READ_ONLY,
    KW_WRITE_ONLY,
    KW_FORMAT,
    KW_COUNT,
};

/* JSON types as bits of node.types. */
enum {
    T_NULL = 1u << 0,
    T_BOOLEAN = 1u << 1,
    T_OBJECT = 1u << 2,
    T_ARRAY = 1u << 3,
    T_NUMBER = 1u << 4,
    T_STRING = 1u << 5,
    T_INTEGER = 1u << 6,
};

struct node {
    int boolean; /* 1: the true schema, 0: the false schema, -1: an object schema */
    uint64_t has;
    uint32_t types;
    double min, max, xmin, xmax;
    uint64_t min_items, max_items, min_len, max_len;
    uint32_t props, nprops; /* run in schema.props, sorted by name */
    uint32_t req, nreq;     /* run in schema.strs */
    uint32_t prefix, nprefix, any, nany, one, none, all, nall; /* runs in schema.kids */
    int32_t addl, items, not_, ref;                            /* node indices, -1 when absent */
    int enum_tok, const_tok; /* tokens of schema.doc, -1 when absent */
    int32_t pattern;         /* index in schema.res, -1 when absent */
    char *path;              /* owned: this subschema's JSON Pointer */
};

struct name {
    char *s; /* owned, decoded, NUL-terminated (may also hold NULs before len) */
    size_t len;
    int32_t node; /* properties and $defs: the schema; required: unused */
};

struct st_schema {
    char *text; /* owned copy of the schema text, parsed into doc */
    struct st_json doc;
    struct node *nodes;
    uint32_t nnodes, capnodes;
    uint32_t *kids;
    uint32_t nkids, capkids;
    struct name *props;
    uint32_t nprops, capprops;
    struct name *strs;
    uint32_t nstrs, capstrs;
    struct name *defs; /* the root's $defs, sorted */
    uint32_t ndefs, capdefs;
    regex_t **res;
    uint32_t nres, capres;
};

extern const char *const st_schema_type_names[7]; /* by bit index of node.types */

void st_schema_buf_truncate(struct st_buf *b, size_t len);

/* Appends "/" and seg[0..n) escaped as a JSON Pointer token. */
void st_schema_ptr_push(struct st_buf *b, const char *seg, size_t n);

void st_schema_ptr_push_index(struct st_buf *b, uint32_t i);

/* Copies s[0..n) into dst[cap], cutting at a UTF-8 boundary with "..." when it does not fit. */
void st_schema_copy_cut(char *dst, size_t cap, const char *s, size_t n);

void st_schema_fmt_double(char *out, size_t cap, double v);

/* Decoded string token i: the raw bytes when unescaped, else decoded into scratch. */
int st_schema_get_str(const struct st_json *d, int i, struct st_buf *scratch, const char **p,
                      size_t *n);

/* The name s[0..len) in the sorted run v[first, first + n), or NULL. v may be NULL when n is 0. */
const struct name *st_schema_find_name(const struct name *v, uint32_t first, uint32_t n,
                                       const char *s, size_t len);

/*
 * Integer-ness from the number's text, exactly: digits d (integer and fraction parts) times
 * 10^(exp - fraction digits). Without trailing zeros of d that power must be >= 0, unless d is 0.
 */
int st_schema_number_is_integer(const char *s, size_t n);

#endif
