"""A Python process whose main thread holds still at known instructions, for
`pystrobe dump --opcodes`.

    python opcode_target.py REPORT_PATH

The main thread calls step() from a loop thousands of times (on 3.11+ the
call specializes, into CALL_PY_EXACT_ARGS or a like form), and in the last
call blocks for good in threading.Event().wait(). A reporter thread waits,
by polling and without touching the code the main thread sits in, until the
main thread's stack holds still, then writes to REPORT_PATH what this
interpreter says of each of its frames, outermost first: the code's name,
line, f_lasti, and the instruction holding f_lasti as the target's own dis
names it from the code as it executes (co_code on 3.8-3.10,
_co_code_adaptive on 3.11+: adaptive=True), with its first byte and the
instruction a specialized form stands for. Then it exits.
"""
import dis
import json
import os
import sys
import threading
import time

LOOPS = 5000
STILL_POLLS = 5


def specializations():
    """{specialized name: base name} from the target's own tables."""
    table = None
    try:
        import _opcode_metadata  # 3.13+
        table = _opcode_metadata._specializations
    except ImportError:
        import opcode
        table = getattr(opcode, "_specializations", None)  # 3.11, 3.12
    out = {}
    for base, forms in (table or {}).items():
        for f in forms:
            out[f] = base
    return out


def instruction_at(code, lasti):
    """(offset, opname) of the instruction holding byte offset lasti."""
    kw = {"adaptive": True} if sys.version_info >= (3, 11) else {}
    found = None
    for ins in dis.get_instructions(code, **kw):
        if ins.offset <= lasti:
            found = ins
    return found.offset, found.opname


def step(i):
    if i == LOOPS - 1:
        threading.Event().wait()
    return i + 1


def main_loop():
    x = 0
    for i in range(LOOPS):
        x = step(i) + x


def stack_of(ident):
    f = sys._current_frames().get(ident)
    out = []
    while f is not None:
        out.append((f.f_code, f.f_lineno, f.f_lasti))
        f = f.f_back
    return out[::-1]


def report(path, ident):
    last, still = None, 0
    while still < STILL_POLLS:
        time.sleep(0.05)
        now = [(c.co_name, line, lasti) for c, line, lasti in stack_of(ident)]
        inside = len(now) >= 3 and now[-1][0] == "wait"
        still = still + 1 if inside and now == last else 0
        last = now
    bases = specializations()
    frames = []
    for code, line, lasti in stack_of(ident):
        raw = code._co_code_adaptive if sys.version_info >= (3, 11) else code.co_code
        offset, name = instruction_at(code, lasti)
        frames.append({"name": code.co_name, "line": line, "lasti": lasti, "offset": offset,
                       "opcode": raw[offset], "opname": name, "opbase": bases.get(name)})
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"pid": os.getpid(), "frames": frames}, f)
    os.rename(tmp, path)


if __name__ == "__main__":
    t = threading.Thread(target=report, args=(sys.argv[1], threading.get_ident()), daemon=True)
    t.start()
    main_loop()
