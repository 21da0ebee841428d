/*
 * libFuzzer target: qualification suite files (src/qual/suite.c) from arbitrary bytes. Any input
 * must give a suite or a message, never a crash, a leak or undefined behaviour.
 */
#include <stddef.h>
#include <stdint.h>

#include "qual/suite.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct st_suite s;
    char err[512];
    if (st_suite_parse("fuzz.yaml", (const char *)data, size, &s, err, sizeof(err)) == 0) {
        st_suite_release(&s);
    }
    return 0;
}
