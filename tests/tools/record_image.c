/*
 * record_image: record images of a running CPython (core/image.h) for the
 * deterministic tests on images (tests/unit/test_images.c).
 *
 *   record_image PID SPEC...
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
 * printed. Exits 0 when every SPEC was recorded, 1 otherwise, 2 on usage
 * errors. Needs ptrace rights over PID.
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

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: record_image PID OUT[:FUNC]...\n");
        return 2;
    }
    int pid = atoi(argv[1]);
    uint64_t *all = NULL;
    size_t nall = 0;
    struct mem_proc proc;
    mem_proc_init(&proc, pid);
    struct pys_options opt;
    memset(&opt, 0, sizeof opt); /* read-only, no CPU state */
    srand((unsigned)getpid());
    for (int a = 2; a < argc; a++) {
        char out[4096];
        snprintf(out, sizeof out, "%s", argv[a]);
        char *func = strchr(out, ':');
        if (func)
            *func++ = '\0';
        int done = 0;
        for (int tries = 0; tries < TRIES && !done; tries++) {
            if (kill(pid, SIGSTOP) < 0 || wait_stopped(pid) < 0) {
                fprintf(stderr, "record_image: cannot stop process %d\n", pid);
                kill(pid, SIGCONT);
                return 1;
            }
            struct mem_record rec;
            mem_record_init(&rec, &proc.base);
            pys_session *s = NULL;
            char err[512];
            int rc = prof_session_open(&s, pid, &rec.base, NULL, &opt, err, sizeof err);
            if (rc < 0) {
                fprintf(stderr, "record_image: %s\n", err);
                kill(pid, SIGCONT);
                mem_record_release(&rec);
                return 1;
            }
            const struct pys_snapshot *snap = NULL;
            int ok = pys_session_snapshot(s, &snap) == 0 && clean(snap) &&
                     (!func || has_top(snap, func));
            if (ok)
                print_stack(out, snap);
            for (int k = 1; ok && k < SNAPSHOTS; k++) {
                const struct pys_snapshot *again;
                ok = pys_session_snapshot(s, &again) == 0 && clean(again);
            }
            /* Then what a session with the frame cache reads (3.15): its
             * writes are refused by the recording source. */
            struct pys_options fc = opt;
            fc.frame_cache = 1;
            pys_session *s2 = NULL;
            if (ok && prof_session_open(&s2, pid, &rec.base, NULL, &fc, err, sizeof err) == 0) {
                for (int k = 0; k < SNAPSHOTS; k++) {
                    const struct pys_snapshot *again;
                    pys_session_snapshot(s2, &again);
                }
                pys_session_free(s2);
            }
            if (ok && !rec.failed && merge_pages(&all, &nall, &rec) == 0) {
                done = 1;
                if (strcmp(out, "-") != 0) {
                    struct prof_image_facts facts;
                    prof_session_facts(s, &facts);
                    rc = prof_image_save(out, &facts, &proc.base, all, nall);
                    if (rc < 0) {
                        fprintf(stderr, "record_image: writing %s: %s\n", out, pys_strerror(rc));
                        done = -1;
                    } else {
                        printf("%s: %zu pages\n", out, nall);
                    }
                }
            }
            pys_session_free(s);
            mem_record_release(&rec);
            kill(pid, SIGCONT);
            if (!done)
                sleep_us(200 + rand() % 3000);
        }
        if (done != 1) {
            fprintf(stderr, "record_image: no moment for %s\n", argv[a]);
            free(all);
            return 1;
        }
    }
    free(all);
    return 0;
}
