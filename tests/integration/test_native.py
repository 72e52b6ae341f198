"""--native (issue 30): native (C) frames interleaved with the Python
frames, as py-spy shows them, on real targets: a Python function called
back from libc's qsort through ctypes (workloads/native_target.py)."""
import json
import os
import subprocess

import pytest

from conftest import run_pystrobe, wait_ready
from targets import ROOT, all_targets
from test_core import gcore

WORKLOAD = ROOT / "tests" / "integration" / "workloads" / "native_target.py"
SANITIZED = bool(os.environ.get("PYSTROBE_SANITIZED"))
# 3.7 merges as 3.8 does: not again under the sanitizers.
NATIVE_TARGETS = [t for t in all_targets()
                  if t.name in ("pyenv-3.8.18", "pyenv-3.11.7", "pyenv-3.12.1",
                                "debian-3.11-static", "sid-3.14", "sid-3.15")
                  or (t.name == "pyenv-3.7.16" and not SANITIZED)]


@pytest.fixture(params=NATIVE_TARGETS, ids=repr)
def native_target(request, spawn):
    t = request.param
    p = spawn(t.argv + ["-B", t.stage(WORKLOAD)], stdout=subprocess.PIPE)
    wait_ready(p)
    return p


def main_frames(dump):
    threads = dump["interpreters"][0]["threads"]
    (main,) = [t for t in threads if t["status"]["main_thread"]]
    assert main["error"] is None and "native_error" not in main, main
    return main["frames"]  # outermost first


def test_dump_native_interleaves(pystrobe, native_target):
    res = run_pystrobe(pystrobe, "dump", "--native", "--json", native_target.pid)
    assert res.returncode == 0, res.stderr.decode()
    frames = main_frames(json.loads(res.stdout))
    names = [f["qualname"] for f in frames]
    py = [f["qualname"] for f in frames if not f.get("native")]
    # The Python frames, all of them, in order.
    assert py[-3:] == ["<module>", "outer", "compare"], names
    at = {n: names.index(n) for n in ("outer", "compare")}
    between = [f for f in frames[at["outer"] + 1:at["compare"]]]
    # Between the caller and the callback: libc's sort, through libffi.
    assert all(f.get("native") for f in between), names
    assert any(f["qualname"].startswith(("qsort", "msort")) and "libc" in f["filename"]
               for f in between), names
    # (3.7's _ctypes carries its own copy of libffi: named by symbol only.)
    assert any("ffi" in f["filename"] or f["qualname"].startswith("ffi_call")
               for f in between), names
    # The interpreter's evaluation loop is replaced, not shown.
    assert not any("_PyEval_EvalFrame" in n for n in names), names
    # Below <module>: the C code that started the process (libc's).
    assert any(f.get("native") and "libc" in f["filename"] for f in frames[:names.index("<module>")])


def test_dump_native_text(pystrobe, native_target):
    res = run_pystrobe(pystrobe, "dump", "--native", "--no-source", native_target.pid)
    assert res.returncode == 0, res.stderr.decode()
    lines = res.stdout.decode().splitlines()
    outer = next(i for i, l in enumerate(lines) if l.endswith("in outer") or " in outer  [" in l)
    compare = next(i for i, l in enumerate(lines) if " in compare" in l)
    assert outer < compare
    assert any(l.strip().startswith("Native qsort") or l.strip().startswith("Native msort")
               for l in lines[outer + 1:compare]), lines


def test_dump_native_refusals(pystrobe):
    for extra, msg in ((["--async-aware"], b"--native cannot be combined with --async-aware"),):
        res = run_pystrobe(pystrobe, "dump", "--native", *extra, "1")
        assert res.returncode == 2, res.stderr
        assert msg in res.stderr


@pytest.fixture(params=[t for t in NATIVE_TARGETS
                        if t.name in ("pyenv-3.8.18", "pyenv-3.12.1", "sid-3.15")], ids=repr)
def native_target_few(request, spawn):
    t = request.param
    p = spawn(t.argv + ["-B", t.stage(WORKLOAD)], stdout=subprocess.PIPE)
    wait_ready(p)
    return p


def test_dump_native_locals(pystrobe, native_target_few):
    """--native --locals: each Python frame of the merged stack has the
    locals it has without --native; native frames have none."""
    pid = native_target_few.pid
    res = run_pystrobe(pystrobe, "dump", "--native", "--locals", "--json", pid)
    assert res.returncode == 0, res.stderr.decode()
    merged = main_frames(json.loads(res.stdout))
    res = run_pystrobe(pystrobe, "dump", "--locals", "--json", pid)
    assert res.returncode == 0, res.stderr.decode()
    plain = [f for f in main_frames(json.loads(res.stdout)) if f["filename"] != "~"]
    assert any(f.get("native") for f in merged)
    assert all(f["locals"] == [] for f in merged if f.get("native"))
    python = [f for f in merged if not f.get("native")]
    assert [(f["qualname"], f["locals"]) for f in python] == \
        [(f["qualname"], f["locals"]) for f in plain]
    compare = next(f for f in python if f["qualname"] == "compare")
    assert [v["name"] for v in compare["locals"]] == ["a", "b"], compare
    res = run_pystrobe(pystrobe, "dump", "--native", "--locals", "--no-source", pid)
    assert res.returncode == 0, res.stderr.decode()
    lines = res.stdout.decode().splitlines()
    at = next(i for i, l in enumerate(lines) if " in compare" in l)
    assert lines[at + 1].strip().startswith("a = "), lines[at:at + 3]


def test_dump_native_other_tracer(pystrobe, native_target):
    """A thread another tracer holds cannot be stopped: a clear error."""
    gdb = subprocess.Popen(["python3", "-c", "import ctypes,sys,time;"
                            "libc=ctypes.CDLL(None);"
                            f"r=libc.ptrace(16,{native_target.pid},0,0);"
                            "print(r,flush=True);time.sleep(60)"],
                           stdout=subprocess.PIPE)
    try:
        assert gdb.stdout.readline().strip() == b"0"
        res = run_pystrobe(pystrobe, "dump", "--native", native_target.pid)
        assert res.returncode != 0
        assert b"--native" in res.stderr, res.stderr
    finally:
        gdb.kill()
        gdb.wait()


def test_attach_native_collapsed(pystrobe, native_target, tmp_path):
    """attach --native: the profile's stacks carry the native frames in
    the same order (collapsed: root first)."""
    out = tmp_path / "n.txt"
    res = run_pystrobe(pystrobe, "attach", "--native", "-d", "1", "--collapsed", "-o", out,
                       native_target.pid)
    assert res.returncode == 0, res.stderr.decode()
    stacks = [line.rsplit(" ", 1)[0].split(";") for line in out.read_text().splitlines()]
    main = [s for s in stacks if any(f.endswith(":compare:17") for f in s)]
    assert main, stacks
    for s in main:
        names = [f.split(":")[-2] if ":" in f and f.count(":") >= 2 else f for f in s]
        o = next(i for i, f in enumerate(s) if ":outer:" in f)
        c = next(i for i, f in enumerate(s) if ":compare:" in f)
        assert o < c, s
        assert any(n.startswith(("qsort", "msort")) for n in names[o + 1:c]), s
        assert "<native>" not in s, s


def test_run_native_refusals(pystrobe, tmp_path):
    marker = tmp_path / "started"
    res = run_pystrobe(pystrobe, "run", "--native", "--mode", "cpu", "--", "touch", marker)
    assert res.returncode == 2 and b"--native" in res.stderr, res.stderr
    assert not marker.exists()


# The sanitizers see the core's unwinding once (3.12).
CORE_NATIVE_TARGETS = [t for t in NATIVE_TARGETS
                       if t.name == "pyenv-3.12.1" or (t.name == "sid-3.15" and not SANITIZED)]


def native_view(frames):
    """What a dump --native says of each frame: Python frames by name and
    line, native ones by symbol and file name (a live process names a
    library by its mapping, a core by the dynamic linker's path to it)."""
    return [(f["qualname"], f["lineno"], f["filename"].rsplit("/", 1)[-1]) if f.get("native")
            else (f["qualname"], f["lineno"], f["filename"]) for f in frames]


@pytest.mark.parametrize("target", CORE_NATIVE_TARGETS, ids=repr)
def test_dump_core_native_equal_live(pystrobe, spawn, target, tmp_path):
    """dump --core FILE --native: a gcore of the target stopped in a
    Python callback of libc's qsort has the live dump's native and Python
    frames, unwound from the core's registers and stack."""
    p = spawn(target.argv + ["-B", target.stage(WORKLOAD)], stdout=subprocess.PIPE)
    wait_ready(p)
    live = run_pystrobe(pystrobe, "dump", "--native", "--json", p.pid)
    assert live.returncode == 0, live.stderr.decode()
    core = gcore(p.pid, tmp_path / "core")
    try:
        args = ["--core", core] + (["--root", target.chroot] if target.chroot else [])
        res = run_pystrobe(pystrobe, "dump", "--native", "--json", *args)
    finally:
        core.unlink()
    assert res.returncode == 0, res.stderr.decode()
    frames = main_frames(json.loads(res.stdout))
    assert native_view(frames) == native_view(main_frames(json.loads(live.stdout)))
    names = [f["qualname"] for f in frames]
    between = frames[names.index("outer") + 1:names.index("compare")]
    assert any(f.get("native") and f["qualname"].startswith(("qsort", "msort"))
               for f in between), names
