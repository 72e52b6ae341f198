/*
 * speedscope: a profile in speedscope's file format
 * (https://www.speedscope.app/file-format-schema.json), as speedscope and
 * other viewers import it.
 *
 *   {"$schema": "...", "exporter": "pystrobe", "name": TITLE,
 *    "activeProfileIndex": 0,
 *    "shared": {"frames": [{"name", "file", "line"}, ...]},
 *    "profiles": [{"type": "sampled", "name": "Thread TID", "unit": "none",
 *                  "startValue": 0, "endValue": N,
 *                  "samples": [[frame, ...], ...], "weights": [n, ...]}, ...]}
 *
 * One sampled profile per thread, the one with most samples first. A frame is a
 * function as output/funcs.h defines it ("line" its first line, absent for
 * markers, which also have no "file"), so speedscope's per-function totals
 * are pstats' direct and cumulative samples. Each distinct stack is one
 * sample, outermost frame first, weighted by its samples; a thread's samples
 * with no frame at all are left out, as pstats leaves them out.
 */
#ifndef PYSTROBE_OUTPUT_SPEEDSCOPE_H
#define PYSTROBE_OUTPUT_SPEEDSCOPE_H

#include <stdio.h>

#include <pystrobe/pystrobe.h>

/* Write p to f with title (NULL: a default) as the file's name. 0, PYS_E_IO
 * or PYS_E_NOMEM; f may be partly written on failure. */
int out_speedscope_write(FILE *f, const pys_profile *p, const char *title);

#endif
