/*
 * Tests for src/store/journal.c: round trip; a torn last record cut at every byte offset is
 * dropped on reopen and appending continues at the right seq; a corrupt middle record is a hard
 * error naming its line; CRC mismatches, duplicate seqs and foreign files; unit begin, end and
 * discard; a full disk (RLIMIT_FSIZE -> EFBIG, and an injected short write then ENOSPC) leaves
 * the file valid with a sticky error; and 24 seeded kill -9 runs of a child that appends units
 * and reports each fsynced seq through a pipe, each followed by a resume (half of them write in
 * small pieces, so that kills leave torn lines).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/rng.h"
#include "store/journal.h"

struct tmp {
    char dir[64];
    char path[128];
};

static void tmp_make(struct tmp *t)
{
    snprintf(t->dir, sizeof(t->dir), "/tmp/st_journal_XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    snprintf(t->path, sizeof(t->path), "%s/journal", t->dir);
}

static void tmp_drop(struct tmp *t)
{
    unlink(t->path);
    assert_int_equal(rmdir(t->dir), 0);
}

static void read_file(const char *path, struct st_buf *out)
{
    st_buf_clear(out);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        st_buf_append(out, chunk, n);
    }
    fclose(f);
}

static void write_file(const char *path, const char *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
}

static off_t file_size(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_size;
}

static void append_str(struct st_journal *j, const char *kind, const char *json)
{
    assert_int_equal(st_journal_append(j, kind, json, strlen(json)), 0);
}

static void open_ok(struct st_journal *j, const char *path)
{
    char err[256] = "";
    int rc = st_journal_open(j, path, err, sizeof(err));
    if (rc) {
        fail_msg("open: %s (%s)", st_strerror(rc), err);
    }
}

static void close_ok(struct st_journal *j)
{
    assert_int_equal(st_journal_close(j), 0);
}

/* Collects records as "seq kind json state unit" lines. */
static int collect(void *ctx, const struct st_journal_rec *rec)
{
    struct st_buf *b = ctx;
    st_buf_printf(b, "%" PRIu64 " %.*s %.*s %d %s\n", rec->seq, (int)rec->kind_len, rec->kind,
                  (int)rec->json_len, rec->json, (int)rec->state, rec->unit ? rec->unit : "-");
    return 0;
}

/* Byte offset where line n (1-based) starts. */
static size_t line_start(const struct st_buf *b, int n)
{
    size_t pos = 0;
    for (int i = 1; i < n; i++) {
        const char *nl = memchr(b->data + pos, '\n', b->len - pos);
        assert_non_null(nl);
        pos = (size_t)(nl - b->data) + 1;
    }
    return pos;
}

/* A journal of the header plus records 1..n, each {"i":k}. */
static void make_journal(const char *path, int n)
{
    struct st_journal j;
    open_ok(&j, path);
    for (int i = 1; i <= n; i++) {
        char json[64];
        snprintf(json, sizeof(json), "{\"i\":%d,\"s\":\"r%d\"}", i, i);
        append_str(&j, "rec", json);
    }
    close_ok(&j);
}

static void test_round_trip(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    struct st_journal j;
    open_ok(&j, t.path);
    assert_int_equal(j.next_seq, 1);
    assert_int_equal(file_size(t.path), (off_t)j.len);
    append_str(&j, "plan", "{\"arms\":[1,2],\"name\":\"x y\"}");
    append_str(&j, "receipt", "{\"ok\":true,\"t_ns\":123}");
    append_str(&j, "note", "\"just a string\"");
    /* The shortest possible line, and JSON with white space around it. */
    append_str(&j, "k", "0");
    append_str(&j, "ws", " [ 1 , 2 ] ");
    assert_int_equal(j.next_seq, 6);
    close_ok(&j);

    struct st_buf b, file;
    st_buf_init(&b);
    st_buf_init(&file);
    read_file(t.path, &file);
    /* The header line, then each record framed with its CRC-32C. */
    assert_memory_equal(file.data + 9,
                        "0 journal {\"format\":\"servetune-journal\",\"version\":1}\n", 53);
    open_ok(&j, t.path);
    assert_int_equal(j.next_seq, 6);
    assert_int_equal(j.dropped_bytes, 0);
    assert_int_equal(st_journal_iter(&j, collect, &b), 0);
    assert_string_equal(st_buf_str(&b),
                        "0 journal {\"format\":\"servetune-journal\",\"version\":1} 0 -\n"
                        "1 plan {\"arms\":[1,2],\"name\":\"x y\"} 0 -\n"
                        "2 receipt {\"ok\":true,\"t_ns\":123} 0 -\n"
                        "3 note \"just a string\" 0 -\n"
                        "4 k 0 0 -\n"
                        "5 ws  [ 1 , 2 ]  0 -\n");
    append_str(&j, "receipt", "{}");
    assert_int_equal(j.next_seq, 7);
    close_ok(&j);
    st_buf_release(&b);
    st_buf_release(&file);
    tmp_drop(&t);
}

static void test_torn_tail_every_offset(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    make_journal(t.path, 4);
    struct st_buf full, after;
    st_buf_init(&full);
    st_buf_init(&after);
    read_file(t.path, &full);
    size_t last = line_start(&full, 5);
    for (size_t cut = last; cut < full.len; cut++) {
        write_file(t.path, full.data, cut);
        struct st_journal j;
        open_ok(&j, t.path);
        assert_int_equal(j.next_seq, 4);
        assert_int_equal(j.dropped_bytes, cut - last);
        assert_int_equal(j.dropped_line, cut > last ? 5 : 0);
        assert_int_equal(file_size(t.path), (off_t)last);
        /* Appending continues with the dropped record's seq, and the same bytes come back. */
        append_str(&j, "rec", "{\"i\":4,\"s\":\"r4\"}");
        assert_int_equal(j.next_seq, 5);
        close_ok(&j);
        read_file(t.path, &after);
        assert_int_equal(after.len, full.len);
        assert_memory_equal(after.data, full.data, full.len);
    }
    st_buf_release(&full);
    st_buf_release(&after);
    tmp_drop(&t);
}

static void test_torn_header(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    make_journal(t.path, 0);
    struct st_buf full;
    st_buf_init(&full);
    read_file(t.path, &full);
    for (size_t cut = 0; cut < full.len; cut++) {
        write_file(t.path, full.data, cut);
        struct st_journal j;
        open_ok(&j, t.path);
        assert_int_equal(j.next_seq, 1);
        assert_int_equal(j.dropped_bytes, cut);
        close_ok(&j);
        assert_int_equal(file_size(t.path), (off_t)full.len);
    }
    st_buf_release(&full);
    tmp_drop(&t);
}

static void test_garbage_tail(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    make_journal(t.path, 3);
    struct st_buf full;
    st_buf_init(&full);
    read_file(t.path, &full);
    size_t good = full.len;
    /* A power cut can leave zeros, or a line with a newline whose CRC does not match. */
    static const char zeros[300];
    st_buf_append(&full, zeros, sizeof(zeros));
    st_buf_puts(&full, "\ngarbage line\n");
    write_file(t.path, full.data, full.len);
    struct st_journal j;
    open_ok(&j, t.path);
    assert_int_equal(j.next_seq, 4);
    assert_int_equal(j.dropped_line, 5);
    assert_int_equal(j.dropped_bytes, full.len - good);
    close_ok(&j);
    assert_int_equal(file_size(t.path), (off_t)good);
    st_buf_release(&full);
    tmp_drop(&t);
}

static void expect_open_fails(const char *path, int want, const char *msg)
{
    off_t before = file_size(path);
    struct st_journal j;
    char err[256] = "";
    assert_int_equal(st_journal_open(&j, path, err, sizeof(err)), want);
    if (msg && !strstr(err, msg)) {
        fail_msg("error '%s' lacks '%s'", err, msg);
    }
    /* A hard error never truncates or appends. */
    assert_int_equal(file_size(path), before);
}

static void test_corrupt_middle(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    make_journal(t.path, 5);
    struct st_buf full;
    st_buf_init(&full);
    read_file(t.path, &full);
    /* One flipped byte inside the JSON of line 3, then in its CRC, then a lost LF. */
    size_t at = line_start(&full, 3);
    size_t offs[] = {at + 20, at + 2, line_start(&full, 4) - 1};
    for (size_t i = 0; i < 3; i++) {
        full.data[offs[i]] ^= 0x01;
        write_file(t.path, full.data, full.len);
        expect_open_fails(t.path, ST_EPROTO, "line 3");
        full.data[offs[i]] ^= 0x01;
    }
    /* The same damage on the last line is a corrupt tail: dropped. */
    size_t last = line_start(&full, 6);
    full.data[last + 20] ^= 0x01;
    write_file(t.path, full.data, full.len);
    struct st_journal j;
    open_ok(&j, t.path);
    assert_int_equal(j.next_seq, 5);
    assert_int_equal(j.dropped_line, 6);
    close_ok(&j);
    st_buf_release(&full);
    tmp_drop(&t);
}

static void test_crc_valid_but_wrong(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    make_journal(t.path, 2);
    struct st_buf full, dup;
    st_buf_init(&full);
    st_buf_init(&dup);
    read_file(t.path, &full);
    /* A duplicated last line is CRC-valid with seq 2 where 3 is due: never dropped silently. */
    st_buf_append(&dup, full.data, full.len);
    size_t last = line_start(&full, 3);
    st_buf_append(&dup, full.data + last, full.len - last);
    write_file(t.path, dup.data, dup.len);
    expect_open_fails(t.path, ST_EPROTO, "line 4: seq 2, expected 3");
    /* A duplicate after a torn line is still found. */
    st_buf_clear(&dup);
    st_buf_append(&dup, full.data, full.len);
    st_buf_puts(&dup, "0badc0de torn\n");
    st_buf_append(&dup, full.data + last, full.len - last);
    write_file(t.path, dup.data, dup.len);
    expect_open_fails(t.path, ST_EPROTO,
                      "line 4: corrupt record followed by a valid one at line 5");
    st_buf_release(&dup);
    st_buf_release(&full);
    tmp_drop(&t);
}

static void test_not_a_journal(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    static const char *const texts[] = {
        "{\"receipt\":1}\n{\"receipt\":2}\n",
        "hello",
        "00000000 0 journal {}\n",
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        write_file(t.path, texts[i], strlen(texts[i]));
        expect_open_fails(t.path, ST_EPROTO, "line 1");
    }
    tmp_drop(&t);
}

static void test_scan_pure(void **state)
{
    (void)state;
    struct st_journal_scan sc;
    char err[128];
    assert_int_equal(st_journal_scan("", 0, NULL, NULL, NULL, &sc, err, sizeof(err)), 0);
    assert_int_equal(sc.records, 0);
    assert_int_equal(sc.tail_len, 0);
    assert_int_equal(st_journal_scan("xyz\n", 4, NULL, NULL, NULL, &sc, err, sizeof(err)),
                     ST_EPROTO);
}

static void test_append_validation(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    struct st_journal j;
    open_ok(&j, t.path);
    assert_int_equal(st_journal_append(&j, "", "{}", 2), -EINVAL);
    assert_int_equal(st_journal_append(&j, "Bad", "{}", 2), -EINVAL);
    assert_int_equal(st_journal_append(&j, "has space", "{}", 2), -EINVAL);
    assert_int_equal(st_journal_append(&j, "journal", "{}", 2), -EINVAL);
    assert_int_equal(st_journal_append(&j, "unit_end", "{}", 2), -EINVAL);
    assert_int_equal(st_journal_append(&j, "rec", "{\n}", 3), ST_EPARSE);
    assert_int_equal(st_journal_append(&j, "rec", "{", 1), ST_EPARSE);
    assert_int_equal(st_journal_append(&j, "rec", "", 0), ST_EPARSE);
    assert_int_equal(st_journal_append(&j, "rec", "{} x", 4), ST_EPARSE);
    assert_int_equal(st_journal_unit_begin(&j, ""), -EINVAL);
    assert_int_equal(st_journal_unit_begin(&j, "a\"b"), -EINVAL);
    assert_int_equal(st_journal_unit_begin(&j, "a b"), -EINVAL);
    assert_int_equal(j.next_seq, 1);
    assert_int_equal(j.error, 0);
    /* A second opener, even in this process, is kept out. */
    struct st_journal j2;
    assert_int_equal(st_journal_open(&j2, t.path, NULL, 0), -EBUSY);
    close_ok(&j);
    tmp_drop(&t);
}

static void test_units(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    struct st_journal j;
    open_ok(&j, t.path);
    assert_int_equal(st_journal_unit_begin(&j, "arm:a/stage1"), 0);
    assert_int_equal(st_journal_unit_state(&j, "arm:a/stage1"), ST_JOURNAL_UNIT_OPEN);
    append_str(&j, "receipt", "{\"r\":1}");
    assert_int_equal(st_journal_unit_end(&j, "other", "{}", 2), -EINVAL);
    assert_int_equal(st_journal_unit_end(&j, "arm:a/stage1", "{\"p50\":1.5}", 11), 0);
    assert_int_equal(st_journal_unit_state(&j, "arm:a/stage1"), ST_JOURNAL_UNIT_DONE);
    assert_int_equal(st_journal_unit_end(&j, "arm:a/stage1", "{}", 2), -EINVAL);
    assert_int_equal(st_journal_unit_begin(&j, "b"), 0);
    append_str(&j, "receipt", "{\"r\":2}");
    close_ok(&j); /* a crash inside unit b */

    open_ok(&j, t.path);
    assert_string_equal(st_journal_open_unit(&j), "b");
    assert_int_equal(st_journal_unit_state(&j, "b"), ST_JOURNAL_UNIT_OPEN);
    struct st_buf b;
    st_buf_init(&b);
    assert_int_equal(st_journal_iter(&j, collect, &b), 0);
    assert_non_null(strstr(st_buf_str(&b), "5 receipt {\"r\":2} 2 b\n"));
    assert_int_equal(st_journal_unit_begin(&j, "c"), -EBUSY);
    assert_int_equal(st_journal_unit_discard(&j, "c"), -EINVAL);
    assert_int_equal(st_journal_unit_discard(&j, "b"), 0);
    assert_null(st_journal_open_unit(&j));
    assert_int_equal(st_journal_unit_state(&j, "b"), ST_JOURNAL_UNIT_NONE);
    assert_int_equal(st_journal_unit_begin(&j, "arm:a/stage1"), -EEXIST);
    assert_int_equal(st_journal_unit_begin(&j, "b"), 0);
    append_str(&j, "receipt", "{\"r\":3}");
    assert_int_equal(st_journal_unit_end(&j, "b", "null", 4), 0);
    append_str(&j, "note", "{}");
    close_ok(&j);

    open_ok(&j, t.path);
    assert_null(st_journal_open_unit(&j));
    assert_int_equal(st_journal_units_done(&j), 2);
    assert_string_equal(st_journal_unit_done_id(&j, 0), "arm:a/stage1");
    assert_string_equal(st_journal_unit_done_id(&j, 1), "b");
    assert_null(st_journal_unit_done_id(&j, 2));
    st_buf_clear(&b);
    assert_int_equal(st_journal_iter(&j, collect, &b), 0);
    assert_string_equal(st_buf_str(&b),
                        "0 journal {\"format\":\"servetune-journal\",\"version\":1} 0 -\n"
                        "1 unit_begin {\"unit\":\"arm:a/stage1\"} 0 arm:a/stage1\n"
                        "2 receipt {\"r\":1} 0 arm:a/stage1\n"
                        "3 unit_end {\"unit\":\"arm:a/stage1\",\"result\":{\"p50\":1.5}} 0 "
                        "arm:a/stage1\n"
                        "4 unit_begin {\"unit\":\"b\"} 1 b\n"
                        "5 receipt {\"r\":2} 1 b\n"
                        "6 unit_discard {\"unit\":\"b\"} 1 b\n"
                        "7 unit_begin {\"unit\":\"b\"} 0 b\n"
                        "8 receipt {\"r\":3} 0 b\n"
                        "9 unit_end {\"unit\":\"b\",\"result\":null} 0 b\n"
                        "10 note {} 0 -\n");
    close_ok(&j);
    st_buf_release(&b);
    tmp_drop(&t);
}

static int stop_at_two(void *ctx, const struct st_journal_rec *rec)
{
    (void)ctx;
    return rec->seq == 2 ? 42 : 0;
}

static void test_iter_stops(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    make_journal(t.path, 4);
    struct st_journal j;
    open_ok(&j, t.path);
    assert_int_equal(st_journal_iter(&j, stop_at_two, NULL), 42);
    close_ok(&j);
    tmp_drop(&t);
}

static void test_efbig_sticky(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    make_journal(t.path, 2);
    struct st_journal j;
    open_ok(&j, t.path);
    size_t good = j.len;
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = (rlim_t)good + 100;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    /* 200 bytes of JSON: the kernel writes the first 100 - the rest is EFBIG. */
    char big[256];
    memset(big, 'x', sizeof(big));
    big[0] = '"';
    big[199] = '"';
    int rc = st_journal_append(&j, "rec", big, 200);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);
    assert_int_equal(rc, -EFBIG);
    assert_int_equal(file_size(t.path), (off_t)good);
    assert_int_equal(j.next_seq, 3);
    /* Sticky: nothing more is written, even what would fit now. */
    assert_int_equal(st_journal_append(&j, "rec", "{}", 2), -EFBIG);
    assert_int_equal(st_journal_unit_begin(&j, "u"), -EFBIG);
    assert_int_equal(st_journal_unit_end(&j, "u", "{}", 2), -EFBIG);
    assert_int_equal(st_journal_unit_discard(&j, "u"), -EFBIG);
    assert_int_equal(st_journal_append(&j, "Bad kind", "{}", 2), -EFBIG);
    assert_int_equal(file_size(t.path), (off_t)good);
    assert_int_equal(st_journal_close(&j), -EFBIG);
    open_ok(&j, t.path);
    assert_int_equal(j.next_seq, 3);
    assert_int_equal(j.dropped_bytes, 0);
    close_ok(&j);
    tmp_drop(&t);
}

static int write_calls;

/* Writes 10 bytes, then fails as a full disk does. */
static long short_then_enospc(int fd, const void *buf, size_t len)
{
    if (write_calls++ == 0) {
        return (long)write(fd, buf, len < 10 ? len : 10);
    }
    errno = ENOSPC;
    return -1;
}

static void test_enospc_injected(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    make_journal(t.path, 1);
    struct st_journal j;
    open_ok(&j, t.path);
    size_t good = j.len;
    write_calls = 0;
    j.write_fn = short_then_enospc;
    assert_int_equal(st_journal_append(&j, "rec", "{\"a\":1}", 7), -ENOSPC);
    assert_int_equal(write_calls, 2);
    assert_int_equal(file_size(t.path), (off_t)good);
    assert_int_equal(st_journal_append(&j, "rec", "{}", 2), -ENOSPC);
    assert_int_equal(write_calls, 2);
    assert_int_equal(st_journal_close(&j), -ENOSPC);
    open_ok(&j, t.path);
    assert_int_equal(j.next_seq, 2);
    close_ok(&j);
    tmp_drop(&t);
}

/* The crash test's record content: a function of (unit, r), so the parent can check it. */
static void receipt_json(struct st_buf *b, uint64_t unit, int r)
{
    st_buf_clear(b);
    size_t pad = (size_t)((unit * 7919u + (uint64_t)r * 104729u) % 20000u);
    st_buf_printf(b, "{\"unit\":%" PRIu64 ",\"r\":%d,\"pad\":\"", unit, r);
    for (size_t i = 0; i < pad; i++) {
        st_buf_putc(b, (char)('a' + (unit + i) % 26));
    }
    st_buf_puts(b, "\"}");
}

static void report(int fd, uint64_t seq)
{
    if (write(fd, &seq, sizeof(seq)) != (ssize_t)sizeof(seq)) {
        _exit(3);
    }
}

/* write(2) in 97-byte pieces: a kill between pieces leaves a torn line, as a kill inside one
 * large write(2) or a power cut can (a kill rarely lands inside one real write). */
static long chunked_write(int fd, const void *buf, size_t len)
{
    return (long)write(fd, buf, len < 97 ? len : 97);
}

/* The child: resume (discarding a partial unit), then units of 3 receipts until killed. */
static void crash_child(const char *path, int wfd, int chunked)
{
    struct st_journal j;
    if (st_journal_open(&j, path, NULL, 0) != 0) {
        _exit(2);
    }
    if (chunked) {
        j.write_fn = chunked_write;
    }
    const char *open_unit = st_journal_open_unit(&j);
    if (open_unit) {
        char id[ST_JOURNAL_MAX_UNIT_BYTES + 1];
        snprintf(id, sizeof(id), "%s", open_unit);
        if (st_journal_unit_discard(&j, id) != 0) {
            _exit(2);
        }
        report(wfd, j.next_seq - 1);
    }
    struct st_buf b;
    st_buf_init(&b);
    for (uint64_t k = st_journal_units_done(&j); k < 100000; k++) {
        char id[32];
        snprintf(id, sizeof(id), "u%" PRIu64, k);
        if (st_journal_unit_begin(&j, id) != 0) {
            _exit(2);
        }
        report(wfd, j.next_seq - 1);
        for (int r = 0; r < 3; r++) {
            receipt_json(&b, k, r);
            if (st_journal_append(&j, "receipt", b.data, b.len) != 0) {
                _exit(2);
            }
            report(wfd, j.next_seq - 1);
        }
        if (st_journal_unit_end(&j, id, "{\"n\":3}", 7) != 0) {
            _exit(2);
        }
        report(wfd, j.next_seq - 1);
    }
    _exit(0);
}

struct verify {
    struct st_buf want;
    uint64_t live[4096]; /* live receipts per unit */
    uint64_t records;
};

static int verify_rec(void *ctx, const struct st_journal_rec *rec)
{
    struct verify *v = ctx;
    v->records++;
    if (rec->kind_len != 7 || memcmp(rec->kind, "receipt", 7) != 0) {
        return 0;
    }
    /* sscanf needs a terminated string; the record borrows the middle of a buffer. */
    char head[64];
    size_t hn = rec->json_len < sizeof(head) - 1 ? rec->json_len : sizeof(head) - 1;
    memcpy(head, rec->json, hn);
    head[hn] = '\0';
    uint64_t unit = 0;
    int r = 0;
    if (sscanf(head, "{\"unit\":%" SCNu64 ",\"r\":%d", &unit, &r) != 2 || unit >= 4096) {
        return 1;
    }
    receipt_json(&v->want, unit, r);
    if (rec->json_len != v->want.len || memcmp(rec->json, v->want.data, rec->json_len) != 0) {
        return 2;
    }
    if (rec->state == ST_JOURNAL_LIVE) {
        v->live[unit]++;
    }
    return 0;
}

static void test_kill9_resume(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    /* 24 seeded kill points; 8 under valgrind (its forked writers run some 50 times slower). */
    uint64_t seeds = getenv("ST_UNDER_VALGRIND") ? 8 : 24;
    for (uint64_t seed = 1; seed <= seeds; seed++) {
        struct st_rng rng;
        st_rng_seed(&rng, seed);
        unlink(t.path);
        uint64_t max_reported = 0;
        for (int cycle = 0; cycle < 3; cycle++) {
            int p[2];
            assert_int_equal(pipe2(p, O_CLOEXEC), 0);
            pid_t pid = fork();
            assert_true(pid >= 0);
            if (pid == 0) {
                close(p[0]);
                crash_child(t.path, p[1], (int)(seed & 1));
            }
            close(p[1]);
            /* Kill after a seeded number of fsynced records: the child is then somewhere in
             * its next append (formatting, writing, fsyncing or reporting). */
            uint64_t want = 1 + st_rng_below(&rng, 40), got = 0, seq;
            while (got < want && read(p[0], &seq, sizeof(seq)) == (ssize_t)sizeof(seq)) {
                max_reported = seq > max_reported ? seq : max_reported;
                got++;
            }
            assert_int_equal(got, want);
            if (seed & 1) {
                /* Wait (bounded, no sleep) until the next line starts to land, so that the kill
                 * falls among its pieces. */
                off_t s0 = file_size(t.path);
                for (int spin = 0; spin < 1000000 && file_size(t.path) == s0; spin++) {
                }
            }
            assert_int_equal(kill(pid, SIGKILL), 0);
            /* Whatever it reported before dying was fsynced too. */
            while (read(p[0], &seq, sizeof(seq)) == (ssize_t)sizeof(seq)) {
                max_reported = seq > max_reported ? seq : max_reported;
            }
            close(p[0]);
            int status;
            assert_int_equal(waitpid(pid, &status, 0), pid);
            assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

            /* Valid, every reported record present (seq k is line k + 1, so none is missing
             * or repeated), and the content of each receipt is what was written. */
            struct st_journal j;
            open_ok(&j, t.path);
            assert_true(j.next_seq > max_reported);
            struct verify *v = calloc(1, sizeof(*v));
            assert_non_null(v);
            st_buf_init(&v->want);
            assert_int_equal(st_journal_iter(&j, verify_rec, v), 0);
            assert_int_equal(v->records, j.next_seq);
            /* Each completed unit holds exactly its 3 live receipts; nothing else is live. */
            size_t done = st_journal_units_done(&j);
            for (uint64_t u = 0; u < 4096; u++) {
                assert_int_equal(v->live[u], u < done ? 3 : 0);
            }
            for (size_t u = 0; u < done; u++) {
                char id[32];
                snprintf(id, sizeof(id), "u%zu", u);
                assert_string_equal(st_journal_unit_done_id(&j, u), id);
            }
            st_buf_release(&v->want);
            free(v);
            close_ok(&j);
        }
    }
    tmp_drop(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),        cmocka_unit_test(test_torn_tail_every_offset),
        cmocka_unit_test(test_torn_header),       cmocka_unit_test(test_garbage_tail),
        cmocka_unit_test(test_corrupt_middle),    cmocka_unit_test(test_crc_valid_but_wrong),
        cmocka_unit_test(test_not_a_journal),     cmocka_unit_test(test_scan_pure),
        cmocka_unit_test(test_append_validation), cmocka_unit_test(test_units),
        cmocka_unit_test(test_iter_stops),        cmocka_unit_test(test_efbig_sticky),
        cmocka_unit_test(test_enospc_injected),   cmocka_unit_test(test_kill9_resume),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
