"""The module's garbage-collector statistics (get_gc_stats, GCMonitor,
GCStatsInfo) against CPython 3.15's own _remote_debugging: both read the
same stopped target, which ran collections of every generation; the
lists must be equal, field for field. An older target raises RuntimeError
in both forms."""
import json
import subprocess

from test_module import (MODULE_IN_ROOT, Stopped, procs, sid_root, module_dir,  # noqa: F401
                         start_python, target_315)
from targets import SIDROOT, all_targets

TARGET = """
import gc, time
class N:
    def __init__(self): self.o = self
for i in range(20):
    for _ in range(2000): N()
    gc.collect(i % 3)
print("ready", flush=True)
time.sleep(600)
"""

COMPARE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import pystrobe, _remote_debugging as ref
pid = int(sys.argv[2])
out = {}
for name, mod in (("ours", pystrobe), ("ref", ref)):
    a = mod.get_gc_stats(pid)
    b = mod.GCMonitor(pid).get_gc_stats(all_interpreters=True)
    out[name] = [[tuple(x) for x in a], [tuple(x) for x in b], type(a[0]).n_fields,
                 list(type(a[0]).__match_args__) if hasattr(type(a[0]), "__match_args__") else []]
print(json.dumps(out))
"""

OLD = r"""
import sys
sys.path.insert(0, sys.argv[1])
import pystrobe
for f in (lambda: pystrobe.get_gc_stats(int(sys.argv[2])),
          lambda: pystrobe.GCMonitor(int(sys.argv[2])).get_gc_stats()):
    try:
        f()
        print("no error")
    except RuntimeError as e:
        print("RuntimeError", e)
"""


def py315(*args):
    r = subprocess.run(["chroot", str(SIDROOT), "/usr/bin/python3.15", *args],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode()


def test_315_gc_stats_as_reference(sid_root, procs):  # noqa: F811
    p = start_python(target_315(), TARGET, procs)
    with Stopped(p.pid):
        out = json.loads(py315("-c", COMPARE, MODULE_IN_ROOT, str(p.pid)))
    assert out["ours"] == out["ref"]
    stats = out["ours"][0]
    assert len(stats) == 17 and [s[0] for s in stats] == [0] * 11 + [1] * 3 + [2] * 3
    # Not vacuous: collections of every generation were counted.
    assert all(max(s[4] for s in stats if s[0] == g) > 0 for g in (0, 1, 2)), stats


def test_gc_stats_refused_before_315(sid_root, procs):  # noqa: F811
    # A 3.14 target, also in the sanitizer pass (which samples fewer).
    old = next(t for t in all_targets() if t.chroot and t.version == (3, 14))
    p = start_python(old, "import time; print('ready', flush=True); time.sleep(600)", procs)
    lines = py315("-c", OLD, MODULE_IN_ROOT, str(p.pid)).splitlines()
    assert len(lines) == 2 and all(l.startswith("RuntimeError") and "3.15" in l
                                   for l in lines), lines
