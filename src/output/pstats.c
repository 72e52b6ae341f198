/*
 * pstats: the profile by function, as Python's pstats module knows it.
 *
 * A function is (co_filename, co_firstlineno, co_qualname); markers are
 * ("~", 0, "<native>") and ("~", 0, "<GC>"), as cProfile names built-ins.
 * Per function: direct samples (the function was executing), cumulative
 * samples (it was on the stack; a recursive function counts once per sample),
 * and per caller the samples that passed through that call. Times are samples
 * times the sampling interval.
 *
 * Two forms: the file pstats.Stats(FILE) loads (a marshal'd dict
 * {key: (direct, cumulative, tottime, cumtime, {caller_key: samples})}, the
 * same shape CPython 3.15's sampling profiler writes) and a table for the
 * terminal.
 */
#include "output/pstats.h"
#include "output/funcs.h"
#include "output/utf8.h"

#include <stdlib.h>
#include <string.h>

#include "util/hashtab.h"

/* One function of the profile (its identity from output/funcs.h), with
 * its samples. */
struct fn {
    const char *filename, *qualname;
    int32_t firstlineno;
    uint64_t direct, cumulative;
    uint32_t onpath; /* times it is on the current DFS path */
};

struct edge {
    uint32_t callee, caller;
    uint64_t samples;
};

struct fntab {
    struct out_funcs funcs; /* node -> function */
    struct fn *v;           /* in order of first appearance depth first */
    size_t n;
    uint32_t *index;        /* per function of funcs: its index in v */
    struct edge *edges;
    size_t nedges, capedges;
    struct util_htab edge_index; /* 1 + index into edges */
};

static uint64_t edge_hash(uint32_t callee, uint32_t caller)
{
    return util_hash_u64((uint64_t)callee << 32 | caller);
}

static uint64_t edge_hash_at(const void *ctx, uint32_t id)
{
    const struct edge *e = &((const struct fntab *)ctx)->edges[id - 1];
    return edge_hash(e->callee, e->caller);
}

static int edge_add(struct fntab *t, uint32_t callee, uint32_t caller, uint64_t samples)
{
    if (t->nedges >= UINT32_MAX - 1 ||
        util_htab_reserve(&t->edge_index, 1024, 1, (uint32_t)t->nedges + 1, edge_hash_at, t) < 0)
        return PYS_E_NOMEM;
    uint32_t id;
    size_t j = util_htab_first(&t->edge_index, edge_hash(callee, caller));
    for (; (id = t->edge_index.slot[j]); j = util_htab_next(&t->edge_index, j)) {
        struct edge *e = &t->edges[id - 1];
        if (e->callee == callee && e->caller == caller) {
            e->samples += samples;
            return 0;
        }
    }
    if (t->nedges == t->capedges) {
        size_t cap = t->capedges ? t->capedges * 2 : 256;
        struct edge *v = realloc(t->edges, cap * sizeof *v);
        if (!v)
            return PYS_E_NOMEM;
        t->edges = v;
        t->capedges = cap;
    }
    t->edges[t->nedges] = (struct edge){callee, caller, samples};
    util_htab_set(&t->edge_index, j, (uint32_t)(t->nedges + 1));
    t->nedges++;
    return 0;
}

static void fntab_release(struct fntab *t)
{
    out_funcs_release(&t->funcs);
    free(t->v);
    free(t->index);
    free(t->edges);
    util_htab_release(&t->edge_index);
    memset(t, 0, sizeof *t);
}

/* Visit the profile's trie depth first and fill the function table. */
static int fntab_build(struct fntab *t, const pys_profile *p)
{
    memset(t, 0, sizeof *t);
    int rc = out_funcs_build(&t->funcs, p);
    if (rc < 0)
        return rc;
    const uint32_t *node_fn = t->funcs.node_fn;
    size_t nf = t->funcs.n;
    t->v = calloc(nf ? nf : 1, sizeof *t->v);
    t->index = malloc((nf ? nf : 1) * sizeof *t->index);
    if (!t->v || !t->index)
        return PYS_E_NOMEM;
    memset(t->index, 0xff, nf * sizeof *t->index); /* UINT32_MAX: not met yet */
    uint32_t cur = pys_profile_node(p, 0)->first_child;
    while (cur) {
        const struct pys_profile_node *nd = pys_profile_node(p, cur);
        /* enter */
        if (node_fn[cur] != OUT_NO_FUNC) {
            uint32_t *f = &t->index[node_fn[cur]];
            if (*f == UINT32_MAX) {
                const struct out_func *of = &t->funcs.v[node_fn[cur]];
                *f = (uint32_t)t->n++;
                t->v[*f] = (struct fn){.filename = of->filename,
                                       .qualname = of->qualname,
                                       .firstlineno = of->firstlineno};
            }
            struct fn *fn = &t->v[*f];
            if (fn->onpath++ == 0)
                fn->cumulative += nd->total;
            fn->direct += nd->self;
            if (node_fn[nd->parent] != OUT_NO_FUNC &&
                edge_add(t, *f, t->index[node_fn[nd->parent]], nd->total) < 0)
                return PYS_E_NOMEM;
        }
        if (nd->first_child) {
            cur = nd->first_child;
            continue;
        }
        /* leave nodes until one has a next sibling */
        while (cur) {
            nd = pys_profile_node(p, cur);
            if (node_fn[cur] != OUT_NO_FUNC)
                t->v[t->index[node_fn[cur]]].onpath--;
            if (nd->next_sibling) {
                cur = nd->next_sibling;
                break;
            }
            cur = nd->parent;
        }
    }
    return 0;
}

/* --- marshal -------------------------------------------------------------- */

static void w_i32(FILE *f, int32_t v)
{
    uint32_t u = (uint32_t)v;
    unsigned char b[4] = {(unsigned char)u, (unsigned char)(u >> 8), (unsigned char)(u >> 16),
                          (unsigned char)(u >> 24)};
    fwrite(b, 1, 4, f);
}

/* A non-negative integer: TYPE_INT when it fits, else TYPE_LONG (15-bit digits). */
static void w_int(FILE *f, uint64_t v)
{
    if (v <= INT32_MAX) {
        fputc('i', f);
        w_i32(f, (int32_t)v);
        return;
    }
    int n = 0;
    for (uint64_t x = v; x; x >>= 15)
        n++;
    fputc('l', f);
    w_i32(f, n);
    for (int i = 0; i < n; i++) {
        unsigned d = (unsigned)((v >> (15 * i)) & 0x7fff);
        fputc((int)(d & 0xff), f);
        fputc((int)(d >> 8), f);
    }
}

static void w_float(FILE *f, double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    fputc('g', f);
    for (int i = 0; i < 8; i++)
        fputc((int)((u >> (8 * i)) & 0xff), f);
}

/* A marshal str: UTF-8, which marshal.loads checks, so that a name with
 * bytes that are not UTF-8 has them as U+FFFD (output/utf8.h) rather than
 * making the whole file unloadable. */
static void w_str(FILE *f, const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s), len = 0, k;
    uint32_t cp;
    for (size_t i = 0; i < n; i += k ? k : 1)
        len += (k = out_utf8_decode(u + i, n - i, &cp)) ? k : sizeof OUT_UTF8_REPLACEMENT - 1;
    fputc('u', f);
    w_i32(f, (int32_t)len);
    for (size_t i = 0; i < n; i += k ? k : 1) {
        if ((k = out_utf8_decode(u + i, n - i, &cp)) != 0)
            fwrite(u + i, 1, k, f);
        else
            fputs(OUT_UTF8_REPLACEMENT, f);
    }
}

static void w_key(FILE *f, const struct fn *fn)
{
    fputc(')', f); /* small tuple */
    fputc(3, f);
    w_str(f, fn->filename);
    w_int(f, (uint64_t)(fn->firstlineno < 0 ? 0 : fn->firstlineno));
    w_str(f, fn->qualname);
}

static int cmp_edge(const void *a, const void *b)
{
    const struct edge *x = a, *y = b;
    if (x->callee != y->callee)
        return x->callee < y->callee ? -1 : 1;
    return x->caller < y->caller ? -1 : x->caller > y->caller;
}

int out_pstats_write_marshal(FILE *f, const pys_profile *p)
{
    struct fntab t;
    int rc = fntab_build(&t, p);
    if (rc < 0)
        goto done;
    double interval = (double)pys_profile_info_get(p)->interval_ns / 1e9;
    if (t.nedges) /* edges is NULL without callers, and qsort's base may not be */
        qsort(t.edges, t.nedges, sizeof *t.edges, cmp_edge);
    size_t e = 0;
    fputc('{', f);
    for (size_t i = 0; i < t.n; i++) {
        const struct fn *fn = &t.v[i];
        w_key(f, fn);
        fputc(')', f);
        fputc(5, f);
        w_int(f, fn->direct);
        w_int(f, fn->cumulative);
        w_float(f, (double)fn->direct * interval);
        w_float(f, (double)fn->cumulative * interval);
        fputc('{', f);
        while (e < t.nedges && t.edges[e].callee < i)
            e++;
        for (; e < t.nedges && t.edges[e].callee == i; e++) {
            w_key(f, &t.v[t.edges[e].caller]);
            w_int(f, t.edges[e].samples);
        }
        fputc('0', f);
    }
    fputc('0', f);
    rc = ferror(f) ? PYS_E_IO : 0;
done:
    fntab_release(&t);
    return rc;
}

/* --- table ---------------------------------------------------------------- */

static const char *const SORT_NAMES[] = {
    [OUT_SORT_NSAMPLES] = "nsamples",   [OUT_SORT_TOTTIME] = "tottime",
    [OUT_SORT_CUMTIME] = "cumtime",     [OUT_SORT_SAMPLE_PCT] = "sample-pct",
    [OUT_SORT_CUMUL_PCT] = "cumul-pct", [OUT_SORT_NSAMPLES_CUMUL] = "nsamples-cumul",
    [OUT_SORT_NAME] = "name",
};

int out_pstats_sort_parse(const char *name)
{
    for (size_t i = 0; i < sizeof SORT_NAMES / sizeof SORT_NAMES[0]; i++)
        if (strcmp(name, SORT_NAMES[i]) == 0)
            return (int)i;
    return -1;
}

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

static int g_sort; /* qsort has no context argument in C11 */

static int cmp_fn(const void *a, const void *b)
{
    const struct fn *x = a, *y = b;
    uint64_t kx, ky;
    switch (g_sort) {
    case OUT_SORT_NAME: {
        int c = strcmp(x->qualname, y->qualname);
        if (c == 0)
            c = strcmp(base_name(x->filename), base_name(y->filename));
        return c;
    }
    case OUT_SORT_CUMTIME:
    case OUT_SORT_CUMUL_PCT:
    case OUT_SORT_NSAMPLES_CUMUL:
        kx = x->cumulative;
        ky = y->cumulative;
        break;
    default:
        kx = x->direct;
        ky = y->direct;
        break;
    }
    if (kx != ky)
        return kx > ky ? -1 : 1;
    return strcmp(x->qualname, y->qualname);
}

/* Names on the terminal: control characters as '?'. */
static void put_clean(FILE *f, const char *s)
{
    for (; *s; s++)
        fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, f);
}

int out_pstats_write_table(FILE *f, const pys_profile *p, int sort, size_t limit)
{
    struct fntab t;
    int rc = fntab_build(&t, p);
    if (rc < 0)
        goto done;
    const struct pys_profile_info *info = pys_profile_info_get(p);
    double interval = (double)info->interval_ns / 1e9;
    uint64_t total = 0;
    for (size_t i = 0; i < t.n; i++)
        total += t.v[i].direct;
    g_sort = sort;
    if (t.n)
        qsort(t.v, t.n, sizeof *t.v, cmp_fn);
    if (t.n == 0) {
        fprintf(f, "No samples were collected%s.\n",
                info->mode && strcmp(info->mode, "wall") != 0 ? " (no thread matched the mode)"
                                                              : "");
        goto out;
    }
    fprintf(f, "Profile: %llu stack samples, %s mode, sorted by %s\n\n", (unsigned long long)total,
            info->mode ? info->mode : "wall", SORT_NAMES[sort]);
    fprintf(f, "%21s  %7s  %11s  %7s  %11s  %s\n", "nsamples", "sample%", "tottime (s)", "cumul%",
            "cumtime (s)", "filename:lineno(function)");
    for (size_t i = 0; i < t.n && i < limit; i++) {
        const struct fn *fn = &t.v[i];
        char ns[48];
        snprintf(ns, sizeof ns, "%llu/%llu", (unsigned long long)fn->direct,
                 (unsigned long long)fn->cumulative);
        double pct = total ? 100.0 * (double)fn->direct / (double)total : 0;
        double cpct = total ? 100.0 * (double)fn->cumulative / (double)total : 0;
        fprintf(f, "%21s  %7.1f  %11.3f  %7.1f  %11.3f  ", ns, pct, (double)fn->direct * interval,
                cpct, (double)fn->cumulative * interval);
        put_clean(f, base_name(fn->filename));
        fprintf(f, ":%d(", (int)fn->firstlineno);
        put_clean(f, fn->qualname);
        fputs(")\n", f);
    }
    if (t.n > limit)
        fprintf(f, "\n(%zu more functions; -l/--limit shows more)\n", t.n - limit);
out:
    rc = ferror(f) ? PYS_E_IO : 0;
done:
    fntab_release(&t);
    return rc;
}
