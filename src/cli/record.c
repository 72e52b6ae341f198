/*
 * record: `pystrobe run` and `pystrobe attach`: sample a process's stacks
 * at a fixed rate until it exits, the duration runs out or Ctrl-C, then write
 * the profile (pstats, collapsed stacks or a flame graph). This file is the
 * command's outline; record.h lists where each part lives.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <pystrobe/pystrobe.h>

#include "cli/cli.h"
#include "cli/record.h"

/* The temporary output file an abort must remove, if it has a name. */
static const char *named_tmp(const struct rec_out *o)
{
    return o->tmp[0] && !o->anonymous ? o->tmp : NULL;
}

int cli_record(int argc, char **argv, int attach)
{
    struct rec r;
    int pid = -1, status = CLI_OK;
    pid_t child = -1;
    pys_session *s = NULL;
    pys_profile *prof = NULL;
    struct rec_out out;
    uint64_t unmatched = 0;
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
    /* Before anything starts: a profile that cannot be written is not taken. */
    rc = rec_out_prepare(&out, &r, attach ? pid : -1);
    if (rc != -1)
        return rc;
    rec_abort_cleanup(-1, -1, named_tmp(&out));

    if (attach) {
        rc = pys_session_attach(&s, pid, &opt, err, sizeof err);
        if (rc < 0) {
            rec_out_discard(&out);
            return cli_report(rc, err);
        }
    } else {
        int exited, child_status = 0;
        child = rec_child_start(r.argv, r.detach);
        if (child < 0) {
            rec_out_discard(&out);
            fprintf(stderr, "pystrobe: fork failed: %s\n", strerror(errno));
            return CLI_ERROR;
        }
        rec_abort_cleanup(r.detach ? -1 : child, -1, named_tmp(&out));
        rc = rec_child_attach(child, &opt, &s, &child_status, &exited);
        if (rc < 0) {
            rec_out_discard(&out);
            if (exited) {
                fprintf(stderr, "pystrobe: %s exited before Python started (status %d)\n",
                        r.argv[0], child_status);
                return child_status ? child_status : CLI_NOTPYTHON;
            }
            rec_child_stop(child, -1, 0);
            return rc == PYS_E_PERM ? CLI_PERM : rc == PYS_E_VERSION ? CLI_VERSION : CLI_OK;
        }
        pid = pys_session_pid(s);
        rec_abort_cleanup(r.detach ? -1 : child, r.detach ? -1 : pid, named_tmp(&out));
    }

    prof = pys_profile_new();
    if (!prof) {
        rec_out_discard(&out);
        pys_session_free(s);
        if (child > 0 && !r.detach)
            rec_child_stop(child, pid, 0);
        fprintf(stderr, "pystrobe: out of memory\n");
        return CLI_ERROR;
    }
    pys_profile_set_max_memory(prof, r.max_memory);
    struct pys_profile_info *info = pys_profile_info(prof);
    info->pid = pid;
    info->python_version = pys_session_python_version(s);
    info->interval_ns = r.interval_ns;
    info->mode = rec_mode_names[r.mode];
    info->max_frames = r.max_frames ? r.max_frames : PYS_MAX_FRAMES_DEFAULT;

    struct rec_sessions ss = {.v = {s}, .n = 1, .opt = &opt};
    enum end why = rec_sample_loop(&r, &ss, prof, &unmatched);
    s = ss.v[ss.n - 1];
    rec_print_summary(info, r.rate_hz);
    rec_print_folded(prof, r.max_memory);
    if (r.stats)
        rec_print_stats(s, info);
    status = rec_write_output(&r, &out, prof, pid, unmatched);

    if (child > 0) {
        int st;
        if (why == END_EXITED || why == END_NOT_PYTHON) {
            /* The target ended on its own, or runs on as another program
             * (the profile is written): pass its status on when it ends. */
            if (why == END_NOT_PYTHON)
                fprintf(stderr, "pystrobe: waiting for process %d to end\n", (int)child);
            pid_t w;
            while ((w = waitpid(child, &st, 0)) < 0 && errno == EINTR)
                ;
            if (w == child && status == CLI_OK)
                status = rec_exit_status_of(st);
        } else if (r.detach) {
            fprintf(stderr, "pystrobe: process %d left running (--detach)\n", (int)child);
        } else {
            rec_child_stop(child, pid, why == END_SIGNAL && rec_stop == SIGINT);
        }
    }
    pys_profile_free(prof);
    for (size_t i = 0; i < ss.n; i++)
        pys_session_free(ss.v[i]);
    return status;
}
