/*
 * markup: the escaping writer of HTML and XML text (markup.h).
 */
#include "output/markup.h"
#include "output/utf8.h"

#include <stdint.h>

/* Length of the character at s (at most n bytes), 0 if it is not one
 * (out_utf8_decode) or not one XML allows. */
static size_t char_len(const unsigned char *s, size_t n)
{
    uint32_t c = 0;
    size_t len = out_utf8_decode(s, n, &c);
    if (len == 0 || (c < 0x20 && c != '\t') || (c >= 0x7f && c <= 0x9f) || c == 0xfffe ||
        c == 0xffff)
        return 0;
    return len;
}

size_t out_markup_chars(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t chars = 0;
    for (size_t i = 0; i < len; chars++) {
        size_t k = char_len(u + i, len - i);
        i += k ? k : 1;
    }
    return chars;
}

size_t out_markup_put(FILE *f, const char *s, size_t len, size_t max_chars)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t chars = 0;
    for (size_t i = 0; i < len; chars++) {
        if (chars == max_chars)
            return out_markup_chars(s + i, len - i);
        size_t k = char_len(u + i, len - i);
        switch (k ? u[i] : 0) {
        case 0:
            fputs(OUT_UTF8_REPLACEMENT, f);
            i++;
            continue;
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&#39;", f);
            break;
        default:
            fwrite(u + i, 1, k, f);
        }
        i += k;
    }
    return 0;
}
