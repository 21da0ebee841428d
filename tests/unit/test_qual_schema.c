/*
 * Tests for src/qual/schema.c: a table of schemas x instances with the expected verdict and, for
 * failures, the instance and keyword locations (every keyword of the subset appears); a table of
 * bad schemas with the JSON Pointer and byte offset each must report; the depth limit and the
 * step budget; instances that are not JSON.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "qual/schema.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

struct vcase {
    const char *schema;
    const char *instance;
    int ok;
    const char *ipath; /* failures: expected instance_path, NULL to skip */
    const char *kpath; /* failures: expected keyword_path, NULL to skip */
};

static const struct vcase vcases[] = {
    /* type */
    {"{\"type\":\"string\"}", "\"a\"", 1, NULL, NULL},
    {"{\"type\":\"string\"}", "1", 0, "", "/type"},
    {"{\"type\":\"integer\"}", "1", 1, NULL, NULL},
    {"{\"type\":\"integer\"}", "-0", 1, NULL, NULL},
    {"{\"type\":\"integer\"}", "1.0", 1, NULL, NULL},
    {"{\"type\":\"integer\"}", "1e2", 1, NULL, NULL},
    {"{\"type\":\"integer\"}", "1.5e1", 1, NULL, NULL},
    {"{\"type\":\"integer\"}", "1e400", 1, NULL, NULL},
    {"{\"type\":\"integer\"}", "1.5", 0, "", "/type"},
    {"{\"type\":\"integer\"}", "12.50e-1", 0, "", "/type"},
    {"{\"type\":\"integer\"}", "\"1\"", 0, "", "/type"},
    {"{\"type\":\"number\"}", "1.5", 1, NULL, NULL},
    {"{\"type\":\"number\"}", "7", 1, NULL, NULL},
    {"{\"type\":\"number\"}", "\"7\"", 0, "", "/type"},
    {"{\"type\":\"boolean\"}", "false", 1, NULL, NULL},
    {"{\"type\":\"boolean\"}", "0", 0, "", "/type"},
    {"{\"type\":\"null\"}", "null", 1, NULL, NULL},
    {"{\"type\":\"null\"}", "false", 0, "", "/type"},
    {"{\"type\":\"object\"}", "{}", 1, NULL, NULL},
    {"{\"type\":\"object\"}", "[]", 0, "", "/type"},
    {"{\"type\":\"array\"}", "[]", 1, NULL, NULL},
    {"{\"type\":\"array\"}", "{}", 0, "", "/type"},
    {"{\"type\":[\"string\",\"null\"]}", "null", 1, NULL, NULL},
    {"{\"type\":[\"string\",\"null\"]}", "\"x\"", 1, NULL, NULL},
    {"{\"type\":[\"string\",\"null\"]}", "1", 0, "", "/type"},
    {"{\"\\u0074ype\":\"integer\"}", "\"x\"", 0, "", "/type"},
    /* properties */
    {"{\"properties\":{\"a\":{\"type\":\"integer\"}}}", "{\"a\":1}", 1, NULL, NULL},
    {"{\"properties\":{\"a\":{\"type\":\"integer\"}}}", "{\"a\":\"x\"}", 0, "/a",
     "/properties/a/type"},
    {"{\"properties\":{\"a\":{\"type\":\"integer\"}}}", "{\"b\":\"x\"}", 1, NULL, NULL},
    {"{\"properties\":{\"a\":{\"type\":\"integer\"}}}", "5", 1, NULL, NULL},
    {"{\"properties\":{\"a/b\":{\"type\":\"integer\"}}}", "{\"a/b\":\"x\"}", 0, "/a~1b",
     "/properties/a~1b/type"},
    {"{\"properties\":{\"a~\":{\"type\":\"integer\"}}}", "{\"a\\u007e\":true}", 0, "/a~0",
     "/properties/a~0/type"},
    {"{\"properties\":{\"a\":false}}", "{\"a\":1}", 0, "/a", "/properties/a"},
    {"{\"properties\":{\"list\":{\"items\":{\"properties\":{\"v\":{\"maximum\":5}}}}}}",
     "{\"list\":[{\"v\":1},{\"v\":9}]}", 0, "/list/1/v",
     "/properties/list/items/properties/v/maximum"},
    /* required */
    {"{\"required\":[\"a\",\"b\"]}", "{\"a\":1,\"b\":2}", 1, NULL, NULL},
    {"{\"required\":[\"a\",\"b\"]}", "{\"a\":1}", 0, "", "/required"},
    {"{\"required\":[\"a\"]}", "{\"\\u0061\":1}", 1, NULL, NULL},
    {"{\"required\":[\"a\",\"b\"]}", "[]", 1, NULL, NULL},
    {"{\"required\":[]}", "{}", 1, NULL, NULL},
    /* additionalProperties */
    {"{\"properties\":{\"a\":{}},\"additionalProperties\":false}", "{\"a\":1}", 1, NULL, NULL},
    {"{\"properties\":{\"a\":{}},\"additionalProperties\":false}", "{\"a\":1,\"b\":2}", 0, "/b",
     "/additionalProperties"},
    {"{\"additionalProperties\":{\"type\":\"string\"}}", "{\"x\":\"y\"}", 1, NULL, NULL},
    {"{\"additionalProperties\":{\"type\":\"string\"}}", "{\"x\":1}", 0, "/x",
     "/additionalProperties/type"},
    {"{\"additionalProperties\":true}", "{\"x\":1}", 1, NULL, NULL},
    /* items, prefixItems */
    {"{\"items\":{\"type\":\"integer\"}}", "[1,2,3]", 1, NULL, NULL},
    {"{\"items\":{\"type\":\"integer\"}}", "[1,\"a\"]", 0, "/1", "/items/type"},
    {"{\"items\":{\"type\":\"integer\"}}", "\"not an array\"", 1, NULL, NULL},
    {"{\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "[\"a\",1]", 1, NULL,
     NULL},
    {"{\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "[\"a\",1,true]", 1, NULL,
     NULL},
    {"{\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "[]", 1, NULL, NULL},
    {"{\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "[1]", 0, "/0",
     "/prefixItems/0/type"},
    {"{\"prefixItems\":[{\"type\":\"string\"}],\"items\":false}", "[\"a\"]", 1, NULL, NULL},
    {"{\"prefixItems\":[{\"type\":\"string\"}],\"items\":false}", "[\"a\",2]", 0, "/1", "/items"},
    {"{\"prefixItems\":[{}],\"items\":{\"type\":\"integer\"}}", "[\"x\",1]", 1, NULL, NULL},
    {"{\"prefixItems\":[{}],\"items\":{\"type\":\"integer\"}}", "[\"x\",\"y\"]", 0, "/1",
     "/items/type"},
    /* minItems, maxItems */
    {"{\"minItems\":2,\"maxItems\":3}", "[1,2]", 1, NULL, NULL},
    {"{\"minItems\":2,\"maxItems\":3}", "[1,2,3]", 1, NULL, NULL},
    {"{\"minItems\":2,\"maxItems\":3}", "[1]", 0, "", "/minItems"},
    {"{\"minItems\":2,\"maxItems\":3}", "[1,2,3,4]", 0, "", "/maxItems"},
    {"{\"minItems\":2.0}", "[1]", 0, "", "/minItems"},
    /* enum, const */
    {"{\"enum\":[\"red\",\"green\",1,null,{\"a\":[1,2]}]}", "\"red\"", 1, NULL, NULL},
    {"{\"enum\":[\"red\",\"green\",1,null,{\"a\":[1,2]}]}", "\"r\\u0065d\"", 1, NULL, NULL},
    {"{\"enum\":[\"red\",\"green\",1,null,{\"a\":[1,2]}]}", "1.0", 1, NULL, NULL},
    {"{\"enum\":[\"red\",\"green\",1,null,{\"a\":[1,2]}]}", "null", 1, NULL, NULL},
    {"{\"enum\":[\"red\",\"green\",1,null,{\"a\":[1,2]}]}", "{\"a\":[1,2]}", 1, NULL, NULL},
    {"{\"enum\":[\"red\",\"green\",1,null,{\"a\":[1,2]}]}", "{\"a\":[2,1]}", 0, "", "/enum"},
    {"{\"enum\":[\"red\",\"green\",1,null,{\"a\":[1,2]}]}", "\"blue\"", 0, "", "/enum"},
    {"{\"enum\":[\"red\",\"green\",1,null,{\"a\":[1,2]}]}", "false", 0, "", "/enum"},
    {"{\"enum\":[\"red\",\"green\",1,null,{\"a\":[1,2]}]}", "\"Red\"", 0, "", "/enum"},
    {"{\"const\":{\"x\":1,\"y\":\"z\"}}", "{\"y\":\"z\",\"x\":1}", 1, NULL, NULL},
    {"{\"const\":{\"x\":1,\"y\":\"z\"}}", "{\"x\":1}", 0, "", "/const"},
    {"{\"const\":{\"x\":1,\"y\":\"z\"}}", "{\"x\":1,\"y\":\"z\",\"w\":0}", 0, "", "/const"},
    {"{\"const\":{\"x\":1,\"y\":\"z\"}}", "{\"x\":1,\"z\":\"z\"}", 0, "", "/const"},
    {"{\"const\":false}", "false", 1, NULL, NULL},
    {"{\"const\":false}", "0", 0, "", "/const"},
    {"{\"const\":9007199254740993}", "9007199254740993", 1, NULL, NULL},
    {"{\"const\":9007199254740993}", "9007199254740992", 0, "", "/const"},
    {"{\"const\":[1,[2,\"x\"]]}", "[1,[2,\"x\"]]", 1, NULL, NULL},
    {"{\"const\":[1,[2,\"x\"]]}", "[1,[2,\"y\"]]", 0, "", "/const"},
    /* minimum, maximum, exclusiveMinimum, exclusiveMaximum */
    {"{\"minimum\":1,\"maximum\":10}", "1", 1, NULL, NULL},
    {"{\"minimum\":1,\"maximum\":10}", "10", 1, NULL, NULL},
    {"{\"minimum\":1,\"maximum\":10}", "0", 0, "", "/minimum"},
    {"{\"minimum\":1,\"maximum\":10}", "10.5", 0, "", "/maximum"},
    {"{\"minimum\":1,\"maximum\":10}", "\"100\"", 1, NULL, NULL},
    {"{\"exclusiveMinimum\":1,\"exclusiveMaximum\":10}", "1", 0, "", "/exclusiveMinimum"},
    {"{\"exclusiveMinimum\":1,\"exclusiveMaximum\":10}", "1.0001", 1, NULL, NULL},
    {"{\"exclusiveMinimum\":1,\"exclusiveMaximum\":10}", "10", 0, "", "/exclusiveMaximum"},
    {"{\"minimum\":-2.5}", "-2.5", 1, NULL, NULL},
    {"{\"minimum\":-2.5}", "-2.6", 0, "", "/minimum"},
    /* minLength, maxLength: code points */
    {"{\"minLength\":2,\"maxLength\":3}", "\"ab\"", 1, NULL, NULL},
    {"{\"minLength\":2,\"maxLength\":3}", "\"a\"", 0, "", "/minLength"},
    {"{\"minLength\":2,\"maxLength\":3}", "\"abcd\"", 0, "", "/maxLength"},
    {"{\"minLength\":2,\"maxLength\":3}", "\"\xc3\xa9\xc3\xa9\xc3\xa9\"", 1, NULL, NULL},
    {"{\"minLength\":2,\"maxLength\":3}", "\"\xf0\x9f\x98\x80\"", 0, "", "/minLength"},
    {"{\"minLength\":2,\"maxLength\":3}", "\"\\u00e9\\u00e9\"", 1, NULL, NULL},
    {"{\"minLength\":2,\"maxLength\":3}", "\"\\ud83d\\ude00\"", 0, "", "/minLength"},
    {"{\"minLength\":2}", "12", 1, NULL, NULL},
    /* pattern: POSIX ERE, unanchored */
    {"{\"pattern\":\"^[a-z]+-[0-9]{2,3}$\"}", "\"abc-12\"", 1, NULL, NULL},
    {"{\"pattern\":\"^[a-z]+-[0-9]{2,3}$\"}", "\"abc-1\"", 0, "", "/pattern"},
    {"{\"pattern\":\"^[a-z]+-[0-9]{2,3}$\"}", "\"ABC-12\"", 0, "", "/pattern"},
    {"{\"pattern\":\"b\"}", "\"abc\"", 1, NULL, NULL},
    {"{\"pattern\":\"^(red|green)$\"}", "\"green\"", 1, NULL, NULL},
    {"{\"pattern\":\"^(ab|cd){2,3}$\"}", "\"abcdab\"", 1, NULL, NULL},
    {"{\"pattern\":\"^(ab|cd){2,3}$\"}", "\"ab\"", 0, "", "/pattern"},
    {"{\"pattern\":\"^x{2,}$\"}", "\"xxxx\"", 1, NULL, NULL},
    {"{\"pattern\":\"^(red|green)$\"}", "\"greenish\"", 0, "", "/pattern"},
    {"{\"pattern\":\"^[[:digit:]]+$\"}", "\"2024\"", 1, NULL, NULL},
    {"{\"pattern\":\"x\"}", "[\"no\"]", 1, NULL, NULL},
    {"{\"pattern\":\"^\\\\w+\\\\s\\\\w+$\"}", "\"hello world\"", 1, NULL, NULL},
    {"{\"pattern\":\"^\\\\w+\\\\s\\\\w+$\"}", "\"hello  world\"", 0, "", "/pattern"},
    {"{\"pattern\":\"^a.c$\"}", "\"a\\u00e9c\"", 0, "", "/pattern"},
    {"{\"pattern\":\"^a..c$\"}", "\"a\\u00e9c\"", 1, NULL, NULL},
    /* anyOf, oneOf, allOf, not */
    {"{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "1", 1, NULL, NULL},
    {"{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "\"a\"", 1, NULL, NULL},
    {"{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "1.5", 0, "", "/anyOf"},
    {"{\"oneOf\":[{\"type\":\"integer\"},{\"minimum\":2}]}", "1", 1, NULL, NULL},
    {"{\"oneOf\":[{\"type\":\"integer\"},{\"minimum\":2}]}", "2.5", 1, NULL, NULL},
    {"{\"oneOf\":[{\"type\":\"integer\"},{\"minimum\":2}]}", "3", 0, "", "/oneOf"},
    {"{\"oneOf\":[{\"type\":\"integer\"},{\"minimum\":2}]}", "1.5", 0, "", "/oneOf"},
    {"{\"allOf\":[{\"type\":\"integer\"},{\"minimum\":2}]}", "3", 1, NULL, NULL},
    {"{\"allOf\":[{\"type\":\"integer\"},{\"minimum\":2}]}", "1", 0, "", "/allOf/1/minimum"},
    {"{\"not\":{\"type\":\"string\"}}", "1", 1, NULL, NULL},
    {"{\"not\":{\"type\":\"string\"}}", "\"a\"", 0, "", "/not"},
    {"{\"properties\":{\"a\":{\"anyOf\":[{\"required\":[\"x\"]},{\"required\":[\"y\"]}]}}}",
     "{\"a\":{\"z\":1}}", 0, "/a", "/properties/a/anyOf"},
    /* $ref and $defs */
    {"{\"$defs\":{\"pos\":{\"type\":\"integer\",\"minimum\":1}},"
     "\"properties\":{\"n\":{\"$ref\":\"#/$defs/pos\"}}}",
     "{\"n\":3}", 1, NULL, NULL},
    {"{\"$defs\":{\"pos\":{\"type\":\"integer\",\"minimum\":1}},"
     "\"properties\":{\"n\":{\"$ref\":\"#/$defs/pos\"}}}",
     "{\"n\":0}", 0, "/n", "/$defs/pos/minimum"},
    {"{\"$defs\":{\"node\":{\"type\":\"object\",\"required\":[\"name\"],\"properties\":{\"kids\":"
     "{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}}}},\"$ref\":\"#/$defs/node\"}",
     "{\"name\":1,\"kids\":[{\"name\":2,\"kids\":[]}]}", 1, NULL, NULL},
    {"{\"$defs\":{\"node\":{\"type\":\"object\",\"required\":[\"name\"],\"properties\":{\"kids\":"
     "{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}}}},\"$ref\":\"#/$defs/node\"}",
     "{\"name\":1,\"kids\":[{\"kids\":[]}]}", 0, "/kids/0", "/$defs/node/required"},
    {"{\"$defs\":{\"a/b~\":{\"type\":\"string\"}},\"$ref\":\"#/$defs/a~1b~0\"}", "\"x\"", 1, NULL,
     NULL},
    {"{\"$defs\":{\"a/b~\":{\"type\":\"string\"}},\"$ref\":\"#/$defs/a~1b~0\"}", "1", 0, "",
     "/$defs/a~1b~0/type"},
    {"{\"type\":\"object\",\"$defs\":{\"s\":{\"type\":\"string\"}},\"$ref\":\"#/$defs/s\"}", "{}",
     0, "", "/$defs/s/type"},
    /* boolean schemas */
    {"true", "{\"anything\":[1,2]}", 1, NULL, NULL},
    {"false", "1", 0, "", ""},
    {"{}", "null", 1, NULL, NULL},
    /* annotations are accepted and change nothing; format is an annotation only */
    {"{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"$id\":\"urn:x\","
     "\"title\":\"t\",\"description\":\"d\",\"$comment\":\"c\",\"default\":1,\"examples\":[1],"
     "\"deprecated\":false,\"readOnly\":true,\"writeOnly\":false,\"format\":\"email\","
     "\"type\":\"string\"}",
     "\"not-an-email\"", 1, NULL, NULL},
    /* a typical json-check schema */
    {"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":1},"
     "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},\"tags\":{\"type\":\"array\","
     "\"items\":{\"type\":\"string\"},\"maxItems\":3},\"role\":{\"enum\":[\"admin\",\"user\"]}},"
     "\"required\":[\"name\",\"age\",\"role\"],\"additionalProperties\":false}",
     "{\"name\":\"Ana\",\"age\":31,\"tags\":[\"a\",\"b\"],\"role\":\"user\"}", 1, NULL, NULL},
    {"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":1},"
     "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},\"tags\":{\"type\":\"array\","
     "\"items\":{\"type\":\"string\"},\"maxItems\":3},\"role\":{\"enum\":[\"admin\",\"user\"]}},"
     "\"required\":[\"name\",\"age\",\"role\"],\"additionalProperties\":false}",
     "{\"name\":\"Ana\",\"age\":31,\"tags\":[\"a\",7],\"role\":\"user\"}", 0, "/tags/1",
     "/properties/tags/items/type"},
};

static struct st_schema *compile_ok(const char *text)
{
    struct st_schema *s = NULL;
    struct st_schema_diag diag;
    int rc = st_schema_compile(text, strlen(text), &s, &diag);
    if (rc != 0) {
        fail_msg("schema %s: rc %d at \"%s\": %s", text, rc, diag.path, diag.msg);
    }
    return s;
}

static void test_validation_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < COUNT(vcases); i++) {
        const struct vcase *c = &vcases[i];
        struct st_schema *s = compile_ok(c->schema);
        struct st_schema_result res;
        int rc = st_schema_validate(s, c->instance, strlen(c->instance), &res);
        if (rc != 0 || res.ok != c->ok) {
            fail_msg("case %zu: schema %s instance %s: rc %d ok %d (want %d): %s at %s", i,
                     c->schema, c->instance, rc, res.ok, c->ok, res.reason, res.keyword_path);
        }
        if (c->ok) {
            assert_string_equal(res.instance_path, "");
            assert_string_equal(res.keyword_path, "");
            assert_string_equal(res.reason, "");
        } else {
            assert_true(res.reason[0] != '\0');
            if (c->ipath && strcmp(c->ipath, res.instance_path) != 0) {
                fail_msg("case %zu: instance path \"%s\", want \"%s\"", i, res.instance_path,
                         c->ipath);
            }
            if (c->kpath && strcmp(c->kpath, res.keyword_path) != 0) {
                fail_msg("case %zu: keyword path \"%s\", want \"%s\"", i, res.keyword_path,
                         c->kpath);
            }
        }
        st_schema_free(s);
    }
}

static void test_reasons(void **state)
{
    (void)state;
    struct st_schema *s = compile_ok("{\"required\":[\"name\"],\"properties\":{\"name\":{},\"n\":"
                                     "{\"maximum\":3}},\"additionalProperties\":false}");
    struct st_schema_result res;
    assert_int_equal(st_schema_validate(s, "{}", 2, &res), 0);
    assert_string_equal(res.reason, "missing required property \"name\"");
    const char *t = "{\"name\":1,\"n\":4.5}";
    assert_int_equal(st_schema_validate(s, t, strlen(t), &res), 0);
    assert_string_equal(res.reason, "4.5 is greater than the maximum 3");
    t = "{\"name\":1,\"extra\":0}";
    assert_int_equal(st_schema_validate(s, t, strlen(t), &res), 0);
    assert_string_equal(res.reason, "property \"extra\" is not allowed");
    st_schema_free(s);
    s = compile_ok("{\"type\":[\"integer\",\"null\"]}");
    assert_int_equal(st_schema_validate(s, "2.5", 3, &res), 0);
    assert_string_equal(res.reason, "expected null or integer, got number");
    st_schema_free(s);
}

struct bcase {
    const char *schema;
    int rc;
    const char *path;
    const char *msg_part; /* NULL to skip */
};

static const struct bcase bcases[] = {
    {"{", ST_EPARSE, "", "not valid JSON"},
    {"[]", ST_EPARSE, "", "object or a boolean"},
    {"3", ST_EPARSE, "", "object or a boolean"},
    {"{\"type\":\"strng\"}", ST_EPARSE, "/type", "unknown type name"},
    {"{\"type\":[\"string\",\"string\"]}", ST_EPARSE, "/type/1", "twice"},
    {"{\"type\":[\"string\",3]}", ST_EPARSE, "/type/1", NULL},
    {"{\"type\":[]}", ST_EPARSE, "/type", NULL},
    {"{\"minLenght\":3}", ST_EPARSE, "/minLenght", "unknown keyword"},
    {"{\"properties\":{\"a\":{\"uniqueItems\":true}}}", ST_EPARSE, "/properties/a/uniqueItems",
     "outside the supported subset"},
    {"{\"if\":{},\"then\":{}}", ST_EPARSE, "/if", "outside the supported subset"},
    {"{\"definitions\":{}}", ST_EPARSE, "/definitions", "outside the supported subset"},
    {"{\"minItems\":-1}", ST_EPARSE, "/minItems", "non-negative integer"},
    {"{\"minItems\":1.5}", ST_EPARSE, "/minItems", NULL},
    {"{\"maxItems\":null}", ST_EPARSE, "/maxItems", NULL},
    {"{\"maxLength\":\"3\"}", ST_EPARSE, "/maxLength", NULL},
    {"{\"minLength\":-3}", ST_EPARSE, "/minLength", NULL},
    {"{\"minimum\":\"0\"}", ST_EPARSE, "/minimum", "must be a number"},
    {"{\"maximum\":true}", ST_EPARSE, "/maximum", NULL},
    {"{\"exclusiveMinimum\":true}", ST_EPARSE, "/exclusiveMinimum", NULL},
    {"{\"exclusiveMaximum\":[]}", ST_EPARSE, "/exclusiveMaximum", NULL},
    {"{\"required\":\"a\"}", ST_EPARSE, "/required", NULL},
    {"{\"required\":[\"a\",1]}", ST_EPARSE, "/required/1", NULL},
    {"{\"required\":[\"a\",\"a\"]}", ST_EPARSE, "/required/1", "twice"},
    {"{\"properties\":[]}", ST_EPARSE, "/properties", NULL},
    {"{\"properties\":{\"a\":1}}", ST_EPARSE, "/properties/a", NULL},
    {"{\"properties\":{\"a\":{},\"a\":{}}}", ST_EPARSE, "/properties", "twice"},
    {"{\"additionalProperties\":\"no\"}", ST_EPARSE, "/additionalProperties", NULL},
    {"{\"items\":[{}]}", ST_EPARSE, "/items", NULL},
    {"{\"prefixItems\":[]}", ST_EPARSE, "/prefixItems", NULL},
    {"{\"prefixItems\":[{},{\"type\":1}]}", ST_EPARSE, "/prefixItems/1/type", NULL},
    {"{\"anyOf\":[{},3]}", ST_EPARSE, "/anyOf/1", NULL},
    {"{\"oneOf\":[]}", ST_EPARSE, "/oneOf", NULL},
    {"{\"allOf\":{}}", ST_EPARSE, "/allOf", NULL},
    {"{\"not\":\"x\"}", ST_EPARSE, "/not", NULL},
    {"{\"enum\":[]}", ST_EPARSE, "/enum", NULL},
    {"{\"enum\":1}", ST_EPARSE, "/enum", NULL},
    {"{\"pattern\":1}", ST_EPARSE, "/pattern", NULL},
    {"{\"pattern\":\"[a-\"}", ST_EPARSE, "/pattern", "POSIX"},
    {"{\"pattern\":\"\\\\d+\"}", ST_EPARSE, "/pattern", "ECMA-262"},
    {"{\"pattern\":\"(?=a)\"}", ST_EPARSE, "/pattern", NULL},
    {"{\"pattern\":\"(?:a)\"}", ST_EPARSE, "/pattern", NULL},
    {"{\"pattern\":\"a+?\"}", ST_EPARSE, "/pattern", "lazy"},
    {"{\"pattern\":\"(a)\\\\1\"}", ST_EPARSE, "/pattern", NULL},
    {"{\"pattern\":\"a{300}\"}", ST_EPARSE, "/pattern", "255"},
    {"{\"pattern\":\"((a{200}){200}){200}\"}", ST_ETOOBIG, "/pattern", "expands"},
    {"{\"pattern\":\"a\\u0000\"}", ST_EPARSE, "/pattern", "NUL"},
    {"{\"pattern\":\"a++\"}", ST_EPARSE, "/pattern", "stacked"},
    {"{\"pattern\":\"a{2}*\"}", ST_EPARSE, "/pattern", "stacked"},
    {"{\"pattern\":\"((((((((((((((((a+)+)+)+)+)+)+)+)+)+)+)+)+)+)+)+)\"}", ST_ETOOBIG, "/pattern",
     "expands"},
    {"{\"$ref\":\"#/definitions/a\"}", ST_EPARSE, "/$ref", "#/$defs/<name>"},
    {"{\"$ref\":\"other.json#/$defs/a\"}", ST_EPARSE, "/$ref", NULL},
    {"{\"$ref\":\"#\"}", ST_EPARSE, "/$ref", NULL},
    {"{\"$ref\":\"#/$defs/missing\"}", ST_EPARSE, "/$ref", "no definition"},
    {"{\"$defs\":{\"a\":{}},\"$ref\":\"#/$defs/a/b\"}", ST_EPARSE, "/$ref", NULL},
    {"{\"$defs\":{\"a%20b\":{}},\"$ref\":\"#/$defs/a%20b\"}", ST_EPARSE, "/$ref", NULL},
    {"{\"properties\":{\"x\":{\"$ref\":\"#/$defs/nope\"}},\"$defs\":{}}", ST_EPARSE,
     "/properties/x/$ref", "nope"},
    {"{\"properties\":{\"x\":{\"$defs\":{\"d\":{}}}},\"$ref\":\"#/$defs/d\"}", ST_EPARSE, "/$ref",
     "no definition"},
    {"{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"allOf\":[{\"$ref\":\"#/$defs/a\"}]}},"
     "\"$ref\":\"#/$defs/a\"}",
     ST_EPARSE, "/$defs/a/$ref", "cycle"},
    {"{\"$defs\":{\"a\":{\"not\":{\"$ref\":\"#/$defs/a\"}}}}", ST_EPARSE, "/$defs/a/not/$ref",
     "cycle"},
    {"{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}}}", ST_EPARSE, "/$defs/a/$ref", "cycle"},
    {"{\"$defs\":3}", ST_EPARSE, "/$defs", NULL},
    {"{\"$schema\":\"http://json-schema.org/draft-07/schema#\"}", ST_EPARSE, "/$schema", "2020-12"},
    {"{\"properties\":{\"a\":{\"$id\":\"x\"}}}", ST_EPARSE, "/properties/a/$id", "root"},
    {"{\"type\":\"string\",\"type\":\"integer\"}", ST_EPARSE, "/type", "twice"},
    {"{\"title\":3}", ST_EPARSE, "/title", NULL},
    {"{\"description\":[]}", ST_EPARSE, "/description", NULL},
    {"{\"examples\":{}}", ST_EPARSE, "/examples", NULL},
    {"{\"deprecated\":1}", ST_EPARSE, "/deprecated", NULL},
    {"{\"format\":1}", ST_EPARSE, "/format", NULL},
    {"{\"properties\":{\"a/b\":{\"minItems\":\"x\"}}}", ST_EPARSE, "/properties/a~1b/minItems",
     NULL},
};

static void test_bad_schemas(void **state)
{
    (void)state;
    for (size_t i = 0; i < COUNT(bcases); i++) {
        const struct bcase *c = &bcases[i];
        struct st_schema *s = (struct st_schema *)&s; /* must be cleared */
        struct st_schema_diag diag;
        int rc = st_schema_compile(c->schema, strlen(c->schema), &s, &diag);
        if (rc != c->rc || strcmp(diag.path, c->path) != 0 ||
            (c->msg_part && !strstr(diag.msg, c->msg_part))) {
            fail_msg("case %zu %s: rc %d path \"%s\" msg \"%s\"; want rc %d path \"%s\" (%s)", i,
                     c->schema, rc, diag.path, diag.msg, c->rc, c->path,
                     c->msg_part ? c->msg_part : "");
        }
        assert_null(s);
        /* Without a diag the verdict is the same. */
        assert_int_equal(st_schema_compile(c->schema, strlen(c->schema), &s, NULL), c->rc);
    }
}

/* The offset names the offending value's first byte, so a caller can find its line. */
static void test_diag_offsets(void **state)
{
    (void)state;
    struct st_schema *s;
    struct st_schema_diag diag;
    const char *t = "{\n  \"type\": \"object\",\n  \"properties\": {\n    \"a\": {\"minLength\": "
                    "-1}\n  }\n}";
    assert_int_equal(st_schema_compile(t, strlen(t), &s, &diag), ST_EPARSE);
    assert_string_equal(diag.path, "/properties/a/minLength");
    assert_int_equal(diag.offset, (size_t)(strstr(t, "-1") - t));
    t = "{\"type\": \"string\", \"minLenght\": 3}";
    assert_int_equal(st_schema_compile(t, strlen(t), &s, &diag), ST_EPARSE);
    assert_int_equal(diag.offset, (size_t)(strstr(t, "\"minLenght\"") - t));
    assert_string_equal(diag.path, "/minLenght");
    t = "{\"type\": \"strng\"}";
    assert_int_equal(st_schema_compile(t, strlen(t), &s, &diag), ST_EPARSE);
    assert_int_equal(diag.offset, (size_t)(strstr(t, "\"strng\"") - t));
    t = "{\"type\": ";
    assert_int_equal(st_schema_compile(t, strlen(t), &s, &diag), ST_EPARSE);
    assert_int_equal(diag.offset, (size_t)-1);
}

/* A long pointer is cut with "..." and stays a C string. */
static void test_long_path(void **state)
{
    (void)state;
    struct st_buf b;
    st_buf_init(&b);
    st_buf_puts(&b, "{\"properties\":{\"");
    for (int i = 0; i < 400; i++) {
        st_buf_putc(&b, 'k');
    }
    st_buf_puts(&b, "\":{\"bogus\":1}}}");
    struct st_schema *s;
    struct st_schema_diag diag;
    assert_int_equal(st_schema_compile(b.data, b.len, &s, &diag), ST_EPARSE);
    assert_int_equal(strlen(diag.path), ST_SCHEMA_PATH_MAX - 1);
    assert_string_equal(diag.path + ST_SCHEMA_PATH_MAX - 4, "...");
    st_buf_release(&b);
}

static void test_depth_limit(void **state)
{
    (void)state;
    /* Each array level costs five nested validations: deep instances hit the limit. */
    struct st_schema *s =
        compile_ok("{\"$defs\":{\"a\":{\"allOf\":[{\"allOf\":[{\"allOf\":[{\"items\":{\"$ref\":"
                   "\"#/$defs/a\"}}]}]}]}},"
                   "\"$ref\":\"#/$defs/a\"}");
    struct st_buf b;
    st_buf_init(&b);
    for (int i = 0; i < 8; i++) {
        st_buf_putc(&b, '[');
    }
    for (int i = 0; i < 8; i++) {
        st_buf_putc(&b, ']');
    }
    struct st_schema_result res;
    assert_int_equal(st_schema_validate(s, b.data, b.len, &res), 0);
    assert_true(res.ok);
    st_buf_clear(&b);
    for (int i = 0; i < 60; i++) {
        st_buf_putc(&b, '[');
    }
    for (int i = 0; i < 60; i++) {
        st_buf_putc(&b, ']');
    }
    assert_int_equal(st_schema_validate(s, b.data, b.len, &res), ST_ETOOBIG);
    assert_false(res.ok);
    assert_non_null(strstr(res.reason, "depth"));
    st_buf_release(&b);
    st_schema_free(s);
}

static void test_step_budget(void **state)
{
    (void)state;
    /* d0 -> d1 twice -> d2 twice ...: 2^30 visits of one value, stopped by the budget. */
    struct st_buf b;
    st_buf_init(&b);
    st_buf_puts(&b, "{\"$defs\":{");
    for (int i = 0; i < 30; i++) {
        st_buf_printf(
            &b, "\"d%d\":{\"allOf\":[{\"$ref\":\"#/$defs/d%d\"},{\"$ref\":\"#/$defs/d%d\"}]},", i,
            i + 1, i + 1);
    }
    st_buf_puts(&b, "\"d30\":true},\"$ref\":\"#/$defs/d0\"}");
    struct st_schema *s = compile_ok(b.data);
    struct st_schema_result res;
    assert_int_equal(st_schema_validate(s, "1", 1, &res), ST_ETOOBIG);
    assert_false(res.ok);
    assert_non_null(strstr(res.reason, "step budget"));
    /* Inside anyOf too: a limit is never mistaken for a failing branch. */
    st_schema_free(s);
    st_buf_clear(&b);
    st_buf_puts(&b, "{\"$defs\":{");
    for (int i = 0; i < 30; i++) {
        st_buf_printf(
            &b, "\"d%d\":{\"allOf\":[{\"$ref\":\"#/$defs/d%d\"},{\"$ref\":\"#/$defs/d%d\"}]},", i,
            i + 1, i + 1);
    }
    st_buf_puts(&b, "\"d30\":true},\"anyOf\":[{\"$ref\":\"#/$defs/d0\"},true]}");
    s = compile_ok(b.data);
    assert_int_equal(st_schema_validate(s, "1", 1, &res), ST_ETOOBIG);
    assert_false(res.ok);
    st_schema_free(s);
    st_buf_release(&b);
}

static void test_instances_not_json(void **state)
{
    (void)state;
    struct st_schema *s = compile_ok("{\"type\":\"object\"}");
    struct st_schema_result res;
    assert_int_equal(st_schema_validate(s, "{", 1, &res), ST_EPARSE);
    assert_false(res.ok);
    assert_non_null(strstr(res.reason, "not JSON"));
    assert_int_equal(st_schema_validate(s, "\"\xff\"", 3, &res), ST_EUTF8);
    assert_int_equal(st_schema_validate(s, "{} x", 4, &res), ST_EPARSE);
    /* validate_doc on a token of a larger document, and on no token. */
    struct st_json d;
    st_json_init(&d, 0);
    const char *t = "{\"reply\":{\"a\":1},\"other\":2}";
    assert_int_equal(st_json_parse(&d, t, strlen(t)), 0);
    int reply = st_json_get(&d, 0, "reply");
    assert_int_equal(st_schema_validate_doc(s, &d, reply, &res), 0);
    assert_true(res.ok);
    assert_int_equal(st_schema_validate_doc(s, &d, st_json_get(&d, 0, "other"), &res), 0);
    assert_false(res.ok);
    assert_int_equal(st_schema_validate_doc(s, &d, -1, &res), ST_EPARSE);
    assert_int_equal(st_schema_validate_doc(s, &d, (int)d.n, &res), ST_EPARSE);
    st_json_release(&d);
    st_schema_free(s);
    st_schema_free(NULL);
}

/* A compiled schema is reusable: validations do not change it. */
static void test_reuse(void **state)
{
    (void)state;
    struct st_schema *s = compile_ok("{\"properties\":{\"a\":{\"pattern\":\"^x+$\"}}}");
    struct st_schema_result res;
    for (int i = 0; i < 100; i++) {
        const char *t = i % 2 ? "{\"a\":\"xxx\"}" : "{\"a\":\"xyx\"}";
        assert_int_equal(st_schema_validate(s, t, strlen(t), &res), 0);
        assert_int_equal(res.ok, i % 2);
    }
    st_schema_free(s);
}

static void test_too_big(void **state)
{
    (void)state;
    struct st_schema *s;
    struct st_schema_diag diag;
    assert_int_equal(st_schema_compile("{}", (size_t)ST_SCHEMA_MAX_BYTES + 1, &s, &diag),
                     ST_ETOOBIG);
    /* More subschemas than the node limit. */
    struct st_buf b;
    st_buf_init(&b);
    st_buf_puts(&b, "{\"anyOf\":[");
    for (int i = 0; i < ST_SCHEMA_MAX_NODES + 10; i++) {
        st_buf_puts(&b, i ? ",{}" : "{}");
    }
    st_buf_puts(&b, "]}");
    assert_int_equal(st_schema_compile(b.data, b.len, &s, &diag), ST_ETOOBIG);
    assert_null(s);
    st_buf_release(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validation_table),
        cmocka_unit_test(test_reasons),
        cmocka_unit_test(test_bad_schemas),
        cmocka_unit_test(test_diag_offsets),
        cmocka_unit_test(test_long_path),
        cmocka_unit_test(test_depth_limit),
        cmocka_unit_test(test_step_budget),
        cmocka_unit_test(test_instances_not_json),
        cmocka_unit_test(test_reuse),
        cmocka_unit_test(test_too_big),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
