/*
 * coredump: sessions on core files. The core is mapped read-only and parsed
 * (binfmt/corefile.c); its memory becomes regions of a memory image
 * (mem/source_image.c), so everything above reads it as it reads a live
 * process or a recorded image. A dumper leaves out pages it can have again
 * from a file (text and read-only data never written): those regions come
 * from the files the core's NT_FILE note names, each used only if its first
 * page is the one the core holds of it (the kernel and gdb dump the first
 * page of every mapped ELF file), so that a file changed or replaced since,
 * or the host's file of the same name where the process ran in another
 * root, is never taken for the process's. The runtime is then found among
 * those files by the attach search (attach.c).
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "binfmt/corefile.h"
#include "core/core.h"

/* Bytes of a file's first page compared with the core's copy. */
#define MATCH_BYTES 4096u
/* Room for notes on what could not be had; the rest is counted. */
#define NOTES_MAX 2048

/* One distinct file the core's mappings name. Files stay mapped, not
 * open: a process may map more files than this one may hold open. */
struct core_file {
    const char *path;   /* as the process named it */
    char *host;         /* where it was looked for or found (root, --executable) */
    const uint8_t *map; /* NULL unless usable */
    size_t len;
    size_t first; /* its lowest mapping from offset 0 (NT_FILE entry), or SIZE_MAX */
    int needed;   /* some of its memory is not in the core */
    char why[96]; /* why it is not usable ("" usable) */
};

struct prof_core {
    char *path;
    uint8_t *map; /* the core's bytes */
    size_t len;
    struct bin_core bc;
    struct core_file *cf;
    size_t ncf;
    size_t *file_cf;  /* per NT_FILE entry, its core_file */
    size_t *by_start; /* NT_FILE entries by start address */
    struct mem_region *regions;
    size_t nregions, capregions;
    const char *exe; /* the executable's path as named, "" unknown */
    char notes[NOTES_MAX];
    size_t notes_left;
};

static void add_note(struct prof_core *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void add_note(struct prof_core *c, const char *fmt, ...)
{
    size_t used = strlen(c->notes);
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (used + strlen(line) + 2 < sizeof c->notes)
        snprintf(c->notes + used, sizeof c->notes - used, "%s\n", line);
    else
        c->notes_left++;
}

static int add_region(struct prof_core *c, uint64_t addr, const uint8_t *data, size_t len)
{
    return mem_regions_append(&c->regions, &c->nregions, &c->capregions,
                              (struct mem_region){addr, data, len, NULL});
}

static int cmp_path(const void *a, const void *b, void *ctx)
{
    const struct bin_core_file *f = ctx;
    return strcmp(f[*(const size_t *)a].path, f[*(const size_t *)b].path);
}

static int cmp_start(const void *a, const void *b, void *ctx)
{
    const struct bin_core_file *f = ctx;
    uint64_t x = f[*(const size_t *)a].start, y = f[*(const size_t *)b].start;
    return x < y ? -1 : x > y;
}

/* The distinct files (cf), each entry's file (file_cf), and the entries by
 * start address (by_start). */
static int index_files(struct prof_core *c)
{
    size_t n = c->bc.nfiles, *by_path = malloc((n ? n : 1) * sizeof *by_path);
    c->file_cf = malloc((n ? n : 1) * sizeof *c->file_cf);
    c->by_start = malloc((n ? n : 1) * sizeof *c->by_start);
    c->cf = calloc(n ? n : 1, sizeof *c->cf);
    if (!by_path || !c->file_cf || !c->by_start || !c->cf) {
        free(by_path);
        return PYS_E_NOMEM;
    }
    for (size_t i = 0; i < n; i++)
        by_path[i] = c->by_start[i] = i;
    qsort_r(by_path, n, sizeof *by_path, cmp_path, c->bc.files);
    qsort_r(c->by_start, n, sizeof *c->by_start, cmp_start, c->bc.files);
    for (size_t i = 0; i < n; i++) {
        const char *p = c->bc.files[by_path[i]].path;
        if (i == 0 || strcmp(p, c->cf[c->ncf - 1].path) != 0)
            c->cf[c->ncf++] = (struct core_file){.path = p, .first = SIZE_MAX};
        c->file_cf[by_path[i]] = c->ncf - 1;
    }
    free(by_path);
    for (size_t j = 0; j < n; j++) {
        size_t i = c->by_start[j];
        struct core_file *f = &c->cf[c->file_cf[i]];
        if (c->bc.files[i].offset == 0 && f->first == SIZE_MAX)
            f->first = i;
    }
    /* The executable: the file mapped where the process began. */
    c->exe = "";
    for (size_t i = 0; i < n && c->bc.entry; i++)
        if (c->bc.entry >= c->bc.files[i].start && c->bc.entry < c->bc.files[i].end)
            c->exe = c->bc.files[i].path;
    return 0;
}

/* The segment holding addr's first byte in the core, or NULL. */
static const struct bin_core_segment *segment_at(const struct prof_core *c, uint64_t addr)
{
    size_t lo = 0, hi = c->bc.nsegs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct bin_core_segment *s = &c->bc.segs[mid];
        if (addr < s->vaddr)
            hi = mid;
        else if (addr - s->vaddr >= s->memsz)
            lo = mid + 1;
        else
            return s;
    }
    return NULL;
}

/* Is the file mapped in f the one the process mapped? Where the core holds
 * the first page of its lowest mapping from offset 0, the same bytes. */
static int file_matches(const struct prof_core *c, const struct core_file *f, const uint8_t *map,
                        size_t len)
{
    if (f->first == SIZE_MAX)
        return 1;
    const struct bin_core_file *e = &c->bc.files[f->first];
    const struct bin_core_segment *s = segment_at(c, e->start);
    if (!s || s->vaddr != e->start || s->present == 0)
        return 1;
    size_t n = s->present < MATCH_BYTES ? (size_t)s->present : MATCH_BYTES;
    return n <= len && memcmp(c->map + s->offset, map, n) == 0;
}

/* Map the file at host into f if it is the one the process mapped (file k
 * of c): 0, or -1 with f->why set. Only regular files are opened (opening
 * a device can act on it). */
static int try_file(struct prof_core *c, struct core_file *f, const char *host)
{
    struct stat st;
    if (stat(host, &st) != 0) {
        snprintf(f->why, sizeof f->why, "%s", strerror(errno));
        return -1;
    }
    int fd = S_ISREG(st.st_mode) ? open(host, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC) : -1;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
        snprintf(f->why, sizeof f->why, "%s",
                 fd < 0 && S_ISREG(st.st_mode) ? strerror(errno) : "not a regular file, or empty");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    size_t len = (size_t)st.st_size;
    void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);
    if (m == MAP_FAILED) {
        snprintf(f->why, sizeof f->why, "cannot be mapped: %s", strerror(err));
        return -1;
    }
    if (!file_matches(c, f, m, len)) {
        snprintf(f->why, sizeof f->why, "is not the file the process mapped");
        munmap(m, len);
        return -1;
    }
    f->map = m;
    f->len = len;
    f->why[0] = '\0';
    return 0;
}

/*
 * Open and map file k: the executable at exe if given; else under root
 * (if given) and then as named: a core gcore made from outside a chroot
 * names the files as seen from outside, the kernel's as seen inside.
 * f->host is where it was found, or the first place looked at.
 */
static void open_file(struct prof_core *c, size_t k, const char *exe, const char *root)
{
    struct core_file *f = &c->cf[k];
    char *under = NULL;
    if (exe && c->exe[0] && strcmp(f->path, c->exe) == 0) {
        f->host = strdup(exe);
    } else {
        if (root && f->path[0] == '/') {
            size_t n = strlen(root) + strlen(f->path) + 1;
            if ((under = malloc(n)))
                snprintf(under, n, "%s%s", root, f->path);
        }
        f->host = under ? under : strdup(f->path);
    }
    if (!f->host) {
        snprintf(f->why, sizeof f->why, "out of memory");
        return;
    }
    if (try_file(c, f, f->host) == 0 || !under)
        return;
    char why[sizeof f->why];
    memcpy(why, f->why, sizeof why);
    char *named = strdup(f->path);
    if (named && try_file(c, f, named) == 0) {
        free(f->host);
        f->host = named;
        return;
    }
    free(named);
    memcpy(f->why, why, sizeof why);
}

/* Regions for [a, b), which the core does not hold, from the files mapped
 * there; bytes no usable file holds stay unreadable. */
static int fill_from_files(struct prof_core *c, uint64_t a, uint64_t b)
{
    size_t n = c->bc.nfiles, lo = 0, hi = n;
    /* The first entry starting after a; the one before may cover a. */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->bc.files[c->by_start[mid]].start <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint64_t cur = a;
    for (size_t j = lo ? lo - 1 : 0; j < n && cur < b; j++) {
        const struct bin_core_file *e = &c->bc.files[c->by_start[j]];
        if (e->start >= b)
            break;
        uint64_t x = e->start > cur ? e->start : cur, y = e->end < b ? e->end : b;
        if (x >= y)
            continue;
        struct core_file *f = &c->cf[c->file_cf[c->by_start[j]]];
        uint64_t off = e->offset + (x - e->start);
        f->needed = 1;
        if (f->map && off >= e->offset && off < f->len) {
            uint64_t k = y - x < f->len - off ? y - x : f->len - off;
            int rc = add_region(c, x, f->map + off, (size_t)k);
            if (rc < 0)
                return rc;
        }
        cur = y;
    }
    return 0;
}

/* The first segment ending after addr, or NULL. */
static const struct bin_core_segment *segment_after(const struct prof_core *c, uint64_t addr)
{
    size_t lo = 0, hi = c->bc.nsegs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct bin_core_segment *s = &c->bc.segs[mid];
        if (addr - s->vaddr < s->memsz || addr < s->vaddr)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo < c->bc.nsegs ? &c->bc.segs[lo] : NULL;
}

/* Mapped files no segment covers (gdb leaves the mappings it does not
 * dump out of its core): from the files. Entries overlapping an earlier
 * one are taken from its end, so that every address is visited once. */
static int fill_gaps(struct prof_core *c)
{
    uint64_t done = 0;
    for (size_t j = 0; j < c->bc.nfiles; j++) {
        const struct bin_core_file *e = &c->bc.files[c->by_start[j]];
        uint64_t cur = e->start > done ? e->start : done;
        while (cur < e->end) {
            const struct bin_core_segment *s = segment_after(c, cur);
            uint64_t stop = !s || s->vaddr >= e->end ? e->end : s->vaddr;
            int rc = cur < stop ? fill_from_files(c, cur, stop) : 0;
            if (rc < 0)
                return rc;
            if (stop == e->end || s->memsz > UINT64_MAX - s->vaddr)
                break;
            cur = s->vaddr + s->memsz;
        }
        if (e->end > done)
            done = e->end;
    }
    return 0;
}

/* The regions: what the core holds, and what it left out from the files:
 * the rest of segments the core holds only in part, and mappings it has no
 * segment for. */
static int build_regions(struct prof_core *c)
{
    for (size_t i = 0; i < c->bc.nsegs; i++) {
        const struct bin_core_segment *s = &c->bc.segs[i];
        /* Memory the process could not read reads as unmapped, as live. */
        if (!(s->flags & PF_R))
            continue;
        int rc = add_region(c, s->vaddr, c->map + s->offset, (size_t)s->present);
        /* Bytes the core should have held (truncated) were written, if the
         * mapping is writable: the file's are not theirs. */
        uint64_t from = (s->flags & PF_W) ? s->filesz : s->present;
        if (rc == 0 && from < s->memsz)
            rc = fill_from_files(c, s->vaddr + from, s->vaddr + s->memsz);
        if (rc < 0)
            return rc;
    }
    return fill_gaps(c);
}

static void note_problems(struct prof_core *c)
{
    if (c->bc.missing)
        add_note(c, "the core is truncated: %llu bytes of its memory are missing",
                 (unsigned long long)c->bc.missing);
    if (c->bc.nfiles == 0)
        add_note(c, "the core names no mapped files (no NT_FILE note)");
    for (size_t k = 0; k < c->ncf; k++) {
        const struct core_file *f = &c->cf[k];
        int exe = c->exe[0] && strcmp(f->path, c->exe) == 0;
        if (!f->why[0] || (!f->needed && !exe))
            continue;
        if (!f->host || strcmp(f->host, f->path) == 0)
            add_note(c, "%s %s: %s", exe ? "the executable" : "the file", f->path, f->why);
        else
            add_note(c, "%s %s (as %s): %s", exe ? "the executable" : "the file", f->path, f->host,
                     f->why);
    }
    if (c->notes_left)
        add_note(c, "(and %zu more)", c->notes_left);
}

/* Map and parse the core at path; 0 and *out, or a code with err set. */
static int core_load(const char *path, const char *exe, const char *root, struct prof_core **out,
                     char *err, size_t errlen)
{
    struct prof_core *c = calloc(1, sizeof *c);
    struct stat st;
    char why[256];
    int rc = PYS_E_NOMEM;
    if (!c || !(c->path = strdup(path)))
        goto fail;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
        snprintf(err, errlen, "cannot read core %s: %s", path,
                 fd < 0 ? strerror(errno) : "not a regular file, or empty");
        if (fd >= 0)
            close(fd);
        rc = PYS_E_IO;
        goto fail;
    }
    c->len = (size_t)st.st_size;
    /* Private and writable: bin_core_parse may clear a header field (in
     * this copy, never in the file). */
    c->map = mmap(NULL, c->len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    close(fd);
    if (c->map == MAP_FAILED) {
        c->map = NULL;
        snprintf(err, errlen, "cannot map core %s: %s", path, strerror(errno));
        rc = PYS_E_IO;
        goto fail;
    }
    if ((rc = bin_core_parse(c->map, c->len, &c->bc, why, sizeof why)) < 0) {
        snprintf(err, errlen, "%s: %s", path, rc == PYS_E_NOMEM ? "out of memory" : why);
        goto fail;
    }
    if ((rc = index_files(c)) < 0)
        goto fail;
    for (size_t k = 0; k < c->ncf; k++)
        open_file(c, k, exe, root);
    if ((rc = build_regions(c)) < 0)
        goto fail;
    note_problems(c);
    *out = c;
    return 0;
fail:
    if (rc == PYS_E_NOMEM)
        snprintf(err, errlen, "out of memory");
    prof_core_free(c);
    return rc;
}

void prof_core_free(struct prof_core *c)
{
    if (!c)
        return;
    for (size_t k = 0; k < c->ncf; k++) {
        if (c->cf[k].map)
            munmap((void *)(uintptr_t)c->cf[k].map, c->cf[k].len);
        free(c->cf[k].host);
    }
    if (c->map)
        munmap(c->map, c->len);
    bin_core_release(&c->bc);
    free(c->cf);
    free(c->file_cf);
    free(c->by_start);
    free(c->regions);
    free(c->path);
    free(c);
}

/* The file the process mapped as path, opened again where it was found and
 * only if it is still the one it mapped (cf is in the order of the paths). */
static int open_core_path(void *ctx, const char *path)
{
    const struct prof_core *c = ctx;
    size_t lo = 0, hi = c->ncf;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int d = strcmp(path, c->cf[mid].path);
        if (d == 0) {
            const struct core_file *f = &c->cf[mid];
            int fd = f->map ? open(f->host, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC) : -1;
            return fd >= 0 ? fd : PYS_E_NOTFOUND;
        }
        if (d < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return PYS_E_NOTFOUND;
}

static int open_core_file(void *ctx, const struct plat_map *m)
{
    return open_core_path(ctx, m->path);
}

const char *prof_core_path_at(const struct prof_core *c, uint64_t addr)
{
    /* The last mapping starting at or below addr (mappings do not overlap). */
    size_t lo = 0, hi = c->bc.nfiles;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->bc.files[c->by_start[mid]].start <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    const struct bin_core_file *e = &c->bc.files[c->by_start[lo - 1]];
    return addr < e->end ? e->path : NULL;
}

int prof_core_unwinder(struct prof_core *c, struct plat_unwinder **out, char *err, size_t errlen)
{
    return plat_unwinder_new_core(c->path, open_core_path, c, out, err, errlen);
}

int prof_attach_core(struct pys_session *s, struct prof_core *c)
{
    struct plat_maps maps = {0};
    char what[600], hint[600] = "";
    /* The candidates: each usable file once, at its lowest mapping from 0. */
    maps.v = calloc(c->ncf ? c->ncf : 1, sizeof *maps.v);
    if (!maps.v)
        return prof_fail(s, PYS_E_NOMEM, "out of memory");
    for (size_t k = 0; k < c->ncf; k++) {
        if (!c->cf[k].map || c->cf[k].first == SIZE_MAX)
            continue;
        const struct bin_core_file *e = &c->bc.files[c->cf[k].first];
        maps.v[maps.n++] = (struct plat_map){.start = e->start,
                                             .end = e->end,
                                             .offset = 0,
                                             .perms = "r--p",
                                             .path = (char *)(uintptr_t)e->path};
    }
    snprintf(what, sizeof what, "core %s (%s)", c->path,
             c->exe[0]          ? c->exe
             : c->bc.command[0] ? c->bc.command
                                : "program unknown");
    /* Files it could not read may be where the runtime is. */
    for (size_t k = 0; k < c->ncf; k++) {
        const struct core_file *f = &c->cf[k];
        int exe = c->exe[0] && strcmp(f->path, c->exe) == 0;
        if (!f->map && (exe || strstr(f->path, "python")))
            snprintf(hint, sizeof hint,
                     "; %s %s: %s (give it with --executable, or the root it ran in with "
                     "--root)",
                     exe ? "its executable" : "its file", f->host ? f->host : f->path, f->why);
    }
    if (c->bc.missing) {
        size_t used = strlen(hint);
        snprintf(hint + used, sizeof hint - used,
                 "; the core is truncated (%llu bytes of its memory missing)",
                 (unsigned long long)c->bc.missing);
    }
    int rc = prof_attach_maps(s, &maps, open_core_file, c, what, hint);
    free(maps.v);
    return rc;
}

int pys_session_attach_core(pys_session **out, const char *core_path, const char *executable,
                            const char *root, const struct pys_options *opt, char *errtext,
                            size_t errlen)
{
    struct prof_core *c = NULL;
    char err[512] = "";
    if (!out || !core_path)
        return PYS_E_INVAL;
    if (executable && access(executable, R_OK) != 0) {
        if (errtext && errlen)
            snprintf(errtext, errlen, "cannot read the executable %s: %s", executable,
                     strerror(errno));
        return PYS_E_NOTFOUND;
    }
    int rc = core_load(core_path, executable, root, &c, err, sizeof err);
    if (rc < 0) {
        if (errtext && errlen)
            snprintf(errtext, errlen, "%s", err);
        return rc;
    }
    struct pys_session *s = NULL;
    struct pys_options o;
    memset(&o, 0, sizeof o);
    if (opt)
        o = *opt;
    o.cpu_state = 0; /* no process: no thread states in a /proc */
    struct mem_image src;
    mem_image_init(&src, c->regions, c->nregions);
    rc = prof_session_open_core(&s, &src.base, c, &o, errtext, errlen);
    if (rc < 0) {
        prof_core_free(c);
        return rc;
    }
    s->core = c;
    s->image_src = src;
    mem_set_source(&s->mem, &s->image_src.base);
    mem_set_source(&s->mem_idle, &s->image_src.base);
    *out = s;
    return 0;
}

int pys_core_info(const pys_session *s, struct pys_core_info *out)
{
    if (!s || !s->core || !out)
        return PYS_E_INVAL;
    const struct prof_core *c = s->core;
    *out = (struct pys_core_info){.pid = c->bc.pid,
                                  .signal = c->bc.signal,
                                  .command = c->bc.command,
                                  .executable = c->exe,
                                  .nthreads = c->bc.ntids,
                                  .tids = c->bc.tids,
                                  .notes = c->notes};
    return 0;
}
