/*
 * idle: pys_options.reuse_idle, threads that cannot have moved are not read
 * again (see struct prof_idle in core.h for why this is exact).
 *
 * Before a snapshot, prof_idle_begin reads the interpreter (and its GIL)
 * once on its own and compares the GIL with the one read before the last
 * snapshot. If only the holder (or the old and the new holder) can have run,
 * the snapshot reads those threads and copies the others' results from the
 * last snapshot (prof_idle_copy_thread). Before trusting the last snapshot's
 * thread list, the snapshot checks the links around each thread it reads
 * (prof_idle_links_ok): a holder may have removed a thread state from the
 * list. Every IDLE_FULL_EVERY snapshots, all threads are read anyway.
 */
#include <string.h>

#include "core/core.h"
#include "platform/platform.h"

/* Read every thread at least this often, whatever the GIL says. */
#define IDLE_FULL_EVERY 64
/* A longer used stack than this is left to the walk to read. */
#define IDLE_HINT_STACK_MAX (64 * 1024)

static void swap_mem(struct pys_session *s, int idle)
{
    if (s->mem_idle_in_use == idle)
        return;
    struct mem t = s->mem;
    s->mem = s->mem_idle;
    s->mem_idle = t;
    s->mem_idle_in_use = idle;
}

void prof_idle_keep_results(struct pys_session *s)
{
    struct prof_results t = s->prev;
    s->prev = s->res;
    s->res = t;
}

/* Which threads must be read, from the GIL now (g) and as last read. */
static int decide(struct prof_idle *id, const struct cpy_interp *g)
{
    uint64_t moved = g->gil_switches - id->switches;
    id->nwalk = 0;
    if (moved == 0 && g->gil_last_holder == id->holder) {
        id->walk[id->nwalk++] = g->gil_last_holder;
        return 1;
    }
    if (moved == 1 && g->gil_last_holder != id->holder) {
        /* One hand-over: the old holder ran until it, the new one since. */
        id->walk[id->nwalk++] = id->holder;
        id->walk[id->nwalk++] = g->gil_last_holder;
        return 1;
    }
    return 0;
}

/* The threads to read may not have been read by the snapshots that taught
 * this reader its batch: have it read their thread states, their used data
 * stack and their predecessors' links, as the last snapshot saw them. */
static void hint_walks(struct pys_session *s)
{
    const struct prof_results *p = &s->prev;
    size_t tslen = s->off.thread_readlen;
    for (size_t i = 0; i < p->nthreads; i++) {
        if (!prof_idle_must_read(s, p->threads[i].tstate))
            continue;
        mem_prefetch_hint(&s->mem, p->threads[i].tstate, tslen);
        /* To the end of the page of its top: the stack may have grown a
         * little, and that page is mapped as a whole. */
        const struct mem_span *st = &p->thread_stack[i];
        uint64_t end = st->len ? ((st->addr + st->len - 1) | (MEM_PAGE_SIZE - 1)) + 1 : 0;
        if (st->addr && end > st->addr && end - st->addr <= IDLE_HINT_STACK_MAX)
            mem_prefetch_hint(&s->mem, st->addr, (size_t)(end - st->addr));
        if (i > 0)
            mem_prefetch_hint(&s->mem, p->threads[i - 1].tstate + s->off.thread_state.next, 8);
    }
}

int prof_idle_begin(struct pys_session *s, int tries)
{
    struct prof_idle *id = &s->idle;
    int rc;

    id->active = id->have_gil = 0;
    if (s->opt.reuse_idle && tries == 0 && !id->force_full && id->valid &&
        s->prev.nthreads >= 2 && id->since_full + 1 < IDLE_FULL_EVERY) {
        /* Read the GIL before anything else: what is taken over is what the
         * threads were at this moment. */
        uint64_t iaddr = 0;
        rc = cpy_interp_read_first(&s->mem, &s->off, s->runtime, id->interp, &id->gil, &iaddr);
        if (rc == PYS_E_EXITED)
            return rc;
        id->have_gil = rc == 0 && iaddr == id->interp;
        id->active = id->have_gil && id->gil.next == 0 && id->gil.gil_known &&
                     id->gil.threads_head == id->head && decide(id, &id->gil);
    }
    id->force_full = 0;
    swap_mem(s, id->active);
    if (id->active)
        hint_walks(s);
    return 0;
}

int prof_idle_must_read(const struct pys_session *s, uint64_t tstate)
{
    for (size_t i = 0; i < s->idle.nwalk; i++)
        if (s->idle.walk[i] == tstate)
            return 1;
    return 0;
}

int prof_idle_links_ok(struct pys_session *s, size_t i, const struct cpy_thread *t)
{
    const struct pys_thread *prev = s->prev.threads;
    size_t n = s->prev.nthreads;
    if (t->next != (i + 1 < n ? prev[i + 1].tstate : 0))
        return 0;
    if (i == 0)
        return s->idle.gil.threads_head == t->addr;
    uint64_t next = 0;
    return mem_read_u64(&s->mem, prev[i - 1].tstate + s->off.thread_state.next, &next) == 0 &&
           next == t->addr;
}

int prof_idle_copy_thread(struct pys_session *s, size_t i, size_t ti)
{
    const struct pys_thread *from = &s->prev.threads[i];
    size_t start = s->prev.thread_frame_start[i];
    int rc = util_array_reserve((void **)&s->res.frames, &s->res.frames_cap,
                          s->res.nframes + from->nframes, sizeof *s->res.frames);
    if (rc < 0)
        return rc;
    struct pys_thread *pt = &s->res.threads[ti];
    *pt = *from;
    /* It has not held the GIL since the last look (a 3.15 flag read in the
     * middle of a hand-over may have said so). */
    pt->status &= ~PYS_THREAD_HAS_GIL;
    if (s->opt.cpu_state)
        prof_thread_os_state(s, pt);
    if (from->nframes)
        memcpy(&s->res.frames[s->res.nframes], &s->prev.frames[start],
               from->nframes * sizeof *s->res.frames);
    s->res.thread_frame_start[ti] = s->res.nframes;
    s->res.thread_stack[ti] = s->prev.thread_stack[i];
    s->res.nframes += from->nframes;
    s->res.thread_err[ti][0] = '\0';
    s->idle.reused++;
    return 0;
}

void prof_idle_end(struct pys_session *s, int ok)
{
    struct prof_idle *id = &s->idle;
    int errors = 0;
    for (size_t i = 0; ok && i < s->res.nthreads; i++)
        errors |= s->res.threads[i].error != 0;
    /* Only a whole, clean snapshot of one interpreter can be taken over. */
    id->valid = ok && !errors && s->res.ninterps == 1 && !s->opt.opcodes && s->opt.reuse_idle;
    if (!id->valid)
        return;
    const struct cpy_interp *g = id->have_gil ? &id->gil : &s->res.seen_interps[0];
    id->valid = g->gil_known;
    id->interp = g->addr;
    id->head = g->threads_head;
    id->holder = g->gil_last_holder;
    id->switches = g->gil_switches;
    id->since_full = id->active ? id->since_full + 1 : 0;
}
