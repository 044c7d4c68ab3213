/* crc32c.h - CRC32C (Castagnoli), the checksum on every block. */
#ifndef BS_CRC32C_H
#define BS_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t bs_crc32c(uint32_t crc, const void *buf, size_t len);

#endif
