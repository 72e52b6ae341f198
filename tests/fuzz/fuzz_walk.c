/*
 * libFuzzer target: the thread, frame, code and string readers on an
 * arbitrary memory image, with CPython 3.15's real offsets. The input is the
 * content of 64 KiB of "target memory" at a fixed address, where the thread
 * state is; every pointer in it may lead anywhere.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pystrobe/pystrobe.h>

#include "cpython/cpython.h"

#define BASE 0x100000ull
#define SIZE 0x10000

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static struct cpy_offsets off;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    uint8_t buf[1024];
    char err[200];
    FILE *f = fopen("tests/unit/data/debug_offsets_3.15.2.bin", "rb");
    if (!f)
        abort();
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (cpy_offsets_parse(buf, n, &off, err, sizeof err) != 0)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t heap[SIZE];
    static struct cpy_raw_frame frames[PYS_MAX_FRAMES_DEFAULT];
    uint8_t ts[4096];
    struct mem_region r = {BASE, heap, SIZE, heap};
    struct mem m;
    struct cpy_symbols sym = {0, 0};
    struct cpy_thread t;
    struct cpy_stack st;

    memset(heap, 0, SIZE);
    memcpy(heap, data, size < SIZE ? size : SIZE);
    mem_init_image(&m, &r, 1);
    memset(&st, 0, sizeof st);
    if (cpy_thread_read(&m, &off, &sym, BASE, ts, &t) == 0) {
        int n = cpy_stack_walk(&m, &off, &t, &st, frames, PYS_MAX_FRAMES_DEFAULT);
        for (int i = 0; i < n; i++) {
            struct cpy_code c;
            if (cpy_code_read(&m, &off, &sym, frames[i].code, &c) == 0) {
                int32_t lasti;
                struct cpy_location loc;
                cpy_code_locate(&off, &c, &frames[i], &lasti, &loc);
                cpy_frame_incomplete(&off, &c, &frames[i]);
                cpy_code_release(&c);
            }
        }
    }
    cpy_stack_release(&st);
    mem_release(&m);
    return 0;
}
