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
#include <unistd.h>

#include <pystrobe/pystrobe.h>

#include "cli/cli.h"
#include "cli/live.h"
#include "cli/record.h"
#include "output/chrometrace.h"
#include "output/recording.h"

/* The temporary output file an abort must remove, if it has a name. */
static const char *named_tmp(const struct rec_out *o)
{
    return o->tmp[0] && !o->anonymous ? o->tmp : NULL;
}

/* One call of cli_record: what was asked and what it holds. */
struct job {
    struct rec r;
    struct pys_options opt;
    struct rec_out out;
    int pid;        /* the target's; -1 until known (run) */
    pid_t child;    /* run's command, or -1 */
    pys_session *s; /* the session sampling starts with, once attached */
    pys_profile *prof;
    struct rec_bin *bin; /* the recording, or NULL */
    /* The sources of the heatmap and the recording (NULL: neither, or out
     * of memory: the heatmap reads them at the end). */
    struct rec_sources *sources;
};

/* The outputs made ready: the profile's file (none with --binary) and the
 * recording's where its name is known. Returns -1, or the exit status to
 * end with. */
static int prepare_outputs(struct job *j)
{
    const struct rec *r = &j->r;
    j->out.fd = -1;
    /* The live view writes a profile only when given -o. */
    if (!r->binary && (!r->live || r->output)) {
        int rc = rec_out_prepare(&j->out, r, r->attach ? j->pid : -1);
        if (rc != -1)
            return rc;
    }
    if (r->record_path || (r->binary && r->attach)) {
        j->bin = rec_bin_open(r, j->pid);
        if (!j->bin) {
            rec_out_discard(&j->out);
            return CLI_ERROR;
        }
    }
    return -1;
}

/* attach: attach to j->pid. Returns -1, or the exit status to end with
 * (the output discarded). */
static int attach_target(struct job *j)
{
    char err[512];
    int rc = pys_session_attach(&j->s, j->pid, &j->opt, err, sizeof err);
    if (rc < 0) {
        rec_out_discard(&j->out);
        return cli_report(rc, err);
    }
    return -1;
}

/* run: start the command and attach to its Python. Returns -1 (j->child,
 * j->pid and j->s set), or the exit status to end with (the output
 * discarded, the command ended unless it ended first). */
static int start_target(struct job *j)
{
    const struct rec *r = &j->r;
    int exited, child_status = 0;
    j->child = rec_child_start(r->argv, r->detach);
    if (j->child < 0) {
        rec_out_discard(&j->out);
        fprintf(stderr, "pystrobe: fork failed: %s\n", strerror(errno));
        return CLI_ERROR;
    }
    rec_abort_cleanup(r->detach ? -1 : j->child, -1, named_tmp(&j->out));
    int rc = rec_child_attach(j->child, &j->opt, &j->s, &child_status, &exited);
    if (rc < 0) {
        rec_out_discard(&j->out);
        if (exited) {
            fprintf(stderr, "pystrobe: %s exited before Python started (status %d)\n", r->argv[0],
                    child_status);
            return child_status ? child_status : CLI_NOTPYTHON;
        }
        rec_child_stop(j->child, -1, 0);
        return rc == PYS_E_PERM ? CLI_PERM : rc == PYS_E_VERSION ? CLI_VERSION : CLI_OK;
    }
    j->pid = pys_session_pid(j->s);
    rec_abort_cleanup(r->detach ? -1 : j->child, r->detach ? -1 : j->pid, named_tmp(&j->out));
    return -1;
}

/* Everything before sampling: the output made ready, the target attached
 * or started, the profile made. Returns -1, or the exit status to end with
 * (all that was set up released). */
static int job_setup(struct job *j)
{
    const struct rec *r = &j->r;
    prctl(PR_SET_TIMERSLACK, 1UL);
    rec_signals_install();
    /* Before anything starts: a profile that cannot be written is not taken. */
    int rc = prepare_outputs(j);
    if (rc != -1)
        return rc;
    rec_abort_cleanup(-1, -1, named_tmp(&j->out));
    /* --subprocesses: what run's command leaves behind when its parent
     * exits stays pystrobe's descendant, to be followed. */
    if (r->subprocesses && !r->attach)
        prctl(PR_SET_CHILD_SUBREAPER, 1UL);
    rc = r->attach ? attach_target(j) : start_target(j);
    if (rc != -1)
        return rc;
    /* Taken at once: the target's root and working directory stay open
     * after it ends. */
    if (r->format == FMT_HEATMAP || r->binary || r->record_path) {
        j->sources = rec_sources_new(j->pid, r->format == FMT_HEATMAP);
        j->out.sources = j->sources;
    }
    if (r->async_aware && (rc = rec_async_check(j->s)) != -1) {
        rec_out_discard(&j->out);
        rec_sources_free(j->sources);
        pys_session_free(j->s);
        if (j->child > 0 && !r->detach)
            rec_child_stop(j->child, j->pid, 0);
        return rc;
    }

    j->prof = pys_profile_new();
    if (j->prof)
        pys_profile_count_opcodes(j->prof, r->opcodes);
    if (!j->prof) {
        rec_out_discard(&j->out);
        rec_sources_free(j->sources);
        pys_session_free(j->s);
        if (j->child > 0 && !r->detach)
            rec_child_stop(j->child, j->pid, 0);
        fprintf(stderr, "pystrobe: out of memory\n");
        return CLI_ERROR;
    }
    /* With --binary the profile only keeps the run's counters: bounded
     * small, so that memory stays flat however many stacks are recorded. */
    pys_profile_set_max_memory(j->prof, r->binary ? (uint64_t)1 << 20 : r->max_memory);
    struct pys_profile_info *info = pys_profile_info(j->prof);
    info->pid = j->pid;
    info->python_version = pys_session_python_version(j->s);
    info->interval_ns = r->interval_ns;
    info->mode = rec_mode_names[r->mode];
    info->max_frames = r->max_frames ? r->max_frames : PYS_MAX_FRAMES_DEFAULT;
    return -1;
}

/* After sampling ended (why) with status from writing the profile: end
 * run's command, or wait for it and take its exit status when it ended or
 * became another program on its own. Returns the exit status. */
static int end_child(const struct job *j, enum end why, int status)
{
    if (why == END_EXITED || why == END_NOT_PYTHON) {
        /* The target ended on its own, or runs on as another program (the
         * profile is written): pass its status on when it ends. */
        int st;
        if (why == END_NOT_PYTHON)
            fprintf(stderr, "pystrobe: waiting for process %d to end\n", (int)j->child);
        pid_t w;
        while ((w = waitpid(j->child, &st, 0)) < 0 && errno == EINTR)
            ;
        if (w == j->child && status == CLI_OK)
            status = rec_exit_status_of(st);
    } else if (j->r.detach) {
        fprintf(stderr, "pystrobe: process %d left running (--detach)\n", (int)j->child);
    } else {
        rec_child_stop(j->child, j->pid, why == END_SIGNAL && rec_stop == SIGINT);
    }
    return status;
}

/* Release what job_setup made, when sampling is not going to start. */
static void job_abandon(struct job *j)
{
    rec_bin_free(j->bin);
    j->bin = NULL;
    rec_out_discard(&j->out);
    rec_sources_free(j->sources);
    j->sources = NULL;
    if (j->child > 0 && !j->r.detach)
        rec_child_stop(j->child, j->pid, 0);
    pys_profile_free(j->prof);
    pys_session_free(j->s);
}

/* The consumers of the sample stream beside the profile: the recording,
 * the outputs written from the stream, into ks; the live view (lv, or
 * NULL) into live_ks. Returns -1, or the exit status to end with (the job
 * released). */
static int start_sinks(struct job *j, struct live *lv, struct rec_sinks *ks,
                       struct rec_sinks *live_ks)
{
    int rc = rec_sinks_start(&j->r, j->s, j->pid, &j->bin, ks);
    if (rc != -1) {
        job_abandon(j);
        return rc;
    }
    /* The sources, each read when first sampled, after the recording's
     * sink (its new frames name the files); with --merge-processes every
     * target's (ks is then the rooted sinks). With no sink free, the
     * heatmap's are read at the end. */
    if (j->sources) {
        rec_sources_record(j->sources, j->bin);
        rec_sinks_add(ks, j->sources, rec_sources_sample);
    }
    if (lv && live_start(lv, j->s, j->pid, live_ks) != -1)
        rec_stop = SIGTERM; /* said why; the profile so far is written */
    return -1;
}

/* After sampling: the profile written (unless the output is a recording,
 * or the live view had no -o) and the recording finished. */
static int write_outputs(struct job *j, const struct pys_profile_info *info, uint64_t unmatched)
{
    int status = CLI_OK;
    rec_sources_finish(j->sources);
    if (!j->r.binary && (!j->r.live || j->r.output))
        status = rec_write_output(&j->r, &j->out, j->prof, j->pid, unmatched);
    if (j->bin) {
        int st = rec_bin_finish(j->bin, info);
        status = status == CLI_OK ? st : status;
        rec_bin_free(j->bin);
    }
    return status;
}

int cli_record(int argc, char **argv, int attach)
{
    struct job j = {.pid = -1, .child = -1};
    uint64_t unmatched = 0;

    int rc = rec_parse_args(&j.r, argc, argv, attach, &j.pid);
    if (rc != -1)
        return rc;
    /* --diff-flamegraph: a baseline that cannot be compared is refused
     * before the target is started or attached. */
    if (j.r.diff_baseline && !j.r.binary &&
        ((rc = rec_baseline_load(&j.r)) != -1 ||
         (rc = rec_baseline_check(&j.r, rec_mode_names[j.r.mode], j.r.native, j.r.gc)) != -1)) {
        rec_baseline_free(j.r.baseline);
        return rc;
    }
    if (j.r.format == FMT_CHROMETRACE && rec_trace_new(&j.r) < 0) {
        fprintf(stderr, "pystrobe: out of memory\n");
        rec_baseline_free(j.r.baseline);
        return CLI_ERROR;
    }
    j.opt = (struct pys_options){.cpu_state = j.r.mode == MODE_CPU || j.r.no_idle,
                                 .native = j.r.native,
                                 .gc = j.r.gc,
                                 /* --native: every thread unwound at each sample. */
                                 .frame_cache = !j.r.read_only && !j.r.native_stacks,
                                 .opcodes = j.r.opcodes,
                                 .reuse_idle = !j.r.every_thread && !j.r.native_stacks,
                                 .native_stacks = j.r.native_stacks,
                                 .max_frames = j.r.max_frames};
    struct live *lv = NULL;
    /* The first target's sinks, and rooted ones (rec_procs_new). */
    struct rec_sinks sinks = {.n = 0}, rooted = {.n = 0};
    struct rec_sinks *live_ks = j.r.subprocesses ? &rooted : &sinks;
    struct rec_sinks *own = j.r.merge_processes ? &rooted : &sinks;
    if (j.r.live && (rc = live_prepare(&lv, &j.r)) != -1) {
        rec_baseline_free(j.r.baseline);
        return rc;
    }
    if ((rc = job_setup(&j)) != -1 || (rc = start_sinks(&j, lv, own, live_ks)) != -1) {
        live_free(lv);
        rec_stream_free(&j.r);
        rec_baseline_free(j.r.baseline);
        return rc;
    }

    struct rec_sessions ss = {.v = {j.s}, .n = 1, .opt = &j.opt}, *ssp = &ss;
    struct rec_procs *procs = NULL;
    enum end why;
    struct rec_cost cost;
    rec_cost_begin(&cost);
    if (j.r.subprocesses) {
        /* --subprocesses: every target at each tick. */
        procs = rec_procs_new(&j.r, &j.opt, j.r.attach ? j.pid : (int)getpid(), j.child, &ss,
                              j.prof, j.r.merge_processes ? NULL : &sinks, &rooted);
        if (!procs) {
            fprintf(stderr, "pystrobe: out of memory\n");
            job_abandon(&j);
            return CLI_ERROR;
        }
        why = rec_sample_procs(&j.r, procs);
        ssp = rec_procs_main_sessions(procs);
        unmatched = rec_procs_target(procs, 0)->unmatched;
    } else {
        why = rec_sample_loop(&j.r, &ss, j.prof, &sinks, &unmatched);
    }
    rec_cost_end(&cost);
    live_end(lv, why);
    live_free(lv);
    const struct pys_profile_info *info = pys_profile_info(j.prof);
    rec_print_summary(info, j.r.rate_hz, &cost, j.r.no_summary);
    if (!j.r.no_summary)
        rec_print_rereads(ssp->v[ssp->n - 1]);
    if (!j.r.binary)
        rec_print_folded(j.prof, j.r.max_memory);
    if (j.r.stats)
        rec_print_stats("Statistics:", ssp->v[ssp->n - 1], info, &cost);
    int status = write_outputs(&j, info, unmatched);
    if (procs) {
        int st = rec_procs_finish(procs, &j.r, j.r.no_summary);
        status = status == CLI_OK ? st : status;
    }
    if (why == END_ERROR && (status == CLI_OK || status == CLI_NOSAMPLES))
        status = rec_error_status;
    if (j.r.browser && status == CLI_OK && j.out.path)
        rec_open_browser(&j.r, j.out.path);
    if (j.child > 0)
        status = end_child(&j, why, status);

    rec_stream_free(&j.r);
    rec_sources_free(j.sources);
    pys_profile_free(j.prof);
    rec_baseline_free(j.r.baseline);
    for (size_t i = 0; i < ssp->n; i++)
        pys_session_free(ssp->v[i]);
    rec_procs_free(procs);
    return status;
}
