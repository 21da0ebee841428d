/*
 * The simulator's deterministic tokenizer: 4 code points a token, chained FNV-1a block hashes for
 * the prefix cache, the chat template and the image patch rule. See tok.h for the contract and
 * docs/simulator.md ("## Tokenizer") for the rules users rely on. Pure: the same bytes give the
 * same counts and hashes on every run and platform (FNV-1a is defined on bytes, no endianness or
 * locale enters). Work is one pass over the text, O(len), no allocation.
 */
#include "sim/model/tok.h"

#include <string.h>

#include "base/hash.h"

/* The chat template's fixed texts (docs/simulator.md, "## Tokenizer"). */
#define TOK_ROLE_OPEN "<|"
#define TOK_ROLE_CLOSE "|>\n"
#define TOK_GENERATION_PROMPT "<|assistant|>\n"

static int cont(unsigned char c)
{
    return (c & 0xC0) == 0x80;
}

/*
 * Length of the code point that starts at s[0] (n >= 1 bytes available): the length of a
 * well-formed UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, nothing past
 * U+10FFFF), or 1 for a byte that does not start one, which then counts as a code point of its
 * own. A truncated sequence therefore counts one per byte.
 */
static size_t cp_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80) {
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        return n >= 2 && cont(s[1]) ? 2 : 1;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (n < 3 || !cont(s[1]) || !cont(s[2])) {
            return 1;
        }
        if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F)) {
            return 1; /* overlong, or a UTF-16 surrogate */
        }
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (n < 4 || !cont(s[1]) || !cont(s[2]) || !cont(s[3])) {
            return 1;
        }
        if ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] > 0x8F)) {
            return 1; /* overlong, or past U+10FFFF */
        }
        return 4;
    }
    return 1; /* a stray continuation byte, C0, C1 or F5..FF */
}

static uint64_t count_codepoints(const char *text, size_t len)
{
    const unsigned char *s = (const unsigned char *)text;
    uint64_t n = 0;
    size_t i = 0;
    while (i < len) {
        i += cp_len(s + i, len - i);
        n++;
    }
    return n;
}

uint64_t st_tok_count(const char *text, size_t len)
{
    uint64_t cps = count_codepoints(text, len);
    return (cps + ST_TOK_CODEPOINTS - 1) / ST_TOK_CODEPOINTS;
}

uint64_t st_tok_block_hashes(const char *text, size_t len, uint32_t page_size, uint64_t *out,
                             uint64_t max)
{
    if (page_size == 0) {
        return 0;
    }
    const unsigned char *s = (const unsigned char *)text;
    const uint64_t block_cps = (uint64_t)page_size * ST_TOK_CODEPOINTS;
    uint64_t blocks = 0;
    uint64_t cps = 0; /* code points in the current block so far */
    uint64_t h = ST_HASH_INIT;
    size_t start = 0; /* first byte of the current block */
    size_t i = 0;
    while (i < len) {
        i += cp_len(s + i, len - i);
        if (++cps < block_cps) {
            continue;
        }
        /* Block `blocks` is bytes [start, i). Past max only the count is needed. */
        if (blocks < max) {
            h = st_hash_update(h, s + start, i - start);
            if (h == 0) {
                h = 1; /* 0 is the prefix cache's root; the chain continues from 1 */
            }
            out[blocks] = h;
        }
        blocks++;
        cps = 0;
        start = i;
    }
    return blocks;
}

void st_tok_render_message(struct st_buf *out, const char *role, size_t role_len,
                           const char *content, size_t content_len)
{
    st_buf_reserve(out, role_len + content_len + strlen(TOK_ROLE_OPEN TOK_ROLE_CLOSE) + 1);
    st_buf_puts(out, TOK_ROLE_OPEN);
    st_buf_append(out, role, role_len);
    st_buf_puts(out, TOK_ROLE_CLOSE);
    st_buf_append(out, content, content_len);
    st_buf_putc(out, '\n');
}

void st_tok_render_generation_prompt(struct st_buf *out)
{
    st_buf_puts(out, TOK_GENERATION_PROMPT);
}

uint64_t st_tok_image(uint32_t width, uint32_t height, uint32_t patch)
{
    if (patch == 0) {
        return 0;
    }
    uint64_t cols = ((uint64_t)width + patch - 1) / patch;
    uint64_t rows = ((uint64_t)height + patch - 1) / patch;
    return cols * rows;
}
