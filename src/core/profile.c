/*
 * profile: stacks aggregated into a trie. The root's children are threads;
 * below them, frames from the outermost call inward. A child is found by a
 * hash on (parent id, frame), so adding a stack of depth d costs d lookups and
 * allocates only for stacks never seen before.
 *
 * Frames are compared by their strings' addresses: the session interns every
 * name, so equal names have equal addresses.
 *
 * Each thread's last stack and its path of nodes are remembered: the next
 * stack of that thread reuses the nodes of the outer frames it shares with
 * it (found by comparing frames, no hashing) and looks up only the frames
 * that changed. A sample adds to its leaf's self count only; the totals are
 * summed when a node is next looked at (a parent's id is below its
 * children's: one pass from the last id down).
 */
#include <stdlib.h>
#include <string.h>

#include <pystrobe/pystrobe.h>

/* Node ids are 32-bit; stop well before. */
#define PROFILE_MAX_NODES (1u << 30)

/* A thread's last stack: its frames outermost first, and the nodes they
 * went to (path[0] the thread's node, path[i + 1] that of frames[i]). */
struct last_stack {
    uint64_t thread;
    int used;
    uint32_t thread_node; /* 0 until made */
    struct pys_frame *frames;
    uint32_t *path;
    size_t n, cap;
};

struct pys_profile {
    struct pys_profile_node *nodes;
    size_t n, cap;
    uint32_t *index; /* open addressing: node ids (0 = empty), cap_index slots */
    size_t cap_index;
    uint32_t *last_child; /* per node: last child, to append siblings in O(1) */
    struct last_stack *last; /* open addressing by thread, cap_last slots */
    size_t n_last, cap_last;
    struct pys_profile_info info;
    int totals_stale; /* samples were added since the totals were summed */
    /* pys_profile_set_thread_ns: (thread, ns id) pairs, open addressing by
     * thread (0 = empty slot), cap_ns slots. */
    uint64_t (*ns_ids)[2];
    size_t n_ns, cap_ns;
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
    for (size_t i = 0; i < p->cap_last; i++) {
        free(p->last[i].frames);
        free(p->last[i].path);
    }
    free(p->last);
    free(p->ns_ids);
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

static size_t last_slot(uint64_t thread, size_t cap)
{
    return (size_t)((thread * 0x9e3779b97f4a7c15ull) >> 24) & (cap - 1);
}

/* The last stack of thread (empty if new), or NULL if out of memory. */
static struct last_stack *last_stack_of(pys_profile *p, uint64_t thread)
{
    if ((p->n_last + 1) * 2 > p->cap_last) {
        size_t cap = p->cap_last ? p->cap_last * 2 : 16;
        struct last_stack *v = calloc(cap, sizeof *v);
        if (!v)
            return NULL;
        for (size_t i = 0; i < p->cap_last; i++) {
            if (!p->last[i].used)
                continue;
            size_t j = last_slot(p->last[i].thread, cap);
            while (v[j].used)
                j = (j + 1) & (cap - 1);
            v[j] = p->last[i];
        }
        free(p->last);
        p->last = v;
        p->cap_last = cap;
    }
    size_t j = last_slot(thread, p->cap_last);
    for (; p->last[j].used; j = (j + 1) & (p->cap_last - 1))
        if (p->last[j].thread == thread)
            return &p->last[j];
    p->last[j].used = 1;
    p->last[j].thread = thread;
    p->n_last++;
    return &p->last[j];
}

static int same_frame(const struct pys_frame *a, const struct pys_frame *b)
{
    return a->filename == b->filename && a->qualname == b->qualname && a->lineno == b->lineno &&
           a->firstlineno == b->firstlineno && a->kind == b->kind;
}

int pys_profile_add(pys_profile *p, uint64_t thread, const struct pys_frame *frames, size_t n,
                    uint64_t weight)
{
    struct last_stack *ls = last_stack_of(p, thread);
    if (!ls)
        return PYS_E_NOMEM;
    if (n + 1 > ls->cap) {
        struct pys_frame *f = realloc(ls->frames, (n + 1) * sizeof *f);
        if (f)
            ls->frames = f;
        uint32_t *path = realloc(ls->path, (n + 1) * sizeof *path);
        if (path)
            ls->path = path;
        if (!f || !path)
            return PYS_E_NOMEM;
        ls->cap = n + 1;
    }
    if (!ls->thread_node && !(ls->thread_node = child(p, 0, 1, thread, NULL)))
        return PYS_E_NOMEM;
    ls->path[0] = ls->thread_node;
    /* The outer frames shared with the thread's last stack keep their nodes. */
    size_t same = 0;
    while (same < n && same < ls->n && same_frame(&ls->frames[same], &frames[n - 1 - same]))
        same++;
    uint32_t id = ls->path[same];
    for (size_t i = same; i < n; i++) { /* outermost first */
        id = child(p, id, 0, 0, &frames[n - 1 - i]);
        if (!id) {
            ls->n = i;
            return PYS_E_NOMEM;
        }
        ls->frames[i] = frames[n - 1 - i];
        ls->path[i + 1] = id;
    }
    ls->n = n;
    p->nodes[id].self += weight;
    p->totals_stale = 1;
    return 0;
}

static void sum_totals(pys_profile *p)
{
    for (size_t id = 0; id < p->n; id++)
        p->nodes[id].total = p->nodes[id].self;
    for (size_t id = p->n; id-- > 1;)
        p->nodes[p->nodes[id].parent].total += p->nodes[id].total;
    p->totals_stale = 0;
}

size_t pys_profile_nodes(const pys_profile *p)
{
    return p->n;
}

const struct pys_profile_node *pys_profile_node(const pys_profile *p, uint32_t id)
{
    if (id >= p->n)
        return NULL;
    /* The totals are a cache of the self counts: summing them changes no
     * count the caller can see (the profile is only ever allocated by
     * pys_profile_new, never const itself). */
    if (p->totals_stale)
        sum_totals((pys_profile *)p);
    return &p->nodes[id];
}

struct pys_profile_info *pys_profile_info(pys_profile *p)
{
    return &p->info;
}

const struct pys_profile_info *pys_profile_info_get(const pys_profile *p)
{
    return &p->info;
}

/* --- thread ids in the target's PID namespace ---------------------------- */

static size_t ns_slot(uint64_t thread, size_t cap)
{
    return (size_t)(mix(0, thread) * 0x9e3779b97f4a7c15ull >> 7) & (cap - 1);
}

int pys_profile_set_thread_ns(pys_profile *p, uint64_t thread, uint64_t ns_id)
{
    if (thread == 0)
        return PYS_E_INVAL;
    if (2 * (p->n_ns + 1) > p->cap_ns) {
        size_t cap = p->cap_ns ? 2 * p->cap_ns : 16;
        uint64_t(*v)[2] = calloc(cap, sizeof *v);
        if (!v)
            return PYS_E_NOMEM;
        for (size_t i = 0; i < p->cap_ns; i++) {
            if (p->ns_ids[i][0] == 0)
                continue;
            size_t k = ns_slot(p->ns_ids[i][0], cap);
            while (v[k][0] != 0)
                k = (k + 1) & (cap - 1);
            v[k][0] = p->ns_ids[i][0];
            v[k][1] = p->ns_ids[i][1];
        }
        free(p->ns_ids);
        p->ns_ids = v;
        p->cap_ns = cap;
    }
    size_t k = ns_slot(thread, p->cap_ns);
    while (p->ns_ids[k][0] != 0 && p->ns_ids[k][0] != thread)
        k = (k + 1) & (p->cap_ns - 1);
    if (p->ns_ids[k][0] == 0)
        p->n_ns++;
    p->ns_ids[k][0] = thread;
    p->ns_ids[k][1] = ns_id;
    return 0;
}

uint64_t pys_profile_thread_ns(const pys_profile *p, uint64_t thread)
{
    if (thread == 0 || p->cap_ns == 0)
        return 0;
    size_t k = ns_slot(thread, p->cap_ns);
    while (p->ns_ids[k][0] != 0) {
        if (p->ns_ids[k][0] == thread)
            return p->ns_ids[k][1];
        k = (k + 1) & (p->cap_ns - 1);
    }
    return 0;
}
