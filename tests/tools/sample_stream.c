/*
 * sample_stream: print every snapshot of a process, in time order, one line
 * per thread: "N TID file:qualname:line;...;file:qualname:line" (outermost
 * first), for the tests of the frame cache (which need to see samples in the
 * order they were taken, which no profile output keeps).
 *
 * Usage: sample_stream PID SECONDS [--read-only] [--interval-us N]
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

int main(int argc, char **argv)
{
    if (argc < 3) {
        fputs("usage: sample_stream PID SECONDS [--read-only] [--interval-us N]\n", stderr);
        return 2;
    }
    struct pys_options opt = {.frame_cache = 1};
    long interval_us = 0;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--read-only") == 0)
            opt.frame_cache = 0;
        else if (strcmp(argv[i], "--interval-us") == 0 && i + 1 < argc)
            interval_us = atol(argv[++i]);
    }
    pys_session *s;
    char err[512];
    if (pys_session_attach(&s, atoi(argv[1]), &opt, err, sizeof err) < 0) {
        fprintf(stderr, "sample_stream: %s\n", err);
        return 1;
    }
    double end = now() + atof(argv[2]);
    unsigned long n = 0, failed = 0;
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
    fprintf(stderr, "samples %lu failed %lu hits %llu partial %llu misses %llu\n", n, failed,
            (unsigned long long)st.frame_cache_hits,
            (unsigned long long)st.frame_cache_partial_hits,
            (unsigned long long)st.frame_cache_misses);
    pys_session_free(s);
    return 0;
}
