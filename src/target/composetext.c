/*
 * The compose backend's pure rules (declared in compose.h, tested by
 * tests/e2e/test_campaign_compose_c.c and fuzz/fuzz_compose.c): word lists, splitting a command
 * string as a shell would for simple quoting, the words of a plan value, the rewrite of one
 * "--flag" in a command, and the reading of docker inspect's answer (bytes in, fields out). No
 * I/O; compose.c (the docker calls, the override file) uses them.
 */
#include "target/compose.h"

#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
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

/* ---- docker inspect ---- */

enum ifield_kind {
    IF_BOOL = 1, /* int: the value is JSON true */
    IF_I64 = 2,  /* int64_t, 0 when absent */
    IF_STR = 3,  /* char[size], "" when absent or not a string */
};

#define IFIELD(key, kind, member, ...)                                                             \
    {                                                                                              \
        key, {__VA_ARGS__}, kind, offsetof(struct st_compose_inspect, member),                     \
            sizeof(((struct st_compose_inspect *)0)->member)                                       \
    }

/* Each field of struct st_compose_inspect: its name in the evidence (in this order) and its keys
 * in docker inspect's container object. The parser reads them, st_compose_inspect_json writes
 * them. */
static const struct ifield {
    const char *key;
    const char *path[3]; /* NULL-terminated when shorter */
    enum ifield_kind kind;
    size_t off, size;
} inspect_fields[] = {
    IFIELD("status", IF_STR, status, "State", "Status"),
    IFIELD("running", IF_BOOL, running, "State", "Running"),
    IFIELD("oom_killed", IF_BOOL, oom_killed, "State", "OOMKilled"),
    IFIELD("exit_code", IF_I64, exit_code, "State", "ExitCode"),
    IFIELD("pid", IF_I64, pid, "State", "Pid"),
    IFIELD("health", IF_STR, health, "State", "Health", "Status"),
    IFIELD("restart_policy", IF_STR, restart, "HostConfig", "RestartPolicy", "Name"),
    IFIELD("image", IF_STR, image, "Image"),
    IFIELD("config_image", IF_STR, config_image, "Config", "Image"),
    IFIELD("restarting", IF_BOOL, restarting, "State", "Restarting"),
    IFIELD("restart_count", IF_I64, restart_count, "RestartCount"),
    IFIELD("started_at", IF_STR, started_at, "State", "StartedAt"),
};

void st_compose_inspect_json(struct st_jw *w, const struct st_compose_inspect *in)
{
    st_jw_obj_open(w);
    for (size_t i = 0; i < sizeof(inspect_fields) / sizeof(inspect_fields[0]); i++) {
        const struct ifield *f = &inspect_fields[i];
        const char *v = (const char *)in + f->off;
        if (f->kind == IF_BOOL) {
            st_jw_kbool(w, f->key, *(const int *)(const void *)v);
        } else if (f->kind == IF_I64) {
            st_jw_ki64(w, f->key, *(const int64_t *)(const void *)v);
        } else {
            st_jw_kstr(w, f->key, v);
        }
    }
}

void st_compose_json_str(const struct st_json *d, int i, char *dst, size_t len)
{
    dst[0] = '\0';
    if (st_json_type(d, i) != ST_JSON_STRING) {
        return;
    }
    struct st_buf b;
    st_buf_init(&b);
    if (st_json_str(d, i, &b) == 0) {
        snprintf(dst, len, "%s", st_buf_str(&b));
    }
    st_buf_release(&b);
}

/* Writes key: the strings of array arr (names_only: each cut at its first '=', NAME=VALUE's
 * name) through w. */
static void jw_strings(struct st_jw *w, const char *key, const struct st_json *d, int arr,
                       int names_only)
{
    st_jw_key(w, key);
    st_jw_arr_open(w);
    for (int i = st_json_first(d, arr); i >= 0; i = st_json_next(d, arr, i)) {
        char s[1024];
        st_compose_json_str(d, i, s, sizeof(s));
        if (names_only) {
            s[strcspn(s, "=")] = '\0';
        }
        st_jw_str(w, s);
    }
    st_jw_arr_close(w);
}

int st_compose_inspect_parse(const char *text, size_t len, struct st_compose_inspect *in,
                             struct st_jw *w)
{
    memset(in, 0, sizeof(*in));
    struct st_json d;
    st_json_init(&d, 0);
    int rc = st_json_parse(&d, text, len);
    int o = rc == 0 ? st_json_at(&d, 0, 0) : -1;
    if (rc != 0 || st_json_type(&d, o) != ST_JSON_OBJECT) {
        st_json_release(&d);
        return ST_EPARSE;
    }
    for (size_t f = 0; f < sizeof(inspect_fields) / sizeof(inspect_fields[0]); f++) {
        const struct ifield *fd = &inspect_fields[f];
        int i = o;
        for (size_t k = 0; k < 3 && fd->path[k]; k++) {
            i = st_json_get(&d, i, fd->path[k]);
        }
        char *v = (char *)in + fd->off;
        if (fd->kind == IF_BOOL) {
            *(int *)(void *)v = st_json_type(&d, i) == ST_JSON_TRUE;
        } else if (fd->kind == IF_I64) {
            int64_t n = 0;
            *(int64_t *)(void *)v = st_json_i64(&d, i, &n) == 0 ? n : 0;
        } else {
            st_compose_json_str(&d, i, v, fd->size);
        }
    }
    int cfg = st_json_get(&d, o, "Config");
    if (w) {
        st_compose_inspect_json(w, in);
        jw_strings(w, "cmd", &d, st_json_get(&d, cfg, "Cmd"), 0);
        jw_strings(w, "env_names", &d, st_json_get(&d, cfg, "Env"), 1);
        st_jw_obj_close(w);
    }
    st_json_release(&d);
    return 0;
}
