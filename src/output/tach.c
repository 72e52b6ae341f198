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

#define HEADER 64
#define FOOTER 32
#define MAX_RAW ((size_t)1 << 30)
#define MAX_DEPTH 1000000u

struct tcur {
    const uint8_t *p, *end;
};

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

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

int out_tach_read(const uint8_t *data, size_t size, const struct out_rec_reader_cb *cb,
                  struct out_rec_read_info *info, char *err, size_t errlen)
{
    struct out_rec_read_info dummy;
    if (!info)
        info = &dummy;
    memset(info, 0, sizeof *info);
    if (errlen)
        err[0] = '\0';
    if (size < HEADER + FOOTER || memcmp(data, "HCAT", 4) != 0)
        return set_err(err, errlen, "not a little-endian TACH file");
    uint32_t version = (uint32_t)le(data + 4, 4);
    if (version != 1) {
        snprintf(err, errlen, "CPython binary profile format version %u: this pystrobe reads 1",
                 version);
        return version > 1 ? PYS_E_VERSION : PYS_E_CORRUPT;
    }
    info->major = 1;
    char pyver[32];
    snprintf(pyver, sizeof pyver, "%u.%u.%u", data[8], data[9], data[10]);
    uint64_t start_us = le(data + 0x0c, 8), interval_us = le(data + 0x14, 8);
    uint64_t str_off = le(data + 0x28, 8), frame_off = le(data + 0x30, 8);
    uint32_t comp = (uint32_t)le(data + 0x38, 4), config = (uint32_t)le(data + 0x3c, 4);
    const uint8_t *foot = data + size - FOOTER;
    uint64_t nstr = le(foot, 4), nframe = le(foot + 4, 4);
    if (str_off < HEADER || str_off > frame_off || frame_off > size - FOOTER || comp > 1 ||
        le(foot + 8, 8) != size || nstr > size - str_off || nframe > (size - frame_off) / 7)
        return set_err(err, errlen, "bad header or footer (a file cut short?)");
    static const char *const modes[] = {"", "wall", "cpu", "gil", "all", "exception"};
    uint32_t mode = config & 7;

    int rc = 0;
    char **strs = calloc(nstr ? nstr : 1, sizeof *strs);
    struct pys_frame *frames = calloc(nframe ? nframe : 1, sizeof *frames);
    struct tthread *th = NULL;
    size_t nth = 0, capth = 0;
    uint8_t *raw = NULL;
    struct pys_frame *sf = NULL;
    size_t capsf = 0;
    if (!strs || !frames) {
        rc = PYS_E_NOMEM;
        goto done;
    }
    struct tcur c = {data + str_off, data + frame_off};
    for (uint64_t i = 0; i < nstr; i++) {
        uint64_t len;
        if (var(&c, &len) < 0 || len > (size_t)(c.end - c.p)) {
            rc = set_err(err, errlen, "bad string table");
            goto done;
        }
        if (!(strs[i] = malloc(len + 1))) {
            rc = PYS_E_NOMEM;
            goto done;
        }
        memcpy(strs[i], c.p, len);
        for (size_t k = 0; k < len; k++)
            if (!strs[i][k])
                strs[i][k] = '?';
        strs[i][len] = '\0';
        c.p += len;
    }
    c = (struct tcur){data + frame_off, data + size - FOOTER};
    for (uint64_t i = 0; i < nframe; i++) {
        uint64_t fi, qi;
        int32_t line, dl, col, dc;
        if (var(&c, &fi) < 0 || var(&c, &qi) < 0 || fi >= nstr || qi >= nstr ||
            zz32(&c, &line) < 0 || zz32(&c, &dl) < 0 || zz32(&c, &col) < 0 || zz32(&c, &dc) < 0 ||
            c.p >= c.end) {
            rc = set_err(err, errlen, "bad frame table");
            goto done;
        }
        uint8_t op = *c.p++;
        struct pys_frame *f = &frames[i];
        f->filename = strs[fi];
        f->qualname = strs[qi];
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
    /* The sample data, decompressed if need be (one zstd frame). */
    const uint8_t *sp = data + HEADER;
    size_t slen = (size_t)(str_off - HEADER);
    if (comp == 1) {
        ZSTD_DCtx *dc = ZSTD_createDCtx();
        size_t cap = 0, len = 0;
        if (!dc) {
            rc = PYS_E_NOMEM;
            goto done;
        }
        ZSTD_inBuffer in = {sp, slen, 0};
        for (;;) {
            if (len == cap) {
                size_t ncap = cap ? cap * 2 : 1 << 16;
                uint8_t *p = ncap <= MAX_RAW ? realloc(raw, ncap) : NULL;
                if (!p) {
                    rc = ncap <= MAX_RAW ? PYS_E_NOMEM : set_err(err, errlen, "samples too large");
                    break;
                }
                raw = p;
                cap = ncap;
            }
            ZSTD_outBuffer o = {raw + len, cap - len, 0};
            size_t before = in.pos;
            size_t r = ZSTD_decompressStream(dc, &o, &in);
            if (ZSTD_isError(r)) {
                rc = set_err(err, errlen, "bad compressed samples");
                break;
            }
            len += o.pos;
            if (r == 0 || (o.pos == 0 && in.pos == before))
                break;
        }
        ZSTD_freeDCtx(dc);
        if (rc)
            goto done;
        sp = raw;
        slen = len;
    }
    struct out_rec_meta m = {.pid = 0,
                             .python_version = (uint32_t)data[8] << 24 | (uint32_t)data[9] << 16 |
                                               (uint32_t)data[10] << 8,
                             .python_version_text = pyver,
                             .mode = mode >= 1 && mode <= 5 ? modes[mode] : "wall",
                             .tool = "CPython profiling.sampling",
                             .interval_ns = interval_us * 1000,
                             .rate_hz = interval_us ? 1e6 / (double)interval_us : 0,
                             .start_monotonic_ns = start_us * 1000,
                             .max_frames = MAX_DEPTH};
    if (cb->meta && (rc = cb->meta(cb->ctx, &m)) != 0)
        goto done;
    c = (struct tcur){sp, sp + slen};
    while (c.p < c.end) {
        if (c.end - c.p < 13) {
            rc = set_err(err, errlen, "truncated sample data");
            goto done;
        }
        uint64_t tid = le(c.p, 8);
        uint32_t interp = (uint32_t)le(c.p + 8, 4);
        uint8_t enc = c.p[12];
        c.p += 13;
        size_t ti;
        for (ti = 0; ti < nth; ti++)
            if (th[ti].tid == tid && th[ti].interp == interp)
                break;
        if (ti == nth) {
            if (nth == capth) {
                size_t nc = capth ? capth * 2 : 8;
                void *p = realloc(th, nc * sizeof *th);
                if (!p) {
                    rc = PYS_E_NOMEM;
                    goto done;
                }
                th = p;
                capth = nc;
            }
            th[nth++] = (struct tthread){.tid = tid, .interp = interp, .last_us = start_us};
        }
        struct tthread *t = &th[ti];
        uint64_t count = 1, a = 0, b = 0, ts;
        if (enc == 0 && (var(&c, &count) < 0 || count > (size_t)(c.end - c.p) / 2)) {
            rc = set_err(err, errlen, "bad repeat record");
            goto done;
        }
        for (uint64_t k = 0; k < count; k++) {
            if (var(&c, &ts) < 0 || c.p >= c.end) {
                rc = set_err(err, errlen, "bad sample record");
                goto done;
            }
            uint32_t status = *c.p++;
            if (enc != 0) {
                if (enc > 3 || var(&c, &a) < 0 || (enc != 1 && var(&c, &b) < 0)) {
                    rc = set_err(err, errlen, "bad sample record");
                    goto done;
                }
                /* FULL: depth a; SUFFIX: keep the bottom a, push b; POP_PUSH:
                 * drop the top a, push b. */
                uint64_t push = enc == 1 ? a : b;
                uint64_t keep = enc == 1 ? 0 : enc == 2 ? a : (a <= t->n ? t->n - a : UINT64_MAX);
                if (keep > t->n || push > (size_t)(c.end - c.p) || keep + push > MAX_DEPTH) {
                    rc = set_err(err, errlen, "bad stack record");
                    goto done;
                }
                size_t nn = (size_t)(keep + push);
                uint32_t *ns = malloc((nn ? nn : 1) * sizeof *ns);
                if (!ns) {
                    rc = PYS_E_NOMEM;
                    goto done;
                }
                for (size_t j = 0; j < push; j++) {
                    uint64_t fi;
                    if (var(&c, &fi) < 0 || fi >= nframe) {
                        free(ns);
                        rc = set_err(err, errlen, "bad frame index");
                        goto done;
                    }
                    ns[j] = (uint32_t)fi;
                }
                if (keep)
                    memcpy(ns + push, t->stack + (t->n - keep), keep * sizeof *ns);
                free(t->stack);
                t->stack = ns;
                t->n = t->cap = nn;
            }
            t->last_us += ts;
            t->status = status;
            if (t->n > capsf) {
                void *p = realloc(sf, t->n * sizeof *sf);
                if (!p) {
                    rc = PYS_E_NOMEM;
                    goto done;
                }
                sf = p;
                capsf = t->n;
            }
            for (size_t j = 0; j < t->n; j++)
                sf[j] = frames[t->stack[j]];
            struct out_rec_thread one = {
                .id = tid, .status = status, .nframes = t->n, .frames = sf};
            struct out_rec_sample s = {t->last_us * 1000, 0, t->n ? 1 : 0, &one};
            info->samples++;
            if (cb->sample && (rc = cb->sample(cb->ctx, &s)) != 0)
                goto done;
        }
    }
    info->complete = 1;
    info->blocks = 1;
    info->bytes = size;
done:
    free(sf);
    free(raw);
    for (size_t i = 0; i < nth; i++)
        free(th[i].stack);
    free(th);
    free(frames);
    if (cb->keep_strings && strs) {
        info->strings = strs;
        info->nstrings = nstr;
    } else if (strs) {
        for (uint64_t i = 0; i < nstr; i++)
            free(strs[i]);
        free(strs);
    }
    if (rc == PYS_E_NOMEM && errlen)
        snprintf(err, errlen, "out of memory");
    return rc;
}
