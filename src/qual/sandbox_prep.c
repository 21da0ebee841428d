/*
 * What the sandbox's caller (P) prepares before the clone and removes after: the job's and the
 * configuration's validation, the seccomp program (built with libseccomp and exported as BPF into
 * memory, so no library runs after the clone), the /etc entries and the environment programs see,
 * and the host box (made with the job's files; removed without following a link, however deep or
 * unreadable the program left it). Runs in P only, on the caller's thread.
 */
#include "qual/sandbox_int.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/filter.h>
#include <seccomp.h>

#include "base/xalloc.h"

/* ---- Validation. ---- */

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

int st_sandbox_validate(const struct st_sandbox_cfg *cfg, const struct st_sandbox_job *job,
                        char *err, size_t errlen)
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
int st_sandbox_build_seccomp(struct sock_fprog *prog, char *note, size_t notelen)
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

static const char *const etc_names[] = {"ld.so.cache",  "ld.so.conf",   "ld.so.conf.d",
                                        "alternatives", "localtime",    "passwd",
                                        "group",        "nsswitch.conf"};

/* The /etc entries shown to programs: the loader's, a few lookups, python3*. */
void st_sandbox_list_etc(struct st_sandbox_ctx *c)
{
    for (size_t i = 0; i < sizeof(etc_names) / sizeof(etc_names[0]); i++) {
        snprintf(c->etc[c->netc++], ST_SANDBOX_ETC_PATH, "/etc/%s", etc_names[i]);
    }
    DIR *d = opendir("/etc");
    if (d == NULL) {
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL && c->netc < ST_SANDBOX_MAX_ETC) {
        if (strncmp(e->d_name, "python3", 7) == 0 && strlen(e->d_name) < ST_SANDBOX_ETC_PATH - 6) {
            snprintf(c->etc[c->netc++], ST_SANDBOX_ETC_PATH, "/etc/%s", e->d_name);
        }
    }
    (void)closedir(d);
}

void st_sandbox_set_env(struct st_sandbox_ctx *c)
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

int st_sandbox_rm_box(const char *path)
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
int st_sandbox_make_box(struct st_sandbox_ctx *c, const char *parent, char *err, size_t errlen)
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
