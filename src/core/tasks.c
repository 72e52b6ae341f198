/*
 * tasks: the asyncio task graph of a target (CPython 3.14+), for the
 * async-aware modes and the Python module's get_all_awaited_by() and
 * get_async_stack_trace().
 *
 * One read of the graph walks, per interpreter, each thread's intrusive task
 * list (or, in PYS_TASKS_RUNNING mode, only its running task and what
 * awaits it, transitively), then the interpreter's list of tasks whose
 * thread is gone. Each task gives its name, the chain of coroutines it is
 * suspended in (each awaiting the next, as far as coroutines go) and what
 * awaits it. A running task's frames are the thread's own stack down to
 * its coroutine's frame, which must be on it (with opt.gc, a <GC> marker
 * above the frame that started a running collection).
 *
 * Is it one moment? Every word the walk decided something on (list links,
 * task fields, coroutine states, awaited objects, stack links, the code
 * object generation) is noted with its value, and read again in one batch
 * once the walk is done: a graph whose second copy differs is read again,
 * up to TRIES times, never reported half-old, half-new.
 *
 * Bounds: tasks per graph (max_tasks), frames per task (max_chain: a longer
 * chain keeps its innermost part and a <truncated> marker), awaiters per
 * task (CPY_SET_MAX_SLOTS), interpreters and threads; coroutine chains and
 * awaiter paths are checked for cycles.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pystrobe/pystrobe.h>

#include "core/core.h"
#include "cpython/asyncio.h"
#include "binfmt/elf.h"

#include <unistd.h>

/* Reads of the whole graph before giving up on a target that keeps changing. */
#define TRIES 8
/* The longest coroutine chain walked at all (the part past max_chain is
 * walked only to find the innermost end). */
#define CHAIN_HARD_MAX 65536
/* The deepest path of awaiters followed from a running task. */
#define AWAIT_PATH_MAX 4096
#define INTERP_MAX 256
#define THREAD_MAX 65536

/* A word the walk decided on, and its value then. */
struct chk {
    uint64_t addr;
    uint64_t want;
    uint64_t mask; /* the bits compared (a stack reference's tag bits are not) */
    uint8_t len;   /* 1 or 8 */
};

/* Where a task's frames and awaiters start, while the arrays may move. */
struct task_ix {
    size_t frame0, await0;
};

/*
 * The reads of one pass over the graph go through a cache of whole pages
 * (the objects of a graph cluster on few pages of the heap), emptied at the
 * start of each pass; the check after it reads the target itself.
 */
#define PAGE_SIZE_ 4096u
#define PAGE_SLOTS 256u /* direct-mapped by page number: 1 MiB */

struct page_src {
    struct mem_source base;
    struct mem_source *inner;
    uint64_t pass; /* entries of other passes are empty */
    struct {
        uint64_t page, pass;
    } tag[PAGE_SLOTS];
    uint8_t *data; /* PAGE_SLOTS pages */
};

static int page_read(struct mem_source *src, uint64_t addr, void *buf, size_t len)
{
    struct page_src *ps = (struct page_src *)src;
    uint8_t *out = buf;
    while (len > 0) {
        uint64_t page = addr & ~(uint64_t)(PAGE_SIZE_ - 1);
        size_t off = (size_t)(addr - page), n = PAGE_SIZE_ - off;
        if (n > len)
            n = len;
        size_t slot = (size_t)(page / PAGE_SIZE_) % PAGE_SLOTS;
        uint8_t *p = ps->data + slot * PAGE_SIZE_;
        if (ps->tag[slot].pass != ps->pass || ps->tag[slot].page != page) {
            int rc = ps->inner->ops->read(ps->inner, page, p, PAGE_SIZE_);
            if (rc < 0) {
                ps->tag[slot].pass = 0;
                /* The page is not all there (a mapping's last one, say):
                 * what was asked for may be. */
                return ps->inner->ops->read(ps->inner, addr, out, len);
            }
            ps->tag[slot].page = page;
            ps->tag[slot].pass = ps->pass;
        }
        memcpy(out, p + off, n);
        out += n;
        addr += n;
        len -= n;
    }
    return 0;
}

static int page_readv(struct mem_source *src, const struct mem_seg *segs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int rc = page_read(src, segs[i].addr, segs[i].buf, segs[i].len);
        if (rc < 0)
            return i > 0 ? (int)i : rc;
    }
    return (int)n;
}

static int page_write(struct mem_source *src, uint64_t addr, const void *buf, size_t len)
{
    (void)src;
    (void)addr;
    (void)buf;
    (void)len;
    return PYS_E_PERM; /* the task graph is only read */
}

static uint64_t page_clock(struct mem_source *src)
{
    struct page_src *ps = (struct page_src *)src;
    return ps->inner->ops->clock_ns(ps->inner);
}

static const struct mem_source_ops PAGE_OPS = {page_read, page_readv, page_write, page_clock};

struct pys_tasks {
    pys_session *s;
    struct page_src pages;
    struct mem mem;   /* a pass's reads, through `pages` */
    struct mem fresh; /* the check's, from the target itself */
    struct cpy_asyncio_offsets ao;
    int have_ao;
    char err[256];
    struct pys_tasks_options opt;

    struct cpy_stack stack;
    uint8_t *tsbuf;
    struct cpy_raw_frame *raw;
    size_t raw_max;

    struct pys_task_list *lists;
    size_t nlists, lists_cap;
    size_t *list_task0;
    struct pys_task *tasks;
    struct task_ix *ix;
    size_t ntasks, tasks_cap, ix_cap, list_task0_cap;
    struct pys_frame *frames;
    size_t nframes, frames_cap;
    uint64_t *awaiters;
    size_t nawaiters, awaiters_cap;
    struct util_htab index; /* task ids (index + 1) by address: the first of each */

    struct chk *chk;
    size_t nchk, chk_cap;
    /* Task names read, checked again whole by verify(): a name's pointer
     * alone is not enough, a freed name's memory may hold another's. */
    struct namechk {
        uint64_t addr, flags;
        const char *name; /* interned */
    } *namechk;
    size_t nnamechk, namechk_cap;
    struct mem_seg *segs;
    uint64_t *got;
    size_t segs_cap, got_cap;

    struct cpy_coro *chain;
    size_t chain_cap;
    uint64_t *keys; /* a set's keys: CPY_SET_MAX_SLOTS */
    uint64_t *path; /* awaiters followed from a running task: AWAIT_PATH_MAX */
    /* What the types awaited objects had are (TYPE_*), by type address:
     * a few types, looked up by name once each. */
    struct {
        uint64_t type, flags;
        int kind;
    } types[16];
    size_t ntypes;
    uint64_t looked_ns; /* when find_table last looked for the table */
    uint64_t gen;       /* the main interpreter's code object generation, last seen */
    int gen_valid;
    struct pys_task_graph graph;
};

static int tfail(struct pys_tasks *t, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int tfail(struct pys_tasks *t, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->err, sizeof t->err, fmt, ap);
    va_end(ap);
    return code;
}

const char *pys_tasks_last_error(const pys_tasks *t)
{
    return t->err;
}

int pys_tasks_new(pys_session *s, pys_tasks **out, char *errtext, size_t errlen)
{
    struct pys_tasks *t;
    struct cpy_asyncio_offsets probe;
    uint8_t zero[CPY_ASYNCIO_TABLE_SIZE] = {0};
    char why[200] = "";
    /* The version check alone: a table of zeros fails later, on sizes. */
    int rc = cpy_asyncio_parse(zero, sizeof zero, &s->off, &probe, why, sizeof why);
    if (rc == PYS_E_VERSION) {
        if (errtext && errlen)
            snprintf(errtext, errlen, "%s", why);
        return rc;
    }
    if (!(t = calloc(1, sizeof *t)))
        return PYS_E_NOMEM;
    t->s = s;
    t->pages.base.ops = &PAGE_OPS;
    t->pages.inner = mem_source_of(&s->mem);
    t->pages.pass = 1;
    t->pages.data = malloc((size_t)PAGE_SLOTS * PAGE_SIZE_);
    mem_init(&t->mem, &t->pages.base);
    mem_init(&t->fresh, mem_source_of(&s->mem));
    t->raw_max = s->walker.max;
    t->tsbuf = malloc(cpy_thread_bufsize(&s->off));
    t->raw = malloc(t->raw_max * sizeof *t->raw);
    t->keys = malloc(CPY_SET_MAX_SLOTS * sizeof *t->keys);
    t->path = malloc(AWAIT_PATH_MAX * sizeof *t->path);
    if (!t->tsbuf || !t->raw || !t->keys || !t->path || !t->pages.data) {
        pys_tasks_free(t);
        return PYS_E_NOMEM;
    }
    *out = t;
    return 0;
}

void pys_tasks_free(pys_tasks *t)
{
    if (!t)
        return;
    mem_release(&t->mem);
    mem_release(&t->fresh);
    free(t->pages.data);
    cpy_stack_release(&t->stack);
    util_htab_release(&t->index);
    free(t->tsbuf);
    free(t->raw);
    free(t->lists);
    free(t->list_task0);
    free(t->tasks);
    free(t->ix);
    free(t->frames);
    free(t->awaiters);
    free(t->chk);
    free(t->namechk);
    free(t->segs);
    free(t->got);
    free(t->chain);
    free(t->keys);
    free(t->path);
    free(t);
}

/* --- finding the table ----------------------------------------------------- */

/* The ".AsyncioDebug" section in the target's mapped files: the runtime's
 * image first (3.15 builds _asyncio in), then files named like Python or
 * _asyncio (3.14's extension module). */
static int find_table(struct pys_tasks *t)
{
    struct pys_session *s = t->s;
    struct plat_maps maps = {0};
    int rc;
    if (s->pid <= 0)
        return tfail(t, PYS_E_NOTFOUND, "no process to look for asyncio's debug table in");
    /* Looking reads the process's maps and files: at most ten times a
     * second while the target has not loaded asyncio. */
    uint64_t now = t->pages.inner->ops->clock_ns(t->pages.inner);
    if (t->looked_ns && now - t->looked_ns < 100000000u)
        return PYS_E_NOTFOUND;
    t->looked_ns = now;
    if ((rc = plat_maps_read(s->pid, &maps)) < 0)
        return tfail(t, rc, "cannot read the memory map of process %d", s->pid);
    rc = PYS_E_NOTFOUND;
    for (int pass = 0; pass < 2 && rc == PYS_E_NOTFOUND; pass++) {
        for (size_t i = 0; i < maps.n && rc == PYS_E_NOTFOUND; i++) {
            const struct plat_map *m = &maps.v[i];
            if (!m->path || m->path[0] != '/' || m->offset != 0)
                continue;
            const char *base = strrchr(m->path, '/') + 1;
            int runtime = s->image_path && strcmp(m->path, s->image_path) == 0;
            if (pass == 0 ? !runtime
                          : runtime || (!strstr(base, "python") && !strstr(base, "asyncio")))
                continue;
            int fd = plat_map_open(s->pid, m);
            if (fd < 0)
                continue;
            struct bin_image *img = NULL;
            struct bin_section sec;
            if (bin_image_open(fd, &img) == 0 &&
                bin_image_section(img, ".AsyncioDebug", &sec) == 0 &&
                sec.size >= CPY_ASYNCIO_TABLE_SIZE) {
                uint64_t addr = m->start - bin_image_base_vaddr(img) + sec.addr;
                uint8_t buf[CPY_ASYNCIO_TABLE_SIZE];
                char why[200];
                if ((rc = mem_read(&t->fresh, addr, buf, sizeof buf)) < 0) {
                    tfail(t, rc, "cannot read asyncio's debug table in %s", m->path);
                } else if ((rc = cpy_asyncio_parse(buf, sizeof buf, &s->off, &t->ao, why,
                                                   sizeof why)) < 0) {
                    tfail(t, rc, "%s: %s", m->path, why);
                } else {
                    t->have_ao = 1;
                }
            }
            if (img)
                bin_image_free(img);
            close(fd);
        }
    }
    plat_maps_release(&maps);
    if (rc == PYS_E_NOTFOUND)
        return tfail(t, rc,
                     "AsyncioDebug section not available (has the target imported asyncio?)");
    return rc;
}

/* --- growing arrays and noting words -------------------------------------------- */

static int note_masked(struct pys_tasks *t, uint64_t addr, uint64_t value, uint8_t len,
                       uint64_t mask)
{
    int rc = util_array_reserve((void **)&t->chk, &t->chk_cap, t->nchk + 1, sizeof *t->chk);
    if (rc < 0)
        return rc;
    if (len == 1)
        mask &= 0xff;
    t->chk[t->nchk++] = (struct chk){addr, value & mask, mask, len};
    return 0;
}

static int note(struct pys_tasks *t, uint64_t addr, uint64_t value, uint8_t len)
{
    return note_masked(t, addr, value, len, ~(uint64_t)0);
}

static int read_word(struct pys_tasks *t, uint64_t addr, uint64_t *out)
{
    int rc = mem_read_u64(&t->mem, addr, out);
    return rc < 0 ? rc : note(t, addr, *out, 8);
}

static uint64_t task_hash(const void *ctx, uint32_t id)
{
    const struct pys_tasks *t = ctx;
    return util_hash_u64(t->tasks[id - 1].addr);
}

/* The index of the first task at addr, or -1. */
static long find_task(const struct pys_tasks *t, uint64_t addr)
{
    uint32_t id;
    if (t->index.cap == 0)
        return -1;
    for (size_t j = util_htab_first(&t->index, util_hash_u64(addr)); (id = t->index.slot[j]);
         j = util_htab_next(&t->index, j))
        if (t->tasks[id - 1].addr == addr)
            return (long)id - 1;
    return -1;
}

static struct pys_frame *new_frame(struct pys_tasks *t)
{
    if (util_array_reserve((void **)&t->frames, &t->frames_cap, t->nframes + 1, sizeof *t->frames) <
        0)
        return NULL;
    return &t->frames[t->nframes++];
}

/* Append a marker frame: PYS_FRAME_TRUNCATED or PYS_FRAME_GC. */
static int add_marker(struct pys_tasks *t, int kind)
{
    struct pys_frame *f = new_frame(t);
    if (!f)
        return PYS_E_NOMEM;
    memset(f, 0, sizeof *f);
    f->filename = t->s->marker_file;
    f->qualname = kind == PYS_FRAME_GC ? t->s->marker_gc : t->s->marker_truncated;
    f->firstlineno = f->lineno = f->end_lineno = f->col = f->end_col = f->lasti = f->opcode = -1;
    f->kind = kind;
    return 0;
}

/* Name raw frame rf (a Python frame) into a new pys_frame. */
static int add_frame(struct pys_tasks *t, const struct cpy_raw_frame *rf)
{
    struct pys_session *s = t->s;
    const struct prof_code *pc;
    struct cpy_location loc;
    int32_t lasti;
    int rc = prof_codecache_get(&s->codes, &s->strings, &t->mem, &s->off, &s->sym, rf->code, &pc);
    if (rc < 0)
        return tfail(t, rc, "code object at 0x%llx unreadable: %s", (unsigned long long)rf->code,
                     pys_strerror(rc));
    if ((rc = prof_codecache_locate(&s->codes, &s->off, pc, rf, &lasti, &loc)) < 0)
        return tfail(t, PYS_E_CORRUPT, "frame at 0x%llx: instruction pointer outside %s",
                     (unsigned long long)rf->addr, pc->qualname);
    struct pys_frame *f = new_frame(t);
    if (!f)
        return PYS_E_NOMEM;
    f->filename = pc->filename;
    f->qualname = pc->qualname;
    f->firstlineno = pc->code.firstlineno;
    f->lineno = loc.lineno;
    f->end_lineno = loc.end_lineno;
    f->col = loc.col;
    f->end_col = loc.end_col;
    f->lasti = lasti;
    f->kind = PYS_FRAME_PYTHON;
    f->opcode = -1;
    f->no_location = prof_no_location(&s->opt, &pc->code);
    if (f->no_location)
        f->lineno = f->end_lineno = f->col = f->end_col = -1;
    return 0;
}

/* What an awaited object is, for following a chain through it. */
#define TYPE_OTHER 0 /* a future, an iterator: the chain ends */
#define TYPE_GEN 1   /* a coroutine or async generator: its frame follows */
#define TYPE_ASEND 2 /* an async generator's __anext__() awaitable: its generator follows */

/* The tp_flags and kind (TYPE_*) of the type object at type; either out
 * may be NULL. */
static int type_info(struct pys_tasks *t, uint64_t type, uint64_t *flags, int *kind)
{
    const struct cpy_offsets *o = &t->s->off;
    size_t i;
    for (i = 0; i < t->ntypes && t->types[i].type != type; i++)
        ;
    if (i == t->ntypes) {
        uint64_t name, fl;
        char buf[24];
        int rc = mem_read_u64(&t->mem, type + o->type_object.tp_name, &name);
        if (rc < 0 || (rc = mem_read(&t->mem, name, buf, sizeof buf)) < 0 ||
            (rc = cpy_type_flags(&t->mem, o, type, &fl)) < 0)
            return rc;
        buf[sizeof buf - 1] = '\0';
        /* Plain generators (a @types.coroutine awaited) end a chain, as
         * in CPython's own reader. */
        int k = !strcmp(buf, "coroutine") || !strcmp(buf, "async_generator") ? TYPE_GEN
                : !strcmp(buf, "async_generator_asend")                      ? TYPE_ASEND
                                                                             : TYPE_OTHER;
        /* Types are few and live as long as the program: the first ones
         * seen are remembered (past those, each is read again). */
        if (t->ntypes == sizeof t->types / sizeof t->types[0]) {
            if (flags)
                *flags = fl;
            if (kind)
                *kind = k;
            return 0;
        }
        t->types[i].type = type;
        t->types[i].flags = fl;
        t->types[i].kind = k;
        t->ntypes++;
    }
    if (flags)
        *flags = t->types[i].flags;
    if (kind)
        *kind = t->types[i].kind;
    return 0;
}

/* --- one task ------------------------------------------------------------------ */

/* The coroutine chain from coro, innermost frame first, into t->frames. */
static int add_chain(struct pys_tasks *t, uint64_t coro)
{
    const struct cpy_offsets *o = &t->s->off;
    size_t n = 0;
    /* Brent's cycle check: `mark` is an address met earlier, moved at each
     * power of two. */
    uint64_t mark = 0;
    size_t power = 1, lam = 0;
    int rc;
    while (coro) {
        if (n >= CHAIN_HARD_MAX)
            return tfail(t, PYS_E_TOODEEP, "a coroutine chain longer than %d", CHAIN_HARD_MAX);
        if ((rc = util_array_reserve((void **)&t->chain, &t->chain_cap, n + 1, sizeof *t->chain)) <
            0)
            return rc;
        struct cpy_coro *c = &t->chain[n];
        if ((rc = cpy_coro_read(&t->mem, o, &t->ao, coro, c)) < 0)
            return tfail(t, rc, "coroutine at 0x%llx unreadable: %s", (unsigned long long)coro,
                         pys_strerror(rc));
        if ((rc = note(t, coro + o->gen_object.gi_frame_state, (uint8_t)c->state, 1)) < 0)
            return rc;
        if (c->cleared)
            break;
        /* A suspended frame's position stays put (a running one moves). */
        if (c->suspended && (rc = note(t, c->frame.addr + o->interpreter_frame.instr_ptr,
                                       c->frame.instr_ptr, 8)) < 0)
            return rc;
        n++;
        if (!c->awaiting)
            break;
        int kind;
        if ((rc = type_info(t, c->awaiting_type, NULL, &kind)) < 0)
            return tfail(t, rc, "the type of an awaited object is unreadable");
        if (kind == TYPE_OTHER)
            break;
        if ((rc = note(t, c->awaiting_at, c->awaiting_word, 8)) < 0)
            return rc;
        coro = c->awaiting;
        if (kind == TYPE_ASEND) {
            /* PyAsyncGenASend: the object head, then its generator. */
            uint64_t at = coro + o->pyobject.size;
            if ((rc = read_word(t, at, &coro)) < 0)
                return tfail(t, rc, "an async generator's awaitable is unreadable");
        }
        if (coro == mark)
            return tfail(t, PYS_E_TOODEEP, "a cycle of coroutines awaiting each other");
        if (++lam == power) {
            mark = coro;
            power *= 2;
            lam = 0;
        }
    }
    size_t keep = n, max = t->opt.max_chain;
    if (keep > max)
        keep = max - 1;
    for (size_t i = 0; i < keep; i++)
        if ((rc = add_frame(t, &t->chain[n - 1 - i].frame)) < 0)
            return rc;
    return keep < n ? add_marker(t, PYS_FRAME_TRUNCATED) : 0;
}

/* Has the running task's frame run through frames raw[0..k]? Name them,
 * innermost first, bounded by max_chain; with opt.gc, a <GC> marker above
 * the frame at gc_frame (that started a running collection; 0: none). */
static int add_stack(struct pys_tasks *t, const struct cpy_thread *th, uint64_t task_frame,
                     uint64_t gc_frame, int *found)
{
    const struct cpy_offsets *o = &t->s->off;
    int n = cpy_stack_walk(&t->mem, o, th, &t->stack, t->raw, t->raw_max);
    int rc;
    *found = 0;
    if (n < 0) /* a cycle too: a torn walk can look like one; read again */
        return tfail(t, n == PYS_E_TOODEEP ? PYS_E_CORRUPT : n, "thread stack unreadable: %s",
                     pys_strerror(n));
    size_t k;
    for (k = 0; k < (size_t)n && t->raw[k].addr != task_frame; k++)
        ;
    if (k == (size_t)n)
        return 0;
    *found = 1;
    if ((rc = note(t, th->addr + o->thread_state.current_frame, th->current_frame, 8)) < 0)
        return rc;
    size_t kept = 0;
    for (size_t i = 0; i <= k; i++) {
        const struct cpy_raw_frame *rf = &t->raw[i];
        /* Each frame's code and caller, and a caller's position, as seen. */
        if ((rc = note_masked(t, rf->addr + o->interpreter_frame.executable, rf->code, 8,
                              ~o->stackref_mask)) < 0)
            return rc;
        if (i > 0 &&
            (rc = note(t, rf->addr + o->interpreter_frame.instr_ptr, rf->instr_ptr, 8)) < 0)
            return rc;
        if (rf->shim || rf->code == 0)
            continue;
        if (t->opt.gc && gc_frame && rf->addr == gc_frame && kept + 2 < t->opt.max_chain) {
            if ((rc = add_marker(t, PYS_FRAME_GC)) < 0)
                return rc;
            kept++;
        }
        if (kept + 1 == t->opt.max_chain)
            return add_marker(t, PYS_FRAME_TRUNCATED);
        if ((rc = add_frame(t, rf)) < 0)
            return rc;
        kept++;
    }
    return 0;
}

/* Append the task at addr to the current list. Its frames: the thread's
 * stack down to its coroutine when th is given (its running task; gc_frame
 * as add_stack's), else its coroutine chain. *idx: its index. */
static int add_task(struct pys_tasks *t, uint64_t addr, const struct cpy_thread *th,
                    uint64_t gc_frame, size_t *idx, int *found_frame)
{
    struct pys_session *s = t->s;
    const struct cpy_offsets *o = &s->off;
    const struct cpy_asyncio_offsets *ao = &t->ao;
    struct cpy_task task;
    char *name = NULL;
    int rc;
    if (t->ntasks >= t->opt.max_tasks)
        return tfail(t, PYS_E_TOODEEP, "more than %zu tasks", t->opt.max_tasks);
    if ((rc = util_array_reserve((void **)&t->tasks, &t->tasks_cap, t->ntasks + 1,
                                 sizeof *t->tasks)) < 0 ||
        (rc = util_array_reserve((void **)&t->ix, &t->ix_cap, t->ntasks + 1, sizeof *t->ix)) < 0)
        return rc;
    if ((rc = cpy_task_read(&t->mem, ao, addr, &task)) < 0)
        return tfail(t, rc, "task at 0x%llx unreadable", (unsigned long long)addr);
    if ((rc = note(t, addr + ao->task.name, task.name, 8)) < 0 ||
        (rc = note(t, addr + ao->task.coro, task.coro, 8)) < 0 ||
        (rc = note(t, addr + ao->task.awaited_by, task.awaited_by, 8)) < 0 ||
        (rc = note(t, addr + ao->task.awaited_by_is_set, (uint64_t)task.awaited_by_is_set, 1)) <
            0 ||
        (rc = note(t, addr + ao->task.is_task, (uint64_t)task.is_task, 1)) < 0)
        return rc;
    struct pys_task *pt = &t->tasks[t->ntasks];
    struct task_ix *ix = &t->ix[t->ntasks];
    memset(pt, 0, sizeof *pt);
    pt->addr = addr;
    pt->name = "";
    ix->frame0 = t->nframes;
    ix->await0 = t->nawaiters;
    if (task.is_task) {
        pt->flags |= PYS_TASK_IS_TASK;
        uint64_t type, flags;
        rc = mem_read_u64(&t->mem, task.name + o->pyobject.ob_type, &type);
        if (rc == 0)
            rc = type_info(t, type, &flags, NULL);
        if (rc == 0)
            rc = cpy_task_name_read(&t->mem, o, task.name, flags, t->opt.max_name_chars, &name);
        if (rc < 0)
            return tfail(t, rc, "name of task 0x%llx unreadable", (unsigned long long)addr);
        pt->name = prof_intern_str(&s->strings, name, strlen(name));
        free(name);
        if (!pt->name)
            return PYS_E_NOMEM;
        if ((rc = util_array_reserve((void **)&t->namechk, &t->namechk_cap, t->nnamechk + 1,
                                     sizeof *t->namechk)) < 0)
            return rc;
        t->namechk[t->nnamechk++] = (struct namechk){task.name, flags, pt->name};
        if (th) {
            pt->flags |= PYS_TASK_RUNNING;
            if (!task.coro)
                return tfail(t, PYS_E_CORRUPT, "running task 0x%llx has no coroutine",
                             (unsigned long long)addr);
            rc = add_stack(t, th, task.coro + o->gen_object.gi_iframe, gc_frame, found_frame);
        } else if (task.coro) {
            size_t before = t->nframes;
            rc = add_chain(t, task.coro);
            if (rc == 0 && t->nframes == before)
                pt->flags |= PYS_TASK_DONE;
        }
        if (rc < 0)
            return rc;
    }
    if (task.awaited_by) {
        size_t n = 1;
        if (task.awaited_by_is_set) {
            if ((rc = cpy_set_keys(&t->mem, o, task.awaited_by, t->keys, CPY_SET_MAX_SLOTS, &n)) <
                0)
                return tfail(t, rc, "awaiters of task 0x%llx unreadable", (unsigned long long)addr);
            if ((rc = note(t, task.awaited_by + o->set_object.used, n, 8)) < 0)
                return rc;
        } else {
            t->keys[0] = task.awaited_by;
        }
        if ((rc = util_array_reserve((void **)&t->awaiters, &t->awaiters_cap, t->nawaiters + n,
                               sizeof *t->awaiters)) < 0)
            return rc;
        memcpy(t->awaiters + t->nawaiters, t->keys, n * sizeof *t->keys);
        t->nawaiters += n;
    }
    pt->nframes = t->nframes - ix->frame0;
    pt->nawaiters = t->nawaiters - ix->await0;
    if (find_task(t, addr) < 0) {
        if ((rc = util_htab_reserve(&t->index, 64, 1, (uint32_t)t->ntasks + 1, task_hash, t)) < 0)
            return rc;
        util_htab_set(&t->index, util_htab_free_slot(&t->index, util_hash_u64(addr)),
                      (uint32_t)t->ntasks + 1);
    }
    *idx = t->ntasks++;
    return 0;
}

/* --- lists ---------------------------------------------------------------------- */

static int new_list(struct pys_tasks *t, int64_t interp, uint64_t native_id, uint64_t tstate)
{
    int rc;
    if ((rc = util_array_reserve((void **)&t->lists, &t->lists_cap, t->nlists + 1,
                                 sizeof *t->lists)) < 0 ||
        (rc = util_array_reserve((void **)&t->list_task0, &t->list_task0_cap, t->nlists + 1,
                                 sizeof *t->list_task0)) < 0)
        return rc;
    struct pys_task_list *l = &t->lists[t->nlists];
    memset(l, 0, sizeof *l);
    l->interp_id = interp;
    l->native_id = native_id;
    l->tstate = tstate;
    t->list_task0[t->nlists++] = t->ntasks;
    return 0;
}

/* Every task of the intrusive list whose head is at head. */
static int walk_list(struct pys_tasks *t, uint64_t head)
{
    const struct cpy_offsets *o = &t->s->off;
    uint64_t node = head, next;
    size_t n = 0, idx;
    int rc;
    if ((rc = read_word(t, node + o->llist_node.next, &next)) < 0)
        return rc;
    while (next != head) {
        if (next == 0)
            return tfail(t, PYS_E_CORRUPT, "a task list with a null link");
        if (++n > t->opt.max_tasks)
            return tfail(t, PYS_E_TOODEEP, "a task list of more than %zu tasks", t->opt.max_tasks);
        uint64_t task = next - t->ao.task.node;
        /* A task met twice: the list is cyclic, or was read across a change. */
        if (find_task(t, task) >= 0)
            return tfail(t, PYS_E_CORRUPT, "task 0x%llx twice in the task lists",
                         (unsigned long long)task);
        if ((rc = add_task(t, task, NULL, 0, &idx, NULL)) < 0)
            return rc;
        node = next;
        if ((rc = read_word(t, node + o->llist_node.next, &next)) < 0)
            return rc;
    }
    return 0;
}

/* The running task of thread th, then, depth first, what awaits it. A task
 * awaited along two paths is listed on each (as CPython's own module
 * does); a path that comes back to a task is a cycle and ends there.
 * gc_frame: the interpreter's collecting frame, as add_stack's. */
static int walk_running(struct pys_tasks *t, const struct cpy_thread *th, uint64_t task,
                        uint64_t gc_frame, int *found)
{
    size_t idx, depth = 0;
    int rc;
    /* Each path element: a task's index and how many of its awaiters are done. */
    struct {
        size_t idx, next;
    } stack[64], *st = stack;
    size_t st_cap = sizeof stack / sizeof stack[0];
    void *heap = NULL;

    if ((rc = add_task(t, task, th, gc_frame, &idx, found)) < 0 || !*found)
        return rc;
    t->path[0] = task;
    st[0].idx = idx;
    st[0].next = 0;
    depth = 1;
    while (depth > 0) {
        size_t top = depth - 1;
        const struct task_ix *ix = &t->ix[st[top].idx];
        size_t nawait = t->tasks[st[top].idx].nawaiters;
        if (st[top].next >= nawait) {
            depth--;
            continue;
        }
        uint64_t w = t->awaiters[ix->await0 + st[top].next++];
        int cyclic = 0;
        for (size_t i = 0; i < depth && !cyclic; i++)
            cyclic = t->path[i] == w;
        if (cyclic)
            continue;
        /* Only tasks are followed: what awaits a plain future is not known. */
        struct cpy_task probe;
        if ((rc = cpy_task_read(&t->mem, &t->ao, w, &probe)) < 0)
            goto out;
        if (!probe.is_task)
            continue;
        if (depth >= AWAIT_PATH_MAX) {
            rc = tfail(t, PYS_E_TOODEEP, "a chain of more than %d awaiting tasks", AWAIT_PATH_MAX);
            goto out;
        }
        if ((rc = add_task(t, w, NULL, 0, &idx, NULL)) < 0)
            goto out;
        if (depth == st_cap) {
            void *bigger = realloc(heap, 2 * st_cap * sizeof *st);
            if (!bigger) {
                rc = PYS_E_NOMEM;
                goto out;
            }
            if (!heap)
                memcpy(bigger, stack, sizeof stack);
            heap = bigger;
            st = bigger;
            st_cap *= 2;
        }
        t->path[depth] = w;
        st[depth].idx = idx;
        st[depth].next = 0;
        depth++;
    }
    rc = 0;
out:
    free(heap);
    return rc;
}

/* One read of the whole graph, words noted for the check. */
static int read_graph(struct pys_tasks *t, int *missing)
{
    struct pys_session *s = t->s;
    const struct cpy_offsets *o = &s->off;
    uint64_t iaddr;
    int rc;
    t->nlists = t->ntasks = t->nframes = t->nawaiters = t->nchk = t->nnamechk = 0;
    t->pages.pass++; /* this pass reads the target anew */
    if (t->index.cap)
        memset(t->index.slot, 0, t->index.cap * sizeof *t->index.slot);
    *missing = 0;
    if ((rc = cpy_runtime_first_interp(&t->mem, o, s->runtime, &iaddr)) < 0)
        return rc;
    for (int ni = 0; iaddr != 0; ni++) {
        struct cpy_interp in;
        if (ni >= INTERP_MAX)
            return tfail(t, PYS_E_CORRUPT, "more than %d interpreters", INTERP_MAX);
        if ((rc = cpy_interp_read(&t->mem, o, s->runtime, iaddr, &in)) < 0)
            return rc;
        if (ni == 0 && CPY_HAS(o, interpreter_state, code_object_generation)) {
            /* Code objects may have been freed and their addresses reused. */
            if (t->gen_valid && t->gen != in.code_generation)
                prof_codecache_clear(&s->codes);
            t->gen = in.code_generation;
            t->gen_valid = 1;
            if ((rc = note(t, iaddr + o->interpreter_state.code_object_generation,
                           in.code_generation, 8)) < 0)
                return rc;
        }
        uint64_t ts = in.threads_head;
        for (int nt = 0; ts != 0; nt++) {
            struct cpy_thread th;
            if (nt >= THREAD_MAX)
                return tfail(t, PYS_E_CORRUPT, "more than %d threads", THREAD_MAX);
            if ((rc = cpy_thread_read(&t->mem, o, &s->sym, ts, t->tsbuf, &th)) < 0)
                return rc;
            if ((rc = note(t, ts + o->thread_state.next, th.next, 8)) < 0)
                return rc;
            if (t->opt.mode == PYS_TASKS_ALL) {
                if ((rc = new_list(t, in.id, th.native_id, ts)) < 0 ||
                    (rc = walk_list(t, ts + t->ao.thread.tasks_head)) < 0)
                    return rc;
            } else {
                uint64_t loop, task = 0;
                if ((rc = read_word(t, ts + t->ao.thread.running_loop, &loop)) < 0)
                    return rc;
                if (loop && (rc = read_word(t, ts + t->ao.thread.running_task, &task)) < 0)
                    return rc;
                if (loop && task) {
                    int found = 0;
                    if ((rc = new_list(t, in.id, th.native_id, ts)) < 0)
                        return rc;
                    t->lists[t->nlists - 1].running_task = task;
                    if ((rc = walk_running(t, &th, task, in.gc_frame, &found)) < 0)
                        return rc;
                    if (!found) {
                        /* Switching tasks, or a torn walk: read again. */
                        t->ntasks = t->list_task0[t->nlists - 1];
                        t->lists[t->nlists - 1].error = PYS_E_NOTFOUND;
                        *missing = 1;
                    }
                }
            }
            ts = th.next;
        }
        if (t->opt.mode == PYS_TASKS_ALL) {
            if ((rc = new_list(t, in.id, 0, 0)) < 0 ||
                (rc = walk_list(t, iaddr + t->ao.interp.tasks_head)) < 0)
                return rc;
        }
        iaddr = in.next;
    }
    return 0;
}

/* Read every noted word again, in one batch: 1 if all are as noted. */
/* Whether every task name read still says the same (1), or not (0). */
static int names_held(struct pys_tasks *t)
{
    const struct cpy_offsets *o = &t->s->off;
    for (size_t i = 0; i < t->nnamechk; i++) {
        char *now = NULL;
        int rc = cpy_task_name_read(&t->fresh, o, t->namechk[i].addr, t->namechk[i].flags,
                                    t->opt.max_name_chars, &now);
        if (rc == PYS_E_NOMEM)
            return rc;
        int same = rc == 0 && strcmp(now, t->namechk[i].name) == 0;
        free(now);
        if (!same)
            return 0;
    }
    return 1;
}

static int verify(struct pys_tasks *t)
{
    int rc;
    if (t->nchk == 0)
        return 1;
    if ((rc = util_array_reserve((void **)&t->segs, &t->segs_cap, t->nchk, sizeof *t->segs)) < 0 ||
        (rc = util_array_reserve((void **)&t->got, &t->got_cap, t->nchk, sizeof *t->got)) < 0)
        return rc;
    for (size_t i = 0; i < t->nchk; i++) {
        t->got[i] = 0;
        t->segs[i] = (struct mem_seg){t->chk[i].addr, &t->got[i], t->chk[i].len};
    }
    /* Small pieces scattered over the heap: read as they are, 1024 to a
     * system call (coalesced, they would span megabytes). */
    for (size_t i = 0; i < t->nchk; i += 1024) {
        size_t n = t->nchk - i < 1024 ? t->nchk - i : 1024;
        if ((rc = mem_readv_some(&t->fresh, t->segs + i, n)) < 0)
            return rc;
        if ((size_t)rc < n)
            return 0; /* freed meanwhile */
    }
    for (size_t i = 0; i < t->nchk; i++)
        if ((t->got[i] & t->chk[i].mask) != t->chk[i].want)
            return 0;
    return names_held(t);
}

/* Point each list and task at its part of the arrays, now that they stay. */
static void settle(struct pys_tasks *t)
{
    for (size_t i = 0; i < t->ntasks; i++) {
        t->tasks[i].frames = t->tasks[i].nframes ? t->frames + t->ix[i].frame0 : NULL;
        t->tasks[i].awaiters = t->tasks[i].nawaiters ? t->awaiters + t->ix[i].await0 : NULL;
    }
    for (size_t i = 0; i < t->nlists; i++) {
        size_t end = i + 1 < t->nlists ? t->list_task0[i + 1] : t->ntasks;
        t->lists[i].tasks = t->tasks + t->list_task0[i];
        t->lists[i].ntasks = end - t->list_task0[i];
    }
    /* A task that some task of the graph awaits is that task's child. */
    for (size_t i = 0; i < t->ntasks; i++) {
        for (size_t k = 0; k < t->tasks[i].nawaiters; k++) {
            long w = find_task(t, t->tasks[i].awaiters[k]);
            if (w >= 0)
                t->tasks[w].flags |= PYS_TASK_AWAITING;
        }
    }
    t->graph.lists = t->lists;
    t->graph.nlists = t->nlists;
}

int pys_tasks_read(pys_tasks *t, const struct pys_tasks_options *opt,
                   const struct pys_task_graph **out)
{
    int rc = 0, missing = 0, tries;
    t->err[0] = '\0';
    t->opt = *opt;
    if (t->opt.mode != PYS_TASKS_ALL && t->opt.mode != PYS_TASKS_RUNNING)
        return tfail(t, PYS_E_INVAL, "unknown task graph mode %d", t->opt.mode);
    if (!t->opt.max_name_chars)
        t->opt.max_name_chars = PYS_TASK_NAME_DEFAULT;
    if (!t->opt.max_chain)
        t->opt.max_chain = PYS_TASK_CHAIN_DEFAULT;
    if (t->opt.max_chain < 2)
        t->opt.max_chain = 2;
    if (!t->opt.max_tasks)
        t->opt.max_tasks = PYS_TASK_MAX_DEFAULT;
    if (!t->have_ao && (rc = find_table(t)) < 0)
        return rc;
    for (tries = 1;; tries++) {
        rc = read_graph(t, &missing);
        if (rc == PYS_E_EXITED || rc == PYS_E_NOMEM || rc == PYS_E_PERM)
            return tfail(t, rc, "%s", pys_strerror(rc));
        if (rc == PYS_E_TOODEEP)
            return rc;
        if (rc == 0) {
            int same = verify(t);

            if (same < 0)
                return tfail(t, same, "%s", pys_strerror(same));
            /* Held still; a running task whose frame was not on its thread's
             * stack every time is reported as such (its list's error). */
            if (same == 1 && (!missing || tries >= TRIES))
                break;
            if (same == 0)
                tfail(t, PYS_E_CORRUPT, "the task graph changed while it was read, %d times",
                      TRIES);
        }
        /* Otherwise a link into freed memory, a half-written object, a
         * second copy that differs: read again. */
        if (tries >= TRIES)
            return PYS_E_CORRUPT;
    }
    t->err[0] = '\0';
    settle(t);
    *out = &t->graph;
    return 0;
}

const struct pys_task *pys_task_graph_find(const pys_tasks *t, uint64_t addr)
{
    long i = find_task(t, addr);
    return i < 0 ? NULL : &t->tasks[i];
}

size_t pys_task_stack(const pys_tasks *t, const struct pys_task *task, struct pys_frame *out,
                      size_t max)
{
    size_t n = 0;
    /* Each step names one more task; a chain longer than the graph comes
     * back to a task already named (a cycle). */
    for (size_t steps = 0; task && steps <= t->ntasks && n < max; steps++) {
        for (size_t i = 0; i < task->nframes && n < max; i++)
            out[n++] = task->frames[i];
        if (n < max) {
            struct pys_frame *f = &out[n++];
            memset(f, 0, sizeof *f);
            f->filename = PYS_TASK_FRAME_FILENAME;
            f->qualname = task->name;
            f->col = f->end_col = f->lasti = f->opcode = -1;
            f->kind = PYS_FRAME_PYTHON;
        }
        const struct pys_task *parent = NULL;
        for (size_t k = 0; k < task->nawaiters && !parent; k++) {
            parent = pys_task_graph_find(t, task->awaiters[k]);
            if (parent && !(parent->flags & PYS_TASK_IS_TASK))
                parent = NULL;
        }
        task = parent;
    }
    if (task && n == max && max > 0) {
        /* Cut: the outermost part is left out. */
        struct pys_frame *f = &out[max - 1];
        memset(f, 0, sizeof *f);
        f->filename = t->s->marker_file;
        f->qualname = t->s->marker_truncated;
        f->firstlineno = f->lineno = f->end_lineno = f->col = f->end_col = f->lasti = f->opcode =
            -1;
        f->kind = PYS_FRAME_TRUNCATED;
    }
    return n;
}
