/*
 * Unit tests of the asyncio debug table validator (cpython/asyncio.c), on
 * the real tables of CPython 3.14.10 (the _asyncio extension's
 * .AsyncioDebug section) and 3.15.2 (the interpreter's), copied into
 * tests/unit/data/, each with its runtime's _Py_DebugOffsets, and on
 * corrupted copies.
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

#include "cpython/asyncio.h"
#include "cpython/offsets.h"

#define DATA_DIR "tests/unit/data/"

static size_t load(const char *name, uint8_t *buf, size_t cap)
{
    char path[256];
    snprintf(path, sizeof path, DATA_DIR "%s", name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

static void offsets_of(const char *name, struct cpy_offsets *o)
{
    uint8_t buf[1024];
    char err[200];
    size_t n = load(name, buf, sizeof buf);
    assert_int_equal(cpy_offsets_parse(buf, n, o, err, sizeof err), 0);
}

static void put_word(uint8_t *t, size_t i, uint64_t v)
{
    memcpy(t + 8 * i, &v, 8);
}

static void test_real_3_15(void **state)
{
    (void)state;
    struct cpy_offsets o;
    struct cpy_asyncio_offsets a;
    uint8_t t[CPY_ASYNCIO_TABLE_SIZE];
    char err[200];
    offsets_of("debug_offsets_3.15.2.bin", &o);
    assert_int_equal(load("asyncio_debug_3.15.2.bin", t, sizeof t), sizeof t);
    assert_int_equal(cpy_asyncio_parse(t, sizeof t, &o, &a, err, sizeof err), 0);
    assert_int_equal(a.task.size, 168);
    assert_int_equal(a.task.name, 136);
    assert_int_equal(a.task.awaited_by, 96);
    assert_int_equal(a.task.is_task, 108);
    assert_int_equal(a.task.awaited_by_is_set, 109);
    assert_int_equal(a.task.coro, 128);
    assert_int_equal(a.task.node, 152);
    assert_int_equal(a.interp.tasks_head, 10856);
    assert_int_equal(a.thread.running_loop, 1024);
    assert_int_equal(a.thread.running_task, 1032);
    assert_int_equal(a.thread.tasks_head, 1048);
    assert_int_equal(a.state_yield_from, 2);
    assert_int_equal(a.state_cleared, 5);
    assert_int_equal(a.awaited_slot, 2);
    /* What the reads need from the runtime's own table. */
    assert_true(CPY_HAS(&o, gen_object, gi_iframe));
    assert_true(CPY_HAS(&o, set_object, table));
    assert_int_equal(o.llist_node.next, 0);
}

static void test_real_3_14(void **state)
{
    (void)state;
    struct cpy_offsets o;
    struct cpy_asyncio_offsets a;
    uint8_t t[CPY_ASYNCIO_TABLE_SIZE];
    char err[200];
    offsets_of("debug_offsets_3.14.10.bin", &o);
    assert_int_equal(load("asyncio_debug_3.14.10.bin", t, sizeof t), sizeof t);
    assert_int_equal(cpy_asyncio_parse(t, sizeof t, &o, &a, err, sizeof err), 0);
    assert_int_equal(a.thread.running_task, 872);
    assert_int_equal(a.state_yield_from, -1);
    assert_int_equal(a.state_cleared, 4);
    assert_int_equal(a.awaited_slot, 1);
}

/* 3.13 publishes no such table and lacks the generator layouts. */
static void test_before_3_14(void **state)
{
    (void)state;
    struct cpy_offsets o;
    struct cpy_asyncio_offsets a;
    uint8_t t[CPY_ASYNCIO_TABLE_SIZE];
    char err[200] = "";
    offsets_of("debug_offsets_3.13.18.bin", &o);
    load("asyncio_debug_3.15.2.bin", t, sizeof t);
    assert_int_equal(cpy_asyncio_parse(t, sizeof t, &o, &a, err, sizeof err), PYS_E_VERSION);
    assert_non_null(strstr(err, "3.14"));
}

/* Every corruption is refused, each with its reason. */
static void test_corrupt(void **state)
{
    (void)state;
    struct cpy_offsets o;
    struct cpy_asyncio_offsets a;
    uint8_t good[CPY_ASYNCIO_TABLE_SIZE], t[CPY_ASYNCIO_TABLE_SIZE];
    char err[200];
    offsets_of("debug_offsets_3.15.2.bin", &o);
    load("asyncio_debug_3.15.2.bin", good, sizeof good);
    const struct {
        size_t word;
        uint64_t value;
        const char *why;
    } cases[] = {
        {0, 0, "task size"},
        {0, 1u << 20, "task size"},
        {1, 168, "task_name"}, /* at the struct's end */
        {6, 160, "task_node"}, /* 16 bytes from 160 pass 168 */
        {3, 4096, "task_is_task"},
        {5, 129, "task_coro"},               /* misaligned */
        {7, 226240 + 8, "interpreter size"}, /* not the runtime's */
        {8, 226240 - 8, "interpreter asyncio_tasks_head"},
        {9, 8, "thread size"}, /* smaller than PyThreadState */
        {12, 1104, "thread asyncio_tasks_head"},
        {10, UINT64_MAX, "asyncio_running_loop"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(t, good, sizeof t);
        put_word(t, cases[i].word, cases[i].value);
        err[0] = '\0';
        assert_int_equal(cpy_asyncio_parse(t, sizeof t, &o, &a, err, sizeof err), PYS_E_CORRUPT);
        if (!strstr(err, cases[i].why))
            fail_msg("case %zu: \"%s\" does not say %s", i, err, cases[i].why);
    }
    assert_int_equal(cpy_asyncio_parse(good, 96, &o, &a, err, sizeof err), PYS_E_CORRUPT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_3_15),
        cmocka_unit_test(test_real_3_14),
        cmocka_unit_test(test_before_3_14),
        cmocka_unit_test(test_corrupt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
