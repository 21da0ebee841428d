/*
 * Clock readers. See clock.h.
 */
#include "base/clock.h"

#include <time.h>

static uint64_t read_clock(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * ST_NS_PER_S + (uint64_t)ts.tv_nsec;
}

uint64_t st_clock_mono_ns(void)
{
    return read_clock(CLOCK_MONOTONIC);
}

uint64_t st_clock_unix_ns(void)
{
    return read_clock(CLOCK_REALTIME);
}

uint64_t st_clock_thread_cpu_ns(void)
{
    return read_clock(CLOCK_THREAD_CPUTIME_ID);
}

uint64_t st_clock_process_cpu_ns(void)
{
    return read_clock(CLOCK_PROCESS_CPUTIME_ID);
}

uint64_t st_clock_now_ns(const struct st_clock *c)
{
    if (c && c->fake) {
        return c->fake_ns;
    }
    return st_clock_mono_ns();
}
