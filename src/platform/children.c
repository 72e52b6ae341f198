/*
 * children: the descendants of a process. The kernel lists each thread's
 * children in /proc/PID/task/TID/children (a forked child belongs to the
 * thread that forked it), which costs a few reads per process; where the
 * kernel lacks those files, every /proc/N/stat's parent id is read instead.
 * Neither finds a descendant whose parent exited (it is re-parented to init
 * or a subreaper).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/kcmp.h>

#include <pystrobe/pystrobe.h>

#include "platform/platform.h"

/* The threads of one process read for their children at most: a bound on
 * the work for one process, far above what a program that forks has. */
#define MAX_TASKS 4096

/* Append the pids in the text of one children file (space-separated) to
 * out[*n..max). */
static void add_pids(const char *text, pid_t *out, size_t *n, size_t max)
{
    const char *p = text;
    while (*n < max) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        if (v > 0 && v <= 0x7fffffff)
            out[(*n)++] = (pid_t)v;
        p = end;
    }
}

/* The children of pid from its threads' children files, appended to
 * out[*n..max). 0, or PYS_E_NOPROC if the process is gone. */
static int task_children(pid_t pid, pid_t *out, size_t *n, size_t max)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return PYS_E_NOPROC;
    int tasks = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && tasks < MAX_TASKS) {
        char *end;
        long tid = strtol(e->d_name, &end, 10);
        if (*end != '\0' || tid <= 0)
            continue;
        tasks++;
        snprintf(path, sizeof path, "/proc/%d/task/%ld/children", (int)pid, tid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue; /* the thread ended meanwhile */
        char buf[4096];
        ssize_t len = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (len <= 0)
            continue;
        buf[len] = '\0';
        /* A list longer than the buffer is cut at its last whole pid. */
        if ((size_t)len == sizeof buf - 1) {
            char *sp = strrchr(buf, ' ');
            if (sp)
                *sp = '\0';
        }
        add_pids(buf, out, n, max);
    }
    closedir(d);
    return 0;
}

/* The parent of pid, or -1. The comm field may hold spaces and ')'. */
static int parent_of(int pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *close = strrchr(buf, ')');
    int ppid;
    char state;
    if (!close || sscanf(close + 1, " %c %d", &state, &ppid) != 2)
        return -1;
    return ppid;
}

/* plat_proc_children from every process's parent id. */
static int scan_children(pid_t pid, int recursive, pid_t *out, size_t max)
{
    /* Snapshot every (pid, ppid) pair, then collect level by level. */
    size_t n = 0, cap = 1024;
    int(*pairs)[2] = malloc(cap * sizeof *pairs);
    DIR *d = opendir("/proc");
    int rc = PYS_E_NOMEM;
    if (!pairs)
        goto done;
    rc = PYS_E_IO;
    if (!d)
        goto done;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long p = strtol(e->d_name, &end, 10);
        if (*end != '\0' || p <= 0)
            continue;
        int pp = parent_of((int)p);
        if (pp < 0)
            continue;
        if (n == cap) {
            void *np = realloc(pairs, 2 * cap * sizeof *pairs);
            rc = PYS_E_NOMEM;
            if (!np)
                goto done;
            pairs = np;
            cap *= 2;
        }
        pairs[n][0] = (int)p;
        pairs[n][1] = pp;
        n++;
    }
    size_t found = 0, scanned = 0;
    pid_t parent = pid;
    for (;;) {
        for (size_t i = 0; i < n; i++) {
            if (pairs[i][1] == parent && found < max)
                out[found++] = pairs[i][0];
        }
        if (!recursive || scanned >= found)
            break;
        parent = out[scanned++];
    }
    rc = (int)found;
done:
    if (d)
        closedir(d);
    free(pairs);
    return rc;
}

int plat_proc_children(pid_t pid, int recursive, pid_t *out, size_t max)
{
    /* The kernel has the children files with CONFIG_PROC_CHILDREN. */
    if (access("/proc/thread-self/children", F_OK) != 0)
        return scan_children(pid, recursive, out, max);
    size_t found = 0, scanned = 0;
    pid_t parent = pid;
    for (;;) {
        task_children(parent, out, &found, max);
        if (!recursive || scanned >= found)
            break;
        parent = out[scanned++];
    }
    return (int)found;
}

int plat_proc_shares_parent_vm(pid_t pid)
{
    int ppid = parent_of((int)pid);
    if (ppid < 0)
        return PYS_E_NOPROC;
    if (ppid == 0)
        return 0;
    /* 0: the same address space. A kernel without kcmp, or one that will
     * not compare (permission), tells nothing: taken as its own. */
    return syscall(SYS_kcmp, (pid_t)pid, (pid_t)ppid, KCMP_VM, 0UL, 0UL) == 0;
}
