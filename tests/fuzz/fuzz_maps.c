/*
 * libFuzzer target for plat_maps_parse, the parser of /proc/PID/maps text.
 * Besides memory errors (AddressSanitizer) and undefined behaviour (UBSan)
 * it checks the parser's contract: on success every entry is well formed
 * and there are no more entries than lines; on failure the code is
 * PYS_E_CORRUPT and the out-parameter is untouched.
 *
 * Seeds (tests/fuzz/seeds/fuzz_maps/): the maps of a shared-library CPython
 * (libpython3.13.so), of Debian's static python3.15 executable, and a file
 * of edge cases (spaces and " (deleted)" in paths, pseudo paths, anonymous
 * mappings with and without the trailing space, no final newline).
 */
#include "platform/platform.h"

#include <pystrobe/pystrobe.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

static int perm_ok(const char perms[5])
{
    return (perms[0] == 'r' || perms[0] == '-') && (perms[1] == 'w' || perms[1] == '-') &&
           (perms[2] == 'x' || perms[2] == '-') && (perms[3] == 'p' || perms[3] == 's') &&
           perms[4] == '\0';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct plat_map sentinel;
    struct plat_maps m = {&sentinel, 12345};
    const char *text = (const char *)data;
    size_t lines = 0;
    int rc;

    rc = plat_maps_parse(text, size, &m);
    if (rc != 0) {
        check(rc == PYS_E_CORRUPT);
        check(m.v == &sentinel && m.n == 12345);
        return 0;
    }
    for (size_t i = 0; i < size; i++)
        lines += text[i] == '\n';
    if (size > 0 && text[size - 1] != '\n')
        lines++;
    check(m.n == lines);
    check((m.n == 0) == (m.v == NULL));
    for (size_t i = 0; i < m.n; i++) {
        const struct plat_map *e = &m.v[i];

        check(e->start <= e->end);
        check(perm_ok(e->perms));
        if (e->path != NULL) {
            size_t n = strlen(e->path);

            /* Non-empty, from inside the input, one line, no padding. */
            check(n > 0 && n <= size);
            check(memchr(e->path, '\n', n) == NULL);
            check(e->path[0] != ' ');
        }
    }
    plat_maps_release(&m);
    check(m.v == NULL && m.n == 0);
    return 0;
}
