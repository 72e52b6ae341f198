/*
 * source: the target's source lines, for dump (source.c).
 */
#ifndef PYSTROBE_CLI_SOURCE_H
#define PYSTROBE_CLI_SOURCE_H

#include <stddef.h>

struct cli_source;

/* A reader of process pid's source files; NULL if out of memory. */
struct cli_source *cli_source_new(int pid);
/* A reader of the source files of a process that is gone (a core's): an
 * absolute name under root (NULL: "/"), a relative one never. */
struct cli_source *cli_source_new_root(const char *root);
void cli_source_free(struct cli_source *c);
/* Line lineno (1-based) of the file a frame of process pid names: *line
 * (not NUL-terminated, without its line break) and *len, valid until the
 * next call. -1 when the file or the line cannot be had. */
int cli_source_line(struct cli_source *c, const char *filename, int lineno, const char **line,
                    size_t *len);

#endif
