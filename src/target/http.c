/*
 * One blocking request on the target's easy handle (see http.h).
 */
#include "target/http.h"

#include <curl/curl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "engine/run.h"

/* Copies up to ST_TARGET_HTTP_SNIPPET bytes of s[0..n) into out as printable ASCII ('?' for the
 * rest). */
void st_target_http_snippet(char *out, size_t cap, const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n && i < ST_TARGET_HTTP_SNIPPET && k + 1 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        out[k++] = c >= 0x20 && c < 0x7f ? (char)c : c == '\n' ? ' ' : '?';
    }
    if (n > ST_TARGET_HTTP_SNIPPET && k + 4 < cap) {
        memcpy(out + k, "...", 3);
        k += 3;
    }
    if (cap) {
        out[k] = '\0';
    }
}

void st_target_http_resp_init(struct st_target_http_resp *r, size_t max_body)
{
    memset(r, 0, sizeof(*r));
    st_buf_init(&r->body);
    r->max_body = max_body;
}

void st_target_http_resp_release(struct st_target_http_resp *r)
{
    st_buf_release(&r->body);
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct st_target_http_resp *r = ud;
    size_t n = size * nmemb;
    if (r->body.len + n > r->max_body) {
        r->too_big = 1;
        return 0;
    }
    st_buf_append(&r->body, ptr, n);
    return n;
}

/* Copies a header's value (trimmed) into out when line is "name: value". */
static int header_value(const char *line, size_t n, const char *name, char *out, size_t cap)
{
    size_t m = strlen(name);
    if (n <= m || strncasecmp(line, name, m) != 0 || line[m] != ':') {
        return 0;
    }
    size_t a = m + 1, b = n;
    while (a < b && (line[a] == ' ' || line[a] == '\t')) {
        a++;
    }
    while (b > a && (line[b - 1] == '\r' || line[b - 1] == '\n' || line[b - 1] == ' ')) {
        b--;
    }
    st_target_http_snippet(out, cap, line + a, b - a);
    return 1;
}

static size_t on_header(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct st_target_http_resp *r = ud;
    size_t n = size * nmemb;
    if (n >= 5 && memcmp(ptr, "HTTP/", 5) == 0) {
        /* A new header block (after a 100 Continue or a redirect): forget the last one. */
        r->has_scale = 0;
        r->scale[0] = '\0';
        r->server[0] = '\0';
        return n;
    }
    if (header_value(ptr, n, "X-Sim-Time-Scale", r->scale, sizeof(r->scale))) {
        r->has_scale = 1;
    }
    (void)header_value(ptr, n, "Server", r->server, sizeof(r->server));
    return n;
}

static int curl_rc(CURLcode cc, const struct st_target_http_resp *r)
{
    switch (cc) {
    case CURLE_OPERATION_TIMEDOUT:
        return ST_ETIMEOUT;
    case CURLE_COULDNT_CONNECT:
        return -ECONNREFUSED;
    case CURLE_COULDNT_RESOLVE_HOST:
        return -EHOSTUNREACH;
    case CURLE_WRITE_ERROR:
        return r->too_big ? ST_ETOOBIG : -EIO;
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
        return -ECONNRESET;
    case CURLE_OUT_OF_MEMORY:
        return -ENOMEM;
    default:
        return -EIO;
    }
}

int st_target_http(struct st_target *t, const char *method, const char *path, const char *body,
                   size_t body_len, uint64_t timeout_ms, struct st_target_http_resp *r, char *err,
                   size_t errlen)
{
    int rc = 0;
    struct st_buf url, auth;
    struct curl_slist *hdrs = NULL;
    char curl_err[CURL_ERROR_SIZE] = "";
    st_engine_init();
    if (!t->curl) {
        t->curl = curl_easy_init();
        if (!t->curl) {
            st_errf(err, errlen, "libcurl could not start");
            return -ENOMEM;
        }
    }
    CURL *e = t->curl;
    curl_easy_reset(e);
    st_buf_init(&url);
    st_buf_init(&auth);
    st_buf_printf(&url, "%s%s", t->base_url, path);
    uint64_t connect_ms = t->connect_timeout_ms < timeout_ms ? t->connect_timeout_ms : timeout_ms;
    curl_easy_setopt(e, CURLOPT_URL, url.data);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)connect_ms);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, curl_err);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    if (t->insecure) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    hdrs = curl_slist_append(hdrs, "Expect:"); /* no 100-continue wait on large bodies */
    if (t->api_key) {
        st_buf_printf(&auth, "Authorization: Bearer %s", t->api_key);
        hdrs = curl_slist_append(hdrs, auth.data);
        memset(auth.data, 0, auth.len);
    }
    if (strcmp(method, "POST") == 0) {
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? body_len : 0));
    } else {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
    CURLcode cc = curl_easy_perform(e);
    if (cc != CURLE_OK) {
        rc = curl_rc(cc, r);
        if (rc == ST_ETOOBIG) {
            st_errf(err, errlen, "%s %s: the answer is over %zu bytes", method, url.data,
                    r->max_body);
        } else {
            st_errf(err, errlen, "%s %s: %s", method, url.data,
                    curl_err[0] ? curl_err : curl_easy_strerror(cc));
        }
        goto out;
    }
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r->status);
out:
    /* The handle must not keep pointers to what is freed here. */
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(hdrs);
    st_buf_release(&url);
    st_buf_release(&auth);
    return rc;
}

/* "HTTP 404 {"detail":...}" for messages. */
void st_target_http_status(const struct st_target_http_resp *r, char *out, size_t cap)
{
    char body[ST_TARGET_HTTP_SNIPPET + 8];
    st_target_http_snippet(body, sizeof(body), r->body.data ? r->body.data : "", r->body.len);
    snprintf(out, cap, "HTTP %ld%s%s", r->status, body[0] ? " " : "", body);
}

void st_target_http_close(struct st_target *t)
{
    if (t->curl) {
        curl_easy_cleanup(t->curl);
        t->curl = NULL;
    }
}
