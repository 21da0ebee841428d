/*
 * servetune campaign run|resume: the campaign runner's command line (src/campaign/runner.h does
 * the work). Called by `servetune campaign` with argv[0] = "run" or "resume".
 */
#ifndef ST_CLI_CRUN_H
#define ST_CLI_CRUN_H

int st_cli_campaign_run(int argc, char **argv, int resume);

#endif
