/*
 * The unit tests' fixture reader (fixture.h), shared by the report tests. Calls cmocka's
 * fail_msg, so it links only into cmocka test binaries.
 */
#include "fixture.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

void st_test_fixture(const char *name, struct st_buf *b)
{
    char rel[1024];
    snprintf(rel, sizeof(rel), "campaign/%s", name);
    st_test_data(rel, b);
}

void st_test_data(const char *rel, struct st_buf *b)
{
    const char *dir = getenv("ST_TEST_DATA");
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir ? dir : "tests/data", rel);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fail_msg("cannot open %s", path);
    }
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        st_buf_append(b, chunk, n);
    }
    fclose(f);
}
