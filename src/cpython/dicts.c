/*
 * dicts: the target's dicts, instance attributes and ints, read far enough
 * to find a module in sys.modules, a global in a module and an attribute of
 * an object (thread names: core/threadnames.c).
 *
 * A dict is a keys table (PyDictKeysObject: an index array, then entries in
 * insertion order) and, for a split table (an instance's attributes), a
 * separate array of values in the same order. Objects of 3.11+ classes keep
 * their attributes in values reached from the object itself (a managed
 * dict, or values inline after the object from 3.13) over keys the class
 * holds (ht_cached_keys). Everything read is untrusted: table sizes are
 * bounded, kinds checked, and a key that is not a compact str never matches.
 */
#include <stdlib.h>
#include <string.h>

#include <pystrobe/pystrobe.h>

#include "cpython/cpython.h"

/* Largest table read: sys.modules of a big program holds a few thousand
 * modules; a module's globals or an object's attributes far fewer. */
#define DICT_MAX_ENTRIES 16384u
/* dk_kind (3.11+): entries of {hash, key, value}, or {key, value} for str keys. */
#define DICT_KEYS_GENERAL 0
#define DICT_KEYS_UNICODE 1
#define DICT_KEYS_SPLIT 2
/* Type flags (Include/object.h, the same values since they appeared). */
#define TPFLAGS_INLINE_VALUES (1ul << 2) /* 3.13+ */
#define TPFLAGS_MANAGED_DICT (1ul << 4)  /* 3.11+ */
#define TPFLAGS_LONG_SUBCLASS (1ul << 24)
#define TPFLAGS_UNICODE_SUBCLASS (1ul << 28)
#define TPFLAGS_DICT_SUBCLASS (1ul << 29)

/* A keys table copied out: n entries of esize bytes, key and value at
 * koff/voff in each. */
struct table {
    uint8_t *entries;
    size_t n, esize, koff, voff;
};

static int table_read(struct mem *m, const struct cpy_offsets *o, uint64_t keys, struct table *t)
{
    uint8_t head[64];
    uint64_t hlen = o->dict_keys.dk_indices;
    if (hlen == CPY_ABSENT || hlen > sizeof head || o->dict_keys.dk_nentries == CPY_ABSENT)
        return PYS_E_NOTFOUND;
    int rc = mem_read(m, keys, head, hlen);
    if (rc < 0)
        return rc;
    uint64_t size, index_bytes;
    size_t esize = o->dict_keys.entry_size, koff = 8, voff = 16;
    if (o->dict_keys.dk_size != CPY_ABSENT) {
        memcpy(&size, head + o->dict_keys.dk_size, 8);
        if (size < 8 || size > (1u << 24) || (size & (size - 1)))
            return PYS_E_CORRUPT;
        uint64_t width = size <= 0xff ? 1 : size <= 0xffff ? 2 : 4;
        index_bytes = size * width;
    } else {
        uint8_t l2 = head[o->dict_keys.dk_log2_size];
        uint8_t l2i = head[o->dict_keys.dk_log2_index_bytes];
        uint8_t kind = head[o->dict_keys.dk_kind];
        if (l2 < 3 || l2 > 24 || l2i < l2 || l2i > l2 + 3 || kind > DICT_KEYS_SPLIT)
            return PYS_E_CORRUPT;
        size = 1ull << l2;
        index_bytes = 1ull << l2i;
        if (kind != DICT_KEYS_GENERAL) {
            esize = o->dict_keys.unicode_entry_size;
            koff = 0;
            voff = 8;
        }
    }
    int64_t n;
    memcpy(&n, head + o->dict_keys.dk_nentries, 8);
    if (n < 0 || (uint64_t)n > size || esize < voff + 8 || esize > 64)
        return PYS_E_CORRUPT;
    if ((uint64_t)n > DICT_MAX_ENTRIES)
        return PYS_E_TOODEEP;
    uint8_t *e = malloc((size_t)n * esize + 1);
    if (!e)
        return PYS_E_NOMEM;
    if (n > 0 && (rc = mem_read(m, keys + hlen + index_bytes, e, (size_t)n * esize)) < 0) {
        free(e);
        return rc;
    }
    t->entries = e;
    t->n = (size_t)n;
    t->esize = esize;
    t->koff = koff;
    t->voff = voff;
    return 0;
}

static uint64_t entry_word(const struct table *t, size_t i, size_t off)
{
    uint64_t v;
    memcpy(&v, t->entries + i * t->esize + off, 8);
    return v;
}

/* The object's type and that type's tp_flags. */
static int type_of(struct mem *m, const struct cpy_offsets *o, uint64_t obj, uint64_t *type,
                   uint64_t *flags)
{
    int rc = mem_read_u64(m, obj + o->pyobject.ob_type, type);
    if (rc < 0)
        return rc;
    if (!*type)
        return PYS_E_CORRUPT;
    if (flags)
        return mem_read_u64(m, *type + o->type_object.tp_flags, flags);
    return 0;
}

/*
 * Find `key` among the keys of table t: the index of its entry, or
 * PYS_E_NOTFOUND. One read of every key's str header, then the text of
 * those of the right length and kind.
 */
static int table_find(struct mem *m, const struct cpy_offsets *o, const struct table *t,
                      const char *key, size_t *index)
{
    size_t klen = strlen(key), hlen = o->unicode_object.asciiobject_size;
    if (t->n == 0)
        return PYS_E_NOTFOUND;
    if (hlen > 128 || hlen < o->unicode_object.length + 8)
        return PYS_E_CORRUPT;
    struct mem_seg *segs = calloc(t->n, sizeof *segs);
    uint8_t *heads = malloc(t->n * hlen);
    char *text = malloc(klen + 1);
    int rc = PYS_E_NOMEM;
    if (!segs || !heads || !text)
        goto done;
    size_t ns = 0;
    for (size_t i = 0; i < t->n; i++) {
        uint64_t k = entry_word(t, i, t->koff);
        if (!k)
            continue; /* a deleted entry */
        segs[ns].addr = k;
        segs[ns].buf = heads + ns * hlen;
        segs[ns].len = hlen;
        ns++;
    }
    rc = PYS_E_NOTFOUND;
    size_t done_ = 0;
    /* Read the headers in batches: a failed one (a key freed meanwhile)
     * costs only its batch. */
    while (done_ < ns) {
        size_t batch = ns - done_ < 512 ? ns - done_ : 512;
        if (mem_readv(m, segs + done_, batch) < 0) {
            for (size_t j = done_; j < done_ + batch; j++)
                segs[j].addr = 0;
        }
        done_ += batch;
    }
    for (size_t j = 0; j < ns; j++) {
        if (!segs[j].addr)
            continue;
        const uint8_t *h = heads + j * hlen;
        uint32_t state;
        int64_t len;
        memcpy(&state, h + o->unicode_object.state, 4);
        memcpy(&len, h + o->unicode_object.length, 8);
        /* compact ASCII (bits 5 and 6), one byte per character */
        if (len != (int64_t)klen || !((state >> 5) & 1u) || !((state >> 6) & 1u))
            continue;
        if (mem_read(m, segs[j].addr + hlen, text, klen) < 0)
            continue;
        if (memcmp(text, key, klen) != 0)
            continue;
        /* the entry whose key this was */
        for (size_t i = 0; i < t->n; i++)
            if (entry_word(t, i, t->koff) == segs[j].addr) {
                *index = i;
                rc = 0;
                goto done;
            }
    }
done:
    free(segs);
    free(heads);
    free(text);
    return rc;
}

/* The value of entry i of table t, from values (a split table's values
 * array, 0 if the values are in the entries). */
static int table_value(struct mem *m, const struct table *t, size_t i, uint64_t values,
                       uint64_t *out)
{
    uint64_t v;
    if (values) {
        int rc = mem_read_u64(m, values + 8 * i, &v);
        if (rc < 0)
            return rc;
    } else {
        v = entry_word(t, i, t->voff);
    }
    if (!v)
        return PYS_E_NOTFOUND;
    *out = v;
    return 0;
}

/* Look key up in keys (values: a split table's values array or 0). */
static int lookup(struct mem *m, const struct cpy_offsets *o, uint64_t keys, uint64_t values,
                  const char *key, uint64_t *out)
{
    struct table t = {0};
    int rc = table_read(m, o, keys, &t);
    if (rc < 0)
        return rc;
    size_t i;
    rc = table_find(m, o, &t, key, &i);
    if (rc == 0)
        rc = table_value(m, &t, i, values, out);
    free(t.entries);
    return rc;
}

/* The keys and the values array (0 when combined) of the dict at addr. */
static int dict_tables(struct mem *m, const struct cpy_offsets *o, uint64_t dict, uint64_t *keys,
                       uint64_t *values)
{
    uint64_t type, flags;
    int rc = type_of(m, o, dict, &type, &flags);
    if (rc < 0)
        return rc;
    if (!(flags & TPFLAGS_DICT_SUBCLASS))
        return PYS_E_CORRUPT;
    uint64_t w[2];
    if ((rc = mem_read(m, dict + o->dict_object.ma_keys, w, sizeof w)) < 0)
        return rc;
    if (o->dict_object.ma_values != o->dict_object.ma_keys + 8)
        return PYS_E_CORRUPT;
    if (!w[0])
        return PYS_E_CORRUPT;
    *keys = w[0];
    *values = w[1] ? w[1] + o->dict_values.values : 0;
    return 0;
}

int cpy_dict_get_str(struct mem *m, const struct cpy_offsets *o, uint64_t dict, const char *key,
                     uint64_t *out)
{
    if (!CPY_HAS(o, dict_object, ma_keys) || !CPY_HAS(o, type_object, tp_flags))
        return PYS_E_NOTFOUND;
    uint64_t keys, values;
    int rc = dict_tables(m, o, dict, &keys, &values);
    if (rc < 0)
        return rc;
    return lookup(m, o, keys, values, key, out);
}

int cpy_dict_items(struct mem *m, const struct cpy_offsets *o, uint64_t dict, uint64_t *keys_out,
                   uint64_t *values_out, size_t max)
{
    if (!CPY_HAS(o, dict_object, ma_keys) || !CPY_HAS(o, type_object, tp_flags))
        return PYS_E_NOTFOUND;
    uint64_t keys, values;
    int rc = dict_tables(m, o, dict, &keys, &values);
    if (rc < 0)
        return rc;
    struct table t = {0};
    if ((rc = table_read(m, o, keys, &t)) < 0)
        return rc;
    size_t n = 0;
    for (size_t i = 0; i < t.n && n < max; i++) {
        uint64_t k = entry_word(&t, i, t.koff), v;
        if (!k || table_value(m, &t, i, values, &v) < 0)
            continue;
        keys_out[n] = k;
        values_out[n] = v;
        n++;
    }
    free(t.entries);
    return (int)n;
}

int cpy_object_attr(struct mem *m, const struct cpy_offsets *o, uint64_t obj, const char *name,
                    uint64_t *out)
{
    uint64_t type, flags;
    int rc = type_of(m, o, obj, &type, &flags);
    if (rc < 0)
        return rc;
    if (CPY_HAS(o, object_prefix, managed_dict) && (flags & TPFLAGS_MANAGED_DICT)) {
        uint64_t slot;
        if ((rc = mem_read_u64(m, obj - o->object_prefix.managed_dict, &slot)) < 0)
            return rc;
        uint64_t values = 0;
        if (o->object_prefix.managed_values == o->object_prefix.managed_dict) {
            /* 3.12: one word, holding the values' address - 1 (odd) */
            if (slot & 1) {
                values = slot + 1;
                slot = 0;
            }
        } else if (!slot && CPY_HAS(o, object_prefix, managed_values)) {
            if ((rc = mem_read_u64(m, obj - o->object_prefix.managed_values, &values)) < 0)
                return rc;
        } else if (!slot && CPY_HAS(o, dict_values, valid) && (flags & TPFLAGS_INLINE_VALUES)) {
            uint64_t basic;
            uint8_t valid;
            if ((rc = mem_read_u64(m, type + o->type_object.tp_basicsize, &basic)) < 0)
                return rc;
            if (basic < 16 || basic > 4096)
                return PYS_E_CORRUPT;
            if ((rc = mem_read(m, obj + basic + o->dict_values.valid, &valid, 1)) < 0)
                return rc;
            if (valid)
                values = obj + basic;
        }
        if (slot)
            return cpy_dict_get_str(m, o, slot, name, out);
        if (!values)
            return PYS_E_NOTFOUND;
        uint64_t keys;
        if ((rc = mem_read_u64(m, type + o->heap_type_object.ht_cached_keys, &keys)) < 0)
            return rc;
        if (!keys)
            return PYS_E_NOTFOUND;
        return lookup(m, o, keys, values + o->dict_values.values, name, out);
    }
    int64_t dictoffset;
    if ((rc = mem_read(m, type + o->type_object.tp_dictoffset, &dictoffset, 8)) < 0)
        return rc;
    /* A negative offset counts from the end of a variable-size object:
     * not for the objects asked about here. */
    if (dictoffset <= 0 || dictoffset > 4096)
        return PYS_E_NOTFOUND;
    uint64_t dict;
    if ((rc = mem_read_u64(m, obj + (uint64_t)dictoffset, &dict)) < 0)
        return rc;
    if (!dict)
        return PYS_E_NOTFOUND;
    return cpy_dict_get_str(m, o, dict, name, out);
}

int cpy_long_read(struct mem *m, const struct cpy_offsets *o, uint64_t addr, uint64_t *out)
{
    uint64_t type, flags;
    int rc = type_of(m, o, addr, &type, &flags);
    if (rc < 0)
        return rc;
    if (!(flags & TPFLAGS_LONG_SUBCLASS) || o->long_object.ob_digit == CPY_ABSENT)
        return PYS_E_CORRUPT;
    int64_t ndigits;
    int negative = 0;
    if (CPY_HAS(o, long_object, lv_tag)) {
        uint64_t tag;
        if ((rc = mem_read_u64(m, addr + o->long_object.lv_tag, &tag)) < 0)
            return rc;
        ndigits = (int64_t)(tag >> 3);
        negative = (tag & 3) == 2;
    } else {
        if ((rc = mem_read(m, addr + o->var_object.ob_size, &ndigits, 8)) < 0)
            return rc;
        if (ndigits < 0) {
            negative = 1;
            ndigits = -ndigits;
        }
    }
    /* 30-bit digits: a 64-bit value takes at most 3 */
    if (negative || ndigits > 3)
        return PYS_E_CORRUPT;
    uint32_t d[3] = {0, 0, 0};
    if (ndigits && (rc = mem_read(m, addr + o->long_object.ob_digit, d, 4 * (size_t)ndigits)) < 0)
        return rc;
    uint64_t v = 0;
    for (int64_t i = ndigits - 1; i >= 0; i--) {
        if (d[i] >> 30 || (i == 2 && d[i] > 0xf))
            return PYS_E_CORRUPT;
        v = (v << 30) | d[i];
    }
    *out = v;
    return 0;
}

int cpy_is_str(struct mem *m, const struct cpy_offsets *o, uint64_t addr)
{
    uint64_t type, flags;
    if (type_of(m, o, addr, &type, &flags) < 0)
        return 0;
    return (flags & TPFLAGS_UNICODE_SUBCLASS) != 0;
}
