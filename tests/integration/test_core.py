"""`pystrobe dump --core`: stacks from core files of real interpreters.

Each core is of a stack_target.py process at its known, still stacks,
stopped (SIGSTOP) before anything is read: the dump of the live process
and the dump of its core must agree thread by thread and frame by frame.
Cores come from gdb's gcore, whatever the system's core_pattern, and on
one interpreter from the kernel: SIGABRT after RLIMIT_CORE is raised with
prlimit, the core written to the process's working directory. That needs
core_pattern to be a plain file name ("core", the kernel's default); the
test never changes core_pattern (a system-wide setting) and skips the
kernel's case where it is anything else (a pipe to systemd-coredump or
apport). The error cases: not a core, a core of a program that is not
Python, truncated cores, a missing or wrong executable, and versions
pystrobe refuses.
"""
import json
import os
import resource
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import run_pystrobe, start_stack_target, wait_ready
from targets import all_targets, python2_target, supported_targets

FRAME_FIELDS = ["filename", "qualname", "firstlineno", "lasti",
                "lineno", "end_lineno", "col_offset", "end_col_offset"]
EXIT_OK, EXIT_USAGE, EXIT_NOT_PYTHON, EXIT_UNSUPPORTED, EXIT_ERROR = 0, 2, 4, 6, 8
# One interpreter of each frame layout (frame objects, the data stack, the
# debug offsets table); reading stacks itself is tested on every version
# elsewhere: a core only changes where the memory comes from.
CORE_TARGETS = {"pyenv-3.8.18", "pyenv-3.12.1", "sid-3.15"}
GCORE_TIMEOUT = 120


@pytest.fixture(autouse=True)
def _drop_cores(request):
    """Cores are large: a test's own go at its end (pytest keeps tmp_path)."""
    yield
    tmp = request.node.funcargs.get("tmp_path")
    for p in tmp.iterdir() if tmp else ():
        if p.is_file():
            p.unlink()


def core_targets():
    return [t for t in supported_targets() if t.name in CORE_TARGETS]


def start_small(target, own_cwd=False):
    """start_stack_target, its core kept small: one malloc arena (glibc
    reserves 64 MiB per thread's arena, which gcore dumps) and 2 MiB
    thread stacks (glibc sizes them by RLIMIT_STACK)."""
    old_env = os.environ.get("MALLOC_ARENA_MAX")
    old_stack = resource.getrlimit(resource.RLIMIT_STACK)
    os.environ["MALLOC_ARENA_MAX"] = "1"
    resource.setrlimit(resource.RLIMIT_STACK, (2 << 20, old_stack[1]))
    try:
        return start_stack_target(target, own_cwd=own_cwd)
    finally:
        resource.setrlimit(resource.RLIMIT_STACK, old_stack)
        if old_env is None:
            del os.environ["MALLOC_ARENA_MAX"]
        else:
            os.environ["MALLOC_ARENA_MAX"] = old_env


def wait_stopped(pid, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] in ("T", "t"):
                return
        time.sleep(0.01)
    pytest.fail(f"process {pid} did not stop")


def gcore(pid, dest):
    """A core of pid by gdb's gcore at dest (a Path)."""
    res = subprocess.run(["gcore", "-o", str(dest), str(pid)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, timeout=GCORE_TIMEOUT)
    made = Path(f"{dest}.{pid}")
    assert res.returncode == 0 and made.is_file(), \
        f"gcore {pid} failed: {res.stdout.decode(errors='replace')[-2000:]}"
    made.rename(dest)
    return dest


def dump(pystrobe, *args):
    return run_pystrobe(pystrobe, "dump", *args)


def dump_doc(pystrobe, *args):
    res = dump(pystrobe, "--json", *args)
    assert res.returncode == EXIT_OK, \
        f"dump {args} exited {res.returncode}: {res.stderr.decode(errors='replace')}"
    return json.loads(res.stdout.decode("utf-8")), res.stderr.decode("utf-8", errors="replace")


def threads_of(doc):
    assert [i["id"] for i in doc["interpreters"]] == [0]
    return {t["native_thread_id"]: t for t in doc["interpreters"][0]["threads"]}


def assert_same_stacks(live, core, pid):
    """The core's dump says what the live dump said, thread by thread."""
    lt, ct = threads_of(live), threads_of(core)
    assert sorted(ct) == sorted(lt), f"threads: core {sorted(ct)}, live {sorted(lt)}"
    assert core["pid"] == pid and core["python_version"] == live["python_version"]
    assert set(lt) <= set(core["core"]["threads"]), \
        f"Python threads {sorted(lt)} not all among the core's {core['core']['threads']}"
    for tid, t in lt.items():
        c = ct[tid]
        assert not t["error"] and not c["error"], (t["error"], c["error"])
        for k in ("thread_id", "name"):
            assert c[k] == t[k], f"thread {tid}: {k} {c[k]!r} in the core, {t[k]!r} live"
        for k in ("main_thread", "has_exception"):
            assert c["status"][k] == t["status"][k], f"thread {tid}: {k}"
        assert len(c["frames"]) == len(t["frames"]) > 0, f"thread {tid}: frame counts"
        for i, (a, b) in enumerate(zip(t["frames"], c["frames"])):
            for k in FRAME_FIELDS:
                assert a[k] == b[k], f"thread {tid} frame {i} {k}: live {a[k]!r}, core {b[k]!r}"


def assert_matches_report(doc, report):
    """The stacks are the ones the target reported about itself."""
    threads = threads_of(doc)
    for rt in report["threads"]:
        got = [(f["filename"], f["qualname"], f["lineno"])
               for f in threads[rt["native_thread_id"]]["frames"]]
        want = [(f["filename"], f["qualname"], f["lineno"]) for f in rt["frames"]]
        assert got == want, f"thread {rt['tag']}: core {got[-3:]}, report {want[-3:]}"


def kernel_core(sp, dest):
    """The kernel's core of stopped sp (SIGABRT, RLIMIT_CORE raised by
    prlimit), written by core_pattern "core" to its working directory
    (a chroot's target: the root's "/"), moved to dest; None where
    core_pattern does not write a plain file."""
    pattern = Path("/proc/sys/kernel/core_pattern").read_text().strip()
    if pattern.startswith("|") or "/" in pattern or "%" in pattern:
        return None
    resource.prlimit(sp.pid, resource.RLIMIT_CORE,
                     (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    cwd = Path(os.readlink(f"/proc/{sp.pid}/cwd"))  # as the host sees it
    os.kill(sp.pid, signal.SIGABRT)
    os.kill(sp.pid, signal.SIGCONT)
    sp.proc.wait(timeout=60)
    names = [cwd / pattern, cwd / f"{pattern}.{sp.pid}"]
    made = next((p for p in names if p.is_file()), None)
    assert made is not None, f"no core among {names}"
    shutil.move(made, dest)
    return dest


@pytest.fixture(scope="module", params=core_targets(), ids=repr)
def stopped(request, pystrobe, tmp_path_factory):
    """(target, stack process, its live dumps (JSON, text, JSON with
    locals), its core, the options that read it), stopped. On the host the
    core is gdb's gcore; in the sid root the kernel's: gdb 13 loses the
    memory next to the guard pages of sid's thread stacks (a read of
    /proc/PID/mem fails on the whole MiB it asks for), which holds frames."""
    target = request.param
    sp, cleanup = start_small(target)
    core = None
    try:
        os.kill(sp.pid, signal.SIGSTOP)
        wait_stopped(sp.pid)
        live = dump_doc(pystrobe, sp.pid)[0]
        text = dump(pystrobe, sp.pid)
        assert text.returncode == EXIT_OK, text.stderr
        live_locals = dump_doc(pystrobe, "--locals", sp.pid)[0]
        dest = tmp_path_factory.mktemp("core") / "core"
        if target.chroot:
            core = kernel_core(sp, dest)
            if core is None:
                pytest.skip("core_pattern writes no file: no kernel core of a chroot's target")
        else:
            core = gcore(sp.pid, dest)
        args = ["--core", core] + (["--root", target.chroot] if target.chroot else [])
        yield target, sp, (live, text.stdout, live_locals), core, args
    finally:
        cleanup()
        if core is not None:
            core.unlink(missing_ok=True)


def test_core_stacks_equal_live(pystrobe, stopped):
    target, sp, (live, _, _), core, args = stopped
    doc, err = dump_doc(pystrobe, *args)
    assert err == "", f"notes on a complete core: {err}"
    assert doc["core"]["notes"] == []
    assert_same_stacks(live, doc, sp.pid)
    assert_matches_report(doc, sp.report)
    if target.chroot:
        # Its files are named as inside the root: without --root, the
        # executable (holding the runtime) is missing, and the error says so.
        res = dump(pystrobe, "--core", core)
        err = res.stderr.decode()
        assert res.returncode == EXIT_NOT_PYTHON and "--root" in err, err
        assert doc["core"]["signal"] == signal.SIGABRT


def test_core_text_equal_live(pystrobe, stopped):
    """The text dump too, but for its first line; source lines are read
    where the target's files are (--root for a chroot's)."""
    target, sp, (_, live_text, _), core, args = stopped
    res_core = dump(pystrobe, *args)
    assert res_core.returncode == EXIT_OK, res_core.stderr.decode(errors="replace")
    lines_live = live_text.decode().splitlines()
    lines_core = res_core.stdout.decode().splitlines()
    assert lines_core[0].startswith(f"Process {sp.pid} (core {core}, ")
    assert lines_core[1:] == lines_live[1:]
    assert any(line.startswith("      block()") or "Event().wait()" in line
               for line in lines_core), "no source line in the core's dump"


def test_locals_from_core(pystrobe, stopped):
    target, sp, (_, _, live_locals), core, args = stopped
    core_locals = dump_doc(pystrobe, "--locals", *args)[0]
    lt, ct = threads_of(live_locals), threads_of(core_locals)
    for tid in lt:
        got = [f["locals"] for f in ct[tid]["frames"]]
        assert got == [f["locals"] for f in lt[tid]["frames"]], f"thread {tid} locals"
    assert any(f["locals"] for t in ct.values() for f in t["frames"]), "no locals at all"


def check_truncated(pystrobe, core, tmp_path):
    """Cut in half: stacks with a note saying so, or an error that says so
    (gdb writes its notes last: they are lost); cut inside its headers: an
    error."""
    data = core.read_bytes()
    half = tmp_path / "half"
    half.write_bytes(data[: len(data) // 2])
    res = dump(pystrobe, "--json", "--core", half)
    err = res.stderr.decode(errors="replace")
    half.unlink()
    assert "truncated" in err, err
    assert res.returncode in (EXIT_OK, EXIT_ERROR, EXIT_NOT_PYTHON), err
    if res.returncode == EXIT_OK:
        doc = json.loads(res.stdout)
        assert any("truncated" in n for n in doc["core"]["notes"])
    head = tmp_path / "head"
    head.write_bytes(data[:100])
    res = dump(pystrobe, "--core", head)
    err = res.stderr.decode(errors="replace")
    assert res.returncode == EXIT_ERROR and err.startswith("pystrobe: ") and "truncated" in err, err
    return res


def test_truncated_core(pystrobe, stopped, tmp_path):
    check_truncated(pystrobe, stopped[3], tmp_path)


def test_kernel_core_of_shared_libpython(pystrobe, tmp_path):
    """The kernel's core (SIGABRT) of a Python on the host whose runtime
    is in a shared libpython (the sid root's are static)."""
    target = next((t for t in core_targets() if t.name == "pyenv-3.12.1"), None)
    if target is None:
        pytest.skip("pyenv 3.12.1 not in this pass's targets")
    sp, cleanup = start_small(target, own_cwd=True)
    try:
        os.kill(sp.pid, signal.SIGSTOP)
        wait_stopped(sp.pid)
        live = dump_doc(pystrobe, sp.pid)[0]
        core = kernel_core(sp, tmp_path / "core")
        if core is None:
            pytest.skip("core_pattern writes no file here")
        doc, err = dump_doc(pystrobe, "--core", core)
        assert doc["core"]["signal"] == signal.SIGABRT and err == "", err
        assert_same_stacks(live, doc, sp.pid)
        assert_matches_report(doc, sp.report)
    finally:
        cleanup()


def test_not_a_core(pystrobe, tmp_path):
    res = dump(pystrobe, "--core", "/bin/true")
    err = res.stderr.decode()
    assert res.returncode == EXIT_ERROR and "not a core file" in err, err
    text = tmp_path / "text"
    text.write_text("hello\n" * 100)
    res = dump(pystrobe, "--core", text)
    assert res.returncode == EXIT_ERROR and "not an ELF file" in res.stderr.decode()
    res = dump(pystrobe, "--core", tmp_path / "absent")
    assert res.returncode == EXIT_ERROR and "cannot read core" in res.stderr.decode()
    for bad in (["--core", text, "1234"], ["--core", text, "--blocking"],
                ["--executable", "/bin/true", "1234"]):
        assert dump(pystrobe, *bad).returncode == EXIT_USAGE, bad


def test_core_of_a_program_not_python(pystrobe, spawn, tmp_path):
    p = spawn(["sleep", "600"])
    core = gcore(p.pid, tmp_path / "core")
    res = dump(pystrobe, "--core", core)
    err = res.stderr.decode()
    assert res.returncode == EXIT_NOT_PYTHON and "not of a Python process" in err, err
    assert "sleep" in err, err


def static_python():
    return next((t for t in all_targets() if t.name == "debian-3.11-static"), None)


def test_missing_executable(pystrobe, spawn, tmp_path):
    """A static Python whose executable is gone since: the error says to give
    it; given (--executable), the dump works; a wrong one is refused."""
    t = static_python()
    if t is None:
        pytest.skip("no Debian python3.11 on this host")
    exe = tmp_path / "python-gone"
    shutil.copy(t.argv[0], exe)
    p = spawn([str(exe), "-c", "import time; print('ready', flush=True); time.sleep(600)"],
              stdout=subprocess.PIPE)
    wait_ready(p)
    core = gcore(p.pid, tmp_path / "core")
    exe.unlink()
    res = dump(pystrobe, "--core", core)
    err = res.stderr.decode()
    assert res.returncode == EXIT_NOT_PYTHON and "--executable" in err, err
    assert "python-gone" in err, err
    doc, _ = dump_doc(pystrobe, "--core", core, "--executable", t.argv[0])
    main = [th for th in threads_of(doc).values() if th["status"]["main_thread"]]
    assert [f["qualname"] for f in main[0]["frames"]] == ["<module>"]
    res = dump(pystrobe, "--core", core, "--executable", "/bin/true")
    err = res.stderr.decode()
    assert res.returncode == EXIT_NOT_PYTHON and "not the file the process mapped" in err, err
    res = dump(pystrobe, "--core", core, "--executable", tmp_path / "absent")
    err = res.stderr.decode()
    assert res.returncode == EXIT_ERROR and "cannot read the executable" in err, err


def old_targets():
    old = [t for t in all_targets() if t.name in ("pyenv-3.6.15", "pyenv-3.7.16")]
    py2 = python2_target()
    return old + ([py2] if py2 else [])


@pytest.mark.parametrize("old", old_targets(), ids=repr)
def test_old_versions_as_live(pystrobe, python_sleeper, old, tmp_path):
    """2.7, 3.6 and 3.7: the core gets the live process's answer (a refusal
    naming the version and why, status 6; 3.7's stacks)."""
    code = "import sys, time; sys.stdout.write('ready\\n'); sys.stdout.flush(); time.sleep(600)"
    p, _ = python_sleeper(old, code)
    live = dump(pystrobe, p.pid)
    core = gcore(p.pid, tmp_path / "core")
    res = dump(pystrobe, "--core", core)
    err = res.stderr.decode()
    assert res.returncode == live.returncode, (err, live.stderr)
    if live.returncode == EXIT_UNSUPPORTED:
        major, minor = old.version
        assert f"{major}.{minor}" in err and "not supported" in err, err
        assert "no _PyRuntime" in err and "3.7 to 3.15" in err, err
    else:
        assert res.stdout.splitlines()[1:] == live.stdout.splitlines()[1:]
