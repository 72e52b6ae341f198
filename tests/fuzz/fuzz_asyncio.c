/*
 * libFuzzer target: the asyncio debug table parser (cpy_asyncio_parse) on
 * arbitrary tables, and the readers of asyncio's objects (tasks, their
 * names, coroutines and the frames inside them, awaiter sets) on an
 * arbitrary memory image, with CPython 3.14's or 3.15's real offsets.
 *
 * Input: a selector byte (bit 0: 3.14 or 3.15; bit 1: the real table
 * instead of the input's, so that the readers run whatever the table
 * holds), CPY_ASYNCIO_TABLE_SIZE bytes of table, then up to 64 KiB of
 * "target memory" at a fixed address; the task, coroutine and set read are
 * at its start, and every pointer in it may lead anywhere.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpython/asyncio.h"
#include "cpython/offsets.h"

#define BASE 0x100000ull
#define SIZE 0x10000

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static struct cpy_offsets off[2];
static uint8_t table[2][CPY_ASYNCIO_TABLE_SIZE];

static void load(const char *path, uint8_t *buf, size_t cap, size_t want)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        abort();
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    if (want && n != want)
        abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    static const char *const offsets[2] = {"tests/unit/data/debug_offsets_3.14.10.bin",
                                           "tests/unit/data/debug_offsets_3.15.2.bin"};
    static const char *const tables[2] = {"tests/unit/data/asyncio_debug_3.14.10.bin",
                                          "tests/unit/data/asyncio_debug_3.15.2.bin"};
    for (int v = 0; v < 2; v++) {
        uint8_t buf[1024];
        char err[200];
        memset(buf, 0, sizeof buf);
        load(offsets[v], buf, sizeof buf, 0);
        if (cpy_offsets_parse(buf, sizeof buf, &off[v], err, sizeof err) != 0)
            abort();
        load(tables[v], table[v], sizeof table[v], sizeof table[v]);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t heap[SIZE];
    static uint64_t keys[64];
    uint8_t t[CPY_ASYNCIO_TABLE_SIZE];
    struct cpy_asyncio_offsets ao;
    char err[200];
    if (size < 1)
        return 0;
    int v = data[0] & 1, real = data[0] & 2;
    size_t n = size - 1 < sizeof t ? size - 1 : sizeof t;
    memset(t, 0, sizeof t);
    memcpy(t, data + 1, n);
    /* The parser on every length up to the table's. */
    int rc = cpy_asyncio_parse(t, n, &off[v], &ao, err, sizeof err);
    if (real) {
        if (cpy_asyncio_parse(table[v], sizeof table[v], &off[v], &ao, err, sizeof err) != 0)
            abort(); /* the real table always parses */
    } else if (rc != 0) {
        return 0;
    }
    size_t at = 1 + sizeof t, rest = size > at ? size - at : 0;
    memset(heap, 0, SIZE);
    memcpy(heap, data + at, rest < SIZE ? rest : SIZE);
    struct mem_region r = {BASE, heap, SIZE, heap};
    struct mem m;
    mem_init_image(&m, &r, 1);

    struct cpy_task task;
    if (cpy_task_read(&m, &ao, BASE, &task) == 0) {
        uint64_t type, flags;
        char *name = NULL;
        if (task.name && mem_read_u64(&m, task.name + off[v].pyobject.ob_type, &type) == 0 &&
            cpy_type_flags(&m, &off[v], type, &flags) == 0 &&
            cpy_task_name_read(&m, &off[v], task.name, flags, 1024, &name) == 0)
            free(name);
        struct cpy_coro c;
        uint64_t coro = task.coro;
        /* A chain of awaited coroutines, bounded as tasks.c bounds it. */
        for (int i = 0; coro && i < 64 && cpy_coro_read(&m, &off[v], &ao, coro, &c) == 0; i++)
            coro = c.awaiting;
        size_t nk;
        if (task.awaited_by && task.awaited_by_is_set)
            cpy_set_keys(&m, &off[v], task.awaited_by, keys, sizeof keys / sizeof keys[0], &nk);
    }
    return 0;
}
