/*
 * libFuzzer target: campaign plans (src/campaign/plan.c and the plan*.c files it calls) from
 * arbitrary YAML bytes, and the canonical form of whatever parses. Never a crash, a leak or
 * undefined behaviour.
 */
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "campaign/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct st_plan p;
    char err[512];
    if (st_plan_parse("fuzz.yaml", (const char *)data, size, &p, err, sizeof(err)) == 0) {
        struct st_buf b;
        st_buf_init(&b);
        st_plan_canonical(&p, &b);
        st_buf_release(&b);
        st_plan_release(&p);
    }
    return 0;
}
