/*
 * Window plans and the window map: growable arrays of parts, needles, items and groups, and the
 * map's JSON writer and reader. See windows.h; the format is in docs/workloads.md.
 */
#include "workload/windows.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/json.h"
#include "base/xalloc.h"

#define MAX_GROUPS (1u << 20)
#define MAX_TOKS (1u << 25)

void st_wplan_init(struct st_wplan *pl)
{
    memset(pl, 0, sizeof(*pl));
    st_buf_init(&pl->pool);
}

void st_wplan_release(struct st_wplan *pl)
{
    st_buf_release(&pl->pool);
    free(pl->parts);
    free(pl->needles);
    free(pl->items);
    free(pl->groups);
    memset(pl, 0, sizeof(*pl));
}

/* Grows *p (of *cap elements of size sz) to hold at least n. */
static void grow(void **p, uint64_t *cap, uint64_t n, size_t sz)
{
    if (n <= *cap) {
        return;
    }
    uint64_t c = *cap ? *cap * 2 : 16;
    while (c < n) {
        c *= 2;
    }
    *p = st_xrealloc(*p, (size_t)c * sz);
    *cap = c;
}

uint64_t st_wplan_pool_add(struct st_wplan *pl, const char *s, size_t n)
{
    uint64_t off = pl->pool.len;
    st_buf_append(&pl->pool, s, n);
    return off;
}

uint64_t st_wplan_add_part(struct st_wplan *pl, uint32_t type, uint64_t off, uint64_t len,
                           uint32_t aux)
{
    grow((void **)&pl->parts, &pl->cap_parts, pl->nparts + 1, sizeof(*pl->parts));
    struct st_part *p = &pl->parts[pl->nparts];
    p->type = type;
    p->off = off;
    p->len = len;
    p->aux = aux;
    return pl->nparts++;
}

uint32_t st_wplan_add_needle(struct st_wplan *pl, const char *word, size_t n, double depth)
{
    grow((void **)&pl->needles, &pl->cap_needles, pl->nneedles + 1, sizeof(*pl->needles));
    struct st_needle *nd = &pl->needles[pl->nneedles];
    nd->word_off = st_wplan_pool_add(pl, word, n);
    nd->word_len = n;
    nd->depth = depth;
    return (uint32_t)pl->nneedles++;
}

struct st_wplan_item *st_wplan_add_item(struct st_wplan *pl, enum st_wl_kind kind)
{
    grow((void **)&pl->items, &pl->cap_items, pl->nitems + 1, sizeof(*pl->items));
    struct st_wplan_item *it = &pl->items[pl->nitems++];
    memset(it, 0, sizeof(*it));
    it->kind = kind;
    it->group = ST_WPLAN_NONE;
    it->part0 = pl->nparts;
    it->max_tokens = -1;
    it->t_offset_ns = UINT64_MAX;
    it->source = -1;
    return it;
}

uint32_t st_wplan_add_group(struct st_wplan *pl, uint64_t part0, uint32_t nparts)
{
    uint64_t cap = pl->cap_groups;
    grow((void **)&pl->groups, &cap, (uint64_t)pl->ngroups + 1, sizeof(*pl->groups));
    pl->cap_groups = (uint32_t)cap;
    struct st_wplan_group *g = &pl->groups[pl->ngroups];
    g->part0 = part0;
    g->nparts = nparts;
    g->counted = 0;
    return pl->ngroups++;
}

void st_wplan_put_text(const struct st_wplan *pl, const char *corpus, uint64_t base, uint64_t part0,
                       uint64_t n, struct st_buf *out)
{
    for (uint64_t i = part0; i < part0 + n; i++) {
        const struct st_part *p = &pl->parts[i];
        if (p->type == ST_PART_WIN) {
            st_buf_append(out, corpus + (p->off - base), (size_t)p->len);
        } else if (p->type == ST_PART_TEXT || p->type == ST_PART_NEEDLE) {
            st_buf_append(out, pl->pool.data + p->off, (size_t)p->len);
        }
    }
}

/* ---- writer ---- */

static void write_parts(const struct st_wplan *pl, struct st_jw *w, uint64_t part0, uint64_t n)
{
    st_jw_key(w, "parts");
    st_jw_arr_open(w);
    for (uint64_t i = part0; i < part0 + n; i++) {
        const struct st_part *p = &pl->parts[i];
        const char *pool = st_buf_str(&pl->pool);
        switch (p->type) {
        case ST_PART_WIN:
            st_jw_arr_open(w);
            st_jw_u64(w, p->off);
            st_jw_u64(w, p->len);
            st_jw_arr_close(w);
            break;
        case ST_PART_TEXT:
            st_jw_strn(w, pool + p->off, p->len);
            break;
        case ST_PART_NEEDLE: {
            const struct st_needle *nd = &pl->needles[p->aux];
            st_jw_obj_open(w);
            st_jw_key(w, "needle");
            st_jw_strn(w, pool + p->off, p->len);
            st_jw_key(w, "word");
            st_jw_strn(w, pool + nd->word_off, nd->word_len);
            st_jw_kf64(w, "depth", nd->depth);
            st_jw_obj_close(w);
            break;
        }
        default:
            st_jw_obj_open(w);
            st_jw_kstr(w, "role", p->type == ST_PART_USER ? "user" : "assistant");
            st_jw_obj_close(w);
            break;
        }
    }
    st_jw_arr_close(w);
}

/* One array element a line: the comma ends the line before (the writer would start the next). */
static void next_line(struct st_jw *w, int comma)
{
    st_buf_puts(w->b, comma ? ",\n" : "\n");
    w->comma = 0;
}

void st_wplan_windows_json(const struct st_wplan *pl, struct st_buf *out)
{
    struct st_jw w;
    char hex[17];
    st_jw_init(&w, out);
    st_jw_obj_open(&w);
    st_jw_ku64(&w, "servetune_windows", 1);
    st_jw_kstr(&w, "kind", st_wl_kind_name(pl->kind));
    st_jw_kbool(&w, "chat", pl->chat);
    st_jw_kstr(&w, "corpus", pl->corpus_id);
    st_hash_hex(pl->corpus_hash, hex);
    st_jw_kstr(&w, "corpus_hash", hex);
    st_jw_ku64(&w, "corpus_bytes", pl->corpus_len);
    if (pl->has_data) {
        st_hash_hex(pl->data_hash, hex);
        st_jw_kstr(&w, "data_hash", hex);
    }
    st_jw_key(&w, "groups");
    st_jw_arr_open(&w);
    for (uint32_t g = 0; g < pl->ngroups; g++) {
        next_line(&w, g > 0);
        st_jw_obj_open(&w);
        write_parts(pl, &w, pl->groups[g].part0, pl->groups[g].nparts);
        st_jw_obj_close(&w);
    }
    st_jw_arr_close(&w);
    st_jw_key(&w, "items");
    st_jw_arr_open(&w);
    for (uint64_t i = 0; i < pl->nitems; i++) {
        const struct st_wplan_item *it = &pl->items[i];
        next_line(&w, i > 0);
        st_jw_obj_open(&w);
        st_jw_kstr(&w, "kind", st_wl_kind_name(it->kind));
        st_jw_ku64(&w, "in", it->requested);
        if (it->max_tokens >= 0 && (pl->kind == ST_WL_TRACE || pl->kind == ST_WL_DATASET)) {
            st_jw_ki64(&w, "out", it->max_tokens);
        }
        if (it->group != ST_WPLAN_NONE) {
            st_jw_ku64(&w, "group", it->group);
        }
        if (it->turn) {
            st_jw_ku64(&w, "session", it->session);
            st_jw_ku64(&w, "turn", it->turn);
        }
        if (it->t_offset_ns != UINT64_MAX) {
            st_jw_ku64(&w, "t_ns", it->t_offset_ns);
        }
        if (it->source >= 0) {
            st_jw_ki64(&w, "source", it->source);
        }
        if (it->kind != ST_WL_DATASET) {
            write_parts(pl, &w, it->part0, it->nparts);
        }
        st_jw_obj_close(&w);
    }
    st_buf_putc(out, '\n');
    st_jw_arr_close(&w);
    st_jw_obj_close(&w);
    st_buf_putc(out, '\n');
}

/* ---- reader ---- */

struct reader {
    struct st_json d;
    const char *src;
    const char *name;
    char *err;
    size_t errlen;
    struct st_buf tmp;
};

static uint64_t line_of(const struct reader *r, int tok)
{
    uint64_t line = 1;
    size_t end = tok >= 0 ? r->d.toks[tok].start : 0;
    for (size_t i = 0; i < end; i++) {
        line += r->src[i] == '\n';
    }
    return line;
}

static int fail(struct reader *r, int tok, const char *what)
{
    if (r->err && r->errlen) {
        snprintf(r->err, r->errlen, "%s:%llu: %s", r->name, (unsigned long long)line_of(r, tok),
                 what);
    }
    return ST_EPARSE;
}

/* Reads an unsigned integer member; absent: *out untouched and 1 returned. */
static int get_u64(struct reader *r, int obj, const char *key, uint64_t max, uint64_t *out,
                   const char *what)
{
    int v = st_json_get(&r->d, obj, key);
    int64_t x;
    if (v < 0) {
        return 1;
    }
    if (st_json_i64(&r->d, v, &x) != 0 || x < 0 || (uint64_t)x > max) {
        return fail(r, v, what);
    }
    *out = (uint64_t)x;
    return 0;
}

static int parse_hex(const char *s, size_t n, uint64_t *out)
{
    uint64_t h = 0;
    if (n != 16) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        unsigned v;
        if (c >= '0' && c <= '9') {
            v = (unsigned)(c - '0');
        } else if (c >= 'a' && c <= 'f') {
            v = (unsigned)(c - 'a' + 10);
        } else {
            return -1;
        }
        h = (h << 4) | v;
    }
    *out = h;
    return 0;
}

static int get_hex(struct reader *r, int obj, const char *key, uint64_t *out)
{
    int v = st_json_get(&r->d, obj, key);
    size_t n;
    if (v < 0) {
        return 1;
    }
    const char *s = st_json_raw(&r->d, v, &n);
    if (st_json_type(&r->d, v) != ST_JSON_STRING || parse_hex(s, n, out) != 0) {
        return fail(r, v, "expected 16 lowercase hex digits");
    }
    return 0;
}

static int read_needle(struct reader *r, struct st_wplan *pl, int obj)
{
    int t = st_json_get(&r->d, obj, "needle");
    int wd = st_json_get(&r->d, obj, "word");
    int dp = st_json_get(&r->d, obj, "depth");
    double depth;
    if (st_json_type(&r->d, t) != ST_JSON_STRING || st_json_type(&r->d, wd) != ST_JSON_STRING ||
        st_json_f64(&r->d, dp, &depth) != 0 || !(depth >= 0 && depth <= 1)) {
        return fail(r, obj,
                    "expected a needle {\"needle\": text, \"word\": text, \"depth\": 0..1}");
    }
    st_buf_clear(&r->tmp);
    if (st_json_str(&r->d, wd, &r->tmp) != 0) {
        return fail(r, wd, "expected a string");
    }
    uint32_t ni = st_wplan_add_needle(pl, r->tmp.data ? r->tmp.data : "", r->tmp.len, depth);
    st_buf_clear(&r->tmp);
    if (st_json_str(&r->d, t, &r->tmp) != 0) {
        return fail(r, t, "expected a string");
    }
    uint64_t off = st_wplan_pool_add(pl, r->tmp.data ? r->tmp.data : "", r->tmp.len);
    st_wplan_add_part(pl, ST_PART_NEEDLE, off, r->tmp.len, ni);
    return 0;
}

static int read_part(struct reader *r, struct st_wplan *pl, int e)
{
    int64_t off, len;
    switch (st_json_type(&r->d, e)) {
    case ST_JSON_ARRAY:
        if (r->d.toks[e].size != 2 || st_json_i64(&r->d, e + 1, &off) != 0 ||
            st_json_i64(&r->d, e + 2, &len) != 0 || off < 0 || len < 1) {
            return fail(r, e, "expected a window [offset, length] with length >= 1");
        }
        st_wplan_add_part(pl, ST_PART_WIN, (uint64_t)off, (uint64_t)len, 0);
        return 0;
    case ST_JSON_STRING: {
        st_buf_clear(&r->tmp);
        if (st_json_str(&r->d, e, &r->tmp) != 0) {
            return fail(r, e, "expected a string");
        }
        uint64_t o = st_wplan_pool_add(pl, r->tmp.data ? r->tmp.data : "", r->tmp.len);
        st_wplan_add_part(pl, ST_PART_TEXT, o, r->tmp.len, 0);
        return 0;
    }
    case ST_JSON_OBJECT: {
        int role = st_json_get(&r->d, e, "role");
        if (role >= 0 && st_json_streq(&r->d, role, "user")) {
            st_wplan_add_part(pl, ST_PART_USER, 0, 0, 0);
            return 0;
        }
        if (role >= 0 && st_json_streq(&r->d, role, "assistant")) {
            st_wplan_add_part(pl, ST_PART_ASSISTANT, 0, 0, 0);
            return 0;
        }
        if (role >= 0) {
            return fail(r, role, "expected the role \"user\" or \"assistant\"");
        }
        return read_needle(r, pl, e);
    }
    default:
        return fail(r, e, "expected a part: [offset, length], a string, a role or a needle");
    }
}

/* Reads obj's "parts" array; *part0 and *n get the parts added. */
static int read_parts(struct reader *r, struct st_wplan *pl, int obj, uint64_t *part0, uint32_t *n)
{
    int a = st_json_get(&r->d, obj, "parts");
    *part0 = pl->nparts;
    *n = 0;
    if (st_json_type(&r->d, a) != ST_JSON_ARRAY) {
        return fail(r, obj, "expected \"parts\": [...]");
    }
    if (pl->nparts + r->d.toks[a].size > ST_WPLAN_MAX_PARTS) {
        return ST_ETOOBIG;
    }
    for (int e = st_json_first(&r->d, a); e >= 0; e = st_json_next(&r->d, a, e)) {
        int rc = read_part(r, pl, e);
        if (rc) {
            return rc;
        }
    }
    *n = (uint32_t)(pl->nparts - *part0);
    return 0;
}

static int read_kind(struct reader *r, int obj, enum st_wl_kind *k)
{
    int v = st_json_get(&r->d, obj, "kind");
    st_buf_clear(&r->tmp);
    if (st_json_type(&r->d, v) != ST_JSON_STRING || st_json_str(&r->d, v, &r->tmp) != 0 ||
        st_wl_kind_parse(st_buf_str(&r->tmp), k) != 0) {
        return fail(r, v >= 0 ? v : obj, "expected \"kind\" naming a workload kind");
    }
    return 0;
}

static int read_item(struct reader *r, struct st_wplan *pl, int obj)
{
    enum st_wl_kind kind;
    uint64_t v = 0;
    if (st_json_type(&r->d, obj) != ST_JSON_OBJECT) {
        return fail(r, obj, "expected an item object");
    }
    int rc = read_kind(r, obj, &kind);
    if (rc) {
        return rc;
    }
    if (pl->kind == ST_WL_MIXED ? kind > ST_WL_MULTI_TURN : kind != pl->kind) {
        return fail(r, obj, "expected an item of the map's kind");
    }
    struct st_wplan_item *it = st_wplan_add_item(pl, kind);
    rc = get_u64(r, obj, "in", UINT32_MAX, &it->requested, "expected \"in\": prompt tokens >= 1");
    if (rc < 0) {
        return rc;
    }
    if (rc > 0 || it->requested == 0) {
        return fail(r, obj, "expected \"in\": prompt tokens >= 1");
    }
    rc = get_u64(r, obj, "out", INT32_MAX, &v, "expected \"out\": tokens >= 0");
    if (rc < 0) {
        return rc;
    }
    it->max_tokens = rc == 0 ? (int64_t)v : -1;
    v = ST_WPLAN_NONE;
    rc = get_u64(r, obj, "group", pl->ngroups ? pl->ngroups - 1 : 0, &v,
                 "expected \"group\": an index into \"groups\"");
    if (rc < 0) {
        return rc;
    }
    if (rc == 0 && pl->ngroups == 0) {
        return fail(r, obj, "expected \"group\": an index into \"groups\"");
    }
    it->group = (uint32_t)v;
    uint64_t s = 0, t = 0;
    if (get_u64(r, obj, "session", UINT32_MAX - 1, &s, "expected \"session\" >= 0") < 0 ||
        get_u64(r, obj, "turn", UINT32_MAX - 1, &t, "expected \"turn\" >= 1") < 0) {
        return ST_EPARSE;
    }
    it->session = (uint32_t)s;
    it->turn = (uint32_t)t;
    if (get_u64(r, obj, "t_ns", UINT64_MAX - 1, &it->t_offset_ns, "expected \"t_ns\" >= 0") < 0) {
        return ST_EPARSE;
    }
    v = UINT64_MAX;
    rc = get_u64(r, obj, "source", INT64_MAX, &v, "expected \"source\" >= 0");
    if (rc < 0) {
        return rc;
    }
    it->source = rc == 0 ? (int64_t)v : -1;
    if (kind == ST_WL_DATASET) {
        if (it->source < 0) {
            return fail(r, obj, "expected \"source\": the conversation's index");
        }
        return 0;
    }
    if (kind == ST_WL_MULTI_TURN && it->turn == 0) {
        return fail(r, obj, "expected \"turn\" >= 1 in a multi-turn item");
    }
    uint64_t part0;
    uint32_t n;
    rc = read_parts(r, pl, obj, &part0, &n);
    /* read_parts may have grown the items array: look the item up again. */
    pl->items[pl->nitems - 1].part0 = part0;
    pl->items[pl->nitems - 1].nparts = n;
    return rc;
}

static int read_header(struct reader *r, struct st_wplan *pl)
{
    uint64_t version = 0;
    if (st_json_type(&r->d, 0) != ST_JSON_OBJECT) {
        return fail(r, 0, "expected a window map object");
    }
    if (get_u64(r, 0, "servetune_windows", 1, &version, "expected \"servetune_windows\": 1") ||
        version != 1) {
        return fail(r, 0, "expected \"servetune_windows\": 1");
    }
    int rc = read_kind(r, 0, &pl->kind);
    if (rc) {
        return rc;
    }
    int c = st_json_get(&r->d, 0, "chat");
    int b = c >= 0 ? st_json_bool(&r->d, c) : ST_EPARSE;
    if (b < 0) {
        return fail(r, c >= 0 ? c : 0, "expected \"chat\": true or false");
    }
    pl->chat = b;
    int id = st_json_get(&r->d, 0, "corpus");
    st_buf_clear(&r->tmp);
    if (st_json_type(&r->d, id) != ST_JSON_STRING || st_json_str(&r->d, id, &r->tmp) != 0 ||
        r->tmp.len >= sizeof(pl->corpus_id) ||
        (r->tmp.len && memchr(r->tmp.data, '\0', r->tmp.len))) {
        return fail(r, id >= 0 ? id : 0, "expected \"corpus\": the corpus id (< 256 bytes)");
    }
    memcpy(pl->corpus_id, r->tmp.data ? r->tmp.data : "", r->tmp.len);
    pl->corpus_id[r->tmp.len] = '\0';
    rc = get_hex(r, 0, "corpus_hash", &pl->corpus_hash);
    if (rc) {
        return rc < 0 ? rc : fail(r, 0, "expected \"corpus_hash\"");
    }
    if (get_u64(r, 0, "corpus_bytes", INT64_MAX, &pl->corpus_len,
                "expected \"corpus_bytes\" >= 0")) {
        return fail(r, 0, "expected \"corpus_bytes\": the corpus length");
    }
    rc = get_hex(r, 0, "data_hash", &pl->data_hash);
    if (rc < 0) {
        return rc;
    }
    pl->has_data = rc == 0;
    return 0;
}

int st_wplan_windows_parse(struct st_wplan *pl, const char *json, size_t len, const char *name,
                           char *err, size_t errlen)
{
    struct reader r;
    memset(&r, 0, sizeof(r));
    st_json_init(&r.d, MAX_TOKS);
    st_buf_init(&r.tmp);
    r.src = json;
    r.name = name ? name : "windows";
    r.err = err;
    r.errlen = errlen;
    int rc = st_json_parse(&r.d, json, len);
    if (rc == ST_ETOOBIG) {
        if (err && errlen) {
            snprintf(err, errlen, "%s: the window map is over its size limits", r.name);
        }
        goto out;
    }
    if (rc) {
        if (err && errlen) {
            snprintf(err, errlen, "%s: not valid JSON (%s)", r.name, st_strerror(rc));
        }
        rc = ST_EPARSE;
        goto out;
    }
    rc = read_header(&r, pl);
    if (rc) {
        goto out;
    }
    int groups = st_json_get(&r.d, 0, "groups");
    if (groups >= 0 && st_json_type(&r.d, groups) != ST_JSON_ARRAY) {
        rc = fail(&r, groups, "expected \"groups\": [...]");
        goto out;
    }
    if (groups >= 0 && r.d.toks[groups].size > MAX_GROUPS) {
        rc = ST_ETOOBIG;
        goto out;
    }
    for (int g = st_json_first(&r.d, groups); g >= 0; g = st_json_next(&r.d, groups, g)) {
        uint64_t part0;
        uint32_t n;
        if (st_json_type(&r.d, g) != ST_JSON_OBJECT) {
            rc = fail(&r, g, "expected a group {\"parts\": [...]}");
            goto out;
        }
        rc = read_parts(&r, pl, g, &part0, &n);
        if (rc) {
            goto out;
        }
        st_wplan_add_group(pl, part0, n);
    }
    int items = st_json_get(&r.d, 0, "items");
    if (st_json_type(&r.d, items) != ST_JSON_ARRAY) {
        rc = fail(&r, items >= 0 ? items : 0, "expected \"items\": [...]");
        goto out;
    }
    if (r.d.toks[items].size > ST_WPLAN_MAX_ITEMS) {
        rc = ST_ETOOBIG;
        goto out;
    }
    for (int e = st_json_first(&r.d, items); e >= 0; e = st_json_next(&r.d, items, e)) {
        rc = read_item(&r, pl, e);
        if (rc) {
            goto out;
        }
    }
out:
    if (rc == ST_ETOOBIG && err && errlen) {
        snprintf(err, errlen, "%s: the window map is over its size limits", r.name);
    }
    st_json_release(&r.d);
    st_buf_release(&r.tmp);
    return rc;
}
