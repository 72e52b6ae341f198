/*
 * dump_async: `pystrobe dump --async-aware`: the target's asyncio tasks,
 * per thread, each with its name, its coroutine stack (most recent call
 * last, as a traceback) and what awaits it; or, with --json, the same graph
 * as one JSON document (docs/cli.md).
 */
#include <stdio.h>
#include <string.h>

#include <pystrobe/pystrobe.h>

#include "cli/cli.h"
#include "output/json.h"

/* A task's name as a terminal shows it: cut at 200 bytes (the JSON has it
 * whole). */
static void put_name(FILE *f, const char *name)
{
    char buf[204];
    size_t n = strlen(name);
    if (n > 200) {
        memcpy(buf, name, 200);
        /* Not inside a UTF-8 sequence: back to the start of the character
         * the cut falls in (name[200] exists: n > 200). */
        size_t k = 200;
        while (k > 0 && ((unsigned char)name[k] & 0xc0) == 0x80)
            k--;
        memcpy(buf + k, "...", 4);
        name = buf;
    }
    fputc('\'', f);
    cli_put_text(f, name);
    fputc('\'', f);
}

static void put_task_ref(FILE *f, const pys_tasks *t, uint64_t addr)
{
    const struct pys_task *w = pys_task_graph_find(t, addr);
    if (w && (w->flags & PYS_TASK_IS_TASK)) {
        fputs("task ", f);
        put_name(f, w->name);
        fprintf(f, " (0x%llx)", (unsigned long long)addr);
    } else {
        fprintf(f, "future 0x%llx", (unsigned long long)addr);
    }
}

static void print_text(FILE *f, pys_session *s, const pys_tasks *t, const struct pys_task_graph *g,
                       int mode, size_t max_chain)
{
    fprintf(f, "Process %d", pys_session_pid(s));
    cli_dump_python(f, s);
    fprintf(f, ", asyncio tasks (%s)\n", mode == PYS_TASKS_ALL ? "all" : "running");
    size_t shown = 0;
    for (size_t i = 0; i < g->nlists; i++) {
        const struct pys_task_list *l = &g->lists[i];
        if (l->ntasks == 0 && (l->native_id == 0 || mode == PYS_TASKS_RUNNING))
            continue;
        if (l->native_id)
            fprintf(f, "\nInterpreter %lld, thread %llu:\n", (long long)l->interp_id,
                    (unsigned long long)l->native_id);
        else
            fprintf(f, "\nInterpreter %lld, tasks whose thread is gone:\n",
                    (long long)l->interp_id);
        if (l->error) {
            fprintf(f, "  (running task unreadable: %s)\n", pys_strerror(l->error));
            continue;
        }
        if (l->ntasks == 0)
            fputs("  (no tasks)\n", f);
        for (size_t k = 0; k < l->ntasks; k++) {
            const struct pys_task *task = &l->tasks[k];
            shown++;
            fputs("  Task ", f);
            put_name(f, task->name);
            fprintf(f, " (0x%llx)", (unsigned long long)task->addr);
            if (task->flags & PYS_TASK_RUNNING)
                fputs(" [running]", f);
            if (task->flags & PYS_TASK_DONE)
                fputs(" [done]", f);
            fputs(":\n", f);
            for (size_t n = task->nframes; n-- > 0;) {
                const struct pys_frame *fr = &task->frames[n];
                if (fr->kind == PYS_FRAME_TRUNCATED) {
                    fprintf(f,
                            "    <truncated> (a chain of more than %zu frames: its outermost "
                            "part is left out)\n",
                            max_chain);
                    continue;
                }
                cli_dump_frame_line(f, fr);
                fputc('\n', f);
            }
            if (task->nawaiters == 0) {
                fputs("    awaited by: nothing\n", f);
                continue;
            }
            for (size_t a = 0; a < task->nawaiters; a++) {
                fputs(a == 0 ? "    awaited by: " : "                ", f);
                put_task_ref(f, t, task->awaiters[a]);
                fputc('\n', f);
            }
        }
    }
    if (shown == 0)
        fputs(mode == PYS_TASKS_RUNNING ? "\n(no task running)\n" : "\n(no tasks)\n", f);
}

static void print_json(FILE *f, pys_session *s, const pys_tasks *t, const struct pys_task_graph *g,
                       int mode)
{
    struct out_json j;
    out_json_init(&j, f);
    cli_dump_json_head(&j, s, pys_session_pid(s));
    out_json_key(&j, "async_mode");
    out_json_string(&j, mode == PYS_TASKS_ALL ? "all" : "running");
    out_json_key(&j, "task_lists");
    out_json_begin_array(&j);
    for (size_t i = 0; i < g->nlists; i++) {
        const struct pys_task_list *l = &g->lists[i];
        out_json_begin_object(&j);
        out_json_key(&j, "interpreter_id");
        out_json_int(&j, l->interp_id);
        out_json_key(&j, "native_thread_id");
        out_json_int(&j, (int64_t)l->native_id);
        out_json_key(&j, "running_task");
        if (l->running_task)
            out_json_int(&j, (int64_t)l->running_task);
        else
            out_json_null(&j);
        out_json_key(&j, "error");
        out_json_string_or_null(&j, l->error ? pys_strerror(l->error) : NULL);
        out_json_key(&j, "tasks");
        out_json_begin_array(&j);
        for (size_t k = 0; k < l->ntasks; k++) {
            const struct pys_task *task = &l->tasks[k];
            out_json_begin_object(&j);
            out_json_key(&j, "id");
            out_json_int(&j, (int64_t)task->addr);
            out_json_key(&j, "name");
            out_json_string(&j, task->name);
            out_json_key(&j, "running");
            out_json_bool(&j, task->flags & PYS_TASK_RUNNING);
            out_json_key(&j, "done");
            out_json_bool(&j, task->flags & PYS_TASK_DONE);
            out_json_key(&j, "frames"); /* outermost first, as dump's */
            out_json_begin_array(&j);
            for (size_t n = task->nframes; n-- > 0;) {
                const struct pys_frame *fr = &task->frames[n];
                out_json_begin_object(&j);
                out_json_key(&j, "filename");
                out_json_string(&j, fr->filename);
                out_json_key(&j, "qualname");
                out_json_string(&j, fr->qualname);
                cli_dump_json_position(&j, fr);
                out_json_end_object(&j);
            }
            out_json_end_array(&j);
            out_json_key(&j, "awaited_by");
            out_json_begin_array(&j);
            for (size_t a = 0; a < task->nawaiters; a++) {
                const struct pys_task *w = pys_task_graph_find(t, task->awaiters[a]);
                out_json_begin_object(&j);
                out_json_key(&j, "id");
                out_json_int(&j, (int64_t)task->awaiters[a]);
                out_json_key(&j, "is_task");
                out_json_bool(&j, w && (w->flags & PYS_TASK_IS_TASK));
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

int cli_dump_tasks(pys_session *s, int mode, int json, int blocking)
{
    pys_tasks *t = NULL;
    const struct pys_task_graph *g;
    char err[256] = "", msg[320];
    int rc = pys_tasks_new(s, &t, err, sizeof err);
    if (rc < 0) {
        snprintf(msg, sizeof msg, "--async-aware: process %d: %s", pys_session_pid(s),
                 err[0] ? err : pys_strerror(rc));
        return cli_report(rc, msg);
    }
    struct pys_tasks_options opt = {mode, 0, 0, 0, 0};
    /* --blocking: the graph read with every thread stopped (one moment). */
    if (blocking && (rc = pys_session_pause(s)) < 0) {
        snprintf(msg, sizeof msg, "--blocking: %s", pys_session_last_error(s));
        pys_tasks_free(t);
        return cli_report(rc, msg);
    }
    rc = pys_tasks_read(t, &opt, &g);
    if (blocking)
        pys_session_resume(s);
    if (rc < 0) {
        snprintf(msg, sizeof msg, "process %d: %s", pys_session_pid(s),
                 pys_tasks_last_error(t)[0] ? pys_tasks_last_error(t) : pys_strerror(rc));
        int status = cli_report(rc, msg);
        pys_tasks_free(t);
        return status;
    }
    if (json)
        print_json(stdout, s, t, g, mode);
    else
        print_text(stdout, s, t, g, mode, PYS_TASK_CHAIN_DEFAULT);
    pys_tasks_free(t);
    return CLI_OK;
}
