/*
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, initial and final XOR 0xFFFFFFFF), the
 * checksum of iSCSI, ext4 metadata and many log formats. Table-driven, byte at a time: it guards
 * journal lines against torn and corrupted writes, not hostile input. Pure, no state (the table
 * is a constant), thread-safe.
 * Check value: st_crc32c("123456789", 9) == 0xE3069283.
 */
#ifndef ST_BASE_CRC32C_H
#define ST_BASE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continues crc over p[0..n); start with 0. st_crc32c_update(st_crc32c_update(0, a), b) equals
 * the CRC of a followed by b. p may be NULL when n is 0. */
uint32_t st_crc32c_update(uint32_t crc, const void *p, size_t n);
/* The CRC-32C of p[0..n). */
uint32_t st_crc32c(const void *p, size_t n);

#endif
