/*
 * source_record: a memory source that reads through another and notes
 * every page a read touched, for recording an image of a target
 * (core/image.c): the pages a snapshot needs, and nothing else. It never
 * writes: a recorder must leave its target as it found it.
 */
#include "mem/mem.h"

#include <stdlib.h>

#include <pystrobe/pystrobe.h>

#define PAGE_MASK (~(uint64_t)(MEM_PAGE_SIZE - 1))

static void note_span(struct mem_record *r, uint64_t addr, size_t len)
{
    if (len == 0 || r->failed)
        return;
    for (uint64_t p = addr & PAGE_MASK; p < addr + len; p += MEM_PAGE_SIZE) {
        if (r->npages == r->cap) {
            size_t cap = r->cap ? 2 * r->cap : 256;
            uint64_t *v = realloc(r->pages, cap * sizeof *v);
            if (!v) {
                r->failed = 1;
                return;
            }
            r->pages = v;
            r->cap = cap;
        }
        r->pages[r->npages++] = p;
        if (p > UINT64_MAX - MEM_PAGE_SIZE)
            break;
    }
}

static int record_read(struct mem_source *src, uint64_t addr, void *buf, size_t len)
{
    struct mem_record *r = (struct mem_record *)src;
    int rc = r->inner->ops->read(r->inner, addr, buf, len);
    if (rc == 0)
        note_span(r, addr, len);
    return rc;
}

static int record_readv(struct mem_source *src, const struct mem_seg *segs, size_t n)
{
    struct mem_record *r = (struct mem_record *)src;
    int got = r->inner->ops->readv(r->inner, segs, n);
    for (int i = 0; i < got; i++)
        note_span(r, segs[i].addr, segs[i].len);
    return got;
}

static int record_write(struct mem_source *src, uint64_t addr, const void *buf, size_t len)
{
    (void)src;
    (void)addr;
    (void)buf;
    (void)len;
    return PYS_E_PERM;
}

static uint64_t record_clock_ns(struct mem_source *src)
{
    struct mem_record *r = (struct mem_record *)src;
    return r->inner->ops->clock_ns(r->inner);
}

static const struct mem_source_ops record_ops = {record_read, record_readv, record_write,
                                                 record_clock_ns};

void mem_record_init(struct mem_record *r, struct mem_source *inner)
{
    r->base.ops = &record_ops;
    r->inner = inner;
    r->pages = NULL;
    r->npages = r->cap = 0;
    r->failed = 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

size_t mem_record_pages(struct mem_record *r)
{
    if (r->npages == 0)
        return 0;
    qsort(r->pages, r->npages, sizeof *r->pages, cmp_u64);
    size_t k = 1;
    for (size_t i = 1; i < r->npages; i++)
        if (r->pages[i] != r->pages[k - 1])
            r->pages[k++] = r->pages[i];
    r->npages = k;
    return k;
}

void mem_record_release(struct mem_record *r)
{
    free(r->pages);
    r->pages = NULL;
    r->npages = r->cap = 0;
}
