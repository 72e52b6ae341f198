/*
 * objframes: frames on the heap, copied twice in every batch: 3.8-3.10's
 * frame objects, and from 3.11 the frames of generators and coroutines,
 * each inside its generator object (the data stack's frames are copied by
 * chunks, torn.c's chain_hint).
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
 * From 3.11 a pipeline of generators is such a stack: each resume is a
 * call, and its frames are read one by one, outside the data stack. The
 * batch reads the whole frame (what the walk reads of it) and copies again
 * its code object, caller and position (what the checks compare).
 *
 * Bounded: at most PROF_OBJFRAMES frames, each forgotten OBJFRAMES_KEEP
 * snapshots after a walk last met it, the oldest first when full.
 *
 * Their callers (3.11+). A generator's frame is linked to its caller only
 * while it runs: a yield unlinks it. In a pipeline whose stages take turns
 * every few tens of nanoseconds, far faster than one frame is copied after
 * another, the thread's current frame names a deep stage that, by the time
 * its frame is copied, has nearly always yielded; and the deeper the
 * stage, the less of its time it is linked at all. Walks that ended there
 * were retried until one found every stage linked, and the samples kept
 * leaned shallow (bench/MECHANISMS.md). So each walk kept at once teaches
 * the caller of every generator's frame in it that a Python frame called
 * inline (prof_objframes_learn: its address, code object and position
 * then), and a walk that copies such a frame suspended goes on to that
 * caller (prof_objframes_caller, through cpy_stack.gen_caller) if the
 * caller still runs the same code; the caller is shown at the call it made
 * then. The top frame is still the one the thread state named. A generator
 * resumed from C (next(), sum(), a task's step) has the entry frame that C
 * code's call pushed on the C stack for its caller (3.12+): at the same
 * address at every step of one loop in C, and naming the same Python frame
 * below it; it is learned and checked as a Python caller is (its code
 * object; it has no position to show). The table is set-associative, by
 * the frame's address and code object: a program that builds a pipeline
 * again and again gets its generators' objects back from the allocator at
 * the same few addresses, but not each at the one it had, and keeps links
 * for each such layout, a frame's callers in all of them: the walk takes
 * the one whose frame runs the code it ran then. The link learned longest
 * ago goes first.
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "util/hashtab.h"

struct leveled {
    uint64_t addr;
    uint32_t level;
};

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
    memmove(&of->level[i], &of->level[i + 1], (of->n - i - 1) * sizeof *of->level);
    of->n--;
}

static void note_one(struct prof_objframes *of, uint64_t addr, uint64_t now, uint32_t level)
{
    size_t i = find(of, addr);
    if (i < of->n && of->addr[i] == addr) {
        of->seen[i] = now;
        of->level[i] = level;
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
    memmove(&of->level[i + 1], &of->level[i], (of->n - i) * sizeof *of->level);
    of->addr[i] = addr;
    of->seen[i] = now;
    of->level[i] = level;
    of->n++;
}

/* Whether raw is a frame the batch keeps: 3.8-3.10's frame objects, all of
 * them; from 3.11 a generator's or coroutine's frame, inside its object on
 * the heap (the data stack is copied by chunks already). */
static int kept(const struct pys_session *s, const struct cpy_raw_frame *raw)
{
    return s->off.traits.frames == CPY_FRAMES_OBJECT || raw->owner == CPY_OWNER_GENERATOR;
}

void prof_objframes_note(struct pys_session *s, const struct cpy_thread *t,
                         const struct cpy_raw_frame *raw, size_t n)
{
    /* The thread's current frame is read just before its frames: the walk
     * starts from the moment it was read. (From 3.11 only for a stack
     * with frames kept; 3.11-3.12 name it in a C frame's struct.) */
    int any = s->off.traits.frames == CPY_FRAMES_OBJECT;
    for (size_t i = 0; i < n && !any; i++)
        any = kept(s, &raw[i]);
    if (!any)
        return;
    if (s->off.traits.frames != CPY_FRAMES_CFRAME)
        mem_inner_hint(&s->mem, t->addr + s->off.thread_state.current_frame);
    /* Once every frame kept was met by this snapshot, the others it meets
     * (a deep stack's lower frames, many threads') are left to the batch's
     * plain replay: at most PROF_OBJFRAMES looks for the oldest each. */
    if (s->objframes.full == s->snapshots)
        return;
    for (size_t i = 0; i < n && s->objframes.full != s->snapshots; i++)
        if (kept(s, &raw[i]))
            note_one(&s->objframes, raw[i].addr, s->snapshots, (uint32_t)(n - 1 - i));
}

static int by_level(const void *a, const void *b)
{
    const struct leveled *x = a, *y = b;
    return (x->level > y->level) - (x->level < y->level);
}

/* The frames kept, read innermost by the batch in the order of their
 * places in the walks that met them last, from the bottom up: a caller
 * before its callee, so that a top frame is copied after its caller
 * (torn.c's top_settled) whatever their addresses. */
static void inner_by_level(struct pys_session *s)
{
    const struct prof_objframes *of = &s->objframes;
    struct leveled v[PROF_OBJFRAMES];
    for (size_t i = 0; i < of->n; i++)
        v[i] = (struct leveled){of->addr[i], of->level[i]};
    qsort(v, of->n, sizeof *v, by_level);
    for (size_t i = 0; i < of->n; i++)
        mem_inner_hint(&s->mem, v[i].addr);
}

/* 3.11+: the bytes a walk reads of a frame (*read: the whole frame), and
 * those of them up to the last the checks compare (code object, caller,
 * position): from the frame's start, where the batch finds it (mem.c's
 * recheck order goes by the addresses hinted innermost). */
static void checked_span(const struct cpy_offsets *o, size_t *read, size_t *len)
{
    const struct cpy_frame_offsets *f = &o->interpreter_frame;
    uint64_t po;
    size_t pw = cpy_frame_pos_field(o, &po);
    uint64_t b = (f->executable < f->previous ? f->previous : f->executable) + 8;
    if (po + pw > b)
        b = po + pw;
    *read = (size_t)f->size;
    *len = (size_t)b;
}

void prof_objframes_hint(struct pys_session *s)
{
    struct prof_objframes *of = &s->objframes;
    /* What a walk reads of each (the object's head; from 3.11 the whole
     * frame, frame_bytes) and what the checks compare (code object,
     * caller, position: one span). */
    size_t head = cpy_frame_object_head(&s->off), k = 0;
    size_t read = head, clen = head;
    if (s->off.traits.frames != CPY_FRAMES_OBJECT)
        checked_span(&s->off, &read, &clen);
    for (size_t i = 0; i < of->n; i++) {
        if (s->snapshots - of->seen[i] > OBJFRAMES_KEEP)
            continue;
        of->addr[k] = of->addr[i];
        of->seen[k] = of->seen[i];
        of->level[k++] = of->level[i];
        /* Its second copy only where it could be read just now (this
         * batch copied it, or a walk of this snapshot read it): a span
         * that fails takes every second copy of the batch with it. */
        mem_prefetch_hint(&s->mem, of->addr[i], read);
        if (of->seen[i] == s->snapshots || mem_in_batch(&s->mem, of->addr[i], read))
            mem_recheck_hint(&s->mem, of->addr[i], clen);
    }
    of->n = k;
    inner_by_level(s);
}

/* The set of the link of frame `frame` running `code`. */
static struct prof_objframe_link *link_set(struct prof_objframes *of, uint64_t frame,
                                           uint64_t code)
{
    _Static_assert((PROF_OBJFRAME_SETS & (PROF_OBJFRAME_SETS - 1)) == 0,
                   "PROF_OBJFRAME_SETS is a power of two");
    uint64_t h = util_hash_u64(util_hash_add(util_hash_add(0, frame), code));
    return of->callers[h & (PROF_OBJFRAME_SETS - 1)];
}

/* Whether frame raw[i], a generator's frame of a walk kept at once, shows a
 * caller to learn: one linked, not inferred; a Python frame that called it
 * inline, or (3.12+) the entry frame on the C stack of the C code that
 * resumed it (next(), send(), a task's step), with a caller of its own.
 * (3.11 marks the generator's own frame as entered from C instead, and
 * links it to the Python frame below the C code: a plain caller.) */
static int link_to_learn(const struct cpy_raw_frame *raw, size_t i, size_t n)
{
    if (raw[i].owner != CPY_OWNER_GENERATOR || raw[i].shim || raw[i].inferred || i + 1 >= n ||
        raw[i + 1].entry)
        return 0;
    return !raw[i + 1].shim || (i + 2 < n && raw[i + 1].code != 0 && !raw[i + 2].shim);
}

void prof_objframes_learn(struct pys_session *s, const struct cpy_raw_frame *raw, size_t n)
{
    for (size_t i = 0; i + 1 < n; i++) {
        if (!link_to_learn(raw, i, n))
            continue;
        struct prof_objframe_link *set = link_set(&s->objframes, raw[i].addr, raw[i].code), *l;
        size_t w = 0;
        /* Its own way, else an empty one, else the one learned longest
         * ago. A frame may have several callers, one in each layout. */
        for (size_t j = 0; j < PROF_OBJFRAME_WAYS; j++) {
            if (set[j].frame == raw[i].addr && set[j].code == raw[i].code &&
                set[j].caller == raw[i + 1].addr) {
                w = j;
                break;
            }
            if (set[j].seen < set[w].seen)
                w = j;
        }
        l = &set[w];
        l->frame = raw[i].addr;
        l->code = raw[i].code;
        l->caller = raw[i + 1].addr;
        l->caller_code = raw[i + 1].code;
        l->caller_pos = raw[i + 1].instr_ptr;
        l->seen = s->snapshots + 1;
    }
}

int prof_objframes_caller(void *ctx, uint64_t frame, uint64_t code, size_t k, uint64_t *caller,
                          uint64_t want[2])
{
    struct pys_session *s = ctx;
    const struct prof_objframe_link *set = link_set(&s->objframes, frame, code);
    const struct prof_objframe_link *v[PROF_OBJFRAME_WAYS];
    size_t nv = 0;
    for (size_t j = 0; j < PROF_OBJFRAME_WAYS; j++) {
        if (set[j].seen == 0 || set[j].frame != frame || set[j].code != code)
            continue;
        /* The last learned first: by insertion, the set is that small. */
        size_t at = nv++;
        while (at > 0 && v[at - 1]->seen < set[j].seen) {
            v[at] = v[at - 1];
            at--;
        }
        v[at] = &set[j];
    }
    if (k >= nv)
        return 0;
    *caller = v[k]->caller;
    want[0] = v[k]->caller_code;
    want[1] = v[k]->caller_pos;
    return 1;
}
