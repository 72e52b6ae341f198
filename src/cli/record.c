/*
 * record: `pystrobe run` and `pystrobe attach`: sample a process's stacks
 * at a fixed rate until it exits, the duration runs out or Ctrl-C, then write
 * the profile (pstats, collapsed stacks or a flame graph).
 *
 * Timing: deadlines are absolute (start + k * interval); the sampler sleeps
 * to each with clock_nanosleep, or spins when the interval is shorter than
 * twice the measured wake-up latency and than 50 us. A deadline passed by more than a whole
 * interval is counted as missed and skipped, never made up with a burst.
 *
 * Signals: the first SIGINT/SIGTERM ends sampling (the profile is written);
 * a second aborts at once. `run` starts the command in pystrobe's own process
 * group, so the terminal's Ctrl-C reaches it as it would without pystrobe.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pystrobe/pystrobe.h>

#include "cli/cli.h"
#include "output/collapsed.h"
#include "output/flamegraph.h"
#include "output/pstats.h"

enum format { FMT_PSTATS, FMT_COLLAPSED, FMT_FLAMEGRAPH };
enum mode { MODE_WALL, MODE_CPU, MODE_GIL, MODE_EXCEPTION };
static const char *const MODE_NAMES[] = {"wall", "cpu", "gil", "exception"};

struct rec {
    int attach; /* attach PID, else run */
    uint64_t interval_ns;
    double rate_hz;
    uint64_t duration_ns; /* 0 = until the end */
    int main_only;
    enum mode mode;
    int native, gc, realtime, stats, tid, read_only, every_thread;
    enum format format;
    const char *output;
    int sort;
    size_t limit;
    const char *python;
    char **argv; /* run: what to execute */
};

/* Why sampling ended. */
enum end { END_SIGNAL, END_DURATION, END_EXITED };

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    if (g_stop) {
        static const char msg[] = "\npystrobe: interrupted again: aborting\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
        _exit(130);
    }
    g_stop = 1;
}

static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t deadline)
{
    struct timespec ts = {(time_t)(deadline / 1000000000ull), (long)(deadline % 1000000000ull)};
    while (!g_stop && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static void spin_until(uint64_t deadline)
{
    while (!g_stop && now_ns() < deadline)
        ;
}

/* How late clock_nanosleep wakes up here: the median of a few short sleeps. */
static uint64_t wake_latency_ns(void)
{
    uint64_t v[9];
    for (int i = 0; i < 9; i++) {
        uint64_t t = now_ns() + 100000;
        sleep_until(t);
        uint64_t late = now_ns() - t;
        int j = i;
        while (j > 0 && v[j - 1] > late) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = late;
    }
    return v[4];
}

/* "10000", "10k", "10khz", "1mhz", "250hz", "1.5khz" -> Hz; <= 0 if invalid. */
static double parse_rate(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v > 0) || !isfinite(v))
        return -1;
    double mult = 1;
    if (strncasecmp(end, "k", 1) == 0) {
        mult = 1e3;
        end++;
    } else if (strncasecmp(end, "m", 1) == 0) {
        mult = 1e6;
        end++;
    }
    if (strcasecmp(end, "hz") == 0)
        end += 2;
    if (*end != '\0')
        return -1;
    v *= mult;
    /* Beyond 10 MHz the interval is below 100 ns: not a rate anyone can sample. */
    return v <= 1e7 ? v : -1;
}

static const char RUN_USAGE[] =
    "usage: pystrobe run [options] script.py [args...]\n"
    "       pystrobe run [options] -m module [args...]\n"
    "       pystrobe run [options] -- COMMAND [args...]\n"
    "       pystrobe attach [options] PID\n"
    "\n"
    "Sampling:\n"
    "  -r, --sampling-rate RATE  samples per second: 10000, 10khz, 10k (default 1khz)\n"
    "  -d, --duration SECONDS    stop after this long (default: until the target exits)\n"
    "  -a, --all-threads         sample every thread (the default)\n"
    "      --main-thread-only    only each interpreter's main thread\n"
    "      --mode MODE           wall: every thread (default); cpu: threads the kernel\n"
    "                            shows running; gil: the thread holding the GIL;\n"
    "                            exception: threads raising or handling an exception\n"
    "      --native              <native> frames where C code sits between Python frames\n"
    "      --no-gc               no <GC> frames (shown by default where the target\n"
    "                            publishes the collecting frame: CPython 3.15)\n"
    "      --realtime-stats      a live line: achieved rate, time per sample\n"
    "      --stats               read and cache counters at the end\n"
    "      --python PATH         (run) the interpreter for script.py / -m (default python3)\n"
    "      --read-only           never write into the target. By default pystrobe keeps\n"
    "                            a frame cache on CPython 3.15+, which writes one field\n"
    "                            per thread (PyThreadState.last_profiled_frame)\n"
    "      --read-every-thread   read each thread at each sample. By default a thread\n"
    "                            that has not held the GIL since the last sample keeps\n"
    "                            the stack it had then, without a read\n"
    "Output:\n"
    "      --pstats              a table on stdout, or with -o a file pstats.Stats loads\n"
    "                            (the default)\n"
    "      --collapsed           folded stacks (default file collapsed_PID.txt)\n"
    "      --flamegraph          a self-contained HTML flame graph (flamegraph_PID.html)\n"
    "  -o, --output FILE         where to write\n"
    "      --sort KEY            pstats table: nsamples, tottime, cumtime, sample-pct,\n"
    "                            cumul-pct, nsamples-cumul, name (default nsamples)\n"
    "  -l, --limit N             pstats table rows (default 15)\n"
    "      --no-tid              collapsed: no tid:N root frame; threads merged\n";

enum {
    OPT_MAIN_ONLY = 256,
    OPT_MODE,
    OPT_NATIVE,
    OPT_NO_GC,
    OPT_REALTIME,
    OPT_STATS,
    OPT_PYTHON,
    OPT_PSTATS,
    OPT_COLLAPSED,
    OPT_FLAMEGRAPH,
    OPT_SORT,
    OPT_NO_TID,
    OPT_READ_ONLY,
    OPT_EVERY_THREAD,
};

static const struct option LONG_OPTS[] = {
    {"sampling-rate", required_argument, NULL, 'r'},
    {"duration", required_argument, NULL, 'd'},
    {"all-threads", no_argument, NULL, 'a'},
    {"main-thread-only", no_argument, NULL, OPT_MAIN_ONLY},
    {"mode", required_argument, NULL, OPT_MODE},
    {"native", no_argument, NULL, OPT_NATIVE},
    {"no-gc", no_argument, NULL, OPT_NO_GC},
    {"realtime-stats", no_argument, NULL, OPT_REALTIME},
    {"stats", no_argument, NULL, OPT_STATS},
    {"python", required_argument, NULL, OPT_PYTHON},
    {"pstats", no_argument, NULL, OPT_PSTATS},
    {"collapsed", no_argument, NULL, OPT_COLLAPSED},
    {"flamegraph", no_argument, NULL, OPT_FLAMEGRAPH},
    {"output", required_argument, NULL, 'o'},
    {"sort", required_argument, NULL, OPT_SORT},
    {"limit", required_argument, NULL, 'l'},
    {"no-tid", no_argument, NULL, OPT_NO_TID},
    {"read-only", no_argument, NULL, OPT_READ_ONLY},
    {"read-every-thread", no_argument, NULL, OPT_EVERY_THREAD},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("pystrobe: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\n(pystrobe run --help for the options)\n", stderr);
    return CLI_USAGE;
}

/* Parse options; returns -1 on success, else an exit status. */
static int parse_args(struct rec *r, int argc, char **argv, int attach, int *pid)
{
    int c;
    memset(r, 0, sizeof *r);
    r->attach = attach;
    r->rate_hz = 1000;
    r->gc = 1;
    r->tid = 1;
    r->sort = OUT_SORT_NSAMPLES;
    r->limit = 15;
    r->python = "python3";
    optind = 1;
    /* '+': stop at the first non-option (the script and its arguments). */
    while ((c = getopt_long(argc, argv, "+r:d:ao:l:hm:", LONG_OPTS, NULL)) != -1) {
        switch (c) {
        case 'r':
            r->rate_hz = parse_rate(optarg);
            if (r->rate_hz <= 0)
                return usage_error("bad sampling rate '%s' (e.g. 10000, 10khz, 10k)", optarg);
            break;
        case 'd': {
            char *end;
            double d = strtod(optarg, &end);
            if (end == optarg || *end || !(d > 0) || d > 1e7)
                return usage_error("bad duration '%s' (seconds)", optarg);
            r->duration_ns = (uint64_t)(d * 1e9);
            break;
        }
        case 'a':
            break;
        case OPT_MAIN_ONLY:
            r->main_only = 1;
            break;
        case OPT_MODE: {
            int found = -1;
            for (int i = 0; i < 4; i++)
                if (strcmp(optarg, MODE_NAMES[i]) == 0)
                    found = i;
            if (found < 0)
                return usage_error("bad mode '%s' (wall, cpu, gil, exception)", optarg);
            r->mode = (enum mode)found;
            break;
        }
        case OPT_NATIVE:
            r->native = 1;
            break;
        case OPT_NO_GC:
            r->gc = 0;
            break;
        case OPT_REALTIME:
            r->realtime = 1;
            break;
        case OPT_STATS:
            r->stats = 1;
            break;
        case OPT_PYTHON:
            r->python = optarg;
            break;
        case OPT_PSTATS:
            r->format = FMT_PSTATS;
            break;
        case OPT_COLLAPSED:
            r->format = FMT_COLLAPSED;
            break;
        case OPT_FLAMEGRAPH:
            r->format = FMT_FLAMEGRAPH;
            break;
        case 'o':
            r->output = optarg;
            break;
        case OPT_NO_TID:
            r->tid = 0;
            break;
        case OPT_READ_ONLY:
            r->read_only = 1;
            break;
        case OPT_EVERY_THREAD:
            r->every_thread = 1;
            break;
        case OPT_SORT:
            r->sort = out_pstats_sort_parse(optarg);
            if (r->sort < 0)
                return usage_error("bad sort key '%s'", optarg);
            break;
        case 'l': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (end == optarg || *end || v <= 0)
                return usage_error("bad limit '%s'", optarg);
            r->limit = (size_t)v;
            break;
        }
        case 'm': {
            /* run -m MODULE args: python -m MODULE args */
            static char *mv[4096];
            int n = 0;
            if (r->attach)
                return usage_error("%s", "-m is for run");
            mv[n++] = (char *)r->python;
            mv[n++] = "-m";
            mv[n++] = optarg;
            for (int i = optind; i < argc && n < 4095; i++)
                mv[n++] = argv[i];
            mv[n] = NULL;
            r->argv = mv;
            goto done;
        }
        case 'h':
            fputs(RUN_USAGE, stdout);
            return CLI_OK;
        default:
            return usage_error("%s", "bad option");
        }
    }
done:
    r->interval_ns = (uint64_t)(1e9 / r->rate_hz + 0.5);
    if (r->interval_ns == 0)
        r->interval_ns = 1;
    if (r->attach) {
        if (optind != argc - 1)
            return usage_error("%s", "attach needs exactly one process id");
        *pid = cli_parse_pid(argv[optind]);
        if (*pid < 0)
            return usage_error("not a process id: '%s'", argv[optind]);
        return -1;
    }
    if (r->argv) { /* -m */
        r->argv[0] = (char *)r->python;
        return -1;
    }
    if (optind >= argc)
        return usage_error("%s", "run needs a script, -m module, or -- COMMAND");
    if (optind > 0 && strcmp(argv[optind - 1], "--") == 0) {
        r->argv = argv + optind; /* a command */
        return -1;
    }
    static char *sv[4096];
    int n = 0;
    sv[n++] = (char *)r->python;
    for (int i = optind; i < argc && n < 4095; i++)
        sv[n++] = argv[i];
    sv[n] = NULL;
    r->argv = sv;
    return -1;
}

/* --- run: start the command and find its Python process -------------------- */

static pid_t start_child(char **argv)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        execvp(argv[0], argv);
        fprintf(stderr, "pystrobe: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    return pid;
}

static int exit_status_of(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return CLI_ERROR;
}

/* End the child: it may already be on its way out (it got the terminal's
 * Ctrl-C too); otherwise SIGTERM, and SIGKILL if that is not enough. */
static void stop_child(pid_t child, pid_t python, int gently)
{
    int status;
    for (int step = 0; step < 3; step++) {
        uint64_t until = now_ns() + 2000000000ull;
        if (step == 1 || (step == 0 && !gently)) {
            if (python > 0 && python != child)
                kill(python, SIGTERM);
            kill(child, SIGTERM);
        } else if (step == 2) {
            if (python > 0 && python != child)
                kill(python, SIGKILL);
            kill(child, SIGKILL);
        }
        while (now_ns() < until) {
            if (waitpid(child, &status, WNOHANG) == child)
                return;
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
        }
    }
    waitpid(child, &status, 0);
}

/*
 * Attach to the child or, if it does not become Python itself (a shell
 * script that starts python), to its first descendant that does. Polls
 * until one attaches, an error is final, or the child exits.
 */
static int attach_child(pid_t child, const struct pys_options *opt, pys_session **out,
                        int *child_status, int *exited)
{
    char err[512];
    uint64_t start = now_ns();
    int said = 0;
    *exited = 0;
    while (!g_stop) {
        int status;
        if (waitpid(child, &status, WNOHANG) == child) {
            *exited = 1;
            *child_status = exit_status_of(status);
            return PYS_E_EXITED;
        }
        pid_t cand[64];
        int n = 0;
        cand[n++] = child;
        int more = pys_child_pids(child, 1, cand + 1, 63);
        if (more > 0)
            n += more;
        for (int i = 0; i < n; i++) {
            int rc = pys_session_attach(out, cand[i], opt, err, sizeof err);
            if (rc == 0)
                return 0;
            if (rc == PYS_E_PERM || rc == PYS_E_VERSION) {
                cli_report(rc, err);
                return rc;
            }
        }
        if (!said && now_ns() - start > 3000000000ull) {
            fprintf(stderr, "pystrobe: waiting for process %d to start Python...\n", (int)child);
            said = 1;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    return PYS_E_NOPROC;
}

/* --- sampling -------------------------------------------------------------- */

static int thread_matches(const struct rec *r, const struct pys_thread *t)
{
    if (r->main_only && !(t->status & PYS_THREAD_MAIN_THREAD))
        return 0;
    switch (r->mode) {
    case MODE_CPU:
        return (t->status & PYS_THREAD_ON_CPU) != 0;
    case MODE_GIL:
        return (t->status & PYS_THREAD_HAS_GIL) != 0;
    case MODE_EXCEPTION:
        return (t->status & PYS_THREAD_HAS_EXCEPTION) != 0;
    default:
        return 1;
    }
}

struct timing {
    uint64_t n, sum, min, max, last_print, window_n, window_start;
};

static void realtime_line(const struct timing *tm, uint64_t samples, uint64_t failed,
                          uint64_t now)
{
    double secs = (double)(now - tm->window_start) / 1e9;
    fprintf(stderr,
            "\r%8.1f samples/s  per sample: mean %.1f us, min %.1f us, max %.1f us  "
            "samples %llu, failed %llu   ",
            secs > 0 ? (double)tm->window_n / secs : 0.0,
            tm->n ? (double)tm->sum / (double)tm->n / 1e3 : 0.0, (double)tm->min / 1e3,
            (double)tm->max / 1e3, (unsigned long long)samples, (unsigned long long)failed);
}

/* Sample until the end; fill the profile and its info. */
static enum end sample_loop(const struct rec *r, pys_session *s, pys_profile *prof)
{
    struct pys_profile_info *info = pys_profile_info(prof);
    uint64_t interval = r->interval_ns;
    /* Spin only where sleeping cannot keep up: intervals shorter than twice
     * the wake-up latency, and never at 20 kHz or below (sleeping a little
     * late there costs nothing: deadlines are absolute). */
    int spin = interval < 50000 && interval < 2 * wake_latency_ns();
    uint64_t start = now_ns(), next = start;
    struct timing tm = {0, 0, UINT64_MAX, 0, start, 0, start};
    enum end why = END_SIGNAL;

    for (;;) {
        if (g_stop) {
            why = END_SIGNAL;
            break;
        }
        uint64_t t0 = now_ns();
        if (r->duration_ns && t0 - start >= r->duration_ns) {
            why = END_DURATION;
            break;
        }
        if (t0 < next) {
            if (spin)
                spin_until(next);
            else
                sleep_until(next);
            if (g_stop)
                continue;
            t0 = now_ns();
        }
        const struct pys_snapshot *snap;
        int rc = pys_session_snapshot(s, &snap);
        uint64_t t1 = now_ns();
        if (rc == PYS_E_EXITED) {
            why = END_EXITED;
            break;
        }
        info->samples++;
        if (rc < 0) {
            info->failed++;
        } else {
            int failed = 0;
            for (size_t i = 0; i < snap->ninterps; i++) {
                const struct pys_interp *in = &snap->interps[i];
                for (size_t k = 0; k < in->nthreads; k++) {
                    const struct pys_thread *t = &in->threads[k];
                    if (t->error) {
                        failed = 1;
                        continue;
                    }
                    if (t->nframes == 0 || !thread_matches(r, t))
                        continue;
                    if (pys_profile_add(prof, t->native_id, t->frames, t->nframes, 1) < 0) {
                        fprintf(stderr, "pystrobe: out of memory: stopping\n");
                        why = END_SIGNAL;
                        goto out;
                    }
                }
            }
            info->failed += (uint64_t)failed;
        }
        uint64_t dt = t1 - t0;
        tm.n++;
        tm.window_n++;
        tm.sum += dt;
        tm.min = dt < tm.min ? dt : tm.min;
        tm.max = dt > tm.max ? dt : tm.max;
        if (r->realtime && t1 - tm.last_print >= 250000000ull) {
            realtime_line(&tm, info->samples, info->failed, t1);
            tm.last_print = tm.window_start = t1;
            tm.window_n = 0;
        }
        next += interval;
        if (t1 >= next + interval) {
            uint64_t skip = (t1 - next) / interval;
            info->missed += skip;
            next += skip * interval;
        }
    }
out:
    if (r->realtime)
        fputc('\n', stderr);
    info->duration_ns = now_ns() - start;
    return why;
}

/* --- output ---------------------------------------------------------------- */

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
            rc == PYS_E_NOMEM ? "out of memory" : err ? strerror(err) : "I/O error");
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

static void print_summary(const struct pys_profile_info *info, double rate_hz)
{
    double secs = (double)info->duration_ns / 1e9;
    uint64_t expected = info->samples + info->missed;
    fprintf(stderr, "Captured %llu samples in %.2f seconds\n",
            (unsigned long long)info->samples, secs);
    fprintf(stderr, "Sample rate: %.2f samples/sec (requested %.0f)\n",
            secs > 0 ? (double)info->samples / secs : 0.0, rate_hz);
    fprintf(stderr, "Failed samples: %llu (%.2f%%)\n", (unsigned long long)info->failed,
            info->samples ? 100.0 * (double)info->failed / (double)info->samples : 0.0);
    fprintf(stderr, "Missed samples: %llu (%.2f%%)\n", (unsigned long long)info->missed,
            expected ? 100.0 * (double)info->missed / (double)expected : 0.0);
}

static void print_stats(const pys_session *s, const struct pys_profile_info *info)
{
    struct pys_stats st;
    pys_session_stats(s, &st);
    double n = info->samples ? (double)info->samples : 1.0;
    uint64_t code = st.code_hits + st.code_misses;
    fprintf(stderr, "Statistics:\n");
    fprintf(stderr, "  samples:            %llu (failed %llu, thread stacks unreadable %llu)\n",
            (unsigned long long)info->samples, (unsigned long long)info->failed,
            (unsigned long long)st.thread_errors);
    fprintf(stderr, "  memory reads:       %llu system calls (%.1f per sample, %.1f pieces), "
                    "%llu failed; %llu reads served from the batched prefetch\n",
            (unsigned long long)st.mem_reads, (double)st.mem_reads / n,
            (double)st.mem_pieces / n, (unsigned long long)st.mem_failures,
            (unsigned long long)st.mem_prefetched);
    fprintf(stderr, "  bytes read:         %llu (%.0f per sample)\n",
            (unsigned long long)st.mem_bytes, (double)st.mem_bytes / n);
    fprintf(stderr, "  code object cache:  %llu hits, %llu misses (%.2f%% hits)\n",
            (unsigned long long)st.code_hits, (unsigned long long)st.code_misses,
            code ? 100.0 * (double)st.code_hits / (double)code : 0.0);
    fprintf(stderr, "  idle threads:       %llu thread stacks taken over from the sample before "
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
        fprintf(stderr, "  frames:             %llu from the cache, %llu read; %llu anchor writes\n",
                (unsigned long long)st.frames_from_cache, (unsigned long long)st.frames_read,
                (unsigned long long)st.mem_writes);
    } else {
        fprintf(stderr, "  frame cache:        off (%s)\n",
                pys_session_python_version(s) < 0x030f0000 ? "needs CPython 3.15+"
                                                           : "--read-only");
    }
}

static int write_output(const struct rec *r, const pys_session *s, const pys_profile *p,
                        int pid)
{
    char name[256], title[512];
    const char *path = r->output;
    snprintf(title, sizeof title, "pystrobe: pid %d, %s mode", pid, MODE_NAMES[r->mode]);
    (void)s;
    if (r->format == FMT_PSTATS && !path) {
        int rc = out_pstats_write_table(stdout, p, r->sort, r->limit);
        if (fflush(stdout) != 0 || rc < 0) {
            fprintf(stderr, "pystrobe: writing the table failed: %s\n", strerror(errno));
            return CLI_ERROR;
        }
        return CLI_OK;
    }
    if (!path) {
        snprintf(name, sizeof name, r->format == FMT_COLLAPSED ? "collapsed_%d.txt"
                                                                : "flamegraph_%d.html",
                 pid);
        path = name;
    }
    int rc = write_file(path, r, p, title);
    if (rc == CLI_OK) {
        static const char *const what[] = {"pstats", "collapsed stacks", "flame graph"};
        fprintf(stderr, "Wrote %s to %s\n", what[r->format], path);
    }
    return rc;
}

int cli_record(int argc, char **argv, int attach)
{
    struct rec r;
    int pid = -1, status = CLI_OK;
    pid_t child = -1;
    pys_session *s = NULL;
    pys_profile *prof = NULL;
    char err[512];

    int rc = parse_args(&r, argc, argv, attach, &pid);
    if (rc != -1)
        return rc;
    struct pys_options opt = {.cpu_state = r.mode == MODE_CPU,
                              .native = r.native,
                              .gc = r.gc,
                              .frame_cache = !r.read_only,
                              .reuse_idle = !r.every_thread};
    prctl(PR_SET_TIMERSLACK, 1UL);
    install_signals();

    if (attach) {
        rc = pys_session_attach(&s, pid, &opt, err, sizeof err);
        if (rc < 0)
            return cli_report(rc, err);
    } else {
        int exited, child_status = 0;
        child = start_child(r.argv);
        if (child < 0) {
            fprintf(stderr, "pystrobe: fork failed: %s\n", strerror(errno));
            return CLI_ERROR;
        }
        rc = attach_child(child, &opt, &s, &child_status, &exited);
        if (rc < 0) {
            if (exited) {
                fprintf(stderr, "pystrobe: %s exited before Python started (status %d)\n",
                        r.argv[0], child_status);
                return child_status ? child_status : CLI_NOTPYTHON;
            }
            stop_child(child, -1, 0);
            return rc == PYS_E_PERM ? CLI_PERM : rc == PYS_E_VERSION ? CLI_VERSION : CLI_OK;
        }
        pid = pys_session_pid(s);
    }

    prof = pys_profile_new();
    if (!prof) {
        pys_session_free(s);
        fprintf(stderr, "pystrobe: out of memory\n");
        return CLI_ERROR;
    }
    struct pys_profile_info *info = pys_profile_info(prof);
    info->pid = pid;
    info->python_version = pys_session_python_version(s);
    info->interval_ns = r.interval_ns;
    info->mode = MODE_NAMES[r.mode];

    enum end why = sample_loop(&r, s, prof);
    print_summary(info, r.rate_hz);
    if (r.stats)
        print_stats(s, info);
    status = write_output(&r, s, prof, pid);

    if (child > 0) {
        int st;
        if (why == END_EXITED) {
            /* The target ended on its own: pass its status on. */
            if (waitpid(child, &st, 0) == child && status == CLI_OK)
                status = exit_status_of(st);
        } else {
            stop_child(child, pid, why == END_SIGNAL);
        }
    }
    pys_profile_free(prof);
    pys_session_free(s);
    return status;
}
