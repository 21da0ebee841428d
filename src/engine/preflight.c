/*
 * URL checks and the /v1/models preflight. See preflight.h.
 */
#include "engine/preflight.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/json.h"
#include "engine/http.h"

#define MODELS_MAX (4u << 20)

int st_url_base(const char *url, struct st_buf *out, char *err, size_t errlen)
{
    int rc = ST_EUSAGE;
    char *scheme = NULL, *host = NULL, *path = NULL, *query = NULL, *frag = NULL, *full = NULL;
    st_engine_init();
    CURLU *u = curl_url();
    if (!u) {
        snprintf(err, errlen, "out of memory parsing the URL");
        return -ENOMEM;
    }
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK) {
        snprintf(err, errlen,
                 "'%s' is not a valid URL; expected http://HOST:PORT or https://HOST:PORT", url);
        goto out;
    }
    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
    curl_url_get(u, CURLUPART_HOST, &host, 0);
    curl_url_get(u, CURLUPART_PATH, &path, 0);
    curl_url_get(u, CURLUPART_QUERY, &query, 0);
    curl_url_get(u, CURLUPART_FRAGMENT, &frag, 0);
    if (!scheme || (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0)) {
        snprintf(err, errlen, "'%s': scheme must be http or https", url);
        goto out;
    }
    if (!host || !host[0]) {
        snprintf(err, errlen, "'%s' has no host", url);
        goto out;
    }
    if (query || frag) {
        snprintf(err, errlen, "'%s': a base URL takes no query or fragment", url);
        goto out;
    }
    if (path) {
        size_t n = strlen(path);
        while (n > 0 && path[n - 1] == '/') {
            path[--n] = '\0';
        }
        if (n >= 3 && strcmp(path + n - 3, "/v1") == 0) {
            path[n - 3] = '\0';
        }
        curl_url_set(u, CURLUPART_PATH, path[0] ? path : "/", 0);
    }
    if (curl_url_get(u, CURLUPART_URL, &full, 0) != CURLUE_OK) {
        snprintf(err, errlen, "'%s' cannot be normalised", url);
        goto out;
    }
    size_t n = strlen(full);
    while (n > 0 && full[n - 1] == '/') {
        n--;
    }
    st_buf_clear(out);
    st_buf_append(out, full, n);
    rc = 0;
out:
    curl_free(scheme);
    curl_free(host);
    curl_free(path);
    curl_free(query);
    curl_free(frag);
    curl_free(full);
    curl_url_cleanup(u);
    return rc;
}

int st_preflight_run(const struct st_load_cfg *cfg, uint64_t timeout_ms, struct st_preflight *out,
                     char *err, size_t errlen)
{
    int rc = ST_ESERVER;
    struct st_buf url;
    struct st_json doc;
    struct st_http_client *h = NULL;
    struct st_http_resp r;
    st_buf_init(&url);
    st_json_init(&doc, 0);
    st_http_resp_init(&r, MODELS_MAX);
    memset(out, 0, sizeof(*out));
    out->time_scale = 1.0;
    st_buf_printf(&url, "%s/v1/models", cfg->base_url);
    /* Only h2c changes the preflight's HTTP version: it cannot be negotiated. */
    struct st_http_req q = {.method = "GET",
                            .url = url.data,
                            .api_key = cfg->api_key,
                            .timeout_ms = timeout_ms,
                            .connect_timeout_ms = cfg->connect_timeout_ms,
                            .http = cfg->http == ST_HTTP_H2C ? ST_HTTP_H2C : 0,
                            .insecure = cfg->insecure};
    int hr = st_http_do(&h, &q, &r);
    if (hr == -ENOMEM && !h) {
        snprintf(err, errlen, "%s", r.error);
        rc = -ENOMEM;
        goto out;
    }
    if (hr != 0) {
        snprintf(err, errlen, "cannot reach %s: %s; expected an OpenAI-compatible server there",
                 url.data, r.error);
        goto out;
    }
    out->status = r.status;
    /* X-Sim-Time-Scale: the simulator's virtual seconds per real second, at most; X-Sim-Clock:
     * virtual: its events carry their virtual times. */
    char *end = NULL;
    double x = strtod(r.scale, &end);
    if (r.has_scale && end != r.scale && x > 0 && x <= 1e9) {
        out->time_scale = x;
    }
    out->virtual_clock = strncasecmp(r.clock, "virtual", 7) == 0;
    if (out->status != 200) {
        snprintf(err, errlen,
                 "GET %s answered HTTP %ld; expected 200 with a JSON model list "
                 "(is this an OpenAI-compatible server, and is the API key right?)",
                 url.data, out->status);
        goto out;
    }
    if (st_json_parse(&doc, r.body.data ? r.body.data : "", r.body.len) != 0) {
        snprintf(err, errlen, "GET %s did not return JSON; expected {\"data\":[{\"id\":...}]}",
                 url.data);
        goto out;
    }
    int data = st_json_get(&doc, 0, "data");
    if (st_json_type(&doc, data) != ST_JSON_ARRAY) {
        snprintf(err, errlen,
                 "GET %s returned JSON without a \"data\" list; expected an OpenAI model list",
                 url.data);
        goto out;
    }
    out->n_models = (int)doc.toks[data].size;
    int first = st_json_at(&doc, data, 0);
    int id = st_json_get(&doc, first, "id");
    if (st_json_type(&doc, id) == ST_JSON_STRING) {
        struct st_buf m;
        st_buf_init(&m);
        if (st_json_str(&doc, id, &m) == 0) {
            snprintf(out->first_model, sizeof(out->first_model), "%s", st_buf_str(&m));
        }
        st_buf_release(&m);
    }
    rc = 0;
out:
    st_http_client_free(h);
    st_http_resp_release(&r);
    st_buf_release(&url);
    st_json_release(&doc);
    return rc;
}
