/*
 * array: room in a growing array. The caller keeps the pointer and its
 * capacity; the capacity doubles, so that n appends cost O(n) copies.
 */
#ifndef PYSTROBE_UTIL_ARRAY_H
#define PYSTROBE_UTIL_ARRAY_H

#include <stddef.h>

/* Make *v (of elem-byte items, room for *cap) hold at least need items:
 * 0, or PYS_E_NOMEM with *v and *cap unchanged (out of memory, or a size
 * past SIZE_MAX). Pass the address of the array's pointer as void **:
 * `util_array_reserve((void **)&a->v, &a->cap, a->n + 1, sizeof *a->v)`. */
int util_array_reserve(void **v, size_t *cap, size_t need, size_t elem);

#endif
