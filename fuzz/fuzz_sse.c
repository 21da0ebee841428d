/*
 * libFuzzer target for src/proto/sse.c. The input is one SSE body. It is parsed twice, whole and
 * split in two at a point taken from its first byte (each piece in its own heap block, so a read
 * past a piece is caught), both followed by st_sse_finish; the two runs must deliver the same
 * events and status. A small bound makes ST_ETOOBIG reachable, and an event starting with "STOP"
 * makes the callback stop parsing.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct trace {
    uint64_t hash; /* FNV-1a over each event's length and bytes, in order */
    uint64_t events;
    size_t max_event_bytes;
};

static void mix(struct trace *t, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        t->hash = (t->hash ^ b[i]) * 1099511628211ull;
    }
}

static int on_event(void *ctx, const char *data, size_t len)
{
    struct trace *t = ctx;
    if (len > t->max_event_bytes) {
        abort(); /* the parser never holds more than the bound */
    }
    mix(t, &len, sizeof(len));
    mix(t, data, len);
    t->events++;
    return len >= 4 && memcmp(data, "STOP", 4) == 0 ? 7 : 0;
}

/* Feeds pieces [0, cut) and [cut, size) (cut == size: one piece), then finishes. */
static int run(const uint8_t *data, size_t size, size_t cut, struct trace *t)
{
    struct st_sse p;
    st_sse_init(&p, t->max_event_bytes);
    char *a = malloc(cut ? cut : 1);
    char *b = malloc(size - cut ? size - cut : 1);
    if (!a || !b) {
        abort();
    }
    memcpy(a, data, cut);
    memcpy(b, data + cut, size - cut);
    int rc = st_sse_feed(&p, a, cut, on_event, t);
    if (rc == 0) {
        rc = st_sse_feed(&p, b, size - cut, on_event, t);
    }
    if (rc == 0) {
        rc = st_sse_finish(&p, on_event, t);
    }
    if (p.line.len > t->max_event_bytes || p.data.len > t->max_event_bytes) {
        abort();
    }
    st_sse_release(&p);
    free(a);
    free(b);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t cut = size ? (size_t)data[0] * size / 256 : 0;
    struct trace whole = {.hash = 14695981039346656037ull, .events = 0, .max_event_bytes = 512};
    struct trace split = whole;
    int rc_whole = run(data, size, size, &whole);
    int rc_split = run(data, size, cut, &split);
    if (rc_whole != rc_split || whole.hash != split.hash || whole.events != split.events) {
        abort();
    }
    return 0;
}
