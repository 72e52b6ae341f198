/*
 * gecko: the Firefox Profiler's processed profile format (`--gecko`), a
 * JSON file profiler.firefox.com loads (its importer upgrades the declared
 * version 57 to its own). One thread track per sampled thread (named by
 * its Python name, the last one seen, and id where it has one) with each sample
 * at its real time, the start as a real date, the target's pid
 * (with --merge-processes each thread its own process's pid and command,
 * from its stacks' process frame: one track per process),
 * categories for Python, native and GC frames, and interval markers for
 * the thread states the samples saw: holding the GIL, waiting for it, on
 * CPU (where known), handling an exception, collecting garbage. With
 * --opcodes, each Python frame's instruction is its subcategory of the
 * Python category ("BINARY_OP_ADD_INT (BINARY_OP)"), so the profiler's
 * category breakdown of a call node gives the instructions its samples
 * were at. Fed from
 * the sample stream, live or from a recording, so both write the same
 * bytes.
 *
 * Memory grows with the samples (a stack index and a time per thread
 * sample, as the format stores them) and with the distinct stacks.
 */
#ifndef PYSTROBE_OUTPUT_GECKO_H
#define PYSTROBE_OUTPUT_GECKO_H

#include <stdio.h>

#include "output/recording.h"

typedef struct out_gecko out_gecko;

/* NULL if out of memory. */
out_gecko *out_gecko_new(const struct out_rec_meta *m);
void out_gecko_free(out_gecko *g);
/* One sample's kept threads. 0 or PYS_E_NOMEM. */
int out_gecko_sample(out_gecko *g, const struct out_rec_sample *s);
/* Write the profile to f. 0, PYS_E_NOMEM or PYS_E_IO. */
int out_gecko_write(out_gecko *g, FILE *f);

#endif
