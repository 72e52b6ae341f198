/*
 * tach: reading CPython 3.15's own binary profiles (TACH format version 1,
 * written by `python3.15 -m profiling.sampling ... --binary`) into the
 * sample stream, as out_rec_read reads pystrobe's recordings.
 */
#ifndef PYSTROBE_OUTPUT_TACH_H
#define PYSTROBE_OUTPUT_TACH_H

#include <string.h>

#include "output/recording.h"

/* Does data start like a TACH file (either byte order)? */
static inline int out_tach_is(const uint8_t *data, size_t size)
{
    return size >= 4 && (memcmp(data, "HCAT", 4) == 0 || memcmp(data, "TACH", 4) == 0);
}

/* As out_rec_read: the META first (pid 0: the format does not have it),
 * then each sample record's samples, one thread each, in file order; no
 * STATS. The frames have no first line (0). */
int out_tach_read(const uint8_t *data, size_t size, const struct out_rec_reader_cb *cb,
                  struct out_rec_read_info *info, char *err, size_t errlen);

#endif
