/*
 * source: lines of the target's source files for `dump`, read as the target
 * sees them: an absolute file name under /proc/PID/root (chroots and
 * containers), a relative one under /proc/PID/cwd. Names that are no file
 * ("<string>", "<frozen ...>") have no lines. Only regular files of at most
 * SOURCE_MAX_BYTES are read, opened without blocking (a FIFO by the same name
 * must not hang the dump), and each is read once: the last few files stay
 * in memory, as a stack often shows the same file many times. A process
 * that is gone (a core file's) has its absolute names read under the root
 * it ran in, its relative ones not at all (its working directory is not
 * known).
 */
#include "cli/source.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Source files larger than this are not shown (no real module is). */
#define SOURCE_MAX_BYTES (16u << 20)
/* Files kept in memory at once. */
#define SOURCE_SLOTS 8

struct slot {
    char *name; /* the frame's file name, NULL = empty */
    char *text; /* the file, NULL if it could not be read */
    size_t len;
    size_t *starts; /* offset of each line's start; nlines + 1 entries */
    size_t nlines;
    unsigned long used; /* for eviction: higher = more recent */
};

struct cli_source {
    int pid;    /* 0: a process that is gone, its files under root */
    char *root; /* NULL: "/" */
    struct slot slots[SOURCE_SLOTS];
    unsigned long clock;
};

struct cli_source *cli_source_new(int pid)
{
    struct cli_source *c = calloc(1, sizeof *c);
    if (c)
        c->pid = pid;
    return c;
}

struct cli_source *cli_source_new_root(const char *root)
{
    struct cli_source *c = calloc(1, sizeof *c);
    if (c && root && !(c->root = strdup(root))) {
        free(c);
        return NULL;
    }
    return c;
}

static void slot_clear(struct slot *s)
{
    free(s->name);
    free(s->text);
    free(s->starts);
    memset(s, 0, sizeof *s);
}

void cli_source_free(struct cli_source *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < SOURCE_SLOTS; i++)
        slot_clear(&c->slots[i]);
    free(c->root);
    free(c);
}

/* Read the file into s (text stays NULL when it cannot be). */
static void slot_load(struct slot *s, const struct cli_source *c, const char *name)
{
    char path[4096];
    int n, pid = c->pid;
    if (pid <= 0 && name[0] != '/')
        return;
    if (pid <= 0)
        n = snprintf(path, sizeof path, "%s%s", c->root ? c->root : "", name);
    else if (name[0] == '/')
        n = snprintf(path, sizeof path, "/proc/%d/root%s", pid, name);
    else
        n = snprintf(path, sizeof path, "/proc/%d/cwd/%s", pid, name);
    if (n < 0 || (size_t)n >= sizeof path)
        return;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    char *text = NULL;
    size_t *starts = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 0 ||
        (unsigned long long)st.st_size > SOURCE_MAX_BYTES)
        goto fail;
    size_t size = (size_t)st.st_size, got = 0;
    text = malloc(size + 1);
    if (!text)
        goto fail;
    while (got < size) {
        ssize_t r = read(fd, text + got, size - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    text[got] = '\0';
    size_t lines = 1;
    for (size_t i = 0; i < got; i++)
        lines += text[i] == '\n';
    starts = malloc((lines + 1) * sizeof *starts);
    if (!starts)
        goto fail;
    size_t k = 0;
    starts[k++] = 0;
    for (size_t i = 0; i < got; i++)
        if (text[i] == '\n')
            starts[k++] = i + 1;
    starts[k] = got + 1; /* one past the last line's (virtual) newline */
    s->text = text;
    s->len = got;
    s->starts = starts;
    s->nlines = k;
    close(fd);
    return;
fail:
    free(text);
    free(starts);
    close(fd);
}

int cli_source_line(struct cli_source *c, const char *filename, int lineno, const char **line,
                    size_t *len)
{
    if (!c || !filename || !filename[0] || filename[0] == '<' || lineno < 1 ||
        strcmp(filename, "~") == 0)
        return -1;
    struct slot *s = NULL, *oldest = &c->slots[0];
    for (size_t i = 0; i < SOURCE_SLOTS; i++) {
        struct slot *x = &c->slots[i];
        if (x->name && strcmp(x->name, filename) == 0) {
            s = x;
            break;
        }
        if (!x->name || x->used < oldest->used)
            oldest = x;
    }
    if (!s) {
        s = oldest;
        slot_clear(s);
        s->name = strdup(filename);
        if (!s->name)
            return -1;
        slot_load(s, c, filename);
    }
    s->used = ++c->clock;
    if (!s->text || (size_t)lineno > s->nlines)
        return -1;
    size_t a = s->starts[lineno - 1], b = s->starts[lineno] - 1; /* without the newline */
    if (b > s->len)
        b = s->len;
    if (b > a && s->text[b - 1] == '\r')
        b--;
    *line = s->text + a;
    *len = b - a;
    return 0;
}
