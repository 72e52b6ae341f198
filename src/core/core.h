/*
 * core: what a session keeps between calls: interned strings, the code
 * object cache, and the session itself. Internal to libpystrobe.
 */
#ifndef PYSTROBE_CORE_H
#define PYSTROBE_CORE_H

#include <stddef.h>
#include <stdint.h>

#include <pystrobe/pystrobe.h>

#include "core/image.h"
#include "cpython/cpython.h"
#include "mem/mem.h"
#include "platform/platform.h"
#include "util/array.h"
#include "util/hashtab.h"

/* --- interned strings (intern.c) ---------------------------------------- */

/* A set of NUL-terminated strings; each distinct string is stored once and
 * keeps its address until prof_intern_release. */
struct prof_intern {
    char **strs;            /* strs[1..count]: the strings, by id */
    size_t count, cap;      /* cap: strs has room for ids below it */
    struct util_htab index; /* their ids, by util_hash_bytes */
};

/* The interned copy of s (len bytes, no NUL needed), or NULL if out of memory. */
const char *prof_intern_str(struct prof_intern *in, const char *s, size_t len);
void prof_intern_release(struct prof_intern *in);

/* --- thread names (threadnames.c) -------------------------------------- */

struct prof_tnames;
void prof_tnames_free(struct prof_tnames *tn);

/* --- stopping the target (pause.c) -------------------------------------- */

struct prof_pause;
/* Resumes the target if paused, and frees. */
void prof_pause_free(struct prof_pause *p);
void prof_pause_stats(const struct prof_pause *p, struct pys_stats *out);

/* --- native stacks (native.c) ------------------------------------------ */

struct prof_native;
struct prof_native *prof_native_new(void);
void prof_native_free(struct prof_native *n);
/* After a snapshot of a paused target: each thread's frames become its
 * merged native and Python stack. 0, or PYS_E_NOMEM. */
int prof_native_snapshot(struct pys_session *s);
/* While a walk's frames are named: a shim frame at addr lies between the
 * frames before s->res.nframes and those after. 0, or PYS_E_NOMEM. */
int prof_native_note_shim(struct pys_session *s, uint64_t addr);
/* At a snapshot's start. */
void prof_native_begin(struct pys_session *s);
/* If f is a frame of the last snapshot's merged native stacks: 0, and in
 * *idx the index in s->res.frames of the Python frame it is (SIZE_MAX for
 * a native frame); else PYS_E_NOTFOUND. */
int prof_native_res_index(const struct pys_session *s, const struct pys_frame *f, size_t *idx);

/* --- local variables (locals.c) ---------------------------------------- */

struct prof_locals;
/* NULL if out of memory. */
struct prof_locals *prof_locals_new(void);
void prof_locals_free(struct prof_locals *l);
/* pys_options.locals: the Python frame at index i of s->res.frames is the
 * frame at addr running code. 0 or PYS_E_NOMEM. */
int prof_locals_note(struct pys_session *s, size_t i, uint64_t addr, uint64_t code);

/* --- code object cache (codecache.c) ------------------------------------ */

struct prof_code {
    uint64_t addr;          /* where the code object is */
    uint64_t id;            /* unique per entry: keys the location memo */
    int stale;              /* prof_codecache_check found another object at addr */
    uint64_t checked;       /* the check that last looked at it */
    uint64_t hinted;        /* the prof_codecache_hint call that last hinted it */
    const char *filename;   /* interned */
    const char *qualname;   /* interned */
    struct cpy_code code;   /* linetable and lengths; its strings are freed */
};

/* A frame position already decoded: (code, position) -> location. */
struct prof_locmemo {
    uint64_t code;       /* prof_code.id; 0 = empty */
    uint64_t position;   /* cpy_raw_frame.instr_ptr */
    int32_t lasti;
    struct cpy_location loc;
};

/* Direct-mapped; 4096 entries (160 KiB) cover the hot lines of most programs. */
#define PROF_LOCMEMO_SIZE 4096

struct prof_codecache {
    struct prof_code *entries; /* entries[1..count], by id */
    size_t count, cap;         /* cap: entries has room for ids below it */
    struct util_htab index;    /* their ids, by address */
    uint64_t hits, misses, stale;
    uint64_t next_id;
    int validate;              /* cached objects need prof_codecache_check (3.8-3.13) */
    uint64_t checks;           /* prof_codecache_check calls */
    uint64_t hints;            /* prof_codecache_hint calls */
    struct mem_seg *segs;      /* its scratch: 3 pieces per code object, sorted copy */
    uint8_t *buf;
    size_t segs_cap, buf_cap;
    struct prof_locmemo *memo; /* PROF_LOCMEMO_SIZE entries, allocated on first use */
};

/*
 * Without a code object generation counter (3.8-3.13): check, in one read of
 * the target made after the frames were read, that the cached code objects
 * at addrs[0..n) are still there (their pointers, and their names' lengths
 * and hashes), so that a frame is never named after a freed code object
 * whose memory went to another. Entries that fail are read again by
 * prof_codecache_get. Returns how many failed, or a read error
 * (PYS_E_EXITED).
 */
int prof_codecache_check(struct prof_codecache *cc, struct mem *m, const struct cpy_offsets *o,
                         const uint64_t *addrs, size_t n);
/* The same check from the second copies at the end of the snapshot's batch
 * (mem_recheck_view), when every frame came from that batch: how many
 * failed. The addresses of those it has no copies of are moved to the front
 * of addrs, *missing of them, to be checked by reading. prof_codecache_hint
 * has the next batches make those copies. */
int prof_codecache_rechecked(struct prof_codecache *cc, struct mem *m,
                             const struct cpy_offsets *o, uint64_t *addrs, size_t n,
                             size_t *missing);
void prof_codecache_hint(struct prof_codecache *cc, struct mem *m, const struct cpy_offsets *o,
                         const uint64_t *addrs, size_t n);

/* 1 if frames of code c get no location under opt: its line table is over
 * opt->max_linetable, or was too large to be read at all. */
static inline int32_t prof_no_location(const struct pys_options *opt, const struct cpy_code *c)
{
    size_t max = opt->max_linetable ? opt->max_linetable : PYS_MAX_LINETABLE_DEFAULT;
    return !c->linetable || c->linetable_len > max;
}

/* The cached code object at addr, reading and interning it on a miss. */
int prof_codecache_get(struct prof_codecache *cc, struct prof_intern *in, struct mem *m,
                       const struct cpy_offsets *o, const struct cpy_symbols *sym,
                       uint64_t addr, const struct prof_code **out);
/* Where frame f is in code pc, as cpy_code_locate, remembered per
 * (code, position) so that a line table is decoded once per instruction. */
/* The code unit where the instruction holding unit idx of pc starts, as
 * cpy_code_instr_start (which may decode pc's code once and keep that). */
int prof_codecache_instr_start(struct prof_codecache *cc, struct mem *m,
                               const struct cpy_offsets *o, const struct prof_code *pc,
                               uint64_t idx, uint64_t *start);
/* The first byte of code unit idx of pc from the cache's copy of its
 * bytecode, as cpy_code_opcode (PYS_E_NOTFOUND: not held, read it live). */
int prof_codecache_opcode(struct prof_codecache *cc, struct mem *m, const struct cpy_offsets *o,
                          const struct prof_code *pc, uint64_t idx, uint8_t *op);
/* Whether code unit idx of pc lies in an instruction that resumes a
 * generator, as cpy_code_resumes_at (which reads pc's code once and keeps
 * what it found). */
int prof_codecache_resumes(struct prof_codecache *cc, struct mem *m, const struct cpy_offsets *o,
                           const struct prof_code *pc, uint64_t idx);
int prof_codecache_locate(struct prof_codecache *cc, const struct cpy_offsets *o,
                          const struct prof_code *pc, const struct cpy_raw_frame *f,
                          int32_t *lasti, struct cpy_location *loc);

/* Forget every entry (the target may have freed and reused code objects). */
void prof_codecache_clear(struct prof_codecache *cc);
void prof_codecache_release(struct prof_codecache *cc);

/* --- one walk (snapshot.c, framecache.c, torn.c) ------------------------ */

/*
 * What one thread's read goes into (s->walker; set up by snapshot.c): its
 * thread state's bytes, the data stack's chunks and second copies, and the
 * frame records a walk reads.
 */
struct prof_walker {
    uint8_t *tsbuf; /* cpy_thread_bufsize bytes */
    struct cpy_stack stack;
    struct cpy_raw_frame *raw;
    /* The frame records a walk may read: opt.max_frames (a longer chain
     * keeps one less, and a <truncated> marker below them). */
    size_t max;
};
/* Room for max frames: 0 or PYS_E_NOMEM. */
int prof_walker_init(struct prof_walker *w, const struct cpy_offsets *o, size_t max);
void prof_walker_release(struct prof_walker *w);

/*
 * What one walk of one thread passes to its checks and to the naming of its
 * frames (as CPython's FrameWalkContext): made by the snapshot for each try
 * of a thread and passed explicitly; the frames are in s->walker.raw (or the
 * cache entry's).
 */
struct prof_walk {
    /* mem_mark just before the thread state was read: if no read came
     * since, the state and the frames all came from the snapshot's one
     * batched read. */
    struct mem_mark mark;
    /* The frame cache entry the walk used (whose frames are then the chain;
     * s->walker.raw holds only the frames read), and the index from which the
     * chain's frames came from the cache, their resolutions with them
     * (SIZE_MAX when none did). */
    struct prof_fcache_entry *entry;
    size_t tail_start;
    /* Where the chain was cut: the caller of its last frame; 0: whole. */
    uint64_t cut;
    /* Walked from the top the batch's second copy of the thread state
     * names (prof_torn_later_top), on copies made before that copy. */
    int later_top;
};

/* What the naming of a walk's frames (snapshot.c) made of each of the
 * frames it read, by index in the walk: kept by the frame cache for the
 * next sample's cached tail. */
struct prof_resolved {
    struct pys_frame *frames; /* a Python frame past its prologue: what it is */
    uint8_t *kind;            /* PROF_RES_* */
};
/* Room for n frames: 0 or PYS_E_NOMEM. */
int prof_resolved_init(struct prof_resolved *r, size_t n);
void prof_resolved_release(struct prof_resolved *r);

/* --- frame cache (framecache.c), CPython 3.15+ -------------------------- */

/* Strikes that make a thread's anchor another writer's (framecache.c). */
#define PROF_FCACHE_OTHER_STRIKES 32

struct prof_fcache_entry {
    uint64_t tstate;              /* the thread state's address */
    struct cpy_raw_frame *frames; /* the last chain, current frame first, to the base */
    size_t n, cap;
    uint64_t anchor, seq;         /* last_profiled_frame and its seq when last sampled */
    /* What each of `frames` resolved to last time (PROF_RES_*), so that the
     * cached tail of the next sample is copied, not looked up again. */
    struct pys_frame *res;        /* as many as frames (cap) */
    uint8_t *res_kind;
    int res_valid;                /* res matches frames */
    uint64_t epoch;               /* snapshot that last saw the thread */
    uint32_t since_full;          /* samples since the last full walk */
    int wrote;                    /* the last sample wrote `anchor` */
    uint32_t wasted;              /* anchors written in a row that were gone by the next */
    uint32_t skipped;             /* writes skipped meanwhile */
    uint64_t last_stop;           /* the anchor the last walk went down to */
    uint64_t cut;                 /* frames is cut (at walker.max - 1): the caller of its
                                   * last frame; 0 = the whole chain */
    int looked;                   /* a walk has seen the thread (it writes from the next) */
    int other_writer;             /* another profiler writes its anchor: left alone */
    uint32_t strikes;             /* anchors found foreign lately (prof_fcache_usable) */
    uint64_t walks, first_strike; /* prof_fcache_usable calls: all, at the first strike */
};

#define PROF_RES_FRAME 0      /* a Python frame: res holds it */
#define PROF_RES_INCOMPLETE 1 /* a frame in its prologue: shown by nobody */
#define PROF_RES_SHIM 2       /* an entry/shim/base frame */

struct prof_fcache {
    struct prof_fcache_entry *v; /* v[1..count], by id */
    size_t cap, count;           /* cap: v has room for ids below it */
    struct util_htab index;      /* their ids, by tstate */
    uint64_t hits, partial_hits, misses, frames_cached, frames_read;
    size_t seen; /* entries seen by the snapshot under way (prof_fcache_sweep) */
    uint64_t other_writers;      /* threads found with another writer of their anchor */
    uint64_t other_writer_walks; /* thread samples walked without the cache for that */
    /* Whether the cache pays (snapshot.c, fcache_on): first walks with it
     * in the window under way, how many were torn, and the snapshot before
     * which it rests. rests: how many times it was set to rest. */
    uint32_t win_walks, win_torn;
    uint64_t rest_until, rests;
};

struct pys_session;
/*
 * May thread t (its state just read) be walked with the cache? Not once its
 * anchor was found, a few times lately, where neither pystrobe nor the
 * interpreter put it: another profiler writes it (CPython 3.15's own, with
 * cache_frames); once, this walk is a whole one. That thread is
 * then walked without the cache, as --read-only does, and its anchor is never
 * written again; counted in other_writers (threads) and other_writer_walks.
 */
int prof_fcache_usable(struct pys_session *s, const struct cpy_thread *t);
/* Walk thread t into s->walker.raw using and refreshing the cache; returns the
 * number of raw frames or an error, as cpy_stack_walk, and fills w (its
 * entry, tail and cut). */
int prof_fcache_walk(struct pys_session *s, struct prof_walk *w, const struct cpy_thread *t);
/* After the walk's frames were resolved (ok) or not: keep what each raw
 * frame resolved to (s->resolved) for the next sample's cached tail. */
void prof_fcache_resolved(struct pys_session *s, const struct prof_walk *w, size_t nraw, int ok);
/* Drop the entries of threads the last snapshot did not see. */
void prof_fcache_sweep(struct pys_session *s);
void prof_fcache_release(struct prof_fcache *fc);

/* --- heap frames, copied twice in each batch (objframes.c) --------------- */

#define PROF_OBJFRAMES 128
/* Generators' callers remembered: PROF_OBJFRAME_SETS sets (a power of two)
 * of PROF_OBJFRAME_WAYS links each, a link's set picked by its frame's
 * address and code object: a pipeline's stages, several threads' or tasks'
 * chains, and the same frames of the pipelines a program builds in turn. */
#define PROF_OBJFRAME_SETS 64
#define PROF_OBJFRAME_WAYS 4

/* The frames walks met lately, by address, and the snapshot each was last
 * met by (pys_session.snapshots). */
struct prof_objframes {
    uint64_t addr[PROF_OBJFRAMES], seen[PROF_OBJFRAMES];
    uint32_t level[PROF_OBJFRAMES]; /* its place from the walk's bottom up */
    size_t n;
    uint64_t full; /* the snapshot that found every frame kept met by itself */
    /* Generators' frames seen linked by walks kept at once, by address and
     * code object: their caller's address, code object and position then,
     * and when it was learned (pys_session.snapshots + 1; 0: an empty way).
     */
    struct prof_objframe_link {
        uint64_t frame, code, caller, caller_code, caller_pos, seen;
    } callers[PROF_OBJFRAME_SETS][PROF_OBJFRAME_WAYS];
};

struct pys_session;
struct cpy_thread;
/* A walk of thread t met frames raw[0..n) (3.8-3.10's, 3.11+'s generator
 * frames). */
void prof_objframes_note(struct pys_session *s, const struct cpy_thread *t,
                         const struct cpy_raw_frame *raw, size_t n);
/* Have the next batch read the frames met lately, and copy them a second
 * time, innermost (mem_inner_hint): before the snapshot's batch is let go. */
void prof_objframes_hint(struct pys_session *s);
/* Note the callers of the generators' frames of raw[0..n), a walk kept at
 * once (the links its copies showed, not those it inferred). */
void prof_objframes_learn(struct pys_session *s, const struct cpy_raw_frame *raw, size_t n);
/* cpy_stack.gen_caller (ctx: the session): the k-th of the callers
 * generator frame `frame` running `code` had when noted, the last noted
 * first. */
int prof_objframes_caller(void *ctx, uint64_t frame, uint64_t code, size_t k, uint64_t *caller,
                          uint64_t want[2]);

/* --- torn walks (torn.c) --------------------------------------------------- */

/*
 * Is a walk one moment of the target? (torn.c's opening says how it is
 * answered.) A walk comes in with the reads it came from: s->walker.raw and
 * s->walker.stack, and w->mark, taken just before its thread state was read. The
 * verdicts:
 */
#define PROF_TORN_MIXED 0 /* two moments: read the thread again */
#define PROF_TORN_ONE 1   /* one moment */
#define PROF_TORN_LATER 2 /* decided at the snapshot's end (prof_torn_deferred) */

/* A walk whose second read is put off to the snapshot's end. */
struct prof_put_off {
    size_t ti, ni, first, n; /* thread, interpreter (by position), its words */
    size_t log_at;           /* where its reads start in mem's log (mem_log_marked) */
};

/* What torn.c keeps: its scratch, and the second reads put off. */
/* Bytes of room to grow (chain_hint) the second copies of one snapshot's
 * walks may take in all: a few deep threads' worth, so that a process of
 * many threads does not copy a page more per thread. */
#define PROF_GROW_BUDGET (64u << 10)

struct prof_torn {
    uint64_t (*verify)[3]; /* code, caller and position of each frame, re-read */
    struct mem_seg *segs;
    /* The anchor and its sequence number, read after a walk's own second
     * copy (cpy_stack.after), in this order. */
    uint64_t after[2];
    /* Walks to be checked against a second read at the snapshot's end, all
     * in one read: the fields to read, what the walk saw in them, and whose
     * they are. Not on a snapshot's last try (put_off 0). */
    struct mem_seg *chk_segs;
    struct prof_chk {
        uint64_t got, want;
        int kind; /* CHK_*: how got compares with want */
    } * chk_vals;
#define CHK_WORD 0 /* as read */
#define CHK_CODE 1 /* a code object reference: tag bits cleared */
#define CHK_POS 2  /* a position field: cpy_frame_pos_value */
#define CHK_LINK 3 /* an inferred generator's caller: as read, or 0 */
    size_t nchk, chk_segs_cap, chk_vals_cap;
    struct prof_put_off *chk_walks;
    size_t nchk_walks, chk_walks_cap;
    int put_off; /* walks may put their second read off */
    /* Bytes above the stacks' tops the next batch may still copy a second
     * time (chain_hint's room to grow), this snapshot. */
    size_t grow_left;
};
void prof_torn_release(struct prof_torn *tn);

/*
 * A walk of thread t made without the frame cache, raw[0..n), at position
 * ti of the snapshot's threads (ni: its interpreter's). PROF_TORN_ONE,
 * PROF_TORN_MIXED, or PROF_TORN_LATER (its second read put off; should the
 * walk then fail to be named, prof_torn_forget_last drops it). Has the next
 * batch make the second copies the walk needs.
 */
int prof_torn_walk(struct pys_session *s, const struct prof_walk *w, const struct cpy_interp *in,
                   const struct cpy_thread *t, size_t n, size_t ti, size_t ni);
void prof_torn_forget_last(struct pys_session *s);
/* Are second reads put off, waiting for prof_torn_deferred? (Below.) */
static inline int prof_torn_pending(const struct pys_session *s);
/* Make the second reads put off, in one read: how many of those walks
 * changed (*torn: which, to be read again), or PYS_E_EXITED. No walk puts
 * its read off after this until put_off is set again. */
int prof_torn_deferred(struct pys_session *s, const struct prof_put_off **torn);
/*
 * A walk from the batch torn at a top frame that does not live on the data
 * stack (a generator that yielded between the copy of the thread state and
 * that of its frame) can start again from the frame the thread state's
 * second copy, made last in the same batch, names as current: one read
 * after every frame's first and second copies. Its chain goes through the
 * same checks, against the same second copies, its top's position too
 * (prof_walk.later_top). 1 if cur now starts there;
 * 0 when the top was on the data stack (its thread is read again), a read
 * came after the batch, the batch has no such copy, or it names the same
 * frame.
 */
int prof_torn_later_top(struct pys_session *s, const struct prof_walk *w, struct cpy_thread *cur);

/*
 * The frame cache's walks (3.15). prof_torn_cached: a hit's frames read
 * down to the anchor, raw[0..k) (raw[k - 1] is the anchor, `anchor`), when
 * the anchor has not returned: have the anchor, its sequence number, the
 * frames above it and its position stayed as read? prof_torn_whole: a
 * whole walk raw[0..n), cut at `cut` (0: whole), the anchor and its number
 * too. 1 one moment, 0 torn. Both have the next batch make second copies of
 * the frames above raw[next_anchor], where the walk leaves the anchor.
 */
int prof_torn_cached(struct pys_session *s, const struct prof_walk *w, const struct cpy_thread *t,
                     size_t k, uint64_t anchor, size_t next_anchor);
int prof_torn_whole(struct pys_session *s, const struct prof_walk *w, const struct cpy_thread *t,
                    size_t n, uint64_t cut, size_t next_anchor);
/*
 * Have a walk down to the anchor that reads past the batch make its own
 * second copy in the same system call (cpy_stack.after), followed by the
 * thread's anchor and its sequence number, and the main interpreter's code
 * object generation: all a partial hit would otherwise read again in two
 * more calls. Whether the generation was asked for.
 */
int prof_torn_ask_own_copy(struct pys_session *s, const struct cpy_thread *t);

/*
 * Check frames raw[from..k) of the last cpy_stack_walk_to against the second
 * copy it made (cpy_stack.after): each frame's code object, caller and
 * position as the walk saw them (the last one's caller: last_prev), and
 * with pos_k, raw[k]'s position too. 1 when all match, 0 when one differs
 * (the chain moved while it was copied), -1 when there is no second copy
 * holding them all.
 */
int prof_torn_own_copy(const struct cpy_offsets *o, const struct cpy_stack *st,
                       const struct cpy_raw_frame *raw, size_t from, size_t k, uint64_t last_prev,
                       int pos_k);
/* Have the next snapshot's batch end with a second copy of thread t's GIL
 * flag (3.15) and, with the frame cache, of its anchor and sequence number: an anchor that moved
 * while the batch was read fails a walk that used it. */
void prof_anchor_hint(struct pys_session *s, const struct cpy_thread *t);

/*
 * The chain's shape, checked as its frames raw[0..) are named, top first.
 * prof_torn_frame_order: raw[i] has returned (code cleared) below a frame
 * that has not (*live_above, 0 at the top): 0, torn. prof_torn_frame_fits:
 * raw[i] (named: code pc; incomplete: in its prologue) and its callee
 * raw[i - 1] are a stack (adjacent on the data stack; a caller that has
 * started and, where the callee was called inline, that was calling):
 * 0, or PYS_E_CORRUPT with the detail in err.
 */
static inline int prof_torn_frame_order(const struct cpy_raw_frame *raw, size_t i, int *live_above)
{
    /* A frame is cleared (its code object gone) as it returns, after the
     * frames above it: a cleared frame below one that is not was read at
     * two moments. (Inline: asked for every frame named.) */
    if (raw[i].code == 0 && *live_above)
        return 0;
    *live_above |= raw[i].code != 0;
    return 1;
}
static inline int prof_torn_frame_fits(struct pys_session *s, const struct cpy_thread *t,
                                       const struct cpy_raw_frame *raw, size_t i,
                                       const struct prof_code *pc, int incomplete, char *err,
                                       size_t errlen);
/* prof_torn_frame_fits's checks (inline: asked for every frame named; the
 * detail is written out of line, when one fails, the refusal's kind
 * PROF_TORN_NOT_*). */
#define PROF_TORN_NOT_STARTED 0 /* a caller in its prologue */
#define PROF_TORN_NOT_CALLEE 1  /* callee and caller not adjacent */
#define PROF_TORN_NOT_CALLING 2 /* a caller running its own code */
#define PROF_TORN_NOT_RESUMED 3 /* a caller resuming a generator, under another frame */
int prof_torn_frame_refused(const struct prof_code *pc, int kind, char *err, size_t errlen);
/* 3.11 (a position that points at the last code unit executed): was caller
 * (code pc) calling a Python function inline, its position in that call's
 * inline cache? 0 if its position is the first unit of an instruction; 1
 * if not, or when its code cannot be decoded. */
int prof_torn_in_call(struct pys_session *s, const struct cpy_raw_frame *caller,
                      const struct prof_code *pc);
/* 3.11+: is caller (code pc) at an instruction that resumes a generator
 * (SEND, FOR_ITER)? 1 if so; 0 if not, or not known. */
int prof_torn_resuming(struct pys_session *s, const struct cpy_raw_frame *caller,
                       const struct prof_code *pc);
static inline int prof_torn_adjacent(const struct pys_session *s, const struct cpy_thread *t,
                                     const struct cpy_raw_frame *callee,
                                     const struct cpy_raw_frame *caller,
                                     const struct prof_code *caller_code);

/* --- the session (session.c, attach.c, snapshot.c) ---------------------- */

/* Interpreters whose code object generation is tracked one by one; past
 * these the code cache is emptied at every snapshot. */
#define PROF_GEN_SLOTS 16

/* Each interpreter's code object generation (3.14+), as last seen
 * (snapshot.c: the code cache is emptied when one moves). */
struct prof_gen {
    uint64_t interp[PROF_GEN_SLOTS], seen[PROF_GEN_SLOTS]; /* by position in the list */
    /* The main interpreter's generation as a walk read it after its frames
     * (prof_fcache_walk), and mem_mark just after that read: if no read
     * came since, it is the latest look. */
    uint64_t after;
    struct mem_mark after_mark;
};

/* A snapshot's interpreters, threads and frames (pys_session's, and the
 * last one kept). */
struct prof_results {
    struct pys_interp *interps;
    size_t ninterps, interps_cap;
    struct cpy_interp *seen_interps; /* the interpreters as read, by position */
    size_t seen_interps_cap;
    struct pys_thread *threads;
    size_t nthreads, threads_cap;
    size_t *thread_frame_start; /* per thread: index of its first frame */
    char (*thread_err)[160];    /* per thread: error detail */
    struct mem_span *thread_stack; /* per thread: the used data stack chunk, as read */
    struct pys_frame *frames;
    size_t nframes, frames_cap;
};
void prof_results_release(struct prof_results *r);

/*
 * pys_options.reuse_idle (idle.c). With a GIL only its holder runs Python
 * code, and the GIL's hand-over count moves whenever another thread state
 * takes it. So if the count has not moved since the GIL was read before the
 * last snapshot, only the holder's stack can have changed; if it moved once,
 * only the old and the new holder's. The others are taken over from the
 * last snapshot. A snapshot that takes threads over reads through its own
 * struct mem, whose batched read learns only such snapshots' reads.
 */
struct prof_idle {
    int valid;        /* `prev` and the fields below describe the last snapshot */
    uint64_t interp, head, holder, switches; /* read before it walked any thread */
    uint32_t since_full; /* snapshots since the last that read every thread */
    /* This snapshot: */
    int have_gil;     /* the GIL was read before the snapshot (gil below) */
    struct cpy_interp gil;
    int active;       /* threads are taken over; walk[] are read */
    int force_full;   /* a check failed: read every thread */
    uint64_t walk[2];
    size_t nwalk;
    uint64_t reused;  /* counter: thread stacks taken over */
};

/* The interpreter list's head as last read (snapshot.c, first_interp). */
struct prof_first_interp {
    uint64_t lone;      /* the head, when the list held that one interpreter alone; else 0 */
    uint64_t read_ns;   /* when the head was last read: time ... */
    uint64_t read_snap; /* ... and snapshot count */
};

/* pys_options.opcodes (snapshot.c): one read per Python frame of a
 * thread, the frame (index in frames) each one fills, and the bytes read. */
struct prof_opcodes {
    struct mem_seg *segs;
    size_t *frame;
    uint8_t *byte;
};
/* Room for n reads: 0 or PYS_E_NOMEM. */
int prof_opcodes_init(struct prof_opcodes *op, size_t n);
void prof_opcodes_release(struct prof_opcodes *op);

/* 3.8-3.13 (snapshot.c): the code objects this snapshot's frames were
 * named after, checked in one read once every thread is walked
 * (snapshot_codes_ok), unless each_walk (a snapshot's last try: each
 * walk's own, as its frames are named). */
struct prof_named_codes {
    uint64_t *addrs;
    size_t n, cap;
    int each_walk;
};
void prof_named_codes_release(struct prof_named_codes *nc);

struct pys_session {
    int pid;
    struct pys_options opt;
    struct mem_proc proc; /* the live process's memory source */
    /* pys_session_attach_image: the image (owned) and its source. */
    struct prof_image *image;
    struct mem_image image_src;
    struct prof_core *core; /* pys_session_attach_core: the core (owned; image_src its source) */
    struct mem mem;
    struct mem mem_idle; /* the other reader: see struct prof_idle */
    int mem_idle_in_use; /* mem and mem_idle are swapped */
    struct prof_results prev; /* the last snapshot's, swapped with res */
    struct prof_idle idle;
    struct cpy_offsets off;
    struct cpy_symbols sym;
    uint64_t runtime;        /* address of _PyRuntime */
    struct prof_first_interp first; /* snapshot.c */
    char *image_path;        /* the image holding the runtime */
    char version_text[32];   /* "3.12.1", or "3.9" when the patch level is not known */
    char err[512];           /* last error detail */
    /* process.c: the target's thread ids in pystrobe's /proc, and the
     * program attached to (have_program: its handle could be had), when it
     * was last compared with the one running, and that an exec was seen. */
    struct plat_tids tids;
    struct plat_program program;
    int have_program, exec_seen;
    uint64_t program_checked_ns;
    uint64_t snapshots, thread_errors; /* counters for pys_session_stats */
    uint64_t thread_reads, thread_rereads;
    uint64_t retry_rng; /* snapshot.c: when a torn thread is read again (3.8-3.10) */

    struct prof_intern strings;
    struct prof_tnames *tnames; /* threadnames.c: NULL until a name is asked for */
    struct prof_pause *pause;   /* pause.c: NULL until the first pause */
    struct prof_locals *locals; /* locals.c: with opt.locals, else NULL */
    struct prof_native *native; /* native.c: with opt.native_stacks, else NULL */
    const char *marker_file, *marker_native, *marker_gc; /* interned "~", "<native>", "<GC>" */
    const char *marker_truncated;                        /* "<truncated>" */
    struct prof_codecache codes;
    struct prof_fcache fcache;
    int use_fcache;          /* opt.frame_cache and the target has the anchor (3.15+) */
    struct prof_gen gen;     /* snapshot.c */

    /* What a snapshot's parts keep from one thread or snapshot to the next,
     * and the results of the last snapshot. */
    struct prof_walker walker;     /* a thread's read (snapshot.c, framecache.c, torn.c) */
    struct prof_resolved resolved; /* its frames named (snapshot.c; kept by framecache.c) */
    struct prof_opcodes ops;       /* snapshot.c, with opt.opcodes */
    struct prof_named_codes named; /* snapshot.c, 3.8-3.13 */
    struct prof_torn torn;         /* torn.c */
    struct prof_objframes objframes; /* objframes.c */
    struct prof_results res;
    struct pys_snapshot snap;
};

/* --- idle threads (idle.c) ----------------------------------------------- */

/* At the start of a snapshot: keep the last one's results in s->prev. */
void prof_idle_keep_results(struct pys_session *s);
/* Before each try of a snapshot: decide whether threads are taken over
 * (s->idle.active), reading the GIL first, and pick the reader. 0 or
 * PYS_E_EXITED. */
int prof_idle_begin(struct pys_session *s, int tries);
/* Must the thread state at tstate be read (not taken over)? */
int prof_idle_must_read(const struct pys_session *s, uint64_t tstate);
/* Is t, read at position i of the last snapshot's list, still linked there
 * (its next as then, and its predecessor's next pointing to it)? */
int prof_idle_links_ok(struct pys_session *s, size_t i, const struct cpy_thread *t);
/* Copy the last snapshot's thread i (and its frames) to position ti. */
int prof_idle_copy_thread(struct pys_session *s, size_t i, size_t ti);
/* After a snapshot (ok: it succeeded): remember what the next may take over. */
void prof_idle_end(struct pys_session *s, int ok);

/*
 * Open a session reading through src (not owned; it must outlive the
 * session; NULL: the live process pid). Without facts, attach finds the
 * runtime in process pid's maps and files (reads go through src: the
 * recorder's); with facts (a recorded image's), attach takes them as they
 * are (pid 0: no process). Otherwise as pys_session_attach.
 */
int prof_session_open(pys_session **out, int pid, struct mem_source *src,
                      const struct prof_image_facts *facts, const struct pys_options *opt,
                      char *errtext, size_t errlen);
/* The same on a core (not owned): attach searches its files (pid 0). */
int prof_session_open_core(pys_session **out, struct mem_source *src, struct prof_core *core,
                           const struct pys_options *opt, char *errtext, size_t errlen);
/* Attach from an image's facts: offsets from the table in its memory (or
 * pystrobe's own for 3.8-3.12), an initialised runtime. image.c. */
int prof_attach_facts(struct pys_session *s, const struct prof_image_facts *f);
/* What an attached session found, for recording an image. */
void prof_session_facts(const struct pys_session *s, struct prof_image_facts *out);

/* --- what an image file says about CPython (probe.c) ------------------- */

struct bin_image;

/* Smallest file worth probing: every CPython image holds the interpreter's
 * code, several MiB in any build (a stripped libpython2.7 is over 1.5 MiB),
 * while most libraries a process maps are smaller; skipping them by size
 * spares attach most of its file reads. */
#define PROF_PROBE_MIN_BYTES (512u << 10)

/* Addresses are the file's (link-time); add the load bias. */
struct prof_probe {
    int has_section; /* .PyRuntime (3.13+): the runtime, debug offsets first */
    uint64_t section_addr, section_size;
    int has_runtime_sym; /* _PyRuntime defined (3.7+) */
    uint64_t runtime_sym;
    int has_version_sym; /* Py_Version defined (3.11+): PY_VERSION_HEX */
    uint64_t version_sym;
};

/* Does img hold a CPython runtime: the .PyRuntime section, or a defined
 * _PyRuntime or Py_Initialize? 0 with *out filled, PYS_E_NOTPYTHON if
 * none (*out untouched), PYS_E_INVAL for NULL arguments. */
int prof_probe_file(const struct bin_image *img, struct prof_probe *out);
/* PY_VERSION_HEX of the PY_VERSION string in img's .rodata, 0 if none or
 * ambiguous (see prof_version_scan). */
uint32_t prof_probe_rodata_version(const struct bin_image *img);
/* The same search in n bytes of any content. */
uint32_t prof_version_scan(const char *buf, size_t n);

/* --- the process (process.c) --------------------------------------------- */

/* At attach, before the runtime is looked for (an exec after this is seen):
 * the program's handle and the thread id mapping. Never fails: without them
 * exec is not looked for, or ids are taken as they are. */
void prof_process_open(struct pys_session *s);
void prof_process_close(struct pys_session *s);
/* Fill pt->host_id from pt->native_id and, with opt.cpu_state, the
 * PYS_THREAD_ON_CPU / PYS_THREAD_UNKNOWN bits from the kernel's state. */
void prof_thread_os_state(struct pys_session *s, struct pys_thread *pt);
/* Can thread pt not move: the session's target is an image, stopped by
 * the session (pys_session_pause), or the kernel says the thread is stopped
 * (a /proc read: for rare paths only)? */
int prof_thread_stopped(struct pys_session *s, const struct pys_thread *pt);
/* Has the process exec'd since the attach? Looked at after a failed read
 * (failed; at most once a millisecond) and at least every 100 ms: 0, or
 * PYS_E_EXEC (from then on always) or PYS_E_EXITED, the detail in s->err. */
int prof_exec_check(struct pys_session *s, int failed);
/* Did the process exec after prof_process_open, before the attach found
 * its runtime (a program started through chroot, a shell or a launcher)?
 * The attach is then of the new program, while the program's handle is of
 * the old one: prof_exec_check would take it for an exec later. */
int prof_exec_during_attach(struct pys_session *s);

/* Find and validate the runtime of s->pid; fills off, sym, runtime,
 * image_path. Detail of a failure in s->err. */
int prof_attach_runtime(struct pys_session *s);
/* Opens the file of mapping m as the target saw it: an fd (the caller's to
 * close), or a negative code. */
typedef int (*prof_map_opener)(void *ctx, const struct plat_map *m);
/* prof_attach_runtime over the mappings of something other than a live
 * process (a core file): its files opened by open_map; failures name the
 * target as `what` ("core FILE (PROGRAM)"), hint ends a not-Python one. */
int prof_attach_maps(struct pys_session *s, const struct plat_maps *maps, prof_map_opener open_map,
                     void *ctx, const char *what, const char *hint);

/* --- core files (coredump.c) ---------------------------------------------- */

struct prof_core;
/* Find the runtime among the core's mapped files (prof_attach_maps). */
int prof_attach_core(struct pys_session *s, struct prof_core *c);
void prof_core_free(struct prof_core *c);
/* An unwinder of the core's threads (native stacks), its modules' files
 * those the core's memory was completed from. */
int prof_core_unwinder(struct prof_core *c, struct plat_unwinder **out, char *err, size_t errlen);
/* The path of the file mapped at addr, as the process named it (NT_FILE),
 * or NULL: what a live process's maps would name it. */
const char *prof_core_path_at(const struct prof_core *c, uint64_t addr);

/* printf into s->err; returns code. */
int prof_fail(struct pys_session *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* --- torn.c's inline part (see its declarations above) ------------------- */

static inline int prof_torn_pending(const struct pys_session *s)
{
    return s->torn.nchk_walks > 0;
}

/*
 * Are callee and caller (adjacent in a walk) consistent? On a data stack
 * chunk a frame is pushed right after its caller's frame, so when both are
 * thread-owned and in the same contiguous region (the thread's current
 * chunk up to its top, or one chunk the walk copied) the callee must start
 * at caller + co_framesize words. 1 if consistent or not checkable.
 */
static inline int prof_torn_adjacent(const struct pys_session *s, const struct cpy_thread *t,
                                     const struct cpy_raw_frame *callee,
                                     const struct cpy_raw_frame *caller,
                                     const struct prof_code *caller_code)
{
    if (callee->owner != 0 || caller->owner != 0 || callee->shim || caller->shim ||
        caller_code->code.framesize <= 0)
        return 1;
    uint64_t addr = caller->addr, lo = 0, hi = 0;
    if (t->datastack_chunk && addr >= t->datastack_chunk && addr < t->datastack_top) {
        lo = t->datastack_chunk;
        hi = t->datastack_top;
    } else {
        for (size_t i = 0; i < s->walker.stack.nchunks; i++) {
            uint64_t a = s->walker.stack.chunks[i].addr;
            if (addr >= a && addr - a < s->walker.stack.chunks[i].len) {
                lo = a;
                hi = a + s->walker.stack.chunks[i].len;
                break;
            }
        }
    }
    if (callee->addr < lo || callee->addr >= hi || caller->addr < lo || caller->addr >= hi)
        return 1;
    return callee->addr == caller->addr + (uint64_t)caller_code->code.framesize * 8;
}

/*
 * Was caller, which a Python frame called inline names as its caller,
 * calling at the moment its bytes were copied? The interpreter marks a
 * frame as calling before it makes the callee current, and as running
 * again only once the callee is gone: a caller copied running was copied
 * at another moment than its callee (whose bytes may then be a frame that
 * returned, left above the caller on the data stack, or another chain's).
 * Equal-size frames of two chains pass every other check. 1 if calling or
 * not known.
 */
static inline int prof_torn_calling(struct pys_session *s, const struct cpy_raw_frame *caller,
                                    const struct prof_code *pc)
{
    if (CPY_HAS(&s->off, interpreter_frame, stacktop))
        return !caller->running;
    if (s->off.traits.position != CPY_POS_PREV_INSTR)
        return 1;
    /* 3.11: the code's instruction starts, once decoded (prof_torn_in_call). */
    uint64_t off = caller->instr_ptr - pc->code.code_bytes;
    if (caller->instr_ptr < pc->code.code_bytes || off % 2 != 0)
        return 1;
    int at = cpy_code_starts_at(&pc->code, off / 2);
    return at >= 0 ? !at : prof_torn_in_call(s, caller, pc);
}

static inline int prof_torn_frame_fits(struct pys_session *s, const struct cpy_thread *t,
                                       const struct cpy_raw_frame *raw, size_t i,
                                       const struct prof_code *pc, int incomplete, char *err,
                                       size_t errlen)
{
    if (i == 0)
        return 0;
    if (!prof_torn_adjacent(s, t, &raw[i - 1], &raw[i], pc))
        return prof_torn_frame_refused(pc, PROF_TORN_NOT_CALLEE, err, errlen);
    /* A callee called from C (through a shim, or 3.11's entry frame) says
     * nothing of its caller, which runs the C code that called it. */
    if (raw[i - 1].shim || raw[i - 1].entry || raw[i].loose)
        return 0;
    /* A frame still in its prologue has called no Python function yet (C
     * code it calls, a collection say, may): one that a Python frame names
     * as its caller was read at another moment than that frame. Unless its
     * code never leaves the prologue (CPython's __init__ shim, which calls
     * __init__ from there). */
    if (incomplete && !cpy_code_never_starts(&pc->code))
        return prof_torn_frame_refused(pc, PROF_TORN_NOT_STARTED, err, errlen);
    if (!prof_torn_calling(s, &raw[i], pc))
        return prof_torn_frame_refused(pc, PROF_TORN_NOT_CALLING, err, errlen);
    /* A generator's frame at an instruction that resumes a generator
     * (await, yield from, a for loop over one) calls that generator's
     * frame, or C code that resumes it (a shim, 3.11's entry frame: above):
     * a plain frame above it was copied at another moment. Most often a
     * frame called by another coroutine whose object was freed since, and
     * its memory reused by this one; the callee's copy still names the
     * address, and the same turn of a loop, made again, makes both copies
     * of each frame agree. */
    if (raw[i].owner == CPY_OWNER_GENERATOR && raw[i - 1].owner != CPY_OWNER_GENERATOR &&
        prof_torn_resuming(s, &raw[i], pc))
        return prof_torn_frame_refused(pc, PROF_TORN_NOT_RESUMED, err, errlen);
    return 0;
}

#endif
