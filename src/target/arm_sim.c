/*
 * The sim backend of the arm lifecycle (arm_int.h): `servetune sim` as a child in its own
 * process group that dies with the runner, its address read from its log's "listening on" line,
 * stopped by SIGTERM; the starting state is the profile's SHA-256, and the restore proves it and
 * brings the baseline up (same KV capacity) and stops it again. The rules:
 * docs/campaign-targets.md.
 */
#include "target/arm_int.h"

#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define LISTEN_POLL_NS 20000000u /* the sim's log, read for "listening on" */

/* Waits for the sim's "listening on HOST:PORT" in its log until deadline. Returns ST_ARM_OK with
 * s->url set, or a fail with detail. */
static enum st_arm_fail wait_listening(struct st_arm_server *s, double deadline, char *detail,
                                       size_t len)
{
    static const char mark[] = "listening on ";
    struct st_buf text;
    st_buf_init(&text);
    enum st_arm_fail f = ST_ARM_OK;
    for (;;) {
        st_buf_clear(&text);
        st_arm_read_log(st_buf_str(&s->log_path), s->log_off, ST_ARM_LOG_HEAD_MAX, 0, &text);
        const char *m = text.data ? strstr(text.data, mark) : NULL;
        while (m && m != text.data && m[-1] != '\n') {
            m = strstr(m + 1, mark);
        }
        const char *nl = m ? strchr(m, '\n') : NULL;
        if (nl) {
            char hp[128];
            st_arm_copy_line(m + sizeof(mark) - 1, (size_t)(nl - m) - (sizeof(mark) - 1), hp,
                             sizeof(hp));
            snprintf(s->url, sizeof(s->url), "http://%s", hp);
            s->answered = 1;
            break;
        }
        if (st_arm_reap(s)) {
            f = st_arm_classify_exit(s, detail, len);
            break;
        }
        if (st_arm_cancelled(s, detail, len)) {
            f = ST_ARM_FAIL_HEALTH;
            break;
        }
        if (st_arm_now_s() >= deadline) {
            f = ST_ARM_FAIL_HEALTH;
            snprintf(detail, len, "no 'listening on' line in %s within health_timeout_s",
                     st_buf_str(&s->log_path));
            break;
        }
        st_arm_sleep_s((double)LISTEN_POLL_NS / 1e9);
    }
    st_buf_release(&text);
    return f;
}

static void jw_argv(struct st_jw *w, const char *key, const struct st_arm_argv *a)
{
    st_jw_key(w, key);
    st_jw_arr_open(w);
    for (uint32_t i = 0; i < a->n; i++) {
        st_jw_str(w, a->v[i]);
    }
    st_jw_arr_close(w);
}

static int start(struct st_arm_server *s, const struct st_arm_plan *p, const char *arm,
                 const struct st_target_params *ps, const struct st_arm_env *env, double deadline,
                 struct st_jw *w, struct st_arm_up *up, char *err, size_t errlen)
{
    (void)arm;
    s->stop_signal = SIGTERM; /* the sim stops at once on SIGTERM, whatever the target says */
    s->stop_timeout_s = 10.0;
    struct st_buf profile, not_applied;
    struct st_arm_argv argv = {0};
    st_buf_init(&profile);
    st_buf_init(&not_applied);
    st_arm_resolve(env->plan_dir, p->target->profile ? p->target->profile : "", &profile);
    int rc = st_arm_sim_argv(env->self_exe, profile.data, &p->target->overrides, ps, env->sim_speed,
                             env->sim_seed, env->sim_noise_seed, &argv, &not_applied, err, errlen);
    if (rc == 0) {
        jw_argv(w, "argv", &argv);
        st_arm_jw_lines(w, "not_applied", &not_applied);
        st_buf_printf(&s->log_path, "%s/server.log", env->dir);
        rc = st_arm_spawn(s, argv.v, 0, 1, err, errlen);
    }
    if (rc == 0) {
        st_arm_jw_process(w, s, 1);
        st_jw_kstr(w, "restart_policy", "none: a sim that exits stays down (the arm fails)");
        up->fail = wait_listening(s, deadline, up->detail, sizeof(up->detail));
        if (up->fail == ST_ARM_OK) {
            st_arm_health_url(s, NULL, s->url); /* the sim: always its own */
        }
    }
    st_arm_argv_release(&argv);
    st_buf_release(&profile);
    st_buf_release(&not_applied);
    return rc;
}

static int save_fields(const struct st_arm_plan *p, const struct st_arm_env *env, struct st_jw *w,
                       char *err, size_t errlen)
{
    struct st_buf path;
    char hex[ST_SHA256_HEX];
    size_t bytes = 0;
    st_buf_init(&path);
    st_arm_resolve(env->plan_dir, p->target->profile ? p->target->profile : "", &path);
    int rc = st_arm_file_sha256(path.data, hex, &bytes);
    if (rc != 0) {
        st_errf(err, errlen, "profile %s: %s", path.data,
                rc == ST_ETOOBIG ? "over 1 MiB" : st_strerror(rc));
    } else {
        st_jw_kstr(w, "profile", path.data);
        st_jw_kstr(w, "profile_sha256", hex);
        st_jw_ku64(w, "profile_bytes", bytes);
    }
    st_buf_release(&path);
    return rc;
}

static int save_state(const struct st_arm_plan *p, const struct st_arm_env *env,
                      struct st_buf *json, char *err, size_t errlen)
{
    return st_arm_state_object("sim", save_fields, p, env, json, err, errlen);
}

/* Reads the saved object's string key into out; 1 when present. */
static int saved_str(const struct st_json *d, const char *key, char *out, size_t cap)
{
    return st_json_type(d, 0) == ST_JSON_OBJECT && st_arm_json_top(d, key, out, cap);
}

/* sim: the profile's hash, then the baseline up (KV as saved) and stopped again. */
static int restore(const struct st_arm_restore_ctx *c)
{
    struct st_buf path;
    char hex[ST_SHA256_HEX], want[ST_ARM_VALUE_MAX], msg[512];
    size_t bytes = 0;
    st_buf_init(&path);
    st_arm_resolve(c->env->plan_dir, c->p->target->profile ? c->p->target->profile : "", &path);
    int hrc = st_arm_file_sha256(path.data, hex, &bytes);
    if (!saved_str(c->saved, "profile_sha256", want, sizeof(want))) {
        st_arm_add_check(c->checks, c->ok, "profile_sha256", 0,
                         "the saved state has no profile_sha256");
    } else if (hrc != 0) {
        snprintf(msg, sizeof(msg), "%s: %s", path.data, st_strerror(hrc));
        st_arm_add_check(c->checks, c->ok, "profile_sha256", 0, msg);
    } else {
        snprintf(msg, sizeof(msg), "%s: %s, saved %s", path.data, hex, want);
        st_arm_add_check(c->checks, c->ok, "profile_sha256", strcmp(hex, want) == 0, msg);
    }
    st_buf_release(&path);

    struct st_arm_up up;
    struct st_arm_server *s = NULL;
    st_arm_up_init(&up);
    int rc = c->start(c->p, "baseline", c->baseline, c->env, &s, &up, c->err, c->errlen);
    if (rc == 0) {
        st_arm_add_check(c->checks, c->ok, "baseline_up", up.fail == ST_ARM_OK, up.detail);
        if (saved_str(c->saved, "baseline_kv_capacity_tokens", want, sizeof(want))) {
            char have[32];
            snprintf(have, sizeof(have), "%" PRIu64, up.kv_capacity_tokens);
            snprintf(msg, sizeof(msg), "%s tokens (%s), saved %s", have, up.kv_source, want);
            st_arm_add_check(c->checks, c->ok, "kv_capacity",
                             up.fail == ST_ARM_OK && st_arm_value_eq(want, have), msg);
        }
        st_jw_key(c->w, "bring_up");
        st_jw_raw(c->w, up.json.data, up.json.len);
        if (s) {
            st_arm_restore_stop(c, s, "stopped by SIGTERM");
        }
    }
    st_arm_up_release(&up);
    return rc;
}

const struct st_arm_backend st_arm_backend_sim = {
    .name = "sim",
    .needs_self_exe = 1,
    .start = start,
    .save_state = save_state,
    .restore = restore,
    ST_ARM_PROC_OPS,
};
