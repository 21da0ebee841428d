/*
 * The arm lifecycle's children (arm_int.h), shared by the sim and command backends: a server
 * started in its own process group with its output appended to a log file, reaped without
 * blocking, its end classified from its log (out of memory, exited at once, exited), its group
 * stopped (signal, then SIGKILL), and a group an earlier runner left stopped only when /proc
 * proves it is still that group (st_arm_stop_leftover). Calls armio.c and armtext.c, no backend.
 */
#include "target/arm_int.h"

#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Collects the child when it has ended. Returns 1 when it has (now or before). */
int st_arm_reap(struct st_arm_server *s)
{
    if (s->pid <= 0 || s->reaped) {
        return s->reaped;
    }
    if (st_proc_poll(&s->proc)) {
        s->reaped = 1; /* wstatus -1: someone else reaped it (or SIGCHLD is ignored) */
        s->wstatus = s->proc.wstatus;
    }
    return s->reaped;
}

static void status_text(int wstatus, char *out, size_t cap)
{
    if (wstatus == -1) {
        snprintf(out, cap, "ended, status unknown (reaped elsewhere)");
    } else if (WIFSIGNALED(wstatus)) {
        snprintf(out, cap, "killed by signal %d (%s)", WTERMSIG(wstatus),
                 sigabbrev_np(WTERMSIG(wstatus)) ? sigabbrev_np(WTERMSIG(wstatus)) : "?");
    } else {
        snprintf(out, cap, "exit status %d", WEXITSTATUS(wstatus));
    }
}

/* How an ended child failed: OOM when its log says so, else START (before it answered) or EXIT;
 * detail quotes the log's line that says why (st_arm_exit_detail). */
enum st_arm_fail st_arm_classify_exit(struct st_arm_server *s, char *detail, size_t len)
{
    struct st_buf tail;
    char st[64], line[384];
    st_buf_init(&tail);
    st_arm_read_log(st_buf_str(&s->log_path), s->log_off, ST_ARM_LOG_TAIL_MAX, 1, &tail);
    status_text(s->wstatus, st, sizeof(st));
    enum st_arm_fail f;
    if (st_arm_oom_line(tail.data, tail.len, line, sizeof(line))) {
        f = ST_ARM_FAIL_OOM;
        snprintf(detail, len, "out of memory (%s): %s", st, line);
    } else {
        f = s->answered ? ST_ARM_FAIL_EXIT : ST_ARM_FAIL_START;
        st_arm_exit_detail(tail.data, tail.len,
                           f == ST_ARM_FAIL_START ? "exited at once," : "exited,", st, detail, len);
    }
    st_buf_release(&tail);
    return f;
}

/* State, process group and start time (clock ticks after boot) of pid from /proc. Returns 1. */
static int proc_stat(const char *pid, char *state, long *pgrp, unsigned long long *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%.20s/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        return 0;
    }
    buf[n] = '\0';
    /* pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
     * stime cutime cstime priority nice threads itrealvalue starttime: comm may hold spaces. */
    const char *rp = strrchr(buf, ')');
    long ppid = 0;
    return rp && sscanf(rp + 1,
                        " %c %ld %ld %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
                        "%*d %*d %llu",
                        state, &ppid, pgrp, start) == 4;
}

/* Live (not zombie) members of process group pgid; *leader_start gets the start time of the
 * member whose pid is pgid (0 when the leader is gone). Reads /proc, since a member that outlived
 * the leader is reparented and, under an init that does not reap, stays a zombie that
 * kill(-pgid, 0) still finds; without /proc, kill(-pgid, 0) decides. */
static int group_members(pid_t pgid, unsigned long long *leader_start)
{
    DIR *d = opendir("/proc");
    if (leader_start) {
        *leader_start = 0;
    }
    if (!d) {
        return kill(-pgid, 0) == 0;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char state = 0;
        long pgrp = 0;
        unsigned long long start = 0;
        if (!isdigit((unsigned char)e->d_name[0]) || !proc_stat(e->d_name, &state, &pgrp, &start) ||
            pgrp != pgid || state == 'Z' || state == 'X') {
            continue;
        }
        n++;
        if (leader_start && strtol(e->d_name, NULL, 10) == pgid) {
            *leader_start = start;
        }
    }
    closedir(d);
    return n;
}

static int group_alive(pid_t pgid)
{
    return group_members(pgid, NULL) > 0;
}

/* The start time of pid (clock ticks after boot), 0 when unknown. */
static unsigned long long start_ticks(pid_t pid)
{
    char name[24], state;
    long pgrp;
    unsigned long long start = 0;
    snprintf(name, sizeof(name), "%d", (int)pid);
    return proc_stat(name, &state, &pgrp, &start) ? start : 0;
}

/* Starts argv in its own process group (new_session: its own session) with stdin /dev/null and
 * stdout and stderr appended to s->log_path; s->log_off gets the log's size before. pdeathsig:
 * it gets SIGKILL when the runner dies. Returns 0 with s->pid, or a negated errno. */
int st_arm_spawn(struct st_arm_server *s, char *const argv[], int new_session, int pdeathsig,
                 char *err, size_t errlen)
{
    const char *log = st_buf_str(&s->log_path);
    int logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (logfd < 0) {
        return st_arm_log_open_error(log, errno, err, errlen);
    }
    struct stat sb;
    s->log_off = fstat(logfd, &sb) == 0 ? sb.st_size : 0;
    struct st_proc_opts o = {
        .argv = (const char *const *)argv,
        .group = new_session ? ST_PROC_SESSION_NEW : ST_PROC_GROUP_NEW,
        .pdeathsig = pdeathsig ? SIGKILL : 0,
    };
    o.std[0].kind = ST_PROC_FD_NULL;
    o.std[1] = (struct st_proc_fd){.kind = ST_PROC_FD_DUP, .fd = logfd};
    o.std[2] = (struct st_proc_fd){.kind = ST_PROC_FD_DUP, .fd = logfd};
    char why[256] = "";
    int rc = st_proc_spawn(&o, &s->proc, why, sizeof(why));
    close(logfd);
    if (rc != 0) {
        st_errf(err, errlen, "cannot start %s: %s", argv[0], st_strerror(rc));
        st_proc_release(&s->proc);
        return rc;
    }
    s->pid = s->proc.pid;
    s->start_ticks = start_ticks(s->pid);
    return 0;
}

/* Stops the child's process group: sig, then SIGKILL after timeout_s; waits for the leader and
 * for the group to empty. Writes how into w. Returns 0, or ST_ETIMEOUT when it had to be killed. */
static int stop_group(struct st_arm_server *s, int sig, double timeout_s, struct st_jw *w)
{
    double t0 = st_arm_now_s();
    int rc = 0;
    const char *how;
    if (s->pid == getpgrp()) {
        how = "refused: the group is the runner's own"; /* never: st_arm_spawn made a new group */
        rc = -EPERM;
    } else if (st_arm_reap(s) && !group_alive(s->pid)) {
        how = "had exited";
    } else {
        how = "signal";
        kill(-s->pid, sig);
        while (!(st_arm_reap(s) && !group_alive(s->pid)) && st_arm_now_s() - t0 < timeout_s) {
            st_arm_sleep_s(0.02);
        }
        if (!(st_arm_reap(s) && !group_alive(s->pid))) {
            how = "killed";
            rc = ST_ETIMEOUT;
            kill(-s->pid, SIGKILL);
            if (st_proc_wait(&s->proc, UINT64_MAX) == 0) {
                s->reaped = 1;
                s->wstatus = s->proc.wstatus;
            }
        }
    }
    if (w) {
        char st[64];
        status_text(s->wstatus, st, sizeof(st));
        st_jw_kstr(w, "how", how);
        st_jw_kstr(w, "signal", sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
        st_jw_kf64(w, "timeout_s", timeout_s);
        st_jw_kstr(w, "status", st);
        st_jw_ki64(w, "pid", s->pid);
        st_jw_kf64(w, "seconds", st_arm_now_s() - t0);
    }
    return rc;
}

enum st_arm_fail st_arm_proc_check(struct st_arm_server *s, char *detail, size_t len)
{
    return st_arm_reap(s) ? st_arm_classify_exit(s, detail, len) : ST_ARM_OK;
}

void st_arm_proc_log(struct st_arm_server *s, size_t max, int tail, struct st_buf *out)
{
    st_arm_read_log(st_buf_str(&s->log_path), s->log_off, max, tail, out);
}

int st_arm_proc_stop(struct st_arm_server *s, struct st_jw *w)
{
    if (s->pid <= 0) {
        st_jw_kstr(w, "how", "nothing was running");
        return 0;
    }
    return stop_group(s, s->stop_signal, s->stop_timeout_s, w);
}

void st_arm_jw_process(struct st_jw *w, const struct st_arm_server *s, int pdeathsig)
{
    st_jw_kstr(w, "log", st_buf_str(&s->log_path));
    st_jw_ki64(w, "log_offset", (int64_t)s->log_off);
    st_jw_ki64(w, "pid", s->pid);
    st_jw_ki64(w, "pgid", s->pid);
    st_jw_ku64(w, "start_ticks", s->start_ticks);
    st_jw_kbool(w, "pdeathsig", pdeathsig);
}

int st_arm_stop_leftover(int pgid, uint64_t want_ticks, int sig, double timeout_s,
                         struct st_buf *json)
{
    struct st_buf scratch;
    struct st_jw w;
    unsigned long long leader = 0;
    const char *how;
    int rc = 0;
    double t0 = st_arm_now_s();
    st_buf_init(&scratch);
    st_jw_init(&w, json ? json : &scratch);
    int members = pgid > 1 ? group_members(pgid, &leader) : 0;
    if (pgid <= 1 || pgid == getpgrp()) {
        how = "refused: not a server's group";
        rc = -EPERM;
    } else if (members == 0) {
        how = "gone";
    } else if (leader && leader != want_ticks) {
        how = "refused: the group's leader started at another time (the id was reused)";
        rc = ST_ENOTFOUND;
    } else {
        how = "signal";
        kill(-pgid, sig);
        while (group_alive(pgid) && st_arm_now_s() - t0 < timeout_s) {
            st_arm_sleep_s(0.02);
        }
        if (group_alive(pgid)) {
            how = "killed";
            rc = ST_ETIMEOUT;
            kill(-pgid, SIGKILL);
            while (group_alive(pgid) && st_arm_now_s() - t0 < timeout_s + 5) {
                st_arm_sleep_s(0.02);
            }
        }
    }
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "kind", "leftover");
    st_jw_ki64(&w, "pgid", pgid);
    st_jw_ki64(&w, "members", members);
    st_jw_kstr(&w, "how", how);
    st_jw_kstr(&w, "signal", sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
    st_jw_kf64(&w, "seconds", st_arm_now_s() - t0);
    st_jw_obj_close(&w);
    st_buf_release(&scratch);
    return rc;
}
