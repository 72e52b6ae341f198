/*
 * source_image: a memory source made of regions held in this process
 * (crafted memory in unit tests and fuzzers, recorded images of real
 * targets). It answers as a process would whose mappings were those
 * regions: a read of bytes outside them fails as a read of unmapped memory
 * does, a batch stops at its first segment that fails.
 */
#include "mem/mem.h"

#include <string.h>

#include <pystrobe/pystrobe.h>

#include "util/array.h"

/* The region holding addr, or NULL. */
static const struct mem_region *region_at(const struct mem_region *regions, size_t n, uint64_t addr)
{
    for (size_t i = 0; i < n; i++)
        if (addr >= regions[i].addr && addr - regions[i].addr < regions[i].len)
            return &regions[i];
    return NULL;
}

/* Copy [addr, addr + len) through the regions (to buf, or from wbuf into
 * the regions' writable bytes), across regions that meet end to start. */
static int image_rw(const struct mem_region *regions, size_t n, uint64_t addr, void *buf,
                    const void *wbuf, size_t len)
{
    if (addr == 0 || addr + len < addr)
        return PYS_E_BADADDR;
    /* First pass: all of it mapped (and writable); nothing copied before. */
    uint64_t a = addr;
    size_t left = len;
    while (left > 0) {
        const struct mem_region *r = region_at(regions, n, a);
        if (!r)
            return PYS_E_BADADDR;
        if (wbuf && !r->writable)
            return PYS_E_PERM;
        size_t k = r->len - (size_t)(a - r->addr);
        if (k > left)
            k = left;
        a += k;
        left -= k;
    }
    a = addr;
    left = len;
    size_t done = 0;
    while (left > 0) {
        const struct mem_region *r = region_at(regions, n, a);
        size_t at = (size_t)(a - r->addr), k = r->len - at;
        if (k > left)
            k = left;
        if (wbuf)
            memcpy(r->writable + at, (const uint8_t *)wbuf + done, k);
        else
            memcpy((uint8_t *)buf + done, r->data + at, k);
        a += k;
        left -= k;
        done += k;
    }
    return 0;
}

int mem_regions_append(struct mem_region **v, size_t *n, size_t *cap, struct mem_region r)
{
    if (r.len == 0)
        return 0;
    struct mem_region *last = *n ? &(*v)[*n - 1] : NULL;
    if (last && last->addr + last->len == r.addr && last->data + last->len == r.data &&
        (last->writable ? last->writable + last->len == r.writable : !r.writable)) {
        last->len += r.len;
        return 0;
    }
    int rc = util_array_reserve((void **)v, cap, *n + 1, sizeof **v);
    if (rc < 0)
        return rc;
    (*v)[(*n)++] = r;
    return 0;
}

int mem_image_copy(const struct mem_region *regions, size_t n, uint64_t addr, void *buf, size_t len)
{
    return image_rw(regions, n, addr, buf, NULL, len);
}

static int image_read(struct mem_source *src, uint64_t addr, void *buf, size_t len)
{
    const struct mem_image *im = (const struct mem_image *)src;
    if (len == 0)
        return 0;
    return image_rw(im->regions, im->nregions, addr, buf, NULL, len);
}

static int image_readv(struct mem_source *src, const struct mem_seg *segs, size_t n)
{
    size_t k = 0;
    while (k < n && image_read(src, segs[k].addr, segs[k].buf, segs[k].len) == 0)
        k++;
    return k == 0 && n > 0 ? PYS_E_BADADDR : (int)k;
}

static int image_write(struct mem_source *src, uint64_t addr, const void *buf, size_t len)
{
    const struct mem_image *im = (const struct mem_image *)src;
    if (len == 0)
        return 0;
    return image_rw(im->regions, im->nregions, addr, NULL, buf, len);
}

static uint64_t image_clock_ns(struct mem_source *src)
{
    (void)src;
    return 0;
}

static const struct mem_source_ops image_ops = {image_read, image_readv, image_write,
                                                image_clock_ns};

void mem_image_init(struct mem_image *im, const struct mem_region *regions, size_t n)
{
    im->base.ops = &image_ops;
    im->regions = regions;
    im->nregions = n;
}
