/*
 * record_child: `pystrobe run`'s child process. It is started in pystrobe's
 * own process group, so the terminal's Ctrl-C reaches it as it would without
 * pystrobe.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/record.h"

pid_t rec_child_start(char **argv, int detach)
{
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        /* The last resort that keeps the child from outliving pystrobe
         * when pystrobe itself is killed (SIGKILL, a crash): rec_child_stop
         * and the abort handler cover every other end. The kernel keeps the
         * setting across exec, except into a set-user-ID program. */
        if (!detach && (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent))
            _exit(127);
        execvp(argv[0], argv);
        fprintf(stderr, "pystrobe: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    return pid;
}

int rec_exit_status_of(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return CLI_ERROR;
}

/* The child, and its Python descendant if that is another process (which
 * is not ours to reap: it is gone once kill() no longer finds it). */
struct stopping {
    pid_t child, python;
    int reaped;
};

static int ended(struct stopping *st)
{
    int status;
    if (!st->reaped && waitpid(st->child, &status, WNOHANG) == st->child)
        st->reaped = 1;
    return st->reaped && (st->python <= 0 || st->python == st->child || kill(st->python, 0) != 0);
}

/* Wait up to 2 s for both to end; 1 if they did. */
static int ended_within_2s(struct stopping *st)
{
    uint64_t until = rec_now_ns() + 2000000000ull;
    do {
        if (ended(st))
            return 1;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    } while (rec_now_ns() < until);
    return 0;
}

static void signal_both(const struct stopping *st, int sig)
{
    if (st->python > 0 && st->python != st->child)
        kill(st->python, sig);
    if (!st->reaped)
        kill(st->child, sig);
}

/* The sequence docs/cli.md gives: [2 s to end after Ctrl-C], SIGTERM,
 * SIGKILL 2 s later, and then wait for the child to go. */
void rec_child_stop(pid_t child, pid_t python, int after_ctrl_c)
{
    struct stopping st = {child, python, 0};
    int status;
    if (after_ctrl_c && ended_within_2s(&st))
        return;
    signal_both(&st, SIGTERM);
    if (ended_within_2s(&st))
        return;
    signal_both(&st, SIGKILL);
    if (!st.reaped)
        waitpid(child, &status, 0);
}

/*
 * Attach to the child or, if it does not become Python itself (a shell
 * script that starts python), to its first descendant that does. Polls
 * until one attaches, an error is final, or the child exits.
 */
int rec_child_attach(pid_t child, const struct pys_options *opt, pys_session **out,
                     int *child_status, int *exited)
{
    char err[512];
    uint64_t start = rec_now_ns();
    int said = 0;
    *exited = 0;
    while (!rec_stop) {
        int status;
        if (waitpid(child, &status, WNOHANG) == child) {
            *exited = 1;
            *child_status = rec_exit_status_of(status);
            return PYS_E_EXITED;
        }
        pid_t cand[64];
        int n = 0;
        cand[n++] = child;
        int more = pys_child_pids(child, 1, cand + 1, 63);
        if (more > 0)
            n += more;
        for (int i = 0; i < n; i++) {
            int rc = pys_session_attach(out, cand[i], opt, err, sizeof err);
            if (rc == 0)
                return 0;
            if (rc == PYS_E_PERM || rc == PYS_E_VERSION) {
                cli_report(rc, err);
                return rc;
            }
        }
        if (!said && rec_now_ns() - start > 3000000000ull) {
            fprintf(stderr, "pystrobe: waiting for process %d to start Python...\n", (int)child);
            said = 1;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    return PYS_E_NOPROC;
}
