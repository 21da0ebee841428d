/*
 * servetune sim: runs the embedded simulator, an OpenAI-compatible test server with a known
 * timeline (docs/sim.md). This file owns the options, the messages and the exit codes; the
 * server itself is src/sim/. The first line on stdout is "listening on HOST:PORT".
 */
#include <sys/resource.h>

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "sim/server.h"
#include "sim/spec.h"
#include "sim/trace.h"

#define DEFAULT_LISTEN "127.0.0.1:8000"
#define DEFAULT_MODEL "sim"

static void usage(FILE *f)
{
    fputs("usage: servetune sim [options]\n"
          "\n"
          "Runs an OpenAI-compatible test server whose every response follows a known timeline.\n"
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
          "  --model NAME             model name reported (default sim)\n"
          "  --fault SPEC             key=value,... applied to every request (X-Sim syntax)\n"
          "  --trace FILE             write one JSONL line per event written\n"
          "  -h, --help               show this help\n"
          "\n"
          "Per request, the header X-Sim: key=value,... overrides any of these; see docs/sim.md.\n",
          f);
}

enum {
    OPT_LISTEN = 256,
    OPT_ALLOW_REMOTE,
    OPT_TTFT,
    OPT_ITL,
    OPT_TPC,
    OPT_USAGE,
    OPT_DONE,
    OPT_ROLE,
    OPT_MODEL,
    OPT_FAULT,
    OPT_TRACE,
};

/* Flags that set one spec key: option id, flag name, spec key. */
static const struct {
    int opt;
    const char *flag;
    const char *key;
} key_flags[] = {
    {OPT_TTFT, "--ttft-ms", "ttft_ms"},
    {OPT_ITL, "--itl-ms", "itl_ms"},
    {OPT_TPC, "--tokens-per-chunk", "tokens_per_chunk"},
    {OPT_USAGE, "--usage", "usage"},
    {OPT_DONE, "--done", "done"},
    {OPT_ROLE, "--role-chunk", "role_chunk"},
};

/* Applies a flag that maps to a spec key. Returns 0, or prints and returns ST_EXIT_USAGE. */
static int set_key_flag(struct st_sim_spec *spec, int opt, const char *val)
{
    for (size_t i = 0; i < sizeof(key_flags) / sizeof(key_flags[0]); i++) {
        if (key_flags[i].opt != opt) {
            continue;
        }
        const char *key = key_flags[i].key;
        if (st_sim_spec_set(spec, key, strlen(key), val, strlen(val), NULL, 0) != 0) {
            fprintf(stderr, "servetune sim: %s expects %s; got '%s'\n", key_flags[i].flag,
                    st_sim_spec_expect(key), val);
            return ST_EXIT_USAGE;
        }
        return 0;
    }
    return ST_EXIT_USAGE; /* not reached: every key flag is in the table */
}

struct sim_opts {
    const char *listen;
    const char *model;
    const char *trace;
    int allow_remote;
    struct st_sim_spec spec;
};

/* Parses argv into o. Returns -1 to go on, or an exit code (help, bad usage). */
static int parse_args(int argc, char **argv, struct sim_opts *o)
{
    static const struct option longopts[] = {
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"allow-remote", no_argument, NULL, OPT_ALLOW_REMOTE},
        {"ttft-ms", required_argument, NULL, OPT_TTFT},
        {"itl-ms", required_argument, NULL, OPT_ITL},
        {"tokens-per-chunk", required_argument, NULL, OPT_TPC},
        {"usage", required_argument, NULL, OPT_USAGE},
        {"done", required_argument, NULL, OPT_DONE},
        {"role-chunk", required_argument, NULL, OPT_ROLE},
        {"model", required_argument, NULL, OPT_MODEL},
        {"fault", required_argument, NULL, OPT_FAULT},
        {"trace", required_argument, NULL, OPT_TRACE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    char err[256];
    int c;
    optind = 0; /* glibc: start over, so the function can run more than once per process */
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            usage(stdout);
            return ST_EXIT_OK;
        case OPT_LISTEN:
            o->listen = optarg;
            break;
        case OPT_ALLOW_REMOTE:
            o->allow_remote = 1;
            break;
        case OPT_MODEL:
            if (optarg[0] == '\0' || strlen(optarg) > ST_SIM_MAX_MODEL_BYTES) {
                fprintf(stderr, "servetune sim: --model expects a name of 1 to %u bytes\n",
                        ST_SIM_MAX_MODEL_BYTES);
                return ST_EXIT_USAGE;
            }
            o->model = optarg;
            break;
        case OPT_FAULT:
            if (st_sim_spec_apply(&o->spec, optarg, strlen(optarg), err, sizeof(err)) != 0) {
                fprintf(stderr, "servetune sim: --fault: %s\n", err);
                return ST_EXIT_USAGE;
            }
            break;
        case OPT_TRACE:
            o->trace = optarg;
            break;
        case OPT_TTFT:
        case OPT_ITL:
        case OPT_TPC:
        case OPT_USAGE:
        case OPT_DONE:
        case OPT_ROLE:
            if (set_key_flag(&o->spec, c, optarg) != 0) {
                return ST_EXIT_USAGE;
            }
            break;
        default:
            usage(stderr);
            return ST_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "servetune sim: unexpected argument '%s'\n", argv[optind]);
        return ST_EXIT_USAGE;
    }
    return -1;
}

int st_cli_sim(int argc, char **argv)
{
    struct sim_opts o = {.listen = DEFAULT_LISTEN, .model = DEFAULT_MODEL};
    st_sim_spec_init(&o.spec);
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

    struct st_sim_trace *trace = NULL;
    if (o.trace) {
        int rc = st_sim_trace_open(o.trace, &trace);
        if (rc != 0) {
            fprintf(stderr, "servetune sim: --trace %s: %s\n", o.trace, st_strerror(rc));
            return ST_EXIT_IO;
        }
    }

    /* A peer that closes mid-stream must give EPIPE on write, not kill the process. */
    signal(SIGPIPE, SIG_IGN);
    /* One fd per connection: allow as many as the hard limit (tests hold 10,000 streams). */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }

    struct st_sim_server_cfg cfg = {
        .addr = (const struct sockaddr *)&sa,
        .addrlen = salen,
        .spec = o.spec,
        .model = o.model,
        .trace = trace,
    };
    struct st_sim_server *srv = NULL;
    char err[256] = "";
    int rc = st_sim_server_new(&cfg, &srv, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "servetune sim: cannot listen on %s: %s\n", o.listen, err);
        int trc = st_sim_trace_close(trace); /* nothing was traced; the listen error wins */
        (void)trc;
        return ST_EXIT_FAIL;
    }
    char addr[96];
    st_sim_server_addr(srv, addr, sizeof(addr));
    printf("listening on %s\n", addr);
    fflush(stdout);

    rc = st_sim_server_run(srv);
    st_sim_server_free(srv);
    code = ST_EXIT_OK;
    if (rc != ST_EINTERRUPTED) {
        fprintf(stderr, "servetune sim: event loop failed: %s\n", st_strerror(rc));
        code = ST_EXIT_FAIL;
    }
    int trc = st_sim_trace_close(trace);
    if (trc != 0) {
        fprintf(stderr, "servetune sim: --trace %s: %s\n", o.trace, st_strerror(trc));
        code = ST_EXIT_IO;
    }
    return code;
}
