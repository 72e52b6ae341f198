/*
 * libFuzzer target for out_rec_read, the reader of pystrobe's recordings
 * (docs/format.md): a recording is a file anyone can hand to `pystrobe
 * replay`, so it is untrusted input. Besides memory errors and undefined
 * behaviour it checks the reader's contract: every sample it delivers has
 * its frames' strings readable and NUL-terminated, frame kinds in range,
 * and the result is 0 or a PYS_E code with a message. Half the inputs get
 * their blocks' checksums recomputed, so mutations reach the records.
 *
 * Each input is also read as CPython 3.15's binary format (output/tach.h),
 * with its magic set.
 *
 * Seeds (tests/fuzz/seeds/fuzz_recording/): short recordings of a real
 * target, zstd and stored, a cut one, one of a newer major version, one
 * with named threads (named.pysr: THREAD_NAME records, a rename), files of
 * format 1.x (v1_zstd.pysr, named.pysr, cut.pysr: the sample times inline),
 * one of several processes (merged.pysr, --merge-processes: every stack under
 * its PYS_FRAME_PROCESS frame), recordings of format 2.1 with SOURCE
 * records (sources_zstd.pysr, sources_stored.pysr: file texts, a file that
 * could not be read, a mark given at the end), one of format 2.2 with
 * UNREAD records (unread.pysr: every third sample's threads unread, made
 * with PYSTROBE_TEST_UNREAD_EVERY), and small files of CPython 3.15's own
 * writer.
 */
#include "output/recording.h"
#include "output/tach.h"

#include <pystrobe/pystrobe.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

static volatile size_t sink_len;

static int on_sample(void *ctx, const struct out_rec_sample *s)
{
    (void)ctx;
    for (size_t i = 0; i < s->nthreads; i++) {
        const struct out_rec_thread *t = &s->threads[i];
        if (t->name)
            sink_len += strlen(t->name);
        for (size_t k = 0; k < t->nframes; k++) {
            const struct pys_frame *f = &t->frames[k];
            check(f->filename && f->qualname);
            check(f->kind >= 0 && f->kind <= PYS_FRAME_PROCESS);
            sink_len += strlen(f->filename) + strlen(f->qualname);
        }
    }
    /* Unread threads (UNREAD records): no frames, a name readable. */
    check(s->nunread == 0 || s->unread != NULL);
    for (size_t i = 0; i < s->nunread; i++) {
        check(s->unread[i].nframes == 0);
        if (s->unread[i].name)
            sink_len += strlen(s->unread[i].name);
    }
    return 0;
}

/* A SOURCE record: its file a string of the recording, its text readable
 * to its length (the harness's copy has no slack: a read past the end is
 * caught), a reason NUL-terminated, a mark in range. */
static int on_source(void *ctx, const struct out_rec_source *s)
{
    (void)ctx;
    check(s->filename != NULL);
    check(s->changed >= OUT_REC_SRC_AS_READ && s->changed <= OUT_REC_SRC_CHANGED_SINCE);
    sink_len += strlen(s->filename);
    if (s->mark_only) {
        check(!s->text && !s->why);
    } else if (s->text) {
        unsigned sum = 0;
        for (size_t i = 0; i < s->len; i++)
            sum += (unsigned char)s->text[i];
        sink_len += sum;
    } else {
        check(s->why != NULL);
        sink_len += strlen(s->why);
    }
    return 0;
}

static int on_meta(void *ctx, const struct out_rec_meta *m)
{
    (void)ctx;
    sink_len += strlen(m->mode) + strlen(m->tool) + strlen(m->python_version_text);
    return 0;
}

/* Give each block the checksum of its payload, so that mutations reach the
 * record parser behind the check instead of stopping at it. */
static void fix_checksums(uint8_t *d, size_t size)
{
    size_t off = OUT_REC_FILE_HEADER;
    while (off <= size && size - off >= OUT_REC_BLOCK_HEADER) {
        uint8_t *h = d + off;
        size_t stored =
            (size_t)h[8] | (size_t)h[9] << 8 | (size_t)h[10] << 16 | (size_t)h[11] << 24;
        if (stored > size - off - OUT_REC_BLOCK_HEADER)
            return;
        uLong c = crc32(crc32(0L, Z_NULL, 0), h + OUT_REC_BLOCK_HEADER, (uInt)stored);
        for (int i = 0; i < 4; i++)
            h[16 + i] = (uint8_t)(c >> (8 * i));
        off += OUT_REC_BLOCK_HEADER + stored;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct out_rec_reader_cb cb = {NULL, on_meta, NULL, on_sample, 1, on_source};
    struct out_rec_read_info info;
    char err[256];
    /* The reader may see the bytes only: a copy without slack, so that a
     * read past the end is caught. */
    uint8_t *copy = malloc(size ? size : 1);
    check(copy != NULL);
    memcpy(copy, data, size);
    /* Half the inputs keep their checksums as they are: the check is tested too. */
    if (size % 2 == 0)
        fix_checksums(copy, size);
    int rc = out_rec_read(copy, size, &cb, &info, err, sizeof err);
    check(rc == 0 || rc == PYS_E_CORRUPT || rc == PYS_E_VERSION || rc == PYS_E_NOMEM);
    check(rc == 0 || err[0] != '\0');
    check(info.bytes <= size);
    for (size_t i = 0; i < info.nstrings; i++)
        sink_len += strlen(info.strings[i]);
    out_rec_read_info_release(&info);
    /* CPython 3.15's format, which replay reads too (seed: tach_zstd.bin). */
    if (size >= 4) {
        memcpy(copy, "HCAT", 4);
        rc = out_tach_read(copy, size, &cb, &info, err, sizeof err);
        check(rc == 0 || rc == PYS_E_CORRUPT || rc == PYS_E_VERSION || rc == PYS_E_NOMEM);
        check(rc == 0 || err[0] != '\0');
        out_rec_read_info_release(&info);
    }
    free(copy);
    return 0;
}
