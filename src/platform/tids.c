/*
 * tids: the ids of a process's threads in pystrobe's view of /proc, for a
 * process that runs in another PID namespace (a container, `unshare -p`).
 *
 * The interpreter stores the id its thread has in its own namespace
 * (gettid() there); /proc/PID/task/ is named by the ids of the namespace of
 * the /proc pystrobe reads. /proc/PID/task/TID/status's NSpid line gives
 * both: its first field is the id in that /proc's namespace, its last the
 * id in the thread's innermost one. A process whose NSpid has one field runs
 * in /proc's own namespace and needs no mapping: no file is read for it.
 */
#include "platform/platform.h"

#include <pystrobe/pystrobe.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A lookup of an id that was missing from the last read of the task list
 * reads it again only this much later, so that a thread state whose thread
 * is gone costs at most one directory read a millisecond however fast the
 * sampling (PLAT_TIDS_MISSED + 1 with that many such thread states). */
#define TIDS_REFRESH_NS 1000000u
/* Pid namespaces nest at most 32 deep (the kernel's MAX_PID_NS_LEVEL). */
#define NSPID_MAX_FIELDS 33

/*
 * The NSpid ids of one task (or of the process, for tid 0): *host the
 * first, *ns the last, *levels how many. 0, or PYS_E_NOTFOUND (no such task,
 * or a kernel without NSpid), PYS_E_NOPROC, PYS_E_CORRUPT.
 */
static int read_nspid(pid_t pid, pid_t tid, pid_t *host, pid_t *ns, int *levels)
{
    char path[64], buf[4096];
    size_t len = 0;
    int fd, rc;

    if (tid > 0)
        snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)pid, (int)tid);
    else
        snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return plat_proc_errno(pid, errno);
    while (len < sizeof buf - 1) {
        ssize_t r = read(fd, buf + len, sizeof buf - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    buf[len] = '\0';
    const char *p = strstr(buf, "\nNSpid:");
    if (!p)
        return PYS_E_NOTFOUND;
    p += 7;
    long first = -1, last = -1;
    int n = 0;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\n' || *p == '\0')
            break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v <= 0 || v > INT32_MAX || ++n > NSPID_MAX_FIELDS)
            return PYS_E_CORRUPT;
        if (first < 0)
            first = v;
        last = v;
        p = end;
    }
    rc = n > 0 ? 0 : PYS_E_CORRUPT;
    if (rc == 0) {
        *host = (pid_t)first;
        *ns = (pid_t)last;
        *levels = n;
    }
    return rc;
}

int plat_tids_init(struct plat_tids *t, pid_t pid)
{
    pid_t host, ns;
    int levels, rc;

    memset(t, 0, sizeof *t);
    t->pid = pid;
    rc = read_nspid(pid, 0, &host, &ns, &levels);
    if (rc == PYS_E_NOTFOUND)
        return 0; /* no NSpid line: a kernel without pid namespaces' ids */
    if (rc < 0)
        return rc;
    t->translate = levels > 1;
    return 0;
}

void plat_tids_release(struct plat_tids *t)
{
    free(t->v);
    memset(t, 0, sizeof *t);
}

static int by_ns(const void *a, const void *b)
{
    pid_t x = ((const struct plat_tid_pair *)a)->ns, y = ((const struct plat_tid_pair *)b)->ns;
    return (x > y) - (x < y);
}

static const struct plat_tid_pair *find_ns(const struct plat_tids *t, pid_t ns)
{
    struct plat_tid_pair key = {ns, 0};
    return t->n ? bsearch(&key, t->v, t->n, sizeof *t->v, by_ns) : NULL;
}

static int by_host(const void *a, const void *b)
{
    pid_t x = ((const struct plat_tid_pair *)a)->host, y = ((const struct plat_tid_pair *)b)->host;
    return (x > y) - (x < y);
}

/* qsort, which must not be given the NULL of an empty array. */
static void sort_pairs(struct plat_tid_pair *v, size_t n, int (*cmp)(const void *, const void *))
{
    if (n > 1)
        qsort(v, n, sizeof *v, cmp);
}

/* Read the task list again: tasks already known keep their pair, new ones
 * have their status read, gone ones are dropped. */
static int refresh(struct plat_tids *t)
{
    char path[48];
    struct plat_tid_pair *nv = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;

    /* The known pairs by host id, to find those of tasks still there. */
    sort_pairs(t->v, t->n, by_host);
    snprintf(path, sizeof path, "/proc/%d/task", (int)t->pid);
    DIR *d = opendir(path);
    if (!d) {
        rc = plat_proc_errno(t->pid, errno);
        sort_pairs(t->v, t->n, by_ns);
        return rc;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long host = strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || host <= 0 || host > INT32_MAX)
            continue;
        struct plat_tid_pair pair = {0, (pid_t)host};
        const struct plat_tid_pair *old =
            t->n ? bsearch(&pair, t->v, t->n, sizeof *t->v, by_host) : NULL;
        if (old) {
            pair = *old;
        } else {
            pid_t h, ns;
            int levels;
            if (read_nspid(t->pid, (pid_t)host, &h, &ns, &levels) < 0)
                continue; /* gone meanwhile */
            pair.host = (pid_t)host;
            pair.ns = ns;
        }
        if (n == cap) {
            size_t ncap = cap ? 2 * cap : 16;
            struct plat_tid_pair *g = realloc(nv, ncap * sizeof *nv);
            if (!g) {
                rc = PYS_E_NOMEM;
                break;
            }
            nv = g;
            cap = ncap;
        }
        nv[n++] = pair;
    }
    closedir(d);
    if (rc < 0) {
        free(nv);
        sort_pairs(t->v, t->n, by_ns);
        return rc;
    }
    sort_pairs(nv, n, by_ns);
    free(t->v);
    t->v = nv;
    t->n = n;
    return 0;
}

int plat_tids_host(struct plat_tids *t, pid_t tid, pid_t *host)
{
    if (tid <= 0)
        return PYS_E_INVAL;
    if (!t->translate) {
        *host = tid;
        return 0;
    }
    const struct plat_tid_pair *p = find_ns(t, tid);
    if (!p) {
        /* A thread just started is looked for at once; one that was
         * missing from the last read of the list, a millisecond later. */
        uint64_t now = plat_clock_ns();
        int recent = t->refreshed_ns != 0 && now - t->refreshed_ns < TIDS_REFRESH_NS;
        if (!recent) {
            t->nmissed = 0;
        } else {
            if (t->nmissed == PLAT_TIDS_MISSED)
                return PYS_E_NOTFOUND;
            for (size_t i = 0; i < t->nmissed; i++)
                if (t->missed[i] == tid)
                    return PYS_E_NOTFOUND;
        }
        t->refreshed_ns = now;
        int rc = refresh(t);
        if (rc < 0)
            return rc;
        if (!(p = find_ns(t, tid))) {
            t->missed[t->nmissed++] = tid;
            return PYS_E_NOTFOUND;
        }
    }
    *host = p->host;
    return 0;
}

void plat_tids_forget(struct plat_tids *t, pid_t tid)
{
    struct plat_tid_pair *p = (struct plat_tid_pair *)find_ns(t, tid);
    if (!p)
        return;
    size_t i = (size_t)(p - t->v);
    memmove(p, p + 1, (t->n - i - 1) * sizeof *p);
    t->n--;
}
