/*
 * Unit tests of the profile trie (core/profile.c): the counts it keeps must
 * be those of a plain recount of the stacks added, whatever the order in
 * which threads and stacks arrive (the trie reuses each thread's last path).
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
        if (nd->is_thread || !same_frame(&nd->frame, &s->f[i + (s->n - d)]))
            return 0;
        id = nd->parent;
    }
    const struct pys_profile_node *nd = pys_profile_node(p, id);
    return nd->is_thread && nd->thread == s->thread;
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
        assert_int_equal(
            pys_profile_add(p, stacks[k].thread, stacks[k].f, stacks[k].n, 1 + k % 2), 0);
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
        for (uint32_t up = id; !pys_profile_node(p, up)->is_thread; up = pys_profile_node(p, up)->parent)
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
        if (nd->is_thread || nd->thread != 7)
            continue;
        if (nd->frame.qualname == funcs[0])
            assert_int_equal(nd->total, 102);
        if (nd->frame.qualname == funcs[3])
            assert_int_equal(nd->self, 101);
        if (nd->frame.qualname == funcs[1])
            assert_int_equal(nd->self, 1);
    }
    /* An empty stack counts on the thread's node. */
    assert_int_equal(pys_profile_add(p, 9, NULL, 0, 4), 0);
    const struct pys_profile_node *last = pys_profile_node(p, (uint32_t)pys_profile_nodes(p) - 1);
    assert_true(last->is_thread);
    assert_int_equal(last->self, 4);
    assert_int_equal(last->total, 4);
    /* Totals looked at, then more samples: they are summed again. */
    assert_int_equal(pys_profile_node(p, 0)->total, 103 + 4);
    assert_int_equal(pys_profile_add(p, 9, s2, 2, 3), 0);
    assert_int_equal(pys_profile_node(p, 0)->total, 103 + 4 + 3);
    assert_int_equal(pys_profile_node(p, (uint32_t)pys_profile_nodes(p) - 1)->total, 3);
    pys_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_match_a_recount),
        cmocka_unit_test(test_repeats_and_interleaving),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
