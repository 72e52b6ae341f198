/*
 * torn: is a walk one moment of the target?
 *
 * A walk reads a running target over time, and even one process_vm_readv
 * is not one moment: the target runs on while the kernel copies, and a copy
 * can be paused midway (the reader's CPU taken away). A chain put together
 * from reads made at two moments can mix two call chains: an old caller
 * under new callees. Such a walk must be neither reported nor cached.
 *
 * Every check of that lives here (the few asked for every frame are inline,
 * in core.h's torn section); the walkers (cpython/frames.c), the frame
 * cache (framecache.c) and the snapshot (snapshot.c) only ask. A walk comes
 * in with the reads it came from (its struct prof_walk: did a read reach
 * the target since its thread state was read; s->walker.stack: which copy each
 * frame came from); out comes a verdict (one moment, torn, or decided
 * later) and what to read again. The answer, in the order it is looked for:
 *
 *  1. Needs no second read: a chain copied in one read from a thread that
 *     could not have run meanwhile (walk_one_moment, thread_may_move), and
 *     the top frame copied after its caller, when the caller's second copy
 *     comes from the same unpaused batch (top_settled); a later read checks
 *     the top frame too.
 *  2. The batch's second copies: each snapshot's batched read ends with a
 *     second copy of what the last walks need checked (chain_hint,
 *     prof_anchor_hint; mem_recheck_hint), made after every first copy.
 *     A frame whose code object, caller and (a caller's) position are the
 *     same in both was in place across the whole batch (chain_rechecked),
 *     unless a pause left time to leave and come back (batch_settles).
 *  3. A walk's own second copy, when it read past the batch (the frame
 *     cache's walk to the anchor: prof_torn_ask_own_copy, prof_torn_own_copy).
 *  4. A second read, made twice over (one read is no moment: chain_unchanged):
 *     put off to the snapshot's end, where every thread's is made at once
 *     (put_off, prof_torn_deferred), or made then and there
 *     (chain_unchanged).
 * Naming the frames adds checks of the chain's shape (prof_torn_frame_*):
 * a returned frame below a live one, callee and caller not adjacent on the
 * data stack, a caller still in its prologue, a caller of an inline call
 * that was running its own code when copied (prof_torn_calling), a
 * generator's or coroutine's frame that resumes a generator (an await, a
 * yield from, a for loop) under a plain frame (prof_torn_resuming). The
 * calling check is what tells a top frame copied from above the stack's
 * top (a frame that returned, or another chain's, with a caller field that
 * still names the frame below it) when the two chains' frames have equal sizes: its
 * callee's bytes may be older than the caller's, which no second copy of
 * the caller can show. The resuming check tells a callee copied before a
 * coroutine's object was freed and its memory taken by another's, whose
 * frame then lies where its caller's lay: a loop that goes round the same
 * turns (asyncio's queues, then a task's chain of coroutines) brings both
 * copies of every frame back to what the first showed, one moment each.
 *
 * A generator's frame copied suspended, its caller inferred (objframes.c:
 * cpy_raw_frame.inferred), is the one frame whose caller field may read 0
 * in a copy; its caller (loose) is shown at the call it made then, so its
 * position is not compared, nor asked to be a call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

/* How far past the data stack's top the second copies of a chain reach:
 * HINT_SLACK within the top's page, or up to GROW_SLACK within the mapped
 * start of its chunk (grow_end). */
#define HINT_SLACK 512
#define GROW_SLACK (8u << 10)

/* --- the comparisons -------------------------------------------------- */

/*
 * Whether the position of raw[i] of a walk must be the same in a second
 * copy: a caller (i > 0: its callee, raw[i - 1], is in the walk), whose
 * position stays put while the callee runs, so that a copy of it made
 * before it called another frame at the callee's address shows. Not the top
 * frame (raw[0]: it runs), nor a shim (no line is shown for it).
 */
static int pos_checked(const struct cpy_raw_frame *raw, size_t i)
{
    return i > 0 && !raw[i].shim && !raw[i].loose;
}

/*
 * Whether frame raw[i] of a chain raw[..k), its code object word, caller
 * word and position read again (code, prev, pos), is still the frame the
 * walk saw: the same code object, called from the same frame (the next one
 * in the chain; for the last, last_prev), and, if pos_checked, at the same
 * position. The one comparison behind every second copy's check.
 */
static int frame_unmoved(const struct cpy_offsets *o, const struct cpy_raw_frame *raw, size_t i,
                         size_t k, uint64_t last_prev, uint64_t code, uint64_t prev, uint64_t pos)
{
    uint64_t caller = i + 1 < k ? raw[i + 1].addr : last_prev;
    return (code & ~o->stackref_mask) == raw[i].code &&
           (prev == caller || (raw[i].inferred && prev == 0)) &&
           (!pos_checked(raw, i) || pos == raw[i].instr_ptr);
}

/*
 * 3.8-3.10: whether the last of frames raw[..k) of a chain, which ends
 * there without a caller (last_prev 0), must still be executing in a
 * second read. A frame object is copied upwards, its caller word (f_back)
 * before its executing flag, and a generator links its caller before it
 * runs and unlinks it after it stops: the one copy of a generator's frame
 * resumed midway shows it running with no caller, a chain cut short that
 * no code makes (a pipeline's innermost stage alone). Read again, it is
 * running with its caller (the caller word differs) or stopped again (the
 * flag differs). A thread's real bottom frame runs on as long as the
 * thread.
 */
static int bottom_running(const struct pys_session *s, size_t from, size_t k, uint64_t last_prev)
{
    return s->off.traits.frames == CPY_FRAMES_OBJECT &&
           CPY_HAS(&s->off, interpreter_frame, executing) && k > from && last_prev == 0;
}

int prof_torn_own_copy(const struct cpy_offsets *o, const struct cpy_stack *st,
                       const struct cpy_raw_frame *raw, size_t from, size_t k, uint64_t last_prev,
                       int pos_k)
{
    const struct cpy_frame_offsets *f = &o->interpreter_frame;
    uint64_t lo = st->second_addr, po;
    size_t pw = cpy_frame_pos_field(o, &po);
    if (st->second_len < 8)
        return -1;
    for (size_t i = from; i < k + (pos_k != 0); i++) {
        int pos = pos_checked(raw, i);
        uint64_t at[3] = {raw[i].addr + f->executable, raw[i].addr + f->previous, raw[i].addr + po};
        size_t w[3] = {8, 8, pw};
        for (int j = i < k ? 0 : 2; j < (pos ? 3 : 2); j++)
            if (at[j] < lo || at[j] - lo > st->second_len - w[j])
                return -1;
    }
    for (size_t i = from; i < k + (pos_k != 0); i++) {
        uint64_t code, prev, pos = 0;
        if (pos_checked(raw, i))
            memcpy(&pos, st->second + (raw[i].addr + po - lo), pw);
        pos = cpy_frame_pos_value(o, pos);
        if (i == k) {
            if (pos_checked(raw, i) && pos != raw[i].instr_ptr)
                return 0;
            continue;
        }
        memcpy(&code, st->second + (raw[i].addr + f->executable - lo), 8);
        memcpy(&prev, st->second + (raw[i].addr + f->previous - lo), 8);
        if (!frame_unmoved(o, raw, i, k, last_prev, code, prev, pos))
            return 0;
    }
    return 1;
}

/* --- where the walk's bytes came from --------------------------------- */

/*
 * Did the walk just made see one moment of the target? walk_one_moment:
 * its frames were copied from the data stack in one read (a single copy, or
 * all from the snapshot's batched read), so the chain needs no second read.
 * walk_with_state: the thread state came from the same batched read
 * too, so even the state's anchor needs none.
 */
static int walk_with_state(const struct pys_session *s, const struct prof_walk *w)
{
    /* No read reached the target since the thread state was read: all came
     * from the snapshot's one batched read. Frames read on their own
     * (generators') are left out: they race with resumes even within one
     * batch. */
    return s->walker.stack.direct == 0 && !mem_read_since(&s->mem, w->mark);
}

static int walk_one_moment(const struct pys_session *s, const struct prof_walk *w)
{
    /* A frame read on its own is never taken on trust, even alone: a
     * generator's (or 3.8-3.10's heap) frame can be caught suspended, its
     * caller already unlinked. */
    return s->walker.stack.direct == 0 && (s->walker.stack.regions == 1 || walk_with_state(s, w));
}

/*
 * How many of the walk's top frames raw[0..n) need no second read: 1 when
 * the top frame is on the heap (a generator's, or 3.8-3.10's frame object)
 * and was copied after its caller (both from the batch, the top's piece
 * after the caller's: frames on the heap are read in chain order,
 * objframes.c), and the caller is checked against the same batch's second
 * copy. Its
 * bytes then show the top at the moment they were read, and its caller was
 * in place from before that moment until its second copy, a moment later:
 * the two were a stack at that moment, however the top has moved on since.
 * 0 when the two copies of the caller may lie far apart: after a batch
 * that was paused midway (mem_batch_paused), or for a walk that read past
 * the batch (its copy made by a read whose pauses nothing measures, its
 * check by a later read: prof_torn_walk and the others then check from
 * raw[0]). The caller can then have returned, and a new call of the same
 * code from the same frame have come back to the same position by the
 * second copy, with the top copied meanwhile from another chain whose
 * frames have the same sizes: only a second copy of the top shows it.
 * 0 too for a walk from a later top (prof_walk.later_top): the copy of
 * the thread state that named its top came after the top's copies, which
 * need not show it as the top (later_top_kept).
 */
static size_t top_settled(const struct pys_session *s, const struct prof_walk *w,
                          const struct cpy_raw_frame *raw, size_t n)
{
    if (n < 2 || w->later_top || mem_batch_paused(&s->mem) || mem_read_since(&s->mem, w->mark))
        return 0;
    /* A top on the data stack always has its own second copy checked: a
     * batch of many pieces is slow as a matter of course (tens of
     * microseconds on an idle machine, not judged paused), time enough for
     * the program to leave the caller and call it again at the same
     * position while the top is copied from another chain whose frames
     * have the same sizes. A top that has only returned since still
     * passes on 3.11-3.13 (its bytes stay); on 3.14+ (cleared) its thread
     * is read again. Kept for the frames on
     * the heap (generators', 3.8-3.10's frame objects), whose tops change
     * every few tens of nanoseconds: their second copies would fail most
     * walks, and only a pause shows such a mix there (batch_settles). */
    if (s->off.traits.frames != CPY_FRAMES_OBJECT && raw[0].owner != CPY_OWNER_GENERATOR)
        return 0;
    size_t fsize = s->off.traits.frames == CPY_FRAMES_OBJECT ? cpy_frame_object_head(&s->off)
                                                             : (size_t)s->off.interpreter_frame.size;
    return mem_batch_copied_after(&s->mem, raw[0].addr, fsize, raw[1].addr, fsize) ? 1 : 0;
}

/*
 * Could thread t have run Python code while its walk's frames were copied
 * (so that the copy, even one read, may mix two moments)? Not if it held no
 * GIL when its state was read nor at the batch's end (3.15's own flag, from
 * the batch's second copy): a thread without the GIL moves no frame. Before
 * 3.15, only the GIL's holder as the interpreter read said (gil_holder; 0:
 * none, or unknown) may have. And always when the frames came from a read
 * made after the batch, or the walk is from a later top (the thread moved).
 */
static int thread_may_move(struct pys_session *s, const struct prof_walk *w,
                           const struct cpy_thread *t, uint64_t gil_holder)
{
    if (!walk_with_state(s, w) || w->later_top)
        return 1;
    if (t->holds_gil < 0)
        return gil_holder == 0 || t->addr == gil_holder;
    if (t->holds_gil)
        return 1;
    const uint8_t *c = mem_recheck_view(&s->mem, t->addr + s->off.thread_state.holds_gil, 4);
    int32_t v;
    if (!c)
        return 1;
    memcpy(&v, c, 4);
    return v != 0;
}

/*
 * Whether the batch's second copies, all found the same as the first,
 * show that the walk's frames were one chain across the batch. Not when
 * the batch was paused midway (mem_batch_paused) and the walk's frames
 * raw[0..n) hold frames on the heap (objframes.c), each a piece of its
 * own: the batch copies those after its other spans, a caller before its
 * callee, and
 * again in the reverse order, so the top frame's two copies are adjacent
 * pieces and each caller's two copies lie around its callees', the data
 * stack's around them all. Found the same, a frame's two copies show it
 * stayed only if it could not leave and come back between them; a pause
 * leaves time for that: the program can go to another chain whose frames
 * lie at the same addresses and back (a generator's slot reused by a
 * coroutine, the same data-stack slot by another function) while the
 * frames above are copied both times at the other chain. Each frame is
 * then the same in its two copies and the chain a mix. A read made after
 * the batch, twice (chain_unchanged), the top frame's too, tells.
 * A chain copied with the data stack needs no such read: its frames are
 * one piece, their second copies after it.
 */
static int batch_settles(const struct pys_session *s, const struct cpy_raw_frame *raw, size_t n)
{
    if (!mem_batch_paused(&s->mem))
        return 1;
    if (s->off.traits.frames == CPY_FRAMES_OBJECT)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (raw[i].owner == CPY_OWNER_GENERATOR)
            return 0;
    return 1;
}

/* --- second copies in the next batch ---------------------------------- */

/*
 * Where the second copies hinted above thread t's stack top end. A stack
 * deeper at the next sample than now finds its new frames' second copies in
 * that batch only if they reach that far; without them its walk is checked
 * by a read of its own, later, which a fast-changing stack fails the more
 * often the deeper it is: kept samples would lean to shallow stacks. So
 * while the top lies in the first CPY_CHUNK_MIN bytes of its chunk (mapped
 * whatever the chunk's size), up to GROW_SLACK above it, from the
 * snapshot's budget; else a little, within the top's page.
 */
static uint64_t grow_end(struct pys_session *s, const struct cpy_thread *t)
{
    uint64_t top = t->datastack_top, limit = t->datastack_chunk + CPY_CHUNK_MIN;
    if (top >= t->datastack_chunk && top < limit && s->torn.grow_left > 0) {
        uint64_t room = limit - top;
        if (room > GROW_SLACK)
            room = GROW_SLACK;
        if (room > s->torn.grow_left)
            room = s->torn.grow_left;
        s->torn.grow_left -= (size_t)room;
        return top + room;
    }
    uint64_t page_end = (top + MEM_PAGE_SIZE - 1) & ~(uint64_t)(MEM_PAGE_SIZE - 1);
    return page_end - top > HINT_SLACK ? top + HINT_SLACK : page_end;
}

/* Have the next snapshot's batch end with second copies of frames
 * raw[from..k) (and raw[k]'s position with pos_k), and of thread t's data
 * stack above them (frames called since will be there). */
static void chain_hint(struct pys_session *s, const struct cpy_thread *t,
                       const struct cpy_raw_frame *raw, size_t from, size_t k, int pos_k)
{
    const struct cpy_frame_offsets *f = &s->off.interpreter_frame;
    uint64_t po;
    size_t pw = cpy_frame_pos_field(&s->off, &po);
    /* Code object, caller and position: one span where they lie close. */
    uint64_t lo = f->executable < f->previous ? f->executable : f->previous;
    uint64_t hi = (f->executable < f->previous ? f->previous : f->executable) + 8;
    uint64_t plo = po < lo ? po : lo, phi = po + pw > hi ? po + pw : hi;
    /* From the first frame to past the stack's top (grow_end), hinted
     * first: the frames below merge into it. */
    uint64_t top = t->datastack_top;
    if (k > from && raw[from].addr >= t->datastack_chunk && raw[from].addr < top) {
        uint64_t end = grow_end(s, t);
        if (end - raw[from].addr <= MEM_RECHECK_SPAN)
            mem_recheck_hint(&s->mem, raw[from].addr, (size_t)(end - raw[from].addr));
    }
    for (size_t i = from; i < k + (pos_k != 0); i++) {
        int pos = pos_checked(raw, i);
        if (i == k) {
            if (pos)
                mem_recheck_hint(&s->mem, raw[i].addr + po, pw);
        } else if (pos && phi - plo <= 64) {
            mem_recheck_hint(&s->mem, raw[i].addr + plo, (size_t)(phi - plo));
        } else {
            if (hi - lo <= 64) {
                mem_recheck_hint(&s->mem, raw[i].addr + lo, (size_t)(hi - lo));
            } else {
                mem_recheck_hint(&s->mem, raw[i].addr + f->executable, 8);
                mem_recheck_hint(&s->mem, raw[i].addr + f->previous, 8);
            }
            if (pos)
                mem_recheck_hint(&s->mem, raw[i].addr + po, pw);
        }
    }
}

void prof_anchor_hint(struct pys_session *s, const struct cpy_thread *t)
{
    /* The GIL flag (thread_may_move), a few words from the anchor in
     * the thread state: the same piece. */
    if (t->holds_gil >= 0)
        mem_recheck_hint(&s->mem, t->addr + s->off.thread_state.holds_gil, 4);
    if (!s->use_fcache)
        return;
    uint64_t a = s->off.thread_state.last_profiled_frame,
             q = s->off.thread_state.last_profiled_frame_seq;
    if (q == a + 8) {
        mem_recheck_hint(&s->mem, t->addr + a, 16);
    } else {
        mem_recheck_hint(&s->mem, t->addr + a, 8);
        mem_recheck_hint(&s->mem, t->addr + q, 8);
    }
}

/* --- the checks against second copies and second reads ---------------- */

/* The batch's second copy of the len (at most 8) bytes at addr into *v,
 * zero-extended; 0 if none. */
static int second_copy(struct pys_session *s, uint64_t addr, size_t len, uint64_t *v)
{
    const uint8_t *c = mem_recheck_view(&s->mem, addr, len);
    *v = 0;
    if (c)
        memcpy(v, c, len);
    return c != NULL;
}

/*
 * Whether the top frame raw[0] of a walk from a later top (prof_torn_later_top)
 * can be a top of one moment: 1 if the walk is not from one. Its copies
 * were made before the thread state's copy that named it the top, when it
 * may still have been calling the frame the first walk started from (a
 * generator resuming the next stage inline): shown as the top, it would be
 * a stack one frame shallower than the moment, at the call's line. Kept
 * only when its position is the same in the batch's second copy (its code
 * object and caller are checked with its callers', as the top is not
 * exempt: top_settled), and its frame came from the batch: 0 otherwise,
 * and the thread is read again.
 */
static int later_top_kept(struct pys_session *s, const struct prof_walk *w,
                          const struct cpy_raw_frame *raw, size_t n)
{
    uint64_t po, p;
    size_t pw = cpy_frame_pos_field(&s->off, &po);
    if (!w->later_top || n == 0)
        return 1;
    if (mem_read_since(&s->mem, w->mark) || !second_copy(s, raw[0].addr + po, pw, &p))
        return 0;
    return cpy_frame_pos_value(&s->off, p) == raw[0].instr_ptr;
}

/*
 * Frames raw[from..k) (and raw[k]'s position with pos_k) against the
 * batch's second copies, without a read: 1 if every frame's code, caller
 * and position were copied a second time and are unchanged, 0 if one
 * changed (the walk is torn), -1 if a copy is missing or the walk took
 * something from outside the batch (check by reading). With t, the
 * thread's anchor and sequence number too (3.15).
 */
static int chain_rechecked(struct pys_session *s, const struct prof_walk *w,
                           const struct cpy_thread *t, const struct cpy_raw_frame *raw, size_t from,
                           size_t k, uint64_t last_prev, int pos_k)
{
    const struct cpy_frame_offsets *f = &s->off.interpreter_frame;
    uint64_t po;
    size_t pw = cpy_frame_pos_field(&s->off, &po);
    /* Second copies are read after the batch's first ones, not after a
     * read made since. */
    if (mem_read_since(&s->mem, w->mark))
        return -1;
    int missing = 0;
    uint64_t a, b;
    if (t) {
        if (!second_copy(s, t->addr + s->off.thread_state.last_profiled_frame, 8, &a) ||
            !second_copy(s, t->addr + s->off.thread_state.last_profiled_frame_seq, 8, &b))
            missing = 1;
        else if (a != t->last_profiled_frame || b != t->last_profiled_frame_seq)
            return 0;
    }

    uint64_t p;
    for (size_t i = from; i < k + (pos_k != 0); i++) {
        int pos = pos_checked(raw, i);
        if (pos && !second_copy(s, raw[i].addr + po, pw, &p)) {
            missing = 1;
            continue;
        }
        p = pos ? cpy_frame_pos_value(&s->off, p) : 0;
        if (i == k) {
            if (pos && p != raw[i].instr_ptr)
                return 0;
            continue;
        }
        if (!second_copy(s, raw[i].addr + f->executable, 8, &a) ||
            !second_copy(s, raw[i].addr + f->previous, 8, &b)) {
            missing = 1;
            continue;
        }
        if (!frame_unmoved(&s->off, raw, i, k, last_prev, a, b, p))
            return 0;
    }
    if (bottom_running(s, from, k, last_prev)) {
        if (!second_copy(s, raw[k - 1].addr + f->executing, 1, &a))
            missing = 1;
        else if (a != s->off.traits.executing)
            return 0;
    }
    return missing ? -1 : 1;
}

/*
 * Re-read the code, caller and position of frames raw[from..k) of a walk
 * and check that they are what the walk saw (frame_unmoved; the last one's
 * caller: last_prev). A caller's position counts: it stays put while its
 * callee runs, and one copied before it called another frame at the
 * callee's address would show the new callee under the old call's line.
 * With t, also that the thread's anchor and sequence number are still
 * `anchor` and `seq`; with pos_k, raw[k]'s position too. 1 if unchanged.
 *
 * Read twice over in one call (mem_readv_fresh_twice), and the same both
 * times: one read is no moment. Its pieces come in the chain's order, top
 * first, as the walk's own reads and a batch's first copies did, so a
 * chain that changed between the walk's copies of a callee and of its
 * caller (another chain's frames at the same addresses) and changed back
 * between the read's pieces of the two shows each piece as the walk saw
 * it. Read twice, every word kept its value across the moment between the
 * two reads, unless it left and came back between its two copies (as a
 * batch's second copies assume). The first read goes bottom first, the
 * second top first (segs in the chain's order), as a batch's copies nest:
 * the top frame, which moves on soonest, has its two copies adjacent, and
 * a walk checked a moment before it moves on is not failed for its move
 * between two copies far apart; each caller's copies lie around its
 * callees', which it outlives.
 */
static int chain_unchanged(struct pys_session *s, const struct cpy_thread *t,
                           const struct cpy_raw_frame *raw, size_t from, size_t k,
                           uint64_t last_prev, int pos_k, uint64_t anchor, uint64_t seq)
{
    const struct cpy_frame_offsets *f = &s->off.interpreter_frame;
    struct prof_torn *tn = &s->torn;
    if (!tn->verify) {
        tn->verify = malloc((s->opt.max_frames + 1) * sizeof *tn->verify);
        tn->segs = malloc((3 * s->opt.max_frames + 5) * sizeof *tn->segs);
        if (!tn->verify || !tn->segs)
            return 0;
    }
    uint64_t(*got)[3] = tn->verify;
    uint64_t po;
    size_t pw = cpy_frame_pos_field(&s->off, &po);
    size_t kp = k + (pos_k != 0);
    struct mem_seg *segs = tn->segs;
    uint64_t now_anchor = 0, now_seq = 0;
    size_t n = 0;
    if (t) {
        segs[n++] =
            (struct mem_seg){t->addr + s->off.thread_state.last_profiled_frame, &now_anchor, 8};
        segs[n++] =
            (struct mem_seg){t->addr + s->off.thread_state.last_profiled_frame_seq, &now_seq, 8};
    }
    for (size_t i = from; i < kp; i++) {
        if (i < k) {
            segs[n++] = (struct mem_seg){raw[i].addr + f->executable, &got[i][0], 8};
            segs[n++] = (struct mem_seg){raw[i].addr + f->previous, &got[i][1], 8};
        }
        got[i][2] = 0;
        if (pos_checked(raw, i))
            segs[n++] = (struct mem_seg){raw[i].addr + po, &got[i][2], pw};
    }
    uint8_t running = s->off.traits.executing;
    if (bottom_running(s, from, k, last_prev))
        segs[n++] = (struct mem_seg){raw[k - 1].addr + f->executing, &running, 1};
    /* Last, the code object generation: read after every code pointer so
     * far, it spares the snapshot's end a call (generation_moved). */
    int gen = CPY_HAS(&s->off, interpreter_state, code_object_generation) && s->gen.interp[0] != 0;
    if (gen)
        segs[n++] = (struct mem_seg){
            s->gen.interp[0] + s->off.interpreter_state.code_object_generation, &s->gen.after, 8};
    const uint8_t *moved;
    if (mem_readv_fresh_twice(&s->mem, segs, n, &moved) < 0)
        return 0;
    if (gen)
        s->gen.after_mark = mem_mark(&s->mem);
    for (size_t i = 0; i < n; i++)
        if (moved[i])
            return 0;
    if (t && (now_anchor != anchor || now_seq != seq))
        return 0;
    if (running != s->off.traits.executing)
        return 0;
    for (size_t i = from; i < k; i++)
        if (!frame_unmoved(&s->off, raw, i, k, last_prev, got[i][0], got[i][1],
                           cpy_frame_pos_value(&s->off, got[i][2])))
            return 0;
    if (kp > k && pos_checked(raw, k) &&
        cpy_frame_pos_value(&s->off, got[k][2]) != raw[k].instr_ptr)
        return 0;
    return 1;
}

int prof_torn_ask_own_copy(struct pys_session *s, const struct cpy_thread *t)
{
    struct cpy_stack *st = &s->walker.stack;
    struct prof_torn *tn = &s->torn;
    uint64_t a = t->addr + s->off.thread_state.last_profiled_frame,
             q = t->addr + s->off.thread_state.last_profiled_frame_seq;
    size_t n = 0;
    st->second_len = 0;
    if (q == a + 8) {
        st->after[n++] = (struct mem_seg){a, tn->after, 16};
    } else {
        st->after[n++] = (struct mem_seg){a, &tn->after[0], 8};
        st->after[n++] = (struct mem_seg){q, &tn->after[1], 8};
    }
    int gen = CPY_HAS(&s->off, interpreter_state, code_object_generation) && s->gen.interp[0] != 0;
    if (gen)
        st->after[n++] = (struct mem_seg){
            s->gen.interp[0] + s->off.interpreter_state.code_object_generation, &s->gen.after, 8};
    st->nafter = n;
    return gen;
}

/*
 * The check of chain_unchanged with an anchor, from the walk's own second
 * copy (prof_torn_ask_own_copy) if it made one and no read came since: 1
 * unchanged, 0 changed, -1 no such copy of every word.
 */
static int own_copy_rechecked(struct pys_session *s, const struct cpy_raw_frame *raw, size_t from,
                              size_t k, uint64_t last_prev, int pos_k, uint64_t anchor,
                              uint64_t seq)
{
    if (mem_read_since(&s->mem, s->walker.stack.second_mark))
        return -1;
    int r = prof_torn_own_copy(&s->off, &s->walker.stack, raw, from, k, last_prev, pos_k);
    if (r == 1 && (s->torn.after[0] != anchor || s->torn.after[1] != seq))
        return 0;
    return r;
}

/* --- verdicts on the frame cache's walks ------------------------------ */

/* Second copies for the next batch of the frames above the anchor the
 * walk leaves (raw[a], a = *next_anchor): the next sample's walk ends there
 * and checks only what lies above it, and the anchor's position. */
static void hint_above(struct pys_session *s, const struct cpy_thread *t,
                       const struct cpy_raw_frame *raw, size_t top, size_t end, size_t n, size_t a)
{
    chain_hint(s, t, raw, top, end < a ? end : a, end >= a && a < n);
}

int prof_torn_cached(struct pys_session *s, const struct prof_walk *w, const struct cpy_thread *t,
                     size_t k, uint64_t anchor, size_t next_anchor)
{
    /* The anchor stayed (its number did not move), and so did what it
     * calls, if that is the top frame copied after it. */
    size_t top = top_settled(s, w, s->walker.raw, k);
    int move = thread_may_move(s, w, t, 0);
    size_t end = move ? k - 1 : top;
    /* The anchor's position too, where it calls a frame of the walk: it
     * may have called another since the cache saw it, but not since this
     * walk read it. */
    int pos_k = move && k > 1;
    uint64_t seq = t->last_profiled_frame_seq;
    int r = chain_rechecked(s, w, t, s->walker.raw, top, end, anchor, pos_k);
    hint_above(s, t, s->walker.raw, top, end, k, next_anchor);
    if (!later_top_kept(s, w, s->walker.raw, k))
        return 0;
    if (r >= 0)
        return r;
    /* Checked by a copy made after the batch: the top too (top_settled). */
    end = move ? k - 1 : 0;
    r = own_copy_rechecked(s, s->walker.raw, 0, end, anchor, pos_k, anchor, seq);
    return r >= 0 ? r : chain_unchanged(s, t, s->walker.raw, 0, end, anchor, pos_k, anchor, seq);
}

int prof_torn_whole(struct pys_session *s, const struct prof_walk *w, const struct cpy_thread *t,
                    size_t n, uint64_t cut, size_t next_anchor)
{
    size_t top = top_settled(s, w, s->walker.raw, n);
    int move = thread_may_move(s, w, t, 0);
    int r = chain_rechecked(s, w, t, s->walker.raw, top, move ? n : top, cut, 0);
    hint_above(s, t, s->walker.raw, top, move ? n : top, n, next_anchor);
    if (!later_top_kept(s, w, s->walker.raw, n))
        return 0;
    /* Checked by a read after the batch: the top too (top_settled). */
    return !(r == 0 ||
             (r < 0 && move && !chain_unchanged(s, NULL, s->walker.raw, 0, n, cut, 0, 0, 0)));
}

/* --- verdicts on walks without the cache ------------------------------ */

/*
 * Put off the second read of frames raw[from..k) of a walk (see
 * chain_unchanged) to the snapshot's end, where the chains of all threads
 * are read again at once. 0, or PYS_E_NOMEM (check it now).
 */
static int put_off(struct pys_session *s, size_t ti, size_t ni, const struct cpy_raw_frame *raw,
                   size_t from, size_t k, uint64_t last_prev)
{
    struct prof_torn *tn = &s->torn;
    const struct cpy_frame_offsets *f = &s->off.interpreter_frame;
    uint64_t po;
    size_t pw = cpy_frame_pos_field(&s->off, &po);
    size_t first = tn->nchk, need = tn->nchk + 3 * (k - from) + 1;
    int rc =
        util_array_reserve((void **)&tn->chk_segs, &tn->chk_segs_cap, need, sizeof *tn->chk_segs);
    if (rc == 0)
        rc = util_array_reserve((void **)&tn->chk_vals, &tn->chk_vals_cap, need,
                                sizeof *tn->chk_vals);
    if (rc == 0)
        rc = util_array_reserve((void **)&tn->chk_walks, &tn->chk_walks_cap, tn->nchk_walks + 1,
                                sizeof *tn->chk_walks);
    if (rc < 0)
        return rc;
    for (size_t i = from; i < k; i++) {
        /* Code object (a tagged reference from 3.14), then caller, then
         * (a caller's: pos_checked) position, as cpy_frame_pos_value has
         * it. */
        tn->chk_segs[tn->nchk] = (struct mem_seg){raw[i].addr + f->executable, NULL, 8};
        tn->chk_vals[tn->nchk].kind = CHK_CODE;
        tn->chk_vals[tn->nchk++].want = raw[i].code;
        tn->chk_segs[tn->nchk] = (struct mem_seg){raw[i].addr + f->previous, NULL, 8};
        tn->chk_vals[tn->nchk].kind = raw[i].inferred ? CHK_LINK : CHK_WORD;
        tn->chk_vals[tn->nchk++].want = i + 1 < k ? raw[i + 1].addr : last_prev;
        if (pos_checked(raw, i)) {
            tn->chk_segs[tn->nchk] = (struct mem_seg){raw[i].addr + po, NULL, pw};
            tn->chk_vals[tn->nchk].kind = CHK_POS;
            tn->chk_vals[tn->nchk++].want = raw[i].instr_ptr;
        }
    }
    if (bottom_running(s, from, k, last_prev)) {
        tn->chk_segs[tn->nchk] = (struct mem_seg){raw[k - 1].addr + f->executing, NULL, 1};
        tn->chk_vals[tn->nchk].kind = CHK_WORD;
        tn->chk_vals[tn->nchk++].want = s->off.traits.executing;
    }
    tn->chk_walks[tn->nchk_walks++] =
        (struct prof_put_off){ti, ni, first, tn->nchk - first, mem_log_marked(&s->mem)};
    return 0;
}

/* The end of the frames raw[from..) of a walk of n frames cut at cut that
 * are read again, and the caller the last of them must name. Not the entry
 * frame at the bottom (3.12+, on the C stack): the frame above names it as
 * its caller (checked), and it stays as it is while frames sit on it. A
 * cut chain's last frame is not that bottom: it keeps the caller it was
 * cut at. */
static size_t checked_end(const struct cpy_raw_frame *raw, size_t from, size_t n, uint64_t cut,
                          uint64_t *last_prev)
{
    size_t end = !cut && n > from + 1 && raw[n - 1].shim ? n - 1 : n;
    *last_prev = cut ? cut : end < n ? raw[n - 1].addr : 0;
    return end;
}

/*
 * 3.8-3.10: a walk that passed over its thread's only frame (not started,
 * not executing, without a caller: a stack's bottom frame being entered,
 * cpython/frames.c) shows an empty stack. One read confirms it, the
 * thread's current frame word first, then the frame: the frame current,
 * and a moment later still not started, without a caller: the thread then
 * was entering its first frame, whatever the walk's own reads saw (a
 * generator that ran there at the thread state's read and came back as a
 * new one, not started, looks the same). 1 if confirmed (or nothing was
 * passed over), 0 if not.
 */
static int bottom_confirmed(struct pys_session *s, const struct cpy_thread *t)
{
    uint64_t x = s->walker.stack.passed_bottom, cur = 0, prev = 1;
    const struct cpy_frame_offsets *f = &s->off.interpreter_frame;
    uint8_t state = s->off.traits.executing;
    int32_t lasti = 0;
    if (x == 0)
        return 1;
    struct mem_seg segs[4] = {
        {t->addr + s->off.thread_state.current_frame, &cur, 8},
        {x + f->previous, &prev, 8},
        {x + f->executing, &state, 1},
        {x + f->lasti, &lasti, 4},
    };
    if (mem_readv_fresh(&s->mem, segs, 4) < 0)
        return 0;
    return cur == x && prev == 0 && state != s->off.traits.executing && lasti == -1;
}

int prof_torn_walk(struct pys_session *s, const struct prof_walk *w, const struct cpy_interp *in,
                   const struct cpy_thread *t, size_t n, size_t ti, size_t ni)
{
    /* A chain put together from several reads (frames read one by one,
     * several chunks) may mix moments: it is checked against a second read.
     * So is one copied in one read, when its thread may have run meanwhile:
     * the copy can be paused midway. */
    size_t top = n ? top_settled(s, w, s->walker.raw, n) : 0;
    int one = walk_one_moment(s, w);
    uint64_t last_prev;
    size_t end = checked_end(s->walker.raw, top, n, s->walker.stack.cut, &last_prev);
    if (n == 0)
        return bottom_confirmed(s, t) ? PROF_TORN_ONE : PROF_TORN_MIXED;
    if (one && !thread_may_move(s, w, t, in->gil_holder))
        return PROF_TORN_ONE;
    /* From the batch's second copies if it has them, else with the other
     * threads' at the snapshot's end if it can, the top frame too: a read
     * after the batch is no second copy that settles it (top_settled). */
    int r = chain_rechecked(s, w, NULL, s->walker.raw, top, end, last_prev, 0);
    chain_hint(s, t, s->walker.raw, top, end, 0);
    if (!later_top_kept(s, w, s->walker.raw, n))
        return PROF_TORN_MIXED;
    if (r == 0 || (r == 1 && batch_settles(s, s->walker.raw, n)))
        return r ? PROF_TORN_ONE : PROF_TORN_MIXED;
    end = checked_end(s->walker.raw, 0, n, s->walker.stack.cut, &last_prev);
    if (s->torn.put_off && put_off(s, ti, ni, s->walker.raw, 0, end, last_prev) == 0)
        return PROF_TORN_LATER;
    return chain_unchanged(s, NULL, s->walker.raw, 0, end, last_prev, 0, 0, 0) ? PROF_TORN_ONE
                                                                               : PROF_TORN_MIXED;
}

void prof_torn_forget_last(struct pys_session *s)
{
    struct prof_torn *tn = &s->torn;
    tn->nchk = tn->chk_walks[--tn->nchk_walks].first;
}

int prof_torn_deferred(struct pys_session *s, const struct prof_put_off **torn_walks)
{
    struct prof_torn *tn = &s->torn;
    tn->put_off = 0;
    *torn_walks = tn->chk_walks;
    if (tn->nchk_walks == 0)
        return 0;
    for (size_t i = 0; i < tn->nchk; i++) {
        tn->chk_vals[i].got = 0;
        tn->chk_segs[i].buf = &tn->chk_vals[i].got;
    }
    /* Read twice over, nested: one read is no moment (chain_unchanged). */
    const uint8_t *moved = NULL;
    int rc = mem_readv_fresh_twice(&s->mem, tn->chk_segs, tn->nchk, &moved);
    if (rc == PYS_E_EXITED)
        return rc;
    size_t nwalks = tn->nchk_walks, torn = 0;
    for (size_t w = 0; w < nwalks; w++) {
        const struct prof_put_off *po = &tn->chk_walks[w];
        int same = rc == 0;
        for (size_t j = po->first; same && j < po->first + po->n; j++) {
            uint64_t got = tn->chk_vals[j].got;
            if (tn->chk_vals[j].kind == CHK_CODE)
                got &= ~s->off.stackref_mask;
            else if (tn->chk_vals[j].kind == CHK_POS)
                got = cpy_frame_pos_value(&s->off, got);
            same = !moved[j] &&
                   (got == tn->chk_vals[j].want || (tn->chk_vals[j].kind == CHK_LINK && got == 0));
        }
        if (!same)
            tn->chk_walks[torn++] = *po;
    }
    tn->nchk_walks = 0;
    tn->nchk = 0;
    return (int)torn;
}

int prof_torn_later_top(struct pys_session *s, const struct prof_walk *w, struct cpy_thread *cur)
{
    uint64_t cf = cur->current_frame;
    if (s->off.traits.frames != CPY_FRAMES_DIRECT || mem_read_since(&s->mem, w->mark) ||
        (cf >= cur->datastack_chunk && cf < cur->datastack_top))
        return 0;
    const uint8_t *c = mem_recheck_view(&s->mem, cur->addr + s->off.thread_state.current_frame, 8);
    uint64_t top;
    if (!c)
        return 0;
    memcpy(&top, c, 8);
    if (top == 0 || top == cur->current_frame)
        return 0;
    cur->current_frame = top;
    return 1;
}

/* --- the chain's shape, as its frames are named ----------------------- */

int prof_torn_frame_refused(const struct prof_code *pc, int kind, char *err, size_t errlen)
{
    if (kind == PROF_TORN_NOT_CALLEE)
        snprintf(err, errlen, "torn stack: the frame above %s is not its callee", pc->qualname);
    else if (kind == PROF_TORN_NOT_CALLING)
        snprintf(err, errlen, "torn stack: %s, below the top, was running, not calling",
                 pc->qualname);
    else if (kind == PROF_TORN_NOT_RESUMED)
        snprintf(err, errlen,
                 "torn stack: %s, below the top, resumes a generator, not the frame above it",
                 pc->qualname);
    else
        snprintf(err, errlen, "torn stack: %s, below the top, has not started", pc->qualname);
    return PYS_E_CORRUPT;
}

int prof_torn_in_call(struct pys_session *s, const struct cpy_raw_frame *caller,
                      const struct prof_code *pc)
{
    /* A call made inline leaves the caller's position on the last unit of
     * the calling instruction's inline cache (every such instruction has
     * one); a running frame's is the first unit of the instruction it
     * runs, a C function it calls included. */
    uint64_t base = pc->code.code_bytes, start;
    if (caller->instr_ptr < base || (caller->instr_ptr - base) % 2 != 0)
        return 1;
    uint64_t idx = (caller->instr_ptr - base) / 2;
    if (idx >= pc->code.ncodeunits ||
        prof_codecache_instr_start(&s->codes, &s->mem, &s->off, pc, idx, &start) != 0)
        return 1;
    return start != idx;
}

int prof_torn_resuming(struct pys_session *s, const struct cpy_raw_frame *caller,
                       const struct prof_code *pc)
{
    uint64_t base = pc->code.code_bytes;
    if (s->off.traits.frames == CPY_FRAMES_OBJECT || caller->instr_ptr < base ||
        (caller->instr_ptr - base) % 2 != 0)
        return 0;
    uint64_t idx = (caller->instr_ptr - base) / 2;
    if (idx >= pc->code.ncodeunits)
        return 0;
    return prof_codecache_resumes(&s->codes, &s->mem, &s->off, pc, idx) == 1;
}

void prof_torn_release(struct prof_torn *tn)
{
    free(tn->verify);
    free(tn->segs);
    free(tn->chk_segs);
    free(tn->chk_vals);
    free(tn->chk_walks);
    memset(tn, 0, sizeof *tn);
}
