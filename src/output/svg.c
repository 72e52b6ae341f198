/*
 * svg: write a profile as an SVG flame graph (format in svg.h). Nodes are
 * laid out in one pass in id order, which the profile guarantees puts every
 * parent before its children: a node starts where its previous sibling
 * ended, or at its parent's start. Nodes narrower than MIN_WIDTH pixels are
 * left out, with everything above them.
 */
#include "output/svg.h"
#include "output/markup.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define WIDTH 1200.0  /* pixels of the graph's drawing area */
#define PAD 10.0      /* margin on each side */
#define FRAME_H 16    /* height of one frame's row */
#define TOP 40        /* the title's band */
#define MIN_WIDTH 0.1 /* narrower nodes are not drawn */
#define CHAR_W 7.0    /* a label character's width at font-size 12 */
#define DEFAULT_TITLE "pystrobe flame graph"

/* s (NUL-terminated) escaped, at most max_chars characters of it; how
 * many were left unwritten. */
static size_t put_escaped(FILE *f, const char *s, size_t max_chars)
{
    return out_markup_put(f, s, strlen(s), max_chars);
}

static size_t char_count(const char *s)
{
    return out_markup_chars(s, strlen(s));
}

/* A thread node's label, "tid:N" with " (NAME)" after it when the thread
 * has a Python name (as collapsed output's thread frame), into buf. */
static void thread_label(char *buf, size_t n, const pys_profile *p, uint32_t id)
{
    uint64_t tid = pys_profile_thread(p, id);
    const char *name = pys_profile_thread_name(p, tid);
    if (name)
        snprintf(buf, n, "tid:%" PRIu64 " (%s)", tid, name);
    else
        snprintf(buf, n, "tid:%" PRIu64, tid);
}

/* A node's label: "qualname (file:line)" for a Python frame, the marker's
 * name for the others, the thread's (thread_label) for a thread node, "all"
 * for the root. */
static void put_label(FILE *f, const pys_profile *p, uint32_t id, size_t max_chars)
{
    const struct pys_frame *fr = pys_profile_frame(p, pys_profile_node(p, id)->frame);
    /* A thread's name is at most 256 characters (core/threadnames.c). */
    char buf[1280];
    if (!fr) {
        if (id == 0)
            snprintf(buf, sizeof buf, "all");
        else
            thread_label(buf, sizeof buf, p, id);
        if (max_chars != SIZE_MAX && char_count(buf) > max_chars) {
            put_escaped(f, buf, max_chars > 2 ? max_chars - 2 : 0);
            fputs("..", f);
        } else {
            put_escaped(f, buf, SIZE_MAX);
        }
        return;
    }
    /* The whole label's length decides where it is cut. */
    size_t qn = char_count(fr->qualname);
    size_t total = qn;
    if (fr->kind == PYS_FRAME_PYTHON) {
        snprintf(buf, sizeof buf, fr->lineno >= 0 ? ":%d)" : ")", (int)fr->lineno);
        total += 2 + char_count(fr->filename) + strlen(buf);
    }
    size_t room = max_chars == SIZE_MAX || total <= max_chars ? SIZE_MAX
                  : max_chars > 2                             ? max_chars - 2
                                                              : 0;
    size_t left = put_escaped(f, fr->qualname, room);
    if (fr->kind == PYS_FRAME_PYTHON && !left) {
        size_t used = qn;
        if (room == SIZE_MAX || used + 2 <= room) {
            fputs(" (", f);
            left = put_escaped(f, fr->filename, room == SIZE_MAX ? SIZE_MAX : room - used - 2);
            used += 2 + char_count(fr->filename);
            if (!left && (room == SIZE_MAX || used + strlen(buf) <= room))
                fputs(buf, f);
        }
    }
    if (room != SIZE_MAX)
        fputs("..", f);
}

/* A warm colour from the node's name, the same for the same name. */
static void put_color(FILE *f, const pys_profile *p, uint32_t id)
{
    const struct pys_frame *fr = pys_profile_frame(p, pys_profile_node(p, id)->frame);
    uint32_t h = 2166136261u;
    for (const char *s = fr ? fr->qualname : "thread"; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    if (fr && fr->kind != PYS_FRAME_PYTHON) {
        fputs("rgb(160,160,160)", f);
        return;
    }
    fprintf(f, "rgb(%u,%u,%u)", 205 + (h & 0xff) % 50, (h >> 8 & 0xff) % 230,
            (h >> 16 & 0xff) % 55);
}

/* Instructions a tooltip lists at most. */
#define SVG_OPS 8

static int by_count_desc(const void *a, const void *b)
{
    const struct pys_opcode_count *x = a, *y = b;
    return x->count < y->count ? 1 : x->count > y->count ? -1 : x->opcode - y->opcode;
}

/* --opcodes: the instructions node id's frame was sampled at, most sampled
 * first, after its tooltip: "; NAME (BASE) N, ..." as the target's version
 * names them ("opcode N" where it has none); nothing for a node without. */
static void put_ops(FILE *f, const pys_profile *p, uint32_t id, uint32_t version)
{
    struct pys_opcode_count ops[256];
    int n = pys_profile_node_opcodes(p, id, ops, sizeof ops / sizeof ops[0]);
    if (n <= 0)
        return;
    if (n > (int)(sizeof ops / sizeof ops[0]))
        n = (int)(sizeof ops / sizeof ops[0]);
    qsort(ops, (size_t)n, sizeof *ops, by_count_desc);
    fputc(';', f);
    for (int i = 0; i < n && i < SVG_OPS; i++) {
        const char *base = NULL;
        const char *name = pys_opcode_name(version, ops[i].opcode, &base);
        char buf[128];
        if (!name)
            snprintf(buf, sizeof buf, "opcode %d", (int)ops[i].opcode);
        else if (base)
            snprintf(buf, sizeof buf, "%s (%s)", name, base);
        else
            snprintf(buf, sizeof buf, "%s", name);
        fputs(i ? ", " : " ", f);
        put_escaped(f, buf, SIZE_MAX);
        fprintf(f, " %" PRIu64, ops[i].count);
    }
    if (n > SVG_OPS)
        fputs(", ...", f);
}

int out_svg_write(FILE *f, const pys_profile *p, const char *title)
{
    size_t n = pys_profile_nodes(p);
    uint64_t all = n ? pys_profile_node(p, 0)->total : 0;
    uint32_t version = pys_profile_info_get(p)->python_version;
    double *x = malloc((n ? n : 1) * sizeof *x);       /* left edge, pixels */
    double *next = malloc((n ? n : 1) * sizeof *next); /* where the next child starts */
    uint32_t *depth = malloc((n ? n : 1) * sizeof *depth);
    unsigned char *drawn = calloc(n ? n : 1, 1);
    int rc = PYS_E_NOMEM;
    if (!x || !next || !depth || !drawn)
        goto out;

    /* Lay out: which nodes are drawn, where, and how deep the graph is. */
    uint32_t max_depth = 0;
    double scale = all ? WIDTH / (double)all : 0;
    for (uint32_t id = 0; id < n; id++) {
        const struct pys_profile_node *nd = pys_profile_node(p, id);
        double w = (double)nd->total * scale;
        if (id == 0) {
            x[0] = next[0] = PAD;
            depth[0] = 0;
            drawn[0] = all > 0;
        } else {
            uint32_t par = nd->parent;
            if (par >= id || !drawn[par] || w < MIN_WIDTH)
                continue;
            x[id] = next[par];
            next[par] += w;
            next[id] = x[id];
            depth[id] = depth[par] + 1;
            drawn[id] = 1;
        }
        if (drawn[id] && depth[id] > max_depth)
            max_depth = depth[id];
    }
    int height = TOP + ((int)max_depth + 1) * FRAME_H + 2 * (int)PAD;

    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
            "height=\"%d\" viewBox=\"0 0 %d %d\">\n"
            "<style>text{font-family:monospace;font-size:12px;fill:#000}"
            ".t{font-size:17px;text-anchor:middle}rect{stroke:#fff;stroke-width:0.5}</style>\n"
            "<rect x=\"0\" y=\"0\" width=\"100%%\" height=\"100%%\" fill=\"#f8f8f8\"/>\n"
            "<text class=\"t\" x=\"%.1f\" y=\"24\">",
            (int)(WIDTH + 2 * PAD), height, (int)(WIDTH + 2 * PAD), height, PAD + WIDTH / 2);
    put_escaped(f, title ? title : DEFAULT_TITLE, SIZE_MAX);
    fputs("</text>\n", f);
    for (uint32_t id = 0; id < n; id++) {
        if (!drawn[id])
            continue;
        const struct pys_profile_node *nd = pys_profile_node(p, id);
        double w = (double)nd->total * scale;
        double y = height - PAD - (double)(depth[id] + 1) * FRAME_H;
        fputs("<g><title>", f);
        put_label(f, p, id, SIZE_MAX);
        fprintf(f, " (%" PRIu64 " samples, %.2f%%)", nd->total,
                100.0 * (double)nd->total / (double)all);
        put_ops(f, p, id, version);
        fprintf(f, "</title><rect x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"%d\" fill=\"",
                x[id], y, w, FRAME_H - 1);
        put_color(f, p, id);
        fputs("\"/>", f);
        if (w >= 3 * CHAR_W) {
            fprintf(f, "<text x=\"%.2f\" y=\"%.0f\">", x[id] + 3, y + FRAME_H - 4);
            put_label(f, p, id, (size_t)((w - 6) / CHAR_W));
            fputs("</text>", f);
        }
        fputs("</g>\n", f);
    }
    fputs("</svg>\n", f);
    rc = fflush(f) != 0 || ferror(f) ? PYS_E_IO : 0;
out:
    free(x);
    free(next);
    free(depth);
    free(drawn);
    return rc;
}
