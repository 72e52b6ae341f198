/*
 * record_child: `pystrobe run`'s child process. It is started in pystrobe's
 * own process group, so the terminal's Ctrl-C reaches it as it would without
 * pystrobe.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/record.h"

pid_t rec_child_start(char **argv)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
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

/* End the child: it may already be on its way out (it got the terminal's
 * Ctrl-C too); otherwise SIGTERM, and SIGKILL if that is not enough. */
void rec_child_stop(pid_t child, pid_t python, int gently)
{
    int status;
    for (int step = 0; step < 3; step++) {
        uint64_t until = rec_now_ns() + 2000000000ull;
        if (step == 1 || (step == 0 && !gently)) {
            if (python > 0 && python != child)
                kill(python, SIGTERM);
            kill(child, SIGTERM);
        } else if (step == 2) {
            if (python > 0 && python != child)
                kill(python, SIGKILL);
            kill(child, SIGKILL);
        }
        while (rec_now_ns() < until) {
            if (waitpid(child, &status, WNOHANG) == child)
                return;
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
        }
    }
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
