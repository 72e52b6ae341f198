/*
 * corefile: an ELF core file's segments and notes, read with libelf.
 *
 * A core is untrusted input (a file anyone may hand over, perhaps cut
 * short): headers and notes go through libelf's checked accessors (which
 * bound every offset by the buffer's size), every count is bounded before
 * anything is allocated for it, every string must end inside its note, and
 * address arithmetic is checked for overflow. A segment running past the
 * end of the buffer is not an error: a truncated core still holds what it
 * holds, and `present` says how much.
 */
#include "binfmt/corefile.h"

#include <pystrobe/pystrobe.h>

#include <elf.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/procfs.h>

#include "util/bytes.h"
#include "util/errtext.h"

/* x86-64 Linux note types (the kernel's and gdb's, named "CORE"). */
#ifndef NT_FILE
#define NT_FILE 0x46494c45
#endif

/* NT_FILE: count, page size, count (start, end, page offset) triples, then
 * count NUL-terminated paths. Only the first such note counts. */
static int parse_files(struct bin_core *c, const uint8_t *d, size_t n, char *err, size_t errlen)
{
    if (c->files)
        return 0;
    if (n < 16)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "its NT_FILE note is too short (%zu bytes)",
                            n);
    uint64_t count = util_load_u64(d), page = util_load_u64(d + 8);
    if (page == 0 || (page & (page - 1)) != 0 || page > (1u << 30))
        return util_err_set(err, errlen, PYS_E_CORRUPT, "its NT_FILE note has page size %llu",
                            (unsigned long long)page);
    if (count > BIN_CORE_FILES_MAX || count > (n - 16) / 24)
        return util_err_set(err, errlen, PYS_E_CORRUPT,
                            "its NT_FILE note lists %llu files in %zu bytes",
                            (unsigned long long)count, n);
    size_t strs = 16 + (size_t)count * 24, slen = n - strs;
    c->paths = malloc(slen + 1);
    c->files = calloc(count ? count : 1, sizeof *c->files);
    if (!c->paths || !c->files)
        return PYS_E_NOMEM;
    memcpy(c->paths, d + strs, slen);
    c->paths[slen] = '\0';
    const char *p = c->paths, *end = c->paths + slen;
    for (size_t i = 0; i < count; i++) {
        const uint8_t *t = d + 16 + i * 24;
        struct bin_core_file *f = &c->files[i];
        f->start = util_load_u64(t);
        f->end = util_load_u64(t + 8);
        uint64_t pages = util_load_u64(t + 16);
        size_t l = strnlen(p, (size_t)(end - p));
        if (f->start >= f->end || pages > UINT64_MAX / page || p + l >= end)
            return util_err_set(err, errlen, PYS_E_CORRUPT,
                                "file %zu of its NT_FILE note is malformed", i);
        f->offset = pages * page;
        f->path = p;
        p += l + 1;
    }
    c->nfiles = (size_t)count;
    return 0;
}

static int add_thread(struct bin_core *c, const uint8_t *d, size_t n, size_t *cap)
{
    struct elf_prstatus pr;
    if (n < offsetof(struct elf_prstatus, pr_pid) + sizeof pr.pr_pid)
        return 0; /* not one of ours: a prstatus without its pid tells nothing */
    if (c->ntids >= BIN_CORE_THREADS_MAX)
        return PYS_E_CORRUPT;
    if (c->ntids == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        uint32_t *v = realloc(c->tids, ncap * sizeof *v);
        if (!v)
            return PYS_E_NOMEM;
        c->tids = v;
        *cap = ncap;
    }
    memcpy(&pr.pr_pid, d + offsetof(struct elf_prstatus, pr_pid), sizeof pr.pr_pid);
    if (c->ntids == 0) {
        memcpy(&pr.pr_cursig, d + offsetof(struct elf_prstatus, pr_cursig), sizeof pr.pr_cursig);
        c->signal = pr.pr_cursig;
    }
    c->tids[c->ntids++] = (uint32_t)pr.pr_pid;
    return 0;
}

static void read_psinfo(struct bin_core *c, const uint8_t *d, size_t n)
{
    struct elf_prpsinfo ps;
    if (n < sizeof ps)
        return;
    memcpy(&ps, d, sizeof ps);
    c->pid = ps.pr_pid;
    memcpy(c->command, ps.pr_fname, sizeof ps.pr_fname);
    c->command[sizeof ps.pr_fname] = '\0';
}

static void read_auxv(struct bin_core *c, const uint8_t *d, size_t n)
{
    for (size_t i = 0; i + 16 <= n; i += 16) {
        uint64_t type = util_load_u64(d + i);
        if (type == AT_NULL)
            break;
        if (type == AT_ENTRY)
            c->entry = util_load_u64(d + i + 8);
    }
}

/* The notes of one PT_NOTE segment. */
static int parse_notes(struct bin_core *c, Elf *elf, const GElf_Phdr *ph, size_t *tcap, char *err,
                       size_t errlen)
{
    Elf_Data *data = elf_getdata_rawchunk(elf, (int64_t)ph->p_offset, ph->p_filesz,
                                          ph->p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR);
    if (!data)
        return util_err_set(err, errlen, PYS_E_CORRUPT,
                            "its notes (%llu bytes at %llu) are not inside the file (truncated?)",
                            (unsigned long long)ph->p_filesz, (unsigned long long)ph->p_offset);
    size_t off = 0, next, name_off, desc_off;
    GElf_Nhdr nh;
    while (off < data->d_size && (next = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
        const uint8_t *base = data->d_buf;
        off = next;
        if (nh.n_namesz != 5 || memcmp(base + name_off, "CORE", 5) != 0)
            continue;
        const uint8_t *d = base + desc_off;
        int rc = 0;
        if (nh.n_type == NT_FILE)
            rc = parse_files(c, d, nh.n_descsz, err, errlen);
        else if (nh.n_type == NT_PRSTATUS)
            rc = add_thread(c, d, nh.n_descsz, tcap);
        else if (nh.n_type == NT_PRPSINFO)
            read_psinfo(c, d, nh.n_descsz);
        else if (nh.n_type == NT_AUXV)
            read_auxv(c, d, nh.n_descsz);
        if (rc == PYS_E_CORRUPT && !(err && errlen && err[0]))
            return util_err_set(err, errlen, rc, "it lists more than %u threads",
                                BIN_CORE_THREADS_MAX);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int seg_cmp(const void *a, const void *b)
{
    const struct bin_core_segment *x = a, *y = b;
    return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

/* A PT_LOAD into c->segs (room for it made by the caller). */
static int add_segment(struct bin_core *c, const GElf_Phdr *ph, size_t len, char *err,
                       size_t errlen)
{
    if (ph->p_memsz == 0)
        return 0;
    if (ph->p_vaddr + ph->p_memsz < ph->p_vaddr || ph->p_filesz > ph->p_memsz ||
        ph->p_offset + ph->p_filesz < ph->p_offset)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "its segment at 0x%llx is malformed",
                            (unsigned long long)ph->p_vaddr);
    struct bin_core_segment *s = &c->segs[c->nsegs++];
    s->vaddr = ph->p_vaddr;
    s->memsz = ph->p_memsz;
    s->offset = ph->p_offset;
    s->filesz = ph->p_filesz;
    s->present = ph->p_offset >= len                 ? 0
                 : ph->p_filesz < len - ph->p_offset ? ph->p_filesz
                                                     : len - ph->p_offset;
    s->flags = ph->p_flags;
    c->missing += s->filesz - s->present;
    return 0;
}

/* The header: a 64-bit little-endian x86-64 core; 0 or PYS_E_CORRUPT. */
static int check_header(Elf *elf, char *err, size_t errlen)
{
    GElf_Ehdr eh;
    if (elf_kind(elf) != ELF_K_ELF)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "not an ELF file");
    if (gelf_getclass(elf) != ELFCLASS64 || gelf_getehdr(elf, &eh) == NULL)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "not a 64-bit ELF file");
    if (eh.e_type != ET_CORE)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "not a core file (an ELF %s)",
                            eh.e_type == ET_EXEC  ? "executable"
                            : eh.e_type == ET_DYN ? "shared object or executable"
                            : eh.e_type == ET_REL ? "object file"
                                                  : "file of another type");
    if (eh.e_machine != EM_X86_64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "a core of another machine (e_machine %u)",
                            (unsigned)eh.e_machine);
    return 0;
}

/* Every program header: segments and notes. */
static int parse_phdrs(struct bin_core *c, Elf *elf, size_t len, char *err, size_t errlen)
{
    size_t nph = 0, tcap = 0;
    GElf_Ehdr eh;
    if (elf_getphdrnum(elf, &nph) != 0 || gelf_getehdr(elf, &eh) == NULL)
        return util_err_set(err, errlen, PYS_E_CORRUPT,
                            "its program headers are unreadable (truncated?)");
    /* libelf counts only the headers inside the file. */
    if (eh.e_phnum != PN_XNUM && nph < eh.e_phnum)
        return util_err_set(err, errlen, PYS_E_CORRUPT,
                            "its program headers are cut off (the core is truncated)");
    if (nph > BIN_CORE_SEGMENTS_MAX)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "it has %zu program headers", nph);
    c->segs = calloc(nph ? nph : 1, sizeof *c->segs);
    if (!c->segs)
        return PYS_E_NOMEM;
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        int rc = 0;
        if (gelf_getphdr(elf, (int)i, &ph) == NULL)
            return util_err_set(err, errlen, PYS_E_CORRUPT,
                                "its program header %zu is unreadable (truncated?)", i);
        if (ph.p_type == PT_LOAD)
            rc = add_segment(c, &ph, len, err, errlen);
        else if (ph.p_type == PT_NOTE)
            rc = parse_notes(c, elf, &ph, &tcap, err, errlen);
        if (rc < 0)
            return rc;
    }
    if (c->nsegs == 0)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "it holds no memory (no PT_LOAD segment)");
    qsort(c->segs, c->nsegs, sizeof *c->segs, seg_cmp);
    for (size_t i = 1; i < c->nsegs; i++)
        if (c->segs[i].vaddr - c->segs[i - 1].vaddr < c->segs[i - 1].memsz)
            return util_err_set(
                err, errlen, PYS_E_CORRUPT, "its segments at 0x%llx and 0x%llx overlap",
                (unsigned long long)c->segs[i - 1].vaddr, (unsigned long long)c->segs[i].vaddr);
    if (c->pid == 0 && c->ntids > 0)
        c->pid = (int)c->tids[0];
    return 0;
}

/* gdb writes a section table at the end of its cores: a truncated one has
 * lost it, and libelf refuses a file whose table lies past its end. A
 * core's sections are of no use here, so a table not all there is
 * forgotten (unless the program header count is kept in it, PN_XNUM). */
static void forget_lost_sections(uint8_t *data, size_t len)
{
    Elf64_Ehdr eh;
    if (len < sizeof eh || memcmp(data, ELFMAG, SELFMAG) != 0 || data[EI_CLASS] != ELFCLASS64 ||
        data[EI_DATA] != ELFDATA2LSB)
        return;
    memcpy(&eh, data, sizeof eh);
    uint64_t need = (uint64_t)(eh.e_shnum ? eh.e_shnum : 1) * sizeof(Elf64_Shdr);
    if (eh.e_shoff == 0 || eh.e_phnum == PN_XNUM || (eh.e_shoff <= len && need <= len - eh.e_shoff))
        return;
    eh.e_shoff = 0;
    eh.e_shnum = 0;
    eh.e_shstrndx = SHN_UNDEF;
    memcpy(data, &eh, sizeof eh);
}

int bin_core_parse(uint8_t *data, size_t len, struct bin_core *out, char *err, size_t errlen)
{
    struct bin_core c;
    memset(&c, 0, sizeof c);
    if (err && errlen)
        err[0] = '\0';
    if (!data || !out)
        return PYS_E_INVAL;
    if (elf_version(EV_CURRENT) == EV_NONE)
        return util_err_set(err, errlen, PYS_E_ELF, "libelf is unusable");
    forget_lost_sections(data, len);
    /* libelf reads the buffer in place; it writes nothing into it for a
     * file in the host's byte order, and check_header refuses any other
     * before a table is read. */
    Elf *elf = elf_memory((char *)data, len);
    if (!elf)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "%s",
                            len >= SELFMAG && memcmp(data, ELFMAG, SELFMAG) == 0
                                ? "a malformed or truncated ELF file"
                                : "not an ELF file");
    int rc = check_header(elf, err, errlen);
    if (rc == 0)
        rc = parse_phdrs(&c, elf, len, err, errlen);
    elf_end(elf);
    if (rc < 0) {
        bin_core_release(&c);
        return rc;
    }
    *out = c;
    return 0;
}

void bin_core_release(struct bin_core *c)
{
    if (!c)
        return;
    free(c->segs);
    free(c->files);
    free(c->paths);
    free(c->tids);
    memset(c, 0, sizeof *c);
}
