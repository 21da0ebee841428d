/*
 * SHA-256 (FIPS 180-4), incremental. Used for the campaign plan hash (pre-registration): the
 * canonical form of a plan is hashed before the first request, and resume refuses a plan whose
 * hash differs. No crypto library is linked, so this is a plain portable implementation; it is
 * not constant-time and is not meant for secrets. Pure.
 */
#ifndef ST_BASE_SHA256_H
#define ST_BASE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define ST_SHA256_BYTES 32
#define ST_SHA256_HEX 65 /* 64 lowercase hex digits plus NUL */

struct st_sha256 {
    uint32_t h[8];
    uint64_t total_bytes; /* bytes hashed so far */
    uint8_t block[64];    /* pending input, block_len bytes */
    size_t block_len;
};

/* Starts a new hash in caller-owned memory. */
void st_sha256_init(struct st_sha256 *s);
/* Continues the hash over p[0..n); p may be NULL when n == 0. */
void st_sha256_update(struct st_sha256 *s, const void *p, size_t n);
/* Writes the 32-byte digest into out; s must be re-initialised before further use. */
void st_sha256_final(struct st_sha256 *s, uint8_t out[ST_SHA256_BYTES]);
/* One-shot: the digest of p[0..n) as 64 lowercase hex digits plus NUL in hex. */
void st_sha256_hex(const void *p, size_t n, char hex[ST_SHA256_HEX]);

#endif
