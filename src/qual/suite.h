/*
 * Qualification suites: a YAML file naming built-in checks (the screening set) and user
 * questions, each question a prompt with a verifier (exact, regex, numeric, schema, code) and the
 * answer given to the simulator. Parsing is pure (text in, suite out); errors name FILE:LINE.
 * docs/qualification.md ("Suites") defines the format.
 */
#ifndef ST_QUAL_SUITE_H
#define ST_QUAL_SUITE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "qual/check.h"

/* Suite files larger than this are refused. */
#define ST_SUITE_MAX_BYTES (4u << 20)
#define ST_SUITE_MAX_ITEMS 1024

struct st_suite_item {
    char name[64];
    int builtin;               /* 1: kind names a built-in check; 0: step is a question */
    enum st_check_kind kind;   /* builtin only */
    struct st_check_step step; /* question only (owned) */
    int line;                  /* 1-based line of the item in the file */
};

struct st_suite {
    char name[64];
    struct st_suite_item *items; /* owned, n */
    uint32_t n;
};

/*
 * Parses a suite from text (fname names it in messages). Returns 0 with *s filled (release with
 * st_suite_release), or ST_EPARSE / ST_ETOOBIG with "FNAME:LINE: message" in err and *s empty.
 */
int st_suite_parse(const char *fname, const char *text, size_t len, struct st_suite *s, char *err,
                   size_t errlen) ST_WUR;
void st_suite_release(struct st_suite *s);

/* The name of a verifier kind ("exact", ...), static; "?" when out of range. */
const char *st_verify_name(enum st_verify_kind k);

#endif
