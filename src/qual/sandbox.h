/*
 * Sandboxed runner for model-written code: writes a job's files into a fresh box, runs its steps
 * (e.g. "python3 main.py", or "gcc ... main.c" then "./prog") contained, and records how each
 * ended. Containment layers are tried best first and each one that took effect is recorded in
 * st_sandbox_result.layers; none is assumed. It is not a security boundary against kernel bugs,
 * and it does not bound total memory (no cgroups): see docs/security.md and
 * docs/internals/sandbox.md. Runs are synchronous and independent; one run costs a few
 * milliseconds of set-up plus the program's own time. Nothing here prints.
 */
#ifndef ST_QUAL_SANDBOX_H
#define ST_QUAL_SANDBOX_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/status.h"

#define ST_SANDBOX_MAX_FILES 16
#define ST_SANDBOX_MAX_NAME 64                /* bytes in a file name, without the NUL */
#define ST_SANDBOX_MAX_FILE_BYTES (16u << 20) /* per file written into the box */
#define ST_SANDBOX_MAX_STEPS 4
#define ST_SANDBOX_MAX_ARGS 32                  /* per step, without the NULL */
#define ST_SANDBOX_MAX_ARG 4096                 /* bytes per argument */
#define ST_SANDBOX_MAX_STDIN_BYTES (16u << 20)  /* bytes fed to the last step */
#define ST_SANDBOX_MAX_OUTPUT_CAP (1u << 20)    /* largest stdout/stderr tail kept */
#define ST_SANDBOX_MAX_CODE_BYTES (256u << 10)  /* largest code block extracted */
#define ST_SANDBOX_MAX_ANSWER_BYTES (16u << 20) /* largest answer searched for a code block */
#define ST_SANDBOX_MAX_ERROR 256                /* bytes of st_sandbox_result.error */

/*
 * Containment layers, as bits. cfg.layers_off names the ones to leave out (tests and debugging
 * use it to exercise the fallbacks); result.layers names the ones that took effect in this run.
 */
enum st_sandbox_layer {
    ST_SANDBOX_L_USERNS = 1u << 0,  /* own user namespace: uid 0 inside, run_uid (or ours) out */
    ST_SANDBOX_L_PIDNS = 1u << 1,   /* own pid namespace: the supervisor is its init */
    ST_SANDBOX_L_NETNS = 1u << 2,   /* own network namespace: only a loopback, down */
    ST_SANDBOX_L_MNTNS = 1u << 3,   /* own mount namespace */
    ST_SANDBOX_L_IPCNS = 1u << 4,   /* own System V IPC and POSIX queue namespace */
    ST_SANDBOX_L_UTSNS = 1u << 5,   /* own hostname */
    ST_SANDBOX_L_PIVOT = 1u << 6,   /* pivot_root into a minimal read-only tree + tmpfs box */
    ST_SANDBOX_L_SECCOMP = 1u << 7, /* seccomp filter (libseccomp): sockets, ptrace, mount, ... */
    ST_SANDBOX_L_LANDLOCK_FS = 1u << 8,  /* Landlock: writes only in the box, reads allowlisted */
    ST_SANDBOX_L_LANDLOCK_NET = 1u << 9, /* Landlock ABI >= 4: no TCP bind or connect */
    ST_SANDBOX_L_LANDLOCK_SCOPE = 1u
                                  << 10, /* Landlock ABI >= 6: no signals or abstract sockets out */
    ST_SANDBOX_L_NOPRIV = 1u << 11,  /* no privilege: setuid to run_uid, or userns root sans caps */
    ST_SANDBOX_L_NNP = 1u << 12,     /* no_new_privs: setuid binaries and file caps do nothing */
    ST_SANDBOX_L_RLIMITS = 1u << 13, /* CPU, address space, file size, open files, processes */
    ST_SANDBOX_L_PGROUP = 1u << 14,  /* own session and process group, killed as a whole */
};

/* The layers cfg.layers_off may name. */
#define ST_SANDBOX_L_OPTIONAL                                                                      \
    (ST_SANDBOX_L_USERNS | ST_SANDBOX_L_PIDNS | ST_SANDBOX_L_NETNS | ST_SANDBOX_L_MNTNS |          \
     ST_SANDBOX_L_IPCNS | ST_SANDBOX_L_UTSNS | ST_SANDBOX_L_SECCOMP | ST_SANDBOX_L_LANDLOCK_FS |   \
     ST_SANDBOX_L_LANDLOCK_NET | ST_SANDBOX_L_LANDLOCK_SCOPE)

/* Per-step resource limits. Zero is not "unlimited": every field must be set (cfg_init does). */
struct st_sandbox_limits {
    uint32_t cpu_s;       /* RLIMIT_CPU per process: SIGXCPU at cpu_s, SIGKILL one second later */
    uint32_t wall_ms;     /* from the step's start to SIGKILL of the whole sandbox */
    uint64_t as_bytes;    /* RLIMIT_AS per process */
    uint64_t fsize_bytes; /* RLIMIT_FSIZE: largest file a process may write */
    uint32_t nofile;      /* RLIMIT_NOFILE */
    uint32_t nproc;       /* RLIMIT_NPROC: processes and threads of the sandbox's user */
};

struct st_sandbox_cfg {
    struct st_sandbox_limits limits; /* for steps that bring none */
    uint64_t box_bytes;              /* size of the tmpfs box (pivot mode) */
    uint32_t box_inodes;             /* inodes of the tmpfs box (pivot mode) */
    uint32_t output_cap_bytes;       /* stdout and stderr tails kept, each; <= MAX_OUTPUT_CAP */
    const char *tmp_parent;          /* borrowed; where the box is made; NULL: $TMPDIR or /tmp */
    uint32_t run_uid, run_gid;       /* identity of sandboxed code when the caller is root */
    uint32_t layers_off;             /* ST_SANDBOX_L_OPTIONAL bits to leave out; normally 0 */
};

/* A file written into the box before the first step. All borrowed for the run. */
struct st_sandbox_file {
    const char *name; /* [A-Za-z0-9_.+-], 1..MAX_NAME bytes, no leading '.', no ".." */
    const void *data;
    size_t len; /* <= ST_SANDBOX_MAX_FILE_BYTES */
};

/* One program run inside the box. A step runs only if the one before exited 0. */
struct st_sandbox_step {
    const char *const *argv;                /* borrowed, NULL-terminated; argv[0] is looked up in
                                             * /usr/bin and /bin unless it holds a '/' */
    const struct st_sandbox_limits *limits; /* borrowed; NULL: cfg->limits */
};

struct st_sandbox_job {
    const struct st_sandbox_file *files; /* borrowed */
    size_t nfiles;                       /* <= ST_SANDBOX_MAX_FILES */
    const struct st_sandbox_step *steps; /* borrowed */
    size_t nsteps;                       /* 1..ST_SANDBOX_MAX_STEPS */
    const void *stdin_data;              /* borrowed; fed to the last step (others: /dev/null) */
    size_t stdin_len;                    /* <= ST_SANDBOX_MAX_STDIN_BYTES */
};

enum st_sandbox_verdict {
    ST_SANDBOX_PASS = 0,     /* every step exited 0 */
    ST_SANDBOX_FAIL_EXIT,    /* the last step exited non-zero (a failed assert, say) */
    ST_SANDBOX_FAIL_SIGNAL,  /* the last step was killed by a signal (SIGXCPU, SIGSEGV, ...) */
    ST_SANDBOX_FAIL_TIMEOUT, /* the last step ran past its wall-clock limit */
    ST_SANDBOX_FAIL_BUILD,   /* an earlier step (the compiler) failed in any of those ways */
    ST_SANDBOX_FAIL_SETUP,   /* the sandbox could not start the program: see error */
};

/*
 * The outcome. The exit fields, signal, timed_out and the tails describe the last step that
 * ran (result.step); earlier steps' output is dropped once they succeed.
 */
struct st_sandbox_result {
    enum st_sandbox_verdict verdict;
    uint32_t step;      /* index of the last step that ran, or was being started */
    uint32_t steps_run; /* steps that started */
    int exited;         /* 1: the step exited and exit_code holds its status */
    int exit_code;      /* 0..255 when exited */
    int signal;         /* the signal that ended the step, or 0 */
    int timed_out;      /* 1: killed at its wall-clock limit */
    uint64_t wall_ms;   /* from starting the sandbox to its supervisor's end, all steps */
    uint64_t cpu_ms;    /* user + system CPU of every reaped sandboxed process, all steps */
    uint32_t layers;    /* ST_SANDBOX_L_* that took effect (all steps) */
    char *stdout_tail;  /* owned, NUL-terminated; the last output_cap_bytes bytes written */
    size_t stdout_len;  /* bytes in stdout_tail (the output may hold NULs) */
    uint64_t stdout_total_bytes; /* bytes the step wrote in all */
    char *stderr_tail;           /* owned, as stdout_tail */
    size_t stderr_len;
    uint64_t stderr_total_bytes;
    char box[256];                    /* the host directory used as the box (removed) */
    int box_removed;                  /* 1 once the box directory is gone */
    char error[ST_SANDBOX_MAX_ERROR]; /* set-up, exec or clean-up trouble; "" when none */
    char note[ST_SANDBOX_MAX_ERROR];  /* layers that fell back, and why; "" when none did */
};

/* Sets defaults: 5 s CPU, 10 s wall, 512 MiB address space, 16 MiB files, 64 files, 32
 * processes; a 64 MiB / 4096-inode box; 16 KiB tails; run_uid/gid 65534; all layers. */
void st_sandbox_cfg_init(struct st_sandbox_cfg *cfg);

/* Limits for a compiler step: 20 s CPU, 30 s wall, 2 GiB, 64 MiB files, 128 files, 32 procs. */
void st_sandbox_limits_compile(struct st_sandbox_limits *lim);

/*
 * Runs job in a fresh sandbox and fills out (which it first clears; release it with
 * st_sandbox_result_release, also after an error). Blocks until every step has ended or been
 * killed and the box is removed: at most the sum of the steps' wall_ms plus a few seconds.
 * Program failures of every kind (exit, signal, timeout, exec failure, a set-up layer that could
 * not be built) are data in out, with 0 returned. Returns -EINVAL for a bad cfg or job (a file
 * name that could escape the box, no steps, a zero limit, run_uid 0), ST_ETOOBIG for inputs over
 * the ST_SANDBOX_MAX_* bounds, or a negated errno when the host cannot start a sandbox at all
 * (mkdtemp, pipe, fork failing), with out->error saying which. Not async-signal-safe; may be
 * called from several threads at once. The calling thread must not exit during the call (the
 * sandbox is killed when it does) and SIGCHLD must not be ignored.
 */
int st_sandbox_run(const struct st_sandbox_cfg *cfg, const struct st_sandbox_job *job,
                   struct st_sandbox_result *out) ST_WUR;

/* Frees the tails; leaves the other fields. NULL-safe fields; out itself must not be NULL. */
void st_sandbox_result_release(struct st_sandbox_result *out);

/* Returns a static name: "pass", "exit", "signal", "timeout", "build", "setup". */
const char *st_sandbox_verdict_name(enum st_sandbox_verdict v);

/* Writes the names of layers ("userns,pidns,...", "none" if 0) into buf; returns buf. */
const char *st_sandbox_layers_str(uint32_t layers, char *buf, size_t len);

/*
 * A single-source program ready to run: the file, its steps and the job pointing at them. The
 * struct points into itself: fill it in place and do not copy it. src is borrowed for the run.
 */
struct st_sandbox_prog {
    struct st_sandbox_file file;
    struct st_sandbox_step steps[2];
    struct st_sandbox_limits compile;
    struct st_sandbox_job job;
};

/* main.py run by "python3 main.py" (the system interpreter, /usr/bin first in PATH). */
void st_sandbox_prog_python(struct st_sandbox_prog *p, const char *src, size_t len);

/* main.c compiled by "gcc -O1 -o prog main.c" under compile (NULL: st_sandbox_limits_compile),
 * then "./prog" under cfg's limits. */
void st_sandbox_prog_c(struct st_sandbox_prog *p, const char *src, size_t len,
                       const struct st_sandbox_limits *compile);

enum st_sandbox_lang {
    ST_SANDBOX_LANG_PYTHON = 1, /* fences tagged python, py, python3 or untagged */
    ST_SANDBOX_LANG_C,          /* fences tagged c or untagged */
};

/*
 * Copies the body of the first fenced code block (``` or ~~~, three or more, up to three spaces
 * of indent) whose tag fits lang from answer[0..len) into out (cleared first). Blocks tagged for
 * another language are skipped. Returns 0, ST_ENOTFOUND when no block fits, ST_EPARSE when the
 * fitting block is never closed, or ST_ETOOBIG when answer is over MAX_ANSWER_BYTES or the block
 * over MAX_CODE_BYTES. Pure.
 */
int st_sandbox_extract_code(const char *answer, size_t len, enum st_sandbox_lang lang,
                            struct st_buf *out) ST_WUR;

#endif
