/*
 * The simulator's HTTP shell: an evhttp server on one event base and one thread that answers the
 * OpenAI-compatible routes with the responses described by spec.h, each streamed by a per-request
 * state machine driven by event timers and by output-drain callbacks (backpressure). It is not a
 * model of a serving engine: every response follows the configured timeline exactly.
 * Routes, headers and faults are in docs/sim.md; the state machine in docs/internals/sim.md.
 * Expected workload: thousands of concurrent streams, millions of events a second, one core.
 */
#ifndef ST_SIM_SERVER_H
#define ST_SIM_SERVER_H

#include <sys/socket.h>

#include <stddef.h>

#include "base/status.h"
#include "sim/spec.h"
#include "sim/trace.h"

struct st_sim_server_cfg {
    const struct sockaddr *addr; /* borrowed for st_sim_server_new: where to listen */
    socklen_t addrlen;
    struct st_sim_spec spec;    /* every request starts from this (defaults, flags, --fault) */
    const char *model;          /* copied: the model name the server reports */
    struct st_sim_trace *trace; /* borrowed, may be NULL; must outlive the server */
};

struct st_sim_server;

/*
 * Creates the event base, binds and listens on cfg->addr (close-on-exec, SO_REUSEADDR) and installs
 * the routes. Makes no loopback check: that policy belongs to the caller. Returns 0 and the server
 * in *out; a negated errno when socket, bind or listen fails; -ENOMEM when libevent cannot
 * allocate. On error err gets a sentence and nothing is left open.
 */
int st_sim_server_new(const struct st_sim_server_cfg *cfg, struct st_sim_server **out, char *err,
                      size_t errlen) ST_WUR;

/* Writes the bound address, "127.0.0.1:PORT" or "[::1]:PORT", with the real port. */
void st_sim_server_addr(const struct st_sim_server *s, char *buf, size_t len);

/*
 * Runs the event loop until SIGINT or SIGTERM (handled inside the loop, so the process gets no
 * default signal action while it runs). SIGPIPE must already be ignored by the caller. Returns
 * ST_EINTERRUPTED after a signal, or -EIO if the loop failed.
 */
int st_sim_server_run(struct st_sim_server *s) ST_WUR;

/*
 * Closes the listener and every connection (in-flight streams are cut) and frees s. Call it before
 * closing the trace. st_sim_server_free(NULL) is a no-op.
 */
void st_sim_server_free(struct st_sim_server *s);

#endif
