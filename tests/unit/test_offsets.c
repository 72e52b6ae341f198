/*
 * Unit tests of the _Py_DebugOffsets validator (cpython/offsets.c), on the
 * real tables of CPython 3.13.0, 3.13.18, 3.14.10 and 3.15.2 (copied from
 * the .PyRuntime sections of those builds into tests/unit/data/) and on
 * corrupted copies of them.
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

#include "cpython/offsets.h"

#define DATA_DIR "tests/unit/data/"

struct table {
    uint8_t buf[1024];
    size_t len;
};

static void load(struct table *t, const char *name)
{
    char path[256];
    snprintf(path, sizeof path, DATA_DIR "%s", name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    t->len = fread(t->buf, 1, sizeof t->buf, f);
    fclose(f);
    assert_true(t->len >= 584);
}

static void put_u64(struct table *t, size_t pos, uint64_t v)
{
    memcpy(t->buf + pos, &v, 8);
}

/* Byte position of a field in the table of a minor version. */
static size_t pos_of(unsigned minor, enum cpy_field f)
{
    for (size_t i = 0; i < cpy_layouts_count; i++)
        if (cpy_layouts[i].minor == minor && cpy_layouts[i].pos[f] != CPY_NOPOS)
            return cpy_layouts[i].pos[f];
    fail_msg("field %d not in the 3.%u table", (int)f, minor);
    return 0;
}

static int parse(const struct table *t, struct cpy_offsets *o, char *err)
{
    return cpy_offsets_parse(t->buf, t->len, o, err, 200);
}

static void test_real_3_15(void **state)
{
    (void)state;
    struct table t;
    struct cpy_offsets o;
    char err[200];
    load(&t, "debug_offsets_3.15.2.bin");
    assert_int_equal(parse(&t, &o, err), 0);
    assert_int_equal(o.version, 0x030f02f0);
    assert_int_equal(o.minor, 15);
    assert_int_equal(o.runtime_state.interpreters_head, 936);
    assert_int_equal(o.runtime_state.main_thread, 960);
    assert_int_equal(o.thread_state.current_frame, 72);
    assert_int_equal(o.thread_state.base_frame, 80);
    assert_int_equal(o.thread_state.native_thread_id, 184);
    assert_int_equal(o.thread_state.holds_gil, 36);
    assert_int_equal(o.thread_state.current_exception, 136);
    assert_int_equal(o.thread_state.exc_state, 288);
    assert_int_equal(o.thread_state.exc_info, 144);
    assert_int_equal(o.interpreter_frame.size, 88);
    assert_int_equal(o.interpreter_frame.owner, 74);
    assert_int_equal(o.code_object.co_code_adaptive, 208);
    assert_int_equal(o.code_object.firsttraceable, 192);
    assert_int_equal(o.unicode_object.compactunicodeobject_size, 56);
    assert_int_equal(o.gc.frame, 120);
    assert_int_equal(o.interpreter_state.code_object_generation, 7944);
    assert_int_equal(o.stackref_mask, 3);
    assert_int_equal(o.first_shim_owner, 3);
}

static void test_real_3_14(void **state)
{
    (void)state;
    struct table t;
    struct cpy_offsets o;
    char err[200];
    load(&t, "debug_offsets_3.14.10.bin");
    assert_int_equal(parse(&t, &o, err), 0);
    assert_int_equal(o.minor, 14);
    assert_int_equal(o.runtime_state.main_thread, 832);
    assert_int_equal(o.interpreter_state.threads_main, 7360);
    assert_int_equal(o.thread_state.holds_gil, 36);
    assert_true(o.thread_state.base_frame == CPY_ABSENT);
    assert_true(o.gc.frame == CPY_ABSENT);
    assert_int_equal(o.thread_state.current_exception, 112);
    assert_int_equal(o.interpreter_frame.owner, 74);
    assert_int_equal(o.stackref_mask, 3);
}

static void test_real_3_13(void **state)
{
    (void)state;
    struct table t;
    struct cpy_offsets o;
    char err[200];
    load(&t, "debug_offsets_3.13.18.bin");
    assert_int_equal(parse(&t, &o, err), 0);
    assert_int_equal(o.version, 0x030d12f0);
    assert_int_equal(o.runtime_state.main_thread, 656);
    assert_int_equal(o.interpreter_state.threads_main, 7352);
    assert_int_equal(o.thread_state.size, 312);
    assert_int_equal(o.thread_state.exc_info, 120);
    assert_int_equal(o.thread_state.exc_state, 256);
    assert_int_equal(o.code_object.firsttraceable, 184);
    assert_int_equal(o.interpreter_frame.owner, 70);
    assert_int_equal(o.stackref_mask, 0);
    assert_true(o.interpreter_state.code_object_generation == CPY_ABSENT);
    assert_true(o.thread_state.holds_gil == CPY_ABSENT);

    load(&t, "debug_offsets_3.13.0.bin");
    assert_int_equal(parse(&t, &o, err), 0);
    assert_int_equal(o.version, 0x030d00f0);
    assert_int_equal(o.thread_state.size, 304); /* a field was appended in a patch release */
}

static void test_wrong_cookie(void **state)
{
    (void)state;
    struct table t;
    struct cpy_offsets o, before;
    char err[200];
    load(&t, "debug_offsets_3.15.2.bin");
    t.buf[0] = 'X';
    memset(&o, 0x5a, sizeof o);
    before = o;
    assert_int_equal(parse(&t, &o, err), PYS_E_NOTPYTHON);
    assert_memory_equal(&o, &before, sizeof o); /* out-parameter untouched */
    assert_non_null(strstr(err, "cookie"));
}

static void test_truncated(void **state)
{
    (void)state;
    struct table t;
    struct cpy_offsets o;
    char err[200];
    load(&t, "debug_offsets_3.15.2.bin");
    t.len = 887;
    assert_int_equal(parse(&t, &o, err), PYS_E_CORRUPT);
    assert_non_null(strstr(err, "truncated"));
    t.len = 20; /* not even the header */
    assert_int_equal(parse(&t, &o, err), PYS_E_NOTPYTHON);
}

static void test_oversized_struct(void **state)
{
    (void)state;
    struct table t;
    struct cpy_offsets o;
    char err[200];
    load(&t, "debug_offsets_3.15.2.bin");
    put_u64(&t, pos_of(15, CPY_F_thread_state_size), 1ull << 40);
    assert_int_equal(parse(&t, &o, err), PYS_E_CORRUPT);
    load(&t, "debug_offsets_3.14.10.bin");
    put_u64(&t, pos_of(14, CPY_F_code_object_size), 0);
    assert_int_equal(parse(&t, &o, err), PYS_E_CORRUPT);
}

static void test_field_outside_struct(void **state)
{
    (void)state;
    struct table t;
    struct cpy_offsets o;
    char err[200];
    load(&t, "debug_offsets_3.15.2.bin");
    /* current_frame at the very end of the thread state: 8 bytes past it. */
    put_u64(&t, pos_of(15, CPY_F_thread_state_current_frame), 888);
    assert_int_equal(parse(&t, &o, err), PYS_E_CORRUPT);
    assert_non_null(strstr(err, "thread_state.current_frame"));

    load(&t, "debug_offsets_3.13.18.bin");
    put_u64(&t, pos_of(13, CPY_F_interpreter_frame_owner), 80); /* frame size is 80 */
    assert_int_equal(parse(&t, &o, err), PYS_E_CORRUPT);

    load(&t, "debug_offsets_3.15.2.bin");
    put_u64(&t, pos_of(15, CPY_F_code_object_qualname), UINT64_MAX);
    assert_int_equal(parse(&t, &o, err), PYS_E_CORRUPT);
}

static void test_misaligned(void **state)
{
    (void)state;
    struct table t;
    struct cpy_offsets o;
    char err[200];
    load(&t, "debug_offsets_3.15.2.bin");
    put_u64(&t, pos_of(15, CPY_F_interpreter_frame_previous), 9);
    assert_int_equal(parse(&t, &o, err), PYS_E_CORRUPT);
    assert_non_null(strstr(err, "misaligned"));
    load(&t, "debug_offsets_3.14.10.bin");
    put_u64(&t, pos_of(14, CPY_F_unicode_object_state), 33);
    assert_int_equal(parse(&t, &o, err), PYS_E_CORRUPT);
}

static void test_versions(void **state)
{
    (void)state;
    struct table t;
    struct cpy_offsets o;
    char err[200];
    load(&t, "debug_offsets_3.15.2.bin");
    put_u64(&t, 8, 0x031000f0); /* 3.16 */
    assert_int_equal(parse(&t, &o, err), PYS_E_VERSION);
    assert_non_null(strstr(err, "3.16"));
    put_u64(&t, 8, 0x030f00a1); /* 3.15.0a1 */
    assert_int_equal(parse(&t, &o, err), PYS_E_VERSION);
    assert_non_null(strstr(err, "pre-release"));
    put_u64(&t, 8, 0x020700f0);
    assert_int_equal(parse(&t, &o, err), PYS_E_VERSION);
    put_u64(&t, 8, 0x030f02f0);
    put_u64(&t, 16, 1); /* free-threaded */
    assert_int_equal(parse(&t, &o, err), PYS_E_VERSION);
    assert_non_null(strstr(err, "free-threaded"));
    /* A 3.14 table claiming 3.15 is too short for 3.15's layout. */
    load(&t, "debug_offsets_3.14.10.bin");
    put_u64(&t, 8, 0x030f02f0);
    assert_int_equal(parse(&t, &o, err), PYS_E_CORRUPT);
}

static void test_every_field_checked(void **state)
{
    (void)state;
    /* Pushing any dereferenced field of 3.15 far past its struct is caught. */
    struct cpy_offsets o;
    char err[200];
    const struct cpy_layout *lay = NULL;
    for (size_t i = 0; i < cpy_layouts_count; i++)
        if (cpy_layouts[i].minor == 15)
            lay = &cpy_layouts[i];
    assert_non_null(lay);
    for (int f = 0; f < CPY_F_COUNT; f++) {
        struct table t;
        if (lay->pos[f] == CPY_NOPOS)
            continue;
        load(&t, "debug_offsets_3.15.2.bin");
        put_u64(&t, lay->pos[f], (uint64_t)CPY_MAX_STRUCT_SIZE + 8);
        int rc = parse(&t, &o, err);
        if (rc != PYS_E_CORRUPT)
            fail_msg("field %d accepted at %u", f, (unsigned)CPY_MAX_STRUCT_SIZE + 8);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_3_15),        cmocka_unit_test(test_real_3_14),
        cmocka_unit_test(test_real_3_13),        cmocka_unit_test(test_wrong_cookie),
        cmocka_unit_test(test_truncated),        cmocka_unit_test(test_oversized_struct),
        cmocka_unit_test(test_field_outside_struct), cmocka_unit_test(test_misaligned),
        cmocka_unit_test(test_versions),         cmocka_unit_test(test_every_field_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
