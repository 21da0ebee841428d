/* tests/support/e2e_sim.h */
#include "e2e_sim.h"

#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "target/server.h"

int checks, failures;
const char *servetune;
char tmpdir[256];

/* Starts `servetune sim ARGS --listen 127.0.0.1:0` with stdout to a file (a pipe nobody reads
 * could block it), and waits up to 10 s for its "listening on HOST:PORT" line, then up to 10 s
 * for /health (model mode loads first). */
int sim_start(struct sim *s, const char *name, const char *const *args)
{
    char out[512];
    snprintf(out, sizeof(out), "%s/%s.out", tmpdir, name);
    char *argv[32];
    int n = 0;
    argv[n++] = (char *)servetune;
    argv[n++] = (char *)"sim";
    for (int i = 0; args[i] && n < 28; i++) {
        argv[n++] = (char *)args[i];
    }
    argv[n++] = (char *)"--listen";
    argv[n++] = (char *)"127.0.0.1:0";
    argv[n] = NULL;
    memset(s, 0, sizeof(*s));
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fd);
    if (pid < 0) {
        return -1;
    }
    setpgid(pid, pid);
    s->pid = pid;
    uint64_t end = st_clock_mono_ns() + 10 * ST_NS_PER_S;
    while (st_clock_mono_ns() < end && !s->url[0]) {
        FILE *f = fopen(out, "r");
        char line[512];
        while (f && fgets(line, sizeof(line), f)) {
            char addr[64];
            const char *at = strstr(line, "listening on ");
            if (at && sscanf(at, "listening on %63s", addr) == 1) {
                snprintf(s->url, sizeof(s->url), "http://%s", addr);
            }
        }
        if (f) {
            fclose(f);
        }
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    if (!s->url[0]) {
        fprintf(stderr, "sim %s did not say where it listens\n", name);
        return -1;
    }
    struct st_target_cfg tc = {.base_url = s->url};
    struct st_target t;
    st_target_init(&t, &tc);
    int up = 0;
    while (st_clock_mono_ns() < end && !up) {
        up = st_target_health(&t, 1000, NULL, 0) == ST_TARGET_UP;
        if (!up) {
            struct timespec ts = {0, 20000000};
            nanosleep(&ts, NULL);
        }
    }
    st_target_release(&t);
    return up ? 0 : -1;
}

void sim_stop(struct sim *s)
{
    if (s->pid <= 0) {
        return;
    }
    kill(-s->pid, SIGTERM);
    uint64_t end = st_clock_mono_ns() + 5 * ST_NS_PER_S;
    while (waitpid(s->pid, NULL, WNOHANG) == 0) {
        if (st_clock_mono_ns() > end) {
            kill(-s->pid, SIGKILL);
            waitpid(s->pid, NULL, 0);
            break;
        }
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    s->pid = 0;
}
