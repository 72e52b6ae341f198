/*
 * program: has a process replaced its program (exec) since pystrobe looked?
 *
 * An exec keeps the pid, the start time and often the executable (a Python
 * that execs Python), but gives the process a new address space. A file
 * descriptor on /proc/PID/mem is bound to the address space it was opened
 * on: once an exec (or the exit) has dropped that one, reads through it
 * return 0 bytes. Where /proc/PID/mem cannot be opened, the executable's
 * device and inode stand in, which tell an exec of another file only.
 */
#include "platform/platform.h"

#include <pystrobe/pystrobe.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static int exe_identity(pid_t pid, uint64_t *dev, uint64_t *ino)
{
    char path[48];
    struct stat st;

    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    if (stat(path, &st) < 0)
        return plat_proc_errno(pid, errno);
    *dev = (uint64_t)st.st_dev;
    *ino = (uint64_t)st.st_ino;
    return 0;
}

int plat_program_open(pid_t pid, struct plat_program *p)
{
    char path[48];
    uint64_t dev = 0, ino = 0;
    int rc;

    if (pid <= 0)
        return PYS_E_INVAL;
    rc = exe_identity(pid, &dev, &ino);
    snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && rc < 0)
        return rc;
    p->pid = pid;
    p->fd = fd;
    p->have_exe = rc == 0;
    p->dev = dev;
    p->ino = ino;
    return 0;
}

int plat_program_same(const struct plat_program *p, uint64_t addr)
{
    uint64_t dev, ino;
    int rc;

    if (p->fd >= 0 && addr <= (uint64_t)INT64_MAX) {
        unsigned char byte;
        ssize_t r = pread(p->fd, &byte, 1, (off_t)addr);
        if (r == 1)
            return 1;
        if (r == 0)
            return 0;
        /* EIO: addr is not mapped in that address space, which is still
         * there. Anything else: ask the executable. */
        if (errno == EIO)
            return 1;
    }
    if (!p->have_exe)
        return PYS_E_NOTFOUND;
    if ((rc = exe_identity(p->pid, &dev, &ino)) < 0)
        return rc == PYS_E_NOPROC || rc == PYS_E_NOTFOUND ? 0 : rc;
    return dev == p->dev && ino == p->ino;
}

void plat_program_close(struct plat_program *p)
{
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
}
