/*
 * servetune sim: runs the embedded simulator (docs/sim.md). Without --profile it is the
 * fixed-timing test server; with --profile it models an engine (model mode): the profile is read,
 * overridden, validated and planned here, and a plan that does not fit exits like a real engine
 * that runs out of memory. This file owns the options, the messages, the log lines on stderr and
 * the exit codes; the server itself is src/sim/. The first line on stdout is
 * "listening on HOST:PORT".
 */
#include <sys/resource.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/num.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/common.h"
#include "sim/dialect.h"
#include "sim/model/cost.h"
#include "sim/model/memory.h"
#include "sim/model/profile.h"
#include "sim/scenario.h"
#include "sim/server.h"
#include "sim/spec.h"
#include "sim/trace.h"
#include "store/fsutil.h"

#define DEFAULT_LISTEN "127.0.0.1:8000"
#define DEFAULT_MODEL "sim"
/* Most --set overrides. */
#define MAX_SETS 128
#define GIB (1024.0 * 1024.0 * 1024.0)

static void usage(FILE *f)
{
    fputs("usage: servetune sim [options]\n"
          "\n"
          "Runs an OpenAI-compatible test server: with fixed timelines (default), or modelling an\n"
          "inference engine described by a profile (--profile).\n"
          "\n"
          "options:\n"
          "  --listen HOST:PORT       address to listen on (default 127.0.0.1:8000; port 0 picks\n"
          "                           a free port; IPv6 as [::1]:PORT); loopback only unless\n"
          "                           --allow-remote\n"
          "  --allow-remote           allow a non-loopback listen address\n"
          "  --ttft-ms F              arrival to the first content chunk (default 50)\n"
          "  --itl-ms F               gap between content chunks (default 10)\n"
          "  --tokens-per-chunk N     tokens in one content chunk, 1..8 (default 1)\n"
          "  --usage auto|always|never  the usage chunk (default auto: when include_usage)\n"
          "  --done on|off            end streams with data: [DONE] (default on)\n"
          "  --role-chunk early|first|off  role-only chat chunk (default early: with headers)\n"
          "  --model NAME             model name reported (default sim; model mode: model.name)\n"
          "  --fault SPEC             key=value,... applied to every request (X-Sim syntax) and,\n"
          "                           in model mode, process faults (crash_after_requests, ...)\n"
          "  --trace FILE             write one JSONL line per event written\n"
          "\n"
          "model mode:\n"
          "  --profile FILE           the engine profile (YAML; docs/simulator.md)\n"
          "  --set KEY=VALUE          override one profile key (repeatable), e.g. engine.tp=4\n"
          "  --dialect vllm|sglang|llamacpp  the engine imitated (sets engine.dialect)\n"
          "  --speed X|max            at most X virtual seconds per real second (default 1);\n"
          "                           max: as fast as the CPU allows (figures do not change)\n"
          "  --seed N                 seed of every draw (default: the profile's seed)\n"
          "  --dev-mode               vLLM: VLLM_SERVER_DEV_MODE=1 (/reset_prefix_cache exists)\n"
          "  --slot-save-path DIR     llama.cpp: enable slot actions (/slots/ID?action=erase)\n"
          "  --scenario FILE          faults from a file (key: value lines; docs/sim.md)\n"
          "  --explain                print the memory plan and the cost model's figures, exit\n"
          "  --json                   with --explain: one JSON object\n"
          "  --explain-request P,N    --explain, plus the model's TTFT and decode rate of one\n"
          "                           request alone of P prompt and N output tokens\n"
          "  -h, --help               show this help\n"
          "\n"
          "Per request, the header X-Sim: key=value,... overrides any of these; see docs/sim.md.\n",
          f);
}

struct sim_opts {
    const char *listen;
    const char *model;
    const char *trace;
    int allow_remote;
    struct st_sim_spec spec;
    struct st_sim_faults faults;
    /* Model mode. */
    const char *profile;
    const char *sets[MAX_SETS];
    int n_sets;
    const char *dialect;
    double speed;
    uint64_t seed;
    int seed_given;
    int dev_mode;
    const char *slot_save_path;
    const char *scenario;
    int explain;
    int json;
    uint64_t req_prompt, req_output; /* --explain-request P,N; 0 = none */
    const char *timing_flag;         /* a fixed-timing-only flag that was given */
    const char *model_flag;          /* a model-mode-only flag that was given */
};

/* A flag that sets one spec key, the flag's name with '_' for '-' (--ttft-ms: ttft_ms). */
static int key_opt(const struct st_opt *opt, const char *v, char *err, size_t errlen)
{
    char key[32];
    snprintf(key, sizeof(key), "%s", opt->flag + 2);
    for (char *p = key; *p; p++) {
        *p = *p == '-' ? '_' : *p;
    }
    if (st_sim_spec_set(opt->to.ctx, key, strlen(key), v, strlen(v), NULL, 0) != 0) {
        snprintf(err, errlen, "%s expects %s; got '%s'", opt->flag, st_sim_spec_expect(key), v);
        return ST_EUSAGE;
    }
    return 0;
}

static int model_opt(const struct st_opt *opt, const char *v, char *err, size_t errlen)
{
    if (v[0] == '\0' || strlen(v) > ST_SIM_MAX_MODEL_BYTES) {
        snprintf(err, errlen, "--model expects a name of 1 to %u bytes", ST_SIM_MAX_MODEL_BYTES);
        return ST_EUSAGE;
    }
    const char **dst = opt->to.ctx;
    *dst = v;
    return 0;
}

static int fault_opt(const struct st_opt *opt, const char *v, char *err, size_t errlen)
{
    struct sim_opts *o = opt->to.ctx;
    char sub[256];
    if (st_sim_faults_apply(&o->faults, &o->spec, v, strlen(v), sub, sizeof(sub)) != 0) {
        snprintf(err, errlen, "--fault: %s", sub);
        return ST_EUSAGE;
    }
    return 0;
}

static int set_opt(const struct st_opt *opt, const char *v, char *err, size_t errlen)
{
    struct sim_opts *o = opt->to.ctx;
    if (o->n_sets == MAX_SETS) {
        snprintf(err, errlen, "at most %d --set options", MAX_SETS);
        return ST_EUSAGE;
    }
    o->sets[o->n_sets++] = v;
    return 0;
}

/* --explain-request PROMPT,OUTPUT: --explain, plus one request's figures. */
static int request_opt(const struct st_opt *opt, const char *v, char *err, size_t errlen)
{
    struct sim_opts *o = opt->to.ctx;
    const char *end = v;
    uint64_t a = 0, b = 0;
    int rc = st_num_u64_prefix(v, UINT64_MAX, &end, &a);
    if (rc == 0 && *end == ',') {
        rc = st_num_u64z(end + 1, UINT64_MAX, &b);
        end = "";
    }
    if (rc != 0 || *end != '\0' || a < 1 || a > 100000000 || b < 2 || b > 10000000) {
        snprintf(err, errlen,
                 "--explain-request expects PROMPT,OUTPUT tokens (prompt 1 to 1e8, output 2 to "
                 "1e7), got '%s'",
                 v);
        return ST_EUSAGE;
    }
    o->explain = 1;
    o->req_prompt = a;
    o->req_output = b;
    return 0;
}

/* Parses argv into o. Returns -1 to go on, or an exit code (help, bad usage). */
static int parse_args(int argc, char **argv, struct sim_opts *o)
{
    /* mark: which fixed-timing flag or model-mode flag was given, for the checks below. */
    const char **timing = &o->timing_flag, **model = &o->model_flag;
    const struct st_opt opts[] = {
        {ST_OPT_STR("--listen", &o->listen)},
        {ST_OPT_FLAG("--allow-remote", &o->allow_remote, 1)},
        {ST_OPT_FN("--ttft-ms", key_opt, &o->spec), .mark = timing},
        {ST_OPT_FN("--itl-ms", key_opt, &o->spec), .mark = timing},
        {ST_OPT_FN("--tokens-per-chunk", key_opt, &o->spec), .mark = timing},
        {ST_OPT_FN("--usage", key_opt, &o->spec)},
        {ST_OPT_FN("--done", key_opt, &o->spec)},
        {ST_OPT_FN("--role-chunk", key_opt, &o->spec), .mark = timing},
        {ST_OPT_FN("--model", model_opt, &o->model)},
        {ST_OPT_FN("--fault", fault_opt, o)},
        {ST_OPT_STR("--trace", &o->trace)},
        {ST_OPT_STR("--profile", &o->profile)},
        {ST_OPT_FN("--set", set_opt, o), .mark = model},
        {ST_OPT_STR("--dialect", &o->dialect), .mark = model},
        {ST_OPT_F64("--speed", &o->speed, 1e-3, 1e6), .word = "max", .mark = model},
        {ST_OPT_U64("--seed", &o->seed, 0, UINT64_MAX), .given = &o->seed_given, .mark = model},
        {ST_OPT_FLAG("--dev-mode", &o->dev_mode, 1), .mark = model},
        {ST_OPT_STR("--slot-save-path", &o->slot_save_path), .mark = model},
        {ST_OPT_STR("--scenario", &o->scenario), .mark = model},
        {ST_OPT_FLAG("--explain", &o->explain, 1), .mark = model},
        {ST_OPT_FLAG("--json", &o->json, 1), .mark = model},
        {ST_OPT_FN("--explain-request", request_opt, o), .mark = model},
        {.flag = NULL},
    };
    const struct st_opt *const tables[] = {opts, NULL};
    struct st_cli_cmd cmd = {.name = "sim", .usage = usage, .tables = tables, .getopt_says = 1};
    int code = st_cli_parse(&cmd, argc, argv);
    if (code >= 0) {
        return code;
    }
    if (!o->profile && o->model_flag) {
        fprintf(stderr, "servetune sim: %s needs --profile (model mode)\n", o->model_flag);
        return ST_EXIT_USAGE;
    }
    if (!o->profile && st_sim_faults_any(&o->faults)) {
        fprintf(stderr, "servetune sim: --fault: process faults (startup_oom, crash_after_*, "
                        "slow_start_s, memory_pressure_*) need --profile (model mode)\n");
        return ST_EXIT_USAGE;
    }
    if (o->profile && o->timing_flag) {
        fprintf(stderr,
                "servetune sim: %s sets a fixed timeline; with --profile the engine model decides "
                "the timing\n",
                o->timing_flag);
        return ST_EXIT_USAGE;
    }
    if (o->json && !o->explain) {
        fprintf(stderr, "servetune sim: --json goes with --explain\n");
        return ST_EXIT_USAGE;
    }
    return -1;
}

/* ---- model mode: profile, plan, explain ---- */

/* Reads a whole file of at most max bytes into out. 0, or a negated errno / ST_ETOOBIG. */
static int read_file(const char *path, size_t max, struct st_buf *out)
{
    return st_fs_read_file(path, max, out);
}

/* Builds the profile: defaults, the file, --set, --dialect, validation. 0 or an exit code. */
static int load_profile(const struct sim_opts *o, struct st_profile *p)
{
    char err[1024];
    struct st_buf text;
    st_buf_init(&text);
    st_profile_defaults(p);
    int rc = read_file(o->profile, ST_PROFILE_MAX_BYTES, &text);
    if (rc != 0) {
        fprintf(stderr, "servetune sim: --profile %s: %s\n", o->profile,
                rc == ST_ETOOBIG ? "over 1 MiB" : st_strerror(rc));
        st_buf_release(&text);
        return ST_EXIT_USAGE;
    }
    rc = st_profile_parse(p, text.data ? text.data : "", text.len, o->profile, err, sizeof(err));
    st_buf_release(&text);
    if (rc != 0) {
        fprintf(stderr, "servetune sim: %s\n", err);
        return ST_EXIT_USAGE;
    }
    for (int i = 0; i < o->n_sets; i++) {
        if (st_profile_set(p, o->sets[i], err, sizeof(err)) != 0) {
            fprintf(stderr, "servetune sim: %s\n", err);
            return ST_EXIT_USAGE;
        }
    }
    if (o->dialect) {
        char a[64];
        snprintf(a, sizeof(a), "engine.dialect=%s", o->dialect);
        if (strlen(o->dialect) > 32 || st_profile_set(p, a, err, sizeof(err)) != 0) {
            fprintf(stderr, "servetune sim: --dialect expects vllm, sglang or llamacpp; got '%s'\n",
                    o->dialect);
            return ST_EXIT_USAGE;
        }
    }
    if (st_profile_validate(p, err, sizeof(err)) != 0) {
        fprintf(stderr, "servetune sim: %s\n", err);
        return ST_EXIT_USAGE;
    }
    return 0;
}

static int load_scenario(struct sim_opts *o)
{
    char err[512];
    struct st_buf text;
    st_buf_init(&text);
    int rc = read_file(o->scenario, ST_SIM_SCENARIO_MAX_BYTES, &text);
    if (rc != 0) {
        fprintf(stderr, "servetune sim: --scenario %s: %s\n", o->scenario,
                rc == ST_ETOOBIG ? "over 64 KiB" : st_strerror(rc));
        st_buf_release(&text);
        return ST_EXIT_USAGE;
    }
    rc = st_sim_scenario_parse(&o->faults, &o->spec, text.data ? text.data : "", text.len,
                               o->scenario, err, sizeof(err));
    st_buf_release(&text);
    if (rc != 0) {
        fprintf(stderr, "servetune sim: %s\n", err);
        return ST_EXIT_USAGE;
    }
    return 0;
}

/* Contexts at which --explain shows batch-1 decode speed, and prompt sizes for prefill time. */
static const uint64_t explain_ctx[] = {1024, 8192, 32768, 131072};
static const uint64_t explain_prefill[] = {8192, 32768, 131072};
#define N_CTX (sizeof(explain_ctx) / sizeof(explain_ctx[0]))
#define N_PREFILL (sizeof(explain_prefill) / sizeof(explain_prefill[0]))

/*
 * The model's figures for one request alone, P prompt tokens (none cached) and N output tokens:
 * its TTFT is the prefill, its decode rate (N - 1) over the time of tokens 2..N, token i decoded
 * at context P + i at the batch-1 rate (with speculation, its expected rate).
 */
static void request_figures(const struct st_cost *c, uint64_t prompt, uint64_t out, double *ttft_s,
                            double *decode_tps)
{
    double s = 0;
    for (uint64_t i = 1; i < out; i++) {
        s += 1.0 / st_cost_decode_tps(c, prompt + i);
    }
    *ttft_s = st_cost_prefill_s(c, 0, prompt);
    *decode_tps = (double)(out - 1) / s;
}

static void explain_json(const struct sim_opts *o, const struct st_profile *p,
                         const struct st_mem_plan *m, const struct st_cost *c)
{
    struct st_buf b;
    struct st_jw w;
    st_buf_init(&b);
    st_jw_init(&w, &b);
    st_jw_obj_open(&w);
    st_jw_kstr(&w, "profile", o->profile);
    st_jw_kstr(&w, "model", p->model.name);
    st_jw_kstr(&w, "dialect", st_sim_dialect_name(p->engine.dialect));
    st_jw_ku64(&w, "tp", p->engine.tp);
    st_jw_ku64(&w, "pp", p->engine.pp);
    st_jw_ku64(&w, "dp_attention", p->engine.dp_attention);
    st_jw_kf64(&w, "mem_fraction", p->engine.mem_fraction);
    st_jw_kf64(&w, "gpu_mem_bytes", p->hw.gpu_mem_bytes);
    st_jw_kf64(&w, "usable_bytes", m->usable_bytes);
    st_jw_kf64(&w, "weights_bytes_per_gpu", m->weights_bytes_per_gpu);
    st_jw_kf64(&w, "act_bytes", m->act_bytes);
    st_jw_kf64(&w, "graph_bytes", m->graph_bytes);
    st_jw_kf64(&w, "reserve_bytes", p->engine.reserve_bytes);
    st_jw_kf64(&w, "kv_budget_bytes", m->kv_budget_bytes);
    st_jw_kf64(&w, "kv_bytes_per_token_layer", m->kv_bytes_per_token_layer);
    st_jw_kf64(&w, "kv_bytes_per_token", m->kv_bytes_per_token);
    st_jw_kf64(&w, "draft_kv_bytes_per_token", m->draft_kv_bytes_per_token);
    st_jw_ku64(&w, "layers_per_gpu", m->layers_per_gpu);
    st_jw_ku64(&w, "page_size", p->engine.page_size);
    st_jw_ku64(&w, "kv_pool_tokens", m->kv_pool_tokens);
    st_jw_ku64(&w, "kv_pool_blocks", m->kv_pool_blocks);
    st_jw_ku64(&w, "context_length", p->engine.context_length);
    st_jw_kbool(&w, "fits", m->fits);
    st_jw_kstr(&w, "reason", m->reason);
    st_jw_key(&w, "decode_tps");
    st_jw_obj_open(&w);
    for (size_t i = 0; i < N_CTX; i++) {
        char k[24];
        snprintf(k, sizeof(k), "%llu", (unsigned long long)explain_ctx[i]);
        st_jw_kf64(&w, k, st_cost_decode_tps(c, explain_ctx[i]));
    }
    st_jw_obj_close(&w);
    st_jw_key(&w, "prefill_s");
    st_jw_obj_open(&w);
    for (size_t i = 0; i < N_PREFILL; i++) {
        char k[24];
        snprintf(k, sizeof(k), "%llu", (unsigned long long)explain_prefill[i]);
        st_jw_kf64(&w, k, st_cost_prefill_s(c, 0, explain_prefill[i]));
    }
    st_jw_obj_close(&w);
    if (o->req_prompt) {
        double ttft, dec;
        request_figures(c, o->req_prompt, o->req_output, &ttft, &dec);
        st_jw_key(&w, "request");
        st_jw_obj_open(&w);
        st_jw_ku64(&w, "prompt_tokens", o->req_prompt);
        st_jw_ku64(&w, "output_tokens", o->req_output);
        st_jw_kf64(&w, "ttft_s", ttft);
        st_jw_kf64(&w, "decode_tps", dec);
        st_jw_obj_close(&w);
    }
    st_jw_obj_close(&w);
    printf("%s\n", b.data);
    st_buf_release(&b);
}

static void explain_text(const struct sim_opts *o, const struct st_profile *p,
                         const struct st_mem_plan *m, const struct st_cost *c)
{
    const struct st_profile_engine *e = &p->engine;
    printf("profile      %s (model %s, dialect %s)\n", o->profile, p->model.name,
           st_sim_dialect_name(e->dialect));
    printf("parallel     tp %u, pp %u, dp_attention %u on %u GPUs of %.2f GiB\n", e->tp, e->pp,
           e->dp_attention, p->hw.gpus, p->hw.gpu_mem_bytes / GIB);
    printf("per GPU      usable %.2f GiB (mem_fraction %g)\n", m->usable_bytes / GIB,
           e->mem_fraction);
    printf("             weights %.2f GiB, activations %.2f GiB, graphs %.2f GiB, reserve %.2f "
           "GiB\n",
           m->weights_bytes_per_gpu / GIB, m->act_bytes / GIB, m->graph_bytes / GIB,
           e->reserve_bytes / GIB);
    printf("             KV budget %.2f GiB\n", m->kv_budget_bytes / GIB);
    printf("KV           %.0f bytes a token per GPU (%.0f a layer, %u layers here, %.0f for "
           "drafts)\n",
           m->kv_bytes_per_token, m->kv_bytes_per_token_layer, m->layers_per_gpu,
           m->draft_kv_bytes_per_token);
    printf("pool         %llu tokens, %llu blocks of %u (context %llu)\n",
           (unsigned long long)m->kv_pool_tokens, (unsigned long long)m->kv_pool_blocks,
           e->page_size, (unsigned long long)e->context_length);
    printf("fits         %s%s%s\n", m->fits ? "yes" : "no", m->reason[0] ? ": " : "", m->reason);
    printf("decode       batch 1:");
    for (size_t i = 0; i < N_CTX; i++) {
        printf("%s %.1f tok/s at %lluK", i ? "," : "", st_cost_decode_tps(c, explain_ctx[i]),
               (unsigned long long)explain_ctx[i] / 1024);
    }
    printf("\nprefill      alone, uncached:");
    for (size_t i = 0; i < N_PREFILL; i++) {
        printf("%s %.2f s for %lluK", i ? "," : "", st_cost_prefill_s(c, 0, explain_prefill[i]),
               (unsigned long long)explain_prefill[i] / 1024);
    }
    printf("\n");
    if (o->req_prompt) {
        double ttft, dec;
        request_figures(c, o->req_prompt, o->req_output, &ttft, &dec);
        printf("request      alone, %llu in, %llu out: TTFT %.6f s, decode %.4f tok/s\n",
               (unsigned long long)o->req_prompt, (unsigned long long)o->req_output, ttft, dec);
    }
}

/* ---- running ---- */

static void on_log(void *arg, const char *text)
{
    (void)arg;
    fputs(text, stderr);
    fflush(stderr);
}

/* A crash fault: the fatal line, then an abrupt exit (no trace flush, no cleanup). */
static void on_crash(void *arg, const char *text)
{
    (void)arg;
    fputs(text, stderr);
    fflush(stderr);
    _exit(ST_EXIT_FAIL);
}

static void raise_nofile(void)
{
    /* One fd per connection: allow as many as the hard limit (tests hold 10,000 streams). */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* Serves until a signal. engine may be NULL (fixed timing). Returns the exit code. */
static int serve(const struct sim_opts *o, const struct sockaddr_storage *sa, socklen_t salen,
                 const struct st_sim_model_cfg *engine, const char *model)
{
    struct st_sim_trace *trace = NULL;
    if (o->trace) {
        int rc = st_sim_trace_open(o->trace, &trace);
        if (rc != 0) {
            fprintf(stderr, "servetune sim: --trace %s: %s\n", o->trace, st_strerror(rc));
            return ST_EXIT_IO;
        }
    }
    /* A peer that closes mid-stream must give EPIPE on write, not kill the process. */
    signal(SIGPIPE, SIG_IGN);
    raise_nofile();

    struct st_sim_server_cfg cfg = {
        .addr = (const struct sockaddr *)sa,
        .addrlen = salen,
        .spec = o->spec,
        .model = model,
        .trace = trace,
        .engine = engine,
    };
    struct st_sim_server *srv = NULL;
    char err[256] = "";
    int rc = st_sim_server_new(&cfg, &srv, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "servetune sim: cannot listen on %s: %s\n", o->listen, err);
        int trc = st_sim_trace_close(trace); /* nothing was traced; the listen error wins */
        (void)trc;
        return ST_EXIT_FAIL;
    }
    char addr[96];
    st_sim_server_addr(srv, addr, sizeof(addr));
    printf("listening on %s\n", addr);
    fflush(stdout);
    if (engine) {
        struct st_buf b;
        st_buf_init(&b);
        st_sim_dialect_listening(&b, engine->p, addr);
        if (b.len) {
            on_log(NULL, b.data);
        }
        st_buf_release(&b);
    }

    rc = st_sim_server_run(srv);
    st_sim_server_free(srv);
    int code = ST_EXIT_OK;
    if (rc != ST_EINTERRUPTED) {
        fprintf(stderr, "servetune sim: event loop failed: %s\n", st_strerror(rc));
        code = ST_EXIT_FAIL;
    }
    int trc = st_sim_trace_close(trace);
    if (trc != 0) {
        fprintf(stderr, "servetune sim: --trace %s: %s\n", o->trace, st_strerror(trc));
        code = ST_EXIT_IO;
    }
    return code;
}

/* Model mode: plan, explain or start up like the engine, then serve. */
static int run_model(struct sim_opts *o, const struct sockaddr_storage *sa, socklen_t salen)
{
    static struct st_profile p; /* large; one per process */
    int code = load_profile(o, &p);
    if (code != 0) {
        return code;
    }
    if (o->scenario) {
        code = load_scenario(o);
        if (code != 0) {
            return code;
        }
    }
    struct st_mem_plan m;
    st_mem_plan_compute(&p, &m);
    if (o->explain) {
        /* --explain always exits 0: it reports, fits or not. */
        struct st_cost c;
        st_cost_init(&c, &p);
        if (o->json) {
            explain_json(o, &p, &m, &c);
        } else {
            explain_text(o, &p, &m, &c);
        }
        return ST_EXIT_OK;
    }
    struct st_buf b;
    st_buf_init(&b);
    if (!m.fits || o->faults.startup_oom) {
        st_sim_dialect_oom(&b, &p, m.fits ? NULL : &m);
        fputs(b.data, stderr);
        st_buf_release(&b);
        return ST_EXIT_FAIL;
    }
    st_sim_dialect_startup(&b, &p, &m);
    if (p.engine.dialect == ST_DIALECT_VLLM && o->dev_mode) {
        st_buf_puts(&b, "WARNING [api_server.py] SECURITY WARNING: Development endpoints are "
                        "enabled! This should NOT be used in production!\n");
    }
    fputs(b.data, stderr);
    fflush(stderr);
    st_buf_release(&b);
    struct st_sim_model_cfg engine = {
        .p = &p,
        .speed = o->speed,
        .seed = o->seed_given ? o->seed : p.seed,
        .dev_mode = o->dev_mode,
        .slot_save_path = o->slot_save_path,
        .faults = o->faults,
        .log_cb = on_log,
        .crash_cb = on_crash,
    };
    return serve(o, sa, salen, &engine, o->model ? o->model : p.model.name);
}

int st_cli_sim(int argc, char **argv)
{
    struct sim_opts o = {.listen = DEFAULT_LISTEN, .speed = 1.0};
    st_sim_spec_init(&o.spec);
    st_sim_faults_init(&o.faults);
    int code = parse_args(argc, argv, &o);
    if (code >= 0) {
        return code;
    }

    struct sockaddr_storage sa;
    socklen_t salen;
    int loopback;
    if (st_sim_listen_parse(o.listen, &sa, &salen, &loopback) != 0) {
        fprintf(stderr,
                "servetune sim: --listen expects HOST:PORT with an IPv4 address, localhost or "
                "[IPv6], and a port in 0..65535; got '%s'\n",
                o.listen);
        return ST_EXIT_USAGE;
    }
    if (!loopback && !o.allow_remote) {
        fprintf(stderr,
                "servetune sim: refusing to listen on non-loopback address '%s' "
                "(pass --allow-remote to allow it)\n",
                o.listen);
        return ST_EXIT_USAGE;
    }
    if (o.profile) {
        return run_model(&o, &sa, salen);
    }
    return serve(&o, &sa, salen, NULL, o.model ? o.model : DEFAULT_MODEL);
}
