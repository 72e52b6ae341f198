/*
 * libFuzzer target: the _Py_DebugOffsets validator on arbitrary tables.
 * The first input byte picks a real header (cookie and a known version) to
 * put in front of the rest, so most inputs reach the field checks.
 */
#include <stdint.h>
#include <string.h>

#include "cpython/offsets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint64_t versions[] = {0x030d12f0, 0x030e0af0, 0x030f02f0, 0x030f00a1};
    uint8_t buf[1024];
    struct cpy_offsets o;
    char err[200];
    if (size < 1)
        return 0;
    size_t n = size - 1 < sizeof buf ? size - 1 : sizeof buf;
    memcpy(buf, data + 1, n);
    if (data[0] & 0x80 && n >= 24) {
        uint64_t v = versions[data[0] & 3], ft = 0;
        memcpy(buf, "xdebugpy", 8);
        memcpy(buf + 8, &v, 8);
        memcpy(buf + 16, &ft, 8);
    }
    cpy_offsets_parse(buf, n, &o, err, sizeof err);
    return 0;
}
