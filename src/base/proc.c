/*
 * Child processes (proc.h, docs/internals/proc.md). The child comes from a raw clone(2), not
 * fork(3): glibc's fork handlers may take locks another thread holds, and the namespace flags
 * the sandbox needs go through the same call. Between clone and exec the child makes system calls
 * only: no malloc, no stdio, nothing that reads glibc's per-thread state of the caller. The
 * caller prepares every descriptor and path before the clone; the child moves its sources above
 * every target first, so no dup2 can clobber another source.
 */
#include "base/proc.h"

#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"

extern char **environ;

/* Where the child stopped, sent with its errno through the exec pipe. */
enum stage {
    STAGE_GROUP = 1,
    STAGE_PDEATHSIG,
    STAGE_FDS,
    STAGE_CWD,
    STAGE_SETUP,
    STAGE_EXEC,
};

static const char *const stage_names[] = {
    "", "process group", "death signal", "descriptors", "working directory", "setup", "exec"};

#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"
#define RUN_DRAIN_AFTER_NS (1 * ST_NS_PER_S) /* after the reap, with no deadline */
#define READ_CHUNK 16384

/* What the child needs, all prepared by the caller before the clone. */
struct child {
    const struct st_proc_opts *o;
    int src[3 + ST_PROC_MAX_EXTRA]; /* source descriptor per target, -1: leave */
    int dst[3 + ST_PROC_MAX_EXTRA];
    size_t n;
    int top;       /* the largest target */
    int report_fd; /* the exec pipe's write end, -1 in body mode */
    pid_t parent;
    const char *path; /* PATH to search for argv[0]; NULL when argv[0] has a '/' */
    char *const *envp;
};

static void report_and_exit(const struct child *c, int stage, int e) __attribute__((noreturn));

static void report_and_exit(const struct child *c, int stage, int e)
{
    int msg[2] = {stage, e};
    if (c->report_fd >= 0) {
        ssize_t n;
        do {
            n = write(c->report_fd, msg, sizeof(msg));
        } while (n < 0 && errno == EINTR);
    }
    _exit(127);
}

/* execve over each directory of c->path (as execvp does: ENOENT goes on, EACCES is kept). */
static int exec_search(const struct child *c)
{
    const char *name = c->o->argv[0];
    char *const *argv = (char *const *)c->o->argv;
    if (!c->path) {
        execve(name, argv, c->envp);
        return errno;
    }
    size_t ln = strlen(name);
    int e = ENOENT, seen_eacces = 0;
    const char *p = c->path;
    for (;;) {
        const char *colon = strchr(p, ':');
        size_t ld = colon ? (size_t)(colon - p) : strlen(p);
        char full[PATH_MAX];
        if (ld + 1 + ln + 1 <= sizeof(full)) {
            size_t k = 0;
            if (ld == 0) {
                full[k++] = '.';
            } else {
                memcpy(full, p, ld);
                k = ld;
            }
            full[k++] = '/';
            memcpy(full + k, name, ln + 1);
            execve(full, argv, c->envp);
            if (errno == EACCES) {
                seen_eacces = 1;
            } else if (errno != ENOENT && errno != ENOTDIR && errno != ESTALE) {
                return errno;
            }
        }
        if (!colon) {
            break;
        }
        p = colon + 1;
    }
    return seen_eacces ? EACCES : e;
}

static void reset_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++) {
        if (s != SIGKILL && s != SIGSTOP) {
            (void)sigaction(s, &sa, NULL); /* glibc's own signals answer EINVAL: fine */
        }
    }
    sigset_t none;
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
}

/* Moves every source above every target, then puts each on its target (dup2 clears
 * close-on-exec there). Returns 0 or an errno value. */
static int map_fds(struct child *c)
{
    int floor = c->top + 1 > 3 ? c->top + 1 : 3;
    if (c->report_fd >= 0 && c->report_fd < floor) {
        int m = fcntl(c->report_fd, F_DUPFD_CLOEXEC, floor);
        if (m < 0) {
            return errno;
        }
        c->report_fd = m;
    }
    for (size_t i = 0; i < c->n; i++) {
        if (c->src[i] >= 0 && c->src[i] < floor) {
            int m = fcntl(c->src[i], F_DUPFD_CLOEXEC, floor);
            if (m < 0) {
                return errno;
            }
            c->src[i] = m;
        }
    }
    for (size_t i = 0; i < c->n; i++) {
        if (c->src[i] >= 0 && dup2(c->src[i], c->dst[i]) < 0) {
            return errno;
        }
    }
    return 0;
}

static void child_main(struct child *c) __attribute__((noreturn));

static void child_main(struct child *c)
{
    const struct st_proc_opts *o = c->o;
    if (!o->fn) {
        reset_signals();
    }
    if ((o->group == ST_PROC_GROUP_NEW && setpgid(0, 0) != 0) ||
        (o->group == ST_PROC_SESSION_NEW && setsid() < 0)) {
        report_and_exit(c, STAGE_GROUP, errno);
    }
    if (o->pdeathsig) {
        if (prctl(PR_SET_PDEATHSIG, o->pdeathsig) != 0) {
            report_and_exit(c, STAGE_PDEATHSIG, errno);
        }
        if (getppid() != c->parent) {
            _exit(127); /* the caller died before the prctl: nobody would stop us */
        }
    }
    int e = map_fds(c);
    if (e != 0) {
        report_and_exit(c, STAGE_FDS, e);
    }
    if (o->cwd && chdir(o->cwd) != 0) {
        report_and_exit(c, STAGE_CWD, errno);
    }
    if (o->setup) {
        e = o->setup(o->ctx);
        if (e != 0) {
            report_and_exit(c, STAGE_SETUP, e);
        }
    }
    if (o->fn) {
        _exit(o->fn(o->ctx));
    }
    report_and_exit(c, STAGE_EXEC, exec_search(c));
}

static void close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/* The value of PATH in envp (or the caller's environment). */
static const char *path_of(char *const *envp)
{
    if (!envp) {
        const char *v = getenv("PATH");
        return v ? v : DEFAULT_PATH;
    }
    for (size_t i = 0; envp[i]; i++) {
        if (strncmp(envp[i], "PATH=", 5) == 0) {
            return envp[i] + 5;
        }
    }
    return DEFAULT_PATH;
}

/* Opens the child's end of std descriptor i per f into *child_end (and the caller's end of a
 * pipe into p->fd[i]). Returns 0 or a negated errno. */
static int open_std(int i, const struct st_proc_fd *f, struct st_proc *p, int *child_end,
                    int *borrowed)
{
    int pf[2];
    *borrowed = 0;
    switch (f->kind) {
    case ST_PROC_FD_INHERIT:
        *child_end = -1;
        return 0;
    case ST_PROC_FD_NULL:
        *child_end = open("/dev/null", (i == 0 ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
        return *child_end < 0 ? -errno : 0;
    case ST_PROC_FD_FILE:
        if (!f->path) {
            return -EINVAL;
        }
        *child_end = open(f->path, f->flags | O_CLOEXEC, (mode_t)f->mode);
        return *child_end < 0 ? -errno : 0;
    case ST_PROC_FD_PIPE:
        if (pipe2(pf, O_CLOEXEC) != 0) {
            return -errno;
        }
        p->fd[i] = i == 0 ? pf[1] : pf[0];
        *child_end = i == 0 ? pf[0] : pf[1];
        return 0;
    case ST_PROC_FD_DUP:
        if (f->fd < 0) {
            return -EBADF;
        }
        *child_end = f->fd;
        *borrowed = 1;
        return 0;
    }
    return -EINVAL;
}

void st_proc_init(struct st_proc *p)
{
    memset(p, 0, sizeof(*p));
    p->fd[0] = p->fd[1] = p->fd[2] = -1;
    p->pidfd = -1;
}

static int check_opts(const struct st_proc_opts *o)
{
    if ((o->fn == NULL) == (o->argv == NULL || o->argv[0] == NULL)) {
        return -EINVAL; /* exactly one of argv and fn */
    }
    if (o->n_extra > ST_PROC_MAX_EXTRA || (o->n_extra && !o->extra)) {
        return -EINVAL;
    }
    for (size_t i = 0; i < o->n_extra; i++) {
        if (o->extra[i].child_fd < 3 || o->extra[i].parent_fd < 0) {
            return -EINVAL;
        }
    }
    if ((o->clone_flags & CLONE_NEWPID) && o->pdeathsig) {
        return -EINVAL;
    }
    if (o->clone_flags &
        ~(unsigned long)(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWIPC |
                         CLONE_NEWUTS | CLONE_NEWCGROUP)) {
        return -EINVAL;
    }
    return 0;
}

int st_proc_spawn(const struct st_proc_opts *o, struct st_proc *p, char *err, size_t errlen)
{
    st_proc_init(p);
    const char *name = o->argv && o->argv[0] ? o->argv[0] : "child";
    int rc = check_opts(o);
    if (rc != 0) {
        st_errf(err, errlen, "%s: bad spawn options", name);
        return rc;
    }
    struct child c = {.o = o, .report_fd = -1, .top = 2};
    int child_end[3] = {-1, -1, -1}, borrowed[3] = {0, 0, 0};
    int ex[2] = {-1, -1};
    for (int i = 0; i < 3 && rc == 0; i++) {
        rc = open_std(i, &o->std[i], p, &child_end[i], &borrowed[i]);
        if (rc != 0) {
            st_errf(err, errlen, "%s: descriptor %d%s%s: %s", name, i, o->std[i].path ? " " : "",
                    o->std[i].path ? o->std[i].path : "", st_strerror(rc));
        }
    }
    if (rc == 0 && !o->fn && pipe2(ex, O_CLOEXEC) != 0) {
        rc = -errno;
        st_errf(err, errlen, "%s: pipe: %s", name, st_strerror(rc));
    }
    if (rc != 0) {
        goto out;
    }
    for (int i = 0; i < 3; i++) {
        c.src[c.n] = child_end[i];
        c.dst[c.n++] = i;
    }
    for (size_t i = 0; i < o->n_extra; i++) {
        c.src[c.n] = o->extra[i].parent_fd;
        c.dst[c.n++] = o->extra[i].child_fd;
        c.top = o->extra[i].child_fd > c.top ? o->extra[i].child_fd : c.top;
    }
    c.report_fd = ex[1];
    c.parent = getpid();
    c.envp = o->envp ? o->envp : environ;
    c.path = o->fn || strchr(o->argv[0], '/') ? NULL : path_of(o->envp);
    pid_t pid = (pid_t)syscall(SYS_clone, o->clone_flags | SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) {
        child_main(&c);
    }
    if (pid < 0) {
        rc = -errno;
        st_errf(err, errlen, "cannot run %s: clone: %s", name, st_strerror(rc));
        goto out;
    }
    p->pid = pid;
    p->pgid = o->group == ST_PROC_GROUP_SAME ? pid : -pid;
    if (o->group == ST_PROC_GROUP_NEW) {
        (void)setpgid(pid, pid); /* also here, so a kill cannot race the child's own call */
    }
    close_fd(&ex[1]);
    if (ex[0] >= 0) {
        int msg[2] = {0, 0};
        ssize_t n;
        do {
            n = read(ex[0], msg, sizeof(msg));
        } while (n < 0 && errno == EINTR);
        if (n == (ssize_t)sizeof(msg)) {
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
            }
            p->pid = 0; /* no child any more: nothing to poll or kill */
            rc = msg[1] > 0 ? -msg[1] : -EIO;
            int k = msg[0] >= STAGE_GROUP && msg[0] <= STAGE_EXEC ? msg[0] : STAGE_EXEC;
            if (k == STAGE_EXEC) {
                st_errf(err, errlen, "cannot run %s: %s", name, st_strerror(rc));
            } else {
                st_errf(err, errlen, "cannot run %s: %s: %s", name, stage_names[k],
                        st_strerror(rc));
            }
            goto out;
        }
    }
#ifdef SYS_pidfd_open
    p->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (p->pidfd < 0) {
        p->pidfd = -1; /* an older kernel: waits poll instead */
    }
#endif
out:
    close_fd(&ex[0]);
    close_fd(&ex[1]);
    for (int i = 0; i < 3; i++) {
        if (!borrowed[i]) {
            close_fd(&child_end[i]);
        }
    }
    if (rc != 0) {
        st_proc_release(p);
        st_proc_init(p);
    }
    return rc;
}

int st_proc_poll(struct st_proc *p)
{
    if (p->pid <= 0 || p->reaped) {
        return p->reaped;
    }
    int st = 0;
    pid_t r;
    do {
        r = waitpid(p->pid, &st, WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == p->pid) {
        p->reaped = 1;
        p->wstatus = st;
    } else if (r < 0 && errno == ECHILD) {
        p->reaped = 1; /* someone else reaped it (or SIGCHLD is ignored): it is gone */
        p->wstatus = -1;
    }
    return p->reaped;
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / ST_NS_PER_S),
                          .tv_nsec = (long)(ns % ST_NS_PER_S)};
    nanosleep(&ts, NULL);
}

/* Milliseconds for poll(2) covering ns (rounded up, at most a second). */
static int poll_ms(uint64_t ns)
{
    uint64_t ms = (ns + ST_NS_PER_MS - 1) / ST_NS_PER_MS;
    return ms > 1000 ? 1000 : (int)ms;
}

int st_proc_wait(struct st_proc *p, uint64_t timeout_ns)
{
    if (p->pid <= 0) {
        return 0;
    }
    if (timeout_ns == UINT64_MAX) {
        while (!p->reaped) {
            int st = 0;
            pid_t r = waitpid(p->pid, &st, 0);
            if (r == p->pid) {
                p->reaped = 1;
                p->wstatus = st;
            } else if (r < 0 && errno == ECHILD) {
                p->reaped = 1;
                p->wstatus = -1;
            }
        }
        return 0;
    }
    uint64_t t0 = st_clock_mono_ns(), step_ns = ST_NS_PER_MS;
    for (;;) {
        if (st_proc_poll(p)) {
            return 0;
        }
        uint64_t now = st_clock_mono_ns();
        if (now - t0 >= timeout_ns) {
            return ST_ETIMEOUT;
        }
        uint64_t left = timeout_ns - (now - t0);
        if (p->pidfd >= 0) {
            struct pollfd pf = {.fd = p->pidfd, .events = POLLIN};
            (void)poll(&pf, 1, poll_ms(left));
        } else {
            /* No pidfd: short children are common, so poll fast at first. */
            sleep_ns(step_ns < left ? step_ns : left);
            step_ns = step_ns * 2 > 20 * ST_NS_PER_MS ? 20 * ST_NS_PER_MS : step_ns * 2;
        }
    }
}

int st_proc_kill(const struct st_proc *p, int sig)
{
    if (p->pid <= 0 || p->reaped) {
        return -ESRCH;
    }
    if (kill(p->pgid, sig) == 0) {
        return 0;
    }
    int rc = -errno;
    if (p->pgid != p->pid && kill(p->pid, sig) == 0) {
        return 0; /* a session the child had not made yet */
    }
    return rc;
}

int st_proc_stop(struct st_proc *p, int sig, uint64_t grace_ns)
{
    if (p->pid <= 0 || st_proc_poll(p)) {
        return 0;
    }
    (void)st_proc_kill(p, sig);
    if (sig != SIGKILL && st_proc_wait(p, grace_ns) == 0) {
        return 0;
    }
    (void)st_proc_kill(p, SIGKILL);
    int rc = st_proc_wait(p, UINT64_MAX);
    return rc != 0 ? rc : sig == SIGKILL ? 0 : ST_ETIMEOUT;
}

int st_proc_status(const struct st_proc *p)
{
    if (!p->reaped || p->wstatus == -1) {
        return -1;
    }
    if (WIFEXITED(p->wstatus)) {
        return WEXITSTATUS(p->wstatus);
    }
    return WIFSIGNALED(p->wstatus) ? 128 + WTERMSIG(p->wstatus) : -1;
}

void st_proc_release(struct st_proc *p)
{
    for (int i = 0; i < 3; i++) {
        close_fd(&p->fd[i]);
    }
    close_fd(&p->pidfd);
}

void st_proc_run_init(struct st_proc_run *r, uint64_t timeout_ns, uint64_t grace_ns, size_t out_max,
                      size_t err_max)
{
    memset(r, 0, sizeof(*r));
    st_buf_init(&r->out);
    st_buf_init(&r->err);
    r->timeout_ns = timeout_ns;
    r->grace_ns = grace_ns;
    r->out_max = out_max;
    r->err_max = err_max;
    r->status = -1;
}

void st_proc_run_release(struct st_proc_run *r)
{
    st_buf_release(&r->out);
    st_buf_release(&r->err);
}

/* Reads what is there from *fd into b (kept up to max, all counted); closes *fd at EOF. */
static void drain(int *fd, struct st_buf *b, size_t max, uint64_t *total)
{
    char chunk[READ_CHUNK];
    ssize_t n = read(*fd, chunk, sizeof(chunk));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
        return;
    }
    if (n <= 0) {
        close_fd(fd);
        return;
    }
    *total += (uint64_t)n;
    if (b->len < max) {
        size_t keep = (size_t)n < max - b->len ? (size_t)n : max - b->len;
        st_buf_append(b, chunk, keep);
    }
}

int st_proc_run(const struct st_proc_opts *o, struct st_proc_run *r, char *err, size_t errlen)
{
    struct st_proc p;
    uint64_t t0 = st_clock_mono_ns();
    int rc = st_proc_spawn(o, &p, err, errlen);
    if (rc != 0) {
        st_proc_release(&p);
        return rc;
    }
    close_fd(&p.fd[0]); /* nothing to write: the child reads EOF */
    uint64_t deadline = r->timeout_ns ? t0 + r->timeout_ns : UINT64_MAX, kill_at = UINT64_MAX;
    uint64_t reaped_at = 0, step_ns = ST_NS_PER_MS;
    int killed = 0;
    for (;;) {
        uint64_t now = st_clock_mono_ns();
        if (!p.reaped && st_proc_poll(&p)) {
            reaped_at = now;
        }
        int open_n = (p.fd[1] >= 0) + (p.fd[2] >= 0);
        if (p.reaped && (open_n == 0 || now >= deadline || now - reaped_at >= RUN_DRAIN_AFTER_NS)) {
            break;
        }
        if (!p.reaped && now >= deadline && !r->timed_out) {
            r->timed_out = 1;
            (void)st_proc_kill(&p, r->grace_ns ? SIGTERM : SIGKILL);
            killed = r->grace_ns == 0;
            kill_at = now + r->grace_ns;
        }
        if (!p.reaped && r->timed_out && !killed && now >= kill_at) {
            (void)st_proc_kill(&p, SIGKILL);
            killed = 1;
        }
        if (!p.reaped && killed) {
            break; /* SIGKILL is sent: the blocking wait below ends */
        }
        uint64_t next = r->timed_out ? kill_at : deadline;
        uint64_t wait_ns = p.reaped ? 0 : next > now ? next - now : 0;
        if (!p.reaped && p.pidfd < 0 && wait_ns > step_ns) {
            wait_ns = step_ns; /* no pidfd: the reap shows only to polling */
            step_ns = step_ns * 2 > 20 * ST_NS_PER_MS ? 20 * ST_NS_PER_MS : step_ns * 2;
        }
        struct pollfd fds[3] = {
            {p.fd[1], POLLIN, 0}, {p.fd[2], POLLIN, 0}, {p.reaped ? -1 : p.pidfd, POLLIN, 0}};
        int n = poll(fds, 3, poll_ms(wait_ns));
        if (n < 0 && errno != EINTR) {
            break;
        }
        if (n == 0 && p.reaped) {
            break; /* nothing more is ready: a grandchild may hold the pipes */
        }
        if (n > 0 && p.fd[1] >= 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            drain(&p.fd[1], &r->out, r->out_max, &r->out_bytes);
        }
        if (n > 0 && p.fd[2] >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            drain(&p.fd[2], &r->err, r->err_max, &r->err_bytes);
        }
    }
    if (!p.reaped) {
        (void)st_proc_kill(&p, SIGKILL);
        rc = st_proc_wait(&p, UINT64_MAX);
    }
    r->status = st_proc_status(&p);
    r->elapsed_ns = st_clock_mono_ns() - t0;
    st_proc_release(&p);
    return rc;
}
