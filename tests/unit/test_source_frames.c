/*
 * Unit tests of what the writers that name source files make of synthetic
 * frames (output/funcs.h, out_frame_has_source): a profile whose stacks
 * hold an asyncio task's <task> frame, a <GC> marker and a process frame
 * (--merge-processes) beside Python frames of one file. The heatmap has a
 * page for that file only, and lists nothing else; speedscope gives a file
 * to the Python frames only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <pystrobe/pystrobe.h>

#include "output/funcs.h"
#include "output/heatmap.h"
#include "output/speedscope.h"

static struct pys_frame frame(const char *file, const char *name, int line, int kind)
{
    struct pys_frame f;
    memset(&f, 0, sizeof f);
    f.filename = file;
    f.qualname = name;
    f.firstlineno = kind == PYS_FRAME_PYTHON ? line : -1;
    f.lineno = f.end_lineno = line;
    f.col = f.end_col = f.lasti = f.opcode = -1;
    f.kind = kind;
    return f;
}

/* Two task stacks (innermost first) as --async-aware --merge-processes
 * gives them: a coroutine under its <task> frame under its awaiter's
 * coroutine and <task> frame, under the process frame; one with a <GC>
 * marker. */
static pys_profile *task_profile(void)
{
    pys_profile *p = pys_profile_new();
    assert_non_null(p);
    struct pys_frame a[] = {
        frame("/srv/app.py", "leaf", 5, PYS_FRAME_PYTHON),
        frame(PYS_TASK_FRAME_FILENAME, "worker-1", 0, PYS_FRAME_PYTHON),
        frame("/srv/app.py", "main", 12, PYS_FRAME_PYTHON),
        frame(PYS_TASK_FRAME_FILENAME, "Task-1", 0, PYS_FRAME_PYTHON),
        frame("~", "process 42 python3", 0, PYS_FRAME_PROCESS),
    };
    struct pys_frame b[] = {
        frame("~", "<GC>", 0, PYS_FRAME_GC),
        frame("/srv/app.py", "leaf", 6, PYS_FRAME_PYTHON),
        frame(PYS_TASK_FRAME_FILENAME, "worker-2", 0, PYS_FRAME_PYTHON),
        frame("/srv/app.py", "main", 12, PYS_FRAME_PYTHON),
        frame(PYS_TASK_FRAME_FILENAME, "Task-1", 0, PYS_FRAME_PYTHON),
        frame("~", "process 42 python3", 0, PYS_FRAME_PROCESS),
    };
    assert_int_equal(pys_profile_add(p, 7, a, sizeof a / sizeof a[0], 3), 0);
    assert_int_equal(pys_profile_add(p, 7, b, sizeof b / sizeof b[0], 2), 0);
    return p;
}

static void no_source(void *ctx, const char *filename, struct out_source *out)
{
    (void)ctx;
    (void)filename;
    memset(out, 0, sizeof *out);
    out->why = "not read in this test";
}

static char *read_file(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = calloc(1, 1 << 20);
    assert_non_null(buf);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void test_heatmap_pages_only_source_files(void **state)
{
    (void)state;
    pys_profile *p = task_profile();
    char dir[] = "/tmp/pystrobe_test_heatmap_XXXXXX";
    assert_non_null(mkdtemp(dir));
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY);
    assert_true(dirfd >= 0);
    size_t nfiles = 0;
    assert_int_equal(out_heatmap_write(dirfd, p, "t", no_source, NULL, &nfiles), 0);
    close(dirfd);
    assert_int_equal(nfiles, 1);
    /* The pages: the index and app.py's, nothing else. */
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    int pages = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        assert_true(strcmp(e->d_name, "index.html") == 0 ||
                    strcmp(e->d_name, "file_0000.html") == 0);
        pages++;
    }
    closedir(d);
    assert_int_equal(pages, 2);
    char *index = read_file(dir, "index.html");
    assert_non_null(strstr(index, "/srv/app.py"));
    assert_null(strstr(index, "&lt;task&gt;"));
    assert_null(strstr(index, "file_0001.html"));
    free(index);
    char *page = read_file(dir, "file_0000.html");
    assert_non_null(strstr(page, "/srv/app.py"));
    free(page);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -r '%s'", dir);
    assert_int_equal(system(cmd), 0);
    pys_profile_free(p);
}

/* The text of the speedscope frame named name: from its '{' to its '}'. */
static char *frame_object(const char *json, const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "{\"name\":\"%s\"", name);
    const char *s = strstr(json, key);
    assert_non_null(s);
    const char *end = strchr(s, '}');
    assert_non_null(end);
    return strndup(s, (size_t)(end - s + 1));
}

static void test_speedscope_files_only_for_source_frames(void **state)
{
    (void)state;
    pys_profile *p = task_profile();
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(out_speedscope_write(f, p, "t"), 0);
    fclose(f);
    const char *synthetic[] = {"worker-1", "worker-2", "Task-1", "\\u003cGC\\u003e",
                               "process 42 python3"};
    for (size_t i = 0; i < sizeof synthetic / sizeof synthetic[0]; i++) {
        char *o = frame_object(buf, synthetic[i]);
        assert_null(strstr(o, "\"file\""));
        assert_null(strstr(o, "\"line\""));
        free(o);
    }
    char *o = frame_object(buf, "main");
    assert_non_null(strstr(o, "\"file\":\"/srv/app.py\""));
    assert_non_null(strstr(o, "\"line\":12"));
    free(o);
    free(buf);
    pys_profile_free(p);
}

static void test_has_source(void **state)
{
    (void)state;
    assert_true(out_frame_has_source(PYS_FRAME_PYTHON, "/srv/app.py"));
    assert_true(out_frame_has_source(PYS_FRAME_PYTHON, "<string>"));
    assert_false(out_frame_has_source(PYS_FRAME_PYTHON, PYS_TASK_FRAME_FILENAME));
    assert_false(out_frame_has_source(PYS_FRAME_PYTHON, NULL));
    assert_false(out_frame_has_source(PYS_FRAME_GC, "~"));
    assert_false(out_frame_has_source(PYS_FRAME_NATIVE, "/usr/lib/libc.so.6"));
    assert_false(out_frame_has_source(PYS_FRAME_PROCESS, "~"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heatmap_pages_only_source_files),
        cmocka_unit_test(test_speedscope_files_only_for_source_frames),
        cmocka_unit_test(test_has_source),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
