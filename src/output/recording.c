/*
 * recording: the encoder, the block packer and the reader of pystrobe's
 * recording format. docs/format.md is the specification; this file follows
 * it and the constants below are the ones it names.
 *
 * Encoding a sample costs O(depth) comparisons per thread against the
 * thread's previous stack, and a table lookup only for frames that changed:
 * a stack is stored as how many of the previous stack's outermost frames it
 * keeps (given as how many of its innermost it drops: a small number that
 * repeats, whatever the depth), then the frames pushed on top of them.
 */
#include "output/recording.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "util/array.h"
#include "util/bytes.h"
#include "util/hashtab.h"

static const uint8_t FILE_MAGIC[8] = {'P', 'Y', 'S', 'T', 'R', 'E', 'C', '\n'};
static const uint8_t BLOCK_MAGIC[4] = {'P', 'B', 'L', 'K'};

enum rec_type {
    R_META = 1,
    R_STRING = 2,
    R_FRAME = 3,
    R_THREAD = 4,
    R_STATS = 5,
    R_SAMPLE = 6,
    R_END = 7,
    R_THREAD_NAME = 32, /* minor 1: skipped by minor-0 readers */
    R_SOURCE = 33,      /* format 2.1: skipped by 2.0 readers */
    R_UNREAD = 34,      /* format 2.2: skipped by 2.1 readers */
};

/* A SOURCE record's flags: the mark (OUT_REC_SRC_*) in the low two bits,
 * then: the bytes are why the file could not be read; no bytes, only a
 * new mark. Higher bits are a later minor version's: such a record is
 * skipped. */
#define SRC_MARK 3u
#define SRC_UNREADABLE 4u
#define SRC_MARK_ONLY 8u
#define SRC_KNOWN 15u
/* The longest reason a reader keeps for a file that could not be read. */
#define SRC_WHY 160

/* Value types of META and STATS fields. */
enum { V_UINT = 0, V_INT = 1, V_STR = 2, V_F64 = 3 };

/* --- buffers ---------------------------------------------------------------- */

void out_rec_buf_release(struct out_rec_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

static int buf_reserve(struct out_rec_buf *b, size_t more)
{
    if (b->cap - b->len >= more)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < more) {
        if (cap > SIZE_MAX / 2)
            return PYS_E_NOMEM;
        cap *= 2;
    }
    uint8_t *p = realloc(b->p, cap);
    if (!p)
        return PYS_E_NOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

/* Writers below assume room reserved by the caller (at most 10 bytes a
 * varint). */
static void put_u8(struct out_rec_buf *b, uint8_t v)
{
    b->p[b->len++] = v;
}

static void put_var(struct out_rec_buf *b, uint64_t v)
{
    while (v >= 0x80) {
        b->p[b->len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b->p[b->len++] = (uint8_t)v;
}

static uint64_t zz(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzz(uint64_t u)
{
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

void out_rec_file_header(uint8_t out[OUT_REC_FILE_HEADER])
{
    memcpy(out, FILE_MAGIC, 8);
    util_le_put(out + 8, OUT_REC_MAJOR, 2);
    util_le_put(out + 10, OUT_REC_MINOR, 2);
    util_le_put(out + 12, 0, 4);
}

/* --- the encoder ------------------------------------------------------------ */

struct str_ent {
    const char *s; /* owned copy */
    size_t len;
    uint64_t hash;
    int is_file; /* the file of a Python frame stored (in files) */
};

struct frame_ent {
    uint32_t file, qual; /* string ids */
    int32_t firstlineno, lineno, end_lineno, col, end_col, kind, opcode;
};

/* A thread's last stack, outermost first: the frames as the session gave
 * them (to compare by field and string address) and their ids. */
struct thread_ent {
    uint64_t id, ns_id;
    const char *name; /* the last name given (by address), NULL none */
    uint32_t name_id; /* its string id + 1, 0 none stored yet */
    struct pys_frame *frames;
    uint32_t *ids;
    size_t n, cap;
};

struct out_rec_enc {
    struct out_rec_buf buf; /* the records since the last take */
    /* Their samples' time column (docs/format.md): each time's high bits
     * (a var), and its low byte apart. */
    struct out_rec_buf times_hi, times_lo;
    struct out_rec_buf part;   /* scratch: a sample's thread parts */
    struct out_rec_buf unread; /* scratch: an UNREAD record's body */
    uint64_t last_us;        /* the time of the last sample, or the start (us) */
    int64_t interval_us;     /* the interval asked (us): times are stored against it */
    struct str_ent *strs;
    size_t nstrs, capstrs;
    struct util_htab strtab; /* ids are index + 1 */
    struct frame_ent *frames;
    size_t nframes, capframes;
    struct util_htab frametab;
    struct thread_ent *threads;
    size_t nthreads, capthreads;
    struct util_htab threadtab;
    /* The string ids (1-based) of Python frames' files, in order of their
     * first frame. */
    uint32_t *files;
    size_t nfiles, capfiles;
    /* A one-entry cache of string addresses to ids: the filename of one
     * frame is most often the filename of the last. */
    const char *last_ptr[2];
    uint32_t last_id[2];
};

static uint64_t str_hash_of(const void *ctx, uint32_t id)
{
    return ((const struct str_ent *)ctx)[id - 1].hash;
}

static uint64_t frame_hash(const struct frame_ent *f)
{
    uint64_t h = util_hash_add(0, f->file);
    h = util_hash_add(h, f->qual);
    h = util_hash_add(h, (uint32_t)f->firstlineno);
    h = util_hash_add(h, (uint32_t)f->lineno);
    h = util_hash_add(h, (uint32_t)f->end_lineno);
    h = util_hash_add(h, (uint32_t)f->col);
    h = util_hash_add(h, (uint32_t)f->end_col);
    h = util_hash_add(h, (uint32_t)f->kind);
    h = util_hash_add(h, (uint32_t)f->opcode);
    return util_hash_u64(h);
}

static uint64_t frame_hash_of(const void *ctx, uint32_t id)
{
    return frame_hash(&((const struct frame_ent *)ctx)[id - 1]);
}

static uint64_t thread_hash_of(const void *ctx, uint32_t id)
{
    return util_hash_u64(((const struct thread_ent *)ctx)[id - 1].id);
}

out_rec_enc *out_rec_enc_new(void)
{
    return calloc(1, sizeof(out_rec_enc));
}

void out_rec_enc_free(out_rec_enc *e)
{
    if (!e)
        return;
    out_rec_buf_release(&e->buf);
    out_rec_buf_release(&e->times_hi);
    out_rec_buf_release(&e->times_lo);
    out_rec_buf_release(&e->part);
    out_rec_buf_release(&e->unread);
    for (size_t i = 0; i < e->nstrs; i++)
        free((void *)e->strs[i].s);
    free(e->strs);
    free(e->frames);
    for (size_t i = 0; i < e->nthreads; i++) {
        free(e->threads[i].frames);
        free(e->threads[i].ids);
    }
    free(e->threads);
    free(e->files);
    util_htab_release(&e->strtab);
    util_htab_release(&e->frametab);
    util_htab_release(&e->threadtab);
    free(e);
}

/* The id of string s (len bytes, hash h), defining it (a STRING record)
 * if new. */
static int str_id(out_rec_enc *e, const char *s, size_t len, uint64_t h, uint32_t *out)
{
    uint32_t id;
    if (e->strtab.cap)
        for (size_t j = util_htab_first(&e->strtab, h); (id = e->strtab.slot[j]);
             j = util_htab_next(&e->strtab, j)) {
            const struct str_ent *x = &e->strs[id - 1];
            if (x->hash == h && x->len == len && memcmp(x->s, s, len) == 0) {
                *out = id;
                return 0;
            }
        }
    if (e->nstrs >= UINT32_MAX - 1 ||
        util_htab_reserve(&e->strtab, 256, 1, (uint32_t)e->nstrs + 1, str_hash_of, e->strs) < 0 ||
        util_array_reserve((void **)&e->strs, &e->capstrs, e->nstrs + 1, sizeof *e->strs) < 0 ||
        buf_reserve(&e->buf, len + 12) < 0)
        return PYS_E_NOMEM;
    char *copy = malloc(len + 1);
    if (!copy)
        return PYS_E_NOMEM;
    memcpy(copy, s, len);
    copy[len] = '\0';
    e->strs[e->nstrs] = (struct str_ent){copy, len, h, 0};
    id = (uint32_t)++e->nstrs;
    util_htab_set(&e->strtab, util_htab_free_slot(&e->strtab, h), id);
    put_u8(&e->buf, R_STRING);
    put_var(&e->buf, len);
    memcpy(e->buf.p + e->buf.len, s, len);
    e->buf.len += len;
    *out = id;
    return 0;
}

/* The id of string s, defining it if new; its address is remembered for
 * the next call (s must stay valid and unchanged while the encoder
 * lives). */
static int intern_str(out_rec_enc *e, const char *s, uint32_t *out)
{
    if (!s)
        s = "";
    for (int k = 0; k < 2; k++)
        if (e->last_ptr[k] == s) {
            *out = e->last_id[k];
            return 0;
        }
    size_t len = strlen(s);
    uint32_t id;
    if (str_id(e, s, len, util_hash_bytes(s, len), &id) < 0)
        return PYS_E_NOMEM;
    e->last_ptr[1] = e->last_ptr[0];
    e->last_id[1] = e->last_id[0];
    e->last_ptr[0] = s;
    e->last_id[0] = id;
    *out = id;
    return 0;
}

/* String id (1-based) is the file of a Python frame: noted in files the
 * first time. */
static int note_file(out_rec_enc *e, uint32_t id)
{
    if (e->strs[id - 1].is_file)
        return 0;
    if (util_array_reserve((void **)&e->files, &e->capfiles, e->nfiles + 1, sizeof *e->files) < 0)
        return PYS_E_NOMEM;
    e->strs[id - 1].is_file = 1;
    e->files[e->nfiles++] = id;
    return 0;
}

/* The id (0-based, as records name it) of frame f, defining it if new. */
static int intern_frame(out_rec_enc *e, const struct pys_frame *f, uint32_t *out)
{
    struct frame_ent k;
    memset(&k, 0, sizeof k);
    if (intern_str(e, f->filename, &k.file) < 0 || intern_str(e, f->qualname, &k.qual) < 0)
        return PYS_E_NOMEM;
    k.firstlineno = f->firstlineno;
    k.lineno = f->lineno;
    k.end_lineno = f->end_lineno;
    k.col = f->col;
    k.end_col = f->end_col;
    k.kind = f->kind;
    k.opcode = f->opcode;
    uint64_t h = frame_hash(&k);
    uint32_t id;
    if (e->frametab.cap)
        for (size_t j = util_htab_first(&e->frametab, h); (id = e->frametab.slot[j]);
             j = util_htab_next(&e->frametab, j))
            if (memcmp(&e->frames[id - 1], &k, sizeof k) == 0) {
                *out = id - 1;
                return 0;
            }
    if (e->nframes >= UINT32_MAX - 1 ||
        util_htab_reserve(&e->frametab, 256, 1, (uint32_t)e->nframes + 1, frame_hash_of,
                          e->frames) < 0 ||
        util_array_reserve((void **)&e->frames, &e->capframes, e->nframes + 1, sizeof *e->frames) <
            0 ||
        buf_reserve(&e->buf, 1 + 9 * 10) < 0)
        return PYS_E_NOMEM;
    if (k.kind == PYS_FRAME_PYTHON && note_file(e, k.file) < 0)
        return PYS_E_NOMEM;
    e->frames[e->nframes] = k;
    id = (uint32_t)++e->nframes;
    util_htab_set(&e->frametab, util_htab_free_slot(&e->frametab, h), id);
    struct out_rec_buf *b = &e->buf;
    put_u8(b, R_FRAME);
    put_var(b, k.file - 1);
    put_var(b, k.qual - 1);
    put_var(b, zz(k.firstlineno));
    put_var(b, zz(k.lineno));
    put_var(b, zz((int64_t)k.end_lineno - k.lineno));
    put_var(b, zz(k.col));
    put_var(b, zz((int64_t)k.end_col - k.col));
    put_var(b, (uint32_t)k.kind);
    put_var(b, zz(k.opcode));
    *out = id - 1;
    return 0;
}

/* The thread entry of id (index into e->threads), defining it if new. */
static int intern_thread(out_rec_enc *e, uint64_t tid, uint64_t ns_id, size_t *out)
{
    uint64_t h = util_hash_u64(tid);
    uint32_t id;
    if (e->threadtab.cap)
        for (size_t j = util_htab_first(&e->threadtab, h); (id = e->threadtab.slot[j]);
             j = util_htab_next(&e->threadtab, j))
            if (e->threads[id - 1].id == tid && e->threads[id - 1].ns_id == ns_id) {
                *out = id - 1;
                return 0;
            }
    if (e->nthreads >= UINT32_MAX - 1 ||
        util_htab_reserve(&e->threadtab, 16, 1, (uint32_t)e->nthreads + 1, thread_hash_of,
                          e->threads) < 0 ||
        util_array_reserve((void **)&e->threads, &e->capthreads, e->nthreads + 1,
                           sizeof *e->threads) < 0 ||
        buf_reserve(&e->buf, 21) < 0)
        return PYS_E_NOMEM;
    e->threads[e->nthreads] = (struct thread_ent){.id = tid, .ns_id = ns_id};
    id = (uint32_t)++e->nthreads;
    util_htab_set(&e->threadtab, util_htab_free_slot(&e->threadtab, h), id);
    put_u8(&e->buf, R_THREAD);
    put_var(&e->buf, tid);
    put_var(&e->buf, ns_id);
    *out = id - 1;
    return 0;
}

static int same_frame(const struct pys_frame *a, const struct pys_frame *b)
{
    return a->filename == b->filename && a->qualname == b->qualname && a->lineno == b->lineno &&
           a->firstlineno == b->firstlineno && a->end_lineno == b->end_lineno && a->col == b->col &&
           a->end_col == b->end_col && a->kind == b->kind && a->opcode == b->opcode;
}

/* A THREAD_NAME record for thread index ti when name differs from the
 * last one stored for it (NULL: none given, the last one stands). */
static int enc_thread_name(out_rec_enc *e, size_t ti, const char *name)
{
    struct thread_ent *te = &e->threads[ti];
    if (!name || name == te->name)
        return 0;
    uint32_t sid;
    if (intern_str(e, name, &sid) < 0 || buf_reserve(&e->buf, 1 + 3 * 10) < 0)
        return PYS_E_NOMEM;
    te->name = name;
    if (sid == te->name_id)
        return 0;
    te->name_id = sid;
    uint8_t body[20];
    struct out_rec_buf b = {body, 0, sizeof body};
    put_var(&b, ti);
    put_var(&b, sid - 1);
    put_u8(&e->buf, R_THREAD_NAME);
    put_var(&e->buf, b.len);
    memcpy(e->buf.p + e->buf.len, body, b.len);
    e->buf.len += b.len;
    return 0;
}

/* One thread's part of a SAMPLE record, appended to part; the strings,
 * frames, thread and name it defines go to e->buf. */
static int enc_thread(out_rec_enc *e, const struct out_rec_thread *t, struct out_rec_buf *part)
{
    size_t ti;
    if (intern_thread(e, t->id, t->ns_id, &ti) < 0 || enc_thread_name(e, ti, t->name) < 0)
        return PYS_E_NOMEM;
    struct thread_ent *te = &e->threads[ti];
    size_t n = t->nframes;
    if (n > te->cap) {
        struct pys_frame *f = realloc(te->frames, n * sizeof *f);
        if (!f)
            return PYS_E_NOMEM;
        te->frames = f;
        uint32_t *ids = realloc(te->ids, n * sizeof *ids);
        if (!ids)
            return PYS_E_NOMEM;
        te->ids = ids;
        te->cap = n;
    }
    /* keep: the outermost frames shared with the last stack. */
    size_t keep = 0, te_prev_n = te->n;
    while (keep < n && keep < te->n && same_frame(&te->frames[keep], &t->frames[n - 1 - keep]))
        keep++;
    for (size_t i = keep; i < n; i++) {
        te->frames[i] = t->frames[n - 1 - i];
        if (intern_frame(e, &te->frames[i], &te->ids[i]) < 0) {
            te->n = i;
            return PYS_E_NOMEM;
        }
    }
    te->n = n;
    if (n > SIZE_MAX / 8 || buf_reserve(part, 40 + (n - keep) * 5) < 0)
        return PYS_E_NOMEM;
    put_var(part, ti);
    put_var(part, t->status);
    put_var(part, te_prev_n - keep);
    put_var(part, n - keep);
    for (size_t i = keep; i < n; i++)
        put_var(part, te->ids[i]);
    return 0;
}

/* The UNREAD record of a sample's n unread threads t, appended to part
 * (after the sample's stacks); the threads it defines go to e->buf. */
static int enc_unread(out_rec_enc *e, const struct out_rec_thread *t, size_t n,
                      struct out_rec_buf *part)
{
    struct out_rec_buf *body = &e->unread;
    body->len = 0;
    /* A thread index and a status are 32-bit: 5 bytes each at most. */
    if (n > SIZE_MAX / 16 || buf_reserve(body, 10 + n * 10) < 0)
        return PYS_E_NOMEM;
    put_var(body, n);
    for (size_t i = 0; i < n; i++) {
        size_t ti;
        if (intern_thread(e, t[i].id, t[i].ns_id, &ti) < 0)
            return PYS_E_NOMEM;
        put_var(body, ti);
        put_var(body, t[i].status);
    }
    if (buf_reserve(part, 1 + 10 + body->len) < 0)
        return PYS_E_NOMEM;
    put_u8(part, R_UNREAD);
    put_var(part, body->len);
    memcpy(part->p + part->len, body->p, body->len);
    part->len += body->len;
    return 0;
}

int out_rec_enc_sample(out_rec_enc *e, const struct out_rec_sample *s)
{
    /* Definitions go before the SAMPLE record that names them, so the
     * threads' parts are gathered apart and appended after. */
    struct out_rec_buf *part = &e->part;
    size_t n = s->nthreads;
    part->len = 0;
    for (size_t i = 0; i < n; i++)
        if (enc_thread(e, &s->threads[i], part) < 0)
            return PYS_E_NOMEM;
    if (s->nunread && enc_unread(e, s->unread, s->nunread, part) < 0)
        return PYS_E_NOMEM;
    if (buf_reserve(&e->buf, 1 + 4 * 10 + part->len) < 0 || buf_reserve(&e->times_hi, 10) < 0 ||
        buf_reserve(&e->times_lo, 1) < 0 || e->times_lo.len >= UINT32_MAX)
        return PYS_E_NOMEM;
    /* Microseconds since the last sample, less the interval: on schedule,
     * a number near 0. The times go to a column of their own: their low
     * bytes are noise, which would cut zstd's matches between records and
     * cost entropy-coding tables in every block (the packer stores them
     * apart). */
    uint64_t t_us = s->t_ns / 1000;
    uint64_t dt = t_us >= e->last_us ? t_us - e->last_us : 0;
    e->last_us += dt;
    put_u8(&e->buf, R_SAMPLE);
    uint64_t tz = zz((int64_t)dt - e->interval_us);
    put_var(&e->times_hi, tz >> 8);
    put_u8(&e->times_lo, (uint8_t)tz);
    put_var(&e->buf, (uint64_t)n << 1 | (s->rc != 0));
    if (s->rc != 0)
        put_var(&e->buf, zz(s->rc));
    /* The stacks, then the UNREAD record if any (no threads: part->p may
     * be NULL). */
    if (part->len)
        memcpy(e->buf.p + e->buf.len, part->p, part->len);
    e->buf.len += part->len;
    return 0;
}

/* A META or STATS field. */
static void put_key(struct out_rec_buf *b, const char *key, int type)
{
    size_t len = strlen(key);
    put_var(b, len);
    memcpy(b->p + b->len, key, len);
    b->len += len;
    put_u8(b, (uint8_t)type);
}

static void put_uint_field(struct out_rec_buf *b, const char *key, uint64_t v)
{
    put_key(b, key, V_UINT);
    put_var(b, v);
}

static void put_str_field(struct out_rec_buf *b, const char *key, const char *v)
{
    v = v ? v : "";
    size_t len = strlen(v);
    put_key(b, key, V_STR);
    put_var(b, len);
    memcpy(b->p + b->len, v, len);
    b->len += len;
}

static void put_f64_field(struct out_rec_buf *b, const char *key, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    put_key(b, key, V_F64);
    util_le_put(b->p + b->len, bits, 8);
    b->len += 8;
}

int out_rec_enc_meta(out_rec_enc *e, const struct out_rec_meta *m)
{
    size_t strs = (m->python_version_text ? strlen(m->python_version_text) : 0) +
                  (m->mode ? strlen(m->mode) : 0) + (m->tool ? strlen(m->tool) : 0);
    if (buf_reserve(&e->buf, 1024 + strs) < 0)
        return PYS_E_NOMEM;
    struct out_rec_buf *b = &e->buf;
    put_u8(b, R_META);
    put_var(b, 16);
    put_uint_field(b, "pid", (uint64_t)(m->pid < 0 ? 0 : m->pid));
    put_uint_field(b, "python_version", m->python_version);
    put_str_field(b, "python_version_text", m->python_version_text);
    put_str_field(b, "mode", m->mode);
    put_str_field(b, "tool", m->tool);
    put_uint_field(b, "interval_ns", m->interval_ns);
    put_f64_field(b, "rate_hz", m->rate_hz);
    put_uint_field(b, "start_realtime_ns", m->start_realtime_ns);
    put_uint_field(b, "start_monotonic_ns", m->start_monotonic_ns);
    put_uint_field(b, "max_frames", m->max_frames);
    put_uint_field(b, "max_memory", m->max_memory);
    put_uint_field(b, "native", (uint64_t) !!m->native);
    put_uint_field(b, "gc", (uint64_t) !!m->gc);
    put_uint_field(b, "main_only", (uint64_t) !!m->main_only);
    put_uint_field(b, "opcodes", (uint64_t) !!m->opcodes);
    put_uint_field(b, "format_minor", OUT_REC_MINOR);
    e->last_us = m->start_monotonic_ns / 1000;
    e->interval_us = (int64_t)(m->interval_ns / 1000);
    return 0;
}

int out_rec_enc_stats(out_rec_enc *e, const struct out_rec_stats *s)
{
    if (buf_reserve(&e->buf, 512) < 0)
        return PYS_E_NOMEM;
    struct out_rec_buf *b = &e->buf;
    put_u8(b, R_STATS);
    put_var(b, 7);
    put_uint_field(b, "samples", s->samples);
    put_uint_field(b, "failed", s->failed);
    put_uint_field(b, "missed", s->missed);
    put_uint_field(b, "truncated", s->truncated);
    put_uint_field(b, "unmatched", s->unmatched);
    put_uint_field(b, "duration_ns", s->duration_ns);
    put_uint_field(b, "final", (uint64_t) !!s->final);
    return 0;
}

/* A SOURCE record: the file's string, flags, and n bytes at p. */
static int enc_source(out_rec_enc *e, const char *filename, unsigned flags, const char *p, size_t n)
{
    size_t flen = strlen(filename);
    uint32_t sid;
    if (str_id(e, filename, flen, util_hash_bytes(filename, flen), &sid) < 0 ||
        buf_reserve(&e->buf, 1 + 4 * 10 + n) < 0)
        return PYS_E_NOMEM;
    uint8_t head[30];
    struct out_rec_buf b = {head, 0, sizeof head};
    put_var(&b, sid - 1);
    put_var(&b, flags);
    put_var(&b, n);
    put_u8(&e->buf, R_SOURCE);
    put_var(&e->buf, b.len + n);
    memcpy(e->buf.p + e->buf.len, head, b.len);
    e->buf.len += b.len;
    if (n)
        memcpy(e->buf.p + e->buf.len, p, n);
    e->buf.len += n;
    return 0;
}

int out_rec_enc_source(out_rec_enc *e, const char *filename, const char *text, size_t len,
                       const char *why, int changed)
{
    unsigned mark = (unsigned)changed & SRC_MARK;
    if (text)
        return enc_source(e, filename, mark, text, len);
    why = why ? why : "";
    return enc_source(e, filename, mark | SRC_UNREADABLE, why, strlen(why));
}

int out_rec_enc_source_mark(out_rec_enc *e, const char *filename, int changed)
{
    return enc_source(e, filename, ((unsigned)changed & SRC_MARK) | SRC_MARK_ONLY, NULL, 0);
}

size_t out_rec_enc_files(const out_rec_enc *e)
{
    return e->nfiles;
}

const char *out_rec_enc_file(const out_rec_enc *e, size_t i)
{
    return i < e->nfiles ? e->strs[e->files[i] - 1].s : NULL;
}

int out_rec_enc_end(out_rec_enc *e)
{
    if (buf_reserve(&e->buf, 1) < 0)
        return PYS_E_NOMEM;
    put_u8(&e->buf, R_END);
    return 0;
}

size_t out_rec_enc_pending(const out_rec_enc *e)
{
    return e->buf.len + e->times_hi.len + e->times_lo.len + 8;
}

int out_rec_enc_take(out_rec_enc *e, struct out_rec_buf *out)
{
    /* A block's records, its time column (high parts, low bytes), the
     * number of times and the column's length. */
    size_t hi = e->times_hi.len, lo = e->times_lo.len;
    if (hi + lo > UINT32_MAX || buf_reserve(&e->buf, hi + lo + 8) < 0)
        return PYS_E_NOMEM;
    if (hi)
        memcpy(e->buf.p + e->buf.len, e->times_hi.p, hi);
    if (lo)
        memcpy(e->buf.p + e->buf.len + hi, e->times_lo.p, lo);
    e->buf.len += hi + lo;
    util_le_put(e->buf.p + e->buf.len, lo, 4);
    util_le_put(e->buf.p + e->buf.len + 4, hi + lo, 4);
    e->buf.len += 8;
    e->times_hi.len = e->times_lo.len = 0;
    *out = e->buf;
    memset(&e->buf, 0, sizeof e->buf);
    return 0;
}

size_t out_rec_enc_memory(const out_rec_enc *e)
{
    size_t m =
        sizeof *e + e->buf.cap + e->times_hi.cap + e->times_lo.cap + e->part.cap + e->unread.cap +
        e->capstrs * sizeof *e->strs + e->capframes * sizeof *e->frames +
        e->capthreads * sizeof *e->threads +
        (e->strtab.cap + e->frametab.cap + e->threadtab.cap + e->capfiles) * sizeof(uint32_t);
    for (size_t i = 0; i < e->nstrs; i++)
        m += e->strs[i].len + 1;
    for (size_t i = 0; i < e->nthreads; i++)
        m += e->threads[i].cap * (sizeof(struct pys_frame) + sizeof(uint32_t));
    return m;
}

/* --- blocks ----------------------------------------------------------------- */

struct out_rec_packer {
    enum out_rec_compression c;
    ZSTD_CCtx *cc;
};

out_rec_packer *out_rec_packer_new(enum out_rec_compression c, int zstd_level)
{
    out_rec_packer *k = calloc(1, sizeof *k);
    if (!k)
        return NULL;
    k->c = c;
    if (c == OUT_REC_ZSTD) {
        k->cc = ZSTD_createCCtx();
        if (!k->cc ||
            ZSTD_isError(ZSTD_CCtx_setParameter(k->cc, ZSTD_c_compressionLevel, zstd_level))) {
            out_rec_packer_free(k);
            return NULL;
        }
    }
    return k;
}

void out_rec_packer_free(out_rec_packer *k)
{
    if (!k)
        return;
    ZSTD_freeCCtx(k->cc);
    free(k);
}

/* Compress [p, p+n) into o, ending with a flush, or the frame's end. */
static int zstd_piece(ZSTD_CCtx *cc, ZSTD_outBuffer *o, const uint8_t *p, size_t n,
                      ZSTD_EndDirective how)
{
    ZSTD_inBuffer in = {p, n, 0};
    size_t left;
    do {
        left = ZSTD_compressStream2(cc, o, &in, how);
        if (ZSTD_isError(left) || (left && o->pos == o->size))
            return PYS_E_IO;
    } while (left);
    return 0;
}

int out_rec_block_pack(out_rec_packer *k, const uint8_t *raw, size_t len, int last,
                       struct out_rec_buf *out)
{
    struct out_rec_buf b = {0};
    if ((uint64_t)len > OUT_REC_MAX_BLOCK)
        return PYS_E_INVAL;
    size_t bound = k->c == OUT_REC_ZSTD ? ZSTD_compressBound(len) + 256 : len;
    if (buf_reserve(&b, OUT_REC_BLOCK_HEADER + bound) < 0)
        return PYS_E_NOMEM;
    size_t stored = len;
    if (k->c == OUT_REC_ZSTD) {
        /* The times' low bytes (and the block's last 8 bytes) are flushed
         * as a zstd block of their own, whose literals zstd codes apart
         * (near noise: stored raw) from the records'. */
        uint64_t lo = len >= 8 ? util_le_get(raw + len - 8, 4) : 0;
        size_t split = len >= 8 && lo <= len - 8 ? len - 8 - (size_t)lo : len;
        ZSTD_outBuffer o = {b.p + OUT_REC_BLOCK_HEADER, bound, 0};
        if ((split && zstd_piece(k->cc, &o, raw, split, ZSTD_e_flush) < 0) ||
            zstd_piece(k->cc, &o, raw + split, len - split, last ? ZSTD_e_end : ZSTD_e_flush) < 0) {
            out_rec_buf_release(&b);
            return PYS_E_IO;
        }
        stored = o.pos;
    } else {
        if (len)
            memcpy(b.p + OUT_REC_BLOCK_HEADER, raw, len);
    }
    uint8_t *h = b.p;
    memcpy(h, BLOCK_MAGIC, 4);
    h[4] = (uint8_t)k->c;
    h[5] = h[6] = h[7] = 0;
    util_le_put(h + 8, stored, 4);
    util_le_put(h + 12, len, 4);
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, b.p + OUT_REC_BLOCK_HEADER, (uInt)stored);
    util_le_put(h + 16, crc, 4);
    b.len = OUT_REC_BLOCK_HEADER + stored;
    out_rec_buf_release(out);
    *out = b;
    return 0;
}

/* --- the reader ------------------------------------------------------------- */

struct rstr {
    char *s;
};

/* A cursor over one block's records, or its time column. */
struct cur {
    const uint8_t *p, *end;
};

struct rthread {
    struct out_rec_thread t; /* id, ns_id, name */
    uint32_t *stack;         /* frame ids, outermost first */
    size_t n, cap;
    size_t ngc; /* <GC> frames in the stack */
};

struct reader {
    const struct out_rec_reader_cb *cb;
    struct out_rec_read_info *info;
    char *err;
    size_t errlen;
    char **strs;
    size_t nstrs, capstrs;
    struct pys_frame *frames;
    size_t nframes, capframes;
    struct rthread *threads;
    size_t nthreads, capthreads;
    struct out_rec_thread *sthreads; /* a sample's threads */
    size_t capsthreads;
    struct pys_frame *sframes; /* a sample's frames, all threads */
    size_t capsframes;
    size_t *soff; /* each sample thread's first frame in sframes */
    size_t capsoff;
    struct out_rec_thread *uthreads; /* a sample's unread threads */
    size_t caputhreads;
    uint64_t last_us;
    int64_t interval_us;
    /* 2.0+: the block's time column, read as its samples are: the high
     * parts, and the low bytes. */
    struct cur times_hi, times_lo;
    struct out_rec_meta meta;
    char meta_text[3][128]; /* python_version_text, mode, tool */
    int ended;
    ZSTD_DCtx *dc; /* the file's zstd stream, across blocks */
};

static int get_var(struct cur *c, uint64_t *out)
{
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        if (c->p >= c->end)
            return -1;
        uint8_t byte = *c->p++;
        if (i == 9 && byte > 1)
            return -1; /* beyond 64 bits */
        v |= (uint64_t)(byte & 0x7f) << (7 * i);
        if (!(byte & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

static int get_i32(struct cur *c, int32_t *out)
{
    uint64_t u;
    if (get_var(c, &u) < 0)
        return -1;
    int64_t v = unzz(u);
    if (v < INT32_MIN || v > INT32_MAX)
        return -1;
    *out = (int32_t)v;
    return 0;
}

static size_t left(const struct cur *c)
{
    return (size_t)(c->end - c->p);
}

static int fail(struct reader *r, const char *what, uint64_t block, size_t off)
{
    snprintf(r->err, r->errlen, "block %llu at offset %zu: %s", (unsigned long long)block, off,
             what);
    return PYS_E_CORRUPT;
}

static int read_string(struct reader *r, struct cur *c)
{
    uint64_t len;
    if (get_var(c, &len) < 0 || len > left(c))
        return -1;
    if (r->nstrs >= UINT32_MAX - 1 ||
        util_array_reserve((void **)&r->strs, &r->capstrs, r->nstrs + 1, sizeof *r->strs) < 0)
        return PYS_E_NOMEM;
    char *s = malloc(len + 1);
    if (!s)
        return PYS_E_NOMEM;
    memcpy(s, c->p, len);
    /* A NUL inside would cut the name short: written as '?'. */
    for (size_t i = 0; i < len; i++)
        if (!s[i])
            s[i] = '?';
    s[len] = '\0';
    c->p += len;
    r->strs[r->nstrs++] = s;
    return 0;
}

static int read_frame(struct reader *r, struct cur *c)
{
    uint64_t file, qual, kind;
    int32_t dl, dc;
    struct pys_frame f;
    memset(&f, 0, sizeof f);
    if (get_var(c, &file) < 0 || get_var(c, &qual) < 0 || file >= r->nstrs || qual >= r->nstrs ||
        get_i32(c, &f.firstlineno) < 0 || get_i32(c, &f.lineno) < 0 || get_i32(c, &dl) < 0 ||
        get_i32(c, &f.col) < 0 || get_i32(c, &dc) < 0 || get_var(c, &kind) < 0 ||
        kind > PYS_FRAME_PROCESS || get_i32(c, &f.opcode) < 0)
        return -1;
    f.filename = r->strs[file];
    f.qualname = r->strs[qual];
    f.end_lineno = (int32_t)((uint32_t)f.lineno + (uint32_t)dl);
    f.end_col = (int32_t)((uint32_t)f.col + (uint32_t)dc);
    f.kind = (int32_t)kind;
    f.lasti = -1;
    if (r->nframes >= UINT32_MAX - 1 || util_array_reserve((void **)&r->frames, &r->capframes,
                                                           r->nframes + 1, sizeof *r->frames) < 0)
        return PYS_E_NOMEM;
    r->frames[r->nframes++] = f;
    return 0;
}

static int read_thread(struct reader *r, struct cur *c)
{
    uint64_t id, ns;
    if (get_var(c, &id) < 0 || get_var(c, &ns) < 0)
        return -1;
    if (r->nthreads >= UINT32_MAX - 1 ||
        util_array_reserve((void **)&r->threads, &r->capthreads, r->nthreads + 1,
                           sizeof *r->threads) < 0)
        return PYS_E_NOMEM;
    r->threads[r->nthreads++] = (struct rthread){.t = {.id = id, .ns_id = ns}};
    return 0;
}

/* A THREAD_NAME record's body (after its type and length): the thread's
 * name from now on; bytes past the fields a later minor may add are
 * skipped. */
static int read_thread_name(struct reader *r, struct cur *c)
{
    uint64_t len, ti, sid;
    if (get_var(c, &len) < 0 || len > left(c))
        return -1;
    struct cur body = {c->p, c->p + len};
    if (get_var(&body, &ti) < 0 || ti >= r->nthreads || get_var(&body, &sid) < 0 || sid >= r->nstrs)
        return -1;
    r->threads[ti].t.name = r->strs[sid];
    c->p += len;
    return 0;
}

/* A SOURCE record's body (after its type): handed to the callback, or
 * skipped without one; a record with flags of a later minor version is
 * skipped too, as are bytes past the fields. */
static int read_source(struct reader *r, struct cur *c)
{
    uint64_t len, sid, flags, n;
    if (get_var(c, &len) < 0 || len > left(c))
        return -1;
    struct cur body = {c->p, c->p + len};
    c->p += len;
    if (get_var(&body, &sid) < 0 || sid >= r->nstrs || get_var(&body, &flags) < 0 ||
        get_var(&body, &n) < 0 || n > left(&body))
        return -1;
    if (flags & ~(uint64_t)SRC_KNOWN)
        return 0;
    unsigned mark = (unsigned)(flags & SRC_MARK);
    if (mark > OUT_REC_SRC_CHANGED_SINCE ||
        ((flags & SRC_MARK_ONLY) && (n || flags & SRC_UNREADABLE)))
        return -1;
    if (!r->cb->source)
        return 0;
    struct out_rec_source src = {
        .filename = r->strs[sid], .changed = (int)mark, .mark_only = (flags & SRC_MARK_ONLY) != 0};
    char why[SRC_WHY];
    if (flags & SRC_UNREADABLE) {
        /* Cut to fit, a NUL inside written as '?'. */
        size_t l = n < sizeof why - 1 ? (size_t)n : sizeof why - 1;
        memcpy(why, body.p, l);
        why[l] = '\0';
        for (size_t i = 0; i < l; i++)
            if (!why[i])
                why[i] = '?';
        src.why = why;
    } else if (!src.mark_only) {
        src.text = (const char *)body.p;
        src.len = (size_t)n;
    }
    return r->cb->source(r->cb->ctx, &src) ? 0x10000 : 0;
}

/* One field of META or STATS as read: its key, its type and its value (v for
 * the numbers, a float's bits for V_F64; sv and slen for V_STR, pointing into
 * the block). */
struct field {
    char key[64];
    int type;
    uint64_t v, slen;
    const uint8_t *sv;
};

/* Read one (key, type, value) at c. 0, or -1 if malformed. */
static int read_field(struct cur *c, struct field *fl)
{
    uint64_t klen;
    fl->v = fl->slen = 0;
    fl->sv = NULL;
    if (get_var(c, &klen) < 0 || klen > left(c) || klen >= sizeof fl->key)
        return -1;
    memcpy(fl->key, c->p, klen);
    fl->key[klen] = '\0';
    c->p += klen;
    if (left(c) < 1)
        return -1;
    fl->type = *c->p++;
    switch (fl->type) {
    case V_UINT:
    case V_INT:
        if (get_var(c, &fl->v) < 0)
            return -1;
        break;
    case V_STR:
        if (get_var(c, &fl->slen) < 0 || fl->slen > left(c))
            return -1;
        fl->sv = c->p;
        c->p += fl->slen;
        break;
    case V_F64:
        if (left(c) < 8)
            return -1;
        fl->v = util_le_get(c->p, 8);
        c->p += 8;
        break;
    default:
        return -1;
    }
    return 0;
}

/* A STATS field into st (a string reads as 0); unknown keys skipped. */
static void stats_field(struct out_rec_stats *st, const struct field *fl)
{
    const char *key = fl->key;
    uint64_t v = fl->v;
    if (!strcmp(key, "samples"))
        st->samples = v;
    else if (!strcmp(key, "failed"))
        st->failed = v;
    else if (!strcmp(key, "missed"))
        st->missed = v;
    else if (!strcmp(key, "truncated"))
        st->truncated = v;
    else if (!strcmp(key, "unmatched"))
        st->unmatched = v;
    else if (!strcmp(key, "duration_ns"))
        st->duration_ns = v;
    else if (!strcmp(key, "final"))
        st->final = v != 0;
}

/* A META field into r->meta: the texts into r->meta_text (cut to fit, a NUL
 * inside written as '?'), the numbers into their fields; other strings and
 * unknown keys skipped. */
static void meta_field(struct reader *r, const struct field *fl)
{
    const char *key = fl->key;
    uint64_t v = fl->v;
    struct out_rec_meta *m = &r->meta;
    static const char *const text_keys[3] = {"python_version_text", "mode", "tool"};
    if (fl->type == V_STR) {
        for (int k = 0; k < 3; k++)
            if (!strcmp(key, text_keys[k])) {
                size_t l =
                    fl->slen < sizeof r->meta_text[k] - 1 ? fl->slen : sizeof r->meta_text[k] - 1;
                memcpy(r->meta_text[k], fl->sv, l);
                r->meta_text[k][l] = '\0';
                for (size_t j = 0; j < l; j++)
                    if (!r->meta_text[k][j])
                        r->meta_text[k][j] = '?';
            }
        return;
    }
    if (!strcmp(key, "pid"))
        m->pid = v <= 0x7fffffff ? (int)v : -1;
    else if (!strcmp(key, "python_version"))
        m->python_version = (uint32_t)v;
    else if (!strcmp(key, "interval_ns"))
        m->interval_ns = v;
    else if (!strcmp(key, "rate_hz") && fl->type == V_F64)
        memcpy(&m->rate_hz, &v, sizeof v);
    else if (!strcmp(key, "start_realtime_ns"))
        m->start_realtime_ns = v;
    else if (!strcmp(key, "start_monotonic_ns"))
        m->start_monotonic_ns = v;
    else if (!strcmp(key, "max_frames"))
        m->max_frames = v;
    else if (!strcmp(key, "max_memory"))
        m->max_memory = v;
    else if (!strcmp(key, "native"))
        m->native = v != 0;
    else if (!strcmp(key, "gc"))
        m->gc = v != 0;
    else if (!strcmp(key, "main_only"))
        m->main_only = v != 0;
    else if (!strcmp(key, "opcodes"))
        m->opcodes = v != 0;
}

/* META and STATS: fields of (key, type, value); unknown keys skipped. */
static int read_fields(struct reader *r, struct cur *c, int stats, struct out_rec_stats *st)
{
    uint64_t n;
    if (get_var(c, &n) < 0 || n > left(c))
        return -1;
    for (uint64_t i = 0; i < n; i++) {
        struct field fl;
        if (read_field(c, &fl) < 0)
            return -1;
        if (stats)
            stats_field(st, &fl);
        else
            meta_field(r, &fl);
    }
    if (!stats) {
        r->meta.python_version_text = r->meta_text[0];
        r->meta.mode = r->meta_text[1];
        r->meta.tool = r->meta_text[2];
        r->last_us = r->meta.start_monotonic_ns / 1000;
        r->interval_us = r->meta.interval_ns / 1000 < ((uint64_t)1 << 40)
                             ? (int64_t)(r->meta.interval_ns / 1000)
                             : 0;
    }
    return 0;
}

/* The UNREAD record after a SAMPLE (its type byte read): the sample's
 * unread threads into r->uthreads (*n of them), each with its status, the
 * name the recording last gave it, and no frames. Bytes after the entries
 * (a later minor version's) are skipped. 0, -1 (malformed) or
 * PYS_E_NOMEM. */
static int read_unread(struct reader *r, struct cur *c, size_t *n)
{
    uint64_t len, k;
    if (get_var(c, &len) < 0 || len > left(c))
        return -1;
    struct cur b = {c->p, c->p + len};
    c->p += len;
    /* An entry is two bytes at least. */
    if (get_var(&b, &k) < 0 || k > left(&b) / 2)
        return -1;
    if (k > r->caputhreads) {
        void *p = realloc(r->uthreads, k * sizeof *r->uthreads);
        if (!p)
            return PYS_E_NOMEM;
        r->uthreads = p;
        r->caputhreads = k;
    }
    for (uint64_t i = 0; i < k; i++) {
        uint64_t ti, status;
        if (get_var(&b, &ti) < 0 || ti >= r->nthreads || get_var(&b, &status) < 0 ||
            status > UINT32_MAX)
            return -1;
        r->uthreads[i] = r->threads[ti].t;
        r->uthreads[i].status = (uint32_t)status;
        r->uthreads[i].nframes = 0;
        r->uthreads[i].frames = NULL;
        r->uthreads[i].gc = 0;
    }
    *n = (size_t)k;
    return 0;
}

/* Thread i's stack of a SAMPLE: the thread's new stack from its pop and
 * push, its frames appended (innermost first) to the sample's at *total
 * (moved past them), its entry in r->sthreads (frames set by the caller).
 * 0, -1 (malformed) or PYS_E_NOMEM. */
static int read_stack(struct reader *r, struct cur *c, size_t i, size_t *total)
{
    uint64_t ti, status, pop, push;
    if (get_var(c, &ti) < 0 || ti >= r->nthreads || get_var(c, &status) < 0 ||
        status > UINT32_MAX || get_var(c, &pop) < 0 || get_var(c, &push) < 0)
        return -1;
    struct rthread *t = &r->threads[ti];
    if (pop > t->n || push > left(c))
        return -1;
    uint64_t keep = t->n - pop;
    size_t nn = (size_t)(keep + push);
    for (size_t j = (size_t)keep; j < t->n; j++)
        t->ngc -= r->frames[t->stack[j]].kind == PYS_FRAME_GC;
    if (nn > t->cap) {
        uint32_t *s = realloc(t->stack, nn * sizeof *s);
        if (!s)
            return PYS_E_NOMEM;
        t->stack = s;
        t->cap = nn;
    }
    for (size_t j = (size_t)keep; j < nn; j++) {
        uint64_t fid;
        if (get_var(c, &fid) < 0 || fid >= r->nframes)
            return -1;
        t->stack[j] = (uint32_t)fid;
        t->ngc += r->frames[fid].kind == PYS_FRAME_GC;
    }
    t->n = nn;
    /* The sample's frames, innermost first, one thread after another. */
    if (*total + nn > r->capsframes) {
        size_t cap = r->capsframes ? r->capsframes : 256;
        while (cap < *total + nn)
            cap *= 2;
        void *p = realloc(r->sframes, cap * sizeof *r->sframes);
        if (!p)
            return PYS_E_NOMEM;
        r->sframes = p;
        r->capsframes = cap;
    }
    for (size_t j = 0; j < nn; j++)
        r->sframes[*total + j] = r->frames[t->stack[nn - 1 - j]];
    r->soff[i] = *total;
    *total += nn;
    r->sthreads[i] = t->t;
    r->sthreads[i].status = (uint32_t)status;
    r->sthreads[i].nframes = nn;
    r->sthreads[i].gc = t->ngc > 0;
    return 0;
}

static int read_sample(struct reader *r, struct cur *c)
{
    uint64_t dtz, rcz = 0, n;
    if (r->info->major >= 2) {
        if (get_var(&r->times_hi, &dtz) < 0 || dtz > UINT64_MAX >> 8 ||
            r->times_lo.p == r->times_lo.end)
            return -1;
        dtz = dtz << 8 | *r->times_lo.p++;
    } else if (get_var(c, &dtz) < 0) {
        return -1;
    }
    if (get_var(c, &n) < 0 || ((n & 1) && get_var(c, &rcz) < 0))
        return -1;
    int64_t rc = unzz(rcz);
    n >>= 1;
    if (n > left(c) / 4 || rc < -1000 || rc > 0)
        return -1;
    if (n > r->capsthreads) {
        void *p = realloc(r->sthreads, n * sizeof *r->sthreads);
        if (!p)
            return PYS_E_NOMEM;
        r->sthreads = p;
        p = realloc(r->soff, n * sizeof *r->soff);
        if (!p)
            return PYS_E_NOMEM;
        r->soff = p;
        r->capsthreads = r->capsoff = n;
    }
    size_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        int trc = read_stack(r, c, (size_t)i, &total);
        if (trc)
            return trc;
    }
    for (uint64_t i = 0; i < n; i++)
        r->sthreads[i].frames = r->sframes + r->soff[i];
    size_t nunread = 0;
    if (c->p < c->end && *c->p == R_UNREAD) {
        c->p++;
        int urc = read_unread(r, c, &nunread);
        if (urc)
            return urc;
    }
    int64_t d = unzz(dtz);
    if (d < -r->interval_us || d > ((int64_t)1 << 50))
        return -1;
    r->last_us += (uint64_t)(r->interval_us + d);
    if (r->last_us > UINT64_MAX / 1000)
        return -1;
    struct out_rec_sample smp = {r->last_us * 1000, (int)rc, (size_t)n, r->sthreads,
                                 nunread, r->uthreads};
    r->info->samples++;
    if (r->cb->sample) {
        int x = r->cb->sample(r->cb->ctx, &smp);
        if (x)
            return x > 0 ? x + 0x10000 : x;
    }
    return 0;
}

/* Decode block payload [raw, raw+len). Callback stops come back as
 * 0x10000 + their value. */
static int read_records(struct reader *r, const uint8_t *raw, size_t len, uint64_t block,
                        size_t off)
{
    if (r->info->major >= 2) { /* the time column, at the end */
        uint64_t n = len >= 8 ? util_le_get(raw + len - 8, 4) : 0;
        uint64_t cl = len >= 8 ? util_le_get(raw + len - 4, 4) : 0;
        if (len < 8 || cl > len - 8 || n > cl)
            return fail(r, "bad time column length", block, off);
        len -= 8 + (size_t)cl;
        r->times_hi = (struct cur){raw + len, raw + len + (cl - n)};
        r->times_lo = (struct cur){raw + len + (cl - n), raw + len + cl};
    }
    struct cur c = {raw, raw + len};
    while (c.p < c.end && !r->ended) {
        int type = *c.p++, rc = 0;
        struct out_rec_stats st;
        switch (type) {
        case R_META:
            memset(&r->meta, 0, sizeof r->meta);
            rc = read_fields(r, &c, 0, NULL);
            if (rc == 0 && r->cb->meta)
                rc = r->cb->meta(r->cb->ctx, &r->meta) ? 0x10000 : 0;
            break;
        case R_STRING:
            rc = read_string(r, &c);
            break;
        case R_FRAME:
            rc = read_frame(r, &c);
            break;
        case R_THREAD:
            rc = read_thread(r, &c);
            break;
        case R_STATS:
            memset(&st, 0, sizeof st);
            rc = read_fields(r, &c, 1, &st);
            if (rc == 0 && r->cb->stats)
                rc = r->cb->stats(r->cb->ctx, &st) ? 0x10000 : 0;
            break;
        case R_SAMPLE:
            rc = read_sample(r, &c);
            break;
        case R_END:
            r->ended = 1;
            break;
        case R_THREAD_NAME:
            rc = read_thread_name(r, &c);
            break;
        case R_SOURCE:
            rc = read_source(r, &c);
            break;
        case R_UNREAD: /* only right after its SAMPLE (read_sample) */
            rc = -1;
            break;
        default:
            if (type >= 32) { /* a record a later minor version added: skipped */
                uint64_t l;
                if (get_var(&c, &l) < 0 || l > left(&c))
                    rc = -1;
                else
                    c.p += l;
                break;
            }
            rc = -1;
        }
        if (rc == -1)
            return fail(r,
                        (type >= 1 && type <= 7) || type == R_THREAD_NAME || type == R_SOURCE ||
                                type == R_UNREAD
                            ? "malformed record"
                            : "unknown record type",
                        block, off);
        if (rc == PYS_E_NOMEM) {
            snprintf(r->err, r->errlen, "out of memory");
            return rc;
        }
        if (rc)
            return rc;
    }
    if (r->times_hi.p != r->times_hi.end || r->times_lo.p != r->times_lo.end)
        return fail(r, "time column longer than its samples", block, off);
    return 0;
}

/* The payload of the block at data[off..], checked: *raw and *len, with
 * *owned to free. */
static int unpack_block(struct reader *r, const uint8_t *data, size_t size, size_t off,
                        uint64_t block, const uint8_t **raw, size_t *len, uint8_t **owned,
                        size_t *next)
{
    const uint8_t *h = data + off;
    if (size - off < OUT_REC_BLOCK_HEADER) {
        r->info->cut = 1;
        return fail(r, "cut short in its header (the writer did not finish it)", block, off);
    }
    if (memcmp(h, BLOCK_MAGIC, 4) != 0 || h[5] || h[6] || h[7] || h[4] > OUT_REC_ZSTD)
        return fail(r, "bad block header", block, off);
    uint64_t stored = util_le_get(h + 8, 4), rawlen = util_le_get(h + 12, 4),
             crc = util_le_get(h + 16, 4);
    if (stored > size - off - OUT_REC_BLOCK_HEADER) {
        r->info->cut = 1;
        return fail(r, "cut short (the writer did not finish it)", block, off);
    }
    if (rawlen > OUT_REC_MAX_BLOCK || (h[4] == OUT_REC_NONE && rawlen != stored))
        return fail(r, "bad block sizes", block, off);
    const uint8_t *payload = h + OUT_REC_BLOCK_HEADER;
    uLong c = crc32(0L, Z_NULL, 0);
    c = crc32(c, payload, (uInt)stored);
    if (c != crc)
        return fail(r, "checksum mismatch", block, off);
    *next = off + OUT_REC_BLOCK_HEADER + (size_t)stored;
    *owned = NULL;
    if (h[4] == OUT_REC_NONE) {
        *raw = payload;
        *len = (size_t)stored;
        return 0;
    }
    /* Decompressed in steps, so that a size the header claims costs memory
     * only as far as the data really goes. The stream goes on across
     * blocks: each block's payload ends at a flush, so it decompresses
     * whole with what came before it. */
    if (!r->dc && !(r->dc = ZSTD_createDCtx())) {
        snprintf(r->err, r->errlen, "out of memory");
        return PYS_E_NOMEM;
    }
    ZSTD_DCtx *dc = r->dc;
    struct out_rec_buf b = {0};
    int rc = 0;
    ZSTD_inBuffer in = {payload, (size_t)stored, 0};
    for (;;) {
        size_t want = rawlen - b.len < 65536 ? (size_t)rawlen - b.len : 65536;
        if (want == 0) {
            /* Full: anything more is more than the header says. */
            uint8_t probe;
            ZSTD_outBuffer o1 = {&probe, 1, 0};
            size_t ret = ZSTD_decompressStream(dc, &o1, &in);
            if (ZSTD_isError(ret) || o1.pos) {
                rc = fail(r, "block larger than its header says", block, off);
                goto done;
            }
            break;
        }
        if (buf_reserve(&b, want) < 0) {
            snprintf(r->err, r->errlen, "out of memory");
            rc = PYS_E_NOMEM;
            goto done;
        }
        ZSTD_outBuffer o = {b.p + b.len, want, 0};
        size_t in_before = in.pos;
        size_t ret = ZSTD_decompressStream(dc, &o, &in);
        if (ZSTD_isError(ret)) {
            rc = fail(r, "bad compressed data", block, off);
            goto done;
        }
        b.len += o.pos;
        if (o.pos == 0 && in.pos == in_before)
            break; /* no progress: the payload is used up */
    }
    if (b.len != rawlen || in.pos != in.size) {
        rc = fail(r, "block size differs from its header", block, off);
        goto done;
    }
    *raw = b.p;
    *len = b.len;
    *owned = b.p;
    b.p = NULL;
done:
    out_rec_buf_release(&b);
    return rc;
}

int out_rec_read(const uint8_t *data, size_t size, const struct out_rec_reader_cb *cb,
                 struct out_rec_read_info *info, char *err, size_t errlen)
{
    struct reader r;
    struct out_rec_read_info dummy;
    memset(&r, 0, sizeof r);
    if (!info)
        info = &dummy;
    memset(info, 0, sizeof *info);
    r.cb = cb;
    r.info = info;
    r.err = err;
    r.errlen = errlen;
    if (errlen)
        err[0] = '\0';
    if (size < OUT_REC_FILE_HEADER || memcmp(data, FILE_MAGIC, 8) != 0) {
        snprintf(err, errlen, "not a pystrobe recording");
        return PYS_E_CORRUPT;
    }
    info->major = (uint16_t)util_le_get(data + 8, 2);
    info->minor = (uint16_t)util_le_get(data + 10, 2);
    if (info->major > OUT_REC_MAJOR) {
        snprintf(err, errlen,
                 "recording format %u.%u is newer than this pystrobe reads (%d.x): "
                 "use a newer pystrobe",
                 info->major, info->minor, OUT_REC_MAJOR);
        return PYS_E_VERSION;
    }
    if (info->major == 0) {
        snprintf(err, errlen, "not a pystrobe recording (format version 0)");
        return PYS_E_CORRUPT;
    }
    size_t off = OUT_REC_FILE_HEADER;
    int rc = 0;
    info->bytes = off;
    while (off < size && !r.ended) {
        const uint8_t *raw;
        size_t len, next;
        uint8_t *owned;
        rc = unpack_block(&r, data, size, off, info->blocks, &raw, &len, &owned, &next);
        if (rc)
            break;
        rc = read_records(&r, raw, len, info->blocks, off);
        free(owned);
        if (rc)
            break;
        info->blocks++;
        off = next;
        info->bytes = off;
    }
    if (rc >= 0x10000)
        rc -= 0x10000;
    info->complete = r.ended;
    if (cb->keep_strings) {
        info->strings = r.strs;
        info->nstrings = r.nstrs;
    } else {
        for (size_t i = 0; i < r.nstrs; i++)
            free(r.strs[i]);
        free(r.strs);
    }
    free(r.frames);
    for (size_t i = 0; i < r.nthreads; i++)
        free(r.threads[i].stack);
    free(r.threads);
    free(r.sthreads);
    ZSTD_freeDCtx(r.dc);
    free(r.sframes);
    free(r.soff);
    free(r.uthreads);
    return rc;
}

void out_rec_read_info_release(struct out_rec_read_info *info)
{
    for (size_t i = 0; i < info->nstrings; i++)
        free(info->strings[i]);
    free(info->strings);
    info->strings = NULL;
    info->nstrings = 0;
}
