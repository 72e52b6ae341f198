/*
 * funcs: the functions of a profile, as the writers that name functions
 * rather than stack nodes (speedscope, pprof, heatmap) see them. A function
 * is (co_filename, co_firstlineno, co_qualname) as in output/pstats.c, so
 * that every writer's per-function totals agree with the pstats output;
 * markers (<native>, <GC>, ...) are functions of file "~" and line 0.
 */
#ifndef PYSTROBE_OUTPUT_FUNCS_H
#define PYSTROBE_OUTPUT_FUNCS_H

#include <stddef.h>
#include <stdint.h>

#include <pystrobe/pystrobe.h>

#include "util/hashtab.h"

/* No function: the root and the thread nodes. */
#define OUT_NO_FUNC UINT32_MAX

struct out_func {
    const char *filename, *qualname; /* the profile's strings */
    int32_t firstlineno;             /* 0 for markers and unknown */
    int32_t kind;                    /* PYS_FRAME_* */
};

struct out_funcs {
    struct out_func *v; /* in order of first appearance in the trie */
    size_t n, cap;
    struct util_htab index; /* 1 + index into v */
    uint32_t *node_fn;      /* per profile node: its function, or OUT_NO_FUNC */
    size_t nnodes;
};

/* Fill t (uninitialised) with the functions of p. 0 or PYS_E_NOMEM; t must
 * be released either way. */
int out_funcs_build(struct out_funcs *t, const pys_profile *p);
void out_funcs_release(struct out_funcs *t);

/* Whether a frame of this kind and filename stands for code in a source
 * file: a Python frame, but not a synthetic one, which names something
 * else in a frame's place (markers and process frames, of their own kinds;
 * the frame naming an asyncio task, of filename PYS_TASK_FRAME_FILENAME).
 * Synthetic frames keep their filename as a name ("~", "<task>", as the
 * reference's pstats and collapsed stacks write them), but no writer makes
 * a source page of it or gives it a file or line. */
int out_frame_has_source(int32_t kind, const char *filename);

/* Walk the subtree of node top of p depth first, parents before children,
 * siblings in id order. visit is called on entering every node below top
 * with the node's id and depth (1 for top's children); its nonzero return
 * ends the walk and is returned. */
typedef int (*out_visit_fn)(void *ctx, uint32_t id, size_t depth);
int out_profile_walk(const pys_profile *p, uint32_t top, out_visit_fn visit, void *ctx);

#endif
