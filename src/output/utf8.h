/*
 * utf8: the one UTF-8 decoder of the writers that escape text (json.c and
 * those built on it, markup.c). Names and source lines from the
 * target are untrusted bytes; every writer decodes them by the same rules
 * and then applies its own format's escaping to the characters it gets.
 *
 * The rules are Unicode's well-formed UTF-8 (table 3-7 of the standard):
 * a character is the shortest encoding of a scalar value, so an overlong
 * form (C0 80 for U+0000, E0 80 80, F0 80 80 80), a surrogate (ED A0 80 to
 * ED BF BF), anything above U+10FFFF (F4 90 80 80, F5 to FF), a lone
 * continuation byte, a sequence cut short by a byte that does not continue
 * it or by the end of the text, are not characters. A writer replaces the
 * first byte of what is not a character with U+FFFD and goes on at the
 * next byte (the "maximal subpart" practice, one U+FFFD per byte here).
 */
#ifndef PYSTROBE_OUTPUT_UTF8_H
#define PYSTROBE_OUTPUT_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The replacement character's encoding. */
#define OUT_UTF8_REPLACEMENT "\xef\xbf\xbd"

/* The length (1 to 4) of the character at s, of which n bytes may be read,
 * with its scalar value in *cp; 0 if s does not start a well-formed
 * character (or n is 0), *cp then unchanged. */
size_t out_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

#endif
