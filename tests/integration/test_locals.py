"""dump --locals (issue 30): each Python frame's local variables, on every
supported interpreter, compared with what the target itself says its
locals are (repr(), or type and id() for other objects)."""
import json
import subprocess

import pytest

from conftest import run_pystrobe, wait_ready
from targets import ROOT

WORKLOAD = ROOT / "tests" / "integration" / "workloads" / "locals_target.py"


@pytest.fixture
def locals_target(target, spawn):
    p = spawn(target.argv + ["-B", target.stage(WORKLOAD)], stdout=subprocess.PIPE)
    return p, json.loads(wait_ready(p))


def frame(dump, qualname):
    (thread,) = dump["interpreters"][0]["threads"]
    return next(f for f in thread["frames"] if f["qualname"] == qualname)


def check_frame(fr, want, cells, version):
    got = {lv["name"]: lv["repr"] for lv in fr["locals"]}
    for name, rep in want.items():
        if name in cells and version < (3, 11):
            # 3.8-3.10 keep a cell variable in the frame's cells, named by
            # co_cellvars, which --locals does not show.
            assert name not in got, (name, got)
            continue
        assert name in got, (name, sorted(got))
        if rep is None:
            assert got[name].startswith("<int of "), got[name]
        else:
            assert got[name] == rep, name
    # The target's own bookkeeping, bound after it looked.
    assert set(got) - {"ns", "cells"} <= set(want), set(got) - set(want)


def test_dump_locals_json(pystrobe, target, locals_target):
    p, want = locals_target
    res = run_pystrobe(pystrobe, "dump", "--locals", "--blocking", "--json", p.pid)
    assert res.returncode == 0, res.stderr.decode()
    dump = json.loads(res.stdout)
    version = tuple(want["version"])
    check_frame(frame(dump, "inner"), want["inner"], set(want["cells"]), version)
    check_frame(frame(dump, "outer"), want["outer"], set(), version)
    # A frame of C code or the module has none of those names.
    assert all("locals" in f for f in dump["interpreters"][0]["threads"][0]["frames"])


def test_dump_locals_text(pystrobe, target, locals_target):
    p, want = locals_target
    res = run_pystrobe(pystrobe, "dump", "--locals", "--no-source", p.pid)
    assert res.returncode == 0, res.stderr.decode()
    out = res.stdout.decode()
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.rstrip().endswith("in inner") or
              " in inner  [" in line)
    body = []
    for line in lines[at + 1:]:
        if not line.startswith("        "):
            break
        body.append(line.strip())
    # Control characters escaped: one line per local.
    assert "s = " + want["inner"]["s"] in body, body
    assert "a = 1" in body and "b = 'two'" in body, body
    # Without --locals, none.
    res = run_pystrobe(pystrobe, "dump", "--no-source", p.pid)
    assert "a = 1" not in res.stdout.decode()


def test_dump_locals_refusals(pystrobe, spawn):
    res = run_pystrobe(pystrobe, "dump", "--locals", "--async-aware", "1")
    assert res.returncode == 2
    assert b"--locals cannot be combined with --async-aware" in res.stderr
