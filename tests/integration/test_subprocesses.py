"""--subprocesses: the target and every Python process it starts, sampled by
the one pystrobe, a profile each (BASE_PID.EXT beside the main one) or one
merged profile (--merge-processes) under a `process PID COMMAND` frame each.

workloads/family.py MODE DIR starts children the way MODE says (fork,
multiprocessing's three methods, subprocess, through /bin/sh, a grandchild,
one that exits early, a spawned 3:1 split) and each child writes its pid to
DIR/<its function>.pid, so that each profile file is checked against the
process it is named after.
"""
import json
import re
import subprocess
import time
from pathlib import Path

import pytest

import recording_format
from conftest import run_pystrobe, wait_ready
from targets import supported_targets, unsupported_targets
from test_recording import profiler_cli  # noqa: F401
from test_sampling import (EXIT_USAGE, SessionProcesses, Work, load_collapsed,  # noqa: F401
                           parse_collapsed, strobes)

# A pyenv build (shared libpython) and a sid build (static, run through
# chroot): the two ways an interpreter is laid out in memory and started.
TARGETS = [t for t in supported_targets() if t.name in ("pyenv-3.12.1", "sid-3.15")]
MODES = ["fork", "mp-fork", "mp-spawn", "mp-forkserver", "subprocess", "shell", "grandchild"]
TABLE_ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+(\d+)\s+(-|\d+ms)\s+(.*)$", re.M)


@pytest.fixture(scope="module", params=TARGETS, ids=repr)
def work(request):
    w = Work(request.param)
    yield w
    w.close()


def family(strobes, work, tmp_path, mode, *opts, out="prof.txt", fmt="--collapsed"):  # noqa: F811
    """Run family.py MODE under `pystrobe run --subprocesses`; (the Strobe,
    {child function: pid})."""
    notes_host, notes = work.target.stage_dir()
    args = ["run", "--subprocesses", *opts]
    if fmt:
        args.append(fmt)
    if out:
        args += ["-o", tmp_path / out]
    st = strobes([*args, *work.python_run_args(), work.path("family.py"), mode, notes])
    st.check()
    pids = {p.stem: int(p.read_text()) for p in Path(notes_host).glob("*.pid")}
    return st, pids


def table(st):
    """The end's table of processes: {pid: (samples, failed, command, first)};
    first: ms from the process's start to its first sample, or None."""
    text = st.stderr.split("Processes (--subprocesses):", 1)
    assert len(text) == 2, f"no table of processes\n{st.describe()}"
    return {int(m.group(1)): (int(m.group(2)), int(m.group(3)), m.group(5),
                              None if m.group(4) == "-" else int(m.group(4)[:-2]))
            for m in TABLE_ROW.finditer(text[1])}


def names(stacks):
    return {n for s in stacks for n in s.names}


@pytest.mark.parametrize("mode", MODES)
def test_children_profiled(strobes, work, tmp_path, mode):  # noqa: F811
    """Each way of starting a Python child: its own profile, named after its
    pid, holding the function it ran; the parent's profile holds the
    parent's; the table lists both."""
    st, pids = family(strobes, work, tmp_path, mode)
    func = "child_" + mode.replace("-", "_")
    assert func in pids, f"the child did not run\n{st.describe()}"
    child = pids[func]
    assert (tmp_path / f"prof_{child}.txt").is_file(), st.describe()
    stacks = load_collapsed(tmp_path / f"prof_{child}.txt")
    assert func in names(stacks), f"{func} not in the child's profile\n{st.describe()}"
    # Each file is its own process's: the child's threads are the child's.
    assert all(s.tid is None or s.tid != st.pid for s in stacks)
    main = load_collapsed(tmp_path / "prof.txt")
    assert "parent_before" in names(main) and func not in names(main)
    rows = table(st)
    assert child in rows and rows[child][0] > 0, st.describe()
    if mode == "shell":
        # The shell between them is followed through, not profiled.
        shells = [r for r in rows.values() if "/bin/sh" in r[2]]
        assert shells and all(r[0] == 0 and "not Python" in r[2] for r in shells), \
            st.describe()


def test_split_in_spawned_child(strobes, work, tmp_path):  # noqa: F811
    """A spawned child's 3:1 split of alpha and beta, recovered from its own
    profile (bounds far wider than the split tests': the child shares the
    machine with its parent and the other children)."""
    st, pids = family(strobes, work, tmp_path, "split")
    stacks = load_collapsed(tmp_path / f"prof_{pids['child_split']}.txt")
    leaf = {"alpha": 0, "beta": 0}
    for s in stacks:
        q = s.leaf_python()
        if q in leaf:
            leaf[q] += s.count
    total = leaf["alpha"] + leaf["beta"]
    assert total >= 200, f"too few samples of the split: {leaf}\n{st.describe()}"
    share = leaf["alpha"] / total
    assert 0.65 <= share <= 0.85, f"alpha's share {share:.3f} of {leaf}\n{st.describe()}"


def test_child_exiting_early(strobes, work, tmp_path):  # noqa: F811
    """A child that ends long before its parent: profiled, and the parent
    sampled on after it (its end stops nothing)."""
    st, pids = family(strobes, work, tmp_path, "early")
    child = load_collapsed(tmp_path / f"prof_{pids['child_early']}.txt")
    assert "child_early" in names(child)
    main = load_collapsed(tmp_path / "prof.txt")
    after = sum(s.count for s in main if "parent_after" in s.names)
    assert after > 0, st.describe()


def test_orphan(strobes, work, tmp_path):  # noqa: F811
    """A child whose parent exits at once (a double fork), outliving the
    target too: re-parented to pystrobe (a child subreaper with run), so
    still followed and profiled to its end."""
    st, pids = family(strobes, work, tmp_path, "orphan")
    child = pids["child_orphan"]
    assert (tmp_path / f"prof_{child}.txt").is_file(), st.describe()
    stacks = load_collapsed(tmp_path / f"prof_{child}.txt")
    assert "child_orphan" in names(stacks)


FAILING_PARENT = """
import subprocess, sys
spin = "import time\\nt = time.time()\\nwhile time.time() - t < 1: pass"
old = subprocess.Popen([sys.argv[1], "-c", spin])
new = subprocess.Popen([sys.executable, "-c", "def supported_child():\\n " + spin.replace("\\n", "\\n ") + "\\nsupported_child()"])
assert old.wait() == 0 and new.wait() == 0
"""


def test_child_failure_stops_nothing(strobes, work, tmp_path):  # noqa: F811
    """A child pystrobe cannot sample (a Python it does not support) is
    said, with why, in the table; its sibling is profiled all the same."""
    old = [t for t in unsupported_targets() if t.chroot is None]
    if work.target.chroot is not None or not old:
        pytest.skip("needs a pyenv target and an unsupported pyenv Python")
    st = strobes(["run", "--subprocesses", "--collapsed", "-o", tmp_path / "p.txt", "--",
                  *work.target.argv, "-c", FAILING_PARENT, old[0].argv[0]])
    st.check()
    rows = table(st)
    failed = [r for r in rows.values() if "not supported" in r[2]]
    assert len(failed) == 1 and failed[0][0] == 0, st.describe()
    ok = [pid for pid, r in rows.items() if "supported_child" in r[2]]
    assert len(ok) == 1, st.describe()
    assert "supported_child" in names(load_collapsed(tmp_path / f"p_{ok[0]}.txt"))


def test_merged(strobes, work, tmp_path):  # noqa: F811
    """--merge-processes: one file; every stack under `process PID COMMAND`
    (before the thread's frame in collapsed output), the child's function
    under the child's pid only."""
    st, pids = family(strobes, work, tmp_path, "subprocess", "--merge-processes",
                      out="merged.txt")
    assert sorted(p.name for p in tmp_path.glob("merged*")) == ["merged.txt"]
    roots = {}
    for line in (tmp_path / "merged.txt").read_text().splitlines():
        root, rest = line.split(";", 1)
        m = re.match(r"^process (\d+) (.+)$", root)
        assert m, f"a stack not under a process frame: {line!r}"
        assert "family.py" in m.group(2)
        roots.setdefault(int(m.group(1)), []).append(rest)
    child = pids["child_subprocess"]
    assert child in roots and len(roots) == 2, st.describe()
    assert all("child_subprocess" not in r for p, rs in roots.items() if p != child for r in rs)
    assert any("child_subprocess" in r for r in roots[child])
    # --no-tid: the processes are the roots of the stacks.
    st, _ = family(strobes, work, tmp_path, "fork", "--merge-processes", "--no-tid",
                   out="notid.txt")
    lines = (tmp_path / "notid.txt").read_text().splitlines()
    assert lines and all(re.match(r"^process \d+ [^;]+;[^ ]", x) for x in lines)


def test_file_names_and_options(strobes, work, tmp_path, monkeypatch):  # noqa: F811
    """Names beside the main one: -o's extension kept (the format's own,
    .pb.gz whole), none without one; pstats without -o is a table on stdout
    and profile_PID.pstats for a child. Options apply to the children too
    (--browser opens each process's page, --stats gives its counters)."""
    if work.target.name != TARGETS[0].name:
        pytest.skip("names do not depend on the interpreter")
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" >> {opened}\n")
    browser.chmod(0o755)
    monkeypatch.setenv("BROWSER", str(browser))
    st, pids = family(strobes, work, tmp_path, "fork", "--browser", "--stats", "--blocking",
                      out="fg.html", fmt="--flamegraph")
    child_page = tmp_path / f"fg_{pids['child_fork']}.html"
    assert child_page.read_text().rstrip().endswith("</html>")
    # --stats and --blocking reach the child: its counters, its time stopped
    assert f"Statistics of process {pids['child_fork']} (" in st.stderr, st.describe()
    assert st.stderr.count("stopped (--blocking):") >= 2, st.describe()
    pages = {str((tmp_path / "fg.html").resolve()), str(child_page.resolve())}
    deadline = time.monotonic() + 30
    while (not opened.exists() or set(opened.read_text().splitlines()) != pages) and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    assert opened.exists() and set(opened.read_text().splitlines()) == pages
    monkeypatch.delenv("BROWSER")
    _, pids = family(strobes, work, tmp_path, "fork", out="prof.pb.gz", fmt="--pprof")
    assert (tmp_path / f"prof_{pids['child_fork']}.pb.gz").is_file()
    _, pids = family(strobes, work, tmp_path, "fork", out="noext", fmt="--collapsed")
    assert (tmp_path / f"noext_{pids['child_fork']}").is_file()
    st, pids = family(strobes, work, tmp_path, "fork", out=None, fmt=None)
    assert "family.py" in st.stdout and "nsamples" in st.stdout, st.describe()
    assert (tmp_path / f"profile_{pids['child_fork']}.pstats").is_file()
    # --no-tid and --nolineno reach the child's file.
    _, pids = family(strobes, work, tmp_path, "fork", "--no-tid", "--nolineno", out="opt.txt")
    text = (tmp_path / f"opt_{pids['child_fork']}.txt").read_text()
    assert "child_fork" in text and "tid:" not in text
    assert not re.search(r":\d+[; ]", text.replace(" 1\n", "\n")), text[:500]


def test_attach(strobes, work, tmp_path):  # noqa: F811
    """attach --subprocesses: the children and grandchildren of a running
    process."""
    if work.target.name != TARGETS[0].name:
        pytest.skip("one interpreter is enough for attach's start")
    procs = SessionProcesses()
    try:
        notes_host, notes = work.target.stage_dir()
        p = procs.start(work.target.argv + [work.path("family.py"), "grandchild", notes],
                        stdout=subprocess.PIPE)
        wait_ready(p)
        st = strobes(["attach", "--subprocesses", "--collapsed", "-o", tmp_path / "a.txt", p.pid])
        st.check()
        pids = {f.stem: int(f.read_text()) for f in Path(notes_host).glob("*.pid")}
        child = load_collapsed(tmp_path / f"a_{pids['child_grandchild']}.txt")
        assert "child_grandchild" in names(child)
    finally:
        procs.close()


# rewritten.py as the test writes it: line 4 is its function's first line.
REWRITTEN = ("import time\n\n\ndef source_spin(t):\n    x = 0\n"
             "    while time.monotonic() < t:\n        x += 1\n    return x\n")


def test_child_sources_as_sampled(strobes, work, tmp_path):  # noqa: F811
    """--heatmap: a child's page shows its file as it was at the child's
    first samples, read through the child's own root (the sid target's
    files are in its chroot only), not as the file is at the end: the
    child (family.py's source mode) rewrites rewritten.py after spinning in
    it for SOURCE_EARLY (3) seconds."""
    from test_heatmap import Heatmap, check_consistent
    notes_host, notes = work.target.stage_dir()
    (Path(notes_host) / "rewritten.py").write_text(REWRITTEN)
    time.sleep(0.1)  # (written before the child starts: not marked as changed after)
    st = strobes(["run", "--subprocesses", "--heatmap", "-o", tmp_path / "hm",
                  *work.python_run_args(), work.path("family.py"), "source", notes])
    st.check()
    child = int((Path(notes_host) / "child_source.pid").read_text())
    first = table(st)[child][3]
    assert first is not None and first < 3000, \
        f"the child was first sampled {first} ms after its start, after the rewrite\n" \
        f"{st.describe()}"
    assert "def rewritten_spin(" in (Path(notes_host) / "rewritten.py").read_text()
    hm = Heatmap(tmp_path / f"hm_{child}")
    check_consistent(hm)
    name = f"{notes}/rewritten.py"
    page = hm.page(name)
    assert 'id="changed"' in page and "as it was when first sampled" in page, page[:3000]
    lines = hm.lines(name)
    assert lines[4][2] == "def source_spin(t):" and lines[6][1] > 0, lines


# --- the outputs fed by the sample stream: one per process too -------------

def replayed(pystrobe, rec, tmp_path):
    """The collapsed stacks of a recording's replay."""
    out = tmp_path / (rec.stem + ".replay.txt")
    r = run_pystrobe(pystrobe, "replay", "--collapsed", "-o", out, rec)
    assert r.returncode == 0, r.stderr.decode()
    return load_collapsed(out)


def one_target(work):
    if work.target.name != TARGETS[0].name:
        pytest.skip("the outputs do not depend on the interpreter")


def test_recording_and_trace_per_process(strobes, pystrobe, work, tmp_path):  # noqa: F811
    """--record and --chrometrace: a recording and a trace per process,
    rec_PID.pysr and t_PID.json beside the main ones, each its own
    process's: the recording's META names its pid, its replay holds the
    child's function alone; the trace's events are under the child's pid."""
    one_target(work)
    st, pids = family(strobes, work, tmp_path, "fork", "--record", tmp_path / "rec.pysr",
                      out="t.json", fmt="--chrometrace")
    child = pids["child_fork"]
    path = tmp_path / f"rec_{child}.pysr"
    assert path.is_file(), st.describe()
    got = recording_format.read(path)
    assert got["complete"] and got["meta"]["pid"] == child, got["meta"]
    assert recording_format.read(tmp_path / "rec.pysr")["meta"]["pid"] != child
    stacks = replayed(pystrobe, path, tmp_path)
    assert "child_fork" in names(stacks) and "parent_before" not in names(stacks)
    assert "parent_before" in names(replayed(pystrobe, tmp_path / "rec.pysr", tmp_path))
    text = (tmp_path / f"t_{child}.json").read_text()
    assert "child_fork" in text and "parent_before" not in text, st.describe()
    assert "child_fork" not in (tmp_path / "t.json").read_text()
    d = json.loads(text)
    events = d["traceEvents"] if isinstance(d, dict) else d
    assert {e["pid"] for e in events if "pid" in e} == {child}


def test_child_recording_finished_when_its_output_fails(strobes, work, tmp_path):  # noqa: F811
    """A child's profile that cannot be written at the end (its directory
    gone: output_gone.py removes it) is said, and the child's recording is
    finished all the same: placed and complete (END read)."""
    one_target(work)
    out, recs = tmp_path / "out", tmp_path / "recs"
    out.mkdir()
    recs.mkdir()
    st = strobes(["run", "--subprocesses", "--collapsed", "-o", out / "prof.txt",
                  "--record", recs / "rec.pysr", *work.python_run_args(),
                  work.path("output_gone.py"), out])
    st.wait()
    for fallback in re.findall(r"wrote collapsed stacks to (\S+) instead", st.stderr):
        Path(fallback).unlink()  # the main profile's, with its directory gone
    assert "cannot write to" in st.stderr, st.describe()
    children = [p for p in recs.glob("rec_*.pysr")]
    assert len(children) == 1, (children, st.describe())
    got = recording_format.read(children[0])
    assert got["complete"] and not got["cut"], st.describe()
    assert any(f[1] == "child_spin" for _, _, ths in got["samples"] for th in ths for f in th[3])


def test_jsonl_per_process(strobes, work, tmp_path):  # noqa: F811
    """--jsonl: a file per process, the child's holding its function and
    not the parent's, with a run id of its own (made of its pid)."""
    one_target(work)
    st, pids = family(strobes, work, tmp_path, "fork", out="s.jsonl", fmt="--jsonl")
    child = pids["child_fork"]
    text = (tmp_path / f"s_{child}.jsonl").read_text()
    main = (tmp_path / "s.jsonl").read_text()
    assert "child_fork" in text and "parent_before" not in text, st.describe()
    assert "parent_before" in main and "child_fork" not in main
    ids = {json.loads(t.splitlines()[0])["run_id"] for t in (text, main)}
    assert len(ids) == 2, ids


def test_gecko_per_process(strobes, pystrobe, work, tmp_path, profiler_cli):  # noqa: F811
    """--gecko: the child's file loads in the Firefox Profiler's importer as
    the child's process; its per-function counts (self and total) equal the
    pstats counts of the same samples (the child's recording replayed)."""
    import pstats
    one_target(work)
    st, pids = family(strobes, work, tmp_path, "subprocess", "--record", tmp_path / "r.pysr",
                      out="g.json", fmt="--gecko")
    child = pids["child_subprocess"]
    r = run_pystrobe(pystrobe, "replay", "--pstats", "-o", tmp_path / "p.pstats",
                     tmp_path / f"r_{child}.pysr")
    assert r.returncode == 0, r.stderr.decode()
    r = profiler_cli.load(tmp_path / f"g_{child}.json")
    assert r.returncode == 0, (r.stdout + r.stderr).decode()
    info = profiler_cli.run("profile", "info").stdout.decode()
    assert f"[pid {child}]" in info, info
    s = profiler_cli.run("thread", "samples", "--json", "--limit", "100000")
    assert s.returncode == 0, s.stderr.decode()
    got = json.loads(s.stdout)
    want = {}
    for (file, _line, func), (direct, cumulative, *_rest) in \
            pstats.Stats(str(tmp_path / "p.pstats")).stats.items():
        want[f"{file}!{func}" if file != "~" else func] = (direct, cumulative)
    total = {f["name"]: f["totalSamples"] for f in got["topFunctionsByTotal"]}
    self_ = {f["name"]: f["selfSamples"] for f in got["topFunctionsBySelf"]}
    assert any("child_subprocess" in n for n in total), total
    assert not any("parent_before" in n for n in total), total
    for name, n in total.items():
        assert want[name][1] == n, name
    for name, n in self_.items():
        assert want[name][0] == n, name


def test_merged_recording(strobes, pystrobe, work, tmp_path):  # noqa: F811
    """--merge-processes --binary: one recording; replayed, every stack
    under its `process PID COMMAND` frame, the child's function under the
    child's pid only."""
    one_target(work)
    st, pids = family(strobes, work, tmp_path, "subprocess", "--merge-processes",
                      out="m.pysr", fmt="--binary")
    assert sorted(p.name for p in tmp_path.glob("m*.pysr")) == ["m.pysr"], st.describe()
    out = tmp_path / "m.txt"
    r = run_pystrobe(pystrobe, "replay", "--collapsed", "-o", out, tmp_path / "m.pysr")
    assert r.returncode == 0, r.stderr.decode()
    roots = {}
    for line in out.read_text().splitlines():
        m = re.match(r"^process (\d+) [^;]*family\.py[^;]*;(.*)$", line)
        assert m, f"a stack not under a process frame: {line!r}"
        roots.setdefault(int(m.group(1)), []).append(m.group(2))
    child = pids["child_subprocess"]
    assert child in roots and len(roots) == 2, st.describe()
    assert any("child_subprocess" in x for x in roots[child])
    assert not any("child_subprocess" in x for p, v in roots.items() if p != child for x in v)
    # Replayed as a timeline: each process's threads under its own pid.
    trace = tmp_path / "m.trace.json"
    r = run_pystrobe(pystrobe, "replay", "--chrometrace", "-o", trace, tmp_path / "m.pysr")
    assert r.returncode == 0, r.stderr.decode()
    check_trace_processes(json.loads(trace.read_text()), child, set(roots))


def check_trace_processes(doc, child, pids):
    """A merged chrometrace: the events of every process under its own pid
    (the child's function under the child's only), and each process named
    by its pid and command."""
    events = doc["traceEvents"]
    assert {e["pid"] for e in events} == pids, {e["pid"] for e in events}
    begun = {}
    for e in events:
        if e["ph"] == "B":
            begun.setdefault(e["pid"], set()).add(e["name"])
    assert "child_subprocess" in begun[child]
    assert not any("child_subprocess" in begun[p] for p in begun if p != child), begun
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert set(names) == pids and all(re.match(rf"^pid {p} .*family\.py", n)
                                      for p, n in names.items()), names
    tids = {}
    for e in events:
        if e["ph"] in "BE":
            tids.setdefault(e["tid"], set()).add(e["pid"])
    assert all(len(v) == 1 for v in tids.values()), tids


def test_gecko_merged_processes(strobes, work, tmp_path, profiler_cli):  # noqa: F811
    """--merge-processes --gecko: one file, each process's threads carrying
    its own pid and command, so that the Firefox Profiler shows a track per
    process; the child's function in the child's threads only. (The same
    writer's replay and chrometrace's: test_merged_recording.)"""
    one_target(work)
    st, pids = family(strobes, work, tmp_path, "subprocess", "--merge-processes",
                      out="m.json", fmt="--gecko")
    child = pids["child_subprocess"]
    doc = json.loads((tmp_path / "m.json").read_text())
    by_pid = {}
    for t in doc["threads"]:
        assert re.match(r"^.*family\.py", t["processName"]), t["processName"]
        by_pid.setdefault(int(t["pid"]), []).append(t)
    assert child in by_pid and len(by_pid) == 2, (sorted(by_pid), st.describe())
    for pid, threads in by_pid.items():
        funcs = {doc["shared"]["stringArray"][i] for t in threads for i in t["funcTable"]["name"]}
        assert ("child_subprocess" in funcs) == (pid == child), (pid, funcs)
        assert any(f.startswith(f"process {pid} ") for f in funcs), (pid, funcs)
    r = profiler_cli.load(tmp_path / "m.json")
    assert r.returncode == 0, (r.stdout + r.stderr).decode()
    info = profiler_cli.run("profile", "info").stdout.decode()
    assert all(f"[pid {p}]" in info for p in by_pid), info


def test_async_aware_per_process(strobes, work, tmp_path):  # noqa: F811
    """--async-aware: each process's task stacks, the child's in its file."""
    if work.target.version < (3, 14):
        pytest.skip("--async-aware reads tasks of 3.14+")
    st, pids = family(strobes, work, tmp_path, "async", "--async-aware")
    child = pids["child_async"]
    assert any(n.endswith("child_async_task") for n in names(load_collapsed(tmp_path / f"prof_{child}.txt"))), \
        st.describe()
    assert any(n.endswith("parent_async_task") for n in names(load_collapsed(tmp_path / "prof.txt")))


def test_merge_needs_subprocesses(strobes, tmp_path):  # noqa: F811
    st = strobes(["run", "--merge-processes", "--", "/bin/true"])
    st.wait()
    assert st.proc.returncode == EXIT_USAGE and "--subprocesses" in st.stderr, st.describe()


@pytest.mark.parametrize("method", ["fork", "spawn", "subprocess"])
def test_first_sample_delay(strobes, work, tmp_path, method):  # noqa: F811
    """How soon after its start a child is first sampled: the table's FIRST
    (to a clock tick of the process's start). Reported (pytest -s), not
    asserted tightly: a loaded machine delays everything. What is asserted:
    the child was sampled before its late phase (family.py's timing mode: it
    runs EARLY s after its parent started it, starting its interpreter,
    importing, spinning in child_early_phase, then LATE s in
    child_late_phase)."""
    st, pids = family(strobes, work, tmp_path, "timing-" + method)
    child = pids["child_timing"]
    stacks = load_collapsed(tmp_path / f"prof_{child}.txt")
    late = sum(s.count for s in stacks if "child_late_phase" in s.names)
    early = sum(s.count for s in stacks) - late
    assert early > 0, f"the child was not sampled before its late phase\n{st.describe()}"
    first = table(st)[child][3]
    assert first is not None, st.describe()
    print(f"\n{work.target.name} {method}: first sample {first} ms after the start")
