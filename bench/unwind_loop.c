/*
 * unwind_loop: the raw cost of one pystrobe sample, for bench/run.py.
 *
 *   unwind_loop PID SECONDS
 *
 * Attaches to PID (every thread, no CPU state, no <native>/<GC> markers: what
 * bench/reference_loop.py asks of CPython's RemoteUnwinder) and calls
 * pys_session_snapshot() back to back for SECONDS, with nothing else in the
 * loop but a clock read. A sample succeeds when the call returned 0 and no
 * thread carries an error. Prints one line of key=value pairs on stdout:
 *
 *   samples failed seconds us_per_sample success_rate threads frames
 *   mem_reads_per_sample mem_pieces_per_sample mem_bytes_per_sample code_hit_rate mem_writes_per_sample
 *   frame_cache_hits frame_cache_partial_hits frame_cache_misses end
 *
 * where threads and frames are the largest counts among CHECK_SAMPLES more
 * samples taken after the timed loop (a check that both unwinders see the
 * same stacks; frames of all threads together) and end is "duration" or the
 * error that ended the loop early (the target exited). Exits 0 when at
 * least one sample was taken, 1 otherwise, 2 on usage errors.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pystrobe/pystrobe.h>

/* Untimed samples for the threads/frames check: enough to catch a deep
 * workload at full depth whatever its phase. */
#define CHECK_SAMPLES 200

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 1 if every thread of the snapshot was read; counts threads and frames. */
static int snapshot_ok(const struct pys_snapshot *snap, size_t *nthreads, size_t *nframes)
{
    int ok = 1;
    size_t threads = 0, frames = 0;
    for (size_t i = 0; i < snap->ninterps; i++) {
        const struct pys_interp *in = &snap->interps[i];
        for (size_t j = 0; j < in->nthreads; j++) {
            threads++;
            frames += in->threads[j].nframes;
            if (in->threads[j].error != 0)
                ok = 0;
        }
    }
    *nthreads = threads;
    *nframes = frames;
    return ok;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: unwind_loop PID SECONDS\n");
        return 2;
    }
    char *end = NULL;
    long pid = strtol(argv[1], &end, 10);
    if (*argv[1] == '\0' || *end != '\0' || pid <= 0) {
        fprintf(stderr, "unwind_loop: bad pid '%s'\n", argv[1]);
        return 2;
    }
    double seconds = strtod(argv[2], &end);
    if (*argv[2] == '\0' || *end != '\0' || !(seconds > 0)) {
        fprintf(stderr, "unwind_loop: bad duration '%s'\n", argv[2]);
        return 2;
    }

    struct pys_options opt;
    memset(&opt, 0, sizeof opt);
    /* As the reference's cache_frames=True: the 3.15 frame cache. */
    opt.frame_cache = getenv("UNWIND_READ_ONLY") == NULL;
    pys_session *s = NULL;
    char err[512] = "";
    int rc = pys_session_attach(&s, (int)pid, &opt, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "unwind_loop: attach to %ld failed: %s: %s\n", pid, pys_errname(rc), err);
        return 1;
    }

    unsigned long long samples = 0, failed = 0;
    size_t max_threads = 0, max_frames = 0, nt = 0, nf = 0;
    const char *why = "duration";
    double t0 = now_s(), t1 = t0, deadline = t0 + seconds;
    for (;;) {
        const struct pys_snapshot *snap = NULL;
        rc = pys_session_snapshot(s, &snap);
        samples++;
        if (rc == 0) {
            if (!snapshot_ok(snap, &nt, &nf))
                failed++;
        } else {
            failed++;
            if (rc == PYS_E_EXITED || rc == PYS_E_NOPROC) {
                why = pys_errname(rc);
                t1 = now_s();
                break;
            }
        }
        t1 = now_s();
        if (t1 >= deadline)
            break;
    }

    struct pys_stats st;
    pys_session_stats(s, &st); /* before the check samples */
    for (int i = 0; i < CHECK_SAMPLES && strcmp(why, "duration") == 0; i++) {
        const struct pys_snapshot *snap = NULL;
        if (pys_session_snapshot(s, &snap) == 0 && snapshot_ok(snap, &nt, &nf)) {
            if (nt > max_threads)
                max_threads = nt;
            if (nf > max_frames)
                max_frames = nf;
        }
    }
    pys_session_free(s);

    double elapsed = t1 - t0;
    double n = (double)samples;
    uint64_t code_total = st.code_hits + st.code_misses;
    printf("samples=%llu failed=%llu seconds=%.6f us_per_sample=%.4f success_rate=%.6f "
           "threads=%zu frames=%zu mem_reads_per_sample=%.2f mem_pieces_per_sample=%.2f "
           "mem_bytes_per_sample=%.0f code_hit_rate=%.6f mem_writes_per_sample=%.2f frame_cache_hits=%llu "
           "frame_cache_partial_hits=%llu frame_cache_misses=%llu end=%s\n",
           samples, failed, elapsed, samples ? elapsed * 1e6 / n : 0.0,
           samples ? (double)(samples - failed) / n : 0.0, max_threads, max_frames,
           samples ? (double)st.mem_reads / n : 0.0, samples ? (double)st.mem_pieces / n : 0.0,
           samples ? (double)st.mem_bytes / n : 0.0,
           code_total ? (double)st.code_hits / (double)code_total : 0.0,
           samples ? (double)st.mem_writes / n : 0.0, (unsigned long long)st.frame_cache_hits,
           (unsigned long long)st.frame_cache_partial_hits,
           (unsigned long long)st.frame_cache_misses, why);
    return samples > 0 ? 0 : 1;
}
