/*
 * Tests for src/qual/sandbox.c. They really run children: hostile programs (network connect to a
 * listener the test opened, fork bombs, writes outside the box, secrets in the environment, CPU
 * and sleep loops, memory hogs, killing the parent, filling the disk) and ordinary ones (Python
 * asserts that pass or fail, C compiled and run, a compile error). Each hostile case runs with
 * every layer, then with some switched off (cfg.layers_off), and derives what it expects from
 * the layers the result says were active, so the message names the layer that contained the
 * program; a machine that lacks a layer still passes through the fallback. Every run asserts the
 * box directory is gone. Each case takes well under 5 s.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qual/sandbox.h"

#define L_LANDLOCK                                                                                 \
    (ST_SANDBOX_L_LANDLOCK_FS | ST_SANDBOX_L_LANDLOCK_NET | ST_SANDBOX_L_LANDLOCK_SCOPE)
#define L_NS                                                                                       \
    (ST_SANDBOX_L_USERNS | ST_SANDBOX_L_PIDNS | ST_SANDBOX_L_NETNS | ST_SANDBOX_L_MNTNS |          \
     ST_SANDBOX_L_IPCNS | ST_SANDBOX_L_UTSNS)

static char g_parent[] = "/tmp/st-sbt-XXXXXX"; /* boxes are made here */

struct variant {
    const char *name;
    uint32_t off;
};

static void base_cfg(struct st_sandbox_cfg *cfg, uint32_t off)
{
    st_sandbox_cfg_init(cfg);
    /* An identity of our own (root only): the process counts below, and RLIMIT_NPROC without a
     * user namespace, then see only this test's sandboxes, not those of a concurrent run. */
    cfg->run_uid = cfg->run_gid = 200000 + (uint32_t)getpid() % 100000;
    cfg->tmp_parent = g_parent;
    cfg->limits.wall_ms = 4000;
    cfg->limits.cpu_s = 3;
    cfg->layers_off = off;
}

static void assert_box_gone(const struct st_sandbox_result *r)
{
    struct stat st;

    assert_true(r->box[0] != '\0');
    assert_int_equal(r->box_removed, 1);
    assert_int_equal(stat(r->box, &st), -1);
    assert_int_equal(errno, ENOENT);
}

static void say(const char *test, const char *variant, const struct st_sandbox_result *r,
                const char *by)
{
    char lb[512];

    print_message("[ sandbox  ] %s/%s: contained by %s (layers %s)\n", test, variant, by,
                  st_sandbox_layers_str(r->layers, lb, sizeof(lb)));
}

/* Runs Python source under cfg; asserts the run itself worked and the box is gone. */
static void run_py(const struct st_sandbox_cfg *cfg, const char *src, struct st_sandbox_result *r)
{
    struct st_sandbox_prog p;

    st_sandbox_prog_python(&p, src, strlen(src));
    assert_int_equal(st_sandbox_run(cfg, &p.job, r), 0);
    assert_box_gone(r);
}

static void run_c(const struct st_sandbox_cfg *cfg, const char *src, struct st_sandbox_result *r)
{
    struct st_sandbox_prog p;

    st_sandbox_prog_c(&p, src, strlen(src), NULL);
    assert_int_equal(st_sandbox_run(cfg, &p.job, r), 0);
    assert_box_gone(r);
}

static void assert_pass(const struct st_sandbox_result *r)
{
    if (r->verdict != ST_SANDBOX_PASS) {
        print_error("verdict %s exit %d signal %d error '%s'\nstdout: %s\nstderr: %s\n",
                    st_sandbox_verdict_name(r->verdict), r->exit_code, r->signal, r->error,
                    r->stdout_tail, r->stderr_tail);
    }
    assert_int_equal(r->verdict, ST_SANDBOX_PASS);
    assert_int_equal(r->exited, 1);
    assert_int_equal(r->exit_code, 0);
    assert_int_equal(r->signal, 0);
    assert_int_equal(r->timed_out, 0);
    assert_string_equal(r->error, "");
}

/* Processes whose real uid is uid, from /proc. */
static int count_uid(uid_t uid)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        char path[300], line[256];
        if (e->d_name[0] < '0' || e->d_name[0] > '9') {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/%s/status", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL) {
            continue;
        }
        while (fgets(line, sizeof(line), f) != NULL) {
            unsigned ruid;
            if (sscanf(line, "Uid: %u", &ruid) == 1) {
                n += ruid == uid;
                break;
            }
        }
        fclose(f);
    }
    closedir(d);
    return n;
}

/* ---- Ordinary programs. ---- */

static void test_python_passes(void **state)
{
    struct st_sandbox_cfg cfg;
    struct st_sandbox_result r;
    const char *src = "def add(a, b):\n    return a + b\n\n"
                      "assert add(2, 3) == 5\nassert add(-1, 1) == 0\nprint('ok')\n";

    (void)state;
    base_cfg(&cfg, 0);
    run_py(&cfg, src, &r);
    assert_pass(&r);
    assert_string_equal(r.stdout_tail, "ok\n");
    assert_string_equal(r.stderr_tail, "");
    assert_int_equal(r.step, 0);
    assert_int_equal(r.steps_run, 1);
    /* RLIMITS, NNP and the process group are not optional: always there. */
    assert_true(r.layers & ST_SANDBOX_L_RLIMITS);
    assert_true(r.layers & ST_SANDBOX_L_NNP);
    assert_true(r.layers & ST_SANDBOX_L_PGROUP);
    say("python_passes", "all", &r, "nothing to contain");
    st_sandbox_result_release(&r);
}

static void test_python_fails(void **state)
{
    struct st_sandbox_cfg cfg;
    struct st_sandbox_result r;
    const char *src = "def add(a, b):\n    return a - b\n\nassert add(2, 3) == 5, 'add is wrong'\n";

    (void)state;
    base_cfg(&cfg, 0);
    run_py(&cfg, src, &r);
    assert_int_equal(r.verdict, ST_SANDBOX_FAIL_EXIT);
    assert_int_equal(r.exited, 1);
    assert_int_equal(r.exit_code, 1);
    assert_int_equal(r.signal, 0);
    assert_int_equal(r.timed_out, 0);
    assert_non_null(strstr(r.stderr_tail, "AssertionError: add is wrong"));
    assert_string_equal(r.error, "");
    st_sandbox_result_release(&r);
}

static void test_python_stdin(void **state)
{
    struct st_sandbox_cfg cfg;
    struct st_sandbox_result r;
    struct st_sandbox_prog p;
    const char *src = "import sys\nprint(sum(int(x) for x in sys.stdin.read().split()))\n";

    (void)state;
    base_cfg(&cfg, 0);
    st_sandbox_prog_python(&p, src, strlen(src));
    p.job.stdin_data = "1 2 3\n40\n";
    p.job.stdin_len = strlen(p.job.stdin_data);
    assert_int_equal(st_sandbox_run(&cfg, &p.job, &r), 0);
    assert_box_gone(&r);
    assert_pass(&r);
    assert_string_equal(r.stdout_tail, "46\n");
    st_sandbox_result_release(&r);
}

static void test_c_compiled_and_run(void **state)
{
    struct st_sandbox_cfg cfg;
    struct st_sandbox_result r;
    const char *src = "#include <stdio.h>\n"
                      "static int sq(int x) { return x * x; }\n"
                      "int main(void) { printf(\"hello %d\\n\", sq(6) + 6); return 0; }\n";

    (void)state;
    base_cfg(&cfg, 0);
    run_c(&cfg, src, &r);
    assert_pass(&r);
    assert_int_equal(r.step, 1);
    assert_int_equal(r.steps_run, 2);
    assert_string_equal(r.stdout_tail, "hello 42\n");
    st_sandbox_result_release(&r);
}

static void test_c_compile_error(void **state)
{
    struct st_sandbox_cfg cfg;
    struct st_sandbox_result r;
    const char *src = "int main(void) { return undeclared_thing; }\n";

    (void)state;
    base_cfg(&cfg, 0);
    run_c(&cfg, src, &r);
    assert_int_equal(r.verdict, ST_SANDBOX_FAIL_BUILD);
    assert_int_equal(r.step, 0);
    assert_int_equal(r.steps_run, 1);
    assert_int_equal(r.exited, 1);
    assert_int_equal(r.exit_code, 1);
    assert_non_null(strstr(r.stderr_tail, "error:"));
    assert_non_null(strstr(r.stderr_tail, "undeclared_thing"));
    assert_string_equal(r.error, "");
    st_sandbox_result_release(&r);
}

static void test_exec_missing(void **state)
{
    static const char *const argv[] = {"st-no-such-program", NULL};
    struct st_sandbox_step step = {.argv = argv, .limits = NULL};
    struct st_sandbox_job job = {.steps = &step, .nsteps = 1};
    struct st_sandbox_cfg cfg;
    struct st_sandbox_result r;

    (void)state;
    base_cfg(&cfg, 0);
    assert_int_equal(st_sandbox_run(&cfg, &job, &r), 0);
    assert_box_gone(&r);
    assert_int_equal(r.verdict, ST_SANDBOX_FAIL_SETUP);
    assert_int_equal(r.exit_code, 127);
    assert_non_null(strstr(r.error, "st-no-such-program"));
    assert_non_null(strstr(r.error, "execve"));
    st_sandbox_result_release(&r);
}

static void test_bad_names_rejected(void **state)
{
    static const char *const bad[] = {"../x", "a/b", ".hidden", "", "a..b", "sp ace", "x\n"};
    struct st_sandbox_cfg cfg;
    struct st_sandbox_result r;

    (void)state;
    base_cfg(&cfg, 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct st_sandbox_prog p;
        st_sandbox_prog_python(&p, "print(1)\n", 9);
        p.file.name = bad[i];
        assert_int_equal(st_sandbox_run(&cfg, &p.job, &r), -EINVAL);
        assert_string_equal(r.box, ""); /* rejected before any box was made */
        st_sandbox_result_release(&r);
    }
    struct st_sandbox_file two[2] = {{"a.py", "", 0}, {"a.py", "", 0}};
    struct st_sandbox_prog p;
    st_sandbox_prog_python(&p, "print(1)\n", 9);
    p.job.files = two;
    p.job.nfiles = 2;
    assert_int_equal(st_sandbox_run(&cfg, &p.job, &r), -EINVAL);
    st_sandbox_result_release(&r);
    cfg.run_uid = 0;
    assert_int_equal(st_sandbox_run(&cfg, &p.job, &r), -EINVAL);
    st_sandbox_result_release(&r);
}

static void test_output_tail_bounded(void **state)
{
    struct st_sandbox_cfg cfg;
    struct st_sandbox_result r;
    const char *src = "import sys\nfor i in range(20000):\n    sys.stdout.write('%05d\\n' % i)\n"
                      "sys.stderr.write('e' * 5000)\n";

    (void)state;
    base_cfg(&cfg, 0);
    cfg.output_cap_bytes = 1024;
    run_py(&cfg, src, &r);
    assert_pass(&r);
    assert_int_equal(r.stdout_total_bytes, 20000 * 6);
    assert_int_equal(r.stdout_len, 1024);
    assert_int_equal(strlen(r.stdout_tail), 1024);
    assert_string_equal(r.stdout_tail + 1024 - 6, "19999\n");
    assert_int_equal(r.stderr_total_bytes, 5000);
    assert_int_equal(r.stderr_len, 1024);
    st_sandbox_result_release(&r);
}

/* ---- Hostile programs. ---- */

static void test_network_connect(void **state)
{
    static const struct variant vs[] = {
        {"all", 0},
        {"no-seccomp", ST_SANDBOX_L_SECCOMP},
        {"netns-only", ST_SANDBOX_L_SECCOMP | L_LANDLOCK},
        {"no-namespaces", L_NS},
    };
    struct sockaddr_in a;
    socklen_t alen = sizeof(a);
    char src[1024];

    (void)state;
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    assert_true(lfd >= 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(lfd, 8), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &alen), 0);
    snprintf(src, sizeof(src),
             "import socket, sys\n"
             "try:\n"
             "    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
             "    s.settimeout(2)\n"
             "    s.connect(('127.0.0.1', %d))\n"
             "except OSError as e:\n"
             "    print('blocked', e.errno)\n"
             "    sys.exit(0)\n"
             "print('connected')\n"
             "sys.exit(1)\n",
             ntohs(a.sin_port));
    for (size_t i = 0; i < sizeof(vs) / sizeof(vs[0]); i++) {
        struct st_sandbox_cfg cfg;
        struct st_sandbox_result r;
        char want[64];
        const char *by;
        int err;
        base_cfg(&cfg, vs[i].off);
        run_py(&cfg, src, &r);
        if (r.layers & ST_SANDBOX_L_SECCOMP) {
            by = "seccomp (socket AF_INET denied)";
            err = EACCES;
        } else if (r.layers & ST_SANDBOX_L_LANDLOCK_NET) {
            by = "landlock (TCP connect denied)";
            err = EACCES;
        } else if (r.layers & ST_SANDBOX_L_NETNS) {
            by = "network namespace (loopback down)";
            err = ENETUNREACH;
        } else {
            fail_msg("%s: no layer left to stop a connect", vs[i].name);
            return;
        }
        snprintf(want, sizeof(want), "blocked %d\n", err);
        assert_pass(&r);
        assert_string_equal(r.stdout_tail, want);
        /* The listener saw nothing. */
        assert_int_equal(accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), -1);
        assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
        say("network_connect", vs[i].name, &r, by);
        st_sandbox_result_release(&r);
    }
    close(lfd);
}

static void test_fork_bomb_counted(void **state)
{
    static const struct variant vs[] = {
        {"all", 0},
        {"no-userns-pidns", ST_SANDBOX_L_USERNS | ST_SANDBOX_L_PIDNS},
    };
    /* Forks sleepers until fork fails; the sleepers must not outlive the run. */
    const char *src = "import os, sys, time\n"
                      "n = 0\n"
                      "try:\n"
                      "    for i in range(500):\n"
                      "        if os.fork() == 0:\n"
                      "            time.sleep(30)\n"
                      "            os._exit(0)\n"
                      "        n += 1\n"
                      "except OSError as e:\n"
                      "    print('fork failed', e.errno, n < 16)\n"
                      "    sys.exit(0)\n"
                      "print('forked', n)\n"
                      "sys.exit(1)\n";

    (void)state;
    for (size_t i = 0; i < sizeof(vs) / sizeof(vs[0]); i++) {
        struct st_sandbox_cfg cfg;
        struct st_sandbox_result r;
        char want[64];
        base_cfg(&cfg, vs[i].off);
        cfg.limits.nproc = 16;
        int before = geteuid() == 0 ? count_uid(cfg.run_uid) : 0;
        run_py(&cfg, src, &r);
        assert_pass(&r);
        snprintf(want, sizeof(want), "fork failed %d True\n", EAGAIN);
        assert_string_equal(r.stdout_tail, want);
        assert_true(r.wall_ms < 10000); /* the 30 s sleepers were killed, not waited for */
        if (geteuid() == 0) {
            assert_int_equal(count_uid(cfg.run_uid), before);
        }
        say("fork_bomb_counted", vs[i].name, &r,
            (r.layers & ST_SANDBOX_L_USERNS) ? "RLIMIT_NPROC in a fresh user namespace"
                                             : "RLIMIT_NPROC of run_uid");
        st_sandbox_result_release(&r);
    }
}

static void test_fork_bomb_endless(void **state)
{
    static const struct variant vs[] = {
        {"all", 0},
        {"no-namespaces", L_NS},
    };
    const char *src = "import os\n"
                      "while True:\n"
                      "    try:\n"
                      "        os.fork()\n"
                      "    except OSError:\n"
                      "        pass\n";

    (void)state;
    for (size_t i = 0; i < sizeof(vs) / sizeof(vs[0]); i++) {
        struct st_sandbox_cfg cfg;
        struct st_sandbox_result r;
        base_cfg(&cfg, vs[i].off);
        cfg.limits.nproc = 32;
        cfg.limits.wall_ms = 800;
        int before = geteuid() == 0 ? count_uid(cfg.run_uid) : 0;
        run_py(&cfg, src, &r);
        assert_int_equal(r.verdict, ST_SANDBOX_FAIL_TIMEOUT);
        assert_int_equal(r.timed_out, 1);
        assert_int_equal(r.signal, SIGKILL);
        assert_int_equal(r.exited, 0);
        assert_true(r.wall_ms >= 800 && r.wall_ms < 10000);
        if (geteuid() == 0) {
            assert_int_equal(count_uid(cfg.run_uid), before); /* none left running */
        }
        say("fork_bomb_endless", vs[i].name, &r,
            (r.layers & ST_SANDBOX_L_PIDNS) ? "RLIMIT_NPROC + killing the pid namespace's init"
                                            : "RLIMIT_NPROC + killing the process group");
        st_sandbox_result_release(&r);
    }
}

static void test_write_outside(void **state)
{
    static const struct variant vs[] = {
        {"all", 0},
        {"no-mount-namespace", ST_SANDBOX_L_MNTNS},
        {"no-namespaces", L_NS},
    };
    char dir[] = "/tmp/st-sbt-out-XXXXXX", target[128], src[1024];

    (void)state;
    assert_non_null(mkdtemp(dir));
    assert_int_equal(chmod(dir, 0777), 0); /* only the sandbox may stop the write */
    snprintf(target, sizeof(target), "%s/escape.txt", dir);
    snprintf(src, sizeof(src),
             "import sys\n"
             "res = []\n"
             "for p in ('%s', '../escape.txt', '/var/tmp/st-escape.txt'):\n"
             "    try:\n"
             "        open(p, 'w').write('x')\n"
             "        res.append('WROTE')\n"
             "    except OSError as e:\n"
             "        res.append(str(e.errno))\n"
             "print(' '.join(res))\n",
             target);
    for (size_t i = 0; i < sizeof(vs) / sizeof(vs[0]); i++) {
        struct st_sandbox_cfg cfg;
        struct st_sandbox_result r;
        char want[64], up[300];
        const char *by;
        base_cfg(&cfg, vs[i].off);
        cfg.tmp_parent = dir; /* so "../escape.txt" aims at the 0777 directory too */
        run_py(&cfg, src, &r);
        assert_pass(&r);
        if (r.layers & ST_SANDBOX_L_PIVOT) {
            /* Nothing of the host is mounted; "/" is a read-only tmpfs. */
            snprintf(want, sizeof(want), "%d %d %d\n", ENOENT, EROFS, ENOENT);
            by = "pivot_root into a read-only minimal tree";
        } else if (r.layers & ST_SANDBOX_L_LANDLOCK_FS) {
            snprintf(want, sizeof(want), "%d %d %d\n", EACCES, EACCES, EACCES);
            by = "landlock (writes only beneath the box)";
        } else {
            print_message("[ sandbox  ] write_outside/%s: no layer stops writes outside the box "
                          "on this machine\n",
                          vs[i].name);
            st_sandbox_result_release(&r);
            continue;
        }
        assert_string_equal(r.stdout_tail, want);
        assert_int_equal(access(target, F_OK), -1);
        snprintf(up, sizeof(up), "%s/escape.txt", dir);
        assert_int_equal(access(up, F_OK), -1);
        assert_int_equal(access("/var/tmp/st-escape.txt", F_OK), -1);
        say("write_outside", vs[i].name, &r, by);
        st_sandbox_result_release(&r);
    }
    assert_int_equal(rmdir(dir), 0); /* empty: the boxes made in it are gone too */
}

static void test_env_secret(void **state)
{
    static const struct variant vs[] = {
        {"all", 0},
        {"no-mount-namespace", ST_SANDBOX_L_MNTNS},
        {"no-namespaces-no-landlock", L_NS | L_LANDLOCK},
    };
    /* Looks in its own environment and in every /proc/<pid>/environ it can read. */
    const char *src = "import os\n"
                      "print(' '.join(sorted(os.environ)))\n"
                      "found = [k for k in os.environ if 'SERVETUNE' in k]\n"
                      "try:\n"
                      "    pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
                      "except OSError:\n"
                      "    pids = []\n"
                      "for p in pids:\n"
                      "    try:\n"
                      "        with open('/proc/%s/environ' % p, 'rb') as f:\n"
                      "            if b'SERVETUNE_API_KEY=' in f.read():\n"
                      "                found.append(p)\n"
                      "    except OSError:\n"
                      "        pass\n"
                      "print('found', found)\n";

    (void)state;
    assert_int_equal(setenv("SERVETUNE_API_KEY", "sk-st-sandbox-test-secret", 1), 0);
    for (size_t i = 0; i < sizeof(vs) / sizeof(vs[0]); i++) {
        struct st_sandbox_cfg cfg;
        struct st_sandbox_result r;
        const char *by;
        base_cfg(&cfg, vs[i].off);
        run_py(&cfg, src, &r);
        if (r.layers & ST_SANDBOX_L_PIVOT) {
            by = "clean environment + no /proc in the minimal tree";
        } else if (r.layers & ST_SANDBOX_L_LANDLOCK_FS) {
            by = "clean environment + landlock (no reads of /proc)";
        } else if (r.layers & ST_SANDBOX_L_NOPRIV) {
            by = "clean environment + another uid (no ptrace access to our environ)";
        } else {
            print_message("[ sandbox  ] env_secret/%s: /proc/<pid>/environ of the caller is "
                          "readable on this machine\n",
                          vs[i].name);
            st_sandbox_result_release(&r);
            continue;
        }
        assert_pass(&r);
        assert_string_equal(r.stdout_tail, "HOME LANG PATH TMPDIR\nfound []\n");
        assert_null(strstr(r.stdout_tail, "sk-st-sandbox"));
        say("env_secret", vs[i].name, &r, by);
        st_sandbox_result_release(&r);
    }
    assert_int_equal(unsetenv("SERVETUNE_API_KEY"), 0);
}

static void test_infinite_loop_cpu(void **state)
{
    struct st_sandbox_cfg cfg;
    struct st_sandbox_result r;

    (void)state;
    base_cfg(&cfg, 0);
    cfg.limits.cpu_s = 1;
    cfg.limits.wall_ms = 4000;
    run_py(&cfg, "while True:\n    pass\n", &r);
    assert_int_equal(r.exited, 0);
    if (r.timed_out) {
        /* A machine too busy to give it one CPU second in four: the wall clock stops it. */
        assert_int_equal(r.verdict, ST_SANDBOX_FAIL_TIMEOUT);
        assert_int_equal(r.signal, SIGKILL);
        assert_true(r.wall_ms >= 4000 && r.cpu_ms < 2500);
        say("infinite_loop_cpu", "all", &r, "the wall-clock deadline (loaded machine)");
    } else {
        assert_int_equal(r.verdict, ST_SANDBOX_FAIL_SIGNAL);
        assert_int_equal(r.signal, SIGXCPU);
        assert_true(r.cpu_ms >= 900 && r.cpu_ms < 2500);
        say("infinite_loop_cpu", "all", &r, "RLIMIT_CPU (SIGXCPU)");
    }
    st_sandbox_result_release(&r);
}

static void test_infinite_sleep_wall(void **state)
{
    static const struct variant vs[] = {
        {"all", 0},
        {"no-namespaces", L_NS},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(vs) / sizeof(vs[0]); i++) {
        struct st_sandbox_cfg cfg;
        struct st_sandbox_result r;
        base_cfg(&cfg, vs[i].off);
        cfg.limits.wall_ms = 500;
        run_py(&cfg, "import time\nprint('zz', flush=True)\ntime.sleep(60)\n", &r);
        assert_int_equal(r.verdict, ST_SANDBOX_FAIL_TIMEOUT);
        assert_int_equal(r.timed_out, 1);
        assert_int_equal(r.signal, SIGKILL);
        assert_true(r.wall_ms >= 500 && r.wall_ms < 10000); /* not the 60 s sleep */
        assert_string_equal(r.stdout_tail, "zz\n");         /* output before the kill is kept */
        say("infinite_sleep_wall", vs[i].name, &r, "the wall-clock deadline (SIGKILL)");
        st_sandbox_result_release(&r);
    }
}

static void test_background_child_does_not_hold_the_run(void **state)
{
    static const struct variant vs[] = {
        {"all", 0},
        {"no-namespaces", L_NS},
    };
    const char *src = "import os, time\n"
                      "if os.fork() == 0:\n"
                      "    time.sleep(30)\n"
                      "    os._exit(0)\n"
                      "print('parent done')\n";

    (void)state;
    for (size_t i = 0; i < sizeof(vs) / sizeof(vs[0]); i++) {
        struct st_sandbox_cfg cfg;
        struct st_sandbox_result r;
        base_cfg(&cfg, vs[i].off);
        int before = geteuid() == 0 ? count_uid(cfg.run_uid) : 0;
        run_py(&cfg, src, &r);
        assert_pass(&r);
        assert_string_equal(r.stdout_tail, "parent done\n");
        assert_true(r.wall_ms < 10000); /* not the child's 30 s */
        if (geteuid() == 0) {
            assert_int_equal(count_uid(cfg.run_uid), before);
        }
        say("background_child", vs[i].name, &r,
            (r.layers & ST_SANDBOX_L_PIDNS) ? "pid namespace torn down with its init"
                                            : "process-group kill");
        st_sandbox_result_release(&r);
    }
}

static void test_memory_hog(void **state)
{
    struct st_sandbox_cfg cfg;
    struct st_sandbox_result r;
    const char *py = "chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))\n";
    const char *c = "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
                    "int main(void) {\n"
                    "    for (int i = 0; i < 100000; i++) {\n"
                    "        char *p = malloc(1 << 20);\n"
                    "        if (p == NULL) { printf(\"null after %d\\n\", i > 0); return 0; }\n"
                    "        memset(p, 1, 1 << 20);\n"
                    "    }\n"
                    "    return 1;\n"
                    "}\n";

    (void)state;
    base_cfg(&cfg, 0);
    cfg.limits.as_bytes = 256u << 20;
    run_py(&cfg, py, &r);
    assert_int_equal(r.verdict, ST_SANDBOX_FAIL_EXIT);
    assert_int_equal(r.exit_code, 1);
    assert_non_null(strstr(r.stderr_tail, "MemoryError"));
    say("memory_hog", "python", &r, "RLIMIT_AS (MemoryError)");
    st_sandbox_result_release(&r);

    run_c(&cfg, c, &r);
    assert_pass(&r);
    assert_string_equal(r.stdout_tail, "null after 1\n");
    say("memory_hog", "c", &r, "RLIMIT_AS (malloc returns NULL)");
    st_sandbox_result_release(&r);
}

static void test_kill_parent(void **state)
{
    static const struct variant vs[] = {
        {"all", 0},
        {"no-userns-pidns", ST_SANDBOX_L_USERNS | ST_SANDBOX_L_PIDNS},
        {"pidns-only", ST_SANDBOX_L_SECCOMP | L_LANDLOCK},
    };
    const char *src = "import os, signal, time\n"
                      "for pid in (os.getppid(), -1):\n"
                      "    try:\n"
                      "        os.kill(pid, signal.SIGKILL)\n"
                      "    except OSError:\n"
                      "        pass\n"
                      "time.sleep(0.1)\n"
                      "print('alive')\n";

    (void)state;
    for (size_t i = 0; i < sizeof(vs) / sizeof(vs[0]); i++) {
        struct st_sandbox_cfg cfg;
        struct st_sandbox_result r;
        const char *by;
        base_cfg(&cfg, vs[i].off);
        uint32_t l = ST_SANDBOX_L_OPTIONAL & ~vs[i].off;
        if (!(l & (ST_SANDBOX_L_PIDNS | ST_SANDBOX_L_SECCOMP | ST_SANDBOX_L_LANDLOCK_SCOPE)) &&
            geteuid() != 0) {
            continue; /* kill(-1) would reach our own processes: not a variant to try */
        }
        run_py(&cfg, src, &r);
        /* We are still here, and the supervisor reported the program's own ending. */
        assert_pass(&r);
        assert_string_equal(r.stdout_tail, "alive\n");
        if (r.layers & ST_SANDBOX_L_PIDNS) {
            by = "pid namespace (its init ignores the kill, -1 reaches only the namespace)";
        } else if (r.layers & (ST_SANDBOX_L_SECCOMP | ST_SANDBOX_L_LANDLOCK_SCOPE)) {
            by = "seccomp (kill -1) + landlock scope / another uid (the supervisor)";
        } else {
            by = "another uid than the supervisor";
        }
        say("kill_parent", vs[i].name, &r, by);
        st_sandbox_result_release(&r);
    }
    /* Its own process group: the program dies, the supervisor (init or another uid) does not. */
    struct st_sandbox_cfg cfg;
    struct st_sandbox_result r;
    base_cfg(&cfg, 0);
    run_py(&cfg, "import os, signal\nos.kill(0, signal.SIGKILL)\n", &r);
    assert_int_equal(r.verdict, ST_SANDBOX_FAIL_SIGNAL);
    assert_int_equal(r.signal, SIGKILL);
    assert_int_equal(r.timed_out, 0);
    assert_string_equal(r.error, "");
    st_sandbox_result_release(&r);
}

static void test_fill_disk(void **state)
{
    struct st_sandbox_cfg cfg;
    struct st_sandbox_result r;
    /* One file past RLIMIT_FSIZE: Python ignores SIGXFSZ and sees EFBIG. */
    const char *one = "import os\n"
                      "try:\n"
                      "    with open('big', 'wb') as f:\n"
                      "        for i in range(64):\n"
                      "            f.write(b'x' * 65536)\n"
                      "except OSError as e:\n"
                      "    print('stopped', e.errno, os.path.getsize('big'))\n";
    /* Many files, each under the limit: the tmpfs box fills. */
    const char *many = "try:\n"
                       "    for i in range(200):\n"
                       "        with open('f%d' % i, 'wb') as f:\n"
                       "            f.write(b'x' * (512 << 10))\n"
                       "except OSError as e:\n"
                       "    print('stopped', e.errno, i < 16)\n";
    char want[64];

    (void)state;
    base_cfg(&cfg, 0);
    cfg.limits.fsize_bytes = 1u << 20;
    cfg.box_bytes = 4u << 20;
    run_py(&cfg, one, &r);
    assert_pass(&r);
    snprintf(want, sizeof(want), "stopped %d %d\n", EFBIG, 1 << 20);
    assert_string_equal(r.stdout_tail, want);
    say("fill_disk", "one-file", &r, "RLIMIT_FSIZE");
    st_sandbox_result_release(&r);

    run_py(&cfg, many, &r);
    if (!(r.layers & ST_SANDBOX_L_PIVOT)) {
        print_message("[ sandbox  ] fill_disk/many-files: no tmpfs box on this machine; total "
                      "bytes are bounded only by time\n");
        st_sandbox_result_release(&r);
        return;
    }
    assert_pass(&r);
    snprintf(want, sizeof(want), "stopped %d True\n", ENOSPC);
    assert_string_equal(r.stdout_tail, want);
    say("fill_disk", "many-files", &r, "the size of the tmpfs box");
    st_sandbox_result_release(&r);
}

static void test_box_removal_hostile(void **state)
{
    /* Only the host-box fallback lets a program leave anything in the host directory. */
    const char *src = "import os\n"
                      "os.symlink('/', 'root')\n"
                      "os.symlink('/usr/bin/python3', 'py')\n"
                      "os.mkdir('locked')\n"
                      "open('locked/f', 'w').write('x')\n"
                      "os.chmod('locked', 0)\n"
                      "d = '.'\n"
                      "for i in range(150):\n"
                      "    d = os.path.join(d, 'n')\n"
                      "    os.mkdir(d)\n"
                      "    open(os.path.join(d, 'f'), 'w').close()\n"
                      "os.symlink('/tmp', os.path.join(d, 'tmp'))\n"
                      "print('left')\n";
    struct st_sandbox_cfg cfg;
    struct st_sandbox_result r;
    struct stat st;

    (void)state;
    base_cfg(&cfg, ST_SANDBOX_L_MNTNS);
    run_py(&cfg, src, &r); /* asserts the box is gone */
    assert_pass(&r);
    assert_string_equal(r.stdout_tail, "left\n");
    assert_false(r.layers & ST_SANDBOX_L_PIVOT);
    assert_int_equal(stat("/usr/bin/python3", &st), 0); /* the links were removed, not followed */
    assert_int_equal(stat("/tmp", &st), 0);
    st_sandbox_result_release(&r);
}

static void test_layers_str(void **state)
{
    char b[256];

    (void)state;
    assert_string_equal(st_sandbox_layers_str(0, b, sizeof(b)), "none");
    assert_string_equal(
        st_sandbox_layers_str(ST_SANDBOX_L_USERNS | ST_SANDBOX_L_SECCOMP, b, sizeof(b)),
        "userns,seccomp");
    assert_string_equal(st_sandbox_verdict_name(ST_SANDBOX_FAIL_TIMEOUT), "timeout");
}

/* ---- Code blocks. ---- */

static void expect_code(const char *answer, enum st_sandbox_lang lang, int rc, const char *code)
{
    struct st_buf b;

    st_buf_init(&b);
    assert_int_equal(st_sandbox_extract_code(answer, strlen(answer), lang, &b), rc);
    if (rc == 0) {
        assert_string_equal(st_buf_str(&b), code);
    } else {
        assert_int_equal(b.len, 0);
    }
    st_buf_release(&b);
}

static void test_extract_code(void **state)
{
    const enum st_sandbox_lang py = ST_SANDBOX_LANG_PYTHON, c = ST_SANDBOX_LANG_C;

    (void)state;
    expect_code("Here:\n```python\nprint(1)\n```\nDone.", py, 0, "print(1)\n");
    expect_code("```py\nx = 1\n```", py, 0, "x = 1\n");
    expect_code("```Python3 title=main\nx = 2\n```\n", py, 0, "x = 2\n");
    expect_code("```\nplain\n```", py, 0, "plain\n");
    expect_code("```\nplain\n```", c, 0, "plain\n");
    expect_code("```c\nint main(void){return 0;}\n```", c, 0, "int main(void){return 0;}\n");
    /* The first block that fits: a bash block before it is skipped, a later one ignored. */
    expect_code("```bash\nls\n```\n```python\na()\n```\n```python\nb()\n```", py, 0, "a()\n");
    expect_code("```python\nprint(1)\n```", c, ST_ENOTFOUND, NULL);
    expect_code("no code at all", py, ST_ENOTFOUND, NULL);
    expect_code("```python\nprint(1)\n", py, ST_EPARSE, NULL);
    expect_code("```bash\nls\n", py, ST_ENOTFOUND, NULL);
    /* A longer fence holds a shorter one; ~~~ fences; indented fences; CRLF lines. */
    expect_code("````python\ns = '''\n```\n'''\n````", py, 0, "s = '''\n```\n'''\n");
    expect_code("~~~python\nx = 3\n~~~", py, 0, "x = 3\n");
    expect_code("  ```python\nx = 4\n  ```", py, 0, "x = 4\n");
    expect_code("```python\r\nx = 5\r\n```\r\n", py, 0, "x = 5\r\n");
    /* ```x``` on one line is inline code; a closing fence needs nothing after it. */
    expect_code("use ```print``` then\n```python\ny = 1\n``` not closed\n```", py, 0,
                "y = 1\n``` not closed\n");
    expect_code("```python\n```", py, 0, "");

    /* Bounds. */
    size_t big = ST_SANDBOX_MAX_CODE_BYTES + 100;
    char *s = malloc(big + 32);
    assert_non_null(s);
    memcpy(s, "```python\n", 10);
    memset(s + 10, 'a', big);
    memcpy(s + 10 + big, "\n```", 5);
    expect_code(s, py, ST_ETOOBIG, NULL);
    free(s);
    struct st_buf b;
    st_buf_init(&b);
    assert_int_equal(st_sandbox_extract_code("x", ST_SANDBOX_MAX_ANSWER_BYTES + 1ull, py, &b),
                     ST_ETOOBIG);
    st_buf_release(&b);
}

static int setup_all(void **state)
{
    (void)state;
    if (mkdtemp(g_parent) == NULL) {
        return -1;
    }
    /* run_uid must reach boxes made here when there is no pivot_root. */
    return chmod(g_parent, 0755);
}

static int teardown_all(void **state)
{
    (void)state;
    return rmdir(g_parent); /* fails if any box was left behind */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_python_passes),
        cmocka_unit_test(test_python_fails),
        cmocka_unit_test(test_python_stdin),
        cmocka_unit_test(test_c_compiled_and_run),
        cmocka_unit_test(test_c_compile_error),
        cmocka_unit_test(test_exec_missing),
        cmocka_unit_test(test_bad_names_rejected),
        cmocka_unit_test(test_output_tail_bounded),
        cmocka_unit_test(test_network_connect),
        cmocka_unit_test(test_fork_bomb_counted),
        cmocka_unit_test(test_fork_bomb_endless),
        cmocka_unit_test(test_write_outside),
        cmocka_unit_test(test_env_secret),
        cmocka_unit_test(test_infinite_loop_cpu),
        cmocka_unit_test(test_infinite_sleep_wall),
        cmocka_unit_test(test_background_child_does_not_hold_the_run),
        cmocka_unit_test(test_memory_hog),
        cmocka_unit_test(test_kill_parent),
        cmocka_unit_test(test_fill_disk),
        cmocka_unit_test(test_box_removal_hostile),
        cmocka_unit_test(test_layers_str),
        cmocka_unit_test(test_extract_code),
    };
    /* Under valgrind (meson test --setup valgrind) only the pure tests run: valgrind does not
     * emulate Landlock, seccomp filters or the namespaces the sandbox is made of. Every test runs
     * in the plain and ASan+UBSan builds. */
    const struct CMUnitTest pure[] = {
        cmocka_unit_test(test_bad_names_rejected),
        cmocka_unit_test(test_layers_str),
        cmocka_unit_test(test_extract_code),
    };
    if (getenv("ST_UNDER_VALGRIND")) {
        return cmocka_run_group_tests(pure, setup_all, teardown_all);
    }
    return cmocka_run_group_tests(tests, setup_all, teardown_all);
}
