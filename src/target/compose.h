/*
 * The compose backend's docker side (internal to src/target; arm_compose.c, the backend behind
 * the arm lifecycle's ops table, calls it; its pure rules are composetext.c's). It drives a docker
 * CLI (env->docker, else "docker") and a Compose CLI with exactly these commands (COMPOSE is
 * "DOCKER compose", v2, when `DOCKER compose version` exits 0, else "docker-compose", v1, next to
 * DOCKER when DOCKER is a path and one is there, else from PATH). They were run against a real
 * Docker Engine 20.10 with docker-compose 1.29 (tests/e2e/test_compose_docker.py); a fake CLI
 * (tests/support/fake-docker) stands in only for the faults a real engine cannot stage:
 *
 *   DOCKER compose version                                     -> which Compose (exit 0: v2)
 *   COMPOSE -f FILE [-f OVERRIDE] up -d --force-recreate SERVICE
 *   COMPOSE -f FILE [-f OVERRIDE] ps -a -q SERVICE             -> the container id (one line)
 *   COMPOSE -f FILE [-f OVERRIDE] stop -t SECONDS SERVICE
 *   DOCKER inspect CONTAINER   -> a JSON array of one object: State{Status, Running, Restarting,
 *                                 OOMKilled, ExitCode, Pid, StartedAt, Health{Status}},
 *                                 RestartCount, HostConfig{RestartPolicy{Name}}, Image,
 *                                 Config{Image, Cmd[], Env[]}
 *   DOCKER update --restart=POLICY CONTAINER
 *   DOCKER logs --tail N CONTAINER
 *
 * An arm's parameters go into an override file DIR/compose.override.yml (the compose file itself
 * is never written): with override "command", each parameter NAME (snake_case) rewrites the
 * service's command: "--name-in-kebab-case" and the non-flag words after it are replaced by the
 * value (a list [a, b] gives the words a b; a flag that is absent is appended); with override
 * "environment", NAME=VALUE is set in the service's environment. The service's command and
 * environment are read from the compose file with base/yaml.h. Every docker call, its exit status
 * and its output's first lines go into the evidence.
 */
#ifndef ST_TARGET_COMPOSE_H
#define ST_TARGET_COMPOSE_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/status.h"
#include "target/arm.h"
#include "target/spec.h"

struct st_compose; /* a service brought up for an arm: opaque */

/*
 * Brings the service up for arm with parameter set ps (NULL: the compose file as it is, no
 * override: the restore), sets its restart policy to "no" when ps is not NULL, and appends the
 * evidence (calls, override file text, container id, inspect) to json as one object. Returns 0
 * with *out set; a positive enum st_arm_fail (START: docker failed, with detail) with *out NULL;
 * or a negated errno / ST_EUSAGE / ST_EPARSE (the compose file) with err filled.
 */
int st_compose_up(const struct st_arm_plan *p, const char *arm, const struct st_target_params *ps,
                  const struct st_arm_env *env, struct st_compose **out, struct st_buf *json,
                  char *detail, size_t dlen, char *err, size_t errlen) ST_WUR;

/* Whether the container still runs as it was brought up: ST_ARM_OK; ST_ARM_FAIL_OOM
 * (State.OOMKilled, or an out-of-memory line in its log once it stopped); ST_ARM_FAIL_EXIT (it
 * stopped: exit code in detail; or the engine restarted it since up: State.Restarting, or
 * RestartCount above the one at up; a restarting container reads Running: true). */
enum st_arm_fail st_compose_check(struct st_compose *c, char *detail, size_t len);
/* docker logs --tail: the last max bytes of the service's log, appended to out. */
void st_compose_logs(struct st_compose *c, size_t max, struct st_buf *out);
/* Stops the service (compose stop -t stop_timeout_s), appends evidence to json (may be NULL),
 * frees c (NULL is fine). With leave_running, only frees c (the restore leaves it up). */
int st_compose_release(struct st_compose *c, int leave_running, struct st_buf *json) ST_WUR;

/*
 * The starting state as one JSON object appended to json: compose file and env files (the
 * service's env_file entries): path, SHA-256, and a copy of each under env->dir/saved/; the
 * container id and docker inspect's restart policy, health, image digest, OOMKilled when the
 * service runs. Returns 0 or an error (err).
 */
int st_compose_save_state(const struct st_arm_plan *p, const struct st_arm_env *env,
                          struct st_buf *json, char *err, size_t errlen) ST_WUR;

/*
 * After st_compose_up(ps NULL) for the restore: sets the restart policy back to the saved one
 * and checks what can be proven from files and docker: each file's SHA-256 equals the saved one,
 * the container runs, OOMKilled is false, the restart policy is the saved one. Appends one
 * {"name", "ok", "detail"} object per check to json (the caller's open array) and sets *ok to 1
 * only when all held. Health is checked by the caller. Returns 0 or an error of ours.
 */
int st_compose_prove(struct st_compose *c, const struct st_arm_plan *p,
                     const struct st_arm_env *env, const char *saved, size_t saved_len,
                     struct st_buf *json, int *ok, char *err, size_t errlen) ST_WUR;

/*
 * Note on the command list above: ps runs as `ps -a -q SERVICE`. Without -a, compose lists only
 * running containers, so an arm whose container died at once (it did not fit) would look as if
 * up had created nothing; with -a its id is found and inspect tells what happened.
 */

/* What the backend reads of docker inspect's container object. */
struct st_compose_inspect {
    int running, restarting, oom_killed;
    int64_t exit_code, pid, restart_count;
    char status[32], health[32], restart[64], image[160], config_image[256], started_at[48];
};

/*
 * Parses docker inspect's answer (text, len bytes: a JSON array whose first item is the
 * container) into *in, and, when w is not NULL, writes the evidence object (the fields, Config.Cmd,
 * and the names only of Config.Env: values may be secrets) through it. Absent fields read as
 * 0 / "". Returns 0 or ST_EPARSE.
 */
int st_compose_inspect_parse(const char *text, size_t len, struct st_compose_inspect *in,
                             struct st_jw *w) ST_WUR;
/* The parsed fields through w as an open object (the caller adds to it and closes it). */
void st_compose_inspect_json(struct st_jw *w, const struct st_compose_inspect *in);
/* The string token i of d into dst (at most len - 1 bytes; "" when i is not a string). */
void st_compose_json_str(const struct st_json *d, int i, char *dst, size_t len);

/* ---- Pure helpers, exported for the tests (tests/e2e/test_campaign_compose_c.c) ---- */

/* Word lists are struct st_arm_argv (arm.h): zero-initialize, st_arm_argv_push, release. */

/*
 * Splits a command string into words as a POSIX shell would for simple quoting: blanks separate
 * words, '...' is literal, "..." keeps blanks and takes \\ \" \$ \` as escapes, a backslash
 * outside quotes escapes the next byte; nothing is expanded ($VAR stays as written, for compose's
 * own interpolation). Appends the words to out. Returns 0, or ST_EPARSE (an unterminated quote or
 * a trailing backslash) with err.
 */
int st_compose_split(const char *s, struct st_arm_argv *out, char *err, size_t errlen) ST_WUR;

/* The words of a plan value (struct st_target_param's text): "[a, b]" gives a and b (items
 * trimmed; "[]" gives none), any other text itself as one word. Appends them to out. */
void st_compose_value_words(const char *value, struct st_arm_argv *out);

/*
 * Rewrites cmd for parameter name = value: every "--NAME" (NAME with '_' turned into '-') and the
 * words after it up to the next flag (a word starting with '-' that is not a negative number), or
 * "--NAME=TEXT", becomes "--NAME" followed by the value's words. When no such flag is present and
 * append is non-zero, "--NAME" and the words are appended. Returns the number of occurrences
 * replaced (0: appended, or left out without append).
 */
uint32_t st_compose_rewrite(struct st_arm_argv *cmd, const char *name, const char *value,
                            int append);

/* One call of the CLI (st_compose_run). */
struct st_compose_call {
    int status; /* the exit code; 128 + N when killed by signal N; -1 when not run or not known */
    int timed_out;          /* it outlived its deadline and its process group got SIGKILL */
    double seconds;         /* from the start to the exit (or the kill) */
    struct st_buf out, err; /* owned: the first 1 MiB of its stdout and of its stderr */
};
void st_compose_call_release(struct st_compose_call *c);

/*
 * Runs argv (argv[0] the program, looked up on PATH when it has no '/'; NULL-terminated) with
 * st_proc_run, no shell: stdin /dev/null, stdout and stderr captured, in its own process group,
 * the caller's environment. Waits until it exits and nothing more is ready on its pipes (a
 * grandchild keeping them open does not hold the call), or until timeout_s passes: then the group
 * gets SIGKILL. Fills *c (release it, whatever the result). Returns 0 when it ran, whatever its
 * status; or a negated errno (-ENOENT: no such program) with err, c->status -1.
 */
int st_compose_run(const char *const *argv, double timeout_s, struct st_compose_call *c, char *err,
                   size_t errlen) ST_WUR;

#endif
