/*
 * libFuzzer target for the pure parsers of src/target/watch.c: nvidia-smi's CSV (index,
 * memory.used, memory.total, utilization.gpu, temperature.gpu; noheader, nounits) and
 * /proc/vmstat's oom_kill. The input, copied into a heap block of its exact size, is fed to both.
 * A CSV parse either fails (-1) or gives GPUs in range, the same ones whatever the cap (the cap
 * only cuts the list); a vmstat parse that succeeds saw an "oom_kill " line.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "target/watch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int same(const struct st_watch_gpu *a, const struct st_watch_gpu *b)
{
    return a->index == b->index && a->mem_used_bytes == b->mem_used_bytes &&
           a->mem_total_bytes == b->mem_total_bytes &&
           memcmp(&a->util_pct, &b->util_pct, sizeof(double)) == 0 &&
           memcmp(&a->temp_c, &b->temp_c, sizeof(double)) == 0;
}

static void check_gpus(const struct st_watch_gpu *g, const struct st_watch_gpu *few, int n, int m)
{
    for (int i = 0; i < n; i++) {
        if (g[i].index > 65535 || !isfinite(g[i].util_pct) || !isfinite(g[i].temp_c) ||
            (i < m && !same(&g[i], &few[i]))) {
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size ? size : 1);
    if (!copy) {
        abort();
    }
    memcpy(copy, data, size);
    struct st_watch_gpu all[ST_WATCH_MAX_GPUS], few[2];
    int n = st_watch_parse_nvsmi(copy, size, all, ST_WATCH_MAX_GPUS);
    int m = st_watch_parse_nvsmi(copy, size, few, 2);
    int z = st_watch_parse_nvsmi(copy, size, NULL, 0);
    if (n < -1 || n > ST_WATCH_MAX_GPUS || (n < 0) != (m < 0) || (n < 0) != (z < 0)) {
        abort();
    }
    if (n >= 0) {
        if (z != 0 || m != (n < 2 ? n : 2)) {
            abort();
        }
        check_gpus(all, few, n, m);
    }
    uint64_t v = 0;
    int rc = st_watch_parse_vmstat(copy, size, &v);
    if (rc != 0 && rc != -1) {
        abort();
    }
    if (rc == 0 && (size < 10 || (memcmp(copy, "oom_kill ", 9) != 0 &&
                                  memmem(copy, size, "\noom_kill ", 10) == NULL))) {
        abort();
    }
    free(copy);
    return 0;
}
