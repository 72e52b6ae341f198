/*
 * attach: find the CPython runtime in a process and validate it.
 *
 * Candidates are the files mapped in the target from offset 0, each once;
 * a file is CPython by what it holds (prof_probe_file: the .PyRuntime
 * section, _PyRuntime, Py_Initialize), never by its name, so a renamed
 * interpreter, a renamed libpython and an embedder linking libpython
 * statically are all found. For each, the ELF file is opened as the target
 * sees it (/proc/PID/map_files, so chroots and containers work), the
 * runtime located, and the _Py_DebugOffsets at its start read from the
 * target's memory and validated. A candidate must also have an initialised
 * interpreter list: a library mapped a second time (ctypes) has a valid
 * cookie but no interpreters. When nothing passes, the error says why: not
 * Python at all (naming the executable), or a Python whose version is not
 * supported (naming the executable and the version). A core file's
 * mappings (coredump.c) go through the same search, their files opened by
 * the paths its NT_FILE note names.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "binfmt/elf.h"
#include "core/core.h"
#include "platform/platform.h"
#include "util/pyversion.h"

/* What the search learned about one candidate that was not accepted. */
struct verdict {
    int code; /* 0 = none yet */
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

/* The target's PY_VERSION_HEX from Py_Version (exported from 3.11 on), else
 * from the PY_VERSION string in the file; 0 if neither tells. *exact says
 * whether the patch level is known. */
static uint32_t image_version(struct pys_session *s, const struct bin_image *img,
                              const struct prof_probe *pi, uint64_t bias, int *exact)
{
    uint64_t hex = 0;
    *exact = 0;
    if (pi->has_version_sym && mem_read(&s->mem, pi->version_sym + bias, &hex, sizeof hex) == 0 &&
        (hex >> 24) != 0 && (hex >> 32) == 0) {
        *exact = 1;
        return (uint32_t)hex;
    }
    uint32_t v = prof_probe_rodata_version(img);
    *exact = v != 0;
    return v;
}

static void version_text(uint32_t v, int exact, char *buf, size_t len)
{
    if (v == 0 || exact)
        util_python_version_text(v, buf, len);
    else
        snprintf(buf, len, "%u.%u", v >> 24, (v >> 16) & 0xff);
}

#define SUPPORTED "supported: 3.7 to 3.15"

/* Why a version pystrobe has no layout for is refused: what it lacks that
 * the walk stands on, for the versions py-spy users may bring. */
static const char *unsupported_why(uint32_t v)
{
    unsigned major = v >> 24, minor = (v >> 16) & 0xff;
    if (major == 2)
        return "Python 2 has no _PyRuntime, and its strings and code objects are laid out "
               "otherwise";
    if (major == 3 && minor <= 6)
        return "3.6 and older have no _PyRuntime: their interpreter list, GIL holder and "
               "exception state are private variables that stripped builds do not name";
    return "no layout of it is known";
}

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
        note(v, PYS_E_NOTPYTHON,
             "the Python runtime in %s is not initialised (starting or "
             "exiting?)",
             path);
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
        note(v, PYS_E_VERSION,
             "has a Python %u.%u runtime whose layout does not match "
             "pystrobe's tables (an unusual build?)",
             s->off.version >> 24, (s->off.version >> 16) & 0xff);
        return PYS_E_VERSION;
    }
    return 0;
}

/* 3.13+: the runtime at addr starts with _Py_DebugOffsets; parse them
 * into s->off. 0 when they describe a supported version, PYS_E_NOTPYTHON
 * when they are no table (the caller tries the symbol), else an error
 * (noted in v where it says more than its code). */
static int offsets_from_table(struct pys_session *s, const struct plat_map *map, uint64_t addr,
                              uint64_t section_size, const char *ver, struct verdict *v)
{
    size_t want = cpy_offsets_max_table_size();
    if (want > section_size)
        want = (size_t)section_size;
    uint8_t *table = malloc(want);
    if (!table)
        return PYS_E_NOMEM;
    int rc = mem_read(&s->mem, addr, table, want);
    if (rc < 0) {
        if (rc != PYS_E_EXITED && rc != PYS_E_PERM)
            note(v, PYS_E_NOTPYTHON, "cannot read the runtime of %s at 0x%llx", map->path,
                 (unsigned long long)addr);
        free(table);
        return rc;
    }
    char why[200];
    rc = cpy_offsets_parse(table, want, &s->off, why, sizeof why);
    free(table);
    if (rc == PYS_E_VERSION)
        note(v, rc, "runs Python %s: %s (" SUPPORTED ")", ver, why);
    else if (rc < 0 && rc != PYS_E_NOTPYTHON)
        note(v, rc, "%s: %s", map->path, why);
    return rc;
}

/* 3.8-3.12: _PyRuntime by symbol, offsets from pystrobe's tables, into
 * s->off; an error is noted in v. */
static int offsets_from_symbol(struct pys_session *s, const struct plat_map *map,
                               const struct prof_probe *pi, uint32_t version, const char *ver,
                               struct verdict *v)
{
    char why[200];
    if (pi->has_section && cpy_offsets_expects_table(version)) {
        /* A process that is starting may map the file before its data:
         * not initialised yet, which `run` waits out. */
        note(v, PYS_E_NOTPYTHON, "the Python %s runtime in %s has no debug offsets yet (starting?)",
             ver, map->path);
        return PYS_E_NOTPYTHON;
    }
    if (!pi->has_runtime_sym || version == 0) {
        note(v, PYS_E_VERSION, "runs Python %s, which is not supported: %s (" SUPPORTED ")", ver,
             version ? unsupported_why(version) : "its version could not be read");
        return PYS_E_VERSION;
    }
    if (cpy_offsets_for_version(version, &s->off, why, sizeof why) < 0) {
        note(v, PYS_E_VERSION, "runs Python %s, which is not supported: %s (" SUPPORTED ")", ver,
             unsupported_why(version));
        return PYS_E_VERSION;
    }
    return 0;
}

/* Try one image; 0 if it holds the runtime (and s is filled), else a code:
 * PYS_E_NOTPYTHON for a file that is not CPython (nothing noted: a process
 * maps many such files) or whose runtime is unusable (the reason noted in
 * v), PYS_E_VERSION (noted), or PYS_E_EXITED, PYS_E_PERM, PYS_E_NOMEM. */
static int try_image(struct pys_session *s, const struct plat_map *map, prof_map_opener open_map,
                     void *ctx, struct verdict *v)
{
    struct bin_image *img = NULL;
    struct prof_probe pi;
    uint64_t value;
    int fd = -1, rc;

    fd = open_map(ctx, map);
    if (fd < 0) {
        /* Unopenable (a device, a file gone with no map_files): whatever it
         * is cannot be read, so it is not the runtime we can use. */
        rc = fd == PYS_E_NOPROC ? PYS_E_EXITED : fd == PYS_E_PERM ? fd : PYS_E_NOTPYTHON;
        goto out;
    }
    uint64_t size;
    if (plat_file_size(fd, &size) == 0 && size < PROF_PROBE_MIN_BYTES) {
        rc = PYS_E_NOTPYTHON;
        goto out;
    }
    if ((rc = bin_image_open(fd, &img)) < 0 || (rc = prof_probe_file(img, &pi)) < 0) {
        rc = rc == PYS_E_NOMEM ? rc : PYS_E_NOTPYTHON;
        goto out;
    }
    uint64_t bias = map->start - bin_image_base_vaddr(img);
    int exact;
    uint32_t version = image_version(s, img, &pi, bias, &exact);
    char ver[64];
    version_text(version, exact, ver, sizeof ver);
    uint64_t runtime = 0;
    int have_table = 0;
    if (pi.has_section) {
        rc = offsets_from_table(s, map, bias + pi.section_addr, pi.section_size, ver, v);
        if (rc < 0 && rc != PYS_E_NOTPYTHON)
            goto out;
        have_table = rc == 0;
        runtime = bias + pi.section_addr;
    }
    if (!have_table) {
        if ((rc = offsets_from_symbol(s, map, &pi, version, ver, v)) < 0)
            goto out;
        runtime = bias + pi.runtime_sym;
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
    if (img)
        bin_image_free(img);
    if (fd >= 0)
        close(fd);
    return rc;
}

/* The files of maps that may hold the runtime, each file once (by device
 * and inode, or by path where the inode is 0), at its lowest mapping from
 * offset 0: indexes into maps->v, *n of them; NULL if out of memory. */
static size_t *candidates(const struct plat_maps *maps, size_t *n)
{
    size_t *cand = malloc((maps->n ? maps->n : 1) * sizeof *cand);
    size_t ncand = 0;
    if (!cand)
        return NULL;
    for (size_t i = 0; i < maps->n; i++) {
        const struct plat_map *m = &maps->v[i];
        int seen = 0;
        if (!m->path || m->path[0] != '/' || m->offset != 0)
            continue;
        for (size_t j = 0; j < ncand && !seen; j++) {
            const struct plat_map *o = &maps->v[cand[j]];
            seen = o->inode == m->inode && o->dev_major == m->dev_major &&
                   o->dev_minor == m->dev_minor && (m->inode != 0 || strcmp(o->path, m->path) == 0);
        }
        if (!seen)
            cand[ncand++] = i;
    }
    *n = ncand;
    return cand;
}

/*
 * Try the candidate files of maps, opened by open_map: 0 (s attached), or
 * the code the search ended with, what was learnt in *v, and the first file
 * that could not be opened for want of rights in perm.
 */
static int search_maps(struct pys_session *s, const struct plat_maps *maps,
                       prof_map_opener open_map, void *ctx, struct verdict *v, char *perm,
                       size_t permlen)
{
    /* File names decide nothing; those that say python only go first,
     * which finds the usual interpreter and libpython without opening the
     * hundreds of other libraries a process may map. Work: one probe per
     * distinct file, cheapest tests first. */
    size_t ncand = 0;
    size_t *cand = candidates(maps, &ncand);
    int rc = PYS_E_NOTPYTHON;
    if (!cand)
        return PYS_E_NOMEM;
    for (int pass = 0; pass < 2 && rc != 0; pass++) {
        for (size_t j = 0; j < ncand; j++) {
            const struct plat_map *m = &maps->v[cand[j]];
            if ((strstr(base_name(m->path), "python") != NULL) != (pass == 0))
                continue;
            rc = try_image(s, m, open_map, ctx, v);
            if (rc == PYS_E_PERM) {
                /* Reported only if no file holds anything like CPython. */
                if (!perm[0])
                    snprintf(perm, permlen, "%s", m->path);
                continue;
            }
            if (rc == 0 || rc == PYS_E_EXITED || rc == PYS_E_NOMEM)
                break;
        }
        if (rc == PYS_E_EXITED || rc == PYS_E_NOMEM)
            break;
    }
    free(cand);
    if (rc == PYS_E_PERM)
        rc = PYS_E_NOTPYTHON;
    /* A CPython file that failed (not initialised yet, say) makes the
     * process Python; only with none may the unreadable file be the one. */
    if (rc == PYS_E_NOTPYTHON && perm[0] && v->code == 0)
        rc = PYS_E_PERM;
    return rc;
}

static int open_live(void *ctx, const struct plat_map *m)
{
    const struct pys_session *s = ctx;
    return plat_map_open(s->pid, m);
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
    /* A child of vfork shows its parent's memory until it execs: its
     * program is not yet its own (run it again a moment later). */
    if (plat_proc_shares_parent_vm(s->pid) == 1)
        return prof_fail(s, PYS_E_NOTPYTHON,
                         "process %d shares its parent's memory (vfork, before its exec)", s->pid);
    if ((rc = plat_maps_read(s->pid, &maps)) < 0) {
        if (rc == PYS_E_PERM)
            return prof_fail(s, rc, "permission denied reading process %d", s->pid);
        return prof_fail(s, rc, "cannot read the memory map of process %d: %s", s->pid,
                         pys_strerror(rc));
    }
    char perm[256] = ""; /* the first file that could not be opened for want of rights */
    rc = search_maps(s, &maps, open_live, s, &v, perm, sizeof perm);
    plat_maps_release(&maps);
    if (rc == 0)
        return 0;
    if (rc == PYS_E_EXITED)
        return prof_fail(s, rc, "process %d exited", s->pid);
    if (rc == PYS_E_PERM && perm[0])
        return prof_fail(s, rc, "permission denied reading process %d (%s)", s->pid, perm);
    if (rc == PYS_E_PERM)
        return prof_fail(s, rc, "permission denied reading process %d", s->pid);
    if (rc == PYS_E_NOMEM)
        return prof_fail(s, rc, "out of memory");
    if (plat_proc_exe(s->pid, exe, sizeof exe) < 0)
        snprintf(exe, sizeof exe, "executable unknown");
    if (v.code == PYS_E_VERSION)
        return prof_fail(s, v.code, "process %d (%s) %s", s->pid, exe, v.detail);
    if (v.code != 0)
        return prof_fail(s, PYS_E_NOTPYTHON, "process %d is not Python (%s): %s", s->pid, exe,
                         v.detail);
    return prof_fail(s, PYS_E_NOTPYTHON, "process %d is not Python (%s)", s->pid, exe);
}

int prof_attach_maps(struct pys_session *s, const struct plat_maps *maps, prof_map_opener open_map,
                     void *ctx, const char *what, const char *hint)
{
    struct verdict v = {0, ""};
    char perm[256] = "";
    int rc = search_maps(s, maps, open_map, ctx, &v, perm, sizeof perm);
    if (rc == 0)
        return 0;
    if (rc == PYS_E_NOMEM)
        return prof_fail(s, rc, "out of memory");
    if (rc == PYS_E_PERM)
        return prof_fail(s, rc, "%s: permission denied reading %s", what, perm);
    if (v.code == PYS_E_VERSION)
        return prof_fail(s, v.code, "%s %s", what, v.detail);
    if (v.code != 0)
        return prof_fail(s, PYS_E_NOTPYTHON, "%s is not of a Python process: %s%s", what, v.detail,
                         hint);
    return prof_fail(s, PYS_E_NOTPYTHON,
                     "%s is not of a Python process (no CPython runtime in the files it maps)%s",
                     what, hint);
}
