/*
 * collapsed: one line per distinct stack, frames root to leaf separated by
 * ';', then a space and the sample count: the input of flamegraph.pl and
 * speedscope.
 */
#ifndef PYSTROBE_OUTPUT_COLLAPSED_H
#define PYSTROBE_OUTPUT_COLLAPSED_H

#include <stdint.h>
#include <stdio.h>

#include <pystrobe/pystrobe.h>

/* A frame's lineno that says its line is left out (--nolineno): the frame
 * is written FILE:QUALNAME. Other outputs see a negative line: unknown. */
#define OUT_LINE_OMITTED INT32_MIN

/* Frames are FILE:QUALNAME:LINE (0 for an unknown line; FILE:QUALNAME for
 * OUT_LINE_OMITTED), markers as <native>, <GC>; with tid, each
 * stack starts with tid:N. Without it, equal stacks of different threads are
 * merged into one line. 0, PYS_E_IO or PYS_E_NOMEM. */
int out_collapsed_write(FILE *f, const pys_profile *p, int tid);

#endif
