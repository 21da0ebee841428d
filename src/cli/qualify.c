/*
 * servetune qualify: runs a qualification suite (the screening set, the quality questions or a
 * user's YAML file) against a server and prints a pass/fail table; writes the JSON verdict
 * (checks[], passed, total, the comparison with a baseline) and one receipt per request. Against
 * servetune sim every request carries X-Servetune-Expect, so the sim's error rate decides the
 * answers, and the output says so. Exit: 0 all passed (or, with --compare, no regression), 1 a
 * check failed (a regression), 2 bad usage or suite, 3 results could not be written.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/xalloc.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "qual/check.h"
#include "qual/runner.h"
#include "qual/suite.h"
#include "target/server.h"

#define CMD "servetune qualify"

enum st_qstatus {
    Q_PASS = 0,
    Q_FAIL,
    Q_UNSUPPORTED,
};

static const char *const qstatus_names[] = {"pass", "fail", "unsupported"};

struct result {
    char name[64];
    enum st_qstatus status;
    char evidence[512];
    char note[128];
    uint32_t requests;
    uint32_t runs, runs_passed; /* --repeat */
    double tps[3];              /* throughput: medians of tokens/s per category */
    int has_tps;
};

struct qopts {
    struct st_cli_conn conn;
    struct st_load_cfg cfg;
    const char *suite;
    const char *out_dir;
    const char *json_path;
    const char *compare;
    const char *effort;
    const char *ffmpeg;
    uint64_t seed;
    uint64_t context;
    uint64_t queued;
    uint64_t repeat;     /* runs of each check, seeds seed .. seed + repeat - 1 */
    double cpt;          /* characters a token of the long checks' prose on the target */
    const char *cpt_src; /* how cpt was found */
};

static const char *const screening_builtin[] = {
    "arithmetic", "json",           "multi-turn",      "ocr",    "multi-image",
    "video",      "long-retrieval", "long-text-image", "queued", "throughput-categories",
};

static void usage(FILE *f)
{
    fputs("usage: servetune qualify --url URL [--suite screening|quality|FILE.yaml] [options]\n"
          "\n"
          "Asks the server questions whose answers are known and verifies them: the screening\n"
          "checks (arithmetic, json, multi-turn, ocr, multi-image, video, long-retrieval,\n"
          "long-text-image, queued, throughput-categories) and quality questions (exact, regex,\n"
          "numeric, schema, code run in a sandbox).\n"
          "\n",
          f);
    st_cli_conn_usage(f);
    fputs("qualify:\n"
          "  --suite NAME|FILE         screening (default), quality, or a suite YAML file\n"
          "  --reasoning-effort E      sent as reasoning_effort (low, medium, high...)\n"
          "  --seed N                  seed of every generated check and request (default 1)\n"
          "  --context N               context tokens for long checks (default: the server's,\n"
          "                            else 131072)\n"
          "  --queued N                requests of the queued check (default: twice the\n"
          "                            server's slots where it says, at least 8)\n"
          "  --repeat N                run each check N times, seeds SEED .. SEED+N-1; it\n"
          "                            passes when every run does (default 1)\n"
          "  --ffmpeg PATH             ffmpeg for the video check (default /usr/bin/ffmpeg;\n"
          "                            without it the clip goes as frames)\n"
          "  --compare BASELINE.json   regressions against an earlier qualify JSON\n"
          "output:\n"
          "  --out DIR                 qualify.json, receipts.jsonl, table.txt\n"
          "  --json FILE               the JSON (also)\n",
          f);
}

/* Parses argv into o. Returns -1 to go on, or the exit code (help, bad usage). */
static int parse(struct qopts *o, int argc, char **argv)
{
    struct st_opt conn[ST_CLI_CONN_NOPTS + 1];
    st_cli_conn_opts(&o->conn, &o->cfg, conn);
    const struct st_opt own[] = {
        {ST_OPT_STR("--suite", &o->suite)},
        {ST_OPT_STR("--reasoning-effort", &o->effort)},
        {ST_OPT_U64("--seed", &o->seed, 0, UINT64_MAX / 2)},
        {ST_OPT_U64("--context", &o->context, 1024, 1u << 24)},
        {ST_OPT_U64("--queued", &o->queued, 1, 256)},
        {ST_OPT_U64("--repeat", &o->repeat, 1, 100)},
        {ST_OPT_STR("--ffmpeg", &o->ffmpeg)},
        {ST_OPT_STR("--compare", &o->compare)},
        {ST_OPT_STR("--out", &o->out_dir)},
        {ST_OPT_STR("--json", &o->json_path)},
        {.flag = NULL},
    };
    const struct st_opt *const tables[] = {conn, own, NULL};
    struct st_cli_cmd cmd = {.name = "qualify", .usage = usage, .tables = tables};
    return st_cli_parse(&cmd, argc, argv);
}

/* ---- the suite ---- */

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Finds suites/NAME.yaml beside the working directory or the executable (and its parent, for a
 * build directory inside the source tree). */
static int find_suite(const char *name, char *out, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash != NULL) {
        *slash = '\0';
    }
    const char *bases[3] = {".", exe, NULL};
    char parent[PATH_MAX + 8];
    snprintf(parent, sizeof(parent), "%s/..", exe);
    bases[2] = parent;
    for (int i = 0; i < 3; i++) {
        if (bases[i][0] == '\0') {
            continue;
        }
        snprintf(out, cap, "%s/suites/%s.yaml", bases[i], name);
        if (file_exists(out)) {
            return 0;
        }
    }
    return ST_ENOTFOUND;
}

static int load_suite(const char *arg, struct st_suite *s, char *err, size_t errlen)
{
    char path[PATH_MAX + 64];
    int named =
        strchr(arg, '/') == NULL && strstr(arg, ".yaml") == NULL && strstr(arg, ".yml") == NULL;
    if (named) {
        if (find_suite(arg, path, sizeof(path)) != 0) {
            if (strcmp(arg, "screening") == 0) {
                /* The built-in list, when suites/ is not installed. */
                memset(s, 0, sizeof(*s));
                snprintf(s->name, sizeof(s->name), "screening");
                size_t n = sizeof(screening_builtin) / sizeof(screening_builtin[0]);
                s->items = st_xcalloc(n, sizeof(*s->items));
                for (size_t i = 0; i < n; i++) {
                    s->items[i].builtin = 1;
                    if (st_check_kind_of(screening_builtin[i], &s->items[i].kind) != 0) {
                        return ST_EPARSE;
                    }
                    snprintf(s->items[i].name, sizeof(s->items[i].name), "%s",
                             screening_builtin[i]);
                }
                s->n = (uint32_t)n;
                return 0;
            }
            snprintf(err, errlen,
                     "no suite '%s' (looked for suites/%s.yaml here and beside the "
                     "executable)",
                     arg, arg);
            return ST_EUSAGE;
        }
    } else {
        snprintf(path, sizeof(path), "%s", arg);
    }
    struct st_buf text;
    st_buf_init(&text);
    int rc = st_cli_read_file(path, ST_SUITE_MAX_BYTES, &text, err, errlen);
    if (rc == 0) {
        rc = st_suite_parse(path, text.data != NULL ? text.data : "", text.len, s, err, errlen);
    }
    st_buf_release(&text);
    if (rc == 0 && s->name[0] == '\0') {
        snprintf(s->name, sizeof(s->name), "%s", named ? arg : "custom");
    }
    return rc;
}

/* ---- receipts ---- */

struct receipts {
    int fd; /* -1 when none */
};

static int receipt(struct receipts *r, const char *check, uint32_t step, const char *id,
                   const struct st_qual_reply *rep, const char *verdict, const char *evidence)
{
    if (r->fd < 0) {
        return 0;
    }
    struct st_buf b;
    st_buf_init(&b);
    struct st_jw w;
    st_jw_init(&w, &b);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "check", check);
    st_jw_ku64(&w, "step", step);
    st_jw_kstr(&w, "request_id", id);
    st_jw_ki64(&w, "http_status", rep->status);
    st_jw_kf64(&w, "elapsed_s", rep->elapsed_s);
    st_jw_ku64(&w, "prompt_tokens", rep->prompt_tokens);
    st_jw_ku64(&w, "completion_tokens", rep->completion_tokens);
    st_jw_kstr(&w, "verdict", verdict);
    st_jw_kstr(&w, "evidence", evidence);
    if (rep->error[0] != '\0') {
        st_jw_kstr(&w, "error", rep->error);
    }
    st_jw_kstr(&w, "finish_reason", rep->finish_reason);
    st_jw_key(&w, "reply");
    st_jw_strn(&w, rep->content.data != NULL ? rep->content.data : "", rep->content.len);
    st_jw_obj_close(&w);
    st_buf_putc(&b, '\n');
    int rc = 0;
    size_t off = 0;
    while (off < b.len) {
        ssize_t n = write(r->fd, b.data + off, b.len - off);
        if (n < 0) {
            rc = -errno;
            break;
        }
        off += (size_t)n;
    }
    if (rc == 0 && fsync(r->fd) != 0) {
        rc = -errno;
    }
    st_buf_release(&b);
    return rc;
}

/* ---- running ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Runs steps[0..n) of one check (concurrently when asked) and folds their verdicts into res. */
static int run_steps(const struct st_qual_client *cl, double scale, const char *name, uint64_t seed,
                     struct st_check_step *const *steps, uint32_t n, int concurrent,
                     struct receipts *rc_out, struct result *res)
{
    struct st_qual_reply *reps = st_xcalloc(n, sizeof(*reps));
    char(*ids)[96] = st_xcalloc(n, sizeof(*ids));
    const char **idp = st_xcalloc(n, sizeof(*idp));
    for (uint32_t i = 0; i < n; i++) {
        st_qual_reply_init(&reps[i]);
        snprintf(ids[i], sizeof(ids[i]), "qual-%llu-%s-%u", (unsigned long long)seed, name, i);
        idp[i] = ids[i];
    }
    int rc = 0;
    uint32_t batch = concurrent ? n : 1;
    for (uint32_t i = 0; i < n && rc == 0; i += batch) {
        rc = st_qual_send(cl, (const struct st_check_step *const *)steps + i, idp + i, batch,
                          reps + i);
        /* A server that refuses response_format is sent the plain instruction. */
        if (rc == 0 && !cl->no_response_format && steps[i]->response_format.len > 0 &&
            reps[i].status >= 400 && reps[i].status < 500) {
            struct st_qual_client plain = *cl;
            plain.no_response_format = 1;
            st_qual_reply_release(&reps[i]);
            st_qual_reply_init(&reps[i]);
            rc = st_qual_send(&plain, (const struct st_check_step *const *)steps + i, idp + i, 1,
                              reps + i);
        }
    }
    res->requests = n;
    res->status = Q_PASS;
    uint32_t passed = 0;
    double tps[3][3];
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        const struct st_qual_reply *r = &reps[i];
        char ev[512] = "";
        const char *verdict = "pass";
        if (r->status < 200 || r->status >= 300 || r->error[0] != '\0') {
            int unsup = steps[i]->media && st_check_media_refused(r->status, r->error);
            snprintf(ev, sizeof(ev), "%s: %s", unsup ? "the server refused the media" : "request",
                     r->error[0] ? r->error : "no answer");
            verdict = unsup ? "unsupported" : "fail";
            if (unsup && res->status == Q_PASS) {
                res->status = Q_UNSUPPORTED;
                snprintf(res->evidence, sizeof(res->evidence), "%s", ev);
            } else if (!unsup && res->status != Q_FAIL) {
                res->status = Q_FAIL;
                snprintf(res->evidence, sizeof(res->evidence), "step %u: %s", i + 1, ev);
            }
        } else {
            int ok = st_verify(&steps[i]->v, r->content.data ? r->content.data : "", r->content.len,
                               ev, sizeof(ev));
            if (ok == 1 && steps[i]->ignore_eos && r->completion_tokens != steps[i]->max_tokens) {
                snprintf(ev, sizeof(ev), "%llu completion tokens, not the fixed %u",
                         (unsigned long long)r->completion_tokens, steps[i]->max_tokens);
                ok = 0;
            }
            /* (On the sim the cap is the staged answer's length, so "length" says nothing.) */
            if (ok != 1 && strcmp(r->finish_reason, "length") == 0 && !cl->sim) {
                size_t el = strlen(ev);
                snprintf(ev + el, sizeof(ev) - el, " (cut at max_tokens %u)", steps[i]->max_tokens);
            }
            if (ok == 1) {
                passed++;
            } else {
                verdict = "fail";
                if (res->status != Q_FAIL) {
                    res->status = Q_FAIL;
                    if (n > 1) {
                        snprintf(res->evidence, sizeof(res->evidence), "step %u: %s", i + 1, ev);
                    } else {
                        snprintf(res->evidence, sizeof(res->evidence), "%s", ev);
                    }
                }
            }
            if (steps[i]->ignore_eos && i < 9) {
                /* Decode rate: the tokens after the first over the time from the first content
                 * chunk to the last, in the simulator's virtual seconds when it stamped them,
                 * else wall seconds (scale: an unstamped time-scaled server's factor). */
                double dec =
                    r->has_vt ? r->last_vt_s - r->first_vt_s : (r->last_s - r->first_s) * scale;
                tps[i % 3][i / 3] = r->streamed && dec > 0 && r->completion_tokens > 1
                                        ? (double)(r->completion_tokens - 1) / dec
                                        : 0;
            }
        }
        st_check_one_line(ev);
        int wrc = receipt(rc_out, name, i, ids[i], r, verdict, ev);
        if (wrc != 0) {
            rc = wrc;
        }
        if (n == 1 && res->status == Q_PASS) {
            snprintf(res->evidence, sizeof(res->evidence), "%s", ev);
        }
    }
    st_check_one_line(res->evidence);
    if (rc == 0 && res->status == Q_PASS && n > 1) {
        snprintf(res->evidence, sizeof(res->evidence), "%u/%u requests verified", passed, n);
    }
    if (rc == 0 && n == 9 && steps[0]->ignore_eos && res->status == Q_PASS) {
        for (int k = 0; k < 3; k++) {
            qsort(tps[k], 3, sizeof(double), cmp_double);
            res->tps[k] = tps[k][1];
        }
        res->has_tps = 1;
        snprintf(res->evidence, sizeof(res->evidence),
                 "median decode tokens/s%s: code %.2f, Chinese %.2f, reasoning %.2f",
                 scale != 1.0 ? " (sim virtual time)" : "", res->tps[0], res->tps[1], res->tps[2]);
    }
    for (uint32_t i = 0; i < n; i++) {
        st_qual_reply_release(&reps[i]);
    }
    free(reps);
    free(ids);
    free(idp);
    return rc;
}

/* ---- output ---- */

struct compare {
    int loaded;
    char baseline[PATH_MAX];
    uint32_t regressions;
    struct st_buf list; /* JSON array members */
};

static int write_atomic(const char *path, const struct st_buf *b, char *err, size_t errlen)
{
    char tmp[PATH_MAX + 16];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "%.900s: %s", tmp, strerror(errno));
        return -errno;
    }
    size_t off = 0;
    int rc = 0;
    while (off < b->len) {
        ssize_t n = write(fd, b->data + off, b->len - off);
        if (n < 0) {
            rc = -errno;
            break;
        }
        off += (size_t)n;
    }
    if (rc == 0 && fsync(fd) != 0) {
        rc = -errno;
    }
    if (close(fd) != 0 && rc == 0) {
        rc = -errno;
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        rc = -errno;
    }
    if (rc != 0) {
        snprintf(err, errlen, "%.900s: %s", path, strerror(-rc));
        unlink(tmp);
    }
    return rc;
}

/* Reads the baseline's checks and marks each regression (baseline pass, this run fail). */
static int load_compare(const char *path, const char *suite, uint64_t seed, uint64_t repeat,
                        const struct result *res, uint32_t n, struct compare *cmp, char *err,
                        size_t errlen)
{
    struct st_buf text;
    st_buf_init(&text);
    int rc = st_cli_read_file(path, 64u << 20, &text, err, errlen);
    struct st_json d;
    st_json_init(&d, 0);
    if (rc == 0 &&
        (st_json_parse(&d, text.data, text.len) != 0 || st_json_type(&d, 0) != ST_JSON_OBJECT)) {
        snprintf(err, errlen, "%s: not a qualify JSON object", path);
        rc = ST_EUSAGE;
    }
    int checks = rc == 0 ? st_json_get(&d, 0, "checks") : -1;
    if (rc == 0 && st_json_type(&d, checks) != ST_JSON_ARRAY) {
        snprintf(err, errlen, "%s: no checks[]", path);
        rc = ST_EUSAGE;
    }
    if (rc == 0) {
        int sv = st_json_get(&d, 0, "suite");
        int sd = st_json_get(&d, 0, "seed");
        int64_t bseed = -1, brep = 1;
        if (sv < 0 || !st_json_streq(&d, sv, suite)) {
            snprintf(err, errlen, "%s: a different suite (this run: %s)", path, suite);
            rc = ST_EUSAGE;
        } else if (sd < 0 || st_json_i64(&d, sd, &bseed) != 0 || (uint64_t)bseed != seed) {
            snprintf(err, errlen, "%s: seed %lld, this run %llu: compare with the same seed", path,
                     (long long)bseed, (unsigned long long)seed);
            rc = ST_EUSAGE;
        } else if (st_json_get(&d, 0, "repeat") >= 0 &&
                   (st_json_i64(&d, st_json_get(&d, 0, "repeat"), &brep) != 0 ||
                    (uint64_t)brep != repeat)) {
            snprintf(err, errlen, "%s: repeat %lld, this run %llu: compare with the same repeat",
                     path, (long long)brep, (unsigned long long)repeat);
            rc = ST_EUSAGE;
        }
    }
    cmp->loaded = rc == 0;
    snprintf(cmp->baseline, sizeof(cmp->baseline), "%s", path);
    st_buf_init(&cmp->list);
    struct st_jw w;
    st_jw_init(&w, &cmp->list);
    st_jw_arr_open(&w);
    for (uint32_t i = 0; rc == 0 && i < n; i++) {
        for (int c = st_json_first(&d, checks); c >= 0; c = st_json_next(&d, checks, c)) {
            int nm = st_json_get(&d, c, "name");
            int stt = st_json_get(&d, c, "status");
            if (nm < 0 || stt < 0 || !st_json_streq(&d, nm, res[i].name)) {
                continue;
            }
            int was_pass = st_json_streq(&d, stt, "pass");
            /* Unsupported counts too: an arm may not pass by turning vision off (seed 000). */
            if (was_pass && res[i].status != Q_PASS) {
                cmp->regressions++;
                st_jw_obj_open(&w);
                st_jw_kstr(&w, "name", res[i].name);
                st_jw_kstr(&w, "baseline", "pass");
                st_jw_kstr(&w, "arm", qstatus_names[res[i].status]);
                st_jw_kstr(&w, "evidence", res[i].evidence);
                st_jw_obj_close(&w);
            }
        }
    }
    st_jw_arr_close(&w);
    st_json_release(&d);
    st_buf_release(&text);
    return rc;
}

static void write_json(struct st_buf *b, const struct qopts *o, const struct st_suite *s,
                       const char *model, int sim, uint64_t ctx, const struct result *res,
                       uint32_t n, const struct compare *cmp)
{
    uint32_t passed = 0, unsup = 0;
    for (uint32_t i = 0; i < n; i++) {
        passed += res[i].status == Q_PASS;
        unsup += res[i].status == Q_UNSUPPORTED;
    }
    struct st_jw w;
    st_jw_init(&w, b);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "suite", s->name);
    st_jw_ku64(&w, "seed", o->seed);
    st_jw_ku64(&w, "repeat", o->repeat);
    st_jw_kstr(&w, "url", o->cfg.base_url);
    st_jw_kstr(&w, "model", model);
    st_jw_kbool(&w, "sim", sim != 0);
    if (sim == 1) {
        st_jw_kstr(&w, "sim_note",
                   "answers come from servetune sim: X-Servetune-Expect carried each verifier's "
                   "answer and the sim's quality.error_rate decided right or wrong");
    } else if (sim == 2) {
        st_jw_kstr(
            &w, "sim_note",
            "servetune sim in fixed mode: it answers with filler and ignores "
            "X-Servetune-Expect, so verified checks fail; run sim --profile to stage answers");
    }
    st_jw_ku64(&w, "context_tokens", ctx);
    st_jw_kf64(&w, "chars_per_token", o->cpt);
    st_jw_kstr(&w, "chars_per_token_source", o->cpt_src);
    if (o->effort != NULL) {
        st_jw_kstr(&w, "reasoning_effort", o->effort);
    }
    st_jw_ku64(&w, "passed", passed);
    st_jw_ku64(&w, "failed", n - passed - unsup);
    st_jw_ku64(&w, "unsupported", unsup);
    st_jw_ku64(&w, "total", n);
    st_jw_key(&w, "checks");
    st_jw_arr_open(&w);
    for (uint32_t i = 0; i < n; i++) {
        st_jw_obj_open(&w);
        st_jw_kstr(&w, "name", res[i].name);
        st_jw_kstr(&w, "status", qstatus_names[res[i].status]);
        st_jw_kstr(&w, "evidence", res[i].evidence);
        st_jw_kstr(&w, "what", res[i].note);
        st_jw_ku64(&w, "requests", res[i].requests);
        st_jw_ku64(&w, "runs", res[i].runs);
        st_jw_ku64(&w, "runs_passed", res[i].runs_passed);
        if (res[i].has_tps) {
            st_jw_key(&w, "median_tokens_per_s");
            st_jw_obj_open(&w);
            st_jw_kf64(&w, "code", res[i].tps[0]);
            st_jw_kf64(&w, "chinese", res[i].tps[1]);
            st_jw_kf64(&w, "reasoning", res[i].tps[2]);
            st_jw_obj_close(&w);
        }
        st_jw_obj_close(&w);
    }
    st_jw_arr_close(&w);
    if (cmp->loaded) {
        st_jw_key(&w, "compare");
        st_jw_obj_open(&w);
        st_jw_kstr(&w, "baseline", cmp->baseline);
        st_jw_ku64(&w, "regressions", cmp->regressions);
        st_jw_key(&w, "regressed");
        st_jw_raw(&w, cmp->list.data, cmp->list.len);
        st_jw_kstr(&w, "verdict", cmp->regressions ? "regressed" : "no-regression");
        st_jw_obj_close(&w);
    }
    st_jw_obj_close(&w);
    st_buf_putc(b, '\n');
}

static void table(struct st_buf *b, const struct st_suite *s, const char *url, int sim,
                  const struct result *res, uint32_t n, const struct compare *cmp)
{
    uint32_t passed = 0, unsup = 0;
    st_buf_printf(b, "suite %s against %s\n", s->name, url);
    if (sim == 1) {
        st_buf_puts(b, "SIMULATED: the target is servetune sim; its answers were staged by "
                       "X-Servetune-Expect at the sim's error rate, not by a model\n");
    } else if (sim == 2) {
        st_buf_puts(b, "SIMULATED: the target is servetune sim in fixed mode; it answers with "
                       "filler, not the expected answers (use sim --profile to stage them)\n");
    }
    st_buf_printf(b, "%-24s %-12s %s\n", "check", "status", "evidence");
    for (uint32_t i = 0; i < n; i++) {
        passed += res[i].status == Q_PASS;
        unsup += res[i].status == Q_UNSUPPORTED;
        st_buf_printf(b, "%-24s %-12s %s\n", res[i].name, qstatus_names[res[i].status],
                      res[i].evidence);
    }
    st_buf_printf(b, "%u/%u passed", passed, n);
    if (unsup > 0) {
        st_buf_printf(b, ", %u unsupported", unsup);
    }
    st_buf_putc(b, '\n');
    if (cmp->loaded) {
        st_buf_printf(b, "compared with %s: %u regression%s\n", cmp->baseline, cmp->regressions,
                      cmp->regressions == 1 ? "" : "s");
        for (uint32_t i = 0; i < n; i++) {
            char key[96];
            snprintf(key, sizeof(key), "{\"name\":\"%s\",", res[i].name);
            if (res[i].status != Q_PASS && strstr(cmp->list.data, key) != NULL) {
                st_buf_printf(b, "  REGRESSED %s: %s\n", res[i].name, res[i].evidence);
            }
        }
    }
}

/*
 * Characters a token of the long checks' prose on t: its tokenize route, else the usage of a
 * 1-token completion, else 4 (assumed). Only when the suite holds a long check.
 */
static void measure_cpt(struct qopts *o, struct st_target *t, const struct st_suite *s)
{
    o->cpt = 4.0;
    o->cpt_src = "assumed (no long check)";
    int need = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        need |= s->items[i].builtin &&
                (s->items[i].kind == ST_CHECK_LONGRET || s->items[i].kind == ST_CHECK_LONGTEXTIMG);
    }
    if (!need) {
        return;
    }
    struct st_buf prose;
    st_buf_init(&prose);
    st_check_prose(o->seed, 16384, &prose);
    uint64_t tok = 0;
    char err[256];
    o->cpt_src = "assumed (the server counted no tokens)";
    if (st_target_tokenize(t, prose.data, prose.len, 0, &tok, err, sizeof(err)) == 0 && tok > 0) {
        o->cpt_src = "the server's tokenize route";
    } else if (st_target_prompt_tokens(t, prose.data, prose.len, 0, &tok, err, sizeof(err)) == 0 &&
               tok > 0) {
        o->cpt_src = "usage of a 1-token completion";
    } else {
        tok = 0;
    }
    if (tok > 0) {
        double c = (double)prose.len / (double)tok;
        o->cpt = c < 1.0 ? 1.0 : (c > 16.0 ? 16.0 : c);
    }
    st_buf_release(&prose);
}

/* Folds run r (seed) of a check into its result: the worst status wins (fail, unsupported,
 * pass), the first run's figures stay, the evidence is the first run with the worst status. */
static void merge_run(struct result *acc, const struct result *one, uint64_t r, uint64_t seed,
                      uint32_t runs)
{
    static const int rank[] = {0, 2, 1}; /* by enum st_qstatus: pass, fail, unsupported */
    if (r == 0) {
        *acc = *one;
        acc->runs = 0;
        acc->runs_passed = 0;
    } else if (rank[one->status] > rank[acc->status]) {
        acc->status = one->status;
        snprintf(acc->evidence, sizeof(acc->evidence), "run %llu/%u (seed %llu): %.400s",
                 (unsigned long long)r + 1, runs, (unsigned long long)seed, one->evidence);
    }
    acc->runs++;
    acc->runs_passed += one->status == Q_PASS;
    if (r > 0) {
        acc->requests += one->requests;
    }
}

/* 0: not the sim; 1: the model-mode sim (it stages X-Servetune-Expect answers); 2: fixed mode. */
static int sim_kind(const struct st_target *t)
{
    if (!t->is_sim) {
        return 0;
    }
    return t->sim_model_mode ? 1 : 2;
}

/* ---- the command ---- */

static int run_item(const struct qopts *o, const struct st_qual_client *cl, uint64_t seed,
                    double scale, uint64_t ctx, const struct st_buf *mp4,
                    const struct st_suite_item *it, struct receipts *rcp, struct result *res,
                    char *err, size_t errlen)
{
    snprintf(res->name, sizeof(res->name), "%s", it->name);
    if (!it->builtin) {
        struct st_check_step *sp = (struct st_check_step *)&it->step;
        snprintf(res->note, sizeof(res->note), "question, verifier %s",
                 st_verify_name(it->step.v.kind));
        return run_steps(cl, scale, it->name, seed, &sp, 1, 0, rcp, res);
    }
    struct st_check_opts co = {
        .seed = seed,
        .context_tokens = ctx,
        .queued = (uint32_t)o->queued,
        .chars_per_token = o->cpt,
        .video_mp4 = mp4->len > 0 ? mp4 : NULL,
    };
    struct st_check c;
    int rc = st_check_make(it->kind, &co, &c, err, errlen);
    if (rc != 0) {
        return rc;
    }
    snprintf(res->note, sizeof(res->note), "%s", c.note);
    struct st_check_step **sp = st_xcalloc(c.nsteps, sizeof(*sp));
    for (uint32_t i = 0; i < c.nsteps; i++) {
        sp[i] = &c.steps[i];
    }
    rc = run_steps(cl, scale, it->name, seed, sp, c.nsteps, c.concurrent, rcp, res);
    free(sp);
    st_check_release(&c);
    return rc;
}

int st_cli_qualify(int argc, char **argv)
{
    struct qopts o;
    memset(&o, 0, sizeof(o));
    st_cli_cfg_defaults(&o.cfg);
    st_cli_conn_init(&o.conn);
    o.suite = "screening";
    o.seed = 1;
    o.repeat = 1;
    o.ffmpeg = "/usr/bin/ffmpeg";
    char err[1024] = "";
    int exit_code = ST_EXIT_USAGE;
    struct st_suite suite;
    memset(&suite, 0, sizeof(suite));
    struct st_target t;
    memset(&t, 0, sizeof(t));
    struct result *res = NULL;
    struct receipts rcp = {.fd = -1};
    struct st_buf mp4, out, tab;
    st_buf_init(&mp4);
    st_buf_init(&out);
    st_buf_init(&tab);
    struct compare cmp;
    memset(&cmp, 0, sizeof(cmp));
    st_buf_init(&cmp.list);

    exit_code = parse(&o, argc, argv);
    if (exit_code >= 0) {
        goto out;
    }
    exit_code = ST_EXIT_USAGE;
    if (load_suite(o.suite, &suite, err, sizeof(err)) != 0) {
        fprintf(stderr, CMD ": %s\n", err);
        goto out;
    }
    if (st_cli_conn_finish(&o.conn, &o.cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, CMD ": %s\n", err);
        goto out;
    }
    if (o.compare != NULL) {
        /* The baseline is checked (same suite, same seed) before any request is sent. */
        struct compare pre;
        memset(&pre, 0, sizeof(pre));
        int prc =
            load_compare(o.compare, suite.name, o.seed, o.repeat, NULL, 0, &pre, err, sizeof(err));
        st_buf_release(&pre.list);
        if (prc != 0) {
            fprintf(stderr, CMD ": --compare %s\n", err);
            goto out;
        }
    }
    struct st_preflight pf;
    if (st_cli_conn_preflight(&o.conn, &o.cfg, &pf, err, sizeof(err)) ||
        st_cli_target_open(&o.cfg, &t, err, sizeof(err))) {
        fprintf(stderr, CMD ": %s\n", err);
        goto out;
    }
    const char *what = NULL;
    uint64_t ctx = o.context != 0 ? o.context : st_cli_target_context(&t, &what);
    if (ctx == 0) {
        ctx = 131072;
    }
    measure_cpt(&o, &t, &suite);
    if (o.queued == 0 && t.total_slots > 0) {
        /* More requests than the server runs at once: twice its slots. */
        o.queued =
            t.total_slots * 2u < 8 ? 8 : (t.total_slots * 2u > 256 ? 256 : t.total_slots * 2u);
    }
    if (o.out_dir != NULL) {
        char p[PATH_MAX + 32];
        if (st_cli_mkdirs(o.out_dir, err, sizeof(err)) != 0) {
            fprintf(stderr, CMD ": %s\n", err);
            exit_code = ST_EXIT_IO;
            goto out;
        }
        snprintf(p, sizeof(p), "%s/receipts.jsonl", o.out_dir);
        rcp.fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
        if (rcp.fd < 0) {
            fprintf(stderr, CMD ": %s: %s\n", p, strerror(errno));
            exit_code = ST_EXIT_IO;
            goto out;
        }
    }
    for (uint32_t i = 0; i < suite.n; i++) {
        if (suite.items[i].builtin && suite.items[i].kind == ST_CHECK_VIDEO) {
            char verr[256];
            if (st_qual_video_mp4(o.ffmpeg, o.seed, NULL, &mp4, verr, sizeof(verr)) != 0) {
                st_buf_clear(&mp4);
                if (!o.conn.quiet) {
                    fprintf(stderr, CMD ": video as frames: %s\n", verr);
                }
            }
        }
    }
    struct st_qual_client cl = {
        .base_url = o.cfg.base_url,
        .api_key = o.cfg.api_key,
        .model = t.model[0] ? t.model : o.cfg.model,
        .reasoning_effort = o.effort,
        .sim = t.is_sim,
        .seed = o.seed,
        .timeout_ms = 900000,
    };
    res = st_xcalloc(suite.n, sizeof(*res));
    for (uint32_t i = 0; i < suite.n; i++) {
        if (!o.conn.quiet) {
            fprintf(stderr, CMD ": %s ...\n", suite.items[i].name);
        }
        int rc = 0;
        for (uint64_t r = 0; r < o.repeat && rc == 0; r++) {
            struct result one;
            memset(&one, 0, sizeof(one));
            struct st_qual_client clr = cl;
            clr.seed = o.seed + r;
            rc = run_item(&o, &clr, o.seed + r, t.time_scale > 0 ? t.time_scale : 1.0, ctx, &mp4,
                          &suite.items[i], &rcp, &one, err, sizeof(err));
            if (rc != 0) {
                break;
            }
            merge_run(&res[i], &one, r, o.seed + r, (uint32_t)o.repeat);
        }
        if (rc != 0) {
            fprintf(stderr, CMD ": %s: %s\n", suite.items[i].name, err[0] ? err : st_strerror(rc));
            exit_code = rc == -EIO || rc == -ENOSPC ? ST_EXIT_IO : ST_EXIT_USAGE;
            goto out;
        }
    }
    st_buf_release(&cmp.list);
    if (o.compare != NULL && load_compare(o.compare, suite.name, o.seed, o.repeat, res, suite.n,
                                          &cmp, err, sizeof(err)) != 0) {
        fprintf(stderr, CMD ": --compare %s\n", err);
        goto out;
    }
    write_json(&out, &o, &suite, cl.model ? cl.model : "", sim_kind(&t), ctx, res, suite.n, &cmp);
    table(&tab, &suite, o.cfg.base_url, sim_kind(&t), res, suite.n, &cmp);
    fputs(tab.data, stdout);
    fflush(stdout);
    exit_code = ST_EXIT_OK;
    for (uint32_t i = 0; i < suite.n; i++) {
        if (res[i].status == Q_FAIL && !cmp.loaded) {
            exit_code = ST_EXIT_FAIL;
        }
    }
    if (cmp.loaded && cmp.regressions > 0) {
        exit_code = ST_EXIT_FAIL;
    }
    if (o.json_path != NULL && write_atomic(o.json_path, &out, err, sizeof(err)) != 0) {
        fprintf(stderr, CMD ": %s\n", err);
        exit_code = ST_EXIT_IO;
    }
    if (o.out_dir != NULL) {
        char p[PATH_MAX + 32];
        snprintf(p, sizeof(p), "%s/qualify.json", o.out_dir);
        int w1 = write_atomic(p, &out, err, sizeof(err));
        snprintf(p, sizeof(p), "%s/table.txt", o.out_dir);
        if (w1 != 0 || write_atomic(p, &tab, err, sizeof(err)) != 0) {
            fprintf(stderr, CMD ": %s\n", err);
            exit_code = ST_EXIT_IO;
        }
    }
out:
    if (rcp.fd >= 0) {
        close(rcp.fd);
    }
    free(res);
    st_suite_release(&suite);
    st_target_release(&t);
    st_buf_release(&mp4);
    st_buf_release(&out);
    st_buf_release(&tab);
    st_buf_release(&cmp.list);
    st_cli_conn_release(&o.conn);
    return exit_code;
}
