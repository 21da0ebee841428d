/*
 * The sandbox's inside: S (the supervisor, init of the pid namespace when there is one) and W (one
 * worker per step), from clone to exec. S pivots into a minimal read-only tree with a tmpfs box,
 * then forks W per step, which drops privilege, applies Landlock, rlimits and seccomp, and execs
 * the step; both report to P through fixed-size records on a close-on-exec pipe. Everything here
 * runs between clone and exec: system calls and plain memory only, no malloc, no stdio, no locks,
 * nothing that reads the thread id glibc cached for P's thread. It calls nothing of P's side.
 * Protocol and states: docs/internals/sandbox.md.
 */
#include "qual/sandbox_int.h"

#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/securebits.h>
#include <linux/seccomp.h>

#include "base/proc.h"

/* Landlock rights newer than the 6.1 headers Debian 12 ships. */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#define LL_NET_BIND_TCP (1ULL << 0)
#define LL_NET_CONNECT_TCP (1ULL << 1)
#define LL_SCOPE_ABSTRACT_UNIX (1ULL << 0)
#define LL_SCOPE_SIGNAL (1ULL << 1)
#define LL_FILE_RIGHTS                                                                             \
    (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |   \
     LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)
#define LL_READ_RIGHTS                                                                             \
    (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)

/* The ruleset attribute as of Landlock ABI 6; older kernels get a shorter prefix of it. */
struct ll_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

static const char *const ro_trees[] = {"/usr",   "/bin",   "/sbin",  "/lib",
                                       "/lib32", "/lib64", "/libx32"};
static const char *const dev_nodes[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
                                        "/dev/urandom"};

/* ---- Helpers safe between clone and exec: system calls and plain memory only. ---- */

size_t st_sandbox_cstr_copy(char *dst, size_t cap, const char *src)
{
    size_t n = 0;

    while (src[n] != '\0' && n + 1 < cap) {
        dst[n] = src[n];
        n++;
    }
    dst[n] = '\0';
    return n;
}

/* dst = a + b; -1 if it does not fit. */
static int path_join(char *dst, size_t cap, const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);

    if (la + lb + 1 > cap) {
        return -1;
    }
    memcpy(dst, a, la);
    memcpy(dst + la, b, lb + 1);
    return 0;
}

static void write_full(int fd, const void *p, size_t n)
{
    const char *c = p;

    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return;
        }
        c += w;
        n -= (size_t)w;
    }
}

static void report(const struct st_sandbox_ctx *c, int kind, int step, int err, const char *text)
{
    struct st_sandbox_msg m;

    memset(&m, 0, sizeof(m));
    m.kind = kind;
    m.step = step;
    m.err = err;
    if (text != NULL) {
        st_sandbox_cstr_copy(m.text, sizeof(m.text), text);
    }
    write_full(c->report_w, &m, sizeof(m));
}

static void report_u(const struct st_sandbox_ctx *c, int kind, int step, uint32_t layers, int pid,
                     int status)
{
    struct st_sandbox_msg m;

    memset(&m, 0, sizeof(m));
    m.kind = kind;
    m.step = step;
    m.layers = layers;
    m.pid = pid;
    m.status = status;
    write_full(c->report_w, &m, sizeof(m));
}

/*
 * Clones a child in the namespaces flags names, running body(ctx) in it: st_proc_spawn's body
 * mode, a raw clone without glibc's fork handlers (which may take locks another thread of P held),
 * with every descriptor, the group and the signals left as they are (S and W set their own).
 * Async-signal-safe: S calls it for each W. Returns the pid, or -1 with errno set.
 */
pid_t st_sandbox_clone_body(unsigned long flags, st_proc_body_fn body, void *ctx)
{
    struct st_proc_opts o = {
        .fn = body, .ctx = ctx, .clone_flags = flags, .group = ST_PROC_GROUP_SAME};
    struct st_proc p;
    int rc = st_proc_spawn(&o, &p, NULL, 0);
    pid_t pid = p.pid;
    st_proc_release(&p); /* its pidfd: S and P wait with waitpid */
    if (rc != 0) {
        errno = -rc;
        return -1;
    }
    return pid;
}

static void reset_signals(void)
{
    struct sigaction sa;
    sigset_t all;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++) {
        if (s != SIGKILL && s != SIGSTOP) {
            (void)sigaction(s, &sa, NULL);
        }
    }
    sigemptyset(&all);
    (void)sigprocmask(SIG_SETMASK, &all, NULL);
}

/* Moves *fd to a number above 2, so stdio set-up cannot overwrite it. */
static int fd_above_stdio(int *fd)
{
    if (*fd < 0 || *fd > 2) {
        return 0;
    }
    int n = fcntl(*fd, F_DUPFD_CLOEXEC, 3);
    if (n < 0) {
        return -1;
    }
    *fd = n;
    return 0;
}

/* Closes lo..hi; one by one (up to the descriptor limit) on kernels without close_range. */
static void close_span(int lo, int hi)
{
    if (close_range((unsigned)lo, (unsigned)hi, 0) == 0) {
        return;
    }
    struct rlimit rl;
    int top = 65536;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)top) {
        top = (int)rl.rlim_cur;
    }
    for (int fd = lo; fd <= hi && fd < top; fd++) {
        (void)close(fd);
    }
}

/* Closes every descriptor from 3 up except those in keep[0..n) (sorted in place). */
static void close_except(int *keep, size_t n)
{
    int lo = 3;

    for (size_t i = 1; i < n; i++) {
        for (size_t j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
            int t = keep[j];
            keep[j] = keep[j - 1];
            keep[j - 1] = t;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (keep[i] < lo) {
            continue;
        }
        if (keep[i] > lo) {
            close_span(lo, keep[i] - 1);
        }
        lo = keep[i] + 1;
    }
    close_span(lo, INT_MAX);
}

/* Makes the bind mount at dst read-only (and nosuid, nodev unless dev), keeping locked flags. */
static int remount_ro(const char *dst, int dev)
{
    struct mount_attr attr;

    memset(&attr, 0, sizeof(attr));
    attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | (dev ? 0 : MOUNT_ATTR_NODEV);
    if (syscall(SYS_mount_setattr, AT_FDCWD, dst, AT_RECURSIVE, &attr, sizeof(attr)) == 0) {
        return 0;
    }
    if (errno != ENOSYS) {
        return -1;
    }
    /* Older kernels: a bind remount must repeat the flags a user namespace may not clear. */
    struct statfs sf;
    unsigned long fl = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | (dev ? 0 : MS_NODEV);
    if (statfs(dst, &sf) == 0) {
        fl |= (sf.f_flags & ST_NODEV) ? MS_NODEV : 0;
        fl |= (sf.f_flags & ST_NOEXEC) ? MS_NOEXEC : 0;
        fl |= (sf.f_flags & ST_NOATIME) ? MS_NOATIME : 0;
        fl |= (sf.f_flags & ST_NODIRATIME) ? MS_NODIRATIME : 0;
        fl |= (sf.f_flags & ST_RELATIME) ? MS_RELATIME : 0;
    }
    return mount(NULL, dst, NULL, fl, NULL);
}

/* Shows host path src at root + src: symlinks copied, directories and files bound read-only. */
static int expose(const char *root, const char *src, int dev, const char **what)
{
    char dst[512], link[512];
    struct stat st;

    if (lstat(src, &st) != 0) {
        return errno == ENOENT ? 0 : -1;
    }
    if (path_join(dst, sizeof(dst), root, src) != 0) {
        errno = ENAMETOOLONG;
        *what = "path";
        return -1;
    }
    if (S_ISLNK(st.st_mode)) {
        ssize_t n = readlink(src, link, sizeof(link) - 1);
        if (n < 0) {
            *what = "readlink";
            return -1;
        }
        link[n] = '\0';
        *what = "symlink";
        return symlink(link, dst);
    }
    if (S_ISDIR(st.st_mode)) {
        *what = "mkdir";
        if (mkdir(dst, 0755) != 0) {
            return -1;
        }
    } else {
        int fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        *what = "create mount point";
        if (fd < 0) {
            return -1;
        }
        (void)close(fd);
    }
    *what = "bind mount";
    if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) != 0) {
        return -1;
    }
    *what = "read-only remount";
    return remount_ro(dst, dev);
}

static int write_box_files(const struct st_sandbox_ctx *c, const char *boxdir, const char **what)
{
    char path[512];

    for (size_t i = 0; i < c->job->nfiles; i++) {
        const struct st_sandbox_file *f = &c->job->files[i];
        size_t lb = strlen(boxdir), ln = strlen(f->name);
        if (lb + 1 + ln + 1 > sizeof(path)) {
            errno = ENAMETOOLONG;
            *what = "box file path";
            return -1;
        }
        memcpy(path, boxdir, lb);
        path[lb] = '/';
        memcpy(path + lb + 1, f->name, ln + 1);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        *what = "write box file";
        if (fd < 0) {
            return -1;
        }
        const char *p = f->data;
        size_t n = f->len;
        while (n > 0) {
            ssize_t w = write(fd, p, n);
            if (w < 0 && errno == EINTR) {
                continue;
            }
            if (w < 0) {
                (void)close(fd);
                return -1;
            }
            p += w;
            n -= (size_t)w;
        }
        if (fchown(fd, c->box_uid, c->box_gid) != 0) {
            *what = "chown box file";
            (void)close(fd);
            return -1;
        }
        (void)close(fd);
    }
    return 0;
}

/*
 * Builds the minimal tree on a tmpfs over root and pivots into it: /usr, /bin, /lib* read-only,
 * a few /etc entries, five /dev nodes, a tmpfs /box with the job's files, /tmp -> box. On
 * failure the tmpfs is detached again, so the caller can fall back to the host box.
 */
static int setup_pivot(struct st_sandbox_ctx *c, const char *root, const char **what)
{
    char path[512];

    *what = "make / private";
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
        return -1;
    }
    *what = "mount root tmpfs";
    if (mount("st-root", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=512,mode=0755") !=
        0) {
        return -1;
    }
    for (size_t i = 0; i < sizeof(ro_trees) / sizeof(ro_trees[0]); i++) {
        if (expose(root, ro_trees[i], 0, what) != 0) {
            goto fail;
        }
    }
    *what = "mkdir /etc";
    if (path_join(path, sizeof(path), root, "/etc") != 0 || mkdir(path, 0755) != 0) {
        goto fail;
    }
    for (size_t i = 0; i < c->netc; i++) {
        if (expose(root, c->etc[i], 0, what) != 0) {
            goto fail;
        }
    }
    *what = "mkdir /dev";
    if (path_join(path, sizeof(path), root, "/dev") != 0 || mkdir(path, 0755) != 0) {
        goto fail;
    }
    for (size_t i = 0; i < sizeof(dev_nodes) / sizeof(dev_nodes[0]); i++) {
        if (expose(root, dev_nodes[i], 1, what) != 0) {
            goto fail;
        }
    }
    *what = "mkdir /box";
    if (path_join(path, sizeof(path), root, "/box") != 0 || mkdir(path, 0755) != 0) {
        goto fail;
    }
    *what = "mount box tmpfs";
    if (mount("st-box", path, "tmpfs", MS_NOSUID | MS_NODEV, c->box_opts) != 0) {
        goto fail;
    }
    if (write_box_files(c, path, what) != 0) {
        goto fail;
    }
    *what = "symlink /tmp";
    if (path_join(path, sizeof(path), root, "/tmp") != 0 || symlink("box", path) != 0) {
        goto fail;
    }
    *what = "read-only root";
    if (mount(NULL, root, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) !=
        0) {
        goto fail;
    }
    *what = "pivot_root";
    if (chdir(root) != 0 || syscall(SYS_pivot_root, ".", ".") != 0) {
        goto fail;
    }
    /* The old root now sits on top of the new one; detach it and everything under it. */
    *what = "detach old root";
    if (umount2(".", MNT_DETACH) != 0 || chdir("/box") != 0) {
        return -1; /* past pivot_root: no way back to the host box */
    }
    return 0;

fail:;
    int e = errno;
    (void)chdir("/");
    (void)umount2(root, MNT_DETACH);
    errno = e;
    return 1;
}

static int ll_rule(int rfd, const char *path, uint64_t access)
{
    struct landlock_path_beneath_attr pb;
    struct stat st;
    int fd = open(path, O_PATH | O_CLOEXEC);

    if (fd < 0) {
        return errno == ENOENT ? 0 : -1;
    }
    if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) {
        access &= LL_FILE_RIGHTS;
    }
    memset(&pb, 0, sizeof(pb));
    pb.allowed_access = access;
    pb.parent_fd = fd;
    long rc = syscall(SYS_landlock_add_rule, rfd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
    (void)close(fd);
    return rc == 0 ? 0 : -1;
}

/* Restricts W to its box (all rights), read/exec of the allowlisted trees, the /dev nodes;
 * no TCP (ABI 4), no signals or abstract sockets outside (ABI 6). Returns the layers set. */
static uint32_t apply_landlock(const struct st_sandbox_ctx *c, const char *box)
{
    struct ll_ruleset_attr attr;
    size_t attr_size = 8;
    uint32_t layers = 0;
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

    if (abi < 1) {
        return 0;
    }
    memset(&attr, 0, sizeof(attr));
    attr.handled_access_fs = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0..12 */
    if (abi >= 2) {
        attr.handled_access_fs |= LANDLOCK_ACCESS_FS_REFER;
    }
    if (abi >= 3) {
        attr.handled_access_fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
    }
    if (abi >= 5) {
        attr.handled_access_fs |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
    }
    if (!(c->want & ST_SANDBOX_L_LANDLOCK_FS)) {
        attr.handled_access_fs = 0;
    }
    if (abi >= 4 && (c->want & ST_SANDBOX_L_LANDLOCK_NET)) {
        attr.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
        attr_size = 16;
    }
    if (abi >= 6 && (c->want & ST_SANDBOX_L_LANDLOCK_SCOPE)) {
        attr.scoped = LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL;
        attr_size = 24;
    }
    if (attr.handled_access_fs == 0 && attr.handled_access_net == 0 && attr.scoped == 0) {
        return 0;
    }
    int rfd = (int)syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
    if (rfd < 0) {
        return 0;
    }
    uint64_t fs = attr.handled_access_fs;
    int bad = 0;
    if (fs != 0) {
        bad |= ll_rule(rfd, box, fs);
        for (size_t i = 0; i < sizeof(ro_trees) / sizeof(ro_trees[0]); i++) {
            bad |= ll_rule(rfd, ro_trees[i], fs & LL_READ_RIGHTS);
        }
        for (size_t i = 0; i < c->netc; i++) {
            bad |= ll_rule(rfd, c->etc[i], fs & LL_READ_RIGHTS);
        }
        for (size_t i = 0; i < sizeof(dev_nodes) / sizeof(dev_nodes[0]); i++) {
            uint64_t a = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_IOCTL_DEV;
            if (i < 3) {
                a |= LANDLOCK_ACCESS_FS_WRITE_FILE; /* null, zero, full */
            }
            bad |= ll_rule(rfd, dev_nodes[i], fs & a);
        }
    }
    if (bad == 0 && syscall(SYS_landlock_restrict_self, rfd, 0) == 0) {
        layers |= fs != 0 ? ST_SANDBOX_L_LANDLOCK_FS : 0;
        layers |= attr.handled_access_net != 0 ? ST_SANDBOX_L_LANDLOCK_NET : 0;
        layers |= attr.scoped != 0 ? ST_SANDBOX_L_LANDLOCK_SCOPE : 0;
    }
    (void)close(rfd);
    return layers;
}

static int set_limit(int res, uint64_t soft, uint64_t hard)
{
    struct rlimit rl = {.rlim_cur = (rlim_t)soft, .rlim_max = (rlim_t)hard};

    return setrlimit(res, &rl);
}

static void exec_step(const struct st_sandbox_ctx *c, int k, const char *const *argv,
                      char *const *envp)
{
    char path[ST_SANDBOX_MAX_ARG + 16];
    static const char *const dirs[] = {"/usr/bin/", "/bin/"};
    int err = ENOENT;

    if (strchr(argv[0], '/') != NULL) {
        execve(argv[0], (char *const *)argv, envp);
        err = errno;
    } else {
        for (size_t i = 0; i < 2; i++) {
            if (path_join(path, sizeof(path), dirs[i], argv[0]) != 0) {
                err = ENAMETOOLONG;
                break;
            }
            execve(path, (char *const *)argv, envp);
            if (errno != ENOENT) {
                err = errno;
            }
        }
    }
    report(c, ST_SANDBOX_MSG_EXEC_FAIL, k, err, "execve");
    _exit(127);
}

/* W: the step's own process, from fork to exec. Never returns. */
static void run_worker(const struct st_sandbox_ctx *c, int k, pid_t sup)
{
    const struct st_sandbox_step *step = &c->job->steps[k];
    const struct st_sandbox_limits *lim = step->limits ? step->limits : &c->cfg->limits;
    int last = (size_t)k + 1 == c->job->nsteps;
    uint32_t layers = 0;
    const char *what = "stdio";

    (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != sup) {
        _exit(127);
    }
    int in = last ? c->stdin_fd : open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (in < 0 || dup2(in, 0) < 0 || lseek(0, 0, SEEK_SET) < 0 || dup2(c->out_w[k], 1) < 0 ||
        dup2(c->err_w[k], 2) < 0) {
        goto fail;
    }
    int keep = c->report_w;
    close_except(&keep, 1);
    what = "setpgid";
    if (setpgid(0, 0) != 0) {
        goto fail;
    }
    layers |= ST_SANDBOX_L_PGROUP;

    if (c->drop_uid) {
        what = "drop privilege";
        if (syscall(SYS_setgroups, 0, NULL) != 0 ||
            syscall(SYS_setresgid, c->run_gid, c->run_gid, c->run_gid) != 0 ||
            syscall(SYS_setresuid, c->run_uid, c->run_uid, c->run_uid) != 0) {
            goto fail;
        }
        layers |= ST_SANDBOX_L_NOPRIV;
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL); /* a credential change cleared it */
        if (getppid() != sup) {
            _exit(127);
        }
    }
    (void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    if (c->ns_flags & CLONE_NEWUSER) {
        /* uid 0 of the namespace, but exec grants it no capabilities. */
        what = "securebits";
        if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED) != 0) {
            goto fail;
        }
        layers |= ST_SANDBOX_L_NOPRIV;
    }
    what = "no_new_privs";
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        goto fail;
    }
    layers |= ST_SANDBOX_L_NNP;
    layers |= apply_landlock(c, c->pivoted ? "/box" : c->host_box);

    what = "rlimits";
    if (set_limit(RLIMIT_CORE, 0, 0) != 0 ||
        set_limit(RLIMIT_CPU, lim->cpu_s, (uint64_t)lim->cpu_s + 1) != 0 ||
        set_limit(RLIMIT_AS, lim->as_bytes, lim->as_bytes) != 0 ||
        set_limit(RLIMIT_FSIZE, lim->fsize_bytes, lim->fsize_bytes) != 0 ||
        set_limit(RLIMIT_NOFILE, lim->nofile, lim->nofile) != 0 ||
        set_limit(RLIMIT_NPROC, lim->nproc, lim->nproc) != 0) {
        goto fail;
    }
    layers |= ST_SANDBOX_L_RLIMITS;
    if (c->seccomp.filter != NULL) {
        what = "seccomp";
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &c->seccomp, 0, 0) != 0) {
            goto fail;
        }
        layers |= ST_SANDBOX_L_SECCOMP;
    }
    report_u(c, ST_SANDBOX_MSG_READY, k, layers, 0, 0);
    exec_step(c, k, step->argv, c->envp[c->pivoted ? 0 : 1]);

fail:
    report(c, ST_SANDBOX_MSG_EXEC_FAIL, k, errno, what);
    _exit(127);
}

/* The running step's W, which is also its process group, in S; 0 between steps. */
static volatile sig_atomic_t g_step_pgid;
/* Set in S once P's deadline passed: no further step starts. */
static volatile sig_atomic_t g_deadline;

/* S's SIGUSR1 handler: P's wall-clock deadline passed (no pid namespace to kill instead). */
static void on_deadline(int sig)
{
    pid_t g = (pid_t)g_step_pgid;

    (void)sig;
    g_deadline = 1;
    if (g > 0) {
        (void)kill(-g, SIGKILL);
    }
}

/*
 * Waits for W to exit, kills the rest of its process group while W is an unreaped zombie (so the
 * group id cannot have been reused), then reaps W and every other child S has (orphans adopted
 * by S as init or subreaper) until none is left. Returns W's wait status.
 */
static int finish_step(pid_t w)
{
    int st = 0;

    for (;;) {
        siginfo_t si;
        memset(&si, 0, sizeof(si));
        if (waitid(P_ALL, 0, &si, WEXITED | WNOWAIT) != 0) {
            if (errno == EINTR) {
                continue;
            }
            break;
        }
        if (si.si_pid == w) {
            break;
        }
        (void)waitpid(si.si_pid, NULL, 0); /* an orphan: collect it and keep waiting */
    }
    (void)kill(-w, SIGKILL);
    g_step_pgid = 0;
    while (waitpid(w, &st, 0) < 0 && errno == EINTR) {
    }
    if (getpid() == 1) {
        (void)kill(-1, SIGKILL); /* as init: also whatever left the group */
    }
    while (waitpid(-1, NULL, 0) > 0 || errno == EINTR) {
    }
    return st;
}

/* S's first steps: signals, descriptors, P's go-ahead, identity, session, stdio. Exits on
 * failure (after reporting it when the report pipe is usable). */
static void supervisor_enter(struct st_sandbox_ctx *c)
{
    char go;

    reset_signals();
    (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
    int ok = fd_above_stdio(&c->report_w) == 0 && fd_above_stdio(&c->sync_r) == 0 &&
             fd_above_stdio(&c->stdin_fd) == 0;
    for (size_t k = 0; k < c->job->nsteps; k++) {
        ok = ok && fd_above_stdio(&c->out_w[k]) == 0 && fd_above_stdio(&c->err_w[k]) == 0;
    }
    (void)close(c->sync_w); /* so that P's death shows as a hang-up on sync_r */
    (void)close(c->report_r);
    int keep[3 + 2 * ST_SANDBOX_MAX_STEPS];
    size_t nkeep = 0;
    keep[nkeep++] = c->report_w;
    keep[nkeep++] = c->sync_r;
    keep[nkeep++] = c->stdin_fd;
    for (size_t k = 0; k < c->job->nsteps; k++) {
        keep[nkeep++] = c->out_w[k];
        keep[nkeep++] = c->err_w[k];
    }
    if (ok) {
        close_except(keep, nkeep); /* P's other descriptors (listeners, files) stay with P */
    }
    if (!ok || read(c->sync_r, &go, 1) != 1) {
        _exit(1); /* P is gone or could not map our ids */
    }
    if (c->ns_flags & CLONE_NEWUSER) {
        if (c->root_caller) {
            (void)syscall(SYS_setgroups, 0, NULL); /* shed root's supplementary groups */
        }
        if (syscall(SYS_setresgid, 0, 0, 0) != 0 || syscall(SYS_setresuid, 0, 0, 0) != 0) {
            report(c, ST_SANDBOX_MSG_SETUP_FAIL, 0, errno, "become root of the user namespace");
            _exit(1);
        }
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        struct pollfd pf = {.fd = c->sync_r, .events = POLLIN};
        if (poll(&pf, 1, 0) > 0 && (pf.revents & (POLLHUP | POLLIN))) {
            _exit(1); /* P died before the death signal was set again */
        }
    }
    (void)prctl(PR_SET_DUMPABLE, 0);
    (void)setsid(); /* off P's terminal and out of P's group */
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_deadline;
    (void)sigaction(SIGUSR1, &sa, NULL);
    int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (nul < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0 || dup2(nul, 2) < 0) {
        report(c, ST_SANDBOX_MSG_SETUP_FAIL, 0, errno, "stdio to /dev/null");
        _exit(1);
    }
    if (nul > 2) {
        (void)close(nul);
    }
    if (c->ns_flags & CLONE_NEWUTS) {
        (void)sethostname("st-sandbox", 10);
    }
    if (!(c->ns_flags & CLONE_NEWPID)) {
        (void)prctl(PR_SET_CHILD_SUBREAPER, 1);
    }
}

/* Pivots into the minimal tree, or falls back to the host box; returns the layers set. */
static uint32_t supervisor_tree(struct st_sandbox_ctx *c)
{
    uint32_t layers = 0;
    const char *what = "";

    if (c->ns_flags & CLONE_NEWNS) {
        struct stat st;
        const char *root = lstat("/tmp", &st) == 0 && S_ISDIR(st.st_mode) ? "/tmp" : "/mnt";
        int rc = setup_pivot(c, root, &what);
        if (rc == 0) {
            c->pivoted = 1;
            layers |= ST_SANDBOX_L_PIVOT;
        } else if (rc < 0) {
            report(c, ST_SANDBOX_MSG_SETUP_FAIL, 0, errno, what);
            _exit(1);
        } else {
            report(c, ST_SANDBOX_MSG_NOTE, 0, errno, what);
        }
    }
    if (!c->pivoted && chdir(c->host_box) != 0) {
        report(c, ST_SANDBOX_MSG_SETUP_FAIL, 0, errno, "chdir to the box");
        _exit(1);
    }
    return layers;
}

/* What W starts from: S's context, the step, S's pid. */
struct worker_arg {
    const struct st_sandbox_ctx *c;
    int k;
    pid_t sup;
};

static int worker_body(void *arg)
{
    const struct worker_arg *a = arg;
    run_worker(a->c, a->k, a->sup);
    return 127;
}

/* S: the supervisor, and init of the pid namespace when there is one. Never returns. */
static void run_supervisor(struct st_sandbox_ctx *c)
{
    supervisor_enter(c);
    report_u(c, ST_SANDBOX_MSG_LAYERS, 0, supervisor_tree(c), 0, 0);

    pid_t self = getpid();
    for (size_t k = 0; k < c->job->nsteps && !g_deadline; k++) {
        struct worker_arg wa = {.c = c, .k = (int)k, .sup = self};
        pid_t w = st_sandbox_clone_body(0, worker_body, &wa);
        if (w < 0) {
            report(c, ST_SANDBOX_MSG_SETUP_FAIL, (int)k, errno, "fork");
            _exit(1);
        }
        /* Also set in W: whichever runs first, the group exists before anything can signal it. */
        (void)setpgid(w, w);
        g_step_pgid = w;
        if (g_deadline) {
            (void)kill(-w, SIGKILL); /* the deadline passed while the step was being forked */
        }
        report_u(c, ST_SANDBOX_MSG_STEP_START, (int)k, 0, w, 0);
        (void)close(c->out_w[k]);
        (void)close(c->err_w[k]);
        int st = finish_step(w);
        report_u(c, ST_SANDBOX_MSG_STEP_END, (int)k, 0, w, st);
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
            break;
        }
    }
    _exit(0);
}

int st_sandbox_supervisor_body(void *arg)
{
    run_supervisor(arg);
    return 1;
}
