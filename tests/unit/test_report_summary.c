/*
 * Tests for src/report/summary.c, the one writer and reader of summary.json: a model built by
 * hand is written, read back and written again to the same bytes with every field the same
 * (NaN as null and back); a summary the runner wrote (tests/data/campaign/summary-runner.json)
 * reads and writes back byte for byte, so the writer's keys and their order are the runner's;
 * archives from before the optional fields (summary-seed000.json) read with those fields absent;
 * a renamed key fails the read with the field named; the compare object round-trips alone.
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
#include "report/summary.h"

#include "../support/fixture.h"

static char *dup_str(struct st_sum_summary *s, const char *t)
{
    return st_sum_strdup(&s->pool, t);
}

/* A summary with every field set: two arms (one failed, with a comparison holding a null),
 * two stages, a metric, a TTFT series and a compare object. */
static void build(struct st_sum_summary *s)
{
    memset(s, 0, sizeof(*s));
    s->name = dup_str(s, "rt");
    s->hash = dup_str(s, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
    s->file = dup_str(s, "plan.yaml");
    s->noise = 0.05;
    s->alpha = 0.1;
    s->stats = st_sum_alloc(&s->pool, sizeof(*s->stats));
    s->stats->test = dup_str(s, "welch_t_log");
    s->stats->effect = dup_str(s, "ratio");
    s->stats->sequential = dup_str(s, "pocock");
    s->stats->correction = dup_str(s, "holm");
    s->stats->alpha = 0.1;
    s->stats->margin = 0.01;
    s->stats->equivalence_confidence = 0.9;
    s->stats->nfamily = 2;
    s->stats->family = st_sum_alloc(&s->pool, 2 * sizeof(uint64_t));
    s->stats->family[0] = 3;
    s->stats->family[1] = 1;
    s->complete = 1;
    s->chosen = dup_str(s, "b");
    s->restored = 1;
    s->has_run = 1;
    s->sim_speed = 20;
    s->seed = 18446744073709551615ull; /* 2^64 - 1: beyond a double's 53 bits */
    s->nstages = 2;
    s->stages = st_sum_alloc(&s->pool, 2 * sizeof(*s->stages));
    s->stages[0].name = dup_str(s, "screening");
    s->stages[0].narms = 2;
    s->stages[0].arms = st_sum_alloc(&s->pool, 2 * sizeof(char *));
    s->stages[0].arms[0] = dup_str(s, "baseline");
    s->stages[0].arms[1] = dup_str(s, "b");
    s->stages[1].name = dup_str(s, "full");
    s->narms = 2;
    s->arms = st_sum_alloc(&s->pool, 2 * sizeof(*s->arms));
    struct st_sum_arm *a = &s->arms[0];
    a->name = dup_str(s, "baseline");
    a->verdict = dup_str(s, "baseline");
    a->nparams = 1;
    a->params = st_sum_alloc(&s->pool, sizeof(*a->params));
    a->params[0].k = dup_str(s, "batch");
    a->params[0].v = dup_str(s, "512");
    a->has_kv = 1;
    a->kv = 65536;
    a = &s->arms[1];
    a->name = dup_str(s, "b");
    a->verdict = dup_str(s, "promote");
    a->on = dup_str(s, "baseline");
    a->nreasons = 1;
    a->reasons = st_sum_alloc(&s->pool, sizeof(char *));
    a->reasons[0] = dup_str(s, "screening: \"faster\" | by 10%\n");
    a->nchanged = a->nparams = 1;
    a->params = st_sum_alloc(&s->pool, sizeof(*a->params));
    a->params[0].k = dup_str(s, "batch");
    a->params[0].v = dup_str(s, "1024");
    a->changed = a->params;
    a->has_ctx = 1;
    a->ctx = 8192;
    a->failure = st_sum_alloc(&s->pool, sizeof(*a->failure));
    a->failure->kind = dup_str(s, "oom");
    a->failure->stage = dup_str(s, "full");
    a->failure->detail = dup_str(s, "out of memory");
    a->failure->evidence = dup_str(s, "arms/b/full/server.log");
    a->ngates = 1;
    a->gates = st_sum_alloc(&s->pool, sizeof(*a->gates));
    a->gates[0].stage = dup_str(s, "screening");
    a->gates[0].name = dup_str(s, "requests");
    a->gates[0].passed = 1;
    a->ndec = 1;
    a->dec = st_sum_alloc(&s->pool, sizeof(*a->dec));
    struct st_sum_decision *d = &a->dec[0];
    d->stage = dup_str(s, "screening");
    d->verdict = dup_str(s, "promote");
    d->reason = dup_str(s, "better");
    d->composite = 0.125;
    d->has_stats = 1;
    d->more = 1;
    d->ncmp = 1;
    d->cmp = st_sum_alloc(&s->pool, sizeof(*d->cmp));
    struct st_sum_cmpitem *c = &d->cmp[0];
    c->metric = dup_str(s, "load.ttft_p50_s");
    c->kind = dup_str(s, "ranked");
    c->finding = dup_str(s, "better");
    c->aggregate = dup_str(s, "medians");
    c->n = 3;
    c->n_arm = c->n_base = c->min_n = 3;
    c->max_n = 5;
    c->needed_n = 4;
    c->base = 0.2;
    c->arm = 0.1;
    c->rel = -0.5;
    c->threshold = 0.05;
    c->lo = -0.6;
    c->hi = -0.4;
    c->confidence = 0.95;
    c->equivalence_lo = -0.61;
    c->equivalence_hi = -0.39;
    c->p_better = 0.001;
    c->p_worse = 0.999;
    c->q_better = 0.003;
    c->q_worse = 1;
    c->holm_better = NAN; /* written null */
    c->holm_worse = 1;
    c->cv_base = 0.01;
    c->cv_arm = 0.02;
    s->nm = 1;
    s->m = st_sum_alloc(&s->pool, sizeof(*s->m));
    struct st_sum_metric *m = &s->m[0];
    m->stage = dup_str(s, "screening");
    m->arm = dup_str(s, "baseline");
    m->name = dup_str(s, "load.ttft_p50_s@cc4");
    m->nvalues = m->nunits = 2;
    m->values = st_sum_alloc(&s->pool, 2 * sizeof(double));
    m->values[0] = 0.1;
    m->values[1] = 1.0 / 3;
    m->units = st_sum_alloc(&s->pool, 2 * sizeof(char *));
    m->units[0] = dup_str(s, "screening/baseline/load/r0");
    m->units[1] = dup_str(s, "screening/baseline/load/r1");
    m->agg = m->median = m->mean = 0.2;
    m->min = 0.1;
    m->max = 1.0 / 3;
    m->mad = 0.05;
    m->cv = NAN;
    m->n = 2;
    s->nt = 1;
    s->t = st_sum_alloc(&s->pool, sizeof(*s->t));
    s->t[0].stage = dup_str(s, "screening");
    s->t[0].arm = dup_str(s, "b");
    s->t[0].step = dup_str(s, "load");
    s->t[0].n = 3;
    s->t[0].v = st_sum_alloc(&s->pool, 3 * sizeof(double));
    s->t[0].v[0] = 0.3; /* not sorted: the order written is the order read */
    s->t[0].v[1] = 0.1;
    s->t[0].v[2] = 0.2;
    s->cmp = st_sum_alloc(&s->pool, sizeof(*s->cmp));
    s->cmp->with = dup_str(s, "../old");
    s->cmp->plan_hash = s->hash;
    s->cmp->n = 2;
    s->cmp->drifted = 1;
    s->cmp->d = st_sum_alloc(&s->pool, 2 * sizeof(*s->cmp->d));
    s->cmp->d[0] = (struct st_sum_drift){.metric = m->name,
                                         .stage = m->stage,
                                         .this_v = 0.2,
                                         .then_v = 0.1,
                                         .rel = 1,
                                         .has_rel = 1,
                                         .beyond = 1};
    s->cmp->d[1] = (struct st_sum_drift){.metric = m->name, .this_v = 1, .rel = NAN};
}

static void same_num(double a, double b)
{
    if (isnan(a) || isnan(b)) {
        assert_true(isnan(a) && isnan(b));
    } else {
        assert_true(a == b);
    }
}

static void same_str(const char *a, const char *b)
{
    if (a == NULL || b == NULL) {
        assert_null(a);
        assert_null(b);
    } else {
        assert_string_equal(a, b);
    }
}

static void round_trip(void **state)
{
    (void)state;
    struct st_sum_summary a, b;
    struct st_buf t1, t2;
    char err[256] = "";
    st_buf_init(&t1);
    st_buf_init(&t2);
    build(&a);
    st_sum_write(&a, &t1);
    int rc = st_sum_load(&b, t1.data, t1.len, err, sizeof(err));
    if (rc != 0) {
        fail_msg("%s", err);
    }
    st_sum_write(&b, &t2);
    assert_int_equal(t1.len, t2.len);
    assert_memory_equal(t1.data, t2.data, t1.len);
    /* Field by field, the ones a byte comparison could hide (nulls, numbers, order). */
    same_str(a.name, b.name);
    same_num(a.alpha, b.alpha);
    same_str(a.stats->sequential, b.stats->sequential);
    assert_int_equal(b.stats->nfamily, 2);
    assert_true(b.stats->family[0] == 3 && b.stats->family[1] == 1);
    assert_true(b.has_run && b.seed == a.seed);
    same_num(b.sim_speed, 20);
    assert_int_equal(b.nstages, 2);
    assert_int_equal(b.stages[1].narms, 0);
    assert_int_equal(b.narms, 2);
    same_str(b.arms[0].on, NULL);
    same_str(b.arms[1].on, "baseline");
    same_str(b.arms[1].reasons[0], a.arms[1].reasons[0]);
    assert_true(b.arms[0].has_kv && !b.arms[0].has_ctx && b.arms[0].kv == 65536);
    assert_true(!b.arms[1].has_kv && b.arms[1].has_ctx && b.arms[1].ctx == 8192);
    assert_null(b.arms[0].failure);
    same_str(b.arms[1].failure->kind, "oom");
    same_str(b.arms[1].failure->step, NULL);
    same_str(b.arms[1].gates[0].detail, NULL);
    const struct st_sum_decision *d = &b.arms[1].dec[0];
    assert_true(d->has_stats && d->more && !d->equivalent && !d->single);
    assert_int_equal(d->ncmp, 1);
    const struct st_sum_cmpitem *x = &a.arms[1].dec[0].cmp[0], *y = &d->cmp[0];
    same_str(x->aggregate, y->aggregate);
    assert_true(x->n == y->n && x->n_arm == y->n_arm && x->max_n == y->max_n &&
                x->needed_n == y->needed_n);
#define SAME(f) same_num(x->f, y->f)
    SAME(base), SAME(arm), SAME(rel), SAME(threshold), SAME(lo), SAME(hi), SAME(confidence);
    SAME(equivalence_lo), SAME(equivalence_hi), SAME(p_better), SAME(p_worse), SAME(q_better);
    SAME(q_worse), SAME(holm_better), SAME(holm_worse), SAME(cv_base), SAME(cv_arm);
#undef SAME
    assert_true(isnan(y->holm_better));
    const struct st_sum_metric *m = &b.m[0];
    assert_int_equal(m->nvalues, 2);
    same_num(m->values[1], 1.0 / 3);
    same_num(m->cv, NAN);
    same_num(m->mad, 0.05);
    same_str(m->units[1], "screening/baseline/load/r1");
    same_str(m->step, "load");
    same_str(m->mname, "ttft_p50_s");
    same_str(m->point, "cc4");
    assert_int_equal(m->arm_idx, 0);
    assert_int_equal(b.t[0].arm_idx, 1);
    assert_true(b.t[0].n == 3 && b.t[0].v[0] == 0.3 && b.t[0].v[1] == 0.1);
    assert_non_null(b.cmp);
    assert_true(b.cmp->drifted && b.cmp->n == 2);
    same_str(b.cmp->d[0].stage, "screening");
    same_str(b.cmp->d[1].stage, NULL);
    assert_true(b.cmp->d[0].has_rel && !b.cmp->d[1].has_rel);
    same_num(b.cmp->d[1].rel, NAN);
    st_sum_pool_release(&a.pool);
    st_sum_pool_release(&b.pool);
    st_buf_release(&t1);
    st_buf_release(&t2);
}

/* What the runner wrote reads and writes back to the same bytes. */
static void runner_bytes(void **state)
{
    (void)state;
    struct st_buf in, out;
    struct st_sum_summary s;
    char err[256] = "";
    st_buf_init(&in);
    st_buf_init(&out);
    st_test_fixture("summary-runner.json", &in);
    int rc = st_sum_load(&s, in.data, in.len, err, sizeof(err));
    if (rc != 0) {
        fail_msg("%s", err);
    }
    assert_non_null(s.stats);
    assert_true(s.has_run);
    st_sum_write(&s, &out);
    assert_int_equal(in.len, out.len);
    assert_memory_equal(in.data, out.data, in.len);
    st_sum_pool_release(&s.pool);
    st_buf_release(&in);
    st_buf_release(&out);
}

/* An archive from before the statistical rules: no statistics, alpha, sim_speed, seed, no
 * comparisons, no metric median .. cv. It reads; the absent fields read as absent. */
static void older_archive(void **state)
{
    (void)state;
    struct st_buf in;
    struct st_sum_summary s;
    char err[256] = "";
    st_buf_init(&in);
    st_test_fixture("summary-seed000.json", &in);
    int rc = st_sum_load(&s, in.data, in.len, err, sizeof(err));
    if (rc != 0) {
        fail_msg("%s", err);
    }
    assert_null(s.stats);
    assert_true(isnan(s.alpha));
    assert_false(s.has_run);
    assert_true(s.narms > 1 && s.nm > 0);
    for (size_t i = 0; i < s.narms; i++) {
        for (size_t k = 0; k < s.arms[i].ndec; k++) {
            assert_false(s.arms[i].dec[k].has_stats);
            assert_int_equal(s.arms[i].dec[k].ncmp, 0);
        }
    }
    assert_true(isnan(s.m[0].median) && isnan(s.m[0].cv));
    st_sum_pool_release(&s.pool);
    st_buf_release(&in);
}

/* A key renamed in the text (as a writer change would) fails the read, naming the field. */
static void renamed_key(void **state)
{
    (void)state;
    static const struct {
        const char *from, *to, *msg;
    } cases[] = {
        {"\"verdict\":", "\"verdikt\":", "missing field 'arms[0].verdict'"},
        {"\"values_s\":", "\"values\":", "missing field 'ttft[0].values_s'"},
        {"\"units\":", "\"unit_ids\":", "missing field 'metrics[0].units'"},
        {"\"kv_capacity_tokens\":", "\"kv_tokens\":", "missing field 'arms[0].kv_capacity_tokens'"},
        {"\"drifted\":", "\"drift_found\":", "missing field 'compare.drifted'"},
    };
    struct st_sum_summary a;
    struct st_buf t;
    st_buf_init(&t);
    build(&a);
    st_sum_write(&a, &t);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct st_buf e;
        st_buf_init(&e);
        const char *text = st_buf_str(&t);
        const char *p = strstr(text, cases[i].from);
        assert_non_null(p);
        st_buf_append(&e, text, (size_t)(p - text));
        st_buf_puts(&e, cases[i].to);
        st_buf_puts(&e, p + strlen(cases[i].from));
        struct st_sum_summary b;
        char err[256] = "";
        assert_int_equal(st_sum_load(&b, e.data, e.len, err, sizeof(err)), ST_EPARSE);
        assert_string_equal(err, cases[i].msg);
        st_sum_pool_release(&b.pool);
        st_buf_release(&e);
    }
    st_sum_pool_release(&a.pool);
    st_buf_release(&t);
}

/* The compare object alone: written, read, written to the same bytes. */
static void compare_alone(void **state)
{
    (void)state;
    struct st_sum_summary a;
    struct st_buf t1, t2;
    struct st_sum_pool pl = {0};
    struct st_sum_cmp c;
    char err[256] = "";
    st_buf_init(&t1);
    st_buf_init(&t2);
    build(&a);
    st_sum_write_compare(a.cmp, &t1);
    assert_int_equal(st_sum_load_compare(t1.data, t1.len, &pl, &c, err, sizeof(err)), 0);
    st_sum_write_compare(&c, &t2);
    assert_int_equal(t1.len, t2.len);
    assert_memory_equal(t1.data, t2.data, t1.len);
    st_sum_pool_release(&pl);
    st_sum_pool_release(&a.pool);
    st_buf_release(&t1);
    st_buf_release(&t2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip),    cmocka_unit_test(runner_bytes),
        cmocka_unit_test(older_archive), cmocka_unit_test(renamed_key),
        cmocka_unit_test(compare_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
