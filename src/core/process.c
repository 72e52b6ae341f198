/*
 * process: what the kernel, not the target's memory, says about the target:
 * its threads' ids in pystrobe's /proc and their run state, and whether the
 * process still runs the program the session attached to.
 */
#include <stdint.h>
#include <stdio.h>

#include "core/core.h"
#include "platform/platform.h"

/* A successful snapshot looks for an exec at least this often: the old
 * addresses may all be mapped again in the new program (the same Python
 * without address randomisation), where no read fails. */
#define EXEC_CHECK_NS 100000000u
/* ... and a failed one at most this often (failed walks can be many). */
#define EXEC_CHECK_FAILED_NS 1000000u

void prof_process_open(struct pys_session *s)
{
    s->program.fd = -1;
    s->have_program = plat_program_open(s->pid, &s->program) == 0;
    s->program_checked_ns = plat_clock_ns();
    if (plat_tids_init(&s->tids, s->pid) < 0)
        plat_tids_init(&s->tids, 0); /* no mapping: ids as the target has them */
}

void prof_process_close(struct pys_session *s)
{
    if (s->have_program)
        plat_program_close(&s->program);
    s->have_program = 0;
    plat_tids_release(&s->tids);
}

void prof_thread_os_state(struct pys_session *s, struct pys_thread *pt)
{
    pid_t host = 0;
    int state = PYS_E_NOTFOUND;

    if (pt->native_id > 0 && pt->native_id <= INT32_MAX &&
        plat_tids_host(&s->tids, (pid_t)pt->native_id, &host) < 0)
        host = 0;
    pt->host_id = (uint64_t)host;
    pt->status &= ~(PYS_THREAD_ON_CPU | PYS_THREAD_UNKNOWN);
    if (!s->opt.cpu_state) {
        pt->status |= PYS_THREAD_UNKNOWN;
        return;
    }
    if (host > 0) {
        state = plat_task_state(s->pid, host);
        /* In another namespace, a cached pair whose thread is gone may have
         * its id reused by a new thread: look it up again. */
        if (state == PYS_E_NOTFOUND && s->tids.translate) {
            plat_tids_forget(&s->tids, (pid_t)pt->native_id);
            if (plat_tids_host(&s->tids, (pid_t)pt->native_id, &host) == 0) {
                pt->host_id = (uint64_t)host;
                state = plat_task_state(s->pid, host);
            } else {
                pt->host_id = 0;
            }
        }
    }
    if (state == 'R')
        pt->status |= PYS_THREAD_ON_CPU;
    else if (state < 0)
        pt->status |= PYS_THREAD_UNKNOWN;
}

int prof_thread_stopped(struct pys_session *s, const struct pys_thread *pt)
{
    if (s->walker.stack.stopped || s->image)
        return 1;
    if (s->pid <= 0 || pt->host_id == 0 || pt->host_id > INT32_MAX)
        return 0;
    int state = plat_task_state(s->pid, (pid_t)pt->host_id);
    return state == 'T' || state == 't';
}

int prof_exec_during_attach(struct pys_session *s)
{
    return s->have_program && plat_program_same(&s->program, s->runtime) == 0;
}

int prof_exec_check(struct pys_session *s, int failed)
{
    if (s->exec_seen)
        return PYS_E_EXEC;
    if (!s->have_program)
        return 0;
    uint64_t now = plat_clock_ns();
    uint64_t since = now - s->program_checked_ns;
    if (since < (failed ? EXEC_CHECK_FAILED_NS : EXEC_CHECK_NS))
        return 0;
    s->program_checked_ns = now;
    if (plat_program_same(&s->program, s->runtime) != 0)
        return 0; /* the same, or it cannot tell */
    int rc = plat_proc_check(s->pid);
    if (rc == PYS_E_NOPROC || rc == PYS_E_EXITED)
        return prof_fail(s, PYS_E_EXITED, "process %d exited", s->pid);
    char exe[512];
    if (plat_proc_exe(s->pid, exe, sizeof exe) < 0)
        snprintf(exe, sizeof exe, "an unknown executable");
    s->exec_seen = 1;
    return prof_fail(s, PYS_E_EXEC, "process %d exec'd %s", s->pid, exe);
}
