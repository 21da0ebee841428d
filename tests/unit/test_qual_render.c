/*
 * Tests for src/qual/render.c: byte-identical PNGs for one seed (twice, across font handles and
 * with fontconfig pointed at nothing), different bytes for other seeds, the PNG signature and
 * IHDR sizes, the OCR truth checked against the decoded pixels (ink inside each box and nowhere
 * else), the cards and video truth and their frames, the ffmpeg argv, base64 vectors from RFC
 * 4648 and data URLs. Uses the font from fonts-dejavu-core (scripts/deps.sh installs it).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cairo.h>

#include "base/buf.h"
#include "base/hash.h"
#include "qual/render.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static struct st_render *open_font(const char *path)
{
    struct st_render *r = NULL;
    char err[256];
    int rc = st_render_new(path, &r, err, sizeof(err));
    if (rc != 0) {
        fail_msg("st_render_new: %d %s", rc, err);
    }
    return r;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* PNG signature, then IHDR first with the given size, 8-bit RGB. */
static void check_png(const struct st_buf *png, uint32_t w, uint32_t h)
{
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    const unsigned char *p = (const unsigned char *)png->data;
    assert_true(png->len > 33);
    assert_memory_equal(p, sig, 8);
    assert_int_equal(be32(p + 8), 13);
    assert_memory_equal(p + 12, "IHDR", 4);
    assert_int_equal(be32(p + 16), w);
    assert_int_equal(be32(p + 20), h);
    assert_int_equal(p[24], 8); /* bit depth */
    assert_int_equal(p[25], 2); /* color type: RGB */
}

struct reader {
    const struct st_buf *b;
    size_t off;
};

static cairo_status_t read_png(void *closure, unsigned char *data, unsigned int len)
{
    struct reader *rd = closure;
    if (rd->b->len - rd->off < len) {
        return CAIRO_STATUS_READ_ERROR;
    }
    memcpy(data, rd->b->data + rd->off, len);
    rd->off += len;
    return CAIRO_STATUS_SUCCESS;
}

static cairo_surface_t *decode(const struct st_buf *png)
{
    struct reader rd = {png, 0};
    cairo_surface_t *s = cairo_image_surface_create_from_png_stream(read_png, &rd);
    assert_int_equal(cairo_surface_status(s), CAIRO_STATUS_SUCCESS);
    cairo_surface_flush(s);
    return s;
}

static uint32_t pixel(cairo_surface_t *s, int x, int y)
{
    const unsigned char *d = cairo_image_surface_get_data(s);
    int stride = cairo_image_surface_get_stride(s);
    uint32_t v;
    memcpy(&v, d + (size_t)y * (size_t)stride + (size_t)x * 4, 4);
    return v & 0xffffff;
}

/* ---- OCR ---- */

static void test_ocr_same_seed_same_bytes(void **state)
{
    (void)state;
    if (getenv("ST_UNDER_VALGRIND")) {
        skip(); /* cairo rendering of full-size images: minutes under valgrind */
    }
    struct st_render *r1 = open_font(NULL), *r2 = open_font(NULL);
    struct st_render_ocr_spec spec = {.seed = 2026};
    struct st_render_ocr a, b, c;
    assert_int_equal(st_render_ocr(r1, &spec, &a), 0);
    assert_int_equal(st_render_ocr(r1, &spec, &b), 0);
    assert_int_equal(a.png.len, b.png.len);
    assert_memory_equal(a.png.data, b.png.data, a.png.len);
    assert_int_equal(a.nwords, b.nwords);
    assert_memory_equal(a.words, b.words, a.nwords * sizeof(*a.words));
    st_render_ocr_release(&b);
    /* Another font handle, and fontconfig pointed at a file that does not exist. */
    setenv("FONTCONFIG_FILE", "/nonexistent/fonts.conf", 1);
    assert_int_equal(st_render_ocr(r2, &spec, &b), 0);
    unsetenv("FONTCONFIG_FILE");
    assert_int_equal(a.png.len, b.png.len);
    assert_memory_equal(a.png.data, b.png.data, a.png.len);
    st_render_ocr_release(&b);
    /* Other seeds: other bytes and other words. */
    for (uint64_t seed = 1; seed < 4; seed++) {
        spec.seed = 2026 + seed;
        assert_int_equal(st_render_ocr(r1, &spec, &c), 0);
        assert_true(c.png.len != a.png.len || memcmp(c.png.data, a.png.data, a.png.len) != 0);
        int same = 0;
        for (uint32_t i = 0; i < c.nwords; i++) {
            same += strcmp(c.words[i].text, a.words[i].text) == 0 && c.words[i].x == a.words[i].x;
        }
        assert_true(same < (int)c.nwords / 4);
        st_render_ocr_release(&c);
    }
    st_render_ocr_release(&a);
    st_render_free(r1);
    st_render_free(r2);
}

static void test_ocr_header_and_truth(void **state)
{
    (void)state;
    if (getenv("ST_UNDER_VALGRIND")) {
        skip(); /* cairo rendering of full-size images: minutes under valgrind */
    }
    struct st_render *r = open_font(NULL);
    struct st_render_ocr_spec spec = {.seed = 7};
    struct st_render_ocr o;
    assert_int_equal(st_render_ocr(r, &spec, &o), 0);
    assert_int_equal(o.width, 2048);
    assert_int_equal(o.height, 1536);
    assert_int_equal(o.nwords, 40);
    check_png(&o.png, 2048, 1536);
    cairo_surface_t *s = decode(&o.png);
    assert_int_equal(cairo_image_surface_get_width(s), 2048);
    assert_int_equal(cairo_image_surface_get_height(s), 1536);
    /* Mark every box grown by 1 px; outside them the sheet must be pure white. */
    uint8_t *mask = calloc(2048 * 1536, 1);
    assert_non_null(mask);
    for (uint32_t i = 0; i < o.nwords; i++) {
        const struct st_render_word *w = &o.words[i];
        assert_true(strlen(w->text) >= 4);
        assert_true(strspn(w->text, "abcdefghijklmnopqrstuvwxyz") == strlen(w->text));
        assert_in_range(w->size_px, 28, 72);
        assert_true(w->x >= 16 && w->y >= 16 && w->x + w->w <= 2048 - 16 &&
                    w->y + w->h <= 1536 - 16);
        for (uint32_t j = 0; j < i; j++) {
            const struct st_render_word *v = &o.words[j];
            assert_string_not_equal(w->text, v->text);
            int apart = w->x >= v->x + v->w + 16 || v->x >= w->x + w->w + 16 ||
                        w->y >= v->y + v->h + 16 || v->y >= w->y + w->h + 16;
            assert_true(apart);
        }
        /* The truth box is the ink's own bounding box, to the pixel. */
        int x0 = 1 << 30, y0 = 1 << 30, x1 = -1, y1 = -1;
        for (int y = w->y - 1; y <= w->y + w->h; y++) {
            for (int x = w->x - 1; x <= w->x + w->w; x++) {
                mask[(size_t)y * 2048 + (size_t)x] = 1;
                if (pixel(s, x, y) != 0xffffff) {
                    x0 = x < x0 ? x : x0;
                    y0 = y < y0 ? y : y0;
                    x1 = x > x1 ? x : x1;
                    y1 = y > y1 ? y : y1;
                }
            }
        }
        assert_int_equal(x0, w->x);
        assert_int_equal(y0, w->y);
        assert_int_equal(x1 + 1, w->x + w->w);
        assert_int_equal(y1 + 1, w->y + w->h);
        /* A word this size is taller than a third of its pixel size and wider than tall / 2. */
        assert_true(w->h > (int32_t)w->size_px / 3 && w->w > w->h / 2);
    }
    for (int y = 0; y < 1536; y++) {
        for (int x = 0; x < 2048; x++) {
            if (!mask[(size_t)y * 2048 + (size_t)x] && pixel(s, x, y) != 0xffffff) {
                fail_msg("ink outside every box at %d,%d", x, y);
            }
        }
    }
    free(mask);
    cairo_surface_destroy(s);
    st_render_ocr_release(&o);
    st_render_free(r);
}

static void test_ocr_spec(void **state)
{
    (void)state;
    struct st_render *r = open_font(NULL);
    struct st_render_ocr o;
    struct st_render_ocr_spec bad[] = {
        {.width = 100},
        {.height = 5000},
        {.nwords = ST_RENDER_MAX_WORDS + 1},
        {.min_px = 80, .max_px = 40},
        {.max_px = 300},
    };
    for (size_t i = 0; i < COUNT(bad); i++) {
        assert_int_equal(st_render_ocr(r, &bad[i], &o), -EINVAL);
        assert_null(o.words);
        st_render_ocr_release(&o);
    }
    /* Too many big words for a small sheet: a clean refusal, nothing left allocated. */
    struct st_render_ocr_spec crowded = {
        .seed = 1, .width = 256, .height = 256, .nwords = 100, .min_px = 60, .max_px = 80};
    assert_int_equal(st_render_ocr(r, &crowded, &o), ST_ETOOBIG);
    assert_null(o.words);
    assert_int_equal(o.png.len, 0);
    /* A small custom sheet. */
    struct st_render_ocr_spec small = {
        .seed = 3, .width = 640, .height = 480, .nwords = 5, .min_px = 20, .max_px = 30};
    assert_int_equal(st_render_ocr(r, &small, &o), 0);
    assert_int_equal(o.nwords, 5);
    check_png(&o.png, 640, 480);
    st_render_ocr_release(&o);
    st_render_free(r);
}

/* ---- cards ---- */

static void test_cards(void **state)
{
    (void)state;
    if (getenv("ST_UNDER_VALGRIND")) {
        skip(); /* cairo rendering of full-size images: minutes under valgrind */
    }
    struct st_render *r = open_font(NULL);
    struct st_render_cards_spec spec = {.seed = 11, .count = 12};
    struct st_render_cards a, b;
    assert_int_equal(st_render_cards(r, &spec, &a), 0);
    assert_int_equal(st_render_cards(r, &spec, &b), 0);
    assert_int_equal(a.n, 12);
    for (uint32_t i = 0; i < a.n; i++) {
        const struct st_render_card *c = &a.cards[i];
        check_png(&c->png, 512, 384);
        assert_int_equal(c->png.len, b.cards[i].png.len);
        assert_memory_equal(c->png.data, b.cards[i].png.data, c->png.len);
        assert_string_equal(c->label, b.cards[i].label);
        assert_int_equal(c->kind, (a.cards[0].kind + i) % 4);
        assert_true(c->describe[0] != '\0');
        for (uint32_t j = 0; j < i; j++) {
            assert_string_not_equal(c->label, a.cards[j].label);
        }
        cairo_surface_t *s = decode(&c->png);
        uint32_t center = pixel(s, 256, 192);
        switch (c->kind) {
        case ST_RENDER_CARD_DIGIT:
            assert_true(strlen(c->label) == 1 && c->label[0] >= '0' && c->label[0] <= '9');
            assert_non_null(strstr(c->describe, "digit"));
            break;
        case ST_RENDER_CARD_LETTER:
            assert_true(strlen(c->label) == 1 && c->label[0] >= 'A' && c->label[0] <= 'Z');
            assert_true(c->label[0] != 'I' && c->label[0] != 'O');
            break;
        case ST_RENDER_CARD_SHAPE: {
            /* The shape covers the center in its named color. */
            static const struct {
                const char *name;
                double r, g, b;
            } want[] = {{"red", 0.86, 0.08, 0.08},    {"green", 0.08, 0.58, 0.16},
                        {"blue", 0.10, 0.25, 0.88},   {"yellow", 0.96, 0.80, 0.02},
                        {"orange", 0.98, 0.50, 0.02}, {"purple", 0.52, 0.14, 0.70}};
            int found = 0;
            for (size_t k = 0; k < COUNT(want); k++) {
                if (strcmp(want[k].name, c->color) == 0) {
                    found = 1;
                    assert_in_range(center >> 16, want[k].r * 255 - 1, want[k].r * 255 + 1);
                    assert_in_range((center >> 8) & 255, want[k].g * 255 - 1, want[k].g * 255 + 1);
                    assert_in_range(center & 255, want[k].b * 255 - 1, want[k].b * 255 + 1);
                }
            }
            assert_true(found);
            assert_true(c->shape[0] != '\0');
            assert_non_null(strstr(c->label, c->shape));
            break;
        }
        case ST_RENDER_CARD_WORD:
            assert_true(strlen(c->label) >= 4);
            break;
        }
        cairo_surface_destroy(s);
    }
    st_render_cards_release(&b);
    spec.seed = 12;
    assert_int_equal(st_render_cards(r, &spec, &b), 0);
    int same = 0;
    for (uint32_t i = 0; i < a.n; i++) {
        same += a.cards[i].png.len == b.cards[i].png.len &&
                memcmp(a.cards[i].png.data, b.cards[i].png.data, a.cards[i].png.len) == 0;
    }
    assert_true(same < (int)a.n);
    st_render_cards_release(&b);
    st_render_cards_release(&a);
    struct st_render_cards_spec bad = {.count = ST_RENDER_MAX_CARDS + 1};
    assert_int_equal(st_render_cards(r, &bad, &a), -EINVAL);
    bad.count = 0;
    assert_int_equal(st_render_cards(r, &bad, &a), -EINVAL);
    st_render_free(r);
}

/* ---- video ---- */

static void test_video_truth(void **state)
{
    (void)state;
    struct st_render_video_spec spec = {.seed = 5};
    struct st_render_video_truth t, u;
    assert_int_equal(st_render_video_truth(&spec, &t), 0);
    assert_int_equal(t.nframes, 120);
    assert_int_equal(t.nsegments, 12);
    assert_int_equal(t.fps, 1);
    assert_int_equal(t.segment_s, 10);
    assert_int_equal(strlen(t.symbols), 12);
    for (uint32_t i = 0; i < t.nsegments; i++) {
        assert_true(t.symbols[i] >= 'A' && t.symbols[i] <= 'Z');
        assert_true(i == 0 || t.symbols[i] != t.symbols[i - 1]);
    }
    assert_int_equal(st_render_video_truth(&spec, &u), 0);
    assert_memory_equal(&t, &u, sizeof(t));
    spec.seed = 6;
    assert_int_equal(st_render_video_truth(&spec, &u), 0);
    assert_string_not_equal(t.symbols, u.symbols);
    /* 7 s segments over 20 s: three segments, the last one short. */
    struct st_render_video_spec odd = {.seed = 1, .duration_s = 20, .fps = 2, .segment_s = 7};
    assert_int_equal(st_render_video_truth(&odd, &u), 0);
    assert_int_equal(u.nframes, 40);
    assert_int_equal(u.nsegments, 3);
    /* A clip shorter than the default segment is one segment. */
    struct st_render_video_spec shortclip = {.seed = 1, .duration_s = 4};
    assert_int_equal(st_render_video_truth(&shortclip, &u), 0);
    assert_int_equal(u.nframes, 4);
    assert_int_equal(u.nsegments, 1);
    struct st_render_video_spec bad[] = {
        {.fps = 31},
        {.duration_s = 601},
        {.width = 321},
        {.height = 4098},
        {.duration_s = 10, .segment_s = 11},
        {.duration_s = 600, .fps = 30},
    };
    for (size_t i = 0; i < COUNT(bad); i++) {
        assert_int_equal(st_render_video_truth(&bad[i], &u), -EINVAL);
    }
}

struct collect {
    uint32_t calls;
    uint64_t hash[ST_RENDER_MAX_FRAMES];
    struct st_buf frame37;
    uint32_t stop_at; /* 0: never */
};

static int collect_cb(void *ud, uint32_t idx, const struct st_buf *png)
{
    struct collect *c = ud;
    assert_int_equal(idx, c->calls);
    check_png(png, 320, 240);
    c->hash[idx] = st_hash64(png->data, png->len);
    if (idx == 37) {
        st_buf_append(&c->frame37, png->data, png->len);
    }
    c->calls++;
    return c->stop_at && c->calls == c->stop_at ? -ECANCELED : 0;
}

static void test_video_frames(void **state)
{
    (void)state;
    if (getenv("ST_UNDER_VALGRIND")) {
        skip(); /* cairo rendering of full-size images: minutes under valgrind */
    }
    struct st_render *r = open_font(NULL);
    struct st_render_video_spec spec = {.seed = 9};
    struct collect *c = calloc(1, sizeof(*c));
    assert_non_null(c);
    st_buf_init(&c->frame37);
    struct st_render_video_truth t;
    assert_int_equal(st_render_video_frames(r, &spec, collect_cb, c, &t), 0);
    assert_int_equal(c->calls, 120);
    assert_int_equal(t.nframes, 120);
    /* Every frame differs from the next: its number changes. */
    for (uint32_t i = 1; i < 120; i++) {
        assert_true(c->hash[i] != c->hash[i - 1]);
    }
    /* Random access gives the same bytes as the sequence. */
    struct st_buf png;
    st_buf_init(&png);
    assert_int_equal(st_render_video_frame(r, &spec, 37, &png), 0);
    assert_int_equal(png.len, c->frame37.len);
    assert_memory_equal(png.data, c->frame37.data, png.len);
    st_buf_clear(&png);
    assert_int_equal(st_render_video_frame(r, &spec, 120, &png), -EINVAL);
    st_buf_release(&png);
    /* A second run is byte-identical, frame by frame. */
    uint64_t first[120];
    memcpy(first, c->hash, sizeof(first));
    c->calls = 0;
    assert_int_equal(st_render_video_frames(r, &spec, collect_cb, c, NULL), 0);
    assert_memory_equal(first, c->hash, sizeof(first));
    /* The callback stops the run with its own code. */
    c->calls = 0;
    c->stop_at = 3;
    assert_int_equal(st_render_video_frames(r, &spec, collect_cb, c, NULL), -ECANCELED);
    assert_int_equal(c->calls, 3);
    st_buf_release(&c->frame37);
    free(c);
    st_render_free(r);
}

static void test_ffmpeg_argv(void **state)
{
    (void)state;
    static const char *const want[] = {
        "ffmpeg",
        "-nostdin",
        "-hide_banner",
        "-loglevel",
        "error",
        "-y",
        "-f",
        "image2",
        "-start_number",
        "0",
        "-framerate",
        "2",
        "-i",
        "file:/tmp/fr dir/frame_%05d.png",
        "-map_metadata",
        "-1",
        "-an",
        "-c:v",
        "libx264",
        "-preset",
        "medium",
        "-crf",
        "18",
        "-pix_fmt",
        "yuv420p",
        "-threads",
        "1",
        "-fflags",
        "+bitexact",
        "-flags:v",
        "+bitexact",
        "-movflags",
        "+faststart",
        "-f",
        "mp4",
        "-r",
        "2",
        "file:out:1.mp4",
    };
    struct st_render_argv a;
    assert_int_equal(st_render_ffmpeg_argv("ffmpeg", "/tmp/fr dir", 2, "out:1.mp4", &a), 0);
    assert_int_equal(a.argc, (int)COUNT(want));
    for (size_t i = 0; i < COUNT(want); i++) {
        assert_string_equal(a.argv[i], want[i]);
    }
    assert_null(a.argv[a.argc]);
    st_render_argv_release(&a);
    assert_int_equal(a.argc, 0);
    assert_int_equal(st_render_ffmpeg_argv("/usr/bin/ffmpeg", "frames/", 1, "-x.mp4", &a), 0);
    assert_string_equal(a.argv[13], "file:frames/frame_%05d.png");
    assert_string_equal(a.argv[a.argc - 1], "file:-x.mp4");
    st_render_argv_release(&a);
    assert_int_equal(st_render_ffmpeg_argv("ffmpeg", "a%d", 1, "o.mp4", &a), -EINVAL);
    assert_int_equal(st_render_ffmpeg_argv("ffmpeg", "d", 0, "o.mp4", &a), -EINVAL);
    assert_int_equal(st_render_ffmpeg_argv("ffmpeg", "d", 31, "o.mp4", &a), -EINVAL);
    assert_int_equal(st_render_ffmpeg_argv("ffmpeg", "", 1, "o.mp4", &a), -EINVAL);
    assert_int_equal(st_render_ffmpeg_argv("ffmpeg", "d", 1, "", &a), -EINVAL);
    assert_int_equal(st_render_ffmpeg_argv("", "d", 1, "o.mp4", &a), -EINVAL);
    assert_int_equal(a.argc, 0);
    char name[32];
    assert_int_equal(st_render_frame_name(37, name, sizeof(name)), 0);
    assert_string_equal(name, "frame_00037.png");
    assert_int_equal(st_render_frame_name(37, name, 8), -ENAMETOOLONG);
}

/* ---- encodings ---- */

static void test_base64(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } rfc[] = {{"", ""},
               {"f", "Zg=="},
               {"fo", "Zm8="},
               {"foo", "Zm9v"},
               {"foob", "Zm9vYg=="},
               {"fooba", "Zm9vYmE="},
               {"foobar", "Zm9vYmFy"}};
    struct st_buf b;
    st_buf_init(&b);
    for (size_t i = 0; i < COUNT(rfc); i++) {
        st_buf_clear(&b);
        st_render_base64(rfc[i].in, strlen(rfc[i].in), &b);
        assert_string_equal(st_buf_str(&b), rfc[i].out);
    }
    unsigned char all[256];
    for (int i = 0; i < 256; i++) {
        all[i] = (unsigned char)(255 - i);
    }
    st_buf_clear(&b);
    st_render_base64(all, 3, &b);
    assert_string_equal(st_buf_str(&b), "//79");
    st_buf_clear(&b);
    st_render_base64(all, sizeof(all), &b);
    assert_int_equal(b.len, 344);
    assert_int_equal(
        strspn(b.data, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"), 342);
    assert_string_equal(b.data + 342, "==");
    /* Appends: what was in the buffer stays. */
    st_buf_clear(&b);
    st_buf_puts(&b, "x");
    st_render_base64("foo", 3, &b);
    assert_string_equal(st_buf_str(&b), "xZm9v");
    st_buf_release(&b);
}

static void test_data_url(void **state)
{
    (void)state;
    struct st_render *r = open_font(NULL);
    struct st_render_cards_spec spec = {.seed = 1, .count = 1, .width = 64, .height = 64};
    struct st_render_cards c;
    assert_int_equal(st_render_cards(r, &spec, &c), 0);
    struct st_buf url;
    st_buf_init(&url);
    st_render_data_url("image/png", c.cards[0].png.data, c.cards[0].png.len, &url);
    /* The PNG signature in base64. */
    assert_true(strncmp(st_buf_str(&url), "data:image/png;base64,iVBORw0KGgo", 33) == 0);
    assert_int_equal(url.len, strlen("data:image/png;base64,") + (c.cards[0].png.len + 2) / 3 * 4);
    st_buf_release(&url);
    st_render_cards_release(&c);
    st_render_free(r);
}

static void test_fonts(void **state)
{
    (void)state;
    struct st_render *r = NULL;
    char err[256] = "";
    assert_int_equal(st_render_new("/nonexistent/font.ttf", &r, err, sizeof(err)), ST_ENOTFOUND);
    assert_null(r);
    assert_non_null(strstr(err, "/nonexistent/font.ttf"));
    assert_int_equal(st_render_new("/etc/passwd", &r, NULL, 0), ST_ENOTFOUND);
    st_render_free(NULL);
    /* Another font of the same package draws other bytes: the file given is the one used. */
    struct st_render *sans = open_font(NULL);
    struct st_render *mono = open_font("/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf");
    struct st_render_video_spec spec = {.seed = 1};
    struct st_buf a, b;
    st_buf_init(&a);
    st_buf_init(&b);
    assert_int_equal(st_render_video_frame(sans, &spec, 0, &a), 0);
    assert_int_equal(st_render_video_frame(mono, &spec, 0, &b), 0);
    assert_true(a.len != b.len || memcmp(a.data, b.data, a.len) != 0);
    st_buf_release(&a);
    st_buf_release(&b);
    /* Freeing the handle while cairo may still cache its face is safe; a new one works. */
    st_render_free(mono);
    st_render_free(sans);
    sans = open_font(NULL);
    st_buf_init(&a);
    assert_int_equal(st_render_video_frame(sans, &spec, 1, &a), 0);
    st_buf_release(&a);
    st_render_free(sans);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ocr_same_seed_same_bytes),
        cmocka_unit_test(test_ocr_header_and_truth),
        cmocka_unit_test(test_ocr_spec),
        cmocka_unit_test(test_cards),
        cmocka_unit_test(test_video_truth),
        cmocka_unit_test(test_video_frames),
        cmocka_unit_test(test_ffmpeg_argv),
        cmocka_unit_test(test_base64),
        cmocka_unit_test(test_data_url),
        cmocka_unit_test(test_fonts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
