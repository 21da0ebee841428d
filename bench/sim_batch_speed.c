/*
 * Speed of the engine model (src/sim/model/batch.c) alone: steps it directly, with no server
 * around it, keeping `running` requests in flight (a finished one is replaced at once), and
 * prints virtual output tokens per wall-clock second. Not a test; the target is >= 1,000,000
 * tokens/s with 64 running requests, so that the model is never what limits the simulator.
 *
 * Usage: sim_batch_speed [running (64)] [spec_steps (0)] [seconds (2)]
 * Workload: the built-in profile, prompts of 1,000 tokens sharing a 512-token prefix (so prefix
 * matching and publishing run), 1,024 output tokens each.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/clock.h"
#include "base/hash.h"
#include "sim/model/batch.h"
#include "sim/model/memory.h"
#include "sim/model/profile.h"

#define PROMPT_TOKENS 1000
#define SHARED_BLOCKS 32
#define OUTPUT_TOKENS 1024

static int arg_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        return -1;
    }
    *out = v;
    return 0;
}

static int submit(struct st_batch *b, uint64_t id, uint32_t page, uint64_t now)
{
    uint64_t h[PROMPT_TOKENS];
    uint32_t n = PROMPT_TOKENS / page;
    uint64_t prev = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t content[3] = {prev, i < SHARED_BLOCKS ? 0 : id, i};
        h[i] = st_hash64(content, sizeof content) | 1;
        prev = h[i];
    }
    char err[512];
    int rc = st_batch_submit(b, id, PROMPT_TOKENS, h, n, OUTPUT_TOKENS, now, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "sim_batch_speed: submit: %s\n", err);
    }
    return rc;
}

int main(int argc, char **argv)
{
    uint64_t running = 64;
    uint64_t spec = 0;
    uint64_t seconds = 2;
    if ((argc > 1 && arg_u64(argv[1], 1, 65536, &running) != 0) ||
        (argc > 2 && arg_u64(argv[2], 0, ST_SPEC_MAX_STEPS, &spec) != 0) ||
        (argc > 3 && arg_u64(argv[3], 1, 3600, &seconds) != 0) || argc > 4) {
        fprintf(stderr,
                "usage: sim_batch_speed [running 1..65536] [spec_steps 0..%d] "
                "[seconds 1..3600]\n",
                ST_SPEC_MAX_STEPS);
        return 2;
    }
    struct st_profile p;
    st_profile_defaults(&p);
    p.engine.max_running = (uint32_t)running;
    if (spec > 0) {
        p.engine.spec_method = ST_SPEC_MTP;
        p.model.mtp_layers = 1;
        p.engine.spec_steps = (uint32_t)spec;
        p.engine.n_spec_accept = (uint32_t)spec;
        for (uint64_t i = 0; i < spec; i++) {
            p.engine.spec_accept[i] = 0.8;
        }
    }
    struct st_batch *b = st_batch_new(&p, 1);
    if (!b) {
        struct st_mem_plan m;
        st_mem_plan_compute(&p, &m);
        fprintf(stderr, "sim_batch_speed: the profile does not fit: %s\n", m.reason);
        return 1;
    }
    uint64_t now = 0;
    uint64_t next_id = 0;
    for (; next_id < running; next_id++) {
        if (submit(b, next_id, p.engine.page_size, now) != 0) {
            return 1;
        }
    }
    uint64_t steps = 0;
    uint64_t t0 = st_clock_mono_ns();
    uint64_t deadline = t0 + seconds * ST_NS_PER_S;
    uint64_t t1 = t0;
    while (t1 < deadline) {
        /* Check the clock every 1,024 steps: reading it must not be what is measured. */
        for (int i = 0; i < 1024; i++) {
            struct st_batch_result res;
            st_batch_step(b, now, &res);
            now += res.duration_ns;
            steps++;
            for (uint32_t e = 0; e < res.n_events; e++) {
                if (res.events[e].finished && submit(b, next_id++, p.engine.page_size, now) != 0) {
                    return 1;
                }
            }
        }
        t1 = st_clock_mono_ns();
    }
    struct st_batch_stats s;
    st_batch_get_stats(b, &s);
    double wall_s = (double)(t1 - t0) / 1e9;
    printf("sim_batch_speed: %" PRIu64 " running, spec_steps %" PRIu64 ": %" PRIu64
           " steps, %" PRIu64 " output tokens (%" PRIu64 " finished, %" PRIu64
           " preempted) in %.3f s wall, %.3f s virtual\n",
           running, spec, steps, s.generation_tokens, s.finished, s.preemptions, wall_s,
           (double)now / 1e9);
    printf("%.0f virtual output tokens per wall second (%.0f steps/s)\n",
           (double)s.generation_tokens / wall_s, (double)steps / wall_s);
    st_batch_free(b);
    return 0;
}
