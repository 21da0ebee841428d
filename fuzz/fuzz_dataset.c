/*
 * libFuzzer target for src/workload/dataset.c and the dataset kind. The input is a ShareGPT-style
 * JSON array. A parse either fails with nothing kept, or gives conversations whose texts lie in
 * the pool, are valid UTF-8 and whose indexes and lines rise; a small dataset is then built into
 * a workload (no corpus, the simulator's rule) whose every item serves its conversation's prompt.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "workload/dataset.h"
#include "workload/item.h"
#include "workload/workload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int count(void *ctx, const char *text, size_t len, uint64_t *tokens, char *err,
                 size_t errlen)
{
    (void)ctx;
    (void)text;
    (void)err;
    (void)errlen;
    *tokens = (len + 3) / 4 + 1;
    return 0;
}

static void build(const char *text, size_t size, const struct st_dataset *ds)
{
    struct st_wl_params p;
    struct st_workload *wl = NULL;
    char err[512];
    st_wl_params_defaults(&p);
    p.kind = ST_WL_DATASET;
    p.chat = 0;
    p.data = text;
    p.data_len = size;
    int rc = st_workload_build(&wl, &p, NULL, NULL, 0, count, NULL, err, sizeof(err));
    if (rc != 0 || st_workload_items(wl) != ds->n) {
        abort();
    }
    struct st_buf scratch;
    st_buf_init(&scratch);
    for (uint64_t i = 0; i < ds->n; i++) {
        struct st_req_item item;
        st_buf_clear(&scratch);
        if (st_workload_source(wl, i, &item, &scratch) != 0 || item.max_tokens < 1) {
            abort();
        }
        int found = 0;
        for (uint64_t k = 0; k < ds->n && !found; k++) {
            found = ds->convos[k].prompt_len == item.prompt_len &&
                    memcmp(ds->pool.data + ds->convos[k].prompt, item.prompt, item.prompt_len) == 0;
        }
        if (!found) {
            abort();
        }
    }
    st_buf_release(&scratch);
    st_workload_free(wl);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct st_dataset ds;
    char err[256];
    char *copy = malloc(size ? size : 1);
    if (!copy) {
        abort();
    }
    memcpy(copy, data, size);
    int rc = st_dataset_parse(&ds, "fuzz.json", copy, size, err, sizeof(err));
    if (rc) {
        if (ds.n != 0 || ds.convos || ds.pool.len) {
            abort();
        }
        free(copy);
        return 0;
    }
    for (uint64_t i = 0; i < ds.n; i++) {
        const struct st_convo *c = &ds.convos[i];
        if (c->index >= ds.elems || c->line < 1 || c->prompt_len == 0 ||
            c->prompt + c->prompt_len > ds.pool.len || c->answer + c->answer_len > ds.pool.len ||
            !st_utf8_valid(ds.pool.data + c->prompt, c->prompt_len) ||
            (i > 0 && (c->index <= ds.convos[i - 1].index || c->line < ds.convos[i - 1].line))) {
            abort();
        }
    }
    if (ds.n > 0 && ds.n <= 64) {
        build(copy, size, &ds);
    }
    st_dataset_release(&ds);
    free(copy);
    return 0;
}
