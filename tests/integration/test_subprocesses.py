"""--subprocesses: the target and every Python process it starts, sampled by
the one pystrobe, a profile each (BASE_PID.EXT beside the main one) or one
merged profile (--merge-processes) under a `process PID COMMAND` frame each.

workloads/family.py MODE DIR starts children the way MODE says (fork,
multiprocessing's three methods, subprocess, through /bin/sh, a grandchild,
one that exits early, a spawned 3:1 split) and each child writes its pid to
DIR/<its function>.pid, so that each profile file is checked against the
process it is named after.
"""
import re
import subprocess
from pathlib import Path

import pytest

from conftest import wait_ready
from targets import supported_targets, unsupported_targets
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


def test_file_names_and_options(strobes, work, tmp_path):  # noqa: F811
    """Names beside the main one: -o's extension kept (the format's own,
    .pb.gz whole), none without one; pstats without -o is a table on stdout
    and profile_PID.pstats for a child. Options apply to the children too."""
    if work.target.name != TARGETS[0].name:
        pytest.skip("names do not depend on the interpreter")
    _, pids = family(strobes, work, tmp_path, "fork", out="fg.html", fmt="--flamegraph")
    assert (tmp_path / f"fg_{pids['child_fork']}.html").read_text().rstrip().endswith("</html>")
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


@pytest.mark.parametrize("args,what", [
    (["--live"], "--live"),
    (["--binary"], "--binary"),
    (["--gecko"], "--gecko"),
    (["--record", "x.pysr"], "--record"),
    (["--async-aware"], "--async-aware"),
])
def test_refused(strobes, tmp_path, args, what):  # noqa: F811
    st = strobes(["run", "--subprocesses", *args, "--", "/bin/true"])
    st.wait()
    assert st.proc.returncode == EXIT_USAGE, st.describe()
    assert what in st.stderr and "--subprocesses" in st.stderr, st.describe()


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
