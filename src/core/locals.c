/*
 * locals: pys_session_frame_locals. While a snapshot names its frames
 * (snapshot.c's resolve_frames), each Python frame's address and code
 * object are kept here, by the frame's index in the snapshot's frames; a
 * later call reads that frame's fast locals (cpython/locals.c), after
 * checking the frame still runs the same code, and gives names (interned)
 * and short representations (in a buffer reused by the next call).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pystrobe/pystrobe.h>

#include "core/core.h"

/* How much of a str or bytes value is shown (pystrobe.h promises these). */
#define SHOW_STR_CHARS 100
#define SHOW_BYTES 64
/* A representation's bytes: the longest of the shown str (4 bytes of UTF-8
 * or of an escape per code point) with its quotes and "...". */
#define REPR_CAP 512
/* Code points of a local's name kept. */
#define NAME_CHARS 256

struct frame_src {
    uint64_t addr, code;
};

struct prof_locals {
    struct frame_src *src; /* by index in s->res.frames; Python frames only */
    size_t src_cap;
    struct cpy_local raw[PYS_LOCALS_MAX];
    struct pys_local out[PYS_LOCALS_MAX];
    char *text; /* the representations, REPR_CAP bytes each */
};

struct prof_locals *prof_locals_new(void)
{
    return calloc(1, sizeof(struct prof_locals));
}

void prof_locals_free(struct prof_locals *l)
{
    if (!l)
        return;
    free(l->src);
    free(l->text);
    free(l);
}

int prof_locals_note(struct pys_session *s, size_t i, uint64_t addr, uint64_t code)
{
    struct prof_locals *l = s->locals;
    int rc = util_array_reserve((void **)&l->src, &l->src_cap, i + 1, sizeof *l->src);
    if (rc < 0)
        return rc;
    l->src[i] = (struct frame_src){addr, code};
    return 0;
}

int pys_session_frame_locals(pys_session *s, const struct pys_thread *t, size_t frame,
                             const struct pys_local **out, size_t *n)
{
    struct prof_locals *l = s ? s->locals : NULL;
    if (!l || !t || !out || !n)
        return PYS_E_INVAL;
    /* t and its frames must be the last snapshot's (with native stacks,
     * their merge of its frames). */
    size_t idx;
    int merged = frame < t->nframes && prof_native_res_index(s, &t->frames[frame], &idx) == 0;
    if (!merged) {
        if (!s->res.frames || t->frames < s->res.frames ||
            t->frames > s->res.frames + s->res.nframes || frame >= t->nframes ||
            (size_t)(t->frames - s->res.frames) + frame >= s->res.nframes)
            return prof_fail(s, PYS_E_INVAL, "frame %zu is not one of the last snapshot", frame);
        idx = (size_t)(t->frames - s->res.frames) + frame;
    }
    if (t->frames[frame].kind != PYS_FRAME_PYTHON || idx >= l->src_cap) {
        *out = l->out;
        *n = 0;
        return 0;
    }
    const struct frame_src *fs = &l->src[idx];
    uint64_t code;
    int rc = mem_read_u64(&s->mem, fs->addr + s->off.interpreter_frame.executable, &code);
    if (rc < 0)
        return prof_fail(s, rc, "frame at 0x%llx unreadable: %s", (unsigned long long)fs->addr,
                         pys_strerror(rc));
    if ((code & ~s->off.stackref_mask) != fs->code)
        return prof_fail(s, PYS_E_CORRUPT,
                         "the frame at 0x%llx runs other code than at the snapshot (it returned)",
                         (unsigned long long)fs->addr);
    int got = cpy_frame_locals(&s->mem, &s->off, fs->addr, fs->code, l->raw, PYS_LOCALS_MAX);
    if (got < 0)
        return prof_fail(s, got, "locals of the frame at 0x%llx: %s", (unsigned long long)fs->addr,
                         pys_strerror(got));
    if (!l->text && !(l->text = malloc((size_t)PYS_LOCALS_MAX * REPR_CAP)))
        return PYS_E_NOMEM;
    const struct cpy_repr_limits lim = {SHOW_STR_CHARS, SHOW_BYTES};
    size_t k = 0;
    for (int i = 0; i < got; i++) {
        const struct cpy_local *cl = &l->raw[i];
        char *text = l->text + k * REPR_CAP;
        if (cl->hidden || cl->value == 0)
            continue;
        if (cl->tagged_int)
            rc = cpy_tagged_int_repr(cl->value, text, REPR_CAP);
        else
            rc = cpy_object_repr(&s->mem, &s->off, &s->sym, cl->value, cl->cell, &lim, text,
                                 REPR_CAP);
        if (rc == PYS_E_NOTFOUND) /* an empty cell: not bound yet */
            continue;
        if (rc == PYS_E_NOMEM)
            return rc;
        if (rc < 0)
            snprintf(text, REPR_CAP, "<unreadable at 0x%llx>", (unsigned long long)cl->value);
        char *name = NULL;
        const char *iname = NULL;
        if (cpy_unicode_read(&s->mem, &s->off, cl->name, NAME_CHARS, &name) == 0) {
            iname = prof_intern_str(&s->strings, name, strlen(name));
            free(name);
        } else {
            iname = prof_intern_str(&s->strings, "?", 1);
        }
        if (!iname)
            return PYS_E_NOMEM;
        l->out[k].name = iname;
        l->out[k].repr = text;
        k++;
    }
    *out = l->out;
    *n = k;
    return 0;
}
