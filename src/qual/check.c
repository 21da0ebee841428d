/*
 * Qualification checks: the seeded generators of the screening set and the verifiers shared with
 * user suites. See check.h and docs/qualification.md ("Checks"). Generators are pure functions of
 * (kind, seed, options) apart from the renderer's font file; verifiers are pure except CODE, which
 * runs the reply's program in the sandbox.
 */
#include "qual/check.h"

#include <ctype.h>
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/json.h"
#include "base/rng.h"
#include "base/xalloc.h"
#include "qual/arith.h"
#include "qual/render.h"
#include "qual/sandbox.h"
#include "qual/schema.h"

static const char *const kind_names[ST_CHECK_KINDS] = {
    "arithmetic", "json",           "multi-turn",      "ocr",    "multi-image",
    "video",      "long-retrieval", "long-text-image", "queued", "throughput-categories",
};

const char *st_check_name(enum st_check_kind k)
{
    if ((unsigned)k >= ST_CHECK_KINDS) {
        return "?";
    }
    return kind_names[k];
}

int st_check_kind_of(const char *name, enum st_check_kind *out)
{
    for (int k = 0; k < ST_CHECK_KINDS; k++) {
        if (strcmp(name, kind_names[k]) == 0) {
            *out = (enum st_check_kind)k;
            return 0;
        }
    }
    return ST_ENOTFOUND;
}

void st_verifier_init(struct st_verifier *v)
{
    memset(v, 0, sizeof(*v));
    st_buf_init(&v->want);
    st_buf_init(&v->items);
    v->min_share = 1.0;
}

void st_verifier_release(struct st_verifier *v)
{
    st_buf_release(&v->want);
    st_buf_release(&v->items);
}

void st_verifier_item(struct st_verifier *v, const char *s, size_t n)
{
    st_buf_append(&v->items, s, n);
    st_buf_putc(&v->items, '\0');
    v->nitems++;
}

void st_check_step_init(struct st_check_step *s)
{
    memset(s, 0, sizeof(*s));
    st_buf_init(&s->messages);
    st_buf_init(&s->response_format);
    st_buf_init(&s->expect);
    st_verifier_init(&s->v);
}

void st_check_step_release(struct st_check_step *s)
{
    st_buf_release(&s->messages);
    st_buf_release(&s->response_format);
    st_buf_release(&s->expect);
    st_verifier_release(&s->v);
}

void st_check_release(struct st_check *c)
{
    for (uint32_t i = 0; i < c->nsteps; i++) {
        st_check_step_release(&c->steps[i]);
    }
    free(c->steps);
    c->steps = NULL;
    c->nsteps = 0;
}

static struct st_check_step *add_step(struct st_check *c)
{
    c->steps = st_xrealloc(c->steps, (c->nsteps + 1) * sizeof(*c->steps));
    struct st_check_step *s = &c->steps[c->nsteps++];
    st_check_step_init(s);
    return s;
}

/* A step that carries images or video. */
static struct st_check_step *add_media_step(struct st_check *c)
{
    struct st_check_step *s = add_step(c);
    s->media = 1;
    return s;
}

/* rc, with "what: why" in err when it is a failure (a media check could not be made). */
static int media_failed(int rc, const char *what, char *err, size_t errlen)
{
    if (rc != 0) {
        snprintf(err, errlen, "%s: %s", what, st_strerror(rc));
    }
    return rc;
}

/* ---- message building ---- */

static void msg(struct st_buf *b, const char *role, const char *text)
{
    st_buf_putc(b, b->len > 0 ? ',' : '[');
    st_buf_printf(b, "{\"role\":\"%s\",\"content\":", role);
    st_json_quote(b, text, strlen(text));
    st_buf_putc(b, '}');
}

/* Opens a user message whose content is an array of parts; close with parts_close. */
static void parts_open(struct st_buf *b, const char *text)
{
    st_buf_puts(b, b->len > 0 ? "," : "[");
    st_buf_puts(b, "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":");
    st_json_quote(b, text, strlen(text));
    st_buf_putc(b, '}');
}

static void part_image(struct st_buf *b, const struct st_buf *png)
{
    st_buf_puts(b, ",{\"type\":\"image_url\",\"image_url\":{\"url\":\"");
    st_render_data_url("image/png", png->data, png->len, b);
    st_buf_puts(b, "\"}}");
}

static void part_text(struct st_buf *b, const char *text)
{
    st_buf_puts(b, ",{\"type\":\"text\",\"text\":");
    st_json_quote(b, text, strlen(text));
    st_buf_putc(b, '}');
}

static void parts_close(struct st_buf *b)
{
    st_buf_puts(b, "]}");
}

static void msgs_close(struct st_buf *b)
{
    st_buf_putc(b, ']');
}

/* ---- seeded vocabulary ---- */

static const char *const names[] = {
    "Pepper", "Biscuit", "Marble", "Juniper", "Saffron", "Clover", "Pumpkin", "Tango",
    "Nimbus", "Waffle",  "Cosmo",  "Hazel",   "Mango",   "Pixel",  "Quartz",  "Rocket",
};
static const char *const cities[] = {
    "Lisbon", "Oslo",   "Nairobi", "Lima",  "Hanoi",  "Dublin", "Quito",  "Tallinn",
    "Accra",  "Zagreb", "Havana",  "Perth", "Manila", "Bergen", "Kigali", "Porto",
};
static const char *const rooms[] = {"blue", "green", "red", "silver", "amber", "violet"};
static const char *const filler_words[] = {
    "the",    "river", "ran",    "past",    "an",     "old",   "mill",   "where",  "farmers",
    "stored", "grain", "for",    "winter",  "and",    "every", "spring", "water",  "rose",
    "over",   "stone", "walls",  "built",   "by",     "hands", "long",   "gone",   "while",
    "birds",  "kept",  "their",  "patient", "watch",  "above", "quiet",  "fields", "of",
    "barley", "that",  "swayed", "in",      "gentle", "wind",  "near",   "a",      "road",
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static const char *pick(struct st_rng *r, const char *const *list, size_t n)
{
    return list[st_rng_below(r, n)];
}

/* Appends about nbytes of seeded prose: sentences of 8 to 16 filler words. */
static void filler(struct st_rng *r, size_t nbytes, struct st_buf *out)
{
    size_t end = out->len + nbytes;
    while (out->len < end) {
        uint64_t n = 8 + st_rng_below(r, 9);
        for (uint64_t i = 0; i < n; i++) {
            const char *w = pick(r, filler_words, NELEM(filler_words));
            if (i == 0) {
                st_buf_putc(out, (char)toupper((unsigned char)w[0]));
                st_buf_puts(out, w + 1);
            } else {
                st_buf_putc(out, ' ');
                st_buf_puts(out, w);
            }
        }
        st_buf_puts(out, ". ");
    }
}

void st_check_prose(uint64_t seed, size_t nbytes, struct st_buf *out)
{
    struct st_rng r;
    st_rng_seed(&r, seed);
    filler(&r, nbytes, out);
}

/* ---- generators ---- */

static void make_arith_step(struct st_check *c, uint64_t seed)
{
    struct st_arith p;
    st_arith_make(seed, &p);
    struct st_check_step *s = add_step(c);
    msg(&s->messages, "user", p.text);
    msgs_close(&s->messages);
    st_buf_printf(&s->expect, "Answer: %lld", (long long)p.answer);
    s->max_tokens = 2048;
    s->v.kind = ST_VERIFY_ARITH;
    s->v.answer = p.answer;
}

static void make_json(struct st_check *c, struct st_rng *r)
{
    const char *name = pick(r, names, NELEM(names));
    int64_t id = 1000 + (int64_t)st_rng_below(r, 9000);
    const char *t1 = pick(r, cities, NELEM(cities));
    const char *t2 = pick(r, rooms, NELEM(rooms));
    struct st_check_step *s = add_step(c);
    struct st_buf q;
    st_buf_init(&q);
    st_buf_printf(&q,
                  "Return only a JSON object, no other text, with exactly these members: \"name\": "
                  "the string \"%s\"; \"id\": the integer %lld; \"tags\": an array of the two "
                  "strings \"%s\" and \"%s\", in that order.",
                  name, (long long)id, t1, t2);
    msg(&s->messages, "user", q.data);
    msgs_close(&s->messages);
    st_buf_printf(
        &s->v.want,
        "{\"type\":\"object\",\"required\":[\"name\",\"id\",\"tags\"],"
        "\"additionalProperties\":false,\"properties\":{\"name\":{\"const\":\"%s\"},"
        "\"id\":{\"type\":\"integer\",\"const\":%lld},\"tags\":{\"const\":[\"%s\",\"%s\"]}}}",
        name, (long long)id, t1, t2);
    st_buf_printf(&s->response_format,
                  "{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"record\",\"schema\":%s}}",
                  s->v.want.data);
    st_buf_printf(&s->expect, "{\"name\":\"%s\",\"id\":%lld,\"tags\":[\"%s\",\"%s\"]}", name,
                  (long long)id, t1, t2);
    s->max_tokens = 512;
    s->v.kind = ST_VERIFY_SCHEMA;
    st_buf_release(&q);
}

static void make_multiturn(struct st_check *c, struct st_rng *r)
{
    int64_t locker = 1000 + (int64_t)st_rng_below(r, 9000);
    const char *pet = pick(r, names, NELEM(names));
    const char *city = pick(r, cities, NELEM(cities));
    char line[256];
    struct st_check_step *s = add_step(c);
    snprintf(line, sizeof(line), "Please remember this: my locker number is %lld.",
             (long long)locker);
    msg(&s->messages, "user", line);
    msg(&s->messages, "assistant", "Noted.");
    snprintf(line, sizeof(line), "Also remember that my cat is called %s.", pet);
    msg(&s->messages, "user", line);
    msg(&s->messages, "assistant", "Noted.");
    snprintf(line, sizeof(line), "One more thing: tomorrow I am flying to %s.", city);
    msg(&s->messages, "user", line);
    msg(&s->messages, "assistant", "Noted.");
    msg(&s->messages, "user",
        "What is my locker number, what is my cat called, and where am I flying tomorrow? "
        "Answer in one short line.");
    msgs_close(&s->messages);
    char num[32];
    snprintf(num, sizeof(num), "%lld", (long long)locker);
    st_buf_printf(&s->expect, "Locker %s, cat %s, flying to %s.", num, pet, city);
    s->max_tokens = 1024;
    s->v.kind = ST_VERIFY_WORDS;
    st_verifier_item(&s->v, num, strlen(num));
    st_verifier_item(&s->v, pet, strlen(pet));
    st_verifier_item(&s->v, city, strlen(city));
}

static int make_ocr(struct st_check *c, struct st_render *rd, uint64_t seed, char *err,
                    size_t errlen)
{
    struct st_render_ocr_spec spec = {.seed = seed};
    struct st_render_ocr o;
    int rc = st_render_ocr(rd, &spec, &o);
    if (media_failed(rc, "ocr: rendering the sheet", err, errlen) != 0) {
        return rc;
    }
    struct st_check_step *s = add_media_step(c);
    parts_open(&s->messages, "Read every word written in this image. Reply with the words only, "
                             "separated by spaces, in any order.");
    part_image(&s->messages, &o.png);
    parts_close(&s->messages);
    msgs_close(&s->messages);
    s->v.kind = ST_VERIFY_WORDS;
    s->v.min_share = 0.9;
    for (uint32_t i = 0; i < o.nwords; i++) {
        st_verifier_item(&s->v, o.words[i].text, strlen(o.words[i].text));
        if (i > 0) {
            st_buf_putc(&s->expect, ' ');
        }
        st_buf_puts(&s->expect, o.words[i].text);
    }
    s->max_tokens = 1024;
    snprintf(c->note, sizeof(c->note), "%ux%u PNG, %u words, pass at 90%% read back", o.width,
             o.height, o.nwords);
    st_render_ocr_release(&o);
    return 0;
}

static int make_multiimage(struct st_check *c, struct st_render *rd, uint64_t seed, char *err,
                           size_t errlen)
{
    struct st_render_cards_spec spec = {.seed = seed, .count = 4};
    struct st_render_cards cards;
    int rc = st_render_cards(rd, &spec, &cards);
    if (media_failed(rc, "multi-image: rendering the cards", err, errlen) != 0) {
        return rc;
    }
    struct st_check_step *s = add_media_step(c);
    parts_open(&s->messages,
               "Each of the following images shows one thing: a digit, a capital letter, a "
               "colored shape or a word. Name what each image shows, in order, separated by "
               "semicolons (for a shape give its color and shape, e.g. \"red circle\").");
    for (uint32_t i = 0; i < cards.n; i++) {
        part_image(&s->messages, &cards.cards[i].png);
    }
    parts_close(&s->messages);
    msgs_close(&s->messages);
    s->v.kind = ST_VERIFY_ORDERED;
    for (uint32_t i = 0; i < cards.n; i++) {
        const char *l = cards.cards[i].label;
        st_verifier_item(&s->v, l, strlen(l));
        st_buf_printf(&s->expect, "%s%s", i > 0 ? "; " : "", l);
    }
    s->max_tokens = 1024;
    snprintf(c->note, sizeof(c->note), "%u cards of 512x384, labels in order", cards.n);
    st_render_cards_release(&cards);
    return 0;
}

static int make_video(struct st_check *c, struct st_render *rd, const struct st_check_opts *o,
                      char *err, size_t errlen)
{
    struct st_render_video_spec spec = {.seed = o->seed};
    struct st_render_video_truth truth;
    int rc = st_render_video_truth(&spec, &truth);
    if (media_failed(rc, "video", err, errlen) != 0) {
        return rc;
    }
    struct st_check_step *s = add_media_step(c);
    const char *q = "The video shows a big capital letter that changes every few seconds. List "
                    "the letters in the order they appear, separated by spaces.";
    if (o->video_mp4 != NULL) {
        parts_open(&s->messages, q);
        st_buf_puts(&s->messages, ",{\"type\":\"video_url\",\"video_url\":{\"url\":\"");
        st_render_data_url("video/mp4", o->video_mp4->data, o->video_mp4->len, &s->messages);
        st_buf_puts(&s->messages, "\"}}");
        snprintf(c->note, sizeof(c->note), "%u s MP4 at %u fps, %u segments",
                 truth.nframes / truth.fps, truth.fps, truth.nsegments);
    } else {
        parts_open(&s->messages, "These images are frames of a video, one per segment, in order. "
                                 "Each shows a big capital letter. List the letters in order, "
                                 "separated by spaces.");
        struct st_buf png;
        st_buf_init(&png);
        uint32_t per = truth.segment_s * truth.fps;
        for (uint32_t g = 0; g < truth.nsegments && rc == 0; g++) {
            st_buf_clear(&png);
            uint32_t idx = g * per + per / 2;
            if (idx >= truth.nframes) {
                idx = g * per;
            }
            rc = st_render_video_frame(rd, &spec, idx, &png);
            if (rc == 0) {
                part_image(&s->messages, &png);
            }
        }
        st_buf_release(&png);
        if (media_failed(rc, "video: rendering a frame", err, errlen) != 0) {
            return rc;
        }
        snprintf(c->note, sizeof(c->note), "no MP4: %u frames as images, one per segment",
                 truth.nsegments);
    }
    parts_close(&s->messages);
    msgs_close(&s->messages);
    s->v.kind = ST_VERIFY_ORDERED;
    for (uint32_t g = 0; g < truth.nsegments; g++) {
        st_verifier_item(&s->v, &truth.symbols[g], 1);
        st_buf_printf(&s->expect, "%s%c", g > 0 ? " " : "", truth.symbols[g]);
    }
    s->max_tokens = 512;
    return 0;
}

/* Needle i: "The pass code of the <room> room is <code>." */
static void needle(struct st_buf *b, const char *room, int64_t code)
{
    st_buf_printf(b, "The pass code of the %s room is %lld. ", room, (long long)code);
}

static void make_longret(struct st_check *c, struct st_rng *r, uint64_t ctx, double cpt)
{
    /* About 0.85 of the context at the server's characters a token for this prose. */
    size_t bytes = (size_t)((double)(ctx * 85 / 100) * cpt);
    static const double depth[3] = {0.1, 0.5, 0.9};
    int64_t codes[3];
    struct st_check_step *s = add_step(c);
    struct st_buf text;
    st_buf_init(&text);
    size_t done = 0;
    for (int i = 0; i < 3; i++) {
        size_t at = (size_t)(depth[i] * (double)bytes);
        filler(r, at - done, &text);
        done = at;
        codes[i] = 1000 + (int64_t)st_rng_below(r, 9000);
        needle(&text, rooms[i], codes[i]);
    }
    filler(r, bytes - done, &text);
    st_buf_printf(&text,
                  "\n\nWhat are the pass codes of the %s, %s and %s rooms? Answer in one "
                  "line, like: %s=N %s=N %s=N",
                  rooms[0], rooms[1], rooms[2], rooms[0], rooms[1], rooms[2]);
    msg(&s->messages, "user", text.data);
    msgs_close(&s->messages);
    s->v.kind = ST_VERIFY_WORDS;
    for (int i = 0; i < 3; i++) {
        char num[32];
        int n = snprintf(num, sizeof(num), "%lld", (long long)codes[i]);
        st_verifier_item(&s->v, num, (size_t)n);
        st_buf_printf(&s->expect, "%s%s=%s", i > 0 ? " " : "", rooms[i], num);
    }
    s->max_tokens = 256;
    snprintf(c->note, sizeof(c->note), "about %.0f tokens of %llu, needles at 10%%, 50%%, 90%%",
             (double)bytes / cpt, (unsigned long long)ctx);
    st_buf_release(&text);
}

static int make_longtextimg(struct st_check *c, struct st_rng *r, struct st_render *rd,
                            const struct st_check_opts *o, uint64_t ctx, double cpt, char *err,
                            size_t errlen)
{
    struct st_render_cards_spec spec = {.seed = o->seed, .count = 1};
    struct st_render_cards cards;
    int rc = st_render_cards(rd, &spec, &cards);
    if (media_failed(rc, "long-text-image: rendering the card", err, errlen) != 0) {
        return rc;
    }
    size_t bytes = (size_t)((double)(ctx / 2) * cpt);
    int64_t code = 1000 + (int64_t)st_rng_below(r, 9000);
    struct st_buf text;
    st_buf_init(&text);
    filler(r, bytes / 2, &text);
    needle(&text, rooms[3], code);
    filler(r, bytes / 2, &text);
    struct st_check_step *s = add_media_step(c);
    parts_open(&s->messages, text.data);
    part_image(&s->messages, &cards.cards[0].png);
    part_text(&s->messages, "What does the image show (for a shape, its color and shape), and "
                            "what is the pass code of the silver room? Answer in one line.");
    parts_close(&s->messages);
    msgs_close(&s->messages);
    char num[32];
    int n = snprintf(num, sizeof(num), "%lld", (long long)code);
    s->v.kind = ST_VERIFY_WORDS;
    st_verifier_item(&s->v, cards.cards[0].label, strlen(cards.cards[0].label));
    st_verifier_item(&s->v, num, (size_t)n);
    st_buf_printf(&s->expect, "The image shows %s; the silver room's pass code is %s.",
                  cards.cards[0].label, num);
    s->max_tokens = 256;
    snprintf(c->note, sizeof(c->note), "about %.0f tokens of text and one card",
             (double)bytes / cpt);
    st_buf_release(&text);
    st_render_cards_release(&cards);
    return 0;
}

static void make_throughput(struct st_check *c)
{
    static const char *const prompts[3] = {
        "Write a long, complete Python module that implements a small in-memory key-value store "
        "with expiry, a command-line interface and unit tests. Explain each part as you go.",
        "请写一篇很长的中文散文，描写一座江南小城从清晨到深夜的一天，包括街道、集市、河流、人物和天"
        "气的变化。",
        "Reason step by step, at length, about how many different ways there are to tile a 2 by "
        "n board with 1 by 2 dominoes, derive the recurrence, prove it, and compute it for n up "
        "to 40.",
    };
    for (int run = 0; run < 3; run++) {
        for (int k = 0; k < 3; k++) {
            struct st_check_step *s = add_step(c);
            msg(&s->messages, "user", prompts[k]);
            msgs_close(&s->messages);
            s->max_tokens = 2048;
            s->ignore_eos = 1;
            s->v.kind = ST_VERIFY_COMPLETE;
        }
    }
    snprintf(c->note, sizeof(c->note),
             "code, Chinese prose, reasoning x 3 runs of 2048 tokens; not quality");
}

int st_check_make(enum st_check_kind kind, const struct st_check_opts *opts, struct st_check *c,
                  char *err, size_t errlen)
{
    memset(c, 0, sizeof(*c));
    c->kind = kind;
    c->seed = opts->seed;
    uint64_t ctx = opts->context_tokens != 0 ? opts->context_tokens : 131072;
    double cpt = opts->chars_per_token;
    if (!(cpt >= 1.0 && cpt <= 16.0)) {
        cpt = 4.0;
    }
    struct st_rng r;
    st_rng_seed(&r, opts->seed ^ ((uint64_t)kind * 0x9e3779b97f4a7c15ull));
    struct st_render *rd = NULL;
    int rc = 0;
    if (kind == ST_CHECK_OCR || kind == ST_CHECK_MULTIIMAGE || kind == ST_CHECK_VIDEO ||
        kind == ST_CHECK_LONGTEXTIMG) {
        rc = st_render_new(opts->font, &rd, err, errlen);
        if (rc != 0) {
            return rc;
        }
    }
    switch (kind) {
    case ST_CHECK_ARITH:
        make_arith_step(c, opts->seed);
        snprintf(c->note, sizeof(c->note), "%s word problem",
                 st_arith_tmpl_name((enum st_arith_template)(opts->seed % ST_ARITH_TEMPLATES)));
        break;
    case ST_CHECK_JSON:
        make_json(c, &r);
        snprintf(c->note, sizeof(c->note), "a record validated by a JSON schema");
        break;
    case ST_CHECK_MULTITURN:
        make_multiturn(c, &r);
        snprintf(c->note, sizeof(c->note), "3 facts in early turns, asked in the 4th");
        break;
    case ST_CHECK_OCR:
        rc = make_ocr(c, rd, opts->seed, err, errlen);
        break;
    case ST_CHECK_MULTIIMAGE:
        rc = make_multiimage(c, rd, opts->seed, err, errlen);
        break;
    case ST_CHECK_VIDEO:
        rc = make_video(c, rd, opts, err, errlen);
        break;
    case ST_CHECK_LONGRET:
        make_longret(c, &r, ctx, cpt);
        break;
    case ST_CHECK_LONGTEXTIMG:
        rc = make_longtextimg(c, &r, rd, opts, ctx, cpt, err, errlen);
        break;
    case ST_CHECK_QUEUED: {
        uint32_t n = opts->queued != 0 ? opts->queued : 8;
        for (uint32_t i = 0; i < n; i++) {
            make_arith_step(c, opts->seed + 1 + i);
        }
        c->concurrent = 1;
        snprintf(c->note, sizeof(c->note), "%u arithmetic requests at once", n);
        break;
    }
    case ST_CHECK_THROUGHPUT:
        make_throughput(c);
        break;
    default:
        snprintf(err, errlen, "unknown check kind %d", (int)kind);
        rc = -EINVAL;
    }
    st_render_free(rd);
    if (rc != 0) {
        st_check_release(c);
    }
    return rc;
}

/* ---- verifiers ---- */

void st_check_answer_text(const char *reply, size_t len, const char **out, size_t *outlen)
{
    const char *tag = "</think>";
    size_t tl = strlen(tag);
    size_t from = 0;
    for (size_t i = 0; i + tl <= len; i++) {
        if (memcmp(reply + i, tag, tl) == 0) {
            from = i + tl;
        }
    }
    *out = reply + from;
    *outlen = len - from;
}

static int is_word_char(char ch)
{
    return isalnum((unsigned char)ch) || (unsigned char)ch >= 0x80;
}

/* The first whole-word, case-insensitive occurrence of w in text[from..len), or -1. */
static long find_word(const char *text, size_t len, size_t from, const char *w)
{
    size_t n = strlen(w);
    if (n == 0) {
        return -1;
    }
    for (size_t i = from; i + n <= len; i++) {
        if (strncasecmp(text + i, w, n) != 0) {
            continue;
        }
        int left = i == 0 || !is_word_char(text[i - 1]) || !is_word_char(w[0]);
        int right = i + n == len || !is_word_char(text[i + n]) || !is_word_char(w[n - 1]);
        if (left && right) {
            return (long)i;
        }
    }
    return -1;
}

static void trim(const char **p, size_t *n)
{
    while (*n > 0 && isspace((unsigned char)**p)) {
        (*p)++;
        (*n)--;
    }
    while (*n > 0 && isspace((unsigned char)(*p)[*n - 1])) {
        (*n)--;
    }
}

void st_check_one_line(char *s)
{
    size_t k = 0;
    int gap = 0;
    for (size_t i = 0; s[i] != '\0'; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x20 || ch == 0x7f || ch == ' ') {
            gap = 1;
            continue;
        }
        if (gap && k > 0) {
            s[k++] = ' ';
        }
        gap = 0;
        s[k++] = (char)ch;
    }
    s[k] = '\0';
}

/* Case-insensitive: does s hold w? */
static int has_word(const char *s, const char *w)
{
    size_t n = strlen(w);
    for (; *s != '\0'; s++) {
        if (strncasecmp(s, w, n) == 0) {
            return 1;
        }
    }
    return 0;
}

int st_check_media_refused(long status, const char *message)
{
    if (status >= 400 && status < 500) {
        return 1;
    }
    if (status < 500 || status >= 600 || message == NULL) {
        return 0;
    }
    /* A server error that says what it does not take; a crash or an overload says neither. */
    static const char *const refusal[] = {"unsupported", "not supported", "does not support",
                                          "not accept", "not a multimodal"};
    static const char *const media[] = {"content", "image",      "video", "media",
                                        "modalit", "multimodal", "vision"};
    int refused = 0, what = 0;
    for (size_t i = 0; i < NELEM(refusal); i++) {
        refused |= has_word(message, refusal[i]);
    }
    for (size_t i = 0; i < NELEM(media); i++) {
        what |= has_word(message, media[i]);
    }
    return refused && what;
}

static void quote_snip(char *out, size_t cap, const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 4 < cap && i < 80; i++) {
        unsigned char ch = (unsigned char)s[i];
        out[k++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '.';
    }
    if (n > 80 && k + 4 < cap) {
        out[k++] = '.';
        out[k++] = '.';
        out[k++] = '.';
    }
    out[k] = '\0';
}

static int v_words(const struct st_verifier *v, const char *t, size_t n, char *ev, size_t cap)
{
    uint32_t found = 0;
    const char *missing = NULL;
    const char *it = v->items.data;
    for (uint32_t i = 0; i < v->nitems; i++) {
        if (find_word(t, n, 0, it) >= 0) {
            found++;
        } else if (missing == NULL) {
            missing = it;
        }
        it += strlen(it) + 1;
    }
    double share = v->nitems > 0 ? (double)found / v->nitems : 0;
    int ok = v->nitems > 0 && share + 1e-9 >= v->min_share;
    snprintf(ev, cap, "%u/%u read back (%.0f%%, need %.0f%%)%s%s%s", found, v->nitems, share * 100,
             v->min_share * 100, missing ? "; first missing \"" : "", missing ? missing : "",
             missing ? "\"" : "");
    return ok;
}

static int v_ordered(const struct st_verifier *v, const char *t, size_t n, char *ev, size_t cap)
{
    size_t at = 0;
    const char *it = v->items.data;
    for (uint32_t i = 0; i < v->nitems; i++) {
        long p = find_word(t, n, at, it);
        if (p < 0) {
            char s[96];
            quote_snip(s, sizeof(s), t, n);
            snprintf(ev, cap, "item %u \"%s\" not found in order (%u/%u); reply \"%s\"", i + 1, it,
                     i, v->nitems, s);
            return 0;
        }
        at = (size_t)p + strlen(it);
        it += strlen(it) + 1;
    }
    snprintf(ev, cap, "all %u items in order", v->nitems);
    return 1;
}

/* The last number (optional sign, digits, fraction, exponent) in t as a double. */
static int last_number(const char *t, size_t n, double *out)
{
    int found = 0;
    char tmp[64];
    for (size_t i = 0; i < n; i++) {
        int start = isdigit((unsigned char)t[i]) &&
                    (i == 0 || (!isdigit((unsigned char)t[i - 1]) && t[i - 1] != '.'));
        if (!start) {
            continue;
        }
        size_t b = i > 0 && t[i - 1] == '-' ? i - 1 : i;
        size_t e = i;
        while (e < n && e - b < sizeof(tmp) - 1 &&
               (isdigit((unsigned char)t[e]) || t[e] == '.' || t[e] == ',' || t[e] == 'e' ||
                t[e] == 'E' ||
                ((t[e] == '-' || t[e] == '+') && (t[e - 1] == 'e' || t[e - 1] == 'E')))) {
            e++;
        }
        size_t k = 0;
        for (size_t j = b; j < e; j++) {
            if (t[j] != ',') {
                tmp[k++] = t[j];
            }
        }
        while (k > 0 && (tmp[k - 1] == '.' || tmp[k - 1] == 'e' || tmp[k - 1] == 'E')) {
            k--;
        }
        tmp[k] = '\0';
        char *end;
        errno = 0;
        double d = strtod(tmp, &end);
        if (end != tmp && errno == 0) {
            *out = d;
            found = 1;
        }
        i = e;
    }
    return found;
}

/* The JSON text of a reply: a fenced block's body, else the outermost {...} or [...]. */
static void json_span(const char *t, size_t n, const char **out, size_t *outlen)
{
    const char *f = memmem(t, n, "```", 3);
    if (f != NULL) {
        const char *body = memchr(f, '\n', (size_t)(t + n - f));
        if (body != NULL) {
            body++;
            const char *end = memmem(body, (size_t)(t + n - body), "```", 3);
            if (end != NULL) {
                *out = body;
                *outlen = (size_t)(end - body);
                return;
            }
        }
    }
    size_t b = 0;
    while (b < n && t[b] != '{' && t[b] != '[') {
        b++;
    }
    size_t e = n;
    while (e > b && t[e - 1] != '}' && t[e - 1] != ']') {
        e--;
    }
    /* An opening bracket never closed (a reply cut at max_tokens): all of it from there, so the
     * validator says where it ends. */
    if (e <= b + 1) {
        e = n;
    }
    *out = t + b;
    *outlen = e > b ? e - b : 0;
}

static int v_schema(const struct st_verifier *v, const char *t, size_t n, char *ev, size_t cap)
{
    struct st_schema *s;
    struct st_schema_diag d;
    int rc = st_schema_compile(v->want.data, v->want.len, &s, &d);
    if (rc != 0) {
        snprintf(ev, cap, "bad schema at %s: %s", d.path, d.msg);
        return rc;
    }
    const char *j;
    size_t jl;
    json_span(t, n, &j, &jl);
    struct st_schema_result res;
    rc = st_schema_validate(s, j, jl, &res);
    st_schema_free(s);
    if (rc != 0 || !res.ok) {
        /* The evidence quotes the reply itself (its start) and its length, not the JSON span: a
         * reply with no JSON in it is not an empty reply (llama.cpp b4748 ignores response_format
         * and a random-weight model wrote 3,801 characters with a '[' and no ']'). */
        char sn[96];
        quote_snip(sn, sizeof(sn), t, n);
        if (jl == 0) {
            snprintf(ev, cap, "no JSON object or array in the reply (%zu characters): \"%s\"", n,
                     sn);
        } else if (rc != 0 && res.reason[0] == '\0') {
            snprintf(ev, cap, "not JSON (%s); reply (%zu characters) \"%s\"", st_strerror(rc), n,
                     sn);
        } else {
            snprintf(ev, cap, "at \"%s\": %s; reply (%zu characters) \"%s\"", res.instance_path,
                     res.reason, n, sn);
        }
        return 0;
    }
    snprintf(ev, cap, "valid against the schema");
    return 1;
}

static int v_code(const struct st_verifier *v, const char *t, size_t n, char *ev, size_t cap)
{
    struct st_buf code;
    st_buf_init(&code);
    int rc = st_sandbox_extract_code(t, n, ST_SANDBOX_LANG_PYTHON, &code);
    if (rc == ST_ENOTFOUND) {
        /* No fenced block: the whole answer is the program (a bare reply, or the simulator's
         * one-line expected answer). */
        trim(&t, &n);
        st_buf_clear(&code);
        st_buf_append(&code, t, n);
        rc = n > 0 ? 0 : ST_ENOTFOUND;
    }
    if (rc != 0) {
        snprintf(ev, cap, "no Python code block (%s)", st_strerror(rc));
        st_buf_release(&code);
        return 0;
    }
    st_buf_puts(&code, "\n\n# ---- fixed tests ----\n");
    st_buf_append(&code, v->want.data, v->want.len);
    st_buf_putc(&code, '\n');
    struct st_sandbox_cfg cfg;
    st_sandbox_cfg_init(&cfg);
    struct st_sandbox_prog prog;
    st_sandbox_prog_python(&prog, code.data, code.len);
    struct st_sandbox_result res;
    memset(&res, 0, sizeof(res));
    rc = st_sandbox_run(&cfg, &prog.job, &res);
    int ok = 0;
    if (rc != 0) {
        snprintf(ev, cap, "sandbox: %s %s", st_strerror(rc), res.error);
        ok = rc;
    } else if (res.verdict == ST_SANDBOX_PASS) {
        snprintf(ev, cap, "fixed tests pass (%llu ms)", (unsigned long long)res.wall_ms);
        ok = 1;
    } else {
        char sn[96];
        const char *tail = res.stderr_tail != NULL ? res.stderr_tail : "";
        size_t tl = res.stderr_tail != NULL ? res.stderr_len : 0;
        if (tl > 80) {
            tail += tl - 80;
            tl = 80;
        }
        quote_snip(sn, sizeof(sn), tail, tl);
        snprintf(ev, cap, "fixed tests fail: %s (exit %d) %s%s",
                 st_sandbox_verdict_name(res.verdict), res.exit_code, sn, res.error);
    }
    st_sandbox_result_release(&res);
    st_buf_release(&code);
    return ok;
}

int st_verify(const struct st_verifier *v, const char *reply, size_t len, char *evidence,
              size_t cap)
{
    char dummy[8];
    if (evidence == NULL) {
        evidence = dummy;
        cap = sizeof(dummy);
    }
    const char *t;
    size_t n;
    st_check_answer_text(reply, len, &t, &n);
    char sn[96];
    switch (v->kind) {
    case ST_VERIFY_EXACT: {
        trim(&t, &n);
        int ok = n == v->want.len && memcmp(t, v->want.data, n) == 0;
        quote_snip(sn, sizeof(sn), t, n);
        snprintf(evidence, cap, ok ? "exact match" : "expected \"%s\", got \"%s\"",
                 ok ? "" : v->want.data, sn);
        return ok;
    }
    case ST_VERIFY_REGEX: {
        regex_t re;
        if (regcomp(&re, v->want.data, REG_EXTENDED | REG_NOSUB) != 0) {
            snprintf(evidence, cap, "bad regex");
            return ST_EPARSE;
        }
        struct st_buf z;
        st_buf_init(&z);
        st_buf_append(&z, t, n);
        st_buf_putc(&z, '\0');
        int ok = regexec(&re, z.data, 0, NULL, 0) == 0;
        regfree(&re);
        st_buf_release(&z);
        quote_snip(sn, sizeof(sn), t, n);
        snprintf(evidence, cap, "/%s/ %s \"%s\"", v->want.data, ok ? "matches" : "does not match",
                 sn);
        return ok;
    }
    case ST_VERIFY_NUMERIC: {
        double got;
        if (!last_number(t, n, &got)) {
            quote_snip(sn, sizeof(sn), t, n);
            snprintf(evidence, cap, "no number in \"%s\"", sn);
            return 0;
        }
        double d = got - v->num;
        int ok = d <= v->tol && -d <= v->tol;
        snprintf(evidence, cap, "got %.10g, expected %.10g +- %.3g", got, v->num, v->tol);
        return ok;
    }
    case ST_VERIFY_SCHEMA:
        return v_schema(v, t, n, evidence, cap);
    case ST_VERIFY_CODE:
        return v_code(v, t, n, evidence, cap);
    case ST_VERIFY_ARITH: {
        int64_t got = 0;
        int rc = st_arith_extract(t, n, &got);
        if (rc != 0) {
            snprintf(evidence, cap, "no integer answer (%s), expected %lld", st_strerror(rc),
                     (long long)v->answer);
            return 0;
        }
        snprintf(evidence, cap, "got %lld, expected %lld", (long long)got, (long long)v->answer);
        return got == v->answer;
    }
    case ST_VERIFY_WORDS:
        return v_words(v, t, n, evidence, cap);
    case ST_VERIFY_ORDERED:
        return v_ordered(v, t, n, evidence, cap);
    case ST_VERIFY_COMPLETE:
        snprintf(evidence, cap, "completed");
        return 1;
    default:
        snprintf(evidence, cap, "unknown verifier");
        return -EINVAL;
    }
}
