/*
 * sample_stream: print every snapshot of a process, in time order, one line
 * per thread: "N TID file:qualname:line;...;file:qualname:line" (outermost
 * first), for the tests of the frame cache (which need to see samples in the
 * order they were taken, which no profile output keeps).
 *
 * Usage: sample_stream PID SECONDS [--read-only] [--interval-us N] [--reuse-idle]
 *                      [--compare]
 * --reuse-idle sets pys_options.reuse_idle. --compare takes, right after
 * each snapshot, one with a second session that reads every thread (strictly
 * read-only) and counts the threads whose stacks differ between the two.
 * Exit status 0; 1 if attaching failed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pystrobe/pystrobe.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int same_stack(const struct pys_thread *a, const struct pys_thread *b)
{
    if (a->error || b->error || a->nframes != b->nframes)
        return 0;
    for (size_t f = 0; f < a->nframes; f++) {
        const struct pys_frame *x = &a->frames[f], *y = &b->frames[f];
        if (strcmp(x->filename, y->filename) || strcmp(x->qualname, y->qualname) ||
            x->lineno != y->lineno)
            return 0;
    }
    return 1;
}

/* Compare each thread of b with the same thread state's in a. */
static void compare(const struct pys_snapshot *a, const struct pys_snapshot *b,
                    unsigned long *compared, unsigned long *differ)
{
    for (size_t i = 0; i < b->ninterps; i++)
        for (size_t k = 0; k < b->interps[i].nthreads; k++) {
            const struct pys_thread *tb = &b->interps[i].threads[k];
            for (size_t j = 0; j < a->ninterps; j++)
                for (size_t l = 0; l < a->interps[j].nthreads; l++) {
                    const struct pys_thread *ta = &a->interps[j].threads[l];
                    if (ta->tstate != tb->tstate)
                        continue;
                    (*compared)++;
                    *differ += !same_stack(ta, tb);
                }
        }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fputs("usage: sample_stream PID SECONDS [--read-only] [--interval-us N]\n", stderr);
        return 2;
    }
    struct pys_options opt = {.frame_cache = 1};
    long interval_us = 0;
    int compare_all = 0;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--read-only") == 0)
            opt.frame_cache = 0;
        else if (strcmp(argv[i], "--reuse-idle") == 0)
            opt.reuse_idle = 1;
        else if (strcmp(argv[i], "--compare") == 0)
            compare_all = 1;
        else if (strcmp(argv[i], "--interval-us") == 0 && i + 1 < argc)
            interval_us = atol(argv[++i]);
    }
    pys_session *s;
    char err[512];
    if (pys_session_attach(&s, atoi(argv[1]), &opt, err, sizeof err) < 0) {
        fprintf(stderr, "sample_stream: %s\n", err);
        return 1;
    }
    pys_session *all = NULL;
    struct pys_options all_opt = {.frame_cache = 0};
    if (compare_all && pys_session_attach(&all, atoi(argv[1]), &all_opt, err, sizeof err) < 0) {
        fprintf(stderr, "sample_stream: %s\n", err);
        pys_session_free(s);
        return 1;
    }
    double end = now() + atof(argv[2]);
    unsigned long n = 0, failed = 0, compared = 0, differ = 0;
    while (now() < end) {
        const struct pys_snapshot *snap;
        if (interval_us > 0) {
            struct timespec ts = {interval_us / 1000000, (interval_us % 1000000) * 1000};
            nanosleep(&ts, NULL);
        }
        int rc = pys_session_snapshot(s, &snap);
        if (rc == PYS_E_EXITED)
            break;
        n++;
        if (rc < 0) {
            failed++;
            continue;
        }
        const struct pys_snapshot *snap_all;
        if (all && pys_session_snapshot(all, &snap_all) == 0)
            compare(snap, snap_all, &compared, &differ);
        for (size_t i = 0; i < snap->ninterps; i++) {
            for (size_t k = 0; k < snap->interps[i].nthreads; k++) {
                const struct pys_thread *t = &snap->interps[i].threads[k];
                if (t->error) {
                    failed++;
                    continue;
                }
                printf("%lu %llu ", n, (unsigned long long)t->native_id);
                for (size_t f = t->nframes; f-- > 0;)
                    printf("%s:%s:%d%s", t->frames[f].filename, t->frames[f].qualname,
                           (int)t->frames[f].lineno, f ? ";" : "");
                putchar('\n');
            }
        }
    }
    struct pys_stats st;
    pys_session_stats(s, &st);
    fprintf(stderr,
            "samples %lu failed %lu hits %llu partial %llu misses %llu reused %llu "
            "compared %lu differ %lu entries %llu other-writers %llu walks %llu\n",
            n, failed, (unsigned long long)st.frame_cache_hits,
            (unsigned long long)st.frame_cache_partial_hits,
            (unsigned long long)st.frame_cache_misses, (unsigned long long)st.threads_reused,
            compared, differ, (unsigned long long)st.frame_cache_entries,
            (unsigned long long)st.frame_cache_other_writers,
            (unsigned long long)st.frame_cache_other_writer_walks);
    pys_session_free(all);
    pys_session_free(s);
    return 0;
}
