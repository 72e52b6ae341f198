/*
 * record_out: what `run` and `attach` write at the end: the summary, --stats,
 * and the profile in the chosen format.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/record.h"
#include "output/collapsed.h"
#include "output/flamegraph.h"
#include "output/pstats.h"

/* Write the profile in the chosen format to f. */
static int write_format(FILE *f, const struct rec *r, const pys_profile *p, const char *title)
{
    switch (r->format) {
    case FMT_COLLAPSED:
        return out_collapsed_write(f, p, r->tid);
    case FMT_FLAMEGRAPH:
        return out_flamegraph_write(f, p, title);
    default:
        return out_pstats_write_marshal(f, p);
    }
}

static int write_failed(const char *path, int rc, int err)
{
    fprintf(stderr, "pystrobe: writing %s failed: %s\n", path,
            rc == PYS_E_NOMEM ? "out of memory"
            : err             ? strerror(err)
                              : "I/O error");
    return CLI_ERROR;
}

/*
 * Write the profile to path. A regular file (or a new one) is written under
 * a temporary name and renamed, so a full disk or a crash never leaves half a
 * file under the final name; anything else (/dev/stdout, a pipe, /dev/null)
 * is written in place.
 */
static int write_file(const char *path, const struct rec *r, const pys_profile *p,
                      const char *title)
{
    struct stat sb;
    char tmp[4096];
    FILE *f = NULL;
    int rc, err;

    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        f = fopen(path, "wb");
        if (!f)
            return write_failed(path, PYS_E_IO, errno);
        rc = write_format(f, r, p, title);
        errno = 0;
        if (fflush(f) != 0 || ferror(f))
            rc = rc < 0 ? rc : PYS_E_IO;
        err = errno;
        if (fclose(f) != 0 && rc == 0) {
            rc = PYS_E_IO;
            err = errno;
        }
        return rc < 0 ? write_failed(path, rc, err) : CLI_OK;
    }
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        fprintf(stderr, "pystrobe: output path too long: %s\n", path);
        return CLI_ERROR;
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        fprintf(stderr, "pystrobe: cannot create %s: %s\n", tmp, strerror(errno));
        return CLI_ERROR;
    }
    fchmod(fd, 0644);
    f = fdopen(fd, "wb");
    if (!f) {
        err = errno;
        close(fd);
        unlink(tmp);
        return write_failed(path, PYS_E_IO, err);
    }
    rc = write_format(f, r, p, title);
    errno = 0;
    if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0)
        rc = rc < 0 ? rc : PYS_E_IO;
    err = errno;
    if (fclose(f) != 0 && rc == 0) {
        rc = PYS_E_IO;
        err = errno;
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        rc = PYS_E_IO;
        err = errno;
    }
    if (rc < 0) {
        unlink(tmp);
        return write_failed(path, rc, err);
    }
    return CLI_OK;
}

void rec_print_summary(const struct pys_profile_info *info, double rate_hz)
{
    double secs = (double)info->duration_ns / 1e9;
    uint64_t expected = info->samples + info->missed;
    fprintf(stderr, "Captured %llu samples in %.2f seconds\n", (unsigned long long)info->samples,
            secs);
    fprintf(stderr, "Sample rate: %.2f samples/sec (requested %.0f)\n",
            secs > 0 ? (double)info->samples / secs : 0.0, rate_hz);
    fprintf(stderr, "Failed samples: %llu (%.2f%%)\n", (unsigned long long)info->failed,
            info->samples ? 100.0 * (double)info->failed / (double)info->samples : 0.0);
    fprintf(stderr, "Missed samples: %llu (%.2f%%)\n", (unsigned long long)info->missed,
            expected ? 100.0 * (double)info->missed / (double)expected : 0.0);
    if (info->truncated > 0)
        fprintf(stderr, "Truncated samples: %llu (stacks deeper than %llu frames; --max-frames)\n",
                (unsigned long long)info->truncated, (unsigned long long)info->max_frames);
}

void rec_print_stats(const pys_session *s, const struct pys_profile_info *info)
{
    struct pys_stats st;
    pys_session_stats(s, &st);
    double n = info->samples ? (double)info->samples : 1.0;
    uint64_t code = st.code_hits + st.code_misses;
    fprintf(stderr, "Statistics:\n");
    fprintf(stderr, "  samples:            %llu (failed %llu, thread stacks unreadable %llu)\n",
            (unsigned long long)info->samples, (unsigned long long)info->failed,
            (unsigned long long)st.thread_errors);
    fprintf(stderr,
            "  memory reads:       %llu system calls (%.1f per sample, %.1f pieces), "
            "%llu failed; %llu reads served from the batched prefetch\n",
            (unsigned long long)st.mem_reads, (double)st.mem_reads / n, (double)st.mem_pieces / n,
            (unsigned long long)st.mem_failures, (unsigned long long)st.mem_prefetched);
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
    } else {
        fprintf(stderr, "  frame cache:        off (%s)\n",
                pys_session_python_version(s) < 0x030f0000 ? "needs CPython 3.15+" : "--read-only");
    }
}

int rec_write_output(const struct rec *r, const pys_profile *p, int pid)
{
    char name[256], title[512];
    const char *path = r->output;
    snprintf(title, sizeof title, "pystrobe: pid %d, %s mode", pid, rec_mode_names[r->mode]);
    if (r->format == FMT_PSTATS && !path) {
        int rc = out_pstats_write_table(stdout, p, r->sort, r->limit);
        if (fflush(stdout) != 0 || rc < 0) {
            fprintf(stderr, "pystrobe: writing the table failed: %s\n", strerror(errno));
            return CLI_ERROR;
        }
        return CLI_OK;
    }
    if (!path) {
        snprintf(name, sizeof name,
                 r->format == FMT_COLLAPSED ? "collapsed_%d.txt" : "flamegraph_%d.html", pid);
        path = name;
    }
    int rc = write_file(path, r, p, title);
    if (rc == CLI_OK) {
        static const char *const what[] = {"pstats", "collapsed stacks", "flame graph"};
        fprintf(stderr, "Wrote %s to %s\n", what[r->format], path);
    }
    return rc;
}
