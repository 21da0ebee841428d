/*
 * servetune: entry point. Dispatches to one subcommand per file in src/cli/.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static void usage(FILE *f)
{
    fputs("usage: servetune <command> [options]\n"
          "\n"
          "commands:\n"
          "  bench   drive an OpenAI-compatible server with streaming requests and measure it\n"
          "  sweep   a workload at a list of concurrencies under a controlled prefix cache\n"
          "  probe   probe capacity: how many distinct documents the KV pool holds at once\n"
          "  qualify verify a server's answers: screening checks, quality questions, a suite file\n"
          "  sim     run the embedded simulator (an OpenAI-compatible test server)\n"
          "  campaign check a campaign plan: arms, stages, rules, hash, time estimate\n"
          "  report  a campaign archive's reports (report.md, report.html), drift check\n"
          "\n"
          "Run 'servetune <command> --help' for a command's options.\n",
          f);
}

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"bench", st_cli_bench},     {"sweep", st_cli_sweep}, {"probe", st_cli_probe},
    {"qualify", st_cli_qualify}, {"sim", st_cli_sim},     {"campaign", st_cli_campaign},
    {"report", st_cli_report},
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return ST_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(cmd, commands[i].name) == 0) {
            return commands[i].run(argc - 1, argv + 1);
        }
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return ST_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0) {
        puts("servetune 0.1.0");
        return ST_EXIT_OK;
    }
    fprintf(stderr, "servetune: unknown command '%s'\n", cmd);
    usage(stderr);
    return ST_EXIT_USAGE;
}
