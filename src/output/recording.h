/*
 * recording: pystrobe's recording format (docs/format.md), every sample as
 * it was taken, to be turned into any output later (`pystrobe replay`).
 *
 * A recording is a 16-byte file header and then blocks, each a 20-byte
 * header and a payload (zstd or stored) of records. Records refer to strings,
 * frames and threads defined by earlier records, possibly in earlier blocks;
 * a block is written whole or not at all, so a file cut anywhere (a writer
 * killed, a full disk) reads up to its last complete block.
 *
 * Writing is in two halves so that the sampling thread never compresses:
 * the encoder (out_rec_enc) turns samples into records in memory, and
 * a packer (out_rec_packer), which keeps no state of the encoder's, turns a detached
 * buffer of records into a block another thread writes.
 *
 * Reading (out_rec_read) validates everything: a file is untrusted input.
 */
#ifndef PYSTROBE_OUTPUT_RECORDING_H
#define PYSTROBE_OUTPUT_RECORDING_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <pystrobe/pystrobe.h>

#define OUT_REC_MAJOR 2
#define OUT_REC_MINOR 2
#define OUT_REC_FILE_HEADER 16
#define OUT_REC_BLOCK_HEADER 20
/* The largest payload a reader accepts, stored or decompressed. */
#define OUT_REC_MAX_BLOCK ((uint64_t)1 << 30)

enum out_rec_compression { OUT_REC_NONE = 0, OUT_REC_ZSTD = 1 };

/* Facts about the run: the META record (at the start), and the STATS
 * record (at each block's end: counts so far; final at the end). Strings
 * are NUL-terminated; a reader's point into its own storage. */
struct out_rec_meta {
    int pid;
    uint32_t python_version; /* PY_VERSION_HEX */
    const char *python_version_text;
    const char *mode;
    const char *tool; /* "pystrobe 0.1.0" */
    uint64_t interval_ns;
    double rate_hz;
    uint64_t start_realtime_ns; /* CLOCK_REALTIME at the start: the wall-clock date */
    uint64_t start_monotonic_ns;
    uint64_t max_frames;
    uint64_t max_memory; /* the live profile's bound: replay applies it too */
    int native, gc, main_only, opcodes;
};
struct out_rec_stats {
    uint64_t samples, failed, missed, truncated, unmatched, duration_ns;
    int final; /* written at the end of the recording */
};

/* --- writing ---------------------------------------------------------------- */

/* A growing byte buffer. */
struct out_rec_buf {
    uint8_t *p;
    size_t len, cap;
};
void out_rec_buf_release(struct out_rec_buf *b);

typedef struct out_rec_enc out_rec_enc;

/* One thread's stack of a sample: id is pystrobe's view of the thread (its
 * /proc), ns_id the target's when it differs (else 0), name its Python
 * name (NULL: none known, or unchanged; the encoder compares it by address,
 * so it must stay valid as the frames' strings do; read: the last name the
 * recording gave the thread so far). An unread thread (out_rec_sample's
 * unread) has no frames, and its name is neither written nor changed. */
struct out_rec_thread {
    uint64_t id, ns_id;
    const char *name;
    uint32_t status;
    size_t nframes;
    const struct pys_frame *frames; /* innermost first */
    /* Read: the stack holds a <GC> frame (PYS_FRAME_GC), kept up to date
     * from the frames each sample pops and pushes, so that a reader looks
     * through a stack for one only then. Ignored by the encoder. */
    int gc;
};

/* A sample, as written and as read: threads in recorded order, frames
 * innermost first (read: valid during the callback only); rc the
 * snapshot's result (nonzero: it failed as a whole, no threads). unread:
 * the threads whose stacks could not be read in this sample (their status
 * bits as read, no frames; since format 2.2), which a reader must not take
 * for threads that were absent: a timeline keeps their frames open. */
struct out_rec_sample {
    uint64_t t_ns; /* to the microsecond */
    int rc;
    size_t nthreads;
    const struct out_rec_thread *threads;
    size_t nunread;
    const struct out_rec_thread *unread;
};

/* The file header: OUT_REC_FILE_HEADER bytes into out. */
void out_rec_file_header(uint8_t out[OUT_REC_FILE_HEADER]);

/* An encoder; NULL if out of memory. */
out_rec_enc *out_rec_enc_new(void);
void out_rec_enc_free(out_rec_enc *e);
/* Append a META record. 0 or PYS_E_NOMEM. */
int out_rec_enc_meta(out_rec_enc *e, const struct out_rec_meta *m);
/* Append a STATS record. 0 or PYS_E_NOMEM. */
int out_rec_enc_stats(out_rec_enc *e, const struct out_rec_stats *s);
/* Append sample s, taken at s->t_ns (CLOCK_MONOTONIC; stored to the
 * microsecond): the snapshot's result, the threads kept and those kept
 * that could not be read. The frames' strings
 * must stay valid and unchanged while the encoder lives (a session's
 * interned strings do): the encoder compares them by address. 0 or
 * PYS_E_NOMEM (the encoder is then unusable: its tables may lack what
 * records name). */
int out_rec_enc_sample(out_rec_enc *e, const struct out_rec_sample *s);
/* The mark of a source file (out_rec_enc_source, struct out_rec_source):
 * as read, modified after its process started, modified or removed after
 * it was read. */
enum { OUT_REC_SRC_AS_READ = 0, OUT_REC_SRC_CHANGED = 1, OUT_REC_SRC_CHANGED_SINCE = 2 };
/* Append a SOURCE record: file filename (as frames name it; it must stay
 * valid while the encoder lives) as read while sampling: len bytes of text,
 * or (text NULL) why it could not be read; changed its mark. 0 or
 * PYS_E_NOMEM. */
int out_rec_enc_source(out_rec_enc *e, const char *filename, const char *text, size_t len,
                       const char *why, int changed);
/* Append a SOURCE record that only sets the mark of a file given before
 * (a change seen at the end). 0 or PYS_E_NOMEM. */
int out_rec_enc_source_mark(out_rec_enc *e, const char *filename, int changed);
/* The file names of the Python frames stored so far, each once, in the
 * order of their first frame: out_rec_enc_files of them; the i-th stays
 * valid while the encoder lives. What the sources of a recording are read
 * from (cli/record_src.c). */
size_t out_rec_enc_files(const out_rec_enc *e);
const char *out_rec_enc_file(const out_rec_enc *e, size_t i);
/* Append the END record (nothing may follow it). */
int out_rec_enc_end(out_rec_enc *e);
/* Bytes of records appended since the last take. */
size_t out_rec_enc_pending(const out_rec_enc *e);
/* Take the records appended so far as a block's raw payload (*out
 * receives the buffer, to be released by the caller); the encoder starts a
 * new one. 0, or PYS_E_NOMEM (then nothing was taken). */
int out_rec_enc_take(out_rec_enc *e, struct out_rec_buf *out);
/* Bytes the encoder holds for its tables and per-thread stacks. */
size_t out_rec_enc_memory(const out_rec_enc *e);

/* Makes blocks. With zstd, the blocks of a file are consecutive pieces of
 * one zstd stream, each ending at a flush (later blocks refer back to
 * earlier ones' data: better compression than blocks on their own). One
 * packer per file; it may run on another thread than the encoder. */
typedef struct out_rec_packer out_rec_packer;
/* NULL if out of memory. */
out_rec_packer *out_rec_packer_new(enum out_rec_compression c, int zstd_level);
void out_rec_packer_free(out_rec_packer *k);
/* Make the block of a raw payload (len bytes, as out_rec_enc_take gives
 * it) in *out (replaced; release it);
 * last: the file's last block (its zstd frame ends there). 0, PYS_E_NOMEM, PYS_E_INVAL (too large)
 * or PYS_E_IO (the compressor failed; the packer is then unusable). */
int out_rec_block_pack(out_rec_packer *k, const uint8_t *raw, size_t len, int last,
                       struct out_rec_buf *out);

/* --- reading ---------------------------------------------------------------- */

/* A source file as recorded (a SOURCE record): its text read while
 * sampling (len bytes, not NUL-terminated, valid during the callback only),
 * or (text NULL) why it could not be read; or, with mark_only, only a new
 * mark for a file given before. */
struct out_rec_source {
    const char *filename; /* as the frames name it */
    const char *text;
    size_t len;
    const char *why; /* NUL-terminated, if text is NULL and not mark_only */
    int changed;     /* OUT_REC_SRC_* */
    int mark_only;
};

struct out_rec_reader_cb {
    void *ctx;
    /* Each callback returns 0, or nonzero to stop reading (returned by
     * out_rec_read as is). meta and stats may be NULL. */
    int (*meta)(void *ctx, const struct out_rec_meta *m);
    int (*stats)(void *ctx, const struct out_rec_stats *s);
    int (*sample)(void *ctx, const struct out_rec_sample *s);
    /* The frames' strings outlive the read (a profile names them by
     * address): handed over in out_rec_read_info.strings. */
    int keep_strings;
    /* SOURCE records (NULL: skipped). */
    int (*source)(void *ctx, const struct out_rec_source *s);
};

/* What a read found. */
struct out_rec_read_info {
    uint16_t major, minor;
    uint64_t blocks, samples;
    int complete;   /* the END record was read */
    int cut;        /* the file ends inside a block (its writer stopped there) */
    uint64_t bytes; /* the file's bytes up to the last complete block */
    char **strings; /* with keep_strings: every string read (out_rec_read_info_release) */
    size_t nstrings;
};
void out_rec_read_info_release(struct out_rec_read_info *info);

/* Read a recording from data (size bytes), calling cb for what it holds,
 * in order. Returns 0 (the whole file read), a callback's nonzero value,
 * PYS_E_VERSION (a newer major version: nothing read), PYS_E_CORRUPT (not a
 * recording, or a damaged or cut block: what came before it was delivered)
 * or PYS_E_NOMEM. err receives a message on failure (NUL-terminated). */
int out_rec_read(const uint8_t *data, size_t size, const struct out_rec_reader_cb *cb,
                 struct out_rec_read_info *info, char *err, size_t errlen);

#endif
