/*
 * The unit tests' fixture reader: tests/data/campaign/NAME (under $ST_TEST_DATA when set, as
 * the suite sets it; else tests/data from the working directory) appended to a buffer. A file
 * that cannot be opened fails the calling cmocka test.
 */
#ifndef ST_TESTS_SUPPORT_FIXTURE_H
#define ST_TESTS_SUPPORT_FIXTURE_H

#include "base/buf.h"

/* Appends the bytes of tests/data/campaign/NAME to b (caller-owned). */
void st_test_fixture(const char *name, struct st_buf *b);
/* Appends the bytes of tests/data/REL to b ("wire/llamacpp-b4748/props.txt"). */
void st_test_data(const char *rel, struct st_buf *b);

#endif
