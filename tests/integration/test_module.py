"""The `pystrobe` Python module (python/, built by `make module`).

- Against CPython 3.15's own `_remote_debugging`: both run under python3.15
  in the sid root, attached to the same stopped target with the same options;
  results must be equal once what legitimately differs is normalised
  (FrameInfo.opcode, which pystrobe does not read yet), status bits included;
  exception types must agree in the same situations.
- Against the target's report about itself (stack_target.py), on every
  supported interpreter, from two host interpreters: pytest's own
  (/usr/bin/python3, in this process) and python3.15 in the sid root.
- The one abi3 build loads and works in every available host interpreter.
- Error cases, reference counts and memory over 100 000 calls, a target that
  exits between calls, and a wheel built by setuptools from python/.
"""
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import HERE, start_stack_target, wait_ready
from targets import (ROOT, SIDROOT, STAGE_IN_ROOT, all_targets, python2_target,
                     supported_targets, unsupported_targets)

BUILD = Path(os.environ.get("PYSTROBE_BUILD", ROOT / "build"))
MODULE_DIR = BUILD / "python"
PROBE = HERE / "module_probe.py"
SIDROOT_SH = ROOT / "scripts" / "sidroot.sh"
MODULE_IN_ROOT = "/tmp/pystrobe-module"     # where the sid root sees the package
PROBE_TIMEOUT = 300.0                       # seconds for one probe run
STOP_TIMEOUT = 10.0                         # seconds for a target to stop on SIGSTOP

HAS_GIL, ON_CPU, UNKNOWN, GIL_REQUESTED, HAS_EXCEPTION, MAIN_THREAD = 1, 2, 4, 8, 16, 32
STATUS_NAMES = {HAS_GIL: "HAS_GIL", ON_CPU: "ON_CPU", UNKNOWN: "UNKNOWN",
                GIL_REQUESTED: "GIL_REQUESTED", HAS_EXCEPTION: "HAS_EXCEPTION",
                MAIN_THREAD: "MAIN_THREAD"}
STATS_KEYS = [
    "total_samples", "frame_cache_hits", "frame_cache_misses", "frame_cache_partial_hits",
    "frames_read_from_cache", "frames_read_from_memory", "memory_reads", "memory_bytes_read",
    "code_object_cache_hits", "code_object_cache_misses", "stale_cache_invalidations",
    "batched_read_attempts", "batched_read_successes", "batched_read_misses",
    "batched_read_segments_requested", "batched_read_segments_completed",
    "frame_cache_hit_rate", "code_object_cache_hit_rate", "batched_read_success_rate",
    "batched_read_segment_completion_rate"]

# Option sets compared with _remote_debugging: every selection rule, every
# mode with and without filtering, the markers, and opcodes.
OPTION_SETS = [
    {},
    {"all_threads": True},
    {"all_threads": True, "mode": 3},
    {"all_threads": True, "mode": 1},
    {"all_threads": True, "mode": 2},
    {"all_threads": True, "mode": 4},
    {"all_threads": True, "mode": 4, "skip_non_matching_threads": False},
    {"all_threads": True, "mode": 1, "skip_non_matching_threads": False},
    {"all_threads": True, "native": True},
    {"all_threads": True, "gc": True},
    {"all_threads": True, "native": True, "gc": True, "mode": 3},
    {"all_threads": True, "opcodes": True},
    {"native": True, "gc": True},
    {"mode": 4},
    {"mode": 2},
    {"only_active_thread": True},
    {"only_active_thread": True, "mode": 3, "native": True},
    {"all_threads": True, "cache_frames": True, "stats": True},
]

# Threads that stay busy and in known states, for the GIL and CPU bits: two
# spinners contend for the GIL, one thread sleeps in an `except` block, one
# sleeps in a function that a C function (map) called.
BUSY_CODE = r"""
import threading, time
def spin():
    x = 1
    while True:
        x = (x * 31 + 7) % 1000003
def handler():
    try:
        raise ValueError("handled")
    except ValueError:
        time.sleep(3600)
def nap(seconds):
    time.sleep(seconds)
def via_c():
    list(map(nap, [3600]))
for f in (spin, spin, handler, via_c):
    threading.Thread(target=f, daemon=True).start()
time.sleep(0.2)
print("ready", flush=True)
time.sleep(3600)
"""

# Stacks that change all the time: recursion and generators in three threads.
CHURN_CODE = r"""
import threading, time
def rec(n):
    return rec(n - 1) + 1 if n else sum(gen(20))
def gen(n):
    for i in range(n):
        yield i
def work():
    while True:
        for d in range(1, 60, 7):
            rec(d)
for _ in range(3):
    threading.Thread(target=work, daemon=True).start()
print("ready", flush=True)
time.sleep(3600)
"""

SLEEPER_THREADS_CODE = r"""
import threading, time
def nap():
    time.sleep(3600)
for _ in range(2):
    threading.Thread(target=nap, daemon=True).start()
time.sleep(0.1)
print("ready", flush=True)
time.sleep(3600)
"""


# --- helpers ------------------------------------------------------------------

def plain(value):
    """Structseqs and tuples as lists, recursively, as module_probe.py does."""
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def norm(x):
    return -1 if x is None else x


def status_text(status):
    return "|".join(n for b, n in sorted(STATUS_NAMES.items()) if status & b) or "0"


def by_target_name(name):
    for t in supported_targets():
        if t.name == name:
            return t
    return None


def target_315():
    for t in supported_targets():
        if t.version == (3, 15):
            return t
    pytest.fail("no Python 3.15 target: the sid root is missing (make sidroot)")


def newest_target():
    """The supported target the host-independent tests run against."""
    targets = supported_targets()
    if not targets:
        pytest.fail("no supported Python target found")
    return max(targets, key=lambda t: t.version)


def kill_proc(p):
    if p.poll() is None:
        try:
            os.kill(p.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        p.kill()
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def task_states(pid):
    states = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return states


class Stopped:
    """SIGSTOP pid until every thread is stopped; SIGCONT on exit."""

    def __init__(self, pid):
        self.pid = pid

    def __enter__(self):
        os.kill(self.pid, signal.SIGSTOP)
        deadline = time.monotonic() + STOP_TIMEOUT
        while any(s not in ("T", "t") for s in task_states(self.pid)):
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGCONT)
                pytest.fail(f"process {self.pid} did not stop: {task_states(self.pid)}")
            time.sleep(0.005)
        return self

    def __exit__(self, *exc):
        os.kill(self.pid, signal.SIGCONT)


def start_python(target, code, procs):
    """target's interpreter running code, after it printed its first line."""
    p = target.popen(["-c", code], stdout=subprocess.PIPE)
    procs.append(p)
    wait_ready(p)
    return p


@pytest.fixture
def procs():
    """A list to append Popen objects to; each is killed at teardown."""
    started = []
    yield started
    for p in started:
        kill_proc(p)


# --- the module under test ----------------------------------------------------

@pytest.fixture(scope="module")
def module_dir():
    so = MODULE_DIR / "pystrobe" / "_pystrobe.abi3.so"
    if not so.is_file():
        pytest.fail(f"{so} not found: build it first (make module) or set PYSTROBE_BUILD",
                    pytrace=False)
    return MODULE_DIR


@pytest.fixture(scope="module")
def pystrobe(module_dir):
    """The built package, imported into this (the host's) interpreter."""
    sys.path.insert(0, str(module_dir))
    try:
        import pystrobe as mod
    finally:
        sys.path.remove(str(module_dir))
    assert Path(mod.__file__).resolve().parent == (module_dir / "pystrobe").resolve(), \
        f"imported {mod.__file__}, not the build under test"
    return mod


class Host:
    """An interpreter that runs module_probe.py jobs with the package."""

    def __init__(self, name, argv, module_dir, probe):
        self.name = name
        self.argv = argv            # command prefix that runs the interpreter
        self.module_dir = module_dir
        self.probe = probe          # the probe's path as the interpreter sees it

    def __repr__(self):
        return self.name

    def run(self, jobs, prefix=()):
        res = subprocess.run([*prefix, *self.argv, self.probe, self.module_dir],
                             input=json.dumps(jobs).encode(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, timeout=PROBE_TIMEOUT)
        assert res.returncode == 0, \
            f"{self.name}: probe exited {res.returncode}: {res.stderr.decode(errors='replace')}"
        out = json.loads(res.stdout.decode("utf-8"))
        assert len(out) == len(jobs)
        return out

    def ok(self, job, prefix=()):
        (r,) = self.run([job], prefix)
        assert "ok" in r, f"{self.name}: {job} raised {r['error']}"
        return r["ok"]


@pytest.fixture(scope="module")
def sid_root(module_dir):
    """The sid root with the package and the probe copied in and /proc
    mounted (the reference module and pystrobe read /proc). Unmounted at
    teardown if this fixture mounted it."""
    if not (SIDROOT / "usr" / "bin" / "python3.15").exists():
        pytest.fail("the sid root with python3.15 is missing (make sidroot)", pytrace=False)
    dest = SIDROOT / MODULE_IN_ROOT.lstrip("/")
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(module_dir / "pystrobe", dest / "pystrobe",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(PROBE, dest / PROBE.name)
    for d in [dest, dest / "pystrobe"]:
        d.chmod(0o755)          # readable by nobody, for the permission test
    env = dict(os.environ, PYSTROBE_SIDROOT=str(SIDROOT))
    mounted_here = not os.path.ismount(SIDROOT / "proc")
    if mounted_here:
        subprocess.run([str(SIDROOT_SH), "mount"], check=True, env=env)
    try:
        yield SIDROOT
    finally:
        if mounted_here:
            subprocess.run([str(SIDROOT_SH), "umount"], env=env)
        shutil.rmtree(dest, ignore_errors=True)


def sid_host(minor):
    return Host(f"sid-3.{minor}", ["chroot", str(SIDROOT), f"/usr/bin/python3.{minor}"],
                MODULE_IN_ROOT, f"{MODULE_IN_ROOT}/{PROBE.name}")


@pytest.fixture(scope="module")
def py315(sid_root):
    """python3.15 in the sid root, which also has _remote_debugging."""
    return sid_host(15)


# --- the package itself -------------------------------------------------------

def test_build_is_abi3(module_dir):
    so = module_dir / "pystrobe" / "_pystrobe.abi3.so"
    out = subprocess.run(["nm", "-D", "--defined-only", str(so)], stdout=subprocess.PIPE,
                         check=True).stdout.decode()
    exported = sorted(line.split()[-1] for line in out.splitlines() if line.strip())
    assert exported == ["PyInit__pystrobe"], f"exports more than the init function: {exported}"
    needed = subprocess.run(["readelf", "-d", str(so)], stdout=subprocess.PIPE,
                            check=True).stdout.decode()
    assert "libpython" not in needed, "the extension must not link libpython"
    assert "libpystrobe" not in needed, "libpystrobe must be linked in statically"


def test_module_contents(pystrobe):
    names = ["RemoteUnwinder", "InterpreterInfo", "ThreadInfo", "FrameInfo", "LocationInfo",
             "AwaitedInfo", "TaskInfo", "CoroInfo", "is_python_process", "get_child_pids"]
    for n in names:
        assert hasattr(pystrobe, n), n
    assert (pystrobe.THREAD_STATUS_HAS_GIL, pystrobe.THREAD_STATUS_ON_CPU,
            pystrobe.THREAD_STATUS_UNKNOWN, pystrobe.THREAD_STATUS_GIL_REQUESTED,
            pystrobe.THREAD_STATUS_HAS_EXCEPTION, pystrobe.THREAD_STATUS_MAIN_THREAD) == \
        (1, 2, 4, 8, 16, 32)
    assert (pystrobe.PROFILING_MODE_WALL, pystrobe.PROFILING_MODE_CPU,
            pystrobe.PROFILING_MODE_GIL, pystrobe.PROFILING_MODE_ALL,
            pystrobe.PROFILING_MODE_EXCEPTION) == (0, 1, 2, 3, 4)
    doc = pystrobe.__doc__
    assert "get_async_stack_trace" in doc and "3.14" in doc
    assert "always ``None``" not in doc, "opcodes are read (opcodes=True)"


def test_result_types(pystrobe):
    fields = {
        pystrobe.InterpreterInfo: ("interpreter_id", "threads"),
        pystrobe.ThreadInfo: ("thread_id", "status", "frame_info"),
        pystrobe.FrameInfo: ("filename", "location", "funcname", "opcode"),
        pystrobe.LocationInfo: ("lineno", "end_lineno", "col_offset", "end_col_offset"),
        pystrobe.AwaitedInfo: ("thread_id", "awaited_by"),
        pystrobe.TaskInfo: ("task_id", "task_name", "coroutine_stack", "awaited_by"),
        pystrobe.CoroInfo: ("call_stack", "task_name"),
    }
    for t, names in fields.items():
        assert t.n_fields == len(names)
        if sys.version_info >= (3, 10):
            assert t.__match_args__ == names
        v = t(tuple(range(len(names))))
        assert tuple(v) == tuple(range(len(names)))
        assert [getattr(v, n) for n in names] == list(range(len(names)))
        assert repr(v).startswith(f"pystrobe.{t.__name__}({names[0]}=0, ")
        assert pickle.loads(pickle.dumps(v)) == v
        with pytest.raises(TypeError):
            t(tuple(range(len(names) - 1)))
    loc = pystrobe.LocationInfo((3, 4, 5, 6))
    f = pystrobe.FrameInfo(("f.py", loc, "fn", None))
    assert f == ("f.py", (3, 4, 5, 6), "fn", None)
    assert f.location.end_col_offset == 6 and hash(f) == hash(("f.py", (3, 4, 5, 6), "fn", None))


def test_async_methods_without_tasks(pystrobe, procs):
    """A target with no asyncio task: per thread an empty AwaitedInfo, then
    the interpreter's (thread_id 0); nothing running. (Task graphs
    themselves: test_async.py.)"""
    t = newest_target()
    p = start_python(t, SLEEPER_THREADS_CODE, procs)
    u = pystrobe.RemoteUnwinder(p.pid)
    if t.version < (3, 14):
        for name in ("get_async_stack_trace", "get_all_awaited_by"):
            with pytest.raises(RuntimeError, match="3.14"):
                getattr(u, name)()
        return
    if t.version == (3, 14):
        return  # _asyncio not loaded: the section appears with `import asyncio`
    result = u.get_all_awaited_by()
    assert result[-1].thread_id == 0
    assert all(type(a).__name__ == "AwaitedInfo" and a.awaited_by == [] for a in result)
    assert len(result) >= 2
    assert u.get_async_stack_trace() == []


def test_async_methods_refused_before_314(pystrobe, procs):
    """A target older than 3.14 publishes no asyncio layouts: both calls
    raise RuntimeError saying that 3.14 is needed."""
    old = [t for t in supported_targets() if t.chroot is None and t.version < (3, 14)]
    if not old:
        pytest.skip("no pre-3.14 target outside the sid root")
    p = start_python(max(old, key=lambda t: t.version),
                     "import time; print('ready', flush=True); time.sleep(600)", procs)
    u = pystrobe.RemoteUnwinder(p.pid)
    for name in ("get_async_stack_trace", "get_all_awaited_by"):
        with pytest.raises(RuntimeError, match=r"needs CPython 3\.14"):
            getattr(u, name)()


# --- 3.15: pystrobe and _remote_debugging side by side ------------------------

def normalise(result, options):
    """What legitimately differs: nothing, on a stopped target."""
    return result


def compare_results(ours, ref, options, where):
    """Problems (text) between two normalised get_stack_trace() results."""
    ours, ref = normalise(ours, options), normalise(ref, options)
    if ours == ref:
        return []
    problems = []
    if [i[0] for i in ours] != [i[0] for i in ref]:
        return [f"{where} {options}: interpreters {[i[0] for i in ours]} != reference "
                f"{[i[0] for i in ref]}"]
    for (iid, ot), (_, rt) in zip(ours, ref):
        if [t[0] for t in ot] != [t[0] for t in rt]:
            problems.append(f"{where} {options}: interpreter {iid}: threads "
                            f"{[t[0] for t in ot]} != reference {[t[0] for t in rt]}")
            continue
        for (tid, ostatus, oframes), (_, rstatus, rframes) in zip(ot, rt):
            if ostatus != rstatus:
                problems.append(f"{where} {options}: thread {tid}: status "
                                f"{status_text(ostatus)} != reference {status_text(rstatus)}")
            if oframes != rframes:
                problems.append(f"{where} {options}: thread {tid}: frames differ\n"
                                f"  pystrobe:  {oframes}\n  reference: {rframes}")
    return problems


def side_by_side(host, pid, option_sets):
    """Both modules on pid for each option set, in one probe run."""
    jobs = []
    for opts in option_sets:
        jobs.append({"module": "pystrobe", "pid": pid, "options": opts})
        jobs.append({"module": "_remote_debugging", "pid": pid, "options": opts})
    out = host.run(jobs)
    results = []
    for i, opts in enumerate(option_sets):
        ours, ref = out[2 * i], out[2 * i + 1]
        assert "ok" in ours, f"pystrobe {opts} raised {ours['error']}"
        assert "ok" in ref, f"_remote_debugging {opts} raised {ref['error']}"
        results.append((opts, ours["ok"], ref["ok"]))
    return results


@pytest.fixture(scope="module")
def stack315(sid_root):
    sp, cleanup = start_stack_target(target_315())
    try:
        yield sp
    finally:
        cleanup()


def test_315_same_stacks_as_reference(py315, stack315):
    with Stopped(stack315.pid):
        results = side_by_side(py315, stack315.pid, OPTION_SETS)
    problems = []
    for opts, ours, ref in results:
        problems += compare_results(ours, ref, opts, "stack target")
    assert not problems, "\n".join(problems[:40])
    # The comparison is not vacuous: all threads, deep stacks, markers.
    all_threads = results[1][1]
    assert len(all_threads[0][1]) == len(stack315.report["threads"])
    assert max(len(t[2]) for t in all_threads[0][1]) > 200
    native = results[8][1]
    assert any(f[2] == "<native>" and f[0] == "~" and f[1] is None
               for t in native[0][1] for f in t[2])


def test_315_frame_cache_as_reference(py315, stack315):
    """cache_frames=True (both write the frame-cache anchors into the
    target): repeated samples stay equal to an uncached one."""
    opts = {"all_threads": True, "native": True}
    cached = dict(opts, cache_frames=True, stats=True)
    with Stopped(stack315.pid):
        plain_ref, ours, ref = py315.run([
            {"module": "_remote_debugging", "pid": stack315.pid, "options": opts},
            {"module": "pystrobe", "pid": stack315.pid, "options": cached, "repeat": 5},
            {"module": "_remote_debugging", "pid": stack315.pid, "options": cached,
             "repeat": 5},
        ])
    want = plain_ref["ok"]
    for name, r in (("pystrobe", ours), ("_remote_debugging", ref)):
        assert "ok" in r, f"{name}: {r['error']}"
        for i, got in enumerate(r["ok"]):
            problems = compare_results(got, want, cached, f"{name} cached sample {i}")
            assert not problems, "\n".join(problems[:20])


def test_cache_frames_counts(pystrobe, stack):
    """cache_frames=True gives the same stacks on every target (3.15+ read
    less; the others ignore it), and get_stats() shows it on 3.15+."""
    want = plain(pystrobe.RemoteUnwinder(stack.pid, all_threads=True).get_stack_trace())
    u = pystrobe.RemoteUnwinder(stack.pid, all_threads=True, cache_frames=True, stats=True)
    for _ in range(10):
        assert plain(u.get_stack_trace()) == want
    st = u.get_stats()
    if stack.target.version >= (3, 15):
        assert st["frame_cache_hits"] + st["frame_cache_partial_hits"] > 0, st
        assert st["frames_read_from_cache"] > 0, st
        assert 0.0 < st["frame_cache_hit_rate"] <= 100.0, st
    else:
        assert st["frame_cache_hits"] == st["frames_read_from_cache"] == 0, st


@pytest.fixture(scope="module")
def busy315(sid_root):
    p = target_315().popen(["-c", BUSY_CODE], stdout=subprocess.PIPE)
    try:
        wait_ready(p)
        yield p
    finally:
        kill_proc(p)


def test_315_same_status_bits_as_reference(py315, busy315):
    """A busy target stopped at several moments: the GIL holder, the waiters,
    the exception handler and the markers must read the same."""
    seen = set()
    problems = []
    for _ in range(6):
        time.sleep(0.05)
        with Stopped(busy315.pid):
            results = side_by_side(py315, busy315.pid, OPTION_SETS)
        for opts, ours, ref in results:
            problems += compare_results(ours, ref, opts, "busy target")
            for interp in ref:
                for t in interp[1]:
                    seen.add(t[1])
    assert not problems, "\n".join(problems[:40])
    bits = 0
    for s in seen:
        bits |= s
    for b in (HAS_GIL, UNKNOWN, HAS_EXCEPTION, MAIN_THREAD):
        assert bits & b, f"no thread ever had {STATUS_NAMES[b]}: statuses seen {sorted(seen)}"


# A sub-interpreter running code in a second OS thread, and one that runs
# nothing (it has no main thread): the selection rules read the newest
# interpreter, and fall back to every thread when it has no main thread.
SUBINTERP_CODE = r"""
import threading, time
from concurrent import interpreters
def run(interp):
    interp.exec("import time\ndef napping():\n    time.sleep(3600)\nnapping()")
order = %r
made = {}
for kind in order:
    made[kind] = interpreters.create()
threading.Thread(target=run, args=(made["running"],), daemon=True).start()
time.sleep(0.5)
print("ready", flush=True)
time.sleep(3600)
"""


@pytest.mark.parametrize("order", [("idle", "running"), ("running", "idle")],
                         ids=["running-newest", "idle-newest"])
def test_315_subinterpreters_as_reference(py315, procs, order):
    p = start_python(target_315(), SUBINTERP_CODE % (order,), procs)
    with Stopped(p.pid):
        results = side_by_side(py315, p.pid, OPTION_SETS)
    problems = []
    for opts, ours, ref in results:
        problems += compare_results(ours, ref, opts, f"sub-interpreters {order}")
    assert not problems, "\n".join(problems[:40])
    assert [i[0] for i in results[1][1]] == [2, 1, 0]
    default = results[0][1]
    if order[-1] == "running":
        assert [i[0] for i in default] == [2] and len(default[0][1]) == 1
    else:
        assert [i[0] for i in default] == [2, 1, 0]


# One interpreter until a line on stdin; then a sub-interpreter running a
# thread, and a second line once it runs.
LATE_SUBINTERP_CODE = r"""
import sys, threading, time
from concurrent import interpreters
print("ready", flush=True)
sys.stdin.readline()
interp = interpreters.create()
threading.Thread(target=interp.exec, daemon=True,
                 args=("import time\ndef napping():\n    time.sleep(3600)\nnapping()",)).start()
time.sleep(0.2)
print("made", flush=True)
time.sleep(3600)
"""


def test_315_late_subinterpreter_is_seen(pystrobe, procs):
    """A process seen with one interpreter has it taken as unchanged for a
    moment between reads of the list's head (snapshot.c, first_interp): a
    sub-interpreter started after many snapshots must still show up soon."""
    t = target_315()
    p = t.popen(["-c", LATE_SUBINTERP_CODE], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    procs.append(p)
    wait_ready(p)
    u = pystrobe.RemoteUnwinder(p.pid, all_threads=True)
    for _ in range(2000):
        assert [i[0] for i in u.get_stack_trace()] == [0]
    p.stdin.write(b"go\n")
    p.stdin.flush()
    wait_ready(p)
    deadline = time.monotonic() + 1.0
    seen = []
    while time.monotonic() < deadline:
        seen = [i[0] for i in u.get_stack_trace()]
        if seen == [1, 0]:
            break
    assert seen == [1, 0], f"interpreters a second after the sub-interpreter ran: {seen}"
    sub = u.get_stack_trace()[0]
    names = [f.funcname for th in sub[1] for f in th.frame_info]
    assert "napping" in names, f"the sub-interpreter's thread: {names}"


def test_315_stats_keys_as_reference(py315, stack315):
    out = py315.run([{"module": m, "pid": stack315.pid, "call": "get_stats",
                      "options": {"stats": True}}
                     for m in ("pystrobe", "_remote_debugging")])
    ours, ref = out[0]["ok"], out[1]["ok"]
    assert ours == ref, "get_stats() keys or value types differ from the reference"
    assert [k for k, _ in ours] == STATS_KEYS


def test_315_same_module_contents(py315):
    out = py315.run([{"module": m, "call": "info"} for m in ("pystrobe", "_remote_debugging")])
    ours, ref = set(out[0]["ok"]["names"]), set(out[1]["ok"]["names"])
    wanted = {n for n in ref if n.startswith("THREAD_STATUS_")} | {
        "RemoteUnwinder", "InterpreterInfo", "ThreadInfo", "FrameInfo", "LocationInfo",
        "is_python_process", "get_child_pids", "PROCESS_VM_READV_SUPPORTED",
        "GCStatsInfo", "GCMonitor", "get_gc_stats"}
    assert wanted <= ours, f"missing: {sorted(wanted - ours)}"


def error_type(r):
    return "ok" if "ok" in r else r["error"]["type"]


def test_315_same_exceptions_as_reference(py315, sid_root, procs):
    """Each situation of the reference's §9, through both modules."""
    t = target_315()
    sleeper = start_python(t, SLEEPER_THREADS_CODE, procs)
    not_python = subprocess.Popen(["chroot", str(SIDROOT), "/usr/bin/sleep", "600"])
    procs.append(not_python)
    gone = subprocess.Popen(["/bin/true"])
    gone.wait()
    cases = [
        ("str pid", {"pid": str(sleeper.pid)}),
        ("both thread options", {"pid": sleeper.pid,
                                 "options": {"all_threads": True, "only_active_thread": True}}),
        ("missing process", {"pid": gone.pid}),
        ("pid 0", {"pid": 0}),
        ("negative pid", {"pid": -5}),
        ("not Python", {"pid": not_python.pid}),
        ("stats not enabled", {"pid": sleeper.pid, "call": "get_stats"}),
        ("unknown keyword", {"pid": sleeper.pid, "options": {"colour": True}}),
        ("exited between calls", {"call": "exited"}),
        ("exited, not reaped", {"call": "exited", "options": {"reap": False}}),
    ]
    jobs = []
    for _, job in cases:
        for m in ("pystrobe", "_remote_debugging"):
            jobs.append(dict(job, module=m))
    out = py315.run(jobs)
    problems = []
    for i, (name, _) in enumerate(cases):
        ours, ref = out[2 * i], out[2 * i + 1]
        if name.startswith("exited"):
            ours_t = [e and e["type"] for e in ours.get("ok", [])] or error_type(ours)
            ref_t = [e and e["type"] for e in ref.get("ok", [])] or error_type(ref)
        else:
            ours_t, ref_t = error_type(ours), error_type(ref)
        if ours_t != ref_t:
            problems.append(f"{name}: pystrobe {ours_t}, reference {ref_t} "
                            f"({ours.get('error') or ours.get('ok')})")
    assert not problems, "\n".join(problems)


def test_315_permission_as_reference(py315, sid_root, procs):
    if os.geteuid() != 0:
        pytest.fail("the permission test needs root: it runs the probe as nobody")
    sleeper = start_python(target_315(), SLEEPER_THREADS_CODE, procs)
    jobs = []
    for m in ("pystrobe", "_remote_debugging"):
        jobs.append({"module": m, "pid": sleeper.pid, "call": "construct"})
        jobs.append({"module": m, "pid": sleeper.pid, "call": "is_python_process"})
    as_nobody = Host("python3.15 as nobody",
                     ["chroot", "--userspec=65534:65534", "--groups=65534", str(SIDROOT),
                      "/usr/bin/python3.15"], py315.module_dir, py315.probe)
    out = as_nobody.run(jobs)
    assert [error_type(out[0]), out[1]] == ["PermissionError", {"ok": False}], out[:2]
    assert [error_type(out[2]), out[3]] == ["PermissionError", {"ok": False}], out[2:]


def test_315_is_python_process_as_reference(py315, sid_root, procs):
    sleeper = start_python(target_315(), SLEEPER_THREADS_CODE, procs)
    not_python = subprocess.Popen(["/usr/bin/sleep", "600"])
    procs.append(not_python)
    gone = subprocess.Popen(["/bin/true"])
    gone.wait()
    pids = [sleeper.pid, not_python.pid, gone.pid]
    out = py315.run([{"module": m, "pid": p, "call": "is_python_process"}
                     for m in ("pystrobe", "_remote_debugging") for p in pids])
    assert out[:3] == out[3:] == [{"ok": True}, {"ok": False}, {"ok": False}]


def test_315_child_pids_as_reference(py315, sid_root, procs):
    tree = subprocess.Popen(["/bin/sh", "-c",
                             "sleep 600 & /bin/sh -c 'sleep 600 & wait' & wait"])
    procs.append(tree)
    want_children, want_all = wait_for_tree(tree.pid)
    try:
        out = py315.run([{"module": m, "pid": tree.pid, "call": "get_child_pids",
                          "options": {"recursive": r}}
                         for m in ("pystrobe", "_remote_debugging") for r in (True, False)])
    finally:
        kill_tree(tree.pid, want_all)
    ours_all, ours_children, ref_all, ref_children = (sorted(r["ok"]) for r in out)
    assert ours_all == ref_all == sorted(want_all)
    assert ours_children == ref_children == sorted(want_children)


def children_of(pid):
    kids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        kids.append(int(name))
            except (FileNotFoundError, ProcessLookupError, IndexError):
                pass
    return kids


def wait_for_tree(pid):
    """(children, all descendants) of the sh tree started above, once the
    grandchild is there: 2 children, one of which has a child."""
    deadline = time.monotonic() + 10
    while True:
        kids = children_of(pid)
        grand = [g for k in kids for g in children_of(k)]
        if len(kids) == 2 and len(grand) == 1:
            return kids, kids + grand
        if time.monotonic() > deadline:
            pytest.fail(f"process tree of {pid} not ready: {kids} {grand}")
        time.sleep(0.02)


def kill_tree(pid, descendants):
    for d in descendants:
        try:
            os.kill(d, signal.SIGKILL)
        except ProcessLookupError:
            pass


# --- every target: results match the target's own report ---------------------

@pytest.fixture(scope="module", params=supported_targets(), ids=repr)
def stack(request, sid_root):
    """stack_target.py on each supported interpreter (its own instance for
    this module, started once the sid root is mounted)."""
    sp, cleanup = start_stack_target(request.param)
    try:
        yield sp
    finally:
        cleanup()


def expected_threads(report):
    """{tid: (status, frames)} as get_stack_trace(all_threads=True) in WALL
    mode must give them, from the report: frames innermost first."""
    want = {}
    for t in report["threads"]:
        status = UNKNOWN
        if t["main_thread"]:
            status |= MAIN_THREAD
        if t["has_exception"]:
            status |= HAS_EXCEPTION
        frames = [[f["filename"],
                   [norm(f["lineno"]), norm(f["end_lineno"]), norm(f["col_offset"]),
                    norm(f["end_col_offset"])],
                   f["qualname"], None]
                  for f in reversed(t["frames"])]
        want[t["native_thread_id"]] = (status, frames)
    return want


def check_against_report(results, stack, where):
    """results: plain lists of get_stack_trace() with all_threads=True, then
    the default options, then only_active_thread=True."""
    all_threads, default, active = results
    report = stack.report
    want = expected_threads(report)
    assert [i[0] for i in all_threads] == [0], f"{where}: interpreters {all_threads}"
    got = {t[0]: t for t in all_threads[0][1]}
    assert sorted(got) == sorted(want), f"{where}: thread ids differ"
    newest_first = [t["native_thread_id"] for t in
                    sorted(report["threads"], key=lambda t: t["start_index"], reverse=True)]
    assert [t[0] for t in all_threads[0][1]] == newest_first, f"{where}: thread order"
    problems = []
    for tid, (status, frames) in want.items():
        _, got_status, got_frames = got[tid]
        if got_status != status:
            problems.append(f"{where}: thread {tid}: status {status_text(got_status)}, "
                            f"expected {status_text(status)}")
        if len(got_frames) != len(frames):
            problems.append(f"{where}: thread {tid}: {len(got_frames)} frames, expected "
                            f"{len(frames)}: {[f[2] for f in got_frames]}")
            continue
        for i, (g, w) in enumerate(zip(got_frames, frames)):
            if g != w:
                problems.append(f"{where}: thread {tid} frame {i}: {g} != {w}")
    assert not problems, "\n".join(problems[:40])
    main_tid = next(t["native_thread_id"] for t in report["threads"] if t["main_thread"])
    assert default == [[0, [got[main_tid]]]], f"{where}: default options"
    # Every thread is blocked: nobody holds the GIL.
    assert active == [], f"{where}: only_active_thread"


SELF_REPORT_OPTIONS = [{"all_threads": True}, {}, {"only_active_thread": True}]


def test_matches_self_report_from_host(pystrobe, stack):
    results = []
    for opts in SELF_REPORT_OPTIONS:
        u = pystrobe.RemoteUnwinder(stack.pid, **opts)
        results.append(plain(u.get_stack_trace()))
    check_against_report(results, stack, f"host {sys.version.split()[0]}")


def test_opcodes_match_self_report(pystrobe, stack):
    """opcodes=True: each Python frame's opcode is the byte at its
    instruction, as the target itself reads it (specialised forms included)."""
    u = pystrobe.RemoteUnwinder(stack.pid, all_threads=True, opcodes=True)
    got = {t[0]: t[2] for t in plain(u.get_stack_trace())[0][1]}
    plain_u = pystrobe.RemoteUnwinder(stack.pid, all_threads=True)
    without = {t[0]: t[2] for t in plain(plain_u.get_stack_trace())[0][1]}
    checked = 0
    for t in stack.report["threads"]:
        frames = got[t["native_thread_id"]]
        want = [f["opcode"] for f in reversed(t["frames"])]
        assert [f[3] for f in frames] == want, f"thread {t['native_thread_id']}: " \
            f"{[(f[2], f[3]) for f in frames]} != {want}"
        assert all(f[3] is None for f in without[t["native_thread_id"]])
        checked += sum(op is not None for op in want)
    assert checked > 10, f"only {checked} opcodes compared"


def test_matches_self_report_from_315(py315, stack):
    out = py315.run([{"pid": stack.pid, "options": o} for o in SELF_REPORT_OPTIONS])
    for o, r in zip(SELF_REPORT_OPTIONS, out):
        assert "ok" in r, f"{o}: {r['error']}"
    check_against_report([r["ok"] for r in out], stack, "python3.15 in the sid root")


# --- the same build in every host interpreter ---------------------------------

def host_interpreters():
    hosts = []
    for t in all_targets():
        if t.version < (3, 8):
            continue
        if t.chroot is None:
            hosts.append(Host(f"host-{t.name}", t.argv, str(MODULE_DIR), str(PROBE)))
        else:
            hosts.append(sid_host(t.version[1]))
    return hosts


@pytest.fixture(scope="module")
def smoke_target(sid_root):
    p = newest_target().popen(["-c", SLEEPER_THREADS_CODE], stdout=subprocess.PIPE)
    try:
        wait_ready(p)
        yield p
    finally:
        kill_proc(p)


@pytest.mark.parametrize("host", host_interpreters(), ids=repr)
def test_loads_in_every_host(host, smoke_target):
    info, result, alive, dead = host.run([
        {"call": "info"},
        {"pid": smoke_target.pid, "options": {"all_threads": True, "native": True}},
        {"call": "is_python_process", "pid": smoke_target.pid},
        {"call": "is_python_process", "pid": 0},
    ])
    assert info["ok"]["file"].endswith("__init__.py")
    assert "ok" in result, f"{host}: {result['error']}"
    interps = result["ok"]
    assert [i[0] for i in interps] == [0]
    threads = interps[0][1]
    assert len(threads) == 3
    for tid, status, frames in threads:
        assert frames[-1] == ["~", None, "<native>", None]
        names = [f[2] for f in frames]
        assert "<module>" in names or "nap" in names, names
    assert alive == {"ok": True} and dead == {"ok": False}


# --- errors, from the host interpreter -----------------------------------------

def test_argument_errors(pystrobe, procs):
    p = start_python(newest_target(), SLEEPER_THREADS_CODE, procs)
    for args, kwargs in [((str(p.pid),), {}), ((float(p.pid),), {}), ((p.pid, True), {}),
                         ((), {}), ((p.pid,), {"colour": 1})]:
        with pytest.raises(TypeError):
            pystrobe.RemoteUnwinder(*args, **kwargs)
    with pytest.raises(ValueError, match="cannot both be True"):
        pystrobe.RemoteUnwinder(p.pid, all_threads=True, only_active_thread=True)
    # pid by keyword, every option by keyword
    pystrobe.RemoteUnwinder(pid=p.pid, all_threads=True, mode=1, debug=True,
                            skip_non_matching_threads=False, native=True, gc=True,
                            opcodes=True, cache_frames=True, stats=True)
    with pytest.raises(TypeError):
        pystrobe.is_python_process("1")
    with pytest.raises(TypeError):
        pystrobe.get_child_pids(p.pid, False)


def test_attach_errors(pystrobe, procs):
    gone = subprocess.Popen(["/bin/true"])
    gone.wait()
    for pid in (gone.pid, 0, -1):
        with pytest.raises(RuntimeError) as e:
            pystrobe.RemoteUnwinder(pid)
        assert not isinstance(e.value, OSError)
    with pytest.raises(RuntimeError) as e:
        pystrobe.RemoteUnwinder(gone.pid)
    assert isinstance(e.value.__cause__, ProcessLookupError)
    with pytest.raises(RuntimeError, match="Failed to attach") as e:
        pystrobe.RemoteUnwinder(gone.pid, debug=True)
    assert isinstance(e.value.__cause__, RuntimeError)
    sleep = subprocess.Popen(["/usr/bin/sleep", "600"])
    procs.append(sleep)
    with pytest.raises(RuntimeError, match=str(sleep.pid)):
        pystrobe.RemoteUnwinder(sleep.pid)


@pytest.mark.parametrize("old", unsupported_targets() + ([python2_target()]
                                                          if python2_target() else []),
                         ids=repr)
def test_unsupported_version(pystrobe, procs, old):
    code = "import sys, time; sys.stdout.write('ready\\n'); sys.stdout.flush(); time.sleep(600)"
    p = start_python(old, code, procs)
    with pytest.raises(RuntimeError) as e:
        pystrobe.RemoteUnwinder(p.pid)
    # The command's line: the version found, why not, what is.
    assert "Python %d.%d." % old.version in str(e.value), e.value
    assert "no _PyRuntime" in str(e.value) and "3.7 to 3.15" in str(e.value), e.value
    assert pystrobe.is_python_process(p.pid) is False


def test_permission_error(module_dir, procs, tmp_path):
    if os.geteuid() != 0:
        pytest.fail("the permission test needs root: it runs the probe as nobody")
    p = start_python(newest_target(), SLEEPER_THREADS_CODE, procs)
    d = Path(tempfile.mkdtemp(prefix="pystrobe-nobody-"))
    try:
        d.chmod(0o755)
        shutil.copytree(module_dir / "pystrobe", d / "pystrobe",
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy2(PROBE, d / PROBE.name)
        host = Host("host as nobody", ["/usr/bin/python3"], str(d), str(d / PROBE.name))
        out = host.run([{"pid": p.pid, "call": "construct"},
                        {"pid": p.pid, "call": "construct", "options": {"debug": True}},
                        {"pid": p.pid, "call": "is_python_process"}],
                       prefix=["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
    finally:
        shutil.rmtree(d, ignore_errors=True)
    for r in out[:2]:
        assert error_type(r) == "PermissionError", r
        assert r["error"]["oserror"]
    assert out[2] == {"ok": False}


def test_is_python_process(pystrobe, procs):
    p = start_python(newest_target(), SLEEPER_THREADS_CODE, procs)
    sleep = subprocess.Popen(["/usr/bin/sleep", "600"])
    procs.append(sleep)
    gone = subprocess.Popen(["/bin/true"])
    gone.wait()
    assert pystrobe.is_python_process(p.pid) is True
    assert pystrobe.is_python_process(pid=p.pid) is True
    for pid in (sleep.pid, gone.pid, 0, -1, 2 ** 31 - 1):
        assert pystrobe.is_python_process(pid) is False


def test_get_child_pids(pystrobe, procs):
    tree = subprocess.Popen(["/bin/sh", "-c",
                             "sleep 600 & /bin/sh -c 'sleep 600 & wait' & wait"])
    procs.append(tree)
    children, everything = wait_for_tree(tree.pid)
    try:
        assert sorted(pystrobe.get_child_pids(tree.pid)) == sorted(everything)
        assert sorted(pystrobe.get_child_pids(tree.pid, recursive=False)) == sorted(children)
        # breadth first: the children come before the grandchild
        assert sorted(pystrobe.get_child_pids(tree.pid)[:2]) == sorted(children)
    finally:
        kill_tree(tree.pid, everything)
    gone = subprocess.Popen(["/bin/true"])
    gone.wait()
    assert pystrobe.get_child_pids(gone.pid) == []
    assert pystrobe.get_child_pids(0) == []


def test_get_stats(pystrobe, procs):
    p = start_python(newest_target(), SLEEPER_THREADS_CODE, procs)
    with pytest.raises(RuntimeError, match="stats=True"):
        pystrobe.RemoteUnwinder(p.pid).get_stats()
    u = pystrobe.RemoteUnwinder(p.pid, all_threads=True, stats=True)
    for _ in range(5):
        u.get_stack_trace()
    st = u.get_stats()
    assert list(st) == STATS_KEYS
    assert st["total_samples"] == 5
    assert st["memory_reads"] > 0 and st["memory_bytes_read"] > 0
    assert st["code_object_cache_misses"] > 0 and st["code_object_cache_hits"] > 0
    assert st["frames_read_from_memory"] >= 5 * 3
    assert 0.0 < st["code_object_cache_hit_rate"] <= 100.0
    for k in STATS_KEYS[-4:]:
        assert isinstance(st[k], float)
    for k in STATS_KEYS[:-4]:
        assert isinstance(st[k], int)


# --- a process that goes away; transient failures -----------------------------

@pytest.mark.parametrize("reap", [True, False], ids=["reaped", "zombie"])
def test_process_exits_between_calls(pystrobe, procs, reap):
    p = start_python(newest_target(), SLEEPER_THREADS_CODE, procs)
    u = pystrobe.RemoteUnwinder(p.pid, all_threads=True, stats=True)
    assert u.get_stack_trace()
    p.kill()
    if reap:
        p.wait()
    else:
        deadline = time.monotonic() + 10
        while not os.path.exists(f"/proc/{p.pid}") or \
                open(f"/proc/{p.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "target never became a zombie"
            time.sleep(0.02)
    for _ in range(3):     # on every later call
        with pytest.raises(ProcessLookupError):
            u.get_stack_trace()
    assert u.get_stats()["total_samples"] == 4
    del u                  # and the unwinder is freed cleanly


def test_cpu_mode_on_running_target(pystrobe, procs):
    """CPU mode reads the kernel's run state: a spinning thread shows up
    ON_CPU, sleeping threads never do, and no thread is UNKNOWN."""
    p = start_python(newest_target(), BUSY_CODE, procs)
    u = pystrobe.RemoteUnwinder(p.pid, all_threads=True, mode=pystrobe.PROFILING_MODE_CPU)
    everyone = pystrobe.RemoteUnwinder(p.pid, all_threads=True, mode=pystrobe.PROFILING_MODE_CPU,
                                       skip_non_matching_threads=False)
    spinning = 0
    for _ in range(200):
        for interp in u.get_stack_trace():
            for t in interp.threads:
                assert t.status & ON_CPU and not t.status & UNKNOWN, t
                assert t.frame_info[0].funcname not in ("nap", "handler"), t
                spinning += t.frame_info[0].funcname == "spin"
        for interp in everyone.get_stack_trace():
            assert len(interp.threads) == 5
            for t in interp.threads:
                assert not t.status & UNKNOWN, t
    assert spinning > 0, "no spinning thread was ever seen on CPU"


def test_transient_failures_are_runtime_or_os_errors(pystrobe, procs):
    """Sampling fast-changing stacks: a sample either succeeds or fails with
    what callers retry on (RuntimeError, OSError), never anything else."""
    p = start_python(newest_target(), CHURN_CODE, procs)
    u = pystrobe.RemoteUnwinder(p.pid, all_threads=True, native=True)
    ok, failed, deadline = 0, {}, time.monotonic() + 30
    for _ in range(3000):
        try:
            result = u.get_stack_trace()
            ok += 1
            for interp in result:
                for thread in interp.threads:
                    assert all(isinstance(f.funcname, str) for f in thread.frame_info)
        except ProcessLookupError:
            pytest.fail("ProcessLookupError from a live process")
        except (RuntimeError, OSError) as e:
            failed[type(e).__name__] = failed.get(type(e).__name__, 0) + 1
        if time.monotonic() > deadline:
            break
    assert ok > (ok + sum(failed.values())) // 2, f"{ok} good samples, failures {failed}"
    print(f"{ok} good samples, failures {failed}")


# --- reference counts and memory -----------------------------------------------

LEAK_SCRIPT = r"""
import gc, json, sys, tracemalloc
sys.path.insert(0, sys.argv[1])
import pystrobe
pid, calls = int(sys.argv[2]), int(sys.argv[3])

def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024

u = pystrobe.RemoteUnwinder(pid, all_threads=True, native=True, stats=True)
first = u.get_stack_trace()
name = first[0].threads[0].frame_info[0].funcname
for _ in range(1000):                  # warm-up: caches, allocator pools
    u.get_stack_trace()
gc.collect()
tracemalloc.start()
before = {"rss": rss(), "traced": tracemalloc.get_traced_memory()[0],
          "objects": len(gc.get_objects()), "name_refs": sys.getrefcount(name),
          "type_refs": sys.getrefcount(pystrobe.FrameInfo)}
frames = 0
for _ in range(calls):
    r = u.get_stack_trace()
    frames += sum(len(t.frame_info) for i in r for t in i.threads)
del r
gc.collect()
after = {"rss": rss(), "traced": tracemalloc.get_traced_memory()[0],
         "objects": len(gc.get_objects()), "name_refs": sys.getrefcount(name),
         "type_refs": sys.getrefcount(pystrobe.FrameInfo)}
print(json.dumps({"before": before, "after": after, "frames": frames,
                  "samples": u.get_stats()["total_samples"]}))
"""
LEAK_CALLS = 100_000


@pytest.mark.parametrize("cache_frames", [False, True], ids=["plain", "cache_frames"])
def test_reused_frames_never_mix_chains(pystrobe, procs, cache_frames):
    """A call hands out the last call's FrameInfo objects for the bottom frames
    that did not change: two call chains of the same depth alternating
    through the same frame addresses must never come out mixed."""
    t = newest_target()
    script = t.stage(ROOT / "tests" / "integration" / "workloads" / "cache_aba.py")
    p = t.popen(["-B", script, "aba", "8"])
    procs.append(p)
    time.sleep(0.5)
    u = pystrobe.RemoteUnwinder(p.pid, cache_frames=cache_frames)
    a, b = {"chain_a", "a1", "a2"}, {"chain_b", "b1", "b2"}
    seen_a = seen_b = 0
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and p.poll() is None:
        try:
            result = u.get_stack_trace()
        except (RuntimeError, OSError):
            continue  # a torn read, reported as the reference does
        names = [f.funcname for f in result[0].threads[0].frame_info]
        got = set(names)
        assert not (got & a and got & b), f"mixed chains: {names}"
        seen_a += bool(got & a)
        seen_b += bool(got & b)
    assert seen_a > 50 and seen_b > 50, (seen_a, seen_b)


def test_reused_frames_match_a_fresh_unwinder(pystrobe, procs):
    """The objects a call hands out again are those of the frames that did
    not change, whatever the caller did with the last lists: on a target
    stopped at stacks of varying depths, an unwinder reused across calls
    (whose last lists are reversed and emptied) gives what a new one gives."""
    p = start_python(newest_target(), CHURN_CODE, procs)
    kept = pystrobe.RemoteUnwinder(p.pid, all_threads=True)
    depths = set()
    for _ in range(40):
        time.sleep(0.003)
        with Stopped(p.pid):
            ours = kept.get_stack_trace()
            fresh = pystrobe.RemoteUnwinder(p.pid, all_threads=True).get_stack_trace()
        assert plain(ours) == plain(fresh)
        depths.add(tuple(len(t.frame_info) for t in ours[0].threads))
        for t in ours[0].threads:
            t.frame_info.reverse()
            t.frame_info[1:] = [None]
    assert len(depths) > 10, depths


def test_no_leak_over_100k_calls(module_dir, procs):
    p = start_python(newest_target(), SLEEPER_THREADS_CODE, procs)
    res = subprocess.run(["/usr/bin/python3", "-c", LEAK_SCRIPT, str(module_dir), str(p.pid),
                          str(LEAK_CALLS)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         timeout=600)
    assert res.returncode == 0, res.stderr.decode(errors="replace")
    doc = json.loads(res.stdout)
    before, after = doc["before"], doc["after"]
    assert doc["samples"] == LEAK_CALLS + 1001
    assert doc["frames"] >= LEAK_CALLS * 6      # 3 threads, a marker and a frame or more
    assert after["name_refs"] == before["name_refs"], doc
    assert after["type_refs"] == before["type_refs"], doc
    assert after["objects"] - before["objects"] < 100, doc
    # Python-side allocations: a leak of one object per call would be > 3 MB.
    assert after["traced"] - before["traced"] < 64 * 1024, doc
    # Everything, C included: one leaked allocation (32 bytes or more) per
    # call would be > 3 MB.
    assert after["rss"] - before["rss"] < 2 * 1024 * 1024, doc
    print(f"growth over {LEAK_CALLS} calls: rss {after['rss'] - before['rss']} B, "
          f"traced {after['traced'] - before['traced']} B, "
          f"objects {after['objects'] - before['objects']}")

