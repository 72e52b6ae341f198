/*
 * image: the recorded image file (format in image.h), and attach from an
 * image's facts instead of a process's maps and ELF files.
 */
#include "core/image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/core.h"
#include "util/bytes.h"
#include "util/errtext.h"

#define HEADER_LEN 32
#define FORMAT_VERSION 1
#define FLAG_ZLIB 1u
static const char MAGIC[8] = {'P', 'Y', 'S', 'I', 'M', 'A', 'G', 'E'};

/* A cursor over the body: every take is checked against what is left. */
struct cursor {
    const uint8_t *p;
    size_t left;
};

static int take(struct cursor *c, size_t n, const uint8_t **out)
{
    if (n > c->left)
        return -1;
    *out = c->p;
    c->p += n;
    c->left -= n;
    return 0;
}

static int take_int(struct cursor *c, int n, uint64_t *v)
{
    const uint8_t *p;
    if (take(c, (size_t)n, &p) < 0)
        return -1;
    *v = util_le_get(p, n);
    return 0;
}

static int take_text(struct cursor *c, char *dst, size_t cap)
{
    uint64_t n;
    const uint8_t *p;
    if (take_int(c, 4, &n) < 0 || n >= cap || take(c, (size_t)n, &p) < 0 ||
        memchr(p, '\0', (size_t)n))
        return -1;
    memcpy(dst, p, (size_t)n);
    dst[n] = '\0';
    return 0;
}

void prof_image_free(struct prof_image *im)
{
    if (!im)
        return;
    free(im->addrs);
    free(im->bytes);
    free(im->regions);
    free(im);
}

static int parse_body(struct prof_image *im, const uint8_t *body, size_t len, char *err,
                      size_t errlen)
{
    struct cursor c = {body, len};
    struct prof_image_facts *f = &im->facts;
    uint64_t v, npages;
    if (take_int(&c, 8, &f->runtime) < 0 || f->runtime == 0)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "no runtime address");
    if (take_int(&c, 4, &v) < 0)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "truncated facts");
    f->version = (uint32_t)v;
    if (take_int(&c, 4, &v) < 0 || v > (1u << 20))
        return util_err_set(err, errlen, PYS_E_CORRUPT, "bad offsets table length");
    f->table_len = (uint32_t)v;
    if (take_int(&c, 8, &f->code_type) < 0 || take_int(&c, 8, &f->none) < 0)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "truncated facts");
    if (take_text(&c, f->version_text, sizeof f->version_text) < 0 ||
        take_text(&c, f->image_path, sizeof f->image_path) < 0)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "bad text field");
    if (take_int(&c, 4, &npages) < 0 || npages > IMAGE_PAGES_MAX)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "bad page count");
    if (c.left != npages * (8 + MEM_PAGE_SIZE))
        return util_err_set(err, errlen, PYS_E_CORRUPT, "the pages take %zu bytes, not %llu",
                            c.left, (unsigned long long)(npages * (8 + MEM_PAGE_SIZE)));
    size_t n = (size_t)npages;
    im->addrs = malloc((n ? n : 1) * sizeof *im->addrs);
    im->bytes = malloc(n ? n * MEM_PAGE_SIZE : 1);
    im->regions = malloc((n ? n : 1) * sizeof *im->regions);
    if (!im->addrs || !im->bytes || !im->regions)
        return PYS_E_NOMEM;
    const uint8_t *p = NULL;
    for (size_t i = 0; i < n; i++) {
        take_int(&c, 8, &v);
        if (v == 0 || v % MEM_PAGE_SIZE != 0 || v > UINT64_MAX - MEM_PAGE_SIZE ||
            (i > 0 && v <= im->addrs[i - 1]))
            return util_err_set(err, errlen, PYS_E_CORRUPT, "page %zu: bad address 0x%llx", i,
                                (unsigned long long)v);
        im->addrs[i] = v;
    }
    if (take(&c, n * MEM_PAGE_SIZE, &p) < 0)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "truncated pages");
    if (n)
        memcpy(im->bytes, p, n * MEM_PAGE_SIZE);
    im->npages = n;
    /* Pages that meet make one region: a read may run across them. Room for
     * n regions is there: no append fails. */
    size_t cap = n;
    for (size_t i = 0; i < n; i++) {
        uint8_t *b = im->bytes + i * MEM_PAGE_SIZE;
        if (mem_regions_append(&im->regions, &im->nregions, &cap,
                               (struct mem_region){im->addrs[i], b, MEM_PAGE_SIZE, b}) < 0)
            return PYS_E_NOMEM;
    }
    return 0;
}

int prof_image_load(const uint8_t *data, size_t len, struct prof_image **out, char *err,
                    size_t errlen)
{
    struct prof_image *im = NULL;
    uint8_t *body = NULL;
    int rc;
    if (err && errlen)
        err[0] = '\0';
    if (len < HEADER_LEN || memcmp(data, MAGIC, sizeof MAGIC) != 0)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "not a pystrobe image");
    uint64_t version = util_le_get(data + 8, 4), flags = util_le_get(data + 12, 4);
    uint64_t body_len = util_le_get(data + 16, 8), stored = util_le_get(data + 24, 8);
    if (version != FORMAT_VERSION)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "image format version %llu (known: %d)",
                            (unsigned long long)version, FORMAT_VERSION);
    if ((flags & ~(uint64_t)FLAG_ZLIB) != 0)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "unknown flags 0x%llx",
                            (unsigned long long)flags);
    if (body_len > IMAGE_BODY_MAX || stored != len - HEADER_LEN)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "bad body length");
    if (!(flags & FLAG_ZLIB) && stored != body_len)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "bad body length");
    /* zlib packs at most about 1032 bytes into one. */
    if ((flags & FLAG_ZLIB) && body_len / 1032 > stored)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "bad body length");
    im = calloc(1, sizeof *im);
    if (!im)
        return PYS_E_NOMEM;
    const uint8_t *b = data + HEADER_LEN;
    if (flags & FLAG_ZLIB) {
        rc = PYS_E_NOMEM;
        body = malloc(body_len ? (size_t)body_len : 1);
        if (!body)
            goto fail;
        uLongf got = (uLongf)body_len;
        if (stored > ULONG_MAX || uncompress(body, &got, b, (uLong)stored) != Z_OK ||
            got != body_len) {
            rc = util_err_set(err, errlen, PYS_E_CORRUPT,
                              "the compressed body does not unpack to %llu bytes",
                              (unsigned long long)body_len);
            goto fail;
        }
        b = body;
    }
    if ((rc = parse_body(im, b, (size_t)body_len, err, errlen)) < 0)
        goto fail;
    free(body);
    *out = im;
    return 0;
fail:
    free(body);
    prof_image_free(im);
    return rc;
}

int prof_image_load_file(const char *path, struct prof_image **out, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    uint8_t *data = NULL;
    size_t len = 0, cap = 0;
    int rc = PYS_E_IO;
    if (!f) {
        if (err && errlen)
            snprintf(err, errlen, "cannot open %s", path);
        return PYS_E_IO;
    }
    for (;;) {
        if (len == cap) {
            size_t ncap = cap ? 2 * cap : 65536;
            uint8_t *p =
                ncap > IMAGE_BODY_MAX + (size_t)HEADER_LEN + 65536 ? NULL : realloc(data, ncap);
            if (!p) {
                rc = util_err_set(err, errlen, PYS_E_CORRUPT, "%s is too large", path);
                goto out;
            }
            data = p;
            cap = ncap;
        }
        size_t k = fread(data + len, 1, cap - len, f);
        len += k;
        if (k == 0)
            break;
    }
    if (ferror(f)) {
        if (err && errlen)
            snprintf(err, errlen, "cannot read %s", path);
        goto out;
    }
    rc = prof_image_load(data, len, out, err, errlen);
out:
    free(data);
    fclose(f);
    return rc;
}

int prof_image_save(const char *path, const struct prof_image_facts *facts, struct mem_source *src,
                    const uint64_t *addrs, size_t n)
{
    size_t vlen = strlen(facts->version_text), plen = strlen(facts->image_path);
    if (vlen >= sizeof facts->version_text || plen >= sizeof facts->image_path ||
        n > IMAGE_PAGES_MAX)
        return PYS_E_INVAL;
    size_t cap = 8 + 4 + 4 + 8 + 8 + 4 + vlen + 4 + plen + 4 + n * (8 + MEM_PAGE_SIZE);
    uint8_t *body = malloc(cap), *z = NULL;
    uint8_t *pages = malloc(n ? n * MEM_PAGE_SIZE : 1);
    uint64_t *kept = malloc((n ? n : 1) * sizeof *kept);
    int rc = PYS_E_NOMEM;
    FILE *f = NULL;
    if (!body || !pages || !kept)
        goto out;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (addrs[i] % MEM_PAGE_SIZE != 0 || (i > 0 && addrs[i] <= addrs[i - 1])) {
            rc = PYS_E_INVAL;
            goto out;
        }
        rc = src->ops->read(src, addrs[i], pages + k * MEM_PAGE_SIZE, MEM_PAGE_SIZE);
        if (rc == PYS_E_EXITED || rc == PYS_E_PERM)
            goto out;
        if (rc == 0)
            kept[k++] = addrs[i];
    }
    uint8_t *p = body;
    util_le_put(p, facts->runtime, 8), p += 8;
    util_le_put(p, facts->version, 4), p += 4;
    util_le_put(p, facts->table_len, 4), p += 4;
    util_le_put(p, facts->code_type, 8), p += 8;
    util_le_put(p, facts->none, 8), p += 8;
    util_le_put(p, vlen, 4), p += 4;
    memcpy(p, facts->version_text, vlen), p += vlen;
    util_le_put(p, plen, 4), p += 4;
    memcpy(p, facts->image_path, plen), p += plen;
    util_le_put(p, k, 4), p += 4;
    for (size_t i = 0; i < k; i++, p += 8)
        util_le_put(p, kept[i], 8);
    memcpy(p, pages, k * MEM_PAGE_SIZE), p += k * MEM_PAGE_SIZE;
    size_t body_len = (size_t)(p - body);
    uLongf zlen = compressBound((uLong)body_len);
    rc = PYS_E_NOMEM;
    if (!(z = malloc(zlen)))
        goto out;
    rc = PYS_E_IO;
    if (compress2(z, &zlen, body, (uLong)body_len, 9) != Z_OK)
        goto out;
    uint8_t hdr[HEADER_LEN];
    memcpy(hdr, MAGIC, sizeof MAGIC);
    util_le_put(hdr + 8, FORMAT_VERSION, 4);
    util_le_put(hdr + 12, FLAG_ZLIB, 4);
    util_le_put(hdr + 16, body_len, 8);
    util_le_put(hdr + 24, zlen, 8);
    if (!(f = fopen(path, "wb")) || fwrite(hdr, 1, sizeof hdr, f) != sizeof hdr ||
        fwrite(z, 1, zlen, f) != zlen)
        goto out;
    rc = fclose(f) == 0 ? 0 : PYS_E_IO;
    f = NULL;
out:
    if (f)
        fclose(f);
    free(body);
    free(pages);
    free(kept);
    free(z);
    return rc;
}

int prof_attach_facts(struct pys_session *s, const struct prof_image_facts *f)
{
    char why[200];
    int rc;
    if (f->table_len > 0) {
        size_t want = cpy_offsets_max_table_size();
        if (want > f->table_len)
            want = f->table_len;
        uint8_t *table = malloc(want);
        if (!table)
            return prof_fail(s, PYS_E_NOMEM, "out of memory");
        rc = mem_read(&s->mem, f->runtime, table, want);
        if (rc == 0)
            rc = cpy_offsets_parse(table, want, &s->off, why, sizeof why);
        else
            snprintf(why, sizeof why, "cannot read the runtime at 0x%llx",
                     (unsigned long long)f->runtime);
        free(table);
    } else {
        rc = cpy_offsets_for_version(f->version, &s->off, why, sizeof why);
    }
    if (rc < 0)
        return prof_fail(s, rc, "image of %s: %s", f->image_path, why);
    uint64_t head = 0;
    if ((rc = cpy_runtime_first_interp(&s->mem, &s->off, f->runtime, &head)) < 0 || head == 0)
        return prof_fail(s, rc < 0 ? rc : PYS_E_NOTPYTHON,
                         "image of %s: no interpreter in its runtime", f->image_path);
    s->runtime = f->runtime;
    s->sym.code_type = f->code_type;
    s->sym.none = f->none;
    snprintf(s->version_text, sizeof s->version_text, "%s", f->version_text);
    s->image_path = strdup(f->image_path);
    return s->image_path ? 0 : prof_fail(s, PYS_E_NOMEM, "out of memory");
}

void prof_session_facts(const struct pys_session *s, struct prof_image_facts *out)
{
    memset(out, 0, sizeof *out);
    out->runtime = s->runtime;
    out->version = s->off.version;
    /* 3.13+ read their offsets from the runtime's own table (attach.c). */
    out->table_len = s->off.version >= 0x030d0000 ? (uint32_t)cpy_offsets_max_table_size() : 0;
    out->code_type = s->sym.code_type;
    out->none = s->sym.none;
    snprintf(out->version_text, sizeof out->version_text, "%s", s->version_text);
    snprintf(out->image_path, sizeof out->image_path, "%s", s->image_path ? s->image_path : "");
}
