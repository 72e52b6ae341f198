/*
 * heatmap: line counts from the profile's trie, then the pages, written as
 * HTML by hand through one escaping routine (put_text). Files and lines are
 * numbered by sorting the trie's nodes, which needs no hash table; counts
 * that must be taken once per sample use the depth-first walk's "on the
 * path" counters, as output/pstats.c does for cumulative samples.
 */
#include "output/heatmap.h"
#include "output/funcs.h"
#include "output/markup.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum group { G_OWN, G_STDLIB, G_SITE, G_OTHER, NGROUPS };
static const char *const GROUP_NAMES[NGROUPS] = {"Your code", "Standard library", "Site-packages",
                                                 "Other"};

struct hfile {
    const char *name;
    uint64_t self, total;
    uint32_t onpath;
    int group;
    size_t page;    /* file_%04zu.html */
    uint32_t first; /* its lines are lines[first .. first + nlines - 1], by line number */
    uint32_t nlines;
};

struct hline {
    uint32_t file;
    int32_t line;
    uint64_t self, total;
    uint32_t onpath;
    uint32_t op_first, op_n; /* its instructions: ops[op_first .. op_first + op_n - 1] */
};

/* Samples of a line at an instruction (--opcodes). */
struct hop {
    uint32_t line; /* line index */
    int32_t opcode;
    uint64_t count;
};

/* A call from a line to a function. */
struct hedge {
    uint32_t caller;      /* line index */
    uint32_t callee;      /* file index */
    int32_t callee_first; /* the function's first line */
    const char *name;     /* its qualname */
    uint64_t samples;
};

struct heat {
    const pys_profile *p;
    size_t nn;
    uint32_t *node_file; /* per node: file index, or UINT32_MAX (no Python frame) */
    uint32_t *node_line; /* per node: line index */
    struct hfile *files;
    size_t nfiles;
    struct hline *lines;
    size_t nlines;
    struct hedge *edges;
    size_t nedges;
    struct hedge *by_callee; /* edges sorted by callee */
    uint64_t samples;        /* samples with a Python frame: the base of percentages */
    struct hop *ops;         /* by line, then opcode */
    size_t nops;
    uint32_t version; /* the target's, for the instructions' names */
};

#define NONE UINT32_MAX

/* --- counting ----------------------------------------------------------- */

static const struct pys_frame *py_frame(const pys_profile *p, uint32_t id)
{
    const struct pys_frame *fr = pys_profile_frame(p, pys_profile_node(p, id)->frame);
    return fr && out_frame_has_source(fr->kind, fr->filename) ? fr : NULL;
}

static const pys_profile *g_p; /* qsort has no context argument in C11 */
static const uint32_t *g_node_file;

static int by_filename(const void *a, const void *b)
{
    const char *x = py_frame(g_p, *(const uint32_t *)a)->filename;
    const char *y = py_frame(g_p, *(const uint32_t *)b)->filename;
    return x == y ? 0 : strcmp(x, y);
}

/* Names compared by their text, never their address: the pages must not
 * depend on where strings happen to lie (a replay's are elsewhere). */
static int name_cmp(const char *x, const char *y)
{
    if (x == y)
        return 0;
    if (!x || !y)
        return x ? 1 : -1;
    return strcmp(x, y);
}

static int by_file_line(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (g_node_file[x] != g_node_file[y])
        return g_node_file[x] < g_node_file[y] ? -1 : 1;
    int32_t lx = py_frame(g_p, x)->lineno, ly = py_frame(g_p, y)->lineno;
    return lx < ly ? -1 : lx > ly;
}

static int cmp_edge(const struct hedge *x, const struct hedge *y, int callee_first)
{
    uint32_t a1 = callee_first ? x->callee : x->caller, b1 = callee_first ? y->callee : y->caller;
    if (a1 != b1)
        return a1 < b1 ? -1 : 1;
    if (callee_first && x->callee_first != y->callee_first)
        return x->callee_first < y->callee_first ? -1 : 1;
    uint32_t a2 = callee_first ? x->caller : x->callee, b2 = callee_first ? y->caller : y->callee;
    if (a2 != b2)
        return a2 < b2 ? -1 : 1;
    if (x->callee_first != y->callee_first)
        return x->callee_first < y->callee_first ? -1 : 1;
    return name_cmp(x->name, y->name);
}

static int by_caller(const void *a, const void *b)
{
    return cmp_edge(a, b, 0);
}

static int by_callee(const void *a, const void *b)
{
    return cmp_edge(a, b, 1);
}

static int group_of(const char *f)
{
    if (strstr(f, "/site-packages/") || strstr(f, "/dist-packages/"))
        return G_SITE;
    if (strncmp(f, "<frozen ", 8) == 0)
        return G_STDLIB;
    if (f[0] == '<' || f[0] == '\0')
        return G_OTHER;
    const char *lib = strstr(f, "/lib/python");
    if (lib && strchr(lib + 11, '/'))
        return G_STDLIB;
    return G_OWN;
}

/* Number files and lines, each node mapped to both. */
static int number_nodes(struct heat *h)
{
    const pys_profile *p = h->p;
    uint32_t *ids = malloc((h->nn ? h->nn : 1) * sizeof *ids);
    size_t n = 0;
    if (!ids)
        return PYS_E_NOMEM;
    for (uint32_t id = 1; id < h->nn; id++) {
        h->node_file[id] = h->node_line[id] = NONE;
        if (py_frame(p, id))
            ids[n++] = id;
    }
    g_p = p;
    qsort(ids, n, sizeof *ids, by_filename);
    h->files = calloc(n ? n : 1, sizeof *h->files);
    h->lines = calloc(n ? n : 1, sizeof *h->lines);
    if (!h->files || !h->lines) {
        free(ids);
        return PYS_E_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const char *name = py_frame(p, ids[i])->filename;
        if (i == 0 || name_cmp(name, h->files[h->nfiles - 1].name) != 0) {
            h->files[h->nfiles].name = name;
            h->files[h->nfiles].group = group_of(name);
            h->nfiles++;
        }
        h->node_file[ids[i]] = (uint32_t)(h->nfiles - 1);
    }
    g_node_file = h->node_file;
    qsort(ids, n, sizeof *ids, by_file_line);
    for (size_t i = 0; i < n; i++) {
        uint32_t file = h->node_file[ids[i]];
        int32_t line = py_frame(p, ids[i])->lineno;
        if (h->nlines == 0 || h->lines[h->nlines - 1].file != file ||
            h->lines[h->nlines - 1].line != line) {
            if (h->nlines == 0 || h->lines[h->nlines - 1].file != file)
                h->files[file].first = (uint32_t)h->nlines;
            h->files[file].nlines++;
            h->lines[h->nlines++] = (struct hline){.file = file, .line = line};
        }
        h->node_line[ids[i]] = (uint32_t)(h->nlines - 1);
    }
    free(ids);
    return 0;
}

/* Self and total samples of every line and file; the calls between them. */
static int count(struct heat *h)
{
    const pys_profile *p = h->p;
    size_t cap = 0;
    for (uint32_t t = pys_profile_node(p, 0)->first_child; t;
         t = pys_profile_node(p, t)->next_sibling)
        h->samples += pys_profile_node(p, t)->total - pys_profile_node(p, t)->self;
    for (uint32_t id = 1; id < h->nn; id++)
        if (h->node_line[id] != NONE && h->node_line[pys_profile_node(p, id)->parent] != NONE)
            cap++;
    h->edges = malloc((cap ? cap : 1) * sizeof *h->edges);
    h->by_callee = malloc((cap ? cap : 1) * sizeof *h->by_callee);
    if (!h->edges || !h->by_callee)
        return PYS_E_NOMEM;

    uint32_t cur = pys_profile_node(p, 0)->first_child;
    while (cur) {
        const struct pys_profile_node *nd = pys_profile_node(p, cur);
        uint32_t li = h->node_line[cur];
        if (li != NONE) { /* enter */
            struct hline *l = &h->lines[li];
            struct hfile *f = &h->files[l->file];
            if (l->onpath++ == 0)
                l->total += nd->total;
            if (f->onpath++ == 0)
                f->total += nd->total;
            l->self += nd->self;
            f->self += nd->self;
            uint32_t caller = h->node_line[nd->parent];
            if (caller != NONE) {
                const struct pys_frame *fr = py_frame(p, cur);
                h->edges[h->nedges++] =
                    (struct hedge){caller, l->file, fr->firstlineno > 0 ? fr->firstlineno : 0,
                                   fr->qualname, nd->total};
            }
        }
        if (nd->first_child) {
            cur = nd->first_child;
            continue;
        }
        while (cur) { /* leave nodes until one has a next sibling */
            nd = pys_profile_node(p, cur);
            if (h->node_line[cur] != NONE) {
                h->lines[h->node_line[cur]].onpath--;
                h->files[h->node_file[cur]].onpath--;
            }
            if (nd->next_sibling) {
                cur = nd->next_sibling;
                break;
            }
            cur = nd->parent;
        }
    }
    /* Merge equal calls. */
    if (h->nedges)
        qsort(h->edges, h->nedges, sizeof *h->edges, by_caller);
    size_t m = 0;
    for (size_t i = 0; i < h->nedges; i++) {
        if (m && cmp_edge(&h->edges[m - 1], &h->edges[i], 0) == 0)
            h->edges[m - 1].samples += h->edges[i].samples;
        else
            h->edges[m++] = h->edges[i];
    }
    h->nedges = m;
    memcpy(h->by_callee, h->edges, m * sizeof *h->edges);
    if (m)
        qsort(h->by_callee, m, sizeof *h->by_callee, by_callee);
    return 0;
}

static int by_line_op(const void *a, const void *b)
{
    const struct hop *x = a, *y = b;
    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    return (x->opcode > y->opcode) - (x->opcode < y->opcode);
}

/* Each line's instructions (a profile counted with opcodes): the samples
 * of every node at the line, summed by instruction (a caller's is its
 * call). A line on a stack more than once counts each frame's. 0 or
 * PYS_E_NOMEM. */
static int count_ops(struct heat *h)
{
    struct pys_opcode_count buf[256];
    size_t cap = 0;
    for (uint32_t id = 1; id < h->nn; id++) {
        if (h->node_line[id] == NONE)
            continue;
        int k = pys_profile_node_opcodes(h->p, id, buf, sizeof buf / sizeof buf[0]);
        if (k < 0)
            return k;
        if (k > (int)(sizeof buf / sizeof buf[0]))
            k = (int)(sizeof buf / sizeof buf[0]);
        if (h->nops + (size_t)k > cap) {
            size_t c = cap ? cap : 256;
            while (c < h->nops + (size_t)k)
                c *= 2;
            struct hop *v = realloc(h->ops, c * sizeof *v);
            if (!v)
                return PYS_E_NOMEM;
            h->ops = v;
            cap = c;
        }
        for (int i = 0; i < k; i++)
            h->ops[h->nops++] = (struct hop){h->node_line[id], buf[i].opcode, buf[i].count};
    }
    if (h->nops)
        qsort(h->ops, h->nops, sizeof *h->ops, by_line_op);
    size_t m = 0;
    for (size_t i = 0; i < h->nops; i++) {
        if (m && h->ops[m - 1].line == h->ops[i].line && h->ops[m - 1].opcode == h->ops[i].opcode)
            h->ops[m - 1].count += h->ops[i].count;
        else
            h->ops[m++] = h->ops[i];
    }
    h->nops = m;
    for (size_t i = 0; i < m; i++) {
        struct hline *l = &h->lines[h->ops[i].line];
        if (l->op_n++ == 0)
            l->op_first = (uint32_t)i;
    }
    return 0;
}

/* --- HTML ----------------------------------------------------------------- */

/* len bytes of s as HTML text or attribute value (markup.h). */
static void put_text(FILE *f, const char *str, size_t len)
{
    out_markup_put(f, str, len, SIZE_MAX);
}

static void put_str(FILE *f, const char *s)
{
    put_text(f, s ? s : "", s ? strlen(s) : 0);
}

static const char CSS[] =
    "body{font:14px system-ui,sans-serif;margin:0 1.5em 2em;color:#222;background:#fff}"
    "h1{font-size:1.3em;word-break:break-all}h2{font-size:1.1em;margin-top:1.5em}"
    "table{border-collapse:collapse}td,th{padding:1px 8px;text-align:right;vertical-align:top}"
    "th{background:#eee;position:sticky;top:0}td.f,th.f{text-align:left;word-break:break-all}"
    ".code td.src{text-align:left;white-space:pre;font:13px ui-monospace,monospace}"
    ".code td.n a{color:#888;text-decoration:none}.code td.nav{text-align:left;font-size:12px}"
    ".code tr:target{outline:2px solid "
    "#06c}.bar{background:#e4572e;height:10px;display:inline-block}"
    ".warn{background:#fff3cd;border:1px solid #e0c36c;padding:4px 8px}"
    ".note{color:#666}a{color:#06c}"
    ".code td.ops{text-align:left;font:12px ui-monospace,monospace}"
    ".ops summary{cursor:pointer;color:#555}.ops table td{padding:0 4px}"
    /* The colour scale: log(1 + n) / log(1 + max) in tenths, white to red. */
    ".h1{background:#fff5eb}.h2{background:#fee6ce}.h3{background:#fdd0a2}"
    ".h4{background:#fdae6b}.h5{background:#fd8d3c}.h6{background:#f16913}"
    ".h7{background:#e4572e;color:#fff}.h8{background:#d94801;color:#fff}"
    ".h9{background:#a63603;color:#fff}.h10{background:#7f2704;color:#fff}";

static int level(uint64_t n, uint64_t max)
{
    if (n == 0 || max == 0)
        return 0;
    int l = (int)ceil(10.0 * log1p((double)n) / log1p((double)max));
    return l < 1 ? 1 : l > 10 ? 10 : l;
}

static double pct(uint64_t n, uint64_t of)
{
    return of ? 100.0 * (double)n / (double)of : 0.0;
}

static void page_head(FILE *f, const char *title, const char *heading)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
          "style-src 'unsafe-inline'\">\n<title>",
          f);
    put_str(f, heading);
    fputs(" - ", f);
    put_str(f, title);
    fprintf(f, "</title>\n<style>%s</style></head>\n<body>\n", CSS);
}

static FILE *open_page(int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "w");
    if (!f)
        close(fd);
    return f;
}

static int close_page(FILE *f)
{
    int bad = ferror(f);
    int e = errno;
    if (fclose(f) != 0 || bad) {
        if (bad)
            errno = e;
        return PYS_E_IO;
    }
    return 0;
}

static int by_file_total(const void *a, const void *b)
{
    const struct hfile *x = *(struct hfile *const *)a, *y = *(struct hfile *const *)b;
    if (x->total != y->total)
        return x->total > y->total ? -1 : 1;
    if (x->self != y->self)
        return x->self > y->self ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int write_index(int dirfd, const struct heat *h, struct hfile **order, const char *title)
{
    FILE *f = open_page(dirfd, "index.html");
    if (!f)
        return PYS_E_IO;
    const struct pys_profile_info *info = pys_profile_info_get(h->p);
    page_head(f, title, "Heatmap");
    fputs("<h1>", f);
    put_str(f, title);
    fputs("</h1>\n<p>", f);
    fprintf(f, "%llu samples with Python frames, %zu source files; %.2f s sampled every %.3f ms",
            (unsigned long long)h->samples, h->nfiles, (double)info->duration_ns / 1e9,
            (double)info->interval_ns / 1e6);
    fputs(". Total: samples in which a line of the file was on the stack (each sample once); "
          "self: samples in which it was executing. Percentages are of all samples.</p>\n",
          f);
    uint64_t max = order[0] ? order[0]->total : 0;
    for (int g = 0; g < NGROUPS; g++) {
        size_t n = 0;
        for (size_t i = 0; i < h->nfiles; i++)
            n += order[i]->group == g;
        if (!n)
            continue;
        fprintf(f, "<h2 id=\"g%d\">%s (%zu files)</h2>\n<table class=\"files\">\n", g,
                GROUP_NAMES[g], n);
        fputs("<tr><th class=\"f\">File</th><th>Total</th><th>%</th><th>Self</th><th>%</th>"
              "<th></th></tr>\n",
              f);
        for (size_t i = 0; i < h->nfiles; i++) {
            const struct hfile *hf = order[i];
            if (hf->group != g)
                continue;
            fprintf(f, "<tr><td class=\"f\"><a href=\"file_%04zu.html\">", hf->page);
            put_str(f, hf->name);
            fprintf(f,
                    "</a></td><td>%llu</td><td>%.1f</td><td>%llu</td><td>%.1f</td>"
                    "<td><span class=\"bar\" style=\"width:%dpx\"></span></td></tr>\n",
                    (unsigned long long)hf->total, pct(hf->total, h->samples),
                    (unsigned long long)hf->self, pct(hf->self, h->samples),
                    max ? (int)(200.0 * (double)hf->total / (double)max) : 0);
        }
        fputs("</table>\n", f);
    }
    fputs("</body></html>\n", f);
    return close_page(f);
}

/* The line entry of line number ln in file hf, or NULL. */
static const struct hline *find_line(const struct heat *h, const struct hfile *hf, int32_t ln)
{
    size_t lo = hf->first, hi = (size_t)hf->first + hf->nlines;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (h->lines[mid].line < ln)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < (size_t)hf->first + hf->nlines && h->lines[lo].line == ln ? &h->lines[lo] : NULL;
}

/* The most links a line shows each way; the rest are counted. */
#define MAX_LINKS 8

static void put_link(FILE *f, const struct heat *h, uint32_t file, int32_t line)
{
    fprintf(f, "<a href=\"file_%04zu.html#L%d\">", h->files[file].page, (int)line);
}

static void line_nav(FILE *f, const struct heat *h, const struct hfile *hf, uint32_t fi,
                     const struct hline *l, int32_t ln)
{
    /* Callees: edges whose caller is this line (edges sorted by caller). */
    if (l) {
        uint32_t li = (uint32_t)(l - h->lines);
        size_t lo = 0, hi = h->nedges;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (h->edges[mid].caller < li)
                lo = mid + 1;
            else
                hi = mid;
        }
        size_t shown = 0, more = 0;
        for (size_t i = lo; i < h->nedges && h->edges[i].caller == li; i++) {
            const struct hedge *e = &h->edges[i];
            if (shown++ >= MAX_LINKS) {
                more++;
                continue;
            }
            fputs("&rarr; ", f);
            put_link(f, h, e->callee, e->callee_first);
            put_str(f, e->name);
            fprintf(f, "</a> (%llu) ", (unsigned long long)e->samples);
        }
        if (more)
            fprintf(f, "&rarr; %zu more ", more);
    }
    /* Callers: edges into a function whose first line is this one. */
    size_t lo = 0, hi = h->nedges;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct hedge *e = &h->by_callee[mid];
        if (e->callee < fi || (e->callee == fi && e->callee_first < ln))
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t shown = 0, more = 0;
    for (size_t i = lo;
         i < h->nedges && h->by_callee[i].callee == fi && h->by_callee[i].callee_first == ln; i++) {
        const struct hedge *e = &h->by_callee[i];
        const struct hline *cl = &h->lines[e->caller];
        if (shown++ >= MAX_LINKS) {
            more++;
            continue;
        }
        fputs("&larr; ", f);
        put_link(f, h, cl->file, cl->line);
        if (cl->file != fi) {
            const char *base = strrchr(h->files[cl->file].name, '/');
            put_str(f, base ? base + 1 : h->files[cl->file].name);
        }
        fprintf(f, ":%d</a> (%llu) ", (int)cl->line, (unsigned long long)e->samples);
    }
    if (more)
        fprintf(f, "&larr; %zu more", more);
    (void)hf;
}

static int by_line_heat(const void *a, const void *b)
{
    const struct hline *x = *(struct hline *const *)a, *y = *(struct hline *const *)b;
    if (x->self != y->self)
        return x->self > y->self ? -1 : 1;
    if (x->total != y->total)
        return x->total > y->total ? -1 : 1;
    return x->line < y->line ? -1 : x->line > y->line;
}

/* Line l's instructions (a cell of their own): the most sampled one and
 * its share in the summary, every one with its samples when opened. */
static void line_ops(FILE *f, const struct heat *h, const struct hline *l)
{
    fputs("<td class=\"ops\">", f);
    if (!l || l->op_n == 0) {
        fputs("</td>", f);
        return;
    }
    const struct hop *v[256];
    size_t n = 0;
    uint64_t all = 0;
    for (uint32_t i = 0; i < l->op_n && n < 256; i++) {
        const struct hop *o = &h->ops[l->op_first + i];
        size_t k = n++;
        while (k > 0 && v[k - 1]->count < o->count) { /* by samples, most first */
            v[k] = v[k - 1];
            k--;
        }
        v[k] = o;
        all += o->count;
    }
    fputs("<details><summary>", f);
    for (size_t i = 0; i < n; i++) {
        const char *base = NULL;
        const char *name = pys_opcode_name(h->version, v[i]->opcode, &base);
        if (i == 0) {
            put_str(f, name ? name : "?");
            fprintf(f, " %.0f%%", pct(v[0]->count, all));
            if (n > 1)
                fprintf(f, " +%zu", n - 1);
            fputs("</summary><table>", f);
        }
        fputs("<tr><td class=\"f\">", f);
        if (name)
            put_str(f, name);
        else
            fprintf(f, "opcode %d", (int)v[i]->opcode);
        if (base) {
            fputs(" (", f);
            put_str(f, base);
            fputc(')', f);
        }
        fprintf(f, "</td><td>%llu</td><td>%.1f%%</td></tr>", (unsigned long long)v[i]->count,
                pct(v[i]->count, all));
    }
    fputs("</table></details></td>", f);
}

static void write_row(FILE *f, const struct heat *h, const struct hfile *hf, uint32_t fi,
                      int32_t ln, const char *src, size_t len, uint64_t max_self,
                      uint64_t max_total)
{
    const struct hline *l = find_line(h, hf, ln);
    uint64_t s = l ? l->self : 0, t = l ? l->total : 0;
    int hs = level(s, max_self), ht = level(t, max_total);
    fprintf(f, "<tr id=\"L%d\"><td class=\"n\"><a href=\"#L%d\">%d</a></td>", (int)ln, (int)ln,
            (int)ln);
    if (l)
        fprintf(f, "<td class=\"h%d\">%llu</td><td class=\"h%d\">%llu</td>", hs,
                (unsigned long long)s, ht, (unsigned long long)t);
    else
        fputs("<td></td><td></td>", f);
    fprintf(f, "<td class=\"src h%d\">", hs ? hs : (ht ? 1 : 0));
    put_text(f, src, len);
    fputs("</td>", f);
    if (h->nops)
        line_ops(f, h, l);
    fputs("<td class=\"nav\">", f);
    line_nav(f, h, hf, fi, l, ln);
    fputs("</td></tr>\n", f);
}

static int write_file_page(int dirfd, const struct heat *h, uint32_t fi, const char *title,
                           const struct out_source *src)
{
    const struct hfile *hf = &h->files[fi];
    char name[32];
    snprintf(name, sizeof name, "file_%04zu.html", hf->page);
    FILE *f = open_page(dirfd, name);
    if (!f)
        return PYS_E_IO;
    const char *base = strrchr(hf->name, '/');
    page_head(f, title, base ? base + 1 : hf->name);
    fputs("<p><a href=\"index.html\">&larr; all files</a></p>\n<h1>", f);
    put_str(f, hf->name);
    fprintf(f,
            "</h1>\n<p>%s. Total %llu samples (%.1f%% of all), self %llu (%.1f%%); %u lines "
            "sampled.</p>\n",
            GROUP_NAMES[hf->group], (unsigned long long)hf->total, pct(hf->total, h->samples),
            (unsigned long long)hf->self, pct(hf->self, h->samples), hf->nlines);
    if (src->changed == 1)
        fputs("<p class=\"warn\" id=\"changed\">This file was modified after the target "
              "started: the source below may not be the code that ran.</p>\n",
              f);
    else if (src->changed)
        fputs("<p class=\"warn\" id=\"changed\">This file was modified or removed after it "
              "was read: the source below is as it was when first sampled.</p>\n",
              f);
    if (!src->text) {
        fputs("<p class=\"warn\" id=\"unreadable\">The source could not be read (", f);
        put_str(f, src->why ? src->why : "unknown reason");
        fputs("): the sampled lines are shown without it.</p>\n", f);
    }

    uint64_t max_self = 0, max_total = 0;
    const struct hline **hot = malloc((hf->nlines ? hf->nlines : 1) * sizeof *hot);
    if (!hot) {
        fclose(f);
        return PYS_E_NOMEM;
    }
    for (uint32_t i = 0; i < hf->nlines; i++) {
        const struct hline *l = &h->lines[hf->first + i];
        hot[i] = l;
        max_self = l->self > max_self ? l->self : max_self;
        max_total = l->total > max_total ? l->total : max_total;
    }
    qsort(hot, hf->nlines, sizeof *hot, by_line_heat);
    fputs("<h2>Hottest lines</h2>\n<table class=\"hot\"><tr><th>Line</th><th>Self</th><th>%</th>"
          "<th>Total</th><th>%</th></tr>\n",
          f);
    for (uint32_t i = 0; i < hf->nlines && i < 10; i++)
        fprintf(f,
                "<tr><td><a href=\"#L%d\">%d</a></td><td class=\"h%d\">%llu</td><td>%.1f</td>"
                "<td class=\"h%d\">%llu</td><td>%.1f</td></tr>\n",
                (int)hot[i]->line, (int)hot[i]->line, level(hot[i]->self, max_self),
                (unsigned long long)hot[i]->self, pct(hot[i]->self, h->samples),
                level(hot[i]->total, max_total), (unsigned long long)hot[i]->total,
                pct(hot[i]->total, h->samples));
    fputs("</table>\n", f);
    free(hot);

    fputs("<h2>Source</h2>\n<table class=\"code\"><tr><th>Line</th><th>Self</th><th>Total</th>"
          "<th class=\"f\">Code</th>",
          f);
    if (h->nops)
        fputs("<th class=\"f\">Instructions (samples at each)</th>", f);
    fputs("<th class=\"f\">Calls (&rarr; callees, &larr; callers)</th></tr>\n", f);
    /* Samples at no known line (a line table that could not be read). */
    for (uint32_t i = 0; i < hf->nlines && h->lines[hf->first + i].line <= 0; i++)
        write_row(f, h, hf, fi, h->lines[hf->first + i].line, "(line unknown)", 14, max_self,
                  max_total);
    int32_t ln = 0;
    if (src->text) {
        const char *s = src->text, *end = src->text + src->len;
        while (s < end && ln < INT32_MAX) {
            const char *nl = memchr(s, '\n', (size_t)(end - s));
            size_t len = nl ? (size_t)(nl - s) : (size_t)(end - s);
            if (len && s[len - 1] == '\r')
                len--;
            write_row(f, h, hf, fi, ++ln, s, len, max_self, max_total);
            s = nl ? nl + 1 : end;
        }
    }
    /* Sampled lines past the source (or all of them, without it). */
    for (uint32_t i = 0; i < hf->nlines; i++) {
        const struct hline *l = &h->lines[hf->first + i];
        if (l->line > ln)
            write_row(f, h, hf, fi, l->line, "", 0, max_self, max_total);
    }
    fputs("</table>\n</body></html>\n", f);
    return close_page(f);
}

static void heat_release(struct heat *h)
{
    free(h->node_file);
    free(h->node_line);
    free(h->files);
    free(h->lines);
    free(h->edges);
    free(h->by_callee);
    free(h->ops);
}

int out_heatmap_write(int dirfd, const pys_profile *p, const char *title, out_source_fn source,
                      void *ctx, size_t *nfiles)
{
    struct heat h;
    struct hfile **order = NULL;
    int rc = PYS_E_NOMEM;
    memset(&h, 0, sizeof h);
    h.p = p;
    h.nn = pys_profile_nodes(p);
    h.version = pys_profile_info_get(p)->python_version;
    if (!title)
        title = "pystrobe heatmap";
    h.node_file = malloc((h.nn ? h.nn : 1) * sizeof *h.node_file);
    h.node_line = malloc((h.nn ? h.nn : 1) * sizeof *h.node_line);
    if (!h.node_file || !h.node_line)
        goto done;
    if (h.nn) {
        h.node_file[0] = h.node_line[0] = NONE;
        if ((rc = number_nodes(&h)) < 0 || (rc = count(&h)) < 0 || (rc = count_ops(&h)) < 0)
            goto done;
    }
    rc = PYS_E_NOMEM;
    if (!(order = malloc((h.nfiles ? h.nfiles : 1) * sizeof *order)))
        goto done;
    for (size_t i = 0; i < h.nfiles; i++)
        order[i] = &h.files[i];
    if (h.nfiles)
        qsort(order, h.nfiles, sizeof *order, by_file_total);
    for (size_t i = 0; i < h.nfiles; i++)
        order[i]->page = i;
    if (!h.nfiles)
        order[0] = NULL;
    if ((rc = write_index(dirfd, &h, order, title)) < 0)
        goto done;
    for (size_t i = 0; i < h.nfiles; i++) {
        struct out_source src = {0};
        source(ctx, order[i]->name, &src);
        if ((rc = write_file_page(dirfd, &h, (uint32_t)(order[i] - h.files), title, &src)) < 0)
            goto done;
    }
    if (nfiles)
        *nfiles = h.nfiles;
    rc = 0;
done:
    free(order);
    heat_release(&h);
    return rc;
}
