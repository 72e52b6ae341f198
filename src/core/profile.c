/*
 * profile: stacks aggregated into a trie. The root's children are threads;
 * below them, frames from the outermost call inward. A child is found by a
 * hash on (parent id, frame), so adding a stack of depth d costs d lookups and
 * allocates only for stacks never seen before.
 *
 * Frames are compared by their strings' addresses: the session interns every
 * name, so equal names have equal addresses.
 */
#include <stdlib.h>
#include <string.h>

#include <pystrobe/pystrobe.h>

/* Node ids are 32-bit; stop well before. */
#define PROFILE_MAX_NODES (1u << 30)

struct pys_profile {
    struct pys_profile_node *nodes;
    size_t n, cap;
    uint32_t *index; /* open addressing: node ids (0 = empty), cap_index slots */
    size_t cap_index;
    uint32_t *last_child; /* per node: last child, to append siblings in O(1) */
    uint32_t *path;       /* scratch for pys_profile_add: the nodes of one stack */
    size_t path_cap;
    struct pys_profile_info info;
};

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

static uint64_t key_hash(uint32_t parent, int is_thread, uint64_t thread,
                         const struct pys_frame *f)
{
    uint64_t h = mix(0, parent);
    if (is_thread)
        return mix(mix(h, 1), thread);
    h = mix(h, (uintptr_t)f->filename);
    h = mix(h, (uintptr_t)f->qualname);
    h = mix(h, (uint64_t)(uint32_t)f->lineno << 32 | (uint32_t)f->firstlineno);
    h = mix(h, (uint64_t)f->kind);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    return h;
}

static int same(const struct pys_profile_node *nd, uint32_t parent, int is_thread,
                uint64_t thread, const struct pys_frame *f)
{
    if (nd->parent != parent || nd->is_thread != is_thread)
        return 0;
    if (is_thread)
        return nd->thread == thread;
    return nd->frame.filename == f->filename && nd->frame.qualname == f->qualname &&
           nd->frame.lineno == f->lineno && nd->frame.firstlineno == f->firstlineno &&
           nd->frame.kind == f->kind;
}

static int grow_index(pys_profile *p)
{
    size_t cap = p->cap_index ? p->cap_index * 2 : 1024;
    uint32_t *idx = calloc(cap, sizeof *idx);
    if (!idx)
        return PYS_E_NOMEM;
    for (size_t id = 1; id < p->n; id++) {
        const struct pys_profile_node *nd = &p->nodes[id];
        size_t j = key_hash(nd->parent, nd->is_thread, nd->thread, &nd->frame) & (cap - 1);
        while (idx[j])
            j = (j + 1) & (cap - 1);
        idx[j] = (uint32_t)id;
    }
    free(p->index);
    p->index = idx;
    p->cap_index = cap;
    return 0;
}

pys_profile *pys_profile_new(void)
{
    pys_profile *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->cap = 256;
    p->nodes = calloc(p->cap, sizeof *p->nodes);
    p->last_child = calloc(p->cap, sizeof *p->last_child);
    if (!p->nodes || !p->last_child || grow_index(p) < 0) {
        pys_profile_free(p);
        return NULL;
    }
    p->n = 1; /* the root */
    p->info.mode = "wall";
    return p;
}

void pys_profile_free(pys_profile *p)
{
    if (!p)
        return;
    free(p->nodes);
    free(p->index);
    free(p->last_child);
    free(p->path);
    free(p);
}

/* The child of parent with this key, created if new; 0 if out of memory. */
static uint32_t child(pys_profile *p, uint32_t parent, int is_thread, uint64_t thread,
                      const struct pys_frame *f)
{
    size_t j = key_hash(parent, is_thread, thread, f) & (p->cap_index - 1);
    for (; p->index[j]; j = (j + 1) & (p->cap_index - 1))
        if (same(&p->nodes[p->index[j]], parent, is_thread, thread, f))
            return p->index[j];
    if (p->n >= PROFILE_MAX_NODES)
        return 0;
    if (p->n == p->cap) {
        size_t cap = p->cap * 2;
        struct pys_profile_node *nodes = realloc(p->nodes, cap * sizeof *nodes);
        if (!nodes)
            return 0;
        p->nodes = nodes;
        uint32_t *lc = realloc(p->last_child, cap * sizeof *lc);
        if (!lc)
            return 0;
        p->last_child = lc;
        p->cap = cap;
    }
    uint32_t id = (uint32_t)p->n++;
    struct pys_profile_node *nd = &p->nodes[id];
    memset(nd, 0, sizeof *nd);
    nd->parent = parent;
    nd->is_thread = is_thread;
    nd->thread = is_thread ? thread : p->nodes[parent].thread;
    if (!is_thread)
        nd->frame = *f;
    p->last_child[id] = 0;
    if (p->last_child[parent])
        p->nodes[p->last_child[parent]].next_sibling = id;
    else
        p->nodes[parent].first_child = id;
    p->last_child[parent] = id;
    p->index[j] = id;
    if ((p->n + 1) * 2 > p->cap_index && grow_index(p) < 0)
        return 0;
    return id;
}

int pys_profile_add(pys_profile *p, uint64_t thread, const struct pys_frame *frames, size_t n,
                    uint64_t weight)
{
    size_t depth = 0;
    if (n + 1 > p->path_cap) {
        uint32_t *path = realloc(p->path, (n + 1) * sizeof *path);
        if (!path)
            return PYS_E_NOMEM;
        p->path = path;
        p->path_cap = n + 1;
    }
    uint32_t *path = p->path;
    uint32_t id = child(p, 0, 1, thread, NULL);
    if (!id)
        return PYS_E_NOMEM;
    path[depth++] = id;
    for (size_t i = n; i-- > 0;) { /* outermost first */
        id = child(p, id, 0, 0, &frames[i]);
        if (!id)
            return PYS_E_NOMEM;
        path[depth++] = id;
    }
    for (size_t i = 0; i < depth; i++)
        p->nodes[path[i]].total += weight;
    p->nodes[id].self += weight;
    p->nodes[0].total += weight;
    return 0;
}

size_t pys_profile_nodes(const pys_profile *p)
{
    return p->n;
}

const struct pys_profile_node *pys_profile_node(const pys_profile *p, uint32_t id)
{
    return id < p->n ? &p->nodes[id] : NULL;
}

struct pys_profile_info *pys_profile_info(pys_profile *p)
{
    return &p->info;
}

const struct pys_profile_info *pys_profile_info_get(const pys_profile *p)
{
    return &p->info;
}
