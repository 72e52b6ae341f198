/*
 * native: pys_options.native_stacks. After a snapshot taken while the
 * target is paused, or of a core file, each thread's native stack
 * (platform/unwind.c) is
 * merged with its Python frames as py-spy merges them: every frame of the
 * interpreter's evaluation loop (_PyEval_EvalFrameDefault) is replaced by
 * the Python frames it runs, the interpreter's other internal frames are
 * left out, and the C frames of everything else (extensions, libc, libffi)
 * stay where they are, named by their symbols.
 *
 * Which Python frames one evaluation-loop call runs: before 3.11 one frame
 * each; from 3.11 the frames between two places where C code called into
 * Python, which the walk marks (<native> markers: 3.11's entry frames,
 * 3.12+'s shim frames).
 *
 * Which native frames are the evaluation loop: those whose symbol says so,
 * and, from 3.12, those whose stack holds a shim frame (the loop keeps its
 * entry frame on its own C stack): a stripped interpreter (Debian's static
 * builds have no symbol for the loop's cold part) is merged all the same.
 *
 * Symbols are looked up once per address: a direct-mapped cache of
 * interned names, so a steady state allocates nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pystrobe/pystrobe.h>

#include "core/core.h"

/* Native frames kept of one thread's stack: deeper ones are cut (the
 * remaining Python frames still follow). */
#define NATIVE_MAX 1024
/* Symbol cache entries (a power of two). */
#define SYM_CACHE 4096

enum sym_class { SYM_EMPTY, SYM_EVAL, SYM_INTERNAL, SYM_OTHER };

struct sym_entry {
    uint64_t pc;
    const char *name, *file; /* interned */
    int32_t line;
    uint8_t cls;
};

struct prof_native {
    struct plat_unwinder *unw;
    int unw_failed; /* the unwinder could not be made: err says why */
    char err[160];
    uint64_t pcs[NATIVE_MAX], sps[NATIVE_MAX];
    /* The shim frames the snapshot's walks met: at, the index in
     * s->res.frames the next frame took then (which thread's they are). */
    struct shim {
        size_t at;
        uint64_t addr;
    } * shims;
    size_t nshims, shims_cap;
    struct sym_entry cache[SYM_CACHE];
    struct pys_frame *frames; /* the merged stacks of the snapshot */
    size_t nframes, cap;
    size_t *origin; /* per merged frame: its index in s->res.frames, SIZE_MAX if native */
    size_t origin_cap;
    size_t *start; /* per thread: its first frame in frames */
    size_t start_cap;
    uint64_t refreshed_snap; /* the snapshot whose miss last refreshed the modules */
};

#ifdef PYS_NO_NATIVE_STACKS
/* A build without libdw (the Python module): no native stacks. */
int plat_unwinder_new(pid_t pid, struct plat_unwinder **out)
{
    (void)pid;
    (void)out;
    return PYS_E_INVAL;
}
int plat_unwinder_new_core(const char *core_path, plat_path_opener open_path, void *ctx,
                           struct plat_unwinder **out, char *err, size_t errlen)
{
    (void)core_path, (void)open_path, (void)ctx, (void)out;
    snprintf(err, errlen, "not built with native stacks");
    return PYS_E_INVAL;
}
void plat_unwinder_free(struct plat_unwinder *u)
{
    (void)u;
}
const char *plat_unwinder_error(const struct plat_unwinder *u)
{
    (void)u;
    return "not built with native stacks";
}
int plat_unwinder_refresh(struct plat_unwinder *u)
{
    (void)u;
    return PYS_E_INVAL;
}
int plat_unwind_thread(struct plat_unwinder *u, pid_t tid, uint64_t *pcs, uint64_t *sps, size_t max,
                       size_t *n)
{
    (void)u, (void)tid, (void)pcs, (void)sps, (void)max, (void)n;
    return PYS_E_INVAL;
}
int plat_unwind_symbol(struct plat_unwinder *u, uint64_t pc, struct plat_symbol *out)
{
    (void)u, (void)pc, (void)out;
    return PYS_E_NOTFOUND;
}
#endif

struct prof_native *prof_native_new(void)
{
    return calloc(1, sizeof(struct prof_native));
}

void prof_native_free(struct prof_native *n)
{
    if (!n)
        return;
    plat_unwinder_free(n->unw);
    free(n->frames);
    free(n->origin);
    free(n->start);
    free(n->shims);
    free(n);
}

int prof_native_note_shim(struct pys_session *s, uint64_t addr)
{
    struct prof_native *n = s->native;
    /* Those of a walk that failed (its frames dropped) go too. */
    while (n->nshims > 0 && n->shims[n->nshims - 1].at > s->res.nframes)
        n->nshims--;
    int rc = util_array_reserve((void **)&n->shims, &n->shims_cap, n->nshims + 1, sizeof *n->shims);
    if (rc == 0)
        n->shims[n->nshims++] = (struct shim){s->res.nframes, addr};
    return rc;
}

void prof_native_begin(struct pys_session *s)
{
    if (s->native)
        s->native->nshims = 0;
}

/* Does native frame k's own stack, [sps[k], sps[k + 1]), hold one of the
 * shim frames shims[from, to)? */
static int holds_shim(const struct prof_native *n, size_t k, size_t npcs, size_t from, size_t to)
{
    if (k + 1 >= npcs || n->sps[k] == 0 || n->sps[k + 1] <= n->sps[k])
        return 0;
    for (size_t i = from; i < to; i++)
        if (n->shims[i].addr >= n->sps[k] && n->shims[i].addr < n->sps[k + 1])
            return 1;
    return 0;
}

static int is_eval_loop(const char *name)
{
    return name && strncmp(name, "_PyEval_EvalFrameDefault", 24) == 0;
}

/* The interpreter's own code: the image holding the runtime, or any
 * libpython (an executable linked with one). */
static int is_interpreter(const struct pys_session *s, const char *module)
{
    if (!module)
        return 0;
    if (s->image_path && strcmp(module, s->image_path) == 0)
        return 1;
    const char *base = strrchr(module, '/');
    base = base ? base + 1 : module;
    return strncmp(base, "libpython", 9) == 0;
}

/* What pc is, from the cache or looked up (and cached). NULL: no memory. */
static const struct sym_entry *lookup(struct pys_session *s, uint64_t pc)
{
    struct prof_native *n = s->native;
    struct sym_entry *e = &n->cache[(pc ^ (pc >> 12)) & (SYM_CACHE - 1)];
    if (e->cls != SYM_EMPTY && e->pc == pc)
        return e;
    struct plat_symbol sym;
    int rc = plat_unwind_symbol(n->unw, pc, &sym);
    if (rc == PYS_E_NOTFOUND && n->refreshed_snap != s->snapshots) {
        /* A module mapped since the modules were read: read them again,
         * once per snapshot at most. */
        n->refreshed_snap = s->snapshots;
        if (plat_unwinder_refresh(n->unw) == 0)
            rc = plat_unwind_symbol(n->unw, pc, &sym);
    }
    char buf[64];
    const char *name = NULL, *file = NULL;
    if (rc == 0 && sym.name) {
        /* "memcpy@@GLIBC_2.14": the symbol version is not the name. */
        name = prof_intern_str(&s->strings, sym.name, strcspn(sym.name, "@"));
    } else {
        int len = snprintf(buf, sizeof buf, "0x%llx",
                           (unsigned long long)(rc == 0 ? sym.module_offset : pc));
        name = prof_intern_str(&s->strings, buf, (size_t)len);
    }
    const char *mod = rc == 0 && sym.module ? sym.module : "[unknown]";
    /* A core's modules are named by soname: the file as its maps named it. */
    const char *mapped = rc == 0 && s->core ? prof_core_path_at(s->core, pc) : NULL;
    if (mapped)
        mod = mapped;
    file = prof_intern_str(&s->strings, mod, strlen(mod));
    if (!name || !file)
        return NULL;
    e->pc = pc;
    e->name = name;
    e->file = file;
    e->line = rc == 0 ? sym.line : -1;
    e->cls = is_eval_loop(sym.name) && rc == 0   ? SYM_EVAL
             : rc == 0 && is_interpreter(s, mod) ? SYM_INTERNAL
                                                 : SYM_OTHER;
    return e;
}

/* Append f to the merge; Python frames (in s->res.frames) keep where they
 * came from, for pys_session_frame_locals. */
static int push(struct pys_session *s, const struct pys_frame *f)
{
    struct prof_native *n = s->native;
    int rc = util_array_reserve((void **)&n->frames, &n->cap, n->nframes + 1, sizeof *n->frames);
    if (rc == 0)
        rc = util_array_reserve((void **)&n->origin, &n->origin_cap, n->nframes + 1,
                                sizeof *n->origin);
    if (rc < 0)
        return rc;
    int in_res = s->res.frames && f >= s->res.frames && f < s->res.frames + s->res.nframes;
    n->origin[n->nframes] = in_res ? (size_t)(f - s->res.frames) : SIZE_MAX;
    n->frames[n->nframes++] = *f;
    return 0;
}

int prof_native_res_index(const struct pys_session *s, const struct pys_frame *f, size_t *idx)
{
    const struct prof_native *n = s->native;
    if (!n || !n->frames || f < n->frames || f >= n->frames + n->nframes)
        return PYS_E_NOTFOUND;
    *idx = n->origin[f - n->frames];
    return 0;
}

/* Python frames [*i, end) up to the next group's start, into the merge:
 * one evaluation-loop call's frames. Markers between groups are dropped. */
static int push_group(struct pys_session *s, const struct pys_thread *t, size_t *i)
{
    int per_frame = s->off.traits.frames == CPY_FRAMES_OBJECT;
    /* Skip the marker(s) that end the previous group. */
    while (*i < t->nframes && t->frames[*i].kind == PYS_FRAME_NATIVE)
        ++*i;
    size_t taken = 0;
    for (; *i < t->nframes; ++*i) {
        const struct pys_frame *f = &t->frames[*i];
        if (f->kind == PYS_FRAME_NATIVE || f->kind == PYS_FRAME_TRUNCATED)
            break;
        if (per_frame && taken > 0 && f->kind == PYS_FRAME_PYTHON)
            break;
        int rc = push(s, f);
        if (rc < 0)
            return rc;
        taken += f->kind == PYS_FRAME_PYTHON;
    }
    return 0;
}

/* Merge thread t's native stack (pcs[0..npcs)) with its Python frames;
 * shims[sfrom, sto) are its shim frames. */
static int merge(struct pys_session *s, const struct pys_thread *t, size_t npcs, size_t sfrom,
                 size_t sto)
{
    struct prof_native *n = s->native;
    size_t i = 0, loops = 0; /* next Python frame; evaluation loops met */
    for (size_t k = 0; k < npcs; k++) {
        const struct sym_entry *e = lookup(s, n->pcs[k]);
        if (!e)
            return PYS_E_NOMEM;
        if (e->cls == SYM_EVAL || (e->cls == SYM_INTERNAL && holds_shim(n, k, npcs, sfrom, sto))) {
            int rc = push_group(s, t, &i);
            if (rc < 0)
                return rc;
            loops++;
            continue;
        }
        if (e->cls == SYM_INTERNAL)
            continue;
        struct pys_frame f = {.filename = e->file,
                              .qualname = e->name,
                              .firstlineno = -1,
                              .lineno = e->line,
                              .end_lineno = -1,
                              .col = -1,
                              .end_col = -1,
                              .lasti = -1,
                              .kind = PYS_FRAME_NATIVE,
                              .opcode = -1};
        int rc = push(s, &f);
        if (rc < 0)
            return rc;
    }
    /* No evaluation loop recognised at all (a stripped 3.11 or older, no
     * symbols): where the Python frames go is not known. */
    if (loops == 0 && t->nframes > 0)
        return PYS_E_NOTFOUND;
    /* Python frames no evaluation-loop frame was found for (an unwind cut
     * short): below, as they are, markers dropped. */
    for (; i < t->nframes; i++) {
        const struct pys_frame *f = &t->frames[i];
        if (f->kind == PYS_FRAME_NATIVE)
            continue;
        int rc = push(s, f);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int prof_native_snapshot(struct pys_session *s)
{
    struct prof_native *n = s->native;
    if (!n || (!s->walker.stack.stopped && !s->core))
        return 0; /* native stacks only of a paused target, or a core */
    if (!n->unw && !n->unw_failed) {
        int rc = s->core ? prof_core_unwinder(s->core, &n->unw, n->err, sizeof n->err)
                         : plat_unwinder_new(s->pid, &n->unw);
        if (rc == PYS_E_NOMEM)
            return rc;
        if (rc < 0) {
            n->unw_failed = 1;
            if (!s->core)
                snprintf(n->err, sizeof n->err, "cannot read the modules of process %d%s",
                         s->pid, rc == PYS_E_INVAL ? ": not built with native stacks" : "");
        }
    }
    int rc = util_array_reserve((void **)&n->start, &n->start_cap, s->res.nthreads + 1,
                                sizeof *n->start);
    if (rc < 0)
        return rc;
    n->nframes = 0;
    for (size_t ti = 0; ti < s->res.nthreads; ti++) {
        struct pys_thread *t = &s->res.threads[ti];
        n->start[ti] = n->nframes;
        if (t->error)
            continue;
        if (t->host_id == 0 || !n->unw) {
            t->native_error = !n->unw ? n->err : "the thread is not in /proc";
            continue;
        }
        size_t npcs = 0;
        rc = plat_unwind_thread(n->unw, (pid_t)t->host_id, n->pcs, n->sps, NATIVE_MAX, &npcs);
        if (rc == PYS_E_NOMEM)
            return rc;
        if (rc < 0) {
            /* Its Python stack stands; the reason goes with the thread. */
            snprintf(s->res.thread_err[ti], sizeof s->res.thread_err[0], "%s",
                     plat_unwinder_error(n->unw));
            t->native_error = s->res.thread_err[ti];
            continue;
        }
        size_t first = n->nframes, at = s->res.thread_frame_start[ti], sfrom = 0, sto;
        while (sfrom < n->nshims && n->shims[sfrom].at < at)
            sfrom++;
        for (sto = sfrom; sto < n->nshims && n->shims[sto].at <= at + t->nframes; sto++)
            ;
        if ((rc = merge(s, t, npcs, sfrom, sto)) == PYS_E_NOTFOUND) {
            n->nframes = first;
            t->native_error = "the interpreter's evaluation loop is not among the native frames "
                              "(no symbols for it): Python frames only";
            continue;
        }
        if (rc < 0)
            return rc;
        n->start[ti] = first;
    }
    /* Now that the array is final: point the threads at their stacks. */
    for (size_t ti = 0; ti < s->res.nthreads; ti++) {
        struct pys_thread *t = &s->res.threads[ti];
        size_t end = ti + 1 < s->res.nthreads ? n->start[ti + 1] : n->nframes;
        if (end == n->start[ti])
            continue; /* not unwound: the Python stack */
        t->frames = n->frames + n->start[ti];
        t->nframes = end - n->start[ti];
    }
    return 0;
}
