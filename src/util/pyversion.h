/*
 * pyversion: a PY_VERSION_HEX as people read it.
 */
#ifndef PYSTROBE_UTIL_PYVERSION_H
#define PYSTROBE_UTIL_PYVERSION_H

#include <stddef.h>
#include <stdint.h>

/* hex (major << 24 | minor << 16 | micro << 8 | level << 4 | serial) as
 * Python's platform.python_version() writes it: "3.12.1", and for a
 * pre-release its level and serial, "3.15.0a2", "3.14.0rc1"; 0 is
 * "(unknown version)". Into buf (len bytes, NUL-terminated, cut if
 * longer). */
void util_python_version_text(uint32_t hex, char *buf, size_t len);

#endif
