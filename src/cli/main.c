/*
 * main: dispatch `pystrobe COMMAND ...`, and the error-to-exit-status map.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pystrobe/pystrobe.h>

#include "cli/cli.h"
#include "version.h" /* generated: PYS_VERSION, PYS_COMMIT */

static const char USAGE[] =
    "usage: pystrobe COMMAND [options] ...\n"
    "\n"
    "Commands:\n"
    "  run [options] script.py [args...] | -m module [args...] | -- COMMAND [args...]\n"
    "                      run a program and profile it (pystrobe run --help)\n"
    "  attach [options] PID\n"
    "                      profile a running process until it exits or Ctrl-C\n"
    "  dump [--json] [--max-frames N] PID\n"
    "                      print every thread's Python stack of a running process\n"
    "  replay [options] FILE\n"
    "                      write a recording (--binary) in another format\n"
    "  help [COMMAND]      this text, or COMMAND's options (as COMMAND --help)\n"
    "  version, --version  pystrobe's version and the commit it was built from\n"
    "\n"
    "Supported targets: CPython 3.7 to 3.15 (GIL builds) on Linux x86-64.\n"
    "See pystrobe(1) or docs/cli.md for output formats and exit statuses.\n";

static int is_help_flag(const char *arg)
{
    return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}

/* `pystrobe help COMMAND`: what `pystrobe COMMAND --help` prints, from the
 * same code, so the two cannot differ. help and version have no options of
 * their own: their help is the command list, which describes them. */
static int help_command(const char *cmd)
{
    char *argv[] = {(char *)cmd, (char *)"--help", NULL};
    if (strcmp(cmd, "dump") == 0)
        return cli_dump(2, argv);
    if (strcmp(cmd, "run") == 0)
        return cli_record(2, argv, 0);
    if (strcmp(cmd, "attach") == 0)
        return cli_record(2, argv, 1);
    if (strcmp(cmd, "replay") == 0)
        return cli_replay(2, argv);
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "version") == 0 || is_help_flag(cmd)) {
        fputs(USAGE, stdout);
        return CLI_OK;
    }
    fprintf(stderr, "pystrobe: unknown command '%s'\n\n%s", cmd, USAGE);
    return CLI_USAGE;
}

int cli_report(int code, const char *msg)
{
    const char *text = msg && *msg ? msg : pys_strerror(code);
    if (code == PYS_E_PERM) {
        /* The library says what was denied; the command says what grants it. */
        fprintf(stderr,
                "pystrobe: %s: run as root or with CAP_SYS_PTRACE, or (for processes of your "
                "own user) set kernel.yama.ptrace_scope to 0\n",
                text);
        return CLI_PERM;
    }
    fprintf(stderr, "pystrobe: %s\n", text);
    switch (code) {
    case PYS_E_NOPROC:
        return CLI_NOPROC;
    case PYS_E_NOTPYTHON:
        return CLI_NOTPYTHON;
    case PYS_E_VERSION:
        return CLI_VERSION;
    case PYS_E_EXITED:
        return CLI_EXITED;
    default:
        return CLI_ERROR;
    }
}

void cli_bad_option(int c, char **argv, const struct option *longopts)
{
    /* getopt_long has stepped past a long option it rejects, and past a
     * short one unless it sat inside a group ("-Za"): the short one is
     * named by optopt, a long one only by its text. A rejected long option
     * leaves optopt 0, or its value if the fault is its argument. */
    const char *arg = optind > 0 ? argv[optind - 1] : "";
    int is_long = strncmp(arg, "--", 2) == 0 &&
                  (c == ':' || optopt == 0 || optopt >= 256 || strchr(arg, '='));
    if (!is_long) {
        if (c == ':')
            fprintf(stderr, "pystrobe: option '-%c' needs a value\n", optopt);
        else if (optopt > ' ' && optopt < 127)
            fprintf(stderr, "pystrobe: unknown option '-%c'\n", optopt);
        else
            fprintf(stderr, "pystrobe: unknown option\n");
        return;
    }
    size_t len = strcspn(arg, "=");
    if (c == ':') {
        fprintf(stderr, "pystrobe: option '%.*s' needs a value\n", (int)len, arg);
        return;
    }
    if (optopt != 0) {
        fprintf(stderr, "pystrobe: option '%.*s' takes no value\n", (int)len, arg);
        return;
    }
    int matches = 0;
    for (const struct option *o = longopts; o && o->name; o++)
        if (len > 2 && strncmp(o->name, arg + 2, len - 2) == 0)
            matches++;
    fprintf(stderr, "pystrobe: %s option '%.*s'\n", matches > 1 ? "ambiguous" : "unknown", (int)len,
            arg);
}

int cli_parse_pid(const char *s)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v <= 0 || v > INT_MAX)
        return -1;
    return (int)v;
}

int cli_parse_max_frames(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < PYS_MAX_FRAMES_MIN || v > PYS_MAX_FRAMES_MAX)
        return -1;
    *out = (size_t)v;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(USAGE, stderr);
        return CLI_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "dump") == 0)
        return cli_dump(argc - 1, argv + 1);
    if (strcmp(cmd, "run") == 0)
        return cli_record(argc - 1, argv + 1, 0);
    if (strcmp(cmd, "attach") == 0)
        return cli_record(argc - 1, argv + 1, 1);
    if (strcmp(cmd, "replay") == 0)
        return cli_replay(argc - 1, argv + 1);
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        if (argc > 2)
            return help_command(argv[2]);
        fputs(USAGE, stdout);
        return CLI_OK;
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        if (argc > 2 && is_help_flag(argv[2]))
            return help_command("version");
        printf("pystrobe %s (commit %s)\n", PYS_VERSION, PYS_COMMIT);
        return CLI_OK;
    }
    fprintf(stderr, "pystrobe: unknown command '%s'\n\n%s", cmd, USAGE);
    return CLI_USAGE;
}
