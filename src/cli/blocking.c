/*
 * blocking: one snapshot of a stopped target (--blocking, for run, attach
 * and dump). Every thread is stopped around the snapshot, so nothing moves
 * while it reads. A thread may still be stopped between two stores the
 * compiler put in either order (a generator's frame made current before
 * its caller is linked to it): a moment that is real but cannot be walked.
 * Such a snapshot is taken again a moment later, after letting the target
 * run, rather than counted failed.
 */
#include "cli/blocking.h"

#include <stdio.h>

/* Snapshots taken again, still stopped, when a thread's stack could not be
 * walked, each after that thread ran STEP_INSNS more instructions: the
 * stores that make a stack whole lie a few instructions apart. */
#define BLOCKING_TRIES 16
#define STEP_INSNS 4

/* Step each thread whose stack could not be read: how many were stepped. */
static int step_unreadable(pys_session *s, const struct pys_snapshot *snap)
{
    int stepped = 0;
    for (size_t i = 0; i < snap->ninterps; i++)
        for (size_t k = 0; k < snap->interps[i].nthreads; k++) {
            const struct pys_thread *t = &snap->interps[i].threads[k];
            uint64_t id = t->host_id ? t->host_id : t->native_id;
            if (t->error && id && pys_session_step_thread(s, id, STEP_INSNS) == 0)
                stepped++;
        }
    return stepped;
}

int cli_blocking_snapshot_paused(pys_session *s, const struct pys_snapshot **out, int *pause_rc)
{
    int rc;
    *pause_rc = 0;
    if ((rc = pys_session_pause(s)) < 0) {
        *pause_rc = rc;
        return rc;
    }
    for (int attempt = 0;; attempt++) {
        rc = pys_session_snapshot(s, out);
        if (rc < 0 || attempt + 1 == BLOCKING_TRIES || step_unreadable(s, *out) == 0)
            break;
    }
    return rc;
}

int cli_blocking_snapshot_held(pys_session *s, const struct pys_snapshot **out, int *pause_rc,
                               int hold)
{
    int rc = cli_blocking_snapshot_paused(s, out, pause_rc);
    if (*pause_rc == 0 && (!hold || rc < 0))
        pys_session_resume(s);
    return rc;
}

int cli_blocking_snapshot(pys_session *s, const struct pys_snapshot **out, int *pause_rc)
{
    return cli_blocking_snapshot_held(s, out, pause_rc, 0);
}
