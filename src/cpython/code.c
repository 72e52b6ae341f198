/*
 * code: code objects (name, file, first line, line table, bytecode length)
 * and where in its code a frame is. The core caches what cpy_code_read
 * returns; this file keeps nothing.
 */
#include <stdlib.h>
#include <string.h>

#include <pystrobe/pystrobe.h>

#include "cpython/cpython.h"
#include "util/bytes.h"

/* A code object's fixed part is about 200 bytes in 3.13-3.15. */
#define CODE_HEAD_MAX 4096

/* Is the object at addr of type code? By address when the image exported
 * PyCode_Type, else by the type's name. */
static int check_code_type(struct mem *m, const struct cpy_offsets *o,
                           const struct cpy_symbols *sym, uint64_t type)
{
    if (sym->code_type)
        return type == sym->code_type ? 0 : PYS_E_CORRUPT;
    uint64_t name;
    char buf[8];
    int rc = mem_read_u64(m, type + o->type_object.tp_name, &name);
    if (rc == 0)
        rc = mem_read(m, name, buf, 5);
    if (rc < 0)
        return rc;
    return memcmp(buf, "code", 5) == 0 ? 0 : PYS_E_CORRUPT;
}

static void key_from_head(const struct cpy_offsets *o, const uint8_t *head, struct cpy_code_key *k)
{
    uint64_t qual =
        CPY_HAS(o, code_object, qualname) ? o->code_object.qualname : o->code_object.name;
    memset(k, 0, sizeof *k);
    k->type = util_load_u64(head + o->pyobject.ob_type);
    k->filename = util_load_u64(head + o->code_object.filename);
    k->qualname = util_load_u64(head + qual);
    k->linetable = util_load_u64(head + o->code_object.linetable);
    k->firstlineno = util_load_i32(head + o->code_object.firstlineno);
}

/* The names' length and hash: in every str object, the hash follows the
 * length (PyASCIIObject, 3.8-3.15). */
static int key_names(struct mem *m, const struct cpy_offsets *o, struct cpy_code_key *k)
{
    int64_t f[2] = {0, 0}, q[2] = {0, 0};
    struct mem_seg segs[] = {
        {k->filename + o->unicode_object.length, f, sizeof f},
        {k->qualname + o->unicode_object.length, q, sizeof q},
    };
    int rc = mem_readv(m, segs, 2);
    if (rc < 0)
        return rc;
    k->filename_len = f[0];
    k->filename_hash = f[1];
    k->qualname_len = q[0];
    k->qualname_hash = q[1];
    return 0;
}

int cpy_code_key_equal(const struct cpy_code_key *a, const struct cpy_code_key *b)
{
    return a->type == b->type && a->filename == b->filename && a->qualname == b->qualname &&
           a->linetable == b->linetable && a->firstlineno == b->firstlineno &&
           a->filename_len == b->filename_len && a->filename_hash == b->filename_hash &&
           a->qualname_len == b->qualname_len && a->qualname_hash == b->qualname_hash;
}

void cpy_code_key_parse(const struct cpy_offsets *o, const uint8_t *head,
                        const uint8_t *filename_len, const uint8_t *qualname_len,
                        struct cpy_code_key *out)
{
    key_from_head(o, head, out);
    out->filename_len = util_load_i64(filename_len);
    out->filename_hash = util_load_i64(filename_len + 8);
    out->qualname_len = util_load_i64(qualname_len);
    out->qualname_hash = util_load_i64(qualname_len + 8);
}

int cpy_code_read(struct mem *m, const struct cpy_offsets *o, const struct cpy_symbols *sym,
                  uint64_t addr, struct cpy_code *out)
{
    uint8_t head[CODE_HEAD_MAX];
    struct cpy_code c;
    size_t hlen = o->code_object.size;
    int rc;

    memset(&c, 0, sizeof c);
    if (hlen > sizeof head)
        return PYS_E_CORRUPT;
    if ((rc = mem_read(m, addr, head, hlen)) < 0)
        return rc;
    if ((rc = check_code_type(m, o, sym, util_load_u64(head + o->pyobject.ob_type))) < 0)
        return rc;
    key_from_head(o, head, &c.key);
    if ((rc = key_names(m, o, &c.key)) < 0)
        return rc;
    int64_t units;
    if (CPY_HAS(o, code_object, co_code)) {
        /* Before 3.11 the bytecode is a bytes object of its own. */
        int64_t nbytes;
        uint64_t bytes = util_load_u64(head + o->code_object.co_code);
        rc = mem_read(m, bytes + o->bytes_object.ob_size, &nbytes, sizeof nbytes);
        if (rc < 0)
            return rc;
        units = nbytes / 2;
        c.code_bytes = bytes + o->bytes_object.ob_sval;
    } else {
        units = util_load_i64(head + o->var_object.ob_size);
        c.code_bytes = addr + o->code_object.co_code_adaptive;
    }
    if (units < 0 || units > (INT32_MAX / 2))
        return PYS_E_CORRUPT;
    c.ncodeunits = (uint64_t)units;
    c.firstlineno = util_load_i32(head + o->code_object.firstlineno);
    c.firsttraceable = CPY_HAS(o, code_object, firsttraceable)
                           ? util_load_i32(head + o->code_object.firsttraceable)
                           : -1;
    c.framesize =
        CPY_HAS(o, code_object, framesize) ? util_load_i32(head + o->code_object.framesize) : -1;
    rc = cpy_unicode_read(m, o, util_load_u64(head + o->code_object.filename), CPY_MAX_STR_CHARS,
                          &c.filename);
    /* No co_qualname before 3.11: the plain name is all there is. */
    uint64_t qual =
        CPY_HAS(o, code_object, qualname) ? o->code_object.qualname : o->code_object.name;
    if (rc == 0)
        rc = cpy_unicode_read(m, o, util_load_u64(head + qual), CPY_MAX_STR_CHARS, &c.qualname);
    if (rc < 0)
        goto fail;
    /* Every code object CPython makes has a name: an empty one is a code
     * object being made or already freed, read by a walk that raced. */
    if (c.qualname[0] == '\0') {
        rc = PYS_E_CORRUPT;
        goto fail;
    }
    rc = cpy_bytes_read(m, o, util_load_u64(head + o->code_object.linetable), CPY_MAX_LINETABLE,
                        &c.linetable, &c.linetable_len);
    if (rc == PYS_E_NOTFOUND)
        rc = 0; /* a table too large to copy: frames of this code get no location */
    if (rc < 0)
        goto fail;
    *out = c;
    return 0;
fail:
    cpy_code_release(&c);
    return rc;
}

void cpy_code_release(struct cpy_code *c)
{
    free(c->filename);
    free(c->qualname);
    free(c->linetable);
    free(c->starts);
    free(c->bytecode);
    free(c->resumes);
    memset(c, 0, sizeof *c);
}

/* Code-unit index of the frame's instruction: negative before the first
 * instruction, INT64_MAX if the position is not inside the code at all. */
static int64_t instr_index(const struct cpy_offsets *o, const struct cpy_code *c,
                           const struct cpy_raw_frame *f)
{
    int64_t idx;
    switch (o->traits.position) {
    case CPY_POS_LASTI_BYTES:
        idx = (int64_t)f->instr_ptr < 0 ? -1 : (int64_t)f->instr_ptr / 2;
        break;
    case CPY_POS_LASTI_UNITS:
        idx = (int64_t)f->instr_ptr < 0 ? -1 : (int64_t)f->instr_ptr;
        break;
    default: {
        uint64_t base = f->code + o->code_object.co_code_adaptive;
        if (f->instr_ptr < base) {
            /* 3.11/3.12 point one unit before the code until the first instruction. */
            return base - f->instr_ptr == 2 ? -1 : INT64_MAX;
        }
        uint64_t off = f->instr_ptr - base;
        if (off % 2 != 0)
            return INT64_MAX;
        idx = off / 2 > (uint64_t)INT32_MAX ? INT64_MAX : (int64_t)(off / 2);
    }
    }
    if (idx >= 0 && (uint64_t)idx >= c->ncodeunits)
        return INT64_MAX;
    return idx;
}

int cpy_code_locate(const struct cpy_offsets *o, const struct cpy_code *c,
                    const struct cpy_raw_frame *f, int32_t *lasti, struct cpy_location *loc)
{
    struct cpy_location l = {-1, -1, -1, -1};
    int64_t idx = instr_index(o, c, f);
    int rc = 0;
    if (idx == INT64_MAX)
        return PYS_E_CORRUPT;
    if (idx < 0) {
        /* Not started (3.8-3.10): Python reports the first line. */
        if (o->traits.position == CPY_POS_PREV_INSTR || o->traits.position == CPY_POS_INSTR_PTR)
            return PYS_E_CORRUPT;
        l.lineno = l.end_lineno = c->firstlineno;
        *lasti = -1;
        *loc = l;
        return 0;
    }
    if (c->linetable) {
        switch (o->traits.lines) {
        case CPY_LINES_LNOTAB:
            rc = cpy_lnotab_lookup(c->linetable, c->linetable_len, c->firstlineno,
                                   (uint32_t)idx * 2, &l.lineno);
            l.end_lineno = l.lineno;
            break;
        case CPY_LINES_PEP626:
            rc = cpy_linetable310_lookup(c->linetable, c->linetable_len, c->firstlineno,
                                         (uint32_t)idx * 2, &l.lineno);
            l.end_lineno = l.lineno;
            break;
        default:
            rc = cpy_loctable_lookup(c->linetable, c->linetable_len, c->firstlineno, (uint32_t)idx,
                                     &l);
            break;
        }
        if (rc < 0)
            l.lineno = l.end_lineno = l.col = l.end_col = -1;
    }
    *lasti = (int32_t)(idx * 2);
    *loc = l;
    return 0;
}

int cpy_frame_incomplete(const struct cpy_offsets *o, const struct cpy_code *c,
                         const struct cpy_raw_frame *f)
{
    /* Only interpreter frames (3.11+) have a prologue to hide. */
    if (o->traits.frames == CPY_FRAMES_OBJECT || f->owner == CPY_OWNER_GENERATOR ||
        c->firsttraceable < 0)
        return 0;
    int64_t idx = instr_index(o, c, f);
    return idx != INT64_MAX && idx < c->firsttraceable;
}

int cpy_code_never_starts(const struct cpy_code *c)
{
    /* CPython finds a code object's first traceable instruction (its RESUME)
     * by scanning its bytecode; one made by hand may put it past the end:
     * 3.13+'s shim under an __init__ that CALL_ALLOC_AND_ENTER_INIT calls
     * (three instructions, the first traceable one 4), whose frame waits at
     * its first instruction, which checks what __init__ returned. */
    return c->firsttraceable >= 0 && (uint64_t)c->firsttraceable >= c->ncodeunits;
}

int cpy_code_holds(const struct cpy_offsets *o, const struct cpy_code *c, uint64_t code,
                   uint64_t position)
{
    struct cpy_raw_frame f = {.code = code, .instr_ptr = position};
    return instr_index(o, c, &f) != INT64_MAX;
}
