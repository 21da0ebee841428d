/*
 * Incremental Server-Sent Events parser (the subset OpenAI-compatible servers use).
 *
 * Feed body bytes in whatever pieces they arrive; the callback gets each event's data payload
 * (several `data:` lines of one event joined with "\n", per the SSE spec). Lines end in LF, CRLF
 * or CR, even when the CR and LF arrive in different pieces. Lines starting with ':' are comments
 * (keep-alive pings) and are counted, not delivered. A `vt: NS LAG` field (the simulator's stamp
 * of the event's virtual time, docs/sim.md) is read into has_vt, vt_ns and vt_lag_ns for the
 * event's callback; `event:`, `id:`, `retry:` and other fields are ignored. A blank line ends an
 * event; an event with no data line is not delivered.
 * Pure: no I/O, no clock. The parser never holds more than max_event_bytes of one event.
 */
#ifndef ST_PROTO_SSE_H
#define ST_PROTO_SSE_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/status.h"

/* Default bound on one event (its data plus line overhead): 1 MiB. */
#define ST_SSE_MAX_EVENT_DEFAULT (1u << 20)

/*
 * Called once per complete event. data is borrowed for the duration of the call and is not
 * NUL-terminated. Return 0 to continue; any other value stops parsing and st_sse_feed returns it.
 */
typedef int (*st_sse_event_cb)(void *ctx, const char *data, size_t len);

struct st_sse {
    struct st_buf line; /* owned: the unfinished line carried between feeds */
    struct st_buf data; /* owned: data lines of the event being assembled */
    size_t max_event_bytes;
    int have_data;      /* the current event has at least one data line */
    int skip_lf;        /* the previous piece ended in CR: a leading LF belongs to it */
    int broken;         /* an event went over the bound: every later call returns ST_ETOOBIG */
    uint64_t events;    /* events delivered */
    uint64_t comments;  /* comment lines seen */
    uint64_t bytes;     /* bytes fed */
    int has_vt;         /* the event being delivered carried a well-formed vt field */
    uint64_t vt_ns;     /* its virtual time, ns since the session's start */
    uint64_t vt_lag_ns; /* the real ns the simulator was late with it */
};

/* Prepares an empty parser on caller-owned memory; max_event_bytes 0 means the default. */
void st_sse_init(struct st_sse *p, size_t max_event_bytes);
/* Frees the buffers. st_sse_init makes the parser usable again (for the next response). */
void st_sse_release(struct st_sse *p);

/*
 * Parses buf[0..len). Returns 0; ST_ETOOBIG when an event (or a line) grows over max_event_bytes
 * (the parser is then unusable until st_sse_init); or the callback's non-zero value.
 * An event's size is the length of its data so far plus the length of the line being read
 * (field name included, line end not); it is checked the same way however the body is split, so
 * every split of the same body gives the same events and status. When the callback stops
 * parsing, the rest of buf is dropped; the parser stays consistent and a later feed starts a new
 * line.
 */
int st_sse_feed(struct st_sse *p, const char *buf, size_t len, st_sse_event_cb cb,
                void *ctx) ST_WUR;

/*
 * The body ended. An event whose data lines are complete but whose blank line never came is
 * delivered (servers that close right after the last `data:` line lose nothing). Returns 0, the
 * callback's value, or ST_EPROTO when the body ended inside an unfinished line (a truncated event),
 * which is then discarded.
 */
int st_sse_finish(struct st_sse *p, st_sse_event_cb cb, void *ctx) ST_WUR;

#endif
