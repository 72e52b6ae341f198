/*
 * unwind: a stopped thread's native (C) stack, and the symbol of each of its
 * addresses, through elfutils' libdwfl: the modules come from the process's
 * maps (their files opened as the target sees them, through /proc/PID/root,
 * so a target in a chroot or container is read from its own files), the
 * frames from the thread's registers and the modules' CFI (.eh_frame,
 * .debug_frame), else frame pointers. libdwfl reads registers with ptrace
 * and memory with process_vm_readv: the thread must be ptrace-stopped by the
 * calling thread (plat_stop_all).
 *
 * A core file's threads unwind the same way, their registers taken from
 * its notes and their memory from its segments; its modules are those its
 * NT_FILE note and the dynamic linker's list name, each file opened by the
 * caller's opener (which knows where the process's files are and whether
 * they are still the ones it mapped).
 */
#include "platform/platform.h"

#include <elfutils/libdwfl.h>
#include <errno.h>
#include <libelf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pystrobe/pystrobe.h>

/* The stack pointer's DWARF register number (x86-64's rsp). */
#define DWARF_REG_SP 7

struct plat_unwinder {
    pid_t pid; /* 0: a core file's */
    Dwfl *dwfl;
    Dwfl_Callbacks cb;
    char *debuginfo_path;
    int attached; /* dwfl_linux_proc_attach or dwfl_core_file_attach done */
    int core_fd;  /* a core's: its file and ELF handle, and the files' opener */
    Elf *core_elf;
    plat_path_opener open_path;
    void *open_ctx;
    char err[256];
};

/* libdwfl's find_elf callback has no context of ours: the unwinder whose
 * modules are opened, set around every libdwfl call that may open a module
 * (reporting, unwinding, symbols). */
static _Thread_local const struct plat_unwinder *active;

/* A core's module: the file its opener gives, else one of the same build
 * id from the debug directories (libdwfl checks the id). */
static int find_core_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
                         char **file_name, Elf **elfp)
{
    if (name && name[0] == '/') {
        int fd = active->open_path(active->open_ctx, name);
        if (fd >= 0) {
            *file_name = strdup(name);
            return fd;
        }
    }
    return dwfl_build_id_find_elf(mod, userdata, name, base, file_name, elfp);
}

/* A module's file as the target sees it: /proc/PID/root/NAME (the same
 * file for a target in the host's root), else as libdwfl would open it. */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
                    char **file_name, Elf **elfp)
{
    if (active && active->open_path)
        return find_core_elf(mod, userdata, name, base, file_name, elfp);
    pid_t pid = active ? active->pid : 0;
    if (pid > 0 && name && name[0] == '/') {
        char path[4096];
        int n = snprintf(path, sizeof path, "/proc/%d/root%s", (int)pid, name);
        if (n > 0 && (size_t)n < sizeof path) {
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd >= 0) {
                *file_name = strdup(path);
                return fd;
            }
        }
    }
    return dwfl_linux_proc_find_elf(mod, userdata, name, base, file_name, elfp);
}

/* The modules, from the maps as they are now. */
static int report(struct plat_unwinder *u)
{
    dwfl_report_begin(u->dwfl);
    int rc = dwfl_linux_proc_report(u->dwfl, u->pid);
    if (dwfl_report_end(u->dwfl, NULL, NULL) != 0 || rc != 0) {
        snprintf(u->err, sizeof u->err, "reading the modules of process %d: %s", (int)u->pid,
                 rc > 0 ? strerror(rc) : dwfl_errmsg(-1));
        return rc == ENOENT || rc == ESRCH ? PYS_E_EXITED : PYS_E_IO;
    }
    return 0;
}

/* A new unwinder whose libdwfl session finds modules with find_elf. */
static struct plat_unwinder *unwinder_new(pid_t pid)
{
    struct plat_unwinder *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    u->pid = pid;
    u->core_fd = -1;
    u->debuginfo_path = NULL; /* libdwfl's default: /usr/lib/debug, build ids */
    u->cb.find_elf = find_elf;
    u->cb.find_debuginfo = dwfl_standard_find_debuginfo;
    u->cb.debuginfo_path = &u->debuginfo_path;
    u->dwfl = dwfl_begin(&u->cb);
    if (!u->dwfl) {
        free(u);
        return NULL;
    }
    return u;
}

int plat_unwinder_new(pid_t pid, struct plat_unwinder **out)
{
    struct plat_unwinder *u = unwinder_new(pid);
    if (!u)
        return PYS_E_NOMEM;
    active = u;
    int rc = report(u);
    active = NULL;
    if (rc < 0) {
        plat_unwinder_free(u);
        return rc;
    }
    *out = u;
    return 0;
}

/* The core's modules and threads into u's libdwfl session. */
static int core_report(struct plat_unwinder *u, const char *core_path)
{
    u->core_fd = open(core_path, O_RDONLY | O_CLOEXEC);
    if (u->core_fd < 0) {
        snprintf(u->err, sizeof u->err, "%s: %s", core_path, strerror(errno));
        return PYS_E_IO;
    }
    elf_version(EV_CURRENT);
    u->core_elf = elf_begin(u->core_fd, ELF_C_READ_MMAP, NULL);
    if (!u->core_elf) {
        snprintf(u->err, sizeof u->err, "%s: %s", core_path, elf_errmsg(-1));
        return PYS_E_IO;
    }
    dwfl_report_begin(u->dwfl);
    int n = dwfl_core_file_report(u->dwfl, u->core_elf, NULL);
    if (dwfl_report_end(u->dwfl, NULL, NULL) != 0 || n < 0) {
        snprintf(u->err, sizeof u->err, "reading the modules of core %s: %s", core_path,
                 dwfl_errmsg(-1));
        return PYS_E_IO;
    }
    if (dwfl_core_file_attach(u->dwfl, u->core_elf) < 0) {
        snprintf(u->err, sizeof u->err, "reading the threads of core %s: %s", core_path,
                 dwfl_errmsg(-1));
        return PYS_E_IO;
    }
    u->attached = 1;
    return 0;
}

int plat_unwinder_new_core(const char *core_path, plat_path_opener open_path, void *ctx,
                           struct plat_unwinder **out, char *err, size_t errlen)
{
    struct plat_unwinder *u = unwinder_new(0);
    if (!u)
        return PYS_E_NOMEM;
    u->open_path = open_path;
    u->open_ctx = ctx;
    active = u;
    int rc = core_report(u, core_path);
    active = NULL;
    if (rc < 0) {
        snprintf(err, errlen, "%s", u->err);
        plat_unwinder_free(u);
        return rc;
    }
    *out = u;
    return 0;
}

void plat_unwinder_free(struct plat_unwinder *u)
{
    if (!u)
        return;
    if (u->dwfl)
        dwfl_end(u->dwfl);
    if (u->core_elf)
        elf_end(u->core_elf);
    if (u->core_fd >= 0)
        close(u->core_fd);
    free(u);
}

const char *plat_unwinder_error(const struct plat_unwinder *u)
{
    return u->err;
}

int plat_unwinder_refresh(struct plat_unwinder *u)
{
    if (u->pid == 0)
        return PYS_E_INVAL; /* a core's modules never change */
    active = u;
    int rc = report(u);
    active = NULL;
    return rc;
}

struct walk {
    uint64_t *pcs, *sps;
    size_t n, max;
    pid_t tid; /* a core's: the thread wanted */
    int found; /* it was met */
    int rc;    /* dwfl_thread_getframes' answer for it */
};

static int on_frame(Dwfl_Frame *state, void *arg)
{
    struct walk *w = arg;
    Dwarf_Addr pc;
    bool activation;
    if (!dwfl_frame_pc(state, &pc, &activation))
        return DWARF_CB_ABORT;
    /* A return address points after the call: the call is the byte before. */
    Dwarf_Word sp = 0;
    if (dwfl_frame_reg(state, DWARF_REG_SP, &sp) != 0)
        sp = 0;
    w->sps[w->n] = sp;
    w->pcs[w->n++] = activation ? pc : pc - 1;
    return w->n == w->max ? DWARF_CB_ABORT : DWARF_CB_OK;
}

static int core_thread_cb(Dwfl_Thread *thread, void *arg)
{
    struct walk *w = arg;
    if (!w->found && dwfl_thread_tid(thread) == w->tid) {
        w->found = 1;
        w->rc = dwfl_thread_getframes(thread, on_frame, w);
    }
    return DWARF_CB_OK;
}

/* A core's thread w->tid, unwound into w. Every thread is visited:
 * libdwfl's core reader keeps its place in the notes in memory it frees
 * only at their end, which a search that stops early (as
 * dwfl_getthread_frames's does) would leak. */
static int core_thread_frames(struct plat_unwinder *u, struct walk *w)
{
    if (dwfl_getthreads(u->dwfl, core_thread_cb, w) != 0 || !w->found)
        return -1;
    return w->rc;
}

int plat_unwind_thread(struct plat_unwinder *u, pid_t tid, uint64_t *pcs, uint64_t *sps, size_t max,
                       size_t *n)
{
    if (max == 0)
        return PYS_E_INVAL;
    active = u;
    if (!u->attached) {
        /* The threads are ptrace-stopped by this thread already
         * (plat_stop_all): libdwfl neither attaches nor detaches. */
        int err = dwfl_linux_proc_attach(u->dwfl, u->pid, true);
        if (err != 0) {
            active = NULL;
            snprintf(u->err, sizeof u->err, "unwinding process %d: %s", (int)u->pid,
                     err > 0 ? strerror(err) : dwfl_errmsg(-1));
            return err == EPERM || err == EACCES   ? PYS_E_PERM
                   : err == ESRCH || err == ENOENT ? PYS_E_EXITED
                                                   : PYS_E_IO;
        }
        u->attached = 1;
    }
    struct walk w = {pcs, sps, 0, max, tid, 0, 0};
    int rc =
        u->pid == 0 ? core_thread_frames(u, &w) : dwfl_getthread_frames(u->dwfl, tid, on_frame, &w);
    active = NULL;
    /* rc != 0 also ends every stack whose outermost frame has no caller
     * libdwfl can find (the usual end, _start or clone3): what was walked
     * is the stack. Only no frame at all is a failure. */
    if (w.n == 0) {
        int e = rc != 0 ? dwfl_errno() : 0;
        snprintf(u->err, sizeof u->err, "unwinding thread %d: %s", (int)tid,
                 e ? dwfl_errmsg(e) : "no frames");
        return errno == ESRCH ? PYS_E_EXITED : PYS_E_IO;
    }
    *n = w.n;
    return 0;
}

int plat_unwind_symbol(struct plat_unwinder *u, uint64_t pc, struct plat_symbol *out)
{
    memset(out, 0, sizeof *out);
    out->line = -1;
    active = u;
    Dwfl_Module *mod = dwfl_addrmodule(u->dwfl, pc);
    if (!mod) {
        active = NULL;
        return PYS_E_NOTFOUND;
    }
    const char *mainfile = NULL;
    Dwarf_Addr start = 0;
    const char *modname = dwfl_module_info(mod, NULL, &start, NULL, NULL, NULL, &mainfile, NULL);
    out->module = modname;
    out->module_offset = pc - start;
    GElf_Off off = 0;
    GElf_Sym sym;
    out->name = dwfl_module_addrinfo(mod, pc, &off, &sym, NULL, NULL, NULL);
    out->offset = off;
    Dwfl_Line *line = dwfl_module_getsrc(mod, pc);
    if (line) {
        int lineno = 0;
        const char *src = dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL);
        if (src && lineno > 0) {
            out->file = src;
            out->line = lineno;
        }
    }
    active = NULL;
    return 0;
}
