/*
 * Tests for src/campaign/plan.c: both example plans (seed 000 and seed 003) parse with the
 * expected arms, stages and rules; the canonical form and hash ignore key order, comments and
 * layout and change with any value; every validation error names FILE:LINE:COL and the reason
 * (unknown key, an arm that changes nothing, an undeclared second variable, a rule on a metric no
 * stage produces, a full stage without the long output or the soak, ...).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "campaign/plan.h"

static char *read_example(const char *name, size_t *len)
{
    const char *dir = getenv("ST_PROFILES_DIR");
    char path[4096];
    snprintf(path, sizeof(path), "%s/../examples/%s", dir ? dir : "profiles", name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fail_msg("cannot open %s", path);
    }
    char *buf = malloc(ST_PLAN_MAX_BYTES + 1);
    assert_non_null(buf);
    *len = fread(buf, 1, ST_PLAN_MAX_BYTES, f);
    fclose(f);
    buf[*len] = '\0';
    return buf;
}

static void parse_ok(const char *name, const char *text, size_t len, struct st_plan *p)
{
    char err[512] = "";
    int rc = st_plan_parse(name, text, len, p, err, sizeof(err));
    if (rc != 0) {
        fail_msg("%s: rc %d: %s", name, rc, err);
    }
}

static void test_seed000_example(void **state)
{
    (void)state;
    size_t len;
    char *text = read_example("seed000-mtp-compose.yaml", &len);
    struct st_plan p;
    parse_ok("seed000-mtp-compose.yaml", text, len, &p);
    assert_string_equal(p.name, "seed000-mtp");
    assert_int_equal(p.target.kind, ST_TARGET_BACKEND_COMPOSE);
    assert_string_equal(p.target.service, "vlm");
    assert_int_equal(p.baseline.n, 3);
    /* Sorted by name. */
    assert_string_equal(p.baseline.v[0].name, "cuda_graph_capture_sizes");
    assert_string_equal(p.baseline.v[0].value, "[1, 3]");
    assert_string_equal(st_target_param_find(&p.baseline, "max_num_batched_tokens")->value, "2048");
    assert_int_equal(p.n_arms, 3);
    assert_string_equal(p.arms[0].name, "mtp1");
    assert_true(p.arms[0].multi_variable);
    assert_string_equal(st_target_param_find(&p.arms[1].set, "cuda_graph_capture_sizes")->value,
                        "[1, 4]");
    assert_int_equal(p.arms[2].n_on_best_of, 3);
    assert_string_equal(p.arms[2].on_best_of[2], "mtp3");
    assert_int_equal(p.screening.n, 6);
    assert_int_equal(p.screening.steps[2].n_categories, 3);
    assert_int_equal(p.screening.steps[2].repeats, 3);
    assert_int_equal(p.rules.n_metrics, 3);
    assert_int_equal(p.rules.metrics[1].dir, ST_RULES_HIGHER);
    assert_int_equal(p.rules.metrics[1].repeats, 3);
    assert_int_equal(p.rules.n_guards, 4);
    assert_int_equal(p.rules.guards[0].dir, ST_RULES_LOWER);
    assert_int_equal(p.rules.n_limits, 1);
    assert_string_equal(p.rules.limits[0].gate, "kv_floor");
    assert_int_equal(p.rules.escalation, ST_RULES_ESCALATE_BEST);
    /* The screening view holds every rule; the full stage has no text_image step. */
    struct st_plan_rules_view v;
    st_plan_rules_view(&p, &p.screening, &v);
    assert_int_equal(v.cfg.n_metrics, 3);
    assert_int_equal(v.cfg.n_guards, 4);
    assert_int_equal(v.cfg.n_limits, 1);
    st_plan_rules_view(&p, &p.full, &v);
    assert_int_equal(v.cfg.n_guards, 2);
    assert_string_equal(v.guards[1].name, "server.kv_capacity_tokens");
    st_plan_release(&p);
    free(text);
}

/* The example plan's own rules, through the screening view, give seed 000's verdicts (one cache
 * of the sequential designs for its arms). */
static struct st_rules_designs designs;
static void test_seed000_verdicts(void **state)
{
    (void)state;
    size_t len;
    char *text = read_example("seed000-mtp-compose.yaml", &len);
    struct st_plan p;
    parse_ok("seed000-mtp-compose.yaml", text, len, &p);
    struct st_plan_rules_view v;
    st_plan_rules_view(&p, &p.screening, &v);
    /* Medians of the seed's tables, each given three times (the rules need 3 repeats; without
       spread every test is exact), and the KV capacity once (samples: 1). */
    static const double b[] = {123.72, 123.72, 123.72, 128.75, 128.75, 128.75, 122.11,
                               122.11, 122.11, 14.426, 14.426, 14.426, 0.702,  0.702,
                               0.702,  12.815, 12.815, 12.815, 146622};
    static const double m1[] = {109.63, 109.63, 109.63, 112.61, 112.61, 112.61, 108.28,
                                108.28, 108.28, 14.426, 14.426, 14.426, 0.702,  0.702,
                                0.702,  12.815, 12.815, 12.815, 159669};
    static const double m3[] = {123.55, 123.55, 123.55, 134.24, 134.24, 134.24, 123.53,
                                123.53, 123.53, 14.426, 14.426, 14.426, 0.702,  0.702,
                                0.702,  12.815, 12.815, 12.815, 137414};
    static const double b1024[] = {123.72, 123.72, 123.72, 128.75, 128.75, 128.75, 122.11,
                                   122.11, 122.11, 17.993, 17.993, 17.993, 0.854,  0.854,
                                   0.854,  15.955, 15.955, 15.955, 155509};
    const double *vals[] = {b, m1, m3, b1024};
    static const char *const names[] = {
        "decode2048.decode_tps@code",      "decode2048.decode_tps@chinese",
        "decode2048.decode_tps@reasoning", "long128k.ttft_s",
        "long128k_repeat.ttft_s",          "text_image.ttft_s",
        "server.kv_capacity_tokens"};
    struct st_rules_samples s[4][7];
    for (int a = 0; a < 4; a++) {
        for (int i = 0; i < 7; i++) {
            s[a][i].metric = names[i];
            s[a][i].v = vals[a] + 3 * i;
            s[a][i].n = i < 6 ? 3 : 1;
        }
    }
    struct st_rules_arm base = {"baseline", s[0], 7, NULL, 0};
    static const enum st_rules_verdict want[] = {0, ST_RULES_REJECT, ST_RULES_INCONCLUSIVE,
                                                 ST_RULES_REJECT};
    static const char *const why[] = {
        NULL, "decode2048.decode_tps@chinese: 112.61", "60% interval lies inside +-5.00%",
        "guard long128k.ttft_s: 17.993 vs baseline 14.426 (medians); +24.73%"};
    struct st_rules_result r[3];
    for (int a = 1; a < 4; a++) {
        struct st_rules_arm arm = {p.arms[a - 1].name, s[a], 7, NULL, 0};
        char err[256] = "";
        v.cfg.designs = &designs;
        assert_int_equal(st_rules_decide(&v.cfg, &base, &arm, &r[a - 1], err, sizeof(err)), 0);
        if (r[a - 1].verdict != want[a] || !strstr(r[a - 1].reason, why[a])) {
            fail_msg("arm %s: %s: %s", arm.name, st_rules_verdict_name(r[a - 1].verdict),
                     r[a - 1].reason);
        }
    }
    /* Nothing promoted: the baseline stays. */
    assert_int_equal(st_rules_choose(r, 3), -1);
    st_rules_designs_release(&designs);
    st_plan_release(&p);
    free(text);
}

static void test_arm_params(void **state)
{
    (void)state;
    size_t len;
    char *text = read_example("seed000-mtp-compose.yaml", &len);
    struct st_plan p;
    parse_ok("seed000-mtp-compose.yaml", text, len, &p);
    struct st_target_params ps;
    char err[256];
    /* mtp3 on the baseline: fixed + baseline + its two changes. */
    assert_int_equal(st_plan_arm_params(&p, 1, NULL, &ps, err, sizeof(err)), 0);
    assert_int_equal(ps.n, p.fixed.n + p.baseline.n);
    assert_string_equal(st_target_param_find(&ps, "num_speculative_tokens")->value, "3");
    assert_string_equal(st_target_param_find(&ps, "cuda_graph_capture_sizes")->value, "[1, 4]");
    assert_string_equal(st_target_param_find(&ps, "max_num_batched_tokens")->value, "2048");
    assert_string_equal(st_target_param_find(&ps, "kv_cache_dtype")->value, "fp8");
    for (uint32_t i = 1; i < ps.n; i++) {
        assert_true(strcmp(ps.v[i - 1].name, ps.v[i].name) < 0);
    }
    st_target_params_release(&ps);
    /* batch1024 on the best step count: the baseline (seed 000's outcome) or mtp3. */
    assert_int_equal(st_plan_arm_params(&p, 2, "baseline", &ps, err, sizeof(err)), 0);
    assert_string_equal(st_target_param_find(&ps, "num_speculative_tokens")->value, "2");
    assert_string_equal(st_target_param_find(&ps, "max_num_batched_tokens")->value, "1024");
    st_target_params_release(&ps);
    assert_int_equal(st_plan_arm_params(&p, 2, "mtp3", &ps, err, sizeof(err)), 0);
    assert_string_equal(st_target_param_find(&ps, "num_speculative_tokens")->value, "3");
    assert_string_equal(st_target_param_find(&ps, "max_num_batched_tokens")->value, "1024");
    st_target_params_release(&ps);
    /* A winner outside on_best_of, and a plain arm on another arm, are refused. */
    assert_int_equal(st_plan_arm_params(&p, 2, "mtp9", &ps, err, sizeof(err)), ST_EPARSE);
    assert_string_equal(err, "arm batch1024: 'mtp9' is not one of the arms it may run on");
    assert_int_equal(st_plan_arm_params(&p, 1, "mtp1", &ps, err, sizeof(err)), ST_EPARSE);
    assert_int_equal(st_plan_arm_params(&p, 7, NULL, &ps, err, sizeof(err)), ST_EUSAGE);
    st_plan_release(&p);
    free(text);
    /* An on_best_of arm that restates the winner's value changes nothing at that step. */
    static const char plan[] = "name: t\n"
                               "target: {kind: sim, profile: p.yaml}\n"
                               "baseline: {steps: 2, batch: 2048}\n"
                               "arms:\n"
                               "  - {name: a1, set: {steps: 3}}\n"
                               "  - {name: a2, set: {steps: 3}, on_best_of: [baseline, a1]}\n"
                               "stages:\n"
                               "  screening: [{id: dec, kind: bench, output_tokens: 2048}]\n"
                               "  full:\n"
                               "    - {id: long, kind: bench, output_tokens: 16384}\n"
                               "    - {id: mixed, kind: soak, duration_s: 600}\n"
                               "rules: {metrics: [{metric: dec.decode_tps}]}\n";
    parse_ok("t.yaml", plan, strlen(plan), &p);
    assert_int_equal(st_plan_arm_params(&p, 1, "baseline", &ps, err, sizeof(err)), 0);
    st_target_params_release(&ps);
    assert_int_equal(st_plan_arm_params(&p, 1, "a1", &ps, err, sizeof(err)), ST_EPARSE);
    assert_string_equal(err, "arm a2 changes nothing on top of a1");
    assert_null(ps.v);
    st_plan_release(&p);
}

static void test_seed003_example(void **state)
{
    (void)state;
    size_t len;
    char *text = read_example("seed003-hit90-command.yaml", &len);
    struct st_plan p;
    parse_ok("seed003-hit90-command.yaml", text, len, &p);
    assert_int_equal(p.target.kind, ST_TARGET_BACKEND_COMMAND);
    assert_non_null(strstr(p.target.start, "--tp {tp} --pp-size {pp}"));
    assert_int_equal(p.n_arms, 5);
    assert_string_equal(p.arms[1].name, "tp4pp2_090");
    assert_int_equal(p.arms[1].set.n, 3);
    assert_int_equal(p.screening.steps[0].kind, ST_PLAN_STEP_SWEEP);
    assert_int_equal(p.screening.steps[0].n_concurrency, 6);
    assert_int_equal(p.screening.steps[0].concurrency[5], 16);
    assert_int_equal(p.screening.steps[1].seed_output_tokens, 8);
    assert_int_equal(p.rules.n_limits, 3);
    assert_string_equal(p.rules.limits[0].metric, "cap.queued@cc4");
    assert_true(p.rules.limits[0].has_max);
    assert_false(p.rules.limits[0].has_min);
    assert_int_equal(p.rules.context_tokens, 1048576);
    /* The rules' looks follow the stage's step: hit90 repeats {min: 3, max: 12} in both. */
    struct st_plan_rules_view v;
    st_plan_rules_view(&p, &p.screening, &v);
    assert_int_equal(v.metrics[0].min_n, 3);
    assert_int_equal(v.metrics[0].max_n, 12);
    assert_int_equal(p.screening.steps[0].repeats, 3);
    assert_int_equal(p.screening.steps[0].repeats_max, 12);
    st_plan_rules_view(&p, &p.full, &v);
    assert_int_equal(v.metrics[0].min_n, 3);
    assert_true(v.cfg.alpha == 0.05);
    assert_int_equal(v.cfg.n_limits, 3);
    char hex[ST_SHA256_HEX];
    st_plan_hash(&p, hex);
    assert_int_equal(strlen(hex), 64);
    st_plan_release(&p);
    free(text);
}

/* ---- a small plan, written two ways ---- */

static const char small[] =
    "name: t\n"
    "target:\n"
    "  kind: sim\n"
    "  profile: p.yaml\n"
    "baseline:\n"
    "  steps: 2\n"
    "  batch: 2048\n"
    "fixed:\n"
    "  ctx: 131072\n"
    "arms:\n"
    "  - name: a1\n"
    "    set: {steps: 3}\n"
    "stages:\n"
    "  screening:\n"
    "    - {id: dec, kind: bench, output_tokens: 2048, categories: [code]}\n"
    "  full:\n"
    "    - {id: long, kind: bench, output_tokens: 16384}\n"
    "    - {id: mixed, kind: soak, duration_s: 600}\n"
    "rules:\n"
    "  metrics:\n"
    "    - {metric: dec.decode_tps@code}\n";

static const char small_reordered[] =
    "# the same plan: keys in another order, comments, block style, explicit defaults\n"
    "rules:\n"
    "  noise: 0.05   # the default\n"
    "  metrics:\n"
    "    - metric: dec.decode_tps@code\n"
    "      aggregate: median\n"
    "stages:\n"
    "  full:\n"
    "    - kind: bench\n"
    "      id: long\n"
    "      output_tokens: 16384\n"
    "    - {kind: soak, id: mixed, duration_s: 600.0}\n"
    "  screening:\n"
    "    - id: dec\n"
    "      output_tokens: 2048\n"
    "      kind: bench\n"
    "      categories:\n"
    "        - code\n"
    "arms:\n"
    "  - set:\n"
    "      steps: 3\n"
    "    name: a1\n"
    "fixed: {ctx: 131072}\n"
    "baseline: {batch: 2048, steps: 2}\n"
    "target: {profile: p.yaml, kind: sim}\n"
    "name: t\n";

static void hash_of(const char *text, char hex[ST_SHA256_HEX])
{
    struct st_plan p;
    parse_ok("t.yaml", text, strlen(text), &p);
    st_plan_hash(&p, hex);
    st_plan_release(&p);
}

static char *replace(const char *text, const char *old, const char *new_text)
{
    const char *at = strstr(text, old);
    if (!at) {
        fail_msg("'%s' not in the test plan", old);
    }
    size_t len = strlen(text) - strlen(old) + strlen(new_text);
    char *out = malloc(len + 1);
    assert_non_null(out);
    size_t pre = (size_t)(at - text);
    memcpy(out, text, pre);
    memcpy(out + pre, new_text, strlen(new_text));
    memcpy(out + pre + strlen(new_text), at + strlen(old), strlen(at + strlen(old)) + 1);
    return out;
}

static void test_canonical_hash(void **state)
{
    (void)state;
    char h1[ST_SHA256_HEX], h2[ST_SHA256_HEX], h3[ST_SHA256_HEX];
    hash_of(small, h1);
    hash_of(small_reordered, h2);
    assert_string_equal(h1, h2);
    /* Any value change changes the hash. */
    char *edited = replace(small, "batch: 2048", "batch: 4096");
    hash_of(edited, h3);
    assert_string_not_equal(h1, h3);
    free(edited);
    /* The canonical form itself: JSON, defaults filled, parameters sorted. */
    struct st_plan p;
    parse_ok("t.yaml", small, strlen(small), &p);
    struct st_buf b;
    st_buf_init(&b);
    st_plan_canonical(&p, &b);
    const char *s = st_buf_str(&b);
    assert_non_null(strstr(s, "{\"format\":\"servetune-plan/1\",\"name\":\"t\""));
    assert_non_null(strstr(s, "\"baseline\":{\"batch\":\"2048\",\"steps\":\"2\"}"));
    assert_non_null(strstr(s, "\"noise\":0.05"));
    assert_non_null(strstr(s, "\"repeats\":3"));
    char hex[ST_SHA256_HEX];
    st_sha256_hex(b.data, b.len, hex);
    assert_string_equal(hex, h1);
    st_buf_release(&b);
    st_plan_release(&p);
}

/* ---- errors: each case edits the small plan; want NULL means the edited plan is valid ---- */

struct err_case {
    const char *old, *new_text, *want;
};

static const struct err_case errs[] = {
    /* "" is a value (a flag the baseline leaves out, which an arm adds); "key:" alone is not. */
    {"  batch: 2048\n", "  batch: 2048\n  draft: \"\"\n", NULL},
    {"  batch: 2048\n", "  batch: 2048\n  draft: ''\n", NULL},
    {"  batch: 2048\n", "  batch: 2048\n  draft:\n",
     "t.yaml:8:3: plan.baseline.draft: empty value (write \"\" for a parameter that passes "
     "nothing)"},
    {"name: t\n", "name: t\nbogus: 1\n",
     "t.yaml:2:1: unknown key 'bogus' in the plan (known: name,"},
    {"name: t\n", "name: t\nstgaes: 1\n",
     "t.yaml:2:1: unknown key 'stgaes' in the plan (known: name, description, target, baseline, "
     "fixed, arms, stages, rules); did you mean stages?"},
    {"name: t\n", "name: \"t\xff\"\n", "t.yaml:1:9: invalid UTF-8 (byte 0xff)"},
    {"  profile: p.yaml\n", "  profile: p.yaml\n  start: x {steps}\n",
     "t.yaml:5:3: target.start does not apply to kind sim"},
    {"set: {steps: 3}", "set: {steps: 2}",
     "t.yaml:11:5: arm a1 changes nothing: every value in set equals the baseline's"},
    {"set: {steps: 3}", "set: {steps: 3, batch: 1024}",
     "t.yaml:11:5: arm a1 changes 2 parameters (batch 2048 -> 1024, steps 2 -> 3); one variable "
     "per arm, or declare multi_variable: true"},
    {"set: {steps: 3}", "set: {ctx: 65536}",
     "t.yaml:12:11: arm a1 changes ctx, which the plan holds fixed"},
    {"set: {steps: 3}", "set: {tp: 4}",
     "t.yaml:12:11: arm a1 changes tp, which the baseline does not name"},
    {"fixed:\n  ctx: 131072\n", "fixed:\n  steps: 2\n",
     "t.yaml:9:3: fixed parameter steps is also a baseline parameter"},
    {"metric: dec.decode_tps@code", "metric: nope.ttft_s",
     "t.yaml:21:16: metric 'nope.ttft_s': no stage has a step 'nope'"},
    {"metric: dec.decode_tps@code", "metric: dec.hit_rate@code",
     "metric 'dec.hit_rate@code': a bench step produces no 'hit_rate' (it produces decode_tps,"},
    {"metric: dec.decode_tps@code", "metric: dec.decode_tps",
     "metric 'dec.decode_tps': name a point, @CATEGORY from the step's categories"},
    {"metric: dec.decode_tps@code", "metric: dec.decode_tps@math",
     "metric 'dec.decode_tps@math': step dec has no category 'math'"},
    {"metric: dec.decode_tps@code", "metric: server.kv_capacity_tokens, samples: 1",
     NULL /* a server metric is always produced: valid, decided on its one value */},
    {"metric: dec.decode_tps@code", "metric: server.kv_capacity_tokens",
     "t.yaml:21:8: rules.metrics[0]: server.kv_capacity_tokens is one value per arm and stage, "
     "so no test of repeats can decide on it: say samples: 1"},
    {"metric: dec.decode_tps@code", "metric: dec.decode_tps@code, samples: 2",
     "rules.metrics[0].samples: only 1 may be given"},
    {"categories: [code]", "categories: [code], repeats: 1",
     "rules.metrics[0]: step dec runs once in screening (repeats: 1), so the spread of "
     "dec.decode_tps@code is unknown and no test can decide on it"},
    {"categories: [code]", "categories: [code], repeats: {min: 4, max: 3}",
     "step dec.repeats: max 3 is below min 4"},
    {"categories: [code]", "categories: [code], repeats: {min: 1, max: 3}",
     "step dec.repeats.min: expected a whole number from 2 to 1000, got '1'"},
    {"categories: [code]", "categories: [code], repeats: {min: 3, mx: 9}",
     "unknown key 'mx' in step dec.repeats (known: min, max)"},
    {"rules:\n", "rules:\n  alpha: 0.7\n",
     "rules.alpha: expected a number from 1e-06 to 0.5, got '0.7'"},
    {"metric: dec.decode_tps@code", "metric: decode_tps", "expected STEP.METRIC"},
    {"output_tokens: 16384}", "output_tokens: 8192}",
     "t.yaml:17:8: stages.full: no bench step with output_tokens >= 16384"},
    {"duration_s: 600}", "duration_s: 300}", "stages.full: no soak step with duration_s >= 600"},
    {"kind: soak, duration_s: 600}", "kind: soak}",
     "t.yaml:18:8: step mixed: kind soak needs 'duration_s'"},
    {"kind: bench, output_tokens: 2048,", "kind: bench, shared_frac: 0.9, output_tokens: 2048,",
     "step dec: 'shared_frac' does not apply to kind bench"},
    {"kind: bench, output_tokens: 2048,", "kind: bnch, output_tokens: 2048,",
     "stages.screening[0].kind: expected one of qualify, bench, sweep, probe, soak, got 'bnch'"},
    {"rules:\n", "rules:\n  noise: 1.5\n",
     "rules.noise: expected a number from 0 to 0.99, got '1.5'"},
    {"rules:\n", "rules:\n  escalation: winner\n",
     "rules.escalation: expected one of promoted, best, all"},
    {"  metrics:\n    - {metric: dec.decode_tps@code}\n", "  guards: []\n",
     "rules.metrics: no ranked metric"},
    {"  - name: a1\n    set: {steps: 3}\n", "  []\n", "t.yaml:10:1: arms: empty list"},
    {"    set: {steps: 3}\n", "    set: {steps: 3}\n  - name: a1\n    set: {steps: 4}\n",
     "t.yaml:13:5: arm a1: the name is used twice"},
    {"    set: {steps: 3}\n", "    set: {steps: 3}\n    on_best_of: [a2]\n",
     "arm a1.on_best_of: 'a2' is neither baseline nor an earlier arm"},
    {"name: t\n", "name: [t\n", "t.yaml:"},
    {"name: t\n", "name: t\nname: u\n", "t.yaml:"},
    {"name: t\n", "name: t t\n", "plan.name: 't t' is not a name"},
    {"    set: {steps: 3}\n", "    set: {steps: 3}\n    multi_variable: yes\n",
     "arm a1.multi_variable: expected true or false, got 'yes'"},
    {"[code]}", "[code], repeats: 0}", "step dec.repeats: expected a whole number from 1 to 1000"},
    {"    - {id: long, kind: bench",
     "    - {id: dec, kind: soak, duration_s: 1}\n    - {id: long, kind: bench",
     "t.yaml:17:8: step dec is a bench step in screening and a soak step in full"},
    {"name: t\n", "name: \"t\\0\"\n", "plan.name: a NUL character in the value"},
    /* Targets. */
    {"  kind: sim\n  profile: p.yaml\n",
     "  kind: command\n  start: serve --steps {steps} --ctx {ctx} --x {nope}\n"
     "  base_url: http://h\n  health_url: http://h/health\n",
     "t.yaml: target.start: {nope} is neither a baseline nor a fixed parameter"},
    {"  kind: sim\n  profile: p.yaml\n",
     "  kind: command\n  start: serve --steps {steps} --ctx {ctx}\n"
     "  base_url: http://h\n  health_url: http://h/health\n  stop_signal: USR1\n",
     "target.stop_signal: expected TERM, INT, HUP, QUIT or KILL"},
    {"  kind: sim\n  profile: p.yaml\n",
     "  kind: compose\n  compose_file: c.yml\n  base_url: http://h\n  health_url: http://h/h\n",
     "t.yaml:3:3: target: missing key 'service'"},
    {"  kind: sim\n  profile: p.yaml\n", "  kind: url\n  base_url: http://h\n", NULL},
    {"  kind: sim\n  profile: p.yaml\n", "  kind: ssh\n",
     "target.kind: expected one of sim, command, compose, url, got 'ssh'"},
    /* Sweep and probe points. */
    {"    - {id: dec, kind: bench, output_tokens: 2048, categories: [code]}\n",
     "    - {id: dec, kind: bench, output_tokens: 2048, categories: [code]}\n"
     "    - {id: h90, kind: sweep, input_tokens: 131072, output_tokens: 512, shared_frac: 0.9,"
     " concurrency: [1, 4]}\n",
     NULL},
    {"metric: dec.decode_tps@code", "metric: h90.output_tps@cc8",
     "metric 'h90.output_tps@cc8': no stage has a step 'h90'"},
    {"    - {id: dec, kind: bench, output_tokens: 2048, categories: [code]}\n",
     "    - {id: dec, kind: sweep, input_tokens: 1000, output_tokens: 512, shared_frac: 0.9,"
     " concurrency: [1, 4]}\n",
     "metric 'dec.decode_tps@code': a sweep step produces no 'decode_tps'"},
    {"    - {id: dec, kind: bench, output_tokens: 2048, categories: [code]}\n",
     "    - {id: dec, kind: probe, input_tokens: 1000, output_tokens: 512, concurrency: [2, 4]}\n",
     "metric 'dec.decode_tps@code': step dec has no concurrency point 'code' (write ccN)"},
    {"    - {id: dec, kind: bench, output_tokens: 2048, categories: [code]}\n",
     "    - {id: dec, kind: probe, input_tokens: 1000, output_tokens: 512, concurrency: [2, 2]}\n",
     "step dec.concurrency: 2 twice"},
    {"metric: dec.decode_tps@code}",
     "metric: dec.decode_tps@code}\n  guards: [{metric: dec.ttft_s@code}]",
     "rules.guards[0]: missing key 'max_worse'"},
    {"metric: dec.decode_tps@code}",
     "metric: dec.decode_tps@code}\n  gates: {limits: [{name: q, metric: "
     "server.kv_capacity_tokens}]}",
     "rules.gates.limits[0]: give min, max or both"},
    {"metric: dec.decode_tps@code}",
     "metric: dec.decode_tps@code}\n  gates: {oom: false, tpu: true}",
     "unknown key 'tpu' in rules.gates"},
};

/* An arm adds a flag the baseline does not pass: the baseline's value is "". */
static void test_empty_value_arm(void **state)
{
    (void)state;
    static const char plan[] = "name: t\n"
                               "target: {kind: command, start: 'llama-server -m m.gguf {draft}',\n"
                               "         base_url: 'http://127.0.0.1:1', health_url: "
                               "'http://127.0.0.1:1/health'}\n"
                               "baseline: {draft: \"\"}\n"
                               "arms:\n"
                               "  - {name: spec, set: {draft: '-md d.gguf --draft-max 4'}}\n"
                               "stages:\n"
                               "  screening: [{id: dec, kind: bench, output_tokens: 2048}]\n"
                               "  full:\n"
                               "    - {id: long, kind: bench, output_tokens: 16384}\n"
                               "    - {id: mixed, kind: soak, duration_s: 600}\n"
                               "rules: {metrics: [{metric: dec.decode_tps}]}\n";
    struct st_plan p;
    struct st_target_params ps;
    char err[256];
    parse_ok("t.yaml", plan, strlen(plan), &p);
    assert_string_equal(st_target_param_find(&p.baseline, "draft")->value, "");
    assert_int_equal(st_plan_arm_params(&p, 0, NULL, &ps, err, sizeof(err)), 0);
    assert_string_equal(st_target_param_find(&ps, "draft")->value, "-md d.gguf --draft-max 4");
    st_target_params_release(&ps);
    st_plan_release(&p);
}

static void test_errors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
        char *text = replace(small, errs[i].old, errs[i].new_text);
        struct st_plan p;
        char err[512] = "";
        int rc = st_plan_parse("t.yaml", text, strlen(text), &p, err, sizeof(err));
        if (!errs[i].want) {
            if (rc != 0) {
                fail_msg("case %zu: rc %d: %s", i, rc, err);
            }
            st_plan_release(&p);
        } else {
            if (rc != ST_EPARSE || !strstr(err, errs[i].want)) {
                fail_msg("case %zu: rc %d, got \"%s\", want \"%s\"", i, rc, err, errs[i].want);
            }
            /* The plan is left empty. */
            assert_int_equal(p.n_arms, 0);
            assert_null(p.arms);
        }
        free(text);
    }
}

static void test_limits_and_sizes(void **state)
{
    (void)state;
    struct st_plan p;
    char err[256];
    assert_int_equal(st_plan_parse("big.yaml", small, ST_PLAN_MAX_BYTES + 1, &p, err, sizeof(err)),
                     ST_ETOOBIG);
    assert_int_equal(st_plan_parse("e.yaml", "", 0, &p, err, sizeof(err)), ST_EPARSE);
    assert_string_equal(err, "e.yaml: empty plan");
    assert_int_equal(st_plan_parse("l.yaml", "- 1\n", 4, &p, err, sizeof(err)), ST_EPARSE);
    assert_string_equal(err, "l.yaml:1:3: the plan: expected a mapping");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed000_example),  cmocka_unit_test(test_seed000_verdicts),
        cmocka_unit_test(test_arm_params),       cmocka_unit_test(test_seed003_example),
        cmocka_unit_test(test_canonical_hash),   cmocka_unit_test(test_errors),
        cmocka_unit_test(test_limits_and_sizes), cmocka_unit_test(test_empty_value_arm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
