/*
 * platform: what pystrobe needs from the operating system about another
 * process, and nothing about Python. Linux only: /proc and process_vm_readv.
 *
 * Every function returns 0 (or a non-negative value where stated) or a
 * negative PYS_E_* code; OS errors are mapped here and nowhere else:
 * ESRCH -> PYS_E_NOPROC (before attach) / PYS_E_EXITED (memory reads),
 * EPERM/EACCES -> PYS_E_PERM, EFAULT/short read -> PYS_E_BADADDR.
 */
#ifndef PYSTROBE_PLATFORM_H
#define PYSTROBE_PLATFORM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One line of /proc/PID/maps. */
struct plat_map {
    uint64_t start, end; /* [start, end) */
    uint64_t offset;     /* file offset of start */
    uint64_t inode;
    unsigned dev_major, dev_minor;
    char perms[5]; /* e.g. "r-xp", NUL-terminated */
    char *path;    /* NULL for anonymous mappings; owned by the plat_maps;
                      " (deleted)" suffix kept as the kernel prints it */
};

struct plat_maps {
    struct plat_map *v;
    size_t n;
};

/* Parse the text of a maps file (len bytes, need not be NUL-terminated).
 * Lines that do not parse make the whole call fail with PYS_E_CORRUPT. */
int plat_maps_parse(const char *text, size_t len, struct plat_maps *out);
/* Read and parse /proc/PID/maps. PYS_E_NOPROC if the process does not exist,
 * PYS_E_PERM if it may not be read. */
int plat_maps_read(pid_t pid, struct plat_maps *out);
void plat_maps_release(struct plat_maps *m);

/* Open the file behind a mapping for reading, as the target sees it:
 * /proc/PID/map_files/START-END first, then /proc/PID/root/PATH.
 * Returns an fd (>= 0) or a negative code. */
int plat_map_open(pid_t pid, const struct plat_map *m);

/* Does the process exist, and is it a zombie? 0 = alive, PYS_E_NOPROC =
 * no such process, PYS_E_EXITED = zombie (exited, not yet reaped). */
int plat_proc_check(pid_t pid);

/* Path of the process's executable (readlink /proc/PID/exe) into buf. */
int plat_proc_exe(pid_t pid, char *buf, size_t len);

/* Kernel scheduler state letter of thread tid ('R', 'S', 'D', ...) from
 * /proc/PID/task/TID/stat; negative code if unreadable. */
int plat_task_state(pid_t pid, pid_t tid);

/* Copy len bytes at addr in the target to buf. PYS_E_BADADDR for an
 * unmapped address or a short read, PYS_E_EXITED if the process is gone,
 * PYS_E_PERM without ptrace rights. */
int plat_mem_read(pid_t pid, uint64_t addr, void *buf, size_t len);

/* Many reads in one system call (process_vm_readv with several remote
 * iovecs). Returns the number of segments read completely, in order (a
 * segment after a failed one is not read), or a negative code if none. */
struct plat_seg {
    uint64_t addr;
    void *buf;
    size_t len;
};
int plat_mem_readv(pid_t pid, const struct plat_seg *segs, size_t n);

#endif
