/*
 * Recorded workloads: Mooncake traces (a window a distinct hash id, prompts made of those blocks,
 * groups of shared leading blocks) and ShareGPT datasets (a seeded sample of conversations). See
 * build.h and docs/workloads.md.
 */
#include "workload/build.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"

/* ---- trace ---- */

struct block {
    uint64_t off;
    uint64_t bytes;
};

/* Groups of trace requests that share leading blocks: requests whose first block is the same
 * (and full) form a group when there are two or more; the group's prefix is the run of full
 * blocks they all share. */
static int trace_groups(struct st_builder *b, const struct st_trace *t, uint64_t n,
                        const uint32_t *block_of, const uint32_t *full, uint64_t item0,
                        uint64_t nblocks, const struct block *blk)
{
    uint32_t *first = st_xmalloc((size_t)(nblocks ? nblocks : 1) * sizeof(*first));
    uint32_t *members = st_xcalloc((size_t)(nblocks ? nblocks : 1), sizeof(*members));
    uint32_t *common = st_xcalloc((size_t)(nblocks ? nblocks : 1), sizeof(*common));
    uint32_t *gid = st_xmalloc((size_t)(nblocks ? nblocks : 1) * sizeof(*gid));
    int rc = 0;
    for (uint64_t k = 0; k < nblocks; k++) {
        gid[k] = ST_WPLAN_NONE;
    }
    for (uint64_t i = 0; i < n; i++) {
        if (full[i] == 0) {
            continue;
        }
        const uint32_t *ids = block_of + t->reqs[i].id0;
        uint32_t f0 = ids[0];
        if (members[f0] == 0) {
            first[f0] = (uint32_t)i;
            common[f0] = full[i];
        } else {
            const uint32_t *ref = block_of + t->reqs[first[f0]].id0;
            uint32_t c = 0, lim = common[f0] < full[i] ? common[f0] : full[i];
            while (c < lim && ref[c] == ids[c]) {
                c++;
            }
            common[f0] = c;
        }
        members[f0]++;
    }
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        if (full[i] == 0) {
            continue;
        }
        uint32_t f0 = block_of[t->reqs[i].id0];
        if (members[f0] < 2) {
            continue;
        }
        if (gid[f0] == ST_WPLAN_NONE) {
            const uint32_t *ids = block_of + t->reqs[first[f0]].id0;
            uint64_t part0 = b->pl->nparts;
            for (uint32_t k = 0; k < common[f0]; k++) {
                st_wplan_add_part(b->pl, ST_PART_WIN, blk[ids[k]].off, blk[ids[k]].bytes, 0);
            }
            gid[f0] = st_wplan_add_group(b->pl, part0, common[f0]);
            st_buf_clear(&b->head);
            st_wl_put_parts(b, part0, common[f0], &b->head);
            rc = st_fitter_count(&b->f, b->head.data ? b->head.data : "", b->head.len,
                                 &b->pl->groups[gid[f0]].counted);
        }
        b->pl->items[item0 + i].group = gid[f0];
    }
    free(first);
    free(members);
    free(common);
    free(gid);
    return rc;
}

/* Fits the blocks, one window each of block_tokens tokens, in order of first appearance. */
static int trace_blocks(struct st_builder *b, uint64_t nblocks, struct block *blk)
{
    for (uint64_t k = 0; k < nblocks; k++) {
        struct st_wl_asm a;
        struct st_fit q;
        st_wl_asm_init(&a, b);
        st_wl_fit_init(&q, &a, b->p->block_tokens + b->f.overhead, b->f.overhead);
        int rc = st_wl_lay_window(b, &q, &a);
        if (rc) {
            return rc;
        }
        blk[k].off = a.off;
        blk[k].bytes = q.win_bytes;
    }
    return 0;
}

/* One trace request: its leading blocks whole, the last one cut to make the length, and a
 * fresh window after them when the blocks are too few. *full gets the blocks used whole. */
static int trace_item(struct st_builder *b, const struct st_trace *t, uint64_t i,
                      const uint32_t *block_of, const struct block *blk, uint32_t *full)
{
    const struct st_trace_req *r = &t->reqs[i];
    uint64_t bt = b->p->block_tokens, overhead = b->f.overhead;
    uint64_t content = r->input_len > overhead ? r->input_len - overhead : 1;
    uint64_t k = (content + bt - 1) / bt;
    if (k > r->nids) {
        k = r->nids;
    }
    const uint32_t *ids = block_of + r->id0;
    struct st_wplan_item *it = st_wplan_add_item(b->pl, ST_WL_TRACE);
    uint64_t idx = b->pl->nitems - 1;
    it->source = (int64_t)r->line;
    it->max_tokens = (int64_t)r->output_len;
    it->t_offset_ns = (uint64_t)llround((r->timestamp_ms - t->reqs[0].timestamp_ms) * 1e6);
    st_buf_clear(&b->head);
    for (uint64_t j = 0; j + 1 < k; j++) {
        const struct block *bl = &blk[ids[j]];
        st_wplan_add_part(b->pl, ST_PART_WIN, bl->off, bl->bytes, 0);
        st_buf_append(&b->head, b->text + bl->off, (size_t)bl->bytes);
    }
    *full = k ? (uint32_t)(k - 1) : 0;
    struct st_wl_asm a;
    struct st_fit q;
    int rc = ST_ETOOBIG;
    if (k > 0) {
        const struct block *bl = &blk[ids[k - 1]];
        st_wl_asm_init(&a, b);
        a.head = b->head.data ? b->head.data : "";
        a.head_len = b->head.len;
        a.off = bl->off;
        st_wl_fit_init(&q, &a, r->input_len, overhead + (k - 1) * bt);
        q.off = bl->off;
        q.limit = bl->off + bl->bytes;
        rc = st_fit_window(&b->f, &q);
        if (rc == 0) {
            st_wplan_add_part(b->pl, ST_PART_WIN, bl->off, q.win_bytes, 0);
            if (q.win_bytes == bl->bytes) {
                (*full)++;
            }
        } else if (rc == ST_ETOOBIG) {
            st_wplan_add_part(b->pl, ST_PART_WIN, bl->off, bl->bytes, 0);
            st_buf_append(&b->head, b->text + bl->off, (size_t)bl->bytes);
            (*full)++;
        }
    }
    if (rc == ST_ETOOBIG) {
        /* The ids cover fewer tokens than the request has: a fresh window for the rest. */
        st_wl_asm_init(&a, b);
        a.head = b->head.data ? b->head.data : "";
        a.head_len = b->head.len;
        st_wl_fit_init(&q, &a, r->input_len, overhead + k * bt);
        rc = st_wl_lay_window(b, &q, &a);
        if (rc == 0) {
            st_wplan_add_part(b->pl, ST_PART_WIN, a.off, q.win_bytes, 0);
        }
    }
    if (rc == 0) {
        st_wl_close_item(b, idx, r->input_len, q.counted);
    }
    return rc;
}

int st_wl_fit_trace(struct st_builder *b, const struct st_trace *t, uint64_t n)
{
    struct st_rng rw = st_wl_stream(b->p->seed, ST_WL_KEY_WINDOWS);
    uint32_t *block_of = st_xmalloc((size_t)(t->nids ? t->nids : 1) * sizeof(*block_of));
    uint32_t *full = st_xcalloc((size_t)(n ? n : 1), sizeof(*full));
    struct block *blk = NULL;
    uint64_t nblocks = st_trace_blocks(t, n, block_of);
    uint64_t item0 = b->pl->nitems;
    int rc = st_wl_calibrate(b, &rw);
    if (rc) {
        goto out;
    }
    uint64_t tokens = nblocks * b->p->block_tokens;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t covered = (uint64_t)t->reqs[i].nids * b->p->block_tokens + b->f.overhead;
        tokens += t->reqs[i].input_len > covered ? t->reqs[i].input_len - covered : 0;
    }
    rc = st_wl_check_size(b, tokens, n);
    if (rc) {
        goto out;
    }
    st_wl_place_base(b, &rw);
    blk = st_xcalloc((size_t)(nblocks ? nblocks : 1), sizeof(*blk));
    rc = trace_blocks(b, nblocks, blk);
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        rc = trace_item(b, t, i, block_of, blk, &full[i]);
    }
    if (rc == 0) {
        rc = trace_groups(b, t, n, block_of, full, item0, nblocks, blk);
    }
out:
    free(blk);
    free(full);
    free(block_of);
    return rc;
}

/* ---- dataset ---- */

int st_wl_fit_dataset(struct st_builder *b, const struct st_dataset *ds, uint64_t n)
{
    struct st_rng rd = st_wl_stream(b->p->seed, ST_WL_KEY_DATASET);
    uint64_t *order = st_xmalloc((size_t)(ds->n ? ds->n : 1) * sizeof(*order));
    int rc = 0;
    for (uint64_t i = 0; i < ds->n; i++) {
        order[i] = i;
    }
    for (uint64_t i = ds->n; i > 1; i--) {
        uint64_t j = st_rng_below(&rd, i);
        uint64_t tmp = order[i - 1];
        order[i - 1] = order[j];
        order[j] = tmp;
    }
    if (b->p->output_len == 0) {
        rc = st_fitter_count(&b->f, "", 0, &b->f.overhead);
    }
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        const struct st_convo *c = &ds->convos[order[i]];
        const char *pool = ds->pool.data;
        uint64_t counted, answer = 0;
        rc = st_fitter_count(&b->f, pool + c->prompt, (size_t)c->prompt_len, &counted);
        if (rc == 0 && b->p->output_len == 0) {
            rc = st_fitter_count(&b->f, pool + c->answer, (size_t)c->answer_len, &answer);
        }
        if (rc) {
            break;
        }
        struct st_wplan_item *it = st_wplan_add_item(b->pl, ST_WL_DATASET);
        it->source = (int64_t)c->index;
        answer = answer > b->f.overhead ? answer - b->f.overhead : 1;
        it->max_tokens = (int64_t)answer;
        uint64_t off = st_wplan_pool_add(b->pl, pool + c->prompt, (size_t)c->prompt_len);
        st_wplan_add_part(b->pl, ST_PART_TEXT, off, c->prompt_len, 0);
        st_wl_close_item(b, b->pl->nitems - 1, counted, counted);
    }
    free(order);
    return rc;
}
