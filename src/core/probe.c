/*
 * probe: what the file of a mapped image says about CPython, without the
 * process: whether it holds a CPython runtime at all, where, and which
 * version its PY_VERSION string names.
 *
 * CPython is recognised by content, never by file name (an embedder, a
 * renamed executable or library): the .PyRuntime section (3.13+, which
 * starts with _Py_DebugOffsets), a defined _PyRuntime symbol (3.7+), or a
 * defined Py_Initialize (any CPython, so that 2.7 and 3.6 are named in the
 * error rather than called "not Python"). The file is untrusted; the checks
 * run cheapest first because attach asks every library a process maps.
 */
#include <stdlib.h>
#include <string.h>

#include "binfmt/elf.h"
#include "core/core.h"

/* Largest .rodata searched for the version string; libpython's is ~1 MiB,
 * an embedder linking everything statically may have far more. */
#define RODATA_MAX (64u << 20)

int prof_probe_file(const struct bin_image *img, struct prof_probe *out)
{
    struct prof_probe r;
    struct bin_section sec;
    uint64_t v;

    if (img == NULL || out == NULL)
        return PYS_E_INVAL;
    memset(&r, 0, sizeof r);
    /* Section headers only: the cheapest test, and the answer for 3.13+. */
    if (bin_image_section(img, ".PyRuntime", &sec) == 0) {
        r.has_section = 1;
        r.section_addr = sec.addr;
        r.section_size = sec.size;
    }
    if (bin_image_symbol(img, "_PyRuntime", &v) == 0) {
        r.has_runtime_sym = 1;
        r.runtime_sym = v;
    }
    if (!r.has_section && !r.has_runtime_sym && bin_image_symbol(img, "Py_Initialize", &v) < 0)
        return PYS_E_NOTPYTHON;
    if (bin_image_symbol(img, "Py_Version", &v) == 0) {
        r.has_version_sym = 1;
        r.version_sym = v;
    }
    *out = r;
    return 0;
}

/* A release level suffix at p ("a1", "b2", "rc1"; also none): its
 * PY_RELEASE_LEVEL and serial into *level, *serial; the length, or -1 if p
 * holds something else. */
static int release_suffix(const char *p, const char *end, unsigned *level, unsigned *serial)
{
    const char *q = p;

    *level = 0xf;
    *serial = 0;
    if (q < end && (*q == 'a' || *q == 'b')) {
        *level = *q == 'a' ? 0xa : 0xb;
        q++;
    } else if (end - q >= 2 && q[0] == 'r' && q[1] == 'c') {
        *level = 0xc;
        q += 2;
    } else {
        return 0;
    }
    if (q >= end || *q < '0' || *q > '9')
        return -1;
    for (int k = 0; q < end && k < 2 && *q >= '0' && *q <= '9'; k++)
        *serial = *serial * 10 + (unsigned)(*q++ - '0');
    return (int)(q - p);
}

/* Up to max decimal digits at *p into *v; how many were read. */
static int digits(const char **p, const char *end, int max, unsigned *v)
{
    int k = 0;

    *v = 0;
    while (*p < end && k < max && **p >= '0' && **p <= '9') {
        *v = *v * 10 + (unsigned)(**p - '0');
        (*p)++;
        k++;
    }
    return k;
}

/* The string at buf[i] if it is a PY_VERSION: "2.7.18", "3.9.0rc1",
 * "3.10.0+", NUL-terminated, not preceded by a digit or a dot. Its
 * PY_VERSION_HEX, or 0. */
static uint32_t version_at(const char *buf, size_t n, size_t i)
{
    const char *p = buf + i, *end = buf + n;
    unsigned major, minor, patch, level, serial;
    int k;

    if (i > 0 && ((buf[i - 1] >= '0' && buf[i - 1] <= '9') || buf[i - 1] == '.'))
        return 0;
    if (digits(&p, end, 1, &major) != 1 || (major != 2 && major != 3) || p >= end || *p++ != '.')
        return 0;
    if (digits(&p, end, 2, &minor) == 0 || p >= end || *p++ != '.')
        return 0;
    /* Each field must fit its byte (nibble for the serial) of the hex. */
    if (digits(&p, end, 3, &patch) == 0 || patch > 0xff)
        return 0;
    if ((k = release_suffix(p, end, &level, &serial)) < 0 || serial > 0xf)
        return 0;
    p += k;
    if (p < end && *p == '+')
        p++;
    if (p >= end || *p != '\0')
        return 0;
    return major << 24 | minor << 16 | patch << 8 | level << 4 | serial;
}

uint32_t prof_version_scan(const char *buf, size_t n)
{
    /* Before 3.11 nothing exported holds the version; the PY_VERSION literal
     * is in .rodata (possibly merged into the tail of a longer string such
     * as an install prefix). Another library linked into the same image may
     * hold a string of the same shape (OpenSSL's "3.0.11"): if the matches
     * disagree on major.minor, those of the versions this search serves
     * (3.8-3.10; later ones export Py_Version) decide; if they disagree
     * too, the version is unknown. */
    uint32_t first = 0, first_served = 0;
    int all_agree = 1, served_agree = 1;

    const char *end = buf + n;
    /* Every candidate starts with '2' or '3': the next of each, found with
     * memchr, each byte looked at once. */
    const char *p2 = n ? memchr(buf, '2', n) : NULL;
    const char *p3 = n ? memchr(buf, '3', n) : NULL;

    while (p2 != NULL || p3 != NULL) {
        const char *q;
        uint32_t v;

        if (p3 == NULL || (p2 != NULL && p2 < p3)) {
            q = p2;
            p2 = memchr(q + 1, '2', (size_t)(end - q - 1));
        } else {
            q = p3;
            p3 = memchr(q + 1, '3', (size_t)(end - q - 1));
        }
        v = version_at(buf, n, (size_t)(q - buf));
        if (v == 0)
            continue;
        if (first == 0)
            first = v;
        else if ((v >> 16) != (first >> 16))
            all_agree = 0;
        if ((v >> 24) == 3 && ((v >> 16) & 0xff) >= 7 && ((v >> 16) & 0xff) <= 10) {
            if (first_served == 0)
                first_served = v;
            else if ((v >> 16) != (first_served >> 16))
                served_agree = 0;
        }
    }
    if (all_agree)
        return first;
    if (first_served != 0 && served_agree)
        return first_served;
    return 0;
}

uint32_t prof_probe_rodata_version(const struct bin_image *img)
{
    struct bin_section sec;
    uint32_t v = 0;
    char *buf;
    long n;

    if (img == NULL || bin_image_section(img, ".rodata", &sec) < 0 || !sec.in_file ||
        sec.size == 0 || sec.size > RODATA_MAX)
        return 0;
    buf = malloc((size_t)sec.size);
    if (buf == NULL)
        return 0;
    n = bin_image_section_read(img, ".rodata", buf, (size_t)sec.size);
    if (n > 0)
        v = prof_version_scan(buf, (size_t)n);
    free(buf);
    return v;
}
