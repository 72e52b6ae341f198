/*
 * procframe: which process a stack came from, in a profile of several
 * processes (--subprocesses --merge-processes). Such a stack's outermost
 * frame is a PYS_FRAME_PROCESS marker named "process PID COMMAND"
 * (pystrobe.h); the writers that lay processes out as tracks of their own
 * (gecko, chrometrace) read the pid and command from it here, live and
 * from a recording alike.
 */
#ifndef PYSTROBE_OUTPUT_PROCFRAME_H
#define PYSTROBE_OUTPUT_PROCFRAME_H

#include <stddef.h>

#include <pystrobe/pystrobe.h>

/* The process of the stack frames[0..n) (innermost first): 1 with *pid
 * (positive) and *command (a pointer into the frame's name, "" when it has
 * none), when the outermost frame is a process marker whose name is
 * "process PID" or "process PID COMMAND"; else 0, and *pid and *command
 * are left as they were. */
int out_stack_process(const struct pys_frame *frames, size_t n, int *pid, const char **command);

#endif
