/*
 * The campaign runner's units that run something (runner_int.h): the live server (bring-up,
 * stop, failure evidence) and one repeat of one step run as a child process, watched every
 * 200 ms, its receipts journaled. One server at a time (r->srv). Owns the stop flag that the
 * runner's signal handlers set. Calls rnjournal.c and rnio.c; rnstage.c and runner.c call it.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/hash.h"
#include "base/json.h"
#include "base/sha256.h"
#include "base/xalloc.h"
#include "campaign/plan.h"
#include "campaign/step.h"
#include "store/journal.h"
#include "target/arm.h"
#include "target/watch.h"

#include "campaign/runner_int.h"

#define RECEIPTS_CHUNK (1u << 20) /* bytes of receipt lines per journal record */

volatile sig_atomic_t st_rn_stop;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- the live server ---- */

/* Appends a record of kind {"arm", "stage", "evidence": ev's object, or null when empty} for arm
 * a in stage s. */
static int append_evidence(struct rn *r, const char *kind, int a, int s, const struct st_buf *ev)
{
    struct st_buf rec;
    struct st_jw w;
    st_rn_obj_open(&rec, &w);
    st_jw_kstr(&w, "arm", r->arms[a].name);
    st_jw_kstr(&w, "stage", st_rn_stage_names[s]);
    st_jw_key(&w, "evidence");
    if (ev->len) {
        st_jw_raw(&w, ev->data, ev->len);
    } else {
        st_jw_null(&w);
    }
    st_jw_obj_close(&w);
    int rc = st_rn_append(r, kind, &rec);
    st_buf_release(&rec);
    return rc;
}

int st_rn_stop_server(struct rn *r)
{
    if (!r->srv) {
        return 0;
    }
    struct st_buf ev;
    st_buf_init(&ev);
    int rc = st_arm_stop(r->srv, &ev);
    r->srv = NULL;
    int jrc = append_evidence(r, "server_stopped", r->srv_arm, r->srv_stage, &ev);
    st_buf_release(&ev);
    if (rc != 0) {
        st_rn_say(r, "%s: the server would not stop cleanly (%s); it was killed",
                  r->arms[r->srv_arm].name, st_strerror(rc));
    }
    return jrc;
}

static int stop_requested(void *ctx)
{
    (void)ctx;
    return st_rn_stop != 0;
}

void st_rn_arm_env(struct rn *r, int a, char *dir, size_t dlen, struct st_arm_env *env)
{
    st_rn_fmt(dir, dlen, "%s/arms/%s", r->out, r->arms[a].name);
    memset(env, 0, sizeof(*env));
    env->self_exe = r->o->self_exe;
    env->plan_dir = r->plan_dir;
    env->dir = dir;
    env->sim_speed = r->speed;
    env->sim_seed = r->seed;
    env->docker = r->docker[0] ? r->docker : NULL;
    env->cancel_fn = stop_requested; /* Ctrl-C during a bring-up does not wait out the health */
    env->operator_fn = r->o->operator_fn;
    env->operator_ctx = r->o->operator_ctx;
}

/* Writes the failure evidence of arm a in stage s: the check's detail, the log's tail (the
 * running server's, else up_tail: a failed start's, may be NULL). */
static void save_failure(struct rn *r, int a, int s, const char *kind, const char *step,
                         const char *detail, const struct st_buf *up_tail)
{
    struct astage *as = &r->arms[a].st[s];
    st_rn_fmt(as->fail_kind, sizeof(as->fail_kind), "%s", kind);
    st_rn_fmt(as->fail_step, sizeof(as->fail_step), "%s", step ? step : "");
    st_rn_fmt(as->fail_detail, sizeof(as->fail_detail), "%s", detail);
    st_rn_fmt(as->fail_evidence, sizeof(as->fail_evidence), "arms/%s/failure-%s", r->arms[a].name,
              st_rn_stage_names[s]);
    char dir[PATH_MAX], e[256];
    st_rn_fmt(dir, sizeof(dir), "%s/%s", r->out, as->fail_evidence);
    if (st_rn_mkdirs(dir, e, sizeof(e)) != 0) {
        return;
    }
    struct st_buf tail;
    st_buf_init(&tail);
    if (r->srv && r->srv_arm == a) {
        st_arm_log_tail(r->srv, 64 * 1024, &tail);
    } else if (up_tail) {
        st_buf_append(&tail, up_tail->data, up_tail->len); /* a start that failed: its log */
    }
    if (tail.len || (r->srv && r->srv_arm == a)) {
        char rel[PATH_MAX];
        st_rn_fmt(rel, sizeof(rel), "%s/log-tail.txt", as->fail_evidence);
        (void)st_rn_write_file(r, rel, tail.data ? tail.data : "", tail.len);
    }
    st_buf_release(&tail);
    struct st_buf b;
    struct st_jw w;
    st_rn_obj_open(&b, &w);
    st_jw_kstr(&w, "arm", r->arms[a].name);
    st_jw_kstr(&w, "stage", st_rn_stage_names[s]);
    st_jw_kstr(&w, "kind", kind);
    st_jw_key(&w, "step");
    step ? st_jw_str(&w, step) : st_jw_null(&w);
    st_jw_kstr(&w, "detail", detail);
    st_jw_obj_close(&w);
    st_buf_putc(&b, '\n');
    char rel[PATH_MAX];
    st_rn_fmt(rel, sizeof(rel), "%s/failure.json", as->fail_evidence);
    (void)st_rn_write_file(r, rel, b.data, b.len);
    st_buf_release(&b);
}

void st_rn_save_failure(struct rn *r, int a, int s, const char *kind, const char *step,
                        const char *detail)
{
    save_failure(r, a, s, kind, step, detail, NULL);
}

/* The seed of a sim bring-up's noise (profile perf.noise_cv, perf.bringup_cv): a function of the
 * campaign's seed, the arm, the stage and the bring-up group, so a resumed campaign's bring-up
 * draws what the interrupted one drew. Never 0 (0 means "the profile's seed"). */
static uint64_t noise_seed(const struct rn *r, int a, int s, uint32_t group)
{
    static const char tag[] = "servetune bring-up noise v1";
    uint64_t h = st_hash_update(ST_HASH_INIT, tag, sizeof(tag) - 1);
    h = st_hash_u64(h, r->seed);
    h = st_hash_update(h, r->arms[a].name, strlen(r->arms[a].name) + 1);
    h = st_hash_update(h, st_rn_stage_names[s], strlen(st_rn_stage_names[s]) + 1);
    h = st_hash_u64(h, group);
    return (st_hash_mix(h) >> 1) | 1;
}

/* Brings arm a up for stage s (a unit the first time, a plain record on a resumed campaign).
 * Returns 0 (r->srv set, or the arm failed: as->up_fail), or an error of ours. */
int st_rn_bring_up(struct rn *r, int a, int s, int as_unit)
{
    struct arm *arm = &r->arms[a];
    struct astage *as = &arm->st[s];
    int rc = st_rn_stop_server(r);
    if (rc != 0) {
        return rc;
    }
    char id[ST_JOURNAL_MAX_UNIT_BYTES];
    st_rn_fmt(id, sizeof(id), "%s/%s/up", st_rn_stage_names[s], arm->name);
    if (as_unit) {
        rc = st_rn_unit_begin(r, id);
        if (rc != 0) {
            return rc;
        }
    }
    char dir[PATH_MAX];
    struct st_arm_env env;
    st_rn_arm_env(r, a, dir, sizeof(dir), &env);
    env.sim_noise_seed = noise_seed(r, a, s, r->cur_group);
    rc = st_rn_mkdirs(dir, r->err, r->errlen);
    if (rc != 0) {
        return rc;
    }
    st_rn_say(r, "[%s] %s: bringing it up", st_rn_stage_names[s], arm->name);
    struct st_arm_up up;
    st_arm_up_init(&up);
    struct st_arm_server *srv = NULL;
    uint64_t t0 = mono_ns();
    rc = st_arm_start(&r->tp, arm->name, &arm->ps, &env, &srv, &up, r->err, r->errlen);
    if (rc != 0) {
        st_arm_up_release(&up);
        return rc;
    }
    rc = append_evidence(r, as_unit ? "arm_up" : "arm_reup", a, s, &up.json);
    if (rc != 0) {
        st_arm_up_release(&up);
        if (srv) {
            if (st_arm_stop(srv, NULL) != 0) {
                st_rn_say(r, "%s: the server would not stop cleanly; it was killed", arm->name);
            }
        }
        return rc;
    }
    double secs = (double)(mono_ns() - t0) / 1e9;
    if (up.fail == ST_ARM_OK) {
        r->srv = srv;
        r->srv_arm = a;
        r->srv_stage = s;
        r->srv_group = r->cur_group;
        st_rn_fmt(r->srv_url, sizeof(r->srv_url), "%s", up.url);
        st_rn_say(r, "[%s] %s: up in %.1f s, KV capacity %llu tokens (%s), context %llu",
                  st_rn_stage_names[s], arm->name, secs, (unsigned long long)up.kv_capacity_tokens,
                  up.kv_source[0] ? up.kv_source : "not reported",
                  (unsigned long long)up.max_context_tokens);
    } else {
        st_rn_say(r, "[%s] %s: failed to come up: %s: %s", st_rn_stage_names[s], arm->name,
                  st_arm_fail_name(up.fail), up.detail);
    }
    if (as_unit) {
        struct st_buf b;
        struct st_jw w;
        st_rn_obj_open(&b, &w);
        st_jw_kstr(&w, "fail", up.fail == ST_ARM_OK ? "" : st_arm_fail_name(up.fail));
        st_jw_kstr(&w, "detail", up.detail);
        st_jw_ku64(&w, "kv_capacity_tokens", up.kv_capacity_tokens);
        st_jw_kstr(&w, "kv_source", up.kv_source);
        st_jw_ku64(&w, "max_context_tokens", up.max_context_tokens);
        st_jw_kf64(&w, "startup_s", up.startup_s);
        st_jw_obj_close(&w);
        rc = st_rn_unit_end(r, id, &b);
        st_buf_release(&b);
        as->up_done = 1;
        as->up_fail = up.fail;
        st_rn_fmt(as->up_detail, sizeof(as->up_detail), "%s", up.detail);
        as->kv = up.kv_capacity_tokens;
        as->ctx = up.max_context_tokens;
        st_rn_fmt(as->kv_source, sizeof(as->kv_source), "%s", up.kv_source);
    }
    /* A bring-up unit keeps its failure's evidence even when ending the unit failed. */
    if (up.fail != ST_ARM_OK && (as_unit || rc == 0)) {
        save_failure(r, a, s, st_arm_fail_name(up.fail), NULL, up.detail, &up.log_tail);
    }
    st_arm_up_release(&up);
    return rc;
}

/* ---- running one step unit ---- */

struct tick_ctx {
    struct rn *r;
    struct st_watch *watch;
    enum st_arm_fail died;
    char detail[512];
    int oom;
};

static int on_tick(void *ctx)
{
    struct tick_ctx *t = ctx;
    if (st_rn_stop) {
        return 1;
    }
    if (t->r->srv) {
        enum st_arm_fail f = st_arm_check(t->r->srv, t->detail, sizeof(t->detail));
        if (f != ST_ARM_OK) {
            t->died = f;
            return 1;
        }
    }
    if (t->watch && st_watch_tick(t->watch, mono_ns()) == 1) {
        t->oom = 1;
        t->died = ST_ARM_FAIL_OOM;
        st_rn_fmt(t->detail, sizeof(t->detail), "the host's oom_kill counter rose");
        return 1;
    }
    return 0;
}

static int cmp_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* Journals every receipts file (*.jsonl but watch.jsonl) under dir, in name order, as
 * "receipts" records of at most RECEIPTS_CHUNK bytes of lines; lists them in files (JSON). */
static int journal_receipts(struct rn *r, const char *unit, const char *dir, const char *rel,
                            struct st_jw *files)
{
    struct dirent **ents = NULL;
    int n = scandir(dir, &ents, NULL, cmp_name);
    if (n < 0) {
        return 0;
    }
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        const char *nm = ents[i]->d_name;
        if (nm[0] == '.') {
            continue;
        }
        char path[PATH_MAX], sub[PATH_MAX];
        st_rn_fmt(path, sizeof(path), "%s/%s", dir, nm);
        st_rn_fmt(sub, sizeof(sub), "%s%s%s", rel, rel[0] ? "/" : "", nm);
        struct stat st;
        if (lstat(path, &st) != 0) {
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            rc = journal_receipts(r, unit, path, sub, files);
            continue;
        }
        size_t nl = strlen(nm);
        if (!S_ISREG(st.st_mode) || nl < 6 || strcmp(nm + nl - 6, ".jsonl") != 0 ||
            strcmp(nm, "watch.jsonl") == 0) {
            continue;
        }
        struct st_buf data;
        st_buf_init(&data);
        char e[256];
        if (st_rn_read_file(path, (size_t)1 << 30, &data, e, sizeof(e)) != 0) {
            st_buf_release(&data);
            continue;
        }
        char hex[ST_SHA256_HEX];
        st_sha256_hex(data.data ? data.data : "", data.len, hex);
        uint64_t lines = 0, torn = 0, part = 0;
        struct st_buf rec;
        st_buf_init(&rec);
        struct st_json d;
        st_json_init(&d, 0);
        size_t off = 0, first = 1;
        while (off < data.len && rc == 0) {
            const char *p = data.data + off;
            const char *nlp = memchr(p, '\n', data.len - off);
            size_t ll = nlp ? (size_t)(nlp - p) : data.len - off;
            off += ll + (nlp ? 1 : 0);
            if (ll == 0) {
                continue;
            }
            if (!nlp || st_json_parse(&d, p, ll) != 0) {
                torn++; /* a line the child did not finish: never journaled as data */
                continue;
            }
            if (rec.len == 0) {
                st_buf_printf(&rec, "{\"unit\":");
                st_json_quote(&rec, unit, strlen(unit));
                st_buf_printf(&rec, ",\"file\":");
                st_json_quote(&rec, sub, strlen(sub));
                st_buf_printf(&rec, ",\"part\":%llu,\"receipts\":[", (unsigned long long)part);
                first = 1;
            }
            if (!first) {
                st_buf_putc(&rec, ',');
            }
            first = 0;
            st_buf_append(&rec, p, ll);
            lines++;
            if (rec.len >= RECEIPTS_CHUNK) {
                st_buf_puts(&rec, "]}");
                rc = st_rn_append(r, "receipts", &rec);
                st_buf_clear(&rec);
                part++;
            }
        }
        if (rec.len && rc == 0) {
            st_buf_puts(&rec, "]}");
            rc = st_rn_append(r, "receipts", &rec);
        }
        st_json_release(&d);
        st_buf_release(&rec);
        st_buf_release(&data);
        st_jw_obj_open(files);
        st_jw_kstr(files, "file", sub);
        st_jw_kstr(files, "sha256", hex);
        st_jw_ku64(files, "lines", lines);
        st_jw_ku64(files, "torn", torn);
        st_jw_obj_close(files);
    }
    for (int i = 0; i < n; i++) {
        free(ents[i]);
    }
    free(ents);
    return rc;
}

/* Moves a unit folder that a discarded (or never journaled) attempt left to void/. */
static int void_dir(struct rn *r, const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0) {
        return 0;
    }
    char vdir[PATH_MAX], dst[PATH_MAX];
    st_rn_fmt(vdir, sizeof(vdir), "%s/void", r->out);
    int rc = st_rn_mkdirs(vdir, r->err, r->errlen);
    if (rc != 0) {
        return rc;
    }
    for (unsigned k = 0;; k++) {
        st_rn_fmt(dst, sizeof(dst), "%s/%llu-%u", vdir, (unsigned long long)r->j.next_seq, k);
        if (stat(dst, &st) != 0) {
            break;
        }
    }
    if (rename(dir, dst) != 0) {
        int e = errno;
        st_rn_fmt(r->err, r->errlen, "cannot move %s to %s: %s", dir, dst, strerror(e));
        return -e;
    }
    return 0;
}

/* The qualify.json of the baseline's same step and repeat in stage s, when it ran. */
static void baseline_qualify(struct rn *r, int s, const struct st_plan_step *step, uint32_t rep,
                             char *out, size_t len)
{
    st_rn_fmt(out, len, "%s/arms/baseline/%s/%s/r%u/qualify.json", r->out, st_rn_stage_names[s],
              step->id, rep + 1);
    if (access(out, R_OK) != 0) {
        out[0] = '\0';
    }
}

/* A step child's timeout for a sim target: the command's default (virtual seconds, as against a
 * real server) divided by the speed, at least 5 s of wall time; 0 (the default) elsewhere. */
static uint64_t sim_timeout_ms(const struct rn *r, uint64_t dflt_ms)
{
    if (r->plan.target.kind != ST_TARGET_BACKEND_SIM || r->speed <= 1) {
        return 0;
    }
    double ms = (double)dflt_ms / r->speed;
    return ms < 5000 ? 5000 : (uint64_t)ms;
}

int st_rn_run_unit(struct rn *r, int a, int s, const struct st_plan_step *step, uint32_t rep)
{
    struct arm *arm = &r->arms[a];
    struct astage *as = &arm->st[s];
    char id[ST_JOURNAL_MAX_UNIT_BYTES];
    st_rn_fmt(id, sizeof(id), "%s/%s/%s/r%u", st_rn_stage_names[s], arm->name, step->id, rep + 1);
    const char *prev = st_rn_done_result(r, id);
    struct ures u;
    if (prev) {
        /* Never skipped: a unit left out would change the decisions without a word. */
        if (st_rn_ures_parse(id, prev, &u) != 0) {
            return st_rn_unit_unreadable(r, id, "its result is not a JSON object");
        }
        st_rn_astage_add(as, &u);
        return 0;
    }
    int rc;
    if (!r->srv || r->srv_arm != a || r->srv_stage != s || r->srv_group != r->cur_group) {
        rc = st_rn_bring_up(r, a, s, 0);
        if (rc != 0) {
            return rc;
        }
    }
    char dir[PATH_MAX];
    st_rn_fmt(dir, sizeof(dir), "%s/arms/%s/%s/%s/r%u", r->out, arm->name, st_rn_stage_names[s],
              step->id, rep + 1);
    rc = void_dir(r, dir);
    if (rc == 0) {
        rc = st_rn_mkdirs(dir, r->err, r->errlen);
    }
    if (rc != 0) {
        return rc;
    }
    rc = st_rn_unit_begin(r, id);
    if (rc != 0) {
        return rc;
    }
    memset(&u, 0, sizeof(u));
    st_rn_fmt(u.id, sizeof(u.id), "%s", id);
    st_rn_fmt(u.step, sizeof(u.step), "%s", step->id);
    u.rep = rep;
    u.functional_ok = u.quality_ok = -1;
    u.spec_accept = -1;
    u.preemptions = -1;
    u.oom_kills = -1;
    u.is_qualify = step->kind == ST_PLAN_STEP_QUALIFY;
    if (!r->srv) {
        /* The re-up failed: the arm's server is the data. */
        st_rn_fmt(u.server_fail, sizeof(u.server_fail), "%s", as->fail_kind);
        st_rn_fmt(u.detail, sizeof(u.detail), "%s", as->fail_detail);
    } else {
        struct tick_ctx t = {.r = r};
        struct st_watch_cfg wc = {
            .url = r->srv_url,
            .dir = dir,
            .nvidia_smi = r->nvsmi_set ? r->nvsmi : NULL,
            .interval_s = r->watch_s,
        };
        char werr[256];
        if (st_watch_new(&wc, &t.watch, werr, sizeof(werr)) != 0) {
            st_rn_say(r, "watch: %s (continuing without it)", werr);
            t.watch = NULL;
        }
        char cmp[PATH_MAX] = "";
        if (a != 0 && step->kind == ST_PLAN_STEP_QUALIFY) {
            baseline_qualify(r, s, step, rep, cmp, sizeof(cmp));
        }
        /* The sim's noise key: the stage, step and repeat, the same for every arm (the arm is in
         * the launch's noise seed), so requests' bodies stay alike across arms. */
        char nkey[ST_JOURNAL_MAX_UNIT_BYTES];
        st_rn_fmt(nkey, sizeof(nkey), "%s/%s/r%u", st_rn_stage_names[s], step->id, rep + 1);
        struct st_step_env e = {
            .noise_key = r->plan.target.kind == ST_TARGET_BACKEND_SIM ? nkey : NULL,
            .self_exe = r->o->self_exe,
            .url = r->srv_url,
            .plan_dir = r->plan_dir,
            .dir = dir,
            .repeat = rep,
            .seed = r->seed,
            .compare_json = cmp[0] ? cmp : NULL,
            .api_key_file = r->o->api_key_file,
            .context_tokens = as->ctx,
            .timeout_first_token_ms = sim_timeout_ms(r, 900000),
            .timeout_idle_ms = sim_timeout_ms(r, 120000),
            .time_scale = r->plan.target.kind == ST_TARGET_BACKEND_SIM ? r->speed : 1,
            .tick = on_tick,
            .tick_ctx = &t,
            .tick_ms = 200,
        };
        struct st_step_result sr;
        st_step_result_init(&sr);
        char serr[512] = "";
        uint64_t t0 = mono_ns();
        int src = st_step_run(step, &e, &sr, serr, sizeof(serr));
        u.wall_s = (double)(mono_ns() - t0) / 1e9;
        if (t.died == ST_ARM_OK && !st_rn_stop && r->srv) {
            t.died = st_arm_check(r->srv, t.detail, sizeof(t.detail));
        }
        if (t.watch) {
            struct st_watch_summary ws;
            st_watch_finish(t.watch, &ws);
            u.spec_accept = ws.spec_accept_rate;
            u.gpu_mem = ws.gpu_mem_max_bytes;
            u.oom_kills = ws.oom_kills;
            u.preemptions = ws.samples > 0 ? ws.preemptions : -1;
            st_watch_free(t.watch);
        }
        if (st_rn_stop && t.died == ST_ARM_OK) {
            /* Interrupted: the unit stays open; a resume discards and re-runs it. */
            st_step_result_release(&sr);
            return ST_EINTERRUPTED;
        }
        u.v = st_xcalloc(sr.n ? sr.n : 1, sizeof(*u.v));
        for (size_t i = 0; i < sr.n; i++) {
            st_rn_fmt(u.v[i].name, sizeof(u.v[i].name), "%s", sr.v[i].name);
            u.v[i].v = sr.v[i].v;
        }
        u.n = sr.n;
        u.functional_ok = sr.functional_ok;
        u.quality_ok = sr.quality_ok;
        u.aborted = sr.aborted;
        u.exit_code = sr.exit_code;
        u.errors = sr.errors;
        u.receipts = sr.receipts;
        st_rn_fmt(u.detail, sizeof(u.detail), "%s", src != 0 ? serr : sr.detail);
        u.step_error = src != 0;
        if (sr.n_ttft) {
            u.ttft = st_xcalloc(sr.n_ttft, sizeof(double));
            memcpy(u.ttft, sr.ttft_s, sr.n_ttft * sizeof(double));
            u.n_ttft = sr.n_ttft;
        }
        st_step_result_release(&sr);
        if (t.died != ST_ARM_OK) {
            st_rn_fmt(u.server_fail, sizeof(u.server_fail), "%s", st_arm_fail_name(t.died));
            st_rn_fmt(u.detail, sizeof(u.detail), "%s", t.detail);
            st_rn_say(r, "[%s] %s: the server failed during %s r%u: %s: %s", st_rn_stage_names[s],
                      arm->name, step->id, rep + 1, u.server_fail, t.detail);
            st_rn_save_failure(r, a, s, u.server_fail, step->id, t.detail);
            (void)st_rn_stop_server(r);
        }
    }
    struct st_buf files;
    st_buf_init(&files);
    struct st_jw fw;
    st_jw_init(&fw, &files);
    st_jw_arr_open(&fw);
    rc = journal_receipts(r, id, dir, "", &fw);
    st_jw_arr_close(&fw);
    struct st_buf res;
    st_buf_init(&res);
    st_rn_ures_json(&u, &res);
    /* splice the receipts files in: {...,"files":[...]} */
    res.len--; /* drop the closing brace */
    st_buf_puts(&res, ",\"files\":");
    st_buf_append(&res, files.data, files.len);
    st_buf_putc(&res, '}');
    if (rc == 0) {
        rc = st_rn_unit_end(r, id, &res);
    }
    st_buf_release(&res);
    st_buf_release(&files);
    if (rc == 0) {
        char line[256] = "";
        size_t off = 0;
        for (size_t i = 0; i < u.n && i < 3 && off < sizeof(line); i++) {
            const char *nm = strchr(u.v[i].name, '.');
            off += (size_t)st_rn_fmt(line + off, sizeof(line) - off, "%s%s %.4g", i ? ", " : "",
                                     nm ? nm + 1 : u.v[i].name, u.v[i].v);
        }
        st_rn_say(r, "[%s] %s: %s r%u (%.1f s): %s%s%s", st_rn_stage_names[s], arm->name, step->id,
                  rep + 1, u.wall_s, u.n ? line : "no metrics", u.detail[0] ? " — " : "", u.detail);
        st_rn_astage_add(as, &u);
    } else {
        st_rn_ures_release(&u);
    }
    return rc;
}
