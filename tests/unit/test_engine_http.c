/*
 * Tests for src/engine/http.c, the blocking HTTP client, against a tiny HTTP/1.1 server on
 * 127.0.0.1 port 0 in a thread (one connection at a time, a canned answer per mode): the
 * request's method, body, Content-Type and Authorization reach the server; the answer's status,
 * body and Server / X-Sim-Time-Scale / X-Sim-Clock headers come back; the body cap gives
 * ST_ETOOBIG, a closed port -ECONNREFUSED, a silent close -ECONNRESET, a silent server
 * ST_ETIMEOUT; no message holds the API key; st_http_many answers every request of a batch.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <sys/socket.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "engine/http.h"

#define KEY "sk-test-do-not-print"

enum mode {
    MODE_OK = 1, /* 200 with headers and "hello" */
    MODE_BIG,    /* 200 with 4096 bytes */
    MODE_CLOSE,  /* close without a byte */
    MODE_SILENT, /* read the request, answer nothing for a while */
};

static int listen_fd = -1;
static int port;
static volatile int mode = MODE_OK;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char last_req[8192]; /* the last request the server read, under mu */

/* Reads one request (headers, then Content-Length bytes) into buf; returns its length. */
static size_t read_request(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    size_t want = 0;
    for (;;) {
        ssize_t k = read(fd, buf + n, cap - 1 - n);
        if (k <= 0) {
            break;
        }
        n += (size_t)k;
        buf[n] = '\0';
        char *end = strstr(buf, "\r\n\r\n");
        if (end && !want) {
            const char *cl = strstr(buf, "Content-Length: ");
            want = (size_t)(end + 4 - buf) + (cl && cl < end ? strtoul(cl + 16, NULL, 10) : 0);
        }
        if (want && n >= want) {
            break;
        }
    }
    buf[n] = '\0';
    return n;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k <= 0) {
            return;
        }
        p += k;
        n -= (size_t)k;
    }
}

static void *serve(void *arg)
{
    (void)arg;
    for (;;) {
        int fd = accept(listen_fd, NULL, NULL);
        if (fd < 0) {
            continue;
        }
        char req[8192];
        int m = mode;
        if (m != MODE_CLOSE) {
            read_request(fd, req, sizeof(req));
            pthread_mutex_lock(&mu);
            snprintf(last_req, sizeof(last_req), "%s", req);
            pthread_mutex_unlock(&mu);
        }
        if (m == MODE_OK) {
            static const char a[] = "HTTP/1.1 200 OK\r\nServer: tiny/1.0\r\n"
                                    "X-Sim-Time-Scale: 8\r\nX-Sim-Clock: virtual\r\n"
                                    "Content-Length: 5\r\nConnection: close\r\n\r\nhello";
            write_all(fd, a, sizeof(a) - 1);
        } else if (m == MODE_BIG) {
            static char big[4096];
            memset(big, 'x', sizeof(big));
            static const char a[] = "HTTP/1.1 200 OK\r\nContent-Length: 4096\r\n"
                                    "Connection: close\r\n\r\n";
            write_all(fd, a, sizeof(a) - 1);
            write_all(fd, big, sizeof(big));
        } else if (m == MODE_SILENT) {
            usleep(600 * 1000); /* past the client's timeout */
        }
        close(fd);
    }
    return NULL;
}

static int setup_server(void **state)
{
    (void)state;
    listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(listen_fd, 16) != 0 || getsockname(listen_fd, (struct sockaddr *)&a, &len) != 0) {
        return -1;
    }
    port = ntohs(a.sin_port);
    pthread_t th;
    if (pthread_create(&th, NULL, serve, NULL) != 0) {
        return -1;
    }
    pthread_detach(th);
    return 0;
}

static void url_of(char *out, size_t cap, const char *path)
{
    snprintf(out, cap, "http://127.0.0.1:%d%s", port, path);
}

static void test_get_headers(void **state)
{
    (void)state;
    char url[128];
    url_of(url, sizeof(url), "/v1/models");
    struct st_http_client *h = NULL;
    struct st_http_resp r;
    st_http_resp_init(&r, 1024);
    mode = MODE_OK;
    struct st_http_req q = {.method = "GET", .url = url, .api_key = KEY, .timeout_ms = 5000};
    assert_int_equal(st_http_do(&h, &q, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body.len, 5);
    assert_memory_equal(r.body.data, "hello", 5);
    assert_string_equal(r.server, "tiny/1.0");
    assert_true(r.has_scale);
    assert_string_equal(r.scale, "8");
    assert_string_equal(r.clock, "virtual");
    assert_string_equal(r.error_kind, "");
    pthread_mutex_lock(&mu);
    assert_non_null(strstr(last_req, "GET /v1/models HTTP/1.1\r\n"));
    assert_non_null(strstr(last_req, "Authorization: Bearer " KEY "\r\n"));
    assert_null(strstr(last_req, "Content-Type"));
    pthread_mutex_unlock(&mu);
    char st[256];
    st_http_status_text(&r, st, sizeof(st));
    assert_string_equal(st, "HTTP 200 hello");

    /* The same handle again, a POST with extra headers and no key. */
    st_buf_clear(&r.body);
    const char *hdrs[] = {"X-Request-Id: r1", NULL};
    struct st_http_req p = {.method = "POST",
                            .url = url,
                            .body = "{\"a\":1}",
                            .body_len = 7,
                            .headers = hdrs,
                            .timeout_ms = 5000};
    assert_int_equal(st_http_do(&h, &p, &r), 0);
    assert_int_equal(r.status, 200);
    pthread_mutex_lock(&mu);
    assert_non_null(strstr(last_req, "POST /v1/models HTTP/1.1\r\n"));
    assert_non_null(strstr(last_req, "Content-Type: application/json\r\n"));
    assert_non_null(strstr(last_req, "X-Request-Id: r1\r\n"));
    assert_null(strstr(last_req, "Authorization"));
    assert_null(strstr(last_req, "Expect"));
    assert_non_null(strstr(last_req, "\r\n\r\n{\"a\":1}"));
    pthread_mutex_unlock(&mu);
    st_http_resp_release(&r);
    st_http_client_free(h);
}

/* An outcome that is not an answer: its code, and messages free of the key. */
static void failing(int m, size_t max_body, uint64_t timeout_ms, int want)
{
    char url[128];
    url_of(url, sizeof(url), "/x");
    struct st_http_client *h = NULL;
    struct st_http_resp r;
    st_http_resp_init(&r, max_body);
    mode = m;
    struct st_http_req q = {.method = "GET", .url = url, .api_key = KEY, .timeout_ms = timeout_ms};
    assert_int_equal(st_http_do(&h, &q, &r), want);
    assert_int_equal(r.rc, want);
    assert_true(r.error[0] != '\0');
    assert_true(r.error_kind[0] != '\0');
    assert_null(strstr(r.error, KEY));
    assert_int_equal(r.too_big, want == ST_ETOOBIG);
    st_http_resp_release(&r);
    st_http_client_free(h);
    mode = MODE_OK;
}

static void test_too_big(void **state)
{
    (void)state;
    failing(MODE_BIG, 100, 5000, ST_ETOOBIG);
}

static void test_closed(void **state)
{
    (void)state;
    failing(MODE_CLOSE, 1024, 5000, -ECONNRESET);
}

static void test_timeout(void **state)
{
    (void)state;
    failing(MODE_SILENT, 1024, 300, ST_ETIMEOUT);
}

static void test_refused(void **state)
{
    (void)state;
    /* A port that was just free: bound, then closed without listening. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/", ntohs(a.sin_port));
    struct st_http_client *h = NULL;
    struct st_http_resp r;
    st_http_resp_init(&r, 1024);
    struct st_http_req q = {.method = "GET", .url = url, .api_key = KEY, .timeout_ms = 5000};
    assert_int_equal(st_http_do(&h, &q, &r), -ECONNREFUSED);
    assert_int_equal(r.status, 0);
    assert_null(strstr(r.error, KEY));
    st_http_resp_release(&r);
    st_http_client_free(h);
}

struct seen {
    int data, done;
};

static void on_data(void *ud, const struct st_http_resp *r)
{
    struct seen *s = ud;
    s->data += r->status == 200;
}

static void on_done(void *ud, const struct st_http_resp *r)
{
    struct seen *s = ud;
    s->done += r->rc == 0 && r->status == 200;
}

static void test_many(void **state)
{
    (void)state;
    char url[128];
    url_of(url, sizeof(url), "/v1/chat/completions");
    enum { N = 3 };
    struct st_http_req qs[N];
    struct st_http_resp rs[N];
    struct seen seen = {0, 0};
    mode = MODE_OK;
    for (int i = 0; i < N; i++) {
        qs[i] = (struct st_http_req){.method = "POST",
                                     .url = url,
                                     .body = "{}",
                                     .body_len = 2,
                                     .api_key = KEY,
                                     .timeout_ms = 5000,
                                     .on_data = on_data,
                                     .on_done = on_done,
                                     .ud = &seen};
        st_http_resp_init(&rs[i], 1024);
    }
    assert_int_equal(st_http_many(qs, rs, N), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(rs[i].rc, 0);
        assert_int_equal(rs[i].status, 200);
        assert_int_equal(rs[i].body.len, 5);
        st_http_resp_release(&rs[i]);
    }
    assert_int_equal(seen.done, N);
    assert_true(seen.data >= N);
    assert_int_equal(st_http_many(NULL, NULL, 0), 0);
}

static void test_snippet(void **state)
{
    (void)state;
    char out[ST_HTTP_SNIPPET + 8];
    st_http_snippet(out, sizeof(out), "a\nb\x01", 4);
    assert_string_equal(out, "a b?");
    char big[ST_HTTP_SNIPPET + 10];
    memset(big, 'y', sizeof(big));
    st_http_snippet(out, sizeof(out), big, sizeof(big));
    assert_int_equal(strlen(out), ST_HTTP_SNIPPET + 3);
    assert_string_equal(out + ST_HTTP_SNIPPET, "...");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_headers), cmocka_unit_test(test_too_big),
        cmocka_unit_test(test_closed),      cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_refused),     cmocka_unit_test(test_many),
        cmocka_unit_test(test_snippet),
    };
    return cmocka_run_group_tests(tests, setup_server, NULL);
}
