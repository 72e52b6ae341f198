/*
 * Unit tests of the thread, frame, code and string readers (cpython/) on
 * crafted target memory: a memory image laid out with CPython 3.15's real
 * offsets, then corrupted in the ways a racing or hostile target could be.
 * And the 3.15 frame cache (core/framecache.c) on the same image.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <pystrobe/pystrobe.h>

#include "core/core.h"
#include "cpython/cpython.h"

#define HEAP 0x100000ull
#define HEAP_SIZE 0x10000
#define CHUNK 0x200000ull
#define CHUNK_SIZE 0x4000    /* CPython's: DATA_STACK_CHUNK_SIZE */
#define CHUNK_REGION 0x10000 /* room for four chunks */

/* Addresses of the objects in the image. */
#define A_TSTATE (HEAP + 0x0)
#define A_BASE (A_TSTATE + 888) /* 3.15's base frame sits right after PyThreadState */
#define A_TYPE (HEAP + 0x1000)
#define A_FILENAME (HEAP + 0x1100)
#define A_QUALNAME (HEAP + 0x1200)
#define A_UNAME (HEAP + 0x1300)
#define A_LINETABLE (HEAP + 0x1400)
#define A_CODE (HEAP + 0x2000)
#define A_FRAME(i) (HEAP + 0x3000 + (uint64_t)(i)*0x100)

struct image {
    struct cpy_offsets o;
    uint8_t heap[HEAP_SIZE];
    uint8_t chunk[CHUNK_REGION];
    struct mem_region regions[2];
    struct mem mem;
    struct cpy_symbols sym;
};

static void load_offsets(struct cpy_offsets *o)
{
    uint8_t buf[1024];
    char err[200];
    FILE *f = fopen("tests/unit/data/debug_offsets_3.15.2.bin", "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_int_equal(cpy_offsets_parse(buf, n, o, err, sizeof err), 0);
}

static uint8_t *at(struct image *im, uint64_t addr)
{
    if (addr >= CHUNK && addr < CHUNK + CHUNK_REGION)
        return im->chunk + (addr - CHUNK);
    assert_true(addr >= HEAP && addr < HEAP + HEAP_SIZE);
    return im->heap + (addr - HEAP);
}

static void put64(struct image *im, uint64_t addr, uint64_t v)
{
    memcpy(at(im, addr), &v, 8);
}

static void put32(struct image *im, uint64_t addr, uint32_t v)
{
    memcpy(at(im, addr), &v, 4);
}

/* A compact str: ASCII (kind 1) or UCS-2 (kind 2). */
static void put_str(struct image *im, uint64_t addr, const void *chars, size_t n, unsigned kind)
{
    const struct cpy_offsets *o = &im->o;
    int ascii = kind == 1;
    put32(im, addr + o->unicode_object.state, (kind << 2) | (1u << 5) | ((unsigned)ascii << 6));
    put64(im, addr + o->unicode_object.length, n);
    uint64_t data = addr + (ascii ? o->unicode_object.asciiobject_size
                                  : o->unicode_object.compactunicodeobject_size);
    memcpy(at(im, data), chars, n * kind);
}

/* A frame of the code object at A_CODE at instruction idx, linked to prev. */
static void put_frame(struct image *im, uint64_t addr, uint64_t prev, uint32_t idx, uint8_t owner)
{
    const struct cpy_offsets *o = &im->o;
    put64(im, addr + o->interpreter_frame.executable, A_CODE | 1); /* tagged stackref */
    put64(im, addr + o->interpreter_frame.previous, prev);
    put64(im, addr + o->interpreter_frame.instr_ptr,
          A_CODE + o->code_object.co_code_adaptive + 2ull * idx);
    *at(im, addr + o->interpreter_frame.owner) = owner;
}

/* A data stack chunk's header at addr: its previous chunk, CPython's size,
 * and one frame in use. */
static void put_chunk(struct image *im, uint64_t addr, uint64_t previous)
{
    put64(im, addr, previous);
    put64(im, addr + 8, CHUNK_SIZE);
    put64(im, addr + 16, (24 + 88) / 8);
}

/* The thread's current data stack chunk at chunk, its top frame at frame:
 * the last 88 bytes in use, and the thread's current frame. */
static void put_current(struct image *im, uint64_t chunk, uint64_t frame)
{
    put64(im, A_TSTATE + im->o.thread_state.datastack_chunk, chunk);
    put64(im, A_TSTATE + im->o.thread_state.datastack_top, frame + 88);
    put64(im, A_TSTATE + im->o.thread_state.current_frame, frame);
}

/* A thread with three frames: A_FRAME(0) -> A_FRAME(1) -> A_FRAME(2) ->
 * base frame, and one code object "pkg/mod.py", "Outer.f". */
static void build(struct image *im)
{
    memset(im, 0, sizeof *im);
    load_offsets(&im->o);
    const struct cpy_offsets *o = &im->o;
    im->regions[0] = (struct mem_region){HEAP, im->heap, HEAP_SIZE, im->heap};
    im->regions[1] = (struct mem_region){CHUNK, im->chunk, CHUNK_REGION, im->chunk};
    mem_init_image(&im->mem, im->regions, 2);
    im->sym.code_type = A_TYPE;
    im->sym.none = 0;

    put_str(im, A_FILENAME, "pkg/mod.py", 10, 1);
    put_str(im, A_QUALNAME, "Outer.f", 7, 1);
    /* Location table: 4 units on line 1, cols 0-0; then 2 units, line 2, cols 8-9. */
    static const uint8_t lt[] = {0x83, 0x00, 0xd9, 0x08, 0x09};
    put64(im, A_LINETABLE + o->bytes_object.ob_size, sizeof lt);
    memcpy(at(im, A_LINETABLE + o->bytes_object.ob_sval), lt, sizeof lt);
    put64(im, A_CODE + o->pyobject.ob_type, A_TYPE);
    put64(im, A_CODE + o->var_object.ob_size, 6); /* code units */
    put64(im, A_CODE + o->code_object.filename, A_FILENAME);
    put64(im, A_CODE + o->code_object.qualname, A_QUALNAME);
    put64(im, A_CODE + o->code_object.linetable, A_LINETABLE);
    put32(im, A_CODE + o->code_object.firstlineno, 1);
    put32(im, A_CODE + o->code_object.firsttraceable, 1);

    put_frame(im, A_FRAME(0), A_FRAME(1), 5, 0);
    put_frame(im, A_FRAME(1), A_FRAME(2), 4, 0);
    put_frame(im, A_FRAME(2), A_BASE, 2, 0);
    *at(im, A_BASE + o->interpreter_frame.owner) = 3; /* base frame: not Python */

    put64(im, A_TSTATE + o->thread_state.native_thread_id, 4242);
    put64(im, A_TSTATE + o->thread_state.thread_id, 0x7f00);
    put64(im, A_TSTATE + o->thread_state.current_frame, A_FRAME(0));
    put64(im, A_TSTATE + o->thread_state.base_frame, A_BASE);
}

/* A whole walk of the thread; *cut gets where it was cut (0: not cut). */
static int walk_cut(struct image *im, struct cpy_raw_frame *out, size_t max, uint64_t *cut)
{
    uint8_t ts[4096];
    struct cpy_thread t;
    struct cpy_stack st;
    memset(&st, 0, sizeof st);
    int rc = cpy_thread_read(&im->mem, &im->o, &im->sym, A_TSTATE, ts, &t);
    assert_int_equal(rc, 0);
    rc = cpy_stack_walk(&im->mem, &im->o, &t, &st, out, max);
    *cut = st.cut;
    cpy_stack_release(&st);
    return rc;
}

static int walk(struct image *im, struct cpy_raw_frame *out, size_t max)
{
    uint64_t cut;
    return walk_cut(im, out, max, &cut);
}

static void test_walk_ok(void **state)
{
    (void)state;
    struct image *im = malloc(sizeof *im);
    struct cpy_raw_frame f[16];
    build(im);
    assert_int_equal(walk(im, f, 16), 4);
    assert_int_equal(f[0].addr, A_FRAME(0));
    assert_int_equal(f[2].addr, A_FRAME(2));
    assert_int_equal(f[0].code, A_CODE); /* tag bits cleared */
    assert_int_equal(f[0].shim, 0);
    assert_int_equal(f[3].addr, A_BASE); /* the base frame ends the walk, as a shim */
    assert_int_equal(f[3].shim, 1);

    struct cpy_code c;
    assert_int_equal(cpy_code_read(&im->mem, &im->o, &im->sym, A_CODE, &c), 0);
    assert_string_equal(c.filename, "pkg/mod.py");
    assert_string_equal(c.qualname, "Outer.f");
    int32_t lasti;
    struct cpy_location loc;
    assert_int_equal(cpy_code_locate(&im->o, &c, &f[0], &lasti, &loc), 0);
    assert_int_equal(lasti, 10);
    assert_int_equal(loc.lineno, 2);
    assert_int_equal(loc.col, 8);
    assert_int_equal(loc.end_col, 9);
    assert_int_equal(cpy_code_locate(&im->o, &c, &f[2], &lasti, &loc), 0);
    assert_int_equal(loc.lineno, 1);
    assert_int_equal(cpy_frame_incomplete(&im->o, &c, &f[2]), 0);
    cpy_code_release(&c);
    mem_release(&im->mem);
    free(im);
}

static void test_walk_cycle(void **state)
{
    (void)state;
    struct image *im = malloc(sizeof *im);
    struct cpy_raw_frame f[16];
    build(im);
    put64(im, A_FRAME(2) + im->o.interpreter_frame.previous, A_FRAME(0));
    assert_int_equal(walk(im, f, 16), PYS_E_TOODEEP);
    /* A frame that is its own caller. */
    put64(im, A_FRAME(1) + im->o.interpreter_frame.previous, A_FRAME(1));
    assert_int_equal(walk(im, f, 16), PYS_E_TOODEEP);
    mem_release(&im->mem);
    free(im);
}

/* A chain longer than the walk may read is cut: its innermost max - 1
 * frames, and where it was cut (the next one's address). */
static void test_walk_cut_long(void **state)
{
    (void)state;
    struct image *im = malloc(sizeof *im);
    struct cpy_raw_frame f[128];
    uint64_t cut;
    build(im);
    assert_int_equal(walk_cut(im, f, 4, &cut), 4); /* just fits: whole */
    assert_int_equal(cut, 0);
    assert_int_equal(walk_cut(im, f, 3, &cut), 2);
    assert_int_equal(f[0].addr, A_FRAME(0));
    assert_int_equal(f[1].addr, A_FRAME(1));
    assert_int_equal(cut, A_FRAME(2));
    /* 100 frames over the base frame. */
    for (int i = 0; i < 100; i++)
        put_frame(im, A_FRAME(i), i == 99 ? A_BASE : A_FRAME(i + 1), 5, 0);
    assert_int_equal(walk_cut(im, f, 128, &cut), 101);
    assert_int_equal(cut, 0);
    assert_int_equal(walk_cut(im, f, 16, &cut), 15);
    for (int i = 0; i < 15; i++)
        assert_int_equal(f[i].addr, A_FRAME(i));
    assert_int_equal(cut, A_FRAME(15));
    mem_release(&im->mem);
    free(im);
}

/* A chain that comes back to a frame it met is cyclic, even when the walk
 * fills its frames before Brent's check meets the cycle: not a long chain
 * to cut. */
static void test_walk_cut_cycle(void **state)
{
    (void)state;
    struct image *im = malloc(sizeof *im);
    struct cpy_raw_frame f[16];
    uint64_t cut;
    build(im);
    /* 0 -> 1 -> 2 -> 3 -> 4 -> 2: Brent's checkpoint is 2, met again at
     * the sixth step; the walk is full at the fifth. */
    for (int i = 0; i < 5; i++)
        put_frame(im, A_FRAME(i), i == 4 ? A_FRAME(2) : A_FRAME(i + 1), 5, 0);
    assert_int_equal(walk_cut(im, f, 5, &cut), PYS_E_TOODEEP);
    /* The frame the walk stops at, once more. */
    put64(im, A_FRAME(4) + im->o.interpreter_frame.previous, A_FRAME(4));
    assert_int_equal(walk(im, f, 5), PYS_E_TOODEEP);
    /* The same chain, ending: cut. */
    put64(im, A_FRAME(4) + im->o.interpreter_frame.previous, A_BASE);
    assert_int_equal(walk_cut(im, f, 5, &cut), 4);
    assert_int_equal(cut, A_FRAME(4));
    assert_int_equal(walk(im, f, 16), 6);
    mem_release(&im->mem);
    free(im);
}

static void test_walk_unmapped(void **state)
{
    (void)state;
    struct image *im = malloc(sizeof *im);
    struct cpy_raw_frame f[16];
    build(im);
    put64(im, A_FRAME(1) + im->o.interpreter_frame.previous, 0x7777000);
    assert_int_equal(walk(im, f, 16), PYS_E_BADADDR);
    put64(im, A_FRAME(1) + im->o.interpreter_frame.previous, A_FRAME(2) + 3);
    assert_int_equal(walk(im, f, 16), PYS_E_CORRUPT); /* misaligned frame */
    mem_release(&im->mem);
    free(im);
}

static void test_walk_base_frame(void **state)
{
    (void)state;
    struct image *im = malloc(sizeof *im);
    struct cpy_raw_frame f[16];
    build(im);
    /* The chain ends early (a torn read): not at the base frame. */
    put64(im, A_FRAME(1) + im->o.interpreter_frame.previous, 0);
    assert_int_equal(walk(im, f, 16), PYS_E_CORRUPT);
    mem_release(&im->mem);
    free(im);
}

/* The thread's current frame is memory being reused (torn): its owner byte
 * is none CPython uses. */
static void test_walk_owner_out_of_range(void **state)
{
    (void)state;
    struct image *im = malloc(sizeof *im);
    struct cpy_raw_frame f[16];
    build(im);
    *at(im, A_FRAME(0) + im->o.interpreter_frame.owner) = 186;
    assert_int_equal(walk(im, f, 16), PYS_E_CORRUPT);
    *at(im, A_FRAME(0) + im->o.interpreter_frame.owner) = 4; /* 3.14's CSTACK */
    assert_int_equal(walk(im, f, 16), 4);
    mem_release(&im->mem);
    free(im);
}

/* Without a base frame (3.11-3.14), a chain of one frame with no code and
 * no caller (memory being reused, read as the current frame) is torn, not
 * an entry frame with no Python frame above it: the thread must not be
 * shown with an empty stack. An entry frame with code still reads. */
static void test_walk_codeless_bottom(void **state)
{
    (void)state;
    struct image *im = malloc(sizeof *im);
    struct cpy_raw_frame f[16];
    build(im);
    im->o.thread_state.base_frame = CPY_ABSENT;
    put64(im, A_FRAME(0) + im->o.interpreter_frame.previous, 0);
    *at(im, A_FRAME(0) + im->o.interpreter_frame.owner) = 3;
    assert_int_equal(walk(im, f, 16), 1);
    assert_int_equal(f[0].shim, 1);
    put64(im, A_FRAME(0) + im->o.interpreter_frame.executable, 0);
    assert_int_equal(walk(im, f, 16), PYS_E_CORRUPT);
    *at(im, A_FRAME(0) + im->o.interpreter_frame.owner) = 0;
    assert_int_equal(walk(im, f, 16), PYS_E_CORRUPT);
    mem_release(&im->mem);
    free(im);
}

static void test_walk_marks_shims(void **state)
{
    (void)state;
    struct image *im = malloc(sizeof *im);
    struct cpy_raw_frame f[16];
    build(im);
    *at(im, A_FRAME(1) + im->o.interpreter_frame.owner) = 3; /* an entry frame */
    assert_int_equal(walk(im, f, 16), 4);
    assert_int_equal(f[0].shim, 0);
    assert_int_equal(f[1].shim, 1);
    assert_int_equal(f[2].shim, 0);
    mem_release(&im->mem);
    free(im);
}

static void test_walk_in_chunk(void **state)
{
    (void)state;
    struct image *im = malloc(sizeof *im);
    struct cpy_raw_frame f[16];
    build(im);
    /* Move the innermost frame into a data stack chunk; make its heap copy
     * garbage, so a walk that reads it from anywhere but the chunk fails. */
    uint64_t fa = CHUNK + 24;
    put64(im, CHUNK + 8, CHUNK_SIZE);
    put_frame(im, fa, A_FRAME(1), 5, 0);
    memset(at(im, A_FRAME(0)), 0xff, 88);
    put_current(im, CHUNK, fa);
    /* Past the thread state: one read of the chunk's used part (header
     * included), then the two heap frames. The frame inside the chunk comes
     * from the chunk's copy; the base frame is not read at all (garbage
     * here), neither with the thread state nor on its own. */
    memset(at(im, A_BASE), 0xff, 88);
    uint64_t before = im->mem.stats.reads;
    assert_int_equal(walk(im, f, 16), 4);
    assert_int_equal(f[0].addr, fa);
    uint64_t tstate_reads = 1;
    assert_int_equal(im->mem.stats.reads - before - tstate_reads, 3);
    /* A chunk smaller than its used part is refused. */
    put64(im, CHUNK + 8, 64);
    assert_int_equal(walk(im, f, 16), PYS_E_CORRUPT);
    put64(im, CHUNK + 8, CHUNK_SIZE);
    /* So is an older chunk claiming 2^40 slots in use. */
    uint64_t older = CHUNK + 0x1000;
    put64(im, CHUNK, older);
    put64(im, older + 8, CHUNK_SIZE);
    put64(im, older + 16, 1ull << 40);
    assert_int_equal(walk(im, f, 16), PYS_E_CORRUPT);
    mem_release(&im->mem);
    free(im);
}

/* A whole walk copies the data stack only as far as the frames it may keep
 * need (four smallest frames each): below that, frames are read on their
 * own, and the walk is the same. */
static void test_walk_copy_budget(void **state)
{
    (void)state;
    struct image *im = malloc(sizeof *im);
    struct cpy_raw_frame f[4096];
    uint8_t ts[4096];
    struct cpy_thread t;
    struct cpy_stack st;
    build(im);
    size_t fsize = (size_t)im->o.interpreter_frame.size;
    /* The current chunk's used part is past the budget of a 16-frame walk;
     * its top frame's caller is in the older chunk, whose caller is the
     * heap's A_FRAME(1). */
    uint64_t older = CHUNK + 0x4000, fa = CHUNK + 24 + 16 * 4 * fsize, fb = older + 24;
    put64(im, CHUNK, older);
    put64(im, CHUNK + 8, CHUNK_SIZE);
    put_chunk(im, older, 0);
    put_frame(im, fa, fb, 5, 0);
    put_frame(im, fb, A_FRAME(1), 4, 0);
    put_current(im, CHUNK, fa);
    for (int k = 0; k < 2; k++) {
        size_t max = k == 0 ? 16 : 4096;
        memset(&st, 0, sizeof st);
        assert_int_equal(cpy_thread_read(&im->mem, &im->o, &im->sym, A_TSTATE, ts, &t), 0);
        assert_int_equal(cpy_stack_walk(&im->mem, &im->o, &t, &st, f, max), 5);
        assert_int_equal(f[0].addr, fa);
        assert_int_equal(f[1].addr, fb);
        assert_int_equal(f[2].addr, A_FRAME(1));
        assert_int_equal(f[4].addr, A_BASE);
        assert_int_equal(st.cut, 0);
        /* 16 frames: the current chunk alone; 4096: both. */
        assert_int_equal(st.nchunks, k == 0 ? 1 : 2);
        cpy_stack_release(&st);
    }
    mem_release(&im->mem);
    free(im);
}

/* A walk to a stop in an older chunk copies the chunks down to that one
 * and no further: an even older chunk that cannot be read is never seen. */
static void test_walk_to_older_chunk(void **state)
{
    (void)state;
    struct image *im = malloc(sizeof *im);
    struct cpy_raw_frame f[16];
    uint8_t ts[4096];
    struct cpy_thread t;
    struct cpy_stack st;
    uint64_t prev = 0;
    build(im);
    /* Current chunk at CHUNK: the top frame; older chunk after it: its
     * caller (the stop), whose caller is the heap's A_FRAME(1); the oldest
     * after that claims 2^40 slots in use. */
    uint64_t cur = CHUNK, older = CHUNK + CHUNK_SIZE, oldest = CHUNK + 2 * CHUNK_SIZE;
    uint64_t top = cur + 24, stop = older + 24;
    put64(im, cur, older);
    put64(im, cur + 8, 0x1000);
    put_frame(im, top, stop, 5, 0);
    put_chunk(im, older, oldest);
    put_frame(im, stop, A_FRAME(1), 4, 0);
    put64(im, oldest + 8, 0x1000);
    put64(im, oldest + 16, 1ull << 40);
    put_current(im, cur, top);
    memset(&st, 0, sizeof st);
    assert_int_equal(cpy_thread_read(&im->mem, &im->o, &im->sym, A_TSTATE, ts, &t), 0);
    /* The current chunk (one read), then the older one's first CHUNK_SIZE
     * bytes, which hold its header and its frames (one read). */
    uint64_t before = im->mem.stats.reads;
    assert_int_equal(cpy_stack_walk_to(&im->mem, &im->o, &t, &st, stop, f, 16, &prev), 2);
    assert_int_equal(im->mem.stats.reads - before, 2);
    assert_int_equal(f[0].addr, top);
    assert_int_equal(f[1].addr, stop);
    assert_int_equal(prev, A_FRAME(1));
    /* A whole walk copies every chunk: the oldest one's claim is refused. */
    assert_int_equal(cpy_stack_walk(&im->mem, &im->o, &t, &st, f, 16), PYS_E_CORRUPT);
    cpy_stack_release(&st);
    mem_release(&im->mem);
    free(im);
}

/* Chunks older than the current one, read past the prefetch (older_once):
 * the next walk reads those the last one met after the first in the same
 * call as the first, and still follows the chunks' own links when one has
 * moved since. */
static void test_walk_reads_ahead(void **state)
{
    (void)state;
    struct image *im = malloc(sizeof *im);
    struct cpy_raw_frame f[16];
    uint8_t ts[4096];
    struct cpy_thread t;
    struct cpy_stack st;
    build(im);
    uint64_t cur = CHUNK, mid = CHUNK + CHUNK_SIZE, low = CHUNK + 2 * CHUNK_SIZE;
    uint64_t moved = CHUNK + 3 * CHUNK_SIZE;
    uint64_t top = cur + 24;
    put64(im, cur, mid);
    put64(im, cur + 8, CHUNK_SIZE);
    put_frame(im, top, mid + 24, 5, 0);
    put_chunk(im, mid, low);
    put_frame(im, mid + 24, low + 24, 4, 0);
    put_chunk(im, low, 0);
    put_frame(im, low + 24, A_FRAME(1), 4, 0);
    put_current(im, cur, top);
    memset(&st, 0, sizeof st);
    st.older_once = 1;
    assert_int_equal(cpy_thread_read(&im->mem, &im->o, &im->sym, A_TSTATE, ts, &t), 0);

    uint64_t before = im->mem.stats.reads;
    assert_int_equal(cpy_stack_walk(&im->mem, &im->o, &t, &st, f, 16), 6);
    uint64_t first = im->mem.stats.reads - before;
    assert_int_equal(f[1].addr, mid + 24);
    assert_int_equal(f[2].addr, low + 24);
    assert_int_equal(f[3].addr, A_FRAME(1));
    /* The same chunks: both older ones come with the current one. */
    before = im->mem.stats.reads;
    assert_int_equal(cpy_stack_walk(&im->mem, &im->o, &t, &st, f, 16), 6);
    assert_int_equal(im->mem.stats.reads - before, first - 2);
    assert_int_equal(f[2].addr, low + 24);
    /* The oldest chunk moved (the old place still readable, now garbage):
     * the walk takes the link, not the guess. */
    memcpy(at(im, moved), at(im, low), 24 + 88);
    put_frame(im, moved + 24, A_FRAME(1), 4, 0);
    memset(at(im, low), 0xff, 24 + 88);
    put64(im, mid, moved);
    put_frame(im, mid + 24, moved + 24, 4, 0);
    assert_int_equal(cpy_stack_walk(&im->mem, &im->o, &t, &st, f, 16), 6);
    assert_int_equal(f[1].addr, mid + 24);
    assert_int_equal(f[2].addr, moved + 24);
    assert_int_equal(f[3].addr, A_FRAME(1));
    cpy_stack_release(&st);
    mem_release(&im->mem);
    free(im);
}

/* Reads of the walks of the thread in im from st: the frames are checked
 * to be the chain a (current) -> b -> c, from each chunk's first slot. */
static uint64_t walk_reads(struct image *im, struct cpy_stack *st, uint64_t a, uint64_t b,
                           uint64_t c)
{
    struct cpy_raw_frame f[16];
    uint8_t ts[4096];
    struct cpy_thread t;
    assert_int_equal(cpy_thread_read(&im->mem, &im->o, &im->sym, A_TSTATE, ts, &t), 0);
    uint64_t before = im->mem.stats.reads;
    int n = cpy_stack_walk(&im->mem, &im->o, &t, st, f, 16);
    assert_int_equal(n, c ? 6 : 5);
    assert_int_equal(f[0].addr, a + 24);
    assert_int_equal(f[1].addr, b + 24);
    if (c)
        assert_int_equal(f[2].addr, c + 24);
    return im->mem.stats.reads - before;
}

/* A stack that grows into new chunks, mapped right below those the last
 * walk met: the new current chunk's read guesses the chunks between it and
 * the known ones and reads them all in one call; a stack that unwound keeps
 * what it knew for when it grows back; a wrong guess is not taken. */
static void test_walk_guesses_older(void **state)
{
    (void)state;
    struct image *im = malloc(sizeof *im);
    struct cpy_stack st, fresh;
    build(im);
    uint64_t a = CHUNK, b = CHUNK + CHUNK_SIZE, c = CHUNK + 2 * CHUNK_SIZE;
    uint64_t d = CHUNK + 3 * CHUNK_SIZE;
    /* b (current) -> c: the walk meets c. */
    put_chunk(im, c, 0);
    put_frame(im, c + 24, A_FRAME(1), 4, 0);
    put64(im, b + 8, CHUNK_SIZE);
    put_frame(im, b + 24, c + 24, 4, 0);
    put64(im, b, c);
    put_current(im, b, b + 24);
    memset(&st, 0, sizeof st);
    st.older_once = 1;
    walk_reads(im, &st, b, c, 0);
    /* Grown into a: a (current) -> b -> c. b is guessed, c is known. */
    put64(im, a, b);
    put64(im, a + 8, CHUNK_SIZE);
    put_frame(im, a + 24, b + 24, 5, 0);
    put_current(im, a, a + 24);
    put64(im, b + 16, (24 + 88) / 8);
    memset(&fresh, 0, sizeof fresh);
    fresh.older_once = 1;
    uint64_t unknown = walk_reads(im, &fresh, a, b, c);
    assert_int_equal(walk_reads(im, &st, a, b, c), unknown - 2);
    /* Unwound to c alone, then grown back: still one call. */
    put_current(im, c, c + 24);
    struct cpy_raw_frame f[16];
    uint8_t ts[4096];
    struct cpy_thread t;
    assert_int_equal(cpy_thread_read(&im->mem, &im->o, &im->sym, A_TSTATE, ts, &t), 0);
    assert_int_equal(cpy_stack_walk(&im->mem, &im->o, &t, &st, f, 16), 4);
    put_current(im, a, a + 24);
    assert_int_equal(walk_reads(im, &st, a, b, c), unknown - 2);
    /* a now calls from d: b, read as expected, is not taken. */
    memcpy(at(im, d), at(im, b), 24 + 88);
    put_frame(im, d + 24, c + 24, 4, 0);
    memset(at(im, b), 0xff, 24 + 88);
    put64(im, a, d);
    put_frame(im, a + 24, d + 24, 5, 0);
    walk_reads(im, &st, a, d, c);
    cpy_stack_release(&st);
    cpy_stack_release(&fresh);
    mem_release(&im->mem);
    free(im);
}

/* A walk down to a stop in the current chunk, asked for a second copy: the
 * frames above the stop twice and the words after them in one read; the
 * check against that copy sees a frame that changed between the two. */
static void test_walk_to_second_copy(void **state)
{
    (void)state;
    struct image *im = malloc(sizeof *im);
    struct cpy_raw_frame f[16];
    uint8_t ts[4096];
    struct cpy_thread t;
    struct cpy_stack st;
    uint64_t prev = 0, tid = 0;
    build(im);
    const struct cpy_frame_offsets *fo = &im->o.interpreter_frame;
    uint64_t stop = CHUNK + 24, mid = stop + 88, top = mid + 88;
    put64(im, CHUNK + 8, CHUNK_SIZE);
    put_frame(im, top, mid, 5, 0);
    put_frame(im, mid, stop, 4, 0);
    put_frame(im, stop, A_FRAME(1), 2, 0);
    put_current(im, CHUNK, top);
    memset(&st, 0, sizeof st);
    assert_int_equal(cpy_thread_read(&im->mem, &im->o, &im->sym, A_TSTATE, ts, &t), 0);
    st.after[0] = (struct mem_seg){A_TSTATE + im->o.thread_state.thread_id, &tid, 8};
    st.nafter = 1;

    uint64_t before = im->mem.stats.reads;
    assert_int_equal(cpy_stack_walk_to(&im->mem, &im->o, &t, &st, stop, f, 16, &prev), 3);
    assert_int_equal(im->mem.stats.reads - before, 1);
    assert_int_equal(prev, A_FRAME(1));
    assert_int_equal(tid, 0x7f00);
    assert_int_equal(st.second_addr, stop);
    assert_int_equal(st.second_len, top + 88 - stop);
    assert_int_equal(prof_torn_own_copy(&im->o, &st, f, 0, 3, A_FRAME(1), 0), 1);
    /* What the second copy would hold had the target moved meanwhile: a
     * caller that changed, a code object that changed, or another caller
     * for the last frame. */
    uint8_t *mid_prev = st.second + (mid - stop) + fo->previous;
    uint8_t *top_code = st.second + (top - stop) + fo->executable;
    mid_prev[0] ^= 0x40;
    assert_int_equal(prof_torn_own_copy(&im->o, &st, f, 0, 3, A_FRAME(1), 0), 0);
    mid_prev[0] ^= 0x40;
    top_code[1] ^= 0x10;
    assert_int_equal(prof_torn_own_copy(&im->o, &st, f, 0, 3, A_FRAME(1), 0), 0);
    top_code[1] ^= 0x10;
    assert_int_equal(prof_torn_own_copy(&im->o, &st, f, 0, 3, A_FRAME(2), 0), 0);
    /* Frames the copy does not hold: no answer. */
    struct cpy_raw_frame outside[2] = {f[2], {.addr = A_FRAME(1)}};
    assert_int_equal(prof_torn_own_copy(&im->o, &st, outside, 0, 2, A_BASE, 0), -1);
    /* Not asked for: one copy, and nothing to check against. */
    st.nafter = 0;
    assert_int_equal(cpy_stack_walk_to(&im->mem, &im->o, &t, &st, stop, f, 16, &prev), 3);
    assert_int_equal(prof_torn_own_copy(&im->o, &st, f, 0, 3, A_FRAME(1), 0), -1);
    cpy_stack_release(&st);
    mem_release(&im->mem);
    free(im);
}

/* Frames outside every copy, walked down a page (a stretch of data stack no
 * copy holds): the first is read alone, the second with the rest of its
 * page below it, and the others come from that read. */
static void test_walk_window(void **state)
{
    (void)state;
    struct image *im = malloc(sizeof *im);
    struct cpy_raw_frame f[16];
    build(im);
    enum { N = 8 };
    for (uint64_t i = 0; i < N; i++) {
        uint64_t a = HEAP + 0x3800 - i * 0x100;
        put_frame(im, a, i + 1 < N ? a - 0x100 : A_BASE, 2, 0);
    }
    put64(im, A_TSTATE + im->o.thread_state.current_frame, HEAP + 0x3800);
    uint64_t before = im->mem.stats.reads;
    assert_int_equal(walk(im, f, 16), N + 1);
    for (uint64_t i = 0; i < N; i++)
        assert_int_equal(f[i].addr, HEAP + 0x3800 - i * 0x100);
    uint64_t tstate_reads = 1;
    assert_int_equal(im->mem.stats.reads - before - tstate_reads, 2);
    mem_release(&im->mem);
    free(im);
}

static void test_code_checks(void **state)
{
    (void)state;
    struct image *im = malloc(sizeof *im);
    struct cpy_code c;
    struct cpy_raw_frame fr = {A_FRAME(0), A_CODE, 0, 0, 0, 0, 0, 0, 0};
    int32_t lasti;
    struct cpy_location loc;
    build(im);
    /* Not a code object. */
    put64(im, A_CODE + im->o.pyobject.ob_type, A_TYPE + 8);
    assert_int_equal(cpy_code_read(&im->mem, &im->o, &im->sym, A_CODE, &c), PYS_E_CORRUPT);
    put64(im, A_CODE + im->o.pyobject.ob_type, A_TYPE);
    /* Negative string length. */
    put64(im, A_QUALNAME + im->o.unicode_object.length, (uint64_t)-5);
    assert_int_equal(cpy_code_read(&im->mem, &im->o, &im->sym, A_CODE, &c), PYS_E_CORRUPT);
    put64(im, A_QUALNAME + im->o.unicode_object.length, 7);
    /* Instruction pointer outside the bytecode. */
    assert_int_equal(cpy_code_read(&im->mem, &im->o, &im->sym, A_CODE, &c), 0);
    fr.instr_ptr = A_CODE + im->o.code_object.co_code_adaptive + 2 * 6;
    assert_int_equal(cpy_code_locate(&im->o, &c, &fr, &lasti, &loc), PYS_E_CORRUPT);
    fr.instr_ptr = A_CODE;
    assert_int_equal(cpy_code_locate(&im->o, &c, &fr, &lasti, &loc), PYS_E_CORRUPT);
    /* A thread-owned frame still in its prologue is incomplete. */
    fr.instr_ptr = A_CODE + im->o.code_object.co_code_adaptive;
    assert_int_equal(cpy_frame_incomplete(&im->o, &c, &fr), 1);
    fr.owner = 1; /* generator frames never are */
    assert_int_equal(cpy_frame_incomplete(&im->o, &c, &fr), 0);
    cpy_code_release(&c);
    mem_release(&im->mem);
    free(im);
}

/* Without a generation counter (3.8-3.13), a cached code object is checked
 * after the frames were read, from the batch's second copies when it has
 * them: a code object whose names changed there (freed, another allocated
 * at its address) is found stale. */
static void test_code_rechecked(void **state)
{
    (void)state;
    struct image *im = malloc(sizeof *im);
    struct prof_codecache cc;
    struct prof_intern in;
    const struct prof_code *pc;
    uint64_t addr = A_CODE, word;
    build(im);
    memset(&cc, 0, sizeof cc);
    memset(&in, 0, sizeof in);
    assert_int_equal(prof_codecache_get(&cc, &in, &im->mem, &im->o, &im->sym, A_CODE, &pc), 0);
    /* No second copies asked for: to check by reading. */
    size_t missing;
    mem_prefetch_begin(&im->mem);
    /* A snapshot's batch (and its second copies) replays what the last one
     * read: each reads the code object. */
    assert_int_equal(mem_read_u64(&im->mem, A_CODE, &word), 0);
    assert_int_equal(prof_codecache_rechecked(&cc, &im->mem, &im->o, &addr, 1, &missing), 0);
    assert_int_equal(missing, 1);
    prof_codecache_hint(&cc, &im->mem, &im->o, &addr, 1);
    mem_prefetch_end(&im->mem);
    /* Unchanged. */
    mem_prefetch_begin(&im->mem);
    /* A snapshot's batch (and its second copies) replays what the last one
     * read: each reads the code object. */
    assert_int_equal(mem_read_u64(&im->mem, A_CODE, &word), 0);
    assert_int_equal(prof_codecache_rechecked(&cc, &im->mem, &im->o, &addr, 1, &missing), 0);
    assert_int_equal(missing, 0);
    prof_codecache_hint(&cc, &im->mem, &im->o, &addr, 1);
    mem_prefetch_end(&im->mem);
    /* Another object's names: its qualname is longer. */
    put64(im, A_QUALNAME + im->o.unicode_object.length, 8);
    mem_prefetch_begin(&im->mem);
    /* A snapshot's batch (and its second copies) replays what the last one
     * read: each reads the code object. */
    assert_int_equal(mem_read_u64(&im->mem, A_CODE, &word), 0);
    assert_int_equal(prof_codecache_rechecked(&cc, &im->mem, &im->o, &addr, 1, &missing), 1);
    assert_int_equal(missing, 0);
    mem_prefetch_end(&im->mem);
    prof_codecache_release(&cc);
    prof_intern_release(&in);
    mem_release(&im->mem);
    free(im);
}

static void test_unicode(void **state)
{
    (void)state;
    struct image *im = malloc(sizeof *im);
    char *s = NULL;
    build(im);
    /* "função_λ" in UCS-2, then a lone surrogate. */
    const uint16_t u[] = {'f', 'u', 'n', 0xe7, 0xe3, 'o', '_', 0x3bb, 0xd800};
    put_str(im, A_UNAME, u, 9, 2);
    assert_int_equal(cpy_unicode_read(&im->mem, &im->o, A_UNAME, 100, &s), 0);
    assert_string_equal(s, "fun\xc3\xa7\xc3\xa3o_\xce\xbb\xef\xbf\xbd");
    free(s);
    /* Cut at max_chars code points. */
    assert_int_equal(cpy_unicode_read(&im->mem, &im->o, A_UNAME, 4, &s), 0);
    assert_string_equal(s, "fun\xc3\xa7");
    free(s);
    /* A kind of 3 does not exist; non-compact strings are refused. */
    put32(im, A_UNAME + im->o.unicode_object.state, (3u << 2) | (1u << 5));
    assert_int_equal(cpy_unicode_read(&im->mem, &im->o, A_UNAME, 100, &s), PYS_E_CORRUPT);
    put32(im, A_UNAME + im->o.unicode_object.state, (2u << 2));
    assert_int_equal(cpy_unicode_read(&im->mem, &im->o, A_UNAME, 100, &s), PYS_E_CORRUPT);
    /* A length running off the mapped memory. */
    put_str(im, A_UNAME, u, 9, 2);
    put64(im, A_UNAME + im->o.unicode_object.length, 1u << 20);
    assert_int_equal(cpy_unicode_read(&im->mem, &im->o, A_UNAME, 1u << 20, &s), PYS_E_BADADDR);
    mem_release(&im->mem);
    free(im);
}

static void test_exception_status(void **state)
{
    (void)state;
    struct image *im = malloc(sizeof *im);
    uint8_t ts[4096];
    struct cpy_thread t;
    build(im);
    const struct cpy_offsets *o = &im->o;
    uint64_t item = A_TSTATE + o->thread_state.exc_state;
    put64(im, A_TSTATE + o->thread_state.exc_info, item);
    assert_int_equal(cpy_thread_read(&im->mem, o, &im->sym, A_TSTATE, ts, &t), 0);
    assert_int_equal(t.has_exception, 0);
    assert_int_equal(t.native_id, 4242);
    /* Handled in an outer item (a generator's own item on top). */
    uint64_t outer = HEAP + 0x5000;
    put64(im, item + o->err_stackitem.previous_item, outer);
    put64(im, outer + o->err_stackitem.exc_value, HEAP + 0x5100);
    assert_int_equal(cpy_thread_read(&im->mem, o, &im->sym, A_TSTATE, ts, &t), 0);
    assert_int_equal(t.has_exception, 1);
    /* A cyclic item chain ends in an error, not a hang. */
    put64(im, outer + o->err_stackitem.exc_value, 0);
    put64(im, outer + o->err_stackitem.previous_item, item);
    assert_int_equal(cpy_thread_read(&im->mem, o, &im->sym, A_TSTATE, ts, &t), PYS_E_TOODEEP);
    mem_release(&im->mem);
    free(im);
}

/* A session over the image with the frame cache on, as attach would make
 * it (without attaching: the image has no runtime). */
static struct pys_session *fcache_session(struct image *im)
{
    struct pys_session *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->off = im->o;
    s->sym = im->sym;
    mem_init_image(&s->mem, im->regions, 2);
    s->opt.max_frames = PYS_MAX_FRAMES_DEFAULT;
    assert_int_equal(prof_walker_init(&s->walker, &s->off, PYS_MAX_FRAMES_DEFAULT), 0);
    assert_int_equal(prof_resolved_init(&s->resolved, PYS_MAX_FRAMES_DEFAULT), 0);
    s->use_fcache = 1;
    s->snapshots = 1;
    return s;
}

static void fcache_session_free(struct pys_session *s)
{
    prof_fcache_release(&s->fcache);
    prof_torn_release(&s->torn);
    mem_release(&s->mem);
    prof_walker_release(&s->walker);
    prof_resolved_release(&s->resolved);
    free(s);
}

/* Read the image's thread into *t and, if asked to, walk it through the
 * cache as a snapshot would (the walk's result or error). */
static int fcache_walk(struct pys_session *s, struct cpy_thread *t, uint8_t *ts, int walk)
{
    assert_int_equal(cpy_thread_read(&s->mem, &s->off, &s->sym, A_TSTATE, ts, t), 0);
    if (!walk)
        return 0;
    s->snapshots++;
    struct prof_walk w = {.mark = mem_mark(&s->mem), .tail_start = SIZE_MAX};
    int n = prof_fcache_walk(s, &w, t);
    if (n >= 0)
        prof_fcache_resolved(s, &w, (size_t)n, 1);
    return n;
}

static uint64_t get64(struct image *im, uint64_t addr)
{
    uint64_t v;
    memcpy(&v, at(im, addr), 8);
    return v;
}

/* A thread with no frame (one starting or ending): the cache keeps an empty
 * chain, whose entry has no array yet (UBSan: a copy of no bytes to NULL is
 * undefined all the same). */
static void test_fcache_thread_without_frames(void **state)
{
    (void)state;
    struct image *im = malloc(sizeof *im);
    uint8_t ts[4096];
    struct cpy_thread t;
    build(im);
    put64(im, A_TSTATE + im->o.thread_state.current_frame, 0);
    struct pys_session *s = fcache_session(im);
    for (int i = 0; i < 3; i++)
        assert_int_equal(fcache_walk(s, &t, ts, 1), 0);
    assert_int_equal(s->fcache.count, 1);
    fcache_session_free(s);
    free(im);
}

/* The cache entry of the image's thread. */
static const struct prof_fcache_entry *entry_of(const struct pys_session *s)
{
    for (size_t i = 0; i < s->fcache.cap; i++)
        if (s->fcache.v[i].tstate == A_TSTATE)
            return &s->fcache.v[i];
    fail();
    return NULL;
}

/* Write anchor a and sequence number sq into the image's thread, as another
 * profiler would, until pystrobe finds the thread has a second writer, a
 * walk following each time it does not yet: how many writes that took
 * (each a strike), or 0 if still not found after twice the strikes needed. */
static int writes_until_found(struct pys_session *s, struct image *im, uint64_t a, uint64_t sq)
{
    uint8_t ts[4096];
    struct cpy_thread t;
    for (int i = 1; i <= 2 * PROF_FCACHE_OTHER_STRIKES; i++) {
        put64(im, A_TSTATE + im->o.thread_state.last_profiled_frame, a);
        put64(im, A_TSTATE + im->o.thread_state.last_profiled_frame_seq, sq);
        assert_int_equal(fcache_walk(s, &t, ts, 0), 0);
        if (!prof_fcache_usable(s, &t))
            return i;
        uint64_t misses = s->fcache.misses;
        assert_int_equal(fcache_walk(s, &t, ts, 1), 4);
        assert_int_equal(s->fcache.misses, misses + 1); /* the anchor was not used */
    }
    return 0;
}

/*
 * Another profiler writing the anchor (CPython's own writes the thread's
 * current frame): found when the anchor is, a few times, one the
 * interpreter could not have moved pystrobe's to (each time the walk is a
 * whole one), and from then on the anchor is left alone.
 */
static void test_fcache_other_writer(void **state)
{
    (void)state;
    struct image *im = malloc(sizeof *im);
    uint8_t ts[4096];
    struct cpy_thread t;
    build(im);
    const uint64_t lpf = A_TSTATE + im->o.thread_state.last_profiled_frame;
    const uint64_t seq = A_TSTATE + im->o.thread_state.last_profiled_frame_seq;
    put64(im, lpf, 0);
    put64(im, seq, 7);
    struct pys_session *s = fcache_session(im);

    /* The first walk only looks; the second anchors at the top's caller. */
    assert_int_equal(fcache_walk(s, &t, ts, 1), 4);
    assert_int_equal(get64(im, lpf), 0);
    assert_int_equal(fcache_walk(s, &t, ts, 1), 4);
    assert_int_equal(get64(im, lpf), A_FRAME(1));
    assert_int_equal(s->mem.stats.writes, 1);

    /* What the interpreter does: the anchor returned, moved to its caller. */
    put64(im, lpf, A_FRAME(2));
    put64(im, seq, 8);
    assert_int_equal(fcache_walk(s, &t, ts, 0), 0);
    assert_int_equal(prof_fcache_usable(s, &t), 1);
    /* Read between the interpreter's two stores: moved, not yet counted. */
    put64(im, seq, 7);
    assert_int_equal(fcache_walk(s, &t, ts, 0), 0);
    assert_int_equal(prof_fcache_usable(s, &t), 1);
    assert_int_equal(entry_of(s)->strikes + s->fcache.other_writers, 0);
    /* Nor can it move the anchor up, to the top frame: another writer did. */
    assert_int_equal(writes_until_found(s, im, A_FRAME(0), 9), PROF_FCACHE_OTHER_STRIKES);
    assert_int_equal(s->fcache.other_writers, 1);
    /* From then on the thread is not walked with the cache, whatever its
     * anchor says, counted once, and its anchor is not written again. */
    uint64_t writes = s->mem.stats.writes;
    put64(im, lpf, A_FRAME(1));
    put64(im, seq, 7);
    assert_int_equal(fcache_walk(s, &t, ts, 0), 0);
    assert_int_equal(prof_fcache_usable(s, &t), 0);
    assert_int_equal(s->fcache.other_writers, 1);
    assert_int_equal(s->mem.stats.writes, writes);
    fcache_session_free(s);

    /* A thread seen with an anchor pystrobe did not write: kept at the
     * first walk, and found moved without a move counted. */
    put64(im, lpf, A_FRAME(0));
    s = fcache_session(im);
    assert_int_equal(fcache_walk(s, &t, ts, 1), 4);
    assert_int_equal(get64(im, lpf), A_FRAME(0));
    assert_int_equal(s->mem.stats.writes, 0);
    assert_int_equal(writes_until_found(s, im, A_FRAME(1) + 0x40, 7), PROF_FCACHE_OTHER_STRIKES);
    fcache_session_free(s);

    /* A frame read as it returned (its code cleared) is followed as any. */
    put64(im, A_FRAME(2) + im->o.interpreter_frame.executable, 0);
    put64(im, lpf, 0);
    put64(im, seq, 7);
    s = fcache_session(im);
    assert_int_equal(fcache_walk(s, &t, ts, 1), 4);
    assert_int_equal(fcache_walk(s, &t, ts, 1), 4);
    assert_int_equal(get64(im, lpf), A_FRAME(1));
    put64(im, lpf, A_BASE);
    put64(im, seq, 9);
    assert_int_equal(fcache_walk(s, &t, ts, 0), 0);
    assert_int_equal(prof_fcache_usable(s, &t), 1);
    assert_int_equal(entry_of(s)->strikes, 0);
    fcache_session_free(s);
    put64(im, A_FRAME(2) + im->o.interpreter_frame.executable, A_CODE | 1);

    /* Moves end at an entry frame (C called Python there): it is popped
     * without moving the anchor. However many moves were counted, none
     * took the anchor back up to the top. */
    *at(im, A_FRAME(2) + im->o.interpreter_frame.owner) = 3;
    put64(im, lpf, 0);
    put64(im, seq, 7);
    s = fcache_session(im);
    assert_int_equal(fcache_walk(s, &t, ts, 1), 4);
    assert_int_equal(fcache_walk(s, &t, ts, 1), 4);
    assert_int_equal(get64(im, lpf), A_FRAME(1));
    put64(im, lpf, A_FRAME(2));
    put64(im, seq, 8);
    assert_int_equal(fcache_walk(s, &t, ts, 0), 0);
    assert_int_equal(prof_fcache_usable(s, &t), 1);
    put64(im, lpf, A_FRAME(0));
    put64(im, seq, 12);
    assert_int_equal(fcache_walk(s, &t, ts, 0), 0);
    prof_fcache_usable(s, &t);
    assert_int_equal(entry_of(s)->strikes, 1);
    fcache_session_free(s);
    free(im);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk_ok),          cmocka_unit_test(test_walk_cycle),
        cmocka_unit_test(test_walk_cut_long),    cmocka_unit_test(test_walk_cut_cycle),
        cmocka_unit_test(test_walk_unmapped),
        cmocka_unit_test(test_walk_base_frame),  cmocka_unit_test(test_walk_marks_shims),
        cmocka_unit_test(test_walk_owner_out_of_range),
        cmocka_unit_test(test_walk_codeless_bottom),
        cmocka_unit_test(test_walk_in_chunk),    cmocka_unit_test(test_walk_window),
        cmocka_unit_test(test_walk_to_older_chunk),
        cmocka_unit_test(test_walk_reads_ahead), cmocka_unit_test(test_walk_guesses_older),
        cmocka_unit_test(test_walk_copy_budget),
        cmocka_unit_test(test_walk_to_second_copy),
        cmocka_unit_test(test_code_checks),
        cmocka_unit_test(test_code_rechecked),
        cmocka_unit_test(test_unicode),
        cmocka_unit_test(test_exception_status),
        cmocka_unit_test(test_fcache_thread_without_frames),
        cmocka_unit_test(test_fcache_other_writer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
