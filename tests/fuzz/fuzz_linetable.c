/*
 * libFuzzer target for the line-table decoders (src/cpython/linetable.c).
 *
 * Input: 4 bytes position (code unit for the 3.11+ table, byte offset for
 * the others) and 4 bytes first line, both little-endian, then the table,
 * which all three decoders read. Besides what the sanitizers catch, it checks
 * the documented contract: only the documented codes come back, a failure
 * leaves the out-parameter alone, a 3.10 line is -1 or not negative, and an
 * answer does not depend on bytes after the entry that gave it (so the same
 * lookup on the table minus its last byte, if it succeeds, agrees).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pystrobe/pystrobe.h>

#include "cpython/linetable.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct cpy_location SENTINEL = {-77, -77, -77, -77};

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void check(int ok)
{
    if (!ok)
        abort();
}

static void fuzz_loctable(const uint8_t *tab, size_t len, int32_t first, uint32_t idx)
{
    struct cpy_location loc = SENTINEL, shorter = SENTINEL;
    int err = cpy_loctable_lookup(tab, len, first, idx, &loc);

    check(err == 0 || err == PYS_E_NOTFOUND || err == PYS_E_CORRUPT);
    if (err) {
        check(memcmp(&loc, &SENTINEL, sizeof(loc)) == 0);
        return;
    }
    if (len > 0 && cpy_loctable_lookup(tab, len - 1, first, idx, &shorter) == 0)
        check(memcmp(&loc, &shorter, sizeof(loc)) == 0);
}

static void fuzz_linetable310(const uint8_t *tab, size_t len, int32_t first, uint32_t off)
{
    int32_t line = -77, shorter = -77;
    int err = cpy_linetable310_lookup(tab, len, first, off, &line);

    check(err == 0 || err == PYS_E_NOTFOUND || err == PYS_E_CORRUPT);
    if (err) {
        check(line == -77);
        return;
    }
    check(line >= -1);
    if (len > 0 && cpy_linetable310_lookup(tab, len - 1, first, off, &shorter) == 0)
        check(line == shorter);
}

static void fuzz_lnotab(const uint8_t *tab, size_t len, int32_t first, uint32_t off)
{
    int32_t line = -77;
    int err = cpy_lnotab_lookup(tab, len, first, off, &line);

    check(err == 0 || err == PYS_E_CORRUPT);
    if (err)
        check(line == -77);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t pos, ufirst;
    int32_t first;

    if (size < 8)
        return 0;
    pos = get_le32(data);
    ufirst = get_le32(data + 4);
    memcpy(&first, &ufirst, sizeof(first));
    /* data + 8 ends where the fuzzer's buffer ends: ASan sees any overread. */
    fuzz_loctable(data + 8, size - 8, first, pos);
    fuzz_linetable310(data + 8, size - 8, first, pos);
    fuzz_lnotab(data + 8, size - 8, first, pos);
    return 0;
}
