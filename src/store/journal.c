/*
 * The campaign journal: checksummed append-only lines, validated and repaired (tail only) on
 * open. See journal.h and docs/internals/journal.md. The scanner and the unit bookkeeping are
 * pure functions of the bytes; only open, append, iter and close touch the file.
 */
#include "store/journal.h"

#include <sys/file.h>
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/crc32c.h"
#include "base/json.h"
#include "base/xalloc.h"

#define HEADER_KIND "journal"
#define HEADER_JSON "{\"format\":\"servetune-journal\",\"version\":1}"

/* parse_line() results besides 0. */
enum line_result {
    LINE_OK = 0,
    LINE_FRAME_BAD,   /* framing or CRC wrong: what a torn or corrupted write looks like */
    LINE_CONTENT_BAD, /* CRC right, content wrong: a writer bug, never a crash artefact */
};

static int hexval(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

static int kind_valid(const char *k, size_t n)
{
    if (n == 0 || n > ST_JOURNAL_MAX_KIND_BYTES) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char c = k[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
            return 0;
        }
    }
    return 1;
}

static int unit_id_valid(const char *s, size_t n)
{
    if (n == 0 || n > ST_JOURNAL_MAX_UNIT_BYTES) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x21 || c > 0x7e || c == '"' || c == '\\') {
            return 0;
        }
    }
    return 1;
}

static int kind_is(const struct st_journal_rec *rec, const char *k)
{
    size_t n = strlen(k);
    return rec->kind_len == n && memcmp(rec->kind, k, n) == 0;
}

/* Parses line[0..n) (without its LF) into rec; d is scratch for the JSON check. */
static enum line_result parse_line(const char *line, size_t n, struct st_json *d,
                                   struct st_journal_rec *rec)
{
    /* The shortest line is "xxxxxxxx 1 k 0": CRC, seq, kind and a one-byte JSON value. */
    if (n < 14 || line[8] != ' ') {
        return LINE_FRAME_BAD;
    }
    uint32_t want = 0;
    for (int i = 0; i < 8; i++) {
        int v = hexval(line[i]);
        if (v < 0) {
            return LINE_FRAME_BAD;
        }
        want = want << 4 | (uint32_t)v;
    }
    const char *body = line + 9;
    size_t blen = n - 9;
    if (st_crc32c(body, blen) != want) {
        return LINE_FRAME_BAD;
    }
    /* From here the bytes are what a writer wrote: anything wrong is content, not a tear. */
    size_t i = 0;
    uint64_t seq = 0;
    while (i < blen && body[i] >= '0' && body[i] <= '9') {
        uint64_t dgt = (uint64_t)(body[i] - '0');
        if (seq > (UINT64_MAX - dgt) / 10) {
            return LINE_CONTENT_BAD;
        }
        seq = seq * 10 + dgt;
        i++;
    }
    if (i == 0 || (i > 1 && body[0] == '0') || i >= blen || body[i] != ' ') {
        return LINE_CONTENT_BAD;
    }
    size_t k0 = ++i;
    while (i < blen && body[i] != ' ') {
        i++;
    }
    if (i >= blen || !kind_valid(body + k0, i - k0)) {
        return LINE_CONTENT_BAD;
    }
    rec->seq = seq;
    rec->kind = body + k0;
    rec->kind_len = i - k0;
    rec->json = body + i + 1;
    rec->json_len = blen - i - 1;
    rec->unit = NULL;
    rec->state = ST_JOURNAL_LIVE;
    if (rec->json_len > ST_JOURNAL_MAX_JSON_BYTES ||
        st_json_parse(d, rec->json, rec->json_len) != 0) {
        return LINE_CONTENT_BAD;
    }
    return LINE_OK;
}

/* Appends the framed line (with its LF) for one record to b. */
static void format_line(struct st_buf *b, uint64_t seq, const char *kind, const char *json,
                        size_t len)
{
    size_t start = b->len;
    st_buf_printf(b, "00000000 %" PRIu64 " %s ", seq, kind);
    st_buf_append(b, json, len);
    uint32_t crc = st_crc32c(b->data + start + 9, b->len - start - 9);
    char hex[9];
    snprintf(hex, sizeof(hex), "%08" PRIx32, crc);
    memcpy(b->data + start, hex, 8);
    st_buf_putc(b, '\n');
}

/* Copies the "unit" string of a unit record's JSON into out[ST_JOURNAL_MAX_UNIT_BYTES + 1]. */
static int unit_of(const struct st_journal_rec *rec, char *out)
{
    struct st_json d;
    st_json_init(&d, 0);
    int rc = ST_EPROTO;
    if (st_json_parse(&d, rec->json, rec->json_len) == 0 && st_json_type(&d, 0) == ST_JSON_OBJECT) {
        int v = st_json_get(&d, 0, "unit");
        if (v >= 0 && st_json_type(&d, v) == ST_JSON_STRING &&
            !(d.toks[v].flags & ST_JSON_F_ESCAPED)) {
            size_t n;
            const char *raw = st_json_raw(&d, v, &n);
            if (unit_id_valid(raw, n)) {
                memcpy(out, raw, n);
                out[n] = '\0';
                rc = 0;
            }
        }
    }
    st_json_release(&d);
    return rc;
}

void st_journal_units_init(struct st_journal_units *u)
{
    memset(u, 0, sizeof(*u));
}

void st_journal_units_release(struct st_journal_units *u)
{
    for (size_t i = 0; i < u->n_done; i++) {
        free(u->done[i].id);
    }
    free(u->done);
    free(u->voided);
    free(u->open_id);
    memset(u, 0, sizeof(*u));
}

static const struct st_journal_done *find_done(const struct st_journal_units *u, const char *id)
{
    /* Linear: a campaign has hundreds to a few thousand units, begun once each. */
    for (size_t i = 0; i < u->n_done; i++) {
        if (strcmp(u->done[i].id, id) == 0) {
            return &u->done[i];
        }
    }
    return NULL;
}

int st_journal_units_apply(struct st_journal_units *u, const struct st_journal_rec *rec)
{
    int begin = kind_is(rec, "unit_begin"), end = kind_is(rec, "unit_end");
    int discard = kind_is(rec, "unit_discard");
    if (!begin && !end && !discard) {
        return 0;
    }
    char id[ST_JOURNAL_MAX_UNIT_BYTES + 1];
    if (unit_of(rec, id) != 0) {
        return ST_EPROTO;
    }
    if (begin) {
        if (u->open_id || find_done(u, id)) {
            return ST_EPROTO;
        }
        u->open_id = st_xstrdup(id);
        u->open_begin_seq = rec->seq;
        return 0;
    }
    if (!u->open_id || strcmp(u->open_id, id) != 0) {
        return ST_EPROTO;
    }
    if (end) {
        if (u->n_done == u->cap_done) {
            u->cap_done = u->cap_done ? 2 * u->cap_done : 16;
            u->done = st_xrealloc(u->done, u->cap_done * sizeof(*u->done));
        }
        u->done[u->n_done].id = u->open_id;
        u->done[u->n_done].end_seq = rec->seq;
        u->n_done++;
        u->open_id = NULL;
        return 0;
    }
    if (u->n_voided == u->cap_voided) {
        u->cap_voided = u->cap_voided ? 2 * u->cap_voided : 8;
        u->voided = st_xrealloc(u->voided, u->cap_voided * sizeof(*u->voided));
    }
    u->voided[u->n_voided++] = u->open_begin_seq;
    st_freep(&u->open_id);
    return 0;
}

/* The tail data[pos..len) starting at 1-based line: dropped when nothing valid follows. */
static int check_tail(const char *data, size_t len, size_t pos, uint64_t line, uint64_t records,
                      struct st_json *d, char *err, size_t errlen)
{
    if (records == 0) {
        /* Nothing valid at all: only a torn header (a crash while creating) may be dropped, so
         * that opening some other file by mistake never truncates it. */
        struct st_buf h;
        st_buf_init(&h);
        format_line(&h, 0, HEADER_KIND, HEADER_JSON, strlen(HEADER_JSON));
        int ok = len < h.len && memcmp(data, h.data, len) == 0;
        st_buf_release(&h);
        if (!ok) {
            st_errf(err, errlen, "line 1: not a servetune journal");
            return ST_EPROTO;
        }
        return 0;
    }
    if (len - pos > ST_JOURNAL_MAX_LINE_BYTES) {
        st_errf(err, errlen,
                "line %" PRIu64 ": corrupt, and the %zu bytes from it are more than a record", line,
                len - pos);
        return ST_EPROTO;
    }
    const char *nl = memchr(data + pos, '\n', len - pos);
    uint64_t ln = line;
    while (nl) {
        size_t p = (size_t)(nl - data) + 1;
        ln++;
        const char *next = memchr(data + p, '\n', len - p);
        if (!next) {
            break;
        }
        struct st_journal_rec rec;
        if (parse_line(data + p, (size_t)(next - data) - p, d, &rec) != LINE_FRAME_BAD) {
            st_errf(err, errlen,
                    "line %" PRIu64 ": corrupt record followed by a valid one at line %" PRIu64,
                    line, ln);
            return ST_EPROTO;
        }
        nl = next;
    }
    return 0;
}

int st_journal_scan(const char *data, size_t len, struct st_journal_units *u, st_journal_rec_cb cb,
                    void *ctx, struct st_journal_scan *out, char *err, size_t errlen)
{
    struct st_json d;
    st_json_init(&d, 0);
    memset(out, 0, sizeof(*out));
    int rc = 0;
    size_t pos = 0;
    uint64_t k = 0;
    while (pos < len) {
        size_t avail = len - pos;
        if (avail > ST_JOURNAL_MAX_LINE_BYTES + 1) {
            avail = ST_JOURNAL_MAX_LINE_BYTES + 1;
        }
        const char *nl = memchr(data + pos, '\n', avail);
        if (!nl) {
            break;
        }
        size_t n = (size_t)(nl - (data + pos));
        struct st_journal_rec rec;
        enum line_result r = parse_line(data + pos, n, &d, &rec);
        if (r == LINE_FRAME_BAD) {
            break;
        }
        if (r == LINE_CONTENT_BAD) {
            st_errf(err, errlen, "line %" PRIu64 ": checksum matches but the record is malformed",
                    k + 1);
            rc = ST_EPROTO;
            goto out;
        }
        rec.line = k + 1;
        if (rec.seq != k) {
            st_errf(err, errlen, "line %" PRIu64 ": seq %" PRIu64 ", expected %" PRIu64, k + 1,
                    rec.seq, k);
            rc = ST_EPROTO;
            goto out;
        }
        int header = kind_is(&rec, HEADER_KIND);
        if (k == 0 && (!header || rec.json_len != strlen(HEADER_JSON) ||
                       memcmp(rec.json, HEADER_JSON, rec.json_len) != 0)) {
            st_errf(err, errlen, "line 1: not a servetune journal (or an unknown version)");
            rc = ST_EPROTO;
            goto out;
        }
        if (k > 0 && header) {
            st_errf(err, errlen, "line %" PRIu64 ": a second header", k + 1);
            rc = ST_EPROTO;
            goto out;
        }
        if (u && st_journal_units_apply(u, &rec) != 0) {
            st_errf(err, errlen, "line %" PRIu64 ": breaks the unit rules", k + 1);
            rc = ST_EPROTO;
            goto out;
        }
        if (cb) {
            rc = cb(ctx, &rec);
            if (rc) {
                goto out;
            }
        }
        k++;
        pos += n + 1;
    }
    out->records = k;
    out->good_len = pos;
    if (pos < len) {
        out->bad_line = k + 1;
        rc = check_tail(data, len, pos, k + 1, k, &d, err, errlen);
        if (rc) {
            goto out;
        }
        out->tail_len = len - pos;
    }
out:
    st_json_release(&d);
    return rc;
}

static int read_all(int fd, size_t len, char **out)
{
    char *p = st_xmalloc(len ? len : 1);
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, p + got, len - got, (off_t)got);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            int rc = n < 0 ? -errno : ST_EPROTO;
            free(p);
            return rc;
        }
        got += (size_t)n;
    }
    *out = p;
    return 0;
}

static void fsync_dir_of(const char *path)
{
    char *copy = st_xstrdup(path);
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        /* Best effort: some filesystems refuse fsync on directories. */
        (void)fsync(fd);
        close(fd);
    }
    free(copy);
}

/* A failed write or fsync: cut the file back to its valid records and make the error sticky. */
static int fail(struct st_journal *j, int rc)
{
    j->error = rc;
    if (ftruncate(j->fd, (off_t)j->len) == 0) {
        (void)fsync(j->fd);
    }
    return rc;
}

/* Writes and fsyncs one framed record; kind and json are already validated. */
static int append_raw(struct st_journal *j, const char *kind, const char *json, size_t len)
{
    if (j->error) {
        return j->error;
    }
    if (j->fd < 0) {
        return -EBADF;
    }
    struct st_buf b;
    st_buf_init(&b);
    format_line(&b, j->next_seq, kind, json, len);
    int rc = 0;
    size_t off = 0;
    /* One write(2) for the line; a short write on a regular file means the disk or a limit is
     * full, and the retry reports which. */
    while (off < b.len) {
        ssize_t n = j->write_fn ? (ssize_t)j->write_fn(j->fd, b.data + off, b.len - off)
                                : write(j->fd, b.data + off, b.len - off);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            rc = fail(j, n < 0 ? -errno : -EIO);
            goto out;
        }
        off += (size_t)n;
    }
    if (fsync(j->fd) != 0) {
        /* After a failed fsync the page cache cannot be trusted to reach the disk. */
        rc = fail(j, -errno);
        goto out;
    }
    j->len += b.len;
    j->next_seq++;
out:
    st_buf_release(&b);
    return rc;
}

static int json_valid(const char *json, size_t len)
{
    if (len > ST_JOURNAL_MAX_JSON_BYTES) {
        return ST_ETOOBIG;
    }
    if (len == 0 || memchr(json, '\n', len)) {
        return ST_EPARSE;
    }
    struct st_json d;
    st_json_init(&d, 0);
    int rc = st_json_parse(&d, json, len) == 0 ? 0 : ST_EPARSE;
    st_json_release(&d);
    return rc;
}

int st_journal_open(struct st_journal *j, const char *path, char *err, size_t errlen)
{
    memset(j, 0, sizeof(*j));
    j->fd = -1;
    st_journal_units_init(&j->units);
    j->path = st_xstrdup(path);
    char *data = NULL;
    int rc = 0;
    j->fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (j->fd < 0) {
        rc = -errno;
        st_errf(err, errlen, "%s: %s", path, strerror(errno));
        goto out;
    }
    if (flock(j->fd, LOCK_EX | LOCK_NB) != 0) {
        rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
        st_errf(err, errlen, "%s: in use by another process", path);
        goto out;
    }
    struct stat st;
    if (fstat(j->fd, &st) != 0) {
        rc = -errno;
        goto out;
    }
    if ((uint64_t)st.st_size > ST_JOURNAL_MAX_FILE_BYTES) {
        rc = ST_ETOOBIG;
        st_errf(err, errlen, "%s: over %zu bytes", path, ST_JOURNAL_MAX_FILE_BYTES);
        goto out;
    }
    rc = read_all(j->fd, (size_t)st.st_size, &data);
    if (rc) {
        goto out;
    }
    struct st_journal_scan sc;
    rc = st_journal_scan(data, (size_t)st.st_size, &j->units, NULL, NULL, &sc, err, errlen);
    if (rc) {
        goto out;
    }
    j->next_seq = sc.records;
    j->len = sc.good_len;
    if (sc.tail_len) {
        j->dropped_bytes = sc.tail_len;
        j->dropped_line = sc.bad_line;
        if (ftruncate(j->fd, (off_t)sc.good_len) != 0 || fsync(j->fd) != 0) {
            rc = -errno;
            goto out;
        }
    }
    if (sc.records == 0) {
        rc = append_raw(j, HEADER_KIND, HEADER_JSON, strlen(HEADER_JSON));
        if (rc) {
            goto out;
        }
        fsync_dir_of(path);
    }
out:
    free(data);
    if (rc) {
        /* The first error is the one to report; close's would only repeat or follow it. */
        int close_rc = st_journal_close(j);
        (void)close_rc;
    }
    return rc;
}

int st_journal_append(struct st_journal *j, const char *kind, const char *json, size_t len)
{
    if (j->error) {
        return j->error;
    }
    size_t kl = strlen(kind);
    if (!kind_valid(kind, kl) || strcmp(kind, HEADER_KIND) == 0 || strncmp(kind, "unit_", 5) == 0) {
        return -EINVAL;
    }
    int rc = json_valid(json, len);
    if (rc) {
        return rc;
    }
    return append_raw(j, kind, json, len);
}

/* Appends a unit record {"unit":"<id>"[,"result":<json>]} and applies it. */
static int append_unit(struct st_journal *j, const char *kind, const char *unit, const char *result,
                       size_t rlen)
{
    struct st_buf b;
    st_buf_init(&b);
    st_buf_printf(&b, "{\"unit\":\"%s\"", unit);
    if (result) {
        st_buf_puts(&b, ",\"result\":");
        st_buf_append(&b, result, rlen);
    }
    st_buf_putc(&b, '}');
    uint64_t seq = j->next_seq;
    int rc = append_raw(j, kind, b.data, b.len);
    if (rc == 0) {
        struct st_journal_rec rec = {
            .seq = seq, .kind = kind, .kind_len = strlen(kind), .json = b.data, .json_len = b.len};
        /* Cannot fail: the caller checked the same rules against the same state. */
        rc = st_journal_units_apply(&j->units, &rec);
    }
    st_buf_release(&b);
    return rc;
}

int st_journal_unit_begin(struct st_journal *j, const char *unit)
{
    if (j->error) {
        return j->error;
    }
    if (!unit_id_valid(unit, strlen(unit))) {
        return -EINVAL;
    }
    if (j->units.open_id) {
        return -EBUSY;
    }
    if (find_done(&j->units, unit)) {
        return -EEXIST;
    }
    return append_unit(j, "unit_begin", unit, NULL, 0);
}

int st_journal_unit_end(struct st_journal *j, const char *unit, const char *result_json, size_t len)
{
    if (j->error) {
        return j->error;
    }
    if (!j->units.open_id || strcmp(j->units.open_id, unit) != 0) {
        return -EINVAL;
    }
    int rc = json_valid(result_json, len);
    if (rc) {
        return rc;
    }
    return append_unit(j, "unit_end", unit, result_json, len);
}

int st_journal_unit_discard(struct st_journal *j, const char *unit)
{
    if (j->error) {
        return j->error;
    }
    if (!j->units.open_id || strcmp(j->units.open_id, unit) != 0) {
        return -EINVAL;
    }
    return append_unit(j, "unit_discard", unit, NULL, 0);
}

enum st_journal_unit_state st_journal_unit_state(const struct st_journal *j, const char *unit)
{
    if (j->units.open_id && strcmp(j->units.open_id, unit) == 0) {
        return ST_JOURNAL_UNIT_OPEN;
    }
    return find_done(&j->units, unit) ? ST_JOURNAL_UNIT_DONE : ST_JOURNAL_UNIT_NONE;
}

const char *st_journal_open_unit(const struct st_journal *j)
{
    return j->units.open_id;
}

size_t st_journal_units_done(const struct st_journal *j)
{
    return j->units.n_done;
}

const char *st_journal_unit_done_id(const struct st_journal *j, size_t i)
{
    return i < j->units.n_done ? j->units.done[i].id : NULL;
}

struct iter_ctx {
    const struct st_journal_units *u;
    st_journal_rec_cb cb;
    void *ctx;
    int in_unit;
    uint64_t begin_seq;
    char unit[ST_JOURNAL_MAX_UNIT_BYTES + 1];
};

static int is_voided(const struct st_journal_units *u, uint64_t begin)
{
    size_t lo = 0, hi = u->n_voided;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (u->voided[mid] == begin) {
            return 1;
        }
        if (u->voided[mid] < begin) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return 0;
}

static int iter_one(void *arg, const struct st_journal_rec *rec)
{
    struct iter_ctx *c = arg;
    struct st_journal_rec r = *rec;
    if (kind_is(rec, "unit_begin")) {
        if (unit_of(rec, c->unit) != 0) {
            return ST_EPROTO;
        }
        c->in_unit = 1;
        c->begin_seq = rec->seq;
    }
    int closes = kind_is(rec, "unit_end") || kind_is(rec, "unit_discard");
    if (c->in_unit) {
        r.unit = c->unit;
        if (is_voided(c->u, c->begin_seq)) {
            r.state = ST_JOURNAL_VOID;
        } else if (c->u->open_id && c->u->open_begin_seq == c->begin_seq) {
            r.state = ST_JOURNAL_PARTIAL;
        }
    }
    if (closes) {
        c->in_unit = 0;
    }
    return c->cb(c->ctx, &r);
}

int st_journal_iter(struct st_journal *j, st_journal_rec_cb cb, void *ctx)
{
    if (j->fd < 0) {
        return -EBADF;
    }
    char *data = NULL;
    int rc = read_all(j->fd, j->len, &data);
    if (rc) {
        return rc;
    }
    struct iter_ctx c = {.u = &j->units, .cb = cb, .ctx = ctx};
    struct st_journal_scan sc;
    rc = st_journal_scan(data, j->len, NULL, iter_one, &c, &sc, NULL, 0);
    if (rc == 0 && (sc.tail_len != 0 || sc.records != j->next_seq)) {
        rc = ST_EPROTO;
    }
    free(data);
    return rc;
}

int st_journal_close(struct st_journal *j)
{
    int rc = j->error;
    if (j->fd >= 0) {
        if (close(j->fd) != 0 && !rc) {
            rc = -errno;
        }
        j->fd = -1;
    }
    st_freep(&j->path);
    st_journal_units_release(&j->units);
    return rc;
}
