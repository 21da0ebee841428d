/*
 * The target module's one blocking HTTP request, internal to src/target (server.c): a path on
 * the target's base URL, sent with st_http_do (engine/http.h) on the target's reused handle with
 * its timeouts, TLS choice and API key. Messages name the method and URL, never the key.
 */
#ifndef ST_TARGET_HTTP_H
#define ST_TARGET_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "engine/http.h"
#include "target/server.h"

/*
 * method ("GET" or "POST") path (from '/', with any query) on t's base URL; body is sent with
 * POST (NULL: empty) as application/json. r's body is appended to (clear it first to reuse r).
 * Returns 0 when an answer came, whatever its status; ST_ETIMEOUT; ST_ETOOBIG; -ECONNREFUSED,
 * -ECONNRESET, -EHOSTUNREACH, -ENOMEM or -EIO, with a message in err (may be NULL).
 */
int st_target_http(struct st_target *t, const char *method, const char *path, const char *body,
                   size_t body_len, uint64_t timeout_ms, struct st_http_resp *r, char *err,
                   size_t errlen) ST_WUR;

/* Frees t's handle (st_target_release calls it). */
void st_target_http_close(struct st_target *t);

#endif
