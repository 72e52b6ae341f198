/*
 * strtab: distinct strings by content, each with its index in order of
 * first appearance: the string tables of the formats that name strings by
 * index (the flame graph page, gecko, jsonl, CPython's binary files).
 */
#ifndef PYSTROBE_UTIL_STRTAB_H
#define PYSTROBE_UTIL_STRTAB_H

#include <stddef.h>
#include <stdint.h>

#include "util/hashtab.h"

struct util_str {
    const char *s; /* NUL-terminated when the table copies or the caller's was */
    size_t len;
    uint64_t hash;
};

/* Zero-initialise; set copies before the first add for a table that keeps
 * copies of the strings (freed by util_strtab_release) rather than the
 * caller's pointers, which must then outlive the table. */
struct util_strtab {
    struct util_str *v; /* n of them, by index */
    size_t n, cap;
    struct util_htab index; /* 1 + index into v */
    int copies;
};

/* The index of s (len bytes), added if new; -1 if out of memory (the table
 * unchanged) or if it holds UINT32_MAX - 1 strings already. */
int64_t util_strtab_add(struct util_strtab *t, const char *s, size_t len);
void util_strtab_release(struct util_strtab *t);

#endif
