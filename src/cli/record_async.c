/*
 * record_async: `--async-aware` sampling for run and attach. Each sample
 * reads the target's asyncio task graph (pys_tasks_read) and adds, for each
 * task sampled, its task stack (pys_task_stack: its coroutine frames, a
 * <task> frame naming it, then those of the task awaiting it, to the root)
 * under the thread whose loop holds it.
 */
#include <stdio.h>
#include <stdlib.h>

#include <pystrobe/pystrobe.h>

#include "cli/cli.h"
#include "cli/record.h"

int rec_async_check(pys_session *s)
{
    pys_tasks *t = NULL;
    char err[256] = "";
    int rc = pys_tasks_new(s, &t, err, sizeof err);
    pys_tasks_free(t);
    if (rc == 0)
        return -1;
    char msg[320];
    snprintf(msg, sizeof msg, "--async-aware: process %d: %s", pys_session_pid(s),
             err[0] ? err : pys_strerror(rc));
    return cli_report(rc, msg);
}

/* Add task's stack under thread tid. */
static int add_task(struct rec_async *a, pys_profile *prof, uint64_t tid,
                    const struct pys_task *task, int *truncated)
{
    size_t n = pys_task_stack(a->tasks, task, a->buf, a->cap);
    if (n == 0)
        return 0;
    *truncated |= a->buf[n - 1].kind == PYS_FRAME_TRUNCATED;
    return pys_profile_add(prof, tid, a->buf, n, 1);
}

int rec_async_sample(struct rec_async *a, const struct rec *r, pys_session *s, pys_profile *prof,
                     int *stacks, int *truncated)
{
    const struct pys_task_graph *g;
    int rc;
    *stacks = *truncated = 0;
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
    struct pys_tasks_options opt = {r->async_mode, 0, 0, 0};
    if ((rc = pys_tasks_read(a->tasks, &opt, &g)) < 0)
        return rc;
    for (size_t i = 0; i < g->nlists; i++) {
        const struct pys_task_list *l = &g->lists[i];
        if (l->error)
            continue;
        for (size_t k = 0; k < l->ntasks; k++) {
            const struct pys_task *task = &l->tasks[k];
            /* running: the list is that task, then what awaits it. */
            if (r->async_mode == PYS_TASKS_RUNNING ? k > 0 : (task->flags & PYS_TASK_AWAITING))
                continue;
            if ((rc = add_task(a, prof, l->native_id, task, truncated)) < 0)
                return rc;
            (*stacks)++;
        }
    }
    return 0;
}

void rec_async_release(struct rec_async *a)
{
    pys_tasks_free(a->tasks);
    free(a->buf);
    a->tasks = NULL;
    a->buf = NULL;
    a->s = NULL;
}
