/*
 * What the load-driving subcommands (bench, sweep, probe) share: the target and request options
 * (--url, --api, --model, --api-key-file, --http, timeouts, sampling fields, progress), the API
 * key, the preflight, and the loop that runs one load while it draws progress and takes
 * SIGINT/SIGTERM. Only cli/ prints; every function here that can fail returns a code and a message
 * in err for its caller to print with the command's name.
 *
 * Thread context: the controlling (main) thread only. st_cli_signals_block must run before the
 * first load starts, so worker threads inherit the mask.
 */
#ifndef ST_CLI_COMMON_H
#define ST_CLI_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/status.h"
#include "cli/args.h"
#include "engine/preflight.h"
#include "engine/run.h"
#include "target/server.h"

/* Rows of the shared group (st_cli_conn_opts), not counting the end. */
#define ST_CLI_CONN_NOPTS 20

/* The target of a command and how requests are sent to it. */
struct st_cli_conn {
    const char *url;       /* borrowed from argv */
    const char *key_file;  /* borrowed from argv */
    const char *model_arg; /* borrowed from argv: --model */
    int progress;          /* -1 auto (stderr is a TTY), 0 off, 1 on */
    int quiet;
    struct st_buf base_url; /* owned: the normalised URL */
    struct st_buf model;    /* owned: --model, else the server's first model */
    struct st_buf key;      /* owned secret; wiped on release */
};

/* A command's options: its tables and what it does with operands. */
struct st_cli_cmd {
    const char *name;                   /* "bench", "campaign check": after "servetune " */
    void (*usage)(FILE *f);             /* printed on stdout for -h and --help */
    const struct st_opt *const *tables; /* NULL-terminated; a later row overrides an earlier one
                                           of the same flag */
    int *operand;    /* NULL: operands are refused; else the index of the first (argc: none) */
    int getopt_says; /* getopt_long names a bad option itself, then usage goes to stderr */
};

/*
 * The getopt_long loop every command runs: -h and --help print the usage on stdout; each option
 * goes to its row (st_opt_apply); getopt_long moves operands to the end. Returns -1 when every
 * argument parsed, ST_EXIT_OK after the usage, or ST_EXIT_USAGE after printing
 * "servetune NAME: ..." on stderr (unknown or incomplete option, bad value, a stray operand).
 */
int st_cli_parse(const struct st_cli_cmd *cmd, int argc, char **argv);

/* Usage lines of the shared group. */
void st_cli_conn_usage(FILE *f);
void st_cli_conn_init(struct st_cli_conn *t);
void st_cli_conn_release(struct st_cli_conn *t);
/* Request and timeout defaults of a command that runs long requests (first token 900 s...). */
void st_cli_cfg_defaults(struct st_load_cfg *cfg);
/* The rows of the shared group, bound to t and cfg, into out (ST_CLI_CONN_NOPTS and the end). */
void st_cli_conn_opts(struct st_cli_conn *t, struct st_load_cfg *cfg, struct st_opt *out);
/*
 * After parsing: --url is required and normalised, --extra-body must be an object, the API key is
 * read (a file only its owner can read, else $SERVETUNE_API_KEY), progress is decided, and cfg's
 * base_url and api_key point into t. Returns 0 or ST_EUSAGE.
 */
int st_cli_conn_finish(struct st_cli_conn *t, struct st_load_cfg *cfg, char *err,
                       size_t errlen) ST_WUR;
/*
 * GET /v1/models: the server answers and names a model; cfg->model is --model or the first one,
 * cfg->time_scale the simulator's X-Sim-Time-Scale (1 elsewhere). Returns 0 or ST_EUSAGE.
 */
int st_cli_conn_preflight(struct st_cli_conn *t, struct st_load_cfg *cfg, struct st_preflight *pf,
                          char *err, size_t errlen) ST_WUR;

/*
 * Opens the target of cfg (after st_cli_conn_preflight) through src/target: its kind, routes and
 * figures. Returns 0, or ST_EUSAGE with the reason in err; release t with st_target_release
 * either way.
 */
int st_cli_target_open(const struct st_load_cfg *cfg, struct st_target *t, char *err,
                       size_t errlen) ST_WUR;
/*
 * What a load command does once its options are read: st_cli_conn_finish, st_cli_conn_preflight,
 * and st_cli_target_open when t is not NULL (release t either way). Returns 0 or ST_EUSAGE (err).
 */
int st_cli_conn_open(struct st_cli_conn *c, struct st_load_cfg *cfg, struct st_target *t, char *err,
                     size_t errlen) ST_WUR;
/* The largest request (prompt + output) t accepts in tokens, and where that comes from; 0 when
 * the server does not say. */
uint64_t st_cli_target_context(const struct st_target *t, const char **what);

/* Workers for the load in cfg when --workers was not given: one per 4,096 streams, <= CPUs. */
uint32_t st_cli_default_workers(const struct st_load_cfg *cfg);
/* Raises the descriptor soft limit toward the hard one when the load needs more streams. */
void st_cli_raise_nofile(const struct st_load_cfg *cfg);
/* Blocks SIGINT/SIGTERM (taken by st_cli_run_load) and ignores SIGPIPE. Call before any load. */
void st_cli_signals_block(void);
/* 1 when SIGINT or SIGTERM arrived outside a load (it is consumed): the command should stop. */
int st_cli_stop_requested(void);

struct st_cli_watch {
    const char *cmd;   /* "bench", "sweep"...: prefixes the messages */
    const char *label; /* shown before the progress bar (a point's name), or NULL */
    int progress;      /* draw a progress bar on stderr */
};

/*
 * Starts a load with cfg and runs it to the end, drawing progress and taking SIGINT/SIGTERM
 * (the first stops issuing and gives in-flight requests cfg->grace_ms; a second aborts them).
 * Returns 0 with res filled (release it), or the start error (ST_EUSAGE or a negated errno, err
 * filled); res->interrupted says a signal stopped it.
 */
/* How well the simulator kept its virtual clock over every load st_cli_run_load ran in this
 * process (a sweep's or probe's, cache protocol included). */
const struct st_sim_clock *st_cli_sim_clock(void);
int st_cli_run_load(const struct st_load_cfg *cfg, const struct st_cli_watch *w,
                    struct st_run_result *res, char *err, size_t errlen) ST_WUR;

/* JSON members of the commands' outputs: key: v, or null for NaN (num), for have 0 (u64_if).
 * A string or null is st_jw_knstr (base/json.h). */
void st_cli_jw_num(struct st_jw *w, const char *key, double v);
void st_cli_jw_u64_if(struct st_jw *w, const char *key, int have, uint64_t v);
/* The first members of a sweep's or probe's JSON: tool, kind, interrupted, url, model, the api
 * (with_api), the server (its kind, sim, evidence), time_scale and times, from cfg and t. */
void st_cli_jw_head(struct st_jw *w, const char *kind, int interrupted,
                    const struct st_load_cfg *cfg, int with_api, const struct st_target *t);

/*
 * Reads a whole regular file of at most max bytes into out (appended; NUL-terminated). Returns 0,
 * ST_ETOOBIG or a negated errno (err: "NAME: reason").
 */
int st_cli_read_file(const char *path, size_t max, struct st_buf *out, char *err,
                     size_t errlen) ST_WUR;
/* Appends one printf-formatted reason to the NUL-terminated why (cap bytes), "; "-separated;
 * truncated to fit. */
void st_cli_add_reason(char *why, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/*
 * Writes js (atomically) to path and to DIR/name when dir is given; either may be NULL. Returns
 * 0, or -1 after printing "servetune CMD: cannot write PATH: reason" for each that failed.
 */
int st_cli_write_out(const char *cmd, const struct st_buf *js, const char *path, const char *dir,
                     const char *name) ST_WUR;
/*
 * Opens a point's receipts file DIR/points/STEM.jsonl into r (dir NULL: counted, not written) and
 * puts its path in path. On failure writes "cannot create receipts file PATH: reason" to err, sets
 * *io_error and returns the negated errno.
 */
struct st_receipts;
int st_cli_open_receipts(const char *dir, const char *stem, struct st_receipts *r, char *path,
                         size_t cap, int *io_error, char *err, size_t errlen) ST_WUR;
/* Creates a directory (and its parents) with mode 0755; an existing one is fine. */
int st_cli_mkdirs(const char *path, char *err, size_t errlen) ST_WUR;

#endif
