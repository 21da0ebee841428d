/*
 * The campaign runner (runner.h). One procedure for run and resume: each unit (the starting
 * state, an arm's bring-up, one repeat of one step, the restore) is looked up in the journal
 * first; a completed unit's result is used as it is, a missing one is run and journaled. The
 * decisions are recomputed from the units' results every time, so they depend on the data only.
 *
 * Archive layout (docs/campaigns.md, "The audit archive"):
 *   plan.yaml, plan.canonical.json, plan.sha256   the plan as registered
 *   journal.jsonl                                 every record, fsynced (src/store/journal.h)
 *   state/start.json                              the starting state
 *   arms/ARM/                                     bring-up evidence, server.log
 *   arms/ARM/STAGE/STEP/rK/                       one unit: the step's outputs and receipts
 *   arms/ARM/failure-STAGE/                       failure evidence (log tail, check, watch)
 *   void/                                         partial units a resume discarded
 *   summary.json, final-state.json, report.md, report.html
 */
#include "campaign/runner.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
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
#include "campaign/arm.h"
#include "campaign/plan.h"
#include "report/report.h"
#include "campaign/rules.h"
#include "campaign/step.h"
#include "campaign/watch.h"
#include "store/fsutil.h"
#include "store/journal.h"

#include "campaign/runner_int.h"

#define RECEIPTS_CHUNK (1u << 20) /* bytes of receipt lines per journal record */

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

/* ---- small helpers ---- */

static int mkdirs(const char *path, char *err, size_t errlen)
{
    int rc = st_fs_mkdirs(path);
    if (rc != 0) {
        st_rn_fmt(err, errlen, "cannot create directory %s: %s", path, strerror(-rc));
    }
    return rc;
}

static void wall_iso(char *out, size_t len)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int journal_err(struct rn *r, int rc, const char *what)
{
    st_rn_fmt(r->err, r->errlen,
              "journal %s/journal.jsonl: %s failed: %s (the journal stays valid)", r->out, what,
              rc < 0 && rc > -4096 ? strerror(-rc) : st_strerror(rc));
    return rc;
}

static int append(struct rn *r, const char *kind, const struct st_buf *json)
{
    int rc = st_journal_append(&r->j, kind, json->data ? json->data : "{}", json->len);
    return rc ? journal_err(r, rc, kind) : 0;
}

static const char *done_result(const struct rn *r, const char *id)
{
    for (size_t i = 0; i < r->n_done; i++) {
        if (strcmp(r->done[i].id, id) == 0) {
            return r->done[i].json;
        }
    }
    return NULL;
}

static void add_done(struct rn *r, const char *id, const char *json, size_t len)
{
    if (r->n_done == r->cap_done) {
        r->cap_done = r->cap_done ? 2 * r->cap_done : 64;
        r->done = st_xrealloc(r->done, r->cap_done * sizeof(*r->done));
    }
    r->done[r->n_done].id = st_xstrdup(id);
    r->done[r->n_done].json = st_xstrndup(json, len);
    r->n_done++;
}

/* Ends unit id with result res, and remembers it as done. */
static int unit_end(struct rn *r, const char *id, const struct st_buf *res)
{
    int rc = st_journal_unit_end(&r->j, id, res->data, res->len);
    if (rc != 0) {
        return journal_err(r, rc, "unit_end");
    }
    add_done(r, id, res->data, res->len);
    return 0;
}

static int unit_begin(struct rn *r, const char *id)
{
    int rc = st_journal_unit_begin(&r->j, id);
    return rc ? journal_err(r, rc, "unit_begin") : 0;
}

/* ---- unit results: JSON <-> struct ---- */

static void ures_release(struct ures *u)
{
    free(u->v);
    free(u->ttft);
    memset(u, 0, sizeof(*u));
}

static int json_get_str(const struct st_json *d, int obj, const char *key, char *out, size_t len)
{
    int i = st_json_get(d, obj, key);
    out[0] = '\0';
    if (st_json_type(d, i) != ST_JSON_STRING) {
        return -1;
    }
    struct st_buf b;
    st_buf_init(&b);
    int rc = st_json_str(d, i, &b);
    if (rc == 0) {
        st_rn_fmt(out, len, "%s", st_buf_str(&b));
    }
    st_buf_release(&b);
    return rc;
}

static double json_get_f64(const struct st_json *d, int obj, const char *key, double dflt)
{
    double v;
    int i = st_json_get(d, obj, key);
    if (st_json_type(d, i) != ST_JSON_NUMBER || st_json_f64(d, i, &v) != 0) {
        return dflt;
    }
    return v;
}

static uint64_t json_get_u64(const struct st_json *d, int obj, const char *key)
{
    double v = json_get_f64(d, obj, key, 0);
    return v > 0 ? (uint64_t)v : 0;
}

static int json_get_tri(const struct st_json *d, int obj, const char *key)
{
    int i = st_json_get(d, obj, key);
    enum st_json_type t = st_json_type(d, i);
    return t == ST_JSON_TRUE ? 1 : t == ST_JSON_FALSE ? 0 : -1;
}

static void ures_json(const struct ures *u, struct st_buf *out)
{
    struct st_jw w;
    st_jw_init(&w, out);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "step", u->step);
    st_jw_ku64(&w, "repeat", u->rep);
    st_jw_key(&w, "metrics");
    st_jw_obj_open(&w);
    for (size_t i = 0; i < u->n; i++) {
        st_jw_kf64(&w, u->v[i].name, u->v[i].v);
    }
    st_jw_obj_close(&w);
    st_jw_key(&w, "functional_ok");
    u->functional_ok < 0 ? st_jw_null(&w) : st_jw_bool(&w, u->functional_ok);
    st_jw_key(&w, "quality_ok");
    u->quality_ok < 0 ? st_jw_null(&w) : st_jw_bool(&w, u->quality_ok);
    st_jw_kbool(&w, "qualify", u->is_qualify);
    st_jw_kbool(&w, "aborted", u->aborted);
    st_jw_kbool(&w, "step_error", u->step_error);
    st_jw_ki64(&w, "exit_code", u->exit_code);
    st_jw_ku64(&w, "errors", u->errors);
    st_jw_ku64(&w, "receipts", u->receipts);
    st_jw_kstr(&w, "server_fail", u->server_fail);
    st_jw_kstr(&w, "detail", u->detail);
    st_jw_kf64(&w, "spec_accept_rate", u->spec_accept);
    st_jw_kf64(&w, "wall_s", u->wall_s);
    st_jw_ku64(&w, "gpu_mem_bytes", u->gpu_mem);
    st_jw_ku64(&w, "oom_kills", u->oom_kills);
    st_jw_ki64(&w, "preemptions", u->preemptions);
    st_jw_key(&w, "ttft_s");
    st_jw_arr_open(&w);
    for (size_t i = 0; i < u->n_ttft; i++) {
        st_jw_f64(&w, u->ttft[i]);
    }
    st_jw_arr_close(&w);
    st_jw_obj_close(&w);
}

static int ures_parse(const char *id, const char *json, struct ures *u)
{
    memset(u, 0, sizeof(*u));
    st_rn_fmt(u->id, sizeof(u->id), "%s", id);
    struct st_json d;
    st_json_init(&d, 0);
    int rc = st_json_parse(&d, json, strlen(json));
    if (rc != 0 || st_json_type(&d, 0) != ST_JSON_OBJECT) {
        st_json_release(&d);
        return rc ? rc : ST_EPARSE;
    }
    json_get_str(&d, 0, "step", u->step, sizeof(u->step));
    u->rep = (uint32_t)json_get_u64(&d, 0, "repeat");
    int m = st_json_get(&d, 0, "metrics");
    if (st_json_type(&d, m) == ST_JSON_OBJECT) {
        const struct st_json_tok *t = &d.toks[m];
        u->v = st_xcalloc(t->size ? t->size : 1, sizeof(*u->v));
        for (int k = st_json_first(&d, m); k > 0; k = st_json_next(&d, m, k)) {
            /* k is a key token; its value follows it. */
            struct st_buf b;
            st_buf_init(&b);
            double v;
            if (st_json_str(&d, k, &b) == 0 && st_json_f64(&d, k + 1, &v) == 0) {
                st_rn_fmt(u->v[u->n].name, sizeof(u->v[u->n].name), "%s", st_buf_str(&b));
                u->v[u->n++].v = v;
            }
            st_buf_release(&b);
        }
    }
    u->functional_ok = json_get_tri(&d, 0, "functional_ok");
    u->quality_ok = json_get_tri(&d, 0, "quality_ok");
    u->is_qualify = json_get_tri(&d, 0, "qualify") == 1;
    u->aborted = json_get_tri(&d, 0, "aborted") == 1;
    u->step_error = json_get_tri(&d, 0, "step_error") == 1;
    u->exit_code = (int)json_get_f64(&d, 0, "exit_code", 0);
    u->errors = json_get_u64(&d, 0, "errors");
    u->receipts = json_get_u64(&d, 0, "receipts");
    json_get_str(&d, 0, "server_fail", u->server_fail, sizeof(u->server_fail));
    json_get_str(&d, 0, "detail", u->detail, sizeof(u->detail));
    u->spec_accept = json_get_f64(&d, 0, "spec_accept_rate", -1);
    u->wall_s = json_get_f64(&d, 0, "wall_s", 0);
    u->gpu_mem = json_get_u64(&d, 0, "gpu_mem_bytes");
    u->oom_kills = json_get_u64(&d, 0, "oom_kills");
    u->preemptions = (int64_t)json_get_f64(&d, 0, "preemptions", -1);
    int a = st_json_get(&d, 0, "ttft_s");
    if (st_json_type(&d, a) == ST_JSON_ARRAY) {
        uint32_t n = d.toks[a].size;
        u->ttft = st_xcalloc(n ? n : 1, sizeof(double));
        for (uint32_t i = 0; i < n; i++) {
            double v;
            if (st_json_f64(&d, st_json_at(&d, a, i), &v) == 0) {
                u->ttft[u->n_ttft++] = v;
            }
        }
    }
    st_json_release(&d);
    return 0;
}

static void astage_add(struct astage *s, struct ures *u)
{
    s->u = st_xrealloc(s->u, (s->n + 1) * sizeof(*s->u));
    s->u[s->n++] = *u;
    memset(u, 0, sizeof(*u));
}

/* ---- the live server ---- */

static int stop_server(struct rn *r)
{
    if (!r->srv) {
        return 0;
    }
    struct st_buf ev;
    st_buf_init(&ev);
    int rc = st_arm_stop(r->srv, &ev);
    r->srv = NULL;
    struct st_buf rec;
    st_buf_init(&rec);
    struct st_jw w;
    st_jw_init(&w, &rec);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "arm", r->arms[r->srv_arm].name);
    st_jw_kstr(&w, "stage", st_rn_stage_names[r->srv_stage]);
    st_jw_key(&w, "evidence");
    if (ev.len) {
        st_jw_raw(&w, ev.data, ev.len);
    } else {
        st_jw_null(&w);
    }
    st_jw_obj_close(&w);
    int jrc = append(r, "server_stopped", &rec);
    st_buf_release(&rec);
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
    return g_stop != 0;
}

static void arm_env(struct rn *r, int a, char *dir, size_t dlen, struct st_arm_env *env)
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

/* Writes the failure evidence of arm a in stage s: the check's detail, the log's tail. */
static void save_failure(struct rn *r, int a, int s, const char *kind, const char *step,
                         const char *detail)
{
    struct astage *as = &r->arms[a].st[s];
    st_rn_fmt(as->fail_kind, sizeof(as->fail_kind), "%s", kind);
    st_rn_fmt(as->fail_step, sizeof(as->fail_step), "%s", step ? step : "");
    st_rn_fmt(as->fail_detail, sizeof(as->fail_detail), "%s", detail);
    st_rn_fmt(as->fail_evidence, sizeof(as->fail_evidence), "arms/%s/failure-%s", r->arms[a].name,
              st_rn_stage_names[s]);
    char dir[PATH_MAX], e[256];
    st_rn_fmt(dir, sizeof(dir), "%s/%s", r->out, as->fail_evidence);
    if (mkdirs(dir, e, sizeof(e)) != 0) {
        return;
    }
    struct st_buf b;
    st_buf_init(&b);
    if (r->srv && r->srv_arm == a) {
        st_arm_log_tail(r->srv, 64 * 1024, &b);
        char rel[PATH_MAX];
        st_rn_fmt(rel, sizeof(rel), "%s/log-tail.txt", as->fail_evidence);
        (void)st_rn_write_file(r, rel, b.data ? b.data : "", b.len);
    }
    st_buf_clear(&b);
    struct st_jw w;
    st_jw_init(&w, &b);
    st_jw_obj_open(&w);
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
static int bring_up(struct rn *r, int a, int s, int as_unit)
{
    struct arm *arm = &r->arms[a];
    struct astage *as = &arm->st[s];
    int rc = stop_server(r);
    if (rc != 0) {
        return rc;
    }
    char id[ST_JOURNAL_MAX_UNIT_BYTES];
    st_rn_fmt(id, sizeof(id), "%s/%s/up", st_rn_stage_names[s], arm->name);
    if (as_unit) {
        rc = unit_begin(r, id);
        if (rc != 0) {
            return rc;
        }
    }
    char dir[PATH_MAX];
    struct st_arm_env env;
    arm_env(r, a, dir, sizeof(dir), &env);
    env.sim_noise_seed = noise_seed(r, a, s, r->cur_group);
    rc = mkdirs(dir, r->err, r->errlen);
    if (rc != 0) {
        return rc;
    }
    st_rn_say(r, "[%s] %s: bringing it up", st_rn_stage_names[s], arm->name);
    struct st_arm_up up;
    st_arm_up_init(&up);
    struct st_arm_server *srv = NULL;
    uint64_t t0 = mono_ns();
    rc = st_arm_start(&r->plan, arm->name, &arm->ps, &env, &srv, &up, r->err, r->errlen);
    if (rc != 0) {
        st_arm_up_release(&up);
        return rc;
    }
    struct st_buf b;
    st_buf_init(&b);
    struct st_jw w;
    st_jw_init(&w, &b);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "arm", arm->name);
    st_jw_kstr(&w, "stage", st_rn_stage_names[s]);
    st_jw_key(&w, "evidence");
    if (up.json.len) {
        st_jw_raw(&w, up.json.data, up.json.len);
    } else {
        st_jw_null(&w);
    }
    st_jw_obj_close(&w);
    rc = append(r, as_unit ? "arm_up" : "arm_reup", &b);
    st_buf_clear(&b);
    if (rc != 0) {
        st_buf_release(&b);
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
        st_jw_init(&w, &b);
        st_jw_obj_open(&w);
        st_jw_kstr(&w, "fail", up.fail == ST_ARM_OK ? "" : st_arm_fail_name(up.fail));
        st_jw_kstr(&w, "detail", up.detail);
        st_jw_ku64(&w, "kv_capacity_tokens", up.kv_capacity_tokens);
        st_jw_kstr(&w, "kv_source", up.kv_source);
        st_jw_ku64(&w, "max_context_tokens", up.max_context_tokens);
        st_jw_kf64(&w, "startup_s", up.startup_s);
        st_jw_obj_close(&w);
        rc = unit_end(r, id, &b);
        as->up_done = 1;
        as->up_fail = up.fail;
        st_rn_fmt(as->up_detail, sizeof(as->up_detail), "%s", up.detail);
        as->kv = up.kv_capacity_tokens;
        as->ctx = up.max_context_tokens;
        st_rn_fmt(as->kv_source, sizeof(as->kv_source), "%s", up.kv_source);
        if (up.fail != ST_ARM_OK) {
            save_failure(r, a, s, st_arm_fail_name(up.fail), NULL, up.detail);
        }
    } else if (up.fail != ST_ARM_OK && rc == 0) {
        save_failure(r, a, s, st_arm_fail_name(up.fail), NULL, up.detail);
    }
    st_buf_release(&b);
    st_arm_up_release(&up);
    return rc;
}

static void up_from_result(struct astage *as, const char *json)
{
    struct st_json d;
    st_json_init(&d, 0);
    if (st_json_parse(&d, json, strlen(json)) == 0) {
        char fail[16];
        json_get_str(&d, 0, "fail", fail, sizeof(fail));
        as->up_fail = ST_ARM_OK;
        for (int f = ST_ARM_FAIL_START; f <= ST_ARM_FAIL_OPERATOR; f++) {
            if (fail[0] && strcmp(fail, st_arm_fail_name((enum st_arm_fail)f)) == 0) {
                as->up_fail = (enum st_arm_fail)f;
            }
        }
        json_get_str(&d, 0, "detail", as->up_detail, sizeof(as->up_detail));
        as->kv = json_get_u64(&d, 0, "kv_capacity_tokens");
        as->ctx = json_get_u64(&d, 0, "max_context_tokens");
        json_get_str(&d, 0, "kv_source", as->kv_source, sizeof(as->kv_source));
        as->up_done = 1;
    }
    st_json_release(&d);
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
    if (g_stop) {
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
                rc = append(r, "receipts", &rec);
                st_buf_clear(&rec);
                part++;
            }
        }
        if (rec.len && rc == 0) {
            st_buf_puts(&rec, "]}");
            rc = append(r, "receipts", &rec);
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
    int rc = mkdirs(vdir, r->err, r->errlen);
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
    if (r->plan.target.kind != ST_PLAN_TARGET_SIM || r->speed <= 1) {
        return 0;
    }
    double ms = (double)dflt_ms / r->speed;
    return ms < 5000 ? 5000 : (uint64_t)ms;
}

static int run_unit(struct rn *r, int a, int s, const struct st_plan_step *step, uint32_t rep)
{
    struct arm *arm = &r->arms[a];
    struct astage *as = &arm->st[s];
    char id[ST_JOURNAL_MAX_UNIT_BYTES];
    st_rn_fmt(id, sizeof(id), "%s/%s/%s/r%u", st_rn_stage_names[s], arm->name, step->id, rep + 1);
    const char *prev = done_result(r, id);
    struct ures u;
    if (prev) {
        if (ures_parse(id, prev, &u) == 0) {
            astage_add(as, &u);
        }
        return 0;
    }
    int rc;
    if (!r->srv || r->srv_arm != a || r->srv_stage != s || r->srv_group != r->cur_group) {
        rc = bring_up(r, a, s, 0);
        if (rc != 0) {
            return rc;
        }
    }
    char dir[PATH_MAX];
    st_rn_fmt(dir, sizeof(dir), "%s/arms/%s/%s/%s/r%u", r->out, arm->name, st_rn_stage_names[s],
              step->id, rep + 1);
    rc = void_dir(r, dir);
    if (rc == 0) {
        rc = mkdirs(dir, r->err, r->errlen);
    }
    if (rc != 0) {
        return rc;
    }
    rc = unit_begin(r, id);
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
            .noise_key = r->plan.target.kind == ST_PLAN_TARGET_SIM ? nkey : NULL,
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
            .time_scale = r->plan.target.kind == ST_PLAN_TARGET_SIM ? r->speed : 1,
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
        if (t.died == ST_ARM_OK && !g_stop && r->srv) {
            t.died = st_arm_check(r->srv, t.detail, sizeof(t.detail));
        }
        if (t.watch) {
            struct st_watch_summary ws;
            st_watch_finish(t.watch, &ws);
            u.spec_accept = ws.spec_accept_rate;
            u.gpu_mem = ws.gpu_mem_max_bytes;
            u.oom_kills = ws.oom_kills;
            u.preemptions = ws.samples > 0 ? (int64_t)ws.preemptions : -1;
            st_watch_free(t.watch);
        }
        if (g_stop && t.died == ST_ARM_OK) {
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
            save_failure(r, a, s, u.server_fail, step->id, t.detail);
            (void)stop_server(r);
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
    ures_json(&u, &res);
    /* splice the receipts files in: {...,"files":[...]} */
    res.len--; /* drop the closing brace */
    st_buf_puts(&res, ",\"files\":");
    st_buf_append(&res, files.data, files.len);
    st_buf_putc(&res, '}');
    if (rc == 0) {
        rc = unit_end(r, id, &res);
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
        astage_add(as, &u);
    } else {
        ures_release(&u);
    }
    return rc;
}

/* ---- setup: run and resume ---- */

static int hash_file(const char *path, char hex[ST_SHA256_HEX], struct st_plan *p, char *err,
                     size_t errlen)
{
    struct st_buf b;
    st_buf_init(&b);
    int rc = st_rn_read_file(path, ST_PLAN_MAX_BYTES, &b, err, errlen);
    if (rc == 0) {
        rc = st_plan_parse(path, b.data ? b.data : "", b.len, p, err, errlen);
    }
    if (rc == 0) {
        st_plan_hash(p, hex);
    }
    st_buf_release(&b);
    return rc;
}

static void dirname_of(const char *path, char *out, size_t len)
{
    char tmp[PATH_MAX];
    if (!realpath(path, tmp)) {
        st_rn_fmt(tmp, sizeof(tmp), "%s", path);
    }
    char *slash = strrchr(tmp, '/');
    if (slash && slash != tmp) {
        *slash = '\0';
    } else if (slash) {
        slash[1] = '\0';
    } else {
        st_rn_fmt(tmp, sizeof(tmp), ".");
    }
    st_rn_fmt(out, len, "%s", tmp);
}

static int start_new(struct rn *r)
{
    const struct st_runner_opts *o = r->o;
    char path[PATH_MAX];
    st_rn_fmt(path, sizeof(path), "%s/journal.jsonl", o->out_dir);
    if (access(path, F_OK) == 0) {
        st_rn_fmt(r->err, r->errlen,
                  "%s already holds a campaign (journal.jsonl); continue it with `servetune "
                  "campaign resume %s`, or choose another --out",
                  o->out_dir, o->out_dir);
        return ST_EUSAGE;
    }
    struct st_buf text;
    st_buf_init(&text);
    int rc = st_rn_read_file(o->plan_path, ST_PLAN_MAX_BYTES, &text, r->err, r->errlen);
    if (rc == 0) {
        rc = st_plan_parse(o->plan_path, text.data ? text.data : "", text.len, &r->plan, r->err,
                           r->errlen);
        r->plan_ok = rc == 0;
    }
    if (rc != 0) {
        st_buf_release(&text);
        return rc == ST_ETOOBIG || rc < -10000 + 1 ? rc : rc;
    }
    st_plan_hash(&r->plan, r->hash);
    dirname_of(o->plan_path, r->plan_dir, sizeof(r->plan_dir));
    if (!realpath(o->plan_path, r->plan_src)) {
        st_rn_fmt(r->plan_src, sizeof(r->plan_src), "%s", o->plan_path);
    }
    r->speed = o->sim_speed > 0 ? o->sim_speed : 1;
    r->seed = o->seed ? o->seed : 1;
    st_rn_fmt(r->docker, sizeof(r->docker), "%s", o->docker ? o->docker : "");
    r->nvsmi_set = o->nvidia_smi != NULL;
    st_rn_fmt(r->nvsmi, sizeof(r->nvsmi), "%s", o->nvidia_smi ? o->nvidia_smi : "");
    r->watch_s = o->watch_interval_s > 0 ? o->watch_interval_s : 5;
    rc = mkdirs(o->out_dir, r->err, r->errlen);
    if (rc == 0) {
        rc = st_rn_write_file(r, "plan.yaml", text.data ? text.data : "", text.len);
    }
    if (rc != 0) {
        st_buf_release(&text);
        return rc;
    }
    st_buf_clear(&text);
    st_plan_canonical(&r->plan, &text);
    st_buf_putc(&text, '\n');
    rc = st_rn_write_file(r, "plan.canonical.json", text.data, text.len);
    if (rc != 0) {
        st_buf_release(&text);
        return rc;
    }
    st_buf_clear(&text);
    st_buf_printf(&text, "%s\n", r->hash);
    rc = st_rn_write_file(r, "plan.sha256", text.data, text.len);
    st_buf_release(&text);
    if (rc != 0) {
        return rc;
    }
    rc = st_journal_open(&r->j, path, r->err, r->errlen);
    if (rc != 0) {
        return rc;
    }
    r->j_open = 1;
    struct st_buf b;
    st_buf_init(&b);
    struct st_jw w;
    st_jw_init(&w, &b);
    char now[32];
    wall_iso(now, sizeof(now));
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "plan_name", r->plan.name);
    st_jw_kstr(&w, "plan_hash", r->hash);
    st_jw_kstr(&w, "plan_file", r->plan_src);
    st_jw_kstr(&w, "plan_dir", r->plan_dir);
    st_jw_kf64(&w, "sim_speed", r->speed);
    st_jw_ku64(&w, "seed", r->seed);
    st_jw_kstr(&w, "docker", r->docker);
    st_jw_key(&w, "nvidia_smi");
    r->nvsmi_set ? st_jw_str(&w, r->nvsmi) : st_jw_null(&w);
    st_jw_kf64(&w, "watch_interval_s", r->watch_s);
    st_jw_kstr(&w, "started", now);
    st_jw_obj_close(&w);
    rc = append(r, "campaign", &b);
    st_buf_release(&b);
    if (rc == 0) {
        st_rn_say(r, "plan %s registered: sha256 %s (before the first request)", r->plan.name,
                  r->hash);
    }
    return rc;
}

struct scan_ctx {
    struct rn *r;
    int have_campaign;
    int64_t left_pgid; /* the last server started and not recorded as stopped: 0 when none */
    uint64_t left_ticks;
    char plan_hash[ST_SHA256_HEX];
    struct st_buf saved;
};

static int on_record(void *ctx, const struct st_journal_rec *rec)
{
    struct scan_ctx *c = ctx;
    struct rn *r = c->r;
    if (rec->state == ST_JOURNAL_VOID) {
        return 0;
    }
    if (rec->kind_len == 8 && memcmp(rec->kind, "campaign", 8) == 0 && !c->have_campaign) {
        struct st_json d;
        st_json_init(&d, 0);
        if (st_json_parse(&d, rec->json, rec->json_len) == 0) {
            c->have_campaign = 1;
            json_get_str(&d, 0, "plan_hash", c->plan_hash, sizeof(c->plan_hash));
            json_get_str(&d, 0, "plan_file", r->plan_src, sizeof(r->plan_src));
            json_get_str(&d, 0, "plan_dir", r->plan_dir, sizeof(r->plan_dir));
            r->speed = json_get_f64(&d, 0, "sim_speed", 1);
            r->seed = json_get_u64(&d, 0, "seed");
            json_get_str(&d, 0, "docker", r->docker, sizeof(r->docker));
            r->nvsmi_set = json_get_str(&d, 0, "nvidia_smi", r->nvsmi, sizeof(r->nvsmi)) == 0;
            r->watch_s = json_get_f64(&d, 0, "watch_interval_s", 5);
        }
        st_json_release(&d);
    } else if ((rec->kind_len == 6 && memcmp(rec->kind, "arm_up", 6) == 0) ||
               (rec->kind_len == 8 && memcmp(rec->kind, "arm_reup", 8) == 0)) {
        struct st_json d;
        st_json_init(&d, 0);
        c->left_pgid = 0;
        if (st_json_parse(&d, rec->json, rec->json_len) == 0) {
            int ev = st_json_get(&d, 0, "evidence");
            c->left_pgid = (int64_t)json_get_f64(&d, ev, "pgid", 0);
            c->left_ticks = json_get_u64(&d, ev, "start_ticks");
        }
        st_json_release(&d);
    } else if (rec->kind_len == 14 && memcmp(rec->kind, "server_stopped", 14) == 0) {
        c->left_pgid = 0;
    } else if (rec->kind_len == 8 && memcmp(rec->kind, "unit_end", 8) == 0 &&
               rec->state == ST_JOURNAL_LIVE && rec->unit) {
        struct st_json d;
        st_json_init(&d, 0);
        if (st_json_parse(&d, rec->json, rec->json_len) == 0) {
            size_t len;
            const char *res = st_json_raw(&d, st_json_get(&d, 0, "result"), &len);
            if (res) {
                add_done(r, rec->unit, res, len);
            }
        }
        st_json_release(&d);
    }
    return 0;
}

static int start_resume(struct rn *r)
{
    const struct st_runner_opts *o = r->o;
    char path[PATH_MAX];
    st_rn_fmt(path, sizeof(path), "%s/journal.jsonl", o->out_dir);
    if (access(path, F_OK) != 0) {
        st_rn_fmt(r->err, r->errlen,
                  "%s: no campaign here (no journal.jsonl); start one with "
                  "`servetune campaign run PLAN --out %s`",
                  o->out_dir, o->out_dir);
        return ST_EUSAGE;
    }
    int rc = st_journal_open(&r->j, path, r->err, r->errlen);
    if (rc != 0) {
        if (rc == -EBUSY) {
            st_rn_fmt(r->err, r->errlen, "%s: another servetune is running this campaign",
                      o->out_dir);
            return ST_EUSAGE;
        }
        return rc;
    }
    r->j_open = 1;
    if (r->j.dropped_bytes) {
        st_rn_say(r, "journal: dropped a torn last record (%zu bytes at line %llu)",
                  r->j.dropped_bytes, (unsigned long long)r->j.dropped_line);
    }
    struct scan_ctx c = {.r = r};
    rc = st_journal_iter(&r->j, on_record, &c);
    if (rc != 0) {
        st_rn_fmt(r->err, r->errlen, "%s: cannot read the journal: %s", path, st_strerror(rc));
        return rc;
    }
    if (!c.have_campaign) {
        st_rn_fmt(r->err, r->errlen, "%s: the journal has no campaign record", path);
        return ST_EPARSE;
    }
    char ppath[PATH_MAX], hex[ST_SHA256_HEX];
    st_rn_fmt(ppath, sizeof(ppath), "%s/plan.yaml", o->out_dir);
    rc = hash_file(ppath, hex, &r->plan, r->err, r->errlen);
    r->plan_ok = rc == 0;
    if (rc != 0) {
        return rc;
    }
    if (strcmp(hex, c.plan_hash) != 0) {
        st_rn_fmt(r->err, r->errlen,
                  "%s was edited after the campaign started (plan hash %.16s..., registered "
                  "%.16s...): a pre-registered plan cannot change; start a new campaign",
                  ppath, hex, c.plan_hash);
        return ST_EUSAGE;
    }
    struct st_plan orig;
    memset(&orig, 0, sizeof(orig));
    char e2[512];
    if (access(r->plan_src, R_OK) == 0) {
        int prc = hash_file(r->plan_src, hex, &orig, e2, sizeof(e2));
        if (prc == 0) {
            st_plan_release(&orig);
        }
        if (prc != 0 || strcmp(hex, c.plan_hash) != 0) {
            st_rn_fmt(r->err, r->errlen,
                      "%s was edited after the campaign started (%s); a pre-registered plan "
                      "cannot change: restore it or start a new campaign",
                      r->plan_src, prc != 0 ? e2 : "its hash differs from the registered one");
            return ST_EUSAGE;
        }
    }
    memcpy(r->hash, c.plan_hash, sizeof(r->hash));
    if (c.left_pgid > 1 && c.left_ticks > 0) {
        /* A server the killed runner left running (a command target's outlives it). */
        struct st_buf ev;
        st_buf_init(&ev);
        int sig = r->plan.target.stop_signal > 0 ? r->plan.target.stop_signal : SIGTERM;
        double to = r->plan.target.stop_timeout_s > 0 ? r->plan.target.stop_timeout_s : 60;
        int lrc = st_arm_stop_leftover((int)c.left_pgid, c.left_ticks, sig, to, &ev);
        if (lrc != ST_ENOTFOUND) {
            st_rn_say(r, "resume: stopped the server process group %lld the earlier run left (%s)",
                      (long long)c.left_pgid, lrc == 0 ? "it stopped" : st_strerror(lrc));
        }
        if (ev.len) {
            rc = append(r, "leftover_stopped", &ev);
        }
        st_buf_release(&ev);
        if (rc != 0) {
            return rc;
        }
    }
    const char *open = st_journal_open_unit(&r->j);
    if (open) {
        char id[ST_JOURNAL_MAX_UNIT_BYTES + 1];
        st_rn_fmt(id, sizeof(id), "%s", open);
        rc = st_journal_unit_discard(&r->j, id);
        if (rc != 0) {
            return journal_err(r, rc, "unit_discard");
        }
        st_rn_say(r, "resume: discarded the partial unit %s (it runs again)", id);
    }
    st_rn_say(r, "resume: %zu units done; plan %s sha256 %.16s... unchanged", r->n_done,
              r->plan.name, r->hash);
    return 0;
}

/* ---- the procedure ---- */

static int cmp_param(const void *a, const void *b)
{
    return strcmp(((const struct st_plan_param *)a)->name, ((const struct st_plan_param *)b)->name);
}

static int init_arms(struct rn *r)
{
    r->n_arms = r->plan.n_arms + 1;
    r->arms[0].name = "baseline";
    r->arms[0].idx = -1;
    for (uint32_t i = 0; i < r->plan.n_arms; i++) {
        r->arms[i + 1].name = r->plan.arms[i].name;
        r->arms[i + 1].idx = (int)i;
    }
    /* The baseline's full set: fixed + baseline (arm params of no arm). */
    struct st_plan_params *bp = &r->arms[0].ps;
    bp->n = r->plan.fixed.n + r->plan.baseline.n;
    bp->v = st_xcalloc(bp->n ? bp->n : 1, sizeof(*bp->v));
    uint32_t k = 0;
    const struct st_plan_params *src[2] = {&r->plan.fixed, &r->plan.baseline};
    for (int s = 0; s < 2; s++) {
        for (uint32_t i = 0; i < src[s]->n; i++) {
            bp->v[k] = src[s]->v[i];
            bp->v[k].value = st_xstrdup(src[s]->v[i].value);
            k++;
        }
    }
    qsort(bp->v, bp->n, sizeof(*bp->v), cmp_param);
    r->arms[0].resolved = 1;
    return 0;
}

/* Resolves arm a's parameters (on_best_of: the winner among its names in screening). */
static int resolve(struct rn *r, int a)
{
    struct arm *arm = &r->arms[a];
    if (arm->resolved) {
        return 0;
    }
    const struct st_plan_arm *pa = &r->plan.arms[arm->idx];
    const char *winner = NULL;
    if (pa->n_on_best_of > 0) {
        struct st_rules_result res[ST_PLAN_MAX_ARMS];
        const char *names[ST_PLAN_MAX_ARMS];
        size_t n = 0;
        for (uint32_t i = 0; i < pa->n_on_best_of; i++) {
            for (uint32_t b = 1; b < r->n_arms; b++) {
                if (strcmp(r->arms[b].name, pa->on_best_of[i]) == 0 && r->arms[b].st[0].decided) {
                    res[n] = r->arms[b].st[0].res;
                    names[n++] = r->arms[b].name;
                }
            }
        }
        int best = st_rules_choose(res, n);
        winner = best >= 0 ? names[best] : "baseline";
        int listed = 0;
        for (uint32_t i = 0; i < pa->n_on_best_of; i++) {
            listed |= strcmp(pa->on_best_of[i], winner) == 0;
        }
        if (!listed) {
            winner = "baseline"; /* the baseline not among its names: on the baseline still */
        }
        st_rn_fmt(arm->on, sizeof(arm->on), "%s", winner);
    }
    char e[512];
    int rc = st_plan_arm_params(&r->plan, (uint32_t)arm->idx, winner, &arm->ps, e, sizeof(e));
    if (rc != 0) {
        st_rn_fmt(arm->st[0].skipped, sizeof(arm->st[0].skipped), "not run: %s", e);
        return 1;
    }
    arm->resolved = 1;
    return 0;
}

/* Runs arm a through stage s. Returns 0, ST_EINTERRUPTED or an error of ours. */
/* The end of arm a's stage s (unit STAGE/ARM/down), or of its sequential pass `pass` (unit
 * STAGE/ARM/down/pN, N = pass + 1; pass < 0 for the first): a server that died after the last
 * unit is a failure of the arm like one during a unit (the gates see down_fail); then the stop.
 * A resumed campaign whose server is not this arm's (it came back after the last unit) records
 * that it could not check. */
static int end_stage(struct rn *r, int a, int s, int pass)
{
    struct arm *arm = &r->arms[a];
    struct astage *as = &arm->st[s];
    char id[ST_JOURNAL_MAX_UNIT_BYTES];
    if (pass < 0) {
        st_rn_fmt(id, sizeof(id), "%s/%s/down", st_rn_stage_names[s], arm->name);
    } else {
        st_rn_fmt(id, sizeof(id), "%s/%s/down/p%d", st_rn_stage_names[s], arm->name, pass + 1);
    }
    const char *prev = done_result(r, id);
    int rc;
    if (prev) {
        struct st_json d;
        st_json_init(&d, 0);
        if (st_json_parse(&d, prev, strlen(prev)) == 0) {
            json_get_str(&d, 0, "fail", as->down_fail, sizeof(as->down_fail));
            json_get_str(&d, 0, "detail", as->down_detail, sizeof(as->down_detail));
        }
        st_json_release(&d);
        if (as->down_fail[0] && !as->fail_kind[0]) {
            st_rn_fmt(as->fail_kind, sizeof(as->fail_kind), "%s", as->down_fail);
            st_rn_fmt(as->fail_detail, sizeof(as->fail_detail), "%s", as->down_detail);
            st_rn_fmt(as->fail_evidence, sizeof(as->fail_evidence), "arms/%s/failure-%s", arm->name,
                      st_rn_stage_names[s]);
        }
        return stop_server(r);
    }
    rc = unit_begin(r, id);
    if (rc != 0) {
        return rc;
    }
    enum st_arm_fail f = ST_ARM_OK;
    char detail[512] = "not checked: the server running now is not this arm's";
    if (r->srv && r->srv_arm == a && r->srv_stage == s) {
        detail[0] = '\0';
        f = st_arm_check(r->srv, detail, sizeof(detail));
    }
    if (f != ST_ARM_OK) {
        st_rn_fmt(as->down_fail, sizeof(as->down_fail), "%s", st_arm_fail_name(f));
        st_rn_fmt(as->down_detail, sizeof(as->down_detail), "after the stage's last unit: %s",
                  detail);
        st_rn_say(r, "[%s] %s: the server failed after the last unit: %s: %s", st_rn_stage_names[s],
                  arm->name, as->down_fail, detail);
        save_failure(r, a, s, as->down_fail, NULL, as->down_detail);
    }
    rc = stop_server(r);
    if (rc != 0) {
        return rc;
    }
    struct st_buf b;
    st_buf_init(&b);
    struct st_jw w;
    st_jw_init(&w, &b);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "fail", as->down_fail);
    st_jw_kstr(&w, "detail", f != ST_ARM_OK ? as->down_detail : detail);
    st_jw_obj_close(&w);
    rc = unit_end(r, id, &b);
    st_buf_release(&b);
    return rc;
}

/* The passes every arm of a stage runs: the most repeats (the min, for sequential steps) of any
 * of its steps. */
static uint32_t min_passes(const struct st_plan_stage *stage)
{
    uint32_t m = 1;
    for (uint32_t k = 0; k < stage->n; k++) {
        m = stage->steps[k].repeats > m ? stage->steps[k].repeats : m;
    }
    return m;
}

/* The passes an arm may run at most: the largest repeats.max of the stage's steps. */
static uint32_t max_passes(const struct st_plan_stage *stage)
{
    uint32_t m = min_passes(stage);
    for (uint32_t k = 0; k < stage->n; k++) {
        m = stage->steps[k].repeats_max > m ? stage->steps[k].repeats_max : m;
    }
    return m;
}

/* Whether step runs in pass p (from 0): its fixed repeats, or a sequential step up to its max. */
static int step_in_pass(const struct st_plan_step *step, uint32_t p)
{
    uint32_t reps = step->repeats ? step->repeats : 1;
    return p < reps || (step->repeats_max > reps && p < step->repeats_max);
}

/* The bring-up a pass of stage s runs on: blocked order keeps the first min passes on one, every
 * later (sequential) pass and every interleaved pass is a bring-up of its own. */
static uint32_t up_group(const struct rn *r, int s, uint32_t pass)
{
    const struct st_plan_stage *stage = s == 0 ? &r->plan.screening : &r->plan.full;
    return !r->plan.interleaved && pass < min_passes(stage) ? 0 : pass;
}

/* Runs passes [from, to) of arm a in stage s: for every step, its repeats in those passes.
 * [0, min) in blocked order (one bring-up, the unit STAGE/ARM/up); one pass at a time in
 * interleaved order and for the sequential passes (each brought up again). The min passes end
 * with the unit STAGE/ARM/down, each later pass with STAGE/ARM/down/pN. Returns 0,
 * ST_EINTERRUPTED or an error of ours. */
static int run_arm(struct rn *r, int a, int s, uint32_t from, uint32_t to)
{
    struct arm *arm = &r->arms[a];
    struct astage *as = &arm->st[s];
    const struct st_plan_stage *stage = s == 0 ? &r->plan.screening : &r->plan.full;
    if (as->ran && (as->up_fail != ST_ARM_OK || as->fail_kind[0])) {
        return 0; /* an earlier pass found it failed */
    }
    as->ran = 1;
    r->cur_group = up_group(r, s, from);
    char id[ST_JOURNAL_MAX_UNIT_BYTES];
    st_rn_fmt(id, sizeof(id), "%s/%s/up", st_rn_stage_names[s], arm->name);
    const char *prev = done_result(r, id);
    int rc;
    if (as->up_done) {
        /* brought up in an earlier pass; run_unit brings it up again */
    } else if (prev) {
        up_from_result(as, prev);
        if (as->up_fail != ST_ARM_OK) {
            st_rn_fmt(as->fail_kind, sizeof(as->fail_kind), "%s", st_arm_fail_name(as->up_fail));
            st_rn_fmt(as->fail_detail, sizeof(as->fail_detail), "%s", as->up_detail);
            st_rn_fmt(as->fail_evidence, sizeof(as->fail_evidence), "arms/%s/failure-%s", arm->name,
                      st_rn_stage_names[s]);
        }
    } else {
        rc = bring_up(r, a, s, 1);
        if (rc != 0) {
            return rc;
        }
    }
    if (g_stop) {
        return ST_EINTERRUPTED;
    }
    if (as->up_fail != ST_ARM_OK) {
        return 0;
    }
    for (uint32_t k = 0; k < stage->n; k++) {
        const struct st_plan_step *step = &stage->steps[k];
        for (uint32_t rep = from; rep < to; rep++) {
            if (!step_in_pass(step, rep)) {
                continue;
            }
            if (g_stop) {
                return ST_EINTERRUPTED;
            }
            rc = run_unit(r, a, s, step, rep);
            if (rc != 0) {
                return rc;
            }
            const struct ures *last = as->n ? &as->u[as->n - 1] : NULL;
            if (last && !last->server_fail[0] && last->step_error) {
                if (!as->fail_kind[0]) {
                    st_rn_fmt(as->fail_kind, sizeof(as->fail_kind), "step");
                    st_rn_fmt(as->fail_step, sizeof(as->fail_step), "%s", last->step);
                    st_rn_fmt(as->fail_detail, sizeof(as->fail_detail), "%s", last->detail);
                    st_rn_fmt(as->fail_evidence, sizeof(as->fail_evidence), "arms/%s/%s/%s",
                              arm->name, st_rn_stage_names[s], last->step);
                }
                st_rn_say(r, "[%s] %s: step %s could not run: %s", st_rn_stage_names[s], arm->name,
                          last->step, last->detail);
                return stop_server(r);
            }
            if (as->n && as->u[as->n - 1].server_fail[0]) {
                const struct ures *u = &as->u[as->n - 1];
                if (!as->fail_kind[0]) {
                    st_rn_fmt(as->fail_kind, sizeof(as->fail_kind), "%s", u->server_fail);
                    st_rn_fmt(as->fail_step, sizeof(as->fail_step), "%s", u->step);
                    st_rn_fmt(as->fail_detail, sizeof(as->fail_detail), "%s", u->detail);
                    st_rn_fmt(as->fail_evidence, sizeof(as->fail_evidence), "arms/%s/failure-%s",
                              arm->name, st_rn_stage_names[s]);
                }
                return 0; /* the arm's stage stops here; the next arm goes on */
            }
        }
    }
    as->passes = to > as->passes ? to : as->passes;
    uint32_t pmin = min_passes(stage);
    if (to == pmin) {
        return end_stage(r, a, s, -1);
    }
    if (from >= pmin) {
        return end_stage(r, a, s, (int)from);
    }
    return stop_server(r);
}

static int do_state(struct rn *r)
{
    const char *prev = done_result(r, "state");
    if (prev) {
        st_buf_puts(&r->saved, prev);
        return 0;
    }
    int rc = unit_begin(r, "state");
    if (rc != 0) {
        return rc;
    }
    char dir[PATH_MAX];
    st_rn_fmt(dir, sizeof(dir), "%s/state", r->out);
    rc = mkdirs(dir, r->err, r->errlen);
    if (rc != 0) {
        return rc;
    }
    struct st_arm_env env;
    char adir[PATH_MAX];
    arm_env(r, 0, adir, sizeof(adir), &env);
    env.dir = dir;
    rc = st_arm_save_state(&r->plan, &env, &r->saved, r->err, r->errlen);
    if (rc != 0) {
        return rc;
    }
    st_buf_putc(&r->saved, '\n');
    rc = st_rn_write_file(r, "state/start.json", r->saved.data, r->saved.len);
    if (rc != 0) {
        return rc;
    }
    r->saved.len--;
    st_rn_say(r, "starting state saved (state/start.json)");
    return unit_end(r, "state", &r->saved);
}

static int do_restore(struct rn *r, int journaled)
{
    int rc = stop_server(r);
    if (rc != 0) {
        return rc;
    }
    const char *prev = journaled ? done_result(r, "restore") : NULL;
    st_buf_clear(&r->final_state);
    if (prev) {
        st_buf_puts(&r->final_state, prev);
        struct st_json d;
        st_json_init(&d, 0);
        r->restored =
            st_json_parse(&d, prev, strlen(prev)) == 0 && json_get_tri(&d, 0, "restored") == 1;
        st_json_release(&d);
    } else {
        if (journaled) {
            rc = unit_begin(r, "restore");
            if (rc != 0) {
                return rc;
            }
        }
        char dir[PATH_MAX];
        struct st_arm_env env;
        arm_env(r, 0, dir, sizeof(dir), &env);
        st_rn_fmt(dir, sizeof(dir), "%s/state", r->out);
        env.dir = dir;
        /* The baseline's capacity, for the sim's proof. */
        struct st_buf saved;
        st_buf_init(&saved);
        st_buf_append(&saved, r->saved.data, r->saved.len);
        uint64_t kv = r->arms[0].st[0].kv;
        if (kv && saved.len > 1 && saved.data[saved.len - 1] == '}') {
            saved.len--;
            st_buf_printf(&saved, "%s\"baseline_kv_capacity_tokens\":%llu}",
                          saved.len > 1 ? "," : "", (unsigned long long)kv);
        }
        st_rn_say(r, "restoring the starting configuration");
        int ok = 0;
        rc = st_arm_restore(&r->plan, &r->arms[0].ps, &env, saved.data ? saved.data : "{}",
                            saved.len, &r->final_state, &ok, r->err, r->errlen);
        st_buf_release(&saved);
        if (rc != 0) {
            return rc;
        }
        r->restored = ok;
        if (r->final_state.len == 0) {
            st_buf_printf(&r->final_state, "{\"restored\":%s}", ok ? "true" : "false");
        }
        if (journaled) {
            rc = unit_end(r, "restore", &r->final_state);
            if (rc != 0) {
                return rc;
            }
        }
    }
    st_buf_putc(&r->final_state, '\n');
    rc = st_rn_write_file(r, "final-state.json", r->final_state.data, r->final_state.len);
    r->final_state.len--;
    return rc;
}

/* Whether the baseline failed in stage s (then nothing can be compared: *end says so). */
static int baseline_failed(struct rn *r, int s, enum st_runner_end *end)
{
    const struct astage *b = &r->arms[0].st[s];
    if (!b->fail_kind[0]) {
        return 0;
    }
    st_rn_say(r, "the baseline failed in %s (%s: %s): nothing can be compared",
              st_rn_stage_names[s], b->fail_kind, b->fail_detail);
    *end = ST_RUNNER_BASELINE_FAILED;
    return 1;
}

/* Whether arm a is in group g of stage s: screening's plain arms (g 0) and on_best_of arms (g 1);
 * in full, the escalated arms (g 0). The baseline is in group 0. */
static int in_group(const struct rn *r, int s, int g, uint32_t a, const unsigned char *in_full)
{
    if (a == 0) {
        return g == 0;
    }
    if (s == 1) {
        return g == 0 && in_full[a];
    }
    int obo = r->plan.arms[a - 1].n_on_best_of > 0;
    return obo == g;
}

/*
 * Stage s: for each group (screening: the plain arms, then the on_best_of arms, which need the
 * others' verdicts; full: the escalated arms) the min passes, then one sequential pass at a time
 * for the arms whose result asks for more, each after the baseline's same pass (run then if it
 * has not run yet, so drift is measured beside them), until none asks or the passes run out.
 * Blocked order runs each arm's min passes on one bring-up, one arm after the other; interleaved
 * runs pass 1 of every arm, then pass 2, ... The plain arms' results are frozen once an
 * on_best_of arm is resolved on them.
 */
static int run_stage(struct rn *r, int s, const unsigned char *in_full, enum st_runner_end *end)
{
    const struct st_plan_stage *stage = s == 0 ? &r->plan.screening : &r->plan.full;
    uint32_t pmin = min_passes(stage), pmax = max_passes(stage);
    int rc = 0;
    for (int g = 0; g < (s == 0 ? 2 : 1) && rc == 0; g++) {
        uint32_t members[MAX_ARMS];
        size_t n = 0;
        for (uint32_t a = 0; a < r->n_arms; a++) {
            if (in_group(r, s, g, a, in_full) && resolve(r, (int)a) == 0) {
                members[n++] = a;
            }
        }
        if (r->plan.interleaved) {
            for (uint32_t p = 0; p < pmin && rc == 0; p++) {
                for (size_t i = 0; i < n && rc == 0; i++) {
                    rc = run_arm(r, (int)members[i], s, p, p + 1);
                    if (rc == 0 && baseline_failed(r, s, end)) {
                        return 0;
                    }
                }
            }
        } else {
            for (size_t i = 0; i < n && rc == 0; i++) {
                rc = run_arm(r, (int)members[i], s, 0, pmin);
                if (rc == 0 && baseline_failed(r, s, end)) {
                    return 0;
                }
            }
        }
        if (rc != 0) {
            return rc;
        }
        st_rn_decide_stage(r, s);
        for (uint32_t p = pmin; p < pmax && rc == 0; p++) {
            uint32_t cont[MAX_ARMS];
            size_t nc = 0;
            for (size_t i = 0; i < n; i++) {
                const struct astage *as = &r->arms[members[i]].st[s];
                if (members[i] != 0 && as->decided && as->res.more && !as->fail_kind[0]) {
                    cont[nc++] = members[i];
                }
            }
            if (nc == 0) {
                break;
            }
            st_rn_say(r,
                      "[%s] pass %u: %zu arm(s) undecided, one more repeat each and of the "
                      "baseline",
                      st_rn_stage_names[s], p + 1, nc);
            if (r->arms[0].st[s].passes <= p) {
                rc = run_arm(r, 0, s, p, p + 1);
                if (rc == 0 && baseline_failed(r, s, end)) {
                    return 0;
                }
            }
            for (size_t i = 0; i < nc && rc == 0; i++) {
                rc = run_arm(r, (int)cont[i], s, p, p + 1);
            }
            if (rc == 0) {
                st_rn_decide_stage(r, s);
            }
        }
        if (s == 0 && g == 0) {
            for (size_t i = 0; i < n; i++) {
                r->arms[members[i]].st[s].frozen = r->arms[members[i]].st[s].decided;
            }
        }
    }
    return rc;
}

static int procedure(struct rn *r, enum st_runner_end *end)
{
    int rc = do_state(r);
    if (rc != 0) {
        return rc;
    }
    r->family[0] = r->n_arms - 1;
    rc = run_stage(r, 0, NULL, end);
    if (rc != 0 || *end == ST_RUNNER_BASELINE_FAILED) {
        return rc;
    }
    st_rn_decide_stage(r, 0);
    /* Escalation. */
    struct st_rules_result *scr = st_xcalloc(MAX_ARMS, sizeof(*scr));
    int idx[MAX_ARMS];
    size_t n = 0;
    for (uint32_t a = 1; a < r->n_arms; a++) {
        if (r->arms[a].st[0].decided) {
            scr[n] = r->arms[a].st[0].res;
            idx[n++] = (int)a;
        }
    }
    unsigned char go[MAX_ARMS] = {0};
    size_t n_go = st_rules_escalate(r->plan.rules.escalation, scr, n, go);
    free(scr);
    if (n_go > 0 && r->plan.full.n > 0) {
        st_rn_say(r, "screening done: %zu arm(s) escalate to the full stage", n_go);
        unsigned char in_full[MAX_ARMS] = {1};
        for (size_t i = 0; i < n; i++) {
            in_full[idx[i]] = go[i];
        }
        r->family[1] = n_go;
        rc = run_stage(r, 1, in_full, end);
        if (rc != 0 || *end == ST_RUNNER_BASELINE_FAILED) {
            return rc;
        }
        st_rn_decide_stage(r, 1);
        struct st_rules_result *full = st_xcalloc(MAX_ARMS, sizeof(*full));
        int fidx[MAX_ARMS];
        size_t nf = 0;
        for (uint32_t a = 1; a < r->n_arms; a++) {
            if (r->arms[a].st[1].decided) {
                full[nf] = r->arms[a].st[1].res;
                fidx[nf++] = (int)a;
            }
        }
        int best = st_rules_choose(full, nf);
        free(full);
        r->chosen = best >= 0 ? fidx[best] : 0;
    } else {
        st_rn_say(r, "screening done: no arm escalates; the baseline stays");
        r->chosen = 0;
    }
    r->complete = 1;
    *end = ST_RUNNER_DONE;
    return 0;
}

static void rn_release(struct rn *r)
{
    if (r->srv) {
        if (st_arm_stop(r->srv, NULL) != 0) {
            st_rn_say(r, "the last arm's server would not stop cleanly; it was killed");
        }
        r->srv = NULL;
    }
    for (uint32_t a = 0; a < MAX_ARMS; a++) {
        for (int s = 0; s < N_STAGES; s++) {
            for (size_t i = 0; i < r->arms[a].st[s].n; i++) {
                ures_release(&r->arms[a].st[s].u[i]);
            }
            free(r->arms[a].st[s].u);
        }
        st_plan_params_release(&r->arms[a].ps);
    }
    for (size_t i = 0; i < r->n_done; i++) {
        free(r->done[i].id);
        free(r->done[i].json);
    }
    free(r->done);
    st_buf_release(&r->saved);
    st_buf_release(&r->final_state);
    st_rules_designs_release(&r->designs);
    int sticky = r->j_open ? r->j.error : 0; /* already reported: not a second failure */
    if (r->j_open && st_journal_close(&r->j) != 0 && sticky == 0) {
        st_rn_say(r, "journal: closing it failed (its records were fsynced one by one)");
    }
    if (r->plan_ok) {
        st_plan_release(&r->plan);
    }
}

int st_runner_run(const struct st_runner_opts *o, enum st_runner_end *end, char *err, size_t errlen)
{
    static struct rn rs; /* large; one campaign per process */
    struct rn *r = &rs;
    memset(r, 0, sizeof(*r));
    r->o = o;
    r->err = err;
    r->errlen = errlen;
    r->j.fd = -1;
    st_buf_init(&r->saved);
    st_buf_init(&r->final_state);
    st_rn_fmt(r->out, sizeof(r->out), "%s", o->out_dir);
    *end = ST_RUNNER_DONE;
    g_stop = 0;
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);

    int rc = o->resume ? start_resume(r) : start_new(r);
    if (rc == 0) {
        rc = init_arms(r);
    }
    if (rc == 0) {
        rc = procedure(r, end);
        if (rc < 0 && rc > -4096) {
            /* The archive could not be written (disk full, EFBIG, EIO): stop, put the starting
             * configuration back as Ctrl-C does (best effort: its own files may not fit), and
             * say what holds and what to do. */
            char first[1024];
            st_rn_fmt(first, sizeof(first), "%s", err[0] ? err : strerror(-rc));
            st_rn_say(r, "the archive could not be written; stopping the arm and restoring");
            char rerr[512] = "";
            r->err = rerr;
            r->errlen = sizeof(rerr);
            int rrc = do_restore(r, 0);
            r->err = err;
            r->errlen = errlen;
            st_rn_fmt(err, errlen,
                      "the archive could not be written: %s; the campaign stopped (%s); the "
                      "journal stays valid up to its last whole record: free space, then run "
                      "`servetune campaign resume %s`",
                      first,
                      rrc == 0 && r->restored ? "the starting configuration was restored"
                      : rrc == 0              ? "the restore could not be proven"
                                              : "the restore failed too",
                      r->out);
        } else if (rc == ST_EINTERRUPTED || (rc == 0 && g_stop)) {
            st_rn_say(r,
                      "interrupted: stopping the arm and restoring; `servetune campaign resume %s` "
                      "continues",
                      r->out);
            *end = ST_RUNNER_INTERRUPTED;
            g_stop = 0;
            rc = do_restore(r, 0);
            if (rc == 0) {
                rc = st_rn_write_summary(r);
            }
        } else if (rc == 0) {
            int base_start = *end == ST_RUNNER_BASELINE_FAILED && r->arms[0].st[0].up_done &&
                             (r->arms[0].st[0].up_fail == ST_ARM_FAIL_START ||
                              r->arms[0].st[0].up_fail == ST_ARM_FAIL_HEALTH ||
                              r->arms[0].st[0].up_fail == ST_ARM_FAIL_CONFIG);
            rc = do_restore(r, 1);
            if (rc == ST_EINTERRUPTED) {
                /* Ctrl-C during the final restore: restore anyway (unjournaled, as an interrupted
                 * campaign does); the restore unit stays open, so the campaign is not complete
                 * until `resume` journals it. */
                st_rn_say(r,
                          "interrupted during the restore: restoring anyway; `servetune "
                          "campaign resume %s` completes the campaign",
                          r->out);
                *end = ST_RUNNER_INTERRUPTED;
                g_stop = 0;
                r->complete = 0;
                rc = do_restore(r, 0);
                if (rc == 0) {
                    rc = st_rn_write_summary(r);
                }
            } else if (rc == 0) {
                st_rn_decide_stage(r, 0);
                rc = st_rn_write_summary(r);
            }
            if (rc == 0 && *end != ST_RUNNER_INTERRUPTED) {
                char rerr[512];
                if (st_report_write(r->out, 1, rerr, sizeof(rerr)) != 0) {
                    st_rn_say(r, "report: %s", rerr);
                }
                st_rn_print_table(r);
                if (*end == ST_RUNNER_DONE && !r->restored) {
                    *end = ST_RUNNER_NOT_RESTORED;
                }
            }
            if (rc == 0 && base_start) {
                st_rn_fmt(err, errlen, "the baseline did not come up (%s): %s",
                          st_arm_fail_name(r->arms[0].st[0].up_fail), r->arms[0].st[0].up_detail);
                rc = ST_EUSAGE;
            }
        }
    }
    rn_release(r);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return rc;
}
