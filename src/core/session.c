/*
 * session: the public lifecycle of an attached process: attach, accessors,
 * last error, free.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "platform/platform.h"

int prof_fail(struct pys_session *s, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
    return code;
}

/* Attaches made when the process exec'd during one, before giving up on
 * telling its exec from later ones. */
#define ATTACH_TRIES 3

int pys_session_attach(pys_session **out, int pid, const struct pys_options *opt, char *errtext,
                       size_t errlen)
{
    for (int tries = 1;; tries++) {
        int rc = prof_session_open(out, pid, NULL, NULL, opt, errtext, errlen);
        if (rc != 0 || tries == ATTACH_TRIES || !prof_exec_during_attach(*out))
            return rc;
        /* The new program, attached with the old one's handle: again, with
         * a handle taken before its runtime is looked for. */
        pys_session_free(*out);
        *out = NULL;
    }
}

int pys_session_attach_image(pys_session **out, const char *path, const struct pys_options *opt,
                             char *errtext, size_t errlen)
{
    struct prof_image *im = NULL;
    char err[256];
    if (!out || !path)
        return PYS_E_INVAL;
    int rc = prof_image_load_file(path, &im, err, sizeof err);
    if (rc < 0) {
        if (errtext && errlen)
            snprintf(errtext, errlen, "image %s: %s", path, err);
        return rc;
    }
    /* The session holds the image and its source (moved into it below). */
    struct pys_session *s = NULL;
    struct mem_image src;
    mem_image_init(&src, im->regions, im->nregions);
    rc = prof_session_open(&s, 0, &src.base, &im->facts, opt, errtext, errlen);
    if (rc < 0) {
        prof_image_free(im);
        return rc;
    }
    s->image = im;
    s->image_src = src;
    mem_set_source(&s->mem, &s->image_src.base);
    mem_set_source(&s->mem_idle, &s->image_src.base);
    *out = s;
    return 0;
}

static int session_open(pys_session **out, int pid, struct mem_source *src,
                        const struct prof_image_facts *facts, struct prof_core *core,
                        const struct pys_options *opt, char *errtext, size_t errlen);

int prof_session_open(pys_session **out, int pid, struct mem_source *src,
                      const struct prof_image_facts *facts, const struct pys_options *opt,
                      char *errtext, size_t errlen)
{
    return session_open(out, pid, src, facts, NULL, opt, errtext, errlen);
}

int prof_session_open_core(pys_session **out, struct mem_source *src, struct prof_core *core,
                           const struct pys_options *opt, char *errtext, size_t errlen)
{
    return session_open(out, 0, src, NULL, core, opt, errtext, errlen);
}

static int session_open(pys_session **out, int pid, struct mem_source *src,
                        const struct prof_image_facts *facts, struct prof_core *core,
                        const struct pys_options *opt, char *errtext, size_t errlen)
{
    struct pys_session *s = NULL;
    int rc;

    if (errtext && errlen)
        errtext[0] = '\0';
    if (!out || (pid <= 0 && !facts && !core)) {
        if (errtext && errlen)
            snprintf(errtext, errlen, "no such process: %d", pid);
        return pid <= 0 ? PYS_E_NOPROC : PYS_E_INVAL;
    }
    size_t nmax = opt && opt->max_frames ? opt->max_frames : PYS_MAX_FRAMES_DEFAULT;
    if (nmax < PYS_MAX_FRAMES_MIN || nmax > PYS_MAX_FRAMES_MAX) {
        if (errtext && errlen)
            snprintf(errtext, errlen, "max_frames %zu out of range (%d to %d)", nmax,
                     PYS_MAX_FRAMES_MIN, PYS_MAX_FRAMES_MAX);
        return PYS_E_INVAL;
    }
    if (opt && opt->locals && (opt->frame_cache || opt->reuse_idle)) {
        if (errtext && errlen)
            snprintf(errtext, errlen, "locals cannot be combined with frame_cache or reuse_idle");
        return PYS_E_INVAL;
    }
    s = calloc(1, sizeof *s);
    if (!s)
        return PYS_E_NOMEM;
    s->pid = pid;
    /* Any odd seed: a live session's differs from run to run. */
    s->retry_rng = ((uint64_t)(unsigned)pid << 32 | (src ? 0 : plat_clock_ns())) | 1;
    if (opt)
        s->opt = *opt;
    s->opt.max_frames = nmax;
    if (!src) {
        mem_proc_init(&s->proc, pid);
        src = &s->proc.base;
    }
    mem_init(&s->mem, src);
    mem_init(&s->mem_idle, src);
    /* Its snapshots read the threads holding the GIL, which change from one
     * to the next: what they read before is not worth reading again. */
    mem_set_keep(&s->mem_idle, 0);
    if (!facts && !core)
        prof_process_open(s);
    rc = core    ? prof_attach_core(s, core)
         : facts ? prof_attach_facts(s, facts)
                 : prof_attach_runtime(s);
    if (rc < 0)
        goto fail;
    rc = PYS_E_NOMEM;
    s->marker_file = prof_intern_str(&s->strings, "~", 1);
    s->marker_native = prof_intern_str(&s->strings, "<native>", 8);
    s->marker_gc = prof_intern_str(&s->strings, "<GC>", 4);
    s->marker_truncated = prof_intern_str(&s->strings, "<truncated>", 11);
    if (prof_walker_init(&s->walker, &s->off, nmax) < 0 ||
        prof_resolved_init(&s->resolved, nmax) < 0 || !s->marker_file || !s->marker_native ||
        !s->marker_gc || !s->marker_truncated)
        goto fail;
    if (s->opt.locals && !(s->locals = prof_locals_new()))
        goto fail;
    if (s->opt.native_stacks) {
        s->opt.native = 1; /* its markers say which frames one eval loop runs */
        if (!(s->native = prof_native_new()))
            goto fail;
    }
    if (s->opt.opcodes && prof_opcodes_init(&s->ops, nmax) < 0)
        goto fail;
    s->use_fcache = s->opt.frame_cache && CPY_HAS(&s->off, thread_state, last_profiled_frame);
    /* With the frame cache, a walk through older chunks (a miss) is a
     * one-off: the next samples take those frames from the cache. */
    s->walker.stack.older_once = s->use_fcache;
    /* 3.11+: a generator's frame copied suspended leads to the caller it
     * had when walks last saw it linked (objframes.c). */
    if (s->off.traits.frames != CPY_FRAMES_OBJECT) {
        s->walker.stack.gen_caller = prof_objframes_caller;
        s->walker.stack.gen_ctx = s;
    }
    /* Without a code generation counter, a cached code object must be checked
     * to still be there at each use. */
    s->codes.validate = !CPY_HAS(&s->off, interpreter_state, code_object_generation);
    *out = s;
    return 0;
fail:
    if (errtext && errlen)
        snprintf(errtext, errlen, "%s", s->err[0] ? s->err : pys_strerror(rc));
    pys_session_free(s);
    return rc;
}

void pys_session_free(pys_session *s)
{
    if (!s)
        return;
    prof_process_close(s);
    prof_codecache_release(&s->codes);
    prof_fcache_release(&s->fcache);
    prof_torn_release(&s->torn);
    mem_release(&s->mem);
    mem_release(&s->mem_idle);
    prof_tnames_free(s->tnames);
    prof_pause_free(s->pause);
    prof_locals_free(s->locals);
    prof_native_free(s->native);
    prof_intern_release(&s->strings);
    prof_walker_release(&s->walker);
    prof_resolved_release(&s->resolved);
    prof_named_codes_release(&s->named);
    prof_opcodes_release(&s->ops);
    prof_results_release(&s->res);
    prof_results_release(&s->prev);
    free(s->image_path);
    prof_image_free(s->image);
    prof_core_free(s->core);
    free(s);
}

const char *pys_session_last_error(const pys_session *s)
{
    return s ? s->err : "";
}

int pys_session_pid(const pys_session *s)
{
    return s->pid;
}

uint32_t pys_session_python_version(const pys_session *s)
{
    return s->off.version;
}

const char *pys_opcode_name(uint32_t python_version, int opcode, const char **base)
{
    const char *b = NULL;
    const char *name = (python_version >> 24) == 3
                           ? cpy_opcode_name((int)((python_version >> 16) & 0xff), opcode, &b)
                           : NULL;
    if (name && base)
        *base = b;
    return name;
}

const char *pys_session_python_version_text(const pys_session *s)
{
    return s->version_text;
}

const char *pys_session_image_path(const pys_session *s)
{
    return s->image_path;
}

void pys_session_stats(const pys_session *s, struct pys_stats *out)
{
    memset(out, 0, sizeof *out);
    out->snapshots = s->snapshots;
    out->thread_errors = s->thread_errors;
    struct mem_stats m = {0};
    mem_stats_add(&s->mem, &m);
    mem_stats_add(&s->mem_idle, &m);
    out->mem_reads = m.reads;
    out->mem_prefetched = m.prefetched;
    out->mem_bytes = m.bytes;
    out->mem_failures = m.failures;
    out->code_hits = s->codes.hits;
    out->code_misses = s->codes.misses;
    out->frame_cache_hits = s->fcache.hits;
    out->frame_cache_partial_hits = s->fcache.partial_hits;
    out->frame_cache_misses = s->fcache.misses;
    out->frames_from_cache = s->fcache.frames_cached;
    out->frames_read = s->fcache.frames_read;
    out->mem_writes = m.writes;
    out->mem_pieces = m.pieces;
    out->threads_reused = s->idle.reused;
    out->frame_cache_entries = s->fcache.count;
    out->frame_cache_other_writers = s->fcache.other_writers;
    out->frame_cache_other_writer_walks = s->fcache.other_writer_walks;
    out->thread_reads = s->thread_reads;
    out->thread_rereads = s->thread_rereads;
    out->frame_cache_rests = s->fcache.rests;
    out->mem_batches = m.batches;
    out->mem_batches_paused = m.paused;
    prof_pause_stats(s->pause, out);
}

int pys_child_pids(int pid, int recursive, int *out, size_t max)
{
    if (pid <= 0 || (!out && max))
        return PYS_E_INVAL;
    return plat_proc_children(pid, recursive, out, max);
}
