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

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/buf.h"
#include "base/status.h"
#include "engine/preflight.h"
#include "engine/run.h"
#include "target/server.h"

/* Option codes of the shared groups; a command numbers its own options from ST_CLI_O__END. */
enum {
    ST_CLI_O_URL = 256,
    ST_CLI_O_API,
    ST_CLI_O_MODEL,
    ST_CLI_O_KEYFILE,
    ST_CLI_O_HTTP,
    ST_CLI_O_INSECURE,
    ST_CLI_O_IGNORE_EOS,
    ST_CLI_O_TEMP,
    ST_CLI_O_RSEED,
    ST_CLI_O_EXTRA,
    ST_CLI_O_T_CONNECT,
    ST_CLI_O_T_HEADERS,
    ST_CLI_O_T_FIRST,
    ST_CLI_O_T_IDLE,
    ST_CLI_O_T_TOTAL,
    ST_CLI_O_GRACE,
    ST_CLI_O_MAXEVENT,
    ST_CLI_O_PROGRESS,
    ST_CLI_O_NOPROGRESS,
    ST_CLI_O_QUIET,
    ST_CLI_O_CONN__END,
};

/* The getopt_long entries of the shared group, for a command's option table. */
#define ST_CLI_CONN_LONG_OPTS                                                                      \
    {"url", required_argument, NULL, ST_CLI_O_URL},                                                \
        {"api", required_argument, NULL, ST_CLI_O_API},                                            \
        {"model", required_argument, NULL, ST_CLI_O_MODEL},                                        \
        {"api-key-file", required_argument, NULL, ST_CLI_O_KEYFILE},                               \
        {"http", required_argument, NULL, ST_CLI_O_HTTP},                                          \
        {"insecure", no_argument, NULL, ST_CLI_O_INSECURE},                                        \
        {"ignore-eos", no_argument, NULL, ST_CLI_O_IGNORE_EOS},                                    \
        {"temperature", required_argument, NULL, ST_CLI_O_TEMP},                                   \
        {"request-seed", required_argument, NULL, ST_CLI_O_RSEED},                                 \
        {"extra-body", required_argument, NULL, ST_CLI_O_EXTRA},                                   \
        {"timeout-connect", required_argument, NULL, ST_CLI_O_T_CONNECT},                          \
        {"timeout-headers", required_argument, NULL, ST_CLI_O_T_HEADERS},                          \
        {"timeout-first-token", required_argument, NULL, ST_CLI_O_T_FIRST},                        \
        {"timeout-idle", required_argument, NULL, ST_CLI_O_T_IDLE},                                \
        {"timeout-total", required_argument, NULL, ST_CLI_O_T_TOTAL},                              \
        {"grace", required_argument, NULL, ST_CLI_O_GRACE},                                        \
        {"max-event-bytes", required_argument, NULL, ST_CLI_O_MAXEVENT},                           \
        {"progress", no_argument, NULL, ST_CLI_O_PROGRESS},                                        \
        {"no-progress", no_argument, NULL, ST_CLI_O_NOPROGRESS},                                   \
    {                                                                                              \
        "quiet", no_argument, NULL, ST_CLI_O_QUIET                                                 \
    }

/* The target of a command and how requests are sent to it. */
struct st_cli_conn {
    const char *url;      /* borrowed from argv */
    const char *key_file; /* borrowed from argv */
    int progress;         /* -1 auto (stderr is a TTY), 0 off, 1 on */
    int quiet;
    struct st_buf base_url; /* owned: the normalised URL */
    struct st_buf model;    /* owned: --model, else the server's first model */
    struct st_buf key;      /* owned secret; wiped on release */
};

/* Usage lines of the shared group. */
/* Parses one option for a command: 0, 1 for --help, or an error (message in err). */
typedef int (*st_cli_opt_fn)(void *ctx, int c, const char *v, char *err, size_t errlen);

/*
 * The getopt_long loop every command shares: -h maps to help_code; each option goes to parse.
 * Returns 0 when all arguments parsed, 1 when help was asked for (the caller prints its usage),
 * or ST_EUSAGE after printing "servetune CMD: ..." on stderr (unknown option, bad value, a stray
 * argument).
 */
int st_cli_parse_args(const char *cmd, int argc, char **argv, const struct option *opts,
                      int help_code, st_cli_opt_fn parse, void *ctx);

void st_cli_conn_usage(FILE *f);
void st_cli_conn_init(struct st_cli_conn *t);
void st_cli_conn_release(struct st_cli_conn *t);
/* Request and timeout defaults of a command that runs long requests (first token 900 s...). */
void st_cli_cfg_defaults(struct st_load_cfg *cfg);
/*
 * Parses one option of the shared group (ST_CLI_O_URL <= c < ST_CLI_O_CONN__END) into t and cfg.
 * Returns 0 or ST_EUSAGE (err names the option and what was expected).
 */
int st_cli_conn_opt(struct st_cli_conn *t, struct st_load_cfg *cfg, int c, const char *v, char *err,
                    size_t errlen) ST_WUR;
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

/* Called about every every_ns while a load runs (metrics scrapes); may block briefly. */
typedef void (*st_cli_tick_fn)(void *ctx);

struct st_cli_watch {
    const char *cmd;   /* "bench", "sweep"...: prefixes the messages */
    const char *label; /* shown before the progress bar (a point's name), or NULL */
    int progress;      /* draw a progress bar on stderr */
    st_cli_tick_fn tick;
    void *tick_ctx;
    uint64_t tick_every_ns;
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

/*
 * Reads a whole regular file of at most max bytes into out (appended; NUL-terminated). Returns 0,
 * ST_ETOOBIG or a negated errno (err: "NAME: reason").
 */
int st_cli_read_file(const char *path, size_t max, struct st_buf *out, char *err,
                     size_t errlen) ST_WUR;
/* Creates a directory (and its parents) with mode 0755; an existing one is fine. */
int st_cli_mkdirs(const char *path, char *err, size_t errlen) ST_WUR;

#endif
