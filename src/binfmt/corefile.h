/*
 * corefile: what pystrobe needs from an ELF core file (a process's memory
 * as the kernel or gdb's gcore dumped it, x86-64): its memory segments, the
 * files its mappings came from (NT_FILE), its threads (NT_PRSTATUS), its
 * process id and command (NT_PRPSINFO) and its entry point (NT_AUXV). Read
 * with libelf from the core's bytes held in memory. Knows nothing about
 * processes or Python.
 */
#ifndef PYSTROBE_BINFMT_COREFILE_H
#define PYSTROBE_BINFMT_COREFILE_H

#include <stddef.h>
#include <stdint.h>

/* Bounds on what a core may list: a process has at most vm.max_map_count
 * mappings (65530 by default) and threads below pid_max (4M); anything past
 * these is a corrupt core, not a process. */
#define BIN_CORE_SEGMENTS_MAX (1u << 18)
#define BIN_CORE_FILES_MAX (1u << 18)
#define BIN_CORE_THREADS_MAX (1u << 22)

/* One PT_LOAD segment: the mapping [vaddr, vaddr + memsz), of which the
 * core holds the first filesz bytes at offset (the rest was left out: file
 * pages never written, memory the dumper skipped). Of those, `present`
 * bytes are inside the core as it is (fewer: the core is truncated). */
struct bin_core_segment {
    uint64_t vaddr, memsz;
    uint64_t offset, filesz, present;
    uint32_t flags; /* PF_R | PF_W | PF_X */
};

/* One file mapping (NT_FILE): [start, end) maps the file at byte offset. */
struct bin_core_file {
    uint64_t start, end, offset;
    const char *path; /* as the process named it; owned by the bin_core */
};

struct bin_core {
    struct bin_core_segment *segs; /* sorted by vaddr, none overlapping */
    size_t nsegs;
    struct bin_core_file *files; /* in the note's order */
    size_t nfiles;
    char *paths;    /* the files' path strings */
    uint32_t *tids; /* the threads (NT_PRSTATUS), the one that dumped first */
    size_t ntids;
    int pid;          /* NT_PRPSINFO's, else the first thread's; 0 unknown */
    int signal;       /* the first thread's current signal (0: none, gcore) */
    char command[17]; /* NT_PRPSINFO's pr_fname ("" unknown) */
    uint64_t entry;   /* AT_ENTRY from NT_AUXV, 0 unknown */
    uint64_t missing; /* bytes the segments claim past the core's end */
};

/*
 * Parse the core file whose bytes are data[0..len) (the caller's; they must
 * outlive the bin_core only as long as the caller reads segments from them).
 * A section table that lies past the end (a truncated gdb core) is cleared
 * from the header in data (a core's sections are not used).
 * 0 and *out, or PYS_E_CORRUPT with err saying what (not an ELF file, not a
 * core, another machine's core, notes cut off, segments overlapping, too
 * many of anything), or PYS_E_NOMEM. A core whose segments run past its end
 * (truncated) still parses: `present` and `missing` say what is there.
 */
int bin_core_parse(uint8_t *data, size_t len, struct bin_core *out, char *err, size_t errlen);
void bin_core_release(struct bin_core *c);

#endif
