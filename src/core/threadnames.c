/*
 * threadnames: the Python names of the target's threads
 * (threading.Thread.name), read from the threading module's table of live
 * threads, threading._active, which maps each thread's ident
 * (threading.get_ident(), pys_thread.thread_id) to its Thread object.
 *
 * The names are read apart from snapshots, with a reader of their own (so
 * that they never enter the snapshots' batched prefetch), and at a low rate:
 * a name changes rarely and its read costs a dict walk or two. A thread the
 * table does not hold (a thread started from C, or before its Thread object
 * registered it) has no name. Threads of other interpreters than the main
 * one are not looked up.
 */
#include <stdlib.h>
#include <string.h>

#include <pystrobe/pystrobe.h>

#include "core/core.h"

/* How old the names may get: a renamed or new thread shows its name this
 * late at most. A thread asked for and not found makes a read this much
 * sooner, so that new threads are named without a second's wait. */
#define NAMES_MAX_AGE_NS 1000000000ull
#define NAMES_MISS_AGE_NS 200000000ull
/* Threads named: more would be a corrupt table (CPY_MAX_THREADS bounds the
 * thread states). */
#define NAMES_MAX 4096
/* Characters of a name kept. */
#define NAME_MAX_CHARS 256

struct prof_tname {
    uint64_t ident;
    const char *name; /* interned in the session's strings */
};

struct prof_tnames {
    struct mem mem;       /* a reader of its own, outside the snapshots' batches */
    uint64_t active;      /* threading._active, once found; 0 = look it up */
    uint64_t read_ns;     /* when the names were last read; 0 = never */
    struct prof_tname *v; /* sorted by ident */
    size_t n;
    uint64_t *keys, *vals; /* scratch */
};

void prof_tnames_free(struct prof_tnames *tn)
{
    if (!tn)
        return;
    mem_release(&tn->mem);
    free(tn->v);
    free(tn->keys);
    free(tn->vals);
    free(tn);
}

/* threading._active of the main interpreter, or an error (PYS_E_NOTFOUND:
 * threading is not imported). */
static int find_active(struct pys_session *s, struct mem *m, uint64_t *out)
{
    const struct cpy_offsets *o = &s->off;
    uint64_t interp, modules, module, dict;
    int rc;
    if (!CPY_HAS(o, interpreter_state, imports_modules))
        return PYS_E_NOTFOUND;
    if ((rc = cpy_runtime_first_interp(m, o, s->runtime, &interp)) < 0)
        return rc;
    if (!interp)
        return PYS_E_NOTFOUND;
    /* the main interpreter is the last of the list (newest first) */
    for (int i = 0; i < CPY_MAX_INTERPS; i++) {
        uint64_t next;
        if ((rc = mem_read_u64(m, interp + o->interpreter_state.next, &next)) < 0)
            return rc;
        if (!next)
            break;
        interp = next;
    }
    if ((rc = mem_read_u64(m, interp + o->interpreter_state.imports_modules, &modules)) < 0)
        return rc;
    if (!modules)
        return PYS_E_NOTFOUND;
    if ((rc = cpy_dict_get_str(m, o, modules, "threading", &module)) < 0)
        return rc;
    /* PyModuleObject: md_dict follows the object header, in every version */
    if ((rc = mem_read_u64(m, module + o->pyobject.size, &dict)) < 0)
        return rc;
    if (!dict)
        return PYS_E_NOTFOUND;
    return cpy_dict_get_str(m, o, dict, "_active", out);
}

static int by_ident(const void *a, const void *b)
{
    uint64_t x = ((const struct prof_tname *)a)->ident, y = ((const struct prof_tname *)b)->ident;
    return x < y ? -1 : x > y;
}

/* Read every name again; on failure the old names stay. */
static int names_read(struct pys_session *s, struct prof_tnames *tn)
{
    const struct cpy_offsets *o = &s->off;
    int rc, n;
    if (!tn->active && (rc = find_active(s, &tn->mem, &tn->active)) < 0)
        return rc;
    n = cpy_dict_items(&tn->mem, o, tn->active, tn->keys, tn->vals, NAMES_MAX);
    if (n < 0) {
        tn->active = 0; /* found again next time: the module may have been reloaded */
        return n;
    }
    struct prof_tname *v = malloc(((size_t)n + 1) * sizeof *v);
    if (!v)
        return PYS_E_NOMEM;
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        uint64_t ident, name;
        char *text = NULL;
        if (cpy_long_read(&tn->mem, o, tn->keys[i], &ident) < 0 ||
            cpy_object_attr(&tn->mem, o, tn->vals[i], "_name", &name) < 0 ||
            !cpy_is_str(&tn->mem, o, name) ||
            cpy_unicode_read(&tn->mem, o, name, NAME_MAX_CHARS, &text) < 0)
            continue;
        const char *in = prof_intern_str(&s->strings, text, strlen(text));
        free(text);
        if (!in)
            continue;
        v[k].ident = ident;
        v[k].name = in;
        k++;
    }
    qsort(v, k, sizeof *v, by_ident);
    free(tn->v);
    tn->v = v;
    tn->n = k;
    return 0;
}

static const struct prof_tname *names_find(const struct prof_tnames *tn, uint64_t ident)
{
    size_t lo = 0, hi = tn->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tn->v[mid].ident < ident)
            lo = mid + 1;
        else if (tn->v[mid].ident > ident)
            hi = mid;
        else
            return &tn->v[mid];
    }
    return NULL;
}

const char *pys_session_thread_name(pys_session *s, uint64_t thread_id)
{
    if (!s || !thread_id || !s->mem.src)
        return NULL;
    struct prof_tnames *tn = s->tnames;
    if (!tn) {
        tn = calloc(1, sizeof *tn);
        if (!tn)
            return NULL;
        tn->keys = malloc(NAMES_MAX * sizeof *tn->keys);
        tn->vals = malloc(NAMES_MAX * sizeof *tn->vals);
        if (!tn->keys || !tn->vals) {
            prof_tnames_free(tn);
            return NULL;
        }
        mem_init(&tn->mem, s->mem.src);
        s->tnames = tn;
    }
    const struct prof_tname *hit = names_find(tn, thread_id);
    uint64_t now = mem_clock_ns(&tn->mem);
    uint64_t age = now >= tn->read_ns ? now - tn->read_ns : 0; /* an image's clock stands */
    if (!tn->read_ns || age >= NAMES_MAX_AGE_NS || (!hit && age >= NAMES_MISS_AGE_NS)) {
        tn->read_ns = now ? now : 1;
        names_read(s, tn);
        hit = names_find(tn, thread_id);
    }
    return hit ? hit->name : NULL;
}
