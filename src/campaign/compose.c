/*
 * The compose backend of the arm lifecycle (compose.h). This first version only links: every
 * function reports that the backend is not implemented yet (-ENOSYS with a message, or a failed
 * check), so that arm.c can be built against it. Nothing here claims success.
 */
#include "campaign/compose.h"

#include <stdio.h>
#include <stdlib.h>

struct st_compose {
    int unused;
};

static int not_yet(char *err, size_t errlen)
{
    if (err && errlen > 0) {
        snprintf(err, errlen, "compose backend: not implemented yet");
    }
    return -ENOSYS;
}

int st_compose_up(const struct st_plan *p, const char *arm, const struct st_plan_params *ps,
                  const struct st_arm_env *env, struct st_compose **out, struct st_buf *json,
                  char *detail, size_t dlen, char *err, size_t errlen)
{
    (void)p;
    (void)arm;
    (void)ps;
    (void)env;
    (void)json;
    (void)detail;
    (void)dlen;
    *out = NULL;
    return not_yet(err, errlen);
}

enum st_arm_fail st_compose_check(struct st_compose *c, char *detail, size_t len)
{
    (void)c;
    if (detail && len > 0) {
        snprintf(detail, len, "compose backend: not implemented yet");
    }
    return ST_ARM_FAIL_EXIT;
}

void st_compose_logs(struct st_compose *c, size_t max, struct st_buf *out)
{
    (void)c;
    (void)max;
    (void)out;
}

int st_compose_release(struct st_compose *c, int leave_running, struct st_buf *json)
{
    (void)leave_running;
    (void)json;
    if (!c) {
        return 0;
    }
    free(c);
    return -ENOSYS;
}

int st_compose_save_state(const struct st_plan *p, const struct st_arm_env *env,
                          struct st_buf *json, char *err, size_t errlen)
{
    (void)p;
    (void)env;
    (void)json;
    return not_yet(err, errlen);
}

int st_compose_prove(struct st_compose *c, const struct st_plan *p, const struct st_arm_env *env,
                     const char *saved, size_t saved_len, struct st_buf *json, int *ok, char *err,
                     size_t errlen)
{
    (void)c;
    (void)p;
    (void)env;
    (void)saved;
    (void)saved_len;
    (void)json;
    *ok = 0;
    return not_yet(err, errlen);
}
