/*
 * The url backend of the arm lifecycle (arm_int.h): nothing to start or stop; the operator
 * switches the server to each arm (env->operator_fn), then health and the configuration check as
 * for the others; the watch is one health GET. The starting state is the health answer and what
 * the server says it is; the restore asks the operator to switch back and waits for health. The
 * rules: docs/campaign-targets.md.
 */
#include "target/arm_int.h"

#include <stdio.h>

#include "target/server.h"

/* Asks the operator to switch to arm; up->fail OPERATOR when it cannot be asked or gives up.
 * Nothing to start, so never an error of ours. */
static int start(struct st_arm_server *s, const struct st_arm_plan *p, const char *arm,
                 const struct st_target_params *ps, const struct st_arm_env *env, double deadline,
                 struct st_jw *w, struct st_arm_up *up, char *err, size_t errlen)
{
    (void)deadline;
    (void)err;
    (void)errlen;
    if (!env->operator_fn) {
        up->fail = ST_ARM_FAIL_OPERATOR;
        snprintf(up->detail, sizeof(up->detail),
                 "url target: the operator cannot be asked to switch to %s", arm);
    } else if (env->operator_fn(env->operator_ctx, arm, ps) != 0) {
        up->fail = ST_ARM_FAIL_OPERATOR;
        snprintf(up->detail, sizeof(up->detail), "the operator did not switch the server to %s",
                 arm);
    }
    st_jw_kbool(w, "operator_switched", up->fail == ST_ARM_OK);
    st_jw_kstr(w, "restart_policy", "the operator's");
    st_arm_plan_url(s, p);
    return 0;
}

static enum st_arm_fail check(struct st_arm_server *s, char *detail, size_t len)
{
    long status = 0;
    char why[256];
    int rc = st_arm_http_get(&s->http, st_buf_str(&s->health_url), ST_ARM_HEALTH_TRY_MS, &status,
                             NULL, why, sizeof(why));
    if (rc == 0 && status == 200) {
        return ST_ARM_OK;
    }
    snprintf(detail, len, "health %s: %s", st_buf_str(&s->health_url), why);
    return ST_ARM_FAIL_EXIT;
}

static void log_read(struct st_arm_server *s, size_t max, int tail, struct st_buf *out)
{
    (void)s;
    (void)max;
    (void)tail;
    (void)out; /* the operator's server: no log of ours */
}

static int stop(struct st_arm_server *s, struct st_jw *w)
{
    (void)s;
    st_jw_kstr(w, "how", "none: the url server is the operator's");
    return 0;
}

static int save_fields(const struct st_arm_plan *p, const struct st_arm_env *env, struct st_jw *w,
                       char *err, size_t errlen)
{
    (void)env;
    (void)err;
    (void)errlen;
    const struct st_target_spec *t = p->target;
    if (t->health_url) {
        st_arm_jw_probe(w, "health", t->health_url);
    } else {
        struct st_buf path;
        st_buf_init(&path);
        st_buf_printf(&path, "%s/health", t->base_url ? t->base_url : "");
        st_arm_jw_probe(w, "health", path.data);
        st_buf_release(&path);
    }
    struct st_target tg;
    struct st_target_cfg cfg = {.base_url = t->base_url ? t->base_url : "", .timeout_ms = 5000};
    char e2[256] = "";
    st_target_init(&tg, &cfg);
    st_jw_key(w, "server");
    st_jw_obj_open(w);
    if (st_target_open(&tg, e2, sizeof(e2)) == 0) {
        st_jw_kstr(w, "kind", st_target_kind_name(tg.kind));
        st_jw_kstr(w, "model", tg.model);
        st_jw_kstr(w, "evidence", tg.evidence);
        st_jw_ku64(w, "max_model_len", tg.max_model_len);
    } else {
        st_jw_kstr(w, "error", e2);
    }
    st_jw_obj_close(w);
    st_target_release(&tg);
    return 0;
}

static int save_state(const struct st_arm_plan *p, const struct st_arm_env *env,
                      struct st_buf *json, char *err, size_t errlen)
{
    return st_arm_state_object("url", save_fields, p, env, json, err, errlen);
}

/* The operator switches back, then health. Returns 0 or ST_EINTERRUPTED. */
static int restore(const struct st_arm_restore_ctx *c)
{
    int rc = 0;
    struct st_arm_server *s = st_arm_server_new(c->p, c->env, &st_arm_backend_url);
    struct st_arm_up up;
    st_arm_up_init(&up);
    int src = start(s, c->p, "baseline", c->baseline, c->env, 0, c->w, &up, NULL, 0);
    (void)src; /* always 0: the operator's answer is in up.fail */
    st_arm_add_check(c->checks, c->ok, "operator", up.fail == ST_ARM_OK,
                     up.fail == ST_ARM_OK ? "switched to the baseline" : up.detail);
    if (up.fail == ST_ARM_OK) {
        rc = st_arm_restore_health(s, c, up.detail, sizeof(up.detail));
    }
    st_arm_up_release(&up);
    st_arm_server_free(s);
    return rc;
}

const struct st_arm_backend st_arm_backend_url = {
    .name = "url",
    .start = start,
    .alive = NULL, /* while it comes up: health decides */
    .check = check,
    .log = log_read,
    .stop = stop,
    .save_state = save_state,
    .restore = restore,
};
