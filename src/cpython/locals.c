/*
 * locals: a frame's local variables (dump --locals), read without running
 * anything in the target: the names from the code object (co_varnames
 * before 3.11, co_localsplusnames from 3.11), the values from the frame's
 * fast locals (PyFrameObject.f_localsplus, _PyInterpreterFrame.localsplus),
 * and a short representation of each value for the common types. Every
 * count and length read is bounded; an object that does not look like what
 * its type says is shown by its type name and address, never followed.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pystrobe/pystrobe.h>

#include "cpython/cpython.h"

/* co_localspluskinds bits (3.11+, the same to 3.15). */
#define KIND_HIDDEN 0x10 /* a comprehension's inlined variable (3.12+) */
#define KIND_CELL 0x40
#define KIND_FREE 0x80

/* Type names are C strings of the target: read at most this much. */
#define TYPE_NAME_MAX 64

int cpy_frame_locals(struct mem *m, const struct cpy_offsets *o, uint64_t frame, uint64_t code,
                     struct cpy_local *out, size_t max)
{
    if (!CPY_HAS(o, interpreter_frame, localsplus) || !CPY_HAS(o, code_object, localsplusnames) ||
        !CPY_HAS(o, tuple_object, ob_item))
        return PYS_E_VERSION;
    uint64_t names, kinds = 0;
    int rc = mem_read_u64(m, code + o->code_object.localsplusnames, &names);
    if (rc == 0 && CPY_HAS(o, code_object, localspluskinds))
        rc = mem_read_u64(m, code + o->code_object.localspluskinds, &kinds);
    if (rc < 0)
        return rc;
    int64_t n;
    if (names == 0 || (rc = mem_read(m, names + o->var_object.ob_size, &n, sizeof n)) < 0)
        return names == 0 ? PYS_E_CORRUPT : rc;
    if (n < 0 || n > CPY_MAX_LOCALS)
        return PYS_E_CORRUPT;
    size_t count = (size_t)n < max ? (size_t)n : max;
    if (count == 0)
        return 0;
    uint64_t *name_ptrs = malloc(count * sizeof *name_ptrs);
    uint64_t *values = malloc(count * sizeof *values);
    uint8_t *kind = calloc(count, 1);
    rc = PYS_E_NOMEM;
    if (!name_ptrs || !values || !kind)
        goto done;
    struct mem_seg segs[3] = {
        {names + o->tuple_object.ob_item, name_ptrs, count * 8},
        {frame + o->interpreter_frame.localsplus, values, count * 8},
    };
    size_t nsegs = 2;
    int64_t nkinds = 0;
    if (kinds) {
        if ((rc = mem_read(m, kinds + o->bytes_object.ob_size, &nkinds, sizeof nkinds)) < 0)
            goto done;
        if (nkinds != n) {
            rc = PYS_E_CORRUPT;
            goto done;
        }
        segs[nsegs++] = (struct mem_seg){kinds + o->bytes_object.ob_sval, kind, count};
    }
    if ((rc = mem_readv(m, segs, nsegs)) < 0)
        goto done;
    for (size_t i = 0; i < count; i++) {
        uint64_t v = values[i];
        out[i].name = name_ptrs[i];
        out[i].kind = kind[i];
        out[i].hidden = (kind[i] & KIND_HIDDEN) != 0;
        out[i].cell = (kind[i] & (KIND_CELL | KIND_FREE)) != 0;
        /* 3.14+: a _PyStackRef. Tagged ints (low bits 11) carry their value
         * in the word; the others are pointers with tag bits. */
        out[i].tagged_int = o->stackref_mask && (v & 3) == 3;
        out[i].value = out[i].tagged_int ? v : v & ~o->stackref_mask;
        if (o->stackref_mask && v == 1) /* PyStackRef_NULL */
            out[i].value = 0;
    }
    rc = (int)count;
done:
    free(name_ptrs);
    free(values);
    free(kind);
    return rc;
}

/* The NUL-terminated type name at addr, at most TYPE_NAME_MAX - 1 bytes: a
 * read that ends at a page boundary does not reach into the next page. */
static int read_cstr(struct mem *m, uint64_t addr, char *buf, size_t cap)
{
    size_t got = 0;
    while (got + 1 < cap) {
        size_t want = cap - 1 - got;
        uint64_t to_page = 4096 - ((addr + got) & 4095);
        if (want > to_page)
            want = (size_t)to_page;
        int rc = mem_read(m, addr + got, buf + got, want);
        if (rc < 0)
            return rc;
        void *nul = memchr(buf + got, '\0', want);
        got += want;
        if (nul)
            return 0;
    }
    buf[cap - 1] = '\0';
    return 0;
}

/* Append to a bounded buffer; the text is cut, NUL-terminated, at cap. */
struct sbuf {
    char *p;
    size_t len, cap;
};

static void put(struct sbuf *b, const char *s, size_t n)
{
    if (b->len + 1 >= b->cap)
        return;
    if (n > b->cap - 1 - b->len)
        n = b->cap - 1 - b->len;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void puts_(struct sbuf *b, const char *s)
{
    put(b, s, strlen(s));
}

static void putf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(struct sbuf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* Python's repr of a str, from its UTF-8 text: quotes as Python picks
 * them, backslash escapes for quotes, backslashes and control characters. */
static void put_str_repr(struct sbuf *b, const char *s, int cut)
{
    char q = strchr(s, '\'') && !strchr(s, '"') ? '"' : '\'';
    put(b, &q, 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == (unsigned char)q || c == '\\') {
            char e[2] = {'\\', (char)c};
            put(b, e, 2);
        } else if (c == '\n') {
            puts_(b, "\\n");
        } else if (c == '\r') {
            puts_(b, "\\r");
        } else if (c == '\t') {
            puts_(b, "\\t");
        } else if (c < 0x20 || c == 0x7f) {
            putf(b, "\\x%02x", c);
        } else {
            put(b, (const char *)&c, 1);
        }
    }
    put(b, &q, 1);
    if (cut)
        puts_(b, "...");
}

static void put_bytes_repr(struct sbuf *b, const uint8_t *s, size_t n, int cut)
{
    int has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    puts_(b, "b");
    put(b, &q, 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (c == (unsigned char)q || c == '\\')
            putf(b, "\\%c", c);
        else if (c == '\n')
            puts_(b, "\\n");
        else if (c == '\r')
            puts_(b, "\\r");
        else if (c == '\t')
            puts_(b, "\\t");
        else if (c < 0x20 || c >= 0x7f)
            putf(b, "\\x%02x", c);
        else
            put(b, (const char *)&c, 1);
    }
    put(b, &q, 1);
    if (cut)
        puts_(b, "...");
}

/* The shortest %g that reads back as v, as Python's float repr. */
static void put_float_repr(struct sbuf *b, double v)
{
    if (isnan(v)) {
        puts_(b, "nan");
        return;
    }
    if (isinf(v)) {
        puts_(b, v < 0 ? "-inf" : "inf");
        return;
    }
    char tmp[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    /* Python writes 1e+16 as 1e+16, 100.0 as 100.0, 1e-05 as 1e-05. */
    char *e = strchr(tmp, 'e');
    if (!e && !strchr(tmp, '.') && !strchr(tmp, 'n')) {
        strncat(tmp, ".0", sizeof tmp - strlen(tmp) - 1);
    } else if (e && e[1] == '+' && strtol(e + 2, NULL, 10) < 16) {
        /* %g switched to an exponent earlier than Python does (repr uses
         * positional notation for exponents below 16). */
        snprintf(tmp, sizeof tmp, "%.1f", v);
        if (strtod(tmp, NULL) != v)
            snprintf(tmp, sizeof tmp, "%.17g", v);
    }
    puts_(b, tmp);
}

/* An int of up to 64 bits of magnitude, else how many digits it has. */
static int put_int_repr(struct mem *m, const struct cpy_offsets *o, uint64_t obj, int is_bool,
                        struct sbuf *b)
{
    int64_t ndigits;
    int negative = 0, rc;
    if (CPY_HAS(o, long_object, lv_tag)) {
        uint64_t tag;
        if ((rc = mem_read_u64(m, obj + o->long_object.lv_tag, &tag)) < 0)
            return rc;
        ndigits = (int64_t)(tag >> 3);
        negative = (tag & 3) == 2;
    } else {
        if ((rc = mem_read(m, obj + o->var_object.ob_size, &ndigits, 8)) < 0)
            return rc;
        if (ndigits < 0) {
            negative = 1;
            ndigits = -ndigits;
        }
    }
    if (ndigits < 0 || ndigits > (1 << 24))
        return PYS_E_CORRUPT;
    uint32_t d[3] = {0, 0, 0};
    if (ndigits > 0 && ndigits <= 3 &&
        (rc = mem_read(m, obj + o->long_object.ob_digit, d, 4 * (size_t)ndigits)) < 0)
        return rc;
    if (ndigits > 3 || d[2] > 0xf) {
        /* Past 64 bits: its size only (30-bit digits, ~9.03 decimal digits each). */
        putf(b, "<int of about %lld digits>", (long long)ndigits * 903 / 100);
        return 0;
    }
    uint64_t v = 0;
    for (int64_t i = ndigits - 1; i >= 0; i--) {
        if (d[i] >> 30)
            return PYS_E_CORRUPT;
        v = (v << 30) | d[i];
    }
    if (is_bool) {
        if (negative || v > 1)
            return PYS_E_CORRUPT;
        puts_(b, v ? "True" : "False");
        return 0;
    }
    putf(b, "%s%llu", negative ? "-" : "", (unsigned long long)v);
    return 0;
}

/* The type's name and the object's repr for the common types; 0, or an
 * error when the object does not look like one of its type. */
static int value_repr(struct mem *m, const struct cpy_offsets *o, const struct cpy_symbols *sym,
                      uint64_t obj, const char *tname, const struct cpy_repr_limits *lim,
                      struct sbuf *b)
{
    int rc;
    if (strcmp(tname, "NoneType") == 0) {
        if (sym->none && obj != sym->none)
            return PYS_E_CORRUPT;
        puts_(b, "None");
        return 0;
    }
    if (strcmp(tname, "int") == 0 || strcmp(tname, "bool") == 0)
        return put_int_repr(m, o, obj, tname[0] == 'b', b);
    if (strcmp(tname, "float") == 0 && CPY_HAS(o, float_object, ob_fval)) {
        double v;
        if ((rc = mem_read(m, obj + o->float_object.ob_fval, &v, sizeof v)) < 0)
            return rc;
        put_float_repr(b, v);
        return 0;
    }
    if (strcmp(tname, "str") == 0) {
        int64_t len;
        char *s = NULL;
        if ((rc = mem_read(m, obj + o->unicode_object.length, &len, sizeof len)) < 0)
            return rc;
        if (len < 0)
            return PYS_E_CORRUPT;
        if ((rc = cpy_unicode_read(m, o, obj, lim->max_str, &s)) < 0)
            return rc;
        put_str_repr(b, s, (uint64_t)len > lim->max_str);
        free(s);
        return 0;
    }
    if (strcmp(tname, "bytes") == 0) {
        int64_t len;
        uint8_t *s = NULL;
        size_t got;
        if ((rc = mem_read(m, obj + o->bytes_object.ob_size, &len, sizeof len)) < 0)
            return rc;
        if (len < 0)
            return PYS_E_CORRUPT;
        size_t want = (uint64_t)len > lim->max_bytes ? lim->max_bytes : (size_t)len;
        s = malloc(want + 1);
        if (!s)
            return PYS_E_NOMEM;
        rc = mem_read(m, obj + o->bytes_object.ob_sval, s, want);
        got = want;
        if (rc == 0)
            put_bytes_repr(b, s, got, (uint64_t)len > lim->max_bytes);
        free(s);
        return rc;
    }
    if (strcmp(tname, "tuple") == 0 || strcmp(tname, "list") == 0) {
        int64_t len;
        if ((rc = mem_read(m, obj + o->var_object.ob_size, &len, sizeof len)) < 0)
            return rc;
        if (len < 0)
            return PYS_E_CORRUPT;
        putf(b, "<%s of %lld at 0x%llx>", tname, (long long)len, (unsigned long long)obj);
        return 0;
    }
    putf(b, "<%s at 0x%llx>", tname, (unsigned long long)obj);
    return 0;
}

int cpy_object_repr(struct mem *m, const struct cpy_offsets *o, const struct cpy_symbols *sym,
                    uint64_t obj, int deref_cell, const struct cpy_repr_limits *lim, char *out,
                    size_t cap)
{
    struct sbuf b = {out, 0, cap};
    char tname[TYPE_NAME_MAX];
    uint64_t type, name;
    int rc;
    if (cap == 0)
        return PYS_E_INVAL;
    out[0] = '\0';
    if (obj == 0)
        return PYS_E_NOTFOUND;
    if ((obj & 7) != 0)
        return PYS_E_CORRUPT;
    if ((rc = mem_read_u64(m, obj + o->pyobject.ob_type, &type)) < 0 ||
        (rc = mem_read_u64(m, type + o->type_object.tp_name, &name)) < 0 ||
        (rc = read_cstr(m, name, tname, sizeof tname)) < 0)
        return rc;
    if (deref_cell && strcmp(tname, "cell") == 0) {
        /* PyCellObject: ob_ref right after the object's head. An empty
         * cell is a variable not yet bound. */
        uint64_t ref;
        if ((rc = mem_read_u64(m, obj + o->pyobject.size, &ref)) < 0)
            return rc;
        return cpy_object_repr(m, o, sym, ref, 0, lim, out, cap);
    }
    for (char *p = tname; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
            *p = '?';
    rc = value_repr(m, o, sym, obj, tname, lim, &b);
    if (rc == PYS_E_NOMEM)
        return rc;
    if (rc < 0) {
        /* Not what its type says, or half of it unreadable: say what it is. */
        b.len = 0;
        out[0] = '\0';
        putf(&b, "<%s at 0x%llx>", tname, (unsigned long long)obj);
    }
    return 0;
}

int cpy_tagged_int_repr(uint64_t word, char *out, size_t cap)
{
    /* PyStackRef_TagInt: the value shifted left by 2 above the tag. */
    snprintf(out, cap, "%lld", (long long)((int64_t)word >> 2));
    return 0;
}
