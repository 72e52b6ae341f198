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

/* Parse the text of a maps file (len bytes, need not be NUL-terminated; the
 * last line need not end in a newline). Empty text gives 0 maps (v NULL).
 * Any line not in the kernel's format (including a blank line or a NUL byte)
 * makes the whole call fail with PYS_E_CORRUPT; *out is then untouched. */
int plat_maps_parse(const char *text, size_t len, struct plat_maps *out);
/* Read and parse /proc/PID/maps. PYS_E_NOPROC if the process does not exist,
 * PYS_E_PERM if it may not be read, PYS_E_INVAL for pid <= 0. A kernel
 * thread (or a process exiting during the read) has 0 maps. */
int plat_maps_read(pid_t pid, struct plat_maps *out);
/* Free what plat_maps_parse/plat_maps_read returned (the array and its path
 * strings are one allocation) and reset *m to empty. NULL is allowed. */
void plat_maps_release(struct plat_maps *m);

/* Open the file behind a mapping for reading, as the target sees it:
 * /proc/PID/map_files/START-END first (needs CAP_SYS_ADMIN; works across
 * chroots and for deleted files), then /proc/PID/root/PATH for an absolute
 * path not marked " (deleted)". Regular files only: a device or other
 * special file is PYS_E_NOTFOUND and is not opened. Returns an
 * O_RDONLY|O_CLOEXEC fd (>= 0, the caller closes it), or PYS_E_NOTFOUND,
 * PYS_E_PERM, PYS_E_NOPROC, ... */
int plat_map_open(pid_t pid, const struct plat_map *m);
/* Size in bytes of the file open on fd (fstat); PYS_E_INVAL if unknown. */
int plat_file_size(int fd, uint64_t *size);

/* Does the process exist, and is it a zombie? 0 = alive, PYS_E_NOPROC =
 * no such process (also for the id of a thread that is not a thread group
 * leader), PYS_E_EXITED = zombie (exited, not yet reaped). A process whose
 * main thread exited while others still run is alive. */
int plat_proc_check(pid_t pid);

/* Path of the process's executable (readlink /proc/PID/exe) into buf,
 * NUL-terminated; " (deleted)" is kept as the kernel prints it. PYS_E_INVAL
 * if it does not fit in len bytes (buf is then untouched), PYS_E_NOTFOUND
 * for a process without one (kernel thread, zombie). */
int plat_proc_exe(pid_t pid, char *buf, size_t len);

/* Descendants of pid (children only unless recursive), breadth first, at
 * most max of them into out. Returns how many, or a negative code. */
int plat_proc_children(pid_t pid, int recursive, pid_t *out, size_t max);
/* Does process pid share its parent's address space: a child of vfork (or
 * of clone with CLONE_VM) before its exec, whose memory is its parent's?
 * 1 or 0 (0 too where the kernel cannot tell: no kcmp, or not allowed);
 * PYS_E_NOPROC if it is gone. */
int plat_proc_shares_parent_vm(pid_t pid);

/* When process pid started, in ns since boot (CLOCK_BOOTTIME's origin:
 * its starttime in /proc/PID/stat); 0 if unknown. */
uint64_t plat_proc_started_ns(pid_t pid);

/* errno of a failed open, read or readlink under /proc/PID as a PYS_E_*
 * code (for the platform layer's own files). ENOENT means "no such process"
 * only if /proc/PID itself is gone, else PYS_E_NOTFOUND. */
int plat_proc_errno(pid_t pid, int err);

/* Kernel scheduler state letter of thread tid ('R', 'S', 'D', ...) from
 * /proc/PID/task/TID/stat, as a positive int; negative code if unreadable
 * (PYS_E_NOPROC: no such process, PYS_E_NOTFOUND: no such thread). */
int plat_task_state(pid_t pid, pid_t tid);

/*
 * Thread ids of a process that may run in another PID namespace. The
 * interpreter knows its threads by their ids in its own namespace; /proc
 * (and so plat_task_state) by those of the namespace of the /proc mounted
 * here, the host's. A process in that same namespace needs no mapping and
 * costs nothing; otherwise the pairs are cached, and read again when an id
 * is not found (only new tasks' files; an id still missing, at most once a
 * millisecond).
 */
struct plat_tid_pair {
    pid_t ns, host;
};
#define PLAT_TIDS_MISSED 4
struct plat_tids {
    pid_t pid;
    int translate;           /* the process's namespace is not /proc's */
    struct plat_tid_pair *v; /* sorted by ns */
    size_t n;
    uint64_t refreshed_ns;          /* plat_clock_ns() of the last read of the task list */
    pid_t missed[PLAT_TIDS_MISSED]; /* ids it did not find, since refreshed_ns */
    size_t nmissed;
};
/* Find out whether pid's threads need mapping. 0, or PYS_E_NOPROC, ... */
int plat_tids_init(struct plat_tids *t, pid_t pid);
void plat_tids_release(struct plat_tids *t);
/* The id in /proc of the thread the process itself calls tid: 0 and *host,
 * or PYS_E_NOTFOUND (no such thread now, or not yet looked for again). */
int plat_tids_host(struct plat_tids *t, pid_t tid, pid_t *host);
/* The thread the cache gave for tid is gone (its id may have been reused
 * in the namespace): look it up again next time. */
void plat_tids_forget(struct plat_tids *t, pid_t tid);

/*
 * Has the process replaced its program (exec) since plat_program_open?
 * The handle holds /proc/PID/mem, bound to the address space it was opened
 * on (fd -1 where it may not be opened: then the executable's device and
 * inode are compared, which miss an exec of the same file).
 */
struct plat_program {
    pid_t pid;
    int fd;
    int have_exe;      /* dev and ino are known */
    uint64_t dev, ino; /* of /proc/PID/exe at open */
};
/* 0, or PYS_E_NOPROC, PYS_E_PERM... when neither can be had. */
int plat_program_open(pid_t pid, struct plat_program *p);
/* 1: the same program still runs; 0: the process exec'd another or exited
 * (plat_proc_check tells which); negative code when it cannot tell. addr is
 * an address mapped in the program (one byte is read from it). */
int plat_program_same(const struct plat_program *p, uint64_t addr);
void plat_program_close(struct plat_program *p);

/* Copy len bytes at addr in the target to buf. PYS_E_BADADDR for an
 * unmapped address or a short read, PYS_E_EXITED if the process is gone
 * (or never existed), PYS_E_PERM without ptrace rights. buf may be partly
 * written on failure. len is limited to 1 GiB (PYS_E_INVAL above). */
int plat_mem_read(pid_t pid, uint64_t addr, void *buf, size_t len);

/* Write len bytes at addr in the target (process_vm_writev); errors as
 * plat_mem_read. The only write pystrobe makes is the frame cache anchor. */
int plat_mem_write(pid_t pid, uint64_t addr, const void *buf, size_t len);

/* Many reads in one system call (process_vm_readv with up to IOV_MAX
 * remote iovecs per call). Returns the number of segments read completely,
 * in order (a segment after a failed one is not read; its buffer may be
 * partly written), or a negative code if none: PYS_E_BADADDR when the first
 * segment is unreadable or only partly readable. */
struct plat_seg {
    uint64_t addr;
    void *buf;
    size_t len;
};
int plat_mem_readv(pid_t pid, const struct plat_seg *segs, size_t n);

/* Nanoseconds on a monotonic clock (CLOCK_MONOTONIC), for telling how long
 * a read took. */
uint64_t plat_clock_ns(void);

/*
 * Stopping every thread of a process (ptstop.c, for --blocking): each
 * plat_stop_all seizes and interrupts every thread, including those
 * started while it stops the others, and waits until all are stopped;
 * plat_resume_all detaches from them all (handing back any signal that
 * arrived meanwhile). Nothing stays attached in between.
 */
struct plat_stopped {
    pid_t tid;
    int sig;     /* signal to deliver at the detach (0: none) */
    int stopped; /* seen stopped */
};
struct plat_stopper {
    pid_t pid;
    struct plat_stopped *v; /* the threads stopped now */
    size_t n, cap;
    char err[256]; /* why the last plat_stop_all failed */
};
void plat_stopper_init(struct plat_stopper *st, pid_t pid);
/* Resumes what is stopped and frees. */
void plat_stopper_release(struct plat_stopper *st);
/* 0 with every thread stopped; else nothing is left stopped and the code
 * says why (st->err the detail): PYS_E_PERM, a thread could not be seized
 * (another tracer, permission); PYS_E_EXITED, the process is gone;
 * PYS_E_CORRUPT, threads started faster than they could be stopped. */
int plat_stop_all(struct plat_stopper *st);
void plat_resume_all(struct plat_stopper *st);
/* Let stopped thread tid run `steps` machine instructions (PTRACE_SINGLESTEP)
 * and stop again; a step into a blocking system call is cut short after
 * 2 ms by an interrupt. PYS_E_NOTFOUND if tid is not stopped here,
 * PYS_E_EXITED if it is gone. */
int plat_stop_step(struct plat_stopper *st, pid_t tid, unsigned steps);

/* --- native stacks (unwind.c, elfutils' libdwfl) -------------------------- */

struct plat_unwinder;
/* An unwinder of process pid, with its modules as mapped now. PYS_E_NOMEM,
 * PYS_E_EXITED, PYS_E_IO. */
int plat_unwinder_new(pid_t pid, struct plat_unwinder **out);
/* Opens the file a process mapped as path (as it named it): an fd (the
 * caller's to close), or a negative code if it cannot be had. */
typedef int (*plat_path_opener)(void *ctx, const char *path);
/* An unwinder of the threads of a core file (the kernel's or gcore's):
 * their registers from its notes, their memory from it, each module's
 * file opened by open_path (ctx: its context, which must outlive the
 * unwinder), else found by build id in the debug directories.
 * PYS_E_NOMEM, PYS_E_IO (detail in *err). */
int plat_unwinder_new_core(const char *core_path, plat_path_opener open_path, void *ctx,
                           struct plat_unwinder **out, char *err, size_t errlen);
void plat_unwinder_free(struct plat_unwinder *u);
/* Why the last call failed. */
const char *plat_unwinder_error(const struct plat_unwinder *u);
/* Read the modules again (the process mapped or unmapped files);
 * PYS_E_INVAL for a core's, whose modules never change. */
int plat_unwinder_refresh(struct plat_unwinder *u);
/* The native stack of thread tid (a host id), which this thread must hold
 * ptrace-stopped (or a thread of the core): up to max addresses into pcs, innermost first, each the
 * instruction executing or the call a frame returns to (return address - 1),
 * and each frame's stack pointer into sps (0 unknown; a frame's own stack
 * lies from its sp up to its caller's), *n how many. PYS_E_PERM,
 * PYS_E_EXITED, PYS_E_IO (detail: plat_unwinder_error). */
int plat_unwind_thread(struct plat_unwinder *u, pid_t tid, uint64_t *pcs, uint64_t *sps, size_t max,
                       size_t *n);

/* What an address is. Strings are the unwinder's, valid until it is freed
 * or refreshed; NULL where unknown. */
struct plat_symbol {
    const char *name;       /* the function's symbol */
    uint64_t offset;        /* pc - the symbol's start */
    const char *module;     /* the module's path as the process maps it */
    uint64_t module_offset; /* pc - the module's load address */
    const char *file;       /* source file, from DWARF line tables */
    int line;               /* its line, -1 unknown */
};
/* PYS_E_NOTFOUND for an address in no module. */
int plat_unwind_symbol(struct plat_unwinder *u, uint64_t pc, struct plat_symbol *out);

#endif
