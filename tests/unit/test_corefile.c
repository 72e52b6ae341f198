/*
 * Unit tests of the core file parser (binfmt/corefile.c) on the fuzzer's
 * seeds (tests/fuzz/seeds/fuzz_core, made by tests/fuzz/make_core_seeds.py,
 * whose docstring says what each holds): the segments sorted with their
 * present bytes, the threads and the dumping signal, the process id and
 * command, the entry point and the mapped files; a truncated core parses
 * with the missing bytes counted; headers cut off, a non-core ELF file,
 * overlapping segments and a lying NT_FILE count are refused with a reason.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pystrobe/pystrobe.h>

#include "binfmt/corefile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEEDS "tests/fuzz/seeds/fuzz_core/"

static uint8_t *load(const char *name, size_t *len)
{
    FILE *f = fopen(name, "rb");
    assert_non_null(f);
    uint8_t *buf = malloc(1 << 16);
    assert_non_null(buf);
    *len = fread(buf, 1, 1 << 16, f);
    fclose(f);
    return buf;
}

static void test_files(void **state)
{
    (void)state;
    size_t len;
    uint8_t *d = load(SEEDS "files", &len);
    struct bin_core c;
    char err[256];
    assert_int_equal(bin_core_parse(d, len, &c, err, sizeof err), 0);
    assert_int_equal(c.nsegs, 3);
    assert_true(c.segs[0].vaddr == 0x400000 && c.segs[0].memsz == 0x2000);
    assert_true(c.segs[0].filesz == 0x1000 && c.segs[0].present == 0x1000);
    assert_true(c.segs[1].vaddr == 0x500000 && c.segs[1].filesz == 0);
    assert_true(c.segs[2].vaddr == 0x7ff000 && c.segs[2].present == 0x1000);
    assert_int_equal(c.missing, 0);
    assert_int_equal(c.ntids, 2);
    assert_true(c.tids[0] == 4242 && c.tids[1] == 4243);
    assert_int_equal(c.signal, 6);
    assert_int_equal(c.pid, 4242);
    assert_string_equal(c.command, "python3");
    assert_true(c.entry == 0x401000);
    assert_int_equal(c.nfiles, 3);
    assert_string_equal(c.files[0].path, "/python");
    assert_true(c.files[1].start == 0x402000 && c.files[1].offset == 2 * 4096);
    assert_string_equal(c.files[2].path, "/missing");
    bin_core_release(&c);
    free(d);
}

static void test_truncated(void **state)
{
    (void)state;
    size_t len;
    uint8_t *d = load(SEEDS "truncated", &len);
    struct bin_core c;
    char err[256];
    assert_int_equal(bin_core_parse(d, len, &c, err, sizeof err), 0);
    assert_int_equal(c.missing, 2048);
    assert_int_equal(c.segs[2].present, 2048);
    bin_core_release(&c);
    /* Cut inside the program headers: refused, saying so. */
    assert_int_equal(bin_core_parse(d, 100, &c, err, sizeof err), PYS_E_CORRUPT);
    assert_non_null(strstr(err, "truncated"));
    free(d);
}

static void test_refused(void **state)
{
    (void)state;
    size_t len;
    uint8_t *d = load(SEEDS "files", &len);
    struct bin_core c;
    char err[256];
    /* Not ELF at all. */
    uint8_t text[64] = "hello";
    assert_int_equal(bin_core_parse(text, sizeof text, &c, err, sizeof err), PYS_E_CORRUPT);
    assert_non_null(strstr(err, "not an ELF file"));
    /* An executable, not a core (e_type 2). */
    d[16] = 2;
    assert_int_equal(bin_core_parse(d, len, &c, err, sizeof err), PYS_E_CORRUPT);
    assert_non_null(strstr(err, "not a core file"));
    d[16] = 4;
    /* The second segment moved onto the first (p_vaddr of header 2). */
    uint64_t v = 0x401000;
    memcpy(d + 64 + 2 * 56 + 16, &v, 8);
    assert_int_equal(bin_core_parse(d, len, &c, err, sizeof err), PYS_E_CORRUPT);
    assert_non_null(strstr(err, "overlap"));
    free(d);
    /* An NT_FILE count larger than its note holds. */
    d = load(SEEDS "files", &len);
    static const uint8_t name[] = {'C', 'O', 'R', 'E', 0, 0, 0, 0, 0x45, 0x4c, 0x49, 0x46};
    uint8_t *at = NULL;
    for (size_t i = 0; i + 24 < len && !at; i++)
        if (memcmp(d + i, name + 8, 4) == 0 && memcmp(d + i + 4, name, 5) == 0)
            at = d + i + 12;
    assert_non_null(at);
    uint64_t count = 1000;
    memcpy(at, &count, 8);
    assert_int_equal(bin_core_parse(d, len, &c, err, sizeof err), PYS_E_CORRUPT);
    assert_non_null(strstr(err, "NT_FILE"));
    free(d);
}

static void test_nofiles(void **state)
{
    (void)state;
    size_t len;
    uint8_t *d = load(SEEDS "nofiles", &len);
    struct bin_core c;
    char err[256];
    assert_int_equal(bin_core_parse(d, len, &c, err, sizeof err), 0);
    assert_int_equal(c.nfiles, 0);
    assert_int_equal(c.ntids, 1);
    assert_int_equal(c.pid, 7); /* no NT_PRPSINFO: the first thread's */
    assert_int_equal(c.signal, 11);
    bin_core_release(&c);
    free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_nofiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
