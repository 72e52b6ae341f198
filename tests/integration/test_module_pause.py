"""The Python module's pause_threads()/resume_threads(), as
_remote_debugging's (CPython 3.15): pause -> True, again -> False; every
thread of the target in tracing stop ('t') while paused, and stacks read
meanwhile are the same each time; resume -> True, again -> False, and the
threads run again. An unwinder freed while paused, or whose target is
killed while paused, leaves nothing stopped or attached; only the thread
that paused (ptrace's tracer) can resume."""
import ast
import os
import subprocess

import pytest

from conftest import wait_ready
from targets import supported_targets

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = os.path.join(HERE, "workloads")
TARGETS = [t for t in supported_targets() if t.name in ("pyenv-3.12.1", "sid-3.15")]

PROBE = r"""
import gc, os, signal, sys, time
sys.path.insert(0, sys.argv[1])
import pystrobe
pid = int(sys.argv[2])
def states():
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                out[int(tid)] = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            pass
    return out
def running_again():
    # generous bound: the detach is synchronous, the poll only absorbs load
    for _ in range(200):
        s = states()
        if "t" not in s.values():
            return s
        time.sleep(0.05)
    return s
def frozen(stacks):
    return [(i.interpreter_id, sorted((t.thread_id, tuple(t.frame_info)) for t in i.threads))
            for i in stacks]
r = {}
u = pystrobe.RemoteUnwinder(pid, all_threads=True)
r["pause"] = (u.pause_threads(), u.pause_threads())
r["paused"] = states()
a = frozen(u.get_stack_trace())
b = frozen(u.get_stack_trace())
r["same"] = a == b
r["tids"] = sorted(t for i in a for t, _ in i[1])
r["resume"] = (u.resume_threads(), u.resume_threads())
r["after"] = running_again()
# freed while paused: everything resumed and detached
v = pystrobe.RemoteUnwinder(pid)
r["pause2"] = v.pause_threads()
r["paused2"] = sorted(set(states().values()))
del v
gc.collect()
r["freed"] = running_again()
with open(f"/proc/{pid}/status") as f:
    r["tracer"] = [l.split()[1] for l in f if l.startswith("TracerPid:")][0]
# resumed only by the thread that paused (ptrace's tracer): another thread
# gets RuntimeError, not a True that leaves the target stopped
import threading
w = pystrobe.RemoteUnwinder(pid, all_threads=True)
out = []
def other():
    try:
        out.append(w.resume_threads())
    except RuntimeError as e:
        out.append(str(e))
r["other"] = w.pause_threads()
t = threading.Thread(target=other)
t.start()
t.join()
r["other"] = (r["other"], out[0], sorted(set(states().values())), w.resume_threads())
r["other_after"] = running_again()
print(repr(r))
"""


def module_dir():
    build = os.environ.get("PYSTROBE_BUILD", os.path.join(HERE, "..", "..", "build"))
    d = os.path.join(build, "python")
    if not os.path.exists(os.path.join(d, "pystrobe")):
        pytest.fail(f"no module in {d}: make module", pytrace=False)
    return d


def start(spawn, target, *args):
    path = target.stage(os.path.join(WORKLOADS, "tickers.py"))
    p = spawn(target.argv + [path, *args], stdout=subprocess.PIPE)
    wait_ready(p)
    return p


def probe(code, *args):
    res = subprocess.run(["/usr/bin/python3", "-c", code, module_dir(), *map(str, args)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert res.returncode == 0, res.stderr.decode()
    return ast.literal_eval(res.stdout.decode())


@pytest.mark.parametrize("target", TARGETS, ids=repr)
def test_pause_resume_threads(spawn, target):
    p = start(spawn, target, "3", "600")
    r = probe(PROBE, p.pid)
    assert r["pause"] == (True, False), r
    assert len(r["paused"]) == 4 and set(r["paused"].values()) == {"t"}, r["paused"]
    assert r["same"], r
    assert r["tids"] == sorted(r["paused"]), r
    assert r["resume"] == (True, False), r
    assert "t" not in r["after"].values(), r["after"]
    assert r["pause2"] is True and r["paused2"] == ["t"], r
    assert "t" not in r["freed"].values() and r["tracer"] == "0", r
    paused, other, during, resumed = r["other"]
    assert paused is True and "thread that called pause_threads()" in other, r["other"]
    assert during == ["t"] and resumed is True, r["other"]
    assert "t" not in r["other_after"].values(), r["other_after"]
    assert p.poll() is None


KILLED = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
import pystrobe
pid = int(sys.argv[2])
u = pystrobe.RemoteUnwinder(pid, all_threads=True)
paused = u.pause_threads()
os.kill(pid, signal.SIGKILL)
try:
    resumed = u.resume_threads()
except ProcessLookupError:
    resumed = "gone"
del u
print(repr((paused, resumed)))
"""


@pytest.mark.parametrize("target", TARGETS, ids=repr)
def test_target_killed_while_paused(spawn, target):
    """The target killed while paused: resume and free do not hang or
    crash, and the parent reaps it."""
    p = start(spawn, target, "2", "600")
    paused, resumed = probe(KILLED, p.pid)
    assert paused is True and resumed in (True, "gone"), (paused, resumed)
    assert p.wait(timeout=60) is not None
