/*
 * collapsed: one line per distinct stack, frames root to leaf separated by
 * ';', then a space and the sample count: the input of flamegraph.pl and
 * speedscope.
 */
#ifndef PYSTROBE_OUTPUT_COLLAPSED_H
#define PYSTROBE_OUTPUT_COLLAPSED_H

#include <stdio.h>

#include <pystrobe/pystrobe.h>

/* Frames are FILE:QUALNAME:LINE, or FILE:QUALNAME where the line is
 * negative (unknown, or left out: --nolineno), markers as <native>, <GC>; with tid, each
 * stack starts with tid:N. Without it, equal stacks of different threads are
 * merged into one line. 0, PYS_E_IO or PYS_E_NOMEM. */
int out_collapsed_write(FILE *f, const pys_profile *p, int tid);

#endif
