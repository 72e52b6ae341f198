/*
 * pause: stop the target's threads around snapshots (--blocking, and the
 * Python module's pause_threads/resume_threads), so that a snapshot is one
 * moment of the target: nothing moves while it is read. The stopping itself
 * is the platform's (ptstop.c); this keeps it per session, with the time
 * the target spent stopped for pys_session_stats.
 */
#include <stdlib.h>
#include <string.h>

#include <pystrobe/pystrobe.h>

#include "core/core.h"

struct prof_pause {
    struct plat_stopper st;
    int active;       /* threads are stopped now */
    uint64_t t0;      /* when the pause under way began */
    uint64_t count;   /* pauses ended */
    uint64_t ns;      /* time stopped, all pauses */
    uint64_t max_ns;  /* the longest */
    uint64_t threads; /* threads stopped, all pauses */
};

void prof_pause_free(struct prof_pause *p)
{
    if (!p)
        return;
    plat_stopper_release(&p->st);
    free(p);
}

int pys_session_pause(pys_session *s)
{
    if (!s || s->pid <= 0)
        return PYS_E_INVAL; /* an image does not run */
    if (!s->pause) {
        s->pause = calloc(1, sizeof *s->pause);
        if (!s->pause)
            return PYS_E_NOMEM;
        plat_stopper_init(&s->pause->st, s->pid);
    }
    struct prof_pause *p = s->pause;
    if (p->active)
        return PYS_E_INVAL;
    p->t0 = plat_clock_ns();
    int rc = plat_stop_all(&p->st);
    if (rc < 0)
        return prof_fail(s, rc, "%s", p->st.err);
    p->active = 1;
    p->threads += p->st.n;
    s->walker.stack.stopped = 1;
    return 0;
}

int pys_session_resume(pys_session *s)
{
    if (!s || !s->pause || !s->pause->active)
        return PYS_E_INVAL;
    struct prof_pause *p = s->pause;
    plat_resume_all(&p->st);
    p->active = 0;
    s->walker.stack.stopped = 0;
    uint64_t dt = plat_clock_ns() - p->t0;
    p->count++;
    p->ns += dt;
    if (dt > p->max_ns)
        p->max_ns = dt;
    return 0;
}

int pys_session_step_thread(pys_session *s, uint64_t thread, unsigned steps)
{
    if (!s || !s->pause || !s->pause->active || thread == 0 || thread > INT32_MAX)
        return PYS_E_INVAL;
    return plat_stop_step(&s->pause->st, (pid_t)thread, steps);
}

void prof_pause_stats(const struct prof_pause *p, struct pys_stats *out)
{
    if (!p)
        return;
    out->pauses = p->count;
    out->paused_ns = p->ns;
    out->paused_max_ns = p->max_ns;
    out->paused_threads = p->threads;
}
