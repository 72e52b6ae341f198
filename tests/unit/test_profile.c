/*
 * Unit tests of the profile trie (core/profile.c): the counts it keeps must
 * be those of a plain recount of the stacks added, whatever the order in
 * which threads and stacks arrive (the trie reuses each thread's last path);
 * frames are stored once; past its memory bound the profile folds new
 * stacks into their callers and every total stays right.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <pystrobe/pystrobe.h>

/* What a node costs is what bounds a profile of many distinct stacks. */
_Static_assert(sizeof(struct pys_profile_node) <= 32, "a profile node is at most 32 bytes");

#define NAMES 6
#define MAX_DEPTH 12
#define STACKS 5000

static const char *const files[NAMES] = {"a.py", "b.py", "c.py", "d.py", "e.py", "f.py"};
static const char *const funcs[NAMES] = {"main", "run", "work", "leaf", "<lambda>", "gen"};

struct stack {
    uint64_t thread;
    size_t n;
    struct pys_frame f[MAX_DEPTH]; /* innermost first, as a snapshot gives them */
};

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint32_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static struct pys_frame frame(int name, int line)
{
    struct pys_frame f;
    memset(&f, 0, sizeof f);
    f.filename = files[name];
    f.qualname = funcs[name];
    f.firstlineno = 1 + name;
    f.lineno = line;
    f.end_lineno = line;
    f.col = f.end_col = -1;
    f.kind = PYS_FRAME_PYTHON;
    return f;
}

/* A stack that shares a random number of outer frames with prev (how a
 * sampled thread's stacks look), over a small vocabulary. */
static void random_stack(struct stack *s, const struct stack *prev)
{
    size_t keep = prev && prev->n ? next_rand() % (prev->n + 1) : 0;
    s->n = 1 + next_rand() % MAX_DEPTH;
    if (keep > s->n)
        keep = s->n;
    for (size_t i = 0; i < s->n; i++) { /* i counts from the outermost */
        struct pys_frame *dst = &s->f[s->n - 1 - i];
        if (i < keep)
            *dst = prev->f[prev->n - 1 - i];
        else
            *dst = frame((int)(next_rand() % NAMES), 1 + (int)(next_rand() % 3));
    }
}

static int same_frame(const struct pys_frame *a, const struct pys_frame *b)
{
    return a->filename == b->filename && a->qualname == b->qualname && a->lineno == b->lineno &&
           a->firstlineno == b->firstlineno && a->kind == b->kind;
}

/* Does node id sit at the end of stack s's path (thread, then frames
 * outermost first, up to depth d frames)? */
static int node_is(const pys_profile *p, uint32_t id, const struct stack *s, size_t d)
{
    for (size_t i = 0; i < d; i++) {
        const struct pys_profile_node *nd = pys_profile_node(p, id);
        const struct pys_frame *fr = pys_profile_frame(p, nd->frame);
        if (pys_profile_is_thread(p, id) || !fr || !same_frame(fr, &s->f[i + (s->n - d)]))
            return 0;
        id = nd->parent;
    }
    return pys_profile_is_thread(p, id) && pys_profile_thread(p, id) == s->thread;
}

/* Is the frame path of stack a (d frames deep) a prefix of stack b's? */
static int prefix_of(const struct stack *a, size_t d, const struct stack *b)
{
    if (a->thread != b->thread || d > b->n)
        return 0;
    for (size_t i = 0; i < d; i++)
        if (!same_frame(&a->f[a->n - 1 - i], &b->f[b->n - 1 - i]))
            return 0;
    return 1;
}

static void test_counts_match_a_recount(void **state)
{
    (void)state;
    static struct stack stacks[STACKS];
    struct stack *last[3] = {NULL, NULL, NULL};
    pys_profile *p = pys_profile_new();
    assert_non_null(p);

    for (size_t k = 0; k < STACKS; k++) {
        int t = (int)(next_rand() % 3);
        stacks[k].thread = 100 + (uint64_t)t;
        random_stack(&stacks[k], last[t]);
        last[t] = &stacks[k];
        assert_int_equal(pys_profile_add(p, stacks[k].thread, stacks[k].f, stacks[k].n, 1 + k % 2),
                         0);
    }

    /* Every node's counts are the recount of the stacks through it. */
    uint64_t all = 0;
    for (size_t k = 0; k < STACKS; k++)
        all += 1 + k % 2;
    assert_int_equal(pys_profile_node(p, 0)->total, all);
    size_t nodes = pys_profile_nodes(p);
    for (uint32_t id = 1; id < nodes; id++) {
        const struct pys_profile_node *nd = pys_profile_node(p, id);
        /* Find the node's stack path: any added stack that ends here or
         * passes through; recount self and total over all of them. */
        size_t d = 0;
        for (uint32_t up = id; !pys_profile_is_thread(p, up); up = pys_profile_node(p, up)->parent)
            d++;
        const struct stack *witness = NULL;
        for (size_t k = 0; k < STACKS && !witness; k++)
            if (stacks[k].n >= d) {
                struct stack cut = stacks[k];
                cut.n = d;
                memmove(cut.f, stacks[k].f + (stacks[k].n - d), d * sizeof cut.f[0]);
                if (node_is(p, id, &cut, d))
                    witness = &stacks[k];
            }
        assert_non_null(witness); /* no node without a stack */
        uint64_t self = 0, total = 0;
        for (size_t k = 0; k < STACKS; k++) {
            if (prefix_of(witness, d, &stacks[k])) {
                total += 1 + k % 2;
                if (stacks[k].n == d)
                    self += 1 + k % 2;
            }
        }
        assert_int_equal(nd->total, total);
        assert_int_equal(nd->self, self);
    }
    pys_profile_free(p);
}

/* The same stack over and over makes no new nodes; a thread that comes
 * back after others keeps its own path. */
/* pys_profile_node_peek between additions: each node's current self count
 * (they sum to the weight added so far) with its parent and frame, as
 * pys_profile_node gives them once asked; nothing past the last node. */
static void test_peek_between_additions(void **state)
{
    (void)state;
    uint64_t rng_was = rng; /* the later tests draw what they drew before */
    struct stack s[3] = {{0}};
    pys_profile *p = pys_profile_new();
    assert_non_null(p);
    uint64_t added = 0;
    for (size_t k = 0; k < 300; k++) {
        int t = (int)(next_rand() % 3);
        struct stack prev = s[t];
        random_stack(&s[t], prev.n ? &prev : NULL);
        s[t].thread = 100 + (uint64_t)t;
        assert_int_equal(pys_profile_add(p, s[t].thread, s[t].f, s[t].n, 1 + k % 3), 0);
        added += 1 + k % 3;
        uint64_t sum = 0;
        for (uint32_t id = 0; id < pys_profile_nodes(p); id++) {
            struct pys_profile_node nd;
            assert_int_equal(pys_profile_node_peek(p, id, &nd), 0);
            sum += nd.self;
        }
        assert_int_equal(sum, added);
    }
    size_t n = pys_profile_nodes(p);
    struct pys_profile_node *peeked = calloc(n, sizeof *peeked);
    assert_non_null(peeked);
    for (uint32_t id = 0; id < n; id++)
        assert_int_equal(pys_profile_node_peek(p, id, &peeked[id]), 0);
    for (uint32_t id = 0; id < n; id++) {
        const struct pys_profile_node *nd = pys_profile_node(p, id);
        assert_int_equal(peeked[id].parent, nd->parent);
        assert_int_equal(peeked[id].frame, nd->frame);
        assert_int_equal(peeked[id].self, nd->self);
        assert_int_equal(peeked[id].total, 0);
        assert_int_equal(peeked[id].first_child, 0);
        assert_int_equal(peeked[id].next_sibling, 0);
    }
    struct pys_profile_node past = {.self = 7};
    assert_int_equal(pys_profile_node_peek(p, (uint32_t)n, &past), PYS_E_INVAL);
    assert_int_equal(past.self, 7);
    free(peeked);
    pys_profile_free(p);
    rng = rng_was;
}

static void test_repeats_and_interleaving(void **state)
{
    (void)state;
    pys_profile *p = pys_profile_new();
    assert_non_null(p);
    struct pys_frame s1[3] = {frame(3, 1), frame(2, 1), frame(0, 1)};
    struct pys_frame s2[2] = {frame(1, 2), frame(0, 1)};
    for (int i = 0; i < 100; i++)
        assert_int_equal(pys_profile_add(p, 7, s1, 3, 1), 0);
    size_t nodes = pys_profile_nodes(p);
    assert_int_equal(nodes, 1 + 1 + 3);
    assert_int_equal(pys_profile_add(p, 8, s1, 3, 1), 0);
    assert_int_equal(pys_profile_add(p, 7, s2, 2, 1), 0);
    assert_int_equal(pys_profile_add(p, 7, s1, 3, 1), 0);
    assert_int_equal(pys_profile_nodes(p), nodes + 4 + 1);
    /* Thread 7: main 102, work 101, leaf 101 (self), run 1 (self). */
    for (uint32_t id = 1; id < pys_profile_nodes(p); id++) {
        const struct pys_profile_node *nd = pys_profile_node(p, id);
        if (pys_profile_is_thread(p, id) || pys_profile_thread(p, id) != 7)
            continue;
        const char *name = pys_profile_frame(p, nd->frame)->qualname;
        if (name == funcs[0])
            assert_int_equal(nd->total, 102);
        if (name == funcs[3])
            assert_int_equal(nd->self, 101);
        if (name == funcs[1])
            assert_int_equal(nd->self, 1);
    }
    /* An empty stack counts on the thread's node. */
    assert_int_equal(pys_profile_add(p, 9, NULL, 0, 4), 0);
    const struct pys_profile_node *last = pys_profile_node(p, (uint32_t)pys_profile_nodes(p) - 1);
    assert_true(pys_profile_is_thread(p, (uint32_t)pys_profile_nodes(p) - 1));
    assert_int_equal(pys_profile_thread(p, (uint32_t)pys_profile_nodes(p) - 1), 9);
    assert_int_equal(last->self, 4);
    assert_int_equal(last->total, 4);
    /* Totals looked at, then more samples: they are summed again. */
    assert_int_equal(pys_profile_node(p, 0)->total, 103 + 4);
    assert_int_equal(pys_profile_add(p, 9, s2, 2, 3), 0);
    assert_int_equal(pys_profile_node(p, 0)->total, 103 + 4 + 3);
    assert_int_equal(pys_profile_node(p, (uint32_t)pys_profile_nodes(p) - 1)->total, 3);
    pys_profile_free(p);
}

/* Equal frames share one id wherever they are in the trie; frames that
 * differ in a field of their identity do not; fields outside it (columns)
 * do not make a new frame. */
static void test_frames_are_interned_once(void **state)
{
    (void)state;
    pys_profile *p = pys_profile_new();
    assert_non_null(p);
    struct pys_frame a[3] = {frame(3, 1), frame(2, 1), frame(0, 1)};
    struct pys_frame b[3] = {frame(2, 1), frame(3, 1), frame(0, 1)}; /* same frames, other order */
    struct pys_frame c[2] = {frame(3, 2), frame(0, 1)};              /* leaf at another line */
    b[0].col = 4; /* not part of a frame's identity */
    b[0].lasti = 12;
    assert_int_equal(pys_profile_add(p, 1, a, 3, 1), 0);
    assert_int_equal(pys_profile_add(p, 2, a, 3, 1), 0);
    assert_int_equal(pys_profile_add(p, 1, b, 3, 1), 0);
    assert_int_equal(pys_profile_add(p, 1, c, 2, 1), 0);

    uint32_t id_of[NAMES][4] = {{0}}; /* frame id by name and line */
    size_t frame_nodes = 0;
    for (uint32_t id = 1; id < pys_profile_nodes(p); id++) {
        const struct pys_profile_node *nd = pys_profile_node(p, id);
        const struct pys_frame *fr = pys_profile_frame(p, nd->frame);
        if (pys_profile_is_thread(p, id)) {
            assert_int_equal(nd->frame, PYS_PROFILE_NO_FRAME);
            assert_null(fr);
            continue;
        }
        assert_non_null(fr);
        frame_nodes++;
        int name = fr->firstlineno - 1;
        assert_ptr_equal(fr->qualname, funcs[name]);
        assert_ptr_equal(fr->filename, files[name]);
        if (!id_of[name][fr->lineno])
            id_of[name][fr->lineno] = nd->frame;
        assert_int_equal(nd->frame, id_of[name][fr->lineno]);
    }
    /* Nodes: a under two threads (6), b's two new ones, c's one new leaf. */
    assert_int_equal(frame_nodes, 3 + 3 + 2 + 1);
    /* Four distinct frames: main:1, work:1, leaf:1 and leaf:2. */
    size_t distinct = 0;
    for (int i = 0; i < NAMES; i++)
        for (int l = 0; l < 4; l++)
            if (id_of[i][l]) {
                distinct++;
                for (int j = 0; j < NAMES; j++)
                    for (int m = 0; m < 4; m++)
                        if ((j != i || m != l) && id_of[j][m])
                            assert_int_not_equal(id_of[i][l], id_of[j][m]);
            }
    assert_int_equal(distinct, 4);
    /* The frame's other fields are those of its first sample. */
    assert_int_equal(pys_profile_frame(p, id_of[2][1])->col, -1);
    assert_null(pys_profile_frame(p, PYS_PROFILE_NO_FRAME));
    assert_null(pys_profile_frame(p, 0xffffff));
    pys_profile_free(p);
}

/* The same frames with their names at other addresses (another session's:
 * a program and the one it exec'd feed one profile) are the same frames and
 * nodes, which carry the names' first addresses; a new frame met first
 * under the other addresses takes the first addresses too. */
static void test_frames_of_another_feeder(void **state)
{
    (void)state;
    pys_profile *p = pys_profile_new();
    assert_non_null(p);
    struct pys_frame a[3] = {frame(3, 1), frame(2, 1), frame(0, 1)};
    struct pys_frame b[3], c[3];
    char *copies[6];
    for (int i = 0; i < 3; i++) {
        b[i] = a[i];
        b[i].filename = copies[2 * i] = strdup(a[i].filename);
        b[i].qualname = copies[2 * i + 1] = strdup(a[i].qualname);
        assert_non_null(copies[2 * i]);
        assert_non_null(copies[2 * i + 1]);
        c[i] = b[i];
    }
    c[0].lineno = 2; /* leaf:2, met under the copies' addresses only */
    assert_int_equal(pys_profile_add(p, 1, a, 3, 1), 0);
    assert_int_equal(pys_profile_add(p, 1, b, 3, 2), 0);
    assert_int_equal(pys_profile_add(p, 1, b, 3, 4), 0); /* the copies known now */
    assert_int_equal(pys_profile_add(p, 2, b, 3, 8), 0); /* a thread that met only them */
    assert_int_equal(pys_profile_add(p, 1, c, 3, 16), 0);
    assert_int_equal(pys_profile_add(p, 1, a, 3, 32), 0);

    uint32_t ids[4] = {0};
    size_t frame_nodes = 0, distinct = 0;
    uint64_t leaf1_self = 0;
    for (uint32_t id = 1; id < pys_profile_nodes(p); id++) {
        const struct pys_profile_node *nd = pys_profile_node(p, id);
        if (pys_profile_is_thread(p, id))
            continue;
        const struct pys_frame *fr = pys_profile_frame(p, nd->frame);
        assert_non_null(fr);
        frame_nodes++;
        int name = fr->firstlineno - 1;
        assert_ptr_equal(fr->qualname, funcs[name]);
        assert_ptr_equal(fr->filename, files[name]);
        size_t k;
        for (k = 0; k < distinct && ids[k] != nd->frame; k++)
            ;
        if (k == distinct) {
            assert_true(distinct < 4);
            ids[distinct++] = nd->frame;
        }
        if (name == 3 && fr->lineno == 1 && pys_profile_thread(p, id) == 1)
            leaf1_self = nd->self;
    }
    /* main:1, work:1, leaf:1, leaf:2; thread 1's three nodes and leaf:2's,
     * thread 2's three. */
    assert_int_equal(distinct, 4);
    assert_int_equal(frame_nodes, 3 + 1 + 3);
    assert_int_equal(leaf1_self, 1 + 2 + 4 + 32);
    pys_profile_free(p);
    for (int i = 0; i < 6; i++)
        free(copies[i]);
}

/* Per node, the trie of many distinct stacks costs its node and a share of
 * the lookup table, not a frame. */
static void test_memory_per_node(void **state)
{
    (void)state;
    pys_profile *p = pys_profile_new();
    assert_non_null(p);
    struct stack s, prev = {0};
    for (int k = 0; k < 100000; k++) {
        s.thread = 1;
        random_stack(&s, &prev);
        assert_int_equal(pys_profile_add(p, s.thread, s.f, s.n, 1), 0);
        prev = s;
    }
    size_t nodes = pys_profile_nodes(p);
    assert_true(nodes > 50000);
    /* 32 bytes a node and 4 a hash slot; the tables at most double past
     * what they hold: 2 * (32 + 2 * 2 * 4) = 96. */
    uint64_t per_node = pys_profile_memory(p) / nodes;
    print_message("%zu nodes, %llu bytes a node\n", nodes, (unsigned long long)per_node);
    assert_true(per_node <= 96);
    assert_int_equal(pys_profile_info_get(p)->folded, 0);
    pys_profile_free(p);
}

/* A stack's frames under thread t, as the recount sees them. */
struct recount {
    uint64_t all, by_thread[4];
};

static uint32_t thread_node_of(const pys_profile *p, uint64_t thread)
{
    for (uint32_t id = 1; id < pys_profile_nodes(p); id++)
        if (pys_profile_is_thread(p, id) && pys_profile_thread(p, id) == thread)
            return id;
    return 0;
}

/* Every total of p against the recount; the fold markers are leaves that
 * hold exactly the folded samples. */
static void check_folded_totals(const pys_profile *p, const struct recount *rc)
{
    assert_int_equal(pys_profile_node(p, 0)->total, rc->all);
    for (uint64_t t = 0; t < 4; t++) {
        uint32_t tn = thread_node_of(p, 100 + t);
        assert_int_not_equal(tn, 0);
        assert_int_equal(pys_profile_node(p, tn)->total, rc->by_thread[t]);
    }
    uint64_t in_markers = 0;
    size_t markers = 0;
    for (uint32_t id = 1; id < pys_profile_nodes(p); id++) {
        const struct pys_profile_node *nd = pys_profile_node(p, id);
        uint64_t children = 0;
        for (uint32_t c = nd->first_child; c; c = pys_profile_node(p, c)->next_sibling)
            children += pys_profile_node(p, c)->total;
        assert_int_equal(nd->total, nd->self + children);
        const struct pys_frame *fr = pys_profile_frame(p, nd->frame);
        if (!fr || fr->kind != PYS_FRAME_FOLDED)
            continue;
        assert_string_equal(fr->qualname, "<folded at memory limit>");
        assert_string_equal(fr->filename, "~");
        assert_int_equal(nd->first_child, 0);
        assert_true(nd->self > 0);
        in_markers += nd->self;
        markers++;
    }
    assert_true(markers > 0);
    assert_int_equal(in_markers, pys_profile_info_get(p)->folded);
}

/* Past a tiny bound: stacks already in the trie are still counted where
 * they are, new ones under a marker below their deepest known caller, the
 * totals are the recount's, and the memory stays in the bound. */
static void test_folds_past_a_tiny_bound(void **state)
{
    (void)state;
    const uint64_t bound = 64 << 10;
    pys_profile *p = pys_profile_new();
    assert_non_null(p);
    pys_profile_set_max_memory(p, bound);
    struct recount rc = {0};
    struct pys_frame known[3] = {frame(3, 1), frame(2, 1), frame(0, 1)};
    assert_int_equal(pys_profile_add(p, 100, known, 3, 1), 0);
    rc.all++;
    rc.by_thread[0]++;

    struct stack s, prev[4] = {{0}};
    for (int k = 0; k < 30000; k++) {
        int t = (int)(next_rand() % 4);
        s.thread = 100 + (uint64_t)t;
        random_stack(&s, &prev[t]);
        uint64_t w = 1 + (uint64_t)(k % 3);
        assert_int_equal(pys_profile_add(p, s.thread, s.f, s.n, w), 0);
        rc.all += w;
        rc.by_thread[t] += w;
        prev[t] = s;
    }
    uint64_t folded = pys_profile_info_get(p)->folded;
    assert_true(folded > 0);
    /* What each thread's last stack may take past the bound. */
    assert_true(pys_profile_memory(p) <= bound + 4 * 2 * (MAX_DEPTH + 1) * sizeof(uint32_t) + 4096);
    size_t nodes = pys_profile_nodes(p);

    /* The known stack again: counted at its leaf, not folded. */
    uint32_t leaf = 0;
    for (uint32_t id = 1; id < nodes && !leaf; id++) {
        uint32_t up = id;
        int k = 0;
        for (; k < 3 && !pys_profile_is_thread(p, up); k++, up = pys_profile_node(p, up)->parent)
            if (!same_frame(pys_profile_frame(p, pys_profile_node(p, up)->frame), &known[k]))
                break;
        if (k == 3 && pys_profile_is_thread(p, up) && pys_profile_thread(p, up) == 100)
            leaf = id;
    }
    assert_int_not_equal(leaf, 0);
    uint64_t before = pys_profile_node(p, leaf)->self;
    assert_int_equal(pys_profile_add(p, 100, known, 3, 5), 0);
    rc.all += 5;
    rc.by_thread[0] += 5;
    assert_int_equal(pys_profile_node(p, leaf)->self, before + 5);
    assert_int_equal(pys_profile_info_get(p)->folded, folded);

    /* A callee never seen below it: under the known leaf's marker (made
     * now if the reserve has room, else under the nearest caller's). */
    struct pys_frame deeper[4] = {frame(5, 3), frame(3, 1), frame(2, 1), frame(0, 1)};
    deeper[0].qualname = "never seen";
    assert_int_equal(pys_profile_add(p, 100, deeper, 4, 3), 0);
    rc.all += 3;
    rc.by_thread[0] += 3;
    assert_int_equal(pys_profile_info_get(p)->folded, folded + 3);
    uint32_t under = leaf;
    for (;;) {
        uint32_t c = pys_profile_node(p, under)->first_child;
        while (c && pys_profile_frame(p, pys_profile_node(p, c)->frame)->kind != PYS_FRAME_FOLDED)
            c = pys_profile_node(p, c)->next_sibling;
        if (c) {
            assert_true(pys_profile_node(p, c)->self >= 3);
            break;
        }
        assert_false(pys_profile_is_thread(p, under)); /* a thread's marker is always made */
        under = pys_profile_node(p, under)->parent;
    }
    check_folded_totals(p, &rc);
    pys_profile_free(p);
}

/* With no room for anything, every stack is counted under its thread's
 * marker. */
static void test_folds_into_the_thread_with_no_room(void **state)
{
    (void)state;
    pys_profile *p = pys_profile_new();
    assert_non_null(p);
    pys_profile_set_max_memory(p, 1);
    struct recount rc = {0};
    struct stack s, prev = {0};
    for (int k = 0; k < 1000; k++) {
        int t = k % 4;
        s.thread = 100 + (uint64_t)t;
        random_stack(&s, &prev);
        assert_int_equal(pys_profile_add(p, s.thread, s.f, s.n, 2), 0);
        rc.all += 2;
        rc.by_thread[t] += 2;
        prev = s;
    }
    /* The root, four threads, and one marker under each. */
    assert_int_equal(pys_profile_nodes(p), 1 + 4 + 4);
    /* Empty stacks are counted on the thread node itself. */
    uint64_t empty = 0;
    for (uint32_t id = 1; id < pys_profile_nodes(p); id++)
        if (pys_profile_is_thread(p, id))
            empty += pys_profile_node(p, id)->self;
    assert_int_equal(pys_profile_info_get(p)->folded + empty, rc.all);
    check_folded_totals(p, &rc);

    /* Unbounded, the same profile folds nothing. */
    pys_profile *q = pys_profile_new();
    assert_non_null(q);
    pys_profile_set_max_memory(q, 0);
    for (int k = 0; k < 1000; k++) {
        random_stack(&s, &prev);
        assert_int_equal(pys_profile_add(q, 1, s.f, s.n, 1), 0);
        prev = s;
    }
    assert_int_equal(pys_profile_info_get(q)->folded, 0);
    pys_profile_free(q);
    pys_profile_free(p);
}

/* Each node counts the samples at each instruction of its frame, the
 * callers' as well as the leaf's; a profile not asked to counts none. */
static void test_opcode_counts(void **state)
{
    (void)state;
    pys_profile *p = pys_profile_new(), *off = pys_profile_new();
    assert_non_null(p);
    assert_non_null(off);
    pys_profile_count_opcodes(p, 1);
    struct pys_frame f[2] = {frame(1, 10), frame(0, 5)}; /* run called by main */
    const int leaf_ops[] = {7, 7, 9, 7}, caller_op = 171;
    f[1].opcode = caller_op;
    for (size_t k = 0; k < sizeof leaf_ops / sizeof leaf_ops[0]; k++) {
        f[0].opcode = leaf_ops[k];
        assert_int_equal(pys_profile_add(p, 1, f, 2, k == 3 ? 2 : 1), 0);
        assert_int_equal(pys_profile_add(off, 1, f, 2, 1), 0);
    }
    f[0].opcode = -1; /* not read: not counted */
    assert_int_equal(pys_profile_add(p, 1, f, 2, 1), 0);
    struct pys_opcode_count c[4];
    uint32_t run = 0, main_ = 0;
    for (uint32_t id = 1; id < pys_profile_nodes(p); id++) {
        const struct pys_frame *fr = pys_profile_frame(p, pys_profile_node(p, id)->frame);
        if (fr && fr->qualname == funcs[1])
            run = id;
        if (fr && fr->qualname == funcs[0])
            main_ = id;
    }
    assert_int_equal(pys_profile_node_opcodes(p, run, c, 4), 2);
    assert_int_equal(c[0].opcode, 7);
    assert_int_equal(c[0].count, 4); /* 1 + 1 + 2 */
    assert_int_equal(c[1].opcode, 9);
    assert_int_equal(c[1].count, 1);
    assert_int_equal(pys_profile_node_opcodes(p, main_, c, 1), 1);
    assert_int_equal(c[0].opcode, caller_op);
    assert_int_equal(c[0].count, 6);
    assert_int_equal(pys_profile_node_opcodes(p, 0, c, 4), 0);
    for (uint32_t id = 0; id < pys_profile_nodes(off); id++)
        assert_int_equal(pys_profile_node_opcodes(off, id, c, 4), 0);
    pys_profile_free(off);
    pys_profile_free(p);
}

/* Each thread's states, counted by weight; a <GC> frame anywhere on the
 * stack counts as in GC; the CPU counts only where the state was read;
 * thread 0 and threads never counted have none. */
static void test_thread_states(void **state)
{
    (void)state;
    pys_profile *p = pys_profile_new();
    assert_non_null(p);
    struct pys_frame f[2] = {frame(0, 1), frame(1, 2)};
    assert_int_equal(
        pys_profile_count_states(p, 7, PYS_THREAD_HAS_GIL | PYS_THREAD_ON_CPU, f, 2, 3), 0);
    f[0].kind = PYS_FRAME_GC;
    assert_int_equal(pys_profile_count_states(p, 7,
                                              PYS_THREAD_GIL_REQUESTED | PYS_THREAD_UNKNOWN |
                                                  PYS_THREAD_HAS_EXCEPTION,
                                              f, 2, 1),
                     0);
    assert_int_equal(pys_profile_count_states(p, 8, 0, f, 1, 1), 0);
    struct pys_thread_states st;
    assert_int_equal(pys_profile_thread_states(p, 7, &st), 0);
    assert_int_equal(st.samples, 4);
    assert_int_equal(st.gil, 3);
    assert_int_equal(st.gil_wait, 1);
    assert_int_equal(st.cpu_known, 3);
    assert_int_equal(st.cpu, 3);
    assert_int_equal(st.gc, 1);
    assert_int_equal(st.exception, 1);
    assert_int_equal(pys_profile_thread_states(p, 8, &st), 0);
    assert_int_equal(st.samples, 1);
    assert_int_equal(st.gc, 1);
    assert_int_equal(st.cpu_known, 1);
    assert_int_equal(st.cpu, 0);
    assert_int_equal(pys_profile_count_states(p, 0, 0, f, 1, 1), PYS_E_INVAL);
    assert_int_equal(pys_profile_thread_states(p, 0, &st), PYS_E_NOTFOUND);
    assert_int_equal(pys_profile_thread_states(p, 9, &st), PYS_E_NOTFOUND);
    /* A name set first keeps its states table entry consistent. */
    assert_int_equal(pys_profile_set_thread_name(p, 10, "x"), 0);
    assert_int_equal(pys_profile_thread_states(p, 10, &st), PYS_E_NOTFOUND);
    pys_profile_free(p);
}

/* The sampling loop (cli/record_loop.c) looks through a stack for a <GC>
 * frame only while its interpreter ran a collection (pys_interp.gc_running,
 * whose promise is that only then may a stack hold one). On snapshots that
 * keep the promise, with the <GC> frame anywhere on the stack or nowhere,
 * the states so counted are those of looking through every stack. */
static void test_states_gated_on_gc_running(void **state)
{
    (void)state;
    pys_profile *all = pys_profile_new(), *gated = pys_profile_new();
    assert_non_null(all);
    assert_non_null(gated);
    struct pys_frame f[MAX_DEPTH];
    for (int k = 0; k < 3000; k++) {
        struct pys_interp in = {.gc_running = next_rand() % 4 == 0};
        size_t n = 1 + next_rand() % MAX_DEPTH;
        for (size_t i = 0; i < n; i++)
            f[i] = frame((int)(next_rand() % NAMES), 1 + (int)(next_rand() % 9));
        /* While a collection runs, one thread in three is the one running
         * it; its <GC> frame sits above the frame that started it. */
        if (in.gc_running && next_rand() % 3 == 0)
            f[next_rand() % n].kind = PYS_FRAME_GC;
        uint64_t thread = 1 + next_rand() % 4, weight = 1 + next_rand() % 3;
        uint32_t status = next_rand() & (PYS_THREAD_HAS_GIL | PYS_THREAD_ON_CPU |
                                         PYS_THREAD_UNKNOWN | PYS_THREAD_GIL_REQUESTED |
                                         PYS_THREAD_HAS_EXCEPTION);
        assert_int_equal(pys_profile_count_states(all, thread, status, f, n, weight), 0);
        assert_int_equal(
            pys_profile_count_states(gated, thread, status, f, in.gc_running ? n : 0, weight), 0);
    }
    uint64_t gc = 0;
    for (uint64_t thread = 1; thread <= 4; thread++) {
        struct pys_thread_states a, b;
        assert_int_equal(pys_profile_thread_states(all, thread, &a), 0);
        assert_int_equal(pys_profile_thread_states(gated, thread, &b), 0);
        assert_memory_equal(&a, &b, sizeof a);
        gc += a.gc;
    }
    assert_true(gc > 0); /* the <GC> frames were counted, both ways */
    pys_profile_free(all);
    pys_profile_free(gated);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_match_a_recount),
        cmocka_unit_test(test_peek_between_additions),
        cmocka_unit_test(test_repeats_and_interleaving),
        cmocka_unit_test(test_frames_are_interned_once),
        cmocka_unit_test(test_frames_of_another_feeder),
        cmocka_unit_test(test_memory_per_node),
        cmocka_unit_test(test_folds_past_a_tiny_bound),
        cmocka_unit_test(test_folds_into_the_thread_with_no_room),
        cmocka_unit_test(test_opcode_counts),
        cmocka_unit_test(test_thread_states),
        cmocka_unit_test(test_states_gated_on_gc_running),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
