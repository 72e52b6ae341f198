/*
 * replay: `pystrobe replay FILE [output options]`: a recording (--binary)
 * turned into any output. The samples go into a profile exactly as they
 * went into the live one (same threads, same frames, same order, the same
 * memory bound), and the profile is written by the same code as `run`'s,
 * so the deterministic formats come out byte for byte as sampling live
 * would have written them.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/record.h"
#include "output/gecko.h"
#include "output/jsonl.h"
#include "output/pstats.h"
#include "output/recording.h"
#include "output/tach.h"

static const char REPLAY_USAGE[] =
    "usage: pystrobe replay [options] FILE\n"
    "\n"
    "Write a recording (pystrobe run/attach --binary) in another format.\n"
    "      --pstats              a table on stdout, or with -o a file pstats.Stats loads\n"
    "                            (the default)\n"
    "      --collapsed           folded stacks (default file collapsed_PID.txt)\n"
    "      --flamegraph          a self-contained HTML flame graph (flamegraph_PID.html)\n"
    "      --jsonl               JSON lines as CPython 3.15's profiler writes them\n"
    "      --jsonl-samples       with --jsonl: a record per sample too (time, threads)\n"
    "      --gecko               a Firefox Profiler profile (gecko_PID.json)\n"
    "  -o, --output FILE         where to write\n"
    "      --sort KEY            pstats table: as for run\n"
    "  -l, --limit N             pstats table rows (default 15)\n"
    "      --no-tid              collapsed: no tid:N root frame; threads merged\n";

enum {
    O_PSTATS = 256,
    O_COLLAPSED,
    O_FLAMEGRAPH,
    O_SORT,
    O_NO_TID,
    O_JSONL,
    O_JSONL_SAMPLES,
    O_GECKO
};

static const struct option LONG_OPTS[] = {
    {"pstats", no_argument, NULL, O_PSTATS},
    {"collapsed", no_argument, NULL, O_COLLAPSED},
    {"flamegraph", no_argument, NULL, O_FLAMEGRAPH},
    {"output", required_argument, NULL, 'o'},
    {"sort", required_argument, NULL, O_SORT},
    {"limit", required_argument, NULL, 'l'},
    {"no-tid", no_argument, NULL, O_NO_TID},
    {"jsonl", no_argument, NULL, O_JSONL},
    {"jsonl-samples", no_argument, NULL, O_JSONL_SAMPLES},
    {"gecko", no_argument, NULL, O_GECKO},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

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
 * on it. */
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
        if (t->id &&
            pys_profile_count_states(x->prof, t->id, t->status, t->frames, t->nframes, 1) < 0)
            goto nomem;
        if (pys_profile_add(x->prof, t->id, t->frames, t->nframes, 1) < 0)
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

static int parse(struct rec *r, int argc, char **argv, const char **file)
{
    int c;
    memset(r, 0, sizeof *r);
    r->tid = 1;
    r->sort = OUT_SORT_NSAMPLES;
    r->limit = 15;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:l:h", LONG_OPTS, NULL)) != -1) {
        switch (c) {
        case O_PSTATS:
            r->format = FMT_PSTATS;
            break;
        case O_COLLAPSED:
            r->format = FMT_COLLAPSED;
            break;
        case O_FLAMEGRAPH:
            r->format = FMT_FLAMEGRAPH;
            break;
        case O_NO_TID:
            r->tid = 0;
            break;
        case O_JSONL:
            r->format = FMT_JSONL;
            break;
        case O_JSONL_SAMPLES:
            r->jsonl_samples = 1;
            break;
        case O_GECKO:
            r->format = FMT_GECKO;
            break;
        case 'o':
            r->output = optarg;
            break;
        case O_SORT:
            r->sort = out_pstats_sort_parse(optarg);
            if (r->sort < 0) {
                fprintf(stderr, "pystrobe: bad sort key '%s'\n", optarg);
                return CLI_USAGE;
            }
            break;
        case 'l': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (end == optarg || *end || v <= 0) {
                fprintf(stderr, "pystrobe: bad limit '%s'\n", optarg);
                return CLI_USAGE;
            }
            r->limit = (size_t)v;
            break;
        }
        case 'h':
            fputs(REPLAY_USAGE, stdout);
            return CLI_OK;
        default:
            cli_bad_option(c, argv, LONG_OPTS);
            fputs("(pystrobe replay --help for the options)\n", stderr);
            return CLI_USAGE;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "pystrobe: replay needs exactly one recording\n"
                        "(pystrobe replay --help for the options)\n");
        return CLI_USAGE;
    }
    *file = argv[optind];
    return -1;
}

/* Map the file (read-only). 0, or an exit status after saying why. */
static int map_file(const char *path, const uint8_t **data, size_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        fprintf(stderr, "pystrobe: cannot read %s: %s\n", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return CLI_ERROR;
    }
    if (!S_ISREG(sb.st_mode)) {
        fprintf(stderr, "pystrobe: %s is not a regular file\n", path);
        close(fd);
        return CLI_ERROR;
    }
    *size = (size_t)sb.st_size;
    *data = (const uint8_t *)"";
    if (*size > 0) {
        void *p = mmap(NULL, *size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            fprintf(stderr, "pystrobe: cannot read %s: %s\n", path, strerror(errno));
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

int cli_replay(int argc, char **argv)
{
    struct rec r;
    const char *file = NULL;
    int rc = parse(&r, argc, argv, &file);
    if (rc != -1)
        return rc;
    const uint8_t *data;
    size_t size;
    if ((rc = map_file(file, &data, &size)) != 0)
        return rc;

    struct replay x;
    memset(&x, 0, sizeof x);
    x.r = &r;
    if (r.jsonl_samples && r.format == FMT_JSONL && !(x.spool = tmpfile())) {
        fprintf(stderr, "pystrobe: cannot make a scratch file: %s\n", strerror(errno));
        return CLI_ERROR;
    }
    x.prof = pys_profile_new();
    if (!x.prof) {
        fprintf(stderr, "pystrobe: out of memory\n");
        return CLI_ERROR;
    }
    struct out_rec_reader_cb cb = {&x, on_meta, on_stats, on_sample, 1};
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
    fprintf(stderr, "Replayed %llu samples of process %d (Python %s, %s mode) from %s\n",
            (unsigned long long)x.samples, x.meta.pid, x.version[0] ? x.version : "?",
            rec_mode_names[r.mode], file);

    struct rec_out o;
    int pid = x.meta.pid > 0 ? x.meta.pid : 0;
    rc = rec_out_prepare(&o, &r, pid > 0 ? pid : -1);
    if (rc == -1)
        rc = rec_write_output(&r, &o, x.prof, pid, x.have_stats ? x.stats.unmatched : 0);
    replay_release(&x, &ri);
    return rc == CLI_OK ? status : rc;
}
