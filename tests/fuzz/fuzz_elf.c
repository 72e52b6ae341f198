/*
 * libFuzzer target for the ELF reader (binfmt/elf.c) and what attach asks
 * of every file a target maps (core/probe.c). The input is handed over as a
 * file (a memfd), as attach hands over /proc/PID/map_files/..., and goes
 * through the same calls: bin_image_open, the load address, section lookup
 * and reads, symbol lookup, prof_probe_file and the PY_VERSION search in
 * .rodata. Besides memory errors (AddressSanitizer) and undefined behaviour
 * (UBSan) it checks the contracts: out-parameters untouched on failure, a
 * section read never longer than asked or than the section, a version found
 * well formed.
 *
 * Seeds (tests/fuzz/seeds/fuzz_elf/), built from the C below with gcc
 * -O1 -g0 and stripped, each a few KB:
 *   mock-libpython.so  -shared -fPIC, strip --strip-unneeded (.dynsym only)
 *   mock-python-exec   -no-pie -rdynamic -DEXEC, not stripped (.symtab too)
 *   hello-stripped     a main returning 0, strip --strip-all (no markers)
 *
 *   __attribute__((section(".PyRuntime"), used)) char _PyRuntime[64] = "xdebugpy";
 *   unsigned long Py_Version = 0x030901f0;
 *   const char version[] = "3.9.18";
 *   void Py_Initialize(void) {}
 *   #ifdef EXEC
 *   int main(void) { return version[0]; }
 *   #endif
 */
#include "binfmt/elf.h"
#include "core/core.h"

#include <pystrobe/pystrobe.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Largest section read copied per input: enough to cover every seed. */
#define READ_MAX (1u << 20)

static void check(int ok)
{
    if (!ok)
        abort();
}

static void check_version(uint32_t v)
{
    unsigned level = (v >> 4) & 0xf;

    if (v == 0)
        return;
    check((v >> 24) == 2 || (v >> 24) == 3);
    check(level == 0xa || level == 0xb || level == 0xc || level == 0xf);
}

static void sections(const struct bin_image *img, char *buf)
{
    static const char *const names[] = {".PyRuntime", ".rodata", ".dynsym", ".symtab",
                                        ".dynstr",    ".data",   ".bss",    ""};

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        struct bin_section sec = {1, 2, 3, 4};
        int rc = bin_image_section(img, names[i], &sec);
        long n;

        if (rc < 0) {
            check(rc == PYS_E_NOTFOUND);
            check(sec.addr == 1 && sec.size == 2 && sec.offset == 3 && sec.in_file == 4);
        }
        n = bin_image_section_read(img, names[i], buf, READ_MAX);
        if (n >= 0) {
            check(rc == 0);
            check((size_t)n <= READ_MAX && (uint64_t)n <= sec.size);
        } else {
            check(n == PYS_E_NOTFOUND || n == PYS_E_ELF || n == PYS_E_INVAL);
        }
    }
}

static void symbols(const struct bin_image *img)
{
    static const char *const names[] = {"_PyRuntime",  "Py_Version",     "Py_Initialize",
                                        "PyCode_Type", "_Py_NoneStruct", ""};

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        uint64_t v = 42;
        int rc = bin_image_symbol(img, names[i], &v);

        if (rc < 0) {
            check(rc == PYS_E_NOTFOUND || rc == PYS_E_ELF);
            check(v == 42);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char *buf;
    struct bin_image *img = (struct bin_image *)&fd; /* sentinel */
    struct prof_probe pi;
    int rc;

    if (fd < 0) {
        fd = memfd_create("fuzz_elf", MFD_CLOEXEC);
        buf = malloc(READ_MAX);
        check(fd >= 0 && buf != NULL);
    }
    check(ftruncate(fd, 0) == 0);
    check(size == 0 || pwrite(fd, data, size, 0) == (ssize_t)size);

    /* The scanner on its own, over the raw bytes. */
    check_version(prof_version_scan((const char *)data, size));

    rc = bin_image_open(fd, &img);
    if (rc < 0) {
        check(rc == PYS_E_ELF || rc == PYS_E_NOMEM);
        check(img == (struct bin_image *)&fd);
        return 0;
    }
    (void)bin_image_is_exec(img);
    (void)bin_image_base_vaddr(img);
    sections(img, buf);
    symbols(img);
    memset(&pi, 0x5a, sizeof pi);
    rc = prof_probe_file(img, &pi);
    if (rc == 0) {
        check(pi.has_section == 0 || pi.has_section == 1);
        check(pi.has_runtime_sym == 0 || pi.has_runtime_sym == 1);
        check(pi.has_version_sym == 0 || pi.has_version_sym == 1);
    } else {
        const unsigned char *b = (const unsigned char *)&pi;

        check(rc == PYS_E_NOTPYTHON);
        for (size_t i = 0; i < sizeof pi; i++)
            check(b[i] == 0x5a);
    }
    check_version(prof_probe_rodata_version(img));
    bin_image_free(img);
    return 0;
}
