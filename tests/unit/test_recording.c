/*
 * Unit tests of the recording format (output/recording.h, docs/format.md):
 * samples written by the encoder, packed into a block, read back. A thread
 * whose stack could not be read in a sample comes back as unread in that
 * sample (not as absent, not with a stack), with its status and name, and
 * its next stack is read whole against the last one stored. Also the
 * reader's <GC> flag of a stack.
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

#include "output/recording.h"

#include "py_frame.h"

/* What the reader delivered, one line per sample: each thread as
 * "id:frames innermost first" or "id:unread(status,name)". */
struct seen {
    char text[2048];
    size_t len;
};

static int on_sample(void *ctx, const struct out_rec_sample *s)
{
    struct seen *x = ctx;
    char *p = x->text + x->len;
    size_t room = sizeof x->text - x->len;
    int n = 0;
    for (size_t i = 0; i < s->nthreads; i++) {
        const struct out_rec_thread *t = &s->threads[i];
        n += snprintf(p + n, room - (size_t)n, "%llu:", (unsigned long long)t->id);
        for (size_t k = 0; k < t->nframes; k++)
            n += snprintf(p + n, room - (size_t)n, "%s%s", k ? "," : "", t->frames[k].qualname);
        n += snprintf(p + n, room - (size_t)n, " ");
    }
    for (size_t i = 0; i < s->nunread; i++) {
        const struct out_rec_thread *t = &s->unread[i];
        assert_int_equal(t->nframes, 0);
        n += snprintf(p + n, room - (size_t)n, "%llu:unread(%u,%s) ", (unsigned long long)t->id,
                      t->status, t->name ? t->name : "-");
    }
    n += snprintf(p + n, room - (size_t)n, "|");
    x->len += (size_t)n;
    assert_true(x->len < sizeof x->text);
    return 0;
}

/* Encode the samples, pack them (stored) into a file in *out (size
 * returned; free it). */
static size_t write_file(const struct out_rec_sample *smp, size_t n, uint8_t **out)
{
    out_rec_enc *e = out_rec_enc_new();
    assert_non_null(e);
    struct out_rec_meta m = {.pid = 1, .mode = "wall", .tool = "test", .interval_ns = 1000000};
    assert_int_equal(out_rec_enc_meta(e, &m), 0);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(out_rec_enc_sample(e, &smp[i]), 0);
    assert_int_equal(out_rec_enc_end(e), 0);
    struct out_rec_buf raw = {0}, block = {0};
    assert_int_equal(out_rec_enc_take(e, &raw), 0);
    out_rec_packer *k = out_rec_packer_new(OUT_REC_NONE, 0);
    assert_non_null(k);
    assert_int_equal(out_rec_block_pack(k, raw.p, raw.len, 1, &block), 0);
    size_t size = OUT_REC_FILE_HEADER + block.len;
    uint8_t *f = malloc(size);
    assert_non_null(f);
    out_rec_file_header(f);
    memcpy(f + OUT_REC_FILE_HEADER, block.p, block.len);
    out_rec_buf_release(&raw);
    out_rec_buf_release(&block);
    out_rec_packer_free(k);
    out_rec_enc_free(e);
    *out = f;
    return size;
}

/* Thread 11 runs a then b; thread 12 ("worker") sits in g. Sample 2: 12
 * unread; sample 3: 11 unread, and 13, never stored, too; sample 4:
 * both read again, 12 one frame deeper. */
static void test_unread_round_trip(void **state)
{
    (void)state;
    struct pys_frame s11a[2] = {frame("a", 3), frame("<module>", 9)};
    struct pys_frame s11b[2] = {frame("b", 5), frame("<module>", 9)};
    struct pys_frame s12[1] = {frame("g", 20)};
    struct pys_frame s12h[2] = {frame("h", 30), frame("g", 21)};
    struct out_rec_thread t1[2] = {
        {.id = 11, .status = PYS_THREAD_MAIN_THREAD, .nframes = 2, .frames = s11a},
        {.id = 12, .name = "worker", .status = 0, .nframes = 1, .frames = s12},
    };
    struct out_rec_thread t2[2] = {
        {.id = 11, .status = PYS_THREAD_MAIN_THREAD, .nframes = 2, .frames = s11b},
        {.id = 12, .status = PYS_THREAD_HAS_GIL},
    };
    struct out_rec_thread t3[3] = {
        {.id = 12, .nframes = 1, .frames = s12},
        {.id = 11, .status = PYS_THREAD_MAIN_THREAD},
        {.id = 13, .status = PYS_THREAD_ON_CPU},
    };
    struct out_rec_thread t4[2] = {
        {.id = 11, .status = PYS_THREAD_MAIN_THREAD, .nframes = 2, .frames = s11b},
        {.id = 12, .nframes = 2, .frames = s12h},
    };
    struct out_rec_sample smp[4] = {
        {.t_ns = 1000000, .nthreads = 2, .threads = t1},
        {.t_ns = 2000000, .nthreads = 1, .threads = t2, .nunread = 1, .unread = t2 + 1},
        {.t_ns = 3000000, .nthreads = 1, .threads = t3, .nunread = 2, .unread = t3 + 1},
        {.t_ns = 4000000, .nthreads = 2, .threads = t4},
    };
    uint8_t *file;
    size_t size = write_file(smp, 4, &file);
    struct seen x = {0};
    struct out_rec_reader_cb cb = {&x, NULL, NULL, on_sample, 0, NULL};
    struct out_rec_read_info info;
    char err[256];
    assert_int_equal(out_rec_read(file, size, &cb, &info, err, sizeof err), 0);
    assert_int_equal(info.minor, OUT_REC_MINOR);
    assert_int_equal(info.samples, 4);
    assert_true(info.complete);
    assert_string_equal(x.text, "11:a,<module> 12:g |"
                                "11:b,<module> 12:unread(1,worker) |"
                                "12:g 11:unread(32,-) 13:unread(2,-) |"
                                "11:b,<module> 12:h,g |");
    free(file);
}

/* Samples without unread threads read back without any. */
static void test_no_unread_no_record(void **state)
{
    (void)state;
    struct pys_frame s[1] = {frame("f", 1)};
    struct out_rec_thread t[1] = {{.id = 5, .nframes = 1, .frames = s}};
    struct out_rec_sample smp[2] = {{.t_ns = 1000000, .nthreads = 1, .threads = t},
                                    {.t_ns = 2000000, .nthreads = 1, .threads = t}};
    uint8_t *file;
    size_t size = write_file(smp, 2, &file);
    struct seen x = {0};
    struct out_rec_reader_cb cb = {&x, NULL, NULL, on_sample, 0, NULL};
    char err[256];
    assert_int_equal(out_rec_read(file, size, &cb, NULL, err, sizeof err), 0);
    assert_string_equal(x.text, "5:f |5:f |");
    free(file);
}

static int on_gc(void *ctx, const struct out_rec_sample *s)
{
    char *flags = ctx;
    size_t n = strlen(flags);
    assert_int_equal(s->nthreads, 1);
    int has = 0;
    for (size_t k = 0; k < s->threads[0].nframes; k++)
        has |= s->threads[0].frames[k].kind == PYS_FRAME_GC;
    /* The flag says what the frames hold. */
    assert_int_equal(s->threads[0].gc, has);
    flags[n] = has ? 'g' : '-';
    return 0;
}

/* out_rec_thread.gc follows the <GC> frame as samples push and pop it
 * (a <GC> frame above a collection's caller, then gone, then deeper). */
static void test_gc_flag(void **state)
{
    (void)state;
    struct pys_frame gc = frame("<GC>", -1);
    gc.kind = PYS_FRAME_GC;
    struct pys_frame s1[3] = {gc, frame("alloc", 4), frame("<module>", 9)};
    struct pys_frame s2[2] = {frame("alloc", 5), frame("<module>", 9)};
    struct pys_frame s3[4] = {gc, frame("leaf", 2), frame("alloc", 5), frame("<module>", 9)};
    struct out_rec_thread t[4] = {{.id = 3, .nframes = 3, .frames = s1},
                                  {.id = 3, .nframes = 2, .frames = s2},
                                  {.id = 3, .nframes = 4, .frames = s3},
                                  {.id = 3, .nframes = 2, .frames = s3 + 2}};
    struct out_rec_sample smp[4];
    for (int i = 0; i < 4; i++)
        smp[i] = (struct out_rec_sample){
            .t_ns = 1000000 * (uint64_t)(i + 1), .nthreads = 1, .threads = &t[i]};
    uint8_t *file;
    size_t size = write_file(smp, 4, &file);
    char flags[8] = "";
    struct out_rec_reader_cb cb = {flags, NULL, NULL, on_gc, 0, NULL};
    char err[256];
    assert_int_equal(out_rec_read(file, size, &cb, NULL, err, sizeof err), 0);
    assert_string_equal(flags, "g-g-");
    free(file);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unread_round_trip),
        cmocka_unit_test(test_no_unread_no_record),
        cmocka_unit_test(test_gc_flag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
