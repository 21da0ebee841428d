/*
 * The simulator's deterministic tokenizer, shared by /tokenize, usage counts and the prefix cache.
 * Rule (docs/simulator.md): the text is split into tokens of 4 Unicode code points each (the last
 * may be shorter); invalid UTF-8 bytes count as one code point each. So English prose comes to
 * about 4.2 characters a token, like real BPE tokenizers, and a shared text prefix of c code
 * points shares floor(c / 4) tokens. Chat messages are rendered with a fixed template before
 * tokenizing. Images count by a patch rule, video by frames. Pure.
 */
#ifndef ST_SIM_MODEL_TOK_H
#define ST_SIM_MODEL_TOK_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

#define ST_TOK_CODEPOINTS 4

/* Number of tokens in text[0..len). */
uint64_t st_tok_count(const char *text, size_t len);

/*
 * Chained hashes of the full blocks of page_size tokens of text (the last partial block has none):
 * hash[i] = H(hash[i-1], bytes of block i). Appends at most max hashes to out; returns how many
 * full blocks the text has (which may exceed max).
 * Exactly: block i is the bytes of code points [4 * page_size * i, 4 * page_size * (i + 1));
 * hash[i] = st_hash_update(hash[i-1], block i) from base/hash.h (64-bit FNV-1a continued from the
 * previous hash's value, hash[-1] = ST_HASH_INIT), except that a result of 0 becomes 1 (0 is the
 * prefix cache's root), and the chain continues from the value written. page_size 0 gives 0
 * blocks. out may be NULL when max is 0.
 */
uint64_t st_tok_block_hashes(const char *text, size_t len, uint32_t page_size, uint64_t *out,
                             uint64_t max);

/* Renders one chat message into the prompt text the tokenizer sees: "<|role|>\n" content "\n". */
void st_tok_render_message(struct st_buf *out, const char *role, size_t role_len,
                           const char *content, size_t content_len);
/* The assistant header appended after the last message: "<|assistant|>\n". */
void st_tok_render_generation_prompt(struct st_buf *out);

/* Tokens of a width x height image with patch-pixel patches: ceil(w/patch) * ceil(h/patch);
 * 0 when patch is 0. */
uint64_t st_tok_image(uint32_t width, uint32_t height, uint32_t patch);

#endif
