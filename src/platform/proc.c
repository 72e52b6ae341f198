/*
 * proc: another process's liveness, executable and threads' scheduler state
 * from /proc, and its memory with process_vm_readv. Nothing is written to
 * the target and it is never stopped.
 *
 * OS errors become PYS_E_* codes here: for /proc files a missing /proc/PID is
 * PYS_E_NOPROC; for memory reads ESRCH is PYS_E_EXITED (the caller attached,
 * so a process that is gone has exited), EPERM/EACCES is PYS_E_PERM and
 * EFAULT or a short read is PYS_E_BADADDR.
 */
#include "platform/platform.h"

#include <pystrobe/pystrobe.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* The kernel cuts one transfer at MAX_RW_COUNT (2 GiB less a page) without
 * saying so; no read of pystrobe comes near this, so larger requests are
 * refused rather than split. */
#define MEM_MAX_BYTES ((size_t)1 << 30)

int plat_proc_errno(pid_t pid, int err)
{
    char dir[32];

    switch (err) {
    case ESRCH:
        return PYS_E_NOPROC;
    case ENOENT:
        snprintf(dir, sizeof(dir), "/proc/%d", (int)pid);
        if (access(dir, F_OK) < 0 && errno == ENOENT)
            return PYS_E_NOPROC;
        return PYS_E_NOTFOUND;
    case EACCES:
    case EPERM:
        return PYS_E_PERM;
    case ENOMEM:
        return PYS_E_NOMEM;
    default:
        return PYS_E_IO;
    }
}

static int mem_errno(int err)
{
    switch (err) {
    case ESRCH:
        return PYS_E_EXITED;
    case EPERM:
    case EACCES:
        return PYS_E_PERM;
    case EFAULT:
        return PYS_E_BADADDR;
    case ENOMEM:
        return PYS_E_NOMEM;
    case EINVAL:
        return PYS_E_INVAL;
    default:
        return PYS_E_IO;
    }
}

/* Read up to cap - 1 bytes of a small /proc file and NUL-terminate them.
 * Returns the length or a negative PYS_E_* code. */
static long read_small(pid_t pid, const char *path, char *buf, size_t cap)
{
    size_t len = 0;
    int fd = -1;
    long rc;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = plat_proc_errno(pid, errno);
        goto out;
    }
    while (len < cap - 1) {
        ssize_t r = read(fd, buf + len, cap - 1 - len);

        if (r < 0) {
            if (errno == EINTR)
                continue;
            rc = plat_proc_errno(pid, errno);
            goto out;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    buf[len] = '\0';
    rc = (long)len;
out:
    if (fd >= 0)
        close(fd);
    return rc;
}

/* Value of a "Key:\tvalue" line of /proc/PID/status as a non-negative
 * number, or -1. */
static long status_number(const char *line, const char *key)
{
    size_t k = strlen(key);
    const char *p;
    char *end = NULL;
    long v;

    if (strncmp(line, key, k) != 0 || line[k] != ':')
        return -1;
    p = line + k + 1;
    errno = 0;
    v = strtol(p, &end, 10);
    if (errno != 0 || end == p || v < 0)
        return -1;
    return v;
}

/*
 * From /proc/PID/status: State, Tgid and Threads. A thread id that is not a
 * thread group id also has a (hidden) /proc entry; it is not a process, so it
 * gives PYS_E_NOPROC. A thread group leader that called pthread_exit stays a
 * zombie while its other threads run; the process is alive then, which
 * Threads (the live threads plus the unreaped leader) tells apart.
 */
int plat_proc_check(pid_t pid)
{
    char path[48];
    FILE *f = NULL;
    char *line = NULL;
    size_t cap = 0;
    char state = 0;
    long tgid = -1, threads = -1;
    int rc;

    if (pid <= 0)
        return PYS_E_INVAL;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "re");
    if (f == NULL) {
        rc = plat_proc_errno(pid, errno);
        if (rc == PYS_E_NOTFOUND)
            rc = PYS_E_NOPROC;
        goto out;
    }
    /* getline copes with arbitrarily long lines (Groups: can list 65536
     * groups); the loop ends at EOF, bounded by the file. */
    for (;;) {
        long v;

        errno = 0;
        if (getline(&line, &cap, f) < 0) {
            if (ferror(f)) {
                rc = errno != 0 ? plat_proc_errno(pid, errno) : PYS_E_IO;
                if (rc == PYS_E_NOTFOUND)
                    rc = PYS_E_NOPROC;
                goto out;
            }
            break;
        }
        if (strncmp(line, "State:", 6) == 0) {
            const char *p = line + 6;

            while (*p == ' ' || *p == '\t')
                p++;
            state = *p;
        } else if ((v = status_number(line, "Tgid")) >= 0) {
            tgid = v;
        } else if ((v = status_number(line, "Threads")) >= 0) {
            threads = v;
        }
    }
    if (state == 0 || state == '\n') {
        rc = PYS_E_CORRUPT;
        goto out;
    }
    if (tgid >= 0 && tgid != (long)pid) {
        rc = PYS_E_NOPROC;
        goto out;
    }
    if ((state == 'Z' || state == 'X') && threads <= 1)
        rc = PYS_E_EXITED;
    else
        rc = 0;
out:
    free(line);
    if (f != NULL)
        fclose(f);
    return rc;
}

int plat_proc_exe(pid_t pid, char *buf, size_t len)
{
    char path[48];
    char target[PATH_MAX];
    ssize_t r;

    if (pid <= 0 || buf == NULL || len == 0)
        return PYS_E_INVAL;
    snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
    /* Not read into buf directly: buf is written only on success. */
    r = readlink(path, target, sizeof(target));
    if (r < 0)
        return plat_proc_errno(pid, errno);
    /* The kernel fails a path longer than a page, so this is only a guard. */
    if ((size_t)r >= sizeof(target))
        return PYS_E_NOMEM;
    if ((size_t)r >= len)
        return PYS_E_INVAL;
    memcpy(buf, target, (size_t)r);
    buf[r] = '\0';
    return 0;
}

/*
 * /proc/PID/task/TID/stat is "TID (COMM) STATE ...". COMM is the thread's
 * name, which the thread sets itself and which may contain spaces and ')';
 * the fields after it are numbers, so the state follows the last ')'.
 */
int plat_task_state(pid_t pid, pid_t tid)
{
    char path[64];
    /* COMM is at most 64 bytes; the 50 numeric fields after it are not
     * needed, so a cut-off read is harmless. */
    char buf[512];
    const char *paren;
    long n;

    if (pid <= 0 || tid <= 0)
        return PYS_E_INVAL;
    snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    n = read_small(pid, path, buf, sizeof(buf));
    if (n < 0)
        return (int)n;
    paren = memrchr(buf, ')', (size_t)n);
    if (paren == NULL || (buf + n) - paren < 3 || paren[1] != ' ')
        return PYS_E_CORRUPT;
    if (!((paren[2] >= 'A' && paren[2] <= 'Z') || (paren[2] >= 'a' && paren[2] <= 'z')))
        return PYS_E_CORRUPT;
    return (unsigned char)paren[2];
}

/* One process_vm_readv or process_vm_writev of len bytes at addr. */
static int vm_rw(pid_t pid, uint64_t addr, void *buf, size_t len, int write)
{
    struct iovec local, remote;
    ssize_t r;

    if (pid <= 0 || (buf == NULL && len > 0) || len > MEM_MAX_BYTES)
        return PYS_E_INVAL;
    if (len == 0)
        return 0;
#if UINTPTR_MAX < UINT64_MAX
    if (addr > UINTPTR_MAX)
        return PYS_E_BADADDR;
#endif
    if (addr > UINT64_MAX - len)
        return PYS_E_BADADDR;
    local.iov_base = buf;
    local.iov_len = len;
    remote.iov_base = (void *)(uintptr_t)addr;
    remote.iov_len = len;
    r = write ? process_vm_writev(pid, &local, 1, &remote, 1, 0)
              : process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (r < 0)
        return mem_errno(errno);
    if ((size_t)r != len)
        return PYS_E_BADADDR;
    return 0;
}

uint64_t plat_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int plat_mem_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
    return vm_rw(pid, addr, buf, len, 0);
}

int plat_mem_write(pid_t pid, uint64_t addr, const void *buf, size_t len)
{
    return vm_rw(pid, addr, (void *)(uintptr_t)buf, len, 1);
}

/*
 * Segments go to the kernel in batches of up to IOV_MAX (the most one
 * process_vm_readv accepts) and MEM_MAX_BYTES; a sample's reads fit in one
 * batch. The kernel stops at the first remote iovec it cannot read and
 * reports the bytes copied, so the segments complete are those whose
 * lengths fit, in order, in that count. Zero-length segments are not sent;
 * they count as read when every segment before them was.
 */
int plat_mem_readv(pid_t pid, const struct plat_seg *segs, size_t n)
{
    /* 2 * IOV_MAX iovecs: 32 KiB of stack, to keep the hot path free of
     * allocation. */
    struct iovec local[IOV_MAX], remote[IOV_MAX];
    size_t limit = n, done = 0;

    if (pid <= 0 || (segs == NULL && n > 0) || n > INT_MAX)
        return PYS_E_INVAL;
    for (size_t i = 0; i < n; i++) {
        if ((segs[i].buf == NULL && segs[i].len > 0) || segs[i].len > MEM_MAX_BYTES)
            return PYS_E_INVAL;
    }
    /* A segment that wraps around the address space, or that a pointer
     * cannot hold, fails; those after it are not read. */
    for (size_t i = 0; i < n; i++) {
        int bad = segs[i].addr > UINT64_MAX - segs[i].len;
#if UINTPTR_MAX < UINT64_MAX
        bad = bad || segs[i].addr + segs[i].len > UINTPTR_MAX;
#endif
        if (bad) {
            limit = i;
            break;
        }
    }
    while (done < limit) {
        size_t end = done, niov = 0, total = 0, got = 0;

        while (end < limit && niov < IOV_MAX && segs[end].len <= MEM_MAX_BYTES - total) {
            if (segs[end].len > 0) {
                local[niov].iov_base = segs[end].buf;
                local[niov].iov_len = segs[end].len;
                remote[niov].iov_base = (void *)(uintptr_t)segs[end].addr;
                remote[niov].iov_len = segs[end].len;
                total += segs[end].len;
                niov++;
            }
            end++;
        }
        if (niov > 0) {
            ssize_t r = process_vm_readv(pid, local, niov, remote, niov, 0);

            if (r < 0) {
                /* EFAULT: the first segment sent was unreadable. */
                if (errno != EFAULT)
                    return done > 0 ? (int)done : mem_errno(errno);
                r = 0;
            }
            got = (size_t)r;
        }
        while (done < end && segs[done].len <= got) {
            got -= segs[done].len;
            done++;
        }
        if (done < end)
            break;
    }
    if (done == 0 && n > 0)
        return PYS_E_BADADDR;
    return (int)done;
}

uint64_t plat_proc_started_ns(pid_t pid)
{
    char path[64], buf[1024];
    unsigned long long ticks;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *s = strrchr(buf, ')'); /* the name may hold anything */
    long hz = sysconf(_SC_CLK_TCK);
    /* Fields from the state (3rd) on; starttime is the 22nd. */
    if (!s || hz <= 0 ||
        sscanf(s + 1,
               " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
               "%*d %*d %*d %llu",
               &ticks) != 1)
        return 0;
    return (uint64_t)ticks * (1000000000ull / (uint64_t)hz);
}
