/*
 * Qualification suite files (YAML through base/yaml.h): built-in check names and user questions,
 * each question's verifier checked at load time (a schema compiles, a pattern compiles, the
 * simulator's expected answer passes its own verifier). Pure apart from regcomp; no printing.
 */
#include "qual/suite.h"

#include <float.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/xalloc.h"
#include "base/yaml.h"
#include "qual/schema.h"

static const char *const verify_names[ST_VERIFY_KINDS] = {
    "exact", "regex", "numeric", "schema", "code", "arith", "words", "ordered", "complete",
};

const char *st_verify_name(enum st_verify_kind k)
{
    if ((unsigned)k >= ST_VERIFY_KINDS) {
        return "?";
    }
    return verify_names[k];
}

struct ctx {
    struct st_yaml *y; /* borrowed: the suite's document, name and messages (NAME:LINE) */
};

/* The 1-based line of node n, 0 when it has none. */
static int node_line(struct st_yaml_node *n)
{
    int line = 0, col = 0;
    return st_yaml_pos(n, &line, &col) == 0 ? line : 0;
}

/* A scalar's text as a NUL-terminated copy in out, or -1 when n is not a scalar. */
static int scalar(struct ctx *c, struct st_yaml_node *n, struct st_buf *out)
{
    size_t len = 0;
    if (!st_yaml_is_scalar(n)) {
        return -1;
    }
    const char *s = st_yaml_text(c->y, n, &len);
    st_buf_clear(out);
    st_buf_append(out, s, len);
    st_buf_putc(out, '\0');
    out->len--;
    return 0;
}

/* The suite's messages name the rule ("must be"), not the helper's "expected". */
static int get_u32(struct ctx *c, struct st_yaml_node *n, const char *what, uint32_t max,
                   uint32_t *out)
{
    if (st_yaml_u32(c->y, NULL, n, what, 1, max, out) != 0) {
        return st_yaml_fail(c->y, n, "%s must be an integer in [1, %u]", what, max);
    }
    return 0;
}

static int get_f64(struct ctx *c, struct st_yaml_node *n, const char *what, double *out)
{
    if (st_yaml_f64(c->y, NULL, n, what, -DBL_MAX, DBL_MAX, out) != 0) {
        return st_yaml_fail(c->y, n, "%s must be a number", what);
    }
    return 0;
}

static const char *const question_keys[] = {
    "name",   "prompt", "verify", "answer",     "tolerance", "pattern",
    "schema", "tests",  "expect", "max_tokens", NULL,
};

static int known(const char *const *keys, const char *k)
{
    for (int i = 0; keys[i] != NULL; i++) {
        if (strcmp(keys[i], k) == 0) {
            return 1;
        }
    }
    return 0;
}

/* The line of a schema diagnostic: the scalar's first line (a block scalar's mark is at its
 * content) plus the newlines before the offending offset. Exact for block scalars; a folded or
 * quoted scalar whose text was joined may be off by its folds. */
static int schema_line(struct st_yaml_node *n, const char *text, size_t off)
{
    int line = node_line(n);
    for (size_t i = 0; i < off && text[i] != '\0'; i++) {
        line += text[i] == '\n';
    }
    return line;
}

static int parse_question(struct ctx *c, struct st_yaml_node *q, uint32_t def_max,
                          struct st_suite_item *it)
{
    if (!st_yaml_is_map(q)) {
        return st_yaml_fail(c->y, q, "a question must be a mapping");
    }
    it->line = node_line(q);
    st_check_step_init(&it->step);
    struct st_check_step *s = &it->step;
    s->max_tokens = def_max;
    void *iter = NULL;
    struct st_buf k, prompt, vname, answer, expect;
    st_buf_init(&k);
    st_buf_init(&prompt);
    st_buf_init(&vname);
    st_buf_init(&answer);
    st_buf_init(&expect);
    struct st_yaml_node *schema_node = NULL, *verify_node = NULL, *answer_node = NULL;
    int have_tol = 0, have_expect = 0, rc = 0;
    struct st_yaml_node *kn, *vn;
    while (rc == 0 && st_yaml_map_next(q, &iter, &kn, &vn)) {
        if (scalar(c, kn, &k) != 0 || !known(question_keys, k.data)) {
            const char *near = k.data ? st_yaml_suggest(k.data, k.len, question_keys) : NULL;
            rc = st_yaml_fail(c->y, kn, "unknown question key '%s'%s%s%s", k.data ? k.data : "?",
                              near ? " (did you mean " : "", near ? near : "", near ? "?)" : "");
            break;
        }
        if (strcmp(k.data, "max_tokens") == 0) {
            rc = get_u32(c, vn, "max_tokens", 1u << 20, &s->max_tokens);
            continue;
        }
        if (strcmp(k.data, "tolerance") == 0) {
            rc = get_f64(c, vn, "tolerance", &s->v.tol);
            have_tol = 1;
            continue;
        }
        struct st_buf *dst = NULL;
        if (strcmp(k.data, "name") == 0) {
            struct st_buf nb;
            st_buf_init(&nb);
            if (scalar(c, vn, &nb) != 0 || nb.len == 0 || nb.len >= sizeof(it->name) ||
                strspn(nb.data,
                       "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
                    nb.len) {
                /* The name goes into request ids (a header) and receipts: plain characters. */
                rc = st_yaml_fail(c->y, vn, "name must be 1 to 63 of A-Z a-z 0-9 . _ -");
            } else {
                memcpy(it->name, nb.data, nb.len + 1);
            }
            st_buf_release(&nb);
            continue;
        }
        if (strcmp(k.data, "prompt") == 0) {
            dst = &prompt;
        } else if (strcmp(k.data, "verify") == 0) {
            dst = &vname;
            verify_node = vn;
        } else if (strcmp(k.data, "answer") == 0) {
            dst = &answer;
            answer_node = vn;
        } else if (strcmp(k.data, "expect") == 0) {
            dst = &expect;
            have_expect = 1;
        } else if (strcmp(k.data, "schema") == 0) {
            dst = &s->v.want;
            schema_node = vn;
        } else {
            dst = &s->v.want; /* pattern, tests */
        }
        if (scalar(c, vn, dst) != 0) {
            rc = st_yaml_fail(c->y, vn, "%s must be a string", k.data);
        }
    }
    if (rc == 0 && it->name[0] == '\0') {
        rc = st_yaml_fail_at(c->y, it->line, 0, "a question needs a name");
    }
    if (rc == 0 && prompt.len == 0) {
        rc = st_yaml_fail_at(c->y, it->line, 0, "question '%s' needs a prompt", it->name);
    }
    if (rc == 0 && verify_node == NULL) {
        rc = st_yaml_fail_at(c->y, it->line, 0,
                             "question '%s' needs verify: exact, regex, numeric, schema or code",
                             it->name);
    }
    int kind = -1;
    if (rc == 0) {
        for (int i = 0; i <= ST_VERIFY_CODE; i++) {
            if (strcmp(vname.data, verify_names[i]) == 0) {
                kind = i;
            }
        }
        if (kind < 0) {
            rc = st_yaml_fail_at(c->y, node_line(verify_node), 0,
                                 "unknown verifier '%s' (exact, regex, numeric, schema or code)",
                                 vname.data);
        }
    }
    if (rc == 0) {
        s->v.kind = (enum st_verify_kind)kind;
        switch (s->v.kind) {
        case ST_VERIFY_EXACT:
            if (answer_node == NULL) {
                rc = st_yaml_fail_at(c->y, it->line, 0, "an exact question needs an answer");
            } else {
                st_buf_append(&s->v.want, answer.data, answer.len);
                st_buf_putc(&s->v.want, '\0');
                s->v.want.len--;
            }
            break;
        case ST_VERIFY_NUMERIC:
            if (answer_node == NULL) {
                rc =
                    st_yaml_fail_at(c->y, it->line, 0, "a numeric question needs a numeric answer");
            } else if (get_f64(c, answer_node, "answer", &s->v.num) != 0) {
                rc = ST_EPARSE;
            } else if (!have_tol || s->v.tol < 0) {
                rc = st_yaml_fail_at(c->y, it->line, 0, "a numeric question needs tolerance >= 0");
            }
            break;
        case ST_VERIFY_REGEX: {
            regex_t re;
            if (s->v.want.len == 0 || regcomp(&re, s->v.want.data, REG_EXTENDED | REG_NOSUB) != 0) {
                rc = st_yaml_fail_at(c->y, it->line, 0,
                                     "question '%s': pattern missing or not a POSIX ERE", it->name);
            } else {
                regfree(&re);
            }
            break;
        }
        case ST_VERIFY_SCHEMA: {
            struct st_schema *sc;
            struct st_schema_diag d;
            if (schema_node == NULL) {
                rc = st_yaml_fail_at(c->y, it->line, 0, "a schema question needs a schema");
            } else if (st_schema_compile(s->v.want.data, s->v.want.len, &sc, &d) != 0) {
                size_t off = d.offset == (size_t)-1 ? 0 : d.offset;
                rc = st_yaml_fail_at(c->y, schema_line(schema_node, s->v.want.data, off), 0,
                                     "bad schema at '%s': %s", d.path, d.msg);
            } else {
                st_schema_free(sc);
            }
            break;
        }
        case ST_VERIFY_CODE:
            if (s->v.want.len == 0) {
                rc = st_yaml_fail_at(c->y, it->line, 0, "a code question needs tests");
            }
            break;
        default:
            break;
        }
    }
    if (rc == 0) {
        /* The simulator's answer: given, else the exact or numeric answer. */
        if (have_expect) {
            st_buf_append(&s->expect, expect.data, expect.len);
        } else if (s->v.kind == ST_VERIFY_EXACT || s->v.kind == ST_VERIFY_NUMERIC) {
            st_buf_append(&s->expect, answer.data, answer.len);
        } else {
            rc = st_yaml_fail_at(c->y, it->line, 0,
                                 "question '%s' (%s) needs expect: an answer that passes", it->name,
                                 vname.data);
        }
        st_buf_putc(&s->expect, '\0');
        s->expect.len--;
        for (size_t i = 0; rc == 0 && i < s->expect.len; i++) {
            unsigned char ch = (unsigned char)s->expect.data[i];
            if (ch < 0x20 || ch == 0x7f) {
                /* It travels in the X-Servetune-Expect header. */
                rc = st_yaml_fail_at(c->y, it->line, 0,
                                     "question '%s': expect must be one line without control "
                                     "characters",
                                     it->name);
            }
        }
        if (rc == 0 && s->expect.len > 4096) {
            rc = st_yaml_fail_at(c->y, it->line, 0, "question '%s': expect is over 4096 bytes",
                                 it->name);
        }
        if (rc == 0 && s->v.kind != ST_VERIFY_CODE) {
            char ev[256];
            if (st_verify(&s->v, s->expect.data, s->expect.len, ev, sizeof(ev)) != 1) {
                rc = st_yaml_fail_at(c->y, it->line, 0,
                                     "question '%s': expect fails its own verifier: %s", it->name,
                                     ev);
            }
        }
    }
    if (rc == 0) {
        st_buf_puts(&s->messages, "[{\"role\":\"user\",\"content\":");
        st_json_quote(&s->messages, prompt.data, prompt.len);
        st_buf_puts(&s->messages, "}]");
    }
    st_buf_release(&k);
    st_buf_release(&prompt);
    st_buf_release(&vname);
    st_buf_release(&answer);
    st_buf_release(&expect);
    return rc;
}

static struct st_suite_item *add_item(struct st_suite *s)
{
    s->items = st_xrealloc(s->items, (s->n + 1) * sizeof(*s->items));
    struct st_suite_item *it = &s->items[s->n++];
    memset(it, 0, sizeof(*it));
    return it;
}

static int parse_root(struct ctx *c, struct st_yaml_node *root, struct st_suite *s)
{
    if (root == NULL || !st_yaml_is_map(root)) {
        return st_yaml_fail(c->y, root, "a suite is a mapping with checks: and/or questions:");
    }
    uint32_t def_max = 4096;
    static const char *const root_keys[] = {"suite", "max_tokens", "checks", "questions", NULL};
    if (st_yaml_check_keys(c->y, root, root, "the suite", root_keys) != 0) {
        return ST_EPARSE;
    }
    struct st_yaml_node *mt = st_yaml_get(c->y, root, "max_tokens", NULL);
    if (mt != NULL && get_u32(c, mt, "max_tokens", 1u << 20, &def_max) != 0) {
        return ST_EPARSE;
    }
    void *iter = NULL;
    struct st_buf k;
    st_buf_init(&k);
    int rc = 0;
    struct st_yaml_node *kn, *vn;
    while (rc == 0 && st_yaml_map_next(root, &iter, &kn, &vn)) {
        (void)scalar(c, kn, &k); /* st_yaml_check_keys has seen every key */
        if (strcmp(k.data, "suite") == 0) {
            struct st_buf nb;
            st_buf_init(&nb);
            if (scalar(c, vn, &nb) != 0 || nb.len == 0 || nb.len >= sizeof(s->name)) {
                rc = st_yaml_fail(c->y, vn, "suite must be a name of 1 to 63 bytes");
            } else {
                memcpy(s->name, nb.data, nb.len + 1);
            }
            st_buf_release(&nb);
        } else if (strcmp(k.data, "max_tokens") == 0) {
            continue;
        } else if (strcmp(k.data, "checks") == 0 || strcmp(k.data, "questions") == 0) {
            int checks = k.data[0] == 'c';
            if (vn == NULL || !st_yaml_is_seq(vn)) {
                rc = st_yaml_fail(c->y, vn ? vn : kn, "%s must be a list", k.data);
                break;
            }
            void *si = NULL;
            struct st_yaml_node *e;
            while (rc == 0 && (e = st_yaml_seq_next(vn, &si)) != NULL) {
                if (s->n >= ST_SUITE_MAX_ITEMS) {
                    rc = st_yaml_fail(c->y, e, "more than %d items", ST_SUITE_MAX_ITEMS);
                    break;
                }
                struct st_suite_item *it = add_item(s);
                if (checks) {
                    struct st_buf nb;
                    st_buf_init(&nb);
                    it->builtin = 1;
                    it->line = node_line(e);
                    if (scalar(c, e, &nb) != 0 || st_check_kind_of(nb.data, &it->kind) != 0) {
                        rc = st_yaml_fail_at(c->y, it->line, 0, "unknown check '%s'",
                                             nb.data ? nb.data : "?");
                    } else {
                        snprintf(it->name, sizeof(it->name), "%s", nb.data);
                    }
                    st_buf_release(&nb);
                } else {
                    rc = parse_question(c, e, def_max, it);
                }
            }
        }
    }
    st_buf_release(&k);
    if (rc == 0 && s->n == 0) {
        rc = st_yaml_fail_at(c->y, 0, 0, "the suite has no checks and no questions");
    }
    for (uint32_t i = 0; rc == 0 && i < s->n; i++) {
        for (uint32_t j = 0; j < i; j++) {
            if (strcmp(s->items[i].name, s->items[j].name) == 0) {
                rc = st_yaml_fail_at(c->y, s->items[i].line, 0, "'%s' is named twice",
                                     s->items[i].name);
                break;
            }
        }
    }
    return rc;
}

int st_suite_parse(const char *fname, const char *text, size_t len, struct st_suite *s, char *err,
                   size_t errlen)
{
    memset(s, 0, sizeof(*s));
    /* NAME:LINE messages: the suite's users (and tests) read lines, not columns. */
    const struct st_yaml_opts o = {.name = fname,
                                   .noun = "a suite",
                                   .max_bytes = ST_SUITE_MAX_BYTES,
                                   .flags = ST_YAML_NO_COLUMN};
    struct st_yaml y;
    st_yaml_init(&y, &o, err, errlen);
    struct ctx c = {.y = &y};
    int rc = st_yaml_load(&y, text, len);
    if (rc == 0) {
        rc = parse_root(&c, st_yaml_root(&y), s);
    }
    st_yaml_release(&y);
    if (rc != 0) {
        st_suite_release(s);
    }
    return rc;
}

void st_suite_release(struct st_suite *s)
{
    for (uint32_t i = 0; i < s->n; i++) {
        if (!s->items[i].builtin) {
            st_check_step_release(&s->items[i].step);
        }
    }
    free(s->items);
    s->items = NULL;
    s->n = 0;
}
