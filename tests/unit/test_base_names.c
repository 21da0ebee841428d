/*
 * Tests for src/base/names.h: a value in the table gives its name; a value past the table, a
 * negative one, or a hole the table leaves out gives the fallback.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "base/names.h"

enum colour { RED = 1, GREEN = 2, BLUE = 4 };

static const char *const colour_names[] = {[RED] = "red", [GREEN] = "green", [BLUE] = "blue"};

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(ST_NAME_OF(colour_names, RED, "?"), "red");
    assert_string_equal(ST_NAME_OF(colour_names, GREEN, "?"), "green");
    assert_string_equal(ST_NAME_OF(colour_names, BLUE, "?"), "blue");
    assert_string_equal(ST_NAME_OF(colour_names, 0, "?"), "?");       /* below the first */
    assert_string_equal(ST_NAME_OF(colour_names, 3, "none"), "none"); /* a hole */
    assert_string_equal(ST_NAME_OF(colour_names, 5, "?"), "?");       /* past the end */
    assert_string_equal(ST_NAME_OF(colour_names, -1, "?"), "?");
    assert_string_equal(ST_NAME_OF(colour_names, 1L << 40, "?"), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_names)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
