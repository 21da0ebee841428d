/*
 * A JSON Schema validator for the subset that the `json` check and user suites need (draft
 * 2020-12 keywords; docs/qualification.md lists them and the differences from the full draft).
 * A schema's JSON text is compiled once into an immutable validator; validating an instance
 * then reads nothing but the compiled nodes and the instance.
 *
 * Compilation is strict: an unknown or unsupported keyword, a keyword with a value of the wrong
 * kind, a pattern POSIX ERE cannot take, or a $ref other than "#/$defs/<name>" is an error whose
 * JSON Pointer names the offending place, so that a suite loader can map it to file:line.
 * Validation reports pass or fail with the first failing instance location and a reason.
 * Recursion is bounded by a depth limit and the work by a step budget, so neither a deep
 * instance nor a pathological schema ($ref chains fanning out through anyOf) runs unbounded.
 *
 * A compiled validator is read-only and may be shared by threads. Pure apart from malloc.
 */
#ifndef ST_QUAL_SCHEMA_H
#define ST_QUAL_SCHEMA_H

#include <stddef.h>

#include "base/json.h"
#include "base/status.h"

/* Schema text larger than this is refused with ST_ETOOBIG. */
#define ST_SCHEMA_MAX_BYTES (1u << 20)
/* Subschemas (objects and booleans) one schema may hold. */
#define ST_SCHEMA_MAX_NODES 8192
/* Nested subschema validations (schema depth plus $ref hops) one validation may make. */
#define ST_SCHEMA_MAX_DEPTH 256
/*
 * Work one validation may do before it gives up with ST_ETOOBIG: ST_SCHEMA_MAX_STEPS subschema
 * visits and value comparisons, plus ST_SCHEMA_STEPS_PER_VALUE for each value of the instance.
 * A plain schema spends a few steps per value; only fan-out through $ref and combinators nears it.
 */
#define ST_SCHEMA_MAX_STEPS (1u << 18)
#define ST_SCHEMA_STEPS_PER_VALUE 64u
/* Bytes of a pattern; larger ones are refused (their compiled size in glibc grows fast). */
#define ST_SCHEMA_MAX_PATTERN 1024

#define ST_SCHEMA_PATH_MAX 256
#define ST_SCHEMA_MSG_MAX 192

struct st_schema; /* opaque, immutable once compiled */

/*
 * Where and why a schema failed to compile. path is a JSON Pointer (RFC 6901: '~' is "~0", '/'
 * is "~1"; "" is the root) into the schema document; a pointer longer than the buffer is cut
 * and ends with "...". offset is the byte offset of the offending value in the schema text, or
 * (size_t)-1 when the text is not JSON at all.
 */
struct st_schema_diag {
    char path[ST_SCHEMA_PATH_MAX];
    size_t offset;
    char msg[ST_SCHEMA_MSG_MAX];
};

/*
 * The verdict on one instance. instance_path (JSON Pointer into the instance) and
 * keyword_path (JSON Pointer into the schema, ending in the keyword that failed) locate the
 * first failure met in document order; both are "" and reason is "" on a pass. Under anyOf,
 * oneOf and not the location is that of the combinator, since no single branch is to blame.
 */
struct st_schema_result {
    int ok; /* 1 pass, 0 fail */
    char instance_path[ST_SCHEMA_PATH_MAX];
    char keyword_path[ST_SCHEMA_PATH_MAX];
    char reason[ST_SCHEMA_MSG_MAX];
};

/*
 * Compiles text[0..len) (a JSON document holding a schema) into *out (caller frees with
 * st_schema_free). The text is copied; the caller's buffer may go at once. diag may be NULL.
 * Returns 0; ST_EPARSE for text that is not JSON or a schema outside the subset (diag says where
 * and why); ST_EUTF8 for invalid UTF-8 in a string; ST_ETOOBIG past ST_SCHEMA_MAX_BYTES,
 * ST_SCHEMA_MAX_NODES or the JSON tokenizer's depth. On error *out is NULL.
 */
int st_schema_compile(const char *text, size_t len, struct st_schema **out,
                      struct st_schema_diag *diag) ST_WUR;

/* Frees s; NULL is a no-op. */
void st_schema_free(struct st_schema *s);

/*
 * Validates the value at token tok of an already parsed document (borrowed for the call).
 * Returns 0 with res filled (ok 1 or 0); ST_ETOOBIG when the depth limit or the step budget ran
 * out (res says which, ok is 0); ST_EPARSE when tok is not a token of doc.
 */
int st_schema_validate_doc(const struct st_schema *s, const struct st_json *doc, int tok,
                           struct st_schema_result *res) ST_WUR;

/*
 * Parses text[0..len) as JSON and validates it. Returns what st_schema_validate_doc returns, or
 * the parse error (ST_EPARSE, ST_EUTF8, ST_ETOOBIG) with res->ok 0 and res->reason saying the
 * instance is not JSON.
 */
int st_schema_validate(const struct st_schema *s, const char *text, size_t len,
                       struct st_schema_result *res) ST_WUR;

#endif
