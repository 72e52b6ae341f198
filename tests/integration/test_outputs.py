"""The pstats and collapsed writers on profiles built from known stacks
(tests/tools/render_profile), checked with the host's own pstats module."""
import hashlib
import os
import pstats
import random
import re
import subprocess
from pathlib import Path

import pytest

from targets import ROOT

BUILD = Path(os.environ.get("PYSTROBE_BUILD", ROOT / "build"))
RENDER = BUILD / "tests" / "render_profile"

STACKS = """\
# interval_ns 1000000
tid:1;app.py:main:10;app.py:rec:20;app.py:rec:21;app.py:leaf:30 5
tid:1;app.py:main:10;app.py:rec:20 3
tid:2;app.py:main:10;app.py:rec:20 2
tid:2;~:<native>:-;app.py:odd name:5 1
"""


def render(tmp_path, fmt, stacks=STACKS):
    """Render stacks with render_profile's format flag fmt ("": a flame graph)."""
    out = tmp_path / "out"
    r = subprocess.run([str(RENDER), *([fmt] if fmt else []), str(out)], input=stacks.encode(),
                       capture_output=True)
    assert r.returncode == 0, r.stderr.decode()
    return out


def by_name(stats):
    return {k[2]: v for k, v in stats.stats.items()}


def test_pstats_counts(tmp_path):
    st = by_name(pstats.Stats(str(render(tmp_path, "--pstats"))))
    # (direct samples, cumulative samples, tottime, cumtime, callers)
    assert st["leaf"][:2] == (5, 5)
    assert st["rec"][:2] == (5, 10)          # recursion counts once per sample
    assert st["main"][:2] == (0, 10)
    assert st["odd name"][:2] == (1, 1)
    assert st["<native>"][:2] == (0, 1)
    assert st["rec"][2] == pytest.approx(0.005) and st["rec"][3] == pytest.approx(0.010)


def test_pstats_callers(tmp_path):
    stats = pstats.Stats(str(render(tmp_path, "--pstats")))
    callers = {k[2]: {c[2]: n for c, n in v[4].items()} for k, v in stats.stats.items()}
    assert callers["leaf"] == {"rec": 5}
    assert callers["rec"] == {"main": 10, "rec": 5}
    assert callers["main"] == {}
    stats.sort_stats("cumulative").print_stats()   # the host's pstats can print it


def test_collapsed_with_tid(tmp_path):
    lines = sorted(render(tmp_path, "--collapsed").read_text().splitlines())
    assert lines == sorted([
        "tid:1;app.py:main:10;app.py:rec:20;app.py:rec:21;app.py:leaf:30 5",
        "tid:1;app.py:main:10;app.py:rec:20 3",
        "tid:2;app.py:main:10;app.py:rec:20 2",
        "tid:2;<native>;app.py:odd name:5 1",
    ])


def test_collapsed_without_tid_merges_threads(tmp_path):
    lines = sorted(render(tmp_path, "--collapsed-no-tid").read_text().splitlines())
    assert lines == sorted([
        "app.py:main:10;app.py:rec:20;app.py:rec:21;app.py:leaf:30 5",
        "app.py:main:10;app.py:rec:20 5",
        "<native>;app.py:odd name:5 1",
    ])


def many_stacks(seed=7, count=20000):
    """A fixed stream of random stacks over a small vocabulary: four threads
    (one id past 2**63), markers, unknown lines, most stacks distinct."""
    rnd = random.Random(seed)
    files = [f"pkg/m{i}.py" for i in range(12)]
    funcs = [f"f{i}" for i in range(60)] + ["C.meth", "<lambda>", "g<x>"]
    lines = ["# pid 4242", "# python 0x030c01f0", "# mode wall", "# interval_ns 100000",
             "# duration_ns 30000000000"]
    for _ in range(count):
        tid = rnd.choice([11, 12, 13, 2**63 + 5])
        frames = []
        for _ in range(rnd.randint(0, 18)):
            r = rnd.random()
            if r < 0.05:
                frames.append("~:<native>:-")
            elif r < 0.07:
                frames.append("~:<GC>:-")
            else:
                frames.append(f"{rnd.choice(files)}:{rnd.choice(funcs)}:"
                              f"{rnd.choice(['-', '1', '7', '30'])}")
        lines.append(";".join([f"tid:{tid}", *frames]) + f" {rnd.randint(1, 5)}")
    return "\n".join(lines) + "\n"


# SHA-256 of each output of many_stacks(), as written by the profile whose
# nodes each held a whole frame (before frames were interned; the flame
# graph's data only, not its page): the layout of the trie is not the
# outputs' business.
MANY_STACKS_SHA256 = {
    "--collapsed": "3f980dde95279ffe3e3cccc0d6691f5aea1dd8f10f9d32e60e8e1ce726469deb",
    "--collapsed-no-tid": "292bb97cd6e6bed6a4111b745c3aa7527fecfffd73827a84717758d8cffaf0e5",
    "--flamegraph": "e7ade9cd330287d15e61625fc5ee39cba18ea3f5ca1d3d7172debdd06e384534",
    "--pstats": "d4a0854f1d7b8a853f3da2bd03d576afed89bb3f986d5ea3ab8456ae62ae808c",
}


@pytest.mark.parametrize("fmt", sorted(MANY_STACKS_SHA256))
def test_outputs_are_unchanged_on_many_stacks(tmp_path, fmt):
    out = render(tmp_path, "" if fmt == "--flamegraph" else fmt, many_stacks())
    data = out.read_bytes()
    if fmt == "--flamegraph":
        m = re.search(rb'<script type="application/json" id="pystrobe-data">(.*?)</script>',
                      data, re.S)
        assert m, "no data element in the page"
        data = m.group(1)
    assert hashlib.sha256(data).hexdigest() == MANY_STACKS_SHA256[fmt]
