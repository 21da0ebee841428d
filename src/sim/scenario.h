/*
 * Model-mode faults: the process-level ones (start-up OOM, crash after N requests or T seconds,
 * slow start, memory pressure that preempts) next to the per-request keys of spec.h (status with
 * status_rate, stall_after, malformed_at, reset_after, ...). Both come from --fault
 * "key=value,..." or from a scenario file, a flat YAML mapping with the same keys:
 *
 *     # comments and blank lines are ignored; a leading "---" too
 *     crash_after_requests: 20
 *     status: 503
 *     status_rate: 0.1
 *
 * Pure: parses bytes the caller read. Times are virtual seconds (live.h), but slow_step_us, real
 * time. docs/sim.md lists every key.
 */
#ifndef ST_SIM_SCENARIO_H
#define ST_SIM_SCENARIO_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "sim/spec.h"

/* Largest scenario file accepted. */
#define ST_SIM_SCENARIO_MAX_BYTES (64u * 1024u)
/* Largest time value, seconds. */
#define ST_SIM_FAULT_MAX_S 10000000.0

struct st_sim_faults {
    int startup_oom;               /* 1: fail at start-up with the dialect's OOM lines */
    uint64_t crash_after_requests; /* exit after this many completions finished; 0 = off */
    double crash_after_s;          /* exit this many virtual seconds after start; 0 = off */
    double slow_start_s;           /* added to engine.startup_s */
    uint64_t pressure_blocks;      /* memory_pressure_blocks: blocks taken from each rank's pool */
    double pressure_at_s;          /* when they are taken (virtual seconds after start) */
    double pressure_for_s;         /* how long they stay taken; 0 = until exit */
    uint64_t slow_step_us;         /* real microseconds the simulator sleeps at each engine step (a
                                    * starved host: its clock falls behind); 0 = off */
    double metrics_busy_delay_s;   /* /metrics answered this many virtual seconds late while
                                    * requests run or wait (llama.cpp's queue); 0 = off */
};

/* All off. */
void st_sim_faults_init(struct st_sim_faults *f);
/* Whether any process-level fault is set (they need model mode). */
int st_sim_faults_any(const struct st_sim_faults *f);

/*
 * Applies "key=value,..." left to right: process keys to f, every other key to s with
 * st_sim_spec_set. Same syntax, limits and errors as st_sim_spec_apply; all or nothing over both.
 */
int st_sim_faults_apply(struct st_sim_faults *f, struct st_sim_spec *s, const char *text,
                        size_t len, char *err, size_t errlen) ST_WUR;

/*
 * Applies a scenario file's bytes (name is used in messages: "NAME:LINE: ..."). Returns 0,
 * ST_EPARSE (a line that is not "key: value", an unknown key, a bad value, a key given twice) or
 * ST_ETOOBIG (over ST_SIM_SCENARIO_MAX_BYTES). All or nothing.
 */
int st_sim_scenario_parse(struct st_sim_faults *f, struct st_sim_spec *s, const char *text,
                          size_t len, const char *name, char *err, size_t errlen) ST_WUR;

#endif
