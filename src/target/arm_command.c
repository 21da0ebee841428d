/*
 * The command backend of the arm lifecycle (arm_int.h): the plan's start template with the arm's
 * values, run by /bin/sh -c in a new session and process group (not tied to the runner's life:
 * the journal keeps its pgid), output appended to target.log or DIR/server.log, stopped by
 * stop_signal and SIGKILL after stop_timeout_s. It owns base_url's port: nothing may hold it
 * before a start (arm.c). The starting state is the baseline's command line, the health answer and
 * whether a server ran on the port (and which); the restore starts the baseline and leaves it
 * running when one did, else stops it and proves the port free. The rules:
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

/* GET base + route into w under key. */
static void probe_route(struct st_jw *w, const char *key, const char *base, const char *route)
{
    struct st_buf u;
    st_buf_init(&u);
    st_buf_printf(&u, "%s%s", base, route);
    st_arm_jw_probe(w, key, u.data);
    st_buf_release(&u);
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
        /* Whether a server runs on base_url now, and which: the restore returns to this. */
        struct st_arm_port pt;
        int prc = st_arm_port_probe(t->base_url, &pt);
        st_jw_kbool(w, "running", prc == 0 && st_arm_port_taken(&pt));
        st_arm_jw_port(w, "port", &pt);
        if (prc == 0 && st_arm_port_taken(&pt)) {
            probe_route(w, "props", t->base_url, "/props");
            probe_route(w, "models", t->base_url, "/v1/models");
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

/* Whether the saved state says a server ran on base_url: 0 only when it says "running": false
 * (a state saved before the field existed keeps the old rule: the baseline is left running). */
static int saved_running(const struct st_json *d)
{
    int i = st_json_type(d, 0) == ST_JSON_OBJECT ? st_json_get(d, 0, "running") : -1;
    return !(i >= 0 && st_json_type(d, i) == ST_JSON_FALSE);
}

/* command: the baseline started; left running, detached from the runner, when a server ran at
 * the start; else stopped again and the port proven free (nothing listens, nothing answers). */
static int restore(const struct st_arm_restore_ctx *c)
{
    struct st_buf *checks = c->checks;
    struct st_jw *w = c->w;
    struct st_arm_up up;
    struct st_arm_server *s = NULL;
    int keep = saved_running(c->saved);
    struct st_arm_port pt;
    if (st_arm_port_probe(c->p->target->base_url, &pt) == 0 && st_arm_port_taken(&pt)) {
        /* Someone else's server holds the port now: not ours to stop, and nothing to prove. */
        st_arm_add_check(checks, c->ok, "port_free_before", 0, pt.desc);
        st_arm_jw_port(w, "port_before", &pt);
        return 0;
    }
    st_arm_up_init(&up);
    int rc = c->start(c->p, "baseline", c->baseline, c->env, &s, &up, c->err, c->errlen);
    if (rc == 0) {
        st_arm_add_check(checks, c->ok, "baseline_up", up.fail == ST_ARM_OK, up.detail);
        st_jw_key(w, "bring_up");
        st_jw_raw(w, up.json.data, up.json.len);
        st_jw_kstr(w, "saved_running",
                   keep ? "yes: a server ran on base_url at the start"
                        : "no: nothing ran on base_url at the start");
        if (s) {
            st_jw_ki64(w, "pid", s->pid);
            st_jw_ki64(w, "pgid", s->pid);
            st_jw_ku64(w, "start_ticks", s->start_ticks);
        }
        int left = s && keep;
        if (left) {
            st_arm_server_free(s); /* not stopped: it is the restored server */
        } else if (s) {
            st_arm_restore_stop(c, s, "its process group stopped on the stop signal");
        }
        st_jw_kbool(w, "left_running", left);
        if (!keep) {
            int prc = st_arm_port_probe(c->p->target->base_url, &pt);
            st_arm_add_check(checks, c->ok, "port_free", prc == 0 && !st_arm_port_taken(&pt),
                             pt.desc);
            st_arm_jw_port(w, "port", &pt);
        }
    }
    st_arm_up_release(&up);
    return rc;
}

/* Stopped with the target's stop_signal and stop_timeout_s (st_arm_server_new). */
const struct st_arm_backend st_arm_backend_command = {
    .name = "command",
    .owns_port = 1,
    .start = start,
    .save_state = save_state,
    .restore = restore,
    ST_ARM_PROC_OPS,
};
