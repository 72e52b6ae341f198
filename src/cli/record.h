/*
 * record: the parts of `pystrobe run` and `pystrobe attach`, one job a file:
 *
 *   record.c        the command: parse, attach or start, sample, write, end
 *   record_opts.c   options and usage
 *   record_loop.c   the sampling loop, its clock and its signals
 *   record_child.c  `run`'s child process: start, find its Python, stop
 *   record_out.c    the summary, --stats and the output files
 *
 * Private to src/cli.
 */
#ifndef PYSTROBE_CLI_RECORD_H
#define PYSTROBE_CLI_RECORD_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <pystrobe/pystrobe.h>

enum format { FMT_PSTATS, FMT_COLLAPSED, FMT_FLAMEGRAPH };
enum mode { MODE_WALL, MODE_CPU, MODE_GIL, MODE_EXCEPTION };
extern const char *const rec_mode_names[];

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
    char **argv; /* run: what to execute */
};

/* Why sampling ended. */
enum end { END_SIGNAL, END_DURATION, END_EXITED };

/* Set by the first SIGINT/SIGTERM (rec_signals_install); the loops poll it. */
extern volatile sig_atomic_t rec_stop;

/* record_opts.c: parse options into r (and *pid for attach); returns -1 on
 * success, else the exit status to end with (usage errors, --help). */
int rec_parse_args(struct rec *r, int argc, char **argv, int attach, int *pid);

/* record_loop.c */
uint64_t rec_now_ns(void);
void rec_signals_install(void);
/* Sample s into prof until a signal, the duration or the target's exit. */
enum end rec_sample_loop(const struct rec *r, pys_session *s, pys_profile *prof);

/* record_child.c */
pid_t rec_child_start(char **argv);
int rec_exit_status_of(int status);
/* End the child (and python, its Python descendant, if another process). */
void rec_child_stop(pid_t child, pid_t python, int gently);
/* Attach to the child or its first Python descendant; 0 or a PYS_E code.
 * *exited says the child ended first, with *child_status. */
int rec_child_attach(pid_t child, const struct pys_options *opt, pys_session **out,
                     int *child_status, int *exited);

/* record_out.c */
void rec_print_summary(const struct pys_profile_info *info, double rate_hz);
void rec_print_stats(const pys_session *s, const struct pys_profile_info *info);
/* Write the profile where r says; returns an exit status. */
int rec_write_output(const struct rec *r, const pys_profile *p, int pid);

#endif
