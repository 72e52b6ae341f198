/*
 * Unit tests of core/probe.c: the PY_VERSION search (release, pre-release
 * and "+" forms; strings that only look like one; other libraries' version
 * strings in the same image) and the CPython probe on the small ELF files
 * the ELF fuzzer starts from (tests/fuzz/seeds/fuzz_elf/, read from the
 * source tree: run from its root, as `make test-one` does; skipped if
 * absent). The real interpreters are covered by the integration tests.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pystrobe/pystrobe.h>

#include "binfmt/elf.h"
#include "core/core.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define SEEDS "tests/fuzz/seeds/fuzz_elf/"

/* The scan over a literal (its terminating NUL included). */
#define SCAN(lit) prof_version_scan(lit, sizeof(lit))

static void test_scan_release(void **state)
{
    (void)state;
    assert_int_equal(SCAN("3.9.18"), 0x030912f0);
    assert_int_equal(SCAN("\0"
                          "2.7.18"),
                     0x020712f0);
    /* Merged into the tail of a longer string, such as a prefix. */
    assert_int_equal(SCAN("/opt/py-3.10.13"), 0x030a0df0);
    assert_int_equal(SCAN("x\0"
                          "3.8.0rc1\0y"),
                     0x030800c1);
    assert_int_equal(SCAN("3.10.0b4"), 0x030a00b4);
    assert_int_equal(SCAN("3.9.0a6"), 0x030900a6);
    assert_int_equal(SCAN("3.10.0+"), 0x030a00f0);
}

static void test_scan_lookalikes(void **state)
{
    (void)state;
    assert_int_equal(SCAN(""), 0);
    assert_int_equal(prof_version_scan("3.9.18", 6), 0); /* no NUL inside the buffer */
    assert_int_equal(SCAN("13.9.1"), 0);                 /* preceded by a digit */
    assert_int_equal(SCAN("1.3.9.1"), 0);                /* preceded by a dot */
    assert_int_equal(SCAN("3.9.18x"), 0);
    assert_int_equal(SCAN("3.9"), 0);
    assert_int_equal(SCAN("4.1.2"), 0);
    assert_int_equal(SCAN("3.9.256"), 0); /* does not fit its byte */
    assert_int_equal(SCAN("3.9.1rc"), 0);
    assert_int_equal(SCAN("3.123.1"), 0);
}

static void test_scan_other_libraries(void **state)
{
    (void)state;
    /* OpenSSL's version string next to CPython's: 3.8-3.10 decide. */
    assert_int_equal(SCAN("3.0.11\0"
                          "3.9.18"),
                     0x030912f0);
    assert_int_equal(SCAN("3.9.18\0"
                          "3.0.11"),
                     0x030912f0);
    /* The same version twice is no conflict. */
    assert_int_equal(SCAN("3.9.18\0"
                          "3.9.18"),
                     0x030912f0);
    /* Two that this search serves disagree: unknown. */
    assert_int_equal(SCAN("3.9.18\0"
                          "3.10.1"),
                     0);
    /* Two outside its range disagree: unknown. */
    assert_int_equal(SCAN("3.0.11\0"
                          "3.2.1"),
                     0);
}

/* prof_probe_file on a seed file; skips if absent. */
static int probe(const char *path, struct prof_probe *pi, uint32_t *rodata)
{
    struct bin_image *img = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

    if (fd < 0) {
        print_message("skipping: %s not found\n", path);
        skip();
    }
    assert_int_equal(bin_image_open(fd, &img), 0);
    rc = prof_probe_file(img, pi);
    *rodata = prof_probe_rodata_version(img);
    bin_image_free(img);
    close(fd);
    return rc;
}

static void test_probe_mock_libpython(void **state)
{
    struct prof_probe pi;
    uint32_t v;

    (void)state;
    assert_int_equal(probe(SEEDS "mock-libpython.so", &pi, &v), 0);
    assert_true(pi.has_section && pi.has_runtime_sym && pi.has_version_sym);
    /* _PyRuntime is the section's start, as in CPython. */
    assert_int_equal(pi.runtime_sym, pi.section_addr);
    assert_int_equal(pi.section_size, 64);
    assert_int_equal(v, 0x030912f0);
}

static void test_probe_not_python(void **state)
{
    struct prof_probe pi;
    uint32_t v;

    (void)state;
    memset(&pi, 0x5a, sizeof pi);
    assert_int_equal(probe(SEEDS "hello-stripped", &pi, &v), PYS_E_NOTPYTHON);
    assert_int_equal(pi.has_section, 0x5a5a5a5a); /* untouched */
    assert_int_equal(v, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan_release),         cmocka_unit_test(test_scan_lookalikes),
        cmocka_unit_test(test_scan_other_libraries), cmocka_unit_test(test_probe_mock_libpython),
        cmocka_unit_test(test_probe_not_python),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
