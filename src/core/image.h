/*
 * image: recorded images of real targets, and sessions on them.
 *
 * An image is what one snapshot of a stopped target read, page by page,
 * with what attach learned from the target's files (which an image cannot
 * be asked again): a session made on it (pys_session_attach_image, or
 * prof_session_open with facts) reads those pages instead of a process,
 * and its reads outside them fail as reads of unmapped memory do. Writes
 * (the 3.15 frame cache's anchor) change the session's copy of the image.
 *
 * File format (all integers little-endian), version 1:
 *
 *   offset  size  field
 *   0       8     magic "PYSIMAGE"
 *   8       4     format version (1)
 *   12      4     flags: bit 0, the body is zlib-compressed; no other bit set
 *   16      8     body length (uncompressed), at most IMAGE_BODY_MAX
 *   24      8     stored body length (the bytes that follow the header)
 *   32      ...   body
 *
 *   body:
 *   8   runtime address (_PyRuntime), non-zero
 *   4   PY_VERSION_HEX as attach found it
 *   4   table length: bytes of _Py_DebugOffsets attach read at the runtime
 *       (3.13+; 0 before: the offsets come from pystrobe's own tables)
 *   8   &PyCode_Type (0 unknown)
 *   8   &_Py_NoneStruct (0 unknown)
 *   4   n, then n bytes: the version as text ("3.12.1"), n < 32, no NUL
 *   4   n, then n bytes: the path of the file holding the runtime, n < 4096,
 *       no NUL
 *   4   page count P (at most IMAGE_PAGES_MAX)
 *   8P  page addresses, strictly increasing, multiples of 4096, non-zero
 *   4096P  the pages' bytes, in the same order
 *   nothing after
 *
 * Images are untrusted input: prof_image_load checks every field and
 * length and fails with PYS_E_CORRUPT on anything else.
 */
#ifndef PYSTROBE_CORE_IMAGE_H
#define PYSTROBE_CORE_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "mem/mem.h"

#define IMAGE_BODY_MAX (256u << 20)
#define IMAGE_PAGES_MAX 65536u

/* What attach found in the target's files and memory. */
struct prof_image_facts {
    uint64_t runtime;
    uint32_t version;
    uint32_t table_len;
    uint64_t code_type, none;
    char version_text[32];
    char image_path[4096];
};

/* A loaded image: facts, pages (one buffer, page i at bytes + 4096 i) and
 * the regions they make (pages that meet merged), for a struct mem_image. */
struct prof_image {
    struct prof_image_facts facts;
    uint64_t *addrs;
    uint8_t *bytes;
    size_t npages;
    struct mem_region *regions;
    size_t nregions;
};

/* Parse an image file's bytes. 0 and *out (free with prof_image_free), or
 * PYS_E_CORRUPT (err says what), PYS_E_NOMEM. */
int prof_image_load(const uint8_t *data, size_t len, struct prof_image **out, char *err,
                    size_t errlen);
/* The same from a file; PYS_E_IO if it cannot be read. */
int prof_image_load_file(const char *path, struct prof_image **out, char *err, size_t errlen);
void prof_image_free(struct prof_image *im);

/*
 * Write an image: facts, and the pages at addrs[0..n) (sorted, distinct,
 * page-aligned) read now through src; pages that cannot be read are left
 * out. Compressed with zlib. 0, or PYS_E_IO, PYS_E_NOMEM, PYS_E_INVAL, or
 * src's errors (PYS_E_EXITED).
 */
int prof_image_save(const char *path, const struct prof_image_facts *facts, struct mem_source *src,
                    const uint64_t *addrs, size_t n);

#endif
