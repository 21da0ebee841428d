/*
 * The qualification runner's HTTP side: one curl easy handle per request on a multi handle,
 * non-streaming, bodies capped at 16 MiB; and the ffmpeg step of the video check. See runner.h.
 */
#include "qual/runner.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/json.h"
#include "base/proc.h"
#include "base/xalloc.h"
#include "engine/http.h"
#include "proto/oaireq.h"
#include "qual/render.h"

#define MAX_REPLY_BYTES (16u << 20)
/* ffmpeg encodes 120 small PNG frames (320x240) in about a second; a minute is far past any
 * honest run, so a hung ffmpeg costs one minute, not the campaign. */
#define FFMPEG_TIMEOUT_S 60
#define FFMPEG_GRACE_S 5

void st_qual_reply_init(struct st_qual_reply *r)
{
    memset(r, 0, sizeof(*r));
    st_buf_init(&r->content);
}

void st_qual_reply_release(struct st_qual_reply *r)
{
    st_buf_release(&r->content);
}

void st_qual_body(const struct st_qual_client *c, const struct st_check_step *s, int with_format,
                  struct st_buf *out)
{
    uint32_t max_tokens = s->max_tokens;
    if (c->sim && s->expect.len > 0 && !s->ignore_eos) {
        /* The sim's reply stops after its answer, as a model would at EOS: the answer's tokens
         * (4 code points each) and no filler after it. */
        uint32_t cps = 0;
        for (size_t i = 0; i < s->expect.len; i++) {
            cps += ((unsigned char)s->expect.data[i] & 0xC0u) != 0x80u;
        }
        uint32_t need = (cps + 3) / 4;
        if (need > 0 && need < max_tokens) {
            max_tokens = need;
        }
    }
    int format = with_format && s->response_format.len > 0;
    struct st_oaireq_check q = {.model = c->model,
                                .messages_json = s->messages.data,
                                .messages_len = s->messages.len,
                                .max_tokens = max_tokens,
                                .seed = c->seed,
                                .ignore_eos = s->ignore_eos,
                                .response_format_json = format ? s->response_format.data : NULL,
                                .response_format_len = format ? s->response_format.len : 0,
                                .reasoning_effort = c->reasoning_effort};
    st_oaireq_check_build(&q, out);
}

struct xfer {
    struct st_http_resp *resp;  /* borrowed: its answer (body, status) there */
    struct st_buf body;         /* the request's body */
    struct st_buf hid, hexpect; /* the X-Request-Id and X-Servetune-Expect lines */
    const char *hdrs[3];        /* those of them that are sent, NULL-terminated */
    uint64_t t0_ns;
    struct st_qual_reply *r;
    int stream;     /* an SSE answer: events are read as they come */
    size_t scanned; /* bytes of resp already split into lines */
    int has_vt;     /* the event being read carried the simulator's "vt: NS LAG" */
    double vt_s;    /* its virtual time, seconds */
};

static double since(const struct xfer *x)
{
    return (double)(st_clock_mono_ns() - x->t0_ns) / 1e9;
}

/* finish_reason of choice c0 and the usage counts of answer d into r. */
static void read_finish_usage(const struct st_json *d, int c0, struct st_qual_reply *r)
{
    int fr = c0 >= 0 ? st_json_get(d, c0, "finish_reason") : -1;
    if (fr >= 0 && st_json_type(d, fr) == ST_JSON_STRING) {
        size_t fl = 0;
        const char *f = st_json_raw(d, fr, &fl);
        snprintf(r->finish_reason, sizeof(r->finish_reason), "%.*s", (int)fl, f);
    }
    int u = st_json_get(d, 0, "usage");
    if (u >= 0) {
        int64_t v;
        int pt = st_json_get(d, u, "prompt_tokens");
        int ctk = st_json_get(d, u, "completion_tokens");
        if (pt >= 0 && st_json_i64(d, pt, &v) == 0 && v >= 0) {
            r->prompt_tokens = (uint64_t)v;
        }
        if (ctk >= 0 && st_json_i64(d, ctk, &v) == 0 && v >= 0) {
            r->completion_tokens = (uint64_t)v;
        }
    }
}

/* One SSE data payload of a streamed answer: content, its times, finish reason and usage. */
static void stream_event(struct xfer *x, const char *p, size_t n)
{
    struct st_qual_reply *r = x->r;
    struct st_json d;
    st_json_init(&d, 0);
    if (st_json_parse(&d, p, n) != 0 || st_json_type(&d, 0) != ST_JSON_OBJECT) {
        st_json_release(&d);
        return;
    }
    int ch = st_json_get(&d, 0, "choices");
    int c0 = ch >= 0 && st_json_type(&d, ch) == ST_JSON_ARRAY ? st_json_at(&d, ch, 0) : -1;
    int dl = c0 >= 0 ? st_json_get(&d, c0, "delta") : -1;
    int ct = dl >= 0 ? st_json_get(&d, dl, "content") : -1;
    if (ct >= 0 && st_json_type(&d, ct) == ST_JSON_STRING) {
        size_t before = r->content.len;
        if (st_json_str(&d, ct, &r->content) == 0 && r->content.len > before) {
            double t = since(x);
            if (r->first_s == 0) {
                r->first_s = t;
                r->first_vt_s = x->vt_s;
            }
            r->last_s = t;
            r->last_vt_s = x->vt_s;
            r->has_vt = x->has_vt;
        }
    }
    read_finish_usage(&d, c0, r);
    st_json_release(&d);
}

/* Splits resp into lines from x->scanned; final: the rest is a line too. */
static void stream_lines(struct xfer *x, int final)
{
    const struct st_buf *resp = &x->resp->body;
    while (x->scanned < resp->len) {
        const char *b = resp->data + x->scanned;
        size_t left = resp->len - x->scanned;
        const char *nl = memchr(b, '\n', left);
        if (nl == NULL && !final) {
            return;
        }
        size_t n = nl != NULL ? (size_t)(nl - b) : left;
        x->scanned += nl != NULL ? n + 1 : n;
        if (n > 0 && b[n - 1] == '\r') {
            n--;
        }
        if (n > 3 && memcmp(b, "vt:", 3) == 0) {
            /* The simulator's stamp of the event that follows (docs/sim.md, "Virtual time"). */
            char tmp[32];
            size_t k = n - 3 < sizeof(tmp) - 1 ? n - 3 : sizeof(tmp) - 1;
            memcpy(tmp, b + 3, k);
            tmp[k] = '\0';
            char *end;
            unsigned long long v = strtoull(tmp, &end, 10);
            x->has_vt = end != tmp;
            x->vt_s = (double)v / 1e9;
            continue;
        }
        if (n < 5 || memcmp(b, "data:", 5) != 0) {
            continue;
        }
        b += 5;
        n -= 5;
        while (n > 0 && *b == ' ') {
            b++;
            n--;
        }
        if (n == 6 && memcmp(b, "[DONE]", 6) == 0) {
            continue;
        }
        stream_event(x, b, n);
    }
}

/* Reads a streamed answer's events as they come, once its status says 2xx. */
static void on_data(void *ud, const struct st_http_resp *resp)
{
    struct xfer *x = ud;
    if (x->stream && resp->status >= 200 && resp->status < 300) {
        stream_lines(x, 0);
    }
}

/* Fills r from a finished answer's body. */
static void parse_reply(const char *p, size_t n, struct st_qual_reply *r)
{
    struct st_json d;
    st_json_init(&d, 0);
    if (st_json_parse(&d, p, n) != 0 || st_json_type(&d, 0) != ST_JSON_OBJECT) {
        if (r->status >= 200 && r->status < 300) {
            snprintf(r->error, sizeof(r->error), "the answer is not a JSON object");
        }
        st_json_release(&d);
        return;
    }
    if (r->status < 200 || r->status >= 300) {
        int e = st_json_get(&d, 0, "error");
        int m = -1;
        if (e >= 0 && st_json_type(&d, e) == ST_JSON_OBJECT) {
            m = st_json_get(&d, e, "message");
        } else if (e >= 0 && st_json_type(&d, e) == ST_JSON_STRING) {
            m = e;
        }
        if (m < 0) {
            m = st_json_get(&d, 0, "message");
        }
        if (m < 0) {
            m = st_json_get(&d, 0, "detail");
        }
        struct st_buf msg;
        st_buf_init(&msg);
        if (m >= 0 && st_json_type(&d, m) == ST_JSON_STRING && st_json_str(&d, m, &msg) == 0) {
            /* One line: a server may echo the whole request over many (llama.cpp b4748). */
            snprintf(r->error, sizeof(r->error), "HTTP %ld: %s", r->status, msg.data);
            st_check_one_line(r->error);
        }
        st_buf_release(&msg);
        st_json_release(&d);
        return;
    }
    int ch = st_json_get(&d, 0, "choices");
    int c0 = ch >= 0 ? st_json_at(&d, ch, 0) : -1;
    int mg = c0 >= 0 ? st_json_get(&d, c0, "message") : -1;
    int ct = mg >= 0 ? st_json_get(&d, mg, "content") : -1;
    if (ct >= 0 && st_json_type(&d, ct) == ST_JSON_STRING) {
        if (st_json_str(&d, ct, &r->content) != 0) {
            snprintf(r->error, sizeof(r->error), "bad content string");
        }
    } else if (c0 < 0) {
        snprintf(r->error, sizeof(r->error), "the answer has no choices[0]");
    }
    read_finish_usage(&d, c0, r);
    st_json_release(&d);
}

/* Fills x's reply from its ended request. */
static void on_done(void *ud, const struct st_http_resp *h)
{
    struct xfer *x = ud;
    struct st_qual_reply *r = x->r;
    r->elapsed_s = since(x);
    r->status = h->status;
    if (h->error_kind[0] != '\0') {
        snprintf(r->error, sizeof(r->error), "%s", h->error_kind);
        return;
    }
    if (x->stream && r->status >= 200 && r->status < 300) {
        stream_lines(x, 1);
        r->streamed = 1;
    } else {
        parse_reply(h->body.data != NULL ? h->body.data : "", h->body.len, r);
    }
    if ((r->status < 200 || r->status >= 300) && r->error[0] == '\0') {
        char sn[160];
        size_t k = 0;
        for (size_t j = 0; j < h->body.len && k + 1 < sizeof(sn); j++) {
            unsigned char ch = (unsigned char)h->body.data[j];
            sn[k++] = ch >= 0x20 && ch < 0x7f ? (char)ch : ' ';
        }
        sn[k] = '\0';
        snprintf(r->error, sizeof(r->error), "HTTP %ld: %s", r->status, sn);
    }
}

/* Sets x up for step s of c: its body, headers and request *q (answered into *resp). */
static void setup(const struct st_qual_client *c, const struct st_check_step *s, const char *id,
                  struct xfer *x, struct st_http_req *q, struct st_http_resp *resp)
{
    x->resp = resp;
    st_buf_init(&x->body);
    st_buf_init(&x->hid);
    st_buf_init(&x->hexpect);
    st_http_resp_init(resp, MAX_REPLY_BYTES);
    st_qual_body(c, s, !c->no_response_format, &x->body);
    x->stream = s->ignore_eos;
    x->scanned = 0;
    size_t nh = 0;
    if (id != NULL) {
        st_buf_printf(&x->hid, "X-Request-Id: %s", id);
        x->hdrs[nh++] = x->hid.data;
    }
    if (c->sim && s->expect.len > 0 && s->expect.len <= 4096) {
        st_buf_printf(&x->hexpect, "X-Servetune-Expect: %s", s->expect.data);
        x->hdrs[nh++] = x->hexpect.data;
    }
    x->hdrs[nh] = NULL;
    *q = (struct st_http_req){.method = "POST",
                              .body = x->body.data,
                              .body_len = x->body.len,
                              .api_key = c->api_key,
                              .headers = x->hdrs,
                              .timeout_ms = c->timeout_ms ? c->timeout_ms : 600000,
                              .connect_timeout_ms = 5000,
                              .on_data = on_data,
                              .on_done = on_done,
                              .ud = x};
    x->t0_ns = st_clock_mono_ns();
}

int st_qual_send(const struct st_qual_client *c, const struct st_check_step *const *steps,
                 const char *const *ids, size_t n, struct st_qual_reply *replies)
{
    struct xfer *xs = st_xcalloc(n ? n : 1, sizeof(*xs));
    struct st_http_req *qs = st_xcalloc(n ? n : 1, sizeof(*qs));
    struct st_http_resp *rs = st_xcalloc(n ? n : 1, sizeof(*rs));
    struct st_buf url;
    st_buf_init(&url);
    st_buf_printf(&url, "%s/v1/chat/completions", c->base_url);
    for (size_t i = 0; i < n; i++) {
        setup(c, steps[i], ids != NULL ? ids[i] : NULL, &xs[i], &qs[i], &rs[i]);
        xs[i].r = &replies[i];
        qs[i].url = url.data;
    }
    int rc = st_http_many(qs, rs, n);
    for (size_t i = 0; i < n; i++) {
        st_http_resp_release(&rs[i]);
        st_buf_release(&xs[i].body);
        st_buf_release(&xs[i].hid);
        st_buf_release(&xs[i].hexpect);
    }
    st_buf_release(&url);
    free(rs);
    free(qs);
    free(xs);
    return rc;
}
/* ---- video ---- */

struct frame_ctx {
    const char *dir;
    char err[128];
};

static int write_frame(void *ud, uint32_t idx, const struct st_buf *png)
{
    struct frame_ctx *f = ud;
    char name[64];
    char path[1024];
    if (st_render_frame_name(idx, name, sizeof(name)) != 0) {
        return -ENAMETOOLONG;
    }
    snprintf(path, sizeof(path), "%s/%s", f->dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        return -errno;
    }
    size_t off = 0;
    while (off < png->len) {
        ssize_t w = write(fd, png->data + off, png->len - off);
        if (w < 0) {
            int e = -errno;
            close(fd);
            return e;
        }
        off += (size_t)w;
    }
    close(fd);
    return 0;
}

static void remove_dir(const char *dir, uint32_t nframes)
{
    char name[64];
    char path[1024];
    for (uint32_t i = 0; i < nframes; i++) {
        if (st_render_frame_name(i, name, sizeof(name)) == 0) {
            snprintf(path, sizeof(path), "%s/%s", dir, name);
            unlink(path);
        }
    }
    snprintf(path, sizeof(path), "%s/out.mp4", dir);
    unlink(path);
    rmdir(dir);
}

/* Runs ffmpeg with stdin and stdout on /dev/null, stderr the caller's. Returns 0 when it exited
 * 0, ST_ETIMEOUT when it outlived FFMPEG_TIMEOUT_S (its group then got SIGTERM, and SIGKILL
 * FFMPEG_GRACE_S later), ST_ESERVER for another end, or st_proc_run's errno. */
static int run_argv(char *const *argv, char *err, size_t errlen)
{
    struct st_proc_opts o = {.argv = (const char *const *)argv,
                             .std = {{.kind = ST_PROC_FD_NULL}, {.kind = ST_PROC_FD_NULL}}};
    struct st_proc_run r;
    st_proc_run_init(&r, FFMPEG_TIMEOUT_S * ST_NS_PER_S, FFMPEG_GRACE_S * ST_NS_PER_S, 0, 0);
    int rc = st_proc_run(&o, &r, err, errlen);
    if (rc == 0) {
        rc = r.timed_out ? ST_ETIMEOUT : r.status == 0 ? 0 : ST_ESERVER;
    }
    st_proc_run_release(&r);
    return rc;
}

int st_qual_video_mp4(const char *ffmpeg, uint64_t seed, const char *font, struct st_buf *out,
                      char *err, size_t errlen)
{
    if (access(ffmpeg, X_OK) != 0) {
        snprintf(err, errlen, "%s is not there", ffmpeg);
        return ST_ENOTFOUND;
    }
    const char *tmp = getenv("TMPDIR");
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/st-video-XXXXXX", tmp != NULL && tmp[0] ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
        snprintf(err, errlen, "mkdtemp: %s", strerror(errno));
        return -errno;
    }
    struct st_render *rd = NULL;
    int rc = st_render_new(font, &rd, err, errlen);
    struct st_render_video_spec spec = {.seed = seed};
    struct st_render_video_truth truth;
    memset(&truth, 0, sizeof(truth));
    struct frame_ctx fc = {.dir = dir};
    if (rc == 0) {
        rc = st_render_video_frames(rd, &spec, write_frame, &fc, &truth);
        if (rc != 0) {
            snprintf(err, errlen, "rendering frames: %s", st_strerror(rc));
        }
    }
    st_render_free(rd);
    char outp[600];
    snprintf(outp, sizeof(outp), "%s/out.mp4", dir);
    struct st_render_argv av;
    memset(&av, 0, sizeof(av));
    if (rc == 0) {
        rc = st_render_ffmpeg_argv(ffmpeg, dir, truth.fps, outp, &av);
        if (rc != 0) {
            snprintf(err, errlen, "ffmpeg argv: %s", st_strerror(rc));
        }
    }
    if (rc == 0) {
        char why[256] = "";
        rc = run_argv(av.argv, why, sizeof(why));
        if (rc == ST_ETIMEOUT) {
            snprintf(err, errlen, "ffmpeg did not finish within %d s (killed)", FFMPEG_TIMEOUT_S);
        } else if (rc != 0) {
            snprintf(err, errlen, "ffmpeg failed (%s)", why[0] ? why : st_strerror(rc));
        }
        st_render_argv_release(&av);
    }
    if (rc == 0) {
        FILE *f = fopen(outp, "rbe");
        if (f == NULL) {
            rc = -errno;
            snprintf(err, errlen, "%s: %s", outp, strerror(errno));
        } else {
            char b[65536];
            size_t k;
            while ((k = fread(b, 1, sizeof(b), f)) > 0) {
                st_buf_append(out, b, k);
            }
            fclose(f);
        }
    }
    remove_dir(dir, truth.nframes);
    return rc;
}
