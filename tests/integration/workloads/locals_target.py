"""dump --locals' target: two frames with known locals. Prints, as one
JSON line, what each local should show (repr() for the types pystrobe
shows by value, "<TYPE at 0xID>" for the others), then sleeps."""
import json
import sys
import time

SHOWN_BY_VALUE = (type(None), bool, int, float, str, bytes)


def expected(ns):
    out = {}
    for name, v in ns.items():
        if isinstance(v, (str, bytes)) and type(v) in (str, bytes):
            cut = 100 if isinstance(v, str) else 64
            out[name] = repr(v[:cut]) + ("..." if len(v) > cut else "")
        elif type(v) is int and abs(v) >= 2 ** 64:
            out[name] = None  # shown as its size only
        elif type(v) in SHOWN_BY_VALUE:
            out[name] = repr(v)
        elif type(v) in (list, tuple):
            out[name] = f"<{type(v).__name__} of {len(v)} at 0x{id(v):x}>"
        else:
            out[name] = f"<{type(v).__name__} at 0x{id(v):x}>"
    return out


def inner(a, b, *args, **kw):
    zero, neg, big, huge = 0, -7, 2 ** 62 + 3, 2 ** 70
    floats = None
    f1, f2, f3, f4, f5 = 0.1, 1e16, 1e15, -0.0, 1.5e-07
    s = "h\u00e9\n'q\t\x01"
    dq = 'say "hi"'
    long_s = "y" * 300
    by = b"\x00ab'\xff"
    long_b = b"z" * 100
    n, t, fa = None, True, False
    lst, tup, dct = [1, 2, 3], (1,), {"k": 1}
    obj = object()
    captured = 5

    def clo():
        return captured
    ns = dict(locals())
    cells = list(inner.__code__.co_cellvars)
    print(json.dumps({"inner": expected(ns), "outer": expected(OUTER_NS),
                      "cells": cells, "version": list(sys.version_info[:2])}), flush=True)
    time.sleep(600)


OUTER_NS = {}


def outer():
    q = "outer-local"
    OUTER_NS.update(locals())
    inner(1, "two", 3, k=4)


outer()
