/*
 * libFuzzer target for src/workload/trace.c and the trace kind. The input is a Mooncake trace.
 * A parse either fails with nothing kept, or gives requests whose lines rise, timestamps never
 * fall and hash ids add up; the dense block numbering stays in range. Small traces are then built
 * into a workload (16-token blocks, the simulator's 4-code-point rule, a 256 KiB built-in corpus):
 * the build succeeds or refuses cleanly, and a success serves every item with its exact length.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "workload/corpus.h"
#include "workload/item.h"
#include "workload/trace.h"
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

static void build(const char *text, size_t size)
{
    struct st_wl_params p;
    struct st_workload *wl = NULL;
    char err[512];
    st_wl_params_defaults(&p);
    p.kind = ST_WL_TRACE;
    p.data = text;
    p.data_len = size;
    p.data_name = "fuzz.jsonl";
    p.block_tokens = 16;
    p.len_tolerance = 1;
    if (!corpus.text) {
        st_corpus_builtin(&corpus, 1, 256 * 1024);
    }
    int rc = st_workload_build(&wl, &p, &corpus, NULL, 0, count, NULL, err, sizeof(err));
    if (rc) {
        if (wl || err[0] == '\0') {
            abort();
        }
        return;
    }
    struct st_buf scratch;
    st_buf_init(&scratch);
    for (uint64_t i = 0; i < st_workload_items(wl); i++) {
        struct st_req_item item;
        uint64_t req, cnt;
        st_buf_clear(&scratch);
        if (st_workload_source(wl, i, &item, &scratch) != 0) {
            abort();
        }
        st_workload_tokens(wl, i, &req, &cnt);
        uint64_t served;
        count(NULL, item.prompt, item.prompt_len, &served, NULL, 0);
        if (served != cnt || (req > 6 && cnt != req)) {
            abort();
        }
    }
    st_buf_release(&scratch);
    st_workload_free(wl);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct st_trace t;
    char err[256];
    char *copy = malloc(size ? size : 1);
    if (!copy) {
        abort();
    }
    memcpy(copy, data, size);
    int rc = st_trace_parse(&t, "fuzz.jsonl", copy, size, err, sizeof(err));
    if (rc) {
        if (t.n != 0 || t.reqs || t.ids) {
            abort();
        }
        free(copy);
        return 0;
    }
    uint64_t ids = 0, tokens = 0;
    for (uint64_t i = 0; i < t.n; i++) {
        const struct st_trace_req *r = &t.reqs[i];
        if (r->id0 != ids || r->input_len < 1 || r->output_len < 1 ||
            (i > 0 &&
             (r->line <= t.reqs[i - 1].line || r->timestamp_ms < t.reqs[i - 1].timestamp_ms))) {
            abort();
        }
        ids += r->nids;
        tokens += r->input_len;
    }
    if (ids != t.nids) {
        abort();
    }
    uint32_t *block_of = malloc((size_t)(t.nids ? t.nids : 1) * sizeof(*block_of));
    uint64_t n = st_trace_blocks(&t, t.n, block_of);
    for (uint64_t k = 0; k < t.nids; k++) {
        if (block_of[k] >= n) {
            abort();
        }
    }
    free(block_of);
    if (tokens <= 8192 && t.n <= 64) {
        build(copy, size);
    }
    st_trace_release(&t);
    free(copy);
    return 0;
}
