/*
 * binfmt: what pystrobe needs from an ELF image on disk: section and symbol
 * addresses, the first loadable segment, and the bytes of a section. Uses
 * libelf. Knows nothing about processes or Python.
 */
#ifndef PYSTROBE_BINFMT_ELF_H
#define PYSTROBE_BINFMT_ELF_H

#include <stddef.h>
#include <stdint.h>

struct bin_image;

struct bin_section {
    uint64_t addr;   /* sh_addr */
    uint64_t size;   /* sh_size */
    uint64_t offset; /* sh_offset in the file */
    int in_file;     /* 0 for SHT_NOBITS (.bss): no bytes in the file */
};

/* Read the ELF image open on fd (the fd stays the caller's and must stay
 * open until bin_image_free; the file is mmapped, so it must not shrink
 * meanwhile). PYS_E_ELF if it is not a readable 64-bit ET_EXEC or ET_DYN
 * file with a PT_LOAD segment and section names. */
int bin_image_open(int fd, struct bin_image **out);
void bin_image_free(struct bin_image *img);

/* 1 for ET_EXEC, 0 for ET_DYN (shared object or PIE). */
int bin_image_is_exec(const struct bin_image *img);

/* align_down(p_vaddr, p_align) of the first PT_LOAD: subtract it from the
 * lowest mapping's start to get the load bias. */
uint64_t bin_image_base_vaddr(const struct bin_image *img);

/* Section by name; PYS_E_NOTFOUND if absent. */
int bin_image_section(const struct bin_image *img, const char *name, struct bin_section *out);

/* Copy min(len, section size) bytes from the start of the section; returns
 * the number of bytes copied or a negative code (PYS_E_NOTFOUND, PYS_E_ELF;
 * a compressed section is PYS_E_ELF). A SHT_NOBITS section reads as zeros. */
long bin_image_section_read(const struct bin_image *img, const char *name, void *buf,
                            size_t len);

/* Value of a defined symbol (exact name), from .dynsym first, then .symtab.
 * Undefined symbols (SHN_UNDEF) are ignored, so an extension module's
 * reference to _PyRuntime is not found. PYS_E_NOTFOUND if absent, PYS_E_ELF
 * if a symbol table is unreadable. */
int bin_image_symbol(const struct bin_image *img, const char *name, uint64_t *value);

#endif
