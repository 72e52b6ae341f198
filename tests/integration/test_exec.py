"""A target that execs another program (os.execv): the pid stays, the program
goes. pystrobe must notice (its reads of the old runtime fail, or the old
address space is gone), follow the new program if it is Python (a new session
on the same pid, samples into the same profile), and otherwise stop sampling
and write what it has, saying so.

exec_into.py SECONDS PROGRAM ARGS spins in python_work() for SECONDS, then
execs PROGRAM; exec_second.py SECONDS spins in second_program_work().
"""
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import SessionProcesses, session_members, wait_ready
from targets import supported_targets
from test_sampling import Work, load_collapsed, strobes  # noqa: F401 (fixture)

TARGETS = [t for t in supported_targets() if t.name in ("pyenv-3.12.1", "sid-3.15")]
WORK_SECONDS = "1.0"    # of Python before the exec
SLEEP = "60"            # the program that is not Python: far longer than STOP_TIMEOUT
STOP_TIMEOUT = 20.0     # seconds for pystrobe to stop after the exec (it takes ~2)
RUN_TIMEOUT = 60.0


@pytest.fixture(scope="module", params=TARGETS, ids=repr)
def work(request):
    w = Work(request.param)
    yield w
    w.close()


def python_of(work):
    """The interpreter's path as the target sees it."""
    return work.target.argv[-1]


def exe_of(pid):
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def names(stacks):
    return {n for s in stacks for n in s.names}


def test_exec_not_python_attach(strobes, work, tmp_path):  # noqa: F811
    """attach: stop soon after the exec, say so, keep the Python samples, exit 0."""
    procs = SessionProcesses()
    try:
        p = procs.start(work.target.argv + [work.path("exec_into.py"), WORK_SECONDS,
                                            "/bin/sleep", SLEEP], stdout=subprocess.PIPE)
        wait_ready(p)
        out = tmp_path / "attach.txt"
        st = strobes(["attach", "--collapsed", "-o", out, p.pid])
        st.check(timeout=STOP_TIMEOUT)
        assert p.poll() is None and exe_of(p.pid).endswith("/sleep"), \
            "the target no longer runs sleep: the test proves nothing"
        assert re.search(rf"process {p.pid} exec'd \S*/sleep: not Python: stopping",
                         st.stderr), st.describe()
        assert "python_work" in names(load_collapsed(out)), st.describe()
    finally:
        procs.close()


def test_exec_not_python_run(strobes, work, tmp_path):  # noqa: F811
    """run: the profile is written soon after the exec; pystrobe then waits
    for the command and exits with its status, as if it had exited."""
    out = tmp_path / "run.txt"
    st = strobes(["run", "--collapsed", "-o", out, *work.python_run_args(),
                  work.path("exec_into.py"), WORK_SECONDS, "/bin/sleep", SLEEP])
    deadline = time.monotonic() + STOP_TIMEOUT
    while not (out.exists() and "waiting for process" in st.stderr):
        assert st.proc.poll() is None, st.describe()
        assert time.monotonic() < deadline, \
            f"no profile {STOP_TIMEOUT} s after the exec\n{st.describe()}"
        time.sleep(0.1)
    assert "not Python: stopping" in st.stderr, st.describe()
    assert "python_work" in names(load_collapsed(out)), st.describe()
    sleeps = [m for m in session_members(st.pid) if (exe_of(m) or "").endswith("/sleep")]
    assert len(sleeps) == 1, session_members(st.pid)
    os.kill(sleeps[0], signal.SIGTERM)
    st.wait(STOP_TIMEOUT)
    assert st.proc.returncode == 128 + signal.SIGTERM, st.describe()


@pytest.mark.parametrize("how", ["run", "attach", "run-same-addresses"])
def test_exec_python_followed(strobes, work, tmp_path, how):  # noqa: F811
    """An exec of Python is followed: both programs' functions are in the profile.
    run-same-addresses: without address randomisation (setarch -R) the new
    program's runtime lies where the old one's did, so no read fails: the
    periodic check of the address space finds the exec."""
    out = tmp_path / f"{how}.txt"
    argv = [work.path("exec_into.py"), WORK_SECONDS, python_of(work),
            work.path("exec_second.py"), "1.5"]
    procs = SessionProcesses()
    try:
        if how == "run":
            st = strobes(["run", "--collapsed", "-o", out, *work.python_run_args(), *argv])
        elif how == "run-same-addresses":
            st = strobes(["run", "--collapsed", "-o", out, "--", "setarch", "-R",
                          *work.target.argv, *argv])
        else:
            p = procs.start(work.target.argv + argv, stdout=subprocess.PIPE)
            wait_ready(p)
            st = strobes(["attach", "--collapsed", "-o", out, p.pid])
        st.check(timeout=RUN_TIMEOUT)
        assert re.search(r"exec'd \S*python\S*: following it \(Python 3\.\d+", st.stderr), \
            st.describe()
        got = names(load_collapsed(out))
        assert {"python_work", "second_program_work"} <= got, f"{sorted(got)}\n{st.describe()}"
    finally:
        procs.close()
