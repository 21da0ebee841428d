/*
 * Status codes shared by every module. A fallible function returns 0 or a negative code:
 * a negated errno value, or one of the project codes below (all beyond errno's range).
 * st_strerror() names any of them. Nothing here allocates or prints.
 */
#ifndef ST_BASE_STATUS_H
#define ST_BASE_STATUS_H

#include <stddef.h>

#include <errno.h>

#define ST_WUR __attribute__((warn_unused_result))

enum st_status {
    ST_OK = 0,
    /* Project codes start well past the largest errno value. */
    ST_EPARSE = -10000,       /* malformed input (JSON, SSE, HTTP, CLI value) */
    ST_ETOOBIG = -10001,      /* input over a documented maximum */
    ST_EUTF8 = -10002,        /* invalid UTF-8 where text was expected */
    ST_EPROTO = -10003,       /* the peer broke the protocol (non-SSE body, bad framing) */
    ST_ETIMEOUT = -10004,     /* a deadline passed */
    ST_EUSAGE = -10005,       /* bad command-line usage */
    ST_ENOTFOUND = -10006,    /* a looked-up key or file does not exist */
    ST_ESERVER = -10007,      /* the server answered with an error */
    ST_EINTERRUPTED = -10008, /* stopped by a signal */
};

/* Returns a static string naming rc (0, a negated errno or an ST_E* code). Never NULL. */
const char *st_strerror(int rc);

/* Formats a message into err[0..errlen) (snprintf); does nothing when err is NULL or errlen 0. */
void st_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
