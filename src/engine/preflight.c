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

/* Reads X-Sim-Time-Scale (the simulator's virtual seconds per real second, at most) and
 * X-Sim-Clock: virtual (its events carry their virtual times). */
static size_t header_line(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct st_preflight *pf = ud;
    double *scale = &pf->time_scale;
    size_t n = size * nmemb;
    static const char clock[] = "x-sim-clock: virtual";
    if (n >= sizeof(clock) - 1 && strncasecmp(ptr, clock, sizeof(clock) - 1) == 0) {
        pf->virtual_clock = 1;
    }
    static const char name[] = "x-sim-time-scale:";
    if (n > sizeof(name) - 1 && strncasecmp(ptr, name, sizeof(name) - 1) == 0) {
        char tmp[64];
        size_t v = n - (sizeof(name) - 1);
        if (v >= sizeof(tmp)) {
            v = sizeof(tmp) - 1;
        }
        memcpy(tmp, ptr + sizeof(name) - 1, v);
        tmp[v] = '\0';
        char *end = NULL;
        double x = strtod(tmp, &end);
        if (end != tmp && x > 0 && x <= 1e9) {
            *scale = x;
        }
    }
    return n;
}

static size_t collect(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct st_buf *b = ud;
    size_t n = size * nmemb;
    if (b->len + n > MODELS_MAX) {
        return 0;
    }
    st_buf_append(b, ptr, n);
    return n;
}

int st_preflight_run(const struct st_load_cfg *cfg, uint64_t timeout_ms, struct st_preflight *out,
                     char *err, size_t errlen)
{
    int rc = ST_ESERVER;
    struct st_buf url, body, auth;
    struct st_json doc;
    struct curl_slist *hdrs = NULL;
    char curl_err[CURL_ERROR_SIZE] = "";
    st_buf_init(&url);
    st_buf_init(&body);
    st_buf_init(&auth);
    st_json_init(&doc, 0);
    memset(out, 0, sizeof(*out));
    st_buf_printf(&url, "%s/v1/models", cfg->base_url);
    st_engine_init();

    CURL *e = curl_easy_init();
    if (!e) {
        snprintf(err, errlen, "libcurl could not start");
        rc = -ENOMEM;
        goto out;
    }
    curl_easy_setopt(e, CURLOPT_URL, url.data);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)cfg->connect_timeout_ms);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &body);
    out->time_scale = 1.0;
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_line);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, out);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, curl_err);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    if (cfg->http == ST_HTTP_H2C) {
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
    }
    if (cfg->insecure) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (cfg->api_key && cfg->api_key[0]) {
        st_buf_printf(&auth, "Authorization: Bearer %s", cfg->api_key);
        hdrs = curl_slist_append(hdrs, auth.data);
        memset(auth.data, 0, auth.len);
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
    }
    CURLcode cc = curl_easy_perform(e);
    if (cc != CURLE_OK) {
        snprintf(err, errlen, "cannot reach %s: %s; expected an OpenAI-compatible server there",
                 url.data, curl_err[0] ? curl_err : curl_easy_strerror(cc));
        goto out;
    }
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &out->status);
    if (out->status != 200) {
        snprintf(err, errlen,
                 "GET %s answered HTTP %ld; expected 200 with a JSON model list "
                 "(is this an OpenAI-compatible server, and is the API key right?)",
                 url.data, out->status);
        goto out;
    }
    if (st_json_parse(&doc, body.data ? body.data : "", body.len) != 0) {
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
    if (e) {
        curl_easy_cleanup(e);
    }
    curl_slist_free_all(hdrs);
    st_buf_release(&url);
    st_buf_release(&body);
    st_buf_release(&auth);
    st_json_release(&doc);
    return rc;
}
