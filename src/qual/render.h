/*
 * Images the tool renders itself for the vision checks, each with its ground truth: an OCR
 * sheet of seeded words at known boxes, a set of small "cards" with distinct describable
 * contents, and the frames of a clip whose frames show their number and a seeded symbol. Plus
 * base64, data URLs, and the argv (built, never run here) that turns frames into an MP4.
 *
 * Drawing is cairo on an RGB24 image surface, text through cairo's FreeType backend from one
 * font file (Debian's fonts-dejavu-core by default), never through fontconfig, so no machine-wide
 * font configuration can change a pixel. Antialiasing is fixed to grayscale, hinting off, hint
 * metrics off. The same seed and spec give byte-identical PNGs with the same cairo, pixman,
 * FreeType, zlib and font versions (one Debian release); the ground truth depends on the font's
 * metrics only. ffmpeg's MP4 is not promised byte-identical across ffmpeg builds; its frames are.
 *
 * A st_render holds the font and is used by one thread at a time; make one per thread.
 */
#ifndef ST_QUAL_RENDER_H
#define ST_QUAL_RENDER_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/status.h"

#define ST_RENDER_DEFAULT_FONT "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"

/* Limits; a spec past them gives -EINVAL. */
#define ST_RENDER_MAX_SIDE 4096    /* pixels, either side of any image */
#define ST_RENDER_MAX_WORDS 200    /* OCR words on one sheet */
#define ST_RENDER_MAX_CARDS 16     /* images in one multi-image set */
#define ST_RENDER_MAX_FRAMES 3600  /* frames in one clip */
#define ST_RENDER_MAX_SEGMENTS 600 /* symbol segments in one clip */

#define ST_RENDER_WORD_MAX 16 /* bytes of a word, NUL included */

struct st_render; /* opaque: the font */

/*
 * Opens font_path (NULL: ST_RENDER_DEFAULT_FONT) and makes *out (free with st_render_free).
 * Returns 0; ST_ENOTFOUND when FreeType cannot open the file as a font; -ENOMEM when cairo
 * cannot make a font face. err (may be NULL) receives a sentence.
 */
int st_render_new(const char *font_path, struct st_render **out, char *err, size_t errlen) ST_WUR;
/* Frees r; NULL is a no-op. Safe while cairo still caches the face (it owns the FreeType side). */
void st_render_free(struct st_render *r);

/* ---- OCR sheet ---- */

struct st_render_ocr_spec {
    uint64_t seed;
    uint32_t width, height;  /* 0: 2048 x 1536 */
    uint32_t nwords;         /* 0: 40; at most ST_RENDER_MAX_WORDS */
    uint32_t min_px, max_px; /* font size range in pixels; 0: 28 and 72 */
};

/* One word's truth: the bounding box of its drawn (non-white) pixels; x, y the top-left pixel. */
struct st_render_word {
    char text[ST_RENDER_WORD_MAX];
    int32_t x, y, w, h;
    uint32_t size_px;
};

struct st_render_ocr {
    struct st_buf png;            /* owned: the PNG file */
    struct st_render_word *words; /* owned, nwords, in drawing order (no two boxes overlap) */
    uint32_t nwords;
    uint32_t width, height;
};

/*
 * Renders the sheet: distinct lowercase words from a fixed English list, dark ink on white, at
 * seeded sizes and places with at least 16 px between boxes and 16 px from the edges. Fills *out
 * (release with st_render_ocr_release; it is initialized here). Returns 0; -EINVAL for a spec past
 * the limits (width or height over ST_RENDER_MAX_SIDE or under 256, min_px > max_px, max_px over
 * 256, nwords over ST_RENDER_MAX_WORDS); ST_ETOOBIG when the words do not fit on the sheet
 * (placement gives up after a fixed number of seeded tries); -ENOMEM when cairo fails.
 */
int st_render_ocr(struct st_render *r, const struct st_render_ocr_spec *spec,
                  struct st_render_ocr *out) ST_WUR;
void st_render_ocr_release(struct st_render_ocr *o);

/* ---- multi-image set ---- */

enum st_render_card_kind {
    ST_RENDER_CARD_DIGIT = 0, /* one big digit */
    ST_RENDER_CARD_LETTER,    /* one big capital letter (never I or O) */
    ST_RENDER_CARD_SHAPE,     /* one filled shape in a named color */
    ST_RENDER_CARD_WORD,      /* one short capitalized word */
};

struct st_render_cards_spec {
    uint64_t seed;
    uint32_t count;         /* 1..ST_RENDER_MAX_CARDS */
    uint32_t width, height; /* 0: 512 x 384 */
};

struct st_render_card {
    enum st_render_card_kind kind;
    char label[32];    /* "7", "K", "red circle", "RIVER": what the image shows */
    char color[16];    /* shape cards: the color name; others "black" */
    char shape[16];    /* shape cards: "circle", "square", ...; others "" */
    char describe[64]; /* a phrase for prompts and reports: "the digit 7", "an orange star" */
    struct st_buf png; /* owned */
};

struct st_render_cards {
    struct st_render_card *cards; /* owned, count; kinds interleave, no two labels equal */
    uint32_t n;
};

/* Renders the set into *out (release with st_render_cards_release). 0, -EINVAL, -ENOMEM. */
int st_render_cards(struct st_render *r, const struct st_render_cards_spec *spec,
                    struct st_render_cards *out) ST_WUR;
void st_render_cards_release(struct st_render_cards *c);

/* ---- video frames ---- */

struct st_render_video_spec {
    uint64_t seed;
    uint32_t duration_s;    /* 0: 120 */
    uint32_t fps;           /* 0: 1; at most 30 */
    uint32_t width, height; /* 0: 320 x 240; both even (H.264 with 4:2:0 wants that) */
    uint32_t segment_s;     /* seconds one symbol stays on screen (<= duration); 0: 10 or less */
};

/* The clip's truth: frame i shows the number i and symbols[i / (segment_s * fps)]. */
struct st_render_video_truth {
    uint32_t nframes;   /* duration_s * fps */
    uint32_t nsegments; /* ceil(duration_s / segment_s) */
    uint32_t fps, segment_s;
    char symbols[ST_RENDER_MAX_SEGMENTS + 1]; /* capital letters, no two neighbours equal */
};

/*
 * The truth for spec (pure: no drawing). Returns 0 or -EINVAL (duration over 600 s, fps over 30,
 * frames over ST_RENDER_MAX_FRAMES, odd or out-of-range sides).
 */
int st_render_video_truth(const struct st_render_video_spec *spec,
                          struct st_render_video_truth *out) ST_WUR;

/* Renders frame idx (< nframes) as a PNG appended to png. 0, -EINVAL, -ENOMEM. */
int st_render_video_frame(struct st_render *r, const struct st_render_video_spec *spec,
                          uint32_t idx, struct st_buf *png) ST_WUR;

/*
 * Called once per frame in order with its PNG (borrowed for the call). A non-zero return stops
 * the rendering and becomes st_render_video_frames' return value.
 */
typedef int (*st_render_frame_cb)(void *ud, uint32_t idx, const struct st_buf *png);

/*
 * Renders every frame of the clip through cb and fills truth (may be NULL). Returns 0, -EINVAL,
 * -ENOMEM, or the callback's non-zero value.
 */
int st_render_video_frames(struct st_render *r, const struct st_render_video_spec *spec,
                           st_render_frame_cb cb, void *ud,
                           struct st_render_video_truth *truth) ST_WUR;

/* The file name of frame idx in a frame directory: "frame_00037.png". 0 or -ENAMETOOLONG. */
int st_render_frame_name(uint32_t idx, char *out, size_t cap) ST_WUR;

#define ST_RENDER_ARGV_MAX 48

/* An argv: owned strings, NULL-terminated at argv[argc]. */
struct st_render_argv {
    char *argv[ST_RENDER_ARGV_MAX + 1];
    int argc;
};

/*
 * Builds (never runs) the ffmpeg command that encodes frame_dir/frame_%05d.png (names from
 * st_render_frame_name, starting at 0) at fps into an H.264 MP4 at out_path: one thread, bitexact
 * flags, no metadata, yuv420p, no audio, no prompt (-nostdin, -y overwrites). Paths go through
 * the "file:" protocol so a name with ':' cannot select another protocol. ffmpeg is the program
 * path or name to execute (argv[0]). Returns 0; -EINVAL for an empty path, a frame_dir holding
 * '%' (the image2 pattern would misread it) or fps outside 1..30. Release with
 * st_render_argv_release.
 */
int st_render_ffmpeg_argv(const char *ffmpeg, const char *frame_dir, uint32_t fps,
                          const char *out_path, struct st_render_argv *out) ST_WUR;
void st_render_argv_release(struct st_render_argv *a);

/* ---- encodings ---- */

/* Appends standard base64 (RFC 4648, '=' padding, no line breaks) of p[0..n) to out. */
void st_render_base64(const void *p, size_t n, struct st_buf *out);

/* Appends "data:<mime>;base64,<base64 of p[0..n)>" to out. */
void st_render_data_url(const char *mime, const void *p, size_t n, struct st_buf *out);

#endif
