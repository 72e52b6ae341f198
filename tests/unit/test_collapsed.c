/*
 * Unit tests of the collapsed-stack writer (output/collapsed.c): names from
 * the target may hold the format's own separators, which must not survive.
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

#include "output/collapsed.h"

static struct pys_frame frame(const char *file, const char *name, int line, int kind)
{
    struct pys_frame f;
    memset(&f, 0, sizeof f);
    f.filename = file;
    f.qualname = name;
    f.lineno = line;
    f.kind = kind;
    return f;
}

static char *write_all(const pys_profile *p, int tid)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(out_collapsed_write(f, p, tid), 0);
    fclose(f);
    return buf;
}

static void test_separators_in_names_are_replaced(void **state)
{
    (void)state;
    pys_profile *p = pys_profile_new();
    assert_non_null(p);
    /* Innermost first. */
    struct pys_frame s[3] = {
        frame("~", "<native>", -1, PYS_FRAME_NATIVE),
        frame("we;ird\nfile.py", "f;g\r\nh", 1234567, PYS_FRAME_PYTHON),
        frame("main.py", "<module>", 0, PYS_FRAME_PYTHON),
    };
    assert_int_equal(pys_profile_add(p, 42, s, 3, 5), 0);
    char *out = write_all(p, 0);
    assert_string_equal(out, "main.py:<module>:0;we,ird file.py:f,g  h:1234567;<native> 5\n");
    free(out);
    out = write_all(p, 1);
    assert_string_equal(out,
                        "tid:42;main.py:<module>:0;we,ird file.py:f,g  h:1234567;<native> 5\n");
    free(out);
    pys_profile_free(p);
}

static void test_namespace_thread_ids(void **state)
{
    (void)state;
    pys_profile *p = pys_profile_new();
    assert_non_null(p);
    struct pys_frame s[1] = {frame("main.py", "<module>", 3, PYS_FRAME_PYTHON)};
    assert_int_equal(pys_profile_add(p, 4242, s, 1, 2), 0);
    assert_int_equal(pys_profile_add(p, 4243, s, 1, 1), 0);
    assert_int_equal(pys_profile_set_thread_ns(p, 4242, 7), 0);
    assert_int_equal(pys_profile_thread_ns(p, 4242), 7);
    assert_int_equal(pys_profile_thread_ns(p, 4243), 0);
    char *out = write_all(p, 1);
    assert_string_equal(out, "tid:4242 (ns 7);main.py:<module>:3 2\n"
                             "tid:4243;main.py:<module>:3 1\n");
    free(out);
    out = write_all(p, 0);
    assert_string_equal(out, "main.py:<module>:3 3\n");
    free(out);
    pys_profile_free(p);
}

/* A merged profile's process frame (outermost) is the root of each line,
 * before the thread's frame. */
static void test_process_frame_first(void **state)
{
    (void)state;
    pys_profile *p = pys_profile_new();
    assert_non_null(p);
    struct pys_frame a[2] = {frame("main.py", "<module>", 3, PYS_FRAME_PYTHON),
                             frame("~", "process 7 python3 a;b.py", 0, PYS_FRAME_PROCESS)};
    assert_int_equal(pys_profile_add(p, 8, a, 2, 2), 0);
    char *out = write_all(p, 1);
    assert_string_equal(out, "process 7 python3 a,b.py;tid:8;main.py:<module>:3 2\n");
    free(out);
    out = write_all(p, 0);
    assert_string_equal(out, "process 7 python3 a,b.py;main.py:<module>:3 2\n");
    free(out);
    pys_profile_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_separators_in_names_are_replaced),
        cmocka_unit_test(test_namespace_thread_ids),
        cmocka_unit_test(test_process_frame_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
