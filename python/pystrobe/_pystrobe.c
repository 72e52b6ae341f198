/*
 * _pystrobe: the Python binding of libpystrobe. RemoteUnwinder and the result
 * types reproduce CPython 3.15's _remote_debugging (the contract is in
 * docs/python.md), so that code written for it runs on pystrobe from any host
 * interpreter (3.8+) against any target the library supports.
 *
 * The binding is thin: one session per RemoteUnwinder, one snapshot per
 * get_stack_trace() call, then the reference's thread selection and mode
 * filtering applied to the snapshot and its arrays turned into structseqs.
 * The asyncio calls read the task graph (pys_tasks, made on first use) and
 * give it the reference's shape. Built against the limited API of 3.8 (abi3), so one build loads in
 * every later interpreter; no private or version-specific API is used.
 */
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x03080000
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pystrobe/pystrobe.h>

#include "output/tach.h"
#include "platform/platform.h"
#include "util/hashtab.h"

#include <zstd.h>

/* The profiling modes of _remote_debugging (profiling.sampling.constants). */
enum mode {
    MODE_WALL = 0,
    MODE_CPU = 1,
    MODE_GIL = 2,
    MODE_ALL = 3,
    MODE_EXCEPTION = 4,
};

/* get_child_pids() grows its buffer up to this many descendants; a process
 * tree larger than that is reported truncated rather than eat the memory. */
#define MAX_CHILDREN (1 << 20)

static PyTypeObject *InterpreterInfo_Type;
static PyTypeObject *ThreadInfo_Type;
static PyTypeObject *FrameInfo_Type;
static PyTypeObject *LocationInfo_Type;
static PyTypeObject *RemoteUnwinder_Type;
static PyTypeObject *AwaitedInfo_Type;
static PyTypeObject *TaskInfo_Type;
static PyTypeObject *GCStatsInfo_Type;
static PyTypeObject *GCMonitor_Type;
static PyTypeObject *CoroInfo_Type;

/* Task names are cut where the reference cuts them (asyncio.c: 255). */
#define TASK_NAME_MAX 255
/* So are file names and qualified names of frames: at 1024 code points
 * (the library keeps up to CPY_MAX_STR_CHARS, 4096, for the CLI). */
#define NAME_MAX_CHARS 1024
/* Coroutine chains: the reference returns chains of 1,024 frames and refuses
 * some length between that and 1,536 ("Too many coroutine frames"); past
 * this bound pystrobe returns the innermost part and a <truncated> frame. */
#define TASK_CHAIN_MAX 2048

/* --- result types ---------------------------------------------------------- */

static PyStructSequence_Field interpreter_info_fields[] = {
    {"interpreter_id", "Interpreter ID"},
    {"threads", "List of threads in this interpreter"},
    {NULL, NULL},
};
static PyStructSequence_Desc interpreter_info_desc = {
    "pystrobe.InterpreterInfo", "Information about an interpreter", interpreter_info_fields, 2};

static PyStructSequence_Field thread_info_fields[] = {
    {"thread_id", "Thread ID (the kernel's thread id)"},
    {"status", "Thread status (flags: THREAD_STATUS_*)"},
    {"frame_info", "Frame information, innermost first"},
    {NULL, NULL},
};
static PyStructSequence_Desc thread_info_desc = {
    "pystrobe.ThreadInfo", "Information about a thread", thread_info_fields, 3};

static PyStructSequence_Field frame_info_fields[] = {
    {"filename", "Source code filename"},
    {"location", "LocationInfo structseq or None for synthetic frames"},
    {"funcname", "Function name (the code object's qualified name)"},
    {"opcode", "Opcode being executed (with opcodes=True), else None"},
    {NULL, NULL},
};
static PyStructSequence_Desc frame_info_desc = {"pystrobe.FrameInfo", "Information about a frame",
                                                frame_info_fields, 4};

static PyStructSequence_Field location_info_fields[] = {
    {"lineno", "Line number"},
    {"end_lineno", "End line number"},
    {"col_offset", "Column offset"},
    {"end_col_offset", "End column offset"},
    {NULL, NULL},
};
static PyStructSequence_Desc location_info_desc = {
    "pystrobe.LocationInfo",
    "Source location information: (lineno, end_lineno, col_offset, end_col_offset)",
    location_info_fields, 4};

static PyStructSequence_Field awaited_info_fields[] = {
    {"thread_id", "Thread ID (the kernel's), 0 for the interpreter's own task list"},
    {"awaited_by", "List of TaskInfo"},
    {NULL, NULL},
};
static PyStructSequence_Desc awaited_info_desc = {
    "pystrobe.AwaitedInfo", "The asyncio tasks of a thread", awaited_info_fields, 2};

static PyStructSequence_Field task_info_fields[] = {
    {"task_id", "Address of the Task object"},
    {"task_name", "Name of the task"},
    {"coroutine_stack", "List of CoroInfo: the task's own coroutine stack"},
    {"awaited_by", "List of CoroInfo: the tasks awaiting it"},
    {NULL, NULL},
};
static PyStructSequence_Field gc_stats_info_fields[] = {
    {"gen", "GC generation number"},
    {"iid", "Interpreter ID"},
    {"ts_start", "Raw timestamp at collection start"},
    {"ts_stop", "Raw timestamp at collection stop"},
    {"collections", "Total number of collections"},
    {"collected", "Total number of collected objects"},
    {"uncollectable", "Total number of uncollectable objects"},
    {"candidates", "Total objects considered and traversed"},
    {"heap_size", "Number of live objects"},
    {"duration", "Total collection time, in seconds"},
    {NULL, NULL}};
static PyStructSequence_Desc gc_stats_info_desc = {
    "pystrobe.GCStatsInfo", "Information about a garbage collector stats sample",
    gc_stats_info_fields, 10};

static PyStructSequence_Desc task_info_desc = {"pystrobe.TaskInfo", "Information about a task",
                                               task_info_fields, 4};

static PyStructSequence_Field coro_info_fields[] = {
    {"call_stack", "List of FrameInfo, innermost first"},
    {"task_name", "Address of the task (or future) the stack belongs to"},
    {NULL, NULL},
};
static PyStructSequence_Desc coro_info_desc = {"pystrobe.CoroInfo", "The coroutine stack of a task",
                                               coro_info_fields, 2};

/* --- object caches --------------------------------------------------------- */

/*
 * A table from fixed-size keys (bytes compared as they are) to Python
 * objects, indexed by the library's hash table (util/hashtab.h); it owns
 * one reference to each value. Two serve each unwinder:
 *
 * - names: the session interns every string it hands out (equal strings,
 *   equal pointers, alive until the session is freed), so a str per pointer
 *   is made once; the hot path decodes nothing it has seen before.
 * - frames: FrameInfo objects are immutable, and a sampled program shows the
 *   same frames (same names, same source range) sample after sample, so one
 *   object per distinct frame is made and handed out again: a frame costs a
 *   lookup, not four allocations. This one is emptied when it reaches
 *   OBJCACHE_MAX entries, which bounds it for programs that visit many lines.
 */
#define OBJCACHE_MAX 65536

struct objcache {
    size_t keysize;         /* bytes per key; a multiple of 8 */
    uint8_t *keys;          /* the key of entry id at keys + id * keysize */
    PyObject **vals;        /* vals[1..n], by id */
    size_t n, cap;          /* cap: keys and vals have room for ids below it */
    struct util_htab index; /* the ids, by objcache_hash */
    int bounded;            /* empty it at OBJCACHE_MAX entries */
};

static uint64_t objcache_hash(const struct objcache *c, const void *key)
{
    uint64_t h = 0;
    for (size_t i = 0; i < c->keysize; i += 8) {
        uint64_t w;
        memcpy(&w, (const uint8_t *)key + i, 8);
        h = util_hash_add(h, w);
    }
    return util_hash_u64(h);
}

static uint64_t objcache_hash_at(const void *ctx, uint32_t id)
{
    const struct objcache *c = ctx;
    return objcache_hash(c, c->keys + id * c->keysize);
}

/* The cached object for key: a new reference, or NULL (no exception). */
static PyObject *objcache_get(const struct objcache *c, const void *key)
{
    uint32_t id;
    if (!c->index.cap)
        return NULL;
    for (size_t j = util_htab_first(&c->index, objcache_hash(c, key)); (id = c->index.slot[j]);
         j = util_htab_next(&c->index, j)) {
        if (memcmp(c->keys + id * c->keysize, key, c->keysize) == 0) {
            Py_INCREF(c->vals[id]);
            return c->vals[id];
        }
    }
    return NULL;
}

/* Keep a reference to v under key (not there yet). -1 when out of memory
 * (no exception: the caller just does not cache). */
static int objcache_put(struct objcache *c, const void *key, PyObject *v)
{
    if (c->bounded && c->n >= OBJCACHE_MAX) {
        for (size_t id = 1; id <= c->n; id++)
            Py_CLEAR(c->vals[id]);
        c->n = 0;
        if (c->index.cap)
            memset(c->index.slot, 0, c->index.cap * sizeof *c->index.slot);
    }
    if (c->n + 1 >= UINT32_MAX ||
        util_htab_reserve(&c->index, 256, 1, (uint32_t)c->n + 1, objcache_hash_at, c) < 0)
        return -1;
    if (c->n + 1 >= c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 256;
        uint8_t *keys = realloc(c->keys, cap * c->keysize);
        if (keys)
            c->keys = keys;
        PyObject **vals = realloc(c->vals, cap * sizeof *vals);
        if (vals)
            c->vals = vals;
        if (!keys || !vals)
            return -1;
        c->cap = cap;
    }
    uint32_t id = (uint32_t)++c->n;
    memcpy(c->keys + id * c->keysize, key, c->keysize);
    Py_INCREF(v);
    c->vals[id] = v;
    util_htab_set(&c->index, util_htab_free_slot(&c->index, objcache_hash(c, key)), id);
    return 0;
}

static void objcache_release(struct objcache *c)
{
    for (size_t id = 1; id <= c->n; id++)
        Py_XDECREF(c->vals[id]);
    free(c->keys);
    free(c->vals);
    util_htab_release(&c->index);
    c->keys = NULL;
    c->vals = NULL;
    c->cap = c->n = 0;
}

/* A str for s, decoded once: a new reference, or NULL with an exception.
 * The library writes UTF-8; anything else is replaced rather than raised,
 * since one odd name must not fail every later sample. */
static PyObject *name_object(struct objcache *names, const char *s)
{
    if (!s)
        s = "";
    uint64_t key = (uint64_t)(uintptr_t)s;
    PyObject *v = objcache_get(names, &key);
    if (v)
        return v;
    Py_ssize_t len = (Py_ssize_t)strlen(s);
    v = PyUnicode_DecodeUTF8(s, len, "surrogatepass");
    if (!v) {
        PyErr_Clear();
        v = PyUnicode_DecodeUTF8(s, len, "replace");
        if (!v)
            return NULL;
    }
    if (PyUnicode_GetLength(v) > NAME_MAX_CHARS) {
        PyObject *cut = PyUnicode_Substring(v, 0, NAME_MAX_CHARS);
        Py_DECREF(v);
        if (!(v = cut))
            return NULL;
    }
    if (objcache_put(names, &key, v) < 0) {
        Py_DECREF(v);
        PyErr_NoMemory();
        return NULL;
    }
    return v;
}

/* What identifies a FrameInfo: the frame's interned names and numbers. */
struct frame_key {
    const char *filename, *qualname;
    int32_t lineno, end_lineno, col, end_col, kind, opcode;
};

static void frame_key_of(const struct pys_frame *f, struct frame_key *k)
{
    memset(k, 0, sizeof *k);
    k->filename = f->filename;
    k->qualname = f->qualname;
    k->lineno = f->lineno;
    k->end_lineno = f->end_lineno;
    k->col = f->col;
    k->end_col = f->end_col;
    k->kind = f->kind | f->no_location << 8; /* kinds are small */
    k->opcode = f->opcode;
}

/*
 * A thread's last frame list: the library's frames as they were (innermost
 * first, kept at the end of `frames` so that bottoms line up whatever the
 * depth) and a private list of the FrameInfo objects handed out for them,
 * in the same order (never handed out itself: callers may change theirs).
 * The next call finds how many bottom frames did not change by comparing
 * blocks of frames, takes their objects as one slice of that list, and
 * looks up only the frames above: a deep stack whose top moves costs a
 * block compare and a slice, not a lookup per frame. A thread not reported
 * in a call loses its memo.
 */
struct thread_memo {
    uint64_t tstate;
    uint64_t used; /* the call (samples) that last used it */
    size_t n, cap;
    struct pys_frame *frames; /* the last call's at [cap - n, cap) */
    PyObject *list;           /* n FrameInfo objects, or NULL */
};

static void memo_clear(struct thread_memo *mm)
{
    Py_XDECREF(mm->list);
    free(mm->frames);
    memset(mm, 0, sizeof *mm);
}

/* Room for n frames in mm, its frames kept at the end; -1 when out of
 * memory (no exception). */
static int memo_reserve(struct thread_memo *mm, size_t n)
{
    if (n <= mm->cap)
        return 0;
    size_t cap = mm->cap ? mm->cap : 16;
    while (cap < n)
        cap *= 2;
    struct pys_frame *f = malloc(cap * sizeof *f);
    if (!f)
        return -1;
    if (mm->n)
        memcpy(f + cap - mm->n, mm->frames + mm->cap - mm->n, mm->n * sizeof *f);
    free(mm->frames);
    mm->frames = f;
    mm->cap = cap;
    return 0;
}

/* Frames compared at once when looking for the first change from the bottom. */
#define MEMO_BLOCK 32

/* How many bottom frames of cur (n of them, innermost first) equal the
 * memo's. */
static size_t memo_same_bottom(const struct thread_memo *mm, const struct pys_frame *cur, size_t n)
{
    size_t most = n < mm->n ? n : mm->n, same = 0;
    const struct pys_frame *a = cur + n, *b = mm->frames + mm->cap;
    while (same < most) {
        size_t k = most - same < MEMO_BLOCK ? most - same : MEMO_BLOCK;
        if (memcmp(a - same - k, b - same - k, k * sizeof *a) == 0) {
            same += k;
            continue;
        }
        while (memcmp(a - same - 1, b - same - 1, sizeof *a) == 0)
            same++;
        break;
    }
    return same;
}

/* --- errors ---------------------------------------------------------------- */

/* Raise exc(errno_value, message) as OSError subclasses are built. */
static void raise_oserror(PyObject *exc, int errno_value, const char *message)
{
    PyObject *e = PyObject_CallFunction(exc, "is", errno_value, message);
    if (e) {
        PyErr_SetObject(exc, e);
        Py_DECREF(e);
    }
}

static void raise_gone(void)
{
    raise_oserror(PyExc_ProcessLookupError, ESRCH, "No such process");
}

/* Replace the pending exception by RuntimeError(message) whose __cause__ is
 * the original. */
static void chain_runtime_error(const char *message)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb && value)
        PyException_SetTraceback(value, tb);
    PyObject *outer = PyObject_CallFunction(PyExc_RuntimeError, "s", message);
    if (!outer) {
        PyErr_Restore(type, value, tb);
        return;
    }
    PyException_SetCause(outer, value); /* steals value */
    PyErr_SetObject(PyExc_RuntimeError, outer);
    Py_DECREF(outer);
    Py_XDECREF(type);
    Py_XDECREF(tb);
}

/* What _remote_debugging's debug=True does: wrap the pending exception in
 * one more layer of context. PermissionError and ProcessLookupError are left
 * alone: callers catch those by type. */
static void wrap_debug(const char *message)
{
    if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_PermissionError) ||
        PyErr_ExceptionMatches(PyExc_ProcessLookupError))
        return;
    chain_runtime_error(message);
}

/* Has process pid gone (no such process, or a zombie: the platform's
 * plat_proc_check)? kill(2) first, which needs no /proc: in a chroot
 * without it mounted only kill can tell, and the process is taken as
 * there. */
static int process_gone(int pid)
{
    if (kill(pid, 0) < 0 && errno == ESRCH)
        return 1;
    return plat_proc_check(pid) == PYS_E_EXITED;
}

/* The exception for a failed attach (construction): what _remote_debugging
 * raises for the same situation. */
static void raise_attach_error(int rc, const char *detail)
{
    char msg[600];
    snprintf(msg, sizeof msg, "%s", detail[0] ? detail : pys_strerror(rc));
    switch (rc) {
    case PYS_E_PERM:
        raise_oserror(PyExc_PermissionError, EACCES, msg);
        return;
    case PYS_E_NOMEM:
        PyErr_NoMemory();
        return;
    case PYS_E_NOPROC:
    case PYS_E_EXITED:
        /* RuntimeError, caused by the OS error, like the reference's
         * "Failed to find the PyRuntime section" chained to OSError. */
        raise_oserror(PyExc_ProcessLookupError, ESRCH, "No such process");
        chain_runtime_error(msg);
        return;
    default:
        PyErr_SetString(PyExc_RuntimeError, msg);
        return;
    }
}

/* --- RemoteUnwinder -------------------------------------------------------- */

struct unwinder {
    PyObject ob_base; /* PyObject_HEAD */
    pys_session *session;
    int pid;
    int all_threads;
    int only_active_thread;
    int mode;
    int debug;
    int skip_non_matching;
    int native;
    int gc;
    int opcodes;
    int cache_frames;
    int stats;
    int gone;                  /* the process exited: every later call raises */
    int thread_error;          /* the error of the thread that failed the last call */
    uint64_t samples;          /* get_stack_trace() calls */
    uint64_t frames_reported;  /* Python frames turned into FrameInfo */
    struct objcache names;     /* str objects, by interned name pointer */
    struct objcache frames;    /* FrameInfo objects, by frame_key */
    struct thread_memo *memos; /* by thread state, in the order last seen */
    size_t nmemos, capmemos, memo_next;
    pys_tasks *tasks; /* the asyncio task graph reader, made on first use */
    pid_t pauser;     /* the thread that paused the target, 0 when not paused */
};

static void memos_release(struct unwinder *self)
{
    for (size_t i = 0; i < self->nmemos; i++)
        memo_clear(&self->memos[i]);
    free(self->memos);
    self->memos = NULL;
    self->nmemos = self->capmemos = self->memo_next = 0;
}

/* The memo of the thread whose state is at tstate, made if new; NULL when
 * out of memory (no exception: the frames are then just looked up). Threads
 * come in the same order call after call: the search starts after the last
 * one found. */
static struct thread_memo *memo_for(struct unwinder *self, uint64_t tstate)
{
    for (size_t k = 0; k < self->nmemos; k++) {
        size_t i = (self->memo_next + k) % self->nmemos;
        if (self->memos[i].tstate == tstate) {
            self->memo_next = i + 1;
            self->memos[i].used = self->samples;
            return &self->memos[i];
        }
    }
    if (self->nmemos == self->capmemos) {
        size_t cap = self->capmemos ? self->capmemos * 2 : 8;
        struct thread_memo *v = realloc(self->memos, cap * sizeof *v);
        if (!v)
            return NULL;
        self->memos = v;
        self->capmemos = cap;
    }
    struct thread_memo *mm = &self->memos[self->nmemos++];
    memset(mm, 0, sizeof *mm);
    mm->tstate = tstate;
    mm->used = self->samples;
    self->memo_next = self->nmemos;
    return mm;
}

/* Drop the memos of threads this call did not report. */
static void memos_sweep(struct unwinder *self)
{
    size_t kept = 0;
    for (size_t i = 0; i < self->nmemos; i++) {
        if (self->memos[i].used == self->samples)
            self->memos[kept++] = self->memos[i];
        else
            memo_clear(&self->memos[i]);
    }
    self->nmemos = kept;
    self->memo_next = 0;
}

static int unwinder_init(PyObject *op, PyObject *args, PyObject *kwargs)
{
    struct unwinder *self = (struct unwinder *)op;
    static char *kwlist[] = {"pid",          "all_threads", "only_active_thread",
                             "mode",         "debug",       "skip_non_matching_threads",
                             "native",       "gc",          "opcodes",
                             "cache_frames", "stats",       NULL};
    int pid, all_threads = 0, only_active = 0, mode = 0, debug = 0, skip = 1, native = 0, gc = 0,
             opcodes = 0, cache_frames = 0, stats = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "i|$ppippppppp:RemoteUnwinder", kwlist, &pid,
                                     &all_threads, &only_active, &mode, &debug, &skip, &native, &gc,
                                     &opcodes, &cache_frames, &stats))
        return -1;
    if (all_threads && only_active) {
        PyErr_SetString(PyExc_ValueError, "all_threads and only_active_thread cannot both be True");
        return -1;
    }

    struct pys_options opt;
    memset(&opt, 0, sizeof opt);
    /* The kernel's run state is read only where the mode needs it, as the
     * reference does: elsewhere threads carry THREAD_STATUS_UNKNOWN. */
    opt.cpu_state = mode == MODE_CPU || mode == MODE_ALL;
    opt.native = native;
    opt.gc = gc;
    opt.opcodes = opcodes;
    /* CPython 3.15.2's module gives a frame no location (None) when its
     * code's line table is over 64 KiB (observed: 65,532 bytes decoded,
     * 65,537 not); the CLI decodes up to 4 MiB. */
    opt.max_linetable = 65536;
    /* Like the reference's, the frame cache writes into the target (the
     * thread states' last_profiled_frame); without it nothing is written. */
    opt.frame_cache = cache_frames;

    pys_session *s = NULL;
    char err[512];
    int rc;
    PyThreadState *ts = PyEval_SaveThread(); /* attach reads files: let others run */
    rc = pys_session_attach(&s, pid, &opt, err, sizeof err);
    PyEval_RestoreThread(ts);
    if (rc < 0) {
        raise_attach_error(rc, err);
        if (debug) {
            char what[96];
            snprintf(what, sizeof what, "Failed to attach to process %d", pid);
            wrap_debug(what);
        }
        return -1;
    }

    /* __init__ may run again on a live object: replace everything. */
    memos_release(self);
    objcache_release(&self->frames);
    objcache_release(&self->names);
    self->names.keysize = sizeof(uint64_t);
    self->frames.keysize = sizeof(struct frame_key);
    self->frames.bounded = 1;
    pys_session_free(self->session); /* resumes a paused target */
    self->session = s;
    self->pauser = 0;
    self->pid = pid;
    self->all_threads = all_threads;
    self->only_active_thread = only_active;
    self->mode = mode;
    self->debug = debug;
    self->skip_non_matching = skip;
    self->native = native;
    self->gc = gc;
    self->opcodes = opcodes;
    self->cache_frames = cache_frames;
    self->stats = stats;
    self->gone = 0;
    self->samples = 0;
    self->frames_reported = 0;
    return 0;
}

static void unwinder_dealloc(PyObject *op)
{
    struct unwinder *self = (struct unwinder *)op;
    PyTypeObject *tp = Py_TYPE(op);
    memos_release(self);
    objcache_release(&self->frames);
    objcache_release(&self->names);
    pys_tasks_free(self->tasks);
    self->tasks = NULL;
    pys_session_free(self->session);
    self->session = NULL;
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(op);
    Py_DECREF(tp);
}

static int check_session(struct unwinder *self)
{
    if (self->session)
        return 0;
    PyErr_SetString(PyExc_RuntimeError, "RemoteUnwinder is not initialised");
    return -1;
}

/* Does a thread with this status count under the unwinder's mode? */
static int thread_matches(const struct unwinder *self, uint32_t status)
{
    if (!self->skip_non_matching)
        return 1;
    switch (self->mode) {
    case MODE_CPU:
        return (status & PYS_THREAD_ON_CPU) != 0;
    case MODE_GIL:
        return (status & PYS_THREAD_HAS_GIL) != 0;
    case MODE_EXCEPTION:
        return (status & PYS_THREAD_HAS_EXCEPTION) != 0;
    default: /* WALL, ALL, and any other number, which behave as WALL */
        return 1;
    }
}

static PyObject *new_location(const struct pys_frame *f)
{
    PyObject *loc = PyStructSequence_New(LocationInfo_Type);
    if (!loc)
        return NULL;
    const int32_t v[4] = {f->lineno, f->end_lineno, f->col, f->end_col};
    for (Py_ssize_t i = 0; i < 4; i++) {
        PyObject *n = PyLong_FromLong(v[i] < 0 ? -1 : (long)v[i]);
        if (!n) {
            Py_DECREF(loc);
            return NULL;
        }
        PyStructSequence_SetItem(loc, i, n);
    }
    return loc;
}

static PyObject *build_frame(struct unwinder *self, const struct pys_frame *f);

/* The FrameInfo for f: a new reference (shared with the cache), or NULL with
 * an exception. */
static PyObject *new_frame(struct unwinder *self, const struct pys_frame *f)
{
    struct frame_key k;
    frame_key_of(f, &k);
    PyObject *fi = objcache_get(&self->frames, &k);
    if (fi)
        return fi;
    fi = build_frame(self, f);
    if (fi)
        (void)objcache_put(&self->frames, &k, fi); /* uncached if out of memory */
    return fi;
}

static PyObject *build_frame(struct unwinder *self, const struct pys_frame *f)
{
    PyObject *fi = PyStructSequence_New(FrameInfo_Type);
    if (!fi)
        return NULL;
    PyObject *filename = name_object(&self->names, f->filename);
    if (!filename)
        goto fail;
    PyStructSequence_SetItem(fi, 0, filename);
    PyObject *loc;
    if (f->kind == PYS_FRAME_PYTHON && !f->no_location) {
        if (!(loc = new_location(f)))
            goto fail;
    } else {
        Py_INCREF(Py_None);
        loc = Py_None;
    }
    PyStructSequence_SetItem(fi, 1, loc);
    PyObject *name = name_object(&self->names, f->qualname);
    if (!name)
        goto fail;
    PyStructSequence_SetItem(fi, 2, name);
    /* The instruction's byte, read live (opcodes=True), as the reference. */
    PyObject *op;
    if (self->opcodes && f->kind == PYS_FRAME_PYTHON && f->opcode >= 0) {
        if (!(op = PyLong_FromLong(f->opcode)))
            goto fail;
    } else {
        Py_INCREF(Py_None);
        op = Py_None;
    }
    PyStructSequence_SetItem(fi, 3, op);
    return fi;
fail:
    Py_DECREF(fi);
    return NULL;
}

/* A new list of the FrameInfo objects for frames [0, n). */
static PyObject *new_frame_list(struct unwinder *self, const struct pys_frame *frames, size_t n)
{
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (!list)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        PyObject *f = new_frame(self, &frames[i]);
        if (!f) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SetItem(list, (Py_ssize_t)i, f);
    }
    return list;
}

/* Put the objects of list src, all of them, at the head of list dst
 * (which has at least as many), in place of what was there. */
static void set_head(PyObject *dst, PyObject *src)
{
    Py_ssize_t k = PyList_Size(src);
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *f = PyList_GetItem(src, i); /* borrowed */
        Py_INCREF(f);
        PyList_SetItem(dst, i, f);
    }
}

/* The frame list of t: the memo's objects for its unchanged bottom frames,
 * looked up for the others; the memo then holds this call's. */
static PyObject *thread_frames(struct unwinder *self, const struct pys_thread *t)
{
    size_t n = t->nframes, same = 0;
    struct thread_memo *mm = memo_for(self, t->tstate);
    if (mm && memo_reserve(mm, n) < 0) {
        memo_clear(mm);
        mm->tstate = t->tstate;
        mm->used = self->samples;
        mm = NULL;
    }
    if (mm && mm->list && n > 0)
        same = memo_same_bottom(mm, t->frames, n);
    PyObject *top = new_frame_list(self, t->frames, n - same);
    if (!top)
        return NULL;
    PyObject *frames = top;
    if (same > 0) {
        /* One slice of the memo's list: its last n objects when it has as
         * many (the top ones then replaced), else its bottom with the top
         * put before it. */
        if (mm->n >= n) {
            frames = PyList_GetSlice(mm->list, (Py_ssize_t)(mm->n - n), (Py_ssize_t)mm->n);
            if (frames)
                set_head(frames, top);
        } else {
            frames = PyList_GetSlice(mm->list, (Py_ssize_t)(mm->n - same), (Py_ssize_t)mm->n);
            if (frames && PyList_SetSlice(frames, 0, 0, top) < 0)
                Py_CLEAR(frames);
        }
        if (!frames) {
            Py_DECREF(top);
            return NULL;
        }
    }
    if (mm) {
        /* The memo's list and frames become this call's: its top replaced. */
        int ok = 1;
        if (mm->list && same > 0 && mm->n == n)
            set_head(mm->list, top);
        else if (mm->list && same > 0)
            ok = PyList_SetSlice(mm->list, 0, (Py_ssize_t)(mm->n - same), top) == 0;
        else {
            Py_XDECREF(mm->list);
            ok = (mm->list = PyList_GetSlice(frames, 0, (Py_ssize_t)n)) != NULL;
        }
        if (ok) {
            if (n > same)
                memcpy(mm->frames + mm->cap - n, t->frames, (n - same) * sizeof *t->frames);
            mm->n = n;
        } else {
            PyErr_Clear(); /* out of memory: no memo, the call goes on */
            uint64_t tstate = mm->tstate;
            memo_clear(mm);
            mm->tstate = tstate;
            mm->used = self->samples;
        }
    }
    if (frames != top)
        Py_DECREF(top);
    if (self->stats && !self->cache_frames)
        for (size_t i = 0; i < n; i++)
            if (t->frames[i].kind == PYS_FRAME_PYTHON)
                self->frames_reported++;
    return frames;
}

static PyObject *new_thread(struct unwinder *self, const struct pys_thread *t)
{
    PyObject *frames = NULL, *ti = NULL;
    if (!(frames = thread_frames(self, t)))
        return NULL;
    if (!(ti = PyStructSequence_New(ThreadInfo_Type)))
        goto fail;
    PyObject *tid = PyLong_FromUnsignedLongLong(t->native_id);
    if (!tid)
        goto fail;
    PyStructSequence_SetItem(ti, 0, tid);
    PyObject *status = PyLong_FromUnsignedLong(t->status);
    if (!status)
        goto fail;
    PyStructSequence_SetItem(ti, 1, status);
    PyStructSequence_SetItem(ti, 2, frames);
    return ti;
fail:
    Py_XDECREF(ti);
    Py_XDECREF(frames);
    return NULL;
}

/* A thread the caller asked for could not be read: the whole sample fails,
 * as in the reference, with an error callers treat as transient. */
static int check_thread(struct unwinder *self, const struct pys_thread *t)
{
    if (!t->error)
        return 0;
    self->thread_error = t->error;
    PyErr_Format(PyExc_RuntimeError, "Failed to unwind stack for thread %llu: %s",
                 (unsigned long long)t->native_id,
                 t->error_text ? t->error_text : pys_strerror(t->error));
    return -1;
}

/*
 * The selected threads of one interpreter, as an InterpreterInfo. first and
 * one describe the selection: threads from index first on that match the
 * mode, all of them, or (one) only the first such.
 */
static PyObject *new_interp(struct unwinder *self, const struct pys_interp *in, size_t first,
                            int one)
{
    PyObject *threads = PyList_New(0), *ii = NULL;
    if (!threads)
        return NULL;
    for (size_t k = first; k < in->nthreads; k++) {
        const struct pys_thread *t = &in->threads[k];
        if (!thread_matches(self, t->status))
            continue;
        if (check_thread(self, t) < 0)
            goto fail;
        PyObject *ti = new_thread(self, t);
        if (!ti)
            goto fail;
        int rc = PyList_Append(threads, ti);
        Py_DECREF(ti);
        if (rc < 0)
            goto fail;
        if (one)
            break;
    }
    if (!(ii = PyStructSequence_New(InterpreterInfo_Type)))
        goto fail;
    PyObject *id = PyLong_FromLongLong(in->id);
    if (!id)
        goto fail;
    PyStructSequence_SetItem(ii, 0, id);
    PyStructSequence_SetItem(ii, 1, threads);
    return ii;
fail:
    Py_XDECREF(ii);
    Py_XDECREF(threads);
    return NULL;
}

static int append_interp(struct unwinder *self, PyObject *result, const struct pys_interp *in,
                         size_t first, int one)
{
    PyObject *ii = new_interp(self, in, first, one);
    if (!ii)
        return -1;
    int rc = PyList_Append(result, ii);
    Py_DECREF(ii);
    return rc;
}

/* Index of the first thread of in with status bit set, or in->nthreads. */
static size_t find_status(const struct pys_interp *in, uint32_t bit)
{
    size_t k = 0;
    while (k < in->nthreads && !(in->threads[k].status & bit))
        k++;
    return k;
}

/*
 * The reference's thread selection over one snapshot:
 *  - all_threads: every interpreter (newest first), every matching thread;
 *  - only_active_thread: the newest interpreter's GIL holder (as the GIL
 *    names it), or [] when nobody holds it;
 *  - default: the newest interpreter's main thread.
 * In the last two, a thread that does not match the mode is passed over for
 * the next one in the list, as _remote_debugging's walk does; an
 * interpreter whose selected threads were all filtered out stays in the list
 * with no threads. An interpreter with no main thread (one that is not
 * running anything) makes the reference fall back to every thread.
 */
static int select_threads(struct unwinder *self, const struct pys_snapshot *snap, PyObject *result)
{
    if (snap->ninterps == 0)
        return 0;
    const struct pys_interp *newest = &snap->interps[0];
    if (self->only_active_thread) {
        /* As the reference: the thread state the GIL names (locked, its
         * last holder), not the threads' own flags, which a hand-over
         * caught half-way may leave all clear. */
        size_t k = 0;
        while (k < newest->nthreads &&
               (newest->gil_holder == 0 || newest->threads[k].tstate != newest->gil_holder))
            k++;
        if (k == newest->nthreads)
            return 0;
        return append_interp(self, result, newest, k, 1);
    }
    if (!self->all_threads) {
        size_t k = find_status(newest, PYS_THREAD_MAIN_THREAD);
        if (k < newest->nthreads)
            return append_interp(self, result, newest, k, 1);
    }
    for (size_t i = 0; i < snap->ninterps; i++) {
        if (append_interp(self, result, &snap->interps[i], 0, 0) < 0)
            return -1;
    }
    return 0;
}

/* The exception for a failed snapshot. */
static void raise_snapshot_error(struct unwinder *self, int rc)
{
    const char *detail = pys_session_last_error(self->session);
    char msg[600];
    snprintf(msg, sizeof msg, "%s", detail && detail[0] ? detail : pys_strerror(rc));
    if (rc == PYS_E_EXITED || rc == PYS_E_NOPROC || process_gone(self->pid)) {
        self->gone = 1;
        raise_gone();
        return;
    }
    switch (rc) {
    case PYS_E_PERM:
        raise_oserror(PyExc_PermissionError, EACCES, msg);
        break;
    case PYS_E_NOMEM:
        PyErr_NoMemory();
        break;
    case PYS_E_BADADDR:
    case PYS_E_IO:
        raise_oserror(PyExc_OSError, EIO, msg);
        break;
    default:
        PyErr_SetString(PyExc_RuntimeError, msg);
        break;
    }
}

static PyObject *unwinder_get_stack_trace(PyObject *op, PyObject *unused)
{
    struct unwinder *self = (struct unwinder *)op;
    const struct pys_snapshot *snap = NULL;
    (void)unused;

    if (check_session(self) < 0)
        return NULL;
    self->samples++;
    if (self->gone) {
        raise_gone();
        return NULL;
    }
    int rc = pys_session_snapshot(self->session, &snap);
    if (rc < 0) {
        raise_snapshot_error(self, rc);
        goto fail;
    }
    PyObject *result = PyList_New(0);
    if (!result)
        return NULL;
    self->thread_error = 0;
    int selected = select_threads(self, snap, result);
    memos_sweep(self);
    if (selected < 0) {
        Py_DECREF(result);
        /* A thread that could not be read may mean the process is going
         * (a stack that was read but torn says nothing of the kind, and
         * the look at /proc would cost more than the sample). */
        int torn = self->thread_error == PYS_E_CORRUPT || self->thread_error == PYS_E_TOODEEP;
        if (!torn && process_gone(self->pid)) {
            PyErr_Clear();
            self->gone = 1;
            raise_gone();
        }
        goto fail;
    }
    return result;
fail:
    if (self->debug) {
        char what[96];
        snprintf(what, sizeof what, "Failed to get the stack trace of process %d", self->pid);
        wrap_debug(what);
    }
    return NULL;
}

static int dict_set_u64(PyObject *d, const char *key, uint64_t v)
{
    PyObject *o = PyLong_FromUnsignedLongLong(v);
    if (!o)
        return -1;
    int rc = PyDict_SetItemString(d, key, o);
    Py_DECREF(o);
    return rc;
}

static int dict_set_rate(PyObject *d, const char *key, uint64_t part, uint64_t whole)
{
    PyObject *o = PyFloat_FromDouble(whole ? 100.0 * (double)part / (double)whole : 0.0);
    if (!o)
        return -1;
    int rc = PyDict_SetItemString(d, key, o);
    Py_DECREF(o);
    return rc;
}

/*
 * The reference's keys, in its order. What libpystrobe counts is mapped;
 * what it has no counterpart for (batches are not counted apart, nor cache
 * invalidations) is 0. Frames read from memory are the library's count while
 * the frame cache is on, else the Python frames this unwinder returned.
 */
static PyObject *unwinder_get_stats(PyObject *op, PyObject *unused)
{
    struct unwinder *self = (struct unwinder *)op;
    (void)unused;
    if (check_session(self) < 0)
        return NULL;
    if (!self->stats) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Statistics collection was not enabled. "
                        "Create RemoteUnwinder with stats=True to collect statistics.");
        return NULL;
    }
    struct pys_stats st;
    pys_session_stats(self->session, &st);
    const struct {
        const char *key;
        uint64_t value;
    } counts[] = {
        {"total_samples", self->samples},
        {"frame_cache_hits", st.frame_cache_hits},
        {"frame_cache_misses", st.frame_cache_misses},
        {"frame_cache_partial_hits", st.frame_cache_partial_hits},
        {"frames_read_from_cache", st.frames_from_cache},
        {"frames_read_from_memory", self->cache_frames ? st.frames_read : self->frames_reported},
        {"memory_reads", st.mem_reads},
        {"memory_bytes_read", st.mem_bytes},
        {"code_object_cache_hits", st.code_hits},
        {"code_object_cache_misses", st.code_misses},
        {"stale_cache_invalidations", 0},
        {"batched_read_attempts", 0},
        {"batched_read_successes", 0},
        {"batched_read_misses", 0},
        {"batched_read_segments_requested", 0},
        {"batched_read_segments_completed", 0},
    };
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        if (dict_set_u64(d, counts[i].key, counts[i].value) < 0)
            goto fail;
    }
    uint64_t hits = st.frame_cache_hits + st.frame_cache_partial_hits;
    const struct {
        const char *key;
        uint64_t part, whole;
    } rates[] = {
        {"frame_cache_hit_rate", hits, hits + st.frame_cache_misses},
        {"code_object_cache_hit_rate", st.code_hits, st.code_hits + st.code_misses},
        {"batched_read_success_rate", 0, 0},
        {"batched_read_segment_completion_rate", 0, 0},
    };
    for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++) {
        if (dict_set_rate(d, rates[i].key, rates[i].part, rates[i].whole) < 0)
            goto fail;
    }
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}

/* A new structseq of type tp holding the n new references in v (stolen,
 * also on failure). */
static PyObject *new_seq(PyTypeObject *tp, PyObject **v, Py_ssize_t n)
{
    PyObject *o = NULL;
    for (Py_ssize_t i = 0; i < n; i++)
        if (!v[i])
            goto fail;
    if (!(o = PyStructSequence_New(tp)))
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++)
        PyStructSequence_SetItem(o, i, v[i]);
    return o;
fail:
    for (Py_ssize_t i = 0; i < n; i++)
        Py_XDECREF(v[i]);
    return NULL;
}

/* CoroInfo(call_stack, task address): the frames of task (NULL: none, as
 * the reference gives a future or a task it did not read). */
static PyObject *new_coro(struct unwinder *self, const struct pys_task *task, uint64_t addr)
{
    PyObject *v[2];
    v[0] = task ? new_frame_list(self, task->frames, task->nframes) : PyList_New(0);
    v[1] = PyLong_FromUnsignedLongLong(addr);
    return new_seq(CoroInfo_Type, v, 2);
}

static int append_new(PyObject *list, PyObject *item)
{
    if (!item)
        return -1;
    int rc = PyList_Append(list, item);
    Py_DECREF(item);
    return rc;
}

/* TaskInfo(task_id, task_name, [CoroInfo of its own stack], [CoroInfo of
 * each awaiter, in the target's order]). */
static PyObject *new_task(struct unwinder *self, const struct pys_task *task)
{
    PyObject *v[4];
    v[0] = PyLong_FromUnsignedLongLong(task->addr);
    v[1] = PyUnicode_DecodeUTF8(task->name, (Py_ssize_t)strlen(task->name), "replace");
    v[2] = PyList_New(0);
    v[3] = PyList_New(0);
    if (v[2] && append_new(v[2], new_coro(self, (task->flags & PYS_TASK_IS_TASK) ? task : NULL,
                                          task->addr)) < 0)
        Py_CLEAR(v[2]);
    for (size_t i = 0; v[3] && i < task->nawaiters; i++) {
        const struct pys_task *w = pys_task_graph_find(self->tasks, task->awaiters[i]);
        if (w && !(w->flags & PYS_TASK_IS_TASK))
            w = NULL;
        if (append_new(v[3], new_coro(self, w, task->awaiters[i])) < 0)
            Py_CLEAR(v[3]);
    }
    return new_seq(TaskInfo_Type, v, 4);
}

/* The task graph in the reference's shape: one AwaitedInfo per list (with
 * running, only those of threads running a task). */
static PyObject *task_graph(struct unwinder *self, int mode, const char *what)
{
    const struct pys_task_graph *g;
    char err[256] = "";
    int rc;
    if (check_session(self) < 0)
        return NULL;
    if (self->gone) {
        raise_gone();
        return NULL;
    }
    if (!self->tasks && (rc = pys_tasks_new(self->session, &self->tasks, err, sizeof err)) < 0) {
        if (rc == PYS_E_NOMEM)
            return PyErr_NoMemory();
        PyErr_Format(PyExc_RuntimeError, "%s: %s", what, err[0] ? err : pys_strerror(rc));
        return NULL;
    }
    /* No <GC> markers: the reference puts none in task stacks. */
    struct pys_tasks_options opt = {mode, TASK_NAME_MAX, TASK_CHAIN_MAX, 0, 0};
    if ((rc = pys_tasks_read(self->tasks, &opt, &g)) < 0) {
        const char *detail = pys_tasks_last_error(self->tasks);
        if (rc == PYS_E_EXITED || process_gone(self->pid)) {
            self->gone = 1;
            raise_gone();
        } else if (rc == PYS_E_NOMEM) {
            PyErr_NoMemory();
        } else if (rc == PYS_E_NOTFOUND) {
            PyErr_SetString(PyExc_RuntimeError, "AsyncioDebug section not available");
        } else {
            PyErr_SetString(PyExc_RuntimeError, detail[0] ? detail : pys_strerror(rc));
        }
        return NULL;
    }
    PyObject *result = PyList_New(0);
    for (size_t i = 0; result && i < g->nlists; i++) {
        const struct pys_task_list *l = &g->lists[i];
        if (mode == PYS_TASKS_RUNNING && (l->error || l->ntasks == 0))
            continue;
        PyObject *v[2];
        v[0] = PyLong_FromUnsignedLongLong(l->native_id);
        v[1] = PyList_New(0);
        for (size_t k = 0; v[1] && k < l->ntasks; k++)
            if (append_new(v[1], new_task(self, &l->tasks[k])) < 0)
                Py_CLEAR(v[1]);
        if (append_new(result, new_seq(AwaitedInfo_Type, v, 2)) < 0)
            Py_CLEAR(result);
    }
    return result;
}

static PyObject *unwinder_get_all_awaited_by(PyObject *op, PyObject *unused)
{
    (void)unused;
    return task_graph((struct unwinder *)op, PYS_TASKS_ALL, "get_all_awaited_by()");
}

static PyObject *unwinder_get_async_stack_trace(PyObject *op, PyObject *unused)
{
    (void)unused;
    return task_graph((struct unwinder *)op, PYS_TASKS_RUNNING, "get_async_stack_trace()");
}

/* pause_threads(): stop every thread of the target (ptrace) until
 * resume_threads(), as _remote_debugging's: True, or False when already
 * paused; a thread that cannot be stopped raises (PermissionError for
 * another tracer). */
static PyObject *unwinder_pause_threads(PyObject *op, PyObject *unused)
{
    struct unwinder *self = (struct unwinder *)op;
    (void)unused;
    if (check_session(self) < 0)
        return NULL;
    if (self->pauser)
        Py_RETURN_FALSE;
    int rc = pys_session_pause(self->session);
    if (rc == PYS_E_INVAL)
        Py_RETURN_FALSE;
    if (rc < 0) {
        raise_snapshot_error(self, rc);
        return NULL;
    }
    self->pauser = gettid();
    Py_RETURN_TRUE;
}

/* resume_threads(): True, or False when not paused. Only the thread that
 * paused can resume: ptrace binds the stopped threads to their tracer, and
 * a detach from any other thread fails, leaving the target stopped. */
static PyObject *unwinder_resume_threads(PyObject *op, PyObject *unused)
{
    struct unwinder *self = (struct unwinder *)op;
    (void)unused;
    if (check_session(self) < 0)
        return NULL;
    if (!self->pauser)
        Py_RETURN_FALSE;
    if (self->pauser != gettid()) {
        PyErr_Format(PyExc_RuntimeError,
                     "resume_threads() must be called from the thread that called "
                     "pause_threads() (thread %d)",
                     (int)self->pauser);
        return NULL;
    }
    self->pauser = 0;
    if (pys_session_resume(self->session) < 0)
        Py_RETURN_FALSE;
    Py_RETURN_TRUE;
}

static PyMethodDef unwinder_methods[] = {
    {"get_stack_trace", unwinder_get_stack_trace, METH_NOARGS,
     "get_stack_trace()\n--\n\n"
     "Stacks of the selected threads: list[InterpreterInfo], newest interpreter\n"
     "first; each thread's frames innermost first. Raises ProcessLookupError\n"
     "once the process has exited, RuntimeError or OSError when one sample\n"
     "could not be read (retry)."},
    {"get_stats", unwinder_get_stats, METH_NOARGS,
     "get_stats()\n--\n\n"
     "Counters of this unwinder (needs stats=True): the keys of\n"
     "_remote_debugging; those pystrobe does not count are 0."},
    {"get_all_awaited_by", unwinder_get_all_awaited_by, METH_NOARGS,
     "get_all_awaited_by()\n--\n\n"
     "Every asyncio task of the target (CPython 3.14+): list[AwaitedInfo], one per\n"
     "thread, then one with thread_id 0 for the interpreter's tasks whose thread\n"
     "is gone. Each TaskInfo holds the task's coroutine stack and the stacks of\n"
     "the tasks awaiting it. RuntimeError for a target before 3.14, or when the\n"
     "graph kept changing while it was read (retry)."},
    {"get_async_stack_trace", unwinder_get_async_stack_trace, METH_NOARGS,
     "get_async_stack_trace()\n--\n\n"
     "For each thread whose event loop is running a task: AwaitedInfo(thread_id,\n"
     "[the running task, whose stack is the thread's own down to its coroutine,\n"
     "then every task awaiting it, transitively]). [] when no task runs."},
    {"pause_threads", unwinder_pause_threads, METH_NOARGS,
     "pause_threads()\n--\n\n"
     "Stop every thread of the target (ptrace) until resume_threads(): stacks\n"
     "read meanwhile are each one moment. True, or False if already paused;\n"
     "PermissionError if a thread cannot be stopped (another tracer)."},
    {"resume_threads", unwinder_resume_threads, METH_NOARGS,
     "resume_threads()\n--\n\n"
     "Let the target's threads run again: True, or False if not paused."},
    {NULL, NULL, 0, NULL},
};

static const char unwinder_doc[] =
    "RemoteUnwinder(pid, *, all_threads=False, only_active_thread=False, mode=0, debug=False,\n"
    "               skip_non_matching_threads=True, native=False, gc=False, opcodes=False,\n"
    "               cache_frames=False, stats=False)\n\n"
    "Attach to a running CPython process and read its threads' stacks from outside,\n"
    "as _remote_debugging.RemoteUnwinder does (docs/python.md). Nothing is written\n"
    "to the target unless cache_frames=True (3.15+ targets: the reference's frame\n"
    "cache protocol). opcodes=True fills FrameInfo.opcode with the byte at each\n"
    "frame's instruction.";

static PyType_Slot unwinder_slots[] = {
    {Py_tp_doc, (void *)unwinder_doc},   {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_init, (void *)unwinder_init}, {Py_tp_dealloc, (void *)unwinder_dealloc},
    {Py_tp_methods, unwinder_methods},   {0, NULL},
};

static PyType_Spec unwinder_spec = {
    "pystrobe.RemoteUnwinder", sizeof(struct unwinder), 0, Py_TPFLAGS_DEFAULT, unwinder_slots,
};

/* --- BinaryReader: CPython 3.15's binary profiles (output/tach.c) ---------- */

/* The reference's _remote_debugging.BinaryReader over pystrobe's reader of
 * the same files: get_info() from the header, stats extension and footer;
 * replay(collector) hands each sample to collector.collect() as the
 * reference does (one thread a call, its InterpreterInfo, ThreadInfo and
 * FrameInfo, timestamps_us). The file is read whole at __init__ and
 * validated by the reader at each replay (untrusted input). */
struct breader {
    PyObject_HEAD uint8_t *data;
    size_t size;
    uint64_t replayed;
};

/* The header's facts (out_tach_info), of a file breader_init accepted. */
static struct out_tach_info breader_info(const struct breader *self)
{
    struct out_tach_info in = {0};
    out_tach_info(self->data, self->size, &in);
    return in;
}

static int breader_init(PyObject *op, PyObject *args, PyObject *kwargs)
{
    struct breader *self = (struct breader *)op;
    static char *kw[] = {"filename", NULL};
    PyObject *path = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&:BinaryReader", kw, PyUnicode_FSConverter,
                                     &path))
        return -1;
    FILE *f = fopen(PyBytes_AsString(path), "rb");
    if (!f) {
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
        Py_DECREF(path);
        return -1;
    }
    uint8_t *data = NULL;
    size_t size = 0, cap = 0;
    for (;;) {
        if (size == cap) {
            size_t ncap = cap ? cap * 2 : 1 << 16;
            uint8_t *p = realloc(data, ncap);
            if (!p) {
                free(data);
                fclose(f);
                Py_DECREF(path);
                PyErr_NoMemory();
                return -1;
            }
            data = p;
            cap = ncap;
        }
        size_t n = fread(data + size, 1, cap - size, f);
        size += n;
        if (n == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(data);
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
        Py_DECREF(path);
        return -1;
    }
    Py_DECREF(path);
    struct out_tach_info in;
    if (out_tach_info(data, size, &in) < 0) {
        unsigned magic = 0;
        for (int i = 0; size >= 4 && i < 4; i++)
            magic |= (unsigned)data[i] << (8 * i);
        PyErr_Format(PyExc_ValueError, "Invalid magic number: 0x%08x", magic);
        free(data);
        return -1;
    }
    free(self->data);
    self->data = data;
    self->size = size;
    return 0;
}

static void breader_dealloc(PyObject *op)
{
    struct breader *self = (struct breader *)op;
    PyTypeObject *tp = Py_TYPE(op);
    free(self->data);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(op);
    Py_DECREF(tp);
}

static int breader_open(struct breader *self)
{
    if (self->data)
        return 0;
    PyErr_SetString(PyExc_ValueError, "the reader is closed");
    return -1;
}

static int dict_set(PyObject *d, const char *k, PyObject *v)
{
    if (!v)
        return -1;
    int rc = PyDict_SetItemString(d, k, v);
    Py_DECREF(v);
    return rc;
}

static PyObject *breader_get_info(PyObject *op, PyObject *unused)
{
    (void)unused;
    struct breader *self = (struct breader *)op;
    if (breader_open(self) < 0)
        return NULL;
    struct out_tach_info in = breader_info(self);
    uint32_t config = in.config;
    PyObject *info = PyDict_New();
    if (!info)
        return NULL;
    if (dict_set(info, "version", PyLong_FromUnsignedLong(in.version)) < 0 ||
        dict_set(info, "python_version",
                 Py_BuildValue("(iii)", in.python[0], in.python[1], in.python[2])) < 0 ||
        dict_set(info, "start_time_us", PyLong_FromUnsignedLongLong(in.start_us)) < 0 ||
        dict_set(info, "sample_interval_us", PyLong_FromUnsignedLongLong(in.interval_us)) < 0 ||
        dict_set(info, "sample_count", PyLong_FromUnsignedLongLong(in.samples)) < 0 ||
        dict_set(info, "thread_count", PyLong_FromUnsignedLong(in.threads)) < 0 ||
        dict_set(info, "string_count", PyLong_FromUnsignedLong(in.strings)) < 0 ||
        dict_set(info, "frame_count", PyLong_FromUnsignedLong(in.frames)) < 0 ||
        dict_set(info, "compression_type", PyLong_FromUnsignedLong(in.compression)) < 0)
        goto fail;
    PyObject *none[4] = {NULL, NULL, NULL, NULL};
    const char *names[4] = {"duration_sec", "sample_rate", "error_rate", "missed_samples"};
    const double vals[4] = {in.duration_sec, in.sample_rate, in.error_rate, in.missed_samples};
    const int stats = in.has_stats;
    const int have[4] = {stats, stats, stats && (in.stats_present & 1),
                         stats && (in.stats_present & 2)};
    for (int i = 0; i < 4; i++) {
        if (have[i]) {
            none[i] = PyFloat_FromDouble(vals[i]);
        } else {
            Py_INCREF(Py_None);
            none[i] = Py_None;
        }
        if (dict_set(info, names[i], none[i]) < 0)
            goto fail;
    }
    PyObject *mode =
        (config & 7) ? PyLong_FromLong((long)(config & 7) - 1) : (Py_INCREF(Py_None), Py_None);
    PyObject *feat = (config & 8) ? PyLong_FromLong((long)((config >> 4) & 0x1f))
                                  : (Py_INCREF(Py_None), Py_None);
    if (dict_set(info, "mode", mode) < 0 || dict_set(info, "capture_features", feat) < 0)
        goto fail;
    return info;
fail:
    Py_DECREF(info);
    return NULL;
}

struct replay_ctx {
    PyObject *collector, *progress, *frames; /* frames: {index in the file: FrameInfo} */
    uint64_t n, total;
};

static PyObject *tach_frame(const struct pys_frame *f)
{
    PyObject *fi = PyStructSequence_New(FrameInfo_Type);
    if (!fi)
        return NULL;
    PyObject *loc, *op;
    PyObject *file = PyUnicode_DecodeUTF8(f->filename, (Py_ssize_t)strlen(f->filename), "replace");
    PyObject *name = PyUnicode_DecodeUTF8(f->qualname, (Py_ssize_t)strlen(f->qualname), "replace");
    if (f->lineno == -1) { /* stored as (-1, 0, -1, 0): no location */
        Py_INCREF(Py_None);
        loc = Py_None;
    } else {
        loc = new_location(f);
    }
    if (f->opcode >= 0) {
        op = PyLong_FromLong(f->opcode);
    } else {
        Py_INCREF(Py_None);
        op = Py_None;
    }
    if (!file || !name || !loc || !op) {
        Py_XDECREF(file);
        Py_XDECREF(name);
        Py_XDECREF(loc);
        Py_XDECREF(op);
        Py_DECREF(fi);
        return NULL;
    }
    PyStructSequence_SetItem(fi, 0, file);
    PyStructSequence_SetItem(fi, 1, loc);
    PyStructSequence_SetItem(fi, 2, name);
    PyStructSequence_SetItem(fi, 3, op);
    return fi;
}

/* One sample (one thread) to collector.collect(); 0, or 1 with an
 * exception set (ends the read). */
static int replay_sample(void *ctx, const struct out_rec_sample *s)
{
    struct replay_ctx *x = ctx;
    PyObject *frames = NULL, *ti = NULL, *threads = NULL, *ii = NULL, *stack = NULL, *ts = NULL,
             *kw = NULL, *r = NULL;
    uint64_t tid = 0;
    uint32_t status = 0;
    size_t n = 0;
    if (s->nthreads) {
        tid = s->threads[0].id;
        status = s->threads[0].status;
        n = s->threads[0].nframes;
    }
    if (!(frames = PyList_New((Py_ssize_t)n)))
        goto fail;
    for (size_t i = 0; i < n; i++) {
        PyObject *fi = tach_frame(&s->threads[0].frames[i]);
        if (!fi)
            goto fail;
        PyList_SetItem(frames, (Py_ssize_t)i, fi);
    }
    PyObject *v[3] = {PyLong_FromUnsignedLongLong(tid), PyLong_FromUnsignedLong(status), frames};
    frames = NULL;
    if (!v[0] || !v[1] || !v[2] || !(ti = PyStructSequence_New(ThreadInfo_Type))) {
        for (int i = 0; i < 3; i++)
            Py_XDECREF(v[i]);
        goto fail;
    }
    for (int i = 0; i < 3; i++)
        PyStructSequence_SetItem(ti, i, v[i]);
    if (!(threads = PyList_New(1)))
        goto fail;
    PyList_SetItem(threads, 0, ti);
    ti = NULL;
    PyObject *iid = PyLong_FromLong(0);
    if (!iid || !(ii = PyStructSequence_New(InterpreterInfo_Type))) {
        Py_XDECREF(iid);
        goto fail;
    }
    PyStructSequence_SetItem(ii, 0, iid);
    PyStructSequence_SetItem(ii, 1, threads);
    threads = NULL;
    if (!(stack = PyList_New(1)))
        goto fail;
    PyList_SetItem(stack, 0, ii);
    ii = NULL;
    if (!(ts = Py_BuildValue("[K]", (unsigned long long)(s->t_ns / 1000))) ||
        !(kw = Py_BuildValue("{sO}", "timestamps_us", ts)))
        goto fail;
    PyObject *meth = PyObject_GetAttrString(x->collector, "collect");
    PyObject *args = meth ? PyTuple_Pack(1, stack) : NULL;
    r = args ? PyObject_Call(meth, args, kw) : NULL;
    Py_XDECREF(meth);
    Py_XDECREF(args);
    if (!r)
        goto fail;
    Py_DECREF(r);
    Py_DECREF(stack);
    Py_DECREF(ts);
    Py_DECREF(kw);
    x->n++;
    if (x->progress && x->progress != Py_None && x->n % 1000 == 0) {
        r = PyObject_CallFunction(x->progress, "KK", (unsigned long long)x->n,
                                  (unsigned long long)x->total);
        if (!r)
            return 1;
        Py_DECREF(r);
    }
    return 0;
fail:
    Py_XDECREF(frames);
    Py_XDECREF(ti);
    Py_XDECREF(threads);
    Py_XDECREF(ii);
    Py_XDECREF(stack);
    Py_XDECREF(ts);
    Py_XDECREF(kw);
    return 1;
}

static PyObject *breader_replay(PyObject *op, PyObject *args, PyObject *kwargs)
{
    struct breader *self = (struct breader *)op;
    static char *kw[] = {"collector", "progress_callback", NULL};
    struct replay_ctx x = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:replay", kw, &x.collector, &x.progress))
        return NULL;
    if (breader_open(self) < 0)
        return NULL;
    x.total = breader_info(self).samples;
    struct out_rec_reader_cb cb = {&x, NULL, NULL, replay_sample, 0, NULL};
    char err[256];
    int rc = out_tach_read(self->data, self->size, &cb, NULL, err, sizeof err);
    if (rc == 1)
        return NULL; /* the collector's exception */
    if (rc == PYS_E_NOMEM)
        return PyErr_NoMemory();
    if (rc < 0) {
        PyErr_SetString(PyExc_ValueError, err);
        return NULL;
    }
    if (x.n != x.total) {
        PyErr_Format(PyExc_ValueError,
                     "Sample count mismatch: header declares %llu samples but replay decoded %llu",
                     (unsigned long long)x.total, (unsigned long long)x.n);
        return NULL;
    }
    self->replayed = x.n;
    if (x.progress && x.progress != Py_None) {
        PyObject *r = PyObject_CallFunction(x.progress, "KK", (unsigned long long)x.n,
                                            (unsigned long long)x.total);
        if (!r)
            return NULL;
        Py_DECREF(r);
    }
    return PyLong_FromUnsignedLongLong(x.n);
}

static PyObject *breader_get_stats(PyObject *op, PyObject *unused)
{
    (void)unused;
    struct breader *self = (struct breader *)op;
    return Py_BuildValue("{sK}", "total_samples", (unsigned long long)self->replayed);
}

static PyObject *breader_close(PyObject *op, PyObject *unused)
{
    (void)unused;
    struct breader *self = (struct breader *)op;
    free(self->data);
    self->data = NULL;
    self->size = 0;
    Py_RETURN_NONE;
}

static PyObject *breader_enter(PyObject *op, PyObject *unused)
{
    (void)unused;
    Py_INCREF(op);
    return op;
}

static PyObject *breader_exit(PyObject *op, PyObject *args)
{
    (void)args;
    return breader_close(op, NULL);
}

static PyObject *breader_sample_count(PyObject *op, void *closure)
{
    (void)closure;
    struct breader *self = (struct breader *)op;
    if (breader_open(self) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(breader_info(self).samples);
}

static PyObject *breader_interval(PyObject *op, void *closure)
{
    (void)closure;
    struct breader *self = (struct breader *)op;
    if (breader_open(self) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(breader_info(self).interval_us);
}

static PyMethodDef breader_methods[] = {
    {"get_info", breader_get_info, METH_NOARGS,
     "get_info()\n--\n\nThe file's metadata: a dict as the reference's."},
    {"replay", (PyCFunction)(void (*)(void))breader_replay, METH_VARARGS | METH_KEYWORDS,
     "replay(collector, progress_callback=None)\n--\n\n"
     "Hand every sample to collector.collect(stack_frames, timestamps_us=[...]);\n"
     "progress_callback(current, total) every 1000 samples and at the end.\n"
     "Returns the number of samples. ValueError for a damaged file."},
    {"get_stats", breader_get_stats, METH_NOARGS,
     "get_stats()\n--\n\nThe samples the last replay decoded."},
    {"close", breader_close, METH_NOARGS, "close()\n--\n\nRelease the file's contents."},
    {"__enter__", breader_enter, METH_NOARGS, NULL},
    {"__exit__", breader_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef breader_getset[] = {
    {"sample_count", breader_sample_count, NULL, "Number of samples in file", NULL},
    {"sample_interval_us", breader_interval, NULL, "Sample interval in microseconds", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot breader_slots[] = {
    {Py_tp_doc, (void *)"BinaryReader(filename)\n--\n\n"
                        "A binary profile of CPython 3.15's profiler (TACH 1), as\n"
                        "_remote_debugging.BinaryReader reads it."},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_init, (void *)breader_init},
    {Py_tp_dealloc, (void *)breader_dealloc},
    {Py_tp_methods, breader_methods},
    {Py_tp_getset, breader_getset},
    {0, NULL},
};

static PyType_Spec breader_spec = {
    "pystrobe.BinaryReader", sizeof(struct breader), 0, Py_TPFLAGS_DEFAULT, breader_slots,
};

static PyTypeObject *BinaryReader_Type;

/* --- BinaryWriter: CPython 3.15's binary profiles (output/tach.c) ---------- */

/* The reference's _remote_debugging.BinaryWriter: write_sample() takes what
 * get_stack_trace() returns (this module's structseqs or the reference's:
 * any sequences with their fields in their order); the file is written at
 * finalize() (or leaving a with block), readable by CPython's reader. */
struct bwriter {
    PyObject_HEAD struct out_tach_writer *w;
    FILE *f;
    struct out_tach_frame *frames;
    PyObject **keep; /* the UTF-8 bytes objects the frames point into */
    size_t cap, nkeep;
    int finalized;
};

static void bwriter_release(struct bwriter *self)
{
    out_tach_writer_free(self->w);
    self->w = NULL;
    if (self->f)
        fclose(self->f);
    self->f = NULL;
    free(self->frames);
    free(self->keep);
    self->frames = NULL;
    self->keep = NULL;
    self->cap = 0;
}

static int bwriter_init(PyObject *op, PyObject *args, PyObject *kwargs)
{
    struct bwriter *self = (struct bwriter *)op;
    static char *kw[] = {"filename",
                         "sample_interval_us",
                         "start_time_us",
                         "compression",
                         "mode",
                         "capture_features",
                         NULL};
    PyObject *path = NULL;
    unsigned long long interval, start;
    int compression = 0, mode = -1, features = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&KK|$iii:BinaryWriter", kw,
                                     PyUnicode_FSConverter, &path, &interval, &start, &compression,
                                     &mode, &features))
        return -1;
    if (compression != 0 && compression != 1) {
        Py_DECREF(path);
        PyErr_SetString(PyExc_ValueError, "compression: 0 (none) or 1 (zstd)");
        return -1;
    }
    bwriter_release(self);
    /* A placeholder header at once, as the reference: a writer that never
     * finalizes leaves a file no reader takes. */
    FILE *f = fopen(PyBytes_AsString(path), "wb");
    static const uint8_t zero[64];
    if (!f || fwrite(zero, 1, sizeof zero, f) != sizeof zero || fflush(f) != 0) {
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
        if (f)
            fclose(f);
        Py_DECREF(path);
        return -1;
    }
    Py_DECREF(path);
    uint8_t py[3] = {3, 15, 0};
    PyObject *vi = PySys_GetObject("version_info"); /* borrowed */
    for (Py_ssize_t i = 0; vi && i < 3; i++) {
        PyObject *x = PySequence_GetItem(vi, i);
        long v = x ? PyLong_AsLong(x) : 0;
        Py_XDECREF(x);
        py[i] = (uint8_t)(v >= 0 && v < 256 ? v : 0);
    }
    PyErr_Clear();
    self->f = f;
    self->w = out_tach_writer_new(f, interval, start, compression, mode, features, py);
    self->finalized = 0;
    if (!self->w) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void bwriter_dealloc(PyObject *op)
{
    struct bwriter *self = (struct bwriter *)op;
    PyTypeObject *tp = Py_TYPE(op);
    bwriter_release(self);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(op);
    Py_DECREF(tp);
}

static int bwriter_ready(struct bwriter *self)
{
    if (self->w && !self->finalized)
        return 0;
    PyErr_SetString(PyExc_ValueError, "the writer is finalized or closed");
    return -1;
}

/* The UTF-8 of str s (kept alive in self->keep until the sample is
 * written). -1 with an exception. */
static int utf8_of(struct bwriter *self, PyObject *s, const char **p, size_t *len)
{
    if (!PyUnicode_Check(s)) {
        PyErr_SetString(PyExc_TypeError, "a frame's filename and funcname must be str");
        return -1;
    }
    PyObject *b = PyUnicode_AsEncodedString(s, "utf-8", "surrogatepass");
    if (!b)
        return -1;
    char *c;
    Py_ssize_t n;
    if (PyBytes_AsStringAndSize(b, &c, &n) < 0) {
        Py_DECREF(b);
        return -1;
    }
    self->keep[self->nkeep++] = b;
    *p = c;
    *len = (size_t)n;
    return 0;
}

static long item_long(PyObject *seq, Py_ssize_t i, long dflt)
{
    PyObject *x = PySequence_GetItem(seq, i);
    if (!x)
        return dflt;
    long v = x == Py_None ? dflt : PyLong_AsLong(x);
    Py_DECREF(x);
    return v;
}

/* One thread (a ThreadInfo-like sequence) of interpreter iid at ts. */
static int write_thread(struct bwriter *self, PyObject *th, uint32_t iid, uint64_t ts)
{
    PyObject *tid = PySequence_GetItem(th, 0), *frames = PySequence_GetItem(th, 2);
    long status = item_long(th, 1, 0);
    int rc = -1;
    if (!tid || !frames || PyErr_Occurred())
        goto out;
    unsigned long long t = PyLong_AsUnsignedLongLong(tid);
    Py_ssize_t n = PySequence_Size(frames);
    if (PyErr_Occurred() || n < 0)
        goto out;
    if ((size_t)n > self->cap) {
        struct out_tach_frame *fv = realloc(self->frames, (size_t)n * sizeof *fv);
        if (fv)
            self->frames = fv;
        PyObject **kv = fv ? realloc(self->keep, 2 * (size_t)n * sizeof *kv) : NULL;
        if (!kv) {
            PyErr_NoMemory();
            goto out;
        }
        self->keep = kv;
        self->cap = (size_t)n;
    }
    self->nkeep = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        struct out_tach_frame *f = &self->frames[i];
        PyObject *fi = PySequence_GetItem(frames, i);
        PyObject *file = fi ? PySequence_GetItem(fi, 0) : NULL;
        PyObject *loc = fi ? PySequence_GetItem(fi, 1) : NULL;
        PyObject *name = fi ? PySequence_GetItem(fi, 2) : NULL;
        int bad = !file || !loc || !name ||
                  utf8_of(self, file, &f->filename, &f->filename_len) < 0 ||
                  utf8_of(self, name, &f->funcname, &f->funcname_len) < 0;
        if (!bad) {
            f->has_location = loc != Py_None;
            f->lineno = f->has_location ? (int32_t)item_long(loc, 0, -1) : -1;
            f->end_lineno = f->has_location ? (int32_t)item_long(loc, 1, -1) : -1;
            f->col = f->has_location ? (int32_t)item_long(loc, 2, -1) : -1;
            f->end_col = f->has_location ? (int32_t)item_long(loc, 3, -1) : -1;
            f->opcode = (int)item_long(fi, 3, -1);
            bad = PyErr_Occurred() != NULL;
        }
        Py_XDECREF(file);
        Py_XDECREF(loc);
        Py_XDECREF(name);
        Py_XDECREF(fi);
        if (bad)
            goto out;
    }
    if (out_tach_write_sample(self->w, t, iid, (uint32_t)status, self->frames, (size_t)n, ts) < 0) {
        PyErr_NoMemory();
        goto out;
    }
    rc = 0;
out:
    for (size_t i = 0; i < self->nkeep; i++)
        Py_DECREF(self->keep[i]);
    self->nkeep = 0;
    Py_XDECREF(tid);
    Py_XDECREF(frames);
    return rc;
}

static PyObject *bwriter_write_sample(PyObject *op, PyObject *args, PyObject *kwargs)
{
    struct bwriter *self = (struct bwriter *)op;
    static char *kw[] = {"stack_frames", "timestamp_us", NULL};
    PyObject *interps;
    unsigned long long ts;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OK:write_sample", kw, &interps, &ts))
        return NULL;
    if (bwriter_ready(self) < 0)
        return NULL;
    Py_ssize_t ni = PySequence_Size(interps);
    if (ni < 0)
        return NULL;
    for (Py_ssize_t i = 0; i < ni; i++) {
        PyObject *ii = PySequence_GetItem(interps, i);
        PyObject *threads = ii ? PySequence_GetItem(ii, 1) : NULL;
        long iid = ii ? item_long(ii, 0, 0) : 0;
        Py_ssize_t nt = threads ? PySequence_Size(threads) : -1;
        int bad = nt < 0 || PyErr_Occurred();
        if (!bad && (iid < 0 || (unsigned long)iid > UINT32_MAX)) {
            PyErr_SetString(PyExc_OverflowError, "interpreter_id does not fit the format");
            bad = 1;
        }
        for (Py_ssize_t k = 0; !bad && k < nt; k++) {
            PyObject *th = PySequence_GetItem(threads, k);
            bad = !th || write_thread(self, th, (uint32_t)iid, ts) < 0;
            Py_XDECREF(th);
        }
        Py_XDECREF(threads);
        Py_XDECREF(ii);
        if (bad)
            return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *bwriter_set_stats(PyObject *op, PyObject *args, PyObject *kwargs)
{
    struct bwriter *self = (struct bwriter *)op;
    static char *kw[] = {"duration_sec", "sample_rate", "error_rate", "missed_samples", NULL};
    double dur, rate, err = 0, missed = 0;
    PyObject *e = Py_None, *m = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "dd|OO:set_stats", kw, &dur, &rate, &e, &m))
        return NULL;
    if (bwriter_ready(self) < 0)
        return NULL;
    if (e != Py_None && (err = PyFloat_AsDouble(e)) == -1.0 && PyErr_Occurred())
        return NULL;
    if (m != Py_None && (missed = PyFloat_AsDouble(m)) == -1.0 && PyErr_Occurred())
        return NULL;
    out_tach_set_stats(self->w, dur, rate, e != Py_None ? &err : NULL,
                       m != Py_None ? &missed : NULL);
    Py_RETURN_NONE;
}

static PyObject *bwriter_finalize(PyObject *op, PyObject *unused)
{
    (void)unused;
    struct bwriter *self = (struct bwriter *)op;
    if (bwriter_ready(self) < 0)
        return NULL;
    int rc = out_tach_finalize(self->w);
    self->finalized = 1;
    int err = rc == PYS_E_IO ? errno : 0;
    if (self->f && fclose(self->f) != 0 && rc == 0) {
        rc = PYS_E_IO;
        err = errno;
    }
    self->f = NULL;
    if (rc == PYS_E_NOMEM)
        return PyErr_NoMemory();
    if (rc < 0) {
        errno = err ? err : EIO;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

static PyObject *bwriter_close(PyObject *op, PyObject *unused)
{
    (void)unused;
    struct bwriter *self = (struct bwriter *)op;
    if (self->f)
        fclose(self->f);
    self->f = NULL;
    self->finalized = 1;
    Py_RETURN_NONE;
}

static PyObject *bwriter_get_stats(PyObject *op, PyObject *unused)
{
    (void)unused;
    struct bwriter *self = (struct bwriter *)op;
    if (!self->w)
        return PyErr_Format(PyExc_ValueError, "the writer is closed");
    const struct out_tach_write_stats *s = out_tach_writer_stats(self->w);
    /* The reference's keys; every record is a full stack here. */
    return Py_BuildValue(
        "{sKsKsKsKsKsKsKsKsKsKsdsK}", "repeat_records", 0ull, "repeat_samples", 0ull,
        "full_records", (unsigned long long)s->samples, "suffix_records", 0ull, "pop_push_records",
        0ull, "total_records", (unsigned long long)s->samples, "total_samples",
        (unsigned long long)s->samples, "total_frames_written", (unsigned long long)s->frames,
        "frames_saved", 0ull, "bytes_written", (unsigned long long)s->bytes,
        "frame_compression_pct", 0.0, "truncated_stacks", (unsigned long long)s->truncated);
}

static PyObject *bwriter_exit(PyObject *op, PyObject *args)
{
    (void)args;
    struct bwriter *self = (struct bwriter *)op;
    if (self->w && !self->finalized)
        return bwriter_finalize(op, NULL);
    Py_RETURN_NONE;
}

static PyObject *bwriter_total(PyObject *op, void *closure)
{
    (void)closure;
    struct bwriter *self = (struct bwriter *)op;
    return PyLong_FromUnsignedLongLong(self->w ? out_tach_writer_stats(self->w)->samples : 0);
}

static PyObject *bwriter_limit(PyObject *op, void *closure)
{
    (void)op;
    (void)closure;
    Py_RETURN_FALSE; /* the format's limits are refused at write_sample */
}

static PyMethodDef bwriter_methods[] = {
    {"write_sample", (PyCFunction)(void (*)(void))bwriter_write_sample,
     METH_VARARGS | METH_KEYWORDS,
     "write_sample(stack_frames, timestamp_us)\n--\n\n"
     "Add a sample: a list of InterpreterInfo (as get_stack_trace() returns)."},
    {"set_stats", (PyCFunction)(void (*)(void))bwriter_set_stats, METH_VARARGS | METH_KEYWORDS,
     "set_stats(duration_sec, sample_rate, error_rate=None, missed_samples=None)\n--\n\n"
     "Store measured profile statistics in the file."},
    {"finalize", bwriter_finalize, METH_NOARGS, "finalize()\n--\n\nWrite the file and close it."},
    {"close", bwriter_close, METH_NOARGS,
     "close()\n--\n\nClose without finalizing (the samples are discarded)."},
    {"get_stats", bwriter_get_stats, METH_NOARGS,
     "get_stats()\n--\n\nEncoding statistics, with the reference's keys."},
    {"__enter__", breader_enter, METH_NOARGS, NULL},
    {"__exit__", bwriter_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef bwriter_getset[] = {
    {"total_samples", bwriter_total, NULL, "Total samples written", NULL},
    {"limit_reached", bwriter_limit, NULL, "A format limit was reached", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot bwriter_slots[] = {
    {Py_tp_doc, (void *)"BinaryWriter(filename, sample_interval_us, start_time_us, *, "
                        "compression=0, mode=-1, capture_features=-1)\n--\n\n"
                        "A binary profile in CPython 3.15's format (TACH 1), as\n"
                        "_remote_debugging.BinaryWriter writes it."},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_init, (void *)bwriter_init},
    {Py_tp_dealloc, (void *)bwriter_dealloc},
    {Py_tp_methods, bwriter_methods},
    {Py_tp_getset, bwriter_getset},
    {0, NULL},
};

static PyType_Spec bwriter_spec = {
    "pystrobe.BinaryWriter", sizeof(struct bwriter), 0, Py_TPFLAGS_DEFAULT, bwriter_slots,
};

static PyTypeObject *BinaryWriter_Type;

static PyObject *mod_zstd_available(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    /* libzstd is linked in: compressed files are read, and written. */
    return PyBool_FromLong(ZSTD_versionNumber() > 0);
}

/* --- module functions ------------------------------------------------------ */

static PyObject *mod_is_python_process(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"pid", NULL};
    int pid;
    (void)module;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "i:is_python_process", kwlist, &pid))
        return NULL;
    pys_session *s = NULL;
    int rc;
    PyThreadState *ts = PyEval_SaveThread();
    rc = pys_session_attach(&s, pid, NULL, NULL, 0);
    pys_session_free(s);
    PyEval_RestoreThread(ts);
    return PyBool_FromLong(rc == 0);
}

static PyObject *mod_get_child_pids(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"pid", "recursive", NULL};
    int pid, recursive = 1;
    (void)module;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "i|$p:get_child_pids", kwlist, &pid, &recursive))
        return NULL;
    if (pid <= 0)
        return PyList_New(0);
    size_t cap = 64;
    int *pids = NULL;
    int n;
    for (;;) {
        int *p = realloc(pids, cap * sizeof *pids);
        if (!p) {
            free(pids);
            return PyErr_NoMemory();
        }
        pids = p;
        PyThreadState *ts = PyEval_SaveThread(); /* reads all of /proc */
        n = pys_child_pids(pid, recursive, pids, cap);
        PyEval_RestoreThread(ts);
        /* A full buffer may have cut the list: ask again with more room. */
        if (n < 0 || (size_t)n < cap || cap >= MAX_CHILDREN)
            break;
        cap *= 2;
    }
    if (n < 0) {
        free(pids);
        if (n == PYS_E_NOMEM)
            return PyErr_NoMemory();
        PyErr_Format(PyExc_OSError, "cannot list the children of process %d: %s", pid,
                     pys_strerror(n));
        return NULL;
    }
    PyObject *list = PyList_New(n);
    for (int i = 0; list && i < n; i++) {
        PyObject *v = PyLong_FromLong(pids[i]);
        if (!v) {
            Py_CLEAR(list);
            break;
        }
        PyList_SetItem(list, i, v);
    }
    free(pids);
    return list;
}

/* --- garbage-collector statistics ------------------------------------------ */

/* get_gc_stats()'s list for session s: GCStatsInfo per entry. */
static PyObject *gc_stats_list(pys_session *s, int all_interps)
{
    size_t cap = PYS_GC_STATS_PER_INTERP * 4, n = 0;
    struct pys_gc_stats *v = NULL;
    int rc;
    for (;;) {
        struct pys_gc_stats *p = realloc(v, cap * sizeof *v);
        if (!p) {
            free(v);
            return PyErr_NoMemory();
        }
        v = p;
        PyThreadState *ts = PyEval_SaveThread();
        rc = pys_session_gc_stats(s, all_interps, v, cap, &n);
        PyEval_RestoreThread(ts);
        /* More interpreters than room: ask again with more. */
        if (rc != PYS_E_NOMEM || cap >= PYS_GC_STATS_PER_INTERP * 256)
            break;
        cap *= 4;
    }
    if (rc < 0) {
        free(v);
        if (rc == PYS_E_EXITED || rc == PYS_E_NOPROC)
            raise_oserror(PyExc_ProcessLookupError, ESRCH, "No such process");
        else
            PyErr_SetString(PyExc_RuntimeError, pys_session_last_error(s));
        return NULL;
    }
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        const struct pys_gc_stats *g = &v[i];
        PyObject *f[10] = {PyLong_FromLong(g->gen),
                           PyLong_FromLongLong(g->iid),
                           PyLong_FromLongLong(g->ts_start),
                           PyLong_FromLongLong(g->ts_stop),
                           PyLong_FromLongLong(g->collections),
                           PyLong_FromLongLong(g->collected),
                           PyLong_FromLongLong(g->uncollectable),
                           PyLong_FromLongLong(g->candidates),
                           PyLong_FromLongLong(g->heap_size),
                           PyFloat_FromDouble(g->duration)};
        PyObject *o = new_seq(GCStatsInfo_Type, f, 10);
        if (!o) {
            Py_CLEAR(list);
            break;
        }
        PyList_SetItem(list, (Py_ssize_t)i, o);
    }
    free(v);
    return list;
}

/* A session on pid for the GC statistics, or NULL with an exception. */
static pys_session *gc_attach(int pid)
{
    pys_session *s = NULL;
    char err[512] = "";
    struct pys_options opt = {0};
    PyThreadState *ts = PyEval_SaveThread();
    int rc = pys_session_attach(&s, pid, &opt, err, sizeof err);
    PyEval_RestoreThread(ts);
    if (rc < 0) {
        raise_attach_error(rc, err);
        return NULL;
    }
    return s;
}

static PyObject *mod_get_gc_stats(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"pid", "all_interpreters", NULL};
    int pid, all = 0;
    (void)module;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "i|$p:get_gc_stats", kwlist, &pid, &all))
        return NULL;
    pys_session *s = gc_attach(pid);
    if (!s)
        return NULL;
    PyObject *r = gc_stats_list(s, all);
    pys_session_free(s);
    return r;
}

struct gcmonitor {
    PyObject ob_base; /* PyObject_HEAD */
    pys_session *session;
};

static int gcmonitor_init(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"pid", NULL};
    struct gcmonitor *self = (struct gcmonitor *)op;
    int pid;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "i:GCMonitor", kwlist, &pid))
        return -1;
    pys_session *s = gc_attach(pid);
    if (!s)
        return -1;
    pys_session_free(self->session);
    self->session = s;
    return 0;
}

static void gcmonitor_dealloc(PyObject *op)
{
    struct gcmonitor *self = (struct gcmonitor *)op;
    PyTypeObject *tp = Py_TYPE(op);
    pys_session_free(self->session);
    self->session = NULL;
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(op);
    Py_DECREF(tp);
}

static PyObject *gcmonitor_get_gc_stats(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"all_interpreters", NULL};
    struct gcmonitor *self = (struct gcmonitor *)op;
    int all = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p:get_gc_stats", kwlist, &all))
        return NULL;
    if (!self->session) {
        PyErr_SetString(PyExc_RuntimeError, "GCMonitor is not initialised");
        return NULL;
    }
    return gc_stats_list(self->session, all);
}

#define GC_STATS_DOC                                                                               \
    "Garbage-collector statistics of the target (CPython 3.15+): a GCStatsInfo for\n"              \
    "every entry of the ring buffers each interpreter keeps per generation (the\n"                 \
    "main interpreter's; every interpreter's with all_interpreters=True), as\n"                    \
    "_remote_debugging gives them. RuntimeError for an older target."

static PyMethodDef gcmonitor_methods[] = {
    {"get_gc_stats", (PyCFunction)(void (*)(void))gcmonitor_get_gc_stats,
     METH_VARARGS | METH_KEYWORDS, "get_gc_stats(all_interpreters=False)\n--\n\n" GC_STATS_DOC},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot gcmonitor_slots[] = {
    {Py_tp_doc, (void *)"GCMonitor(pid): Monitor GC events of a remote Python process."},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_init, (void *)gcmonitor_init},
    {Py_tp_dealloc, (void *)gcmonitor_dealloc},
    {Py_tp_methods, gcmonitor_methods},
    {0, NULL},
};

static PyType_Spec gcmonitor_spec = {
    "pystrobe.GCMonitor", sizeof(struct gcmonitor), 0, Py_TPFLAGS_DEFAULT, gcmonitor_slots,
};

static PyMethodDef module_methods[] = {
    {"is_python_process", (PyCFunction)(void (*)(void))mod_is_python_process,
     METH_VARARGS | METH_KEYWORDS,
     "is_python_process(pid)\n--\n\n"
     "True when pystrobe can attach to process pid (a CPython it supports); False\n"
     "for a missing, non-Python, unsupported or unreadable process. Never raises\n"
     "for the state of the process."},
    {"get_child_pids", (PyCFunction)(void (*)(void))mod_get_child_pids,
     METH_VARARGS | METH_KEYWORDS,
     "get_child_pids(pid, *, recursive=True)\n--\n\n"
     "Descendants of pid (children only with recursive=False), breadth first;\n"
     "[] for an unknown pid. OSError if the process table cannot be read."},
    {"get_gc_stats", (PyCFunction)(void (*)(void))mod_get_gc_stats, METH_VARARGS | METH_KEYWORDS,
     "get_gc_stats(pid, *, all_interpreters=False)\n--\n\n" GC_STATS_DOC},
    {"zstd_available", mod_zstd_available, METH_NOARGS,
     "zstd_available()\n--\n\nTrue: binary profiles may be zstd-compressed."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "pystrobe._pystrobe",
    "C implementation of the pystrobe module (see the package docstring).",
    -1,
    module_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

static int add_type(PyObject *m, const char *name, PyTypeObject *type)
{
    Py_INCREF(type); /* the module's reference; the global keeps its own */
    if (PyModule_AddObject(m, name, (PyObject *)type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__pystrobe(void);

PyMODINIT_FUNC PyInit__pystrobe(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    /* Types are process-wide and created once: importing the module again
     * (another interpreter, a reload) reuses them. */
    if (!LocationInfo_Type) {
        InterpreterInfo_Type = PyStructSequence_NewType(&interpreter_info_desc);
        ThreadInfo_Type = PyStructSequence_NewType(&thread_info_desc);
        FrameInfo_Type = PyStructSequence_NewType(&frame_info_desc);
        LocationInfo_Type = PyStructSequence_NewType(&location_info_desc);
        RemoteUnwinder_Type = (PyTypeObject *)PyType_FromSpec(&unwinder_spec);
        AwaitedInfo_Type = PyStructSequence_NewType(&awaited_info_desc);
        TaskInfo_Type = PyStructSequence_NewType(&task_info_desc);
        CoroInfo_Type = PyStructSequence_NewType(&coro_info_desc);
        GCStatsInfo_Type = PyStructSequence_NewType(&gc_stats_info_desc);
        GCMonitor_Type = (PyTypeObject *)PyType_FromSpec(&gcmonitor_spec);
        BinaryReader_Type = (PyTypeObject *)PyType_FromSpec(&breader_spec);
        BinaryWriter_Type = (PyTypeObject *)PyType_FromSpec(&bwriter_spec);
        if (!InterpreterInfo_Type || !ThreadInfo_Type || !FrameInfo_Type || !LocationInfo_Type ||
            !RemoteUnwinder_Type || !AwaitedInfo_Type || !TaskInfo_Type || !CoroInfo_Type ||
            !GCStatsInfo_Type || !GCMonitor_Type || !BinaryReader_Type || !BinaryWriter_Type) {
            Py_CLEAR(GCStatsInfo_Type);
            Py_CLEAR(GCMonitor_Type);
            Py_CLEAR(BinaryReader_Type);
            Py_CLEAR(BinaryWriter_Type);
            Py_CLEAR(AwaitedInfo_Type);
            Py_CLEAR(TaskInfo_Type);
            Py_CLEAR(CoroInfo_Type);
            Py_CLEAR(InterpreterInfo_Type);
            Py_CLEAR(ThreadInfo_Type);
            Py_CLEAR(FrameInfo_Type);
            Py_CLEAR(LocationInfo_Type);
            Py_CLEAR(RemoteUnwinder_Type);
            goto fail;
        }
    }
    if (add_type(m, "InterpreterInfo", InterpreterInfo_Type) < 0 ||
        add_type(m, "ThreadInfo", ThreadInfo_Type) < 0 ||
        add_type(m, "FrameInfo", FrameInfo_Type) < 0 ||
        add_type(m, "LocationInfo", LocationInfo_Type) < 0 ||
        add_type(m, "RemoteUnwinder", RemoteUnwinder_Type) < 0 ||
        add_type(m, "AwaitedInfo", AwaitedInfo_Type) < 0 ||
        add_type(m, "TaskInfo", TaskInfo_Type) < 0 || add_type(m, "CoroInfo", CoroInfo_Type) < 0 ||
        add_type(m, "GCStatsInfo", GCStatsInfo_Type) < 0 ||
        add_type(m, "GCMonitor", GCMonitor_Type) < 0 ||
        add_type(m, "BinaryReader", BinaryReader_Type) < 0 ||
        add_type(m, "BinaryWriter", BinaryWriter_Type) < 0)
        goto fail;
    const struct {
        const char *name;
        long value;
    } ints[] = {
        {"THREAD_STATUS_HAS_GIL", PYS_THREAD_HAS_GIL},
        {"THREAD_STATUS_ON_CPU", PYS_THREAD_ON_CPU},
        {"THREAD_STATUS_UNKNOWN", PYS_THREAD_UNKNOWN},
        {"THREAD_STATUS_GIL_REQUESTED", PYS_THREAD_GIL_REQUESTED},
        {"THREAD_STATUS_HAS_EXCEPTION", PYS_THREAD_HAS_EXCEPTION},
        {"THREAD_STATUS_MAIN_THREAD", PYS_THREAD_MAIN_THREAD},
        {"PROFILING_MODE_WALL", MODE_WALL},
        {"PROFILING_MODE_CPU", MODE_CPU},
        {"PROFILING_MODE_GIL", MODE_GIL},
        {"PROFILING_MODE_ALL", MODE_ALL},
        {"PROFILING_MODE_EXCEPTION", MODE_EXCEPTION},
        {"PROCESS_VM_READV_SUPPORTED", 1},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        if (PyModule_AddIntConstant(m, ints[i].name, ints[i].value) < 0)
            goto fail;
    }
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
