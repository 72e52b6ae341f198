/*
 * libFuzzer target: the recorded image loader (core/image.c), then a
 * session on what it accepted, two snapshots (the second through the
 * batched prefetch) with the frame cache on: the whole core on arbitrary
 * memory and attach facts. An input starting with 'P' is a whole image
 * file; any other first byte puts an uncompressed header in front of the
 * rest, so that mutations reach the body's fields and pages.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct prof_image *im = NULL;
    char err[256];
    if (size < 1)
        return 0;
    int rc;
    if (data[0] == 'P') {
        rc = prof_image_load(data, size, &im, err, sizeof err);
    } else {
        size_t n = size - 1;
        uint8_t *buf = malloc(32 + n);
        if (!buf)
            return 0;
        memcpy(buf, "PYSIMAGE", 8);
        uint64_t hdr[3] = {1, n, n}; /* version 1, flags 0; body length; stored */
        memcpy(buf + 8, &hdr[0], 4);
        memset(buf + 12, 0, 4);
        memcpy(buf + 16, &hdr[1], 8);
        memcpy(buf + 24, &hdr[2], 8);
        memcpy(buf + 32, data + 1, n);
        rc = prof_image_load(buf, 32 + n, &im, err, sizeof err);
        free(buf);
    }
    if (rc != 0)
        return 0;
    struct mem_image src;
    mem_image_init(&src, im->regions, im->nregions);
    struct pys_options opt;
    memset(&opt, 0, sizeof opt);
    opt.frame_cache = 1;
    opt.native = 1;
    opt.gc = 1;
    pys_session *s = NULL;
    if (prof_session_open(&s, 0, &src.base, &im->facts, &opt, err, sizeof err) == 0) {
        const struct pys_snapshot *snap;
        pys_session_snapshot(s, &snap);
        pys_session_snapshot(s, &snap);
        pys_session_free(s);
    }
    prof_image_free(im);
    return 0;
}
