/*
 * asyncio: the _asyncio module's debug table (3.14+) and reads of tasks,
 * coroutines, sets and the intrusive task lists. The layout of a task comes
 * from the table the target publishes; that of generic objects (sets, ints,
 * generators, frames) from its _Py_DebugOffsets (offsets.c). Each read here
 * is one object; the task graph and its checks are core/tasks.c's.
 */
#include "cpython/asyncio.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pystrobe/pystrobe.h>

#include "util/bytes.h"
#include "util/errtext.h"

/* Py_TPFLAGS_LONG_SUBCLASS and Py_TPFLAGS_UNICODE_SUBCLASS (object.h, the
 * same in every version). */
#define TPFLAGS_LONG (1ul << 24)
#define TPFLAGS_UNICODE (1ul << 28)

/* What is not in the tables, per version: the PyFrameState values
 * (pycore_frame.h), and where a frame suspended in `await x` (at SEND's
 * YIELD_VALUE) keeps x: this many words below its stack pointer (3.15 keeps
 * one more value above it). */
static const struct {
    uint32_t minor;
    int8_t suspended, yield_from, yield_from_locked, cleared;
    uint8_t awaited_slot;
} FRAME_STATES[] = {
    {14, -2, -1, -1, 4, 1},
    {15, 1, 2, 3, 5, 2},
};

/* Bytes read after a coroutine's frame in the same read (its locals and
 * the bottom of its stack). */
#define CORO_WINDOW 256

/* Largest task object read: TaskObj is 168 bytes in 3.15. */
#define TASK_MAX_SIZE 4096

/* Is the field at off, w bytes wide, inside a struct of size bytes? */
static int inside(uint64_t off, uint64_t w, uint64_t size)
{
    return off <= size && w <= size - off;
}

int cpy_asyncio_parse(const uint8_t *buf, size_t len, const struct cpy_offsets *o,
                      struct cpy_asyncio_offsets *out, char *err, size_t errlen)
{
    struct cpy_asyncio_offsets a;
    uint64_t w[13];
    size_t i;

    for (i = 0; i < sizeof FRAME_STATES / sizeof FRAME_STATES[0]; i++)
        if (FRAME_STATES[i].minor == o->minor)
            break;
    if (i == sizeof FRAME_STATES / sizeof FRAME_STATES[0])
        return util_err_set(
            err, errlen, PYS_E_VERSION,
            "async-aware profiling needs CPython 3.14 or later (the target runs 3.%u)", o->minor);
    if (!CPY_HAS(o, gen_object, gi_iframe) || !CPY_HAS(o, gen_object, gi_frame_state) ||
        !CPY_HAS(o, interpreter_frame, stackpointer) || !CPY_HAS(o, set_object, mask) ||
        !CPY_HAS(o, set_object, table) || !CPY_HAS(o, set_object, used) ||
        !CPY_HAS(o, long_object, lv_tag) || !CPY_HAS(o, long_object, ob_digit) ||
        !CPY_HAS(o, type_object, tp_flags) || !CPY_HAS(o, llist_node, next))
        return util_err_set(err, errlen, PYS_E_VERSION,
                            "the target's debug offsets lack what async-aware profiling reads");
    if (len < sizeof w)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "asyncio debug table: %zu bytes", len);
    memcpy(w, buf, sizeof w);
    a.task.size = w[0];
    a.task.name = w[1];
    a.task.awaited_by = w[2];
    a.task.is_task = w[3];
    a.task.awaited_by_is_set = w[4];
    a.task.coro = w[5];
    a.task.node = w[6];
    a.interp.size = w[7];
    a.interp.tasks_head = w[8];
    a.thread.size = w[9];
    a.thread.running_loop = w[10];
    a.thread.running_task = w[11];
    a.thread.tasks_head = w[12];
    if (a.task.size < 32 || a.task.size > TASK_MAX_SIZE)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "asyncio debug table: task size %llu",
                            (unsigned long long)a.task.size);
    if (a.interp.size != o->interpreter_state.size)
        return util_err_set(err, errlen, PYS_E_CORRUPT,
                            "asyncio debug table: interpreter size %llu, the runtime says %llu",
                            (unsigned long long)a.interp.size,
                            (unsigned long long)o->interpreter_state.size);
    if (a.thread.size < o->thread_state.size || a.thread.size > CPY_MAX_STRUCT_SIZE)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "asyncio debug table: thread size %llu",
                            (unsigned long long)a.thread.size);
    const struct {
        uint64_t off, w, size;
        const char *name;
    } f[] = {
        {a.task.name, 8, a.task.size, "task_name"},
        {a.task.awaited_by, 8, a.task.size, "task_awaited_by"},
        {a.task.is_task, 1, a.task.size, "task_is_task"},
        {a.task.awaited_by_is_set, 1, a.task.size, "task_awaited_by_is_set"},
        {a.task.coro, 8, a.task.size, "task_coro"},
        {a.task.node, 16, a.task.size, "task_node"},
        {a.interp.tasks_head, 16, a.interp.size, "interpreter asyncio_tasks_head"},
        {a.thread.running_loop, 8, a.thread.size, "asyncio_running_loop"},
        {a.thread.running_task, 8, a.thread.size, "asyncio_running_task"},
        {a.thread.tasks_head, 16, a.thread.size, "thread asyncio_tasks_head"},
    };
    for (size_t k = 0; k < sizeof f / sizeof f[0]; k++) {
        if (!inside(f[k].off, f[k].w, f[k].size) || (f[k].w > 1 && f[k].off % 8 != 0))
            return util_err_set(
                err, errlen, PYS_E_CORRUPT,
                "asyncio debug table: %s (%llu) lies outside its struct (%llu bytes)", f[k].name,
                (unsigned long long)f[k].off, (unsigned long long)f[k].size);
    }
    if (!inside(o->llist_node.next, 8, 16))
        return util_err_set(err, errlen, PYS_E_CORRUPT, "debug offsets: llist_node.next");
    a.state_suspended = FRAME_STATES[i].suspended;
    a.state_yield_from = FRAME_STATES[i].yield_from;
    a.state_yield_from_locked = FRAME_STATES[i].yield_from_locked;
    a.state_cleared = FRAME_STATES[i].cleared;
    a.awaited_slot = FRAME_STATES[i].awaited_slot;
    *out = a;
    return 0;
}

int cpy_task_read(struct mem *m, const struct cpy_asyncio_offsets *ao, uint64_t addr,
                  struct cpy_task *out)
{
    uint8_t buf[TASK_MAX_SIZE];
    int rc = mem_read(m, addr, buf, (size_t)ao->task.size);
    if (rc < 0)
        return rc;
    out->addr = addr;
    out->name = util_load_u64(buf + ao->task.name);
    out->coro = util_load_u64(buf + ao->task.coro);
    out->awaited_by = util_load_u64(buf + ao->task.awaited_by);
    out->awaited_by_is_set = buf[ao->task.awaited_by_is_set] != 0;
    out->is_task = buf[ao->task.is_task] != 0;
    return 0;
}

int cpy_type_flags(struct mem *m, const struct cpy_offsets *o, uint64_t type, uint64_t *flags)
{
    return mem_read_u64(m, type + o->type_object.tp_flags, flags);
}

/* The value of a small int object: at most 3 digits of 30 bits, which any
 * counter of tasks fits in. */
static int long_read(struct mem *m, const struct cpy_offsets *o, uint64_t addr, int64_t *out)
{
    uint64_t tag;
    uint32_t digits[3] = {0, 0, 0};
    int rc = mem_read_u64(m, addr + o->long_object.lv_tag, &tag);
    if (rc < 0)
        return rc;
    uint64_t ndigits = tag >> 3, sign = tag & 3;
    if (ndigits > 2 || sign == 3)
        return PYS_E_CORRUPT;
    if (ndigits > 0 && (rc = mem_read(m, addr + o->long_object.ob_digit, digits,
                                      (size_t)ndigits * sizeof digits[0])) < 0)
        return rc;
    int64_t v = (int64_t)(digits[0] & 0x3fffffffu) | ((int64_t)(digits[1] & 0x3fffffffu) << 30);
    *out = sign == 2 ? -v : sign == 1 ? 0 : v;
    return 0;
}

int cpy_task_name_read(struct mem *m, const struct cpy_offsets *o, uint64_t name, uint64_t flags,
                       size_t max_chars, char **out)
{
    int rc;
    if (name == 0)
        return PYS_E_CORRUPT;
    if (flags & TPFLAGS_LONG) {
        int64_t v;
        char tmp[32];
        if ((rc = long_read(m, o, name, &v)) < 0)
            return rc;
        snprintf(tmp, sizeof tmp, "Task-%lld", (long long)v);
        if (!(*out = strdup(tmp)))
            return PYS_E_NOMEM;
        return 0;
    }
    if (!(flags & TPFLAGS_UNICODE))
        return PYS_E_CORRUPT;
    return cpy_unicode_read(m, o, name, max_chars, out);
}

int cpy_coro_read(struct mem *m, const struct cpy_offsets *o, const struct cpy_asyncio_offsets *ao,
                  uint64_t addr, struct cpy_coro *out)
{
    /* The object's head and its frame, which it holds inside, in one read,
     * with the first words of the frame's locals and stack after it, where
     * an awaited object usually is (if they are not mapped, without). */
    uint8_t buf[1024 + CORO_WINDOW];
    uint64_t fo = o->gen_object.gi_iframe;
    size_t len = (size_t)(fo + o->interpreter_frame.size), got = len + CORO_WINDOW;
    int rc;
    if (len > 1024 || o->gen_object.gi_frame_state >= len)
        return PYS_E_CORRUPT;
    if (mem_read(m, addr, buf, got) < 0) {
        got = len;
        if ((rc = mem_read(m, addr, buf, len)) < 0)
            return rc;
    }
    memset(out, 0, sizeof *out);
    out->addr = addr;
    out->type = util_load_u64(buf + o->pyobject.ob_type);
    out->state = (int8_t)buf[o->gen_object.gi_frame_state];
    out->cleared = out->state == ao->state_cleared;
    out->suspended = out->state == ao->state_suspended || out->state == ao->state_yield_from ||
                     out->state == ao->state_yield_from_locked;
    const uint8_t *fr = buf + fo;
    out->frame.addr = addr + fo;
    out->frame.code = util_load_u64(fr + o->interpreter_frame.executable) & ~o->stackref_mask;
    out->frame.instr_ptr = util_load_u64(fr + o->interpreter_frame.instr_ptr);
    out->frame.owner = fr[o->interpreter_frame.owner];
    if (out->cleared)
        return 0;
    if (out->frame.owner != CPY_OWNER_GENERATOR)
        return PYS_E_CORRUPT;
    if (out->state != ao->state_yield_from && out->state != ao->state_yield_from_locked)
        return 0;
    /* Suspended in `await x` (SEND): x is on the frame's evaluation stack,
     * ao->awaited_slot words below its top. */
    uint64_t sp = util_load_u64(fr + o->interpreter_frame.stackpointer) & ~o->stackref_mask;
    uint64_t at = sp - 8u * ao->awaited_slot;
    if (sp < out->frame.addr + o->interpreter_frame.size || sp > out->frame.addr + (1u << 24))
        return sp == 0 ? 0 : PYS_E_CORRUPT;
    uint64_t aw;
    if (at >= addr && at + 8 <= addr + got)
        aw = util_load_u64(buf + (at - addr));
    else if ((rc = mem_read_u64(m, at, &aw)) < 0)
        return rc;
    out->awaiting_at = at;
    out->awaiting_word = aw;
    aw &= ~o->stackref_mask;
    if (aw == 0)
        return 0;
    out->awaiting = aw;
    return mem_read_u64(m, aw + o->pyobject.ob_type, &out->awaiting_type);
}

int cpy_set_keys(struct mem *m, const struct cpy_offsets *o, uint64_t addr, uint64_t *out,
                 size_t max, size_t *n)
{
    uint8_t head[256];
    size_t hlen = (size_t)o->set_object.size;
    int rc;
    if (hlen > sizeof head || hlen < o->set_object.mask + 8)
        return PYS_E_CORRUPT;
    if ((rc = mem_read(m, addr, head, hlen)) < 0)
        return rc;
    int64_t used = (int64_t)util_load_u64(head + o->set_object.used);
    int64_t mask = (int64_t)util_load_u64(head + o->set_object.mask);
    uint64_t table = util_load_u64(head + o->set_object.table);
    if (mask < 0 || mask >= (int64_t)CPY_SET_MAX_SLOTS || ((mask + 1) & mask) != 0 || used < 0 ||
        used > mask + 1)
        return PYS_E_CORRUPT;
    if ((size_t)used > max)
        return PYS_E_CORRUPT;
    /* setentry: key, hash. */
    size_t slots = (size_t)mask + 1;
    uint8_t *tab = malloc(slots * 16);
    if (!tab)
        return PYS_E_NOMEM;
    if ((rc = mem_read(m, table, tab, slots * 16)) < 0)
        goto out;
    size_t k = 0;
    for (size_t i = 0; i < slots && k < (size_t)used; i++) {
        uint64_t key = util_load_u64(tab + 16 * i);
        int64_t hash = (int64_t)util_load_u64(tab + 16 * i + 8);
        if (key == 0 || hash == -1)
            continue; /* empty, or the tombstone of a deleted key */
        out[k++] = key;
    }
    *n = k;
    rc = 0;
out:
    free(tab);
    return rc;
}
