/*
 * intern: a set of strings where each distinct string is stored once, so
 * that names read from the target can be compared and hashed by address.
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static int grow(struct prof_intern *in)
{
    size_t cap = in->cap ? in->cap * 2 : 256;
    char **slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t i = 0; i < in->cap; i++) {
        char *s = in->slots[i];
        if (!s)
            continue;
        size_t j = hash_bytes(s, strlen(s)) & (cap - 1);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = s;
    }
    free(in->slots);
    in->slots = slots;
    in->cap = cap;
    return 0;
}

const char *prof_intern_str(struct prof_intern *in, const char *s, size_t len)
{
    if ((in->count + 1) * 2 > in->cap && grow(in) < 0)
        return NULL;
    size_t j = hash_bytes(s, len) & (in->cap - 1);
    for (; in->slots[j]; j = (j + 1) & (in->cap - 1)) {
        if (strncmp(in->slots[j], s, len) == 0 && in->slots[j][len] == '\0')
            return in->slots[j];
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return NULL;
    memcpy(copy, s, len);
    copy[len] = '\0';
    in->slots[j] = copy;
    in->count++;
    return copy;
}

void prof_intern_release(struct prof_intern *in)
{
    for (size_t i = 0; i < in->cap; i++)
        free(in->slots[i]);
    free(in->slots);
    memset(in, 0, sizeof *in);
}
