/*
 * bytes: integers from byte buffers that need not be aligned.
 *
 * util_load_* read in this machine's byte order: for copies of the
 * target's memory and of its core file, which are the target's (x86-64,
 * the same). util_le_get/util_le_put read and write little-endian fields
 * of pystrobe's own file formats, whatever this machine's order.
 */
#ifndef PYSTROBE_UTIL_BYTES_H
#define PYSTROBE_UTIL_BYTES_H

#include <stdint.h>
#include <string.h>

static inline uint64_t util_load_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline int64_t util_load_i64(const uint8_t *p)
{
    int64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline int32_t util_load_i32(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The n-byte (1 to 8) little-endian unsigned integer at p. */
static inline uint64_t util_le_get(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Store the low n bytes (1 to 8) of v at p, little-endian. */
static inline void util_le_put(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++, v >>= 8)
        p[i] = (uint8_t)v;
}

#endif
