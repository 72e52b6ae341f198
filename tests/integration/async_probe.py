"""Run inside the sid root by test_async.py: the asyncio task graph of a
stopped target from pystrobe's module and from the interpreter's own
_remote_debugging, as JSON on stdout.

Usage: async_probe.py MODULE_DIR PID METHOD...
Each METHOD's result, per module: the result normalised to plain lists
(FrameInfo as [filename, lineno, funcname] on 3.14, whose FrameInfo has no
location, else [filename, [4 location ints] or None, funcname]), or
{"error": "Type: message"}.
"""
import json
import sys

sys.path.insert(0, sys.argv[1])
import pystrobe  # noqa: E402
import _remote_debugging  # noqa: E402

PID = int(sys.argv[2])
OLD = sys.version_info < (3, 15)


def norm(x):
    if isinstance(x, tuple) and type(x).__name__ == "FrameInfo":
        if OLD:
            if hasattr(x, "location"):
                line = x.location.lineno if x.location is not None else None
            else:
                line = x.lineno
            return [x.filename, line, x.funcname]
        return [x.filename, list(x.location) if x.location else None, x.funcname]
    if isinstance(x, (list, tuple)):
        return [norm(y) for y in x]
    return x


def call(mod, method):
    try:
        return norm(getattr(mod.RemoteUnwinder(PID), method)())
    except Exception as e:  # noqa: BLE001 (reported to the test)
        return {"error": f"{type(e).__name__}: {e}"}


out = {m: {"ours": call(pystrobe, m), "ref": call(_remote_debugging, m)} for m in sys.argv[3:]}
json.dump(out, sys.stdout)
