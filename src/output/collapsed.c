/*
 * collapsed: the profile as folded stacks. ';' separates frames and the
 * last space separates the count, so those characters (and line breaks) in a
 * name from the target are replaced: ';' by ',', line breaks by ' '.
 */
#include "output/collapsed.h"

#include <stdlib.h>
#include <string.h>

/* Names are written a run at a time: a deep stack's lines hold thousands. */
static void put_name(FILE *f, const char *s)
{
    for (;;) {
        size_t run = strcspn(s, ";\n\r");
        fwrite(s, 1, run, f);
        if (!s[run])
            return;
        fputc(s[run] == ';' ? ',' : ' ', f);
        s += run + 1;
    }
}

static void put_frame(FILE *f, const struct pys_frame *fr)
{
    if (fr->kind != PYS_FRAME_PYTHON) {
        put_name(f, fr->qualname);
        return;
    }
    put_name(f, fr->filename);
    fputc(':', f);
    put_name(f, fr->qualname);
    if (fr->lineno == OUT_LINE_OMITTED) /* --nolineno: FILE:QUALNAME */
        return;
    /* ":%d" without printf's cost. */
    char num[16];
    size_t i = sizeof num;
    uint32_t line = fr->lineno < 0 ? 0 : (uint32_t)fr->lineno;
    do
        num[--i] = (char)('0' + line % 10);
    while ((line /= 10) != 0);
    num[--i] = ':';
    fwrite(num + i, 1, sizeof num - i, f);
}

/* Every stack of p with self samples, each line built from the leaf up. */
static int write_lines(FILE *f, const pys_profile *p, int tid)
{
    size_t nn = pys_profile_nodes(p);
    uint32_t *path = malloc((nn ? nn : 1) * sizeof *path);
    if (!path)
        return PYS_E_NOMEM;
    for (uint32_t id = 1; id < nn; id++) {
        const struct pys_profile_node *nd = pys_profile_node(p, id);
        if (nd->self == 0)
            continue;
        size_t depth = 0;
        for (uint32_t x = id; x != 0; x = pys_profile_node(p, x)->parent)
            path[depth++] = x;
        int first = 1;
        while (depth-- > 0) {
            const struct pys_frame *fr =
                pys_profile_frame(p, pys_profile_node(p, path[depth])->frame);
            if (!fr) { /* a thread node */
                if (!tid)
                    continue;
                /* A merged profile's process frame goes before the thread:
                 * the processes are the roots. */
                const struct pys_frame *pf =
                    depth > 0 ? pys_profile_frame(p, pys_profile_node(p, path[depth - 1])->frame)
                              : NULL;
                int process_first = pf && pf->kind == PYS_FRAME_PROCESS;
                if (process_first) {
                    put_frame(f, pf);
                    fputc(';', f);
                }
                uint64_t thread_id = pys_profile_thread(p, path[depth]);
                fprintf(f, "tid:%llu", (unsigned long long)thread_id);
                uint64_t ns = pys_profile_thread_ns(p, thread_id);
                if (ns != 0 && ns != thread_id)
                    fprintf(f, " (ns %llu)", (unsigned long long)ns);
                const char *name = pys_profile_thread_name(p, thread_id);
                if (name) {
                    fputs(" (", f);
                    put_name(f, name);
                    fputc(')', f);
                }
                if (process_first)
                    depth--; /* written above */
            } else {
                if (!first)
                    fputc(';', f);
                put_frame(f, fr);
            }
            first = 0;
        }
        fprintf(f, " %llu\n", (unsigned long long)nd->self);
    }
    free(path);
    return ferror(f) ? PYS_E_IO : 0;
}

int out_collapsed_write(FILE *f, const pys_profile *p, int tid)
{
    if (tid)
        return write_lines(f, p, 1);
    /* Merge the threads: the same stacks under one thread node. */
    size_t nn = pys_profile_nodes(p);
    pys_profile *m = pys_profile_new();
    struct pys_frame *frames = malloc((nn ? nn : 1) * sizeof *frames);
    int rc = PYS_E_NOMEM;
    if (!m || !frames)
        goto done;
    /* m has at most p's nodes: p's bound already held them. */
    pys_profile_set_max_memory(m, 0);
    for (uint32_t id = 1; id < nn; id++) {
        const struct pys_profile_node *nd = pys_profile_node(p, id);
        if (nd->self == 0 || pys_profile_is_thread(p, id))
            continue;
        size_t n = 0;
        for (uint32_t x = id; !pys_profile_is_thread(p, x); x = pys_profile_node(p, x)->parent)
            frames[n++] =
                *pys_profile_frame(p, pys_profile_node(p, x)->frame); /* innermost first */
        if ((rc = pys_profile_add(m, 0, frames, n, pys_profile_node(p, id)->self)) < 0)
            goto done;
    }
    rc = write_lines(f, m, 0);
done:
    free(frames);
    pys_profile_free(m);
    return rc;
}
