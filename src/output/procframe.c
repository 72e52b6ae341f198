/*
 * procframe: see procframe.h.
 */
#include "output/procframe.h"

#include <limits.h>
#include <string.h>

int out_stack_process(const struct pys_frame *frames, size_t n, int *pid, const char **command)
{
    static const char PREFIX[] = "process ";
    if (n == 0 || frames[n - 1].kind != PYS_FRAME_PROCESS || !frames[n - 1].qualname)
        return 0;
    const char *s = frames[n - 1].qualname;
    if (strncmp(s, PREFIX, sizeof PREFIX - 1) != 0)
        return 0;
    s += sizeof PREFIX - 1;
    long v = 0;
    const char *d = s;
    /* Digits only (no sign, no spaces), and within an int. */
    for (; *d >= '0' && *d <= '9'; d++) {
        v = v * 10 + (*d - '0');
        if (v > INT_MAX)
            return 0;
    }
    if (d == s || v == 0 || (*d != '\0' && *d != ' '))
        return 0;
    *pid = (int)v;
    *command = *d ? d + 1 : d;
    return 1;
}
