/*
 * Allocation that never returns NULL: out of memory aborts with a message on stderr (the one
 * place below cli/ allowed to write there, since the process cannot continue). Every buffer in
 * the project has a maximum, so big input gives ST_ETOOBIG long before this matters.
 */
#ifndef ST_BASE_XALLOC_H
#define ST_BASE_XALLOC_H

#include <stddef.h>

void *st_xmalloc(size_t n) __attribute__((malloc, returns_nonnull));
void *st_xcalloc(size_t nmemb, size_t size) __attribute__((malloc, returns_nonnull));
void *st_xrealloc(void *p, size_t n) __attribute__((returns_nonnull));
char *st_xstrdup(const char *s) __attribute__((malloc, returns_nonnull));
/* Copies at most n bytes of s and always NUL-terminates. */
char *st_xstrndup(const char *s, size_t n) __attribute__((malloc, returns_nonnull));

/* Frees *pp and clears it. pp must not be NULL; *pp may be. */
#define st_freep(pp)                                                                               \
    do {                                                                                           \
        free(*(pp));                                                                               \
        *(pp) = NULL;                                                                              \
    } while (0)

#endif
