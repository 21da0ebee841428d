/*
 * A growable byte buffer, always NUL-terminated after len (so text can be passed to C string
 * functions). Caller-embedded: st_buf_init() on a struct the caller owns, st_buf_release() to
 * free the storage. Growth aborts on OOM (st_xrealloc); callers that read outside bytes enforce
 * their own maxima before appending.
 */
#ifndef ST_BASE_BUF_H
#define ST_BASE_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct st_buf {
    char *data; /* owned; NULL until the first append */
    size_t len;
    size_t cap;
};

void st_buf_init(struct st_buf *b);
void st_buf_release(struct st_buf *b);
/* Keeps the storage, sets len to 0. */
void st_buf_clear(struct st_buf *b);
/* Makes room for n more bytes (plus the terminator). */
void st_buf_reserve(struct st_buf *b, size_t n);
void st_buf_append(struct st_buf *b, const void *p, size_t n);
void st_buf_puts(struct st_buf *b, const char *s);
void st_buf_putc(struct st_buf *b, char c);
void st_buf_printf(struct st_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void st_buf_vprintf(struct st_buf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* Removes the first n bytes (n <= len), moving the rest to the front. */
void st_buf_consume(struct st_buf *b, size_t n);
/* Returns the text ("" when empty); borrowed, valid until the next change to b. */
const char *st_buf_str(const struct st_buf *b);
/* Hands the storage to the caller (free() it) and leaves b empty. Never NULL. */
char *st_buf_take(struct st_buf *b);

#endif
