/*
 * Subcommands of the servetune binary. Each takes the arguments after its name (argv[0] is the
 * subcommand name) and returns the process exit code (see docs/cli.md). Only cli/ prints to the
 * user or decides exit codes.
 */
#ifndef ST_CLI_CLI_H
#define ST_CLI_CLI_H

/* Exit codes, documented in docs/cli.md. */
enum st_exit {
    ST_EXIT_OK = 0,
    ST_EXIT_FAIL = 1,          /* the job ran but a check it owns failed */
    ST_EXIT_USAGE = 2,         /* bad arguments, bad input file, failed preflight */
    ST_EXIT_IO = 3,            /* could not write results (disk full, permissions) */
    ST_EXIT_INTERRUPTED = 130, /* SIGINT/SIGTERM: partial results written */
};

int st_cli_bench(int argc, char **argv);
int st_cli_sim(int argc, char **argv);
int st_cli_sweep(int argc, char **argv);
int st_cli_probe(int argc, char **argv);
int st_cli_qualify(int argc, char **argv);
int st_cli_campaign(int argc, char **argv);
int st_cli_report(int argc, char **argv);

#endif
