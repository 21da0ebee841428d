/*
 * The blocking HTTP client (see http.h): one function sets an easy handle up from a request, one
 * reads its outcome; st_http_do runs one handle, st_http_many several on a multi handle.
 */
#include "engine/http.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <event2/thread.h>

#include "base/clock.h"
#include "base/xalloc.h"
#include "engine/run.h" /* enum st_http */

_Static_assert(sizeof(((struct st_http_resp *)0)->error) >= CURL_ERROR_SIZE,
               "the answer's error holds libcurl's error buffer");

struct st_http_client {
    CURL *e;                     /* owned */
    struct curl_slist *hdrs;     /* owned while a request runs; the Authorization line is wiped */
    const struct st_http_req *q; /* borrowed while a request runs */
    struct st_http_resp *r;      /* borrowed while a request runs */
    uint64_t t0_ns;              /* the request's start */
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;

static void global_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    evthread_use_pthreads();
}

void st_engine_init(void)
{
    pthread_once(&global_once, global_init);
}

void st_http_snippet(char *out, size_t cap, const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n && i < ST_HTTP_SNIPPET && k + 1 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        out[k++] = c >= 0x20 && c < 0x7f ? (char)c : c == '\n' ? ' ' : '?';
    }
    if (n > ST_HTTP_SNIPPET && k + 4 < cap) {
        memcpy(out + k, "...", 3);
        k += 3;
    }
    if (cap) {
        out[k] = '\0';
    }
}

void st_http_status_text(const struct st_http_resp *r, char *out, size_t cap)
{
    char body[ST_HTTP_SNIPPET + 8];
    st_http_snippet(body, sizeof(body), r->body.data ? r->body.data : "", r->body.len);
    snprintf(out, cap, "HTTP %ld%s%s", r->status, body[0] ? " " : "", body);
}

void st_http_resp_init(struct st_http_resp *r, size_t max_body)
{
    memset(r, 0, sizeof(*r));
    st_buf_init(&r->body);
    r->max_body = max_body;
    r->error_kind = "";
}

void st_http_resp_release(struct st_http_resp *r)
{
    st_buf_release(&r->body);
}

/* A new handle, or NULL when libcurl cannot make one. */
static struct st_http_client *new_handle(void)
{
    st_engine_init();
    CURL *e = curl_easy_init();
    struct st_http_client *h = NULL;
    if (e) {
        h = st_xcalloc(1, sizeof(*h));
        h->e = e;
    }
    return h;
}

void st_http_client_free(struct st_http_client *h)
{
    if (h) {
        curl_easy_cleanup(h->e);
    }
    free(h);
}

struct curl_slist *st_http_auth_append(struct curl_slist *l, const char *api_key)
{
    if (!api_key || !api_key[0]) {
        return l;
    }
    struct st_buf a;
    st_buf_init(&a);
    st_buf_printf(&a, "Authorization: Bearer %s", api_key);
    l = curl_slist_append(l, a.data);
    /* Wipe our copy; libcurl keeps its own inside the list. */
    memset(a.data, 0, a.len);
    st_buf_release(&a);
    return l;
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct st_http_client *h = ud;
    struct st_http_resp *r = h->r;
    size_t n = size * nmemb;
    if (r->body.len + n > r->max_body) {
        r->too_big = 1;
        return 0;
    }
    st_buf_append(&r->body, ptr, n);
    if (h->q->on_data) {
        h->q->on_data(h->q->ud, r);
    }
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
    st_http_snippet(out, cap, line + a, b - a);
    return 1;
}

static size_t on_header(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct st_http_resp *r = ((struct st_http_client *)ud)->r;
    size_t n = size * nmemb;
    if (n >= 5 && memcmp(ptr, "HTTP/", 5) == 0) {
        /* A new header block (after a 100 Continue or a redirect): forget the last one. */
        const char *sp = memchr(ptr, ' ', n);
        r->status = 0;
        for (const char *p = sp ? sp + 1 : ptr + n; p < ptr + n && *p >= '0' && *p <= '9'; p++) {
            r->status = r->status * 10 + (*p - '0');
        }
        r->has_scale = 0;
        r->scale[0] = '\0';
        r->server[0] = '\0';
        r->clock[0] = '\0';
        return n;
    }
    if (header_value(ptr, n, "X-Sim-Time-Scale", r->scale, sizeof(r->scale))) {
        r->has_scale = 1;
    }
    (void)header_value(ptr, n, "Server", r->server, sizeof(r->server));
    (void)header_value(ptr, n, "X-Sim-Clock", r->clock, sizeof(r->clock));
    return n;
}

static long curl_version_of(int http)
{
    switch (http) {
    case ST_HTTP_1_1:
        return CURL_HTTP_VERSION_1_1;
    case ST_HTTP_2:
        return CURL_HTTP_VERSION_2_0;
    case ST_HTTP_H2C:
        return CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE;
    default:
        return CURL_HTTP_VERSION_NONE;
    }
}

/* Sets h's easy handle up for q, answering into r (both borrowed until finish). */
static void prepare(struct st_http_client *h, const struct st_http_req *q, struct st_http_resp *r)
{
    CURL *e = h->e;
    curl_easy_reset(e);
    h->q = q;
    h->r = r;
    r->error[0] = '\0';
    r->error_kind = "";
    r->too_big = 0;
    uint64_t connect_ms = q->connect_timeout_ms && q->connect_timeout_ms < q->timeout_ms
                              ? q->connect_timeout_ms
                              : q->timeout_ms;
    curl_easy_setopt(e, CURLOPT_URL, q->url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)q->timeout_ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)connect_ms);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, h);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, h);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->error);
    curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)h);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    if (q->http) {
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION, curl_version_of(q->http));
    }
    if (q->insecure) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    h->hdrs = curl_slist_append(NULL, "Expect:"); /* no 100-continue wait on large bodies */
    h->hdrs = st_http_auth_append(h->hdrs, q->api_key);
    for (const char *const *l = q->headers; l && *l; l++) {
        h->hdrs = curl_slist_append(h->hdrs, *l);
    }
    if (strcmp(q->method, "POST") == 0) {
        h->hdrs = curl_slist_append(h->hdrs, "Content-Type: application/json");
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, q->body ? q->body : "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(q->body ? q->body_len : 0));
    } else {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h->hdrs);
    h->t0_ns = st_clock_mono_ns();
}

static int curl_rc(CURLcode cc, const struct st_http_resp *r)
{
    switch (cc) {
    case CURLE_OK:
        return 0;
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

/* Tells q's caller that its request has ended with answer r. */
static void notify(const struct st_http_req *q, const struct st_http_resp *r)
{
    if (q->on_done) {
        q->on_done(q->ud, r);
    }
}

/* Reads the outcome cc of h's request into its answer, and drops what the handle borrowed. */
static int finish(struct st_http_client *h, CURLcode cc)
{
    struct st_http_resp *r = h->r;
    r->elapsed_ns = st_clock_mono_ns() - h->t0_ns;
    curl_easy_getinfo(h->e, CURLINFO_RESPONSE_CODE, &r->status);
    if (cc != CURLE_OK) {
        r->error_kind = curl_easy_strerror(cc);
        if (!r->error[0]) {
            snprintf(r->error, sizeof(r->error), "%s", r->error_kind);
        }
    }
    r->rc = curl_rc(cc, r);
    /* The handle must not keep pointers to what is freed here, nor the key in its headers. */
    curl_easy_setopt(h->e, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(h->e, CURLOPT_ERRORBUFFER, NULL);
    for (struct curl_slist *l = h->hdrs; l; l = l->next) {
        memset(l->data, 0, strlen(l->data));
    }
    curl_slist_free_all(h->hdrs);
    h->hdrs = NULL;
    h->q = NULL;
    h->r = NULL;
    return r->rc;
}

int st_http_do(struct st_http_client **h, const struct st_http_req *q, struct st_http_resp *r)
{
    if (!*h) {
        *h = new_handle();
    }
    if (!*h) {
        snprintf(r->error, sizeof(r->error), "libcurl could not start");
        r->error_kind = r->error;
        r->rc = -ENOMEM;
        return r->rc;
    }
    prepare(*h, q, r);
    int rc = finish(*h, curl_easy_perform((*h)->e));
    notify(q, r);
    return rc;
}

int st_http_many(const struct st_http_req *qs, struct st_http_resp *rs, size_t n)
{
    st_engine_init();
    CURLM *m = curl_multi_init();
    if (!m) {
        return -ENOMEM;
    }
    struct st_http_client **hs = st_xcalloc(n ? n : 1, sizeof(*hs));
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        hs[i] = new_handle();
        rc = hs[i] ? 0 : -ENOMEM;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        prepare(hs[i], &qs[i], &rs[i]);
        curl_multi_add_handle(m, hs[i]->e);
    }
    int running = rc == 0;
    while (running > 0) {
        if (curl_multi_perform(m, &running) != CURLM_OK) {
            break;
        }
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE) {
                continue;
            }
            struct st_http_client *h = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&h);
            const struct st_http_req *q = h->q;
            struct st_http_resp *r = h->r;
            curl_multi_remove_handle(m, h->e);
            (void)finish(h, msg->data.result);
            notify(q, r);
        }
        if (running > 0) {
            curl_multi_poll(m, NULL, 0, 100, NULL);
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (hs[i] && hs[i]->r) {
            /* Never ended (the multi loop broke): no outcome, and its headers go now. */
            curl_multi_remove_handle(m, hs[i]->e);
            struct st_http_resp *r = hs[i]->r;
            (void)finish(hs[i], CURLE_ABORTED_BY_CALLBACK);
            r->status = 0;
            r->rc = -ECANCELED;
        }
        st_http_client_free(hs[i]);
    }
    free(hs);
    curl_multi_cleanup(m);
    return rc;
}
