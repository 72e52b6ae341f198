"""Async-aware samples through the sample stream: task stacks reach every
consumer thread stacks reach (the recording and its replay, --jsonl,
--gecko, --chrometrace, the live view), the thread filters (--mode,
--main-thread-only) apply to the thread whose loop holds each task, and
--blocking reads each task graph with the target stopped. Real 3.14/3.15
asyncio targets in the sid root.

- async_split.py: tasks "heavy" and "light" in one loop, 3:1 CPU.
- async_gc.py: the task "collector" collects garbage (<GC> frames).
- async_threads.py: the main thread's task "spinner" burns CPU, the thread
  "loop-2"'s task "sleeper" sleeps in time.sleep (running, off the CPU).
"""
import gzip
import json
import re
import shlex
import shutil
import subprocess

import pytest

from conftest import HERE, pystrobe_path, run_pystrobe, wait_ready
from test_async import ASYNC_TARGETS, BUILD, SPLIT, sid_root  # noqa: F401 (a fixture)

THREADS = HERE / "workloads" / "async_threads.py"
GC_WORK = HERE / "workloads" / "async_gc.py"
GC_LIB = HERE / "workloads" / "gc_work.py"  # what GC_WORK imports
PYSTROBE = BUILD / "pystrobe"


def start(target, script, *args):
    proc = target.popen(["-B", target.stage(script), *map(str, args)], stdout=subprocess.PIPE)
    assert wait_ready(proc, timeout=60) == "ready"
    return proc


@pytest.fixture
def split(request, sid_root):  # noqa: F811
    procs = []

    def make(target):
        p = start(target, SPLIT, 0, 120)
        procs.append(p)
        return p
    yield make
    for p in procs:
        p.kill()
        p.wait()


def task_weights(collapsed):
    """{task name: samples under its <task> frame} of a collapsed file."""
    w = {}
    for line in collapsed.splitlines():
        stack, n = line.rsplit(" ", 1)
        for f in stack.split(";"):
            if f.startswith("<task>:"):
                name = f.split(":")[1]
                w[name] = w.get(name, 0) + int(n)
    return w


def attach(pid, *args):
    r = run_pystrobe(PYSTROBE, "attach", "--async-aware", *args, pid)
    assert r.returncode == 0, r.stderr.decode()
    return r


def replay(*args):
    r = run_pystrobe(PYSTROBE, "replay", *args)
    assert r.returncode == 0, r.stderr.decode()
    return r


@pytest.mark.parametrize("target", ASYNC_TARGETS, ids=repr)
def test_thread_filters_apply_to_tasks(target, sid_root, tmp_path):  # noqa: F811
    """wall (with --all-threads, pystrobe's default, accepted where the
    reference refuses it): both loops' running tasks, each under its thread (named);
    --main-thread-only: the main thread's only; --mode cpu and gil: the
    task whose thread is on the CPU / holds the GIL, not the one asleep in
    time.sleep."""
    proc = start(target, THREADS, 120)
    try:
        out = tmp_path / "wall.txt"
        attach(proc.pid, "--all-threads", "--collapsed", "-d", "2", "-o", out)
        text = out.read_text()
        w = task_weights(text)
        assert w.get("spinner", 0) >= 5 and w.get("sleeper", 0) >= 5, w
        assert all(l.startswith("tid:") and "(loop-2)" in l.split(";")[0]
                   for l in text.splitlines() if "<task>:sleeper:" in l), text
        out = tmp_path / "main.txt"
        attach(proc.pid, "--main-thread-only", "--collapsed", "-d", "2", "-o", out)
        w = task_weights(out.read_text())
        assert w.get("spinner", 0) >= 5 and "sleeper" not in w, w
        # How often the sleeper shows runnable depends on the machine's load
        # (a woken thread waits for a core): bounds far from both ends.
        out = tmp_path / "cpu.txt"
        attach(proc.pid, "--mode", "cpu", "--collapsed", "-d", "3", "-o", out)
        w = task_weights(out.read_text())
        assert w.get("spinner", 0) >= 10 and w.get("sleeper", 0) * 2 <= w["spinner"], w
        out = tmp_path / "gil.txt"
        attach(proc.pid, "--mode", "gil", "--collapsed", "-d", "3", "-o", out)
        w = task_weights(out.read_text())
        assert w.get("spinner", 0) >= 10 and w.get("sleeper", 0) * 5 <= w["spinner"], w
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("target", ASYNC_TARGETS, ids=repr)
def test_recording_replays_task_stacks(target, split, tmp_path):
    """--record beside the collapsed output: the replay gives the same
    file; --binary records task stacks too."""
    p = split(target)
    live, rec = tmp_path / "live.txt", tmp_path / "rec.pysr"
    attach(p.pid, "--collapsed", "-o", live, "--record", rec, "-d", "2")
    replay("--collapsed", "-o", tmp_path / "again.txt", rec)
    assert live.read_text() == (tmp_path / "again.txt").read_text()
    w = task_weights(live.read_text())
    assert w.get("heavy", 0) >= 5 and w.get("light", 0) >= 1, w
    rec2 = tmp_path / "bin.pysr"
    attach(p.pid, "--binary", "-o", rec2, "-d", "1")
    replay("--collapsed", "-o", tmp_path / "bin.txt", rec2)
    assert "heavy" in task_weights((tmp_path / "bin.txt").read_text())


@pytest.mark.parametrize("target", ASYNC_TARGETS[-1:], ids=repr)
def test_jsonl_has_task_frames(target, split, tmp_path):
    """--jsonl (and its replay, byte for byte): the <task> frames and the
    tasks' coroutines are in its tables, with samples."""
    p = split(target)
    out, rec = tmp_path / "o.jsonl", tmp_path / "rec.pysr"
    attach(p.pid, "--jsonl", "-o", out, "--record", rec, "-d", "2")
    replay("--jsonl", "-o", tmp_path / "again.jsonl", rec)
    assert out.read_bytes() == (tmp_path / "again.jsonl").read_bytes()
    strings = set()
    for line in out.read_text().splitlines():
        x = json.loads(line)
        if x["type"] == "string_table":
            strings |= {s["value"] for s in x["strings"]}
    assert {"<task>", "heavy", "light", "heavy_work"} <= strings, sorted(strings)[:50]


@pytest.mark.parametrize("target", ASYNC_TARGETS[-1:], ids=repr)
def test_other_formats_have_task_frames(target, split, tmp_path):
    """The formats not covered above, replayed from one recording
    (--speedscope, --pprof, --svg) or live (--heatmap): the tasks' <task>
    frames and coroutines; the heatmap counts the coroutines' lines."""
    p = split(target)
    rec = tmp_path / "rec.pysr"
    attach(p.pid, "--binary", "-o", rec, "-d", "2")
    out = tmp_path / "s.json"
    replay("--speedscope", "-o", out, rec)
    names = {f["name"] for f in json.loads(out.read_text())["shared"]["frames"]}
    assert {"heavy", "light", "heavy_work", "light_work"} <= names, names
    out = tmp_path / "p.pb.gz"
    replay("--pprof", "-o", out, rec)
    data = gzip.decompress(out.read_bytes())
    assert all(w in data for w in (b"<task>", b"heavy", b"heavy_work")), data[:400]
    out = tmp_path / "f.svg"
    replay("--svg", "-o", out, rec)
    text = out.read_text()
    assert "heavy_work" in text and "&lt;task&gt;" in text
    from test_heatmap import Heatmap
    out = tmp_path / "heat"
    attach(p.pid, "--heatmap", "-o", out, "-d", "2")
    hm = Heatmap(out)
    assert "<task>" not in hm.files, sorted(hm.files)  # a name, not a source file
    name = next(n for n in hm.files if n.endswith("async_split.py"))
    spins = {src.strip(): t for _, t, src, _ in hm.lines(name).values() if "spin(" in src}
    assert spins.get("spin(30000)", 0) > 0, spins


@pytest.mark.parametrize("target", ASYNC_TARGETS[-1:], ids=repr)
def test_gecko_has_task_frames(target, split, tmp_path):
    """--gecko: a track for the loop's thread whose samples name the tasks."""
    p = split(target)
    out = tmp_path / "g.json"
    attach(p.pid, "--gecko", "-o", out, "-d", "2")
    d = json.loads(out.read_text())
    strings = d["shared"]["stringArray"]
    assert {"heavy", "light", "heavy_work"} <= set(strings)
    assert sum(th["samples"]["length"] for th in d["threads"]) >= 5


@pytest.mark.parametrize("target", ASYNC_TARGETS[-1:], ids=repr)
def test_chrometrace_has_task_spans(target, split, tmp_path):
    """--chrometrace: spans for the tasks' <task> frames and coroutines."""
    p = split(target)
    out = tmp_path / "t.json"
    attach(p.pid, "--chrometrace", "-o", out, "-d", "2")
    d = json.loads(out.read_text())
    events = d["traceEvents"] if isinstance(d, dict) else d
    names = {e.get("name", "") for e in events}
    assert any("heavy" in n for n in names) and any("heavy_work" in n for n in names), names


@pytest.mark.parametrize("target", ASYNC_TARGETS[-1:], ids=repr)
def test_blocking_reads_tasks_stopped(target, split, tmp_path):
    """--blocking: the task graph read inside each pause (--stats counts
    them), the tasks' split still seen."""
    p = split(target)
    out = tmp_path / "c.txt"
    r = attach(p.pid, "--blocking", "--stats", "--collapsed", "-o", out, "-d", "3")
    assert b"stopped (--blocking):" in r.stderr, r.stderr.decode()
    w = task_weights(out.read_text())
    assert w.get("heavy", 0) >= 1 and w.get("light", 0) >= 1, w


@pytest.mark.parametrize("target", ASYNC_TARGETS[-1:], ids=repr)
def test_dump_blocking(target, split):
    p = split(target)
    r = run_pystrobe(PYSTROBE, "dump", "--async-aware", "--blocking", "--json", p.pid)
    assert r.returncode == 0, r.stderr.decode()
    names = {t["name"] for l in json.loads(r.stdout)["task_lists"] for t in l["tasks"]}
    assert {"heavy", "light", "Task-1"} <= names, names


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux missing")
@pytest.mark.parametrize("target", ASYNC_TARGETS[-1:], ids=repr)
def test_live_view_shows_tasks(target, sid_root, tmp_path):  # noqa: F811
    from test_live import Pane, restored
    script = target.stage(SPLIT)
    argv = [str(pystrobe_path()), "run", "--live", "--async-aware", "--", *target.argv, "-B",
            script, "0", "600"]
    pane = Pane(" ".join(shlex.quote(a) for a in argv))
    try:
        pane.wait(lambda s: all(re.search(rf"\s{n}\s", s) for n in ("heavy", "heavy_work",
                                                                      "light_work")),
                  "the tasks and their coroutines")
        pane.keys("q")
        status, _ = restored(pane)
        assert status == 0
    finally:
        pane.close()


@pytest.mark.parametrize("target", [t for t in ASYNC_TARGETS if t.version >= (3, 15)],
                         ids=repr)
def test_gc_frames_in_running_task(target, sid_root, tmp_path):  # noqa: F811
    """running mode: <GC> sits right above the task's frame that started a
    collection, as in thread stacks (3.15 publishes that frame); --no-gc
    leaves it out (the reference refuses --no-gc with --async-aware)."""
    target.stage(GC_LIB)
    proc = start(target, GC_WORK, 120)
    try:
        runs = {}
        for name, flags in (("gc", []), ("no-gc", ["--no-gc"])):
            out = tmp_path / f"{name}.txt"
            attach(proc.pid, "--collapsed", "--no-tid", "-d", "2", "-o", out, *flags)
            runs[name] = [(l.rsplit(" ", 1)[0].split(";"), int(l.rsplit(" ", 1)[1]))
                          for l in out.read_text().splitlines()]
        above = {}
        for frames, n in runs["gc"]:
            if "<GC>" in frames:
                i = frames.index("<GC>")
                assert "<task>:collector:0" in frames[:i], frames
                caller = frames[i - 1].rsplit(":", 2)[1]
                above[caller] = above.get(caller, 0) + n
        assert set(above) <= {"make_garbage", "Node.__init__"}, above
        assert above.get("make_garbage", 0) > 0, (above, runs["gc"][:5])
        assert runs["no-gc"] and not any("<GC>" in f for f, _ in runs["no-gc"]), runs["no-gc"]
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("args,word", [
    (["--native"], "--native"),
    (["--async-mode", "all", "--gecko"], "--gecko"),
    (["--async-mode", "all", "--chrometrace"], "--chrometrace"),
])
def test_still_refused(args, word, tmp_path):
    marker = tmp_path / "started"
    r = run_pystrobe(PYSTROBE, "run", "--async-aware", *args, "--", "touch", marker)
    assert r.returncode == 2
    first = r.stderr.decode().splitlines()[0]
    assert word in first and "--async" in first, first
    assert not marker.exists(), "the command must not start"
