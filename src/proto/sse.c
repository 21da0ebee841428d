/*
 * Incremental SSE parser. See sse.h for the contract and docs/internals/proto.md for the states.
 *
 * Hot path: a whole `data: {...}\n\n` event inside one piece is delivered as a pointer into the
 * piece, with no copy. The first data line of an event is only remembered (pend) until the blank
 * line; it is copied into p->data when a second data line arrives or the piece ends first. Only an
 * unfinished line is carried in p->line. Line ends are found with memchr, and the next LF and CR
 * offsets are cached, so a piece is scanned a small constant number of times whatever its line
 * ends.
 */
#include "proto/sse.h"

#include <string.h>

/* State of one st_sse_feed call. pend borrows from the piece being fed. */
struct feed {
    struct st_sse *p;
    st_sse_event_cb cb;
    void *ctx;
    const char *pend; /* the event's only data line so far, still in the piece; NULL if none */
    size_t pend_len;
};

void st_sse_init(struct st_sse *p, size_t max_event_bytes)
{
    /* Every field but the bound starts at zero. */
    *p = (struct st_sse){.max_event_bytes =
                             max_event_bytes ? max_event_bytes : ST_SSE_MAX_EVENT_DEFAULT};
    st_buf_init(&p->line);
    st_buf_init(&p->data);
}

void st_sse_release(struct st_sse *p)
{
    st_buf_release(&p->line);
    st_buf_release(&p->data);
    p->have_data = 0;
    p->skip_lf = 0;
}

static void reset_event(struct feed *f)
{
    st_buf_clear(&f->p->data);
    f->p->have_data = 0;
    f->p->has_vt = 0;
    f->pend = NULL;
    f->pend_len = 0;
}

/* Bytes of data the current event holds so far. */
static size_t event_bytes(const struct feed *f)
{
    return f->pend ? f->pend_len : f->p->data.len;
}

/* Moves a remembered data line from the piece into p->data (the piece is about to go away). */
static void flush_pend(struct feed *f)
{
    if (f->pend) {
        st_buf_append(&f->p->data, f->pend, f->pend_len);
        f->pend = NULL;
        f->pend_len = 0;
    }
}

static int dispatch(struct feed *f)
{
    struct st_sse *p = f->p;
    if (!p->have_data) {
        reset_event(f);
        return 0;
    }
    const char *data = f->pend ? f->pend : st_buf_str(&p->data);
    size_t len = f->pend ? f->pend_len : p->data.len;
    p->events++;
    int rc = f->cb(f->ctx, data, len);
    reset_event(f);
    return rc;
}

static void add_data(struct feed *f, const char *v, size_t n, int in_piece)
{
    struct st_sse *p = f->p;
    if (!p->have_data) {
        p->have_data = 1;
        if (in_piece) {
            f->pend = v;
            f->pend_len = n;
        } else {
            st_buf_append(&p->data, v, n);
        }
        return;
    }
    flush_pend(f);
    st_buf_putc(&p->data, '\n');
    st_buf_append(&p->data, v, n);
}

/* Reads up to 19 digits at s[*i..n) into *v, after blanks. 0, or -1 when there are none. */
static int read_u64(const char *s, size_t n, size_t *i, uint64_t *v)
{
    while (*i < n && s[*i] == ' ') {
        (*i)++;
    }
    uint64_t x = 0;
    size_t k = 0;
    for (; *i < n && s[*i] >= '0' && s[*i] <= '9' && k < 19; (*i)++, k++) {
        x = x * 10 + (uint64_t)(s[*i] - '0');
    }
    *v = x;
    return k ? 0 : -1;
}

/* The simulator's stamp "vt: NS LAG" (docs/sim.md, "Virtual time"); anything else is ignored. */
static void vt_field(struct st_sse *p, const char *v, size_t n)
{
    size_t i = 0;
    uint64_t t, lag;
    if (read_u64(v, n, &i, &t) != 0 || read_u64(v, n, &i, &lag) != 0 || i != n) {
        return;
    }
    p->vt_ns = t;
    p->vt_lag_ns = lag;
    p->has_vt = 1;
}

/*
 * One complete line without its line end. in_piece says whether line points into the piece
 * (so it may be remembered instead of copied) or into p->line.
 */
static int on_line(struct feed *f, const char *line, size_t n, int in_piece)
{
    struct st_sse *p = f->p;
    if (n == 0) {
        return dispatch(f);
    }
    if (event_bytes(f) + n > p->max_event_bytes) {
        return ST_ETOOBIG;
    }
    if (line[0] == ':') {
        p->comments++;
        return 0;
    }
    /* Field "data": "data:VALUE", "data: VALUE" (one space stripped) or a bare "data". */
    if (n >= 4 && memcmp(line, "data", 4) == 0) {
        if (n == 4) {
            add_data(f, line, 0, in_piece);
        } else if (line[4] == ':') {
            size_t skip = (n > 5 && line[5] == ' ') ? 6 : 5;
            add_data(f, line + skip, n - skip, in_piece);
        }
    }
    if (n >= 3 && memcmp(line, "vt:", 3) == 0) {
        vt_field(p, line + 3, n - 3);
    }
    /* event:, id:, retry: and unknown fields are ignored. */
    return 0;
}

/* Offset of the first CR or LF in s[from..n), or n. *lf and *cr cache the next ones seen. */
static size_t find_eol(const char *s, size_t n, size_t from, size_t *lf, size_t *cr)
{
    if (*lf == SIZE_MAX || *lf < from) {
        const char *q = memchr(s + from, '\n', n - from);
        *lf = q ? (size_t)(q - s) : n;
    }
    if (*cr == SIZE_MAX || *cr < from) {
        const char *q = memchr(s + from, '\r', n - from);
        *cr = q ? (size_t)(q - s) : n;
    }
    return *lf < *cr ? *lf : *cr;
}

static int fail(struct feed *f, int rc)
{
    struct st_sse *p = f->p;
    if (rc == ST_ETOOBIG) {
        p->broken = 1;
    }
    /* A stop drops the rest of the piece: forget the event and any unfinished line. */
    st_buf_clear(&p->line);
    reset_event(f);
    return rc;
}

int st_sse_feed(struct st_sse *p, const char *buf, size_t len, st_sse_event_cb cb, void *ctx)
{
    if (p->broken) {
        return ST_ETOOBIG;
    }
    struct feed f = {.p = p, .cb = cb, .ctx = ctx, .pend = NULL, .pend_len = 0};
    size_t i = 0, lf = SIZE_MAX, cr = SIZE_MAX;
    int rc;

    p->bytes += len;
    if (p->skip_lf && len > 0) {
        p->skip_lf = 0;
        if (buf[0] == '\n') {
            i = 1;
        }
    }
    while (i < len) {
        size_t e = find_eol(buf, len, i, &lf, &cr);
        size_t n = e - i;
        if (e == len) {
            /* An unfinished line: carry it, within the bound. */
            if (event_bytes(&f) + p->line.len + n > p->max_event_bytes) {
                return fail(&f, ST_ETOOBIG);
            }
            st_buf_append(&p->line, buf + i, n);
            break;
        }
        size_t next = e + 1;
        if (buf[e] == '\r') {
            if (next < len) {
                next += buf[next] == '\n';
            } else {
                p->skip_lf = 1;
            }
        }
        if (p->line.len > 0) {
            /* The end of the line carried from earlier pieces. */
            if (event_bytes(&f) + p->line.len + n > p->max_event_bytes) {
                return fail(&f, ST_ETOOBIG);
            }
            st_buf_append(&p->line, buf + i, n);
            rc = on_line(&f, p->line.data, p->line.len, 0);
            st_buf_clear(&p->line);
        } else {
            rc = on_line(&f, buf + i, n, 1);
        }
        if (rc) {
            return fail(&f, rc);
        }
        i = next;
    }
    flush_pend(&f);
    return 0;
}

int st_sse_finish(struct st_sse *p, st_sse_event_cb cb, void *ctx)
{
    if (p->broken) {
        return ST_ETOOBIG;
    }
    struct feed f = {.p = p, .cb = cb, .ctx = ctx, .pend = NULL, .pend_len = 0};
    int rc;
    if (p->line.len > 0) {
        rc = ST_EPROTO;
        reset_event(&f);
    } else {
        rc = dispatch(&f);
    }
    st_buf_clear(&p->line);
    p->skip_lf = 0;
    return rc;
}
