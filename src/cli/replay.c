/*
 * replay: `pystrobe replay FILE [output options]`: a recording (--binary)
 * turned into any output. The options are run's output options, parsed by
 * record_opts.c. The samples go into a profile exactly as they went into
 * the live one (same threads, same frames, same order, the same memory
 * bound, the same --function/--nolineno rewriting), the outputs made from
 * the sample stream (--jsonl, --gecko, --chrometrace) get each sample as
 * the live sinks did, and everything is written by the same code as run's
 * (record_out.c), so the deterministic formats come out byte for byte as
 * sampling live would have written them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/record.h"
#include "output/chrometrace.h"
#include "output/gecko.h"
#include "output/jsonl.h"
#include "output/pstats.h"
#include "output/recording.h"
#include "output/tach.h"

struct replay {
    struct rec *r;
    FILE *spool; /* --jsonl-samples' scratch file */
    pys_profile *prof;
    struct out_rec_meta meta;
    char mode[32], version[64];
    int have_meta;
    struct out_rec_stats stats;
    int have_stats;
    uint64_t samples;
    int nomem;
    struct pys_frame *lines_buf; /* --function, --nolineno: a stack's rewritten frames */
    size_t lines_cap;
    struct rec_sources *sources; /* --heatmap: the recording's, or NULL */
};

static int on_meta(void *ctx, const struct out_rec_meta *m)
{
    struct replay *x = ctx;
    if (x->have_meta)
        return 0; /* the first one describes the run */
    x->meta = *m;
    snprintf(x->mode, sizeof x->mode, "%s", m->mode ? m->mode : "");
    snprintf(x->version, sizeof x->version, "%s",
             m->python_version_text ? m->python_version_text : "");
    x->have_meta = 1;
    pys_profile_set_max_memory(x->prof, m->max_memory);
    pys_profile_count_opcodes(x->prof, m->opcodes);
    x->r->start_realtime_ns = m->start_realtime_ns;
    if (x->r->trace)
        out_chrometrace_set_pid(x->r->trace, m->pid);
    if (x->r->format == FMT_GECKO && !(x->r->gecko = out_gecko_new(m))) {
        x->nomem = 1;
        return 1;
    }
    if (x->r->format == FMT_JSONL) {
        x->r->jsonl = out_jsonl_new(m, x->r->jsonl_samples, x->spool);
        if (!x->r->jsonl) {
            x->nomem = 1;
            return 1;
        }
    }
    return 0;
}

static int on_stats(void *ctx, const struct out_rec_stats *s)
{
    struct replay *x = ctx;
    x->stats = *s;
    x->have_stats = 1;
    return 0;
}

/* As record_loop.c's add_thread: each thread under pystrobe's id, its
 * own PID namespace's id beside it, its Python name (the last one given)
 * on it. Unread threads are not in the profile (the recording's STATS
 * count their samples as failed); the Chrome trace keeps their frames
 * open. */
static int on_sample(void *ctx, const struct out_rec_sample *s)
{
    struct replay *x = ctx;
    x->samples++;
    for (size_t i = 0; i < s->nthreads; i++) {
        const struct out_rec_thread *t = &s->threads[i];
        if (t->ns_id && pys_profile_thread_ns(x->prof, t->id) != t->ns_id &&
            pys_profile_set_thread_ns(x->prof, t->id, t->ns_id) < 0)
            goto nomem;
        if (t->name && pys_profile_thread_name(x->prof, t->id) != t->name &&
            pys_profile_set_thread_name(x->prof, t->id, t->name) < 0)
            goto nomem;
        /* The stack is looked through for a <GC> frame only when it holds
         * one (as live, only while a collection ran). */
        if (t->id && pys_profile_count_states(x->prof, t->id, t->status, t->frames,
                                              t->gc ? t->nframes : 0, 1) < 0)
            goto nomem;
        const struct pys_frame *frames = rec_frames_for_lines(
            x->r->line_mode, t->frames, t->nframes, &x->lines_buf, &x->lines_cap);
        if (!frames || pys_profile_add(x->prof, t->id, frames, t->nframes, 1) < 0)
            goto nomem;
    }
    /* As rec_trace_sample: a sample that failed as a whole leaves the
     * stacks as they stood. */
    if (x->r->trace && s->rc == 0) {
        out_chrometrace_sample_begin(x->r->trace, s->t_ns);
        for (size_t i = 0; i < s->nthreads; i++)
            if (out_chrometrace_thread(x->r->trace, s->threads[i].id, s->threads[i].name,
                                       s->threads[i].frames, s->threads[i].nframes) < 0)
                goto nomem;
        for (size_t i = 0; i < s->nunread; i++) /* their frames stay open */
            out_chrometrace_thread_unread(x->r->trace, s->unread[i].id);
        if (out_chrometrace_sample_end(x->r->trace) < 0)
            goto nomem;
    }
    if (x->r->jsonl && out_jsonl_sample(x->r->jsonl, s) < 0)
        goto nomem;
    if (x->r->gecko && out_gecko_sample(x->r->gecko, s) < 0)
        goto nomem;
    return 0;
nomem:
    x->nomem = 1;
    return 1;
}

/* A source the recording holds, for --heatmap. */
static int on_source(void *ctx, const struct out_rec_source *src)
{
    struct replay *x = ctx;
    if (rec_sources_put(x->sources, src) < 0) {
        x->nomem = 1;
        return 1;
    }
    return 0;
}

/* Map the file (read-only). 0, or an exit status after saying why (what:
 * "" or "baseline ", before the path). */
static int map_file(const char *what, const char *path, const uint8_t **data, size_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        fprintf(stderr, "pystrobe: cannot read %s%s: %s\n", what, path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return CLI_ERROR;
    }
    if (!S_ISREG(sb.st_mode)) {
        fprintf(stderr, "pystrobe: %s%s is not a regular file\n", what, path);
        close(fd);
        return CLI_ERROR;
    }
    *size = (size_t)sb.st_size;
    *data = (const uint8_t *)"";
    if (*size > 0) {
        void *p = mmap(NULL, *size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            fprintf(stderr, "pystrobe: cannot read %s%s: %s\n", what, path, strerror(errno));
            close(fd);
            return CLI_ERROR;
        }
        *data = p;
    }
    close(fd);
    return 0;
}

/* Everything a replay holds once its file is read: the profile, the
 * reader's info, the streamed outputs and the scratch file. */
static void replay_release(struct replay *x, struct out_rec_read_info *ri)
{
    pys_profile_free(x->prof);
    out_rec_read_info_release(ri);
    out_jsonl_free(x->r->jsonl);
    out_gecko_free(x->r->gecko);
    out_chrometrace_free(x->r->trace);
    rec_baseline_free(x->r->baseline);
    x->r->baseline = NULL;
    free(x->lines_buf);
    rec_sources_free(x->sources);
    if (x->spool)
        fclose(x->spool);
}

/* The profile's facts, as the live run had them at its end (or at the last
 * block a cut recording has); sets the mode of x->r from the recording's. */
static void profile_facts(struct replay *x)
{
    struct pys_profile_info *info = pys_profile_info(x->prof);
    info->pid = x->meta.pid;
    info->python_version = x->meta.python_version;
    info->interval_ns = x->meta.interval_ns;
    info->max_frames = x->meta.max_frames;
    x->r->mode = MODE_WALL;
    for (int i = 0; i < 4; i++)
        if (strcmp(x->mode, rec_mode_names[i]) == 0)
            x->r->mode = (enum mode)i;
    info->mode = rec_mode_names[x->r->mode];
    info->samples = x->samples;
    if (x->have_stats) {
        info->samples = x->stats.samples > x->samples ? x->stats.samples : x->samples;
        info->failed = x->stats.failed;
        info->missed = x->stats.missed;
        info->truncated = x->stats.truncated;
        info->duration_ns = x->stats.duration_ns;
    }
}

/* x made ready for r's replay: its profile, --jsonl-samples' scratch file,
 * --heatmap's sources. 0, or -1 (said why; nothing held). */
static int replay_init(struct replay *x, struct rec *r)
{
    memset(x, 0, sizeof *x);
    x->r = r;
    if (r->jsonl_samples && r->format == FMT_JSONL && !(x->spool = tmpfile())) {
        fprintf(stderr, "pystrobe: cannot make a scratch file: %s\n", strerror(errno));
        return -1;
    }
    x->prof = pys_profile_new();
    if (r->format == FMT_HEATMAP)
        x->sources = rec_sources_new(0, 1);
    if (!x->prof || (r->format == FMT_HEATMAP && !x->sources)) {
        fprintf(stderr, "pystrobe: out of memory\n");
        pys_profile_free(x->prof);
        rec_sources_free(x->sources);
        if (x->spool)
            fclose(x->spool);
        return -1;
    }
    return 0;
}

int cli_replay(int argc, char **argv)
{
    struct rec r;
    const char *file = NULL;
    int rc = rec_parse_replay_args(&r, argc, argv, &file);
    if (rc != -1)
        return rc;
    if (r.format == FMT_CHROMETRACE && rec_trace_new(&r) < 0) {
        fprintf(stderr, "pystrobe: out of memory\n");
        return CLI_ERROR;
    }
    if (r.diff_baseline && (rc = rec_baseline_load(&r)) != -1)
        return rc;
    const uint8_t *data;
    size_t size;
    if ((rc = map_file("", file, &data, &size)) != 0) {
        out_chrometrace_free(r.trace);
        return rc;
    }

    struct replay x;
    if (replay_init(&x, &r) < 0) {
        out_chrometrace_free(r.trace);
        return CLI_ERROR;
    }
    struct out_rec_reader_cb cb = {&x, on_meta, on_stats, on_sample, 1, NULL};
    if (x.sources) /* --heatmap */
        cb.source = on_source;
    struct out_rec_read_info ri;
    char err[512];
    /* CPython 3.15's own binary profiles too. */
    rc = out_tach_is(data, size) ? out_tach_read(data, size, &cb, &ri, err, sizeof err)
                                 : out_rec_read(data, size, &cb, &ri, err, sizeof err);
    if (size > 0)
        munmap((void *)data, size);
    int status = CLI_OK;
    if (x.nomem) {
        fprintf(stderr, "pystrobe: out of memory replaying %s\n", file);
        replay_release(&x, &ri);
        return CLI_ERROR;
    }
    int streamed = r.format == FMT_JSONL || r.format == FMT_GECKO;
    if (streamed && !r.jsonl && !r.gecko && rc == 0) {
        fprintf(stderr, "pystrobe: %s: the recording has no META record\n", file);
        rc = PYS_E_CORRUPT;
    }
    if (rc == PYS_E_VERSION || (rc < 0 && x.samples == 0 && !ri.cut) ||
        (streamed && !r.jsonl && !r.gecko)) {
        if (err[0])
            fprintf(stderr, "pystrobe: %s: %s\n", file, err);
        replay_release(&x, &ri);
        return CLI_ERROR;
    }
    if (rc < 0 && ri.cut) {
        fprintf(stderr,
                "pystrobe: %s: the recording was not finished (%s): using its %llu samples "
                "up to there\n",
                file, err, (unsigned long long)x.samples);
    } else if (rc < 0) {
        fprintf(stderr, "pystrobe: %s: %s: using the %llu samples before it\n", file, err,
                (unsigned long long)x.samples);
        status = CLI_ERROR;
    } else if (!ri.complete) {
        fprintf(stderr, "pystrobe: %s: the recording was not finished: using its %llu samples\n",
                file, (unsigned long long)x.samples);
    }

    profile_facts(&x);
    if (r.baseline && (rc = rec_baseline_check(&r, x.mode, x.meta.native, x.meta.gc)) != -1) {
        replay_release(&x, &ri);
        return rc;
    }
    fprintf(stderr, "Replayed %llu samples of process %d (Python %s, %s mode) from %s\n",
            (unsigned long long)x.samples, x.meta.pid, x.version[0] ? x.version : "?",
            rec_mode_names[r.mode], file);

    struct rec_out o;
    int pid = x.meta.pid > 0 ? x.meta.pid : 0;
    rc = rec_out_prepare(&o, &r, pid > 0 ? pid : -1);
    /* --heatmap: the sources as the recording holds them; a file it does
     * not hold is read from this machine's files as named (a relative name
     * from the current directory), marked if changed after the recording
     * started. */
    rec_sources_set_start(x.sources, r.start_realtime_ns);
    o.sources = x.sources;
    if (rc == -1)
        rc = rec_write_output(&r, &o, x.prof, pid, x.have_stats ? x.stats.unmatched : 0);
    if (r.browser && rc == CLI_OK && o.path)
        rec_open_browser(&r, o.path);
    replay_release(&x, &ri);
    return rc == CLI_OK ? status : rc;
}

/* --- --diff-flamegraph's baseline ----------------------------------------- */

struct rec_baseline {
    struct rec r; /* what the reader's callbacks look at: a plain profile */
    struct replay x;
    struct out_rec_read_info ri;
};

int rec_baseline_load(struct rec *r)
{
    const char *file = r->diff_baseline;
    const uint8_t *data;
    size_t size;
    char err[512] = "";
    int rc = map_file("baseline ", file, &data, &size);
    if (rc != 0)
        return rc;
    struct rec_baseline *b = calloc(1, sizeof *b);
    if (!b || !(b->x.prof = pys_profile_new())) {
        free(b);
        if (size > 0)
            munmap((void *)data, size);
        fprintf(stderr, "pystrobe: out of memory\n");
        return CLI_ERROR;
    }
    b->x.r = &b->r;
    b->r.format = FMT_PSTATS;
    struct out_rec_reader_cb cb = {&b->x, on_meta, on_stats, on_sample, 1, NULL};
    rc = out_tach_is(data, size) ? out_tach_read(data, size, &cb, &b->ri, err, sizeof err)
                                 : out_rec_read(data, size, &cb, &b->ri, err, sizeof err);
    if (size > 0)
        munmap((void *)data, size);
    r->baseline = b;
    const char *why = NULL;
    if (b->x.nomem)
        why = "out of memory";
    else if (rc < 0 && b->x.samples == 0)
        why = err[0] ? err : "not a recording";
    else if (pys_profile_nodes(b->x.prof) == 0 || pys_profile_node(b->x.prof, 0)->total == 0)
        why = "it holds no sample with a stack";
    if (why) {
        /* Refused before anything is started or attached. */
        fprintf(stderr, "pystrobe: baseline %s: %s: no comparison possible\n", file, why);
        rec_baseline_free(b);
        r->baseline = NULL;
        return CLI_ERROR;
    }
    if (rc < 0) /* a cut or damaged file: what could be read is the baseline */
        fprintf(stderr, "pystrobe: baseline %s: %s: using its %llu samples before it\n", file, err,
                (unsigned long long)b->x.samples);
    return -1;
}

int rec_baseline_check(const struct rec *r, const char *mode, int native, int gc)
{
    const struct replay *bx = &r->baseline->x;
    const char *file = r->diff_baseline;
    /* CPython's files say their mode; "all" is its name for wall over
     * every thread. */
    const char *bmode = strcmp(bx->mode, "all") == 0 ? "wall" : bx->mode;
    if (bmode[0] && strcmp(bmode, mode) != 0) {
        fprintf(stderr,
                "pystrobe: baseline %s was recorded in %s mode, this profile is in %s mode: "
                "no comparison possible\n",
                file, bmode, mode);
        return CLI_USAGE;
    }
    if (bx->have_meta && (bx->meta.native != native || bx->meta.gc != gc)) {
        fprintf(stderr,
                "pystrobe: baseline %s was recorded %s --native and %s <GC> frames, this "
                "profile %s and %s: no comparison possible\n",
                file, bx->meta.native ? "with" : "without", bx->meta.gc ? "with" : "without",
                native ? "with" : "without", gc ? "with" : "without");
        return CLI_USAGE;
    }
    return -1;
}

const pys_profile *rec_baseline_profile(const struct rec_baseline *b)
{
    return b->x.prof;
}

void rec_baseline_free(struct rec_baseline *b)
{
    if (!b)
        return;
    pys_profile_free(b->x.prof);
    out_rec_read_info_release(&b->ri);
    free(b->x.lines_buf);
    free(b);
}
