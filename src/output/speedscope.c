/*
 * speedscope: the JSON file format of speedscope, written through the
 * escaping JSON writer (output/json.h): names from the target are never
 * written raw.
 */
#include "output/speedscope.h"

#include <stdlib.h>
#include <string.h>

#include "output/funcs.h"
#include "output/json.h"

/* The state of one thread's walk. */
struct walk {
    const pys_profile *p;
    const struct out_funcs *fns;
    struct out_json *j;
    uint32_t *path; /* function of each depth, 1-based; sized for the deepest node */
    int weights;    /* 0: write the stacks; 1: their weights */
};

static int visit(void *ctx, uint32_t id, size_t depth)
{
    struct walk *w = ctx;
    const struct pys_profile_node *nd = pys_profile_node(w->p, id);
    w->path[depth] = w->fns->node_fn[id];
    if (nd->self == 0)
        return 0;
    if (w->weights) {
        out_json_int(w->j, (int64_t)nd->self);
        return 0;
    }
    out_json_begin_array(w->j);
    for (size_t d = 1; d <= depth; d++)
        out_json_int(w->j, (int64_t)w->path[d]);
    out_json_end_array(w->j);
    return 0;
}

static void write_frames(struct out_json *j, const struct out_funcs *fns)
{
    out_json_key(j, "frames");
    out_json_begin_array(j);
    for (size_t i = 0; i < fns->n; i++) {
        const struct out_func *fn = &fns->v[i];
        out_json_begin_object(j);
        out_json_key(j, "name");
        out_json_string(j, fn->qualname);
        if (out_frame_has_source(fn->kind, fn->filename)) {
            out_json_key(j, "file");
            out_json_string(j, fn->filename);
            if (fn->firstlineno > 0) {
                out_json_key(j, "line");
                out_json_int(j, fn->firstlineno);
            }
        }
        out_json_end_object(j);
    }
    out_json_end_array(j);
}

/* One thread's profile; w->path is sized for it. */
static void write_thread(struct walk *w, uint32_t thread)
{
    struct out_json *j = w->j;
    const pys_profile *p = w->p;
    /* "Thread N", its id in its own PID namespace after it if other, then
     * its Python name if it has one (at most 256 characters). */
    char name[1400];
    uint64_t tid = pys_profile_thread(p, thread);
    uint64_t ns = pys_profile_thread_ns(p, tid);
    const char *pyname = pys_profile_thread_name(p, tid);
    int len;
    if (ns != 0 && ns != tid)
        len = snprintf(name, sizeof name, "Thread %llu (ns %llu)", (unsigned long long)tid,
                       (unsigned long long)ns);
    else
        len = snprintf(name, sizeof name, "Thread %llu", (unsigned long long)tid);
    if (pyname && len > 0 && (size_t)len < sizeof name)
        snprintf(name + len, sizeof name - (size_t)len, " (%s)", pyname);
    const struct pys_profile_node *nd = pys_profile_node(p, thread);
    out_json_begin_object(j);
    out_json_key(j, "type");
    out_json_string(j, "sampled");
    out_json_key(j, "name");
    out_json_string(j, name);
    out_json_key(j, "unit");
    out_json_string(j, "none");
    out_json_key(j, "startValue");
    out_json_int(j, 0);
    out_json_key(j, "endValue");
    out_json_int(j, (int64_t)(nd->total - nd->self));
    out_json_key(j, "samples");
    out_json_begin_array(j);
    w->weights = 0;
    out_profile_walk(p, thread, visit, w);
    out_json_end_array(j);
    out_json_key(j, "weights");
    out_json_begin_array(j);
    w->weights = 1;
    out_profile_walk(p, thread, visit, w);
    out_json_end_array(j);
    out_json_end_object(j);
}

/* The depth of the deepest node, to size the walk's path. */
static int deepest(void *ctx, uint32_t id, size_t depth)
{
    (void)id;
    size_t *max = ctx;
    if (depth > *max)
        *max = depth;
    return 0;
}

static const pys_profile *g_profile; /* qsort has no context argument in C11 */

/* Thread nodes by samples, most first; then by id. */
static int by_samples(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    uint64_t tx = pys_profile_node(g_profile, x)->total, ty = pys_profile_node(g_profile, y)->total;
    if (tx != ty)
        return tx > ty ? -1 : 1;
    return x < y ? -1 : x > y;
}

int out_speedscope_write(FILE *f, const pys_profile *p, const char *title)
{
    struct out_funcs fns;
    struct out_json j;
    struct walk w = {p, &fns, &j, NULL, 0};
    size_t max_depth = 0, nthreads = 0;
    uint32_t *threads = NULL;
    int rc = out_funcs_build(&fns, p);
    if (rc < 0)
        goto done;
    out_profile_walk(p, 0, deepest, &max_depth);
    rc = PYS_E_NOMEM;
    if (!(w.path = malloc((max_depth + 1) * sizeof *w.path)))
        goto done;
    /* The thread nodes are the root's children; the busiest first, as the
     * profile speedscope opens on. */
    uint32_t first = pys_profile_nodes(p) ? pys_profile_node(p, 0)->first_child : 0;
    for (uint32_t t = first; t; t = pys_profile_node(p, t)->next_sibling)
        nthreads++;
    if (!(threads = malloc((nthreads ? nthreads : 1) * sizeof *threads)))
        goto done;
    nthreads = 0;
    for (uint32_t t = first; t; t = pys_profile_node(p, t)->next_sibling)
        threads[nthreads++] = t;
    g_profile = p;
    qsort(threads, nthreads, sizeof *threads, by_samples);

    out_json_init(&j, f);
    out_json_begin_object(&j);
    out_json_key(&j, "$schema");
    out_json_string(&j, "https://www.speedscope.app/file-format-schema.json");
    out_json_key(&j, "exporter");
    out_json_string(&j, "pystrobe");
    out_json_key(&j, "name");
    out_json_string(&j, title ? title : "pystrobe profile");
    out_json_key(&j, "activeProfileIndex");
    out_json_int(&j, 0);
    out_json_key(&j, "shared");
    out_json_begin_object(&j);
    write_frames(&j, &fns);
    out_json_end_object(&j);
    out_json_key(&j, "profiles");
    out_json_begin_array(&j);
    for (size_t i = 0; i < nthreads; i++)
        write_thread(&w, threads[i]);
    out_json_end_array(&j);
    out_json_end_object(&j);
    fputc('\n', f);
    rc = ferror(f) ? PYS_E_IO : 0;
done:
    free(threads);
    free(w.path);
    out_funcs_release(&fns);
    return rc;
}
