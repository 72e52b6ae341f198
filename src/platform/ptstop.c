/*
 * ptstop: stop every thread of a process for a moment and let it go again
 * (--blocking), with ptrace: PTRACE_SEIZE and PTRACE_INTERRUPT on each
 * thread, a wait for each to stop, then PTRACE_DETACH. Nothing is left
 * attached between stops, so signals, job control and the target's own
 * children behave as without pystrobe while it runs.
 *
 * Threads are found in /proc/PID/task. A thread may create another before
 * it is stopped, so the list is read again once all threads found are
 * stopped, until a read finds no new one: then none runs that could create
 * one. A signal that arrives while a thread is seized stops it in a
 * signal-delivery-stop instead (also a stop); the signal is handed back at
 * the detach, so it is delivered as if nothing happened.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pystrobe/pystrobe.h>

#include "platform/platform.h"

/* Rounds of "read the task list, stop what is new": each round stops every
 * thread that existed when its list was read, so only threads started in
 * the meantime are left; a process starting threads faster than they can be
 * stopped for this many rounds is reported. */
#define STOP_ROUNDS 64
/* Threads stopped at once: CPY_MAX_THREADS' order. */
#define STOP_MAX_THREADS 65536

static int seen(const struct plat_stopper *st, pid_t tid)
{
    for (size_t i = 0; i < st->n; i++)
        if (st->v[i].tid == tid)
            return 1;
    return 0;
}

static int push(struct plat_stopper *st, pid_t tid)
{
    if (st->n == st->cap) {
        size_t cap = st->cap ? 2 * st->cap : 16;
        if (cap > STOP_MAX_THREADS)
            return PYS_E_TOODEEP;
        void *v = realloc(st->v, cap * sizeof *st->v);
        if (!v)
            return PYS_E_NOMEM;
        st->v = v;
        st->cap = cap;
    }
    st->v[st->n].tid = tid;
    st->v[st->n].sig = 0;
    st->v[st->n].stopped = 0;
    st->n++;
    return 0;
}

/* The tracer of thread tid (TracerPid), 0 if none or unknown. */
static long tracer_of(pid_t pid, pid_t tid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)pid, (int)tid);
    FILE *f = fopen(path, "re");
    long tracer = 0;
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "TracerPid: %ld", &tracer) == 1)
            break;
    fclose(f);
    return tracer;
}

/* Why thread tid could not be seized (err: errno), into st->err; the code. */
static int seize_failed(struct plat_stopper *st, pid_t tid, int err)
{
    long tracer = tracer_of(st->pid, tid);
    if (tracer > 0 && tracer != (long)getpid())
        snprintf(st->err, sizeof st->err,
                 "thread %d of process %d cannot be stopped: process %ld traces it already",
                 (int)tid, (int)st->pid, tracer);
    else
        snprintf(st->err, sizeof st->err, "thread %d of process %d cannot be stopped: %s", (int)tid,
                 (int)st->pid, strerror(err));
    return err == EPERM || err == EACCES ? PYS_E_PERM : PYS_E_INVAL;
}

/* Is the thread gone or going (exited, a zombie, being reaped)? */
static int thread_gone(pid_t pid, pid_t tid)
{
    int state = plat_task_state(pid, tid);
    return state < 0 || state == 'Z' || state == 'X';
}

/* Seize and interrupt every thread in the task list not yet stopped: how
 * many were new, or an error. */
static int stop_new(struct plat_stopper *st)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)st->pid);
    DIR *d = opendir(path);
    if (!d)
        return errno == ENOENT ? PYS_E_EXITED : plat_proc_errno(st->pid, errno);
    int added = 0, rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long tid = strtol(e->d_name, &end, 10);
        if (*end || tid <= 0 || seen(st, (pid_t)tid))
            continue;
        if (ptrace(PTRACE_SEIZE, (pid_t)tid, NULL, NULL) != 0) {
            int err = errno;
            if (err == ESRCH || thread_gone(st->pid, (pid_t)tid))
                continue; /* it ended meanwhile */
            rc = seize_failed(st, (pid_t)tid, err);
            break;
        }
        if ((rc = push(st, (pid_t)tid)) < 0) {
            ptrace(PTRACE_DETACH, (pid_t)tid, NULL, NULL);
            break;
        }
        if (ptrace(PTRACE_INTERRUPT, (pid_t)tid, NULL, NULL) != 0 && errno != ESRCH) {
            rc = seize_failed(st, (pid_t)tid, errno);
            break;
        }
        added++;
    }
    closedir(d);
    return rc < 0 ? rc : added;
}

/* Wait until each seized thread from index `from` on has stopped; one that
 * exits is dropped. */
static void wait_stopped(struct plat_stopper *st, size_t from)
{
    for (size_t i = from; i < st->n;) {
        int status;
        pid_t w = waitpid(st->v[i].tid, &status, __WALL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 || WIFEXITED(status) || WIFSIGNALED(status)) {
            /* gone: no longer traced */
            st->v[i] = st->v[--st->n];
            continue;
        }
        if (WIFSTOPPED(status)) {
            int event = status >> 16;
            if (event == 0) /* a signal-delivery-stop: give the signal back */
                st->v[i].sig = WSTOPSIG(status);
            /* else PTRACE_EVENT_STOP: the interrupt (or a group-stop) */
            st->v[i].stopped = 1;
        }
        i++;
    }
}

void plat_stopper_init(struct plat_stopper *st, pid_t pid)
{
    memset(st, 0, sizeof *st);
    st->pid = pid;
}

void plat_stopper_release(struct plat_stopper *st)
{
    plat_resume_all(st);
    free(st->v);
    memset(st, 0, sizeof *st);
}

int plat_stop_all(struct plat_stopper *st)
{
    st->err[0] = '\0';
    int rc = 0;
    for (int round = 0;; round++) {
        size_t from = st->n;
        rc = stop_new(st);
        if (rc < 0)
            break;
        wait_stopped(st, from);
        if (rc == 0)
            break; /* every thread of the list is stopped: none is left to start another */
        if (round + 1 == STOP_ROUNDS) {
            snprintf(st->err, sizeof st->err,
                     "process %d starts threads faster than they can be stopped", (int)st->pid);
            rc = PYS_E_CORRUPT;
            break;
        }
    }
    if (rc < 0) {
        plat_resume_all(st);
        return rc;
    }
    if (st->n == 0) {
        snprintf(st->err, sizeof st->err, "process %d has no threads left", (int)st->pid);
        return PYS_E_EXITED;
    }
    return 0;
}

void plat_resume_all(struct plat_stopper *st)
{
    for (size_t i = 0; i < st->n; i++) {
        /* A thread seized but not yet seen stopped cannot be detached
         * (ESRCH) until it stops: wait for it first. */
        if (!st->v[i].stopped) {
            int status;
            while (waitpid(st->v[i].tid, &status, __WALL) < 0 && errno == EINTR)
                ;
        }
        ptrace(PTRACE_DETACH, st->v[i].tid, NULL, (void *)(long)st->v[i].sig);
    }
    st->n = 0;
}

/* Wait up to limit_ns for tid to stop again after a restart; past that,
 * interrupt it (a thread that entered a blocking system call) and wait for
 * that stop. 0, or -1 if the thread is gone. */
static int wait_step(pid_t tid, int *sig, uint64_t limit_ns)
{
    uint64_t start = plat_clock_ns();
    int interrupted = 0;
    for (;;) {
        int status;
        pid_t w = waitpid(tid, &status, __WALL | (interrupted ? 0 : WNOHANG));
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 || (w == tid && (WIFEXITED(status) || WIFSIGNALED(status))))
            return -1;
        if (w == tid && WIFSTOPPED(status)) {
            int s = WSTOPSIG(status);
            /* the step's own trap, or the interrupt's stop: nothing to
             * deliver; any other signal is handed back at the detach */
            if ((status >> 16) == 0 && s != SIGTRAP)
                *sig = s;
            return 0;
        }
        if (!interrupted && plat_clock_ns() - start >= limit_ns) {
            if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) != 0)
                return -1;
            interrupted = 1;
            continue;
        }
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

int plat_stop_step(struct plat_stopper *st, pid_t tid, unsigned steps)
{
    size_t i = 0;
    while (i < st->n && st->v[i].tid != tid)
        i++;
    if (i == st->n)
        return PYS_E_NOTFOUND;
    for (unsigned k = 0; k < steps; k++) {
        if (ptrace(PTRACE_SINGLESTEP, tid, NULL, NULL) != 0 ||
            wait_step(tid, &st->v[i].sig, 2000000) < 0) {
            st->v[i] = st->v[--st->n]; /* gone */
            return PYS_E_EXITED;
        }
    }
    return 0;
}
