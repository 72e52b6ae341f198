"""Fixtures for the integration tests: the pystrobe binary, the interpreters
to run targets on, and target processes that are always killed at teardown.
"""
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from targets import ROOT, supported_targets

HERE = Path(__file__).resolve().parent
STACK_TARGET = HERE / "stack_target.py"
REPORT_TIMEOUT = 30.0      # seconds for a stack target to write its report
READY_TIMEOUT = 30.0       # seconds for a simple target to say it is ready
PYSTROBE_TIMEOUT = 120.0   # seconds for one pystrobe run

# A Python target that is fully initialised once it has printed "ready".
SLEEPER_CODE = "import time; print('ready', flush=True); time.sleep(600)"


def pystrobe_path():
    return Path(os.environ.get("PYSTROBE_BUILD", ROOT / "build")) / "pystrobe"


@pytest.fixture(scope="session")
def pystrobe():
    """The binary under test. Missing is a failure, not a skip: CI builds first."""
    path = pystrobe_path()
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"pystrobe binary not found at {path}: build it first "
                    f"(make build/pystrobe) or set PYSTROBE_BUILD", pytrace=False)
    return path


def run_pystrobe(binary, *args, env=None, prefix=(), timeout=PYSTROBE_TIMEOUT):
    """Run pystrobe; return the CompletedProcess with stdout/stderr as bytes."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([*prefix, str(binary), *map(str, args)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=full_env, timeout=timeout)


@pytest.fixture(scope="module", params=supported_targets(), ids=repr)
def target(request):
    """Each interpreter pystrobe supports."""
    return request.param


def _kill(proc):
    if proc.poll() is None:
        proc.kill()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def wait_ready(proc, timeout=READY_TIMEOUT):
    """Read the target's first stdout line ("ready" or a value), or fail."""
    deadline = time.monotonic() + timeout
    buf = b""
    fd = proc.stdout.fileno()
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            pytest.fail(f"target {proc.args} not ready after {timeout} s")
        r, _, _ = select.select([fd], [], [], left)
        if r:
            chunk = os.read(fd, 4096)
            if not chunk:
                pytest.fail(f"target {proc.args} exited with {proc.wait()} "
                            f"before it was ready")
            buf += chunk
    return buf.split(b"\n", 1)[0].decode()


@pytest.fixture
def spawn():
    """spawn(argv, **popen_kw) -> Popen; every process is killed at teardown."""
    procs = []

    def start(argv, **kw):
        p = subprocess.Popen(argv, **kw)
        procs.append(p)
        return p

    yield start
    for p in procs:
        _kill(p)


@pytest.fixture
def python_sleeper(spawn):
    """python_sleeper(target, code=SLEEPER_CODE) -> (Popen, first stdout line):
    a Python process on target that has printed its first line."""
    def start(target, code=SLEEPER_CODE):
        p = spawn(target.argv + ["-c", code], stdout=subprocess.PIPE)
        return p, wait_ready(p)
    return start


class StackProcess:
    """A running stack_target.py and the report it wrote about itself."""

    def __init__(self, target, proc, report):
        self.target = target
        self.proc = proc
        self.pid = proc.pid
        self.report = report


def _tid_alive(pid, tid):
    return os.path.exists(f"/proc/{pid}/task/{tid}")


def start_stack_target(target, own_cwd=False):
    """Start stack_target.py on target and wait for its report and for its
    reporter thread to be gone. Returns (StackProcess, cleanup); the caller
    must call cleanup(), which kills the process and removes staged files
    (sp.dir, the host's path of the directory they are in; with own_cwd, a
    target on the host runs in it)."""
    host_dir, target_dir = target.stage_dir()
    script = target.stage(STACK_TARGET)
    report_host = host_dir / "report.json"
    log_host = host_dir / "target.log"
    log = open(log_host, "wb")
    # chroot execs the interpreter, so proc.pid is the Python process.
    proc = target.popen(["-B", script, f"{target_dir}/report.json"],
                        stdout=log, stderr=subprocess.STDOUT,
                        cwd=host_dir if own_cwd and target.chroot is None else None)
    log.close()

    def cleanup():
        _kill(proc)
        shutil.rmtree(host_dir, ignore_errors=True)

    try:
        deadline = time.monotonic() + REPORT_TIMEOUT
        while not report_host.exists():
            if proc.poll() is not None:
                pytest.fail(f"{target}: stack target exited with {proc.returncode}:\n"
                            + log_host.read_text(errors="replace"))
            if time.monotonic() > deadline:
                pytest.fail(f"{target}: no report after {REPORT_TIMEOUT} s:\n"
                            + log_host.read_text(errors="replace"))
            time.sleep(0.05)
        report = json.loads(report_host.read_text(encoding="utf-8"))
        if not report.get("ok"):
            pytest.fail(f"{target}: stack target could not reach its stacks: "
                        f"{report.get('problems')}")
        assert report["pid"] == proc.pid, \
            f"{target}: report pid {report['pid']} is not the started pid {proc.pid}"
        tid = report["reporter_native_id"]
        while _tid_alive(proc.pid, tid):
            if time.monotonic() > deadline:
                pytest.fail(f"{target}: reporter thread {tid} still alive")
            time.sleep(0.02)
    except BaseException:
        cleanup()
        raise
    sp = StackProcess(target, proc, report)
    sp.dir = host_dir
    return sp, cleanup


@pytest.fixture(scope="module")
def stack(target):
    """stack_target.py running on each supported interpreter, at its known
    stacks, shared by the tests of a module; killed at teardown."""
    sp, cleanup = start_stack_target(target)
    try:
        yield sp
    finally:
        cleanup()


# --- processes in sessions of their own ----------------------------------------
# pystrobe `run` starts children (a shell, an interpreter, their children); a
# test starts pystrobe in a new session so that a signal goes only where the
# test sends it, and at teardown every process still in that session is
# killed by its pid.

def _stat_fields(pid):
    """(state, ppid, pgrp, session) of pid, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    return rest[0], int(rest[1]), int(rest[2]), int(rest[3])


def session_members(sid):
    """Pids of the live (not zombie) processes in session sid."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        st = _stat_fields(int(name))
        if st and st[3] == sid and st[0] not in ("Z", "X"):
            pids.append(int(name))
    return pids


def wait_session_empty(sid, timeout):
    """Wait until session sid has no live process; return those left."""
    deadline = time.monotonic() + timeout
    while True:
        left = session_members(sid)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


class SessionProcesses:
    """Starts processes each in a new session; close() kills what is left of
    every session, member by member, and reaps the leaders."""

    def __init__(self):
        self.procs = []

    def start(self, argv, **kw):
        p = subprocess.Popen(argv, start_new_session=True, **kw)
        self.procs.append(p)
        return p

    def close(self):
        for p in self.procs:
            for pid in session_members(p.pid):
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
            _kill(p)
        self.procs = []


# Tests whose cost is a real consumer (a browser, go, npm, tmux) run once, in
# the normal pass, not again in the sanitizer pass (PYSTROBE_SANITIZED): that
# keeps `make test` within CI's time. The C code they drive is the same in
# both builds; the sanitizer pass keeps every test of pystrobe's own output.
CONSUMER_FILES = {"test_live.py", "test_speedscope.py", "test_pprof.py", "test_heatmap.py"}
CONSUMER_TESTS = ("test_gecko_", "test_svg_renders", "test_svg_escapes", "test_chrometrace_",
                  "test_flame_view_and_dark_theme", "test_panel_short_paths",
                  "test_inverted_view")


def consumer_only_once():
    """Called by each helper that starts a real consumer: skips the test in
    the sanitizer pass, for tests the lists above do not name."""
    if os.environ.get("PYSTROBE_SANITIZED"):
        pytest.skip("a real consumer's test: run once, in the normal pass")


# The Python module is compiled without the sanitizers in both passes (a
# sanitized extension cannot load into an ordinary interpreter: Makefile), so
# its tests run the same code in both; they run once, in the normal pass.
MODULE_FILES = ("test_module.py", "test_module_")


def pytest_collection_modifyitems(config, items):
    if not os.environ.get("PYSTROBE_SANITIZED"):
        return
    skip = pytest.mark.skip(reason="a real consumer's test: run once, in the normal pass")
    unsanitized = pytest.mark.skip(reason="the module is not sanitized: run once, in the "
                                   "normal pass")
    for item in items:
        name = Path(str(item.fspath)).name
        if name in CONSUMER_FILES or item.name.startswith(CONSUMER_TESTS):
            item.add_marker(skip)
        elif name.startswith(MODULE_FILES):
            item.add_marker(unsanitized)
