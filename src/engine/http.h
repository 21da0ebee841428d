/*
 * The project's one blocking HTTP client, on libcurl easy handles: a request (method, URL, JSON
 * body, API key, extra headers, timeouts, TLS and HTTP version choice, a body cap) and its answer
 * (status, body, the Server, X-Sim-Time-Scale and X-Sim-Clock headers, libcurl's error text).
 * The API key goes into an Authorization header built per request and wiped after it; it is
 * never part of a message. Not the load path: src/engine/worker.c drives its own multi handles.
 * Blocking, on the caller's thread; a handle is used by one thread at a time.
 */
#ifndef ST_ENGINE_HTTP_H
#define ST_ENGINE_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/status.h"

/* Bytes of an answer quoted in a message (st_http_snippet). */
#define ST_HTTP_SNIPPET 160u

/* A reusable easy handle: connections are kept alive between requests. */
struct st_http_client;

struct st_http_resp;

/* on_data: called after each piece of the body was appended to r->body; r->status is the status
 * line's code of the answer being read. on_done: called once the request has ended, r filled. */
typedef void (*st_http_cb)(void *ud, const struct st_http_resp *r);

struct st_http_req {
    const char *method;          /* borrowed: "GET" or "POST" */
    const char *url;             /* borrowed: the full URL (http or https) */
    const char *body;            /* borrowed POST body, sent as application/json; NULL: empty */
    size_t body_len;             /* bytes of body */
    const char *api_key;         /* borrowed secret; NULL or "": no Authorization header */
    const char *const *headers;  /* borrowed "Name: value" lines, NULL-terminated; NULL: none */
    uint64_t timeout_ms;         /* the whole request; 0: no limit */
    uint64_t connect_timeout_ms; /* 0 or over timeout_ms: timeout_ms */
    int http;                    /* 0: libcurl's default (h2 through ALPN on TLS, HTTP/1.1 on
                                    cleartext); else an enum st_http (engine/run.h) */
    int insecure;                /* skip TLS certificate and host checks */
    st_http_cb on_data;          /* NULL: none */
    st_http_cb on_done;          /* NULL: none */
    void *ud;                    /* their argument */
};

struct st_http_resp {
    long status;        /* the HTTP status, 0 before an answer */
    struct st_buf body; /* owned; appended to (clear it to reuse the answer) */
    size_t max_body;    /* a longer body ends the request with ST_ETOOBIG */
    int too_big;
    int has_scale;          /* the answer carried X-Sim-Time-Scale */
    char scale[32];         /* its value */
    char server[64];        /* the Server header, "" if none */
    char clock[16];         /* the X-Sim-Clock header, "" if none */
    uint64_t elapsed_ns;    /* from the request's start to its end, monotonic */
    int rc;                 /* st_http_many: the request's outcome, as st_http_do returns it */
    char error[256];        /* on failure: libcurl's detailed text, else its generic one */
    const char *error_kind; /* on failure: libcurl's generic text for its code; else "" */
};

void st_http_resp_init(struct st_http_resp *r, size_t max_body);
void st_http_resp_release(struct st_http_resp *r);

/* Frees h and its connections; NULL is fine. */
void st_http_client_free(struct st_http_client *h);

/*
 * Sends q on *h (made on first use, then reused) and fills r. Returns 0 when an answer came,
 * whatever its status; ST_ETIMEOUT; ST_ETOOBIG (body over r->max_body); -ECONNREFUSED;
 * -ECONNRESET (nothing came, or the connection broke); -EHOSTUNREACH (the name did not resolve);
 * -ENOMEM; -EIO for the rest. On failure r->error and r->error_kind say why (never the key).
 */
int st_http_do(struct st_http_client **h, const struct st_http_req *q,
               struct st_http_resp *r) ST_WUR;

/*
 * Sends qs[0..n) at once, each on its own connection, and blocks until every one has ended;
 * rs[i] (initialised by the caller) gets answer i and its outcome in rs[i].rc (-ECANCELED:
 * libcurl's loop broke before it ended; nothing else in rs[i] is set and its on_done is not
 * called). Returns 0, or -ENOMEM when libcurl cannot start (then no request was sent).
 */
int st_http_many(const struct st_http_req *qs, struct st_http_resp *rs, size_t n) ST_WUR;

/* Initialises libcurl and libevent threading once per process. Idempotent, thread-safe. Every
 * user of libcurl in the engine (this client, the load workers, URL checks) calls it first. */
void st_engine_init(void);

struct curl_slist;

/* Appends "Authorization: Bearer KEY" to l and returns the list (our copy of the line is wiped;
 * libcurl keeps its own in the list, which its owner wipes or frees); key NULL or "": l. For the
 * load engine's own handles (worker.c) and this client's. */
struct curl_slist *st_http_auth_append(struct curl_slist *l, const char *api_key);

/* Up to ST_HTTP_SNIPPET bytes of s[0..n) as printable ASCII into out[cap] ('?' for others,
 * "..." after a cut). */
void st_http_snippet(char *out, size_t cap, const char *s, size_t n);

/* "HTTP 404 {"detail":"Not Found"}": r's status and the start of its body, into out[cap]. */
void st_http_status_text(const struct st_http_resp *r, char *out, size_t cap);

#endif
