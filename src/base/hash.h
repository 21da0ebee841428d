/*
 * 64-bit FNV-1a, incremental. Used to fingerprint request bodies and output text in receipts
 * and to derive seeds from names (identity, not security). Pure.
 */
#ifndef ST_BASE_HASH_H
#define ST_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define ST_HASH_INIT 0xcbf29ce484222325ull

/* Continues hash h over p[0..n); start with ST_HASH_INIT. */
uint64_t st_hash_update(uint64_t h, const void *p, size_t n);
uint64_t st_hash64(const void *p, size_t n);
/* Continues hash h over the 8 bytes of v, least significant first. */
uint64_t st_hash_u64(uint64_t h, uint64_t v);
/* splitmix64's finishing mix: spreads every input bit over the output (FNV's low bits mix poorly
 * on their own, so seeds derived from a hash go through it). */
uint64_t st_hash_mix(uint64_t x);
/* Writes h as 16 lowercase hex digits plus NUL into out[17]. */
void st_hash_hex(uint64_t h, char out[17]);

#endif
