/*
 * libFuzzer target for src/proto/prom.c. The input is one /metrics scrape, copied into a heap
 * block of its exact size (so a read past it is caught). A parse either fails with ST_EPARSE and
 * a line number inside the input or ST_ETOOBIG, leaving nothing behind, or succeeds with samples
 * whose strings lie in the arena, whose labels lie in the label array, whose names follow the
 * grammar, and whose lookups find them; parsing the same bytes again gives the same samples.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/prom.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int in_arena(const struct st_prom *p, const char *s)
{
    return s >= p->arena && s < p->arena + p->arena_len &&
           memchr(s, '\0', (size_t)(p->arena + p->arena_len - s)) != NULL;
}

static int name_ok(const char *s, int colon)
{
    if (!s[0]) {
        return 0;
    }
    for (size_t i = 0; s[i]; i++) {
        char c = s[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                 (colon && c == ':') || (i > 0 && c >= '0' && c <= '9');
        if (!ok) {
            return 0;
        }
    }
    return 1;
}

static void check(const struct st_prom *p)
{
    for (uint32_t i = 0; i < p->n; i++) {
        const struct st_prom_sample *s = &p->samples[i];
        if (!in_arena(p, s->name) || !name_ok(s->name, 1) || !strchr("cghsu", s->type) ||
            s->type == '\0') {
            abort();
        }
        if (s->n_labels > 0 &&
            (s->labels < p->labels || s->labels + s->n_labels > p->labels + p->n_labels_total)) {
            abort();
        }
        for (uint32_t k = 0; k < s->n_labels; k++) {
            if (!in_arena(p, s->labels[k].name) || !in_arena(p, s->labels[k].value) ||
                !name_ok(s->labels[k].name, 0) || st_prom_label(s, s->labels[k].name) == NULL) {
                abort();
            }
        }
        double v;
        if (st_prom_find(p, s->name) == NULL || st_prom_sum(p, s->name, NULL, &v) != 0) {
            abort();
        }
    }
}

static size_t count_lines(const uint8_t *data, size_t size)
{
    size_t n = size ? 1 : 0;
    for (size_t i = 0; i + 1 < size; i++) {
        n += data[i] == '\n';
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size ? size : 1);
    if (!copy) {
        abort();
    }
    memcpy(copy, data, size);
    struct st_prom p, q;
    uint32_t line = 0, line2 = 0;
    st_prom_init(&p);
    st_prom_init(&q);
    int rc = st_prom_parse(&p, copy, size, &line);
    int rc2 = st_prom_parse(&q, copy, size, &line2);
    if (rc != rc2 || line != line2 || p.n != q.n) {
        abort();
    }
    if (rc == 0) {
        if (line != 0) {
            abort();
        }
        check(&p);
        for (uint32_t i = 0; i < p.n; i++) {
            double a = p.samples[i].value, b = q.samples[i].value;
            if (strcmp(p.samples[i].name, q.samples[i].name) != 0 ||
                memcmp(&a, &b, sizeof(a)) != 0) {
                abort();
            }
        }
    } else if (rc == ST_EPARSE) {
        if (line == 0 || line > count_lines(data, size) || p.n != 0 || p.samples != NULL) {
            abort();
        }
    } else if (rc != ST_ETOOBIG || p.n != 0) {
        abort();
    }
    st_prom_release(&p);
    st_prom_release(&q);
    free(copy);
    return 0;
}
