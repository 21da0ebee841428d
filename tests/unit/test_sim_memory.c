/*
 * Tests for src/sim/model/memory.c: the memory plan against hand-computed tables (weights under
 * TP/PP/DP attention, MLA/GQA/indexer/draft KV, reserves, page rounding, startup failures in each
 * dialect's words), and golden tests against the two seed reports: seed 000's KV capacity per MTP
 * step count and prefill batch, seed 003's pools per TP/PP/DP-attention/EAGLE arm. Seed figures
 * must keep their order exactly and their magnitude within 15% (docs/simulator.md, "Calibration
 * to the seeds"). The seed profiles are built here in C and checked against the files in profiles/.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "sim/model/memory.h"
#include "sim/model/profile.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MIB (1024.0 * 1024.0)
#define DOC_TOKENS (131072 + 512) /* one 128K document and its 512-token answer */

/* ---- helpers ---- */

/* |got / want - 1| <= tol, with a message naming the figure. */
static void assert_near(const char *what, double got, double want, double tol)
{
    double rel = got / want - 1;
    if (fabs(rel) > tol) {
        fail_msg("%s: got %.6g, want %.6g within %.0f%% (off by %+.1f%%)", what, got, want,
                 tol * 100, rel * 100);
    }
}

static struct st_mem_plan plan_of(const struct st_profile *p)
{
    struct st_mem_plan m;
    st_mem_plan_compute(p, &m);
    return m;
}

/* Seed 000, as profiles/seed000-vl-mtp.yaml, with mtp draft steps and a prefill batch. */
static void seed000(struct st_profile *p, uint32_t mtp, uint32_t batch)
{
    st_profile_defaults(p);
    struct st_profile_model *m = &p->model;
    struct st_profile_hw *h = &p->hw;
    struct st_profile_engine *e = &p->engine;
    snprintf(m->name, sizeof(m->name), "vl-moe-mtp");
    m->layers = 44;
    m->kv_layers = 11;
    m->hidden = 4096;
    m->heads = 48;
    m->kv_heads = 6;
    m->head_dim = 128;
    m->attention = ST_ATTN_GQA;
    m->params_total = 88.07e9;
    m->params_active = 7e9;
    m->params_dense = 5e9;
    m->weight_bytes = 1;
    m->dense_weight_bytes = 2;
    m->mtp_layers = 1;
    m->vision_params = 0.6e9;
    m->vision_patch = 32;
    m->vocab = 151936;
    h->gpus = 1;
    h->gpu_mem_bytes = 97887 * MIB;
    h->hbm_bytes_per_s = 1.792e12;
    h->flops_bf16 = 500e12;
    h->flops_fp8 = 1000e12;
    h->flops_fp4 = 2000e12;
    h->link_bytes_per_s = 64e9;
    h->link_latency_s = 20e-6;
    h->eff_matmul = 0.69;
    h->eff_attn = 0.44;
    h->eff_mem = 0.85;
    h->eff_link = 0.7;
    e->dialect = ST_DIALECT_VLLM;
    e->tp = 1;
    e->pp = 1;
    e->dp_attention = 1;
    e->mem_fraction = 0.985;
    e->kv_dtype_bytes = 1;
    e->page_size = 16;
    e->max_batched_tokens = batch;
    e->max_running = 1;
    e->admit_output_reserve = 0;
    e->context_length = 131072;
    e->prefix_caching = 1;
    e->spec_method = ST_SPEC_MTP;
    e->spec_steps = mtp;
    e->spec_accept[0] = 0.853;
    e->spec_accept[1] = 0.625;
    e->spec_accept[2] = 0.636;
    e->n_spec_accept = 3;
    e->spec_accept_halflife_tokens = 0;
    /* The trial captured graphs for the verify length: [1, 2], [1, 3], [1, 4]. */
    e->graph_sizes[0] = 1;
    e->graph_sizes[1] = mtp + 1;
    e->n_graph_sizes = 2;
    e->graph_bytes_per_size = 128 * MIB;
    e->act_bytes_per_token = 188744;
    e->reserve_bytes = 1 * GIB;
    e->step_overhead_s = 6.6e-3;
    e->startup_s = 180;
    p->quality.error_rate = 0;
    p->seed = 1;
}

/* Seed 003, as profiles/seed003-mla-moe-8gpu.yaml (arm A6), then the arm's parallel layout. */
static void seed003(struct st_profile *p, uint32_t tp, uint32_t pp, uint32_t dp,
                    double mem_fraction, enum st_spec_method spec)
{
    st_profile_defaults(p);
    struct st_profile_model *m = &p->model;
    struct st_profile_hw *h = &p->hw;
    struct st_profile_engine *e = &p->engine;
    snprintf(m->name, sizeof(m->name), "glm-5.3-nvfp4");
    m->layers = 78;
    m->hidden = 6144;
    m->heads = 64;
    m->kv_heads = 64;
    m->head_dim = 256;
    m->attention = ST_ATTN_MLA;
    m->kv_lora_rank = 512;
    m->qk_rope_dim = 64;
    m->indexer_head_dim = 128;
    m->indexer_topk = 2048;
    m->params_total = 744e9;
    m->params_active = 41.75e9;
    m->params_dense = 19.1e9;
    m->weight_bytes = 0.5625;
    m->dense_weight_bytes = 1.35;
    m->kv_layers = 0;
    m->mtp_layers = 1;
    m->draft_params = 1.0e9;
    m->draft_layers = 1;
    m->vision_params = 0;
    m->vision_patch = 28;
    m->vocab = 154880;
    h->gpus = 8;
    h->gpu_mem_bytes = 97887 * MIB;
    h->hbm_bytes_per_s = 1.792e12;
    h->flops_bf16 = 500e12;
    h->flops_fp8 = 1000e12;
    h->flops_fp4 = 2000e12;
    h->link_bytes_per_s = 64e9;
    h->link_latency_s = 45e-6;
    h->eff_matmul = 0.6;
    h->eff_attn = 0.036;
    h->eff_mem = 0.7;
    h->eff_link = 0.5;
    e->dialect = ST_DIALECT_SGLANG;
    e->tp = 4;
    e->pp = 2;
    e->dp_attention = 1;
    e->mem_fraction = 0.90;
    e->kv_dtype_bytes = 1;
    e->page_size = 64;
    e->max_batched_tokens = 8192;
    e->max_running = 64;
    e->admit_output_reserve = 1;
    e->context_length = 1048576;
    e->prefix_caching = 1;
    e->spec_method = ST_SPEC_NONE;
    e->spec_steps = 0;
    for (uint32_t i = 0; i < 3; i++) {
        e->spec_accept[i] = 0.98;
    }
    e->n_spec_accept = 3;
    e->spec_accept_halflife_tokens = 165000;
    static const uint32_t graphs[] = {1, 2, 4, 8, 16, 24, 32, 48, 64};
    memcpy(e->graph_sizes, graphs, sizeof(graphs));
    e->n_graph_sizes = sizeof(graphs) / sizeof(graphs[0]);
    e->graph_bytes_per_size = 0;
    e->act_bytes_per_token = 0;
    e->reserve_bytes = 20.318e9;
    e->step_overhead_s = 6.25e-3;
    e->startup_s = 420;
    p->quality.error_rate = 0;
    p->seed = 1;

    /* The arm. */
    e->tp = tp;
    e->pp = pp;
    e->dp_attention = dp;
    e->mem_fraction = mem_fraction;
    e->spec_method = spec;
    if (spec == ST_SPEC_EAGLE) {
        e->spec_steps = 4;
        for (uint32_t i = 0; i < 4; i++) {
            e->spec_accept[i] = 0.815;
        }
        e->n_spec_accept = 4;
        e->spec_accept_halflife_tokens = 0;
    } else if (spec == ST_SPEC_MTP) {
        e->spec_steps = 3;
    }
}

/* The seed-003 arms (the seed does not give the mem-fraction of A3's recipe; 0.88 is fitted). */
static void arm_a1(struct st_profile *p)
{
    seed003(p, 2, 4, 1, 0.85, ST_SPEC_NONE);
}

static void arm_a6(struct st_profile *p)
{
    seed003(p, 4, 2, 1, 0.90, ST_SPEC_NONE);
}

static void arm_a3(struct st_profile *p, uint32_t dp)
{
    seed003(p, 8, 1, dp, 0.88, ST_SPEC_EAGLE);
}

/* A small dense model for hand-computed tables: 1 GB of bf16 weights, 2 KV heads of 64. */
static void tiny(struct st_profile *p)
{
    st_profile_defaults(p);
    p->model.layers = 4;
    p->model.heads = 8;
    p->model.kv_heads = 2;
    p->model.head_dim = 64;
    p->model.attention = ST_ATTN_GQA;
    p->model.params_total = p->model.params_active = p->model.params_dense = 0.5e9;
    p->model.weight_bytes = 2;
    p->model.dense_weight_bytes = 0;
    p->hw.gpus = 8;
    p->hw.gpu_mem_bytes = 10e9;
    p->engine.mem_fraction = 0.9;
    p->engine.kv_dtype_bytes = 2;
    p->engine.page_size = 16;
    p->engine.max_batched_tokens = 1000;
    p->engine.act_bytes_per_token = 1000;
    p->engine.n_graph_sizes = 4;
    p->engine.graph_bytes_per_size = 1e6;
    p->engine.reserve_bytes = 1e9;
    p->engine.context_length = 4096;
}

static int read_profile(struct st_profile *p, const char *file)
{
    const char *dir = getenv("ST_PROFILES_DIR");
    char path[1024];
    static char text[1 << 16];
    snprintf(path, sizeof(path), "%s/%s", dir ? dir : "profiles", file);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fail_msg("cannot open %s (set ST_PROFILES_DIR)", path);
    }
    size_t n = fread(text, 1, sizeof(text), f);
    fclose(f);
    char err[512] = "";
    st_profile_defaults(p);
    int rc = st_profile_parse(p, text, n, path, err, sizeof(err));
    if (rc) {
        fail_msg("%s", err);
    }
    rc = st_profile_validate(p, err, sizeof(err));
    if (rc) {
        fail_msg("%s", err);
    }
    return rc;
}

/* Two profiles are equal when they emit the same YAML (every key, in table order). */
static void assert_same_profile(const struct st_profile *a, const struct st_profile *b)
{
    struct st_buf x, y;
    st_buf_init(&x);
    st_buf_init(&y);
    st_profile_emit(a, &x);
    st_profile_emit(b, &y);
    st_buf_append(&x, "", 1);
    st_buf_append(&y, "", 1);
    assert_string_equal(x.data, y.data);
    st_buf_release(&x);
    st_buf_release(&y);
}

/* ---- hand-computed tables ---- */

static void test_tiny_table(void **state)
{
    (void)state;
    struct st_profile p;
    tiny(&p);
    struct st_mem_plan m = plan_of(&p);
    /* Weights 1e9 B; act 1000 * 1000; graphs 4 * 1e6; reserve 1e9; usable 9e9. */
    assert_true(m.weights_bytes_per_gpu == 1e9);
    assert_true(m.act_bytes == 1e6);
    assert_true(m.graph_bytes == 4e6);
    assert_true(m.usable_bytes == 9e9);
    assert_true(m.kv_budget_bytes == 9e9 - 1e9 - 1e6 - 4e6 - 1e9);
    /* KV: 2 (K and V) * 2 heads * 64 * 2 bytes = 512 B per layer, 4 layers. */
    assert_true(m.kv_bytes_per_token_layer == 512);
    assert_true(m.kv_bytes_per_token == 2048);
    uint64_t tokens = (uint64_t)floor(m.kv_budget_bytes / 2048);
    assert_int_equal(m.kv_pool_tokens, tokens / 16 * 16);
    assert_int_equal(m.kv_pool_blocks * 16, m.kv_pool_tokens);
    assert_int_equal(m.layers_per_gpu, 4);
    assert_int_equal(m.attn_tp, 1);
    assert_true(m.fits);
    assert_string_equal(m.reason, "");
}

static void test_tp_pp_split(void **state)
{
    (void)state;
    struct st_profile p;
    tiny(&p);
    p.engine.tp = 2;
    struct st_mem_plan m = plan_of(&p);
    /* GQA shards KV heads over TP while there are heads to split. */
    assert_true(m.weights_bytes_per_gpu == 0.5e9);
    assert_true(m.kv_bytes_per_token_layer == 256);
    p.engine.tp = 4; /* more GPUs than KV heads: one head per GPU, replicated */
    m = plan_of(&p);
    assert_true(m.kv_bytes_per_token_layer == 256);
    assert_true(m.weights_bytes_per_gpu == 0.25e9);

    /* PP: ceil(layers / pp) on the most loaded GPU, for weights and KV. */
    tiny(&p);
    p.model.layers = 5;
    p.engine.pp = 2;
    m = plan_of(&p);
    assert_int_equal(m.layers_per_gpu, 3);
    assert_int_equal(m.kv_layers_per_gpu, 3);
    assert_true(fabs(m.weights_bytes_per_gpu - 1e9 * 3 / 5) < 1);
    assert_true(m.kv_bytes_per_token == 3 * 512);

    /* MLA: the latent is replicated on every TP rank, whatever tp is. */
    tiny(&p);
    p.model.attention = ST_ATTN_MLA;
    p.model.kv_lora_rank = 512;
    p.model.qk_rope_dim = 64;
    double per_layer[3];
    for (uint32_t i = 0; i < 3; i++) {
        p.engine.tp = 1u << (i * 2);
        per_layer[i] = plan_of(&p).kv_bytes_per_token_layer;
    }
    assert_true(per_layer[0] == 576 * 2 && per_layer[1] == 576 * 2 && per_layer[2] == 576 * 2);

    /* The sparse-attention indexer: 1 byte per element plus a 4-byte scale per 128. */
    p.engine.kv_dtype_bytes = 1;
    p.model.indexer_head_dim = 128;
    p.model.indexer_topk = 2048;
    m = plan_of(&p);
    assert_true(m.indexer_bytes_per_layer == 132);
    assert_true(m.kv_bytes_per_token_layer == 576 + 132);
}

static void test_moe_and_dp_attention(void **state)
{
    (void)state;
    struct st_profile p;
    tiny(&p);
    p.model.params_total = 10e9; /* 8e9 expert, 2e9 dense */
    p.model.params_active = 3e9;
    p.model.params_dense = 2e9;
    p.model.weight_bytes = 0.5;
    p.model.dense_weight_bytes = 2;
    p.model.heads = 8;
    p.engine.tp = 8;
    p.hw.gpu_mem_bytes = 100e9;
    struct st_mem_plan m = plan_of(&p);
    /* Experts over all 8 GPUs, dense over the attention group (8 without DP attention). */
    assert_true(m.expert_bytes_per_gpu == 8e9 * 0.5 / 8);
    assert_true(m.dense_bytes_per_gpu == 2e9 * 2 / 8);
    /* DP attention 4: attention groups of 2 GPUs, each holding half the dense weights. */
    p.engine.dp_attention = 4;
    m = plan_of(&p);
    assert_int_equal(m.attn_tp, 2);
    assert_true(m.expert_bytes_per_gpu == 8e9 * 0.5 / 8);
    assert_true(m.dense_bytes_per_gpu == 2e9 * 2 / 2);
    /* Vision encoder and an EAGLE head, also over the attention group. */
    p.model.vision_params = 1e9;
    p.model.draft_params = 0.5e9;
    p.model.draft_layers = 1;
    p.engine.spec_method = ST_SPEC_EAGLE;
    p.engine.spec_steps = 3;
    m = plan_of(&p);
    assert_true(m.vision_bytes_per_gpu == 1e9);
    assert_true(m.draft_bytes_per_gpu == 0.5e9);
    assert_true(m.weights_bytes_per_gpu ==
                m.expert_bytes_per_gpu + m.dense_bytes_per_gpu + 1e9 + 0.5e9);
}

static void test_draft_kv(void **state)
{
    (void)state;
    struct st_profile p;
    tiny(&p);
    double base = plan_of(&p).kv_bytes_per_token;
    /* MTP stores its layers' KV once per speculative step. */
    p.model.mtp_layers = 1;
    p.engine.spec_method = ST_SPEC_MTP;
    for (uint32_t k = 1; k <= 3; k++) {
        p.engine.spec_steps = k;
        struct st_mem_plan m = plan_of(&p);
        assert_true(m.draft_kv_bytes_per_token == k * 512.0);
        assert_true(m.kv_bytes_per_token == base + k * 512.0);
        /* The MTP layer's weights: one layer's share of the model. */
        assert_true(fabs(m.draft_bytes_per_gpu - 1e9 / 4) < 1);
    }
    /* EAGLE stores its own layers once, whatever the step count. */
    p.engine.spec_method = ST_SPEC_EAGLE;
    p.model.draft_params = 0.1e9;
    p.model.draft_layers = 2;
    p.engine.spec_steps = 5;
    assert_true(plan_of(&p).draft_kv_bytes_per_token == 2 * 512.0);
    /* A hybrid model keeps KV only in its full-attention layers. */
    tiny(&p);
    p.model.kv_layers = 1;
    assert_true(plan_of(&p).kv_bytes_per_token == 512);
}

static void test_failures(void **state)
{
    (void)state;
    struct st_profile p;
    struct st_mem_plan m;

    /* vLLM: no budget at all. */
    tiny(&p);
    p.engine.mem_fraction = 0.2;
    m = plan_of(&p);
    assert_false(m.fits);
    assert_int_equal(m.kv_pool_tokens, 0);
    assert_non_null(strstr(m.reason, "ValueError: No available memory for the cache blocks."));
    /* vLLM: a budget too small for one request of the whole context. */
    tiny(&p);
    p.engine.context_length = 8000000;
    m = plan_of(&p);
    assert_false(m.fits);
    assert_true(m.kv_pool_tokens > 0);
    assert_non_null(strstr(m.reason, "ValueError: To serve at least one request with the model's "
                                     "max seq len (8000000)"));
    assert_non_null(strstr(m.reason, "KV cache is needed, which is larger than the available KV "
                                     "cache memory"));
    char want[64];
    snprintf(want, sizeof(want), "maximum model length is %llu.",
             (unsigned long long)m.kv_pool_tokens);
    assert_non_null(strstr(m.reason, want));
    /* SGLang starts with any positive pool, and refuses without one. */
    p.engine.dialect = ST_DIALECT_SGLANG;
    assert_true(plan_of(&p).fits);
    p.engine.mem_fraction = 0.2;
    m = plan_of(&p);
    assert_false(m.fits);
    assert_non_null(strstr(m.reason, "RuntimeError: Not enough memory. Please try to increase "
                                     "--mem-fraction-static."));
    /* llama.cpp allocates exactly the context. */
    tiny(&p);
    p.engine.dialect = ST_DIALECT_LLAMACPP;
    m = plan_of(&p);
    assert_true(m.fits);
    assert_int_equal(m.kv_pool_tokens, 4096);
    p.engine.context_length = 8000000;
    m = plan_of(&p);
    assert_false(m.fits);
    assert_non_null(strstr(m.reason, "cudaMalloc failed: out of memory"));
    /* Weights that do not fit the GPU at all. */
    tiny(&p);
    p.model.params_total = p.model.params_active = p.model.params_dense = 6e9;
    m = plan_of(&p);
    assert_false(m.fits);
    assert_non_null(strstr(m.reason, "CUDA out of memory"));
}

/* ---- seed 000: MTP steps and prefill batch ---- */

static void test_seed000_mtp_capacity(void **state)
{
    (void)state;
    static const double want[] = {159669, 146622, 137414};
    struct st_profile p;
    struct st_mem_plan m[3];
    for (uint32_t k = 1; k <= 3; k++) {
        seed000(&p, k, 2048);
        m[k - 1] = plan_of(&p);
        assert_true(m[k - 1].fits);
        assert_near("seed 000 KV capacity", (double)m[k - 1].kv_pool_tokens, want[k - 1], 0.15);
        /* Every arm still holds one 128K request. */
        assert_true(m[k - 1].kv_pool_tokens >= 131072);
    }
    /* Equal budget (the seed: "at the same 2.78 GiB"), capacity falling with the step count. */
    assert_true(m[0].kv_budget_bytes == m[1].kv_budget_bytes);
    assert_true(m[1].kv_budget_bytes == m[2].kv_budget_bytes);
    assert_near("seed 000 KV budget", m[1].kv_budget_bytes / GIB, 2.78, 0.15);
    assert_true(m[0].kv_pool_tokens > m[1].kv_pool_tokens);
    assert_true(m[1].kv_pool_tokens > m[2].kv_pool_tokens);
    /* The default staging is also a fit to better than 3%. */
    assert_near("seed 000 budget (tight)", m[1].kv_budget_bytes / GIB, 2.78, 0.03);
    assert_near("seed 000 MTP 2 capacity (tight)", (double)m[1].kv_pool_tokens, 146622, 0.03);
}

static void test_seed000_batch(void **state)
{
    (void)state;
    struct st_profile p;
    seed000(&p, 2, 2048);
    struct st_mem_plan b2048 = plan_of(&p);
    seed000(&p, 2, 1024);
    struct st_mem_plan b1024 = plan_of(&p);
    assert_true(b1024.fits);
    assert_near("seed 000 batch-1024 budget", b1024.kv_budget_bytes / GIB, 2.96, 0.15);
    assert_near("seed 000 batch-1024 capacity", (double)b1024.kv_pool_tokens, 155509, 0.15);
    /* A smaller activation reserve leaves a larger pool: about +6.1% in the seed. */
    assert_true(b1024.kv_pool_tokens > b2048.kv_pool_tokens);
    double gain = (double)b1024.kv_pool_tokens / (double)b2048.kv_pool_tokens - 1;
    assert_near("seed 000 batch-1024 capacity gain", gain, 155509.0 / 146622.0 - 1, 0.15);
}

/* ---- seed 003: TP/PP/DP-attention/EAGLE arms ---- */

static void test_seed003_pools(void **state)
{
    (void)state;
    struct st_profile p;
    arm_a1(&p);
    struct st_mem_plan a1 = plan_of(&p);
    arm_a6(&p);
    struct st_mem_plan a6 = plan_of(&p);
    arm_a3(&p, 1);
    struct st_mem_plan a3 = plan_of(&p);
    assert_true(a1.fits && a6.fits && a3.fits);
    assert_near("seed 003 A1 TP2PP4@0.85 pool", (double)a1.kv_pool_tokens, 909632, 0.15);
    assert_near("seed 003 A6 TP4PP2@0.90 pool", (double)a6.kv_pool_tokens, 647040, 0.15);
    /* The winner's profile reproduces the pool SGLang reported for it exactly. */
    assert_int_equal(a6.kv_pool_tokens, 647040);
    assert_near("seed 003 A3 TP8+EAGLE pool", (double)a3.kv_pool_tokens, 276864, 0.15);
    assert_true(a1.kv_pool_tokens > a6.kv_pool_tokens);
    assert_true(a6.kv_pool_tokens > a3.kv_pool_tokens);
    /* SGLang pages of 64 tokens. */
    assert_int_equal(a1.kv_pool_tokens % 64, 0);
    assert_int_equal(a6.kv_pool_blocks * 64, a6.kv_pool_tokens);
    /* Concurrent distinct 128K documents (seed: 6 / 4 / 2), and the 512K request (A1 and A6
     * complete it, A3's pool cannot hold it). */
    assert_int_equal(a1.kv_pool_tokens / DOC_TOKENS, 6);
    assert_int_equal(a6.kv_pool_tokens / DOC_TOKENS, 4);
    assert_int_equal(a3.kv_pool_tokens / DOC_TOKENS, 2);
    assert_true(a1.kv_pool_tokens >= 524288 + 512);
    assert_true(a6.kv_pool_tokens >= 524288 + 512);
    assert_true(a3.kv_pool_tokens < 524288);
    /* MLA + indexer: (512 + 64) FP8 latent + 132 B of indexer key per layer. */
    assert_true(a6.kv_bytes_per_token_layer == 708);
    assert_int_equal(a6.kv_layers_per_gpu, 39);
    assert_int_equal(a1.kv_layers_per_gpu, 20);
}

static void test_seed003_dp_attention(void **state)
{
    (void)state;
    struct st_profile p;
    arm_a1(&p);
    uint64_t a1 = plan_of(&p).kv_pool_tokens;
    arm_a3(&p, 1);
    struct st_mem_plan tp8 = plan_of(&p);
    arm_a3(&p, 2);
    struct st_mem_plan dp2 = plan_of(&p);
    arm_a3(&p, 4);
    struct st_mem_plan dp4 = plan_of(&p);
    assert_true(dp2.fits && dp4.fits);
    assert_near("seed 003 DP-attention dp2 pool per group", (double)dp2.kv_pool_tokens, 215232,
                0.15);
    assert_near("seed 003 DP-attention dp4 pool per rank", (double)dp4.kv_pool_tokens, 96448, 0.15);
    /* The seed: attn_tp 4 -> 58.37 GB of weights per rank. */
    assert_int_equal(dp2.attn_tp, 4);
    assert_near("seed 003 weights per rank at attn_tp 4",
                (dp2.expert_bytes_per_gpu + dp2.dense_bytes_per_gpu) / 1e9, 58.37, 0.15);
    /* Non-expert weights replicate per attention group, so each GPU's pool shrinks with dp and
     * even the aggregate stays below the single TP2PP4 replica. */
    assert_true(dp4.dense_bytes_per_gpu > dp2.dense_bytes_per_gpu);
    assert_true(dp2.dense_bytes_per_gpu > tp8.dense_bytes_per_gpu);
    assert_true(dp4.expert_bytes_per_gpu == tp8.expert_bytes_per_gpu);
    assert_true(dp4.kv_pool_tokens < dp2.kv_pool_tokens);
    assert_true(dp2.kv_pool_tokens < tp8.kv_pool_tokens);
    assert_true(4 * dp4.kv_pool_tokens < a1);
    assert_true(2 * dp2.kv_pool_tokens < a1);
}

/* ---- the profile files ---- */

static void test_yaml_profiles(void **state)
{
    (void)state;
    struct st_profile y, c;
    read_profile(&y, "default.yaml");
    st_profile_defaults(&c);
    assert_same_profile(&y, &c);

    read_profile(&y, "seed000-vl-mtp.yaml");
    seed000(&c, 2, 2048);
    assert_same_profile(&y, &c);
    struct st_mem_plan my = plan_of(&y), mc = plan_of(&c);
    assert_int_equal(my.kv_pool_tokens, mc.kv_pool_tokens);

    read_profile(&y, "seed003-mla-moe-8gpu.yaml");
    arm_a6(&c);
    assert_same_profile(&y, &c);
    my = plan_of(&y);
    mc = plan_of(&c);
    assert_int_equal(my.kv_pool_tokens, mc.kv_pool_tokens);
    /* The arms named in the file's comment, through --set. */
    char err[256];
    assert_int_equal(st_profile_set(&y, "engine.tp=2", err, sizeof(err)), 0);
    assert_int_equal(st_profile_set(&y, "engine.pp=4", err, sizeof(err)), 0);
    assert_int_equal(st_profile_set(&y, "engine.mem_fraction=0.85", err, sizeof(err)), 0);
    arm_a1(&c);
    assert_int_equal(plan_of(&y).kv_pool_tokens, plan_of(&c).kv_pool_tokens);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_table),
        cmocka_unit_test(test_tp_pp_split),
        cmocka_unit_test(test_moe_and_dp_attention),
        cmocka_unit_test(test_draft_kv),
        cmocka_unit_test(test_failures),
        cmocka_unit_test(test_seed000_mtp_capacity),
        cmocka_unit_test(test_seed000_batch),
        cmocka_unit_test(test_seed003_pools),
        cmocka_unit_test(test_seed003_dp_attention),
        cmocka_unit_test(test_yaml_profiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
