"""The pstats and collapsed writers on profiles built from known stacks
(tests/tools/render_profile), checked with the host's own pstats module."""
import os
import pstats
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
    out = tmp_path / "out"
    r = subprocess.run([str(RENDER), fmt, str(out)], input=stacks.encode(),
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
