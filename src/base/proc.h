/*
 * Child processes: the one way the tool starts one (docs/internals/proc.md). st_proc_spawn
 * clones a child with a map of its descriptors, in its own process group (or session), with an
 * optional parent-death signal, environment, working directory and setup hook, and either execs
 * an argument vector (an exec failure comes back as its errno through a close-on-exec pipe, never
 * as an exit code) or runs a function (the sandbox's supervisor and workers). st_proc_wait,
 * st_proc_poll and st_proc_stop reap it and kill its group; st_proc_run runs one to completion
 * under a deadline, keeping a bounded amount of its stdout and stderr. Blocking, for the thread
 * that spawned the child; nothing here prints. Not a job-control shell: no terminals, no stopped
 * children.
 */
#ifndef ST_BASE_PROC_H
#define ST_BASE_PROC_H

#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/status.h"

/* What a child descriptor (0, 1, 2) is. */
enum st_proc_fd_kind {
    ST_PROC_FD_INHERIT = 0, /* the caller's descriptor of the same number, as it is */
    ST_PROC_FD_NULL,        /* /dev/null: read-only for 0, write-only for 1 and 2 */
    ST_PROC_FD_FILE,        /* path, opened by the caller with flags and mode */
    ST_PROC_FD_PIPE,        /* a new pipe; the caller's end is st_proc.fd[i] */
    ST_PROC_FD_DUP,         /* the caller's open descriptor fd (borrowed; not closed) */
};

struct st_proc_fd {
    enum st_proc_fd_kind kind;
    int fd;           /* DUP: the caller's descriptor */
    const char *path; /* FILE: borrowed for the call */
    int flags;        /* FILE: open(2) flags (O_CLOEXEC is added) */
    int mode;         /* FILE: mode when it creates the file */
};

/* An extra descriptor for the child: the caller's parent_fd (borrowed) at child_fd (> 2). */
struct st_proc_extra {
    int parent_fd;
    int child_fd;
};

enum st_proc_group {
    ST_PROC_GROUP_NEW = 0, /* a process group of its own, led by the child (setpgid) */
    ST_PROC_SESSION_NEW,   /* a session of its own (setsid): also off the caller's terminal */
    ST_PROC_GROUP_SAME,    /* the caller's group: a "group" kill reaches the child only */
};

#define ST_PROC_MAX_EXTRA 8

/*
 * Runs in the child between clone and exec (or fn), after the descriptors and group are set.
 * Only async-signal-safe calls: the caller may have threads, whose locks the child inherits.
 * Returns 0, or an errno value that aborts the child (reported as for an exec failure).
 */
typedef int (*st_proc_setup_fn)(void *ctx);
/* The child's body instead of an exec: same rules as st_proc_setup_fn; the child _exits with
 * the return value. */
typedef int (*st_proc_body_fn)(void *ctx);

/* What to start. Zero-initialised fields are the defaults. Everything is borrowed for the call. */
struct st_proc_opts {
    const char *const *argv; /* NULL-terminated; argv[0] a path, or a name looked up on PATH.
                                NULL when fn is set */
    char *const *envp;       /* NULL: the caller's environ */
    const char *cwd;         /* NULL: the caller's working directory */
    struct st_proc_fd std[3];
    const struct st_proc_extra *extra; /* n_extra <= ST_PROC_MAX_EXTRA entries */
    size_t n_extra;
    enum st_proc_group group;
    int pdeathsig;             /* sent to the child when the caller's thread dies; 0: none */
    unsigned long clone_flags; /* CLONE_NEW* namespaces; 0: a plain fork */
    st_proc_setup_fn setup;    /* NULL: none */
    st_proc_body_fn fn;        /* NULL: exec argv */
    void *ctx;                 /* for setup and fn */
};

/* A started child. Caller-embedded; st_proc_release closes what it owns. */
struct st_proc {
    pid_t pid;  /* the child; 0 when none */
    pid_t pgid; /* what st_proc_kill signals: -pid for a group or session, else pid */
    int fd[3];  /* owned: the caller's ends of ST_PROC_FD_PIPE descriptors, -1 otherwise */
    int pidfd;  /* owned: a pidfd for waits, -1 where the kernel has none */
    int reaped; /* wstatus is valid */
    int wstatus;
};

/* Sets p to "no child": safe to release, poll and wait on. st_proc_spawn does it first. */
void st_proc_init(struct st_proc *p);

/*
 * Starts a child per o. In exec mode (fn NULL) the child resets every signal to its default and
 * empties its signal mask before exec. With pdeathsig, the child checks after the prctl that its
 * parent is still the caller and exits (127) when it is not. With CLONE_NEWPID in clone_flags,
 * pdeathsig must be 0 (the child cannot see its parent's pid). Fills *p (st_proc_release it once
 * done, whatever the result). Returns 0 with p->pid; the errno of a failed open, pipe, clone,
 * setup hook, chdir or exec as a negated errno (-ENOENT: no such program), the child reaped, with
 * err saying which; or -EINVAL for bad options. Async-signal-safe when o uses no FILE or NULL
 * descriptors and no argv (the sandbox's supervisor calls it between clone and exec).
 */
int st_proc_spawn(const struct st_proc_opts *o, struct st_proc *p, char *err, size_t errlen) ST_WUR;

/* Whether the child has ended: reaps it with WNOHANG. 1 when it has (now or before; a child
 * reaped elsewhere gets wstatus -1), 0 while it runs. */
int st_proc_poll(struct st_proc *p);

/* Waits up to timeout_ns (UINT64_MAX: for ever) for the child to end and reaps it. Returns 0
 * (p->reaped set) or ST_ETIMEOUT. */
int st_proc_wait(struct st_proc *p, uint64_t timeout_ns) ST_WUR;

/* Sends sig to the child's group (its pid when it shares the caller's group); nothing once it is
 * reaped, since the id may be reused. Returns 0 or a negated errno (-ESRCH: nobody left); a
 * caller that only needs the child gone may ignore it (st_proc_wait says when it is). */
int st_proc_kill(const struct st_proc *p, int sig);

/* Sends sig to the group, SIGKILL after grace_ns when the child has not ended, and reaps it.
 * Returns 0, or ST_ETIMEOUT when SIGKILL was needed. */
int st_proc_stop(struct st_proc *p, int sig, uint64_t grace_ns) ST_WUR;

/* The child's exit code, 128 + N when signal N ended it, -1 when not reaped or not known. */
int st_proc_status(const struct st_proc *p);

/* Closes the descriptors p owns. Neither kills nor reaps the child. */
void st_proc_release(struct st_proc *p);

/* What st_proc_run does and gets. */
struct st_proc_run {
    uint64_t timeout_ns;     /* the deadline from the start; 0: none */
    uint64_t grace_ns;       /* at the deadline SIGTERM to the group, SIGKILL grace_ns later;
                                0: SIGKILL at once */
    size_t out_max, err_max; /* bytes of stdout and stderr kept (ST_PROC_FD_PIPE only) */
    /* Results. */
    struct st_buf out, err;        /* owned: the first out_max / err_max bytes */
    uint64_t out_bytes, err_bytes; /* all the bytes read; the rest were dropped */
    int status;                    /* st_proc_status(); -1 when not run */
    int timed_out;                 /* the deadline passed and the group was killed */
    uint64_t elapsed_ns;           /* from the spawn to the reap */
};

/* Sets r's inputs, zeroes its results. */
void st_proc_run_init(struct st_proc_run *r, uint64_t timeout_ns, uint64_t grace_ns, size_t out_max,
                      size_t err_max);
void st_proc_run_release(struct st_proc_run *r);

/*
 * Spawns o and waits for the child, reading the pipes of its stdout and stderr (std[1], std[2]
 * with ST_PROC_FD_PIPE; a pipe on stdin is closed at once). It ends once the child is reaped and
 * nothing more is ready on its pipes (a grandchild that keeps them open does not hold the call),
 * or at the deadline: then the group is stopped as r asks, and the call returns once the child
 * is reaped. Returns 0 when the child ran, whatever its status (see r->status, r->timed_out); or
 * st_proc_spawn's errors, r->status -1.
 */
int st_proc_run(const struct st_proc_opts *o, struct st_proc_run *r, char *err,
                size_t errlen) ST_WUR;

#endif
