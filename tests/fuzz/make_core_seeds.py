#!/usr/bin/env python3
"""Write the seeds of tests/fuzz/fuzz_core.c: small x86-64 ELF cores.

    python3 tests/fuzz/make_core_seeds.py DIR

  files     notes (NT_PRSTATUS x2, NT_PRPSINFO, NT_AUXV, NT_FILE) and three
            segments: one whose first page is the core's own first page and
            whose second page the core leaves out (p_filesz < p_memsz), to
            be read from the file the NT_FILE note names (the fuzzer's
            /python holds the input's first 8 KiB, so the two match); one
            fully present; one left out with no file behind it
  truncated the same cut short inside its last segment
  nofiles   one segment and a thread, no NT_FILE note
"""
import struct
import sys
from pathlib import Path

PAGE = 4096


def note(ntype, desc):
    name = b"CORE\0"
    pad = lambda b: b + b"\0" * (-len(b) % 4)
    return struct.pack("<III", len(name), len(desc), ntype) + pad(name) + pad(desc)


def prstatus(tid, sig):
    d = bytearray(336)
    struct.pack_into("<h", d, 12, sig)
    struct.pack_into("<i", d, 32, tid)
    return note(1, bytes(d))


def prpsinfo(pid, fname):
    d = bytearray(136)
    struct.pack_into("<i", d, 24, pid)
    d[40:40 + len(fname)] = fname
    return note(3, bytes(d))


def auxv(entry):
    return note(6, struct.pack("<QQQQ", 9, entry, 0, 0))


def nt_file(entries):
    d = struct.pack("<QQ", len(entries), PAGE)
    d += b"".join(struct.pack("<QQQ", s, e, off) for s, e, off, _ in entries)
    d += b"".join(p.encode() + b"\0" for *_, p in entries)
    return note(0x46494C45, d)


def core(notes, loads):
    """loads: (vaddr, memsz, offset or None (after the notes), data, flags)."""
    phnum = 1 + len(loads)
    notes_off = 64 + 56 * phnum
    body_off = notes_off + len(notes)
    body_off += -body_off % PAGE
    ph, body = [], bytearray()
    ph.append(struct.pack("<IIQQQQQQ", 4, 0, notes_off, 0, 0, len(notes), 0, 4))
    for vaddr, memsz, off, data, flags in loads:
        if off is None:
            off = body_off + len(body)
            body += data
        ph.append(struct.pack("<IIQQQQQQ", 1, flags, off, vaddr, 0, len(data), memsz, PAGE))
    eh = (b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
          + struct.pack("<HHIQQQIHHHHHH", 4, 62, 1, 0, 64, 0, 0, 64, 56, phnum, 64, 0, 0))
    out = bytearray(eh + b"".join(ph) + notes)
    out += b"\0" * (body_off - len(out))
    out += body
    return bytes(out)


def main(outdir):
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    notes = (prstatus(4242, 6) + prstatus(4243, 0) + prpsinfo(4242, b"python3")
             + auxv(0x401000)
             + nt_file([(0x400000, 0x402000, 0, "/python"), (0x402000, 0x403000, 2, "/python"),
                        (0x500000, 0x501000, 0, "/missing")]))
    stack = bytes(range(256)) * (PAGE // 256)
    # The first segment's present page is the core's own first page (offset 0).
    loads = [(0x400000, 2 * PAGE, 0, bytes(PAGE), 5), (0x7ff000, PAGE, None, stack, 6),
             (0x500000, PAGE, None, b"", 4)]
    full = core(notes, loads)
    (outdir / "files").write_bytes(full)
    (outdir / "truncated").write_bytes(full[:len(full) - PAGE // 2])
    (outdir / "nofiles").write_bytes(core(prstatus(7, 11), [(0x1000, PAGE, None, stack, 6)]))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/fuzz/seeds/fuzz_core")
