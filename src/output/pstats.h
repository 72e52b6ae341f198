/*
 * pstats: a profile by function, as a file Python's pstats.Stats loads and
 * as a table for the terminal.
 */
#ifndef PYSTROBE_OUTPUT_PSTATS_H
#define PYSTROBE_OUTPUT_PSTATS_H

#include <stddef.h>
#include <stdio.h>

#include <pystrobe/pystrobe.h>

enum out_pstats_sort {
    OUT_SORT_NSAMPLES,
    OUT_SORT_TOTTIME,
    OUT_SORT_CUMTIME,
    OUT_SORT_SAMPLE_PCT,
    OUT_SORT_CUMUL_PCT,
    OUT_SORT_NSAMPLES_CUMUL,
    OUT_SORT_NAME,
};

/* The sort named name (as CPython 3.15's --sort), or -1. */
int out_pstats_sort_parse(const char *name);

/* Write the marshal'd stats dict. 0, PYS_E_IO or PYS_E_NOMEM. */
int out_pstats_write_marshal(FILE *f, const pys_profile *p);

/* Write the table, limit rows at most. 0, PYS_E_IO or PYS_E_NOMEM. */
int out_pstats_write_table(FILE *f, const pys_profile *p, int sort, size_t limit);

#endif
