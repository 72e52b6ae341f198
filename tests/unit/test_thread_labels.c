/*
 * Unit tests of how the writers label threads: a thread with a Python name
 * (pys_profile_set_thread_name, or out_rec_thread.name in the sample
 * stream) is labelled with it, the last one given, escaped as each format
 * escapes; a thread without one keeps its id alone. Also the Chrome trace's
 * rule for a thread missing from a sample or unread in it.
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

#include "output/chrometrace.h"
#include "output/gecko.h"
#include "output/speedscope.h"
#include "output/svg.h"

#include "py_frame.h"

/* Two threads: 7 named "worker<&>" (first "old"), 9 without a name. */
static pys_profile *named_profile(void)
{
    pys_profile *p = pys_profile_new();
    assert_non_null(p);
    struct pys_frame s[2] = {frame("leaf", 3), frame("<module>", 9)};
    assert_int_equal(pys_profile_set_thread_name(p, 7, "old"), 0);
    assert_int_equal(pys_profile_add(p, 7, s, 2, 3), 0);
    assert_int_equal(pys_profile_set_thread_name(p, 7, "worker<&>"), 0);
    assert_int_equal(pys_profile_add(p, 9, s, 2, 2), 0);
    return p;
}

typedef int (*profile_writer)(FILE *, const pys_profile *, const char *);

static char *write_profile(profile_writer w, const pys_profile *p)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(w(f, p, NULL), 0);
    fclose(f);
    return buf;
}

static void test_svg(void **state)
{
    (void)state;
    pys_profile *p = named_profile();
    char *out = write_profile(out_svg_write, p);
    assert_non_null(strstr(out, "<title>tid:7 (worker&lt;&amp;&gt;) ("));
    assert_non_null(strstr(out, "<title>tid:9 ("));
    assert_null(strstr(out, "old"));
    free(out);
    pys_profile_free(p);
}

static void test_speedscope(void **state)
{
    (void)state;
    pys_profile *p = named_profile();
    char *out = write_profile(out_speedscope_write, p);
    /* JSON strings here escape markup characters too */
    assert_non_null(strstr(out, "\"Thread 7 (worker\\u003c\\u0026\\u003e)\""));
    assert_non_null(strstr(out, "\"Thread 9\""));
    free(out);
    pys_profile_free(p);
}

/* The trace t writes, as text (the caller frees it). */
static char *trace_text(struct out_chrometrace *t)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(out_chrometrace_write(f, t), 0);
    fclose(f);
    return buf;
}

static void test_chrometrace(void **state)
{
    (void)state;
    struct out_chrometrace *t = out_chrometrace_new(1234, OUT_TRACE_LINE_EXACT, 0);
    assert_non_null(t);
    struct pys_frame s[2] = {frame("leaf", 3), frame("<module>", 9)};
    char name[16];
    for (int i = 0; i < 3; i++) {
        /* The name given last wins; the caller's buffer is not kept. */
        snprintf(name, sizeof name, i < 2 ? "old\"%d" : "new\"%d", i);
        out_chrometrace_sample_begin(t, 1000 * (uint64_t)i);
        assert_int_equal(out_chrometrace_thread(t, 7, name, s, 2), 0);
        assert_int_equal(out_chrometrace_thread(t, 9, NULL, s, 2), 0);
        assert_int_equal(out_chrometrace_sample_end(t), 0);
    }
    strcpy(name, "gone");
    char *buf = trace_text(t);
    assert_non_null(strstr(buf, "\"tid\":7,\"args\":{\"name\":\"tid:7 (new\\\"2)\"}}"));
    assert_non_null(strstr(buf, "\"tid\":9,\"args\":{\"name\":\"tid:9\"}}"));
    free(buf);
    out_chrometrace_free(t);
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* A thread whose stack could not be read keeps its frames open; one not
 * given at all has them closed. Thread 7 is unread in sample 1, thread 9
 * missing: 7's leaf begins once, 9's twice. */
static void test_chrometrace_unread(void **state)
{
    (void)state;
    struct out_chrometrace *t = out_chrometrace_new(1234, OUT_TRACE_LINE_EXACT, 0);
    assert_non_null(t);
    struct pys_frame s[2] = {frame("leaf", 3), frame("<module>", 9)};
    for (int i = 0; i < 3; i++) {
        out_chrometrace_sample_begin(t, 1000 * (uint64_t)i);
        if (i == 1) {
            out_chrometrace_thread_unread(t, 7);
        } else {
            assert_int_equal(out_chrometrace_thread(t, 7, NULL, s, 2), 0);
            assert_int_equal(out_chrometrace_thread(t, 9, NULL, s, 2), 0);
        }
        assert_int_equal(out_chrometrace_sample_end(t), 0);
    }
    char *buf = trace_text(t);
    assert_int_equal(
        count(buf, "{\"ph\":\"B\",\"name\":\"leaf\",\"cat\":\"python\",\"pid\":1234,\"tid\":7,"),
        1);
    assert_int_equal(
        count(buf, "{\"ph\":\"B\",\"name\":\"leaf\",\"cat\":\"python\",\"pid\":1234,\"tid\":9,"),
        2);
    free(buf);
    out_chrometrace_free(t);
}

static void test_gecko(void **state)
{
    (void)state;
    struct out_rec_meta m = {.pid = 1234, .python_version = 0x030c0000, .mode = "wall"};
    out_gecko *g = out_gecko_new(&m);
    assert_non_null(g);
    struct pys_frame s[2] = {frame("leaf", 3), frame("<module>", 9)};
    char name[16];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, i < 2 ? "old%d" : "worker\n%d", i);
        struct out_rec_thread th[2] = {
            {.id = 7, .name = name, .status = PYS_THREAD_MAIN_THREAD, .nframes = 2, .frames = s},
            {.id = 9, .nframes = 2, .frames = s},
        };
        struct out_rec_sample smp = {
            .t_ns = 1000000 * (uint64_t)(i + 1), .nthreads = 2, .threads = th};
        assert_int_equal(out_gecko_sample(g, &smp), 0);
    }
    strcpy(name, "gone");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(out_gecko_write(g, f), 0);
    fclose(f);
    assert_non_null(strstr(buf, "{\"name\":\"worker\\u000a2 7\",\"isMainThread\":true"));
    assert_non_null(strstr(buf, "{\"name\":\"Thread 9\",\"isMainThread\":false"));
    free(buf);
    out_gecko_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_svg),         cmocka_unit_test(test_speedscope),
        cmocka_unit_test(test_chrometrace), cmocka_unit_test(test_chrometrace_unread),
        cmocka_unit_test(test_gecko),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
