/*
 * Deterministic tests of the sampling core on recorded images of real
 * targets (tests/images, made by `make images`: tests/images/aba.py under
 * CPython 3.8 to 3.15, stopped twice, once in each of its two call chains,
 * whose frames occupy the same addresses).
 *
 * 1. Replayed, each image gives exactly the stack the program was at
 *    (file, function, line), snapshot after snapshot.
 * 2. The torn walk: a source that serves the reads of one snapshot from
 *    image A up to read n and from image B after (and A, B, A again), as a
 *    target moving on while it is read. For every n, the snapshot must give
 *    A's stack, B's stack, or a failed thread: never a mix. A read is one
 *    piece of a system call (one segment of a batch).
 * 3. The same for tests/images/pos.py (3.15), whose two moments differ only
 *    above the frame cache's anchor and in the anchor's position.
 * 4. Images doctored so that only the shape checks can refuse their stack.
 * 5. 3.8-3.10 stopped as a frame is entered (tests/images/enter-3.X.img).
 * 6. The torn walk on tests/images/splice.py (3.11-3.13): two chains of
 *    equal-size frames, one a call deeper: never one chain under the other.
 *    On tests/images/tops.py (3.11-3.15), chains with leaves of their own:
 *    never one's leaf on the other's callers, copied in one piece paused
 *    between them and checked by a later read at the first moment again,
 *    or in a batch as slow as every other (not judged paused).
 * 7. A stack a frame deeper than the sample before is read and checked
 *    within the batch (test_grow_near; test_grow for one many frames
 *    deeper, whose second copies must reach it).
 * 8. Stopped moments that checks once refused: 3.13+'s __init__ shim
 *    (init-3.X.img); 3.11 and 3.12 entering the evaluation loop
 *    from C (enterc-3.11/3.12.img); 3.12 inside a yield, the
 *    generator's frame unlinked and still current (yield-3.12.img);
 *    3.8-3.10 entering a new thread's first frame (start-3.X.img).
 * 9. Frames on the heap (tests/images/heap.py, 3.11-3.15): a generator
 *    pipeline and a coroutine chain, read at rest, torn in every way above,
 *    switched back during the read after a paused batch, the batch's
 *    order of their copies, and the top frame that needs no second copy
 *    of its own (torn.c's top_settled).
 * 10. A coroutine's frame where a freed one's lay (tests/images/awaits.py,
 *    3.12-3.15), its callee copied before: never a plain frame over a
 *    coroutine at its await (torn.c's prof_torn_resuming).
 * 11. 3.15's frame cache on a generator pipeline (tests/images/gens.py),
 *    torn in every way above: never a caller shown as the top.
 *
 * The images are looked for in $PYSTROBE_IMAGES, else tests/images (make
 * runs the tests from the top of the tree).
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
#include "core/image.h"

struct want {
    const char *qualname;
    int32_t lineno;
};

/* aba.py's two stacks, innermost first (its line numbers). */
static const struct want ABA[2][6] = {
    {{"spin", 13}, {"a2", 17}, {"a1", 21}, {"chain_a", 25}, {"main", 43}, {"<module>", 47}},
    {{"spin", 13}, {"b2", 29}, {"b1", 33}, {"chain_b", 37}, {"main", 44}, {"<module>", 47}},
};
/* pos.py's (3.15 only): one call of a2, at its two calls. */
static const struct want POS[2][6] = {
    {{"spin", 14}, {"a2", 23}, {"a1", 28}, {"chain", 32}, {"main", 36}, {"<module>", 39}},
    {{"spin2", 18}, {"a2", 24}, {"a1", 28}, {"chain", 32}, {"main", 36}, {"<module>", 39}},
};

/* splice.py's (3.11-3.13): in a2, and in spin_b one call deeper (a stack
 * shorter than 6 ends at a NULL name). */
static const struct want SPLICE[2][6] = {
    {{"a2", 24}, {"a1", 32}, {"main", 43}, {"<module>", 46}, {NULL, 0}},
    {{"spin_b", 20}, {"b2", 28}, {"b1", 36}, {"main", 42}, {"<module>", 46}},
};

/* tops.py's (3.11+): in spin_a under a2, and in spin_b under b2. */
static const struct want TOPS[2][6] = {
    {{"spin_a", 20}, {"a2", 28}, {"a1", 36}, {"main", 47}, {"<module>", 50}, {NULL, 0}},
    {{"spin_b", 24}, {"b2", 32}, {"b1", 40}, {"main", 46}, {"<module>", 50}, {NULL, 0}},
};

/* heap.py's (3.11+): a generator pipeline and a coroutine chain, each
 * frame in its object on the heap, the leaf in sum(). */
static const struct want HEAP[2][6] = {
    {{"ga3", 20}, {"ga2", 24}, {"ga1", 28}, {"drive_g", 44}, {"main", 57}, {"<module>", 61}},
    {{"ca3", 32}, {"ca2", 36}, {"ca1", 40}, {"drive_c", 49}, {"main", 58}, {"<module>", 61}},
};

/* gens.py's (3.12+): in inner under outer, and in outer, inner suspended. */
static const struct want GENS[2][6] = {
    {{"inner", 20}, {"outer", 24}, {"main", 30}, {"<module>", 35}, {NULL, 0}},
    {{"outer", 25}, {"main", 30}, {"<module>", 35}, {NULL, 0}, {NULL, 0}},
};

/* cgens.py's (3.12+): in outer, pulled by next() from main, and in spin,
 * pulled by the same call, outer suspended. */
static const struct want CGENS[2][6] = {
    {{"outer", 22}, {"main", 35}, {"<module>", 39}, {NULL, 0}},
    {{"spin", 27}, {"main", 35}, {"<module>", 39}, {NULL, 0}},
};

/* awaits.py's (3.12+): take called by the coroutine getter, and c2 awaited
 * by c1, both under stage (c1's frame where getter's was). */
static const struct want AWAITS[2][6] = {
    {{"take", 20}, {"getter", 24}, {"stage", 36}, {"drive", 42}, {"main", 50}, {"<module>", 53}},
    {{"c2", 28}, {"c1", 32}, {"stage", 37}, {"drive", 42}, {"main", 50}, {"<module>", 53}},
};

/* The program under test: its stacks, and its file as the images name it. */
static const struct want (*STACK)[6] = ABA;
static const char *FILE_NAME = "/tmp/pystrobe-images/aba.py";
static const char *PROGRAM = "aba";

static const char *const VERSIONS[] = {"3.8",  "3.9",  "3.10", "3.11",
                                       "3.12", "3.13", "3.14", "3.15"};
#define NVERSIONS (sizeof VERSIONS / sizeof *VERSIONS)

static void image_path(char *buf, size_t len, const char *version, int chain)
{
    const char *dir = getenv("PYSTROBE_IMAGES");
    snprintf(buf, len, "%s/%s-%s-%c.img", dir && *dir ? dir : "tests/images", PROGRAM, version,
             chain ? 'b' : 'a');
}

/* 0 or 1: which stack the thread shows exactly; -1: neither. */
static int which_stack(const struct pys_thread *t)
{
    for (int c = 0; c < 2; c++) {
        size_t len = 0, f = 0;
        while (len < 6 && STACK[c][len].qualname)
            len++;
        for (; f < len && f < t->nframes; f++) {
            const struct pys_frame *fr = &t->frames[f];
            if (strcmp(fr->filename, FILE_NAME) != 0 ||
                strcmp(fr->qualname, STACK[c][f].qualname) != 0 || fr->lineno != STACK[c][f].lineno)
                break;
        }
        if (f == len && t->nframes == len)
            return c;
    }
    return -1;
}

/* A session on the image of `version` at moment `chain`, its one snapshot
 * taken and found to be that moment's stack (its walk in s->walker.raw). */
static pys_session *chain_session(const char *version, int chain)
{
    char path[512], err[512];
    image_path(path, sizeof path, version, chain);
    struct pys_options opt = {0};
    pys_session *s = NULL;
    assert_int_equal(pys_session_attach_image(&s, path, &opt, err, sizeof err), 0);
    const struct pys_snapshot *snap = NULL;
    assert_int_equal(pys_session_snapshot(s, &snap), 0);
    assert_int_equal(which_stack(&snap->interps[0].threads[0]), chain);
    return s;
}

/*
 * splice.py: 0 or 1 when the thread shows the bottom frames of that stack
 * only, its callers as they are at that moment (a moment on the way to it
 * or back, which the program passes through: a caller as it calls, or
 * once its callee returned); -1: not such a part of either.
 */
static int stack_part(const struct pys_thread *t)
{
    for (int c = 0; c < 2; c++) {
        size_t len = 0, f = 0;
        while (len < 6 && STACK[c][len].qualname)
            len++;
        if (t->nframes == 0 || t->nframes >= len)
            continue;
        for (; f < t->nframes; f++) {
            const struct pys_frame *fr = &t->frames[f];
            const struct want *w = &STACK[c][len - t->nframes + f];
            if (strcmp(fr->filename, FILE_NAME) != 0 || strcmp(fr->qualname, w->qualname) != 0 ||
                fr->lineno != w->lineno)
                break;
        }
        if (f == t->nframes)
            return c;
    }
    return -1;
}

static void print_thread(const struct pys_thread *t)
{
    print_message("    thread error %d (%s), %zu frames:\n", t->error,
                  t->error_text ? t->error_text : "", t->nframes);
    for (size_t f = 0; f < t->nframes; f++)
        print_message("      %s %s:%d\n", t->frames[f].qualname, t->frames[f].filename,
                      t->frames[f].lineno);
}

/* Every image, replayed, gives its stack, at every snapshot. */
static void test_replay(void **state)
{
    (void)state;
    for (size_t v = 0; v < NVERSIONS; v++)
        for (int chain = 0; chain < 2; chain++)
            for (int fc = 0; fc < 2; fc++) {
                char path[512], err[512];
                image_path(path, sizeof path, VERSIONS[v], chain);
                struct pys_options opt = {0};
                opt.frame_cache = fc;
                pys_session *s = NULL;
                int rc = pys_session_attach_image(&s, path, &opt, err, sizeof err);
                if (rc != 0)
                    print_message("%s: %s\n", path, err);
                assert_int_equal(rc, 0);
                assert_int_equal(pys_session_pid(s), 0);
                assert_int_equal(pys_session_python_version(s) >> 16,
                                 (uint32_t)(3 << 8 | atoi(VERSIONS[v] + 2)));
                for (int k = 0; k < 4; k++) {
                    const struct pys_snapshot *snap = NULL;
                    assert_int_equal(pys_session_snapshot(s, &snap), 0);
                    assert_int_equal(snap->ninterps, 1);
                    assert_int_equal(snap->interps[0].nthreads, 1);
                    const struct pys_thread *t = &snap->interps[0].threads[0];
                    if (which_stack(t) != chain) {
                        print_message("%s, snapshot %d:\n", path, k);
                        print_thread(t);
                    }
                    assert_int_equal(t->error, 0);
                    assert_int_equal(which_stack(t), chain);
                }
                pys_session_free(s);
            }
}

/* Image loading: a file that is not an image, or a cut one, is refused. */
static void test_bad_image(void **state)
{
    (void)state;
    char path[512], err[256];
    image_path(path, sizeof path, "3.12", 0);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static uint8_t data[1 << 20];
    size_t len = fread(data, 1, sizeof data, f);
    fclose(f);
    struct prof_image *im = NULL;
    assert_int_equal(prof_image_load(data, len, &im, err, sizeof err), 0);
    prof_image_free(im);
    for (size_t cut = 0; cut < len; cut += 97)
        assert_int_equal(prof_image_load(data, cut, &im, err, sizeof err), PYS_E_CORRUPT);
    data[8] = 2; /* an unknown format version */
    assert_int_equal(prof_image_load(data, len, &im, err, sizeof err), PYS_E_CORRUPT);
    pys_session *s = NULL;
    assert_int_equal(pys_session_attach_image(&s, "/nonexistent.img", NULL, err, sizeof err),
                     PYS_E_IO);
    assert_null(s);
}

/* --- the chain's shape ------------------------------------------------------ */

/* Which of the shape checks (core/torn.c) a doctored image is for. */
enum doctor { SKIP_CALLER, RETURNED_BELOW };

/*
 * A session on chain A's image of `version`, doctored so that its one
 * stack is torn in one way a second copy cannot show (the image stands
 * still: every copy agrees), and the error text the thread must fail with:
 * only the shape checks can reject it. Returns the thread's error text
 * after a snapshot, or NULL if the thread gave a stack; "-" when the image
 * cannot be doctored that way.
 */
static const char *doctored(const char *version, enum doctor d, char *buf, size_t len)
{
    char path[512], err[512];
    image_path(path, sizeof path, version, 0);
    struct pys_options opt = {0};
    pys_session *s = NULL;
    assert_int_equal(pys_session_attach_image(&s, path, &opt, err, sizeof err), 0);
    const struct pys_snapshot *snap = NULL;
    assert_int_equal(pys_session_snapshot(s, &snap), 0);
    assert_int_equal(which_stack(&snap->interps[0].threads[0]), 0);
    /* The last walk's raw frames: spin, a2, a1, chain_a, main, <module>
     * (shims among them from 3.11 on: count Python frames only). */
    const struct cpy_raw_frame *py[6];
    size_t np = 0;
    for (size_t i = 0; np < 6 && s->walker.raw[i].addr != 0; i++)
        if (!s->walker.raw[i].shim)
            py[np++] = &s->walker.raw[i];
    assert_int_equal(np, 6);
    const struct cpy_frame_offsets *f = &s->off.interpreter_frame;
    int rc = -1;
    if (d == SKIP_CALLER && s->off.traits.frames != CPY_FRAMES_OBJECT) {
        /* spin's caller is a1: a2's frame, between them on the data stack,
         * is skipped, as if a2 had been copied after it returned and a1
         * before it called. */
        rc = mem_write_u64(&s->mem, py[0]->addr + f->previous, py[2]->addr);
    } else if (d == RETURNED_BELOW) {
        /* a1's code object is cleared, as when it returns, with its
         * callees still live above it. */
        rc = mem_write_u64(&s->mem, py[2]->addr + f->executable, 0);
    }
    const char *out = "-";
    if (rc == 0) {
        assert_int_equal(pys_session_snapshot(s, &snap), 0);
        const struct pys_thread *t = &snap->interps[0].threads[0];
        out = NULL;
        if (t->error) {
            snprintf(buf, len, "%s", t->error_text);
            out = buf;
        } else {
            print_thread(t);
        }
    }
    pys_session_free(s);
    return out;
}

/* Stacks no second copy can tell from a real one are refused by their
 * shape, each with its reason: a caller skipped (from 3.12, whose code
 * objects give their frames' size), a frame returned below live ones. (A
 * caller in its prologue needs a function with one, which aba.py has not.) */
static void test_shape(void **state)
{
    (void)state;
    static const struct {
        enum doctor d;
        const char *why;
        const char *from; /* the first version it applies to */
    } cases[] = {
        {SKIP_CALLER, "is not its callee", "3.12"},
        {RETURNED_BELOW, "below the top has returned", "3.8"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int checked = 0;
        for (size_t v = 0; v < NVERSIONS; v++) {
            char buf[200];
            if (atoi(VERSIONS[v] + 2) < atoi(cases[c].from + 2))
                continue;
            const char *e = doctored(VERSIONS[v], cases[c].d, buf, sizeof buf);
            if (e && strcmp(e, "-") == 0)
                continue;
            if (!e || !strstr(e, cases[c].why))
                print_message("%s, %s: %s\n", VERSIONS[v], cases[c].why, e ? e : "a stack");
            assert_non_null(e);
            assert_non_null(strstr(e, cases[c].why));
            checked++;
        }
        assert_true(checked > 0);
    }
}

/* --- the switching source -------------------------------------------------- */

struct switcher {
    struct mem_source base;
    struct mem_image im[2];
    int first;         /* the image served before the switch */
    int armed;         /* counting reads (else `first` is served) */
    uint64_t count;    /* reads served since armed */
    uint64_t at1, at2; /* reads [at1, at2) are served from the other image */
    size_t unit;       /* 0: a read is a piece of a system call; else each
                        * `unit`-aligned block a piece covers is one */
    int write_both;    /* writes go to both images (else the one served) */
    uint64_t lo, hi;   /* how many system calls read some of [lo, hi) */
    uint64_t calls_in;
    /* How many system calls (readv or read) read one of the 8-byte words
     * at watch[0..nwatch). */
    const uint64_t *watch;
    size_t nwatch;
    uint64_t watch_calls;
    /* timed: the clock moves a nanosecond per read (and `lag` more), and
     * switch_ns whenever the other moment is served (the target ran on
     * between them); else it stands still. */
    int timed, served;
    uint64_t now, lag, switch_ns;
    /* tick: the clock also moves this much each time it is read; the
     * longest it moved between two reads of the armed snapshot. */
    uint64_t tick, last_read, max_gap;
    /* Pieces that read some of [split_lo, split_hi) come from the other
     * image, at every read (a target caught the same way at each). */
    uint64_t split_lo, split_hi;
    /* With capture, the pieces of the call with the most, in order, and
     * the reads served before it (cap_base: the first piece's number). */
    int capture;
    struct mem_seg cap[256];
    size_t ncap;
    uint64_t cap_base;
};

/* PYSTROBE_IMAGES_TRACE=1: print every read of the armed snapshot of the
 * runs that show a mix. */
static int trace;

static int sw_pick(struct switcher *w, int advance, uint64_t addr, size_t len)
{
    int which = w->first;
    if (addr < w->split_hi && addr + len > w->split_lo)
        return 1 - w->first;
    if (w->armed) {
        uint64_t c = advance ? w->count++ : w->count;
        which = c >= w->at1 && c < w->at2 ? 1 - w->first : w->first;
        if (trace && advance)
            print_message("      read %llu: %zu bytes at 0x%llx from %c\n", (unsigned long long)c,
                          len, (unsigned long long)addr, "AB"[which]);
    }
    if (advance && w->timed) {
        w->now += which != w->served ? w->switch_ns : 1 + w->lag;
        w->served = which;
    }
    if (advance && w->armed) {
        if (w->count > 1 && w->now - w->last_read > w->max_gap)
            w->max_gap = w->now - w->last_read;
        w->last_read = w->now;
    }
    return which;
}

static int sw_read(struct mem_source *src, uint64_t addr, void *buf, size_t len)
{
    struct switcher *w = (struct switcher *)src;
    if (w->unit == 0 || len == 0) {
        struct mem_source *im = &w->im[sw_pick(w, 1, addr, len)].base;
        return im->ops->read(im, addr, buf, len);
    }
    /* Block by block, upwards, as the kernel copies while the target runs. */
    for (size_t done = 0; done < len;) {
        uint64_t a = addr + done;
        size_t k = w->unit - (size_t)(a % w->unit);
        if (k > len - done)
            k = len - done;
        struct mem_source *im = &w->im[sw_pick(w, 1, a, k)].base;
        int rc = im->ops->read(im, a, (uint8_t *)buf + done, k);
        if (rc < 0)
            return rc;
        done += k;
    }
    return 0;
}

static int watched(const struct switcher *w, uint64_t addr, size_t len)
{
    for (size_t i = 0; i < w->nwatch; i++)
        if (w->watch[i] + 8 > addr && w->watch[i] < addr + len)
            return 1;
    return 0;
}

static int sw_read_call(struct mem_source *src, uint64_t addr, void *buf, size_t len)
{
    struct switcher *w = (struct switcher *)src;
    w->watch_calls += watched(w, addr, len);
    return sw_read(src, addr, buf, len);
}

static int sw_readv(struct mem_source *src, const struct mem_seg *segs, size_t n)
{
    struct switcher *w = (struct switcher *)src;
    for (size_t j = 0; j < n; j++)
        if (watched(w, segs[j].addr, segs[j].len)) {
            w->watch_calls++;
            break;
        }
    if (w->capture && n > w->ncap && n <= sizeof w->cap / sizeof *w->cap) {
        memcpy(w->cap, segs, n * sizeof *segs);
        w->ncap = n;
        w->cap_base = w->count;
    }
    for (size_t j = 0; j < n; j++)
        if (segs[j].addr < w->hi && segs[j].addr + segs[j].len > w->lo) {
            w->calls_in++;
            break;
        }
    size_t k = 0;
    while (k < n && sw_read(src, segs[k].addr, segs[k].buf, segs[k].len) == 0)
        k++;
    return k == 0 && n > 0 ? PYS_E_BADADDR : (int)k;
}

/* What a run wrote into an image's bytes (pystrobe's writes: the frame
 * cache's anchors), undone before the next run (pair_undo): len bytes at
 * `at` in image im's. */
struct dirty {
    int im;
    uint8_t *at;
    size_t len;
};
static struct dirty dirty[64];
static size_t ndirty;
static int dirty_lost; /* more than dirty holds: undo every byte */

/* Note that image c's bytes at addr (len) are about to be written. */
static void note_dirty(const struct mem_image *im, int c, uint64_t addr, size_t len)
{
    for (size_t i = 0; i < im->nregions; i++) {
        const struct mem_region *r = &im->regions[i];
        if (addr < r->addr || addr - r->addr >= r->len || !r->writable)
            continue;
        if (ndirty == sizeof dirty / sizeof *dirty)
            dirty_lost = 1;
        else
            dirty[ndirty++] = (struct dirty){c, r->writable + (addr - r->addr), len};
        return;
    }
}

/* A write changes the image being served (the moment the target is at). */
static int sw_write(struct mem_source *src, uint64_t addr, const void *buf, size_t len)
{
    struct switcher *w = (struct switcher *)src;
    if (w->write_both) {
        note_dirty(&w->im[0], 0, addr, len);
        note_dirty(&w->im[1], 1, addr, len);
        int rc = w->im[0].base.ops->write(&w->im[0].base, addr, buf, len);
        return rc < 0 ? rc : w->im[1].base.ops->write(&w->im[1].base, addr, buf, len);
    }
    int c = sw_pick(w, 0, addr, len);
    note_dirty(&w->im[c], c, addr, len);
    struct mem_source *im = &w->im[c].base;
    return im->ops->write(im, addr, buf, len);
}

static uint64_t sw_clock(struct mem_source *src)
{
    struct switcher *w = (struct switcher *)src;
    w->now += w->tick;
    return w->now;
}

static const struct mem_source_ops SW_OPS = {sw_read_call, sw_readv, sw_write, sw_clock};

struct pair {
    struct prof_image *im[2];
    uint8_t *orig[2];
};

/* Load program's two moments of version (image_path's names) into p, and
 * keep their bytes as loaded: a run's writes are undone from them. */
static void pair_load(struct pair *p, const char *program, const char *version)
{
    const char *saved = PROGRAM;
    PROGRAM = program;
    ndirty = 0;
    dirty_lost = 0;
    for (int c = 0; c < 2; c++) {
        char path[512], err[512];
        image_path(path, sizeof path, version, c);
        assert_int_equal(prof_image_load_file(path, &p->im[c], err, sizeof err), 0);
        size_t n = p->im[c]->npages * MEM_PAGE_SIZE;
        p->orig[c] = malloc(n ? n : 1);
        assert_non_null(p->orig[c]);
        memcpy(p->orig[c], p->im[c]->bytes, n);
    }
    PROGRAM = saved;
}

/* Undo the writes of the last run (note_dirty): the images' bytes as
 * loaded again. */
static void pair_undo(struct pair *p)
{
    for (size_t i = 0; i < ndirty && !dirty_lost; i++) {
        const struct dirty *d = &dirty[i];
        size_t off = (size_t)(d->at - p->im[d->im]->bytes);
        memcpy(d->at, p->orig[d->im] + off, d->len);
    }
    for (int c = 0; c < 2 && dirty_lost; c++)
        memcpy(p->im[c]->bytes, p->orig[c], p->im[c]->npages * MEM_PAGE_SIZE);
    ndirty = 0;
    dirty_lost = 0;
}

static void pair_free(struct pair *p)
{
    ndirty = 0;
    dirty_lost = 0;
    for (int c = 0; c < 2; c++) {
        prof_image_free(p->im[c]);
        free(p->orig[c]);
    }
}

/* One way of disturbing a snapshot. */
struct run {
    struct pys_options opt;
    size_t unit;
    int first, warm;
    int write_both; /* the moments both come after pystrobe's writes */
    int timed;      /* the switcher's clock runs (struct switcher) */
    uint64_t tick;  /* and moves this much at each look (struct switcher) */
    /* With timed: what a switch of moments costs the clock (0: 1 ms), and
     * a snapshot before the one switched (0: none) whose reads each take
     * lag_ns more (a batch paused as on a loaded machine, or cold). */
    uint64_t switch_ns, lag_ns;
    int lag_snapshot;
    int lag_all;  /* every snapshot's reads take lag_ns more, the armed one's too */
    int capture;  /* keep the armed snapshot's batch (run_cap) */
    int no_infer; /* generators' callers are not inferred (objframes.c) */
};

/* With run.capture, the pieces of run_once's armed snapshot's batch, in
 * the order read, and the number of the read that served the first. */
static struct mem_seg run_cap[256];
static size_t run_ncap;
static uint64_t run_cap_base;

/* The longest the source's clock moved between two reads of run_once's
 * armed snapshot. */
static uint64_t run_gap;
/* The system calls run_once's armed snapshot made. */
static uint64_t run_calls;

struct tally {
    uint64_t got[2]; /* A's stack, B's */
    uint64_t reread; /* of those, read with more reads than undisturbed (rejected walks) */
    uint64_t failed; /* the thread failed */
    uint64_t mixed;  /* neither: a mix */
    uint64_t part;   /* splice.py: the bottom part of A's or B's stack (stack_part) */
};

/* The most frames of a run's sessions (run_once): far more than the
 * images' stacks hold. */
#define RUN_MAX_FRAMES 64

/*
 * One run: a fresh session attached on image r->first, r->warm snapshots
 * of it alone, then one snapshot whose reads [at1, at2) come from the other
 * image. Returns 0 or 1 (the stack of A or B), 2 (the thread failed), -1 (a
 * mix), -3 (splice.py: part of A's or B's stack,
 * stack_part); *reads, the reads that snapshot made.
 */
static int run_once(struct pair *p, const struct run *r, uint64_t at1, uint64_t at2,
                    uint64_t *reads, int verbose)
{
    struct switcher w;
    pair_undo(p);
    for (int i = 0; i < 2; i++)
        mem_image_init(&w.im[i], p->im[i]->regions, p->im[i]->nregions);
    w.base.ops = &SW_OPS;
    w.nwatch = 0;
    w.first = r->first;
    w.armed = 0;
    w.count = 0;
    w.unit = r->unit;
    w.write_both = r->write_both;
    w.timed = r->timed;
    w.served = r->first;
    w.now = 0;
    w.tick = r->tick;
    w.last_read = w.max_gap = 0;
    w.lag = 0;
    w.switch_ns = r->switch_ns ? r->switch_ns : 1000000;
    w.capture = 0;
    w.ncap = 0;
    w.split_lo = w.split_hi = 0;
    pys_session *s = NULL;
    char err[512];
    /* Stacks of a few frames: a session's buffers sized for them, not for
     * the default's thousands (run_once opens one per switch point, and
     * under the sanitizers each large buffer is mapped and unmapped). */
    struct pys_options opt = r->opt;
    if (opt.max_frames == 0)
        opt.max_frames = RUN_MAX_FRAMES;
    int rc = prof_session_open(&s, 0, &w.base, &p->im[r->first]->facts, &opt, err, sizeof err);
    if (rc != 0)
        print_message("attach: %s\n", err);
    assert_int_equal(rc, 0);
    if (r->no_infer)
        s->walker.stack.gen_caller = NULL;
    const struct pys_snapshot *snap = NULL;
    for (int k = 0; k < r->warm; k++) {
        w.lag = r->lag_all || r->lag_snapshot == k + 1 ? r->lag_ns : 0;
        assert_int_equal(pys_session_snapshot(s, &snap), 0);
        assert_int_equal(which_stack(&snap->interps[0].threads[0]), r->first);
    }
    trace = verbose && getenv("PYSTROBE_IMAGES_TRACE") != NULL;
    w.lag = r->lag_all ? r->lag_ns : 0;
    w.armed = 1;
    w.capture = r->capture;
    w.at1 = at1;
    w.at2 = at2;
    struct pys_stats st0, st1;
    pys_session_stats(s, &st0);
    rc = pys_session_snapshot(s, &snap);
    pys_session_stats(s, &st1);
    run_calls = st1.mem_reads - st0.mem_reads;
    int res = 2;
    if (rc == 0 && snap->ninterps == 1 && snap->interps[0].nthreads == 1) {
        const struct pys_thread *t = &snap->interps[0].threads[0];
        if (t->error == 0) {
            res = which_stack(t);
            if (res < 0 && (STACK == SPLICE || STACK == TOPS || STACK == HEAP || STACK == CGENS) &&
                stack_part(t) >= 0)
                res = -3;
            if (res < 0 && verbose)
                print_thread(t);
        }
    }
    *reads = w.count;
    run_gap = w.max_gap;
    if (r->capture) {
        memcpy(run_cap, w.cap, w.ncap * sizeof *w.cap);
        run_ncap = w.ncap;
        run_cap_base = w.cap_base;
    }
    trace = 0;
    pys_session_free(s);
    return res;
}

static void tally_add(struct tally *t, int res, uint64_t reads, uint64_t total)
{
    if (res == -3) {
        t->part++;
        return;
    }
    if (res < 0)
        t->mixed++;
    if (res == 2)
        t->failed++;
    if (res == 0 || res == 1) {
        t->got[res]++;
        t->reread += reads > total;
    }
}

static void tally_print(const char *what, const struct tally *t)
{
    print_message("  %s: %llu A + %llu B (%llu after a rejected walk), %llu failed, %llu mixed",
                  what, (unsigned long long)t->got[0], (unsigned long long)t->got[1],
                  (unsigned long long)t->reread, (unsigned long long)t->failed,
                  (unsigned long long)t->mixed);
    if (t->part)
        print_message(", %llu part of one", (unsigned long long)t->part);
    print_message("\n");
}

static void report_mix(const char *version, const struct run *r, int twice, uint64_t n1,
                       uint64_t n2, uint64_t total, struct pair *p)
{
    uint64_t reads;
    print_message("MIX: %s frame_cache=%d unit=%zu %c->%c%s warm=%d reads [%llu, %llu) of "
                  "%llu\n",
                  version, r->opt.frame_cache, r->unit, "AB"[r->first], "AB"[1 - r->first],
                  twice ? (r->first ? "->B" : "->A") : "", r->warm, (unsigned long long)n1,
                  (unsigned long long)n2, (unsigned long long)total);
    run_once(p, r, n1, n2, &reads, 1);
}

/*
 * Every switch point (and, with twice, every switch and back) of run r:
 * the mixes, counted. On 3.8-3.10 too, whose frame objects lie anywhere
 * in the heap: the batch copies them in chain order, a caller before its
 * callee, and their second copies in the reverse order (mem_inner_hint),
 * so that a caller's two copies bracket its callees' as a data stack's
 * copy upwards and second copies downwards do from 3.11 on. (In address
 * order, main's frame could be read twice while the process was at B and
 * the frames above it twice while it was at A: chain_a's stack with main
 * on the line that calls chain_b.)
 */
/* Mixes sweep counts without printing them (a known hole, counted). */
static int quiet_mixes;

/* Mixes sweep counts without printing them (a known hole, counted). */
static int quiet_mixes;

static uint64_t sweep(struct pair *p, const char *version, const struct run *r, int twice,
                      struct tally *t)
{
    uint64_t total = 0, reads, bad = 0;
    assert_int_equal(run_once(p, r, UINT64_MAX, UINT64_MAX, &total, 0), r->first);
    for (uint64_t n1 = 0; n1 <= total; n1++)
        for (uint64_t n2 = twice ? n1 + 1 : UINT64_MAX; n2 <= (twice ? total : UINT64_MAX); n2++) {
            int res = run_once(p, r, n1, n2, &reads, 0);
            tally_add(t, res, reads, total);
            if (res == -1) {
                if (!quiet_mixes)
                    report_mix(version, r, twice, n1, n2, total, p);
                bad++;
            }
            if (n2 == UINT64_MAX)
                break;
        }
    return bad;
}

static void test_switch(void **state)
{
    (void)state;
    uint64_t mixes = 0;
    for (size_t v = 0; v < NVERSIONS; v++) {
        struct pair p;
        pair_load(&p, PROGRAM, VERSIONS[v]);
        /* The frame cache exists from 3.15 on. */
        int fcs = strcmp(VERSIONS[v], "3.15") == 0 ? 2 : 1;
        for (int fc = 0; fc < fcs; fc++) {
            struct tally once, twice, fine;
            memset(&once, 0, sizeof once);
            memset(&twice, 0, sizeof twice);
            memset(&fine, 0, sizeof fine);
            struct run r;
            memset(&r, 0, sizeof r);
            r.opt.frame_cache = fc;
            for (r.first = 0; r.first < 2; r.first++)
                for (r.warm = 0; r.warm <= 3; r.warm++) {
                    /* A read is a piece: one switch; and back, after one
                     * snapshot (a batch to read) */
                    r.unit = 0;
                    mixes += sweep(&p, VERSIONS[v], &r, 0, &once);
                    if (r.warm == 1)
                        mixes += sweep(&p, VERSIONS[v], &r, 1, &twice);
                    /* A read is 64 bytes of a piece: one switch. */
                    r.unit = 64;
                    if (r.warm <= 1)
                        mixes += sweep(&p, VERSIONS[v], &r, 0, &fine);
                }
            print_message("%s, frame_cache=%d:\n", VERSIONS[v], fc);
            tally_print("one switch ", &once);
            tally_print("A-B-A      ", &twice);
            tally_print("by 64 bytes", &fine);
        }
        pair_free(&p);
    }
    assert_int_equal(mixes, 0);
}

/*
 * The frame cache's anchor position (core/torn.c, prof_torn_cached): pos.py
 * at two moments of one call of a2, the anchor, which calls spin and then
 * spin2 from the next line at the same address. Between them nothing
 * below a2 moves and the anchor keeps its number (written before both
 * moments: write_both), so a walk whose a2 was copied at one moment and
 * its callee at the other (spin2 under a2's call of spin) differs from
 * both only in a2's position. Every switch must give one moment's stack.
 */
static void test_anchor_position(void **state)
{
    (void)state;
    STACK = POS;
    FILE_NAME = "/tmp/pystrobe-images/pos.py";
    PROGRAM = "pos";
    struct pair p;
    pair_load(&p, PROGRAM, "3.15");
    struct tally once, twice, fine;
    memset(&once, 0, sizeof once);
    memset(&twice, 0, sizeof twice);
    memset(&fine, 0, sizeof fine);
    struct run r;
    memset(&r, 0, sizeof r);
    r.opt.frame_cache = 1;
    r.write_both = 1;
    uint64_t mixes = 0;
    for (r.first = 0; r.first < 2; r.first++)
        for (r.warm = 1; r.warm <= 3; r.warm++) {
            r.unit = 0;
            mixes += sweep(&p, "3.15", &r, 0, &once);
            if (r.warm == 1)
                mixes += sweep(&p, "3.15", &r, 1, &twice);
            r.unit = 64;
            mixes += sweep(&p, "3.15", &r, 0, &fine);
        }
    print_message("pos 3.15, frame_cache=1:\n");
    tally_print("one switch ", &once);
    tally_print("A-B-A      ", &twice);
    tally_print("by 64 bytes", &fine);
    pair_free(&p);
    STACK = ABA;
    FILE_NAME = "/tmp/pystrobe-images/aba.py";
    PROGRAM = "aba";
    assert_int_equal(mixes, 0);
}

/* Image `name`'s path (in $PYSTROBE_IMAGES, else tests/images), and a
 * session on it with options opt (the test fails if none can be made). */
static void named_path(char *path, size_t size, const char *name)
{
    const char *dir = getenv("PYSTROBE_IMAGES");
    snprintf(path, size, "%s/%s", dir && *dir ? dir : "tests/images", name);
}

static pys_session *open_image(const char *name, const struct pys_options *opt)
{
    char path[512], err[512];
    named_path(path, sizeof path, name);
    pys_session *s = NULL;
    int rc = pys_session_attach_image(&s, path, opt, err, sizeof err);
    if (rc != 0)
        print_message("%s: %s\n", path, err);
    assert_int_equal(rc, 0);
    return s;
}

/*
 * 3.8-3.10: aba.py stopped (tools/record_images.sh, "enter") as a2 calls
 * spin, after spin's frame became the thread's current one and before the
 * interpreter marked it executing: a moment every call passes through.
 * It reads as a2's stack, spin not yet started, as Python shows it.
 */
static void test_entering(void **state)
{
    (void)state;
    static const char *const old[] = {"3.8", "3.9", "3.10"};
    for (size_t v = 0; v < sizeof old / sizeof *old; v++) {
        char name[32];
        snprintf(name, sizeof name, "enter-%s.img", old[v]);
        struct pys_options opt = {0};
        pys_session *s = open_image(name, &opt);
        for (int k = 0; k < 2; k++) {
            const struct pys_snapshot *snap = NULL;
            assert_int_equal(pys_session_snapshot(s, &snap), 0);
            assert_int_equal(snap->interps[0].nthreads, 1);
            const struct pys_thread *t = &snap->interps[0].threads[0];
            size_t f = 0;
            for (; t->error == 0 && f < 5 && f < t->nframes; f++)
                if (strcmp(t->frames[f].qualname, ABA[0][f + 1].qualname) != 0 ||
                    t->frames[f].lineno != ABA[0][f + 1].lineno)
                    break;
            if (f != 5 || t->nframes != 5) {
                print_message("%s, snapshot %d:\n", name, k);
                print_thread(t);
            }
            assert_int_equal(t->error, 0);
            assert_int_equal(t->nframes, 5);
            assert_int_equal(f, 5);
        }
        pys_session_free(s);
    }
}

/*
 * Replay image `name` (in tests/images) with options opt: each of a few
 * snapshots must give exactly the n frames of want, innermost first.
 */
static void replay_exactly(const char *name, const struct pys_options *opt, const struct want *want,
                           size_t n)
{
    pys_session *s = open_image(name, opt);
    for (int k = 0; k < 3; k++) {
        const struct pys_snapshot *snap = NULL;
        assert_int_equal(pys_session_snapshot(s, &snap), 0);
        assert_int_equal(snap->interps[0].nthreads, 1);
        const struct pys_thread *t = &snap->interps[0].threads[0];
        size_t f = 0;
        for (; t->error == 0 && f < n && f < t->nframes; f++)
            if (strcmp(t->frames[f].qualname, want[f].qualname) != 0 ||
                t->frames[f].lineno != want[f].lineno)
                break;
        if (t->error != 0 || f != n || t->nframes != n) {
            print_message("%s, snapshot %d:\n", name, k);
            print_thread(t);
        }
        assert_int_equal(t->error, 0);
        assert_int_equal(t->nframes, n);
        assert_int_equal(f, n);
    }
    pys_session_free(s);
}

/*
 * 3.13+: init.py stopped (tools/record_images.sh, "init") in spin() under
 * an __init__ that CALL_ALLOC_AND_ENTER_INIT called: below that __init__
 * lies CPython's shim, a frame of a code object also named __init__ that
 * never leaves its prologue. It is a caller all the same (not a torn
 * walk), hidden as Python hides it.
 */
static void test_init_shim(void **state)
{
    (void)state;
    static const struct want INIT[] = {
        {"spin", 16}, {"Made.__init__", 21}, {"make", 25}, {"main", 31}, {"<module>", 34}};
    static const char *const versions[] = {"3.13", "3.14", "3.15"};
    for (size_t v = 0; v < sizeof versions / sizeof *versions; v++)
        for (int fc = 0; fc < 2; fc++) {
            char name[64];
            snprintf(name, sizeof name, "init-%s.img", versions[v]);
            struct pys_options opt = {0};
            opt.frame_cache = fc;
            replay_exactly(name, &opt, INIT, sizeof INIT / sizeof *INIT);
        }
}

/*
 * 3.11, 3.12: enter_c.py stopped (tools/record_images.sh, "enterc") as
 * next() enters a generator from C, after the evaluation loop made its
 * _PyCFrame the thread's cframe and before it filled it in: the cframe
 * holds what the C code that last used that stack left there. It reads as
 * main's stack, calling next(), the generator not yet entered. (3.11 sizes
 * the data stack's frames from co_nlocalsplus and co_stacksize, having no
 * co_framesize.)
 */
static void test_entering_from_c(void **state)
{
    (void)state;
    static const struct want ENTER[] = {{"main", 29}, {"<module>", 33}};
    static const char *const images[] = {"enterc-3.11.img", "enterc-3.12.img"};
    for (size_t i = 0; i < sizeof images / sizeof *images; i++) {
        struct pys_options opt = {0};
        replay_exactly(images[i], &opt, ENTER, sizeof ENTER / sizeof *ENTER);
    }
}

/*
 * 3.12: yield.py stopped (tools/record_images.sh, "yield") inside inner's
 * yield, its frame unlinked from outer's already and still the thread's
 * current frame (GCC ordered the two stores so). A fresh session, with no
 * generator's caller learned, links it to the frame it returns to, as a
 * session that learned it does (objframes.c): not to main's, two frames
 * down, as the thread caught entering a call from C would be read.
 */
static void test_stopped_in_yield(void **state)
{
    (void)state;
    static const struct want YIELD[] = {
        {"inner", 17}, {"outer", 21}, {"main", 28}, {"<module>", 31}};
    struct pys_options opt = {0};
    replay_exactly("yield-3.12.img", &opt, YIELD, sizeof YIELD / sizeof *YIELD);
}

/*
 * Second copies reach past the stack's top (core/torn.c, grow_end): grow.py
 * at a shallow moment (A) and at one 41 calls deeper (B). After snapshots
 * of A, B, A (the batch then replays B's whole stack, kept from its
 * snapshot), a snapshot of B must be checked within its one batched read:
 * the batch's second copies, hinted by A's walk, must reach B's frames.
 * Short of them, the walk would be checked by a read of its own, later,
 * which a stack changing fast fails the more often the deeper it is.
 */
static void test_grow(void **state)
{
    (void)state;
    static const char *const versions[] = {"3.12", "3.14"};
    for (size_t v = 0; v < sizeof versions / sizeof *versions; v++) {
        struct pair p;
        pair_load(&p, "grow", versions[v]);
        struct switcher w;
        memset(&w, 0, sizeof w);
        for (int c = 0; c < 2; c++)
            mem_image_init(&w.im[c], p.im[c]->regions, p.im[c]->nregions);
        w.base.ops = &SW_OPS;
        pys_session *s = NULL;
        char err[512];
        struct pys_options opt = {0};
        int rc = prof_session_open(&s, 0, &w.base, &p.im[0]->facts, &opt, err, sizeof err);
        if (rc != 0)
            print_message("attach: %s\n", err);
        assert_int_equal(rc, 0);
        static const int order[] = {0, 1, 0, 1};
        for (size_t k = 0; k < sizeof order / sizeof *order; k++) {
            w.first = order[k];
            w.calls_in = 0;
            const struct pys_snapshot *snap = NULL;
            assert_int_equal(pys_session_snapshot(s, &snap), 0);
            const struct pys_thread *t = &snap->interps[0].threads[0];
            if (t->error)
                print_thread(t);
            assert_int_equal(t->error, 0);
            assert_int_equal(t->nframes, order[k] ? 44 : 4);
            if (k == 1) {
                /* The deep stack's extent on the data stack. */
                w.lo = s->res.thread_stack[0].addr;
                w.hi = w.lo + s->res.thread_stack[0].len;
            }
        }
        /* The last snapshot's batch, and no read of the stack after it. */
        if (w.calls_in != 1)
            print_message("%s: the deeper stack was read by %llu system calls\n", versions[v],
                          (unsigned long long)w.calls_in);
        assert_int_equal(w.calls_in, 1);
        pys_session_free(s);
        pair_free(&p);
    }
}

/*
 * splice.py (3.11-3.13): B, in spin_b, is one frame deeper than A, in a2.
 * After a snapshot of A, a snapshot of B must copy B's stack in its one
 * batched read, and check it there: A's walk had the next batch copy its
 * data stack a little past its top. Copied up to A's top only, B's walk
 * would read its stack past the batch and be checked by a later read,
 * which a stack changing fast fails the more often the deeper it grew
 * since the samples before: kept samples would lean to shallow stacks.
 */
static void test_grow_near(void **state)
{
    (void)state;
    static const char *const versions[] = {"3.11", "3.12", "3.13"};
    for (size_t v = 0; v < sizeof versions / sizeof *versions; v++) {
        struct pair p;
        pair_load(&p, "splice", versions[v]);
        uint64_t lo = 0, hi = 0;
        for (int round = 0; round < 2; round++) {
            /* Round 0 learns B's extent on the data stack alone; round 1
             * takes A, then B. */
            struct switcher w;
            memset(&w, 0, sizeof w);
            for (int c = 0; c < 2; c++)
                mem_image_init(&w.im[c], p.im[c]->regions, p.im[c]->nregions);
            w.base.ops = &SW_OPS;
            w.lo = lo;
            w.hi = hi;
            pys_session *s = NULL;
            char err[512];
            struct pys_options opt = {0};
            opt.max_frames = RUN_MAX_FRAMES;
            assert_int_equal(
                prof_session_open(&s, 0, &w.base, &p.im[0]->facts, &opt, err, sizeof err), 0);
            for (int k = round ? 0 : 1; k < 2; k++) {
                w.first = k;
                w.calls_in = 0;
                const struct pys_snapshot *snap = NULL;
                assert_int_equal(pys_session_snapshot(s, &snap), 0);
                const struct pys_thread *t = &snap->interps[0].threads[0];
                if (t->error)
                    print_thread(t);
                assert_int_equal(t->error, 0);
                assert_int_equal(t->nframes, k ? 5 : 4);
            }
            lo = s->res.thread_stack[0].addr;
            hi = lo + s->res.thread_stack[0].len;
            if (round == 1 && w.calls_in != 1)
                print_message("%s: the deeper stack was read by %llu system calls\n", versions[v],
                              (unsigned long long)w.calls_in);
            if (round == 1)
                assert_int_equal(w.calls_in, 1);
            pys_session_free(s);
        }
        pair_free(&p);
    }
}

/*
 * 3.8-3.10's frame objects (core/objframes.c): aba.py's two moments in
 * turns, A, B, A, B. At the last, B's frames were met two snapshots
 * before, by a walk that was not the last one: the batch must still copy
 * them twice, so that the walk of B is checked within that one read. Short
 * of it, the check is a read of its own at the snapshot's end, later by
 * as long as the walk took to name its frames: on a stack changing fast,
 * torn the more often the deeper it is.
 */
static void test_objframes(void **state)
{
    (void)state;
    static const char *const versions[] = {"3.8", "3.9", "3.10"};
    STACK = ABA;
    FILE_NAME = "/tmp/pystrobe-images/aba.py";
    for (size_t v = 0; v < sizeof versions / sizeof *versions; v++) {
        struct pair p;
        pair_load(&p, "aba", versions[v]);
        struct switcher w;
        memset(&w, 0, sizeof w);
        for (int c = 0; c < 2; c++)
            mem_image_init(&w.im[c], p.im[c]->regions, p.im[c]->nregions);
        w.base.ops = &SW_OPS;
        pys_session *s = NULL;
        char err[512];
        struct pys_options opt = {0};
        assert_int_equal(prof_session_open(&s, 0, &w.base, &p.im[0]->facts, &opt, err, sizeof err),
                         0);
        /* B's callers' caller words, as B's walk read them. */
        uint64_t callers[8];
        size_t ncallers = 0;
        static const int order[] = {0, 1, 0, 1};
        for (size_t k = 0; k < sizeof order / sizeof *order; k++) {
            w.first = order[k];
            w.watch_calls = 0;
            const struct pys_snapshot *snap = NULL;
            assert_int_equal(pys_session_snapshot(s, &snap), 0);
            const struct pys_thread *t = &snap->interps[0].threads[0];
            if (t->error)
                print_thread(t);
            assert_int_equal(which_stack(t), order[k]);
            for (size_t i = 0; k == 1 && i < t->nframes && i < 8; i++)
                callers[ncallers++] = s->walker.raw[i].addr + s->off.interpreter_frame.previous;
            w.watch = callers;
            w.nwatch = ncallers;
        }
        if (w.watch_calls != 1)
            print_message("%s: B's frames were read by %llu system calls\n", versions[v],
                          (unsigned long long)w.watch_calls);
        assert_int_equal(w.watch_calls, 1);
        pys_session_free(s);
        pair_free(&p);
    }
}

/* Whether piece sg holds the 8 bytes at one of addrs[0..n). */
static int piece_holds(const struct mem_seg *sg, const uint64_t *addrs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (addrs[i] >= sg->addr && addrs[i] + 8 <= sg->addr + sg->len)
            return 1;
    return 0;
}

/*
 * 3.8-3.10: a snapshot's batch reads the thread's current frame word and
 * its frames after every other piece, and copies the frames again before
 * every other second copy (objframes.c, mem_inner_hint): from the first
 * piece holding one of them to the last, every piece holds one. Read in
 * address order, the runtime's pages (above the heap's frames) and the
 * code objects' second copies came between, and a walk checked by the two
 * copies had to last that much longer.
 */
static void test_inner_batch(void **state)
{
    (void)state;
    static const char *const versions[] = {"3.8", "3.9", "3.10"};
    STACK = ABA;
    FILE_NAME = "/tmp/pystrobe-images/aba.py";
    for (size_t v = 0; v < sizeof versions / sizeof *versions; v++) {
        struct pair p;
        pair_load(&p, "aba", versions[v]);
        struct switcher w;
        memset(&w, 0, sizeof w);
        for (int c = 0; c < 2; c++)
            mem_image_init(&w.im[c], p.im[c]->regions, p.im[c]->nregions);
        w.base.ops = &SW_OPS;
        pys_session *s = NULL;
        char err[512];
        struct pys_options opt = {0};
        assert_int_equal(prof_session_open(&s, 0, &w.base, &p.im[0]->facts, &opt, err, sizeof err),
                         0);
        const struct pys_snapshot *snap = NULL;
        for (int k = 0; k < 3; k++)
            assert_int_equal(pys_session_snapshot(s, &snap), 0);
        uint64_t words[64];
        size_t n = 0;
        const struct pys_thread *t = &snap->interps[0].threads[0];
        words[n++] = t->tstate + s->off.thread_state.current_frame;
        for (size_t i = 0; i < t->nframes && n < 64; i++)
            words[n++] = s->walker.raw[i].addr + s->off.interpreter_frame.previous;
        w.capture = 1;
        assert_int_equal(pys_session_snapshot(s, &snap), 0);
        assert_int_equal(which_stack(&snap->interps[0].threads[0]), 0);
        size_t first = w.ncap, last = 0, twice = 0;
        for (size_t j = 0; j < w.ncap; j++)
            if (piece_holds(&w.cap[j], words, n)) {
                first = j < first ? j : first;
                last = j;
                twice += piece_holds(&w.cap[j], words + 1, 1);
            }
        assert_true(twice >= 2); /* the top frame, copied twice */
        for (size_t j = first; j <= last; j++) {
            if (!piece_holds(&w.cap[j], words, n))
                print_message("%s: piece %zu of %zu (%zu bytes at 0x%llx) between the frames'\n",
                              versions[v], j, w.ncap, w.cap[j].len,
                              (unsigned long long)w.cap[j].addr);
            assert_true(piece_holds(&w.cap[j], words, n));
        }
        pys_session_free(s);
        pair_free(&p);
    }
}

/*
 * 3.8-3.10: a thread whose walk was torn is read again after a random
 * wait (snapshot.c, retry_spread), not at once. aba.py at A, switched to B
 * at each read of one snapshot in turn (the clock moving a microsecond at
 * each look): where a walk was rejected and the thread read again, the
 * clock moved by more than a few looks between two reads, never by 100 us
 * or more, and not by the same amount every time. Read again at once, the
 * thread would be caught just after the change that tore its walk: on a
 * stack that changes every few tens of microseconds, a shallow one.
 */
static void test_retry_spread(void **state)
{
    (void)state;
    static const char *const versions[] = {"3.8", "3.9", "3.10"};
    STACK = ABA;
    FILE_NAME = "/tmp/pystrobe-images/aba.py";
    for (size_t v = 0; v < sizeof versions / sizeof *versions; v++) {
        struct pair p;
        pair_load(&p, "aba", versions[v]);
        struct run r = {.first = 0, .warm = 3, .tick = 1000};
        uint64_t total = 0, reads, retried = 0, waited = 0, lo = UINT64_MAX, hi = 0;
        assert_int_equal(run_once(&p, &r, UINT64_MAX, UINT64_MAX, &total, 0), 0);
        for (uint64_t n1 = 0; n1 <= total; n1++) {
            int res = run_once(&p, &r, n1, UINT64_MAX, &reads, 0);
            if (res < 0 || reads <= total)
                continue;
            retried++;
            waited += run_gap > 20 * r.tick;
            assert_true(run_gap < 100000 + 20 * r.tick);
            lo = run_gap < lo ? run_gap : lo;
            hi = run_gap > hi ? run_gap : hi;
        }
        print_message("%s: %llu runs read again, %llu after a wait (%llu to %llu ns)\n",
                      versions[v], (unsigned long long)retried, (unsigned long long)waited,
                      (unsigned long long)lo, (unsigned long long)hi);
        assert_true(waited > 0);
        pair_free(&p);
    }
}

/*
 * splice.py (3.11-3.13) at two moments: in a2, and in spin_b under b2, one
 * call deeper. Their frames have equal sizes level by level, and at the
 * first the data stack above a2 still holds spin_b's frame as it returned,
 * its caller field naming a2's address: a walk that takes the thread's top
 * from the second moment and the frames from the first gives spin_b under
 * a2, each frame in place, adjacent and unchanged in every second copy.
 * Every walk, its reads switched once or there and back (a piece per
 * read), or once within a piece (64 bytes per read), must give one moment's
 * stack, or the bottom part of one (a moment the program passes through as
 * it calls or returns, stack_part), or fail: never a frame of one chain
 * under the other's.
 */
static void test_splice(void **state)
{
    (void)state;
    static const char *const versions[] = {"3.11", "3.12", "3.13"};
    STACK = SPLICE;
    FILE_NAME = "/tmp/pystrobe-images/splice.py";
    PROGRAM = "splice";
    uint64_t mixes = 0;
    for (size_t v = 0; v < sizeof versions / sizeof *versions; v++) {
        struct pair p;
        pair_load(&p, PROGRAM, versions[v]);
        struct tally once, twice, fine;
        memset(&once, 0, sizeof once);
        memset(&twice, 0, sizeof twice);
        memset(&fine, 0, sizeof fine);
        struct run r;
        memset(&r, 0, sizeof r);
        for (r.first = 0; r.first < 2; r.first++)
            for (r.warm = 0; r.warm <= 1; r.warm++) {
                r.unit = 0;
                mixes += sweep(&p, versions[v], &r, 0, &once);
                mixes += sweep(&p, versions[v], &r, 1, &twice);
                r.unit = 64;
                mixes += sweep(&p, versions[v], &r, 0, &fine);
            }
        print_message("splice %s:\n", versions[v]);
        tally_print("one switch ", &once);
        tally_print("A-B-A      ", &twice);
        tally_print("by 64 bytes", &fine);
        pair_free(&p);
    }
    STACK = ABA;
    FILE_NAME = "/tmp/pystrobe-images/aba.py";
    PROGRAM = "aba";
    assert_int_equal(mixes, 0);
}

/* Reads of the other moment in test_splice_top's A-B-A switches: a
 * frame's first 128 bytes (code object, caller, position), by 64. */
#define TOPS_SPAN 2

/* Every A-B-A switch of run r whose other moment lasts TOPS_SPAN reads:
 * the mixes, counted. */
static uint64_t sweep_near(struct pair *p, const char *version, const struct run *r,
                           struct tally *t)
{
    uint64_t total = 0, reads, bad = 0;
    assert_int_equal(run_once(p, r, UINT64_MAX, UINT64_MAX, &total, 0), r->first);
    for (uint64_t n1 = 0; n1 + TOPS_SPAN <= total; n1++) {
        int res = run_once(p, r, n1, n1 + TOPS_SPAN, &reads, 0);
        tally_add(t, res, reads, total);
        if (res < 0 && res != -3) {
            report_mix(version, r, 1, n1, n1 + TOPS_SPAN, total, p);
            bad++;
        }
    }
    return bad;
}

/* sweep_near from either image first (r->first set here), tallied under
 * label: the mixes, counted. */
static uint64_t sweep_near_both(struct pair *p, const char *version, struct run *r,
                                const char *label)
{
    struct tally t;
    memset(&t, 0, sizeof t);
    uint64_t mixes = 0;
    for (r->first = 0; r->first < 2; r->first++)
        mixes += sweep_near(p, version, r, &t);
    tally_print(label, &t);
    return mixes;
}

/*
 * tops.py (3.11-3.15) at two moments, in spin_a under a2 and in spin_b
 * under b2: chains of equal-size frames with leaves of their own. A copy
 * of the data stack paused between a2's bytes (at A) and the top frame's
 * (at B), every read after it at A again (the program back in chain a by
 * then), gives spin_b under a2: adjacent, a2 calling, a2 and a1 the same
 * in the later read. Only a second read of the top frame shows that it is
 * no callee of a2's. Every such switch, by 64 bytes, on a first snapshot
 * (every read past the batch, checked by later reads) and on one after a
 * batch, with and without 3.15's frame cache, must give one moment's
 * stack, the bottom part of one (a moment the program passes through), or
 * fail: never a leaf under the other chain's callers. The switcher's
 * clock runs: a batch that copies both moments took the target's time
 * between them (mem_batch_paused), also when it is the first batch (no
 * batch before it to judge it by), and when it follows a batch paused far
 * longer (a pause judged against the mean of recent batches would go
 * unseen); and when every batch is as slow (many pieces, each slow), the
 * switch there and back costing no more, so that no pause is seen at all.
 */
static void test_splice_top(void **state)
{
    (void)state;
    static const char *const versions[] = {"3.11", "3.12", "3.13", "3.14", "3.15"};
    STACK = TOPS;
    FILE_NAME = "/tmp/pystrobe-images/tops.py";
    PROGRAM = "tops";
    uint64_t mixes = 0;
    for (size_t v = 0; v < sizeof versions / sizeof *versions; v++) {
        struct pair p;
        pair_load(&p, PROGRAM, versions[v]);
        int fcs = strcmp(versions[v], "3.15") == 0 ? 2 : 1;
        for (int fc = 0; fc < fcs; fc++) {
            struct tally near;
            memset(&near, 0, sizeof near);
            struct run r;
            memset(&r, 0, sizeof r);
            r.opt.frame_cache = fc;
            r.unit = 64;
            r.timed = 1;
            for (r.first = 0; r.first < 2; r.first++)
                for (r.warm = 0; r.warm <= 2; r.warm++)
                    mixes += sweep_near(&p, versions[v], &r, &near);
            print_message("tops %s, frame_cache=%d:\n", versions[v], fc);
            tally_print("A-B-A by 64", &near);
            /* After a first batch paused long (10 us a read) and a fast
             * one, a pause of 40 us: far less than the first, far more
             * than the fast one. */
            r.warm = 3;
            r.lag_snapshot = 2;
            r.lag_ns = 10000;
            r.switch_ns = 20000;
            mixes += sweep_near_both(&p, versions[v], &r, "after a slow batch");
            /* Every batch slow alike (each read 2 us: a batch of many
             * pieces), the switch there and back costing no more: the
             * armed batch is judged as usual, not paused, and the caller's
             * second copy, at A again, matches its first. */
            r.warm = 2;
            r.lag_snapshot = 0;
            r.lag_all = 1;
            r.lag_ns = 2000;
            r.switch_ns = 1;
            mixes += sweep_near_both(&p, versions[v], &r, "slow batches alike");
        }
        pair_free(&p);
    }
    STACK = ABA;
    FILE_NAME = "/tmp/pystrobe-images/aba.py";
    PROGRAM = "aba";
    assert_int_equal(mixes, 0);
}

/* --- frames on the heap (3.11+: generators', coroutines') ------------------ */

static const char *const HEAP_VERSIONS[] = {"3.11", "3.12", "3.13", "3.14", "3.15"};
#define NHEAP (sizeof HEAP_VERSIONS / sizeof *HEAP_VERSIONS)

static void use_program(const struct want (*stack)[6], const char *program)
{
    static char file[128];
    STACK = stack;
    PROGRAM = program;
    snprintf(file, sizeof file, "/tmp/pystrobe-images/%s.py", program);
    FILE_NAME = file;
}

/*
 * The addresses of the first `n` frames of heap.py at moment `chain` as its walk
 * gives them (each must live on the heap), and of the word naming the
 * thread's current frame (in its _PyCFrame on 3.11-3.12).
 */
static void heap_frames(const char *version, int chain, uint64_t *addr, size_t n,
                        uint64_t *cur_word, uint64_t *prev_off)
{
    pys_session *s = chain_session(version, chain);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(s->walker.raw[i].owner, CPY_OWNER_GENERATOR);
        addr[i] = s->walker.raw[i].addr;
    }
    uint64_t ts = s->res.threads[0].tstate; /* the snapshot's one thread */
    if (s->off.traits.frames == CPY_FRAMES_CFRAME) {
        uint64_t cf;
        assert_int_equal(mem_read_u64(&s->mem, ts + s->off.thread_state.cframe, &cf), 0);
        *cur_word = cf + s->off.cframe.current_frame;
    } else {
        *cur_word = ts + s->off.thread_state.current_frame;
    }
    *prev_off = s->off.interpreter_frame.previous;
    pys_session_free(s);
}

/*
 * heap.py (3.11-3.15) at rest: the generator pipeline (A) and the
 * coroutine chain (B), their frames each in its object on the heap, read
 * whole and exactly, snapshot after snapshot, with and without 3.15's
 * frame cache.
 */
static void test_heap_replay(void **state)
{
    (void)state;
    for (size_t v = 0; v < NHEAP; v++)
        for (int c = 0; c < 2; c++)
            for (int fc = 0; fc < (strcmp(HEAP_VERSIONS[v], "3.15") == 0 ? 2 : 1); fc++) {
                char name[64];
                snprintf(name, sizeof name, "heap-%s-%c.img", HEAP_VERSIONS[v], "ab"[c]);
                struct pys_options opt = {0};
                opt.frame_cache = fc;
                replay_exactly(name, &opt, HEAP[c], 6);
            }
}

/*
 * heap.py's two moments (3.11-3.15), whose heap frames lie at the same
 * addresses level by level: every walk, its reads switched once (a piece
 * per read, or 64 bytes), or there and back by 64 bytes within a batch
 * that took the target's time (timed: mem_batch_paused), must give one
 * moment's stack, the bottom part of one, or fail: never a generator over
 * a coroutine or the reverse. The top frame needs no second copy of its
 * own only in an unpaused batch (torn.c, top_settled).
 *
 * There and back a piece per read, in a paused batch, can make the top
 * frame's two copies (adjacent pieces) both at the other moment, or the
 * whole run of heap frames', with every frame below copied twice at the
 * first moment around them: ca3 over ga2 and ga1, or ca3, ca2, ca1 over
 * drive_g. Each frame is the same in its two copies; only the time between
 * a caller's copies, long enough to go there and back, tells: such a walk
 * is read again (torn.c, batch_settles).
 */
static void test_heap_switch(void **state)
{
    (void)state;
    use_program(HEAP, "heap");
    uint64_t mixes = 0;
    for (size_t v = 0; v < NHEAP; v++) {
        /* What makes a mix possible: the chains' frames at the same addresses. */
        uint64_t fa[3], fb[3], cur, prev;
        heap_frames(HEAP_VERSIONS[v], 0, fa, 3, &cur, &prev);
        heap_frames(HEAP_VERSIONS[v], 1, fb, 3, &cur, &prev);
        for (int i = 0; i < 3; i++)
            if (fa[i] != fb[i])
                print_message("heap %s: level %d at 0x%llx and 0x%llx\n", HEAP_VERSIONS[v], i,
                              (unsigned long long)fa[i], (unsigned long long)fb[i]);
        assert_memory_equal(fa, fb, sizeof fa);
        struct pair p;
        pair_load(&p, PROGRAM, HEAP_VERSIONS[v]);
        int fcs = strcmp(HEAP_VERSIONS[v], "3.15") == 0 ? 2 : 1;
        for (int fc = 0; fc < fcs; fc++) {
            struct tally once, fine, twice, near;
            memset(&once, 0, sizeof once);
            memset(&fine, 0, sizeof fine);
            memset(&twice, 0, sizeof twice);
            memset(&near, 0, sizeof near);
            struct run r;
            memset(&r, 0, sizeof r);
            r.opt.frame_cache = fc;
            /* A first snapshot (every read past a batch) and one after a
             * batch: the sweeps by 64 bytes, the longest, on the second. */
            for (r.first = 0; r.first < 2; r.first++)
                for (r.warm = 0; r.warm <= 1; r.warm++) {
                    r.timed = 0;
                    r.unit = 0;
                    mixes += sweep(&p, HEAP_VERSIONS[v], &r, 0, &once);
                    r.unit = 64;
                    if (r.warm == 1)
                        mixes += sweep(&p, HEAP_VERSIONS[v], &r, 0, &fine);
                    r.timed = 1;
                    if (r.warm == 1)
                        mixes += sweep_near(&p, HEAP_VERSIONS[v], &r, &near);
                    r.unit = 0;
                    if (r.warm == 1)
                        mixes += sweep(&p, HEAP_VERSIONS[v], &r, 1, &twice);
                }
            print_message("heap %s, frame_cache=%d:\n", HEAP_VERSIONS[v], fc);
            tally_print("one switch ", &once);
            tally_print("by 64 bytes", &fine);
            tally_print("A-B-A timed", &twice);
            tally_print("A-B-A by 64", &near);
        }
        pair_free(&p);
    }
    use_program(ABA, "aba");
    assert_int_equal(mixes, 0);
}

/*
 * heap.py, there and back in a batch that took the target's time (timed),
 * back only once the batch is over: during the reads made after it, which
 * test_heap_switch's sweeps, within the undisturbed snapshot's reads, do
 * not reach. A walk whose copies straddled the first switch is read again
 * after the batch (torn.c, batch_settles); that read's pieces come top
 * first, as the walk's did, so a switch back between them shows each
 * frame as the walk saw it: one read is no moment (chain_unchanged, made
 * twice). The cache off: the second read is put off to the snapshot's end
 * (prof_torn_deferred); with 3.15's frame cache it is made at once, within
 * test_heap_switch's reach. 3.13's frames (with their stack top) and
 * 3.15's.
 */
static void test_heap_reread(void **state)
{
    (void)state;
    use_program(HEAP, "heap");
    static const char *const versions[] = {"3.13", "3.15"};
    uint64_t mixes = 0;
    for (size_t v = 0; v < 2; v++) {
        struct pair p;
        pair_load(&p, PROGRAM, versions[v]);
        struct tally t;
        memset(&t, 0, sizeof t);
        struct run r;
        memset(&r, 0, sizeof r);
        r.warm = 1;
        r.timed = 1;
        for (r.first = 0; r.first < 2; r.first++) {
            uint64_t total, upto, reads;
            assert_int_equal(run_once(&p, &r, UINT64_MAX, UINT64_MAX, &total, 0), r.first);
            for (uint64_t n1 = 0; n1 < total; n1++) {
                run_once(&p, &r, n1, UINT64_MAX, &upto, 0);
                for (uint64_t n2 = total + 1; n2 <= upto; n2++) {
                    int res = run_once(&p, &r, n1, n2, &reads, 0);
                    tally_add(&t, res, reads, total);
                    if (res == -1) {
                        report_mix(versions[v], &r, 1, n1, n2, total, &p);
                        mixes++;
                    }
                }
            }
        }
        print_message("heap %s, back after the batch:\n", versions[v]);
        tally_print("A-B-A timed", &t);
        pair_free(&p);
    }
    use_program(ABA, "aba");
    assert_int_equal(mixes, 0);
}

/*
 * heap.py (3.11-3.15, the frame cache off), the program moving on to B at
 * any read after the batch of a snapshot whose walks' checks are put off
 * to its end (the batch taken as paused: the first of its kind). A thread
 * whose walk is rejected there is read again from one new batch, as a
 * retry is (snapshot.c, put_off_checks), not frame by frame, a system call
 * for each heap frame: B's stack, in at most two system calls more (that
 * batch, and a second read of the walk it gives) than a snapshot that
 * reads B from its start makes (B's code objects are new to the session
 * either way).
 */
static void test_heap_put_off_reread(void **state)
{
    (void)state;
    use_program(HEAP, "heap");
    for (size_t v = 0; v < NHEAP; v++) {
        struct pair p;
        pair_load(&p, PROGRAM, HEAP_VERSIONS[v]);
        struct run r;
        memset(&r, 0, sizeof r);
        r.warm = 1;
        r.timed = 1;
        uint64_t total, reads, calls_b, most = 0, rejected = 0;
        assert_int_equal(run_once(&p, &r, 0, UINT64_MAX, &reads, 0), 1);
        calls_b = run_calls;
        r.capture = 1;
        assert_int_equal(run_once(&p, &r, UINT64_MAX, UINT64_MAX, &total, 0), 0);
        r.capture = 0;
        /* From the first read after the batch (its call the one of most
         * pieces) on. */
        for (uint64_t n1 = run_cap_base + run_ncap; n1 < total; n1++) {
            if (run_once(&p, &r, n1, UINT64_MAX, &reads, 0) != 1 || reads <= total)
                continue;
            rejected++;
            if (run_calls > most)
                most = run_calls;
        }
        print_message("heap %s: %llu switches read B after a rejected walk, in at most %llu "
                      "system calls (B from the start: %llu)\n",
                      HEAP_VERSIONS[v], (unsigned long long)rejected, (unsigned long long)most,
                      (unsigned long long)calls_b);
        assert_true(rejected > 0);
        assert_true(most <= calls_b + 2);
        pair_free(&p);
    }
    use_program(ABA, "aba");
}

/* Where the batch (run_cap) copies the 8 bytes at addr the k-th time
 * (k = 0, 1): its piece and offset in one number, UINT64_MAX if not. */
static uint64_t cap_pos(uint64_t addr, int k)
{
    for (size_t j = 0; j < run_ncap; j++)
        if (addr >= run_cap[j].addr && addr + 8 <= run_cap[j].addr + run_cap[j].len && k-- == 0)
            return (uint64_t)j << 32 | (addr - run_cap[j].addr);
    return UINT64_MAX;
}

/*
 * The batch's order of heap frames (objframes.c, mem_inner_hint), on
 * heap.py's generator pipeline (3.11-3.15): the top frame is copied after
 * its caller, and before any of its callers is copied again: within its
 * caller's two copies (what lets top_settled spare it a check). (Frames
 * whose pieces merge, close on the heap, are copied by address, twice: the
 * chain order and the reverse order mem_inner_hint asks for hold between
 * pieces only.)
 */
static void test_heap_batch_order(void **state)
{
    (void)state;
    use_program(HEAP, "heap");
    for (size_t v = 0; v < NHEAP; v++) {
        uint64_t fr[3], cur, prev;
        heap_frames(HEAP_VERSIONS[v], 0, fr, 3, &cur, &prev);
        struct pair p;
        pair_load(&p, PROGRAM, HEAP_VERSIONS[v]);
        struct run r;
        memset(&r, 0, sizeof r);
        r.warm = 2;
        r.capture = 1;
        uint64_t total;
        assert_int_equal(run_once(&p, &r, UINT64_MAX, UINT64_MAX, &total, 0), 0);
        uint64_t first[3], second[3];
        for (int i = 0; i < 3; i++) {
            first[i] = cap_pos(fr[i] + prev, 0);
            second[i] = cap_pos(fr[i] + prev, 1);
            if (first[i] == UINT64_MAX || second[i] == UINT64_MAX)
                print_message("%s: frame %d copied %s\n", HEAP_VERSIONS[v], i,
                              first[i] == UINT64_MAX ? "never" : "once");
            assert_true(second[i] != UINT64_MAX);
            assert_true(first[i] < second[i]);
        }
        for (int i = 0; i < 2; i++) {
            if (!(first[1] < first[0] && first[0] < second[i + 1]))
                print_message("%s: the top's copies (%llx, %llx), frame %d's (%llx, %llx)\n",
                              HEAP_VERSIONS[v], (unsigned long long)first[0],
                              (unsigned long long)second[0], i + 1,
                              (unsigned long long)first[i + 1], (unsigned long long)second[i + 1]);
            assert_true(first[1] < first[0]);
            assert_true(first[0] < second[i + 1]);
        }
        pair_free(&p);
    }
    use_program(ABA, "aba");
}

/*
 * heap.py's pair of moments for a top that yields, for `version`: A, its
 * generator pipeline; B, the moment its top generator has just yielded
 * (the thread's current frame is the caller, the top's caller word
 * cleared, the caller not yet run on: image A so doctored). fr: the
 * addresses of A's top frame and its caller; *cur, of the word naming
 * the thread's current frame; *prev, the caller word's offset in a frame.
 */
static void pair_load_yielded(struct pair *p, const char *version, uint64_t fr[2], uint64_t *cur,
                              uint64_t *prev)
{
    uint64_t zero = 0;
    heap_frames(version, 0, fr, 2, cur, prev);
    pair_load(p, PROGRAM, version);
    char path[512], err[512];
    image_path(path, sizeof path, version, 0);
    prof_image_free(p->im[1]);
    free(p->orig[1]);
    assert_int_equal(prof_image_load_file(path, &p->im[1], err, sizeof err), 0);
    struct mem_image mi;
    mem_image_init(&mi, p->im[1]->regions, p->im[1]->nregions);
    assert_int_equal(mi.base.ops->write(&mi.base, fr[0] + *prev, &zero, 8), 0);
    assert_int_equal(mi.base.ops->write(&mi.base, *cur, &fr[1], 8), 0);
    size_t len = p->im[1]->npages * MEM_PAGE_SIZE;
    p->orig[1] = malloc(len ? len : 1);
    assert_non_null(p->orig[1]);
    memcpy(p->orig[1], p->im[1]->bytes, len);
}

/*
 * The top frame's exemption (torn.c, top_settled): heap.py's generator
 * pipeline (A), and the moment its top generator has just yielded (B: the
 * thread's current frame is the caller, the top's caller word cleared,
 * the caller not yet run on: image A so doctored). A walk whose every
 * first copy was made at A, the batch going on at B from just after the
 * top frame's first copy, is one moment: the top was copied after its
 * caller, which is the same in its second copy. It must give A's stack
 * from its first walk, though the top frame's second copy shows it
 * suspended. Every other switch gives A's stack, B's (the bottom part of
 * A's), or fails.
 */
/*
 * heap.py's pair at A and just after its top yielded (pair_load_yielded)
 * into *p, and a run of it (r: two snapshots of A first, no_infer as
 * given) whose undisturbed snapshot's batch is captured (run_cap): its
 * reads in *total.
 */
static void yielded_captured(struct pair *p, const char *version, int no_infer, struct run *r,
                             uint64_t fr[2], uint64_t *cur, uint64_t *prev, uint64_t *total)
{
    pair_load_yielded(p, version, fr, cur, prev);
    memset(r, 0, sizeof *r);
    r->warm = 2;
    r->capture = 1;
    r->no_infer = no_infer;
    assert_int_equal(run_once(p, r, UINT64_MAX, UINT64_MAX, total, 0), 0);
}

static void test_heap_top_settled(void **state)
{
    (void)state;
    use_program(HEAP, "heap");
    uint64_t mixes = 0, late = 0;
    for (size_t v = 0; v < NHEAP; v++) {
        uint64_t fr[2], cur, prev, total, reads;
        struct pair p;
        struct run r;
        yielded_captured(&p, HEAP_VERSIONS[v], 0, &r, fr, &cur, &prev, &total);
        uint64_t pos = cap_pos(fr[0] + prev, 0);
        assert_true(pos != UINT64_MAX);
        uint64_t after = run_cap_base + (pos >> 32) + 1;
        r.capture = 0;
        struct tally t;
        memset(&t, 0, sizeof t);
        for (uint64_t n1 = 0; n1 <= total; n1++) {
            int res = run_once(&p, &r, n1, UINT64_MAX, &reads, 0);
            tally_add(&t, res, reads, total);
            if (res == -1) {
                report_mix(HEAP_VERSIONS[v], &r, 0, n1, UINT64_MAX, total, &p);
                mixes++;
            }
            if (n1 >= after && (res != 0 || reads != total)) {
                print_message("%s: switched at read %llu (the top's first copy: %llu): %d, "
                              "%llu reads of %llu\n",
                              HEAP_VERSIONS[v], (unsigned long long)n1,
                              (unsigned long long)after - 1, res, (unsigned long long)reads,
                              (unsigned long long)total);
                late++;
            }
        }
        print_message("heap %s, the top yielding:\n", HEAP_VERSIONS[v]);
        tally_print("one switch ", &t);
        assert_true(after < total);
        pair_free(&p);
    }
    use_program(ABA, "aba");
    assert_int_equal(mixes, 0);
    assert_int_equal(late, 0);
}

/*
 * A top that moved on while the batch was read (torn.c,
 * prof_torn_later_top), 3.13+ (the thread state names its current frame
 * itself): heap.py's pipeline at A and just after its top yielded (B,
 * pair_load_yielded), the batch's reads from just after its first copy
 * of the current frame word served at B. The walk from A's top finds it
 * suspended, its caller unlinked (and not inferred: no_infer), and starts
 * again from the top the batch's second copy of that word names, B's, on
 * the same copies: B's stack (the bottom part of A's) with no read of its
 * own where the batch has that copy (3.15 with its frame cache); else the
 * thread is read again (the reads printed; 3.13, 3.14 and 3.15 without the
 * cache: bench/MECHANISMS.md, 2026-11-29, heap33). Every switch gives A's
 * stack, B's, or fails.
 */
static void test_later_top(void **state)
{
    (void)state;
    static const char *const versions[] = {"3.13", "3.14", "3.15"};
    use_program(HEAP, "heap");
    uint64_t mixes = 0, not_b = 0;
    for (size_t v = 0; v < sizeof versions / sizeof *versions; v++) {
        uint64_t fr[2], cur, prev, total, reads;
        struct pair p;
        struct run r;
        yielded_captured(&p, versions[v], 1, &r, fr, &cur, &prev, &total);
        uint64_t pos = cap_pos(cur, 0), top = cap_pos(fr[0] + prev, 0);
        assert_true(pos != UINT64_MAX && top != UINT64_MAX && pos < top);
        uint64_t after = run_cap_base + (pos >> 32) + 1;
        r.capture = 0;
        int res = run_once(&p, &r, after, UINT64_MAX, &reads, 0);
        print_message("heap %s, switched after the current frame's first copy: %d, %llu reads "
                      "of %llu\n",
                      versions[v], res, (unsigned long long)reads, (unsigned long long)total);
        not_b += res != -3;
        struct tally t;
        memset(&t, 0, sizeof t);
        for (uint64_t n1 = 0; n1 <= total; n1++) {
            res = run_once(&p, &r, n1, UINT64_MAX, &reads, 0);
            tally_add(&t, res, reads, total);
            if (res == -1) {
                report_mix(versions[v], &r, 0, n1, UINT64_MAX, total, &p);
                mixes++;
            }
        }
        tally_print("one switch ", &t);
        pair_free(&p);
    }
    use_program(ABA, "aba");
    assert_int_equal(mixes, 0);
    assert_int_equal(not_b, 0);
}

/*
 * One snapshot of the pair p (image 0, and image 1 from read at1 on) after
 * two of image 0 alone, on a fresh session: 1 if no thread failed; *reads,
 * the reads that snapshot made.
 */
static int start_run(struct pair *p, uint64_t at1, uint64_t *reads)
{
    struct switcher w;
    memset(&w, 0, sizeof w);
    pair_undo(p);
    for (int i = 0; i < 2; i++)
        mem_image_init(&w.im[i], p->im[i]->regions, p->im[i]->nregions);
    w.base.ops = &SW_OPS;
    pys_session *s = NULL;
    char err[512];
    struct pys_options opt = {0};
    opt.max_frames = RUN_MAX_FRAMES;
    assert_int_equal(prof_session_open(&s, 0, &w.base, &p->im[0]->facts, &opt, err, sizeof err), 0);
    const struct pys_snapshot *snap = NULL;
    for (int k = 0; k < 2; k++)
        assert_int_equal(pys_session_snapshot(s, &snap), 0);
    w.armed = 1;
    w.at1 = at1;
    w.at2 = UINT64_MAX;
    assert_int_equal(pys_session_snapshot(s, &snap), 0);
    int ok = 1;
    for (size_t i = 0; i < snap->interps[0].nthreads; i++)
        ok &= snap->interps[0].threads[i].error == 0;
    *reads = w.count;
    pys_session_free(s);
    return ok;
}

/*
 * 3.8-3.10: start.py stopped (tools/record_images.sh, "start") as a new
 * thread enters its first frame: the frame is the thread's current one,
 * without a caller, not yet marked executing, a moment every thread passes
 * through as it starts (and each call from C with no Python frame below
 * it, entered or left). Confirmed by a later read, it reads as the
 * thread's empty stack, the other thread's as it is, snapshot after
 * snapshot, with no thread failed. Then the moment switched, at each read
 * of a snapshot, to the one before (the thread state naming no frame yet):
 * where the later read finds the current frame changed, the thread is read
 * again (a frame made anew at the address a running one had looks the
 * same as one entered).
 */
static void test_thread_start(void **state)
{
    (void)state;
    static const char *const old[] = {"3.8", "3.9", "3.10"};
    for (size_t v = 0; v < sizeof old / sizeof *old; v++) {
        char name[32];
        snprintf(name, sizeof name, "start-%s.img", old[v]);
        struct pys_options opt = {0};
        pys_session *s = open_image(name, &opt);
        char path[512], err[512];
        named_path(path, sizeof path, name);
        uint64_t word = 0;
        for (int k = 0; k < 3; k++) {
            const struct pys_snapshot *snap = NULL;
            assert_int_equal(pys_session_snapshot(s, &snap), 0);
            assert_int_equal(snap->interps[0].nthreads, 2);
            size_t empty = 0, main_stack = 0;
            for (size_t i = 0; i < 2; i++) {
                const struct pys_thread *t = &snap->interps[0].threads[i];
                if (t->error) {
                    print_message("%s, snapshot %d:\n", name, k);
                    print_thread(t);
                }
                assert_int_equal(t->error, 0);
                for (size_t f = 0; f < t->nframes; f++)
                    main_stack += strcmp(t->frames[f].qualname, "main") == 0;
                if (t->nframes > 0)
                    continue;
                /* The new thread: its current frame, not executing, no caller. */
                uint64_t cur = 0, prev = 1;
                const struct cpy_offsets *o = &s->off;
                word = t->tstate + o->thread_state.current_frame;
                assert_int_equal(mem_read_u64(&s->mem, word, &cur), 0);
                assert_true(cur != 0);
                assert_int_equal(mem_read_u64(&s->mem, cur + o->interpreter_frame.previous, &prev),
                                 0);
                assert_int_equal(prev, 0);
                empty++;
            }
            assert_int_equal(empty, 1);
            assert_int_equal(main_stack, 1);
        }
        pys_session_free(s);
        struct pair p;
        for (int c = 0; c < 2; c++) {
            assert_int_equal(prof_image_load_file(path, &p.im[c], err, sizeof err), 0);
            size_t len = p.im[c]->npages * MEM_PAGE_SIZE;
            if (c == 1) {
                struct mem_image mi;
                uint64_t zero = 0;
                mem_image_init(&mi, p.im[1]->regions, p.im[1]->nregions);
                assert_int_equal(mi.base.ops->write(&mi.base, word, &zero, 8), 0);
            }
            p.orig[c] = malloc(len ? len : 1);
            assert_non_null(p.orig[c]);
            memcpy(p.orig[c], p.im[c]->bytes, len);
        }
        uint64_t total, reads, again = 0;
        assert_true(start_run(&p, UINT64_MAX, &total));
        for (uint64_t n = 0; n <= total; n++) {
            assert_true(start_run(&p, n, &reads));
            again += reads > total;
        }
        print_message("start %s: %llu of %llu switches read the thread again\n", old[v],
                      (unsigned long long)again, (unsigned long long)total + 1);
        assert_true(again > 0);
        pair_free(&p);
    }
}

/*
 * 3.8-3.10: a generator's frame copied as it was resumed. aba.py's moment
 * A, and the same with a2's frame as a suspended generator's (its caller
 * word cleared, not executing): every read from the second but one, that
 * one from A. Where it is the block of a2's frame holding its executing
 * flag, the walk's copy shows a2 running with no caller, under spin: a
 * chain cut short, whose every word the later reads of code object,
 * caller and position agree with. Only a2's flag, read again, tells
 * (torn.c, bottom_running): the thread must fail, never give that chain.
 */
static void test_resumed_midway(void **state)
{
    (void)state;
    static const char *const old[] = {"3.8", "3.9", "3.10"};
    for (size_t v = 0; v < sizeof old / sizeof *old; v++) {
        char path[512], err[512];
        image_path(path, sizeof path, old[v], 0);
        struct pys_options opt = {0};
        pys_session *s = NULL;
        assert_int_equal(pys_session_attach_image(&s, path, &opt, err, sizeof err), 0);
        const struct pys_snapshot *snap = NULL;
        assert_int_equal(pys_session_snapshot(s, &snap), 0);
        assert_int_equal(which_stack(&snap->interps[0].threads[0]), 0);
        uint64_t a2 = s->walker.raw[1].addr;
        const struct cpy_frame_offsets *f = &s->off.interpreter_frame;
        uint64_t flag = a2 + f->executing, caller = a2 + f->previous;
        /* Not running: 3.8-3.9's f_executing 0, 3.10's f_state
         * FRAME_SUSPENDED (-1). */
        uint8_t stopped = s->off.traits.executing ? 0 : 0xff;
        pys_session_free(s);
        /* The flag and the caller word in different 64-byte blocks (the
         * switcher's reads). */
        assert_true(flag / 64 != caller / 64);
        struct pair p;
        for (int c = 0; c < 2; c++) {
            assert_int_equal(prof_image_load_file(path, &p.im[c], err, sizeof err), 0);
            if (c == 1) {
                struct mem_image mi;
                uint64_t zero = 0;
                mem_image_init(&mi, p.im[1]->regions, p.im[1]->nregions);
                assert_int_equal(mi.base.ops->write(&mi.base, caller, &zero, 8), 0);
                assert_int_equal(mi.base.ops->write(&mi.base, flag, &stopped, 1), 0);
            }
            size_t len = p.im[c]->npages * MEM_PAGE_SIZE;
            p.orig[c] = malloc(len ? len : 1);
            assert_non_null(p.orig[c]);
            memcpy(p.orig[c], p.im[c]->bytes, len);
        }
        struct run r;
        memset(&r, 0, sizeof r);
        r.unit = 64;
        r.first = 1;
        uint64_t total = 0, reads;
        /* All from the second moment: a2 not running below spin. */
        assert_int_equal(run_once(&p, &r, UINT64_MAX, UINT64_MAX, &total, 0), 2);
        uint64_t failed = 0;
        for (uint64_t n = 0; n <= total; n++) {
            int res = run_once(&p, &r, n, n + 1, &reads, 1);
            if (res == -1)
                print_message("%s: a2 running without a caller, read %llu from A\n", old[v],
                              (unsigned long long)n);
            assert_int_not_equal(res, -1);
            failed += res == 2;
        }
        print_message("resumed %s: %llu of %llu switches failed the thread\n", old[v],
                      (unsigned long long)failed, (unsigned long long)total + 1);
        pair_free(&p);
    }
}

/*
 * 3.8-3.10: a cached code object whose memory was freed and taken by
 * another (a module's code object, run once as it is imported: the next
 * module's takes its place). aba.py's moment A, main's code object first
 * overwritten with a copy of spin's (a short one: main's position lies
 * past its end, the thread fails), then as it is: the frame naming finds
 * the position outside the cached code and has it checked, so the
 * thread's next walk reads it again and the snapshot gives A's stack with
 * no second try of the whole snapshot and no failed thread counted.
 */
static void test_code_reused(void **state)
{
    (void)state;
    static const char *const old[] = {"3.8", "3.9", "3.10"};
    use_program(ABA, "aba");
    for (size_t v = 0; v < sizeof old / sizeof *old; v++) {
        char path[512], err[512];
        image_path(path, sizeof path, old[v], 0);
        /* The code objects of spin (raw[0]) and main (raw[4]). */
        pys_session *s = NULL;
        struct pys_options opt = {0};
        assert_int_equal(pys_session_attach_image(&s, path, &opt, err, sizeof err), 0);
        const struct pys_snapshot *snap = NULL;
        assert_int_equal(pys_session_snapshot(s, &snap), 0);
        assert_int_equal(which_stack(&snap->interps[0].threads[0]), 0);
        uint64_t spin = s->walker.raw[0].code, mainc = s->walker.raw[4].code;
        size_t size = (size_t)s->off.code_object.size;
        uint8_t head[1024];
        assert_true(size <= sizeof head);
        assert_int_equal(mem_read_fresh(&s->mem, spin, head, size), 0);
        pys_session_free(s);
        /* Image 0: main's code object a copy of spin's; image 1: A. */
        struct pair p;
        for (int c = 0; c < 2; c++) {
            assert_int_equal(prof_image_load_file(path, &p.im[c], err, sizeof err), 0);
            size_t len = p.im[c]->npages * MEM_PAGE_SIZE;
            if (c == 0) {
                struct mem_image mi;
                mem_image_init(&mi, p.im[0]->regions, p.im[0]->nregions);
                assert_int_equal(mi.base.ops->write(&mi.base, mainc, head, size), 0);
            }
            p.orig[c] = malloc(len ? len : 1);
            assert_non_null(p.orig[c]);
            memcpy(p.orig[c], p.im[c]->bytes, len);
        }
        struct switcher w;
        memset(&w, 0, sizeof w);
        for (int c = 0; c < 2; c++)
            mem_image_init(&w.im[c], p.im[c]->regions, p.im[c]->nregions);
        w.base.ops = &SW_OPS;
        opt.max_frames = RUN_MAX_FRAMES;
        assert_int_equal(prof_session_open(&s, 0, &w.base, &p.im[0]->facts, &opt, err, sizeof err),
                         0);
        assert_int_equal(pys_session_snapshot(s, &snap), 0);
        assert_int_not_equal(snap->interps[0].threads[0].error, 0);
        w.first = 1;
        struct pys_stats before, after;
        pys_session_stats(s, &before);
        uint64_t tries = s->snapshots;
        assert_int_equal(pys_session_snapshot(s, &snap), 0);
        pys_session_stats(s, &after);
        const struct pys_thread *t = &snap->interps[0].threads[0];
        if (t->error)
            print_thread(t);
        assert_int_equal(which_stack(t), 0);
        print_message("%s: %llu tries of the snapshot, %llu failed threads counted\n", old[v],
                      (unsigned long long)(s->snapshots - tries),
                      (unsigned long long)(after.thread_errors - before.thread_errors));
        assert_int_equal(s->snapshots - tries, 1);
        assert_int_equal(after.thread_errors, before.thread_errors);
        pys_session_free(s);
        pair_free(&p);
    }
}

/*
 * gens.py (3.12-3.15) at A, in inner under outer, and at B, in outer with
 * inner suspended: every switch from A to B after snapshots of A. A walk
 * whose top frame was named at A and whose copy of inner was made at B
 * finds inner unlinked (a generator's caller is unlinked as it yields),
 * though inner ran on top of outer when the top was read: on a target
 * whose generators take turns faster than a walk reads, a walk whose top is
 * a deep generator nearly always meets one, and rejected walks make the
 * kept samples lean shallow. With the caller inner had when walks last saw
 * it linked (objframes.c), A's stack is read: more switches give A's stack
 * than without, and every switch still gives A's stack, B's, or a failed
 * thread, never a mix.
 */
static void suspended_sweeps(const struct want (*stack)[6], const char *program)
{
    static const char *const versions[] = {"3.12", "3.13", "3.14", "3.15"};
    use_program(stack, program);
    uint64_t mixes = 0;
    for (size_t v = 0; v < sizeof versions / sizeof *versions; v++) {
        struct pair p;
        pair_load(&p, PROGRAM, versions[v]);
        struct tally t[2];
        memset(t, 0, sizeof t);
        for (int inf = 0; inf < 2; inf++) {
            struct run r;
            memset(&r, 0, sizeof r);
            r.no_infer = !inf;
            /* After three snapshots or more, so that the switched batch
             * has recent ones to be judged by and is not taken as paused
             * (a paused batch's heap frames are read again after it,
             * torn.c batch_settles, which then sees B). */
            for (r.warm = 3; r.warm <= 4; r.warm++) {
                r.unit = 0;
                mixes += sweep(&p, versions[v], &r, 0, &t[inf]);
                r.unit = 64;
                mixes += sweep(&p, versions[v], &r, 0, &t[inf]);
            }
        }
        print_message("%s %s, frame cache off:\n", program, versions[v]);
        tally_print("callers unknown ", &t[0]);
        tally_print("callers inferred", &t[1]);
        assert_true(t[1].got[0] > t[0].got[0]);
        pair_free(&p);
    }
    use_program(ABA, "aba");
    assert_int_equal(mixes, 0);
}

static void test_suspended_generator(void **state)
{
    (void)state;
    suspended_sweeps(GENS, "gens");
}

/*
 * The generators' callers learned (objframes.c), on frames made up: a
 * pipeline of five generators built again and again, whose objects the
 * allocator hands back at the same five addresses in the other order each
 * time (each stage's frame where another's was). Walks of both layouts
 * kept, the links of both are known, each frame's by its code object; a
 * generator resumed from C (3.12+: an entry frame, on the C stack, between
 * it and its caller) has that entry frame for its caller; a frame that
 * ends a walk has none.
 */
static void test_caller_layouts(void **state)
{
    (void)state;
    struct pys_session *s = calloc(1, sizeof *s);
    assert_non_null(s);
    enum { STAGES = 5 };
    const uint64_t code[STAGES] = {0x1000, 0x2000, 0x3000, 0x4000, 0x5000};
    const uint64_t entry = 0x7ffc0000, entry_code = 0x9000, main_frame = 0x6000;
    struct cpy_raw_frame raw[2][STAGES + 3];
    memset(raw, 0, sizeof raw);
    for (int l = 0; l < 2; l++) {
        /* Innermost first: stage 5 (called by 4, ...), stage 1 resumed by
         * C, its entry frame, main, the thread's base entry frame. */
        for (int k = 0; k < STAGES; k++) {
            int at = l ? STAGES - 1 - k : k;
            raw[l][k] = (struct cpy_raw_frame){.addr = 0x7f0000001000 + 0x200 * (uint64_t)at,
                                               .code = code[STAGES - 1 - k],
                                               .instr_ptr = code[STAGES - 1 - k] + 0x40,
                                               .owner = CPY_OWNER_GENERATOR};
        }
        raw[l][STAGES] = (struct cpy_raw_frame){.addr = entry, .code = entry_code, .owner = 3,
                                                .shim = 1};
        raw[l][STAGES + 1] = (struct cpy_raw_frame){.addr = main_frame, .code = 0x8000};
        raw[l][STAGES + 2] = (struct cpy_raw_frame){.addr = 0x7ffc1000, .owner = 3, .shim = 1};
        s->snapshots++;
        prof_objframes_learn(s, raw[l], STAGES + 3);
    }
    uint64_t caller, want[2];
    for (int l = 0; l < 2; l++)
        for (int k = 0; k < STAGES; k++) {
            /* Among its callers (the middle stage has one in each layout,
             * at one address). */
            size_t c = 0, found = 0;
            for (; prof_objframes_caller(s, raw[l][k].addr, raw[l][k].code, c, &caller, want);
                 c++)
                if (caller == raw[l][k + 1].addr) {
                    found++;
                    assert_int_equal(want[0], raw[l][k + 1].code);
                    assert_int_equal(want[1], raw[l][k + 1].instr_ptr);
                }
            assert_int_equal(found, 1);
            assert_int_equal(c, k == STAGES / 2 ? 2 : 1);
        }
    /* A frame at a known address running other code, and the entry frame
     * (not a generator's): no link. */
    assert_int_equal(prof_objframes_caller(s, raw[0][0].addr, 0x4242, 0, &caller, want), 0);
    assert_int_equal(prof_objframes_caller(s, entry, entry_code, 0, &caller, want), 0);
    free(s);
}

/*
 * cgens.py (3.12-3.15), the same with outer pulled by next() (C), and at B
 * spin, pulled by the same call: outer's caller is the entry frame next()'s call into the
 * interpreter put on the C stack, which names main's frame; it is learned
 * as an inline caller is (objframes.c).
 */
static void test_c_resumed_generator(void **state)
{
    (void)state;
    suspended_sweeps(CGENS, "cgens");
}

/* --- 3.15's frame cache on a generator pipeline ------------------------------ */

/* The mixes of gens.py's sweeps from moment `first` under 3.15, with the
 * frame cache on or off: one switch (*one) and there and back (*back). */
static void gens_sweeps(struct pair *p, int fc, int first, uint64_t *one, uint64_t *back,
                        struct tally *t)
{
    struct run r;
    memset(&r, 0, sizeof r);
    r.opt.frame_cache = fc;
    r.first = first;
    for (r.warm = 1; r.warm <= 2; r.warm++) {
        r.unit = 0;
        *one += sweep(p, "3.15", &r, 0, t);
        r.unit = 64;
        *one += sweep(p, "3.15", &r, 0, t);
        r.unit = 0;
        if (r.warm == 1)
            *back += sweep(p, "3.15", &r, 1, t);
    }
}

/*
 * gens.py under 3.15 at A (inner under outer under main) and at B (outer
 * under main, inner suspended), the frame cache on: every switch of a
 * snapshot's reads from one moment to the other (a piece per read, or 64
 * bytes), and there and back, after one or two snapshots of the first.
 * Anything but A's stack, B's or a failed thread is a mix: outer shown as
 * the top at its `for` line, where it was calling inner, one frame
 * shallower than the moment.
 *
 * From A to B, none: a walk torn at inner (suspended by the time its frame
 * was copied) starts again from the top the thread state's second copy
 * names (torn.c, prof_torn_later_top), outer, whose copies were made
 * before that copy, at A, calling inner; its position in the second copy
 * must match. Walks nothing disturbs give their moment's stack (sweep),
 * and switches from A give both moments' stacks.
 *
 * From B (the thread state read at B, outer copied at A), a top frame
 * copied as it calls shows the same, with the frame cache as without it
 * (a known hole of the top frame's exemption, torn.c's top_settled):
 * counted, the cache must add none.
 */
static void test_gens_frame_cache(void **state)
{
    (void)state;
    use_program(GENS, "gens");
    struct pair p;
    pair_load(&p, PROGRAM, "3.15");
    struct tally from_a, from_b, off;
    memset(&from_a, 0, sizeof from_a);
    memset(&from_b, 0, sizeof from_b);
    memset(&off, 0, sizeof off);
    uint64_t a_one = 0, a_back = 0, b_one = 0, b_back = 0, off_mixes = 0;
    gens_sweeps(&p, 1, 0, &a_one, &a_back, &from_a);
    quiet_mixes = 1;
    gens_sweeps(&p, 1, 1, &b_one, &b_back, &from_b);
    gens_sweeps(&p, 0, 0, &off_mixes, &off_mixes, &off);
    gens_sweeps(&p, 0, 1, &off_mixes, &off_mixes, &off);
    quiet_mixes = 0;
    print_message("gens 3.15:\n");
    tally_print("cache, from A ", &from_a);
    tally_print("cache, from B ", &from_b);
    tally_print("no cache      ", &off);
    print_message("  mixes with the cache: from A %llu + %llu there and back, from B %llu + "
                  "%llu; without it %llu\n",
                  (unsigned long long)a_one, (unsigned long long)a_back, (unsigned long long)b_one,
                  (unsigned long long)b_back, (unsigned long long)off_mixes);
    pair_free(&p);
    use_program(ABA, "aba");
    assert_int_equal(a_one, 0);
    assert_true(from_a.got[0] > 0 && from_a.got[1] > 0);
    assert_true(a_one + a_back + b_one + b_back <= off_mixes);
}

/* The address of frame i of image `name`'s walk (in tests/images), and
 * the bytes of a frame. */
static uint64_t walk_frame(const char *version, int chain, size_t i, size_t *fsize)
{
    pys_session *s = chain_session(version, chain);
    uint64_t a = s->walker.raw[i].addr;
    *fsize = (size_t)s->off.interpreter_frame.size;
    pys_session_free(s);
    return a;
}

/*
 * awaits.py (3.12-3.15): a coroutine (getter) calls a plain function
 * (take, on the data stack, naming getter's frame as its caller); getter
 * returns, its object is freed, and the next coroutine of the same shape
 * (c1) takes its memory: c1's frame lies where getter's lay, awaiting c2.
 * Caught the same way at each read (take's frame copied before the
 * switch, the heap frame after it: a target that goes round one turn of a
 * loop while a walk is read, and round the next while the walk is read
 * again), every copy of each frame agrees with the other: only the chain's
 * shape tells. A frame at an instruction that resumes a generator (c1 at
 * its await) with a plain frame above it is refused (torn.c,
 * prof_torn_resuming): the thread shows A, B, or fails, never take under
 * c1 (the coroutines workload's `s3_1;put_nowait`). Each image alone
 * reads exactly.
 */
static void test_await_splice(void **state)
{
    (void)state;
    static const char *const versions[] = {"3.12", "3.13", "3.14", "3.15"};
    use_program(AWAITS, "awaits");
    uint64_t mixes = 0;
    for (size_t v = 0; v < sizeof versions / sizeof *versions; v++) {
        int fcs = strcmp(versions[v], "3.15") == 0 ? 2 : 1;
        for (int c = 0; c < 2; c++)
            for (int fc = 0; fc < fcs; fc++) {
                char name[64];
                snprintf(name, sizeof name, "awaits-%s-%c.img", versions[v], "ab"[c]);
                struct pys_options opt = {0};
                opt.frame_cache = fc;
                replay_exactly(name, &opt, AWAITS[c], 6);
            }
        /* What makes the mix possible: getter's frame where c1's is. */
        size_t fsize;
        uint64_t getter = walk_frame(versions[v], 0, 1, &fsize);
        assert_int_equal(getter, walk_frame(versions[v], 1, 1, &fsize));
        struct pair p;
        pair_load(&p, PROGRAM, versions[v]);
        for (int fc = 0; fc < fcs; fc++) {
            struct switcher w;
            memset(&w, 0, sizeof w);
            for (int i = 0; i < 2; i++) {
                memcpy(p.im[i]->bytes, p.orig[i], p.im[i]->npages * MEM_PAGE_SIZE);
                mem_image_init(&w.im[i], p.im[i]->regions, p.im[i]->nregions);
            }
            w.base.ops = &SW_OPS;
            w.split_lo = getter;
            w.split_hi = getter + fsize;
            pys_session *s = NULL;
            char err[512];
            struct pys_options opt = {0};
            opt.max_frames = RUN_MAX_FRAMES;
            opt.frame_cache = fc;
            assert_int_equal(
                prof_session_open(&s, 0, &w.base, &p.im[0]->facts, &opt, err, sizeof err), 0);
            uint64_t got[3] = {0, 0, 0};
            for (int k = 0; k < 6; k++) {
                const struct pys_snapshot *snap = NULL;
                assert_int_equal(pys_session_snapshot(s, &snap), 0);
                const struct pys_thread *t = &snap->interps[0].threads[0];
                int res = t->error ? 2 : which_stack(t);
                if (res < 0) {
                    print_message("awaits %s, frame_cache=%d, snapshot %d: a mix\n", versions[v],
                                  fc, k);
                    print_thread(t);
                    mixes++;
                } else {
                    got[res]++;
                }
            }
            print_message("awaits %s, frame_cache=%d: %llu A, %llu B, %llu failed\n", versions[v],
                          fc, (unsigned long long)got[0], (unsigned long long)got[1],
                          (unsigned long long)got[2]);
            pys_session_free(s);
        }
        pair_free(&p);
    }
    use_program(ABA, "aba");
    assert_int_equal(mixes, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay),
        cmocka_unit_test(test_bad_image),
        cmocka_unit_test(test_shape),
        cmocka_unit_test(test_switch),
        cmocka_unit_test(test_anchor_position),
        cmocka_unit_test(test_entering),
        cmocka_unit_test(test_grow),
        cmocka_unit_test(test_grow_near),
        cmocka_unit_test(test_splice),
        cmocka_unit_test(test_init_shim),
        cmocka_unit_test(test_entering_from_c),
        cmocka_unit_test(test_stopped_in_yield),
        cmocka_unit_test(test_splice_top),
        cmocka_unit_test(test_objframes),
        cmocka_unit_test(test_retry_spread),
        cmocka_unit_test(test_inner_batch),
        cmocka_unit_test(test_heap_replay),
        cmocka_unit_test(test_heap_switch),
        cmocka_unit_test(test_heap_reread),
        cmocka_unit_test(test_heap_put_off_reread),
        cmocka_unit_test(test_heap_batch_order),
        cmocka_unit_test(test_heap_top_settled),
        cmocka_unit_test(test_later_top),
        cmocka_unit_test(test_thread_start),
        cmocka_unit_test(test_resumed_midway),
        cmocka_unit_test(test_code_reused),
        cmocka_unit_test(test_suspended_generator),
        cmocka_unit_test(test_caller_layouts),
        cmocka_unit_test(test_c_resumed_generator),
        cmocka_unit_test(test_gens_frame_cache),
        cmocka_unit_test(test_await_splice),
    };
    /* PYSTROBE_TEST_FILTER=test_x: only the tests matching it. */
    if (getenv("PYSTROBE_TEST_FILTER"))
        cmocka_set_test_filter(getenv("PYSTROBE_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
