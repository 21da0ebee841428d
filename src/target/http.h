/*
 * The target module's one blocking HTTP request, internal to src/target (server.c): the target's
 * reused libcurl easy handle, its timeouts and TLS choice, the API key in an Authorization header
 * built per request and wiped after it, the answer's body capped, and its Server and
 * X-Sim-Time-Scale headers kept. Messages name the method and URL, never the key.
 */
#ifndef ST_TARGET_HTTP_H
#define ST_TARGET_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/status.h"
#include "target/server.h"

/* Bytes of an answer quoted in a message. */
#define ST_TARGET_HTTP_SNIPPET 160u

struct st_target_http_resp {
    long status;        /* the HTTP status, 0 before an answer */
    struct st_buf body; /* owned */
    size_t max_body;    /* a longer body ends the request with ST_ETOOBIG */
    int too_big;
    int has_scale;   /* the answer carried X-Sim-Time-Scale */
    char scale[32];  /* its value */
    char server[64]; /* the Server header, "" if none */
};

void st_target_http_resp_init(struct st_target_http_resp *r, size_t max_body);
void st_target_http_resp_release(struct st_target_http_resp *r);

/*
 * method ("GET" or "POST") path (from '/', with any query) on t's base URL; body is sent with
 * POST (NULL: empty) as application/json. r's body is appended to (clear it first to reuse r).
 * Returns 0 when an answer came, whatever its status; ST_ETIMEOUT; ST_ETOOBIG; -ECONNREFUSED,
 * -ECONNRESET, -EHOSTUNREACH, -ENOMEM or -EIO, with a message in err (may be NULL).
 */
int st_target_http(struct st_target *t, const char *method, const char *path, const char *body,
                   size_t body_len, uint64_t timeout_ms, struct st_target_http_resp *r, char *err,
                   size_t errlen) ST_WUR;

/* Frees t's easy handle (st_target_release calls it). */
void st_target_http_close(struct st_target *t);

/* Up to ST_TARGET_HTTP_SNIPPET bytes of s[0..n) as printable ASCII into out[cap]. */
void st_target_http_snippet(char *out, size_t cap, const char *s, size_t n);
/* "HTTP 404 {"detail":"Not Found"}": the status and the start of the body. */
void st_target_http_status(const struct st_target_http_resp *r, char *out, size_t cap);

#endif
