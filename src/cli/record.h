/*
 * record: the parts of `pystrobe run` and `pystrobe attach`, one job a file:
 *
 *   record.c        the command: parse, attach or start, sample, write, end
 *   record_opts.c   options and usage
 *   record_loop.c   the sampling loop, its clock and its signals
 *   record_child.c  `run`'s child process: start, find its Python, stop
 *   record_procs.c  --subprocesses: the target's descendants, a target each
 *   record_out.c    the summary, --stats and the output files
 *
 * Private to src/cli.
 */
#ifndef PYSTROBE_CLI_RECORD_H
#define PYSTROBE_CLI_RECORD_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <pystrobe/pystrobe.h>

enum format {
    FMT_PSTATS,
    FMT_COLLAPSED,
    FMT_FLAMEGRAPH,
    FMT_SPEEDSCOPE,
    FMT_PPROF,
    FMT_HEATMAP,
    FMT_JSONL,
    FMT_GECKO,
    FMT_SVG,
    FMT_CHROMETRACE,
    FMT_DIFF_FLAMEGRAPH
};
/* What a Python frame's line is in the profile: the executing line, the
 * function's first line (--function), none (--nolineno). */
enum line_mode { LINES_EXACT, LINES_FUNCTION, LINES_NONE };
enum mode { MODE_WALL, MODE_CPU, MODE_GIL, MODE_EXCEPTION };
extern const char *const rec_mode_names[];

struct out_rec_meta;
struct out_rec_source;
struct rec_stream_sink;

/* What the user asked for. */
struct rec {
    int attach; /* attach PID, else run */
    uint64_t interval_ns;
    double rate_hz;
    uint64_t duration_ns; /* 0 = until the end */
    int main_only;
    enum mode mode;
    int native, gc, realtime, stats, tid, read_only, every_thread;
    size_t max_frames; /* 0 = the library's default */
    enum format format;
    const char *output;
    int sort;
    size_t limit;
    const char *python;
    uint64_t max_memory; /* the profile's bound in bytes; 0 = none */
    char **argv;         /* run: what to execute */
    int detach;          /* run: leave the command running when sampling ends early */
    /* --async-aware: task stacks (record_async.c) instead of thread stacks;
     * async_mode: PYS_TASKS_RUNNING (default) or PYS_TASKS_ALL. */
    int async_aware, async_mode, async_mode_set;
    /* The recording (record_bin.c). */
    int binary;                    /* --binary: the recording is the output (-o names it) */
    const char *record_path;       /* where it goes: -o with --binary, --record FILE; NULL:
                                    * the default name (with --binary), or none */
    int compression;               /* REC_COMPRESSION_* */
    int compression_set;           /* --compression given */
    int jsonl_samples;             /* --jsonl-samples: a record per sample too */
    struct out_jsonl *jsonl;       /* FMT_JSONL's writer, fed by the sample stream */
    struct out_gecko *gecko;       /* FMT_GECKO's */
    int live;                      /* --live: the live view (live.h) */
    int browser;                   /* open the HTML output once written */
    int no_summary;                /* leave out the end-of-run statistics (warnings stay) */
    int blocking;                  /* stop the target's threads for each sample */
    int native_stacks;             /* --native: native frames (implies blocking) */
    enum line_mode line_mode;      /* --function, --nolineno */
    int no_idle;                   /* --no-idle: only threads the kernel shows running */
    int opcodes;                   /* --opcodes: each frame's instruction (pys_options.opcodes) */
    struct out_chrometrace *trace; /* --chrometrace: its events, filled while sampling */
    /* The run's facts (rec_run_meta) and the sink of --jsonl and --gecko
     * (rec_stream_start): made at the start, freed by rec_stream_free. */
    struct out_rec_meta *meta;
    struct rec_stream_sink *stream;
    /* --subprocesses: every Python descendant sampled too (record_procs.c);
     * merge_processes: into the one profile, under a process frame each. */
    int subprocesses, merge_processes;
    /* When sampling started (CLOCK_REALTIME, ns; 0: unknown): the date
     * outputs carry (pprof's time_nanos), the recording's for a replay. */
    uint64_t start_realtime_ns;
    /* --diff-flamegraph BASELINE: the recording, read before sampling
     * starts (rec_baseline_load). */
    const char *diff_baseline;
    struct rec_baseline *baseline;
};
enum { REC_COMPRESSION_AUTO, REC_COMPRESSION_ZSTD, REC_COMPRESSION_NONE };

/* Why sampling ended. END_NOT_PYTHON: the process exec'd a program that
 * did not become Python (or one pystrobe cannot read). */
enum end { END_SIGNAL, END_DURATION, END_EXITED, END_NOT_PYTHON, END_ERROR };
/* END_ERROR: the exit status to end with (said on stderr), e.g. a thread
 * --blocking could not stop. */
extern int rec_error_status;

/* The sessions a profile was sampled through, the current one last: a
 * process that exec'd Python again has one per program, and the profile's
 * names belong to them all (free them after the profile is written). */
#define REC_MAX_PROGRAMS 64
struct rec_sessions {
    pys_session *v[REC_MAX_PROGRAMS];
    size_t n;
    const struct pys_options *opt; /* to attach to a new program */
};

/* The signal that ended sampling: set by the first SIGINT, SIGTERM or SIGHUP
 * (rec_signals_install); 0 until then. The loops poll it. */
extern volatile sig_atomic_t rec_stop;

/* record_opts.c: parse options into r (and *pid for attach); returns -1 on
 * success, else the exit status to end with (usage errors, --help). */
int rec_parse_args(struct rec *r, int argc, char **argv, int attach, int *pid);

/* record_opts.c, for `pystrobe replay FILE`: the output options of run and
 * attach, parsed by the same code (the others are refused); -1 with *file
 * the recording, else the exit status (usage errors, --help). */
int rec_parse_replay_args(struct rec *r, int argc, char **argv, const char **file);
void rec_replay_usage(FILE *f);

/* replay.c, for --diff-flamegraph: read r->diff_baseline (a recording of
 * pystrobe's or of CPython 3.15's profiler) into r->baseline. -1, or the
 * exit status after one line saying why (missing, unreadable, not a
 * recording, no samples). rec_baseline_check: is the baseline comparable
 * with a run of this mode and --native/--no-gc (native, gc)? -1, or the
 * exit status after saying why. */
struct rec_baseline;
int rec_baseline_load(struct rec *r);
int rec_baseline_check(const struct rec *r, const char *mode, int native, int gc);
const pys_profile *rec_baseline_profile(const struct rec_baseline *b);
void rec_baseline_free(struct rec_baseline *b);

/* The sample stream: what record_loop.c hands each consumer after each
 * sample. The profile is the first consumer (it also keeps the run's
 * counters, info); further ones (a live view, a recording) are sinks. */
struct rec_sample {
    uint64_t t_ns;                       /* when the sample began (CLOCK_MONOTONIC) */
    uint64_t end_ns;                     /* when its snapshot was complete */
    const struct pys_snapshot *snap;     /* NULL: the sample failed as a whole (rc) */
    int rc;                              /* pys_session_snapshot's result */
    pys_session *s;                      /* the session (program) it came from */
    const struct pys_profile_info *info; /* the run's counters, this sample counted */
    /* The profile the sample's stacks went into as sampled (NULL: none, or
     * rewritten: --function, --nolineno, a process frame). Consumers on
     * the sampling thread may read it, not keep pointers into it. */
    pys_profile *prof;
    /* The profile the sample's stacks went into, however rewritten
     * (--function, --nolineno, under the process's frame; with
     * --merge-processes every target's): its nodes past those a consumer
     * saw are the ones this sample added. NULL: none. */
    const pys_profile *into;
};
/* A consumer of the sample stream. sample() runs on the sampling thread
 * after each sample and must not block (a slow consumer hands the work to a
 * thread of its own); it returns 0, or a PYS_E code that ends sampling
 * (the consumer has said why on stderr). Threads to keep are those
 * rec_thread_matches accepts. */
struct rec_sink {
    void *ctx;
    int (*sample)(void *ctx, const struct rec_sample *smp);
};
#define REC_MAX_SINKS 8
struct rec_sinks {
    struct rec_sink v[REC_MAX_SINKS];
    size_t n;
};
/* 0, or -1 if all REC_MAX_SINKS are taken. */
int rec_sinks_add(struct rec_sinks *ks, void *ctx,
                  int (*sample)(void *, const struct rec_sample *));

/* record_procs.c: --subprocesses. The processes sampled are targets; the
 * first is the one run started or attach named (its sessions and profile
 * are the caller's), the others are found by following the process tree
 * at most every millisecond of sampling. */
enum rec_target_state {
    REC_T_PROBING,  /* not (yet) Python: attach is tried again */
    REC_T_SAMPLING, /* attached: sampled at each tick */
    REC_T_OTHER,    /* not Python: followed through, looked at again if it execs */
    REC_T_ENDED,    /* exited */
    REC_T_FAILED    /* cannot be sampled (why: its text) */
};
struct rec_async;
struct rec_target {
    int pid;
    enum rec_target_state state;
    struct rec_sessions ss; /* its programs (ss.n == 0: never attached) */
    pys_profile *prof;      /* its own, or the merged one */
    /* The consumers of its own sample stream (its recording, --jsonl,
     * --gecko, --chrometrace files; NULL: none), and --async-aware's
     * reader of its tasks (NULL: none). */
    const struct rec_sinks *sinks;
    struct rec_async *async;
    uint64_t unmatched; /* as rec_sample_loop's */
    uint64_t samples, failed;
    uint64_t first_ns; /* its first sample's start (rec_now_ns), 0 before */
    /* --merge-processes: the outermost frame of its stacks, "process PID
     * COMMAND" (the command as when its current program was attached). */
    struct pys_frame root;
};
struct rec_procs;
/* The set for the target whose session is ss->v[0], sampled into prof
 * (NULL if out of memory). Descendants of root are followed: attach's
 * target, or pystrobe itself for run (a child subreaper, so that orphans
 * stay in its tree); command: run's child, which the caller reaps (-1).
 * sinks: the first target's own stream consumers (its outputs); every
 * other target gets its own, beside them (files named as the profiles).
 * rooted: the consumers of every target's samples, each stack under its
 * process's frame (rec_target.root): the live view, and with
 * --merge-processes the stream outputs (sinks then NULL). */
struct rec_procs *rec_procs_new(const struct rec *r, const struct pys_options *opt, int root,
                                int command, const struct rec_sessions *ss, pys_profile *prof,
                                const struct rec_sinks *sinks, const struct rec_sinks *rooted);
/* The consumers of every target's samples under its process's frame. */
const struct rec_sinks *rec_procs_rooted(const struct rec_procs *p);
/* At each tick (now): follow the tree, attach to what became Python. */
void rec_procs_poll(struct rec_procs *p, uint64_t now);
size_t rec_procs_count(const struct rec_procs *p);
struct rec_target *rec_procs_target(struct rec_procs *p, size_t i);
/* What a sample of a target said: it exited, it exec'd (its session's
 * error tells), or it cannot be sampled any more (why). */
void rec_procs_exited(struct rec_procs *p, struct rec_target *t, uint64_t now);
void rec_procs_exec(struct rec_procs *p, struct rec_target *t, uint64_t now);
void rec_procs_fail(struct rec_procs *p, struct rec_target *t, const char *why);
/* Whether nothing is left to sample or to follow (run's command included). */
int rec_procs_done(const struct rec_procs *p);
/* The first target's sessions, after sampling (to free). */
struct rec_sessions *rec_procs_main_sessions(struct rec_procs *p);
/* After sampling: each other target's profile and recording written
 * beside the main ones (unless merged), then the table of processes.
 * Returns CLI_OK, or the status of the first output that failed. */
int rec_procs_finish(struct rec_procs *p, const struct rec *r, int quiet);
void rec_procs_free(struct rec_procs *p);

/* record_loop.c */
uint64_t rec_now_ns(void);
/* Whether thread t's stack belongs in the output: --mode,
 * --main-thread-only and --no-idle. */
int rec_thread_matches(const struct rec *r, const struct pys_thread *t);
void rec_signals_install(void);
/* A stack's frames as the profile gets them: with --function each Python
 * frame stands at its function's first line, with --nolineno at none
 * (OUT_LINE_OMITTED), so that a function's lines count as one entry. frames
 * itself with LINES_EXACT, else a copy in *buf (grown to *cap); NULL if out
 * of memory. */
const struct pys_frame *rec_frames_for_lines(enum line_mode m, const struct pys_frame *frames,
                                             size_t n, struct pys_frame **buf, size_t *cap);
/* What a second signal (an abort) cleans up before pystrobe exits 130:
 * child and python (-1: none) are killed with SIGKILL, tmp_path (NULL: none)
 * is unlinked. tmp_path must stay valid until replaced. */
void rec_abort_cleanup(pid_t child, pid_t python, const char *tmp_path);
/* Called by an abort before it exits, if set: must be async-signal-safe
 * (the live view gives the terminal back). */
extern void (*volatile rec_abort_hook)(void);
/* Sample the last of ss into prof, and hand each sample to the sinks (NULL:
 * none), until a signal, the duration, the target's exit, an exec of a
 * program that is not Python or a sink's error; an exec of Python is
 * followed (a new session added to ss). *unmatched counts the samples in
 * which some thread had a Python stack but none passed the --mode and
 * --main-thread-only filters. */
enum end rec_sample_loop(const struct rec *r, struct rec_sessions *ss, pys_profile *prof,
                         const struct rec_sinks *sinks, uint64_t *unmatched);
/* The CPU time (user + system, all threads) this process used from the
 * start of rec_sample_loop to its end: the profiler's own cost. */
struct rec_cost {
    uint64_t user_ns, sys_ns;
};
void rec_cost_begin(struct rec_cost *c);
void rec_cost_end(struct rec_cost *c);
/* --subprocesses: sample every target of procs at each tick, the first
 * into its own profile (its counters), each sample handed to the target's
 * sinks and to the rooted ones, until a signal, the duration, a rooted
 * sink's or the first target's sink's error, or nothing is left to sample
 * (END_EXITED). A target that fails or ends never stops the others. */
enum end rec_sample_procs(const struct rec *r, struct rec_procs *procs);

/* record_async.c: --async-aware. */
struct rec_async {
    pys_tasks *tasks;
    pys_session *s;        /* the session tasks reads */
    struct pys_frame *buf; /* one task's stack */
    size_t cap;
    /* The snapshot of task stacks made by the last rec_async_sample: its
     * frames, "threads" (one per task stack, with the offset of its first
     * frame) and interpreters (with the index of their first thread). */
    struct pys_frame *frames;
    size_t nframes, capframes;
    struct pys_thread *threads;
    size_t *off;
    size_t nthreads, capthreads, capoff;
    struct pys_interp *interps;
    size_t *ioff;
    size_t ninterps, capinterps, capioff;
    struct pys_snapshot snap;
};
/* Can --async-aware sample session s? -1, or the exit status to end with
 * after saying why (a target before CPython 3.14). */
int rec_async_check(pys_session *s);
/* The same, quiet: 0, or a PYS_E code with why in why (n bytes). */
int rec_async_usable(pys_session *s, char *why, size_t n);
/* One async-aware sample of session s: the task graph read and made into
 * *out, a snapshot whose threads are task stacks (per r->async_mode, the
 * running task of each thread, or every task nobody awaits: each leaf of
 * the task graph), each with the ids and status of the thread of threads
 * (the thread snapshot of the same sample; NULL: none) whose loop holds it;
 * tasks whose thread is gone have thread id 0 and no status. *out is valid
 * until the next call or rec_async_release. 0, or a PYS_E code (the sample
 * failed; PYS_E_EXITED and PYS_E_NOMEM end sampling). */
int rec_async_sample(struct rec_async *a, const struct rec *r, pys_session *s,
                     const struct pys_snapshot *threads, const struct pys_snapshot **out);
void rec_async_release(struct rec_async *a);

/* record_child.c */
/* Start argv; unless detach, the child gets SIGKILL if pystrobe dies first. */
pid_t rec_child_start(char **argv, int detach);
int rec_exit_status_of(int status);
/* End the child (and python, its Python descendant, if another process) and
 * reap it: after_ctrl_c, it is first given 2 s to end on its own (it had the
 * terminal's Ctrl-C too); then SIGTERM, and SIGKILL 2 s later. */
void rec_child_stop(pid_t child, pid_t python, int after_ctrl_c);
/* Attach to the child or its first Python descendant; 0 or a PYS_E code.
 * *exited says the child ended first, with *child_status. */
int rec_child_attach(pid_t child, const struct pys_options *opt, pys_session **out,
                     int *child_status, int *exited);

/* record_out.c */
/* The output file, made ready before sampling starts so that a path that
 * cannot be written fails at once rather than after the whole run. */
struct rec_out {
    const char *path; /* where the profile goes; NULL: the default name (pid unknown yet) */
    char name[64];    /* the default name, once known */
    int to_stdout;    /* the pstats table on stdout: no file */
    int in_place;     /* path exists and is not a regular file: written in place */
    int fd;           /* the temporary file in the destination directory, or -1 */
    int anonymous;    /* it has no name yet (O_TMPFILE); tmp is the one it will get */
    char tmp[4096];   /* its name, or "" */
    /* --heatmap: the target's sources (the caller's; NULL: read at the end
     * from this machine's files as named). */
    struct rec_sources *sources;
};
/* Check that the output can be written: create its temporary file in the
 * destination directory (pid: the target's, or -1 for run's default name,
 * which then lives in the current directory). Returns -1, or the exit status
 * to end with after saying why. */
int rec_out_prepare(struct rec_out *o, const struct rec *r, int pid);
/* Remove the temporary file (the profile is not going to be written). */
void rec_out_discard(struct rec_out *o);
/* A temporary file for path in path's directory, open for writing:
 * preferably one without a name (O_TMPFILE; *anonymous 1, tmp the name
 * rec_tmp_name will give it: "PATH.tmp.XXXXXX"), else the new file tmp
 * (mkstemp). The descriptor, or -1 with errno set and tmp "". */
int rec_tmp_open(const char *path, char *tmp, size_t size, int *anonymous);
/* Name the file without a name fd tmp, its XXXXXX replaced by digits no
 * other file has. 0, or -1 with errno set. */
int rec_tmp_name(int fd, char *tmp);
/* The mode a new output file gets: 0666 less the umask. */
mode_t rec_new_file_mode(void);
/* record_src.c: the source files of the targets, as each sees them
 * (through its /proc/PID/root and cwd), each read at the first sample that
 * shows it: kept for --heatmap, and written to the recording. */
struct rec_sources;
struct out_source;
struct rec_bin;
/* The sources of process pid (its root, working directory and start
 * taken now, so that its files can be read after it ended; other
 * processes' when their samples come, with --merge-processes), or for
 * pid <= 0 (a replay) this machine's files as named; keep: the texts are
 * kept for a heatmap. NULL if out of memory. */
struct rec_sources *rec_sources_new(int pid, int keep);
void rec_sources_free(struct rec_sources *s);
/* Write each file to recording b too as it is read (b may be NULL). */
void rec_sources_record(struct rec_sources *s, struct rec_bin *b);
/* A sink (ctx: the sources): notes the files first seen in the sample
 * (the profile's new nodes, the recording's new frames), and reads a few
 * of those noted, each through the view of the process that showed it.
 * 0, or PYS_E_NOMEM if the recording ran out of memory (said). */
int rec_sources_sample(void *ctx, const struct rec_sample *smp);
/* After sampling, before the heatmap and the recording are written: the
 * files noted and not read yet are read, and those read that were
 * changed or removed since are marked so (in the recording too). */
void rec_sources_finish(struct rec_sources *s);
/* A replay's: when the recorded run started (files of this machine
 * modified since are marked), and the sources the recording holds. */
void rec_sources_set_start(struct rec_sources *s, uint64_t start_ns);
int rec_sources_put(struct rec_sources *s, const struct out_rec_source *src);
/* The heatmap writer's out_source_fn (output/heatmap.h) over the sources
 * (NULL: none), reading at once a file not read while sampling (into
 * buf). */
struct rec_src_read {
    struct rec_sources *s;
    char *buf; /* freed by the caller after the last call */
    char why[160];
};
void rec_sources_get(void *ctx, const char *filename, struct out_source *out);
/* The end-of-run statistics, unless quiet; the warnings (truncated stacks)
 * in any case. */
void rec_print_summary(const struct pys_profile_info *info, double rate_hz,
                       const struct rec_cost *cost, int quiet);
/* The summary's line on folded samples, if the profile reached its bound. */
/* The thread stacks read more than once before one read was a single
 * moment (pys_stats.thread_rereads), for the end summary. */
void rec_print_rereads(const pys_session *s);
void rec_print_folded(const pys_profile *p, uint64_t max_memory);
/* --stats: session s's counters over the samples info counts, under the
 * line title; the profiler's CPU too unless cost is NULL (it is the run's,
 * not one target's). */
void rec_print_stats(const char *title, const pys_session *s, const struct pys_profile_info *info,
                     const struct rec_cost *cost);
/* Write the profile to o, or if that fails to a fallback file named on
 * stderr; nothing if the profile has no stacks (unmatched as from
 * rec_sample_loop says why). Returns an exit status. */
/* --chrometrace: make r->trace (0, or PYS_E_NOMEM), and the sink that fills
 * it from the sample stream (ctx: the struct rec). */
int rec_trace_new(struct rec *r);
int rec_trace_sample(void *ctx, const struct rec_sample *smp);
int rec_write_output(const struct rec *r, struct rec_out *o, const pys_profile *p, int pid,
                     uint64_t unmatched);
/* Is the format a page a browser shows (--browser)? */
int rec_format_is_html(enum format format);
/* --browser: open what rec_write_output wrote at path for r's format (the
 * page; a heatmap's index.html), without waiting. A browser that cannot be
 * started is a warning (said on stderr). */
void rec_open_browser(const struct rec *r, const char *path);

/* record_bin.c: the recording, a sink. rec_bin_open makes its temporary
 * file beside its path (r->record_path, or recording_PID.pysr) or says why
 * not and returns NULL, touching no file at the path; rec_bin_start writes
 * its start (-1, or an exit status); rec_bin_sample is the sink; the file
 * takes the path's name once a block holding a thread stack is written
 * (one that records none leaves what was there); rec_bin_finish writes the
 * end and closes it (an exit status: CLI_NOSAMPLES when nothing was
 * kept). */
struct rec_bin;
struct rec_bin *rec_bin_open(const struct rec *r, int pid);
int rec_bin_start(struct rec_bin *b, const struct out_rec_meta *m);
int rec_bin_sample(void *ctx, const struct rec_sample *smp);
int rec_bin_finish(struct rec_bin *b, const struct pys_profile_info *info);
/* The recording's files (out_rec_enc_files), for record_src.c. */
size_t rec_bin_files(const struct rec_bin *b);
const char *rec_bin_file(const struct rec_bin *b, size_t i);
/* A SOURCE record (out_rec_enc_source, or _mark with mark_only). 0, or
 * PYS_E_NOMEM (said; the recording stops at its next sample). */
int rec_bin_source(struct rec_bin *b, const char *filename, const char *text, size_t len,
                   const char *why, int changed, int mark_only);
const char *rec_bin_path(const struct rec_bin *b);
void rec_bin_free(struct rec_bin *b);
/* The run's facts for recordings and the outputs fed by the sample stream:
 * made at the first call (the start) in r->meta, the same at every later
 * one (NULL if out of memory, said). */
const struct out_rec_meta *rec_run_meta(struct rec *r, const pys_session *s, int pid);
/* The outputs fed by target pid's sample stream (session s), each a sink
 * in ks: the recording (*bin: made here unless open already; NULL: none
 * asked), --jsonl and --gecko, --chrometrace. -1, or an exit status (said
 * why; what was made is freed by rec_bin_free and rec_stream_free). */
int rec_sinks_start(struct rec *r, const pys_session *s, int pid, struct rec_bin **bin,
                    struct rec_sinks *ks);
/* The sample-stream outputs (--jsonl, --gecko): the writer made in
 * r->jsonl or r->gecko, and its sink. -1, or an exit status. */
int rec_stream_start(struct rec *r, const pys_session *s, int pid, struct rec_sinks *ks);
/* Free r's stream outputs, its trace and its meta. */
void rec_stream_free(struct rec *r);

#endif
