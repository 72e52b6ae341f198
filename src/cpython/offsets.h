/*
 * offsets: the one struct of interpreter offsets the walker reads through.
 *
 * For CPython 3.13+ the values come from the target's own _Py_DebugOffsets
 * table, read at attach; which byte of that table holds which field differs
 * per minor version and is generated from the interpreters' headers by
 * tools/gen_layouts.py into layouts_gen.c. Fields a version's table lacks are
 * filled from the same generated data (offsets in public structs) or left
 * CPY_ABSENT. cpy_offsets_parse() validates everything once, so the walker can
 * trust every offset it is given.
 */
#ifndef PYSTROBE_CPYTHON_OFFSETS_H
#define PYSTROBE_CPYTHON_OFFSETS_H

#include <stddef.h>
#include <stdint.h>

#define CPY_ABSENT UINT64_MAX

/*
 * Every field pystrobe uses: X(group, name, width). width is how many bytes
 * the walker reads at that offset inside the group's struct (0 for sizes and
 * for the start of an embedded struct that other fields index into).
 */
#define CPY_FIELDS(X)                                                                              \
    X(runtime_state, size, 0)                                                                      \
    X(runtime_state, interpreters_head, 8)                                                         \
    X(runtime_state, main_thread, 8)                                                               \
    X(runtime_state, gil_holder, 8)                                                                \
    X(runtime_state, gil_last_holder, 8)                                                           \
    X(runtime_state, gil_switches, 8)                                                              \
    X(interpreter_state, size, 0)                                                                  \
    X(interpreter_state, id, 8)                                                                    \
    X(interpreter_state, next, 8)                                                                  \
    X(interpreter_state, threads_head, 8)                                                          \
    X(interpreter_state, threads_main, 8)                                                          \
    X(interpreter_state, gc, 0)                                                                    \
    X(interpreter_state, ceval_gil, 8)                                                             \
    X(interpreter_state, gil_runtime_state, 0)                                                     \
    X(interpreter_state, gil_runtime_state_locked, 4)                                              \
    X(interpreter_state, gil_runtime_state_holder, 8)                                              \
    X(interpreter_state, gil_switches, 8)                                                          \
    X(interpreter_state, code_object_generation, 8)                                                \
    X(interpreter_state, imports_modules, 8)                                                       \
    X(thread_state, size, 0)                                                                       \
    X(thread_state, prev, 8)                                                                       \
    X(thread_state, next, 8)                                                                       \
    X(thread_state, interp, 8)                                                                     \
    X(thread_state, current_frame, 8)                                                              \
    X(thread_state, cframe, 8)                                                                     \
    X(thread_state, base_frame, 8)                                                                 \
    X(thread_state, last_profiled_frame, 8)                                                        \
    X(thread_state, last_profiled_frame_seq, 8)                                                    \
    X(thread_state, thread_id, 8)                                                                  \
    X(thread_state, native_thread_id, 8)                                                           \
    X(thread_state, datastack_chunk, 8)                                                            \
    X(thread_state, datastack_top, 8)                                                              \
    X(thread_state, status, 4)                                                                     \
    X(thread_state, holds_gil, 4)                                                                  \
    X(thread_state, gil_requested, 4)                                                              \
    X(thread_state, current_exception, 8)                                                          \
    X(thread_state, exc_info, 8)                                                                   \
    X(thread_state, exc_state, 0)                                                                  \
    X(err_stackitem, exc_value, 8)                                                                 \
    X(err_stackitem, previous_item, 8)                                                             \
    X(cframe, current_frame, 8)                                                                    \
    X(interpreter_frame, size, 0)                                                                  \
    X(interpreter_frame, previous, 8)                                                              \
    X(interpreter_frame, executable, 8)                                                            \
    X(interpreter_frame, instr_ptr, 8)                                                             \
    X(interpreter_frame, owner, 1)                                                                 \
    X(interpreter_frame, is_entry, 1)                                                              \
    X(interpreter_frame, lasti, 4)                                                                 \
    X(interpreter_frame, executing, 1)                                                             \
    X(interpreter_frame, stackpointer, 8)                                                          \
    X(interpreter_frame, stacktop, 4)                                                              \
    X(code_object, size, 0)                                                                        \
    X(code_object, filename, 8)                                                                    \
    X(code_object, name, 8)                                                                        \
    X(code_object, qualname, 8)                                                                    \
    X(code_object, linetable, 8)                                                                   \
    X(code_object, firstlineno, 4)                                                                 \
    X(code_object, firsttraceable, 4)                                                              \
    X(code_object, framesize, 4)                                                                   \
    X(code_object, co_code_adaptive, 0)                                                            \
    X(code_object, co_code, 8)                                                                     \
    X(pyobject, size, 0)                                                                           \
    X(pyobject, ob_type, 8)                                                                        \
    X(var_object, ob_size, 8)                                                                      \
    X(type_object, size, 0)                                                                        \
    X(type_object, tp_name, 8)                                                                     \
    X(type_object, tp_flags, 8)                                                                    \
    X(type_object, tp_basicsize, 8)                                                                \
    X(type_object, tp_dictoffset, 8)                                                               \
    X(heap_type_object, size, 0)                                                                   \
    X(heap_type_object, ht_cached_keys, 8)                                                         \
    X(dict_object, size, 0)                                                                        \
    X(dict_object, ma_keys, 8)                                                                     \
    X(dict_object, ma_values, 8)                                                                   \
    X(dict_keys, dk_size, 8)                                                                       \
    X(dict_keys, dk_log2_size, 1)                                                                  \
    X(dict_keys, dk_log2_index_bytes, 1)                                                           \
    X(dict_keys, dk_kind, 1)                                                                       \
    X(dict_keys, dk_nentries, 8)                                                                   \
    X(dict_keys, dk_indices, 0)                                                                    \
    X(dict_keys, entry_size, 0)                                                                    \
    X(dict_keys, unicode_entry_size, 0)                                                            \
    X(dict_values, values, 0)                                                                      \
    X(dict_values, valid, 1)                                                                       \
    X(long_object, size, 0)                                                                        \
    X(long_object, lv_tag, 8)                                                                      \
    X(long_object, ob_digit, 0)                                                                    \
    X(object_prefix, managed_dict, 0)                                                              \
    X(object_prefix, managed_values, 0)                                                            \
    X(bytes_object, size, 0)                                                                       \
    X(bytes_object, ob_size, 8)                                                                    \
    X(bytes_object, ob_sval, 0)                                                                    \
    X(unicode_object, size, 0)                                                                     \
    X(unicode_object, state, 4)                                                                    \
    X(unicode_object, length, 8)                                                                   \
    X(unicode_object, asciiobject_size, 0)                                                         \
    X(unicode_object, compactunicodeobject_size, 0)                                                \
    X(gc, size, 0)                                                                                 \
    X(gc, collecting, 4)                                                                           \
    X(gc, frame, 8)                                                                                \
    X(gc, generation_stats_size, 0)                                                                \
    X(gc, generation_stats, 8)                                                                     \
    X(set_object, size, 0)                                                                         \
    X(set_object, used, 8)                                                                         \
    X(set_object, table, 8)                                                                        \
    X(set_object, mask, 8)                                                                         \
    X(gen_object, size, 0)                                                                         \
    X(gen_object, gi_iframe, 0)                                                                    \
    X(gen_object, gi_frame_state, 1)                                                               \
    X(llist_node, next, 8)                                                                         \
    X(interpreter_frame, localsplus, 0)                                                            \
    X(code_object, localsplusnames, 8)                                                             \
    X(code_object, localspluskinds, 8)                                                             \
    X(code_object, nlocalsplus, 4)                                                                 \
    X(code_object, stacksize, 4)                                                                   \
    X(tuple_object, size, 0)                                                                       \
    X(tuple_object, ob_item, 0)                                                                    \
    X(float_object, size, 0)                                                                       \
    X(float_object, ob_fval, 8)

enum cpy_field {
#define CPY_FIELD_ENUM_(g, n, w) CPY_F_##g##_##n,
    CPY_FIELDS(CPY_FIELD_ENUM_)
#undef CPY_FIELD_ENUM_
        CPY_F_COUNT
};

/* The values, by group, as the walker uses them. CPY_ABSENT where the
 * target's version has no such field. */
struct cpy_offsets {
    uint32_t version; /* PY_VERSION_HEX of the target */
    uint32_t minor;
    struct {
        uint64_t size, interpreters_head, main_thread, gil_holder, gil_last_holder, gil_switches;
    } runtime_state;
    struct cpy_interp_offsets {
        uint64_t size, id, next, threads_head, threads_main, gc, ceval_gil, gil_runtime_state,
            gil_runtime_state_locked, gil_runtime_state_holder, gil_switches,
            code_object_generation, imports_modules;
    } interpreter_state;
    struct cpy_thread_offsets {
        uint64_t size, prev, next, interp, current_frame, cframe, base_frame, last_profiled_frame,
            last_profiled_frame_seq, thread_id, native_thread_id, datastack_chunk, datastack_top,
            status, holds_gil, gil_requested, current_exception, exc_info, exc_state;
    } thread_state;
    struct {
        uint64_t exc_value, previous_item;
    } err_stackitem;
    struct {
        uint64_t current_frame;
    } cframe;
    struct cpy_frame_offsets {
        uint64_t size, previous, executable, instr_ptr, owner, is_entry, lasti, executing,
            stackpointer;
        /* 3.12, 3.13: the int stacktop, which the interpreter sets to -1 as
         * a frame starts or resumes running and to its stack's depth before
         * it calls a Python function inline (cpy_raw_frame.running).
         * CPY_ABSENT where it says neither: 3.11 leaves it as it was while
         * the frame runs; 3.14+ keep a stack pointer instead. */
        uint64_t stacktop;
        /* The fast locals: 3.8-3.10 PyFrameObject.f_localsplus, 3.11+
         * _PyInterpreterFrame.localsplus (dump --locals). */
        uint64_t localsplus;
    } interpreter_frame;
    struct {
        uint64_t size, filename, name, qualname, linetable, firstlineno, firsttraceable, framesize,
            co_code_adaptive, co_code;
        /* The locals' names: co_varnames before 3.11, co_localsplusnames
         * after; their kinds (3.11+, a bytes object). */
        uint64_t localsplusnames, localspluskinds;
        /* 3.11, which has no co_framesize: the int counts a frame's size
         * is made of (cpy_code_frame_words). */
        uint64_t nlocalsplus, stacksize;
    } code_object;
    struct {
        uint64_t size, ob_type;
    } pyobject;
    /* 3.11+: how many bytes BEFORE an object its managed dict pointer and
     * its values pointer lie (3.12: the same word, tagged; 3.13+: no values
     * pointer, the values inline after the object). */
    struct {
        uint64_t managed_dict, managed_values;
    } object_prefix;
    struct {
        uint64_t ob_size;
    } var_object;
    struct {
        uint64_t size, tp_name, tp_flags, tp_basicsize, tp_dictoffset;
    } type_object;
    struct {
        uint64_t size, ht_cached_keys;
    } heap_type_object;
    struct {
        uint64_t size, ma_keys, ma_values;
    } dict_object;
    /* PyDictKeysObject: dk_size before 3.11, dk_log2_* and dk_kind from
     * 3.11; entry_size is sizeof(PyDictKeyEntry), unicode_entry_size that
     * of the 3.11+ entries of str-keyed tables. */
    struct {
        uint64_t dk_size, dk_log2_size, dk_log2_index_bytes, dk_kind, dk_nentries, dk_indices,
            entry_size, unicode_entry_size;
    } dict_keys;
    /* Split tables' values: values[] inside PyDictValues (0 before 3.11,
     * where ma_values is the array itself); valid (3.13+) says whether an
     * object's inline values hold its attributes. */
    struct {
        uint64_t values, valid;
    } dict_values;
    /* lv_tag: 3.12+ (digit count << 3 | sign); before, ob_size is the signed
     * digit count. */
    struct {
        uint64_t size, lv_tag, ob_digit;
    } long_object;
    struct {
        uint64_t size, ob_size, ob_sval;
    } bytes_object;
    struct {
        uint64_t size, state, length, asciiobject_size, compactunicodeobject_size;
    } unicode_object;
    struct {
        uint64_t size, collecting, frame;
        /* 3.15+: the size of the struct gc_stats that generation_stats
         * points to (a size, not an offset in gc), and that pointer. */
        uint64_t generation_stats_size, generation_stats;
    } gc;
    /* 3.14+ (asyncio task graphs, cpython/asyncio.c); CPY_ABSENT before. */
    struct {
        uint64_t size, used, table, mask;
    } set_object;
    struct {
        uint64_t size, gi_iframe, gi_frame_state;
    } gen_object;
    struct {
        uint64_t next;
    } llist_node;
    /* Tuples and floats: dump --locals (cpython/locals.c). */
    struct {
        uint64_t size, ob_item;
    } tuple_object;
    struct {
        uint64_t size, ob_fval;
    } float_object;

    /* Constants of the version, not offsets. */
    struct cpy_traits {
        uint8_t frames;      /* CPY_FRAMES_*: how frames are reached and linked */
        uint8_t position;    /* CPY_POS_*: what the frame's position field holds */
        uint8_t lines;       /* CPY_LINES_*: the line table's format */
        uint8_t debug_table; /* the runtime starts with _Py_DebugOffsets (3.13+) */
        uint8_t executing;   /* 3.8-3.10: the value of interpreter_frame.executing (f_executing,
                                f_state) while a frame runs */
    } traits;
    uint8_t first_shim_owner; /* frames with owner >= this are not Python frames */
    uint64_t stackref_mask;   /* bits to clear from a _PyStackRef (3.14+), else 0 */
    size_t thread_readlen;    /* bytes of PyThreadState a thread's read takes: its used fields */
};

/* How a version keeps its frames. */
#define CPY_FRAMES_OBJECT 0 /* 3.7-3.10: PyFrameObject chain from tstate->frame (f_back) */
#define CPY_FRAMES_CFRAME 1 /* 3.11-3.12: _PyInterpreterFrame via tstate->cframe->current_frame */
#define CPY_FRAMES_DIRECT 2 /* 3.13+: _PyInterpreterFrame at tstate->current_frame */
/* What a frame's position field holds. */
#define CPY_POS_LASTI_BYTES 0 /* 3.7-3.9: f_lasti, a byte offset, -1 before start */
#define CPY_POS_LASTI_UNITS 1 /* 3.10: f_lasti in code units, -1 before start */
#define CPY_POS_PREV_INSTR 2  /* 3.11, 3.12: pointer to the last code unit executed */
#define CPY_POS_INSTR_PTR 3   /* 3.13+: pointer to the instruction executing */
/* Line table formats (cpython/linetable.h). */
#define CPY_LINES_LNOTAB 0   /* 3.7-3.9 */
#define CPY_LINES_PEP626 1   /* 3.10 */
#define CPY_LINES_LOCTABLE 2 /* 3.11+ */

/* Generated, per minor version (layouts_gen.c). */
#define CPY_NOPOS UINT16_MAX
struct cpy_layout {
    uint32_t minor;
    uint32_t table_size;            /* sizeof(_Py_DebugOffsets) */
    uint16_t pos[CPY_F_COUNT];      /* byte position in the table, or CPY_NOPOS */
    uint64_t fallback[CPY_F_COUNT]; /* from the headers where pos is CPY_NOPOS, or CPY_ABSENT */
    uint64_t main_thread_delta;     /* runtime main_thread - interpreters_head */
    uint64_t threads_main_delta;    /* interp threads.main - threads.head */
    uint64_t gil_switches_delta;    /* GIL switch_number - last_holder (3.12+) */
    uint8_t first_shim_owner;
    uint64_t stackref_mask;
    struct cpy_traits traits;
};
extern const struct cpy_layout cpy_layouts[];
extern const size_t cpy_layouts_count;

/* Largest plausible size of any struct the table describes; a bigger value
 * is a corrupt table. (3.15's runtime state is 339 KiB.) */
#define CPY_MAX_STRUCT_SIZE (16u << 20)

/*
 * Parse and validate a _Py_DebugOffsets table copied from the target (len
 * bytes; pass at least the largest table size known). Checks the cookie, the
 * version (a known minor, a final release), the free-threaded flag, every
 * struct size and that every field used lies inside its struct, aligned.
 * Returns 0 and fills *out; PYS_E_NOTPYTHON for a wrong cookie,
 * PYS_E_VERSION for an unknown or pre-release version or a free-threaded
 * build, PYS_E_CORRUPT for anything else; err gets one line saying why.
 */
int cpy_offsets_parse(const uint8_t *buf, size_t len, struct cpy_offsets *out, char *err,
                      size_t errlen);

/* Largest _Py_DebugOffsets of any known version: how much to read. */
size_t cpy_offsets_max_table_size(void);

/*
 * The offsets of a version without a _Py_DebugOffsets table (3.8-3.12),
 * from the generated tables, for the target's PY_VERSION_HEX (patch and
 * release level may be 0 when only major.minor is known). PYS_E_VERSION if
 * pystrobe has no table for that minor version or it has a debug table.
 */
int cpy_offsets_for_version(uint32_t version, struct cpy_offsets *out, char *err, size_t errlen);

/* 1 if version's minor is one pystrobe knows to start its runtime with
 * _Py_DebugOffsets (3.13+), else 0. Such a runtime read without the table's
 * cookie is one not yet in place (its file still being mapped), not a
 * version pystrobe lacks. */
int cpy_offsets_expects_table(uint32_t version);

#define CPY_HAS(o, group, name) ((o)->group.name != CPY_ABSENT)

#endif
