/*
 * strtab: the string table of strtab.h, over the one hash table.
 */
#include "util/strtab.h"

#include <stdlib.h>
#include <string.h>

static uint64_t str_hash_at(const void *ctx, uint32_t id)
{
    return ((const struct util_strtab *)ctx)->v[id - 1].hash;
}

int64_t util_strtab_add(struct util_strtab *t, const char *s, size_t len)
{
    uint64_t h = util_hash_bytes(s, len);
    uint32_t id;
    if (t->index.cap)
        for (size_t j = util_htab_first(&t->index, h); (id = t->index.slot[j]);
             j = util_htab_next(&t->index, j)) {
            const struct util_str *e = &t->v[id - 1];
            if (e->hash == h && e->len == len && memcmp(e->s, s, len) == 0)
                return id - 1;
        }
    if (t->n >= UINT32_MAX - 1 ||
        util_htab_reserve(&t->index, 256, 1, (uint32_t)t->n + 1, str_hash_at, t) < 0)
        return -1;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        struct util_str *v = realloc(t->v, cap * sizeof *v);
        if (!v)
            return -1;
        t->v = v;
        t->cap = cap;
    }
    if (t->copies) {
        char *copy = malloc(len + 1);
        if (!copy)
            return -1;
        memcpy(copy, s, len);
        copy[len] = '\0';
        s = copy;
    }
    t->v[t->n] = (struct util_str){s, len, h};
    util_htab_set(&t->index, util_htab_free_slot(&t->index, h), (uint32_t)(t->n + 1));
    return (int64_t)t->n++;
}

void util_strtab_release(struct util_strtab *t)
{
    if (t->copies)
        for (size_t i = 0; i < t->n; i++)
            free((char *)t->v[i].s);
    free(t->v);
    util_htab_release(&t->index);
    memset(t, 0, sizeof *t);
}
