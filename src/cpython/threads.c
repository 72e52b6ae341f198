/*
 * threads: interpreters and their thread states: ids, the frame to start a
 * walk from, who holds the GIL, and whether a thread is raising or handling
 * an exception.
 */
#include <stdlib.h>
#include <string.h>

#include <pystrobe/pystrobe.h>

#include "cpython/cpython.h"
#include "util/bytes.h"

/* _PyErr_StackItem chains are as deep as nested generators handling
 * exceptions; beyond this the chain is taken as corrupt. */
#define MAX_EXC_ITEMS 256
#define TSTATE_MAX 65536

int cpy_runtime_first_interp(struct mem *m, const struct cpy_offsets *o, uint64_t runtime_addr,
                             uint64_t *out)
{
    return mem_read_u64(m, runtime_addr + o->runtime_state.interpreters_head, out);
}

/* Add a segment reading width bytes at addr into dst, when the field exists. */
static void want(struct mem_seg *segs, size_t *n, uint64_t base, uint64_t off, void *dst,
                 size_t width)
{
    if (off == CPY_ABSENT)
        return;
    segs[*n].addr = base + off;
    segs[*n].buf = dst;
    segs[*n].len = width;
    (*n)++;
}

/*
 * Everything a sample needs from an interpreter in one batched read: ids and
 * list heads, the main thread, the GIL holder, the collecting frame. The GIL
 * is predicted to be the interpreter's own (3.12+); if ceval.gil points
 * elsewhere (a shared GIL), that one is read in a second call.
 */
int cpy_interp_read(struct mem *m, const struct cpy_offsets *o, uint64_t runtime_addr,
                    uint64_t addr, struct cpy_interp *out)
{
    return cpy_interp_read_first(m, o, runtime_addr, addr, out, NULL);
}

int cpy_interp_read_first(struct mem *m, const struct cpy_offsets *o, uint64_t runtime_addr,
                          uint64_t addr, struct cpy_interp *out, uint64_t *first)
{
    const struct cpy_interp_offsets *is = &o->interpreter_state;
    struct cpy_interp in;
    struct mem_seg segs[16];
    size_t n = 0;
    uint64_t gil = 0, holder = 0, last_holder = 0, switches = 0, main_ident = 0, gc_frame = 0;
    int32_t locked = 0, collecting = 0;
    int rc;

    memset(&in, 0, sizeof in);
    in.addr = addr;
    want(segs, &n, addr, is->id, &in.id, 8);
    want(segs, &n, addr, is->next, &in.next, 8);
    want(segs, &n, addr, is->threads_head, &in.threads_head, 8);
    want(segs, &n, addr, is->threads_main, &in.threads_main, 8);
    want(segs, &n, addr, is->code_object_generation, &in.code_generation, 8);
    if (first)
        want(segs, &n, runtime_addr, o->runtime_state.interpreters_head, first, 8);
    /* Before 3.13 the runtime knows the main thread's pthread id. */
    if (!CPY_HAS(o, interpreter_state, threads_main))
        want(segs, &n, runtime_addr, o->runtime_state.main_thread, &main_ident, 8);
    /* 3.8-3.11: one GIL, and the runtime names the thread state holding it. */
    want(segs, &n, runtime_addr, o->runtime_state.gil_holder, &holder, 8);
    want(segs, &n, runtime_addr, o->runtime_state.gil_last_holder, &last_holder, 8);
    want(segs, &n, runtime_addr, o->runtime_state.gil_switches, &switches, 8);
    int own_gil = CPY_HAS(o, interpreter_state, gil_runtime_state);
    if (own_gil) {
        if (is->gil_runtime_state_locked < is->gil_runtime_state ||
            is->gil_runtime_state_holder < is->gil_runtime_state)
            return PYS_E_CORRUPT;
        /* The main interpreter, which from 3.12 lives inside _PyRuntime,
         * always has its own GIL: its ceval.gil (far from the fields
         * around it) need not be read each sample. */
        int main_interp = CPY_HAS(o, runtime_state, size) && addr >= runtime_addr &&
                          addr - runtime_addr < o->runtime_state.size;
        if (!main_interp)
            want(segs, &n, addr, is->ceval_gil, &gil, 8);
        want(segs, &n, addr, is->gil_runtime_state_locked, &locked, 4);
        want(segs, &n, addr, is->gil_runtime_state_holder, &holder, 8);
        want(segs, &n, addr, is->gil_switches, &switches, 8);
    }
    /* The frame that started a running collection (3.15 publishes it). */
    if (CPY_HAS(o, gc, frame) && CPY_HAS(o, interpreter_state, gc)) {
        want(segs, &n, addr + is->gc, o->gc.collecting, &collecting, 4);
        want(segs, &n, addr + is->gc, o->gc.frame, &gc_frame, 8);
    }
    if ((rc = mem_readv(m, segs, n)) < 0)
        return rc;
    if (own_gil && gil != 0 && gil != addr + is->gil_runtime_state) {
        struct mem_seg gsegs[] = {
            {gil + (is->gil_runtime_state_locked - is->gil_runtime_state), &locked, 4},
            {gil + (is->gil_runtime_state_holder - is->gil_runtime_state), &holder, 8},
            {gil + (is->gil_switches - is->gil_runtime_state), &switches, 8},
        };
        size_t ng = CPY_HAS(o, interpreter_state, gil_switches) ? 3 : 2;
        if (ng == 3 && is->gil_switches < is->gil_runtime_state)
            return PYS_E_CORRUPT;
        if ((rc = mem_readv(m, gsegs, ng)) < 0)
            return rc;
    }
    in.gil_holder = own_gil && !locked ? 0 : holder;
    in.gil_last_holder = own_gil ? holder : last_holder;
    in.gil_switches = switches;
    in.gil_known = own_gil ? CPY_HAS(o, interpreter_state, gil_switches)
                           : CPY_HAS(o, runtime_state, gil_last_holder) &&
                                 CPY_HAS(o, runtime_state, gil_switches);
    in.main_ident = in.id == 0 ? main_ident : 0;
    in.gc_frame = collecting ? gc_frame : 0;
    *out = in;
    return 0;
}

/* Is an exception being handled: the topmost _PyErr_StackItem with a value.
 * The usual item is embedded in the thread state: taken from its copy. */
static int handling_exception(struct mem *m, const struct cpy_offsets *o,
                              const struct cpy_symbols *sym, const struct cpy_thread *t,
                              uint64_t item)
{
    for (int i = 0; item != 0; i++) {
        uint64_t value = 0, prev = 0;
        if (i == MAX_EXC_ITEMS)
            return PYS_E_TOODEEP;
        uint64_t v_at = item + o->err_stackitem.exc_value;
        uint64_t p_at = item + o->err_stackitem.previous_item;
        if (v_at >= t->copy_addr && v_at + 8 <= t->copy_addr + t->copy_len &&
            p_at >= t->copy_addr && p_at + 8 <= t->copy_addr + t->copy_len) {
            memcpy(&value, t->copy + (v_at - t->copy_addr), 8);
            memcpy(&prev, t->copy + (p_at - t->copy_addr), 8);
        } else {
            struct mem_seg segs[] = {{v_at, &value, 8}, {p_at, &prev, 8}};
            int rc = mem_readv(m, segs, 2);
            if (rc < 0)
                return rc;
        }
        if (value != 0 && value != sym->none)
            return 1;
        item = prev;
    }
    return 0;
}

/*
 * Before 3.11 a thread state knows only pthread_self(). With glibc on
 * x86-64, pthread_t is the address of struct pthread, whose kernel thread id
 * is the int at 0x2d0 (glibc 2.28 to 2.43 at least). A value that is not a
 * plausible TID is reported as 0 (unknown) rather than trusted.
 */
#define GLIBC_PTHREAD_TID 0x2d0
#define MAX_TID 4194304 /* the kernel's PID_MAX_LIMIT */

static int glibc_tid(struct mem *m, uint64_t pthread, uint64_t *out)
{
    int32_t tid = 0;
    int rc = pthread ? mem_read(m, pthread + GLIBC_PTHREAD_TID, &tid, sizeof tid) : 0;
    if (rc == PYS_E_EXITED)
        return rc;
    *out = rc == 0 && tid > 0 && tid <= MAX_TID ? (uint64_t)tid : 0;
    return 0;
}

size_t cpy_thread_bufsize(const struct cpy_offsets *o)
{
    return (size_t)o->thread_state.size + (size_t)o->interpreter_frame.size;
}

int cpy_thread_read(struct mem *m, const struct cpy_offsets *o, const struct cpy_symbols *sym,
                    uint64_t addr, uint8_t *tsbuf, struct cpy_thread *out)
{
    const struct cpy_thread_offsets *ts = &o->thread_state;
    struct cpy_thread t;
    int rc;

    if (ts->size > TSTATE_MAX)
        return PYS_E_CORRUPT;
    size_t len = o->thread_readlen;
    if ((rc = mem_read(m, addr, tsbuf, len)) < 0)
        return rc;
    memset(&t, 0, sizeof t);
    t.addr = addr;
    t.copy = tsbuf;
    t.copy_addr = addr;
    t.copy_len = len;
    t.next = util_load_u64(tsbuf + ts->next);
    t.thread_id = util_load_u64(tsbuf + ts->thread_id);
    if (CPY_HAS(o, thread_state, native_thread_id))
        t.native_id = util_load_u64(tsbuf + ts->native_thread_id);
    else if ((rc = glibc_tid(m, t.thread_id, &t.native_id)) < 0)
        return rc;
    if (o->traits.frames == CPY_FRAMES_CFRAME) {
        /* 3.11, 3.12: the current frame is in the innermost _PyCFrame. */
        uint64_t cframe = util_load_u64(tsbuf + ts->cframe);
        if (cframe &&
            (rc = mem_read_u64(m, cframe + o->cframe.current_frame, &t.current_frame)) < 0)
            return rc;
    } else {
        t.current_frame = util_load_u64(tsbuf + ts->current_frame);
    }
    if (CPY_HAS(o, thread_state, datastack_chunk))
        t.datastack_chunk = util_load_u64(tsbuf + ts->datastack_chunk);
    if (CPY_HAS(o, thread_state, datastack_top))
        t.datastack_top = util_load_u64(tsbuf + ts->datastack_top);
    if (CPY_HAS(o, thread_state, base_frame)) {
        t.base_frame = util_load_u64(tsbuf + ts->base_frame);
        t.base_code = sym->none;
    }
    if (CPY_HAS(o, thread_state, last_profiled_frame_seq)) {
        t.last_profiled_frame = util_load_u64(tsbuf + ts->last_profiled_frame);
        t.last_profiled_frame_seq = util_load_u64(tsbuf + ts->last_profiled_frame_seq);
    }
    t.holds_gil = -1;
    if (CPY_HAS(o, thread_state, holds_gil)) {
        int32_t holds;
        memcpy(&holds, tsbuf + ts->holds_gil, 4);
        t.holds_gil = holds != 0;
    }
    if (CPY_HAS(o, thread_state, gil_requested)) {
        int32_t req;
        memcpy(&req, tsbuf + ts->gil_requested, 4);
        t.gil_requested = req != 0;
    }
    uint64_t raising = util_load_u64(tsbuf + ts->current_exception);
    if (raising != 0 && raising != sym->none) {
        t.has_exception = 1;
    } else {
        rc = handling_exception(m, o, sym, &t, util_load_u64(tsbuf + ts->exc_info));
        if (rc < 0)
            return rc;
        t.has_exception = rc;
    }
    *out = t;
    return 0;
}
