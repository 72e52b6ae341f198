/*
 * pyversion: see pyversion.h.
 */
#include "util/pyversion.h"

#include <stdio.h>

void util_python_version_text(uint32_t hex, char *buf, size_t len)
{
    /* PY_RELEASE_LEVEL_ALPHA, _BETA, _GAMMA (a candidate); _FINAL (0xF)
     * and values no release has show no suffix. */
    static const char *const level[16] = {[0xA] = "a", [0xB] = "b", [0xC] = "rc"};
    unsigned lv = (hex >> 4) & 0xf;
    if (hex == 0)
        snprintf(buf, len, "(unknown version)");
    else if (level[lv])
        snprintf(buf, len, "%u.%u.%u%s%u", hex >> 24, (hex >> 16) & 0xff, (hex >> 8) & 0xff,
                 level[lv], hex & 0xf);
    else
        snprintf(buf, len, "%u.%u.%u", hex >> 24, (hex >> 16) & 0xff, (hex >> 8) & 0xff);
}
