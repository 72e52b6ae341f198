/*
 * mem: the one way the cpython layer reads the target. A struct mem is either
 * a live process (reads go to process_vm_readv) or an image made of memory
 * regions (unit tests and fuzzers feed the walker crafted memory this way).
 * Every read is counted; the counters cost an add per read.
 */
#ifndef PYSTROBE_MEM_H
#define PYSTROBE_MEM_H

#include <stddef.h>
#include <stdint.h>

struct mem_region {
    uint64_t addr;
    const uint8_t *data;
    size_t len;
    uint8_t *writable; /* the same bytes, if writes may change them; else NULL */
};

struct mem_stats {
    uint64_t reads;       /* calls that reached the target (a batch is one) */
    uint64_t bytes;       /* bytes asked for */
    uint64_t failures;    /* reads that failed */
    uint64_t writes;      /* writes into the target */
};

struct mem {
    int pid;                          /* > 0: read this process */
    const struct mem_region *regions; /* pid == 0: read these */
    size_t nregions;
    struct mem_stats stats;
};

/* One piece of a batched read. */
struct mem_seg {
    uint64_t addr;
    void *buf;
    size_t len;
};

void mem_init_process(struct mem *m, int pid);
void mem_init_image(struct mem *m, const struct mem_region *regions, size_t n);

/* Copy len bytes at addr. 0, or PYS_E_BADADDR (unmapped, short),
 * PYS_E_EXITED (process gone), PYS_E_PERM. Address 0 is always bad. */
int mem_read(struct mem *m, uint64_t addr, void *buf, size_t len);
int mem_read_u64(struct mem *m, uint64_t addr, uint64_t *out);

/* Write len bytes at addr (an image only where its region is writable). */
int mem_write(struct mem *m, uint64_t addr, const void *buf, size_t len);
int mem_write_u64(struct mem *m, uint64_t addr, uint64_t v);

/* Read all segments, in as few system calls as possible. 0 when all were
 * read, else the first failure's code. */
int mem_readv(struct mem *m, const struct mem_seg *segs, size_t n);

#endif
