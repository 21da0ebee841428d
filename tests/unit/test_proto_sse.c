/*
 * Tests for src/proto/sse.c: the real llama-server transcripts of both versions
 * (tests/data/wire/llamacpp-v0.5.0 and llamacpp-b4748) rebuilt into SSE bodies and fed whole, split
 * at every byte boundary, one byte at a time, and with CRLF and CR line ends; then the corner cases
 * one by one: comments, line ends split across pieces, multi-line data, fields, finish, bounds,
 * stop values, zero copy.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "proto/sse.h"

/* ---- event recording ---- */

struct evlist {
    char **ev; /* owned copies */
    size_t *len;
    size_t n, cap;
};

static void evlist_free(struct evlist *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->ev[i]);
    }
    free(l->ev);
    free(l->len);
    memset(l, 0, sizeof(*l));
}

static int collect_cb(void *ctx, const char *data, size_t len)
{
    struct evlist *l = ctx;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->ev = realloc(l->ev, l->cap * sizeof(*l->ev));
        l->len = realloc(l->len, l->cap * sizeof(*l->len));
        assert_non_null(l->ev);
        assert_non_null(l->len);
    }
    l->ev[l->n] = malloc(len + 1);
    assert_non_null(l->ev[l->n]);
    memcpy(l->ev[l->n], data, len);
    l->ev[l->n][len] = '\0';
    l->len[l->n] = len;
    l->n++;
    return 0;
}

/* Compares each delivered event with the expected list as it arrives (no copies). */
struct checker {
    const struct evlist *want;
    size_t next;
    long first_bad; /* index of the first event that differs, or -1 */
};

static int check_cb(void *ctx, const char *data, size_t len)
{
    struct checker *c = ctx;
    if (c->first_bad < 0 && (c->next >= c->want->n || c->want->len[c->next] != len ||
                             memcmp(c->want->ev[c->next], data, len) != 0)) {
        c->first_bad = (long)c->next;
    }
    c->next++;
    return 0;
}

/* Feeds body whole and finishes; returns the combined status (first non-zero). */
static int parse_whole(const char *body, size_t n, struct evlist *out)
{
    struct st_sse p;
    st_sse_init(&p, 0);
    int rc = st_sse_feed(&p, body, n, collect_cb, out);
    int rc2 = st_sse_finish(&p, collect_cb, out);
    st_sse_release(&p);
    return rc ? rc : rc2;
}

/*
 * Feeds body in pieces ending at the offsets cuts[0..ncuts) (then the rest), finishes, and checks
 * the events and status against want/want_rc. Pieces are copied into their own heap blocks so
 * that ASan catches any read of a piece after its feed returned.
 */
static void check_split(const char *body, size_t n, const size_t *cuts, size_t ncuts,
                        const struct evlist *want, int want_rc, const char *what)
{
    struct st_sse p;
    struct checker c = {.want = want, .next = 0, .first_bad = -1};
    int rc = 0;
    size_t at = 0;
    st_sse_init(&p, 0);
    for (size_t k = 0; k <= ncuts && rc == 0; k++) {
        size_t end = k < ncuts ? cuts[k] : n;
        char *piece = malloc(end - at + 1);
        assert_non_null(piece);
        memcpy(piece, body + at, end - at);
        rc = st_sse_feed(&p, piece, end - at, check_cb, &c);
        free(piece);
        at = end;
    }
    if (rc == 0) {
        rc = st_sse_finish(&p, check_cb, &c);
    }
    st_sse_release(&p);
    if (c.first_bad >= 0 || c.next != want->n || rc != want_rc) {
        fail_msg("%s: cut at %zu (of %zu cuts): %zu events, want %zu; first differing event %ld; "
                 "rc %d, want %d",
                 what, ncuts ? cuts[0] : 0, ncuts, c.next, want->n, c.first_bad, rc, want_rc);
    }
}

/* Every two-piece split, then one byte at a time. */
/*
 * Every split point in the plain and sanitized builds. Under valgrind (memcheck makes each parse
 * some 30 times slower) every point of the first and last 512 bytes and every 7th between: the
 * same code paths, a seventh of the parses.
 */
static size_t split_step(size_t k, size_t n)
{
    static int under_valgrind = -1;
    if (under_valgrind < 0) {
        under_valgrind = getenv("ST_UNDER_VALGRIND") != NULL;
    }
    return under_valgrind && k >= 512 && k + 512 < n ? 7 : 1;
}

static void check_all_splits(const char *body, size_t n, const struct evlist *want, int want_rc,
                             const char *what)
{
    for (size_t k = 0; k <= n; k += split_step(k, n)) {
        check_split(body, n, &k, 1, want, want_rc, what);
    }
    size_t *cuts = malloc((n + 1) * sizeof(*cuts));
    assert_non_null(cuts);
    for (size_t k = 0; k < n; k++) {
        cuts[k] = k + 1;
    }
    check_split(body, n, cuts, n ? n - 1 : 0, want, want_rc, what);
    free(cuts);
}

/* ---- transcripts ---- */

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    struct st_buf b;
    st_buf_init(&b);
    char tmp[4096];
    size_t n;
    while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0) {
        st_buf_append(&b, tmp, n);
    }
    fclose(f);
    *len = b.len;
    return st_buf_take(&b);
}

/*
 * Rebuilds the SSE body of a transcript: drops the "[+ NNN.Nms] " prefixes, keeps only `data:`
 * and `:` lines, and puts back the blank line after each. Returns the number of data lines.
 */
static size_t rebuild_body(const char *text, size_t len, struct st_buf *out)
{
    size_t data_lines = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        const char *s = p;
        if (eol - s > 3 && s[0] == '[' && s[1] == '+') {
            const char *close = memchr(s, ']', (size_t)(eol - s));
            if (close && close + 1 < eol && close[1] == ' ') {
                s = close + 2;
            }
        }
        size_t n = (size_t)(eol - s);
        if (n >= 5 && memcmp(s, "data:", 5) == 0) {
            data_lines++;
            st_buf_append(out, s, n);
            st_buf_puts(out, "\n\n");
        } else if (n >= 1 && s[0] == ':') {
            st_buf_append(out, s, n);
            st_buf_puts(out, "\n\n");
        }
        p = nl ? nl + 1 : end;
    }
    return data_lines;
}

/* body with every "\n" replaced by eol. */
static void convert_eol(const char *body, size_t n, const char *eol, struct st_buf *out)
{
    for (size_t i = 0; i < n; i++) {
        if (body[i] == '\n') {
            st_buf_puts(out, eol);
        } else {
            st_buf_putc(out, body[i]);
        }
    }
}

/* tests/data/wire/SUB (under $ST_TEST_DATA when set, as the suite sets it). */
static void wire_dir(const char *sub, char *out, size_t cap)
{
    struct stat st;
    const char *data = getenv("ST_TEST_DATA");
    snprintf(out, cap, "%s/wire/%s", data ? data : "tests/data", sub);
    if (stat(out, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fail_msg("wire transcripts not found at %s: set ST_TEST_DATA or run from the repository "
                 "root",
                 out);
    }
}

static void check_transcript(const char *path, const char *name)
{
    size_t len;
    char *text = read_file(path, &len);
    assert_non_null(text);
    struct st_buf body;
    st_buf_init(&body);
    size_t data_lines = rebuild_body(text, len, &body);
    free(text);

    struct evlist want = {0};
    assert_int_equal(parse_whole(body.data, body.len, &want), 0);
    if (want.n != data_lines) {
        fail_msg("%s: %zu events from %zu data lines", name, want.n, data_lines);
    }
    check_all_splits(body.data, body.len, &want, 0, name);

    /* The same events whatever the line ends, however split. */
    static const char *const eols[] = {"\r\n", "\r"};
    for (size_t e = 0; e < 2; e++) {
        struct st_buf conv;
        st_buf_init(&conv);
        convert_eol(body.data, body.len, eols[e], &conv);
        char what[300];
        snprintf(what, sizeof(what), "%s (%s)", name, e == 0 ? "CRLF" : "CR");
        check_all_splits(conv.data, conv.len, &want, 0, what);
        st_buf_release(&conv);
    }
    evlist_free(&want);
    st_buf_release(&body);
}

/* Every streaming transcript of one server version; at least min_files of them. */
static void wire_folder(const char *sub, int min_files)
{
    char dir[4096];
    wire_dir(sub, dir, sizeof(dir));
    DIR *d = opendir(dir);
    assert_non_null(d);
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".txt") != 0) {
            continue;
        }
        char path[8192];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        size_t len;
        char *text = read_file(path, &len);
        assert_non_null(text);
        struct st_buf body;
        st_buf_init(&body);
        size_t data_lines = rebuild_body(text, len, &body);
        free(text);
        st_buf_release(&body);
        if (data_lines == 0) {
            continue;
        }
        check_transcript(path, e->d_name);
        files++;
    }
    closedir(d);
    /* Far fewer transcripts with data lines than the folder holds means the wrong folder. */
    if (files < min_files) {
        fail_msg("only %d transcripts with data lines in %s", files, dir);
    }
}

/* Both llama.cpp versions: v0.5.0 (eleven streams) and b4748 (six). */
static void test_wire_transcripts(void **state)
{
    (void)state;
    wire_folder("llamacpp-v0.5.0", 8);
    wire_folder("llamacpp-b4748", 5);
}

/* ---- corner cases ---- */

/* Parses s (whole, then at every split) and checks the events against want[0..nwant). */
static void expect_events(const char *s, const char *const *want, size_t nwant, int want_rc)
{
    struct evlist w = {0};
    for (size_t i = 0; i < nwant; i++) {
        collect_cb(&w, want[i], strlen(want[i]));
    }
    check_all_splits(s, strlen(s), &w, want_rc, s);
    evlist_free(&w);
}

static void test_comments(void **state)
{
    (void)state;
    const char *s = ": ping\n\n:\ndata: x\n: inside an event\n\n: tail\n";
    const char *want[] = {"x"};
    expect_events(s, want, 1, 0);

    struct st_sse p;
    struct evlist got = {0};
    st_sse_init(&p, 0);
    assert_int_equal(st_sse_feed(&p, s, strlen(s), collect_cb, &got), 0);
    assert_int_equal(st_sse_finish(&p, collect_cb, &got), 0);
    assert_int_equal(p.comments, 4);
    assert_int_equal(p.events, 1);
    assert_int_equal(p.bytes, strlen(s));
    st_sse_release(&p);
    evlist_free(&got);
}

static void test_crlf(void **state)
{
    (void)state;
    const char *want[] = {"a", "b c", "[DONE]"};
    expect_events("data: a\r\n\r\ndata: b c\r\n\r\ndata: [DONE]\r\n\r\n", want, 3, 0);
}

static void test_cr_only(void **state)
{
    (void)state;
    const char *want[] = {"a", "b\nc"};
    expect_events("data: a\r\rdata: b\rdata: c\r\r", want, 2, 0);
}

static void test_mixed_line_ends(void **state)
{
    (void)state;
    const char *want[] = {"a\nb\nc", "d"};
    expect_events("data: a\rdata: b\r\ndata: c\n\r\ndata: d\r\r\n", want, 2, 0);
}

/* A CR ends one piece and its LF starts the next: the LF is not a second (blank) line. */
static void test_cr_lf_across_pieces(void **state)
{
    (void)state;
    struct st_sse p;
    struct evlist got = {0};
    st_sse_init(&p, 0);
    assert_int_equal(st_sse_feed(&p, "data: a\r", 8, collect_cb, &got), 0);
    assert_int_equal(st_sse_feed(&p, "\ndata: b\r", 9, collect_cb, &got), 0);
    assert_int_equal(got.n, 0);
    assert_int_equal(st_sse_feed(&p, "", 0, collect_cb, &got), 0); /* keeps the pending CR */
    assert_int_equal(st_sse_feed(&p, "\n", 1, collect_cb, &got), 0);
    assert_int_equal(got.n, 0);
    assert_int_equal(st_sse_feed(&p, "\r", 1, collect_cb, &got), 0);
    assert_int_equal(got.n, 1);
    assert_string_equal(got.ev[0], "a\nb");
    /* The CR was a blank line by itself; a following LF belongs to it, not a new line. */
    assert_int_equal(st_sse_feed(&p, "\ndata: c\n\n", 10, collect_cb, &got), 0);
    assert_int_equal(got.n, 2);
    assert_string_equal(got.ev[1], "c");
    assert_int_equal(st_sse_finish(&p, collect_cb, &got), 0);
    st_sse_release(&p);
    evlist_free(&got);
}

static void test_multiline_data(void **state)
{
    (void)state;
    const char *want[] = {"line1\nline2\n", "{\"a\":\n1}"};
    expect_events("data: line1\ndata: line2\ndata:\n\ndata: {\"a\":\ndata: 1}\n\n", want, 2, 0);
}

static void test_data_without_space(void **state)
{
    (void)state;
    /* Exactly one leading space is stripped; a bare "data" is a data line with an empty value. */
    const char *want[] = {"x", " y", "", "", "z"};
    expect_events("data:x\n\ndata:  y\n\ndata\n\ndata:\n\ndata:z\n\n", want, 5, 0);
}

static void test_other_fields(void **state)
{
    (void)state;
    const char *want[] = {"x"};
    /* event/id/retry/unknown ignored; an event without data lines is not delivered; "dat" and
     * "datax" are other fields. */
    expect_events("event: ping\n\nid: 7\nretry: 100\nevent: message\ndata: x\nfoo: bar\n\n"
                  "dat: no\ndatax: no\nDATA: no\n\n",
                  want, 1, 0);
}

static void test_finish_without_blank_line(void **state)
{
    (void)state;
    const char *want[] = {"{\"a\":1}", "last"};
    expect_events("data: {\"a\":1}\n\ndata: last\n", want, 2, 0);
    const char *want2[] = {"two\nlines"};
    expect_events("data: two\r\ndata: lines\r\n", want2, 1, 0);
}

static void test_finish_truncated(void **state)
{
    (void)state;
    const char *want[] = {"ok"};
    /* The unfinished line is dropped along with its event. */
    expect_events("data: ok\n\ndata: {\"choices\":[{\"te", want, 1, ST_EPROTO);
    expect_events("data: ok\n\ndata: first\ndata: sec", want, 1, ST_EPROTO);
    expect_events("data: ok\n\n: ping", want, 1, ST_EPROTO);

    /* After finish the parser starts afresh. */
    struct st_sse p;
    struct evlist got = {0};
    st_sse_init(&p, 0);
    assert_int_equal(st_sse_feed(&p, "data: cut", 9, collect_cb, &got), 0);
    assert_int_equal(st_sse_finish(&p, collect_cb, &got), ST_EPROTO);
    assert_int_equal(st_sse_feed(&p, "data: new\n\n", 11, collect_cb, &got), 0);
    assert_int_equal(got.n, 1);
    assert_string_equal(got.ev[0], "new");
    assert_int_equal(st_sse_finish(&p, collect_cb, &got), 0);
    assert_int_equal(st_sse_finish(&p, collect_cb, &got), 0); /* twice is harmless */
    assert_int_equal(got.n, 1);
    st_sse_release(&p);
    evlist_free(&got);
}

static void test_empty_body(void **state)
{
    (void)state;
    expect_events("", NULL, 0, 0);
    expect_events("\n\n\r\n", NULL, 0, 0);
}

/* Feeds s split at cut with bound max; returns the first non-zero status. */
static int feed_bounded(const char *s, size_t cut, size_t max, struct evlist *got)
{
    struct st_sse p;
    size_t n = strlen(s);
    st_sse_init(&p, max);
    int rc = st_sse_feed(&p, s, cut, collect_cb, got);
    if (rc == 0) {
        rc = st_sse_feed(&p, s + cut, n - cut, collect_cb, got);
    }
    if (rc == 0) {
        rc = st_sse_finish(&p, collect_cb, got);
    }
    /* Once over the bound the parser stays broken. */
    if (rc == ST_ETOOBIG) {
        assert_int_equal(st_sse_feed(&p, "data: x\n\n", 9, collect_cb, got), ST_ETOOBIG);
        assert_int_equal(st_sse_finish(&p, collect_cb, got), ST_ETOOBIG);
    }
    st_sse_release(&p);
    return rc;
}

static void test_too_big(void **state)
{
    (void)state;
    /* The bound counts the data so far plus the line being read ("data: " included). A 16-byte
     * line fits a bound of 16 and not 15, at every split. */
    const char *s = "data: 0123456789\n\ndata: ok\n\n";
    for (size_t cut = 0; cut <= strlen(s); cut++) {
        struct evlist got = {0};
        assert_int_equal(feed_bounded(s, cut, 16, &got), 0);
        assert_int_equal(got.n, 2);
        evlist_free(&got);
        assert_int_equal(feed_bounded(s, cut, 15, &got), ST_ETOOBIG);
        assert_int_equal(got.n, 0);
        evlist_free(&got);
    }
    /* The data lines of one event add up: the third line is read with "a\nb" (3 bytes) held,
     * 3 + 7 = 10. */
    const char *m = "data: a\ndata: b\ndata: c\n\n";
    for (size_t cut = 0; cut <= strlen(m); cut++) {
        struct evlist got = {0};
        assert_int_equal(feed_bounded(m, cut, 9, &got), ST_ETOOBIG);
        evlist_free(&got);
        assert_int_equal(feed_bounded(m, cut, 10, &got), 0);
        assert_int_equal(got.n, 1);
        evlist_free(&got);
    }
    /* An endless line without a line end is stopped too, however it arrives. */
    struct st_sse p;
    struct evlist got = {0};
    st_sse_init(&p, 1000);
    int rc = 0;
    for (int i = 0; i < 200 && rc == 0; i++) {
        rc = st_sse_feed(&p, "data: xxxxxxx", 13, collect_cb, &got);
    }
    assert_int_equal(rc, ST_ETOOBIG);
    assert_true(p.line.len <= 1000);
    st_sse_release(&p);
    evlist_free(&got);
}

struct stopper {
    int seen;
    int stop_at;
};

static int stop_cb(void *ctx, const char *data, size_t len)
{
    (void)data;
    (void)len;
    struct stopper *s = ctx;
    s->seen++;
    return s->seen == s->stop_at ? 42 : 0;
}

static void test_callback_stop(void **state)
{
    (void)state;
    const char *s = "data: 1\n\ndata: 2\n\ndata: 3\n\n";
    struct st_sse p;
    struct stopper st = {0, 2};
    st_sse_init(&p, 0);
    assert_int_equal(st_sse_feed(&p, s, strlen(s), stop_cb, &st), 42);
    assert_int_equal(st.seen, 2); /* the third event is never delivered */
    /* The parser stays usable: the rest of that piece was dropped, a new piece starts clean. */
    st.stop_at = 0;
    assert_int_equal(st_sse_feed(&p, "data: 4\n\n", 9, stop_cb, &st), 0);
    assert_int_equal(st.seen, 3);
    st_sse_release(&p);

    /* The stop value also comes back through finish. */
    struct stopper f = {0, 1};
    st_sse_init(&p, 0);
    assert_int_equal(st_sse_feed(&p, "data: last\n", 11, stop_cb, &f), 0);
    assert_int_equal(st_sse_finish(&p, stop_cb, &f), 42);
    st_sse_release(&p);

    /* Stopping on an event whose data was carried from an earlier piece. */
    struct stopper c = {0, 1};
    st_sse_init(&p, 0);
    assert_int_equal(st_sse_feed(&p, "data: sp", 8, stop_cb, &c), 0);
    assert_int_equal(st_sse_feed(&p, "lit\n\ndata: next\n\n", 17, stop_cb, &c), 42);
    assert_int_equal(c.seen, 1);
    st_sse_release(&p);
}

struct zc {
    const char *lo, *hi; /* the piece being fed */
    int inside;
    int outside;
};

static int zc_cb(void *ctx, const char *data, size_t len)
{
    struct zc *z = ctx;
    if (data >= z->lo && data + len <= z->hi) {
        z->inside++;
    } else {
        z->outside++;
    }
    return 0;
}

/* Whole events inside a piece are delivered in place and never touch the internal buffers. */
static void test_zero_copy(void **state)
{
    (void)state;
    const char *s = "data: {\"a\":1}\n\n: ping\nevent: x\ndata: {\"b\":2}\r\n\r\ndata: [DONE]\n\n";
    struct st_sse p;
    struct zc z = {s, s + strlen(s), 0, 0};
    st_sse_init(&p, 0);
    assert_int_equal(st_sse_feed(&p, s, strlen(s), zc_cb, &z), 0);
    assert_int_equal(z.inside, 3);
    assert_int_equal(z.outside, 0);
    assert_null(p.data.data);
    assert_null(p.line.data);
    /* An event cut by the end of a piece is copied, and still delivered right. */
    const char *a = "data: {\"c\":3}\n";
    const char *b = "\n";
    struct evlist got = {0};
    assert_int_equal(st_sse_feed(&p, a, strlen(a), collect_cb, &got), 0);
    assert_int_equal(st_sse_feed(&p, b, strlen(b), collect_cb, &got), 0);
    assert_int_equal(got.n, 1);
    assert_string_equal(got.ev[0], "{\"c\":3}");
    assert_int_equal(st_sse_finish(&p, collect_cb, &got), 0);
    st_sse_release(&p);
    evlist_free(&got);
}

static void test_release_mid_event(void **state)
{
    (void)state;
    struct st_sse p;
    struct evlist got = {0};
    st_sse_init(&p, 0);
    assert_int_equal(st_sse_feed(&p, "data: a\ndata: partial", 21, collect_cb, &got), 0);
    st_sse_release(&p); /* ASan/LSan check that nothing leaks */
    st_sse_init(&p, 0);
    assert_int_equal(st_sse_feed(&p, "data: b\n\n", 9, collect_cb, &got), 0);
    assert_int_equal(got.n, 1);
    assert_string_equal(got.ev[0], "b");
    st_sse_release(&p);
    evlist_free(&got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wire_transcripts),
        cmocka_unit_test(test_comments),
        cmocka_unit_test(test_crlf),
        cmocka_unit_test(test_cr_only),
        cmocka_unit_test(test_mixed_line_ends),
        cmocka_unit_test(test_cr_lf_across_pieces),
        cmocka_unit_test(test_multiline_data),
        cmocka_unit_test(test_data_without_space),
        cmocka_unit_test(test_other_fields),
        cmocka_unit_test(test_finish_without_blank_line),
        cmocka_unit_test(test_finish_truncated),
        cmocka_unit_test(test_empty_body),
        cmocka_unit_test(test_too_big),
        cmocka_unit_test(test_callback_stop),
        cmocka_unit_test(test_zero_copy),
        cmocka_unit_test(test_release_mid_event),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
