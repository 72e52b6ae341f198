/*
 * heatmap: a profile as HTML pages of source lines, in a directory: an index
 * (index.html) of the files with samples, grouped as your code, standard
 * library, site-packages and other, each by samples; and a page a file
 * (file_0000.html, ... in order of samples) with every line of its source,
 * its self samples (the line was executing) and total samples (the line was
 * on the stack: executing or calling), coloured on a log scale, the hottest
 * lines listed first, and links from a calling line to the functions it
 * called and from a function's first line to the lines that called it.
 *
 * Counts are of samples (stacks), each counted once per line, file and
 * function however often it is on one stack: a file's total is the samples
 * in which any of its lines was on the stack, and every percentage is of
 * all samples with a Python frame.
 *
 * A profile counted with opcodes (--opcodes) gives each line its
 * instructions too: the samples at each, by name.
 *
 * The pages hold no script and reference nothing outside the directory:
 * they work offline, and every name and line of source from the target is
 * escaped as HTML text (invalid UTF-8 shown as U+FFFD).
 */
#ifndef PYSTROBE_OUTPUT_HEATMAP_H
#define PYSTROBE_OUTPUT_HEATMAP_H

#include <stddef.h>

#include <pystrobe/pystrobe.h>

/* A source file's text, as the caller found it. */
struct out_source {
    const char *text; /* NULL if it could not be read */
    size_t len;
    const char *why; /* if text is NULL: why, for the page ("no such file") */
    int changed;     /* 1: the file was modified after the target started; 2: it
                        was modified or removed after text was read from it */
};

/* Fill *out with the source of filename (as the target names it); what
 * out points to must stay valid until the next call. */
typedef void (*out_source_fn)(void *ctx, const char *filename, struct out_source *out);

/* Write the pages of p into the directory dirfd (which must exist), with
 * title (NULL for a default) on each; source(ctx, ...) gives each file's
 * text. Returns 0, PYS_E_IO (errno tells) or PYS_E_NOMEM. Files written
 * before a failure are left. *nfiles (if not NULL) gets the number of
 * source pages. */
int out_heatmap_write(int dirfd, const pys_profile *p, const char *title, out_source_fn source,
                      void *ctx, size_t *nfiles);

#endif
