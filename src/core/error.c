/*
 * error: names and messages of the PYS_E_* codes, from the one table in
 * pystrobe.h.
 */
#include <pystrobe/pystrobe.h>

const char *pys_errname(int code)
{
    switch (code) {
    case 0:
        return "PYS_OK";
#define PYS_ERRNAME_(name, c, msg)                                                                 \
    case c:                                                                                        \
        return "PYS_E_" #name;
        PYS_ERRNO_MAP(PYS_ERRNAME_)
#undef PYS_ERRNAME_
    }
    return "PYS_E_UNKNOWN";
}

const char *pys_strerror(int code)
{
    switch (code) {
    case 0:
        return "success";
#define PYS_STRERROR_(name, c, msg)                                                                \
    case c:                                                                                        \
        return msg;
        PYS_ERRNO_MAP(PYS_STRERROR_)
#undef PYS_STRERROR_
    }
    return "unknown error";
}
