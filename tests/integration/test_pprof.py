"""--pprof: `go tool pprof` (Debian's golang-go) reads the file, and its
-top and -traces give the per-function counts of pystrobe's pstats output
for the same profile; the sample types, period, duration and thread labels
are there, on `run` and `attach` of split_3_1.py (3:1) on 3.8, 3.12 and
sid-3.15.
"""
import gzip
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import consumer_only_once
from format_runs import SplitRun, note_split, rtarget, rwork  # noqa: F401 (fixtures)
from test_outputs import STACKS, many_stacks
from test_sampling import def_line, load_collapsed

import pstats
from test_outputs import RENDER

GO_TIMEOUT = 120  # seconds for one `go tool pprof`


@pytest.fixture(scope="session")
def go():
    consumer_only_once()
    path = shutil.which("go")
    if path is None:
        pytest.fail("go not found: install Debian's golang-go (scripts/install-deps.sh)",
                    pytrace=False)
    return path


def pprof(go, path, *args):
    """`go tool pprof ARGS PATH`'s output (it must succeed)."""
    env = dict(os.environ, PPROF_TMPDIR=str(Path(path).parent))
    res = subprocess.run([go, "tool", "pprof", *args, str(path)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, timeout=GO_TIMEOUT)
    assert res.returncode == 0, f"go tool pprof {args} failed:\n{res.stderr.decode()}"
    return res.stdout.decode("utf-8", "replace")


TOP_ROW = re.compile(r"^\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(.+?)\s*$")


def top(go, path):
    """{(name, file): (flat, cum)} of -top over functions and files, every
    function shown, in samples."""
    out = pprof(go, path, "-top", "-filefunctions", "-sample_index=samples", "-nodefraction=0",
                "-nodecount=1000000")
    rows = {}
    started = False
    for line in out.splitlines():
        if line.strip().startswith("flat"):
            started = True
            continue
        m = TOP_ROW.match(line) if started else None
        if m:
            name, file = m.group(3).rsplit(" ", 1)
            assert (name, file) not in rows, line
            rows[(name, file)] = (int(m.group(1)), int(m.group(2)))
    assert rows, f"no rows in -top:\n{out}"
    return rows


def traces(go, path):
    """[(labels, count, [leaf name, ..., root name])] of -traces."""
    out = pprof(go, path, "-traces", "-sample_index=samples")
    result = []
    for block in out.split("-----------+-------------------------------------------------------")[1:]:
        labels, count, frames = {}, None, []
        for line in block.splitlines():
            if not line.strip():
                continue
            m = re.match(r"^\s*(\w+):\s+(.*?)\s*$", line)
            if count is None and m:
                labels[m.group(1)] = m.group(2)
                continue
            m = re.match(r"^\s*(\d+)\s{3}(.*?)\s*$", line)
            if count is None and m:
                count = int(m.group(1))
                frames.append(m.group(2))
            elif count is not None:
                frames.append(line.strip())
        if count is not None:
            result.append((labels, count, frames))
    return result


def trace_totals(trs):
    """{name: [flat, cum]} from -traces, a name counted once per trace."""
    totals = {}
    for _, count, frames in trs:
        for name in set(frames):
            totals.setdefault(name, [0, 0])[1] += count
        totals[frames[0]][0] += count
    return totals


def render_file(tmp_path, fmt, stacks, name):
    out = tmp_path / name
    res = subprocess.run([str(RENDER), fmt, str(out)], input=stacks.encode(),
                         capture_output=True)
    assert res.returncode == 0, res.stderr.decode()
    return out


def pstats_by(path, key):
    """{key(file, line, name): [direct, cumulative]} summed, from a pstats file."""
    totals = {}
    for (file, line, name), v in pstats.Stats(str(path)).stats.items():
        t = totals.setdefault(key(file, line, name), [0, 0])
        t[0] += v[0]
        t[1] += v[1]
    return totals


# --- built profiles -------------------------------------------------------------

def test_many_stacks_match_pstats(go, tmp_path):
    """Every function (name and file) has pstats' direct and cumulative
    samples in -top; -traces add up to the same by name."""
    stacks = many_stacks()
    pb = render_file(tmp_path, "--pprof", stacks, "many.pb.gz")
    ps = render_file(tmp_path, "--pstats", stacks, "many.pstats")
    got = {k: list(v) for k, v in top(go, pb).items()}
    assert got == pstats_by(ps, lambda f, l, n: (n, f))
    # -traces prints names only: compare where a name is one function.
    files_of = {}
    for (name, file) in got:
        files_of.setdefault(name, set()).add(file)
    trs = trace_totals(traces(go, pb))
    for name, files in files_of.items():
        if len(files) == 1:
            assert trs[name] == got[(name, next(iter(files)))], name


def test_file_contents(go, tmp_path):
    """Sample types, period, duration, labels (a thread's name in its
    label) and deduplicated strings, read by pprof's -raw."""
    stacks = ("# interval_ns 1000000\n# duration_ns 11000000\n# mode cpu\n"
              "# python 0x030c01f0\n# thread_name 1 worker-\u03b1 (pool)\n" + STACKS)
    pb = render_file(tmp_path, "--pprof", stacks, "small.pb.gz")
    assert gzip.decompress(pb.read_bytes())  # a gzip file
    raw = pprof(go, pb, "-raw")
    assert "PeriodType: cpu nanoseconds" in raw and "Period: 1000000" in raw, raw
    assert re.search(r"^samples/count\[dflt\] cpu/nanoseconds\s*$", raw, re.M), raw
    assert "Duration: 11ms" in raw, raw
    # The target's Python as people write it (PY_VERSION_HEX 0x030c01f0).
    assert re.findall(r"^Comment: (.*)$", raw, re.M) == ["pystrobe", "mode cpu",
                                                        "python 3.12.1"], raw
    # The thread labels, as pprof reads them, on each of the 4 samples: id
    # and name where the thread has one.
    assert raw.count("thread:[Thread 1 (worker-\u03b1 (pool))]") == 2, raw
    assert raw.count("thread:[Thread 2]") == 2, raw
    assert raw.count("thread_name:[worker-\u03b1 (pool)]") == 2, raw
    assert raw.count("thread_name:") == 2, raw  # thread 2 has no name
    assert raw.count("thread_id:[1]") == 2 and raw.count("thread_id:[2]") == 2, raw
    # rec at its two lines: two locations of one function.
    assert re.search(r"rec app\.py:20 ", raw) and re.search(r"rec app\.py:21 ", raw), raw
    # Strings are written once: "app.py" is in the table once.
    data = gzip.decompress(pb.read_bytes())
    # The string table holds each string once: "thread", "thread_id", "thread_name".
    assert data.count(b"app.py") == 1 and data.count(b"thread") == 3
    traced = traces(go, pb)
    assert sorted(c for _, c, _ in traced) == [1, 2, 3, 5]
    assert all(l.get("thread") in ("Thread 1 (worker-\u03b1 (pool))", "Thread 2")
               for l, _, _ in traced), traced


# --- real targets ---------------------------------------------------------------

@pytest.fixture(scope="module")
def split_pprof(pystrobe, rwork, tmp_path_factory):
    return SplitRun(pystrobe, rwork, tmp_path_factory.mktemp("pprof"), ["--pprof"],
                    "run.pb.gz", "attach.pb.gz")


def test_split_run_and_attach(split_pprof, go, rwork):
    """`run` and `attach`: -top shows alpha and beta at the script's
    functions, -traces agree with -top, every trace is labelled with the one
    thread, and the period is the 2 kHz interval."""
    sp = split_pprof
    script = rwork.path("split_3_1.py")
    for what, out, r0, r1 in sp.windows():
        rows = top(go, out)
        a, b = rows[("alpha", script)], rows[("beta", script)]
        print(f"{what}: go tool pprof -top:\n" + pprof(go, out, "-top", "-nodecount=8"))
        note_split(f"{what} pprof -top flat", a[0], b[0], r0, r1)
        trs = traces(go, out)
        tt = trace_totals(trs)
        assert tt["alpha"] == list(a) and tt["beta"] == list(b), (what, tt, a, b)
        assert {l.get("thread_id") for l, _, _ in trs} == {str(sp.pid)}, what
        raw = pprof(go, out, "-raw")
        assert "PeriodType: wall nanoseconds" in raw and "Period: 500000" in raw, raw[:500]
        for name in ("alpha", "beta"):
            line = def_line(rwork.host("split_3_1.py"), name)
            assert re.search(rf" {name} {re.escape(script)}:\d+ s={line}\b", raw), \
                f"{what}: {name} has no location with start line {line}"


def test_split_top_equals_pstats(go, pystrobe, rwork, tmp_path):
    """One profile of split_3_1.py (attach, collapsed), written as pprof and
    as pstats: -top's and -traces' counts per function are pstats'."""
    from test_sampling import LongRunning
    target = LongRunning(rwork.target, [rwork.path("split_3_1.py"), "30"])
    try:
        res = subprocess.run([str(pystrobe), "attach", "-r", "2khz", "-d", "1", "--collapsed",
                              "-o", str(tmp_path / "c.txt"), str(target.pid)],
                             capture_output=True, timeout=60)
        assert res.returncode == 0, res.stderr.decode()
    finally:
        target.close()
    load_collapsed(tmp_path / "c.txt")
    stacks = (tmp_path / "c.txt").read_text()
    pb = render_file(tmp_path, "--pprof", stacks, "c.pb.gz")
    ps = render_file(tmp_path, "--pstats", stacks, "c.pstats")
    got = {k: list(v) for k, v in top(go, pb).items()}
    assert got == pstats_by(ps, lambda f, l, n: (n, f))
    trs = trace_totals(traces(go, pb))
    for name in ("alpha", "beta", "main"):
        assert trs[name] == got[(name, rwork.path("split_3_1.py"))], name
    # How close the sampled split is to 3:1 is test_sampling.py's question.
    assert got[("alpha", rwork.path("split_3_1.py"))][0] > 0
    assert got[("beta", rwork.path("split_3_1.py"))][0] > 0
