/*
 * dump: `pystrobe dump [--json] [--max-frames N] PID`: attach, take one snapshot, print every
 * interpreter's threads and their stacks, most recent call last, as a
 * traceback does (or as one JSON document, docs/cli.md). With --core FILE,
 * the same from a core file of a Python process instead of a live one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pystrobe/pystrobe.h>

#include "cli/blocking.h"
#include "cli/cli.h"
#include "cli/source.h"
#include "output/json.h"

static const char DUMP_USAGE[] =
    "usage: pystrobe dump [--json] [--no-source] [--locals] [--native] [--opcodes]\n"
    "                     [--blocking] [--max-frames N] PID\n"
    "       pystrobe dump [options] -p PID\n"
    "       pystrobe dump --async-aware [--async-mode all|running] [--json] [--blocking] PID\n"
    "       pystrobe dump [--json] [--no-source] [--locals] [--native] [--opcodes]\n"
    "                     [--max-frames N] --core FILE [--executable PATH] [--root DIR]\n"
    "\n"
    "  -p, --pid PID    the process, as py-spy writes it\n"
    "  --core FILE      a core file of a Python process (the kernel's, or gdb's gcore)\n"
    "                   instead of a live process\n"
    "  --executable PATH  the core's executable, where it is not at the path the core\n"
    "                   names (memory the core left out is read from its files)\n"
    "  --root DIR       the root the core's process ran in (a chroot or container):\n"
    "                   the files it names, and its source files, are under DIR\n"
    "  --json           one JSON document instead of the text\n"
    "  --blocking       stop the target's threads while their stacks are read\n"
    "  --no-source      no source lines under the frames\n"
    "  --opcodes        the instruction each frame executes, named from the target's\n"
    "                   opcode table: CALL_PY_EXACT_ARGS (CALL) for a specialized one\n"
    "  --locals         each Python frame's local variables (arguments first), shown\n"
    "                   short: repr() of None, bool, int, float, str, bytes (cut), else\n"
    "                   the type and address\n"
    "  --native         native (C) frames between the Python frames, named by symbol,\n"
    "                   the interpreter's own left out (stops the threads: --blocking;\n"
    "                   from a core: its threads' registers and stacks)\n"
    "  --max-frames N   frames kept of a stack, 16 to 1000000 (default 8192): a deeper\n"
    "                   one keeps its innermost N-1 over a <truncated> frame\n"
    "  --async-aware    the asyncio tasks (CPython 3.14+): each task's name, coroutine\n"
    "                   stack and awaiters, per thread\n"
    "  --async-mode M   all: every task (default); running: each thread's running task\n"
    "                   and the tasks awaiting it\n";

/* The first n bytes of s, control characters escaped. */
static void put_text_n(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
}

void cli_put_text(FILE *f, const char *s)
{
    put_text_n(f, s, strlen(s));
}

/* The length of the line at *p (up to its '\n' or the end), *p moved past
 * it and its '\n'; a text's lines end when **p is '\0'. */
static size_t take_line(const char **p)
{
    const char *e = strchr(*p, '\n');
    size_t n = e ? (size_t)(e - *p) : strlen(*p);
    *p += n + (e != NULL);
    return n;
}

void cli_dump_python(FILE *f, pys_session *s)
{
    fprintf(f, ": Python %s (", pys_session_python_version_text(s));
    cli_put_text(f, pys_session_image_path(s));
    fputc(')', f);
}

void cli_dump_json_head(struct out_json *j, pys_session *s, int pid)
{
    out_json_begin_object(j);
    out_json_key(j, "pid");
    out_json_int(j, pid);
    out_json_key(j, "python_version");
    out_json_string(j, pys_session_python_version_text(s));
    out_json_key(j, "image");
    out_json_string(j, pys_session_image_path(s));
}

void cli_dump_json_position(struct out_json *j, const struct pys_frame *fr)
{
    out_json_key(j, "lineno");
    out_json_int_or_null(j, fr->lineno);
    out_json_key(j, "end_lineno");
    out_json_int_or_null(j, fr->end_lineno);
    out_json_key(j, "col_offset");
    out_json_int_or_null(j, fr->col);
    out_json_key(j, "end_col_offset");
    out_json_int_or_null(j, fr->end_col);
}

static void put_num(FILE *f, int32_t v)
{
    if (v < 0)
        fputc('?', f);
    else
        fprintf(f, "%d", (int)v);
}

void cli_dump_frame_line(FILE *f, const struct pys_frame *fr)
{
    fputs("    File \"", f);
    cli_put_text(f, fr->filename);
    fputs("\", line ", f);
    put_num(f, fr->lineno);
    fputs(", in ", f);
    cli_put_text(f, fr->qualname);
}

/* "[LINE:COL-END_LINE:END_COL]", '?' for each one unknown. */
static void put_range(FILE *f, const struct pys_frame *fr)
{
    const int32_t v[4] = {fr->lineno, fr->col, fr->end_lineno, fr->end_col};
    fputc('[', f);
    for (int i = 0; i < 4; i++) {
        if (i)
            fputc(i == 2 ? '-' : ':', f);
        put_num(f, v[i]);
    }
    fputc(']', f);
}

/* How many columns a byte of source takes where put_source prints it: a
 * UTF-8 continuation byte none, a control character its \xNN escape. */
static size_t source_width(unsigned char c)
{
    if ((c & 0xc0) == 0x80)
        return 0;
    if ((c < 0x20 && c != '\t') || c == 0x7f)
        return 4;
    return 1;
}

static void put_source(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\t')
            fputc(' ', f);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
}

static size_t span_width(const char *s, size_t from, size_t to)
{
    size_t w = 0;
    for (size_t i = from; i < to; i++)
        w += source_width((unsigned char)s[i]);
    return w;
}

/*
 * Frame fr's source line under it, stripped of its indentation, and, where
 * the version gives columns (3.11+), carets under the executing range as
 * Python's tracebacks draw them: to the line's end when the range goes on to
 * later lines, none when the range is the whole line. A line that cannot be
 * read is left out.
 */
static void print_source(FILE *f, struct cli_source *src, const struct pys_frame *fr)
{
    const char *line;
    size_t len;
    if (fr->kind != PYS_FRAME_PYTHON || fr->lineno < 1 ||
        cli_source_line(src, fr->filename, fr->lineno, &line, &len) < 0)
        return;
    size_t ws = 0, end = len;
    while (ws < len && (line[ws] == ' ' || line[ws] == '\t' || line[ws] == '\f'))
        ws++;
    while (end > ws && (line[end - 1] == ' ' || line[end - 1] == '\t'))
        end--;
    if (ws == end)
        return;
    fputs("      ", f);
    put_source(f, line + ws, end - ws);
    fputc('\n', f);
    if (fr->col < 0 || fr->end_lineno < fr->lineno)
        return;
    size_t a = (size_t)fr->col;
    size_t b = fr->end_lineno == fr->lineno && fr->end_col >= 0 ? (size_t)fr->end_col : end;
    if (a < ws)
        a = ws;
    if (b > end)
        b = end;
    if (a >= b || (a == ws && b == end))
        return;
    fputs("      ", f);
    for (size_t w = span_width(line, ws, a); w > 0; w--)
        fputc(' ', f);
    for (size_t w = span_width(line, a, b); w > 0; w--)
        fputc('^', f);
    fputc('\n', f);
}

/* Frame fr's instruction, as --opcodes shows it: its name, and the
 * instruction a specialized or instrumented one stands for in parentheses;
 * "opcode N" for a byte the version does not name, "?" when unread. */
static void put_opcode(FILE *f, uint32_t version, const struct pys_frame *fr)
{
    const char *base = NULL;
    const char *name = fr->opcode >= 0 ? pys_opcode_name(version, fr->opcode, &base) : NULL;
    if (name)
        fprintf(f, base ? "%s (%s)" : "%s", name, base);
    else if (fr->opcode >= 0)
        fprintf(f, "opcode %d", (int)fr->opcode);
    else
        fputc('?', f);
}

/* --locals under frame n of thread t: "name = repr" lines, or why not. */
static void print_locals(FILE *f, pys_session *s, const struct pys_thread *t, size_t n)
{
    const struct pys_local *lv;
    size_t nl;
    if (t->frames[n].kind != PYS_FRAME_PYTHON)
        return;
    if (pys_session_frame_locals(s, t, n, &lv, &nl) < 0) {
        fputs("        (locals unreadable: ", f);
        cli_put_text(f, pys_session_last_error(s));
        fputs(")\n", f);
        return;
    }
    for (size_t i = 0; i < nl; i++) {
        fputs("        ", f);
        cli_put_text(f, lv[i].name);
        fputs(" = ", f);
        cli_put_text(f, lv[i].repr);
        fputc('\n', f);
    }
}

/* The first line: the process, or the core and its process. */
static void print_header(FILE *f, pys_session *s, const char *core)
{
    struct pys_core_info ci;
    if (core && pys_core_info(s, &ci) == 0) {
        fprintf(f, "Process %d (core ", ci.pid);
        cli_put_text(f, core);
        if (ci.signal > 0)
            fprintf(f, ", signal %d", ci.signal);
        fprintf(f, ", %zu threads)", ci.nthreads);
    } else {
        fprintf(f, "Process %d", pys_session_pid(s));
    }
    cli_dump_python(f, s);
    fputc('\n', f);
}

static void print_text(FILE *f, pys_session *s, const struct pys_snapshot *snap, size_t max_frames,
                       struct cli_source *src, int opcodes, int locals, const char *core)
{
    print_header(f, s, core);
    for (size_t i = 0; i < snap->ninterps; i++) {
        const struct pys_interp *in = &snap->interps[i];
        fprintf(f, "\nInterpreter %lld:\n", (long long)in->id);
        for (size_t k = 0; k < in->nthreads; k++) {
            const struct pys_thread *t = &in->threads[k];
            static const struct {
                unsigned bit;
                const char *name;
            } flags[] = {
                {PYS_THREAD_MAIN_THREAD, "main thread"},          {PYS_THREAD_HAS_GIL, "holds GIL"},
                {PYS_THREAD_GIL_REQUESTED, "waiting for GIL"},    {PYS_THREAD_ON_CPU, "on CPU"},
                {PYS_THREAD_HAS_EXCEPTION, "handling exception"},
            };
            /* The host's id first, as the host's tools (ps, top) show it;
             * the target's own where it runs in another PID namespace. */
            fprintf(f, "  Thread %llu",
                    (unsigned long long)(t->host_id ? t->host_id : t->native_id));
            if (t->host_id && t->host_id != t->native_id)
                fprintf(f, " (ns %llu)", (unsigned long long)t->native_id);
            const char *tname = in->id == 0 ? pys_session_thread_name(s, t->thread_id) : NULL;
            if (tname) {
                fputs(" \"", f);
                cli_put_text(f, tname);
                fputc('"', f);
            }
            const char *sepr = " (";
            for (size_t b = 0; b < sizeof flags / sizeof flags[0]; b++) {
                if (t->status & flags[b].bit) {
                    fprintf(f, "%s%s", sepr, flags[b].name);
                    sepr = ", ";
                }
            }
            fputs(sepr[1] == ' ' ? "):\n" : ":\n", f);
            if (t->error) {
                fputs("    (stack unreadable: ", f);
                cli_put_text(f, t->error_text ? t->error_text : pys_strerror(t->error));
                fputs(")\n", f);
                continue;
            }
            if (t->native_error) {
                fputs("    (native stack unreadable: ", f);
                cli_put_text(f, t->native_error);
                fputs(")\n", f);
            }
            if (t->nframes == 0)
                fputs("    (no Python frames)\n", f);
            for (size_t n = t->nframes; n-- > 0;) {
                const struct pys_frame *fr = &t->frames[n];
                if (fr->kind == PYS_FRAME_TRUNCATED) {
                    fprintf(f,
                            "    <truncated> (stack deeper than %zu frames: its outermost "
                            "calls are left out; --max-frames)\n",
                            max_frames);
                    continue;
                }
                if (fr->kind == PYS_FRAME_NATIVE && fr->filename[0] != '~') {
                    /* --native: a C frame, by symbol and module. */
                    fputs("    Native ", f);
                    cli_put_text(f, fr->qualname);
                    fputs(" (", f);
                    cli_put_text(f, fr->filename);
                    if (fr->lineno > 0)
                        fprintf(f, ", line %d", (int)fr->lineno);
                    fputs(")\n", f);
                    continue;
                }
                cli_dump_frame_line(f, fr);
                fputs("  ", f);
                put_range(f, fr);
                if (opcodes && fr->kind == PYS_FRAME_PYTHON) {
                    fputs("  ", f);
                    put_opcode(f, pys_session_python_version(s), fr);
                }
                fputc('\n', f);
                if (src)
                    print_source(f, src, fr);
                if (locals)
                    print_locals(f, s, t, n);
            }
        }
    }
}

/* --opcodes: the frame's instruction byte, its name and the instruction it
 * stands for (null when its own, or unknown). */
static void put_json_opcode(struct out_json *j, uint32_t version, const struct pys_frame *fr)
{
    const char *base = NULL;
    const char *name = fr->opcode >= 0 ? pys_opcode_name(version, fr->opcode, &base) : NULL;
    out_json_key(j, "opcode");
    out_json_int_or_null(j, fr->opcode);
    out_json_key(j, "opname");
    out_json_string_or_null(j, name);
    out_json_key(j, "opbase");
    out_json_string_or_null(j, base);
}

/* --locals in JSON: "locals": [{"name", "repr"}...], or null and
 * "locals_error" when they could not be read. */
static void json_locals(struct out_json *j, pys_session *s, const struct pys_thread *t, size_t n)
{
    const struct pys_local *lv;
    size_t nl;
    int rc = t->frames[n].kind == PYS_FRAME_PYTHON ? pys_session_frame_locals(s, t, n, &lv, &nl)
                                                   : (nl = 0, 0);
    out_json_key(j, "locals");
    if (rc < 0) {
        out_json_null(j);
        out_json_key(j, "locals_error");
        out_json_string(j, pys_session_last_error(s));
        return;
    }
    out_json_begin_array(j);
    for (size_t i = 0; i < nl; i++) {
        out_json_begin_object(j);
        out_json_key(j, "name");
        out_json_string(j, lv[i].name);
        out_json_key(j, "repr");
        out_json_string(j, lv[i].repr);
        out_json_end_object(j);
    }
    out_json_end_array(j);
}

/* One frame (t->frames[n]) of thread t in --json. */
static void json_frame(struct out_json *jp, pys_session *s, const struct pys_thread *t, size_t n,
                       int locals, int opcodes)
{
    const struct pys_frame *fr = &t->frames[n];
    out_json_begin_object(jp);
    out_json_key(jp, "filename");
    out_json_string(jp, fr->filename);
    out_json_key(jp, "qualname");
    out_json_string(jp, fr->qualname);
    out_json_key(jp, "firstlineno");
    out_json_int(jp, fr->firstlineno);
    cli_dump_json_position(jp, fr);
    out_json_key(jp, "lasti");
    out_json_int(jp, fr->lasti);
    if (fr->kind == PYS_FRAME_NATIVE && fr->filename[0] != '~') { /* --native, not a marker */
        out_json_key(jp, "native");
        out_json_bool(jp, 1);
    }
    if (opcodes)
        put_json_opcode(jp, pys_session_python_version(s), fr);
    if (locals)
        json_locals(jp, s, t, n);
    out_json_end_object(jp);
}

/* --core in JSON: "core": {"path", "signal", "command", "executable",
 * "threads", "notes"}; the process's id is "pid". */
static void json_core(struct out_json *j, const char *core, const struct pys_core_info *ci)
{
    out_json_key(j, "core");
    out_json_begin_object(j);
    out_json_key(j, "path");
    out_json_string(j, core);
    out_json_key(j, "signal");
    out_json_int(j, ci->signal);
    out_json_key(j, "command");
    out_json_string(j, ci->command);
    out_json_key(j, "executable");
    out_json_string(j, ci->executable);
    out_json_key(j, "threads");
    out_json_begin_array(j);
    for (size_t i = 0; i < ci->nthreads; i++)
        out_json_int(j, ci->tids[i]);
    out_json_end_array(j);
    out_json_key(j, "notes");
    out_json_begin_array(j);
    for (const char *p = ci->notes; *p;) {
        const char *at = p;
        size_t n = take_line(&p);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)n, at);
        out_json_string(j, line);
    }
    out_json_end_array(j);
    out_json_end_object(j);
}

static void print_json(FILE *f, pys_session *s, const struct pys_snapshot *snap, int locals,
                       int opcodes, const char *core)
{
    struct out_json j;
    struct pys_core_info ci;
    int is_core = core && pys_core_info(s, &ci) == 0;
    out_json_init(&j, f);
    cli_dump_json_head(&j, s, is_core ? ci.pid : pys_session_pid(s));
    if (is_core)
        json_core(&j, core, &ci);
    out_json_key(&j, "interpreters");
    out_json_begin_array(&j);
    for (size_t i = 0; i < snap->ninterps; i++) {
        const struct pys_interp *in = &snap->interps[i];
        out_json_begin_object(&j);
        out_json_key(&j, "id");
        out_json_int(&j, in->id);
        out_json_key(&j, "threads");
        out_json_begin_array(&j);
        for (size_t k = 0; k < in->nthreads; k++) {
            const struct pys_thread *t = &in->threads[k];
            out_json_begin_object(&j);
            out_json_key(&j, "native_thread_id");
            out_json_int(&j, (int64_t)t->native_id);
            out_json_key(&j, "host_thread_id");
            if (t->host_id)
                out_json_int(&j, (int64_t)t->host_id);
            else
                out_json_null(&j);
            out_json_key(&j, "thread_id");
            out_json_int(&j, (int64_t)t->thread_id);
            out_json_key(&j, "name");
            const char *tname = in->id == 0 ? pys_session_thread_name(s, t->thread_id) : NULL;
            out_json_string_or_null(&j, tname);
            out_json_key(&j, "status");
            out_json_begin_object(&j);
            out_json_key(&j, "main_thread");
            out_json_bool(&j, t->status & PYS_THREAD_MAIN_THREAD);
            out_json_key(&j, "holds_gil");
            out_json_bool(&j, t->status & PYS_THREAD_HAS_GIL);
            out_json_key(&j, "gil_requested");
            out_json_bool(&j, t->status & PYS_THREAD_GIL_REQUESTED);
            out_json_key(&j, "on_cpu");
            if (t->status & PYS_THREAD_UNKNOWN)
                out_json_null(&j);
            else
                out_json_bool(&j, t->status & PYS_THREAD_ON_CPU);
            out_json_key(&j, "has_exception");
            out_json_bool(&j, t->status & PYS_THREAD_HAS_EXCEPTION);
            out_json_end_object(&j);
            out_json_key(&j, "error");
            out_json_string_or_null(&j, !t->error       ? NULL
                                        : t->error_text ? t->error_text
                                                        : pys_strerror(t->error));
            if (t->native_error) {
                out_json_key(&j, "native_error");
                out_json_string(&j, t->native_error);
            }
            out_json_key(&j, "frames");
            out_json_begin_array(&j);
            for (size_t n = t->nframes; n-- > 0;)
                json_frame(&j, s, t, n, locals, opcodes);
            out_json_end_array(&j);
            out_json_end_object(&j);
        }
        out_json_end_array(&j);
        out_json_end_object(&j);
    }
    out_json_end_array(&j);
    out_json_end_object(&j);
    fputc('\n', f);
}

/* For tests: PYSTROBE_TEST_DELAY_AFTER_ATTACH_MS=N waits N ms between attach
 * and the snapshot, so a test can make the target exit in between; a line
 * on stderr says when the wait starts. */
static void test_delay(void)
{
    const char *v = getenv("PYSTROBE_TEST_DELAY_AFTER_ATTACH_MS");
    if (!v)
        return;
    long ms = strtol(v, NULL, 10);
    if (ms <= 0 || ms > 60000)
        return;
    fprintf(stderr, "pystrobe: attached, waiting %ld ms (PYSTROBE_TEST_DELAY_AFTER_ATTACH_MS)\n", ms);
    fflush(stderr);
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A core session's notes (what of the process could not be had), each a
 * line on stderr, control characters escaped. */
static void report_core_notes(pys_session *s)
{
    struct pys_core_info ci;
    if (pys_core_info(s, &ci) < 0)
        return;
    for (const char *p = ci.notes; *p;) {
        const char *at = p;
        size_t n = take_line(&p);
        fputs("pystrobe: note: ", stderr);
        put_text_n(stderr, at, n);
        fputc('\n', stderr);
    }
}

/* What `dump` was asked. */
struct dump_args {
    int json, pid, source, blocking, opcodes, locals, native;
    const char *core, *executable, *root; /* --core, --executable, --root */
    int async_aware, async_mode, async_mode_set;
    size_t max_frames;
};

/* One option at argv[*i] (*i moved past its value): -1, or the exit status
 * to end with. */
static int parse_dump_option(struct dump_args *a, int argc, char **argv, int *i)
{
    const char *o = argv[*i];
    if (strcmp(o, "--json") == 0) {
        a->json = 1;
    } else if (strcmp(o, "--no-source") == 0) {
        a->source = 0;
    } else if (strcmp(o, "--blocking") == 0) {
        a->blocking = 1;
    } else if (strcmp(o, "--opcodes") == 0) {
        a->opcodes = 1;
    } else if (strcmp(o, "--locals") == 0) {
        a->locals = 1;
    } else if (strcmp(o, "--native") == 0) {
        a->native = 1;
    } else if (strcmp(o, "-p") == 0 || strcmp(o, "--pid") == 0 || strncmp(o, "--pid=", 6) == 0) {
        const char *v = o[1] == 'p'   ? (*i + 1 < argc ? argv[++*i] : "")
                        : o[5] == '=' ? o + 6
                                      : (*i + 1 < argc ? argv[++*i] : "");
        if (a->pid >= 0) {
            fprintf(stderr, "pystrobe: the process id is given twice\n%s", DUMP_USAGE);
            return CLI_USAGE;
        }
        a->pid = cli_parse_pid(v);
        if (a->pid < 0) {
            fprintf(stderr, "pystrobe: not a process id: '%s'\n%s", v, DUMP_USAGE);
            return CLI_USAGE;
        }
    } else if (strcmp(o, "--core") == 0 || strcmp(o, "--executable") == 0 ||
               strcmp(o, "--root") == 0) {
        if (*i + 1 == argc || argv[*i + 1][0] == '\0') {
            fprintf(stderr, "pystrobe: %s needs a value\n%s", o, DUMP_USAGE);
            return CLI_USAGE;
        }
        const char **slot = o[2] == 'c' ? &a->core : o[2] == 'e' ? &a->executable : &a->root;
        *slot = argv[++*i];
    } else if (strcmp(o, "--async-aware") == 0) {
        a->async_aware = 1;
    } else if (strcmp(o, "--async-mode") == 0) {
        const char *v = *i + 1 < argc ? argv[++*i] : "";
        if (strcmp(v, "all") != 0 && strcmp(v, "running") != 0) {
            fprintf(stderr, "pystrobe: bad --async-mode '%s' (all, running)\n%s", v, DUMP_USAGE);
            return CLI_USAGE;
        }
        a->async_mode = strcmp(v, "all") == 0 ? PYS_TASKS_ALL : PYS_TASKS_RUNNING;
        a->async_mode_set = 1;
    } else if (strcmp(o, "--max-frames") == 0) {
        if (*i + 1 == argc || cli_parse_max_frames(argv[*i + 1], &a->max_frames) < 0) {
            fprintf(stderr, "pystrobe: bad --max-frames '%s' (%d to %d)\n%s",
                    *i + 1 < argc ? argv[*i + 1] : "", PYS_MAX_FRAMES_MIN, PYS_MAX_FRAMES_MAX,
                    DUMP_USAGE);
            return CLI_USAGE;
        }
        ++*i;
    } else if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) {
        fputs(DUMP_USAGE, stdout);
        return CLI_OK;
    } else {
        fprintf(stderr, "pystrobe: unknown option '%s'\n%s", o, DUMP_USAGE);
        return CLI_USAGE;
    }
    return -1;
}

/* --core: what goes with it. -1, or the exit status to end with. */
static int check_core_args(const struct dump_args *a)
{
    const char *bad = a->pid >= 0      ? "a process id"
                      : a->blocking    ? "--blocking"
                      : a->async_aware ? "--async-aware"
                                       : NULL;
    if (bad) {
        fprintf(stderr, "pystrobe: --core cannot be combined with %s\n%s", bad, DUMP_USAGE);
        return CLI_USAGE;
    }
    return -1;
}

/* -1 (a filled), or the exit status to end with. */
static int parse_dump_args(struct dump_args *a, int argc, char **argv)
{
    *a = (struct dump_args){
        .pid = -1, .source = 1, .async_mode = PYS_TASKS_ALL, .max_frames = PYS_MAX_FRAMES_DEFAULT};
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1] != '\0') {
            int rc = parse_dump_option(a, argc, argv, &i);
            if (rc != -1)
                return rc;
        } else if (a->pid < 0) {
            a->pid = cli_parse_pid(argv[i]);
            if (a->pid < 0) {
                fprintf(stderr, "pystrobe: not a process id: '%s'\n%s", argv[i], DUMP_USAGE);
                return CLI_USAGE;
            }
        } else {
            fprintf(stderr, "pystrobe: unexpected argument '%s'\n%s", argv[i], DUMP_USAGE);
            return CLI_USAGE;
        }
    }
    if (a->core)
        return check_core_args(a);
    if (a->pid < 0) {
        fprintf(stderr, "pystrobe: dump needs a process id\n%s", DUMP_USAGE);
        return CLI_USAGE;
    }
    if (a->executable || a->root) {
        fprintf(stderr, "pystrobe: %s needs --core\n%s", a->executable ? "--executable" : "--root",
                DUMP_USAGE);
        return CLI_USAGE;
    }
    if (a->async_mode_set && !a->async_aware) {
        fprintf(stderr, "pystrobe: --async-mode needs --async-aware\n%s", DUMP_USAGE);
        return CLI_USAGE;
    }
    if (a->async_aware && a->native) {
        fprintf(stderr, "pystrobe: --native cannot be combined with --async-aware\n%s", DUMP_USAGE);
        return CLI_USAGE;
    }
    /* Native stacks are unwound from stopped threads. */
    a->blocking |= a->native;
    if (a->async_aware && a->locals) {
        fprintf(stderr, "pystrobe: --locals cannot be combined with --async-aware\n%s", DUMP_USAGE);
        return CLI_USAGE;
    }
    return -1;
}

int cli_dump(int argc, char **argv)
{
    struct dump_args a;
    int rc = parse_dump_args(&a, argc, argv);
    if (rc != -1)
        return rc;
    int json = a.json, pid = a.pid, source = a.source, blocking = a.blocking;
    size_t max_frames = a.max_frames;
    struct pys_options opt = {.cpu_state = 1,
                              .max_frames = max_frames,
                              .opcodes = a.opcodes,
                              .locals = a.locals,
                              .native_stacks = a.native};
    pys_session *s = NULL;
    char err[1024];
    rc = a.core ? pys_session_attach_core(&s, a.core, a.executable, a.root, &opt, err, sizeof err)
                : pys_session_attach(&s, pid, &opt, err, sizeof err);
    if (rc < 0)
        return cli_report(rc, err);
    report_core_notes(s);
    test_delay();
    if (a.async_aware) {
        int status = cli_dump_tasks(s, a.async_mode, json, blocking);
        pys_session_free(s);
        if (status == CLI_OK && (fflush(stdout) != 0 || ferror(stdout))) {
            perror("pystrobe: writing the dump");
            return CLI_ERROR;
        }
        return status;
    }
    const struct pys_snapshot *snap;
    int pause_rc = 0;
    /* --locals --blocking: the locals are read while the target is still
     * stopped, so they are those of the stacks shown. */
    rc = blocking ? cli_blocking_snapshot_held(s, &snap, &pause_rc, a.locals)
                  : pys_session_snapshot(s, &snap);
    if (pause_rc < 0 && pause_rc != PYS_E_EXITED) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s: %s",
                 a.native ? "--native (stopping the threads to unwind them)" : "--blocking",
                 pys_session_last_error(s));
        int status = cli_report(rc, msg);
        pys_session_free(s);
        return status;
    }
    if (rc < 0) {
        int status;
        if (rc == PYS_E_EXITED) {
            char msg[128];
            snprintf(msg, sizeof msg, "process %d exited during the dump", pid);
            status = cli_report(rc, msg);
        } else {
            status = cli_report(rc, pys_session_last_error(s));
        }
        pys_session_free(s);
        return status;
    }
    if (json) {
        print_json(stdout, s, snap, a.locals, a.opcodes, a.core);
    } else {
        struct cli_source *src = !source  ? NULL
                                 : a.core ? cli_source_new_root(a.root)
                                          : cli_source_new(pid);
        print_text(stdout, s, snap, max_frames, src, a.opcodes, a.locals, a.core);
        cli_source_free(src);
    }
    if (blocking && a.locals)
        pys_session_resume(s);
    pys_session_free(s);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        perror("pystrobe: writing the dump");
        return CLI_ERROR;
    }
    return CLI_OK;
}
