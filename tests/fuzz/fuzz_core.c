/*
 * libFuzzer target for core files: the parser (binfmt/corefile.c) on the
 * input's bytes, with its contracts checked (segments sorted, apart and
 * inside their own bounds; present bytes inside the input; paths ending
 * inside the note), then the whole of `dump --core` below the CLI: the
 * input as a core file (a memfd), its regions made from the core and from
 * the files it names, the attach search over those files and, where that
 * succeeds, a snapshot. The files are looked up under a directory of the
 * fuzzer's own (--root), which holds one regular file, /python, made of
 * the input's first bytes, so that the file-matching and file-backed
 * regions are reached too.
 *
 * Seeds (tests/fuzz/seeds/fuzz_core/), made by tests/fuzz/make_core_seeds.py:
 * small x86-64 cores with NT_PRSTATUS, NT_PRPSINFO, NT_AUXV and NT_FILE
 * notes and segments fully present, partly left out (p_filesz < p_memsz,
 * filled from /python) and truncated.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pystrobe/pystrobe.h>

#include "binfmt/corefile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

static void check_parse(const uint8_t *input, size_t size)
{
    struct bin_core c;
    char err[256];
    uint8_t *data = malloc(size ? size : 1); /* the parser may clear header fields */
    check(data != NULL);
    memcpy(data, input, size);
    memset(&c, 0x5a, sizeof c);
    int rc = bin_core_parse(data, size, &c, err, sizeof err);
    if (rc < 0) {
        check(rc == PYS_E_CORRUPT || rc == PYS_E_NOMEM || rc == PYS_E_ELF);
        check(rc == PYS_E_NOMEM || err[0] != '\0');
        free(data);
        return;
    }
    check(c.nsegs > 0 && c.nsegs <= BIN_CORE_SEGMENTS_MAX);
    for (size_t i = 0; i < c.nsegs; i++) {
        const struct bin_core_segment *s = &c.segs[i];
        check(s->memsz > 0 && s->vaddr + s->memsz > s->vaddr);
        check(s->present <= s->filesz && s->filesz <= s->memsz);
        check(s->present == 0 || (s->offset < size && s->present <= size - s->offset));
        check(i == 0 || s->vaddr - c.segs[i - 1].vaddr >= c.segs[i - 1].memsz);
    }
    check(c.nfiles <= BIN_CORE_FILES_MAX && c.ntids <= BIN_CORE_THREADS_MAX);
    for (size_t i = 0; i < c.nfiles; i++) {
        check(c.files[i].start < c.files[i].end);
        check(strlen(c.files[i].path) < size);
    }
    check(strlen(c.command) < sizeof c.command);
    bin_core_release(&c);
    free(data);
}

static char root[64], root_file[128];

static void remove_root(void)
{
    unlink(root_file);
    rmdir(root);
}

/* The fuzzer's root: a directory holding /python, removed at exit. */
static const char *root_dir(void)
{
    if (!root[0]) {
        snprintf(root, sizeof root, "/tmp/pystrobe-fuzz-core-%d", (int)getpid());
        snprintf(root_file, sizeof root_file, "%s/python", root);
        mkdir(root, 0700);
        atexit(remove_root);
    }
    return root;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    char path[64], err[1024];
    check_parse(data, size);

    if (fd < 0) {
        fd = memfd_create("fuzz_core", MFD_CLOEXEC);
        check(fd >= 0);
    }
    check(ftruncate(fd, 0) == 0);
    check(size == 0 || pwrite(fd, data, size, 0) == (ssize_t)size);
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    root_dir();
    FILE *f = fopen(root_file, "wb");
    check(f != NULL);
    fwrite(data, 1, size < 8192 ? size : 8192, f);
    fclose(f);

    struct pys_options opt;
    memset(&opt, 0, sizeof opt);
    opt.locals = 1;
    pys_session *s = (pys_session *)&fd; /* sentinel */
    int rc = pys_session_attach_core(&s, path, NULL, root_dir(), &opt, err, sizeof err);
    if (rc < 0) {
        check(s == (pys_session *)&fd);
        check(err[0] != '\0');
        return 0;
    }
    struct pys_core_info ci;
    check(pys_core_info(s, &ci) == 0);
    const struct pys_snapshot *snap;
    pys_session_snapshot(s, &snap);
    pys_session_free(s);
    return 0;
}
