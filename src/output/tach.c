/*
 * tach: a reader of CPython 3.15's own binary profile format (TACH version
 * 1, `python3.15 -m profiling.sampling run --binary`), so that `pystrobe
 * replay` takes the files of users moving to pystrobe. The layout is in
 * ../shared/reference/tachyon-features.md §6 (checked there byte for byte
 * against CPython 3.15.2); only files of a little-endian writer ("HCAT") are
 * read. Each sample record is delivered as a sample of its one thread, in
 * file order; the file is untrusted input: every length, index and depth is
 * checked.
 */
#include "output/tach.h"

#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "util/bytes.h"
#include "util/hashtab.h"
#include "util/strtab.h"

#define HEADER 64
#define FOOTER 32
/* The stats extension, right before the footer: four doubles, the
 * present bits, 4 bytes of padding, "TACHSTAT", its version and size. An
 * older writer's has the first two doubles only (32 bytes). */
#define STATS_SIZE 56
#define STATS_OLD_SIZE 32
#define MAX_RAW ((size_t)1 << 30)
#define MAX_DEPTH 1000000u

struct tcur {
    const uint8_t *p, *end;
};

static int var(struct tcur *c, uint64_t *out)
{
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        if (c->p >= c->end)
            return -1;
        uint8_t b = *c->p++;
        if (i == 9 && b > 1)
            return -1;
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

static int zz32(struct tcur *c, int32_t *out)
{
    uint64_t u;
    if (var(c, &u) < 0 || u > UINT32_MAX)
        return -1;
    uint32_t x = (uint32_t)u;
    *out = (int32_t)((x >> 1) ^ (0u - (x & 1)));
    return 0;
}

struct tthread {
    uint64_t tid;
    uint32_t interp;
    uint64_t last_us;
    uint32_t *stack; /* frame indices, innermost first */
    size_t n, cap;
    uint32_t status;
};

static int set_err(char *err, size_t len, const char *what)
{
    snprintf(err, len, "CPython binary profile: %s", what);
    return PYS_E_CORRUPT;
}

static double le_f64(const uint8_t *p)
{
    uint64_t u = util_le_get(p, 8);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

int out_tach_info(const uint8_t *data, size_t size, struct out_tach_info *out)
{
    if (size < HEADER + FOOTER || memcmp(data, "HCAT", 4) != 0)
        return -1;
    const uint8_t *foot = data + size - FOOTER;
    struct out_tach_info in = {.version = (uint32_t)util_le_get(data + 4, 4),
                               .python = {data[8], data[9], data[10]},
                               .start_us = util_le_get(data + 0x0c, 8),
                               .interval_us = util_le_get(data + 0x14, 8),
                               .samples = util_le_get(data + 0x1c, 8),
                               .threads = (uint32_t)util_le_get(data + 0x24, 4),
                               .str_off = util_le_get(data + 0x28, 8),
                               .frame_off = util_le_get(data + 0x30, 8),
                               .compression = (uint32_t)util_le_get(data + 0x38, 4),
                               .config = (uint32_t)util_le_get(data + 0x3c, 4),
                               .strings = (uint32_t)util_le_get(foot, 4),
                               .frames = (uint32_t)util_le_get(foot + 4, 4)};
    if (size >= HEADER + FOOTER + STATS_SIZE && memcmp(foot - 16, "TACHSTAT", 8) == 0) {
        uint32_t ext = (uint32_t)util_le_get(foot - 4, 4);
        const uint8_t *e = foot - ext;
        if (ext == STATS_SIZE || ext == STATS_OLD_SIZE) {
            in.has_stats = 1;
            in.duration_sec = le_f64(e);
            in.sample_rate = le_f64(e + 8);
            if (ext == STATS_SIZE) {
                in.error_rate = le_f64(e + 16);
                in.missed_samples = le_f64(e + 24);
                in.stats_present = (uint32_t)util_le_get(e + 32, 4);
            }
        }
    }
    *out = in;
    return 0;
}

/* What the reader holds while it reads one file; freed by tread_release. */
struct tread {
    const uint8_t *data;
    size_t size;
    char *err;
    size_t errlen;
    struct out_tach_info h;
    char **strs; /* nstr strings, NUL-terminated (a NUL inside becomes '?') */
    uint64_t nstr;
    struct pys_frame *frames; /* nframe frames, naming strs */
    uint64_t nframe;
    struct tthread *th;
    size_t nth, capth;
    uint8_t *raw;         /* the decompressed sample data */
    struct pys_frame *sf; /* the frames of the sample being delivered */
    size_t capsf;
};

/* The header and footer: 0, or a PYS_E_* code with err set. */
static int tread_header(struct tread *r, struct out_rec_read_info *info)
{
    size_t size = r->size;
    const struct out_tach_info *h = &r->h;
    if (out_tach_info(r->data, size, &r->h) < 0)
        return set_err(r->err, r->errlen, "not a little-endian TACH file");
    if (h->version != 1) {
        snprintf(r->err, r->errlen,
                 "CPython binary profile format version %u: this pystrobe reads 1", h->version);
        return h->version > 1 ? PYS_E_VERSION : PYS_E_CORRUPT;
    }
    info->major = 1;
    r->nstr = h->strings;
    r->nframe = h->frames;
    if (h->str_off < HEADER || h->str_off > h->frame_off || h->frame_off > size - FOOTER ||
        h->compression > 1 || util_le_get(r->data + size - FOOTER + 8, 8) != size ||
        r->nstr > size - h->str_off || r->nframe > (size - h->frame_off) / 7)
        return set_err(r->err, r->errlen, "bad header or footer (a file cut short?)");
    return 0;
}

/* The string table, between str_off and frame_off. */
static int tread_strings(struct tread *r)
{
    struct tcur c = {r->data + r->h.str_off, r->data + r->h.frame_off};
    for (uint64_t i = 0; i < r->nstr; i++) {
        uint64_t len;
        if (var(&c, &len) < 0 || len > (size_t)(c.end - c.p))
            return set_err(r->err, r->errlen, "bad string table");
        char *str = malloc(len + 1);
        if (!(r->strs[i] = str))
            return PYS_E_NOMEM;
        memcpy(str, c.p, len);
        for (size_t k = 0; k < len; k++)
            if (!str[k])
                str[k] = '?';
        str[len] = '\0';
        c.p += len;
    }
    return 0;
}

/* The frame table, between frame_off and the footer. */
static int tread_frames(struct tread *r)
{
    struct tcur c = {r->data + r->h.frame_off, r->data + r->size - FOOTER};
    for (uint64_t i = 0; i < r->nframe; i++) {
        uint64_t fi, qi;
        int32_t line, dl, col, dc;
        if (var(&c, &fi) < 0 || var(&c, &qi) < 0 || fi >= r->nstr || qi >= r->nstr ||
            zz32(&c, &line) < 0 || zz32(&c, &dl) < 0 || zz32(&c, &col) < 0 || zz32(&c, &dc) < 0 ||
            c.p >= c.end)
            return set_err(r->err, r->errlen, "bad frame table");
        uint8_t op = *c.p++;
        struct pys_frame *f = &r->frames[i];
        f->filename = r->strs[fi];
        f->qualname = r->strs[qi];
        f->firstlineno = 0; /* the format does not have it */
        f->lineno = line;
        f->end_lineno = line == -1 ? -1 : (int32_t)((uint32_t)line + (uint32_t)dl);
        f->col = col;
        f->end_col = col == -1 ? -1 : (int32_t)((uint32_t)col + (uint32_t)dc);
        f->lasti = -1;
        f->opcode = op == 255 ? -1 : op;
        f->kind = PYS_FRAME_PYTHON;
        if (strcmp(f->filename, "~") == 0 && line == -1)
            f->kind = strcmp(f->qualname, "<GC>") == 0 ? PYS_FRAME_GC : PYS_FRAME_NATIVE;
    }
    return 0;
}

/* The compressed sample data (one zstd frame, at most MAX_RAW bytes
 * decompressed) into r->raw; *len its length. */
static int tread_inflate(struct tread *r, const uint8_t *sp, size_t slen, size_t *len)
{
    ZSTD_DCtx *dc = ZSTD_createDCtx();
    if (!dc)
        return PYS_E_NOMEM;
    int rc = 0;
    size_t cap = 0;
    *len = 0;
    ZSTD_inBuffer in = {sp, slen, 0};
    for (;;) {
        if (*len == cap) {
            size_t ncap = cap ? cap * 2 : 1 << 16;
            uint8_t *p = ncap <= MAX_RAW ? realloc(r->raw, ncap) : NULL;
            if (!p) {
                rc =
                    ncap <= MAX_RAW ? PYS_E_NOMEM : set_err(r->err, r->errlen, "samples too large");
                break;
            }
            r->raw = p;
            cap = ncap;
        }
        ZSTD_outBuffer o = {r->raw + *len, cap - *len, 0};
        size_t before = in.pos;
        size_t z = ZSTD_decompressStream(dc, &o, &in);
        if (ZSTD_isError(z)) {
            rc = set_err(r->err, r->errlen, "bad compressed samples");
            break;
        }
        *len += o.pos;
        if (z == 0 || (o.pos == 0 && in.pos == before))
            break;
    }
    ZSTD_freeDCtx(dc);
    return rc;
}

/* The META the header gives (pyver: room for the version's text). */
static int tread_meta(const struct tread *r, const struct out_rec_reader_cb *cb, char pyver[32])
{
    static const char *const modes[] = {"", "wall", "cpu", "gil", "all", "exception"};
    const uint8_t *data = r->data;
    uint32_t mode = r->h.config & 7;
    snprintf(pyver, 32, "%u.%u.%u", data[8], data[9], data[10]);
    struct out_rec_meta m = {.pid = 0,
                             .python_version = (uint32_t)data[8] << 24 | (uint32_t)data[9] << 16 |
                                               (uint32_t)data[10] << 8,
                             .python_version_text = pyver,
                             .mode = mode >= 1 && mode <= 5 ? modes[mode] : "wall",
                             .tool = "CPython profiling.sampling",
                             .interval_ns = r->h.interval_us * 1000,
                             .rate_hz = r->h.interval_us ? 1e6 / (double)r->h.interval_us : 0,
                             .start_monotonic_ns = r->h.start_us * 1000,
                             .max_frames = MAX_DEPTH};
    return cb->meta ? cb->meta(cb->ctx, &m) : 0;
}

/* The thread (tid, interp), added if new; NULL if out of memory. */
static struct tthread *tread_thread(struct tread *r, uint64_t tid, uint32_t interp)
{
    for (size_t i = 0; i < r->nth; i++)
        if (r->th[i].tid == tid && r->th[i].interp == interp)
            return &r->th[i];
    if (r->nth == r->capth) {
        size_t nc = r->capth ? r->capth * 2 : 8;
        void *p = realloc(r->th, nc * sizeof *r->th);
        if (!p)
            return NULL;
        r->th = p;
        r->capth = nc;
    }
    r->th[r->nth] = (struct tthread){.tid = tid, .interp = interp, .last_us = r->h.start_us};
    return &r->th[r->nth++];
}

/* A stack record of encoding enc (1 FULL, 2 SUFFIX, 3 POP_PUSH): t's new
 * stack. FULL: depth a; SUFFIX: keep the bottom a, push b; POP_PUSH: drop
 * the top a, push b. */
static int tread_stack(struct tread *r, struct tcur *c, struct tthread *t, uint8_t enc)
{
    uint64_t a = 0, b = 0;
    if (enc > 3 || var(c, &a) < 0 || (enc != 1 && var(c, &b) < 0))
        return set_err(r->err, r->errlen, "bad sample record");
    uint64_t push = enc == 1 ? a : b;
    uint64_t keep = enc == 1 ? 0 : enc == 2 ? a : (a <= t->n ? t->n - a : UINT64_MAX);
    if (keep > t->n || push > (size_t)(c->end - c->p) || keep + push > MAX_DEPTH)
        return set_err(r->err, r->errlen, "bad stack record");
    size_t nn = (size_t)(keep + push);
    uint32_t *ns = malloc((nn ? nn : 1) * sizeof *ns);
    if (!ns)
        return PYS_E_NOMEM;
    for (size_t j = 0; j < push; j++) {
        uint64_t fi;
        if (var(c, &fi) < 0 || fi >= r->nframe) {
            free(ns);
            return set_err(r->err, r->errlen, "bad frame index");
        }
        ns[j] = (uint32_t)fi;
    }
    if (keep)
        memcpy(ns + push, t->stack + (t->n - keep), keep * sizeof *ns);
    free(t->stack);
    t->stack = ns;
    t->n = t->cap = nn;
    return 0;
}

/* Hand t's current stack to cb as one sample of one thread. */
static int tread_deliver(struct tread *r, const struct tthread *t,
                         const struct out_rec_reader_cb *cb, struct out_rec_read_info *info)
{
    if (t->n > r->capsf) {
        void *p = realloc(r->sf, t->n * sizeof *r->sf);
        if (!p)
            return PYS_E_NOMEM;
        r->sf = p;
        r->capsf = t->n;
    }
    int gc = 0;
    for (size_t j = 0; j < t->n; j++) {
        r->sf[j] = r->frames[t->stack[j]];
        gc |= r->sf[j].kind == PYS_FRAME_GC;
    }
    struct out_rec_thread one = {
        .id = t->tid, .status = t->status, .nframes = t->n, .frames = r->sf, .gc = gc};
    struct out_rec_sample s = {
        .t_ns = t->last_us * 1000, .nthreads = t->n ? 1 : 0, .threads = &one};
    info->samples++;
    return cb->sample ? cb->sample(cb->ctx, &s) : 0;
}

/* The sample records of sp[0, slen), each delivered in file order. */
static int tread_samples(struct tread *r, const uint8_t *sp, size_t slen,
                         const struct out_rec_reader_cb *cb, struct out_rec_read_info *info)
{
    struct tcur c = {sp, sp + slen};
    while (c.p < c.end) {
        if (c.end - c.p < 13)
            return set_err(r->err, r->errlen, "truncated sample data");
        uint64_t tid = util_le_get(c.p, 8);
        uint32_t interp = (uint32_t)util_le_get(c.p + 8, 4);
        uint8_t enc = c.p[12];
        c.p += 13;
        struct tthread *t = tread_thread(r, tid, interp);
        if (!t)
            return PYS_E_NOMEM;
        uint64_t count = 1, ts;
        if (enc == 0 && (var(&c, &count) < 0 || count > (size_t)(c.end - c.p) / 2))
            return set_err(r->err, r->errlen, "bad repeat record");
        for (uint64_t k = 0; k < count; k++) {
            int rc;
            if (var(&c, &ts) < 0 || c.p >= c.end)
                return set_err(r->err, r->errlen, "bad sample record");
            uint32_t status = *c.p++;
            if (enc != 0 && (rc = tread_stack(r, &c, t, enc)) != 0)
                return rc;
            t->last_us += ts;
            t->status = status;
            if ((rc = tread_deliver(r, t, cb, info)) != 0)
                return rc;
        }
    }
    return 0;
}

static void tread_release(struct tread *r, const struct out_rec_reader_cb *cb,
                          struct out_rec_read_info *info)
{
    free(r->sf);
    free(r->raw);
    for (size_t i = 0; i < r->nth; i++)
        free(r->th[i].stack);
    free(r->th);
    free(r->frames);
    if (cb->keep_strings && r->strs) {
        info->strings = r->strs;
        info->nstrings = r->nstr;
    } else if (r->strs) {
        for (uint64_t i = 0; i < r->nstr; i++)
            free(r->strs[i]);
        free(r->strs);
    }
}

int out_tach_read(const uint8_t *data, size_t size, const struct out_rec_reader_cb *cb,
                  struct out_rec_read_info *info, char *err, size_t errlen)
{
    struct out_rec_read_info dummy;
    if (!info)
        info = &dummy;
    memset(info, 0, sizeof *info);
    if (errlen)
        err[0] = '\0';
    struct tread r = {.data = data, .size = size, .err = err, .errlen = errlen};
    int rc = tread_header(&r, info);
    if (rc)
        return rc;
    r.strs = calloc(r.nstr ? r.nstr : 1, sizeof *r.strs);
    r.frames = calloc(r.nframe ? r.nframe : 1, sizeof *r.frames);
    if (!r.strs || !r.frames) {
        rc = PYS_E_NOMEM;
        goto done;
    }
    if ((rc = tread_strings(&r)) != 0 || (rc = tread_frames(&r)) != 0)
        goto done;
    const uint8_t *sp = data + HEADER;
    size_t slen = (size_t)(r.h.str_off - HEADER);
    if (r.h.compression == 1) {
        size_t len;
        if ((rc = tread_inflate(&r, sp, slen, &len)) != 0)
            goto done;
        sp = r.raw;
        slen = len;
    }
    char pyver[32];
    if ((rc = tread_meta(&r, cb, pyver)) != 0 || (rc = tread_samples(&r, sp, slen, cb, info)) != 0)
        goto done;
    info->complete = 1;
    info->blocks = 1;
    info->bytes = size;
done:
    tread_release(&r, cb, info);
    if (rc == PYS_E_NOMEM && errlen)
        snprintf(err, errlen, "out of memory");
    return rc;
}

/* --- writing ------------------------------------------------------------- */

/* The writer keeps the sample records in memory and writes the file at
 * finalize (only the sample region is compressed, as one zstd frame); each
 * sample is a STACK_FULL record, which every reader of the format takes.
 * Stacks deeper than OUT_TACH_MAX_DEPTH frames (what CPython's reader
 * accepts) keep their innermost frames and are counted (truncated). */

struct wbuf {
    uint8_t *p;
    size_t len, cap;
    int failed;
};

static void wb_put(struct wbuf *b, const void *src, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->failed = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void wb_le(struct wbuf *b, uint64_t v, int n)
{
    uint8_t t[8];
    util_le_put(t, v, n);
    wb_put(b, t, (size_t)n);
}

static void wb_var(struct wbuf *b, uint64_t v)
{
    uint8_t t[10];
    size_t n = 0;
    do {
        t[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            t[n] |= 0x80;
        n++;
    } while (v);
    wb_put(b, t, n);
}

static void wb_zz(struct wbuf *b, int32_t v)
{
    wb_var(b, (uint32_t)(((uint32_t)v << 1) ^ (uint32_t)(v >> 31)));
}

struct wframe {
    uint32_t file, name;
    int32_t line, end_line, col, end_col;
    int op;
};
struct wthread {
    uint64_t tid, last_us;
    uint32_t interp;
};

struct out_tach_writer {
    FILE *f;
    uint64_t interval_us, start_us;
    int compression, mode, features;
    uint8_t py[3];
    struct wbuf samples;
    struct util_strtab strs; /* copies */
    struct wframe *frames;
    size_t nframes, capframes;
    struct util_htab frame_index; /* 1 + frame index */
    struct wthread *th;
    size_t nth, capth;
    uint32_t *stack;
    size_t capstack;
    int have_stats;
    double stats[4];
    uint32_t present;
    struct out_tach_write_stats st;
};

static uint64_t wframe_hash(const struct wframe *f)
{
    uint64_t h = util_hash_add(0, f->file);
    h = util_hash_add(h, f->name);
    h = util_hash_add(h, (uint32_t)f->line);
    h = util_hash_add(h, (uint32_t)f->end_line);
    h = util_hash_add(h, (uint32_t)f->col);
    h = util_hash_add(h, (uint32_t)f->end_col);
    return util_hash_u64(util_hash_add(h, (uint32_t)f->op));
}

static uint64_t wframe_hash_at(const void *ctx, uint32_t id)
{
    return wframe_hash(&((const struct out_tach_writer *)ctx)->frames[id - 1]);
}

static int64_t w_frame(struct out_tach_writer *w, const struct out_tach_frame *in)
{
    int64_t fi = util_strtab_add(&w->strs, in->filename, in->filename_len);
    int64_t ni = fi < 0 ? -1 : util_strtab_add(&w->strs, in->funcname, in->funcname_len);
    if (ni < 0 || w->nframes >= UINT32_MAX - 1 ||
        util_htab_reserve(&w->frame_index, 256, 1, (uint32_t)w->nframes + 1, wframe_hash_at, w) < 0)
        return -1;
    struct wframe k = {(uint32_t)fi,
                       (uint32_t)ni,
                       in->lineno,
                       in->end_lineno,
                       in->col,
                       in->end_col,
                       in->opcode < 0 || in->opcode > 254 ? 255 : in->opcode};
    if (!in->has_location)
        k.line = k.end_line = k.col = k.end_col = -1;
    uint32_t id;
    size_t j = util_htab_first(&w->frame_index, wframe_hash(&k));
    for (; (id = w->frame_index.slot[j]); j = util_htab_next(&w->frame_index, j))
        if (memcmp(&w->frames[id - 1], &k, sizeof k) == 0)
            return id - 1;
    if (w->nframes == w->capframes) {
        size_t cap = w->capframes ? w->capframes * 2 : 256;
        struct wframe *v = realloc(w->frames, cap * sizeof *v);
        if (!v)
            return -1;
        w->frames = v;
        w->capframes = cap;
    }
    w->frames[w->nframes] = k;
    util_htab_set(&w->frame_index, j, (uint32_t)(w->nframes + 1));
    return (int64_t)w->nframes++;
}

struct out_tach_writer *out_tach_writer_new(FILE *f, uint64_t interval_us, uint64_t start_us,
                                            int compression, int mode, int features,
                                            const uint8_t python[3])
{
    struct out_tach_writer *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->f = f;
    w->strs.copies = 1;
    w->interval_us = interval_us;
    w->start_us = start_us;
    w->compression = compression;
    w->mode = mode;
    w->features = features;
    memcpy(w->py, python, 3);
    return w;
}

int out_tach_write_sample(struct out_tach_writer *w, uint64_t tid, uint32_t interp, uint32_t status,
                          const struct out_tach_frame *frames, size_t n, uint64_t ts_us)
{
    size_t ti;
    for (ti = 0; ti < w->nth; ti++)
        if (w->th[ti].tid == tid && w->th[ti].interp == interp)
            break;
    if (ti == w->nth) {
        if (w->nth == w->capth) {
            size_t cap = w->capth ? w->capth * 2 : 8;
            void *p = realloc(w->th, cap * sizeof *w->th);
            if (!p)
                return PYS_E_NOMEM;
            w->th = p;
            w->capth = cap;
        }
        w->th[w->nth++] = (struct wthread){tid, w->start_us, interp};
    }
    if (n > OUT_TACH_MAX_DEPTH) {
        n = OUT_TACH_MAX_DEPTH; /* the innermost frames */
        w->st.truncated++;
    }
    if (n > w->capstack) {
        uint32_t *p = realloc(w->stack, n * sizeof *p);
        if (!p)
            return PYS_E_NOMEM;
        w->stack = p;
        w->capstack = n;
    }
    for (size_t i = 0; i < n; i++) {
        int64_t id = w_frame(w, &frames[i]);
        if (id < 0)
            return PYS_E_NOMEM;
        w->stack[i] = (uint32_t)id;
    }
    struct wthread *t = &w->th[ti];
    wb_le(&w->samples, tid, 8);
    wb_le(&w->samples, interp, 4);
    wb_le(&w->samples, 1, 1); /* STACK_FULL */
    wb_var(&w->samples, ts_us - t->last_us);
    wb_le(&w->samples, status & 0xff, 1);
    wb_var(&w->samples, n);
    for (size_t i = 0; i < n; i++)
        wb_var(&w->samples, w->stack[i]);
    if (w->samples.failed)
        return PYS_E_NOMEM;
    t->last_us = ts_us;
    w->st.samples++;
    w->st.frames += n;
    return 0;
}

void out_tach_set_stats(struct out_tach_writer *w, double duration_sec, double sample_rate,
                        const double *error_rate, const double *missed_samples)
{
    w->have_stats = 1;
    w->stats[0] = duration_sec;
    w->stats[1] = sample_rate;
    w->stats[2] = error_rate ? *error_rate : 0.0;
    w->stats[3] = missed_samples ? *missed_samples : 0.0;
    w->present = (error_rate ? 1u : 0u) | (missed_samples ? 2u : 0u);
}

const struct out_tach_write_stats *out_tach_writer_stats(const struct out_tach_writer *w)
{
    return &w->st;
}

int out_tach_finalize(struct out_tach_writer *w)
{
    struct wbuf out = {0};
    const uint8_t *sp = w->samples.p ? w->samples.p : (const uint8_t *)"";
    size_t slen = w->samples.len;
    uint8_t *z = NULL;
    if (w->compression == 1) {
        size_t cap = ZSTD_compressBound(slen);
        if (!(z = malloc(cap ? cap : 1)))
            return PYS_E_NOMEM;
        size_t r = ZSTD_compress(z, cap, sp, slen, 5);
        if (ZSTD_isError(r)) {
            free(z);
            return PYS_E_IO;
        }
        sp = z;
        slen = r;
    }
    uint32_t config = 0;
    if (w->mode >= 0 && w->mode <= 4)
        config |= (uint32_t)w->mode + 1;
    if (w->features >= 0)
        config |= 8u | ((uint32_t)w->features & 0x1f) << 4;
    uint64_t str_off = HEADER + slen;
    wb_put(&out, "HCAT", 4);
    wb_le(&out, 1, 4);
    wb_put(&out, w->py, 3);
    wb_le(&out, 0, 1);
    wb_le(&out, w->start_us, 8);
    wb_le(&out, w->interval_us, 8);
    wb_le(&out, w->st.samples, 8);
    wb_le(&out, w->nth, 4);
    wb_le(&out, str_off, 8);
    size_t frame_off_at = out.len;
    wb_le(&out, 0, 8); /* the frame table's offset, below */
    wb_le(&out, (uint64_t)w->compression, 4);
    wb_le(&out, config, 4);
    wb_put(&out, sp, slen);
    for (size_t i = 0; i < w->strs.n; i++) {
        wb_var(&out, w->strs.v[i].len);
        wb_put(&out, w->strs.v[i].s, w->strs.v[i].len);
    }
    uint64_t frame_off = out.len;
    for (size_t i = 0; i < w->nframes; i++) {
        const struct wframe *fr = &w->frames[i];
        wb_var(&out, fr->file);
        wb_var(&out, fr->name);
        wb_zz(&out, fr->line);
        wb_zz(&out, fr->line == -1 || fr->end_line == -1 ? 0 : fr->end_line - fr->line);
        wb_zz(&out, fr->col);
        wb_zz(&out, fr->col == -1 || fr->end_col == -1 ? 0 : fr->end_col - fr->col);
        wb_le(&out, (uint64_t)fr->op, 1);
    }
    if (w->have_stats) {
        for (int i = 0; i < 4; i++) {
            uint64_t u;
            memcpy(&u, &w->stats[i], sizeof u);
            wb_le(&out, u, 8);
        }
        wb_le(&out, w->present, 4);
        wb_le(&out, 0, 4);
        wb_put(&out, "TACHSTAT", 8);
        wb_le(&out, 1, 4);
        wb_le(&out, STATS_SIZE, 4);
    }
    wb_le(&out, w->strs.n, 4);
    wb_le(&out, w->nframes, 4);
    wb_le(&out, out.len + 24, 8);
    wb_le(&out, 0, 8);
    wb_le(&out, 0, 8);
    free(z);
    if (out.failed) {
        free(out.p);
        return PYS_E_NOMEM;
    }
    util_le_put(out.p + frame_off_at, frame_off, 8);
    int rc = 0;
    if (fseek(w->f, 0, SEEK_SET) != 0 || fwrite(out.p, 1, out.len, w->f) != out.len ||
        fflush(w->f) != 0)
        rc = PYS_E_IO;
    w->st.bytes = out.len;
    free(out.p);
    return rc;
}

void out_tach_writer_free(struct out_tach_writer *w)
{
    if (!w)
        return;
    util_strtab_release(&w->strs);
    free(w->frames);
    util_htab_release(&w->frame_index);
    free(w->th);
    free(w->stack);
    free(w->samples.p);
    free(w);
}
