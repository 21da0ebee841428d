/*
 * The simulator's HTTP shell: an evhttp server on one event base and one thread that answers the
 * OpenAI-compatible routes, each response streamed by a per-request state machine driven by
 * timers, output-drain callbacks (backpressure) and, in model mode, engine events.
 *
 * Two modes. Fixed-timing (no model config): every response follows the timeline that spec.h
 * describes, exactly; it is not a model of a serving engine. Model mode (a profile): requests are
 * tokenized, queued and batched by the engine model (live.h), time is virtual and scaled by a
 * speed, and the routes, metrics, messages and faults follow the chosen engine's dialect.
 * Routes, headers and faults are in docs/sim.md; the state machines in docs/internals/sim.md.
 * Expected workload: thousands of concurrent streams, millions of events a second, one core.
 */
#ifndef ST_SIM_SERVER_H
#define ST_SIM_SERVER_H

#include <sys/socket.h>

#include <stddef.h>

#include "base/status.h"
#include "sim/model/profile.h"
#include "sim/scenario.h"
#include "sim/spec.h"
#include "sim/trace.h"

/* Log text from the event loop (one or more lines, each ending in "\n"); cli/ prints it. */
typedef void (*st_sim_log_cb)(void *arg, const char *text);
/* A crash fault fired: text is the fatal line(s). The callback ends the process; it never
 * returns (cli/ prints and calls _exit). */
typedef void (*st_sim_crash_cb)(void *arg, const char *text);

/* Model mode. */
struct st_sim_model_cfg {
    const struct st_profile *p;  /* copied: validated, and its memory plan fits */
    double speed;                /* virtual seconds per real second, > 0; 0: unpaced (max) */
    uint64_t seed;               /* engine draws, status_rate, expect decisions */
    int dev_mode;                /* vLLM: /reset_prefix_cache exists */
    const char *slot_save_path;  /* copied; NULL: llama.cpp slot actions answer 501 */
    struct st_sim_faults faults; /* process-level faults */
    st_sim_log_cb log_cb;        /* may be NULL */
    void *log_arg;
    st_sim_crash_cb crash_cb; /* required when a crash fault is set */
    void *crash_arg;
};

struct st_sim_server_cfg {
    const struct sockaddr *addr; /* borrowed for st_sim_server_new: where to listen */
    socklen_t addrlen;
    struct st_sim_spec spec;    /* every request starts from this (defaults, flags, --fault) */
    const char *model;          /* copied: the model name the server reports */
    struct st_sim_trace *trace; /* borrowed, may be NULL; must outlive the server */
    const struct st_sim_model_cfg *engine; /* borrowed for st_sim_server_new; NULL: fixed timing */
};

struct st_sim_server;

/*
 * Creates the event base, binds and listens on cfg->addr (close-on-exec, SO_REUSEADDR) and installs
 * the routes. Makes no loopback check: that policy belongs to the caller. In model mode it also
 * creates the engine and arms the start-up, crash and pressure timers (virtual time starts now).
 * Returns 0 and the server in *out; a negated errno when socket, bind or listen fails; -ENOMEM
 * when libevent cannot allocate; ST_EPARSE when the engine refuses the profile. On error err gets
 * a sentence and nothing is left open.
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
