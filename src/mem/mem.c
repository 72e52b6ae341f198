/*
 * mem: reads from a live process through the platform layer, or from an
 * image of regions, behind one interface, with counters.
 */
#include "mem/mem.h"

#include <string.h>

#include <pystrobe/pystrobe.h>

#include "platform/platform.h"

/* process_vm_readv takes at most IOV_MAX (1024) iovecs per call. */
#define MEM_BATCH_MAX 1024

void mem_init_process(struct mem *m, int pid)
{
    memset(m, 0, sizeof *m);
    m->pid = pid;
}

void mem_init_image(struct mem *m, const struct mem_region *regions, size_t n)
{
    memset(m, 0, sizeof *m);
    m->regions = regions;
    m->nregions = n;
}

static int image_read(const struct mem *m, uint64_t addr, void *buf, size_t len)
{
    for (size_t i = 0; i < m->nregions; i++) {
        const struct mem_region *r = &m->regions[i];
        if (addr >= r->addr && addr - r->addr <= r->len && len <= r->len - (addr - r->addr)) {
            memcpy(buf, r->data + (addr - r->addr), len);
            return 0;
        }
    }
    return PYS_E_BADADDR;
}

int mem_read(struct mem *m, uint64_t addr, void *buf, size_t len)
{
    int rc;
    if (len == 0)
        return 0;
    if (addr == 0 || addr + len < addr)
        return PYS_E_BADADDR;
    m->stats.reads++;
    m->stats.bytes += len;
    rc = m->pid > 0 ? plat_mem_read(m->pid, addr, buf, len) : image_read(m, addr, buf, len);
    if (rc < 0)
        m->stats.failures++;
    return rc;
}

int mem_read_u64(struct mem *m, uint64_t addr, uint64_t *out)
{
    uint64_t v;
    int rc = mem_read(m, addr, &v, sizeof v);
    if (rc == 0)
        *out = v;
    return rc;
}

int mem_write(struct mem *m, uint64_t addr, const void *buf, size_t len)
{
    if (addr == 0 || addr + len < addr)
        return PYS_E_BADADDR;
    m->stats.writes++;
    if (m->pid > 0)
        return plat_mem_write(m->pid, addr, buf, len);
    for (size_t i = 0; i < m->nregions; i++) {
        const struct mem_region *r = &m->regions[i];
        if (addr >= r->addr && addr - r->addr <= r->len && len <= r->len - (addr - r->addr)) {
            if (!r->writable)
                return PYS_E_PERM;
            memcpy(r->writable + (addr - r->addr), buf, len);
            return 0;
        }
    }
    return PYS_E_BADADDR;
}

int mem_write_u64(struct mem *m, uint64_t addr, uint64_t v)
{
    return mem_write(m, addr, &v, sizeof v);
}

int mem_readv(struct mem *m, const struct mem_seg *segs, size_t n)
{
    if (m->pid <= 0) {
        for (size_t i = 0; i < n; i++) {
            int rc = mem_read(m, segs[i].addr, segs[i].buf, segs[i].len);
            if (rc < 0)
                return rc;
        }
        return 0;
    }
    size_t done = 0;
    while (done < n) {
        struct plat_seg ps[MEM_BATCH_MAX];
        size_t k = 0;
        for (; k < MEM_BATCH_MAX && done + k < n; k++) {
            const struct mem_seg *s = &segs[done + k];
            if (s->addr == 0)
                return PYS_E_BADADDR;
            ps[k].addr = s->addr;
            ps[k].buf = s->buf;
            ps[k].len = s->len;
            m->stats.bytes += s->len;
        }
        m->stats.reads++;
        int got = plat_mem_readv(m->pid, ps, k);
        if (got < 0) {
            m->stats.failures++;
            return got;
        }
        if ((size_t)got < k) {
            /* A segment failed: read it alone to learn why. */
            m->stats.failures++;
            int rc = mem_read(m, ps[got].addr, ps[got].buf, ps[got].len);
            if (rc < 0)
                return rc;
            done += (size_t)got + 1;
            continue;
        }
        done += k;
    }
    return 0;
}
