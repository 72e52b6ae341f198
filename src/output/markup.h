/*
 * markup: text from the target written as HTML or XML text and attribute
 * values (heatmap.c, svg.c), by one rule for both: the markup characters
 * & < > " ' as entities; what XML 1.0 cannot hold (control characters but
 * tab, C1 controls, U+FFFE, U+FFFF) and every byte that does not start a
 * UTF-8 character (utf8.h) as U+FFFD, one per byte.
 */
#ifndef PYSTROBE_OUTPUT_MARKUP_H
#define PYSTROBE_OUTPUT_MARKUP_H

#include <stddef.h>
#include <stdio.h>

/* Write at most max_chars characters of s (len bytes; SIZE_MAX: all of
 * them), escaped. Returns how many characters of s were left unwritten. */
size_t out_markup_put(FILE *f, const char *s, size_t len, size_t max_chars);

/* Characters in s (len bytes), as out_markup_put counts them. */
size_t out_markup_chars(const char *s, size_t len);

#endif
