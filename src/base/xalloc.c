/*
 * Aborting allocators. See xalloc.h.
 */
#include "base/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void oom(size_t n)
{
    fprintf(stderr, "servetune: out of memory allocating %zu bytes\n", n);
    abort();
}

void *st_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        oom(n);
    }
    return p;
}

void *st_xcalloc(size_t nmemb, size_t size)
{
    void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
    if (!p) {
        oom(nmemb * size);
    }
    return p;
}

void *st_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        oom(n);
    }
    return q;
}

char *st_xstrdup(const char *s)
{
    return st_xstrndup(s, strlen(s));
}

char *st_xstrndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *p = st_xmalloc(len + 1);
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}
