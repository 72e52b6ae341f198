/*
 * tach: reading CPython 3.15's own binary profiles (TACH format version 1,
 * written by `python3.15 -m profiling.sampling ... --binary`) into the
 * sample stream, as out_rec_read reads pystrobe's recordings.
 */
#ifndef PYSTROBE_OUTPUT_TACH_H
#define PYSTROBE_OUTPUT_TACH_H

#include <stdio.h>
#include <string.h>

#include "output/recording.h"

/* Does data start like a TACH file (either byte order)? */
static inline int out_tach_is(const uint8_t *data, size_t size)
{
    return size >= 4 && (memcmp(data, "HCAT", 4) == 0 || memcmp(data, "TACH", 4) == 0);
}

/* What the header, the footer and the stats extension say, as they stand:
 * out_tach_read checks them against the file. */
struct out_tach_info {
    uint32_t version, compression, config, threads, strings, frames;
    uint8_t python[3]; /* the writer's major, minor, micro */
    uint64_t start_us, interval_us, samples, str_off, frame_off;
    int has_stats;          /* the stats extension is there */
    uint32_t stats_present; /* of it, 1: error_rate, 2: missed_samples */
    double duration_sec, sample_rate, error_rate, missed_samples;
};

/* Fill *out from a little-endian TACH file ("HCAT"); 0, or -1 (*out
 * untouched) if data is too short for a header and footer or starts
 * otherwise. */
int out_tach_info(const uint8_t *data, size_t size, struct out_tach_info *out);

/* As out_rec_read: the META first (pid 0: the format does not have it),
 * then each sample record's samples, one thread each, in file order; no
 * STATS. The frames have no first line (0). */
int out_tach_read(const uint8_t *data, size_t size, const struct out_rec_reader_cb *cb,
                  struct out_rec_read_info *info, char *err, size_t errlen);

/* --- writing (the module's BinaryWriter) --------------------------------- */

/* The deepest stack CPython's reader takes. */
#define OUT_TACH_MAX_DEPTH 256

/* A frame to write: strings as UTF-8 (len bytes, not NUL-terminated);
 * has_location 0 for a frame without one (stored as -1, 0, -1, 0);
 * opcode -1 for none. */
struct out_tach_frame {
    const char *filename, *funcname;
    size_t filename_len, funcname_len;
    int has_location;
    int32_t lineno, end_lineno, col, end_col;
    int opcode;
};

struct out_tach_write_stats {
    uint64_t samples, frames, truncated, bytes;
};

struct out_tach_writer;
/* A writer of f (opened for writing; the file is written at finalize):
 * compression 0 none, 1 zstd; mode the PROFILING_MODE (-1: unknown);
 * features the capture features (-1: unknown); python the writer's
 * version (major, minor, micro). NULL if out of memory. */
struct out_tach_writer *out_tach_writer_new(FILE *f, uint64_t interval_us, uint64_t start_us,
                                            int compression, int mode, int features,
                                            const uint8_t python[3]);
/* One thread's stack (frames innermost first) at ts_us. 0 or PYS_E_NOMEM. */
int out_tach_write_sample(struct out_tach_writer *w, uint64_t tid, uint32_t interp, uint32_t status,
                          const struct out_tach_frame *frames, size_t n, uint64_t ts_us);
/* The stats extension (error_rate, missed_samples: NULL when unknown). */
void out_tach_set_stats(struct out_tach_writer *w, double duration_sec, double sample_rate,
                        const double *error_rate, const double *missed_samples);
/* Write the whole file. 0, PYS_E_NOMEM or PYS_E_IO. */
int out_tach_finalize(struct out_tach_writer *w);
const struct out_tach_write_stats *out_tach_writer_stats(const struct out_tach_writer *w);
void out_tach_writer_free(struct out_tach_writer *w);

#endif
