/*
 * children: the descendants of a process, from the parent ids in
 * /proc/N/stat (the kernel keeps no child list that survives re-parenting).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pystrobe/pystrobe.h>

#include "platform/platform.h"

/* The parent of pid, or -1. The comm field may hold spaces and ')'. */
static int parent_of(int pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *close = strrchr(buf, ')');
    int ppid;
    char state;
    if (!close || sscanf(close + 1, " %c %d", &state, &ppid) != 2)
        return -1;
    return ppid;
}

int plat_proc_children(pid_t pid, int recursive, pid_t *out, size_t max)
{
    /* Snapshot every (pid, ppid) pair, then collect level by level. */
    size_t n = 0, cap = 1024;
    int (*pairs)[2] = malloc(cap * sizeof *pairs);
    DIR *d = opendir("/proc");
    int rc = PYS_E_NOMEM;
    if (!pairs)
        goto done;
    rc = PYS_E_IO;
    if (!d)
        goto done;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long p = strtol(e->d_name, &end, 10);
        if (*end != '\0' || p <= 0)
            continue;
        int pp = parent_of((int)p);
        if (pp < 0)
            continue;
        if (n == cap) {
            void *np = realloc(pairs, 2 * cap * sizeof *pairs);
            rc = PYS_E_NOMEM;
            if (!np)
                goto done;
            pairs = np;
            cap *= 2;
        }
        pairs[n][0] = (int)p;
        pairs[n][1] = pp;
        n++;
    }
    size_t found = 0, scanned = 0;
    pid_t parent = pid;
    for (;;) {
        for (size_t i = 0; i < n; i++) {
            if (pairs[i][1] == parent && found < max)
                out[found++] = pairs[i][0];
        }
        if (!recursive || scanned >= found)
            break;
        parent = out[scanned++];
    }
    rc = (int)found;
done:
    if (d)
        closedir(d);
    free(pairs);
    return rc;
}
