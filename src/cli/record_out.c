/*
 * record_out: what `run` and `attach` write at the end: the summary, --stats,
 * and the profile in the chosen format.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "cli/browser.h"
#include "cli/cli.h"
#include "cli/record.h"
#include "output/chrometrace.h"
#include "output/collapsed.h"
#include "output/flamegraph.h"
#include "output/heatmap.h"
#include "output/pprof.h"
#include "output/gecko.h"
#include "output/jsonl.h"
#include "output/pstats.h"
#include "output/speedscope.h"
#include "output/svg.h"

static const char *const FORMAT_NAMES[] = {"pstats",
                                           "collapsed stacks",
                                           "flame graph",
                                           "speedscope",
                                           "pprof profile",
                                           "heatmap",
                                           "JSON lines",
                                           "Firefox Profiler profile",
                                           "SVG flame graph",
                                           "Chrome trace",
                                           "differential flame graph"};

/* Write the profile in the chosen format to f. */
static int write_format(FILE *f, const struct rec *r, const pys_profile *p, const char *title)
{
    switch (r->format) {
    case FMT_COLLAPSED:
        return out_collapsed_write(f, p, r->tid);
    case FMT_FLAMEGRAPH:
        return out_flamegraph_write(f, p, title);
    case FMT_SPEEDSCOPE:
        return out_speedscope_write(f, p, title);
    case FMT_PPROF:
        return out_pprof_write(f, p, r->start_realtime_ns);
    case FMT_JSONL: /* fed by the sample stream (record_bin.c) */
        return out_jsonl_write(r->jsonl, f);
    case FMT_GECKO:
        return out_gecko_write(r->gecko, f);
    case FMT_SVG:
        return out_svg_write(f, p, title);
    case FMT_CHROMETRACE:
        return out_chrometrace_write(f, r->trace);
    case FMT_DIFF_FLAMEGRAPH:
        return out_flamegraph_write_diff(f, p, rec_baseline_profile(r->baseline), title,
                                         r->diff_baseline);
    default:
        return out_pstats_write_marshal(f, p);
    }
}

/*
 * Write the profile to f, flush it (and fsync if sync) and close f. Returns
 * 0 or a PYS_E code, with *err the errno of the first failure (0 if none is
 * known). The writers stop at the first fault of the stream and leave its
 * errno, which is taken before anything else can change it.
 */
static int write_stream(FILE *f, const struct rec *r, const pys_profile *p, const char *title,
                        int sync, int *err)
{
    errno = 0;
    int rc = write_format(f, r, p, title);
    int e = rc < 0 ? errno : 0;
    errno = 0;
    if (fflush(f) != 0 || ferror(f) || (sync && fsync(fileno(f)) != 0)) {
        rc = rc < 0 ? rc : PYS_E_IO;
        e = e ? e : errno;
    }
    errno = 0;
    if (fclose(f) != 0 && rc == 0) {
        rc = PYS_E_IO;
        e = errno;
    }
    *err = e;
    return rc;
}

static void write_failed(const char *path, int rc, int err)
{
    fprintf(stderr, "pystrobe: writing %s failed: %s\n", path,
            rc == PYS_E_NOMEM ? "out of memory"
            : err             ? strerror(err)
                              : "I/O error");
}

mode_t rec_new_file_mode(void)
{
    mode_t mask = umask(0);
    umask(mask);
    return 0666 & ~mask;
}

/* The default file name of the format ("collapsed.txt" without a pid). */
static void default_name(char *buf, size_t size, enum format fmt, int pid)
{
    static const char *const base[] = {"profile",    "collapsed",   "flamegraph",     "profile",
                                       "profile",    "heatmap",     "jsonl",          "gecko",
                                       "flamegraph", "chrometrace", "diff_flamegraph"};
    static const char *const ext[] = {"pstats", "txt",  "html",  "speedscope.json",
                                      "pb.gz",  "",     "jsonl", "json",
                                      "svg",    "json", "html"};
    const char *dot = *ext[fmt] ? "." : "";
    if (pid > 0)
        snprintf(buf, size, "%s_%d%s%s", base[fmt], pid, dot, ext[fmt]);
    else
        snprintf(buf, size, "%s%s%s", base[fmt], dot, ext[fmt]);
}

/* --- heatmap: a directory of pages --- */

/* Make directory path if it is not there; 0, or -1 with errno set. */
static int make_dir(const char *path)
{
    struct stat sb;
    if (mkdir(path, 0777) == 0)
        return 0;
    if (errno == EEXIST && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return 0;
    if (errno == EEXIST)
        errno = ENOTDIR;
    return -1;
}

/* --heatmap: -o's directory is made at once, so that one that cannot be
 * made fails before sampling; the default one (heatmap_PID) at the end. */
static int heatmap_prepare(struct rec_out *o, const struct rec *r, int pid)
{
    o->path = r->output;
    if (!o->path && pid > 0) {
        default_name(o->name, sizeof o->name, r->format, pid);
        o->path = o->name;
    }
    if (r->output && make_dir(r->output) != 0) {
        fprintf(stderr, "pystrobe: cannot make the directory %s: %s\n", r->output, strerror(errno));
        return CLI_ERROR;
    }
    return -1;
}

/* Write the heatmap into directory path; 0 or a PYS_E code (errno set). */
static int write_heatmap_dir(const char *path, const struct rec_out *o, const pys_profile *p,
                             const char *title, size_t *nfiles)
{
    if (make_dir(path) != 0)
        return PYS_E_IO;
    int dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return PYS_E_IO;
    struct rec_src_read c = {.s = o->sources};
    int rc = out_heatmap_write(dirfd, p, title, rec_sources_get, &c, nfiles);
    int e = errno;
    free(c.buf);
    close(dirfd);
    errno = e;
    return rc;
}

/* --heatmap's part of rec_write_output: the directory, or a fallback one. */
static int write_heatmap(struct rec_out *o, const pys_profile *p, const char *title, int pid)
{
    size_t nfiles = 0;
    int rc = write_heatmap_dir(o->path, o, p, title, &nfiles);
    if (rc == 0) {
        fprintf(stderr, "Wrote heatmap to %s\n  %zu source files; open %s/index.html\n", o->path,
                nfiles, o->path);
        rec_out_discard(o);
        return CLI_OK;
    }
    write_failed(o->path, rc, errno);
    const char *tmpdir = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/pystrobe_%d_XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp", pid);
    if (mkdtemp(path) && write_heatmap_dir(path, o, p, title, &nfiles) == 0) {
        fprintf(stderr, "pystrobe: wrote heatmap to %s/index.html instead\n", path);
        rec_out_discard(o);
        return CLI_FALLBACK;
    }
    rec_out_discard(o);
    fprintf(stderr, "pystrobe: no fallback directory could be written either: the profile is "
                    "lost\n");
    return CLI_ERROR;
}

int rec_tmp_open(const char *path, char *tmp, size_t size, int *anonymous)
{
    int n = snprintf(tmp, size, "%s.tmp.XXXXXX", path);
    *anonymous = 0;
    if (n < 0 || (size_t)n >= size) {
        tmp[0] = '\0';
        errno = ENAMETOOLONG;
        return -1;
    }
    /* Preferably a file without a name until the end (O_TMPFILE), so that
     * nothing is left behind if pystrobe is killed; else a named one. */
    char *slash = strrchr(tmp, '/');
    int fd;
    if (slash) {
        char keep = slash[1];
        slash[1] = '\0';
        fd = open(tmp, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
        slash[1] = keep;
    } else {
        fd = open(".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
    }
    if (fd >= 0) {
        *anonymous = 1;
        return fd;
    }
    if (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)
        fd = mkstemp(tmp);
    if (fd < 0) {
        int err = errno;
        tmp[0] = '\0';
        errno = err;
    }
    return fd;
}

int rec_tmp_name(int fd, char *tmp)
{
    char proc[64];
    size_t len = strlen(tmp);
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    for (unsigned k = 0; k < 100; k++) {
        snprintf(tmp + len - 6, 7, "%06u", (unsigned)((unsigned)getpid() * 131u + k) % 1000000u);
        if (linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) == 0)
            return 0;
        if (errno != EEXIST)
            return -1;
    }
    return -1;
}

int rec_out_prepare(struct rec_out *o, const struct rec *r, int pid)
{
    struct stat sb;
    char name[64];

    memset(o, 0, sizeof *o);
    o->fd = -1;
    if (r->format == FMT_HEATMAP)
        return heatmap_prepare(o, r, pid);
    if (r->format == FMT_PSTATS && !r->output) {
        o->to_stdout = 1;
        return -1;
    }
    o->path = r->output;
    if (!o->path && pid > 0) {
        default_name(o->name, sizeof o->name, r->format, pid);
        o->path = o->name;
    }
    const char *shown = o->path;
    if (!shown) { /* run: named after the Python process, found later */
        default_name(name, sizeof name, r->format, -1);
        shown = name;
    }
    if (o->path && stat(o->path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        /* /dev/stdout, a pipe, /dev/null: written in place at the end. */
        int err = S_ISDIR(sb.st_mode) ? EISDIR : access(o->path, W_OK) != 0 ? errno : 0;
        if (err) {
            fprintf(stderr, "pystrobe: cannot write to %s: %s\n", o->path, strerror(err));
            return CLI_ERROR;
        }
        o->in_place = 1;
        return -1;
    }
    o->fd = rec_tmp_open(shown, o->tmp, sizeof o->tmp, &o->anonymous);
    if (o->fd < 0) {
        fprintf(stderr, "pystrobe: cannot write to %s: %s\n", shown, strerror(errno));
        return CLI_ERROR;
    }
    return -1;
}

void rec_out_discard(struct rec_out *o)
{
    if (o->fd >= 0)
        close(o->fd);
    o->fd = -1;
    if (o->tmp[0] && !o->anonymous)
        unlink(o->tmp);
    o->tmp[0] = '\0';
}

/*
 * Write the profile through the temporary file made by rec_out_prepare and
 * rename it over o->path, so a full disk or a crash never leaves half a file
 * under the final name. A file it replaces keeps its mode; a new one gets
 * 0666 less the umask. 0 or a PYS_E code (*err as write_stream).
 */
static int write_renamed(struct rec_out *o, const struct rec *r, const pys_profile *p,
                         const char *title, int *err)
{
    struct stat sb;
    mode_t mode =
        stat(o->path, &sb) == 0 && S_ISREG(sb.st_mode) ? sb.st_mode & 07777 : rec_new_file_mode();
    FILE *f = NULL;
    int rc;

    /* f gets a copy of the descriptor: an anonymous file is named through
     * o->fd once written. */
    int fd = fchmod(o->fd, mode) == 0 ? dup(o->fd) : -1;
    if (fd < 0 || !(f = fdopen(fd, "wb"))) {
        *err = errno;
        if (fd >= 0)
            close(fd);
        rec_out_discard(o);
        return PYS_E_IO;
    }
    rc = write_stream(f, r, p, title, 1, err);
    if (rc == 0 && o->anonymous) {
        if (rec_tmp_name(o->fd, o->tmp) != 0) {
            rc = PYS_E_IO;
            *err = errno;
        } else {
            o->anonymous = 0;
        }
    }
    close(o->fd);
    o->fd = -1;
    if (rc == 0 && rename(o->tmp, o->path) != 0) {
        rc = PYS_E_IO;
        *err = errno;
    }
    if (rc < 0 && !o->anonymous)
        unlink(o->tmp);
    o->tmp[0] = '\0';
    return rc;
}

/*
 * Where the profile goes when its own path failed: a new file with the
 * target's pid in its name in $TMPDIR (else /tmp), or else in the current
 * directory. Returns an exit status.
 */
static int write_fallback(const struct rec *r, const pys_profile *p, const char *title, int pid)
{
    static const char *const ext[] = {".pstats", ".txt",  ".html",  ".speedscope.json",
                                      ".pb.gz",  "",      ".jsonl", ".json",
                                      ".svg",    ".json", ".html"};
    const char *tmpdir = getenv("TMPDIR");
    const char *dirs[] = {tmpdir && *tmpdir ? tmpdir : "/tmp", "."};
    char path[4096];
    int err;

    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        int n =
            snprintf(path, sizeof path, "%s/pystrobe_%d_XXXXXX%s", dirs[i], pid, ext[r->format]);
        if (n < 0 || (size_t)n >= sizeof path)
            continue;
        int fd = mkstemps(path, (int)strlen(ext[r->format]));
        if (fd < 0)
            continue;
        FILE *f = fchmod(fd, rec_new_file_mode()) == 0 ? fdopen(fd, "wb") : NULL;
        if (!f) {
            close(fd);
            unlink(path);
            continue;
        }
        if (write_stream(f, r, p, title, 1, &err) == 0) {
            fprintf(stderr, "pystrobe: wrote %s to %s instead\n", FORMAT_NAMES[r->format], path);
            return CLI_FALLBACK;
        }
        unlink(path);
    }
    fprintf(stderr, "pystrobe: no fallback file could be written either: the profile is lost\n");
    return CLI_ERROR;
}

/* Why the profile is empty, for the user. */
static void say_empty(const struct rec *r, const struct pys_profile_info *info, uint64_t unmatched)
{
    if (unmatched > 0) {
        char filter[64];
        snprintf(filter, sizeof filter, "--mode %s%s%s", rec_mode_names[r->mode],
                 r->main_only ? " --main-thread-only" : "", r->no_idle ? " --no-idle" : "");
        fprintf(stderr, "pystrobe: no thread matched %s in %llu samples: nothing written\n", filter,
                (unsigned long long)unmatched);
    } else if (info->samples == 0) {
        fprintf(stderr, "pystrobe: no sample was taken: nothing written\n");
    } else {
        fprintf(stderr, "pystrobe: no Python stack in %llu samples: nothing written\n",
                (unsigned long long)info->samples);
    }
}

static uint64_t tv_ns(struct timeval tv)
{
    return (uint64_t)tv.tv_sec * 1000000000u + (uint64_t)tv.tv_usec * 1000u;
}

/* Reads getrusage(RUSAGE_SELF): every thread of pystrobe (the live view's
 * too), none of a child `run` started. */
static void cost_now(struct rec_cost *c)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        c->user_ns = tv_ns(ru.ru_utime);
        c->sys_ns = tv_ns(ru.ru_stime);
    } else {
        c->user_ns = c->sys_ns = 0;
    }
}

void rec_cost_begin(struct rec_cost *c)
{
    cost_now(c);
}

void rec_cost_end(struct rec_cost *c)
{
    struct rec_cost end;
    cost_now(&end);
    c->user_ns = end.user_ns >= c->user_ns ? end.user_ns - c->user_ns : 0;
    c->sys_ns = end.sys_ns >= c->sys_ns ? end.sys_ns - c->sys_ns : 0;
}

void rec_print_summary(const struct pys_profile_info *info, double rate_hz,
                       const struct rec_cost *cost, int quiet)
{
    double secs = (double)info->duration_ns / 1e9;
    uint64_t expected = info->samples + info->missed;
    if (quiet)
        goto warnings;
    fprintf(stderr, "Captured %llu samples in %.2f seconds\n", (unsigned long long)info->samples,
            secs);
    fprintf(stderr, "Sample rate: %.2f samples/sec (requested %.0f)\n",
            secs > 0 ? (double)info->samples / secs : 0.0, rate_hz);
    fprintf(stderr, "Failed samples: %llu (%.2f%%)\n", (unsigned long long)info->failed,
            info->samples ? 100.0 * (double)info->failed / (double)info->samples : 0.0);
    fprintf(stderr, "Missed samples: %llu (%.2f%%)\n", (unsigned long long)info->missed,
            expected ? 100.0 * (double)info->missed / (double)expected : 0.0);
    double cpu = (double)(cost->user_ns + cost->sys_ns) / 1e9;
    fprintf(stderr, "Profiler CPU: %.3f s per second of profiling (%.2f s in %.2f s)\n",
            secs > 0 ? cpu / secs : 0.0, cpu, secs);
warnings:
    if (info->truncated > 0)
        fprintf(stderr, "Truncated samples: %llu (stacks deeper than %llu frames; --max-frames)\n",
                (unsigned long long)info->truncated, (unsigned long long)info->max_frames);
}

void rec_print_rereads(const pys_session *s)
{
    struct pys_stats st;
    pys_session_stats(s, &st);
    uint64_t n = st.thread_reads + st.thread_errors;
    if (n == 0)
        return;
    fprintf(stderr,
            "Re-read stacks: %llu of %llu (%.2f%%) changed while read and were read again, "
            "a little later\n",
            (unsigned long long)st.thread_rereads, (unsigned long long)n,
            100.0 * (double)st.thread_rereads / (double)n);
}

void rec_print_folded(const pys_profile *p, uint64_t max_memory)
{
    uint64_t folded = pys_profile_info_get(p)->folded;
    uint64_t all = pys_profile_node(p, 0)->total; /* thread stacks counted */
    if (!folded)
        return;
    /* The bound as --max-memory takes it: 64M, 1G, 1536K, or bytes. */
    char size[32];
    uint64_t v = max_memory;
    int u = -1;
    while (u < 3 && v >= 1024 && v % 1024 == 0) {
        v /= 1024;
        u++;
    }
    char unit[2] = {u < 0 ? '\0' : "KMGT"[u], '\0'};
    snprintf(size, sizeof size, "%llu%s", (unsigned long long)v, unit);
    fprintf(stderr,
            "Folded samples: %llu of %llu (%.2f%%): the profile reached --max-memory %s; "
            "stacks first seen past it are counted under their deepest known caller, as "
            "<folded at memory limit>\n",
            (unsigned long long)folded, (unsigned long long)all,
            all ? 100.0 * (double)folded / (double)all : 0.0, size);
}

void rec_print_stats(const char *title, const pys_session *s, const struct pys_profile_info *info,
                     const struct rec_cost *cost)
{
    struct pys_stats st;
    pys_session_stats(s, &st);
    double n = info->samples ? (double)info->samples : 1.0;
    double secs = (double)info->duration_ns / 1e9;
    uint64_t code = st.code_hits + st.code_misses;
    fprintf(stderr, "%s\n", title);
    fprintf(stderr, "  samples:            %llu (failed %llu, thread stacks unreadable %llu)\n",
            (unsigned long long)info->samples, (unsigned long long)info->failed,
            (unsigned long long)st.thread_errors);
    if (cost)
        fprintf(stderr,
                "  profiler CPU:       %.3f s user, %.3f s system (%.3f s per second, %.1f us "
                "per sample)\n",
                (double)cost->user_ns / 1e9, (double)cost->sys_ns / 1e9,
                secs > 0 ? (double)(cost->user_ns + cost->sys_ns) / 1e9 / secs : 0.0,
                (double)(cost->user_ns + cost->sys_ns) / 1e3 / n);
    fprintf(stderr,
            "  memory reads:       %llu system calls (%.1f per sample, %.1f pieces), "
            "%llu failed; %llu reads served from the batched prefetch\n",
            (unsigned long long)st.mem_reads, (double)st.mem_reads / n, (double)st.mem_pieces / n,
            (unsigned long long)st.mem_failures, (unsigned long long)st.mem_prefetched);
    fprintf(stderr, "  batched reads:      %llu, %llu of them paused midway (%.2f%%)\n",
            (unsigned long long)st.mem_batches, (unsigned long long)st.mem_batches_paused,
            st.mem_batches ? 100.0 * (double)st.mem_batches_paused / (double)st.mem_batches : 0.0);
    fprintf(stderr, "  bytes read:         %llu (%.0f per sample)\n",
            (unsigned long long)st.mem_bytes, (double)st.mem_bytes / n);
    fprintf(stderr, "  code object cache:  %llu hits, %llu misses (%.2f%% hits)\n",
            (unsigned long long)st.code_hits, (unsigned long long)st.code_misses,
            code ? 100.0 * (double)st.code_hits / (double)code : 0.0);
    fprintf(stderr,
            "  idle threads:       %llu thread stacks taken over from the sample before "
            "(their threads had not held the GIL since)\n",
            (unsigned long long)st.threads_reused);
    uint64_t walks = st.frame_cache_hits + st.frame_cache_partial_hits + st.frame_cache_misses;
    if (walks) {
        fprintf(stderr,
                "  frame cache:        %llu full hits, %llu partial hits, %llu misses "
                "(%.2f%% hits)\n",
                (unsigned long long)st.frame_cache_hits,
                (unsigned long long)st.frame_cache_partial_hits,
                (unsigned long long)st.frame_cache_misses,
                100.0 * (double)(st.frame_cache_hits + st.frame_cache_partial_hits) /
                    (double)walks);
        fprintf(stderr,
                "  frames:             %llu from the cache, %llu read; %llu anchor writes\n",
                (unsigned long long)st.frames_from_cache, (unsigned long long)st.frames_read,
                (unsigned long long)st.mem_writes);
        if (st.frame_cache_rests)
            fprintf(stderr,
                    "  frame cache rests:  %llu (most walks with it were torn: the stack "
                    "unwinds between samples)\n",
                    (unsigned long long)st.frame_cache_rests);
        if (st.frame_cache_other_writers)
            fprintf(stderr,
                    "  other profiler:     writes the frame cache anchor of %llu threads too: "
                    "left to it, %llu thread samples walked without the cache\n",
                    (unsigned long long)st.frame_cache_other_writers,
                    (unsigned long long)st.frame_cache_other_writer_walks);
    } else {
        fprintf(stderr, "  frame cache:        off (%s)\n",
                pys_session_python_version(s) < 0x030f0000 ? "needs CPython 3.15+" : "--read-only");
    }
    if (st.pauses)
        fprintf(stderr,
                "  stopped (--blocking): %.1f us per sample (mean), %.1f us at most; "
                "%.1f threads stopped per sample\n",
                (double)st.paused_ns / (double)st.pauses / 1e3, (double)st.paused_max_ns / 1e3,
                (double)st.paused_threads / (double)st.pauses);
}

int rec_trace_new(struct rec *r)
{
    static const enum out_trace_lines lines[] = {
        [LINES_EXACT] = OUT_TRACE_LINE_EXACT,
        [LINES_FUNCTION] = OUT_TRACE_LINE_FUNCTION,
        [LINES_NONE] = OUT_TRACE_LINE_NONE,
    };
    r->trace = out_chrometrace_new(-1, lines[r->line_mode], r->max_memory);
    return r->trace ? 0 : PYS_E_NOMEM;
}

int rec_trace_sample(void *ctx, const struct rec_sample *smp)
{
    const struct rec *r = ctx;
    struct out_chrometrace *tr = r->trace;
    if (!smp->snap) /* a failed sample: the stacks stand as they were */
        return 0;
    out_chrometrace_sample_begin(tr, smp->t_ns);
    int rc = 0;
    for (size_t i = 0; i < smp->snap->ninterps && rc == 0; i++) {
        const struct pys_interp *in = &smp->snap->interps[i];
        for (size_t k = 0; k < in->nthreads && rc == 0; k++) {
            const struct pys_thread *t = &in->threads[k];
            uint64_t id = t->host_id ? t->host_id : t->native_id;
            if ((!t->error && t->nframes == 0) || !rec_thread_matches(r, t))
                continue;
            /* Unread: its frames stay open, as a replay keeps them (the
             * recording's unread threads: record_bin.c's kept_threads). */
            if (t->error) {
                if (id)
                    out_chrometrace_thread_unread(tr, id);
                continue;
            }
            /* Named as the profile names it (record_loop.c's add_thread). */
            const char *name =
                smp->s && in->id == 0 ? pys_session_thread_name(smp->s, t->thread_id) : NULL;
            rc = out_chrometrace_thread(tr, id, name, t->frames, t->nframes);
        }
    }
    if (rc == 0)
        rc = out_chrometrace_sample_end(tr);
    if (rc < 0)
        fprintf(stderr, "pystrobe: out of memory for the trace: stopping\n");
    return rc;
}

int rec_write_output(const struct rec *r, struct rec_out *o, const pys_profile *p, int pid,
                     uint64_t unmatched)
{
    char title[512];
    int rc, err = 0;

    if (pys_profile_nodes(p) == 0 || pys_profile_node(p, 0)->total == 0) {
        /* No file: an empty pstats file is one pstats.Stats cannot load. */
        rec_out_discard(o);
        say_empty(r, pys_profile_info_get(p), unmatched);
        return CLI_NOSAMPLES;
    }
    if (o->to_stdout) {
        rc = out_pstats_write_table(stdout, p, r->sort, r->limit);
        if (fflush(stdout) != 0 || rc < 0) {
            fprintf(stderr, "pystrobe: writing the table failed: %s\n", strerror(errno));
            return CLI_ERROR;
        }
        return CLI_OK;
    }
    snprintf(title, sizeof title, "pystrobe: pid %d, %s mode", pid, rec_mode_names[r->mode]);
    if (!o->path) {
        default_name(o->name, sizeof o->name, r->format, pid);
        o->path = o->name;
    }
    if (r->format == FMT_HEATMAP)
        return write_heatmap(o, p, title, pid);
    if (o->in_place) {
        FILE *f = fopen(o->path, "wb");
        if (f) {
            rc = write_stream(f, r, p, title, 0, &err);
        } else {
            rc = PYS_E_IO;
            err = errno;
        }
    } else {
        rc = write_renamed(o, r, p, title, &err);
    }
    if (rc == 0) {
        fprintf(stderr, "Wrote %s to %s\n", FORMAT_NAMES[r->format], o->path);
        return CLI_OK;
    }
    write_failed(o->path, rc, err);
    return write_fallback(r, p, title, pid);
}

int rec_format_is_html(enum format format)
{
    return format == FMT_FLAMEGRAPH || format == FMT_DIFF_FLAMEGRAPH || format == FMT_HEATMAP;
}

void rec_open_browser(const struct rec *r, const char *path)
{
    if (!rec_format_is_html(r->format))
        return;
    if (r->format != FMT_HEATMAP) {
        cli_open_browser(path);
        return;
    }
    char page[4096];
    if ((size_t)snprintf(page, sizeof page, "%s/index.html", path) >= sizeof page) {
        fprintf(stderr, "pystrobe: --browser: path too long: %s\n", path);
        return;
    }
    cli_open_browser(page);
}
