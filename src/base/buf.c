/*
 * Growable NUL-terminated byte buffer. See buf.h.
 */
#include "base/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"

void st_buf_init(struct st_buf *b)
{
    *b = (struct st_buf){0};
}

void st_buf_release(struct st_buf *b)
{
    st_freep(&b->data);
    st_buf_init(b);
}

void st_buf_clear(struct st_buf *b)
{
    b->len = 0;
    if (b->data) {
        b->data[0] = '\0';
    }
}

void st_buf_reserve(struct st_buf *b, size_t n)
{
    size_t need = b->len + n + 1;
    if (need <= b->cap) {
        return;
    }
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) {
        cap *= 2;
    }
    b->data = st_xrealloc(b->data, cap);
    b->cap = cap;
    b->data[b->len] = '\0'; /* a first allocation must already be a valid "" */
}

void st_buf_append(struct st_buf *b, const void *p, size_t n)
{
    st_buf_reserve(b, n);
    if (n) {
        memcpy(b->data + b->len, p, n);
    }
    b->len += n;
    b->data[b->len] = '\0';
}

void st_buf_puts(struct st_buf *b, const char *s)
{
    st_buf_append(b, s, strlen(s));
}

void st_buf_putc(struct st_buf *b, char c)
{
    st_buf_reserve(b, 1);
    b->data[b->len++] = c;
    b->data[b->len] = '\0';
}

void st_buf_vprintf(struct st_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    st_buf_reserve(b, 64);
    int n = vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
    if (n < 0) {
        b->data[b->len] = '\0'; /* drop any partial output */
        va_end(ap2);
        return;
    }
    if ((size_t)n >= b->cap - b->len) {
        st_buf_reserve(b, (size_t)n);
        vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap2);
    }
    va_end(ap2);
    b->len += (size_t)n;
}

void st_buf_printf(struct st_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    st_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

void st_buf_consume(struct st_buf *b, size_t n)
{
    if (n >= b->len) {
        st_buf_clear(b);
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

const char *st_buf_str(const struct st_buf *b)
{
    return b->data ? b->data : "";
}

char *st_buf_take(struct st_buf *b)
{
    char *p = b->data ? b->data : st_xstrdup("");
    st_buf_init(b);
    return p;
}
