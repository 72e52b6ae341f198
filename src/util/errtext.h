/*
 * errtext: the message a parser leaves for its caller. Parsers of
 * untrusted input (offset tables, core files, images) return a negative
 * PYS_E_* code and say what was wrong in a caller's buffer; this is the
 * one place that fills such a buffer.
 */
#ifndef PYSTROBE_UTIL_ERRTEXT_H
#define PYSTROBE_UTIL_ERRTEXT_H

#include <stddef.h>

/* Format the message into err (errlen bytes, always NUL-terminated, cut if
 * longer; nothing written when err is NULL or errlen 0) and return code,
 * so that a parser fails in one statement: `return util_err_set(err,
 * errlen, PYS_E_CORRUPT, "...", ...)`. */
int util_err_set(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
