/*
 * jsonl: JSON lines with the record types and fields of CPython 3.15's
 * profiler (`--jsonl`): meta, string_table, frame_table, agg, end, so that
 * consumers of its files read pystrobe's; and, as an option, one `sample`
 * record per sample with its time and each thread's id, status and stack,
 * which the reference cannot give. Fed from the sample stream, live or
 * from a recording, so both write the same bytes.
 *
 * Records (one compact JSON object a line; "v" 0, "run_id" on each):
 *   meta          {"sample_interval_usec", "mode"}
 *   string_table  {"strings": [{"str_id", "value"}]}           <= 256 a record
 *   frame_table   {"frames": [{"frame_id", "path_str_id", "func_str_id", "line",
 *                  "end_line" (if > 0), "col" (if >= 0), "end_col" (if >= 0),
 *                  with --opcodes "opcode", "opname", "opbase" (as dump
 *                  --json's) where the frame's instruction was read}]}
 *   agg           {"kind": "frame", "scope": "final", "samples_total",
 *                  "entries": [{"frame_id", "self", "cumulative"}]}
 *   sample        {"t_us" (since the start), "threads": [{"tid", "status",
 *                  "frames": [frame ids, innermost first]}]} (+ "ns_tid",
 *                  "rc" where they apply); with samples, the string and frame
 *                  records that define new ids come just before the sample
 *                  that first names them
 *   end           {"samples_total"}
 * Ids are 0-based in first-seen order (a frame's function name before its
 * path); a frame is (path, function, line, end_line, col, end_col,
 * instruction);
 * samples_total counts thread stacks; cumulative counts a frame once per
 * stack.
 */
#ifndef PYSTROBE_OUTPUT_JSONL_H
#define PYSTROBE_OUTPUT_JSONL_H

#include <stdio.h>

#include "output/recording.h"

typedef struct out_jsonl out_jsonl;

/* A writer; with samples, sample records go to spool (a scratch file,
 * e.g. tmpfile()) as they come. NULL if out of memory. */
out_jsonl *out_jsonl_new(const struct out_rec_meta *m, int samples, FILE *spool);
void out_jsonl_free(out_jsonl *j);
/* One sample's kept threads. 0, PYS_E_NOMEM or PYS_E_IO (the spool). */
int out_jsonl_sample(out_jsonl *j, const struct out_rec_sample *s);
/* Write the whole file to f. 0, PYS_E_NOMEM or PYS_E_IO. */
int out_jsonl_write(out_jsonl *j, FILE *f);
/* Thread stacks counted so far. */
uint64_t out_jsonl_stacks(const out_jsonl *j);

#endif
