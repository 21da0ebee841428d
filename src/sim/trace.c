/*
 * --trace writer. See trace.h. Lines are assembled in a small stack buffer with hand-rolled
 * integer formatting (a trace of a million events a second must not cost more than the events),
 * then handed to a fully buffered FILE.
 */
#include "sim/trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"
#include "sim/spec.h"

#define TRACE_STDIO_BUF (1u << 20)
/* The longest request id kept in a line; longer ones are cut by the caller (server.c). */
#define TRACE_LINE_MAX 1536u

struct st_sim_trace {
    FILE *f;    /* owned */
    char *vbuf; /* owned: the stdio buffer */
    int err;    /* first failure, negated errno */
};

static const char *const kind_names[] = {
    "headers", "role", "content", "finish", "usage", "done", "error", "comment", "close",
};

const char *st_sim_kind_name(enum st_sim_kind k)
{
    if ((unsigned)k >= sizeof(kind_names) / sizeof(kind_names[0])) {
        return "unknown";
    }
    return kind_names[k];
}

int st_sim_trace_open(const char *path, struct st_sim_trace **out)
{
    FILE *f = fopen(path, "we");
    if (!f) {
        return -errno;
    }
    struct st_sim_trace *t = st_xcalloc(1, sizeof(*t));
    t->f = f;
    t->vbuf = st_xmalloc(TRACE_STDIO_BUF);
    setvbuf(f, t->vbuf, _IOFBF, TRACE_STDIO_BUF);
    *out = t;
    return 0;
}

static char *put_str(char *p, const char *s)
{
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}

/* Starts a line with {"rid":<rid_json>, the id cut at TRACE_LINE_MAX (the caller keeps ids far
 * shorter; never overflow). */
static char *put_rid(char *line, const char *rid_json, size_t rid_len)
{
    if (rid_len > TRACE_LINE_MAX) {
        rid_len = TRACE_LINE_MAX;
    }
    char *p = put_str(line, "{\"rid\":");
    memcpy(p, rid_json, rid_len);
    return p + rid_len;
}

static void emit(struct st_sim_trace *t, const char *line, size_t n)
{
    if (fwrite(line, 1, n, t->f) != n && t->err == 0) {
        t->err = errno ? -errno : -EIO;
    }
}

/* Appends key (its comma, quotes and colon included) then v. */
static char *put_field(char *p, const char *key, uint64_t v)
{
    p = put_str(p, key);
    return p + st_sim_put_u64(p, v);
}

void st_sim_trace_arrive(struct st_sim_trace *t, const char *rid_json, size_t rid_len,
                         uint64_t t_ns)
{
    char line[TRACE_LINE_MAX + 128];
    char *p = put_str(put_rid(line, rid_json, rid_len), ",\"kind\":\"arrive\"");
    p = put_str(put_field(p, ",\"t_ns\":", t_ns), "}\n");
    emit(t, line, (size_t)(p - line));
}

void st_sim_trace_event(struct st_sim_trace *t, const char *rid_json, size_t rid_len, uint64_t seq,
                        uint64_t q_ns, uint64_t t_ns, enum st_sim_kind kind, uint64_t tokens,
                        uint64_t bytes)
{
    char line[TRACE_LINE_MAX + 192];
    char *p = put_field(put_rid(line, rid_json, rid_len), ",\"seq\":", seq);
    p = put_field(put_field(p, ",\"q_ns\":", q_ns), ",\"t_ns\":", t_ns);
    p = put_str(put_str(put_str(p, ",\"kind\":\""), st_sim_kind_name(kind)), "\"");
    p = put_field(put_field(p, ",\"tokens\":", tokens), ",\"bytes\":", bytes);
    p = put_str(p, "}\n");
    emit(t, line, (size_t)(p - line));
}

int st_sim_trace_close(struct st_sim_trace *t)
{
    if (!t) {
        return 0;
    }
    int rc = t->err;
    if (fflush(t->f) != 0 && rc == 0) {
        rc = -errno;
    }
    if (fclose(t->f) != 0 && rc == 0) {
        rc = -errno;
    }
    free(t->vbuf);
    free(t);
    return rc;
}
