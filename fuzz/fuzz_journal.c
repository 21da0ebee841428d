/*
 * libFuzzer target for st_journal_scan() in src/store/journal.c: arbitrary bytes as a journal
 * file, with the unit rules applied. Checks the scanner's promises: records come in seq order
 * with line = seq + 1 and pointers inside the input; on success the valid prefix plus the dropped
 * tail is the whole input, the prefix holds exactly one LF per record, the tail is at most one
 * line long (or a torn header), and scanning the prefix alone gives the same records, no tail.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/journal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
    const char *base;
    size_t size;
    uint64_t n;
};

static int check_rec(void *ctx, const struct st_journal_rec *rec)
{
    struct seen *s = ctx;
    if (rec->seq != s->n || rec->line != rec->seq + 1 || rec->kind_len == 0 ||
        rec->kind < s->base || rec->kind + rec->kind_len > s->base + s->size ||
        rec->json < s->base || rec->json + rec->json_len > s->base + s->size ||
        memchr(rec->json, '\n', rec->json_len) != NULL || rec->unit != NULL ||
        rec->state != ST_JOURNAL_LIVE) {
        abort();
    }
    s->n++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A private copy, so that a read one past the input is caught. */
    char *copy = malloc(size ? size : 1);
    if (!copy) {
        abort();
    }
    memcpy(copy, data, size);
    struct st_journal_units u;
    st_journal_units_init(&u);
    struct seen s = {.base = copy, .size = size};
    struct st_journal_scan sc;
    char err[256];
    int rc = st_journal_scan(copy, size, &u, check_rec, &s, &sc, err, sizeof(err));
    if (rc == 0) {
        size_t lfs = 0;
        for (size_t i = 0; i < sc.good_len; i++) {
            lfs += copy[i] == '\n';
        }
        if (sc.good_len + sc.tail_len != size || lfs != sc.records || s.n != sc.records ||
            (sc.good_len > 0 && copy[sc.good_len - 1] != '\n') ||
            (sc.tail_len > 0 && sc.bad_line != sc.records + 1) ||
            sc.tail_len > ST_JOURNAL_MAX_LINE_BYTES) {
            abort();
        }
        struct st_journal_units u2;
        st_journal_units_init(&u2);
        struct seen s2 = {.base = copy, .size = sc.good_len};
        struct st_journal_scan sc2;
        if (st_journal_scan(copy, sc.good_len, &u2, check_rec, &s2, &sc2, NULL, 0) != 0 ||
            sc2.records != sc.records || sc2.tail_len != 0 || sc2.good_len != sc.good_len ||
            u2.n_done != u.n_done || (u2.open_id == NULL) != (u.open_id == NULL)) {
            abort();
        }
        st_journal_units_release(&u2);
    } else if (rc != ST_EPROTO) {
        abort();
    }
    st_journal_units_release(&u);
    free(copy);
    return 0;
}
