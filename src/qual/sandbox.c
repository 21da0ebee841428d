/*
 * Sandboxed runner, the caller's side (P). P validates the job, builds the seccomp program and the
 * host box (sandbox_prep.c), then clones a supervisor (S) into new namespaces (user, pid, net,
 * mount, ipc, uts: as many as the kernel grants, best first); S and its workers are
 * sandbox_child.c. S and W report to P through a close-on-exec pipe of fixed-size records; P
 * enforces wall-clock limits with poll and SIGKILLs the whole sandbox, then decides the verdict
 * from the records and the exit statuses. Protocol and states: docs/internals/sandbox.md.
 */
#include "qual/sandbox.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/names.h"
#include "base/xalloc.h"
#include "qual/sandbox_int.h"

#define ASK_GRACE_MS 1000  /* after SIGUSR1, for the supervisor to kill the step itself */
#define EXIT_GRACE_MS 3000 /* after a kill, for the supervisor to be gone */
#define DRAIN_GRACE_MS 300 /* after the supervisor, for output pipes to reach EOF */
#define READ_CHUNK 16384

static int write_file_at(int dfd, const char *name, const char *text)
{
    int fd = openat(dfd, name, O_WRONLY | O_CLOEXEC);
    size_t n = strlen(text);

    if (fd < 0) {
        return -errno;
    }
    ssize_t w = write(fd, text, n);
    int rc = w == (ssize_t)n ? 0 : (w < 0 ? -errno : -EIO);
    (void)close(fd);
    return rc;
}

/* Maps uid and gid 0 of the child's new user namespace to run_uid/gid (root caller) or to our
 * own ids, the only mapping an unprivileged caller may write. */
static int write_id_maps(const struct st_sandbox_ctx *c, pid_t pid)
{
    char path[64], map[64];
    int rc;

    snprintf(path, sizeof(path), "/proc/%d", (int)pid);
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        return -errno;
    }
    rc = c->root_caller ? 0 : write_file_at(dfd, "setgroups", "deny");
    if (rc == 0) {
        snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)c->run_uid);
        rc = write_file_at(dfd, "uid_map", map);
    }
    if (rc == 0) {
        snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)c->run_gid);
        rc = write_file_at(dfd, "gid_map", map);
    }
    (void)close(dfd);
    return rc;
}

static const struct {
    unsigned long flag;
    uint32_t layer;
} ns_map[] = {{CLONE_NEWUSER, ST_SANDBOX_L_USERNS}, {CLONE_NEWPID, ST_SANDBOX_L_PIDNS},
              {CLONE_NEWNET, ST_SANDBOX_L_NETNS},   {CLONE_NEWNS, ST_SANDBOX_L_MNTNS},
              {CLONE_NEWIPC, ST_SANDBOX_L_IPCNS},   {CLONE_NEWUTS, ST_SANDBOX_L_UTSNS}};

static uint32_t ns_layers(unsigned long flags)
{
    uint32_t l = 0;

    for (size_t i = 0; i < sizeof(ns_map) / sizeof(ns_map[0]); i++) {
        l |= (flags & ns_map[i].flag) ? ns_map[i].layer : 0;
    }
    return l;
}

/* Sets the per-attempt fields that depend on which namespaces the clone gets. */
static void prepare_attempt(struct st_sandbox_ctx *c, unsigned long flags)
{
    const struct st_sandbox_cfg *cfg = c->cfg;

    c->ns_flags = flags;
    c->drop_uid = c->root_caller && !(flags & CLONE_NEWUSER);
    /* Ids as S sees them: uid 0 of its user namespace, or run_uid on the host. */
    c->box_uid = (flags & CLONE_NEWUSER) ? 0 : (c->root_caller ? c->run_uid : getuid());
    c->box_gid = (flags & CLONE_NEWUSER) ? 0 : (c->root_caller ? c->run_gid : getgid());
    snprintf(c->box_opts, sizeof(c->box_opts), "size=%llu,nr_inodes=%u,mode=0700,uid=%u,gid=%u",
             (unsigned long long)cfg->box_bytes, (unsigned)cfg->box_inodes, (unsigned)c->box_uid,
             (unsigned)c->box_gid);
}

/*
 * Clones S with the most namespaces the kernel grants: all six, then without a user namespace
 * (a root caller), then none. Returns 0 with *pid set, or a negated errno.
 */
static int start_supervisor(struct st_sandbox_ctx *c, int sync_w, pid_t *pid, char *note,
                            size_t notelen)
{
    unsigned long want = 0;

    for (size_t i = 0; i < sizeof(ns_map) / sizeof(ns_map[0]); i++) {
        if (c->want & ns_map[i].layer) {
            want |= ns_map[i].flag;
        }
    }
    /* Without a user namespace only root may create the others. */
    unsigned long attempts[3] = {want, c->root_caller ? want & ~(unsigned long)CLONE_NEWUSER : 0,
                                 0};
    int last = 0;
    for (size_t a = 0; a < 3; a++) {
        if (a > 0 && attempts[a] == attempts[a - 1]) {
            continue;
        }
        prepare_attempt(c, attempts[a]);
        pid_t p = st_sandbox_clone_body(attempts[a], st_sandbox_supervisor_body, c);
        if (p < 0) {
            last = -errno;
            if (attempts[a] != 0) {
                char names[128];
                snprintf(note, notelen, "namespaces %s refused: %s",
                         st_sandbox_layers_str(ns_layers(attempts[a]), names, sizeof(names)),
                         st_strerror(last));
            }
            continue;
        }
        int rc = (attempts[a] & CLONE_NEWUSER) ? write_id_maps(c, p) : 0;
        if (rc == 0 && write(sync_w, "g", 1) != 1) {
            rc = -errno;
        }
        if (rc != 0) {
            snprintf(note, notelen, "user namespace id map refused: %s", st_strerror(rc));
            (void)kill(p, SIGKILL);
            while (waitpid(p, NULL, 0) < 0 && errno == EINTR) {
            }
            last = rc;
            continue;
        }
        *pid = p;
        return 0;
    }
    return last != 0 ? last : -EPERM;
}

/* A byte stream's tail: the last cap bytes, in a buffer of 2 * cap trimmed now and then. */
struct tail {
    char *buf;
    size_t len, cap;
    uint64_t total;
};

static void tail_add(struct tail *t, const char *p, size_t n)
{
    t->total += n;
    if (t->cap == 0 || n == 0) {
        return;
    }
    if (t->buf == NULL) {
        t->buf = st_xmalloc(2 * t->cap);
    }
    if (n >= t->cap) {
        memcpy(t->buf, p + n - t->cap, t->cap);
        t->len = t->cap;
        return;
    }
    if (t->len + n > 2 * t->cap) {
        memmove(t->buf, t->buf + t->len - t->cap, t->cap);
        t->len = t->cap;
    }
    memcpy(t->buf + t->len, p, n);
    t->len += n;
}

static char *tail_take(struct tail *t, size_t *len)
{
    size_t n = t->len < t->cap ? t->len : t->cap;
    char *s = st_xmalloc(n + 1);

    if (n > 0) {
        memcpy(s, t->buf + t->len - n, n);
    }
    s[n] = '\0';
    *len = n;
    return s;
}
/* What P learns during a run. */
struct watch {
    int setup_failed;
    int cur; /* step running or last run; -1 before the first */
    int ended[ST_SANDBOX_MAX_STEPS];
    int status[ST_SANDBOX_MAX_STEPS];
    uint32_t layers;   /* from S */
    uint32_t w_layers; /* from W, last step */
    int timed_out;
    int killed;
    char rbuf[sizeof(struct st_sandbox_msg) * 8];
    size_t rlen;
};

static void add_error(struct st_sandbox_result *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void add_error(struct st_sandbox_result *out, const char *fmt, ...)
{
    size_t n = strlen(out->error);
    va_list ap;

    if (n > 0 && n + 2 < sizeof(out->error)) {
        out->error[n++] = ';';
        out->error[n++] = ' ';
        out->error[n] = '\0';
    }
    va_start(ap, fmt);
    vsnprintf(out->error + n, sizeof(out->error) - n, fmt, ap);
    va_end(ap);
}

/* Applies one record; returns 1 when it starts a step (the caller resets the deadline). */
static int handle_msg(const struct st_sandbox_job *job, const struct st_sandbox_msg *m,
                      struct watch *w, struct st_sandbox_result *out)
{
    char text[sizeof(m->text) + 1];
    int step = m->step;

    if (step < 0 || (size_t)step >= job->nsteps) {
        return 0; /* not ours to believe */
    }
    memcpy(text, m->text, sizeof(m->text));
    text[sizeof(m->text)] = '\0';
    switch (m->kind) {
    case ST_SANDBOX_MSG_SETUP_FAIL:
        w->setup_failed = 1;
        add_error(out, "sandbox set-up: %s: %s", text, st_strerror(-m->err));
        break;
    case ST_SANDBOX_MSG_NOTE:
        snprintf(out->note, sizeof(out->note), "no pivot_root (%s: %s): the box is on the host",
                 text, st_strerror(-m->err));
        break;
    case ST_SANDBOX_MSG_LAYERS:
        w->layers |= m->layers;
        break;
    case ST_SANDBOX_MSG_STEP_START:
        w->cur = step;
        out->steps_run = (uint32_t)step + 1;
        return 1;
    case ST_SANDBOX_MSG_READY:
        w->w_layers = m->layers;
        break;
    case ST_SANDBOX_MSG_EXEC_FAIL:
        w->setup_failed = 1;
        add_error(out, "step %d (%s): %s: %s", step, job->steps[step].argv[0], text,
                  st_strerror(-m->err));
        break;
    case ST_SANDBOX_MSG_STEP_END:
        w->ended[step] = 1;
        w->status[step] = m->status;
        break;
    default:
        break;
    }
    return 0;
}

static const struct st_sandbox_limits *step_limits(const struct st_sandbox_cfg *cfg,
                                                   const struct st_sandbox_job *job, int k)
{
    const struct st_sandbox_limits *l = job->steps[k < 0 ? 0 : k].limits;

    return l != NULL ? l : &cfg->limits;
}

static void kill_all(pid_t sup)
{
    /* As init of a pid namespace S takes every sandboxed process with it. Without one, the
     * steps' groups are S's to kill (SIGUSR1, sent first); this is the backstop. S is not reaped
     * yet, so its number cannot have been reused. */
    (void)kill(-sup, SIGKILL);
    (void)kill(sup, SIGKILL);
}

static int ms_until(uint64_t deadline_ns)
{
    uint64_t now = st_clock_mono_ns();

    if (now >= deadline_ns) {
        return 0;
    }
    uint64_t ms = (deadline_ns - now + ST_NS_PER_MS - 1) / ST_NS_PER_MS;
    return ms > 60000 ? 60000 : (int)ms;
}

/* Reads whatever is ready on the report pipe and the output pipes until S is gone. */
static void watch_run(const struct st_sandbox_cfg *cfg, const struct st_sandbox_job *job, pid_t sup,
                      int pidns, int report_r, int *out_r, struct tail *tails, struct watch *w,
                      struct st_sandbox_result *out)
{
    size_t nout = 2 * job->nsteps;
    uint64_t deadline = st_clock_mono_ns() + step_limits(cfg, job, 0)->wall_ms * ST_NS_PER_MS;
    char buf[READ_CHUNK];

    while (report_r >= 0) {
        struct pollfd pf[1 + 2 * ST_SANDBOX_MAX_STEPS];
        size_t idx[1 + 2 * ST_SANDBOX_MAX_STEPS];
        nfds_t n = 0;
        pf[n].fd = report_r;
        pf[n].events = POLLIN;
        idx[n++] = 0;
        for (size_t i = 0; i < nout; i++) {
            if (out_r[i] >= 0) {
                pf[n].fd = out_r[i];
                pf[n].events = POLLIN;
                idx[n++] = i + 1;
            }
        }
        int pr = poll(pf, n, ms_until(deadline));
        if (pr < 0 && errno != EINTR) {
            break;
        }
        if (pr == 0 && ms_until(deadline) == 0) {
            uint64_t now = st_clock_mono_ns();
            if (w->killed == 0 && !pidns && w->cur >= 0) {
                /* S kills the step's group and reaps it, then reports the step as usual. */
                (void)kill(sup, SIGUSR1);
                w->killed = 1;
                w->timed_out = 1;
                deadline = now + ASK_GRACE_MS * ST_NS_PER_MS;
            } else if (w->killed < 2) {
                kill_all(sup);
                w->killed = 2;
                w->timed_out = 1;
                deadline = now + EXIT_GRACE_MS * ST_NS_PER_MS;
            } else {
                add_error(out, "the sandbox outlived SIGKILL by %d ms", EXIT_GRACE_MS);
                break;
            }
            continue;
        }
        for (nfds_t i = 0; pr > 0 && i < n; i++) {
            if (pf[i].revents == 0) {
                continue;
            }
            if (idx[i] > 0) {
                size_t o = idx[i] - 1;
                ssize_t r = read(out_r[o], buf, sizeof(buf));
                if (r > 0) {
                    tail_add(&tails[o], buf, (size_t)r);
                } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
                    (void)close(out_r[o]);
                    out_r[o] = -1;
                }
                continue;
            }
            ssize_t r = read(report_r, w->rbuf + w->rlen, sizeof(w->rbuf) - w->rlen);
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
                report_r = -1; /* S is gone: every writer has exited */
                break;
            }
            if (r < 0) {
                continue;
            }
            w->rlen += (size_t)r;
            size_t off = 0;
            for (; w->rlen - off >= sizeof(struct st_sandbox_msg);
                 off += sizeof(struct st_sandbox_msg)) {
                struct st_sandbox_msg m;
                memcpy(&m, w->rbuf + off, sizeof(m));
                if (handle_msg(job, &m, w, out) && !w->killed) {
                    deadline =
                        st_clock_mono_ns() + step_limits(cfg, job, w->cur)->wall_ms * ST_NS_PER_MS;
                }
            }
            memmove(w->rbuf, w->rbuf + off, w->rlen - off);
            w->rlen -= off;
        }
    }
}

/* Reads the output pipes to EOF, or for DRAIN_GRACE_MS, whichever comes first. */
static void drain(int *out_r, size_t nout, struct tail *tails)
{
    uint64_t deadline = st_clock_mono_ns() + DRAIN_GRACE_MS * ST_NS_PER_MS;
    char buf[READ_CHUNK];

    for (;;) {
        struct pollfd pf[2 * ST_SANDBOX_MAX_STEPS];
        size_t idx[2 * ST_SANDBOX_MAX_STEPS];
        nfds_t n = 0;
        for (size_t i = 0; i < nout; i++) {
            if (out_r[i] >= 0) {
                pf[n].fd = out_r[i];
                pf[n].events = POLLIN;
                idx[n++] = i;
            }
        }
        if (n == 0) {
            return;
        }
        int pr = poll(pf, n, ms_until(deadline));
        if (pr == 0) {
            return;
        }
        for (nfds_t i = 0; pr > 0 && i < n; i++) {
            if (pf[i].revents == 0) {
                continue;
            }
            ssize_t r = read(out_r[idx[i]], buf, sizeof(buf));
            if (r > 0) {
                tail_add(&tails[idx[i]], buf, (size_t)r);
            } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
                (void)close(out_r[idx[i]]);
                out_r[idx[i]] = -1;
            }
        }
    }
}

static void decide(const struct st_sandbox_job *job, const struct watch *w, int sup_status,
                   struct st_sandbox_result *out)
{
    int k = w->cur < 0 ? 0 : w->cur;
    int last = (size_t)k + 1 == job->nsteps;

    out->step = (uint32_t)k;
    out->timed_out = w->timed_out;
    if (w->timed_out) {
        out->signal = SIGKILL;
        out->verdict = last ? ST_SANDBOX_FAIL_TIMEOUT : ST_SANDBOX_FAIL_BUILD;
        if (w->cur < 0) {
            out->verdict = ST_SANDBOX_FAIL_SETUP;
            add_error(out, "timed out while setting up the sandbox");
        }
        return;
    }
    if (w->cur >= 0 && w->ended[k]) {
        int st = w->status[k];
        if (WIFEXITED(st)) {
            out->exited = 1;
            out->exit_code = WEXITSTATUS(st);
        } else if (WIFSIGNALED(st)) {
            out->signal = WTERMSIG(st);
        }
    }
    if (w->setup_failed) {
        out->verdict = ST_SANDBOX_FAIL_SETUP;
        return;
    }
    if (w->cur < 0 || !w->ended[k]) {
        /* S died without reporting the step: only a sandboxed program can have killed it. */
        out->verdict = ST_SANDBOX_FAIL_SIGNAL;
        out->signal = WIFSIGNALED(sup_status) ? WTERMSIG(sup_status) : 0;
        add_error(out, "the sandbox supervisor ended early (%s %d)",
                  WIFSIGNALED(sup_status) ? "signal" : "exit",
                  WIFSIGNALED(sup_status) ? WTERMSIG(sup_status) : WEXITSTATUS(sup_status));
        return;
    }
    if (out->exited && out->exit_code == 0) {
        out->verdict = last ? ST_SANDBOX_PASS : ST_SANDBOX_FAIL_SETUP;
        if (!last) {
            add_error(out, "the supervisor stopped after step %d", k);
        }
    } else if (!last) {
        out->verdict = ST_SANDBOX_FAIL_BUILD;
    } else {
        out->verdict = out->exited ? ST_SANDBOX_FAIL_EXIT : ST_SANDBOX_FAIL_SIGNAL;
    }
}

static void close_fd(int *fd)
{
    if (*fd >= 0) {
        (void)close(*fd);
        *fd = -1;
    }
}

static void ctx_init(struct st_sandbox_ctx *c, const struct st_sandbox_cfg *cfg,
                     const struct st_sandbox_job *job)
{
    c->cfg = cfg;
    c->job = job;
    c->want = ST_SANDBOX_L_OPTIONAL & ~cfg->layers_off;
    c->root_caller = geteuid() == 0;
    c->run_uid = c->root_caller ? cfg->run_uid : geteuid();
    c->run_gid = c->root_caller ? cfg->run_gid : getegid();
    c->report_w = c->sync_r = c->report_r = c->sync_w = c->stdin_fd = -1;
    for (size_t i = 0; i < ST_SANDBOX_MAX_STEPS; i++) {
        c->out_w[i] = c->err_w[i] = -1;
    }
}

/* Closes the child's ends still open, removes the box, frees c; out's tails are never NULL. */
static void ctx_release(struct st_sandbox_ctx *c, struct st_sandbox_result *out)
{
    close_fd(&c->report_w);
    close_fd(&c->sync_r);
    close_fd(&c->stdin_fd);
    for (size_t k = 0; k < ST_SANDBOX_MAX_STEPS; k++) {
        close_fd(&c->out_w[k]);
        close_fd(&c->err_w[k]);
    }
    if (c->host_box[0] != '\0') {
        int r = st_sandbox_rm_box(c->host_box);
        out->box_removed = r == 0;
        if (r != 0) {
            add_error(out, "removing the box %s: %s", c->host_box, st_strerror(r));
        }
    }
    free((void *)c->seccomp.filter);
    free(c);
    if (out->stdout_tail == NULL) {
        out->stdout_tail = st_xstrdup("");
    }
    if (out->stderr_tail == NULL) {
        out->stderr_tail = st_xstrdup("");
    }
}

/* cfg->tmp_parent, else $TMPDIR, else /tmp. */
static const char *box_parent(const struct st_sandbox_cfg *cfg)
{
    const char *parent = cfg->tmp_parent;

    if (parent == NULL) {
        parent = getenv("TMPDIR");
    }
    return parent != NULL && parent[0] != '\0' ? parent : "/tmp";
}

/* Makes the report and sync pipes, a stdout and a stderr pipe per step (our ends non-blocking)
 * and the stdin memfd, all close-on-exec. Returns 0 or a negated errno. */
static int open_channels(struct st_sandbox_ctx *c, int *out_r)
{
    const struct st_sandbox_job *job = c->job;
    int p[2];

    if (pipe2(p, O_CLOEXEC) != 0) {
        return -errno;
    }
    c->report_r = p[0];
    c->report_w = p[1];
    if (pipe2(p, O_CLOEXEC) != 0) {
        return -errno;
    }
    c->sync_r = p[0];
    c->sync_w = p[1];
    for (size_t k = 0; k < job->nsteps; k++) {
        int *w[2] = {&c->out_w[k], &c->err_w[k]};
        for (size_t j = 0; j < 2; j++) {
            if (pipe2(p, O_CLOEXEC) != 0) {
                return -errno;
            }
            out_r[2 * k + j] = p[0];
            *w[j] = p[1];
            (void)fcntl(p[0], F_SETFL, O_NONBLOCK);
        }
    }
    c->stdin_fd = memfd_create("st-stdin", MFD_CLOEXEC);
    if (c->stdin_fd < 0) {
        return -errno;
    }
    if (job->stdin_len > 0 &&
        pwrite(c->stdin_fd, job->stdin_data, job->stdin_len, 0) != (ssize_t)job->stdin_len) {
        return -errno;
    }
    return 0;
}

/* After the report pipe's EOF (or giving up): reaps S, reads the last output, fills out. */
static void collect(const struct st_sandbox_ctx *c, pid_t sup, uint64_t t0, const struct watch *w,
                    int *out_r, struct tail *tails, struct st_sandbox_result *out)
{
    int sup_status = 0;
    struct rusage ru;

    kill_all(sup);
    memset(&ru, 0, sizeof(ru));
    while (wait4(sup, &sup_status, 0, &ru) < 0 && errno == EINTR) {
    }
    out->wall_ms = (st_clock_mono_ns() - t0) / ST_NS_PER_MS;
    out->cpu_ms = (uint64_t)ru.ru_utime.tv_sec * 1000 + (uint64_t)ru.ru_utime.tv_usec / 1000 +
                  (uint64_t)ru.ru_stime.tv_sec * 1000 + (uint64_t)ru.ru_stime.tv_usec / 1000;
    drain(out_r, 2 * c->job->nsteps, tails);
    out->layers = w->layers | w->w_layers | ns_layers(c->ns_flags);
    decide(c->job, w, sup_status, out);
    size_t t = 2 * (size_t)(w->cur < 0 ? 0 : w->cur);
    out->stdout_tail = tail_take(&tails[t], &out->stdout_len);
    out->stdout_total_bytes = tails[t].total;
    out->stderr_tail = tail_take(&tails[t + 1], &out->stderr_len);
    out->stderr_total_bytes = tails[t + 1].total;
}

int st_sandbox_run(const struct st_sandbox_cfg *cfg, const struct st_sandbox_job *job,
                   struct st_sandbox_result *out)
{
    struct st_sandbox_ctx *c = st_xcalloc(1, sizeof(*c));
    struct tail tails[2 * ST_SANDBOX_MAX_STEPS];
    int out_r[2 * ST_SANDBOX_MAX_STEPS];
    int report_r = -1, sync_w = -1, rc;
    struct watch w;
    pid_t sup = -1;
    char note[ST_SANDBOX_MAX_ERROR] = "";

    memset(out, 0, sizeof(*out));
    memset(tails, 0, sizeof(tails));
    memset(&w, 0, sizeof(w));
    w.cur = -1;
    ctx_init(c, cfg, job);
    for (size_t i = 0; i < 2 * ST_SANDBOX_MAX_STEPS; i++) {
        out_r[i] = -1;
        tails[i].cap = cfg->output_cap_bytes;
    }
    rc = st_sandbox_validate(cfg, job, out->error, sizeof(out->error));
    if (rc != 0) {
        goto out;
    }
    if ((c->want & ST_SANDBOX_L_SECCOMP) &&
        st_sandbox_build_seccomp(&c->seccomp, note, sizeof(note)) != 0) {
        snprintf(out->note, sizeof(out->note), "%s", note);
    }
    note[0] = '\0';
    st_sandbox_list_etc(c);
    rc = st_sandbox_make_box(c, box_parent(cfg), out->error, sizeof(out->error));
    st_sandbox_cstr_copy(out->box, sizeof(out->box), c->host_box);
    if (rc != 0) {
        goto out;
    }
    st_sandbox_set_env(c);

    rc = open_channels(c, out_r);
    report_r = c->report_r;
    sync_w = c->sync_w;
    if (rc != 0) {
        add_error(out, "sandbox pipes: %s", st_strerror(rc));
        goto out;
    }

    uint64_t t0 = st_clock_mono_ns();
    rc = start_supervisor(c, sync_w, &sup, note, sizeof(note));
    if (note[0] != '\0') {
        size_t nl = strlen(out->note);
        snprintf(out->note + nl, sizeof(out->note) - nl, "%s%s", nl > 0 ? "; " : "", note);
    }
    if (rc != 0) {
        add_error(out, "cannot start the sandbox: %s", st_strerror(rc));
        goto out;
    }
    /* Our copies of the child's ends: EOF on the pipes then means the sandbox is done. */
    close_fd(&c->report_w);
    close_fd(&c->sync_r);
    close_fd(&c->stdin_fd);
    for (size_t k = 0; k < job->nsteps; k++) {
        close_fd(&c->out_w[k]);
        close_fd(&c->err_w[k]);
    }
    watch_run(cfg, job, sup, (c->ns_flags & CLONE_NEWPID) != 0, report_r, out_r, tails, &w, out);
    collect(c, sup, t0, &w, out_r, tails, out);
    sup = -1;
    rc = 0;
out:
    if (sup > 0) {
        kill_all(sup);
        while (waitpid(sup, NULL, 0) < 0 && errno == EINTR) {
        }
    }
    close_fd(&report_r);
    close_fd(&sync_w);
    for (size_t i = 0; i < 2 * ST_SANDBOX_MAX_STEPS; i++) {
        close_fd(&out_r[i]);
        free(tails[i].buf);
    }
    ctx_release(c, out);
    return rc;
}

void st_sandbox_result_release(struct st_sandbox_result *out)
{
    st_freep(&out->stdout_tail);
    st_freep(&out->stderr_tail);
    out->stdout_len = out->stderr_len = 0;
}

/* ---- Configuration, names. ---- */

void st_sandbox_cfg_init(struct st_sandbox_cfg *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->limits.cpu_s = 5;
    cfg->limits.wall_ms = 10000;
    cfg->limits.as_bytes = 512ull << 20;
    cfg->limits.fsize_bytes = 16ull << 20;
    cfg->limits.nofile = 64;
    cfg->limits.nproc = 32;
    cfg->box_bytes = 64ull << 20;
    cfg->box_inodes = 4096;
    cfg->output_cap_bytes = 16u << 10;
    cfg->run_uid = 65534;
    cfg->run_gid = 65534;
}

static const char *const sandbox_verdict_names[] = {
    [ST_SANDBOX_PASS] = "pass",          [ST_SANDBOX_FAIL_EXIT] = "exit",
    [ST_SANDBOX_FAIL_SIGNAL] = "signal", [ST_SANDBOX_FAIL_TIMEOUT] = "timeout",
    [ST_SANDBOX_FAIL_BUILD] = "build",   [ST_SANDBOX_FAIL_SETUP] = "setup",
};

const char *st_sandbox_verdict_name(enum st_sandbox_verdict v)
{
    return ST_NAME_OF(sandbox_verdict_names, v, "unknown");
}

const char *st_sandbox_layers_str(uint32_t layers, char *buf, size_t len)
{
    static const char *const names[] = {"userns",      "pidns",        "netns",          "mntns",
                                        "ipcns",       "utsns",        "pivot",          "seccomp",
                                        "landlock-fs", "landlock-net", "landlock-scope", "nopriv",
                                        "nnp",         "rlimits",      "pgroup"};
    size_t n = 0;

    if (len == 0) {
        return buf;
    }
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (layers & (1u << i)) {
            int w = snprintf(buf + n, len - n, "%s%s", n > 0 ? "," : "", names[i]);
            if (w < 0 || (size_t)w >= len - n) {
                break;
            }
            n += (size_t)w;
        }
    }
    if (n == 0) {
        snprintf(buf, len, "none");
    }
    return buf;
}
