/*
 * A Python frame of main.py for unit tests of the writers and readers:
 * function name, line (first line 1, no column, no instruction).
 */
#ifndef TESTS_UNIT_PY_FRAME_H
#define TESTS_UNIT_PY_FRAME_H

#include <string.h>

#include <pystrobe/pystrobe.h>

static inline struct pys_frame frame(const char *name, int line)
{
    struct pys_frame f;
    memset(&f, 0, sizeof f);
    f.filename = "main.py";
    f.qualname = name;
    f.firstlineno = 1;
    f.lineno = line;
    f.end_lineno = line;
    f.col = f.end_col = f.lasti = -1;
    f.opcode = -1;
    f.kind = PYS_FRAME_PYTHON;
    return f;
}

#endif
