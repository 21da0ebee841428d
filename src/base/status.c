/*
 * st_strerror: names of project status codes; errno values go through strerror_r.
 * The result for errno values comes from a thread-local buffer, valid until the next call on the
 * same thread.
 */
#include "base/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *st_strerror(int rc)
{
    static _Thread_local char tbuf[96];

    switch (rc) {
    case ST_OK:
        return "success";
    case ST_EPARSE:
        return "malformed input";
    case ST_ETOOBIG:
        return "input exceeds its size limit";
    case ST_EUTF8:
        return "invalid UTF-8";
    case ST_EPROTO:
        return "protocol violation";
    case ST_ETIMEOUT:
        return "timed out";
    case ST_EUSAGE:
        return "bad usage";
    case ST_ENOTFOUND:
        return "not found";
    case ST_ESERVER:
        return "server error";
    case ST_EINTERRUPTED:
        return "interrupted";
    default:
        break;
    }
    if (rc < 0 && rc > -4096) {
        /* GNU strerror_r returns the message pointer, which may or may not be tbuf. */
        const char *m = strerror_r(-rc, tbuf, sizeof(tbuf));
        return m;
    }
    snprintf(tbuf, sizeof(tbuf), "unknown status %d", rc);
    return tbuf;
}

void st_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}
