"""Async-aware profiling: asyncio task graphs of real 3.14 and 3.15 targets.

- async_target.py builds a known graph (TaskGroup tree of named tasks,
  gather, Event waiters, an async generator drained by `async for`, tasks in
  a second thread's loop, an eager task, a set of awaiters holding a
  tombstone, a 1,000-deep chain, a 10,000-character name), writes what it
  says of itself (asyncio.all_tasks(), the cr_await chains) and stops in
  that state. pystrobe's module is compared with that report and, on the
  same stopped target, with the interpreter's own _remote_debugging.
- Running mode against the reference on a busy loop stopped at random.
- A churning target: no graph mixes two moments (the second-copy check).
- The CLI: dump --async-aware against the same report; the bounds it keeps
  (chain, name); the 3:1 CPU split of two tasks recovered from
  `attach --async-aware --collapsed`; run with pstats and flame graph.
  The sample stream's consumers and the refusals: test_async_stream.py.
"""
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import HERE, run_pystrobe, wait_ready
from targets import SIDROOT, all_targets

ROOT = HERE.parents[1]
BUILD = Path(os.environ.get("PYSTROBE_BUILD", ROOT / "build"))
TARGET = HERE / "async_target.py"
PROBE = HERE / "async_probe.py"
SPLIT = HERE / "workloads" / "async_split.py"
CHURN = HERE / "workloads" / "async_churn.py"

# Run in the target's interpreter: read the graph of a churning target for
# SECONDS; print the good reads, the failed ones and the tasks shown with
# the other kind's coroutine (a graph mixing two moments).
CHURN_CHECK = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import pystrobe
u = pystrobe.RemoteUnwinder(int(sys.argv[2]))
ok = failed = mixed = 0
end = time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:
    try:
        r = u.get_all_awaited_by()
    except RuntimeError:
        failed += 1
        continue
    ok += 1
    for info in r:
        for t in info.awaited_by:
            fn = [f.funcname for c in t.coroutine_stack for f in c.call_stack]
            if (t.task_name.startswith("a-") and "b_job" in fn or
                    t.task_name.startswith("b-") and "a_job" in fn):
                mixed += 1
print(ok, failed, mixed)
"""
SIDROOT_SH = ROOT / "scripts" / "sidroot.sh"
MODULE_IN_ROOT = "/tmp/pystrobe-async-module"
NAME_MAX_MODULE = 255   # the reference's cut
NAME_MAX_CLI = 4096     # PYS_TASK_NAME_DEFAULT
CHAIN_MAX_CLI = 512     # PYS_TASK_CHAIN_DEFAULT
DEPTH = 1000            # the deep chain: past the CLI's bound, within the reference's
PROBE_TIMEOUT = 300.0

ASYNC_TARGETS = [t for t in all_targets() if t.chroot and t.version >= (3, 14)]
OLD_TARGETS = [t for t in all_targets() if (3, 8) <= t.version < (3, 14)]


def _old_target():
    """One pre-3.14 target (a sid 3.13 if there is one)."""
    for t in OLD_TARGETS[::-1]:
        return t
    return None


@pytest.fixture(scope="module")
def sid_root():
    """The package copied into the sid root, /proc mounted there."""
    if not ASYNC_TARGETS:
        pytest.fail("the sid root with python3.14/3.15 is missing (make sidroot)", pytrace=False)
    dest = SIDROOT / MODULE_IN_ROOT.lstrip("/")
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(BUILD / "python" / "pystrobe", dest / "pystrobe",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(PROBE, dest / PROBE.name)
    mounted_here = not os.path.ismount(SIDROOT / "proc")
    if mounted_here:
        subprocess.run([str(SIDROOT_SH), "mount"], check=True)
    try:
        yield SIDROOT
    finally:
        if mounted_here:
            subprocess.run([str(SIDROOT_SH), "umount"])
        shutil.rmtree(dest, ignore_errors=True)


class AsyncTarget:
    def __init__(self, target, proc, report):
        self.target, self.proc, self.pid, self.report = target, proc, proc.pid, report

    def probe(self, *methods):
        """Run async_probe.py with the target's own interpreter."""
        r = self.target.run(["-B", f"{MODULE_IN_ROOT}/{PROBE.name}", MODULE_IN_ROOT,
                             str(self.pid), *methods],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=PROBE_TIMEOUT)
        assert r.returncode == 0, r.stderr.decode()
        return json.loads(r.stdout)


@pytest.fixture(scope="module", params=ASYNC_TARGETS, ids=repr)
def stopped(request, sid_root):
    """async_target.py on 3.14 / 3.15, its report written, then SIGSTOPped."""
    target = request.param
    host_dir, target_dir = target.stage_dir()
    script = target.stage(TARGET)
    proc = target.popen(["-B", script, f"{target_dir}/report.json", str(DEPTH)],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert wait_ready(proc, timeout=60) == "ready"
        report = json.loads((host_dir / "report.json").read_text())
        os.kill(proc.pid, signal.SIGSTOP)
        yield AsyncTarget(target, proc, report)
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(host_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def probed(stopped):
    return stopped.probe("get_all_awaited_by", "get_async_stack_trace")


def tasks_of(result):
    """{task_id: TaskInfo as a list} over every AwaitedInfo."""
    return {t[0]: t for info in result for t in info[1]}


def funcnames(call_stack):
    return [f[2] for f in call_stack]


def lineno(frame):
    return frame[1] if isinstance(frame[1], int) or frame[1] is None else frame[1][0]


# --- the module against the reference ------------------------------------------

def test_module_matches_reference(stopped, probed):
    ours = probed["get_all_awaited_by"]["ours"]
    ref = probed["get_all_awaited_by"]["ref"]
    assert "error" not in ours, ours
    assert "error" not in ref, ref
    if stopped.target.version >= (3, 15):
        assert ours == ref
    else:
        # 3.14's own module lists the main thread's tasks only; every task
        # it lists is ours, field for field.
        t_ours, t_ref = tasks_of(ours), tasks_of(ref)
        assert set(t_ref) <= set(t_ours)
        for k, v in t_ref.items():
            assert t_ours[k] == v, v[1]
    # A stopped loop runs no task: both agree on an empty answer.
    assert probed["get_async_stack_trace"]["ours"] == []
    assert probed["get_async_stack_trace"]["ref"] == []


def test_graph_matches_target_report(stopped, probed):
    ours = probed["get_all_awaited_by"]["ours"]
    by_tid = {info[0]: tasks_of([info]) for info in ours}
    rep = stopped.report
    assert ours[-1][0] == 0, "the interpreter's own list comes last"
    for tid, tasks in ((rep["main_tid"], rep["main"]), (rep["thread_tid"], rep["thread"])):
        mine = by_tid[tid]
        assert set(mine) == {t["addr"] for t in tasks}
        for t in tasks:
            info = mine[t["addr"]]
            assert info[1] == t["name"][:NAME_MAX_MODULE]
            if t["addr"] == rep["writer"]:
                continue  # it wrote the report, then moved on
            stack = info[2][0][0]
            want = [q for q, _ in t["chain"]]
            # cr_await cannot see through an async generator's __anext__();
            # pystrobe does (ticker), so the target's chain is a suffix.
            assert funcnames(stack)[-len(want):] == want, t["name"]
            assert [lineno(f) for f in stack][-len(want):] == [ln for _, ln in t["chain"]]
            if t["name"] != "agen":
                assert len(stack) == len(want), t["name"]
    agen = next(t for t in by_tid[rep["main_tid"]].values() if t[1] == "agen")
    assert funcnames(agen[2][0][0]) == ["Event.wait", "ticker", "agen_consumer"]


def test_awaiter_set_skips_tombstone(stopped, probed):
    """shared's awaiters: a set that held three, one discarded (its slot a
    tombstone): two awaiters, not three."""
    main = tasks_of(probed["get_all_awaited_by"]["ours"])
    names = {k: v[1] for k, v in main.items()}
    shared = next(v for v in main.values() if v[1] == "shared")
    awaiters = sorted(names.get(c[1], hex(c[1])) for c in shared[3])
    # TaskGroup's parent task awaits it too.
    assert awaiters == ["Task-1", "awaiter-0", "awaiter-1"]


def test_gather_and_taskgroup_parents(stopped, probed):
    main = tasks_of(probed["get_all_awaited_by"]["ours"])
    by_name = {v[1]: v for v in main.values()}
    parent_names = {name: sorted(main[c[1]][1] for c in v[3] if c[1] in main)
                    for name, v in by_name.items()}
    assert parent_names["g-leaf-1"] == ["gatherer"]
    assert parent_names["tg-leaf-1"] == ["tg-parent"]
    assert parent_names["eager"] == ["Task-1"]
    # The awaiter's CoroInfo carries its own coroutine stack.
    coro = next(c for c in by_name["g-leaf-1"][3])
    assert funcnames(coro[0]) == ["gatherer"]


def test_deep_chain_whole_in_module(stopped, probed):
    main = tasks_of(probed["get_all_awaited_by"]["ours"])
    deep = next(v for v in main.values() if v[1] == "deep")
    stack = funcnames(deep[2][0][0])
    assert len(stack) == DEPTH + 2
    assert stack[0] == "Event.wait" and stack[-1] == "deep.<locals>.step"


# --- the CLI -------------------------------------------------------------------

def dump_json(pid, *args):
    r = run_pystrobe(BUILD / "pystrobe", "dump", "--async-aware", "--json", *args, pid)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


def test_dump_json_matches_report(stopped):
    doc = dump_json(stopped.pid)
    assert doc["async_mode"] == "all"
    lists = {l["native_thread_id"]: l for l in doc["task_lists"]}
    rep = stopped.report
    for tid, tasks in ((rep["main_tid"], rep["main"]), (rep["thread_tid"], rep["thread"])):
        mine = {t["id"]: t for t in lists[tid]["tasks"]}
        assert set(mine) == {t["addr"] for t in tasks}
        for t in tasks:
            if t["addr"] == rep["writer"]:
                continue
            frames = mine[t["addr"]]["frames"]
            assert mine[t["addr"]]["name"] == t["name"][:NAME_MAX_CLI]
            if t["name"] == "deep":
                # Past the bound: the innermost CHAIN_MAX_CLI - 1 frames, the
                # marker outermost.
                assert len(frames) == CHAIN_MAX_CLI
                assert frames[0]["qualname"] == "<truncated>"
                inner = [q for q, _ in t["chain"]][:CHAIN_MAX_CLI - 1]
                assert [f["qualname"] for f in frames[1:]][::-1] == inner
                continue
            want = [q for q, _ in t["chain"]]
            assert [f["qualname"] for f in frames][::-1][-len(want):] == want


def test_dump_text(stopped):
    r = run_pystrobe(BUILD / "pystrobe", "dump", "--async-aware", stopped.pid)
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout.decode()
    assert "Task 'agen'" in out
    assert 'File "/tmp/' in out  # paths as the target sees them
    assert "awaited by: task 'gatherer'" in out
    assert "Task 'n" + "n" * 199 + "...'" in out


def test_dump_running_mode_on_stopped_loop(stopped):
    doc = dump_json(stopped.pid, "--async-mode", "running")
    assert all(l["tasks"] == [] for l in doc["task_lists"])


@pytest.mark.parametrize("target", ASYNC_TARGETS, ids=repr)
def test_cpu_split_by_task(target, sid_root, tmp_path):
    """heavy spins 3 units for light's 1: --async-aware collapsed output
    gives each task its share."""
    script = target.stage(SPLIT)
    proc = target.popen(["-B", script, "0", "60"], stdout=subprocess.PIPE)
    try:
        assert wait_ready(proc) == "ready"
        out = tmp_path / "c.txt"
        r = run_pystrobe(BUILD / "pystrobe", "attach", "--async-aware", "--collapsed", "-d", "4",
                         "-o", out, proc.pid)
        assert r.returncode == 0, r.stderr.decode()
        weight = {"heavy": 0, "light": 0}
        for line in out.read_text().splitlines():
            stack, n = line.rsplit(" ", 1)
            frames = stack.split(";")
            assert frames[1] == "<task>:Task-1:0", line
            for name in weight:
                if f"<task>:{name}:0" in frames:
                    weight[name] += int(n)
                    # running mode: the task's own frames (and what it calls)
                    # right below its <task> frame.
                    below = frames[frames.index(f"<task>:{name}:0") + 1]
                    assert below.split(":")[1] == f"{name}_work", line
            assert not any("run_forever" in f or "<module>" in f for f in frames), line
        assert weight["heavy"] + weight["light"] >= 100, weight
        ratio = weight["heavy"] / max(weight["light"], 1)
        assert 1.8 <= ratio <= 5.0, weight
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("target", ASYNC_TARGETS, ids=repr)
def test_running_task_matches_reference(target, sid_root):
    """get_async_stack_trace() on a busy loop stopped at random moments: the
    running task, its stack down to its coroutine, and the tasks awaiting
    it, as the reference gives them (on 3.14 the interpreter's own module:
    frames compared by file, line and name, its FrameInfo having no
    location)."""
    script = target.stage(SPLIT)
    proc = target.popen(["-B", script, "0", "60"], stdout=subprocess.PIPE)
    seen = dropped = 0
    try:
        assert wait_ready(proc) == "ready"
        t = AsyncTarget(target, proc, None)
        for _ in range(8):
            time.sleep(0.05)
            os.kill(proc.pid, signal.SIGSTOP)
            try:
                r = t.probe("get_async_stack_trace")["get_async_stack_trace"]
            finally:
                os.kill(proc.pid, signal.SIGCONT)
            if "error" in r["ref"]:
                continue  # the reference's own race (a torn read); not ours to judge
            if r["ours"] == [] and r["ref"] != []:
                # Stopped in a task switch: the running task's coroutine is not
                # on the thread's stack; pystrobe leaves the task out, where
                # the reference gives the whole thread stack.
                dropped += 1
                continue
            assert r["ours"] == r["ref"]
            seen += bool(r["ours"])
        assert seen > 0 and dropped <= 2, (seen, dropped)
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("target", ASYNC_TARGETS[-1:], ids=repr)
def test_churning_graph_never_mixes_moments(target, sid_root):
    """Tasks made and freed without pause (new ones at old addresses): a
    graph read across a change would show a task with another's coroutine;
    the second copy's check reads such a graph again."""
    script = target.stage(CHURN)
    proc = target.popen(["-B", script], stdout=subprocess.PIPE)
    try:
        assert wait_ready(proc) == "ready"
        r = target.run(["-c", CHURN_CHECK, MODULE_IN_ROOT, str(proc.pid), "6"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=PROBE_TIMEOUT)
        assert r.returncode == 0, r.stderr.decode()
        ok, failed, mixed = map(int, r.stdout.split())
        assert mixed == 0, (ok, failed, mixed)
        # Enough graphs read for the check above to mean something. How many
        # reads the churn defeats depends on the build's speed and the load
        # (under the sanitizers, most), so no ratio is asserted.
        assert ok >= 20, (ok, failed)
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("target", ASYNC_TARGETS[-1:], ids=repr)
def test_all_mode_counts_every_leaf(target, sid_root, tmp_path):
    script = target.stage(SPLIT)
    proc = target.popen(["-B", script, "5", "60"], stdout=subprocess.PIPE)
    try:
        assert wait_ready(proc) == "ready"
        out = tmp_path / "c.txt"
        r = run_pystrobe(BUILD / "pystrobe", "attach", "--async-aware", "--async-mode", "all",
                         "--collapsed", "-d", "1", "-o", out, proc.pid)
        assert r.returncode == 0, r.stderr.decode()
        names = set()
        for line in out.read_text().splitlines():
            names |= {f.split(":")[1] for f in line.rsplit(" ", 1)[0].split(";")
                      if f.startswith("<task>:")}
        assert {f"idle-{i}" for i in range(5)} | {"heavy", "light"} <= names
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("target", ASYNC_TARGETS, ids=repr)
def test_run_pstats_and_flamegraph(target, sid_root, tmp_path):
    """run --async-aware: the pstats table and the flame graph name tasks."""
    script = target.stage(SPLIT)
    # Long enough for the program to start on a busy machine.
    r = run_pystrobe(BUILD / "pystrobe", "run", "--async-aware", "-d", "6", "--",
                     *target.argv, "-B", script, "0", "30")
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout.decode()
    assert "<task>:0(heavy)" in out and "<task>:0(Task-1)" in out, out
    html = tmp_path / "f.html"
    r = run_pystrobe(BUILD / "pystrobe", "run", "--async-aware", "--flamegraph", "-o", html,
                     "-d", "6", "--", *target.argv, "-B", script, "0", "30")
    assert r.returncode == 0, r.stderr.decode()
    text = html.read_text()
    assert '"heavy"' in text and '"\\u003ctask\\u003e"' in text


# --- refusals ------------------------------------------------------------------

def test_async_mode_needs_async_aware():
    r = run_pystrobe(BUILD / "pystrobe", "attach", "--async-mode", "all", "1")
    assert r.returncode == 2 and b"--async-mode needs --async-aware" in r.stderr
    r = run_pystrobe(BUILD / "pystrobe", "dump", "--async-mode", "all", "1")
    assert r.returncode == 2 and b"--async-mode needs --async-aware" in r.stderr


@pytest.mark.skipif(_old_target() is None, reason="no pre-3.14 interpreter")
def test_old_target_refused(python_sleeper):
    target = _old_target()
    proc, _ = python_sleeper(target)
    r = run_pystrobe(BUILD / "pystrobe", "attach", "--async-aware", "-d", "1", proc.pid)
    assert r.returncode == 6, r.stderr
    assert b"needs CPython 3.14 or later" in r.stderr
    r = run_pystrobe(BUILD / "pystrobe", "dump", "--async-aware", proc.pid)
    assert r.returncode == 6 and b"needs CPython 3.14 or later" in r.stderr
