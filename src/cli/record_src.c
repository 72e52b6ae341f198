/*
 * record_src: the source files of the targets, read as each target sees
 * them (through its root and working directory, opened at its first sample
 * so that they can be read after it ended), for --heatmap's pages and the
 * recording's SOURCE records.
 *
 * Each file is noted at the first sample that shows it (the sample's new
 * nodes in the profile, whatever --function, --nolineno or
 * --merge-processes made of its lines; the recording's new frames, which
 * --binary's small profile would miss) with the process that showed it,
 * and read soon after through that process's view, a few files a sample:
 * the pages and the recording keep the code as it was while it was
 * sampled even if the file changes or goes before the end. Files noted
 * and not read by the end are read then; a file the heatmap names that
 * was never noted (a replay's, with no source recorded) is read when the
 * pages are written.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <linux/openat2.h>

#include "cli/record.h"
#include "platform/platform.h"
#include "output/heatmap.h"
#include "output/recording.h"
#include "util/array.h"
#include "util/strtab.h"

/* Sources larger than this are not embedded (no Python file is). */
#define MAX_SOURCE (16u << 20)
/* The most bytes of sources kept for the heatmap (the sampling time's,
 * or a replay's); past it, files are read when the pages are written. */
#define MAX_KEPT ((uint64_t)256 << 20)
/* The most files read after one sample, so that a sample that shows many
 * new files at once delays the next by a few reads only (the rest are read
 * after the following samples). */
#define READS_PER_SAMPLE 4
/* The most processes whose files are read through their own view (as many
 * as --subprocesses follows); the files of others, through the first's. */
#define MAX_VIEWS 1024

/* A process's view of the files: its root and working directory (O_PATH;
 * -1: not open, this machine's are used) and when it started (ns since the
 * epoch, 0 unknown). */
struct view {
    int pid;
    int root_fd, cwd_fd;
    uint64_t start_ns;
};

/* SRC_NOTED: not read yet; SRC_READ: read (text NULL if not kept: read
 * again for the pages); SRC_FAILED: could not be read (why). */
enum src_state { SRC_UNSEEN, SRC_NOTED, SRC_READ, SRC_FAILED };

struct source {
    enum src_state state;
    size_t view;    /* the view it is read through */
    char *text;     /* SRC_READ: kept */
    size_t len;     /* SRC_READ: its length, kept or not */
    uint64_t mtime; /* SRC_READ: the file's, when read (ns since the epoch);
                     * 0: a replay's, the mark as recorded */
    int changed;    /* SRC_READ: OUT_REC_SRC_* */
    char why[160];  /* SRC_FAILED */
};

struct rec_sources {
    struct util_strtab names; /* the files by name, copies; index i is v[i] */
    struct source *v;
    size_t nv;
    struct view *views; /* views[0]: the first process's, or this machine's */
    size_t nviews, capviews;
    size_t last_view; /* the view of the last sample's process */
    uint32_t *queue;  /* files noted, to read, in order */
    size_t qhead, qlen, qcap;
    size_t seen;      /* profile nodes looked at */
    const char *last; /* the file name of the last node looked at (the profile's) */
    size_t bin_seen;  /* the recording's files looked at */
    struct rec_bin *bin;
    uint64_t kept; /* bytes of text in v */
    int keep;
};

/* When process pid started, in ns since the epoch; 0 if unknown. Its start
 * is counted in clock ticks since boot (CLOCK_BOOTTIME); the boot's date is
 * taken from the clocks, not from /proc/stat's btime, whose whole seconds
 * would put the start up to a second early (and mark a file written just
 * before it as changed). */
static uint64_t process_start_ns(int pid)
{
    uint64_t since_boot = plat_proc_started_ns(pid);
    struct timespec real, boot;
    if (!since_boot || clock_gettime(CLOCK_REALTIME, &real) != 0 ||
        clock_gettime(CLOCK_BOOTTIME, &boot) != 0)
        return 0;
    int64_t booted =
        ((int64_t)real.tv_sec - boot.tv_sec) * 1000000000 + (real.tv_nsec - boot.tv_nsec);
    return (uint64_t)booted + since_boot;
}

/* Add the view of process pid (pid <= 0: this machine's). 0, or -1 if out
 * of memory. */
static int view_add(struct rec_sources *s, int pid)
{
    if (util_array_reserve((void **)&s->views, &s->capviews, s->nviews + 1, sizeof *s->views) < 0)
        return -1;
    struct view *w = &s->views[s->nviews++];
    *w = (struct view){.pid = pid, .root_fd = -1, .cwd_fd = -1};
    if (pid <= 0)
        return 0;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/root", pid);
    w->root_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    snprintf(path, sizeof path, "/proc/%d/cwd", pid);
    w->cwd_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    w->start_ns = process_start_ns(pid);
    return 0;
}

/* The view of process pid, added at its first call (past MAX_VIEWS, or
 * out of memory: the first one's). */
static size_t view_of(struct rec_sources *s, int pid)
{
    if (s->views[s->last_view].pid == pid)
        return s->last_view;
    for (size_t i = 0; i < s->nviews; i++)
        if (s->views[i].pid == pid)
            return s->last_view = i;
    if (pid <= 0 || s->nviews >= MAX_VIEWS || view_add(s, pid) < 0)
        return 0;
    return s->last_view = s->nviews - 1;
}

struct rec_sources *rec_sources_new(int pid, int keep)
{
    struct rec_sources *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->names.copies = 1;
    s->keep = keep;
    if (view_add(s, pid) < 0) {
        free(s);
        return NULL;
    }
    return s;
}

void rec_sources_free(struct rec_sources *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nv; i++)
        free(s->v[i].text);
    free(s->v);
    for (size_t i = 0; i < s->nviews; i++) {
        if (s->views[i].root_fd >= 0)
            close(s->views[i].root_fd);
        if (s->views[i].cwd_fd >= 0)
            close(s->views[i].cwd_fd);
    }
    free(s->views);
    free(s->queue);
    util_strtab_release(&s->names);
    free(s);
}

void rec_sources_record(struct rec_sources *s, struct rec_bin *b)
{
    if (s)
        s->bin = b;
}

void rec_sources_set_start(struct rec_sources *s, uint64_t start_ns)
{
    if (s)
        s->views[0].start_ns = start_ns;
}

/* Open filename as view w sees it: an absolute path inside its root (its
 * symbolic links resolved there too, where the kernel has openat2), a
 * relative one from its working directory. */
static int open_in_view(const struct view *w, const char *filename)
{
    int flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
    if (filename[0] != '/')
        return w->cwd_fd >= 0 ? openat(w->cwd_fd, filename, flags) : open(filename, flags);
    if (w->root_fd < 0)
        return open(filename, flags);
    struct open_how how = {.flags = (uint64_t)flags, .resolve = RESOLVE_IN_ROOT};
    int fd = (int)syscall(SYS_openat2, w->root_fd, filename, &how, sizeof how);
    if (fd < 0 && errno == ENOSYS) {
        while (*filename == '/')
            filename++;
        fd = openat(w->root_fd, filename, flags);
    }
    return fd;
}

static uint64_t mtime_ns(const struct stat *sb)
{
    return (uint64_t)sb->st_mtim.tv_sec * 1000000000ull + (uint64_t)sb->st_mtim.tv_nsec;
}

/* Read filename (not "<...>") as view w sees it: a new buffer of *len
 * bytes and the file's *mtime, or NULL with why (whylen bytes) written. */
static char *read_text(const struct view *w, const char *filename, size_t *len, uint64_t *mtime,
                       char *why, size_t whylen)
{
    struct stat sb;
    char *buf = NULL;
    int fd = open_in_view(w, filename);
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

/* The entry of filename, added (SRC_UNSEEN) if new; NULL if out of
 * memory. */
static struct source *entry(struct rec_sources *s, const char *filename, size_t *index)
{
    int64_t i = util_strtab_add(&s->names, filename, strlen(filename));
    if (i < 0)
        return NULL;
    if ((size_t)i >= s->nv) {
        struct source *v = realloc(s->v, s->names.n * sizeof *v);
        if (!v)
            return NULL;
        memset(v + s->nv, 0, (s->names.n - s->nv) * sizeof *v);
        s->v = v;
        s->nv = s->names.n;
    }
    if (index)
        *index = (size_t)i;
    return &s->v[i];
}

/* Note filename, shown by a sample of process pid, to be read (once). */
static void note(struct rec_sources *s, const char *filename, int pid)
{
    if (filename[0] == '<' || filename[0] == '\0')
        return; /* never a file */
    size_t i;
    struct source *e = entry(s, filename, &i);
    if (!e || e->state != SRC_UNSEEN)
        return; /* out of memory (read when the pages are written), or seen */
    if (util_array_reserve((void **)&s->queue, &s->qcap, s->qlen + 1, sizeof *s->queue) < 0)
        return;
    e = &s->v[i];
    e->state = SRC_NOTED;
    e->view = view_of(s, pid);
    s->queue[s->qlen++] = (uint32_t)i;
}

/* Read file i now: kept within the bound (with keep), and recorded. 0, or
 * PYS_E_NOMEM (the recording's). */
static int take(struct rec_sources *s, size_t i)
{
    struct source *e = &s->v[i];
    const struct view *w = &s->views[e->view];
    const char *name = s->names.v[i].s;
    size_t len = 0;
    uint64_t mtime = 0;
    char *text = read_text(w, name, &len, &mtime, e->why, sizeof e->why);
    if (!text) {
        e->state = SRC_FAILED;
        return s->bin ? rec_bin_source(s->bin, name, NULL, 0, e->why, 0, 0) : 0;
    }
    e->state = SRC_READ;
    e->len = len;
    e->mtime = mtime;
    e->changed = w->start_ns && mtime > w->start_ns ? OUT_REC_SRC_CHANGED : OUT_REC_SRC_AS_READ;
    int rc = s->bin ? rec_bin_source(s->bin, name, text, len, NULL, e->changed, 0) : 0;
    if (s->keep && s->kept + len <= MAX_KEPT) {
        s->kept += len;
        e->text = text;
    } else {
        free(text); /* read again when the pages are written */
    }
    return rc;
}

/* Read up to n of the files noted. 0, or as take. */
static int read_noted(struct rec_sources *s, size_t n)
{
    int rc = 0;
    for (size_t k = 0; k < n && s->qhead < s->qlen && rc == 0; k++)
        rc = take(s, s->queue[s->qhead++]);
    if (s->qhead == s->qlen)
        s->qhead = s->qlen = 0;
    return rc;
}

/* Note the files of profile p's nodes added since the last call. */
static void note_nodes(struct rec_sources *s, const pys_profile *p, int pid)
{
    size_t n = pys_profile_nodes(p);
    for (; s->seen < n; s->seen++) {
        const struct pys_frame *fr =
            pys_profile_frame(p, pys_profile_node(p, (uint32_t)s->seen)->frame);
        if (!fr || fr->kind != PYS_FRAME_PYTHON || !fr->filename || fr->filename == s->last)
            continue;
        s->last = fr->filename;
        note(s, fr->filename, pid);
    }
}

int rec_sources_sample(void *ctx, const struct rec_sample *smp)
{
    struct rec_sources *s = ctx;
    int pid = smp->s ? pys_session_pid(smp->s) : 0;
    if (smp->into)
        note_nodes(s, smp->into, pid);
    for (size_t n = s->bin ? rec_bin_files(s->bin) : 0; s->bin_seen < n; s->bin_seen++)
        note(s, rec_bin_file(s->bin, s->bin_seen), pid);
    return read_noted(s, READS_PER_SAMPLE);
}

/* Was the file read at sampling time through w changed since (or
 * removed)? */
static int changed_since_read(const struct view *w, const char *filename, uint64_t mtime)
{
    struct stat sb;
    int fd = open_in_view(w, filename);
    if (fd < 0)
        return 1;
    int changed = fstat(fd, &sb) != 0 || mtime_ns(&sb) != mtime;
    close(fd);
    return changed;
}

void rec_sources_finish(struct rec_sources *s)
{
    if (!s)
        return;
    read_noted(s, SIZE_MAX);
    for (size_t i = 0; i < s->nv; i++) {
        struct source *e = &s->v[i];
        if (e->state != SRC_READ || e->changed != OUT_REC_SRC_AS_READ ||
            !changed_since_read(&s->views[e->view], s->names.v[i].s, e->mtime))
            continue;
        e->changed = OUT_REC_SRC_CHANGED_SINCE;
        if (s->bin)
            rec_bin_source(s->bin, s->names.v[i].s, NULL, 0, NULL, e->changed, 1);
    }
}

int rec_sources_put(struct rec_sources *s, const struct out_rec_source *src)
{
    struct source *e = entry(s, src->filename, NULL);
    if (!e)
        return PYS_E_NOMEM;
    if (src->mark_only) {
        if (e->state == SRC_READ)
            e->changed = src->changed;
        return 0;
    }
    if (e->state != SRC_UNSEEN)
        return 0; /* the first one stands */
    if (!src->text) {
        e->state = SRC_FAILED;
        snprintf(e->why, sizeof e->why, "%s", src->why ? src->why : "");
        return 0;
    }
    if (s->kept + src->len > MAX_KEPT)
        return 0; /* read when the pages are written, from this machine */
    char *text = malloc(src->len ? src->len : 1);
    if (!text)
        return PYS_E_NOMEM;
    if (src->len)
        memcpy(text, src->text, src->len);
    s->kept += src->len;
    *e = (struct source){.state = SRC_READ, .text = text, .len = src->len, .changed = src->changed};
    return 0;
}

void rec_sources_get(void *ctx, const char *filename, struct out_source *out)
{
    struct rec_src_read *c = ctx;
    struct rec_sources *s = c->s;
    free(c->buf);
    c->buf = NULL;
    out->text = NULL;
    out->why = c->why;
    if (filename[0] == '<' || filename[0] == '\0') {
        snprintf(c->why, sizeof c->why, "not a file: frozen or generated code");
        return;
    }
    const struct source *e = s ? entry(s, filename, NULL) : NULL;
    if (e && e->state == SRC_FAILED) {
        out->why = e->why;
        return;
    }
    if (e && e->state == SRC_READ && e->text) {
        out->text = e->text;
        out->len = e->len;
        out->changed = e->changed;
        return;
    }
    /* Not read while sampling, or not kept: read now, marked if modified
     * after its process started. */
    static const struct view here = {.root_fd = -1, .cwd_fd = -1};
    const struct view *w = !s                            ? &here
                           : e && e->state != SRC_UNSEEN ? &s->views[e->view]
                                                         : &s->views[0];
    size_t len = 0;
    uint64_t mtime = 0;
    if ((c->buf = read_text(w, filename, &len, &mtime, c->why, sizeof c->why))) {
        out->text = c->buf;
        out->len = len;
        out->changed = w->start_ns && mtime > w->start_ns;
    }
}
