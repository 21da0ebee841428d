/*
 * Model-mode reply text: the expected answer (right or perturbed) and the filler after it. See
 * answer.h. Pure; the answer is at most a few KiB, so token offsets are kept in a plain array.
 */
#include "sim/answer.h"

#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/rng.h"
#include "base/xalloc.h"
#include "sim/prompt.h"
#include "sim/spec.h"

/* Code points a token, as in sim/model/tok.h. */
#define CPS_PER_TOKEN 4u

void st_sim_answer_init(struct st_sim_answer *a)
{
    st_buf_init(&a->text);
    a->tokens = 0;
    a->starts = NULL;
}

void st_sim_answer_release(struct st_sim_answer *a)
{
    st_buf_release(&a->text);
    st_freep(&a->starts);
    a->tokens = 0;
}

int st_sim_answer_set(struct st_sim_answer *a, const char *s, size_t n)
{
    if (n > ST_SIM_ANSWER_MAX_BYTES) {
        return ST_ETOOBIG;
    }
    st_buf_clear(&a->text);
    st_freep(&a->starts);
    a->tokens = 0;
    if (n == 0) {
        return 0;
    }
    /* At most n code points, so at most n / 4 + 1 tokens. */
    a->starts = st_xmalloc((n / CPS_PER_TOKEN + 2) * sizeof(*a->starts));
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    uint64_t cps = 0;
    while (i < n) {
        if (cps % CPS_PER_TOKEN == 0) {
            a->starts[a->tokens++] = a->text.len;
        }
        size_t l = st_sim_cp_len(u + i, n - i);
        st_buf_append(&a->text, s + i, l);
        i += l;
        cps++;
    }
    while (cps % CPS_PER_TOKEN != 0) {
        st_buf_putc(&a->text, ' ');
        cps++;
    }
    a->starts[a->tokens] = a->text.len;
    return 0;
}

/* Appends s[0..n) escaped for the inside of a JSON string. */
static void put_escaped(struct st_buf *out, const char *s, size_t n)
{
    size_t at = out->len;
    st_json_quote(out, s, n);
    /* Drop the quotes st_json_quote put around it. */
    size_t q = out->len - at;
    memmove(out->data + at, out->data + at + 1, q - 2);
    out->len -= 2;
    out->data[out->len] = '\0';
}

void st_sim_answer_render(const struct st_sim_answer *a, uint64_t t0, uint64_t k,
                          struct st_buf *out)
{
    uint64_t end = t0 + k;
    if (t0 < a->tokens) {
        uint64_t last = end < a->tokens ? end : a->tokens;
        size_t from = a->starts[t0], to = a->starts[last];
        put_escaped(out, a->text.data + from, to - from);
        t0 = last;
    }
    if (t0 >= end) {
        return;
    }
    st_buf_reserve(out, (size_t)(end - t0) * ST_SIM_TOKEN_BYTES);
    for (uint64_t i = t0; i < end; i++) {
        char tok[ST_SIM_TOKEN_BYTES];
        st_sim_token_text(i, tok);
        st_buf_append(out, tok, sizeof(tok));
    }
}

int st_sim_answer_wrong(double error_rate, uint64_t seed, uint64_t key_hash)
{
    if (error_rate <= 0.0) {
        return 0;
    }
    if (error_rate >= 1.0) {
        return 1;
    }
    struct st_rng r;
    st_rng_seed(&r, seed ^ (key_hash * 0xbf58476d1ce4e5b9ull) ^ 0x5e7e5e7e5e7e5e7eull);
    return st_rng_unit(&r) < error_rate;
}

void st_sim_answer_perturb(const char *s, size_t n, struct st_buf *out)
{
    size_t at = out->len;
    int changed = 0;
    st_buf_append(out, s, n);
    char *p = out->data + at;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c >= '0' && c <= '9') {
            p[i] = (char)(c == '9' ? '0' : c + 1);
            changed = 1;
        } else if (c >= 'a' && c <= 'z') {
            p[i] = (char)(c == 'z' ? 'a' : c + 1);
            changed = 1;
        } else if (c >= 'A' && c <= 'Z') {
            p[i] = (char)(c == 'Z' ? 'A' : c + 1);
            changed = 1;
        }
    }
    if (!changed) {
        out->len = at;
        st_buf_puts(out, "not ");
        st_buf_append(out, s, n);
    }
}
