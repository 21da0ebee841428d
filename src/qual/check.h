/*
 * Qualification checks: each a seeded generator of request steps (the messages of one chat
 * request, its token cap, its expected answer) and a verifier of the reply text, with the
 * evidence kept as one line. Pure: a function of (kind, seed, options) and (step, reply); the
 * sending lives in runner.c and the printing in cli/qualify.c. Not a benchmark: the throughput
 * check only asks that every fixed-length request completes, its figures are reported beside it.
 *
 * A check passes when every step's verifier passes. The expected answer of a step is the text the
 * verifier accepts; it goes to the simulator in X-Servetune-Expect, never to a real server.
 */
#ifndef ST_QUAL_CHECK_H
#define ST_QUAL_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/status.h"

enum st_check_kind {
    ST_CHECK_ARITH = 0,   /* "arithmetic": a word problem, the integer answer */
    ST_CHECK_JSON,        /* "json": a record as JSON, validated against a schema */
    ST_CHECK_MULTITURN,   /* "multi-turn": facts given in early turns, asked for last */
    ST_CHECK_OCR,         /* "ocr": a 2048x1536 sheet of words, the share read back */
    ST_CHECK_MULTIIMAGE,  /* "multi-image": four cards, their labels in order */
    ST_CHECK_VIDEO,       /* "video": 120 s clip, its segment symbols in order */
    ST_CHECK_LONGRET,     /* "long-retrieval": needles at known depths near the context */
    ST_CHECK_LONGTEXTIMG, /* "long-text-image": a long text, a card, a needle */
    ST_CHECK_QUEUED,      /* "queued": more arithmetic requests than run at once */
    ST_CHECK_THROUGHPUT,  /* "throughput-categories": 3 categories x 3 runs of fixed outputs */
    ST_CHECK_KINDS,       /* count, not a kind */
};

enum st_verify_kind {
    ST_VERIFY_EXACT = 0, /* the reply, trimmed, equals want */
    ST_VERIFY_REGEX,     /* want, a POSIX ERE, matches somewhere in the reply */
    ST_VERIFY_NUMERIC,   /* the reply's final number is within tol of num */
    ST_VERIFY_SCHEMA,    /* the reply (a fenced block or the outermost {...}) validates */
    ST_VERIFY_CODE,      /* the reply's code block passes want (tests) in the sandbox */
    ST_VERIFY_ARITH,     /* st_arith_check's reading of the final integer equals answer */
    ST_VERIFY_WORDS,     /* at least min_share of items occur as whole words (any case) */
    ST_VERIFY_ORDERED,   /* items occur in order (any case) */
    ST_VERIFY_COMPLETE,  /* any reply counts: the request only has to complete */
    ST_VERIFY_KINDS,
};

/* What a verifier compares with. */
struct st_verifier {
    enum st_verify_kind kind;
    struct st_buf want;  /* owned: exact text, regex, schema JSON or code tests */
    double num, tol;     /* NUMERIC */
    int64_t answer;      /* ARITH */
    struct st_buf items; /* owned: WORDS/ORDERED items, each NUL-terminated */
    uint32_t nitems;
    double min_share; /* WORDS: 0 < share <= 1 */
};

/* One chat request of a check. */
struct st_check_step {
    struct st_buf messages;        /* owned: the JSON array of messages */
    struct st_buf response_format; /* owned: a JSON object, empty when none */
    struct st_buf expect;          /* owned: an answer the verifier accepts (one line) */
    uint32_t max_tokens;
    int ignore_eos; /* fixed-length output (throughput only) */
    int media;      /* carries images or video: a refusal (st_check_media_refused) makes the
                     * check unsupported */
    struct st_verifier v;
};

struct st_check_opts {
    uint64_t seed;
    uint64_t context_tokens;        /* the server's context; 0: 131072 */
    double chars_per_token;         /* of the long checks' prose on this server; 0: 4 */
    uint32_t queued;                /* requests of the queued check; 0: 8 */
    const struct st_buf *video_mp4; /* borrowed MP4 of the clip, or NULL: frames as images */
    const char *font;               /* NULL: the render default */
};

struct st_check {
    enum st_check_kind kind;
    uint64_t seed;
    struct st_check_step *steps; /* owned, nsteps */
    uint32_t nsteps;
    int concurrent; /* the steps are sent at once (queued) */
    char note[128]; /* what the check is, for the report */
};

/* Appends about nbytes of the long checks' seeded prose (to measure its characters a token on a
 * server's tokenizer). Pure. */
void st_check_prose(uint64_t seed, size_t nbytes, struct st_buf *out);

/* "arithmetic", ...; "?" when out of range. Static. */
const char *st_check_name(enum st_check_kind k);
/* The kind named name. 0 or ST_ENOTFOUND. */
int st_check_kind_of(const char *name, enum st_check_kind *out) ST_WUR;

void st_verifier_init(struct st_verifier *v);
void st_verifier_release(struct st_verifier *v);
/* Appends an item to a WORDS or ORDERED verifier. */
void st_verifier_item(struct st_verifier *v, const char *s, size_t n);

void st_check_step_init(struct st_check_step *s);
void st_check_step_release(struct st_check_step *s);

/*
 * Builds check kind for opts into c (release with st_check_release; initialized here). Media are
 * rendered here (a font is needed). Returns 0; -EINVAL for a bad option; the renderer's code
 * with err filled.
 */
int st_check_make(enum st_check_kind kind, const struct st_check_opts *opts, struct st_check *c,
                  char *err, size_t errlen) ST_WUR;
void st_check_release(struct st_check *c);

/*
 * The text a model's reply is read from: what follows the last "</think>", else all of it.
 */
void st_check_answer_text(const char *reply, size_t len, const char **out, size_t *outlen);

/*
 * Folds s (NUL-terminated, in place) into one line: every run of control characters and white
 * space becomes one space, and leading and trailing spaces go. Evidence and a server's error
 * message (which may echo a whole request over many lines) are kept this way.
 */
void st_check_one_line(char *s);

/*
 * 1 when an error answer to a step with media says the server does not take them: any 4xx, or a
 * 5xx whose message names an unsupported content (part) type, image, video or modality, as
 * llama.cpp b4748's HTTP 500 `Unsupported content part type: "image_url"` does; else 0. status
 * is the HTTP status, message the server's (may be NULL). Pure.
 */
int st_check_media_refused(long status, const char *message);

/*
 * Runs v on reply. Returns 1 pass, 0 fail, or a negative code (a bad regex or schema, the
 * sandbox failing to start); evidence (NUL-terminated, may be NULL) gets one line either way.
 * CODE verifiers run Python in the sandbox: not pure, and seconds long.
 */
int st_verify(const struct st_verifier *v, const char *reply, size_t len, char *evidence,
              size_t cap);

#endif
