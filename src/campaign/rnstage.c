/*
 * The campaign runner's stage procedure (runner_int.h): resolving on_best_of arms, running an
 * arm's passes of a stage (its bring-up, its step units, its end), sequential passes for the arms
 * still undecided, and the stage's groups in blocked or interleaved order. Decides nothing itself
 * (verdict.c does, called per stage); calls rnunit.c, rnjournal.c and rnio.c; runner.c calls it.
 */
#include <limits.h>
#include <signal.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "campaign/plan.h"
#include "campaign/rules.h"
#include "store/journal.h"
#include "target/arm.h"

#include "campaign/runner_int.h"

/* Resolves arm a's parameters (on_best_of: the winner among its names in screening). */
static int resolve(struct rn *r, int a)
{
    struct arm *arm = &r->arms[a];
    if (arm->resolved) {
        return 0;
    }
    const struct st_plan_arm *pa = &r->plan.arms[arm->idx];
    const char *winner = NULL;
    if (pa->n_on_best_of > 0) {
        struct st_rules_result res[ST_PLAN_MAX_ARMS];
        const char *names[ST_PLAN_MAX_ARMS];
        size_t n = 0;
        for (uint32_t i = 0; i < pa->n_on_best_of; i++) {
            for (uint32_t b = 1; b < r->n_arms; b++) {
                if (strcmp(r->arms[b].name, pa->on_best_of[i]) == 0 && r->arms[b].st[0].decided) {
                    res[n] = r->arms[b].st[0].res;
                    names[n++] = r->arms[b].name;
                }
            }
        }
        int best = st_rules_choose(res, n);
        winner = best >= 0 ? names[best] : "baseline";
        int listed = 0;
        for (uint32_t i = 0; i < pa->n_on_best_of; i++) {
            listed |= strcmp(pa->on_best_of[i], winner) == 0;
        }
        if (!listed) {
            winner = "baseline"; /* the baseline not among its names: on the baseline still */
        }
        st_rn_fmt(arm->on, sizeof(arm->on), "%s", winner);
    }
    char e[512];
    int rc = st_plan_arm_params(&r->plan, (uint32_t)arm->idx, winner, &arm->ps, e, sizeof(e));
    if (rc != 0) {
        st_rn_fmt(arm->st[0].skipped, sizeof(arm->st[0].skipped), "not run: %s", e);
        return 1;
    }
    arm->resolved = 1;
    return 0;
}

/* The end of arm a's stage s (unit STAGE/ARM/down), or of its sequential pass `pass` (unit
 * STAGE/ARM/down/pN, N = pass + 1; pass < 0 for the first): a server that died after the last
 * unit is a failure of the arm like one during a unit (the gates see down_fail); then the stop.
 * A resumed campaign whose server is not this arm's (it came back after the last unit) records
 * that it could not check. */
static int end_stage(struct rn *r, int a, int s, int pass)
{
    struct arm *arm = &r->arms[a];
    struct astage *as = &arm->st[s];
    char id[ST_JOURNAL_MAX_UNIT_BYTES];
    if (pass < 0) {
        st_rn_fmt(id, sizeof(id), "%s/%s/down", st_rn_stage_names[s], arm->name);
    } else {
        st_rn_fmt(id, sizeof(id), "%s/%s/down/p%d", st_rn_stage_names[s], arm->name, pass + 1);
    }
    const char *prev = st_rn_done_result(r, id);
    int rc;
    if (prev) {
        struct st_json d;
        st_json_init(&d, 0);
        if (st_json_parse(&d, prev, strlen(prev)) != 0 || st_json_type(&d, 0) != ST_JSON_OBJECT) {
            st_json_release(&d);
            return st_rn_unit_unreadable(r, id, "its result is not a JSON object");
        }
        st_rn_json_get_str(&d, 0, "fail", as->down_fail, sizeof(as->down_fail));
        st_rn_json_get_str(&d, 0, "detail", as->down_detail, sizeof(as->down_detail));
        st_json_release(&d);
        if (as->down_fail[0] && !as->fail_kind[0]) {
            st_rn_fmt(as->fail_kind, sizeof(as->fail_kind), "%s", as->down_fail);
            st_rn_fmt(as->fail_detail, sizeof(as->fail_detail), "%s", as->down_detail);
            st_rn_fmt(as->fail_evidence, sizeof(as->fail_evidence), "arms/%s/failure-%s", arm->name,
                      st_rn_stage_names[s]);
        }
        return st_rn_stop_server(r);
    }
    rc = st_rn_unit_begin(r, id);
    if (rc != 0) {
        return rc;
    }
    enum st_arm_fail f = ST_ARM_OK;
    char detail[512] = "not checked: the server running now is not this arm's";
    if (r->srv && r->srv_arm == a && r->srv_stage == s) {
        detail[0] = '\0';
        f = st_arm_check(r->srv, detail, sizeof(detail));
    }
    if (f != ST_ARM_OK) {
        st_rn_fmt(as->down_fail, sizeof(as->down_fail), "%s", st_arm_fail_name(f));
        st_rn_fmt(as->down_detail, sizeof(as->down_detail), "after the stage's last unit: %s",
                  detail);
        st_rn_say(r, "[%s] %s: the server failed after the last unit: %s: %s", st_rn_stage_names[s],
                  arm->name, as->down_fail, detail);
        st_rn_save_failure(r, a, s, as->down_fail, NULL, as->down_detail);
    }
    rc = st_rn_stop_server(r);
    if (rc != 0) {
        return rc;
    }
    struct st_buf b;
    struct st_jw w;
    st_rn_obj_open(&b, &w);
    st_jw_kstr(&w, "fail", as->down_fail);
    st_jw_kstr(&w, "detail", f != ST_ARM_OK ? as->down_detail : detail);
    st_jw_obj_close(&w);
    rc = st_rn_unit_end(r, id, &b);
    st_buf_release(&b);
    return rc;
}

/* The passes every arm of a stage runs: the most repeats (the min, for sequential steps) of any
 * of its steps. */
static uint32_t min_passes(const struct st_plan_stage *stage)
{
    uint32_t m = 1;
    for (uint32_t k = 0; k < stage->n; k++) {
        m = stage->steps[k].repeats > m ? stage->steps[k].repeats : m;
    }
    return m;
}

/* The passes an arm may run at most: the largest repeats.max of the stage's steps. */
static uint32_t max_passes(const struct st_plan_stage *stage)
{
    uint32_t m = min_passes(stage);
    for (uint32_t k = 0; k < stage->n; k++) {
        m = stage->steps[k].repeats_max > m ? stage->steps[k].repeats_max : m;
    }
    return m;
}

/* Whether step runs in pass p (from 0): its fixed repeats, or a sequential step up to its max. */
static int step_in_pass(const struct st_plan_step *step, uint32_t p)
{
    uint32_t reps = step->repeats ? step->repeats : 1;
    return p < reps || (step->repeats_max > reps && p < step->repeats_max);
}

/* The bring-up a pass of stage s runs on: blocked order keeps the first min passes on one, every
 * later (sequential) pass and every interleaved pass is a bring-up of its own. */
static uint32_t up_group(const struct rn *r, int s, uint32_t pass)
{
    const struct st_plan_stage *stage = s == 0 ? &r->plan.screening : &r->plan.full;
    return !r->plan.interleaved && pass < min_passes(stage) ? 0 : pass;
}

/* Runs passes [from, to) of arm a in stage s: for every step, its repeats in those passes.
 * [0, min) in blocked order (one bring-up, the unit STAGE/ARM/up); one pass at a time in
 * interleaved order and for the sequential passes (each brought up again). The min passes end
 * with the unit STAGE/ARM/down, each later pass with STAGE/ARM/down/pN. Returns 0,
 * ST_EINTERRUPTED or an error of ours. */
static int run_arm(struct rn *r, int a, int s, uint32_t from, uint32_t to)
{
    struct arm *arm = &r->arms[a];
    struct astage *as = &arm->st[s];
    const struct st_plan_stage *stage = s == 0 ? &r->plan.screening : &r->plan.full;
    if (as->ran && (as->up_fail != ST_ARM_OK || as->fail_kind[0])) {
        return 0; /* an earlier pass found it failed */
    }
    as->ran = 1;
    r->cur_group = up_group(r, s, from);
    char id[ST_JOURNAL_MAX_UNIT_BYTES];
    st_rn_fmt(id, sizeof(id), "%s/%s/up", st_rn_stage_names[s], arm->name);
    const char *prev = st_rn_done_result(r, id);
    int rc;
    if (as->up_done) {
        /* brought up in an earlier pass; run_unit brings it up again */
    } else if (prev) {
        rc = st_rn_up_from_result(r, as, id, prev);
        if (rc != 0) {
            return rc;
        }
        if (as->up_fail != ST_ARM_OK) {
            st_rn_fmt(as->fail_kind, sizeof(as->fail_kind), "%s", st_arm_fail_name(as->up_fail));
            st_rn_fmt(as->fail_detail, sizeof(as->fail_detail), "%s", as->up_detail);
            st_rn_fmt(as->fail_evidence, sizeof(as->fail_evidence), "arms/%s/failure-%s", arm->name,
                      st_rn_stage_names[s]);
        }
    } else {
        rc = st_rn_bring_up(r, a, s, 1);
        if (rc != 0) {
            return rc;
        }
    }
    if (st_rn_stop) {
        return ST_EINTERRUPTED;
    }
    if (as->up_fail != ST_ARM_OK) {
        return 0;
    }
    for (uint32_t k = 0; k < stage->n; k++) {
        const struct st_plan_step *step = &stage->steps[k];
        for (uint32_t rep = from; rep < to; rep++) {
            if (!step_in_pass(step, rep)) {
                continue;
            }
            if (st_rn_stop) {
                return ST_EINTERRUPTED;
            }
            rc = st_rn_run_unit(r, a, s, step, rep);
            if (rc != 0) {
                return rc;
            }
            const struct ures *last = as->n ? &as->u[as->n - 1] : NULL;
            if (last && !last->server_fail[0] && last->step_error) {
                if (!as->fail_kind[0]) {
                    st_rn_fmt(as->fail_kind, sizeof(as->fail_kind), "step");
                    st_rn_fmt(as->fail_step, sizeof(as->fail_step), "%s", last->step);
                    st_rn_fmt(as->fail_detail, sizeof(as->fail_detail), "%s", last->detail);
                    st_rn_fmt(as->fail_evidence, sizeof(as->fail_evidence), "arms/%s/%s/%s",
                              arm->name, st_rn_stage_names[s], last->step);
                }
                st_rn_say(r, "[%s] %s: step %s could not run: %s", st_rn_stage_names[s], arm->name,
                          last->step, last->detail);
                return st_rn_stop_server(r);
            }
            if (as->n && as->u[as->n - 1].server_fail[0]) {
                const struct ures *u = &as->u[as->n - 1];
                if (!as->fail_kind[0]) {
                    st_rn_fmt(as->fail_kind, sizeof(as->fail_kind), "%s", u->server_fail);
                    st_rn_fmt(as->fail_step, sizeof(as->fail_step), "%s", u->step);
                    st_rn_fmt(as->fail_detail, sizeof(as->fail_detail), "%s", u->detail);
                    st_rn_fmt(as->fail_evidence, sizeof(as->fail_evidence), "arms/%s/failure-%s",
                              arm->name, st_rn_stage_names[s]);
                }
                return 0; /* the arm's stage stops here; the next arm goes on */
            }
        }
    }
    as->passes = to > as->passes ? to : as->passes;
    uint32_t pmin = min_passes(stage);
    if (to == pmin) {
        return end_stage(r, a, s, -1);
    }
    if (from >= pmin) {
        return end_stage(r, a, s, (int)from);
    }
    return st_rn_stop_server(r);
}

/* Whether the baseline failed in stage s (then nothing can be compared: *end says so). */
static int baseline_failed(struct rn *r, int s, enum st_runner_end *end)
{
    const struct astage *b = &r->arms[0].st[s];
    if (!b->fail_kind[0]) {
        return 0;
    }
    st_rn_say(r, "the baseline failed in %s (%s: %s): nothing can be compared",
              st_rn_stage_names[s], b->fail_kind, b->fail_detail);
    *end = ST_RUNNER_BASELINE_FAILED;
    return 1;
}

/* Whether arm a is in group g of stage s: screening's plain arms (g 0) and on_best_of arms (g 1);
 * in full, the escalated arms (g 0). The baseline is in group 0. */
static int in_group(const struct rn *r, int s, int g, uint32_t a, const unsigned char *in_full)
{
    if (a == 0) {
        return g == 0;
    }
    if (s == 1) {
        return g == 0 && in_full[a];
    }
    int obo = r->plan.arms[a - 1].n_on_best_of > 0;
    return obo == g;
}

/*
 * Stage s: for each group (screening: the plain arms, then the on_best_of arms, which need the
 * others' verdicts; full: the escalated arms) the min passes, then one sequential pass at a time
 * for the arms whose result asks for more, each after the baseline's same pass (run then if it
 * has not run yet, so drift is measured beside them), until none asks or the passes run out.
 * Blocked order runs each arm's min passes on one bring-up, one arm after the other; interleaved
 * runs pass 1 of every arm, then pass 2, ... The plain arms' results are frozen once an
 * on_best_of arm is resolved on them.
 */
int st_rn_run_stage(struct rn *r, int s, const unsigned char *in_full, enum st_runner_end *end)
{
    const struct st_plan_stage *stage = s == 0 ? &r->plan.screening : &r->plan.full;
    uint32_t pmin = min_passes(stage), pmax = max_passes(stage);
    int rc = 0;
    for (int g = 0; g < (s == 0 ? 2 : 1) && rc == 0; g++) {
        uint32_t members[MAX_ARMS];
        size_t n = 0;
        for (uint32_t a = 0; a < r->n_arms; a++) {
            if (in_group(r, s, g, a, in_full) && resolve(r, (int)a) == 0) {
                members[n++] = a;
            }
        }
        if (r->plan.interleaved) {
            for (uint32_t p = 0; p < pmin && rc == 0; p++) {
                for (size_t i = 0; i < n && rc == 0; i++) {
                    rc = run_arm(r, (int)members[i], s, p, p + 1);
                    if (rc == 0 && baseline_failed(r, s, end)) {
                        return 0;
                    }
                }
            }
        } else {
            for (size_t i = 0; i < n && rc == 0; i++) {
                rc = run_arm(r, (int)members[i], s, 0, pmin);
                if (rc == 0 && baseline_failed(r, s, end)) {
                    return 0;
                }
            }
        }
        if (rc != 0) {
            return rc;
        }
        st_rn_decide_stage(r, s);
        for (uint32_t p = pmin; p < pmax && rc == 0; p++) {
            uint32_t cont[MAX_ARMS];
            size_t nc = 0;
            for (size_t i = 0; i < n; i++) {
                const struct astage *as = &r->arms[members[i]].st[s];
                if (members[i] != 0 && as->decided && as->res.more && !as->fail_kind[0]) {
                    cont[nc++] = members[i];
                }
            }
            if (nc == 0) {
                break;
            }
            st_rn_say(r,
                      "[%s] pass %u: %zu arm(s) undecided, one more repeat each and of the "
                      "baseline",
                      st_rn_stage_names[s], p + 1, nc);
            if (r->arms[0].st[s].passes <= p) {
                rc = run_arm(r, 0, s, p, p + 1);
                if (rc == 0 && baseline_failed(r, s, end)) {
                    return 0;
                }
            }
            for (size_t i = 0; i < nc && rc == 0; i++) {
                rc = run_arm(r, (int)cont[i], s, p, p + 1);
            }
            if (rc == 0) {
                st_rn_decide_stage(r, s);
            }
        }
        if (s == 0 && g == 0) {
            for (size_t i = 0; i < n; i++) {
                r->arms[members[i]].st[s].frozen = r->arms[members[i]].st[s].decided;
            }
        }
    }
    return rc;
}
