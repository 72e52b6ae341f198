/*
 * install_probe: a program built against an installed libpystrobe with
 * nothing but `pkg-config --cflags --libs libpystrobe` (test_install.py).
 * Attaches to process argv[1] and prints each thread's Python frames,
 * innermost first, one "qualname filename:line" a line.
 */
#include <stdio.h>
#include <stdlib.h>

#include <pystrobe/pystrobe.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: install_probe PID\n");
        return 2;
    }
    char err[256] = "";
    struct pys_options opt = {0};
    pys_session *s = NULL;
    int rc = pys_session_attach(&s, atoi(argv[1]), &opt, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "attach: %s: %s\n", pys_errname(rc), err);
        return 1;
    }
    const struct pys_snapshot *snap = NULL;
    rc = pys_session_snapshot(s, &snap);
    if (rc < 0) {
        fprintf(stderr, "snapshot: %s: %s\n", pys_errname(rc), pys_session_last_error(s));
        pys_session_free(s);
        return 1;
    }
    printf("Python %s\n", pys_session_python_version_text(s));
    for (size_t i = 0; i < snap->ninterps; i++) {
        const struct pys_interp *in = &snap->interps[i];
        for (size_t t = 0; t < in->nthreads; t++) {
            const struct pys_thread *th = &in->threads[t];
            printf("thread %llu\n", (unsigned long long)th->native_id);
            for (size_t f = 0; f < th->nframes; f++)
                printf("  %s %s:%d\n", th->frames[f].qualname, th->frames[f].filename,
                       (int)th->frames[f].lineno);
        }
    }
    pys_session_free(s);
    return 0;
}
