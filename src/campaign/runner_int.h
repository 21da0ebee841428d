/*
 * Internal to the campaign runner (runner.c: the procedure, units, journal, arms; verdict.c: the
 * decisions, summary.json and the verdict table; rnio.c: the small I/O helpers both call). Not an
 * interface for anything else.
 */
#ifndef ST_CAMPAIGN_RUNNER_INT_H
#define ST_CAMPAIGN_RUNNER_INT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "campaign/arm.h"
#include "campaign/plan.h"
#include "campaign/rules.h"
#include "campaign/runner.h"
#include "store/journal.h"

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
    uint64_t gpu_mem, oom_kills;
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
    const char *name;          /* borrowed: "baseline" or the plan's */
    int idx;                   /* plan arm index, -1 for the baseline */
    char on[ST_PLAN_NAME_MAX]; /* on_best_of: the winner it ran on */
    struct st_plan_params ps;  /* owned once resolved */
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

/* verdict.c: decides every arm that ran in stage s against the baseline (rules, gates). */
void st_rn_decide_stage(struct rn *r, int s);
/* verdict.c: writes summary.json (with the --compare-with block when asked and complete). */
int st_rn_write_summary(struct rn *r);
/* verdict.c: the verdict table on the run's output. */
void st_rn_print_table(struct rn *r);

#endif
