/*
 * render_profile: build a profile from "collapsed" stacks on stdin and write
 * it as a flame graph page (or, with a format flag, as a pstats file or
 * collapsed stacks), for the tests of the outputs (and to look at one
 * without a target process).
 *
 * Usage: render_profile [--pstats | --collapsed | --collapsed-no-tid | --speedscope | --pprof] OUT
 * [TITLE] < STACKS
 *
 * One stack per line, outermost frame first:
 *
 *     tid:N;file:func:line;file:func:line COUNT
 *
 * A frame is split at its last two colons, so a file name may hold colons and
 * a function name may not; names may hold spaces (COUNT follows the last
 * space). A line of "-" means unknown. File "~" with function "<native>",
 * "<GC>" or "<folded at memory limit>" is a marker frame. "tid:N COUNT"
 * alone is a thread with no frames.
 *
 * Lines starting with '#' set the profile's info: "# pid N", "# python 0xHEX",
 * "# mode NAME", "# samples N" (default: the sum of the counts),
 * "# duration_ns N", "# interval_ns N", "# failed N", "# missed N",
 * "# title TEXT" (TITLE on the command line wins), "# thread_name TID NAME"
 * (the thread's name, as read from threading); other '#' lines are
 * comments. Empty lines are skipped.
 *
 * Exit status 0; 1 if the page could not be written; 2 on bad input or usage.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pystrobe/pystrobe.h>

#include "output/collapsed.h"
#include "output/flamegraph.h"
#include "output/pprof.h"
#include "output/pstats.h"
#include "output/speedscope.h"

/* Equal strings must share one pointer: the profile compares addresses. */
struct intern {
    char **slots; /* open addressing, owned copies; NULL = empty */
    size_t n, cap;
};

struct input {
    struct intern names;
    struct pys_frame *frames;
    size_t nframes, frames_cap;
    char *title;
    int have_samples;
    uint64_t counted; /* sum of the counts */
    unsigned long lineno;
};

static void die(const struct input *in, const char *what)
{
    fprintf(stderr, "render_profile: line %lu: %s\n", in->lineno, what);
    exit(2);
}

static void *check_alloc(void *p)
{
    if (!p) {
        fputs("render_profile: out of memory\n", stderr);
        exit(2);
    }
    return p;
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

static const char *intern_str(struct intern *t, const char *s)
{
    if ((t->n + 1) * 2 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        char **slots = check_alloc(calloc(cap, sizeof *slots));
        for (size_t i = 0; i < t->cap; i++) {
            if (!t->slots[i])
                continue;
            size_t j = hash_str(t->slots[i]) & (cap - 1);
            while (slots[j])
                j = (j + 1) & (cap - 1);
            slots[j] = t->slots[i];
        }
        free(t->slots);
        t->slots = slots;
        t->cap = cap;
    }
    size_t j = hash_str(s) & (t->cap - 1);
    for (; t->slots[j]; j = (j + 1) & (t->cap - 1))
        if (strcmp(t->slots[j], s) == 0)
            return t->slots[j];
    t->slots[j] = check_alloc(strdup(s));
    t->n++;
    return t->slots[j];
}

static void intern_release(struct intern *t)
{
    for (size_t i = 0; i < t->cap; i++)
        free(t->slots[i]);
    free(t->slots);
}

static uint64_t parse_u64(const struct input *in, const char *s, int base)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, base);
    if (errno || end == s || *end || *s == '-')
        die(in, "bad number");
    return v;
}

static void directive(struct input *in, pys_profile *p, char *line)
{
    struct pys_profile_info *info = pys_profile_info(p);
    char *key = line + 1, *val;
    key += strspn(key, " \t");
    val = key + strcspn(key, " \t");
    if (*val)
        *val++ = '\0';
    val += strspn(val, " \t");
    if (strcmp(key, "pid") == 0) {
        info->pid = (int)parse_u64(in, val, 10);
    } else if (strcmp(key, "python") == 0) {
        info->python_version = (uint32_t)parse_u64(in, val, 0);
    } else if (strcmp(key, "mode") == 0) {
        info->mode = intern_str(&in->names, val);
    } else if (strcmp(key, "samples") == 0) {
        info->samples = parse_u64(in, val, 10);
        in->have_samples = 1;
    } else if (strcmp(key, "duration_ns") == 0) {
        info->duration_ns = parse_u64(in, val, 10);
    } else if (strcmp(key, "interval_ns") == 0) {
        info->interval_ns = parse_u64(in, val, 10);
    } else if (strcmp(key, "failed") == 0) {
        info->failed = parse_u64(in, val, 10);
    } else if (strcmp(key, "missed") == 0) {
        info->missed = parse_u64(in, val, 10);
    } else if (strcmp(key, "thread_name") == 0) {
        char *name = val + strcspn(val, " \t");
        if (*name)
            *name++ = '\0';
        uint64_t tid = parse_u64(in, val, 10);
        if (pys_profile_set_thread_name(p, tid, intern_str(&in->names, name)) < 0)
            die(in, "cannot name thread 0");
    } else if (strcmp(key, "title") == 0 && !in->title) {
        in->title = check_alloc(strdup(val));
    }
}

static void push_frame(struct input *in, char *tok)
{
    char *c2 = strrchr(tok, ':'), *c1;
    if (!c2)
        die(in, "frame without file:func:line");
    *c2 = '\0';
    c1 = strrchr(tok, ':');
    if (!c1)
        die(in, "frame without file:func:line");
    *c1 = '\0';
    if (in->nframes == in->frames_cap) {
        in->frames_cap = in->frames_cap ? in->frames_cap * 2 : 64;
        in->frames = check_alloc(realloc(in->frames, in->frames_cap * sizeof *in->frames));
    }
    struct pys_frame *f = &in->frames[in->nframes++];
    memset(f, 0, sizeof *f);
    f->filename = intern_str(&in->names, tok);
    f->qualname = intern_str(&in->names, c1 + 1);
    if (strcmp(c2 + 1, "-") == 0) {
        f->lineno = -1;
    } else {
        uint64_t line = parse_u64(in, c2 + 1, 10);
        if (line > INT32_MAX)
            die(in, "line number out of range");
        f->lineno = (int32_t)line;
    }
    f->firstlineno = f->end_lineno = f->col = f->end_col = f->lasti = -1;
    f->kind = PYS_FRAME_PYTHON;
    if (strcmp(tok, "~") == 0 && strcmp(c1 + 1, "<native>") == 0)
        f->kind = PYS_FRAME_NATIVE;
    else if (strcmp(tok, "~") == 0 && strcmp(c1 + 1, "<GC>") == 0)
        f->kind = PYS_FRAME_GC;
    else if (strcmp(tok, "~") == 0 && strcmp(c1 + 1, "<folded at memory limit>") == 0)
        f->kind = PYS_FRAME_FOLDED;
}

static void stack_line(struct input *in, pys_profile *p, char *line)
{
    char *sp = strrchr(line, ' '), *tok, *save = NULL;
    uint64_t tid, count;
    if (!sp)
        die(in, "no count");
    *sp = '\0';
    count = parse_u64(in, sp + 1, 10);
    tok = strtok_r(line, ";", &save);
    if (!tok || strncmp(tok, "tid:", 4) != 0)
        die(in, "stack does not start with tid:N");
    tid = parse_u64(in, tok + 4, 10);
    in->nframes = 0;
    while ((tok = strtok_r(NULL, ";", &save)))
        push_frame(in, tok);
    /* Read outermost first; the profile takes innermost first. */
    for (size_t i = 0; i < in->nframes / 2; i++) {
        struct pys_frame t = in->frames[i];
        in->frames[i] = in->frames[in->nframes - 1 - i];
        in->frames[in->nframes - 1 - i] = t;
    }
    if (pys_profile_add(p, tid, in->frames, in->nframes, count) < 0)
        die(in, "pys_profile_add failed");
    in->counted += count;
}

int main(int argc, char **argv)
{
    struct input in = {0};
    pys_profile *p;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    FILE *out;
    int rc;

    const char *format = "--flamegraph";
    if (argc > 1 && strncmp(argv[1], "--", 2) == 0) {
        format = argv[1];
        argc--;
        argv++;
    }
    if (argc < 2 || argc > 3) {
        fputs("usage: render_profile [--pstats | --collapsed | --collapsed-no-tid | --speedscope | "
              "--pprof] OUT "
              "[TITLE] < STACKS\n",
              stderr);
        return 2;
    }
    p = check_alloc(pys_profile_new());
    while ((len = getline(&line, &cap, stdin)) >= 0) {
        in.lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0)
            continue;
        if (line[0] == '#')
            directive(&in, p, line);
        else
            stack_line(&in, p, line);
    }
    if (!in.have_samples)
        pys_profile_info(p)->samples = in.counted;

    out = fopen(argv[1], "w");
    if (!out) {
        fprintf(stderr, "render_profile: cannot open %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    if (strcmp(format, "--pstats") == 0)
        rc = out_pstats_write_marshal(out, p);
    else if (strcmp(format, "--collapsed") == 0)
        rc = out_collapsed_write(out, p, 1);
    else if (strcmp(format, "--collapsed-no-tid") == 0)
        rc = out_collapsed_write(out, p, 0);
    else if (strcmp(format, "--pprof") == 0)
        rc = out_pprof_write(out, p, 0);
    else if (strcmp(format, "--speedscope") == 0)
        rc = out_speedscope_write(out, p, argc == 3 ? argv[2] : in.title);
    else
        rc = out_flamegraph_write(out, p, argc == 3 ? argv[2] : in.title);
    if (fclose(out) != 0 && rc == 0)
        rc = PYS_E_IO;
    if (rc < 0)
        fprintf(stderr, "render_profile: writing %s: %s\n", argv[1], pys_strerror(rc));

    free(line);
    free(in.frames);
    free(in.title);
    pys_profile_free(p);
    intern_release(&in.names);
    return rc < 0 ? 1 : 0;
}
