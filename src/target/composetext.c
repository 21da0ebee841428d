/*
 * The compose backend's pure word rules (declared in compose.h, tested by
 * tests/e2e/test_campaign_compose_c.c and fuzz/fuzz_compose.c): word lists, splitting a command
 * string as a shell would for simple quoting, the words of a plan value and the rewrite of one
 * "--flag" in a command. No I/O; compose.c (the docker calls, the override file) uses them.
 */
#include "target/compose.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/status.h"
#include "base/xalloc.h"

int st_compose_split(const char *s, struct st_arm_argv *out, char *err, size_t errlen)
{
    struct st_buf w;
    st_buf_init(&w);
    int in_word = 0;
    for (const char *q = s;; q++) {
        char ch = *q;
        if (ch == '\0' || ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') {
            if (in_word) {
                st_arm_argv_pushn(out, w.data ? w.data : "", w.len);
                st_buf_clear(&w);
                in_word = 0;
            }
            if (ch == '\0') {
                break;
            }
            continue;
        }
        if (ch == '\\' && q[1] == '\n') { /* backslash-newline joins lines */
            q++;
            continue;
        }
        in_word = 1;
        if (ch == '\\') {
            if (q[1] == '\0') {
                st_buf_release(&w);
                st_errf(err, errlen, "command: a trailing backslash");
                return ST_EPARSE;
            }
            q++;
            st_buf_putc(&w, *q);
        } else if (ch == '\'') {
            const char *end = strchr(q + 1, '\'');
            if (!end) {
                st_buf_release(&w);
                st_errf(err, errlen, "command: an unterminated single quote");
                return ST_EPARSE;
            }
            st_buf_append(&w, q + 1, (size_t)(end - q - 1));
            q = end;
        } else if (ch == '"') {
            for (q++; *q != '"'; q++) {
                if (*q == '\0') {
                    st_buf_release(&w);
                    st_errf(err, errlen, "command: an unterminated double quote");
                    return ST_EPARSE;
                }
                if (*q == '\\' && q[1] != '\0' && strchr("\\\"$`", q[1])) {
                    q++;
                }
                st_buf_putc(&w, *q);
            }
        } else {
            st_buf_putc(&w, ch);
        }
    }
    st_buf_release(&w);
    return 0;
}

void st_compose_value_words(const char *value, struct st_arm_argv *out)
{
    size_t n = strlen(value);
    if (n < 2 || value[0] != '[' || value[n - 1] != ']') {
        st_arm_argv_push(out, value);
        return;
    }
    const char *p = value + 1, *end = value + n - 1;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        const char *a = p, *b = stop;
        while (a < b && isspace((unsigned char)*a)) {
            a++;
        }
        while (b > a && isspace((unsigned char)b[-1])) {
            b--;
        }
        if (b > a || comma) {
            st_arm_argv_pushn(out, a, (size_t)(b - a));
        }
        p = comma ? comma + 1 : end;
    }
}

/* A flag: "-x..." or "--x...", not a negative number such as -1 or -.5. */
static int is_flag(const char *w)
{
    if (w[0] != '-' || w[1] == '\0') {
        return 0;
    }
    return !(isdigit((unsigned char)w[1]) || w[1] == '.');
}

/* Replaces words [from, to) of a by the words of with (consumed: with is left empty). */
static void argv_splice(struct st_arm_argv *a, uint32_t from, uint32_t to, struct st_arm_argv *with)
{
    for (uint32_t i = from; i < to; i++) {
        free(a->v[i]);
    }
    uint32_t tail = a->n - to;
    uint32_t n = a->n - (to - from) + with->n;
    char **v = st_xmalloc((n + 1) * sizeof(*v));
    if (from > 0) {
        memcpy(v, a->v, from * sizeof(*v));
    }
    if (with->n > 0) {
        memcpy(v + from, with->v, with->n * sizeof(*v));
    }
    if (tail > 0) {
        memcpy(v + from + with->n, a->v + to, tail * sizeof(*v));
    }
    v[n] = NULL;
    free(a->v);
    free(with->v);
    with->v = NULL;
    with->n = 0;
    a->v = v;
    a->n = n;
}

uint32_t st_compose_rewrite(struct st_arm_argv *cmd, const char *name, const char *value,
                            int append)
{
    struct st_buf flag;
    st_buf_init(&flag);
    st_buf_puts(&flag, "--");
    for (const char *q = name; *q; q++) {
        st_buf_putc(&flag, *q == '_' ? '-' : *q);
    }
    const char *f = st_buf_str(&flag);
    uint32_t replaced = 0;
    for (uint32_t i = 0; i < cmd->n; i++) {
        const char *w = cmd->v[i];
        int eq = strncmp(w, f, flag.len) == 0 && w[flag.len] == '=';
        if (strcmp(w, f) != 0 && !eq) {
            continue;
        }
        uint32_t j = i + 1;
        while (!eq && j < cmd->n && !is_flag(cmd->v[j])) {
            j++;
        }
        struct st_arm_argv with = {0};
        st_arm_argv_push(&with, f);
        st_compose_value_words(value, &with);
        uint32_t added = with.n;
        argv_splice(cmd, i, j, &with);
        i += added - 1;
        replaced++;
    }
    if (replaced == 0 && append) {
        st_arm_argv_push(cmd, f);
        st_compose_value_words(value, cmd);
    }
    st_buf_release(&flag);
    return replaced;
}
