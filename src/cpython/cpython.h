/*
 * cpython: how CPython's interpreters, threads, frames, code objects and
 * strings are laid out in memory, for any supported version, through one
 * struct cpy_offsets. Everything here reads through struct mem and treats
 * what it reads as untrusted: lengths and loops are bounded, pointers checked
 * before use, and a bad value is an error, never a crash.
 *
 * No OS headers, no caches (those are the core's), no allocation except where
 * a function says it returns an allocated string.
 */
#ifndef PYSTROBE_CPYTHON_H
#define PYSTROBE_CPYTHON_H

#include <stddef.h>
#include <stdint.h>

#include "cpython/linetable.h"
#include "cpython/offsets.h"
#include "mem/mem.h"

/* Bounds on what a target may make us walk (each says why). */
#define CPY_MAX_INTERPS 1024       /* CPython has no limit; thousands would be absurd */
#define CPY_MAX_THREADS 65536      /* above any realistic thread count */
#define CPY_MAX_CHUNKS 1024        /* data stack chunks per thread */
#define CPY_OLDER_MAX 64           /* older chunks remembered for read-ahead */
#define CPY_MAX_CHUNK_BYTES (64u << 20) /* all chunks of one thread */
#define CPY_MAX_STR_CHARS 4096     /* names and file names; longer ones are cut */
#define CPY_MAX_LINETABLE (4u << 20) /* a 40 000-line function has ~200 KB; = PYS_MAX_LINETABLE_DEFAULT */

/* Addresses in the interpreter image that identify objects. */
struct cpy_symbols {
    uint64_t code_type;  /* &PyCode_Type, 0 if unknown */
    uint64_t none;       /* &_Py_NoneStruct, 0 if unknown */
};

/* --- interpreters ------------------------------------------------------- */

struct cpy_interp {
    uint64_t addr;
    int64_t id;
    uint64_t next;
    uint64_t threads_head;
    uint64_t threads_main;   /* the interpreter's main thread state, 0 if unknown */
    uint64_t main_ident;     /* else: thread_id (pthread) of the main thread, 0 if unknown */
    uint64_t gil_holder;     /* thread state holding the GIL, 0 if nobody */
    /* The GIL's last holder (holding it or not) and its count of hand-overs
     * between thread states: a thread state other than the last holder ran
     * Python code only if the count moved. gil_known: both were read. */
    uint64_t gil_last_holder, gil_switches;
    int gil_known;
    uint64_t gc_frame;       /* frame that started the running collection (3.15), or 0 */
    uint64_t code_generation; /* moves when code objects are freed (3.14+), else 0 */
};

/* First interpreter of the runtime at runtime_addr (0 if none). */
int cpy_runtime_first_interp(struct mem *m, const struct cpy_offsets *o, uint64_t runtime_addr,
                             uint64_t *out);
/* Read the interpreter at addr of the runtime at runtime_addr. */
int cpy_interp_read(struct mem *m, const struct cpy_offsets *o, uint64_t runtime_addr,
                    uint64_t addr, struct cpy_interp *out);
/* The same, and in the same read the runtime's first interpreter (*first):
 * for a caller that expects addr to be it. */
int cpy_interp_read_first(struct mem *m, const struct cpy_offsets *o, uint64_t runtime_addr,
                          uint64_t addr, struct cpy_interp *out, uint64_t *first);

/* --- threads ------------------------------------------------------------ */

/* The smallest data stack chunk CPython allocates (DATA_STACK_CHUNK_SIZE,
 * 3.11+): the first CPY_CHUNK_MIN bytes of a current chunk are mapped. */
#define CPY_CHUNK_MIN (16u << 10)

struct cpy_thread {
    uint64_t addr;
    uint64_t next;
    uint64_t native_id;       /* kernel TID, 0 if it could not be found */
    uint64_t thread_id;
    uint64_t current_frame;
    uint64_t base_frame;      /* 3.15+, else 0 */
    uint64_t base_code;       /* the base frame's f_executable: None */
    uint64_t last_profiled_frame;     /* 3.15+: the frame cache anchor, else 0 */
    uint64_t last_profiled_frame_seq; /* 3.15+: bumped when the anchor frame returns */
    uint64_t datastack_chunk;
    uint64_t datastack_top;   /* end of the used part of datastack_chunk */
    int has_exception;        /* raising or handling one */
    int gil_requested;
    int holds_gil; /* the thread state's own flag (3.15): 1, 0, or -1 where absent */
    /* The copy of the thread state (and what follows it: 3.15's base frame)
     * that cpy_thread_read made, for the walk to use instead of reads. */
    const uint8_t *copy;
    uint64_t copy_addr;
    size_t copy_len;
};

/* Bytes of scratch cpy_thread_read needs (it reads offsets.h's
 * thread_readlen of them). */
size_t cpy_thread_bufsize(const struct cpy_offsets *o);

/* Read the thread state at addr into tsbuf (cpy_thread_bufsize bytes),
 * which must stay untouched while out is used. */
int cpy_thread_read(struct mem *m, const struct cpy_offsets *o, const struct cpy_symbols *sym,
                    uint64_t addr, uint8_t *tsbuf, struct cpy_thread *out);

/* --- frames ------------------------------------------------------------- */

/* FRAME_OWNED_BY_THREAD and FRAME_OWNED_BY_GENERATOR, the same from 3.11 to
 * 3.15: a frame on the thread's data stack; one that lives in its generator
 * or coroutine object. */
#define CPY_OWNER_THREAD 0
#define CPY_OWNER_GENERATOR 1

/* A frame as found on the stack, before its code object is looked at. */
struct cpy_raw_frame {
    uint64_t addr;
    uint64_t code;      /* the code object (tag bits cleared) */
    uint64_t instr_ptr; /* the position field: a pointer, or f_lasti (3.8-3.10) */
    uint8_t owner;      /* 3.11+: CPY_OWNER_GENERATOR or another owner; 0 before */
    uint8_t shim;       /* an entry/shim/base frame: C code, not a Python frame */
    uint8_t entry;      /* 3.11: the first Python frame of a C-level call (C is below it) */
    uint8_t running;    /* 3.12, 3.13: running its own code as copied (stacktop -1), so
                         * calling no Python function inline; 0: calling, or not known */
    uint8_t inferred;   /* a generator's frame copied suspended: its caller is the one
                         * cpy_stack.gen_caller gave */
    uint8_t loose;      /* the caller of an inferred frame: its position is the one it
                         * had when it was seen calling it (or, for a link_caller, its
                         * own, perhaps resumed already): not checked as a call */
};

/* Scratch the walk reuses between calls: copies of the parts of the
 * thread's data stack chunks that hold frames (each chunk after its header,
 * or just the frames above a walk's stop). Zero-initialise; release with
 * cpy_stack_release. */
struct cpy_stack {
    uint8_t *buf;       /* the copies, back to back */
    size_t cap;
    struct {
        uint64_t addr;   /* target address of the copy's first byte */
        size_t off, len; /* where in buf */
    } chunks[CPY_MAX_CHUNKS];
    size_t nchunks;
    /* Separate reads the last walk took its frames from (each copy above,
     * each frame read on its own): 1 means the chain was copied at one
     * moment, and needs no second read to rule out a torn walk. */
    size_t regions;
    size_t direct; /* of which frames read on their own (generators' and others) */
    uint8_t base[128];  /* 3.15's base frame, as it always is (not read) */
    uint8_t *frame;     /* frames read directly (outside the chunks): the window */
    size_t frame_cap;
    uint64_t win_addr;  /* the window's target address and length (0: none) */
    size_t win_len;
    uint64_t last_direct; /* the last frame read directly, in this walk */
    /* After cpy_stack_walk: 0 when it walked the whole chain; else the
     * chain went on past the frames it could keep, and this is the caller
     * of the last one kept (where it stopped). */
    uint64_t cut;
    uint64_t *seen; /* scratch: the addresses of a cut walk, sorted */
    size_t seen_cap; /* entries */
    /* Set by the caller: chunks older than the current one are read for
     * this walk only (the 3.15 frame cache will serve the next samples):
     * not from, nor for, the snapshot's prefetch. */
    int older_once;
    /* Set by the caller: every thread of the target is stopped
     * (pys_session_pause), so what a walk reads is one moment: a top frame
     * not executing (3.8-3.10) is one being entered or left, not a torn
     * read, and is passed over as Python itself does. */
    int stopped;
    /* 3.8-3.10, after a walk of no frame: the thread's current frame it
     * passed over (not started, no caller: the bottom frame of a stack
     * being entered), which torn.c confirms by a later read; 0 when none. */
    uint64_t passed_bottom;
    /* The chunks older than the current one that the last copy of all
     * chunks met, in its order, and their used lengths: where a walk that
     * reads past the prefetch expects the next older chunks to be (most
     * stay put from one sample to the next), so that it reads several in
     * one system call. */
    struct {
        uint64_t addr;
        size_t len;
    } older[CPY_OLDER_MAX];
    size_t nolder;
    /* Set by the caller: how far down cpy_stack_walk_to's copy of the
     * current chunk has the next prefetch start (0: at the chunk's start).
     * A walk that goes below it next time reads what it lacks on its own. */
    uint64_t note_from;
    /* Set by the caller (nafter > 0): a copy by cpy_stack_walk_to that the
     * prefetch does not hold is read twice in one system call, then the
     * `after` segments (mem_read_twice). A walk's second copy: `second`,
     * of [second_addr, second_addr + second_len) (0: the last walk made
     * none), with the after segments read; second_mark is mem_mark
     * just after that call (a read since: not the latest). */
    struct mem_seg after[MEM_TWICE_AFTER_MAX];
    size_t nafter;
    uint8_t *second;
    size_t second_cap;
    uint64_t second_addr;
    size_t second_len;
    struct mem_mark second_mark;
    /* Set by the caller, or NULL: for a generator's frame copied suspended
     * (its previous NULL), the callers it had when last seen linked, the
     * k-th (0, 1, ...): 1 with *caller, and that caller's code object and
     * position then in want[0], want[1]; or 0, none left. The walk takes
     * the first whose frame runs that code object. */
    int (*gen_caller)(void *ctx, uint64_t frame, uint64_t code, size_t k, uint64_t *caller,
                      uint64_t want[2]);
    void *gen_ctx;
    /* Set by the caller for one walk, or 0: frame link_frame, copied with
     * no caller, has caller link_caller (cpy_stack_yield_caller). Asked
     * before gen_caller. */
    uint64_t link_frame, link_caller;
};
void cpy_stack_release(struct cpy_stack *st);

/*
 * Walk the thread's frames, innermost first, into out[0..max). Frames that
 * are not Python frames (entry, shim and base frames) are included with
 * shim set: they mark where C code sits on the stack. Returns the
 * number of frames, or PYS_E_TOODEEP (a cyclic chain), PYS_E_CORRUPT (a
 * 3.15 walk that does not end at the base frame, a frame that is not
 * plausible), or a read error. A chain longer than max is cut: the walk
 * returns its innermost max - 1 frames (all at distinct addresses: a chain
 * that comes back to one is cyclic) with st->cut the caller of the last,
 * and the checks of a whole chain's bottom are not made.
 */
int cpy_stack_walk(struct mem *m, const struct cpy_offsets *o, const struct cpy_thread *t,
                   struct cpy_stack *st, struct cpy_raw_frame *out, size_t max);

/*
 * Walk from the thread's current frame towards `stop`, reading only the
 * data stack above it (the chunks down to the one that holds stop): the
 * frames above stop and stop itself, innermost first, into out[0..max). *stop_prev gets stop's
 * `previous`. Returns the number of frames, PYS_E_TOODEEP if stop is more than max frames down (or
 * the chain is cyclic), PYS_E_NOTFOUND if the chain reaches the base frame
 * without meeting stop (or is found to have passed it), PYS_E_CORRUPT if it
 * ends short of the base frame, or an error as cpy_stack_walk. For the 3.15
 * frame cache (interpreter frames only).
 */
int cpy_stack_walk_to(struct mem *m, const struct cpy_offsets *o, const struct cpy_thread *t,
                      struct cpy_stack *st, uint64_t stop, struct cpy_raw_frame *out, size_t max,
                      uint64_t *stop_prev);

/*
 * 3.11, 3.12 (PYS_E_INVAL elsewhere): where a walk of thread t starts
 * when its cframe cannot be trusted. As the interpreter enters a C-level
 * call of its evaluation loop (a generator resumed from C, a function
 * called from C), the thread's
 * cframe points at a _PyCFrame not yet filled in: what it holds is stale,
 * from an earlier use of that C stack. The frames linked then are found
 * without it: the innermost running generator linked to its caller (from
 * the thread's exception states) or the innermost frame on the data stack
 * that has started, whichever is the other's callee. 0 with *root set, or
 * PYS_E_CORRUPT / PYS_E_NOTFOUND / a read error. Only for a thread that
 * cannot move: made of several reads, it is no moment of a running one.
 */
int cpy_stack_entering_root(struct mem *m, const struct cpy_offsets *o,
                            const struct cpy_symbols *sym, const struct cpy_thread *t,
                            uint64_t *root);

/*
 * 3.12 (PYS_E_INVAL elsewhere: 3.11 leaves a generator's frame as the
 * current frame of a cframe it returns from, so that a cframe being filled
 * in names one as often as a yield does): the frame a stopped thread t
 * returns to when its current frame is `frame`, a generator's frame linked
 * to no caller. A yield unlinks the generator's frame and makes its caller the
 * thread's current frame in two stores the compiler may order either way
 * (the types differ, so they cannot alias): a thread stopped between them
 * names a frame already unlinked. Its caller is the innermost frame that
 * runs other than it: the innermost running generator linked to its caller
 * (from the exception states, the yielding one passed over if its own is
 * still pushed) or the data stack's innermost started frame, whichever is
 * the other's callee. 0 with *caller set; PYS_E_NOTFOUND if `frame` is
 * not a generator's or has a caller; PYS_E_CORRUPT or a read error. Only
 * for a thread that cannot move.
 */
int cpy_stack_yield_caller(struct mem *m, const struct cpy_offsets *o,
                           const struct cpy_symbols *sym, const struct cpy_thread *t,
                           uint64_t frame, uint64_t *caller);

/* 3.8-3.10: how many bytes of each frame object (from its start) a walk
 * reads: up to the last field it uses, well short of the object's size. */
size_t cpy_frame_object_head(const struct cpy_offsets *o);

/* The offset in a frame of its position field (cpy_raw_frame.instr_ptr)
 * into *off; returns its width: 4 (f_lasti, 3.8-3.10) or 8. */
size_t cpy_frame_pos_field(const struct cpy_offsets *o, uint64_t *off);

/* The position as cpy_raw_frame.instr_ptr holds it, from the field's
 * bytes (cpy_frame_pos_field) copied into a zeroed word. */
uint64_t cpy_frame_pos_value(const struct cpy_offsets *o, uint64_t word);

/* --- code objects ------------------------------------------------------- */

/* The fields that identify the code object at addr (see prof_code). */
/* What tells a code object from another later allocated at its address:
 * its pointers, and the length and hash of its two names (so that names
 * freed and allocated again at the same addresses still differ). */
struct cpy_code_key {
    uint64_t type, filename, qualname, linetable;
    int64_t filename_len, filename_hash, qualname_len, qualname_hash;
    int32_t firstlineno;
};

struct cpy_code {
    struct cpy_code_key key;
    char *filename;       /* UTF-8, allocated */
    char *qualname;       /* UTF-8, allocated */
    int32_t firstlineno;
    int32_t firsttraceable; /* code units of prologue, -1 if unknown */
    int32_t framesize;      /* words a frame of this code takes on the data stack, -1 if unknown */
    uint8_t *linetable;   /* allocated, NULL if too large or missing */
    size_t linetable_len;
    uint64_t ncodeunits;  /* length of the bytecode in code units */
    uint64_t code_bytes;  /* target address of the bytecode's first byte */
    /* Where a position may point into an instruction's inline caches
     * (CPY_POS_PREV_INSTR): a bit per code unit, set where an instruction
     * starts, for units below starts_units; made on first need
     * (cpy_code_instr_start), NULL until then. */
    uint8_t *starts;
    uint64_t starts_units;
    /* Where the bytecode is an immutable bytes object (co_code, 3.8-3.10):
     * its first bytecode_units units, copied on first need
     * (cpy_code_opcode), NULL until then. */
    uint8_t *bytecode;
    uint64_t bytecode_units;
    /* 3.11+: a bit per code unit, set on every unit (its first and its
     * inline caches) of an instruction that resumes a generator's frame
     * (SEND, FOR_ITER, in every form), for units below resumes_units; made
     * on first need (cpy_code_resumes_at), NULL until then. */
    uint8_t *resumes;
    uint64_t resumes_units;
};

/* The key of a code object from a copy of its head and of the 16 bytes at
 * each of its names' length field (length, then hash). */
void cpy_code_key_parse(const struct cpy_offsets *o, const uint8_t *head,
                        const uint8_t *filename_len, const uint8_t *qualname_len,
                        struct cpy_code_key *out);
int cpy_code_key_equal(const struct cpy_code_key *a, const struct cpy_code_key *b);

/* Read the code object at addr. PYS_E_CORRUPT if it is not a code object. */
int cpy_code_read(struct mem *m, const struct cpy_offsets *o, const struct cpy_symbols *sym,
                  uint64_t addr, struct cpy_code *out);
void cpy_code_release(struct cpy_code *c);

/* Where frame f is in code c: byte offset of the instruction (f_lasti) and
 * its source range. Returns 0, or PYS_E_CORRUPT if the instruction pointer is
 * outside the code. A location that is unknown comes back as -1s. */
int cpy_code_locate(const struct cpy_offsets *o, const struct cpy_code *c,
                    const struct cpy_raw_frame *f, int32_t *lasti, struct cpy_location *loc);

/* Could a frame of code c (at target address `code`) be at `position` (a
 * cpy_raw_frame's instr_ptr)? */
int cpy_code_holds(const struct cpy_offsets *o, const struct cpy_code *c, uint64_t code,
                   uint64_t position);

/* Is f still in its prologue (CPython hides such frames from tracebacks)? */
int cpy_frame_incomplete(const struct cpy_offsets *o, const struct cpy_code *c,
                         const struct cpy_raw_frame *f);

/* Is c code that never leaves its prologue, a frame of it hidden all its
 * life, calling Python code from its first instruction on (CPython's own
 * shims made of code objects)? */
int cpy_code_never_starts(const struct cpy_code *c);

/* --- objects ------------------------------------------------------------ */

/* Read the str at addr as NUL-terminated UTF-8 (allocated, *out), cut at
 * max_chars code points. */
int cpy_unicode_read(struct mem *m, const struct cpy_offsets *o, uint64_t addr,
                     size_t max_chars, char **out);

/* Read the bytes object at addr (allocated, *out, *len); PYS_E_NOTFOUND if it
 * holds more than max bytes. */
int cpy_bytes_read(struct mem *m, const struct cpy_offsets *o, uint64_t addr, size_t max,
                   uint8_t **out, size_t *len);

/* --- dicts, attributes, ints (dicts.c) ---------------------------------- */

/* The value under the str key `key` (ASCII) in the dict at dict: 0 and
 * *out, PYS_E_NOTFOUND if the dict has no such key, PYS_E_CORRUPT if dict is
 * no dict, PYS_E_TOODEEP past 16384 entries, or a read error. */
int cpy_dict_get_str(struct mem *m, const struct cpy_offsets *o, uint64_t dict, const char *key,
                     uint64_t *out);
/* The dict's items, at most max, into keys[] and values[]: how many, or an
 * error as cpy_dict_get_str. */
int cpy_dict_items(struct mem *m, const struct cpy_offsets *o, uint64_t dict, uint64_t *keys,
                   uint64_t *values, size_t max);
/* Attribute `name` of obj from its instance dict, managed dict or inline
 * values (not properties, slots or class attributes): as cpy_dict_get_str. */
int cpy_object_attr(struct mem *m, const struct cpy_offsets *o, uint64_t obj, const char *name,
                    uint64_t *out);
/* The int at addr, which must lie in 0..2**64-1. */
int cpy_long_read(struct mem *m, const struct cpy_offsets *o, uint64_t addr, uint64_t *out);
/* Is the object at addr a str (or a str subclass)? */
int cpy_is_str(struct mem *m, const struct cpy_offsets *o, uint64_t addr);

/* --- instruction names (opcodes.c; tables generated into opcodes_gen.c) -- */

/* One minor version's instructions: names[b] is the name of byte value b at
 * the start of an instruction of its code (NULL: no such instruction),
 * bases[b] the byte of the instruction b stands for (itself unless b is a
 * specialized or instrumented form; NULL: every one is its own), caches[b]
 * the inline cache units after it (3.11+), 255 when b hides the instruction
 * it replaced and so its caches (NULL: none). */
struct cpy_opcode_table {
    int minor;
    const char *const *names;
    const uint8_t *bases;
    const uint8_t *caches;
};
extern const struct cpy_opcode_table cpy_opcode_tables[];
extern const size_t cpy_opcode_tables_count;

/* The name of instruction byte op in CPython 3.minor, NULL when the version
 * is not known or has no such instruction; *base (if base is not NULL) the
 * name of the instruction it stands for, NULL when it is its own. */
const char *cpy_opcode_name(int minor, int op, const char **base);
/* The code unit where the instruction holding code unit idx of c starts:
 * idx itself unless the version's frame position may point into inline
 * caches (CPY_POS_PREV_INSTR: a caller's points to its CALL's last cache),
 * where c's code is read once (at most CPY_OPCODE_MAX_UNITS units) and
 * decoded instruction by instruction from its start. PYS_E_NOTFOUND past an
 * instruction that hides its length (INSTRUMENTED_LINE) or past the bound,
 * else 0 or a read error. */
int cpy_code_instr_start(struct mem *m, const struct cpy_offsets *o, struct cpy_code *c,
                         uint64_t idx, uint64_t *start);
/* Whether an instruction starts at code unit idx of c, from what
 * cpy_code_instr_start decoded: 1 or 0; -1 when not known (not decoded
 * yet, or past what was). Inline: the torn checks ask it of every caller. */
static inline int cpy_code_starts_at(const struct cpy_code *c, uint64_t idx)
{
    if (!c->starts || idx >= c->starts_units)
        return -1;
    return (c->starts[idx / 8] >> (idx % 8)) & 1;
}
#define CPY_OPCODE_MAX_UNITS (1u << 20)
/* 3.11+: whether a position at code unit idx of c lies in an instruction
 * that resumes a generator's frame (await and yield from: SEND; a for
 * loop: FOR_ITER), from one copy of c's bytecode made on first need:
 * specialization and instrumentation change an instruction's form, never
 * which instruction it is. 1 or 0; negative where not known (a version
 * without the tables, past an instruction they do not know, unreadable
 * code). */
int cpy_code_resumes_slow(struct mem *m, const struct cpy_offsets *o, struct cpy_code *c,
                          uint64_t idx);
static inline int cpy_code_resumes_at(struct mem *m, const struct cpy_offsets *o,
                                      struct cpy_code *c, uint64_t idx)
{
    if (!c->resumes)
        return cpy_code_resumes_slow(m, o, c, idx);
    if (idx >= c->resumes_units)
        return -1;
    return (c->resumes[idx / 8] >> (idx % 8)) & 1;
}
/* The first byte of code unit idx of c from a copy of c's bytecode, kept
 * where the bytecode never changes (co_code, 3.8-3.10: read once, at most
 * CPY_OPCODE_MAX_UNITS units). PYS_E_NOTFOUND where it may change (3.11+'s
 * adaptive code: read it at each sample) or past the copy; else 0 or a read
 * error. */
int cpy_code_opcode(struct mem *m, const struct cpy_offsets *o, struct cpy_code *c, uint64_t idx,
                    uint8_t *op);

/* --- local variables (locals.c) ---------------------------------------- */

/* co_nlocalsplus is a C int; no real function has this many locals. */
#define CPY_MAX_LOCALS 65536

/* One fast local of a frame, as cpy_frame_locals finds it. */
struct cpy_local {
    uint64_t name;      /* the name's str object */
    uint64_t value;     /* the object (0: unbound), or a tagged int's word (tagged_int) */
    uint8_t kind;       /* co_localspluskinds' byte (3.11+), else 0 */
    uint8_t hidden;     /* a comprehension's inlined variable (3.12+) */
    uint8_t cell;       /* a cell or free variable: the value may be its cell */
    uint8_t tagged_int; /* 3.14+: value is a _PyStackRef holding an int */
};

/*
 * The fast locals of the frame at `frame` whose code object is at `code`,
 * at most max of them, into out: how many, PYS_E_VERSION where the layout
 * lacks them, PYS_E_CORRUPT for counts that are not plausible, or a read
 * error. 3.8-3.10: co_varnames (arguments and locals; cells that are not
 * arguments are not among them); 3.11+: every entry of co_localsplusnames.
 */
int cpy_frame_locals(struct mem *m, const struct cpy_offsets *o, uint64_t frame, uint64_t code,
                     struct cpy_local *out, size_t max);

/* How much of a value cpy_object_repr shows. */
struct cpy_repr_limits {
    size_t max_str;   /* code points of a str */
    size_t max_bytes; /* bytes of a bytes object */
};

/*
 * A short representation of the object at obj into out (cap bytes, always
 * NUL-terminated, cut at cap): repr() for None, bool, int (to 64 bits),
 * float, str and bytes (cut at the limits, then "..."), "<list of N at
 * 0x...>" for lists and tuples, "<TYPE at 0x...>" for the rest and for any
 * object that does not look like one of its type. With deref_cell, a cell
 * shows what it holds. 0; PYS_E_NOTFOUND for obj 0 (an empty cell, too);
 * a read error when not even the type could be read.
 */
int cpy_object_repr(struct mem *m, const struct cpy_offsets *o, const struct cpy_symbols *sym,
                    uint64_t obj, int deref_cell, const struct cpy_repr_limits *lim, char *out,
                    size_t cap);
/* The repr of a 3.14+ tagged int (cpy_local.tagged_int). */
int cpy_tagged_int_repr(uint64_t word, char *out, size_t cap);

#endif
