/*
 * Qualification suite files (YAML through libfyaml): built-in check names and user questions,
 * each question's verifier checked at load time (a schema compiles, a pattern compiles, the
 * simulator's expected answer passes its own verifier). Pure apart from regcomp; no printing.
 */
#include "qual/suite.h"

#include <errno.h>
#include <libfyaml.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/xalloc.h"
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
    const char *fname;
    char *err;
    size_t errlen;
    char diag[256];
};

static int node_line(struct fy_node *n)
{
    for (int depth = 0; n != NULL && depth < 70; depth++) {
        void *it = NULL;
        if (fy_node_is_scalar(n)) {
            struct fy_token *t = fy_node_get_scalar_token(n);
            const struct fy_mark *m = t != NULL ? fy_token_start_mark(t) : NULL;
            return m != NULL ? m->line + 1 : 0;
        }
        if (fy_node_is_mapping(n)) {
            struct fy_node_pair *p = fy_node_mapping_iterate(n, &it);
            n = p != NULL ? fy_node_pair_key(p) : NULL;
        } else {
            n = fy_node_sequence_iterate(n, &it);
        }
    }
    return 0;
}

static int fail(struct ctx *c, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct ctx *c, int line, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (line > 0) {
        snprintf(c->err, c->errlen, "%s:%d: %s", c->fname, line, msg);
    } else {
        snprintf(c->err, c->errlen, "%s: %s", c->fname, msg);
    }
    return ST_EPARSE;
}

static void diag_output(struct fy_diag *diag, void *user, const char *buf, size_t len)
{
    (void)diag;
    struct ctx *c = user;
    if (c->diag[0] != '\0') {
        return;
    }
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r')) {
        len--;
    }
    snprintf(c->diag, sizeof(c->diag), "%.*s", (int)len, buf);
}

/* A scalar's text as a NUL-terminated copy in out, or -1 when n is not a scalar. */
static int scalar(struct fy_node *n, struct st_buf *out)
{
    size_t len = 0;
    if (n == NULL || !fy_node_is_scalar(n) || fy_node_is_alias(n)) {
        return -1;
    }
    const char *s = fy_node_get_scalar(n, &len);
    if (s == NULL) {
        return -1;
    }
    st_buf_clear(out);
    st_buf_append(out, s, len);
    st_buf_putc(out, '\0');
    out->len--;
    return 0;
}

static int get_u32(struct ctx *c, struct fy_node *n, const char *what, uint32_t max, uint32_t *out)
{
    struct st_buf b;
    st_buf_init(&b);
    int rc = scalar(n, &b);
    char *end = NULL;
    unsigned long long v = 0;
    if (rc == 0) {
        errno = 0;
        v = strtoull(b.data, &end, 10);
    }
    if (rc != 0 || end == b.data || *end != '\0' || errno != 0 || v < 1 || v > max) {
        st_buf_release(&b);
        return fail(c, node_line(n), "%s must be an integer in [1, %u]", what, max);
    }
    st_buf_release(&b);
    *out = (uint32_t)v;
    return 0;
}

static int get_f64(struct ctx *c, struct fy_node *n, const char *what, double *out)
{
    struct st_buf b;
    st_buf_init(&b);
    int rc = scalar(n, &b);
    char *end = NULL;
    if (rc == 0) {
        errno = 0;
        *out = strtod(b.data, &end);
    }
    int bad = rc != 0 || end == b.data || *end != '\0' || errno != 0;
    st_buf_release(&b);
    return bad ? fail(c, node_line(n), "%s must be a number", what) : 0;
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
static int schema_line(struct fy_node *n, const char *text, size_t off)
{
    int line = node_line(n);
    for (size_t i = 0; i < off && text[i] != '\0'; i++) {
        line += text[i] == '\n';
    }
    return line;
}

static int parse_question(struct ctx *c, struct fy_node *q, uint32_t def_max,
                          struct st_suite_item *it)
{
    if (!fy_node_is_mapping(q)) {
        return fail(c, node_line(q), "a question must be a mapping");
    }
    it->line = node_line(q);
    st_check_step_init(&it->step);
    struct st_check_step *s = &it->step;
    s->max_tokens = def_max;
    void *iter = NULL;
    struct fy_node_pair *p;
    struct st_buf k, prompt, vname, answer, expect;
    st_buf_init(&k);
    st_buf_init(&prompt);
    st_buf_init(&vname);
    st_buf_init(&answer);
    st_buf_init(&expect);
    struct fy_node *schema_node = NULL, *verify_node = NULL, *answer_node = NULL;
    int have_tol = 0, have_expect = 0, rc = 0;
    while (rc == 0 && (p = fy_node_mapping_iterate(q, &iter)) != NULL) {
        struct fy_node *kn = fy_node_pair_key(p), *vn = fy_node_pair_value(p);
        if (scalar(kn, &k) != 0 || !known(question_keys, k.data)) {
            rc = fail(c, node_line(kn), "unknown question key '%s'", k.data ? k.data : "?");
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
            if (scalar(vn, &nb) != 0 || nb.len == 0 || nb.len >= sizeof(it->name) ||
                strspn(nb.data,
                       "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
                    nb.len) {
                /* The name goes into request ids (a header) and receipts: plain characters. */
                rc = fail(c, node_line(vn), "name must be 1 to 63 of A-Z a-z 0-9 . _ -");
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
        if (scalar(vn, dst) != 0) {
            rc = fail(c, node_line(vn), "%s must be a string", k.data);
        }
    }
    if (rc == 0 && it->name[0] == '\0') {
        rc = fail(c, it->line, "a question needs a name");
    }
    if (rc == 0 && prompt.len == 0) {
        rc = fail(c, it->line, "question '%s' needs a prompt", it->name);
    }
    if (rc == 0 && verify_node == NULL) {
        rc = fail(c, it->line, "question '%s' needs verify: exact, regex, numeric, schema or code",
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
            rc = fail(c, node_line(verify_node),
                      "unknown verifier '%s' (exact, regex, numeric, schema or code)", vname.data);
        }
    }
    if (rc == 0) {
        s->v.kind = (enum st_verify_kind)kind;
        switch (s->v.kind) {
        case ST_VERIFY_EXACT:
            if (answer_node == NULL) {
                rc = fail(c, it->line, "an exact question needs an answer");
            } else {
                st_buf_append(&s->v.want, answer.data, answer.len);
                st_buf_putc(&s->v.want, '\0');
                s->v.want.len--;
            }
            break;
        case ST_VERIFY_NUMERIC:
            if (answer_node == NULL) {
                rc = fail(c, it->line, "a numeric question needs a numeric answer");
            } else if (get_f64(c, answer_node, "answer", &s->v.num) != 0) {
                rc = ST_EPARSE;
            } else if (!have_tol || s->v.tol < 0) {
                rc = fail(c, it->line, "a numeric question needs tolerance >= 0");
            }
            break;
        case ST_VERIFY_REGEX: {
            regex_t re;
            if (s->v.want.len == 0 || regcomp(&re, s->v.want.data, REG_EXTENDED | REG_NOSUB) != 0) {
                rc = fail(c, it->line, "question '%s': pattern missing or not a POSIX ERE",
                          it->name);
            } else {
                regfree(&re);
            }
            break;
        }
        case ST_VERIFY_SCHEMA: {
            struct st_schema *sc;
            struct st_schema_diag d;
            if (schema_node == NULL) {
                rc = fail(c, it->line, "a schema question needs a schema");
            } else if (st_schema_compile(s->v.want.data, s->v.want.len, &sc, &d) != 0) {
                size_t off = d.offset == (size_t)-1 ? 0 : d.offset;
                rc = fail(c, schema_line(schema_node, s->v.want.data, off),
                          "bad schema at '%s': %s", d.path, d.msg);
            } else {
                st_schema_free(sc);
            }
            break;
        }
        case ST_VERIFY_CODE:
            if (s->v.want.len == 0) {
                rc = fail(c, it->line, "a code question needs tests");
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
            rc = fail(c, it->line, "question '%s' (%s) needs expect: an answer that passes",
                      it->name, vname.data);
        }
        st_buf_putc(&s->expect, '\0');
        s->expect.len--;
        for (size_t i = 0; rc == 0 && i < s->expect.len; i++) {
            unsigned char ch = (unsigned char)s->expect.data[i];
            if (ch < 0x20 || ch == 0x7f) {
                /* It travels in the X-Servetune-Expect header. */
                rc = fail(c, it->line,
                          "question '%s': expect must be one line without control "
                          "characters",
                          it->name);
            }
        }
        if (rc == 0 && s->expect.len > 4096) {
            rc = fail(c, it->line, "question '%s': expect is over 4096 bytes", it->name);
        }
        if (rc == 0 && s->v.kind != ST_VERIFY_CODE) {
            char ev[256];
            if (st_verify(&s->v, s->expect.data, s->expect.len, ev, sizeof(ev)) != 1) {
                rc = fail(c, it->line, "question '%s': expect fails its own verifier: %s", it->name,
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

static int parse_root(struct ctx *c, struct fy_node *root, struct st_suite *s)
{
    if (root == NULL || !fy_node_is_mapping(root)) {
        return fail(c, node_line(root), "a suite is a mapping with checks: and/or questions:");
    }
    uint32_t def_max = 4096;
    struct fy_node *mt = fy_node_mapping_lookup_by_string(root, "max_tokens", -1);
    if (mt != NULL && get_u32(c, mt, "max_tokens", 1u << 20, &def_max) != 0) {
        return ST_EPARSE;
    }
    void *iter = NULL;
    struct fy_node_pair *p;
    struct st_buf k;
    st_buf_init(&k);
    int rc = 0;
    while (rc == 0 && (p = fy_node_mapping_iterate(root, &iter)) != NULL) {
        struct fy_node *kn = fy_node_pair_key(p), *vn = fy_node_pair_value(p);
        if (scalar(kn, &k) != 0) {
            rc = fail(c, node_line(kn), "keys must be strings");
        } else if (strcmp(k.data, "suite") == 0) {
            struct st_buf nb;
            st_buf_init(&nb);
            if (scalar(vn, &nb) != 0 || nb.len == 0 || nb.len >= sizeof(s->name)) {
                rc = fail(c, node_line(vn), "suite must be a name of 1 to 63 bytes");
            } else {
                memcpy(s->name, nb.data, nb.len + 1);
            }
            st_buf_release(&nb);
        } else if (strcmp(k.data, "max_tokens") == 0) {
            continue;
        } else if (strcmp(k.data, "checks") == 0 || strcmp(k.data, "questions") == 0) {
            int checks = k.data[0] == 'c';
            if (vn == NULL || !fy_node_is_sequence(vn)) {
                rc = fail(c, node_line(vn ? vn : kn), "%s must be a list", k.data);
                break;
            }
            void *si = NULL;
            struct fy_node *e;
            while (rc == 0 && (e = fy_node_sequence_iterate(vn, &si)) != NULL) {
                if (s->n >= ST_SUITE_MAX_ITEMS) {
                    rc = fail(c, node_line(e), "more than %d items", ST_SUITE_MAX_ITEMS);
                    break;
                }
                struct st_suite_item *it = add_item(s);
                if (checks) {
                    struct st_buf nb;
                    st_buf_init(&nb);
                    it->builtin = 1;
                    it->line = node_line(e);
                    if (scalar(e, &nb) != 0 || st_check_kind_of(nb.data, &it->kind) != 0) {
                        rc = fail(c, it->line, "unknown check '%s'", nb.data ? nb.data : "?");
                    } else {
                        snprintf(it->name, sizeof(it->name), "%s", nb.data);
                    }
                    st_buf_release(&nb);
                } else {
                    rc = parse_question(c, e, def_max, it);
                }
            }
        } else {
            rc = fail(c, node_line(kn), "unknown key '%s' (suite, max_tokens, checks, questions)",
                      k.data);
        }
    }
    st_buf_release(&k);
    if (rc == 0 && s->n == 0) {
        rc = fail(c, 0, "the suite has no checks and no questions");
    }
    for (uint32_t i = 0; rc == 0 && i < s->n; i++) {
        for (uint32_t j = 0; j < i; j++) {
            if (strcmp(s->items[i].name, s->items[j].name) == 0) {
                rc = fail(c, s->items[i].line, "'%s' is named twice", s->items[i].name);
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
    struct ctx c = {.fname = fname, .err = err, .errlen = errlen};
    if (len > ST_SUITE_MAX_BYTES) {
        snprintf(err, errlen, "%s: larger than %u bytes", fname, ST_SUITE_MAX_BYTES);
        return ST_ETOOBIG;
    }
    /* libfyaml 0.7 accepts (or, on some inputs, loops forever on) invalid UTF-8 and control bytes:
     * a suite is text, so refuse them here, naming the line. */
    uint32_t bad_line = 0;
    unsigned char bad = 0;
    int trc = st_text_check(text, len, &bad_line, &bad);
    if (trc == ST_EPARSE) {
        snprintf(err, errlen, "%s:%u: control byte 0x%02x; expected UTF-8 text", fname, bad_line,
                 bad);
        return ST_EPARSE;
    }
    if (trc) {
        snprintf(err, errlen, "%s:%u: not valid UTF-8; expected UTF-8 text", fname, bad_line);
        return ST_EPARSE;
    }
    struct fy_diag_cfg dcfg;
    fy_diag_cfg_default(&dcfg);
    dcfg.fp = NULL;
    dcfg.output_fn = diag_output;
    dcfg.user = &c;
    dcfg.level = FYET_ERROR;
    dcfg.colorize = false;
    struct fy_diag *diag = fy_diag_create(&dcfg);
    if (diag == NULL) {
        snprintf(err, errlen, "%s: out of memory", fname);
        return -ENOMEM;
    }
    struct fy_parse_cfg pcfg;
    memset(&pcfg, 0, sizeof(pcfg));
    pcfg.flags = FYPCF_QUIET;
    pcfg.diag = diag;
    struct fy_parser *fyp = fy_parser_create(&pcfg);
    struct fy_document *doc = NULL;
    int rc = 0;
    if (fyp == NULL || fy_parser_set_string(fyp, len ? text : "", len) != 0) {
        snprintf(err, errlen, "%s: out of memory", fname);
        rc = -ENOMEM;
    } else {
        doc = fy_parse_load_document(fyp);
        if (fy_diag_got_error(diag) || doc == NULL) {
            /* libfyaml's line reads "<memory>:L:C: error: text". */
            const char *m = c.diag[0] ? c.diag : "invalid or empty YAML";
            const char *e = strstr(m, ": error: ");
            int line = 0;
            if (e != NULL) {
                const char *q = e;
                while (q > m && q[-1] != ':') {
                    q--;
                }
                const char *l = q - 1;
                while (l > m && l[-1] >= '0' && l[-1] <= '9') {
                    l--;
                }
                line = (int)strtol(l, NULL, 10);
                m = e + strlen(": error: ");
            }
            rc = fail(&c, line, "%s", m);
        } else {
            rc = parse_root(&c, fy_document_root(doc), s);
        }
    }
    if (doc != NULL) {
        fy_parse_document_destroy(fyp, doc);
    }
    if (fyp != NULL) {
        fy_parser_destroy(fyp);
    }
    fy_diag_unref(diag);
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
