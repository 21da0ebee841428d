/*
 * libFuzzer target for the window map reader (src/workload/windows.c) and builds from a map. A
 * map that parses is written back and read again, and the two writes must be the same bytes.
 * Maps of the synthetic kinds are then built against a 64 KiB built-in corpus (seed 1; the seed
 * corpus in fuzz/corpus/windows/ was made against it, so the hash matches) with parameters taken
 * from the map: the build succeeds or refuses with a message, and a success serves every item and
 * every warm-up item without reading outside the corpus.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "workload/corpus.h"
#include "workload/item.h"
#include "workload/windows.h"
#include "workload/workload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int count(void *ctx, const char *text, size_t len, uint64_t *tokens, char *err,
                 size_t errlen)
{
    (void)ctx;
    (void)err;
    (void)errlen;
    uint64_t cp = 0;
    for (size_t i = 0; i < len; i++) {
        cp += ((unsigned char)text[i] & 0xC0) != 0x80;
    }
    *tokens = (cp + 24 + 3) / 4;
    return 0;
}

static struct st_corpus corpus;

static void serve(const struct st_workload *wl)
{
    struct st_buf scratch;
    struct st_json d;
    st_buf_init(&scratch);
    st_json_init(&d, 0);
    for (uint64_t i = 0; i < st_workload_items(wl); i++) {
        struct st_req_item item;
        st_buf_clear(&scratch);
        if (st_workload_source(wl, i, &item, &scratch) != 0 ||
            st_json_parse(&d, item.tag_json, item.tag_len) != 0) {
            abort();
        }
        if (item.messages_json && st_json_parse(&d, item.messages_json, item.messages_len) != 0) {
            abort();
        }
    }
    for (uint32_t g = 0; g < st_workload_prefix_groups(wl); g++) {
        struct st_req_item item;
        st_buf_clear(&scratch);
        if (st_workload_warm_item(wl, g, &item, &scratch) != 0) {
            abort();
        }
    }
    st_json_release(&d);
    st_buf_release(&scratch);
}

static void build(const struct st_wplan *pl, const char *text, size_t size)
{
    struct st_wl_params p;
    struct st_workload *wl = NULL;
    char err[512];
    if (pl->kind == ST_WL_TRACE || pl->kind == ST_WL_DATASET || pl->nitems == 0) {
        return;
    }
    st_wl_params_defaults(&p);
    p.kind = pl->kind;
    p.chat = pl->chat;
    p.requests = pl->nitems;
    p.input_len = 1;
    p.input_len_max = 1;
    for (uint64_t i = 0; i < pl->nitems; i++) {
        if (pl->items[i].requested > p.input_len_max) {
            p.input_len_max = pl->items[i].requested;
        }
    }
    p.output_len = 8;
    p.turns = 2;
    p.groups = pl->ngroups ? pl->ngroups : 1;
    p.prefix_frac = pl->ngroups ? 0.5 : 0;
    p.len_tolerance = 1e9;
    if (pl->kind == ST_WL_MIXED) {
        p.n_mix = 5;
        for (int k = 0; k < 5; k++) {
            p.mix_kind[k] = (enum st_wl_kind)(ST_WL_FIXED + k);
            p.mix_weight[k] = 1;
        }
    }
    int rc = st_workload_build(&wl, &p, &corpus, text, size, count, NULL, err, sizeof(err));
    if (rc) {
        if (wl || err[0] == '\0') {
            abort();
        }
        return;
    }
    serve(wl);
    st_workload_free(wl);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct st_wplan pl, again;
    struct st_buf out1, out2;
    char err[256];
    char *copy = malloc(size ? size : 1);
    if (!copy) {
        abort();
    }
    memcpy(copy, data, size);
    if (!corpus.text) {
        st_corpus_builtin(&corpus, 1, 64 * 1024);
    }
    st_wplan_init(&pl);
    st_wplan_init(&again);
    st_buf_init(&out1);
    st_buf_init(&out2);
    if (st_wplan_windows_parse(&pl, copy, size, "fuzz", err, sizeof(err)) == 0) {
        st_wplan_windows_json(&pl, &out1);
        if (st_wplan_windows_parse(&again, out1.data, out1.len, "again", err, sizeof(err)) != 0) {
            abort();
        }
        st_wplan_windows_json(&again, &out2);
        if (out1.len != out2.len || memcmp(out1.data, out2.data, out1.len) != 0) {
            abort();
        }
        build(&pl, copy, size);
    }
    st_buf_release(&out1);
    st_buf_release(&out2);
    st_wplan_release(&pl);
    st_wplan_release(&again);
    free(copy);
    return 0;
}
