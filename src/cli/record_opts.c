/*
 * record_opts: the options of `pystrobe run` and `pystrobe attach`, and their
 * usage text.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/record.h"
#include "output/pstats.h"

const char *const rec_mode_names[] = {"wall", "cpu", "gil", "exception"};

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

/* "64M", "1G", "1.5GiB", "512k", "100000" (bytes) -> bytes, 1024-based;
 * 0 for "0"; negative if invalid. */
static int64_t parse_size(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v >= 0) || !isfinite(v))
        return -1;
    static const char units[] = "kmgt";
    const char *u = *end ? strchr(units, tolower((unsigned char)*end)) : NULL;
    if (u) {
        for (const char *x = units; x <= u; x++)
            v *= 1024;
        end++;
        if (*end == 'i' || *end == 'I')
            end++;
    }
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end != '\0' || v >= 9e18)
        return -1;
    return (int64_t)v;
}

static const char RUN_USAGE[] =
    "usage: pystrobe run [options] script.py [args...]\n"
    "       pystrobe run [options] -m module [args...]\n"
    "       pystrobe run [options] -- COMMAND [args...]\n"
    "       pystrobe attach [options] PID\n"
    "       pystrobe attach [options] -p PID\n"
    "\n"
    "Sampling:\n"
    "  -r, --sampling-rate RATE  samples per second: 10000, 10khz, 10k (default 1khz)\n"
    "  -d, --duration SECONDS    stop after this long (default: until the target exits)\n"
    "  -a, --all-threads         sample every thread (the default)\n"
    "      --main-thread-only    only each interpreter's main thread\n"
    "      --mode MODE           wall: every thread (default); cpu: threads the kernel\n"
    "                            shows running; gil: the thread holding the GIL;\n"
    "                            exception: threads raising or handling an exception\n"
    "      --native              native (C) frames between the Python frames, by symbol\n"
    "                            (py-spy's); stops every thread for each sample\n"
    "      --native-markers      a <native> frame where C code sits between Python frames\n"
    "      --no-gc               no <GC> frames (shown by default where the target\n"
    "                            publishes the collecting frame: CPython 3.15)\n"
    "      --realtime-stats      a live line: achieved rate, time per sample\n"
    "      --stats               read and cache counters at the end\n"
    "      --python PATH         (run) the interpreter for script.py / -m (default python3)\n"
    "      --detach              (run) when sampling ends before the command does (-d,\n"
    "                            a signal), leave the command running\n"
    "      --read-only           never write into the target. By default pystrobe keeps\n"
    "                            a frame cache on CPython 3.15+, which writes one field\n"
    "                            per thread (PyThreadState.last_profiled_frame)\n"
    "      --read-every-thread   read each thread at each sample. By default a thread\n"
    "                            that has not held the GIL since the last sample keeps\n"
    "                            the stack it had then, without a read\n"
    "      --max-memory SIZE     bound the profile's memory: 64M, 1G (default 512M; 0: none).\n"
    "                            Past it samples are still counted, new stacks folded\n"
    "                            into their deepest known caller\n"
    "      --max-frames N        frames kept of a stack, 16 to 1000000 (default 8192):\n"
    "                            a deeper one keeps its innermost N-1 over <truncated>\n"
    "Output:\n"
    "      --pstats              a table on stdout, or with -o a file pstats.Stats loads\n"
    "                            (the default)\n"
    "      --collapsed           folded stacks (default file collapsed_PID.txt)\n"
    "      --flamegraph          a self-contained HTML flame graph (flamegraph_PID.html)\n"
    "      --speedscope          speedscope's JSON format (profile_PID.speedscope.json)\n"
    "      --pprof               pprof's profile.proto, gzipped (profile_PID.pb.gz)\n"
    "      --heatmap             HTML pages of every source line's samples, in the\n"
    "                            directory -o names (default heatmap_PID)\n"
    "  -o, --output FILE         where to write\n"
    "      --sort KEY            pstats table: nsamples, tottime, cumtime, sample-pct,\n"
    "                            cumul-pct, nsamples-cumul, name (default nsamples)\n"
    "  -l, --limit N             pstats table rows (default 15)\n"
    "      --no-tid              collapsed: no tid:N root frame; threads merged\n"
    "Async-aware (CPython 3.14+):\n"
    "      --async-aware         stacks of asyncio tasks: a task's coroutine frames, a\n"
    "                            <task> frame naming it, then the task awaiting it, up\n"
    "                            to the root task, under the thread whose loop runs\n"
    "                            it (not with --native); in every output, --record,\n"
    "                            --live; --mode and --main-thread-only filter by thread\n"
    "      --async-mode MODE     running: the task each thread's loop runs at each sample\n"
    "                            (default); all: every task nobody awaits, each sample\n"
    "                            (not with the timelines --gecko, --chrometrace)\n"
    "Recording (docs/format.md; pystrobe replay turns it into any output):\n"
    "      --binary              the output is a recording of every sample\n"
    "                            (default file recording_PID.pysr)\n"
    "      --record FILE         a recording too, beside the output asked for\n"
    "      --compression C       the recording's: auto (zstd), zstd or none\n"
    "      --jsonl               JSON lines as CPython 3.15's profiler writes them\n"
    "                            (default file jsonl_PID.jsonl)\n"
    "      --jsonl-samples       with --jsonl: a record per sample too (time, threads)\n"
    "      --gecko               a Firefox Profiler profile (gecko_PID.json): a track per\n"
    "                            thread, real times, GIL/CPU/GC/exception markers\n"
    "Live view:\n"
    "      --live                a top-like view in the terminal instead of a file\n"
    "                            (h in it lists the keys); with -o FILE the profile\n"
    "                            is also written there at the end\n"
    "      --browser             open the HTML page once written (--flamegraph,\n"
    "                            --diff-flamegraph, --heatmap's index.html; each\n"
    "                            process's with --subprocesses): $BROWSER, else xdg-open\n"
    "      --no-summary          no statistics at the end (warnings are still shown)\n"
    "      --blocking            stop every thread of the target for each sample\n"
    "                            (ptrace): each sample is one moment, at the cost of\n"
    "                            stopping the program (--stats shows how long)\n"
    "Instructions:\n"
    "      --opcodes             the instruction each frame executes, named from the\n"
    "                            target's opcode table (BINARY_OP_ADD_INT (BINARY_OP)):\n"
    "                            counts per frame in the flame graph's tooltip, in\n"
    "                            recordings; one more read per thread and sample\n"
    "Options may follow attach's PID; everything after run's script (or -m module)\n"
    "is the script's.\n"
    "py-spy's names and habits:\n"
    "  -p, --pid PID             (attach) the process, as py-spy writes it\n"
    "      --gil                 the same as --mode gil\n"
    "      --function            one entry per function, not per line: each frame at\n"
    "                            its function's first line\n"
    "      --nolineno            no line numbers: one entry per function, and collapsed\n"
    "                            frames without :LINE\n"
    "      --idle                keep idle threads (the default in wall mode)\n"
    "      --no-idle             leave out threads the kernel does not show running\n"
    "      --svg                 an SVG flame graph (flamegraph_PID.svg)\n"
    "      --chrometrace         Chrome trace events, a timeline (chrometrace_PID.json)\n"
    "Processes:\n"
    "      --subprocesses        profile every Python process the target starts too\n"
    "                            (fork, multiprocessing, subprocess, through a shell),\n"
    "                            from its first milliseconds: a profile per process,\n"
    "                            named BASE_PID.EXT beside the main one (recordings\n"
    "                            too), and a table of the processes at the end; --live\n"
    "                            shows them all, each under a 'process PID COMMAND' row\n"
    "      --merge-processes     with --subprocesses: one profile (or recording), each\n"
    "                            stack under a 'process PID COMMAND' frame\n"
    "Comparing:\n"
    "      --diff-flamegraph BASELINE\n"
    "                            a flame graph coloured by the change in each\n"
    "                            function's self samples since BASELINE, a recording\n"
    "                            (--binary; diff_flamegraph_PID.html)\n";

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
    OPT_DETACH,
    OPT_MAX_MEMORY,
    OPT_MAX_FRAMES,
    OPT_SPEEDSCOPE,
    OPT_PPROF,
    OPT_HEATMAP,
    OPT_ASYNC_AWARE,
    OPT_ASYNC_MODE,
    /* recordings */
    OPT_BINARY,
    OPT_RECORD,
    OPT_COMPRESSION,
    OPT_JSONL,
    OPT_JSONL_SAMPLES,
    OPT_GECKO,
    OPT_LIVE,
    OPT_BROWSER,
    OPT_NO_SUMMARY,
    OPT_BLOCKING,
    OPT_GIL,
    OPT_FUNCTION,
    OPT_NOLINENO,
    OPT_IDLE,
    OPT_NO_IDLE,
    OPT_SVG,
    OPT_CHROMETRACE,
    OPT_OPCODES,
    /* --subprocesses */
    OPT_SUBPROCESSES,
    OPT_MERGE_PROCESSES,
    /* native stacks (issue 30) */
    OPT_NATIVE_MARKERS,
    OPT_DIFF_FLAMEGRAPH,
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
    {"detach", no_argument, NULL, OPT_DETACH},
    {"max-memory", required_argument, NULL, OPT_MAX_MEMORY},
    {"max-frames", required_argument, NULL, OPT_MAX_FRAMES},
    {"speedscope", no_argument, NULL, OPT_SPEEDSCOPE},
    {"pprof", no_argument, NULL, OPT_PPROF},
    {"heatmap", no_argument, NULL, OPT_HEATMAP},
    {"async-aware", no_argument, NULL, OPT_ASYNC_AWARE},
    {"async-mode", required_argument, NULL, OPT_ASYNC_MODE},
    {"binary", no_argument, NULL, OPT_BINARY},
    {"record", required_argument, NULL, OPT_RECORD},
    {"compression", required_argument, NULL, OPT_COMPRESSION},
    {"jsonl", no_argument, NULL, OPT_JSONL},
    {"jsonl-samples", no_argument, NULL, OPT_JSONL_SAMPLES},
    {"gecko", no_argument, NULL, OPT_GECKO},
    {"live", no_argument, NULL, OPT_LIVE},
    {"browser", no_argument, NULL, OPT_BROWSER},
    {"no-summary", no_argument, NULL, OPT_NO_SUMMARY},
    {"blocking", no_argument, NULL, OPT_BLOCKING},
    {"pid", required_argument, NULL, 'p'},
    {"gil", no_argument, NULL, OPT_GIL},
    {"function", no_argument, NULL, OPT_FUNCTION},
    {"nolineno", no_argument, NULL, OPT_NOLINENO},
    {"idle", no_argument, NULL, OPT_IDLE},
    {"no-idle", no_argument, NULL, OPT_NO_IDLE},
    {"svg", no_argument, NULL, OPT_SVG},
    {"chrometrace", no_argument, NULL, OPT_CHROMETRACE},
    {"opcodes", no_argument, NULL, OPT_OPCODES},
    {"subprocesses", no_argument, NULL, OPT_SUBPROCESSES},
    {"merge-processes", no_argument, NULL, OPT_MERGE_PROCESSES},
    {"native-markers", no_argument, NULL, OPT_NATIVE_MARKERS},
    {"diff-flamegraph", required_argument, NULL, OPT_DIFF_FLAMEGRAPH},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* The command whose --help the usage errors point to. */
static const char *usage_command = "run";

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("pystrobe: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(pystrobe %s --help for the options)\n", usage_command);
    return CLI_USAGE;
}

/* The values before any option. */
static void rec_defaults(struct rec *r, int attach)
{
    memset(r, 0, sizeof *r);
    r->attach = attach;
    r->rate_hz = 1000;
    r->gc = 1;
    r->tid = 1;
    r->sort = OUT_SORT_NSAMPLES;
    r->limit = 15;
    r->python = "python3";
    r->max_memory = PYS_PROFILE_MAX_MEMORY_DEFAULT;
    r->async_mode = PYS_TASKS_RUNNING;
}

/* --async-aware's companions and conflicts: -1, or the exit status. */
static int check_async(const struct rec *r)
{
    if (r->async_mode_set && !r->async_aware)
        return usage_error("%s", "--async-mode needs --async-aware");
    if (!r->async_aware)
        return -1;
    if (r->native)
        return usage_error("%s", "--async-aware cannot be combined with --native (task stacks "
                                 "are made of coroutine frames)");
    /* A timeline shows one stack per thread at each moment; all gives a
     * thread one stack per task at every sample. */
    if (r->async_mode == PYS_TASKS_ALL && (r->format == FMT_CHROMETRACE || r->format == FMT_GECKO))
        return usage_error("--async-mode all cannot be combined with --%s (a timeline has one "
                           "stack per thread at a time; use --async-mode running)",
                           r->format == FMT_GECKO ? "gecko" : "chrometrace");
    return -1;
}

/* --subprocesses' companions and conflicts: -1, or the exit status. */
static int check_subprocesses(const struct rec *r)
{
    if (r->merge_processes && !r->subprocesses)
        return usage_error("%s", "--merge-processes goes with --subprocesses");
    return -1;
}

/* The options that choose the output format. */
static const struct {
    int opt;
    enum format format;
} FORMAT_OPTS[] = {
    {OPT_PSTATS, FMT_PSTATS},
    {OPT_COLLAPSED, FMT_COLLAPSED},
    {OPT_FLAMEGRAPH, FMT_FLAMEGRAPH},
    {OPT_SPEEDSCOPE, FMT_SPEEDSCOPE},
    {OPT_PPROF, FMT_PPROF},
    {OPT_HEATMAP, FMT_HEATMAP},
    {OPT_JSONL, FMT_JSONL},
    {OPT_GECKO, FMT_GECKO},
    {OPT_SVG, FMT_SVG},
    {OPT_CHROMETRACE, FMT_CHROMETRACE},
};

/* An option that sets a field and takes no value: returns 1 if c is one
 * (r updated), else 0. */
static int set_flag_option(struct rec *r, int c)
{
    for (size_t i = 0; i < sizeof FORMAT_OPTS / sizeof FORMAT_OPTS[0]; i++)
        if (FORMAT_OPTS[i].opt == c) {
            r->format = FORMAT_OPTS[i].format;
            return 1;
        }
    switch (c) {
    case 'a': /* the default */
        break;
    case OPT_MAIN_ONLY:
        r->main_only = 1;
        break;
    case OPT_NATIVE:
        /* py-spy's --native: unwound from stopped threads. */
        r->native = r->native_stacks = 1;
        break;
    case OPT_NATIVE_MARKERS:
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
    case OPT_NO_TID:
        r->tid = 0;
        break;
    case OPT_READ_ONLY:
        r->read_only = 1;
        break;
    case OPT_EVERY_THREAD:
        r->every_thread = 1;
        break;
    case OPT_LIVE:
        r->live = 1;
        break;
    case OPT_DETACH:
        r->detach = 1;
        break;
    case OPT_ASYNC_AWARE:
        r->async_aware = 1;
        break;
    case OPT_BINARY:
        r->binary = 1;
        break;
    case OPT_JSONL_SAMPLES:
        r->jsonl_samples = 1;
        break;
    case OPT_BROWSER:
        r->browser = 1;
        break;
    case OPT_NO_SUMMARY:
        r->no_summary = 1;
        break;
    case OPT_BLOCKING:
        r->blocking = 1;
        break;
    case OPT_GIL:
        r->mode = MODE_GIL;
        break;
    case OPT_FUNCTION:
        r->line_mode = LINES_FUNCTION;
        break;
    case OPT_NOLINENO:
        r->line_mode = LINES_NONE;
        break;
    case OPT_IDLE:
        r->no_idle = 0;
        break;
    case OPT_NO_IDLE:
        r->no_idle = 1;
        break;
    case OPT_OPCODES:
        r->opcodes = 1;
        break;
    case OPT_SUBPROCESSES:
        r->subprocesses = 1;
        break;
    case OPT_MERGE_PROCESSES:
        r->merge_processes = 1;
        break;
    default:
        return 0;
    }
    return 1;
}

/* -d SECONDS: -1, or the exit status of a bad value. */
static int parse_duration(struct rec *r, const char *arg)
{
    char *end;
    double d = strtod(arg, &end);
    if (end == arg || *end || !(d > 0) || d > 1e7)
        return usage_error("bad duration '%s' (seconds)", arg);
    /* Rounded up: a duration shorter than a nanosecond is one, not 0 (which
     * means no limit). */
    r->duration_ns = (uint64_t)ceil(d * 1e9);
    if (r->duration_ns == 0)
        r->duration_ns = 1;
    return -1;
}

/* --mode MODE: -1, or the exit status of a bad value. */
static int parse_mode(struct rec *r, const char *arg)
{
    int found = -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(arg, rec_mode_names[i]) == 0)
            found = i;
    if (found < 0)
        return usage_error("bad mode '%s' (wall, cpu, gil, exception)", arg);
    r->mode = (enum mode)found;
    return -1;
}

/* Returned by set_value_option for an option it does not know. */
#define NOT_A_VALUE_OPTION (-2)

/* An option whose value sets a field: -1 (r updated), the exit status of a
 * bad value, or NOT_A_VALUE_OPTION. */
static int set_value_option(struct rec *r, int c, const char *arg)
{
    switch (c) {
    case 'r':
        r->rate_hz = parse_rate(arg);
        if (r->rate_hz <= 0)
            return usage_error("bad sampling rate '%s' (e.g. 10000, 10khz, 10k)", arg);
        return -1;
    case 'd':
        return parse_duration(r, arg);
    case OPT_MODE:
        return parse_mode(r, arg);
    case OPT_PYTHON:
        r->python = arg;
        return -1;
    case 'o':
        r->output = arg;
        return -1;
    case OPT_MAX_MEMORY: {
        int64_t v = parse_size(arg);
        if (v < 0)
            return usage_error("bad memory size '%s' (e.g. 64M, 1G)", arg);
        r->max_memory = (uint64_t)v;
        return -1;
    }
    case OPT_MAX_FRAMES:
        if (cli_parse_max_frames(arg, &r->max_frames) < 0)
            return usage_error("bad --max-frames '%s' (%d to %d)", arg, PYS_MAX_FRAMES_MIN,
                               PYS_MAX_FRAMES_MAX);
        return -1;
    case OPT_ASYNC_MODE:
        if (strcmp(arg, "running") == 0)
            r->async_mode = PYS_TASKS_RUNNING;
        else if (strcmp(arg, "all") == 0)
            r->async_mode = PYS_TASKS_ALL;
        else
            return usage_error("bad --async-mode '%s' (running, all)", arg);
        r->async_mode_set = 1;
        return -1;
    case OPT_RECORD:
        r->record_path = arg;
        return -1;
    case OPT_DIFF_FLAMEGRAPH:
        r->format = FMT_DIFF_FLAMEGRAPH;
        r->diff_baseline = arg;
        return -1;
    case OPT_COMPRESSION:
        r->compression_set = 1;
        if (strcmp(arg, "auto") == 0)
            r->compression = REC_COMPRESSION_AUTO;
        else if (strcmp(arg, "zstd") == 0)
            r->compression = REC_COMPRESSION_ZSTD;
        else if (strcmp(arg, "none") == 0)
            r->compression = REC_COMPRESSION_NONE;
        else
            return usage_error("bad compression '%s' (auto, zstd, none)", arg);
        return -1;
    case OPT_SORT:
        r->sort = out_pstats_sort_parse(arg);
        if (r->sort < 0)
            return usage_error("bad sort key '%s'", arg);
        return -1;
    case 'l': {
        char *end;
        long v = strtol(arg, &end, 10);
        if (end == arg || *end || v <= 0)
            return usage_error("bad limit '%s'", arg);
        r->limit = (size_t)v;
        return -1;
    }
    default:
        return NOT_A_VALUE_OPTION;
    }
}

/* The output options' companions and conflicts (run, attach and replay):
 * -1, or the exit status. */
static int check_outputs(const struct rec *r)
{
    if (r->jsonl_samples && r->format != FMT_JSONL)
        return usage_error("%s", "--jsonl-samples goes with --jsonl");
    if (r->browser && !rec_format_is_html(r->format))
        return usage_error("%s", "--browser opens an HTML output: use it with --flamegraph, "
                                 "--diff-flamegraph or --heatmap");
    if (r->format == FMT_DIFF_FLAMEGRAPH && !*r->diff_baseline)
        return usage_error("%s", "--diff-flamegraph needs a baseline recording");
    return -1;
}

/* run's command line for a script (module NULL) or `-m module`: python,
 * then args, capped at 4095 entries and NULL-terminated. The array is
 * static: r->argv points into it for the rest of the command. */
static char **python_argv(const char *python, const char *module, char **args, int nargs)
{
    static char *v[4096];
    int n = 0;
    v[n++] = (char *)python;
    if (module) {
        v[n++] = "-m";
        v[n++] = (char *)module;
    }
    for (int i = 0; i < nargs && n < 4095; i++)
        v[n++] = args[i];
    v[n] = NULL;
    return v;
}

/* Do paths a and b name one regular file (existing or to be made)? A
 * device such as /dev/null may take both outputs. */
static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) != 0)
        return strcmp(a, b) == 0;
    return S_ISREG(sa.st_mode) && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* After the options: the sampling interval, then attach's PID or run's
 * command (argv[first] on; module: -m's, or NULL). Returns -1 on success,
 * else an exit status. */
static int finish_args(struct rec *r, int argc, char **argv, int first, const char *module,
                       const char *pid_opt, int *pid)
{
    if (r->binary && r->record_path)
        return usage_error("%s", "--binary writes the recording to -o: not --record too");
    if (r->binary)
        r->record_path = r->output;
    if (r->compression_set && !r->binary && !r->record_path)
        return usage_error("%s", "--compression is for a recording (--binary, --record FILE)");
    if (!r->binary && r->record_path && r->output && same_file(r->record_path, r->output))
        return usage_error("-o and --record both name %s: the profile would replace the recording",
                           r->output);
    int bad = check_outputs(r);
    if (bad != -1)
        return bad;
    bad = check_async(r);
    if (bad == -1)
        bad = check_subprocesses(r);
    if (bad != -1)
        return bad;
    r->interval_ns = (uint64_t)(1e9 / r->rate_hz + 0.5);
    if (r->interval_ns == 0)
        r->interval_ns = 1;
    if (r->native_stacks && r->mode == MODE_CPU)
        return usage_error("%s", "--native stops every thread to unwind it, so none is ever seen "
                                 "running: not with --mode cpu");
    r->blocking |= r->native_stacks;
    if (r->blocking && r->mode == MODE_CPU)
        return usage_error("%s", "--blocking stops every thread, so none is ever seen running: "
                                 "not with --mode cpu");
    if (r->attach) {
        if (r->detach)
            return usage_error("%s", "--detach is for run");
        /* The PID as an argument, or as -p/--pid (py-spy's way). */
        if (first != argc - (pid_opt ? 0 : 1))
            return usage_error("%s", "attach needs exactly one process id");
        const char *arg = pid_opt ? pid_opt : argv[first];
        *pid = cli_parse_pid(arg);
        if (*pid < 0)
            return usage_error("not a process id: '%s'", arg);
        return -1;
    }
    if (pid_opt)
        return usage_error("%s", "-p/--pid is for attach");
    if (module) {
        r->argv = python_argv(r->python, module, argv + first, argc - first);
        return -1;
    }
    if (first >= argc)
        return usage_error("%s", "run needs a script, -m module, or -- COMMAND");
    if (first > 0 && strcmp(argv[first - 1], "--") == 0)
        r->argv = argv + first; /* a command */
    else
        r->argv = python_argv(r->python, NULL, argv + first, argc - first);
    return -1;
}

int rec_parse_args(struct rec *r, int argc, char **argv, int attach, int *pid)
{
    const char *module = NULL;  /* run -m MODULE args: python -m MODULE args */
    const char *pid_opt = NULL; /* attach -p PID */
    int c;
    rec_defaults(r, attach);
    optind = 1;
    opterr = 0; /* errors are said below, in pystrobe's words */
    /* '+': stop at the first non-option (the script and its arguments);
     * ':': a missing value is told apart from an unknown option. attach
     * goes on past its PID (`attach 1234 -d 5`): the operands are gathered
     * at the front of argv[optind..], in their order, for finish_args. */
    char *ops[8]; /* attach's operands */
    int nops = 0;
    for (;;) {
        if (module)
            break;
        c = getopt_long(argc, argv, "+:r:d:ao:l:hm:p:", LONG_OPTS, NULL);
        if (c == -1) {
            if (!r->attach || optind >= argc)
                break;
            /* after "--" every word is an operand; else this one is, and
             * options may follow it */
            int dashes = strcmp(argv[optind - 1], "--") == 0;
            do {
                if (nops == (int)(sizeof ops / sizeof ops[0]))
                    return usage_error("%s", "attach needs exactly one process id");
                ops[nops++] = argv[optind++];
            } while (dashes && optind < argc);
            if (dashes)
                break;
            continue;
        }
        if (set_flag_option(r, c))
            continue;
        int rc = set_value_option(r, c, optarg);
        if (rc == -1)
            continue;
        if (rc != NOT_A_VALUE_OPTION)
            return rc;
        if (c == 'h') {
            fputs(RUN_USAGE, stdout);
            return CLI_OK;
        }
        if (c == 'p') {
            pid_opt = optarg;
            continue;
        }
        if (c != 'm') {
            cli_bad_option(c, argv, LONG_OPTS);
            fputs("(pystrobe run --help for the options)\n", stderr);
            return CLI_USAGE;
        }
        if (r->attach)
            return usage_error("%s", "-m is for run");
        module = optarg; /* what follows is the module's arguments */
    }
    if (r->attach)
        return finish_args(r, nops, ops, 0, NULL, pid_opt, pid);
    return finish_args(r, argc, argv, optind, module, pid_opt, pid);
}

/* --- replay: the output options of run and attach, by the same code ------- */

/* The options that say what is written and how; the others say how to
 * sample, which a recording has already done. */
static int is_output_option(int c)
{
    for (size_t i = 0; i < sizeof FORMAT_OPTS / sizeof FORMAT_OPTS[0]; i++)
        if (FORMAT_OPTS[i].opt == c)
            return 1;
    switch (c) {
    case 'o':
    case 'l':
    case OPT_SORT:
    case OPT_NO_TID:
    case OPT_JSONL_SAMPLES:
    case OPT_BROWSER:
    case OPT_FUNCTION:
    case OPT_NOLINENO:
    case OPT_DIFF_FLAMEGRAPH:
        return 1;
    default:
        return 0;
    }
}

static const char REPLAY_HEAD[] =
    "usage: pystrobe replay [options] FILE\n"
    "\n"
    "Write a recording (pystrobe run/attach --binary or --record, or CPython 3.15's\n"
    "profiling.sampling --binary) in any output run and attach write, with their\n"
    "options:\n";

/* The option a line of RUN_USAGE describes ("  -o, --output FILE ...",
 * "      --pstats ..."): its getopt value, or 0 for any other line. */
static int usage_line_option(const char *line, size_t len)
{
    size_t i = 0;
    while (i < len && line[i] == ' ')
        i++;
    if (i != 2 && i != 6)
        return 0;
    const char *dd = i + 2 <= len ? strstr(line + i, "--") : NULL;
    if (!dd || dd >= line + len)
        return 0;
    size_t n = strcspn(dd + 2, " \n");
    for (const struct option *o = LONG_OPTS; o->name; o++)
        if (strlen(o->name) == n && strncmp(o->name, dd + 2, n) == 0)
            return o->val;
    return 0;
}

void rec_replay_usage(FILE *f)
{
    /* run's own lines for the options replay takes (with the lines that
     * continue them), so that the two texts cannot drift apart. */
    fputs(REPLAY_HEAD, f);
    int keep = 0;
    for (const char *p = RUN_USAGE; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) + 1 : strlen(p);
        int c = usage_line_option(p, len);
        if (c)
            keep = is_output_option(c);
        else if (strncmp(p, "          ", 10) != 0)
            keep = 0; /* a heading, or a line of prose */
        if (keep)
            fwrite(p, 1, len, f);
        p += len;
    }
}

int rec_parse_replay_args(struct rec *r, int argc, char **argv, const char **file)
{
    int c;
    rec_defaults(r, 0);
    usage_command = "replay";
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":r:d:ao:l:hm:p:", LONG_OPTS, NULL)) != -1) {
        if (c == 'h') {
            rec_replay_usage(stdout);
            return CLI_OK;
        }
        if (c == '?' || c == ':') {
            cli_bad_option(c, argv, LONG_OPTS);
            fputs("(pystrobe replay --help for the options)\n", stderr);
            return CLI_USAGE;
        }
        if (!is_output_option(c)) {
            const struct option *o = NULL;
            for (const struct option *x = LONG_OPTS; x->name && !o; x++)
                if (x->val == c)
                    o = x;
            return usage_error("--%s is an option of run and attach: a replay writes the "
                               "samples the recording holds",
                               o ? o->name : "?");
        }
        if (set_flag_option(r, c))
            continue;
        int rc = set_value_option(r, c, optarg);
        if (rc != -1)
            return rc == NOT_A_VALUE_OPTION ? CLI_USAGE : rc;
    }
    int bad = check_outputs(r);
    if (bad != -1)
        return bad;
    if (optind != argc - 1) {
        fprintf(stderr, "pystrobe: replay needs exactly one recording\n"
                        "(pystrobe replay --help for the options)\n");
        return CLI_USAGE;
    }
    *file = argv[optind];
    return -1;
}
