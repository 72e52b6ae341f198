/*
 * objects: str and bytes objects of the target, copied out and checked.
 * Strings come back as UTF-8 whatever their internal kind (latin-1, UCS-2,
 * UCS-4); lone surrogates, which UTF-8 cannot carry, become U+FFFD.
 */
#include <stdlib.h>
#include <string.h>

#include <pystrobe/pystrobe.h>

#include "cpython/cpython.h"

/* PyASCIIObject.state bits, the same in every GIL build from 3.8 on. */
#define STATE_KIND(s) (((s) >> 2) & 7u)
#define STATE_COMPACT(s) (((s) >> 5) & 1u)
#define STATE_ASCII(s) (((s) >> 6) & 1u)

static size_t utf8_put(char *dst, uint32_t cp)
{
    if (cp >= 0xd800 && cp <= 0xdfff)
        cp = 0xfffd;
    if (cp > 0x10ffff)
        cp = 0xfffd;
    if (cp < 0x80) {
        dst[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        dst[0] = (char)(0xc0 | (cp >> 6));
        dst[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        dst[0] = (char)(0xe0 | (cp >> 12));
        dst[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        dst[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    dst[0] = (char)(0xf0 | (cp >> 18));
    dst[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    dst[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    dst[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

int cpy_unicode_read(struct mem *m, const struct cpy_offsets *o, uint64_t addr,
                     size_t max_chars, char **out)
{
    uint8_t head[128];
    uint8_t *data = NULL;
    char *s = NULL;
    int rc;
    size_t hlen = o->unicode_object.asciiobject_size;

    if (hlen < o->unicode_object.length + 8 || hlen > sizeof head)
        return PYS_E_CORRUPT;
    if ((rc = mem_read(m, addr, head, hlen)) < 0)
        return rc;
    uint32_t state;
    int64_t length;
    memcpy(&state, head + o->unicode_object.state, sizeof state);
    memcpy(&length, head + o->unicode_object.length, sizeof length);
    unsigned kind = STATE_KIND(state);
    if (length < 0 || !STATE_COMPACT(state) || (kind != 1 && kind != 2 && kind != 4) ||
        (STATE_ASCII(state) && kind != 1))
        return PYS_E_CORRUPT;
    size_t n = (size_t)length < max_chars ? (size_t)length : max_chars;
    uint64_t start = addr + (STATE_ASCII(state) ? o->unicode_object.asciiobject_size
                                                : o->unicode_object.compactunicodeobject_size);
    if (!STATE_ASCII(state) && o->unicode_object.compactunicodeobject_size == CPY_ABSENT)
        return PYS_E_CORRUPT;
    rc = PYS_E_NOMEM;
    data = malloc(n * kind + 1);
    s = malloc(n * 4 + 1);
    if (!data || !s)
        goto done;
    if ((rc = mem_read(m, start, data, n * kind)) < 0)
        goto done;
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp;
        if (kind == 1) {
            cp = data[i];
        } else if (kind == 2) {
            uint16_t u;
            memcpy(&u, data + 2 * i, 2);
            cp = u;
        } else {
            memcpy(&cp, data + 4 * i, 4);
        }
        if (STATE_ASCII(state) && cp >= 0x80)
            cp = 0xfffd;
        w += utf8_put(s + w, cp);
    }
    s[w] = '\0';
    *out = s;
    s = NULL;
    rc = 0;
done:
    free(data);
    free(s);
    return rc;
}

int cpy_bytes_read(struct mem *m, const struct cpy_offsets *o, uint64_t addr, size_t max,
                   uint8_t **out, size_t *len)
{
    int64_t size;
    uint8_t *buf = NULL;
    int rc = mem_read(m, addr + o->bytes_object.ob_size, &size, sizeof size);
    if (rc < 0)
        return rc;
    if (size < 0)
        return PYS_E_CORRUPT;
    if ((uint64_t)size > max)
        return PYS_E_NOTFOUND;
    buf = malloc((size_t)size + 1);
    if (!buf)
        return PYS_E_NOMEM;
    rc = mem_read(m, addr + o->bytes_object.ob_sval, buf, (size_t)size);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    *out = buf;
    *len = (size_t)size;
    return 0;
}
