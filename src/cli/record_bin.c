/*
 * record_bin: the recording (--binary, --record FILE), a consumer of the
 * sample stream. The sampling thread only encodes (output/recording.h);
 * a thread of its own compresses each block, writes it and syncs it, so a
 * block reaches the file at most about a second after its first sample and
 * a pystrobe killed at any point leaves a file readable up to its last
 * complete block (docs/format.md).
 *
 * The file is written under a temporary name (none where the file system
 * allows) in its directory, and takes its own name once a block holding a
 * thread stack is on disk: a run that fails to start, or records no stack,
 * leaves a file already at the path as it was.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "version.h" /* generated: PYS_VERSION */
#include "cli/record.h"
#include "output/chrometrace.h"
#include "output/gecko.h"
#include "output/jsonl.h"
#include "output/recording.h"
#include "util/array.h"

/* A block is cut once its first sample is this old, or at this many bytes
 * of records. */
#define BLOCK_NS 1000000000ull
#define BLOCK_BYTES ((size_t)8 << 20)
/* Blocks waiting for the writer thread; past this the sampler waits. */
#define QUEUE 8
#define ZSTD_LEVEL 9
/* The writer's error when another recorder put its file at the path
 * before this one's first stack was on disk. */
#define ANOTHER_WRITER (-2)

/* The threads of a snapshot the outputs keep, as an out_rec_sample's. */
struct kept {
    struct out_rec_thread *th;
    size_t n, cap;
};

struct rec_bin {
    const struct rec *r;
    char path[4096];
    int fd;
    /* The temporary file fd writes (its name in tmp, "" while anonymous
     * has it without one), until placed under path; a path that is not a
     * regular file (/dev/null, a pipe) is written in place, placed from
     * the start. */
    char tmp[4096];
    int anonymous;
    int placed;
    /* The regular file that was at path, locked (flock) until fd's file
     * replaces it, so that a second recorder to the path is refused; -1
     * if there was none. */
    int guard;
    int pending_stacks; /* the open block holds a thread stack */
    enum out_rec_compression comp;
    out_rec_enc *enc;
    uint64_t block_t; /* the first sample of the open block, 0: none */
    uint64_t start_ns;
    uint64_t unmatched;
    struct kept kept; /* a sample's threads */
    int failed;       /* the encoder ran out of memory */
    /* The writer thread and its queue. */
    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct out_rec_buf q[QUEUE];
    int qlast[QUEUE];   /* the file's last block */
    int qstacks[QUEUE]; /* the block holds a thread stack */
    size_t qhead, qn;
    int stop;
    int werr; /* errno of the first write failure, or ANOTHER_WRITER */
    int told;
    uint64_t bytes; /* written to the file */
};

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : EIO;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int place(struct rec_bin *b);

static void *writer_main(void *arg)
{
    struct rec_bin *b = arg;
    struct out_rec_buf packed = {0};
    out_rec_packer *k = out_rec_packer_new(b->comp, ZSTD_LEVEL);
    pthread_mutex_lock(&b->mu);
    for (;;) {
        while (b->qn == 0 && !b->stop)
            pthread_cond_wait(&b->cv, &b->mu);
        if (b->qn == 0)
            break;
        struct out_rec_buf raw = b->q[b->qhead];
        int last = b->qlast[b->qhead], stacks = b->qstacks[b->qhead];
        pthread_mutex_unlock(&b->mu);
        int err = 0;
        if (!k) {
            err = ENOMEM;
        } else if (!b->werr) {
            int rc = out_rec_block_pack(k, raw.p, raw.len, last, &packed);
            if (rc < 0)
                err = rc == PYS_E_NOMEM ? ENOMEM : EIO;
            else if ((err = write_all(b->fd, packed.p, packed.len)) == 0 && fdatasync(b->fd) != 0 &&
                     errno != EINVAL && errno != EROFS)
                err = errno;
            if (!err && stacks && !b->placed)
                err = place(b);
        }
        out_rec_buf_release(&raw);
        pthread_mutex_lock(&b->mu);
        if (err && !b->werr)
            b->werr = err;
        else if (!err)
            b->bytes += packed.len;
        b->qhead = (b->qhead + 1) % QUEUE;
        b->qn--;
        pthread_cond_broadcast(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
    out_rec_buf_release(&packed);
    out_rec_packer_free(k);
    return NULL;
}

/* Hand the records so far to the writer thread (waiting if its queue is
 * full). Returns the writer's error (errno), or 0. */
static int ship(struct rec_bin *b, int last)
{
    int stacks = b->pending_stacks;
    struct out_rec_buf raw;
    if (out_rec_enc_take(b->enc, &raw) < 0)
        return ENOMEM;
    pthread_mutex_lock(&b->mu);
    while (b->qn == QUEUE)
        pthread_cond_wait(&b->cv, &b->mu);
    b->q[(b->qhead + b->qn) % QUEUE] = raw;
    b->qlast[(b->qhead + b->qn) % QUEUE] = last;
    b->qstacks[(b->qhead + b->qn) % QUEUE] = stacks;
    b->qn++;
    int err = b->werr;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    b->block_t = 0;
    b->pending_stacks = 0;
    return err;
}

/* Lock the regular file at b->path, if there is one, into b->guard: 0
 * (b->guard -1 if there is no file), or -1 with errno set (EWOULDBLOCK:
 * another process records into it). A file replaced while it was locked
 * is looked at again. */
static int guard_path(struct rec_bin *b)
{
    for (int tries = 0; tries < 16; tries++) {
        struct stat held, now;
        int fd = open(b->path, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
            return errno == ENOENT ? 0 : -1;
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int err = errno;
            close(fd);
            errno = err;
            return -1;
        }
        if (fstat(fd, &held) == 0 && stat(b->path, &now) == 0 && held.st_dev == now.st_dev &&
            held.st_ino == now.st_ino) {
            b->guard = fd;
            return 0;
        }
        close(fd);
    }
    errno = EWOULDBLOCK;
    return -1;
}

/* Whether another process records into the file at path (holds its lock). */
static int path_locked(const char *path)
{
    int fd = open(path, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int locked = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);
    return locked;
}

/* Give the temporary file b->path, replacing what is there unless another
 * recorder has put its file there since (ANOTHER_WRITER). On the writer
 * thread, once a block holding a stack is on disk. 0, or an errno. */
static int place(struct rec_bin *b)
{
    if (b->guard < 0) {
        /* No file was there: link it, which fails if one is now. */
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", b->fd);
        int rc = b->anonymous ? linkat(AT_FDCWD, proc, AT_FDCWD, b->path, AT_SYMLINK_FOLLOW)
                              : link(b->tmp, b->path);
        if (rc == 0) {
            if (!b->anonymous)
                unlink(b->tmp);
            goto placed;
        }
        if (errno != EEXIST)
            return errno;
        if (path_locked(b->path))
            return ANOTHER_WRITER;
    }
    if (b->anonymous) {
        if (rec_tmp_name(b->fd, b->tmp) != 0)
            return errno;
        b->anonymous = 0;
    }
    if (rename(b->tmp, b->path) != 0) {
        int err = errno;
        unlink(b->tmp);
        return err;
    }
placed:
    b->placed = 1;
    b->tmp[0] = '\0';
    if (b->guard >= 0)
        close(b->guard);
    b->guard = -1;
    return 0;
}

/* Say why the recording cannot be made: err an errno of opening. */
static void say_open_error(const struct rec_bin *b, int err)
{
    if (err == EWOULDBLOCK)
        fprintf(stderr, "pystrobe: %s is being written by another process: not recording\n",
                b->path);
    else
        fprintf(stderr, "pystrobe: cannot write to %s: %s\n", b->path, strerror(err));
}

struct rec_bin *rec_bin_open(const struct rec *r, int pid)
{
    struct rec_bin *b = calloc(1, sizeof *b);
    if (!b) {
        fprintf(stderr, "pystrobe: out of memory\n");
        return NULL;
    }
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    b->r = r;
    b->fd = b->guard = -1;
    b->comp = r->compression == REC_COMPRESSION_NONE ? OUT_REC_NONE : OUT_REC_ZSTD;
    if (r->record_path)
        snprintf(b->path, sizeof b->path, "%s", r->record_path);
    else
        snprintf(b->path, sizeof b->path, "recording_%d.pysr", pid);
    /* One writer per file: a second pystrobe recording to the same path
     * (two attaches to one pid both name theirs recording_PID.pysr) is
     * refused, so that the first one's file is left whole: each holds the
     * lock of the file at the path, the one there before its own and then
     * its own. Not on a device or pipe (/dev/null), which many may write,
     * in place. */
    struct stat sb;
    if (stat(b->path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        b->fd = open(b->path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
        b->placed = 1;
    } else if (guard_path(b) == 0) {
        /* A file it replaces keeps its mode; a new one gets 0666 less the
         * umask, as the profile's. */
        mode_t mode = b->guard >= 0 && fstat(b->guard, &sb) == 0 ? sb.st_mode & 07777
                                                                  : rec_new_file_mode();
        b->fd = rec_tmp_open(b->path, b->tmp, sizeof b->tmp, &b->anonymous);
        if (b->fd >= 0 && (flock(b->fd, LOCK_EX | LOCK_NB) != 0 || fchmod(b->fd, mode) != 0)) {
            int err = errno;
            close(b->fd);
            b->fd = -1;
            errno = err;
        }
    }
    if (b->fd < 0) {
        say_open_error(b, errno);
        rec_bin_free(b);
        return NULL;
    }
    return b;
}

const char *rec_bin_path(const struct rec_bin *b)
{
    return b->path;
}

const struct out_rec_meta *rec_run_meta(struct rec *r, const pys_session *s, int pid)
{
    if (r->meta)
        return r->meta;
    struct out_rec_meta *m = malloc(sizeof *m);
    if (!m) {
        fprintf(stderr, "pystrobe: out of memory\n");
        return NULL;
    }
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    *m = (struct out_rec_meta){
        .pid = pid,
        .python_version = pys_session_python_version(s),
        .python_version_text = pys_session_python_version_text(s),
        .mode = rec_mode_names[r->mode],
        .tool = "pystrobe " PYS_VERSION,
        .interval_ns = r->interval_ns,
        .rate_hz = r->rate_hz,
        .start_realtime_ns = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec,
        .start_monotonic_ns = rec_now_ns(),
        .max_frames = r->max_frames ? r->max_frames : PYS_MAX_FRAMES_DEFAULT,
        .max_memory = r->max_memory,
        .native = r->native,
        .gc = r->gc,
        .main_only = r->main_only,
        .opcodes = r->opcodes,
    };
    r->meta = m;
    return m;
}

int rec_bin_start(struct rec_bin *b, const struct out_rec_meta *m)
{
    b->start_ns = m->start_monotonic_ns;
    uint8_t hdr[OUT_REC_FILE_HEADER];
    out_rec_file_header(hdr);
    int err = write_all(b->fd, hdr, sizeof hdr);
    if (err) {
        fprintf(stderr, "pystrobe: writing %s failed: %s\n", b->path, strerror(err));
        return CLI_ERROR;
    }
    b->bytes = sizeof hdr;
    b->enc = out_rec_enc_new();
    if (!b->enc || out_rec_enc_meta(b->enc, m) < 0) {
        fprintf(stderr, "pystrobe: out of memory\n");
        return CLI_ERROR;
    }
    if (pthread_create(&b->thread, NULL, writer_main, b) != 0) {
        fprintf(stderr, "pystrobe: cannot start the recording's writer thread\n");
        return CLI_ERROR;
    }
    b->thread_started = 1;
    return -1;
}

static void stats_of(const struct rec_bin *b, const struct pys_profile_info *info,
                     uint64_t duration_ns, int final, struct out_rec_stats *st)
{
    *st = (struct out_rec_stats){.samples = info->samples,
                                 .failed = info->failed,
                                 .missed = info->missed,
                                 .truncated = info->truncated,
                                 .unmatched = b->unmatched,
                                 .duration_ns = duration_ns,
                                 .final = final};
}

static int say_write_error(struct rec_bin *b, int err)
{
    if (!b->told && err == ANOTHER_WRITER)
        fprintf(stderr, "pystrobe: another process is recording into %s: stopping\n", b->path);
    else if (!b->told)
        fprintf(stderr, "pystrobe: writing %s failed: %s: stopping\n", b->path, strerror(err));
    b->told = 1;
    return PYS_E_IO;
}

static int kept_push(struct kept *k, const struct out_rec_thread *t)
{
    if (util_array_reserve((void **)&k->th, &k->cap, k->n + 1, sizeof *k->th) < 0)
        return -1;
    k->th[k->n++] = *t;
    return 0;
}

/* Append to k the threads of snap one pass keeps: with unread 0, those
 * with a stack (*stacks counts them) that rec_thread_matches keeps, with
 * their Python names as record_loop.c's add_thread gives them (the main
 * interpreter's threads, from session s); with unread 1, those it keeps
 * whose stack could not be read and that have an id. -1 if out of
 * memory. */
static int kept_pass(const struct rec *r, pys_session *s, const struct pys_snapshot *snap,
                     int unread, struct kept *k, size_t *stacks)
{
    for (size_t i = 0; i < snap->ninterps; i++) {
        const struct pys_interp *in = &snap->interps[i];
        for (size_t j = 0; j < in->nthreads; j++) {
            const struct pys_thread *t = &in->threads[j];
            uint64_t id = t->host_id ? t->host_id : t->native_id;
            if (unread ? !t->error || !id : t->error || t->nframes == 0)
                continue;
            *stacks += !unread;
            if (!rec_thread_matches(r, t))
                continue;
            const char *name =
                s && in->id == 0 && !unread ? pys_session_thread_name(s, t->thread_id) : NULL;
            struct out_rec_thread e = {.id = id,
                                       .ns_id = id != t->native_id ? t->native_id : 0,
                                       .name = name,
                                       .status = t->status,
                                       .nframes = t->nframes,
                                       .frames = t->frames};
            if (kept_push(k, &e) < 0)
                return -1;
        }
    }
    return 0;
}

/* The threads of snap (NULL: a failed sample) the outputs keep, as the
 * profile does, then its unread ones (kept_pass), into k (emptied first)
 * and out's threads and unread, which point into k. -1 if out of memory.
 * *unmatched counts a sample with stacks of which none was kept. */
static int kept_threads(const struct rec *r, pys_session *s, const struct pys_snapshot *snap,
                        struct kept *k, struct out_rec_sample *out, uint64_t *unmatched)
{
    size_t stacks = 0, n = 0;
    k->n = 0;
    if (snap && (kept_pass(r, s, snap, 0, k, &stacks) < 0 ||
                 (n = k->n, kept_pass(r, s, snap, 1, k, &stacks)) < 0))
        return -1;
    out->nthreads = n;
    out->threads = k->th;
    out->nunread = k->n - n;
    out->unread = k->th ? k->th + n : NULL;
    *unmatched += stacks > 0 && n == 0;
    return 0;
}

int rec_bin_sample(void *ctx, const struct rec_sample *smp)
{
    struct rec_bin *b = ctx;
    if (b->failed)
        return PYS_E_NOMEM;
    const struct pys_snapshot *snap = smp->snap;
    struct out_rec_sample s = {.t_ns = smp->t_ns, .rc = snap ? 0 : smp->rc};
    if (kept_threads(b->r, smp->s, snap, &b->kept, &s, &b->unmatched) < 0 ||
        out_rec_enc_sample(b->enc, &s) < 0)
        goto nomem;
    b->pending_stacks |= s.nthreads > 0;
    if (!b->block_t)
        b->block_t = smp->t_ns ? smp->t_ns : 1;
    if (smp->end_ns - b->block_t >= BLOCK_NS || out_rec_enc_pending(b->enc) >= BLOCK_BYTES) {
        struct out_rec_stats st;
        stats_of(b, smp->info, smp->end_ns - b->start_ns, 0, &st);
        if (out_rec_enc_stats(b->enc, &st) < 0)
            goto nomem;
        int err = ship(b, 0);
        if (err)
            return say_write_error(b, err);
    }
    return 0;
nomem:
    b->failed = 1;
    fprintf(stderr, "pystrobe: out of memory for the recording: stopping\n");
    return PYS_E_NOMEM;
}

size_t rec_bin_files(const struct rec_bin *b)
{
    return b->enc && !b->failed ? out_rec_enc_files(b->enc) : 0;
}

const char *rec_bin_file(const struct rec_bin *b, size_t i)
{
    return out_rec_enc_file(b->enc, i);
}

int rec_bin_source(struct rec_bin *b, const char *filename, const char *text, size_t len,
                   const char *why, int changed, int mark_only)
{
    if (!b->enc || b->failed)
        return 0; /* not started, or stopping (said) */
    int rc = mark_only ? out_rec_enc_source_mark(b->enc, filename, changed)
                       : out_rec_enc_source(b->enc, filename, text, len, why, changed);
    if (rc < 0) {
        b->failed = 1;
        fprintf(stderr, "pystrobe: out of memory for the recording: stopping\n");
    }
    return rc;
}

int rec_bin_finish(struct rec_bin *b, const struct pys_profile_info *info)
{
    int status = CLI_OK, last_err = 0;
    if (b->enc && !b->failed) {
        struct out_rec_stats st;
        stats_of(b, info, info->duration_ns, 1, &st);
        if (out_rec_enc_stats(b->enc, &st) < 0 || out_rec_enc_end(b->enc) < 0) {
            fprintf(stderr, "pystrobe: out of memory for the recording\n");
            status = CLI_ERROR;
        } else if (b->thread_started) {
            last_err = ship(b, 1);
        }
    }
    if (b->thread_started) {
        pthread_mutex_lock(&b->mu);
        b->stop = 1;
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
        pthread_join(b->thread, NULL);
    }
    /* The writer's error, else ship's own (the last block not taken). */
    if (b->werr || last_err) {
        say_write_error(b, b->werr ? b->werr : last_err);
        status = CLI_ERROR;
    }
    if (b->fd >= 0 && (fsync(b->fd) != 0 && errno != EINVAL && errno != EROFS)) {
        say_write_error(b, errno);
        status = CLI_ERROR;
    }
    if (b->fd >= 0 && close(b->fd) != 0 && status == CLI_OK) {
        say_write_error(b, errno);
        status = CLI_ERROR;
    }
    b->fd = -1;
    if (status == CLI_OK && !b->placed) {
        /* No stack recorded: the temporary file goes (rec_bin_free). */
        fprintf(stderr, "pystrobe: no thread stack recorded: %s not written\n", b->path);
        return CLI_NOSAMPLES;
    }
    if (status == CLI_OK)
        fprintf(stderr, "Wrote recording to %s (%llu bytes, %.1f bytes per sample)\n", b->path,
                (unsigned long long)b->bytes,
                info->samples ? (double)b->bytes / (double)info->samples : 0.0);
    return status;
}

void rec_bin_free(struct rec_bin *b)
{
    if (!b)
        return;
    if (b->thread_started && !b->stop) {
        pthread_mutex_lock(&b->mu);
        b->stop = 1;
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
        pthread_join(b->thread, NULL);
    }
    if (b->fd >= 0)
        close(b->fd);
    if (!b->placed && b->tmp[0] && !b->anonymous)
        unlink(b->tmp);
    if (b->guard >= 0)
        close(b->guard);
    out_rec_enc_free(b->enc);
    free(b->kept.th);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    free(b);
}

/* --- outputs fed by the sample stream (--jsonl, --gecko) ------------------ */

struct rec_stream_sink {
    struct rec *r;
    struct kept kept;
    uint64_t unmatched;
    FILE *spool;
};

static int stream_sample(void *ctx, const struct rec_sample *smp)
{
    struct rec_stream_sink *k = ctx;
    struct out_rec_sample s = {.t_ns = smp->t_ns, .rc = smp->snap ? 0 : smp->rc};
    int n = kept_threads(k->r, smp->s, smp->snap, &k->kept, &s, &k->unmatched);
    int rc = n < 0         ? PYS_E_NOMEM
             : k->r->gecko ? out_gecko_sample(k->r->gecko, &s)
                           : out_jsonl_sample(k->r->jsonl, &s);
    if (rc < 0)
        fprintf(stderr, "pystrobe: %s for the output: stopping\n",
                rc == PYS_E_NOMEM ? "out of memory" : "cannot write the scratch file");
    return rc;
}

int rec_stream_start(struct rec *r, const pys_session *s, int pid, struct rec_sinks *ks)
{
    if (r->format != FMT_JSONL && r->format != FMT_GECKO)
        return -1;
    const struct out_rec_meta *m = rec_run_meta(r, s, pid);
    if (!m || !(r->stream = calloc(1, sizeof *r->stream))) {
        fprintf(stderr, "pystrobe: out of memory\n");
        return CLI_ERROR;
    }
    r->stream->r = r;
    if (r->format == FMT_GECKO) {
        if (!(r->gecko = out_gecko_new(m))) {
            fprintf(stderr, "pystrobe: out of memory\n");
            return CLI_ERROR;
        }
        rec_sinks_add(ks, r->stream, stream_sample);
        return -1;
    }
    if (r->jsonl_samples && !(r->stream->spool = tmpfile())) {
        fprintf(stderr, "pystrobe: cannot make a scratch file: %s\n", strerror(errno));
        return CLI_ERROR;
    }
    r->jsonl = out_jsonl_new(m, r->jsonl_samples, r->stream->spool);
    if (!r->jsonl) {
        fprintf(stderr, "pystrobe: out of memory\n");
        return CLI_ERROR;
    }
    rec_sinks_add(ks, r->stream, stream_sample);
    return -1;
}

int rec_sinks_start(struct rec *r, const pys_session *s, int pid, struct rec_bin **bin,
                    struct rec_sinks *ks)
{
    /* The run's facts are made now, at the start, for every output: the
     * recording's META carries the same date as the profile. */
    const struct out_rec_meta *m = rec_run_meta(r, s, pid);
    if (!m)
        return CLI_ERROR;
    r->start_realtime_ns = m->start_realtime_ns;
    if (r->binary || r->record_path) {
        if (!*bin && !(*bin = rec_bin_open(r, pid)))
            return CLI_ERROR;
        int rc = rec_bin_start(*bin, m);
        if (rc != -1)
            return rc;
        rec_sinks_add(ks, *bin, rec_bin_sample);
    }
    int rc = rec_stream_start(r, s, pid, ks);
    if (rc != -1)
        return rc;
    if (r->format == FMT_CHROMETRACE) { /* from the sample stream, not the profile */
        if (!r->trace && rec_trace_new(r) < 0) {
            fprintf(stderr, "pystrobe: out of memory\n");
            return CLI_ERROR;
        }
        out_chrometrace_set_pid(r->trace, pid);
        rec_sinks_add(ks, r, rec_trace_sample);
    }
    return -1;
}

void rec_stream_free(struct rec *r)
{
    out_jsonl_free(r->jsonl);
    r->jsonl = NULL;
    out_gecko_free(r->gecko);
    r->gecko = NULL;
    out_chrometrace_free(r->trace);
    r->trace = NULL;
    if (r->stream) {
        if (r->stream->spool)
            fclose(r->stream->spool);
        free(r->stream->kept.th);
        free(r->stream);
        r->stream = NULL;
    }
    free(r->meta);
    r->meta = NULL;
}
