/*
 * objframes: 3.8-3.10's frame objects, copied twice in every batch.
 *
 * Before 3.11 a frame is an object of its own on the heap, reached from its
 * callee one pointer at a time, but not a new one at each call: each code
 * object keeps its last frame for its next call, and freed frames wait on a
 * free list. A program's frames are mostly a few hundred addresses, the
 * same again and again. So the frames walks met lately are read by every
 * snapshot's batched read, first among its spans and again among its
 * second copies: a walk of a stack made of them is served by that one read
 * and checked against its second copies (core/torn.c), with no read of its
 * own and none at the snapshot's end. A walk that reads frame by frame, or
 * checks its chain by a later read, takes the longer the deeper the stack:
 * on a stack that changes every few tens of microseconds it is then torn
 * the more often the deeper it is, and the samples kept lean shallow.
 *
 * The batch reads them, with the thread states' current frames, after its
 * other spans and copies them again before its other second copies
 * (mem_inner_hint): the two copies of a walk's frames are then the fewest
 * microseconds apart, which is what a walk checked by them must last.
 *
 * Bounded: at most PROF_OBJFRAMES frames, each forgotten OBJFRAMES_KEEP
 * snapshots after a walk last met it, the oldest first when full.
 */
#include <string.h>

#include "core/core.h"

/* Snapshots a frame stays in the batch after a walk last met it: frames
 * met rarely (a deep level of one call chain among several) stay too. */
#define OBJFRAMES_KEEP 256

/* The position of addr in the sorted list, or where it would go. */
static size_t find(const struct prof_objframes *of, uint64_t addr)
{
    return util_lower_bound_u64(of->addr, of->n, addr);
}

static void drop(struct prof_objframes *of, size_t i)
{
    memmove(&of->addr[i], &of->addr[i + 1], (of->n - i - 1) * sizeof *of->addr);
    memmove(&of->seen[i], &of->seen[i + 1], (of->n - i - 1) * sizeof *of->seen);
    of->n--;
}

static void note_one(struct prof_objframes *of, uint64_t addr, uint64_t now)
{
    size_t i = find(of, addr);
    if (i < of->n && of->addr[i] == addr) {
        of->seen[i] = now;
        return;
    }
    if (of->n == PROF_OBJFRAMES) {
        size_t old = 0;
        for (size_t j = 1; j < of->n; j++)
            if (of->seen[j] < of->seen[old])
                old = j;
        if (of->seen[old] == now) {
            of->full = now; /* all met by this snapshot: keep those */
            return;
        }
        drop(of, old);
        if (old < i)
            i--;
    }
    memmove(&of->addr[i + 1], &of->addr[i], (of->n - i) * sizeof *of->addr);
    memmove(&of->seen[i + 1], &of->seen[i], (of->n - i) * sizeof *of->seen);
    of->addr[i] = addr;
    of->seen[i] = now;
    of->n++;
}

void prof_objframes_note(struct pys_session *s, const struct cpy_thread *t,
                         const struct cpy_raw_frame *raw, size_t n)
{
    if (s->off.traits.frames != CPY_FRAMES_OBJECT)
        return;
    /* The thread's current frame is read just before its frames: the walk
     * starts from the moment it was read. */
    mem_inner_hint(&s->mem, t->addr + s->off.thread_state.current_frame);
    /* Once every frame kept was met by this snapshot, the others it meets
     * (a deep stack's lower frames, many threads') are left to the batch's
     * plain replay: at most PROF_OBJFRAMES looks for the oldest each. */
    if (s->objframes.full == s->snapshots)
        return;
    for (size_t i = 0; i < n && s->objframes.full != s->snapshots; i++)
        note_one(&s->objframes, raw[i].addr, s->snapshots);
}

void prof_objframes_hint(struct pys_session *s)
{
    struct prof_objframes *of = &s->objframes;
    if (s->off.traits.frames != CPY_FRAMES_OBJECT)
        return;
    size_t head = cpy_frame_object_head(&s->off), k = 0;
    for (size_t i = 0; i < of->n; i++) {
        if (s->snapshots - of->seen[i] > OBJFRAMES_KEEP)
            continue;
        of->addr[k] = of->addr[i];
        of->seen[k++] = of->seen[i];
        /* Its second copy only where it could be read just now (this
         * batch copied it, or a walk of this snapshot read it): a span
         * that fails takes every second copy of the batch with it. */
        mem_prefetch_hint(&s->mem, of->addr[i], head);
        mem_inner_hint(&s->mem, of->addr[i]);
        if (of->seen[i] == s->snapshots || mem_in_batch(&s->mem, of->addr[i], head))
            mem_recheck_hint(&s->mem, of->addr[i], head);
    }
    of->n = k;
}
