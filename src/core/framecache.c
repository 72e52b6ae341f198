/*
 * framecache: reuse the unchanged bottom of a thread's stack between samples
 * (CPython 3.15+).
 *
 * The protocol: after a sample, pystrobe writes the caller of the thread's
 * current frame (the first below it that lives on the thread's data stack:
 * next_anchor) into PyThreadState.last_profiled_frame (the anchor; the one
 * field pystrobe ever writes). Whenever the interpreter returns from the
 * anchor frame it moves the anchor to that frame's caller and bumps
 * last_profiled_frame_seq.
 * So at the next sample the anchor is a frame that has not returned since:
 * it and everything below it are as pystrobe last saw them, apart from the
 * anchor's own position (it may have called something since).
 *
 * A sample therefore walks from the current frame down to the anchor,
 * reading only those frames, and takes the frames below the anchor from the
 * cache: a full hit when our anchor is still in place with only the top frame
 * above it, a partial hit otherwise. It is a miss, and a full walk, when the anchor is
 * not in the cached chain, when the freshly read anchor does not match the
 * cached one (code object and caller), and every REFRESH samples, which
 * bounds how long a chain could stay wrong if the target moved between
 * pystrobe's read and its write of the anchor. Only chains that reached the
 * base frame are cached, and chains cut at max_frames (their bottom unseen;
 * what lies below the anchor is as unchanged as in a whole chain): a hit on
 * one keeps it cut as a walk would, the frames above the anchor and as many
 * of the cached ones as fit; one whose frames no longer fill it (the stack
 * above the anchor shrank: frames below the cut would show) is a miss. An
 * anchor caught returning (the current frame, read with its code object
 * cleared) is a hit too: the stack it returned to is the cached chain below
 * it (anchor_returned).
 *
 * The sequence number guards the one case where the anchor's address alone
 * could mislead: the anchor we wrote, still in place, must come with the
 * sequence number we saw (a frame returned and another pushed at the same
 * address would have moved the anchor and bumped it). The thread state is
 * read before the frames, and one read is not one moment: the snapshot's
 * batch ends with a second copy of the anchor and its number
 * (prof_anchor_hint), and a walk from the batch whose anchor moved in
 * between is read again.
 *
 * Another profiler may keep the same anchors (CPython 3.15's own, with
 * cache_frames, writes each sampled thread's current frame there). Its
 * writes break the protocol: an anchor it wrote need not be a frame that was
 * in pystrobe's chain when pystrobe last saw it, and its frames below may
 * have changed since. So pystrobe writes nothing at attach and nothing at a
 * thread's first walk (it only looks), and before each walk checks that the
 * thread's anchor is one the interpreter could have moved pystrobe's to
 * (anchor_explained). Where it is not, the walk is a whole one; a thread
 * where that comes again soon has a second writer: its anchors are left
 * alone from then on and it is walked as with --read-only
 * (prof_fcache_usable).
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

/* A full walk at least this often per thread. */
#define REFRESH 256
/* An anchor write costs a system call. When the anchors written lately were
 * all gone by the next sample (a stack that unwinds between samples), only
 * one sample in ANCHOR_PROBE writes; the others keep the interpreter's. */
#define ANCHOR_WASTED 2
#define ANCHOR_PROBE 8
/* How much of the data stack below the anchor the next prefetch takes: a
 * few frames, for an anchor that returns and moves to a caller. */
#define NOTE_BELOW 512
/* A thread's anchor found where neither pystrobe nor the interpreter put it
 * PROF_FCACHE_OTHER_STRIKES times (core.h) within OTHER_WINDOW walks has a
 * second writer. A few are not enough: a cached chain that was torn after
 * all makes the interpreter's own moves look foreign now and then, most
 * on a deep stack that keeps unwinding; another profiler's writes come at
 * each of its samples, so it reaches any such count within as many
 * walks. */
#define OTHER_WINDOW 4096

static uint64_t entry_hash_at(const void *ctx, uint32_t id)
{
    return util_hash_u64(((const struct prof_fcache *)ctx)->v[id].tstate);
}

static struct prof_fcache_entry *lookup(struct prof_fcache *fc, uint64_t tstate, int create)
{
    uint64_t h = util_hash_u64(tstate);
    uint32_t id;
    if (fc->index.cap) {
        for (size_t j = util_htab_first(&fc->index, h); (id = fc->index.slot[j]);
             j = util_htab_next(&fc->index, j))
            if (fc->v[id].tstate == tstate)
                return &fc->v[id];
    }
    if (!create || fc->count >= UINT32_MAX - 1 ||
        util_htab_reserve(&fc->index, 64, 1, (uint32_t)fc->count + 1, entry_hash_at, fc) < 0)
        return NULL;
    if (fc->count + 1 >= fc->cap) {
        size_t cap = fc->cap ? fc->cap * 2 : 32;
        struct prof_fcache_entry *v = realloc(fc->v, cap * sizeof *v);
        if (!v)
            return NULL;
        fc->v = v;
        fc->cap = cap;
    }
    id = (uint32_t)++fc->count;
    memset(&fc->v[id], 0, sizeof fc->v[id]);
    fc->v[id].tstate = tstate;
    util_htab_set(&fc->index, util_htab_free_slot(&fc->index, h), id);
    return &fc->v[id];
}

/* Remove entry id; the last entry takes its id (entries are renumbered). */
static void remove_entry(struct prof_fcache *fc, uint32_t id)
{
    struct prof_fcache_entry *e = &fc->v[id];
    uint32_t last = (uint32_t)fc->count;
    util_htab_remove(&fc->index, util_htab_slot_of(&fc->index, util_hash_u64(e->tstate), id),
                     entry_hash_at, fc);
    free(e->frames);
    free(e->res);
    free(e->res_kind);
    if (id != last) {
        size_t j = util_htab_slot_of(&fc->index, util_hash_u64(fc->v[last].tstate), last);
        *e = fc->v[last];
        util_htab_set(&fc->index, j, id);
    }
    memset(&fc->v[last], 0, sizeof fc->v[last]);
    fc->count--;
}

/* Room for n frames and their resolutions in e (kept in step). */
static int reserve_entry(struct prof_fcache_entry *e, size_t n)
{
    if (n <= e->cap)
        return 0;
    struct cpy_raw_frame *f = realloc(e->frames, n * sizeof *f);
    if (f)
        e->frames = f;
    struct pys_frame *r = realloc(e->res, n * sizeof *r);
    if (r)
        e->res = r;
    uint8_t *k = realloc(e->res_kind, n);
    if (k)
        e->res_kind = k;
    if (!f || !r || !k)
        return PYS_E_NOMEM;
    e->cap = n;
    return 0;
}

/*
 * Where this walk of n frames will put the anchor (see the end of
 * prof_fcache_walk): the first frame below the top that the thread owns,
 * on its data stack, or n if none. Only such a frame moves the anchor and
 * bumps its sequence number as it is removed (at its return). Not a
 * generator's: one that yields is set aside without moving the anchor,
 * which would then be missing from the next walk. Nor an entry frame on
 * the C stack: it is popped without moving the anchor, and the next call
 * from C at the same depth puts another at the same address, over callers
 * that may have moved on (a function calling next() from two lines kept,
 * from the cache, the line it had when the cache was filled).
 */
static size_t next_anchor(const struct cpy_raw_frame *raw, size_t n)
{
    size_t a = 1;
    while (a < n && raw[a].owner != CPY_OWNER_THREAD)
        a++;
    return a;
}

/* Whether the cached frame f may serve as the anchor: one whose removal
 * moves the anchor (see next_anchor), or the thread's base frame, never
 * removed. The interpreter moves the anchor to the caller of the frame it
 * removes, which may be an entry frame: not one to trust. */
static int anchor_trusted(const struct cpy_thread *t, const struct cpy_raw_frame *f)
{
    return f->owner == CPY_OWNER_THREAD || (t->base_frame != 0 && f->addr == t->base_frame);
}

/*
 * Could the interpreter alone have turned the anchor pystrobe left (e->anchor,
 * e->seq: written, or seen and kept) into `a` with sequence number `seq`?
 * It moves an anchor only as that frame is removed, to its caller, adding 1
 * to the number each time; so after d moves the anchor is d frames below
 * pystrobe's in the chain pystrobe saw (e->frames), those frames having
 * stayed until they returned. Fewer when pystrobe's own write came after
 * some of the moves (they then count without moving it), and one more when
 * the read caught the interpreter between its two stores. Moves end at an
 * entry frame (popped without moving the anchor, which then stays at its
 * address on the C stack, where no frame that moves it lives) and at the
 * base frame (never removed). They are not followed past another frame
 * the thread does not own (a generator's): anything is taken as explained
 * there, the walk's own checks decide. So is everything when the chain is
 * unknown, and below the bottom of a cut chain.
 */
static int anchor_explained(const struct prof_fcache_entry *e, uint8_t first_shim_owner, uint64_t a,
                            uint64_t seq)
{
    if (a == e->anchor && seq == e->seq)
        return 1;
    if (e->anchor == 0) /* no frame is at 0: the interpreter never moves it */
        return a == 0;
    size_t p = 0;
    while (p < e->n && e->frames[p].addr != e->anchor)
        p++;
    if (p == e->n)
        return 1;
    uint64_t d = seq - e->seq; /* a number that went back is huge: bounded by the chain */
    size_t i;
    for (i = p; i < e->n && i - p <= d + 1; i++) {
        if (e->frames[i].addr == a)
            return 1;
        if (i == p || e->frames[i].owner == CPY_OWNER_THREAD)
            continue; /* one whose code was cleared as it returned too */
        return e->frames[i].owner < first_shim_owner;
    }
    /* Past the bottom of a chain cut at max_frames: frames pystrobe did not see. */
    return i == e->n && e->cut != 0;
}

int prof_fcache_usable(struct pys_session *s, const struct cpy_thread *t)
{
    struct prof_fcache *fc = &s->fcache;
    struct prof_fcache_entry *e = lookup(fc, t->addr, 0);
    if (!e)
        return 1;
    e->walks++;
    if (!e->other_writer && e->n > 0 &&
        !anchor_explained(e, s->off.first_shim_owner, t->last_profiled_frame,
                          t->last_profiled_frame_seq)) {
        /* Not trusted in any case: this walk is a whole one (a miss). */
        e->n = 0;
        if (e->strikes == 0 || e->walks - e->first_strike > OTHER_WINDOW) {
            e->strikes = 0;
            e->first_strike = e->walks;
        }
        if (++e->strikes >= PROF_FCACHE_OTHER_STRIKES) {
            e->other_writer = 1;
            fc->other_writers++;
        }
    }
    if (!e->other_writer)
        return 1;
    if (e->epoch != s->snapshots) {
        e->epoch = s->snapshots;
        fc->seen++;
        fc->other_writer_walks++;
    }
    return 0;
}

/*
 * A walk to the anchor that found it as the current frame, its code object
 * cleared (the interpreter clears a frame's as it pops it): has the anchor
 * returned since the thread state was read? Then the stack it returned to,
 * at that moment, is the cached chain below it, every caller still at its
 * call. It is the anchor the cache knows if it still goes back to the
 * cached caller and its position lies in the cached code object: a frame of
 * another code pushed at the same address after the anchor had gone (our
 * write came too late) fails that, and its caller may have moved on since
 * the cache saw it.
 */
static int anchor_returned(struct pys_session *s, const struct prof_fcache_entry *e,
                           size_t pos, uint64_t prev, uint64_t below)
{
    const struct prof_code *pc;
    if (s->walker.raw[0].code != 0 || !s->walker.raw[0].shim || prev != below || pos + 1 >= e->n ||
        e->frames[pos].code == 0)
        return 0;
    if (prof_codecache_get(&s->codes, &s->strings, &s->mem, &s->off, &s->sym,
                           e->frames[pos].code, &pc) < 0)
        return 0;
    return cpy_code_holds(&s->off, &pc->code, e->frames[pos].code, s->walker.raw[0].instr_ptr);
}

/*
 * The walk down to the anchor of entry e (see the top of this file). 0 with
 * *n the chain's length on a hit (*n = -1: no hit, walk the whole chain),
 * *returned when the anchor was found returned; or an error (the caller
 * reads the thread again; the cache is kept).
 */
static int walk_hit(struct pys_session *s, struct prof_walk *w, const struct cpy_thread *t,
                    struct prof_fcache_entry *e, int *n, int *returned)
{
    struct prof_fcache *fc = &s->fcache;
    uint64_t anchor = t->last_profiled_frame;
    size_t pos = 0;
    while (pos < e->n && e->frames[pos].addr != anchor)
        pos++;
    uint64_t prev = 0;
    /* The next prefetch takes the data stack from a little below the lower
     * of this anchor and the last one: a stack that sits near its top is
     * not copied whole at each sample, one that keeps unwinding to its
     * bottom is. */
    uint64_t low = e->last_stop && e->last_stop < anchor ? e->last_stop : anchor;
    s->walker.stack.note_from = low > NOTE_BELOW ? low - NOTE_BELOW : 0;
    e->last_stop = anchor;
    int gen_asked = prof_torn_ask_own_copy(s, t);
    int k = pos < e->n && anchor_trusted(t, &e->frames[pos])
                ? cpy_stack_walk_to(&s->mem, &s->off, t, &s->walker.stack, anchor, s->walker.raw,
                                    s->walker.max, &prev)
                : PYS_E_NOTFOUND;
    s->walker.stack.note_from = 0;
    if (gen_asked && s->walker.stack.second_len > 0)
        s->gen.after_mark = s->walker.stack.second_mark;
    /* Generators' frames among those read: the next batch copies them twice,
     * after the thread state (objframes.c), as for a walk without the cache. */
    if (k > 0)
        prof_objframes_note(s, t, s->walker.raw, (size_t)k);
    /* The chain was torn (it ended short of the base frame), or memory the
     * thread state names is gone (a chunk freed as the stack unwound: that
     * state is out of date): no whole walk of the same state can do
     * better, it reads the same memory first. */
    if (k == PYS_E_EXITED || k == PYS_E_NOMEM || k == PYS_E_CORRUPT || k == PYS_E_BADADDR)
        return k;
    uint64_t below = pos + 1 < e->n ? e->frames[pos + 1].addr : e->cut;
    *returned = k == 1 && anchor_returned(s, e, pos, prev, below);
    /* Read with its code object cleared, the anchor has returned since the
     * thread state was read (that state is out of date), or a frame pushed
     * at its address since has. Read again: the interpreter will have moved
     * the anchor to the caller. */
    if (k > 0 && s->walker.raw[k - 1].code == 0 && !*returned)
        return PYS_E_CORRUPT;
    /* The cached frames below the anchor that follow the k read: all of
     * them, or for a cut chain as many as fill it again (at least one, and
     * its frames must fill it). */
    size_t rest = pos < e->n ? e->n - pos - 1 : 0, take = rest;
    if (e->cut && k > 0)
        take = (size_t)k + rest >= s->walker.max - 1 && (size_t)k < s->walker.max - 1
                   ? s->walker.max - 1 - (size_t)k
                   : 0;
    int ok = k > 0 && (*returned || s->walker.raw[k - 1].code == e->frames[pos].code) &&
             prev == below && (e->cut ? take > 0 : (size_t)k + rest <= s->walker.max);
    /* Frames copied at different moments may mix two call chains: torn.c
     * checks those above the anchor, and that the anchor has not returned
     * since the thread state was read (the frames below it may no longer be
     * the cached ones then). Not an anchor found returned: it has moved by
     * definition, and with nothing read above it there is nothing to mix.
     * Torn, a whole walk from the same state would be torn too: the caller
     * reads the thread again, the cache is still good. */
    if (ok && !*returned &&
        !prof_torn_cached(s, w, t, (size_t)k, anchor, next_anchor(s->walker.raw, (size_t)k)))
        return PYS_E_CORRUPT;
    *n = -1;
    if (!ok)
        return 0;
    /* The cached tail (and what it resolved to) moves, in place, to follow
     * the k frames just read; most often it is already there. A cut chain
     * is cut again above the first cached frame left. */
    if (take < rest)
        e->cut = e->frames[pos + 1 + take].addr;
    size_t len = (size_t)k + take;
    if (reserve_entry(e, len) < 0) {
        e->n = 0;
        return PYS_E_NOMEM;
    }
    if ((size_t)k != pos + 1) {
        memmove(e->frames + k, e->frames + pos + 1, take * sizeof *e->frames);
        memmove(e->res + k, e->res + pos + 1, take * sizeof *e->res);
        memmove(e->res_kind + k, e->res_kind + pos + 1, take);
    }
    memcpy(e->frames, s->walker.raw, (size_t)k * sizeof *s->walker.raw);
    e->n = len;
    w->cut = e->cut;
    if (e->res_valid)
        w->tail_start = (size_t)k;
    /* Full hit: our anchor still in place and at most the top frame above
     * it. */
    if (anchor == e->anchor && k <= 2)
        fc->hits++;
    else
        fc->partial_hits++;
    fc->frames_cached += take;
    fc->frames_read += (uint64_t)k;
    e->since_full++;
    *n = (int)len;
    return 0;
}

/* A whole walk of thread t, kept in e: its length or an error (the caller
 * retries, with e as it was: nothing in it came from this walk). */
static int walk_whole(struct pys_session *s, struct prof_walk *w, const struct cpy_thread *t,
                      struct prof_fcache_entry *e)
{
    struct prof_fcache *fc = &s->fcache;
    fc->misses++;
    int n = cpy_stack_walk(&s->mem, &s->off, t, &s->walker.stack, s->walker.raw, s->walker.max);
    if (n < 0)
        return n;
    if (n > 0)
        prof_objframes_note(s, t, s->walker.raw, (size_t)n);
    /* Checked as a hit's frames are (a second copy, and the anchor), even a
     * chain copied in one read. A cut chain's last frame still has the
     * caller it was cut at. */
    uint64_t cut = s->walker.stack.cut;
    if (!prof_torn_whole(s, w, t, (size_t)n, cut, next_anchor(s->walker.raw, (size_t)n)))
        return PYS_E_CORRUPT;
    fc->frames_read += (uint64_t)n;
    e->since_full = 0;
    /* Remember the chain (it reached the base frame: the walk checks). */
    e->res_valid = 0;
    if (reserve_entry(e, (size_t)n) < 0) {
        e->n = 0;
        return PYS_E_NOMEM;
    }
    /* A thread without frames (n = 0) may have no array yet. */
    if (n > 0)
        memcpy(e->frames, s->walker.raw, (size_t)n * sizeof *s->walker.raw);
    e->n = (size_t)n;
    e->cut = w->cut = cut;
    return n;
}

/*
 * After a walk of n frames (hit: from the cache) that e->frames now holds:
 * leave the anchor for the next sample, writing it into the thread state
 * where it moves. n, or PYS_E_EXITED.
 */
static int leave_anchor(struct pys_session *s, const struct cpy_thread *t,
                        struct prof_fcache_entry *e, int n, int hit)
{
    uint64_t anchor = t->last_profiled_frame;
    /* A thread's first walk only looks: the anchor another profiler keeps,
     * if one does, is not overwritten before the next walk has had a chance
     * to see it move (prof_fcache_usable). */
    if (!e->looked) {
        e->looked = 1;
        e->seq = t->last_profiled_frame_seq;
        e->anchor = anchor;
        return n;
    }
    /* Anchor at the top frame's caller: a hot leaf that keeps returning and
     * being called again then leaves the anchor (and the cache) in place.
     * Not at a generator's frame nor at an entry frame (next_anchor): the
     * first frame below them that lives on the data stack stays put. With
     * none, the top frame if it lives there, else no anchor (0: the next
     * walk is a whole one). */
    size_t a = next_anchor(e->frames, (size_t)n);
    uint64_t want = 0;
    if (a < (size_t)n)
        want = e->frames[a].addr;
    else if (n > 0 && e->frames[0].owner == CPY_OWNER_THREAD)
        want = t->current_frame;
    e->seq = t->last_profiled_frame_seq;
    /* After a hit the interpreter's anchor is in the chain: it may stay. */
    if (hit && want != anchor && e->wasted >= ANCHOR_WASTED && ++e->skipped % ANCHOR_PROBE) {
        e->anchor = anchor;
        return n;
    }
    e->anchor = want;
    if (n > 0 && want != anchor) {
        e->wrote = 1;
        int rc = mem_write_u64(&s->mem, t->addr + s->off.thread_state.last_profiled_frame,
                               want);
        if (rc == PYS_E_EXITED)
            return rc;
        if (rc < 0)
            e->n = 0; /* the anchor is not ours: do not trust the cache */
    }
    return n;
}

int prof_fcache_walk(struct pys_session *s, struct prof_walk *w, const struct cpy_thread *t)
{
    struct prof_fcache *fc = &s->fcache;
    struct prof_fcache_entry *e = lookup(fc, t->addr, 1);
    uint64_t anchor = t->last_profiled_frame;
    int n = -1, rc;

    if (!e)
        return PYS_E_NOMEM;
    if (e->epoch != s->snapshots) {
        e->epoch = s->snapshots;
        fc->seen++;
    }
    w->entry = e;
    w->tail_start = SIZE_MAX;
    int same_anchor_ok = anchor != e->anchor || t->last_profiled_frame_seq == e->seq;
    int returned = 0;
    /* Did the anchor written at the last sample last until this one? */
    if (e->wrote)
        e->wasted = anchor == e->anchor && t->last_profiled_frame_seq == e->seq ? 0 : e->wasted + 1;
    e->wrote = 0;
    if (e->n && anchor != 0 && same_anchor_ok && e->since_full < REFRESH &&
        (rc = walk_hit(s, w, t, e, &n, &returned)) < 0)
        return rc;
    int hit = n >= 0;
    if (!hit && (n = walk_whole(s, w, t, e)) < 0)
        return n;
    /* The anchor returned: the interpreter has moved it to its caller
     * (bumping the sequence number); ours stays as it was, so that the next
     * sample takes the moved one. */
    if (returned)
        return n;
    /* From here on e->frames is the chain (the walk's result); the
     * resolutions of its tail stay valid, those of the frames above it are
     * stored by prof_fcache_resolved. */
    if (w->tail_start == SIZE_MAX)
        e->res_valid = 0;
    return leave_anchor(s, t, e, n, hit);
}

void prof_fcache_resolved(struct pys_session *s, const struct prof_walk *w, size_t nraw, int ok)
{
    struct prof_fcache_entry *e = w->entry;
    if (!e)
        return;
    e->res_valid = 0;
    /* A chain whose frames could not all be named (most often one read
     * while it changed) is not kept: the next walk is a whole one. */
    if (!ok)
        e->n = 0;
    if (!ok || nraw != e->n || nraw > e->cap)
        return;
    /* The tail's resolutions are in place already: store the rest. */
    size_t fresh = w->tail_start < nraw ? w->tail_start : nraw;
    if (fresh > 0) {
        memcpy(e->res, s->resolved.frames, fresh * sizeof *e->res);
        memcpy(e->res_kind, s->resolved.kind, fresh);
    }
    e->res_valid = 1;
}

void prof_fcache_sweep(struct pys_session *s)
{
    struct prof_fcache *fc = &s->fcache;
    /* Every entry was seen (the usual case): nothing to look for. */
    if (fc->seen == fc->count)
        return;
    /* From the last id down: a removal moves the last entry, already
     * looked at, into the removed one's id. */
    for (size_t id = fc->count; id >= 1; id--)
        if (fc->v[id].epoch != s->snapshots)
            remove_entry(fc, (uint32_t)id);
}

void prof_fcache_release(struct prof_fcache *fc)
{
    for (size_t id = 1; id <= fc->count; id++) {
        free(fc->v[id].frames);
        free(fc->v[id].res);
        free(fc->v[id].res_kind);
    }
    free(fc->v);
    util_htab_release(&fc->index);
    memset(fc, 0, sizeof *fc);
}
