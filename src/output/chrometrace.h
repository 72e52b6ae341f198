/*
 * chrometrace: the samples as a timeline in Chrome's trace event format
 * (py-spy's `chrometrace`), which chrome://tracing, Perfetto and speedscope
 * load. Unlike the other outputs it is not built from the aggregated
 * profile but from the sample stream: each sample's stack of each thread is
 * compared with the thread's stack at the sample before, and the frames that
 * ended get an "E" event, the frames that began a "B" event, at the sample's
 * time. The document:
 *
 *   {"traceEvents": [
 *      {"ph": "M", "name": "thread_name", "pid": P, "tid": T, "args": {"name": "tid:T"}},
 *        (with the thread's Python name where known: "tid:T (NAME)")
 *      {"ph": "B", "name": QUALNAME, "cat": "python", "pid": P, "tid": T, "ts": MICROSECONDS,
 *       "args": {"filename": FILE, "line": LINE}},
 *      {"ph": "E", ... the same name and args ...}, ...],
 *    "displayTimeUnit": "ms",
 *    "otherData": {"producer": "pystrobe", "dropped_samples": N}}
 *
 * ts counts from the first sample. Every "B" has its "E": frames still open
 * at the end are closed at the last sample's time. P is the trace's pid,
 * or, for a thread whose stacks have a process frame (--merge-processes),
 * that process's; each process is named ("process_name") "pid P COMMAND".
 */
#ifndef PYSTROBE_OUTPUT_CHROMETRACE_H
#define PYSTROBE_OUTPUT_CHROMETRACE_H

#include <stdint.h>
#include <stdio.h>

#include <pystrobe/pystrobe.h>

/* The line a Python frame is shown at, and compared by. */
enum out_trace_lines { OUT_TRACE_LINE_EXACT, OUT_TRACE_LINE_FUNCTION, OUT_TRACE_LINE_NONE };

struct out_chrometrace;

/* A new, empty trace of process pid. Its events are kept in memory up to
 * max_bytes (0: no bound); past that the open frames are closed and later
 * samples are only counted (out_chrometrace_dropped). NULL if out of memory.
 * The frames' strings must stay valid until the trace is written. */
struct out_chrometrace *out_chrometrace_new(int pid, enum out_trace_lines lines,
                                            uint64_t max_bytes);
void out_chrometrace_free(struct out_chrometrace *t);
/* The process the events name, when known only after the trace is made;
 * before the first sample. */
void out_chrometrace_set_pid(struct out_chrometrace *t, int pid);
/* A sample at t_ns (any monotonic clock, in nanoseconds): begin it, give
 * each thread's stack (frames innermost first) and Python name (NULL: none;
 * copied, the last one given names the thread), or say that its stack
 * could not be read, end it. A thread not given in a sample has its frames
 * closed at that sample. 0, or PYS_E_NOMEM (the
 * trace is then kept as it was, closed at the last good sample). */
void out_chrometrace_sample_begin(struct out_chrometrace *t, uint64_t t_ns);
int out_chrometrace_thread(struct out_chrometrace *t, uint64_t tid, const char *name,
                           const struct pys_frame *frames, size_t n);
/* A thread whose stack could not be read in this sample: its frames stay
 * open as they stood (not knowing is no evidence that they returned). */
void out_chrometrace_thread_unread(struct out_chrometrace *t, uint64_t tid);
int out_chrometrace_sample_end(struct out_chrometrace *t);
/* Samples not recorded because the trace reached its memory bound. */
uint64_t out_chrometrace_dropped(const struct out_chrometrace *t);
/* Write the document to f, closing the frames still open. 0, PYS_E_IO or
 * PYS_E_NOMEM. */
int out_chrometrace_write(FILE *f, struct out_chrometrace *t);

#endif
