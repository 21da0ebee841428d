/*
 * One blocking request on the target's handle (see http.h).
 */
#include "target/http.h"

#include <string.h>

int st_target_http(struct st_target *t, const char *method, const char *path, const char *body,
                   size_t body_len, uint64_t timeout_ms, struct st_http_resp *r, char *err,
                   size_t errlen)
{
    struct st_buf url;
    st_buf_init(&url);
    st_buf_printf(&url, "%s%s", t->base_url, path);
    struct st_http_req q = {.method = method,
                            .url = url.data,
                            .body = body,
                            .body_len = body_len,
                            .api_key = t->api_key,
                            .timeout_ms = timeout_ms,
                            .connect_timeout_ms = t->connect_timeout_ms,
                            .insecure = t->insecure};
    int rc = st_http_do(&t->http, &q, r);
    if (rc == ST_ETOOBIG) {
        st_errf(err, errlen, "%s %s: the answer is over %zu bytes", method, url.data, r->max_body);
    } else if (rc == -ENOMEM && !t->http) {
        st_errf(err, errlen, "%s", r->error);
    } else if (rc != 0) {
        st_errf(err, errlen, "%s %s: %s", method, url.data, r->error);
    }
    st_buf_release(&url);
    return rc;
}

void st_target_http_close(struct st_target *t)
{
    st_http_client_free(t->http);
    t->http = NULL;
}
