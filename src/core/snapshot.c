/*
 * snapshot: one pass over every interpreter, thread and frame of the target.
 *
 * For each thread: read its thread state, work out its status, walk its frame
 * chain (cpython/frames.c), then turn each raw frame into a pys_frame through
 * the code cache and the line table. A thread whose walk fails is retried a
 * few times (a running thread can change under the reader) and then reported
 * with its error; the other threads are still reported. Only a target that
 * is gone fails the whole snapshot.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "platform/platform.h"
#include "util/array.h"

/* A walk that raced with the running thread usually succeeds on a retry; a
 * deep stack that keeps unwinding and going down again (the frame cache
 * test's "deep") needs more reads than a quiet one, and each retry reads
 * only what the thread's last try read (mem_prefetch_retry). */
#define WALK_TRIES 6
/* How long a list of one interpreter is taken to be unchanged. */
#define LONE_INTERP_NS 1000000u
/* ... and read on its own when it lasted more snapshots than this (those a
 * span stays in the batched read's plan after it was last read). */
#define LONE_INTERP_SNAPSHOTS 16u

void prof_results_release(struct prof_results *r)
{
    free(r->interps);
    free(r->seen_interps);
    free(r->threads);
    free(r->thread_frame_start);
    free(r->thread_err);
    free(r->thread_stack);
    free(r->frames);
}

static int reserve_threads(struct pys_session *s, size_t need)
{
    size_t cap = s->res.threads_cap;
    int rc = util_array_reserve((void **)&s->res.threads, &cap, need, sizeof *s->res.threads);
    if (rc == 0 && cap != s->res.threads_cap) {
        size_t *st = realloc(s->res.thread_frame_start, cap * sizeof *st);
        if (st)
            s->res.thread_frame_start = st;
        char(*te)[160] = realloc(s->res.thread_err, cap * sizeof *te);
        if (te)
            s->res.thread_err = te;
        struct mem_span *sk = realloc(s->res.thread_stack, cap * sizeof *sk);
        if (sk)
            s->res.thread_stack = sk;
        if (!st || !te || !sk)
            return PYS_E_NOMEM;
    }
    s->res.threads_cap = cap;
    return rc;
}

/* Append a marker frame (<native>, <GC>, <truncated>). The caller reserved
 * room. */
static void add_marker(struct pys_session *s, int kind)
{
    struct pys_frame *f = &s->res.frames[s->res.nframes++];
    memset(f, 0, sizeof *f);
    f->filename = s->marker_file;
    f->qualname = kind == PYS_FRAME_GC          ? s->marker_gc
                  : kind == PYS_FRAME_TRUNCATED ? s->marker_truncated
                                                : s->marker_native;
    f->firstlineno = f->lineno = f->end_lineno = f->col = f->end_col = f->lasti = f->opcode = -1;
    f->kind = kind;
}

int prof_opcodes_init(struct prof_opcodes *op, size_t n)
{
    op->segs = malloc(n * sizeof *op->segs);
    op->frame = malloc(n * sizeof *op->frame);
    op->byte = malloc(n);
    return op->segs && op->frame && op->byte ? 0 : PYS_E_NOMEM;
}

void prof_opcodes_release(struct prof_opcodes *op)
{
    free(op->segs);
    free(op->frame);
    free(op->byte);
}

/* pys_options.opcodes: the byte at each Python frame's instruction, for the
 * frames [start, s->res.nframes) of one thread, in one batched read. Frames whose
 * byte cannot be read keep -1: an opcode is never worth a failed sample. */
static void read_opcodes(struct pys_session *s, size_t nops)
{
    struct prof_opcodes *op = &s->ops;
    if (nops == 0 || mem_readv(&s->mem, op->segs, nops) < 0)
        return;
    for (size_t k = 0; k < nops; k++)
        s->res.frames[op->frame[k]].opcode = op->byte[k];
}

/*
 * 3.8-3.13: the cached code objects frames raw[0..nraw) above the cached
 * tail are named after, checked after the frames were read (no generation
 * counter before 3.14 says when they were freed): now on a snapshot's last
 * try, else with every other thread's after the last walk. 0 or an error.
 */
static int note_codes(struct pys_session *s, const struct prof_walk *w,
                      const struct cpy_raw_frame *raw, size_t nraw)
{
    struct prof_named_codes *nc = &s->named;
    size_t end = nraw < w->tail_start ? nraw : w->tail_start, n = nc->n;
    int rc = util_array_reserve((void **)&nc->addrs, &nc->cap, n + end, sizeof *nc->addrs);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < end; i++)
        if (!raw[i].shim)
            nc->addrs[n++] = raw[i].code;
    if (!nc->each_walk) {
        nc->n = n;
        return 0;
    }
    rc = prof_codecache_check(&s->codes, &s->mem, &s->off, nc->addrs + nc->n, n - nc->n);
    return rc < 0 ? rc : 0;
}

void prof_named_codes_release(struct prof_named_codes *nc)
{
    free(nc->addrs);
}

int prof_walker_init(struct prof_walker *w, const struct cpy_offsets *o, size_t max)
{
    *w = (struct prof_walker){.max = max};
    w->tsbuf = malloc(cpy_thread_bufsize(o));
    w->raw = malloc(max * sizeof *w->raw);
    return w->tsbuf && w->raw ? 0 : PYS_E_NOMEM;
}

void prof_walker_release(struct prof_walker *w)
{
    cpy_stack_release(&w->stack);
    free(w->tsbuf);
    free(w->raw);
}

int prof_resolved_init(struct prof_resolved *r, size_t n)
{
    r->frames = malloc(n * sizeof *r->frames);
    r->kind = malloc(n);
    return r->frames && r->kind ? 0 : PYS_E_NOMEM;
}

void prof_resolved_release(struct prof_resolved *r)
{
    free(r->frames);
    free(r->kind);
}

/*
 * Name Python frame raw[i] of thread t, read by this walk: its code object
 * (*pc), its kind (s->resolved.kind[i]) and, for a frame past its prologue,
 * its resolution (s->resolved.frames[i]). 0, or an error with the detail in err.
 */
static int name_frame(struct pys_session *s, const struct cpy_thread *t,
                      const struct cpy_raw_frame *raw, size_t i, const struct prof_code **pc,
                      char *err, size_t errlen)
{
    const struct cpy_raw_frame *rf = &raw[i];
    struct pys_frame *out = &s->resolved.frames[i];
    int rc = prof_codecache_get(&s->codes, &s->strings, &s->mem, &s->off, &s->sym, rf->code, pc);
    if (rc < 0) {
        snprintf(err, errlen, "code object at 0x%llx unreadable: %s", (unsigned long long)rf->code,
                 pys_strerror(rc));
        return rc;
    }
    const struct prof_code *c = *pc;
    int incomplete = cpy_frame_incomplete(&s->off, &c->code, rf);
    if ((rc = prof_torn_frame_fits(s, t, raw, i, c, incomplete, err, errlen)) < 0)
        return rc;
    s->resolved.kind[i] = incomplete ? PROF_RES_INCOMPLETE : PROF_RES_FRAME;
    if (incomplete)
        return 0;
    struct cpy_location loc;
    if ((rc = prof_codecache_locate(&s->codes, &s->off, c, rf, &out->lasti, &loc)) < 0) {
        /* 3.8-3.13: a cached code object whose memory was freed and taken
         * by another (a module's code, run once at import) lies about
         * every frame of the new one. Checked now, so that the thread's
         * next walk reads it again if so (the end of the snapshot would
         * find it, but only after every walk of the thread failed). */
        if (s->codes.validate)
            (void)prof_codecache_check(&s->codes, &s->mem, &s->off, &rf->code, 1);
        snprintf(err, errlen, "frame at 0x%llx: instruction pointer outside %s",
                 (unsigned long long)rf->addr, c->qualname);
        return rc;
    }
    out->filename = c->filename;
    out->qualname = c->qualname;
    out->firstlineno = c->code.firstlineno;
    out->lineno = loc.lineno;
    out->end_lineno = loc.end_lineno;
    out->col = loc.col;
    out->end_col = loc.end_col;
    out->kind = PYS_FRAME_PYTHON;
    out->opcode = -1;
    out->no_location = prof_no_location(&s->opt, &c->code);
    if (out->no_location)
        out->lineno = out->end_lineno = out->col = out->end_col = -1;
    return 0;
}

/* pys_options.opcodes: the first byte of the instruction at the position
 * of frame s->res.nframes (about to be added: rf, resolved to res, code *pc
 * if looked up), where the position points into the instruction's inline
 * caches (3.11-3.12) of the instruction they follow. Returns it when the
 * code cache holds it (immutable bytecode, 3.8-3.10); else has
 * read_opcodes read it and returns -1. */
static int want_opcode(struct pys_session *s, const struct cpy_raw_frame *rf,
                       const struct pys_frame *res, const struct prof_code *pc, size_t *nops)
{
    /* The cached tail's code objects are looked up only for this. */
    if (res->lasti < 0 || (!pc && prof_codecache_get(&s->codes, &s->strings, &s->mem, &s->off,
                                                     &s->sym, rf->code, &pc) != 0))
        return -1;
    uint64_t start, idx = (uint64_t)res->lasti / 2;
    uint8_t op;
    if (idx >= pc->code.ncodeunits ||
        prof_codecache_instr_start(&s->codes, &s->mem, &s->off, pc, idx, &start) != 0)
        return -1;
    int rc = prof_codecache_opcode(&s->codes, &s->mem, &s->off, pc, start, &op);
    if (rc == 0)
        return op;
    if (rc == PYS_E_NOTFOUND) {
        s->ops.segs[*nops] =
            (struct mem_seg){pc->code.code_bytes + 2 * start, &s->ops.byte[*nops], 1};
        s->ops.frame[(*nops)++] = s->res.nframes;
    }
    return -1;
}

/*
 * Turn the raw frames of walk w into pys_frames appended to s->res.frames.
 * Shim frames become one <native> marker per run of them (with the native
 * option); a <GC> marker goes directly above the frame that started a running
 * collection, in place of a <native> in the same gap. A chain the walk cut
 * (w->cut) ends with a <truncated> marker. Returns the number of frames
 * added, or an error (the frames added are dropped).
 */
static int resolve_frames(struct pys_session *s, const struct prof_walk *w,
                          const struct cpy_interp *in, const struct cpy_thread *t, size_t nraw,
                          char *err, size_t errlen)
{
    size_t start = s->res.nframes, nops = 0;
    int pending_native = 0, live_above = 0;
    /* At most one marker per raw frame, plus one at the bottom (a cut
     * chain's <truncated>, after a <native> that stands for shims among the
     * raw frames). */
    int rc = util_array_reserve((void **)&s->res.frames, &s->res.frames_cap,
                          s->res.nframes + 2 * nraw + 1, sizeof *s->res.frames);
    if (rc < 0)
        return rc;
    /* The walk's chain: the frame cache entry's, or the scratch of a walk
     * made without the cache. */
    const struct cpy_raw_frame *raw = w->entry ? w->entry->frames : s->walker.raw;
    if (s->codes.validate && (rc = note_codes(s, w, raw, nraw)) < 0)
        return rc;
    /* Without markers or opcodes, the cached tail is its frames, copied as
     * they are (a very deep stack's tail is thousands of frames). */
    int plain_tail = !s->opt.native && !s->opt.opcodes && !(s->opt.gc && in->gc_frame != 0);
    for (size_t i = 0; i < nraw; i++) {
        const struct cpy_raw_frame *rf = &raw[i];
        const struct pys_frame *res = &s->resolved.frames[i];
        const uint8_t *kind = &s->resolved.kind[i];
        const struct prof_code *pc = NULL; /* looked up for frames read now */
        if (i >= w->tail_start && plain_tail) {
            const struct prof_fcache_entry *e = w->entry;
            struct pys_frame *out = s->res.frames + s->res.nframes;
            for (; i < nraw; i++)
                if (e->res_kind[i] == PROF_RES_FRAME)
                    *out++ = e->res[i];
            s->res.nframes = (size_t)(out - s->res.frames);
            break;
        }
        if (i < w->tail_start && !prof_torn_frame_order(raw, i, &live_above)) {
            rc = PYS_E_CORRUPT;
            snprintf(err, errlen, "torn stack: a frame below the top has returned");
            goto fail;
        }
        if (i >= w->tail_start) {
            /* From the frame cache: resolved at an earlier sample. */
            res = &w->entry->res[i];
            kind = &w->entry->res_kind[i];
        } else if (rf->shim) {
            s->resolved.kind[i] = PROF_RES_SHIM;
            if (s->native && (rc = prof_native_note_shim(s, rf->addr)) < 0)
                goto fail;
        } else if ((rc = name_frame(s, t, raw, i, &pc, err, errlen)) < 0) {
            goto fail;
        }
        if (*kind == PROF_RES_SHIM) {
            pending_native = 1;
            continue;
        }
        if (*kind == PROF_RES_INCOMPLETE)
            continue;
        if (s->opt.gc && in->gc_frame != 0 && rf->addr == in->gc_frame) {
            add_marker(s, PYS_FRAME_GC);
            pending_native = 0;
        } else if (pending_native && s->opt.native) {
            add_marker(s, PYS_FRAME_NATIVE);
        }
        /* 3.11 marks the first Python frame of each C-level call instead. */
        pending_native = rf->entry;
        int op = s->opt.opcodes ? want_opcode(s, rf, res, pc, &nops) : -1;
        if (s->locals && (rc = prof_locals_note(s, s->res.nframes, rf->addr, rf->code)) < 0)
            goto fail;
        s->res.frames[s->res.nframes++] = *res;
        if (op >= 0)
            s->res.frames[s->res.nframes - 1].opcode = op;
    }
    read_opcodes(s, nops);
    if (w->cut) {
        /* C code between the frames kept and the next ones, which are not. */
        if (pending_native && s->opt.native && s->res.nframes > start)
            add_marker(s, PYS_FRAME_NATIVE);
        add_marker(s, PYS_FRAME_TRUNCATED);
    } else if (s->opt.native && s->res.nframes > start) {
        /* The C code that started the thread. */
        add_marker(s, PYS_FRAME_NATIVE);
    }
    return (int)(s->res.nframes - start);
fail:
    s->res.nframes = start;
    return rc;
}

static const char *walk_error(int rc)
{
    switch (rc) {
    case PYS_E_TOODEEP:
        return "frame chain too long or cyclic";
    case PYS_E_CORRUPT:
        return "frame chain changed while it was read, or did not reach the base frame";
    default:
        return pys_strerror(rc);
    }
}

/*
 * After a thread's retry batch: its frames were read after the code object
 * generation counter the snapshot went by. The batch read the main
 * interpreter's counter again, last: if it moved, cached code objects may
 * have been freed (drop them all). If it could not be read, the snapshot
 * reads it once more at its end, as after any read past its batch.
 */
static void retry_generation(struct pys_session *s)
{
    uint64_t late;
    if (!CPY_HAS(&s->off, interpreter_state, code_object_generation) || s->gen.interp[0] == 0)
        return;
    if (!mem_prefetch_late_value(&s->mem, &late)) {
        mem_force_recheck(&s->mem);
        return;
    }
    if (late != s->gen.seen[0]) {
        prof_codecache_clear(&s->codes);
        s->gen.seen[0] = late;
    }
}

static int read_thread(struct pys_session *s, const struct cpy_interp *in,
                       const struct cpy_thread *t, struct mem_mark mark, size_t ti, size_t ni,
                       int again);

/* The longest wait before a torn thread is read again (retry_spread): some
 * call chains' lengths, far more than one walk, far less than the time
 * between samples at 1 kHz even over WALK_TRIES tries. */
#define RETRY_SPREAD_NS 100000u

/*
 * 3.8-3.10: before a thread whose walk was torn is read again, wait a
 * random time, uniform in [0, RETRY_SPREAD_NS). A walk is torn when the
 * stack changed while it was copied, and most often that is a chain of
 * calls ending (its leaf returning): read again at once, the thread is
 * caught in what follows the change (callers returning, the next chain
 * starting), shallow stacks, and the samples kept lean to them, the more
 * the more walks are torn (deep stacks' walks, each frame an object of its
 * own, take longest). Read at a moment that does not depend on the one
 * that failed, a retry is a sample drawn afresh. On a source whose clock
 * stands still (an image), no wait.
 */
static void retry_spread(struct pys_session *s)
{
    if (s->off.traits.frames != CPY_FRAMES_OBJECT)
        return;
    /* xorshift64 */
    uint64_t x = s->retry_rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    s->retry_rng = x;
    uint64_t wait = x % RETRY_SPREAD_NS, start = mem_clock_ns(&s->mem), last = start;
    while (wait > 0) {
        uint64_t now = mem_clock_ns(&s->mem);
        if (now == last || now - start >= wait)
            break;
        last = now;
    }
}

/*
 * The second reads put off by this snapshot's walks, in one read. A thread
 * whose chain has changed since its walk is read again now, on its own
 * (its new frames go after all others). 0, or PYS_E_EXITED / PYS_E_NOMEM.
 */
static int put_off_checks(struct pys_session *s)
{
    const struct prof_put_off *torn;
    if (!prof_torn_pending(s))
        return 0;
    int n = prof_torn_deferred(s, &torn);
    if (n < 0)
        return n;
    /* What is read from here on must see the target, not the batch. */
    mem_prefetch_end(&s->mem);
    for (int w = 0; w < n; w++) {
        const struct prof_put_off *po = &torn[w];
        struct pys_thread *pt = &s->res.threads[po->ti];
        struct cpy_thread t;
        /* From a new batch, as read_thread's retries: what the thread
         * read (from its mark on), the frames met lately, their second
         * copies, in one system call. Not frame by frame: a system call
         * for each frame on the heap (generators', 3.8-3.10's frame
         * objects), the more the deeper the stack. */
        retry_spread(s);
        mem_log_mark_at(&s->mem, po->log_at);
        mem_prefetch_retry(&s->mem);
        retry_generation(s);
        mem_log_mark(&s->mem);
        struct mem_mark mark = mem_mark(&s->mem);
        /* Its walk was counted as a read: it is one that needed more. */
        s->thread_reads--;
        int trc = cpy_thread_read(&s->mem, &s->off, &s->sym, pt->tstate, s->walker.tsbuf, &t);
        if (trc == PYS_E_EXITED)
            return trc;
        if (trc < 0) {
            pt->error = trc;
            pt->nframes = 0;
            snprintf(s->res.thread_err[po->ti], sizeof s->res.thread_err[0],
                     "thread state at 0x%llx unreadable: %s", (unsigned long long)pt->tstate,
                     pys_strerror(trc));
            s->thread_errors++;
            continue;
        }
        trc = read_thread(s, &s->res.seen_interps[po->ni], &t, mark, po->ti, po->ni, 1);
        if (trc < 0)
            return trc;
    }
    return 0;
}

/*
 * The frame cache pays where a stack's lower part stays put between
 * samples. On one that unwinds and grows again between them (short calls
 * deep down), its anchor has moved at most samples: those walks are torn,
 * and the walks kept after retries lean to the moments that were easy to
 * read, shallow ones. So once more than 1 in FCACHE_TORN_SHARE of the
 * first walks in a window of FCACHE_WINDOW used it and were torn, the
 * cache rests for FCACHE_REST snapshots (walks as --read-only makes them,
 * no anchor written), then is tried again.
 */
#define FCACHE_WINDOW 128
#define FCACHE_TORN_SHARE 3
#define FCACHE_REST 2048

static int fcache_on(const struct pys_session *s)
{
    return s->use_fcache && s->snapshots >= s->fcache.rest_until;
}

/* Count a first walk made with the cache: torn or not. */
static void fcache_outcome(struct pys_session *s, int torn)
{
    struct prof_fcache *fc = &s->fcache;
    fc->win_walks++;
    fc->win_torn += torn != 0;
    if (fc->win_torn * FCACHE_TORN_SHARE > FCACHE_WINDOW) {
        fc->rest_until = s->snapshots + FCACHE_REST;
        fc->rests++;
    } else if (fc->win_walks < FCACHE_WINDOW) {
        return;
    }
    fc->win_walks = fc->win_torn = 0;
}

/*
 * 3.11, 3.12: the last two walks of a thread that cannot move, whose every
 * other walk failed. The one before the last (`last` 0): on 3.12, it may be
 * caught in a yield, its current frame unlinked already
 * (cpy_stack_yield_caller): the walk links it to the frame it returns to,
 * as a walk that knows the generator's caller (objframes.c) shows it. The
 * last: it may be caught entering a C-level call of the evaluation loop,
 * its cframe not yet filled in, holding what an earlier use of that C
 * stack left (on 3.11 a generator's frame as often as not, which is why a
 * yield is not looked for there): the walk starts from the frames linked
 * then (cpy_stack_entering_root). Asked only after the other walks failed,
 * the kernel's word on the thread costs nothing to the walks that
 * succeed. The caller clears walker.stack.link_frame after the walk.
 */
static void late_walk_of_stopped_thread(struct pys_session *s, const struct pys_thread *pt,
                                        struct cpy_thread *cur, int last)
{
    uint64_t root;
    if (s->off.traits.frames != CPY_FRAMES_CFRAME || !prof_thread_stopped(s, pt))
        return;
    if (!last) {
        if (cpy_stack_yield_caller(&s->mem, &s->off, &s->sym, cur, cur->current_frame, &root) ==
            0) {
            s->walker.stack.link_frame = cur->current_frame;
            s->walker.stack.link_caller = root;
        }
    } else if (cpy_stack_entering_root(&s->mem, &s->off, &s->sym, cur, &root) == 0) {
        cur->current_frame = root;
    }
}

/* Fill pt (its frames aside) from thread state t of interpreter in. */
static void thread_status(struct pys_session *s, const struct cpy_interp *in,
                          const struct cpy_thread *t, struct pys_thread *pt)
{
    memset(pt, 0, sizeof *pt);
    pt->native_id = t->native_id;
    pt->thread_id = t->thread_id;
    pt->tstate = t->addr;
    if ((in->threads_main && t->addr == in->threads_main) ||
        (in->main_ident && t->thread_id == in->main_ident))
        pt->status |= PYS_THREAD_MAIN_THREAD;
    /* The thread's own flag where it has one (3.15), as the reference reads
     * it: the GIL's last holder and lock can be caught mid-hand-over. */
    if (t->holds_gil >= 0 ? t->holds_gil : t->addr == in->gil_holder)
        pt->status |= PYS_THREAD_HAS_GIL;
    else if (t->gil_requested)
        pt->status |= PYS_THREAD_GIL_REQUESTED;
    if (t->has_exception)
        pt->status |= PYS_THREAD_HAS_EXCEPTION;
    prof_thread_os_state(s, pt);
}

/* Read one thread: status, then frames. again: it was read before in this
 * snapshot (its put-off check failed), so it counts as re-read. Returns 0
 * (the thread may carry its own error) or PYS_E_EXITED / PYS_E_NOMEM, which
 * end the snapshot. */
static int read_thread(struct pys_session *s, const struct cpy_interp *in,
                       const struct cpy_thread *t, struct mem_mark mark, size_t ti, size_t ni,
                       int again)
{
    struct pys_thread *pt = &s->res.threads[ti];
    char *err = s->res.thread_err[ti];
    int rc = 0;

    thread_status(s, in, t, pt);
    err[0] = '\0';
    s->res.thread_stack[ti] = (struct mem_span){t->datastack_chunk,
                                                t->datastack_top - t->datastack_chunk, 0};
    s->res.thread_frame_start[ti] = s->res.nframes;

    struct cpy_thread cur = *t;
    struct prof_walk w = {.mark = mark};
    int put_off = 0, restarted = 0, fc = fcache_on(s), walks = 0;
    for (int attempt = 0; attempt < WALK_TRIES; attempt++) {
        walks++;
        if (attempt > 0 && !restarted) {
            /* The thread moved on while it was read. Read again, in one batch,
             * everything read so far (the failed walk's thread state, chunk
             * and frames among it), so that the next walk sees one moment. */
            retry_spread(s);
            mem_prefetch_retry(&s->mem);
            retry_generation(s);
            mark = mem_mark(&s->mem);
            rc = cpy_thread_read(&s->mem, &s->off, &s->sym, t->addr, s->walker.tsbuf, &cur);
            if (rc < 0)
                break;
        }
        w = (struct prof_walk){.mark = mark, .tail_start = SIZE_MAX, .later_top = restarted};
        int fc_walk = fc && prof_fcache_usable(s, &cur);
        if (fc_walk) {
            rc = prof_fcache_walk(s, &w, &cur);
        } else {
            if (attempt >= WALK_TRIES - 2)
                late_walk_of_stopped_thread(s, pt, &cur, attempt == WALK_TRIES - 1);
            rc = cpy_stack_walk(&s->mem, &s->off, &cur, &s->walker.stack, s->walker.raw,
                                s->walker.max);
            s->walker.stack.link_frame = s->walker.stack.link_caller = 0;
            w.cut = s->walker.stack.cut;
            if (rc > 0)
                prof_objframes_note(s, &cur, s->walker.raw, (size_t)rc);
            int v = rc >= 0 ? prof_torn_walk(s, &w, in, &cur, (size_t)rc, ti, ni) : PROF_TORN_ONE;
            put_off = v == PROF_TORN_LATER;
            if (v == PROF_TORN_MIXED)
                rc = PYS_E_CORRUPT;
        }
        if (rc < 0) {
            snprintf(err, sizeof s->res.thread_err[ti], "%s", walk_error(rc));
        } else {
            size_t nraw = (size_t)rc;
            rc = resolve_frames(s, &w, in, &cur, nraw, err, sizeof s->res.thread_err[ti]);
            if (s->use_fcache)
                prof_fcache_resolved(s, &w, nraw, rc >= 0);
            if (rc < 0 && put_off) /* not named: nothing to check at the end */
                prof_torn_forget_last(s);
            /* A walk kept at once: its generators' callers, for walks
             * that find them suspended. */
            if (rc >= 0 && !put_off && s->walker.stack.gen_caller)
                prof_objframes_learn(s, w.entry ? w.entry->frames : s->walker.raw, nraw);
        }
        if (fc_walk && attempt == 0 && !restarted && rc != PYS_E_EXITED && rc != PYS_E_NOMEM)
            fcache_outcome(s, rc < 0);
        if (rc >= 0 || rc == PYS_E_EXITED || rc == PYS_E_NOMEM)
            break;
        /* Torn by a top frame that moved on before it was copied: walk
         * again, on the same copies, from the top the batch's second copy
         * of the thread state names, once per batch and not as a try. */
        restarted = !restarted && rc == PYS_E_CORRUPT && prof_torn_later_top(s, &w, &cur);
        if (restarted)
            attempt--;
    }
    prof_anchor_hint(s, &cur);
    if (rc == PYS_E_EXITED || rc == PYS_E_NOMEM)
        return rc;
    if (rc < 0) {
        pt->error = rc;
        pt->nframes = 0;
        s->thread_errors++;
        return 0;
    }
    err[0] = '\0';
    pt->nframes = (size_t)rc;
    s->thread_reads++;
    s->thread_rereads += walks > 1 || again;
    return 0;
}

/*
 * pys_options.reuse_idle: the interpreter's threads as the last snapshot
 * listed them, reading only those that may have moved (idle.c). 1 when
 * done; 0 when the list may have changed (the snapshot must read it all);
 * or PYS_E_EXITED / PYS_E_NOMEM.
 */
static int take_over_threads(struct pys_session *s, const struct cpy_interp *in, size_t ni,
                             struct pys_interp *pi)
{
    if (in->addr != s->idle.interp || in->next != 0 || in->threads_head != s->idle.head)
        return 0;
    for (size_t i = 0; i < s->prev.nthreads; i++) {
        int rc = reserve_threads(s, s->res.nthreads + 1);
        if (rc < 0)
            return rc;
        uint64_t taddr = s->prev.threads[i].tstate;
        if (prof_idle_must_read(s, taddr)) {
            struct cpy_thread t;
            mem_log_mark(&s->mem);
            struct mem_mark mark = mem_mark(&s->mem);
            rc = cpy_thread_read(&s->mem, &s->off, &s->sym, taddr, s->walker.tsbuf, &t);
            if (rc == PYS_E_EXITED)
                return rc;
            if (rc < 0 || !prof_idle_links_ok(s, i, &t))
                return 0;
            rc = read_thread(s, in, &t, mark, s->res.nthreads, ni, 0);
        } else {
            rc = prof_idle_copy_thread(s, i, s->res.nthreads);
        }
        if (rc < 0)
            return rc;
        s->res.nthreads++;
        pi->nthreads++;
    }
    return 1;
}

/*
 * Drop every cached code object if the interpreter at position ni says code
 * objects were freed since the last look (3.14+; code_dealloc bumps the
 * counter before the memory can be reused). Without such a counter
 * (3.8-3.13) cached code objects are checked at each use instead.
 *
 * The counter must be read after the frames whose code pointers it vouches
 * for: the main interpreter's is read once more at the very end of the
 * snapshot's batched read (mem_prefetch_late), after the frames it brings;
 * frames read later than that are covered by generation_moved().
 */
static void check_code_generation(struct pys_session *s, size_t ni, const struct cpy_interp *in)
{
    if (!CPY_HAS(&s->off, interpreter_state, code_object_generation))
        return;
    uint64_t gen = in->code_generation, late;
    if (ni == 0) {
        mem_prefetch_late(&s->mem, in->addr + s->off.interpreter_state.code_object_generation);
        if (mem_prefetch_late_value(&s->mem, &late))
            gen = late;
    }
    if (ni >= PROF_GEN_SLOTS) {
        prof_codecache_clear(&s->codes);
        return;
    }
    if (s->gen.interp[ni] != in->addr || s->gen.seen[ni] != gen) {
        prof_codecache_clear(&s->codes);
        s->gen.interp[ni] = in->addr;
        s->gen.seen[ni] = gen;
    }
}

/* After a snapshot that read the target beyond its batched read (frames or
 * code objects read later than the late counter): has the main
 * interpreter's code object generation moved since? Then names given to
 * frames read meanwhile may come from a freed code object's successor. */
static int generation_moved(struct pys_session *s)
{
    uint64_t gen;
    if (!CPY_HAS(&s->off, interpreter_state, code_object_generation) || s->res.ninterps == 0 ||
        s->gen.interp[0] == 0)
        return 0;
    uint64_t at = s->gen.interp[0] + s->off.interpreter_state.code_object_generation;
    /* Read after all else by the last walk's own second copy: no need to
     * read it again. */
    if (!mem_read_since(&s->mem, s->gen.after_mark))
        gen = s->gen.after;
    else if (mem_read_fresh(&s->mem, at, &gen, sizeof gen) < 0)
        return 0;
    if (gen == s->gen.seen[0])
        return 0;
    prof_codecache_clear(&s->codes);
    s->gen.seen[0] = gen;
    return 1;
}

/* Snapshots taken again because code objects were freed during one. */
#define GENERATION_TRIES 3

/*
 * 3.8-3.13: check, after every thread was walked, that the cached code
 * objects this snapshot named frames after are still there: from the second
 * copies the batch ended with where it has them, else in one read (one per
 * snapshot, not one per thread). 1 when all are, 0 when some are
 * not (they are read again at the next use: the snapshot must be taken
 * again), or a read error.
 */
static int snapshot_codes_ok(struct pys_session *s, struct mem_mark batch)
{
    struct prof_named_codes *nc = &s->named;
    if (!s->codes.validate || nc->each_walk || nc->n == 0)
        return 1;
    /* Every frame from the batch: the second copies it ends with, read
     * after them, do for the objects the last snapshot named too; the
     * others are read. */
    prof_codecache_hint(&s->codes, &s->mem, &s->off, nc->addrs, nc->n);
    size_t left = nc->n;
    int rc = 0;
    if (!mem_past_batch_since(&s->mem, batch))
        rc = prof_codecache_rechecked(&s->codes, &s->mem, &s->off, nc->addrs, nc->n, &left);
    if (rc == 0 && left > 0)
        rc = prof_codecache_check(&s->codes, &s->mem, &s->off, nc->addrs, left);
    if (rc < 0)
        return rc;
    return rc == 0;
}

/* addr lies inside the runtime (3.11+ keeps the main interpreter there). */
static int in_runtime(const struct pys_session *s, uint64_t addr)
{
    uint64_t size = s->off.runtime_state.size;
    return size != CPY_ABSENT && addr > s->runtime && addr - s->runtime < size;
}

/*
 * The first interpreter. A new one is put at the list's head, and nearly
 * every process has one interpreter all its life: while the list held one
 * alone, it is taken to be unchanged for up to LONE_INTERP_NS, sparing each
 * snapshot's batch a piece (a page of the runtime of its own). A
 * subinterpreter started meanwhile is seen that much later. Only for a lone
 * interpreter inside the runtime (snapshot_try sets first.lone): the main
 * one, which lasts as long as the runtime, not one freed as the process
 * exits.
 */
static int first_interp(struct pys_session *s, uint64_t *iaddr)
{
    uint64_t now = mem_clock_ns(&s->mem), lone = s->first.lone;
    if (lone != 0 && now - s->first.read_ns < LONE_INTERP_NS) {
        *iaddr = lone;
        return 0;
    }
    s->first.lone = 0;
    s->first.read_ns = now;
    uint64_t since = s->snapshots - s->first.read_snap;
    s->first.read_snap = s->snapshots;
    /* Still alone, most likely. Sampled fast, it is read on its own, once a
     * millisecond, rather than in the batch, whose plan would carry its page
     * for the next LONE_INTERP_SNAPSHOTS; sampled slowly, in the batch. */
    if (lone != 0 && since > LONE_INTERP_SNAPSHOTS)
        return mem_read_fresh(&s->mem, s->runtime + s->off.runtime_state.interpreters_head, iaddr,
                              sizeof *iaddr);
    return cpy_runtime_first_interp(&s->mem, &s->off, s->runtime, iaddr);
}

/*
 * The threads of interpreter in (at position ni of the list), read into
 * s->res and counted in pi. 0, or an error that ends the snapshot.
 */
static int read_threads(struct pys_session *s, const struct cpy_interp *in, size_t ni,
                        struct pys_interp *pi)
{
    int rc;
    uint64_t taddr = in->threads_head;
    for (size_t nt = 0; taddr != 0; nt++) {
        struct cpy_thread t;
        if (nt == CPY_MAX_THREADS)
            return prof_fail(s, PYS_E_TOODEEP, "more than %d threads", CPY_MAX_THREADS);
        if ((rc = reserve_threads(s, s->res.nthreads + 1)) < 0)
            return rc;
        mem_log_mark(&s->mem);
        struct mem_mark mark = mem_mark(&s->mem);
        rc = cpy_thread_read(&s->mem, &s->off, &s->sym, taddr, s->walker.tsbuf, &t);
        if (rc == PYS_E_EXITED)
            return rc;
        if (rc < 0) {
            /* The list is broken here: report the thread and stop. */
            struct pys_thread *pt = &s->res.threads[s->res.nthreads];
            memset(pt, 0, sizeof *pt);
            pt->tstate = taddr;
            pt->error = rc;
            snprintf(s->res.thread_err[s->res.nthreads], sizeof s->res.thread_err[0],
                     "thread state at 0x%llx unreadable: %s", (unsigned long long)taddr,
                     pys_strerror(rc));
            s->res.thread_frame_start[s->res.nthreads] = s->res.nframes;
            s->res.nthreads++;
            pi->nthreads++;
            return 0;
        }
        if ((rc = read_thread(s, in, &t, mark, s->res.nthreads, ni, 0)) < 0)
            return rc;
        s->res.nthreads++;
        pi->nthreads++;
        taddr = t.next;
    }
    return 0;
}

/* What one try of a snapshot ends in, besides 0 and errors. */
#define SNAP_AGAIN 1 /* take it again: code objects were freed meanwhile (a try) */
#define SNAP_FULL 2  /* take it again, reading every thread (idle.c; not a try) */

/*
 * Every interpreter and thread, read into s->res: 0, SNAP_AGAIN, SNAP_FULL
 * or an error. The last try (tries + 1 == GENERATION_TRIES) checks each
 * walk's code objects before naming frames, and each walk's chain right
 * after it.
 */
static int snapshot_try(struct pys_session *s, int tries)
{
    uint64_t iaddr;
    int rc;
    s->res.ninterps = s->res.nthreads = s->res.nframes = 0;
    s->named.n = 0;
    s->torn.nchk = s->torn.nchk_walks = 0;
    s->fcache.seen = 0;
    s->named.each_walk = tries + 1 >= GENERATION_TRIES;
    s->torn.put_off = !s->named.each_walk;
    s->torn.grow_left = PROF_GROW_BUDGET;
    s->err[0] = '\0';
    s->snapshots++;
    if ((rc = prof_idle_begin(s, tries)) < 0)
        return rc;
    mem_prefetch_begin(&s->mem);
    struct mem_mark batch = mem_mark(&s->mem);
    if ((rc = first_interp(s, &iaddr)) < 0)
        return rc;
    uint64_t head = iaddr;
    for (size_t ni = 0; iaddr != 0; ni++) {
        struct cpy_interp in;
        if (ni == CPY_MAX_INTERPS)
            return prof_fail(s, PYS_E_TOODEEP, "more than %d interpreters", CPY_MAX_INTERPS);
        if ((rc = cpy_interp_read(&s->mem, &s->off, s->runtime, iaddr, &in)) < 0)
            return rc;
        if ((rc = util_array_reserve((void **)&s->res.seen_interps, &s->res.seen_interps_cap,
                                     ni + 1, sizeof *s->res.seen_interps)) < 0)
            return rc;
        s->res.seen_interps[ni] = in;
        if (ni == 0 && s->first.lone == 0)
            s->first.lone = in.next == 0 && in_runtime(s, head) ? head : 0;
        check_code_generation(s, ni, &in);
        if ((rc = util_array_reserve((void **)&s->res.interps, &s->res.interps_cap,
                                     s->res.ninterps + 1, sizeof *s->res.interps)) < 0)
            return rc;
        struct pys_interp *pi = &s->res.interps[s->res.ninterps++];
        pi->id = in.id;
        pi->gil_holder = in.gil_holder;
        pi->gc_running = s->opt.gc && in.gc_frame != 0;
        pi->nthreads = 0;
        /* threads is an index until the fix-up below: the array may move. */
        pi->threads = (const struct pys_thread *)(uintptr_t)s->res.nthreads;
        if (s->idle.active) {
            if ((rc = take_over_threads(s, &in, ni, pi)) < 0)
                return rc;
            if (rc == 0) {
                s->idle.force_full = 1;
                return SNAP_FULL;
            }
            iaddr = 0;
            continue;
        }
        if ((rc = read_threads(s, &in, ni, pi)) < 0)
            return rc;
        iaddr = in.next;
    }
    prof_objframes_hint(s);
    if ((rc = put_off_checks(s)) < 0)
        return rc;
    if (mem_past_batch_since(&s->mem, batch) && tries + 1 < GENERATION_TRIES && generation_moved(s))
        return SNAP_AGAIN;
    if ((rc = snapshot_codes_ok(s, batch)) < 0)
        return rc;
    return rc == 0 ? SNAP_AGAIN : 0;
}

/* After a try that succeeded: turn indices into pointers now that the
 * arrays are final. Whether a thread failed. */
static int fix_up(struct pys_session *s)
{
    /* Interpreters without threads (a process caught starting up) may come
     * before any thread was ever stored: no array yet. */
    for (size_t i = 0; i < s->res.ninterps; i++)
        s->res.interps[i].threads =
            s->res.threads ? s->res.threads + (uintptr_t)s->res.interps[i].threads : NULL;
    int failed = 0;
    for (size_t i = 0; i < s->res.nthreads; i++) {
        s->res.threads[i].frames =
            s->res.frames ? s->res.frames + s->res.thread_frame_start[i] : NULL;
        s->res.threads[i].error_text = s->res.threads[i].error ? s->res.thread_err[i] : NULL;
        failed |= s->res.threads[i].error != 0;
    }
    return failed;
}

/*
 * The retries, in one place each: a thread whose walk was torn is walked
 * again in read_thread (its second reads put off to the snapshot's end come
 * back there too); the whole snapshot is taken again here, when code
 * objects were freed while it was read (at most GENERATION_TRIES times) or
 * when threads taken over turned out to have changed (SNAP_FULL).
 */
int pys_session_snapshot(pys_session *s, const struct pys_snapshot **out)
{
    int rc, tries = 0;

    if (s->exec_seen)
        return PYS_E_EXEC;
    /* The last snapshot's results stay readable: threads may be taken over. */
    prof_idle_keep_results(s);
    prof_native_begin(s);
    /* Threads that failed in a try taken again are no failed stacks: only
     * the try kept counts them. */
    uint64_t thread_errors = s->thread_errors;
    while ((rc = snapshot_try(s, tries)) > 0) {
        tries += rc == SNAP_AGAIN;
        s->thread_errors = thread_errors;
        mem_prefetch_end(&s->mem);
    }
    if (rc < 0) {
        mem_prefetch_end(&s->mem);
        prof_idle_end(s, 0);
        if (rc != PYS_E_EXITED) {
            int erc = prof_exec_check(s, 1);
            if (erc < 0)
                return erc;
        }
        if (rc == PYS_E_EXITED)
            return prof_fail(s, rc, "process %d exited", s->pid);
        if (rc != PYS_E_TOODEEP && s->core)
            prof_fail(s, rc, "reading the core: %s", pys_strerror(rc));
        else if (rc != PYS_E_TOODEEP)
            prof_fail(s, rc, "reading process %d: %s", s->pid, pys_strerror(rc));
        return rc;
    }
    /* Threads taken over were not walked: their entries stay. */
    if (s->use_fcache && !s->idle.active)
        prof_fcache_sweep(s);
    prof_idle_end(s, 1);
    int failed = fix_up(s);
    mem_prefetch_end(&s->mem);
    if (s->native && (rc = prof_native_snapshot(s)) < 0)
        return prof_fail(s, rc, "native stacks: %s", pys_strerror(rc));
    /* What was read may be another program's memory: not reported then. */
    if ((rc = prof_exec_check(s, failed)) < 0)
        return rc;
    s->snap.ninterps = s->res.ninterps;
    s->snap.interps = s->res.interps;
    *out = &s->snap;
    return 0;
}
