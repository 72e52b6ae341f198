/*
 * gcstats: the target's garbage-collector statistics (CPython 3.15+), as
 * _remote_debugging's get_gc_stats() gives them: every entry of the ring
 * buffers each interpreter keeps per generation (struct gc_stats, pointed
 * to by its gc state's generation_stats), in the buffers' own order.
 *
 * The layout of struct gc_stats is not in the debug offsets, only its size:
 * the size is checked against the one layout known (the default GIL build
 * of 3.15: 11 entries for the young generation, 3 for each old one, each
 * entry 8 words), and anything else refused. A buffer is read until two
 * reads in a row agree (the collector may write it meanwhile).
 */
#include <string.h>

#include <pystrobe/pystrobe.h>

#include "core/core.h"

/* struct gc_generation_stats: ts_start, ts_stop, collections, collected,
 * uncollectable, candidates, duration (double), heap_size. */
#define ENTRY 64
#define YOUNG 11
#define OLD 3
#define YOUNG_SIZE 712  /* YOUNG entries and an int8 index, 8-aligned */
#define OLD_SIZE 200    /* OLD entries and an int8 index, 8-aligned */
#define STATS_SIZE 1120 /* young, old[2], uint32 update_seq, 8-aligned */
#define INTERPS_MAX 256
#define TRIES 8

static int64_t word(const uint8_t *p, size_t i)
{
    int64_t v;
    memcpy(&v, p + 8 * i, 8);
    return v;
}

static void entry(const uint8_t *p, int gen, int64_t iid, struct pys_gc_stats *out)
{
    double d;
    memcpy(&d, p + 8 * 6, 8);
    *out = (struct pys_gc_stats){.gen = gen,
                                 .iid = iid,
                                 .ts_start = word(p, 0),
                                 .ts_stop = word(p, 1),
                                 .collections = word(p, 2),
                                 .collected = word(p, 3),
                                 .uncollectable = word(p, 4),
                                 .candidates = word(p, 5),
                                 .heap_size = word(p, 7),
                                 .duration = d};
}

int pys_session_gc_stats(pys_session *s, int all_interps, struct pys_gc_stats *out, size_t max,
                         size_t *n)
{
    const struct cpy_offsets *o = &s->off;
    uint8_t a[STATS_SIZE], b[STATS_SIZE];
    uint64_t iaddr;
    size_t got = 0;
    int rc;
    if (!CPY_HAS(o, gc, generation_stats) || !CPY_HAS(o, interpreter_state, gc))
        return prof_fail(s, PYS_E_VERSION,
                         "garbage-collector statistics need CPython 3.15 or later (the target "
                         "runs %s)",
                         pys_session_python_version_text(s));
    if (o->gc.generation_stats_size != STATS_SIZE)
        return prof_fail(s, PYS_E_VERSION,
                         "unknown layout of the garbage-collector statistics (%llu bytes)",
                         (unsigned long long)o->gc.generation_stats_size);
    if ((rc = cpy_runtime_first_interp(&s->mem, o, s->runtime, &iaddr)) < 0)
        return prof_fail(s, rc, "interpreter list unreadable: %s", pys_strerror(rc));
    for (int ni = 0; iaddr != 0; ni++) {
        struct cpy_interp in;
        uint64_t stats;
        if (ni >= INTERPS_MAX)
            return prof_fail(s, PYS_E_CORRUPT, "more than %d interpreters", INTERPS_MAX);
        if ((rc = cpy_interp_read(&s->mem, o, s->runtime, iaddr, &in)) < 0 ||
            (rc = mem_read_u64(&s->mem, iaddr + o->interpreter_state.gc + o->gc.generation_stats,
                               &stats)) < 0)
            return prof_fail(s, rc, "interpreter at 0x%llx unreadable: %s",
                             (unsigned long long)iaddr, pys_strerror(rc));
        if (stats == 0)
            return prof_fail(s, PYS_E_NOTFOUND, "interpreter %lld has no GC statistics",
                             (long long)in.id);
        int same = 0;
        if ((rc = mem_read(&s->mem, stats, a, sizeof a)) < 0)
            return prof_fail(s, rc, "GC statistics at 0x%llx unreadable: %s",
                             (unsigned long long)stats, pys_strerror(rc));
        for (int t = 0; t < TRIES && !same; t++) {
            if ((rc = mem_read(&s->mem, stats, b, sizeof b)) < 0)
                return prof_fail(s, rc, "GC statistics at 0x%llx unreadable: %s",
                                 (unsigned long long)stats, pys_strerror(rc));
            same = memcmp(a, b, sizeof a) == 0;
            memcpy(a, b, sizeof a);
        }
        if (!same)
            return prof_fail(s, PYS_E_CORRUPT, "the GC statistics kept changing while read");
        if (got + YOUNG + 2 * OLD > max)
            return prof_fail(s, PYS_E_NOMEM, "more GC statistics than room for %zu", max);
        for (int i = 0; i < YOUNG; i++)
            entry(a + ENTRY * i, 0, in.id, &out[got++]);
        for (int g = 0; g < 2; g++)
            for (int i = 0; i < OLD; i++)
                entry(a + YOUNG_SIZE + OLD_SIZE * g + ENTRY * i, g + 1, in.id, &out[got++]);
        if (!all_interps)
            break;
        iaddr = in.next;
    }
    *n = got;
    return 0;
}
