/*
 * The step-cost model: a roofline per kernel class, summed over the parts of one engine step.
 * Pure arithmetic over the profile and the memory plan; no allocation, no I/O, no clock.
 * Equations and fitted parameters: docs/simulator.md ("Step cost", "Calibration to the seeds").
 *
 * A step is one forward pass of the whole replica (all PP stages one after another, since a
 * single batch is in flight) over every token of the step, plus, with speculation, k draft
 * passes. Classes: GEMMs (max of FLOPs and weight reads), attention (max of FLOPs and KV reads),
 * TP all-reduces and PP sends (bytes over the link plus a latency each). Per-GPU constants are
 * computed once by st_cost_init; st_cost_step_ns only scales them by the step's shape.
 */
#include "sim/model/cost.h"

#include <math.h>
#include <string.h>

static double at_least_1(uint32_t v)
{
    return v ? (double)v : 1.0;
}

static double max2(double a, double b)
{
    return a > b ? a : b;
}

static double min2(double a, double b)
{
    return a < b ? a : b;
}

/* Peak FLOP/s for GEMMs on weights of this width: NVFP4 runs at the FP4 rate, FP8 at FP8. */
static double peak_for_bytes(const struct st_profile_hw *hw, double bytes)
{
    if (bytes <= 0.6 && hw->flops_fp4 > 0) {
        return hw->flops_fp4;
    }
    if (bytes <= 1.0 && hw->flops_fp8 > 0) {
        return hw->flops_fp8;
    }
    return hw->flops_bf16 > 0 ? hw->flops_bf16 : 1e12;
}

static double positive_or(double v, double dflt)
{
    return v > 0 ? v : dflt;
}

void st_cost_init(struct st_cost *c, const struct st_profile *p)
{
    const struct st_profile_model *m = &p->model;
    const struct st_profile_hw *hw = &p->hw;
    const struct st_profile_engine *e = &p->engine;

    memset(c, 0, sizeof(*c));
    c->p = p;
    st_mem_plan_compute(p, &c->m);

    double layers = at_least_1(m->layers);
    double pp = at_least_1(e->pp);
    double tp = at_least_1(e->tp);
    double dp = at_least_1(e->dp_attention);
    double atp = c->m.attn_tp;
    double db = m->dense_weight_bytes > 0 ? m->dense_weight_bytes : m->weight_bytes;
    double kv_layers = m->kv_layers && m->kv_layers < m->layers ? m->kv_layers : layers;

    double hbm = positive_or(hw->hbm_bytes_per_s, 1e12) * positive_or(hw->eff_mem, 1);
    double link = positive_or(hw->link_bytes_per_s, 1e12) * positive_or(hw->eff_link, 1);
    double eff_mm = positive_or(hw->eff_matmul, 1);
    double eff_at = positive_or(hw->eff_attn, 1);
    double peak_e = peak_for_bytes(hw, m->weight_bytes) * eff_mm;
    double peak_d = peak_for_bytes(hw, db) * eff_mm;
    double peak_attn = positive_or(hw->flops_bf16, 1e12) * eff_at;
    /* The indexer's scores are an FP8 GEMM of the queries against the cached keys (DeepGEMM's
     * MQA-logits kernel in DSA), so they run at the FP8 GEMM rate, not the attention one. */
    double peak_idx = positive_or(hw->flops_fp8, peak_for_bytes(hw, 2)) * eff_mm;

    double expert_total = m->params_total > m->params_dense ? m->params_total - m->params_dense : 0;
    double expert_active =
        m->params_active > m->params_dense ? m->params_active - m->params_dense : 0;

    /* One stage (1/pp of the layers) on one GPU. Experts see the tokens of every DP rank, so a
     * rank's token costs expert FLOPs on tp/dp = attn_tp GPUs. */
    double share = 1.0 / pp;
    c->gemm_s_per_token = 2.0 * share * (m->params_dense / peak_d + expert_active / peak_e) / atp;
    c->dense_read_s = share * m->params_dense * db / atp / hbm;
    c->expert_read_s_per_token = share * expert_active * m->weight_bytes / tp / hbm;
    c->expert_read_max_s = share * expert_total * m->weight_bytes / tp / hbm;
    c->weight_read_s =
        c->dense_read_s + min2(c->expert_read_max_s, dp * c->expert_read_s_per_token);
    c->dp = dp;

    /* Attention: 4 * heads * head_dim FLOPs per (query, key) pair per layer (QK^T and PV), heads
     * split over the attention group. The indexer scores every pair with heads/2 heads of
     * indexer_head_dim (DeepSeek-V3.2: 64 of 128, GLM-5: 32 of 64), 2 FLOPs each, and is
     * replicated on every GPU of the group (SGLang builds it from replicated linears). */
    double kv_layers_stage = kv_layers / pp;
    c->attn_s_per_pair = 4.0 * m->heads * m->head_dim / atp * kv_layers_stage / peak_attn;
    c->idx_s_per_pair = (double)m->heads * m->indexer_head_dim * kv_layers_stage / peak_idx;
    double main_kv = c->m.kv_bytes_per_token_layer - c->m.indexer_bytes_per_layer;
    c->main_kv_read_s_per_token = main_kv * kv_layers_stage / hbm;
    c->idx_read_s_per_token = c->m.indexer_bytes_per_layer * kv_layers_stage / hbm;
    c->kv_read_s_per_token = c->main_kv_read_s_per_token + c->idx_read_s_per_token;

    /* TP: two all-reduces per layer of tokens * hidden * 2 bytes, of which (tp-1)/tp crosses the
     * link; with DP attention the MoE collectives carry every rank's tokens. */
    c->allreduce_s_per_token = tp > 1 ? 2.0 * dp * m->hidden * 2.0 * (tp - 1) / tp / link : 0;
    c->allreduce_latency_s = tp > 1 ? 2.0 * hw->link_latency_s : 0;
    c->pp_send_s_per_token = pp > 1 ? m->hidden * 2.0 / link : 0;

    /* Draft passes. MTP: mtp_layers decoder layers plus the shared LM head. EAGLE/draft: a dense
     * model of draft_params with draft_layers layers of plain attention. */
    double lm_head = (double)m->vocab * m->hidden;
    if (e->spec_method == ST_SPEC_MTP) {
        double nl = at_least_1(m->mtp_layers);
        c->draft_layers = nl;
        c->draft_gemm_s_per_token =
            2.0 *
            (nl / layers * (m->params_dense / peak_d + expert_active / peak_e) + lm_head / peak_d) /
            atp;
        c->draft_dense_read_s = (nl / layers * m->params_dense + lm_head) * db / atp / hbm;
        c->draft_expert_read_s_per_token = nl / layers * expert_active * m->weight_bytes / tp / hbm;
        c->draft_expert_read_max_s = nl / layers * expert_total * m->weight_bytes / tp / hbm;
        c->draft_sparse = m->indexer_topk > 0;
        c->draft_main_kv_read_s_per_token = main_kv * nl / hbm;
        c->draft_idx_read_s_per_token = c->m.indexer_bytes_per_layer * nl / hbm;
    } else if (e->spec_method == ST_SPEC_EAGLE || e->spec_method == ST_SPEC_DRAFT) {
        double nl = at_least_1(m->draft_layers);
        c->draft_layers = nl;
        c->draft_gemm_s_per_token = 2.0 * m->draft_params / peak_d / atp;
        c->draft_dense_read_s = m->draft_params * db / atp / hbm;
        c->draft_sparse = 0;
        c->draft_main_kv_read_s_per_token = main_kv * nl / hbm;
    }
    c->draft_attn_s_per_pair = 4.0 * m->heads * m->head_dim / atp * c->draft_layers / peak_attn;
    c->draft_idx_s_per_pair =
        c->draft_sparse ? (double)m->heads * m->indexer_head_dim * c->draft_layers / peak_idx : 0;
    c->step_overhead_s = e->step_overhead_s;
    c->draft_pass_s = 0;
    if (e->spec_method != ST_SPEC_NONE) {
        struct st_step_shape one = {.n_decode = 1};
        c->draft_pass_s = st_cost_draft_pass_s(c, &one);
    }
}

/*
 * Decode attention of one stage: a plain decode query reads the context's KV once; under sparse
 * attention it attends min(context, topk) keys and the indexer scans the whole context. A verify
 * pass (k+1 query tokens per request) attends the whole context for every query token: that is
 * what makes speculation lose at long context.
 */
static double decode_attn_s(const struct st_cost *c, const struct st_step_shape *s, double q,
                            double pair_s, double idx_pair_s, double main_read_s, double idx_read_s,
                            int sparse)
{
    double n = s->n_decode;
    double ctx = (double)s->decode_ctx_sum;
    if (s->n_decode == 0) {
        return 0;
    }
    if (sparse && q <= 1) {
        double keys = n * min2(ctx / n, (double)c->p->model.indexer_topk);
        double flops_s = keys * pair_s + ctx * idx_pair_s;
        double bytes_s = keys * main_read_s + ctx * idx_read_s;
        return max2(flops_s, bytes_s);
    }
    return max2(q * ctx * pair_s, ctx * main_read_s);
}

/* Prefill attention of one stage over the step's chunks (prefill_pairs attended pairs). */
static double prefill_attn_s(const struct st_cost *c, const struct st_step_shape *s)
{
    double t = (double)s->prefill_tokens;
    double pairs = s->prefill_pairs;
    if (s->prefill_tokens == 0) {
        return 0;
    }
    double keys_per_query = pairs / t;
    double flops_s;
    if (c->p->model.indexer_topk > 0) {
        flops_s = t * min2(keys_per_query, (double)c->p->model.indexer_topk) * c->attn_s_per_pair +
                  pairs * c->idx_s_per_pair;
    } else {
        flops_s = pairs * c->attn_s_per_pair;
    }
    /* Each chunk reads its context's KV once: about keys_per_query + chunk / 2 tokens. */
    double chunks = at_least_1(s->n_prefill);
    double ctx_tokens = chunks * (keys_per_query + t / chunks / 2.0);
    return max2(flops_s, ctx_tokens * c->kv_read_s_per_token);
}

double st_cost_draft_pass_s(const struct st_cost *c, const struct st_step_shape *s)
{
    if (c->draft_layers <= 0 || s->n_decode == 0) {
        return 0;
    }
    double n = s->n_decode;
    double reads = c->draft_dense_read_s +
                   min2(c->draft_expert_read_max_s, c->dp * n * c->draft_expert_read_s_per_token);
    double gemm = max2(n * c->draft_gemm_s_per_token, reads);
    double attn = decode_attn_s(c, s, 1, c->draft_attn_s_per_pair, c->draft_idx_s_per_pair,
                                c->draft_main_kv_read_s_per_token, c->draft_idx_read_s_per_token,
                                c->draft_sparse);
    double comm = c->draft_layers * (n * c->allreduce_s_per_token + c->allreduce_latency_s);
    return gemm + attn + comm;
}

static double step_s(const struct st_cost *c, const struct st_step_shape *s)
{
    const struct st_profile *p = c->p;
    double pp = at_least_1(p->engine.pp);
    double layers = at_least_1(p->model.layers);
    double q = 1.0 + s->spec_tokens;
    double tokens = s->n_decode * q + (double)s->prefill_tokens;

    if (tokens <= 0) {
        return 0;
    }
    /* Stages run one after another, so each per-stage time counts pp times. */
    double reads =
        c->dense_read_s + min2(c->expert_read_max_s, c->dp * tokens * c->expert_read_s_per_token);
    double gemm = max2(tokens * c->gemm_s_per_token, reads);
    int sparse = p->model.indexer_topk > 0;
    double attn = decode_attn_s(c, s, q, c->attn_s_per_pair, c->idx_s_per_pair,
                                c->main_kv_read_s_per_token, c->idx_read_s_per_token, sparse) +
                  prefill_attn_s(c, s);
    double stage = gemm + attn + c->step_overhead_s;
    double comm = layers * (tokens * c->allreduce_s_per_token + c->allreduce_latency_s) +
                  (pp - 1) * (tokens * c->pp_send_s_per_token + p->hw.link_latency_s);
    double drafts = 0;
    if (s->spec_tokens > 0 && s->n_decode > 0) {
        drafts = s->spec_tokens * st_cost_draft_pass_s(c, s);
    }
    return pp * stage + comm + drafts;
}

uint64_t st_cost_step_ns(const struct st_cost *c, const struct st_step_shape *s)
{
    double t = step_s(c, s);
    if (t <= 0) {
        return 0;
    }
    double ns = ceil(t * 1e9);
    return ns < 1 ? 1 : ns > 1.8e19 ? UINT64_MAX : (uint64_t)ns;
}

double st_cost_accept_prob(const struct st_cost *c, uint32_t i, uint64_t ctx)
{
    const struct st_profile_engine *e = &c->p->engine;
    if (i >= ST_SPEC_MAX_STEPS) {
        return 0;
    }
    double a = e->spec_accept[i];
    if (e->spec_accept_halflife_tokens > 0) {
        a *= exp2(-(double)ctx / e->spec_accept_halflife_tokens);
    }
    return a < 0 ? 0 : a > 1 ? 1 : a;
}

double st_cost_expected_accepted(const struct st_cost *c, uint64_t ctx)
{
    const struct st_profile_engine *e = &c->p->engine;
    if (e->spec_method == ST_SPEC_NONE) {
        return 0;
    }
    double all = 1, sum = 0;
    for (uint32_t i = 0; i < e->spec_steps && i < ST_SPEC_MAX_STEPS; i++) {
        all *= st_cost_accept_prob(c, i, ctx);
        sum += all;
    }
    return sum;
}

double st_cost_decode_tps(const struct st_cost *c, uint64_t ctx)
{
    const struct st_profile_engine *e = &c->p->engine;
    struct st_step_shape s = {.n_decode = 1, .decode_ctx_sum = ctx};
    if (e->spec_method != ST_SPEC_NONE) {
        s.spec_tokens = e->spec_steps < ST_SPEC_MAX_STEPS ? e->spec_steps : ST_SPEC_MAX_STEPS;
    }
    double t = step_s(c, &s);
    return t > 0 ? (1.0 + st_cost_expected_accepted(c, ctx)) / t : 0;
}

double st_cost_prefill_s(const struct st_cost *c, uint64_t cached, uint64_t n)
{
    uint64_t budget = c->p->engine.max_batched_tokens ? c->p->engine.max_batched_tokens : 1;
    double pp = at_least_1(c->p->engine.pp);
    double sum = 0, last = 0;

    /* With PP the chunks of one request flow through the stages as a pipeline: the last chunk
     * leaves the last stage after every chunk's stage time plus pp - 1 stage times more. */
    for (uint64_t done = 0; done < n;) {
        uint64_t chunk = n - done < budget ? n - done : budget;
        struct st_step_shape s = {
            .n_prefill = 1,
            .prefill_tokens = chunk,
            .prefill_pairs = (double)chunk * ((double)(cached + done) + (double)chunk / 2.0),
        };
        double t = step_s(c, &s);
        sum += t;
        last = max2(last, t);
        done += chunk;
    }
    return sum / pp + (pp - 1) / pp * last;
}
