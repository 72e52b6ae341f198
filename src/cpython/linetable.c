/*
 * Line-table decoders: from an instruction's position in a code object to its
 * source location, for the three table formats CPython has used since 3.8 --
 * co_lnotab (3.8, 3.9), the PEP 626 co_linetable (3.10) and the location
 * table (3.11+). Each lookup walks its table from the start and answers for
 * one instruction exactly as the interpreter itself would (dis.findlinestarts,
 * co_lines(), co_positions()); tests/tools/check_linetable.c checks that claim
 * against every installed interpreter.
 *
 * The bytes come from another process and may be anything. Every read is
 * bounded by the table's length, varints by their group count, and running
 * line numbers by the int32 range: where the interpreter's own int arithmetic
 * would overflow, the table is reported corrupt instead.
 */
#include "cpython/linetable.h"

#include <pystrobe/pystrobe.h>

/* The interpreter writes varints from 32-bit unsigned ints, so a well-formed
 * one has at most ceil(32 / 6) = 6 groups of 6 bits. */
#define VARINT_MAX_GROUPS 6

/* Location-table entry kinds (CPython's _PyCodeLocationInfoKind). */
enum {
    LOC_SHORT_LAST = 9, /* 0 - 9: short forms, the code is column / 8 */
    LOC_ONE_LINE0 = 10, /* 10 - 12: one-line forms, line delta code - 10 */
    LOC_ONE_LINE2 = 12,
    LOC_NO_COLUMNS = 13,
    LOC_LONG = 14,
    LOC_NONE = 15,
};

/* A line-table delta byte of 3.8 - 3.10 is a two's complement int8. */
static int64_t sign8(uint8_t b)
{
    return (int64_t)b - ((b & 0x80) ? 256 : 0);
}

static int fits_i32(int64_t v)
{
    return v >= INT32_MIN && v <= INT32_MAX;
}

/* One byte of an entry's body. Only an entry's first byte has bit 7 set (the
 * interpreter relies on that to step over entries), so a body byte with it
 * set means the table is not what we think it is. */
static int read_body_byte(const uint8_t *tab, size_t len, size_t *pos, uint8_t *out)
{
    if (*pos >= len || (tab[*pos] & 0x80) != 0)
        return PYS_E_CORRUPT;
    *out = tab[(*pos)++];
    return 0;
}

/* An unsigned varint: 6-bit groups, least significant first, 0x40 on every
 * group but the last. PYS_E_CORRUPT if truncated, longer than
 * VARINT_MAX_GROUPS or above UINT32_MAX. */
static int read_varint(const uint8_t *tab, size_t len, size_t *pos, uint32_t *out)
{
    uint64_t val = 0;

    for (unsigned n = 0; n < VARINT_MAX_GROUPS; n++) {
        uint8_t b;
        int err = read_body_byte(tab, len, pos, &b);
        if (err)
            return err;
        val |= (uint64_t)(b & 63) << (6 * n);
        if ((b & 64) == 0) {
            if (val > UINT32_MAX)
                return PYS_E_CORRUPT;
            *out = (uint32_t)val;
            return 0;
        }
    }
    return PYS_E_CORRUPT;
}

/* A signed varint: the varint u stands for -(u >> 1) if u is odd, else u >> 1. */
static int read_svarint(const uint8_t *tab, size_t len, size_t *pos, int64_t *out)
{
    uint32_t u;
    int err = read_varint(tab, len, pos, &u);
    if (err)
        return err;
    *out = (u & 1) ? -(int64_t)(u >> 1) : (int64_t)(u >> 1);
    return 0;
}

/* A column stored as value + 1 (0 = unknown, which gives -1). */
static int read_column(const uint8_t *tab, size_t len, size_t *pos, int32_t *out)
{
    uint32_t u;
    int err = read_varint(tab, len, pos, &u);
    if (err)
        return err;
    if ((int64_t)u - 1 > INT32_MAX)
        return PYS_E_CORRUPT;
    *out = (int32_t)((int64_t)u - 1);
    return 0;
}

/* Adds delta to the running line; PYS_E_CORRUPT if it leaves int32. */
static int add_line(int64_t *line, int64_t delta)
{
    if (!fits_i32(*line + delta))
        return PYS_E_CORRUPT;
    *line += delta;
    return 0;
}

/* Decodes the body of one location-table entry of kind code, starting at
 * *pos (just past the first byte), into *loc; updates the running *line and
 * leaves *pos on the next entry. */
static int loc_entry_decode(unsigned code, const uint8_t *tab, size_t len, size_t *pos,
                            int64_t *line, struct cpy_location *loc)
{
    int64_t delta;
    uint32_t extra;
    uint8_t b1, b2;
    int err;

    if (code == LOC_NONE) {
        /* No location at all; the running line is kept for the next entry. */
        loc->lineno = loc->end_lineno = loc->col = loc->end_col = -1;
        return 0;
    }
    if (code == LOC_LONG) {
        if ((err = read_svarint(tab, len, pos, &delta)) || (err = add_line(line, delta)))
            return err;
        if ((err = read_varint(tab, len, pos, &extra)))
            return err;
        if (!fits_i32(*line + extra))
            return PYS_E_CORRUPT;
        loc->lineno = (int32_t)*line;
        loc->end_lineno = (int32_t)(*line + extra);
        if ((err = read_column(tab, len, pos, &loc->col)) ||
            (err = read_column(tab, len, pos, &loc->end_col)))
            return err;
        return 0;
    }
    if (code == LOC_NO_COLUMNS) {
        if ((err = read_svarint(tab, len, pos, &delta)) || (err = add_line(line, delta)))
            return err;
        loc->lineno = loc->end_lineno = (int32_t)*line;
        loc->col = loc->end_col = -1;
        return 0;
    }
    if (code >= LOC_ONE_LINE0 && code <= LOC_ONE_LINE2) {
        if ((err = add_line(line, (int64_t)code - LOC_ONE_LINE0)) ||
            (err = read_body_byte(tab, len, pos, &b1)) ||
            (err = read_body_byte(tab, len, pos, &b2)))
            return err;
        loc->lineno = loc->end_lineno = (int32_t)*line;
        loc->col = b1;
        loc->end_col = b2;
        return 0;
    }
    /* Short form (code 0 - LOC_SHORT_LAST): same line, column code * 8 plus
     * the high nibble, width in the low nibble. */
    if ((err = read_body_byte(tab, len, pos, &b1)))
        return err;
    loc->lineno = loc->end_lineno = (int32_t)*line;
    loc->col = (int32_t)(code * 8 + (b1 >> 4));
    loc->end_col = loc->col + (b1 & 15);
    return 0;
}

int cpy_loctable_lookup(const uint8_t *tab, size_t len, int32_t firstlineno, uint32_t idx,
                        struct cpy_location *out)
{
    int64_t line = firstlineno;
    uint64_t end = 0; /* one past the last code unit covered so far */
    size_t pos = 0;

    if ((tab == NULL && len != 0) || out == NULL)
        return PYS_E_INVAL;
    while (pos < len) {
        uint8_t first = tab[pos++];
        struct cpy_location loc;
        int err;

        if ((first & 0x80) == 0)
            return PYS_E_CORRUPT;
        err = loc_entry_decode((first >> 3) & 15u, tab, len, &pos, &line, &loc);
        if (err)
            return err;
        end += (first & 7u) + 1;
        if (idx < end) {
            *out = loc;
            return 0;
        }
    }
    return PYS_E_NOTFOUND;
}

int cpy_linetable310_lookup(const uint8_t *tab, size_t len, int32_t firstlineno, uint32_t off,
                            int32_t *line)
{
    int64_t cur = firstlineno;
    uint64_t end = 0; /* one past the last byte offset covered so far */

    if ((tab == NULL && len != 0) || line == NULL)
        return PYS_E_INVAL;
    for (size_t pos = 0; pos < len; pos += 2) {
        int64_t delta;
        int err;

        if (len - pos < 2)
            return PYS_E_CORRUPT; /* the interpreter only writes pairs */
        delta = sign8(tab[pos + 1]);
        if (delta != -128 && (err = add_line(&cur, delta)))
            return err;
        end += tab[pos];
        if (off < end) {
            /* co_lines() gives None both for the no-line marker and for a
             * negative line. */
            *line = (delta == -128 || cur < 0) ? -1 : (int32_t)cur;
            return 0;
        }
    }
    return PYS_E_NOTFOUND;
}

int cpy_lnotab_lookup(const uint8_t *tab, size_t len, int32_t firstlineno, uint32_t off,
                      int32_t *line)
{
    int64_t cur = firstlineno;
    uint64_t addr = 0;

    if ((tab == NULL && len != 0) || line == NULL)
        return PYS_E_INVAL;
    /* A trailing odd byte is never consulted, as in the interpreter. */
    for (size_t pos = 0; len - pos >= 2; pos += 2) {
        int err;

        addr += tab[pos];
        if (addr > off)
            break;
        if ((err = add_line(&cur, sign8(tab[pos + 1]))))
            return err;
    }
    *line = (int32_t)cur;
    return 0;
}
