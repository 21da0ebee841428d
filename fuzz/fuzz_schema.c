/*
 * libFuzzer target for src/qual/schema.c. The input is used three ways: compiled as a schema
 * (and, when it compiles, used on a few fixed instances); validated as an instance against a
 * fixed schema that uses every keyword of the subset; and, when it holds a NUL byte, split there
 * into a schema and an instance that is validated against it. Checked: results are always one
 * of the documented codes, a failed compile leaves no schema and a diagnosis that is a JSON
 * Pointer with an offset inside the text, and a verdict's locations match its outcome.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qual/schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char every_keyword[] =
    "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"title\":\"all\","
    "\"$defs\":{\"pos\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000},"
    "\"tree\":{\"type\":\"object\",\"properties\":{\"kids\":{\"type\":\"array\","
    "\"items\":{\"$ref\":\"#/$defs/tree\"}}}}},"
    "\"anyOf\":[{\"type\":[\"object\",\"null\"]},{\"type\":\"array\",\"prefixItems\":"
    "[{\"type\":\"string\",\"pattern\":\"^[a-z]+(-[0-9]{1,3})?$\",\"minLength\":1,"
    "\"maxLength\":20},{\"$ref\":\"#/$defs/pos\"}],\"items\":{\"not\":{\"type\":\"string\"}},"
    "\"minItems\":1,\"maxItems\":5},{\"enum\":[1,\"a\",null,{\"k\":[true]}]},"
    "{\"const\":{\"x\":1.5}},{\"type\":\"number\",\"exclusiveMinimum\":0,"
    "\"exclusiveMaximum\":1}],"
    "\"oneOf\":[{\"required\":[\"id\"]},{\"not\":{\"type\":\"object\"}}],"
    "\"allOf\":[{\"$ref\":\"#/$defs/tree\"},true],"
    "\"properties\":{\"id\":{\"$ref\":\"#/$defs/pos\"},\"name\":{\"type\":\"string\"}},"
    "\"additionalProperties\":{\"type\":[\"string\",\"integer\",\"array\",\"object\"]}}";

static const char *const instances[] = {
    "{\"id\":1,\"kids\":[{}],\"s\":[\"a-1\",2.5,null]}",
};

static void check_result(int rc, const struct st_schema_result *res)
{
    if (rc != 0 && rc != ST_ETOOBIG && rc != ST_EPARSE && rc != ST_EUTF8) {
        abort();
    }
    if (res->ok && rc != 0) {
        abort();
    }
    if (memchr(res->instance_path, '\0', sizeof(res->instance_path)) == NULL ||
        memchr(res->keyword_path, '\0', sizeof(res->keyword_path)) == NULL ||
        memchr(res->reason, '\0', sizeof(res->reason)) == NULL) {
        abort();
    }
    if (res->ok && (res->instance_path[0] || res->keyword_path[0] || res->reason[0])) {
        abort();
    }
    if (!res->ok && res->reason[0] == '\0') {
        abort();
    }
    if (res->instance_path[0] != '\0' && res->instance_path[0] != '/') {
        abort();
    }
}

static void validate_text(const struct st_schema *s, const char *text, size_t len)
{
    struct st_schema_result res;
    int rc = st_schema_validate(s, text, len, &res);
    check_result(rc, &res);
}

/* Compiles text; on success validates the fixed instances and (when given) one more. */
static void compile_and_use(const char *text, size_t len, const char *inst, size_t inst_len)
{
    struct st_schema *s = (struct st_schema *)&s;
    struct st_schema_diag diag;
    int rc = st_schema_compile(text, len, &s, &diag);
    if (rc != 0) {
        if (s != NULL || (rc != ST_EPARSE && rc != ST_ETOOBIG && rc != ST_EUTF8)) {
            abort();
        }
        if (memchr(diag.path, '\0', sizeof(diag.path)) == NULL ||
            (diag.path[0] != '\0' && diag.path[0] != '/') || diag.msg[0] == '\0' ||
            (diag.offset != (size_t)-1 && diag.offset >= len)) {
            abort();
        }
        return;
    }
    for (size_t i = 0; i < sizeof(instances) / sizeof(instances[0]); i++) {
        validate_text(s, instances[i], strlen(instances[i]));
    }
    if (inst) {
        validate_text(s, inst, inst_len);
    }
    st_schema_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A private copy, so that a read one past the input is caught. */
    char *copy = malloc(size ? size : 1);
    if (!copy) {
        abort();
    }
    memcpy(copy, data, size);
    compile_and_use(copy, size, NULL, 0);

    static struct st_schema *fixed;
    if (!fixed && st_schema_compile(every_keyword, strlen(every_keyword), &fixed, NULL) != 0) {
        abort();
    }
    validate_text(fixed, copy, size);

    const char *nul = memchr(copy, '\0', size);
    if (nul) {
        size_t n = (size_t)(nul - copy);
        compile_and_use(copy, n, nul + 1, size - n - 1);
    }
    free(copy);
    return 0;
}
