/*
 * array: see array.h.
 */
#include "util/array.h"

#include <stdint.h>
#include <stdlib.h>

#include <pystrobe/pystrobe.h>

int util_array_reserve(void **v, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 16;
    while (n < need) {
        if (n > SIZE_MAX / 2)
            return PYS_E_NOMEM;
        n *= 2;
    }
    if (elem && n > SIZE_MAX / elem)
        return PYS_E_NOMEM;
    void *p = realloc(*v, n * elem);
    if (!p)
        return PYS_E_NOMEM;
    *v = p;
    *cap = n;
    return 0;
}
