/*
 * The campaign runner (runner.h). One procedure for run and resume: each unit (the starting
 * state, an arm's bring-up, one repeat of one step, the restore) is looked up in the journal
 * first; a completed unit's result is used as it is, a missing one is run and journaled. The
 * decisions are recomputed from the units' results every time, so they depend on the data only.
 * This file is the top: setup, the starting state, the stages in order, escalation, the restore
 * and the end; rnstage.c runs a stage, rnunit.c a unit, rnjournal.c keeps the records (each
 * calls only those after it; runner_int.h).
 *
 * Archive layout (docs/campaigns.md, "The audit archive"):
 *   plan.yaml, plan.canonical.json, plan.sha256   the plan as registered
 *   journal.jsonl                                 every record, fsynced (src/store/journal.h)
 *   state/start.json                              the starting state
 *   arms/ARM/                                     bring-up evidence, server.log
 *   arms/ARM/STAGE/STEP/rK/                       one unit: the step's outputs and receipts
 *   arms/ARM/failure-STAGE/                       failure evidence (log tail, check, watch)
 *   void/                                         partial units a resume discarded
 *   summary.json, final-state.json, report.md, report.html
 */
#include "campaign/runner.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/xalloc.h"
#include "campaign/plan.h"
#include "campaign/rules.h"
#include "report/report.h"
#include "store/journal.h"
#include "target/arm.h"

#include "campaign/runner_int.h"

static void on_signal(int sig)
{
    (void)sig;
    st_rn_stop = 1;
}

/* ---- the procedure ---- */

static int cmp_param(const void *a, const void *b)
{
    return strcmp(((const struct st_target_param *)a)->name,
                  ((const struct st_target_param *)b)->name);
}

static int init_arms(struct rn *r)
{
    r->n_arms = r->plan.n_arms + 1;
    r->arms[0].name = "baseline";
    r->arms[0].idx = -1;
    for (uint32_t i = 0; i < r->plan.n_arms; i++) {
        r->arms[i + 1].name = r->plan.arms[i].name;
        r->arms[i + 1].idx = (int)i;
    }
    /* The baseline's full set: fixed + baseline (arm params of no arm). */
    struct st_target_params *bp = &r->arms[0].ps;
    bp->n = r->plan.fixed.n + r->plan.baseline.n;
    bp->v = st_xcalloc(bp->n ? bp->n : 1, sizeof(*bp->v));
    uint32_t k = 0;
    const struct st_target_params *src[2] = {&r->plan.fixed, &r->plan.baseline};
    for (int s = 0; s < 2; s++) {
        for (uint32_t i = 0; i < src[s]->n; i++) {
            bp->v[k] = src[s]->v[i];
            bp->v[k].value = st_xstrdup(src[s]->v[i].value);
            k++;
        }
    }
    qsort(bp->v, bp->n, sizeof(*bp->v), cmp_param);
    r->arms[0].resolved = 1;
    return 0;
}

static int do_state(struct rn *r)
{
    const char *prev = st_rn_done_result(r, "state");
    if (prev) {
        st_buf_puts(&r->saved, prev);
        return 0;
    }
    int rc = st_rn_unit_begin(r, "state");
    if (rc != 0) {
        return rc;
    }
    char dir[PATH_MAX];
    st_rn_fmt(dir, sizeof(dir), "%s/state", r->out);
    rc = st_rn_mkdirs(dir, r->err, r->errlen);
    if (rc != 0) {
        return rc;
    }
    struct st_arm_env env;
    char adir[PATH_MAX];
    st_rn_arm_env(r, 0, adir, sizeof(adir), &env);
    env.dir = dir;
    rc = st_arm_save_state(&r->tp, &env, &r->saved, r->err, r->errlen);
    if (rc != 0) {
        return rc;
    }
    st_buf_putc(&r->saved, '\n');
    rc = st_rn_write_file(r, "state/start.json", r->saved.data, r->saved.len);
    if (rc != 0) {
        return rc;
    }
    r->saved.len--;
    st_rn_say(r, "starting state saved (state/start.json)");
    return st_rn_unit_end(r, "state", &r->saved);
}

/* An unjournaled restore (Ctrl-C, a full disk) that left the baseline running (a command
 * target whose starting state had a server on base_url): journaled as "server_left" with its
 * process group, so that a resume stops it before its first bring-up, as it stops the server a
 * killed runner left. Best effort: a journal that cannot take it is said. */
static void note_left_running(struct rn *r)
{
    struct st_json d;
    st_json_init(&d, 0);
    int left = st_json_parse(&d, r->final_state.data, r->final_state.len) == 0 &&
               st_rn_json_get_tri(&d, 0, "left_running") == 1;
    st_json_release(&d);
    if (!left) {
        return;
    }
    struct st_buf b;
    struct st_jw w;
    st_rn_obj_open(&b, &w);
    st_jw_kstr(&w, "arm", "baseline");
    st_jw_kstr(&w, "why", "restored after an interruption; a resume stops it first");
    st_jw_key(&w, "evidence");
    st_jw_raw(&w, r->final_state.data, r->final_state.len);
    st_jw_obj_close(&w);
    if (st_rn_append(r, "server_left", &b) != 0) {
        st_rn_say(r, "journal: the restored baseline could not be recorded; stop it (its process "
                     "group is in final-state.json) before `resume`");
    }
    st_buf_release(&b);
}

static int do_restore(struct rn *r, int journaled)
{
    int rc = st_rn_stop_server(r);
    if (rc != 0) {
        return rc;
    }
    const char *prev = journaled ? st_rn_done_result(r, "restore") : NULL;
    st_buf_clear(&r->final_state);
    if (prev) {
        st_buf_puts(&r->final_state, prev);
        struct st_json d;
        st_json_init(&d, 0);
        r->restored = st_json_parse(&d, prev, strlen(prev)) == 0 &&
                      st_rn_json_get_tri(&d, 0, "restored") == 1;
        st_json_release(&d);
    } else {
        if (journaled) {
            rc = st_rn_unit_begin(r, "restore");
            if (rc != 0) {
                return rc;
            }
        }
        char dir[PATH_MAX];
        struct st_arm_env env;
        st_rn_arm_env(r, 0, dir, sizeof(dir), &env);
        st_rn_fmt(dir, sizeof(dir), "%s/state", r->out);
        env.dir = dir;
        /* The baseline's capacity, for the sim's proof. */
        struct st_buf saved;
        st_buf_init(&saved);
        st_buf_append(&saved, r->saved.data, r->saved.len);
        uint64_t kv = r->arms[0].st[0].kv;
        if (kv && saved.len > 1 && saved.data[saved.len - 1] == '}') {
            saved.len--;
            st_buf_printf(&saved, "%s\"baseline_kv_capacity_tokens\":%llu}",
                          saved.len > 1 ? "," : "", (unsigned long long)kv);
        }
        st_rn_say(r, "restoring the starting configuration");
        int ok = 0;
        rc = st_arm_restore(&r->tp, &r->arms[0].ps, &env, saved.data ? saved.data : "{}", saved.len,
                            &r->final_state, &ok, r->err, r->errlen);
        st_buf_release(&saved);
        if (rc != 0) {
            return rc;
        }
        r->restored = ok;
        if (r->final_state.len == 0) {
            st_buf_printf(&r->final_state, "{\"restored\":%s}", ok ? "true" : "false");
        }
        if (!journaled) {
            note_left_running(r);
        }
        if (journaled) {
            rc = st_rn_unit_end(r, "restore", &r->final_state);
            if (rc != 0) {
                return rc;
            }
        }
    }
    st_buf_putc(&r->final_state, '\n');
    rc = st_rn_write_file(r, "final-state.json", r->final_state.data, r->final_state.len);
    r->final_state.len--;
    return rc;
}

/* Runs stage s over the arms in (NULL: all) and decides it; res[0..*n) get the decided arms'
 * results and idx their arm numbers. Returns what the stage returns; *end says whether the
 * baseline failed (then nothing is decided). */
static int run_and_decide(struct rn *r, int s, const unsigned char *in, enum st_runner_end *end,
                          struct st_rules_result *res, int *idx, size_t *n)
{
    *n = 0;
    int rc = st_rn_run_stage(r, s, in, end);
    if (rc != 0 || *end == ST_RUNNER_BASELINE_FAILED) {
        return rc;
    }
    st_rn_decide_stage(r, s);
    for (uint32_t a = 1; a < r->n_arms; a++) {
        if (r->arms[a].st[s].decided) {
            res[*n] = r->arms[a].st[s].res;
            idx[(*n)++] = (int)a;
        }
    }
    return 0;
}

/* The stages after the state is saved: screening, escalation, full, the choice. res: scratch
 * for MAX_ARMS results. */
static int stages(struct rn *r, struct st_rules_result *res, enum st_runner_end *end)
{
    int idx[MAX_ARMS];
    size_t n = 0;
    r->family[0] = r->n_arms - 1;
    int rc = run_and_decide(r, 0, NULL, end, res, idx, &n);
    if (rc != 0 || *end == ST_RUNNER_BASELINE_FAILED) {
        return rc;
    }
    /* Escalation. */
    unsigned char go[MAX_ARMS] = {0};
    size_t n_go = st_rules_escalate(r->plan.rules.escalation, res, n, go);
    if (n_go > 0 && r->plan.full.n > 0) {
        st_rn_say(r, "screening done: %zu arm(s) escalate to the full stage", n_go);
        unsigned char in_full[MAX_ARMS] = {1};
        for (size_t i = 0; i < n; i++) {
            in_full[idx[i]] = go[i];
        }
        r->family[1] = n_go;
        rc = run_and_decide(r, 1, in_full, end, res, idx, &n);
        if (rc != 0 || *end == ST_RUNNER_BASELINE_FAILED) {
            return rc;
        }
        int best = st_rules_choose(res, n);
        r->chosen = best >= 0 ? idx[best] : 0;
    } else {
        st_rn_say(r, "screening done: no arm escalates; the baseline stays");
        r->chosen = 0;
    }
    r->complete = 1;
    *end = ST_RUNNER_DONE;
    return 0;
}

static int procedure(struct rn *r, enum st_runner_end *end)
{
    int rc = do_state(r);
    if (rc != 0) {
        return rc;
    }
    struct st_rules_result *res = st_xcalloc(MAX_ARMS, sizeof(*res));
    rc = stages(r, res, end);
    free(res);
    return rc;
}

static void rn_release(struct rn *r)
{
    if (r->srv) {
        if (st_arm_stop(r->srv, NULL) != 0) {
            st_rn_say(r, "the last arm's server would not stop cleanly; it was killed");
        }
        r->srv = NULL;
    }
    for (uint32_t a = 0; a < MAX_ARMS; a++) {
        for (int s = 0; s < N_STAGES; s++) {
            for (size_t i = 0; i < r->arms[a].st[s].n; i++) {
                st_rn_ures_release(&r->arms[a].st[s].u[i]);
            }
            free(r->arms[a].st[s].u);
        }
        st_target_params_release(&r->arms[a].ps);
    }
    for (size_t i = 0; i < r->n_done; i++) {
        free(r->done[i].id);
        free(r->done[i].json);
    }
    free(r->done);
    st_buf_release(&r->saved);
    st_buf_release(&r->final_state);
    st_rules_designs_release(&r->designs);
    int sticky = r->j_open ? r->j.error : 0; /* already reported: not a second failure */
    if (r->j_open && st_journal_close(&r->j) != 0 && sticky == 0) {
        st_rn_say(r, "journal: closing it failed (its records were fsynced one by one)");
    }
    if (r->plan_ok) {
        st_plan_release(&r->plan);
    }
}

struct st_runner {
    struct rn rn;
};

struct st_runner *st_runner_new(void)
{
    return st_xcalloc(1, sizeof(struct st_runner));
}

void st_runner_free(struct st_runner *rn)
{
    free(rn);
}

int st_runner_run(struct st_runner *rn, const struct st_runner_opts *o, enum st_runner_end *end,
                  char *err, size_t errlen)
{
    struct rn *r = &rn->rn;
    memset(r, 0, sizeof(*r));
    r->tp = (struct st_arm_plan){&r->plan.target, &r->plan.baseline, &r->plan.fixed};
    r->o = o;
    r->err = err;
    r->errlen = errlen;
    r->j.fd = -1;
    st_buf_init(&r->saved);
    st_buf_init(&r->final_state);
    st_rn_fmt(r->out, sizeof(r->out), "%s", o->out_dir);
    *end = ST_RUNNER_DONE;
    st_rn_stop = 0;
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);

    int rc = o->resume ? st_rn_start_resume(r) : st_rn_start_new(r);
    if (rc == 0) {
        rc = init_arms(r);
    }
    if (rc == 0) {
        rc = procedure(r, end);
        if (rc < 0 && rc > -4096) {
            /* The archive could not be written (disk full, EFBIG, EIO): stop, put the starting
             * configuration back as Ctrl-C does (best effort: its own files may not fit), and
             * say what holds and what to do. */
            char first[1024];
            st_rn_fmt(first, sizeof(first), "%s", err[0] ? err : strerror(-rc));
            st_rn_say(r, "the archive could not be written; stopping the arm and restoring");
            char rerr[512] = "";
            r->err = rerr;
            r->errlen = sizeof(rerr);
            int rrc = do_restore(r, 0);
            r->err = err;
            r->errlen = errlen;
            st_rn_fmt(err, errlen,
                      "the archive could not be written: %s; the campaign stopped (%s); the "
                      "journal stays valid up to its last whole record: free space, then run "
                      "`servetune campaign resume %s`",
                      first,
                      rrc == 0 && r->restored ? "the starting configuration was restored"
                      : rrc == 0              ? "the restore could not be proven"
                                              : "the restore failed too",
                      r->out);
        } else if (rc == ST_EINTERRUPTED || (rc == 0 && st_rn_stop)) {
            st_rn_say(r,
                      "interrupted: stopping the arm and restoring; `servetune campaign resume %s` "
                      "continues",
                      r->out);
            *end = ST_RUNNER_INTERRUPTED;
            st_rn_stop = 0;
            rc = do_restore(r, 0);
            if (rc == 0) {
                rc = st_rn_write_summary(r);
            }
        } else if (rc == 0) {
            int base_start = *end == ST_RUNNER_BASELINE_FAILED && r->arms[0].st[0].up_done &&
                             (r->arms[0].st[0].up_fail == ST_ARM_FAIL_START ||
                              r->arms[0].st[0].up_fail == ST_ARM_FAIL_HEALTH ||
                              r->arms[0].st[0].up_fail == ST_ARM_FAIL_CONFIG);
            rc = do_restore(r, 1);
            if (rc == ST_EINTERRUPTED) {
                /* Ctrl-C during the final restore: restore anyway (unjournaled, as an interrupted
                 * campaign does); the restore unit stays open, so the campaign is not complete
                 * until `resume` journals it. */
                st_rn_say(r,
                          "interrupted during the restore: restoring anyway; `servetune "
                          "campaign resume %s` completes the campaign",
                          r->out);
                *end = ST_RUNNER_INTERRUPTED;
                st_rn_stop = 0;
                r->complete = 0;
                rc = do_restore(r, 0);
                if (rc == 0) {
                    rc = st_rn_write_summary(r);
                }
            } else if (rc == 0) {
                st_rn_decide_stage(r, 0);
                rc = st_rn_write_summary(r);
            }
            if (rc == 0 && *end != ST_RUNNER_INTERRUPTED) {
                char rerr[512];
                if (st_report_write(r->out, 1, rerr, sizeof(rerr)) != 0) {
                    st_rn_say(r, "report: %s", rerr);
                }
                st_rn_print_table(r);
                if (*end == ST_RUNNER_DONE && !r->restored) {
                    *end = ST_RUNNER_NOT_RESTORED;
                }
            }
            if (rc == 0 && base_start) {
                st_rn_fmt(err, errlen, "the baseline did not come up (%s): %s",
                          st_arm_fail_name(r->arms[0].st[0].up_fail), r->arms[0].st[0].up_detail);
                rc = ST_EUSAGE;
            }
        }
    }
    rn_release(r);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return rc;
}
