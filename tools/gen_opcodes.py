#!/usr/bin/env python3
"""Generate src/cpython/opcodes_gen.c from CPython's own headers.

For each supported minor version, the table names every byte value an
instruction's first byte can hold in that version's code (co_code on
3.8-3.10, the adaptive code _co_code_adaptive on 3.11+, where the
interpreter rewrites instructions into specialized and instrumented forms),
and gives the instruction each one stands for (its base: BINARY_OP for
BINARY_OP_ADD_INT, CALL for INSTRUMENTED_CALL).

Where the names come from:
  3.8-3.10  Include/opcode.h: its #defines below 256 (no specialization);
  3.11-3.12 the values from Include/opcode.h, the names from the
            _PyOpcode_OpName table and the bases from _PyOpcode_Deopt in
            Include/internal/pycore_opcode.h;
  3.13+     the values from Include/opcode_ids.h, the tables from
            Include/internal/pycore_opcode_metadata.h.
On 3.11+ an instruction is followed by inline cache units (_PyOpcode_Caches
of its base); the table gives each byte's count, 255 for a byte that hides
the instruction it replaced and so its count (INSTRUMENTED_LINE,
INSTRUMENTED_INSTRUCTION, ENTER_EXECUTOR). _PyOpcode_Deopt maps an instrumented instruction to itself; its base is the
instruction its name names after INSTRUMENTED_ when there is one (3.12+'s
instrumentation wraps that instruction), else it is its own.

The tables are read as text (they sit under Py_DEBUG or NEED_OPCODE_TABLES,
which a probe compiled against an installed header cannot turn on). When
several header sets are given for one minor (pyenv 3.13.0 and Debian 3.13)
they must agree, or the tool stops.

Usage:
    tools/gen_opcodes.py [--check] [-o src/cpython/opcodes_gen.c]

Header sets are found as tools/gen_layouts.py finds them: the pyenv builds
(~/.pyenv/versions/3.*) and the sid root (.cache/sid-root). --check
regenerates into memory and fails if the committed file differs.
"""
import argparse
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIDROOT = Path(os.environ.get("PYSTROBE_SIDROOT", ROOT / ".cache" / "sid-root"))
OUT = ROOT / "src" / "cpython" / "opcodes_gen.c"
MINORS = [7, 8, 9, 10, 11, 12, 13, 14, 15]
NAME = r"[A-Z][A-Z0-9_]*"
# #defines of opcode.h (3.7-3.10) that are not instructions.
NOT_OPCODES = {"HAVE_ARGUMENT"}


def include_dirs():
    """{minor: [(label, include dir)]}"""
    sets = {m: [] for m in MINORS}
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for d in sorted(pyenv.glob("3.*")) if pyenv.is_dir() else []:
        m = re.match(r"3\.(\d+)\.\d+$", d.name)
        if m and int(m.group(1)) in sets:
            inc = d / "include" / f"python3.{m.group(1)}"
            if not inc.is_dir():  # 3.7: the ABI flags in the name
                inc = d / "include" / f"python3.{m.group(1)}m"
            if (inc / "opcode.h").is_file():
                sets[int(m.group(1))].append((f"pyenv {d.name}", inc))
    for minor in MINORS:
        inc = SIDROOT / "usr" / "include" / f"python3.{minor}"
        if (inc / "opcode.h").is_file():
            sets[minor].append((f"debian 3.{minor}", inc))
    return sets


def defines(path):
    """{NAME: value} of the header's `#define NAME <integer>` lines."""
    out = {}
    for m in re.finditer(rf"^#define\s+({NAME})\s+(\d+)\s*$", path.read_text(), re.M):
        out[m.group(1)] = int(m.group(2))
    return out


def c_table(text, name):
    """[(index, value)] of the designated initializers of C array `name`."""
    m = re.search(rf"\b{name}\[\w*\]\s*=\s*\{{(.*?)\n\}};", text, re.S)
    if not m:
        return None
    return re.findall(rf"\[({NAME})\]\s*=\s*\"?({NAME})\"?\s*,", m.group(1))


# Instructions that stand in for another, whose cache units stay the other's.
HIDES_ANOTHER = {"INSTRUMENTED_LINE", "INSTRUMENTED_INSTRUCTION", "ENTER_EXECUTOR"}


def read_minor(minor, inc):
    """(names, bases, caches): lists of 256; a name or None, a base byte or
    None (its own), a count of cache units (None before 3.11)."""
    names, bases, caches = [None] * 256, [None] * 256, None
    if minor <= 10:
        for name, value in defines(inc / "opcode.h").items():
            if value < 256 and name not in NOT_OPCODES:
                if names[value] is not None:
                    sys.exit(f"3.{minor}: {name} and {names[value]} are both {value}")
                names[value] = name
        return names, bases, caches
    values = defines(inc / ("opcode.h" if minor <= 12 else "opcode_ids.h"))
    meta = inc / "internal" / ("pycore_opcode.h" if minor <= 12 else "pycore_opcode_metadata.h")
    text = meta.read_text()
    opname, deopt = c_table(text, "_PyOpcode_OpName"), c_table(text, "_PyOpcode_Deopt")
    if not opname or not deopt:
        sys.exit(f"3.{minor}: no _PyOpcode_OpName or _PyOpcode_Deopt in {meta}")
    for key, name in opname:
        if key != name or name not in values:
            sys.exit(f"3.{minor}: _PyOpcode_OpName[{key}] = {name} is not a defined opcode")
        if values[name] < 256:
            names[values[name]] = name
    for key, base in deopt:
        if key not in values or base not in values or values[key] >= 256:
            sys.exit(f"3.{minor}: _PyOpcode_Deopt[{key}] = {base}: unknown opcode")
        if base == key and key.startswith("INSTRUMENTED_"):
            base = key[len("INSTRUMENTED_"):]
            if base not in values or values[base] >= 256 or names[values[base]] != base:
                base = key
        if base != key:
            bases[values[key]] = values[base]
    m = re.search(r"\b_PyOpcode_Caches\[256\]\s*=\s*\{(.*?)\n\};", text, re.S)
    if not m:
        sys.exit(f"3.{minor}: no _PyOpcode_Caches in {meta}")
    by_base = {values[k]: int(v) for k, v in re.findall(rf"\[({NAME})\]\s*=\s*(\d+)\s*,", m.group(1))}
    caches = [0] * 256
    for b in range(256):
        if names[b] in HIDES_ANOTHER:
            caches[b] = 255
        elif names[b] is not None:
            caches[b] = by_base.get(b if bases[b] is None else bases[b], 0)
    return names, bases, caches


def c_str(s):
    return "NULL" if s is None else f'"{s}"'


def render(tables, sources):
    out = [
        "/* Generated by tools/gen_opcodes.py from CPython's headers; do not edit.",
        " * Sources: " + ", ".join(sources) + ".",
        " * Per minor version: the name of each byte value an instruction can",
        " * start with (NULL: none), and the byte of the instruction each stands",
        " * for (itself unless specialized or instrumented; NULL: all are their own),",
        " * and the inline cache units after each (255: unknown; NULL: none). */",
        '#include "cpython.h"',
        "",
    ]
    for minor, (names, bases, caches) in tables.items():
        out.append(f"static const char *const names_3_{minor}[256] = {{")
        out.extend(f"    [{i}] = {c_str(n)}," for i, n in enumerate(names) if n is not None)
        out.append("};")
        if any(b is not None for b in bases):
            out.append(f"static const uint8_t bases_3_{minor}[256] = {{")
            row = [i if b is None else b for i, b in enumerate(bases)]
            out.extend("    " + " ".join(f"{b}," for b in row[i:i + 16])
                       for i in range(0, 256, 16))
            out.append("};")
        if caches is not None:
            out.append(f"static const uint8_t caches_3_{minor}[256] = {{")
            out.extend("    " + " ".join(f"{c}," for c in caches[i:i + 16])
                       for i in range(0, 256, 16))
            out.append("};")
        out.append("")
    out.append("const struct cpy_opcode_table cpy_opcode_tables[] = {")
    for minor, (names, bases, caches) in tables.items():
        b = f"bases_3_{minor}" if any(x is not None for x in bases) else "NULL"
        c = f"caches_3_{minor}" if caches is not None else "NULL"
        out.append(f"    {{{minor}, names_3_{minor}, {b}, {c}}},")
    out.append("};")
    out.append("const size_t cpy_opcode_tables_count = "
               "sizeof(cpy_opcode_tables) / sizeof(cpy_opcode_tables[0]);")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", default=str(OUT))
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    tables, sources = {}, []
    for minor, sets in include_dirs().items():
        if not sets:
            sys.exit(f"no headers for 3.{minor}: run scripts/sidroot.sh ensure")
        first = None
        for label, inc in sets:
            r = read_minor(minor, inc)
            if first is not None and r != first:
                sys.exit(f"3.{minor}: {label} disagrees with {sets[0][0]}")
            first = r
            sources.append(label)
        tables[minor] = first
    text = render(tables, sources)
    if args.check:
        if Path(args.o).read_text() != text:
            sys.exit(f"{args.o} is out of date: run tools/gen_opcodes.py")
        return
    Path(args.o).write_text(text)


if __name__ == "__main__":
    main()
