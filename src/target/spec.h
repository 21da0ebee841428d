/*
 * What a target is, as the campaign's plan states it and the lifecycle backends read it: the
 * backend kind (sim, command, compose, url) with its settings, and named parameter sets (the
 * baseline's, the fixed ones, an arm's). Plain data, parsed by src/campaign/plan*.c; no I/O; the
 * two helpers are inline so that every floor that holds a spec can use them without a library.
 */
#ifndef ST_TARGET_SPEC_H
#define ST_TARGET_SPEC_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ST_TARGET_NAME_MAX 64 /* parameter names, NUL included */

/* A named parameter. value is the YAML text of a scalar, or "[a, b]" for a list of scalars;
 * values are compared as that text (2048 and 2048.0 differ). */
struct st_target_param {
    char name[ST_TARGET_NAME_MAX];
    char *value; /* owned */
    int line, col;
};

struct st_target_params {
    struct st_target_param *v; /* owned, n, sorted by name after parsing */
    uint32_t n;
};

enum st_target_backend {
    ST_TARGET_BACKEND_SIM = 1,
    ST_TARGET_BACKEND_COMMAND = 2,
    ST_TARGET_BACKEND_COMPOSE = 3,
    ST_TARGET_BACKEND_URL = 4,
};

enum st_target_override {
    ST_TARGET_OVERRIDE_COMMAND = 1,     /* compose: the arm's parameters rewrite the command */
    ST_TARGET_OVERRIDE_ENVIRONMENT = 2, /* compose: they go into the service's environment */
};

/* Every char * is owned and NULL when absent. */
struct st_target_spec {
    enum st_target_backend kind;
    char *profile;                     /* sim */
    struct st_target_params overrides; /* sim: applied to every arm */
    char *start;                       /* command: template, {param} replaced by the arm's value */
    int stop_signal;                   /* command: sent to the process group (default SIGTERM) */
    double stop_timeout_s;             /* command: then SIGKILL (default 60) */
    char *log;                         /* command: log capture file */
    char *compose_file, *service;      /* compose */
    enum st_target_override override;  /* compose (default command) */
    char *base_url;                    /* url; sim/command/compose: where the server listens */
    char *health_url;                  /* all: polled until 200 */
    double health_timeout_s;           /* default 600 */
};

/* Frees ps's values and array and zeroes it. */
static inline void st_target_params_release(struct st_target_params *ps)
{
    for (uint32_t i = 0; i < ps->n; i++) {
        free(ps->v[i].value);
    }
    free(ps->v);
    memset(ps, 0, sizeof(*ps));
}

/* Looks up a parameter by name in ps (sorted or not); NULL when absent. */
static inline const struct st_target_param *st_target_param_find(const struct st_target_params *ps,
                                                                 const char *name)
{
    for (uint32_t i = 0; i < ps->n; i++) {
        if (strcmp(ps->v[i].name, name) == 0) {
            return &ps->v[i];
        }
    }
    return NULL;
}

#endif
