/*
 * Rendered media for the vision checks (see render.h). Every image is drawn on a fresh RGB24
 * cairo surface with the same font options, so nothing but (seed, spec) and the library
 * versions decide the bytes. The seeded choices all come from one st_rng per image, drawn in a
 * fixed order; placement retries are seeded too, so they repeat exactly.
 */
#include "qual/render.h"

#include <errno.h>
#include <stdint.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cairo-ft.h>
#include <cairo.h>
#include <ft2build.h>
#include FT_FREETYPE_H

#include "base/rng.h"
#include "base/xalloc.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

struct st_render {
    cairo_font_face_t *face; /* owned reference; cairo may keep others */
};

/* The FreeType side of a face: freed by cairo when its last reference to the face goes. */
struct ft_pair {
    FT_Library lib;
    FT_Face face;
};

static const cairo_user_data_key_t ft_key;

/* ---- word lists (fixed: the truth depends on them) ---- */

static const char *const ocr_words[] = {
    "anchor", "apple",   "arrow",   "autumn",   "badge",   "bakery",  "balcony",  "bamboo",
    "banner", "barrel",  "basket",  "beacon",   "berry",   "bicycle", "blanket",  "bottle",
    "branch", "bridge",  "bucket",  "butter",   "button",  "cabin",   "cactus",   "camera",
    "candle", "canyon",  "carpet",  "castle",   "cattle",  "cellar",  "cherry",   "chimney",
    "circle", "citrus",  "clock",   "cloud",    "coffee",  "comet",   "copper",   "cotton",
    "crayon", "cricket", "crystal", "curtain",  "dancer",  "desert",  "diamond",  "dolphin",
    "donkey", "dragon",  "drawer",  "eagle",    "engine",  "falcon",  "feather",  "fennel",
    "ferry",  "fiddle",  "finch",   "flame",    "forest",  "fossil",  "fountain", "garden",
    "garlic", "ginger",  "glacier", "glove",    "granite", "grape",   "gravel",   "guitar",
    "hammer", "harbor",  "harvest", "hazel",    "helmet",  "hermit",  "honey",    "horizon",
    "icicle", "island",  "ivory",   "jacket",   "jasmine", "jigsaw",  "jungle",   "kettle",
    "kitten", "ladder",  "lagoon",  "lantern",  "lemon",   "letter",  "lizard",   "lobster",
    "magnet", "mango",   "maple",   "marble",   "meadow",  "melon",   "meteor",   "mirror",
    "monkey", "mosaic",  "muffin",  "napkin",   "nectar",  "needle",  "nickel",   "noodle",
    "nutmeg", "oasis",   "ocean",   "olive",    "onion",   "orbit",   "orchid",   "otter",
    "paddle", "palace",  "panda",   "parcel",   "parrot",  "pebble",  "pepper",   "piano",
    "pillow", "pirate",  "planet",  "pocket",   "potato",  "prism",   "puzzle",   "quartz",
    "quill",  "rabbit",  "radish",  "raven",    "ribbon",  "river",   "rocket",   "saddle",
    "salmon", "satin",   "saucer",  "scarf",    "shadow",  "shovel",  "silver",   "sketch",
    "sledge", "spider",  "spoon",   "squirrel", "statue",  "stone",   "sugar",    "summit",
    "sunset", "tablet",  "teapot",  "thistle",  "thunder", "ticket",  "tiger",    "timber",
    "tomato", "tower",   "trumpet", "tulip",    "tunnel",  "turtle",  "valley",   "velvet",
    "violin", "voyage",  "wagon",   "walnut",   "walrus",  "window",  "winter",   "wizard",
    "yogurt", "zebra",   "zipper",  "acorn",    "bison",   "camel",   "daisy",    "ember",
};

static const char *const card_words[] = {
    "RIVER", "APPLE", "CLOUD", "TIGER", "PIANO", "LEMON", "STONE", "HOUSE",
    "TRAIN", "MOUSE", "BREAD", "GRASS", "SNAKE", "CHAIR", "OCEAN", "PLANT",
};

static const char card_letters[] = "ABCDEFGHJKLMNPRSTUVWXYZ"; /* no I or O: they read as 1 and 0 */

static const char *const shape_names[] = {"circle", "square",  "triangle",
                                          "star",   "diamond", "hexagon"};

static const struct color {
    const char *name;
    double r, g, b;
} colors[] = {
    {"red", 0.86, 0.08, 0.08},    {"green", 0.08, 0.58, 0.16},  {"blue", 0.10, 0.25, 0.88},
    {"yellow", 0.96, 0.80, 0.02}, {"orange", 0.98, 0.50, 0.02}, {"purple", 0.52, 0.14, 0.70},
};

/* Dark inks for the OCR sheet: every one reads clearly on white. */
static const struct color inks[] = {
    {"black", 0.0, 0.0, 0.0},       {"navy", 0.05, 0.10, 0.40},  {"maroon", 0.45, 0.05, 0.05},
    {"darkgreen", 0.0, 0.30, 0.10}, {"charcoal", 0.2, 0.2, 0.2},
};

/* ---- the font ---- */

static void ft_pair_free(void *p)
{
    struct ft_pair *ft = p;
    FT_Done_Face(ft->face);
    FT_Done_FreeType(ft->lib);
    free(ft);
}

__attribute__((format(printf, 3, 4))) static void put_err(char *err, size_t errlen, const char *fmt,
                                                          ...)
{
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
}

int st_render_new(const char *font_path, struct st_render **out, char *err, size_t errlen)
{
    const char *path = font_path ? font_path : ST_RENDER_DEFAULT_FONT;
    *out = NULL;
    struct ft_pair *ft = st_xcalloc(1, sizeof(*ft));
    FT_Error fe = FT_Init_FreeType(&ft->lib);
    if (fe != 0) {
        free(ft);
        put_err(err, errlen, "%s: FreeType did not start (error %d)", path, fe);
        return -ENOMEM;
    }
    fe = FT_New_Face(ft->lib, path, 0, &ft->face);
    if (fe != 0) {
        FT_Done_FreeType(ft->lib);
        free(ft);
        put_err(err, errlen, "%s: not a font FreeType can open (error %d)", path, fe);
        return ST_ENOTFOUND;
    }
    /* No hinting is asked of FreeType, so its interpreter settings cannot move a pixel. */
    cairo_font_face_t *face = cairo_ft_font_face_create_for_ft_face(ft->face, FT_LOAD_NO_HINTING);
    if (cairo_font_face_status(face) != CAIRO_STATUS_SUCCESS) {
        cairo_font_face_destroy(face);
        ft_pair_free(ft);
        put_err(err, errlen, "%s: cairo could not make a font face", path);
        return -ENOMEM;
    }
    /* From here cairo owns the FreeType side, freeing it with the face's last reference. */
    if (cairo_font_face_set_user_data(face, &ft_key, ft, ft_pair_free) != CAIRO_STATUS_SUCCESS) {
        cairo_font_face_destroy(face);
        ft_pair_free(ft);
        put_err(err, errlen, "%s: cairo could not keep the font", path);
        return -ENOMEM;
    }
    struct st_render *r = st_xcalloc(1, sizeof(*r));
    r->face = face;
    *out = r;
    return 0;
}

void st_render_free(struct st_render *r)
{
    if (!r) {
        return;
    }
    cairo_font_face_destroy(r->face);
    free(r);
}

/* ---- drawing helpers ---- */

struct canvas {
    cairo_surface_t *surface;
    cairo_t *cr;
};

static int canvas_open(struct st_render *r, struct canvas *cv, uint32_t w, uint32_t h)
{
    cv->surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)w, (int)h);
    cv->cr = cairo_create(cv->surface);
    if (cairo_status(cv->cr) != CAIRO_STATUS_SUCCESS) {
        cairo_destroy(cv->cr);
        cairo_surface_destroy(cv->surface);
        return -ENOMEM;
    }
    cairo_t *cr = cv->cr;
    cairo_font_options_t *fo = cairo_font_options_create();
    cairo_font_options_set_antialias(fo, CAIRO_ANTIALIAS_GRAY);
    cairo_font_options_set_subpixel_order(fo, CAIRO_SUBPIXEL_ORDER_DEFAULT);
    cairo_font_options_set_hint_style(fo, CAIRO_HINT_STYLE_NONE);
    cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_OFF);
    cairo_set_font_options(cr, fo);
    cairo_font_options_destroy(fo);
    cairo_set_antialias(cr, CAIRO_ANTIALIAS_GRAY);
    cairo_set_font_face(cr, r->face);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    return 0;
}

static cairo_status_t png_write(void *closure, const unsigned char *data, unsigned int len)
{
    st_buf_append(closure, data, len);
    return CAIRO_STATUS_SUCCESS;
}

/* Writes the PNG to png and closes the canvas. */
static int canvas_close(struct canvas *cv, struct st_buf *png)
{
    int rc = 0;
    cairo_surface_flush(cv->surface);
    if (png &&
        (cairo_status(cv->cr) != CAIRO_STATUS_SUCCESS ||
         cairo_surface_write_to_png_stream(cv->surface, png_write, png) != CAIRO_STATUS_SUCCESS)) {
        rc = -ENOMEM;
    }
    cairo_destroy(cv->cr);
    cairo_surface_destroy(cv->surface);
    return rc;
}

/* Draws text centered on (cx, cy) by its ink box at size px. */
static void text_centered(cairo_t *cr, const char *text, double px, double cx, double cy)
{
    cairo_text_extents_t e;
    cairo_set_font_size(cr, px);
    cairo_text_extents(cr, text, &e);
    cairo_move_to(cr, cx - e.width / 2 - e.x_bearing, cy - e.height / 2 - e.y_bearing);
    cairo_show_text(cr, text);
}

static int side_ok(uint32_t v, uint32_t lo)
{
    return v >= lo && v <= ST_RENDER_MAX_SIDE;
}

/* ---- OCR sheet ---- */

struct box {
    double x0, y0, x1, y1;
};

static int overlaps(const struct box *a, const struct box *b, double gap)
{
    return a->x0 < b->x1 + gap && b->x0 < a->x1 + gap && a->y0 < b->y1 + gap && b->y0 < a->y1 + gap;
}

/*
 * Places a word by seeded tries: a size, then a whole-pixel pen origin, so that its box (the
 * exact ink extents rounded outward plus 1 px) lies MARGIN inside the sheet and GAP away from
 * every placed box. measure_ink later shrinks the box to the pixels really drawn.
 * Leaves the pen at the origin and returns 1, or returns 0 when no try fits.
 */
static int place_word(cairo_t *cr, struct st_rng *rng, const char *word, uint32_t min_px,
                      uint32_t max_px, uint32_t w, uint32_t h, const struct box *placed,
                      uint32_t nplaced, struct st_render_word *out, struct box *ink)
{
    enum { TRIES = 400, MARGIN = 16, GAP = 16 };
    for (int t = 0; t < TRIES; t++) {
        uint32_t px = min_px + (uint32_t)st_rng_below(rng, max_px - min_px + 1);
        cairo_text_extents_t e;
        cairo_set_font_size(cr, px);
        cairo_text_extents(cr, word, &e);
        double bw = ceil(e.width) + 1, bh = ceil(e.height) + 1;
        if (bw + 2 * MARGIN >= w || bh + 2 * MARGIN >= h) {
            continue;
        }
        double ox = MARGIN + (double)st_rng_below(rng, (uint64_t)(w - 2 * MARGIN - bw));
        double oy = MARGIN + (double)st_rng_below(rng, (uint64_t)(h - 2 * MARGIN - bh));
        double pen_x = round(ox - e.x_bearing), pen_y = round(oy - e.y_bearing);
        /* Glyphs land on whole pixels, so the ink may stray 1 px past the exact extents. */
        struct box b = {floor(pen_x + e.x_bearing) - 1, floor(pen_y + e.y_bearing) - 1,
                        ceil(pen_x + e.x_bearing + e.width) + 1,
                        ceil(pen_y + e.y_bearing + e.height) + 1};
        if (b.x0 < MARGIN || b.y0 < MARGIN || b.x1 > w - MARGIN || b.y1 > h - MARGIN) {
            continue;
        }
        int clash = 0;
        for (uint32_t k = 0; k < nplaced && !clash; k++) {
            clash = overlaps(&b, &placed[k], GAP);
        }
        if (clash) {
            continue;
        }
        memcpy(out->text, word, strlen(word) + 1);
        out->size_px = px;
        out->x = (int32_t)b.x0;
        out->y = (int32_t)b.y0;
        out->w = (int32_t)(b.x1 - b.x0);
        out->h = (int32_t)(b.y1 - b.y0);
        *ink = b;
        cairo_move_to(cr, pen_x, pen_y);
        return 1;
    }
    return 0;
}

/*
 * Replaces each word's box by the bounding box of its non-white pixels, so the truth is exact to
 * the pixel. Boxes are at least GAP apart, so the region 1 px around a box holds no other ink.
 */
static void measure_ink(cairo_surface_t *s, struct st_render_word *words, uint32_t n)
{
    cairo_surface_flush(s);
    const unsigned char *data = cairo_image_surface_get_data(s);
    int stride = cairo_image_surface_get_stride(s);
    int iw = cairo_image_surface_get_width(s), ih = cairo_image_surface_get_height(s);
    for (uint32_t i = 0; i < n; i++) {
        struct st_render_word *w = &words[i];
        int x0 = INT32_MAX, y0 = INT32_MAX, x1 = -1, y1 = -1;
        for (int y = w->y > 0 ? w->y - 1 : 0; y <= w->y + w->h && y < ih; y++) {
            const unsigned char *row = data + (size_t)y * (size_t)stride;
            for (int x = w->x > 0 ? w->x - 1 : 0; x <= w->x + w->w && x < iw; x++) {
                uint32_t px;
                memcpy(&px, row + (size_t)x * 4, 4);
                if ((px & 0xffffff) != 0xffffff) {
                    x0 = x < x0 ? x : x0;
                    y0 = y < y0 ? y : y0;
                    x1 = x > x1 ? x : x1;
                    y1 = y > y1 ? y : y1;
                }
            }
        }
        if (x1 >= 0) {
            w->x = x0;
            w->y = y0;
            w->w = x1 - x0 + 1;
            w->h = y1 - y0 + 1;
        }
    }
}

int st_render_ocr(struct st_render *r, const struct st_render_ocr_spec *spec,
                  struct st_render_ocr *out)
{
    memset(out, 0, sizeof(*out));
    st_buf_init(&out->png);
    uint32_t w = spec->width ? spec->width : 2048, h = spec->height ? spec->height : 1536;
    uint32_t n = spec->nwords ? spec->nwords : 40;
    uint32_t min_px = spec->min_px ? spec->min_px : 28, max_px = spec->max_px ? spec->max_px : 72;
    if (!side_ok(w, 256) || !side_ok(h, 256) || n > ST_RENDER_MAX_WORDS || n > COUNT(ocr_words) ||
        min_px > max_px || max_px > 256) {
        return -EINVAL;
    }
    struct canvas cv;
    int rc = canvas_open(r, &cv, w, h);
    if (rc != 0) {
        return rc;
    }
    struct st_rng rng;
    st_rng_seed(&rng, spec->seed);
    /* Distinct words: a seeded partial Fisher-Yates shuffle of the list's indices. */
    uint32_t idx[COUNT(ocr_words)];
    for (uint32_t i = 0; i < COUNT(ocr_words); i++) {
        idx[i] = i;
    }
    out->words = st_xcalloc(n ? n : 1, sizeof(*out->words));
    struct box *placed = st_xcalloc(n ? n : 1, sizeof(*placed));
    for (uint32_t i = 0; i < n; i++) {
        uint32_t j = i + (uint32_t)st_rng_below(&rng, COUNT(ocr_words) - i);
        uint32_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
        const char *word = ocr_words[idx[i]];
        struct st_render_word *wd = &out->words[i];
        if (!place_word(cv.cr, &rng, word, min_px, max_px, w, h, placed, i, wd, &placed[i])) {
            rc = ST_ETOOBIG;
            break;
        }
        const struct color *ink = &inks[st_rng_below(&rng, COUNT(inks))];
        cairo_set_source_rgb(cv.cr, ink->r, ink->g, ink->b);
        cairo_show_text(cv.cr, word);
        out->nwords = i + 1;
    }
    free(placed);
    if (rc == 0) {
        measure_ink(cv.surface, out->words, out->nwords);
    }
    int crc = canvas_close(&cv, rc == 0 ? &out->png : NULL);
    rc = rc != 0 ? rc : crc;
    out->width = w;
    out->height = h;
    if (rc != 0) {
        st_render_ocr_release(out);
    }
    return rc;
}

void st_render_ocr_release(struct st_render_ocr *o)
{
    st_buf_release(&o->png);
    st_freep(&o->words);
    o->nwords = 0;
}

/* ---- multi-image set ---- */

static void path_star(cairo_t *cr, double cx, double cy, double ro, double ri)
{
    for (int i = 0; i < 10; i++) {
        double a = -M_PI / 2 + i * M_PI / 5, rad = i % 2 ? ri : ro;
        if (i == 0) {
            cairo_move_to(cr, cx + rad * cos(a), cy + rad * sin(a));
        } else {
            cairo_line_to(cr, cx + rad * cos(a), cy + rad * sin(a));
        }
    }
    cairo_close_path(cr);
}

static void path_polygon(cairo_t *cr, double cx, double cy, double rad, int sides, double a0)
{
    for (int i = 0; i < sides; i++) {
        double a = a0 + i * 2 * M_PI / sides;
        if (i == 0) {
            cairo_move_to(cr, cx + rad * cos(a), cy + rad * sin(a));
        } else {
            cairo_line_to(cr, cx + rad * cos(a), cy + rad * sin(a));
        }
    }
    cairo_close_path(cr);
}

static void draw_shape(cairo_t *cr, int shape, double cx, double cy, double rad)
{
    switch (shape) {
    case 0:
        cairo_arc(cr, cx, cy, rad, 0, 2 * M_PI);
        break;
    case 1:
        cairo_rectangle(cr, cx - rad * 0.85, cy - rad * 0.85, rad * 1.7, rad * 1.7);
        break;
    case 2:
        path_polygon(cr, cx, cy + rad * 0.15, rad * 1.1, 3, -M_PI / 2);
        break;
    case 3:
        path_star(cr, cx, cy + rad * 0.05, rad * 1.1, rad * 0.45);
        break;
    case 4:
        path_polygon(cr, cx, cy, rad * 1.05, 4, -M_PI / 2);
        break;
    default:
        path_polygon(cr, cx, cy, rad, 6, 0);
        break;
    }
    cairo_fill(cr);
}

/* Draws one card; its contents were chosen by the caller. */
static int draw_card(struct st_render *r, struct st_render_card *c, int shape,
                     const struct color *col, uint32_t w, uint32_t h)
{
    struct canvas cv;
    int rc = canvas_open(r, &cv, w, h);
    if (rc != 0) {
        return rc;
    }
    cairo_t *cr = cv.cr;
    double side = w < h ? w : h;
    /* A thin frame so the card's edge shows against a white page. */
    cairo_set_source_rgb(cr, 0.6, 0.6, 0.6);
    cairo_set_line_width(cr, 2);
    cairo_rectangle(cr, 1, 1, w - 2.0, h - 2.0);
    cairo_stroke(cr);
    if (c->kind == ST_RENDER_CARD_SHAPE) {
        cairo_set_source_rgb(cr, col->r, col->g, col->b);
        draw_shape(cr, shape, w / 2.0, h / 2.0, side * 0.32);
    } else {
        cairo_set_source_rgb(cr, 0, 0, 0);
        double px = c->kind == ST_RENDER_CARD_WORD ? side * 0.22 : side * 0.6;
        text_centered(cr, c->label, px, w / 2.0, h / 2.0);
    }
    return canvas_close(&cv, &c->png);
}

int st_render_cards(struct st_render *r, const struct st_render_cards_spec *spec,
                    struct st_render_cards *out)
{
    memset(out, 0, sizeof(*out));
    uint32_t w = spec->width ? spec->width : 512, h = spec->height ? spec->height : 384;
    if (spec->count == 0 || spec->count > ST_RENDER_MAX_CARDS || !side_ok(w, 64) ||
        !side_ok(h, 64)) {
        return -EINVAL;
    }
    struct st_rng rng;
    st_rng_seed(&rng, spec->seed);
    /* Kinds take turns from a seeded start, so any four neighbours hold one of each. */
    uint32_t kind0 = (uint32_t)st_rng_below(&rng, 4);
    /* Without-replacement draws per kind keep every label distinct. */
    uint32_t used_digit = 0, used_letter = 0, used_word = 0;
    uint64_t used_combo = 0;
    out->cards = st_xcalloc(spec->count, sizeof(*out->cards));
    int rc = 0;
    for (uint32_t i = 0; i < spec->count && rc == 0; i++) {
        struct st_render_card *c = &out->cards[i];
        st_buf_init(&c->png);
        c->kind = (enum st_render_card_kind)((kind0 + i) % 4);
        const struct color *col = &colors[0];
        int shape = 0;
        uint32_t k;
        memcpy(c->color, "black", 6);
        switch (c->kind) {
        case ST_RENDER_CARD_DIGIT:
            do {
                k = (uint32_t)st_rng_below(&rng, 10);
            } while (used_digit & (1u << k));
            used_digit |= 1u << k;
            snprintf(c->label, sizeof(c->label), "%u", k);
            snprintf(c->describe, sizeof(c->describe), "the digit %u", k);
            break;
        case ST_RENDER_CARD_LETTER:
            do {
                k = (uint32_t)st_rng_below(&rng, sizeof(card_letters) - 1);
            } while (used_letter & (1u << k));
            used_letter |= 1u << k;
            snprintf(c->label, sizeof(c->label), "%c", card_letters[k]);
            snprintf(c->describe, sizeof(c->describe), "the letter %c", card_letters[k]);
            break;
        case ST_RENDER_CARD_SHAPE:
            do {
                k = (uint32_t)st_rng_below(&rng, COUNT(shape_names) * COUNT(colors));
            } while (used_combo & (1ull << k));
            used_combo |= 1ull << k;
            shape = (int)(k % COUNT(shape_names));
            col = &colors[k / COUNT(shape_names)];
            snprintf(c->color, sizeof(c->color), "%s", col->name);
            snprintf(c->shape, sizeof(c->shape), "%s", shape_names[shape]);
            snprintf(c->label, sizeof(c->label), "%s %s", col->name, shape_names[shape]);
            snprintf(c->describe, sizeof(c->describe), "%s %s %s",
                     strchr("aeiou", col->name[0]) ? "an" : "a", col->name, shape_names[shape]);
            break;
        case ST_RENDER_CARD_WORD:
            do {
                k = (uint32_t)st_rng_below(&rng, COUNT(card_words));
            } while (used_word & (1u << k));
            used_word |= 1u << k;
            snprintf(c->label, sizeof(c->label), "%s", card_words[k]);
            snprintf(c->describe, sizeof(c->describe), "the word %s", card_words[k]);
            break;
        }
        out->n = i + 1;
        rc = draw_card(r, c, shape, col, w, h);
    }
    if (rc != 0) {
        st_render_cards_release(out);
    }
    return rc;
}

void st_render_cards_release(struct st_render_cards *c)
{
    for (uint32_t i = 0; i < c->n; i++) {
        st_buf_release(&c->cards[i].png);
    }
    st_freep(&c->cards);
    c->n = 0;
}

/* ---- video ---- */

static const char video_symbols[] = "ABCDEFGHJKLMNPRSTUVWXYZ";

int st_render_video_truth(const struct st_render_video_spec *spec,
                          struct st_render_video_truth *out)
{
    memset(out, 0, sizeof(*out));
    uint32_t dur = spec->duration_s ? spec->duration_s : 120, fps = spec->fps ? spec->fps : 1;
    uint32_t seg = spec->segment_s ? spec->segment_s : dur < 10 ? dur : 10;
    uint32_t w = spec->width ? spec->width : 320, h = spec->height ? spec->height : 240;
    if (dur > 600 || fps > 30 || dur * fps > ST_RENDER_MAX_FRAMES || seg > dur || !side_ok(w, 64) ||
        !side_ok(h, 64) || w % 2 != 0 || h % 2 != 0) {
        return -EINVAL;
    }
    out->nframes = dur * fps;
    out->nsegments = (dur + seg - 1) / seg;
    out->fps = fps;
    out->segment_s = seg;
    struct st_rng rng;
    st_rng_seed(&rng, spec->seed);
    size_t nsym = sizeof(video_symbols) - 1;
    for (uint32_t i = 0; i < out->nsegments; i++) {
        char s;
        do {
            s = video_symbols[st_rng_below(&rng, nsym)];
        } while (i > 0 && s == out->symbols[i - 1]);
        out->symbols[i] = s;
    }
    return 0;
}

static int draw_frame(struct st_render *r, const struct st_render_video_truth *t, uint32_t w,
                      uint32_t h, uint32_t idx, struct st_buf *png)
{
    struct canvas cv;
    int rc = canvas_open(r, &cv, w, h);
    if (rc != 0) {
        return rc;
    }
    cairo_t *cr = cv.cr;
    char line[48], sym[2] = {t->symbols[idx / (t->segment_s * t->fps)], '\0'};
    /* A dark background, as video models see most often, with the number on top. */
    cairo_set_source_rgb(cr, 0.12, 0.12, 0.16);
    cairo_paint(cr);
    cairo_set_source_rgb(cr, 1, 1, 1);
    snprintf(line, sizeof(line), "frame %u", idx);
    text_centered(cr, line, h * 0.11, w / 2.0, h * 0.12);
    cairo_set_source_rgb(cr, 1.0, 0.85, 0.2);
    text_centered(cr, sym, h * 0.5, w / 2.0, h * 0.56);
    /* A progress bar: the clip's position at a glance. */
    cairo_set_source_rgb(cr, 0.4, 0.4, 0.45);
    cairo_rectangle(cr, w * 0.05, h * 0.92, w * 0.9, h * 0.03);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0.3, 0.8, 0.4);
    cairo_rectangle(cr, w * 0.05, h * 0.92, w * 0.9 * (idx + 1) / t->nframes, h * 0.03);
    cairo_fill(cr);
    return canvas_close(&cv, png);
}

int st_render_video_frame(struct st_render *r, const struct st_render_video_spec *spec,
                          uint32_t idx, struct st_buf *png)
{
    struct st_render_video_truth t;
    int rc = st_render_video_truth(spec, &t);
    if (rc != 0) {
        return rc;
    }
    if (idx >= t.nframes) {
        return -EINVAL;
    }
    uint32_t w = spec->width ? spec->width : 320, h = spec->height ? spec->height : 240;
    return draw_frame(r, &t, w, h, idx, png);
}

int st_render_video_frames(struct st_render *r, const struct st_render_video_spec *spec,
                           st_render_frame_cb cb, void *ud, struct st_render_video_truth *truth)
{
    struct st_render_video_truth t;
    int rc = st_render_video_truth(spec, &t);
    if (rc != 0) {
        return rc;
    }
    if (truth) {
        *truth = t;
    }
    uint32_t w = spec->width ? spec->width : 320, h = spec->height ? spec->height : 240;
    struct st_buf png;
    st_buf_init(&png);
    for (uint32_t i = 0; i < t.nframes && rc == 0; i++) {
        st_buf_clear(&png);
        rc = draw_frame(r, &t, w, h, i, &png);
        if (rc == 0) {
            rc = cb(ud, i, &png);
        }
    }
    st_buf_release(&png);
    return rc;
}

int st_render_frame_name(uint32_t idx, char *out, size_t cap)
{
    int n = snprintf(out, cap, "frame_%05u.png", idx);
    return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static void argv_add(struct st_render_argv *a, const char *s)
{
    /* The list below is fixed and shorter than the array; overflowing it is a bug. */
    if (a->argc < ST_RENDER_ARGV_MAX) {
        a->argv[a->argc++] = st_xstrdup(s);
        a->argv[a->argc] = NULL;
    }
}

/* Adds "file:" + path + tail: the file protocol, whatever the path looks like. */
static void argv_add_file(struct st_render_argv *a, const char *path, const char *tail)
{
    struct st_buf b;
    st_buf_init(&b);
    st_buf_puts(&b, "file:");
    st_buf_puts(&b, path);
    st_buf_puts(&b, tail);
    argv_add(a, st_buf_str(&b));
    st_buf_release(&b);
}

int st_render_ffmpeg_argv(const char *ffmpeg, const char *frame_dir, uint32_t fps,
                          const char *out_path, struct st_render_argv *out)
{
    memset(out, 0, sizeof(*out));
    if (!ffmpeg || !*ffmpeg || !frame_dir || !*frame_dir || !out_path || !*out_path ||
        strchr(frame_dir, '%') != NULL || fps < 1 || fps > 30) {
        return -EINVAL;
    }
    char rate[16];
    snprintf(rate, sizeof(rate), "%u", fps);
    static const char *const head[] = {"-nostdin", "-hide_banner", "-loglevel", "error",
                                       "-y",       "-f",           "image2",    "-start_number",
                                       "0",        "-framerate"};
    static const char *const enc[] = {
        "-map_metadata", "-1",        "-an",       "-c:v",       "libx264",
        "-preset",       "medium",    "-crf",      "18",         "-pix_fmt",
        "yuv420p",       "-threads",  "1",         "-fflags",    "+bitexact",
        "-flags:v",      "+bitexact", "-movflags", "+faststart", "-f",
        "mp4",           "-r"};
    argv_add(out, ffmpeg);
    for (size_t i = 0; i < COUNT(head); i++) {
        argv_add(out, head[i]);
    }
    argv_add(out, rate);
    argv_add(out, "-i");
    int slash = frame_dir[strlen(frame_dir) - 1] == '/';
    argv_add_file(out, frame_dir, slash ? "frame_%05d.png" : "/frame_%05d.png");
    for (size_t i = 0; i < COUNT(enc); i++) {
        argv_add(out, enc[i]);
    }
    argv_add(out, rate);
    argv_add_file(out, out_path, "");
    return 0;
}

void st_render_argv_release(struct st_render_argv *a)
{
    for (int i = 0; i < a->argc; i++) {
        st_freep(&a->argv[i]);
    }
    a->argc = 0;
}

/* ---- encodings ---- */

void st_render_base64(const void *p, size_t n, struct st_buf *out)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *s = p;
    st_buf_reserve(out, (n + 2) / 3 * 4);
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        char q[4] = {tab[v >> 18], tab[(v >> 12) & 63], tab[(v >> 6) & 63], tab[v & 63]};
        st_buf_append(out, q, 4);
    }
    if (i < n) {
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0);
        char q[4] = {tab[v >> 18], tab[(v >> 12) & 63], i + 1 < n ? tab[(v >> 6) & 63] : '=', '='};
        st_buf_append(out, q, 4);
    }
}

void st_render_data_url(const char *mime, const void *p, size_t n, struct st_buf *out)
{
    st_buf_puts(out, "data:");
    st_buf_puts(out, mime);
    st_buf_puts(out, ";base64,");
    st_render_base64(p, n, out);
}
