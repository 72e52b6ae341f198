/*
 * source_proc: the memory source of a live process, through the platform
 * layer (process_vm_readv, process_vm_writev). Its clock is the system's
 * monotonic clock.
 */
#include "mem/mem.h"

#include <pystrobe/pystrobe.h>

#include "platform/platform.h"

static int proc_read(struct mem_source *src, uint64_t addr, void *buf, size_t len)
{
    return plat_mem_read(((struct mem_proc *)src)->pid, addr, buf, len);
}

/* mem_seg and plat_seg are the same three fields; the platform layer knows
 * nothing of mem's types, so a batch is handed over as plat_segs. */
static int proc_readv(struct mem_source *src, const struct mem_seg *segs, size_t n)
{
    struct plat_seg ps[MEM_BATCH_MAX + 1 + 2 * MEM_RECHECK_MAX];
    if (n > sizeof ps / sizeof *ps)
        return PYS_E_INVAL;
    for (size_t i = 0; i < n; i++) {
        ps[i].addr = segs[i].addr;
        ps[i].buf = segs[i].buf;
        ps[i].len = segs[i].len;
    }
    return plat_mem_readv(((struct mem_proc *)src)->pid, ps, n);
}

static int proc_write(struct mem_source *src, uint64_t addr, const void *buf, size_t len)
{
    return plat_mem_write(((struct mem_proc *)src)->pid, addr, buf, len);
}

static uint64_t proc_clock_ns(struct mem_source *src)
{
    (void)src;
    return plat_clock_ns();
}

static const struct mem_source_ops proc_ops = {proc_read, proc_readv, proc_write, proc_clock_ns};

void mem_proc_init(struct mem_proc *p, int pid)
{
    p->base.ops = &proc_ops;
    p->pid = pid;
}
