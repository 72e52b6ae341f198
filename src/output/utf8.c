/*
 * utf8: the writers' one UTF-8 decoder (rules in utf8.h).
 */
#include "output/utf8.h"

size_t out_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    if (n == 0)
        return 0;
    unsigned c = s[0];
    size_t len;
    uint32_t v;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) { /* C0, C1: always overlong */
        len = 2;
        v = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        v = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) { /* F5 and up: above U+10FFFF */
        len = 4;
        v = c & 0x07;
    } else {
        return 0; /* a continuation byte, or a byte UTF-8 never uses */
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3fu);
    }
    /* Overlong 3- and 4-byte forms, surrogates, beyond the last plane. */
    if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10ffff)) ||
        (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return len;
}
