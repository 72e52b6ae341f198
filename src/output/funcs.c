/*
 * funcs: a profile's nodes mapped to functions, and a depth-first walk of
 * its trie that needs no recursion (stacks run to a million frames).
 */
#include "output/funcs.h"

#include <stdlib.h>
#include <string.h>

static uint64_t fn_hash(const char *file, const char *qual, int32_t line)
{
    /* The profile interns its strings: equal strings, equal pointers. */
    uint64_t h = util_hash_add(0, (uintptr_t)file);
    h = util_hash_add(h, (uintptr_t)qual);
    return util_hash_u64(util_hash_add(h, (uint32_t)line));
}

static uint64_t fn_hash_at(const void *ctx, uint32_t id)
{
    const struct out_func *f = &((const struct out_funcs *)ctx)->v[id - 1];
    return fn_hash(f->filename, f->qualname, f->firstlineno);
}

/* Index of the function of frame fr, added if new; negative on no memory. */
static long fn_get(struct out_funcs *t, const struct pys_frame *fr)
{
    const char *file = fr->filename, *qual = fr->qualname;
    int32_t line = fr->kind == PYS_FRAME_PYTHON && fr->firstlineno > 0 ? fr->firstlineno : 0;
    if (t->n >= UINT32_MAX - 1 ||
        util_htab_reserve(&t->index, 1024, 1, (uint32_t)t->n + 1, fn_hash_at, t) < 0)
        return PYS_E_NOMEM;
    uint32_t id;
    size_t j = util_htab_first(&t->index, fn_hash(file, qual, line));
    for (; (id = t->index.slot[j]); j = util_htab_next(&t->index, j)) {
        const struct out_func *f = &t->v[id - 1];
        if (f->filename == file && f->qualname == qual && f->firstlineno == line)
            return (long)(id - 1);
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        struct out_func *v = realloc(t->v, cap * sizeof *v);
        if (!v)
            return PYS_E_NOMEM;
        t->v = v;
        t->cap = cap;
    }
    t->v[t->n] = (struct out_func){file, qual, line, fr->kind};
    util_htab_set(&t->index, j, (uint32_t)(t->n + 1));
    return (long)t->n++;
}

int out_frame_has_source(int32_t kind, const char *filename)
{
    return kind == PYS_FRAME_PYTHON && filename && strcmp(filename, PYS_TASK_FRAME_FILENAME) != 0;
}

int out_funcs_build(struct out_funcs *t, const pys_profile *p)
{
    memset(t, 0, sizeof *t);
    t->nnodes = pys_profile_nodes(p);
    t->node_fn = malloc((t->nnodes ? t->nnodes : 1) * sizeof *t->node_fn);
    if (!t->node_fn)
        return PYS_E_NOMEM;
    for (size_t id = 0; id < t->nnodes; id++) {
        const struct pys_frame *fr = pys_profile_frame(p, pys_profile_node(p, (uint32_t)id)->frame);
        t->node_fn[id] = OUT_NO_FUNC;
        if (!fr)
            continue;
        long f = fn_get(t, fr);
        if (f < 0)
            return (int)f;
        t->node_fn[id] = (uint32_t)f;
    }
    return 0;
}

void out_funcs_release(struct out_funcs *t)
{
    free(t->v);
    util_htab_release(&t->index);
    free(t->node_fn);
    memset(t, 0, sizeof *t);
}

int out_profile_walk(const pys_profile *p, uint32_t top, out_visit_fn visit, void *ctx)
{
    if (top >= pys_profile_nodes(p))
        return 0;
    uint32_t cur = pys_profile_node(p, top)->first_child;
    size_t depth = 1;
    while (cur) {
        int rc = visit(ctx, cur, depth);
        if (rc)
            return rc;
        const struct pys_profile_node *nd = pys_profile_node(p, cur);
        if (nd->first_child) {
            cur = nd->first_child;
            depth++;
            continue;
        }
        /* Leave nodes until one below top has a next sibling. */
        while (cur != top) {
            nd = pys_profile_node(p, cur);
            if (nd->next_sibling) {
                cur = nd->next_sibling;
                break;
            }
            cur = nd->parent;
            depth--;
        }
        if (cur == top)
            break;
    }
    return 0;
}
