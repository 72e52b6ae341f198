/*
 * test_util: the small shared helpers of src/util (errtext, bytes, array,
 * pyversion), mem_regions_append (mem/source_image.c), and the process
 * frame of merged profiles (output/procframe.c).
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

#include "mem/mem.h"
#include "output/procframe.h"
#include "util/array.h"
#include "util/bytes.h"
#include "util/errtext.h"
#include "util/pyversion.h"

static void test_err_set(void **state)
{
    (void)state;
    char err[8] = "x";
    assert_int_equal(util_err_set(err, sizeof err, PYS_E_CORRUPT, "bad %d", 12345678),
                     PYS_E_CORRUPT);
    assert_string_equal(err, "bad 123"); /* cut, terminated */
    assert_int_equal(util_err_set(NULL, 0, PYS_E_VERSION, "%s", "ignored"), PYS_E_VERSION);
    assert_int_equal(util_err_set(err, 0, -1, "%s", "not written"), -1);
    assert_string_equal(err, "bad 123");
}

static void test_bytes(void **state)
{
    (void)state;
    const uint8_t b[9] = {0xff, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x88};
    assert_true(util_le_get(b + 1, 8) == 0x8807060504030201ull);
    assert_true(util_le_get(b + 1, 2) == 0x0201);
    assert_true(util_le_get(b, 1) == 0xff);
    uint64_t u = util_load_u64(b + 1); /* unaligned, this machine's order */
    assert_memory_equal(&u, b + 1, 8);
    assert_true(util_load_i64(b + 1) == (int64_t)u);
    int32_t i = util_load_i32(b + 5);
    assert_memory_equal(&i, b + 5, 4);
    uint8_t out[9] = {0};
    util_le_put(out + 1, 0x1122334455667788ull, 3);
    const uint8_t want[9] = {0, 0x88, 0x77, 0x66, 0, 0, 0, 0, 0};
    assert_memory_equal(out, want, sizeof want);
}

static void test_array_reserve(void **state)
{
    (void)state;
    int *v = NULL;
    size_t cap = 0;
    assert_int_equal(util_array_reserve((void **)&v, &cap, 0, sizeof *v), 0);
    assert_null(v);
    assert_int_equal(util_array_reserve((void **)&v, &cap, 1, sizeof *v), 0);
    assert_non_null(v);
    assert_true(cap >= 1);
    for (int k = 0; k < 1000; k++) {
        assert_int_equal(util_array_reserve((void **)&v, &cap, (size_t)k + 1, sizeof *v), 0);
        v[k] = k;
    }
    assert_true(cap >= 1000 && cap < 4000);
    int *before = v;
    size_t cap_before = cap;
    /* A size past SIZE_MAX: refused, the array as it was. */
    assert_int_equal(util_array_reserve((void **)&v, &cap, SIZE_MAX / 2, sizeof *v), PYS_E_NOMEM);
    assert_ptr_equal(v, before);
    assert_int_equal(cap, cap_before);
    for (int k = 0; k < 1000; k++)
        assert_int_equal(v[k], k);
    free(v);
}

static void test_python_version_text(void **state)
{
    (void)state;
    static const struct {
        uint32_t hex;
        const char *text;
    } cases[] = {
        {0x030c01f0, "3.12.1"},    {0x030f00a2, "3.15.0a2"},      {0x030e00b1, "3.14.0b1"},
        {0x030e00c3, "3.14.0rc3"}, {0x02071200 | 0xf0, "2.7.18"}, {0, "(unknown version)"},
    };
    char buf[32];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        util_python_version_text(cases[i].hex, buf, sizeof buf);
        assert_string_equal(buf, cases[i].text);
    }
    util_python_version_text(0x030c01f0, buf, 4);
    assert_string_equal(buf, "3.1");
}

static void test_regions_append(void **state)
{
    (void)state;
    static uint8_t bytes[64];
    struct mem_region *v = NULL;
    size_t n = 0, cap = 0;
    /* Continuing in address and bytes: joined. */
    assert_int_equal(mem_regions_append(&v, &n, &cap, (struct mem_region){0x1000, bytes, 16, NULL}),
                     0);
    assert_int_equal(
        mem_regions_append(&v, &n, &cap, (struct mem_region){0x1010, bytes + 16, 16, NULL}), 0);
    assert_int_equal(n, 1);
    assert_int_equal(v[0].len, 32);
    /* Empty: nothing. Next in address but not in bytes, or writable where
     * the last is not: a region of its own. */
    assert_int_equal(
        mem_regions_append(&v, &n, &cap, (struct mem_region){0x1020, bytes + 40, 0, NULL}), 0);
    assert_int_equal(n, 1);
    assert_int_equal(
        mem_regions_append(&v, &n, &cap, (struct mem_region){0x1020, bytes + 40, 8, NULL}), 0);
    assert_int_equal(
        mem_regions_append(&v, &n, &cap, (struct mem_region){0x1028, bytes + 48, 8, bytes + 48}),
        0);
    assert_int_equal(n, 3);
    /* Reads run across the joined ones as across regions that meet. */
    for (int i = 0; i < 64; i++)
        bytes[i] = (uint8_t)i;
    uint8_t got[8];
    assert_int_equal(mem_image_copy(v, n, 0x100c, got, 8), 0);
    assert_memory_equal(got, bytes + 12, 8);
    assert_int_equal(mem_image_copy(v, n, 0x101c, got, 8), 0);
    assert_int_equal(got[4], 40);
    free(v);
}

static void test_stack_process(void **state)
{
    (void)state;
    struct pys_frame f[2] = {
        {.filename = "a.py", .qualname = "f", .kind = PYS_FRAME_PYTHON},
        {.filename = "~", .qualname = "process 4242 python3 -c x", .kind = PYS_FRAME_PROCESS}};
    int pid = -7;
    const char *cmd = "unchanged";
    assert_int_equal(out_stack_process(f, 2, &pid, &cmd), 1);
    assert_int_equal(pid, 4242);
    assert_string_equal(cmd, "python3 -c x");
    f[1].qualname = "process 17";
    assert_int_equal(out_stack_process(f, 2, &pid, &cmd), 1);
    assert_int_equal(pid, 17);
    assert_string_equal(cmd, "");
    static const char *const bad[] = {
        "process ",      "process x", "process -1 a", "process 0 a", "process 99999999999 a",
        "process 12x a", "proc 12 a"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        f[1].qualname = bad[i];
        pid = -7;
        assert_int_equal(out_stack_process(f, 2, &pid, &cmd), 0);
        assert_int_equal(pid, -7);
    }
    /* Not the outermost, or not a process frame: none. */
    f[1].qualname = "process 5 a";
    assert_int_equal(out_stack_process(f, 1, &pid, &cmd), 0);
    f[1].kind = PYS_FRAME_NATIVE;
    assert_int_equal(out_stack_process(f, 2, &pid, &cmd), 0);
    assert_int_equal(out_stack_process(f, 0, &pid, &cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_err_set),        cmocka_unit_test(test_bytes),
        cmocka_unit_test(test_array_reserve),  cmocka_unit_test(test_python_version_text),
        cmocka_unit_test(test_regions_append), cmocka_unit_test(test_stack_process),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
