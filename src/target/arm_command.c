/*
 * The command backend of the arm lifecycle (arm_int.h): the plan's start template with the arm's
 * values, run by /bin/sh -c in a new session and process group (not tied to the runner's life:
 * the journal keeps its pgid), output appended to target.log or DIR/server.log, stopped by
 * stop_signal and SIGKILL after stop_timeout_s. The starting state is the baseline's command line
 * (and the health answer); the restore starts the baseline and leaves it running. The rules:
 * docs/campaign-targets.md.
 */
#include "target/arm_int.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"

static int start(struct st_arm_server *s, const struct st_arm_plan *p, const char *arm,
                 const struct st_target_params *ps, const struct st_arm_env *env, double deadline,
                 struct st_jw *w, struct st_arm_up *up, char *err, size_t errlen)
{
    (void)arm;
    (void)deadline;
    (void)up; /* health is the lifecycle's wait */
    struct st_buf cmd;
    st_buf_init(&cmd);
    int rc = st_arm_template(p->target->start ? p->target->start : "", ps, &cmd, err, errlen);
    if (rc == 0) {
        char *argv[] = {"/bin/sh", "-c", cmd.data ? cmd.data : "", NULL};
        st_jw_kstr(w, "command", st_buf_str(&cmd));
        rc = st_arm_log_path(env->dir, p->target->log, &s->log_path, err, errlen);
        rc = rc == 0 ? st_arm_spawn(s, argv, 1, 0, err, errlen) : rc;
    }
    if (rc == 0) {
        st_arm_jw_process(w, s, 0);
        st_jw_kstr(w, "stop_signal",
                   sigabbrev_np(s->stop_signal) ? sigabbrev_np(s->stop_signal) : "?");
        st_jw_kf64(w, "stop_timeout_s", s->stop_timeout_s);
        st_jw_kstr(w, "restart_policy",
                   "none: a command server that exits stays down (the arm fails); it is not tied "
                   "to the runner's life, so the journal keeps its pgid");
        st_arm_plan_url(s, p);
    }
    st_buf_release(&cmd);
    return rc;
}

/* Looks name up in the baseline, then in fixed. */
static void baseline_params(const struct st_arm_plan *p, struct st_target_params *out)
{
    uint32_t n = p->baseline->n + p->fixed->n;
    out->v = st_xcalloc(n ? n : 1, sizeof(*out->v));
    out->n = 0;
    for (uint32_t k = 0; k < 2; k++) {
        const struct st_target_params *src = k == 0 ? p->baseline : p->fixed;
        for (uint32_t i = 0; i < src->n; i++) {
            if (k == 1 && st_target_param_find(p->baseline, src->v[i].name)) {
                continue;
            }
            out->v[out->n] = src->v[i];
            out->v[out->n].value = st_xstrdup(src->v[i].value);
            out->n++;
        }
    }
}

static void params_free(struct st_target_params *ps)
{
    for (uint32_t i = 0; i < ps->n; i++) {
        free(ps->v[i].value);
    }
    free(ps->v);
    ps->v = NULL;
    ps->n = 0;
}

static int save_fields(const struct st_arm_plan *p, const struct st_arm_env *env, struct st_jw *w,
                       char *err, size_t errlen)
{
    (void)env;
    const struct st_target_spec *t = p->target;
    struct st_target_params base;
    struct st_buf cmd;
    st_buf_init(&cmd);
    baseline_params(p, &base);
    int rc = st_arm_template(t->start ? t->start : "", &base, &cmd, err, errlen);
    params_free(&base);
    if (rc == 0) {
        st_jw_kstr(w, "start", t->start);
        st_jw_kstr(w, "baseline_command", st_buf_str(&cmd));
        if (t->health_url) {
            st_arm_jw_probe(w, "health", t->health_url);
        }
    }
    st_buf_release(&cmd);
    return rc;
}

static int save_state(const struct st_arm_plan *p, const struct st_arm_env *env,
                      struct st_buf *json, char *err, size_t errlen)
{
    return st_arm_state_object("command", save_fields, p, env, json, err, errlen);
}

/* command: the baseline started and left running, detached from the runner. */
static int restore(const struct st_arm_restore_ctx *c)
{
    struct st_buf *checks = c->checks;
    struct st_jw *w = c->w;
    struct st_arm_up up;
    struct st_arm_server *s = NULL;
    st_arm_up_init(&up);
    int rc = c->start(c->p, "baseline", c->baseline, c->env, &s, &up, c->err, c->errlen);
    if (rc == 0) {
        st_arm_add_check(checks, c->ok, "baseline_up", up.fail == ST_ARM_OK, up.detail);
        st_jw_key(w, "bring_up");
        st_jw_raw(w, up.json.data, up.json.len);
        if (s) {
            st_jw_ki64(w, "pid", s->pid);
            st_jw_ki64(w, "pgid", s->pid);
            st_jw_ku64(w, "start_ticks", s->start_ticks);
            st_jw_kbool(w, "left_running", 1);
            st_arm_server_free(s); /* not stopped: it is the restored server */
        }
    }
    st_arm_up_release(&up);
    return rc;
}

/* Stopped with the target's stop_signal and stop_timeout_s (st_arm_server_new). */
const struct st_arm_backend st_arm_backend_command = {
    .name = "command",
    .start = start,
    .save_state = save_state,
    .restore = restore,
    ST_ARM_PROC_OPS,
};
