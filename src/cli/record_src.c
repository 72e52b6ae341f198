/*
 * record_src: the source files --heatmap embeds, read as the target sees
 * them (through its root and working directory, rec_out's root_fd and
 * cwd_fd). Each file is read at the first sample that shows it, so that
 * the pages keep the code as it was while it was sampled even if the file
 * changes or goes before the end; a file not read then (sampling without
 * the run's profile, or past the memory bound) is read when the pages are
 * written, as is every file of a replay.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/openat2.h>

#include "cli/record.h"
#include "output/heatmap.h"
#include "util/strtab.h"

/* Sources larger than this are not embedded (no Python file is). */
#define MAX_SOURCE (16u << 20)
/* The most bytes of sources kept from sampling time; past it, files are
 * read at the end. */
#define MAX_KEPT ((uint64_t)256 << 20)
/* The most files read after one sample, so that a sample that shows many
 * new files at once delays the next by a few reads only (the rest are read
 * after the following samples). */
#define READS_PER_SAMPLE 4

enum src_state { SRC_LATER, SRC_READ, SRC_FAILED };

struct source {
    enum src_state state;
    char *text; /* SRC_READ */
    size_t len;
    uint64_t mtime; /* SRC_READ: the file's, when read (ns since the epoch) */
    char why[96];   /* SRC_FAILED */
};

struct rec_sources {
    struct util_strtab names; /* the files by name, copies; index i is v[i] */
    struct source *v;
    size_t nv;
    size_t seen;      /* profile nodes looked at */
    const char *last; /* the file name of the last node looked at (the profile's) */
    uint64_t kept;    /* bytes of text in v */
};

struct rec_sources *rec_sources_new(void)
{
    struct rec_sources *s = calloc(1, sizeof *s);
    if (s)
        s->names.copies = 1;
    return s;
}

void rec_sources_free(struct rec_sources *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nv; i++)
        free(s->v[i].text);
    free(s->v);
    util_strtab_release(&s->names);
    free(s);
}

/* Open filename as the target sees it: an absolute path inside its root (its
 * symbolic links resolved there too, where the kernel has openat2), a
 * relative one from its working directory. */
static int open_in_target(const struct rec_out *o, const char *filename)
{
    int flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
    if (filename[0] != '/')
        return o->cwd_fd >= 0 ? openat(o->cwd_fd, filename, flags) : open(filename, flags);
    if (o->root_fd < 0)
        return open(filename, flags);
    struct open_how how = {.flags = (uint64_t)flags, .resolve = RESOLVE_IN_ROOT};
    int fd = (int)syscall(SYS_openat2, o->root_fd, filename, &how, sizeof how);
    if (fd < 0 && errno == ENOSYS) {
        while (*filename == '/')
            filename++;
        fd = openat(o->root_fd, filename, flags);
    }
    return fd;
}

static uint64_t mtime_ns(const struct stat *sb)
{
    return (uint64_t)sb->st_mtim.tv_sec * 1000000000ull + (uint64_t)sb->st_mtim.tv_nsec;
}

/* Read filename (not "<...>") as the target sees it: a new buffer of
 * *len bytes and the file's *mtime, or NULL with why (whylen bytes)
 * written. */
static char *read_text(const struct rec_out *o, const char *filename, size_t *len, uint64_t *mtime,
                       char *why, size_t whylen)
{
    struct stat sb;
    char *buf = NULL;
    int fd = open_in_target(o, filename);
    if (fd < 0) {
        snprintf(why, whylen, "%s", strerror(errno));
        return NULL;
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(why, whylen, "not a regular file");
        goto done;
    }
    if ((uint64_t)sb.st_size > MAX_SOURCE) {
        snprintf(why, whylen, "larger than %u MiB", MAX_SOURCE >> 20);
        goto done;
    }
    /* One byte more than the size: a file that grew is cut at the bound. */
    size_t cap = (size_t)sb.st_size + 1, n = 0;
    if (!(buf = malloc(cap))) {
        snprintf(why, whylen, "out of memory");
        goto done;
    }
    while (n < cap) {
        ssize_t k = read(fd, buf + n, cap - n);
        if (k == 0)
            break;
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            snprintf(why, whylen, "%s", strerror(errno));
            free(buf);
            buf = NULL;
            goto done;
        }
        n += (size_t)k;
    }
    *len = n;
    *mtime = mtime_ns(&sb);
done:
    close(fd);
    return buf;
}

/* Entries up to the table's names, new ones SRC_LATER. 0, or -1. */
static int grow(struct rec_sources *s)
{
    if (s->nv >= s->names.n)
        return 0;
    struct source *v = realloc(s->v, s->names.n * sizeof *v);
    if (!v)
        return -1;
    memset(v + s->nv, 0, (s->names.n - s->nv) * sizeof *v);
    s->v = v;
    s->nv = s->names.n;
    return 0;
}

/* Read file i now, unless the bound on kept text is reached. */
static void take(const struct rec_out *o, struct rec_sources *s, size_t i)
{
    struct source *e = &s->v[i];
    size_t len = 0;
    uint64_t mtime = 0;
    char *text = read_text(o, s->names.v[i].s, &len, &mtime, e->why, sizeof e->why);
    if (!text) {
        e->state = SRC_FAILED;
        return;
    }
    if (s->kept + len > MAX_KEPT) {
        free(text); /* read at the end */
        return;
    }
    s->kept += len;
    *e = (struct source){.state = SRC_READ, .text = text, .len = len, .mtime = mtime};
}

int rec_sources_sample(void *ctx, const struct rec_sample *smp)
{
    const struct rec_out *o = ctx;
    struct rec_sources *s = o->sources;
    if (!s || !smp->prof)
        return 0;
    const pys_profile *p = smp->prof;
    size_t n = pys_profile_nodes(p);
    for (int reads = 0; s->seen < n && reads < READS_PER_SAMPLE; s->seen++) {
        const struct pys_frame *fr =
            pys_profile_frame(p, pys_profile_node(p, (uint32_t)s->seen)->frame);
        if (!fr || fr->kind != PYS_FRAME_PYTHON || !fr->filename || fr->filename == s->last)
            continue;
        s->last = fr->filename;
        if (fr->filename[0] == '<' || fr->filename[0] == '\0')
            continue; /* never a file */
        size_t before = s->names.n;
        int64_t i = util_strtab_add(&s->names, fr->filename, strlen(fr->filename));
        if (i < 0 || (size_t)i < before)
            continue; /* out of memory (read at the end), or seen */
        if (grow(s) < 0)
            continue;
        take(o, s, (size_t)i);
        reads++;
    }
    return 0;
}

/* Was the file read at sampling time changed since (or removed)? */
static int changed_since_read(const struct rec_out *o, const char *filename, uint64_t mtime)
{
    struct stat sb;
    int fd = open_in_target(o, filename);
    if (fd < 0)
        return 1;
    int changed = fstat(fd, &sb) != 0 || mtime_ns(&sb) != mtime;
    close(fd);
    return changed;
}

void rec_sources_get(void *ctx, const char *filename, struct out_source *out)
{
    struct rec_src_read *c = ctx;
    const struct rec_out *o = c->o;
    struct rec_sources *s = o->sources;
    free(c->buf);
    c->buf = NULL;
    out->text = NULL;
    out->why = c->why;
    if (filename[0] == '<' || filename[0] == '\0') {
        snprintf(c->why, sizeof c->why, "not a file: frozen or generated code");
        return;
    }
    int64_t i = s ? util_strtab_add(&s->names, filename, strlen(filename)) : -1;
    const struct source *e = i >= 0 && (size_t)i < s->nv ? &s->v[i] : NULL;
    if (e && e->state == SRC_FAILED) {
        out->why = e->why;
        return;
    }
    if (e && e->state == SRC_READ) {
        out->text = e->text;
        out->len = e->len;
        if (o->start_ns && e->mtime > o->start_ns)
            out->changed = 1;
        else if (changed_since_read(o, filename, e->mtime))
            out->changed = 2;
        return;
    }
    size_t len = 0;
    uint64_t mtime = 0;
    if ((c->buf = read_text(o, filename, &len, &mtime, c->why, sizeof c->why))) {
        out->text = c->buf;
        out->len = len;
        out->changed = o->start_ns && mtime > o->start_ns;
    }
}
