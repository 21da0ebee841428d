/*
 * Shared by the campaign parts' C drivers (tests/e2e/test_campaign_*_c.c): the CHECK counter and
 * `servetune sim` started on 127.0.0.1 port 0 and waited for. Each driver sets e2e_servetune and
 * e2e_tmpdir before starting a sim.
 */
#ifndef ST_TESTS_E2E_SIM_H
#define ST_TESTS_E2E_SIM_H

#include <stdio.h>
#include <sys/types.h>

#include "check.h"

extern int checks, failures;
extern const char *servetune; /* $SERVETUNE */
extern char tmpdir[256];      /* the driver's scratch folder */

struct sim {
    pid_t pid;
    char url[96];
};

/* Starts `servetune sim ARGS --listen 127.0.0.1:0` with stdout to tmpdir/NAME.out (a pipe nobody
 * reads could block it), waits up to 10 s for its "listening on HOST:PORT" line, then for
 * /health (model mode loads first). Returns 0, or -1 with a message on stderr. */
int sim_start(struct sim *s, const char *name, const char *const *args);
/* SIGTERM to its group, SIGKILL after 5 s. */
void sim_stop(struct sim *s);

#endif
