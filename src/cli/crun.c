/*
 * servetune campaign run PLAN --out DIR [options] and servetune campaign resume DIR [options]
 * (docs/cli.md, docs/campaigns.md). Exit codes: 0 the campaign completed and the restore was
 * proven; 1 it completed but the restore could not be proven, or the baseline failed (OOM, exit)
 * so nothing could be compared; 2 bad usage, a bad plan, a plan edited after start, an archive
 * that exists (run) or does not (resume), the baseline's start command or health failing at
 * once; 3 the archive could not be written (disk full: the journal stays valid, resume
 * continues); 130 interrupted (SIGINT/SIGTERM: resume continues).
 */
#include "cli/crun.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/status.h"
#include "campaign/runner.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "target/arm.h"

static void usage(FILE *f)
{
    fputs("usage: servetune campaign run PLAN.yaml --out DIR [options]\n"
          "       servetune campaign resume DIR [--api-key-file F] [--compare-with DIR2]\n"
          "\n"
          "run registers the plan (its hash, before the first request), saves the starting\n"
          "state, runs the baseline and every arm through screening, decides by the plan's\n"
          "rules, runs the full stage for the escalated arms, chooses, restores the starting\n"
          "configuration and proves it. Everything goes to the audit archive DIR: plan.yaml,\n"
          "journal.jsonl, per-arm receipts, summary.json, final-state.json, report.md and\n"
          "report.html. resume continues an interrupted campaign after its last completed\n"
          "unit; a plan edited after the start is refused.\n"
          "\n"
          "options (run; resume takes them from the archive):\n"
          "  --out DIR             the audit archive (must not hold a campaign yet)\n"
          "  --sim-speed X|max     sim targets: at most X virtual seconds per real second\n"
          "                        (default 1); max: unpaced. The figures do not depend on it\n"
          "  --seed N              seed of the prompts and the sim's draws (default 1)\n"
          "  --docker PATH         compose targets: the docker CLI (default: docker in PATH)\n"
          "  --nvidia-smi PATH     GPU watcher (default: nvidia-smi in PATH; '' turns it off)\n"
          "  --watch-interval S    /metrics and GPU sampling interval (default 5)\n"
          "both:\n"
          "  --api-key-file FILE   API key file (mode 0600); else $SERVETUNE_API_KEY\n"
          "  --compare-with DIR2   drift of this baseline against an earlier campaign's\n",
          f);
}

struct ropts {
    struct st_runner_opts r;
    int resume;
};

/* Parses argv into o. Returns -1 to go on, or the exit code (help, bad usage). */
static int parse(struct ropts *o, int argc, char **argv)
{
    struct st_opt opts[] = {
        {ST_OPT_STR("--out", &o->r.out_dir)},
        {ST_OPT_F64("--sim-speed", &o->r.sim_speed, 0.001, 1e6), .word = "max",
         .word_f64 = ST_ARM_SPEED_MAX},
        {ST_OPT_U64("--seed", &o->r.seed, 1, UINT64_MAX)},
        {ST_OPT_STR("--docker", &o->r.docker)},
        {ST_OPT_STR("--nvidia-smi", &o->r.nvidia_smi)},
        {ST_OPT_STR("--api-key-file", &o->r.api_key_file)},
        {ST_OPT_STR("--compare-with", &o->r.compare_with)},
        {ST_OPT_F64("--watch-interval", &o->r.watch_interval_s, 0.05, 3600)},
        {.flag = NULL},
    };
    for (size_t i = 0; o->resume && opts[i].flag; i++) {
        if (strcmp(opts[i].flag, "--api-key-file") != 0 &&
            strcmp(opts[i].flag, "--compare-with") != 0) {
            opts[i].refuse = "resume takes its options from the archive; only --api-key-file "
                             "and --compare-with may be given";
        }
    }
    const struct st_opt *const tables[] = {opts, NULL};
    struct st_cli_cmd cmd = {
        .name = o->resume ? "campaign resume" : "campaign run", .usage = usage, .tables = tables};
    return st_cli_parse(&cmd, argc, argv);
}

/* url targets: the operator switches the server by hand. The request goes to stderr; one line
 * on stdin ("" or "ok") confirms, "skip" or end of input gives up (the arm fails "operator"). A
 * script can answer through a pipe. */
static int ask_operator(void *ctx, const char *arm, const struct st_target_params *ps)
{
    (void)ctx;
    fprintf(stderr, "\ncampaign: OPERATOR: switch the server to arm '%s':", arm);
    for (uint32_t i = 0; i < ps->n; i++) {
        fprintf(stderr, " %s=%s", ps->v[i].name, ps->v[i].value);
    }
    fprintf(stderr, "\ncampaign: then press Enter (or type skip): ");
    fflush(stderr);
    char line[256];
    if (!fgets(line, sizeof(line), stdin)) {
        fprintf(stderr, "\ncampaign: no answer on stdin: %s is not switched\n", arm);
        return 1;
    }
    line[strcspn(line, "\r\n")] = '\0';
    return strcmp(line, "skip") == 0;
}

int st_cli_campaign_run(int argc, char **argv, int resume)
{
    const char *cmd = resume ? "campaign resume" : "campaign run";
    struct ropts o;
    memset(&o, 0, sizeof(o));
    o.resume = resume;
    /* The one positional argument (PLAN or DIR) comes first. */
    const char *pos = NULL;
    if (argc >= 2 && argv[1][0] != '-') {
        pos = argv[1];
        argv[1] = argv[0];
        argv++;
        argc--;
    }
    int rc = parse(&o, argc, argv);
    if (rc >= 0) {
        return rc;
    }
    if (!pos) {
        fprintf(stderr, "servetune %s: expected %s (see --help)\n", cmd,
                resume ? "the campaign's archive DIR" : "a plan file");
        return ST_EXIT_USAGE;
    }
    if (resume) {
        o.r.out_dir = pos;
    } else {
        o.r.plan_path = pos;
        if (!o.r.out_dir) {
            fprintf(stderr, "servetune %s: --out DIR is required (the audit archive)\n", cmd);
            return ST_EXIT_USAGE;
        }
    }
    if (o.r.api_key_file && access(o.r.api_key_file, R_OK) != 0) {
        fprintf(stderr, "servetune %s: --api-key-file %s: %s\n", cmd, o.r.api_key_file,
                strerror(errno));
        return ST_EXIT_USAGE;
    }
    static char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
        fprintf(stderr, "servetune %s: cannot find the servetune binary (/proc/self/exe)\n", cmd);
        return ST_EXIT_USAGE;
    }
    self[n] = '\0';
    o.r.self_exe = self;
    o.r.resume = resume;
    o.r.operator_fn = ask_operator;
    o.r.log = stderr;
    o.r.out = stdout;
    o.r.color = isatty(STDOUT_FILENO);
    enum st_runner_end end = ST_RUNNER_DONE;
    char err[1024] = "";
    struct st_runner *rn = st_runner_new();
    rc = st_runner_run(rn, &o.r, &end, err, sizeof(err));
    st_runner_free(rn);
    if (rc != 0) {
        fprintf(stderr, "servetune %s: %s\n", cmd, err[0] ? err : st_strerror(rc));
        if (rc == ST_EUSAGE || rc == ST_EPARSE || rc == ST_ETOOBIG || rc == ST_ENOTFOUND) {
            return ST_EXIT_USAGE;
        }
        return ST_EXIT_IO;
    }
    switch (end) {
    case ST_RUNNER_DONE:
        return ST_EXIT_OK;
    case ST_RUNNER_INTERRUPTED:
        return ST_EXIT_INTERRUPTED;
    case ST_RUNNER_NOT_RESTORED:
        fprintf(stderr, "%sservetune %s: the restore could not be proven (final-state.json)%s\n",
                isatty(STDERR_FILENO) ? "\033[31m" : "", cmd,
                isatty(STDERR_FILENO) ? "\033[0m" : "");
        return ST_EXIT_FAIL;
    case ST_RUNNER_BASELINE_FAILED:
    default:
        return ST_EXIT_FAIL;
    }
}
