/*
 * The sandboxed runner's insides, shared by its files and by nothing else: sandbox_child.c (S and
 * W, from clone to exec: system calls and plain memory only), sandbox_prep.c (what P prepares
 * before the clone and removes after: validation, the seccomp program, /etc and the environment,
 * the host box) and sandbox.c (P: the clone attempts, the watch loop, the verdict). Calls go down
 * only: sandbox.c -> sandbox_prep.c, sandbox_child.c; the child never calls P's code. The report
 * records and the process protocol: docs/internals/sandbox.md.
 */
#ifndef ST_QUAL_SANDBOX_INT_H
#define ST_QUAL_SANDBOX_INT_H

#include <sys/types.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/filter.h>

#include "base/proc.h"
#include "qual/sandbox.h"

#define ST_SANDBOX_MAX_ETC 24
#define ST_SANDBOX_ETC_PATH 80

/* Records from S and W to P: one write(2) each, smaller than PIPE_BUF, so never torn. */
enum st_sandbox_msg_kind {
    ST_SANDBOX_MSG_SETUP_FAIL = 1, /* S could not build the sandbox: text, err */
    ST_SANDBOX_MSG_NOTE,           /* S fell back from a layer: text, err */
    ST_SANDBOX_MSG_LAYERS,         /* S: layers it set up */
    ST_SANDBOX_MSG_STEP_START,     /* S forked W for step: pid (S's view) */
    ST_SANDBOX_MSG_READY,          /* W is about to exec: layers it applied */
    ST_SANDBOX_MSG_EXEC_FAIL,      /* W failed before or at exec: text, err */
    ST_SANDBOX_MSG_STEP_END,       /* S reaped W: status (wait status) */
};

struct st_sandbox_msg {
    int32_t kind;
    int32_t step;
    int32_t err;    /* errno */
    int32_t status; /* wait status for ST_SANDBOX_MSG_STEP_END */
    uint32_t layers;
    int32_t pid;
    char text[104];
};
_Static_assert(sizeof(struct st_sandbox_msg) == 128 && sizeof(struct st_sandbox_msg) <= PIPE_BUF,
               "report records must be written whole");

/* Everything S and W need, prepared by P before clone (they get a copy-on-write copy). */
struct st_sandbox_ctx {
    const struct st_sandbox_cfg *cfg;
    const struct st_sandbox_job *job;
    unsigned long ns_flags; /* namespaces of this attempt */
    int root_caller;        /* P runs with euid 0 */
    int drop_uid;           /* W switches to run_uid/gid (root caller, no user namespace) */
    uid_t run_uid;          /* outside identity of sandboxed code */
    gid_t run_gid;
    uint32_t want;        /* layers not switched off */
    int report_w, sync_r; /* S's ends */
    int report_r, sync_w; /* P's ends, closed in S */
    int out_w[ST_SANDBOX_MAX_STEPS], err_w[ST_SANDBOX_MAX_STEPS];
    int stdin_fd;
    struct sock_fprog seccomp; /* filter NULL when unavailable */
    char host_box[256];
    char box_opts[160]; /* tmpfs options of the box, for this attempt's identity */
    uid_t box_uid;      /* owner of box files as S sees ids in its namespace */
    gid_t box_gid;
    char etc[ST_SANDBOX_MAX_ETC][ST_SANDBOX_ETC_PATH]; /* /etc entries shown to the program */
    size_t netc;
    char env_home[2][300]; /* [0] pivot mode, [1] cwd mode */
    char env_tmp[2][300];
    char *envp[2][5];
    /* Set in S at run time. */
    int pivoted;
};

/* ---- sandbox_child.c ---- */

/* Copies src into dst[0..cap) (cap > 0), cut and always terminated; returns the bytes copied.
 * Safe between clone and exec. */
size_t st_sandbox_cstr_copy(char *dst, size_t cap, const char *src);
/*
 * Clones a child in the namespaces flags names, running body(ctx) in it: st_proc_spawn's body
 * mode, a raw clone without glibc's fork handlers (which may take locks another thread of P held),
 * with every descriptor, the group and the signals left as they are (S and W set their own).
 * Async-signal-safe: S calls it for each W. Returns the pid, or -1 with errno set.
 */
pid_t st_sandbox_clone_body(unsigned long flags, st_proc_body_fn body, void *ctx);
/* S's body for st_sandbox_clone_body: arg is P's struct st_sandbox_ctx (S's copy-on-write copy).
 * Never returns. */
int st_sandbox_supervisor_body(void *arg);

/* ---- sandbox_prep.c ---- */

/* Checks cfg and job against the limits of sandbox.h. 0, -EINVAL or ST_ETOOBIG with text in err. */
int st_sandbox_validate(const struct st_sandbox_cfg *cfg, const struct st_sandbox_job *job,
                        char *err, size_t errlen) ST_WUR;
/* Builds the seccomp program into *prog (filter owned by the caller, free()). 0, or a negated
 * errno with the reason in note. */
int st_sandbox_build_seccomp(struct sock_fprog *prog, char *note, size_t notelen) ST_WUR;
/* Fills c->etc with the /etc entries shown to programs. */
void st_sandbox_list_etc(struct st_sandbox_ctx *c);
/* Fills c->envp for both modes (pivot, host box) from c->host_box. */
void st_sandbox_set_env(struct st_sandbox_ctx *c);
/* Makes the host box under parent (c->host_box) and writes the job's files into it. 0 or a
 * negative ST_E* with text in err; c->host_box is empty when nothing was made. */
int st_sandbox_make_box(struct st_sandbox_ctx *c, const char *parent, char *err,
                        size_t errlen) ST_WUR;
/* Removes the box at path and everything in it, never following a link. 0 or a negated errno. */
int st_sandbox_rm_box(const char *path) ST_WUR;

#endif
