/*
 * libFuzzer target for the campaign summary reader of src/report/summary.c. The input is a
 * summary.json: st_report_md and st_report_html render it, st_report_compare compares it with
 * itself, and, when it holds a form feed, the text before it with the text after it (this and
 * then); st_report_drift_md reads the input as a "compare" object and reads back every compare
 * object st_report_compare wrote. Each copy is a heap block of its exact size, so a read past
 * the input is caught. Invariants: the renderers agree on whether the summary is one; a failure
 * is ST_EPARSE with a message; the HTML names no URL and holds no script; st_report_drift_md
 * accepts what st_report_compare writes; what st_sum_write writes of a summary that read, when
 * it reads again, writes the same bytes again (the writer and the reader agree on every key).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "report/report.h"
#include "report/summary.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *dup_exact(const uint8_t *data, size_t size)
{
    char *copy = malloc(size ? size : 1);
    if (!copy) {
        abort();
    }
    memcpy(copy, data, size);
    return copy;
}

/* Compares a with b; what it writes must read back as a compare object. */
static void compare(const char *a, size_t alen, const char *b, size_t blen, int want)
{
    struct st_buf out, md;
    char err[512] = "";
    int drifted = -1;
    st_buf_init(&out);
    st_buf_init(&md);
    int rc = st_report_compare(a, alen, b, blen, "then/summary.json", 0.05, &out, &drifted, err,
                               sizeof(err));
    if ((want >= 0 && rc != want) || (drifted != 0 && drifted != 1)) {
        abort();
    }
    if (rc == 0) {
        char *copy = dup_exact((const uint8_t *)out.data, out.len);
        if (st_report_drift_md(copy, out.len, &md, err, sizeof(err)) != 0 || md.len == 0) {
            abort();
        }
        free(copy);
    } else if (rc != ST_EPARSE || err[0] == '\0' || out.len != 0) {
        abort();
    }
    st_buf_release(&out);
    st_buf_release(&md);
}

/* Read, write, read, write: the two writes are the same bytes. (The first write may not read:
 * a number the reader took as infinite is written null, which a non-nullable field refuses.) */
static void round_trip(const char *text, size_t len)
{
    struct st_sum_summary a, b;
    struct st_buf t1, t2;
    char err[512] = "";
    st_buf_init(&t1);
    st_buf_init(&t2);
    if (st_sum_load(&a, text, len, err, sizeof(err)) == 0) {
        st_sum_write(&a, &t1);
        char *c1 = dup_exact((const uint8_t *)t1.data, t1.len);
        if (st_sum_load(&b, c1, t1.len, err, sizeof(err)) == 0) {
            st_sum_write(&b, &t2);
            if (t1.len != t2.len || memcmp(t1.data, t2.data, t1.len) != 0) {
                abort();
            }
        }
        st_sum_pool_release(&b.pool);
        free(c1);
    }
    st_sum_pool_release(&a.pool);
    st_buf_release(&t1);
    st_buf_release(&t2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = dup_exact(data, size);
    char err[512] = "";
    struct st_buf md, html, drift;
    st_buf_init(&md);
    st_buf_init(&html);
    st_buf_init(&drift);
    int rc = st_report_md(copy, size, &md, err, sizeof(err));
    int rc2 = st_report_html(copy, size, &html, err, sizeof(err));
    if (rc != rc2 || (rc != 0 && (rc != ST_EPARSE || err[0] == '\0'))) {
        abort();
    }
    /* html.data is tested for gcc's -Wnonnull under -fsanitize (a non-empty buffer has data). */
    if (rc == 0 &&
        (md.len == 0 || html.len == 0 || !html.data || memmem(html.data, html.len, "://", 3) ||
         memmem(html.data, html.len, "<script", 7))) {
        abort();
    }
    compare(copy, size, copy, size, rc);
    round_trip(copy, size);
    int drc = st_report_drift_md(copy, size, &drift, err, sizeof(err));
    if (drc != 0 && drc != ST_EPARSE && drc != ST_ETOOBIG) {
        abort(); /* a summary is parsed or refused, nothing else */
    }
    const char *ff = memchr(copy, '\f', size);
    if (ff) {
        size_t alen = (size_t)(ff - copy);
        char *a = dup_exact((const uint8_t *)copy, alen);
        char *b = dup_exact((const uint8_t *)ff + 1, size - alen - 1);
        compare(a, alen, b, size - alen - 1, -1);
        free(a);
        free(b);
    }
    st_buf_release(&md);
    st_buf_release(&html);
    st_buf_release(&drift);
    free(copy);
    return 0;
}
