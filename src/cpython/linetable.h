/*
 * Line tables: from an instruction's position in a code object to its source
 * line (and, from 3.11, its line and column range). Pure functions over bytes
 * copied from the target; every length is bounded by the table's own size, so
 * a corrupt table gives an error, never a read out of bounds.
 */
#ifndef PYSTROBE_CPYTHON_LINETABLE_H
#define PYSTROBE_CPYTHON_LINETABLE_H

#include <stddef.h>
#include <stdint.h>

/* A source range; -1 in a field means unknown (as None in co_positions()). */
struct cpy_location {
    int32_t lineno;
    int32_t end_lineno;
    int32_t col;
    int32_t end_col;
};

/* 3.11+ location table (co_linetable): the location of code unit idx (one
 * unit = 2 bytes). Returns 0 and fills *out exactly as co_positions() would
 * give for that unit; PYS_E_NOTFOUND if the table ends before idx;
 * PYS_E_CORRUPT if an entry is malformed or truncated.
 *
 * All three lookups return PYS_E_INVAL for a NULL result pointer (or a NULL
 * table with len > 0), and PYS_E_CORRUPT where a line number would leave the
 * int32 range (the interpreter's int would overflow). Only entries up to the
 * one answering are read, so a table damaged after that point still answers.
 * The location table is checked as strictly as the interpreter writes it:
 * every entry starts with bit 7 set, no other byte has it, a varint has at
 * most 6 groups and fits 32 bits. */
int cpy_loctable_lookup(const uint8_t *tab, size_t len, int32_t firstlineno, uint32_t idx,
                        struct cpy_location *out);

/* 3.10 co_linetable (PEP 626): the line of the instruction at byte offset
 * off (= f_lasti * 2), -1 for "no line", as co_lines() gives (which also
 * turns a negative line into None). PYS_E_NOTFOUND past the table's end;
 * PYS_E_CORRUPT if the lookup reaches a trailing odd byte. */
int cpy_linetable310_lookup(const uint8_t *tab, size_t len, int32_t firstlineno, uint32_t off,
                            int32_t *line);

/* 3.8/3.9 co_lnotab: the line of the instruction at byte offset off
 * (= f_lasti), as dis.findlinestarts() implies. Every offset has a line: past
 * the table it is the last one. A trailing odd byte is ignored, as the
 * interpreter ignores it. */
int cpy_lnotab_lookup(const uint8_t *tab, size_t len, int32_t firstlineno, uint32_t off,
                      int32_t *line);

#endif
