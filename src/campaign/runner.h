/*
 * The campaign runner: reads a plan, pre-registers it (its canonical hash written before the
 * first request), saves the starting state, runs every arm through the screening stage, decides
 * per the plan's rules, resolves on-best-of arms, escalates, runs the full stage, chooses, and
 * restores the starting configuration with proof; everything recorded in the audit archive's
 * journal (src/store/journal.h) as units, so `resume` continues after the last completed unit,
 * discards a partial one and never duplicates or loses a receipt. docs/campaigns.md ("Running a
 * campaign", "The audit archive") is the definition.
 *
 * Run and resume are one procedure: every unit first looks in the journal and uses a completed
 * unit's result instead of running it again; decisions are computed from the units' results
 * only, so an interrupted campaign, resumed, decides from the same data.
 *
 * Thread context: the main thread; installs SIGINT/SIGTERM handlers for its duration.
 */
#ifndef ST_CAMPAIGN_RUNNER_H
#define ST_CAMPAIGN_RUNNER_H

#include <stdint.h>
#include <stdio.h>

#include "base/status.h"
#include "campaign/plan.h"

struct st_runner_opts {
    const char *plan_path;  /* run: the plan file; resume: NULL (DIR/plan.yaml) */
    const char *out_dir;    /* the audit archive */
    int resume;             /* 1: continue the campaign in out_dir */
    const char *self_exe;   /* the servetune binary (steps and sim arms run it) */
    double sim_speed;       /* sim targets: virtual seconds per real second (default 1) */
    uint64_t seed;          /* prompts and the sim's draws (default 1) */
    const char *docker;     /* compose: the docker CLI, NULL: "docker" */
    const char *nvidia_smi; /* NULL: looked up in PATH; "": off */
    const char *api_key_file;
    const char *compare_with; /* an earlier archive: drift of the baseline */
    double watch_interval_s;  /* /metrics and GPU sampling (default 5) */
    /* url targets: asks the operator to switch the server to an arm (src/target/arm.h);
     * NULL: a url arm cannot be switched and fails with "operator" (its baseline still runs). */
    int (*operator_fn)(void *ctx, const char *arm, const struct st_target_params *ps);
    void *operator_ctx;
    FILE *log; /* progress lines (stderr) */
    FILE *out; /* the verdict table (stdout) */
    int color; /* ANSI colours on log */
};

/* What the run came to; the CLI turns it into an exit code (docs/cli.md). */
enum st_runner_end {
    ST_RUNNER_DONE = 0,        /* complete, decided, restored and proven */
    ST_RUNNER_NOT_RESTORED,    /* complete, but the restore could not be proven */
    ST_RUNNER_BASELINE_FAILED, /* the baseline itself failed: nothing could be compared */
    ST_RUNNER_INTERRUPTED,     /* SIGINT/SIGTERM: resume continues it */
};

/*
 * The runner's state (the plan, the arms and their units, the journal, the server up now): the
 * caller owns it, from st_runner_new to st_runner_free; st_runner_run resets it at its start, so
 * one state may run several campaigns one after another. No state is kept anywhere else except
 * the SIGINT/SIGTERM flag, which a signal handler must find without an argument.
 */
struct st_runner;
struct st_runner *st_runner_new(void);
void st_runner_free(struct st_runner *rn);

/*
 * Runs (or resumes) the campaign of o with the state rn. Returns 0 with *end set, or an error
 * before or outside the experiment: ST_EUSAGE / ST_EPARSE (bad plan, an archive that exists for
 * run, a plan edited after start or a completed unit whose result cannot be read back for
 * resume, the baseline's start command or health failing at once: the server is left as it was)
 * or a negated errno (the archive cannot be written: -ENOSPC...), with err filled.
 */
int st_runner_run(struct st_runner *rn, const struct st_runner_opts *o, enum st_runner_end *end,
                  char *err, size_t errlen) ST_WUR;

#endif
