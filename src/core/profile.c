/*
 * profile: stacks aggregated into a trie. The root's children are threads;
 * below them, frames from the outermost call inward.
 *
 * Frames are stored once, in a frame table keyed by their identity (the
 * strings' addresses, lineno, firstlineno, kind: a session interns every
 * name, so equal names have equal addresses), and a node names its frame by
 * id. Frames may come from several sessions (a program and the one it
 * exec'd), each with its own addresses for the same names: a frame met under
 * new addresses is looked up by its names' text (the first address met with
 * a text stands for it), and its addresses are remembered as an alias of the
 * frame found, so that the profile holds one frame, one node, per identity
 * whatever its feeders; its frames carry those first addresses only. A
 * node is its parent, its frame id, its two child links and its two counts,
 * 32 bytes. A child is found by a hash on (parent id, frame id), so
 * adding a stack of depth d costs d lookups and allocates only for stacks
 * never seen before.
 *
 * Each thread's last stack and its path of nodes are remembered: the next
 * stack of that thread reuses the nodes of the outer frames it shares with
 * it (found by comparing frames, no hashing) and looks up only the frames
 * that changed. A sample adds to its leaf's self count only; the totals and
 * the child links are computed when a node is next looked at (a parent's id
 * is below its children's: one pass from the last id down, which also lists
 * each node's children in increasing id order, the order they were made in).
 *
 * Memory is bounded (pys_profile_set_max_memory). Everything the profile
 * holds is counted in `bytes`; a table grows only while the total stays in
 * the bound, the last sixteenth of which is kept for fold markers. A stack
 * that would need a node or frame past that is counted under a marker child
 * of the deepest node its path has (see fold()).
 *
 * Frames that carry their instruction (pys_frame.opcode, with
 * pys_options.opcodes) also count, per node, the samples at each opcode: an
 * entry per (node, opcode) seen, found by a hash like the nodes, and
 * listed per node from a sorted copy made when asked (ops_order). An entry
 * past the bound is not made: that sample's instruction goes uncounted.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include <pystrobe/pystrobe.h>

#include "util/hashtab.h"

/* Node ids are 32-bit; stop well before. Threads' nodes and markers, which
 * are always made, may pass PROFILE_MAX_NODES up to PROFILE_MAX_IDS. */
#define PROFILE_MAX_NODES (1u << 30)
#define PROFILE_MAX_IDS (1u << 31)
#define PROFILE_MAX_FRAMES (1u << 30)

static_assert(sizeof(struct pys_profile_node) <= 32, "a profile node is at most 32 bytes");

/* What an allocation may use of the bound: ordinary nodes and frames stop at
 * the reserve, fold markers may use it, and what each thread needs to be
 * counted at all (its node, its marker, its last stack) is never refused. */
enum room { ROOM_ORDINARY, ROOM_MARKER, ROOM_ALWAYS };

/* Ask of a table that cannot double within the bound: enough for this many
 * more entries at least, or nothing. */
#define GROW_MIN 64

/* A thread's last stack: its frames outermost first (frame ids), and the
 * nodes they went to (path[0] the thread's node, path[i + 1] that of
 * fids[i]). */
struct last_stack {
    uint64_t thread;
    uint32_t thread_node; /* 0 until made */
    uint32_t *fids;
    uint32_t *path;
    size_t n, cap;
};

/* Samples of node `node` at instruction `opcode`. */
struct op_count {
    uint32_t node;
    int32_t opcode;
    uint64_t count;
};

struct thread_entry {
    uint32_t node;
    uint64_t thread;
};

/* A frame met under other addresses of its names than the frame table's. */
struct alias {
    struct pys_frame f;
    uint32_t id; /* the frame it is */
};

struct pys_profile {
    struct pys_profile_node *nodes;
    size_t n, cap;
    struct util_htab index; /* node ids 1..n-1 by (parent, frame) */

    struct pys_frame *frames; /* frame table; frames[0] is PYS_PROFILE_NO_FRAME */
    size_t n_frames, cap_frames;
    struct util_htab frame_index; /* frame ids 1..n_frames-1 by identity */
    uint32_t fold_frame;          /* the PYS_FRAME_FOLDED marker's id */
    const char **names;           /* names[1..n_names-1]: the first address of each text */
    size_t n_names, cap_names;
    struct util_htab name_index; /* their ids, by text */
    struct alias *aliases;       /* aliases[1..n_aliases-1] */
    size_t n_aliases, cap_aliases;
    struct util_htab alias_index; /* their ids, by identity */

    struct thread_entry *threads; /* in node order */
    size_t n_threads, cap_threads;
    struct last_stack *last;     /* last[1..n_last], by id */
    size_t n_last, cap_last;     /* cap_last: last has room for ids below it */
    struct util_htab last_index; /* their ids, by thread */

    uint64_t bytes;     /* all of the above's allocations */
    uint64_t max_bytes; /* 0 = no bound */
    struct pys_profile_info info;
    int stale; /* samples or nodes were added since totals and links were made */
    /* Thread ids in the target's PID namespace (pys_profile_set_thread_ns):
     * ns_ids[id] = {thread, ns id} for ids 1..n_ns. */
    uint64_t (*ns_ids)[2];
    const char **ns_names;               /* and their names (pys_profile_set_thread_name), by id */
    struct pys_thread_states *ns_states; /* and their states (pys_profile_count_states) */
    size_t n_ns, cap_ns;                 /* cap_ns: ns_ids has room for ids below it */
    struct util_htab ns_index;           /* their ids, by thread */
    struct op_count *ops; /* ops[1..n_ops-1] */
    size_t n_ops, cap_ops;
    struct util_htab ops_index; /* their ids, by (node, opcode) */
    struct op_count *ops_order; /* a copy of ops[1..], by (node, opcode), made when asked */
    size_t n_order;             /* entries ops_order holds */
    int ops_stale;              /* entries were made or counted since ops_order was */
    int count_ops;              /* pys_profile_count_opcodes */
};

/* No ':' or ';' in its name: the collapsed format's readers split on them. */
static const struct pys_frame FOLD_FRAME = {
    .filename = "~",
    .qualname = "<folded at memory limit>",
    .firstlineno = -1,
    .lineno = -1,
    .end_lineno = -1,
    .col = -1,
    .end_col = -1,
    .lasti = -1,
    .kind = PYS_FRAME_FOLDED,
    .opcode = -1,
};

static uint64_t node_hash(uint32_t parent, uint32_t frame)
{
    return util_hash_u64((uint64_t)parent << 32 | frame);
}

static uint64_t frame_hash(const struct pys_frame *f)
{
    uint64_t h = util_hash_add(0, (uintptr_t)f->filename);
    h = util_hash_add(h, (uintptr_t)f->qualname);
    h = util_hash_add(h, (uint64_t)(uint32_t)f->lineno << 32 | (uint32_t)f->firstlineno);
    h = util_hash_add(h, (uint64_t)f->kind);
    return util_hash_u64(h);
}

static int same_frame(const struct pys_frame *a, const struct pys_frame *b)
{
    return a->filename == b->filename && a->qualname == b->qualname && a->lineno == b->lineno &&
           a->firstlineno == b->firstlineno && a->kind == b->kind;
}

/* The bytes the profile may hold for an allocation of this kind (ROOM_ALWAYS
 * goes past it only by what its callers ask). */
static uint64_t limit_of(const pys_profile *p, enum room room)
{
    return room == ROOM_ORDINARY ? p->max_bytes - p->max_bytes / 16 : p->max_bytes;
}

/* May the profile hold `more` bytes more, for an allocation of this kind? */
static int fits(const pys_profile *p, uint64_t more, enum room room)
{
    if (!p->max_bytes || room == ROOM_ALWAYS)
        return 1;
    uint64_t limit = limit_of(p, room);
    return p->bytes <= limit && more <= limit - p->bytes;
}

/* Resize *v from cap to want elements of size elem, counted in p->bytes. */
static int resize(pys_profile *p, void **v, size_t cap, size_t want, size_t elem)
{
    void *nv = realloc(*v, want * elem);
    if (!nv)
        return PYS_E_NOMEM;
    *v = nv;
    p->bytes += (uint64_t)want * elem;
    p->bytes -= (uint64_t)cap * elem;
    return 0;
}

/* The capacity an array of cap elements (elem bytes each) that must hold one
 * more may grow to: double, or as much as the bound leaves if that is
 * GROW_MIN more at least, or for ROOM_ALWAYS GROW_MIN more past it. 0: no
 * room. */
static size_t grown_cap(const pys_profile *p, size_t cap, size_t elem, enum room room)
{
    size_t want = cap ? cap * 2 : 256;
    if (!p->max_bytes)
        return want;
    uint64_t limit = limit_of(p, room);
    uint64_t more = p->bytes < limit ? (limit - p->bytes) / elem : 0;
    if (more >= want - cap)
        return want;
    if (more >= GROW_MIN)
        return cap + (size_t)more;
    return room == ROOM_ALWAYS ? cap + GROW_MIN : 0;
}

/* Make room for one more id in an index that holds the ids 1..n-1 (rehashed
 * with hash_at when it doubles): the profile's own load policy over
 * util_htab_resize, so that the bound is kept. It is
 * kept at most half full; when the bound has no room for twice the slots,
 * five eighths full for ordinary entries, three quarters with fold markers
 * (their reserve), and for ROOM_ALWAYS all but one slot before it doubles
 * anyway. 0: room for one more, 1: full, or PYS_E_NOMEM. */
static int index_room(pys_profile *p, struct util_htab *index, size_t n, enum room room,
                      util_htab_hash_fn hash_at)
{
    size_t cap = index->cap;
    if ((n + 1) * 2 <= cap)
        return 0;
    size_t ncap = cap ? cap * 2 : 1024;
    if (!fits(p, (uint64_t)(ncap - cap) * sizeof *index->slot,
              room == ROOM_ALWAYS ? ROOM_MARKER : room)) {
        size_t eighths = room == ROOM_ORDINARY ? 5 : room == ROOM_MARKER ? 6 : 8;
        if ((n + 1) * 8 <= cap * eighths && n + 1 < cap)
            return 0;
        if (room != ROOM_ALWAYS)
            return 1;
    }
    int rc = util_htab_resize(index, ncap, 1, (uint32_t)n, hash_at, p);
    if (rc < 0)
        return rc;
    p->bytes += (uint64_t)(ncap - cap) * sizeof *index->slot;
    return 0;
}

static uint64_t node_hash_at(const void *ctx, uint32_t id)
{
    const pys_profile *p = ctx;
    return node_hash(p->nodes[id].parent, p->nodes[id].frame);
}

static uint64_t frame_hash_at(const void *ctx, uint32_t id)
{
    const pys_profile *p = ctx;
    return frame_hash(&p->frames[id]);
}

/* The id of frame f in the table by its names' addresses, or 0. */
static uint32_t frame_find(const pys_profile *p, const struct pys_frame *f, uint64_t h)
{
    uint32_t id;
    for (size_t j = util_htab_first(&p->frame_index, h); (id = p->frame_index.slot[j]);
         j = util_htab_next(&p->frame_index, j))
        if (same_frame(&p->frames[id], f))
            return id;
    return 0;
}

/* The id of the frame f is an alias of, or 0. */
static uint32_t alias_find(const pys_profile *p, const struct pys_frame *f, uint64_t h)
{
    uint32_t id;
    if (!p->alias_index.cap)
        return 0;
    for (size_t j = util_htab_first(&p->alias_index, h); (id = p->alias_index.slot[j]);
         j = util_htab_next(&p->alias_index, j))
        if (same_frame(&p->aliases[id].f, f))
            return p->aliases[id].id;
    return 0;
}

static uint64_t name_hash_at(const void *ctx, uint32_t id)
{
    const char *s = ((const pys_profile *)ctx)->names[id];
    return util_hash_bytes(s, strlen(s));
}

static uint64_t alias_hash_at(const void *ctx, uint32_t id)
{
    return frame_hash(&((const pys_profile *)ctx)->aliases[id].f);
}

/* Make room for one more entry of an array of *cap elements holding ids
 * 1..n-1, and in its index: 0, or nonzero if the bound (or memory) has none. */
static int table_room(pys_profile *p, void **v, size_t *cap, size_t n, size_t elem,
                      struct util_htab *index, util_htab_hash_fn hash_at, enum room room)
{
    if (n >= *cap) {
        size_t ncap = grown_cap(p, *cap, elem, room);
        if (!ncap || resize(p, v, *cap, ncap, elem) < 0)
            return 1;
        *cap = ncap;
    }
    return index_room(p, index, n, room, hash_at);
}

/* The address that stands for name's text in the profile: the first met with
 * it. A name met for the first time is recorded, as room allows (past the
 * bound a new text stands for itself). */
static const char *name_of(pys_profile *p, const char *name, enum room room)
{
    if (!name)
        return NULL;
    uint64_t h = util_hash_bytes(name, strlen(name));
    uint32_t id;
    if (p->name_index.cap)
        for (size_t j = util_htab_first(&p->name_index, h); (id = p->name_index.slot[j]);
             j = util_htab_next(&p->name_index, j))
            if (p->names[id] == name || strcmp(p->names[id], name) == 0)
                return p->names[id];
    if (table_room(p, (void **)&p->names, &p->cap_names, p->n_names, sizeof *p->names,
                   &p->name_index, name_hash_at, room))
        return name;
    id = (uint32_t)p->n_names++;
    p->names[id] = name;
    util_htab_set(&p->name_index, util_htab_free_slot(&p->name_index, h), id);
    return name;
}

/* Add frame f (hash h) to the table: 0 and its id, 1 if there is no room,
 * or PYS_E_NOMEM. */
static int frame_add(pys_profile *p, const struct pys_frame *f, uint64_t h, enum room room,
                     uint32_t *out)
{
    if (p->n_frames >= PROFILE_MAX_FRAMES || !fits(p, 0, room))
        return 1;
    if (p->n_frames == p->cap_frames) {
        size_t cap = grown_cap(p, p->cap_frames, sizeof *p->frames, room);
        if (!cap)
            return 1;
        int rc = resize(p, (void **)&p->frames, p->cap_frames, cap, sizeof *p->frames);
        if (rc < 0)
            return rc;
        p->cap_frames = cap;
    }
    int rc = index_room(p, &p->frame_index, p->n_frames, room, frame_hash_at);
    if (rc)
        return rc;
    uint32_t id = (uint32_t)p->n_frames++;
    p->frames[id] = *f;
    util_htab_set(&p->frame_index, util_htab_free_slot(&p->frame_index, h), id);
    *out = id;
    return 0;
}

/* The id of frame f in the table, added if new (as room allows). 0 and the
 * id, 1 if there is no room, or PYS_E_NOMEM. */
static int frame_id(pys_profile *p, const struct pys_frame *f, enum room room, uint32_t *out)
{
    uint64_t h = frame_hash(f);
    if ((*out = frame_find(p, f, h)) || (*out = alias_find(p, f, h)))
        return 0;
    /* Not met under these addresses: the frame of the same names' first
     * addresses, if there is one, is this frame. */
    struct pys_frame c = *f;
    c.filename = name_of(p, f->filename, room);
    c.qualname = name_of(p, f->qualname, room);
    if (c.filename == f->filename && c.qualname == f->qualname)
        return frame_add(p, f, h, room, out);
    uint64_t hc = frame_hash(&c);
    int rc = 0;
    if (!(*out = frame_find(p, &c, hc)) && (rc = frame_add(p, &c, hc, room, out)) != 0)
        return rc;
    /* Remembered so that the next lookup of f is one probe; without room it
     * takes this way again, to the same frame. */
    if (table_room(p, (void **)&p->aliases, &p->cap_aliases, p->n_aliases, sizeof *p->aliases,
                   &p->alias_index, alias_hash_at, room) == 0) {
        uint32_t a = (uint32_t)p->n_aliases++;
        p->aliases[a] = (struct alias){*f, *out};
        util_htab_set(&p->alias_index, util_htab_free_slot(&p->alias_index, h), a);
    }
    return 0;
}

/* The child of parent with this frame id: 0 and its id (made if new and
 * room allows), 1 if it is not there and cannot be made, or PYS_E_NOMEM. */
static int child(pys_profile *p, uint32_t parent, uint32_t frame, enum room room, uint32_t *out)
{
    uint64_t h = node_hash(parent, frame);
    uint32_t id;
    for (size_t j = util_htab_first(&p->index, h); (id = p->index.slot[j]);
         j = util_htab_next(&p->index, j)) {
        const struct pys_profile_node *nd = &p->nodes[id];
        if (nd->parent == parent && nd->frame == frame) {
            *out = id;
            return 0;
        }
    }
    /* Capacity made for another kind (a thread's marker past the bound)
     * is not this kind's to use. */
    if (p->n >= (room == ROOM_ALWAYS ? PROFILE_MAX_IDS : PROFILE_MAX_NODES) || !fits(p, 0, room))
        return 1;
    if (p->n == p->cap) {
        size_t cap = grown_cap(p, p->cap, sizeof *p->nodes, room);
        if (!cap)
            return 1;
        int rc = resize(p, (void **)&p->nodes, p->cap, cap, sizeof *p->nodes);
        if (rc < 0)
            return rc;
        p->cap = cap;
    }
    int rc = index_room(p, &p->index, p->n, room, node_hash_at);
    if (rc)
        return rc;
    id = (uint32_t)p->n++;
    p->nodes[id] = (struct pys_profile_node){.parent = parent, .frame = frame};
    util_htab_set(&p->index, util_htab_free_slot(&p->index, h), id);
    p->stale = 1;
    *out = id;
    return 0;
}

pys_profile *pys_profile_new(void)
{
    pys_profile *p = calloc(1, sizeof *p);
    uint32_t id;
    if (!p)
        return NULL;
    p->bytes = sizeof *p;
    /* Node 0 (the root) and frame 0 (no frame) are entries of the tables. */
    p->cap = 256;
    p->nodes = calloc(p->cap, sizeof *p->nodes);
    p->cap_frames = 64;
    p->frames = calloc(p->cap_frames, sizeof *p->frames);
    if (!p->nodes || !p->frames)
        goto fail;
    p->bytes += p->cap * sizeof *p->nodes + p->cap_frames * sizeof *p->frames;
    p->n = 1;
    p->n_frames = 1;
    p->n_names = 1;
    p->n_aliases = 1;
    if (index_room(p, &p->index, p->n, ROOM_ALWAYS, node_hash_at) < 0 ||
        index_room(p, &p->frame_index, p->n_frames, ROOM_ALWAYS, frame_hash_at) < 0 ||
        frame_id(p, &FOLD_FRAME, ROOM_ALWAYS, &id) != 0)
        goto fail;
    p->fold_frame = id;
    p->max_bytes = PYS_PROFILE_MAX_MEMORY_DEFAULT;
    p->info.mode = "wall";
    return p;
fail:
    pys_profile_free(p);
    return NULL;
}

void pys_profile_free(pys_profile *p)
{
    if (!p)
        return;
    free(p->nodes);
    util_htab_release(&p->index);
    free(p->frames);
    util_htab_release(&p->frame_index);
    free(p->names);
    util_htab_release(&p->name_index);
    free(p->aliases);
    util_htab_release(&p->alias_index);
    free(p->threads);
    for (size_t i = 1; i <= p->n_last; i++) {
        free(p->last[i].fids);
        free(p->last[i].path);
    }
    free(p->last);
    util_htab_release(&p->last_index);
    free(p->ns_ids);
    free(p->ns_names);
    free(p->ns_states);
    util_htab_release(&p->ns_index);
    free(p->ops);
    util_htab_release(&p->ops_index);
    free(p->ops_order);
    free(p);
}

void pys_profile_count_opcodes(pys_profile *p, int on)
{
    p->count_ops = on != 0;
}

void pys_profile_set_max_memory(pys_profile *p, uint64_t max_bytes)
{
    p->max_bytes = max_bytes;
}

uint64_t pys_profile_memory(const pys_profile *p)
{
    return p->bytes;
}

static uint64_t last_hash_at(const void *ctx, uint32_t id)
{
    return util_hash_u64(((const pys_profile *)ctx)->last[id].thread);
}

/* The last stack of thread (empty if new), or NULL if out of memory. */
static struct last_stack *last_stack_of(pys_profile *p, uint64_t thread)
{
    uint64_t h = util_hash_u64(thread);
    uint32_t id;
    if (p->last_index.cap) {
        for (size_t j = util_htab_first(&p->last_index, h); (id = p->last_index.slot[j]);
             j = util_htab_next(&p->last_index, j))
            if (p->last[id].thread == thread)
                return &p->last[id];
    }
    if (p->n_last >= PROFILE_MAX_IDS)
        return NULL;
    size_t icap = p->last_index.cap;
    if (util_htab_reserve(&p->last_index, 16, 1, (uint32_t)p->n_last + 1, last_hash_at, p) < 0)
        return NULL;
    p->bytes += (uint64_t)(p->last_index.cap - icap) * sizeof *p->last_index.slot;
    if (p->n_last + 1 >= p->cap_last) {
        size_t cap = p->cap_last ? p->cap_last * 2 : 16;
        if (resize(p, (void **)&p->last, p->cap_last, cap, sizeof *p->last) < 0)
            return NULL;
        p->cap_last = cap;
    }
    id = (uint32_t)++p->n_last;
    p->last[id] = (struct last_stack){.thread = thread};
    util_htab_set(&p->last_index, util_htab_free_slot(&p->last_index, h), id);
    return &p->last[id];
}

/* The node of thread ls: made, with the thread's entry, on first use. */
static int make_thread_node(pys_profile *p, struct last_stack *ls)
{
    if (ls->thread_node)
        return 0;
    if (p->n_threads == p->cap_threads) {
        size_t cap = p->cap_threads ? p->cap_threads * 2 : 16;
        int rc = resize(p, (void **)&p->threads, p->cap_threads, cap, sizeof *p->threads);
        if (rc < 0)
            return rc;
        p->cap_threads = cap;
    }
    /* Thread nodes are told apart by their entry, not their (empty) frame:
     * each is a child of the root made here once, and never looked up (the
     * node index holds them only once it was rebuilt, and harmlessly). */
    uint32_t id = (uint32_t)p->n;
    if (p->n >= PROFILE_MAX_IDS)
        return PYS_E_NOMEM;
    if (p->n == p->cap) {
        size_t cap = grown_cap(p, p->cap, sizeof *p->nodes, ROOM_ALWAYS);
        int rc = resize(p, (void **)&p->nodes, p->cap, cap, sizeof *p->nodes);
        if (rc < 0)
            return rc;
        p->cap = cap;
    }
    p->n++;
    p->nodes[id] = (struct pys_profile_node){.parent = 0, .frame = PYS_PROFILE_NO_FRAME};
    p->threads[p->n_threads++] = (struct thread_entry){id, ls->thread};
    p->stale = 1;
    ls->thread_node = id;
    return 0;
}

/*
 * Count weight for a stack whose path ends at node `at` for want of room:
 * under the fold marker child of `at`, made if the bound allows, else under
 * that of its nearest caller that has one, else under the thread node's
 * (always made), so that every total above stays right.
 */
static int fold(pys_profile *p, uint32_t at, uint32_t thread_node, uint64_t weight)
{
    uint32_t id;
    int rc = child(p, at, p->fold_frame, at == thread_node ? ROOM_ALWAYS : ROOM_MARKER, &id);
    for (uint32_t x = at; rc == 1 && x != thread_node;) {
        x = p->nodes[x].parent;
        rc = child(p, x, p->fold_frame, x == thread_node ? ROOM_ALWAYS : ROOM_MARKER, &id);
    }
    if (rc)
        return rc < 0 ? rc : PYS_E_NOMEM;
    p->nodes[id].self += weight;
    p->info.folded += weight;
    p->stale = 1;
    return 0;
}

static uint64_t op_hash(uint32_t node, int32_t opcode)
{
    return util_hash_u64((uint64_t)node << 32 | (uint32_t)opcode);
}

static uint64_t op_hash_at(const void *ctx, uint32_t id)
{
    const pys_profile *p = ctx;
    return op_hash(p->ops[id].node, p->ops[id].opcode);
}

/* Add weight to node's count at opcode, its entry made as room allows.
 * 0 (counted, or not for want of room) or PYS_E_NOMEM. */
static int count_opcode(pys_profile *p, uint32_t node, int32_t opcode, uint64_t weight)
{
    uint64_t h = op_hash(node, opcode);
    uint32_t id;
    if (p->ops_index.cap) {
        for (size_t j = util_htab_first(&p->ops_index, h); (id = p->ops_index.slot[j]);
             j = util_htab_next(&p->ops_index, j))
            if (p->ops[id].node == node && p->ops[id].opcode == opcode) {
                p->ops[id].count += weight;
                p->ops_stale = 1; /* ops_order holds copies of the counts */
                return 0;
            }
    }
    if (p->n_ops >= PROFILE_MAX_NODES || !fits(p, 0, ROOM_ORDINARY))
        return 0;
    if (p->n_ops == 0)
        p->n_ops = 1; /* id 0 is the empty slot */
    if (p->n_ops >= p->cap_ops) {
        size_t cap = grown_cap(p, p->cap_ops, sizeof *p->ops, ROOM_ORDINARY);
        if (!cap)
            return 0;
        int rc = resize(p, (void **)&p->ops, p->cap_ops, cap, sizeof *p->ops);
        if (rc < 0)
            return rc;
        p->cap_ops = cap;
    }
    int rc = index_room(p, &p->ops_index, p->n_ops, ROOM_ORDINARY, op_hash_at);
    if (rc)
        return rc < 0 ? rc : 0;
    id = (uint32_t)p->n_ops++;
    p->ops[id] = (struct op_count){node, opcode, weight};
    util_htab_set(&p->ops_index, util_htab_free_slot(&p->ops_index, h), id);
    p->ops_stale = 1;
    return 0;
}

int pys_profile_add(pys_profile *p, uint64_t thread, const struct pys_frame *frames, size_t n,
                    uint64_t weight)
{
    struct last_stack *ls = last_stack_of(p, thread);
    if (!ls)
        return PYS_E_NOMEM;
    if (n + 1 > ls->cap) {
        if (resize(p, (void **)&ls->fids, ls->cap, n + 1, sizeof *ls->fids) < 0)
            return PYS_E_NOMEM;
        if (resize(p, (void **)&ls->path, ls->cap, n + 1, sizeof *ls->path) < 0) {
            /* fids grew: keep the counts matching the capacity kept */
            p->bytes -= (uint64_t)(n + 1 - ls->cap) * sizeof *ls->fids;
            return PYS_E_NOMEM;
        }
        ls->cap = n + 1;
    }
    int rc = make_thread_node(p, ls);
    if (rc < 0)
        return rc;
    ls->path[0] = ls->thread_node;
    /* The outer frames shared with the thread's last stack keep their nodes. */
    size_t same = 0;
    while (same < n && same < ls->n &&
           same_frame(&p->frames[ls->fids[same]], &frames[n - 1 - same]))
        same++;
    uint32_t id = ls->path[same];
    for (size_t i = same; i < n; i++) { /* outermost first */
        uint32_t fid, next;
        rc = frame_id(p, &frames[n - 1 - i], ROOM_ORDINARY, &fid);
        if (rc == 0)
            rc = child(p, id, fid, ROOM_ORDINARY, &next);
        if (rc) {
            ls->n = i;
            return rc < 0 ? rc : fold(p, id, ls->thread_node, weight);
        }
        id = next;
        ls->fids[i] = fid;
        ls->path[i + 1] = id;
    }
    ls->n = n;
    p->nodes[id].self += weight;
    p->stale = 1;
    for (size_t i = 0; i < n && p->count_ops; i++)
        if (frames[n - 1 - i].opcode >= 0 &&
            (rc = count_opcode(p, ls->path[i + 1], frames[n - 1 - i].opcode, weight)) < 0)
            return rc;
    return 0;
}

/* Totals from the self counts, and each node's children linked in id order. */
static void sum_totals(pys_profile *p)
{
    for (size_t id = 0; id < p->n; id++) {
        struct pys_profile_node *nd = &p->nodes[id];
        nd->total = nd->self;
        nd->first_child = nd->next_sibling = 0;
    }
    for (size_t id = p->n; id-- > 1;) {
        struct pys_profile_node *nd = &p->nodes[id], *par = &p->nodes[nd->parent];
        par->total += nd->total;
        nd->next_sibling = par->first_child;
        par->first_child = (uint32_t)id;
    }
    p->stale = 0;
}

size_t pys_profile_nodes(const pys_profile *p)
{
    return p->n;
}

const struct pys_profile_node *pys_profile_node(const pys_profile *p, uint32_t id)
{
    if (id >= p->n)
        return NULL;
    /* Totals and links are a cache of the parents and self counts: making
     * them changes nothing the caller can see (the profile is only ever
     * allocated by pys_profile_new, never const itself). */
    if (p->stale)
        sum_totals((pys_profile *)p);
    return &p->nodes[id];
}

int pys_profile_node_peek(const pys_profile *p, uint32_t id, struct pys_profile_node *out)
{
    if (id >= p->n)
        return PYS_E_INVAL;
    const struct pys_profile_node *nd = &p->nodes[id];
    *out = (struct pys_profile_node){nd->parent, nd->frame, 0, 0, nd->self, 0};
    return 0;
}

int pys_profile_is_thread(const pys_profile *p, uint32_t id)
{
    return id != 0 && id < p->n && p->nodes[id].parent == 0;
}

uint64_t pys_profile_thread(const pys_profile *p, uint32_t id)
{
    if (id == 0 || id >= p->n)
        return 0;
    while (p->nodes[id].parent != 0) /* parents have smaller ids: ends */
        id = p->nodes[id].parent;
    size_t lo = 0, hi = p->n_threads; /* threads[] is in node order */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->threads[mid].node < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < p->n_threads && p->threads[lo].node == id ? p->threads[lo].thread : 0;
}

const struct pys_frame *pys_profile_frame(const pys_profile *p, uint32_t frame)
{
    if (frame == PYS_PROFILE_NO_FRAME || frame >= p->n_frames)
        return NULL;
    return &p->frames[frame];
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

static uint64_t ns_hash_at(const void *ctx, uint32_t id)
{
    return util_hash_u64(((const pys_profile *)ctx)->ns_ids[id][0]);
}

/* The id of thread in the ns table, 0 if it has none. */
static uint32_t ns_find(const pys_profile *p, uint64_t thread, uint64_t h)
{
    uint32_t id = 0;
    if (p->ns_index.cap) {
        for (size_t j = util_htab_first(&p->ns_index, h); (id = p->ns_index.slot[j]);
             j = util_htab_next(&p->ns_index, j))
            if (p->ns_ids[id][0] == thread)
                break;
    }
    return id;
}

/* The id of thread in the ns table, made if it has none: 0 if out of memory. */
static uint32_t ns_entry(pys_profile *p, uint64_t thread)
{
    uint64_t h = util_hash_u64(thread);
    uint32_t id = ns_find(p, thread, h);
    if (!id) {
        if (p->n_ns >= PROFILE_MAX_IDS ||
            util_htab_reserve(&p->ns_index, 32, 1, (uint32_t)p->n_ns + 1, ns_hash_at, p) < 0)
            return 0;
        if (p->n_ns + 1 >= p->cap_ns) {
            size_t cap = p->cap_ns ? 2 * p->cap_ns : 16;
            uint64_t(*v)[2] = realloc(p->ns_ids, cap * sizeof *v);
            if (!v)
                return 0;
            p->ns_ids = v;
            const char **names = realloc(p->ns_names, cap * sizeof *names);
            if (!names)
                return 0;
            p->ns_names = names;
            struct pys_thread_states *states = realloc(p->ns_states, cap * sizeof *states);
            if (!states)
                return 0;
            p->ns_states = states;
            p->cap_ns = cap;
        }
        id = (uint32_t)++p->n_ns;
        p->ns_ids[id][0] = thread;
        p->ns_ids[id][1] = 0;
        p->ns_names[id] = NULL;
        memset(&p->ns_states[id], 0, sizeof p->ns_states[id]);
        util_htab_set(&p->ns_index, util_htab_free_slot(&p->ns_index, h), id);
    }
    return id;
}

int pys_profile_set_thread_ns(pys_profile *p, uint64_t thread, uint64_t ns_id)
{
    if (thread == 0)
        return PYS_E_INVAL;
    uint32_t id = ns_entry(p, thread);
    if (!id)
        return PYS_E_NOMEM;
    p->ns_ids[id][1] = ns_id;
    return 0;
}

int pys_profile_set_thread_name(pys_profile *p, uint64_t thread, const char *name)
{
    if (thread == 0)
        return PYS_E_INVAL;
    uint32_t id = ns_entry(p, thread);
    if (!id)
        return PYS_E_NOMEM;
    p->ns_names[id] = name;
    return 0;
}

const char *pys_profile_thread_name(const pys_profile *p, uint64_t thread)
{
    if (thread == 0)
        return NULL;
    uint32_t id = ns_find(p, thread, util_hash_u64(thread));
    return id ? p->ns_names[id] : NULL;
}

uint64_t pys_profile_thread_ns(const pys_profile *p, uint64_t thread)
{
    if (thread == 0)
        return 0;
    uint32_t id = ns_find(p, thread, util_hash_u64(thread));
    return id ? p->ns_ids[id][1] : 0;
}

/* --- instructions per node ------------------------------------------------ */

static int cmp_ops(const void *a, const void *b)
{
    const struct op_count *x = a, *y = b;
    if (x->node != y->node)
        return x->node < y->node ? -1 : 1;
    return x->opcode < y->opcode ? -1 : x->opcode > y->opcode;
}

/* ops_order made again if entries were made since: 0 or PYS_E_NOMEM. */
static int ops_sorted(pys_profile *p)
{
    if (!p->ops_stale)
        return 0;
    size_t n = p->n_ops ? p->n_ops - 1 : 0;
    struct op_count *order = realloc(p->ops_order, (n ? n : 1) * sizeof *order);
    if (!order)
        return PYS_E_NOMEM;
    p->bytes += (uint64_t)n * sizeof *order;
    p->bytes -= (uint64_t)p->n_order * sizeof *order;
    p->ops_order = order;
    p->n_order = n;
    memcpy(order, p->ops + 1, n * sizeof *order);
    qsort(order, n, sizeof *order, cmp_ops);
    p->ops_stale = 0;
    return 0;
}

int pys_profile_node_opcodes(const pys_profile *p, uint32_t id, struct pys_opcode_count *out,
                             size_t max)
{
    /* The order is a cache of the entries, as the totals are of the
     * counts (pys_profile_node). */
    pys_profile *q = (pys_profile *)p;
    int rc = ops_sorted(q);
    if (rc < 0)
        return rc;
    const struct op_count *o = p->ops_order;
    size_t lo = 0, hi = p->n_order;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (o[mid].node < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t k = 0;
    for (; lo < p->n_order && o[lo].node == id; lo++, k++)
        if (k < max)
            out[k] = (struct pys_opcode_count){o[lo].opcode, o[lo].count};
    return k > (size_t)INT32_MAX ? INT32_MAX : (int)k;
}

/* --- threads' states ------------------------------------------------------ */

int pys_profile_count_states(pys_profile *p, uint64_t thread, uint32_t status,
                             const struct pys_frame *frames, size_t n, uint64_t weight)
{
    if (thread == 0)
        return PYS_E_INVAL;
    uint32_t id = ns_entry(p, thread);
    if (!id)
        return PYS_E_NOMEM;
    struct pys_thread_states *st = &p->ns_states[id];
    int gc = 0;
    for (size_t i = 0; i < n && !gc; i++)
        gc = frames[i].kind == PYS_FRAME_GC;
    st->samples += weight;
    st->gil += status & PYS_THREAD_HAS_GIL ? weight : 0;
    st->gil_wait += status & PYS_THREAD_GIL_REQUESTED ? weight : 0;
    if (!(status & PYS_THREAD_UNKNOWN)) {
        st->cpu_known += weight;
        st->cpu += status & PYS_THREAD_ON_CPU ? weight : 0;
    }
    st->gc += gc ? weight : 0;
    st->exception += status & PYS_THREAD_HAS_EXCEPTION ? weight : 0;
    return 0;
}

int pys_profile_thread_states(const pys_profile *p, uint64_t thread, struct pys_thread_states *out)
{
    uint32_t id = thread ? ns_find(p, thread, util_hash_u64(thread)) : 0;
    if (!id || p->ns_states[id].samples == 0)
        return PYS_E_NOTFOUND;
    *out = p->ns_states[id];
    return 0;
}
