/*
 * svg: the profile as a static SVG flame graph, py-spy's default output and
 * what people paste into issues: one rectangle per node, the root at the
 * bottom, each frame above its caller, width proportional to its samples,
 * a label where it fits and a <title> tooltip (name, samples, share; with
 * --opcodes the instructions its frame was sampled at, most sampled first). No
 * script: it renders the same in a browser, an image viewer or an issue.
 */
#ifndef PYSTROBE_OUTPUT_SVG_H
#define PYSTROBE_OUTPUT_SVG_H

#include <stdio.h>

#include <pystrobe/pystrobe.h>

/* Write profile p to f as an SVG document titled title (NULL for a default).
 * Every name from the target is escaped for XML: markup characters as
 * entities, control characters and bytes that are not UTF-8 as U+FFFD.
 * 0, PYS_E_IO or PYS_E_NOMEM. */
int out_svg_write(FILE *f, const pys_profile *p, const char *title);

#endif
