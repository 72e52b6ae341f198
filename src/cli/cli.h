/*
 * cli: the pystrobe command. The only layer that prints to the terminal or
 * decides an exit status.
 */
#ifndef PYSTROBE_CLI_H
#define PYSTROBE_CLI_H

#include <stddef.h>
#include <stdio.h>

/* Exit statuses, documented in docs/cli.md. */
enum cli_exit {
    CLI_OK = 0,
    CLI_USAGE = 2,
    CLI_NOPROC = 3,
    CLI_NOTPYTHON = 4,
    CLI_PERM = 5,
    CLI_VERSION = 6,
    CLI_EXITED = 7,
    CLI_ERROR = 8,
    CLI_NOSAMPLES = 9, /* run/attach: no stack sampled, nothing written */
    CLI_FALLBACK = 10, /* run/attach: the profile went to a fallback file, not the output */
};

/* Print "pystrobe: <msg>" (plus a hint for permission errors) to stderr and
 * return the exit status for the library error code. */
int cli_report(int code, const char *msg);

struct option;
/* After getopt_long (with opterr = 0 and ':' leading the short options)
 * returned '?' or ':' (c): print "pystrobe: unknown option '--x'" (or that
 * the option is ambiguous, needs a value or takes none) to stderr. */
void cli_bad_option(int c, char **argv, const struct option *longopts);

/* Parse a process id; -1 if s is not one. */
int cli_parse_pid(const char *s);
/* Parse --max-frames N into *out; -1 if s is not a number in the
 * library's range (PYS_MAX_FRAMES_MIN to PYS_MAX_FRAMES_MAX). */
int cli_parse_max_frames(const char *s, size_t *out);

int cli_dump(int argc, char **argv);
/* dump --async-aware (dump_async.c): print session s's asyncio task graph
 * (mode: PYS_TASKS_ALL or PYS_TASKS_RUNNING) as text or JSON, read with
 * the target stopped if blocking; the exit status. */
#include <pystrobe/pystrobe.h>
int cli_dump_tasks(pys_session *s, int mode, int json, int blocking);
/* What both dumps share (dump.c): text from the target on a terminal,
 * control characters escaped; the heading's ": Python V (IMAGE)", after
 * "Process PID" and without a line end; the JSON document opened with pid,
 * python_version and image; a frame's lineno, end_lineno, col_offset and
 * end_col_offset; a frame's text line `    File "F", line N, in Q` (no
 * line end). */
struct out_json;
void cli_put_text(FILE *f, const char *s);
void cli_dump_frame_line(FILE *f, const struct pys_frame *fr);
void cli_dump_python(FILE *f, pys_session *s);
void cli_dump_json_head(struct out_json *j, pys_session *s, int pid);
void cli_dump_json_position(struct out_json *j, const struct pys_frame *fr);
/* `run` (attach == 0) and `attach` (attach == 1). */
int cli_record(int argc, char **argv, int attach);
/* `replay FILE`: a recording into any output (replay.c). */
int cli_replay(int argc, char **argv);

#endif
