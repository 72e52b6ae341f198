/*
 * pprof: a profile in pprof's format (src/output/profile.proto), gzipped,
 * as `go tool pprof`, Grafana Pyroscope, Parca and Google Cloud Profiler read
 * it.
 *
 * - sample_type: samples/count, then wall/nanoseconds (cpu/nanoseconds for
 *   a profile of mode "cpu"): samples times the sampling interval.
 *   default_sample_type is samples; period_type is the second type, period
 *   the sampling interval; duration_nanos the time sampled; time_nanos its
 *   start (the time of writing less the duration).
 * - function: one per function as output/funcs.h defines it (as pstats keys
 *   them): name the qualname (system_name left empty: Python has no
 *   mangled names), filename, start_line the first line (0 for markers).
 * - location: one per function and executing line, with one Line; all in
 *   mapping 1, a mapping that says functions, file names and lines are known.
 * - sample: one per distinct stack of a thread, leaf first, values its
 *   samples and their time; labels "thread" (str "Thread TID", as the
 *   speedscope writer names threads) and "thread_id" (num TID, the host's
 *   id). A thread's samples with no frame at all are left out, as pstats
 *   leaves them out.
 * - string_table: every string once ("" first); comments name pystrobe, the
 *   mode and the Python version.
 */
#ifndef PYSTROBE_OUTPUT_PPROF_H
#define PYSTROBE_OUTPUT_PPROF_H

#include <stdint.h>
#include <stdio.h>

#include <pystrobe/pystrobe.h>

/* Write p to f, gzipped; start_realtime_ns is when sampling started
 * (time_nanos; 0: unknown, taken as now less the profile's duration).
 * 0, PYS_E_IO or PYS_E_NOMEM; f may be partly written on failure. */
int out_pprof_write(FILE *f, const pys_profile *p, uint64_t start_realtime_ns);

#endif
