/*
 * flamegraph: an aggregated profile as one self-contained HTML page (an
 * interactive icicle or flame graph: zoom, search, thread filter, tooltips,
 * an inverted view, short paths, a dark theme, a panel of the hottest
 * functions, a note of what is too narrow to draw) that needs no network.
 * The page is src/output/flamegraph.html, embedded at build time; the
 * profile goes into it as JSON through the escaping writer (output/json.h),
 * so nothing read from the target can end the <script> element it sits in.
 *
 * The data, in <script type="application/json" id="pystrobe-data">:
 *
 *   {"format": "pystrobe-flamegraph", "version": 1,
 *    "title": "...",
 *    "info": {"pid", "python_version" (PY_VERSION_HEX, 0 = unknown), "mode",
 *             "samples", "duration_ns", "interval_ns", "failed", "missed"},
 *    "strings": ["...", ...],            every distinct file and function name
 *    "threads": [[node, tid], ...],      the thread nodes and their native ids
 *                                        (a decimal string above 2^53)
 *    "nodes": {"parent": [...], "name": [...], "file": [...], "line": [...],
 *              "first": [...], "kind": [...], "self": [...], "total": [...]},
 *    "opcodes": {"node": [...], "opcode": [...], "name": [...], "base": [...],
 *                "count": [...]}}    only in a profile whose frames carry
 *                                    their instruction (--opcodes)
 *
 * The node arrays are parallel, indexed by node id as in the profile: node 0
 * is the root (parent -1), its children the threads, then frames outermost
 * first; a parent's id is always smaller than its children's. "name" and
 * "file" index "strings" (-1 for the root and thread nodes), "line" and
 * "first" are the frame's lineno and firstlineno (-1 unknown), "kind" is
 * PYS_FRAME_* (-1 for the root and threads), "self" and "total" are samples.
 * "opcodes" is parallel too, a row per (node, instruction) sampled: the
 * instruction's byte, its name and the instruction it stands for (indexes
 * into "strings", -1: none; pys_opcode_name) and the samples at it.
 */
#ifndef PYSTROBE_OUTPUT_FLAMEGRAPH_H
#define PYSTROBE_OUTPUT_FLAMEGRAPH_H

#include <stdio.h>

#include <pystrobe/pystrobe.h>

/* Write the page for profile p to f, with title (any text; NULL for a default)
 * as the page's title. 0; PYS_E_IO if writing to f failed (f is flushed, and
 * its error indicator tells); PYS_E_NOMEM; PYS_E_INVAL if the embedded page
 * has lost its data marker (a build error, caught by the tests). The page may
 * be partly written on failure. */
int out_flamegraph_write(FILE *f, const pys_profile *p, const char *title);

/*
 * The differential page (--diff-flamegraph): profile cur against base, in
 * the same page and data format, with the threads of each merged into one
 * node and frames matched along their path by kind, function and file
 * (lines left out, so a function whose lines moved still matches). The
 * data gains "diff": {"baseline": baseline_name, "baseline_samples",
 * "current_samples"} and per node "cself" (current self samples), "bself"
 * and "btotal" (the baseline's, unscaled) and "only" (0 in both, 1 only
 * in cur, 2 only in base); "self" and "total" are what is drawn: current
 * samples, and for a path only in the baseline its samples scaled by
 * current / baseline samples (rounded up). "line" is -1. Returns as
 * out_flamegraph_write.
 */
int out_flamegraph_write_diff(FILE *f, const pys_profile *cur, const pys_profile *base,
                              const char *title, const char *baseline_name);

#endif
