/*
 * The --workload family of options shared by bench, sweep and probe: the kind and its parameters
 * (--input-len, --output-len, --prefix-frac, --groups, --zipf, --turns, --needles, --mix,
 * --len-tolerance), the inputs the workload is cut from (--corpus DIR|FILE.jsonl, --dataset FILE,
 * --trace FILE) and the window map (--windows FILE: read when it exists, else written after the
 * build). This file reads those files and hands their bytes to src/workload, which stays pure.
 *
 * Thread context: the controlling thread, before any load. The built workload is immutable and
 * serves every worker through st_workload_source.
 */
#ifndef ST_CLI_WLOPTS_H
#define ST_CLI_WLOPTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/buf.h"
#include "base/status.h"
#include "cli/common.h"
#include "workload/corpus.h"
#include "workload/workload.h"

/* Rows of the group (st_cli_wl_opts), not counting the end. */
#define ST_CLI_WL_NOPTS 14

/* Largest corpus, dataset, trace or window-map file read (bytes). */
#define ST_CLI_WL_MAX_FILE (2ull << 30)

struct st_cli_wl {
    struct st_wl_params p; /* dataset/trace bytes point into file once built */
    int kind_given;        /* --workload was given */
    int inlen_given;
    int outlen_given;
    int prefix_given;
    const char *corpus_path;  /* borrowed from argv; NULL: the built-in corpus */
    const char *windows_path; /* borrowed; read when it exists, else written after the build */
    const char *dataset_path;
    const char *trace_path;
    int windows_read;        /* the map came from windows_path */
    struct st_corpus corpus; /* owned once built */
    int have_corpus;
    struct st_buf file;     /* owned: the dataset or trace bytes */
    struct st_buf windows;  /* owned: the map read, or the map of the build */
    struct st_workload *wl; /* owned once built */
};

/* What a load command (bench, sweep, probe) starts from: st_cli_cfg_defaults, st_cli_conn_init,
 * st_cli_wl_init; st_cli_load_release releases conn and w. */
void st_cli_load_init(struct st_cli_conn *conn, struct st_load_cfg *cfg, struct st_cli_wl *w);
void st_cli_load_release(struct st_cli_conn *conn, struct st_cli_wl *w);
/* Usage lines of the group. */
void st_cli_wl_usage(FILE *f);
/* Defaults: no kind (the caller picks), 1 group, tolerance 0.01. */
void st_cli_wl_init(struct st_cli_wl *w);
void st_cli_wl_release(struct st_cli_wl *w);
/* The rows of the group, bound to w, into out (ST_CLI_WL_NOPTS and the end). */
void st_cli_wl_opts(struct st_cli_wl *w, struct st_opt *out);
/*
 * The ST_OPT_FN parser of --input-len (set 0) and --output-len (set 1), "N" or "N:MAX" tokens;
 * to.ctx is the struct st_cli_wl. For an alias of either (probe's --doc-len).
 */
int st_cli_wl_len_opt(const struct st_opt *opt, const char *v, char *err, size_t errlen) ST_WUR;
/*
 * st_cli_parse for a load command (bench, sweep, probe): the shared target group, the workload
 * group and own (rows of own override the groups' rows of the same flag). Returns as st_cli_parse.
 */
int st_cli_load_parse(const char *name, void (*usage)(FILE *f), struct st_cli_conn *conn,
                      struct st_load_cfg *cfg, struct st_cli_wl *w, const struct st_opt *own,
                      int argc, char **argv);
/*
 * Cross-option checks once every option is read: a kind that needs a file has it (--dataset,
 * --trace), options that belong to another kind are refused. Returns 0 or ST_EUSAGE.
 */
int st_cli_wl_check(struct st_cli_wl *w, char *err, size_t errlen) ST_WUR;
/*
 * Longest prompt plus output a request of this workload asks for, in tokens (for the check
 * against the server's context before any load); 0 when only the file knows (dataset, trace).
 */
uint64_t st_cli_wl_max_request_tokens(const struct st_cli_wl *w);

/*
 * Refuses the workload when its longest request is over t's context, before anything is sent;
 * else w->p.context_tokens is that context (0: unknown). Returns 0 or ST_EUSAGE (err).
 */
int st_cli_wl_fit(struct st_cli_wl *w, const struct st_target *t, char *err, size_t errlen) ST_WUR;

/*
 * Reads the inputs and builds the workload of requests items (p.requests): the corpus (the
 * built-in one sized for the requests when --corpus is absent), the dataset or trace file, the
 * window map when --windows names an existing file. chat selects messages or prompts; count
 * speaks for the target's tokenizer. Returns 0; ST_EUSAGE or ST_EPARSE for bad input (err says
 * which file and line and what was expected); a negated errno when a file cannot be read.
 */
int st_cli_wl_build(struct st_cli_wl *w, uint64_t requests, int chat, st_tok_counter_fn count,
                    void *count_ctx, char *err, size_t errlen) ST_WUR;
/*
 * Writes the built workload's window map to path (atomically), and also to --windows when that
 * file did not exist. path may be NULL. Returns 0 or a negated errno (err names the file).
 */
int st_cli_wl_save_windows(struct st_cli_wl *w, const char *path, char *err, size_t errlen) ST_WUR;

/*
 * Opens the "workload" member of a command's JSON and writes what the workload is: kind, lengths
 * (output_len_max when output_max), the shared-prefix shape, seed, items, length error and
 * counter calls. The caller adds its own members and closes it.
 */
void st_cli_wl_json(struct st_jw *w, const struct st_cli_wl *wl, int output_max);

/*
 * A window onto a built workload for one load: request id is item base + id, and members (JSON
 * object members without braces, e.g. "\"cache_state\":\"warm\"", or NULL) are added in front
 * of every item's receipt tag, so each receipt says the point and cache state it ran in.
 */
struct st_cli_slice {
    const struct st_workload *wl; /* borrowed; outlives the load */
    uint64_t base;
    const char *members; /* borrowed; outlives the load */
    int64_t max_tokens;  /* >= 0: every request asks for this many output tokens instead */
};

/* The engine's st_req_source_fn over a struct st_cli_slice. Thread-safe (reads only). */
int st_cli_slice_source(const void *ctx, uint64_t id, struct st_req_item *item,
                        struct st_buf *scratch);

#endif
