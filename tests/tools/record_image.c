/*
 * record_image: record images of a running CPython (core/image.h) for the
 * deterministic tests on images (tests/unit/test_images.c).
 *
 *   record_image [--stopped] PID SPEC...
 *
 * Each SPEC is OUT or OUT:F1,F2,... For each in turn the target is stopped
 * (SIGSTOP, until every thread is), a fresh read-only session attached to
 * it through a recording memory source takes a few snapshots (the first as
 * a replayed session's first, the others reading what later snapshots'
 * batches read), another with the frame cache on (whose writes the
 * recording source refuses) the same, and the target is let go (SIGCONT). With FUNC, a moment
 * at which no thread has a frame of that name is let go and another tried.
 * The pages every SPEC so far read are then written to OUT, as they are at
 * this moment ("-": nothing written), so that an image also holds what
 * the earlier moments read: a test that switches from one image to another
 * midway finds the other's memory in it. The stack of each moment is
 * printed. Exits 0 when every SPEC was recorded, 1 otherwise (saying why),
 * 2 on usage errors. Needs ptrace rights over PID.
 *
 * --stopped: the target is stopped already at the moment wanted (gdb
 * stopped it at a breakpoint, tools/record_images.sh): that moment is
 * recorded or nothing is. A target not stopped, or a moment that does not
 * fit SPEC (a thread unreadable, FUNC not on top), is an error at the
 * first try: never let go to try another, later, moment. The target is
 * left stopped.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pystrobe/pystrobe.h>

#include "core/core.h"
#include "platform/platform.h"

#define TRIES 2000
#define SNAPSHOTS 3

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* Wait until every thread of pid is stopped: 0, or -1 after a second. */
static int wait_stopped(int pid)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", pid);
    for (int i = 0; i < 10000; i++) {
        DIR *d = opendir(dir);
        if (!d)
            return -1;
        int all = 1;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            int st = plat_task_state(pid, atoi(e->d_name));
            if (st >= 0 && st != 'T' && st != 't')
                all = 0;
        }
        closedir(d);
        if (all)
            return 0;
        sleep_us(100);
    }
    return -1;
}

/* Does a thread's stack start with the comma-separated names in want? */
static int has_top(const struct pys_snapshot *snap, const char *want)
{
    for (size_t i = 0; i < snap->ninterps; i++)
        for (size_t t = 0; t < snap->interps[i].nthreads; t++) {
            const struct pys_thread *th = &snap->interps[i].threads[t];
            const char *w = want;
            size_t f = 0;
            for (; f < th->nframes; f++) {
                size_t n = strcspn(w, ",");
                const char *q = th->frames[f].qualname;
                if (!q || strlen(q) != n || strncmp(q, w, n) != 0)
                    break;
                w += n;
                if (*w == '\0')
                    return 1;
                w++;
            }
        }
    return 0;
}

static int clean(const struct pys_snapshot *snap)
{
    size_t threads = 0;
    for (size_t i = 0; i < snap->ninterps; i++)
        for (size_t t = 0; t < snap->interps[i].nthreads; t++, threads++)
            if (snap->interps[i].threads[t].error != 0)
                return 0;
    return threads > 0;
}

static void print_stack(const char *out, const struct pys_snapshot *snap)
{
    for (size_t i = 0; i < snap->ninterps; i++)
        for (size_t t = 0; t < snap->interps[i].nthreads; t++) {
            const struct pys_thread *th = &snap->interps[i].threads[t];
            printf("%s: thread %zu:%zu\n", out, i, t);
            for (size_t f = 0; f < th->nframes; f++)
                printf("  %s %s:%d\n", th->frames[f].qualname, th->frames[f].filename,
                       th->frames[f].lineno);
        }
}

/* Add r's pages to the set *all (sorted, distinct). */
static int merge_pages(uint64_t **all, size_t *n, struct mem_record *r)
{
    size_t k = mem_record_pages(r);
    uint64_t *v = malloc((*n + k + 1) * sizeof *v);
    if (!v)
        return -1;
    size_t a = 0, b = 0, m = 0;
    while (a < *n || b < k) {
        uint64_t x = b == k || (a < *n && (*all)[a] < r->pages[b]) ? (*all)[a++] : r->pages[b++];
        if (m == 0 || v[m - 1] != x)
            v[m++] = x;
    }
    free(*all);
    *all = v;
    *n = m;
    return 0;
}

/* Is every thread of pid stopped now? */
static int all_stopped(int pid)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", pid);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int all = 1, any = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        int st = plat_task_state(pid, atoi(e->d_name));
        any = 1;
        if (st != 'T' && st != 't')
            all = 0;
    }
    closedir(d);
    return any && all;
}

/* What main keeps across SPECs. */
struct run {
    int pid, stopped;
    struct mem_proc proc;
    struct pys_options opt;
    uint64_t *all; /* the pages every SPEC so far read */
    size_t nall;
};

/* Try the target's moment (stopped by the caller) for out (FUNC func, or
 * NULL; spec: the argument, for messages): 1 recorded, 0 not a moment for
 * it (*why says why), -1 an error (said). */
static int one_moment(struct run *x, const char *spec, const char *out, const char *func,
                      const char **why)
{
    struct mem_record rec;
    mem_record_init(&rec, &x->proc.base);
    pys_session *s = NULL;
    char err[512];
    int rc = prof_session_open(&s, x->pid, &rec.base, NULL, &x->opt, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "record_image: %s\n", err);
        mem_record_release(&rec);
        return -1;
    }
    const struct pys_snapshot *snap = NULL;
    int done = 0;
    rc = pys_session_snapshot(s, &snap);
    *why = rc < 0               ? pys_strerror(rc)
           : !clean(snap)       ? "a thread's stack could not be read"
           : func && !has_top(snap, func) ? "no thread's stack starts with the functions asked"
                                          : NULL;
    if (!*why)
        print_stack(out, snap);
    else if (x->stopped && rc == 0)
        print_stack(spec, snap);
    for (int k = 1; !*why && k < SNAPSHOTS; k++) {
        const struct pys_snapshot *again;
        if (pys_session_snapshot(s, &again) != 0 || !clean(again))
            *why = "a later snapshot of the same moment could not be read";
    }
    /* Then what a session with the frame cache reads (3.15): its writes
     * are refused by the recording source. */
    struct pys_options fc = x->opt;
    fc.frame_cache = 1;
    pys_session *s2 = NULL;
    if (!*why && prof_session_open(&s2, x->pid, &rec.base, NULL, &fc, err, sizeof err) == 0) {
        for (int k = 0; k < SNAPSHOTS; k++) {
            const struct pys_snapshot *again;
            pys_session_snapshot(s2, &again);
        }
        pys_session_free(s2);
    }
    if (!*why && rec.failed)
        *why = "its memory could not be recorded";
    if (!*why && merge_pages(&x->all, &x->nall, &rec) < 0)
        *why = "out of memory";
    if (!*why) {
        done = 1;
        if (strcmp(out, "-") != 0) {
            struct prof_image_facts facts;
            prof_session_facts(s, &facts);
            rc = prof_image_save(out, &facts, &x->proc.base, x->all, x->nall);
            if (rc < 0) {
                fprintf(stderr, "record_image: writing %s: %s\n", out, pys_strerror(rc));
                done = -1;
            } else {
                printf("%s: %zu pages\n", out, x->nall);
            }
        }
    }
    pys_session_free(s);
    mem_record_release(&rec);
    return done;
}

/* Record SPEC arg: 0, or 1 (said why). Without --stopped, moments are
 * tried until one fits, the target let go between tries. */
static int record_spec(struct run *x, const char *arg)
{
    char out[4096];
    snprintf(out, sizeof out, "%s", arg);
    char *func = strchr(out, ':');
    if (func)
        *func++ = '\0';
    const char *why = NULL;
    for (int tries = 0; tries < (x->stopped ? 1 : TRIES); tries++) {
        if (kill(x->pid, SIGSTOP) < 0 || wait_stopped(x->pid) < 0) {
            fprintf(stderr, "record_image: cannot stop process %d\n", x->pid);
            if (!x->stopped)
                kill(x->pid, SIGCONT);
            return 1;
        }
        int done = one_moment(x, arg, out, func, &why);
        if (!x->stopped)
            kill(x->pid, SIGCONT);
        if (done)
            return done < 0;
        if (!x->stopped)
            sleep_us(200 + rand() % 3000);
    }
    if (x->stopped)
        fprintf(stderr,
                "record_image: --stopped: the moment process %d is stopped at is not one for "
                "%s: %s: nothing recorded\n",
                x->pid, arg, why);
    else
        fprintf(stderr, "record_image: no moment for %s in %d tries (the last: %s)\n", arg, TRIES,
                why);
    return 1;
}

int main(int argc, char **argv)
{
    struct run x;
    memset(&x, 0, sizeof x); /* opt: read-only, no CPU state */
    x.stopped = argc > 1 && strcmp(argv[1], "--stopped") == 0;
    argv += x.stopped;
    argc -= x.stopped;
    if (argc < 3) {
        fprintf(stderr, "usage: record_image [--stopped] PID OUT[:FUNC]...\n");
        return 2;
    }
    x.pid = atoi(argv[1]);
    if (x.pid <= 0) { /* kill(0 or -1, ...) would stop every process it can */
        fprintf(stderr, "record_image: bad PID %s\n", argv[1]);
        return 2;
    }
    if (x.stopped && !all_stopped(x.pid)) {
        fprintf(stderr,
                "record_image: --stopped: process %d is not stopped (did gdb miss its "
                "breakpoint?): nothing recorded\n",
                x.pid);
        return 1;
    }
    mem_proc_init(&x.proc, x.pid);
    srand((unsigned)getpid());
    int rc = 0;
    for (int a = 2; a < argc && rc == 0; a++)
        rc = record_spec(&x, argv[a]);
    free(x.all);
    return rc;
}
