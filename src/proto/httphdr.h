/*
 * HTTP/1.1 response header lines as libcurl hands them to a header callback: "Name: value\r\n".
 * The load engine reads Retry-After and the simulator's clock headers (X-Sim-Arrival, X-Sim-Late,
 * X-Sim-Vt) through these. Pure: no allocation, thread-safe.
 */
#ifndef ST_PROTO_HTTPHDR_H
#define ST_PROTO_HTTPHDR_H

#include <stddef.h>
#include <stdint.h>

/*
 * When line p[0..n) is header `name` (given with its colon, "retry-after:", matched without
 * regard to case), sets *v and *vn to its value without the spaces and tabs around it and the
 * line end, and returns 1; else returns 0.
 */
int st_hdr_value(const char *p, size_t n, const char *name, const char **v, size_t *vn);

/* Retry-After in its delta-seconds form ("Retry-After: 2"), capped at 86400; -1 for the
 * HTTP-date form, anything malformed, or another header. */
int64_t st_hdr_retry_after(const char *p, size_t n);

/*
 * Header `name` whose value is one decimal number (b NULL) or two separated by spaces ("x-sim-vt:
 * 123 45"): 0 with *a (and *b), else -1 (another header, not whole numbers, or more values).
 */
int st_hdr_nums(const char *p, size_t n, const char *name, uint64_t *a, uint64_t *b);

#endif
