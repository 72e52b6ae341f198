/*
 * record: `pystrobe run` and `pystrobe attach`: sample a process's stacks
 * at a fixed rate until it exits, the duration runs out or Ctrl-C, then write
 * the profile (pstats, collapsed stacks or a flame graph). This file is the
 * command's outline; record.h lists where each part lives.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <pystrobe/pystrobe.h>

#include "cli/cli.h"
#include "cli/record.h"

int cli_record(int argc, char **argv, int attach)
{
    struct rec r;
    int pid = -1, status = CLI_OK;
    pid_t child = -1;
    pys_session *s = NULL;
    pys_profile *prof = NULL;
    char err[512];

    int rc = rec_parse_args(&r, argc, argv, attach, &pid);
    if (rc != -1)
        return rc;
    struct pys_options opt = {.cpu_state = r.mode == MODE_CPU,
                              .native = r.native,
                              .gc = r.gc,
                              .frame_cache = !r.read_only,
                              .reuse_idle = !r.every_thread,
                              .max_frames = r.max_frames};
    prctl(PR_SET_TIMERSLACK, 1UL);
    rec_signals_install();

    if (attach) {
        rc = pys_session_attach(&s, pid, &opt, err, sizeof err);
        if (rc < 0)
            return cli_report(rc, err);
    } else {
        int exited, child_status = 0;
        child = rec_child_start(r.argv);
        if (child < 0) {
            fprintf(stderr, "pystrobe: fork failed: %s\n", strerror(errno));
            return CLI_ERROR;
        }
        rc = rec_child_attach(child, &opt, &s, &child_status, &exited);
        if (rc < 0) {
            if (exited) {
                fprintf(stderr, "pystrobe: %s exited before Python started (status %d)\n",
                        r.argv[0], child_status);
                return child_status ? child_status : CLI_NOTPYTHON;
            }
            rec_child_stop(child, -1, 0);
            return rc == PYS_E_PERM ? CLI_PERM : rc == PYS_E_VERSION ? CLI_VERSION : CLI_OK;
        }
        pid = pys_session_pid(s);
    }

    prof = pys_profile_new();
    if (!prof) {
        pys_session_free(s);
        fprintf(stderr, "pystrobe: out of memory\n");
        return CLI_ERROR;
    }
    struct pys_profile_info *info = pys_profile_info(prof);
    info->pid = pid;
    info->python_version = pys_session_python_version(s);
    info->interval_ns = r.interval_ns;
    info->mode = rec_mode_names[r.mode];
    info->max_frames = r.max_frames ? r.max_frames : PYS_MAX_FRAMES_DEFAULT;

    enum end why = rec_sample_loop(&r, s, prof);
    rec_print_summary(info, r.rate_hz);
    if (r.stats)
        rec_print_stats(s, info);
    status = rec_write_output(&r, prof, pid);

    if (child > 0) {
        int st;
        if (why == END_EXITED) {
            /* The target ended on its own: pass its status on. */
            if (waitpid(child, &st, 0) == child && status == CLI_OK)
                status = rec_exit_status_of(st);
        } else {
            rec_child_stop(child, pid, why == END_SIGNAL);
        }
    }
    pys_profile_free(prof);
    pys_session_free(s);
    return status;
}
