/*
 * The --workload option family: parsing, reading the files, building the workload, saving the
 * window map. See wlopts.h.
 */
#include "cli/wlopts.h"

#include <sys/stat.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/xalloc.h"
#include "cli/args.h"
#include "store/fsutil.h"

#define LEN_MAX (16ull * 1024 * 1024)
#define BUILTIN_MIN_BYTES (1u << 20)
#define BUILTIN_MAX_BYTES (1ull << 30)

void st_cli_wl_usage(FILE *f)
{
    fputs("workload:\n"
          "  --workload KIND           fixed, shared-prefix, distinct, long, multi-turn, mixed, "
          "dataset, trace\n"
          "  --input-len N[:MAX]       prompt tokens (uniform in [N, MAX] when MAX is given)\n"
          "  --output-len N[:MAX]      max_tokens (a range needs --workload)\n"
          "  --prefix-frac F           shared-prefix: share of the prompt shared, in [0, 1)\n"
          "  --groups N                shared-prefix: distinct shared prefixes (default 1)\n"
          "  --zipf S                  shared-prefix: Zipf(S) group popularity (default uniform)\n"
          "  --turns N                 multi-turn: turns per session\n"
          "  --needles N               long: needles per prompt\n"
          "  --mix KIND=W,...          mixed: kinds and weights\n"
          "  --corpus DIR|FILE.jsonl   text the prompts are cut from (.txt files in name order, "
          "or\n"
          "                            JSONL with a \"text\" field); default: built-in prose\n"
          "  --windows FILE            window map: used when FILE exists, else written there\n"
          "  --len-tolerance F         a prompt further than F from its length fails the build "
          "(0.01)\n"
          "  --dataset FILE            dataset: ShareGPT-style JSON conversations\n"
          "  --trace FILE              trace: Mooncake JSONL, sent at its timestamps (open loop)\n",
          f);
}

void st_cli_wl_init(struct st_cli_wl *w)
{
    memset(w, 0, sizeof(*w));
    st_wl_params_defaults(&w->p); /* 1 group, tolerance 0.01 */
    w->p.kind = 0;                /* the caller picks */
    st_buf_init(&w->file);
    st_buf_init(&w->windows);
}

void st_cli_load_init(struct st_cli_conn *conn, struct st_load_cfg *cfg, struct st_cli_wl *w)
{
    st_cli_cfg_defaults(cfg);
    st_cli_conn_init(conn);
    st_cli_wl_init(w);
}

void st_cli_load_release(struct st_cli_conn *conn, struct st_cli_wl *w)
{
    st_cli_wl_release(w);
    st_cli_conn_release(conn);
}

void st_cli_wl_release(struct st_cli_wl *w)
{
    st_workload_free(w->wl);
    w->wl = NULL;
    if (w->have_corpus) {
        st_corpus_release(&w->corpus);
        w->have_corpus = 0;
    }
    st_buf_release(&w->file);
    st_buf_release(&w->windows);
}

/* "N" or "N:MAX" with 1 <= N <= MAX <= LEN_MAX. */
static int parse_len(const char *opt, const char *v, uint64_t *lo, uint64_t *hi, char *err,
                     size_t errlen)
{
    const char *colon = strchr(v, ':');
    if (!colon) {
        int rc = st_arg_u64(opt, v, 1, LEN_MAX, lo, err, errlen);
        *hi = *lo;
        return rc;
    }
    char a[32];
    size_t n = (size_t)(colon - v);
    if (n == 0 || n >= sizeof(a)) {
        snprintf(err, errlen, "%s: expected N or MIN:MAX tokens, got '%s'", opt, v);
        return ST_EUSAGE;
    }
    memcpy(a, v, n);
    a[n] = '\0';
    int rc = st_arg_u64(opt, a, 1, LEN_MAX, lo, err, errlen);
    if (rc == 0) {
        rc = st_arg_u64(opt, colon + 1, 1, LEN_MAX, hi, err, errlen);
    }
    if (rc == 0 && *hi < *lo) {
        snprintf(err, errlen, "%s: MAX %llu is below MIN %llu", opt, (unsigned long long)*hi,
                 (unsigned long long)*lo);
        return ST_EUSAGE;
    }
    return rc;
}

/* "kind=w,kind=w": the kinds a mix may hold and positive weights. */
static int parse_mix(struct st_cli_wl *w, const char *v, char *err, size_t errlen)
{
    static const char *const mixable[] = {"fixed", "shared-prefix", "distinct",
                                          "long",  "multi-turn",    NULL};
    w->p.n_mix = 0;
    const char *s = v;
    while (*s) {
        const char *comma = strchr(s, ',');
        size_t n = comma ? (size_t)(comma - s) : strlen(s);
        char item[64];
        if (n == 0 || n >= sizeof(item) || w->p.n_mix >= ST_WL_MAX_MIX) {
            snprintf(err, errlen, "--mix: expected up to %d KIND=WEIGHT items, got '%s'",
                     ST_WL_MAX_MIX, v);
            return ST_EUSAGE;
        }
        memcpy(item, s, n);
        item[n] = '\0';
        char *eq = strchr(item, '=');
        if (!eq) {
            snprintf(err, errlen, "--mix: expected KIND=WEIGHT, got '%s'", item);
            return ST_EUSAGE;
        }
        *eq = '\0';
        int k = 0;
        double wt = 0;
        int rc = st_arg_choice("--mix", item, mixable, &k, err, errlen);
        if (rc == 0) {
            rc = st_arg_f64("--mix weight", eq + 1, 1e-9, 1e9, &wt, err, errlen);
        }
        if (rc) {
            return rc;
        }
        w->p.mix_kind[w->p.n_mix] = (enum st_wl_kind)(ST_WL_FIXED + k);
        w->p.mix_weight[w->p.n_mix] = wt;
        w->p.n_mix++;
        s += n;
        if (*s == ',') {
            s++;
        }
    }
    if (w->p.n_mix == 0) {
        snprintf(err, errlen, "--mix: expected KIND=WEIGHT items, got '%s'", v);
        return ST_EUSAGE;
    }
    return 0;
}

int st_cli_wl_len_opt(const struct st_opt *opt, const char *v, char *err, size_t errlen)
{
    struct st_wl_params *p = &((struct st_cli_wl *)opt->to.ctx)->p;
    if (opt->set) {
        return parse_len(st_opt_name(opt), v, &p->output_len, &p->output_len_max, err, errlen);
    }
    return parse_len(st_opt_name(opt), v, &p->input_len, &p->input_len_max, err, errlen);
}

static int kind_opt(const struct st_opt *opt, const char *v, char *err, size_t errlen)
{
    struct st_cli_wl *w = opt->to.ctx;
    if (st_wl_kind_parse(v, &w->p.kind) != 0) {
        snprintf(err, errlen,
                 "--workload: expected one of fixed, shared-prefix, distinct, long, "
                 "multi-turn, mixed, dataset, trace; got '%s'",
                 v);
        return ST_EUSAGE;
    }
    return 0;
}

static int prefix_opt(const struct st_opt *opt, const char *v, char *err, size_t errlen)
{
    struct st_cli_wl *w = opt->to.ctx;
    double f = 0;
    int rc = st_arg_f64("--prefix-frac", v, 0, 1, &f, err, errlen);
    if (rc == 0 && f >= 1.0) {
        snprintf(err, errlen,
                 "--prefix-frac: expected a share in [0, 1), got '%s' (a prompt needs a "
                 "suffix of its own)",
                 v);
        rc = ST_EUSAGE;
    }
    w->p.prefix_frac = f;
    return rc;
}

static int mix_opt(const struct st_opt *opt, const char *v, char *err, size_t errlen)
{
    return parse_mix(opt->to.ctx, v, err, errlen);
}

void st_cli_wl_opts(struct st_cli_wl *w, struct st_opt *out)
{
    const struct st_opt rows[] = {
        {ST_OPT_FN("--workload", kind_opt, w), .given = &w->kind_given},
        {ST_OPT_FN("--input-len", st_cli_wl_len_opt, w), .given = &w->inlen_given},
        {ST_OPT_FN("--output-len", st_cli_wl_len_opt, w), .set = 1, .given = &w->outlen_given},
        {ST_OPT_FN("--prefix-frac", prefix_opt, w), .given = &w->prefix_given},
        {ST_OPT_U32("--groups", &w->p.groups, 1, 1000000)},
        {ST_OPT_F64("--zipf", &w->p.zipf_s, 0, 10)},
        {ST_OPT_U32("--turns", &w->p.turns, 1, 10000)},
        {ST_OPT_U32("--needles", &w->p.needles, 0, 1000)},
        {ST_OPT_FN("--mix", mix_opt, w)},
        {ST_OPT_STR("--corpus", &w->corpus_path)},
        {ST_OPT_STR("--windows", &w->windows_path)},
        {ST_OPT_F64("--len-tolerance", &w->p.len_tolerance, 0, 1)},
        {ST_OPT_STR("--dataset", &w->dataset_path)},
        {ST_OPT_STR("--trace", &w->trace_path)},
        {.flag = NULL},
    };
    _Static_assert(sizeof(rows) / sizeof(rows[0]) == ST_CLI_WL_NOPTS + 1, "row count");
    memcpy(out, rows, sizeof(rows));
}

int st_cli_load_parse(const char *name, void (*usage)(FILE *f), struct st_cli_conn *conn,
                      struct st_load_cfg *cfg, struct st_cli_wl *w, const struct st_opt *own,
                      int argc, char **argv)
{
    struct st_opt conn_opts[ST_CLI_CONN_NOPTS + 1], wl_opts[ST_CLI_WL_NOPTS + 1];
    st_cli_conn_opts(conn, cfg, conn_opts);
    st_cli_wl_opts(w, wl_opts);
    const struct st_opt *const tables[] = {conn_opts, wl_opts, own, NULL};
    struct st_cli_cmd cmd = {.name = name, .usage = usage, .tables = tables};
    int code = st_cli_parse(&cmd, argc, argv);
    /* --seed seeds the prompts and the arrivals alike. */
    cfg->sched_seed = w->p.seed;
    cfg->prompt_seed = w->p.seed;
    return code;
}

int st_cli_wl_check(struct st_cli_wl *w, char *err, size_t errlen)
{
    enum st_wl_kind k = w->p.kind;
    if (k == ST_WL_DATASET && !w->dataset_path) {
        snprintf(err, errlen, "--workload dataset needs --dataset FILE");
        return ST_EUSAGE;
    }
    if (k == ST_WL_TRACE && !w->trace_path) {
        snprintf(err, errlen, "--workload trace needs --trace FILE");
        return ST_EUSAGE;
    }
    if (w->dataset_path && k != ST_WL_DATASET) {
        snprintf(err, errlen, "--dataset needs --workload dataset");
        return ST_EUSAGE;
    }
    if (w->trace_path && k != ST_WL_TRACE) {
        snprintf(err, errlen, "--trace needs --workload trace");
        return ST_EUSAGE;
    }
    if (w->prefix_given && k != ST_WL_SHARED_PREFIX && k != ST_WL_MIXED) {
        snprintf(err, errlen, "--prefix-frac needs --workload shared-prefix (or mixed)");
        return ST_EUSAGE;
    }
    if (w->p.n_mix && k != ST_WL_MIXED) {
        snprintf(err, errlen, "--mix needs --workload mixed");
        return ST_EUSAGE;
    }
    if (k == ST_WL_MIXED && w->p.n_mix == 0) {
        snprintf(err, errlen, "--workload mixed needs --mix KIND=WEIGHT,...");
        return ST_EUSAGE;
    }
    if (k == ST_WL_MULTI_TURN && w->p.turns == 0) {
        w->p.turns = 4;
    }
    return 0;
}

uint64_t st_cli_wl_max_request_tokens(const struct st_cli_wl *w)
{
    if (w->p.kind == ST_WL_DATASET || w->p.kind == ST_WL_TRACE) {
        return 0;
    }
    uint64_t in = w->p.input_len_max > w->p.input_len ? w->p.input_len_max : w->p.input_len;
    uint64_t out = w->p.output_len_max > w->p.output_len ? w->p.output_len_max : w->p.output_len;
    if (w->p.kind == ST_WL_MULTI_TURN || (w->p.kind == ST_WL_MIXED && w->p.turns > 1)) {
        /* The last turn resends the whole history: every turn's prompt and answer. */
        uint64_t turns = w->p.turns ? w->p.turns : 1;
        return turns * (in + out);
    }
    return in + out;
}

int st_cli_wl_fit(struct st_cli_wl *w, const struct st_target *t, char *err, size_t errlen)
{
    const char *what = NULL;
    uint64_t ctx = st_cli_target_context(t, &what);
    uint64_t need = st_cli_wl_max_request_tokens(w);
    if (ctx && need > ctx) {
        snprintf(err, errlen,
                 "a request of --input-len %llu + --output-len %llu = %llu tokens is over the "
                 "server's context of %llu tokens (%s); nothing was sent",
                 (unsigned long long)w->p.input_len_max, (unsigned long long)w->p.output_len_max,
                 (unsigned long long)need, (unsigned long long)ctx, what);
        return ST_EUSAGE;
    }
    w->p.context_tokens = ctx;
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The .txt files of dir in byte order of their names, joined by a blank line. */
static int read_corpus_dir(const char *dir, struct st_buf *out, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        snprintf(err, errlen, "--corpus %s: %s", dir, strerror(e));
        return -e;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len < 5 || strcmp(de->d_name + len - 4, ".txt") != 0 || de->d_name[0] == '.') {
            continue;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            names = st_xrealloc(names, cap * sizeof(*names));
        }
        names[n] = st_xstrdup(de->d_name);
        n++;
    }
    closedir(d);
    int rc = 0;
    if (n == 0) {
        snprintf(err, errlen, "--corpus %s: no .txt files in the folder", dir);
        rc = ST_EUSAGE;
    }
    qsort(names, n, sizeof(*names), cmp_names);
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct st_buf path;
        st_buf_init(&path);
        st_buf_printf(&path, "%s/%s", dir, names[i]);
        if (out->len) {
            st_buf_puts(out, "\n\n");
        }
        rc = st_cli_read_file(path.data, ST_CLI_WL_MAX_FILE - out->len, out, err, errlen);
        st_buf_release(&path);
    }
    for (size_t i = 0; i < n; i++) {
        free(names[i]);
    }
    free(names);
    return rc;
}

static int load_corpus(struct st_cli_wl *w, char *err, size_t errlen)
{
    if (!w->corpus_path) {
        uint64_t bytes = st_wl_corpus_bytes_hint(&w->p);
        if (bytes < BUILTIN_MIN_BYTES) {
            bytes = BUILTIN_MIN_BYTES;
        }
        if (bytes > BUILTIN_MAX_BYTES) {
            bytes = BUILTIN_MAX_BYTES;
        }
        st_corpus_builtin(&w->corpus, w->p.seed, (size_t)bytes);
        w->have_corpus = 1;
        return 0;
    }
    struct stat st;
    if (stat(w->corpus_path, &st) != 0) {
        int e = errno;
        snprintf(err, errlen, "--corpus %s: %s", w->corpus_path, strerror(e));
        return ST_EUSAGE;
    }
    struct st_buf text;
    st_buf_init(&text);
    int rc = 0;
    char sub[400] = "";
    if (S_ISDIR(st.st_mode)) {
        rc = read_corpus_dir(w->corpus_path, &text, sub, sizeof(sub));
        if (rc == 0) {
            rc = st_corpus_from_text(&w->corpus, w->corpus_path, text.data ? text.data : "",
                                     text.len);
            if (rc) {
                snprintf(sub, sizeof(sub), "%s: %s (expected UTF-8 text)", w->corpus_path,
                         st_strerror(rc));
            }
        }
    } else {
        rc = st_cli_read_file(w->corpus_path, ST_CLI_WL_MAX_FILE, &text, sub, sizeof(sub));
        if (rc == 0) {
            rc = st_corpus_from_jsonl(&w->corpus, w->corpus_path, text.data ? text.data : "",
                                      text.len, sub, sizeof(sub));
        }
    }
    st_buf_release(&text);
    if (rc) {
        snprintf(err, errlen, "--corpus %s", sub);
        return ST_EUSAGE;
    }
    w->have_corpus = 1;
    return 0;
}

int st_cli_wl_build(struct st_cli_wl *w, uint64_t requests, int chat, st_tok_counter_fn count,
                    void *count_ctx, char *err, size_t errlen)
{
    w->p.requests = requests;
    w->p.chat = chat;
    if (w->p.output_len_max < w->p.output_len) {
        w->p.output_len_max = w->p.output_len;
    }
    if (w->p.input_len_max < w->p.input_len) {
        w->p.input_len_max = w->p.input_len;
    }
    const char *file = w->dataset_path ? w->dataset_path : w->trace_path;
    const char *opt = w->dataset_path ? "--dataset" : "--trace";
    char sub[400] = "";
    if (file) {
        int rc = st_cli_read_file(file, ST_CLI_WL_MAX_FILE, &w->file, sub, sizeof(sub));
        if (rc) {
            snprintf(err, errlen, "%s %s", opt, sub);
            return ST_EUSAGE;
        }
        w->p.data = w->file.data ? w->file.data : "";
        w->p.data_len = w->file.len;
        w->p.data_name = file;
    }
    if (w->windows_path && access(w->windows_path, F_OK) == 0) {
        int rc =
            st_cli_read_file(w->windows_path, ST_CLI_WL_MAX_FILE, &w->windows, sub, sizeof(sub));
        if (rc) {
            snprintf(err, errlen, "--windows %s", sub);
            return ST_EUSAGE;
        }
        w->windows_read = 1;
        w->p.windows_name = w->windows_path;
    }
    int rc = load_corpus(w, err, errlen);
    if (rc) {
        return rc;
    }
    rc = st_workload_build(&w->wl, &w->p, &w->corpus, w->windows_read ? w->windows.data : NULL,
                           w->windows_read ? w->windows.len : 0, count, count_ctx, err, errlen);
    if (rc) {
        w->wl = NULL;
        return rc;
    }
    if (!w->windows_read) {
        st_buf_clear(&w->windows);
        st_workload_windows_json(w->wl, &w->windows);
    }
    return 0;
}

int st_cli_wl_save_windows(struct st_cli_wl *w, const char *path, char *err, size_t errlen)
{
    if (!w->wl) {
        return 0;
    }
    const char *paths[2] = {path, w->windows_read ? NULL : w->windows_path};
    for (int i = 0; i < 2; i++) {
        if (!paths[i]) {
            continue;
        }
        int rc = st_fs_write_atomic(paths[i], w->windows.data ? w->windows.data : "",
                                    w->windows.len, 0644);
        if (rc) {
            snprintf(err, errlen, "cannot write the window map %s: %s", paths[i], st_strerror(rc));
            return rc;
        }
    }
    return 0;
}

void st_cli_wl_json(struct st_jw *w, const struct st_cli_wl *wl, int output_max)
{
    st_jw_key(w, "workload");
    st_jw_obj_open(w);
    st_jw_kstr(w, "kind", st_wl_kind_name(wl->p.kind));
    st_jw_ku64(w, "input_len", wl->p.input_len);
    st_jw_ku64(w, "input_len_max", wl->p.input_len_max);
    st_jw_ku64(w, "output_len", wl->p.output_len);
    if (output_max) {
        st_jw_ku64(w, "output_len_max", wl->p.output_len_max);
    }
    if (wl->p.kind == ST_WL_SHARED_PREFIX) {
        st_jw_kf64(w, "prefix_frac", wl->p.prefix_frac);
        st_jw_ku64(w, "groups", wl->p.groups);
        st_jw_kf64(w, "zipf", wl->p.zipf_s);
    }
    st_jw_ku64(w, "seed", wl->p.seed);
    st_jw_ku64(w, "items", wl->wl ? st_workload_items(wl->wl) : 0);
    st_jw_kf64(w, "max_len_error", wl->wl ? st_workload_max_len_error(wl->wl) : 0);
    st_jw_ku64(w, "counter_calls", wl->wl ? st_workload_counter_calls(wl->wl) : 0);
}

/* Re-points p after scratch moved from old to scratch->data, when p pointed into it. */
static const char *rebase(const char *p, const char *old, size_t old_len, const char *now)
{
    if (p && old && p >= old && p <= old + old_len) {
        return now + (p - old);
    }
    return p;
}

int st_cli_slice_source(const void *ctx, uint64_t id, struct st_req_item *item,
                        struct st_buf *scratch)
{
    const struct st_cli_slice *s = ctx;
    int rc = st_workload_source(s->wl, s->base + id, item, scratch);
    if (rc == 0 && s->max_tokens >= 0) {
        item->max_tokens = s->max_tokens;
    }
    if (rc || !s->members || !s->members[0]) {
        return rc;
    }
    /* The new tag goes after what the item already keeps in scratch, which may move. */
    const char *old = scratch->data;
    size_t old_len = scratch->len;
    size_t start = scratch->len;
    const char *tag = item->tag_json;
    size_t tag_len = item->tag_len;
    size_t tag_off = 0;
    int tag_in_scratch = tag && old && tag >= old && tag <= old + old_len;
    if (tag_in_scratch) {
        tag_off = (size_t)(tag - old);
    }
    st_buf_putc(scratch, '{');
    st_buf_puts(scratch, s->members);
    if (tag && tag_len >= 2 && tag[0] == '{') {
        /* Copy the inner members; re-read tag after a possible move of scratch. */
        const char *t = tag_in_scratch ? scratch->data + tag_off : tag;
        size_t inner = tag_len - 2;
        size_t k = 1;
        while (k <= inner && (t[k] == ' ' || t[k] == '\n')) {
            k++;
        }
        if (k <= inner) {
            st_buf_putc(scratch, ',');
            t = tag_in_scratch ? scratch->data + tag_off : tag;
            st_buf_reserve(scratch, inner);
            t = tag_in_scratch ? scratch->data + tag_off : tag;
            st_buf_append(scratch, t + 1, inner);
        }
    }
    st_buf_putc(scratch, '}');
    const char *now = scratch->data;
    item->prompt = rebase(item->prompt, old, old_len, now);
    item->messages_json = rebase(item->messages_json, old, old_len, now);
    item->tag_json = scratch->data + start;
    item->tag_len = scratch->len - start;
    return 0;
}
