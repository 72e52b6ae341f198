"""The profile's memory bound (`--max-memory`): on a program whose stacks are
nearly all distinct (workloads/random_chains.py), a tiny bound is reached
within the first samples; every later sample must still be counted, new
stacks under a `<folded at memory limit>` frame, and the summary must say so.
"""
import json
import re
import subprocess

import pytest

from conftest import HERE, run_pystrobe, wait_ready
from targets import supported_targets

WORKLOAD = HERE / "workloads" / "random_chains.py"
SYSTEM_PYTHON = "/usr/bin/python3"
MARKER = "<folded at memory limit>"
BOUND = "64K"   # far below what 2 s of these stacks take (megabytes)
# One target without and one with the frame cache (3.15), where present.
TARGETS = [t for t in supported_targets() if t.name in ("pyenv-3.12.1", "sid-3.15")]

FOLDED = re.compile(r"^Folded samples: (\d+) of (\d+) \(([0-9.]+)%\): the profile reached "
                    r"--max-memory " + BOUND + r"; .*" + re.escape(MARKER) + r"$", re.M)
CAPTURED = re.compile(r"^Captured (\d+) samples in", re.M)
FAILED = re.compile(r"^Failed samples: (\d+) ", re.M)
COLLAPSED_LINE = re.compile(r"^tid:\d+(?: \([^;]*\))?(;[^;]+)+ (\d+)$")
FRAME = re.compile(r"^(.+):([^:]+):(\d+)$")


@pytest.fixture(params=TARGETS, ids=repr)
def chains(request, spawn):
    """random_chains.py running on the target, ready."""
    t = request.param
    p = spawn(t.argv + ["-B", t.stage(WORKLOAD), "600"], stdout=subprocess.PIPE)
    assert wait_ready(p) == "ready"
    return p


def record(pystrobe, pid, *args):
    """pystrobe attach with a tiny bound: (stderr, folded, thread stacks counted)."""
    r = run_pystrobe(pystrobe, "attach", "--max-memory", BOUND, "-r", "2000", "-d", "2",
                     *args, pid)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 0, f"pystrobe exited {r.returncode}:\n{err}"
    m = FOLDED.search(err)
    assert m, f"no line on folded samples in the summary:\n{err}"
    folded, counted = int(m.group(1)), int(m.group(2))
    assert 0 < folded <= counted, err
    assert abs(float(m.group(3)) - 100.0 * folded / counted) < 0.01, err
    kept = int(CAPTURED.search(err).group(1)) - int(FAILED.search(err).group(1))
    # One thread: each sample read adds its one stack (none while it has no
    # frame), folded or not.
    assert 0 < counted <= kept, err
    return err, folded, counted


def test_collapsed_counts_every_sample(pystrobe, chains, tmp_path):
    out = tmp_path / "out.txt"
    err, folded, counted = record(pystrobe, chains.pid, "--collapsed", "-o", out)
    total = in_markers = 0
    for line in out.read_text(encoding="utf-8").splitlines():
        m = COLLAPSED_LINE.match(line)
        assert m, f"bad collapsed line {line!r}"
        frames = line.rsplit(" ", 1)[0].split(";")[1:]
        for i, f in enumerate(frames):
            if f == MARKER:
                assert i == len(frames) - 1, f"the marker is not a leaf: {line!r}"
            else:
                assert FRAME.match(f), f"frame {f!r} is not FILE:QUALNAME:LINE in {line!r}"
        total += int(m.group(2))
        if frames[-1] == MARKER:
            in_markers += int(m.group(2))
    assert total == counted, err
    assert in_markers == folded, err


PSTATS_DIRECT = r"""
import io, json, pstats, sys
s = pstats.Stats(sys.argv[1], stream=io.StringIO())
s.sort_stats("tottime").print_stats()
s.print_callers()
json.dump([[list(k), v[0]] for k, v in s.stats.items()], sys.stdout)
"""


def test_pstats_counts_every_sample(pystrobe, chains, tmp_path):
    out = tmp_path / "out.pstats"
    err, folded, counted = record(pystrobe, chains.pid, "-o", out)
    r = subprocess.run([SYSTEM_PYTHON, "-c", PSTATS_DIRECT, str(out)], capture_output=True,
                       timeout=60)
    assert r.returncode == 0, f"pstats.Stats failed:\n{r.stderr.decode(errors='replace')}"
    direct = {tuple(k): v for k, v in json.loads(r.stdout)}
    # Each sample is direct in exactly one function: its leaf's.
    assert sum(direct.values()) == counted, err
    assert direct.get(("~", 0, MARKER)) == folded, err


@pytest.mark.parametrize("size", ["12X", "-1M", "M", "1e30"])
def test_bad_size_is_a_usage_error(pystrobe, size):
    r = run_pystrobe(pystrobe, "attach", "--max-memory", size, "1")
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 2, err
    assert f"bad memory size '{size}'" in err, err
