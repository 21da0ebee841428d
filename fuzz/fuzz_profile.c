/*
 * libFuzzer target: simulator profiles (src/sim/model/profile.c) from arbitrary YAML bytes, then
 * validation and the memory plan of whatever parsed. Never a crash, a leak or undefined behaviour.
 */
#include <stddef.h>
#include <stdint.h>

#include "sim/model/memory.h"
#include "sim/model/profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct st_profile p;
    char err[512];
    st_profile_defaults(&p);
    if (st_profile_parse(&p, (const char *)data, size, "fuzz.yaml", err, sizeof(err)) != 0) {
        return 0;
    }
    if (st_profile_validate(&p, err, sizeof(err)) == 0) {
        struct st_mem_plan m;
        st_mem_plan_compute(&p, &m);
    }
    return 0;
}
