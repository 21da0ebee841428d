/*
 * The C drivers' check: CHECK(cond, fmt, ...) counts a check in `checks` and, when cond is false,
 * a failure in `failures` with FILE:LINE, the condition and the message on stderr; it never
 * stops the driver. The including file defines `int checks, failures` (static or not).
 */
#ifndef ST_TESTS_SUPPORT_CHECK_H
#define ST_TESTS_SUPPORT_CHECK_H

#include <stdio.h>

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        checks++;                                                                                  \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

#endif
