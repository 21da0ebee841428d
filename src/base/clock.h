/*
 * Time sources. All times in the project are uint64_t nanoseconds of CLOCK_MONOTONIC unless a
 * name says _unix_ns. Pure layers never call these: they take times as arguments. A fake clock
 * (struct st_clock with a caller-set value) lets tests drive time by hand.
 */
#ifndef ST_BASE_CLOCK_H
#define ST_BASE_CLOCK_H

#include <stdint.h>

#define ST_NS_PER_US 1000ull
#define ST_NS_PER_MS 1000000ull
#define ST_NS_PER_S 1000000000ull

/* CLOCK_MONOTONIC now, in ns. Thread-safe. */
uint64_t st_clock_mono_ns(void);
/* CLOCK_REALTIME now, in ns since the Unix epoch. */
uint64_t st_clock_unix_ns(void);
/* CPU time used by the calling thread, in ns (CLOCK_THREAD_CPUTIME_ID). */
uint64_t st_clock_thread_cpu_ns(void);
/* CPU time used by the whole process, in ns (CLOCK_PROCESS_CPUTIME_ID). */
uint64_t st_clock_process_cpu_ns(void);

/* A clock that is either real (fake == 0) or set by hand (fake != 0). */
struct st_clock {
    int fake;
    uint64_t fake_ns;
};

uint64_t st_clock_now_ns(const struct st_clock *c);

#endif
