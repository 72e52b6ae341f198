/*
 * Unit tests for the line-table decoders (src/cpython/linetable.c): every
 * entry kind of the 3.11+ location table, varint edges, the end of the table,
 * malformed tables, and the 3.10 and 3.8/3.9 formats. Tables from real
 * interpreters carry the interpreter's own answers as expected values; the
 * cross-check in tests/tools/check_linetable.c covers the rest of the stdlib.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pystrobe/pystrobe.h>

#include "cpython/linetable.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* A location no decoder writes: shows that failures leave *out alone. */
static const struct cpy_location SENTINEL = {-77, -77, -77, -77};

static void check_loc(const uint8_t *tab, size_t len, int32_t first, uint32_t idx, int32_t line,
                      int32_t end_line, int32_t col, int32_t end_col)
{
    struct cpy_location loc = SENTINEL;

    assert_int_equal(cpy_loctable_lookup(tab, len, first, idx, &loc), 0);
    assert_int_equal(loc.lineno, line);
    assert_int_equal(loc.end_lineno, end_line);
    assert_int_equal(loc.col, col);
    assert_int_equal(loc.end_col, end_col);
}

static void check_loc_err(const uint8_t *tab, size_t len, int32_t first, uint32_t idx, int err)
{
    struct cpy_location loc = SENTINEL;

    assert_int_equal(cpy_loctable_lookup(tab, len, first, idx, &loc), err);
    assert_memory_equal(&loc, &SENTINEL, sizeof(loc));
}

static int32_t line310(const uint8_t *tab, size_t len, int32_t first, uint32_t off)
{
    int32_t line = -77;

    assert_int_equal(cpy_linetable310_lookup(tab, len, first, off, &line), 0);
    return line;
}

static int32_t lnotab_line(const uint8_t *tab, size_t len, int32_t first, uint32_t off)
{
    int32_t line = -77;

    assert_int_equal(cpy_lnotab_lookup(tab, len, first, off, &line), 0);
    return line;
}

/* --- 3.11+ location table ------------------------------------------------ */

/* The doc's worked example in full, as CPython 3.15 compiles it:
 * def f(a): / b = a + 1 / return g(b, / a). (The doc lists only some of the
 * entries: f3 03 01 0c 10 gives line 3 because d8 0d 0e moved it to 4.) */
static void test_loc_worked_example_315(void **state)
{
    static const uint8_t tab[] = {0x81, 0x00, 0xd8, 0x08, 0x09, 0x88, 0x41, 0x8d, 0x05, 0x80,
                                  0x41, 0xdc, 0x0b, 0x0c, 0x88, 0x51, 0xd8, 0x0d, 0x0e, 0xf3,
                                  0x03, 0x01, 0x0c, 0x10, 0xf0, 0x00, 0x01, 0x05, 0x10};
    /* list(f.__code__.co_positions()) under python3.15 */
    static const int32_t want[][4] = {
        {1, 1, 0, 0},   {1, 1, 0, 0},   {2, 2, 8, 9},   {2, 2, 12, 13}, {2, 2, 8, 13},
        {2, 2, 8, 13},  {2, 2, 8, 13},  {2, 2, 8, 13},  {2, 2, 8, 13},  {2, 2, 8, 13},
        {2, 2, 4, 5},   {3, 3, 11, 12}, {3, 3, 11, 12}, {3, 3, 11, 12}, {3, 3, 11, 12},
        {3, 3, 11, 12}, {3, 3, 13, 14}, {4, 4, 13, 14}, {3, 4, 11, 15}, {3, 4, 11, 15},
        {3, 4, 11, 15}, {3, 4, 11, 15}, {3, 4, 4, 15},
    };
    (void)state;
    for (uint32_t i = 0; i < N(want); i++)
        check_loc(tab, sizeof(tab), 1, i, want[i][0], want[i][1], want[i][2], want[i][3]);
    check_loc_err(tab, sizeof(tab), 1, N(want), PYS_E_NOTFOUND);
}

/* Codes 0 - 9: column = code * 8 + high nibble, width = low nibble. */
static void test_loc_short_forms(void **state)
{
    (void)state;
    for (unsigned code = 0; code <= 9; code++) {
        uint8_t tab[2] = {(uint8_t)(0x80 | code << 3), 0x5a};
        check_loc(tab, 2, 42, 0, 42, 42, (int32_t)code * 8 + 5, (int32_t)code * 8 + 15);
        check_loc_err(tab, 2, 42, 1, PYS_E_NOTFOUND);
    }
    /* Largest short form: code 9, nibbles 7 and 15. */
    static const uint8_t max[] = {0xc8, 0x7f};
    check_loc(max, 2, 1, 0, 1, 1, 79, 94);
}

/* Codes 10 - 12: line += code - 10, then two column bytes. */
static void test_loc_one_line_forms(void **state)
{
    static const uint8_t tab[] = {
        0xd0, 0x05, 0x7f, /* code 10, 1 unit: line 10, cols 5 - 127 */
        0xd9, 0x00, 0x00, /* code 11, 2 units: line 11, cols 0 - 0 */
        0xe0, 0x7f, 0x03, /* code 12, 1 unit: line 13, cols 127 - 3 */
    };
    (void)state;
    check_loc(tab, sizeof(tab), 10, 0, 10, 10, 5, 127);
    check_loc(tab, sizeof(tab), 10, 1, 11, 11, 0, 0);
    check_loc(tab, sizeof(tab), 10, 2, 11, 11, 0, 0);
    check_loc(tab, sizeof(tab), 10, 3, 13, 13, 127, 3);
    check_loc_err(tab, sizeof(tab), 10, 4, PYS_E_NOTFOUND);
}

/* Code 13: signed-varint line delta, columns unknown. */
static void test_loc_no_columns(void **state)
{
    static const uint8_t tab[] = {
        0xe8, 0x0a, /* +5 */
        0xe8, 0x07, /* -3 */
        0xe8, 0x01, /* "-0" */
        0xe8, 0x00, /* 0 */
    };
    (void)state;
    check_loc(tab, sizeof(tab), 20, 0, 25, 25, -1, -1);
    check_loc(tab, sizeof(tab), 20, 1, 22, 22, -1, -1);
    check_loc(tab, sizeof(tab), 20, 2, 22, 22, -1, -1);
    check_loc(tab, sizeof(tab), 20, 3, 22, 22, -1, -1);
}

/* Code 14: line delta, end-line delta, column + 1, end column + 1. */
static void test_loc_long(void **state)
{
    /* 2 units: line +1000, end line +3, column 300, end column 5000;
     * 1 unit: line -1, same end line, columns 0 (unknown). */
    static const uint8_t tab[] = {0xf1, 0x50, 0x1f, 0x03, 0x6d, 0x04, 0x49,
                                  0x4e, 0x01, 0xf0, 0x03, 0x00, 0x00, 0x00};
    (void)state;
    check_loc(tab, sizeof(tab), 100, 0, 1100, 1103, 300, 5000);
    check_loc(tab, sizeof(tab), 100, 1, 1100, 1103, 300, 5000);
    check_loc(tab, sizeof(tab), 100, 2, 1099, 1099, -1, -1);
    check_loc_err(tab, sizeof(tab), 100, 3, PYS_E_NOTFOUND);
}

/* Code 15: no location; the running line carries over to the next entry. */
static void test_loc_none(void **state)
{
    static const uint8_t tab[] = {
        0xd8, 0x01, 0x02, /* code 11: line 6 */
        0xfa,             /* code 15, 3 units */
        0x80, 0x12,       /* short: still line 6 */
    };
    (void)state;
    check_loc(tab, sizeof(tab), 5, 0, 6, 6, 1, 2);
    for (uint32_t i = 1; i <= 3; i++)
        check_loc(tab, sizeof(tab), 5, i, -1, -1, -1, -1);
    check_loc(tab, sizeof(tab), 5, 4, 6, 6, 1, 3);
}

/* Bits 0 - 2 of the first byte: 1 - 8 code units. */
static void test_loc_entry_lengths(void **state)
{
    static const uint8_t tab[] = {0x87, 0x00, 0xd0, 0x01, 0x02};
    (void)state;
    for (uint32_t i = 0; i < 8; i++)
        check_loc(tab, sizeof(tab), 1, i, 1, 1, 0, 0);
    check_loc(tab, sizeof(tab), 1, 8, 1, 1, 1, 2);
    check_loc_err(tab, sizeof(tab), 1, 9, PYS_E_NOTFOUND);
    check_loc_err(tab, sizeof(tab), 1, UINT32_MAX, PYS_E_NOTFOUND);
}

/* A computed line of exactly -1 is what co_positions() reports as None. */
static void test_loc_line_minus_one(void **state)
{
    static const uint8_t tab[] = {0xe8, 0x03, 0xe8, 0x03};
    (void)state;
    check_loc(tab, sizeof(tab), 0, 0, -1, -1, -1, -1);
    check_loc(tab, sizeof(tab), 0, 1, -2, -2, -1, -1);
}

static void test_loc_empty(void **state)
{
    (void)state;
    check_loc_err(NULL, 0, 1, 0, PYS_E_NOTFOUND);
    check_loc_err((const uint8_t *)"", 0, 1, 0, PYS_E_NOTFOUND);
}

/* Varints: up to 6 groups, at most 32 bits. */
static void test_loc_varint_edges(void **state)
{
    /* column + 1 = 2^31 (6 groups): column INT32_MAX */
    static const uint8_t six[] = {0xf0, 0x00, 0x00, 0x40, 0x40, 0x40, 0x40, 0x40, 0x02, 0x01};
    /* column + 1 = 2^31 + 1: column would not fit an int32 */
    static const uint8_t col_big[] = {0xf0, 0x00, 0x00, 0x41, 0x40, 0x40, 0x40, 0x40, 0x02, 0x01};
    /* a zero in 7 groups */
    static const uint8_t seven[] = {0xe8, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x00};
    /* 2^32 in 6 groups */
    static const uint8_t wide[] = {0xe8, 0x40, 0x40, 0x40, 0x40, 0x40, 0x04};
    /* UINT32_MAX: the largest varint, line delta -(2^31 - 1) */
    static const uint8_t umax[] = {0xe8, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x03};
    (void)state;
    check_loc(six, sizeof(six), 1, 0, 1, 1, INT32_MAX, 0);
    check_loc_err(col_big, sizeof(col_big), 1, 0, PYS_E_CORRUPT);
    check_loc_err(seven, sizeof(seven), 1, 0, PYS_E_CORRUPT);
    check_loc_err(wide, sizeof(wide), 1, 0, PYS_E_CORRUPT);
    check_loc(umax, sizeof(umax), 0, 0, -INT32_MAX, -INT32_MAX, -1, -1);
}

/* Signed varints at the int32 limits, and running lines that would leave it. */
static void test_loc_svarint_edges(void **state)
{
    /* +(2^31 - 1), then +0, then +1 */
    static const uint8_t up[] = {0xe8, 0x7e, 0x7f, 0x7f, 0x7f, 0x7f, 0x03, 0xe8, 0x00, 0xe8, 0x02};
    /* -(2^31 - 1), then -1 (INT32_MIN), then -1 */
    static const uint8_t down[] = {0xe8, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f,
                                   0x03, 0xe8, 0x03, 0xe8, 0x03};
    /* long form whose end line overflows: end-line delta UINT32_MAX */
    static const uint8_t end_big[] = {0xf0, 0x00, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x03, 0x00, 0x00};
    /* one-line form past INT32_MAX */
    static const uint8_t one[] = {0xe0, 0x00, 0x00};
    (void)state;
    check_loc(up, sizeof(up), 0, 0, INT32_MAX, INT32_MAX, -1, -1);
    check_loc(up, sizeof(up), 0, 1, INT32_MAX, INT32_MAX, -1, -1);
    check_loc_err(up, sizeof(up), 0, 2, PYS_E_CORRUPT);
    check_loc(down, sizeof(down), 0, 0, -INT32_MAX, -INT32_MAX, -1, -1);
    check_loc(down, sizeof(down), 0, 1, INT32_MIN, INT32_MIN, -1, -1);
    check_loc_err(down, sizeof(down), 0, 2, PYS_E_CORRUPT);
    check_loc_err(end_big, sizeof(end_big), 1, 0, PYS_E_CORRUPT);
    check_loc_err(one, sizeof(one), INT32_MAX - 1, 0, PYS_E_CORRUPT);
    check_loc(one, sizeof(one), INT32_MAX - 2, 0, INT32_MAX, INT32_MAX, 0, 0);
}

/* Every proper prefix of an entry is truncated. */
static void test_loc_truncated(void **state)
{
    static const uint8_t short_form[] = {0x80, 0x00};
    static const uint8_t one_line[] = {0xd0, 0x01, 0x02};
    static const uint8_t no_cols[] = {0xe8, 0x50, 0x1f};
    static const uint8_t long_form[] = {0xf0, 0x50, 0x1f, 0x03, 0x6d, 0x04, 0x49, 0x4e, 0x01};
    static const struct {
        const uint8_t *tab;
        size_t len;
    } all[] = {{short_form, sizeof(short_form)},
               {one_line, sizeof(one_line)},
               {no_cols, sizeof(no_cols)},
               {long_form, sizeof(long_form)}};
    (void)state;
    for (size_t i = 0; i < N(all); i++) {
        struct cpy_location loc;
        assert_int_equal(cpy_loctable_lookup(all[i].tab, all[i].len, 1, 0, &loc), 0);
        for (size_t cut = 1; cut < all[i].len; cut++)
            check_loc_err(all[i].tab, cut, 1, 0, PYS_E_CORRUPT);
    }
    /* A good entry, then a truncated one: the first still answers. */
    static const uint8_t tail[] = {0x80, 0x00, 0xf0, 0x02};
    check_loc(tail, sizeof(tail), 1, 0, 1, 1, 0, 0);
    check_loc_err(tail, sizeof(tail), 1, 1, PYS_E_CORRUPT);
}

/* Only entry starts have bit 7 set, and every entry starts with it. */
static void test_loc_start_bit(void **state)
{
    static const uint8_t no_start[] = {0x00, 0x00};
    static const uint8_t lost_sync[] = {0x80, 0x00, 0x41, 0x80, 0x00};
    static const uint8_t body_short[] = {0x80, 0x80};
    static const uint8_t body_one_line[] = {0xd0, 0x01, 0x82};
    static const uint8_t body_varint[] = {0xe8, 0xc2};
    (void)state;
    check_loc_err(no_start, sizeof(no_start), 1, 0, PYS_E_CORRUPT);
    check_loc(lost_sync, sizeof(lost_sync), 1, 0, 1, 1, 0, 0);
    check_loc_err(lost_sync, sizeof(lost_sync), 1, 1, PYS_E_CORRUPT);
    check_loc_err(body_short, sizeof(body_short), 1, 0, PYS_E_CORRUPT);
    check_loc_err(body_one_line, sizeof(body_one_line), 1, 0, PYS_E_CORRUPT);
    check_loc_err(body_varint, sizeof(body_varint), 1, 0, PYS_E_CORRUPT);
}

static void test_loc_inval(void **state)
{
    static const uint8_t tab[] = {0x80, 0x00};
    (void)state;
    assert_int_equal(cpy_loctable_lookup(tab, sizeof(tab), 1, 0, NULL), PYS_E_INVAL);
    check_loc_err(NULL, 2, 1, 0, PYS_E_INVAL);
}

/* --- 3.10 co_linetable ---------------------------------------------------- */

/* The doc's example (def f(a): / b = a + 1 / / / return b), as 3.10
 * compiles it: co_lines() gives (0, 8, 2), (8, 12, 5). */
static void test_310_doc_example(void **state)
{
    static const uint8_t tab[] = {0x08, 0x01, 0x04, 0x03};
    int32_t line = -77;
    (void)state;
    for (uint32_t off = 0; off < 8; off++)
        assert_int_equal(line310(tab, sizeof(tab), 1, off), 2);
    for (uint32_t off = 8; off < 12; off++)
        assert_int_equal(line310(tab, sizeof(tab), 1, off), 5);
    assert_int_equal(cpy_linetable310_lookup(tab, sizeof(tab), 1, 12, &line), PYS_E_NOTFOUND);
    assert_int_equal(cpy_linetable310_lookup(tab, sizeof(tab), 1, UINT32_MAX, &line),
                     PYS_E_NOTFOUND);
    assert_int_equal(line, -77);
}

/* -128 is "no line" and leaves the running line alone; empty entries carry
 * only their delta; deltas are signed bytes. */
static void test_310_markers_and_deltas(void **state)
{
    static const uint8_t tab[] = {
        0x00, 0x05, /* empty: line 15 */
        0x04, 0x80, /* 0 - 3: no line */
        0x02, 0x7f, /* 4 - 5: 15 + 127 = 142 */
        0x02, 0x81, /* 6 - 7: 142 - 127 = 15 */
        0xfe, 0x00, /* 8 - 261: 15 */
        0x02, 0xff, /* 262 - 263: 14 */
    };
    (void)state;
    assert_int_equal(line310(tab, sizeof(tab), 10, 0), -1);
    assert_int_equal(line310(tab, sizeof(tab), 10, 2), -1);
    assert_int_equal(line310(tab, sizeof(tab), 10, 4), 142);
    assert_int_equal(line310(tab, sizeof(tab), 10, 6), 15);
    assert_int_equal(line310(tab, sizeof(tab), 10, 8), 15);
    assert_int_equal(line310(tab, sizeof(tab), 10, 260), 15);
    assert_int_equal(line310(tab, sizeof(tab), 10, 262), 14);
}

/* co_lines() reports any negative line as None. */
static void test_310_negative_line(void **state)
{
    static const uint8_t tab[] = {0x02, 0xfd, 0x02, 0x01, 0x02, 0x05};
    (void)state;
    assert_int_equal(line310(tab, sizeof(tab), 1, 0), -1); /* -2 */
    assert_int_equal(line310(tab, sizeof(tab), 1, 2), -1); /* -1 */
    assert_int_equal(line310(tab, sizeof(tab), 1, 4), 4);
}

static void test_310_malformed(void **state)
{
    static const uint8_t odd[] = {0x08, 0x01, 0x04};
    static const uint8_t up[] = {0x02, 0x01};
    int32_t line = -77;
    (void)state;
    assert_int_equal(line310(odd, sizeof(odd), 1, 6), 2);
    assert_int_equal(cpy_linetable310_lookup(odd, sizeof(odd), 1, 8, &line), PYS_E_CORRUPT);
    assert_int_equal(cpy_linetable310_lookup(up, sizeof(up), INT32_MAX, 0, &line), PYS_E_CORRUPT);
    assert_int_equal(cpy_linetable310_lookup(NULL, 0, 1, 0, &line), PYS_E_NOTFOUND);
    assert_int_equal(cpy_linetable310_lookup(up, sizeof(up), 1, 0, NULL), PYS_E_INVAL);
    assert_int_equal(cpy_linetable310_lookup(NULL, 2, 1, 0, &line), PYS_E_INVAL);
    assert_int_equal(line, -77);
}

/* --- 3.8 / 3.9 co_lnotab -------------------------------------------------- */

/* The doc's example: findlinestarts() gives (0, 2), (8, 5). */
static void test_lnotab_doc_example(void **state)
{
    static const uint8_t tab[] = {0x00, 0x01, 0x08, 0x03};
    (void)state;
    for (uint32_t off = 0; off < 8; off++)
        assert_int_equal(lnotab_line(tab, sizeof(tab), 1, off), 2);
    assert_int_equal(lnotab_line(tab, sizeof(tab), 1, 8), 5);
    assert_int_equal(lnotab_line(tab, sizeof(tab), 1, 10), 5);
    assert_int_equal(lnotab_line(tab, sizeof(tab), 1, UINT32_MAX), 5);
}

/* Large jumps split over pairs; negative line increments. */
static void test_lnotab_split_and_negative(void **state)
{
    static const uint8_t tab[] = {
        0xff, 0x00, 0x2d, 0x00,             /* address +300 */
        0x00, 0x7f, 0x00, 0x7f, 0x00, 0x2e, /* line +300 */
        0x06, 0x80,                         /* at 306: line -128 */
        0x02, 0xff,                         /* at 308: line -1 */
    };
    (void)state;
    assert_int_equal(lnotab_line(tab, sizeof(tab), 7, 0), 7);
    assert_int_equal(lnotab_line(tab, sizeof(tab), 7, 299), 7);
    assert_int_equal(lnotab_line(tab, sizeof(tab), 7, 300), 307);
    assert_int_equal(lnotab_line(tab, sizeof(tab), 7, 305), 307);
    assert_int_equal(lnotab_line(tab, sizeof(tab), 7, 306), 179);
    assert_int_equal(lnotab_line(tab, sizeof(tab), 7, 308), 178);
}

static void test_lnotab_edges(void **state)
{
    static const uint8_t odd[] = {0x02, 0x01, 0x02};
    static const uint8_t up[] = {0x00, 0x01};
    int32_t line = -77;
    (void)state;
    assert_int_equal(lnotab_line(NULL, 0, 12, 0), 12);
    assert_int_equal(lnotab_line(NULL, 0, 12, 100), 12);
    /* the odd byte is never read, as in the interpreter */
    assert_int_equal(lnotab_line(odd, sizeof(odd), 1, 0), 1);
    assert_int_equal(lnotab_line(odd, sizeof(odd), 1, 2), 2);
    assert_int_equal(lnotab_line(odd, sizeof(odd), 1, 100), 2);
    assert_int_equal(cpy_lnotab_lookup(up, sizeof(up), INT32_MAX, 0, &line), PYS_E_CORRUPT);
    assert_int_equal(cpy_lnotab_lookup(up, sizeof(up), 1, 0, NULL), PYS_E_INVAL);
    assert_int_equal(cpy_lnotab_lookup(NULL, 2, 1, 0, &line), PYS_E_INVAL);
    assert_int_equal(line, -77);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loc_worked_example_315),
        cmocka_unit_test(test_loc_short_forms),
        cmocka_unit_test(test_loc_one_line_forms),
        cmocka_unit_test(test_loc_no_columns),
        cmocka_unit_test(test_loc_long),
        cmocka_unit_test(test_loc_none),
        cmocka_unit_test(test_loc_entry_lengths),
        cmocka_unit_test(test_loc_line_minus_one),
        cmocka_unit_test(test_loc_empty),
        cmocka_unit_test(test_loc_varint_edges),
        cmocka_unit_test(test_loc_svarint_edges),
        cmocka_unit_test(test_loc_truncated),
        cmocka_unit_test(test_loc_start_bit),
        cmocka_unit_test(test_loc_inval),
        cmocka_unit_test(test_310_doc_example),
        cmocka_unit_test(test_310_markers_and_deltas),
        cmocka_unit_test(test_310_negative_line),
        cmocka_unit_test(test_310_malformed),
        cmocka_unit_test(test_lnotab_doc_example),
        cmocka_unit_test(test_lnotab_split_and_negative),
        cmocka_unit_test(test_lnotab_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
