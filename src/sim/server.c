/*
 * The simulator's evhttp shell. See server.h; the state machines are drawn in
 * docs/internals/sim.md. This file routes requests, listens and owns the server's lifecycle; a
 * completion's reply is a stream (stream.c), and model mode's arrivals, engine and timers are in
 * modelmode.c (server_int.h draws the three files and which calls which).
 */
#include "sim/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/xalloc.h"
#include "sim/admin.h"
#include "sim/info.h"
#include "sim/live.h"
#include "sim/prompt.h"
#include "sim/server_int.h"

/* Largest request body accepted (evhttp answers 413 beyond it). */
#define MAX_BODY_BYTES (64u << 20)
/* Most bytes the bufferevent writes in one go (libevent's default is 16 KiB). */
#define MAX_SINGLE_WRITE (1u << 20)

/* ---- routes ---- */

/* Renders the request id (X-Request-Id, cut to ST_SIM_MAX_RID_BYTES, or "sim-<k>") as a JSON
 * string. */
static size_t make_rid(struct evhttp_request *req, uint64_t id, struct st_buf *tmp, char *out,
                       size_t cap)
{
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "X-Request-Id");
    char own[32];
    if (!h) {
        snprintf(own, sizeof(own), "sim-%llu", (unsigned long long)id);
        h = own;
    }
    size_t n = strlen(h);
    st_buf_clear(tmp);
    st_json_quote(tmp, h, n > ST_SIM_MAX_RID_BYTES ? ST_SIM_MAX_RID_BYTES : n);
    size_t len = tmp->len < cap ? tmp->len : cap;
    memcpy(out, tmp->data, len);
    return len;
}

/* Per connection: no Nagle delay, big writes, and no evhttp read/write timeouts (a stalled or
 * slow-reading client keeps its stream for as long as it wants). */
static void tune_connection(struct evhttp_connection *evcon)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
    int one = 1;
    (void)setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    (void)bufferevent_set_max_single_write(bev, MAX_SINGLE_WRITE);
    (void)bufferevent_set_timeouts(bev, NULL, NULL);
}

/*
 * engine.keepalive_close: a connection's first request is answered; a later one on it is not: the
 * connection is shut both ways, so the client finds it dead only once it has sent (a server that
 * closed its end after the previous answer). evhttp then frees the request with the connection.
 * Connections are told apart by fd and peer port. Returns 1 when req was dropped.
 */
static int keepalive_drop(struct st_sim_server *srv, struct evhttp_request *req)
{
    if (!srv->live || !srv->prof.engine.keepalive_close) {
        return 0;
    }
    int fd =
        bufferevent_getfd(evhttp_connection_get_bufferevent(evhttp_request_get_connection(req)));
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &sl) != 0) {
        return 0;
    }
    uint32_t port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                             : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if ((size_t)fd >= srv->n_served_port) {
        size_t n = (size_t)fd * 2 + 16;
        srv->served_port = st_xrealloc(srv->served_port, n * sizeof(*srv->served_port));
        memset(srv->served_port + srv->n_served_port, 0,
               (n - srv->n_served_port) * sizeof(*srv->served_port));
        srv->n_served_port = n;
    }
    if (srv->served_port[fd] == port + 1) {
        srv->served_port[fd] = 0;
        (void)shutdown(fd, SHUT_RDWR);
        return 1;
    }
    srv->served_port[fd] = port + 1;
    return 0;
}

static void completion(struct st_sim_server *srv, struct evhttp_request *req, enum st_sim_api api,
                       uint64_t arrival_ns, uint64_t id, const char *rid, size_t rid_len)
{
    struct st_sim_spec spec = srv->spec;
    struct st_sim_req rq;
    if (st_sim_stream_parse(srv, req, api, rid, rid_len, &spec, &rq) != 0) {
        return;
    }
    struct st_sim_stream *st =
        st_sim_stream_new(srv, req, api, &spec, &rq, arrival_ns, id, rid, rid_len);
    st_sim_stream_begin(st, st_sim_status_applies(&spec, 0, id) ? spec.status : 0);
}

static void models(struct st_sim_server *srv, struct evhttp_request *req)
{
    struct st_buf *b = &srv->scratch;
    struct st_jw w;
    st_buf_clear(b);
    st_jw_init(&w, b);
    st_jw_obj_open(&w);
    st_sim_info_list_open(&w, srv->model, 0, "servetune-sim");
    st_sim_info_list_close(&w);
    st_sim_stream_send_json(srv, req, 200, b->data, b->len);
}

static void on_request(struct evhttp_request *req, void *arg)
{
    struct st_sim_server *srv = arg;
    uint64_t arrival = st_clock_mono_ns();
    uint64_t id = ++srv->next_id;
    char rid[ST_SIM_MAX_RID_BYTES * 6 + 3];
    size_t rid_len = make_rid(req, id, &srv->scratch, rid, sizeof(rid));
    if (srv->trace) {
        st_sim_trace_arrive(srv->trace, rid, rid_len, arrival);
    }
    tune_connection(evhttp_request_get_connection(req));
    if (keepalive_drop(srv, req)) {
        return;
    }

    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    int get = cmd == EVHTTP_REQ_GET, post = cmd == EVHTTP_REQ_POST;
    if (!path) {
        path = "/";
    }
    if (srv->live) {
        uint64_t seq = 0;
        if (st_sim_admin_route(srv->admin, req, path, cmd)) {
            st_sim_stream_trace(srv, rid, rid_len, &seq, st_clock_mono_ns(), ST_SIM_KIND_HEADERS, 0,
                                0);
            return;
        }
        st_sim_modelmode_hold(srv, req,
                              strcmp(path, "/v1/chat/completions") == 0 ? ST_SIM_API_CHAT
                                                                        : ST_SIM_API_COMPLETIONS,
                              arrival, id, rid, rid_len);
        return;
    }
    if (strcmp(path, "/v1/chat/completions") == 0 && post) {
        completion(srv, req, ST_SIM_API_CHAT, arrival, id, rid, rid_len);
    } else if (strcmp(path, "/v1/completions") == 0 && post) {
        completion(srv, req, ST_SIM_API_COMPLETIONS, arrival, id, rid, rid_len);
    } else if (strcmp(path, "/v1/models") == 0 && get) {
        uint64_t seq = 0;
        st_sim_stream_trace(srv, rid, rid_len, &seq, st_clock_mono_ns(), ST_SIM_KIND_HEADERS, 0, 0);
        models(srv, req);
    } else if (strcmp(path, "/health") == 0 && get) {
        static const char ok[] = "{\"status\":\"ok\"}";
        uint64_t seq = 0;
        st_sim_stream_trace(srv, rid, rid_len, &seq, st_clock_mono_ns(), ST_SIM_KIND_HEADERS, 0, 0);
        st_sim_stream_send_json(srv, req, 200, ok, strlen(ok));
    } else if (strcmp(path, "/v1/chat/completions") == 0 || strcmp(path, "/v1/completions") == 0 ||
               strcmp(path, "/v1/models") == 0 || strcmp(path, "/health") == 0) {
        st_sim_stream_send_error(srv, req, rid, rid_len, 405, "method_not_allowed_error",
                                 "Method Not Allowed");
    } else {
        st_sim_stream_send_error(srv, req, rid, rid_len, 404, "not_found_error", "File Not Found");
    }
}

/* ---- lifecycle ---- */

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    struct st_sim_server *srv = arg;
    (void)sig;
    (void)what;
    srv->signalled = 1;
    event_base_loopbreak(srv->base);
}

static int listen_on(struct st_sim_server *srv, const struct sockaddr *addr, socklen_t addrlen,
                     char *err, size_t errlen)
{
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -errno;
    }
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (addr->sa_family == AF_INET6) {
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    }
    /* A deep backlog: thousands of clients may connect at once (the kernel caps it at
     * net.core.somaxconn). */
    if (bind(fd, addr, addrlen) != 0 || listen(fd, 65535) != 0) {
        int rc = -errno;
        snprintf(err, errlen, "bind/listen: %s", strerror(errno));
        close(fd);
        return rc;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
            port = ntohs(a->sin6_port);
        } else {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
            port = ntohs(a->sin_port);
        }
    }
    snprintf(srv->addr, sizeof(srv->addr), ss.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", host,
             port);
    if (!evhttp_accept_socket_with_handle(srv->http, fd)) {
        snprintf(err, errlen, "evhttp could not accept on the socket");
        close(fd);
        return -ENOMEM;
    }
    return 0;
}

int st_sim_server_new(const struct st_sim_server_cfg *cfg, struct st_sim_server **out, char *err,
                      size_t errlen)
{
    struct st_sim_server *srv = st_xcalloc(1, sizeof(*srv));
    int rc = -ENOMEM;
    srv->spec = cfg->spec;
    srv->model = st_xstrdup(cfg->model);
    srv->trace = cfg->trace;
    st_json_init(&srv->doc, 1u << 22);
    st_buf_init(&srv->scratch);
    snprintf(srv->scale, sizeof(srv->scale), "1");

    struct event_config *ec = event_config_new();
    if (ec) {
        /* Timers to the microsecond, not rounded to the millisecond (epoll uses a timerfd). */
        event_config_set_flag(ec, EVENT_BASE_FLAG_PRECISE_TIMER);
        srv->base = event_base_new_with_config(ec);
        event_config_free(ec);
    }
    if (srv->base) {
        srv->http = evhttp_new(srv->base);
    }
    if (!srv->http) {
        snprintf(err, errlen, "libevent: out of memory");
        goto fail;
    }
    evhttp_set_gencb(srv->http, on_request, srv);
    evhttp_set_max_body_size(srv->http, MAX_BODY_BYTES);
    evhttp_set_allowed_methods(srv->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                              EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                              EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
    rc = listen_on(srv, cfg->addr, cfg->addrlen, err, errlen);
    if (rc != 0) {
        goto fail;
    }
    srv->sig_int = evsignal_new(srv->base, SIGINT, on_signal, srv);
    srv->sig_term = evsignal_new(srv->base, SIGTERM, on_signal, srv);
    if (!srv->sig_int || !srv->sig_term || evsignal_add(srv->sig_int, NULL) != 0 ||
        evsignal_add(srv->sig_term, NULL) != 0) {
        snprintf(err, errlen, "libevent: cannot watch SIGINT/SIGTERM");
        rc = -ENOMEM;
        goto fail;
    }
    if (cfg->engine) {
        rc = st_sim_modelmode_start(srv, cfg->engine, err, errlen);
        if (rc != 0) {
            goto fail;
        }
    }
    *out = srv;
    return 0;
fail:
    st_sim_server_free(srv);
    return rc;
}

void st_sim_server_addr(const struct st_sim_server *s, char *buf, size_t len)
{
    snprintf(buf, len, "%s", s->addr);
}

int st_sim_server_run(struct st_sim_server *s)
{
    (void)event_base_dispatch(s->base);
    /* The listener and the signal events keep the loop alive: it ends on a signal or a failure. */
    return s->signalled ? ST_EINTERRUPTED : -EIO;
}

void st_sim_server_free(struct st_sim_server *s)
{
    if (!s) {
        return;
    }
    /* Parked flushes are answered while their connections still exist. */
    st_sim_admin_free(s->admin);
    s->admin = NULL;
    /* Frees every connection; their close callbacks free the streams and timers (and take the
     * streams out of the engine, so the engine goes after them). */
    if (s->http) {
        evhttp_free(s->http);
    }
    if (s->live) {
        st_sim_live_timer_free(s->live, s->ready_timer);
        st_sim_live_timer_free(s->live, s->vcrash_timer);
        st_sim_live_timer_free(s->live, s->press_timer);
        st_sim_live_timer_free(s->live, s->unpress_timer);
    }
    st_sim_live_free(s->live);
    struct event *evs[] = {s->crash_timer, s->keepalive, s->sig_int, s->sig_term};
    for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++) {
        if (evs[i]) {
            event_free(evs[i]);
        }
    }
    if (s->base) {
        event_base_free(s->base);
    }
    st_json_release(&s->doc);
    st_buf_release(&s->scratch);
    free(s->served_port);
    st_sim_prompt_release(&s->prompt);
    free(s->hashes);
    free(s->slot_path);
    free(s->model);
    free(s);
}
