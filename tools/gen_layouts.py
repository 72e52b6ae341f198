#!/usr/bin/env python3
"""Generate src/cpython/layouts_gen.c from CPython's own headers.

For each supported minor version with a _Py_DebugOffsets table (3.13+), the
generated table says at which byte of the target's table each field pystrobe
uses sits, and, for fields that version's table lacks, the offset taken from
the headers (public structs such as PyThreadState and PyCodeObject). For the
versions without a table (3.8-3.12) every offset comes from the headers.

The positions are found by compiling a probe against the headers (offsetof,
never by hand), so the output is only as right as the headers given. When
several header sets are given for one minor (e.g. pyenv 3.13.0 and Debian
3.13.18) they must agree, or the tool stops.

Usage:
    tools/gen_layouts.py [--check] [-o src/cpython/layouts_gen.c]

Header sets are found in the pyenv builds (~/.pyenv/versions/3.1x.*) and the
sid root (.cache/sid-root, made by scripts/sidroot.sh ensure). --check
regenerates into memory and fails if the committed file differs.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIDROOT = Path(os.environ.get("PYSTROBE_SIDROOT", ROOT / ".cache" / "sid-root"))
OUT = ROOT / "src" / "cpython" / "layouts_gen.c"
MINORS = [7, 8, 9, 10, 11, 12, 13, 14, 15]
TABLE_FROM = 13  # first minor whose runtime carries _Py_DebugOffsets


def field_list():
    """(group, name) of CPY_FIELDS in offsets.h, in order."""
    text = (ROOT / "src" / "cpython" / "offsets.h").read_text()
    block = text[text.index("#define CPY_FIELDS(X)"):text.index("enum cpy_field")]
    return re.findall(r"X\((\w+), (\w+), \d+\)", block)


# Where the headers put each field, for the versions (or the fields) the
# target's own table does not give: (condition, C expression), first match.
V = "PY_VERSION_HEX"
EXPRS = {
    ("runtime_state", "size"): [("1", "sizeof(_PyRuntimeState)")],
    ("runtime_state", "interpreters_head"): [("1", "offsetof(_PyRuntimeState, interpreters.head)")],
    ("runtime_state", "main_thread"): [(f"{V} < 0x03080000",
                                        "offsetof(_PyRuntimeState, ceval.pending.main_thread)"),
                                       (f"{V} < 0x030d0000",
                                        "offsetof(_PyRuntimeState, main_thread)")],
    ("runtime_state", "gil_holder"): [(f"{V} < 0x030c0000",
                                       "offsetof(_PyRuntimeState, gilstate.tstate_current)")],
    ("runtime_state", "gil_last_holder"): [(f"{V} < 0x030c0000",
                                            "offsetof(_PyRuntimeState, ceval.gil.last_holder)")],
    ("runtime_state", "gil_switches"): [(f"{V} < 0x030c0000",
                                         "offsetof(_PyRuntimeState, ceval.gil.switch_number)")],
    ("interpreter_state", "size"): [("1", "sizeof(PyInterpreterState)")],
    ("interpreter_state", "id"): [("1", "offsetof(PyInterpreterState, id)")],
    ("interpreter_state", "next"): [("1", "offsetof(PyInterpreterState, next)")],
    ("interpreter_state", "threads_head"): [
        (f"{V} < 0x030b0000", "offsetof(PyInterpreterState, tstate_head)"),
        ("1", "offsetof(PyInterpreterState, threads.head)")],
    ("interpreter_state", "gc"): [(f"{V} >= 0x03090000", "offsetof(PyInterpreterState, gc)")],
    ("interpreter_state", "ceval_gil"): [(f"{V} >= 0x030c0000",
                                          "offsetof(PyInterpreterState, ceval.gil)")],
    ("interpreter_state", "gil_runtime_state"): [(f"{V} >= 0x030c0000",
                                                  "offsetof(PyInterpreterState, _gil)")],
    ("interpreter_state", "gil_runtime_state_locked"): [
        (f"{V} >= 0x030c0000", "offsetof(PyInterpreterState, _gil.locked)")],
    ("interpreter_state", "gil_runtime_state_holder"): [
        (f"{V} >= 0x030c0000", "offsetof(PyInterpreterState, _gil.last_holder)")],
    # 3.13+: from the table's holder and gil_switches_delta (see below).
    ("interpreter_state", "gil_switches"): [
        (f"{V} >= 0x030c0000 && {V} < 0x030d0000",
         "offsetof(PyInterpreterState, _gil.switch_number)")],
    ("thread_state", "size"): [("1", "sizeof(PyThreadState)")],
    ("thread_state", "prev"): [("1", "offsetof(PyThreadState, prev)")],
    ("thread_state", "next"): [("1", "offsetof(PyThreadState, next)")],
    ("thread_state", "interp"): [("1", "offsetof(PyThreadState, interp)")],
    ("thread_state", "current_frame"): [(f"{V} < 0x030b0000", "offsetof(PyThreadState, frame)")],
    ("thread_state", "cframe"): [(f"{V} >= 0x030b0000 && {V} < 0x030d0000",
                                  "offsetof(PyThreadState, cframe)")],
    ("cframe", "current_frame"): [(f"{V} >= 0x030b0000 && {V} < 0x030d0000",
                                   "offsetof(_PyCFrame, current_frame)")],
    ("thread_state", "thread_id"): [("1", "offsetof(PyThreadState, thread_id)")],
    ("thread_state", "native_thread_id"): [(f"{V} >= 0x030b0000",
                                            "offsetof(PyThreadState, native_thread_id)")],
    ("thread_state", "datastack_chunk"): [(f"{V} >= 0x030b0000",
                                           "offsetof(PyThreadState, datastack_chunk)")],
    ("thread_state", "datastack_top"): [(f"{V} >= 0x030b0000",
                                         "offsetof(PyThreadState, datastack_top)")],
    ("thread_state", "status"): [(f"{V} >= 0x030c0000", "offsetof(PyThreadState, _status)")],
    ("thread_state", "holds_gil"): [(f"{V} >= 0x030e0000", "offsetof(PyThreadState, holds_gil)")],
    ("thread_state", "current_exception"): [
        (f"{V} < 0x030c0000", "offsetof(PyThreadState, curexc_type)"),
        ("1", "offsetof(PyThreadState, current_exception)")],
    ("thread_state", "exc_info"): [("1", "offsetof(PyThreadState, exc_info)")],
    ("thread_state", "exc_state"): [("1", "offsetof(PyThreadState, exc_state)")],
    ("err_stackitem", "exc_value"): [("1", "offsetof(_PyErr_StackItem, exc_value)")],
    ("err_stackitem", "previous_item"): [("1", "offsetof(_PyErr_StackItem, previous_item)")],
    ("interpreter_frame", "size"): [(f"{V} < 0x030b0000", "sizeof(PyFrameObject)"),
                                    ("1", "sizeof(_PyInterpreterFrame)")],
    ("interpreter_frame", "previous"): [(f"{V} < 0x030b0000", "offsetof(PyFrameObject, f_back)"),
                                        ("1", "offsetof(_PyInterpreterFrame, previous)")],
    ("interpreter_frame", "executable"): [
        (f"{V} < 0x030b0000", "offsetof(PyFrameObject, f_code)"),
        ("1", "offsetof(_PyInterpreterFrame, f_code)")],
    ("interpreter_frame", "instr_ptr"): [(f"{V} >= 0x030b0000",
                                          "offsetof(_PyInterpreterFrame, prev_instr)")],
    ("interpreter_frame", "owner"): [(f"{V} >= 0x030b0000",
                                      "offsetof(_PyInterpreterFrame, owner)")],
    ("interpreter_frame", "is_entry"): [(f"{V} >= 0x030b0000 && {V} < 0x030c0000",
                                         "offsetof(_PyInterpreterFrame, is_entry)")],
    ("interpreter_frame", "lasti"): [(f"{V} < 0x030b0000", "offsetof(PyFrameObject, f_lasti)")],
    # Only where a running frame's stacktop is -1 (offsets.h): not 3.11,
    # which leaves it as it was, nor 3.14+, which have a stack pointer.
    ("interpreter_frame", "stacktop"): [(f"{V} >= 0x030c0000 && {V} < 0x030e0000",
                                         "offsetof(_PyInterpreterFrame, stacktop)")],
    ("interpreter_frame", "executing"): [
        (f"{V} < 0x030a0000", "offsetof(PyFrameObject, f_executing)"),
        (f"{V} < 0x030b0000", "offsetof(PyFrameObject, f_state)")],
    ("code_object", "size"): [("1", "sizeof(PyCodeObject)")],
    ("code_object", "filename"): [("1", "offsetof(PyCodeObject, co_filename)")],
    ("code_object", "name"): [("1", "offsetof(PyCodeObject, co_name)")],
    ("code_object", "qualname"): [(f"{V} >= 0x030b0000", "offsetof(PyCodeObject, co_qualname)")],
    ("code_object", "linetable"): [(f"{V} < 0x030a0000", "offsetof(PyCodeObject, co_lnotab)"),
                                   ("1", "offsetof(PyCodeObject, co_linetable)")],
    ("code_object", "firstlineno"): [("1", "offsetof(PyCodeObject, co_firstlineno)")],
    ("code_object", "firsttraceable"): [(f"{V} >= 0x030b0000",
                                         "offsetof(PyCodeObject, _co_firsttraceable)")],
    ("code_object", "framesize"): [(f"{V} >= 0x030c0000",
                                    "offsetof(PyCodeObject, co_framesize)")],
    ("code_object", "co_code_adaptive"): [(f"{V} >= 0x030b0000",
                                           "offsetof(PyCodeObject, co_code_adaptive)")],
    ("code_object", "co_code"): [(f"{V} < 0x030b0000", "offsetof(PyCodeObject, co_code)")],
    ("pyobject", "size"): [("1", "sizeof(PyObject)")],
    ("pyobject", "ob_type"): [("1", "offsetof(PyObject, ob_type)")],
    ("var_object", "ob_size"): [("1", "offsetof(PyVarObject, ob_size)")],
    ("type_object", "size"): [("1", "sizeof(PyTypeObject)")],
    ("type_object", "tp_name"): [("1", "offsetof(PyTypeObject, tp_name)")],
    ("bytes_object", "size"): [("1", "sizeof(PyBytesObject)")],
    ("bytes_object", "ob_size"): [("1", "offsetof(PyBytesObject, ob_base.ob_size)")],
    ("bytes_object", "ob_sval"): [("1", "offsetof(PyBytesObject, ob_sval)")],
    ("unicode_object", "size"): [("1", "sizeof(PyUnicodeObject)")],
    ("unicode_object", "state"): [("1", "offsetof(PyASCIIObject, state)")],
    ("unicode_object", "length"): [("1", "offsetof(PyASCIIObject, length)")],
    ("unicode_object", "asciiobject_size"): [("1", "sizeof(PyASCIIObject)")],
    ("unicode_object", "compactunicodeobject_size"): [("1", "sizeof(PyCompactUnicodeObject)")],
    # Thread names (core/threadnames.c): sys.modules, dicts, instance
    # attributes and ints.
    ("interpreter_state", "imports_modules"): [
        (f"{V} < 0x030c0000", "offsetof(PyInterpreterState, modules)"),
        ("1", "offsetof(PyInterpreterState, imports.modules)")],
    ("type_object", "tp_flags"): [("1", "offsetof(PyTypeObject, tp_flags)")],
    ("type_object", "tp_basicsize"): [("1", "offsetof(PyTypeObject, tp_basicsize)")],
    ("type_object", "tp_dictoffset"): [("1", "offsetof(PyTypeObject, tp_dictoffset)")],
    ("heap_type_object", "size"): [("1", "sizeof(PyHeapTypeObject)")],
    ("heap_type_object", "ht_cached_keys"): [("1", "offsetof(PyHeapTypeObject, ht_cached_keys)")],
    ("dict_object", "size"): [("1", "sizeof(PyDictObject)")],
    ("dict_object", "ma_keys"): [("1", "offsetof(PyDictObject, ma_keys)")],
    ("dict_object", "ma_values"): [("1", "offsetof(PyDictObject, ma_values)")],
    # Before 3.11 the keys object is declared in Objects/dict-common.h, which
    # is not installed: Py_ssize_t dk_refcnt, dk_size; a function pointer;
    # Py_ssize_t dk_usable, dk_nentries; char dk_indices[]; entries of
    # {hash, key, value}. The same in 3.8, 3.9 and 3.10.
    ("dict_keys", "dk_size"): [(f"{V} < 0x030b0000", "8")],
    ("dict_keys", "dk_log2_size"): [(f"{V} >= 0x030b0000",
                                     "offsetof(PyDictKeysObject, dk_log2_size)")],
    ("dict_keys", "dk_log2_index_bytes"): [(f"{V} >= 0x030b0000",
                                            "offsetof(PyDictKeysObject, dk_log2_index_bytes)")],
    ("dict_keys", "dk_kind"): [(f"{V} >= 0x030b0000", "offsetof(PyDictKeysObject, dk_kind)")],
    ("dict_keys", "dk_nentries"): [(f"{V} < 0x030b0000", "32"),
                                   ("1", "offsetof(PyDictKeysObject, dk_nentries)")],
    ("dict_keys", "dk_indices"): [(f"{V} < 0x030b0000", "40"),
                                  ("1", "offsetof(PyDictKeysObject, dk_indices)")],
    ("dict_keys", "entry_size"): [(f"{V} < 0x030b0000", "24"), ("1", "sizeof(PyDictKeyEntry)")],
    ("dict_keys", "unicode_entry_size"): [(f"{V} >= 0x030b0000", "sizeof(PyDictUnicodeEntry)")],
    ("dict_values", "values"): [(f"{V} < 0x030b0000", "0"), ("1", "offsetof(PyDictValues, values)")],
    ("dict_values", "valid"): [(f"{V} >= 0x030d0000", "offsetof(PyDictValues, valid)")],
    ("long_object", "size"): [("1", "sizeof(PyLongObject)")],
    ("long_object", "lv_tag"): [(f"{V} >= 0x030c0000", "offsetof(PyLongObject, long_value.lv_tag)")],
    ("long_object", "ob_digit"): [(f"{V} < 0x030c0000", "offsetof(PyLongObject, ob_digit)"),
                                  ("1", "offsetof(PyLongObject, long_value.ob_digit)")],
    # 3.11: _PyObject_ManagedDictPointer is obj - 3 words, _PyObject_ValuesPointer
    # obj - 4; 3.12: one word at MANAGED_DICT_OFFSET holds either (values
    # tagged with bit 0); 3.13+: values inline after the object.
    # 3.12 has no MANAGED_DICT_OFFSET: _PyObject_DictOrValuesPointer is obj - 3 words.
    ("object_prefix", "managed_dict"): [
        (f"{V} >= 0x030c0000 && {V} < 0x030d0000", "3 * sizeof(PyObject *)"),
        (f"{V} >= 0x030b0000", "(size_t)(-(MANAGED_DICT_OFFSET))")],
    # Local variables (dump --locals): the 3.13+ tables carry these.
    ("interpreter_frame", "localsplus"): [
        (f"{V} < 0x030b0000", "offsetof(PyFrameObject, f_localsplus)"),
        ("1", "offsetof(_PyInterpreterFrame, localsplus)")],
    ("code_object", "localsplusnames"): [
        (f"{V} < 0x030b0000", "offsetof(PyCodeObject, co_varnames)"),
        ("1", "offsetof(PyCodeObject, co_localsplusnames)")],
    ("code_object", "localspluskinds"): [
        (f"{V} >= 0x030b0000", "offsetof(PyCodeObject, co_localspluskinds)")],
    ("tuple_object", "size"): [("1", "sizeof(PyTupleObject)")],
    ("tuple_object", "ob_item"): [("1", "offsetof(PyTupleObject, ob_item)")],
    ("float_object", "size"): [("1", "sizeof(PyFloatObject)")],
    ("float_object", "ob_fval"): [("1", "offsetof(PyFloatObject, ob_fval)")],
    ("object_prefix", "managed_values"): [
        (f"{V} >= 0x030b0000 && {V} < 0x030c0000", "4 * sizeof(PyObject *)"),
        (f"{V} >= 0x030c0000 && {V} < 0x030d0000", "3 * sizeof(PyObject *)")],
}

# Facts about each version that are not offsets: how frames are reached,
# what a frame's position field holds, the line table format (offsets.h),
# and (3.8-3.10) the "executing" value of a running frame: f_executing == 1
# (3.8, 3.9), f_state == FRAME_EXECUTING == 0 (3.10).
EXECUTING = {7: 1, 8: 1, 9: 1, 10: 0}
TRAITS = {
    7: ("CPY_FRAMES_OBJECT", "CPY_POS_LASTI_BYTES", "CPY_LINES_LNOTAB"),
    8: ("CPY_FRAMES_OBJECT", "CPY_POS_LASTI_BYTES", "CPY_LINES_LNOTAB"),
    9: ("CPY_FRAMES_OBJECT", "CPY_POS_LASTI_BYTES", "CPY_LINES_LNOTAB"),
    10: ("CPY_FRAMES_OBJECT", "CPY_POS_LASTI_UNITS", "CPY_LINES_PEP626"),
    11: ("CPY_FRAMES_CFRAME", "CPY_POS_PREV_INSTR", "CPY_LINES_LOCTABLE"),
    12: ("CPY_FRAMES_CFRAME", "CPY_POS_PREV_INSTR", "CPY_LINES_LOCTABLE"),
    13: ("CPY_FRAMES_DIRECT", "CPY_POS_INSTR_PTR", "CPY_LINES_LOCTABLE"),
    14: ("CPY_FRAMES_DIRECT", "CPY_POS_INSTR_PTR", "CPY_LINES_LOCTABLE"),
    15: ("CPY_FRAMES_DIRECT", "CPY_POS_INSTR_PTR", "CPY_LINES_LOCTABLE"),
}

# Derived from a table field plus a delta, because the absolute offset drifts
# with build options while the distance inside one struct does not.
DERIVED = {("runtime_state", "main_thread"), ("interpreter_state", "threads_main")}


def header_sets():
    """{minor: [(label, [include flags])]}"""
    sets = {m: [] for m in MINORS}
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for d in sorted(pyenv.glob("3.*")) if pyenv.is_dir() else []:
        m = re.match(r"3\.(\d+)\.\d+$", d.name)
        if m and int(m.group(1)) in sets:
            inc = d / "include" / f"python3.{m.group(1)}"
            if not inc.is_dir():  # 3.7 and older: the ABI flags in the name
                inc = d / "include" / f"python3.{m.group(1)}m"
            if (inc / "internal").is_dir():
                sets[int(m.group(1))].append((f"pyenv {d.name}", [f"-I{inc}"]))
    for minor in MINORS:
        inc = SIDROOT / "usr" / "include" / f"python3.{minor}"
        if (inc / "internal").is_dir():
            # -idirafter: the root's multiarch pyconfig.h, but the host's libc headers.
            sets[minor].append((f"debian 3.{minor}", [f"-I{inc}", f"-idirafter{SIDROOT}/usr/include"]))
    return sets


def table_members(minor, flags):
    """Members of _Py_DebugOffsets, as {(group, name)}, parsed from the header."""
    if minor < TABLE_FROM:
        return set()
    inc = Path(flags[0][2:])
    for name in ("internal/pycore_debug_offsets.h", "internal/pycore_runtime.h"):
        p = inc / name
        if p.exists() and "typedef struct _Py_DebugOffsets" in p.read_text():
            text = p.read_text()
            break
    else:
        sys.exit(f"no _Py_DebugOffsets in {inc}")
    body = text[text.index("typedef struct _Py_DebugOffsets"):]
    body = body[:body.index("} _Py_DebugOffsets;")]
    members, pending = set(), None
    for line in body.splitlines()[1:]:
        line = line.split("//")[0].strip()
        if re.match(r"struct _?\w+\s*\{", line):
            pending = []
        elif pending is not None and re.match(r"\}\s*\w+;", line):
            group = re.match(r"\}\s*(\w+);", line).group(1)
            members.update((group, n) for n in pending)
            pending = None
        elif pending is not None and re.match(r"uint64_t \w+;", line):
            pending.append(re.match(r"uint64_t (\w+);", line).group(1))
    return members


PROBE_HEAD = """
#define Py_BUILD_CORE 1
#include <Python.h>
#include <frameobject.h>
#include <stddef.h>
#include <stdio.h>
#if __has_include("internal/pycore_runtime.h")
#include "internal/pycore_runtime.h"
#endif
#if PY_VERSION_HEX >= 0x03080000
#include "internal/pycore_pystate.h"
#else
#include "internal/pystate.h"
#endif
#if __has_include("internal/pycore_interp.h")
#include "internal/pycore_interp.h"
#endif
#if PY_VERSION_HEX >= 0x030e0000
#include "internal/pycore_debug_offsets.h"
#include "internal/pycore_interpframe_structs.h"
#include "internal/pycore_stackref.h"
#elif PY_VERSION_HEX >= 0x030b0000
#include "internal/pycore_frame.h"
#endif
#if PY_VERSION_HEX >= 0x030b0000
#include "internal/pycore_dict.h"
#include "internal/pycore_object.h"
#else
#include "longintrepr.h"
#endif
int main(void) {
"""


def probe(flags, fields, members):
    lines = [PROBE_HEAD]
    lines.append('printf("minor %d\\n", PY_MINOR_VERSION);')
    lines.append("#if PY_VERSION_HEX >= 0x030d0000")
    lines.append('printf("table_size %zu\\n", sizeof(_Py_DebugOffsets));')
    lines.append("#else")
    lines.append('printf("table_size 0\\n");')
    lines.append("#endif")
    for g, n in fields:
        key = f"{g}.{n}"
        if (g, n) in members:
            lines.append(f'printf("pos {key} %zu\\n", offsetof(_Py_DebugOffsets, {g}.{n}));')
            continue
        chain = EXPRS.get((g, n), [])
        for i, (cond, expr) in enumerate(chain):
            lines.append(("#if " if i == 0 else "#elif ") + cond)
            lines.append(f'printf("fallback {key} %zu\\n", (size_t)({expr}));')
        if chain:
            lines.append("#endif")
    lines.append("#if PY_VERSION_HEX >= 0x030d0000")
    lines.append('printf("main_thread_delta %zu\\n", offsetof(_PyRuntimeState, main_thread)'
                 ' - offsetof(_PyRuntimeState, interpreters.head));')
    lines.append('printf("threads_main_delta %zu\\n", offsetof(PyInterpreterState, threads.main)'
                 ' - offsetof(PyInterpreterState, threads.head));')
    lines.append("#else")
    lines.append('printf("main_thread_delta 0\\nthreads_main_delta 0\\n");')
    lines.append("#endif")
    lines.append("#if PY_VERSION_HEX >= 0x030c0000")
    lines.append('printf("gil_switches_delta %zu\\n",'
                 ' offsetof(struct _gil_runtime_state, switch_number)'
                 ' - offsetof(struct _gil_runtime_state, last_holder));')
    lines.append("#else")
    lines.append('printf("gil_switches_delta 0\\n");')
    lines.append("#endif")
    lines.append("#if PY_VERSION_HEX >= 0x030c0000")
    lines.append('printf("first_shim_owner %d\\n", FRAME_OWNED_BY_FRAME_OBJECT + 1);')
    lines.append("#else")
    lines.append('printf("first_shim_owner 255\\n");')  # no shim frames before 3.12
    lines.append("#endif")
    lines.append("#ifdef Py_TAG_BITS")
    lines.append('printf("stackref_mask %zu\\n", (size_t)Py_TAG_BITS);')
    lines.append("#else")
    lines.append('printf("stackref_mask 0\\n");')
    lines.append("#endif")
    lines.append("return 0; }")
    with tempfile.TemporaryDirectory() as d:
        src, exe = Path(d) / "probe.c", Path(d) / "probe"
        src.write_text("\n".join(lines))
        subprocess.run(["cc", "-w", *flags, str(src), "-o", str(exe)], check=True)
        out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    result = {}
    for line in out.splitlines():
        parts = line.split()
        result[tuple(parts[:-1])] = int(parts[-1])
    return result


def render(layouts, fields, sources):
    out = ["/* Generated by tools/gen_layouts.py from CPython's headers; do not edit.",
           " * Sources: " + "; ".join(sources) + ".",
           " * Versions without _Py_DebugOffsets (3.7-3.12) have no .pos: every offset",
           " * is a .fallback from the headers. */",
           '#include "cpython/offsets.h"', "",
           "const struct cpy_layout cpy_layouts[] = {"]
    for minor, r in sorted(layouts.items()):
        out.append("    {")
        out.append(f"        .minor = {minor},")
        out.append(f"        .table_size = {r[('table_size',)]},")
        out.append("        .pos = {")
        for g, n in fields:
            v = r.get(("pos", f"{g}.{n}"))
            out.append(f"            [CPY_F_{g}_{n}] = {v if v is not None else 'CPY_NOPOS'},")
        out.append("        },")
        out.append("        .fallback = {")
        for g, n in fields:
            v = r.get(("fallback", f"{g}.{n}"))
            out.append(f"            [CPY_F_{g}_{n}] = {str(v) + 'u' if v is not None else 'CPY_ABSENT'},")
        out.append("        },")
        for k in ("main_thread_delta", "threads_main_delta", "gil_switches_delta",
                  "first_shim_owner", "stackref_mask"):
            out.append(f"        .{k} = {r[(k,)]},")
        frames, position, lines_ = TRAITS[minor]
        out.append(f"        .traits = {{{frames}, {position}, {lines_}, {int(minor >= TABLE_FROM)}, "
                   f"{EXECUTING.get(minor, 0)}}},")
        out.append("    },")
    out.append("};")
    out.append("const size_t cpy_layouts_count = sizeof(cpy_layouts) / sizeof(cpy_layouts[0]);")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", default=str(OUT))
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    fields = field_list()
    layouts, sources = {}, []
    for minor, sets in header_sets().items():
        if not sets:
            sys.exit(f"no headers for 3.{minor}: run scripts/sidroot.sh ensure")
        first = None
        for label, flags in sets:
            r = probe(flags, fields, table_members(minor, flags))
            if first is not None and r != first:
                diff = {k: (first.get(k), r.get(k)) for k in set(first) | set(r)
                        if first.get(k) != r.get(k)}
                sys.exit(f"3.{minor}: {label} disagrees with {sets[0][0]}: {diff}")
            first = r
            sources.append(label)
        layouts[minor] = first
    text = render(layouts, fields, sources)
    if args.check:
        if Path(args.o).read_text() != text:
            sys.exit(f"{args.o} is out of date: run tools/gen_layouts.py")
        return
    Path(args.o).write_text(text)


if __name__ == "__main__":
    main()
