/*
 * offsets: read the target's _Py_DebugOffsets table (3.13+) into the one
 * struct cpy_offsets the walker uses, and refuse any table that is not
 * exactly what a known, final CPython release would hold.
 *
 * This is the only place where the target's own description of itself is
 * trusted, so it checks all of it once: after this, the walker may read any
 * field at any offset without further checks on the offset itself.
 */
#include "cpython/offsets.h"

#include <string.h>

#include <pystrobe/pystrobe.h>

#include "util/bytes.h"
#include "util/errtext.h"

static const char COOKIE[8] = {'x', 'd', 'e', 'b', 'u', 'g', 'p', 'y'};

/* Where each field's value goes, and how wide a read of it is. */
static const size_t FIELD_DEST[CPY_F_COUNT] = {
#define CPY_FIELD_DEST_(g, n, w) [CPY_F_##g##_##n] = offsetof(struct cpy_offsets, g.n),
    CPY_FIELDS(CPY_FIELD_DEST_)
#undef CPY_FIELD_DEST_
};
static const uint8_t FIELD_WIDTH[CPY_F_COUNT] = {
#define CPY_FIELD_WIDTH_(g, n, w) [CPY_F_##g##_##n] = (w),
    CPY_FIELDS(CPY_FIELD_WIDTH_)
#undef CPY_FIELD_WIDTH_
};
static const char *const FIELD_NAME[CPY_F_COUNT] = {
#define CPY_FIELD_NAME_(g, n, w) [CPY_F_##g##_##n] = #g "." #n,
    CPY_FIELDS(CPY_FIELD_NAME_)
#undef CPY_FIELD_NAME_
};
/* The size field of the struct each field lies in. */
static const enum cpy_field FIELD_SIZE[CPY_F_COUNT] = {
#define CPY_FIELD_SIZE_(g, n, w) [CPY_F_##g##_##n] = CPY_F_##g##_size,
#define CPY_F_err_stackitem_size CPY_F_COUNT
#define CPY_F_cframe_size CPY_F_COUNT
#define CPY_F_llist_node_size CPY_F_COUNT
#define CPY_F_var_object_size CPY_F_bytes_object_size
#define CPY_F_dict_keys_size CPY_F_COUNT
#define CPY_F_dict_values_size CPY_F_COUNT
#define CPY_F_object_prefix_size CPY_F_COUNT
    CPY_FIELDS(CPY_FIELD_SIZE_)
#undef CPY_F_err_stackitem_size
#undef CPY_F_cframe_size
#undef CPY_F_llist_node_size
#undef CPY_F_var_object_size
#undef CPY_F_dict_keys_size
#undef CPY_F_dict_values_size
#undef CPY_F_object_prefix_size
#undef CPY_FIELD_SIZE_
};

/* Fields a walk cannot do without, in every version. */
static const enum cpy_field REQUIRED[] = {
    CPY_F_runtime_state_interpreters_head,
    CPY_F_interpreter_state_id,
    CPY_F_interpreter_state_next,
    CPY_F_interpreter_state_threads_head,
    CPY_F_thread_state_next,
    CPY_F_thread_state_thread_id,
    CPY_F_thread_state_exc_info,
    CPY_F_thread_state_current_exception,
    CPY_F_err_stackitem_exc_value,
    CPY_F_err_stackitem_previous_item,
    CPY_F_interpreter_frame_previous,
    CPY_F_interpreter_frame_executable,
    CPY_F_code_object_filename,
    CPY_F_code_object_name,
    CPY_F_code_object_linetable,
    CPY_F_code_object_firstlineno,
    CPY_F_pyobject_ob_type,
    CPY_F_var_object_ob_size,
    CPY_F_type_object_tp_name,
    CPY_F_bytes_object_ob_size,
    CPY_F_bytes_object_ob_sval,
    CPY_F_unicode_object_state,
    CPY_F_unicode_object_length,
    CPY_F_unicode_object_asciiobject_size,
};

/* And those each way of keeping frames needs. */
static const enum cpy_field REQUIRED_OBJECT[] = {
    CPY_F_thread_state_current_frame, CPY_F_interpreter_frame_lasti, CPY_F_code_object_co_code};
static const enum cpy_field REQUIRED_CFRAME[] = {
    CPY_F_thread_state_cframe,           CPY_F_cframe_current_frame,
    CPY_F_thread_state_native_thread_id, CPY_F_thread_state_datastack_chunk,
    CPY_F_interpreter_frame_instr_ptr,   CPY_F_interpreter_frame_owner,
    CPY_F_code_object_qualname,          CPY_F_code_object_co_code_adaptive};
static const enum cpy_field REQUIRED_DIRECT[] = {
    CPY_F_thread_state_current_frame,   CPY_F_thread_state_native_thread_id,
    CPY_F_thread_state_datastack_chunk, CPY_F_interpreter_frame_instr_ptr,
    CPY_F_interpreter_frame_owner,      CPY_F_code_object_qualname,
    CPY_F_code_object_co_code_adaptive};

static uint64_t *field_ptr(struct cpy_offsets *o, enum cpy_field f)
{
    return (uint64_t *)(void *)((char *)o + FIELD_DEST[f]);
}

size_t cpy_offsets_max_table_size(void)
{
    size_t max = 0;
    for (size_t i = 0; i < cpy_layouts_count; i++)
        if (cpy_layouts[i].table_size > max)
            max = cpy_layouts[i].table_size;
    return max;
}

/* Every field inside its struct and aligned to its width; sizes plausible. */
static int check_fields(const struct cpy_offsets *o, char *err, size_t errlen)
{
    struct cpy_offsets *m = (struct cpy_offsets *)o;
    for (int f = 0; f < CPY_F_COUNT; f++) {
        uint64_t v = *field_ptr(m, (enum cpy_field)f);
        if (v == CPY_ABSENT)
            continue;
        /* A size (of what gc.generation_stats points to), not a field. */
        if (FIELD_WIDTH[f] == 0 &&
            (FIELD_SIZE[f] == (enum cpy_field)f || f == CPY_F_gc_generation_stats_size)) {
            if (v == 0 || v > CPY_MAX_STRUCT_SIZE)
                return util_err_set(err, errlen, PYS_E_CORRUPT, "debug offsets: %s is %llu",
                                    FIELD_NAME[f], (unsigned long long)v);
            continue;
        }
        uint64_t limit = CPY_MAX_STRUCT_SIZE;
        if (FIELD_SIZE[f] != CPY_F_COUNT) {
            limit = *field_ptr(m, FIELD_SIZE[f]);
            if (limit == CPY_ABSENT)
                limit = CPY_MAX_STRUCT_SIZE;
        }
        uint64_t w = FIELD_WIDTH[f];
        if (v > limit || w > limit - v)
            return util_err_set(err, errlen, PYS_E_CORRUPT,
                                "debug offsets: %s (%llu) lies outside its struct (%llu bytes)",
                                FIELD_NAME[f], (unsigned long long)v, (unsigned long long)limit);
        if (w > 1 && v % w != 0)
            return util_err_set(err, errlen, PYS_E_CORRUPT,
                                "debug offsets: %s (%llu) is misaligned", FIELD_NAME[f],
                                (unsigned long long)v);
    }
    /* Fields that index into an embedded struct. */
    const struct {
        uint64_t base, inner, outer;
        const char *what;
    } nested[] = {
        {o->interpreter_state.gc, o->gc.size, o->interpreter_state.size, "gc state"},
        {o->thread_state.exc_state, 16, o->thread_state.size, "exception state"},
    };
    for (size_t i = 0; i < sizeof nested / sizeof nested[0]; i++) {
        if (nested[i].base == CPY_ABSENT || nested[i].inner == CPY_ABSENT)
            continue;
        if (nested[i].base > nested[i].outer || nested[i].inner > nested[i].outer - nested[i].base)
            return util_err_set(err, errlen, PYS_E_CORRUPT,
                                "debug offsets: %s lies outside its struct", nested[i].what);
    }
    if (o->interpreter_frame.size < 24 || o->code_object.size < 64 ||
        o->unicode_object.asciiobject_size > 4096)
        return util_err_set(err, errlen, PYS_E_CORRUPT, "debug offsets: implausible struct sizes");
    return 0;
}

static const struct cpy_layout *find_layout(unsigned minor)
{
    for (size_t i = 0; i < cpy_layouts_count; i++)
        if (cpy_layouts[i].minor == minor)
            return &cpy_layouts[i];
    return NULL;
}

static int require(const struct cpy_offsets *o, const enum cpy_field *list, size_t n, char *err,
                   size_t errlen)
{
    struct cpy_offsets *m = (struct cpy_offsets *)o;
    for (size_t i = 0; i < n; i++)
        if (*field_ptr(m, list[i]) == CPY_ABSENT)
            return util_err_set(err, errlen, PYS_E_CORRUPT, "offsets: %s missing",
                                FIELD_NAME[list[i]]);
    return 0;
}

/* Raise *end to the end of the field at off, len bytes, if the version has it. */
static void field_end(uint64_t *end, uint64_t off, uint64_t len)
{
    if (off != CPY_ABSENT && off + len > *end)
        *end = off + len;
}

/* The part of PyThreadState that a read of a thread takes (thread_readlen). */
static size_t thread_readlen(const struct cpy_offsets *o)
{
    /* The fields cpy_thread_read takes, not the whole PyThreadState (3.15:
     * 888 bytes, then the base frame): they end within its first 300
     * bytes, so the read spans one page where the whole would often span
     * two. The base frame is never read (frames.c's frame_bytes knows its
     * bytes). Used by cpy_thread_read. */
    const struct cpy_thread_offsets *ts = &o->thread_state;
    uint64_t end = 0;
    const uint64_t words[] = {ts->next,
                              ts->thread_id,
                              ts->native_thread_id,
                              ts->cframe,
                              ts->current_frame,
                              ts->datastack_chunk,
                              ts->datastack_top,
                              ts->base_frame,
                              ts->last_profiled_frame,
                              ts->last_profiled_frame_seq,
                              ts->current_exception,
                              ts->exc_info};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        field_end(&end, words[i], 8);
    field_end(&end, ts->holds_gil, 4);
    field_end(&end, ts->gil_requested, 4);
    /* The exception item embedded in it, most often the topmost one. */
    if (ts->exc_state != CPY_ABSENT) {
        field_end(&end, ts->exc_state + o->err_stackitem.exc_value, 8);
        field_end(&end, ts->exc_state + o->err_stackitem.previous_item, 8);
    }
    return end > ts->size || end == 0 ? (size_t)ts->size : (size_t)end;
}

/* The version's constants, then the checks every version gets. */
static int finish(struct cpy_offsets *o, const struct cpy_layout *lay, char *err, size_t errlen)
{
    o->first_shim_owner = lay->first_shim_owner;
    o->stackref_mask = lay->stackref_mask;
    o->traits = lay->traits;
    int rc = require(o, REQUIRED, sizeof REQUIRED / sizeof REQUIRED[0], err, errlen);
    if (rc == 0 && o->traits.frames == CPY_FRAMES_OBJECT)
        rc = require(o, REQUIRED_OBJECT, sizeof REQUIRED_OBJECT / sizeof REQUIRED_OBJECT[0], err,
                     errlen);
    if (rc == 0 && o->traits.frames == CPY_FRAMES_CFRAME)
        rc = require(o, REQUIRED_CFRAME, sizeof REQUIRED_CFRAME / sizeof REQUIRED_CFRAME[0], err,
                     errlen);
    if (rc == 0 && o->traits.frames == CPY_FRAMES_DIRECT)
        rc = require(o, REQUIRED_DIRECT, sizeof REQUIRED_DIRECT / sizeof REQUIRED_DIRECT[0], err,
                     errlen);
    if (rc == 0)
        rc = check_fields(o, err, errlen);
    if (rc == 0)
        o->thread_readlen = thread_readlen(o);
    return rc;
}

int cpy_offsets_parse(const uint8_t *buf, size_t len, struct cpy_offsets *out, char *err,
                      size_t errlen)
{
    struct cpy_offsets o;
    const struct cpy_layout *lay = NULL;

    if (!buf || !out)
        return util_err_set(err, errlen, PYS_E_INVAL, "no table");
    if (len < 24 || memcmp(buf, COOKIE, sizeof COOKIE) != 0)
        return util_err_set(err, errlen, PYS_E_NOTPYTHON, "no _Py_DebugOffsets cookie");
    uint64_t version = util_load_u64(buf + 8);
    uint64_t free_threaded = util_load_u64(buf + 16);
    unsigned major = (unsigned)(version >> 24) & 0xff, minor = (unsigned)(version >> 16) & 0xff;
    unsigned level = (unsigned)(version >> 4) & 0xf;
    if (version >> 32 || major != 3)
        return util_err_set(err, errlen, PYS_E_VERSION,
                            "version field 0x%llx is not a Python 3 version",
                            (unsigned long long)version);
    lay = find_layout(minor);
    if (!lay || !lay->traits.debug_table)
        return util_err_set(err, errlen, PYS_E_VERSION, "Python 3.%u is not supported", minor);
    if (level != 0xf)
        return util_err_set(
            err, errlen, PYS_E_VERSION,
            "Python 3.%u.%u is a pre-release (level 0x%x, serial %u): its layout is "
            "not known",
            minor, (unsigned)(version >> 8) & 0xff, level, (unsigned)version & 0xf);
    if (free_threaded != 0)
        return util_err_set(err, errlen, PYS_E_VERSION,
                            "free-threaded Python 3.%u builds are not supported", minor);
    if (len < lay->table_size)
        return util_err_set(err, errlen, PYS_E_CORRUPT,
                            "debug offsets table truncated: %zu bytes, Python 3.%u needs %u", len,
                            minor, lay->table_size);

    memset(&o, 0, sizeof o);
    o.version = (uint32_t)version;
    o.minor = minor;
    for (int f = 0; f < CPY_F_COUNT; f++) {
        uint64_t v = lay->fallback[f];
        if (lay->pos[f] != CPY_NOPOS) {
            if ((size_t)lay->pos[f] + 8 > lay->table_size)
                return util_err_set(err, errlen, PYS_E_CORRUPT, "layout table inconsistent");
            v = util_load_u64(buf + lay->pos[f]);
            if (v == CPY_ABSENT)
                return util_err_set(err, errlen, PYS_E_CORRUPT, "debug offsets: %s is -1",
                                    FIELD_NAME[f]);
        }
        *field_ptr(&o, (enum cpy_field)f) = v;
    }
    /* Offsets the table lacks but that sit at a fixed distance from one it has. */
    if (o.runtime_state.main_thread == CPY_ABSENT)
        o.runtime_state.main_thread = o.runtime_state.interpreters_head + lay->main_thread_delta;
    if (o.interpreter_state.threads_main == CPY_ABSENT)
        o.interpreter_state.threads_main =
            o.interpreter_state.threads_head + lay->threads_main_delta;
    if (o.interpreter_state.gil_switches == CPY_ABSENT && lay->gil_switches_delta &&
        o.interpreter_state.gil_runtime_state_holder != CPY_ABSENT)
        o.interpreter_state.gil_switches =
            o.interpreter_state.gil_runtime_state_holder + lay->gil_switches_delta;
    /* A zero "gil_runtime_state_enabled"-style offset means absent in GIL builds. */
    if (o.interpreter_state.code_object_generation == 0)
        o.interpreter_state.code_object_generation = CPY_ABSENT;
    int rc = finish(&o, lay, err, errlen);
    if (rc < 0)
        return rc;
    *out = o;
    return 0;
}

int cpy_offsets_expects_table(uint32_t version)
{
    const struct cpy_layout *lay = find_layout((version >> 16) & 0xff);
    return (version >> 24) == 3 && lay && lay->traits.debug_table;
}

int cpy_offsets_for_version(uint32_t version, struct cpy_offsets *out, char *err, size_t errlen)
{
    struct cpy_offsets o;
    unsigned minor = (version >> 16) & 0xff;
    const struct cpy_layout *lay = find_layout(minor);
    if ((version >> 24) != 3 || !lay || lay->traits.debug_table)
        return util_err_set(err, errlen, PYS_E_VERSION, "Python %u.%u is not supported",
                            (unsigned)(version >> 24), minor);
    memset(&o, 0, sizeof o);
    o.version = version;
    o.minor = minor;
    for (int f = 0; f < CPY_F_COUNT; f++)
        *field_ptr(&o, (enum cpy_field)f) = lay->fallback[f];
    int rc = finish(&o, lay, err, errlen);
    if (rc < 0)
        return rc;
    *out = o;
    return 0;
}
