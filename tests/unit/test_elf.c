/*
 * Unit tests of the ELF layer on real interpreter images: a shared
 * libpython (ET_DYN, with .symtab) and Debian's static, stripped python3.15
 * executable (ET_EXEC): the .PyRuntime section and the _PyRuntime symbol at
 * its start, the debug cookie in its first bytes, the base address of the
 * first PT_LOAD, and that an extension module's undefined _PyRuntime is not
 * taken for a definition. Non-ELF, truncated and corrupted files must give
 * PYS_E_ELF (or a clean miss), never a crash. Tests whose image is absent
 * are skipped.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pystrobe/pystrobe.h>

#include "binfmt/elf.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LIBPYTHON313 "/root/.pyenv/versions/3.13.0/lib/libpython3.13.so.1.0"
#define JSON313                                                                                    \
    "/root/.pyenv/versions/3.13.0/lib/python3.13/lib-dynload/"                                     \
    "_json.cpython-313-x86_64-linux-gnu.so"
/* The tree's own sid root (make sidroot); the test skips before it exists. */
#define PYTHON315 ".cache/sid-root/usr/bin/python3.15"

/* An open image and the fd it reads; skips the test if the file is absent. */
struct open_image {
    int fd;
    struct bin_image *img;
};

static void open_or_skip(const char *path, struct open_image *o)
{
    o->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (o->fd < 0) {
        print_message("skipping: %s not found\n", path);
        skip();
    }
    o->img = NULL;
    assert_int_equal(bin_image_open(o->fd, &o->img), 0);
    assert_non_null(o->img);
}

static void close_image(struct open_image *o)
{
    bin_image_free(o->img);
    close(o->fd);
}

/* bin_image_open on the file at path; the image is freed again. */
static int open_rc(const char *path)
{
    struct bin_image *img = (struct bin_image *)&open_rc; /* sentinel */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int rc;

    assert_true(fd >= 0);
    rc = bin_image_open(fd, &img);
    if (rc == 0)
        bin_image_free(img);
    else
        assert_ptr_equal(img, (struct bin_image *)&open_rc);
    close(fd);
    return rc;
}

static int inside(uint64_t v, const struct bin_section *s)
{
    return v >= s->addr && v < s->addr + s->size;
}

/* The parts shared by both images: runtime section, symbol, cookie. */
static void check_runtime(struct bin_image *img, struct bin_section *rt)
{
    char cookie[8];
    uint64_t sym = 0;
    struct bin_section data;

    assert_int_equal(bin_image_section(img, ".PyRuntime", rt), 0);
    assert_int_equal(bin_image_symbol(img, "_PyRuntime", &sym), 0);
    assert_int_equal(sym, rt->addr);
    assert_int_equal(bin_image_section_read(img, ".PyRuntime", cookie, sizeof(cookie)),
                     sizeof(cookie));
    assert_memory_equal(cookie, "xdebugpy", 8);

    assert_int_equal(bin_image_section(img, ".data", &data), 0);
    assert_int_equal(bin_image_symbol(img, "PyCode_Type", &sym), 0);
    assert_true(inside(sym, &data));
    assert_int_equal(bin_image_symbol(img, "_Py_NoneStruct", &sym), 0);
    assert_true(inside(sym, &data));
}

static void check_misses(struct bin_image *img)
{
    struct bin_section sec = {1, 2, 3, 0};
    uint64_t sym = 42;
    char buf[4] = "abc";

    assert_int_equal(bin_image_symbol(img, "_Py_NoSuchSymbolAnywhere", &sym), PYS_E_NOTFOUND);
    assert_int_equal(bin_image_symbol(img, "", &sym), PYS_E_NOTFOUND);
    /* A prefix of a real name is not a match. */
    assert_int_equal(bin_image_symbol(img, "_PyRuntim", &sym), PYS_E_NOTFOUND);
    assert_int_equal(sym, 42);
    assert_int_equal(bin_image_section(img, ".nosuchsection", &sec), PYS_E_NOTFOUND);
    assert_int_equal(sec.addr, 1);
    assert_int_equal(bin_image_section_read(img, ".nosuchsection", buf, sizeof(buf)),
                     PYS_E_NOTFOUND);
    assert_string_equal(buf, "abc");
}

static void test_libpython_shared(void **state)
{
    struct open_image o;
    struct bin_section rt, text;
    uint64_t sym = 0;
    (void)state;

    open_or_skip(LIBPYTHON313, &o);
    assert_int_equal(bin_image_is_exec(o.img), 0);
    assert_int_equal(bin_image_base_vaddr(o.img), 0);
    check_runtime(o.img, &rt);
    check_misses(o.img);
    /* readelf -S: [26] .PyRuntime PROGBITS 5294c0 offset 5284c0 size 452b8 */
    assert_int_equal(rt.addr, 0x5294c0);
    assert_int_equal(rt.offset, 0x5284c0);
    assert_int_equal(rt.size, 0x452b8);
    /* A static function: only in .symtab. */
    assert_int_equal(bin_image_section(o.img, ".text", &text), 0);
    assert_int_equal(bin_image_symbol(o.img, "code_dealloc", &sym), 0);
    assert_true(inside(sym, &text));
    close_image(&o);
}

static void test_python315_exec(void **state)
{
    struct open_image o;
    struct bin_section rt, bss;
    char interp[64], zeros[16], big[sizeof(zeros)];
    uint64_t sym = 0;
    (void)state;

    open_or_skip(PYTHON315, &o);
    assert_int_equal(bin_image_is_exec(o.img), 1);
    assert_int_equal(bin_image_base_vaddr(o.img), 0x400000);
    check_runtime(o.img, &rt);
    check_misses(o.img);
    /* readelf -S: [28] .PyRuntime PROGBITS c408a0 offset 83f8a0 size 549c8 */
    assert_int_equal(rt.addr, 0xc408a0);
    assert_int_equal(rt.offset, 0x83f8a0);
    assert_int_equal(rt.size, 0x549c8);
    /* Stripped: no .symtab, static functions are not found. */
    assert_int_equal(bin_image_section(o.img, ".symtab", &bss), PYS_E_NOTFOUND);
    assert_int_equal(bin_image_symbol(o.img, "code_dealloc", &sym), PYS_E_NOTFOUND);

    /* A read is cut to the section's size. */
    memset(interp, 'x', sizeof(interp));
    assert_int_equal(bin_image_section_read(o.img, ".interp", interp, sizeof(interp)), 28);
    assert_string_equal(interp, "/lib64/ld-linux-x86-64.so.2");
    assert_int_equal(interp[28], 'x');
    assert_int_equal(bin_image_section_read(o.img, ".interp", interp, 6), 6);
    assert_memory_equal(interp, "/lib64", 6);
    assert_int_equal(bin_image_section_read(o.img, ".interp", interp, 0), 0);
    /* .bss has no file bytes and reads as zeros. */
    assert_int_equal(bin_image_section(o.img, ".bss", &bss), 0);
    memset(zeros, 0, sizeof(zeros));
    memset(big, 0x77, sizeof(big));
    assert_int_equal(bin_image_section_read(o.img, ".bss", big, sizeof(big)), sizeof(big));
    assert_memory_equal(big, zeros, sizeof(zeros));
    close_image(&o);
}

static void test_extension_undefined_runtime(void **state)
{
    struct open_image o;
    uint64_t sym = 42;
    (void)state;

    /* nm -D lists "U _PyRuntime" for this module. */
    open_or_skip(JSON313, &o);
    assert_int_equal(bin_image_is_exec(o.img), 0);
    assert_int_equal(bin_image_base_vaddr(o.img), 0);
    assert_int_equal(bin_image_symbol(o.img, "_PyRuntime", &sym), PYS_E_NOTFOUND);
    assert_int_equal(sym, 42);
    assert_int_equal(bin_image_symbol(o.img, "PyInit__json", &sym), 0);
    assert_true(sym != 0);
    close_image(&o);
}

static void test_not_elf(void **state)
{
    (void)state;
    assert_int_equal(open_rc("/etc/passwd"), PYS_E_ELF);
    assert_int_equal(open_rc("/dev/null"), PYS_E_ELF);
    assert_int_equal(bin_image_open(-1, &(struct bin_image *){NULL}), PYS_E_INVAL);
}

/* Copy of the first len bytes of src (all if len is SIZE_MAX) into a
 * temporary file, with an optional patch; returns its name (to unlink). */
static char *copy_file(const char *src, size_t len, size_t patch_at, const void *patch,
                       size_t patch_len)
{
    static char name[64];
    char *buf = NULL;
    struct stat st;
    int in, out;

    in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return NULL;
    assert_int_equal(fstat(in, &st), 0);
    if (len > (size_t)st.st_size)
        len = (size_t)st.st_size;
    buf = malloc(len > 0 ? len : 1);
    assert_non_null(buf);
    assert_int_equal(pread(in, buf, len, 0), (ssize_t)len);
    close(in);
    if (patch != NULL) {
        assert_true(patch_at + patch_len <= len);
        memcpy(buf + patch_at, patch, patch_len);
    }
    snprintf(name, sizeof(name), "/tmp/test_elf.XXXXXX");
    out = mkstemp(name);
    assert_true(out >= 0);
    assert_int_equal(write(out, buf, len), (ssize_t)len);
    close(out);
    free(buf);
    return name;
}

static void test_truncated(void **state)
{
    static const size_t sizes[] = {0, 4, 16, 63, 64, 1000, 4096, 65536, 200000};
    (void)state;

    if (access(JSON313, R_OK) != 0)
        skip();
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char *name = copy_file(JSON313, sizes[i], 0, NULL, 0);

        assert_non_null(name);
        if (open_rc(name) != PYS_E_ELF)
            fail_msg("truncated to %zu bytes: not PYS_E_ELF", sizes[i]);
        unlink(name);
    }
    if (access(LIBPYTHON313, R_OK) == 0) {
        char *name = copy_file(LIBPYTHON313, 1 << 20, 0, NULL, 0);

        assert_int_equal(open_rc(name), PYS_E_ELF);
        unlink(name);
    }
}

/* Patched headers: the open fails, or lookups fail cleanly. */
static void test_corrupt_headers(void **state)
{
    struct patch {
        size_t at;
        uint8_t bytes[8];
        size_t len;
    };
    static const struct patch open_fails[] = {
        {4, {1}, 1},                                   /* EI_CLASS = ELFCLASS32 */
        {16, {1, 0}, 2},                               /* e_type = ET_REL */
        {16, {4, 0}, 2},                               /* e_type = ET_CORE */
        {40, {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, 8}, /* e_shoff far out */
        {56, {0, 0}, 2},                               /* e_phnum = 0: no PT_LOAD */
        {32, {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, 8}, /* e_phoff far out */
        {62, {0xf0, 0x7f}, 2},                         /* e_shstrndx out of range */
        {62, {0, 0}, 2},                               /* e_shstrndx = SHN_UNDEF */
    };
    (void)state;

    if (access(JSON313, R_OK) != 0)
        skip();
    for (size_t i = 0; i < sizeof(open_fails) / sizeof(open_fails[0]); i++) {
        const struct patch *p = &open_fails[i];
        char *name = copy_file(JSON313, SIZE_MAX, p->at, p->bytes, p->len);

        assert_non_null(name);
        if (open_rc(name) != PYS_E_ELF)
            fail_msg("patch #%zu at %zu: not PYS_E_ELF", i, p->at);
        unlink(name);
    }
}

/* Every byte of the section headers flipped in turn: no crash, and any
 * answer is 0, PYS_E_NOTFOUND or PYS_E_ELF. */
static void test_flipped_section_headers(void **state)
{
    struct open_image o;
    struct bin_section sec;
    uint64_t shoff;
    uint16_t shnum;
    size_t shsize;
    struct stat st;
    char *orig = NULL;
    (void)state;

    open_or_skip(JSON313, &o);
    assert_int_equal(fstat(o.fd, &st), 0);
    orig = malloc((size_t)st.st_size);
    assert_non_null(orig);
    assert_int_equal(pread(o.fd, orig, (size_t)st.st_size, 0), st.st_size);
    close_image(&o);
    /* e_shoff and e_shnum of an x86-64 (little-endian) ELF64 header. */
    memcpy(&shoff, orig + 40, 8);
    memcpy(&shnum, orig + 60, 2);
    shsize = (size_t)shnum * 64;
    assert_true(shsize > 0);
    assert_true(shoff + shsize <= (uint64_t)st.st_size);
    for (size_t i = 0; i < shsize; i += 3) {
        uint8_t b = (uint8_t)(orig[shoff + i] ^ 0xa5);
        char *name = copy_file(JSON313, SIZE_MAX, shoff + i, &b, 1);
        int fd = open(name, O_RDONLY | O_CLOEXEC);
        struct bin_image *img = NULL;

        assert_true(fd >= 0);
        if (bin_image_open(fd, &img) == 0) {
            uint64_t v;
            char buf[32];
            int rc = bin_image_symbol(img, "PyInit__json", &v);
            long n;

            assert_true(rc == 0 || rc == PYS_E_NOTFOUND || rc == PYS_E_ELF);
            rc = bin_image_symbol(img, "_PyRuntime", &v);
            assert_true(rc == PYS_E_NOTFOUND || rc == PYS_E_ELF || rc == 0);
            rc = bin_image_section(img, ".data", &sec);
            assert_true(rc == 0 || rc == PYS_E_NOTFOUND);
            n = bin_image_section_read(img, ".rodata", buf, sizeof(buf));
            assert_true((n >= 0 && n <= (long)sizeof(buf)) || n == PYS_E_NOTFOUND ||
                        n == PYS_E_ELF);
            bin_image_free(img);
        }
        close(fd);
        unlink(name);
    }
    free(orig);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_libpython_shared),
        cmocka_unit_test(test_python315_exec),
        cmocka_unit_test(test_extension_undefined_runtime),
        cmocka_unit_test(test_not_elf),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_corrupt_headers),
        cmocka_unit_test(test_flipped_section_headers),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
