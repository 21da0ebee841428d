/*
 * Arm lifecycle: bring one arm's server up per the plan's target (sim, command, compose, url),
 * wait for health with a timeout, read its KV capacity and context, check that the applied
 * configuration matches the arm, keep a failing arm from looping (restart policy "no"), watch
 * that it stays up, stop it, and at the end restore the starting state and prove it.
 *
 * Everything an arm does is written down: each function fills a JSON object (evidence) that the
 * runner journals and copies into the audit archive. An arm's own failure (it ran out of memory,
 * exited, never became healthy, runs another configuration than asked) is data, reported through
 * st_arm_up.fail with the evidence, not an error; errors are our side's (a bad template, a folder
 * we cannot write, a docker CLI that is missing).
 *
 * Backends (docs/campaigns.md, "Targets"), one file each behind an ops table (arm_int.h; arm.c
 * is the generic lifecycle):
 *  - sim (arm_sim.c): env->self_exe sim --profile PROFILE --set KEY=VALUE... --speed
 *    env->sim_speed --listen 127.0.0.1:0; parameters whose name holds a '.' are profile keys
 *    (--set), names starting "fault." become --fault KEY=VALUE, others are recorded only (image
 *    digests...). The child dies with us (PR_SET_PDEATHSIG) and is stopped at the end of the arm.
 *  - command (arm_command.c): the start template with {name} replaced by the arm's values, run by
 *    /bin/sh -c in a new process group, stdout and stderr appended to the log (DIR/server.log,
 *    or target.log: relative, inside DIR; absolute, as it stands); stop: stop_signal to the
 *    group, SIGKILL after stop_timeout_s.
 *  - compose (arm_compose.c over compose.c): env->docker compose -f FILE [-f DIR/override.yml]
 *    up -d SERVICE, the arm's parameters rewriting the service's command (--kebab-name VALUE) or
 *    environment; docker update --restart=no while the experiment runs; docker inspect for
 *    state, OOMKilled, image.
 *  - url (arm_url.c): nothing to start; the operator switches the server (env->operator
 *    callback), then health and the configuration check as for the others.
 *
 * Thread context: the runner's (main) thread. Not thread-safe.
 */
#ifndef ST_TARGET_ARM_H
#define ST_TARGET_ARM_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/status.h"
#include "target/spec.h"

/* Asks the operator to switch a url target to arm (params: its full set) and returns 0 when
 * done, non-zero to give up (the arm fails with "operator"). */
typedef int (*st_arm_operator_fn)(void *ctx, const char *arm, const struct st_target_params *ps);

/* Polled while an arm comes up (every wait for the sim's address or for health): non-zero asks
 * to give up (the runner's stop request). */
typedef int (*st_arm_cancel_fn)(void *ctx);

/* --sim-speed max: the simulator runs unpaced (`sim --speed max`), as fast as the CPU allows; its
 * figures are the same at every speed (docs/sim.md, "Virtual time"). Its numeric form, the
 * X-Sim-Time-Scale such a simulator announces. */
#define ST_ARM_SPEED_MAX 1e9

struct st_arm_env {
    const char *self_exe;    /* the servetune binary (sim target) */
    const char *plan_dir;    /* the plan's folder: relative paths in the plan resolve against it */
    const char *dir;         /* this arm's evidence folder (the caller creates it) */
    double sim_speed;        /* sim: --speed (virtual s per real s; ST_ARM_SPEED_MAX: max) */
    uint64_t sim_seed;       /* sim: --seed; 0 = the profile's */
    uint64_t sim_noise_seed; /* sim: --set perf.noise_seed=N, one per bring-up; 0 = none */
    const char *docker;      /* compose: the docker CLI (NULL: "docker" from PATH) */
    st_arm_operator_fn operator_fn; /* url: NULL = the operator cannot be asked: fail */
    void *operator_ctx;
    double poll_s; /* health polling interval (0: 0.2 s) */
    /* NULL: never cancelled. When it returns non-zero, st_arm_start stops what it started and
     * returns ST_EINTERRUPTED; st_arm_restore returns ST_EINTERRUPTED. */
    st_arm_cancel_fn cancel_fn;
    void *cancel_ctx;
};

enum st_arm_fail {
    ST_ARM_OK = 0,
    ST_ARM_FAIL_START = 1,  /* the start command / docker failed or the process exited at once */
    ST_ARM_FAIL_OOM = 2,    /* out of memory at startup or later (log line, OOMKilled, oom_kill) */
    ST_ARM_FAIL_EXIT = 3,   /* the server exited (or its container stopped) */
    ST_ARM_FAIL_HEALTH = 4, /* health did not answer 200 within health_timeout_s */
    ST_ARM_FAIL_CONFIG = 5, /* the server runs another configuration than the arm's */
    ST_ARM_FAIL_OPERATOR = 6,
};

/* "ok", "start", "oom", "exit", "health", "config", "operator". Static. */
const char *st_arm_fail_name(enum st_arm_fail f);

/* What the lifecycle reads of a campaign's plan: the target and the parameter sets that are not an
 * arm's own (the sim's overrides are target->overrides). Every pointer borrowed; the caller keeps
 * them alive across the calls that take the struct (a campaign's plan: its .target, .baseline
 * and .fixed). */
struct st_arm_plan {
    const struct st_target_spec *target;
    const struct st_target_params *baseline; /* the plan's baseline set */
    const struct st_target_params *fixed;    /* the parameters every arm holds */
};

struct st_arm_up {
    enum st_arm_fail fail;
    char detail[512];            /* one line: why it failed, with the evidence's key figures */
    char url[256];               /* the base URL (http://host:port), when up */
    uint64_t kv_capacity_tokens; /* 0 when the server does not say */
    char kv_source[64];          /* where it came from: "get_server_info", "metrics", "log"... */
    uint64_t max_context_tokens; /* 0 when unknown */
    double startup_s;            /* wall seconds from start to healthy */
    struct st_buf json;          /* owned: the evidence object (always a JSON object) */
    struct st_buf log_tail;      /* owned: a failed start's log, its last ST_ARM_FAIL_TAIL_MAX
                                  * bytes (this start's part); empty when up or without a log */
};
#define ST_ARM_FAIL_TAIL_MAX (64u << 10)
void st_arm_up_init(struct st_arm_up *up);
void st_arm_up_release(struct st_arm_up *up);

struct st_arm_server; /* a running arm: opaque */

/*
 * Brings arm (its name; ps: its full parameter set, a campaign's st_plan_arm_params) up per
 * p->target.
 * Returns 0 with *up filled: up->fail == ST_ARM_OK and *srv set (stop it with st_arm_stop), or
 * another fail with *srv NULL and whatever was started stopped again; or an error of ours
 * (ST_EUSAGE: a template names a parameter the arm lacks, a missing docker CLI...; a negated
 * errno) with err filled and nothing left running.
 */
int st_arm_start(const struct st_arm_plan *p, const char *arm, const struct st_target_params *ps,
                 const struct st_arm_env *env, struct st_arm_server **srv, struct st_arm_up *up,
                 char *err, size_t errlen) ST_WUR;

/*
 * Whether the running arm is still up: ST_ARM_OK, or ST_ARM_FAIL_EXIT / ST_ARM_FAIL_OOM with
 * detail filled (exit status, signal, OOMKilled, the log's last error line). Cheap enough to call
 * every second (sim/command: waitpid WNOHANG; compose: docker inspect; url: GET health).
 */
enum st_arm_fail st_arm_check(struct st_arm_server *s, char *detail, size_t len);

/* The last max bytes of the server's log (sim/command: the captured output; compose: docker
 * logs --tail; url: nothing), appended to out. */
void st_arm_log_tail(struct st_arm_server *s, size_t max, struct st_buf *out);

/*
 * Stops the arm and frees s (NULL is fine). Appends an evidence object to json when not NULL
 * (how it stopped, exit status, seconds). Returns 0, or an error when it would not stop (it was
 * killed).
 */
int st_arm_stop(struct st_arm_server *s, struct st_buf *json) ST_WUR;

/*
 * The starting state, saved before anything changes (seed 000 step 1), appended to json as one
 * object: sim: the profile's path and SHA-256; command: the baseline's command line and the
 * health answer if a server is already up; compose: the compose file's and env file's SHA-256 and
 * bytes' path under env->dir, docker inspect of the service (restart policy, health, image
 * digest, OOMKilled); url: the health answer and server info. Returns 0 or an error (err).
 */
int st_arm_save_state(const struct st_arm_plan *p, const struct st_arm_env *env,
                      struct st_buf *json, char *err, size_t errlen) ST_WUR;

/*
 * Brings the starting configuration back (saved: st_arm_save_state's object) and proves it:
 * file hashes equal to the saved ones, the service healthy, OOMKilled false, the restart policy
 * back to the saved one; sim: the baseline comes up healthy with the same KV capacity and is
 * stopped; command: the baseline is started detached and left running (its pid recorded).
 * Appends the final-state object to json ({"restored": bool, "checks": [{name, ok, detail}],
 * ...}) and sets *restored to 1 only when every check held. Returns 0 (restored or not), or an
 * error of ours.
 */
int st_arm_restore(const struct st_arm_plan *p, const struct st_target_params *baseline,
                   const struct st_arm_env *env, const char *saved, size_t saved_len,
                   struct st_buf *json, int *restored, char *err, size_t errlen) ST_WUR;

/*
 * Stops a process group an earlier runner left (resume): pgid and start_ticks as a command
 * arm's evidence recorded them ("pgid", "start_ticks": the leader's start time in clock ticks
 * after boot, from /proc). The group is signalled only when it is still that group: a live member
 * with pid pgid must have started at start_ticks (otherwise the id was reused); members left
 * after their leader are the group's own (a group's id is not reused while it has members). sig,
 * then SIGKILL after timeout_s. Appends {"kind": "leftover", "pgid", "members", "how", ...} to
 * json (may be NULL). Returns 0 (stopped, or nothing left), ST_ETIMEOUT when it had to be
 * killed, ST_ENOTFOUND when the id was reused (nothing sent), -EPERM for pgid <= 1 or the
 * runner's own group.
 */
int st_arm_stop_leftover(int pgid, uint64_t start_ticks, int sig, double timeout_s,
                         struct st_buf *json) ST_WUR;

/* The target's stop settings, defaults applied: *sig its stop_signal (SIGTERM when unset),
 * *timeout_s its stop_timeout_s (60 s when unset). The command and compose backends stop with
 * them, and a resumed campaign stops the group an earlier runner left. */
void st_arm_stop_settings(const struct st_target_spec *t, int *sig, double *timeout_s);

/* ---- Pure parts, exported for the unit tests (tests/unit/test_target_arm.c) ---- */

/*
 * The command template tmpl with every {name} replaced by the text of name's value in ps,
 * appended to out. There is no escape: every '{' opens a placeholder that must be a parameter
 * name and '}' (the plan parser refuses anything else). Returns 0, or ST_EUSAGE with err naming
 * the parameter the arm lacks ("{x}: the arm has no parameter x") or the malformed placeholder.
 */
int st_arm_template(const char *tmpl, const struct st_target_params *ps, struct st_buf *out,
                    char *err, size_t errlen) ST_WUR;

/* An argument vector or word list: v[0..n) owned strings, v[n] NULL (v NULL while empty).
 * Zero-initialize before use. */
struct st_arm_argv {
    char **v; /* owned */
    uint32_t n;
};
void st_arm_argv_release(struct st_arm_argv *a);
/* Appends a copy of s (pushn: of its first n bytes). */
void st_arm_argv_push(struct st_arm_argv *a, const char *s);
void st_arm_argv_pushn(struct st_arm_argv *a, const char *s, size_t n);

/*
 * The sim's command line: self_exe sim --profile PROFILE, then for overrides (the target's
 * overrides; may be NULL) and then ps (the arm's full set) in order: a name starting "fault."
 * joins one --fault K=V,... (K without the prefix); another name holding a '.' becomes --set
 * NAME=VALUE (lists as their text "[1, 3]", which the sim reads as YAML), fixed parameters
 * included (they are then also checked); any other name is not applied. Then --speed (speed >
 * 0), --seed (seed != 0), --set perf.noise_seed=N (noise_seed != 0), --listen 127.0.0.1:0. Each
 * name not applied goes into not_applied (may be NULL) as a line "NAME: reason". Returns 0 with
 * *out filled (release it), or ST_EUSAGE (a fault value holding ',' or '=') with err.
 */
int st_arm_sim_argv(const char *self_exe, const char *profile,
                    const struct st_target_params *overrides, const struct st_target_params *ps,
                    double speed, uint64_t seed, uint64_t noise_seed, struct st_arm_argv *out,
                    struct st_buf *not_applied, char *err, size_t errlen) ST_WUR;

/* Whether log[0..len) holds an engine's out-of-memory message (CUDA/torch OOM, vLLM "No
 * available memory for the cache blocks" or "larger than the available KV cache memory", SGLang
 * "Not enough memory", llama.cpp "failed to allocate buffer", the kernel's oom-kill). Returns 1
 * with the first such line (truncated to cap - 1 bytes) in line, else 0 and line "". */
int st_arm_oom_line(const char *log, size_t len, char *line, size_t cap);
/* The line of log[0..len) that best says why a server ended, by a table of engine error
 * patterns (armtext.c error_pats): a line naming the cause (llama.cpp "V cache quantization
 * requires flash_attn", "error: invalid argument: -kvu", a Python ValueError) before one that
 * only says something failed, before the way out ("terminate called without an active
 * exception", "Aborted", "exiting due to"); the first line of the best kind. Returns 1 + its
 * rank (1 cause, 2 a failure, 3 the way out) with the line (cut to cap - 1 bytes) and its
 * 1-based number in *line_no, or 0 when no line matches (line "", *line_no 0). */
int st_arm_error_line(const char *log, size_t len, char *line, size_t cap, uint32_t *line_no);
/* s[0..n) without trailing CR and blanks, cut to cap - 1 bytes, into out. */
void st_arm_copy_line(const char *s, size_t n, char *out, size_t cap);

/* Whether a parameter's text a (from the plan) and a value b a server reported mean the same:
 * quotes and blanks around them ignored; numbers compared as numbers (2048 = 2048.0 = 2.048e3);
 * true/false case-insensitive (vLLM's "True"); lists with blanks removed ("[1, 3]" = "[1,3]"). */
int st_arm_value_eq(const char *a, const char *b);

/* How st_arm_value_eq_as reads the two values before st_arm_value_eq compares them. */
enum st_arm_cmp {
    ST_ARM_CMP_PLAIN = 0,    /* as they stand */
    ST_ARM_CMP_SET,          /* the arm's as whether it is set (a draft model's path: "true",
                              * an empty value: "false") */
    ST_ARM_CMP_SET_NOT_NONE, /* that, and the server's as whether it is not "none" */
    ST_ARM_CMP_F32,          /* numbers as float32 (llama.cpp's sampling and draft settings) */
};
/* Whether the arm's value arm and the server's server mean the same under cmp. */
int st_arm_value_eq_as(const char *arm, const char *server, enum st_arm_cmp cmp);

struct st_target_pool; /* target/server.h */
/* The KV pool's statement of key ("type_k", "type_v": the cache types of llama.cpp's start-up
 * line; "cells": its cells when the figure came from a log line) into val, and where into
 * where. Returns 1, or 0 when the pool (may be NULL) does not state it. */
int st_arm_kv_value(const struct st_target_pool *pool, const char *key, char *val, size_t cap,
                    char *where, size_t wcap);

/* The value of name in the last line of log[0..len) that holds "non-default args:" (vLLM's
 * start-up dict, e.g. {'max_model_len': 131072, 'num_speculative_tokens': 2}): 1 with the value's
 * text (quotes kept off) in val, else 0. */
int st_arm_log_arg(const char *log, size_t len, const char *name, char *val, size_t cap);

#endif
