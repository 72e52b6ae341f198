/*
 * dump: `pystrobe dump [--json] [--max-frames N] PID`: attach, take one snapshot, print every
 * interpreter's threads and their stacks, most recent call last, as a
 * traceback does (or as one JSON document, docs/cli.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pystrobe/pystrobe.h>

#include "cli/cli.h"
#include "output/json.h"

static const char DUMP_USAGE[] =
    "usage: pystrobe dump [--json] [--max-frames N] PID\n"
    "       pystrobe dump [--json] [--max-frames N] -p PID\n"
    "\n"
    "  -p, --pid PID    the process, as py-spy writes it\n"
    "  --json           one JSON document instead of the text\n"
    "  --max-frames N   frames kept of a stack, 16 to 1000000 (default 8192): a deeper\n"
    "                   one keeps its innermost N-1 over a <truncated> frame\n";

/* Text from the target on a terminal: control characters escaped. */
static void put_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
}

static void put_num(FILE *f, int32_t v)
{
    if (v < 0)
        fputc('?', f);
    else
        fprintf(f, "%d", (int)v);
}

static void print_text(FILE *f, const pys_session *s, const struct pys_snapshot *snap,
                       size_t max_frames)
{
    fprintf(f, "Process %d: Python %s (", pys_session_pid(s), pys_session_python_version_text(s));
    put_text(f, pys_session_image_path(s));
    fputs(")\n", f);
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
                put_text(f, t->error_text ? t->error_text : pys_strerror(t->error));
                fputs(")\n", f);
                continue;
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
                fputs("    File \"", f);
                put_text(f, fr->filename);
                fputs("\", line ", f);
                put_num(f, fr->lineno);
                fputs(", in ", f);
                put_text(f, fr->qualname);
                fputs("  [", f);
                put_num(f, fr->lineno);
                fputc(':', f);
                put_num(f, fr->col);
                fputc('-', f);
                put_num(f, fr->end_lineno);
                fputc(':', f);
                put_num(f, fr->end_col);
                fputs("]\n", f);
            }
        }
    }
}

static void print_json(FILE *f, const pys_session *s, const struct pys_snapshot *snap)
{
    struct out_json j;
    out_json_init(&j, f);
    out_json_begin_object(&j);
    out_json_key(&j, "pid");
    out_json_int(&j, pys_session_pid(s));
    out_json_key(&j, "python_version");
    out_json_string(&j, pys_session_python_version_text(s));
    out_json_key(&j, "image");
    out_json_string(&j, pys_session_image_path(s));
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
            if (t->error)
                out_json_string(&j, t->error_text ? t->error_text : pys_strerror(t->error));
            else
                out_json_null(&j);
            out_json_key(&j, "frames");
            out_json_begin_array(&j);
            for (size_t n = t->nframes; n-- > 0;) {
                const struct pys_frame *fr = &t->frames[n];
                out_json_begin_object(&j);
                out_json_key(&j, "filename");
                out_json_string(&j, fr->filename);
                out_json_key(&j, "qualname");
                out_json_string(&j, fr->qualname);
                out_json_key(&j, "firstlineno");
                out_json_int(&j, fr->firstlineno);
                out_json_key(&j, "lineno");
                out_json_int_or_null(&j, fr->lineno);
                out_json_key(&j, "end_lineno");
                out_json_int_or_null(&j, fr->end_lineno);
                out_json_key(&j, "col_offset");
                out_json_int_or_null(&j, fr->col);
                out_json_key(&j, "end_col_offset");
                out_json_int_or_null(&j, fr->end_col);
                out_json_key(&j, "lasti");
                out_json_int(&j, fr->lasti);
                out_json_end_object(&j);
            }
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
 * and the snapshot, so a test can make the target exit in between. */
static void test_delay(void)
{
    const char *v = getenv("PYSTROBE_TEST_DELAY_AFTER_ATTACH_MS");
    if (!v)
        return;
    long ms = strtol(v, NULL, 10);
    if (ms <= 0 || ms > 60000)
        return;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int cli_dump(int argc, char **argv)
{
    int json = 0, pid = -1;
    size_t max_frames = PYS_MAX_FRAMES_DEFAULT;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--max-frames") == 0) {
            if (i + 1 == argc || cli_parse_max_frames(argv[i + 1], &max_frames) < 0) {
                fprintf(stderr, "pystrobe: bad --max-frames '%s' (%d to %d)\n%s",
                        i + 1 < argc ? argv[i + 1] : "", PYS_MAX_FRAMES_MIN, PYS_MAX_FRAMES_MAX,
                        DUMP_USAGE);
                return CLI_USAGE;
            }
            i++;
        } else if ((strcmp(argv[i], "-p") == 0 || strcmp(argv[i], "--pid") == 0) && pid < 0) {
            /* py-spy's way of naming the process */
            pid = i + 1 < argc ? cli_parse_pid(argv[i + 1]) : -1;
            if (pid < 0) {
                fprintf(stderr, "pystrobe: not a process id: '%s'\n%s",
                        i + 1 < argc ? argv[i + 1] : "", DUMP_USAGE);
                return CLI_USAGE;
            }
            i++;
        } else if (strncmp(argv[i], "--pid=", 6) == 0 && pid < 0) {
            pid = cli_parse_pid(argv[i] + 6);
            if (pid < 0) {
                fprintf(stderr, "pystrobe: not a process id: '%s'\n%s", argv[i] + 6, DUMP_USAGE);
                return CLI_USAGE;
            }
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(DUMP_USAGE, stdout);
            return CLI_OK;
        } else if (pid < 0 && argv[i][0] != '-') {
            pid = cli_parse_pid(argv[i]);
            if (pid < 0) {
                fprintf(stderr, "pystrobe: not a process id: '%s'\n%s", argv[i], DUMP_USAGE);
                return CLI_USAGE;
            }
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "pystrobe: unknown option '%s'\n%s", argv[i], DUMP_USAGE);
            return CLI_USAGE;
        } else {
            fprintf(stderr, "pystrobe: unexpected argument '%s'\n%s", argv[i], DUMP_USAGE);
            return CLI_USAGE;
        }
    }
    if (pid < 0) {
        fprintf(stderr, "pystrobe: dump needs a process id\n%s", DUMP_USAGE);
        return CLI_USAGE;
    }
    struct pys_options opt = {.cpu_state = 1, .max_frames = max_frames};
    pys_session *s = NULL;
    char err[512];
    int rc = pys_session_attach(&s, pid, &opt, err, sizeof err);
    if (rc < 0)
        return cli_report(rc, err);
    test_delay();
    const struct pys_snapshot *snap;
    rc = pys_session_snapshot(s, &snap);
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
    if (json)
        print_json(stdout, s, snap);
    else
        print_text(stdout, s, snap, max_frames);
    pys_session_free(s);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        perror("pystrobe: writing the dump");
        return CLI_ERROR;
    }
    return CLI_OK;
}
