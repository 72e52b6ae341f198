/*
 * Unit tests of the platform layer: the /proc/PID/maps parser on crafted
 * text (field by field, and that malformed text is refused without touching
 * the result), then the live calls against this process and its children:
 * reading maps and opening a mapped file, memory reads that succeed, fail or
 * stop part way, and process and thread states (running, sleeping, zombie,
 * gone); thread ids of a process in a child PID namespace, and an exec seen
 * through plat_program.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pystrobe/pystrobe.h>

#include "platform/platform.h"
#include "mem/mem.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How long to wait for a child to reach a state: generous for loaded CI. */
#define WAIT_MS 5000

static int parse_str(const char *s, struct plat_maps *m)
{
    return plat_maps_parse(s, strlen(s), m);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* --- parser ------------------------------------------------------------- */

static void test_parse_kernel_lines(void **state)
{
    static const char text[] =
        "00400000-00425000 r--p 00000000 fe:00 247134                     "
        "/usr/bin/python3.15\n"
        "00425000-00880000 r-xp 00025000 fe:00 247134                     "
        "/usr/bin/python3.15\n"
        "7f0b70e4f000-7f0b70ea6000 rw-s 1a2b3c4d5e fd:01 18446744073709551615 /dev/shm/x\n"
        "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  "
        "[vsyscall]\n";
    struct plat_maps m = {NULL, 0};
    (void)state;

    assert_int_equal(parse_str(text, &m), 0);
    assert_int_equal(m.n, 4);
    assert_int_equal(m.v[0].start, 0x400000);
    assert_int_equal(m.v[0].end, 0x425000);
    assert_string_equal(m.v[0].perms, "r--p");
    assert_int_equal(m.v[0].offset, 0);
    assert_int_equal(m.v[0].dev_major, 0xfe);
    assert_int_equal(m.v[0].dev_minor, 0);
    assert_int_equal(m.v[0].inode, 247134);
    assert_string_equal(m.v[0].path, "/usr/bin/python3.15");
    assert_string_equal(m.v[1].perms, "r-xp");
    assert_int_equal(m.v[1].offset, 0x25000);
    assert_int_equal(m.v[2].start, 0x7f0b70e4f000);
    assert_int_equal(m.v[2].end, 0x7f0b70ea6000);
    assert_string_equal(m.v[2].perms, "rw-s");
    assert_int_equal(m.v[2].offset, 0x1a2b3c4d5e);
    assert_int_equal(m.v[2].dev_major, 0xfd);
    assert_int_equal(m.v[2].dev_minor, 1);
    assert_int_equal(m.v[2].inode, UINT64_MAX);
    assert_string_equal(m.v[2].path, "/dev/shm/x");
    assert_int_equal(m.v[3].start, 0xffffffffff600000);
    assert_int_equal(m.v[3].end, 0xffffffffff601000);
    assert_string_equal(m.v[3].perms, "--xp");
    assert_string_equal(m.v[3].path, "[vsyscall]");
    plat_maps_release(&m);
    assert_null(m.v);
    assert_int_equal(m.n, 0);
}

static void test_parse_path_with_spaces(void **state)
{
    static const char text[] =
        "7f0000000000-7f0000001000 r-xp 00001000 08:01 42   /tmp/my dir/lib  x.so\n"
        "7f0000001000-7f0000002000 r--p 00000000 00:00 0 [anon:name with spaces]\n";
    struct plat_maps m = {NULL, 0};
    (void)state;

    assert_int_equal(parse_str(text, &m), 0);
    assert_int_equal(m.n, 2);
    assert_string_equal(m.v[0].path, "/tmp/my dir/lib  x.so");
    assert_int_equal(m.v[0].inode, 42);
    assert_string_equal(m.v[1].path, "[anon:name with spaces]");
    plat_maps_release(&m);
}

static void test_parse_deleted(void **state)
{
    static const char text[] = "7f1000000000-7f1000200000 r--p 00000000 fe:00 9 "
                               "/usr/lib/libpython3.13.so.1.0 (deleted)\n";
    struct plat_maps m = {NULL, 0};
    (void)state;

    assert_int_equal(parse_str(text, &m), 0);
    assert_int_equal(m.n, 1);
    assert_string_equal(m.v[0].path, "/usr/lib/libpython3.13.so.1.0 (deleted)");
    plat_maps_release(&m);
}

static void test_parse_pseudo_paths(void **state)
{
    static const char text[] =
        "5580f58e6000-5580f5907000 rw-p 00000000 00:00 0                          [heap]\n"
        "7ffc0a000000-7ffc0a021000 rw-p 00000000 00:00 0                          [stack]\n"
        "7ffc0a1f0000-7ffc0a1f4000 r--p 00000000 00:00 0                          [vvar]\n"
        "7ffc0a1f4000-7ffc0a1f6000 r-xp 00000000 00:00 0                          [vdso]\n";
    static const char *const want[] = {"[heap]", "[stack]", "[vvar]", "[vdso]"};
    struct plat_maps m = {NULL, 0};
    (void)state;

    assert_int_equal(parse_str(text, &m), 0);
    assert_int_equal(m.n, 4);
    for (size_t i = 0; i < 4; i++) {
        assert_string_equal(m.v[i].path, want[i]);
        assert_int_equal(m.v[i].inode, 0);
    }
    plat_maps_release(&m);
}

static void test_parse_anonymous(void **state)
{
    /* As the kernel prints it (a space after the inode), without that
     * space, and with padding but no path. */
    static const char text[] = "7f0b70d8b000-7f0b70e4f000 rw-p 00000000 00:00 0 \n"
                               "7f0b70e4f000-7f0b70e50000 ---p 00000000 00:00 0\n"
                               "7f0b70e50000-7f0b70e51000 rw-p 00000000 00:00 0          \n";
    struct plat_maps m = {NULL, 0};
    (void)state;

    assert_int_equal(parse_str(text, &m), 0);
    assert_int_equal(m.n, 3);
    for (size_t i = 0; i < 3; i++)
        assert_null(m.v[i].path);
    assert_string_equal(m.v[1].perms, "---p");
    assert_int_equal(m.v[2].start, 0x7f0b70e50000);
    plat_maps_release(&m);
}

static void test_parse_long_line(void **state)
{
    static const char head[] = "7f0000000000-7f0000001000 r--p 00000000 08:01 7 /";
    size_t plen = 100000, hlen = sizeof(head) - 1;
    char *text = malloc(hlen + plen + 64);
    struct plat_maps m = {NULL, 0};
    size_t len;
    (void)state;

    assert_non_null(text);
    memcpy(text, head, hlen);
    memset(text + hlen, 'a', plen);
    len = hlen + plen;
    text[len++] = '\n';
    len += (size_t)sprintf(text + len, "%s", "7f0000001000-7f0000002000 r--p 00000000 00:00 0\n");
    assert_int_equal(plat_maps_parse(text, len, &m), 0);
    assert_int_equal(m.n, 2);
    assert_int_equal(strlen(m.v[0].path), plen + 1);
    assert_int_equal(m.v[0].path[0], '/');
    assert_int_equal(m.v[0].path[plen], 'a');
    assert_null(m.v[1].path);
    plat_maps_release(&m);
    free(text);
}

static void test_parse_no_trailing_newline(void **state)
{
    static const char text[] = "00400000-00425000 r--p 00000000 fe:00 1 /a\n"
                               "00425000-00426000 r-xp 00025000 fe:00 1 /a b";
    struct plat_maps m = {NULL, 0};
    (void)state;

    assert_int_equal(parse_str(text, &m), 0);
    assert_int_equal(m.n, 2);
    assert_string_equal(m.v[1].path, "/a b");
    plat_maps_release(&m);

    /* Not NUL-terminated: the parser must stop at len. */
    assert_int_equal(plat_maps_parse(text, 43, &m), 0);
    assert_int_equal(m.n, 1);
    assert_string_equal(m.v[0].path, "/a");
    plat_maps_release(&m);
    assert_int_equal(plat_maps_parse(text, 42, &m), 0);
    assert_int_equal(m.n, 1);
    assert_string_equal(m.v[0].path, "/a");
    plat_maps_release(&m);
}

static void test_parse_empty(void **state)
{
    struct plat_map sentinel;
    struct plat_maps m = {&sentinel, 77};
    (void)state;

    assert_int_equal(plat_maps_parse("", 0, &m), 0);
    assert_null(m.v);
    assert_int_equal(m.n, 0);
    m.v = &sentinel;
    assert_int_equal(plat_maps_parse(NULL, 0, &m), 0);
    assert_null(m.v);
    assert_int_equal(m.n, 0);
    plat_maps_release(&m);
    plat_maps_release(NULL);
}

static void test_parse_big_device_numbers(void **state)
{
    static const char text[] = "1000-2000 r--p 0 103:2 5 /dev/nvme\n"
                               "2000-2000 r--p ffffffffffffffff ffffffff:ffffffff 0\n";
    struct plat_maps m = {NULL, 0};
    (void)state;

    assert_int_equal(parse_str(text, &m), 0);
    assert_int_equal(m.n, 2);
    assert_int_equal(m.v[0].dev_major, 0x103);
    assert_int_equal(m.v[0].dev_minor, 2);
    assert_int_equal(m.v[1].offset, UINT64_MAX);
    assert_int_equal(m.v[1].dev_major, 0xffffffffu);
    assert_int_equal(m.v[1].start, m.v[1].end);
    plat_maps_release(&m);
}

static void test_parse_malformed(void **state)
{
#define GOOD "00400000-00425000 r--p 00000000 fe:00 1 /x\n"
    static const char *const bad[] = {
        "\n",
        "garbage\n",
        GOOD "\n" GOOD, /* blank line */
        GOOD "00400000-0042",
        "00400000 00425000 r--p 00000000 fe:00 1 /x\n",
        "-00425000 r--p 00000000 fe:00 1 /x\n",
        "00400000- r--p 00000000 fe:00 1 /x\n",
        "00400000-00425000 r--x 00000000 fe:00 1 /x\n",
        "00400000-00425000 rw- 00000000 fe:00 1 /x\n",
        "00400000-00425000 R--p 00000000 fe:00 1 /x\n",
        "00400000-00425000 r--p 00000000 fe:00\n",
        "00400000-00425000 r--p 00000000 fe:00 \n",
        "00400000-00425000 r--p 00000000 fe00 1 /x\n",
        "00400000-00425000 r--p 00000000 :00 1 /x\n",
        "00400000-00425000 r--p 00000000 fe:00 1x /x\n",
        "00400000-00425000 r--p 00000000 fe:00 1\t/x\n",
        "00400000-00425000  r--p 00000000 fe:00 1 /x\n",
        " 00400000-00425000 r--p 00000000 fe:00 1 /x\n",
        "00425000-00400000 r--p 00000000 fe:00 1 /x\n",   /* start > end */
        "10000000000000000-1 r--p 00000000 fe:00 1 /x\n", /* 17 digits */
        "0-1 r--p 10000000000000000 fe:00 1 /x\n",        /* offset overflow */
        "0-1 r--p 0 100000000:00 1 /x\n",                 /* major overflow */
        "0-1 r--p 0 0:100000000 1 /x\n",                  /* minor overflow */
        "0-1 r--p 0 0:0 18446744073709551616 /x\n",       /* inode overflow */
        "0x400000-0x425000 r--p 00000000 fe:00 1 /x\n",
        "00400000-00425000 r--p 00000000 fe:00 -1 /x\n",
        "00400000-00425000 r--p\n",
        "00400000-00425000",
    };
#undef GOOD
    struct plat_map sentinel;
    (void)state;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct plat_maps m = {&sentinel, 77};

        if (parse_str(bad[i], &m) != PYS_E_CORRUPT)
            fail_msg("accepted malformed maps text #%zu: \"%s\"", i, bad[i]);
        /* The out-parameter is untouched on failure. */
        assert_ptr_equal(m.v, &sentinel);
        assert_int_equal(m.n, 77);
    }
}

static void test_parse_nul_byte(void **state)
{
    static const char text[] = "00400000-00425000 r--p 00000000 fe:00 1 /a\0b\n";
    struct plat_maps m = {NULL, 0};
    (void)state;

    assert_int_equal(plat_maps_parse(text, sizeof(text) - 1, &m), PYS_E_CORRUPT);
    assert_null(m.v);
    assert_int_equal(plat_maps_parse(NULL, 1, &m), PYS_E_INVAL);
}

/* --- live: maps and files ------------------------------------------------ */

static const struct plat_map *find_map(const struct plat_maps *m, uint64_t addr)
{
    for (size_t i = 0; i < m->n; i++) {
        if (m->v[i].start <= addr && addr < m->v[i].end)
            return &m->v[i];
    }
    return NULL;
}

static void test_maps_read_self(void **state)
{
    struct plat_maps m = {NULL, 0};
    const struct plat_map *fn;
    char exe[PATH_MAX];
    ssize_t n;
    int have_stack = 0;
    (void)state;

    assert_int_equal(plat_maps_read(getpid(), &m), 0);
    assert_true(m.n > 5);
    fn = find_map(&m, (uint64_t)(uintptr_t)&test_maps_read_self);
    assert_non_null(fn);
    assert_int_equal(fn->perms[2], 'x');
    assert_non_null(fn->path);
    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    assert_true(n > 0);
    exe[n] = '\0';
    assert_string_equal(fn->path, exe);
    for (size_t i = 0; i < m.n; i++)
        have_stack |= m.v[i].path != NULL && strcmp(m.v[i].path, "[stack]") == 0;
    assert_true(have_stack);
    plat_maps_release(&m);
}

static void assert_same_file(int fd, const char *path)
{
    struct stat a, b;

    assert_int_equal(fstat(fd, &a), 0);
    assert_int_equal(stat(path, &b), 0);
    assert_int_equal(a.st_dev, b.st_dev);
    assert_int_equal(a.st_ino, b.st_ino);
}

static void test_map_open_self(void **state)
{
    struct plat_maps m = {NULL, 0};
    const struct plat_map *fn;
    struct plat_map copy;
    int fd;
    (void)state;

    assert_int_equal(plat_maps_read(getpid(), &m), 0);
    fn = find_map(&m, (uint64_t)(uintptr_t)&test_map_open_self);
    assert_non_null(fn);

    /* map_files (this test runs as root, or it falls back to the path). */
    fd = plat_map_open(getpid(), fn);
    assert_true(fd >= 0);
    assert_same_file(fd, "/proc/self/exe");
    close(fd);

    /* Bounds that name no mapping: only /proc/PID/root/PATH can work. */
    copy = *fn;
    copy.start = 0x1000;
    copy.end = 0x2000;
    fd = plat_map_open(getpid(), &copy);
    assert_true(fd >= 0);
    assert_same_file(fd, "/proc/self/exe");
    close(fd);

    /* No fallback for anonymous, relative or deleted paths. */
    copy.path = NULL;
    assert_true(plat_map_open(getpid(), &copy) < 0);
    copy.path = "[heap]";
    assert_true(plat_map_open(getpid(), &copy) < 0);
    copy.path = "/bin/sh (deleted)";
    assert_int_equal(plat_map_open(getpid(), &copy), PYS_E_NOTFOUND);
    plat_maps_release(&m);
}

/* --- live: memory --------------------------------------------------------- */

/* Two pages: the first readable, the second unmapped. Returns the first. */
static char *page_before_hole(size_t *pagesz)
{
    long ps = sysconf(_SC_PAGESIZE);
    char *p;

    assert_true(ps > 0);
    p = mmap(NULL, 2 * (size_t)ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    assert_int_equal(munmap(p + ps, (size_t)ps), 0);
    memset(p, 0x5a, (size_t)ps);
    *pagesz = (size_t)ps;
    return p;
}

static void test_mem_read_self(void **state)
{
    static const char known[] = "pystrobe reads this";
    char buf[sizeof(known)];
    char out[16];
    size_t ps;
    char *page;
    (void)state;

    memset(buf, 0, sizeof(buf));
    assert_int_equal(plat_mem_read(getpid(), (uint64_t)(uintptr_t)known, buf, sizeof(buf)), 0);
    assert_memory_equal(buf, known, sizeof(known));
    assert_int_equal(plat_mem_read(getpid(), (uint64_t)(uintptr_t)known, buf, 0), 0);

    assert_int_equal(plat_mem_read(getpid(), 0, buf, 8), PYS_E_BADADDR);
    assert_int_equal(plat_mem_read(getpid(), UINT64_MAX - 3, buf, 8), PYS_E_BADADDR);
    assert_int_equal(plat_mem_read(getpid(), 0xffff800000000000u, buf, 8), PYS_E_BADADDR);

    page = page_before_hole(&ps);
    /* Inside the hole. */
    assert_int_equal(plat_mem_read(getpid(), (uint64_t)(uintptr_t)(page + ps), out, 8),
                     PYS_E_BADADDR);
    /* Across the edge: a short read. */
    memset(out, 0, sizeof(out));
    assert_int_equal(
        plat_mem_read(getpid(), (uint64_t)(uintptr_t)(page + ps - 8), out, sizeof(out)),
        PYS_E_BADADDR);
    assert_int_equal(plat_mem_read(getpid(), (uint64_t)(uintptr_t)(page + ps - 8), out, 8), 0);
    assert_int_equal(out[0], 0x5a);
    munmap(page, ps);
}

static void test_mem_readv_self(void **state)
{
    static const char a[] = "first", b[] = "second", c[] = "third";
    char ba[sizeof(a)], bb[sizeof(b)], bc[sizeof(c)], bd[16];
    size_t ps;
    char *page = page_before_hole(&ps);
    uint64_t hole = (uint64_t)(uintptr_t)(page + ps);
    (void)state;

    struct plat_seg all[] = {
        {(uint64_t)(uintptr_t)a, ba, sizeof(a)},
        {(uint64_t)(uintptr_t)b, bb, sizeof(b)},
        {(uint64_t)(uintptr_t)c, bc, sizeof(c)},
    };
    assert_int_equal(plat_mem_readv(getpid(), all, 3), 3);
    assert_string_equal(ba, a);
    assert_string_equal(bb, b);
    assert_string_equal(bc, c);
    assert_int_equal(plat_mem_readv(getpid(), all, 0), 0);

    /* good + bad + good: only the first counts, the third is not read. */
    struct plat_seg gbg[] = {
        {(uint64_t)(uintptr_t)a, ba, sizeof(a)},
        {hole, bd, 8},
        {(uint64_t)(uintptr_t)c, bc, sizeof(c)},
    };
    memset(bc, 0, sizeof(bc));
    assert_int_equal(plat_mem_readv(getpid(), gbg, 3), 1);
    assert_string_equal(ba, a);
    assert_int_equal(bc[0], 0);

    /* good + segment running into the hole + good. */
    struct plat_seg gpg[] = {
        {(uint64_t)(uintptr_t)a, ba, sizeof(a)},
        {hole - 8, bd, 16},
        {(uint64_t)(uintptr_t)c, bc, sizeof(c)},
    };
    assert_int_equal(plat_mem_readv(getpid(), gpg, 3), 1);

    /* Nothing readable, or the first segment only in part. */
    struct plat_seg bad_first[] = {{hole, bd, 8}, {(uint64_t)(uintptr_t)a, ba, sizeof(a)}};
    assert_int_equal(plat_mem_readv(getpid(), bad_first, 2), PYS_E_BADADDR);
    struct plat_seg part_first[] = {{hole - 8, bd, 16}};
    assert_int_equal(plat_mem_readv(getpid(), part_first, 1), PYS_E_BADADDR);
    struct plat_seg null_first[] = {{0, bd, 8}};
    assert_int_equal(plat_mem_readv(getpid(), null_first, 1), PYS_E_BADADDR);

    /* Zero-length segments are complete when reached. */
    struct plat_seg empty_then_bad[] = {{hole, NULL, 0}, {hole, bd, 8}};
    assert_int_equal(plat_mem_readv(getpid(), empty_then_bad, 2), 1);
    munmap(page, ps);
}

/* A source that reads this process through `inner`, notes the address of
 * every piece in the order given, and before piece number `at` (counted
 * over its life) stores `to` into each of `words`, as a target writing
 * between the pieces of one system call would. */
struct order_src {
    struct mem_source base;
    struct mem_proc inner;
    uint64_t seen[16];
    size_t nseen, at;
    uint64_t *words[3];
    size_t nwords;
    uint64_t to;
};

static int order_readv(struct mem_source *src, const struct mem_seg *segs, size_t n)
{
    struct order_src *o = (struct order_src *)(void *)src;
    for (size_t i = 0; i < n; i++) {
        if (o->nseen == o->at)
            for (size_t w = 0; w < o->nwords; w++)
                *(volatile uint64_t *)o->words[w] = o->to;
        if (o->nseen < 16)
            o->seen[o->nseen] = segs[i].addr;
        o->nseen++;
        int rc = o->inner.base.ops->readv(&o->inner.base, &segs[i], 1);
        if (rc != 1)
            return rc < 0 ? rc : (int)i;
    }
    return (int)n;
}

static struct mem_source_ops order_ops;

/* One mem_readv_fresh_twice of three words far apart, words[] switched
 * from 1 to 2 before piece `at` (SIZE_MAX: never): which moved (bit i
 * for segs[i]), the values got in got[]. */
static unsigned twice_switched(uint64_t *far, size_t at, uint64_t **words, size_t nwords,
                               uint64_t got[3], uint64_t seen[6])
{
    struct order_src o;
    struct mem m;
    memset(&o, 0, sizeof o);
    mem_proc_init(&o.inner, getpid());
    order_ops = *o.inner.base.ops;
    order_ops.readv = order_readv;
    o.base.ops = &order_ops;
    o.at = at;
    o.to = 2;
    o.nwords = nwords;
    for (size_t w = 0; w < nwords; w++)
        o.words[w] = words[w];
    for (int i = 0; i < 3; i++)
        far[i * 1024] = 1;
    mem_init(&m, &o.base);
    struct mem_seg segs[3];
    for (int i = 0; i < 3; i++)
        segs[i] = (struct mem_seg){(uint64_t)(uintptr_t)&far[i * 1024], &got[i], 8};
    const uint8_t *moved = NULL;
    assert_int_equal(mem_readv_fresh_twice(&m, segs, 3, &moved), 0);
    assert_int_equal(o.nseen, 6);
    unsigned bits = 0;
    for (int i = 0; i < 3; i++)
        bits |= moved[i] ? 1u << i : 0;
    memcpy(seen, o.seen, 6 * sizeof *seen);
    mem_release(&m);
    return bits;
}

/*
 * mem_readv_fresh_twice reads its segments (a chain's words, top first)
 * twice in one call, the first time in the reverse order: each segment's
 * two copies lie around those of the segments after it, segs[0]'s two
 * adjacent. A switch of every word at any piece leaves the words not
 * moved all from one side of it; a switch of segs[0] alone (a top frame
 * that moves on) shows as moved only when it falls between its two
 * adjacent copies, one piece in five, not three (the same order twice).
 */
static void test_mem_readv_fresh_twice_nests(void **state)
{
    uint64_t *far = calloc(3 * 1024, sizeof *far), got[3], seen[6];
    (void)state;
    assert_non_null(far);
    uint64_t *all[3] = {&far[0], &far[1024], &far[2048]};
    assert_int_equal(twice_switched(far, SIZE_MAX, all, 3, got, seen), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(got[i], 1);
        /* Bottom first, then top first. */
        assert_int_equal(seen[2 - i], (uint64_t)(uintptr_t)all[i]);
        assert_int_equal(seen[3 + i], (uint64_t)(uintptr_t)all[i]);
    }
    int top_moved = 0;
    for (size_t at = 1; at < 6; at++) {
        unsigned bits = twice_switched(far, at, all, 3, got, seen);
        uint64_t side = 0;
        for (int i = 0; i < 3; i++) {
            if (bits & (1u << i))
                continue;
            if (side == 0)
                side = got[i];
            assert_int_equal(got[i], side);
        }
        top_moved += twice_switched(far, at, all, 1, got, seen) & 1;
    }
    assert_int_equal(top_moved, 1);
    free(far);
}

/* mem_readv_fresh reads segments a few bytes apart (the fields of
 * consecutive frames, walked downwards) as one span, with the same results
 * as reading them one by one. */
static void test_mem_readv_fresh_coalesces(void **state)
{
    /* 600 two-field "frames" 104 bytes apart: 1200 pieces, more than one
     * process_vm_readv takes (IOV_MAX), so that one read means one span. */
    enum { N = 600, STRIDE = 13 };
    uint64_t *src = malloc(N * STRIDE * sizeof(*src));
    uint64_t(*got)[2] = calloc(N, sizeof(*got));
    struct mem_seg *segs = malloc(2 * N * sizeof(*segs));
    struct mem m;
    size_t ps;
    char *page = page_before_hole(&ps);
    uint64_t hole = (uint64_t)(uintptr_t)(page + ps);
    (void)state;

    assert_non_null(src);
    assert_non_null(got);
    assert_non_null(segs);
    for (size_t i = 0; i < N * STRIDE; i++)
        src[i] = i * 0x9e3779b97f4a7c15u + 1;
    mem_init_process(&m, getpid());
    for (size_t i = 0; i < N; i++) { /* highest address first */
        const uint64_t *f = &src[(N - 1 - i) * STRIDE];
        segs[2 * i] = (struct mem_seg){(uint64_t)(uintptr_t)&f[0], &got[i][0], 8};
        segs[2 * i + 1] = (struct mem_seg){(uint64_t)(uintptr_t)&f[1], &got[i][1], 8};
    }
    assert_int_equal(mem_readv_fresh(&m, segs, 2 * N), 0);
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(got[i][0], src[(N - 1 - i) * STRIDE]);
        assert_int_equal(got[i][1], src[(N - 1 - i) * STRIDE + 1]);
    }
    /* One span, one system call, where the 1200 pieces as they are would
     * need two (and the kernel would look each one up on its own). */
    assert_int_equal(m.stats.reads, 1);

    /* Far apart: read as they are, still right. */
    uint64_t x = 0, y = 0;
    struct mem_seg far[] = {{(uint64_t)(uintptr_t)&src[0], &x, 8},
                            {(uint64_t)(uintptr_t)&src[N * STRIDE - 1], &y, 8},
                            {(uint64_t)(uintptr_t)&src[1], &got[0][0], 8}};
    assert_int_equal(mem_readv_fresh(&m, far, 3), 0);
    assert_int_equal(x, src[0]);
    assert_int_equal(y, src[N * STRIDE - 1]);
    assert_int_equal(got[0][0], src[1]);

    /* Close together at the edge of a hole: the span stops where the last
     * segment does, so it reads. */
    page[ps - 16] = 0x11;
    page[ps - 8] = 0x22;
    uint8_t e1 = 0, e2 = 0;
    struct mem_seg edge[] = {{hole - 16, &e1, 1}, {hole - 8, &e2, 1}};
    assert_int_equal(mem_readv_fresh(&m, edge, 2), 0);
    assert_int_equal(e1, 0x11);
    assert_int_equal(e2, 0x22);

    /* A segment in the hole fails as it would alone. */
    uint8_t e3 = 0;
    struct mem_seg into[] = {{hole - 16, &e1, 1}, {hole - 8, &e2, 1}, {hole + 8, &e3, 1}};
    assert_int_equal(mem_readv_fresh(&m, into, 3), PYS_E_BADADDR);

    /* So does a long run of them whose last one is in the hole (a deep
     * chain whose chunk was unmapped under it): its span fails, and that
     * is the answer, not a piece per segment read to find the one. */
    enum { RUN = 300 };
    uint8_t *sink = malloc(RUN + 1);
    struct mem_seg *run = malloc((RUN + 1) * sizeof *run);
    assert_non_null(sink);
    assert_non_null(run);
    for (size_t i = 0; i < RUN; i++)
        run[i] = (struct mem_seg){hole - 8 - 8 * (RUN - 1 - i), &sink[i], 1};
    run[RUN] = (struct mem_seg){hole + 8, &sink[RUN], 1};
    uint64_t pieces = m.stats.pieces;
    assert_int_equal(mem_readv_fresh(&m, run, RUN + 1), PYS_E_BADADDR);
    assert_in_range(m.stats.pieces - pieces, 1, 2);
    free(run);
    free(sink);

    mem_release(&m);
    munmap(page, ps);
    free(src);
    free(got);
    free(segs);
}

/* The prefetch reads the span holding the late word last, in its stead:
 * one read in all, every span still found where it is, the word's value
 * that of this read; and the word is still read when a span before it in
 * the batch has gone. */
static void test_mem_prefetch_late_in_span(void **state)
{
    long ps = sysconf(_SC_PAGESIZE);
    uint8_t *p =
        mmap(NULL, 3 * (size_t)ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct mem m;
    uint64_t a = 0, b = 0, c = 0, late = 0;
    (void)state;

    assert_true(p != MAP_FAILED);
    /* Three spans a page apart; the counter is the lowest one's. */
    uint64_t at_a = (uint64_t)(uintptr_t)p + 64, at_b = at_a + (uint64_t)ps,
             at_c = at_b + (uint64_t)ps;
    mem_init_process(&m, getpid());
    for (int round = 1; round <= 3; round++) {
        memcpy(p + 64, &(uint64_t){100u + (uint64_t)round}, 8);
        memcpy(p + 64 + ps, &(uint64_t){200u + (uint64_t)round}, 8);
        memcpy(p + 64 + 2 * ps, &(uint64_t){300u + (uint64_t)round}, 8);
        uint64_t reads = m.stats.reads;
        mem_prefetch_late(&m, at_a);
        mem_prefetch_begin(&m);
        assert_int_equal(mem_read_u64(&m, at_a, &a), 0);
        assert_int_equal(mem_read_u64(&m, at_b, &b), 0);
        assert_int_equal(mem_read_u64(&m, at_c, &c), 0);
        assert_int_equal(a, 100u + (uint64_t)round);
        assert_int_equal(b, 200u + (uint64_t)round);
        assert_int_equal(c, 300u + (uint64_t)round);
        if (round > 1) { /* served by one batch, the counter within it */
            assert_int_equal(m.stats.reads - reads, 1);
            assert_int_equal(mem_prefetch_late_value(&m, &late), 1);
            assert_int_equal(late, 100u + (uint64_t)round);
        }
        mem_prefetch_end(&m);
    }
    /* The highest span unmapped: the batch stops there, then reads on. */
    assert_int_equal(munmap(p + 2 * ps, (size_t)ps), 0);
    memcpy(p + 64, &(uint64_t){777}, 8);
    mem_prefetch_begin(&m);
    assert_int_equal(mem_prefetch_late_value(&m, &late), 1);
    assert_int_equal(late, 777);
    assert_int_equal(mem_read_u64(&m, at_b, &b), 0);
    assert_int_equal(b, 203);
    mem_prefetch_end(&m);
    mem_release(&m);
    munmap(p, 2 * (size_t)ps);
}

/* mem_read_twice: past the prefetch, the span twice and the words after it
 * in one system call; from the prefetch, the span alone and no call; an
 * after word that cannot be read leaves the first copy good. */
static void test_mem_read_twice(void **state)
{
    long ps = sysconf(_SC_PAGESIZE);
    uint8_t *p =
        mmap(NULL, 2 * (size_t)ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t first[256], second[256];
    uint64_t word = 0;
    struct mem m;
    (void)state;

    assert_true(p != MAP_FAILED);
    for (int i = 0; i < 256; i++)
        p[i] = (uint8_t)i;
    memcpy(p + 512, &(uint64_t){0x5151}, 8);
    uint64_t span = (uint64_t)(uintptr_t)p, at_word = span + 512;
    struct mem_seg after = {at_word, &word, 8};
    mem_init_process(&m, getpid());
    mem_prefetch_begin(&m); /* nothing to fetch yet; reads are logged from now */
    uint64_t reads = m.stats.reads;
    assert_int_equal(mem_read_twice(&m, span, first, second, 256, &after, 1, span, 256), 1);
    assert_int_equal(m.stats.reads - reads, 1);
    assert_memory_equal(first, p, 256);
    assert_memory_equal(second, p, 256);
    assert_int_equal(word, 0x5151);
    /* The read is logged: the next batch holds it, and serves it alone. */
    mem_prefetch_end(&m);
    mem_prefetch_begin(&m);
    reads = m.stats.reads;
    memset(second, 0, sizeof second);
    word = 0;
    assert_int_equal(mem_read_twice(&m, span, first, second, 256, &after, 1, span, 256), 0);
    assert_int_equal(m.stats.reads, reads);
    assert_memory_equal(first, p, 256);
    assert_int_equal(second[1], 0);
    assert_int_equal(word, 0);
    mem_prefetch_end(&m);
    /* An after word in a page no longer mapped: the copy alone. */
    assert_int_equal(munmap(p + ps, (size_t)ps), 0);
    after.addr = span + (uint64_t)ps;
    memset(first, 0, sizeof first);
    assert_int_equal(mem_read_twice(&m, span, first, second, 256, &after, 1, span, 256), 0);
    assert_memory_equal(first, p, 256);
    /* The span itself unmapped: mem_read's error. */
    assert_int_equal(
        mem_read_twice(&m, span + (uint64_t)ps, first, second, 8, NULL, 0, span + (uint64_t)ps, 8),
        PYS_E_BADADDR);
    mem_release(&m);
    munmap(p, (size_t)ps);
}

/* A kept span that fails to read (its memory unmapped since: a data-stack
 * chunk the target freed) leaves the prefetch at once: one failed read, not
 * one in every batch until it would have expired. */
static void test_mem_prefetch_drops_unmapped_span(void **state)
{
    long ps = sysconf(_SC_PAGESIZE);
    uint8_t *p = mmap(NULL, 4 * (size_t)ps, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint64_t v = 0;
    struct mem m;
    (void)state;

    assert_true(p != MAP_FAILED);
    /* Below the span that stays, and above it: a failure either side. */
    for (int below = 0; below <= 1; below++) {
        uint64_t stay_at = (uint64_t)(uintptr_t)p + 2 * (uint64_t)ps,
                 gone_at = below ? stay_at - 2 * (uint64_t)ps : stay_at + (uint64_t)ps;
        uint8_t *gone = (uint8_t *)(uintptr_t)gone_at;
        if (below && mmap(gone, (size_t)ps, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != gone)
            fail();
        mem_init_process(&m, getpid());
        /* Two snapshots read both spans; then the one is unmapped. */
        for (int k = 0; k < 2; k++) {
            mem_prefetch_begin(&m);
            assert_int_equal(mem_read_u64(&m, stay_at, &v), 0);
            assert_int_equal(mem_read_u64(&m, gone_at, &v), 0);
            mem_prefetch_end(&m);
        }
        assert_int_equal(munmap(gone, (size_t)ps), 0);
        uint64_t failures = m.stats.failures;
        for (int k = 0; k < 6; k++) {
            mem_prefetch_begin(&m);
            assert_int_equal(mem_read_u64(&m, stay_at, &v), 0);
            mem_prefetch_end(&m);
        }
        assert_int_equal(m.stats.failures - failures, 1);
        /* And the batch is one read again. */
        uint64_t reads = m.stats.reads;
        mem_prefetch_begin(&m);
        assert_int_equal(mem_read_u64(&m, stay_at, &v), 0);
        mem_prefetch_end(&m);
        assert_int_equal(m.stats.reads - reads, 1);
        mem_release(&m);
    }
    munmap(p, 4 * (size_t)ps);
}

/* The prefetch keeps a small span for a while after its last read (a
 * generator's frame, read now and then), but a large one only while the
 * same start is still read (a stack copy that may grow back): a stack
 * copied once, or left behind, is not read again batch after batch. */
static void test_mem_prefetch_keeps_small_spans(void **state)
{
    long ps = sysconf(_SC_PAGESIZE);
    uint8_t *p =
        mmap(NULL, 8 * (size_t)ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *big = malloc(2 * (size_t)ps);
    uint64_t v = 0;
    struct mem m;
    (void)state;

    assert_true(p != MAP_FAILED);
    assert_non_null(big);
    uint64_t small_at = (uint64_t)(uintptr_t)p, big_at = small_at + 2 * (uint64_t)ps,
             other_at = small_at + 6 * (uint64_t)ps, grow_at = small_at + 4 * (uint64_t)ps;
    mem_init_process(&m, getpid());
    /* Snapshot 1 reads a small span, a large one and one that grows back. */
    mem_prefetch_begin(&m);
    assert_int_equal(mem_read_u64(&m, small_at, &v), 0);
    assert_int_equal(mem_read(&m, big_at, big, 2 * (size_t)ps), 0);
    assert_int_equal(mem_read(&m, grow_at, big, 2 * (size_t)ps), 0);
    mem_prefetch_end(&m);
    /* Snapshots 2 and 3 read another span, and the growing one shorter. */
    for (int i = 0; i < 2; i++) {
        mem_prefetch_begin(&m);
        assert_int_equal(mem_read_u64(&m, other_at, &v), 0);
        assert_int_equal(mem_read(&m, grow_at, big, (size_t)ps), 0);
        mem_prefetch_end(&m);
    }
    /* Snapshot 4: the small span and the growing one at its longest come
     * with the batch; the large one left behind needs a read of its own. */
    uint64_t reads = m.stats.reads;
    mem_prefetch_begin(&m);
    assert_int_equal(m.stats.reads - reads, 1);
    assert_int_equal(mem_read_u64(&m, small_at, &v), 0);
    assert_int_equal(mem_read(&m, grow_at, big, 2 * (size_t)ps), 0);
    assert_int_equal(m.stats.reads - reads, 1);
    assert_int_equal(mem_read(&m, big_at, big, 2 * (size_t)ps), 0);
    assert_int_equal(m.stats.reads - reads, 2);
    mem_prefetch_end(&m);
    mem_release(&m);
    free(big);
    munmap(p, 8 * (size_t)ps);
}

/* n snapshots, each reading the word at `at` and nothing else. */
static void snapshots_reading(struct mem *m, uint64_t at, int n)
{
    uint64_t v;
    for (int i = 0; i < n; i++) {
        mem_prefetch_begin(m);
        assert_int_equal(mem_read_u64(m, at, &v), 0);
        mem_prefetch_end(m);
    }
}

/* A span kept from an older log leaves the prefetch after a while even if
 * the log stays the same all along (a deep stack's hot leaf, sampled again
 * and again): the entry frame a whole walk read once is not read again in
 * every batch from then on. The spans of that one log stay young. */
static void test_mem_prefetch_kept_span_leaves(void **state)
{
    long ps = sysconf(_SC_PAGESIZE);
    uint8_t *p =
        mmap(NULL, 4 * (size_t)ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint64_t v = 0;
    struct mem m;
    (void)state;

    assert_true(p != MAP_FAILED);
    uint64_t once_at = (uint64_t)(uintptr_t)p, hot_at = once_at + 2 * (uint64_t)ps;
    mem_init_process(&m, getpid());
    mem_prefetch_begin(&m);
    assert_int_equal(mem_read_u64(&m, once_at, &v), 0);
    assert_int_equal(mem_read_u64(&m, hot_at, &v), 0);
    mem_prefetch_end(&m);
    /* Soon after: still in the batch. */
    snapshots_reading(&m, hot_at, 3);
    uint64_t reads = m.stats.reads, pieces = m.stats.pieces;
    mem_prefetch_begin(&m);
    assert_int_equal(m.stats.reads - reads, 1);
    assert_int_equal(m.stats.pieces - pieces, 2);
    assert_int_equal(mem_read_u64(&m, hot_at, &v), 0);
    mem_prefetch_end(&m);
    /* Many snapshots later (KEEP_SNAPSHOTS is 16), the same log all along:
     * gone from the batch, read on its own. */
    snapshots_reading(&m, hot_at, 64);
    reads = m.stats.reads;
    pieces = m.stats.pieces;
    mem_prefetch_begin(&m);
    assert_int_equal(m.stats.reads - reads, 1);
    assert_int_equal(m.stats.pieces - pieces, 1);
    assert_int_equal(mem_read_u64(&m, hot_at, &v), 0);
    assert_int_equal(m.stats.reads - reads, 1);
    assert_int_equal(mem_read_u64(&m, once_at, &v), 0);
    assert_int_equal(m.stats.reads - reads, 2);
    mem_prefetch_end(&m);
    /* A span read by every one of many snapshots on one plan is as young
     * as the last of them: a log without it keeps it. */
    snapshots_reading(&m, hot_at, 64);
    mem_prefetch_begin(&m);
    assert_int_equal(mem_read_u64(&m, once_at, &v), 0);
    mem_prefetch_end(&m);
    reads = m.stats.reads;
    pieces = m.stats.pieces;
    mem_prefetch_begin(&m);
    assert_int_equal(m.stats.pieces - pieces, 2);
    assert_int_equal(mem_read_u64(&m, hot_at, &v), 0);
    assert_int_equal(m.stats.reads - reads, 1);
    mem_prefetch_end(&m);
    mem_release(&m);
    munmap(p, 4 * (size_t)ps);
}

/* A counter another thread keeps counting up, and whether to go on. */
struct ticker {
    volatile uint64_t *word;
    volatile int run;
};

static void *tick(void *arg)
{
    struct ticker *t = arg;
    while (t->run)
        (*t->word)++;
    return NULL;
}

/* mem_recheck_hint: the next batch (and a retry, with what was hinted
 * since) reads the span a second time, after everything else: a counter
 * that only grows is never smaller in the second copy, and sometimes
 * larger. A span never hinted has no second copy, nor has anything after
 * the batch, nor any span when one of them could not be read. */
static struct mem_source_ops still_ops;
static uint64_t still_clock(struct mem_source *src)
{
    (void)src;
    return 0;
}

static void test_mem_recheck_after_batch(void **state)
{
    long ps = sysconf(_SC_PAGESIZE);
    uint8_t *p =
        mmap(NULL, 3 * (size_t)ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct mem m;
    (void)state;

    assert_true(p != MAP_FAILED);
    uint64_t at = (uint64_t)(uintptr_t)p + 64, other = at + (uint64_t)ps,
             gone = other + (uint64_t)ps;
    struct ticker t = {(volatile uint64_t *)(void *)(p + 64), 1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, tick, &t), 0);
    mem_init_process(&m, getpid());
    while (*t.word == 0) /* counting */
        sched_yield();
    /* Seeing the counter move inside one batch needs the two threads on
     * CPUs at the same moment; on a loaded machine that can take seconds. */
    struct timespec t0, tn;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tn = t0;
    int later = 0, rounds = 0, copies = 0;
    for (; later < 50 && (rounds < 100000 || (later == 0 && tn.tv_sec - t0.tv_sec < 30));
         rounds++) {
        if ((rounds & 1023) == 0)
            clock_gettime(CLOCK_MONOTONIC, &tn);
        uint64_t v = 0, again;
        uint64_t reads = m.stats.reads;
        mem_prefetch_begin(&m);
        assert_int_equal(mem_read_u64(&m, at, &v), 0);
        const uint8_t *copy = mem_recheck_view(&m, at, 8);
        if (rounds > 0) {
            assert_int_equal(m.stats.reads - reads, 1); /* one batch holds both */
            /* None when the batch took far longer than usual (this thread
             * preempted: the copies are not trusted then). */
            if (copy) {
                copies++;
                memcpy(&again, copy, 8);
                assert_true(again >= v);
                later += again > v;
            }
        }
        mem_recheck_hint(&m, at, 8);
        mem_prefetch_end(&m);
        assert_null(mem_recheck_view(&m, at, 8));
    }
    t.run = 0;
    pthread_join(th, NULL);
    /* Read after the batch, not with it: the counter moved in between. */
    assert_true(later > 0);
    assert_true(copies > rounds / 2);

    /* From here on the process is read with a clock that stands still: no
     * batch is taken as paused (which drops its second copies), however
     * loaded the machine, so what follows is about the plan alone. */
    struct mem_proc still;
    mem_proc_init(&still, getpid());
    still_ops = *still.base.ops;
    still_ops.clock_ns = still_clock;
    still.base.ops = &still_ops;
    mem_set_source(&m, &still.base);

    /* Retry: what this snapshot hinted comes too. */
    uint64_t v;
    mem_prefetch_begin(&m);
    assert_int_equal(mem_read_u64(&m, other, &v), 0);
    mem_recheck_hint(&m, other, 8);
    mem_recheck_hint(&m, gone, 8);
    assert_null(mem_recheck_view(&m, other, 8));
    mem_prefetch_retry(&m);
    assert_non_null(mem_recheck_view(&m, other, 8));
    assert_non_null(mem_recheck_view(&m, gone, 8));
    assert_null(mem_recheck_view(&m, other + 8, 8));
    mem_prefetch_end(&m);
    /* The page of one hinted span unmapped: the batch still serves what it
     * holds, but the second copies, read together at its end, are all
     * missing; once that span is no longer hinted, they are back. */
    assert_int_equal(munmap(p + 2 * ps, (size_t)ps), 0);
    mem_prefetch_begin(&m);
    assert_null(mem_recheck_view(&m, other, 8));
    assert_null(mem_recheck_view(&m, gone, 8));
    assert_int_equal(mem_read_u64(&m, other, &v), 0);
    mem_recheck_hint(&m, other, 8);
    mem_prefetch_end(&m);
    mem_prefetch_begin(&m);
    assert_non_null(mem_recheck_view(&m, other, 8));
    mem_prefetch_end(&m);
    mem_release(&m);
    munmap(p, 2 * (size_t)ps);
}

/* Second copies close together (a process's thread states, 1.4 KB apart)
 * are read as one piece; one a page away is a piece of its own. */
static void test_mem_recheck_merges_near_spans(void **state)
{
    enum { N = 20, STEP = 1440 };
    static uint8_t buf[N * STEP + 3 * 4096];
    struct mem m;
    (void)state;
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)(i * 7);
    uint64_t base = (uint64_t)(uintptr_t)buf, far = base + N * STEP + 2 * 4096;
    uint64_t v;
    mem_init_process(&m, getpid());
    mem_prefetch_begin(&m);
    assert_int_equal(mem_read_u64(&m, base, &v), 0);
    for (int i = N - 1; i >= 0; i--) /* out of order, as threads are */
        mem_recheck_hint(&m, base + (uint64_t)i * STEP + 8, 16);
    mem_recheck_hint(&m, far, 8);
    mem_prefetch_end(&m);
    uint64_t pieces = m.stats.pieces;
    mem_prefetch_begin(&m);
    /* The plan (one span), the merged copies, the far one. */
    assert_int_equal(m.stats.pieces - pieces, 3);
    for (int i = 0; i < N; i++) {
        const uint8_t *c = mem_recheck_view(&m, base + (uint64_t)i * STEP + 8, 16);
        assert_non_null(c);
        assert_memory_equal(c, buf + i * STEP + 8, 16);
    }
    assert_non_null(mem_recheck_view(&m, far, 8));
    mem_prefetch_end(&m);
    mem_release(&m);
}

/*
 * A source over this process whose clock the test sets: each batch (readv)
 * is logged, piece by piece, and moves the clock by what the kernel would
 * take for it (per_call, and per_page for each page of each piece), plus
 * `extra` once (a pause).
 */
static struct {
    struct mem_proc proc;
    struct mem_source_ops ops;
    const struct mem_source_ops *orig;
    uint64_t now, per_call, per_page, extra;
    struct mem_seg log[64];
    size_t nlog;
} timed;

static int timed_readv(struct mem_source *src, const struct mem_seg *segs, size_t n)
{
    timed.now += timed.per_call + timed.extra;
    timed.extra = 0;
    timed.nlog = 0;
    for (size_t i = 0; i < n; i++) {
        if (segs[i].len > 0)
            timed.now += timed.per_page * (((segs[i].addr + segs[i].len - 1) >> 12) -
                                           (segs[i].addr >> 12) + 1);
        if (timed.nlog < 64)
            timed.log[timed.nlog++] = segs[i];
    }
    return timed.orig->readv(src, segs, n);
}

static uint64_t timed_clock(struct mem_source *src)
{
    (void)src;
    return timed.now;
}

static void timed_init(struct mem *m)
{
    memset(&timed, 0, sizeof timed);
    mem_proc_init(&timed.proc, getpid());
    timed.orig = timed.proc.base.ops;
    timed.ops = *timed.orig;
    timed.ops.readv = timed_readv;
    timed.ops.clock_ns = timed_clock;
    timed.proc.base.ops = &timed.ops;
    mem_init(m, &timed.proc.base);
}

/* Where in the last batch the piece covering [addr, addr + 8) was read:
 * its k-th such piece, or -1. */
static int timed_piece(uint64_t addr, int k)
{
    for (size_t i = 0; i < timed.nlog; i++)
        if (addr >= timed.log[i].addr && addr + 8 <= timed.log[i].addr + timed.log[i].len &&
            k-- == 0)
            return (int)i;
    return -1;
}

/*
 * mem_recheck_hint_last: a second copy that only vouches for what was read
 * before it (a cached code object) is read after every other second copy,
 * wherever its address falls among them: the frames' two copies stay as
 * close as they can be. One that merges with a span hinted the usual way
 * (a few bytes apart) is read where that one is.
 */
static void test_mem_recheck_last(void **state)
{
    static uint8_t buf[6 * 4096];
    struct mem m;
    (void)state;
    uint64_t base = ((uint64_t)(uintptr_t)buf + 4095) & ~(uint64_t)4095;
    uint64_t lo = base, code = base + 4096, hi = base + 2 * 4096, near = hi + 64, v;
    timed_init(&m);
    mem_prefetch_begin(&m);
    assert_int_equal(mem_read_u64(&m, lo, &v), 0);
    assert_int_equal(mem_read_u64(&m, hi, &v), 0);
    mem_recheck_hint(&m, lo, 8);
    mem_recheck_hint_last(&m, code, 8);
    mem_recheck_hint(&m, hi, 8);
    mem_prefetch_end(&m);
    mem_prefetch_begin(&m);
    /* The plan's span(s), then second copies: by address downwards, but
     * the code object's last. */
    int a = timed_piece(lo, 1), c = timed_piece(code, 0), h = timed_piece(hi, 1);
    assert_true(a >= 0 && c >= 0 && h >= 0);
    assert_true(h < a);
    assert_true(a < c);
    assert_int_equal(c, (int)timed.nlog - 1);
    assert_non_null(mem_recheck_view(&m, code, 8));
    assert_int_equal(mem_read_u64(&m, lo, &v), 0);
    assert_int_equal(mem_read_u64(&m, hi, &v), 0);
    mem_recheck_hint(&m, lo, 8);
    mem_recheck_hint(&m, hi, 8);
    mem_recheck_hint_last(&m, near, 8); /* one span with hi's */
    mem_recheck_hint_last(&m, code, 8);
    mem_prefetch_end(&m);
    mem_prefetch_begin(&m);
    int n = timed_piece(near, 0);
    a = timed_piece(lo, 1);
    c = timed_piece(code, 0);
    assert_true(n >= 0 && n == timed_piece(hi, 1));
    assert_true(n < a && a < c);
    mem_prefetch_end(&m);
    mem_release(&m);
}

/*
 * A batch is judged paused by its time for what it read (the pages of its
 * pieces, its system calls) against the fastest of the recent batches for
 * theirs. A plan twice as long is no pause: judged by its time alone, as
 * it was, a stack grown deeper had its batches taken as paused, its walks'
 * top frames checked, and most walks of a fast-changing stack thrown away.
 * The same plan slowed by a pause is one.
 */
static void test_mem_batch_judged_per_page(void **state)
{
    static uint8_t buf[40 * 4096];
    struct mem m;
    (void)state;
    uint64_t base = ((uint64_t)(uintptr_t)buf + 4095) & ~(uint64_t)4095, v;
    timed_init(&m);
    timed.per_call = 1500;
    timed.per_page = 500;
    /* Round r's batch replays round r - 1's reads: `pages` pieces, two
     * pages apart; 8 from round 12 on, so round 13's batch is the first
     * of 8. Round 14's is paused for 3 us. */
    for (int round = 0; round < 16; round++) {
        size_t pages = round < 12 ? 4 : 8;
        if (round == 14)
            timed.extra = 3000;
        mem_prefetch_begin(&m);
        if (round >= 2) {
            if (mem_batch_paused(&m) != (round == 14))
                print_message("round %d: judged %spaused\n", round,
                              mem_batch_paused(&m) ? "" : "not ");
            assert_int_equal(mem_batch_paused(&m), round == 14);
        }
        for (size_t i = 0; i < pages; i++)
            assert_int_equal(mem_read_u64(&m, base + i * 2 * 4096, &v), 0);
        mem_prefetch_end(&m);
    }
    mem_release(&m);
}

static void test_mem_readv_many(void **state)
{
    /* More segments than one process_vm_readv takes. */
    enum { N = IOV_MAX + IOV_MAX / 2 + 3 };
    uint64_t *src = malloc(N * sizeof(*src));
    uint64_t *dst = calloc(N, sizeof(*dst));
    struct plat_seg *segs = malloc(N * sizeof(*segs));
    size_t ps;
    char *page = page_before_hole(&ps);
    (void)state;

    assert_non_null(src);
    assert_non_null(dst);
    assert_non_null(segs);
    for (size_t i = 0; i < N; i++) {
        src[i] = i * 0x9e3779b97f4a7c15u;
        segs[i].addr = (uint64_t)(uintptr_t)&src[i];
        segs[i].buf = &dst[i];
        segs[i].len = sizeof(dst[i]);
    }
    assert_int_equal(plat_mem_readv(getpid(), segs, N), N);
    assert_memory_equal(src, dst, N * sizeof(*src));

    /* A bad segment in the second batch stops there. */
    segs[IOV_MAX + 10].addr = (uint64_t)(uintptr_t)(page + ps);
    assert_int_equal(plat_mem_readv(getpid(), segs, N), IOV_MAX + 10);
    free(src);
    free(dst);
    free(segs);
    munmap(page, ps);
}

/* --- live: processes and threads ----------------------------------------- */

static pid_t absent_pid(void)
{
    FILE *f = fopen("/proc/sys/kernel/pid_max", "r");
    long max = 0;

    assert_non_null(f);
    assert_int_equal(fscanf(f, "%ld", &max), 1);
    fclose(f);
    assert_true(max > 0 && max < INT_MAX);
    /* pid_max is one more than the largest pid the kernel hands out. */
    return (pid_t)max;
}

static void assert_gone(pid_t pid)
{
    struct plat_maps m = {NULL, 0};
    char exe[64] = "untouched";
    char buf[8];
    struct plat_seg seg = {0x400000, buf, sizeof(buf)};

    assert_int_equal(plat_proc_check(pid), PYS_E_NOPROC);
    assert_int_equal(plat_maps_read(pid, &m), PYS_E_NOPROC);
    assert_null(m.v);
    assert_int_equal(plat_proc_exe(pid, exe, sizeof(exe)), PYS_E_NOPROC);
    assert_string_equal(exe, "untouched");
    assert_int_equal(plat_task_state(pid, pid), PYS_E_NOPROC);
    /* Memory reads are done after attach: a process that is gone exited. */
    assert_int_equal(plat_mem_read(pid, 0x400000, buf, sizeof(buf)), PYS_E_EXITED);
    assert_int_equal(plat_mem_readv(pid, &seg, 1), PYS_E_EXITED);
}

static void test_absent_pid(void **state)
{
    (void)state;
    assert_gone(absent_pid());
    assert_int_equal(plat_proc_check(0), PYS_E_INVAL);
    assert_int_equal(plat_proc_check(-1), PYS_E_INVAL);
    assert_int_equal(plat_maps_read(0, &(struct plat_maps){NULL, 0}), PYS_E_INVAL);
}

static void test_reaped_child(void **state)
{
    pid_t pid = fork();
    (void)state;

    assert_true(pid >= 0);
    if (pid == 0)
        _exit(0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    /* The pid could be reused at once in principle; not in practice. */
    assert_gone(pid);
}

static void test_self(void **state)
{
    char exe[PATH_MAX], small[4] = "abc";
    (void)state;

    assert_int_equal(plat_proc_check(getpid()), 0);
    assert_int_equal(plat_proc_exe(getpid(), exe, sizeof(exe)), 0);
    assert_int_equal(exe[0], '/');
    {
        struct stat a, b;

        assert_int_equal(stat(exe, &a), 0);
        assert_int_equal(stat("/proc/self/exe", &b), 0);
        assert_int_equal(a.st_ino, b.st_ino);
    }
    assert_int_equal(plat_proc_exe(getpid(), small, sizeof(small)), PYS_E_INVAL);
    assert_string_equal(small, "abc");
    /* Reading its own stat file, the thread is running. */
    assert_int_equal(plat_task_state(getpid(), gettid()), 'R');
    /* A thread id this process does not have. */
    assert_int_equal(plat_task_state(getpid(), absent_pid()), PYS_E_NOTFOUND);
    assert_int_equal(plat_task_state(getpid(), 0), PYS_E_INVAL);
}

static int wait_task_state(pid_t pid, pid_t tid, int want)
{
    int st = 0;

    for (int ms = 0; ms < WAIT_MS; ms += 10) {
        st = plat_task_state(pid, tid);
        if (st == want)
            break;
        sleep_ms(10);
    }
    return st;
}

static void test_sleeping_child(void **state)
{
    pid_t pid = fork();
    int st, rc;
    (void)state;

    assert_true(pid >= 0);
    if (pid == 0) {
        for (;;)
            pause();
    }
    /* Results first, asserts after the child is gone: a failed assert
     * must not leave it behind. */
    st = wait_task_state(pid, pid, 'S');
    rc = plat_proc_check(pid);
    kill(pid, SIGKILL);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    assert_int_equal(st, 'S');
    assert_int_equal(rc, 0);
}

static void test_zombie_child(void **state)
{
    pid_t pid = fork();
    char buf[8], path[PATH_MAX];
    int rc = 0, st, mem, exe;
    (void)state;

    assert_true(pid >= 0);
    if (pid == 0)
        _exit(0);
    for (int ms = 0; ms < WAIT_MS; ms += 10) {
        rc = plat_proc_check(pid);
        if (rc == PYS_E_EXITED)
            break;
        sleep_ms(10);
    }
    st = plat_task_state(pid, pid);
    mem = plat_mem_read(pid, 0x400000, buf, sizeof(buf));
    exe = plat_proc_exe(pid, path, sizeof(path));
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    assert_int_equal(rc, PYS_E_EXITED);
    assert_int_equal(st, 'Z');
    assert_int_equal(mem, PYS_E_EXITED);
    /* A zombie has no executable any more. */
    assert_int_equal(exe, PYS_E_NOTFOUND);
}

static void *park(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

static void test_leader_exited_process_alive(void **state)
{
    pid_t pid = fork();
    int st, rc;
    (void)state;

    assert_true(pid >= 0);
    if (pid == 0) {
        pthread_t t;

        if (pthread_create(&t, NULL, park, NULL) != 0)
            _exit(1);
        pthread_exit(NULL);
    }
    /* The leader is a zombie, the other thread lives on. */
    st = wait_task_state(pid, pid, 'Z');
    rc = plat_proc_check(pid);
    kill(pid, SIGKILL);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    assert_int_equal(st, 'Z');
    assert_int_equal(rc, 0);
}

struct thread_arg {
    int fds[2];
    pid_t tid;
};

static void *block_on_pipe(void *p)
{
    struct thread_arg *a = p;
    char c;

    __atomic_store_n(&a->tid, gettid(), __ATOMIC_SEQ_CST);
    while (read(a->fds[0], &c, 1) < 0)
        ;
    return NULL;
}

static void test_thread_id_is_not_a_process(void **state)
{
    struct thread_arg a = {{-1, -1}, 0};
    pthread_t t;
    pid_t tid = 0;
    int st, rc;
    (void)state;

    assert_int_equal(pipe(a.fds), 0);
    assert_int_equal(pthread_create(&t, NULL, block_on_pipe, &a), 0);
    for (int ms = 0; ms < WAIT_MS && tid == 0; ms += 10) {
        tid = __atomic_load_n(&a.tid, __ATOMIC_SEQ_CST);
        if (tid == 0)
            sleep_ms(10);
    }
    st = tid > 0 ? wait_task_state(getpid(), tid, 'S') : 0;
    rc = tid > 0 ? plat_proc_check(tid) : 0;
    assert_int_equal(write(a.fds[1], "x", 1), 1);
    assert_int_equal(pthread_join(t, NULL), 0);
    close(a.fds[0]);
    close(a.fds[1]);
    assert_true(tid > 0);
    assert_int_equal(st, 'S');
    assert_int_equal(rc, PYS_E_NOPROC);
}

/* --- thread ids across PID namespaces, exec ------------------------------ */

static void test_tids_same_namespace(void **state)
{
    struct plat_tids t;
    pid_t host = 0;
    (void)state;

    assert_int_equal(plat_tids_init(&t, getpid()), 0);
    assert_int_equal(t.translate, 0);
    assert_int_equal(plat_tids_host(&t, 12345, &host), 0);
    assert_int_equal(host, 12345);
    plat_tids_release(&t);
}

/* A process that is pid 1 of a new PID namespace: its id here through *pid,
 * and the child to kill and reap after it (0 when namespaces are refused). */
static pid_t start_in_namespace(pid_t *pid)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        pid_t inner = -1;
        if (unshare(CLONE_NEWPID) == 0)
            inner = fork();
        if (inner == 0) {
            for (;;)
                pause();
        }
        ssize_t w = write(fds[1], &inner, sizeof inner);
        (void)w;
        if (inner > 0)
            waitpid(inner, NULL, 0);
        _exit(0);
    }
    close(fds[1]);
    pid_t inner = -1;
    ssize_t r = read(fds[0], &inner, sizeof inner);
    close(fds[0]);
    *pid = r == sizeof inner ? inner : -1;
    return child;
}

static void test_tids_child_namespace(void **state)
{
    struct plat_tids t;
    pid_t pid, host1 = 0, host2 = 0;
    (void)state;

    pid_t child = start_in_namespace(&pid);
    if (pid <= 0) {
        waitpid(child, NULL, 0);
        skip(); /* no right to make a PID namespace here */
    }
    int rc = plat_tids_init(&t, pid);
    int translate = t.translate;
    int rc1 = plat_tids_host(&t, 1, &host1);
    int rc2 = plat_tids_host(&t, 2, &host2);
    plat_tids_release(&t);
    kill(pid, SIGKILL);
    waitpid(child, NULL, 0);
    assert_int_equal(rc, 0);
    assert_int_equal(translate, 1);
    assert_int_equal(rc1, 0);
    assert_int_equal(host1, pid); /* its pid 1 is our pid */
    assert_int_equal(rc2, PYS_E_NOTFOUND);
}

static int exe_ends_with(pid_t pid, const char *tail)
{
    char buf[256];
    if (plat_proc_exe(pid, buf, sizeof buf) < 0)
        return 0;
    size_t n = strlen(buf), k = strlen(tail);
    return n >= k && strcmp(buf + n - k, tail) == 0;
}

static int program_anchor; /* mapped in this program and its fork */

static void test_program_exec(void **state)
{
    struct plat_program prog;
    int fds[2];
    (void)state;

    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char c;
        close(fds[1]);
        if (read(fds[0], &c, 1) == 1)
            execl("/bin/sleep", "sleep", "30", (char *)NULL);
        _exit(1);
    }
    close(fds[0]);
    int rc = plat_program_open(pid, &prog);
    uint64_t addr = (uint64_t)(uintptr_t)&program_anchor;
    int before = rc == 0 ? plat_program_same(&prog, addr) : rc;
    ssize_t w = write(fds[1], "x", 1);
    (void)w;
    close(fds[1]);
    int execd = 0;
    for (int i = 0; i < WAIT_MS && !(execd = exe_ends_with(pid, "/sleep")); i++)
        sleep_ms(1);
    int after = rc == 0 ? plat_program_same(&prog, addr) : rc;
    if (rc == 0)
        plat_program_close(&prog);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    assert_int_equal(rc, 0);
    assert_int_equal(before, 1);
    assert_true(execd);
    assert_int_equal(after, 0);
}

/* A child that shares its parent's memory (clone with CLONE_VM, as a vfork
 * child before its exec) is told apart from a forked one. */
static char vm_child_stack[64 * 1024] __attribute__((aligned(16)));

static int vm_child(void *arg)
{
    (void)arg;
    for (;;)
        pause(); /* a system call only: the memory is the parent's */
    return 0;
}

static void test_shares_parent_vm(void **state)
{
    (void)state;
    pid_t shared =
        clone(vm_child, vm_child_stack + sizeof vm_child_stack, CLONE_VM | SIGCHLD, NULL);
    assert_true(shared > 0);
    pid_t forked = fork();
    if (forked == 0) {
        for (;;)
            pause();
    }
    int a = plat_proc_shares_parent_vm(shared);
    int b = forked > 0 ? plat_proc_shares_parent_vm(forked) : -100;
    kill(shared, SIGKILL);
    waitpid(shared, NULL, 0);
    if (forked > 0) {
        kill(forked, SIGKILL);
        waitpid(forked, NULL, 0);
    }
    int gone = plat_proc_shares_parent_vm(forked);
    assert_int_equal(a, 1);
    assert_int_equal(b, 0);
    assert_int_equal(gone, PYS_E_NOPROC);
}

/* The descendants: children and a grandchild, from the kernel's lists. */
static void test_children_recursive(void **state)
{
    int fds[2];
    (void)state;
    assert_int_equal(pipe(fds), 0);
    pid_t kids[2];
    for (int i = 0; i < 2; i++) {
        kids[i] = fork();
        assert_true(kids[i] >= 0);
        if (kids[i] == 0) {
            close(fds[0]);
            if (i == 1 && fork() == 0) { /* the grandchild */
                for (;;)
                    pause();
            }
            if (i == 1 && write(fds[1], "x", 1) != 1)
                _exit(1);
            for (;;)
                pause();
        }
    }
    close(fds[1]);
    char c;
    ssize_t r = read(fds[0], &c, 1); /* the grandchild is born */
    close(fds[0]);
    pid_t out[16];
    int direct = plat_proc_children(getpid(), 0, out, 16);
    int all = plat_proc_children(getpid(), 1, out, 16);
    int found = 0;
    pid_t grandchild = 0;
    for (int i = 0; i < all && i < 16; i++) {
        found += out[i] == kids[0] || out[i] == kids[1];
        if (out[i] != kids[0] && out[i] != kids[1])
            grandchild = out[i];
    }
    if (grandchild > 0)
        kill(grandchild, SIGKILL);
    for (int i = 0; i < 2; i++) {
        kill(kids[i], SIGKILL);
        waitpid(kids[i], NULL, 0);
    }
    assert_int_equal(r, 1);
    assert_int_equal(direct, 2);
    assert_int_equal(all, 3);
    assert_int_equal(found, 2);
    assert_true(grandchild > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_kernel_lines),
        cmocka_unit_test(test_parse_path_with_spaces),
        cmocka_unit_test(test_parse_deleted),
        cmocka_unit_test(test_parse_pseudo_paths),
        cmocka_unit_test(test_parse_anonymous),
        cmocka_unit_test(test_parse_long_line),
        cmocka_unit_test(test_parse_no_trailing_newline),
        cmocka_unit_test(test_parse_empty),
        cmocka_unit_test(test_parse_big_device_numbers),
        cmocka_unit_test(test_parse_malformed),
        cmocka_unit_test(test_parse_nul_byte),
        cmocka_unit_test(test_maps_read_self),
        cmocka_unit_test(test_map_open_self),
        cmocka_unit_test(test_mem_read_self),
        cmocka_unit_test(test_mem_readv_self),
        cmocka_unit_test(test_mem_recheck_after_batch),
        cmocka_unit_test(test_mem_recheck_merges_near_spans),
        cmocka_unit_test(test_mem_recheck_last),
        cmocka_unit_test(test_mem_batch_judged_per_page),
        cmocka_unit_test(test_mem_readv_many),
        cmocka_unit_test(test_mem_readv_fresh_coalesces),
        cmocka_unit_test(test_mem_readv_fresh_twice_nests),
        cmocka_unit_test(test_mem_prefetch_late_in_span),
        cmocka_unit_test(test_mem_prefetch_keeps_small_spans),
        cmocka_unit_test(test_mem_prefetch_drops_unmapped_span),
        cmocka_unit_test(test_mem_prefetch_kept_span_leaves),
        cmocka_unit_test(test_mem_read_twice),
        cmocka_unit_test(test_absent_pid),
        cmocka_unit_test(test_reaped_child),
        cmocka_unit_test(test_self),
        cmocka_unit_test(test_sleeping_child),
        cmocka_unit_test(test_zombie_child),
        cmocka_unit_test(test_leader_exited_process_alive),
        cmocka_unit_test(test_thread_id_is_not_a_process),
        cmocka_unit_test(test_tids_same_namespace),
        cmocka_unit_test(test_tids_child_namespace),
        cmocka_unit_test(test_program_exec),
        cmocka_unit_test(test_shares_parent_vm),
        cmocka_unit_test(test_children_recursive),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
