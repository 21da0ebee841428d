/*
 * Model-mode prompt rendering: chat template, media placeholders, image headers, base64 and the
 * simulator's token ids. See prompt.h for the rules. Pure.
 */
#include "sim/prompt.h"

#include <string.h>

#include "base/hash.h"
#include "base/rng.h"
#include "sim/model/tok.h"

/* Bytes of base64 decoded to look for a PNG header (8 signature + 8 chunk head + 8 size). */
#define PNG_HEAD_BYTES 33u

void st_sim_prompt_init(struct st_sim_prompt *p)
{
    memset(p, 0, sizeof(*p));
    st_buf_init(&p->text);
}

void st_sim_prompt_release(struct st_sim_prompt *p)
{
    st_buf_release(&p->text);
}

/* Every count zero and the text empty (its buffer kept). */
static void reset(struct st_sim_prompt *p)
{
    struct st_buf text = p->text;
    st_buf_clear(&text);
    *p = (struct st_sim_prompt){.text = text};
}

static int fail(char *err, size_t errlen, const char *msg)
{
    if (err && errlen) {
        size_t n = strlen(msg);
        n = n < errlen - 1 ? n : errlen - 1;
        memcpy(err, msg, n);
        err[n] = '\0';
    }
    return ST_EPARSE;
}

size_t st_sim_cp_len(const unsigned char *s, size_t n)
{
    size_t want = 1;
    if (s[0] >= 0xC2 && s[0] <= 0xDF) {
        want = 2;
    } else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
        want = 3;
    } else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
        want = 4;
    }
    if (want == 1 || want > n || !st_utf8_valid((const char *)s, want)) {
        return 1;
    }
    return want;
}

/* ---- base64 and image headers ---- */

static int b64_value(unsigned char c)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *at = c ? strchr(alphabet, c) : NULL;
    return at ? (int)(at - alphabet) : -1;
}

int st_sim_base64_decode(const char *in, size_t n, size_t max_out, struct st_buf *out)
{
    while (n > 0 && in[n - 1] == '=') {
        n--;
    }
    if (n % 4 == 1) {
        return ST_EPARSE;
    }
    uint32_t acc = 0;
    unsigned bits = 0;
    size_t written = 0;
    for (size_t i = 0; i < n && written < max_out; i++) {
        int v = b64_value((unsigned char)in[i]);
        if (v < 0) {
            return ST_EPARSE;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            st_buf_putc(out, (char)((acc >> bits) & 0xFF));
            written++;
        }
    }
    return 0;
}

static uint32_t be32(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static uint32_t be16(const unsigned char *b)
{
    return (uint32_t)b[0] << 8 | b[1];
}

int st_sim_png_size(const unsigned char *b, size_t n, uint32_t *w, uint32_t *h)
{
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    if (n < 24 || memcmp(b, sig, 8) != 0 || be32(b + 8) != 13 || memcmp(b + 12, "IHDR", 4) != 0) {
        return ST_EPARSE;
    }
    uint32_t width = be32(b + 16), height = be32(b + 20);
    /* PNG limits both to 2^31 - 1 and forbids 0. */
    if (width == 0 || height == 0 || width > 0x7FFFFFFFu || height > 0x7FFFFFFFu) {
        return ST_EPARSE;
    }
    *w = width;
    *h = height;
    return 0;
}

/* SOF markers carry the frame size; C4 (DHT), C8 (JPG) and CC (DAC) share the range but don't. */
static int is_sof(unsigned char m)
{
    return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
}

int st_sim_jpeg_size(const unsigned char *b, size_t n, uint32_t *w, uint32_t *h)
{
    if (n < 4 || b[0] != 0xFF || b[1] != 0xD8) {
        return ST_EPARSE;
    }
    size_t i = 2;
    while (i + 4 <= n) {
        if (b[i] != 0xFF) {
            return ST_EPARSE;
        }
        unsigned char m = b[i + 1];
        if (m == 0xFF) {
            i++; /* fill byte */
            continue;
        }
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD9)) {
            i += 2; /* a marker without a length */
            continue;
        }
        uint32_t len = be16(b + i + 2);
        if (len < 2) {
            return ST_EPARSE;
        }
        if (is_sof(m)) {
            if (i + 9 > n || len < 7) {
                return ST_EPARSE;
            }
            uint32_t height = be16(b + i + 5), width = be16(b + i + 7);
            if (width == 0 || height == 0) {
                return ST_EPARSE;
            }
            *w = width;
            *h = height;
            return 0;
        }
        i += 2 + len;
    }
    return ST_EPARSE;
}

int st_sim_data_url_image_size(const char *url, size_t n, struct st_buf *scratch, uint32_t *w,
                               uint32_t *h)
{
    if (n < 5 || memcmp(url, "data:", 5) != 0) {
        return ST_EPARSE;
    }
    const char *comma = memchr(url, ',', n);
    if (!comma || comma - url < 12 || memcmp(comma - 7, ";base64", 7) != 0) {
        return ST_EPARSE;
    }
    const char *data = comma + 1;
    size_t dn = n - (size_t)(data - url);
    st_buf_clear(scratch);
    /* A PNG says its size in the first 24 bytes; a JPEG may need the whole file. */
    if (st_sim_base64_decode(data, dn < 64 ? dn : 64, PNG_HEAD_BYTES, scratch) != 0) {
        return ST_EPARSE;
    }
    const unsigned char *b = (const unsigned char *)scratch->data;
    if (scratch->len >= 8 && b[0] == 0x89) {
        return st_sim_png_size(b, scratch->len, w, h);
    }
    st_buf_clear(scratch);
    if (st_sim_base64_decode(data, dn, dn, scratch) != 0) {
        return ST_EPARSE;
    }
    return st_sim_jpeg_size((const unsigned char *)scratch->data, scratch->len, w, h);
}

/* ---- media ---- */

/*
 * Adds tokens of media whose identity is key[0..n): 4 letters a token, from an RNG seeded by the
 * key's hash, so equal media give equal text. Past o->max_text_tokens only the count grows.
 */
static void add_media(struct st_sim_prompt *p, const struct st_sim_prompt_opts *o, const char *key,
                      size_t n, uint64_t tokens)
{
    p->media_tokens += tokens;
    uint64_t now = st_tok_count(p->text.data ? p->text.data : "", p->text.len) + p->unexpanded;
    if (now + tokens > o->max_text_tokens) {
        p->unexpanded += tokens;
        return;
    }
    struct st_rng r;
    st_rng_seed(&r, st_hash64(key, n));
    size_t len = (size_t)tokens * 4;
    st_buf_reserve(&p->text, len);
    char *dst = p->text.data + p->text.len;
    for (size_t i = 0; i < len; i++) {
        dst[i] = (char)('a' + st_rng_below(&r, 26));
    }
    p->text.len += len;
    p->text.data[p->text.len] = '\0';
}

/* Appends the URL of an image_url / video_url member (a string, or an object with a string "url")
 * to out, decoded. */
static int media_url(const struct st_json *d, int v, struct st_buf *out)
{
    if (st_json_type(d, v) == ST_JSON_OBJECT) {
        v = st_json_get(d, v, "url");
    }
    if (st_json_type(d, v) != ST_JSON_STRING) {
        return ST_EPARSE;
    }
    return st_json_str(d, v, out);
}

/* An optional integer member of obj in [1, max], or def when absent. */
static int opt_dim(const struct st_json *d, int obj, const char *key, uint32_t def, uint32_t max,
                   uint32_t *out)
{
    int i = st_json_get(d, obj, key);
    if (i < 0 || st_json_type(d, i) == ST_JSON_NULL) {
        *out = def;
        return 0;
    }
    int64_t v;
    if (st_json_i64(d, i, &v) != 0 || v < 1 || v > (int64_t)max) {
        return ST_EPARSE;
    }
    *out = (uint32_t)v;
    return 0;
}

static int add_image(struct st_sim_prompt *p, const struct st_json *d, int part,
                     const struct st_sim_prompt_opts *o, struct st_buf *scratch, char *err,
                     size_t errlen)
{
    uint32_t w, h;
    if (o->patch == 0) {
        p->refused = "image_url";
        return fail(err, errlen, "this model does not accept images (model.vision_patch is 0)");
    }
    struct st_buf url;
    st_buf_init(&url);
    int rc = media_url(d, st_json_get(d, part, "image_url"), &url);
    if (rc != 0) {
        rc = fail(err, errlen, "image_url must be a string or an object with a string url");
    } else if (st_sim_data_url_image_size(url.data, url.len, scratch, &w, &h) != 0) {
        rc = fail(err, errlen,
                  "the simulator reads images from base64 data URLs of PNG or JPEG files only");
    } else {
        p->images++;
        add_media(p, o, url.data, url.len, st_tok_image(w, h, o->patch));
    }
    st_buf_release(&url);
    return rc;
}

static int add_video(struct st_sim_prompt *p, const struct st_json *d, int part,
                     const struct st_sim_prompt_opts *o, char *err, size_t errlen)
{
    uint32_t frames, w, h;
    if (o->patch == 0) {
        p->refused = "video_url";
        return fail(err, errlen, "this model does not accept video (model.vision_patch is 0)");
    }
    int v = st_json_get(d, part, "video_url");
    int obj = st_json_type(d, v) == ST_JSON_OBJECT ? v : -1;
    if (opt_dim(d, obj, "num_frames", ST_SIM_VIDEO_FRAMES, ST_SIM_MEDIA_MAX_FRAMES, &frames) ||
        opt_dim(d, obj, "width", ST_SIM_VIDEO_SIDE, ST_SIM_MEDIA_MAX_SIDE, &w) ||
        opt_dim(d, obj, "height", ST_SIM_VIDEO_SIDE, ST_SIM_MEDIA_MAX_SIDE, &h)) {
        return fail(err, errlen,
                    "video_url num_frames, width and height must be positive integers "
                    "(frames at most 100000, sides at most 65535)");
    }
    struct st_buf url;
    st_buf_init(&url);
    int rc = media_url(d, v, &url);
    if (rc != 0) {
        rc = fail(err, errlen, "video_url must be a string or an object with a string url");
    } else {
        p->videos++;
        add_media(p, o, url.data, url.len, (uint64_t)frames * st_tok_image(w, h, o->patch));
    }
    st_buf_release(&url);
    return rc;
}

/* ---- chat ---- */

/*
 * Appends one message: the template with the content in place, media parts where they sit. The
 * template is rendered around empty content and the content is then written before its final
 * newline, so the text equals st_tok_render_message of the whole content.
 */
static int add_message(struct st_sim_prompt *p, const struct st_json *d, int m,
                       const struct st_sim_prompt_opts *o, struct st_buf *scratch, char *err,
                       size_t errlen)
{
    if (st_json_type(d, m) != ST_JSON_OBJECT) {
        return fail(err, errlen, "messages must be an array of objects");
    }
    int role = st_json_get(d, m, "role");
    st_buf_clear(scratch);
    if (role < 0) {
        st_buf_puts(scratch, "user");
    } else if (st_json_str(d, role, scratch) != 0) {
        return fail(err, errlen, "a message role must be a string");
    }
    /* Render the template around an empty content, then insert the content before its last
     * byte ("\n"), which st_tok_render_message puts after the content. */
    st_tok_render_message(&p->text, scratch->data, scratch->len, "", 0);
    p->text.len--;
    p->text.data[p->text.len] = '\0';
    int c = st_json_get(d, m, "content");
    enum st_json_type t = st_json_type(d, c);
    int rc = 0;
    if (t == ST_JSON_STRING) {
        rc = st_json_str(d, c, &p->text);
    } else if (t == ST_JSON_ARRAY) {
        for (int part = st_json_first(d, c); part >= 0 && rc == 0;
             part = st_json_next(d, c, part)) {
            int ty = st_json_get(d, part, "type");
            if (st_json_type(d, part) != ST_JSON_OBJECT) {
                return fail(err, errlen, "content parts must be objects");
            }
            if (st_json_streq(d, ty, "text")) {
                int tx = st_json_get(d, part, "text");
                if (st_json_str(d, tx, &p->text) != 0) {
                    return fail(err, errlen, "a text part needs a string text");
                }
            } else if (st_json_streq(d, ty, "image_url")) {
                rc = add_image(p, d, part, o, scratch, err, errlen);
            } else if (st_json_streq(d, ty, "video_url")) {
                rc = add_video(p, d, part, o, err, errlen);
            }
            /* Other part types (audio, tool results) count nothing. */
        }
    } else if (c >= 0 && t != ST_JSON_NULL) {
        return fail(err, errlen, "a message content must be a string, an array or null");
    }
    if (rc != 0) {
        return rc;
    }
    st_buf_putc(&p->text, '\n');
    return 0;
}

int st_sim_prompt_chat(struct st_sim_prompt *p, const struct st_json *d, int msgs,
                       const struct st_sim_prompt_opts *o, struct st_buf *scratch, char *err,
                       size_t errlen)
{
    reset(p);
    if (st_json_type(d, msgs) != ST_JSON_ARRAY) {
        return fail(err, errlen, "messages must be an array of objects");
    }
    for (int m = st_json_first(d, msgs); m >= 0; m = st_json_next(d, msgs, m)) {
        int rc = add_message(p, d, m, o, scratch, err, errlen);
        if (rc != 0) {
            return rc;
        }
    }
    if (o->generation_prompt) {
        st_tok_render_generation_prompt(&p->text);
    }
    p->tokens = st_tok_count(p->text.data ? p->text.data : "", p->text.len) + p->unexpanded;
    return 0;
}

/* ---- completions ---- */

int st_sim_prompt_completion(struct st_sim_prompt *p, const struct st_json *d, int pr,
                             struct st_buf *scratch, char *err, size_t errlen)
{
    (void)scratch;
    reset(p);
    if (st_json_type(d, pr) == ST_JSON_STRING) {
        if (st_json_str(d, pr, &p->text) != 0) {
            return fail(err, errlen, "prompt must be a string or an array of token ids");
        }
    } else if (st_json_type(d, pr) == ST_JSON_ARRAY) {
        for (int e = st_json_first(d, pr); e >= 0; e = st_json_next(d, pr, e)) {
            int64_t v;
            if (st_json_i64(d, e, &v) != 0 || v < 0 || v > (int64_t)UINT32_MAX) {
                return fail(err, errlen, "prompt must be a string or an array of token ids");
            }
            /* One token: 4 letters, the id in base 26, so equal ids give equal text. */
            uint64_t x = (uint64_t)v;
            char g[4];
            for (int k = 3; k >= 0; k--) {
                g[k] = (char)('a' + x % 26);
                x /= 26;
            }
            st_buf_append(&p->text, g, 4);
        }
    } else {
        return fail(err, errlen, "prompt must be a string or an array of token ids");
    }
    p->tokens = st_tok_count(p->text.data ? p->text.data : "", p->text.len);
    return 0;
}

/* ---- token ids ---- */

uint64_t st_sim_prompt_ids(const char *text, size_t len, uint32_t vocab, uint64_t max_ids,
                           struct st_buf *out)
{
    const unsigned char *s = (const unsigned char *)text;
    uint64_t n = 0;
    size_t i = 0;
    while (i < len) {
        size_t start = i;
        for (int k = 0; k < 4 && i < len; k++) {
            i += st_sim_cp_len(s + i, len - i);
        }
        if (n < max_ids) {
            uint64_t h = st_hash64(s + start, i - start);
            uint64_t id = vocab ? h % vocab : h & 0xFFFFFFFFu;
            st_buf_printf(out, n ? ",%llu" : "%llu", (unsigned long long)id);
        }
        n++;
    }
    return n;
}
