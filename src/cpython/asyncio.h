/*
 * asyncio: the layouts asyncio publishes for debuggers (CPython 3.14+), and
 * the reads of its objects: tasks, the coroutines they run, the sets of
 * tasks awaiting them, and the per-thread and per-interpreter task lists.
 * Everything read is bounded and checked; nothing here loops over target
 * data without a limit.
 */
#ifndef PYSTROBE_CPYTHON_ASYNCIO_H
#define PYSTROBE_CPYTHON_ASYNCIO_H

#include <stddef.h>
#include <stdint.h>

#include "cpython/cpython.h"

/* Bytes of the _asyncio module's Py_AsyncioModuleDebugOffsets table (13
 * words in 3.14 and 3.15), found in the ELF section ".AsyncioDebug" of the
 * interpreter (3.15) or of the _asyncio extension module (3.14). */
#define CPY_ASYNCIO_TABLE_SIZE 104

struct cpy_asyncio_offsets {
    struct {
        uint64_t size, name, awaited_by, is_task, awaited_by_is_set, coro, node;
    } task;
    struct {
        uint64_t size, tasks_head;
    } interp;
    struct {
        uint64_t size, running_loop, running_task, tasks_head;
    } thread;
    /* gi_frame_state values of the version (PyFrameState): suspended in an
     * await (and 3.15's locked form of it), and cleared. */
    int8_t state_suspended, state_yield_from, state_yield_from_locked, state_cleared;
    /* A frame suspended in `await x` has x this many words below its stack
     * pointer. */
    uint8_t awaited_slot;
};

/*
 * Parse and validate the table copied from the target (len bytes) for a
 * target whose interpreter offsets are o: every size plausible and every
 * field inside its struct, the interpreter's size that of o, and o holding
 * what the reads below need (3.14+). 0, PYS_E_VERSION (the version has no
 * such table or pystrobe does not know its frame states) or PYS_E_CORRUPT;
 * err gets one line saying why.
 */
int cpy_asyncio_parse(const uint8_t *buf, size_t len, const struct cpy_offsets *o,
                      struct cpy_asyncio_offsets *out, char *err, size_t errlen);

/* A task object (or a future: is_task 0) as read. */
struct cpy_task {
    uint64_t addr;
    uint64_t name;       /* the name object (str or int), 0 if none */
    uint64_t coro;       /* 0 if none */
    uint64_t awaited_by; /* a task/future, or a set of them (awaited_by_is_set), or 0 */
    int awaited_by_is_set;
    int is_task;
};

/* Read the task at addr. */
int cpy_task_read(struct mem *m, const struct cpy_asyncio_offsets *ao, uint64_t addr,
                  struct cpy_task *out);

/*
 * A task's name as UTF-8 (allocated, *out): a str cut at max_chars code
 * points, or for an int name N "Task-N" (asyncio names its tasks so).
 * flags: the tp_flags of the name's type (cpy_type_flags). PYS_E_CORRUPT
 * if the object is neither.
 */
int cpy_task_name_read(struct mem *m, const struct cpy_offsets *o, uint64_t name, uint64_t flags,
                       size_t max_chars, char **out);

/* The tp_flags of the type object at type. */
int cpy_type_flags(struct mem *m, const struct cpy_offsets *o, uint64_t type, uint64_t *flags);

/* One coroutine (or generator) object and its frame, as read. */
struct cpy_coro {
    uint64_t addr;
    uint64_t type;              /* its ob_type */
    int8_t state;               /* gi_frame_state */
    int cleared;                /* finished: no frame to show */
    int suspended;              /* not running: its frame stays put */
    struct cpy_raw_frame frame; /* its frame, inside the object */
    /* Suspended in an await: the object it awaits (0 if none), and that
     * object's type. */
    uint64_t awaiting, awaiting_type;
    /* Where the reference to it is (in the frame's stack), and the word there. */
    uint64_t awaiting_at, awaiting_word;
};

/* Read the coroutine at addr. PYS_E_CORRUPT if its frame is not owned by
 * it (not a coroutine or generator object). */
int cpy_coro_read(struct mem *m, const struct cpy_offsets *o, const struct cpy_asyncio_offsets *ao,
                  uint64_t addr, struct cpy_coro *out);

/*
 * The keys of the set at addr, in table order, skipping empty slots and
 * the tombstones deleted keys leave (hash -1), into out[0..max): their
 * number (*n) and, as return value, 0, or PYS_E_CORRUPT for a set whose
 * header is implausible (a table larger than CPY_SET_MAX_SLOTS, more used
 * entries than slots) or which holds more than max keys.
 */
#define CPY_SET_MAX_SLOTS (1u << 16)
int cpy_set_keys(struct mem *m, const struct cpy_offsets *o, uint64_t addr, uint64_t *out,
                 size_t max, size_t *n);

#endif
