/*
 * hashtab: growing and freeing the id index of hashtab.h; probing and the
 * hash functions are inline in the header.
 */
#include <stdlib.h>

#include <pystrobe/pystrobe.h>

#include "util/hashtab.h"

int util_htab_resize(struct util_htab *t, size_t cap, uint32_t lo, uint32_t hi,
                     util_htab_hash_fn hash, const void *ctx)
{
    if (cap == 0 || (cap & (cap - 1)) != 0 || cap <= (size_t)(hi > lo ? hi - lo : 0) ||
        cap > SIZE_MAX / sizeof(uint32_t))
        return PYS_E_NOMEM;
    struct util_htab n = {.slot = calloc(cap, sizeof(uint32_t)), .cap = cap};
    if (!n.slot)
        return PYS_E_NOMEM;
    for (uint32_t id = lo; id < hi; id++)
        util_htab_set(&n, util_htab_free_slot(&n, hash(ctx, id)), id);
    free(t->slot);
    *t = n;
    return 0;
}

int util_htab_reserve(struct util_htab *t, size_t min_cap, uint32_t lo, uint32_t hi,
                      util_htab_hash_fn hash, const void *ctx)
{
    size_t n = hi > lo ? hi - lo : 0;
    if (!util_htab_full(t, n))
        return 0;
    size_t cap = t->cap ? t->cap : min_cap ? min_cap : 1;
    while ((n + 1) * 2 > cap) {
        if (cap > SIZE_MAX / 2)
            return PYS_E_NOMEM;
        cap *= 2;
    }
    return util_htab_resize(t, cap, lo, hi, hash, ctx);
}

void util_htab_remove(struct util_htab *t, size_t j, util_htab_hash_fn hash, const void *ctx)
{
    size_t mask = t->cap - 1;
    t->slot[j] = 0;
    for (size_t k = (j + 1) & mask; t->slot[k]; k = (k + 1) & mask) {
        size_t home = (size_t)hash(ctx, t->slot[k]) & mask;
        /* An id whose run starts in (j, k] is still found from there. */
        if (((k - home) & mask) < ((k - j) & mask))
            continue;
        t->slot[j] = t->slot[k];
        t->slot[k] = 0;
        j = k;
    }
}

void util_htab_release(struct util_htab *t)
{
    free(t->slot);
    t->slot = NULL;
    t->cap = 0;
}
