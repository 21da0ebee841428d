/*
 * The compose backend of the arm lifecycle (arm_int.h) over compose.c's docker calls: up with
 * the arm's override file and the restart policy "no", docker inspect for the watch, docker logs
 * for the log, compose stop; the starting state and its proof are compose.c's (file hashes,
 * docker inspect), and the restore brings the compose file up as it is, proves it, waits for
 * health and inspects once more (not restarted since up), leaving it running; when nothing ran
 * at the start it stops it again and checks that nothing answers. The rules:
 * docs/campaign-targets.md, docs/campaign-compose.md.
 */
#include "target/arm_int.h"

#include <stdio.h>
#include <string.h>

static int start(struct st_arm_server *s, const struct st_arm_plan *p, const char *arm,
                 const struct st_target_params *ps, const struct st_arm_env *env, double deadline,
                 struct st_jw *w, struct st_arm_up *up, char *err, size_t errlen)
{
    (void)deadline; /* health is the lifecycle's wait */
    struct st_buf cj;
    st_buf_init(&cj);
    int rc = st_compose_up(p, arm, ps, env, &s->compose, &cj, up->detail, sizeof(up->detail), err,
                           errlen);
    if (cj.len) {
        st_jw_key(w, "compose");
        st_jw_raw(w, cj.data, cj.len);
    }
    st_buf_release(&cj);
    if (rc > 0) {
        up->fail = (enum st_arm_fail)rc;
        return 0;
    }
    if (rc == 0) {
        st_jw_kstr(w, "restart_policy", "no while the experiment runs (compose backend)");
        st_arm_plan_url(s, p);
    }
    return rc;
}

/* While it comes up: a container that stopped fails at once. */
static enum st_arm_fail alive(struct st_arm_server *s, char *detail, size_t len)
{
    return s->compose ? st_compose_check(s->compose, detail, len) : ST_ARM_OK;
}

static enum st_arm_fail check(struct st_arm_server *s, char *detail, size_t len)
{
    return s->compose ? st_compose_check(s->compose, detail, len) : ST_ARM_FAIL_EXIT;
}

/* docker logs --tail, whether the lifecycle asks for the start or the end. */
static void log_read(struct st_arm_server *s, size_t max, int tail, struct st_buf *out)
{
    (void)tail;
    if (s->compose) {
        st_compose_logs(s->compose, max, out);
    }
}

static int stop(struct st_arm_server *s, struct st_jw *w)
{
    if (!s->compose) {
        st_jw_kstr(w, "how", "nothing was running");
        return 0;
    }
    struct st_buf cj;
    st_buf_init(&cj);
    int rc = st_compose_release(s->compose, 0, &cj);
    s->compose = NULL;
    st_jw_kstr(w, "how", "compose stop");
    if (cj.len) {
        st_jw_key(w, "compose");
        st_jw_raw(w, cj.data, cj.len);
    }
    st_buf_release(&cj);
    return rc;
}

/* Whether the saved state says the service ran (absent: it did, as states before issue 14). */
static int saved_running(const struct st_arm_restore_ctx *c)
{
    char v[16];
    return !(st_arm_json_top(c->saved, "running", v, sizeof(v)) == 1 && strcmp(v, "false") == 0);
}

/* Nothing ran at the start: the service's container, now made from the compose file as it is,
 * is stopped again, and two checks say so: it stopped, and nothing answers its health URL. */
static void leave_stopped(struct st_arm_server *s, const struct st_arm_restore_ctx *c)
{
    struct st_buf sj;
    st_buf_init(&sj);
    int rc = st_compose_release(s->compose, 0, &sj);
    s->compose = NULL;
    if (sj.len) {
        st_jw_key(c->w, "compose_stop");
        st_jw_raw(c->w, sj.data, sj.len);
    }
    char detail[512];
    snprintf(detail, sizeof(detail), "%s",
             rc == 0 ? "stopped: nothing ran at the start" : st_strerror(rc));
    st_arm_add_check(c->checks, c->ok, "container_stopped", rc == 0, detail);
    struct st_http_client *h = NULL;
    long status = 0;
    char why[256] = "";
    int grc =
        st_arm_http_get(&h, st_buf_str(&s->health_url), 2000, &status, NULL, why, sizeof(why));
    st_arm_http_free(h);
    if (grc == 0) {
        snprintf(why, sizeof(why), "answered HTTP %ld", status);
    }
    snprintf(detail, sizeof(detail), "%s: %s", st_buf_str(&s->health_url), why);
    st_arm_add_check(c->checks, c->ok, "nothing_answers", grc != 0, detail);
    st_buf_release(&sj);
}

/* compose: the file as it is, proven by compose.c, then health; or, when nothing ran at the
 * start (saved "running": false), stopped again. */
static int restore(const struct st_arm_restore_ctx *c)
{
    struct st_arm_server *s = st_arm_server_new(c->p, c->env, &st_arm_backend_compose);
    struct st_buf cj, pj;
    char detail[512] = "";
    st_buf_init(&cj);
    st_buf_init(&pj);
    int rc = st_compose_up(c->p, "baseline", NULL, c->env, &s->compose, &cj, detail, sizeof(detail),
                           c->err, c->errlen);
    if (cj.len) {
        st_jw_key(c->w, "compose_up");
        st_jw_raw(c->w, cj.data, cj.len);
    }
    if (rc > 0) {
        st_arm_add_check(c->checks, c->ok, "compose_up", 0, detail);
        rc = 0;
    } else if (rc == 0) {
        st_arm_add_check(c->checks, c->ok, "compose_up", 1, "up");
        int pok = 0;
        rc = st_compose_prove(s->compose, c->p, c->env, c->saved_text, c->saved_len, &pj, &pok,
                              c->err, c->errlen);
        if (rc == 0) {
            st_arm_list_join(c->checks, &pj);
            *c->ok = *c->ok && pok;
            st_arm_plan_url(s, c->p);
            if (!saved_running(c)) {
                leave_stopped(s, c);
            } else {
                rc = st_arm_restore_health(s, c, detail, sizeof(detail));
            }
        }
        if (rc == 0 && s->compose) {
            /* Healthy once is not enough: the engine may be restarting it in a loop (a
             * restarting container reads Running: true), so inspect once more. */
            enum st_arm_fail f = st_compose_check(s->compose, detail, sizeof(detail));
            st_arm_add_check(c->checks, c->ok, "container_stable", f == ST_ARM_OK,
                             f == ST_ARM_OK ? "running, not restarted since up" : detail);
        }
        int rrc = st_compose_release(s->compose, 1, NULL);
        (void)rrc; /* leave_running: only frees */
        s->compose = NULL;
    }
    st_arm_server_free(s);
    st_buf_release(&cj);
    st_buf_release(&pj);
    return rc;
}

const struct st_arm_backend st_arm_backend_compose = {
    .name = "compose",
    .start = start,
    .alive = alive,
    .check = check,
    .log = log_read,
    .stop = stop,
    .save_state = st_compose_save_state,
    .restore = restore,
};
