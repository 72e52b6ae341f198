/*
 * hashtab: the library's one hash table, an open-addressing index of ids.
 *
 * The caller keeps its entries in its own array and names each by a nonzero
 * 32-bit id; the table holds only the ids (4 bytes a slot, 0 = empty), in a
 * power-of-two number of slots, probed linearly from the key's hash. Keys
 * and their equality stay with the caller, who writes the probe loop with
 * util_htab_first/util_htab_next and compares inline: no indirect call and
 * no allocation on lookup. On a miss the loop ends at the empty slot where
 * that key belongs (util_htab_set puts an id there).
 *
 *     for (j = util_htab_first(t, h); (id = t->slot[j]); j = util_htab_next(t, j))
 *         if (same(&v[id], key)) return id;
 *     // miss: make room (util_htab_reserve), then find the slot again
 *
 * Load factor: util_htab_reserve keeps a table at most half full, which
 * keeps probe runs short; a caller with its own memory policy may choose
 * capacities itself with util_htab_resize, as long as one slot stays empty.
 * Deletion (util_htab_remove) shifts the ids after the removed one back
 * into place: no tombstones, so lookups stay as short as in a table that
 * never held it.
 *
 * Hashes: util_hash_u64 for integer keys (several words folded with
 * util_hash_add first), util_hash_bytes for strings.
 */
#ifndef PYSTROBE_UTIL_HASHTAB_H
#define PYSTROBE_UTIL_HASHTAB_H

#include <stddef.h>
#include <stdint.h>

/* A 64-bit mixer (MurmurHash3's finaliser): a bijection whose every output
 * bit depends on every input bit, so the low bits that pick a slot are good
 * even for keys that differ only in high bits (aligned addresses). */
static inline uint64_t util_hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* Fold word v into a running hash h (start at 0); finish with util_hash_u64.
 * One multiply: injective in v for a given h. */
static inline uint64_t util_hash_add(uint64_t h, uint64_t v)
{
    return (h ^ v) * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
}

/* The hash of len bytes at s (FNV-1a, finished with util_hash_u64). */
static inline uint64_t util_hash_bytes(const void *s, size_t len)
{
    const unsigned char *p = s;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return util_hash_u64(h);
}

struct util_htab {
    uint32_t *slot; /* cap slots: an id, or 0 = empty */
    size_t cap;     /* 0 (no slots yet) or a power of two */
};

/* The hash of the entry with this id, for rehashing when the table grows. */
typedef uint64_t (*util_htab_hash_fn)(const void *ctx, uint32_t id);

/* The first slot to probe for hash h (the table must have slots). */
static inline size_t util_htab_first(const struct util_htab *t, uint64_t h)
{
    return (size_t)h & (t->cap - 1);
}

/* The slot probed after slot j. */
static inline size_t util_htab_next(const struct util_htab *t, size_t j)
{
    return (j + 1) & (t->cap - 1);
}

/* The empty slot where an entry of hash h goes (the key must be absent and
 * the table must have an empty slot). */
static inline size_t util_htab_free_slot(const struct util_htab *t, uint64_t h)
{
    size_t j = util_htab_first(t, h);
    while (t->slot[j])
        j = util_htab_next(t, j);
    return j;
}

/* Put id (nonzero) in slot j, found empty by a probe loop or free_slot. */
static inline void util_htab_set(struct util_htab *t, size_t j, uint32_t id)
{
    t->slot[j] = id;
}

/* The slot that holds id (which must be in t), probing from its hash h. */
static inline size_t util_htab_slot_of(const struct util_htab *t, uint64_t h, uint32_t id)
{
    size_t j = util_htab_first(t, h);
    while (t->slot[j] != id)
        j = util_htab_next(t, j);
    return j;
}

/* Does a table that holds n ids need to grow before it takes one more? */
static inline int util_htab_full(const struct util_htab *t, size_t n)
{
    return (n + 1) * 2 > t->cap;
}

/* Give t cap slots (a power of two, above hi - lo) holding the ids lo..hi-1,
 * each placed by hash(ctx, id). 0, or PYS_E_NOMEM with t unchanged. */
int util_htab_resize(struct util_htab *t, size_t cap, uint32_t lo, uint32_t hi,
                     util_htab_hash_fn hash, const void *ctx);

/* Make room for one more id in a table that holds the ids lo..hi-1: if it
 * would be more than half full, double it (min_cap, a power of two, for the
 * first slots). 0, or PYS_E_NOMEM with t unchanged. */
int util_htab_reserve(struct util_htab *t, size_t min_cap, uint32_t lo, uint32_t hi,
                      util_htab_hash_fn hash, const void *ctx);

/* Empty slot j (it holds an id), moving back the ids after it in its run
 * that would no longer be found (each id's place is given by hash(ctx, id)).
 * A caller that renumbers its entries after a removal moves the ids with
 * util_htab_slot_of and util_htab_set. */
void util_htab_remove(struct util_htab *t, size_t j, util_htab_hash_fn hash, const void *ctx);

/* Free the slots; t is left empty (cap 0) and may be used again. */
void util_htab_release(struct util_htab *t);

#endif
