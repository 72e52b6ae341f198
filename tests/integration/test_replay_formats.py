"""`pystrobe replay` writes every output `run` and `attach` write, with their
output options (parsed by the same code, record_opts.c), from the same
writers: a live run with --record and the replay of its recording give the
same bytes where the format is deterministic (every format but the Chrome
trace, whose times the recording keeps to the microsecond), and the
formats' consumers read the replayed files (heavy ones once)."""
import filecmp
import json
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import recording_format
from conftest import run_pystrobe
from test_pprof import go, top  # noqa: F401 (fixture)
from test_recording import FAST, TARGETS, chains, replay  # noqa: F401 (fixture)
from test_speedscope import speedscope, validate  # noqa: F401 (fixture)

# Formats whose live output and replay are compared byte for byte:
# name -> (options, file name).
SAME_BYTES = {
    "speedscope": (("--speedscope",), "out.speedscope.json"),
    "pprof": (("--pprof",), "out.pb.gz"),
    "svg": (("--svg",), "out.svg"),
    "collapsed-function": (("--collapsed", "--function"), "out.txt"),
    "collapsed-nolineno": (("--collapsed", "--nolineno"), "out.txt"),
    "table-sorted": (("--sort", "cumtime", "-l", "7"), None),
}


def live_and_replay(pystrobe, chains, tmp_path, target, opts, name, seconds="2", env=None):
    """Attach to random_chains.py on target writing opts' output (to name
    in tmp_path/live, or stdout) and a recording (pystrobe's environment
    with env); replay the recording with the same options (to
    tmp_path/again). Returns (live result, replay result, live path,
    replayed path)."""
    p = chains(target)
    rec = tmp_path / "rec.pysr"
    (tmp_path / "live").mkdir()
    (tmp_path / "again").mkdir()
    live = tmp_path / "live" / name if name else None
    again = tmp_path / "again" / name if name else None
    r = run_pystrobe(pystrobe, "attach", "-d", seconds, "-r", "2000", *opts,
                     *(["-o", live] if live else []), "--record", rec, p.pid, env=env)
    assert r.returncode == 0, r.stderr.decode()
    r2 = replay(pystrobe, *opts, *(["-o", again] if again else []), rec)
    assert r2.returncode == 0, r2.stderr.decode()
    return r, r2, live, again


@pytest.mark.parametrize("fmt", sorted(SAME_BYTES))
@pytest.mark.parametrize("target", FAST, ids=repr)
def test_replay_writes_what_live_wrote(pystrobe, chains, tmp_path, target, fmt):
    """Each profile format, and the options that shape it (--function,
    --nolineno, --sort, -l): the replay's bytes are the live run's."""
    opts, name = SAME_BYTES[fmt]
    r, r2, live, again = live_and_replay(pystrobe, chains, tmp_path, target, opts, name)
    a, b = (live.read_bytes(), again.read_bytes()) if name else (r.stdout, r2.stdout)
    assert len(a) > 100
    assert a == b
    if fmt == "svg":
        root = ET.fromstring(b)  # the replayed SVG is well-formed XML
        assert root.tag.endswith("svg")
    if fmt == "collapsed-function":
        # every frame at a function's first line: one entry per function
        assert re.search(rb"random_chains\.py:\w+:\d+", b)
    if fmt == "collapsed-nolineno":
        assert b"random_chains.py:" in b
        assert not re.search(rb"random_chains\.py:[^;:\s]+:\d", b)


def test_replayed_speedscope_and_pprof_are_read(pystrobe, chains, tmp_path, speedscope, go):
    """speedscope's schema accepts the replayed file and `go tool pprof`
    reads the replayed profile: its samples are the replayed pstats' (the
    heavy readers, once, on one interpreter)."""
    import pstats
    target = FAST[0] if FAST else TARGETS[0]
    p = chains(target)
    rec = tmp_path / "rec.pysr"
    r = run_pystrobe(pystrobe, "attach", "-d", "1.5", "--binary", "-o", rec, p.pid)
    assert r.returncode == 0, r.stderr.decode()
    for opts, out in ((("--speedscope",), "s.json"), (("--pprof",), "p.pb.gz"),
                      (("--pstats",), "p.pstats")):
        r2 = replay(pystrobe, *opts, "-o", tmp_path / out, rec)
        assert r2.returncode == 0, r2.stderr.decode()
    doc = validate(speedscope, tmp_path / "s.json")
    st = pstats.Stats(str(tmp_path / "p.pstats")).stats
    direct = sum(v[0] for v in st.values())
    assert sum(sum(pr["weights"]) for pr in doc["profiles"]) == direct
    rows = top(go, tmp_path / "p.pb.gz")
    assert sum(flat for flat, _cum in rows.values()) == direct


def test_replay_heatmap_equals_live(pystrobe, chains, tmp_path):
    """--heatmap from a replay: the same pages as the live run's (a pyenv
    target, whose sources are this machine's files)."""
    target = next((t for t in TARGETS if t.name == "pyenv-3.12.1"), None)
    if target is None:
        pytest.skip("no pyenv 3.12.1")
    r, r2, live, again = live_and_replay(pystrobe, chains, tmp_path, target, ("--heatmap",),
                                         "hm")
    files = sorted(x.relative_to(live) for x in live.rglob("*") if x.is_file())
    assert len(files) >= 2 and Path("index.html") in files
    assert files == sorted(x.relative_to(again) for x in again.rglob("*") if x.is_file())
    _, mismatch, errors = filecmp.cmpfiles(live, again, [str(f) for f in files], shallow=False)
    assert not mismatch and not errors, (mismatch, errors)
    assert "random_chains.py" in (again / "index.html").read_text()


@pytest.mark.parametrize("target", FAST, ids=repr)
def test_replay_chrometrace_equals_live(pystrobe, chains, tmp_path, target):
    """--chrometrace from a replay: the live run's events, in the same
    order, with the same names, threads and lines; times within the
    microsecond the recording keeps. Every B has its E."""
    r, r2, live, again = live_and_replay(pystrobe, chains, tmp_path, target,
                                         ("--chrometrace", "--function"), "t.json")
    assert_same_trace(json.loads(live.read_text()), json.loads(again.read_text()))


def assert_same_trace(a, b):
    """Chrome traces a (live) and b (replayed) hold the same events in the
    same order, times within the microsecond a recording keeps; every B
    has its E."""
    ea, eb = a["traceEvents"], b["traceEvents"]
    assert len(ea) > 10 and len(ea) == len(eb)
    for x, y in zip(ea, eb):
        assert abs(x.get("ts", 0) - y.get("ts", 0)) <= 1.0, (x, y)
        assert {k: v for k, v in x.items() if k != "ts"} == \
            {k: v for k, v in y.items() if k != "ts"}
    assert a["otherData"] == b["otherData"]
    depth = {}
    for e in eb:
        if e["ph"] in "BE":
            depth[e["tid"]] = depth.get(e["tid"], 0) + (1 if e["ph"] == "B" else -1)
            assert depth[e["tid"]] >= 0
    assert set(depth.values()) == {0}


@pytest.mark.parametrize("target", FAST[:1], ids=repr)
def test_replay_chrometrace_unread_equals_live(pystrobe, chains, tmp_path, target):
    """A thread whose stack could not be read in a sample (every third one
    here: the test hook PYSTROBE_TEST_UNREAD_EVERY fails their reads) keeps
    its frames open, in the live trace and in the replay of its recording
    alike (the recording says which threads were unread): the main
    thread's <module> and main() begin once, and the traces agree."""
    r, r2, live, again = live_and_replay(pystrobe, chains, tmp_path, target,
                                         ("--chrometrace", "--function"), "t.json",
                                         seconds="1", env={"PYSTROBE_TEST_UNREAD_EVERY": "3"})
    got = recording_format.read(tmp_path / "rec.pysr")
    failed = sum(1 for _, rc, _ in got["samples"] if rc)
    assert len(got["unread"]) * 3 >= len(got["samples"]) - failed - 3, len(got["unread"])
    # every thread unread in those samples: no stack stored for them
    assert all(got["samples"][k][2] == [] for k in got["unread"])
    a, b = json.loads(live.read_text()), json.loads(again.read_text())
    for trace in (a, b):
        begun = [e["name"] for e in trace["traceEvents"] if e["ph"] == "B"]
        assert begun.count("<module>") == 1 and begun.count("main") == 1, begun[:40]
    assert_same_trace(a, b)


def test_replay_help_lists_run_output_options(pystrobe):
    """replay --help gives run's own lines for each output option: none
    missing, none of the sampling ones."""
    run_help = run_pystrobe(pystrobe, "run", "--help").stdout.decode()
    rep = run_pystrobe(pystrobe, "replay", "--help").stdout.decode()
    out_opts = ["--pstats", "--collapsed", "--flamegraph", "--speedscope", "--pprof",
                "--heatmap", "--output", "--sort", "--limit", "--no-tid", "--jsonl",
                "--jsonl-samples", "--gecko", "--svg", "--chrometrace", "--function",
                "--nolineno", "--browser", "--diff-flamegraph"]
    for o in out_opts:
        line = next(l for l in run_help.splitlines() if re.match(rf"^ {{2,6}}(-\w, )?{o}\b", l))
        assert line in rep.splitlines(), o
    listed = set(re.findall(r"^ {2,6}(?:-\w, )?(--[a-z-]+)", rep, re.M))
    assert listed == set(out_opts), listed ^ set(out_opts)


@pytest.mark.parametrize("args, message", [
    (("-r", "10"), b"--sampling-rate is an option of run and attach"),
    (("--mode", "cpu"), b"--mode is an option of run and attach"),
    (("--binary",), b"--binary is an option of run and attach"),
    (("--jsonl-samples",), b"--jsonl-samples goes with --jsonl"),
    (("--browser", "--svg"), b"--browser opens an HTML output"),
    (("--sort", "bogus"), b"bad sort key 'bogus'"),
])
def test_replay_refuses_what_is_not_an_output_option(pystrobe, tmp_path, args, message):
    r = replay(pystrobe, *args, tmp_path / "none.pysr")
    assert r.returncode == 2, r.stderr.decode()
    assert message in r.stderr and b"pystrobe replay --help" in r.stderr, r.stderr.decode()
