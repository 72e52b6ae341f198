/*
 * Unit tests of the library's hash table (util/hashtab.h): an index of ids
 * over the caller's array finds every key put in, through growth and heavy
 * collisions; growth that cannot allocate fails with PYS_E_NOMEM and leaves
 * the table as it was; removal keeps every other key findable; the hash
 * functions spread keys over the low bits. The string table on top of it
 * (util/strtab.h) gives one index per content, in order of first
 * appearance, whether it keeps copies or the caller's pointers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <pystrobe/pystrobe.h>

#include "util/hashtab.h"
#include "util/strtab.h"

/* A failed allocation must come back as NULL under AddressSanitizer too. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}

/* The caller's side: keys in an array, id i naming keys[i] (id 0 unused). */
struct set {
    struct util_htab t;
    uint64_t *keys;
    uint32_t n; /* ids 1..n-1 are in use */
    size_t cap;
    uint64_t (*hash)(uint64_t);
};

static uint64_t hash_mixed(uint64_t k)
{
    return util_hash_u64(k);
}

/* Every key in one slot's run: the worst case of linear probing. */
static uint64_t hash_constant(uint64_t k)
{
    (void)k;
    return 7;
}

/* Every key at the last of 16 slots: runs wrap to slot 0. */
static uint64_t hash_last_slot(uint64_t k)
{
    return 15 + (k & 1) * 16;
}

static uint64_t hash_at(const void *ctx, uint32_t id)
{
    const struct set *s = ctx;
    return s->hash(s->keys[id]);
}

static uint32_t set_find(const struct set *s, uint64_t k)
{
    if (!s->t.cap)
        return 0;
    uint32_t id;
    for (size_t j = util_htab_first(&s->t, s->hash(k)); (id = s->t.slot[j]);
         j = util_htab_next(&s->t, j))
        if (s->keys[id] == k)
            return id;
    return 0;
}

/* The id of k, added if new. */
static uint32_t set_add(struct set *s, uint64_t k)
{
    uint32_t id = set_find(s, k);
    if (id)
        return id;
    assert_int_equal(util_htab_reserve(&s->t, 16, 1, s->n, hash_at, s), 0);
    if (s->n >= s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        s->keys = realloc(s->keys, s->cap * sizeof *s->keys);
        assert_non_null(s->keys);
    }
    id = s->n++;
    s->keys[id] = k;
    util_htab_set(&s->t, util_htab_free_slot(&s->t, s->hash(k)), id);
    return id;
}

static void set_release(struct set *s)
{
    util_htab_release(&s->t);
    free(s->keys);
    memset(s, 0, sizeof *s);
}

static struct set set_new(uint64_t (*hash)(uint64_t))
{
    return (struct set){.n = 1, .hash = hash};
}

static void test_insert_lookup_grow(void **state)
{
    (void)state;
    struct set s = set_new(hash_mixed);
    assert_int_equal(set_find(&s, 42), 0);
    /* Keys that differ only in high bits, as aligned addresses do. */
    for (uint64_t i = 0; i < 100000; i++) {
        assert_int_equal(set_add(&s, i << 20), i + 1);
        assert_true(s.t.cap >= 2 * (size_t)s.n - 2); /* at most half full */
        assert_int_equal(s.t.cap & (s.t.cap - 1), 0);
    }
    for (uint64_t i = 0; i < 100000; i++) {
        assert_int_equal(set_find(&s, i << 20), i + 1);
        assert_int_equal(set_add(&s, i << 20), i + 1); /* no duplicate */
        assert_int_equal(set_find(&s, (i << 20) + 1), 0);
    }
    assert_int_equal(s.n, 100001);
    size_t used = 0;
    for (size_t j = 0; j < s.t.cap; j++)
        used += s.t.slot[j] != 0;
    assert_int_equal(used, 100000);
    set_release(&s);
    assert_int_equal(s.t.cap, 0);
}

static void test_collisions(void **state)
{
    (void)state;
    struct set s = set_new(hash_constant);
    for (uint64_t i = 1; i <= 2000; i++)
        assert_int_equal(set_add(&s, i * 3), i);
    for (uint64_t i = 1; i <= 2000; i++) {
        assert_int_equal(set_find(&s, i * 3), i);
        assert_int_equal(set_find(&s, i * 3 + 1), 0);
    }
    set_release(&s);
}

/* The run wraps from the last slot to the first. */
static void test_wrap_around(void **state)
{
    (void)state;
    struct set w = set_new(hash_constant);
    /* hash 15: the last slot of 16, so a second key lands in slot 0. */
    uint64_t keys[4] = {0, 100, 200, 300};
    w.keys = keys;
    w.hash = hash_constant;
    assert_int_equal(util_htab_resize(&w.t, 16, 1, 1, hash_at, &w), 0);
    for (uint32_t id = 1; id < 4; id++)
        util_htab_set(&w.t, util_htab_free_slot(&w.t, 15), id);
    assert_int_equal(w.t.slot[15], 1);
    assert_int_equal(w.t.slot[0], 2);
    assert_int_equal(w.t.slot[1], 3);
    util_htab_release(&w.t);
}

static void test_grow_failure_leaves_table(void **state)
{
    (void)state;
    struct set s = set_new(hash_mixed);
    for (uint64_t i = 0; i < 1000; i++)
        set_add(&s, i * 7919);
    uint32_t *before = s.t.slot;
    size_t cap = s.t.cap;
    uint32_t *copy = malloc(cap * sizeof *copy);
    assert_non_null(copy);
    memcpy(copy, before, cap * sizeof *copy);
    /* More slots than the address space holds: calloc fails. */
    assert_int_equal(util_htab_resize(&s.t, (size_t)1 << 45, 1, s.n, hash_at, &s), PYS_E_NOMEM);
    /* More than size_t can count, and capacities that are not powers of two
     * or cannot hold the ids. */
    assert_int_equal(util_htab_resize(&s.t, (size_t)1 << 63, 1, s.n, hash_at, &s), PYS_E_NOMEM);
    assert_int_equal(util_htab_resize(&s.t, cap + 1, 1, s.n, hash_at, &s), PYS_E_NOMEM);
    assert_int_equal(util_htab_resize(&s.t, 512, 1, s.n, hash_at, &s), PYS_E_NOMEM);
    assert_ptr_equal(s.t.slot, before);
    assert_int_equal(s.t.cap, cap);
    assert_memory_equal(s.t.slot, copy, cap * sizeof *copy);
    for (uint64_t i = 0; i < 1000; i++)
        assert_int_equal(set_find(&s, i * 7919), i + 1);
    /* A resize that can allocate keeps every id findable. */
    assert_int_equal(util_htab_resize(&s.t, cap * 4, 1, s.n, hash_at, &s), 0);
    for (uint64_t i = 0; i < 1000; i++)
        assert_int_equal(set_find(&s, i * 7919), i + 1);
    free(copy);
    set_release(&s);
}

/* Remove key k from s, moving the last id into its place (as a caller with
 * a dense array does). */
static void set_remove(struct set *s, uint64_t k)
{
    uint32_t id = set_find(s, k);
    assert_true(id != 0);
    util_htab_remove(&s->t, util_htab_slot_of(&s->t, s->hash(k), id), hash_at, s);
    uint32_t last = s->n - 1;
    if (id != last) {
        size_t j = util_htab_slot_of(&s->t, s->hash(s->keys[last]), last);
        s->keys[id] = s->keys[last];
        util_htab_set(&s->t, j, id);
    }
    s->n--;
}

static void check_removal(uint64_t (*hash)(uint64_t), uint64_t nkeys)
{
    struct set s = set_new(hash);
    for (uint64_t i = 1; i <= nkeys; i++)
        set_add(&s, i * 0x10001);
    /* Every third key, then the rest is all still there. */
    for (uint64_t i = 1; i <= nkeys; i += 3)
        set_remove(&s, i * 0x10001);
    for (uint64_t i = 1; i <= nkeys; i++) {
        uint32_t id = set_find(&s, i * 0x10001);
        if (i % 3 == 1)
            assert_int_equal(id, 0);
        else
            assert_true(id != 0 && s.keys[id] == i * 0x10001);
    }
    size_t used = 0;
    for (size_t j = 0; j < s.t.cap; j++)
        used += s.t.slot[j] != 0;
    assert_int_equal(used, s.n - 1);
    /* Put back: found again, once. */
    for (uint64_t i = 1; i <= nkeys; i += 3)
        set_add(&s, i * 0x10001);
    for (uint64_t i = 1; i <= nkeys; i++)
        assert_true(set_find(&s, i * 0x10001) != 0);
    assert_int_equal(s.n - 1, nkeys);
    set_release(&s);
}

static void test_remove(void **state)
{
    (void)state;
    check_removal(hash_mixed, 5000);
    check_removal(hash_constant, 300); /* one run around the whole table */
    /* Runs that wrap from the last slot to the first. */
    check_removal(hash_last_slot, 10);
}

/* Strings through the byte hash: equal bytes, equal hash; the slot bits of
 * near-identical names spread. */
static void test_hash_bytes(void **state)
{
    (void)state;
    char a[32], b[32];
    strcpy(a, "module.function");
    strcpy(b, "module.function");
    assert_true(util_hash_bytes(a, strlen(a)) == util_hash_bytes(b, strlen(b)));
    assert_true(util_hash_bytes(a, strlen(a)) != util_hash_bytes(a, strlen(a) - 1));
    assert_true(util_hash_bytes("", 0) != util_hash_bytes("\0", 1));
    unsigned hits[64] = {0};
    for (int i = 0; i < 6400; i++) {
        char s[16];
        int len = snprintf(s, sizeof s, "f%d", i);
        hits[util_hash_bytes(s, (size_t)len) & 63]++;
    }
    for (int i = 0; i < 64; i++)
        assert_true(hits[i] > 40 && hits[i] < 170); /* 100 expected */
    /* Integer keys that differ only in bits above the slot bits. */
    unsigned ihits[64] = {0};
    for (uint64_t i = 0; i < 6400; i++)
        ihits[util_hash_u64(i << 32) & 63]++;
    for (int i = 0; i < 64; i++)
        assert_true(ihits[i] > 40 && ihits[i] < 170);
    /* util_hash_add folds words so that order matters. */
    assert_true(util_hash_u64(util_hash_add(util_hash_add(0, 1), 2)) !=
                util_hash_u64(util_hash_add(util_hash_add(0, 2), 1)));
}

static void test_strtab(void **state)
{
    (void)state;
    for (int copies = 0; copies <= 1; copies++) {
        struct util_strtab t = {.copies = copies};
        char buf[2000][8];
        for (int i = 0; i < 2000; i++) {
            snprintf(buf[i], sizeof buf[i], "s%d", i);
            assert_int_equal(util_strtab_add(&t, buf[i], strlen(buf[i])), i);
        }
        /* The same content at another address, and a prefix of one. */
        char again[8] = "s1234";
        assert_int_equal(util_strtab_add(&t, again, 5), 1234);
        assert_int_equal(util_strtab_add(&t, again, 4), 123);
        assert_int_equal(util_strtab_add(&t, "with\0nul", 8), 2000);
        assert_int_equal(util_strtab_add(&t, "with", 4), 2001);
        assert_int_equal(t.n, 2002);
        assert_true(copies ? t.v[7].s != buf[7] : t.v[7].s == buf[7]);
        assert_string_equal(t.v[7].s, "s7");
        assert_memory_equal(t.v[2000].s, "with\0nul", 8);
        util_strtab_release(&t);
        assert_int_equal(t.n, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_insert_lookup_grow),
        cmocka_unit_test(test_collisions),
        cmocka_unit_test(test_wrap_around),
        cmocka_unit_test(test_grow_failure_leaves_table),
        cmocka_unit_test(test_remove),
        cmocka_unit_test(test_hash_bytes),
        cmocka_unit_test(test_strtab),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
