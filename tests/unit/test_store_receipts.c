/*
 * Tests for src/store/receipts.c: records appended and read back whole; a NULL path discards and
 * counts; a file size limit hit in the middle of a record (RLIMIT_FSIZE -> EFBIG, the stand-in for
 * ENOSPC) leaves the file ending on the last complete line, with a sticky error that close
 * reports; four threads appending at once never interleave records.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/receipts.h"

struct tmp {
    char dir[64];
    char path[128];
};

static void tmp_make(struct tmp *t)
{
    snprintf(t->dir, sizeof(t->dir), "/tmp/st_receipts_XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    snprintf(t->path, sizeof(t->path), "%s/r.jsonl", t->dir);
}

static void tmp_drop(struct tmp *t)
{
    unlink(t->path);
    rmdir(t->dir);
}

/* Reads the whole file into a NUL-terminated heap buffer. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t cap = 1 << 20;
    char *buf = malloc(cap + 1);
    assert_non_null(buf);
    size_t n = fread(buf, 1, cap, f);
    assert_true(n < cap);
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

static void test_round_trip(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    struct st_receipts r;
    assert_int_equal(st_receipts_open(&r, t.path), 0);
    assert_int_equal(st_receipts_append(&r, "{\"id\":0}\n", 9), 0);
    assert_int_equal(st_receipts_append(&r, "{\"id\":1}\n{\"id\":2}\n", 18), 0);
    assert_int_equal(r.records, 2);
    assert_int_equal(st_receipts_close(&r), 0);
    size_t len;
    char *s = slurp(t.path, &len);
    assert_string_equal(s, "{\"id\":0}\n{\"id\":1}\n{\"id\":2}\n");
    free(s);
    tmp_drop(&t);
}

static void test_discard(void **state)
{
    (void)state;
    struct st_receipts r;
    assert_int_equal(st_receipts_open(&r, NULL), 0);
    assert_int_equal(st_receipts_append(&r, "{}\n", 3), 0);
    assert_int_equal(st_receipts_append(&r, "{}\n", 3), 0);
    assert_int_equal(r.records, 2);
    assert_int_equal(st_receipts_close(&r), 0);
}

/* A 40-byte record: {"id":N,"pad":"xxx...x"} and a newline. */
static void make_record(char *out, unsigned id)
{
    int n = snprintf(out, 40, "{\"id\":%u,\"pad\":\"", id);
    assert_true(n > 0 && n < 37);
    memset(out + n, 'x', (size_t)(37 - n));
    memcpy(out + 37, "\"}\n", 3);
}

static void test_efbig_no_torn_line(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    struct st_receipts r;
    assert_int_equal(st_receipts_open(&r, t.path), 0);
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = 100; /* two whole records fit, the third is cut after 20 bytes */
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    char rec[40];
    int rc = 0;
    unsigned i;
    for (i = 0; i < 10 && rc == 0; i++) {
        make_record(rec, i);
        rc = st_receipts_append(&r, rec, sizeof(rec));
    }
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);
    assert_int_equal(rc, -EFBIG);
    assert_int_equal(i, 3);
    assert_int_equal(r.records, 2);
    /* Sticky: nothing more is written, even what would fit now. */
    assert_int_equal(st_receipts_append(&r, "{}\n", 3), -EFBIG);
    assert_int_equal(st_receipts_close(&r), -EFBIG);
    size_t len;
    char *s = slurp(t.path, &len);
    assert_int_equal(len, 80);
    assert_int_equal(s[len - 1], '\n');
    assert_int_equal(strncmp(s + 40, "{\"id\":1,", 8), 0);
    free(s);
    tmp_drop(&t);
}

#define NTHREADS 4
#define PER_THREAD 500

struct appender {
    struct st_receipts *r;
    unsigned base;
};

static void *append_many(void *arg)
{
    struct appender *a = arg;
    char rec[40];
    for (unsigned i = 0; i < PER_THREAD; i++) {
        make_record(rec, a->base + i);
        if (st_receipts_append(a->r, rec, sizeof(rec)) != 0) {
            return a;
        }
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    struct tmp t;
    tmp_make(&t);
    struct st_receipts r;
    assert_int_equal(st_receipts_open(&r, t.path), 0);
    pthread_t th[NTHREADS];
    struct appender a[NTHREADS];
    for (unsigned k = 0; k < NTHREADS; k++) {
        a[k].r = &r;
        a[k].base = k * PER_THREAD;
        assert_int_equal(pthread_create(&th[k], NULL, append_many, &a[k]), 0);
    }
    for (unsigned k = 0; k < NTHREADS; k++) {
        void *ret = &a[k];
        assert_int_equal(pthread_join(th[k], &ret), 0);
        assert_null(ret);
    }
    assert_int_equal(r.records, NTHREADS * PER_THREAD);
    assert_int_equal(st_receipts_close(&r), 0);
    size_t len;
    char *s = slurp(t.path, &len);
    assert_int_equal(len, 40u * NTHREADS * PER_THREAD);
    static unsigned char seen[NTHREADS * PER_THREAD];
    memset(seen, 0, sizeof(seen));
    for (size_t off = 0; off < len; off += 40) {
        unsigned id = 0;
        assert_int_equal(sscanf(s + off, "{\"id\":%u,", &id), 1);
        assert_true(id < NTHREADS * PER_THREAD);
        assert_int_equal(seen[id], 0);
        seen[id] = 1;
        assert_int_equal(s[off + 39], '\n');
    }
    free(s);
    tmp_drop(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_discard),
        cmocka_unit_test(test_efbig_no_torn_line),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
