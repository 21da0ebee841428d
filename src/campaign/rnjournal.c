/*
 * The campaign runner's units and journal records (runner_int.h): appending records, beginning
 * and ending units, the results of completed units kept for lookup, a step unit's result as JSON
 * and back, and setting a campaign up from its files: `run` registers the plan and writes the
 * campaign record, `resume` reads the journal back (the completed units, the server a killed run
 * left) and discards a partial unit. Runs nothing: no server, no step. Calls only rnio.c below it
 * in the runner; the stage procedure (rnunit.c, rnstage.c, runner.c) calls it.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/sha256.h"
#include "base/xalloc.h"
#include "campaign/plan.h"
#include "store/journal.h"
#include "target/arm.h"

#include "campaign/runner_int.h"

/* ---- journal records and units ---- */

static void wall_iso(char *out, size_t len)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int journal_err(struct rn *r, int rc, const char *what)
{
    st_rn_fmt(r->err, r->errlen,
              "journal %s/journal.jsonl: %s failed: %s (the journal stays valid)", r->out, what,
              rc < 0 && rc > -4096 ? strerror(-rc) : st_strerror(rc));
    return rc;
}

int st_rn_append(struct rn *r, const char *kind, const struct st_buf *json)
{
    int rc = st_journal_append(&r->j, kind, json->data ? json->data : "{}", json->len);
    return rc ? journal_err(r, rc, kind) : 0;
}

int st_rn_unit_unreadable(struct rn *r, const char *id, const char *why)
{
    st_rn_fmt(r->err, r->errlen,
              "%s/journal.jsonl: the completed unit %s cannot be read back: %s; resume stops "
              "and changes nothing (running the unit again would record a second result beside "
              "this one): its records and files are kept as they are",
              r->out, id, why);
    return ST_EPARSE;
}

const char *st_rn_done_result(const struct rn *r, const char *id)
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
int st_rn_unit_end(struct rn *r, const char *id, const struct st_buf *res)
{
    int rc = st_journal_unit_end(&r->j, id, res->data, res->len);
    if (rc != 0) {
        return journal_err(r, rc, "unit_end");
    }
    add_done(r, id, res->data, res->len);
    return 0;
}

int st_rn_unit_begin(struct rn *r, const char *id)
{
    int rc = st_journal_unit_begin(&r->j, id);
    return rc ? journal_err(r, rc, "unit_begin") : 0;
}

/* ---- unit results: JSON <-> struct ---- */

void st_rn_ures_release(struct ures *u)
{
    free(u->v);
    free(u->ttft);
    memset(u, 0, sizeof(*u));
}

int st_rn_json_get_str(const struct st_json *d, int obj, const char *key, char *out, size_t len)
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

int st_rn_json_get_tri(const struct st_json *d, int obj, const char *key)
{
    int i = st_json_get(d, obj, key);
    enum st_json_type t = st_json_type(d, i);
    return t == ST_JSON_TRUE ? 1 : t == ST_JSON_FALSE ? 0 : -1;
}

enum ufield_kind {
    UF_TRI = 1,  /* int: 1, 0, or -1 for null */
    UF_BOOL = 2, /* int: written as a boolean, read as true or not */
    UF_INT = 3,  /* int: a number, 0 when absent */
    UF_I64 = 4,  /* int64_t: a number, dflt when absent */
    UF_U64 = 5,  /* uint64_t: a number, 0 when absent or negative */
    UF_F64 = 6,  /* double: a number (NaN written as null), dflt when absent */
    UF_STR = 7,  /* char[size] */
};

#define UFIELD(type, key, kind, member, dflt)                                                      \
    {                                                                                              \
        key, kind, offsetof(type, member), sizeof(((type *)0)->member), dflt                       \
    }

/* A scalar member of a struct written to the journal and read back: its key, kind and place. */
struct ufield {
    const char *key;
    enum ufield_kind kind;
    size_t off, size;
    double dflt;
};

/* The scalar members of a unit's result, in the order its JSON object names them (between the
 * metrics and ttft_s): st_rn_ures_json writes them, st_rn_ures_parse reads them back. */
static const struct ufield ures_fields[] = {
    UFIELD(struct ures, "functional_ok", UF_TRI, functional_ok, 0),
    UFIELD(struct ures, "quality_ok", UF_TRI, quality_ok, 0),
    UFIELD(struct ures, "qualify", UF_BOOL, is_qualify, 0),
    UFIELD(struct ures, "aborted", UF_BOOL, aborted, 0),
    UFIELD(struct ures, "step_error", UF_BOOL, step_error, 0),
    UFIELD(struct ures, "exit_code", UF_INT, exit_code, 0),
    UFIELD(struct ures, "errors", UF_U64, errors, 0),
    UFIELD(struct ures, "receipts", UF_U64, receipts, 0),
    UFIELD(struct ures, "server_fail", UF_STR, server_fail, 0),
    UFIELD(struct ures, "detail", UF_STR, detail, 0),
    UFIELD(struct ures, "spec_accept_rate", UF_F64, spec_accept, -1),
    UFIELD(struct ures, "wall_s", UF_F64, wall_s, 0),
    UFIELD(struct ures, "gpu_mem_bytes", UF_U64, gpu_mem, 0),
    UFIELD(struct ures, "oom_kills", UF_I64, oom_kills, -1),
    UFIELD(struct ures, "preemptions", UF_I64, preemptions, -1),
};

/* The settings of the campaign record that resume reads back (after plan_name and plan_hash). */
static const struct ufield settings_fields[] = {
    UFIELD(struct rn, "plan_file", UF_STR, plan_src, 0),
    UFIELD(struct rn, "plan_dir", UF_STR, plan_dir, 0),
    UFIELD(struct rn, "sim_speed", UF_F64, speed, 1),
    UFIELD(struct rn, "seed", UF_U64, seed, 0),
    UFIELD(struct rn, "docker", UF_STR, docker, 0),
};

#define N_FIELDS(t) (sizeof(t) / sizeof((t)[0]))

static void ufield_json(struct st_jw *w, const struct ufield *f, const void *base)
{
    const void *v = (const char *)base + f->off;
    int i = f->kind == UF_TRI || f->kind == UF_BOOL || f->kind == UF_INT ? *(const int *)v : 0;
    st_jw_key(w, f->key);
    if (f->kind == UF_TRI && i < 0) {
        st_jw_null(w);
    } else if (f->kind == UF_TRI || f->kind == UF_BOOL) {
        st_jw_bool(w, i);
    } else if (f->kind == UF_INT) {
        st_jw_i64(w, i);
    } else if (f->kind == UF_I64) {
        st_jw_i64(w, *(const int64_t *)v);
    } else if (f->kind == UF_U64) {
        st_jw_u64(w, *(const uint64_t *)v);
    } else if (f->kind == UF_F64) {
        st_jw_f64(w, *(const double *)v);
    } else {
        st_jw_str(w, (const char *)v);
    }
}

static void ufield_parse(const struct st_json *d, const struct ufield *f, void *base)
{
    void *v = (char *)base + f->off;
    if (f->kind == UF_TRI) {
        *(int *)v = st_rn_json_get_tri(d, 0, f->key);
    } else if (f->kind == UF_BOOL) {
        *(int *)v = st_rn_json_get_tri(d, 0, f->key) == 1;
    } else if (f->kind == UF_INT) {
        *(int *)v = (int)json_get_f64(d, 0, f->key, f->dflt);
    } else if (f->kind == UF_I64) {
        *(int64_t *)v = (int64_t)json_get_f64(d, 0, f->key, f->dflt);
    } else if (f->kind == UF_U64) {
        *(uint64_t *)v = json_get_u64(d, 0, f->key);
    } else if (f->kind == UF_F64) {
        *(double *)v = json_get_f64(d, 0, f->key, f->dflt);
    } else {
        st_rn_json_get_str(d, 0, f->key, (char *)v, f->size);
    }
}

void st_rn_ures_json(const struct ures *u, struct st_buf *out)
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
    for (size_t i = 0; i < N_FIELDS(ures_fields); i++) {
        ufield_json(&w, &ures_fields[i], u);
    }
    st_jw_key(&w, "ttft_s");
    st_jw_arr_open(&w);
    for (size_t i = 0; i < u->n_ttft; i++) {
        st_jw_f64(&w, u->ttft[i]);
    }
    st_jw_arr_close(&w);
    st_jw_obj_close(&w);
}

int st_rn_ures_parse(const char *id, const char *json, struct ures *u)
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
    st_rn_json_get_str(&d, 0, "step", u->step, sizeof(u->step));
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
    for (size_t i = 0; i < N_FIELDS(ures_fields); i++) {
        ufield_parse(&d, &ures_fields[i], u);
    }
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

void st_rn_astage_add(struct astage *s, struct ures *u)
{
    s->u = st_xrealloc(s->u, (s->n + 1) * sizeof(*s->u));
    s->u[s->n++] = *u;
    memset(u, 0, sizeof(*u));
}

int st_rn_up_from_result(struct rn *r, struct astage *as, const char *id, const char *json)
{
    struct st_json d;
    st_json_init(&d, 0);
    if (st_json_parse(&d, json, strlen(json)) != 0 || st_json_type(&d, 0) != ST_JSON_OBJECT) {
        st_json_release(&d);
        return st_rn_unit_unreadable(r, id, "its result is not a JSON object");
    }
    char fail[16];
    st_rn_json_get_str(&d, 0, "fail", fail, sizeof(fail));
    as->up_fail = ST_ARM_OK;
    for (int f = ST_ARM_FAIL_START; f <= ST_ARM_FAIL_OPERATOR; f++) {
        if (fail[0] && strcmp(fail, st_arm_fail_name((enum st_arm_fail)f)) == 0) {
            as->up_fail = (enum st_arm_fail)f;
        }
    }
    st_rn_json_get_str(&d, 0, "detail", as->up_detail, sizeof(as->up_detail));
    as->kv = json_get_u64(&d, 0, "kv_capacity_tokens");
    as->ctx = json_get_u64(&d, 0, "max_context_tokens");
    st_rn_json_get_str(&d, 0, "kv_source", as->kv_source, sizeof(as->kv_source));
    as->up_done = 1;
    st_json_release(&d);
    return 0;
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

int st_rn_start_new(struct rn *r)
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
    rc = st_rn_mkdirs(o->out_dir, r->err, r->errlen);
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
    struct st_jw w;
    st_rn_obj_open(&b, &w);
    char now[32];
    wall_iso(now, sizeof(now));
    st_jw_kstr(&w, "plan_name", r->plan.name);
    st_jw_kstr(&w, "plan_hash", r->hash);
    for (size_t i = 0; i < N_FIELDS(settings_fields); i++) {
        ufield_json(&w, &settings_fields[i], r);
    }
    st_jw_key(&w, "nvidia_smi");
    r->nvsmi_set ? st_jw_str(&w, r->nvsmi) : st_jw_null(&w);
    st_jw_kf64(&w, "watch_interval_s", r->watch_s);
    st_jw_kstr(&w, "started", now);
    st_jw_obj_close(&w);
    rc = st_rn_append(r, "campaign", &b);
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
    int64_t left_pgid; /* the last server started (an arm's, or a baseline an interrupted
                        * restore left running) and not recorded as stopped: 0 when none */
    uint64_t left_ticks;
    char plan_hash[ST_SHA256_HEX];
    char bad_unit[ST_JOURNAL_MAX_UNIT_BYTES + 1]; /* the first unit_end with no result object */
    uint64_t bad_line;
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
            st_rn_json_get_str(&d, 0, "plan_hash", c->plan_hash, sizeof(c->plan_hash));
            for (size_t i = 0; i < N_FIELDS(settings_fields); i++) {
                ufield_parse(&d, &settings_fields[i], r);
            }
            r->nvsmi_set = st_rn_json_get_str(&d, 0, "nvidia_smi", r->nvsmi, sizeof(r->nvsmi)) == 0;
            r->watch_s = json_get_f64(&d, 0, "watch_interval_s", 5);
        }
        st_json_release(&d);
    } else if ((rec->kind_len == 6 && memcmp(rec->kind, "arm_up", 6) == 0) ||
               (rec->kind_len == 8 && memcmp(rec->kind, "arm_reup", 8) == 0) ||
               (rec->kind_len == 11 && memcmp(rec->kind, "server_left", 11) == 0)) {
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
        /* Every completed unit's result is a JSON object (the runner writes no other). One that
         * is not stops the resume by name: skipping it would lose its data from the decisions,
         * running it again would put a second result beside it. */
        struct st_json d;
        st_json_init(&d, 0);
        const char *res = NULL;
        size_t len = 0;
        if (st_json_parse(&d, rec->json, rec->json_len) == 0) {
            int ri = st_json_get(&d, 0, "result");
            res = st_json_type(&d, ri) == ST_JSON_OBJECT ? st_json_raw(&d, ri, &len) : NULL;
        }
        if (res) {
            add_done(r, rec->unit, res, len);
        } else if (!c->bad_unit[0]) {
            st_rn_fmt(c->bad_unit, sizeof(c->bad_unit), "%s", rec->unit);
            c->bad_line = rec->line;
        }
        st_json_release(&d);
    }
    return 0;
}

int st_rn_start_resume(struct rn *r)
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
    if (c.bad_unit[0]) {
        char why[96];
        st_rn_fmt(why, sizeof(why), "its unit_end record (line %llu) holds no result object",
                  (unsigned long long)c.bad_line);
        return st_rn_unit_unreadable(r, c.bad_unit, why);
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
        /* A server the killed runner left running (a command target's outlives it), or the
         * baseline an interrupted run's restore left running: the arms need its port. */
        struct st_buf ev;
        st_buf_init(&ev);
        int sig;
        double to;
        st_arm_stop_settings(&r->plan.target, &sig, &to);
        int lrc = st_arm_stop_leftover((int)c.left_pgid, c.left_ticks, sig, to, &ev);
        if (lrc != ST_ENOTFOUND) {
            st_rn_say(r, "resume: stopped the server process group %lld the earlier run left (%s)",
                      (long long)c.left_pgid, lrc == 0 ? "it stopped" : st_strerror(lrc));
        }
        if (ev.len) {
            rc = st_rn_append(r, "leftover_stopped", &ev);
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
