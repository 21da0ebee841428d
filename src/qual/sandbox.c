/*
 * Sandboxed runner. The caller (P) makes a host box directory, builds a seccomp program, and
 * clones a supervisor (S) into new namespaces (user, pid, net, mount, ipc, uts: as many as the
 * kernel grants, best first). S is init of the pid namespace when there is one: it pivots into a
 * minimal read-only tree with a tmpfs box, then forks one worker (W) per step, which drops
 * privilege, applies Landlock, rlimits and seccomp, and execs the step. S and W report to P
 * through a close-on-exec pipe of fixed-size records; P enforces wall-clock limits with poll and
 * SIGKILLs the whole sandbox. Between clone and exec, S and W only make system calls: no malloc,
 * no stdio, no locks, nothing that reads the thread id glibc cached for P's thread.
 * Protocol and states: docs/internals/sandbox.md.
 */
#include "qual/sandbox.h"

#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/securebits.h>
#include <linux/seccomp.h>
#include <seccomp.h>

#include "base/clock.h"
#include "base/proc.h"
#include "base/xalloc.h"

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

#define NS_FLAGS_ALL                                                                               \
    (CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS)
#define MAX_ETC 24
#define ETC_PATH 80
#define ASK_GRACE_MS 1000  /* after SIGUSR1, for the supervisor to kill the step itself */
#define EXIT_GRACE_MS 3000 /* after a kill, for the supervisor to be gone */
#define DRAIN_GRACE_MS 300 /* after the supervisor, for output pipes to reach EOF */
#define READ_CHUNK 16384

/* Records from S and W to P: one write(2) each, smaller than PIPE_BUF, so never torn. */
enum msg_kind {
    MSG_SETUP_FAIL = 1, /* S could not build the sandbox: text, err */
    MSG_NOTE,           /* S fell back from a layer: text, err */
    MSG_LAYERS,         /* S: layers it set up */
    MSG_STEP_START,     /* S forked W for step: pid (S's view) */
    MSG_READY,          /* W is about to exec: layers it applied */
    MSG_EXEC_FAIL,      /* W failed before or at exec: text, err */
    MSG_STEP_END,       /* S reaped W: status (wait status) */
};

struct msg {
    int32_t kind;
    int32_t step;
    int32_t err;    /* errno */
    int32_t status; /* wait status for MSG_STEP_END */
    uint32_t layers;
    int32_t pid;
    char text[104];
};
_Static_assert(sizeof(struct msg) == 128 && sizeof(struct msg) <= PIPE_BUF,
               "report records must be written whole");

/* Everything S and W need, prepared by P before clone (they get a copy-on-write copy). */
struct ctx {
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
    char etc[MAX_ETC][ETC_PATH]; /* /etc entries shown to the program */
    size_t netc;
    char env_home[2][300]; /* [0] pivot mode, [1] cwd mode */
    char env_tmp[2][300];
    char *envp[2][5];
    /* Set in S at run time. */
    int pivoted;
};

static const char *const ro_trees[] = {"/usr",   "/bin",   "/sbin",  "/lib",
                                       "/lib32", "/lib64", "/libx32"};
static const char *const etc_names[] = {"ld.so.cache",  "ld.so.conf",   "ld.so.conf.d",
                                        "alternatives", "localtime",    "passwd",
                                        "group",        "nsswitch.conf"};
static const char *const dev_nodes[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
                                        "/dev/urandom"};

/* ---- Helpers safe between clone and exec: system calls and plain memory only. ---- */

static size_t cstr_copy(char *dst, size_t cap, const char *src)
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

static void report(const struct ctx *c, int kind, int step, int err, const char *text)
{
    struct msg m;

    memset(&m, 0, sizeof(m));
    m.kind = kind;
    m.step = step;
    m.err = err;
    if (text != NULL) {
        cstr_copy(m.text, sizeof(m.text), text);
    }
    write_full(c->report_w, &m, sizeof(m));
}

static void report_u(const struct ctx *c, int kind, int step, uint32_t layers, int pid, int status)
{
    struct msg m;

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
static pid_t clone_body(unsigned long flags, st_proc_body_fn body, void *ctx)
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

static int write_box_files(const struct ctx *c, const char *boxdir, const char **what)
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
static int setup_pivot(struct ctx *c, const char *root, const char **what)
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
static uint32_t apply_landlock(const struct ctx *c, const char *box)
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

static void exec_step(const struct ctx *c, int k, const char *const *argv, char *const *envp)
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
    report(c, MSG_EXEC_FAIL, k, err, "execve");
    _exit(127);
}

/* W: the step's own process, from fork to exec. Never returns. */
static void run_worker(const struct ctx *c, int k, pid_t sup)
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
    report_u(c, MSG_READY, k, layers, 0, 0);
    exec_step(c, k, step->argv, c->envp[c->pivoted ? 0 : 1]);

fail:
    report(c, MSG_EXEC_FAIL, k, errno, what);
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
static void supervisor_enter(struct ctx *c)
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
            report(c, MSG_SETUP_FAIL, 0, errno, "become root of the user namespace");
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
        report(c, MSG_SETUP_FAIL, 0, errno, "stdio to /dev/null");
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
static uint32_t supervisor_tree(struct ctx *c)
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
            report(c, MSG_SETUP_FAIL, 0, errno, what);
            _exit(1);
        } else {
            report(c, MSG_NOTE, 0, errno, what);
        }
    }
    if (!c->pivoted && chdir(c->host_box) != 0) {
        report(c, MSG_SETUP_FAIL, 0, errno, "chdir to the box");
        _exit(1);
    }
    return layers;
}

/* What W starts from: S's context, the step, S's pid. */
struct worker_arg {
    const struct ctx *c;
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
static void run_supervisor(struct ctx *c)
{
    supervisor_enter(c);
    report_u(c, MSG_LAYERS, 0, supervisor_tree(c), 0, 0);

    pid_t self = getpid();
    for (size_t k = 0; k < c->job->nsteps && !g_deadline; k++) {
        struct worker_arg wa = {.c = c, .k = (int)k, .sup = self};
        pid_t w = clone_body(0, worker_body, &wa);
        if (w < 0) {
            report(c, MSG_SETUP_FAIL, (int)k, errno, "fork");
            _exit(1);
        }
        /* Also set in W: whichever runs first, the group exists before anything can signal it. */
        (void)setpgid(w, w);
        g_step_pgid = w;
        if (g_deadline) {
            (void)kill(-w, SIGKILL); /* the deadline passed while the step was being forked */
        }
        report_u(c, MSG_STEP_START, (int)k, 0, w, 0);
        (void)close(c->out_w[k]);
        (void)close(c->err_w[k]);
        int st = finish_step(w);
        report_u(c, MSG_STEP_END, (int)k, 0, w, st);
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
            break;
        }
    }
    _exit(0);
}

static int supervisor_body(void *arg)
{
    run_supervisor(arg);
    return 1;
}

/* ---- The caller's side. ---- */

static int valid_name(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > ST_SANDBOX_MAX_NAME || s[0] == '.' || strstr(s, "..") != NULL) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '_' || ch == '.' || ch == '+' || ch == '-';
        if (!ok) {
            return 0;
        }
    }
    return 1;
}

static int valid_limits(const struct st_sandbox_limits *l)
{
    return l->cpu_s > 0 && l->wall_ms > 0 && l->as_bytes > 0 && l->fsize_bytes > 0 &&
           l->nofile > 0 && l->nproc > 0;
}

static int validate(const struct st_sandbox_cfg *cfg, const struct st_sandbox_job *job, char *err,
                    size_t errlen)
{
    if (!valid_limits(&cfg->limits) || cfg->run_uid == 0 || cfg->box_bytes == 0 ||
        cfg->box_inodes == 0 || (cfg->layers_off & ~(uint32_t)ST_SANDBOX_L_OPTIONAL) != 0) {
        snprintf(err, errlen, "bad sandbox configuration");
        return -EINVAL;
    }
    if (cfg->output_cap_bytes > ST_SANDBOX_MAX_OUTPUT_CAP) {
        snprintf(err, errlen, "output cap over %u bytes", ST_SANDBOX_MAX_OUTPUT_CAP);
        return ST_ETOOBIG;
    }
    if (job->nsteps == 0 || job->steps == NULL) {
        snprintf(err, errlen, "a job needs at least one step");
        return -EINVAL;
    }
    if (job->nsteps > ST_SANDBOX_MAX_STEPS || job->nfiles > ST_SANDBOX_MAX_FILES ||
        job->stdin_len > ST_SANDBOX_MAX_STDIN_BYTES) {
        snprintf(err, errlen, "too many steps or files, or too much stdin");
        return ST_ETOOBIG;
    }
    for (size_t k = 0; k < job->nsteps; k++) {
        const struct st_sandbox_step *s = &job->steps[k];
        if (s->argv == NULL || s->argv[0] == NULL || s->argv[0][0] == '\0' ||
            (s->limits != NULL && !valid_limits(s->limits))) {
            snprintf(err, errlen, "step %zu: no argv or a zero limit", k);
            return -EINVAL;
        }
        size_t n = 0;
        while (s->argv[n] != NULL) {
            if (n >= ST_SANDBOX_MAX_ARGS || strlen(s->argv[n]) > ST_SANDBOX_MAX_ARG) {
                snprintf(err, errlen, "step %zu: argv too long", k);
                return ST_ETOOBIG;
            }
            n++;
        }
    }
    for (size_t i = 0; i < job->nfiles; i++) {
        const struct st_sandbox_file *f = &job->files[i];
        if (f->name == NULL || !valid_name(f->name) || (f->data == NULL && f->len > 0)) {
            snprintf(err, errlen, "bad box file name");
            return -EINVAL;
        }
        if (f->len > ST_SANDBOX_MAX_FILE_BYTES) {
            snprintf(err, errlen, "box file %s over %u bytes", f->name, ST_SANDBOX_MAX_FILE_BYTES);
            return ST_ETOOBIG;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(job->files[j].name, f->name) == 0) {
                snprintf(err, errlen, "box file %s named twice", f->name);
                return -EINVAL;
            }
        }
    }
    if (job->stdin_len > 0 && job->stdin_data == NULL) {
        snprintf(err, errlen, "stdin length without data");
        return -EINVAL;
    }
    return 0;
}

/* Denied with EPERM. Names this libseccomp does not know are skipped (docs/security.md). */
static const char *const seccomp_deny[] = {"ptrace",
                                           "process_vm_readv",
                                           "process_vm_writev",
                                           "mount",
                                           "umount2",
                                           "pivot_root",
                                           "chroot",
                                           "unshare",
                                           "setns",
                                           "keyctl",
                                           "add_key",
                                           "request_key",
                                           "bpf",
                                           "perf_event_open",
                                           "userfaultfd",
                                           "init_module",
                                           "finit_module",
                                           "delete_module",
                                           "kexec_load",
                                           "kexec_file_load",
                                           "reboot",
                                           "swapon",
                                           "swapoff",
                                           "acct",
                                           "quotactl",
                                           "name_to_handle_at",
                                           "open_by_handle_at",
                                           "setsid",
                                           "setpgid",
                                           "io_uring_setup",
                                           "io_uring_enter",
                                           "io_uring_register",
                                           "fsopen",
                                           "fsconfig",
                                           "fsmount",
                                           "fspick",
                                           "move_mount",
                                           "open_tree",
                                           "mount_setattr",
                                           "syslog",
                                           "lookup_dcookie",
                                           "iopl",
                                           "ioperm",
                                           "vhangup",
                                           "fanotify_init",
                                           "pidfd_getfd",
                                           "quotactl_fd"};
static const unsigned long seccomp_ns_flags[] = {CLONE_NEWUSER,  CLONE_NEWNS,  CLONE_NEWPID,
                                                 CLONE_NEWNET,   CLONE_NEWIPC, CLONE_NEWUTS,
                                                 CLONE_NEWCGROUP};

/* Adds every rule to sc; returns 0 or libseccomp's negated errno, *what naming the rule. */
static int add_seccomp_rules(scmp_filter_ctx sc, const char **what)
{
    int rc = 0;

    *what = "deny list";
    for (size_t i = 0; i < sizeof(seccomp_deny) / sizeof(seccomp_deny[0]); i++) {
        int nr = seccomp_syscall_resolve_name(seccomp_deny[i]);
        if (nr == __NR_SCMP_ERROR) {
            continue;
        }
        rc = seccomp_rule_add(sc, SCMP_ACT_ERRNO(EPERM), nr, 0);
        if (rc != 0) {
            return rc;
        }
    }
    *what = "socket rules";
    rc = seccomp_rule_add(sc, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 1,
                          SCMP_A0(SCMP_CMP_NE, AF_UNIX, 0));
    if (rc == 0) {
        rc = seccomp_rule_add(sc, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socketpair), 1,
                              SCMP_A0(SCMP_CMP_NE, AF_UNIX, 0));
    }
    if (rc == 0) {
        /* kill(-1): compared on the low 32 bits, however the caller extended the int. */
        rc = seccomp_rule_add(sc, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(kill), 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, 0xffffffffu));
    }
    for (size_t i = 0; rc == 0 && i < sizeof(seccomp_ns_flags) / sizeof(seccomp_ns_flags[0]); i++) {
        rc =
            seccomp_rule_add(sc, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, seccomp_ns_flags[i], seccomp_ns_flags[i]));
    }
    if (rc == 0) {
        /* clone3 passes its flags in memory the filter cannot read: make libc fall back. */
        rc = seccomp_rule_add(sc, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    }
    return rc;
}

/* The seccomp program: sockets other than AF_UNIX, namespaces, mounts, tracing, kernel keys,
 * modules, io_uring (which could open sockets past the filter), session changes that would
 * escape the group kill, and kill(-1). */
static int build_seccomp(struct sock_fprog *prog, char *note, size_t notelen)
{
    scmp_filter_ctx sc = seccomp_init(SCMP_ACT_ALLOW);
    int rc = 0, fd = -1;
    const char *what = "seccomp_init";
    struct stat st;

    if (sc == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    rc = add_seccomp_rules(sc, &what);
    if (rc != 0) {
        goto out;
    }
    what = "export";
    fd = memfd_create("st-seccomp", MFD_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
        goto out;
    }
    rc = seccomp_export_bpf(sc, fd);
    if (rc != 0) {
        goto out;
    }
    if (fstat(fd, &st) != 0 || st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) != 0 ||
        st.st_size > 65536) {
        rc = -EIO;
        goto out;
    }
    struct sock_filter *f = st_xmalloc((size_t)st.st_size);
    if (pread(fd, f, (size_t)st.st_size, 0) != st.st_size) {
        free(f);
        rc = -EIO;
        goto out;
    }
    prog->filter = f;
    prog->len = (unsigned short)((size_t)st.st_size / sizeof(struct sock_filter));
out:
    if (rc != 0) {
        snprintf(note, notelen, "seccomp unavailable (%s: %s)", what, st_strerror(rc));
    }
    if (fd >= 0) {
        (void)close(fd);
    }
    seccomp_release(sc);
    return rc;
}

/* The /etc entries shown to programs: the loader's, a few lookups, python3*. */
static void list_etc(struct ctx *c)
{
    for (size_t i = 0; i < sizeof(etc_names) / sizeof(etc_names[0]); i++) {
        snprintf(c->etc[c->netc++], ETC_PATH, "/etc/%s", etc_names[i]);
    }
    DIR *d = opendir("/etc");
    if (d == NULL) {
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL && c->netc < MAX_ETC) {
        if (strncmp(e->d_name, "python3", 7) == 0 && strlen(e->d_name) < ETC_PATH - 6) {
            snprintf(c->etc[c->netc++], ETC_PATH, "/etc/%s", e->d_name);
        }
    }
    (void)closedir(d);
}

static void set_env(struct ctx *c)
{
    static char path[] = "PATH=/usr/bin:/bin", lang[] = "LANG=C.UTF-8";

    snprintf(c->env_home[0], sizeof(c->env_home[0]), "HOME=/box");
    snprintf(c->env_tmp[0], sizeof(c->env_tmp[0]), "TMPDIR=/box");
    snprintf(c->env_home[1], sizeof(c->env_home[1]), "HOME=%s", c->host_box);
    snprintf(c->env_tmp[1], sizeof(c->env_tmp[1]), "TMPDIR=%s", c->host_box);
    for (int m = 0; m < 2; m++) {
        c->envp[m][0] = path;
        c->envp[m][1] = c->env_home[m];
        c->envp[m][2] = lang;
        c->envp[m][3] = c->env_tmp[m];
        c->envp[m][4] = NULL;
    }
}

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
static int write_id_maps(const struct ctx *c, pid_t pid)
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
static void prepare_attempt(struct ctx *c, unsigned long flags)
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
static int start_supervisor(struct ctx *c, int sync_w, pid_t *pid, char *note, size_t notelen)
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
        pid_t p = clone_body(attempts[a], supervisor_body, c);
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

/* Opens directory n under dfd for reading, never through a symlink; a directory the program
 * made unreadable is given 0700 first, through its O_PATH descriptor (fchmodat would follow a
 * link swapped in after the check). Returns the descriptor or a negated errno. */
static int open_dir_nofollow(int dfd, const char *n)
{
    int pfd = openat(dfd, n, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

    if (pfd < 0) {
        return -errno;
    }
    int fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 && errno == EACCES) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/fd/%d", pfd);
        (void)chmod(path, 0700);
        fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    int rc = fd >= 0 ? fd : -errno;
    (void)close(pfd);
    return rc;
}

/* Removes the entries of directory dfd. Directories deeper than 64 levels are first moved up
 * to the top (rootfd), so the depth of recursion and of open descriptors stays bounded. */
static int rm_contents(int dfd, int rootfd, int depth, unsigned *moved)
{
    int again = 1, rc = 0;

    /* Passes repeat only after one removed a directory, so they end: nothing adds entries. */
    while (again) {
        again = 0;
        int dup = fcntl(dfd, F_DUPFD_CLOEXEC, 0);
        DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
        if (d == NULL) {
            if (dup >= 0) {
                (void)close(dup);
            }
            return -errno;
        }
        rewinddir(d); /* the duplicate shares its offset with dfd: at the end after a pass */
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            const char *n = e->d_name;
            struct stat st;
            if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0) {
                continue;
            }
            if (fstatat(dfd, n, &st, AT_SYMLINK_NOFOLLOW) != 0) {
                continue;
            }
            if (!S_ISDIR(st.st_mode)) {
                if (unlinkat(dfd, n, 0) != 0 && errno != ENOENT) {
                    rc = -errno;
                }
                continue;
            }
            if (depth >= 64) {
                char up[32];
                snprintf(up, sizeof(up), ".st-up-%u", (*moved)++);
                if (renameat(dfd, n, rootfd, up) != 0) {
                    rc = -errno;
                }
                continue;
            }
            int sub = open_dir_nofollow(dfd, n);
            if (sub < 0) {
                rc = sub;
                continue;
            }
            int r = rm_contents(sub, rootfd, depth + 1, moved);
            (void)close(sub);
            if (r != 0) {
                rc = r;
            }
            if (unlinkat(dfd, n, AT_REMOVEDIR) == 0) {
                again = 1;
            } else if (errno != ENOENT) {
                rc = -errno;
            }
        }
        (void)closedir(d);
        if (depth > 0) {
            break;
        }
    }
    return rc;
}

static int rm_box(const char *path)
{
    unsigned moved = 0;
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

    if (dfd < 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    (void)fchmod(dfd, 0700);
    int rc = rm_contents(dfd, dfd, 0, &moved);
    (void)close(dfd);
    if (rmdir(path) != 0) {
        return rc != 0 ? rc : -errno;
    }
    return 0;
}

/* Makes the host box and writes the job's files into it (the fallback when there is no pivot;
 * in pivot mode S writes them again into its tmpfs box). */
static int make_box(struct ctx *c, const char *parent, char *err, size_t errlen)
{
    int n = snprintf(c->host_box, sizeof(c->host_box), "%s/st-box-XXXXXX", parent);

    if (n < 0 || (size_t)n >= sizeof(c->host_box)) {
        snprintf(err, errlen, "box parent path too long");
        return ST_ETOOBIG;
    }
    if (mkdtemp(c->host_box) == NULL) {
        int rc = -errno;
        snprintf(err, errlen, "mkdtemp under %s: %s", parent, st_strerror(rc));
        c->host_box[0] = '\0';
        return rc;
    }
    int dfd = open(c->host_box, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) {
        int rc = -errno;
        snprintf(err, errlen, "open box: %s", st_strerror(rc));
        return rc;
    }
    int rc = 0;
    if (c->root_caller && fchown(dfd, c->run_uid, c->run_gid) != 0) {
        rc = -errno;
    }
    for (size_t i = 0; rc == 0 && i < c->job->nfiles; i++) {
        const struct st_sandbox_file *f = &c->job->files[i];
        int fd = openat(dfd, f->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0) {
            rc = -errno;
            break;
        }
        size_t off = 0;
        while (rc == 0 && off < f->len) {
            ssize_t w = write(fd, (const char *)f->data + off, f->len - off);
            if (w < 0 && errno != EINTR) {
                rc = -errno;
            } else if (w > 0) {
                off += (size_t)w;
            }
        }
        if (rc == 0 && c->root_caller && fchown(fd, c->run_uid, c->run_gid) != 0) {
            rc = -errno;
        }
        (void)close(fd);
    }
    (void)close(dfd);
    if (rc != 0) {
        snprintf(err, errlen, "write box files: %s", st_strerror(rc));
    }
    return rc;
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
    char rbuf[sizeof(struct msg) * 8];
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
static int handle_msg(const struct st_sandbox_job *job, const struct msg *m, struct watch *w,
                      struct st_sandbox_result *out)
{
    char text[sizeof(m->text) + 1];
    int step = m->step;

    if (step < 0 || (size_t)step >= job->nsteps) {
        return 0; /* not ours to believe */
    }
    memcpy(text, m->text, sizeof(m->text));
    text[sizeof(m->text)] = '\0';
    switch (m->kind) {
    case MSG_SETUP_FAIL:
        w->setup_failed = 1;
        add_error(out, "sandbox set-up: %s: %s", text, st_strerror(-m->err));
        break;
    case MSG_NOTE:
        snprintf(out->note, sizeof(out->note), "no pivot_root (%s: %s): the box is on the host",
                 text, st_strerror(-m->err));
        break;
    case MSG_LAYERS:
        w->layers |= m->layers;
        break;
    case MSG_STEP_START:
        w->cur = step;
        out->steps_run = (uint32_t)step + 1;
        return 1;
    case MSG_READY:
        w->w_layers = m->layers;
        break;
    case MSG_EXEC_FAIL:
        w->setup_failed = 1;
        add_error(out, "step %d (%s): %s: %s", step, job->steps[step].argv[0], text,
                  st_strerror(-m->err));
        break;
    case MSG_STEP_END:
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
            for (; w->rlen - off >= sizeof(struct msg); off += sizeof(struct msg)) {
                struct msg m;
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

static void ctx_init(struct ctx *c, const struct st_sandbox_cfg *cfg,
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
static void ctx_release(struct ctx *c, struct st_sandbox_result *out)
{
    close_fd(&c->report_w);
    close_fd(&c->sync_r);
    close_fd(&c->stdin_fd);
    for (size_t k = 0; k < ST_SANDBOX_MAX_STEPS; k++) {
        close_fd(&c->out_w[k]);
        close_fd(&c->err_w[k]);
    }
    if (c->host_box[0] != '\0') {
        int r = rm_box(c->host_box);
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
static int open_channels(struct ctx *c, int *out_r)
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
static void collect(const struct ctx *c, pid_t sup, uint64_t t0, const struct watch *w, int *out_r,
                    struct tail *tails, struct st_sandbox_result *out)
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
    struct ctx *c = st_xcalloc(1, sizeof(*c));
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
    rc = validate(cfg, job, out->error, sizeof(out->error));
    if (rc != 0) {
        goto out;
    }
    if ((c->want & ST_SANDBOX_L_SECCOMP) && build_seccomp(&c->seccomp, note, sizeof(note)) != 0) {
        snprintf(out->note, sizeof(out->note), "%s", note);
    }
    note[0] = '\0';
    list_etc(c);
    rc = make_box(c, box_parent(cfg), out->error, sizeof(out->error));
    cstr_copy(out->box, sizeof(out->box), c->host_box);
    if (rc != 0) {
        goto out;
    }
    set_env(c);

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

/* ---- Configuration, programs, names. ---- */

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

void st_sandbox_limits_compile(struct st_sandbox_limits *lim)
{
    lim->cpu_s = 20;
    lim->wall_ms = 30000;
    lim->as_bytes = 2ull << 30;
    lim->fsize_bytes = 64ull << 20;
    lim->nofile = 128;
    lim->nproc = 32;
}

static const char *const argv_python[] = {"python3", "main.py", NULL};
static const char *const argv_gcc[] = {"gcc", "-O1", "-o", "prog", "main.c", NULL};
static const char *const argv_prog[] = {"./prog", NULL};

void st_sandbox_prog_python(struct st_sandbox_prog *p, const char *src, size_t len)
{
    memset(p, 0, sizeof(*p));
    p->file.name = "main.py";
    p->file.data = src;
    p->file.len = len;
    p->steps[0].argv = argv_python;
    p->job.files = &p->file;
    p->job.nfiles = 1;
    p->job.steps = p->steps;
    p->job.nsteps = 1;
}

void st_sandbox_prog_c(struct st_sandbox_prog *p, const char *src, size_t len,
                       const struct st_sandbox_limits *compile)
{
    memset(p, 0, sizeof(*p));
    p->file.name = "main.c";
    p->file.data = src;
    p->file.len = len;
    if (compile != NULL) {
        p->compile = *compile;
    } else {
        st_sandbox_limits_compile(&p->compile);
    }
    p->steps[0].argv = argv_gcc;
    p->steps[0].limits = &p->compile;
    p->steps[1].argv = argv_prog;
    p->job.files = &p->file;
    p->job.nfiles = 1;
    p->job.steps = p->steps;
    p->job.nsteps = 2;
}

const char *st_sandbox_verdict_name(enum st_sandbox_verdict v)
{
    switch (v) {
    case ST_SANDBOX_PASS:
        return "pass";
    case ST_SANDBOX_FAIL_EXIT:
        return "exit";
    case ST_SANDBOX_FAIL_SIGNAL:
        return "signal";
    case ST_SANDBOX_FAIL_TIMEOUT:
        return "timeout";
    case ST_SANDBOX_FAIL_BUILD:
        return "build";
    case ST_SANDBOX_FAIL_SETUP:
        return "setup";
    }
    return "unknown";
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

/* ---- Code blocks in model answers. ---- */

/* Returns the length of the line starting at p (without its '\n'). */
static size_t line_len(const char *p, const char *end)
{
    const char *q = memchr(p, '\n', (size_t)(end - p));

    return q != NULL ? (size_t)(q - p) : (size_t)(end - p);
}

/* If line[0..n) opens or closes a fence, returns its run length and sets *ch; else 0. */
static size_t fence_run(const char *line, size_t n, char *ch, size_t *after)
{
    size_t i = 0, run = 0;

    while (i < n && i < 3 && line[i] == ' ') {
        i++;
    }
    if (i >= n || (line[i] != '`' && line[i] != '~')) {
        return 0;
    }
    *ch = line[i];
    while (i + run < n && line[i + run] == *ch) {
        run++;
    }
    if (run < 3) {
        return 0;
    }
    *after = i + run;
    return run;
}

static int tag_fits(const char *tag, size_t n, enum st_sandbox_lang lang)
{
    static const char *const py[] = {"python", "py", "python3", "", NULL};
    static const char *const cc[] = {"c", "", NULL};
    const char *const *list = lang == ST_SANDBOX_LANG_PYTHON ? py : cc;

    for (size_t i = 0; list[i] != NULL; i++) {
        if (strlen(list[i]) == n && strncasecmp(tag, list[i], n) == 0) {
            return 1;
        }
    }
    return 0;
}

int st_sandbox_extract_code(const char *answer, size_t len, enum st_sandbox_lang lang,
                            struct st_buf *out)
{
    const char *p = answer, *end = answer + len;

    st_buf_clear(out);
    if (len > ST_SANDBOX_MAX_ANSWER_BYTES) {
        return ST_ETOOBIG;
    }
    if (lang != ST_SANDBOX_LANG_PYTHON && lang != ST_SANDBOX_LANG_C) {
        return -EINVAL;
    }
    while (p < end) {
        size_t n = line_len(p, end), after = 0;
        char ch = 0;
        size_t run = fence_run(p, n, &ch, &after);
        const char *next = p + n + (p + n < end ? 1 : 0);
        if (run == 0) {
            p = next;
            continue;
        }
        /* The tag is the first word of the info string; a backtick fence's info has none. */
        const char *tag = p + after;
        size_t rest = n - after;
        while (rest > 0 && (*tag == ' ' || *tag == '\t')) {
            tag++;
            rest--;
        }
        size_t tn = 0;
        while (tn < rest && tag[tn] != ' ' && tag[tn] != '\t' && tag[tn] != '\r' &&
               tag[tn] != '{') {
            tn++;
        }
        if (ch == '`' && memchr(tag, '`', rest) != NULL) {
            p = next; /* ```x``` on one line is inline code, not a fence */
            continue;
        }
        int fits = tag_fits(tag, tn, lang);
        /* Find the closing fence: same character, at least as long, nothing but blanks after. */
        const char *body = next, *q = next, *close = NULL;
        while (q < end) {
            size_t qn = line_len(q, end), qa = 0;
            char qc = 0;
            size_t qr = fence_run(q, qn, &qc, &qa);
            int blank = 1;
            for (size_t i = qa; qr > 0 && i < qn; i++) {
                blank = blank && (q[i] == ' ' || q[i] == '\t' || q[i] == '\r');
            }
            if (qr >= run && qc == ch && blank) {
                close = q;
                break;
            }
            q += qn + (q + qn < end ? 1 : 0);
        }
        if (!fits) {
            if (close == NULL) {
                return ST_ENOTFOUND;
            }
            p = close + line_len(close, end);
            p += p < end ? 1 : 0;
            continue;
        }
        if (close == NULL) {
            return ST_EPARSE;
        }
        size_t blen = (size_t)(close - body);
        if (blen > ST_SANDBOX_MAX_CODE_BYTES) {
            return ST_ETOOBIG;
        }
        st_buf_append(out, body, blen);
        return 0;
    }
    return ST_ENOTFOUND;
}
