/*
 * blocking: --blocking's snapshots (blocking.c).
 */
#ifndef PYSTROBE_CLI_BLOCKING_H
#define PYSTROBE_CLI_BLOCKING_H

#include <pystrobe/pystrobe.h>

/* pys_session_snapshot with every thread of the target stopped around it,
 * taken again (up to a few times) while a thread's stack cannot be walked.
 * Returns as pys_session_snapshot; if the target could not be stopped,
 * that error, also in *pause_rc (0 otherwise), detail in
 * pys_session_last_error. */
int cli_blocking_snapshot(pys_session *s, const struct pys_snapshot **out, int *pause_rc);
/* The same, but the target is left stopped (unless *pause_rc says it could
 * not be stopped), for more reads of the same moment: the caller resumes it
 * (pys_session_resume). */
int cli_blocking_snapshot_paused(pys_session *s, const struct pys_snapshot **out, int *pause_rc);
/* The same, leaving the target stopped after a snapshot when hold is set
 * (the caller resumes it: pys_session_resume, or pys_session_free). */
int cli_blocking_snapshot_held(pys_session *s, const struct pys_snapshot **out, int *pause_rc,
                               int hold);

#endif
