/*
 * libpystrobe: read the Python stacks of another, running CPython process.
 *
 * A session attaches to one process (no code runs in the target, nothing is
 * written to it), finds the interpreter runtime, validates its layout once, and
 * then takes snapshots: every interpreter, every thread, every Python frame,
 * with file, qualified name, line and column range of the executing
 * instruction.
 *
 * Conventions: functions return 0 or a negative PYS_E_* code; detail for the
 * user is in pys_session_last_error(). The library never prints or exits.
 * Out-parameters are written only on success.
 */
#ifndef PYSTROBE_PYSTROBE_H
#define PYSTROBE_PYSTROBE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PYS_EXTERN __attribute__((visibility("default")))
#else
#define PYS_EXTERN
#endif

/* Error codes: X(NAME, code, message). The one table that defines them. */
#define PYS_ERRNO_MAP(X)                                                                           \
    X(NOPROC, -1, "no such process")                                                               \
    X(PERM, -2, "permission denied")                                                               \
    X(NOTPYTHON, -3, "not a Python process")                                                       \
    X(VERSION, -4, "unsupported Python version")                                                   \
    X(EXITED, -5, "the process exited")                                                            \
    X(BADADDR, -6, "memory read failed")                                                           \
    X(CORRUPT, -7, "inconsistent data in the target")                                              \
    X(NOTFOUND, -8, "not found")                                                                   \
    X(NOMEM, -9, "out of memory")                                                                  \
    X(INVAL, -10, "invalid argument")                                                              \
    X(IO, -11, "input/output error")                                                               \
    X(ELF, -12, "unreadable executable image")                                                     \
    X(TOODEEP, -13, "stack too deep or cyclic")                                                    \
    X(EXEC, -14, "the process replaced its program (exec)")

enum pys_errno {
    PYS_OK = 0,
#define PYS_ERRNO_ENUM_(name, code, msg) PYS_E_##name = (code),
    PYS_ERRNO_MAP(PYS_ERRNO_ENUM_)
#undef PYS_ERRNO_ENUM_
};

/* "PYS_E_NOPROC" style name, or "PYS_E_UNKNOWN". */
PYS_EXTERN const char *pys_errname(int code);
/* Short human message for a code. */
PYS_EXTERN const char *pys_strerror(int code);

/* Thread status bits; the values are those of CPython 3.15's _remote_debugging. */
#define PYS_THREAD_HAS_GIL 1u
#define PYS_THREAD_ON_CPU 2u
#define PYS_THREAD_UNKNOWN 4u /* CPU state not evaluated or not readable */
#define PYS_THREAD_GIL_REQUESTED 8u
#define PYS_THREAD_HAS_EXCEPTION 16u
#define PYS_THREAD_MAIN_THREAD 32u

/* One Python frame. Strings are UTF-8, interned by the session (equal
 * strings have equal pointers) and valid until pys_session_free(). Unknown
 * numbers are -1. */
/* What a frame stands for. Markers have filename "~", no location. */
#define PYS_FRAME_PYTHON 0
#define PYS_FRAME_NATIVE 1 /* "<native>": C code between Python frames */
#define PYS_FRAME_GC 2     /* "<GC>": a garbage collection started here */
/* "<folded at memory limit>", only in profiles: the samples of stacks a profile
 * past its memory bound had no room for, under the deepest caller it had
 * (pys_profile_set_max_memory). */
#define PYS_FRAME_FOLDED 3
/* "<truncated>": the stack goes on below the frames pys_options.max_frames
 * keeps; always last. */
#define PYS_FRAME_TRUNCATED 4
/* "process PID COMMAND", only in profiles: the process a stack of a profile
 * of several processes came from (pystrobe's --merge-processes); always
 * outermost. */
#define PYS_FRAME_PROCESS 5

struct pys_frame {
    const char *filename; /* co_filename */
    const char *qualname; /* co_qualname */
    int32_t firstlineno;  /* co_firstlineno */
    int32_t lineno;       /* source range of the executing instruction */
    int32_t end_lineno;
    int32_t col;     /* 0-based, -1 unknown */
    int32_t end_col; /* 0-based, exclusive, -1 unknown */
    int32_t lasti;   /* byte offset of the instruction, as frame.f_lasti */
    int32_t kind;    /* PYS_FRAME_* */
    int32_t opcode;  /* the instruction's first byte (with pys_options.opcodes), else -1 */
    /* 1: a Python frame whose code's line table is over the session's
     * pys_options.max_linetable and was not decoded (lineno, end_lineno,
     * col and end_col are -1); else 0. */
    int32_t no_location;
};

struct pys_thread {
    uint64_t native_id; /* kernel thread id, as the target sees it (in its PID namespace) */
    /* The same thread's id as pystrobe sees it (its /proc's PID namespace):
     * equal to native_id unless the target runs in another PID namespace (a
     * container); 0 when it could not be found (native_id 0, or a thread
     * gone or not yet in /proc). */
    uint64_t host_id;
    uint64_t thread_id;     /* threading.get_ident() (pthread_t) */
    uint64_t tstate;        /* address of the PyThreadState in the target */
    uint32_t status;        /* PYS_THREAD_* bits */
    int error;              /* 0, or why the stack below is missing */
    const char *error_text; /* NULL, or detail for error */
    size_t nframes;
    const struct pys_frame *frames; /* innermost first */
    /* pys_options.native_stacks: NULL, or why this thread's native stack
     * is missing (its frames are then the Python ones alone). */
    const char *native_error;
};

struct pys_interp {
    int64_t id; /* 0 = main interpreter */
    size_t nthreads;
    const struct pys_thread *threads; /* in the interpreter's list order (newest first) */
    /* The thread state the GIL names as its holder, 0 if the GIL is free.
     * In a hand-over it may differ from the thread whose status says
     * PYS_THREAD_HAS_GIL (3.15 reads that from the thread's own flag). */
    uint64_t gil_holder;
    /* A collection was running as the interpreter was read (CPython 3.15+,
     * pys_options.gc): only then may its threads' stacks hold a
     * PYS_FRAME_GC frame. */
    int gc_running;
};

/* Everything one snapshot saw. Owned by the session, valid until the next
 * snapshot or pys_session_free(). */
struct pys_snapshot {
    size_t ninterps;
    const struct pys_interp *interps; /* in the runtime's list order (newest first) */
};

struct pys_options {
    /* Evaluate PYS_THREAD_ON_CPU from the kernel's task state. */
    int cpu_state;
    /* Add a PYS_FRAME_NATIVE marker wherever C code called back into Python,
     * and one at the bottom of each thread. */
    int native;
    /* Add a PYS_FRAME_GC marker above the frame that started the running
     * garbage collection, where the version tells it (3.15). */
    int gc;
    /* Reuse the unchanged bottom of each stack between snapshots (3.15+).
     * This WRITES into the target: PyThreadState.last_profiled_frame of each
     * thread, the anchor CPython maintains for profilers (and zeroes anchors
     * found at attach). 0 keeps the session strictly read-only. */
    int frame_cache;
    /* Fill pys_frame.opcode: the byte at the frame's instruction, read at
     * each snapshot (3.11+ rewrites instructions into specialised forms as
     * the program runs). One more batched read per thread. */
    int opcodes;
    /* Read again only the threads that can have run Python code since the
     * last snapshot: with a GIL, those that held it meanwhile, as its
     * hand-over count tells. The other threads' stacks are the last ones
     * read, which they still are; their PYS_THREAD_GIL_REQUESTED bit (3.15)
     * is the last one read too. Not with opcodes (another thread may
     * rewrite an instruction) and not over several interpreters. */
    int reuse_idle;
    /* The most frames one thread's stack is given (0: PYS_MAX_FRAMES_DEFAULT;
     * else PYS_MAX_FRAMES_MIN to PYS_MAX_FRAMES_MAX, or attach fails with
     * PYS_E_INVAL). A stack of more frame records (Python frames and the
     * interpreter's entry frames) keeps its innermost max_frames - 1 and
     * ends with a PYS_FRAME_TRUNCATED marker. Scratch memory grows with it. */
    size_t max_frames;
    /* Keep each Python frame's address, so that pys_session_frame_locals
     * can read its local variables. Not with frame_cache or reuse_idle
     * (attach fails with PYS_E_INVAL). */
    int locals;
    /* Native stacks, as py-spy's --native: in each snapshot taken while
     * the session is paused (pys_session_pause; the threads must be
     * stopped to be unwound), each thread's frames are its native (C)
     * stack with every frame of the interpreter's evaluation loop replaced
     * by the Python frames it runs, and the interpreter's other frames left
     * out. A native frame has kind PYS_FRAME_NATIVE, qualname its symbol
     * (or "0xOFFSET" in its module), filename its module's path, lineno its
     * source line where debug information has it (else -1). Snapshots not
     * paused (nor of a core) get the Python frames with the markers of `native`, which
     * this option sets. With locals, pys_session_frame_locals reads the
     * Python frames of the merged stacks (a native frame has none). */
    int native_stacks;
    /* Decode line tables up to this many bytes (0: PYS_MAX_LINETABLE_DEFAULT,
     * also the most taken): a frame whose code has a larger one gets
     * no_location. The Python module sets CPython 3.15's own limit. */
    size_t max_linetable;
};

#define PYS_MAX_LINETABLE_DEFAULT (4u << 20)

#define PYS_MAX_FRAMES_DEFAULT 8192
#define PYS_MAX_FRAMES_MIN 16
#define PYS_MAX_FRAMES_MAX 1000000

typedef struct pys_session pys_session;

/* Attach to process pid. On failure *out is untouched; if errtext is not NULL
 * a message saying what failed is written there (NUL-terminated). */
PYS_EXTERN int pys_session_attach(pys_session **out, int pid, const struct pys_options *opt,
                                  char *errtext, size_t errlen);
PYS_EXTERN void pys_session_free(pys_session *s);

/* A session on a recorded image of a process (a file written by
 * tests/tools/record_image; its format is in src/core/image.h) instead of a
 * live one: snapshots read the image's pages, reads outside them fail as
 * reads of unmapped memory do, and writes (the 3.15 frame cache's anchor)
 * change the session's own copy. For tests: every snapshot of an image is
 * the same. Its pid is 0. PYS_E_IO if the file cannot be read,
 * PYS_E_CORRUPT if it is not a valid image, else as pys_session_attach. */
PYS_EXTERN int pys_session_attach_image(pys_session **out, const char *path,
                                        const struct pys_options *opt, char *errtext,
                                        size_t errlen);

/*
 * A session on a core file of a Python process (dumped by the kernel or by
 * gdb's gcore, x86-64 Linux): snapshots read the memory the core holds, and
 * where it left a mapping out (pages of a file never written), the file the
 * process had mapped, found by the path the core names (under `root` first,
 * if not NULL: the root the process ran in), the executable at `executable`
 * if not NULL. A file that is missing or is not the one the process mapped
 * (its first page differs) is not read: what only it held is unreadable,
 * and pys_core_info's notes say so. Its pid is 0. With native_stacks, each
 * snapshot unwinds the threads from the registers and stacks the core
 * holds (a thread's native_error says why one could not be). PYS_E_IO if the core cannot be read, PYS_E_CORRUPT if it
 * is not a core file (or a malformed one), PYS_E_NOTFOUND if `executable`
 * cannot be read, else as pys_session_attach.
 */
PYS_EXTERN int pys_session_attach_core(pys_session **out, const char *core_path,
                                       const char *executable, const char *root,
                                       const struct pys_options *opt, char *errtext, size_t errlen);

/* What a core file says of its process (pys_core_info). */
struct pys_core_info {
    int pid;                /* its process id, 0 unknown */
    int signal;             /* the signal that dumped it, 0 none (gcore) */
    const char *command;    /* its command name (at most 16 bytes; "" unknown) */
    const char *executable; /* its executable's path as the process named it ("" unknown) */
    size_t nthreads;        /* its threads' ids, the thread that dumped first */
    const uint32_t *tids;
    /* "" or lines (each ending in a newline) on what of the process could
     * not be had: the core truncated, files missing or not those mapped. */
    const char *notes;
};
/* Fill *out for a session made by pys_session_attach_core (valid while the
 * session lives): 0, or PYS_E_INVAL for any other session. */
PYS_EXTERN int pys_core_info(const pys_session *s, struct pys_core_info *out);

/* Detail of the last error of this session ("" when none). */
PYS_EXTERN const char *pys_session_last_error(const pys_session *s);

PYS_EXTERN int pys_session_pid(const pys_session *s);
/* PY_VERSION_HEX of the target, e.g. 0x030f02f0 (patch 0 when not known). */
PYS_EXTERN uint32_t pys_session_python_version(const pys_session *s);
/* The target's version as text: "3.15.2", or "3.9" where the image does not
 * tell its patch level (3.8-3.10). */
PYS_EXTERN const char *pys_session_python_version_text(const pys_session *s);
/* Path of the image that holds the runtime, as the target's maps name it. */
PYS_EXTERN const char *pys_session_image_path(const pys_session *s);

/* Counters of a session, for --stats. */
struct pys_stats {
    uint64_t snapshots;                /* pys_session_snapshot calls */
    uint64_t thread_errors;            /* thread stacks that could not be read */
    uint64_t mem_reads;                /* read system calls (a batch counts once) */
    uint64_t mem_prefetched;           /* reads served from the snapshot's batched prefetch */
    uint64_t mem_bytes;                /* bytes asked for */
    uint64_t mem_failures;             /* reads that failed */
    uint64_t code_hits;                /* code objects found in the cache */
    uint64_t code_misses;              /* code objects read from the target */
    uint64_t frame_cache_hits;         /* 3.15 frame cache: only the top frame read */
    uint64_t frame_cache_partial_hits; /* frames above the anchor read, the rest cached */
    uint64_t frame_cache_misses;       /* whole stack walked */
    uint64_t frames_from_cache;
    uint64_t frames_read;         /* frame records read while the cache was on */
    uint64_t mem_writes;          /* anchor writes into the target */
    uint64_t mem_pieces;          /* pieces (iovecs) those reads asked for: the kernel's
                                   * cost grows with them more than with bytes */
    uint64_t threads_reused;      /* pys_options.reuse_idle: thread stacks taken over */
    uint64_t frame_cache_entries; /* threads the frame cache holds a stack for now */
    /* Threads whose frame cache anchor another profiler writes too (CPython
     * 3.15's own, with cache_frames): they are walked without the cache
     * from then on, and their anchor left alone. */
    uint64_t frame_cache_other_writers;
    uint64_t frame_cache_other_writer_walks; /* thread samples walked so */
    /* pys_session_pause: pauses ended, the time the target spent stopped
     * (from the first thread stopped to the last resumed) in all and in
     * the longest, and the threads stopped, counted once per pause. */
    uint64_t pauses, paused_ns, paused_max_ns, paused_threads;
    /* Thread stacks read (walked, not taken over from the sample before),
     * and of those, how many changed while read and were read again before
     * one was a single moment: a sample re-read is taken a little later
     * than planned, at a moment easier to read. */
    uint64_t thread_reads, thread_rereads;
    /* Times the 3.15 frame cache was set to rest: most walks with it were
     * torn, on a stack that unwinds between samples. */
    uint64_t frame_cache_rests;
    /* Batched reads (a snapshot's, a retry's), and of those, how many took
     * longer than the fastest recent one by more than noise (or had none
     * before them): taken as paused midway, their walks' top frames are
     * checked again too. */
    uint64_t mem_batches, mem_batches_paused;
};
PYS_EXTERN void pys_session_stats(const pys_session *s, struct pys_stats *out);

/* Read every interpreter and thread. A thread whose stack cannot be read gets
 * its error in pys_thread.error and the others are still reported; the call
 * itself fails only when nothing can be read (process gone: PYS_E_EXITED).
 * PYS_E_EXEC: the process has replaced its program since the attach (an
 * exec; looked for after a failed read and at least every 100 ms), and so
 * does every later call; the last error names the new executable. A new
 * session on the same pid attaches to the new program if it is Python. */
PYS_EXTERN int pys_session_snapshot(pys_session *s, const struct pys_snapshot **out);

/* Descendants of pid (children only unless recursive), breadth first, at
 * most max into out. Returns how many, or a negative code. */
PYS_EXTERN int pys_child_pids(int pid, int recursive, int *out, size_t max);

/* --- aggregated profiles ----------------------------------------------- */

/*
 * A profile aggregates stacks by distinct stack: a trie whose first level is
 * the threads, then frames from the outermost call inward. Memory grows with
 * the number of distinct stacks, not with the number of samples, up to a
 * bound (pys_profile_set_max_memory). A frame is identified by its strings'
 * addresses (interned by the session) and its filename, qualname, lineno,
 * firstlineno and kind, so the session that produced the frames must outlive
 * the profile. Each distinct frame is stored once, in the profile's frame
 * table, and nodes name it by id.
 */
typedef struct pys_profile pys_profile;

/* pys_profile_node.frame of the root and of thread nodes. */
#define PYS_PROFILE_NO_FRAME 0u

struct pys_profile_node {
    uint32_t parent;       /* node id; 0 for thread nodes (children of the root) */
    uint32_t frame;        /* frame id (pys_profile_frame); PYS_PROFILE_NO_FRAME
                            * for the root and thread nodes */
    uint32_t first_child;  /* 0 = none; siblings follow in increasing id order */
    uint32_t next_sibling; /* 0 = none */
    uint64_t self;         /* samples ending at this node */
    uint64_t total;        /* samples passing through it (self included) */
};

/* Facts about how the profile was taken, for the outputs' headers. */
struct pys_profile_info {
    int pid;
    uint32_t python_version;
    uint64_t interval_ns; /* the requested sampling interval */
    uint64_t duration_ns; /* wall time sampled */
    uint64_t samples;     /* snapshots taken */
    uint64_t failed;      /* snapshots in which a thread could not be read */
    uint64_t truncated;   /* snapshots in which a stack ended with PYS_FRAME_TRUNCATED */
    uint64_t max_frames;  /* the frames a stack was given (pys_options.max_frames) */
    uint64_t missed;      /* deadlines passed without a snapshot */
    const char *mode;     /* "wall", "cpu", "gil", "exception" */
    uint64_t folded;      /* set by the profile: samples folded past its memory bound */
};

/* The default memory bound of a profile: 512 MiB (docs/cli.md). */
#define PYS_PROFILE_MAX_MEMORY_DEFAULT ((uint64_t)512 << 20)

/* A new profile, bounded to PYS_PROFILE_MAX_MEMORY_DEFAULT; NULL if out of
 * memory. */
PYS_EXTERN pys_profile *pys_profile_new(void);
PYS_EXTERN void pys_profile_free(pys_profile *p);
/* Bound the memory the profile holds (its nodes, frame table and lookup
 * tables, and each thread's last stack) to max_bytes; 0: no bound. Past the
 * bound every sample is still counted: a stack that would need a new node is
 * counted under a PYS_FRAME_FOLDED child of the deepest node its path already
 * has (or, once even those have no room, of the nearest caller with one), and
 * its weight is added to pys_profile_info.folded. Only what each thread needs
 * to be counted at all (its node, its fold marker, its last stack) may go
 * past the bound. */
PYS_EXTERN void pys_profile_set_max_memory(pys_profile *p, uint64_t max_bytes);
/* Bytes the profile holds now, as counted against the bound. */
PYS_EXTERN uint64_t pys_profile_memory(const pys_profile *p);
/* Add one thread's stack (frames innermost first, as in pys_thread) with the
 * given weight. 0, or PYS_E_NOMEM (the profile is unchanged). */
PYS_EXTERN int pys_profile_add(pys_profile *p, uint64_t thread, const struct pys_frame *frames,
                               size_t n, uint64_t weight);
/* Thread `thread` (an id given to pys_profile_add: the host's, pystrobe's
 * view) is `ns_id` in the target's own PID namespace, where they differ: the
 * outputs show both. 0, or PYS_E_NOMEM. */
PYS_EXTERN int pys_profile_set_thread_ns(pys_profile *p, uint64_t thread, uint64_t ns_id);
/* That id, or 0 when none was set. */
PYS_EXTERN uint64_t pys_profile_thread_ns(const pys_profile *p, uint64_t thread);
/* Node 0 is the root; ids run from 0 to pys_profile_nodes() - 1, and a
 * node's parent always has a smaller id. The pointer is valid until the next
 * pys_profile_add. */
PYS_EXTERN size_t pys_profile_nodes(const pys_profile *p);
PYS_EXTERN const struct pys_profile_node *pys_profile_node(const pys_profile *p, uint32_t id);
/* Node id's parent, frame and self count, as pys_profile_node has them, in
 * *out (its total and links 0), without making the totals and links that
 * pys_profile_node makes after stacks were added (a pass over every node):
 * for a reader of many nodes' self counts while stacks are being added.
 * 0, or PYS_E_INVAL for an id past the last node (*out unchanged). */
PYS_EXTERN int pys_profile_node_peek(const pys_profile *p, uint32_t id,
                                     struct pys_profile_node *out);
/* Is node id a thread node (a child of the root)? */
PYS_EXTERN int pys_profile_is_thread(const pys_profile *p, uint32_t id);
/* The native thread id of the thread node id is or lies under (0 for the
 * root); costs the node's depth. */
PYS_EXTERN uint64_t pys_profile_thread(const pys_profile *p, uint32_t id);
/* The frame with this id (pys_profile_node.frame), NULL for
 * PYS_PROFILE_NO_FRAME or an unknown id. Its fields outside the identity
 * above (columns, lasti, opcode) are those of its first sample. Valid until
 * the next pys_profile_add. */
PYS_EXTERN const struct pys_frame *pys_profile_frame(const pys_profile *p, uint32_t frame);
PYS_EXTERN struct pys_profile_info *pys_profile_info(pys_profile *p);
PYS_EXTERN const struct pys_profile_info *pys_profile_info_get(const pys_profile *p);

/* --- asyncio task graphs (CPython 3.14+) ------------------------------- */

/*
 * The target's asyncio tasks, read from the layouts its _asyncio module
 * publishes (the ".AsyncioDebug" section, CPython 3.14+): each thread's
 * running task and task list, the interpreter's list of tasks whose thread
 * is gone, each task's name, the chain of coroutines it is suspended in,
 * and what awaits it. A handle on a session; its results are valid until
 * its next call or pys_tasks_free (strings until pys_session_free).
 */
typedef struct pys_tasks pys_tasks;

/* PYS_E_VERSION (with the reason in errtext) for a target older than 3.14,
 * which publishes no such layouts. The section itself is looked for at each
 * pys_tasks_read until found (3.14 loads _asyncio on `import asyncio`). */
PYS_EXTERN int pys_tasks_new(pys_session *s, pys_tasks **out, char *errtext, size_t errlen);
PYS_EXTERN void pys_tasks_free(pys_tasks *t);
/* Detail of the handle's last error ("" when none). */
PYS_EXTERN const char *pys_tasks_last_error(const pys_tasks *t);

/* pys_task.flags */
#define PYS_TASK_IS_TASK 1u  /* an asyncio.Task (an awaiter may be a plain Future) */
#define PYS_TASK_RUNNING 2u  /* its thread's running task: frames are the thread's own */
#define PYS_TASK_DONE 4u     /* its coroutine has finished (no frames) */
#define PYS_TASK_AWAITING 8u /* it awaits another task of the graph (not a leaf) */

struct pys_task {
    uint64_t addr;    /* the Task object's address */
    const char *name; /* "Task-N" for an int name; cut at max_name_chars */
    uint32_t flags;
    /* Innermost first: the coroutine chain it is suspended in, or for a
     * running task the thread's frames down to the task's coroutine. A
     * chain past max_chain keeps its innermost max_chain - 1 frames and ends
     * with a PYS_FRAME_TRUNCATED marker. */
    size_t nframes;
    const struct pys_frame *frames;
    /* What awaits it (task or future addresses), in the target's order. */
    size_t nawaiters;
    const uint64_t *awaiters;
};

struct pys_task_list {
    int64_t interp_id;
    /* The thread whose list this is (kernel id as the target sees it), or 0
     * for the interpreter's list of tasks whose thread is gone. */
    uint64_t native_id;
    uint64_t tstate;       /* 0 for the interpreter's list */
    uint64_t running_task; /* 0 when its loop runs no task (or no loop runs) */
    /* 0, or why the running task's stack is missing (PYS_TASKS_RUNNING:
     * its coroutine's frame was not on the thread's stack, read after read). */
    int error;
    size_t ntasks;
    const struct pys_task *tasks;
};

struct pys_task_graph {
    size_t nlists;
    const struct pys_task_list *lists; /* per interpreter: its threads, then its own list */
};

#define PYS_TASKS_ALL 0     /* every task of every list */
#define PYS_TASKS_RUNNING 1 /* per thread: its running task, then what awaits it, transitively */

struct pys_tasks_options {
    int mode;              /* PYS_TASKS_ALL or PYS_TASKS_RUNNING */
    size_t max_name_chars; /* 0: PYS_TASK_NAME_DEFAULT */
    size_t max_chain;      /* frames per task; 0: PYS_TASK_CHAIN_DEFAULT */
    size_t max_tasks;      /* tasks per graph; 0: PYS_TASK_MAX_DEFAULT */
    /* PYS_TASKS_RUNNING: a PYS_FRAME_GC marker in a running task's frames
     * above the frame that started a running collection (CPython 3.15+,
     * which publishes that frame), as pys_options.gc puts it in thread
     * stacks. Other tasks are suspended: they collect nothing. */
    int gc;
};
#define PYS_TASK_NAME_DEFAULT 4096
#define PYS_TASK_CHAIN_DEFAULT 512
#define PYS_TASK_MAX_DEFAULT 65536

/*
 * Read the task graph. A graph that changed while it was read (its second
 * copy differs) is read again; PYS_E_CORRUPT when it never held still,
 * PYS_E_NOTFOUND when the target has no ".AsyncioDebug" section (yet),
 * PYS_E_EXITED when the target is gone; more tasks than max_tasks or a
 * cyclic chain are PYS_E_TOODEEP. Detail in pys_tasks_last_error.
 */
PYS_EXTERN int pys_tasks_read(pys_tasks *t, const struct pys_tasks_options *opt,
                              const struct pys_task_graph **out);
/* The task at addr in the last graph read, or NULL. */
PYS_EXTERN const struct pys_task *pys_task_graph_find(const pys_tasks *t, uint64_t addr);

/* The filename of the frames pys_task_stack adds to name a task. */
#define PYS_TASK_FRAME_FILENAME "<task>"

/*
 * The stack of task (one of the last graph) as async-aware profiles show
 * it, innermost first: its frames, then a frame naming it (filename
 * PYS_TASK_FRAME_FILENAME, qualname its name, line 0), then the same for
 * the task awaiting it (the first of its awaiters that is a task of the
 * graph: the target's order decides where a task awaited by several is
 * counted), and so on to a task nobody awaits (or a task met twice). At
 * most max frames: a longer stack keeps its innermost max - 1 and ends with
 * a PYS_FRAME_TRUNCATED marker. Returns the number of frames written.
 */
PYS_EXTERN size_t pys_task_stack(const pys_tasks *t, const struct pys_task *task,
                                 struct pys_frame *out, size_t max);
/* --- thread names ------------------------------------------------------ */

/* The Python name (threading.Thread.name) of the main interpreter's thread
 * thread_id (pys_thread.thread_id), as the threading module's table of
 * live threads holds it, or NULL for a thread without a Thread object, a
 * target that never imported threading, or a table that cannot be read. The
 * names are read again at most about once a second (sooner while a thread
 * asked for is missing), so a call costs a lookup most of the time. The
 * string is interned by the session (valid until pys_session_free). */
PYS_EXTERN const char *pys_session_thread_name(pys_session *s, uint64_t thread_id);
/* Name thread `thread` (an id given to pys_profile_add) in the outputs;
 * the last name set wins. name must outlive the profile (a session's
 * string). 0, or PYS_E_NOMEM. */
PYS_EXTERN int pys_profile_set_thread_name(pys_profile *p, uint64_t thread, const char *name);
/* That name, or NULL when none was set. */
PYS_EXTERN const char *pys_profile_thread_name(const pys_profile *p, uint64_t thread);

/* --- stopping the target ------------------------------------------------ */

/* Stop every thread of the target (ptrace: each seized and interrupted,
 * threads started meanwhile too) until pys_session_resume, so that the
 * snapshots taken in between are each one moment: nothing moves while they
 * read. Nothing stays attached after the resume. A thread that cannot be
 * stopped fails the pause and leaves nothing stopped: PYS_E_PERM (another
 * tracer, or no permission; the last error names the thread and the
 * tracer), PYS_E_EXITED; PYS_E_INVAL for a session on an image or one
 * already paused. */
PYS_EXTERN int pys_session_pause(pys_session *s);
/* Let the threads run again: 0, or PYS_E_INVAL if not paused. */
PYS_EXTERN int pys_session_resume(pys_session *s);
/* While paused: let thread `thread` (pys_thread.host_id) alone run `steps`
 * machine instructions and stop again, for a thread stopped between two
 * stores that make its stack whole (a generator's frame made current a
 * moment before its caller is linked to it). 0; PYS_E_INVAL if not paused;
 * PYS_E_NOTFOUND, no such stopped thread; PYS_E_EXITED, it is gone. */
PYS_EXTERN int pys_session_step_thread(pys_session *s, uint64_t thread, unsigned steps);

/* --- instruction names -------------------------------------------------- */

/* The name of instruction byte `opcode` (pys_frame.opcode) in the code of
 * CPython `python_version` (PY_VERSION_HEX, as pys_session_python_version),
 * from that version's own opcode table, or NULL when the version has no
 * such instruction (or is not supported). 3.11+ run specialized forms
 * ("BINARY_OP_ADD_INT") and, under sys.monitoring or a tracer (3.12+),
 * instrumented ones ("INSTRUMENTED_CALL"): for those *base (when base is
 * not NULL) is set to the instruction it stands for ("BINARY_OP", "CALL"),
 * else to NULL. Static strings. */
PYS_EXTERN const char *pys_opcode_name(uint32_t python_version, int opcode, const char **base);

/* Count, from now on, the samples of each node at each instruction
 * (pys_frame.opcode >= 0 of the frames added): off (0) in a new profile, so
 * that a profile of frames without instructions spends nothing on them. */
PYS_EXTERN void pys_profile_count_opcodes(pys_profile *p, int on);

/* Samples of one profile node at one instruction. */
struct pys_opcode_count {
    int32_t opcode; /* pys_frame.opcode */
    uint64_t count; /* summed weights */
};
/* The instructions node id's frame was sampled at (frames added with
 * pys_frame.opcode, from sessions with pys_options.opcodes), in increasing
 * opcode order: writes the first max of them to out and returns how many
 * there are (0 for a node without), or PYS_E_NOMEM. The counts of a node
 * add up to its self and callee samples that carried an opcode, less those
 * a profile past its memory bound had no room for. */
PYS_EXTERN int pys_profile_node_opcodes(const pys_profile *p, uint32_t id,
                                        struct pys_opcode_count *out, size_t max);

/* --- threads' states in a profile -------------------------------------- */

/* How often a thread of a profile was seen in each state (in samples, as
 * weighted): what the outputs that show threads give as its shares. */
struct pys_thread_states {
    uint64_t samples;   /* stacks of the thread counted */
    uint64_t gil;       /* holding the GIL (PYS_THREAD_HAS_GIL) */
    uint64_t gil_wait;  /* asking for it (PYS_THREAD_GIL_REQUESTED: CPython 3.15+) */
    uint64_t cpu_known; /* its CPU state was read (no PYS_THREAD_UNKNOWN) */
    uint64_t cpu;       /* of those, on the CPU (PYS_THREAD_ON_CPU) */
    uint64_t gc;        /* a PYS_FRAME_GC frame on its stack (3.15+, pys_options.gc) */
    uint64_t exception; /* handling an exception (PYS_THREAD_HAS_EXCEPTION) */
};
/* Count one stack of thread `thread` (an id given to pys_profile_add; not
 * 0) with its pys_thread.status and frames, weight times. 0, PYS_E_INVAL
 * (thread 0) or PYS_E_NOMEM. */
PYS_EXTERN int pys_profile_count_states(pys_profile *p, uint64_t thread, uint32_t status,
                                        const struct pys_frame *frames, size_t n, uint64_t weight);
/* Its counts so far into *out: 0, or PYS_E_NOTFOUND (none counted). */
PYS_EXTERN int pys_profile_thread_states(const pys_profile *p, uint64_t thread,
                                         struct pys_thread_states *out);

/* --- garbage-collector statistics (CPython 3.15+) ---------------------- */

/* One entry of the statistics an interpreter keeps per generation (the
 * last few collections of each, in its ring buffers' order), as
 * _remote_debugging's GCStatsInfo gives it. ts_* are the target's raw
 * PyTime_t clock readings; duration is in seconds. */
struct pys_gc_stats {
    int gen;
    int64_t iid;
    int64_t ts_start, ts_stop;
    int64_t collections, collected, uncollectable, candidates, heap_size;
    double duration;
};
/* The entries of the main interpreter (all_interps: of every interpreter)
 * into out[0..max), their number in *n. 0; PYS_E_VERSION for a target
 * before 3.15 or a layout pystrobe does not know; PYS_E_NOMEM if max is
 * too small (17 entries per interpreter); PYS_E_CORRUPT if the statistics
 * kept changing while read; read errors. Detail in the last error. */
PYS_EXTERN int pys_session_gc_stats(pys_session *s, int all_interps, struct pys_gc_stats *out,
                                    size_t max, size_t *n);
#define PYS_GC_STATS_PER_INTERP 17

/* --- local variables ---------------------------------------------------- */

struct pys_local {
    const char *name; /* interned by the session */
    /* A short representation: repr() for None, bool, int (to 64 bits),
     * float, and str and bytes (cut at 100 characters and 64 bytes, then
     * "..."); "<list of N at 0x...>" for lists and tuples; "<TYPE at
     * 0x...>" for the rest. Control characters are escaped as repr does;
     * other text is UTF-8. Valid until the next call. */
    const char *repr;
};

/* The most locals pys_session_frame_locals gives one frame. */
#define PYS_LOCALS_MAX 1024

/*
 * The local variables of frame `frame` (an index into t->frames) of thread
 * t of the last snapshot of a session attached with pys_options.locals,
 * read now from the target (so, for a snapshot of a running target, as
 * they are a moment later: pys_session_pause keeps them as the snapshot
 * saw them). Arguments and locals in the code object's order, unbound ones
 * left out; 3.8-3.10 give co_varnames only (a cell variable that is not an
 * argument is not among them), 3.11+ every fast local, cells showing what
 * they hold. *out and *n get them (0 for a marker or a native frame);
 * valid until the next call or snapshot. PYS_E_INVAL without pys_options.locals or for a
 * frame not of the last snapshot; PYS_E_CORRUPT when the frame no longer
 * runs the same code (it returned since the snapshot); a read error.
 */
PYS_EXTERN int pys_session_frame_locals(pys_session *s, const struct pys_thread *t, size_t frame,
                                        const struct pys_local **out, size_t *n);

#ifdef __cplusplus
}
#endif
#endif
