/*
 * elf: sections, symbols and the first loadable segment of a 64-bit ELF
 * image on disk, read with libelf.
 *
 * The file may be anything the target mapped, so it is untrusted: every
 * header, string and table goes through libelf's checked accessors (which
 * bound offsets by the file size and string reads by their table), and any
 * failure is PYS_E_ELF, never a crash. The image is mapped read-only and
 * private (ELF_C_READ_MMAP); nothing is copied up front.
 */
#include "binfmt/elf.h"

#include <pystrobe/pystrobe.h>

#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

struct bin_image {
    Elf *elf;
    size_t shstrndx;     /* section holding the section names */
    int is_exec;         /* ET_EXEC */
    int native_order;    /* the file's byte order is the host's */
    uint64_t base_vaddr; /* align_down(p_vaddr, p_align) of the first PT_LOAD */
};

/* The first PT_LOAD's page-aligned address; PYS_E_ELF without one. */
static int first_load_base(Elf *elf, uint64_t *out)
{
    size_t nphdr = 0;

    if (elf_getphdrnum(elf, &nphdr) != 0)
        return PYS_E_ELF;
    /* gelf_getphdr takes an int index. */
    if (nphdr > INT_MAX)
        nphdr = INT_MAX;
    for (size_t i = 0; i < nphdr; i++) {
        GElf_Phdr ph;

        if (gelf_getphdr(elf, (int)i, &ph) == NULL)
            return PYS_E_ELF;
        if (ph.p_type != PT_LOAD)
            continue;
        /* p_align is a power of two by the ELF specification; the modulo
         * keeps a file that breaks the rule from giving nonsense. 0 and 1
         * mean no alignment. */
        if (ph.p_align > 1)
            *out = ph.p_vaddr - ph.p_vaddr % ph.p_align;
        else
            *out = ph.p_vaddr;
        return 0;
    }
    return PYS_E_ELF;
}

int bin_image_open(int fd, struct bin_image **out)
{
    struct bin_image *img = NULL;
    Elf *elf = NULL;
    GElf_Ehdr eh;
    int rc;

    if (fd < 0 || out == NULL)
        return PYS_E_INVAL;
    /* Sets libelf's library-wide version once; repeating it is harmless. */
    if (elf_version(EV_CURRENT) == EV_NONE)
        return PYS_E_ELF;
    elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (elf == NULL) {
        rc = PYS_E_ELF;
        goto out;
    }
    if (elf_kind(elf) != ELF_K_ELF || gelf_getclass(elf) != ELFCLASS64 ||
        gelf_getehdr(elf, &eh) == NULL || (eh.e_type != ET_EXEC && eh.e_type != ET_DYN)) {
        rc = PYS_E_ELF;
        goto out;
    }
    img = calloc(1, sizeof(*img));
    if (img == NULL) {
        rc = PYS_E_NOMEM;
        goto out;
    }
    rc = first_load_base(elf, &img->base_vaddr);
    if (rc < 0)
        goto out;
    /* Without section names nothing can be looked up; a file whose section
     * header table is cut off or out of range fails here. */
    if (elf_getshdrstrndx(elf, &img->shstrndx) != 0 || img->shstrndx == SHN_UNDEF ||
        elf_getscn(elf, img->shstrndx) == NULL) {
        rc = PYS_E_ELF;
        goto out;
    }
    img->elf = elf;
    img->is_exec = eh.e_type == ET_EXEC;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    img->native_order = eh.e_ident[EI_DATA] == ELFDATA2LSB;
#else
    img->native_order = eh.e_ident[EI_DATA] == ELFDATA2MSB;
#endif
    elf = NULL;
    *out = img;
    img = NULL;
out:
    free(img);
    if (elf != NULL)
        elf_end(elf);
    return rc;
}

void bin_image_free(struct bin_image *img)
{
    if (img == NULL)
        return;
    elf_end(img->elf);
    free(img);
}

int bin_image_is_exec(const struct bin_image *img)
{
    return img->is_exec;
}

uint64_t bin_image_base_vaddr(const struct bin_image *img)
{
    return img->base_vaddr;
}

/* Section named name and its header, or NULL. A section whose header or
 * name cannot be read is skipped, not fatal: another may still match. */
static Elf_Scn *find_section(const struct bin_image *img, const char *name, GElf_Shdr *sh)
{
    Elf_Scn *scn = NULL;

    while ((scn = elf_nextscn(img->elf, scn)) != NULL) {
        const char *s;

        if (gelf_getshdr(scn, sh) == NULL)
            continue;
        s = elf_strptr(img->elf, img->shstrndx, sh->sh_name);
        if (s != NULL && strcmp(s, name) == 0)
            return scn;
    }
    return NULL;
}

int bin_image_section(const struct bin_image *img, const char *name, struct bin_section *out)
{
    GElf_Shdr sh;

    if (img == NULL || name == NULL || out == NULL)
        return PYS_E_INVAL;
    if (find_section(img, name, &sh) == NULL)
        return PYS_E_NOTFOUND;
    out->addr = sh.sh_addr;
    out->size = sh.sh_size;
    out->offset = sh.sh_offset;
    out->in_file = sh.sh_type != SHT_NOBITS;
    return 0;
}

/*
 * The bytes as the file holds them (elf_rawdata: no byte-order conversion).
 * A SHT_NOBITS section (.bss) has no bytes in the file and reads as the
 * zeros it starts as. A compressed section is refused: its file bytes are
 * not what the process sees.
 */
long bin_image_section_read(const struct bin_image *img, const char *name, void *buf, size_t len)
{
    GElf_Shdr sh;
    Elf_Scn *scn;
    Elf_Data *d;
    size_t n;

    if (img == NULL || name == NULL || (buf == NULL && len > 0))
        return PYS_E_INVAL;
    scn = find_section(img, name, &sh);
    if (scn == NULL)
        return PYS_E_NOTFOUND;
    if (sh.sh_flags & SHF_COMPRESSED)
        return PYS_E_ELF;
    n = sh.sh_size < len ? (size_t)sh.sh_size : len;
    if (n > (size_t)LONG_MAX)
        return PYS_E_INVAL;
    if (sh.sh_type == SHT_NOBITS) {
        memset(buf, 0, n);
        return (long)n;
    }
    if (n == 0)
        return 0;
    /* libelf checks that sh_offset + sh_size lies inside the file. */
    d = elf_rawdata(scn, NULL);
    if (d == NULL || d->d_buf == NULL || d->d_size < n)
        return PYS_E_ELF;
    memcpy(buf, d->d_buf, n);
    return (long)n;
}

/* 0 if the string table in section ndx certainly lacks name; 1 if it may
 * hold it (also when the table cannot be read as raw bytes: the symbol walk
 * then decides, entry by entry). */
static int strtab_may_hold(const struct bin_image *img, size_t ndx, const char *name)
{
    Elf_Scn *scn = elf_getscn(img->elf, ndx);
    Elf_Data *d;

    if (scn == NULL)
        return 1;
    /* With ELF_C_READ_MMAP this points into the mapped file: no copy. */
    d = elf_rawdata(scn, NULL);
    if (d == NULL || d->d_buf == NULL)
        return 1;
    return memmem(d->d_buf, d->d_size, name, strlen(name) + 1) != NULL;
}

/* What the GNU hash table says of a name (gnu_hash_lookup). */
#define HASH_UNUSABLE (-1) /* no table, or one that cannot be trusted: walk */
#define HASH_ABSENT (-2)   /* certainly not a defined exported symbol */

/*
 * Look name up in the GNU hash table (DT_GNU_HASH, which the dynamic loader
 * uses) of the dynamic symbol table in section symndx: its Bloom filter,
 * bucket and chain. Every defined exported symbol is hashed there. Returns
 * the index of the symbol whose hash matches (the caller checks its name;
 * a match may be a collision, and then it walks), HASH_ABSENT, or
 * HASH_UNUSABLE: no such table, not in the host's byte order, or any field
 * or chain running outside the section (every read is bounded by its size;
 * the chain walk by the number of entries it can hold).
 */
static long gnu_hash_lookup(const struct bin_image *img, size_t symndx, const char *name)
{
    Elf_Scn *scn = NULL;

    if (!img->native_order)
        return HASH_UNUSABLE;
    while ((scn = elf_nextscn(img->elf, scn)) != NULL) {
        GElf_Shdr sh;
        Elf_Data *d;
        const unsigned char *p, *chain;
        uint32_t hdr[4], h = 5381, bucket;
        uint64_t word, mask;
        size_t room, nchain;

        if (gelf_getshdr(scn, &sh) == NULL || sh.sh_type != SHT_GNU_HASH || sh.sh_link != symndx)
            continue;
        d = elf_rawdata(scn, NULL);
        if (d == NULL || d->d_buf == NULL || d->d_size < sizeof hdr)
            return HASH_UNUSABLE;
        p = d->d_buf;
        /* nbuckets, symoffset, bloom words (64-bit in ELF64), bloom shift;
         * memcpy: the section need not be aligned in a hostile file. */
        memcpy(hdr, p, sizeof hdr);
        room = d->d_size - sizeof hdr;
        if (hdr[0] == 0 || hdr[2] == 0 || room / 8 < hdr[2] ||
            (room - (size_t)hdr[2] * 8) / 4 < hdr[0])
            return HASH_UNUSABLE;
        for (const unsigned char *c = (const unsigned char *)name; *c; c++)
            h = h * 33 + *c;
        memcpy(&word, p + sizeof hdr + 8 * (size_t)((h / 64) % hdr[2]), sizeof word);
        mask = (1ull << (h % 64)) | (1ull << ((h >> (hdr[3] % 32)) % 64));
        if ((word & mask) != mask)
            return HASH_ABSENT;
        memcpy(&bucket, p + sizeof hdr + 8 * (size_t)hdr[2] + 4 * (size_t)(h % hdr[0]),
               sizeof bucket);
        if (bucket == 0)
            return HASH_ABSENT;
        /* The chain: one word per hashed symbol from symoffset on, the low
         * bit marking the last of a bucket's run. */
        chain = p + sizeof hdr + 8 * (size_t)hdr[2] + 4 * (size_t)hdr[0];
        nchain = (room - (size_t)hdr[2] * 8 - 4 * (size_t)hdr[0]) / 4;
        if (bucket < hdr[1])
            return HASH_UNUSABLE;
        for (size_t i = bucket - hdr[1]; i < nchain; i++) {
            uint32_t ch;

            memcpy(&ch, chain + 4 * i, sizeof ch);
            if ((ch | 1) == (h | 1))
                return (long)(i + hdr[1]);
            if (ch & 1)
                return HASH_ABSENT;
        }
        return HASH_UNUSABLE;
    }
    return HASH_UNUSABLE;
}

/* Value of the first defined symbol called name in the symbol table of
 * type (SHT_DYNSYM or SHT_SYMTAB). 0, PYS_E_NOTFOUND or PYS_E_ELF. */
static int find_symbol(const struct bin_image *img, Elf64_Word type, const char *name,
                       uint64_t *value)
{
    Elf_Scn *scn = NULL;

    while ((scn = elf_nextscn(img->elf, scn)) != NULL) {
        GElf_Shdr sh;
        Elf_Data *d;
        size_t entsize, nsyms;

        long hashed = HASH_UNUSABLE;

        if (gelf_getshdr(scn, &sh) == NULL || sh.sh_type != type)
            continue;
        /* A process maps hundreds of libraries and attach asks each for a
         * few names, mostly absent: the GNU hash answers at once; without
         * one, skip a table whose strings do not hold the name (with its
         * terminating NUL; names may share a tail) before reading its
         * symbols one by one. */
        if (type == SHT_DYNSYM)
            hashed = gnu_hash_lookup(img, elf_ndxscn(scn), name);
        if (hashed == HASH_ABSENT ||
            (hashed == HASH_UNUSABLE && !strtab_may_hold(img, sh.sh_link, name)))
            continue;
        /* elf_getdata converts to the host's layout; gelf_getsym checks
         * each index against the data's size. */
        d = elf_getdata(scn, NULL);
        entsize = gelf_fsize(img->elf, ELF_T_SYM, 1, EV_CURRENT);
        if (d == NULL || entsize == 0)
            return PYS_E_ELF;
        nsyms = d->d_size / entsize;
        /* gelf_getsym takes an int index. */
        if (nsyms > INT_MAX)
            return PYS_E_ELF;
        if (hashed >= 0 && (size_t)hashed < nsyms) {
            GElf_Sym sym;
            const char *s;

            /* The hash's answer, if its name is right; else walk. */
            if (gelf_getsym(d, (int)hashed, &sym) != NULL && sym.st_shndx != SHN_UNDEF &&
                sym.st_name != 0 && (s = elf_strptr(img->elf, sh.sh_link, sym.st_name)) != NULL &&
                strcmp(s, name) == 0) {
                *value = sym.st_value;
                return 0;
            }
        }
        for (size_t i = 0; i < nsyms; i++) {
            GElf_Sym sym;
            const char *s;

            if (gelf_getsym(d, (int)i, &sym) == NULL)
                return PYS_E_ELF;
            if (sym.st_shndx == SHN_UNDEF || sym.st_name == 0)
                continue;
            /* elf_strptr checks that sh_link is a string table and that
             * the name is terminated inside it. */
            s = elf_strptr(img->elf, sh.sh_link, sym.st_name);
            if (s != NULL && strcmp(s, name) == 0) {
                *value = sym.st_value;
                return 0;
            }
        }
    }
    return PYS_E_NOTFOUND;
}

int bin_image_symbol(const struct bin_image *img, const char *name, uint64_t *value)
{
    uint64_t v = 0;
    int rc;

    if (img == NULL || name == NULL || value == NULL)
        return PYS_E_INVAL;
    rc = find_symbol(img, SHT_DYNSYM, name, &v);
    if (rc == PYS_E_NOTFOUND)
        rc = find_symbol(img, SHT_SYMTAB, name, &v);
    if (rc < 0)
        return rc;
    *value = v;
    return 0;
}
