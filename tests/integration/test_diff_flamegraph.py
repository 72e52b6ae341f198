"""--diff-flamegraph BASELINE (docs/cli.md): a flame graph of the current
profile coloured by the change of each path's self samples since a baseline
recording, on real targets: paths matched by file and function, the
baseline scaled by samples, paths only in one of the two marked, names
escaped; the page renders in headless Chromium with its legend; a missing,
foreign or incompatible baseline is refused with one line before the
target is started or attached; `replay --diff-flamegraph` writes the same
page from a recording of the run."""
import html
import json
import re
import subprocess

import pytest

from conftest import run_pystrobe, wait_ready
from targets import ROOT, supported_targets
from test_flamegraph import chromium

WORKLOAD = ROOT / "tests" / "integration" / "workloads" / "diff_target.py"
TARGET = next((t for t in supported_targets() if t.name == "pyenv-3.12.1"), None)
pytestmark = pytest.mark.skipif(TARGET is None, reason="no pyenv 3.12.1")


def page_data(path):
    text = path.read_text(encoding="utf-8")
    m = re.search(r'<script type="application/json" id="pystrobe-data">(.*?)</script>', text, re.S)
    assert m, "no data in the page"
    return json.loads(m.group(1))


def by_function(d):
    """{function name: (drawn total, baseline total, only)} of the merged
    tree's nodes of each function directly under <module>."""
    N, S = d["nodes"], d["strings"]
    out = {}
    for i in range(2, len(N["parent"])):
        if S[N["name"][N["parent"][i]]] == "<module>" and N["parent"][i] >= 2:
            out[S[N["name"][i]]] = (N["total"][i], N["btotal"][i], N["only"][i])
    return out


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """A recording of diff_target.py base (1.5 s at 1 kHz)."""
    import os
    from pathlib import Path
    pystrobe = Path(os.environ.get("PYSTROBE_BUILD", ROOT / "build")) / "pystrobe"
    d = tmp_path_factory.mktemp("diff")
    p = subprocess.Popen(TARGET.argv + [str(WORKLOAD), "base"], stdout=subprocess.PIPE)
    try:
        assert wait_ready(p) == "ready"
        r = run_pystrobe(pystrobe, "attach", "-d", "1.5", "--binary", "-o", d / "base.pysr", p.pid)
        assert r.returncode == 0, r.stderr.decode()
    finally:
        p.kill()
        p.wait()
    return d / "base.pysr"


def test_paths_compared_and_marked(pystrobe, spawn, baseline, tmp_path):
    """common() is in both (its self samples on both sides), old_only()
    only in the baseline, new_only() only in the current profile; the
    replay of the current run's recording writes the same page."""
    p = spawn(TARGET.argv + [str(WORKLOAD), "new"], stdout=subprocess.PIPE)
    assert wait_ready(p) == "ready"
    out, rec = tmp_path / "diff.html", tmp_path / "cur.pysr"
    r = run_pystrobe(pystrobe, "attach", "-d", "1.5", "--diff-flamegraph", baseline, "-o", out,
                     "--record", rec, p.pid)
    assert r.returncode == 0, r.stderr.decode()
    assert b"Wrote differential flame graph to" in r.stderr
    d = page_data(out)
    assert d["diff"]["baseline"] == str(baseline)
    assert d["diff"]["baseline_samples"] > 100 and d["diff"]["current_samples"] > 100
    f = by_function(d)
    assert f["common"][2] == 0 and f["common"][0] > 0 and f["common"][1] > 0, f
    assert f["old_only"][2] == 2 and f["old_only"][0] > 0 and f["old_only"][1] > 0, f
    assert f["new_only"][2] == 1 and f["new_only"][0] > 0 and f["new_only"][1] == 0, f
    # lines are not compared: every node's line is unknown
    assert set(d["nodes"]["line"]) == {-1}
    # widths: a node is drawn as wide as its own and its children's
    N = d["nodes"]
    kids = {}
    for i in range(1, len(N["parent"])):
        kids.setdefault(N["parent"][i], []).append(i)
    for i in range(len(N["parent"])):
        assert N["total"][i] == N["self"][i] + sum(N["total"][k] for k in kids.get(i, []))
    r2 = run_pystrobe(pystrobe, "replay", "--diff-flamegraph", baseline, "-o",
                      tmp_path / "again.html", rec)
    assert r2.returncode == 0, r2.stderr.decode()
    assert (tmp_path / "again.html").read_bytes() == out.read_bytes()


def test_page_renders_with_legend_and_marks(pystrobe, spawn, baseline, tmp_path):
    """In headless Chromium: no script error, the legend lists every class,
    the text view says which path is only where, and a hostile function
    name stays text."""
    p = spawn(TARGET.argv + [str(WORKLOAD), "new", "hostile"], stdout=subprocess.PIPE)
    assert wait_ready(p) == "ready"
    out = tmp_path / "diff.html"
    r = run_pystrobe(pystrobe, "attach", "-d", "1.5", "--diff-flamegraph", baseline, "-o", out,
                     p.pid)
    assert r.returncode == 0, r.stderr.decode()
    raw = out.read_text(encoding="utf-8")
    assert "<img src=x" not in raw  # only inside the escaped JSON
    dom, err = chromium(out, tmp_path, "--dump-dom")
    assert 'data-rendered="1"' in dom, err[-3000:]
    assert not re.search(r"cannot show the profile: [^']", dom), dom[-3000:]
    text = html.unescape(re.sub(r"<[^>]+>", " ", dom))
    for label in ("only in this profile", "only in the baseline", "self +100% or more",
                  "no significant change in self samples", "self \u221275% or less"):
        assert label in text, label
    frames = html.unescape(re.search(r'<pre id="pystrobe-frames">(.*?)</pre>', dom, re.S).group(1))
    lines = frames.splitlines()
    hostile = "</script><img src=x onerror=alert(1)>\u2603"
    assert any(l.strip().startswith("old_only") and "only in the baseline" in l for l in lines)
    assert any(l.strip().startswith(hostile) and "only in this profile" in l for l in lines), frames
    assert "<img" not in re.sub(r'<pre id="pystrobe-frames">.*?</pre>', "", dom, flags=re.S) \
        .split('id="pystrobe-data"')[0]


def test_bad_baseline_refused_before_the_target_starts(pystrobe, baseline, tmp_path):
    """A missing, foreign or incompatible baseline: one line, and run never
    starts its command (which would leave a marker file)."""
    marker = tmp_path / "started"
    cmd = ["--", "/bin/sh", "-c", f"touch {marker}; sleep 5"]
    junk = tmp_path / "junk.pysr"
    junk.write_text("not a recording\n")
    cases = [
        ((tmp_path / "missing.pysr",), 8, rb"cannot read baseline .*missing\.pysr: No such file"),
        ((junk,), 8, rb"baseline .*junk\.pysr: .*no comparison possible"),
        ((baseline, "--mode", "cpu"), 2,
         rb"recorded in wall mode, this profile is in cpu mode: no comparison possible"),
        ((baseline, "--native"), 2, rb"recorded without --native .*no comparison possible"),
    ]
    for (base, *extra), status, message in cases:
        r = run_pystrobe(pystrobe, "run", "--diff-flamegraph", base, *extra, "-o",
                         tmp_path / "o.html", *cmd)
        assert r.returncode == status, r.stderr.decode()
        assert re.search(message, r.stderr), r.stderr.decode()
        assert len(r.stderr.decode().strip().splitlines()) == 1, r.stderr.decode()
        assert not marker.exists()
        assert not (tmp_path / "o.html").exists()
