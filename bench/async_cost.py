"""Cost of one asyncio task-graph read against a plain stack sample, pystrobe
against CPython 3.15's _remote_debugging, on one target (run inside the sid
root with python3.15, the package at MODULE_DIR):

    python3.15 bench/async_cost.py MODULE_DIR PID [SECONDS] [reverse]

Prints µs per call of get_stack_trace(), get_async_stack_trace() and
get_all_awaited_by() for both modules (calls that raise count too),
pystrobe's first unless "reverse" is given. For a
100-task target: tests/integration/workloads/async_split.py 100, stopped
(SIGSTOP) or running.
"""
import sys
import time

sys.path.insert(0, sys.argv[1])
import pystrobe  # noqa: E402
import _remote_debugging  # noqa: E402

PID = int(sys.argv[2])
SECONDS = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
METHODS = ["get_stack_trace", "get_async_stack_trace", "get_all_awaited_by"]

MODULES = [("pystrobe", pystrobe), ("reference", _remote_debugging)]
if sys.argv[4:5] == ["reverse"]:
    MODULES.reverse()

for label, mod in MODULES:
    u = mod.RemoteUnwinder(PID, all_threads=True)
    for name in METHODS:
        f = getattr(u, name)
        n = failed = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < SECONDS:
            try:
                f()
            except (RuntimeError, OSError):
                failed += 1
            n += 1
        us = (time.perf_counter() - t0) / n * 1e6
        print(f"{label:9} {name:22} {us:9.1f} us/call  failed {failed}/{n}")
