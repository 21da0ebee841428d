/*
 * Model-mode prompts: what the simulator's tokenizer (sim/model/tok.h) sees for a chat or
 * completions request, so that token counts, /tokenize and the prefix cache's block hashes all
 * come from one text. Pure: no I/O, no clock.
 *
 * Chat: every message is rendered with st_tok_render_message (role, then its text parts in order)
 * and the generation prompt is appended. A media part becomes 4 * T code points of letters drawn
 * from a hash of its bytes, where T is its token count, so it adds exactly T tokens wherever it
 * sits and two requests with the same image share prefix-cache blocks across it:
 *   image: T = st_tok_image(width, height, patch), width and height from the PNG IHDR or the JPEG
 *          SOF header of a base64 data URL;
 *   video: T = num_frames * st_tok_image(width, height, patch), from the part's num_frames,
 *          width and height (defaults 32, 512, 512).
 * Completions: a string prompt as is; a token-id array as one 4-letter group per id.
 * Expected workload: prompts up to a few MiB; one pass over the text.
 */
#ifndef ST_SIM_PROMPT_H
#define ST_SIM_PROMPT_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/status.h"

/* Video defaults when a part does not say (the shape of vLLM's --limit-mm-per-prompt example). */
#define ST_SIM_VIDEO_FRAMES 32u
#define ST_SIM_VIDEO_SIDE 512u
/* Largest width, height or frame count accepted. */
#define ST_SIM_MEDIA_MAX_SIDE 65535u
#define ST_SIM_MEDIA_MAX_FRAMES 100000u

struct st_sim_prompt {
    struct st_buf text;    /* owned: the prompt as the tokenizer sees it */
    uint64_t tokens;       /* prompt tokens: st_tok_count(text) + unexpanded */
    uint64_t media_tokens; /* of which images and video */
    uint64_t unexpanded;   /* media tokens counted but not written to text (past max_text_tokens) */
    uint32_t images;
    uint32_t videos;
    const char *refused; /* static: the part type a text-only model refused ("image_url",
                          * "video_url"), else NULL */
};

struct st_sim_prompt_opts {
    uint32_t patch;           /* pixels per patch side; 0 = a text-only model (media refused) */
    uint64_t max_text_tokens; /* media past this many tokens is counted but not written */
    int generation_prompt;    /* chat: append the assistant header (1 for completions requests) */
};

void st_sim_prompt_init(struct st_sim_prompt *p);
void st_sim_prompt_release(struct st_sim_prompt *p);

/*
 * Renders the chat messages array (token msgs of d, borrowed for the call) into p (cleared first).
 * scratch is caller scratch. Returns 0, or ST_EPARSE with a sentence in err: messages not an
 * array of objects, a role or text that is not a string, a media part without a readable URL, an
 * image that is neither PNG nor JPEG, a bad video field, or media sent to a text-only model (then
 * p->refused names the part type).
 */
int st_sim_prompt_chat(struct st_sim_prompt *p, const struct st_json *d, int msgs,
                       const struct st_sim_prompt_opts *o, struct st_buf *scratch, char *err,
                       size_t errlen) ST_WUR;

/*
 * Renders a completions prompt (token pr of d): a string, or an array of token ids (integers in
 * [0, 2^32)). Same errors as st_sim_prompt_chat.
 */
int st_sim_prompt_completion(struct st_sim_prompt *p, const struct st_json *d, int pr,
                             struct st_buf *scratch, char *err, size_t errlen) ST_WUR;

/*
 * Decodes standard base64 (RFC 4648, '=' padding optional, no white space) of in[0..n) and
 * appends at most max_out bytes to out. Returns 0, or ST_EPARSE on a byte outside the alphabet or
 * a length that cannot be base64.
 */
int st_sim_base64_decode(const char *in, size_t n, size_t max_out, struct st_buf *out) ST_WUR;

/* Width and height from a PNG's IHDR (the first 24 bytes). 0, or ST_EPARSE when not a PNG. */
int st_sim_png_size(const unsigned char *b, size_t n, uint32_t *w, uint32_t *h) ST_WUR;
/* Width and height from a JPEG's first SOF segment. 0, or ST_EPARSE. */
int st_sim_jpeg_size(const unsigned char *b, size_t n, uint32_t *w, uint32_t *h) ST_WUR;

/*
 * Width and height of the image in a data URL "data:image/...;base64,<data>" (url[0..n)).
 * scratch is caller scratch. 0, or ST_EPARSE (not a base64 data URL, or neither PNG nor JPEG).
 */
int st_sim_data_url_image_size(const char *url, size_t n, struct st_buf *scratch, uint32_t *w,
                               uint32_t *h) ST_WUR;

/*
 * Appends the simulator's token ids of text[0..len) to out as JSON numbers separated by commas
 * (no brackets): one id per token (4 code points), a hash of its bytes modulo vocab (vocab 0 is
 * taken as 2^32). At most max_ids ids are written; returns the token count.
 */
uint64_t st_sim_prompt_ids(const char *text, size_t len, uint32_t vocab, uint64_t max_ids,
                           struct st_buf *out);

/* Length of the UTF-8 code point at s[0] (n >= 1): 1..4, or 1 for a byte that starts none. */
size_t st_sim_cp_len(const unsigned char *s, size_t n);

#endif
