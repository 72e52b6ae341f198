/*
 * browser: open a written HTML file for --browser. The program is the first
 * entry of $BROWSER (a colon-separated list of commands, as sensible-browser
 * reads it), given the file's absolute path as its one argument, or else
 * xdg-open. It is started, not waited for: a browser may run long after
 * pystrobe ends.
 */
#include "cli/browser.h"

#include <errno.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

int cli_open_browser(const char *path)
{
    char full[PATH_MAX], prog[PATH_MAX];
    if (!realpath(path, full)) {
        fprintf(stderr, "pystrobe: --browser: %s: %s\n", path, strerror(errno));
        return -1;
    }
    const char *b = getenv("BROWSER");
    size_t n = b ? strcspn(b, ":") : 0;
    if (n >= sizeof prog) {
        fprintf(stderr, "pystrobe: --browser: $BROWSER is too long\n");
        return -1;
    }
    if (n == 0)
        snprintf(prog, sizeof prog, "xdg-open");
    else
        memcpy(prog, b, n), prog[n] = '\0';
    char *argv[] = {prog, full, NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, prog, NULL, NULL, argv, environ);
    if (rc != 0) {
        fprintf(stderr, "pystrobe: --browser: cannot run %s: %s%s\n", prog, strerror(rc),
                n == 0 ? " (set $BROWSER)" : "");
        return -1;
    }
    return 0;
}
