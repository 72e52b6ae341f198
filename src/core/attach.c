/*
 * attach: find the CPython runtime in a process and validate it.
 *
 * Candidates are the images mapped in the target whose file name says
 * python or libpython (the executable of a static build, libpython of a
 * shared one). For each, the ELF file is opened as the target sees it
 * (/proc/PID/map_files, so chroots and containers work), its .PyRuntime
 * section located, and the _Py_DebugOffsets at the section's start read
 * from the target's memory and validated. A candidate must also have an
 * initialised interpreter list: a library mapped a second time (ctypes) has
 * a valid cookie but no interpreters. When nothing passes, the error says
 * why: not Python at all, or a Python whose version is not supported.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "binfmt/elf.h"
#include "core/core.h"
#include "platform/platform.h"

/* What the search learned about one candidate that was not accepted. */
struct verdict {
    int code;          /* 0 = none yet */
    char detail[256];
};

static void note(struct verdict *v, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void note(struct verdict *v, int code, const char *fmt, ...)
{
    /* Keep the most telling verdict: a version problem beats the rest. */
    if (v->code == PYS_E_VERSION && code != PYS_E_VERSION)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->detail, sizeof v->detail, fmt, ap);
    va_end(ap);
    v->code = code;
}

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* "python3.13", "libpython3.15.so.1.0", "python2.7": the version the name
 * says, or 0 if the name is not a Python interpreter's. */
static int name_version(const char *path, unsigned *major, unsigned *minor)
{
    const char *b = base_name(path);
    if (strncmp(b, "lib", 3) == 0)
        b += 3;
    if (strncmp(b, "python", 6) != 0)
        return 0;
    b += 6;
    unsigned ma = 0, mi = 0;
    int n = 0;
    if (sscanf(b, "%u.%u%n", &ma, &mi, &n) == 2 && n > 0) {
        *major = ma;
        *minor = mi;
        return 1;
    }
    if (*b == '\0' || strcmp(b, "3") == 0) { /* "python" or "python3": version unknown */
        *major = *minor = 0;
        return 1;
    }
    return 0;
}

/* Largest .rodata searched for the version string; libpython's is ~1 MiB. */
#define RODATA_MAX (64u << 20)

/*
 * Before 3.11 nothing exported holds the version, but PY_VERSION ("3.9.18")
 * is a string literal in .rodata: find "3.MINOR." digits "\0" there, not
 * preceded by a digit or a dot. (The linker may merge the literal into the
 * tail of a longer string, such as an install prefix ending in it.) Returns
 * the patch level, or -1 if not found.
 */
static int rodata_patch(const struct bin_image *img, unsigned major, unsigned minor)
{
    struct bin_section sec;
    char prefix[16];
    int patch = -1;
    if (bin_image_section(img, ".rodata", &sec) < 0 || sec.size > RODATA_MAX)
        return -1;
    char *buf = malloc((size_t)sec.size + 1);
    if (!buf)
        return -1;
    long n = bin_image_section_read(img, ".rodata", buf, (size_t)sec.size);
    int plen = snprintf(prefix, sizeof prefix, "%u.%u.", major, minor);
    for (long i = 1; n > 0 && i + plen < n && patch < 0; i++) {
        char before = buf[i - 1];
        if ((before >= '0' && before <= '9') || before == '.' ||
            memcmp(buf + i, prefix, (size_t)plen) != 0)
            continue;
        long j = i + plen, v = 0;
        while (j < n && j - (i + plen) < 3 && buf[j] >= '0' && buf[j] <= '9')
            v = v * 10 + (buf[j++] - '0');
        if (j > i + plen && j < n && buf[j] == '\0')
            patch = (int)v;
    }
    free(buf);
    return patch;
}

/* The target's PY_VERSION_HEX from Py_Version (exported from 3.11 on), or
 * major.minor from the file name with patch 0; 0 if neither tells. *exact
 * says whether the patch level is known. */
static uint32_t image_version(struct pys_session *s, const struct bin_image *img, uint64_t bias,
                              unsigned major, unsigned minor, int *exact)
{
    uint64_t sym, hex = 0;
    *exact = 0;
    if (bin_image_symbol(img, "Py_Version", &sym) == 0 &&
        mem_read(&s->mem, sym + bias, &hex, sizeof hex) == 0 && (hex >> 24) != 0 &&
        (hex >> 32) == 0) {
        *exact = 1;
        return (uint32_t)hex;
    }
    if (major) {
        int patch = rodata_patch(img, major, minor);
        *exact = patch >= 0;
        return (uint32_t)(major << 24 | minor << 16 | (patch >= 0 ? (unsigned)patch : 0) << 8 |
                          0xf0);
    }
    return 0;
}

static void version_text(uint32_t v, int exact, char *buf, size_t len)
{
    if (v == 0)
        snprintf(buf, len, "(unknown version)");
    else if (exact)
        snprintf(buf, len, "%u.%u.%u", v >> 24, (v >> 16) & 0xff, (v >> 8) & 0xff);
    else
        snprintf(buf, len, "%u.%u", v >> 24, (v >> 16) & 0xff);
}

#define SUPPORTED "supported: 3.8 to 3.15"

/*
 * Check that the offsets fit the runtime at `runtime`: an interpreter list
 * that is initialised, and a first thread state that points back at its
 * interpreter. For versions without debug offsets this is what tells a
 * build whose layout differs from pystrobe's tables.
 */
static int check_runtime(struct pys_session *s, uint64_t runtime, const char *path,
                         struct verdict *v)
{
    uint64_t head = 0, back = 0;
    struct cpy_interp in;
    int rc = cpy_runtime_first_interp(&s->mem, &s->off, runtime, &head);
    if (rc < 0)
        return rc;
    if (head == 0) {
        note(v, PYS_E_NOTPYTHON, "the Python runtime in %s is not initialised (starting or "
                                 "exiting?)", path);
        return PYS_E_NOTPYTHON;
    }
    if ((rc = cpy_interp_read(&s->mem, &s->off, runtime, head, &in)) < 0) {
        if (rc == PYS_E_EXITED)
            return rc;
        note(v, PYS_E_NOTPYTHON, "the interpreter list of %s is unreadable", path);
        return PYS_E_NOTPYTHON;
    }
    if (in.threads_head != 0 &&
        (mem_read_u64(&s->mem, in.threads_head + s->off.thread_state.interp, &back) < 0 ||
         back != head)) {
        note(v, PYS_E_VERSION, "has a Python %u.%u runtime whose layout does not match "
                               "pystrobe's tables (an unusual build?)",
             s->off.version >> 24, (s->off.version >> 16) & 0xff);
        return PYS_E_VERSION;
    }
    return 0;
}

/* Try one image; 0 if it holds the runtime (and s is filled), else a code
 * with the reason noted in v. */
static int try_image(struct pys_session *s, const struct plat_map *map, struct verdict *v)
{
    struct bin_image *img = NULL;
    struct bin_section sec;
    uint8_t *table = NULL;
    uint64_t value;
    unsigned major = 0, minor = 0;
    int fd = -1, rc;

    name_version(map->path, &major, &minor);
    fd = plat_map_open(s->pid, map);
    if (fd < 0) {
        rc = fd;
        if (rc == PYS_E_PERM)
            goto out;
        note(v, PYS_E_NOTPYTHON, "cannot open %s: %s", map->path, pys_strerror(rc));
        goto out;
    }
    if ((rc = bin_image_open(fd, &img)) < 0) {
        note(v, PYS_E_NOTPYTHON, "%s is not a readable ELF image", map->path);
        goto out;
    }
    uint64_t bias = map->start - bin_image_base_vaddr(img);
    uint64_t dummy;
    int is_python = bin_image_symbol(img, "Py_Initialize", &dummy) == 0 ||
                    bin_image_symbol(img, "_PyRuntime", &dummy) == 0;
    if (!is_python) {
        rc = PYS_E_NOTPYTHON;
        goto out;
    }
    int exact;
    uint32_t version = image_version(s, img, bias, major, minor, &exact);
    char ver[64];
    version_text(version, exact, ver, sizeof ver);
    uint64_t runtime = 0;
    int have_table = 0;
    if (bin_image_section(img, ".PyRuntime", &sec) == 0) {
        /* 3.13+: the runtime starts with _Py_DebugOffsets. */
        size_t want = cpy_offsets_max_table_size();
        if (want > sec.size)
            want = (size_t)sec.size;
        table = malloc(want);
        rc = PYS_E_NOMEM;
        if (!table)
            goto out;
        runtime = bias + sec.addr;
        if ((rc = mem_read(&s->mem, runtime, table, want)) < 0) {
            if (rc != PYS_E_EXITED && rc != PYS_E_PERM)
                note(v, PYS_E_NOTPYTHON, "cannot read the runtime of %s at 0x%llx", map->path,
                     (unsigned long long)runtime);
            goto out;
        }
        char why[200];
        rc = cpy_offsets_parse(table, want, &s->off, why, sizeof why);
        if (rc == PYS_E_VERSION) {
            note(v, rc, "runs Python %s: %s (" SUPPORTED ")", ver, why);
            goto out;
        }
        if (rc < 0 && rc != PYS_E_NOTPYTHON) {
            note(v, rc, "%s: %s", map->path, why);
            goto out;
        }
        have_table = rc == 0;
    }
    if (!have_table) {
        /* 3.8-3.12: _PyRuntime by symbol, offsets from pystrobe's tables. */
        char why[200];
        if (bin_image_symbol(img, "_PyRuntime", &value) < 0 || version == 0) {
            rc = PYS_E_VERSION;
            note(v, rc, "runs Python %s, which is not supported (" SUPPORTED ")", ver);
            goto out;
        }
        runtime = bias + value;
        rc = cpy_offsets_for_version(version, &s->off, why, sizeof why);
        if (rc < 0) {
            note(v, PYS_E_VERSION, "runs Python %s, which is not supported (" SUPPORTED ")", ver);
            rc = PYS_E_VERSION;
            goto out;
        }
    }
    if ((rc = check_runtime(s, runtime, map->path, v)) < 0)
        goto out;
    version_text(s->off.version, exact || have_table, s->version_text, sizeof s->version_text);
    memset(&s->sym, 0, sizeof s->sym);
    if (bin_image_symbol(img, "PyCode_Type", &value) == 0)
        s->sym.code_type = value + bias;
    if (bin_image_symbol(img, "_Py_NoneStruct", &value) == 0)
        s->sym.none = value + bias;
    s->runtime = runtime;
    s->image_path = strdup(map->path);
    rc = s->image_path ? 0 : PYS_E_NOMEM;
out:
    free(table);
    if (img)
        bin_image_free(img);
    if (fd >= 0)
        close(fd);
    return rc;
}

int prof_attach_runtime(struct pys_session *s)
{
    struct plat_maps maps = {0};
    struct verdict v = {0, ""};
    char exe[512] = "";
    int rc;

    if ((rc = plat_proc_check(s->pid)) < 0) {
        if (rc == PYS_E_EXITED)
            return prof_fail(s, rc, "process %d has exited", s->pid);
        return prof_fail(s, rc, "no such process: %d", s->pid);
    }
    if ((rc = plat_maps_read(s->pid, &maps)) < 0) {
        if (rc == PYS_E_PERM)
            return prof_fail(s, rc, "permission denied reading process %d", s->pid);
        return prof_fail(s, rc, "cannot read the memory map of process %d: %s", s->pid,
                         pys_strerror(rc));
    }
    rc = PYS_E_NOTPYTHON;
    for (size_t i = 0; i < maps.n; i++) {
        const struct plat_map *m = &maps.v[i];
        unsigned ma, mi;
        if (!m->path || m->offset != 0 || !name_version(m->path, &ma, &mi))
            continue;
        /* Each file once, at its lowest mapping (the one at offset 0). */
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = maps.v[j].path && maps.v[j].offset == 0 &&
                   strcmp(maps.v[j].path, m->path) == 0;
        if (seen)
            continue;
        rc = try_image(s, m, &v);
        if (rc == 0 || rc == PYS_E_EXITED || rc == PYS_E_PERM || rc == PYS_E_NOMEM)
            break;
    }
    plat_maps_release(&maps);
    if (rc == 0)
        return 0;
    if (rc == PYS_E_EXITED)
        return prof_fail(s, rc, "process %d exited", s->pid);
    if (rc == PYS_E_PERM)
        return prof_fail(s, rc, "permission denied reading process %d", s->pid);
    if (rc == PYS_E_NOMEM)
        return prof_fail(s, rc, "out of memory");
    if (v.code == PYS_E_VERSION)
        return prof_fail(s, v.code, "process %d %s", s->pid, v.detail);
    if (plat_proc_exe(s->pid, exe, sizeof exe) < 0)
        snprintf(exe, sizeof exe, "executable unknown");
    if (v.code != 0)
        return prof_fail(s, PYS_E_NOTPYTHON, "process %d is not Python (%s): %s", s->pid, exe,
                         v.detail);
    return prof_fail(s, PYS_E_NOTPYTHON, "process %d is not Python (%s)", s->pid, exe);
}
