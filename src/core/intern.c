/*
 * intern: a set of strings where each distinct string is stored once, so
 * that names read from the target can be compared and hashed by address.
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

static uint64_t str_hash_at(const void *ctx, uint32_t id)
{
    const char *s = ((const struct prof_intern *)ctx)->strs[id];
    return util_hash_bytes(s, strlen(s));
}

const char *prof_intern_str(struct prof_intern *in, const char *s, size_t len)
{
    uint64_t h = util_hash_bytes(s, len);
    uint32_t id;
    if (in->index.cap) {
        for (size_t j = util_htab_first(&in->index, h); (id = in->index.slot[j]);
             j = util_htab_next(&in->index, j)) {
            const char *t = in->strs[id];
            if (strncmp(t, s, len) == 0 && t[len] == '\0')
                return t;
        }
    }
    if (in->count >= UINT32_MAX - 1)
        return NULL;
    if (util_htab_reserve(&in->index, 256, 1, (uint32_t)in->count + 1, str_hash_at, in) < 0)
        return NULL;
    if (in->count + 1 >= in->cap) {
        size_t cap = in->cap ? in->cap * 2 : 256;
        char **strs = realloc(in->strs, cap * sizeof *strs);
        if (!strs)
            return NULL;
        in->strs = strs;
        in->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return NULL;
    memcpy(copy, s, len);
    copy[len] = '\0';
    id = (uint32_t)++in->count;
    in->strs[id] = copy;
    util_htab_set(&in->index, util_htab_free_slot(&in->index, h), id);
    return copy;
}

void prof_intern_release(struct prof_intern *in)
{
    for (size_t id = 1; id <= in->count; id++)
        free(in->strs[id]);
    free(in->strs);
    util_htab_release(&in->index);
    memset(in, 0, sizeof *in);
}
