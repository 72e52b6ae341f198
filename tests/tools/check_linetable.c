/*
 * check_linetable: compare pystrobe's line-table decoders with a real
 * interpreter's own answers.
 *
 * Reads on stdin the stream tests/linetable/dump_positions.py writes (its
 * docstring defines the format): per code object its raw table and what
 * co_positions() (3.11+), co_lines() (3.10) or dis.findlinestarts() (3.8,
 * 3.9) report. Runs the matching decoder for every code unit (3.11+) or every
 * even byte offset (3.10: inside each range; 3.8, 3.9: all of co_code), and
 * checks that the table ends where the interpreter's answers end.
 *
 * Prints the first mismatches and a last line "checked N code objects, M
 * instructions, K mismatches". Exit status 0 if all agree, 1 on a mismatch or
 * if nothing was checked, 2 on unreadable input.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pystrobe/pystrobe.h>

#include "cpython/linetable.h"

/* Mismatches printed in full; the rest are only counted. */
#define MAX_REPORTED 10

enum kind { KIND_NONE, KIND_LOC, KIND_L310, KIND_LNOTAB };

struct line_start {
    long off;
    long line;
};

struct record {
    enum kind kind;
    int32_t firstlineno;
    long code_len;
    uint8_t *tab;
    size_t tab_len;
    size_t tab_cap;
    char *name;
    uint32_t units;            /* KIND_LOC: P lines seen */
    long max_end;              /* KIND_L310: end of the last range */
    struct line_start *starts; /* KIND_LNOTAB */
    size_t nstarts;
    size_t starts_cap;
};

struct stats {
    unsigned long objects;
    unsigned long instructions;
    unsigned long mismatches;
    unsigned long lineno; /* input line, for messages */
};

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (p == NULL) {
        fprintf(stderr, "check_linetable: out of memory\n");
        exit(2);
    }
    return p;
}

static void die_input(const struct stats *st, const char *what)
{
    fprintf(stderr, "check_linetable: input line %lu: %s\n", st->lineno, what);
    exit(2);
}

static void mismatch(struct stats *st, const struct record *r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void mismatch(struct stats *st, const struct record *r, const char *fmt, ...)
{
    va_list ap;

    if (st->mismatches++ >= MAX_REPORTED)
        return;
    printf("MISMATCH %s (first line %d): ", r->name ? r->name : "?", (int)r->firstlineno);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

/* The name of a PYS_E_* code. Our own copy, so that the checker links with
 * the decoder alone when built by hand. */
static const char *err_name(int code)
{
    switch (code) {
#define NAME_(name, c, msg)                                                                        \
    case c:                                                                                        \
        return "PYS_E_" #name;
        PYS_ERRNO_MAP(NAME_)
#undef NAME_
    }
    return "PYS_E_UNKNOWN";
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Parses "C <kind> <firstlineno> <code bytes> <hex> <name>" into *r. */
static void record_begin(struct record *r, char *line, struct stats *st)
{
    char *save = NULL;
    char *kind = strtok_r(line + 1, " ", &save);
    char *first = strtok_r(NULL, " ", &save);
    char *clen = strtok_r(NULL, " ", &save);
    char *hex = strtok_r(NULL, " ", &save);
    char *name = strtok_r(NULL, "", &save);
    size_t hlen;

    if (!kind || !first || !clen || !hex)
        die_input(st, "short C record");
    if (strcmp(kind, "loc") == 0)
        r->kind = KIND_LOC;
    else if (strcmp(kind, "l310") == 0)
        r->kind = KIND_L310;
    else if (strcmp(kind, "lnotab") == 0)
        r->kind = KIND_LNOTAB;
    else
        die_input(st, "unknown table kind");
    r->firstlineno = (int32_t)strtol(first, NULL, 10);
    r->code_len = strtol(clen, NULL, 10);
    if (strcmp(hex, "-") == 0)
        hex = "";
    hlen = strlen(hex);
    if (hlen % 2)
        die_input(st, "odd hex length");
    if (hlen / 2 > r->tab_cap) {
        r->tab_cap = hlen / 2;
        r->tab = xrealloc(r->tab, r->tab_cap);
    }
    for (size_t i = 0; i < hlen / 2; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            die_input(st, "bad hex digit");
        r->tab[i] = (uint8_t)(hi << 4 | lo);
    }
    r->tab_len = hlen / 2;
    free(r->name);
    r->name = strdup(name ? name : "?");
    r->units = 0;
    r->max_end = 0;
    r->nstarts = 0;
    st->objects++;
}

static void check_position(struct record *r, const long v[4], struct stats *st)
{
    struct cpy_location loc;
    uint32_t idx = r->units++;
    int err = cpy_loctable_lookup(r->tab, r->tab_len, r->firstlineno, idx, &loc);

    st->instructions++;
    if (err)
        mismatch(st, r, "unit %u: expected (%ld, %ld, %ld, %ld), got %s", idx, v[0], v[1], v[2],
                 v[3], err_name(err));
    else if (loc.lineno != v[0] || loc.end_lineno != v[1] || loc.col != v[2] || loc.end_col != v[3])
        mismatch(st, r, "unit %u: expected (%ld, %ld, %ld, %ld), got (%d, %d, %d, %d)", idx, v[0],
                 v[1], v[2], v[3], (int)loc.lineno, (int)loc.end_lineno, (int)loc.col,
                 (int)loc.end_col);
}

static void check_range(struct record *r, long start, long end, long line, struct stats *st)
{
    if (start < 0 || end < start || start % 2)
        die_input(st, "bad co_lines range");
    for (long off = start; off < end; off += 2) {
        int32_t got;
        int err = cpy_linetable310_lookup(r->tab, r->tab_len, r->firstlineno, (uint32_t)off, &got);
        st->instructions++;
        if (err)
            mismatch(st, r, "offset %ld: expected line %ld, got %s", off, line, err_name(err));
        else if (got != line)
            mismatch(st, r, "offset %ld: expected line %ld, got %d", off, line, (int)got);
    }
    if (end > r->max_end)
        r->max_end = end;
}

/* What is left once all of a record's lines are in: the end of the table,
 * and for co_lnotab every offset of co_code. */
static void record_end(struct record *r, struct stats *st)
{
    struct cpy_location loc;
    int32_t got;
    int err;

    switch (r->kind) {
    case KIND_NONE:
        return;
    case KIND_LOC:
        err = cpy_loctable_lookup(r->tab, r->tab_len, r->firstlineno, r->units, &loc);
        if (err != PYS_E_NOTFOUND)
            mismatch(st, r, "unit %u: past co_positions(), expected PYS_E_NOTFOUND, got %s",
                     r->units, err ? err_name(err) : "a location");
        break;
    case KIND_L310:
        err =
            cpy_linetable310_lookup(r->tab, r->tab_len, r->firstlineno, (uint32_t)r->max_end, &got);
        if (err != PYS_E_NOTFOUND)
            mismatch(st, r, "offset %ld: past co_lines(), expected PYS_E_NOTFOUND, got %s",
                     r->max_end, err ? err_name(err) : "a line");
        break;
    case KIND_LNOTAB: {
        size_t i = 0;
        for (long off = 0; off < r->code_len; off += 2) {
            while (i + 1 < r->nstarts && r->starts[i + 1].off <= off)
                i++;
            st->instructions++;
            if (r->nstarts == 0 || r->starts[i].off > off) {
                mismatch(st, r, "offset %ld: findlinestarts() has no line start before it", off);
                continue;
            }
            err = cpy_lnotab_lookup(r->tab, r->tab_len, r->firstlineno, (uint32_t)off, &got);
            if (err)
                mismatch(st, r, "offset %ld: expected line %ld, got %s", off, r->starts[i].line,
                         err_name(err));
            else if (got != r->starts[i].line)
                mismatch(st, r, "offset %ld: expected line %ld, got %d", off, r->starts[i].line,
                         (int)got);
        }
        break;
    }
    }
}

int main(void)
{
    struct record r = {0};
    struct stats st = {0};
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;

    while ((n = getline(&line, &cap, stdin)) != -1) {
        long v[4];
        st.lineno++;
        if (n > 0 && line[n - 1] == '\n')
            line[--n] = '\0';
        if (n == 0 || line[0] == '#')
            continue;
        if (line[0] == 'C') {
            record_end(&r, &st);
            record_begin(&r, line, &st);
            continue;
        }
        if (r.kind == KIND_NONE)
            die_input(&st, "data before the first C record");
        if (line[0] == 'P' && r.kind == KIND_LOC &&
            sscanf(line, "P %ld %ld %ld %ld", &v[0], &v[1], &v[2], &v[3]) == 4)
            check_position(&r, v, &st);
        else if (line[0] == 'R' && r.kind == KIND_L310 &&
                 sscanf(line, "R %ld %ld %ld", &v[0], &v[1], &v[2]) == 3)
            check_range(&r, v[0], v[1], v[2], &st);
        else if (line[0] == 'S' && r.kind == KIND_LNOTAB &&
                 sscanf(line, "S %ld %ld", &v[0], &v[1]) == 2) {
            if (r.nstarts == r.starts_cap) {
                r.starts_cap = r.starts_cap ? 2 * r.starts_cap : 64;
                r.starts = xrealloc(r.starts, r.starts_cap * sizeof(*r.starts));
            }
            r.starts[r.nstarts++] = (struct line_start){v[0], v[1]};
        } else
            die_input(&st, "unexpected line");
    }
    record_end(&r, &st);
    if (st.mismatches > MAX_REPORTED)
        printf("... %lu more mismatches\n", st.mismatches - MAX_REPORTED);
    printf("checked %lu code objects, %lu instructions, %lu mismatches\n", st.objects,
           st.instructions, st.mismatches);
    free(line);
    free(r.tab);
    free(r.name);
    free(r.starts);
    return (st.mismatches || st.instructions == 0) ? 1 : 0;
}
