/*
 * Internal to the campaign runner. Its files, each calling only those below it (no file calls
 * up; docs/campaigns.md): runner.c (the top: setup, stages in order, escalation,
 * restore), rnstage.c (one stage of the arms), rnunit.c (one unit: a bring-up or a step; the stop
 * flag), rnjournal.c (records, units, a unit's result JSON, setup from the archive), verdict.c
 * (the decisions, summary.json and the verdict table), rnio.c (the small I/O helpers all call).
 * Not an interface for anything else. Everything here runs on the runner's thread.
 */
#ifndef ST_CAMPAIGN_RUNNER_INT_H
#define ST_CAMPAIGN_RUNNER_INT_H

#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/json.h"
#include "campaign/plan.h"
#include "campaign/rules.h"
#include "campaign/runner.h"
#include "store/journal.h"
#include "target/arm.h"

#define MAX_ARMS (ST_PLAN_MAX_ARMS + 1) /* the baseline is arm 0 */
#define N_STAGES 2
#define TTFT_KEEP 2000

extern const char *const st_rn_stage_names[N_STAGES]; /* "screening", "full" */

/* ---- one completed step unit, as journaled ---- */

struct uval {
    char name[ST_PLAN_METRIC_MAX];
    double v;
};

struct ures {
    char id[ST_JOURNAL_MAX_UNIT_BYTES + 1];
    char step[ST_PLAN_NAME_MAX];
    uint32_t rep;
    struct uval *v; /* owned, n */
    size_t n;
    int functional_ok, quality_ok, aborted, exit_code;
    int step_error; /* the step could not run or left no JSON (a broken setup, not data) */
    uint64_t errors, receipts;
    char server_fail[16]; /* "" or an st_arm_fail name: the server failed during the unit */
    char detail[512];
    double *ttft; /* owned, n_ttft */
    size_t n_ttft;
    double spec_accept; /* -1 unknown */
    double wall_s;      /* the unit's wall time (a timing: never compared across runs) */
    uint64_t gpu_mem;
    int64_t oom_kills;   /* the host's oom_kill delta over the unit; -1 unknown */
    int64_t preemptions; /* the server's preemption counter over the unit; -1 unknown */
    int is_qualify;
};

/* One arm in one stage. */
struct astage {
    int ran;
    uint32_t passes; /* passes run so far (a pass is one repeat of each step that has it) */
    int up_done;
    enum st_arm_fail up_fail;
    char up_detail[512];
    uint64_t kv, ctx;
    char kv_source[64];
    char fail_kind[16]; /* "" or the failure that stopped the arm's stage */
    char fail_step[ST_PLAN_NAME_MAX];
    char fail_detail[512];
    char fail_evidence[PATH_MAX];
    struct ures *u; /* owned, n */
    size_t n;
    int decided;
    int frozen; /* its result was read to resolve an on_best_of arm: no longer redecided */
    struct st_rules_result res;
    char skipped[256]; /* why the arm did not run (on_best_of resolution) */
    /* The server found dead when the stage ended (after its last unit): "exit"/"oom" or "". */
    char down_fail[16];
    char down_detail[512];
};

struct arm {
    const char *name;           /* borrowed: "baseline" or the plan's */
    int idx;                    /* plan arm index, -1 for the baseline */
    char on[ST_PLAN_NAME_MAX];  /* on_best_of: the winner it ran on */
    struct st_target_params ps; /* owned once resolved */
    int resolved;
    struct astage st[N_STAGES];
};

struct done_unit {
    char *id;   /* owned */
    char *json; /* owned: the unit_end record's result */
};

struct rn {
    const struct st_runner_opts *o;
    struct st_plan plan;
    int plan_ok;
    struct st_arm_plan tp; /* plan's target, baseline and fixed sets, as the lifecycle reads them */
    char hash[ST_SHA256_HEX];
    char out[PATH_MAX];
    char plan_dir[PATH_MAX];
    char plan_src[PATH_MAX]; /* the plan file the campaign was started from */
    double speed;
    uint64_t seed;
    char docker[PATH_MAX];
    char nvsmi[PATH_MAX];
    int nvsmi_set;
    double watch_s;
    struct st_journal j;
    int j_open;
    struct done_unit *done;
    size_t n_done, cap_done;
    struct st_buf saved; /* the starting state */
    struct arm arms[MAX_ARMS];
    uint32_t n_arms;
    /* The server that runs now. */
    struct st_arm_server *srv;
    int srv_arm, srv_stage;
    uint32_t srv_group, cur_group; /* the bring-up group of the server, of the pass running */
    char srv_url[256];
    int complete, restored, chosen;
    size_t family[N_STAGES];         /* arms of each stage (the Holm families' size) */
    struct st_rules_designs designs; /* prepared sequential designs, reused */
    struct st_buf final_state;
    char *err;
    size_t errlen;
};

/* snprintf through a va_list (the archive's paths fit PATH_MAX; a longer one is cut and the open
 * that uses it fails); returns what vsnprintf does, 0 on an encoding error. */
int st_rn_fmt(char *out, size_t len, const char *f, ...) __attribute__((format(printf, 3, 4)));
/* One progress line "campaign: ..." on the run's log. */
void st_rn_say(struct rn *r, const char *f, ...) __attribute__((format(printf, 2, 3)));
/* Reads a whole file of at most max bytes into out (appended, NUL-terminated). */
int st_rn_read_file(const char *path, size_t max, struct st_buf *out, char *err, size_t errlen);
/* Writes DIR/rel atomically, mode 0644; the message goes to r->err. */
int st_rn_write_file(struct rn *r, const char *rel, const char *data, size_t len);

/* rnio.c: creates path and its parents; the message goes to err. */
int st_rn_mkdirs(const char *path, char *err, size_t errlen);
/* rnio.c: a record or a result to write: b initialized (release it), w on it, an object open. */
void st_rn_obj_open(struct st_buf *b, struct st_jw *w);

/* ---- rnjournal.c: records and units ---- */

/* Appends a record of kind with json (NULL data: "{}"); a failure's message goes to r->err. */
int st_rn_append(struct rn *r, const char *kind, const struct st_buf *json);
/* Begins unit id; ends it with result res (valid JSON) and remembers it as done. */
int st_rn_unit_begin(struct rn *r, const char *id);
int st_rn_unit_end(struct rn *r, const char *id, const struct st_buf *res);
/* The result of completed unit id (borrowed from r, NUL-terminated), NULL if it has not ended. */
const char *st_rn_done_result(const struct rn *r, const char *id);
/* A completed unit's result that cannot be read back: ST_EPARSE, with a message in r->err that
 * names the unit and why. Resume stops there (nothing appended, nothing moved): running the unit
 * again would put a second result beside the recorded one. */
int st_rn_unit_unreadable(struct rn *r, const char *id, const char *why);
/* Reads string key of object obj into out (cut to len): 0, or -1 when it is not a string. */
int st_rn_json_get_str(const struct st_json *d, int obj, const char *key, char *out, size_t len);
/* Key of obj as 1 (true), 0 (false) or -1 (absent or not a boolean). */
int st_rn_json_get_tri(const struct st_json *d, int obj, const char *key);
/* A step unit's result: to JSON (appended to out), from JSON (0 or ST_EPARSE: not a JSON
 * object; u is then empty), released; st_rn_astage_add moves *u into the stage (u is cleared). */
void st_rn_ures_json(const struct ures *u, struct st_buf *out);
int st_rn_ures_parse(const char *id, const char *json, struct ures *u);
void st_rn_ures_release(struct ures *u);
void st_rn_astage_add(struct astage *s, struct ures *u);
/* A completed bring-up unit's result into as: 0, or st_rn_unit_unreadable()'s ST_EPARSE. */
int st_rn_up_from_result(struct rn *r, struct astage *as, const char *id, const char *json);
/* run: checks out holds no campaign, registers the plan (plan.yaml, canonical form, hash) and
 * appends the campaign record. resume: opens the journal, reads the completed units and the
 * campaign's settings back, refuses an edited plan or a completed unit with no result object,
 * stops a server the killed run left and discards a partial unit. 0, ST_EUSAGE / ST_EPARSE
 * (r->err says what to do) or a negated errno. */
int st_rn_start_new(struct rn *r);
int st_rn_start_resume(struct rn *r);

/* ---- rnunit.c: units that run something ---- */

/* Set by the runner's SIGINT/SIGTERM handlers; every loop below checks it. */
extern volatile sig_atomic_t st_rn_stop;
/* Stops the live server, if any, and appends server_stopped with its evidence. */
int st_rn_stop_server(struct rn *r);
/* The arm environment of arm a (dir: DIR/arms/ARM, dlen bytes, which env borrows). */
void st_rn_arm_env(struct rn *r, int a, char *dir, size_t dlen, struct st_arm_env *env);
/* Records why arm a stopped in stage s and writes its evidence under arms/ARM/failure-STAGE. */
void st_rn_save_failure(struct rn *r, int a, int s, const char *kind, const char *step,
                        const char *detail);
/* Brings arm a up for stage s (as_unit: the unit STAGE/ARM/up; else an arm_reup record). Returns
 * 0 (r->srv set, or the arm failed: as->up_fail), or an error of ours. */
int st_rn_bring_up(struct rn *r, int a, int s, int as_unit);
/* Runs (or reads back) the unit STAGE/ARM/STEP/rK, K = rep + 1, and adds its result to the arm's
 * stage. 0, ST_EINTERRUPTED (the unit stays open), ST_EPARSE (its recorded result is unreadable)
 * or an error of ours. */
int st_rn_run_unit(struct rn *r, int a, int s, const struct st_plan_step *step, uint32_t rep);

/* ---- rnstage.c: one stage ---- */

/* Runs stage s (in_full: the arms escalated to full, NULL for screening); *end becomes
 * ST_RUNNER_BASELINE_FAILED when the baseline failed. 0, ST_EINTERRUPTED or an error of ours. */
int st_rn_run_stage(struct rn *r, int s, const unsigned char *in_full, enum st_runner_end *end);

/* verdict.c: decides every arm that ran in stage s against the baseline (rules, gates). */
void st_rn_decide_stage(struct rn *r, int s);
/* verdict.c: writes summary.json (with the --compare-with block when asked and complete). */
int st_rn_write_summary(struct rn *r);
/* verdict.c: the verdict table on the run's output. */
void st_rn_print_table(struct rn *r);

#endif
