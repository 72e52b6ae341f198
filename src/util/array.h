/*
 * array: room in a growing array. The caller keeps the pointer and its
 * capacity; the capacity doubles, so that n appends cost O(n) copies.
 */
#ifndef PYSTROBE_UTIL_ARRAY_H
#define PYSTROBE_UTIL_ARRAY_H

#include <stddef.h>
#include <stdint.h>

/* Make *v (of elem-byte items, room for *cap) hold at least need items:
 * 0, or PYS_E_NOMEM with *v and *cap unchanged (out of memory, or a size
 * past SIZE_MAX). Pass the address of the array's pointer as void **:
 * `util_array_reserve((void **)&a->v, &a->cap, a->n + 1, sizeof *a->v)`. */
int util_array_reserve(void **v, size_t *cap, size_t need, size_t elem);

/* The first index of sorted v[0..n) whose item is not below x (n when
 * none is). */
static inline size_t util_lower_bound_u64(const uint64_t *v, size_t n, uint64_t x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

#endif
