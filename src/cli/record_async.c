/*
 * record_async: `--async-aware` sampling for run and attach. Each sample
 * reads the target's asyncio task graph (pys_tasks_read) and turns it into
 * a snapshot of the same shape as a thread snapshot, whose "threads" are
 * task stacks (pys_task_stack: a task's coroutine frames, a <task> frame
 * naming it, then those of the task awaiting it, to the root; a running
 * task's frames with a <GC> marker where it started a collection, unless
 * --no-gc), each filed
 * under the thread whose loop holds the task and carrying that thread's
 * ids and status from the thread snapshot taken just before. Everything
 * downstream (the profile, the filters, the recording, the stream outputs,
 * the live view, the trace) takes it as it takes thread stacks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pystrobe/pystrobe.h>

#include "cli/cli.h"
#include "cli/record.h"
#include "util/array.h"

int rec_async_usable(pys_session *s, char *why, size_t n)
{
    pys_tasks *t = NULL;
    int rc = pys_tasks_new(s, &t, why, n);
    pys_tasks_free(t);
    return rc;
}

int rec_async_check(pys_session *s)
{
    char err[256] = "";
    int rc = rec_async_usable(s, err, sizeof err);
    if (rc == 0)
        return -1;
    char msg[320];
    snprintf(msg, sizeof msg, "--async-aware: process %d: %s", pys_session_pid(s),
             err[0] ? err : pys_strerror(rc));
    return cli_report(rc, msg);
}

/* The thread of snapshot snap that list l belongs to, or NULL (the
 * interpreter's list of tasks whose thread is gone, or a thread the
 * snapshot did not see). */
static const struct pys_thread *thread_of(const struct pys_snapshot *snap,
                                          const struct pys_task_list *l)
{
    if (!snap || !l->tstate)
        return NULL;
    for (size_t i = 0; i < snap->ninterps; i++) {
        const struct pys_interp *in = &snap->interps[i];
        if (in->id != l->interp_id)
            continue;
        for (size_t k = 0; k < in->nthreads; k++)
            if (in->threads[k].tstate == l->tstate)
                return &in->threads[k];
    }
    return NULL;
}

static const struct pys_interp *interp_of(const struct pys_snapshot *snap, int64_t interp)
{
    for (size_t i = 0; snap && i < snap->ninterps; i++)
        if (snap->interps[i].id == interp)
            return &snap->interps[i];
    return NULL;
}

/* Append task's stack as a thread of the snapshot being built, with the
 * ids and status of th (NULL: none known). */
static int add_task(struct rec_async *a, const struct pys_task_list *l, const struct pys_thread *th,
                    const struct pys_task *task)
{
    size_t n = pys_task_stack(a->tasks, task, a->buf, a->cap);
    if (n == 0)
        return 0;
    if (util_array_reserve((void **)&a->frames, &a->capframes, a->nframes + n, sizeof *a->frames) <
            0 ||
        util_array_reserve((void **)&a->threads, &a->capthreads, a->nthreads + 1,
                           sizeof *a->threads) < 0 ||
        util_array_reserve((void **)&a->off, &a->capoff, a->nthreads + 1, sizeof *a->off) < 0)
        return PYS_E_NOMEM;
    memcpy(a->frames + a->nframes, a->buf, n * sizeof *a->buf);
    struct pys_thread *t = &a->threads[a->nthreads];
    memset(t, 0, sizeof *t);
    t->native_id = l->native_id;
    if (th) {
        t->host_id = th->host_id;
        t->thread_id = th->thread_id;
        t->status = th->status;
    }
    t->tstate = l->tstate;
    t->nframes = n;
    a->off[a->nthreads++] = a->nframes;
    a->nframes += n;
    return 0;
}

/* Keep the promise of pys_interp.gc_running, that only while it is set
 * may a stack of the interpreter hold a <GC> frame: the graph, read after
 * the threads, can see a collection their snapshot did not. Looks through
 * the stack add_task added last, unless the interpreter's flag is set. */
static void note_gc(struct rec_async *a)
{
    struct pys_interp *in = &a->interps[a->ninterps - 1];
    if (in->gc_running || a->nthreads <= a->ioff[a->ninterps - 1])
        return; /* set, or no stack of this interpreter yet */
    const struct pys_frame *f = a->frames + a->off[a->nthreads - 1];
    for (size_t i = a->off[a->nthreads - 1]; i < a->nframes && !in->gc_running; i++, f++)
        in->gc_running = f->kind == PYS_FRAME_GC;
}

int rec_async_sample(struct rec_async *a, const struct rec *r, pys_session *s,
                     const struct pys_snapshot *threads, const struct pys_snapshot **out)
{
    const struct pys_task_graph *g;
    int rc;
    if (a->s != s) {
        /* A new program (an exec followed): a new reader. */
        pys_tasks_free(a->tasks);
        a->tasks = NULL;
        a->s = NULL;
        if ((rc = pys_tasks_new(s, &a->tasks, NULL, 0)) < 0)
            return rc;
        a->s = s;
    }
    if (!a->buf) {
        a->cap = r->max_frames ? r->max_frames : PYS_MAX_FRAMES_DEFAULT;
        if (!(a->buf = malloc(a->cap * sizeof *a->buf)))
            return PYS_E_NOMEM;
    }
    struct pys_tasks_options opt = {r->async_mode, 0, 0, 0, r->gc};
    if ((rc = pys_tasks_read(a->tasks, &opt, &g)) < 0)
        return rc;
    a->nframes = a->nthreads = a->ninterps = 0;
    for (size_t i = 0; i < g->nlists; i++) {
        const struct pys_task_list *l = &g->lists[i];
        /* The lists come interpreter by interpreter: one pys_interp each. */
        if (a->ninterps == 0 || a->interps[a->ninterps - 1].id != l->interp_id) {
            if (util_array_reserve((void **)&a->interps, &a->capinterps, a->ninterps + 1,
                                   sizeof *a->interps) < 0 ||
                util_array_reserve((void **)&a->ioff, &a->capioff, a->ninterps + 1,
                                   sizeof *a->ioff) < 0)
                return PYS_E_NOMEM;
            const struct pys_interp *ti = interp_of(threads, l->interp_id);
            a->interps[a->ninterps] = (struct pys_interp){.id = l->interp_id,
                                                          .gil_holder = ti ? ti->gil_holder : 0,
                                                          .gc_running = ti && ti->gc_running};
            a->ioff[a->ninterps++] = a->nthreads;
        }
        if (l->error)
            continue;
        const struct pys_thread *th = thread_of(threads, l);
        for (size_t k = 0; k < l->ntasks; k++) {
            const struct pys_task *task = &l->tasks[k];
            /* running: the list is that task, then what awaits it. */
            if (r->async_mode == PYS_TASKS_RUNNING ? k > 0 : (task->flags & PYS_TASK_AWAITING))
                continue;
            if ((rc = add_task(a, l, th, task)) < 0)
                return rc;
            if (r->gc)
                note_gc(a);
        }
    }
    /* The arrays stay put now: point into them. */
    for (size_t i = 0; i < a->nthreads; i++)
        a->threads[i].frames = a->frames + a->off[i];
    for (size_t i = 0; i < a->ninterps; i++) {
        size_t end = i + 1 < a->ninterps ? a->ioff[i + 1] : a->nthreads;
        a->interps[i].nthreads = end - a->ioff[i];
        a->interps[i].threads = a->interps[i].nthreads ? a->threads + a->ioff[i] : NULL;
    }
    a->snap = (struct pys_snapshot){a->ninterps, a->interps};
    *out = &a->snap;
    return 0;
}

void rec_async_release(struct rec_async *a)
{
    pys_tasks_free(a->tasks);
    free(a->buf);
    free(a->frames);
    free(a->threads);
    free(a->off);
    free(a->interps);
    free(a->ioff);
    memset(a, 0, sizeof *a);
}
